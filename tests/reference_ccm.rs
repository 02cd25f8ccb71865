//! The bundled reference CCM on a real local cluster with the local simulated cloud
//! (`harness cluster up --cloud local`): node initialisation, routes, load balancers, node
//! lifecycle (also with the cloud failing every call), and leader election between two replicas.
//!
//! Needs the default toolchain installed (`scripts/test` does it); builds `reference-ccm` with cargo.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{TestCluster, assert_torn_down, bring_up, options, wait_for};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use local_cloud::LocalCloud;
use local_cloud::api::{CreateRoute, FaultMode, FaultSpec};
use local_cluster::clouds::local::{self as cloud, LocalSetup, LocalState};
use local_cluster::nodes;
use serde_json::json;

async fn up_with_cloud(name: &str, node_count: u32) -> TestCluster {
    let ccm_binary = tokio::task::spawn_blocking(toolchain::workspace::build_reference_ccm)
        .await
        .unwrap()
        .expect("building reference-ccm");
    let mut options = options(name, toolchain::default_release(), node_count);
    options.cloud = Some(std::sync::Arc::new(LocalSetup::new(ccm_binary)));
    bring_up(options).await
}

fn cloud_of(cluster: &TestCluster) -> LocalCloud {
    cluster.state.cloud_as::<LocalState>().expect("the local cloud").client().unwrap()
}

fn labels(node: &Node) -> std::collections::BTreeMap<String, String> {
    node.metadata.labels.clone().unwrap_or_default()
}

fn condition(node: &Node, type_: &str) -> Option<(String, Option<String>)> {
    let conditions = node.status.as_ref()?.conditions.as_ref()?;
    conditions.iter().find(|c| c.type_ == type_).map(|c| (c.status.clone(), c.reason.clone()))
}

#[tokio::test(flavor = "multi_thread")]
async fn nodes_are_initialised_and_routed_by_the_reference_ccm() {
    let cluster = up_with_cloud("ccm-init", 3).await;
    let client = cluster.client().await.unwrap();
    let nodes_api: Api<Node> = Api::all(client.clone());
    let cloud = cloud_of(&cluster);
    let instances = cloud.list_instances().await.unwrap();

    for node in nodes_api.list(&ListParams::default()).await.unwrap().items {
        let name = node.metadata.name.clone().unwrap();
        let instance = instances.iter().find(|i| i.name == name).expect("an instance per node");
        assert!(!nodes::is_uninitialized(&node), "{name} kept the uninitialized taint");
        assert_eq!(
            node.spec.as_ref().unwrap().provider_id.as_deref(),
            Some(format!("local://{}", instance.id).as_str())
        );
        let labels = labels(&node);
        for (key, value) in [
            ("topology.kubernetes.io/zone", instance.zone.as_str()),
            ("failure-domain.beta.kubernetes.io/zone", instance.zone.as_str()),
            ("topology.kubernetes.io/region", "local"),
            ("failure-domain.beta.kubernetes.io/region", "local"),
            ("node.kubernetes.io/instance-type", "local.standard"),
            ("beta.kubernetes.io/instance-type", "local.standard"),
        ] {
            assert_eq!(labels.get(key).map(String::as_str), Some(value), "{name}: label {key}");
        }
        let addresses: Vec<(String, String)> = node
            .status
            .as_ref()
            .unwrap()
            .addresses
            .iter()
            .flatten()
            .map(|a| (a.type_.clone(), a.address.clone()))
            .collect();
        assert_eq!(addresses[0].0, "InternalIP", "{name}: the provided node IP goes first: {addresses:?}");
        assert!(addresses.iter().any(|(t, a)| t == "Hostname" && *a == name), "{name}: {addresses:?}");
    }

    // A Synced event per node.
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let synced = wait_for("a Synced event for every node", Duration::from_secs(30), || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        let nodes: BTreeSet<String> = list
            .items
            .iter()
            .filter(|e| e.reason.as_deref() == Some("Synced"))
            .filter_map(|e| e.involved_object.name.clone())
            .collect();
        (nodes.len() == 3).then_some(nodes)
    })
    .await;
    assert_eq!(synced, cluster.state.nodes.iter().cloned().collect());

    // A route per pod CIDR, and NetworkUnavailable=False/RouteCreated.
    let expected: BTreeSet<(String, String)> =
        (0..3).map(|i| (nodes::node_name("ccm-init", i), nodes::pod_cidr(i))).collect();
    wait_for("routes for every pod CIDR", Duration::from_secs(30), || async {
        let routes = cloud.routes("list_routes", "ccm-init").await.ok()?;
        let have: BTreeSet<(String, String)> =
            routes.into_iter().map(|r| (r.target_node, r.destination_cidr)).collect();
        (have == expected).then_some(())
    })
    .await;
    wait_for("NetworkUnavailable=False/RouteCreated on every node", Duration::from_secs(30), || async {
        let list = nodes_api.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .all(|n| condition(n, "NetworkUnavailable") == Some(("False".into(), Some("RouteCreated".into()))))
            .then_some(())
    })
    .await;

    // A stale route inside the cluster CIDR is removed.
    let stale = CreateRoute {
        name_hint: "stale".into(),
        target_node: "no-such-node".into(),
        destination_cidr: "127.128.200.0/24".into(),
    };
    cloud.create_route("ccm-init", &stale).await.unwrap();
    wait_for("the stale route to be deleted", Duration::from_secs(30), || async {
        let routes = cloud.routes("list_routes", "ccm-init").await.ok()?;
        (!routes.iter().any(|r| r.target_node == "no-such-node")).then_some(())
    })
    .await;

    // Health and the leader Lease.
    let lease: Api<Lease> = Api::namespaced(client, "kube-system");
    let holder = lease.get("cloud-controller-manager").await.unwrap().spec.unwrap().holder_identity;
    assert!(holder.is_some_and(|h| !h.is_empty()));
    let healthz = http_get(&format!("{}/healthz", cluster.state.ccm_url.as_deref().unwrap())).await;
    assert!(healthz.starts_with("HTTP/1.1 200") && healthz.contains("[+]cloud-node ok"), "{healthz}");

    assert_torn_down(cluster);
}

/// A GET on loopback with tokio alone: the tests need no HTTP client for two health checks.
async fn http_get(url: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.trim_start_matches("http://");
    let (host, path) = rest.split_once('/').unwrap();
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    let request = format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
}

async fn lb_backends(cloud: &LocalCloud, service: &str) -> Option<BTreeSet<String>> {
    let lbs = cloud.list_load_balancers().await.ok()?;
    lbs.into_iter().find(|lb| lb.service.ends_with(service)).map(|lb| lb.backends.into_iter().collect())
}

#[tokio::test(flavor = "multi_thread")]
async fn load_balancers_follow_services_and_the_node_set() {
    let cluster = up_with_cloud("ccm-lb", 2).await;
    let client = cluster.client().await.unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let nodes_api: Api<Node> = Api::all(client.clone());
    let cloud = cloud_of(&cluster);

    let service = |name: &str, class: Option<&str>| -> Service {
        let mut spec = json!({"type": "LoadBalancer", "ports": [{"port": 80, "targetPort": 8080}]});
        if let Some(class) = class {
            spec["loadBalancerClass"] = json!(class);
        }
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
    };
    services.create(&PostParams::default(), &service("web", None)).await.unwrap();
    services.create(&PostParams::default(), &service("elsewhere", Some("example.com/other-lb"))).await.unwrap();

    let ip = wait_for("an ingress IP on web", Duration::from_secs(30), || async {
        let svc = services.get("web").await.ok()?;
        svc.status?.load_balancer?.ingress?.first()?.ip.clone()
    })
    .await;
    assert!(ip.starts_with("127."), "{ip}");
    let web = services.get("web").await.unwrap();
    assert!(
        web.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"service.kubernetes.io/load-balancer-cleanup".to_string())
    );
    let all: BTreeSet<String> = cluster.state.nodes.iter().cloned().collect();
    assert_eq!(lb_backends(&cloud, "default/web").await, Some(all.clone()));

    // A new node (and its instance) joins the backends.
    let new_node = nodes::node_name("ccm-lb", 2);
    cloud.create_instance(&cloud::instance_for(&local_cluster::nodes::machine("ccm-lb", 2))).await.unwrap();
    nodes_api
        .create(&PostParams::default(), &nodes::manifest("ccm-lb", 2, toolchain::default_release().version))
        .await
        .unwrap();
    let mut with_new = all.clone();
    with_new.insert(new_node.clone());
    wait_for("the new node among the LB's backends", Duration::from_secs(30), || async {
        (lb_backends(&cloud, "default/web").await? == with_new).then_some(())
    })
    .await;

    // The exclusion label takes a node out.
    let excluded = cluster.state.nodes[0].clone();
    let patch = json!({"metadata": {"labels": {"node.kubernetes.io/exclude-from-external-load-balancers": "true"}}});
    nodes_api.patch(&excluded, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let mut without = with_new.clone();
    without.remove(&excluded);
    wait_for("the excluded node out of the LB's backends", Duration::from_secs(30), || async {
        (lb_backends(&cloud, "default/web").await? == without).then_some(())
    })
    .await;

    // The service with another class was left alone all along.
    let other = services.get("elsewhere").await.unwrap();
    assert!(other.metadata.finalizers.unwrap_or_default().is_empty());
    assert!(other.status.and_then(|s| s.load_balancer).and_then(|l| l.ingress).unwrap_or_default().is_empty());
    assert_eq!(lb_backends(&cloud, "default/elsewhere").await, None);

    // Deleting the service deletes the LB in the cloud, then the finalizer lets the service go.
    services.delete("web", &DeleteParams::default()).await.unwrap();
    wait_for("the service to be gone (finalizer removed)", Duration::from_secs(30), || async {
        services.get_opt("web").await.ok()?.is_none().then_some(())
    })
    .await;
    assert_eq!(lb_backends(&cloud, "default/web").await, None, "the LB outlived its service");

    assert_torn_down(cluster);
}

/// Makes kwok report the node NotReady, as a node whose kubelet stopped.
async fn stop_kubelet(nodes_api: &Api<Node>, name: &str) {
    let patch = json!({"metadata": {"annotations": {nodes::KUBELET_STOPPED: "stopped"}}});
    nodes_api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

async fn start_kubelet(nodes_api: &Api<Node>, name: &str) {
    let patch = json!({"metadata": {"annotations": {nodes::KUBELET_STOPPED: null}}});
    nodes_api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
}

fn has_shutdown_taint(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == "node.cloudprovider.kubernetes.io/shutdown"))
}

#[tokio::test(flavor = "multi_thread")]
async fn node_lifecycle_follows_the_instances_and_survives_a_failing_cloud() {
    let cluster = up_with_cloud("ccm-life", 3).await;
    let nodes_api: Api<Node> = Api::all(cluster.client().await.unwrap());
    let cloud = cloud_of(&cluster);
    let [shut, gone, guarded] = [0, 1, 2].map(|i| cluster.state.nodes[i].clone());

    // Shut down: NotReady + shut down instance → tainted; started again → Ready, taint removed.
    cloud.shutdown_instance(&shut).await.unwrap();
    stop_kubelet(&nodes_api, &shut).await;
    wait_for("the shutdown taint", Duration::from_secs(90), || async {
        has_shutdown_taint(&nodes_api.get(&shut).await.ok()?).then_some(())
    })
    .await;
    cloud.start_instance(&shut).await.unwrap();
    start_kubelet(&nodes_api, &shut).await;
    wait_for("the shutdown taint to go once the node is Ready", Duration::from_secs(90), || async {
        (!has_shutdown_taint(&nodes_api.get(&shut).await.ok()?)).then_some(())
    })
    .await;

    // With every cloud call failing, a NotReady node whose instance is gone is kept for a minute.
    let fail_everything =
        FaultSpec { operation: "*".into(), count: None, mode: FaultMode::Fail, status: 503, delay_ms: 0 };
    cloud.inject_fault(&fail_everything).await.unwrap();
    cloud.terminate_instance(&guarded).await.unwrap();
    stop_kubelet(&nodes_api, &guarded).await;
    wait_for("the guarded node to go NotReady", Duration::from_secs(90), || async {
        let node = nodes_api.get(&guarded).await.ok()?;
        (condition(&node, "Ready").map(|c| c.0) != Some("True".into())).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert!(nodes_api.get_opt(&guarded).await.unwrap().is_some(), "a node was deleted while the cloud was failing");

    // Once the cloud answers again, terminated instances' NotReady nodes are deleted.
    cloud.clear_faults().await.unwrap();
    cloud.terminate_instance(&gone).await.unwrap();
    stop_kubelet(&nodes_api, &gone).await;
    for name in [&guarded, &gone] {
        wait_for(&format!("node {name} to be deleted"), Duration::from_secs(90), || async {
            nodes_api.get_opt(name).await.ok()?.is_none().then_some(())
        })
        .await;
    }
    assert!(nodes_api.get_opt(&shut).await.unwrap().is_some(), "the running node was deleted");

    assert_torn_down(cluster);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_replica_waits_and_takes_over_when_the_leader_dies() {
    let cluster = up_with_cloud("ccm-ha", 1).await;
    let client = cluster.client().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let first = cluster.state.processes.iter().find(|p| p.component == "reference-ccm").unwrap().clone();
    let holder = |lease: Lease| lease.spec.and_then(|s| s.holder_identity).unwrap_or_default();
    let first_identity = holder(leases.get("cloud-controller-manager").await.unwrap());
    assert!(first_identity.ends_with(&format!("_{}", first.pid)), "{first_identity}");

    // A second replica, as a Deployment with two pods would run.
    let ccm_binary = tokio::task::spawn_blocking(toolchain::workspace::build_reference_ccm).await.unwrap().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let args = cloud::ccm_args("ccm-ha", &cluster.state.kubeconfig, &cluster.dir.join("cloud-config.yaml"), port);
    let log = cluster.dir.join("logs").join("reference-ccm-2.log");
    let second = local_cluster::process::spawn("reference-ccm-2", &ccm_binary, &args, &log).unwrap();
    let _second_guard = KillOnDrop(second.clone());
    let metrics = format!("http://127.0.0.1:{port}/metrics");
    wait_for("the second replica's metrics endpoint", Duration::from_secs(30), || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok().map(|_| ())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let standby = http_get(&metrics).await;
    assert!(!standby.contains("reconciles_total{controller="), "the standby reconciled:\n{standby}");

    // Kill the leader outright (no lease release): the standby takes over within a lease duration.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(first.pid), nix::sys::signal::Signal::SIGKILL).unwrap();
    let killed = std::time::Instant::now();
    let new_identity = wait_for("the standby to take the lease", Duration::from_secs(30), || async {
        let identity = holder(leases.get("cloud-controller-manager").await.ok()?);
        (identity.ends_with(&format!("_{}", second.pid))).then_some(identity)
    })
    .await;
    // A lease duration (15 s) and a retry period (2 s) by design; 13 s more is room for a loaded
    // machine, still far below a second lease duration.
    assert!(killed.elapsed() <= Duration::from_secs(15 + 2 + 13), "handover took {:?}", killed.elapsed());
    assert_ne!(new_identity, first_identity);

    // And it reconciles: a new node gets initialised.
    let cloud = cloud_of(&cluster);
    cloud.create_instance(&cloud::instance_for(&local_cluster::nodes::machine("ccm-ha", 1))).await.unwrap();
    let nodes_api: Api<Node> = Api::all(client);
    nodes_api
        .create(&PostParams::default(), &nodes::manifest("ccm-ha", 1, toolchain::default_release().version))
        .await
        .unwrap();
    let name = nodes::node_name("ccm-ha", 1);
    wait_for("the new leader to initialise a new node", Duration::from_secs(30), || async {
        (!nodes::is_uninitialized(&nodes_api.get(&name).await.ok()?)).then_some(())
    })
    .await;
    assert!(http_get(&metrics).await.contains("reconciles_total{controller=\"cloud-node\"}"));

    drop(_second_guard);
    assert_torn_down(cluster);
}

struct KillOnDrop(local_cluster::process::ProcessRecord);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        local_cluster::process::terminate(std::slice::from_ref(&self.0), Duration::from_secs(5));
    }
}

/// `cargo build -p ccm --example own_cloud`: a provider's own CCM, ccm's controllers over a cloud
/// of its own (`ccm/examples/own_cloud.rs`), with no local cloud linked in.
fn build_own_cloud_example() -> std::path::PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let output = std::process::Command::new(cargo)
        .current_dir(&workspace)
        .args(["build", "--locked", "-p", "ccm", "--example", "own_cloud", "--message-format=json-render-diagnostics"])
        .output()
        .expect("running cargo");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find(|message| message["target"]["name"] == "own_cloud" && message["executable"].is_string())
        .map(|message| message["executable"].as_str().unwrap().into())
        .expect("cargo names the example's executable")
}

/// The controllers are reusable unchanged: a CCM whose `main` brings a cloud of its own (an
/// inventory file) initialises a real cluster's nodes from it (providerID, zone, instance type,
/// addresses, the uninitialized taint gone).
#[tokio::test(flavor = "multi_thread")]
async fn a_provider_main_with_its_own_cloud_initialises_nodes_with_ccms_controllers() {
    let binary = tokio::task::spawn_blocking(build_own_cloud_example).await.unwrap();
    let cluster = bring_up(options("ccm-own-cloud", toolchain::default_release(), 2)).await;
    let dir = tempfile::tempdir().unwrap();
    let inventory = dir.path().join("inventory.txt");
    let lines: Vec<String> = (0..2)
        .map(|i| {
            let name = nodes::node_name("ccm-own-cloud", i);
            format!("{name} zone-{i} m.large {},{}", nodes::node_ip(i), nodes::node_ipv6(i))
        })
        .collect();
    std::fs::write(&inventory, lines.join("\n")).unwrap();
    let mut ccm = std::process::Command::new(&binary)
        .arg(format!("--kubeconfig={}", cluster.state.kubeconfig.display()))
        .args(["--cloud-provider=inventory", "--leader-elect=false", "--secure-port=0", "--controllers=cloud-node"])
        .arg(format!("--cloud-config={}", inventory.display()))
        .stderr(std::fs::File::create(dir.path().join("ccm.log")).unwrap())
        .spawn()
        .unwrap();
    let client = cluster.client().await.unwrap();
    let nodes_api: Api<Node> = Api::all(client);
    let initialised = wait_for("both nodes initialised by the example CCM", Duration::from_secs(60), || async {
        let nodes = nodes_api.list(&ListParams::default()).await.ok()?.items;
        (nodes.len() == 2 && nodes.iter().all(|n| !nodes::is_uninitialized(n))).then_some(nodes)
    })
    .await;
    let _ = ccm.kill();
    let _ = ccm.wait();
    for node in initialised {
        let name = node.metadata.name.clone().unwrap();
        let index: u32 = name.rsplit('-').next().unwrap().parse().unwrap();
        assert_eq!(node.spec.as_ref().unwrap().provider_id.as_deref(), Some(format!("inventory://{name}").as_str()));
        let labels = labels(&node);
        assert_eq!(
            labels.get("topology.kubernetes.io/zone").map(String::as_str),
            Some(format!("zone-{index}").as_str())
        );
        assert_eq!(labels.get("node.kubernetes.io/instance-type").map(String::as_str), Some("m.large"));
        let addresses: Vec<String> =
            node.status.unwrap().addresses.unwrap_or_default().into_iter().map(|a| a.address).collect();
        assert_eq!(addresses.first(), Some(&nodes::node_ip(index).to_string()), "{name}: {addresses:?}");
    }
    assert_torn_down(cluster);
}

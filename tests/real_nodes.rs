//! Real nodes end to end: two kubelets with containerd and runc in namespaces of their own, pods
//! that really run on both, HTTP from a pod on one node to a pod on the other (by its IP, and by a
//! Service's DNS name: CoreDNS and kube-proxy), container logs read through the API server, and a
//! teardown that leaves no process, namespace, mount or cgroup behind
//! and never touched the machine's root network namespace or its sysctls; the same after a
//! SIGKILL (swept by the next `down`) and after SIGINT half way through `cluster up`.
//!
//! Needs root, the node packages (`scripts/test` installs them) and the toolchain; it skips, saying
//! why, only when the kernel lacks a feature real nodes cannot do without.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::common;

use common::real::{pod, real_cluster};
use common::{TestCluster, wait_for};
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, LogParams, PostParams};
use local_cluster::clouds::local::{LocalSetup, LocalState};
use local_cluster::{NodeKind, nodes, process, real};
use serde_json::json;
use testing::host::{global_sysctls, root_iptables, root_links};

/// Brings `cluster` down and checks that nothing of its real nodes is left: no process, mount,
/// cgroup or veth of its state dir (returned) and none of its `namespaces`.
fn assert_real_torn_down(cluster: TestCluster, namespaces: &real::Namespaces) -> std::path::PathBuf {
    let dir = cluster.dir.clone();
    common::assert_torn_down(cluster);
    assert_eq!(real::leftovers(&dir), Vec::<String>::new(), "left behind by down");
    assert_eq!(real::namespaces_in_use(namespaces), Vec::<String>::new(), "namespaces left behind by down");
    dir
}

#[tokio::test(flavor = "multi_thread")]
async fn two_real_nodes_run_pods_that_talk_across_nodes_and_leave_nothing_behind() {
    let release = toolchain::default_release();
    let links_before = root_links();
    let sysctls_before = global_sysctls();
    let iptables_before = root_iptables();

    // `e2e-real` is a prefix of this file's other clusters' names, which run at the same time: its
    // `down` must stop its own processes only (it once swept theirs too).
    let Some(cluster) = real_cluster("e2e-real", release, 2).await else { return };
    let namespaces = real::namespaces(&cluster.state);
    assert_eq!(
        namespaces.names.len(),
        2 * 2 + 1,
        "a network and mount namespace per node, the hub's network: {namespaces:?}"
    );
    let client = cluster.client().await.unwrap();

    // Real kubelets registered as external-cloud-provider ones; the CCM initialised them.
    let listed = Api::<Node>::all(client.clone()).list(&Default::default()).await.unwrap().items;
    assert_eq!(listed.len(), 2);
    for node in &listed {
        let status = node.status.as_ref().unwrap();
        let info = status.node_info.as_ref().unwrap();
        assert!(info.container_runtime_version.starts_with("containerd://2."), "{info:?}");
        assert_eq!(info.kubelet_version, release.version);
        assert!(nodes::is_ready(node) && !nodes::is_uninitialized(node), "{:?}", node.metadata.name);
        assert!(node.spec.as_ref().unwrap().provider_id.as_deref().is_some_and(|p| p.starts_with("local://")));
    }

    // A web server on each node, from the agnhost image built here.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.66.1";
    for (index, node) in cluster.state.nodes.iter().enumerate() {
        let web = pod(&format!("web-{index}"), node, agnhost, json!(["netexec", "--http-port=8080"]), "Always");
        pods.create(&PostParams::default(), &web).await.unwrap();
    }
    let mut ips = Vec::new();
    for index in 0..2 {
        let name = format!("web-{index}");
        let ip = wait_for(&format!("{name} to run"), Duration::from_secs(90), || {
            let pods = pods.clone();
            let name = name.clone();
            async move {
                let pod = pods.get(&name).await.ok()?;
                let status = pod.status?;
                let running = status.container_statuses?.first()?.state.as_ref()?.running.is_some();
                running.then_some(status.pod_ip?)
            }
        })
        .await;
        ips.push(ip);
    }
    assert!(ips[0].starts_with("10.244.") && ips[1].starts_with("10.244."), "{ips:?}");
    assert_ne!(ips[0].rsplit_once('.').unwrap().0, ips[1].rsplit_once('.').unwrap().0, "pods on one node: {ips:?}");

    // A Service in front of the server on node 1, reached by its DNS name.
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "web-1"},
        "spec": {"selector": {"app": "web-1"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }))
    .unwrap();
    services.create(&PostParams::default(), &service).await.unwrap();

    // From a busybox pod on node 0, HTTP to the server on node 1 by its pod IP, then through the
    // Service by name (CoreDNS, kube-proxy); its output read through the API server
    // (kube-apiserver -> egress proxy in the hub -> the kubelet of node 0).
    let busybox = "registry.k8s.io/e2e-test-images/busybox:1.37.0-2";
    // kube-proxy programs a new Service's endpoints a moment after they are ready (until then the
    // Service IP refuses): the client retries the Service for up to 30 s, as upstream's tests poll.
    let script = format!(
        "wget -q -O - http://{}:8080/hostname && echo && for i in $(seq 30); do \
         wget -q -O - http://web-1.default.svc.cluster.local/hostname 2>/dev/null && exit 0; sleep 1; done; exit 1",
        ips[1]
    );
    let client_pod = pod("client", &cluster.state.nodes[0], busybox, json!(["sh", "-c", script]), "Never");
    pods.create(&PostParams::default(), &client_pod).await.unwrap();
    let phase = wait_for("the client pod to finish", Duration::from_secs(90), || {
        let pods = pods.clone();
        async move {
            let phase = pods.get("client").await.ok()?.status?.phase?;
            (phase == "Succeeded" || phase == "Failed").then_some(phase)
        }
    })
    .await;
    let logs = pods.logs("client", &LogParams::default()).await.unwrap();
    assert_eq!((phase.as_str(), logs.trim()), ("Succeeded", "web-1\nweb-1"), "the client pod's output");
    let server_logs = pods.logs("web-1", &LogParams::default()).await.unwrap();
    assert!(server_logs.contains("Started HTTP server on port 8080"), "{server_logs}");

    // The machine kept its sysctls and its root network namespace's links.
    assert_eq!(global_sysctls(), sysctls_before);
    assert_eq!(root_links(), links_before, "the root network namespace gained or lost links");
    assert_eq!(root_iptables(), iptables_before, "the root network namespace's iptables rules changed");

    let dir = assert_real_torn_down(cluster, &namespaces);
    assert!(process::find_by_marker(&dir).is_empty());
    assert_eq!(root_links(), links_before);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_cluster_with_real_nodes_is_swept_by_the_next_down() {
    let release = toolchain::default_release();
    let Some(mut cluster) = real_cluster("e2e-real-killed", release, 1).await else { return };
    let client = cluster.client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.66.1";
    let web = pod("web", &cluster.state.nodes[0], agnhost, json!(["netexec", "--http-port=8080"]), "Always");
    pods.create(&PostParams::default(), &web).await.unwrap();
    wait_for("the pod to run", Duration::from_secs(90), || {
        let pods = pods.clone();
        async move { (pods.get("web").await.ok()?.status?.phase? == "Running").then_some(()) }
    })
    .await;

    // As if the machine's OOM killer or a `kill -9` took every process the harness started at
    // once: the runc shims and containers (which the harness never recorded) keep running.
    let state = cluster.0.take().unwrap().state;
    let namespaces = real::namespaces(&state);
    for record in &state.processes {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(record.pid), nix::sys::signal::Signal::SIGKILL);
    }
    let dir = cli_support::roots::state_root().join("clusters").join(&state.name);
    assert!(!real::leftovers(&dir).is_empty(), "nothing survived the kill: the sweep below would prove nothing");

    assert!(local_cluster::down(&state.name).unwrap());
    assert_eq!(real::leftovers(&dir), Vec::<String>::new(), "left behind after the next down");
    assert_eq!(real::namespaces_in_use(&namespaces), Vec::<String>::new());
}

/// The `local` provider's machine hooks on a real node (`harness cluster instance`): `shutdown`
/// really stops the node's containerd, kubelet and kube-proxy and kills its pods, and the node goes
/// NotReady; `start` runs them again and the node is Ready with its pod running again; `terminate`
/// also takes the node's namespaces, and the CCM deletes the node. Each action stays well inside
/// the hooks' 30 s timeout.
#[tokio::test(flavor = "multi_thread")]
async fn a_real_machine_really_stops_starts_again_and_is_terminated() {
    use local_cluster::machines::{self, MachineAction};
    if let Some(missing) = real::missing_kernel_feature() {
        eprintln!("SKIPPED: real nodes cannot run on this machine: {missing}");
        return;
    }
    let release = toolchain::default_release();
    let ccm_binary = tokio::task::spawn_blocking(toolchain::workspace::build_reference_ccm)
        .await
        .unwrap()
        .expect("building reference-ccm");
    let mut options = common::options("e2e-real-machine", release, 2);
    options.node_kind = NodeKind::Real;
    options.cloud = Some(std::sync::Arc::new(LocalSetup::new(ccm_binary)));
    let cluster: TestCluster = common::bring_up(options).await;
    let client = cluster.client().await.unwrap();
    let node = cluster.state.nodes[1].clone();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.66.1";
    let web = pod("web", &node, agnhost, json!(["netexec", "--http-port=18089"]), "Always");
    pods.create(&PostParams::default(), &web).await.unwrap();
    let running = || {
        let pods = pods.clone();
        async move {
            let status = pods.get("web").await.ok()?.status?;
            let state = status.container_statuses?.first()?.state.clone()?;
            state.running.is_some().then_some(())
        }
    };
    wait_for("the pod to run", Duration::from_secs(90), running).await;
    let netexec = || process::find_by_marker(std::path::Path::new("--http-port=18089"));
    assert!(!netexec().is_empty(), "the pod's process is not on the machine");
    let nodes_api: Api<Node> = Api::all(client.clone());
    let component = |c: &str| format!("{node}-{c}");

    let started = std::time::Instant::now();
    let instance = machines::act(&cluster.state.name, &node, MachineAction::Shutdown).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(20), "shutdown took {:?}", started.elapsed());
    assert_eq!(instance.state, "Shutdown");
    let state = local_cluster::load_state(&cluster.state.name).unwrap();
    for c in ["containerd", "kubelet", "kube-proxy"] {
        assert!(!state.processes.iter().any(|p| p.component == component(c)), "{c} still recorded as running");
        let stopped = state.stopped.iter().find(|s| s.record.component == component(c)).expect(c);
        assert!(!stopped.record.is_running(), "{c} still runs");
    }
    assert!(netexec().is_empty(), "the pod's process outlived its machine: {:?}", netexec());
    wait_for("the node to go NotReady", Duration::from_secs(90), || {
        let nodes_api = nodes_api.clone();
        let node = node.clone();
        async move { (!nodes::is_ready(&nodes_api.get(&node).await.ok()?)).then_some(()) }
    })
    .await;

    let started = std::time::Instant::now();
    machines::act(&cluster.state.name, &node, MachineAction::Start).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(20), "start took {:?}", started.elapsed());
    let state = local_cluster::load_state(&cluster.state.name).unwrap();
    assert!(state.stopped.is_empty(), "{:?}", state.stopped);
    for c in ["containerd", "kubelet", "kube-proxy"] {
        let record = state.processes.iter().find(|p| p.component == component(c)).expect(c);
        assert!(record.is_running(), "{c} did not start again");
    }
    wait_for("the node to be Ready again", Duration::from_secs(90), || {
        let nodes_api = nodes_api.clone();
        let node = node.clone();
        async move { nodes::is_ready(&nodes_api.get(&node).await.ok()?).then_some(()) }
    })
    .await;
    // The API may still show the status from before the shutdown: the machine is what tells.
    wait_for("the pod's process to be back on the machine", Duration::from_secs(120), || async {
        (!netexec().is_empty()).then_some(())
    })
    .await;

    let holder = state.processes.iter().find(|p| p.component == component("namespaces")).unwrap().clone();
    machines::act(&cluster.state.name, &node, MachineAction::Terminate).await.unwrap();
    assert!(!holder.is_running(), "the node's namespaces outlived its termination");
    assert!(netexec().is_empty(), "the pod's process outlived its machine");
    wait_for("the CCM to delete the node", Duration::from_secs(120), || {
        let nodes_api = nodes_api.clone();
        let node = node.clone();
        async move { nodes_api.get_opt(&node).await.ok()?.is_none().then_some(()) }
    })
    .await;

    let dir = cluster.dir.clone();
    common::assert_torn_down(cluster);
    assert_eq!(real::leftovers(&dir), Vec::<String>::new(), "left behind by down");
}

/// Runs the harness binary and returns (success, stdout, stderr).
fn harness_cli(binary: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let output = std::process::Command::new(binary).args(args).output().expect("running harness");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.success(), text(&output.stdout), text(&output.stderr))
}

/// `(destination, via)` routes of the namespace `holder` holds, inside the pod range.
fn pod_routes(holder: i32) -> BTreeSet<String> {
    let output = std::process::Command::new("nsenter")
        .arg(format!("--net=/proc/{holder}/ns/net"))
        .args(["--", "ip", "-o", "-4", "route", "show", "root", real::CLUSTER_CIDR])
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|l| l.contains(" via "))
        .map(|l| l.split(" dev ").next().unwrap_or_default().trim().to_owned())
        .collect()
}

/// The local cloud's data plane on two real nodes: the cloud-e2e data-path tests pass through
/// `harness cluster lb-probe`; two clients on either side of a source range are admitted and
/// refused; a deleted load balancer refuses at once; the CCM's routes are in the namespaces and a
/// route deleted from the cloud leaves them; nothing stays behind and the root namespace is
/// untouched.
#[tokio::test(flavor = "multi_thread")]
async fn the_local_cloud_carries_load_balancer_traffic_and_routes_on_real_nodes() {
    if let Some(missing) = real::missing_kernel_feature() {
        eprintln!("SKIPPED: real nodes cannot run on this machine: {missing}");
        return;
    }
    let release = toolchain::default_release();
    let links_before = root_links();
    let iptables_before = root_iptables();
    let (ccm_binary, harness_binary) = tokio::task::spawn_blocking(|| {
        (
            toolchain::workspace::build_reference_ccm().expect("reference-ccm"),
            toolchain::workspace::build_workspace_binary("harness", "harness"),
        )
    })
    .await
    .unwrap();
    let harness_binary = harness_binary.expect("building harness");
    let mut options = common::options("e2e-real-dp", release, 2);
    options.node_kind = NodeKind::Real;
    options.cloud = Some(std::sync::Arc::new(LocalSetup::new(ccm_binary.clone())));
    let mut cluster: TestCluster = common::bring_up(options).await;
    let name = cluster.state.name.clone();
    assert!(cluster.state.processes.iter().any(|p| p.component == "data-plane" && p.is_running()));
    let namespaces = real::namespaces(&cluster.state);
    let holders: Vec<i32> =
        cluster.state.processes.iter().filter(|p| p.component.ends_with("-namespaces")).map(|p| p.pid).collect();

    // The route controller's routes, programmed by the data plane: each node routes to the other's
    // pod CIDR (and never to its own).
    let cloud = cluster.state.cloud_as::<LocalState>().expect("the local cloud").client().unwrap();
    let routes = wait_for("the CCM's two routes in the cloud", Duration::from_secs(60), || async {
        let routes = cloud.list_all_routes().await.ok()?;
        (routes.iter().filter(|r| r.cluster == name).count() == 2).then_some(routes)
    })
    .await;
    // `harness cluster routes` reads the same two from the cloud.
    let listed = local_cluster::machines::routes(&name).await.unwrap();
    assert_eq!(listed.len(), 2, "{listed:?}");
    for route in &routes.iter().filter(|r| r.cluster == name).collect::<Vec<_>>() {
        let route = serde_json::to_value(route).unwrap();
        assert!(listed.contains(&route), "{route} not in {listed:?}");
    }
    wait_for("a route to the other node's pod CIDR in each node", Duration::from_secs(30), || async {
        holders.iter().all(|h| pod_routes(*h).len() == 1).then_some(())
    })
    .await;

    // The four data-path tests of cloud-e2e, dialling through the `local` provider's lb-probe hook.
    let artifacts = tempfile::tempdir().unwrap();
    let artifacts_arg = artifacts.path().display().to_string();
    let suite = ["suite", "cloud-e2e", "--cluster", &name, "--focus", "DataPath", "--artifacts", &artifacts_arg];
    let (passed, stdout, stderr) = harness_cli(&harness_binary, &suite);
    assert!(passed, "cloud-e2e data path failed:\n{stdout}\n{stderr}");
    let junit = std::fs::read_to_string(artifacts.path().join("junit_cloud-e2e.xml")).unwrap();
    assert_eq!(junit.matches("<testcase").count(), 4, "{junit}");
    assert!(!junit.contains("<skipped") && !junit.contains("<failure"), "{junit}");
    assert!(stdout.contains("4 passed, 0 failed, 0 skipped"), "{stdout}");

    // Two clients on either side of a source range.
    let client = cluster.client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.66.1";
    let web = pod("lb-web", &cluster.state.nodes[1], agnhost, json!(["netexec", "--http-port=8080"]), "Always");
    pods.create(&PostParams::default(), &web).await.unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "lb-web"},
        "spec": {
            "type": "LoadBalancer",
            "selector": {"app": "lb-web"},
            "ports": [{"port": 80, "targetPort": 8080}],
            "loadBalancerSourceRanges": ["10.250.0.240/28"],
        },
    }))
    .unwrap();
    services.create(&PostParams::default(), &service).await.unwrap();
    let ip = wait_for("an ingress IP", Duration::from_secs(60), || async {
        let status = services.get("lb-web").await.ok()?.status?.load_balancer?.ingress?;
        status.first()?.ip.clone()
    })
    .await;
    assert!(ip.starts_with("10.250.1."), "the ingress IP is from the hub's pool: {ip}");
    let probe = |source: &'static str| {
        let (binary, name, ip) = (harness_binary.clone(), name.clone(), ip.clone());
        let args = ["cluster", "lb-probe", "--name", &name, "--ip", &ip, "--port", "80", "--source", source];
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.push("--send=GET /hostname HTTP/1.0\r\n\r\n".into());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        harness_cli(&binary, &args)
    };
    wait_for("the allowed client (10.250.0.250) to reach the pod", Duration::from_secs(90), || async {
        let (ok, stdout, _) = probe("10.250.0.250");
        (ok && stdout.ends_with("lb-web")).then_some(())
    })
    .await;
    let (ok, stdout, stderr) = probe("10.250.0.230");
    assert!(!ok && stderr.contains("refused"), "a client outside the source range: {stdout} {stderr}");

    // `cluster exec`: programs on the hub's network, kube-apiserver at the kubeconfig's address, two
    // at once on addresses of their own, each program's exit status passed on.
    let kubectl = toolchain::installed(&toolchain::default_release()).unwrap().binary("kubectl");
    let kubeconfig = cluster.state.kubeconfig.display().to_string();
    let exec = |command: &[&str]| {
        let mut exec = std::process::Command::new(&harness_binary);
        exec.args(["cluster", "exec", "--name", &name, "--"]).args(command);
        exec
    };
    let nodes = exec(&[&kubectl.display().to_string(), "--kubeconfig", &kubeconfig, "get", "nodes", "-o", "name"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&nodes.stdout).into_owned();
    assert!(
        nodes.status.success() && listed.lines().count() == 2,
        "{listed}{}",
        String::from_utf8_lossy(&nodes.stderr)
    );
    let address = "ip -4 -o addr show eth0 | awk '{print $4}'; sleep 2";
    let both = [exec(&["sh", "-c", address]).output().unwrap(), exec(&["sh", "-c", address]).output().unwrap()];
    let (first, second) = std::thread::scope(|scope| {
        let a = scope.spawn(|| exec(&["sh", "-c", address]).output().unwrap());
        let b = scope.spawn(|| exec(&["sh", "-c", address]).output().unwrap());
        (a.join().unwrap(), b.join().unwrap())
    });
    let addresses: BTreeSet<String> =
        [&first, &second].iter().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned()).collect();
    assert_eq!(addresses.len(), 2, "two sessions at once, one address: {addresses:?}");
    assert!(addresses.iter().all(|a| a.starts_with("10.250.0.2")), "{addresses:?}");
    assert!(both.iter().all(|o| String::from_utf8_lossy(&o.stdout).trim() == "10.250.0.230/24"), "one after the other");
    assert_eq!(exec(&["sh", "-c", "exit 7"]).status().unwrap().code(), Some(7));

    // Deleted: the cloud lets the load balancer go, and the next request is refused.
    services.delete("lb-web", &Default::default()).await.unwrap();
    wait_for("the cloud to drop the load balancer", Duration::from_secs(60), || async {
        let balancers = cloud.list_load_balancers().await.ok()?;
        balancers.iter().all(|b| b.cluster != name).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (ok, stdout, stderr) = probe("10.250.0.250");
    assert!(!ok && stderr.contains("refused"), "a deleted load balancer: {stdout} {stderr}");

    // A route deleted from the cloud (with the CCM stopped, so it is not made again) leaves the nodes.
    cluster.0.as_mut().unwrap().stop_ccm(&ccm_binary).unwrap();
    let route = routes.iter().find(|r| r.cluster == name).unwrap().clone();
    cloud.delete_route(&name, &route.name).await.unwrap();
    wait_for("the deleted route to leave the nodes", Duration::from_secs(30), || async {
        let left: Vec<BTreeSet<String>> = holders.iter().map(|h| pod_routes(*h)).collect();
        (!left.iter().flatten().any(|r| r.starts_with(&format!("{} ", route.destination_cidr)))).then_some(())
    })
    .await;
    assert_eq!(holders.iter().map(|h| pod_routes(*h).len()).sum::<usize>(), 1, "the other route stays");

    assert_eq!(root_links(), links_before, "the root network namespace gained or lost links");
    assert_eq!(root_iptables(), iptables_before, "the root network namespace's iptables rules changed");
    // The hub (and its rules), the nodes and every probe's client namespace are gone.
    assert_real_torn_down(cluster, &namespaces);
    let probes = std::process::Command::new("pgrep").args(["-f", "probe-.*holder"]).output().unwrap();
    assert!(probes.stdout.is_empty(), "probe clients left: {}", String::from_utf8_lossy(&probes.stdout));
}

/// SIGINT while `harness cluster up` starts real nodes, at two points: once the kubelets run (the
/// CCM not yet), and once the CCM runs (initialising the nodes, or CoreDNS starting after it).
/// Each time `up` exits 130 within a bounded time and leaves nothing: no process, namespace,
/// mount, cgroup, socket or state dir, and the root network namespace and sysctls as they were.
#[test]
fn sigint_half_way_through_cluster_up_on_real_nodes_leaves_nothing() {
    use local_cluster::ClusterState;
    use nix::sys::signal::{Signal, kill};
    use std::time::Instant;
    use testing::host::HostSnapshot;
    if let Some(missing) = real::missing_kernel_feature() {
        eprintln!("SKIPPED: real nodes cannot run on this machine: {missing}");
        return;
    }
    let binary = toolchain::workspace::build_workspace_binary("harness", "harness").expect("building harness");
    let host = HostSnapshot::take();
    let name = "e2e-real-sigint";
    let dir = cli_support::roots::state_root().join("clusters").join(name);
    type Reached = fn(&ClusterState) -> bool;
    let stages: [(&str, Reached); 2] = [
        ("the kubelets run, the CCM not yet", |s| !s.nodes.is_empty() && s.ccm_url.is_none()),
        ("the CCM runs", |s| s.ccm_url.is_some()),
    ];
    for (stage, reached) in stages {
        let mut child = std::process::Command::new(&binary)
            .args(["cluster", "up", "--name", name, "--nodes", "1"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let state = loop {
            if let Some(state) = local_cluster::load_state(name).ok().filter(reached) {
                break state;
            }
            if child.try_wait().unwrap().is_some() {
                let output = child.wait_with_output().unwrap();
                panic!("up ended before {stage}: {}", String::from_utf8_lossy(&output.stderr));
            }
            assert!(started.elapsed() < Duration::from_secs(600), "up never got to: {stage}");
            std::thread::sleep(Duration::from_millis(50));
        };
        let namespaces = real::namespaces(&state);
        assert_eq!(namespaces.names.len(), 2 + 1, "the node's network and mount namespaces, the hub's: {namespaces:?}");
        let running = real::leftovers(&dir);
        assert!(running.iter().any(|l| l.starts_with("cgroup ")), "no cgroups when {stage}: {running:?}");

        let signalled = Instant::now();
        kill(nix::unistd::Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        let took = signalled.elapsed();
        eprintln!("SIGINT when {stage}: up stopped in {took:.1?}");
        // Bounded, far below up's own 600 s: alone, 24.7 s once the kubelets run (up finishes a
        // step under way before it sees the signal) and 1.6 s once the CCM runs; 60.5 s for the
        // first beside the rest of the full tier on 2 cores.
        assert!(took < Duration::from_secs(120), "up took {took:?} to stop after SIGINT when {stage}:\n{stderr}");
        assert_eq!(output.status.code(), Some(130), "SIGINT when {stage}:\n{stderr}");
        assert!(stderr.contains("interrupted by SIGINT"), "SIGINT when {stage}:\n{stderr}");
        assert!(!dir.exists(), "the state dir of a cluster that never came up is left: {}", dir.display());
        assert_eq!(real::leftovers(&dir), Vec::<String>::new(), "left behind by SIGINT when {stage}");
        assert_eq!(real::namespaces_in_use(&namespaces), Vec::<String>::new(), "namespaces left when {stage}");
        assert_eq!(host.changes_since(), Vec::<String>::new(), "the machine changed");
    }
}

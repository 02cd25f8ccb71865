//! Real nodes end to end: two kubelets with containerd and runc in namespaces of their own, pods
//! that really run on both, HTTP from a pod on one node to a pod on the other (by its IP, and by a
//! Service's DNS name: CoreDNS and kube-proxy), container logs read through the API server, and a
//! teardown that leaves no process, namespace, mount or cgroup behind
//! and never touched the machine's root network namespace or its sysctls.
//!
//! Needs root, the node packages (`scripts/test` installs them) and the toolchain; it skips, saying
//! why, only when the kernel lacks a feature real nodes cannot do without.

use std::time::Duration;

mod common;

use common::real::{pod, real_cluster};
use common::{TestCluster, wait_for};
use harness::cluster::cloud::{self, CloudOptions};
use harness::cluster::{NodeKind, nodes, process, real};
use harness::testing::host::{global_sysctls, root_iptables, root_links};
use harness::toolchain;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use kube::api::{Api, LogParams, PostParams};
use serde_json::json;


#[tokio::test(flavor = "multi_thread")]
async fn two_real_nodes_run_pods_that_talk_across_nodes_and_leave_nothing_behind() {
    let release = toolchain::default_release();
    let links_before = root_links();
    let sysctls_before = global_sysctls();
    let iptables_before = root_iptables();

    let Some(cluster) = real_cluster("e2e-real", release, 2).await else { return };
    let namespaces = real::namespaces(&cluster.state);
    assert_eq!(
        namespaces.len(),
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
    let script = format!(
        "wget -q -O - http://{}:8080/hostname && echo && wget -q -O - http://web-1.default.svc.cluster.local/hostname",
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

    let dir = cluster.dir.clone();
    common::assert_torn_down(cluster);
    assert_eq!(real::leftovers(&dir), Vec::<String>::new(), "left behind by down");
    assert_eq!(real::namespaces_in_use(&namespaces), Vec::<String>::new(), "namespaces left behind by down");
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
    let dir = harness::cluster::state_root().join("clusters").join(&state.name);
    assert!(!real::leftovers(&dir).is_empty(), "nothing survived the kill: the sweep below would prove nothing");

    assert!(harness::cluster::down(&state.name).unwrap());
    assert_eq!(real::leftovers(&dir), Vec::<String>::new(), "left behind after the next down");
    assert_eq!(real::namespaces_in_use(&namespaces), Vec::<String>::new());
}

/// The `local` provider's machine hooks on a real node (`harness cluster instance`): `shutdown`
/// really stops the node's containerd, kubelet and kube-proxy and kills its pods, and the node goes
/// NotReady; `start` runs them again and the node is Ready with its pod running again; `terminate`
/// also takes the node's namespaces, and the CCM deletes the node. Each action stays well inside
/// the hooks' 30 s timeout.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "undiagnosed: in the 2026-11-26 CI run, beside this file's two other real clusters, the \
            node stayed Ready 90 s after its kubelet had stopped (alone it passes in 110 s); the same \
            hooks are covered by cloud-e2e's NodeShutdown on real nodes in harness/tests/run.rs (issue 22)"]
async fn a_real_machine_really_stops_starts_again_and_is_terminated() {
    use harness::cluster::machines::{self, MachineAction};
    if let Some(missing) = real::missing_kernel_feature() {
        eprintln!("SKIPPED: real nodes cannot run on this machine: {missing}");
        return;
    }
    let release = toolchain::default_release();
    let ccm_binary =
        tokio::task::spawn_blocking(cloud::build_reference_ccm).await.unwrap().expect("building reference-ccm");
    let mut options = common::options("e2e-real-machine", release, 2);
    options.node_kind = NodeKind::Real;
    options.cloud = Some(CloudOptions::new(ccm_binary));
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
    let state = harness::cluster::load_state(&cluster.state.name).unwrap();
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
    let state = harness::cluster::load_state(&cluster.state.name).unwrap();
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

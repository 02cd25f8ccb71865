//! The local deployer end to end: a real control plane built from the Go module proxy, reached with
//! kube-rs and with the toolchain's own kubectl, then torn down without leaving a process behind.
//!
//! Needs the toolchains installed (`harness toolchain install`, which `scripts/test` runs); without
//! them the tests fail with the command to run, rather than skip.

use std::collections::BTreeMap;
use std::process::Command;

use crate::common;

use common::{TestCluster, assert_torn_down};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, PostParams};
use local_cluster::nodes;
use serde_json::json;
use toolchain::{self, Release};

async fn bring_up(name: &str, release: Release, node_count: u32) -> TestCluster {
    common::bring_up(common::options(name, release, node_count)).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_local_cluster_serves_kube_rs_and_kubectl_then_leaves_nothing_behind() {
    let release = toolchain::default_release();
    let cluster = bring_up("e2e-default", release, 3).await;
    let client = cluster.client().await.unwrap();

    // Nodes registered as external-cloud-provider kubelets do, kept Ready by kwok.
    let nodes_api: Api<Node> = Api::all(client.clone());
    let listed = nodes_api.list(&Default::default()).await.unwrap().items;
    assert_eq!(listed.len(), 3);
    for node in &listed {
        let spec = node.spec.as_ref().unwrap();
        assert!(spec.provider_id.is_none(), "providerID is the CCM's to set");
        let taints = spec.taints.as_deref().unwrap_or_default();
        assert!(
            taints.iter().any(|t| t.key == nodes::UNINITIALIZED_TAINT && t.effect == "NoSchedule"),
            "{:?} lacks the uninitialized taint: {taints:?}",
            node.metadata.name
        );
        assert!(nodes::is_ready(node), "{:?} is not Ready", node.metadata.name);
        assert!(spec.pod_cidr.as_deref().is_some_and(|c| c.starts_with("127.")));
    }

    // Objects round-trip through the API server and etcd.
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "echo"},
        "spec": {"selector": {"app": "echo"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }))
    .unwrap();
    services.create(&PostParams::default(), &service).await.unwrap();
    let read = services.get("echo").await.unwrap();
    assert_eq!(read.spec.as_ref().unwrap().ports.as_ref().unwrap()[0].port, 80);
    let cluster_ip = read.spec.unwrap().cluster_ip.unwrap();
    assert!(cluster_ip.starts_with("127.96."), "service IP {cluster_ip} outside the loopback service range");

    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "e2e-lease"},
        "spec": {"holderIdentity": "e2e", "leaseDurationSeconds": 15},
    }))
    .unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();
    assert_eq!(leases.get("e2e-lease").await.unwrap().spec.unwrap().holder_identity.as_deref(), Some("e2e"));

    // /version is stamped with the release that was asked for.
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.git_version, release.version);

    // The toolchain's own kubectl, built from the same pin, sees the same nodes.
    let kubectl = toolchain::installed(&release).unwrap().binary("kubectl");
    let output = Command::new(&kubectl)
        .arg("--kubeconfig")
        .arg(&cluster.state.kubeconfig)
        .args(["get", "nodes", "-o", "json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "kubectl: {}", String::from_utf8_lossy(&output.stderr));
    let list: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut names: Vec<&str> =
        list["items"].as_array().unwrap().iter().map(|n| n["metadata"]["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, cluster.state.nodes.iter().map(String::as_str).collect::<Vec<_>>());

    // The reference CCM's manifests are valid for this API server (RBAC, Deployment, ...).
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../reference-ccm/deploy");
    let output = Command::new(&kubectl)
        .arg("--kubeconfig")
        .arg(&cluster.state.kubeconfig)
        .args(["apply", "--dry-run=server", "-f"])
        .arg(&deploy)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "dry run: {}{}", stdout, String::from_utf8_lossy(&output.stderr));
    for object in [
        "deployment.apps/cloud-controller-manager",
        "clusterrole.rbac.authorization.k8s.io/system:cloud-controller-manager",
    ] {
        assert!(stdout.contains(&format!("{object} created (server dry run)")), "{stdout}");
    }

    assert_torn_down(cluster);
}

#[tokio::test(flavor = "multi_thread")]
async fn kwok_keeps_nodes_ready_without_touching_network_unavailable() {
    let release = toolchain::default_release();
    let cluster = bring_up("e2e-routes", release, 1).await;
    let client = cluster.client().await.unwrap();
    let nodes_api: Api<Node> = Api::all(client);

    // A node registered with NetworkUnavailable=True, as a kubelet on a network plugin that needs
    // routes would be: only a route controller may clear it, kwok's status patches must not.
    let mut node = nodes::manifest("e2e-routes", 99, release.version);
    let status = node.status.as_mut().unwrap();
    status.conditions = Some(vec![serde_json::from_value(json!({
        "type": "NetworkUnavailable", "status": "True", "reason": "NoRouteCreated", "message": "waiting for the route controller",
    }))
    .unwrap()]);
    nodes_api.create(&PostParams::default(), &node).await.unwrap();
    let name = node.metadata.name.clone().unwrap();

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let node = loop {
        let current = nodes_api.get(&name).await.unwrap();
        if nodes::is_ready(&current) {
            break current;
        }
        assert!(std::time::Instant::now() < deadline, "kwok never made {name} Ready");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    let conditions: BTreeMap<String, (String, Option<String>)> =
        node.status.unwrap().conditions.unwrap().into_iter().map(|c| (c.type_, (c.status, c.reason))).collect();
    assert_eq!(conditions["NetworkUnavailable"], ("True".to_string(), Some("NoRouteCreated".to_string())));
    assert_eq!(conditions["Ready"].0, "True");

    assert_torn_down(cluster);
}

#[tokio::test(flavor = "multi_thread")]
async fn every_pinned_minor_comes_up_reporting_its_own_version() {
    // The provider × Kubernetes matrix needs more than one minor; each must really run.
    for release in toolchain::releases().into_iter().skip(1) {
        let name = format!("e2e-v1-{}", release.minor());
        let cluster = bring_up(&name, release, 1).await;
        let version = cluster.client().await.unwrap().apiserver_version().await.unwrap();
        assert_eq!(version.git_version, release.version);
        assert_torn_down(cluster);
    }
}

/// The local deployer's safety net: a run dropped half way (a panic, an error past its Down) still
/// stops its cluster when the deployer is dropped; once the run has kept it
/// (`Deployer::keep`, `--keep-cluster`), dropping the deployer leaves it running.
#[tokio::test(flavor = "multi_thread")]
async fn the_local_deployer_stops_its_cluster_when_dropped_unless_kept() {
    use harness::deploy::Deployer;
    use harness::deploy::local::LocalDeployer;
    let release = toolchain::default_release();
    let cloud = tokio::task::spawn_blocking(toolchain::workspace::build_reference_ccm).await.unwrap().unwrap();
    let up = |name: &str| {
        let mut options = local_cluster::UpOptions::new(name, release);
        (options.nodes, options.node_kind) = (1, local_cluster::NodeKind::Kwok);
        let setup = local_cluster::clouds::local::LocalSetup { reference_ccm: cloud.clone(), start_ccm: false };
        options.cloud = Some(std::sync::Arc::new(setup));
        let mut deployer = LocalDeployer::new(options);
        async move {
            deployer.up().await.unwrap_or_else(|e| panic!("{e}"));
            deployer
        }
    };
    let running =
        |name: &str| local_cluster::load_state(name).is_ok_and(|state| state.processes.iter().all(|p| p.is_running()));

    let dropped = up("e2e-drop-net").await;
    let dir = cli_support::roots::state_root().join("clusters/e2e-drop-net");
    assert!(running("e2e-drop-net"));
    drop(dropped);
    assert!(!dir.exists(), "the dropped deployer left {}", dir.display());
    assert_eq!(local_cluster::process::find_by_marker(&dir), Vec::<i32>::new(), "processes left");

    let mut kept = up("e2e-drop-kept").await;
    assert_eq!(kept.keep(), "harness cluster down --name e2e-drop-kept");
    drop(kept);
    let still_running = running("e2e-drop-kept");
    let removed = local_cluster::down("e2e-drop-kept");
    assert!(still_running, "a kept cluster went down with its deployer");
    assert!(removed.unwrap(), "the kept cluster was there for `down`");
}

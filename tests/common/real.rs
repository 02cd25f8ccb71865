//! Clusters with real nodes for the tests (`tests/real_nodes.rs`, `tests/real_images.rs`), and the
//! pods they run on them.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams, PostParams};
use local_cluster::clouds::local::LocalSetup;
use local_cluster::{NodeKind, UpOptions, real};
use serde_json::json;
use toolchain::Release;

use super::{TestCluster, wait_for};

/// A cluster of `nodes` real nodes with the local cloud and the reference CCM, or `None` (saying
/// why) when the kernel lacks a feature real nodes cannot do without.
pub async fn real_cluster(name: &str, release: Release, nodes: u32) -> Option<TestCluster> {
    real_cluster_with(name, release, nodes, |_| {}).await
}

/// [`real_cluster`] with `customise` applied to its options.
pub async fn real_cluster_with(
    name: &str,
    release: Release,
    nodes: u32,
    customise: impl FnOnce(&mut UpOptions),
) -> Option<TestCluster> {
    if let Some(missing) = real::missing_kernel_feature() {
        eprintln!("SKIPPED: real nodes cannot run on this machine: {missing}");
        return None;
    }
    let ccm_binary = tokio::task::spawn_blocking(toolchain::workspace::build_reference_ccm)
        .await
        .unwrap()
        .expect("building reference-ccm");
    let mut options = super::options(name, release, nodes);
    options.node_kind = NodeKind::Real;
    options.cloud = Some(std::sync::Arc::new(LocalSetup::new(ccm_binary)));
    customise(&mut options);
    Some(super::bring_up(options).await)
}

/// A pod of one container on `node`; `args` replace the image's command when `command` is false.
pub fn pod(name: &str, node: &str, image: &str, args: serde_json::Value, restart: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "nodeName": node,
            "restartPolicy": restart,
            "containers": [{"name": name, "image": image, "args": args}],
        },
    }))
    .unwrap()
}

/// Waits until pod `name` runs, and returns its IP.
pub async fn running_ip(pods: &Api<Pod>, name: &str) -> String {
    wait_for(&format!("{name} to run"), Duration::from_secs(90), || {
        let pods = pods.clone();
        let name = name.to_string();
        async move {
            let pod = pods.get(&name).await.ok()?;
            let status = pod.status?;
            let running =
                status.container_statuses?.iter().all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()));
            running.then_some(status.pod_ip?)
        }
    })
    .await
}

/// Creates `pod`, waits until it has ended, and returns its phase and its logs.
pub async fn run_to_end(pods: &Api<Pod>, pod: &Pod) -> (String, String) {
    let name = pod.metadata.name.clone().unwrap();
    pods.create(&PostParams::default(), pod).await.unwrap();
    let phase = wait_for(&format!("pod {name} to finish"), Duration::from_secs(90), || {
        let pods = pods.clone();
        let name = name.clone();
        async move {
            let phase = pods.get(&name).await.ok()?.status?.phase?;
            (phase == "Succeeded" || phase == "Failed").then_some(phase)
        }
    })
    .await;
    let logs = pods.logs(&name, &LogParams::default()).await.unwrap_or_else(|e| format!("(no logs: {e})"));
    (phase, logs)
}

//! The cloud-node-lifecycle controller: a node whose instance is shut down gets the shutdown taint
//! (and loses it once Ready again); a node whose instance is gone is deleted.
//!
//! The instance hooks act on the machine; its kubelet stops with it (on the local deployer the
//! hook stops the simulated kubelet too), so the node goes NotReady and the CCM asks the cloud why.

use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::core::v1::Node;

use super::hooks::HookKind;
use super::{Test, TestResult, Verdict, World, wait};
use config::Capability;

/// NotReady takes the kubelet's silence (or the node-monitor grace period) plus a lifecycle pass.
const LIFECYCLE_TIMEOUT: Duration = Duration::from_secs(120);
const SHUTDOWN_TAINT: &str = "node.cloudprovider.kubernetes.io/shutdown";

pub fn tests() -> Vec<Test> {
    vec![
        Test::new(
            "[cloud-e2e] [Feature:NodeShutdown] Node whose instance is shut down should get the shutdown taint and lose it once the instance is started again",
            &[Capability::Instances, Capability::NodeShutdown],
            |w| shutdown_taint(w).boxed(),
        )
        .using(&[HookKind::ShutdownInstance, HookKind::StartInstance])
        .serial(),
        Test::new(
            "[cloud-e2e] [Feature:NodeDeletion] Node whose instance is terminated should be deleted by the CCM",
            &[Capability::Instances, Capability::NodeDeletion],
            |w| deleted_when_terminated(w).boxed(),
        )
        .using(&[HookKind::TerminateInstance])
        .serial(),
    ]
}

fn taints(node: &Node) -> Vec<String> {
    let taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    taints.into_iter().map(|t| format!("{}:{}", t.key, t.effect)).collect()
}

fn has_shutdown_taint(node: &Node) -> bool {
    taints(node).iter().any(|t| *t == format!("{SHUTDOWN_TAINT}:NoSchedule"))
}

fn ready(node: &Node) -> String {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    conditions.into_iter().find(|c| c.type_ == "Ready").map_or("unknown".into(), |c| c.status)
}

fn describe(node: &Node) -> String {
    format!("Ready={}, taints {:?}", ready(node), taints(node))
}

/// The worker the disruptive tests act on: the last by name, away from the first one that the
/// load balancer tests use.
async fn victim(w: &World) -> Result<String, Verdict> {
    let workers = w.workers().await?;
    Ok(workers.last().and_then(|n| n.metadata.name.clone()).unwrap_or_default())
}

async fn wait_node(w: &World, node: &str, what: &str, check: impl Fn(&Node) -> bool) -> TestResult {
    wait::until(&format!("node {node} to {what}"), LIFECYCLE_TIMEOUT, || async {
        let now = w.nodes().get(node).await.map_err(|e| e.to_string())?;
        if check(&now) { Ok(()) } else { Err(describe(&now)) }
    })
    .await
}

async fn shutdown_taint(w: &World) -> TestResult {
    let node = victim(w).await?;
    let tainted = match w.hooks.run(HookKind::ShutdownInstance, Some(&node)).await {
        Ok(_) => {
            let what = format!("get the taint {SHUTDOWN_TAINT}:NoSchedule after its instance was shut down");
            wait_node(w, &node, &what, has_shutdown_taint).await
        }
        Err(error) => Err(Verdict::Failed(error)),
    };
    // Start it again whatever happened: the machine is the test's to give back.
    let started = w.hooks.run(HookKind::StartInstance, Some(&node)).await.map_err(Verdict::Failed);
    tainted?;
    started?;
    wait_node(w, &node, &format!("be Ready without {SHUTDOWN_TAINT} after its instance was started again"), |n| {
        ready(n) == "True" && !has_shutdown_taint(n)
    })
    .await
}

async fn deleted_when_terminated(w: &World) -> TestResult {
    let node = victim(w).await?;
    let uid = w.nodes().get(&node).await?.metadata.uid;
    w.hooks.run(HookKind::TerminateInstance, Some(&node)).await.map_err(Verdict::Failed)?;
    let what = format!("node {node} to be deleted after its instance was terminated");
    wait::until(&what, LIFECYCLE_TIMEOUT, || async {
        match w.nodes().get_opt(&node).await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(now) if now.metadata.uid != uid => Ok(()),
            Some(now) => Err(describe(&now)),
        }
    })
    .await
}

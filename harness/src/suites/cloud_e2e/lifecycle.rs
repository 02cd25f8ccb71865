//! The cloud-node-lifecycle controller: a node whose instance is shut down gets the shutdown taint
//! (and loses it once Ready again); a node whose instance is gone is deleted.
//!
//! The instance hooks act on the machine; its kubelet stops with it (on the local deployer the
//! hook stops the simulated kubelet too), so the node goes NotReady and the CCM asks the cloud why.

use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, ListParams};

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
        .own_worker(),
        Test::new(
            "[cloud-e2e] [Feature:NodeDeletion] Node whose instance is terminated should be deleted by the CCM",
            &[Capability::Instances, Capability::NodeDeletion],
            |w| deleted_when_terminated(w).boxed(),
        )
        .using(&[HookKind::TerminateInstance])
        .own_worker(),
    ]
}

fn taints(node: &Node) -> Vec<String> {
    let taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    taints.into_iter().map(|t| format!("{}:{}", t.key, t.effect)).collect()
}

fn has_shutdown_taint(node: &Node) -> bool {
    taints(node).iter().any(|t| *t == format!("{SHUTDOWN_TAINT}:NoSchedule"))
}

/// Taints kube-controller-manager's node lifecycle controller sets on a node that stopped
/// answering and lifts some seconds after it is Ready again.
const UNANSWERING_TAINTS: [&str; 2] = ["node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"];

fn has_unanswering_taint(node: &Node) -> bool {
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_ref());
    taints.is_some_and(|taints| taints.iter().any(|t| UNANSWERING_TAINTS.contains(&t.key.as_str())))
}

fn ready(node: &Node) -> String {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    conditions.into_iter().find(|c| c.type_ == "Ready").map_or("unknown".into(), |c| c.status)
}

fn describe(node: &Node) -> String {
    format!("Ready={}, taints {:?}", ready(node), taints(node))
}

/// Whether `workers` give each test here a worker of its own, away from the first one that the
/// load balancer tests use: then they run at once.
pub fn worker_each(workers: usize) -> bool {
    workers > TESTS_ON_OWN_WORKERS
}

/// How many tests here act on a worker each.
const TESTS_ON_OWN_WORKERS: usize = 2;

/// The worker a test here acts on: the `nth_last` from the end by name when each test has its
/// own ([`worker_each`]), else the last, one test after the other.
async fn victim(w: &World, nth_last: usize) -> Result<String, Verdict> {
    let workers = w.workers().await?;
    let nth_last = if worker_each(workers.len()) { nth_last } else { 0 };
    Ok(workers.iter().rev().nth(nth_last).and_then(|n| n.metadata.name.clone()).unwrap_or_default())
}

async fn wait_node(w: &World, node: &str, what: &str, check: impl Fn(&Node) -> bool) -> TestResult {
    wait::until(&format!("node {node} to {what}"), LIFECYCLE_TIMEOUT, || async {
        let now = w.nodes().get(node).await.map_err(|e| e.to_string())?;
        if check(&now) { Ok(()) } else { Err(describe(&now)) }
    })
    .await
}

async fn shutdown_taint(w: &World) -> TestResult {
    let node = victim(w, 1).await?;
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
    // Given back schedulable, as found: the suites after this one (upstream's check that every node
    // is ready for tests polls every 30 s) see no taint of the shutdown.
    let what =
        format!("be Ready without {SHUTDOWN_TAINT} nor {UNANSWERING_TAINTS:?} after its instance was started again");
    wait_node(w, &node, &what, |n| ready(n) == "True" && !has_shutdown_taint(n) && !has_unanswering_taint(n)).await
}

async fn deleted_when_terminated(w: &World) -> TestResult {
    let node = victim(w, 0).await?;
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
    .await?;
    delete_orphans(w, &node).await
}

/// Deletes the pods still bound to deleted node `node`, as PodGC does, but at once: PodGC waits
/// out a 40 s quarantine, and until then their ReplicaSets count them, so a suite after this one
/// would wait on them (upstream's suite set-up waits until every kube-system pod is ready; a
/// CoreDNS pod on this node made it wait 78 s).
async fn delete_orphans(w: &World, node: &str) -> TestResult {
    let pods: Api<Pod> = Api::all(w.client.clone());
    let bound = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let force = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
    for pod in pods.list(&bound).await?.items {
        let (Some(namespace), Some(name)) = (pod.metadata.namespace, pod.metadata.name) else { continue };
        match Api::<Pod>::namespaced(w.client.clone(), &namespace).delete(&name, &force).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => {
                return Err(Verdict::Failed(format!("deleting pod {namespace}/{name} of the deleted node: {error}")));
            }
        }
    }
    Ok(())
}

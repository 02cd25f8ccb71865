//! cloud-node-lifecycle: every `--node-monitor-period`, Ready nodes lose the shutdown taint; a node
//! that is not Ready and whose instance is shut down gets
//! `node.cloudprovider.kubernetes.io/shutdown:NoSchedule`; one whose instance no longer exists is
//! deleted (event `DeletingNode`). A cloud API error is logged and the node left alone: an
//! unreachable cloud never deletes a node.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::events::EventType;
use serde_json::json;

use super::{CLOUD_NODE_LIFECYCLE, Context, Error, cloud, is_ready, name_of};
use crate::bugs::{Bug, Bugs};
use crate::cloud::InstancesV2;

pub const SHUTDOWN_TAINT_KEY: &str = "node.cloudprovider.kubernetes.io/shutdown";

/// What to do with one node, decided from its readiness and what the cloud says of its instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Nothing,
    AddShutdownTaint,
    RemoveShutdownTaint,
    Delete,
}

/// The pure decision: `shutdown` and `exists` are the cloud's answers (None: not asked or failed).
pub fn decide(ready: bool, tainted: bool, shutdown: Option<bool>, exists: Option<bool>) -> Verdict {
    match (ready, shutdown, exists) {
        (true, _, _) if tainted => Verdict::RemoveShutdownTaint,
        (true, _, _) => Verdict::Nothing,
        (false, Some(true), _) if !tainted => Verdict::AddShutdownTaint,
        (false, Some(true), _) => Verdict::Nothing,
        (false, _, Some(false)) => Verdict::Delete,
        _ => Verdict::Nothing,
    }
}

/// The verdict as a CCM running with `bugs` acts on it: with [`Bug::KeepShutdownTaint`] the shutdown
/// taint is never removed (it is still added).
pub fn with_bugs(verdict: Verdict, bugs: &Bugs) -> Verdict {
    match verdict {
        Verdict::RemoveShutdownTaint if bugs.contains(&Bug::KeepShutdownTaint) => Verdict::Nothing,
        verdict => verdict,
    }
}

/// Runs until the process stops.
pub async fn run(ctx: Arc<Context>) {
    let period = ctx.settings.node_monitor_period;
    let mut ticker = tokio::time::interval(period);
    loop {
        ticker.tick().await;
        ctx.health.beat(CLOUD_NODE_LIFECYCLE, period * 3);
        if let Err(error) = monitor_nodes(&ctx).await {
            ctx.metrics.failed(CLOUD_NODE_LIFECYCLE);
            tracing::warn!(%error, "cloud-node-lifecycle: listing nodes failed");
        }
    }
}

async fn monitor_nodes(ctx: &Context) -> Result<(), Error> {
    let Some(instances) = ctx.cloud.instances_v2() else { return Ok(()) };
    let api: Api<Node> = Api::all(ctx.client.clone());
    for node in super::list_nodes(&api).await? {
        let _timer = ctx.metrics.reconcile(CLOUD_NODE_LIFECYCLE);
        if let Err(error) = monitor_node(&api, &node, instances, ctx).await {
            ctx.metrics.failed(CLOUD_NODE_LIFECYCLE);
            tracing::warn!(node = %name_of(&node), %error, "cloud-node-lifecycle: left the node alone");
        }
    }
    Ok(())
}

async fn monitor_node(api: &Api<Node>, node: &Node, instances: &dyn InstancesV2, ctx: &Context) -> Result<(), Error> {
    let ready = is_ready(node);
    let tainted = has_shutdown_taint(node);
    let (shutdown, exists) = if ready { (None, None) } else { ask_cloud(node, instances).await? };
    let name = name_of(node);
    match with_bugs(decide(ready, tainted, shutdown, exists), &ctx.settings.bugs) {
        Verdict::Nothing => {}
        Verdict::AddShutdownTaint => {
            set_shutdown_taint(api, node, true).await?;
            tracing::info!(node = %name, "instance is shut down: tainted the node");
        }
        Verdict::RemoveShutdownTaint => {
            set_shutdown_taint(api, node, false).await?;
            tracing::info!(node = %name, "node is Ready again: removed the shutdown taint");
        }
        Verdict::Delete => {
            ctx.event(
                super::CLOUD_NODE_LIFECYCLE,
                node,
                EventType::Normal,
                "DeletingNode",
                format!("Deleting node {name} because it does not exist in the cloud provider"),
            )
            .await;
            api.delete(&name, &DeleteParams::default()).await?;
            tracing::info!(node = %name, "instance no longer exists: deleted the node");
        }
    }
    Ok(())
}

/// Upstream asks about shutdown first; only a node that is not shut down is checked for existence.
async fn ask_cloud(node: &Node, instances: &dyn InstancesV2) -> Result<(Option<bool>, Option<bool>), Error> {
    let shutdown = instances.instance_shutdown(node).await;
    match shutdown {
        Ok(true) => return Ok((Some(true), None)),
        Ok(false) | Err(crate::cloud::CloudError::InstanceNotFound) => {}
        Err(error) => return Err(cloud("instance_shutdown")(error)),
    }
    let exists = instances.instance_exists(node).await.map_err(cloud("instance_exists"))?;
    Ok((shutdown.ok(), Some(exists)))
}

fn has_shutdown_taint(node: &Node) -> bool {
    taints(node).iter().any(|t| t.key == SHUTDOWN_TAINT_KEY)
}

fn taints(node: &Node) -> Vec<Taint> {
    node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default()
}

async fn set_shutdown_taint(api: &Api<Node>, node: &Node, present: bool) -> Result<(), Error> {
    let mut taints: Vec<Taint> = taints(node).into_iter().filter(|t| t.key != SHUTDOWN_TAINT_KEY).collect();
    if present {
        taints.push(Taint { key: SHUTDOWN_TAINT_KEY.into(), effect: "NoSchedule".into(), ..Taint::default() });
    }
    // The resourceVersion makes a concurrent taint change conflict instead of being overwritten.
    let patch = json!({
        "metadata": { "resourceVersion": node.metadata.resource_version },
        "spec": { "taints": taints },
    });
    api.patch(&name_of(node), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_nodes_are_never_touched_but_lose_a_stale_shutdown_taint() {
        assert_eq!(decide(true, false, None, None), Verdict::Nothing);
        assert_eq!(decide(true, true, None, None), Verdict::RemoveShutdownTaint);
    }

    #[test]
    fn a_not_ready_node_of_a_shut_down_instance_is_tainted_once() {
        assert_eq!(decide(false, false, Some(true), None), Verdict::AddShutdownTaint);
        assert_eq!(decide(false, true, Some(true), None), Verdict::Nothing);
    }

    #[test]
    fn only_a_definite_no_from_the_cloud_deletes_a_node() {
        assert_eq!(decide(false, false, Some(false), Some(false)), Verdict::Delete);
        assert_eq!(decide(false, false, Some(false), Some(true)), Verdict::Nothing);
        // The cloud could not be asked: never delete.
        assert_eq!(decide(false, false, None, None), Verdict::Nothing);
        assert_eq!(decide(false, false, Some(false), None), Verdict::Nothing);
    }

    #[test]
    fn keep_shutdown_taint_only_stops_the_removal() {
        let bugs = Bugs::from([Bug::KeepShutdownTaint]);
        assert_eq!(with_bugs(decide(true, true, None, None), &bugs), Verdict::Nothing);
        assert_eq!(with_bugs(decide(false, false, Some(true), None), &bugs), Verdict::AddShutdownTaint);
        assert_eq!(with_bugs(decide(false, false, Some(false), Some(false)), &bugs), Verdict::Delete);
        // Another bug, or none, leaves the decision alone.
        let other = Bugs::from([Bug::LeakLoadBalancers]);
        assert_eq!(with_bugs(decide(true, true, None, None), &other), Verdict::RemoveShutdownTaint);
        assert_eq!(with_bugs(decide(true, true, None, None), &Bugs::new()), Verdict::RemoveShutdownTaint);
    }
}

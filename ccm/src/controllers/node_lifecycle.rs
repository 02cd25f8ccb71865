//! cloud-node-lifecycle: every `--node-monitor-period`, Ready nodes lose the shutdown taint; a node
//! that is not Ready and whose instance is shut down gets
//! `node.cloudprovider.kubernetes.io/shutdown:NoSchedule`; one whose instance no longer exists is
//! deleted (event `DeletingNode`). A cloud API error is logged and the node left alone: an
//! unreachable cloud never deletes a node.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Taint};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::events::EventType;
use serde_json::json;

use super::{CLOUD_NODE_LIFECYCLE, Common, Error, Events, Health, cloud, is_ready, name_of};
use crate::cloud::{CloudProvider, InstancesV2};
use crate::metrics::Metrics;
use crate::shutdown::Shutdown;

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

/// A decision with [`decide`]'s arguments: readiness, the shutdown taint, the cloud's answers.
pub type Decide = fn(bool, bool, Option<bool>, Option<bool>) -> Verdict;

/// Upstream's cloud-node-lifecycle controller.
pub struct CloudNodeLifecycle {
    client: Client,
    cloud: Arc<dyn CloudProvider>,
    events: Events,
    metrics: Arc<Metrics>,
    health: Health,
    /// `--node-monitor-period`: how often every node is looked at.
    monitor_period: Duration,
    /// What the controller acts on; [`decide`] unless set from outside ([`Self::deciding_with`]).
    decide: Decide,
}

impl CloudNodeLifecycle {
    pub fn new(common: Common, monitor_period: Duration) -> Self {
        let Common { client, cloud, metrics, health } = common;
        let events = Events::of(CLOUD_NODE_LIFECYCLE, client.clone());
        CloudNodeLifecycle { client, cloud, events, metrics, health, monitor_period, decide }
    }

    /// The controller acting on `decide` instead of [`decide`].
    pub fn deciding_with(self, decide: Decide) -> Self {
        CloudNodeLifecycle { decide, ..self }
    }

    /// Looks at every node each period until `shutdown`; a pass under way is finished first.
    pub async fn run(self, shutdown: Shutdown) {
        let mut ticker = tokio::time::interval(self.monitor_period);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                () = shutdown.requested() => break,
            }
            self.health.beat(CLOUD_NODE_LIFECYCLE, self.monitor_period * 3);
            if let Err(error) = self.monitor_nodes().await {
                self.metrics.failed(CLOUD_NODE_LIFECYCLE);
                tracing::warn!(%error, "cloud-node-lifecycle: listing nodes failed");
            }
        }
        tracing::info!("cloud-node-lifecycle controller stopped");
    }

    async fn monitor_nodes(&self) -> Result<(), Error> {
        let Some(instances) = self.cloud.instances_v2() else { return Ok(()) };
        let api: Api<Node> = Api::all(self.client.clone());
        for node in super::list_nodes(&api).await? {
            let _timer = self.metrics.reconcile(CLOUD_NODE_LIFECYCLE);
            if let Err(error) = self.monitor_node(&api, &node, instances).await {
                self.metrics.failed(CLOUD_NODE_LIFECYCLE);
                tracing::warn!(node = %name_of(&node), %error, "cloud-node-lifecycle: left the node alone");
            }
        }
        Ok(())
    }

    async fn monitor_node(&self, api: &Api<Node>, node: &Node, instances: &dyn InstancesV2) -> Result<(), Error> {
        let ready = is_ready(node);
        let tainted = has_shutdown_taint(node);
        let (shutdown, exists) = if ready { (None, None) } else { ask_cloud(node, instances).await? };
        let name = name_of(node);
        match (self.decide)(ready, tainted, shutdown, exists) {
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
                let note = format!("Deleting node {name} because it does not exist in the cloud provider");
                self.events.publish(node, EventType::Normal, "DeletingNode", note).await;
                api.delete(&name, &DeleteParams::default()).await?;
                tracing::info!(node = %name, "instance no longer exists: deleted the node");
            }
        }
        Ok(())
    }
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
    use http::Method;
    use serde_json::Value;

    use super::*;
    use crate::controllers::fixtures::{EVENTS, FakeCloud, FakeInstance, mock_client, played, within_5s};

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

    fn node(name: &str, ready: bool, taints: Value) -> Value {
        let ready = if ready { "True" } else { "False" };
        json!({
            "metadata": {"name": name, "resourceVersion": format!("rv-{name}")},
            "spec": {"taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": ready}]},
        })
    }

    fn shutdown_taint() -> Value {
        json!({"key": SHUTDOWN_TAINT_KEY, "effect": "NoSchedule"})
    }

    fn node_list(items: Vec<Value>) -> Value {
        json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "10"}, "items": items})
    }

    fn lifecycle(cloud: Arc<FakeCloud>, client: Client) -> CloudNodeLifecycle {
        CloudNodeLifecycle::new(
            Common { client, cloud, metrics: Arc::default(), health: Health::default() },
            Duration::from_secs(5),
        )
    }

    /// `stopped` is NotReady on a shut-down instance, `back` is Ready with the taint, `gone` has no
    /// instance any more, `fine` is Ready: one pass taints, untaints, deletes and leaves alone.
    #[tokio::test]
    async fn one_pass_taints_the_shut_down_untaints_the_ready_and_deletes_the_gone() {
        let mut stopped = FakeInstance::running("stopped", "10.0.0.1");
        stopped.shut_down = true;
        let instances = [("stopped", stopped), ("back", FakeInstance::running("back", "10.0.0.2"))];
        let cloud = Arc::new(FakeCloud::with_instances(instances));
        let nodes = vec![
            node("stopped", false, json!([{"key": "dedicated", "effect": "NoSchedule"}])),
            node("back", true, json!([shutdown_taint()])),
            node("gone", false, json!([])),
            node("fine", true, json!([])),
        ];
        let (client, server) = mock_client();
        let verifier = server.verify(|mut server| async move {
            let list = server.expect(Method::GET, "/api/v1/nodes").await;
            assert!(list.query.split('&').any(|param| param == "limit=250"), "a page at a time: {}", list.query);
            list.respond(node_list(nodes.clone()));

            let taint = server.expect(Method::PATCH, "/api/v1/nodes/stopped").await;
            assert_eq!(taint.content_type, "application/merge-patch+json");
            let taints = json!([{"key": "dedicated", "effect": "NoSchedule"}, shutdown_taint()]);
            assert_eq!(taint.body, json!({"metadata": {"resourceVersion": "rv-stopped"}, "spec": {"taints": taints}}));
            taint.respond(&nodes[0]);

            let untaint = server.expect(Method::PATCH, "/api/v1/nodes/back").await;
            assert_eq!(untaint.body, json!({"metadata": {"resourceVersion": "rv-back"}, "spec": {"taints": []}}));
            untaint.respond(&nodes[1]);

            let event = server.expect(Method::POST, EVENTS).await;
            assert_eq!(event.body["reason"], "DeletingNode");
            assert_eq!(event.body["note"], "Deleting node gone because it does not exist in the cloud provider");
            assert_eq!(event.body["reportingController"], "cloud-node-lifecycle-controller");
            assert_eq!(event.body["regarding"]["name"], "gone");
            event.echo();
            server.expect(Method::DELETE, "/api/v1/nodes/gone").await.respond(&nodes[2]);
            server
        });

        let result = within_5s(lifecycle(cloud.clone(), client).monitor_nodes()).await;

        played(verifier).await.assert_no_more_requests().await;
        result.unwrap();
        // Ready nodes are not asked about; a node whose instance is not shut down is asked whether it exists.
        assert_eq!(cloud.calls(), ["instance_shutdown stopped", "instance_shutdown gone", "instance_exists gone"]);
    }

    #[tokio::test]
    async fn the_controller_acts_on_a_decision_set_from_outside() {
        fn leave_alone(_: bool, _: bool, _: Option<bool>, _: Option<bool>) -> Verdict {
            Verdict::Nothing
        }
        let (client, server) = mock_client();
        let verifier = server.verify(|mut server| async move {
            let list = server.expect(Method::GET, "/api/v1/nodes").await;
            list.respond(node_list(vec![node("back", true, json!([shutdown_taint()]))]));
            server
        });

        let controller = lifecycle(Arc::default(), client).deciding_with(leave_alone);
        let result = within_5s(controller.monitor_nodes()).await;

        played(verifier).await.assert_no_more_requests().await;
        result.unwrap();
    }
}

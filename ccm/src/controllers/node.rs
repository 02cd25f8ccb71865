//! cloud-node: initialises nodes a kubelet registered with `--cloud-provider=external` (providerID,
//! instance-type/zone/region labels, the uninitialized taint removed, all in one update; then the
//! cloud's addresses; event `Synced`), and refreshes every node's addresses each
//! `--node-status-update-frequency`.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;

use super::{CLOUD_NODE, Common, Error, Events, Health, cloud, name_of};
use crate::cloud::{CloudProvider, InstancesV2};
use crate::metrics::Metrics;
use crate::node::{
    NodeInitError, addresses_changed, desired_node_addresses, initialized_node, needs_cloud_initialization,
};
use crate::shutdown::Shutdown;

/// Upstream's cloud-node controller.
pub struct CloudNode {
    client: Client,
    cloud: Arc<dyn CloudProvider>,
    events: Events,
    metrics: Arc<Metrics>,
    health: Health,
    /// `--node-status-update-frequency`: how often each node's addresses are refreshed.
    status_update_frequency: Duration,
}

impl CloudNode {
    pub fn new(common: Common, status_update_frequency: Duration) -> Self {
        let Common { client, cloud, metrics, health } = common;
        let events = Events::of(CLOUD_NODE, client.clone());
        CloudNode { client, cloud, events, metrics, health, status_update_frequency }
    }

    /// Runs until `shutdown`, then lets the reconciles under way finish.
    pub async fn run(self: Arc<Self>, shutdown: Shutdown) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let beat = self.status_update_frequency * 2;
        self.health.beat(CLOUD_NODE, beat);
        // The controller's own store keeps each node slimmed (no managedFields): what it reconciles
        // from never needs them, and they were half its memory at 1,000 nodes.
        let (reader, writer) = reflector::store();
        let nodes = watcher(nodes, watcher::Config::default())
            .default_backoff()
            .modify(super::slim_node)
            .reflect(writer)
            .touched_objects();
        Controller::for_stream(nodes, reader)
            .graceful_shutdown_on(shutdown.requested())
            .run(Self::reconcile, Self::error_policy, self.clone())
            .for_each(|result| {
                self.health.beat(CLOUD_NODE, beat);
                if let Err(error) = result {
                    tracing::debug!(%error, "cloud-node reconcile failed");
                }
                futures::future::ready(())
            })
            .await;
        tracing::info!("cloud-node controller stopped");
    }

    async fn reconcile(node: Arc<Node>, this: Arc<Self>) -> Result<Action, Error> {
        let _timer = this.metrics.reconcile(CLOUD_NODE);
        let Some(instances) = this.cloud.instances_v2() else {
            return Ok(Action::await_change());
        };
        if needs_cloud_initialization(&node) {
            this.initialize(&node, instances).await?;
        } else {
            this.sync_addresses(&node, instances).await?;
        }
        Ok(Action::requeue(this.status_update_frequency))
    }

    fn error_policy(node: Arc<Node>, error: &Error, this: Arc<Self>) -> Action {
        this.metrics.failed(CLOUD_NODE);
        tracing::warn!(node = %name_of(&node), %error, "failed to sync node; will retry");
        Action::requeue(Duration::from_secs(5))
    }

    async fn initialize(&self, node: &Node, instances: &dyn InstancesV2) -> Result<(), Error> {
        let name = name_of(node);
        let metadata = instances.instance_metadata(node).await.map_err(cloud("instance_metadata"))?;
        // Fails (and the taint stays) when the cloud gives no providerID or the provided IP is not its.
        let updated = initialized_node(node, &metadata)?;
        let api: Api<Node> = Api::all(self.client.clone());
        // A replace carries the resourceVersion: a concurrent change makes it conflict and retry.
        let replaced = api.replace(&name, &PostParams::default(), &updated).await?;
        if let Some(addresses) = desired_addresses(&replaced, &metadata.node_addresses)?
            && addresses_changed(&replaced, &addresses)
        {
            patch_addresses(&api, &name, &addresses).await?;
        }
        tracing::info!(node = %name, provider_id = ?updated.spec.as_ref().and_then(|s| s.provider_id.as_ref()), "initialised node");
        self.events.publish(node, EventType::Normal, "Synced", "Node synced successfully".into()).await;
        Ok(())
    }

    async fn sync_addresses(&self, node: &Node, instances: &dyn InstancesV2) -> Result<(), Error> {
        let metadata = match instances.instance_metadata(node).await {
            Ok(metadata) => metadata,
            // The instance is gone: cloud-node-lifecycle deals with that, not this controller.
            Err(crate::cloud::CloudError::InstanceNotFound) => return Ok(()),
            Err(error) => return Err(cloud("instance_metadata")(error)),
        };
        let name = name_of(node);
        if let Some(addresses) = desired_addresses(node, &metadata.node_addresses)?
            && addresses_changed(node, &addresses)
        {
            patch_addresses(&Api::all(self.client.clone()), &name, &addresses).await?;
            tracing::info!(node = %name, "updated node addresses");
        }
        Ok(())
    }
}

/// The addresses the node should have (None: the cloud reported none), honouring its provided IP.
fn desired_addresses(
    node: &Node,
    cloud_addresses: &[k8s_openapi::api::core::v1::NodeAddress],
) -> Result<Option<Vec<k8s_openapi::api::core::v1::NodeAddress>>, Error> {
    desired_node_addresses(node, cloud_addresses)
        .map_err(|source| NodeInitError::InvalidProvidedNodeIp { node: name_of(node), source }.into())
}

async fn patch_addresses(
    api: &Api<Node>,
    name: &str,
    addresses: &[k8s_openapi::api::core::v1::NodeAddress],
) -> Result<(), Error> {
    // A JSON merge patch replaces the list whole; a strategic one would merge it by address type.
    let patch = json!({ "status": { "addresses": addresses } });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use http::Method;
    use serde_json::json;

    use super::*;
    use crate::controllers::fixtures::{EVENTS, FakeCloud, FakeInstance, from_json, mock_client, played, within_5s};
    use crate::node::UNINITIALIZED_TAINT_KEY;

    const FREQUENCY: Duration = Duration::from_secs(300);

    fn uninitialized_node() -> Node {
        from_json(json!({
            "metadata": {"name": "node-1", "uid": "uid-1", "resourceVersion": "7", "labels": {"team": "a"}},
            "spec": {"taints": [
                {"key": UNINITIALIZED_TAINT_KEY, "value": "true", "effect": "NoSchedule"},
                {"key": "dedicated", "effect": "NoSchedule"},
            ]},
            "status": {"addresses": [{"type": "Hostname", "address": "node-1"}]},
        }))
    }

    #[tokio::test]
    async fn an_uninitialized_node_is_initialized_in_one_update_then_gets_the_clouds_addresses() {
        let cloud = Arc::new(FakeCloud::with_instances([("node-1", FakeInstance::running("node-1", "10.0.0.1"))]));
        let (client, server) = mock_client();
        let controller = Arc::new(CloudNode::new(
            Common { client, cloud: cloud.clone(), metrics: Arc::default(), health: Health::default() },
            FREQUENCY,
        ));
        let verifier = server.verify(|mut server| async move {
            let replace = server.expect(Method::PUT, "/api/v1/nodes/node-1").await;
            let node = &replace.body;
            assert_eq!(node["metadata"]["resourceVersion"], "7", "a replace that conflicts with a concurrent change");
            assert_eq!(node["spec"]["providerID"], "fake://node-1");
            assert_eq!(node["spec"]["taints"], json!([{"key": "dedicated", "effect": "NoSchedule"}]));
            let labels = &node["metadata"]["labels"];
            assert_eq!((&labels["team"], &labels["topology.kubernetes.io/zone"]), (&json!("a"), &json!("zone-a")));
            assert_eq!(labels["node.kubernetes.io/instance-type"], "small");
            let replaced = replace.body.clone();
            replace.echo();

            let patch = server.expect(Method::PATCH, "/api/v1/nodes/node-1/status").await;
            assert_eq!(patch.content_type, "application/merge-patch+json");
            // The cloud's addresses, and the kubelet's host name the cloud did not report.
            let addresses =
                json!([{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "node-1"}]);
            assert_eq!(patch.body, json!({"status": {"addresses": addresses}}));
            patch.respond(replaced);

            let event = server.expect(Method::POST, EVENTS).await;
            assert_eq!(
                (&event.body["reason"], &event.body["note"]),
                (&json!("Synced"), &json!("Node synced successfully"))
            );
            assert_eq!(event.body["reportingController"], "cloud-node-controller");
            assert_eq!(
                (&event.body["regarding"]["kind"], &event.body["regarding"]["name"]),
                (&json!("Node"), &json!("node-1"))
            );
            event.echo();
            server
        });

        let action = within_5s(CloudNode::reconcile(Arc::new(uninitialized_node()), controller)).await;

        played(verifier).await.assert_no_more_requests().await;
        assert_eq!(action.unwrap(), Action::requeue(FREQUENCY));
        assert_eq!(cloud.calls(), ["instance_metadata node-1"]);
    }
}

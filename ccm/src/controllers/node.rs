//! cloud-node: initialises nodes a kubelet registered with `--cloud-provider=external` (providerID,
//! instance-type/zone/region labels, the uninitialized taint removed, all in one update; then the
//! cloud's addresses; event `Synced`), and refreshes every node's addresses each
//! `--node-status-update-frequency`.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;

use super::{CLOUD_NODE, Context, Error, cloud, name_of};
use crate::cloud::InstancesV2;
use crate::node::{
    NodeInitError, addresses_changed, desired_node_addresses, initialized_node, needs_cloud_initialization,
};

/// Runs until the process stops.
pub async fn run(ctx: Arc<Context>) {
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let beat = ctx.settings.node_status_update_frequency * 2;
    ctx.health.beat(CLOUD_NODE, beat);
    // The controller's own store keeps each node slimmed (no managedFields): what it reconciles
    // from never needs them, and they were half its memory at 1,000 nodes.
    let (reader, writer) = reflector::store();
    let nodes = watcher(nodes, watcher::Config::default())
        .default_backoff()
        .modify(super::slim_node)
        .reflect(writer)
        .touched_objects();
    Controller::for_stream(nodes, reader)
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|result| {
            let ctx = ctx.clone();
            async move {
                ctx.health.beat(CLOUD_NODE, beat);
                if let Err(error) = result {
                    tracing::debug!(%error, "cloud-node reconcile failed");
                }
            }
        })
        .await;
}

async fn reconcile(node: Arc<Node>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile(CLOUD_NODE);
    let Some(instances) = ctx.cloud.instances_v2() else {
        return Ok(Action::await_change());
    };
    if needs_cloud_initialization(&node) {
        initialize(&node, instances, &ctx).await?;
    } else {
        sync_addresses(&node, instances, &ctx).await?;
    }
    Ok(Action::requeue(ctx.settings.node_status_update_frequency))
}

fn error_policy(node: Arc<Node>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.failed(CLOUD_NODE);
    tracing::warn!(node = %name_of(&node), %error, "failed to sync node; will retry");
    Action::requeue(Duration::from_secs(5))
}

async fn initialize(node: &Node, instances: &dyn InstancesV2, ctx: &Context) -> Result<(), Error> {
    let name = name_of(node);
    let metadata = instances.instance_metadata(node).await.map_err(cloud("instance_metadata"))?;
    // Fails (and the taint stays) when the cloud gives no providerID or the provided IP is not its.
    let updated = initialized_node(node, &metadata)?;
    let api: Api<Node> = Api::all(ctx.client.clone());
    // A replace carries the resourceVersion: a concurrent change makes it conflict and retry.
    let replaced = api.replace(&name, &PostParams::default(), &updated).await?;
    if let Some(addresses) = desired_addresses(&replaced, &metadata.node_addresses)?
        && addresses_changed(&replaced, &addresses)
    {
        patch_addresses(&api, &name, &addresses).await?;
    }
    tracing::info!(node = %name, provider_id = ?updated.spec.as_ref().and_then(|s| s.provider_id.as_ref()), "initialised node");
    ctx.event(super::CLOUD_NODE, node, EventType::Normal, "Synced", "Node synced successfully".into()).await;
    Ok(())
}

async fn sync_addresses(node: &Node, instances: &dyn InstancesV2, ctx: &Context) -> Result<(), Error> {
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
        patch_addresses(&Api::all(ctx.client.clone()), &name, &addresses).await?;
        tracing::info!(node = %name, "updated node addresses");
    }
    Ok(())
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

//! The four controllers of upstream's cloud-controller-manager, on kube-rs:
//! [`node`] (cloud-node), [`node_lifecycle`] (cloud-node-lifecycle), [`service`] (load balancers)
//! and [`route`]. Each is a struct owning what it uses (the client, the cloud, the metrics, its
//! flags, and its own [`Events`] if it publishes any), runs against whatever parts of the
//! [`CloudProvider`] the cloud offers, reports its liveness to [`Health`] for `/healthz`, and
//! returns once its [`Shutdown`](crate::shutdown::Shutdown) is requested.
//!
//! [`CloudProvider`]: crate::cloud::CloudProvider

pub mod node;
pub mod node_lifecycle;
pub mod route;
pub mod service;

#[cfg(test)]
pub(crate) mod fixtures;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, ListParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::cloud::{CloudError, CloudProvider};
use crate::metrics::Metrics;
use crate::node::NodeInitError;

/// Controller names as `--controllers` spells them.
pub const CLOUD_NODE: &str = "cloud-node";
pub const CLOUD_NODE_LIFECYCLE: &str = "cloud-node-lifecycle";
pub const SERVICE: &str = "service";
pub const ROUTE: &str = "route";
pub const ALL: &[&str] = &[CLOUD_NODE, CLOUD_NODE_LIFECYCLE, SERVICE, ROUTE];

/// Nodes a full node list reads per request: a controller listing every node holds one page of
/// whole objects at a time, not the whole cluster's.
const NODE_PAGE: u32 = 250;

/// Every node, read a page at a time and slimmed as it is read ([`slim_node`]). For the
/// controllers that look at all nodes each period (lifecycle, routes) or per service (backends).
pub async fn list_nodes(api: &Api<Node>) -> Result<Vec<Node>, kube::Error> {
    let mut nodes = Vec::new();
    let mut params = ListParams::default().limit(NODE_PAGE);
    loop {
        let page = api.list(&params).await?;
        nodes.extend(page.items.into_iter().map(|mut node| {
            slim_node(&mut node);
            node
        }));
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(nodes),
        }
    }
}

/// A node without what no controller here reads and what weighs most at scale: its managedFields
/// (half a node's memory, per a heap profile at 1,000 nodes) and the kubelet's image list. Writes
/// stay safe: an update or patch that leaves managedFields out or empty keeps the server's.
pub fn slim_node(node: &mut Node) {
    node.metadata.managed_fields = None;
    if let Some(status) = node.status.as_mut() {
        status.images = None;
    }
}

/// What every controller is built from: the API client, the cloud, and where it reports its
/// metrics and liveness.
#[derive(Clone)]
pub struct Common {
    pub client: Client,
    pub cloud: Arc<dyn CloudProvider>,
    pub metrics: Arc<Metrics>,
    pub health: Health,
}

/// A controller's events, reported as upstream's controller of that name reports them
/// ([`event_source`]).
pub struct Events {
    recorder: Recorder,
}

impl Events {
    /// The recorder of `controller` (one of [`ALL`]).
    pub fn of(controller: &'static str, client: Client) -> Self {
        let reporter = Reporter { controller: event_source(controller).into(), instance: hostname() };
        Events { recorder: Recorder::new(client, reporter) }
    }

    /// Publishes an event about `object`; a failure to publish is logged, never fatal.
    pub async fn publish<K: kube::Resource<DynamicType = ()>>(
        &self,
        object: &K,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let event = Event { type_, reason: reason.into(), note: Some(note), action: reason.into(), secondary: None };
        if let Err(error) = self.recorder.publish(&event, &object.object_ref(&())).await {
            tracing::warn!(%error, reason, "could not publish event");
        }
    }
}

/// The component upstream's controller of that name reports its events as (the `EventSource` of
/// its recorder): events show the same reporting controller from either CCM.
pub fn event_source(controller: &str) -> &'static str {
    match controller {
        CLOUD_NODE => "cloud-node-controller",
        CLOUD_NODE_LIFECYCLE => "cloud-node-lifecycle-controller",
        SERVICE => "service-controller",
        ROUTE => "route_controller",
        _ => "cloud-controller-manager",
    }
}

/// This machine's (or pod's) host name, which identifies a replica in events and the leader Lease.
pub fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|h| h.trim().to_string())
}

/// Why a reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("cloud provider, {operation}: {source}")]
    Cloud { operation: &'static str, source: CloudError },
    #[error(transparent)]
    NodeInit(#[from] NodeInitError),
    #[error("finalizer: {0}")]
    Finalizer(String),
}

/// Wraps a cloud call's error with the operation's name.
pub fn cloud(operation: &'static str) -> impl FnOnce(CloudError) -> Error {
    move |source| Error::Cloud { operation, source }
}

/// Per-controller liveness: a controller is healthy while its last sign of life is recent enough.
#[derive(Default, Clone)]
pub struct Health {
    beats: Arc<Mutex<BTreeMap<&'static str, (Instant, Duration)>>>,
}

impl Health {
    /// Records that `controller` is alive and will beat again within `max_silence`.
    pub fn beat(&self, controller: &'static str, max_silence: Duration) {
        self.beats.lock().expect("health lock").insert(controller, (Instant::now(), max_silence));
    }

    /// Each registered controller and whether it is healthy.
    pub fn checks(&self) -> Vec<(&'static str, bool)> {
        let beats = self.beats.lock().expect("health lock");
        beats.iter().map(|(name, (at, max))| (*name, at.elapsed() <= *max)).collect()
    }
}

/// The node's name.
pub fn name_of(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

/// Whether the node's Ready condition is True.
pub fn is_ready(node: &Node) -> bool {
    condition_status(node, "Ready") == Some("True")
}

/// The status of one of the node's conditions.
pub fn condition_status<'a>(node: &'a Node, type_: &str) -> Option<&'a str> {
    node.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_).map(|c| c.status.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_controller_reports_events_under_upstreams_component_name() {
        // k8s.io/cloud-provider v0.37.1: the EventSource of each controller's recorder.
        let sources: Vec<(&str, &str)> = ALL.iter().map(|&c| (c, event_source(c))).collect();
        assert_eq!(
            sources,
            [
                (CLOUD_NODE, "cloud-node-controller"),
                (CLOUD_NODE_LIFECYCLE, "cloud-node-lifecycle-controller"),
                (SERVICE, "service-controller"),
                (ROUTE, "route_controller"),
            ]
        );
    }
}

//! The cloud a provider plugs in, mirroring upstream `k8s.io/cloud-provider`'s `cloudprovider.Interface`.
//!
//! A provider implements [`CloudProvider`] and whichever of [`InstancesV2`], [`LoadBalancer`] and
//! [`Routes`] its cloud supports; the controllers ask the provider for each part and skip what it
//! does not offer.

use std::collections::BTreeMap;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, NodeAddress, Service};

/// Upstream prefixes the load balancer name with a letter because GCE requires names to start with one.
const LOAD_BALANCER_NAME_PREFIX: &str = "a";
/// Upstream caps the load balancer name because AWS requires names shorter than 32 bytes.
const LOAD_BALANCER_NAME_MAX_LEN: usize = 32;

/// What a cloud call can fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CloudError {
    /// The cloud has no instance for the node (upstream `cloudprovider.InstanceNotFound`).
    #[error("instance not found")]
    InstanceNotFound,
    /// The provider does not implement this call (upstream `cloudprovider.NotImplemented`).
    #[error("unimplemented")]
    NotImplemented,
    /// The cloud API failed or timed out; the message says how.
    #[error("cloud API call failed: {0}")]
    Api(String),
}

/// What the cloud knows about a node's instance (upstream `cloudprovider.InstanceMetadata`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InstanceMetadata {
    /// The `spec.providerID` for the node, e.g. `local://instance-1`; may be empty if the node has one.
    pub provider_id: String,
    /// The instance type, e.g. `m5.large`; empty when unknown.
    pub instance_type: String,
    /// The node's addresses as the cloud sees them.
    pub node_addresses: Vec<NodeAddress>,
    /// The failure domain; empty when unknown.
    pub zone: String,
    /// The region; empty when unknown.
    pub region: String,
    /// Provider-specific labels for the node; keys in Kubernetes' own namespaces are discarded.
    pub additional_labels: BTreeMap<String, String>,
}

/// A route sending a pod CIDR to a node (upstream `cloudprovider.Route`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Route {
    /// The cloud's name for the route; empty until the cloud has created it.
    pub name: String,
    /// The name of the node the traffic goes to.
    pub target_node: String,
    /// The CIDR routed to the node, e.g. `10.244.1.0/24`.
    pub destination_cidr: String,
    /// True when the route's target no longer exists, so the cloud drops its traffic.
    pub blackhole: bool,
}

/// The node's instance in the cloud (upstream `cloudprovider.InstancesV2`).
#[async_trait]
pub trait InstancesV2: Send + Sync {
    /// Whether the node's instance still exists; `false` lets the lifecycle controller delete the node.
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError>;

    /// Whether the node's instance exists but is shut down.
    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError>;

    /// The node's provider ID, type, addresses, zone, region and extra labels.
    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, CloudError>;
}

/// Load balancers for `type: LoadBalancer` services (upstream `cloudprovider.LoadBalancer`).
#[async_trait]
pub trait LoadBalancer: Send + Sync {
    /// The service's load balancer status, and whether it exists (upstream returns `(status, exists, err)`).
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(Option<LoadBalancerStatus>, bool), CloudError>;

    /// The cloud's name for the service's load balancer; upstream's default unless overridden.
    fn get_load_balancer_name(&self, _cluster_name: &str, service: &Service) -> String {
        default_load_balancer_name(service)
    }

    /// Creates or updates the service's load balancer to front `nodes`, returning its status.
    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, CloudError>;

    /// Points the service's existing load balancer at `nodes`.
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), CloudError>;

    /// Deletes the service's load balancer; succeeds if it is already gone.
    async fn ensure_load_balancer_deleted(&self, cluster_name: &str, service: &Service) -> Result<(), CloudError>;
}

/// Pod network routes between nodes (upstream `cloudprovider.Routes`).
#[async_trait]
pub trait Routes: Send + Sync {
    /// All routes the cloud holds for the cluster.
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError>;

    /// Creates `route`; `name_hint` (the node's UID) lets the cloud name it stably.
    async fn create_route(&self, cluster_name: &str, name_hint: &str, route: &Route) -> Result<(), CloudError>;

    /// Deletes `route`.
    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<(), CloudError>;
}

/// A cloud provider (upstream `cloudprovider.Interface`): its name and the parts it supports.
///
/// Each part defaults to unsupported (`None`), so a provider overrides only what its cloud offers.
pub trait CloudProvider: Send + Sync {
    /// The name passed as `--cloud-provider`.
    fn provider_name(&self) -> &str;

    /// Instances, if the cloud supports them.
    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        None
    }

    /// Load balancers, if the cloud supports them.
    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        None
    }

    /// Routes, if the cloud supports them.
    fn routes(&self) -> Option<&dyn Routes> {
        None
    }

    /// Whether the provider identifies the cluster's resources by a cluster ID.
    fn has_cluster_id(&self) -> bool;
}

/// A cloud whose load balancers are `load_balancer` (a decorator of the inner cloud's, which it
/// usually holds) while the inner cloud has some; everything else is the inner cloud's. For
/// changing what a cloud's load balancers do and nothing else.
pub struct WithLoadBalancer<L> {
    pub inner: std::sync::Arc<dyn CloudProvider>,
    pub load_balancer: L,
}

impl<L: LoadBalancer> CloudProvider for WithLoadBalancer<L> {
    fn provider_name(&self) -> &str {
        self.inner.provider_name()
    }

    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        self.inner.instances_v2()
    }

    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        self.inner.load_balancer().map(|_| &self.load_balancer as &dyn LoadBalancer)
    }

    fn routes(&self) -> Option<&dyn Routes> {
        self.inner.routes()
    }

    fn has_cluster_id(&self) -> bool {
        self.inner.has_cluster_id()
    }
}

/// The load balancers a [`WithLoadBalancer`] decorator wraps: the inner cloud's, looked up on
/// each call, for the calls the decorator passes on unchanged.
#[derive(Clone)]
pub struct InnerLoadBalancers(pub std::sync::Arc<dyn CloudProvider>);

impl InnerLoadBalancers {
    /// The inner cloud's load balancers; [`CloudError::NotImplemented`] when it has none.
    pub fn get(&self) -> Result<&dyn LoadBalancer, CloudError> {
        self.0.load_balancer().ok_or(CloudError::NotImplemented)
    }

    /// The inner cloud's name for `service`'s load balancer; upstream's default when it has none.
    pub fn name(&self, cluster_name: &str, service: &Service) -> String {
        match self.0.load_balancer() {
            Some(inner) => inner.get_load_balancer_name(cluster_name, service),
            None => default_load_balancer_name(service),
        }
    }
}

/// Upstream's `cloudprovider.DefaultLoadBalancerName`: `"a"` + the service UID without dashes,
/// cut to 32 bytes.
pub fn default_load_balancer_name(service: &Service) -> String {
    let uid = service.metadata.uid.as_deref().unwrap_or_default();
    let name = format!("{LOAD_BALANCER_NAME_PREFIX}{}", uid.replace('-', ""));
    truncate_to_bytes(name, LOAD_BALANCER_NAME_MAX_LEN)
}

/// Cuts `text` to at most `max` bytes without splitting a character.
fn truncate_to_bytes(mut text: String, max: usize) -> String {
    let cut = (0..=max.min(text.len())).rev().find(|&index| text.is_char_boundary(index)).unwrap_or(0);
    text.truncate(cut);
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn service_with_uid(uid: &str) -> Service {
        Service { metadata: ObjectMeta { uid: Some(uid.to_owned()), ..ObjectMeta::default() }, ..Service::default() }
    }

    #[test]
    fn default_load_balancer_name_strips_dashes_and_cuts_to_32_bytes() {
        let service = service_with_uid("6f2a1c3e-8b4d-4e7f-9a0b-1c2d3e4f5a6b");

        let name = default_load_balancer_name(&service);

        assert_eq!(name, "a6f2a1c3e8b4d4e7f9a0b1c2d3e4f5a6");
        assert_eq!(name.len(), 32);
    }

    #[test]
    fn default_load_balancer_name_keeps_short_uids_whole() {
        assert_eq!(default_load_balancer_name(&service_with_uid("ab-cd")), "aabcd");
    }

    #[test]
    fn default_load_balancer_name_of_service_without_uid_is_the_prefix() {
        assert_eq!(default_load_balancer_name(&Service::default()), "a");
    }

    #[test]
    fn truncation_never_splits_a_character() {
        // "é" is two bytes, straddling the cut at byte 3.
        assert_eq!(truncate_to_bytes("abé".repeat(2), 3), "ab");
    }

    #[test]
    fn cloud_errors_read_like_upstream() {
        assert_eq!(CloudError::InstanceNotFound.to_string(), "instance not found");
        assert_eq!(CloudError::NotImplemented.to_string(), "unimplemented");
        assert_eq!(
            CloudError::Api("timed out after 5s".into()).to_string(),
            "cloud API call failed: timed out after 5s"
        );
    }

    struct InstancesOnlyCloud;

    #[async_trait]
    impl InstancesV2 for InstancesOnlyCloud {
        async fn instance_exists(&self, _node: &Node) -> Result<bool, CloudError> {
            Ok(true)
        }

        async fn instance_shutdown(&self, _node: &Node) -> Result<bool, CloudError> {
            Err(CloudError::NotImplemented)
        }

        async fn instance_metadata(&self, _node: &Node) -> Result<InstanceMetadata, CloudError> {
            Err(CloudError::InstanceNotFound)
        }
    }

    impl CloudProvider for InstancesOnlyCloud {
        fn provider_name(&self) -> &str {
            "instances-only"
        }

        fn instances_v2(&self) -> Option<&dyn InstancesV2> {
            Some(self)
        }

        fn has_cluster_id(&self) -> bool {
            false
        }
    }

    #[test]
    fn unimplemented_parts_default_to_unsupported() {
        let cloud: &dyn CloudProvider = &InstancesOnlyCloud;

        assert!(cloud.instances_v2().is_some());
        assert!(cloud.load_balancer().is_none());
        assert!(cloud.routes().is_none());
    }

    struct NamedByDefault;

    #[async_trait]
    impl LoadBalancer for NamedByDefault {
        async fn get_load_balancer(
            &self,
            _cluster_name: &str,
            _service: &Service,
        ) -> Result<(Option<LoadBalancerStatus>, bool), CloudError> {
            Ok((None, false))
        }

        async fn ensure_load_balancer(
            &self,
            _cluster_name: &str,
            _service: &Service,
            _nodes: &[Node],
        ) -> Result<LoadBalancerStatus, CloudError> {
            Err(CloudError::NotImplemented)
        }

        async fn update_load_balancer(
            &self,
            _cluster_name: &str,
            _service: &Service,
            _nodes: &[Node],
        ) -> Result<(), CloudError> {
            Err(CloudError::NotImplemented)
        }

        async fn ensure_load_balancer_deleted(
            &self,
            _cluster_name: &str,
            _service: &Service,
        ) -> Result<(), CloudError> {
            Ok(())
        }
    }

    #[test]
    fn load_balancer_name_defaults_to_upstreams_name() {
        let service = service_with_uid("1234-5678");

        assert_eq!(NamedByDefault.get_load_balancer_name("kubernetes", &service), "a12345678");
    }
}

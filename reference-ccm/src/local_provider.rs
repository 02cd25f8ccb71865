//! The `local` cloud provider: ccm's [`CloudProvider`], [`InstancesV2`], [`LoadBalancer`] and
//! [`Routes`] over the local cloud's HTTP API ([`local_cloud::LocalCloud`]), as a provider's own
//! CCM implements upstream's `cloudprovider.Interface` over its cloud's SDK. Node provider IDs are
//! `local://<instance-id>`; load balancers are named as upstream names them; a failed call is a
//! [`CloudError::Api`] naming the operation, the method and the URL.

use async_trait::async_trait;
use ipnet::IpNet;
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, NodeAddress, Service};

use ccm::cloud::{self, CloudError, CloudProvider, InstanceMetadata, InstancesV2, LoadBalancer, Routes};
use local_cloud::api::{
    self, CreateRoute, Instance, InstanceState, LoadBalancerPort, LoadBalancerSpec, SessionAffinity, UpdateBackends,
};
use local_cloud::{ApiError, LocalCloud, PROVIDER_ID_PREFIX, PROVIDER_NAME};

/// The `local` provider over one local cloud.
#[derive(Debug, Clone)]
pub struct LocalProvider {
    cloud: LocalCloud,
}

impl LocalProvider {
    pub fn new(cloud: LocalCloud) -> Self {
        LocalProvider { cloud }
    }

    /// The client it calls the cloud with.
    pub fn cloud(&self) -> &LocalCloud {
        &self.cloud
    }

    /// The node's instance: by provider ID when the node has one, else by node name.
    async fn find_instance(&self, operation: &'static str, node: &Node) -> Result<Option<Instance>, CloudError> {
        let provider_id = node.spec.as_ref().and_then(|spec| spec.provider_id.as_deref()).filter(|id| !id.is_empty());
        if let Some(provider_id) = provider_id {
            let id = instance_id(operation, provider_id)?;
            return self.cloud.instance_by_id(operation, id).await.map_err(api_error);
        }
        match node.metadata.name.as_deref() {
            Some(name) if !name.is_empty() => self.cloud.instance_by_name(operation, name).await.map_err(api_error),
            _ => Ok(None),
        }
    }
}

fn api_error(error: ApiError) -> CloudError {
    CloudError::Api(error.message)
}

/// The instance ID in a `local://` provider ID.
fn instance_id<'a>(operation: &str, provider_id: &'a str) -> Result<&'a str, CloudError> {
    match provider_id.strip_prefix(PROVIDER_ID_PREFIX) {
        Some(id) if !id.is_empty() && !id.contains('/') => Ok(id),
        _ => Err(CloudError::Api(format!(
            "{operation}: providerID {provider_id:?} is not a local one ({PROVIDER_ID_PREFIX}<instance-id>)"
        ))),
    }
}

#[async_trait]
impl InstancesV2 for LocalProvider {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        let instance = self.find_instance("instance_exists", node).await?;
        Ok(instance.is_some_and(|instance| instance.state != InstanceState::Terminated))
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        let instance = self.find_instance("instance_shutdown", node).await?;
        let instance = instance.ok_or(CloudError::InstanceNotFound)?;
        Ok(instance.state == InstanceState::Shutdown)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, CloudError> {
        let instance = self.find_instance("instance_metadata", node).await?;
        let instance = instance.filter(|instance| instance.state != InstanceState::Terminated);
        instance.map(instance_metadata).ok_or(CloudError::InstanceNotFound)
    }
}

fn instance_metadata(instance: Instance) -> InstanceMetadata {
    let node_addresses = instance
        .addresses
        .into_iter()
        .map(|address| NodeAddress { type_: address_type(address.kind).to_owned(), address: address.address })
        .collect();
    InstanceMetadata {
        provider_id: format!("{PROVIDER_ID_PREFIX}{}", instance.id),
        instance_type: instance.instance_type,
        node_addresses,
        zone: instance.zone,
        region: instance.region,
        additional_labels: Default::default(),
    }
}

fn address_type(kind: api::AddressType) -> &'static str {
    match kind {
        api::AddressType::InternalIP => "InternalIP",
        api::AddressType::ExternalIP => "ExternalIP",
        api::AddressType::Hostname => "Hostname",
    }
}

#[async_trait]
impl LoadBalancer for LocalProvider {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(Option<LoadBalancerStatus>, bool), CloudError> {
        let name = self.get_load_balancer_name(cluster_name, service);
        let found = self.cloud.load_balancer(cluster_name, &name).await.map_err(api_error)?;
        Ok(found.map_or((None, false), |balancer| (Some(status_of(&balancer)), true)))
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, CloudError> {
        let name = self.get_load_balancer_name(cluster_name, service);
        let spec = load_balancer_spec(service, nodes)?;
        let balancer = self.cloud.put_load_balancer(cluster_name, &name, &spec).await.map_err(api_error)?;
        Ok(status_of(&balancer))
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), CloudError> {
        let name = self.get_load_balancer_name(cluster_name, service);
        let update = UpdateBackends { backends: node_names(nodes) };
        self.cloud.update_backends(cluster_name, &name, &update).await.map_err(api_error)?;
        Ok(())
    }

    async fn ensure_load_balancer_deleted(&self, cluster_name: &str, service: &Service) -> Result<(), CloudError> {
        let name = self.get_load_balancer_name(cluster_name, service);
        self.cloud.delete_load_balancer(cluster_name, &name).await.map_err(api_error)
    }
}

fn status_of(balancer: &api::LoadBalancer) -> LoadBalancerStatus {
    let ingress = balancer
        .ingress_ips
        .iter()
        .map(|ip| LoadBalancerIngress { ip: Some(ip.clone()), ..LoadBalancerIngress::default() })
        .collect();
    LoadBalancerStatus { ingress: Some(ingress) }
}

fn load_balancer_spec(service: &Service, nodes: &[Node]) -> Result<LoadBalancerSpec, CloudError> {
    let source_ranges = load_balancer_source_ranges(service)?;
    let namespace = service.metadata.namespace.as_deref().unwrap_or("default");
    let name = service.metadata.name.as_deref().unwrap_or_default();
    let ports = service.spec.iter().flat_map(|spec| spec.ports.iter().flatten());
    let ports = ports
        .map(|port| LoadBalancerPort {
            name: port.name.clone().unwrap_or_default(),
            protocol: port.protocol.clone().unwrap_or_else(|| "TCP".into()),
            port: port.port,
            node_port: port.node_port.unwrap_or_default(),
        })
        .collect();
    Ok(LoadBalancerSpec {
        service: format!("{namespace}/{name}"),
        ports,
        backends: node_names(nodes),
        source_ranges,
        health_check_node_port: health_check_node_port(service),
        session_affinity: session_affinity(service),
    })
}

/// The port the load balancer health-checks its backends on: the service's `healthCheckNodePort`
/// when it asks for `externalTrafficPolicy: Local` (upstream's `GetServiceHealthCheckPathPort`),
/// else 0 (none: every node can forward the traffic).
fn health_check_node_port(service: &Service) -> i32 {
    let Some(spec) = service.spec.as_ref() else { return 0 };
    let local =
        spec.type_.as_deref() == Some("LoadBalancer") && spec.external_traffic_policy.as_deref() == Some("Local");
    if local { spec.health_check_node_port.unwrap_or_default() } else { 0 }
}

/// The load balancer's affinity: the service's `sessionAffinity`.
fn session_affinity(service: &Service) -> SessionAffinity {
    match service.spec.as_ref().and_then(|spec| spec.session_affinity.as_deref()) {
        Some("ClientIP") => SessionAffinity::ClientIp,
        _ => SessionAffinity::None,
    }
}

/// The annotation that lists a load balancer's allowed client CIDRs, comma separated, when
/// `spec.loadBalancerSourceRanges` is empty.
pub const SOURCE_RANGES_ANNOTATION: &str = "service.beta.kubernetes.io/load-balancer-source-ranges";

/// The source range when neither the spec nor the annotation gives one: everyone.
pub const DEFAULT_SOURCE_RANGE: &str = "0.0.0.0/0";

/// The client CIDRs allowed to reach the service's load balancer, as upstream's
/// `k8s.io/cloud-provider/service/helpers.GetLoadBalancerSourceRanges` computes them:
/// `spec.loadBalancerSourceRanges` when it is not empty, else [`SOURCE_RANGES_ANNOTATION`], else
/// [`DEFAULT_SOURCE_RANGE`]. Each item is trimmed; empty items of the annotation are skipped (upstream
/// refuses them). Like upstream, each range is normalised to its network (`10.0.0.1/8` becomes
/// `10.0.0.0/8`) and duplicates are dropped; the first occurrence keeps its place. A range that is not a
/// CIDR is an error naming the service, where the range came from and the bad value.
pub fn load_balancer_source_ranges(service: &Service) -> Result<Vec<String>, CloudError> {
    let from_spec = service.spec.as_ref().and_then(|spec| spec.load_balancer_source_ranges.as_ref());
    let (source, items): (&str, Vec<&str>) = match from_spec.filter(|ranges| !ranges.is_empty()) {
        Some(ranges) => ("spec.loadBalancerSourceRanges", ranges.iter().map(|range| range.trim()).collect()),
        None => {
            let annotations = service.metadata.annotations.as_ref();
            let value = annotations.and_then(|annotations| annotations.get(SOURCE_RANGES_ANNOTATION));
            let items = value.iter().flat_map(|value| value.split(',')).map(str::trim).filter(|item| !item.is_empty());
            (SOURCE_RANGES_ANNOTATION, items.collect())
        }
    };
    let items = if items.is_empty() { vec![DEFAULT_SOURCE_RANGE] } else { items };
    let mut ranges: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let range = item.parse::<IpNet>().map_err(|_| {
            let namespace = service.metadata.namespace.as_deref().unwrap_or("default");
            let name = service.metadata.name.as_deref().unwrap_or_default();
            CloudError::Api(format!("service {namespace}/{name}: {source}: {item:?} is not a CIDR like 10.0.0.0/24"))
        })?;
        let range = range.trunc().to_string();
        if !ranges.contains(&range) {
            ranges.push(range);
        }
    }
    Ok(ranges)
}

fn node_names(nodes: &[Node]) -> Vec<String> {
    nodes.iter().filter_map(|node| node.metadata.name.clone()).collect()
}

#[async_trait]
impl Routes for LocalProvider {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<cloud::Route>, CloudError> {
        let routes = self.cloud.routes("list_routes", cluster_name).await.map_err(api_error)?;
        Ok(routes.into_iter().map(cloud_route).collect())
    }

    async fn create_route(&self, cluster_name: &str, name_hint: &str, route: &cloud::Route) -> Result<(), CloudError> {
        let request = CreateRoute {
            name_hint: name_hint.to_owned(),
            target_node: route.target_node.clone(),
            destination_cidr: route.destination_cidr.clone(),
        };
        self.cloud.create_route(cluster_name, &request).await.map_err(api_error)?;
        Ok(())
    }

    async fn delete_route(&self, cluster_name: &str, route: &cloud::Route) -> Result<(), CloudError> {
        let name = if route.name.is_empty() {
            let routes = self.cloud.routes("delete_route", cluster_name).await.map_err(api_error)?;
            let same = routes.into_iter().find(|known| known.destination_cidr == route.destination_cidr);
            match same {
                Some(known) => known.name,
                None => return Ok(()),
            }
        } else {
            route.name.clone()
        };
        self.cloud.delete_route(cluster_name, &name).await.map_err(api_error)
    }
}

fn cloud_route(route: api::Route) -> cloud::Route {
    cloud::Route {
        name: route.name,
        target_node: route.target_node,
        destination_cidr: route.destination_cidr,
        blackhole: route.blackhole,
    }
}

impl CloudProvider for LocalProvider {
    fn provider_name(&self) -> &str {
        PROVIDER_NAME
    }

    fn instances_v2(&self) -> Option<&dyn InstancesV2> {
        Some(self)
    }

    fn load_balancer(&self) -> Option<&dyn LoadBalancer> {
        Some(self)
    }

    fn routes(&self) -> Option<&dyn Routes> {
        Some(self)
    }

    fn has_cluster_id(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_must_be_local() {
        assert_eq!(instance_id("op", "local://i-0000abcd"), Ok("i-0000abcd"));
        for bad in ["aws:///us-east-1a/i-1", "local://", "local://a/b"] {
            let error = instance_id("instance_exists", bad).unwrap_err();
            assert!(matches!(&error, CloudError::Api(message) if message.contains("instance_exists")), "{error}");
        }
    }

    fn service(ranges: Option<&[&str]>, annotation: Option<&str>) -> Service {
        let mut service = serde_json::json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "nodePort": 30080}]},
        });
        if let Some(ranges) = ranges {
            service["spec"]["loadBalancerSourceRanges"] = serde_json::json!(ranges);
        }
        if let Some(annotation) = annotation {
            service["metadata"]["annotations"] = serde_json::json!({ SOURCE_RANGES_ANNOTATION: annotation });
        }
        serde_json::from_value(service).unwrap()
    }

    #[test]
    fn the_health_check_port_goes_with_local_traffic_policy_and_affinity_with_client_ip() {
        let with = |policy: &str, affinity: &str| {
            let mut service = serde_json::to_value(service(None, None)).unwrap();
            service["spec"]["externalTrafficPolicy"] = policy.into();
            service["spec"]["healthCheckNodePort"] = 32100.into();
            service["spec"]["sessionAffinity"] = affinity.into();
            load_balancer_spec(&serde_json::from_value(service).unwrap(), &[]).unwrap()
        };

        let local = with("Local", "ClientIP");
        assert_eq!((local.health_check_node_port, local.session_affinity), (32100, SessionAffinity::ClientIp));
        let cluster = with("Cluster", "None");
        assert_eq!((cluster.health_check_node_port, cluster.session_affinity), (0, SessionAffinity::None));
        let plain = load_balancer_spec(&service(None, None), &[]).unwrap();
        assert_eq!((plain.health_check_node_port, plain.session_affinity), (0, SessionAffinity::None));
    }

    #[test]
    fn source_ranges_of_the_spec_win_over_the_annotation() {
        let spec_and_annotation = service(Some(&[" 10.0.0.0/8", "192.168.1.7/24 "]), Some("172.16.0.0/12"));

        assert_eq!(load_balancer_source_ranges(&spec_and_annotation).unwrap(), ["10.0.0.0/8", "192.168.1.0/24"]);
        // An empty list in the spec counts as none.
        assert_eq!(load_balancer_source_ranges(&service(Some(&[]), Some("172.16.0.0/12"))).unwrap(), ["172.16.0.0/12"]);
    }

    #[test]
    fn the_source_ranges_annotation_is_comma_separated_trimmed_and_normalised() {
        let annotated = service(None, Some(" 10.1.2.3/16 , ,fd00::1/64,10.1.0.0/16, "));

        assert_eq!(load_balancer_source_ranges(&annotated).unwrap(), ["10.1.0.0/16", "fd00::/64"]);
    }

    #[test]
    fn without_spec_or_annotation_everyone_may_connect() {
        for plain in [service(None, None), service(None, Some("  ")), service(None, Some(","))] {
            assert_eq!(load_balancer_source_ranges(&plain).unwrap(), [DEFAULT_SOURCE_RANGE]);
        }
    }

    #[test]
    fn an_invalid_source_range_fails_naming_service_annotation_and_value() {
        let bad = service(None, Some("10.0.0.0/8,10.0.0.300/24"));

        let message = match load_balancer_source_ranges(&bad) {
            Err(CloudError::Api(message)) => message,
            other => panic!("expected CloudError::Api, got {other:?}"),
        };
        for part in ["shop/web", SOURCE_RANGES_ANNOTATION, "10.0.0.300/24"] {
            assert!(message.contains(part), "{part} not in {message}");
        }
        let spec = load_balancer_source_ranges(&service(Some(&["nope"]), None)).unwrap_err();
        assert!(spec.to_string().contains("spec.loadBalancerSourceRanges"), "{spec}");
        // The spec the provider would send fails the same way, so nothing reaches the cloud.
        assert!(matches!(load_balancer_spec(&bad, &[]), Err(CloudError::Api(_))));
        assert_eq!(load_balancer_spec(&service(None, None), &[]).unwrap().source_ranges, [DEFAULT_SOURCE_RANGE]);
    }
}

//! The `local` cloud provider: [`CloudProvider`], [`InstancesV2`], [`LoadBalancer`] and [`Routes`]
//! over the local cloud's HTTP API, plus the admin calls the CLI and the local deployer use.
//!
//! Every request has a timeout ([`ClientConfig::timeout`]). Connection errors and 5xx answers are
//! retried with exponential backoff and jitter ([`ClientConfig::retries`] times); a timeout is not
//! retried, so a slow cloud costs a controller one timeout per call, not one per attempt. What still
//! fails becomes [`CloudError::Api`] naming the operation, the method and the URL.

use std::time::Duration;

use async_trait::async_trait;
use backon::{ExponentialBuilder, Retryable};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, NodeAddress, Service};
use reqwest::{Method, StatusCode, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::api::{
    self, CreateInstance, CreateRoute, ErrorBody, Fault, FaultSpec, Instance, InstanceState, LoadBalancerPort,
    LoadBalancerSpec, OPERATION_HEADER, UpdateBackends,
};
use ccm::cloud::{self, CloudError, CloudProvider, InstanceMetadata, InstancesV2, LoadBalancer, Routes};

/// The name passed as `--cloud-provider`.
pub const PROVIDER_NAME: &str = "local";
/// Node provider IDs are this followed by the instance ID.
pub const PROVIDER_ID_PREFIX: &str = "local://";

/// How the provider talks to the cloud.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// The cloud's base URL, e.g. `http://127.0.0.1:8080`.
    pub url: String,
    /// The limit for one attempt, connecting and reading the answer included.
    pub timeout: Duration,
    /// How many times a failed attempt is retried.
    pub retries: usize,
    /// The first backoff between attempts; it doubles each time.
    pub min_backoff: Duration,
    /// The longest backoff between attempts.
    pub max_backoff: Duration,
}

impl ClientConfig {
    /// The defaults for `url`: a 5 s timeout and 3 retries backing off from 100 ms to 2 s.
    pub fn new(url: impl Into<String>) -> Self {
        ClientConfig {
            url: url.into(),
            timeout: Duration::from_secs(5),
            retries: 3,
            min_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
        }
    }
}

/// Why the provider could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The URL is not an `http(s)://host[:port]` base URL.
    #[error("invalid local cloud URL {0:?}: expected http://HOST:PORT")]
    InvalidUrl(String),
    /// The HTTP client could not be set up.
    #[error("cannot build the HTTP client: {0}")]
    Build(#[from] reqwest::Error),
}

/// The `local` cloud provider.
#[derive(Debug, Clone)]
pub struct LocalCloud {
    http: reqwest::Client,
    base: Url,
    config: ClientConfig,
}

/// One attempt's failure; [`Failure::is_retryable`] says whether another attempt may help.
#[derive(Debug)]
enum Failure {
    Timeout(Duration),
    Transport(reqwest::Error),
    Status { status: StatusCode, message: String },
}

impl Failure {
    fn is_retryable(&self) -> bool {
        match self {
            Failure::Transport(_) => true,
            Failure::Status { status, .. } => status.is_server_error(),
            Failure::Timeout(_) => false,
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Timeout(limit) => write!(f, "timed out after {limit:?}"),
            Failure::Transport(error) => write!(f, "cannot reach the cloud: {}", error_chain(error)),
            Failure::Status { status, message } => write!(f, "HTTP {status}: {message}"),
        }
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// An answer that was 2xx or 404; the body is still JSON to decode.
struct Reply {
    status: StatusCode,
    body: Vec<u8>,
}

/// No request body.
const NO_BODY: Option<&()> = None;

impl LocalCloud {
    /// A provider for the cloud at `config.url`.
    pub fn new(config: ClientConfig) -> Result<Self, ClientError> {
        let base = Url::parse(&config.url).map_err(|_| ClientError::InvalidUrl(config.url.clone()))?;
        if !matches!(base.scheme(), "http" | "https") || base.cannot_be_a_base() || base.host().is_none() {
            return Err(ClientError::InvalidUrl(config.url.clone()));
        }
        // The cloud is local: a proxy from the environment must not carry its traffic.
        let http = reqwest::Client::builder().timeout(config.timeout).no_proxy().build()?;
        Ok(LocalCloud { http, base, config })
    }

    /// The cloud's base URL.
    pub fn url(&self) -> &str {
        self.base.as_str()
    }

    fn url_for(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        url.path_segments_mut().expect("checked in new").pop_if_empty().extend(segments);
        url
    }

    /// Sends one call with retries; 2xx and 404 answers are replies, everything else an error.
    async fn call<B: Serialize + ?Sized>(
        &self,
        operation: &'static str,
        method: Method,
        segments: &[&str],
        body: Option<&B>,
    ) -> Result<Reply, CloudError> {
        let url = self.url_for(segments);
        let body = body.map(|body| serde_json::to_vec(body).expect("request bodies serialise"));
        let mut attempts = 0;
        let attempt = || {
            attempts += 1;
            self.attempt(operation, method.clone(), url.clone(), body.clone())
        };
        let result = attempt
            .retry(self.backoff())
            .sleep(tokio::time::sleep)
            .when(Failure::is_retryable)
            .notify(|failure, delay| {
                tracing::warn!(operation, %url, %failure, ?delay, "local cloud call failed; retrying");
            })
            .await;
        result.map_err(|failure| {
            let tries = if attempts == 1 { String::new() } else { format!(" (after {attempts} attempts)") };
            CloudError::Api(format!("{operation}: {method} {url}: {failure}{tries}"))
        })
    }

    fn backoff(&self) -> ExponentialBuilder {
        ExponentialBuilder::default()
            .with_min_delay(self.config.min_backoff)
            .with_max_delay(self.config.max_backoff)
            .with_max_times(self.config.retries)
            .with_jitter()
    }

    async fn attempt(
        &self,
        operation: &'static str,
        method: Method,
        url: Url,
        body: Option<Vec<u8>>,
    ) -> Result<Reply, Failure> {
        let mut request = self.http.request(method, url).header(OPERATION_HEADER, operation);
        if let Some(body) = body {
            request = request.header(reqwest::header::CONTENT_TYPE, "application/json").body(body);
        }
        let response = request.send().await.map_err(|error| self.transport_failure(error))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|error| self.transport_failure(error))?.to_vec();
        if status.is_success() || status == StatusCode::NOT_FOUND {
            return Ok(Reply { status, body });
        }
        Err(Failure::Status { status, message: error_message(&body) })
    }

    fn transport_failure(&self, error: reqwest::Error) -> Failure {
        if error.is_timeout() { Failure::Timeout(self.config.timeout) } else { Failure::Transport(error) }
    }

    /// A call whose 404 means "none".
    async fn call_optional<T: DeserializeOwned, B: Serialize + ?Sized>(
        &self,
        operation: &'static str,
        method: Method,
        segments: &[&str],
        body: Option<&B>,
    ) -> Result<Option<T>, CloudError> {
        let reply = self.call(operation, method.clone(), segments, body).await?;
        if reply.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        self.decode(operation, &method, segments, &reply).map(Some)
    }

    /// A call whose 404 is an error.
    async fn call_required<T: DeserializeOwned, B: Serialize + ?Sized>(
        &self,
        operation: &'static str,
        method: Method,
        segments: &[&str],
        body: Option<&B>,
    ) -> Result<T, CloudError> {
        let reply = self.call(operation, method.clone(), segments, body).await?;
        if reply.status == StatusCode::NOT_FOUND {
            let url = self.url_for(segments);
            return Err(CloudError::Api(format!("{operation}: {method} {url}: {}", error_message(&reply.body))));
        }
        self.decode(operation, &method, segments, &reply)
    }

    fn decode<T: DeserializeOwned>(
        &self,
        operation: &str,
        method: &Method,
        segments: &[&str],
        reply: &Reply,
    ) -> Result<T, CloudError> {
        serde_json::from_slice(&reply.body).map_err(|error| {
            CloudError::Api(format!("{operation}: {method} {}: unexpected answer: {error}", self.url_for(segments)))
        })
    }

    /// A call answering with no body, for which 404 counts as done (deleting what is gone).
    async fn call_idempotent_delete(&self, operation: &'static str, segments: &[&str]) -> Result<(), CloudError> {
        self.call(operation, Method::DELETE, segments, NO_BODY).await.map(|_| ())
    }
}

fn error_message(body: &[u8]) -> String {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(ErrorBody { error }) => error,
        Err(_) => String::from_utf8_lossy(body).chars().take(200).collect(),
    }
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

impl LocalCloud {
    /// The node's instance: by provider ID when the node has one, else by node name.
    async fn find_instance(&self, operation: &'static str, node: &Node) -> Result<Option<Instance>, CloudError> {
        let provider_id = node.spec.as_ref().and_then(|spec| spec.provider_id.as_deref()).filter(|id| !id.is_empty());
        if let Some(provider_id) = provider_id {
            let id = instance_id(operation, provider_id)?;
            return self.call_optional(operation, Method::GET, &["v1", "instances", "by-id", id], NO_BODY).await;
        }
        match node.metadata.name.as_deref() {
            Some(name) if !name.is_empty() => {
                self.call_optional(operation, Method::GET, &["v1", "instances", name], NO_BODY).await
            }
            _ => Ok(None),
        }
    }
}

#[async_trait]
impl InstancesV2 for LocalCloud {
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
impl LoadBalancer for LocalCloud {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<(Option<LoadBalancerStatus>, bool), CloudError> {
        let name = self.get_load_balancer_name(cluster_name, service);
        let segments = ["v1", "loadbalancers", cluster_name, &name];
        let found: Option<api::LoadBalancer> =
            self.call_optional("get_load_balancer", Method::GET, &segments, NO_BODY).await?;
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
        let segments = ["v1", "loadbalancers", cluster_name, &name];
        let balancer: api::LoadBalancer =
            self.call_required("ensure_load_balancer", Method::PUT, &segments, Some(&spec)).await?;
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
        let segments = ["v1", "loadbalancers", cluster_name, &name];
        let _: api::LoadBalancer =
            self.call_required("update_load_balancer", Method::PATCH, &segments, Some(&update)).await?;
        Ok(())
    }

    async fn ensure_load_balancer_deleted(&self, cluster_name: &str, service: &Service) -> Result<(), CloudError> {
        let name = self.get_load_balancer_name(cluster_name, service);
        self.call_idempotent_delete("ensure_load_balancer_deleted", &["v1", "loadbalancers", cluster_name, &name]).await
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
    Ok(LoadBalancerSpec { service: format!("{namespace}/{name}"), ports, backends: node_names(nodes), source_ranges })
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
impl Routes for LocalCloud {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<cloud::Route>, CloudError> {
        let routes = self.cloud_routes("list_routes", cluster_name).await?;
        Ok(routes.into_iter().map(cloud_route).collect())
    }

    async fn create_route(&self, cluster_name: &str, name_hint: &str, route: &cloud::Route) -> Result<(), CloudError> {
        let request = CreateRoute {
            name_hint: name_hint.to_owned(),
            target_node: route.target_node.clone(),
            destination_cidr: route.destination_cidr.clone(),
        };
        let segments = ["v1", "routes", cluster_name];
        let _: api::Route = self.call_required("create_route", Method::POST, &segments, Some(&request)).await?;
        Ok(())
    }

    async fn delete_route(&self, cluster_name: &str, route: &cloud::Route) -> Result<(), CloudError> {
        let name = if route.name.is_empty() {
            let routes = self.cloud_routes("delete_route", cluster_name).await?;
            let same = routes.into_iter().find(|known| known.destination_cidr == route.destination_cidr);
            match same {
                Some(known) => known.name,
                None => return Ok(()),
            }
        } else {
            route.name.clone()
        };
        self.call_idempotent_delete("delete_route", &["v1", "routes", cluster_name, &name]).await
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

impl CloudProvider for LocalCloud {
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

/// The admin API: for the CLI, tests and the local deployer. These calls are never faulted.
impl LocalCloud {
    async fn cloud_routes(&self, operation: &'static str, cluster: &str) -> Result<Vec<api::Route>, CloudError> {
        self.call_required(operation, Method::GET, &["v1", "routes", cluster], NO_BODY).await
    }

    /// Creates a running instance.
    pub async fn create_instance(&self, request: &CreateInstance) -> Result<Instance, CloudError> {
        self.call_required("create_instance", Method::POST, &["admin", "instances"], Some(request)).await
    }

    /// Every instance, terminated ones included.
    pub async fn list_instances(&self) -> Result<Vec<Instance>, CloudError> {
        self.call_required("list_instances", Method::GET, &["admin", "instances"], NO_BODY).await
    }

    /// Shuts the live instance `name` down.
    pub async fn shutdown_instance(&self, name: &str) -> Result<Instance, CloudError> {
        self.instance_action("shutdown_instance", name, "shutdown").await
    }

    /// Starts the shut-down instance `name` again.
    pub async fn start_instance(&self, name: &str) -> Result<Instance, CloudError> {
        self.instance_action("start_instance", name, "start").await
    }

    /// Terminates the live instance `name`.
    pub async fn terminate_instance(&self, name: &str) -> Result<Instance, CloudError> {
        self.instance_action("terminate_instance", name, "terminate").await
    }

    async fn instance_action(&self, operation: &'static str, name: &str, verb: &str) -> Result<Instance, CloudError> {
        self.call_required(operation, Method::POST, &["admin", "instances", name, verb], NO_BODY).await
    }

    /// Every load balancer of every cluster.
    pub async fn list_load_balancers(&self) -> Result<Vec<api::LoadBalancer>, CloudError> {
        self.call_required("list_load_balancers", Method::GET, &["admin", "loadbalancers"], NO_BODY).await
    }

    /// Every route of every cluster, blackholes marked.
    pub async fn list_all_routes(&self) -> Result<Vec<api::Route>, CloudError> {
        self.call_required("list_routes", Method::GET, &["admin", "routes"], NO_BODY).await
    }

    /// Injects a fault.
    pub async fn inject_fault(&self, spec: &FaultSpec) -> Result<Fault, CloudError> {
        self.call_required("inject_fault", Method::POST, &["admin", "faults"], Some(spec)).await
    }

    /// The active faults.
    pub async fn list_faults(&self) -> Result<Vec<Fault>, CloudError> {
        self.call_required("list_faults", Method::GET, &["admin", "faults"], NO_BODY).await
    }

    /// Clears every fault, returning how many there were.
    pub async fn clear_faults(&self) -> Result<u64, CloudError> {
        let cleared: serde_json::Value =
            self.call_required("clear_faults", Method::DELETE, &["admin", "faults"], NO_BODY).await?;
        Ok(cleared["cleared"].as_u64().unwrap_or_default())
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

    #[test]
    fn bad_urls_are_refused() {
        for url in ["127.0.0.1:80", "ftp://127.0.0.1/", "not a url"] {
            assert!(matches!(LocalCloud::new(ClientConfig::new(url)), Err(ClientError::InvalidUrl(_))), "{url}");
        }
    }

    #[test]
    fn path_segments_are_escaped() {
        let cloud = LocalCloud::new(ClientConfig::new("http://127.0.0.1:1/")).unwrap();

        assert_eq!(cloud.url_for(&["v1", "routes", "a b/c"]).as_str(), "http://127.0.0.1:1/v1/routes/a%20b%2Fc");
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

    #[test]
    fn error_bodies_are_read_as_json_or_text() {
        assert_eq!(error_message(br#"{"error":"injected fault"}"#), "injected fault");
        assert_eq!(error_message(b"plain"), "plain");
    }
}

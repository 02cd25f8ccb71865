//! The JSON bodies of the local cloud's HTTP API, shared by the server, the `local` provider and the CLI.

use serde::{Deserialize, Serialize};

/// The header through which a caller names the operation a request belongs to, for fault matching
/// and metrics (several provider calls share one endpoint).
pub const OPERATION_HEADER: &str = "x-local-cloud-operation";

/// The operations a request can be counted and faulted as; `*` in a fault matches them all.
pub const OPERATIONS: &[&str] = &[
    "list_instances",
    "get_instance",
    "instance_exists",
    "instance_shutdown",
    "instance_metadata",
    "list_load_balancers",
    "get_load_balancer",
    "ensure_load_balancer",
    "update_load_balancer",
    "ensure_load_balancer_deleted",
    "list_routes",
    "create_route",
    "delete_route",
];

/// The lifecycle state of an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstanceState {
    /// Up; the default for a new instance.
    Running,
    /// Stopped but still existing; it can be started again.
    Shutdown,
    /// Gone for good; kept in the listing like real clouds do for a while.
    Terminated,
}

/// The kind of an instance address, named like Kubernetes' `NodeAddressType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AddressType {
    /// A node-internal address.
    InternalIP,
    /// An externally reachable address.
    ExternalIP,
    /// The instance's host name.
    Hostname,
}

/// One address of an instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Address {
    /// What kind of address this is.
    #[serde(rename = "type")]
    pub kind: AddressType,
    /// The address itself.
    pub address: String,
}

/// A simulated machine; `name` is the name of the node that runs on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    /// The cloud's ID, `i-` and 8 hex digits; the node's providerID is `local://<id>`.
    pub id: String,
    /// The node name; unique among instances that are not terminated.
    pub name: String,
    /// The instance type, e.g. `local.small`.
    pub instance_type: String,
    /// The zone, e.g. `local-a`.
    pub zone: String,
    /// The region, e.g. `local`.
    pub region: String,
    /// The instance's addresses, in order.
    pub addresses: Vec<Address>,
    /// Running, shut down or terminated.
    pub state: InstanceState,
}

/// The body of `POST /admin/instances`; absent fields take the cloud's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateInstance {
    /// The node name.
    pub name: String,
    /// The instance type; defaults to `local.small`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// The zone; defaults to `local-a`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The region; defaults to `local`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// The addresses; defaults to just the `Hostname` `name`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<Address>,
}

/// A port a load balancer forwards, taken from the service's port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancerPort {
    /// The service port's name; may be empty.
    #[serde(default)]
    pub name: String,
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
    /// The port the load balancer listens on.
    pub port: i32,
    /// The node port traffic goes to on the backends.
    #[serde(default)]
    pub node_port: i32,
}

/// The body of `PUT /v1/loadbalancers/{cluster}/{name}`: what the load balancer should look like.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancerSpec {
    /// The service it fronts, `namespace/name`; informational.
    #[serde(default)]
    pub service: String,
    /// The ports it forwards.
    #[serde(default)]
    pub ports: Vec<LoadBalancerPort>,
    /// The names of the nodes it sends traffic to.
    #[serde(default)]
    pub backends: Vec<String>,
    /// The client CIDRs allowed to reach it, as the CCM computed them from the service
    /// (`spec.loadBalancerSourceRanges`, else the source ranges annotation, else `0.0.0.0/0`).
    #[serde(default)]
    pub source_ranges: Vec<String>,
    /// The port each backend answers `GET /healthz` on (the service's `healthCheckNodePort`, which
    /// `externalTrafficPolicy: Local` allocates); 0: backends are not probed.
    #[serde(default)]
    pub health_check_node_port: i32,
    /// How the load balancer picks a backend for a connection.
    #[serde(default)]
    pub session_affinity: SessionAffinity,
}

/// How a load balancer picks a backend for a connection (the service's `sessionAffinity`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SessionAffinity {
    /// Each connection goes to a backend picked at random.
    #[default]
    None,
    /// Every connection of a client address goes to the same backend (a hash of the address), as
    /// cloud load balancers' client-IP affinity does.
    #[serde(rename = "ClientIP")]
    ClientIp,
}

/// The body of `PATCH /v1/loadbalancers/{cluster}/{name}`: a new backend set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateBackends {
    /// The names of the nodes the load balancer sends traffic to.
    pub backends: Vec<String>,
}

/// A load balancer and the ingress IPs the cloud allocated to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadBalancer {
    /// The cluster it belongs to.
    pub cluster: String,
    /// Its name within the cluster.
    pub name: String,
    /// The service it fronts, `namespace/name`.
    pub service: String,
    /// Ingress IPs from the cloud's pool; never shared with another load balancer.
    pub ingress_ips: Vec<String>,
    /// The ports it forwards.
    pub ports: Vec<LoadBalancerPort>,
    /// The names of the nodes it sends traffic to.
    pub backends: Vec<String>,
    /// The client CIDRs allowed to reach it, as the CCM computed them from the service; empty for
    /// load balancers saved before the cloud kept them.
    #[serde(default)]
    pub source_ranges: Vec<String>,
    /// The port each backend is health-checked on; 0: not probed, every backend gets traffic.
    #[serde(default)]
    pub health_check_node_port: i32,
    /// How a backend is picked for a connection.
    #[serde(default)]
    pub session_affinity: SessionAffinity,
}

/// The body of `POST /v1/routes/{cluster}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateRoute {
    /// A stable hint for the route's name (the node's UID); may be empty.
    #[serde(default)]
    pub name_hint: String,
    /// The node the traffic goes to.
    pub target_node: String,
    /// The CIDR routed to the node.
    pub destination_cidr: String,
}

/// A route in a cluster's route table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    /// The cluster it belongs to.
    pub cluster: String,
    /// The cloud's name for it.
    pub name: String,
    /// The node the traffic goes to.
    pub target_node: String,
    /// The CIDR routed to the node.
    pub destination_cidr: String,
    /// True when no live instance is named `target_node`; computed on every read.
    #[serde(default)]
    pub blackhole: bool,
}

/// Whether an injected fault fails a call or delays it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultMode {
    /// Answer with the fault's HTTP status instead of doing the call.
    Fail,
    /// Sleep `delay_ms` and then do the call.
    Delay,
}

/// The body of `POST /admin/faults`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultSpec {
    /// The operation to fault (one of [`OPERATIONS`]), or `*` for all of them.
    pub operation: String,
    /// How many calls to fault; `null` means every call until the faults are cleared.
    #[serde(default)]
    pub count: Option<u64>,
    /// Fail or delay.
    pub mode: FaultMode,
    /// The HTTP status a failing call answers with: 500 or 503 (the default).
    #[serde(default = "default_fault_status")]
    pub status: u16,
    /// How long a delayed call waits, in milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
}

fn default_fault_status() -> u16 {
    503
}

/// An active fault as `GET /admin/faults` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    /// The fault's ID, in order of injection.
    pub id: u64,
    /// What was injected.
    #[serde(flatten)]
    pub spec: FaultSpec,
    /// Calls still to fault; `null` means until cleared.
    pub remaining: Option<u64>,
}

/// The body of every error answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: String,
}

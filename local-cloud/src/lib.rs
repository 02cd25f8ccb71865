//! The local simulated cloud: an HTTP service holding instances, load balancers and routes, with
//! fault injection, and a client of its API ([`client::LocalCloud`]). The `local` cloud provider
//! (ccm's cloud traits over this API) is the reference CCM's, in `reference-ccm`.
//! With real nodes, [`data_plane`] makes its load balancers and routes carry traffic inside the
//! cluster's own network namespaces (`serve --private-ip-pool` hands out that network's addresses).
//!
//! The cloud keeps its state in `<state-dir>/state.json`, rewritten (temporary file + rename) on
//! every change and loaded at start, so it survives a restart. A corrupt file stops the start with an
//! error naming it. `serve` writes the address it listens on to `<state-dir>/address`. It only listens
//! on, and only hands out, loopback addresses (`127.0.0.0/8`).
//!
//! # HTTP API
//!
//! Bodies are JSON ([`api`] has their types); errors answer `{"error": "..."}` with 400 (bad
//! request), 404 (not found), 409 (conflict: duplicate live instance name, CIDR routed elsewhere, IP
//! pool exhausted) or 500 (state not saved).
//!
//! ## Cloud API (what a provider calls; faulted and counted per operation)
//!
//! | method and path | operation | answer |
//! |---|---|---|
//! | `GET /v1/instances` | `list_instances` | all [`api::Instance`]s |
//! | `GET /v1/instances/{name}` | `get_instance` | the live instance for node `name`, else a terminated one; 404 |
//! | `GET /v1/instances/by-id/{id}` | `get_instance` | the instance `id`; 404 |
//! | `GET /v1/loadbalancers/{cluster}` | `list_load_balancers` | the cluster's [`api::LoadBalancer`]s |
//! | `GET /v1/loadbalancers/{cluster}/{name}` | `get_load_balancer` | one; 404 |
//! | `PUT /v1/loadbalancers/{cluster}/{name}` | `ensure_load_balancer` | creates (allocating an ingress IP) or updates from an [`api::LoadBalancerSpec`], which it replaces whole (source ranges, health-check port and session affinity included); 400 if a source range is not a CIDR or the health-check port not a port |
//! | `PATCH /v1/loadbalancers/{cluster}/{name}` | `update_load_balancer` | sets backends from [`api::UpdateBackends`], keeping the rest; 404 |
//! | `DELETE /v1/loadbalancers/{cluster}/{name}` | `ensure_load_balancer_deleted` | 204, freeing its IPs; 404 |
//! | `GET /v1/routes/{cluster}` | `list_routes` | the cluster's [`api::Route`]s, `blackhole` when the target has no live instance |
//! | `POST /v1/routes/{cluster}` | `create_route` | 201 with the route, named `<name_hint>-<cidr>`, from an [`api::CreateRoute`] |
//! | `DELETE /v1/routes/{cluster}/{name}` | `delete_route` | 204; 404 |
//!
//! Several provider calls share an endpoint, so a request may name its operation in the
//! `X-Local-Cloud-Operation` header ([`api::OPERATION_HEADER`]): the provider sends `instance_exists`,
//! `instance_shutdown` and `instance_metadata` for its instance lookups. Known names
//! ([`api::OPERATIONS`]) override the route's own.
//!
//! ## Admin API (for operators, tests and the local deployer; never faulted)
//!
//! | method and path | answer |
//! |---|---|
//! | `GET /admin/instances` | all instances |
//! | `POST /admin/instances` | 201 with a new running instance from an [`api::CreateInstance`]; 409 if the name is live |
//! | `POST /admin/instances/{name}/shutdown` | the live instance, now `shutdown` |
//! | `POST /admin/instances/{name}/start` | the live instance, now `running` |
//! | `POST /admin/instances/{name}/terminate` | the instance, now `terminated` (final; its name can be reused) |
//! | `GET /admin/loadbalancers[?cluster=C]` | load balancers of all clusters, or of C |
//! | `GET /admin/routes[?cluster=C]` | routes of all clusters, or of C |
//! | `GET /admin/faults` | the active [`api::Fault`]s |
//! | `POST /admin/faults` | 201 with the injected fault, from an [`api::FaultSpec`]: `{"operation": "create_route" or "*", "count": 3 or null (until cleared), "mode": "fail" or "delay", "status": 503, "delay_ms": 0}` |
//! | `DELETE /admin/faults` | `{"cleared": N}` |
//! | `GET /healthz` | `ok` |
//! | `GET /metrics` | OpenMetrics text: `local_cloud_requests_total{operation,status}`, `local_cloud_injected_faults_total{operation,mode}` |
//!
//! A cloud call consumes at most one fault: the oldest active one for its operation or `*`. A `fail`
//! fault answers its status without doing the call; a `delay` fault sleeps, then does it.

pub mod api;
pub mod cli;
pub mod client;
pub mod data_plane;
pub mod faults;
pub mod metrics;
pub mod pool;
pub mod server;
pub mod store;

pub use client::{ApiError, ClientConfig, ClientError, LocalCloud, PROVIDER_ID_PREFIX, PROVIDER_NAME};
pub use pool::{DEFAULT_IP_POOL, IpPool};
pub use server::{ADDRESS_FILE, LocalCloudServer, ServeError, ServerConfig, url_from_state_dir};
pub use store::{STATE_FILE, StoreError};

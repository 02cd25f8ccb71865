//! The local cloud's HTTP server: the cloud API under `/v1` (faulted and counted per operation), the
//! operator's API under `/admin`, `/healthz` and `/metrics`. The routes are listed in the module docs
//! of [`super`].

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::extract::{MatchedPath, Path as UrlPath, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::Deserialize;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::api::{
    CreateInstance, CreateRoute, ErrorBody, Fault, FaultSpec, Instance, LoadBalancer, LoadBalancerSpec,
    OPERATION_HEADER, OPERATIONS, Route, UpdateBackends,
};
use super::faults::{FaultAction, FaultError, Faults};
use super::metrics::{self, Metrics};
use super::pool::IpPool;
use super::store::{InstanceAction, State as CloudState, StateError, Store, StoreError};

/// The file in the state dir holding the address (`127.0.0.1:PORT`) a running cloud listens on.
pub const ADDRESS_FILE: &str = "address";

/// How to run the cloud.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where the state file and the address file live.
    pub state_dir: PathBuf,
    /// The loopback address to listen on; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Where load balancer ingress IPs come from.
    pub ip_pool: IpPool,
}

/// Why the cloud could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The state could not be loaded.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Only loopback addresses are allowed.
    #[error("listen address {0} is not a loopback address (127.0.0.0/8)")]
    NotLoopback(SocketAddr),
    /// The address is taken or not ours.
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: io::Error },
    /// The address file could not be written.
    #[error("cannot write address file {path}: {source}")]
    AddressFile { path: PathBuf, source: io::Error },
}

/// Why the address of a running cloud could not be found in a state dir.
#[derive(Debug, thiserror::Error)]
pub enum AddressFileError {
    /// No readable address file: the cloud is not running there, or never was.
    #[error("cannot read {path} (is a local cloud serving that state dir?): {source}")]
    Read { path: PathBuf, source: io::Error },
    /// The file does not hold a socket address.
    #[error("{path} does not hold an address like 127.0.0.1:8080: {text:?}")]
    Invalid { path: PathBuf, text: String },
}

/// The base URL (`http://127.0.0.1:PORT`) of the cloud serving `state_dir`, from its address file.
pub fn url_from_state_dir(state_dir: &Path) -> Result<String, AddressFileError> {
    let path = state_dir.join(ADDRESS_FILE);
    let text =
        std::fs::read_to_string(&path).map_err(|source| AddressFileError::Read { path: path.clone(), source })?;
    let addr: SocketAddr =
        text.trim().parse().map_err(|_| AddressFileError::Invalid { path, text: text.trim().to_owned() })?;
    Ok(format!("http://{addr}"))
}

/// A running cloud; [`LocalCloudServer::shutdown`] stops it.
#[derive(Debug)]
pub struct LocalCloudServer {
    addr: SocketAddr,
    address_file: PathBuf,
    stop: oneshot::Sender<()>,
    task: JoinHandle<io::Result<()>>,
}

impl LocalCloudServer {
    /// Loads the state, binds, writes the address file and serves in a background task.
    pub async fn start(config: ServerConfig) -> Result<Self, ServeError> {
        if !config.listen.ip().is_loopback() {
            return Err(ServeError::NotLoopback(config.listen));
        }
        let store = Store::open(&config.state_dir)?;
        let listener = TcpListener::bind(config.listen)
            .await
            .map_err(|source| ServeError::Bind { addr: config.listen, source })?;
        let addr = listener.local_addr().map_err(|source| ServeError::Bind { addr: config.listen, source })?;
        let address_file = write_address_file(&config.state_dir, addr)?;
        let app = Arc::new(App { store, faults: Mutex::default(), metrics: Metrics::default(), pool: config.ip_pool });
        let (stop, stopped) = oneshot::channel();
        let serve = axum::serve(listener, router(app)).with_graceful_shutdown(async {
            stopped.await.ok();
        });
        let task = tokio::spawn(async move { serve.await });
        tracing::info!(%addr, state_dir = %config.state_dir.display(), pool = %config.ip_pool, "local cloud serving");
        Ok(LocalCloudServer { addr, address_file, stop, task })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, lets open requests finish, and removes the address file.
    pub async fn shutdown(self) -> io::Result<()> {
        self.stop.send(()).ok();
        let served = self.task.await.map_err(io::Error::other)?;
        std::fs::remove_file(&self.address_file).ok();
        tracing::info!(addr = %self.addr, "local cloud stopped");
        served
    }
}

fn write_address_file(state_dir: &Path, addr: SocketAddr) -> Result<PathBuf, ServeError> {
    let path = state_dir.join(ADDRESS_FILE);
    let temporary = state_dir.join(format!("{ADDRESS_FILE}.tmp"));
    std::fs::write(&temporary, format!("{addr}\n"))
        .and_then(|()| std::fs::rename(&temporary, &path))
        .map_err(|source| ServeError::AddressFile { path: path.clone(), source })?;
    Ok(path)
}

#[derive(Debug)]
struct App {
    store: Store,
    faults: Mutex<Faults>,
    metrics: Metrics,
    pool: IpPool,
}

impl App {
    fn faults(&self) -> MutexGuard<'_, Faults> {
        self.faults.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

type Shared = Arc<App>;

fn router(app: Shared) -> Router {
    let cloud = Router::new()
        .route("/v1/instances", get(list_instances))
        .route("/v1/instances/{name}", get(instance_by_name))
        .route("/v1/instances/by-id/{id}", get(instance_by_id))
        .route("/v1/loadbalancers/{cluster}", get(cluster_load_balancers))
        .route(
            "/v1/loadbalancers/{cluster}/{name}",
            get(get_load_balancer).put(ensure_load_balancer).patch(update_load_balancer).delete(delete_load_balancer),
        )
        .route("/v1/routes/{cluster}", get(cluster_routes).post(create_route))
        .route("/v1/routes/{cluster}/{name}", delete(delete_route))
        .route_layer(middleware::from_fn_with_state(app.clone(), cloud_call));
    let admin = Router::new()
        .route("/admin/instances", get(list_instances).post(create_instance))
        .route("/admin/instances/{name}/shutdown", post(shutdown_instance))
        .route("/admin/instances/{name}/start", post(start_instance))
        .route("/admin/instances/{name}/terminate", post(terminate_instance))
        .route("/admin/loadbalancers", get(all_load_balancers))
        .route("/admin/routes", get(all_routes))
        .route("/admin/faults", get(list_faults).post(inject_fault).delete(clear_faults))
        .route("/healthz", get(|| async { "ok" }))
        .route("/metrics", get(render_metrics));
    cloud.merge(admin).with_state(app)
}

/// Wraps every `/v1` call: names its operation, applies an injected fault, counts the answer.
async fn cloud_call(State(app): State<Shared>, matched: MatchedPath, request: Request, next: Next) -> Response {
    let operation = operation_of(request.method(), matched.as_str(), request.headers());
    let fault = app.faults().take(operation);
    let response = match fault {
        Some(FaultAction::Fail(status)) => {
            app.metrics.record_fault(operation, "fail");
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            error_response(status, format!("injected fault: {operation} fails with {status}"))
        }
        Some(FaultAction::Delay(delay)) => {
            app.metrics.record_fault(operation, "delay");
            tokio::time::sleep(delay).await;
            next.run(request).await
        }
        None => next.run(request).await,
    };
    app.metrics.record_request(operation, response.status().as_u16());
    tracing::debug!(operation, status = response.status().as_u16(), ?fault, "cloud call");
    response
}

/// The operation named in [`OPERATION_HEADER`] if it is a known one, else the route's own.
fn operation_of(method: &Method, route: &str, headers: &HeaderMap) -> &'static str {
    let claimed = headers.get(OPERATION_HEADER).and_then(|value| value.to_str().ok());
    if let Some(known) = claimed.and_then(|claimed| OPERATIONS.iter().find(|op| **op == claimed)) {
        return known;
    }
    match (method.as_str(), route) {
        ("GET", "/v1/instances") => "list_instances",
        ("GET", "/v1/loadbalancers/{cluster}") => "list_load_balancers",
        ("GET", "/v1/loadbalancers/{cluster}/{name}") => "get_load_balancer",
        ("PUT", _) => "ensure_load_balancer",
        ("PATCH", _) => "update_load_balancer",
        ("DELETE", "/v1/loadbalancers/{cluster}/{name}") => "ensure_load_balancer_deleted",
        ("GET", "/v1/routes/{cluster}") => "list_routes",
        ("POST", "/v1/routes/{cluster}") => "create_route",
        ("DELETE", _) => "delete_route",
        _ => "get_instance",
    }
}

/// An error answer: a status and `{"error": message}`.
#[derive(Debug)]
enum ApiError {
    State(StateError),
    Fault(FaultError),
}

impl From<StateError> for ApiError {
    fn from(error: StateError) -> Self {
        ApiError::State(error)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self {
            ApiError::State(StateError::NotFound(_)) => StatusCode::NOT_FOUND,
            ApiError::State(StateError::Conflict(_)) => StatusCode::CONFLICT,
            ApiError::State(StateError::Invalid(_)) | ApiError::Fault(_) => StatusCode::BAD_REQUEST,
            ApiError::State(StateError::Persist(error)) => {
                tracing::error!(%error, "local cloud state not saved");
                StatusCode::INTERNAL_SERVER_ERROR
            }
        };
        let message = match self {
            ApiError::State(error) => error.to_string(),
            ApiError::Fault(error) => error.to_string(),
        };
        error_response(status, message)
    }
}

fn error_response(status: StatusCode, error: String) -> Response {
    (status, Json(ErrorBody { error })).into_response()
}

type ApiResult<T> = Result<Json<T>, ApiError>;

fn found<T>(value: Option<T>, what: impl FnOnce() -> String) -> ApiResult<T> {
    value.map(Json).ok_or_else(|| StateError::NotFound(what()).into())
}

async fn list_instances(State(app): State<Shared>) -> Json<Vec<Instance>> {
    Json(app.store.read(CloudState::instances))
}

async fn instance_by_name(State(app): State<Shared>, UrlPath(name): UrlPath<String>) -> ApiResult<Instance> {
    found(app.store.read(|state| state.instance_by_name(&name)), || format!("instance named {name:?}"))
}

async fn instance_by_id(State(app): State<Shared>, UrlPath(id): UrlPath<String>) -> ApiResult<Instance> {
    found(app.store.read(|state| state.instance_by_id(&id)), || format!("instance {id:?}"))
}

async fn create_instance(
    State(app): State<Shared>,
    Json(request): Json<CreateInstance>,
) -> Result<(StatusCode, Json<Instance>), ApiError> {
    let instance = app.store.update(|state| state.create_instance(request))?;
    tracing::info!(id = instance.id, name = instance.name, "instance created");
    Ok((StatusCode::CREATED, Json(instance)))
}

async fn shutdown_instance(State(app): State<Shared>, UrlPath(name): UrlPath<String>) -> ApiResult<Instance> {
    change_instance(&app, &name, InstanceAction::Shutdown)
}

async fn start_instance(State(app): State<Shared>, UrlPath(name): UrlPath<String>) -> ApiResult<Instance> {
    change_instance(&app, &name, InstanceAction::Start)
}

async fn terminate_instance(State(app): State<Shared>, UrlPath(name): UrlPath<String>) -> ApiResult<Instance> {
    change_instance(&app, &name, InstanceAction::Terminate)
}

fn change_instance(app: &App, name: &str, action: InstanceAction) -> ApiResult<Instance> {
    let instance = app.store.update(|state| state.change_instance(name, action))?;
    tracing::info!(id = instance.id, name, state = ?instance.state, "instance changed");
    Ok(Json(instance))
}

#[derive(Debug, Deserialize)]
struct ClusterFilter {
    cluster: Option<String>,
}

async fn all_load_balancers(State(app): State<Shared>, Query(filter): Query<ClusterFilter>) -> Json<Vec<LoadBalancer>> {
    Json(app.store.read(|state| state.load_balancers(filter.cluster.as_deref())))
}

async fn cluster_load_balancers(
    State(app): State<Shared>,
    UrlPath(cluster): UrlPath<String>,
) -> Json<Vec<LoadBalancer>> {
    Json(app.store.read(|state| state.load_balancers(Some(&cluster))))
}

async fn get_load_balancer(
    State(app): State<Shared>,
    UrlPath((cluster, name)): UrlPath<(String, String)>,
) -> ApiResult<LoadBalancer> {
    found(app.store.read(|state| state.load_balancer(&cluster, &name)), || format!("load balancer {cluster}/{name}"))
}

async fn ensure_load_balancer(
    State(app): State<Shared>,
    UrlPath((cluster, name)): UrlPath<(String, String)>,
    Json(spec): Json<LoadBalancerSpec>,
) -> ApiResult<LoadBalancer> {
    let balancer = app.store.update(|state| state.ensure_load_balancer(&cluster, &name, spec, &app.pool))?;
    tracing::info!(
        cluster,
        name,
        ips = ?balancer.ingress_ips,
        backends = balancer.backends.len(),
        source_ranges = ?balancer.source_ranges,
        "load balancer ensured"
    );
    Ok(Json(balancer))
}

async fn update_load_balancer(
    State(app): State<Shared>,
    UrlPath((cluster, name)): UrlPath<(String, String)>,
    Json(update): Json<UpdateBackends>,
) -> ApiResult<LoadBalancer> {
    Ok(Json(app.store.update(|state| state.update_backends(&cluster, &name, update.backends))?))
}

async fn delete_load_balancer(
    State(app): State<Shared>,
    UrlPath((cluster, name)): UrlPath<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let removed = app.store.update(|state| state.delete_load_balancer(&cluster, &name))?;
    tracing::info!(cluster, name, freed = ?removed.ingress_ips, "load balancer deleted");
    Ok(StatusCode::NO_CONTENT)
}

async fn all_routes(State(app): State<Shared>, Query(filter): Query<ClusterFilter>) -> Json<Vec<Route>> {
    Json(app.store.read(|state| state.routes(filter.cluster.as_deref())))
}

async fn cluster_routes(State(app): State<Shared>, UrlPath(cluster): UrlPath<String>) -> Json<Vec<Route>> {
    Json(app.store.read(|state| state.routes(Some(&cluster))))
}

async fn create_route(
    State(app): State<Shared>,
    UrlPath(cluster): UrlPath<String>,
    Json(request): Json<CreateRoute>,
) -> Result<(StatusCode, Json<Route>), ApiError> {
    let route = app.store.update(|state| state.create_route(&cluster, request))?;
    Ok((StatusCode::CREATED, Json(route)))
}

async fn delete_route(
    State(app): State<Shared>,
    UrlPath((cluster, name)): UrlPath<(String, String)>,
) -> Result<StatusCode, ApiError> {
    app.store.update(|state| state.delete_route(&cluster, &name))?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_faults(State(app): State<Shared>) -> Json<Vec<Fault>> {
    Json(app.faults().list())
}

async fn inject_fault(
    State(app): State<Shared>,
    Json(spec): Json<FaultSpec>,
) -> Result<(StatusCode, Json<Fault>), ApiError> {
    let fault = app.faults().inject(spec).map_err(ApiError::Fault)?;
    tracing::warn!(?fault, "fault injected");
    Ok((StatusCode::CREATED, Json(fault)))
}

async fn clear_faults(State(app): State<Shared>) -> Json<serde_json::Value> {
    let cleared = app.faults().clear();
    tracing::info!(cleared, "faults cleared");
    Json(serde_json::json!({ "cleared": cleared }))
}

async fn render_metrics(State(app): State<Shared>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, HeaderValue::from_static(metrics::CONTENT_TYPE))], app.metrics.encode())
}

//! A client of the local cloud's HTTP API: the calls a cloud provider makes (instances, load
//! balancers, routes; each sent with its operation's name, which faults target) and the admin calls
//! the CLI and the local deployer use. The `local` provider of the reference CCM (ccm's cloud
//! traits) is built on it, in `reference-ccm`; this crate does not know the CCM library.
//!
//! Every request has a timeout ([`ClientConfig::timeout`]). Connection errors and 5xx answers are
//! retried with exponential backoff and jitter ([`ClientConfig::retries`] times); a timeout is not
//! retried, so a slow cloud costs a controller one timeout per call, not one per attempt. What still
//! fails becomes an [`ApiError`] naming the operation, the method and the URL.

use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use reqwest::{Method, StatusCode, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::api::{
    self, CreateInstance, CreateRoute, ErrorBody, Fault, FaultSpec, Instance, LoadBalancerSpec, OPERATION_HEADER,
    UpdateBackends,
};

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

/// A call that failed: the operation, the method, the URL and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    pub message: String,
    /// The HTTP status the cloud answered with; `None` when it did not answer (down, a timeout).
    pub status: Option<u16>,
}

impl ApiError {
    pub fn status(&self) -> Option<u16> {
        self.status
    }
}

/// Why the client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The URL is not an `http(s)://host[:port]` base URL.
    #[error("invalid local cloud URL {0:?}: expected http://HOST:PORT")]
    InvalidUrl(String),
    /// The HTTP client could not be set up.
    #[error("cannot build the HTTP client: {0}")]
    Build(#[from] reqwest::Error),
}

/// A client of one local cloud.
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
    /// A client of the cloud at `config.url`.
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
    ) -> Result<Reply, ApiError> {
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
            let status = match &failure {
                Failure::Status { status, .. } => Some(status.as_u16()),
                Failure::Timeout(_) | Failure::Transport(_) => None,
            };
            ApiError { message: format!("{operation}: {method} {url}: {failure}{tries}"), status }
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
    ) -> Result<Option<T>, ApiError> {
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
    ) -> Result<T, ApiError> {
        let reply = self.call(operation, method.clone(), segments, body).await?;
        if reply.status == StatusCode::NOT_FOUND {
            let url = self.url_for(segments);
            let message = format!("{operation}: {method} {url}: {}", error_message(&reply.body));
            return Err(ApiError { message, status: Some(reply.status.as_u16()) });
        }
        self.decode(operation, &method, segments, &reply)
    }

    fn decode<T: DeserializeOwned>(
        &self,
        operation: &str,
        method: &Method,
        segments: &[&str],
        reply: &Reply,
    ) -> Result<T, ApiError> {
        serde_json::from_slice(&reply.body).map_err(|error| ApiError {
            message: format!("{operation}: {method} {}: unexpected answer: {error}", self.url_for(segments)),
            status: Some(reply.status.as_u16()),
        })
    }

    /// A call answering with no body, for which 404 counts as done (deleting what is gone).
    async fn call_idempotent_delete(&self, operation: &'static str, segments: &[&str]) -> Result<(), ApiError> {
        self.call(operation, Method::DELETE, segments, NO_BODY).await.map(|_| ())
    }
}

fn error_message(body: &[u8]) -> String {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(ErrorBody { error }) => error,
        Err(_) => String::from_utf8_lossy(body).chars().take(200).collect(),
    }
}

/// The provider's calls, each under the operation name a provider sends (which faults target).
impl LocalCloud {
    /// The instance with ID `id` (`GET /v1/instances/by-id/{id}`); `None` when there is none.
    pub async fn instance_by_id(&self, operation: &'static str, id: &str) -> Result<Option<Instance>, ApiError> {
        self.call_optional(operation, Method::GET, &["v1", "instances", "by-id", id], NO_BODY).await
    }

    /// The instance named `name` (`GET /v1/instances/{name}`); `None` when there is none.
    pub async fn instance_by_name(&self, operation: &'static str, name: &str) -> Result<Option<Instance>, ApiError> {
        self.call_optional(operation, Method::GET, &["v1", "instances", name], NO_BODY).await
    }

    /// The load balancer `name` of `cluster`, if there is one (`get_load_balancer`).
    pub async fn load_balancer(&self, cluster: &str, name: &str) -> Result<Option<api::LoadBalancer>, ApiError> {
        let segments = ["v1", "loadbalancers", cluster, name];
        self.call_optional("get_load_balancer", Method::GET, &segments, NO_BODY).await
    }

    /// Creates or replaces the load balancer `name` of `cluster` (`ensure_load_balancer`).
    pub async fn put_load_balancer(
        &self,
        cluster: &str,
        name: &str,
        spec: &LoadBalancerSpec,
    ) -> Result<api::LoadBalancer, ApiError> {
        let segments = ["v1", "loadbalancers", cluster, name];
        self.call_required("ensure_load_balancer", Method::PUT, &segments, Some(spec)).await
    }

    /// Points the existing load balancer `name` of `cluster` at other backends (`update_load_balancer`).
    pub async fn update_backends(
        &self,
        cluster: &str,
        name: &str,
        update: &UpdateBackends,
    ) -> Result<api::LoadBalancer, ApiError> {
        let segments = ["v1", "loadbalancers", cluster, name];
        self.call_required("update_load_balancer", Method::PATCH, &segments, Some(update)).await
    }

    /// Deletes the load balancer `name` of `cluster`; done when it is gone (`ensure_load_balancer_deleted`).
    pub async fn delete_load_balancer(&self, cluster: &str, name: &str) -> Result<(), ApiError> {
        self.call_idempotent_delete("ensure_load_balancer_deleted", &["v1", "loadbalancers", cluster, name]).await
    }

    /// The routes of `cluster`, blackholes marked.
    pub async fn routes(&self, operation: &'static str, cluster: &str) -> Result<Vec<api::Route>, ApiError> {
        self.call_required(operation, Method::GET, &["v1", "routes", cluster], NO_BODY).await
    }

    /// Creates a route of `cluster` (`create_route`).
    pub async fn create_route(&self, cluster: &str, request: &CreateRoute) -> Result<api::Route, ApiError> {
        self.call_required("create_route", Method::POST, &["v1", "routes", cluster], Some(request)).await
    }

    /// Deletes the route `name` of `cluster`; done when it is gone (`delete_route`).
    pub async fn delete_route(&self, cluster: &str, name: &str) -> Result<(), ApiError> {
        self.call_idempotent_delete("delete_route", &["v1", "routes", cluster, name]).await
    }
}

/// The admin API: for the CLI, tests and the local deployer. These calls are never faulted.
impl LocalCloud {
    /// Creates a running instance.
    pub async fn create_instance(&self, request: &CreateInstance) -> Result<Instance, ApiError> {
        self.call_required("create_instance", Method::POST, &["admin", "instances"], Some(request)).await
    }

    /// Every instance, terminated ones included.
    pub async fn list_instances(&self) -> Result<Vec<Instance>, ApiError> {
        self.call_required("list_instances", Method::GET, &["admin", "instances"], NO_BODY).await
    }

    /// Shuts the live instance `name` down.
    pub async fn shutdown_instance(&self, name: &str) -> Result<Instance, ApiError> {
        self.instance_action("shutdown_instance", name, "shutdown").await
    }

    /// Starts the shut-down instance `name` again.
    pub async fn start_instance(&self, name: &str) -> Result<Instance, ApiError> {
        self.instance_action("start_instance", name, "start").await
    }

    /// Terminates the live instance `name`.
    pub async fn terminate_instance(&self, name: &str) -> Result<Instance, ApiError> {
        self.instance_action("terminate_instance", name, "terminate").await
    }

    async fn instance_action(&self, operation: &'static str, name: &str, verb: &str) -> Result<Instance, ApiError> {
        self.call_required(operation, Method::POST, &["admin", "instances", name, verb], NO_BODY).await
    }

    /// Every load balancer of every cluster.
    pub async fn list_load_balancers(&self) -> Result<Vec<api::LoadBalancer>, ApiError> {
        self.call_required("list_load_balancers", Method::GET, &["admin", "loadbalancers"], NO_BODY).await
    }

    /// Every route of every cluster, blackholes marked.
    pub async fn list_all_routes(&self) -> Result<Vec<api::Route>, ApiError> {
        self.call_required("list_routes", Method::GET, &["admin", "routes"], NO_BODY).await
    }

    /// Injects a fault.
    pub async fn inject_fault(&self, spec: &FaultSpec) -> Result<Fault, ApiError> {
        self.call_required("inject_fault", Method::POST, &["admin", "faults"], Some(spec)).await
    }

    /// The active faults.
    pub async fn list_faults(&self) -> Result<Vec<Fault>, ApiError> {
        self.call_required("list_faults", Method::GET, &["admin", "faults"], NO_BODY).await
    }

    /// Clears every fault, returning how many there were.
    pub async fn clear_faults(&self) -> Result<u64, ApiError> {
        let cleared: serde_json::Value =
            self.call_required("clear_faults", Method::DELETE, &["admin", "faults"], NO_BODY).await?;
        Ok(cleared["cleared"].as_u64().unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn error_bodies_are_read_as_json_or_text() {
        assert_eq!(error_message(br#"{"error":"injected fault"}"#), "injected fault");
        assert_eq!(error_message(b"plain"), "plain");
    }
}

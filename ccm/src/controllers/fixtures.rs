//! Fixtures for the controllers' tests, in kube-rs controller-rs's style: a kube client whose API
//! server is a mock the test plays ([`ApiServer`]), checking each request a reconcile makes and
//! answering it, and an in-memory cloud that records what it was asked ([`FakeCloud`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use http::{Method, Request, Response};
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, NodeAddress, Service};
use kube::Client;
use kube::client::Body;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tower_test::mock::{self, Handle, SendResponse};

use crate::cloud::{CloudError, CloudProvider, InstanceMetadata, InstancesV2, LoadBalancer, Route, Routes};

/// Where kube's event recorder posts the events of cluster-scoped objects and of those in `default`.
pub const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/default/events";
/// The ingress IP the fake cloud gives every load balancer.
pub const LOAD_BALANCER_IP: &str = "198.51.100.7";

/// A client talking to the returned mock API server.
pub fn mock_client() -> (Client, ApiServer) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    (Client::new(service, "default"), ApiServer(handle))
}

/// The API server side of [`mock_client`].
pub struct ApiServer(Handle<Request<Body>, Response<Body>>);

/// A request the API server received, still to be answered.
pub struct Received {
    pub method: Method,
    pub path: String,
    pub query: String,
    pub content_type: String,
    /// The JSON body; `Null` when there is none.
    pub body: Value,
    reply: SendResponse<Response<Body>>,
}

impl ApiServer {
    /// Plays `scenario` (its `expect`s and answers) in a task of its own, giving the server back.
    pub fn verify<F, Fut>(self, scenario: F) -> JoinHandle<ApiServer>
    where
        F: FnOnce(ApiServer) -> Fut,
        Fut: Future<Output = ApiServer> + Send + 'static,
    {
        tokio::spawn(scenario(self))
    }

    /// The next request, which must be `method` on `path` (the query aside).
    pub async fn expect(&mut self, method: Method, path: &str) -> Received {
        let received = self.next().await.unwrap_or_else(|| panic!("expected {method} {path}, got no request"));
        assert_eq!((&received.method, received.path.as_str()), (&method, path), "query: {}", received.query);
        received
    }

    /// Panics if a request came beyond those expected.
    pub async fn assert_no_more_requests(mut self) {
        if let Ok(Some(extra)) = tokio::time::timeout(Duration::from_millis(100), self.next()).await {
            panic!("unexpected request {} {}?{} {}", extra.method, extra.path, extra.query, extra.body);
        }
    }

    /// Answers every request for as long as the client lives, as an API server with no objects: an
    /// empty list, or a watch that never sends anything. Each request is also sent on as
    /// `METHOD path?query`.
    pub fn serve_nothing(mut self) -> mpsc::UnboundedReceiver<String> {
        let (seen, requests) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut watches = Vec::new();
            while let Some(received) = self.next().await {
                let _ = seen.send(format!("{} {}?{}", received.method, received.path, received.query));
                match received.query.contains("watch=true") {
                    true => watches.push(received.reply),
                    false => received.respond(
                        json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"}, "items": []}),
                    ),
                }
            }
        });
        requests
    }

    async fn next(&mut self) -> Option<Received> {
        let (request, reply) = self.0.next_request().await?;
        let (parts, body) = request.into_parts();
        let bytes = body.collect_bytes().await.expect("a readable request body");
        let content_type = parts.headers.get(http::header::CONTENT_TYPE).map(|v| v.to_str().unwrap().to_owned());
        Some(Received {
            method: parts.method,
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().unwrap_or_default().to_owned(),
            content_type: content_type.unwrap_or_default(),
            body: if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).expect("a JSON body") },
            reply,
        })
    }
}

impl Received {
    /// Answers 200 with `body` as JSON.
    pub fn respond(self, body: impl Serialize) {
        let body = serde_json::to_vec(&body).expect("serializable");
        self.reply.send_response(Response::builder().body(Body::from(body)).expect("a response"));
    }

    /// Answers 200 with the request's own body, as the API server does for a create or replace.
    pub fn echo(self) {
        let body = self.body.clone();
        self.respond(body)
    }
}

/// The scenario's server once it has played, within a second of the reconcile's end.
pub async fn played(verifier: JoinHandle<ApiServer>) -> ApiServer {
    tokio::time::timeout(Duration::from_secs(1), verifier)
        .await
        .expect("the scenario did not finish: a request it expects was not made")
        .expect("the scenario failed")
}

/// `future` (a reconcile), or a panic if it takes longer than 5 s.
pub async fn within_5s<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(5), future).await.expect("finished within 5 s")
}

/// A Kubernetes object from its JSON.
pub fn from_json<T: DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

/// A `type: LoadBalancer` service `default/<name>` with UID `uid-<name>`.
pub fn service(name: &str, finalizers: &[&str], deleting: bool) -> Service {
    let mut metadata = json!({
        "name": name, "namespace": "default", "uid": format!("uid-{name}"), "resourceVersion": "1",
        "finalizers": finalizers,
    });
    if deleting {
        metadata["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    }
    from_json(json!({"metadata": metadata, "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}))
}

/// The fake cloud's instance of a node.
#[derive(Debug, Clone, Default)]
pub struct FakeInstance {
    pub metadata: InstanceMetadata,
    pub shut_down: bool,
}

impl FakeInstance {
    /// A running instance `fake://<node>` in `zone-a` with `internal_ip`.
    pub fn running(node: &str, internal_ip: &str) -> Self {
        let metadata = InstanceMetadata {
            provider_id: format!("fake://{node}"),
            instance_type: "small".into(),
            node_addresses: vec![NodeAddress { type_: "InternalIP".into(), address: internal_ip.into() }],
            zone: "zone-a".into(),
            region: "region-1".into(),
            additional_labels: BTreeMap::new(),
        };
        FakeInstance { metadata, shut_down: false }
    }
}

/// An in-memory cloud with instances, load balancers and routes, recording each call.
#[derive(Default)]
pub struct FakeCloud {
    /// Instances by node name; a node without one has no instance.
    pub instances: BTreeMap<String, FakeInstance>,
    /// Load balancers by service (`namespace/name`).
    pub load_balancers: Mutex<BTreeMap<String, LoadBalancerStatus>>,
    pub routes: Mutex<Vec<Route>>,
    calls: Mutex<Vec<String>>,
}

impl FakeCloud {
    /// A cloud with these instances, by node name, and nothing else.
    pub fn with_instances<'a>(instances: impl IntoIterator<Item = (&'a str, FakeInstance)>) -> Self {
        let instances = instances.into_iter().map(|(node, instance)| (node.to_owned(), instance)).collect();
        FakeCloud { instances, ..FakeCloud::default() }
    }

    /// The calls made so far, e.g. `instance_metadata node-1`, in order.
    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    fn record(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }

    fn instance(&self, call: &str, node: &Node) -> Result<&FakeInstance, CloudError> {
        let name = node.metadata.name.clone().unwrap_or_default();
        self.record(format!("{call} {name}"));
        self.instances.get(&name).ok_or(CloudError::InstanceNotFound)
    }

    fn load_balancer_call(&self, call: &str, service: &Service, nodes: Option<&[Node]>) -> String {
        let key = super::service::key(service);
        let names = nodes.map(|nodes| nodes.iter().map(super::name_of).collect::<Vec<_>>().join(","));
        self.record(match names {
            Some(names) => format!("{call} {key} nodes=[{names}]"),
            None => format!("{call} {key}"),
        });
        key
    }
}

impl CloudProvider for FakeCloud {
    fn provider_name(&self) -> &str {
        "fake"
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

#[async_trait]
impl InstancesV2 for FakeCloud {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        Ok(self.instance("instance_exists", node).is_ok())
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        Ok(self.instance("instance_shutdown", node)?.shut_down)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, CloudError> {
        Ok(self.instance("instance_metadata", node)?.metadata.clone())
    }
}

#[async_trait]
impl LoadBalancer for FakeCloud {
    async fn get_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
    ) -> Result<(Option<LoadBalancerStatus>, bool), CloudError> {
        let key = self.load_balancer_call("get_load_balancer", service, None);
        let status = self.load_balancers.lock().unwrap().get(&key).cloned();
        let exists = status.is_some();
        Ok((status, exists))
    }

    async fn ensure_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<LoadBalancerStatus, CloudError> {
        let key = self.load_balancer_call("ensure_load_balancer", service, Some(nodes));
        let ingress = LoadBalancerIngress { ip: Some(LOAD_BALANCER_IP.into()), ..LoadBalancerIngress::default() };
        let status = LoadBalancerStatus { ingress: Some(vec![ingress]) };
        self.load_balancers.lock().unwrap().insert(key, status.clone());
        Ok(status)
    }

    async fn update_load_balancer(
        &self,
        _cluster_name: &str,
        service: &Service,
        nodes: &[Node],
    ) -> Result<(), CloudError> {
        self.load_balancer_call("update_load_balancer", service, Some(nodes));
        Ok(())
    }

    async fn ensure_load_balancer_deleted(&self, _cluster_name: &str, service: &Service) -> Result<(), CloudError> {
        let key = self.load_balancer_call("ensure_load_balancer_deleted", service, None);
        self.load_balancers.lock().unwrap().remove(&key);
        Ok(())
    }
}

#[async_trait]
impl Routes for FakeCloud {
    async fn list_routes(&self, _cluster_name: &str) -> Result<Vec<Route>, CloudError> {
        self.record("list_routes".into());
        Ok(self.routes.lock().unwrap().clone())
    }

    async fn create_route(&self, _cluster_name: &str, name_hint: &str, route: &Route) -> Result<(), CloudError> {
        self.record(format!("create_route {name_hint} {} {}", route.target_node, route.destination_cidr));
        self.routes.lock().unwrap().push(Route { name: name_hint.into(), ..route.clone() });
        Ok(())
    }

    async fn delete_route(&self, _cluster_name: &str, route: &Route) -> Result<(), CloudError> {
        self.record(format!("delete_route {} {}", route.target_node, route.destination_cidr));
        self.routes.lock().unwrap().retain(|r| r != route);
        Ok(())
    }
}

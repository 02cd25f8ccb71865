//! service: load balancers for `type: LoadBalancer` services without `spec.loadBalancerClass`.
//!
//! Upstream semantics: the finalizer `service.kubernetes.io/load-balancer-cleanup` is added before
//! a load balancer is made and removed once it is gone; events `EnsuringLoadBalancer`,
//! `EnsuredLoadBalancer`, `UpdatedLoadBalancer`, `DeletingLoadBalancer`, `DeletedLoadBalancer`,
//! `SyncLoadBalancerFailed`; backends exclude nodes being deleted or labelled
//! `node.kubernetes.io/exclude-from-external-load-balancers`; `status.loadBalancer` is patched only
//! when it changes; a change of the backend node set calls `update_load_balancer`; failures retry
//! with backoff from 5 s doubling to 300 s.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::EventType;
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{PredicateConfig, WatchStreamExt, watcher};
use serde_json::json;

use super::{Common, Error, Events, Health, SERVICE, cloud};
use crate::cloud::{CloudProvider, LoadBalancer};
use crate::metrics::Metrics;
use crate::shutdown::Shutdown;

pub const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
pub const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
const MIN_BACKOFF: Duration = Duration::from_secs(5);
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// The service controller reconciles only on changes: it counts as alive while its stream runs.
const MAX_SILENCE: Duration = Duration::from_secs(3600);

/// Whether this controller owns the service's load balancer.
pub fn wants_load_balancer(service: &Service) -> bool {
    service
        .spec
        .as_ref()
        .is_some_and(|spec| spec.type_.as_deref() == Some("LoadBalancer") && spec.load_balancer_class.is_none())
}

fn has_finalizer(service: &Service) -> bool {
    service.metadata.finalizers.as_ref().is_some_and(|f| f.iter().any(|f| f == FINALIZER))
}

/// The nodes a load balancer should send traffic to.
pub fn backends(nodes: &[Node]) -> Vec<Node> {
    nodes
        .iter()
        .filter(|node| node.metadata.deletion_timestamp.is_none())
        .filter(|node| !node.metadata.labels.as_ref().is_some_and(|l| l.contains_key(EXCLUDE_LABEL)))
        .cloned()
        .collect()
}

fn backend_names(nodes: &[Node]) -> BTreeSet<String> {
    nodes.iter().filter_map(|n| n.metadata.name.clone()).collect()
}

/// The retry delay after `failures` consecutive failures: 5 s, 10 s, 20 s, ... at most 300 s.
pub fn backoff(failures: u32) -> Duration {
    MIN_BACKOFF.saturating_mul(1u32 << failures.saturating_sub(1).min(16)).min(MAX_BACKOFF)
}

/// What about a node matters to load balancers; other node changes (heartbeats) trigger nothing.
fn node_relevance(node: &Node) -> Option<u64> {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    node.metadata.deletion_timestamp.is_some().hash(&mut hasher);
    node.metadata.labels.as_ref().is_some_and(|l| l.contains_key(EXCLUDE_LABEL)).hash(&mut hasher);
    node.spec.as_ref().and_then(|s| s.provider_id.clone()).hash(&mut hasher);
    Some(hasher.finish())
}

/// The nodes whose change matters to load balancers, from a watch of nodes: a deleted node always
/// counts. Its last state need not differ in anything the predicate hashes (a node deleted without
/// a finalizer never had a deletion timestamp), and kube-runtime's predicate drops an event whose
/// hash is unchanged, so a deleted node is marked deleting before the predicate sees it; without
/// that, a terminated node stayed in every load balancer until the CCM restarted.
fn relevant_node_changes(
    events: impl futures::Stream<Item = Result<watcher::Event<Node>, watcher::Error>> + Send,
) -> impl futures::Stream<Item = Result<Node, watcher::Error>> + Send {
    use futures::TryStreamExt;
    events
        .map_ok(|event| match event {
            watcher::Event::Delete(mut node) => {
                if node.metadata.deletion_timestamp.is_none() {
                    node.metadata.deletion_timestamp = node.metadata.creation_timestamp.clone();
                }
                watcher::Event::Delete(node)
            }
            other => other,
        })
        .touched_objects()
        .predicate_filter(node_relevance, PredicateConfig::default())
}

/// Upstream's service controller: load balancers for services.
pub struct ServiceController {
    client: Client,
    cloud: Arc<dyn CloudProvider>,
    events: Events,
    metrics: Arc<Metrics>,
    health: Health,
    cluster_name: String,
    /// `--concurrent-service-syncs`.
    concurrency: u16,
    /// Consecutive failures per service UID, for the backoff.
    failures: Mutex<BTreeMap<String, u32>>,
    /// What was last synced per service UID.
    synced: Mutex<BTreeMap<String, Synced>>,
}

impl ServiceController {
    pub fn new(common: Common, cluster_name: String, concurrency: u16) -> Self {
        let Common { client, cloud, metrics, health } = common;
        let events = Events::of(SERVICE, client.clone());
        ServiceController {
            client,
            cloud,
            events,
            metrics,
            health,
            cluster_name,
            concurrency: concurrency.max(1),
            failures: Mutex::default(),
            synced: Mutex::default(),
        }
    }

    /// Runs until `shutdown`, then lets the reconciles under way finish.
    pub async fn run(self: Arc<Self>, shutdown: Shutdown) {
        let services: Api<Service> = Api::all(self.client.clone());
        let nodes: Api<Node> = Api::all(self.client.clone());
        let controller = Controller::new(services, watcher::Config::default());
        let store = controller.store();
        let node_changes = relevant_node_changes(watcher(nodes, watcher::Config::default()).default_backoff());
        self.health.beat(SERVICE, MAX_SILENCE);
        controller
            .watches_stream(node_changes, move |_node| {
                let owned: Vec<ObjectRef<Service>> = store
                    .state()
                    .iter()
                    .filter(|s| wants_load_balancer(s))
                    .map(|s| ObjectRef::from_obj(&**s))
                    .collect();
                owned
            })
            .with_config(kube::runtime::controller::Config::default().concurrency(self.concurrency))
            .graceful_shutdown_on(shutdown.requested())
            .run(Self::reconcile, Self::error_policy, self.clone())
            .for_each(|result| {
                self.health.beat(SERVICE, MAX_SILENCE);
                if let Err(error) = result {
                    tracing::debug!(%error, "service reconcile failed");
                }
                futures::future::ready(())
            })
            .await;
        tracing::info!("service controller stopped");
    }

    async fn reconcile(service: Arc<Service>, this: Arc<Self>) -> Result<Action, Error> {
        let _timer = this.metrics.reconcile(SERVICE);
        let Some(lb) = this.cloud.load_balancer() else { return Ok(Action::await_change()) };
        if !wants_load_balancer(&service) && !has_finalizer(&service) {
            return Ok(Action::await_change());
        }
        let api: Api<Service> =
            Api::namespaced(this.client.clone(), service.metadata.namespace.as_deref().unwrap_or("default"));
        let result = if !wants_load_balancer(&service) && service.metadata.deletion_timestamp.is_none() {
            // No longer a LoadBalancer (type or class changed): clean up, then let go of it.
            this.delete_load_balancer(&service, lb).await?;
            remove_finalizer(&api, &service).await.map(|_| Action::await_change())
        } else {
            finalizer(&api, FINALIZER, service.clone(), |event| async {
                match event {
                    Finalizer::Apply(service) => this.ensure(&api, &service, lb).await,
                    Finalizer::Cleanup(service) => {
                        this.delete_load_balancer(&service, lb).await.map(|_| Action::await_change())
                    }
                }
            })
            .await
            .map_err(|e| match e {
                kube::runtime::finalizer::Error::ApplyFailed(e) | kube::runtime::finalizer::Error::CleanupFailed(e) => {
                    e
                }
                other => Error::Finalizer(other.to_string()),
            })
        };
        if result.is_ok() {
            this.failures.lock().expect("failures lock").remove(&uid(&service));
        }
        result
    }

    fn error_policy(service: Arc<Service>, error: &Error, this: Arc<Self>) -> Action {
        this.metrics.failed(SERVICE);
        let failures = {
            let mut failures = this.failures.lock().expect("failures lock");
            let count = failures.entry(uid(&service)).or_default();
            *count += 1;
            *count
        };
        let delay = backoff(failures);
        tracing::warn!(service = %key(&service), %error, ?delay, "failed to sync load balancer");
        let message = format!("Error syncing load balancer: {error}");
        tokio::spawn(async move {
            this.events.publish(&*service, EventType::Warning, "SyncLoadBalancerFailed", message).await
        });
        Action::requeue(delay)
    }

    async fn ensure(&self, api: &Api<Service>, service: &Service, lb: &dyn LoadBalancer) -> Result<Action, Error> {
        let cluster = &self.cluster_name;
        let nodes = backends(&super::list_nodes(&Api::<Node>::all(self.client.clone())).await?);
        let (existing, exists) = lb.get_load_balancer(cluster, service).await.map_err(cloud("get_load_balancer"))?;
        let status = if exists
            && same_status(existing.as_ref(), current_status(service).as_ref())
            && !self.spec_changed(service)
        {
            // Only the node set can have changed: that is an update, as upstream's nodeSyncLoop does.
            if self.backends_changed(service, &nodes) {
                lb.update_load_balancer(cluster, service, &nodes).await.map_err(cloud("update_load_balancer"))?;
                // Upstream's words exactly: no node count.
                match nodes.is_empty() {
                    true => self.unavailable(service).await,
                    false => {
                        let message = "Updated load balancer with new hosts".into();
                        self.events.publish(service, EventType::Normal, "UpdatedLoadBalancer", message).await
                    }
                }
            }
            existing.unwrap_or_default()
        } else {
            let message = "Ensuring load balancer".into();
            self.events.publish(service, EventType::Normal, "EnsuringLoadBalancer", message).await;
            if nodes.is_empty() {
                self.unavailable(service).await;
            }
            let status =
                lb.ensure_load_balancer(cluster, service, &nodes).await.map_err(cloud("ensure_load_balancer"))?;
            let message = "Ensured load balancer".into();
            self.events.publish(service, EventType::Normal, "EnsuredLoadBalancer", message).await;
            status
        };
        self.remember(service, &nodes);
        if !same_status(current_status(service).as_ref(), Some(&status)) {
            patch_status(api, service, Some(&status)).await?;
        }
        Ok(Action::await_change())
    }

    /// Upstream's warning when a load balancer gets no backends.
    async fn unavailable(&self, service: &Service) {
        let message = "There are no available nodes for LoadBalancer".into();
        self.events.publish(service, EventType::Warning, "UnAvailableLoadBalancer", message).await;
    }

    async fn delete_load_balancer(&self, service: &Service, lb: &dyn LoadBalancer) -> Result<(), Error> {
        let message = "Deleting load balancer".into();
        self.events.publish(service, EventType::Normal, "DeletingLoadBalancer", message).await;
        lb.ensure_load_balancer_deleted(&self.cluster_name, service)
            .await
            .map_err(cloud("ensure_load_balancer_deleted"))?;
        let message = "Deleted load balancer".into();
        self.events.publish(service, EventType::Normal, "DeletedLoadBalancer", message).await;
        self.synced.lock().expect("synced lock").remove(&uid(service));
        Ok(())
    }

    fn spec_changed(&self, service: &Service) -> bool {
        let synced = self.synced.lock().expect("synced lock");
        synced.get(&uid(service)).is_none_or(|s| s.spec != spec_of(service))
    }

    fn backends_changed(&self, service: &Service, nodes: &[Node]) -> bool {
        let synced = self.synced.lock().expect("synced lock");
        synced.get(&uid(service)).is_none_or(|s| s.backends != backend_names(nodes))
    }

    fn remember(&self, service: &Service, nodes: &[Node]) {
        let synced = Synced { spec: spec_of(service), backends: backend_names(nodes) };
        self.synced.lock().expect("synced lock").insert(uid(service), synced);
    }
}

fn uid(service: &Service) -> String {
    service.metadata.uid.clone().unwrap_or_default()
}

/// `namespace/name`, for logs.
pub fn key(service: &Service) -> String {
    format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or_default(),
        service.metadata.name.as_deref().unwrap_or_default()
    )
}

async fn remove_finalizer(api: &Api<Service>, service: &Service) -> Result<(), Error> {
    if current_status(service).is_some_and(|s| s.ingress.as_ref().is_some_and(|i| !i.is_empty())) {
        patch_status(api, service, None).await?;
    }
    let finalizers: Vec<&String> = service.metadata.finalizers.iter().flatten().filter(|f| *f != FINALIZER).collect();
    let patch =
        json!({ "metadata": { "resourceVersion": service.metadata.resource_version, "finalizers": finalizers } });
    api.patch(service.metadata.name.as_deref().unwrap_or_default(), &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Whether two statuses name the same ingress points. The API server defaults fields the cloud
/// leaves out (`ipMode: VIP`), so whole-struct equality would see a change on every sync.
pub fn same_status(a: Option<&LoadBalancerStatus>, b: Option<&LoadBalancerStatus>) -> bool {
    let points = |status: Option<&LoadBalancerStatus>| -> Vec<(Option<String>, Option<String>)> {
        let ingress = status.and_then(|s| s.ingress.clone()).unwrap_or_default();
        ingress.into_iter().map(|i| (i.ip, i.hostname)).collect()
    };
    points(a) == points(b)
}

fn current_status(service: &Service) -> Option<LoadBalancerStatus> {
    service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.clone())
        .filter(|s| s.ingress.as_ref().is_some_and(|i| !i.is_empty()))
}

async fn patch_status(api: &Api<Service>, service: &Service, status: Option<&LoadBalancerStatus>) -> Result<(), Error> {
    let patch = json!({ "status": { "loadBalancer": status.cloned().unwrap_or_default() } });
    api.patch_status(
        service.metadata.name.as_deref().unwrap_or_default(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// What the controller last synced for a service: its spec and annotations, and its backend node names.
#[derive(Debug, Clone, PartialEq)]
struct Synced {
    spec: String,
    backends: BTreeSet<String>,
}

/// The spec and the annotations: like upstream's `needsUpdate`, a change of either (e.g. of the
/// source ranges annotation) ensures the load balancer again.
fn spec_of(service: &Service) -> String {
    serde_json::to_string(&(&service.spec, &service.metadata.annotations)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::fixtures::{self, EVENTS, FakeCloud, LOAD_BALANCER_IP, mock_client, played, within_5s};
    use http::Method;
    use serde_json::json;

    fn node(name: &str, labels: serde_json::Value, deleting: bool) -> Node {
        let mut meta = json!({"name": name, "labels": labels});
        if deleting {
            meta["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value(json!({"metadata": meta})).unwrap()
    }

    /// A node deleted as it last was (no deletion timestamp: no finalizer held it) still reaches
    /// the controller, so its load balancers lose it; a heartbeat does not.
    #[tokio::test]
    async fn a_deleted_node_triggers_the_load_balancers_even_unchanged() {
        let mut seen: Node = node("a", json!({}), false);
        seen.metadata.creation_timestamp = Some(serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap());
        seen.metadata.uid = Some("uid-a".into());
        let mut heartbeat = seen.clone();
        heartbeat.metadata.resource_version = Some("2".into());
        let events = futures::stream::iter([
            Ok(watcher::Event::Apply(seen.clone())),
            Ok(watcher::Event::Apply(heartbeat)),
            Ok(watcher::Event::Delete(seen)),
        ]);
        let passed: Vec<Node> = relevant_node_changes(events).map(|n| n.unwrap()).collect().await;
        assert_eq!(passed.len(), 2, "the first sight and the deletion, not the heartbeat: {passed:#?}");
        assert!(passed[1].metadata.deletion_timestamp.is_some());
    }

    #[test]
    fn backends_exclude_deleting_and_labelled_nodes() {
        let nodes = [
            node("a", json!({}), false),
            node("b", json!({EXCLUDE_LABEL: ""}), false),
            node("c", json!({}), true),
            node("d", json!({"other": "x"}), false),
        ];
        assert_eq!(backend_names(&backends(&nodes)), ["a", "d"].map(String::from).into());
    }

    #[test]
    fn only_class_less_load_balancer_services_are_ours() {
        let svc = |spec: serde_json::Value| serde_json::from_value::<Service>(json!({"spec": spec})).unwrap();
        assert!(wants_load_balancer(&svc(json!({"type": "LoadBalancer"}))));
        assert!(!wants_load_balancer(&svc(json!({"type": "LoadBalancer", "loadBalancerClass": "example.com/lb"}))));
        assert!(!wants_load_balancer(&svc(json!({"type": "ClusterIP"}))));
        assert!(!wants_load_balancer(&svc(json!({}))));
    }

    #[test]
    fn statuses_compare_by_ingress_points_not_by_server_defaults() {
        let status = |v: serde_json::Value| serde_json::from_value::<LoadBalancerStatus>(v).unwrap();
        let from_cloud = status(json!({"ingress": [{"ip": "127.200.0.1"}]}));
        let stored = status(json!({"ingress": [{"ip": "127.200.0.1", "ipMode": "VIP"}]}));
        assert!(same_status(Some(&from_cloud), Some(&stored)));
        assert!(!same_status(Some(&from_cloud), Some(&status(json!({"ingress": [{"ip": "127.200.0.2"}]})))));
        assert!(!same_status(Some(&from_cloud), None));
    }

    #[test]
    fn backoff_doubles_from_5s_to_at_most_300s() {
        let delays: Vec<u64> = (1..=9).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(delays, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(backoff(100).as_secs(), 300);
    }

    #[test]
    fn heartbeats_do_not_count_as_node_changes_but_the_exclusion_label_does() {
        let mut a = node("a", json!({}), false);
        let before = node_relevance(&a);
        a.status = Some(serde_json::from_value(json!({"conditions": [{"type": "Ready", "status": "True"}]})).unwrap());
        assert_eq!(node_relevance(&a), before);
        let excluded = node("a", json!({EXCLUDE_LABEL: "true"}), false);
        assert_ne!(node_relevance(&excluded), before);
    }

    const WEB: &str = "/api/v1/namespaces/default/services/web";

    fn controller(cloud: Arc<FakeCloud>, client: Client) -> Arc<ServiceController> {
        Arc::new(ServiceController::new(
            Common { client, cloud, metrics: Arc::default(), health: Health::default() },
            "kubernetes".into(),
            1,
        ))
    }

    /// The next request is the event `reason` about `default/web`, from the service controller.
    async fn expect_event(server: &mut fixtures::ApiServer, reason: &str, note: &str) {
        let event = server.expect(Method::POST, EVENTS).await;
        assert_eq!((&event.body["reason"], &event.body["note"]), (&json!(reason), &json!(note)));
        assert_eq!(event.body["reportingController"], "service-controller");
        assert_eq!(event.body["regarding"]["kind"], "Service");
        assert_eq!(event.body["regarding"]["name"], "web");
        event.echo();
    }

    #[tokio::test]
    async fn a_new_load_balancer_service_gets_the_finalizer_then_a_load_balancer_and_its_status() {
        let cloud = Arc::new(FakeCloud::default());
        let (client, server) = mock_client();
        let controller = controller(cloud.clone(), client);
        let new = fixtures::service("web", &[], false);
        let finalized = fixtures::service("web", &[FINALIZER], false);
        let answer = finalized.clone();
        let verifier = server.verify(|mut server| async move {
            let patch = server.expect(Method::PATCH, WEB).await;
            assert_eq!(patch.content_type, "application/json-patch+json");
            let add = json!({"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]});
            assert!(patch.body.as_array().unwrap().contains(&add), "{}", patch.body);
            patch.respond(&answer);

            let list = server.expect(Method::GET, "/api/v1/nodes").await;
            let nodes =
                [json!({"metadata": {"name": "a"}}), json!({"metadata": {"name": "b", "labels": {EXCLUDE_LABEL: ""}}})];
            list.respond(json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": nodes}));
            expect_event(&mut server, "EnsuringLoadBalancer", "Ensuring load balancer").await;
            expect_event(&mut server, "EnsuredLoadBalancer", "Ensured load balancer").await;
            let status = server.expect(Method::PATCH, &format!("{WEB}/status")).await;
            assert_eq!(status.content_type, "application/merge-patch+json");
            assert_eq!(status.body, json!({"status": {"loadBalancer": {"ingress": [{"ip": LOAD_BALANCER_IP}]}}}));
            status.respond(&answer);
            server
        });

        let first = within_5s(ServiceController::reconcile(Arc::new(new), controller.clone())).await;
        assert!(cloud.calls().is_empty(), "no load balancer before the finalizer: {:?}", cloud.calls());
        let second = within_5s(ServiceController::reconcile(Arc::new(finalized), controller)).await;

        played(verifier).await.assert_no_more_requests().await;
        assert_eq!((first.unwrap(), second.unwrap()), (Action::await_change(), Action::await_change()));
        assert_eq!(cloud.calls(), ["get_load_balancer default/web", "ensure_load_balancer default/web nodes=[a]"]);
    }

    #[tokio::test]
    async fn a_deleted_service_loses_its_load_balancer_then_the_finalizer() {
        let cloud = Arc::new(FakeCloud::default());
        let (client, server) = mock_client();
        let controller = controller(cloud.clone(), client);
        let deleted = fixtures::service("web", &["example.com/other", FINALIZER], true);
        let answer = fixtures::service("web", &["example.com/other"], true);
        let verifier = server.verify(|mut server| async move {
            expect_event(&mut server, "DeletingLoadBalancer", "Deleting load balancer").await;
            expect_event(&mut server, "DeletedLoadBalancer", "Deleted load balancer").await;
            let patch = server.expect(Method::PATCH, WEB).await;
            assert_eq!(patch.content_type, "application/json-patch+json");
            let ours = json!([
                {"op": "test", "path": "/metadata/finalizers/1", "value": FINALIZER},
                {"op": "remove", "path": "/metadata/finalizers/1"},
            ]);
            assert_eq!(patch.body, ours, "only our finalizer goes");
            patch.respond(&answer);
            server
        });

        let result = within_5s(ServiceController::reconcile(Arc::new(deleted), controller)).await;

        played(verifier).await.assert_no_more_requests().await;
        assert_eq!(result.unwrap(), Action::await_change());
        assert_eq!(cloud.calls(), ["ensure_load_balancer_deleted default/web"]);
    }
}

//! route: every `--route-reconciliation-period`, a cloud route per `spec.podCIDRs` entry of every
//! node inside `--cluster-cidr` (name hint: the node's UID), stale routes inside the cluster CIDR
//! deleted, and each node's `NetworkUnavailable` condition set: `False`/`RouteCreated` once all its
//! routes exist, `True`/`NoRouteCreated` otherwise.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::{Common, Error, Health, ROUTE, cloud, name_of};
use crate::cloud::{CloudProvider, Route, Routes};
use crate::metrics::Metrics;
use crate::shutdown::Shutdown;

/// (target node, destination CIDR): what identifies a route to this controller.
pub type RouteKey = (String, String);

fn pod_cidrs(node: &Node) -> Vec<String> {
    let spec = node.spec.as_ref();
    match spec.and_then(|s| s.pod_cidrs.clone()).filter(|c| !c.is_empty()) {
        Some(cidrs) => cidrs,
        None => spec.and_then(|s| s.pod_cidr.clone()).into_iter().collect(),
    }
}

fn inside(cluster_cidr: Option<&IpNet>, cidr: &str) -> bool {
    match (cluster_cidr, cidr.parse::<IpNet>()) {
        (Some(cluster), Ok(net)) => cluster.contains(&net),
        (None, Ok(_)) => true,
        (_, Err(_)) => false,
    }
}

/// The routes the nodes need.
pub fn desired_routes(nodes: &[Node], cluster_cidr: Option<&IpNet>) -> BTreeSet<RouteKey> {
    nodes
        .iter()
        .flat_map(|node| pod_cidrs(node).into_iter().map(move |cidr| (name_of(node), cidr)))
        .filter(|(_, cidr)| inside(cluster_cidr, cidr))
        .collect()
}

/// Routes the cloud has that no node needs (only inside the cluster CIDR: others are not ours).
pub fn stale_routes<'a>(
    existing: &'a [Route],
    desired: &BTreeSet<RouteKey>,
    cluster_cidr: Option<&IpNet>,
) -> Vec<&'a Route> {
    existing
        .iter()
        .filter(|r| inside(cluster_cidr, &r.destination_cidr))
        .filter(|r| r.blackhole || !desired.contains(&(r.target_node.clone(), r.destination_cidr.clone())))
        .collect()
}

/// Upstream's route controller.
pub struct RouteController {
    client: Client,
    cloud: Arc<dyn CloudProvider>,
    metrics: Arc<Metrics>,
    health: Health,
    cluster_name: String,
    /// `--cluster-cidr`: routes are made and deleted only inside it.
    cluster_cidr: Option<IpNet>,
    /// `--route-reconciliation-period`.
    period: Duration,
}

impl RouteController {
    pub fn new(common: Common, cluster_name: String, cluster_cidr: Option<IpNet>, period: Duration) -> Self {
        let Common { client, cloud, metrics, health } = common;
        RouteController { client, cloud, metrics, health, cluster_name, cluster_cidr, period }
    }

    /// Reconciles each period until `shutdown`; a reconciliation under way is finished first.
    pub async fn run(self, shutdown: Shutdown) {
        let mut ticker = tokio::time::interval(self.period);
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                () = shutdown.requested() => break,
            }
            self.health.beat(ROUTE, self.period * 3);
            let _timer = self.metrics.reconcile(ROUTE);
            if let Err(error) = self.reconcile().await {
                self.metrics.failed(ROUTE);
                tracing::warn!(%error, "route reconciliation failed; retrying next period");
            }
        }
        tracing::info!("route controller stopped");
    }

    async fn reconcile(&self) -> Result<(), Error> {
        let Some(routes) = self.cloud.routes() else { return Ok(()) };
        let cluster = &self.cluster_name;
        let cluster_cidr = self.cluster_cidr.as_ref();
        let api: Api<Node> = Api::all(self.client.clone());
        let nodes = super::list_nodes(&api).await?;
        let existing = routes.list_routes(cluster).await.map_err(cloud("list_routes"))?;
        let desired = desired_routes(&nodes, cluster_cidr);

        for route in stale_routes(&existing, &desired, cluster_cidr) {
            routes.delete_route(cluster, route).await.map_err(cloud("delete_route"))?;
            tracing::info!(node = %route.target_node, cidr = %route.destination_cidr, "deleted stale route");
        }
        let present: BTreeSet<RouteKey> =
            existing.iter().map(|r| (r.target_node.clone(), r.destination_cidr.clone())).collect();
        let mut failed = BTreeSet::new();
        for node in &nodes {
            for cidr in pod_cidrs(node).into_iter().filter(|c| inside(cluster_cidr, c)) {
                let key = (name_of(node), cidr.clone());
                if present.contains(&key) {
                    continue;
                }
                if let Err(error) = create(routes, cluster, node, &cidr).await {
                    tracing::warn!(node = %key.0, %cidr, %error, "could not create route");
                    failed.insert(key.0.clone());
                }
            }
        }
        // Nodes with no pod CIDR of ours have nothing to route; upstream leaves their condition alone.
        for node in nodes.iter().filter(|n| pod_cidrs(n).iter().any(|c| inside(cluster_cidr, c))) {
            set_network_unavailable(&api, node, failed.contains(&name_of(node))).await?;
        }
        Ok(())
    }
}

async fn create(routes: &dyn Routes, cluster: &str, node: &Node, cidr: &str) -> Result<(), Error> {
    let route =
        Route { name: String::new(), target_node: name_of(node), destination_cidr: cidr.into(), blackhole: false };
    let hint = node.metadata.uid.clone().unwrap_or_default();
    routes.create_route(cluster, &hint, &route).await.map_err(cloud("create_route"))?;
    tracing::info!(node = %route.target_node, %cidr, "created route");
    Ok(())
}

async fn set_network_unavailable(api: &Api<Node>, node: &Node, unavailable: bool) -> Result<(), Error> {
    let (status, reason, message) = if unavailable {
        ("True", "NoRouteCreated", "RouteController failed to create a route")
    } else {
        ("False", "RouteCreated", "RouteController created a route")
    };
    let current = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "NetworkUnavailable"));
    if current.is_some_and(|c| c.status == status && c.reason.as_deref() == Some(reason)) {
        return Ok(());
    }
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    // Strategic merge: conditions merge by type, so the kubelet's (kwok's) conditions stay.
    let patch = json!({ "status": { "conditions": [{
        "type": "NetworkUnavailable", "status": status, "reason": reason, "message": message,
        "lastTransitionTime": now, "lastHeartbeatTime": now,
    }]}});
    api.patch_status(&name_of(node), &PatchParams::default(), &Patch::Strategic(&patch)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::fixtures::{FakeCloud, mock_client, played, within_5s};
    use http::Method;
    use serde_json::json;

    fn node(name: &str, cidrs: &[&str]) -> Node {
        serde_json::from_value(
            json!({"metadata": {"name": name}, "spec": {"podCIDRs": cidrs, "podCIDR": cidrs.first()}}),
        )
        .unwrap()
    }

    fn route(node: &str, cidr: &str) -> Route {
        Route { name: format!("r-{node}"), target_node: node.into(), destination_cidr: cidr.into(), blackhole: false }
    }

    #[test]
    fn every_pod_cidr_inside_the_cluster_cidr_needs_a_route() {
        let cluster: IpNet = "127.128.0.0/10".parse().unwrap();
        let nodes =
            [node("a", &["127.128.0.0/24", "fd00::/64"]), node("b", &["127.128.1.0/24"]), node("c", &["10.0.0.0/24"])];
        let desired = desired_routes(&nodes, Some(&cluster));
        let expected: BTreeSet<RouteKey> =
            [("a", "127.128.0.0/24"), ("b", "127.128.1.0/24")].map(|(n, c)| (n.to_string(), c.to_string())).into();
        assert_eq!(desired, expected);
    }

    #[test]
    fn stale_routes_are_those_no_node_needs_inside_the_cluster_cidr() {
        let cluster: IpNet = "127.128.0.0/10".parse().unwrap();
        let desired: BTreeSet<RouteKey> = [("a".to_string(), "127.128.0.0/24".to_string())].into();
        let existing = [
            route("a", "127.128.0.0/24"),
            route("gone", "127.128.9.0/24"),
            route("a", "127.128.5.0/24"),
            route("elsewhere", "192.0.2.0/24"),
            Route { blackhole: true, ..route("a", "127.128.0.0/24") },
        ];
        let stale: Vec<(&str, &str, bool)> = stale_routes(&existing, &desired, Some(&cluster))
            .iter()
            .map(|r| (r.target_node.as_str(), r.destination_cidr.as_str(), r.blackhole))
            .collect();
        assert_eq!(
            stale,
            [("gone", "127.128.9.0/24", false), ("a", "127.128.5.0/24", false), ("a", "127.128.0.0/24", true)]
        );
    }

    #[tokio::test]
    async fn a_node_without_its_route_gets_one_and_a_stale_route_goes() {
        let cloud = Arc::new(FakeCloud::default());
        cloud.routes.lock().unwrap().push(route("gone", "10.244.9.0/24"));
        let (client, server) = mock_client();
        let cluster_cidr = Some("10.244.0.0/16".parse().unwrap());
        let period = Duration::from_secs(10);
        let controller = RouteController::new(
            Common { client, cloud: cloud.clone(), metrics: Arc::default(), health: Health::default() },
            "kubernetes".into(),
            cluster_cidr,
            period,
        );
        let a = json!({"metadata": {"name": "a", "uid": "uid-a"}, "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]}});
        let verifier = server.verify(|mut server| async move {
            let list = server.expect(Method::GET, "/api/v1/nodes").await;
            list.respond(json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": [a.clone()]}));
            let patch = server.expect(Method::PATCH, "/api/v1/nodes/a/status").await;
            assert_eq!(patch.content_type, "application/strategic-merge-patch+json", "conditions merge by type");
            let conditions = patch.body["status"]["conditions"].as_array().unwrap().clone();
            assert_eq!(conditions.len(), 1, "{conditions:?}");
            let fields = ["type", "status", "reason", "message"].map(|field| conditions[0][field].clone());
            assert_eq!(
                fields,
                ["NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"].map(|v| json!(v))
            );
            patch.respond(a);
            server
        });

        let result = within_5s(controller.reconcile()).await;

        played(verifier).await.assert_no_more_requests().await;
        result.unwrap();
        let calls = ["list_routes", "delete_route gone 10.244.9.0/24", "create_route uid-a a 10.244.1.0/24"];
        assert_eq!(cloud.calls(), calls);
        let routes: Vec<(String, String)> =
            cloud.routes.lock().unwrap().iter().map(|r| (r.target_node.clone(), r.destination_cidr.clone())).collect();
        assert_eq!(routes, [("a".to_owned(), "10.244.1.0/24".to_owned())]);
    }
}

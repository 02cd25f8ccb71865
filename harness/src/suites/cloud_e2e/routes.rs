//! The route controller: a route per pod CIDR, reported through each node's `NetworkUnavailable`
//! condition (`False`, reason `RouteCreated`).

use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::core::v1::Node;

use super::{Test, TestResult, World, wait};
use config::Capability;

const ROUTE_TIMEOUT: Duration = Duration::from_secs(120);

pub fn tests() -> Vec<Test> {
    vec![Test::new(
        "[cloud-e2e] [Feature:Routes] Nodes with a pod CIDR should get NetworkUnavailable=False with reason RouteCreated",
        &[Capability::Routes],
        |w| routes_created(w).boxed(),
    )]
}

/// The node's `NetworkUnavailable` condition as `(status, reason)`.
pub fn network_unavailable(node: &Node) -> Option<(String, String)> {
    let conditions = node.status.as_ref()?.conditions.as_ref()?;
    let condition = conditions.iter().find(|c| c.type_ == "NetworkUnavailable")?;
    Some((condition.status.clone(), condition.reason.clone().unwrap_or_default()))
}

fn pod_cidrs(node: &Node) -> Vec<String> {
    node.spec.as_ref().and_then(|s| s.pod_cidrs.clone()).unwrap_or_default()
}

async fn routes_created(w: &World) -> TestResult {
    let what = "every node with spec.podCIDRs to have NetworkUnavailable=False/RouteCreated";
    wait::until(what, ROUTE_TIMEOUT, || async {
        let nodes = w.list_nodes().await?;
        let with_cidrs: Vec<&Node> = nodes.iter().filter(|n| !pod_cidrs(n).is_empty()).collect();
        if with_cidrs.is_empty() {
            return Err("no node has spec.podCIDRs (is --allocate-node-cidrs on?)".into());
        }
        let waiting: Vec<String> = with_cidrs
            .iter()
            .filter(|n| network_unavailable(n) != Some(("False".into(), "RouteCreated".into())))
            .map(|n| {
                let name = n.metadata.name.as_deref().unwrap_or_default();
                format!("{name} (podCIDRs {:?}): NetworkUnavailable {:?}", pod_cidrs(n), network_unavailable(n))
            })
            .collect();
        if waiting.is_empty() { Ok(()) } else { Err(waiting.join("; ")) }
    })
    .await
}

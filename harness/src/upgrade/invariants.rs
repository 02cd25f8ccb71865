//! What must hold across every stage of an upgrade: the cluster as the CCM shaped it, read before
//! and after ([`Snapshot`]), compared by [`changes`] (pure). No node deleted, registered again or
//! re-initialised (its uninitialized taint back); its providerID, addresses, zone, region and
//! instance type unchanged; each workload Service's ingress unchanged and its load balancer in the
//! cloud the same entry (the same cloud ids, listeners and members); the cloud's routes kept.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::ListParams;

use crate::suites::cloud_e2e::hooks::{self, HookKind, HookRunner};
use crate::suites::cloud_e2e::load_balancers;

/// The labels the CCM sets from the cloud, which an upgrade must keep.
const CLOUD_LABELS: [&str; 3] =
    ["topology.kubernetes.io/zone", "topology.kubernetes.io/region", "node.kubernetes.io/instance-type"];
/// The taint a node has until the CCM initialises it.
const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// A node as the CCM shaped it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    pub uid: String,
    pub provider_id: String,
    pub addresses: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub uninitialized: bool,
}

/// The cluster's cloud side at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub nodes: BTreeMap<String, NodeFacts>,
    /// Each workload Service's ingress points, by `namespace/name`.
    pub ingress: BTreeMap<String, Vec<String>>,
    /// Each workload Service's entries in the cloud's listing (`list_load_balancers`), when the
    /// provider has that hook.
    pub load_balancers: Option<BTreeMap<String, Vec<String>>>,
    /// The cloud's routes, when it keeps any.
    pub routes: Option<BTreeSet<String>>,
}

impl NodeFacts {
    pub fn of(node: &Node) -> NodeFacts {
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let status = node.status.clone().unwrap_or_default();
        let mut addresses: Vec<String> =
            status.addresses.unwrap_or_default().into_iter().map(|a| format!("{}={}", a.type_, a.address)).collect();
        addresses.sort();
        let spec = node.spec.clone().unwrap_or_default();
        NodeFacts {
            uid: node.metadata.uid.clone().unwrap_or_default(),
            provider_id: spec.provider_id.unwrap_or_default(),
            addresses,
            labels: labels.into_iter().filter(|(k, _)| CLOUD_LABELS.contains(&k.as_str())).collect(),
            uninitialized: spec.taints.unwrap_or_default().iter().any(|t| t.key == UNINITIALIZED),
        }
    }
}

/// Reads the snapshot: the nodes and `services` from the API, their load balancers through the
/// provider's listing hook, and `routes` (the cloud's, from the deployer).
pub async fn take(
    client: &kube::Client,
    services: &[(String, String)],
    hooks: &HookRunner,
    routes: Option<Vec<serde_json::Value>>,
) -> Result<Snapshot, String> {
    let nodes: Api<Node> = Api::all(client.clone());
    let nodes = nodes.list(&ListParams::default()).await.map_err(|e| format!("listing the nodes: {e}"))?;
    let nodes = nodes.items.iter().map(|n| (n.metadata.name.clone().unwrap_or_default(), NodeFacts::of(n))).collect();
    let mut found = Vec::new();
    for (namespace, name) in services {
        let api: Api<Service> = Api::namespaced(client.clone(), namespace);
        found.push(api.get(name).await.map_err(|e| format!("reading service {namespace}/{name}: {e}"))?);
    }
    let key = |s: &Service| {
        format!(
            "{}/{}",
            s.metadata.namespace.as_deref().unwrap_or_default(),
            s.metadata.name.as_deref().unwrap_or_default()
        )
    };
    let ingress = found.iter().map(|s| (key(s), load_balancers::ingress(s))).collect();
    let load_balancers = match hooks.has(HookKind::ListLoadBalancers) {
        false => None,
        true => {
            let listing = hooks.run(HookKind::ListLoadBalancers, None).await?;
            let entries = hooks::load_balancer_entries(&listing);
            let mine = |s: &Service| {
                let mut mine: Vec<String> =
                    entries.iter().filter(|e| load_balancers::belongs(e, s)).map(|e| canonical(e)).collect();
                mine.sort();
                mine
            };
            Some(found.iter().map(|s| (key(s), mine(s))).collect())
        }
    };
    let routes = routes.map(|routes| routes.iter().map(|r| r.to_string()).collect());
    Ok(Snapshot { nodes, ingress, load_balancers, routes })
}

/// A listing entry with its arrays' order dropped (a cloud may list members in any order).
fn canonical(entry: &str) -> String {
    fn sort(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Array(items) => {
                items.iter_mut().for_each(sort);
                items.sort_by_key(|item| item.to_string());
            }
            serde_json::Value::Object(map) => map.values_mut().for_each(sort),
            _ => {}
        }
    }
    match serde_json::from_str::<serde_json::Value>(entry) {
        Ok(mut value) => {
            sort(&mut value);
            value.to_string()
        }
        Err(_) => entry.to_owned(),
    }
}

/// Every way `after` differs from `before`, one line each; none when everything held.
pub fn changes(before: &Snapshot, after: &Snapshot) -> Vec<String> {
    let mut changes = Vec::new();
    for (name, was) in &before.nodes {
        let Some(now) = after.nodes.get(name) else {
            changes.push(format!("node {name} was deleted"));
            continue;
        };
        if now.uid != was.uid {
            changes.push(format!("node {name} was registered again (uid {} → {})", was.uid, now.uid));
        }
        if now.uninitialized && !was.uninitialized {
            changes.push(format!("node {name} was re-initialised: it has the taint {UNINITIALIZED} again"));
        }
        if now.provider_id != was.provider_id {
            changes.push(format!("node {name}'s providerID changed: {:?} → {:?}", was.provider_id, now.provider_id));
        }
        if now.addresses != was.addresses {
            changes.push(format!("node {name}'s addresses changed: {:?} → {:?}", was.addresses, now.addresses));
        }
        for label in CLOUD_LABELS {
            let (was, now) = (was.labels.get(label), now.labels.get(label));
            if was != now {
                changes.push(format!("node {name}'s label {label} changed: {was:?} → {now:?}"));
            }
        }
    }
    for name in after.nodes.keys().filter(|name| !before.nodes.contains_key(*name)) {
        changes.push(format!("node {name} appeared (registered during the stage)"));
    }
    for (service, was) in &before.ingress {
        let now = after.ingress.get(service);
        if now != Some(was) {
            changes
                .push(format!("service {service}'s ingress changed: {was:?} → {:?}", now.cloned().unwrap_or_default()));
        }
    }
    if let (Some(before), Some(after)) = (&before.load_balancers, &after.load_balancers) {
        for (service, was) in before {
            let now = after.get(service).cloned().unwrap_or_default();
            if &now != was {
                changes.push(format!(
                    "service {service}'s load balancer in the cloud changed (recreated, or its listeners or members changed): {} → {}",
                    listing(was),
                    listing(&now)
                ));
            }
        }
    }
    if let (Some(before), Some(after)) = (&before.routes, &after.routes) {
        for gone in before.difference(after) {
            changes.push(format!("the cloud's route {gone} is gone"));
        }
        for new in after.difference(before) {
            changes.push(format!("the cloud has a new route {new}"));
        }
    }
    changes
}

fn listing(entries: &[String]) -> String {
    match entries {
        [] => "no entry".into(),
        entries => entries.join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(uid: &str, provider_id: &str) -> NodeFacts {
        NodeFacts {
            uid: uid.into(),
            provider_id: provider_id.into(),
            addresses: vec!["InternalIP=10.0.0.1".into()],
            labels: [("topology.kubernetes.io/zone".to_owned(), "zone-a".to_owned())].into(),
            uninitialized: false,
        }
    }

    fn snapshot() -> Snapshot {
        Snapshot {
            nodes: [("n1".to_owned(), node("u1", "local://i-1")), ("n2".to_owned(), node("u2", "local://i-2"))].into(),
            ingress: [("w/tcp".to_owned(), vec!["192.0.2.10".to_owned()])].into(),
            load_balancers: Some(
                [("w/tcp".to_owned(), vec![canonical(r#"{"name":"a1","backends":["n1","n2"]}"#)])].into(),
            ),
            routes: Some(["r1".to_owned(), "r2".to_owned()].into()),
        }
    }

    #[test]
    fn an_unchanged_cluster_has_no_changes_and_member_order_does_not_count() {
        let before = snapshot();
        let mut after = snapshot();
        after.load_balancers =
            Some([("w/tcp".to_owned(), vec![canonical(r#"{"backends":["n2","n1"],"name":"a1"}"#)])].into());
        assert_eq!(changes(&before, &after), Vec::<String>::new());
    }

    #[test]
    fn each_kind_of_change_is_named() {
        let before = snapshot();
        let mut after = snapshot();
        after.nodes.remove("n2");
        let n1 = after.nodes.get_mut("n1").unwrap();
        n1.uid = "u9".into();
        n1.uninitialized = true;
        n1.provider_id = "local://i-9".into();
        n1.labels.clear();
        after.nodes.insert("n3".into(), node("u3", "local://i-3"));
        after.ingress.insert("w/tcp".into(), vec!["192.0.2.11".into()]);
        after.load_balancers =
            Some([("w/tcp".to_owned(), vec![canonical(r#"{"name":"a2","backends":["n1"]}"#)])].into());
        after.routes = Some(["r1".to_owned()].into());
        let found = changes(&before, &after);
        let expected = [
            "node n1 was registered again (uid u1 → u9)",
            "node n1 was re-initialised",
            "node n1's providerID changed",
            "node n1's label topology.kubernetes.io/zone changed",
            "node n2 was deleted",
            "node n3 appeared",
            "service w/tcp's ingress changed",
            "service w/tcp's load balancer in the cloud changed",
            "the cloud's route r2 is gone",
        ];
        assert_eq!(found.len(), expected.len(), "{found:#?}");
        for (line, start) in found.iter().zip(expected) {
            assert!(line.starts_with(start), "{line:?} should start with {start:?}");
        }
    }

    #[test]
    fn a_load_balancer_gone_from_the_listing_says_so() {
        let before = snapshot();
        let mut after = snapshot();
        after.load_balancers = Some([("w/tcp".to_owned(), vec![])].into());
        let found = changes(&before, &after);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].ends_with("→ no entry"), "{found:?}");
    }

    #[test]
    fn a_cloud_without_listing_or_routes_is_not_compared_on_them() {
        let mut before = snapshot();
        before.load_balancers = None;
        before.routes = None;
        let mut after = before.clone();
        after.routes = Some(BTreeSet::new());
        assert_eq!(changes(&before, &after), Vec::<String>::new());
    }
}

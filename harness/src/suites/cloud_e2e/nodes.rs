//! Node initialisation by the CCM's cloud-node controller: providerID, the uninitialized taint,
//! instance-type, zone and region labels, addresses (the provided node IP first), dual-stack.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::core::v1::Node;

use super::{Test, TestResult, World, wait};
use config::Capability;

/// Nodes may still be initialising when the suite starts.
const INIT_TIMEOUT: Duration = Duration::from_secs(120);

const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";
const PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";
const INSTANCE_TYPE: [&str; 2] = ["node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type"];
const ZONE: [&str; 2] = ["topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone"];
const REGION: [&str; 2] = ["topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region"];

pub fn tests() -> Vec<Test> {
    vec![
        Test::new(
            "[cloud-e2e] [Feature:Instances] Nodes should get a providerID from the CCM",
            &[Capability::Instances],
            |w| provider_ids(w).boxed(),
        ),
        Test::new(
            "[cloud-e2e] [Feature:Instances] Nodes should lose the uninitialized taint once the CCM initialised them",
            &[Capability::Instances],
            |w| uninitialized_taint_removed(w).boxed(),
        ),
        Test::new(
            "[cloud-e2e] [Feature:Instances] Nodes should carry the instance-type labels from the cloud",
            &[Capability::Instances],
            |w| instance_type_labels(w).boxed(),
        ),
        Test::new(
            "[cloud-e2e] [Feature:Instances] Nodes should report the cloud's addresses, the provided node IP first",
            &[Capability::Instances],
            |w| addresses(w).boxed(),
        ),
        Test::new(
            "[cloud-e2e] [Feature:Zones] Nodes should carry the zone and region labels from the cloud",
            &[Capability::Instances, Capability::Zones],
            |w| zone_labels(w).boxed(),
        ),
        Test::new(
            "[cloud-e2e] [Feature:DualStack] Nodes should report InternalIP addresses of both IP families",
            &[Capability::Instances, Capability::DualStack],
            |w| dual_stack_addresses(w).boxed(),
        ),
    ]
}

fn name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

fn provider_id(node: &Node) -> &str {
    node.spec.as_ref().and_then(|s| s.provider_id.as_deref()).unwrap_or_default()
}

fn is_initialised(node: &Node) -> bool {
    !node.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED_TAINT))
}

/// Upstream's provider ID shape: `<provider>://<instance>`.
pub fn valid_provider_id(id: &str) -> bool {
    id.split_once("://").is_some_and(|(scheme, rest)| {
        !scheme.is_empty()
            && scheme.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.+".contains(&b))
            && !rest.is_empty()
    })
}

/// Waits until `check` holds for every node; the failure lists each node it does not hold for.
async fn every_node(w: &World, what: &str, check: impl Fn(&Node) -> Result<(), String>) -> TestResult {
    wait::until(what, INIT_TIMEOUT, || async {
        let nodes = w.list_nodes().await?;
        if nodes.is_empty() {
            return Err("no nodes".into());
        }
        let problems: Vec<String> =
            nodes.iter().filter_map(|n| check(n).err().map(|why| format!("{}: {why}", name(n)))).collect();
        if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
    })
    .await
}

async fn provider_ids(w: &World) -> TestResult {
    every_node(w, "every node to have spec.providerID <provider>://<instance>", |node| {
        let id = provider_id(node);
        if valid_provider_id(id) { Ok(()) } else { Err(format!("providerID {id:?}")) }
    })
    .await
}

async fn uninitialized_taint_removed(w: &World) -> TestResult {
    every_node(w, &format!("the CCM to remove the {UNINITIALIZED_TAINT} taint from every node"), |node| {
        if is_initialised(node) { Ok(()) } else { Err(format!("still tainted {UNINITIALIZED_TAINT}")) }
    })
    .await
}

/// Upstream sets each label and its beta twin to the same value.
fn twin_labels(node: &Node, keys: [&str; 2]) -> Result<(), String> {
    match (label(node, keys[0]), label(node, keys[1])) {
        (Some(value), Some(twin)) if !value.is_empty() && value == twin => Ok(()),
        (value, twin) => {
            Err(format!("{}={value:?}, {}={twin:?} (expected the same non-empty value)", keys[0], keys[1]))
        }
    }
}

async fn instance_type_labels(w: &World) -> TestResult {
    every_node(w, "every initialised node to carry the instance-type labels", |node| {
        if !is_initialised(node) {
            return Err("not initialised yet".into());
        }
        twin_labels(node, INSTANCE_TYPE)
    })
    .await
}

async fn zone_labels(w: &World) -> TestResult {
    every_node(w, "every initialised node to carry the zone and region labels", |node| {
        if !is_initialised(node) {
            return Err("not initialised yet".into());
        }
        twin_labels(node, ZONE).and(twin_labels(node, REGION))
    })
    .await
}

fn addresses_of(node: &Node) -> Vec<(String, String)> {
    let addresses = node.status.as_ref().and_then(|s| s.addresses.clone()).unwrap_or_default();
    addresses.into_iter().map(|a| (a.type_, a.address)).collect()
}

/// The cloud's addresses: at least one IP, no duplicates, the provided node IP (when annotated) first.
pub fn check_addresses(node: &Node) -> Result<(), String> {
    let addresses = addresses_of(node);
    if !addresses.iter().any(|(kind, _)| kind == "InternalIP" || kind == "ExternalIP") {
        return Err(format!("no InternalIP or ExternalIP among {addresses:?}"));
    }
    let unique: BTreeSet<&(String, String)> = addresses.iter().collect();
    if unique.len() != addresses.len() {
        return Err(format!("duplicate addresses in {addresses:?}"));
    }
    let Some(provided) = node.metadata.annotations.as_ref().and_then(|a| a.get(PROVIDED_NODE_IP)) else {
        return Ok(());
    };
    // One IP, or a dual-stack pair `IPv4,IPv6`: each comes first, in that order.
    let provided: Vec<Option<IpAddr>> = provided.split(',').map(|ip| ip.trim().parse().ok()).collect();
    let first: Vec<Option<IpAddr>> = addresses.iter().take(provided.len()).map(|(_, a)| a.parse().ok()).collect();
    if provided.contains(&None) || first != provided {
        return Err(format!(
            "{PROVIDED_NODE_IP} is {:?} but the addresses start {:?} (all: {addresses:?})",
            node.metadata.annotations.as_ref().and_then(|a| a.get(PROVIDED_NODE_IP)).cloned().unwrap_or_default(),
            addresses.iter().take(provided.len()).map(|(_, a)| a.as_str()).collect::<Vec<_>>()
        ));
    }
    Ok(())
}

async fn addresses(w: &World) -> TestResult {
    every_node(w, "every initialised node to list the cloud's addresses, the provided node IP first", |node| {
        if !is_initialised(node) {
            return Err("not initialised yet".into());
        }
        check_addresses(node)
    })
    .await
}

async fn dual_stack_addresses(w: &World) -> TestResult {
    every_node(w, "every initialised node to have an IPv4 and an IPv6 InternalIP", |node| {
        let internal: Vec<std::net::IpAddr> = addresses_of(node)
            .into_iter()
            .filter(|(kind, _)| kind == "InternalIP")
            .filter_map(|(_, address)| address.parse().ok())
            .collect();
        let (v4, v6) = (internal.iter().any(|ip| ip.is_ipv4()), internal.iter().any(|ip| ip.is_ipv6()));
        if v4 && v6 { Ok(()) } else { Err(format!("InternalIPs {internal:?}")) }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(annotations: serde_json::Value, addresses: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n", "annotations": annotations},
            "status": {"addresses": addresses},
        }))
        .unwrap()
    }

    #[test]
    fn provider_ids_have_a_scheme_and_an_instance() {
        assert!(valid_provider_id("local://i-0000abcd"));
        assert!(valid_provider_id("aws:///us-east-1a/i-0123"));
        assert!(valid_provider_id("gce://project/zone/name"));
        assert!(!valid_provider_id(""));
        assert!(!valid_provider_id("i-0000abcd"));
        assert!(!valid_provider_id("local://"));
        assert!(!valid_provider_id("://x"));
    }

    #[test]
    fn the_provided_node_ip_must_come_first_and_addresses_be_unique() {
        let ok = node(
            json!({PROVIDED_NODE_IP: "127.1.0.1"}),
            json!([{"type": "InternalIP", "address": "127.1.0.1"}, {"type": "Hostname", "address": "n"}]),
        );
        assert_eq!(check_addresses(&ok), Ok(()));
        let second = node(
            json!({PROVIDED_NODE_IP: "127.1.0.2"}),
            json!([{"type": "InternalIP", "address": "127.1.0.1"}, {"type": "InternalIP", "address": "127.1.0.2"}]),
        );
        let err = check_addresses(&second).unwrap_err();
        assert!(
            err.starts_with(
                r#"alpha.kubernetes.io/provided-node-ip is "127.1.0.2" but the addresses start ["127.1.0.1"]"#
            ),
            "{err}"
        );
        let pair = node(
            json!({PROVIDED_NODE_IP: "127.1.0.1,fd00::1"}),
            json!([{"type": "InternalIP", "address": "127.1.0.1"}, {"type": "InternalIP", "address": "fd00::1"}]),
        );
        assert_eq!(check_addresses(&pair), Ok(()));
        let swapped = node(
            json!({PROVIDED_NODE_IP: "127.1.0.1,fd00::1"}),
            json!([{"type": "InternalIP", "address": "fd00::1"}, {"type": "InternalIP", "address": "127.1.0.1"}]),
        );
        assert!(check_addresses(&swapped).is_err());
        let dup = node(
            json!({}),
            json!([{"type": "InternalIP", "address": "1.2.3.4"}, {"type": "InternalIP", "address": "1.2.3.4"}]),
        );
        assert!(check_addresses(&dup).unwrap_err().starts_with("duplicate addresses"));
        let hostname_only = node(json!({}), json!([{"type": "Hostname", "address": "n"}]));
        assert!(check_addresses(&hostname_only).unwrap_err().starts_with("no InternalIP or ExternalIP"));
    }
}

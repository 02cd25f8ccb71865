//! The decisions of upstream's cloud-node controller, as pure functions over nodes and the cloud's
//! instance metadata; the controller around them does the reading and writing.
//!
//! Initialising a node (one carrying [`UNINITIALIZED_TAINT_KEY`]) is one update built by
//! [`initialized_node`]: `spec.providerID` if empty, the cloud's labels, and the taint removed.
//! Its `status.addresses` are written after that, from [`desired_node_addresses`].

mod addresses;
mod labels;
mod taints;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSpec};

use crate::cloud::InstanceMetadata;

pub use addresses::{
    PROVIDED_NODE_IP_ANNOTATION, ProvidedNodeIpError, addresses_changed, addresses_for_provided_node_ip,
    apply_provided_node_ip, desired_node_addresses, parse_provided_node_ip,
};
pub use labels::{
    LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA, LABEL_REGION, LABEL_REGION_BETA, LABEL_ZONE, LABEL_ZONE_BETA,
    ga_labels_to_reconcile, is_kubernetes_namespaced, labels_from_instance_metadata,
};
pub use taints::{UNINITIALIZED_TAINT_KEY, needs_cloud_initialization, taints_without_uninitialized};

/// Why a node cannot be initialised yet; the taint stays and the controller retries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeInitError {
    #[error("cloud provider does not set node provider ID for node {node}")]
    MissingProviderId { node: String },
    #[error("provided node ip for node {node:?} is not valid: {source}")]
    InvalidProvidedNodeIp { node: String, source: ProvidedNodeIpError },
}

/// The provider ID to write to `spec.providerID`: the cloud's, and only if the node has none.
///
/// `Ok(None)` when the node already has one (the field is immutable once set); an error when
/// neither the node nor the cloud has one, since other controllers need it.
pub fn provider_id_to_set(node: &Node, metadata: &InstanceMetadata) -> Result<Option<String>, NodeInitError> {
    match (node_provider_id(node), metadata.provider_id.as_str()) {
        ("", "") => Err(NodeInitError::MissingProviderId { node: node_name(node) }),
        ("", from_cloud) => Ok(Some(from_cloud.to_owned())),
        _ => Ok(None),
    }
}

/// The node as the initialising update should write it: provider ID, labels, taint removed.
///
/// Fails, changing nothing, when the provider ID is missing everywhere or the node's provided IP
/// is not among the cloud's addresses (upstream checks both before removing the taint). Pure, so
/// the controller can re-run it on a fresh copy after a conflict.
pub fn initialized_node(node: &Node, metadata: &InstanceMetadata) -> Result<Node, NodeInitError> {
    let provider_id = provider_id_to_set(node, metadata)?;
    apply_provided_node_ip(node, &metadata.node_addresses)
        .map_err(|source| NodeInitError::InvalidProvidedNodeIp { node: node_name(node), source })?;

    let mut updated = node.clone();
    let current_labels = node.metadata.labels.clone().unwrap_or_default();
    let labels = labels_from_instance_metadata(metadata, &current_labels);
    updated.metadata.labels.get_or_insert_with(BTreeMap::new).extend(labels);
    let spec = updated.spec.get_or_insert_with(NodeSpec::default);
    if let Some(provider_id) = provider_id {
        spec.provider_id = Some(provider_id);
    }
    spec.taints = Some(taints_without_uninitialized(node));
    Ok(updated)
}

fn node_provider_id(node: &Node) -> &str {
    node.spec.as_ref().and_then(|spec| spec.provider_id.as_deref()).unwrap_or_default()
}

fn node_name(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeAddress, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn uninitialized_node(provider_id: Option<&str>) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("node-1".into()),
                labels: Some([("team".to_owned(), "a".to_owned())].into()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: provider_id.map(str::to_owned),
                taints: Some(vec![
                    Taint {
                        key: UNINITIALIZED_TAINT_KEY.into(),
                        value: Some("true".into()),
                        effect: "NoSchedule".into(),
                        ..Taint::default()
                    },
                    Taint { key: "dedicated".into(), effect: "NoSchedule".into(), ..Taint::default() },
                ]),
                ..NodeSpec::default()
            }),
            ..Node::default()
        }
    }

    fn metadata(provider_id: &str) -> InstanceMetadata {
        InstanceMetadata {
            provider_id: provider_id.into(),
            instance_type: "small".into(),
            zone: "zone-a".into(),
            region: "region-1".into(),
            node_addresses: vec![NodeAddress { type_: "InternalIP".into(), address: "10.0.0.1".into() }],
            additional_labels: BTreeMap::new(),
        }
    }

    fn provider_id_of(node: &Node) -> Option<&str> {
        node.spec.as_ref()?.provider_id.as_deref()
    }

    #[test]
    fn provider_id_comes_from_the_cloud_when_the_node_has_none() {
        let set = provider_id_to_set(&uninitialized_node(None), &metadata("local://i-1"));

        assert_eq!(set, Ok(Some("local://i-1".to_owned())));
    }

    #[test]
    fn an_empty_provider_id_on_the_node_counts_as_none() {
        let set = provider_id_to_set(&uninitialized_node(Some("")), &metadata("local://i-1"));

        assert_eq!(set, Ok(Some("local://i-1".to_owned())));
    }

    #[test]
    fn the_nodes_own_provider_id_is_never_replaced() {
        let node = uninitialized_node(Some("kubelet://x"));

        assert_eq!(provider_id_to_set(&node, &metadata("local://i-1")), Ok(None));
        assert_eq!(provider_id_to_set(&node, &metadata("")), Ok(None));
    }

    #[test]
    fn a_provider_id_missing_everywhere_is_an_error_naming_the_node() {
        let error = provider_id_to_set(&uninitialized_node(None), &metadata("")).unwrap_err();

        assert_eq!(error.to_string(), "cloud provider does not set node provider ID for node node-1");
    }

    #[test]
    fn initializing_sets_provider_id_and_labels_and_removes_only_the_taint() {
        let node = initialized_node(&uninitialized_node(None), &metadata("local://i-1")).unwrap();

        assert_eq!(provider_id_of(&node), Some("local://i-1"));
        let labels = node.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["team"], "a");
        assert_eq!(labels[LABEL_ZONE], "zone-a");
        assert_eq!(labels[LABEL_INSTANCE_TYPE_BETA], "small");
        assert!(!needs_cloud_initialization(&node));
        assert_eq!(node.spec.unwrap().taints.unwrap()[0].key, "dedicated");
    }

    #[test]
    fn initializing_a_node_without_labels_creates_them() {
        let mut bare = uninitialized_node(None);
        bare.metadata.labels = None;

        let node = initialized_node(&bare, &metadata("local://i-1")).unwrap();

        assert_eq!(node.metadata.labels.unwrap()[LABEL_REGION], "region-1");
    }

    #[test]
    fn initializing_fails_without_a_provider_id() {
        let result = initialized_node(&uninitialized_node(None), &metadata(""));

        assert!(matches!(result, Err(NodeInitError::MissingProviderId { .. })));
    }

    #[test]
    fn initializing_fails_when_the_provided_ip_is_unknown_to_the_cloud() {
        let mut node = uninitialized_node(Some("local://i-1"));
        node.metadata.annotations = Some([(PROVIDED_NODE_IP_ANNOTATION.to_owned(), "10.9.9.9".to_owned())].into());

        let error = initialized_node(&node, &metadata("")).unwrap_err();

        assert!(matches!(error, NodeInitError::InvalidProvidedNodeIp { .. }));
        assert!(error.to_string().contains("matches ip: 10.9.9.9"), "{error}");
    }
}

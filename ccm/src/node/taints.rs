//! The taint that marks a node the cloud has not initialised yet.

use k8s_openapi::api::core::v1::{Node, Taint};

/// Set by a kubelet started with `--cloud-provider=external` until the cloud-node controller has
/// initialised the node (upstream `cloudproviderapi.TaintExternalCloudProvider`).
pub const UNINITIALIZED_TAINT_KEY: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// Whether the node still waits for the cloud-node controller: it carries the uninitialised taint.
pub fn needs_cloud_initialization(node: &Node) -> bool {
    node_taints(node).iter().any(|taint| taint.key == UNINITIALIZED_TAINT_KEY)
}

/// The node's taints with the uninitialised taint removed, in their original order.
pub fn taints_without_uninitialized(node: &Node) -> Vec<Taint> {
    node_taints(node).iter().filter(|taint| taint.key != UNINITIALIZED_TAINT_KEY).cloned().collect()
}

fn node_taints(node: &Node) -> &[Taint] {
    node.spec.as_ref().and_then(|spec| spec.taints.as_deref()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeSpec;

    fn taint(key: &str, effect: &str) -> Taint {
        Taint { key: key.into(), effect: effect.into(), ..Taint::default() }
    }

    fn node_with_taints(taints: Vec<Taint>) -> Node {
        Node { spec: Some(NodeSpec { taints: Some(taints), ..NodeSpec::default() }), ..Node::default() }
    }

    #[test]
    fn node_with_the_uninitialized_taint_needs_initialization() {
        let node =
            node_with_taints(vec![taint("dedicated", "NoSchedule"), taint(UNINITIALIZED_TAINT_KEY, "NoSchedule")]);

        assert!(needs_cloud_initialization(&node));
    }

    #[test]
    fn node_without_the_taint_or_without_a_spec_needs_nothing() {
        let other_taints = node_with_taints(vec![taint("dedicated", "NoSchedule")]);

        assert!(!needs_cloud_initialization(&other_taints));
        assert!(!needs_cloud_initialization(&Node::default()));
    }

    #[test]
    fn removing_the_taint_keeps_the_others_in_order() {
        let node = node_with_taints(vec![
            taint("first", "NoSchedule"),
            taint(UNINITIALIZED_TAINT_KEY, "NoSchedule"),
            taint("second", "NoExecute"),
        ]);

        let keys: Vec<_> = taints_without_uninitialized(&node).into_iter().map(|taint| taint.key).collect();

        assert_eq!(keys, ["first", "second"]);
    }

    #[test]
    fn removing_the_taint_from_a_node_without_taints_gives_none() {
        assert!(taints_without_uninitialized(&Node::default()).is_empty());
    }
}

//! Simulated nodes, registered the way a kubelet started with `--cloud-provider=external` registers
//! itself: tainted `node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule`, no
//! `spec.providerID` (the CCM sets it), its node IP in `alpha.kubernetes.io/provided-node-ip`.
//! kwok (annotation `kwok.x-k8s.io/node: fake`) then keeps each node Ready and runs its pods.
//!
//! Every IPv4 address is on the loopback network: node IPs in 127.1.0.0/16, pod CIDRs in
//! 127.128.0.0/10, so nothing the cluster advertises can send traffic off this machine. Nodes are
//! dual-stack (`--node-ip=<IPv4>,<IPv6>`): each also has an IPv6 address in the unique-local
//! [`NODE_IPV6_PREFIX`], which no route leads off this machine either.

use std::net::{Ipv4Addr, Ipv6Addr};

use k8s_openapi::api::core::v1::Node;
use serde_json::json;

/// The range every node's pod CIDR is carved from (`--cluster-cidr` for a CCM's route controller).
pub const CLUSTER_CIDR: &str = "127.128.0.0/10";
/// The most nodes [`CLUSTER_CIDR`] has a /24 for.
pub const MAX_NODES: u32 = config::nodes::MAX_KWOK_NODES;

pub const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";
pub const PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";
/// Annotate a node with this set to `stopped` and kwok reports it NotReady, as a node whose kubelet
/// stopped; remove it and the node is Ready again.
pub const KUBELET_STOPPED: &str = "harness.cloud-provider.dev/kubelet";

/// The /64 the nodes' IPv6 addresses are in (unique-local, RFC 4193).
pub const NODE_IPV6_PREFIX: &str = "fd00:127:1::/64";

/// The name of node `index` of `cluster`, as kind names its workers.
pub fn node_name(cluster: &str, index: u32) -> String {
    format!("{cluster}-worker-{index}")
}

/// Node `index`'s IP: 127.1.0.1, 127.1.0.2, ...
/// The machine kwok node `index` of `cluster` has in its cloud: its name and loopback addresses.
pub fn machine(cluster: &str, index: u32) -> crate::clouds::Machine {
    crate::clouds::Machine { index, name: node_name(cluster, index), ipv4: node_ip(index), ipv6: node_ipv6(index) }
}

pub fn node_ip(index: u32) -> Ipv4Addr {
    let n = index + 1;
    Ipv4Addr::new(127, 1, (n >> 8) as u8, (n & 0xff) as u8)
}

/// Node `index`'s IPv6 address: fd00:127:1::1, fd00:127:1::2, ...
pub fn node_ipv6(index: u32) -> Ipv6Addr {
    let n = index + 1;
    Ipv6Addr::new(0xfd00, 0x127, 0x1, 0, 0, 0, (n >> 16) as u16, (n & 0xffff) as u16)
}

/// Node `index`'s pod CIDR: a /24 of [`CLUSTER_CIDR`].
pub fn pod_cidr(index: u32) -> String {
    assert!(index < MAX_NODES, "node index {index} outside {CLUSTER_CIDR}");
    format!("127.{}.{}.0/24", 128 + (index >> 8), index & 0xff)
}

/// The Node object a kubelet with `--cloud-provider=external --node-ip=<ipv4>,<ipv6>` would register.
pub fn manifest(cluster: &str, index: u32, kubelet_version: &str) -> Node {
    let ips = [node_ip(index).to_string(), node_ipv6(index).to_string()];
    manifest_with(&node_name(cluster, index), &ips, index, kubelet_version)
}

/// The Node object a kubelet with `--cloud-provider=external --node-ip=<ips>` would register as
/// `name`, with node `index`'s pod CIDR; the first of `ips` is its IPv4 address.
pub fn manifest_with(name: &str, ips: &[String], index: u32, kubelet_version: &str) -> Node {
    let ip = ips.first().cloned().unwrap_or_default();
    let cidr = pod_cidr(index);
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
            "annotations": {
                "kwok.x-k8s.io/node": "fake",
                "node.alpha.kubernetes.io/ttl": "0",
                PROVIDED_NODE_IP: ips.join(","),
            },
        },
        "spec": {
            "podCIDR": cidr,
            "podCIDRs": [cidr],
            "taints": [{"key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule"}],
        },
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": name},
            ],
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "1Ti"},
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "1Ti"},
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": kubelet_version,
                "kubeProxyVersion": kubelet_version,
                "containerRuntimeVersion": "kwok",
                "kernelVersion": "kwok",
                "osImage": "kwok",
                "bootID": "", "machineID": "", "systemUUID": "",
            },
        },
    }))
    .expect("a valid Node")
}

/// Whether a node still carries the uninitialized taint a CCM removes.
pub fn is_uninitialized(node: &Node) -> bool {
    node.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED_TAINT))
}

/// Whether a node's Ready condition is True.
pub fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_node_looks_like_an_external_cloud_provider_kubelet_registered_it() {
        let node = manifest("c", 2, "v1.37.1");
        let spec = node.spec.as_ref().unwrap();
        assert_eq!(spec.provider_id, None);
        let taint = &spec.taints.as_ref().unwrap()[0];
        assert_eq!(
            (taint.key.as_str(), taint.value.as_deref(), taint.effect.as_str()),
            (UNINITIALIZED_TAINT, Some("true"), "NoSchedule")
        );
        assert_eq!(spec.pod_cidrs.as_deref(), Some(&["127.128.2.0/24".to_string()][..]));
        assert_eq!(node.metadata.annotations.as_ref().unwrap()[PROVIDED_NODE_IP], "127.1.0.3,fd00:127:1::3");
        assert!(!is_ready(&node), "kwok, not the registration, makes a node Ready");
    }

    #[test]
    fn addresses_stay_on_loopback_and_never_collide() {
        let mut seen = std::collections::HashSet::new();
        for index in [0, 1, 254, 255, 256, 1000, MAX_NODES - 1] {
            assert!(node_ip(index).is_loopback());
            assert!(pod_cidr(index).starts_with("127."));
            assert!(seen.insert((node_ip(index), pod_cidr(index))), "{index}");
        }
        assert_eq!(pod_cidr(MAX_NODES - 1), "127.191.255.0/24");
    }
}

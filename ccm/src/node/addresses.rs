//! The node's `status.addresses`, from the cloud's addresses and the kubelet's provided node IP.
//!
//! Mirrors upstream's cloud-node controller (`updateNodeAddress`, `updateNodeAddressesFromNodeIP`)
//! and the helpers it calls (`GetNodeAddressesFromNodeIP`, `ParseNodeIPAnnotation`):
//! - The cloud reporting no addresses means "leave the node's addresses alone".
//! - If the cloud reports no `Hostname` address, the node's own `Hostname` addresses are kept.
//! - The `alpha.kubernetes.io/provided-node-ip` annotation holds one IP or a dual-stack pair
//!   `IPv4,IPv6` (no spaces). Each IP must be among the cloud's addresses, else an error. The
//!   cloud's addresses equal to a provided IP come first; then every other address whose type is
//!   none of the matched addresses' types. So a provided InternalIP drops the cloud's other
//!   InternalIPs but keeps its ExternalIPs and Hostname.
//! - IPs compare as Go's `net.IP.Equal` does: `::ffff:10.0.0.1` equals `10.0.0.1`, and IPv4 octets
//!   may carry leading zeros (`ParseIPSloppy`). Addresses that are not IPs (hostnames) never match.
//!
//! One deliberate difference: [`addresses_changed`] compares the ordered lists exactly, where
//! upstream's `nodeAddressesChangeDetected` compares one address per type and can miss a change
//! among several addresses of one type.

use std::net::{IpAddr, Ipv4Addr};

use k8s_openapi::api::core::v1::{Node, NodeAddress};

/// Set by a kubelet started with `--cloud-provider=external --node-ip=...`
/// (upstream `cloudproviderapi.AnnotationAlphaProvidedIPAddr`).
pub const PROVIDED_NODE_IP_ANNOTATION: &str = "alpha.kubernetes.io/provided-node-ip";

const HOSTNAME_ADDRESS_TYPE: &str = "Hostname";

/// Why the provided node IP cannot be applied to the cloud's addresses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProvidedNodeIpError {
    #[error("failed to parse node IP {value:?}: {reason}")]
    Unparsable { value: String, reason: String },
    #[error("failed to get node address from cloud provider that matches ip: {ip}")]
    NotAmongCloudAddresses { ip: IpAddr },
}

/// The addresses the node should have, or `None` if the cloud reported none (leave them alone).
pub fn desired_node_addresses(
    node: &Node,
    cloud_addresses: &[NodeAddress],
) -> Result<Option<Vec<NodeAddress>>, ProvidedNodeIpError> {
    if cloud_addresses.is_empty() {
        return Ok(None);
    }
    let with_hostname = with_node_hostname_if_cloud_has_none(node, cloud_addresses);
    apply_provided_node_ip(node, &with_hostname).map(Some)
}

/// The cloud's addresses reordered and filtered by the node's provided IP, if it has one.
pub fn apply_provided_node_ip(
    node: &Node,
    cloud_addresses: &[NodeAddress],
) -> Result<Vec<NodeAddress>, ProvidedNodeIpError> {
    match provided_node_ip(node) {
        Some(annotation) => addresses_for_provided_node_ip(annotation, cloud_addresses),
        None => Ok(cloud_addresses.to_vec()),
    }
}

/// Whether writing `desired` would change the node's current addresses.
pub fn addresses_changed(node: &Node, desired: &[NodeAddress]) -> bool {
    current_addresses(node) != desired
}

/// Upstream's `GetNodeAddressesFromNodeIP`: matches first, then the types no provided IP matched.
pub fn addresses_for_provided_node_ip(
    annotation: &str,
    cloud_addresses: &[NodeAddress],
) -> Result<Vec<NodeAddress>, ProvidedNodeIpError> {
    let mut enforced = Vec::new();
    for ip in parse_provided_node_ip(annotation)? {
        let matches: Vec<_> =
            cloud_addresses.iter().filter(|address| parse_ip_sloppy(&address.address) == Some(ip)).cloned().collect();
        if matches.is_empty() {
            return Err(ProvidedNodeIpError::NotAmongCloudAddresses { ip });
        }
        enforced.extend(matches);
    }
    let enforced_types: Vec<String> = enforced.iter().map(|a| a.type_.clone()).collect();
    enforced.extend(cloud_addresses.iter().filter(|address| !enforced_types.contains(&address.type_)).cloned());
    Ok(enforced)
}

/// Upstream's `ParseNodeIPAnnotation`: one IP, or an IPv4/IPv6 pair separated by a comma.
pub fn parse_provided_node_ip(annotation: &str) -> Result<Vec<IpAddr>, ProvidedNodeIpError> {
    let unparsable = |reason: String| ProvidedNodeIpError::Unparsable { value: annotation.to_owned(), reason };
    let ips = annotation
        .split(',')
        .map(|part| parse_ip_sloppy(part).ok_or_else(|| unparsable(format!("could not parse {part:?}"))))
        .collect::<Result<Vec<_>, _>>()?;
    match ips.as_slice() {
        [_] => Ok(ips),
        [first, second] if first.is_ipv6() != second.is_ipv6() => {
            if first.is_unspecified() || second.is_unspecified() {
                Err(unparsable("dual-stack node IP cannot include '0.0.0.0' or '::'".into()))
            } else {
                Ok(ips)
            }
        }
        _ => Err(unparsable("must contain either a single IP or a dual-stack pair of IPs".into())),
    }
}

/// Parses an IP as Go's `ParseIPSloppy` does, with IPv4-mapped IPv6 folded to IPv4 so that
/// equality matches Go's `net.IP.Equal`.
fn parse_ip_sloppy(text: &str) -> Option<IpAddr> {
    text.parse::<IpAddr>()
        .ok()
        .or_else(|| parse_ipv4_with_leading_zeros(text).map(IpAddr::V4))
        .map(|ip| ip.to_canonical())
}

/// Dotted-quad IPv4 whose octets may have leading zeros, read as decimal (`010` is 10).
fn parse_ipv4_with_leading_zeros(text: &str) -> Option<Ipv4Addr> {
    let octets: Vec<u8> = text
        .split('.')
        .map(|part| {
            let all_digits = !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
            all_digits.then(|| part.parse::<u8>().ok()).flatten()
        })
        .collect::<Option<_>>()?;
    let octets: [u8; 4] = octets.try_into().ok()?;
    Some(Ipv4Addr::from(octets))
}

fn provided_node_ip(node: &Node) -> Option<&str> {
    node.metadata.annotations.as_ref()?.get(PROVIDED_NODE_IP_ANNOTATION).map(String::as_str)
}

fn current_addresses(node: &Node) -> &[NodeAddress] {
    node.status.as_ref().and_then(|status| status.addresses.as_deref()).unwrap_or_default()
}

fn with_node_hostname_if_cloud_has_none(node: &Node, cloud_addresses: &[NodeAddress]) -> Vec<NodeAddress> {
    let mut addresses = cloud_addresses.to_vec();
    if !cloud_addresses.iter().any(is_hostname) {
        addresses.extend(current_addresses(node).iter().filter(|a| is_hostname(a)).cloned());
    }
    addresses
}

fn is_hostname(address: &NodeAddress) -> bool {
    address.type_ == HOSTNAME_ADDRESS_TYPE
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn address(type_: &str, address: &str) -> NodeAddress {
        NodeAddress { type_: type_.into(), address: address.into() }
    }

    fn node(provided_ip: Option<&str>, current: Vec<NodeAddress>) -> Node {
        let annotations = provided_ip.map(|ip| [(PROVIDED_NODE_IP_ANNOTATION.to_owned(), ip.to_owned())].into());
        Node {
            metadata: ObjectMeta { annotations, ..ObjectMeta::default() },
            status: Some(NodeStatus { addresses: Some(current), ..NodeStatus::default() }),
            ..Node::default()
        }
    }

    fn cloud_addresses() -> Vec<NodeAddress> {
        vec![
            address("InternalIP", "10.0.0.1"),
            address("InternalIP", "10.0.0.2"),
            address("ExternalIP", "203.0.113.5"),
            address("Hostname", "node-1"),
        ]
    }

    #[test]
    fn provided_ip_goes_first_and_drops_other_addresses_of_its_type() {
        let merged = addresses_for_provided_node_ip("10.0.0.2", &cloud_addresses()).unwrap();

        assert_eq!(
            merged,
            [address("InternalIP", "10.0.0.2"), address("ExternalIP", "203.0.113.5"), address("Hostname", "node-1"),]
        );
    }

    #[test]
    fn provided_ip_matching_an_external_address_drops_the_other_externals_only() {
        let cloud = [
            address("InternalIP", "10.0.0.1"),
            address("ExternalIP", "203.0.113.5"),
            address("ExternalIP", "203.0.113.6"),
        ];

        let merged = addresses_for_provided_node_ip("203.0.113.6", &cloud).unwrap();

        assert_eq!(merged, [address("ExternalIP", "203.0.113.6"), address("InternalIP", "10.0.0.1")]);
    }

    #[test]
    fn provided_ip_the_cloud_does_not_know_is_an_error() {
        let error = addresses_for_provided_node_ip("10.9.9.9", &cloud_addresses()).unwrap_err();

        assert_eq!(error.to_string(), "failed to get node address from cloud provider that matches ip: 10.9.9.9");
    }

    #[test]
    fn dual_stack_provided_ips_both_go_first_in_annotation_order() {
        let cloud = [
            address("InternalIP", "10.0.0.1"),
            address("InternalIP", "fd00::1"),
            address("InternalIP", "fd00::2"),
            address("ExternalIP", "203.0.113.5"),
        ];

        let merged = addresses_for_provided_node_ip("fd00::2,10.0.0.1", &cloud).unwrap();

        assert_eq!(
            merged,
            [address("InternalIP", "fd00::2"), address("InternalIP", "10.0.0.1"), address("ExternalIP", "203.0.113.5"),]
        );
    }

    #[test]
    fn ips_compare_like_go_net_ip_equal() {
        let cloud = [address("InternalIP", "::ffff:10.0.0.1"), address("InternalIP", "10.0.0.2")];

        let merged = addresses_for_provided_node_ip("010.000.000.001", &cloud).unwrap();

        assert_eq!(merged, [address("InternalIP", "::ffff:10.0.0.1")]);
    }

    #[test]
    fn malformed_annotations_are_rejected() {
        for bad in ["", "not-an-ip", "10.0.0.1, fd00::1", "10.0.0.1,10.0.0.2", "0.0.0.0,fd00::1"] {
            assert!(
                matches!(parse_provided_node_ip(bad), Err(ProvidedNodeIpError::Unparsable { .. })),
                "{bad:?} should be rejected"
            );
        }
        assert!(parse_provided_node_ip("10.0.0.1,fd00::1,fd00::2").is_err());
    }

    #[test]
    fn a_single_or_dual_stack_annotation_parses() {
        assert_eq!(parse_provided_node_ip("10.0.0.1").unwrap().len(), 1);
        assert_eq!(parse_provided_node_ip("10.0.0.1,fd00::1").unwrap().len(), 2);
    }

    #[test]
    fn without_an_annotation_the_cloud_addresses_are_kept_as_they_are() {
        let merged = apply_provided_node_ip(&node(None, vec![]), &cloud_addresses()).unwrap();

        assert_eq!(merged, cloud_addresses());
    }

    #[test]
    fn no_cloud_addresses_means_leave_the_node_alone() {
        let node = node(Some("10.0.0.1"), vec![address("InternalIP", "10.0.0.1")]);

        assert_eq!(desired_node_addresses(&node, &[]), Ok(None));
    }

    #[test]
    fn the_nodes_hostname_is_kept_when_the_cloud_reports_none() {
        let node =
            node(Some("10.0.0.1"), vec![address("InternalIP", "192.168.0.9"), address("Hostname", "kubelet-name")]);
        let cloud = [address("InternalIP", "10.0.0.1"), address("InternalIP", "10.0.0.2")];

        let desired = desired_node_addresses(&node, &cloud).unwrap();

        assert_eq!(desired, Some(vec![address("InternalIP", "10.0.0.1"), address("Hostname", "kubelet-name")]));
    }

    #[test]
    fn the_clouds_hostname_wins_over_the_nodes() {
        let node = node(None, vec![address("Hostname", "kubelet-name")]);

        let desired = desired_node_addresses(&node, &cloud_addresses()).unwrap().unwrap();

        assert_eq!(desired, cloud_addresses());
    }

    #[test]
    fn a_provided_ip_missing_from_the_cloud_fails_the_whole_merge() {
        let node = node(Some("10.9.9.9"), vec![]);

        assert!(desired_node_addresses(&node, &cloud_addresses()).is_err());
    }

    #[test]
    fn change_detection_notices_order_and_content() {
        let node = node(None, cloud_addresses());
        let mut reordered = cloud_addresses();
        reordered.swap(0, 1);

        assert!(!addresses_changed(&node, &cloud_addresses()));
        assert!(addresses_changed(&node, &reordered));
        assert!(addresses_changed(&node, &cloud_addresses()[..2]));
    }
}

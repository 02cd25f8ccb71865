//! The labels the cloud-node controller sets from the cloud's instance metadata.

use std::collections::BTreeMap;

use crate::cloud::InstanceMetadata;

pub const LABEL_INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
pub const LABEL_INSTANCE_TYPE_BETA: &str = "beta.kubernetes.io/instance-type";
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
pub const LABEL_ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
pub const LABEL_REGION: &str = "topology.kubernetes.io/region";
pub const LABEL_REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";

/// Beta label → GA twin; upstream still treats the beta label as the source of truth.
const BETA_TO_GA: [(&str, &str); 3] =
    [(LABEL_ZONE_BETA, LABEL_ZONE), (LABEL_REGION_BETA, LABEL_REGION), (LABEL_INSTANCE_TYPE_BETA, LABEL_INSTANCE_TYPE)];

/// The labels to set on a node being initialised, given its current labels.
///
/// As upstream's `getNodeModifiersFromCloudProvider`: the instance type, zone and region (each
/// with its beta twin, and only when the cloud reports it) overwrite what the node has; an
/// additional label is added only if the node has no label of that key and the key is not in a
/// Kubernetes namespace (see [`is_kubernetes_namespaced`]).
pub fn labels_from_instance_metadata(
    metadata: &InstanceMetadata,
    current: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut labels = well_known_labels(metadata);
    labels.extend(
        metadata
            .additional_labels
            .iter()
            .filter(|(key, _)| !is_kubernetes_namespaced(key) && !current.contains_key(*key))
            .map(|(key, value)| (key.clone(), value.clone())),
    );
    labels
}

fn well_known_labels(metadata: &InstanceMetadata) -> BTreeMap<String, String> {
    let pairs = [
        (&metadata.instance_type, LABEL_INSTANCE_TYPE, LABEL_INSTANCE_TYPE_BETA),
        (&metadata.zone, LABEL_ZONE, LABEL_ZONE_BETA),
        (&metadata.region, LABEL_REGION, LABEL_REGION_BETA),
    ];
    pairs
        .into_iter()
        .filter(|(value, _, _)| !value.is_empty())
        .flat_map(|(value, ga, beta)| [(ga.to_owned(), value.clone()), (beta.to_owned(), value.clone())])
        .collect()
}

/// Whether a label key lies in a namespace reserved for Kubernetes: its prefix is `kubernetes.io`
/// or `k8s.io`, or a subdomain of either (upstream's regex `(^|\.)(kubernetes|k8s)\.io/`).
pub fn is_kubernetes_namespaced(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return false;
    };
    ["kubernetes.io", "k8s.io"].iter().any(|domain| prefix == *domain || prefix.ends_with(&format!(".{domain}")))
}

/// The GA labels to set on an initialised node so they match their beta twins.
///
/// As upstream's `reconcileNodeLabels`: where the beta label exists and its GA twin is missing or
/// differs, the GA label takes the beta label's value.
pub fn ga_labels_to_reconcile(current: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    BETA_TO_GA
        .iter()
        .filter_map(|(beta, ga)| {
            let value = current.get(*beta)?;
            (current.get(*ga) != Some(value)).then(|| ((*ga).to_owned(), value.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(key, value)| ((*key).to_owned(), (*value).to_owned())).collect()
    }

    fn full_metadata() -> InstanceMetadata {
        InstanceMetadata {
            instance_type: "small".into(),
            zone: "zone-a".into(),
            region: "region-1".into(),
            ..InstanceMetadata::default()
        }
    }

    #[test]
    fn type_zone_and_region_are_set_with_their_beta_twins() {
        let set = labels_from_instance_metadata(&full_metadata(), &BTreeMap::new());

        assert_eq!(
            set,
            labels(&[
                (LABEL_INSTANCE_TYPE, "small"),
                (LABEL_INSTANCE_TYPE_BETA, "small"),
                (LABEL_ZONE, "zone-a"),
                (LABEL_ZONE_BETA, "zone-a"),
                (LABEL_REGION, "region-1"),
                (LABEL_REGION_BETA, "region-1"),
            ])
        );
    }

    #[test]
    fn values_the_cloud_does_not_report_are_not_set() {
        let metadata = InstanceMetadata { zone: "zone-a".into(), ..InstanceMetadata::default() };

        let set = labels_from_instance_metadata(&metadata, &BTreeMap::new());

        assert_eq!(set, labels(&[(LABEL_ZONE, "zone-a"), (LABEL_ZONE_BETA, "zone-a")]));
    }

    #[test]
    fn well_known_labels_overwrite_the_nodes_values() {
        let current = labels(&[(LABEL_ZONE, "stale")]);

        let set = labels_from_instance_metadata(&full_metadata(), &current);

        assert_eq!(set[LABEL_ZONE], "zone-a");
    }

    #[test]
    fn additional_labels_skip_kubernetes_namespaces_and_keys_the_node_has() {
        let metadata = InstanceMetadata {
            additional_labels: labels(&[
                ("example.com/rack", "r7"),
                ("plain", "yes"),
                ("kubernetes.io/hostname", "spoof"),
                ("node.k8s.io/thing", "spoof"),
                ("example.com/owned", "cloud"),
            ]),
            ..InstanceMetadata::default()
        };
        let current = labels(&[("example.com/owned", "user")]);

        let set = labels_from_instance_metadata(&metadata, &current);

        assert_eq!(set, labels(&[("example.com/rack", "r7"), ("plain", "yes")]));
    }

    #[test]
    fn kubernetes_namespaces_are_the_domains_and_their_subdomains_only() {
        assert!(is_kubernetes_namespaced("kubernetes.io/arch"));
        assert!(is_kubernetes_namespaced("k8s.io/x"));
        assert!(is_kubernetes_namespaced("node-role.kubernetes.io/control-plane"));
        assert!(is_kubernetes_namespaced("a.b.k8s.io/x"));
        assert!(!is_kubernetes_namespaced("notkubernetes.io/x"));
        assert!(!is_kubernetes_namespaced("kubernetes.io.example.com/x"));
        assert!(!is_kubernetes_namespaced("kubernetes.io"));
        assert!(!is_kubernetes_namespaced("example.com/kubernetes.io"));
    }

    #[test]
    fn ga_labels_follow_their_beta_twins() {
        let current = labels(&[
            (LABEL_ZONE_BETA, "zone-a"),
            (LABEL_ZONE, "zone-old"),
            (LABEL_REGION_BETA, "region-1"),
            (LABEL_INSTANCE_TYPE_BETA, "small"),
            (LABEL_INSTANCE_TYPE, "small"),
        ]);

        let reconciled = ga_labels_to_reconcile(&current);

        assert_eq!(reconciled, labels(&[(LABEL_ZONE, "zone-a"), (LABEL_REGION, "region-1")]));
    }

    #[test]
    fn ga_labels_without_a_beta_twin_are_left_alone() {
        let current = labels(&[(LABEL_ZONE, "zone-a")]);

        assert!(ga_labels_to_reconcile(&current).is_empty());
    }
}

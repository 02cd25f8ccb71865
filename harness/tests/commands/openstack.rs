//! `harness run --provider openstack` for real, on both pinned Kubernetes versions:
//! cloud-provider-openstack's CCM v1.36.0 (built by `harness toolchain install --all`; against
//! Kubernetes 1.37 it is one minor behind) against OpenStack's own Keystone, Nova and Neutron
//! (`--cloud openstack`), on real nodes. Besides cloud-e2e's own verdicts, exec suites around it
//! dump the nodes and the cluster's record of its servers, so the test checks the OpenStack shapes
//! themselves: `openstack:///<server id>` providerIDs, the flavor as instance type, the server's
//! zone and the region, the port's address, and the deleted server's node gone.
//!
//! conformance-quick on these nodes is the provider's second required suite; it is left to
//! `harness run --provider openstack` and the matrix (docs/benchmarks.md), not run here, for CI's
//! time.

use std::collections::BTreeMap;

use super::aws::{checked_providers_yaml, harness_run, verdicts};

fn run(version: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let config = checked_providers_yaml(root, "openstack", "cloud-e2e, conformance-quick");
    let text = std::fs::read_to_string(&config).unwrap();
    let text =
        text.replace("nodes-before, cloud-e2e, conformance-quick, nodes-after", "nodes-before, cloud-e2e, nodes-after");
    std::fs::write(&config, text).unwrap();
    let artifacts = root.join("_artifacts");
    let (success, text) = harness_run(root, &config, "openstack-checked", version, "os-e2e");

    let (passed, skipped, failed) = verdicts(&artifacts.join("artifacts/junit_cloud-e2e.xml"), &text);
    assert!(failed.is_empty(), "{failed:#?}\n{text}");
    assert!(success, "{text}");
    for wanted in [
        "Nodes should get a providerID from the CCM",
        "Nodes should carry the zone and region labels from the cloud",
        "Nodes should report the cloud's addresses, the provided node IP first",
        "Nodes should carry the instance-type labels from the cloud",
        "Node whose instance is shut down should get the shutdown taint and lose it once the instance is started again",
        "Node whose instance is terminated should be deleted by the CCM",
    ] {
        assert!(passed.iter().any(|name| name.contains(wanted)), "{wanted} did not pass: {passed:#?}");
    }
    let report = std::fs::read_to_string(artifacts.join("artifacts/junit_cloud-e2e.xml")).unwrap();
    for feature in ["[Feature:LoadBalancer]", "[Feature:Routes]"] {
        assert!(skipped.iter().any(|name| name.contains(feature)), "{feature} not skipped: {skipped:#?}");
    }
    assert!(report.contains("Octavia is not run yet"), "the skips say why");

    // The nodes as the CCM left them, against Nova's servers.
    let read = |name: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(artifacts.join("artifacts").join(name)).unwrap()).unwrap()
    };
    let cluster = read("cluster-before.json");
    let servers: BTreeMap<String, String> = serde_json::from_value(cluster["openstack"]["servers"].clone()).unwrap();
    let zones: BTreeMap<String, String> = serde_json::from_value(cluster["openstack"]["zones"].clone()).unwrap();
    assert_eq!(servers.len(), 3, "{cluster}");
    let nodes = read("nodes-before.json");
    let nodes = nodes["items"].as_array().unwrap();
    assert_eq!(nodes.len(), 3);
    let mut seen_zones = std::collections::BTreeSet::new();
    for (index, node) in nodes.iter().enumerate() {
        let name = node["metadata"]["name"].as_str().unwrap();
        assert_eq!(node["spec"]["providerID"], format!("openstack:///{}", servers[name]), "{name}");
        let labels = &node["metadata"]["labels"];
        assert_eq!(labels["node.kubernetes.io/instance-type"], local_cluster::openstack::FLAVOR, "{name}");
        assert_eq!(labels["topology.kubernetes.io/zone"], zones[name].as_str(), "{name}");
        assert_eq!(labels["topology.kubernetes.io/region"], local_cluster::openstack::REGION, "{name}");
        seen_zones.insert(zones[name].clone());
        let addresses: Vec<(String, String)> = node["status"]["addresses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (a["type"].as_str().unwrap().to_owned(), a["address"].as_str().unwrap().to_owned()))
            .collect();
        let ip = local_cluster::real::node_ip(index as u32).to_string();
        assert_eq!(addresses.first(), Some(&("InternalIP".to_owned(), ip)), "{name}: {addresses:?}");
    }
    assert_eq!(seen_zones.len(), 3, "a node per zone");
    // The deleted server's node is gone; the others stay.
    let after = read("nodes-after.json");
    assert_eq!(after["items"].as_array().unwrap().len(), 2, "{after}");

    let finished: serde_json::Value =
        serde_json::from_slice(&std::fs::read(artifacts.join("finished.json")).unwrap()).unwrap();
    assert_eq!(finished["metadata"]["provider-version"], "v1.36.0", "{finished}");
    assert_eq!(finished["metadata"]["kubernetes-version"], version);
    let left = local_cluster::process::find_by_marker(&root.join("state"));
    assert!(left.is_empty(), "processes left running: {left:?}");
}

#[test]
fn the_openstack_ccm_passes_cloud_e2e_against_nova_and_neutron_on_kubernetes_1_37_one_minor_ahead_of_it() {
    run("v1.37.1");
}

/// CI runs the 1.37 cell alone: with the other two it would not fit a fresh machine in its 90
/// minutes (docs/benchmarks.md, "The OpenStack cloud"); `scripts/test --openstack` runs all three.
#[test]
#[ignore = "the second Kubernetes version of the openstack provider: run by `scripts/test --openstack`, not by CI (its time)"]
fn the_openstack_ccm_passes_cloud_e2e_against_nova_and_neutron_on_kubernetes_1_36() {
    run("v1.36.4");
}

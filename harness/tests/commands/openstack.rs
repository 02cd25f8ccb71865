//! `harness run --provider openstack` for real, on both pinned Kubernetes versions:
//! cloud-provider-openstack's CCM v1.36.0 (built by `harness toolchain install --all`; against
//! Kubernetes 1.37 it is one minor behind) against OpenStack's own Keystone, Nova and Neutron
//! (`--cloud openstack`), on real nodes. Besides cloud-e2e's own verdicts, exec suites around it
//! dump the nodes and the cluster's record of its servers, so the test checks the OpenStack shapes
//! themselves: `openstack:///<server id>` providerIDs, the flavor as instance type, the server's
//! zone and the region, the port's address, the deleted server's node gone, the router's routes
//! (through Neutron's API) to each remaining node's pod CIDR, and no Octavia load balancer left once
//! the load-balancer tests (which read Octavia's listeners, allowed CIDRs and members) deleted
//! their services.

use std::collections::BTreeMap;

use super::provider_run::CheckedRun;
use local_cluster::clouds::openstack::{FLAVOR, REGION};

fn run(version: &str) {
    let run = CheckedRun::cloud_e2e("openstack", version, "os-e2e");
    for wanted in [
        "[Feature:Routes] Nodes with a pod CIDR should get NetworkUnavailable=False with reason RouteCreated",
        "[Feature:LoadBalancer] Service of type LoadBalancer should get an ingress address and a cleanup finalizer",
        "[Feature:LoadBalancer] Service of type LoadBalancer should have its load balancer deleted",
        "[Feature:LoadBalancerUDP] Service of type LoadBalancer with a UDP port should get an ingress address",
        "[Feature:LoadBalancerSourceRanges] Service of type LoadBalancer should apply its loadBalancerSourceRanges",
        "[Feature:LoadBalancerNodeExclusion] Service of type LoadBalancer should update its backends",
    ] {
        assert!(run.passed_test(wanted), "{wanted} did not pass: {:#?}", run.passed);
    }
    // No-op amphorae carry no packet: the data-path tests are skipped, saying so.
    run.assert_skipped(&["[Feature:LoadBalancerDataPath]"]);
    assert!(run.report.contains("no packet reaches a load balancer's VIP"), "the skips say why");
    assert_eq!(run.read("load-balancers-before.json"), serde_json::json!([]));
    assert_eq!(
        run.read("load-balancers-after.json"),
        serde_json::json!([]),
        "Octavia's load balancers went with their services"
    );

    // The nodes as the CCM left them, against Nova's servers.
    let cluster = run.read("cluster-before.json");
    assert_eq!(cluster["cloud"]["kind"], "openstack", "cluster.json tags its cloud: {cluster}");
    let servers: BTreeMap<String, String> = serde_json::from_value(cluster["cloud"]["servers"].clone()).unwrap();
    let zones: BTreeMap<String, String> = serde_json::from_value(cluster["cloud"]["zones"].clone()).unwrap();
    assert_eq!(servers.len(), 3, "{cluster}");
    let mut seen_zones = std::collections::BTreeSet::new();
    for (index, node) in run.nodes_before_and_after(3).iter().enumerate() {
        let name = node["metadata"]["name"].as_str().unwrap();
        assert_eq!(node["spec"]["providerID"], format!("openstack:///{}", servers[name]), "{name}");
        let labels = &node["metadata"]["labels"];
        assert_eq!(labels["node.kubernetes.io/instance-type"], FLAVOR, "{name}");
        assert_eq!(labels["topology.kubernetes.io/zone"], zones[name].as_str(), "{name}");
        assert_eq!(labels["topology.kubernetes.io/region"], REGION, "{name}");
        seen_zones.insert(zones[name].clone());
        let addresses = CheckedRun::addresses(node);
        let ip = local_cluster::real::node_ip(index as u32).to_string();
        assert_eq!(addresses.first(), Some(&("InternalIP".to_owned(), ip)), "{name}: {addresses:?}");
    }
    assert_eq!(seen_zones.len(), 3, "a node per zone");
    // The router's routes, read through Neutron's API once cloud-e2e ended: one per remaining node,
    // to its pod CIDR through its address (the terminated node's route is gone).
    let routes = run.read("routes-after.json");
    let mut routes: Vec<(String, String)> = routes
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["destination"].as_str().unwrap().to_owned(), r["nexthop"].as_str().unwrap().to_owned()))
        .collect();
    routes.sort();
    let after = run.read("nodes-after.json");
    let mut wanted: Vec<(String, String)> = after["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| {
            let ip = CheckedRun::addresses(node).into_iter().find(|(kind, _)| kind == "InternalIP").unwrap().1;
            (node["spec"]["podCIDR"].as_str().unwrap().to_owned(), ip)
        })
        .collect();
    wanted.sort();
    assert_eq!(routes, wanted, "the router's routes are the remaining nodes' pod CIDRs");
    run.assert_finished("v1.36.0", version);
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

//! `--cloud openstack` on real nodes: OpenStack's own services (installed by `harness toolchain
//! install --all`) come up with the cluster, hold a server per node with the node's name and
//! address, answer only to the right credentials, make load balancers through Octavia, and leave no
//! process, port or file behind.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, TcpListener};
use std::time::{Duration, Instant};

use local_cluster::clouds::openstack::api::{Credentials, Session};
use local_cluster::clouds::openstack::{self, OpenstackSetup, OpenstackState};
use local_cluster::{NodeKind, machines, nodes, real};
use serde_json::json;

use crate::common;

fn listening(state: &OpenstackState) -> Vec<u16> {
    let p = state.ports;
    [p.mariadb, p.rabbitmq, p.rabbitmq_dist, p.epmd, p.keystone, p.glance, p.placement, p.nova, p.neutron, p.octavia]
        .into_iter()
        .filter(|port| TcpListener::bind((Ipv4Addr::LOCALHOST, *port)).is_err())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_openstack_cloud_gives_each_real_node_a_server_with_its_address_and_leaves_nothing_behind() {
    let programs = toolchain::openstack::installed().expect("`harness toolchain install --all` installed OpenStack");
    let name = "os-cloud";
    let mut options = common::options(name, toolchain::default_release(), 2);
    options.node_kind = NodeKind::Real;
    options.cloud = Some(std::sync::Arc::new(OpenstackSetup { programs }));
    let started = Instant::now();
    let cluster = common::bring_up(options).await;
    println!("cluster with OpenStack up in {:.1?}", started.elapsed());
    let state = cluster.state.cloud_as::<OpenstackState>().cloned().expect("the cluster records its OpenStack");

    // As the CCM will: the cluster's own user, in its project.
    let user = Session::login(&state.credentials(false)).await.unwrap();
    assert_eq!(user.project_id, state.project_id);
    let servers = user.get("listing servers", "compute", "/servers/detail").await.unwrap();
    let servers = servers["servers"].as_array().unwrap();
    assert_eq!(servers.len(), 2, "{servers:#?}");
    let mut zones = BTreeMap::new();
    for index in 0..2 {
        let node = nodes::node_name(name, index);
        let server = servers.iter().find(|s| s["name"] == node.as_str()).unwrap_or_else(|| panic!("no server {node}"));
        assert_eq!(server["id"], state.server(&node).unwrap());
        assert_eq!(server["status"], "ACTIVE");
        assert_eq!(server["flavor"]["original_name"], openstack::FLAVOR);
        let addresses = &server["addresses"][openstack::NETWORK];
        assert_eq!(addresses[0]["addr"], real::node_ip(index).to_string(), "{server:#}");
        zones.insert(node, server["OS-EXT-AZ:availability_zone"].as_str().unwrap().to_owned());
    }
    assert_eq!(zones, state.zones);
    let distinct: std::collections::BTreeSet<&String> = zones.values().collect();
    assert_eq!(distinct.len(), 2, "two nodes, two zones: {zones:?}");

    // Neutron: each node's port holds its address; the router has an interface on the subnet.
    let ports =
        user.get("listing ports", "network", &format!("/v2.0/ports?network_id={}", state.network_id)).await.unwrap();
    let ports = ports["ports"].as_array().unwrap();
    for index in 0..2 {
        let ip = real::node_ip(index).to_string();
        let port = ports.iter().find(|p| p["fixed_ips"][0]["ip_address"] == ip.as_str()).expect("a port per node");
        assert_eq!(port["device_owner"], "compute:".to_owned() + &zones[&nodes::node_name(name, index)]);
        assert_eq!(port["status"], "ACTIVE", "bound by the harness's ML2 driver: {port:#}");
    }
    assert!(
        ports.iter().any(|p| p["device_id"] == state.router_id.as_str()
            && p["fixed_ips"][0]["subnet_id"] == state.subnet_id.as_str()),
        "the router is on the nodes' subnet: {ports:#?}"
    );

    load_balancers_go_active_and_are_listed_with_their_members(&user, &state, name).await;

    // The CCM's cloud config names the cluster's user and the nodes' network.
    let config = std::fs::read_to_string(cluster.cloud_config()).unwrap();
    assert!(config.contains(&format!("password = {}", state.password)), "{config}");
    assert!(config.contains("internal-network-name = nodes"), "{config}");

    // Wrong credentials are refused by Keystone itself.
    let wrong = Credentials { password: "not-the-password".into(), ..state.credentials(false) };
    let refused = Session::login(&wrong).await.unwrap_err();
    assert_eq!(refused.status.map(|s| s.as_u16()), Some(401), "{refused}");

    // A CCM given wrong credentials, or a network that does not exist, is refused before it starts.
    let mut cluster = cluster;
    let ccm = toolchain::openstack::CCM
        .installed(&toolchain::default_release(), toolchain::Libraries::Pinned)
        .expect("installed with --all");
    let good = std::fs::read_to_string(cluster.cloud_config()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (name, config, wanted) in [
        (
            "wrong-password.conf",
            good.replace(&format!("password = {}", state.password), "password = not-the-password"),
            "Keystone refuses its credentials ([Global] username = harness, tenant-name = harness",
        ),
        (
            "no-such-network.conf",
            good.replace("internal-network-name = nodes", "internal-network-name = no-such-network"),
            "[Networking] internal-network-name = no-such-network: no such network in project harness; its networks are: nodes",
        ),
        (
            "no-such-subnet.conf",
            good.replace(
                &format!("subnet-id = {}", state.subnet_id),
                "subnet-id = 5e1f0000-0000-4000-8000-000000000000",
            ),
            "[LoadBalancer] subnet-id = 5e1f0000-0000-4000-8000-000000000000: no such subnet",
        ),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, config).unwrap();
        let args = vec!["--cloud-provider=openstack".to_owned(), format!("--cloud-config={}", path.display())];
        let error = cluster.0.as_mut().unwrap().start_ccm(&ccm, &args).await.unwrap_err().to_string();
        assert!(error.contains(wanted), "{name}: {error}");
        assert!(error.contains(&path.display().to_string()), "names the file: {error}");
        assert!(
            !cluster.state.processes.iter().any(|p| p.component == "openstack-cloud-controller-manager"),
            "started"
        );
    }

    assert!(listening(&state).len() == 10, "every service listens: {:?}", listening(&state));
    common::assert_torn_down(cluster);
    assert_eq!(listening(&state), Vec::<u16>::new(), "ports still listened on after down");
}

/// As the CCM does for a UDP service with source ranges: one fully populated load balancer, made
/// ACTIVE by Octavia's worker on its no-op drivers, listed by `harness cluster load-balancers`
/// with its listener and member, and gone once deleted.
async fn load_balancers_go_active_and_are_listed_with_their_members(
    user: &Session,
    state: &OpenstackState,
    cluster: &str,
) {
    let node = nodes::node_name(cluster, 0);
    let body = json!({"loadbalancer": {
        "name": "kube_service_test", "description": "Kubernetes external service ns/svc from cluster test",
        "vip_subnet_id": state.subnet_id, "provider": "amphora",
        "listeners": [{"protocol": "UDP", "protocol_port": 53, "allowed_cidrs": ["203.0.113.0/24"],
            "default_pool": {"name": "pool", "protocol": "UDP", "lb_algorithm": "ROUND_ROBIN",
                "members": [{"name": node, "address": real::node_ip(0).to_string(), "protocol_port": 30053}]}}]}});
    let created =
        user.post("creating a load balancer", "load-balancer", "/v2/lbaas/loadbalancers", body).await.unwrap();
    let id = created["loadbalancer"]["id"].as_str().unwrap().to_owned();
    let listed = common::wait_for("the load balancer to go ACTIVE", Duration::from_secs(60), || async {
        let listing = machines::load_balancers(cluster).await.unwrap();
        listing.into_iter().find(|lb| lb["id"] == id.as_str() && lb["provisioning_status"] == "ACTIVE")
    })
    .await;
    assert_eq!(listed["backends"], json!([node]), "{listed:#}");
    assert_eq!(listed["listeners"], json!([{"protocol": "UDP", "port": 53, "allowed_cidrs": ["203.0.113.0/24"]}]));
    assert_eq!(listed["pools"][0]["members"][0]["address"], real::node_ip(0).to_string(), "{listed:#}");
    assert!(listed["vip_address"].as_str().is_some_and(|ip| !ip.is_empty()), "{listed:#}");
    let path = format!("/v2/lbaas/loadbalancers/{id}?cascade=true");
    user.delete("deleting a load balancer", "load-balancer", &path).await.unwrap();
    common::wait_for("the load balancer to be gone", Duration::from_secs(60), || async {
        machines::load_balancers(cluster).await.unwrap().is_empty().then_some(())
    })
    .await;
}

//! What the harness creates through the cloud's own APIs once its services run: the catalog and
//! the services' users, then the cluster's project, user, flavor, image, zones, network, router
//! and a server per node.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::api::{Credentials, Session, id_of};
use super::service_config::{CATALOG, Ports, REGION, SERVICE_PROJECT};
use super::{FLAVOR, IMAGE, NETWORK, OpenstackState, PROJECT, Services, USERNAME, ZONES, cloud_err, error};
use crate::Result;
use crate::clouds::{CloudErrorKind, Machine};

/// How long a service may take to answer after it started, and a server to become ACTIVE.
const WAIT: Duration = Duration::from_secs(180);

/// Logs in to Keystone as its admin once it answers.
pub async fn wait_for_keystone(admin: &Credentials, alive: impl Fn() -> Result<()>) -> Result<Session> {
    let started = Instant::now();
    loop {
        alive()?;
        match Session::login(admin).await {
            Ok(session) => return Ok(session),
            // Refused credentials are an answer: only a Keystone not yet listening is waited for.
            Err(e) if e.status.is_some() => return Err(cloud_err(e)),
            Err(e) if started.elapsed() > WAIT => {
                return Err(error(CloudErrorKind::Unreachable, format!("Keystone did not answer within {WAIT:?}"), e));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

async fn role_id(session: &Session, name: &str) -> Result<String> {
    let roles = session.get("listing Keystone's roles", "identity", &format!("/roles?name={name}")).await;
    let found = roles.map_err(cloud_err)?["roles"][0]["id"].as_str().map(str::to_owned);
    match found {
        Some(id) => Ok(id),
        None => {
            let created = session.post("creating a role", "identity", "/roles", json!({"role": {"name": name}})).await;
            super::api::id_of(&created.map_err(cloud_err)?, "role", "creating a role").map_err(cloud_err)
        }
    }
}

async fn create_project(session: &Session, name: &str) -> Result<String> {
    let body = json!({"project": {"name": name, "domain_id": "default"}});
    let reply = session.post("creating a project", "identity", "/projects", body).await.map_err(cloud_err)?;
    id_of(&reply, "project", "creating a project").map_err(cloud_err)
}

/// Creates user `name` in `project` with `roles` there.
async fn create_user(session: &Session, name: &str, password: &str, project: &str, roles: &[&str]) -> Result<()> {
    let body =
        json!({"user": {"name": name, "password": password, "domain_id": "default", "default_project_id": project}});
    let reply = session.post("creating a user", "identity", "/users", body).await.map_err(cloud_err)?;
    let user = id_of(&reply, "user", "creating a user").map_err(cloud_err)?;
    for role in roles {
        let role = role_id(session, role).await?;
        let path = format!("/projects/{project}/users/{user}/roles/{role}");
        session.put("granting a role", "identity", &path, None).await.map_err(cloud_err)?;
    }
    Ok(())
}

/// The `service` project, a user per service in it (admin and `service` roles: Nova's service
/// token is refused without the latter), and each service's endpoints in the catalog.
pub async fn register_services(session: &Session, ports: &Ports, password: &str) -> Result<()> {
    let project = create_project(session, SERVICE_PROJECT).await?;
    for entry in CATALOG {
        create_user(session, entry.service, password, &project, &["admin", "service"]).await?;
        let body = json!({"service": {"name": entry.service, "type": entry.kind}});
        let reply = session.post("creating a service", "identity", "/services", body).await.map_err(cloud_err)?;
        let service = id_of(&reply, "service", "creating a service").map_err(cloud_err)?;
        for interface in ["public", "internal", "admin"] {
            let body = json!({"endpoint": {"service_id": service, "interface": interface, "url": entry.url(ports), "region_id": REGION}});
            session.post("creating an endpoint", "identity", "/endpoints", body).await.map_err(cloud_err)?;
        }
    }
    Ok(())
}

/// Waits until every API answers and Nova has `hosts` compute hosts up and mapped to its cell.
pub async fn wait_for_apis(session: &Session, hosts: usize, alive: impl Fn() -> Result<()>) -> Result<()> {
    let started = Instant::now();
    let checks = [
        ("image", "/v2/images"),
        ("network", "/v2.0/networks"),
        ("placement", "/resource_providers"),
        ("load-balancer", "/v2/lbaas/loadbalancers"),
    ];
    for (kind, path) in checks {
        let what = format!("the {kind} API to answer");
        wait_until(&alive, started, &what, || async {
            session.get(&what, kind, path).await.map(|_| true).map_err(|e| e.to_string())
        })
        .await?;
    }
    wait_until(&alive, started, &format!("{hosts} Nova compute hosts to be up"), || async {
        let hypervisors =
            session.get("listing hypervisors", "compute", "/os-hypervisors").await.map_err(|e| e.to_string())?;
        let up =
            hypervisors["hypervisors"].as_array().map_or(0, |list| list.iter().filter(|h| h["state"] == "up").count());
        Ok(up >= hosts)
    })
    .await
}

/// Polls `check` every half second until it answers `true`; its last error shows on time-out.
async fn wait_until<F, Fut>(alive: &impl Fn() -> Result<()>, started: Instant, what: &str, check: F) -> Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<bool, String>>,
{
    let mut last = String::from("not yet");
    loop {
        alive()?;
        match check().await {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => last = e,
        }
        if started.elapsed() > WAIT {
            return Err(error(CloudErrorKind::Timeout, format!("waited {WAIT:?} for {what}"), last));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The subnet that holds every node address: their common /24, else their common /16.
pub fn subnet_for(nodes: &[Machine]) -> (String, String) {
    let first = nodes.first().map_or([10, 250, 0, 0], |n| n.ipv4.octets());
    let same_24 = nodes.iter().all(|n| n.ipv4.octets()[..3] == first[..3] && n.ipv4.octets()[3] < 254);
    // The gateway (the router's interface) takes the subnet's last address, never a node's.
    match same_24 {
        true => (
            format!("{}.{}.{}.0/24", first[0], first[1], first[2]),
            format!("{}.{}.{}.254", first[0], first[1], first[2]),
        ),
        false => (format!("{}.{}.0.0/16", first[0], first[1]), format!("{}.{}.255.254", first[0], first[1])),
    }
}

/// Creates the cluster's project and what its nodes run on; returns the state to record.
pub async fn provision(
    admin: &Session,
    cloud: &Services,
    admin_password: String,
    nodes: &[Machine],
    hosts: usize,
) -> Result<OpenstackState> {
    let project_id = create_project(admin, PROJECT).await?;
    let password = crate::new_password();
    create_user(admin, USERNAME, &password, &project_id, &["member"]).await?;
    let flavor = json!({"flavor": {"name": FLAVOR, "ram": 4096, "vcpus": 2, "disk": 40}});
    let flavor = admin.post("creating the flavor", "compute", "/flavors", flavor).await.map_err(cloud_err)?;
    let flavor_id = id_of(&flavor, "flavor", "creating the flavor").map_err(cloud_err)?;
    let image_id = create_image(admin).await?;
    let mut zones_of_hosts = Vec::new();
    for (host, zone) in super::compute_hosts(hosts).into_iter().zip(ZONES) {
        let body = json!({"aggregate": {"name": zone, "availability_zone": zone}});
        let reply = admin.post("creating a zone", "compute", "/os-aggregates", body).await.map_err(cloud_err)?;
        let aggregate = reply["aggregate"]["id"].as_i64().unwrap_or_default();
        let body = json!({"add_host": {"host": host}});
        let path = format!("/os-aggregates/{aggregate}/action");
        admin.post("adding a compute host to its zone", "compute", &path, body).await.map_err(cloud_err)?;
        zones_of_hosts.push(zone);
    }

    let credentials = Credentials {
        auth_url: format!("{}/v3", cloud.ports.keystone_url()),
        username: USERNAME.into(),
        password: password.clone(),
        project: PROJECT.into(),
    };
    let user = Session::login(&credentials).await.map_err(cloud_err)?;
    let (cidr, gateway) = subnet_for(nodes);
    let network =
        user.post("creating the network", "network", "/v2.0/networks", json!({"network": {"name": NETWORK}})).await;
    let network_id = id_of(&network.map_err(cloud_err)?, "network", "creating the network").map_err(cloud_err)?;
    let body = json!({"subnet": {"name": NETWORK, "network_id": network_id, "ip_version": 4, "cidr": cidr, "gateway_ip": gateway, "enable_dhcp": false}});
    let subnet = user.post("creating the subnet", "network", "/v2.0/subnets", body).await.map_err(cloud_err)?;
    let subnet_id = id_of(&subnet, "subnet", "creating the subnet").map_err(cloud_err)?;
    let router =
        user.post("creating the router", "network", "/v2.0/routers", json!({"router": {"name": NETWORK}})).await;
    let router_id = id_of(&router.map_err(cloud_err)?, "router", "creating the router").map_err(cloud_err)?;
    let path = format!("/v2.0/routers/{router_id}/add_router_interface");
    user.put("attaching the router to the subnet", "network", &path, Some(json!({"subnet_id": subnet_id})))
        .await
        .map_err(cloud_err)?;

    let mut servers = BTreeMap::new();
    let mut zones = BTreeMap::new();
    for (index, node) in nodes.iter().enumerate() {
        let zone = zones_of_hosts[index % zones_of_hosts.len()];
        let body = json!({"port": {"name": node.name, "network_id": network_id,
            "fixed_ips": [{"subnet_id": subnet_id, "ip_address": node.ipv4.to_string()}]}});
        let port = user.post("creating a node's port", "network", "/v2.0/ports", body).await.map_err(cloud_err)?;
        let port_id = id_of(&port, "port", "creating a node's port").map_err(cloud_err)?;
        let body = json!({"server": {"name": node.name, "flavorRef": flavor_id, "imageRef": image_id,
            "networks": [{"port": port_id}], "availability_zone": zone}});
        let server = user.post("creating a node's server", "compute", "/servers", body).await.map_err(cloud_err)?;
        servers.insert(node.name.clone(), id_of(&server, "server", "creating a node's server").map_err(cloud_err)?);
        zones.insert(node.name.clone(), zone.to_owned());
    }
    for (node, id) in &servers {
        wait_active(&user, node, id).await?;
    }
    Ok(OpenstackState {
        ports: cloud.ports,
        auth_url: credentials.auth_url,
        region: REGION.into(),
        admin_password,
        password,
        project_id,
        network_id,
        subnet_id,
        router_id,
        servers,
        zones,
    })
}

/// A public raw image of 1 KiB: the fake hypervisor reads none of it.
async fn create_image(admin: &Session) -> Result<String> {
    let body = json!({"name": IMAGE, "disk_format": "raw", "container_format": "bare", "visibility": "public"});
    let image = admin.post("creating the image", "image", "/v2/images", body).await.map_err(cloud_err)?;
    let id = image["id"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| error(CloudErrorKind::Refused, "creating the image: no id in the answer", image))?;
    let path = format!("/v2/images/{id}/file");
    admin.upload("uploading the image", "image", &path, vec![0; 1024]).await.map_err(cloud_err)?;
    Ok(id)
}

/// Waits for the server of `node` to become ACTIVE; its fault shows if it goes to ERROR.
async fn wait_active(session: &Session, node: &str, id: &str) -> Result<()> {
    let started = Instant::now();
    loop {
        let server: Value =
            session.get("reading a node's server", "compute", &format!("/servers/{id}")).await.map_err(cloud_err)?;
        match server["server"]["status"].as_str() {
            Some("ACTIVE") => return Ok(()),
            Some("ERROR") => {
                let fault = server["server"]["fault"]["message"].as_str().unwrap_or("no fault recorded");
                return Err(error(CloudErrorKind::Refused, format!("the server of node {node} failed to boot"), fault));
            }
            _ if started.elapsed() > WAIT => {
                return Err(error(
                    CloudErrorKind::Timeout,
                    format!("the server of node {node} is not ACTIVE after {WAIT:?}"),
                    "",
                ));
            }
            _ => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(ip: [u8; 4]) -> Machine {
        Machine { index: 0, name: "n".into(), ipv4: ip.into(), ipv6: std::net::Ipv6Addr::LOCALHOST }
    }

    #[test]
    fn the_subnet_holds_every_node_and_its_gateway_is_none_of_them() {
        assert_eq!(
            subnet_for(&[node([10, 250, 0, 10]), node([10, 250, 0, 11])]),
            ("10.250.0.0/24".to_owned(), "10.250.0.254".to_owned())
        );
        // kwok's nodes count from 127.1.0.1 across /24s.
        assert_eq!(
            subnet_for(&[node([127, 1, 0, 1]), node([127, 1, 1, 0])]),
            ("127.1.0.0/16".to_owned(), "127.1.255.254".to_owned())
        );
        assert_eq!(subnet_for(&[node([127, 1, 0, 254])]).0, "127.1.0.0/16", "a node on the /24's gateway address");
    }
}

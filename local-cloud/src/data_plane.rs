//! `local-cloud data-plane`: makes the cloud's load balancers and routes carry traffic inside a
//! cluster's *hub* network namespace (real nodes, see the harness's `cluster::real`).
//!
//! It runs inside the hub (`nsenter --net=/proc/<hub>/ns/net -- reference-ccm local-cloud
//! --state-dir D data-plane ...`), refuses to run in the machine's first network namespace, and
//! reads the cloud's state file (the cloud's HTTP API listens on the root namespace's loopback,
//! which the hub cannot reach). Each change of the cluster's load balancers, routes or instances is
//! programmed at once:
//! - the ingress pool (`--ingress-pool`) is routed `local` in the hub, so clients on the hub's
//!   bridge reach it through the hub (their default route);
//! - per load balancer port: iptables DNAT of `ingress IP:port` (TCP or UDP) to the backends'
//!   `InternalIP:nodePort`, only for sources inside its source ranges; the hub masquerades the
//!   forwarded traffic, so replies come back through it. Each connection goes to a backend picked at
//!   random, or, with `ClientIP` session affinity, to the one a hash of the client's address picks
//!   (iptables `HMARK`), so all of a client's connections reach the same node;
//! - a load balancer with a health-check port (the service's `healthCheckNodePort`, with
//!   `externalTrafficPolicy: Local`) sends only to the backends whose `GET /healthz` on it answered
//!   200 at the last poll (kube-proxy answers 503 on a node without a ready endpoint); when none
//!   does, to all of them, as cloud load balancers fail open;
//! - what no rule takes (another source, no backend, a deleted load balancer) is refused: TCP
//!   reset, ICMP port unreachable for UDP;
//! - each route `destination via <target's InternalIP>` in the hub and in every node's namespace
//!   (`--node NAME=/proc/PID/ns/net`) but the target's own; routes inside `--cluster-cidr` that the
//!   cloud no longer has are deleted.
//!
//! Every rule lives in three chains of its own (`HARNESS-LB`, `HARNESS-LB-POST`,
//! `HARNESS-LB-REJECT`), rewritten whole with `iptables-restore --noflush`, so an update is atomic
//! per table; the rules die with the hub namespace.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use ipnet::Ipv4Net;

use super::api::{AddressType, Instance, InstanceState, LoadBalancer, Route, SessionAffinity};
use super::store::Store;

/// The nat chain jumped to from `PREROUTING`: the DNAT of every load balancer port.
pub const NAT_CHAIN: &str = "HARNESS-LB";
/// The nat chain jumped to from `POSTROUTING`: masquerade of what was DNATed.
pub const POST_CHAIN: &str = "HARNESS-LB-POST";
/// The filter chain jumped to from `INPUT`: refuse what reached the pool without a DNAT.
pub const REJECT_CHAIN: &str = "HARNESS-LB-REJECT";

/// Why the data plane could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum DataPlaneError {
    /// It would program the machine's own network.
    #[error(
        "the data plane runs in the machine's first network namespace; start it inside the cluster's hub (nsenter --net=/proc/<hub pid>/ns/net -- ...), it never programs the root namespace"
    )]
    RootNamespace,
    /// A `--node` argument is not `NAME=PATH`.
    #[error("--node {0:?}: expected NAME=PATH, e.g. node-0=/proc/1234/ns/net")]
    BadNode(String),
    /// A command failed.
    #[error("{what}: `{command}` failed: {detail}")]
    Command { what: String, command: String, detail: String },
    /// The cloud's state could not be read.
    #[error(transparent)]
    Store(#[from] super::store::StoreError),
}

/// A node's network namespace, as `--node NAME=PATH` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeNamespace {
    /// The node (= instance) name.
    pub name: String,
    /// Its network namespace, e.g. `/proc/1234/ns/net`.
    pub netns: PathBuf,
}

impl std::str::FromStr for NodeNamespace {
    type Err = DataPlaneError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.split_once('=') {
            Some((name, path)) if !name.is_empty() && !path.is_empty() => {
                Ok(NodeNamespace { name: name.to_owned(), netns: PathBuf::from(path) })
            }
            _ => Err(DataPlaneError::BadNode(text.to_owned())),
        }
    }
}

/// What the data plane works from.
#[derive(Debug, Clone)]
pub struct DataPlaneConfig {
    /// The cloud's state dir.
    pub state_dir: PathBuf,
    /// The cluster whose load balancers and routes it programs.
    pub cluster: String,
    /// Where ingress IPs come from (the cloud's pool).
    pub ingress_pool: Ipv4Net,
    /// Routes inside it are the cloud's to own.
    pub cluster_cidr: Ipv4Net,
    /// The nodes' namespaces, for routes.
    pub nodes: Vec<NodeNamespace>,
    /// How often the state file is read.
    pub poll: Duration,
}

/// What the cloud wants of the network, from its state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Desired {
    /// The cluster's load balancers.
    pub balancers: Vec<LoadBalancer>,
    /// `destination → via`: the routes with a live target.
    pub routes: BTreeMap<Ipv4Net, Ipv4Addr>,
    /// The running instances' first IPv4 InternalIP, by name.
    pub node_ips: BTreeMap<String, Ipv4Addr>,
    /// `(load balancer, node)`: the backends whose last health check failed.
    pub unhealthy: BTreeSet<(String, String)>,
}

/// One backend's health check: `GET http://{address}/healthz`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    /// The load balancer's name.
    pub balancer: String,
    /// The backend (node) it checks.
    pub node: String,
    /// The node's InternalIP and the load balancer's health-check port.
    pub address: SocketAddrV4,
}

/// How long a health check may take before it counts as failed.
const HEALTH_CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// The seed of the client-address hash that picks a backend under `ClientIP` affinity.
const AFFINITY_HASH_SEED: &str = "0x4c42";

impl Desired {
    /// The cluster's part of the cloud's state.
    pub fn from_state(cluster: &str, instances: &[Instance], balancers: Vec<LoadBalancer>, routes: &[Route]) -> Self {
        let node_ips: BTreeMap<String, Ipv4Addr> = instances
            .iter()
            .filter(|i| i.state == InstanceState::Running)
            .filter_map(|i| Some((i.name.clone(), internal_ipv4(i)?)))
            .collect();
        let routes = routes
            .iter()
            .filter(|r| r.cluster == cluster && !r.blackhole)
            .filter_map(|r| Some((r.destination_cidr.parse().ok()?, *node_ips.get(&r.target_node)?)))
            .collect();
        let balancers = balancers.into_iter().filter(|b| b.cluster == cluster).collect();
        Desired { balancers, routes, node_ips, unhealthy: BTreeSet::new() }
    }

    /// The health checks to make: each running backend of each load balancer with a health-check
    /// port.
    pub fn health_checks(&self) -> Vec<HealthCheck> {
        let mut checks = Vec::new();
        for balancer in self.balancers.iter().filter(|b| b.health_check_node_port > 0) {
            let Ok(port) = u16::try_from(balancer.health_check_node_port) else { continue };
            for node in &balancer.backends {
                if let Some(ip) = self.node_ips.get(node) {
                    let address = SocketAddrV4::new(*ip, port);
                    checks.push(HealthCheck { balancer: balancer.name.clone(), node: node.clone(), address });
                }
            }
        }
        checks
    }

    /// The addresses `balancer` sends to: its running backends, less those whose health check
    /// failed unless every one did (cloud load balancers fail open). Sorted, without duplicates.
    pub fn serving_backends(&self, balancer: &LoadBalancer) -> Vec<Ipv4Addr> {
        let running: Vec<&String> = balancer.backends.iter().filter(|b| self.node_ips.contains_key(*b)).collect();
        let healthy: Vec<&String> = running
            .iter()
            .copied()
            .filter(|node| !self.unhealthy.contains(&(balancer.name.clone(), (*node).clone())))
            .collect();
        let serving = if healthy.is_empty() { running } else { healthy };
        let addresses: BTreeSet<Ipv4Addr> =
            serving.iter().filter_map(|node| self.node_ips.get(*node).copied()).collect();
        addresses.into_iter().collect()
    }
}

fn internal_ipv4(instance: &Instance) -> Option<Ipv4Addr> {
    instance.addresses.iter().filter(|a| a.kind == AddressType::InternalIP).find_map(|a| a.address.parse().ok())
}

/// The `iptables-restore --noflush` input that makes the hub's chains say what `desired` wants.
pub fn render_rules(desired: &Desired, pool: Ipv4Net) -> String {
    let mut nat = format!("*nat\n:{NAT_CHAIN} - [0:0]\n:{POST_CHAIN} - [0:0]\n");
    for balancer in &desired.balancers {
        for rule in balancer_rules(balancer, &desired.serving_backends(balancer)) {
            let _ = writeln!(nat, "-A {NAT_CHAIN} {rule}");
        }
    }
    let _ = writeln!(nat, "-A {POST_CHAIN} -m conntrack --ctstate DNAT --ctorigdst {pool} -j MASQUERADE");
    nat.push_str("COMMIT\n");
    let filter = format!(
        "*filter\n:{REJECT_CHAIN} - [0:0]\n-A {REJECT_CHAIN} -d {pool} -p tcp -j REJECT --reject-with tcp-reset\n-A {REJECT_CHAIN} -d {pool} -j REJECT --reject-with icmp-port-unreachable\nCOMMIT\n"
    );
    nat + &filter
}

/// The DNAT rules (without `-A CHAIN`) of one load balancer sending to `backends`: per ingress IP,
/// TCP/UDP port and source range, one rule per backend. Without affinity the `i`-th of `n` is taken
/// with probability `1/(n-i)`, so each gets an even share; with `ClientIP` affinity an `HMARK` rule
/// first marks the packet `1..=n` from a hash of its source address and the `i`-th backend takes
/// mark `i+1`. SCTP ports, and ports without a node port, get none.
fn balancer_rules(balancer: &LoadBalancer, backends: &[Ipv4Addr]) -> Vec<String> {
    let ranges: Vec<&str> = match balancer.source_ranges.is_empty() {
        // Saved before the cloud kept source ranges: open, as the CCM's default.
        true => vec!["0.0.0.0/0"],
        false => balancer.source_ranges.iter().map(String::as_str).filter(|r| r.parse::<Ipv4Net>().is_ok()).collect(),
    };
    let by_client = balancer.session_affinity == SessionAffinity::ClientIp && backends.len() > 1;
    let mut rules = Vec::new();
    for ip in balancer.ingress_ips.iter().filter(|ip| ip.parse::<Ipv4Addr>().is_ok()) {
        for port in &balancer.ports {
            let protocol = port.protocol.to_ascii_lowercase();
            if !matches!(protocol.as_str(), "tcp" | "udp") || port.node_port <= 0 || port.port <= 0 {
                continue;
            }
            for range in &ranges {
                let matched = format!("-d {ip}/32 -p {protocol} -m {protocol} --dport {} -s {range}", port.port);
                if by_client {
                    rules.push(format!(
                        "{matched} -j HMARK --hmark-tuple src --hmark-mod {} --hmark-offset 1 --hmark-rnd {AFFINITY_HASH_SEED}",
                        backends.len()
                    ));
                }
                for (index, backend) in backends.iter().enumerate() {
                    let left = backends.len() - index;
                    let pick = match (by_client, left) {
                        (true, _) => format!(" -m mark --mark {}", index + 1),
                        (false, 1) => String::new(),
                        (false, _) => format!(" -m statistic --mode random --probability {:.11}", 1.0 / left as f64),
                    };
                    rules.push(format!("{matched}{pick} -j DNAT --to-destination {backend}:{}", port.node_port));
                }
            }
        }
    }
    rules
}

/// `(destination, via)` routes a namespace holds inside `cluster_cidr`, from `ip -o -4 route show`.
pub fn parse_routes(text: &str, cluster_cidr: Ipv4Net) -> BTreeSet<(Ipv4Net, Ipv4Addr)> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let destination: Ipv4Net = words.next()?.parse().ok()?;
            let via = words.skip_while(|w| *w != "via").nth(1)?.parse().ok()?;
            cluster_cidr.contains(&destination).then_some((destination, via))
        })
        .collect()
}

/// A kernel route: destination via gateway.
pub type IpRoute = (Ipv4Net, Ipv4Addr);

/// What a namespace's routes should become: `(to delete, to set)`. A namespace never routes to
/// its own address (`own`, a node's; the hub has none among the targets).
pub fn route_changes(
    present: &BTreeSet<IpRoute>,
    desired: &BTreeMap<Ipv4Net, Ipv4Addr>,
    own: Option<Ipv4Addr>,
) -> (Vec<IpRoute>, Vec<IpRoute>) {
    let wanted: BTreeSet<IpRoute> =
        desired.iter().filter(|(_, via)| Some(**via) != own).map(|(d, v)| (*d, *v)).collect();
    let delete = present.difference(&wanted).copied().collect();
    let set = wanted.difference(present).copied().collect();
    (delete, set)
}

/// Whether this process shares the network namespace of PID 1 (the machine's own).
fn in_root_namespace() -> bool {
    let own = std::fs::read_link("/proc/self/ns/net").ok();
    own.is_some() && own == std::fs::read_link("/proc/1/ns/net").ok()
}

fn run(what: &str, command: &mut Command, input: Option<&str>) -> Result<String, DataPlaneError> {
    let shown = format!("{command:?}");
    let failed = |detail: String| DataPlaneError::Command { what: what.to_owned(), command: shown.clone(), detail };
    command.stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() });
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|e| failed(e.to_string()))?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(text.as_bytes()).map_err(|e| failed(e.to_string()))?;
    }
    let output = child.wait_with_output().map_err(|e| failed(e.to_string()))?;
    if !output.status.success() {
        return Err(failed(format!("{}: {}", output.status, String::from_utf8_lossy(&output.stderr).trim())));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `ip` in the namespace `netns` (the hub, this process's own, when `None`).
fn ip(netns: Option<&Path>) -> Command {
    match netns {
        None => Command::new("ip"),
        Some(path) => {
            let mut command = Command::new("nsenter");
            command.arg(format!("--net={}", path.display())).args(["--", "ip"]);
            command
        }
    }
}

/// The data plane of one cluster, in the hub.
pub struct DataPlane {
    config: DataPlaneConfig,
    applied: Option<Desired>,
    health: reqwest::Client,
}

/// Whether `GET http://{address}/healthz` answers 200 within [`HEALTH_CHECK_TIMEOUT`].
async fn healthy(client: &reqwest::Client, address: SocketAddrV4) -> bool {
    let answer = client.get(format!("http://{address}/healthz")).send().await;
    answer.is_ok_and(|response| response.status() == reqwest::StatusCode::OK)
}

/// Makes every check at once; `(load balancer, node)` of those that failed.
async fn failed_checks(client: &reqwest::Client, checks: Vec<HealthCheck>) -> BTreeSet<(String, String)> {
    let mut running = tokio::task::JoinSet::new();
    for check in checks {
        let client = client.clone();
        running.spawn(async move { (!healthy(&client, check.address).await).then_some((check.balancer, check.node)) });
    }
    running.join_all().await.into_iter().flatten().collect()
}

impl DataPlane {
    /// Checks where it runs and prepares the hub: forwarding on, the pool routed `local`, the chains
    /// made (empty but for the refusals) and jumped to.
    pub fn start(config: DataPlaneConfig) -> Result<Self, DataPlaneError> {
        if in_root_namespace() {
            return Err(DataPlaneError::RootNamespace);
        }
        // Per network namespace: the hub forwards what it DNATs. It forwards out of the bridge it
        // came in by, to an address the sender could reach itself: an ICMP redirect would send the
        // client (or a node's reply) around the hub's NAT, so it sends none.
        for (file, value) in [
            ("ipv4/ip_forward", "1"),
            ("ipv4/conf/all/send_redirects", "0"),
            ("ipv4/conf/default/send_redirects", "0"),
            ("ipv4/conf/br0/send_redirects", "0"),
        ] {
            let path = format!("/proc/sys/net/{file}");
            std::fs::write(&path, value).map_err(|e| DataPlaneError::Command {
                what: "setting up forwarding in the hub".into(),
                command: format!("write {value} to {path}"),
                detail: e.to_string(),
            })?;
        }
        let pool = config.ingress_pool.to_string();
        run("routing the ingress pool", ip(None).args(["route", "replace", "local", &pool, "dev", "lo"]), None)?;
        let health = reqwest::Client::builder().timeout(HEALTH_CHECK_TIMEOUT).no_proxy().build().map_err(|e| {
            DataPlaneError::Command {
                what: "making the health checker".into(),
                command: "reqwest::Client::builder".into(),
                detail: e.to_string(),
            }
        })?;
        let plane = DataPlane { config, applied: None, health };
        plane.restore(&render_rules(&Desired::default(), plane.config.ingress_pool))?;
        for (table, parent, chain) in
            [("nat", "PREROUTING", NAT_CHAIN), ("nat", "POSTROUTING", POST_CHAIN), ("filter", "INPUT", REJECT_CHAIN)]
        {
            let check = Command::new("iptables").args(["-w", "-t", table, "-C", parent, "-j", chain]).output();
            if !check.is_ok_and(|o| o.status.success()) {
                run(
                    "jumping to the data plane's chain",
                    Command::new("iptables").args(["-w", "-t", table, "-I", parent, "-j", chain]),
                    None,
                )?;
            }
        }
        Ok(plane)
    }

    fn restore(&self, rules: &str) -> Result<(), DataPlaneError> {
        run("programming load balancers", Command::new("iptables-restore").args(["-w", "--noflush"]), Some(rules))
            .map(|_| ())
    }

    /// Reads the state, checks the backends' health and programs what changed since the last
    /// success.
    pub async fn sync(&mut self) -> Result<(), DataPlaneError> {
        let mut desired = tokio::task::block_in_place(|| self.read_desired())?;
        desired.unhealthy = failed_checks(&self.health, desired.health_checks()).await;
        if self.applied.as_ref() == Some(&desired) {
            return Ok(());
        }
        tokio::task::block_in_place(|| {
            self.restore(&render_rules(&desired, self.config.ingress_pool))?;
            self.program_routes(&desired)
        })?;
        tracing::info!(
            balancers = desired.balancers.len(),
            routes = desired.routes.len(),
            unhealthy = ?desired.unhealthy,
            "programmed the hub and the nodes"
        );
        self.applied = Some(desired);
        Ok(())
    }

    fn read_desired(&self) -> Result<Desired, DataPlaneError> {
        let store = Store::open(&self.config.state_dir)?;
        let cluster = &self.config.cluster;
        Ok(store.read(|state| {
            Desired::from_state(
                cluster,
                &state.instances(),
                state.load_balancers(Some(cluster)),
                &state.routes(Some(cluster)),
            )
        }))
    }

    fn program_routes(&self, desired: &Desired) -> Result<(), DataPlaneError> {
        let mut namespaces: Vec<(Option<&Path>, Option<Ipv4Addr>)> = vec![(None, None)];
        for node in &self.config.nodes {
            namespaces.push((Some(node.netns.as_path()), desired.node_ips.get(&node.name).copied()));
        }
        let cidr = self.config.cluster_cidr.to_string();
        for (netns, own) in namespaces {
            let listed = run("listing routes", ip(netns).args(["-o", "-4", "route", "show", "root", &cidr]), None)?;
            let (delete, set) = route_changes(&parse_routes(&listed, self.config.cluster_cidr), &desired.routes, own);
            for (destination, via) in delete {
                let (d, v) = (destination.to_string(), via.to_string());
                run("deleting a route", ip(netns).args(["route", "del", &d, "via", &v]), None)?;
            }
            for (destination, via) in set {
                let (d, v) = (destination.to_string(), via.to_string());
                run("setting a route", ip(netns).args(["route", "replace", &d, "via", &v]), None)?;
            }
        }
        Ok(())
    }

    /// Syncs every `poll` until `stop` resolves; a failed sync is logged and tried again.
    pub async fn run_until(mut self, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        let mut ticks = tokio::time::interval(self.config.poll);
        // A sync waits for health checks (up to a second): the next poll comes a whole period later.
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = ticks.tick() => {
                    if let Err(error) = self.sync().await {
                        tracing::warn!("data plane: {error}");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Address, LoadBalancerPort};

    fn instance(name: &str, ip: &str, state: InstanceState) -> Instance {
        Instance {
            id: format!("i-{name}"),
            name: name.into(),
            instance_type: "local.small".into(),
            zone: "local-a".into(),
            region: "local".into(),
            addresses: vec![
                Address { kind: AddressType::Hostname, address: name.into() },
                Address { kind: AddressType::InternalIP, address: ip.into() },
            ],
            state,
        }
    }

    fn balancer(backends: &[&str], ranges: &[&str]) -> LoadBalancer {
        LoadBalancer {
            cluster: "c".into(),
            name: "a1".into(),
            service: "ns/web".into(),
            ingress_ips: vec!["10.250.1.1".into()],
            ports: vec![
                LoadBalancerPort { name: "http".into(), protocol: "TCP".into(), port: 80, node_port: 30080 },
                LoadBalancerPort { name: "dns".into(), protocol: "UDP".into(), port: 53, node_port: 30053 },
                LoadBalancerPort { name: "s".into(), protocol: "SCTP".into(), port: 9, node_port: 30009 },
            ],
            backends: backends.iter().map(|b| b.to_string()).collect(),
            source_ranges: ranges.iter().map(|r| r.to_string()).collect(),
            health_check_node_port: 0,
            session_affinity: SessionAffinity::None,
        }
    }

    fn desired(balancers: Vec<LoadBalancer>) -> Desired {
        let instances = [
            instance("n0", "10.250.0.10", InstanceState::Running),
            instance("n1", "10.250.0.11", InstanceState::Running),
            instance("n2", "10.250.0.12", InstanceState::Shutdown),
        ];
        Desired::from_state("c", &instances, balancers, &[])
    }

    fn pool() -> Ipv4Net {
        "10.250.1.0/24".parse().unwrap()
    }

    fn nat_rules(text: &str) -> Vec<&str> {
        text.lines().filter(|l| l.starts_with(&format!("-A {NAT_CHAIN} "))).collect()
    }

    #[test]
    fn each_tcp_and_udp_port_goes_to_every_running_backend_an_even_share_each() {
        let rules = render_rules(&desired(vec![balancer(&["n0", "n1", "n2", "gone"], &["10.250.0.240/28"])]), pool());

        assert_eq!(
            nat_rules(&rules),
            [
                "-A HARNESS-LB -d 10.250.1.1/32 -p tcp -m tcp --dport 80 -s 10.250.0.240/28 -m statistic --mode random --probability 0.50000000000 -j DNAT --to-destination 10.250.0.10:30080",
                "-A HARNESS-LB -d 10.250.1.1/32 -p tcp -m tcp --dport 80 -s 10.250.0.240/28 -j DNAT --to-destination 10.250.0.11:30080",
                "-A HARNESS-LB -d 10.250.1.1/32 -p udp -m udp --dport 53 -s 10.250.0.240/28 -m statistic --mode random --probability 0.50000000000 -j DNAT --to-destination 10.250.0.10:30053",
                "-A HARNESS-LB -d 10.250.1.1/32 -p udp -m udp --dport 53 -s 10.250.0.240/28 -j DNAT --to-destination 10.250.0.11:30053",
            ]
        );
    }

    #[test]
    fn client_ip_affinity_picks_the_backend_by_a_hash_of_the_client_address() {
        let mut sticky = balancer(&["n0", "n1", "n2"], &["10.250.0.0/16"]);
        sticky.session_affinity = SessionAffinity::ClientIp;
        sticky.ports.truncate(1);

        let rules = render_rules(&desired(vec![sticky.clone()]), pool());

        assert_eq!(
            nat_rules(&rules),
            [
                "-A HARNESS-LB -d 10.250.1.1/32 -p tcp -m tcp --dport 80 -s 10.250.0.0/16 -j HMARK --hmark-tuple src --hmark-mod 2 --hmark-offset 1 --hmark-rnd 0x4c42",
                "-A HARNESS-LB -d 10.250.1.1/32 -p tcp -m tcp --dport 80 -s 10.250.0.0/16 -m mark --mark 1 -j DNAT --to-destination 10.250.0.10:30080",
                "-A HARNESS-LB -d 10.250.1.1/32 -p tcp -m tcp --dport 80 -s 10.250.0.0/16 -m mark --mark 2 -j DNAT --to-destination 10.250.0.11:30080",
            ],
            "n2 is shut down: two backends, two marks"
        );

        sticky.backends = vec!["n0".into()];
        let one = render_rules(&desired(vec![sticky]), pool());
        assert_eq!(
            nat_rules(&one),
            [
                "-A HARNESS-LB -d 10.250.1.1/32 -p tcp -m tcp --dport 80 -s 10.250.0.0/16 -j DNAT --to-destination 10.250.0.10:30080"
            ],
            "one backend needs no hash"
        );
    }

    #[test]
    fn backends_failing_their_health_check_get_no_traffic_unless_all_do() {
        let mut local = balancer(&["n0", "n1", "n2"], &[]);
        local.health_check_node_port = 31999;
        let mut plane = desired(vec![local.clone(), balancer(&["n0", "n1"], &[])]);
        plane.balancers[1].name = "unchecked".into();
        plane.balancers[1].ingress_ips = vec!["10.250.1.2".into()];

        let checks: Vec<String> =
            plane.health_checks().iter().map(|c| format!("{} {} {}", c.balancer, c.node, c.address)).collect();
        assert_eq!(checks, ["a1 n0 10.250.0.10:31999", "a1 n1 10.250.0.11:31999"], "running backends, checked ones");

        plane.unhealthy.insert(("a1".into(), "n0".into()));
        assert_eq!(plane.serving_backends(&local), ["10.250.0.11".parse::<Ipv4Addr>().unwrap()]);
        let unchecked = plane.balancers[1].clone();
        assert_eq!(plane.serving_backends(&unchecked).len(), 2, "another load balancer's health is its own");
        let rules = render_rules(&plane, pool());
        let checked_to_n0 =
            nat_rules(&rules).into_iter().filter(|r| r.contains("-d 10.250.1.1/32 ") && r.contains("10.250.0.10:"));
        assert_eq!(checked_to_n0.count(), 0, "{rules}");
        assert!(rules.contains("-d 10.250.1.2/32 -p tcp -m tcp --dport 80 -s 0.0.0.0/0 -m statistic --mode random --probability 0.50000000000 -j DNAT --to-destination 10.250.0.10:30080"), "{rules}");

        plane.unhealthy.insert(("a1".into(), "n1".into()));
        assert_eq!(plane.serving_backends(&local).len(), 2, "every backend failing: all of them, as clouds fail open");
    }

    #[test]
    fn every_source_range_gets_its_own_rules_and_none_means_open() {
        let two = render_rules(&desired(vec![balancer(&["n0"], &["10.0.0.0/8", "192.168.0.0/16"])]), pool());
        let sources: Vec<&str> =
            nat_rules(&two).iter().filter(|r| r.contains("-p tcp")).map(|r| r.split(" -s ").nth(1).unwrap()).collect();
        assert_eq!(
            sources,
            [
                "10.0.0.0/8 -j DNAT --to-destination 10.250.0.10:30080",
                "192.168.0.0/16 -j DNAT --to-destination 10.250.0.10:30080"
            ]
        );

        let open = render_rules(&desired(vec![balancer(&["n0"], &[])]), pool());
        assert!(nat_rules(&open).iter().all(|r| r.contains(" -s 0.0.0.0/0 ")), "{open}");
    }

    #[test]
    fn no_backend_or_no_balancer_leaves_only_the_refusals() {
        for balancers in [vec![balancer(&[], &[])], vec![balancer(&["n2"], &[])], vec![]] {
            let rules = render_rules(&desired(balancers), pool());
            assert!(nat_rules(&rules).is_empty(), "{rules}");
            assert!(rules.contains("-A HARNESS-LB-REJECT -d 10.250.1.0/24 -p tcp -j REJECT --reject-with tcp-reset"));
            assert!(
                rules
                    .contains("-A HARNESS-LB-POST -m conntrack --ctstate DNAT --ctorigdst 10.250.1.0/24 -j MASQUERADE")
            );
            // Declared chains are flushed by iptables-restore --noflush: every update starts clean.
            assert!(rules.starts_with("*nat\n:HARNESS-LB - [0:0]\n:HARNESS-LB-POST - [0:0]\n"), "{rules}");
            assert_eq!(rules.matches("COMMIT\n").count(), 2);
        }
    }

    #[test]
    fn other_clusters_and_blackholed_routes_are_left_out() {
        let mut other = balancer(&["n0"], &[]);
        other.cluster = "other".into();
        let route = |cluster: &str, target: &str, cidr: &str, blackhole| Route {
            cluster: cluster.into(),
            name: format!("r-{cidr}"),
            target_node: target.into(),
            destination_cidr: cidr.into(),
            blackhole,
        };
        let routes = [
            route("c", "n0", "10.244.0.0/24", false),
            route("c", "n1", "10.244.1.0/24", false),
            route("c", "n2", "10.244.2.0/24", false),
            route("c", "n9", "10.244.9.0/24", true),
            route("other", "n0", "10.244.5.0/24", false),
        ];
        let instances = [
            instance("n0", "10.250.0.10", InstanceState::Running),
            instance("n1", "10.250.0.11", InstanceState::Running),
        ];

        let desired = Desired::from_state("c", &instances, vec![other], &routes);

        assert!(desired.balancers.is_empty());
        let routes: Vec<String> = desired.routes.iter().map(|(d, v)| format!("{d} via {v}")).collect();
        assert_eq!(routes, ["10.244.0.0/24 via 10.250.0.10", "10.244.1.0/24 via 10.250.0.11"]);
    }

    #[test]
    fn routes_are_read_back_and_changed_to_what_the_cloud_has() {
        let cidr: Ipv4Net = "10.244.0.0/16".parse().unwrap();
        let listed = "10.244.0.0/24 dev cni0 proto kernel scope link src 10.244.0.1\n\
                      10.244.1.0/24 via 10.250.0.11 dev eth0\n\
                      10.244.2.0/24 via 10.250.0.12 dev eth0\n\
                      10.99.0.0/24 via 10.250.0.12 dev eth0\n";
        let present = parse_routes(listed, cidr);
        assert_eq!(present.len(), 2, "the node's own bridge route and routes outside the CIDR are not ours");

        let desired = BTreeMap::from([
            ("10.244.0.0/24".parse().unwrap(), "10.250.0.10".parse().unwrap()),
            ("10.244.1.0/24".parse().unwrap(), "10.250.0.11".parse().unwrap()),
            ("10.244.3.0/24".parse().unwrap(), "10.250.0.13".parse().unwrap()),
        ]);
        let (delete, set) = route_changes(&present, &desired, Some("10.250.0.10".parse().unwrap()));

        let show = |v: Vec<(Ipv4Net, Ipv4Addr)>| v.iter().map(|(d, via)| format!("{d} via {via}")).collect::<Vec<_>>();
        assert_eq!(show(delete), ["10.244.2.0/24 via 10.250.0.12"]);
        assert_eq!(show(set), ["10.244.3.0/24 via 10.250.0.13"], "never a route to the node itself");
    }

    #[test]
    fn node_arguments_are_name_and_path() {
        let node: NodeNamespace = "n-0=/proc/12/ns/net".parse().unwrap();
        assert_eq!((node.name.as_str(), node.netns.as_path()), ("n-0", Path::new("/proc/12/ns/net")));
        let err = "n-0".parse::<NodeNamespace>().unwrap_err().to_string();
        assert!(err.contains("NAME=PATH"), "{err}");
    }
}

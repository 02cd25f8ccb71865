//! `local-cloud`: serve the local cloud, or drive a running one (instances, load balancers, routes, faults).
//!
//! Admin verbs find the cloud through `--url` (or `LOCAL_CLOUD_URL`), or through the address file that
//! `serve` writes into `--state-dir`.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;

use super::api::{Address, AddressType, CreateInstance, FaultMode, FaultSpec, Instance, LoadBalancer, Route};
use super::client::{ClientConfig, LocalCloud};
use super::data_plane::{DataPlane, DataPlaneConfig, NodeNamespace};
use super::pool::{DEFAULT_IP_POOL, IpPool};
use super::server::{LocalCloudServer, ServerConfig, url_from_state_dir};
use ipnet::Ipv4Net;

/// The local simulated cloud: serve it, or drive a running one.
#[derive(Debug, Clone, Args)]
pub struct LocalCloudCommand {
    /// The running cloud's URL, for the admin verbs.
    #[arg(long, global = true, env = "LOCAL_CLOUD_URL")]
    pub url: Option<String>,
    /// The cloud's state dir: where `serve` keeps its state, and where admin verbs find its address.
    #[arg(long, global = true)]
    pub state_dir: Option<PathBuf>,
    /// Print lists as JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub action: LocalCloudAction,
}

/// The `local-cloud` verbs.
#[derive(Debug, Clone, Subcommand)]
pub enum LocalCloudAction {
    /// Run the cloud until interrupted; prints its URL (needs --state-dir).
    Serve(ServeArgs),
    /// Create, list, shut down, start or terminate instances.
    #[command(subcommand)]
    Instance(InstanceAction),
    /// Load balancers.
    #[command(subcommand)]
    Lb(ListOnly),
    /// Routes.
    #[command(subcommand)]
    Route(ListOnly),
    /// Make cloud API calls fail or slow down.
    #[command(subcommand)]
    Fault(FaultAction),
    /// Program a cluster's load balancers and routes into its hub network namespace, following the
    /// state in --state-dir until interrupted (run it inside the hub: `nsenter --net=...`).
    DataPlane(DataPlaneArgs),
}

/// `data-plane` options.
#[derive(Debug, Clone, Args)]
pub struct DataPlaneArgs {
    /// The cluster whose load balancers and routes are programmed.
    #[arg(long)]
    pub cluster: String,
    /// The pool the cloud hands ingress IPs out of (its `serve --private-ip-pool`).
    #[arg(long)]
    pub ingress_pool: Ipv4Net,
    /// The cluster's pod range: routes inside it are the cloud's.
    #[arg(long)]
    pub cluster_cidr: Ipv4Net,
    /// A node's network namespace, NAME=PATH (e.g. node-0=/proc/1234/ns/net); repeatable.
    #[arg(long = "node")]
    pub nodes: Vec<NodeNamespace>,
    /// How often the state is read, e.g. 300ms.
    #[arg(long, default_value = "300ms", value_parser = humantime::parse_duration)]
    pub poll: std::time::Duration,
}

/// `serve` options.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// The loopback address to listen on; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Where load balancer IPs come from: a CIDR or FIRST-LAST, inside 127.0.0.0/8.
    #[arg(long, default_value = DEFAULT_IP_POOL)]
    pub ip_pool: IpPool,
    /// Instead of --ip-pool: a pool inside 10/8, 172.16/12 or 192.168/16, for a cluster whose
    /// load balancers a `data-plane` programs in the cluster's own network (real nodes).
    #[arg(long, conflicts_with = "ip_pool", value_parser = IpPool::private)]
    pub private_ip_pool: Option<IpPool>,
}

/// `instance` verbs.
#[derive(Debug, Clone, Subcommand)]
pub enum InstanceAction {
    /// Create a running instance for a node.
    Create(CreateArgs),
    /// Shut an instance down (it still exists).
    Shutdown {
        /// The instance's (node's) name.
        name: String,
    },
    /// Start a shut-down instance.
    Start {
        /// The instance's (node's) name.
        name: String,
    },
    /// Terminate an instance for good.
    Terminate {
        /// The instance's (node's) name.
        name: String,
    },
    /// List every instance, terminated ones included.
    List,
}

/// `instance create` options.
#[derive(Debug, Clone, Args)]
pub struct CreateArgs {
    /// The node name.
    #[arg(long)]
    pub name: String,
    /// The zone [cloud default: local-a].
    #[arg(long)]
    pub zone: Option<String>,
    /// The region [cloud default: local].
    #[arg(long)]
    pub region: Option<String>,
    /// The instance type [cloud default: local.small].
    #[arg(long = "type")]
    pub instance_type: Option<String>,
    /// An InternalIP address; repeatable.
    #[arg(long = "address")]
    pub addresses: Vec<String>,
    /// An ExternalIP address; repeatable.
    #[arg(long = "external-address")]
    pub external_addresses: Vec<String>,
}

/// Verbs of read-only resources.
#[derive(Debug, Clone, Subcommand)]
pub enum ListOnly {
    /// List them, across clusters.
    List,
}

/// `fault` verbs.
#[derive(Debug, Clone, Subcommand)]
pub enum FaultAction {
    /// Fail or delay the next calls of an operation.
    Inject(InjectArgs),
    /// List the active faults.
    List,
    /// Remove every fault.
    Clear,
}

/// `fault inject` options.
#[derive(Debug, Clone, Args)]
pub struct InjectArgs {
    /// The operation (e.g. instance_metadata, ensure_load_balancer, create_route), or `*` for all.
    #[arg(long)]
    pub op: String,
    /// How many calls to fault: a number, or `all` for every call until cleared.
    #[arg(long, default_value = "1", value_parser = parse_count)]
    pub count: Count,
    /// Fail the calls, or delay them.
    #[arg(long, value_enum, default_value_t = Mode::Fail)]
    pub mode: Mode,
    /// The HTTP status failing calls answer with.
    #[arg(long, default_value_t = 503)]
    pub status: u16,
    /// How long delayed calls wait, in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub delay_ms: u64,
}

/// A fault's count: `Some(n)` calls, or `None` for every call until cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count(pub Option<u64>);

fn parse_count(text: &str) -> Result<Count, String> {
    if text == "all" {
        return Ok(Count(None));
    }
    text.parse().map(|count| Count(Some(count))).map_err(|_| format!("expected a number or `all`, got {text:?}"))
}

/// `--mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Answer with an HTTP error.
    Fail,
    /// Answer late.
    Delay,
}

/// Runs a `local-cloud` command.
pub async fn run(command: LocalCloudCommand) -> anyhow::Result<()> {
    match &command.action {
        LocalCloudAction::Serve(args) => serve(&command, args).await,
        LocalCloudAction::Instance(action) => instance(&command, action).await,
        LocalCloudAction::Lb(ListOnly::List) => {
            let balancers = admin_client(&command)?.list_load_balancers().await?;
            print_list(command.json, &balancers, load_balancer_row)
        }
        LocalCloudAction::Route(ListOnly::List) => {
            let routes = admin_client(&command)?.list_all_routes().await?;
            print_list(command.json, &routes, route_row)
        }
        LocalCloudAction::Fault(action) => fault(&command, action).await,
        LocalCloudAction::DataPlane(args) => data_plane(&command, args).await,
    }
}

async fn data_plane(command: &LocalCloudCommand, args: &DataPlaneArgs) -> anyhow::Result<()> {
    let Some(state_dir) = command.state_dir.clone() else { bail!("data-plane needs --state-dir") };
    let config = DataPlaneConfig {
        state_dir,
        cluster: args.cluster.clone(),
        ingress_pool: args.ingress_pool,
        cluster_cidr: args.cluster_cidr,
        nodes: args.nodes.clone(),
        poll: args.poll,
    };
    let plane = DataPlane::start(config).context("cannot start the data plane")?;
    tracing::info!(cluster = %args.cluster, pool = %args.ingress_pool, "data plane running");
    plane.run_until(async { shutdown_signal().await.unwrap_or_default() }).await;
    Ok(())
}

async fn serve(command: &LocalCloudCommand, args: &ServeArgs) -> anyhow::Result<()> {
    let Some(state_dir) = command.state_dir.clone() else { bail!("serve needs --state-dir") };
    let ip_pool = args.private_ip_pool.unwrap_or(args.ip_pool);
    let config = ServerConfig { state_dir, listen: args.listen, ip_pool };
    let server = LocalCloudServer::start(config).await.context("cannot start the local cloud")?;
    println!("{}", server.url());
    shutdown_signal().await?;
    server.shutdown().await.context("the local cloud stopped with an error")
}

async fn shutdown_signal() -> anyhow::Result<()> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        interrupted = tokio::signal::ctrl_c() => interrupted?,
        _ = terminate.recv() => {}
    }
    Ok(())
}

fn admin_client(command: &LocalCloudCommand) -> anyhow::Result<LocalCloud> {
    let url = match (&command.url, &command.state_dir) {
        (Some(url), _) => url.clone(),
        (None, Some(state_dir)) => url_from_state_dir(state_dir)?,
        (None, None) => bail!("say where the cloud is: --url URL (or LOCAL_CLOUD_URL) or --state-dir DIR"),
    };
    Ok(LocalCloud::new(ClientConfig::new(url))?)
}

async fn instance(command: &LocalCloudCommand, action: &InstanceAction) -> anyhow::Result<()> {
    let cloud = admin_client(command)?;
    let instance = match action {
        InstanceAction::Create(args) => cloud.create_instance(&create_request(args)).await?,
        InstanceAction::Shutdown { name } => cloud.shutdown_instance(name).await?,
        InstanceAction::Start { name } => cloud.start_instance(name).await?,
        InstanceAction::Terminate { name } => cloud.terminate_instance(name).await?,
        InstanceAction::List => return print_list(command.json, &cloud.list_instances().await?, instance_row),
    };
    print_list(command.json, &[instance], instance_row)
}

/// InternalIPs, then ExternalIPs, then the name as Hostname.
fn create_request(args: &CreateArgs) -> CreateInstance {
    let internal = args.addresses.iter().map(|ip| (AddressType::InternalIP, ip));
    let external = args.external_addresses.iter().map(|ip| (AddressType::ExternalIP, ip));
    let mut addresses: Vec<Address> =
        internal.chain(external).map(|(kind, ip)| Address { kind, address: ip.clone() }).collect();
    addresses.push(Address { kind: AddressType::Hostname, address: args.name.clone() });
    CreateInstance {
        name: args.name.clone(),
        instance_type: args.instance_type.clone(),
        zone: args.zone.clone(),
        region: args.region.clone(),
        addresses,
    }
}

async fn fault(command: &LocalCloudCommand, action: &FaultAction) -> anyhow::Result<()> {
    let cloud = admin_client(command)?;
    match action {
        FaultAction::Inject(args) => {
            let fault = cloud.inject_fault(&fault_spec(args)).await?;
            println!("{}", serde_json::to_string_pretty(&fault)?);
        }
        FaultAction::List => println!("{}", serde_json::to_string_pretty(&cloud.list_faults().await?)?),
        FaultAction::Clear => println!("cleared {} faults", cloud.clear_faults().await?),
    }
    Ok(())
}

fn fault_spec(args: &InjectArgs) -> FaultSpec {
    let mode = match args.mode {
        Mode::Fail => FaultMode::Fail,
        Mode::Delay => FaultMode::Delay,
    };
    FaultSpec { operation: args.op.clone(), count: args.count.0, mode, status: args.status, delay_ms: args.delay_ms }
}

fn print_list<T: Serialize>(json: bool, items: &[T], row: fn(&T) -> Vec<String>) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(items)?);
    } else {
        items.iter().for_each(|item| println!("{}", row(item).join("\t")));
    }
    Ok(())
}

fn instance_row(instance: &Instance) -> Vec<String> {
    let addresses: Vec<_> = instance.addresses.iter().map(|address| address.address.as_str()).collect();
    let state = serde_json::to_value(instance.state).ok().and_then(|v| v.as_str().map(str::to_owned));
    vec![
        instance.id.clone(),
        instance.name.clone(),
        state.unwrap_or_default(),
        instance.instance_type.clone(),
        format!("{}/{}", instance.region, instance.zone),
        addresses.join(","),
    ]
}

/// Name, service, ingress IPs, ports, backends, source ranges.
fn load_balancer_row(balancer: &LoadBalancer) -> Vec<String> {
    let ports: Vec<_> = balancer.ports.iter().map(|port| format!("{}/{}", port.port, port.protocol)).collect();
    vec![
        format!("{}/{}", balancer.cluster, balancer.name),
        balancer.service.clone(),
        balancer.ingress_ips.join(","),
        ports.join(","),
        balancer.backends.join(","),
        balancer.source_ranges.join(","),
    ]
}

fn route_row(route: &Route) -> Vec<String> {
    let blackhole = if route.blackhole { "blackhole" } else { "active" };
    vec![
        format!("{}/{}", route.cluster, route.name),
        route.destination_cidr.clone(),
        route.target_node.clone(),
        blackhole.to_owned(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        command: LocalCloudCommand,
    }

    fn parse(args: &[&str]) -> LocalCloudCommand {
        Cli::try_parse_from(std::iter::once("local-cloud").chain(args.iter().copied())).unwrap().command
    }

    #[test]
    fn serve_parses_listen_address_pool_and_state_dir() {
        let command =
            parse(&["serve", "--state-dir", "/tmp/x", "--listen", "127.0.0.1:0", "--ip-pool", "127.9.0.0/24"]);

        assert_eq!(command.state_dir, Some(PathBuf::from("/tmp/x")));
        let LocalCloudAction::Serve(args) = command.action else { panic!("not serve: {command:?}") };
        assert_eq!(args.ip_pool.to_string(), "127.9.0.1-127.9.0.254");
    }

    #[test]
    fn serve_refuses_a_pool_outside_loopback() {
        let args = ["local-cloud", "serve", "--state-dir", "/tmp/x", "--ip-pool", "192.168.0.0/24"];

        assert!(Cli::try_parse_from(args).unwrap_err().to_string().contains("127.0.0.0/8"));
    }

    #[test]
    fn serve_takes_a_private_pool_instead_of_a_loopback_one() {
        let command = parse(&["serve", "--state-dir", "/tmp/x", "--private-ip-pool", "10.250.1.0/24"]);
        let LocalCloudAction::Serve(args) = command.action else { panic!("not serve: {command:?}") };
        assert_eq!(args.private_ip_pool.map(|p| p.to_string()), Some("10.250.1.1-10.250.1.254".into()));

        let public = ["local-cloud", "serve", "--state-dir", "/x", "--private-ip-pool", "8.8.8.0/24"];
        assert!(Cli::try_parse_from(public).unwrap_err().to_string().contains("192.168.0.0/16"));
        let both = ["local-cloud", "serve", "--ip-pool", "127.9.0.0/24", "--private-ip-pool", "10.250.1.0/24"];
        assert!(Cli::try_parse_from(both).is_err(), "one pool or the other");
    }

    #[test]
    fn data_plane_takes_its_cluster_pool_and_nodes() {
        let command = parse(&[
            "--state-dir",
            "/s",
            "data-plane",
            "--cluster",
            "c",
            "--ingress-pool",
            "10.250.1.0/24",
            "--cluster-cidr",
            "10.244.0.0/16",
            "--node",
            "c-0=/proc/5/ns/net",
            "--node",
            "c-1=/proc/6/ns/net",
        ]);
        let LocalCloudAction::DataPlane(args) = command.action else { panic!("{command:?}") };
        assert_eq!(args.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["c-0", "c-1"]);
        assert_eq!(args.poll, std::time::Duration::from_millis(300));
        let bad = ["local-cloud", "data-plane", "--cluster", "c", "--ingress-pool", "10.250.1.0/24"];
        assert!(Cli::try_parse_from(bad.iter().chain(&["--cluster-cidr", "10.244.0.0/16", "--node", "x"])).is_err());
    }

    #[test]
    fn fault_inject_takes_all_for_until_cleared() {
        let command = parse(&["fault", "inject", "--op", "*", "--count", "all", "--mode", "delay", "--delay-ms", "9"]);

        let LocalCloudAction::Fault(FaultAction::Inject(args)) = command.action else { panic!("{command:?}") };
        let spec = fault_spec(&args);
        assert_eq!((spec.count, spec.mode, spec.delay_ms), (None, FaultMode::Delay, 9));
    }

    #[test]
    fn instance_create_lists_internal_then_external_addresses_then_hostname() {
        let command = parse(&[
            "instance",
            "create",
            "--url",
            "http://127.0.0.1:1",
            "--name",
            "n1",
            "--address",
            "127.0.1.1",
            "--external-address",
            "127.0.2.1",
            "--zone",
            "z",
        ]);

        let LocalCloudAction::Instance(InstanceAction::Create(args)) = command.action else { panic!("{command:?}") };
        let kinds: Vec<_> = create_request(&args).addresses.iter().map(|a| (a.kind, a.address.clone())).collect();
        assert_eq!(
            kinds,
            vec![
                (AddressType::InternalIP, "127.0.1.1".into()),
                (AddressType::ExternalIP, "127.0.2.1".into()),
                (AddressType::Hostname, "n1".into())
            ]
        );
        assert_eq!(command.url.as_deref(), Some("http://127.0.0.1:1"));
    }

    #[test]
    fn load_balancer_rows_end_with_the_source_ranges() {
        let balancer = LoadBalancer {
            cluster: "c".into(),
            name: "a1".into(),
            service: "default/web".into(),
            ingress_ips: vec!["127.200.0.1".into()],
            ports: vec![],
            backends: vec!["n1".into(), "n2".into()],
            source_ranges: vec!["10.0.0.0/8".into(), "192.168.0.0/16".into()],
            health_check_node_port: 0,
            session_affinity: Default::default(),
        };

        let row = load_balancer_row(&balancer);

        assert_eq!(row.len(), 6);
        assert_eq!((row[4].as_str(), row[5].as_str()), ("n1,n2", "10.0.0.0/8,192.168.0.0/16"));
    }

    #[tokio::test]
    async fn admin_verbs_without_a_cloud_location_say_how_to_give_one() {
        let command =
            LocalCloudCommand { url: None, state_dir: None, json: false, action: LocalCloudAction::Lb(ListOnly::List) };

        let error = run(command).await.unwrap_err().to_string();

        assert!(error.contains("--url") && error.contains("--state-dir"), "{error}");
    }
}

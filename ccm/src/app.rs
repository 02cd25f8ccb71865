//! A cloud-controller-manager's command line and life, as upstream's `k8s.io/cloud-provider` app
//! shapes it: upstream's flags ([`Options`]), leader election on the Lease
//! `kube-system/cloud-controller-manager`, the controllers, and `/healthz`, `/readyz`, `/metrics`
//! on `--secure-port`. The cloud comes from the caller: a provider's `main` passes its name and
//! how to make it from `--cloud-config` to [`run`], as upstream's `NewCloudControllerManagerCommand`
//! takes a cloud initializer (`reference-ccm`'s `main` wires the local cloud this way).
//!
//! One deviation from upstream: the port serves plain HTTP (upstream serves HTTPS with a
//! self-signed certificate); the paths and their meaning are the same.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use clap::{ArgAction, Parser};
use ipnet::IpNet;

use crate::bugs::{Bug, Bugs};
use crate::cloud::CloudProvider;
use crate::controllers::{self, Context, Settings};
use crate::metrics::Metrics;

#[derive(Debug, Parser)]
#[command(name = "cloud-controller-manager", version, about = "A cloud-controller-manager")]
pub struct Options {
    /// Path to a kubeconfig; in-cluster configuration when absent.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The cloud provider to run against (the one the binary was built with).
    #[arg(long)]
    pub cloud_provider: Option<String>,
    /// The cloud provider's configuration file.
    #[arg(long)]
    pub cloud_config: Option<PathBuf>,
    /// The instance prefix for the cluster, passed to the cloud provider.
    #[arg(long, default_value = "kubernetes")]
    pub cluster_name: String,
    /// Controllers to run: `*` for all, `name` to enable, `-name` to disable
    /// (cloud-node, cloud-node-lifecycle, service, route).
    #[arg(long, value_delimiter = ',', default_value = "*")]
    pub controllers: Vec<String>,
    /// Elect a leader through a Lease before running the controllers.
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    pub leader_elect: bool,
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    pub leader_elect_lease_duration: Duration,
    #[arg(long, default_value = "kube-system")]
    pub leader_elect_resource_namespace: String,
    #[arg(long, default_value = "cloud-controller-manager")]
    pub leader_elect_resource_name: String,
    /// Port for /healthz, /readyz and /metrics; 0 disables it.
    #[arg(long, default_value_t = 10258)]
    pub secure_port: u16,
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub node_monitor_period: Duration,
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    pub node_status_update_frequency: Duration,
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub route_reconciliation_period: Duration,
    /// CIDR range of pods in the cluster; routes are made only inside it.
    #[arg(long)]
    pub cluster_cidr: Option<IpNet>,
    /// Whether node pod CIDRs are allocated by the cluster (the route controller needs it).
    #[arg(long, default_value_t = false, action = ArgAction::Set)]
    pub allocate_node_cidrs: bool,
    /// Whether the route controller configures cloud routes.
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    pub configure_cloud_routes: bool,
    #[arg(long, default_value_t = 1)]
    pub concurrent_service_syncs: u16,
    /// Deliberate bugs to run with, comma separated; hidden. They exist only so tests can prove the
    /// cloud-e2e suite catches a broken CCM.
    #[arg(long, hide = true, value_enum, value_delimiter = ',')]
    pub testing_bugs: Vec<Bug>,
}

/// Which controllers `--controllers` enables, upstream's way: `-name` beats `name` beats `*`.
pub fn enabled_controllers(flags: &[String]) -> Result<Vec<&'static str>> {
    for flag in flags {
        let name = flag.trim_start_matches('-');
        if name != "*" && !controllers::ALL.contains(&name) {
            bail!("--controllers: unknown controller '{name}' (known: {})", controllers::ALL.join(", "));
        }
    }
    let on = |name: &str| {
        if flags.iter().any(|f| f.strip_prefix('-') == Some(name)) {
            false
        } else {
            flags.iter().any(|f| f == name || f == "*")
        }
    };
    Ok(controllers::ALL.iter().copied().filter(|name| on(name)).collect())
}

/// Runs the CCM for the cloud `provider` names: `initialize` makes it from `--cloud-config` once
/// the flags name that provider (`--cloud-provider`).
pub async fn run<F>(options: Options, provider: &str, initialize: F) -> Result<()>
where
    F: FnOnce(Option<&Path>) -> Result<Arc<dyn CloudProvider>>,
{
    let mut enabled = enabled_controllers(&options.controllers)?;
    if !(options.allocate_node_cidrs && options.configure_cloud_routes) {
        // Upstream runs the route controller only when both are set.
        enabled.retain(|c| *c != controllers::ROUTE);
    }
    let bugs: Bugs = options.testing_bugs.iter().copied().collect();
    if !bugs.is_empty() {
        let names: Vec<&str> = bugs.iter().map(|bug| bug.name()).collect();
        tracing::warn!(bugs = %names.join(","), "running with deliberate testing bugs: this CCM is broken on purpose");
    }
    let cloud = cloud_provider(&options, provider, initialize)?;
    let client = client(&options).await?;
    let metrics = Arc::new(Metrics::default());
    let settings = Settings {
        cluster_name: options.cluster_name.clone(),
        cluster_cidr: options.cluster_cidr,
        node_monitor_period: options.node_monitor_period,
        node_status_update_frequency: options.node_status_update_frequency,
        route_reconciliation_period: options.route_reconciliation_period,
        concurrent_service_syncs: options.concurrent_service_syncs.max(1),
        bugs,
    };
    let ctx = Arc::new(Context::new(client.clone(), cloud, settings, metrics));
    let leading = Arc::new(AtomicBool::new(!options.leader_elect));
    if options.secure_port != 0 {
        let address = SocketAddr::new(options.bind_address, options.secure_port);
        serve(address, ctx.clone(), leading.clone()).await?;
    }
    if options.leader_elect {
        return lead_then_run(&options, client, ctx, leading, enabled).await;
    }
    run_controllers(ctx, enabled).await;
    Ok(())
}

fn cloud_provider<F>(options: &Options, provider: &str, initialize: F) -> Result<Arc<dyn CloudProvider>>
where
    F: FnOnce(Option<&Path>) -> Result<Arc<dyn CloudProvider>>,
{
    match options.cloud_provider.as_deref() {
        Some(name) if name == provider => initialize(options.cloud_config.as_deref()),
        Some(other) => bail!("unknown --cloud-provider '{other}': this CCM knows '{provider}'"),
        None => bail!("--cloud-provider is required (this CCM knows '{provider}')"),
    }
}

async fn client(options: &Options) -> Result<kube::Client> {
    let config = match &options.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading --kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .with_context(|| format!("loading --kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer().await.context("no --kubeconfig and no in-cluster configuration")?,
    };
    kube::Client::try_from(config).context("building the Kubernetes client")
}

async fn run_controllers(ctx: Arc<Context>, enabled: Vec<&'static str>) {
    tracing::info!(controllers = ?enabled, "starting controllers");
    let mut tasks = tokio::task::JoinSet::new();
    for name in enabled {
        let ctx = ctx.clone();
        match name {
            controllers::CLOUD_NODE => tasks.spawn(controllers::node::run(ctx)),
            controllers::CLOUD_NODE_LIFECYCLE => tasks.spawn(controllers::node_lifecycle::run(ctx)),
            controllers::SERVICE => tasks.spawn(controllers::service::run(ctx)),
            _ => tasks.spawn(controllers::route::run(ctx)),
        };
    }
    while tasks.join_next().await.is_some() {}
}

async fn lead_then_run(
    options: &Options,
    client: kube::Client,
    ctx: Arc<Context>,
    leading: Arc<AtomicBool>,
    enabled: Vec<&'static str>,
) -> Result<()> {
    let host = controllers::hostname().unwrap_or_else(|| "ccm".into());
    let identity = format!("{host}_{}", std::process::id());
    let lease_seconds = options.leader_elect_lease_duration.as_secs().max(2);
    let manager = kube_lease_manager::LeaseManagerBuilder::new(client, &options.leader_elect_resource_name)
        .with_namespace(&options.leader_elect_resource_namespace)
        .with_identity(&identity)
        .with_duration(lease_seconds)
        .with_grace((lease_seconds / 3).max(1))
        .build()
        .await
        .context("setting up leader election")?;
    let (mut is_leader, _election) = manager.watch().await;
    tracing::info!(%identity, lease = %options.leader_elect_resource_name, "waiting to become the leader");
    while !*is_leader.borrow_and_update() {
        is_leader.changed().await.context("leader election stopped")?;
    }
    tracing::info!(%identity, "became the leader");
    announce_leader(&ctx.client, options, &identity).await;
    leading.store(true, Ordering::SeqCst);
    let controllers = tokio::spawn(run_controllers(ctx, enabled));
    while *is_leader.borrow_and_update() {
        is_leader.changed().await.context("leader election stopped")?;
    }
    controllers.abort();
    // Upstream exits when it loses the lease, so that a stale leader never acts.
    bail!("lost the leader lease {}; exiting", options.leader_elect_resource_name)
}

/// The event upstream's leader election records on its Lease: `LeaderElection`, "<identity>
/// became leader", reported by `cloud-controller-manager`. A failure is logged, never fatal.
async fn announce_leader(client: &kube::Client, options: &Options, identity: &str) {
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::Resource;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let leases: kube::Api<Lease> = kube::Api::namespaced(client.clone(), &options.leader_elect_resource_namespace);
    let lease = match leases.get(&options.leader_elect_resource_name).await {
        Ok(lease) => lease,
        Err(error) => return tracing::warn!(%error, "could not read the leader Lease to record LeaderElection"),
    };
    let reporter = Reporter { controller: "cloud-controller-manager".into(), instance: None };
    let event = Event {
        type_: EventType::Normal,
        reason: "LeaderElection".into(),
        note: Some(format!("{identity} became leader")),
        action: "LeaderElection".into(),
        secondary: None,
    };
    if let Err(error) = Recorder::new(client.clone(), reporter).publish(&event, &lease.object_ref(&())).await {
        tracing::warn!(%error, "could not publish the LeaderElection event");
    }
}

#[derive(Clone)]
struct ServerState {
    ctx: Arc<Context>,
    leading: Arc<AtomicBool>,
}

async fn serve(address: SocketAddr, ctx: Arc<Context>, leading: Arc<AtomicBool>) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("--secure-port: cannot listen on {address}"))?;
    tracing::info!(%address, "serving /healthz, /readyz and /metrics");
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(ServerState { ctx, leading });
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(())
}

/// Kubernetes' health format: one `[+]name ok` / `[-]name failed` line per check.
fn report(checks: &[(&str, bool)]) -> (StatusCode, String) {
    let healthy = checks.iter().all(|(_, ok)| *ok);
    let mut body: String = checks
        .iter()
        .map(|(name, ok)| format!("[{}]{name} {}\n", if *ok { '+' } else { '-' }, if *ok { "ok" } else { "failed" }))
        .collect();
    body.push_str(if healthy { "healthz check passed\n" } else { "healthz check failed\n" });
    (if healthy { StatusCode::OK } else { StatusCode::INTERNAL_SERVER_ERROR }, body)
}

async fn healthz(State(state): State<ServerState>) -> (StatusCode, String) {
    report(&state.ctx.health.checks())
}

async fn readyz(State(state): State<ServerState>) -> (StatusCode, String) {
    let mut checks = state.ctx.health.checks();
    // A standby replica is ready to take over; the leader is ready once its controllers run.
    let leading = state.leading.load(Ordering::SeqCst);
    checks.push(("leader-election", !leading || !checks.is_empty()));
    report(&checks)
}

async fn metrics(State(state): State<ServerState>) -> String {
    state.ctx.metrics.encode()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn controllers_flag_follows_upstream_precedence() {
        assert_eq!(enabled_controllers(&flags(&["*"])).unwrap(), controllers::ALL);
        assert_eq!(
            enabled_controllers(&flags(&["*", "-route"])).unwrap(),
            ["cloud-node", "cloud-node-lifecycle", "service"]
        );
        assert_eq!(enabled_controllers(&flags(&["service"])).unwrap(), ["service"]);
        assert_eq!(enabled_controllers(&flags(&["service", "-service"])).unwrap(), Vec::<&str>::new());
        let err = enabled_controllers(&flags(&["*", "nodeipam"])).unwrap_err().to_string();
        assert!(err.contains("unknown controller 'nodeipam'"), "{err}");
    }

    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        Options::try_parse_from(std::iter::once("reference-ccm").chain(args.iter().copied()))
    }

    #[test]
    fn testing_bugs_parse_as_a_comma_separated_list() {
        let options = parse(&["--testing-bugs", "keep-shutdown-taint,leak-load-balancers"]).unwrap();
        assert_eq!(options.testing_bugs, [Bug::KeepShutdownTaint, Bug::LeakLoadBalancers]);
        assert!(parse(&[]).unwrap().testing_bugs.is_empty());
        let error = parse(&["--testing-bugs", "keep-shutdown-taint,lose-routes"]).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::InvalidValue, "{error}");
        assert!(error.to_string().contains("lose-routes"), "{error}");
    }

    #[test]
    fn testing_bugs_stay_out_of_the_help() {
        use clap::CommandFactory;
        let mut command = Options::command();
        let help = format!("{}\n{}", command.render_help(), command.render_long_help());
        assert!(help.contains("--concurrent-service-syncs"), "{help}");
        assert!(!help.contains("testing-bugs") && !help.contains("keep-shutdown-taint"), "{help}");
    }

    #[test]
    fn health_report_lists_each_check_and_fails_if_any_fails() {
        let (status, body) = report(&[("route", true), ("service", false)]);
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(body, "[+]route ok\n[-]service failed\nhealthz check failed\n");
        assert_eq!(report(&[("route", true)]).0, StatusCode::OK);
    }
}

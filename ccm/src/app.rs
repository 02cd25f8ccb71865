//! A cloud-controller-manager's command line and life, as upstream's `k8s.io/cloud-provider` app
//! shapes it: upstream's flags ([`Options`]), leader election on the Lease
//! `kube-system/cloud-controller-manager`, the controllers, and `/healthz`, `/readyz`, `/metrics`
//! on `--secure-port`. The cloud comes from the caller: a provider's `main` passes its name and
//! how to make it from `--cloud-config` to [`run`], as upstream's `NewCloudControllerManagerCommand`
//! takes a cloud initializer (`reference-ccm`'s `main` wires the local cloud this way). The
//! deliberate `--testing-bugs` are wired in here ([`crate::bugs`]), never inside a controller.
//!
//! SIGTERM or SIGINT stops the CCM: the controllers finish what they are doing and return, the
//! leader steps down (releasing the Lease), the health server closes, and [`run`] returns `Ok`. A
//! second signal exits at once.
//!
//! One deviation from upstream: the port serves plain HTTP (upstream serves HTTPS with a
//! self-signed certificate); the paths and their meaning are the same.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use clap::{ArgAction, Parser};
use ipnet::IpNet;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::watch;

/// What a cloud initializer returns when it cannot make its cloud: any error (`?` converts one,
/// and `"a message".into()` makes one), so a provider's `main` needs no error crate of its own.
pub type InitError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why the CCM could not start, or stopped on its own.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("--controllers: unknown controller '{name}' (known: {known})")]
    UnknownController { name: String, known: String },
    #[error("unknown --cloud-provider '{given}': this CCM knows '{known}'")]
    UnknownCloudProvider { given: String, known: String },
    #[error("--cloud-provider is required (this CCM knows '{0}')")]
    NoCloudProvider(String),
    /// The provider's initializer could not make its cloud from `--cloud-config` (shown with
    /// every cause it gives).
    #[error("{}", causes(.0.as_ref()))]
    Initialize(InitError),
    #[error("{what} --kubeconfig {path}: {source}")]
    Kubeconfig { what: &'static str, path: PathBuf, source: kube::config::KubeconfigError },
    #[error("no --kubeconfig and no in-cluster configuration: {0}")]
    NoKubeconfig(#[from] kube::config::InferConfigError),
    #[error("building the Kubernetes client: {0}")]
    Client(#[from] kube::Error),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("setting up leader election: {0}")]
    Election(#[from] kube_lease_manager::LeaseManagerError),
    #[error("leader election stopped")]
    ElectionStopped,
    /// Upstream exits when it loses the lease, so that a stale leader never acts.
    #[error("lost the leader lease {0}; exiting")]
    LostLease(String),
}

type Result<T, E = AppError> = std::result::Result<T, E>;

/// `error` and each of its sources, as `error: source: source`.
fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(source) = next {
        text.push_str(&format!(": {source}"));
        next = source.source();
    }
    text
}

fn io_error(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> AppError {
    let what = what.into();
    move |source| AppError::Io { what, source }
}
use tokio::task::JoinHandle;

use crate::bugs::{self, Bug, Bugs};
use crate::cloud::CloudProvider;
use crate::controllers::node::CloudNode;
use crate::controllers::node_lifecycle::{CloudNodeLifecycle, Decide};
use crate::controllers::route::RouteController;
use crate::controllers::service::ServiceController;
use crate::controllers::{self, Common, Health};
use crate::hostname_ingress;
use crate::metrics::Metrics;
use crate::shutdown::{self, Shutdown, Stop};

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
    /// Give each load balancer's ingress as the host name `lb-<a-b-c-d>.DOMAIN` instead of its IP,
    /// as clouds with DNS-named load balancers do; hidden. For tests of clients of such clouds.
    #[arg(long, hide = true, value_name = "DOMAIN")]
    pub testing_hostname_ingress: Option<String>,
}

/// Which controllers `--controllers` enables, upstream's way: `-name` beats `name` beats `*`.
pub fn enabled_controllers(flags: &[String]) -> Result<Vec<&'static str>> {
    for flag in flags {
        let name = flag.trim_start_matches('-');
        if name != "*" && !controllers::ALL.contains(&name) {
            let (name, known) = (name.to_owned(), controllers::ALL.join(", "));
            return Err(AppError::UnknownController { name, known });
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
/// the flags name that provider (`--cloud-provider`). Returns `Ok` once a SIGTERM or SIGINT has
/// stopped it.
pub async fn run<F>(options: Options, provider: &str, initialize: F) -> Result<()>
where
    F: FnOnce(Option<&Path>) -> Result<Arc<dyn CloudProvider>, InitError>,
{
    let signals = Signals::catch()?;
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
    let cloud = bugs::cloud_with(&bugs, cloud_provider(&options, provider, initialize)?);
    let cloud = hostname_ingress::cloud_with(options.testing_hostname_ingress.as_deref(), cloud);
    let client = client(&options).await?;
    let (stop, shutdown) = shutdown::channel();
    tokio::spawn(signals.stop_on_first(stop));
    let common = Common { client: client.clone(), cloud, metrics: Arc::default(), health: Health::default() };
    let shared = Shared { common, lifecycle_decision: bugs::lifecycle_decision(&bugs) };
    let leading = Arc::new(AtomicBool::new(!options.leader_elect));
    let server = match options.secure_port {
        0 => None,
        port => Some(serve(SocketAddr::new(options.bind_address, port), &shared, leading.clone(), &shutdown).await?),
    };
    if options.leader_elect {
        lead_then_run(&options, &shared, leading, &enabled, &shutdown).await?;
    } else {
        run_controllers(&options, &shared, &enabled, shutdown.clone()).await;
    }
    // Without a stop (no controllers enabled) nothing would end the server: return without it.
    if let Some(server) = server.filter(|_| shutdown.is_requested()) {
        let _ = server.await;
    }
    Ok(())
}

/// SIGTERM and SIGINT, caught from the start so that either stops the CCM rather than killing it.
struct Signals {
    terminate: Signal,
    interrupt: Signal,
}

impl Signals {
    fn catch() -> Result<Self> {
        let terminate = signal(SignalKind::terminate()).map_err(io_error("catching SIGTERM"))?;
        let interrupt = signal(SignalKind::interrupt()).map_err(io_error("catching SIGINT"))?;
        Ok(Signals { terminate, interrupt })
    }

    /// Requests `stop` on the first signal; a second one exits at once.
    async fn stop_on_first(mut self, stop: Stop) {
        let signal = self.next().await;
        // Requested before logging: a log line that cannot be written must not keep the CCM running.
        stop.request();
        tracing::info!("received {signal}, stopping controllers");
        let _ = self.next().await;
        std::process::exit(1);
    }

    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.interrupt.recv() => "SIGINT",
        }
    }
}

/// What the controllers are built from besides the flags.
#[derive(Clone)]
struct Shared {
    /// What every controller gets; its cloud as `--testing-bugs` decorates it.
    common: Common,
    /// The decision cloud-node-lifecycle acts on, as `--testing-bugs` sets it.
    lifecycle_decision: Decide,
}

fn cloud_provider<F>(options: &Options, provider: &str, initialize: F) -> Result<Arc<dyn CloudProvider>>
where
    F: FnOnce(Option<&Path>) -> Result<Arc<dyn CloudProvider>, InitError>,
{
    match options.cloud_provider.as_deref() {
        Some(name) if name == provider => initialize(options.cloud_config.as_deref()).map_err(AppError::Initialize),
        Some(other) => Err(AppError::UnknownCloudProvider { given: other.to_owned(), known: provider.to_owned() }),
        None => Err(AppError::NoCloudProvider(provider.to_owned())),
    }
}

async fn client(options: &Options) -> Result<kube::Client> {
    let config = match &options.kubeconfig {
        Some(path) => {
            let failed = |what| move |source| AppError::Kubeconfig { what, path: path.clone(), source };
            let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(failed("reading"))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.map_err(failed("loading"))?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

/// Builds the `enabled` controllers and runs them until `shutdown` has stopped them all.
async fn run_controllers(options: &Options, shared: &Shared, enabled: &[&'static str], shutdown: Shutdown) {
    tracing::info!(controllers = ?enabled, "starting controllers");
    let mut tasks = tokio::task::JoinSet::new();
    for &name in enabled {
        let Shared { common, lifecycle_decision } = shared.clone();
        let shutdown = shutdown.clone();
        match name {
            controllers::CLOUD_NODE => {
                let frequency = options.node_status_update_frequency;
                tasks.spawn(Arc::new(CloudNode::new(common, frequency)).run(shutdown))
            }
            controllers::CLOUD_NODE_LIFECYCLE => {
                let lifecycle = CloudNodeLifecycle::new(common, options.node_monitor_period);
                tasks.spawn(lifecycle.deciding_with(lifecycle_decision).run(shutdown))
            }
            controllers::SERVICE => {
                let (cluster, syncs) = (options.cluster_name.clone(), options.concurrent_service_syncs);
                tasks.spawn(Arc::new(ServiceController::new(common, cluster, syncs)).run(shutdown))
            }
            _ => {
                let (cluster, cidr, period) =
                    (options.cluster_name.clone(), options.cluster_cidr, options.route_reconciliation_period);
                tasks.spawn(RouteController::new(common, cluster, cidr, period).run(shutdown))
            }
        };
    }
    while tasks.join_next().await.is_some() {}
    tracing::info!("controllers stopped");
}

/// Runs the controllers while this replica leads; returns once a stop has stopped them (or
/// before it led), stepping down. Losing the lease is an error.
async fn lead_then_run(
    options: &Options,
    shared: &Shared,
    leading: Arc<AtomicBool>,
    enabled: &[&'static str],
    shutdown: &Shutdown,
) -> Result<()> {
    let host = controllers::hostname().unwrap_or_else(|| "ccm".into());
    let identity = format!("{host}_{}", std::process::id());
    let (mut is_leader, election) = join_election(options, &shared.common.client, &identity).await?;
    tracing::info!(%identity, lease = %options.leader_elect_resource_name, "waiting to become the leader");
    let elected = tokio::select! {
        elected = until_leading(&mut is_leader, true) => Some(elected),
        () = shutdown.requested() => None,
    };
    match elected {
        None => return step_down(is_leader, election).await,
        Some(elected) => elected?,
    }
    tracing::info!(%identity, "became the leader");
    announce_leader(&shared.common.client, options, &identity).await;
    leading.store(true, Ordering::SeqCst);
    // Stopping means both: the stop requested and the controllers returned (with none enabled,
    // the leader keeps its lease until then).
    let stopped =
        async { tokio::join!(run_controllers(options, shared, enabled, shutdown.clone()), shutdown.requested()) };
    let lost = tokio::select! {
        lost = until_leading(&mut is_leader, false) => Some(lost),
        _ = stopped => None,
    };
    match lost {
        None => step_down(is_leader, election).await,
        Some(lost) => {
            lost?;
            // Upstream exits when it loses the lease, so that a stale leader never acts.
            Err(AppError::LostLease(options.leader_elect_resource_name.clone()))
        }
    }
}

/// The leader election's task, giving its manager back once it has left the election.
type Election = JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>;

/// Stands in the election for the Lease `--leader-elect-resource-name`: whether this replica leads,
/// and the election's task.
async fn join_election(
    options: &Options,
    client: &kube::Client,
    identity: &str,
) -> Result<(watch::Receiver<bool>, Election)> {
    let lease_seconds = options.leader_elect_lease_duration.as_secs().max(2);
    let manager = kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &options.leader_elect_resource_name)
        .with_namespace(&options.leader_elect_resource_namespace)
        .with_identity(identity)
        .with_duration(lease_seconds)
        .with_grace((lease_seconds / 3).max(1))
        .build()
        .await?;
    Ok(manager.watch().await)
}

/// Waits until the election says this replica is (`true`) or is no longer (`false`) the leader.
async fn until_leading(is_leader: &mut watch::Receiver<bool>, leading: bool) -> Result<()> {
    while *is_leader.borrow_and_update() != leading {
        is_leader.changed().await.map_err(|_| AppError::ElectionStopped)?;
    }
    Ok(())
}

/// Leaves the election, releasing the Lease if held, so a standby takes over without waiting for
/// it to expire. A failure is logged: the Lease then expires as it would after a crash.
async fn step_down(is_leader: watch::Receiver<bool>, election: Election) -> Result<()> {
    // The manager releases the Lease once nobody watches it.
    drop(is_leader);
    match tokio::time::timeout(Duration::from_secs(5), election).await {
        Ok(Ok(Ok(_))) => tracing::info!("left the leader election"),
        Ok(Ok(Err(error))) => tracing::warn!(%error, "could not release the leader lease"),
        Ok(Err(error)) => tracing::warn!(%error, "the leader election task failed"),
        Err(_) => tracing::warn!("releasing the leader lease timed out"),
    }
    Ok(())
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
    metrics: Arc<Metrics>,
    health: Health,
    leading: Arc<AtomicBool>,
}

/// Serves `/healthz`, `/readyz` and `/metrics` until `shutdown`.
async fn serve(
    address: SocketAddr,
    shared: &Shared,
    leading: Arc<AtomicBool>,
    shutdown: &Shutdown,
) -> Result<JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(io_error(format!("--secure-port: cannot listen on {address}")))?;
    tracing::info!(%address, "serving /healthz, /readyz and /metrics");
    let state = ServerState { metrics: shared.common.metrics.clone(), health: shared.common.health.clone(), leading };
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state);
    let server = axum::serve(listener, app).with_graceful_shutdown(shutdown.requested());
    Ok(tokio::spawn(async move {
        if let Err(error) = server.await {
            tracing::warn!(%error, "the health server failed");
        }
        tracing::info!("health server stopped");
    }))
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
    report(&state.health.checks())
}

async fn readyz(State(state): State<ServerState>) -> (StatusCode, String) {
    let mut checks = state.health.checks();
    // A standby replica is ready to take over; the leader is ready once its controllers run.
    let leading = state.leading.load(Ordering::SeqCst);
    checks.push(("leader-election", !leading || !checks.is_empty()));
    report(&checks)
}

async fn metrics(State(state): State<ServerState>) -> String {
    state.metrics.encode()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::fixtures::{FakeCloud, mock_client, within_5s};
    use crate::controllers::node_lifecycle::decide;

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

    /// Whether every controller has started: the watches of cloud-node and service (nodes twice,
    /// services once), and the node lists of cloud-node-lifecycle and route (a page at a time).
    fn all_started(requests: &[String]) -> bool {
        let count = |prefix: &str, param: &str| {
            requests.iter().filter(|r| r.starts_with(prefix) && r.split(['?', '&']).any(|p| p == param)).count()
        };
        count("GET /api/v1/nodes?", "watch=true") >= 2
            && count("GET /api/v1/services?", "watch=true") >= 1
            && count("GET /api/v1/nodes?", "limit=250") >= 2
    }

    #[tokio::test]
    async fn the_controllers_run_until_the_stop_is_requested_then_return() {
        let options = parse(&["--allocate-node-cidrs=true", "--cluster-cidr=10.244.0.0/16"]).unwrap();
        let (client, server) = mock_client();
        let mut requests = server.serve_nothing();
        let cloud = Arc::new(FakeCloud::default());
        let common = Common { client, cloud, metrics: Arc::default(), health: Health::default() };
        let shared = Shared { common, lifecycle_decision: decide };
        let (stop, shutdown) = shutdown::channel();
        let running = tokio::spawn(async move { run_controllers(&options, &shared, controllers::ALL, shutdown).await });
        let mut seen = Vec::new();
        within_5s(async {
            while !all_started(&seen) {
                seen.push(requests.recv().await.expect("the API server runs"));
            }
        })
        .await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!running.is_finished(), "the controllers stopped on their own: {seen:?}");

        stop.request();

        within_5s(running).await.expect("the controllers stopped without a panic");
    }
}

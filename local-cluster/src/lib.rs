//! Local clusters: a real Kubernetes control plane as processes on loopback, with real or kwok
//! nodes and an emulated cloud ([`clouds`]), built from the toolchain the `toolchain` crate installs. The
//! `local` deployer (the `harness` crate's `deploy::local`) and `harness cluster` drive it.
//!
//! etcd, kube-apiserver, kube-controller-manager (`--cloud-provider=external`), kube-scheduler and,
//! with kwok nodes, the kwok controller run as children of the harness, supervised by it rather than by kwokctl:
//! the harness then owns every PID, can stop them all on Ctrl-C, SIGTERM, a panic or a failed
//! `up` (see [`process`]), and the same code serves `harness cluster up` and the tests. Nodes are
//! registered by the harness as external-cloud-provider kubelets would ([`nodes`]); kwok keeps
//! them Ready with stages that leave `NetworkUnavailable` to the route controller (`kwok.yaml`).
//!
//! State lives in `<state dir>/clusters/<name>/`: `cluster.json` (ports, PIDs), `kubeconfig`,
//! `pki/`, `etcd/`, `logs/<component>.log`. `down` stops the processes and removes it.

pub mod clouds;
pub mod dns;
mod hold;
pub mod images;
mod launch;
mod listen_ports;
pub mod machines;
mod node_sets;
pub mod nodes;
pub mod pki;
pub mod probe;
pub mod process;
pub mod real;
pub mod upgrade;

use std::fs;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Node;
use kube::api::PostParams;
use kube::{Api, Client};
use serde::{Deserialize, Serialize};

use cli_support::progress;
use cli_support::roots::state_root;
pub use hold::{ClusterHold, hold};
use launch::Launch;
pub(crate) use listen_ports::free_ports;
use node_sets::{Joining, KwokNodes, NodeSet, RealNodes};
use process::ProcessRecord;
use toolchain::{Release, ToolchainError};

/// The cluster name when none is given.
pub const DEFAULT_NAME: &str = "harness";
/// The service range, on loopback like every other address of the cluster (see [`nodes`]).
pub const SERVICE_CIDR: &str = "127.96.0.0/16";
const SERVICE_IP: Ipv4Addr = Ipv4Addr::new(127, 96, 0, 1);
const KWOK_CONFIG: &str = include_str!("kwok.yaml");

const API_READY_TIMEOUT: Duration = Duration::from_secs(120);
const NODES_READY_TIMEOUT: Duration = Duration::from_secs(90);
const STOP_GRACE: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(transparent)]
    Toolchain(#[from] ToolchainError),
    #[error("cluster name '{0}' is not valid: use 1-40 lower-case letters, digits and '-', starting with a letter")]
    InvalidName(String),
    #[error("--nodes {0} is out of range: a local cluster has 1 to {max} nodes", max = nodes::MAX_NODES)]
    InvalidNodeCount(u32),
    #[error(
        "cluster '{name}' already exists and is running; bring it down first with `harness cluster down --name {name}`"
    )]
    AlreadyRunning { name: String },
    #[error(
        "cluster '{name}' is in use by another harness, {holder}: wait for it to end, or give this one another name (--cluster-name, or --name for `harness cluster up`)"
    )]
    InUse { name: String, holder: String },
    #[error("no cluster named '{0}'; `harness cluster list` shows the clusters there are")]
    NotFound(String),
    #[error("port {0} on 127.0.0.1 is already in use; stop whatever holds it or choose another with --api-server-port")]
    PortInUse(u16),
    #[error("{component} exited while cluster '{cluster}' was starting; the last lines of {log}:\n{tail}")]
    ComponentExited { cluster: String, component: String, log: PathBuf, tail: String },
    #[error("timed out after {waited:?} waiting for {what}; component logs are in {logs}")]
    Timeout { what: String, waited: Duration, logs: PathBuf },
    #[error("talking to the API server of cluster '{cluster}': {source}")]
    Kube { cluster: String, source: kube::Error },
    #[error(transparent)]
    Pki(#[from] pki::PkiError),
    #[error(
        "the state of cluster '{name}' in {path} is unreadable ({reason}); `harness cluster down --name {name}` removes it"
    )]
    BadState { name: String, path: PathBuf, reason: String },
    #[error(transparent)]
    Cloud(#[from] clouds::CloudError),
    #[error("no cloud named '{name}'; the clouds are: {known}")]
    UnknownCloud { name: String, known: String },
    #[error("cloud '{cloud}' has no {kind} nodes: {why}; choose another --node-kind or --cloud")]
    NodeKindNotOnCloud { cloud: &'static str, kind: &'static str, why: &'static str },
    #[error("cluster '{cluster}' has no cloud; bring it up with `harness cluster up --cloud local`")]
    NoCloud { cluster: String },
    #[error("cluster '{cluster}': its cloud ({cloud}) has no {what} the harness reads: {why}")]
    CloudLacks { cluster: String, cloud: &'static str, what: &'static str, why: &'static str },
    #[error("real nodes: {0}")]
    RealNodes(String),
    #[error("upgrading: {0}")]
    Upgrade(String),
    #[error("--conformance-image imports the image into real nodes, and kwok's nodes run no pod: add --node-kind real")]
    ConformanceImageNeedsRealNodes,
    #[error("--image imports image archives into real nodes, and kwok's nodes run no pod: add --node-kind real")]
    ImagesNeedRealNodes,
    #[error(
        "--hub-port makes a port of this machine reachable from real nodes' pods, and kwok's nodes run no pod: add --node-kind real"
    )]
    HubPortsNeedRealNodes,
    #[error(transparent)]
    Images(#[from] images::ImageError),
    #[error("{action} {path}: {source}")]
    Io { action: &'static str, path: PathBuf, source: std::io::Error },
}

type Result<T> = std::result::Result<T, ClusterError>;

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ClusterError {
    let path = path.to_path_buf();
    move |source| ClusterError::Io { action, path, source }
}

fn cluster_dir(name: &str) -> PathBuf {
    state_root().join("clusters").join(name)
}

/// The cloud's state directory of cluster `name` (the local cloud's).
pub fn cloud_state_dir(name: &str) -> PathBuf {
    cluster_dir(name).join("cloud")
}

/// What `cluster.json` records of a cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ClusterState {
    pub name: String,
    pub kubernetes_version: String,
    pub api_server: String,
    pub kubeconfig: PathBuf,
    pub nodes: Vec<String>,
    /// The cluster's cloud, tagged with its name (`{"kind": "moto", ...}`), once it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud: Option<Arc<dyn clouds::CloudState>>,
    /// The CCM's `/healthz`, `/readyz` and `/metrics` base URL, once it runs.
    #[serde(default)]
    pub ccm_url: Option<String>,
    /// The port kept free for the CCM's `--secure-port`, on a cluster with a cloud.
    #[serde(default)]
    pub ccm_port: Option<u16>,
    pub processes: Vec<ProcessRecord>,
    /// Processes of real nodes whose machine is shut down ([`machines`]), to start again as they were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stopped: Vec<machines::StoppedProcess>,
    /// Seconds since the Unix epoch.
    pub created: u64,
    /// The process the cluster goes with ([`UpOptions::owned`]): the one bringing it up, and after
    /// that a `harness run` until its Down. A cluster whose owner is gone while its processes run
    /// was left by a harness that was killed (SIGKILL, a crash): the next `up` of its name clears it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<process::Owner>,
}

impl ClusterState {
    /// A cluster about to start: nothing runs yet.
    fn new(name: &str, kubernetes_version: &str, kubeconfig: PathBuf) -> Self {
        ClusterState {
            name: name.to_owned(),
            kubernetes_version: kubernetes_version.to_owned(),
            api_server: String::new(),
            kubeconfig,
            nodes: Vec::new(),
            cloud: None,
            ccm_url: None,
            ccm_port: None,
            processes: Vec::new(),
            stopped: Vec::new(),
            created: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
            owner: Some(process::Owner::this_process()),
        }
    }

    /// What its nodes are: real ones have a hub network namespace, held by a process of its own.
    pub fn node_kind(&self) -> NodeKind {
        match self.processes.iter().any(|p| p.component == "hub") {
            true => NodeKind::Real,
            false => NodeKind::Kwok,
        }
    }

    /// Its cloud's state as that cloud's own type, when its cloud is that one.
    pub fn cloud_as<T: clouds::CloudState>(&self) -> Option<&T> {
        self.cloud.as_deref().and_then(|cloud| cloud.downcast_ref())
    }

    /// The range its nodes' pod CIDRs come from (a CCM's `--cluster-cidr`).
    pub fn cluster_cidr(&self) -> &'static str {
        match self.node_kind() {
            NodeKind::Real => real::CLUSTER_CIDR,
            NodeKind::Kwok => nodes::CLUSTER_CIDR,
        }
    }
}

/// How to bring a cluster up.
#[derive(Debug, Clone)]
pub struct UpOptions {
    pub name: String,
    pub nodes: u32,
    pub release: Release,
    /// A fixed kube-apiserver port; a free one is picked when `None`.
    pub api_server_port: Option<u16>,
    /// The cloud that runs with the cluster ([`clouds`]); its CCM is the caller's to start
    /// ([`LocalCluster::start_ccm`]) unless the cloud starts its own ([`clouds::Cloud::ccm`]).
    pub cloud: Option<Arc<dyn clouds::Cloud>>,
    /// What the nodes are: simulated by kwok, or real kubelets with containerd ([`real`]).
    pub node_kind: NodeKind,
    /// Also build upstream's conformance image and import it into the (real) nodes, for tools that
    /// run conformance in a pod (Hydrophone, Sonobuoy): [`images::conformance`].
    pub conformance_image: bool,
    /// More OCI image archives (from [`images::oci::write_archive`], such as the harness's own,
    /// [`images::harness`]) to import into every (real) node, under the names they carry.
    pub images: Vec<PathBuf>,
    /// Ports of services on this machine's loopback that the (real) nodes' pods reach at
    /// [`real::HUB_IP`]`:<port>` (as they reach kube-apiserver): a GCS emulator Prow's pod
    /// utilities upload to, say. The hub has no route out, so nothing else on the host is reachable.
    pub hub_ports: Vec<u16>,
    /// The cluster goes with this process until it is brought down (`harness run`): if the process
    /// is killed, the next `up` of the name clears what it left. Otherwise (`harness cluster up`)
    /// it is meant to outlive the process once up; while it comes up, it always goes with it.
    pub owned: bool,
}

pub use config::nodes::NodeKind;

impl UpOptions {
    pub fn new(name: impl Into<String>, release: Release) -> Self {
        UpOptions {
            name: name.into(),
            nodes: 3,
            release,
            api_server_port: None,
            cloud: None,
            node_kind: NodeKind::Kwok,
            conformance_image: false,
            images: Vec::new(),
            hub_ports: Vec::new(),
            owned: false,
        }
    }

    /// The same cluster on the cloud named `name` in [`clouds::REGISTRY`], made ready (installed)
    /// with `settings`: how `harness cluster up --cloud` and the `local` deployer both get theirs.
    pub fn on_cloud(mut self, name: &str, settings: &clouds::CloudSettings) -> Result<Self> {
        self.cloud = Some(clouds::named(name)?.prepare(settings)?);
        Ok(self)
    }
}

/// A running local cluster.
#[derive(Debug, Clone)]
pub struct LocalCluster {
    pub state: ClusterState,
    pub dir: PathBuf,
}

impl LocalCluster {
    /// A client for the cluster's API server, as its admin.
    pub async fn client(&self) -> Result<Client> {
        client_for(&self.state).await
    }

    /// The CCM's `--cloud-config` for the cluster's cloud (clusters with a cloud).
    pub fn cloud_config(&self) -> PathBuf {
        let file = self.state.cloud.as_ref().map_or(clouds::local::CLOUD_CONFIG, |cloud| cloud.cloud_config_file());
        self.dir.join(file)
    }

    /// The cloud's state directory (the local cloud's).
    pub fn cloud_state_dir(&self) -> PathBuf {
        self.dir.join("cloud")
    }

    /// Starts a CCM as one of the cluster's processes (stopped with it), serving on
    /// `state.ccm_port`, and waits until it has initialised every node. Its log is
    /// `logs/<binary name>.log`.
    pub async fn start_ccm(&mut self, binary: &Path, args: &[String]) -> Result<()> {
        let cloud = self.state.cloud.clone();
        if let Some(cloud) = &cloud {
            cloud.check_ccm_args(args).await?;
        }
        let step = progress::step("starting the CCM and waiting for it to initialise every node");
        let component = binary.file_name().map_or("ccm".into(), |n| n.to_string_lossy().into_owned());
        let env = cloud.as_ref().map(|cloud| cloud.ccm_environment()).unwrap_or_default();
        self.start_with_env(binary, &component, args.to_vec(), &env)?;
        let scheme = cloud.as_ref().map_or("https", |cloud| cloud.ccm_scheme());
        self.state.ccm_url = self.state.ccm_port.map(|port| format!("{scheme}://127.0.0.1:{port}"));
        self.save()?;
        let client = self.client().await?;
        let log = self.dir.join("logs").join(format!("{component}.log"));
        // A CCM that cannot get anywhere retries for ever: its own error ends the wait.
        let refused = || match &cloud {
            Some(cloud) => cloud.ccm_failed(&std::fs::read_to_string(&log).unwrap_or_default()),
            None => Ok(()),
        };
        wait_for_initialised_nodes(&client, self, refused).await?;
        step.done();
        Ok(())
    }

    /// Stops the CCM that [`LocalCluster::start_ccm`] started from `binary` (SIGTERM, then
    /// SIGKILL after 10 s), so that another can take its place; the cluster stays up.
    pub fn stop_ccm(&mut self, binary: &Path) -> Result<()> {
        let component = binary.file_name().map_or("ccm".into(), |n| n.to_string_lossy().into_owned());
        let (stopping, kept) = self.state.processes.drain(..).partition(|p| p.component == component);
        self.state.processes = kept;
        // Off the record before it stops: a run watching the cluster takes an exit on it for a fault.
        save_state(&self.dir, &self.state)?;
        process::terminate(&stopping, Duration::from_secs(10));
        Ok(())
    }

    /// Starts `binary` as the cluster's process `component` (log `logs/<component>.log`).
    pub(crate) fn start(&mut self, binary: &Path, component: &str, args: Vec<String>) -> Result<()> {
        self.start_with_env(binary, component, args, &process::Environment::default())
    }

    /// [`LocalCluster::start`] with changes to the environment it inherits.
    pub(crate) fn start_with_env(
        &mut self,
        binary: &Path,
        component: &str,
        args: Vec<String>,
        env: &process::Environment,
    ) -> Result<()> {
        self.start_in_batch(binary, component, args, env, None)
    }

    /// [`LocalCluster::start_with_env`] in `batch`: consecutive processes of one batch stop at once.
    pub(crate) fn start_in_batch(
        &mut self,
        binary: &Path,
        component: &str,
        args: Vec<String>,
        env: &process::Environment,
        batch: Option<&str>,
    ) -> Result<()> {
        let log = self.dir.join("logs").join(format!("{component}.log"));
        let mut env = env.clone();
        env.set.push((process::CLUSTER_DIR_VARIABLE.into(), self.dir.display().to_string()));
        let mut record =
            process::spawn_with_env(component, binary, &args, &env, &log).map_err(io_err("starting", binary))?;
        record.batch = batch.map(str::to_owned);
        tracing::debug!("started {component} (pid {})", record.pid);
        self.state.processes.push(record);
        // Recorded at once, so `harness cluster down` from another terminal finds it.
        self.save()
    }

    /// Writes `cluster.json`.
    pub(crate) fn save(&self) -> Result<()> {
        save_state(&self.dir, &self.state)
    }

    /// A wait for `what` that started at `started` and took too long.
    fn timeout(&self, what: &str, started: Instant) -> ClusterError {
        ClusterError::Timeout { what: what.to_string(), waited: started.elapsed(), logs: self.dir.join("logs") }
    }

    /// Stops every process and removes the cluster's state.
    pub fn down(self) -> Result<()> {
        down(&self.state.name).map(|_| ())
    }
}

/// A password made for one cluster's cloud (24 hex digits from the OS's randomness).
pub(crate) fn new_password() -> String {
    let mut bytes = [0u8; 12];
    getrandom::fill(&mut bytes).expect("the OS gives random bytes");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The file a CCM's `--cloud-config` names (`--cloud-config=F` or `--cloud-config F`).
pub(crate) fn cloud_config_arg(args: &[String]) -> Option<&str> {
    args.iter().enumerate().find_map(|(i, arg)| match arg.strip_prefix("--cloud-config") {
        Some(rest) if rest.starts_with('=') => Some(&rest[1..]),
        Some("") => args.get(i + 1).map(String::as_str),
        _ => None,
    })
}

pub(crate) fn validate_name(name: &str) -> Result<()> {
    let ok = (1..=40).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok { Ok(()) } else { Err(ClusterError::InvalidName(name.to_string())) }
}

/// Brings a cluster up: builds the toolchain if it is not cached yet, starts the control plane,
/// the cloud and the nodes, and waits until all of them are Ready. Whatever goes wrong — an error,
/// a panic, or the caller dropping this future (Ctrl-C) — stops every process it started and
/// removes the state ([`launch`]).
pub async fn up(options: UpOptions) -> Result<LocalCluster> {
    let mut attempt = 1;
    loop {
        let started = match options.node_kind {
            NodeKind::Kwok => up_with(options.clone(), KwokNodes).await,
            NodeKind::Real => up_with(options.clone(), RealNodes::default()).await,
        };
        match started {
            Err(e) if attempt < PORT_ATTEMPTS && e.lost_a_port_race() => {
                tracing::info!(
                    "cluster '{}': a port picked for it was taken before its component bound it; starting again on new ports",
                    options.name
                );
                attempt += 1;
            }
            started => return started,
        }
    }
}

/// How many times `up` starts a cluster when a component finds the port it was given taken: the
/// ports are free when picked ([`free_ports`], outside the range outgoing connections draw from),
/// but until the component binds one, another process on the machine may take it (another
/// cluster's, a test's that picks its own).
const PORT_ATTEMPTS: u32 = 3;

impl ClusterError {
    /// A component exited because another process bound its port first.
    fn lost_a_port_race(&self) -> bool {
        matches!(self, ClusterError::ComponentExited { tail, .. } if tail.contains("address already in use"))
    }
}

async fn up_with(options: UpOptions, mut nodes: impl NodeSet) -> Result<LocalCluster> {
    check_options(&options)?;
    nodes.preflight(&options)?;
    // Until it is up: another `up` of this name would clear what this one started.
    let _hold = hold(&options.name)?;
    let dir = cluster_dir(&options.name);
    clear_stale(&options.name, &dir)?;
    let toolchain = install_toolchain(options.release, nodes.components()).await?;
    nodes.prepare(&options, &toolchain).await?;

    fs::create_dir_all(dir.join("logs")).map_err(io_err("creating", &dir))?;
    let state = ClusterState::new(&options.name, &toolchain.version, dir.join("kubeconfig"));
    let mut cluster = Launch::new(LocalCluster { state, dir });
    let ports = Ports::pick(options.api_server_port)?;
    let (pki, client) = start_control_plane(&options, &nodes, &toolchain, &ports, &mut cluster).await?;
    if let Some(cloud) = &options.cloud {
        start_cloud(cloud.as_ref(), &mut cluster, &nodes.machines(&options), &client, ports.ccm).await?;
    }
    let joining =
        Joining { options: &options, toolchain: &toolchain, pki: &pki, api_port: ports.api_server, client: &client };
    nodes.start(&joining, &mut cluster).await?;

    let own_ccm = options.cloud.as_ref().and_then(|cloud| cloud.ccm(&cluster, nodes.cluster_cidr(), ports.ccm));
    let started_ccm = own_ccm.is_some();
    if let Some((binary, args)) = own_ccm {
        cluster.start_ccm(&binary, &args).await?;
    }
    // Their pods schedule once a CCM has lifted the nodes' uninitialized taint: waited for here
    // only when `up` started the CCM.
    nodes.start_addons(&cluster, started_ccm).await?;
    if !options.owned {
        cluster.state.owner = None;
        cluster.save()?;
    }
    Ok(cluster.finish())
}

/// Starts `cloud` beside `cluster` with a machine per node, and records it and the port kept for
/// the CCM.
async fn start_cloud(
    cloud: &dyn clouds::Cloud,
    cluster: &mut LocalCluster,
    machines: &clouds::Machines,
    client: &Client,
    ccm_port: u16,
) -> Result<()> {
    let state = cloud.start(cluster, machines, client).await?;
    cluster.state.cloud = Some(state);
    cluster.state.ccm_port = Some(ccm_port);
    cluster.save()
}

fn check_options(options: &UpOptions) -> Result<()> {
    validate_name(&options.name)?;
    if !(1..=nodes::MAX_NODES).contains(&options.nodes) {
        return Err(ClusterError::InvalidNodeCount(options.nodes));
    }
    if let Some(cloud) = &options.cloud {
        let facts = cloud.facts();
        if !facts.has_node_kind(options.node_kind) {
            let kind = match options.node_kind {
                NodeKind::Real => "real",
                NodeKind::Kwok => "kwok",
            };
            return Err(ClusterError::NodeKindNotOnCloud {
                cloud: facts.name,
                kind,
                why: facts.why_not_other_node_kinds,
            });
        }
        // Real nodes' own limit is theirs to check (`real::preflight`).
        let max = facts.max_nodes;
        if options.nodes > max {
            let what = format!("--nodes {}: it has machines for at most {max} nodes", options.nodes);
            return Err(clouds::CloudError::new(facts, clouds::CloudErrorKind::Invalid, what, "").into());
        }
        cloud.preflight(options)?;
    }
    if let Some(port) = options.api_server_port
        && TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_err()
    {
        return Err(ClusterError::PortInUse(port));
    }
    Ok(())
}

/// Installs the toolchain of `release` if it is not cached yet, with the `components` the nodes run
/// (kwok is built on first use).
async fn install_toolchain(release: Release, components: &'static [&'static str]) -> Result<toolchain::Toolchain> {
    let toolchain = tokio::task::spawn_blocking(move || toolchain::install_with(&release, false, components))
        .await
        .expect("toolchain install does not panic")?;
    Ok(toolchain)
}

/// Writes the certificates and the kubeconfig, starts etcd, kube-apiserver and, once it answers,
/// the other components the nodes need; returns the certificates and an admin client.
async fn start_control_plane(
    options: &UpOptions,
    nodes: &impl NodeSet,
    toolchain: &toolchain::Toolchain,
    ports: &Ports,
    cluster: &mut LocalCluster,
) -> Result<(pki::Pki, Client)> {
    let step = progress::step(format!("starting cluster '{}' (Kubernetes {})", options.name, toolchain.version));
    let dir = cluster.dir.clone();
    let node_names: Vec<String> = (0..options.nodes).map(|index| nodes::node_name(&options.name, index)).collect();
    let pki = nodes.pki(&dir.join("pki"), &node_names)?;
    let egress = nodes.egress_config(&dir)?;
    let kubeconfig = cluster.state.kubeconfig.clone();
    cluster.state.api_server = format!("https://127.0.0.1:{}", ports.api_server);
    write_kubeconfig(&kubeconfig, &options.name, ports.api_server, &pki)?;
    let kwok_config = dir.join("kwok.yaml");
    fs::write(&kwok_config, KWOK_CONFIG).map_err(io_err("writing", &kwok_config))?;

    let args = ComponentArgs { dir: &dir, ports, pki: &pki, kubeconfig: &kubeconfig, egress: egress.as_deref() };
    for component in ["etcd", "kube-apiserver"] {
        cluster.start(&toolchain.binary(component), component, args.for_component(component))?;
    }
    let client = wait_for_api(cluster).await?;
    for &component in nodes.components() {
        let mut component_args = args.for_component(component);
        if component == "kwok" {
            component_args.push(format!("--config={}", kwok_config.display()));
        }
        cluster.start(&toolchain.binary(component), component, component_args)?;
    }
    step.done();
    Ok((pki, client))
}

/// A cluster dir left by a crash or a SIGKILL: nothing of it runs, so it is cleared.
fn clear_stale(name: &str, dir: &Path) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    if let Ok(state) = load_state(name)
        && state.processes.iter().any(ProcessRecord::is_running)
    {
        match state.owner {
            Some(owner) if !owner.is_running() => tracing::warn!(
                "cluster '{name}' was left running by the harness that owned it (pid {}), which is gone (killed?): \
                 stopping what it left",
                owner.pid
            ),
            _ => return Err(ClusterError::AlreadyRunning { name: name.to_string() }),
        }
    } else {
        tracing::info!("clearing the state of cluster '{name}', which no longer runs");
    }
    process::sweep(dir);
    real::cleanup(dir);
    fs::remove_dir_all(dir).map_err(io_err("removing", dir))
}

/// Free loopback ports for every listener of the control plane.
struct Ports {
    etcd_client: u16,
    etcd_peer: u16,
    api_server: u16,
    controller_manager: u16,
    scheduler: u16,
    kwok: u16,
    ccm: u16,
}

impl Ports {
    fn pick(api_server: Option<u16>) -> Result<Self> {
        let [etcd_client, etcd_peer, api, controller_manager, scheduler, kwok, ccm] = free_ports()?;
        Ok(Ports {
            etcd_client,
            etcd_peer,
            api_server: api_server.unwrap_or(api),
            controller_manager,
            scheduler,
            kwok,
            ccm,
        })
    }
}

impl ComponentArgs<'_> {
    /// With real nodes, kube-apiserver advertises the hub address (pods reach it through the
    /// `kubernetes` Service), reaches kubelets through the egress proxy with the admin certificate,
    /// authorises kubelets with the Node authorizer; kube-controller-manager allocates pod CIDRs.
    fn for_real_nodes(&self, component: &str, mut args: Vec<String>, egress: &Path) -> Vec<String> {
        let replace = |args: &mut Vec<String>, flag: &str, value: String| {
            args.retain(|a| !a.starts_with(&format!("{flag}=")));
            args.push(format!("{flag}={value}"));
        };
        match component {
            "kube-apiserver" => {
                replace(&mut args, "--advertise-address", real::HUB_IP.to_string());
                replace(&mut args, "--endpoint-reconciler-type", "lease".into());
                replace(&mut args, "--service-cluster-ip-range", real::SERVICE_CIDR.into());
                replace(&mut args, "--authorization-mode", "Node,RBAC".into());
                replace(&mut args, "--egress-selector-config-file", egress.display().to_string());
                replace(&mut args, "--kubelet-client-certificate", self.pki.admin_cert.display().to_string());
                replace(&mut args, "--kubelet-client-key", self.pki.admin_key.display().to_string());
                replace(&mut args, "--enable-admission-plugins", "NodeRestriction".into());
                // Node names resolve nowhere; their InternalIP is on the hub network.
                replace(&mut args, "--kubelet-preferred-address-types", "InternalIP,Hostname".into());
                // Webhooks and aggregated API servers are dialled at their pods' IPs (routed in the
                // hub, through the egress proxy), not at Service IPs, which only kube-proxy in a node
                // translates.
                replace(&mut args, "--enable-aggregator-routing", "true".into());
            }
            "kube-controller-manager" => {
                replace(&mut args, "--service-cluster-ip-range", real::SERVICE_CIDR.into());
                replace(&mut args, "--cluster-cidr", real::CLUSTER_CIDR.into());
                replace(&mut args, "--allocate-node-cidrs", "true".into());
                replace(&mut args, "--node-cidr-mask-size", "24".into());
            }
            _ => {}
        }
        args
    }
}

struct ComponentArgs<'a> {
    dir: &'a Path,
    ports: &'a Ports,
    pki: &'a pki::Pki,
    kubeconfig: &'a Path,
    /// With real nodes: kube-apiserver's egress selector configuration ([`real`]).
    egress: Option<&'a Path>,
}

impl ComponentArgs<'_> {
    fn for_component(&self, component: &str) -> Vec<String> {
        let p = self.ports;
        let path = |path: &Path| path.display().to_string();
        let kubeconfig = path(self.kubeconfig);
        let etcd_url = format!("http://127.0.0.1:{}", p.etcd_client);
        let peer_url = format!("http://127.0.0.1:{}", p.etcd_peer);
        let args: Vec<String> = match component {
            "etcd" => vec![
                "--name=local".into(),
                format!("--data-dir={}", path(&self.dir.join("etcd"))),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls={peer_url}"),
                format!("--initial-advertise-peer-urls={peer_url}"),
                format!("--initial-cluster=local={peer_url}"),
                // A throwaway test cluster: durability is not worth an fsync per write.
                "--unsafe-no-fsync=true".into(),
                "--quota-backend-bytes=8589934592".into(),
                "--log-level=warn".into(),
            ],
            "kube-apiserver" => vec![
                format!("--etcd-servers={etcd_url}"),
                "--bind-address=127.0.0.1".into(),
                "--advertise-address=127.0.0.1".into(),
                // The endpoint reconciler refuses a loopback address; nothing runs in pods here
                // that would dial the `kubernetes` Service anyway.
                "--endpoint-reconciler-type=none".into(),
                format!("--secure-port={}", p.api_server),
                format!("--tls-cert-file={}", path(&self.pki.apiserver_cert)),
                format!("--tls-private-key-file={}", path(&self.pki.apiserver_key)),
                format!("--client-ca-file={}", path(&self.pki.ca_cert)),
                format!("--service-account-key-file={}", path(&self.pki.service_account_pub)),
                format!("--service-account-signing-key-file={}", path(&self.pki.service_account_key)),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                format!("--service-cluster-ip-range={SERVICE_CIDR}"),
                // The front proxy (kubeadm's flags): aggregated API servers, such as the
                // aggregator conformance test's sample-apiserver, authenticate the API server by
                // this certificate and take the user from its headers.
                format!("--requestheader-client-ca-file={}", path(&self.pki.front_proxy_ca_cert)),
                format!("--requestheader-allowed-names={}", pki::FRONT_PROXY_CLIENT),
                "--requestheader-username-headers=X-Remote-User".into(),
                "--requestheader-group-headers=X-Remote-Group".into(),
                "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
                format!("--proxy-client-cert-file={}", path(&self.pki.front_proxy_client_cert)),
                format!("--proxy-client-key-file={}", path(&self.pki.front_proxy_client_key)),
                "--authorization-mode=RBAC".into(),
                "--allow-privileged=true".into(),
                "--profiling=false".into(),
                "--max-requests-inflight=1600".into(),
                "--max-mutating-requests-inflight=800".into(),
                // Compact etcd every minute, not every 5: the conformance test that lists past a
                // compacted revision waits for a compaction, up to 10 minutes at the default.
                "--etcd-compaction-interval=1m".into(),
            ],
            "kube-controller-manager" => vec![
                format!("--kubeconfig={kubeconfig}"),
                format!("--authentication-kubeconfig={kubeconfig}"),
                format!("--authorization-kubeconfig={kubeconfig}"),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", p.controller_manager),
                "--cloud-provider=external".into(),
                "--leader-elect=false".into(),
                // kwok renews node Leases every 10 s, real kubelets every 5 s (their config's
                // `nodeLeaseDurationSeconds`): a node silent for 20 s is NotReady, not after the
                // default 50 s, so the node-lifecycle tests wait less.
                "--node-monitor-grace-period=20s".into(),
                // The quota controller re-checks every quota this often; at the default 5m, the
                // conformance test that waits for it to repair a quota's status waits up to 3 minutes.
                "--resource-quota-sync-period=15s".into(),
                format!("--service-account-private-key-file={}", path(&self.pki.service_account_key)),
                format!("--root-ca-file={}", path(&self.pki.ca_cert)),
                format!("--service-cluster-ip-range={SERVICE_CIDR}"),
                format!("--cluster-cidr={}", nodes::CLUSTER_CIDR),
                "--use-service-account-credentials=false".into(),
                "--kube-api-qps=100".into(),
                "--kube-api-burst=200".into(),
                "--profiling=false".into(),
            ],
            "kube-scheduler" => vec![
                format!("--kubeconfig={kubeconfig}"),
                format!("--authentication-kubeconfig={kubeconfig}"),
                format!("--authorization-kubeconfig={kubeconfig}"),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", p.scheduler),
                "--leader-elect=false".into(),
                "--profiling=false".into(),
            ],
            "kwok" => vec![
                format!("--kubeconfig={kubeconfig}"),
                format!("--server-address=127.0.0.1:{}", p.kwok),
                format!("--cidr={}", nodes::CLUSTER_CIDR),
                "--node-ip=127.1.0.0".into(),
            ],
            other => unreachable!("no arguments for component {other}"),
        };
        match self.egress {
            Some(egress) => self.for_real_nodes(component, args, egress),
            None => args,
        }
    }
}

fn check_alive(state: &ClusterState) -> Result<()> {
    match state.processes.iter().find(|p| !p.is_running()) {
        None => Ok(()),
        Some(dead) => Err(ClusterError::ComponentExited {
            cluster: state.name.clone(),
            component: dead.component.clone(),
            log: dead.log.clone(),
            tail: dead.log_tail(12),
        }),
    }
}

pub(crate) async fn client_for(state: &ClusterState) -> Result<Client> {
    let bad_kubeconfig = |e: kube::config::KubeconfigError| ClusterError::BadState {
        name: state.name.clone(),
        path: state.kubeconfig.clone(),
        reason: e.to_string(),
    };
    let kubeconfig = kube::config::Kubeconfig::read_from(&state.kubeconfig).map_err(bad_kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.map_err(bad_kubeconfig)?;
    Client::try_from(config).map_err(|source| ClusterError::Kube { cluster: state.name.clone(), source })
}

async fn wait_for_api(cluster: &LocalCluster) -> Result<Client> {
    let state = &cluster.state;
    let client = client_for(state).await?;
    let started = Instant::now();
    let address = state.api_server.trim_start_matches("https://").to_string();
    loop {
        check_alive(state)?;
        // Only ask /readyz once the port listens: the client logs every refused connection.
        let listening = tokio::net::TcpStream::connect(&address).await.is_ok();
        let request = http::Request::get("/readyz").body(Vec::new()).expect("a valid request");
        if listening
            && let Ok(body) = client.request_text(request).await
            && body.trim() == "ok"
        {
            return Ok(client);
        }
        if started.elapsed() > API_READY_TIMEOUT {
            return Err(cluster.timeout("kube-apiserver /readyz", started));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn register_nodes(client: &Client, cluster: &str, manifests: Vec<Node>) -> Result<Vec<String>> {
    let api: Api<Node> = Api::all(client.clone());
    let count = manifests.len();
    let order: Vec<String> = manifests.iter().map(|n| n.metadata.name.clone().unwrap_or_default()).collect();
    let creates = manifests.into_iter().map(|node| {
        let api = api.clone();
        async move { api.create(&PostParams::default(), &node).await }
    });
    let mut names = Vec::with_capacity(count);
    // A bounded number in flight: a 1,000-node cluster must not open 1,000 requests at once.
    let mut results = futures::stream::iter(creates).buffer_unordered(32);
    use futures::StreamExt;
    while let Some(result) = results.next().await {
        let node = result.map_err(|source| ClusterError::Kube { cluster: cluster.to_string(), source })?;
        names.push(node.metadata.name.unwrap_or_default());
    }
    // In node index order.
    names.sort_by_key(|name| order.iter().position(|n| n == name));
    Ok(names)
}

async fn wait_for_ready_nodes(client: &Client, cluster: &LocalCluster) -> Result<()> {
    let total = cluster.state.nodes.len();
    wait_for_nodes(
        client,
        cluster,
        || Ok(()),
        |nodes| {
            let ready = nodes.iter().filter(|node| nodes::is_ready(node)).count();
            (ready < total).then(|| format!("{total} nodes to be Ready ({ready} are)"))
        },
    )
    .await
}

async fn wait_for_initialised_nodes(
    client: &Client,
    cluster: &LocalCluster,
    failed: impl Fn() -> Result<()>,
) -> Result<()> {
    wait_for_nodes(client, cluster, failed, |nodes| {
        let waiting = nodes.iter().filter(|node| nodes::is_uninitialized(node)).count();
        (waiting > 0).then(|| format!("the CCM to initialise {waiting} nodes"))
    })
    .await
}

/// Watches the nodes until `pending` says nothing is awaited any more (it returns what still
/// is), failing early if a component dies or `failed` says what went wrong (checked each second).
async fn wait_for_nodes(
    client: &Client,
    cluster: &LocalCluster,
    failed: impl Fn() -> Result<()>,
    pending: impl Fn(&[Arc<Node>]) -> Option<String>,
) -> Result<()> {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, reflector, watcher};

    let state = &cluster.state;
    let started = Instant::now();
    let (nodes, writer) = reflector::store();
    let events = watcher(Api::<Node>::all(client.clone()), watcher::Config::default()).reflect(writer);
    let mut events = std::pin::pin!(events);
    let mut checks = tokio::time::interval(Duration::from_secs(1));
    let mut awaited = "the node list".to_string();
    // The store holds every node once the first list is in (`InitDone`).
    let mut listed = false;
    loop {
        tokio::select! {
            event = events.next() => match event {
                Some(Ok(event)) => {
                    listed |= matches!(event, watcher::Event::InitDone);
                    if listed {
                        match pending(&nodes.state()) {
                            Some(still) => awaited = still,
                            None => return Ok(()),
                        }
                    }
                }
                // The watcher starts over by itself (a relist); the timeout below bounds it.
                Some(Err(error)) => tracing::debug!("watching the nodes of cluster '{}': {error}", state.name),
                None => {
                    let source = kube::Error::Service("the node watch ended".into());
                    return Err(ClusterError::Kube { cluster: state.name.clone(), source });
                }
            },
            _ = checks.tick() => {
                check_alive(state)?;
                failed()?;
                if started.elapsed() > NODES_READY_TIMEOUT {
                    return Err(cluster.timeout(&awaited, started));
                }
            }
        }
    }
}

fn write_kubeconfig(path: &Path, cluster: &str, port: u16, pki: &pki::Pki) -> Result<()> {
    let context = format!("harness-{cluster}");
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {
            "server": format!("https://127.0.0.1:{port}"),
            "certificate-authority": pki.ca_cert,
        }}],
        "users": [{"name": context, "user": {
            "client-certificate": pki.admin_cert,
            "client-key": pki.admin_key,
        }}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "current-context": context,
    });
    let yaml = serde_yaml_ng::to_string(&config).expect("kubeconfig serialises");
    fs::write(path, yaml).map_err(io_err("writing", path))
}

fn save_state(dir: &Path, state: &ClusterState) -> Result<()> {
    let path = dir.join("cluster.json");
    // Each process its own: two `harness cluster instance` hooks at once must not rename each
    // other's file away.
    let partial = dir.join(format!("cluster.json.partial.{}", std::process::id()));
    fs::write(&partial, serde_json::to_vec_pretty(state).expect("state serialises"))
        .map_err(io_err("writing", &partial))?;
    fs::rename(&partial, &path).map_err(io_err("writing", &path))
}

/// The recorded state of cluster `name`.
pub fn load_state(name: &str) -> Result<ClusterState> {
    validate_name(name)?;
    load_state_at(&cluster_dir(name))
}

/// The recorded state of the cluster in `dir`.
fn load_state_at(dir: &Path) -> Result<ClusterState> {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let path = dir.join("cluster.json");
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !dir.exists() => {
            return Err(ClusterError::NotFound(name));
        }
        Err(e) => return Err(ClusterError::BadState { name, path, reason: e.to_string() }),
    };
    serde_json::from_str(&text).map_err(|e| ClusterError::BadState { name, path, reason: e.to_string() })
}

/// Brings cluster `name` down: stops its processes (SIGTERM, then SIGKILL), sweeps up strays and
/// removes its state. Returns false when there was no such cluster (not an error: `down` is what a
/// teardown step runs unconditionally).
pub fn down(name: &str) -> Result<bool> {
    validate_name(name)?;
    down_at(&cluster_dir(name))
}

/// [`down`] of the cluster in `dir`.
fn down_at(dir: &Path) -> Result<bool> {
    let dir = dir.to_path_buf();
    if !dir.exists() {
        // Real nodes' cgroups are found by the state dir's name even once the dir is gone.
        real::cleanup(&dir);
        return Ok(false);
    }
    match load_state_at(&dir) {
        Ok(state) => stop_processes(&dir, &state, STOP_GRACE),
        Err(e) => tracing::warn!("{e}; stopping whatever still runs from {}", dir.display()),
    }
    process::sweep(&dir);
    real::cleanup(&dir);
    fs::remove_dir_all(&dir).map_err(io_err("removing", &dir))?;
    Ok(true)
}

/// Stops `state`'s processes in order, last started first ([`process::terminate`]), and a real
/// node's pods right after its containerd, as its machine's power-off does: their runc shims
/// outlive containerd by design, and only the last-resort sweep would find them otherwise.
pub(crate) fn stop_processes(dir: &Path, state: &ClusterState, grace: Duration) {
    for batch in process::stop_together(&state.processes) {
        process::stop(&batch, grace);
        for record in batch {
            let Some(node) = record.component.strip_suffix("-containerd") else { continue };
            let Some(index) = state.nodes.iter().position(|n| n == node) else { continue };
            // Without the node's namespace holder, which goes next: its mounts go with it.
            if let Err(e) = real::kill_pods(dir, node, index as u32, None) {
                tracing::warn!("stopping node {node}'s pods: {e}");
            }
        }
    }
}

/// A line of `harness cluster list`.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterSummary {
    pub name: String,
    pub kubernetes_version: String,
    pub nodes: usize,
    pub api_server: String,
    /// `running`, `degraded` (some components stopped) or `stopped`.
    pub status: &'static str,
}

/// Every cluster with state on this machine, by name.
pub fn list() -> Vec<std::result::Result<ClusterSummary, ClusterError>> {
    let Ok(entries) = fs::read_dir(state_root().join("clusters")) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let state = load_state(&name)?;
            let running = state.processes.iter().filter(|p| p.is_running()).count();
            let status = match running {
                0 => "stopped",
                n if n == state.processes.len() => "running",
                _ => "degraded",
            };
            Ok(ClusterSummary {
                name: state.name,
                kubernetes_version: state.kubernetes_version,
                nodes: state.nodes.len(),
                api_server: state.api_server,
                status,
            })
        })
        .collect()
}

/// Lets cluster `name` outlive the process that owns it ([`ClusterState::owner`]): a run's
/// `--keep-cluster`.
pub fn disown(name: &str) -> Result<()> {
    let mut state = load_state(name)?;
    state.owner = None;
    save_state(&cluster_dir(name), &state)
}

/// The kubeconfig of cluster `name`.
pub fn kubeconfig_path(name: &str) -> Result<PathBuf> {
    Ok(load_state(name)?.kubeconfig)
}

/// What a run watches on a cluster while its suites run, as its state says now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Watched {
    /// Every process the cluster records: the control plane, the CCM, the cloud's services and
    /// the nodes' own. A machine a test shuts down or terminates ([`machines::act`]) has its
    /// processes taken off the record before they are stopped, so none here should exit.
    pub processes: Vec<ProcessRecord>,
    /// The real nodes whose machine runs (its kubelet is on the record), which should stay Ready.
    pub nodes_up: Vec<String>,
}

/// [`Watched`] of cluster `name`, read from its `cluster.json` now.
pub fn watched(name: &str) -> Result<Watched> {
    Ok(watched_in(load_state(name)?))
}

fn watched_in(state: ClusterState) -> Watched {
    let nodes_up = match state.node_kind() {
        NodeKind::Real => {
            let running = |node: &String| state.processes.iter().any(|p| p.component == format!("{node}-kubelet"));
            state.nodes.iter().filter(|node| running(node)).cloned().collect()
        }
        NodeKind::Kwok => Vec::new(),
    };
    Watched { processes: state.processes, nodes_up }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_watches_every_recorded_process_and_the_real_nodes_whose_kubelet_is_on_the_record() {
        let record = |component: &str| process::ProcessRecord {
            component: component.into(),
            pid: 1,
            start_ticks: 0,
            log: PathBuf::from(format!("{component}.log")),
            batch: None,
        };
        let mut state = ClusterState::new("c", "v1.37.1", PathBuf::from("kubeconfig"));
        state.nodes = ["node-1", "node-2", "node-10"].map(String::from).to_vec();
        // node-2's machine is shut down: its processes are off the record.
        let components = ["etcd", "kube-apiserver", "hub", "node-1-namespaces", "node-1-kubelet", "node-2-namespaces"];
        state.processes = components.into_iter().chain(["node-10-kubelet", "reference-ccm"]).map(record).collect();
        let watched = watched_in(state.clone());
        assert_eq!(watched.processes, state.processes);
        assert_eq!(watched.nodes_up, ["node-1", "node-10"]);

        // Kwok's nodes have no kubelet to lose, nor a network to be cut off from.
        state.processes.retain(|p| p.component != "hub");
        assert_eq!(watched_in(state).nodes_up, Vec::<String>::new());
    }

    #[test]
    fn the_cloud_config_a_ccm_is_given_is_found_in_either_form() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(cloud_config_arg(&args(&["--v=2", "--cloud-config=/c/os.conf"])), Some("/c/os.conf"));
        assert_eq!(cloud_config_arg(&args(&["--cloud-config", "/c/os.conf", "--v=2"])), Some("/c/os.conf"));
        assert_eq!(cloud_config_arg(&args(&["--cloud-config-x=1", "--cloud-provider=openstack"])), None);
    }

    #[test]
    fn only_a_component_that_found_its_port_taken_lost_a_port_race() {
        let exited = |tail: &str| ClusterError::ComponentExited {
            cluster: "c".into(),
            component: "etcd".into(),
            log: "etcd.log".into(),
            tail: tail.into(),
        };
        let etcd = r#"{"level":"fatal","msg":"discovery failed","error":"listen tcp 127.0.0.1:35921: bind: address already in use"}"#;
        assert!(exited(etcd).lost_a_port_race());
        assert!(!exited("panic: invalid flag --bogus").lost_a_port_race());
        // A port the user chose is refused before anything starts, not retried.
        assert!(!ClusterError::PortInUse(6443).lost_a_port_race());
    }

    #[tokio::test]
    async fn image_archives_for_kwok_nodes_are_refused_before_anything_starts() {
        let mut options = UpOptions::new("kwok-given-image", toolchain::default_release());
        options.images = vec![PathBuf::from("harness-image.oci.tar")];
        let err = up(options).await.unwrap_err();
        assert!(matches!(err, ClusterError::ImagesNeedRealNodes), "{err}");
        assert!(err.to_string().contains("--node-kind real"), "{err}");
        assert!(!cluster_dir("kwok-given-image").exists(), "nothing was started or written");
    }

    #[tokio::test]
    async fn hub_ports_for_kwok_nodes_are_refused_before_anything_starts() {
        let mut options = UpOptions::new("kwok-hub-port", toolchain::default_release());
        options.hub_ports = vec![4443];
        let err = up(options).await.unwrap_err();
        assert!(matches!(err, ClusterError::HubPortsNeedRealNodes), "{err}");
        assert!(err.to_string().contains("--node-kind real"), "{err}");
        assert!(!cluster_dir("kwok-hub-port").exists(), "nothing was started or written");
    }

    #[tokio::test]
    async fn the_conformance_image_on_kwok_nodes_is_refused_before_anything_starts() {
        let mut options = UpOptions::new("kwok-conformance-image", toolchain::default_release());
        options.conformance_image = true;
        let err = up(options).await.unwrap_err();
        assert!(matches!(err, ClusterError::ConformanceImageNeedsRealNodes), "{err}");
        assert!(err.to_string().contains("--node-kind real"), "{err}");
        assert!(!cluster_dir("kwok-conformance-image").exists(), "nothing was started or written");
    }

    fn vcsim_options(name: &str, nodes: u32, node_kind: NodeKind) -> UpOptions {
        let mut options = UpOptions::new(name, toolchain::default_release());
        options.nodes = nodes;
        options.node_kind = node_kind;
        let govmomi =
            toolchain::vsphere::Govmomi { vcsim: "/nonexistent/vcsim".into(), govc: "/nonexistent/govc".into() };
        let tags = config::VsphereTags::default_tags();
        options.cloud = Some(Arc::new(clouds::vcsim::VcsimSetup { govmomi, tags }));
        options
    }

    #[tokio::test]
    async fn a_vcsim_cluster_its_inventory_cannot_hold_or_on_kwok_nodes_is_refused_before_anything_starts() {
        let err = up(vcsim_options("vcsim-too-many", 10, NodeKind::Real)).await.unwrap_err();
        let message = err.to_string();
        assert!(message.contains("holds at most 9 node VMs") && message.contains("add zones"), "{message}");
        assert!(!cluster_dir("vcsim-too-many").exists(), "nothing was started or written");

        let err = up(vcsim_options("vcsim-kwok", 3, NodeKind::Kwok)).await.unwrap_err();
        assert!(matches!(err, ClusterError::NodeKindNotOnCloud { cloud: "vcsim", kind: "kwok", .. }), "{err}");
        assert!(err.to_string().contains("drops loopback addresses"), "{err}");
        assert!(!cluster_dir("vcsim-kwok").exists(), "nothing was started or written");
    }

    #[test]
    fn cluster_names_follow_kubernetes_naming() {
        for good in ["harness", "ci-1", "a"] {
            assert!(validate_name(good).is_ok(), "{good}");
        }
        for bad in ["", "Harness", "1abc", "a/b", "../x", &"a".repeat(41)] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn picked_ports_are_distinct() {
        let ports = Ports::pick(None).unwrap();
        let all = [
            ports.etcd_client,
            ports.etcd_peer,
            ports.api_server,
            ports.controller_manager,
            ports.scheduler,
            ports.kwok,
        ];
        let distinct: std::collections::HashSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), all.len());
    }

    #[test]
    fn kwok_config_never_touches_network_unavailable_or_addresses() {
        let stages: Vec<&str> = KWOK_CONFIG.split("\n---\n").filter(|doc| doc.contains("kind: Stage")).collect();
        assert!(stages.len() >= 3);
        for stage in stages.iter().filter(|s| s.contains("kind: Node")) {
            let body = stage.split("template:").nth(1).unwrap_or_default();
            assert!(!body.contains("NetworkUnavailable") && !body.contains("NodeConditions"), "{stage}");
            assert!(!body.contains("addresses"), "{stage}");
            assert!(stage.contains("type: strategic"), "conditions must merge by type: {stage}");
        }
    }
}

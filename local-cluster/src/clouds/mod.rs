//! The emulated clouds a local cluster runs beside it, one folder each, behind three traits:
//!
//! - [`CloudKind`]: a cloud as the registry lists it: its facts (`config::clouds`, the one table
//!   providers.yaml is checked against), what it installs, and how it is made ready to start;
//! - [`Cloud`]: a cloud ready to start: its preflight, its start (processes of the cluster, a
//!   machine per node, the CCM's cloud config), and what it runs on the nodes' network;
//! - [`CloudState`]: a running cloud, as `cluster.json` records it (serde-tagged by the cloud's
//!   name): the CCM's environment and cloud config, machine actions, and its load balancers and
//!   routes read back through the optional [`LoadBalancers`] and [`Routes`], `None` where the cloud
//!   has none (as upstream's `LoadBalancer() (LoadBalancer, bool)`).
//!
//! `up`, `machines` and `start_ccm` dispatch through these only: outside a cloud's folder and
//! [`REGISTRY`], nothing names a cloud. A new cloud is a folder, a line in [`REGISTRY`] and a row
//! of facts in `config::clouds` (docs/adding-a-provider.md).

#[cfg(test)]
mod fake;
pub mod local;
pub mod moto;
pub mod openstack;
pub mod vcsim;

use std::any::Any;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use kube::Client;

pub use config::clouds::{CloudFacts, Lack};

use super::machines::MachineAction;
use super::{ClusterError, LocalCluster, Result, UpOptions, process};

/// Every cloud, the default first.
pub static REGISTRY: &[&dyn CloudKind] = &[&local::Local, &moto::Moto, &vcsim::Vcsim, &openstack::Openstack];

/// The cloud named `name`, from [`REGISTRY`].
pub fn named(name: &str) -> Result<&'static dyn CloudKind> {
    REGISTRY.iter().copied().find(|kind| kind.facts().name == name).ok_or_else(|| ClusterError::UnknownCloud {
        name: name.to_owned(),
        known: REGISTRY.iter().map(|kind| kind.facts().name).collect::<Vec<_>>().join(", "),
    })
}

/// A cloud as the registry lists it.
pub trait CloudKind: Sync {
    fn facts(&self) -> &'static CloudFacts;

    /// Installs what the cloud runs (its simulator), cached unless `force`; says what and where.
    /// `harness toolchain install --all` and the cloud's first use both come here.
    fn install(&self, force: bool) -> Result<Vec<String>>;

    /// The third-party CCM the harness pins for this cloud's provider, which `harness toolchain
    /// install --all` builds for every pinned release; `None` for a cloud whose CCM is built here.
    fn provider_ccm(&self) -> Option<&'static toolchain::provider_ccm::ProviderCcm> {
        None
    }

    /// The Debian packages the cloud needs that the harness does not install itself (servers run
    /// from the machine), which `scripts/test` installs.
    fn debian_packages(&self) -> &'static [&'static str] {
        &[]
    }

    /// Checks that the machine has what [`debian_packages`](Self::debian_packages) provides,
    /// naming the packages to install when not: `toolchain install --all` asks before building
    /// anything, and the cloud's install asks again.
    fn check_host(&self) -> Result<()> {
        Ok(())
    }

    /// The cloud, ready to start with `settings`; installs what it runs first if it is not yet.
    fn prepare(&self, settings: &CloudSettings) -> Result<Arc<dyn Cloud>>;
}

/// What a cluster's cloud is started with, from providers.yaml or the command line.
#[derive(Debug, Clone, Default)]
pub struct CloudSettings {
    /// The `reference-ccm` binary that serves the local cloud (and is its CCM); built from the
    /// workspace when `None`.
    pub reference_ccm: Option<PathBuf>,
    /// `up` also starts the cloud's own CCM (the reference CCM of the local cloud) and waits for
    /// it to initialise every node; `false` leaves the CCM to the caller, as a run does.
    pub start_ccm: bool,
    /// Zone and region tags of a cloud with a tagged inventory (vcsim's hosts); its defaults when `None`.
    pub tags: Option<config::VsphereTags>,
}

/// A node's machine, as its cloud gets it: the node's name and addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    pub index: u32,
    pub name: String,
    pub ipv4: Ipv4Addr,
    pub ipv6: Ipv6Addr,
}

/// The machines of a cluster's nodes.
#[derive(Debug, Clone)]
pub struct Machines {
    pub list: Vec<Machine>,
    /// Where load-balancer ingress IPs come from, when not the cloud's default pool (real
    /// nodes: their own network, where the data plane carries traffic).
    pub ingress_pool: Option<&'static str>,
}

/// A cloud ready to start beside a cluster.
#[async_trait]
pub trait Cloud: Send + Sync + fmt::Debug {
    fn facts(&self) -> &'static CloudFacts;

    /// Checks, before anything starts, what only this cloud knows of `options` (how many nodes
    /// its inventory holds).
    fn preflight(&self, _options: &UpOptions) -> Result<()> {
        Ok(())
    }

    /// Starts the cloud as processes of `cluster`, once its API server answers (`client`), with a
    /// machine per node; writes the CCM's cloud config; returns what `cluster.json` records.
    async fn start(
        &self,
        cluster: &mut LocalCluster,
        machines: &Machines,
        client: &Client,
    ) -> Result<Arc<dyn CloudState>>;

    /// The program that carries the cloud's load-balancer traffic and programs its routes on
    /// real nodes' network; `None`: the nodes' pod CIDRs are routed as a host-gateway CNI would.
    fn data_plane(&self) -> Option<PathBuf> {
        None
    }

    /// The CCM `up` starts itself once the nodes run, and its arguments (`cluster_cidr` is the
    /// nodes' pod range, `port` its `--secure-port`); `None` leaves the CCM to the caller.
    fn ccm(&self, _cluster: &LocalCluster, _cluster_cidr: &str, _port: u16) -> Option<(PathBuf, Vec<String>)> {
        None
    }
}

/// What a cloud's API answered so far ([`CloudState::api_calls`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiCalls {
    /// Calls it answered: any status below 500 (a 404 for an instance that is gone is an answer).
    pub answered: u64,
    /// Calls that failed with a server error, by `"<operation> <status>"`.
    pub failed: std::collections::BTreeMap<String, u64>,
}

/// A running cloud, as `cluster.json` records it (`"cloud": {"kind": "<name>", ...}`).
#[typetag::serde(tag = "kind")]
#[async_trait]
pub trait CloudState: Send + Sync + fmt::Debug + Any {
    fn facts(&self) -> &'static CloudFacts;

    /// The CCM's `--cloud-config`, a file of the cluster dir.
    fn cloud_config_file(&self) -> &'static str;

    /// Changes to the environment the CCM inherits.
    fn ccm_environment(&self) -> process::Environment {
        process::Environment::default()
    }

    /// The scheme the CCM serves `/healthz` and `/metrics` with.
    fn ccm_scheme(&self) -> &'static str {
        "https"
    }

    /// Checks the CCM's arguments before it starts (the cloud config they name).
    async fn check_ccm_args(&self, _args: &[String]) -> Result<()> {
        Ok(())
    }

    /// An error when the CCM's log shows it cannot get anywhere (a refused login it retries for
    /// ever), to end the wait for it with its own line.
    fn ccm_failed(&self, _log: &str) -> Result<()> {
        Ok(())
    }

    /// The name and addresses simulated node `index` registers with, when the cloud decides
    /// them (an AWS kubelet's: its instance's private DNS name and IP).
    fn node_identity(&self, _index: u32) -> Option<(String, Vec<String>)> {
        None
    }

    /// Applies `action` to the machine of node `node`; returns its instance afterwards.
    async fn act(&self, node: &str, action: MachineAction) -> Result<InstanceState>;

    /// The calls its API answered and failed so far, from the emulator's own count, when it keeps
    /// one: a run watches it to tell that the cloud's API is down.
    async fn api_calls(&self) -> Option<ApiCalls> {
        None
    }

    /// Its load balancers, when it has any.
    fn load_balancers(&self) -> Option<&dyn LoadBalancers> {
        None
    }

    /// Its routes to the nodes' pod CIDRs, when it keeps any the harness reads.
    fn routes(&self) -> Option<&dyn Routes> {
        None
    }
}

impl dyn CloudState {
    /// The state as the cloud's own type, when it is that cloud's.
    pub fn downcast_ref<T: CloudState>(&self) -> Option<&T> {
        (self as &dyn Any).downcast_ref()
    }
}

/// A cloud's load balancers, read back.
#[async_trait]
pub trait LoadBalancers: Sync {
    /// Each load balancer as JSON, in the cloud's own terms.
    async fn list_load_balancers(&self) -> Result<Vec<serde_json::Value>>;
}

/// A cloud's routes to the nodes' pod CIDRs, read back.
#[async_trait]
pub trait Routes: Sync {
    /// Each route as JSON, in the cloud's own terms.
    async fn list_routes(&self, cluster: &str) -> Result<Vec<serde_json::Value>>;
}

/// An instance after a machine action: its id and the state the cloud reports.
#[derive(Debug, Clone)]
pub struct InstanceState {
    pub id: String,
    pub state: String,
}

/// What failed in an emulated cloud: which cloud, what the harness was doing, what kind of
/// failure it was, and the cloud's own message.
#[derive(Debug)]
pub struct CloudError {
    /// The cloud's label (`aws cloud (moto)`).
    pub cloud: &'static str,
    pub kind: CloudErrorKind,
    /// What the harness asked, against which API (`StopInstances of i-1 (node n)`).
    pub what: String,
    /// What the cloud (or its tool) said; empty when `what` says it all.
    pub message: String,
}

/// The kinds of [`CloudError`], for callers that act on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloudErrorKind {
    /// Its API did not answer: the cloud is down or not up yet.
    Unreachable,
    /// It answered with an error or a fault.
    Refused,
    /// What was asked for is not there (no machine of that node).
    NotFound,
    /// It did not get where it was asked to in time.
    Timeout,
    /// A tool of its, or a step setting it up, failed (govc, a schema sync).
    Setup,
    /// The CCM's cloud config does not fit the cloud, or the cluster asks what the cloud cannot hold.
    Invalid,
}

impl CloudError {
    pub fn new(facts: &CloudFacts, kind: CloudErrorKind, what: impl Into<String>, message: impl fmt::Display) -> Self {
        CloudError { cloud: facts.label, kind, what: what.into(), message: message.to_string() }
    }
}

impl fmt::Display for CloudError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.message.is_empty() {
            true => write!(f, "{}: {}", self.cloud, self.what),
            false => write!(f, "{}: {}: {}", self.cloud, self.what, self.message),
        }
    }
}

impl std::error::Error for CloudError {}

/// Runs blocking `work` of cloud `facts` (govc, a database setup) off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    facts: &'static CloudFacts,
    what: &str,
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work).await.map_err(|e| CloudError::new(facts, CloudErrorKind::Setup, what, e))?
}

#[cfg(test)]
mod declarations {
    use super::REGISTRY;

    #[test]
    fn every_pinned_provider_ccm_is_declared_by_exactly_one_cloud() {
        let mut declared: Vec<&str> =
            REGISTRY.iter().filter_map(|cloud| cloud.provider_ccm()).map(|c| c.binary).collect();
        let mut pinned: Vec<&str> = toolchain::PROVIDER_CCMS.iter().map(|ccm| ccm.binary).collect();
        declared.sort_unstable();
        pinned.sort_unstable();
        assert_eq!(declared, pinned, "`toolchain install --all` builds the CCMs the clouds declare");
    }

    #[test]
    fn the_scripts_install_the_debian_packages_every_cloud_declares() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/common.sh");
        let script = std::fs::read_to_string(&path).unwrap();
        let line = script.lines().find_map(|line| line.strip_prefix("cloud_packages=(")).expect("cloud_packages=(…)");
        let mut installed: Vec<&str> = line.trim_end_matches(')').split_whitespace().collect();
        let mut declared: Vec<&str> =
            REGISTRY.iter().flat_map(|cloud| cloud.debian_packages().iter().copied()).collect();
        installed.sort_unstable();
        declared.sort_unstable();
        declared.dedup();
        assert_eq!(installed, declared, "scripts/common.sh's cloud_packages");
    }
}

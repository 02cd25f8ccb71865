//! Deployers: how a run gets a cluster, in kubetest2's model (`up`, `down`, `is_up`, `kubeconfig`,
//! `dump_logs`). One per `providers.yaml` `deployer.kind`:
//! - `local` ([`local`]): the embedded cluster of this repository (control plane processes, real
//!   nodes by default or kwok nodes, and one of the emulated clouds of `local_cluster::clouds`);
//! - `existing` ([`existing`]): a cluster someone else runs, reached through a kubeconfig;
//! - `kind` ([`kind`]): shells out to `kind`, with the CCM configured as external;
//! - `kubetest2` ([`kubetest2`]): passes through to any `kubetest2-<deployer>` on `PATH`.
//!
//! `down` must be safe to call at any point: after a failed or interrupted `up`, and twice. A run
//! that keeps its cluster (`--keep-cluster`) calls `keep` instead.

use std::path::{Path, PathBuf};

use async_trait::async_trait;

use config::template::Vars;
use config::{Deployer as DeployerConfig, KubernetesVersion};
use local_cluster::UpOptions;
use local_cluster::clouds::CloudSettings;
use local_cluster::process::ProcessRecord;

pub mod command;
pub mod existing;
pub mod kind;
pub mod kubetest2;
pub mod local;
#[cfg(test)]
mod test_support;

#[derive(Debug, thiserror::Error)]
pub enum DeployError {
    /// A program the deployer runs is not installed.
    #[error("{program} not found on PATH: {hint}")]
    MissingProgram { program: String, hint: String },
    #[error("{deployer} up failed: {message}")]
    Up { deployer: String, message: String },
    #[error("{deployer} down failed: {message}")]
    Down { deployer: String, message: String },
    #[error("{deployer}: {message}")]
    Other { deployer: String, message: String },
    /// The embedded cluster's own error, kept whole (`local`).
    #[error("local {step} failed: {source}")]
    Local { step: &'static str, source: local_cluster::ClusterError },
    /// The Kubernetes toolchain, the reference CCM or moto could not be installed or built.
    #[error(transparent)]
    Toolchain(#[from] toolchain::ToolchainError),
    /// A CCM deployed as a process (`ccm.deploy.kind: process`) with a deployer that runs none.
    #[error(
        "{deployer} cannot run the CCM as a process beside the cluster: only the local deployer can; set the provider's ccm.deploy.kind to manifest or command in providers.yaml"
    )]
    NoProcessHost { deployer: String },
}

impl DeployError {
    /// The embedded cluster's error at `step`; a toolchain's stays one (what to install says it all).
    fn from_cluster(step: &'static str) -> impl FnOnce(local_cluster::ClusterError) -> DeployError {
        move |source| match source {
            local_cluster::ClusterError::Toolchain(error) => DeployError::Toolchain(error),
            source => DeployError::Local { step, source },
        }
    }
}

/// What a run gives the deployer that brings its cluster up.
pub struct RunSetting<'a> {
    pub cluster_name: &'a str,
    pub kubernetes: &'a KubernetesVersion,
    /// The run's `$ARTIFACTS`: kind and kubetest2 write their logs there.
    pub artifacts: &'a Path,
    /// Where the provider's relative paths (a kind config, a deployer's dir) start.
    pub provider_dir: &'a Path,
    /// The run's placeholders, filled into a deployer's args by `up`.
    pub vars: &'a Vars,
    /// The CCM binary the run built, if any. The local cloud is served by the reference CCM's
    /// binary, whatever CCM is under test: that one when it is `reference-ccm`, else built here.
    pub built_ccm: Option<&'a Path>,
}

/// The deployer `deployer` (a provider's `deployer` in providers.yaml) describes, for a run.
pub fn from_config(deployer: &DeployerConfig, run: &RunSetting<'_>) -> Result<Box<dyn Deployer>, DeployError> {
    match deployer {
        DeployerConfig::Local { nodes, cloud, node_kind, tags } => {
            let release = toolchain::resolve(Some(&run.kubernetes.to_string()))?;
            let settings = CloudSettings {
                // The local cloud is served by the reference CCM's binary, whatever CCM is under
                // test: that one when it is `reference-ccm`, else built here.
                reference_ccm: run
                    .built_ccm
                    .filter(|b| b.file_name().is_some_and(|n| n == "reference-ccm"))
                    .map(Path::to_path_buf),
                start_ccm: false,
                tags: tags.clone(),
            };
            let mut options = UpOptions::new(run.cluster_name, release);
            (options.nodes, options.node_kind) = (*nodes, *node_kind);
            let options = options.on_cloud(cloud.name, &settings).map_err(DeployError::from_cluster("up"))?;
            Ok(Box::new(local::LocalDeployer::new(options)))
        }
        DeployerConfig::Existing { kubeconfig } => {
            Ok(Box::new(existing::ExistingDeployer::new(kubeconfig.as_deref())?))
        }
        DeployerConfig::Kind { config, image } => {
            let config = config.as_ref().map(|c| run.provider_dir.join(c));
            let deployer = kind::KindDeployer::new(
                config.as_deref(),
                image.as_deref(),
                run.cluster_name,
                run.kubernetes,
                run.artifacts,
                run.provider_dir,
            );
            Ok(Box::new(deployer.with_vars(run.vars.clone())))
        }
        DeployerConfig::Kubetest2 { deployer, args } => {
            let deployer = kubetest2::Kubetest2Deployer::new(
                deployer,
                args,
                run.cluster_name,
                run.kubernetes,
                run.artifacts,
                run.provider_dir,
            )?;
            Ok(Box::new(deployer.with_vars(run.vars.clone())))
        }
    }
}

/// Checks, before a run starts anything, that the programs a deployer runs are on `PATH`.
pub fn check_programs(deployer: &config::Deployer) -> Result<(), DeployError> {
    use config::Deployer as Config;
    let (program, hint) = match deployer {
        Config::Local { .. } | Config::Existing { .. } => return Ok(()),
        Config::Kind { .. } => ("kind".to_owned(), "install kind (https://kind.sigs.k8s.io) and re-run".to_owned()),
        Config::Kubetest2 { deployer, .. } => (
            format!("kubetest2-{deployer}"),
            format!("go install sigs.k8s.io/kubetest2/kubetest2-{deployer}@latest, then re-run"),
        ),
    };
    match command::find_program(&program, None) {
        Some(_) => Ok(()),
        None => Err(DeployError::MissingProgram { program, hint }),
    }
}

/// A cluster provider for one run.
#[async_trait]
pub trait Deployer: Send {
    /// `local`, `existing`, `kind` or `kubetest2-<name>`.
    fn name(&self) -> String;
    /// Brings the cluster up; returns once its API server answers and its nodes are registered.
    async fn up(&mut self) -> Result<(), DeployError>;
    /// Tears down what `up` made; idempotent, and safe after a partial `up`.
    async fn down(&mut self) -> Result<(), DeployError>;
    /// Whether the cluster answers.
    async fn is_up(&self) -> Result<bool, DeployError>;
    /// The cluster's kubeconfig, once up.
    fn kubeconfig(&self) -> Option<PathBuf>;
    /// Copies the cluster's logs into `dir`.
    async fn dump_logs(&self, dir: &Path) -> Result<(), DeployError>;
    /// Values for the placeholders of templated commands: `{cluster}`, `{kubeconfig}`, and for
    /// `local` the ones only it knows (`{cloud_config}`, `{cloud_state_dir}`, ...).
    fn vars(&self) -> Vars;
    /// Lets the cluster outlive the run (`--keep-cluster`): whatever would stop it when the
    /// deployer is dropped is disarmed. Returns how to bring it down later, for the run to print.
    fn keep(&mut self) -> String;
    /// The capability to run a CCM as a process beside the cluster, for deployers that supervise
    /// processes of their own (kubetest2's optional interfaces, in Rust: `None` when it has not).
    fn process_host(&mut self) -> Option<&mut dyn ProcessHost> {
        None
    }
    /// What the run watches while its suites run, for deployers that supervise processes of their
    /// own (`None` when it has none): it ends the Test step when one of them exits, or a node that
    /// should be up goes NotReady.
    fn watch(&self) -> Option<Box<dyn Watch>> {
        None
    }
    /// Optional capability: changing the Kubernetes release the running cluster's components run
    /// (an upgrade run's stages); `None` when this deployer cannot.
    fn upgrader(&mut self) -> Option<&mut dyn Upgrader> {
        None
    }
}

/// Changes the release a running cluster's components run, one at a time: what an upgrade run
/// needs of its deployer (the local one: [`local_cluster::upgrade`]).
#[async_trait]
pub trait Upgrader: Send {
    /// Replaces control-plane `component` (kube-apiserver, kube-controller-manager,
    /// kube-scheduler) with release `version`'s, and waits until it serves.
    async fn replace_control_plane(&mut self, component: &str, version: &str) -> Result<(), DeployError>;
    /// The nodes whose kubelet and kube-proxy it can replace, in order; none on simulated nodes.
    async fn upgradable_nodes(&self) -> Result<Vec<String>, DeployError>;
    /// Replaces node `node`'s kubelet and kube-proxy with release `version`'s, and waits until the
    /// node is Ready with the new kubelet (cordoning and draining are the caller's).
    async fn replace_node(&mut self, node: &str, version: &str) -> Result<(), DeployError>;
    /// The cloud's routes for the cluster, as JSON; `None` when the cloud keeps none.
    async fn routes(&self) -> Option<Vec<serde_json::Value>>;
}

/// A cluster's processes and nodes as a run watches them ([`Deployer::watch`]), read afresh at
/// each look, so that what a test stops on purpose (a machine shut down) is off the list first.
#[async_trait]
pub trait Watch: Send + Sync {
    /// The processes the cluster cannot lose now: the control plane, the CCM, the cloud's
    /// services, the nodes' own.
    fn processes(&self) -> Vec<ProcessRecord>;
    /// The nodes that should be Ready now.
    fn nodes_up(&self) -> Vec<String>;
    /// What the cloud's API answered so far, when its emulator counts it.
    async fn cloud_api_calls(&self) -> Option<local_cluster::clouds::ApiCalls> {
        None
    }
}

/// A deployer that can run a CCM binary as one of its cluster's processes
/// (`ccm.deploy.kind: process`).
#[async_trait]
pub trait ProcessHost: Send {
    /// Runs `binary` with `args` beside the cluster, stopped by `down`, and returns once it has
    /// initialised every node.
    async fn start_ccm_process(&mut self, binary: &Path, args: &[String]) -> Result<(), DeployError>;
    /// Stops the CCM [`ProcessHost::start_ccm_process`] started from `binary`, so that another
    /// (an upgrade's) can take its place; the cluster stays up.
    async fn stop_ccm_process(&mut self, binary: &Path) -> Result<(), DeployError>;
}

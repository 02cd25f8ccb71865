//! Deployers: how a run gets a cluster, in kubetest2's model (`up`, `down`, `is_up`, `kubeconfig`,
//! `dump_logs`). One per `providers.yaml` `deployer.kind`:
//! - `local` ([`local`]): the embedded cluster of this repository (control plane processes, kwok
//!   nodes, the local simulated cloud);
//! - `existing` ([`existing`]): a cluster someone else runs, reached through a kubeconfig;
//! - `kind` ([`kind`]): shells out to `kind`, with the CCM configured as external;
//! - `kubetest2` ([`kubetest2`]): passes through to any `kubetest2-<deployer>` on `PATH`.
//!
//! `down` must be safe to call at any point: after a failed or interrupted `up`, and twice.

use std::path::{Path, PathBuf};

use async_trait::async_trait;

use crate::config::template::Vars;

pub mod command;
pub mod existing;
pub mod kind;
pub mod kubetest2;
pub mod local;

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
}

/// Checks, before a run starts anything, that the programs a deployer runs are on `PATH`.
pub fn check_programs(deployer: &crate::config::Deployer) -> Result<(), DeployError> {
    use crate::config::Deployer as Config;
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
    /// Runs a CCM binary as a process beside the cluster (`ccm.deploy.kind: process`), stopped by
    /// `down`, and returns once it has initialised every node. Only deployers that supervise
    /// processes of their own support it.
    async fn start_ccm_process(&mut self, binary: &Path, args: &[String]) -> Result<(), DeployError> {
        let _ = (binary, args);
        Err(DeployError::Other {
            deployer: self.name(),
            message: "a CCM deployed as a process needs the local deployer; deploy it with a manifest or a command"
                .into(),
        })
    }
}

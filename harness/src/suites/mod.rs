//! Suite runners: each runs one suite against a cluster and leaves JUnit in the run's artifacts
//! directory under a name TestGrid reads (`junit_*.xml`). One per `providers.yaml` suite kind:
//! - `exec` ([`exec`]): any command, output captured; a failing command becomes a JUnit failure,
//!   as kubetest2's exec tester does;
//! - `ginkgo` ([`ginkgo`]): upstream `e2e.test` of the cluster's Kubernetes version under ginkgo;
//! - `cloud-e2e` ([`cloud_e2e`]): the harness's built-in cloud-provider suite;
//! - `certified-conformance` ([`certified_conformance`]): upstream conformance as certification
//!   runs it, and the `cncf/k8s-conformance` submission written and checked;
//! - `upstream-load-balancers` ([`upstream_load_balancers`]): upstream's own load-balancer tests,
//!   each run or skipped by the capabilities the provider declares.
//!
//! Whatever the kind, [`known_failures`] applies the provider's `known_failures` to a suite's
//! outcome afterwards.
//!
//! A test failing is not an error here: it is in the JUnit, and [`SuiteOutcome::passed`] says so.
//! [`SuiteError`] is for a suite that could not run at all (a missing binary, a bad template).

use std::path::PathBuf;
use std::time::Duration;

use async_trait::async_trait;

use config::Capability;
use config::template::Vars;

pub mod certified_conformance;
pub mod cloud_e2e;
pub mod exec;
pub mod ginkgo;
pub mod known_failures;
pub mod local_skips;
pub mod metadata;
pub mod upstream_load_balancers;

#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("suite {suite}: {message}")]
    CannotRun { suite: String, message: String },
    #[error("suite {suite}: cannot write {file}: {source}")]
    Write { suite: String, file: PathBuf, source: std::io::Error },
}

/// What a suite needs from the run.
#[derive(Debug, Clone)]
pub struct SuiteContext {
    /// The cluster under test.
    pub kubeconfig: PathBuf,
    /// `$ARTIFACTS`: JUnit files go here.
    pub artifacts: PathBuf,
    /// The provider's name (`--provider` of `e2e.test`).
    pub provider: String,
    /// The cluster's Kubernetes version, e.g. `v1.37.1` (picks `e2e.test` from the toolchain).
    pub kubernetes_version: String,
    /// Placeholder values for templated commands.
    pub vars: Vars,
    /// The suite's time limit; past it, the suite is stopped and reported as timed out.
    pub timeout: Duration,
}

/// How a suite went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteOutcome {
    /// Every test passed (flaky counts as passed).
    pub passed: bool,
    /// The JUnit files it left in the artifacts directory.
    pub junit: Vec<PathBuf>,
    /// A one-line summary, e.g. "12 passed, 1 failed, 3 skipped in 41.2s".
    pub summary: String,
}

/// A suite, ready to run.
#[async_trait]
pub trait SuiteRunner: Send + Sync {
    fn name(&self) -> &str;
    async fn run(&self, ctx: &SuiteContext) -> Result<SuiteOutcome, SuiteError>;
}

/// Why a test needing `capability` is skipped for a provider without it: the capability, and the
/// provider's `unsupported:` reason when it gives one.
pub fn missing_capability(
    capability: Capability,
    unsupported: &std::collections::BTreeMap<Capability, String>,
) -> String {
    let reason = match unsupported.get(&capability) {
        Some(why) => format!(": {why}"),
        None => String::new(),
    };
    format!("the provider does not declare the capability `{capability}` (providers.yaml capabilities){reason}")
}

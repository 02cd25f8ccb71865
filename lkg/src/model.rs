//! Inputs of the LKG algorithm: runs with their per-test attempts, and for each provider its commit
//! history and its policy (required tests, how flakiness counts, whether it gates the version set).

use std::collections::BTreeSet;
use std::num::NonZeroU32;

use serde::{Deserialize, Serialize};

use crate::History;

/// One attempt at one test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Attempt {
    Pass,
    Fail,
    Skip,
}

/// A test of a run, with its attempts in the order they were made (retries come after).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestResult {
    pub name: String,
    pub attempts: Vec<Attempt>,
}

/// One run of a provider's CCM build against a Kubernetes version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub build_id: String,
    pub provider: String,
    /// A commit id or tag of the Kubernetes history.
    pub kubernetes_version: String,
    /// A commit id or tag of the provider's history.
    pub provider_version: String,
    pub tests: Vec<TestResult>,
}

/// How flaky tests and unlucky streaks count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FlakePolicy {
    /// A test that failed then passed on retry in the same run counts as passed.
    pub flaky_counts_as_passed: bool,
    /// How many good runs in a row a pair needs to be good.
    pub consecutive_good_runs: NonZeroU32,
}

impl Default for FlakePolicy {
    fn default() -> Self {
        Self { flaky_counts_as_passed: true, consecutive_good_runs: NonZeroU32::MIN }
    }
}

/// What makes a run of one provider good.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProviderPolicy {
    /// Tests that must pass; empty means every test that was not skipped must pass.
    pub required_tests: BTreeSet<String>,
    pub flake: FlakePolicy,
    /// The global LKG version set must be good with this provider.
    pub in_version_set: bool,
}

impl Default for ProviderPolicy {
    fn default() -> Self {
        Self { required_tests: BTreeSet::new(), flake: FlakePolicy::default(), in_version_set: true }
    }
}

/// A provider as the algorithm knows it: its commit history and its policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderSpec {
    pub history: History,
    pub policy: ProviderPolicy,
}

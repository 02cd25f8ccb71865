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

/// A test's result in one run with all its attempts folded in, as the SQL index keeps it.
///
/// The fold is "the last attempt that ran decides; a pass after a failure is flaky": see
/// [`TestStatus::then`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[repr(u8)]
pub enum TestStatus {
    /// Nothing ran (or only skips).
    Skip = 0,
    Pass = 1,
    Fail = 2,
    /// Failed, then passed on retry.
    Flaky = 3,
}

impl TestStatus {
    /// The status of a test whose attempts so far folded to `self` and then went on as `next`.
    pub fn then(self, next: TestStatus) -> TestStatus {
        use TestStatus::*;
        match (self, next) {
            (status, Skip) => status,
            (_, Fail) => Fail,
            (_, Flaky) | (Fail | Flaky, Pass) => Flaky,
            (Skip | Pass, Pass) => Pass,
        }
    }

    /// The folded status of attempts made in this order.
    pub fn of_attempts(attempts: &[Attempt]) -> TestStatus {
        attempts.iter().fold(TestStatus::Skip, |status, attempt| status.then((*attempt).into()))
    }

    pub(crate) fn from_bits(bits: u32) -> TestStatus {
        match bits & 3 {
            0 => TestStatus::Skip,
            1 => TestStatus::Pass,
            2 => TestStatus::Fail,
            _ => TestStatus::Flaky,
        }
    }
}

impl From<Attempt> for TestStatus {
    fn from(attempt: Attempt) -> Self {
        match attempt {
            Attempt::Pass => TestStatus::Pass,
            Attempt::Fail => TestStatus::Fail,
            Attempt::Skip => TestStatus::Skip,
        }
    }
}

/// A test name interned in a [`TestCatalog`](crate::TestCatalog): a dense index, like the id of
/// the SQL index's `tests` table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TestId(pub u32);

impl TestId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A test id and its folded status in four bytes: what a [`CompactRun`] lists (50 million of them
/// are 200 MB, not 400).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "(TestId, TestStatus)", from = "(TestId, TestStatus)")]
pub struct CompactResult(u32);

impl CompactResult {
    /// The largest test id that fits.
    pub const MAX_TEST_ID: u32 = (1 << 30) - 1;

    /// Panics when `test` is above [`CompactResult::MAX_TEST_ID`].
    pub fn new(test: TestId, status: TestStatus) -> Self {
        assert!(test.0 <= Self::MAX_TEST_ID, "test id {} does not fit a compact result", test.0);
        Self(test.0 << 2 | status as u32)
    }

    pub fn test(self) -> TestId {
        TestId(self.0 >> 2)
    }

    pub fn status(self) -> TestStatus {
        TestStatus::from_bits(self.0)
    }

    pub(crate) fn bits(self) -> u32 {
        self.0
    }
}

impl From<(TestId, TestStatus)> for CompactResult {
    fn from((test, status): (TestId, TestStatus)) -> Self {
        Self::new(test, status)
    }
}

impl From<CompactResult> for (TestId, TestStatus) {
    fn from(result: CompactResult) -> Self {
        (result.test(), result.status())
    }
}

impl std::fmt::Debug for CompactResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CompactResult").field(&self.test().0).field(&self.status()).finish()
    }
}

/// A run whose tests are interned ids with folded statuses: the compact form a loader from the
/// SQL index builds, and what large recomputations take (a [`Run`] names every test in full).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactRun {
    pub build_id: String,
    pub provider: String,
    /// A commit id or tag of the Kubernetes history.
    pub kubernetes_version: String,
    /// A commit id or tag of the provider's history.
    pub provider_version: String,
    /// Ids from the catalog the run is judged with; a test listed twice is one test whose
    /// statuses follow each other.
    pub results: Vec<CompactResult>,
    /// The build's own verdict (`finished.json` `passed`), when it has one: see [`Run::build_passed`].
    #[serde(default)]
    pub build_passed: Option<bool>,
}

/// A run whose tests were judged before, against its provider's current policy
/// ([`RunJudge`](crate::RunJudge)): what a loader adds when it keeps each build's verdict instead of
/// its results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JudgedRun {
    pub build_id: String,
    pub provider: String,
    /// A commit id or tag of the Kubernetes history.
    pub kubernetes_version: String,
    /// A commit id or tag of the provider's history.
    pub provider_version: String,
    /// The verdict on its tests; its flaky tests are ids of the engine's catalog.
    pub verdict: crate::RunVerdict,
    /// The build's own verdict: see [`Run::build_passed`].
    #[serde(default)]
    pub build_passed: Option<bool>,
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
    /// The build's own verdict (`finished.json` `passed`), when it has one. A build that failed
    /// is never good evidence, whatever its tests say: it failed for a reason (a required suite,
    /// a step outside the tests) that the tests alone may not show. `None` leaves it to the tests.
    #[serde(default)]
    pub build_passed: Option<bool>,
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

//! A provider's known failures (providers.yaml `known_failures:`) applied to a suite's outcome, as
//! SovereignCloudStack's standards allow "a fixed list of tests ... each with a description of
//! why": a suite whose only failing tests are known ones passes, and says which, with each reason
//! and link; a known failure that passed is reported, so its entry can go; any other failure still
//! fails the suite. A suite that failed with no failing test in its JUnit (it could not run, it
//! was cut short) stays failed: nothing known explains it.
//!
//! The JUnit files are only read: what e2e.test wrote is published as it wrote it, a known failure
//! red in TestGrid as it failed. The run's `metadata.json` lists what was applied
//! (`results::layout::keys::KNOWN_FAILURES`, a [`Met`] each); the index reads it back and stores those failures as known ones.

use std::path::PathBuf;

use config::{KnownFailure, Provider};
use junit::{ReadOptions, Report, Status};
use serde::Serialize;

use super::SuiteOutcome;

/// A test of the run covered by a `known_failures` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Met {
    pub suite: String,
    pub test: String,
    /// `failed` (as known), or `passed` (the entry may go; a flaky pass counts).
    pub result: &'static str,
    pub reason: String,
    pub link: String,
}

/// The failing and passing tests of a suite's reports, sorted by the provider's list.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Judged {
    pub known_failed: Vec<Met>,
    pub known_passed: Vec<Met>,
    /// Failing tests no entry covers.
    pub unlisted: Vec<String>,
}

/// Sorts every failing or passing case of `reports` by `provider`'s known failures for `suite`.
pub fn judge(provider: &Provider, suite: &str, reports: &[Report]) -> Judged {
    let mut judged = Judged::default();
    let met = |entry: &KnownFailure, test: &str, result| Met {
        suite: suite.to_owned(),
        test: test.to_owned(),
        result,
        reason: entry.reason.clone(),
        link: entry.link.clone(),
    };
    for (_, case) in reports.iter().flat_map(Report::cases) {
        let known = provider.known_failure(suite, &case.name);
        match (case.status(), known) {
            (Status::Failed | Status::Error, Some(entry)) => judged.known_failed.push(met(entry, &case.name, "failed")),
            (Status::Failed | Status::Error, None) => judged.unlisted.push(case.name.clone()),
            (Status::Passed | Status::Flaky, Some(entry)) => judged.known_passed.push(met(entry, &case.name, "passed")),
            _ => {}
        }
    }
    judged
}

/// `outcome` with the provider's known failures applied (see the module docs), and the known
/// failures it met. A JUnit file that cannot be read leaves the outcome as it was.
pub fn apply(provider: &Provider, suite: &str, outcome: SuiteOutcome) -> (SuiteOutcome, Vec<Met>) {
    if provider.known_failures.is_empty() {
        return (outcome, Vec::new());
    }
    let Some(reports) = read_all(&outcome.junit) else { return (outcome, Vec::new()) };
    let judged = judge(provider, suite, &reports);
    let mut outcome = outcome;
    if !outcome.passed && judged.unlisted.is_empty() && !judged.known_failed.is_empty() {
        outcome.passed = true;
    }
    for met in &judged.known_failed {
        outcome.summary.push_str(&format!("; known failure: {} ({}; {})", met.test, met.reason, met.link));
    }
    for met in &judged.known_passed {
        tracing::warn!("suite {suite}: known failure {} passed: take it off known_failures ({})", met.test, met.link);
        outcome.summary.push_str(&format!("; known failure passed, take it off known_failures: {}", met.test));
    }
    let mut all = judged.known_failed;
    all.extend(judged.known_passed);
    (outcome, all)
}

fn read_all(files: &[PathBuf]) -> Option<Vec<Report>> {
    files.iter().map(|file| junit::read_file(file, &ReadOptions::default()).ok()).collect()
}

#[cfg(test)]
mod tests;

//! A published build read back from the store, as the rows the SQL index keeps.
//!
//! Reading is forgiving where TestGrid is: a broken JUnit file or a `finished.json` of the wrong
//! shape becomes a [`Problem`] naming the object, and everything else in the build is still read.
//! Only a build without a readable `started.json` cannot be indexed (there is no start time to
//! place it by), and that is an error naming it.
//!
//! Each record carries a digest of what it was read from (the bytes of `started.json`,
//! `finished.json` and the JUnit files, and whether an unfinished build is running or aborted):
//! the index compares digests to make indexing the same build again a no-op.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::layout::{
    self, ARTIFACTS, BuildLocation, FINISHED_JSON, Finished, JobResult, STARTED_JSON, Started, Versions,
};
use super::store::{ResultStore, StoreError};
use junit::{self, ReadOptions, Status};

/// Failure messages longer than this are cut (the full text stays in the artifact).
const MAX_MESSAGE_BYTES: usize = 16 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{url}: not a build: {STARTED_JSON} is missing (Prow writes it first; was the upload cut short?)")]
    MissingStarted { url: String },
    #[error("{url}: not what TestGrid expects, so the build cannot be placed: {source}")]
    BadStarted { url: String, source: serde_json::Error },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// How far a build got, as the index records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No `finished.json` yet, and the build may still be running.
    Running,
    /// No `finished.json`, and the build is over: it was killed.
    Aborted,
    Finished,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Running => "running",
            State::Aborted => "aborted",
            State::Finished => "finished",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        [State::Running, State::Aborted, State::Finished].into_iter().find(|state| state.as_str() == s)
    }
}

/// What to make of a build without `finished.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfinished {
    /// Its process is known to be gone (e.g. publishing after the run ended): aborted.
    Aborted,
    /// Running, unless it started longer ago than this (Prow's job timeout, say): then aborted.
    RunningUnlessOlderThan(Duration),
}

/// A test's outcome as the index stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TestStatus {
    Pass,
    Fail,
    Skip,
    Flaky,
    /// Failed, and the build's provider lists it as a known failure (`finished.json` metadata
    /// `known-failures`), so its run passed without it.
    KnownFailure,
}

impl TestStatus {
    pub const ALL: [TestStatus; 5] =
        [TestStatus::Pass, TestStatus::Fail, TestStatus::Skip, TestStatus::Flaky, TestStatus::KnownFailure];

    pub fn as_str(self) -> &'static str {
        match self {
            TestStatus::Pass => "pass",
            TestStatus::Fail => "fail",
            TestStatus::Skip => "skip",
            TestStatus::Flaky => "flaky",
            TestStatus::KnownFailure => "known-failure",
        }
    }

    pub fn parse(s: &str) -> Option<TestStatus> {
        TestStatus::ALL.into_iter().find(|t| t.as_str() == s)
    }

    fn of(status: Status) -> TestStatus {
        match status {
            Status::Passed => TestStatus::Pass,
            Status::Failed | Status::Error => TestStatus::Fail,
            Status::Skipped => TestStatus::Skip,
            Status::Flaky => TestStatus::Flaky,
        }
    }
}

/// One test case of one build.
#[derive(Debug, Clone, PartialEq)]
pub struct TestResult {
    pub suite: String,
    pub name: String,
    pub status: TestStatus,
    pub duration_seconds: Option<f64>,
    /// A failure's message; a skip's reason, when the skip gives one (not ginkgo's bare
    /// "skipped"). Stored in the index's `test_results.failure_message`.
    pub message: Option<String>,
}

/// Something in a build that could not be read; the rest of the build was.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Problem {
    /// The object, relative to the build directory (e.g. `artifacts/junit_01.xml`).
    pub file: String,
    pub message: String,
}

/// A build's own row in the index: where it lives, how far it got, and its versions.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildInfo {
    pub job: String,
    pub build: String,
    /// The build directory relative to the store root: `logs/<job>/<build>` or `pr-logs/pull/…`.
    pub path: String,
    /// The PR number, for presubmits.
    pub pull: Option<String>,
    pub provider: Option<String>,
    pub state: State,
    pub started_at: i64,
    pub finished_at: Option<i64>,
    pub passed: Option<bool>,
    pub result: Option<String>,
    pub versions: Versions,
    /// The build directory's URL in the store.
    pub artifacts_url: String,
    /// Hex SHA-256 of what the record was read from.
    pub digest: String,
}

/// A build as the index keeps it: its row, its test results, and the files that could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct BuildRecord {
    pub info: BuildInfo,
    pub results: Vec<TestResult>,
    pub problems: Vec<Problem>,
}

/// Options for [`read_build`].
#[derive(Debug, Clone, Copy)]
pub struct ReadBuildOptions {
    pub junit: ReadOptions,
    pub unfinished: Unfinished,
}

impl Default for ReadBuildOptions {
    fn default() -> Self {
        // Prow's default job timeout is 2h; a day leaves room for the longest conformance jobs.
        let day = Duration::from_secs(24 * 3600);
        ReadBuildOptions { junit: ReadOptions::default(), unfinished: Unfinished::RunningUnlessOlderThan(day) }
    }
}

/// Reads a build directory from the store.
pub async fn read_build(
    store: &ResultStore,
    location: &BuildLocation,
    opts: &ReadBuildOptions,
) -> Result<BuildRecord, RecordError> {
    let dir = location.object_dir();
    let url = store.url_of(&dir);
    let mut digest = Sha256::new();

    let started_bytes = store
        .get(&format!("{dir}/{STARTED_JSON}"))
        .await?
        .ok_or_else(|| RecordError::MissingStarted { url: url.clone() })?;
    let started: Started = serde_json::from_slice(&started_bytes)
        .map_err(|source| RecordError::BadStarted { url: store.url_of(&format!("{dir}/{STARTED_JSON}")), source })?;
    digest_part(&mut digest, STARTED_JSON, &started_bytes);

    let mut problems = Vec::new();
    let finished = match store.get(&format!("{dir}/{FINISHED_JSON}")).await? {
        None => None,
        Some(bytes) => {
            digest_part(&mut digest, FINISHED_JSON, &bytes);
            match serde_json::from_slice::<Finished>(&bytes) {
                Ok(finished) => Some(finished),
                Err(e) => {
                    problems.push(Problem {
                        file: FINISHED_JSON.into(),
                        message: format!("not what TestGrid expects, so the outcome is unknown: {e}"),
                    });
                    // It exists, so the build ended; what it says is lost.
                    Some(Finished::default())
                }
            }
        }
    };
    let state = match (&finished, opts.unfinished) {
        (Some(_), _) => State::Finished,
        (None, Unfinished::Aborted) => State::Aborted,
        (None, Unfinished::RunningUnlessOlderThan(limit)) if age(started.timestamp) > limit => State::Aborted,
        (None, _) => State::Running,
    };
    digest_part(&mut digest, "state", state.as_str().as_bytes());

    let mut results = read_junit(store, &dir, location.build(), opts, &mut digest, &mut problems).await?;
    let finished = finished.unwrap_or_default();
    mark_known_failures(&mut results, &finished.metadata);
    let mut versions = Versions::from_metadata(&finished.metadata);
    let started_versions = Versions::from_metadata(&started.metadata);
    versions.repo_commit = versions.repo_commit.or(started.repo_commit.clone());
    // What Prow recorded (started.json's repos, finished.json's metadata.repos winning), and the
    // Kubernetes version from Prow's own fields when the harness's key is absent.
    let mut repos = started.repos.clone();
    repos.append(&mut versions.repos);
    versions.repos = repos;
    if versions.kubernetes_version.is_none() {
        versions.kubernetes_version = layout::prow_kubernetes_version(&started, &finished, &versions.repos);
    }
    let provider = versions.provider.clone().or(started_versions.provider);
    let pull = match location {
        BuildLocation::Presubmit { pr, .. } => Some(pr.to_string()),
        BuildLocation::Periodic { .. } => started.pull.clone(),
    };
    let info = BuildInfo {
        job: location.job().to_owned(),
        build: location.build().to_owned(),
        path: dir,
        pull,
        provider,
        state,
        started_at: started.timestamp,
        finished_at: finished.timestamp,
        passed: finished.passed.or(match finished.result {
            Some(JobResult::Success) => Some(true),
            Some(JobResult::Failure) => Some(false),
            _ => None,
        }),
        result: finished.result.map(|r| r.as_str().to_owned()),
        versions,
        artifacts_url: url,
        digest: hex::encode(digest.finalize()),
    };
    Ok(BuildRecord { info, results, problems })
}

/// The failed results the build's provider lists as known failures (metadata `known-failures`
/// entries whose `result` is `failed`, by test name) become [`TestStatus::KnownFailure`]. By name
/// alone: an entry's `suite` is the harness's suite, not the JUnit `<testsuite>` the index keeps.
fn mark_known_failures(results: &mut [TestResult], metadata: &layout::Metadata) {
    let Some(layout::MetaValue::Other(serde_json::Value::Array(entries))) =
        metadata.0.get(layout::keys::KNOWN_FAILURES)
    else {
        return;
    };
    let failed: BTreeSet<&str> =
        entries.iter().filter(|entry| entry["result"] == "failed").filter_map(|entry| entry["test"].as_str()).collect();
    for result in results.iter_mut().filter(|r| r.status == TestStatus::Fail && failed.contains(r.name.as_str())) {
        result.status = TestStatus::KnownFailure;
    }
}

/// Reads every JUnit artifact (by TestGrid's name rule) of a build, in path order.
async fn read_junit(
    store: &ResultStore,
    dir: &str,
    build: &str,
    opts: &ReadBuildOptions,
    digest: &mut Sha256,
    problems: &mut Vec<Problem>,
) -> Result<Vec<TestResult>, RecordError> {
    let mut results = Vec::new();
    let prefix = format!("{dir}/{ARTIFACTS}");
    for entry in store.list(&prefix).await? {
        let relative = &entry.path[dir.len() + 1..];
        if layout::junit_artifact(&format!("{build}/{relative}")).is_none() {
            continue;
        }
        let url = store.url_of(&entry.path);
        if entry.size > opts.junit.max_file_bytes {
            digest_part(digest, relative, entry.size.to_string().as_bytes());
            let err = junit::JunitError::TooLarge {
                file: url.into(),
                size: Some(entry.size),
                limit: opts.junit.max_file_bytes,
            };
            problems.push(Problem { file: relative.to_owned(), message: err.to_string() });
            continue;
        }
        let Some(bytes) = store.get(&entry.path).await? else { continue };
        digest_part(digest, relative, &bytes);
        match junit::read_bytes(&bytes, Path::new(&url), &opts.junit) {
            Ok(report) => results.extend(report.cases().map(|(suite, case)| TestResult {
                suite: suite.name.clone(),
                name: case.name.clone(),
                status: TestStatus::of(case.status()),
                duration_seconds: case.total_time(),
                message: case.failure().or_else(|| case.skip_reason()).map(detail_message),
            })),
            Err(e) => problems.push(Problem { file: relative.to_owned(), message: e.to_string() }),
        }
    }
    Ok(results)
}

/// The message of a failure (or a skip's reason), else the start of its text; cut to a bounded
/// size.
fn detail_message(detail: &junit::Detail) -> String {
    let text = detail.message.as_deref().filter(|m| !m.is_empty()).unwrap_or(&detail.text.text);
    let mut end = text.len().min(MAX_MESSAGE_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    // Postgres text cannot hold NUL.
    text[..end].replace('\0', "")
}

fn digest_part(digest: &mut Sha256, name: &str, bytes: &[u8]) {
    digest.update((name.len() as u64).to_le_bytes());
    digest.update(name.as_bytes());
    digest.update((bytes.len() as u64).to_le_bytes());
    digest.update(bytes);
}

fn age(started_epoch: i64) -> Duration {
    Duration::from_secs(super::unix_now().saturating_sub(started_epoch).max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{MetaValue, Metadata};

    fn result(name: &str, status: TestStatus) -> TestResult {
        TestResult { suite: "s".into(), name: name.into(), status, duration_seconds: None, message: None }
    }

    #[test]
    fn failures_the_metadata_lists_as_known_failed_become_known_failures_and_nothing_else_changes() {
        let listed = serde_json::json!([
            {"suite": "x", "test": "a", "result": "failed", "reason": "r", "link": "https://l/1"},
            {"suite": "x", "test": "b", "result": "passed", "reason": "r", "link": "https://l/2"},
            {"suite": "x", "test": "c", "result": "failed", "reason": "r", "link": "https://l/3"},
        ]);
        let metadata = Metadata([(layout::keys::KNOWN_FAILURES.to_owned(), MetaValue::Other(listed))].into());
        let mut results = vec![
            result("a", TestStatus::Fail),
            result("b", TestStatus::Fail),
            result("c", TestStatus::Pass),
            result("d", TestStatus::Fail),
        ];
        mark_known_failures(&mut results, &metadata);
        let statuses: Vec<TestStatus> = results.iter().map(|r| r.status).collect();
        assert_eq!(statuses, [TestStatus::KnownFailure, TestStatus::Fail, TestStatus::Pass, TestStatus::Fail]);

        // A metadata value of another shape marks nothing.
        let odd = Metadata([(layout::keys::KNOWN_FAILURES.to_owned(), MetaValue::String("a".into()))].into());
        let mut results = vec![result("a", TestStatus::Fail)];
        mark_known_failures(&mut results, &odd);
        assert_eq!(results[0].status, TestStatus::Fail);
    }

    #[test]
    fn every_status_reads_back_from_its_name() {
        for status in TestStatus::ALL {
            assert_eq!(TestStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(TestStatus::parse("known failure"), None);
    }
}

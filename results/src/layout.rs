//! The Prow/GCS build layout TestGrid reads, written to and read from a local directory.
//!
//! ```text
//! logs/<job>/latest-build.txt                      newest build id (periodic and postsubmit jobs)
//! logs/<job>/<build>/started.json                  written when the build starts
//! logs/<job>/<build>/build-log.txt
//! logs/<job>/<build>/artifacts/junit_*.xml
//! logs/<job>/<build>/finished.json                 written last: its absence means running/killed
//! pr-logs/pull/<org_repo>/<pr>/<job>/<build>/…     presubmits, same files
//! pr-logs/pull/<org_repo>/<pr>/<job>/latest-build.txt
//! pr-logs/directory/<job>/latest-build.txt         what Prow's initupload also writes for presubmits
//! ```
//!
//! `started.json` and `finished.json` follow TestGrid's `metadata/job.go` field for field: `timestamp`
//! (epoch seconds), `node`, `pull`, `repos`, `repo-commit`, `metadata` in [`Started`]; `timestamp`,
//! `passed`, `result`, `revision`, `metadata` in [`Finished`]. `metadata` values are strings or
//! nested objects ([`MetaValue`]); the harness's version keys are in [`keys`]. Like Prow's
//! initupload, [`Layout::start`] writes `started.json` and `latest-build.txt`; [`BuildWriter::finish`]
//! writes `finished.json`, last. Each file is written to a temporary name and renamed, so a reader
//! never sees half a file.
//!
//! A reader reports a build without `finished.json` as [`BuildState::Running`], or as
//! [`BuildState::Aborted`] when the caller knows the build is no longer running ([`Liveness`]).
//! (TestGrid itself treats a missing `started.json` as "pending"; here it is an error, since the
//! harness always writes it first.) JUnit artifacts are found with TestGrid's own file name rule,
//! [`JUNIT_ARTIFACT_PATTERN`].

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use junit::{self, JunitError, ReadOptions, Report};

pub const STARTED_JSON: &str = "started.json";
pub const FINISHED_JSON: &str = "finished.json";
pub const BUILD_LOG: &str = "build-log.txt";
pub const ARTIFACTS: &str = "artifacts";
pub const LATEST_BUILD: &str = "latest-build.txt";
/// The suite (JUnit classname) of the steps `harness run` records as test cases, as kubetest2 does:
/// Build, Up, Deploy, Test, DumpClusterLogs, Down.
pub const RUNNER_SUITE: &str = "harness";
/// The artifact those steps are written to.
pub const RUNNER_FILE: &str = "junit_runner.xml";

/// TestGrid's JUnit file rule (`util/gcs/read.go`), matched against an object path: a file is JUnit
/// when its name is `junit.xml`, `junit_<context>[_<timestamp>][_<thread>].xml` or `junit<anything>.xml`,
/// after at least one directory.
pub const JUNIT_ARTIFACT_PATTERN: &str = r".+/junit((_[^_]+)?(_\d+-\d+)?(_\d+)?|.+)?\.xml$";

// Bytes and ASCII classes, as in Go's RE2: `\d` is 0-9 only.
static JUNIT_ARTIFACT: LazyLock<regex::bytes::Regex> = LazyLock::new(|| {
    regex::bytes::RegexBuilder::new(JUNIT_ARTIFACT_PATTERN).unicode(false).build().expect("TestGrid's pattern compiles")
});

/// Keys of `finished.json`'s `metadata` the harness writes.
pub mod keys {
    pub const KUBERNETES_VERSION: &str = "kubernetes-version";
    pub const PROVIDER: &str = "provider";
    pub const PROVIDER_VERSION: &str = "provider-version";
    pub const CCM_VERSION: &str = "ccm-version";
    /// TestGrid's own key: overrides the column version taken from `repo-commit`.
    pub const JOB_VERSION: &str = "job-version";
    pub const REPO_COMMIT: &str = "repo-commit";
    /// An object `{ "org/repo": "ref" }`.
    pub const REPOS: &str = "repos";
    pub const REVISION: &str = "revision";
    /// An upgrade run's older release (`harness run --upgrade-from`): the cluster came up at it,
    /// was upgraded to `kubernetes-version` and rolled back to it.
    pub const UPGRADE_FROM: &str = "upgrade-from";
    /// The order its stages ran in (`control-plane,nodes,ccm`).
    pub const UPGRADE_ORDER: &str = "upgrade-order";
    /// In `started.json`: the job and build `harness run` writes the directory for, so `harness
    /// publish --dir` (and the next run) know where it goes.
    pub const HARNESS_JOB: &str = "harness-job";
    /// The provider's listed tests a run met (`providers.yaml` `known_failures`): a list of
    /// `{"suite", "test", "result": "failed" | "passed", "reason", "link"}`.
    pub const KNOWN_FAILURES: &str = "known-failures";
    pub const HARNESS_BUILD: &str = "harness-build";
}

/// `started.json`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Started {
    /// Epoch seconds.
    pub timestamp: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The PR number under test, for presubmits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull: Option<String>,
    /// `{ "org/repo": "branch or branch:sha,pr:sha" }`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub repos: BTreeMap<String, String>,
    #[serde(rename = "repo-commit", default, skip_serializing_if = "Option::is_none")]
    pub repo_commit: Option<String>,
    /// Deprecated by TestGrid in favour of `finished.json`'s; read for old builds.
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
    /// Deprecated by TestGrid (`DeprecatedJobVersion`); written by old bootstrap jobs. Read only.
    #[serde(rename = "job-version", default, skip_serializing_if = "Option::is_none")]
    pub job_version: Option<String>,
}

/// `finished.json`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Finished {
    /// Epoch seconds; absent in a build TestGrid considers incomplete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    /// Written even when unknown (`null`), as TestGrid's `*bool` does.
    #[serde(default)]
    pub passed: Option<bool>,
    /// Deprecated by TestGrid in favour of `passed`, still written by Prow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<JobResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    #[serde(default, skip_serializing_if = "Metadata::is_empty")]
    pub metadata: Metadata,
    /// Deprecated by TestGrid in favour of `metadata["job-version"]`; written by kubetest. Read only.
    #[serde(rename = "job-version", default, skip_serializing_if = "Option::is_none")]
    pub job_version: Option<String>,
}

/// `finished.json`'s `result`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum JobResult {
    Success,
    Failure,
    Aborted,
    Error,
    Other(String),
}

/// `metadata`: TestGrid's `map[string]interface{}`, whose values are strings or nested objects.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Metadata(pub BTreeMap<String, MetaValue>);

/// One `metadata` value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MetaValue {
    String(String),
    Map(Metadata),
    /// Lists, numbers, booleans: kept as they are, as TestGrid keeps them.
    Other(serde_json::Value),
}

/// The versions the harness records for a build, as `finished.json` metadata.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Versions {
    pub kubernetes_version: Option<String>,
    pub provider: Option<String>,
    pub provider_version: Option<String>,
    pub ccm_version: Option<String>,
    pub job_version: Option<String>,
    pub repo_commit: Option<String>,
    pub repos: BTreeMap<String, String>,
}

/// Where a build lives in the layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildLocation {
    /// Periodic and postsubmit jobs: `logs/<job>/<build>`.
    Periodic { job: String, build: String },
    /// `pr-logs/pull/<org_repo>/<pr>/<job>/<build>`; `org_repo` is `<org>_<repo>`.
    Presubmit { org_repo: String, pr: u64, job: String, build: String },
}

/// Whether a build without `finished.json` may still be running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// It may be: report it as running.
    MayBeRunning,
    /// It is not (its process is gone): report it as aborted.
    Ended,
}

/// How far a build got.
#[derive(Debug, Clone, PartialEq)]
pub enum BuildState {
    Running,
    Aborted,
    Finished(Finished),
}

/// A build read back from the layout.
#[derive(Debug, Clone, PartialEq)]
pub struct Build {
    pub dir: PathBuf,
    pub started: Started,
    pub state: BuildState,
    /// JUnit artifacts by TestGrid's rule, relative to the build directory, sorted.
    pub junit: Vec<PathBuf>,
    pub has_build_log: bool,
}

/// The file name parts TestGrid reads from a JUnit artifact's name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JunitArtifact {
    pub context: String,
    pub timestamp: String,
    pub thread: String,
}

#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error("{dir}: not a build: {STARTED_JSON} is missing")]
    MissingStarted { dir: PathBuf },
    #[error("{file}: not what TestGrid expects: {source}")]
    BadJson { file: PathBuf, source: serde_json::Error },
    #[error("{file}: cannot {action}: {source}")]
    Io { action: &'static str, file: PathBuf, source: io::Error },
    #[error(
        "invalid {what} {value:?}: use letters, digits, '.', '_' and '-', starting with a letter or digit, at most {MAX_NAME_BYTES} characters"
    )]
    InvalidName { what: &'static str, value: String },
    #[error("{name:?} is not a JUnit file name TestGrid reads (pattern {JUNIT_ARTIFACT_PATTERN}), e.g. junit_01.xml")]
    NotJunitName { name: String },
    #[error("{dir}: build already started ({STARTED_JSON} exists)")]
    AlreadyStarted { dir: PathBuf },
    #[error("{path}: an artifact path must be relative and stay inside {ARTIFACTS}/")]
    BadArtifactPath { path: PathBuf },
}

type Result<T> = std::result::Result<T, LayoutError>;

fn io_err(action: &'static str, file: &Path) -> impl FnOnce(io::Error) -> LayoutError {
    let file = file.to_path_buf();
    move |source| LayoutError::Io { action, file, source }
}

/// The layout rooted at a local directory (the bucket's root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    root: PathBuf,
}

/// A started build whose files are being written; [`BuildWriter::finish`] ends it.
#[derive(Debug)]
pub struct BuildWriter {
    dir: PathBuf,
}

impl JobResult {
    pub fn as_str(&self) -> &str {
        match self {
            JobResult::Success => "SUCCESS",
            JobResult::Failure => "FAILURE",
            JobResult::Aborted => "ABORTED",
            JobResult::Error => "ERROR",
            JobResult::Other(s) => s,
        }
    }
}

impl From<String> for JobResult {
    fn from(s: String) -> Self {
        match s.as_str() {
            "SUCCESS" => JobResult::Success,
            "FAILURE" => JobResult::Failure,
            "ABORTED" => JobResult::Aborted,
            "ERROR" => JobResult::Error,
            _ => JobResult::Other(s),
        }
    }
}

impl From<JobResult> for String {
    fn from(r: JobResult) -> Self {
        r.as_str().to_owned()
    }
}

impl Metadata {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of `key` when it is a string (TestGrid's `Metadata.String`).
    pub fn string(&self, key: &str) -> Option<&str> {
        match self.0.get(key)? {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The value of `key` when it is an object (TestGrid's `Metadata.Meta`).
    pub fn map(&self, key: &str) -> Option<&Metadata> {
        match self.0.get(key)? {
            MetaValue::Map(m) => Some(m),
            _ => None,
        }
    }

    pub fn insert_string(&mut self, key: &str, value: impl Into<String>) {
        self.0.insert(key.to_owned(), MetaValue::String(value.into()));
    }

    pub fn insert_map(&mut self, key: &str, value: Metadata) {
        self.0.insert(key.to_owned(), MetaValue::Map(value));
    }
}

impl Versions {
    /// The metadata object to put in `finished.json`.
    pub fn to_metadata(&self) -> Metadata {
        let mut m = Metadata::default();
        let fields = [
            (keys::KUBERNETES_VERSION, &self.kubernetes_version),
            (keys::PROVIDER, &self.provider),
            (keys::PROVIDER_VERSION, &self.provider_version),
            (keys::CCM_VERSION, &self.ccm_version),
            (keys::JOB_VERSION, &self.job_version),
            (keys::REPO_COMMIT, &self.repo_commit),
        ];
        for (key, value) in fields {
            if let Some(v) = value {
                m.insert_string(key, v.clone());
            }
        }
        if !self.repos.is_empty() {
            let repos = self.repos.iter().map(|(k, v)| (k.clone(), MetaValue::String(v.clone()))).collect();
            m.insert_map(keys::REPOS, Metadata(repos));
        }
        m
    }

    /// Reads the harness's keys back; values of the wrong shape are ignored, as TestGrid does.
    pub fn from_metadata(m: &Metadata) -> Versions {
        let s = |key| m.string(key).map(str::to_owned);
        let repos =
            m.map(keys::REPOS).map(|r| r.0.keys().filter_map(|k| Some((k.clone(), r.string(k)?.to_owned()))).collect());
        Versions {
            kubernetes_version: s(keys::KUBERNETES_VERSION),
            provider: s(keys::PROVIDER),
            provider_version: s(keys::PROVIDER_VERSION),
            ccm_version: s(keys::CCM_VERSION),
            job_version: s(keys::JOB_VERSION),
            repo_commit: s(keys::REPO_COMMIT),
            repos: repos.unwrap_or_default(),
        }
    }
}

/// The commit a `repos` value names: `master:<sha>` or, for a presubmit, `master:<base>,<pr>:<sha>`
/// (the base: the code the branch had). `None` when it names a branch only (`master`).
pub fn repo_ref_commit(value: &str) -> Option<&str> {
    let base = value.split(',').next()?;
    let (_, sha) = base.split_once(':')?;
    let sha = sha.trim();
    (!sha.is_empty()).then_some(sha)
}

/// The Kubernetes version a build tested, from the fields Prow's pod-utils, kubetest and kubetest2
/// write, for builds without the harness's `kubernetes-version` key: `finished.json`
/// `metadata["job-version"]` (what kubetest2 and kubetest record: `v1.37.0-alpha.1.234+<sha>`),
/// the deprecated top-level `job-version` of `finished.json` then `started.json`, else the commit
/// of `kubernetes/kubernetes` in `repos`.
pub fn prow_kubernetes_version(
    started: &Started,
    finished: &Finished,
    repos: &BTreeMap<String, String>,
) -> Option<String> {
    [finished.metadata.string(keys::JOB_VERSION), finished.job_version.as_deref(), started.job_version.as_deref()]
        .into_iter()
        .flatten()
        .find(|version| !version.is_empty())
        .map(str::to_owned)
        .or_else(|| repos.get(KUBERNETES_REPO).and_then(|value| repo_ref_commit(value)).map(str::to_owned))
}

/// The `repos` key of kubernetes/kubernetes.
pub const KUBERNETES_REPO: &str = "kubernetes/kubernetes";

/// The version TestGrid shows for a build's column (`metadata.Version`): the first of `revision`,
/// `repo-commit`, `job-version` in `finished.json`'s metadata, else `started.json`'s `repo-commit`,
/// else `missing`; the part after a `+`, cut to 9 characters. (TestGrid also consults the deprecated
/// top-level `job-version`/`repo-version` fields first; the harness never writes them.)
pub fn column_version(started: &Started, finished: &Finished) -> String {
    let from_metadata =
        [keys::REVISION, keys::REPO_COMMIT, keys::JOB_VERSION].into_iter().map(|k| finished.metadata.string(k));
    let value = from_metadata
        .chain(std::iter::once(started.repo_commit.as_deref()))
        .flatten()
        .find(|v| !v.is_empty())
        .unwrap_or("missing");
    let after_plus = value.split_once('+').map_or(value, |(_, rest)| rest);
    after_plus.chars().take(9).collect()
}

/// TestGrid's reading of a JUnit artifact's path (`parseSuitesMeta`): `None` when the path is not
/// a JUnit file by its rule. The path needs a directory before the name, as object names have.
pub fn junit_artifact(object_path: &str) -> Option<JunitArtifact> {
    let caps = JUNIT_ARTIFACT.captures(object_path.as_bytes())?;
    let part = |i: usize| {
        let s = caps.get(i).map_or(&b""[..], |m| m.as_bytes());
        String::from_utf8_lossy(s.get(1..).unwrap_or_default()).into_owned()
    };
    let (mut context, timestamp, thread) = (part(2), part(3), part(4));
    if context.is_empty() && timestamp.is_empty() && thread.is_empty() {
        context = caps.get(1).map_or(String::new(), |m| String::from_utf8_lossy(m.as_bytes()).into_owned());
    }
    Some(JunitArtifact { context, timestamp, thread })
}

/// Job names, build ids and `org_repo`s become path segments: keep them plain.
/// The last second of year 9999 (UTC): the latest `timestamp` a build may have, as RFC 3339 and
/// the dashboard write dates with four-digit years.
pub const MAX_TIMESTAMP: i64 = 253_402_300_799;

/// A job name, build id or `org_repo`: each is a directory name in every store.
pub const MAX_NAME_BYTES: usize = 200;

fn check_name(what: &'static str, value: &str) -> Result<()> {
    let mut chars = value.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if first_ok && rest_ok && value.len() <= MAX_NAME_BYTES {
        Ok(())
    } else {
        Err(LayoutError::InvalidName { what, value: value.to_owned() })
    }
}

impl BuildLocation {
    pub fn periodic(job: &str, build: &str) -> Result<Self> {
        check_name("job name", job)?;
        check_name("build id", build)?;
        Ok(BuildLocation::Periodic { job: job.to_owned(), build: build.to_owned() })
    }

    /// `org_repo` as Prow spells it: `<org>_<repo>`, e.g. `kubernetes_cloud-provider-aws`.
    pub fn presubmit(org_repo: &str, pr: u64, job: &str, build: &str) -> Result<Self> {
        check_name("org_repo", org_repo)?;
        check_name("job name", job)?;
        check_name("build id", build)?;
        Ok(BuildLocation::Presubmit { org_repo: org_repo.to_owned(), pr, job: job.to_owned(), build: build.to_owned() })
    }

    pub fn job(&self) -> &str {
        match self {
            BuildLocation::Periodic { job, .. } | BuildLocation::Presubmit { job, .. } => job,
        }
    }

    pub fn build(&self) -> &str {
        match self {
            BuildLocation::Periodic { build, .. } | BuildLocation::Presubmit { build, .. } => build,
        }
    }

    /// The job's directory, relative to the layout root.
    pub fn job_dir(&self) -> PathBuf {
        match self {
            BuildLocation::Periodic { job, .. } => Path::new("logs").join(job),
            BuildLocation::Presubmit { org_repo, pr, job, .. } => {
                Path::new("pr-logs/pull").join(org_repo).join(pr.to_string()).join(job)
            }
        }
    }

    /// The build's directory, relative to the layout root.
    pub fn relative_dir(&self) -> PathBuf {
        self.job_dir().join(self.build())
    }

    /// For a presubmit, Prow's alias object `pr-logs/directory/<job>/<build>.txt`, whose content is
    /// the URL of the build's directory (initupload's `AliasForSpec`).
    pub fn alias_file(&self) -> Option<PathBuf> {
        match self {
            BuildLocation::Presubmit { job, build, .. } => {
                Some(Path::new("pr-logs/directory").join(job).join(format!("{build}.txt")))
            }
            BuildLocation::Periodic { .. } => None,
        }
    }

    /// The build's directory as an object name prefix: `logs/<job>/<build>`.
    pub fn object_dir(&self) -> String {
        object_path(&self.relative_dir())
    }

    /// Every `latest-build.txt` Prow's initupload writes for this build, relative to the root.
    pub fn latest_build_files(&self) -> Vec<PathBuf> {
        let mut files = vec![self.job_dir().join(LATEST_BUILD)];
        if let BuildLocation::Presubmit { job, .. } = self {
            files.push(Path::new("pr-logs/directory").join(job).join(LATEST_BUILD));
        }
        files
    }
}

/// Writes `bytes` under a temporary name beside `path`, then renames it into place.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let partial = path.with_file_name(format!(".{name}.partial"));
    fs::write(&partial, bytes).map_err(io_err("write", &partial))?;
    fs::rename(&partial, path).map_err(io_err("rename into place", path))
}

fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    let mut json = serde_json::to_vec_pretty(value).expect("metadata serialises");
    json.push(b'\n');
    json
}

fn read_json<T: serde::de::DeserializeOwned>(file: &Path) -> Result<Option<T>> {
    let bytes = match fs::read(file) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("read", file)(e)),
    };
    serde_json::from_slice(&bytes).map(Some).map_err(|source| LayoutError::BadJson { file: file.to_path_buf(), source })
}

impl Layout {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Layout { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn build_dir(&self, location: &BuildLocation) -> PathBuf {
        self.root.join(location.relative_dir())
    }

    /// Starts a build: creates its directory, writes `started.json` and points `latest-build.txt`
    /// at it. Refuses a build that was already started.
    pub fn start(&self, location: &BuildLocation, started: &Started) -> Result<BuildWriter> {
        let dir = self.build_dir(location);
        fs::create_dir_all(&dir).map_err(io_err("create directory", &dir))?;
        let started_path = dir.join(STARTED_JSON);
        if started_path.exists() {
            return Err(LayoutError::AlreadyStarted { dir });
        }
        write_atomic(&started_path, &to_json(started))?;
        for latest in location.latest_build_files() {
            let path = self.root.join(latest);
            let parent = path.parent().expect("latest-build.txt has a directory");
            fs::create_dir_all(parent).map_err(io_err("create directory", parent))?;
            write_atomic(&path, location.build().as_bytes())?;
        }
        Ok(BuildWriter { dir })
    }

    /// Reads a build back (see [`read_build_dir`]).
    pub fn read_build(&self, location: &BuildLocation, liveness: Liveness) -> Result<Build> {
        read_build_dir(&self.build_dir(location), liveness)
    }

    /// The build ids of a periodic job, newest first (TestGrid's natural order).
    pub fn builds(&self, job: &str) -> Result<Vec<String>> {
        check_name("job name", job)?;
        let dir = self.root.join("logs").join(job);
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err("list", &dir)(e)),
        };
        let mut builds = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_err("list", &dir))?;
            if entry.file_type().map_err(io_err("list", &dir))?.is_dir() {
                builds.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        builds.sort_by(|a, b| natural_cmp(b, a));
        Ok(builds)
    }

    /// What `logs/<job>/latest-build.txt` says, if it exists.
    pub fn latest_build(&self, job: &str) -> Result<Option<String>> {
        check_name("job name", job)?;
        let path = self.root.join("logs").join(job).join(LATEST_BUILD);
        match fs::read_to_string(&path) {
            Ok(s) => Ok(Some(s.trim().to_owned())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err("read", &path)(e)),
        }
    }
}

/// Reads a build directory: `started.json` (required), `finished.json` (absent while running),
/// and the names of its JUnit artifacts.
pub fn read_build_dir(dir: &Path, liveness: Liveness) -> Result<Build> {
    let started: Started =
        read_json(&dir.join(STARTED_JSON))?.ok_or_else(|| LayoutError::MissingStarted { dir: dir.to_path_buf() })?;
    let state = match read_json::<Finished>(&dir.join(FINISHED_JSON))? {
        Some(finished) => BuildState::Finished(finished),
        None if liveness == Liveness::Ended => BuildState::Aborted,
        None => BuildState::Running,
    };
    let mut junit = Vec::new();
    find_junit(dir, Path::new(""), &mut junit)?;
    junit.sort();
    Ok(Build { dir: dir.to_path_buf(), started, state, junit, has_build_log: dir.join(BUILD_LOG).is_file() })
}

/// Collects files under `dir` whose object path (`<build>/<relative>`) TestGrid reads as JUnit.
fn find_junit(build_dir: &Path, relative: &Path, found: &mut Vec<PathBuf>) -> Result<()> {
    let dir = build_dir.join(relative);
    let build = build_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    for entry in fs::read_dir(&dir).map_err(io_err("list", &dir))? {
        let entry = entry.map_err(io_err("list", &dir))?;
        let rel = relative.join(entry.file_name());
        if entry.file_type().map_err(io_err("list", &dir))?.is_dir() {
            find_junit(build_dir, &rel, found)?;
        } else if junit_artifact(&format!("{build}/{}", object_path(&rel))).is_some() {
            found.push(rel);
        }
    }
    Ok(())
}

/// A relative path as an object name: `/`-separated whatever the platform.
pub(crate) fn object_path(path: &Path) -> String {
    path.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

impl Build {
    /// Parses each JUnit artifact on its own, so one bad file does not hide the others.
    pub fn junit_reports(&self, opts: &ReadOptions) -> Vec<(PathBuf, std::result::Result<Report, JunitError>)> {
        self.junit.iter().map(|rel| (rel.clone(), junit::read_file(&self.dir.join(rel), opts))).collect()
    }
}

impl BuildWriter {
    /// Starts a build in a directory of its own (a run's local build directory, which
    /// `harness publish --dir` takes): creates it and writes `started.json`. Refuses a directory
    /// that already holds a started build.
    pub fn create(dir: &Path, started: &Started) -> Result<BuildWriter> {
        fs::create_dir_all(dir.join(ARTIFACTS)).map_err(io_err("create directory", dir))?;
        let started_path = dir.join(STARTED_JSON);
        if started_path.exists() {
            return Err(LayoutError::AlreadyStarted { dir: dir.to_path_buf() });
        }
        write_atomic(&started_path, &to_json(started))?;
        Ok(BuildWriter { dir: dir.to_path_buf() })
    }

    /// The `artifacts/` directory: `$ARTIFACTS` for the suites.
    pub fn artifacts_dir(&self) -> PathBuf {
        self.dir.join(ARTIFACTS)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn write_build_log(&self, log: &[u8]) -> Result<()> {
        write_atomic(&self.dir.join(BUILD_LOG), log)
    }

    /// Writes a report as `artifacts/<file_name>`; the name must be one TestGrid reads as JUnit.
    pub fn write_junit(&self, file_name: &str, report: &Report) -> Result<PathBuf> {
        let plain = !file_name.contains(['/', '\\']);
        if !plain || junit_artifact(&format!("{ARTIFACTS}/{file_name}")).is_none() {
            return Err(LayoutError::NotJunitName { name: file_name.to_owned() });
        }
        self.write_artifact(Path::new(file_name), junit::to_string(report).as_bytes())
    }

    /// Writes any file under `artifacts/`, creating directories as needed.
    pub fn write_artifact(&self, relative: &Path, bytes: &[u8]) -> Result<PathBuf> {
        let inside = relative.components().all(|c| matches!(c, Component::Normal(_)));
        if !inside || relative.as_os_str().is_empty() {
            return Err(LayoutError::BadArtifactPath { path: relative.to_path_buf() });
        }
        let path = self.dir.join(ARTIFACTS).join(relative);
        let parent = path.parent().expect("an artifact has a directory");
        fs::create_dir_all(parent).map_err(io_err("create directory", parent))?;
        write_atomic(&path, bytes)?;
        Ok(path)
    }

    /// Ends the build by writing `finished.json`; nothing may be written after it.
    pub fn finish(self, finished: &Finished) -> Result<()> {
        write_atomic(&self.dir.join(FINISHED_JSON), &to_json(finished))
    }
}

/// Natural order (digit runs compare as numbers), as TestGrid sorts build ids.
pub(crate) fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a, b);
    loop {
        match (a.is_empty(), b.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            _ => {}
        }
        let (chunk_a, rest_a) = split_chunk(a);
        let (chunk_b, rest_b) = split_chunk(b);
        let order = match (chunk_a.parse::<u128>(), chunk_b.parse::<u128>()) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            _ => chunk_a.cmp(chunk_b),
        };
        if order != Ordering::Equal {
            return order;
        }
        (a, b) = (rest_a, rest_b);
    }
}

/// Splits off the leading run of digits, or of non-digits.
fn split_chunk(s: &str) -> (&str, &str) {
    let digits = s.starts_with(|c: char| c.is_ascii_digit());
    let end = s.find(|c: char| c.is_ascii_digit() != digits).unwrap_or(s.len());
    s.split_at(end)
}

#[cfg(test)]
mod tests;

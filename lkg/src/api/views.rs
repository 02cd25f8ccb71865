//! What the API answers and the CLI prints, built from one [`Snapshot`]: pure functions, so the
//! command line shows exactly what the API serves.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::{Culprit, Engine, LkgError, PairReport, ProviderReport, Verdict, VersionSet};

/// The line of a provider's default branch (`master`, `main`): the newest one.
pub use crate::DEFAULT_LINE;

/// One engine per release line with every run loaded, and where each run's artifacts are.
///
/// A *release line* is a provider branch and the Kubernetes it is tested against: `master` (the
/// default branch, against Kubernetes master) or `1.36` (`release-1.36`, against Kubernetes 1.36).
/// Every answer is per line; the default is the newest line.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Line name → its engine.
    pub lines: BTreeMap<String, Engine>,
    /// Build id (as the runs name it) → its artifacts.
    pub builds: BuildLinks,
    /// When the runs were loaded (unix seconds).
    pub loaded_at: i64,
}

impl Snapshot {
    /// A snapshot of one line, `master`.
    pub fn single(engine: Engine, builds: impl IntoIterator<Item = (String, BuildLink)>, loaded_at: i64) -> Self {
        Self {
            lines: BTreeMap::from([(DEFAULT_LINE.to_owned(), engine)]),
            builds: builds.into_iter().collect(),
            loaded_at,
        }
    }

    /// The lines, newest first: `master`, then `1.37`, `1.36`, … by version.
    pub fn line_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.lines.keys().cloned().collect();
        names.sort_by_key(|name| std::cmp::Reverse(line_order(name)));
        names
    }

    /// The newest line; `master` for an empty snapshot.
    pub fn default_line(&self) -> String {
        self.line_names().into_iter().next().unwrap_or_else(|| DEFAULT_LINE.to_owned())
    }

    /// The engine of `line` (the default line when `None`), with the line's name.
    pub fn line(&self, line: Option<&str>) -> Result<(String, &Engine), ViewError> {
        let name = line.map_or_else(|| self.default_line(), str::to_owned);
        match self.lines.get(&name) {
            Some(engine) => Ok((name, engine)),
            None if self.lines.is_empty() => Err(ViewError::UnknownLine { line: name, known: "none".into() }),
            None => Err(ViewError::UnknownLine { line: name, known: self.line_names().join(", ") }),
        }
    }

    /// The default line's engine, or an empty one when there are no lines.
    pub fn default_engine(&self) -> Option<&Engine> {
        self.lines.get(&self.default_line())
    }
}

/// `master` above every numbered line; numbered lines by their numbers.
fn line_order(line: &str) -> (bool, Vec<u64>) {
    let numbers: Option<Vec<u64>> = line.split('.').map(|part| part.parse().ok()).collect();
    match numbers {
        Some(numbers) => (false, numbers),
        None => (true, Vec::new()),
    }
}

/// Build id → where its results are, in a persistent map: a snapshot's copy shares it.
pub type BuildLinks = imbl::OrdMap<String, BuildLink>;

/// Where a build's results are: the evidence behind a verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildLink {
    /// The build directory in the object store (`gs://`, `s3://` or `file://`).
    pub artifacts_url: String,
    pub started_at: i64,
    pub kubernetes_version: String,
    pub provider_version: String,
}

/// `GET /api/v1/lkg`: the version set and every provider's LKG.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LkgView {
    /// The release line these answers are for.
    pub line: String,
    /// Every line, newest first.
    pub lines: Vec<String>,
    /// The newest Kubernetes commit good with every provider in the set; `null` while there is none.
    pub version_set: Option<VersionSet>,
    /// Each provider's LKG; `null` for a provider with no good pair yet (never "good" by default).
    pub providers: BTreeMap<String, Option<PairReport>>,
    pub builds: BTreeMap<String, BuildLink>,
    pub loaded_at: i64,
}

/// `GET /api/v1/lkg/{provider}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderView {
    pub provider: String,
    pub line: String,
    #[serde(flatten)]
    pub report: ProviderReport,
    /// What `harness bisect` has tested of the culprit range: `null` when it has tested nothing.
    #[serde(default)]
    pub bisection: Option<BisectionView>,
    pub builds: BTreeMap<String, BuildLink>,
    pub loaded_at: i64,
}

/// `GET /api/v1/culprits/{provider}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CulpritView {
    pub provider: String,
    pub line: String,
    /// `null` when the provider's newest pair is good, or when it was never good (nothing to
    /// bisect from).
    pub culprit: Option<Culprit>,
    /// What `harness bisect` has tested of the range: `null` when it has tested nothing.
    #[serde(default)]
    pub bisection: Option<BisectionView>,
    pub lkg: Option<PairReport>,
    pub newest: Option<PairReport>,
    pub builds: BTreeMap<String, BuildLink>,
}

/// A bisection of a provider's culprit range, as far as its builds (job `bisect-<provider>-<line>`)
/// have narrowed it: `harness bisect` publishes every point it tests there, so the culprit range
/// the engine computes is the bisection's current range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BisectionView {
    pub job: String,
    /// Its builds the LKG holds, oldest first (untestable points end `ERROR` and are not among
    /// them: they give no verdict).
    pub builds: Vec<String>,
    /// Provider commits still in the culprit range.
    pub commits_left: usize,
    /// The first bad provider commit, once the range is that one commit.
    pub narrowed_to: Option<String>,
}

/// The job a provider's bisections on `line` publish to.
pub fn bisect_job(provider: &str, line: &str) -> String {
    format!("bisect-{provider}-{line}")
}

/// The bisection of `provider`'s culprit range on `line`, from its builds in the snapshot.
fn bisection(snapshot: &Snapshot, line: &str, provider: &str, culprit: Option<&Culprit>) -> Option<BisectionView> {
    let job = bisect_job(provider, line);
    let prefix = format!("{job}/");
    let from = (std::ops::Bound::Included(prefix.as_str()), std::ops::Bound::Unbounded);
    let mut builds: Vec<(&String, &BuildLink)> =
        snapshot.builds.range::<_, str>(from).take_while(|(id, _)| id.starts_with(&prefix)).collect();
    if builds.is_empty() {
        return None;
    }
    builds.sort_by_key(|(id, link)| (link.started_at, id.as_str()));
    let range = culprit.and_then(|c| c.provider.as_ref());
    Some(BisectionView {
        job,
        builds: builds.into_iter().map(|(id, _)| id.clone()).collect(),
        commits_left: range.map_or(0, |r| r.commits.len()),
        narrowed_to: range.filter(|r| r.commits.len() == 1).map(|r| r.first_bad.clone()),
    })
}

/// The answer to "is provider commit X good with Kubernetes Y?".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckVerdict {
    Good,
    /// Good runs, but fewer in a row than the provider's policy asks for.
    Pending,
    Bad,
    /// Never run, or a version not in the histories.
    Unknown,
}

/// `GET /api/v1/lkg/check`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckView {
    pub line: String,
    pub provider: String,
    pub kubernetes: String,
    pub provider_version: String,
    pub verdict: CheckVerdict,
    /// Why, in one line.
    pub reason: String,
    /// The pair the versions resolve to, when it was run.
    pub pair: Option<PairReport>,
    pub builds: BTreeMap<String, BuildLink>,
}

/// A query the snapshot cannot answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ViewError {
    #[error("unknown provider {provider:?} on line {line}: known providers there are {known}")]
    UnknownProvider { provider: String, line: String, known: String },
    #[error("unknown release line {line:?}: known lines are {known} (master, or a Kubernetes minor such as 1.36)")]
    UnknownLine { line: String, known: String },
}

pub fn lkg(snapshot: &Snapshot, line: Option<&str>) -> Result<LkgView, ViewError> {
    let (line, engine) = snapshot.line(line)?;
    let report = engine.report();
    let version_set = report.version_set;
    let providers: BTreeMap<_, _> = report.providers.into_iter().map(|(name, report)| (name, report.lkg)).collect();
    let pairs = version_set.iter().flat_map(|set| set.providers.values()).chain(providers.values().flatten());
    Ok(LkgView {
        line,
        lines: snapshot.line_names(),
        builds: links(snapshot, pairs),
        version_set,
        providers,
        loaded_at: snapshot.loaded_at,
    })
}

pub fn provider(snapshot: &Snapshot, line: Option<&str>, provider: &str) -> Result<ProviderView, ViewError> {
    let (line, engine) = snapshot.line(line)?;
    let report = engine.provider_report(provider).map_err(|error| unknown(engine, &line, provider, error))?;
    Ok(ProviderView {
        provider: provider.to_owned(),
        bisection: bisection(snapshot, &line, provider, report.culprit.as_ref()),
        line,
        builds: links(snapshot, report.pairs.iter()),
        report,
        loaded_at: snapshot.loaded_at,
    })
}

pub fn culprits(snapshot: &Snapshot, line: Option<&str>, provider: &str) -> Result<CulpritView, ViewError> {
    let (line, engine) = snapshot.line(line)?;
    let report = engine.provider_report(provider).map_err(|error| unknown(engine, &line, provider, error))?;
    Ok(CulpritView {
        provider: provider.to_owned(),
        bisection: bisection(snapshot, &line, provider, report.culprit.as_ref()),
        line,
        builds: links(snapshot, report.lkg.iter().chain(&report.newest)),
        culprit: report.culprit,
        lkg: report.lkg,
        newest: report.newest,
    })
}

pub fn check(
    snapshot: &Snapshot,
    line: Option<&str>,
    provider: &str,
    provider_version: &str,
    kubernetes: &str,
) -> Result<CheckView, ViewError> {
    let (line, engine) = snapshot.line(line)?;
    let view = |verdict, reason: String, pair: Option<PairReport>| CheckView {
        line: line.clone(),
        provider: provider.to_owned(),
        kubernetes: kubernetes.to_owned(),
        provider_version: provider_version.to_owned(),
        verdict,
        reason,
        builds: links(snapshot, pair.iter()),
        pair,
    };
    match engine.pair(provider, kubernetes, provider_version) {
        Ok(Some(pair)) => {
            let (verdict, reason) = match pair.verdict {
                Verdict::Good => (CheckVerdict::Good, format!("{} good run(s)", pair.evidence.len())),
                Verdict::Pending => {
                    (CheckVerdict::Pending, "its latest runs were good, but fewer in a row than the policy asks".into())
                }
                Verdict::Bad => (CheckVerdict::Bad, format!("never good: {} bad run(s)", pair.bad_runs.len())),
            };
            Ok(view(verdict, reason, Some(pair)))
        }
        Ok(None) => Ok(view(CheckVerdict::Unknown, "no build ran this pair".into(), None)),
        Err(error @ LkgError::UnknownRevision { .. }) => {
            let report = engine.provider_report(provider).map_err(|e| unknown(engine, &line, provider, e))?;
            let reason = if report.pairs.is_empty() && report.unplaced.is_empty() {
                format!("no build ran this pair: the index holds no runs of {provider} yet")
            } else {
                error.to_string()
            };
            Ok(view(CheckVerdict::Unknown, reason, None))
        }
        Err(error) => Err(unknown(engine, &line, provider, error)),
    }
}

fn unknown(engine: &Engine, line: &str, provider: &str, _error: LkgError) -> ViewError {
    let known = engine.providers().collect::<Vec<_>>().join(", ");
    ViewError::UnknownProvider {
        provider: provider.to_owned(),
        line: line.to_owned(),
        known: if known.is_empty() { "none".into() } else { known },
    }
}

/// The artifacts of every build these pairs name.
fn links<'a>(snapshot: &Snapshot, pairs: impl Iterator<Item = &'a PairReport>) -> BTreeMap<String, BuildLink> {
    let ids: BTreeSet<&String> = pairs.flat_map(|pair| pair.evidence.iter().chain(&pair.bad_runs)).collect();
    ids.into_iter().filter_map(|id| Some((id.clone(), snapshot.builds.get(id)?.clone()))).collect()
}

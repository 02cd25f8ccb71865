//! What the API answers and the CLI prints, built from one [`Snapshot`]: pure functions, so the
//! command line shows exactly what the API serves.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::{Culprit, Engine, LkgError, PairReport, ProviderReport, Verdict, VersionSet};

/// The engine with every run loaded, and where each run's artifacts are.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub engine: Engine,
    /// Build id (as the runs name it) → its artifacts.
    pub builds: BTreeMap<String, BuildLink>,
    /// When the runs were loaded (unix seconds).
    pub loaded_at: i64,
}

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
    #[serde(flatten)]
    pub report: ProviderReport,
    pub builds: BTreeMap<String, BuildLink>,
    pub loaded_at: i64,
}

/// `GET /api/v1/culprits/{provider}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CulpritView {
    pub provider: String,
    /// `null` when the provider's newest pair is good, or when it was never good (nothing to
    /// bisect from).
    pub culprit: Option<Culprit>,
    pub lkg: Option<PairReport>,
    pub newest: Option<PairReport>,
    pub builds: BTreeMap<String, BuildLink>,
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
    #[error("unknown provider {provider:?}: known providers are {known}")]
    UnknownProvider { provider: String, known: String },
}

pub fn lkg(snapshot: &Snapshot) -> LkgView {
    let report = snapshot.engine.report();
    let version_set = report.version_set;
    let providers: BTreeMap<_, _> = report.providers.into_iter().map(|(name, report)| (name, report.lkg)).collect();
    let pairs = version_set.iter().flat_map(|set| set.providers.values()).chain(providers.values().flatten());
    LkgView { builds: links(snapshot, pairs), version_set, providers, loaded_at: snapshot.loaded_at }
}

pub fn provider(snapshot: &Snapshot, provider: &str) -> Result<ProviderView, ViewError> {
    let report = snapshot.engine.provider_report(provider).map_err(|error| unknown(snapshot, provider, error))?;
    Ok(ProviderView {
        provider: provider.to_owned(),
        builds: links(snapshot, report.pairs.iter()),
        report,
        loaded_at: snapshot.loaded_at,
    })
}

pub fn culprits(snapshot: &Snapshot, provider: &str) -> Result<CulpritView, ViewError> {
    let report = snapshot.engine.provider_report(provider).map_err(|error| unknown(snapshot, provider, error))?;
    Ok(CulpritView {
        provider: provider.to_owned(),
        builds: links(snapshot, report.lkg.iter().chain(&report.newest)),
        culprit: report.culprit,
        lkg: report.lkg,
        newest: report.newest,
    })
}

pub fn check(
    snapshot: &Snapshot,
    provider: &str,
    provider_version: &str,
    kubernetes: &str,
) -> Result<CheckView, ViewError> {
    let view = |verdict, reason: String, pair: Option<PairReport>| CheckView {
        provider: provider.to_owned(),
        kubernetes: kubernetes.to_owned(),
        provider_version: provider_version.to_owned(),
        verdict,
        reason,
        builds: links(snapshot, pair.iter()),
        pair,
    };
    match snapshot.engine.pair(provider, kubernetes, provider_version) {
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
        Ok(None) => Ok(view(CheckVerdict::Unknown, "this pair was never run".into(), None)),
        Err(error @ LkgError::UnknownRevision { .. }) => Ok(view(CheckVerdict::Unknown, error.to_string(), None)),
        Err(error) => Err(unknown(snapshot, provider, error)),
    }
}

fn unknown(snapshot: &Snapshot, provider: &str, _error: LkgError) -> ViewError {
    let known = snapshot.engine.report().providers.into_keys().collect::<Vec<_>>().join(", ");
    ViewError::UnknownProvider {
        provider: provider.to_owned(),
        known: if known.is_empty() { "none".into() } else { known },
    }
}

/// The artifacts of every build these pairs name.
fn links<'a>(snapshot: &Snapshot, pairs: impl Iterator<Item = &'a PairReport>) -> BTreeMap<String, BuildLink> {
    let ids: BTreeSet<&String> = pairs.flat_map(|pair| pair.evidence.iter().chain(&pair.bad_runs)).collect();
    ids.into_iter().filter_map(|id| Some((id.clone(), snapshot.builds.get(id)?.clone()))).collect()
}

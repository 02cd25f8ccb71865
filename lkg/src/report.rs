//! What the algorithm answers, as serialisable types, and how they are built from the ledger once
//! a selector (incremental engine or from-scratch computation) has picked the pairs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ledger::{Ledger, PairKey, ProviderLedger};
use crate::verdict::PairRecord;
use crate::{History, TestCatalog, Verdict};

/// Everything known: each provider's LKG and culprit range, and the global version set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub providers: BTreeMap<String, ProviderReport>,
    /// `None` while no Kubernetes commit is good with every provider in the version set.
    pub version_set: Option<VersionSet>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderReport {
    /// The good pair with the newest Kubernetes commit, and with the newest provider commit there.
    pub lkg: Option<PairReport>,
    /// The tested pair with the newest Kubernetes commit, and with the newest provider commit there.
    pub newest: Option<PairReport>,
    /// Present when the newest pair is bad and the provider has an LKG.
    pub culprit: Option<Culprit>,
    /// Every tested pair, newest first.
    pub pairs: Vec<PairReport>,
    /// Runs naming a commit or tag that is not in the history: listed here, in the order they were
    /// added, and left out of every ordering above.
    #[serde(default)]
    pub unplaced: Vec<UnplacedRun>,
}

/// A run that could not be placed in the histories (e.g. a commit of a branch that is not tracked,
/// or a history fetched before the commit landed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnplacedRun {
    pub build_id: String,
    pub kubernetes_version: String,
    pub provider_version: String,
    /// What is wrong, one line per revision not found.
    pub problems: Vec<String>,
}

/// A (Kubernetes commit, provider commit) pair and its runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairReport {
    pub kubernetes_commit: String,
    pub provider_commit: String,
    pub verdict: Verdict,
    /// Build ids of the good runs, in the order they were added.
    pub evidence: Vec<String>,
    /// Build ids of the bad runs, in the order they were added.
    pub bad_runs: Vec<String>,
    pub flaky_tests: Vec<FlakyTest>,
}

/// A test that failed then passed on retry, and the builds where it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlakyTest {
    pub name: String,
    pub builds: Vec<String>,
}

/// The newest Kubernetes commit good with every provider in the version set, and the newest good
/// provider commit of each there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionSet {
    pub kubernetes_commit: String,
    pub providers: BTreeMap<String, PairReport>,
}

/// Where the change that broke a provider must be. At least one side is present.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Culprit {
    /// `None` when the first bad pair has the LKG's Kubernetes commit.
    pub kubernetes: Option<CommitRange>,
    /// `None` when the first bad pair's provider commit is not newer than the LKG's.
    pub provider: Option<CommitRange>,
}

/// The commits after `last_good` up to and including `first_bad`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitRange {
    pub last_good: String,
    pub first_bad: String,
    /// Newest first, so `first_bad` comes first.
    pub commits: Vec<String>,
}

/// The pairs a selector picked for one provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Selection {
    pub lkg: Option<PairKey>,
    pub newest: Option<PairKey>,
    /// The oldest bad pair after the LKG, picked only when the newest pair is bad.
    pub first_bad: Option<PairKey>,
}

pub(crate) fn provider_report(ledger: &Ledger, provider: &ProviderLedger, selection: &Selection) -> ProviderReport {
    let report = |key: PairKey| pair_report(ledger, provider, key);
    ProviderReport {
        lkg: selection.lkg.map(report),
        newest: selection.newest.map(report),
        culprit: culprit_of(ledger, provider, selection),
        pairs: provider.pairs.iter().rev().map(|(key, record)| record_report(ledger, provider, *key, record)).collect(),
        unplaced: provider.unplaced.iter().cloned().collect(),
    }
}

pub(crate) fn culprit_of(ledger: &Ledger, provider: &ProviderLedger, selection: &Selection) -> Option<Culprit> {
    let (lkg, first_bad) = selection.lkg.zip(selection.first_bad)?;
    Some(culprit(provider, &ledger.kubernetes, lkg, first_bad))
}

/// `key` must be a tested pair of `provider`.
pub(crate) fn pair_report(ledger: &Ledger, provider: &ProviderLedger, key: PairKey) -> PairReport {
    record_report(ledger, provider, key, &provider.pairs[&key])
}

fn record_report(ledger: &Ledger, provider: &ProviderLedger, key: PairKey, record: &PairRecord) -> PairReport {
    PairReport {
        kubernetes_commit: ledger.kubernetes.commit(key.kubernetes).to_owned(),
        provider_commit: provider.spec.history.commit(key.provider).to_owned(),
        verdict: provider.verdict_of(record),
        evidence: build_ids(record, true),
        bad_runs: build_ids(record, false),
        flaky_tests: flaky_tests(record, &ledger.catalog),
    }
}

pub(crate) fn version_set(ledger: &Ledger, kubernetes: usize, chosen: &BTreeMap<&str, PairKey>) -> VersionSet {
    let providers = chosen
        .iter()
        .map(|(name, key)| (name.to_string(), pair_report(ledger, &ledger.providers[*name], *key)))
        .collect();
    VersionSet { kubernetes_commit: ledger.kubernetes.commit(kubernetes).to_owned(), providers }
}

fn build_ids(record: &PairRecord, good: bool) -> Vec<String> {
    record.runs().filter(|run| run.good == good).map(|run| String::from(&*run.build_id)).collect()
}

fn flaky_tests(record: &PairRecord, catalog: &TestCatalog) -> Vec<FlakyTest> {
    if record.runs().all(|run| run.flaky_tests.is_empty()) {
        return Vec::new();
    }
    let mut builds_by_test: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for run in record.runs() {
        for test in &run.flaky_tests {
            let name = catalog.name(*test).expect("flaky test ids come from the catalog");
            builds_by_test.entry(name).or_default().push(String::from(&*run.build_id));
        }
    }
    builds_by_test.into_iter().map(|(name, builds)| FlakyTest { name: name.into(), builds }).collect()
}

fn culprit(provider: &ProviderLedger, kubernetes: &History, last_good: PairKey, first_bad: PairKey) -> Culprit {
    Culprit {
        kubernetes: commit_range(kubernetes, last_good.kubernetes, first_bad.kubernetes),
        provider: commit_range(&provider.spec.history, last_good.provider, first_bad.provider),
    }
}

fn commit_range(history: &History, last_good: usize, first_bad: usize) -> Option<CommitRange> {
    (first_bad > last_good).then(|| CommitRange {
        last_good: history.commit(last_good).to_owned(),
        first_bad: history.commit(first_bad).to_owned(),
        commits: history.commits_after_up_to(last_good, first_bad),
    })
}

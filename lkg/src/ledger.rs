//! The ledger: every accepted run resolved onto its (Kubernetes commit, provider commit) pair, per
//! provider. Both the incremental engine and the from-scratch computation are built on it.

use std::collections::BTreeMap;
use std::sync::Arc;

use imbl::{OrdMap, OrdSet, Vector};

use crate::verdict::{Judge, PairRecord, Scratch};
use crate::{
    CompactResult, CompactRun, History, JudgedRun, LkgError, ProviderSpec, Run, RunVerdict, TestCatalog, TestStatus,
    UnplacedRun, Verdict,
};

/// A pair as ordinals into the Kubernetes and provider histories. The derived order (Kubernetes
/// first, then provider) is "older before newer", which the LKG and culprit selections rely on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct PairKey {
    pub kubernetes: usize,
    pub provider: usize,
}

impl PairKey {
    /// The smallest and largest keys of Kubernetes commit `kubernetes`, for range queries.
    pub fn bounds_at(kubernetes: usize) -> (Self, Self) {
        (Self { kubernetes, provider: 0 }, Self { kubernetes, provider: usize::MAX })
    }
}

/// One provider: its history and policy, and the record of every pair it was run on. Its runs are
/// in persistent maps, so a copy (taken to add a run while readers keep the original) costs
/// nothing until a run is added, and then a path of the maps.
#[derive(Debug, Clone)]
pub(crate) struct ProviderLedger {
    pub spec: Arc<ProviderSpec>,
    judge: Judge,
    pub pairs: OrdMap<PairKey, PairRecord>,
    /// Runs naming a revision that is in neither history: reported, never ordered.
    pub unplaced: Vector<UnplacedRun>,
    /// Shared with the pair records' runs: one allocation per build id.
    builds: OrdSet<Arc<str>>,
}

impl ProviderLedger {
    pub fn verdict(&self, key: &PairKey) -> Option<Verdict> {
        self.pairs.get(key).map(|record| self.verdict_of(record))
    }

    pub fn verdict_of(&self, record: &PairRecord) -> Verdict {
        record.verdict(self.spec.policy.flake.consecutive_good_runs)
    }

    pub fn keys_with(&self, verdict: Verdict) -> impl DoubleEndedIterator<Item = PairKey> + '_ {
        self.pairs.iter().filter(move |(_, record)| self.verdict_of(record) == verdict).map(|(key, _)| *key)
    }
}

/// What recording a run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// The provider already had a run with this build id; nothing changed.
    Duplicate,
    /// A revision of the run is not in its history: the run is listed, not ordered.
    Unplaced,
    New {
        key: PairKey,
        verdict: Verdict,
    },
}

/// A run's tests, in any form.
#[derive(Clone, Copy)]
enum Tests<'a> {
    Named(&'a [crate::TestResult]),
    Compact(&'a [CompactResult]),
    /// Judged already: the verdict on its tests.
    Judged(&'a RunVerdict),
}

#[derive(Debug, Clone)]
pub(crate) struct Ledger {
    pub kubernetes: Arc<History>,
    pub providers: BTreeMap<String, ProviderLedger>,
    /// Shared by copies (and by engines built on one catalog) until a run names a new test.
    pub catalog: Arc<TestCatalog>,
    scratch: Scratch,
    /// The Kubernetes revision the last run named, and its ordinal.
    last_kubernetes: Option<(String, usize)>,
    /// The tests of a named run, interned; kept to reuse its allocation.
    interned: Vec<CompactResult>,
}

impl Ledger {
    pub fn new(kubernetes: History, providers: BTreeMap<String, ProviderSpec>, mut catalog: Arc<TestCatalog>) -> Self {
        let providers = providers
            .into_iter()
            .map(|(name, spec)| {
                let judge = Judge::new(&spec.policy, |test| intern(&mut catalog, test));
                let ledger = ProviderLedger {
                    spec: Arc::new(spec),
                    judge,
                    pairs: OrdMap::new(),
                    unplaced: Vector::new(),
                    builds: OrdSet::new(),
                };
                (name, ledger)
            })
            .collect();
        Self {
            kubernetes: Arc::new(kubernetes),
            providers,
            catalog,
            scratch: Scratch::default(),
            last_kubernetes: None,
            interned: Vec::new(),
        }
    }

    /// Records a run; a refused run leaves the ledger unchanged.
    pub fn record(&mut self, run: &Run) -> Result<Recorded, LkgError> {
        let versions = [&run.kubernetes_version, &run.provider_version];
        self.record_tests(&run.build_id, &run.provider, versions, Tests::Named(&run.tests), run.build_passed)
    }

    /// Records a run of test ids from this ledger's catalog; a refused run leaves it unchanged.
    pub fn record_compact(&mut self, run: &CompactRun) -> Result<Recorded, LkgError> {
        let versions = [&run.kubernetes_version, &run.provider_version];
        self.record_tests(&run.build_id, &run.provider, versions, Tests::Compact(&run.results), run.build_passed)
    }

    /// Records a run judged before ([`crate::RunJudge`]); its flaky tests must be ids of this
    /// ledger's catalog. A refused run leaves the ledger unchanged.
    pub fn record_judged(&mut self, run: &JudgedRun) -> Result<Recorded, LkgError> {
        if let Some(id) = run.verdict.flaky_tests.iter().find(|id| id.index() >= self.catalog.len()) {
            let reason = LkgError::UnknownTestId { id: id.0, catalog_len: self.catalog.len() };
            return Err(LkgError::InvalidRun { build_id: run.build_id.clone(), reason: Box::new(reason) });
        }
        let versions = [&run.kubernetes_version, &run.provider_version];
        let verdict = Tests::Judged(&run.verdict);
        self.record_tests(&run.build_id, &run.provider, versions, verdict, run.build_passed)
    }

    fn record_tests(
        &mut self,
        build_id: &str,
        provider_name: &str,
        [kubernetes_version, provider_version]: [&String; 2],
        tests: Tests,
        build_passed: Option<bool>,
    ) -> Result<Recorded, LkgError> {
        let invalid = |reason| LkgError::InvalidRun { build_id: build_id.to_owned(), reason: Box::new(reason) };
        let provider = self.providers.get_mut(provider_name).ok_or_else(|| invalid(unknown_provider(provider_name)))?;
        // Taken now, given back if the run is refused below.
        if provider.builds.contains(build_id) {
            return Ok(Recorded::Duplicate);
        }
        let build: Arc<str> = Arc::from(build_id);
        provider.builds.insert(build.clone());
        // Runs come in rounds against one Kubernetes commit: the last one found is tried first.
        let kubernetes = match &self.last_kubernetes {
            Some((revision, ordinal)) if revision == kubernetes_version => Ok(*ordinal),
            _ => {
                let found = ordinal(&self.kubernetes, "kubernetes", kubernetes_version);
                if let Ok(found) = found {
                    self.last_kubernetes = Some((kubernetes_version.clone(), found));
                }
                found
            }
        };
        let provider_ordinal = ordinal(&provider.spec.history, provider_name, provider_version);
        let key = match (kubernetes, provider_ordinal) {
            (Ok(kubernetes), Ok(provider)) => PairKey { kubernetes, provider },
            (kubernetes, provider_ordinal) => {
                let problems = [kubernetes.err(), provider_ordinal.err()].into_iter().flatten();
                provider.unplaced.push_back(UnplacedRun {
                    build_id: build_id.to_owned(),
                    kubernetes_version: kubernetes_version.clone(),
                    provider_version: provider_version.clone(),
                    problems: problems.map(|problem| problem.to_string()).collect(),
                });
                return Ok(Recorded::Unplaced);
            }
        };
        let results = match tests {
            Tests::Judged(verdict) => Ok(verdict.clone()),
            Tests::Compact(results) => provider.judge.judge(results, self.catalog.len(), &mut self.scratch),
            Tests::Named(tests) => {
                self.interned.clear();
                self.interned.extend(tests.iter().map(|test| {
                    CompactResult::new(intern(&mut self.catalog, &test.name), TestStatus::of_attempts(&test.attempts))
                }));
                provider.judge.judge(&self.interned, self.catalog.len(), &mut self.scratch)
            }
        };
        let mut verdict = match results {
            Ok(verdict) => verdict,
            Err(id) => {
                provider.builds.remove(build_id);
                return Err(invalid(LkgError::UnknownTestId { id: id.0, catalog_len: self.catalog.len() }));
            }
        };
        // A pair's verdict never disagrees with its evidence builds' own.
        verdict.good &= build_passed != Some(false);
        let record = provider.pairs.entry(key).or_default();
        record.push(build, verdict);
        let verdict = record.verdict(provider.spec.policy.flake.consecutive_good_runs);
        Ok(Recorded::New { key, verdict })
    }

    /// Lists `run` among the provider's unplaced runs, once per build id.
    pub fn add_unplaced(&mut self, provider_name: &str, run: UnplacedRun) -> Result<crate::RunAdded, LkgError> {
        let provider = self.providers.get_mut(provider_name).ok_or_else(|| unknown_provider(provider_name))?;
        if provider.builds.contains(run.build_id.as_str()) {
            return Ok(crate::RunAdded::AlreadyKnown);
        }
        provider.builds.insert(Arc::from(run.build_id.as_str()));
        provider.unplaced.push_back(run);
        Ok(crate::RunAdded::Unplaced)
    }

    pub fn provider(&self, name: &str) -> Result<&ProviderLedger, LkgError> {
        self.providers.get(name).ok_or_else(|| unknown_provider(name))
    }

    pub fn pair_key(
        &self,
        provider: &str,
        kubernetes_version: &str,
        provider_version: &str,
    ) -> Result<PairKey, LkgError> {
        let spec = &self.provider(provider)?.spec;
        Ok(PairKey {
            kubernetes: ordinal(&self.kubernetes, "kubernetes", kubernetes_version)?,
            provider: ordinal(&spec.history, provider, provider_version)?,
        })
    }

    /// The providers the global version set must be good with.
    pub fn version_set_providers(&self) -> impl Iterator<Item = (&String, &ProviderLedger)> {
        self.providers.iter().filter(|(_, provider)| provider.spec.policy.in_version_set)
    }
}

fn ordinal(history: &History, repo: &str, revision: &str) -> Result<usize, LkgError> {
    history.ordinal(revision).ok_or_else(|| LkgError::UnknownRevision {
        repo: repo.into(),
        revision: revision.into(),
        reason: history.why_unknown(revision),
    })
}

/// The id of `name` in `catalog`; the catalog is copied (if shared) only when the name is new.
pub(crate) fn intern(catalog: &mut Arc<TestCatalog>, name: &str) -> crate::TestId {
    match catalog.id(name) {
        Some(id) => id,
        None => Arc::make_mut(catalog).intern(name),
    }
}

fn unknown_provider(name: &str) -> LkgError {
    LkgError::UnknownProvider { provider: name.into() }
}

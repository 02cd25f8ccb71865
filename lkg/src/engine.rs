//! The incremental engine: keeps each pair's verdict and an index of good pairs, so adding one run
//! costs a few map updates and the LKG and version set are read off the indexes.

use std::collections::BTreeMap;
use std::ops::Bound::{Excluded, Unbounded};
use std::sync::Arc;

use imbl::{OrdMap, OrdSet};

use crate::ledger::{Ledger, PairKey, ProviderLedger, Recorded};
use crate::report::{self, Selection};
use crate::{
    CompactRun, Culprit, History, JudgedRun, LkgError, PairReport, ProviderReport, ProviderSpec, Report, Run,
    TestCatalog, TestId, UnplacedRun, Verdict, VersionSet,
};

/// What [`Engine::add_run`] did with a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAdded {
    New,
    /// The provider already had a run with this build id: republishing a build is a no-op.
    AlreadyKnown,
    /// A commit or tag of the run is not in its history: the run is listed in the provider's
    /// `unplaced` runs and takes no part in any ordering.
    Unplaced,
}

/// LKG state that is updated one run at a time. A clone shares its runs and indexes (persistent
/// maps) and its histories with the original: copying an engine to add a run to the copy, while
/// readers keep the original, costs about as much as adding the run.
#[derive(Debug, Clone)]
pub struct Engine {
    ledger: Ledger,
    /// Per provider, its good pairs; pairs never stop being good, so this only grows.
    good_pairs: BTreeMap<String, OrdSet<PairKey>>,
    /// Per Kubernetes ordinal, how many version-set providers have a good pair there.
    good_providers: OrdMap<usize, usize>,
    /// The Kubernetes ordinals good with every version-set provider.
    good_with_all: OrdSet<usize>,
    version_set_size: usize,
}

impl Engine {
    pub fn new(kubernetes: History, providers: BTreeMap<String, ProviderSpec>) -> Self {
        Self::with_catalog(kubernetes, providers, TestCatalog::new())
    }

    /// An engine whose compact runs use ids of `catalog` (the required tests are added to it).
    pub fn with_catalog(kubernetes: History, providers: BTreeMap<String, ProviderSpec>, catalog: TestCatalog) -> Self {
        Self::with_shared_catalog(kubernetes, providers, Arc::new(catalog))
    }

    /// [`Engine::with_catalog`] sharing `catalog` with other engines until one adds a test to it.
    pub fn with_shared_catalog(
        kubernetes: History,
        providers: BTreeMap<String, ProviderSpec>,
        catalog: Arc<TestCatalog>,
    ) -> Self {
        let good_pairs = providers.keys().map(|name| (name.clone(), OrdSet::new())).collect();
        let version_set_size = providers.values().filter(|spec| spec.policy.in_version_set).count();
        Self {
            ledger: Ledger::new(kubernetes, providers, catalog),
            good_pairs,
            good_providers: OrdMap::new(),
            good_with_all: OrdSet::new(),
            version_set_size,
        }
    }

    /// The providers it knows, by name.
    pub fn providers(&self) -> impl Iterator<Item = &str> {
        self.good_pairs.keys().map(String::as_str)
    }

    /// The Kubernetes history runs are ordered by.
    pub fn kubernetes_history(&self) -> &History {
        &self.ledger.kubernetes
    }

    /// The catalog compact runs take their test ids from.
    pub fn catalog(&self) -> &TestCatalog {
        &self.ledger.catalog
    }

    /// The id of a test name for compact runs, added to the catalog if new.
    pub fn intern_test(&mut self, name: &str) -> TestId {
        crate::ledger::intern(&mut self.ledger.catalog, name)
    }

    /// Adds one run; a refused run ([`LkgError::InvalidRun`]) leaves the engine unchanged.
    pub fn add_run(&mut self, run: &Run) -> Result<RunAdded, LkgError> {
        let recorded = self.ledger.record(run)?;
        Ok(self.recorded(&run.provider, recorded))
    }

    /// [`Engine::add_run`] for a run of ids from [`Engine::catalog`].
    pub fn add_compact_run(&mut self, run: &CompactRun) -> Result<RunAdded, LkgError> {
        let recorded = self.ledger.record_compact(run)?;
        Ok(self.recorded(&run.provider, recorded))
    }

    /// [`Engine::add_run`] for a run judged before by a [`RunJudge`](crate::RunJudge) built
    /// with this engine's policy and catalog: the same as adding its tests.
    pub fn add_judged_run(&mut self, run: &JudgedRun) -> Result<RunAdded, LkgError> {
        let recorded = self.ledger.record_judged(run)?;
        Ok(self.recorded(&run.provider, recorded))
    }

    fn recorded(&mut self, provider: &str, recorded: Recorded) -> RunAdded {
        match recorded {
            Recorded::Duplicate => RunAdded::AlreadyKnown,
            Recorded::Unplaced => RunAdded::Unplaced,
            Recorded::New { key, verdict } => {
                if verdict == Verdict::Good {
                    self.mark_good(provider, key);
                }
                RunAdded::New
            }
        }
    }

    /// Whether a run of these versions would be placed: the provider is known and both versions
    /// are in their histories.
    pub fn places(&self, provider: &str, kubernetes_version: &str, provider_version: &str) -> bool {
        self.ledger.pair_key(provider, kubernetes_version, provider_version).is_ok()
    }

    /// Lists a run that cannot be placed at all (its build names no version to place it by), so
    /// the provider's answers name it; a build id already known is ignored.
    pub fn add_unplaced(&mut self, provider: &str, run: UnplacedRun) -> Result<RunAdded, LkgError> {
        self.ledger.add_unplaced(provider, run)
    }

    pub fn lkg(&self, provider: &str) -> Result<Option<PairReport>, LkgError> {
        let ledger = self.ledger.provider(provider)?;
        Ok(self.lkg_key(provider).map(|key| report::pair_report(&self.ledger, ledger, key)))
    }

    pub fn culprit(&self, provider: &str) -> Result<Option<Culprit>, LkgError> {
        let ledger = self.ledger.provider(provider)?;
        Ok(report::culprit_of(&self.ledger, ledger, &self.select(provider, ledger)))
    }

    /// The pair of two revisions (commit ids or tags); `None` when it was never run.
    pub fn pair(
        &self,
        provider: &str,
        kubernetes_version: &str,
        provider_version: &str,
    ) -> Result<Option<PairReport>, LkgError> {
        let key = self.ledger.pair_key(provider, kubernetes_version, provider_version)?;
        let ledger = self.ledger.provider(provider)?;
        Ok(ledger.pairs.contains_key(&key).then(|| report::pair_report(&self.ledger, ledger, key)))
    }

    pub fn provider_report(&self, provider: &str) -> Result<ProviderReport, LkgError> {
        let ledger = self.ledger.provider(provider)?;
        Ok(report::provider_report(&self.ledger, ledger, &self.select(provider, ledger)))
    }

    /// `None` when no provider is in the version set or no commit is good with all of them.
    pub fn version_set(&self) -> Option<VersionSet> {
        if self.version_set_size == 0 {
            return None;
        }
        let &kubernetes = self.good_with_all.get_max()?;
        let chosen = self
            .ledger
            .version_set_providers()
            .map(|(name, _)| self.newest_good_at(name, kubernetes).map(|key| (name.as_str(), key)))
            .collect::<Option<BTreeMap<_, _>>>()?;
        Some(report::version_set(&self.ledger, kubernetes, &chosen))
    }

    pub fn report(&self) -> Report {
        let providers = self
            .ledger
            .providers
            .iter()
            .map(|(name, ledger)| {
                let selection = self.select(name, ledger);
                (name.clone(), report::provider_report(&self.ledger, ledger, &selection))
            })
            .collect();
        Report { providers, version_set: self.version_set() }
    }

    fn mark_good(&mut self, provider: &str, key: PairKey) {
        let Some(good) = self.good_pairs.get_mut(provider) else { return };
        let (oldest, newest) = PairKey::bounds_at(key.kubernetes);
        let first_at_commit = good.range(oldest..=newest).next().is_none();
        if good.insert(key).is_none() && first_at_commit && self.ledger.providers[provider].spec.policy.in_version_set {
            let good = self.good_providers.entry(key.kubernetes).or_default();
            *good += 1;
            if *good == self.version_set_size {
                self.good_with_all.insert(key.kubernetes);
            }
        }
    }

    fn lkg_key(&self, provider: &str) -> Option<PairKey> {
        self.good_pairs.get(provider)?.get_max().copied()
    }

    fn newest_good_at(&self, provider: &str, kubernetes: usize) -> Option<PairKey> {
        let (oldest, newest) = PairKey::bounds_at(kubernetes);
        self.good_pairs.get(provider)?.range(oldest..=newest).next_back().copied()
    }

    fn select(&self, name: &str, provider: &ProviderLedger) -> Selection {
        let lkg = self.lkg_key(name);
        let newest = provider.pairs.get_max().map(|(key, _)| *key);
        let first_bad = match (lkg, newest) {
            (Some(lkg), Some(newest)) if provider.verdict(&newest) == Some(Verdict::Bad) => provider
                .pairs
                .range((Excluded(lkg), Unbounded))
                .find(|(_, record)| provider.verdict_of(record) == Verdict::Bad)
                .map(|(key, _)| *key),
            _ => None,
        };
        Selection { lkg, newest, first_bad }
    }
}

//! The incremental engine: keeps each pair's verdict and an index of good pairs, so adding one run
//! costs a few map updates and the LKG and version set are read off the indexes.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{Excluded, Unbounded};

use crate::ledger::{Ledger, PairKey, ProviderLedger, Recorded};
use crate::report::{self, Selection};
use crate::{Culprit, History, LkgError, PairReport, ProviderReport, ProviderSpec, Report, Run, Verdict, VersionSet};

/// What [`Engine::add_run`] did with a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAdded {
    New,
    /// The provider already had a run with this build id: republishing a build is a no-op.
    AlreadyKnown,
}

/// LKG state that is updated one run at a time.
#[derive(Debug, Clone)]
pub struct Engine {
    ledger: Ledger,
    /// Per provider, its good pairs; pairs never stop being good, so this only grows.
    good_pairs: BTreeMap<String, BTreeSet<PairKey>>,
    /// Per Kubernetes ordinal, the providers with a good pair there.
    good_providers: BTreeMap<usize, BTreeSet<String>>,
}

impl Engine {
    pub fn new(kubernetes: History, providers: BTreeMap<String, ProviderSpec>) -> Self {
        let good_pairs = providers.keys().map(|name| (name.clone(), BTreeSet::new())).collect();
        Self { ledger: Ledger::new(kubernetes, providers), good_pairs, good_providers: BTreeMap::new() }
    }

    /// Adds one run; a refused run ([`LkgError::InvalidRun`]) leaves the engine unchanged.
    pub fn add_run(&mut self, run: &Run) -> Result<RunAdded, LkgError> {
        match self.ledger.record(run)? {
            Recorded::Duplicate => Ok(RunAdded::AlreadyKnown),
            Recorded::New { key, verdict } => {
                if verdict == Verdict::Good {
                    self.mark_good(&run.provider, key);
                }
                Ok(RunAdded::New)
            }
        }
    }

    pub fn lkg(&self, provider: &str) -> Result<Option<PairReport>, LkgError> {
        let ledger = self.ledger.provider(provider)?;
        Ok(self.lkg_key(provider).map(|key| report::pair_report(ledger, &self.ledger.kubernetes, key)))
    }

    pub fn culprit(&self, provider: &str) -> Result<Option<Culprit>, LkgError> {
        Ok(self.provider_report(provider)?.culprit)
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
        Ok(ledger.pairs.contains_key(&key).then(|| report::pair_report(ledger, &self.ledger.kubernetes, key)))
    }

    pub fn provider_report(&self, provider: &str) -> Result<ProviderReport, LkgError> {
        let ledger = self.ledger.provider(provider)?;
        Ok(report::provider_report(ledger, &self.ledger.kubernetes, &self.select(provider, ledger)))
    }

    /// `None` when no provider is in the version set or no commit is good with all of them.
    pub fn version_set(&self) -> Option<VersionSet> {
        let required: Vec<&str> = self.ledger.version_set_providers().map(|(name, _)| name.as_str()).collect();
        if required.is_empty() {
            return None;
        }
        let (&kubernetes, _) =
            self.good_providers.iter().rev().find(|(_, good)| required.iter().all(|name| good.contains(*name)))?;
        let chosen = required
            .iter()
            .map(|name| self.newest_good_at(name, kubernetes).map(|key| (*name, key)))
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
                (name.clone(), report::provider_report(ledger, &self.ledger.kubernetes, &selection))
            })
            .collect();
        Report { providers, version_set: self.version_set() }
    }

    fn mark_good(&mut self, provider: &str, key: PairKey) {
        let newly_good = self.good_pairs.get_mut(provider).is_some_and(|good| good.insert(key));
        if newly_good {
            self.good_providers.entry(key.kubernetes).or_default().insert(provider.to_owned());
        }
    }

    fn lkg_key(&self, provider: &str) -> Option<PairKey> {
        self.good_pairs.get(provider)?.last().copied()
    }

    fn newest_good_at(&self, provider: &str, kubernetes: usize) -> Option<PairKey> {
        let (oldest, newest) = PairKey::bounds_at(kubernetes);
        self.good_pairs.get(provider)?.range(oldest..=newest).next_back().copied()
    }

    fn select(&self, name: &str, provider: &ProviderLedger) -> Selection {
        let lkg = self.lkg_key(name);
        let newest = provider.pairs.last_key_value().map(|(key, _)| *key);
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

//! The ledger: every accepted run resolved onto its (Kubernetes commit, provider commit) pair, per
//! provider. Both the incremental engine and the from-scratch computation are built on it.

use std::collections::{BTreeMap, HashSet};

use crate::verdict::{PairRecord, judge_run};
use crate::{History, LkgError, ProviderSpec, Run, Verdict};

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

/// One provider: its history and policy, and the record of every pair it was run on.
#[derive(Debug, Clone)]
pub(crate) struct ProviderLedger {
    pub spec: ProviderSpec,
    pub pairs: BTreeMap<PairKey, PairRecord>,
}

impl ProviderLedger {
    pub fn verdict(&self, key: &PairKey) -> Option<Verdict> {
        self.pairs.get(key).map(|record| self.verdict_of(record))
    }

    pub fn verdict_of(&self, record: &PairRecord) -> Verdict {
        record.verdict(self.spec.policy.flake.consecutive_good_runs)
    }

    pub fn keys_with(&self, verdict: Verdict) -> impl Iterator<Item = PairKey> + '_ {
        self.pairs.iter().filter(move |(_, record)| self.verdict_of(record) == verdict).map(|(key, _)| *key)
    }
}

/// What recording a run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recorded {
    /// The provider already had a run with this build id; nothing changed.
    Duplicate,
    New {
        key: PairKey,
        verdict: Verdict,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct Ledger {
    pub kubernetes: History,
    pub providers: BTreeMap<String, ProviderLedger>,
    seen_builds: HashSet<(String, String)>,
}

impl Ledger {
    pub fn new(kubernetes: History, providers: BTreeMap<String, ProviderSpec>) -> Self {
        let providers =
            providers.into_iter().map(|(name, spec)| (name, ProviderLedger { spec, pairs: BTreeMap::new() })).collect();
        Self { kubernetes, providers, seen_builds: HashSet::new() }
    }

    /// Records a run; a refused run leaves the ledger unchanged.
    pub fn record(&mut self, run: &Run) -> Result<Recorded, LkgError> {
        let invalid = |reason| LkgError::InvalidRun { build_id: run.build_id.clone(), reason: Box::new(reason) };
        let key = self.pair_key(&run.provider, &run.kubernetes_version, &run.provider_version).map_err(invalid)?;
        if !self.seen_builds.insert((run.provider.clone(), run.build_id.clone())) {
            return Ok(Recorded::Duplicate);
        }
        let provider = self.providers.get_mut(&run.provider).ok_or_else(|| invalid(unknown_provider(&run.provider)))?;
        let record = provider.pairs.entry(key).or_default();
        record.push(run.build_id.clone(), judge_run(&run.tests, &provider.spec.policy));
        let verdict = record.verdict(provider.spec.policy.flake.consecutive_good_runs);
        Ok(Recorded::New { key, verdict })
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
    history.ordinal(revision).ok_or_else(|| LkgError::UnknownRevision { repo: repo.into(), revision: revision.into() })
}

fn unknown_provider(name: &str) -> LkgError {
    LkgError::UnknownProvider { provider: name.into() }
}

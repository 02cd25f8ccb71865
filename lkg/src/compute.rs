//! The from-scratch computation: records all runs, then reads each answer straight off the
//! definitions by scanning every pair. It is the reference the incremental engine must agree with.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::ledger::{Ledger, PairKey, ProviderLedger};
use crate::report::{self, Selection};
use crate::{CompactRun, History, LkgError, ProviderSpec, Report, Run, TestCatalog, Verdict};

/// Computes the whole report from the histories, the providers and every run, in the order given
/// (which matters only to policies asking for consecutive good runs, and to the order evidence is
/// listed in). A run of an unknown provider is refused; a run naming a revision that is not in its
/// history is listed in its provider's `unplaced` runs.
pub fn compute(
    kubernetes: History,
    providers: BTreeMap<String, ProviderSpec>,
    runs: &[Run],
) -> Result<Report, LkgError> {
    let mut ledger = Ledger::new(kubernetes, providers, Arc::new(TestCatalog::new()));
    for run in runs {
        ledger.record(run)?;
    }
    Ok(report_of(&ledger))
}

/// [`compute`] over runs whose test ids come from `catalog`.
pub fn compute_compact(
    kubernetes: History,
    providers: BTreeMap<String, ProviderSpec>,
    catalog: TestCatalog,
    runs: &[CompactRun],
) -> Result<Report, LkgError> {
    let mut ledger = Ledger::new(kubernetes, providers, Arc::new(catalog));
    for run in runs {
        ledger.record_compact(run)?;
    }
    Ok(report_of(&ledger))
}

fn report_of(ledger: &Ledger) -> Report {
    let providers = ledger
        .providers
        .iter()
        .map(|(name, provider)| (name.clone(), report::provider_report(ledger, provider, &select(provider))))
        .collect();
    let version_set =
        newest_good_with_all(ledger).map(|(kubernetes, chosen)| report::version_set(ledger, kubernetes, &chosen));
    Report { providers, version_set }
}

fn select(provider: &ProviderLedger) -> Selection {
    let lkg = provider.keys_with(Verdict::Good).next_back();
    let newest = provider.pairs.keys().next_back().copied();
    let newest_is_bad = newest.is_some_and(|key| provider.verdict(&key) == Some(Verdict::Bad));
    let first_bad =
        lkg.filter(|_| newest_is_bad).and_then(|lkg| provider.keys_with(Verdict::Bad).find(|key| *key > lkg));
    Selection { lkg, newest, first_bad }
}

/// The newest Kubernetes ordinal with a good pair for every version-set provider, and each one's
/// newest good pair there: the candidates are the first provider's good pairs, newest first.
fn newest_good_with_all(ledger: &Ledger) -> Option<(usize, BTreeMap<&str, PairKey>)> {
    let required: Vec<(&str, &ProviderLedger)> =
        ledger.version_set_providers().map(|(name, provider)| (name.as_str(), provider)).collect();
    let (_, first) = required.first()?;
    let mut tried = None;
    first.keys_with(Verdict::Good).rev().find_map(|candidate| {
        let kubernetes = candidate.kubernetes;
        if tried.replace(kubernetes) == Some(kubernetes) {
            return None;
        }
        let chosen = required
            .iter()
            .map(|(name, provider)| newest_good_at(provider, kubernetes).map(|key| (*name, key)))
            .collect::<Option<BTreeMap<_, _>>>()?;
        Some((kubernetes, chosen))
    })
}

fn newest_good_at(provider: &ProviderLedger, kubernetes: usize) -> Option<PairKey> {
    let (oldest, newest) = PairKey::bounds_at(kubernetes);
    provider
        .pairs
        .range(oldest..=newest)
        .rev()
        .find(|(_, record)| provider.verdict_of(record) == Verdict::Good)
        .map(|(key, _)| *key)
}

//! The from-scratch computation: records all runs, then reads each answer straight off the
//! definitions by scanning every pair. It is the reference the incremental engine must agree with.

use std::collections::{BTreeMap, BTreeSet};

use crate::ledger::{Ledger, PairKey, ProviderLedger};
use crate::report::{self, Selection};
use crate::{History, LkgError, ProviderSpec, Report, Run, Verdict};

/// Computes the whole report from the histories, the providers and every run, in the order given
/// (which matters only to policies asking for consecutive good runs).
pub fn compute(
    kubernetes: History,
    providers: BTreeMap<String, ProviderSpec>,
    runs: &[Run],
) -> Result<Report, LkgError> {
    let mut ledger = Ledger::new(kubernetes, providers);
    for run in runs {
        ledger.record(run)?;
    }
    let providers = ledger
        .providers
        .iter()
        .map(|(name, provider)| {
            (name.clone(), report::provider_report(provider, &ledger.kubernetes, &select(provider)))
        })
        .collect();
    let version_set =
        newest_good_with_all(&ledger).map(|(kubernetes, chosen)| report::version_set(&ledger, kubernetes, &chosen));
    Ok(Report { providers, version_set })
}

fn select(provider: &ProviderLedger) -> Selection {
    let lkg = provider.keys_with(Verdict::Good).max();
    let newest = provider.pairs.keys().max().copied();
    let newest_is_bad = newest.is_some_and(|key| provider.verdict(&key) == Some(Verdict::Bad));
    let first_bad =
        lkg.filter(|_| newest_is_bad).and_then(|lkg| provider.keys_with(Verdict::Bad).filter(|key| *key > lkg).min());
    Selection { lkg, newest, first_bad }
}

/// The newest Kubernetes ordinal with a good pair for every version-set provider, and each one's
/// newest good pair there.
fn newest_good_with_all(ledger: &Ledger) -> Option<(usize, BTreeMap<&str, PairKey>)> {
    let required: Vec<(&str, &ProviderLedger)> =
        ledger.version_set_providers().map(|(name, provider)| (name.as_str(), provider)).collect();
    let candidates: BTreeSet<usize> =
        required.iter().flat_map(|(_, provider)| provider.keys_with(Verdict::Good).map(|key| key.kubernetes)).collect();
    candidates.into_iter().rev().find_map(|kubernetes| {
        let chosen = required
            .iter()
            .map(|(name, provider)| newest_good_at(provider, kubernetes).map(|key| (*name, key)))
            .collect::<Option<BTreeMap<_, _>>>()?;
        Some((kubernetes, chosen))
    })
}

fn newest_good_at(provider: &ProviderLedger, kubernetes: usize) -> Option<PairKey> {
    provider.keys_with(Verdict::Good).filter(|key| key.kubernetes == kubernetes).max()
}

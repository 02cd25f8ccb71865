//! Each build's verdict against its provider's policy: read where the index keeps it, else judged
//! once from the build's results and stored, so a load reads a row per build instead of every
//! result. Verdicts are stored under the digest of the policy that judged them: a changed policy
//! (providers.yaml's required tests, or a new indexed test a required pattern matches) judges
//! again under its own digest and never reads the old one's.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use anyhow::Result;
use lkg::{CompactResult, ProviderPolicy, RunJudge, RunVerdict, TestCatalog, TestId};
use sha2::{Digest as _, Sha256};
use tracing::warn;

use super::held::{Digest, Held};
use super::{lkg_status, read_results, required_tests};
use crate::index::{Index, PackedResults, StoredVerdict};
use config::ProvidersConfig;

/// Bumped when judging changes meaning (how a run is judged, not what a policy says): verdicts
/// judged before are then judged again.
const JUDGING: &str = "lkg run verdict v1";

/// Every indexed test, each with the same id in the catalog of every engine of a load.
#[derive(Debug, Clone, Default)]
pub(super) struct Tests {
    /// Shared by the engines of every line.
    pub catalog: Arc<TestCatalog>,
    /// Test row → id.
    pub ids: HashMap<i64, TestId>,
    /// Id → test row.
    pub rows: Vec<i64>,
}

impl Tests {
    /// `(row, name)` as the index lists them.
    pub fn of(listed: Vec<(i64, String)>) -> Self {
        let (mut catalog, mut ids, mut rows) = (TestCatalog::new(), HashMap::new(), Vec::new());
        for (row, name) in listed {
            let id = catalog.intern(&name);
            ids.insert(row, id);
            if id.index() == rows.len() {
                rows.push(row);
            }
        }
        Tests { catalog: Arc::new(catalog), ids, rows }
    }
}

/// A provider's policy as runs are judged by it, and its digest: what its stored verdicts are
/// keyed by.
#[derive(Debug, Clone)]
pub(super) struct Policy {
    pub policy: ProviderPolicy,
    pub digest: String,
}

/// Each provider's policy, its required patterns resolved against the indexed tests.
pub(super) fn policies(config: &ProvidersConfig, catalog: &TestCatalog) -> BTreeMap<String, Policy> {
    config
        .providers
        .iter()
        .map(|provider| {
            let policy = ProviderPolicy {
                required_tests: required_tests(&provider.required.tests, catalog),
                ..Default::default()
            };
            (provider.name.clone(), Policy { digest: digest(&policy), policy })
        })
        .collect()
}

/// What judges a run: the required tests and how flaky tests count (not the streak or the version
/// set, which are the pair's and the set's).
fn digest(policy: &ProviderPolicy) -> String {
    let mut hash = Sha256::new();
    hash.update(format!("{JUDGING}\nflaky counts as passed: {}\n", policy.flake.flaky_counts_as_passed));
    for name in &policy.required_tests {
        hash.update(name.as_bytes());
        hash.update(b"\n");
    }
    format!("{:x}", hash.finalize())
}

/// What [`verdicts`] found.
#[derive(Debug, Default)]
pub(super) struct Found {
    /// Build row → its verdict.
    pub verdicts: HashMap<i64, RunVerdict>,
    /// Builds judged from their results now (the others' verdicts were read).
    pub judged: usize,
    /// A build named a test indexed after the tests were listed: judged without it, not stored.
    pub unknown_test: bool,
}

/// The verdict of each build of `builds` under its provider's policy: stored ones (of the build's
/// current content) are read, the others judged from the builds' packed results and stored. With
/// `only_these`, stored verdicts are looked up for these builds alone (an update), else all of
/// each policy's are read (a full load).
pub(super) async fn verdicts(
    index: &Index,
    policies: &BTreeMap<String, Policy>,
    tests: &Tests,
    builds: &[(&Held, &str)],
    only_these: bool,
) -> Result<Found> {
    let mut found = Found::default();
    let mut by_policy: BTreeMap<&str, Vec<&Held>> = BTreeMap::new();
    for (build, provider) in builds {
        if let Some(policy) = policies.get(*provider) {
            by_policy.entry(policy.digest.as_str()).or_default().push(build);
        }
    }
    let mut missing: HashMap<i64, (&Held, &str)> = HashMap::new();
    for (policy, builds) in &by_policy {
        let rows: Vec<i64> = builds.iter().map(|b| b.row).collect();
        let stored = index.lkg_verdicts(policy, only_these.then_some(&rows[..])).await?;
        let stored: HashMap<i64, StoredVerdict> = stored.into_iter().map(|v| (v.build, v)).collect();
        for build in builds {
            let current = |v: &&StoredVerdict| Digest::of(&v.digest) == build.digest;
            match stored.get(&build.row).filter(current).and_then(|v| verdict_of(v, tests)) {
                Some(verdict) => {
                    found.verdicts.insert(build.row, verdict);
                }
                None => {
                    missing.insert(build.row, (build, policy));
                }
            }
        }
    }
    if missing.is_empty() {
        return Ok(found);
    }

    let mut judging = TestCatalog::clone(&tests.catalog);
    let mut judges: BTreeMap<&str, RunJudge> =
        by_policy.keys().map(|digest| (*digest, judge_of(policies, digest, &mut judging))).collect();
    let mut to_store: BTreeMap<&str, Vec<StoredVerdict>> = BTreeMap::new();
    let rows: Vec<i64> = missing.keys().copied().collect();
    let mut judged = BTreeSet::new();
    let mut visit = |packed: PackedResults| {
        let Some((build, policy)) = missing.get(&packed.build) else { return };
        if Digest::of(&packed.digest) != build.digest {
            return; // Packed from other content than listed: read the results below.
        }
        let (results, complete) = compact(packed.results.iter().copied(), tests);
        found.unknown_test |= !complete;
        let Ok(verdict) = judges.get_mut(policy).expect("a judge per policy").judge(&results, &judging) else {
            return;
        };
        if complete {
            let flaky_tests = verdict.flaky_tests.iter().map(|id| tests.rows[id.index()]).collect();
            let stored = StoredVerdict { build: build.row, digest: packed.digest, good: verdict.good, flaky_tests };
            to_store.entry(*policy).or_default().push(stored);
        }
        judged.insert(build.row);
        found.verdicts.insert(build.row, verdict);
    };
    index.packed_results(&rows, &mut visit).await?;

    // Builds with no packed row of their listed content: judged from their results, not stored
    // (which content those are is not known for sure).
    let unpacked: Vec<i64> = rows.iter().copied().filter(|row| !judged.contains(row)).collect();
    if !unpacked.is_empty() {
        let (results, unknown_test) = read_results(index, Some(&unpacked), &unpacked, &tests.ids).await?;
        found.unknown_test |= unknown_test;
        for (row, results) in results {
            let policy = missing[&row].1;
            if let Ok(verdict) = judges.get_mut(policy).expect("a judge per policy").judge(&results, &judging) {
                found.verdicts.insert(row, verdict);
            }
        }
    }
    found.judged = rows.len();
    for (policy, verdicts) in to_store {
        // A verdict not stored is judged again by the next load: slower, never wrong.
        if let Err(error) = index.store_verdicts(policy, &verdicts).await {
            warn!("could not store {} build verdict(s): {error:#}", verdicts.len());
        }
    }
    Ok(found)
}

fn judge_of(policies: &BTreeMap<String, Policy>, digest: &str, judging: &mut TestCatalog) -> RunJudge {
    let policy = policies.values().find(|p| p.digest == digest).expect("a policy of each digest");
    RunJudge::new(&policy.policy, judging)
}

/// A stored verdict in the load's test ids; `None` when it names a test the load does not know.
fn verdict_of(stored: &StoredVerdict, tests: &Tests) -> Option<RunVerdict> {
    let flaky_tests = stored.flaky_tests.iter().map(|row| tests.ids.get(row).copied()).collect::<Option<_>>()?;
    Some(RunVerdict { good: stored.good, flaky_tests })
}

/// Results as the engines take them, and whether every test was known (unknown ones are left out).
fn compact(
    results: impl Iterator<Item = (i64, crate::record::TestStatus)>,
    tests: &Tests,
) -> (Vec<CompactResult>, bool) {
    let mut complete = true;
    let compact = results
        .filter_map(|(test, status)| {
            let id = tests.ids.get(&test);
            complete &= id.is_some();
            Some(CompactResult::new(*id?, lkg_status(status)))
        })
        .collect();
    (compact, complete)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_digest_changes_with_what_judges_a_run_and_only_with_that() {
        let base = ProviderPolicy { required_tests: ["a".to_owned()].into(), ..Default::default() };
        let other_tests = ProviderPolicy { required_tests: ["a".to_owned(), "b".to_owned()].into(), ..base.clone() };
        let mut strict = base.clone();
        strict.flake.flaky_counts_as_passed = false;
        let mut streak = base.clone();
        streak.flake.consecutive_good_runs = std::num::NonZeroU32::new(3).unwrap();
        let outside = ProviderPolicy { in_version_set: false, ..base.clone() };
        assert_ne!(digest(&base), digest(&other_tests));
        assert_ne!(digest(&base), digest(&strict));
        assert_eq!(digest(&base), digest(&streak), "the streak is the pair's, not the run's");
        assert_eq!(digest(&base), digest(&outside));
        // Names are separated: ["ab"] is not ["a", "b"].
        let joined = ProviderPolicy { required_tests: ["ab".to_owned()].into(), ..Default::default() };
        let split = ProviderPolicy { required_tests: ["a".to_owned(), "b".to_owned()].into(), ..Default::default() };
        assert_ne!(digest(&joined), digest(&split));
    }

    #[test]
    fn tests_keep_one_id_per_name_and_map_rows_both_ways() {
        let tests = Tests::of(vec![(10, "a".into()), (11, "b".into()), (12, "a".into())]);
        assert_eq!(tests.catalog.len(), 2);
        assert_eq!((tests.ids[&10], tests.ids[&12], tests.ids[&11]), (TestId(0), TestId(0), TestId(1)));
        assert_eq!(tests.rows, [10, 11]);
    }
}

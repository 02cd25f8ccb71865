//! Property tests of the LKG algorithm against a naive oracle written straight from the
//! definitions (design doc, "Last known good"), on random histories, policies and runs.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU32;

use lkg::{
    Attempt, CompactResult, Engine, FlakePolicy, History, JudgedRun, ProviderPolicy, ProviderSpec, Report, Run,
    RunJudge, TestResult, TestStatus, compute,
};
use proptest::prelude::*;

const TESTS: [&str; 4] = ["t0", "t1", "t2", "t3"];

#[derive(Debug, Clone)]
struct Scenario {
    kubernetes: Vec<String>,
    providers: BTreeMap<String, (Vec<String>, ProviderPolicy)>,
    runs: Vec<Run>,
}

impl Scenario {
    fn history(commits: &[String]) -> History {
        History::new(commits.iter().rev().cloned()).unwrap()
    }

    fn specs(&self) -> BTreeMap<String, ProviderSpec> {
        self.providers
            .iter()
            .map(|(name, (commits, policy))| {
                (name.clone(), ProviderSpec { history: Self::history(commits), policy: policy.clone() })
            })
            .collect()
    }

    fn compute(&self, runs: &[Run]) -> Report {
        compute(Self::history(&self.kubernetes), self.specs(), runs).unwrap()
    }
}

fn attempt() -> impl Strategy<Value = Attempt> {
    prop_oneof![6 => Just(Attempt::Pass), 3 => Just(Attempt::Fail), 1 => Just(Attempt::Skip)]
}

fn policy() -> impl Strategy<Value = ProviderPolicy> {
    (proptest::sample::subsequence(TESTS.to_vec(), 0..=3), any::<bool>(), 1..=2u32, prop::bool::weighted(0.8)).prop_map(
        |(required, flaky_counts_as_passed, streak, in_version_set)| ProviderPolicy {
            required_tests: required.into_iter().map(String::from).collect(),
            flake: FlakePolicy { flaky_counts_as_passed, consecutive_good_runs: NonZeroU32::new(streak).unwrap() },
            in_version_set,
        },
    )
}

/// Histories of 1..10 Kubernetes commits and 1..3 providers of 1..5 commits each, and up to 40
/// runs, some on revisions that are in no history.
fn scenario() -> impl Strategy<Value = Scenario> {
    let providers = proptest::collection::vec((1..=5usize, policy()), 1..=3);
    (1..=10usize, providers).prop_flat_map(|(kubernetes_len, providers)| {
        let provider_lens: Vec<usize> = providers.iter().map(|(len, _)| *len).collect();
        let run = (0..providers.len()).prop_flat_map(move |provider| {
            let tests = proptest::collection::vec(
                (proptest::sample::select(TESTS.to_vec()), proptest::collection::vec(attempt(), 0..=3)),
                0..=5,
            );
            // One in twelve revisions is outside the history.
            (Just(provider), 0..kubernetes_len + kubernetes_len.div_ceil(11), 0..provider_lens[provider] + 1, tests)
        });
        let providers = providers.clone();
        proptest::collection::vec(run, 0..=40).prop_map(move |runs| {
            let kubernetes = (0..kubernetes_len).map(|n| format!("k{n}")).collect();
            let providers: BTreeMap<String, (Vec<String>, ProviderPolicy)> = providers
                .iter()
                .enumerate()
                .map(|(p, (len, policy))| {
                    (format!("p{p}"), ((0..*len).map(|n| format!("p{p}c{n}")).collect(), policy.clone()))
                })
                .collect();
            let runs = runs
                .into_iter()
                .enumerate()
                .map(|(build, (provider, kubernetes, provider_commit, tests))| Run {
                    build_id: format!("b{build}"),
                    provider: format!("p{provider}"),
                    kubernetes_version: format!("k{kubernetes}"),
                    provider_version: format!("p{provider}c{provider_commit}"),
                    tests: tests
                        .into_iter()
                        .map(|(name, attempts)| TestResult { name: name.into(), attempts })
                        .collect(),
                    build_passed: None,
                })
                .collect();
            Scenario { kubernetes, providers, runs }
        })
    })
}

/// Whether a run is good, from the definitions: a test's attempts across all its results follow
/// each other; the last one that ran decides; a pass after a failure is flaky.
fn oracle_run_is_good(run: &Run, policy: &ProviderPolicy) -> bool {
    let mut attempts: BTreeMap<&str, Vec<Attempt>> = BTreeMap::new();
    for test in &run.tests {
        attempts.entry(&test.name).or_default().extend(&test.attempts);
    }
    // None: did not run; Some(passed).
    let counts = |attempts: &Vec<Attempt>| -> Option<bool> {
        let ran: Vec<Attempt> = attempts.iter().copied().filter(|a| *a != Attempt::Skip).collect();
        let last = *ran.last()?;
        let flaky = last == Attempt::Pass && ran.contains(&Attempt::Fail);
        Some(last == Attempt::Pass && (!flaky || policy.flake.flaky_counts_as_passed))
    };
    if policy.required_tests.is_empty() {
        let ran: Vec<bool> = attempts.values().filter_map(counts).collect();
        !ran.is_empty() && ran.iter().all(|passed| *passed)
    } else {
        policy.required_tests.iter().all(|name| attempts.get(name.as_str()).and_then(counts) == Some(true))
    }
}

/// Per provider, the (Kubernetes ordinal, provider ordinal) pairs that are good, and every tested
/// pair with whether it is bad (never good, last run bad).
struct Oracle {
    good: BTreeMap<String, BTreeSet<(usize, usize)>>,
    tested: BTreeMap<String, BTreeMap<(usize, usize), bool>>,
}

fn oracle(scenario: &Scenario, runs: &[Run]) -> Oracle {
    let position = |commits: &[String], revision: &str| commits.iter().position(|c| c == revision);
    let mut by_pair: BTreeMap<(String, (usize, usize)), Vec<bool>> = BTreeMap::new();
    for run in runs {
        let (commits, policy) = &scenario.providers[&run.provider];
        let (Some(k), Some(p)) =
            (position(&scenario.kubernetes, &run.kubernetes_version), position(commits, &run.provider_version))
        else {
            continue;
        };
        by_pair.entry((run.provider.clone(), (k, p))).or_default().push(oracle_run_is_good(run, policy));
    }
    let mut good: BTreeMap<String, BTreeSet<(usize, usize)>> =
        scenario.providers.keys().map(|name| (name.clone(), BTreeSet::new())).collect();
    let mut tested: BTreeMap<String, BTreeMap<(usize, usize), bool>> =
        scenario.providers.keys().map(|name| (name.clone(), BTreeMap::new())).collect();
    for ((provider, pair), verdicts) in by_pair {
        let streak = scenario.providers[&provider].1.flake.consecutive_good_runs.get() as usize;
        let is_good = verdicts.windows(streak).any(|window| window.iter().all(|good| *good));
        let is_bad = !is_good && !verdicts.last().unwrap();
        if is_good {
            good.get_mut(&provider).unwrap().insert(pair);
        }
        tested.get_mut(&provider).unwrap().insert(pair, is_bad);
    }
    Oracle { good, tested }
}

fn ordinal(commits: &[String], commit: &str) -> usize {
    commits.iter().position(|c| c == commit).expect("reported commits are in the history")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_lkg_is_good_and_nothing_newer_is(scenario in scenario()) {
        let report = scenario.compute(&scenario.runs);
        let oracle = oracle(&scenario, &scenario.runs);
        for (name, (commits, _)) in &scenario.providers {
            let good = &oracle.good[name];
            let provider = &report.providers[name];
            match &provider.lkg {
                None => prop_assert!(good.is_empty(), "{name} has good pairs {good:?} but no LKG"),
                Some(lkg) => {
                    let pair = (ordinal(&scenario.kubernetes, &lkg.kubernetes_commit), ordinal(commits, &lkg.provider_commit));
                    prop_assert!(good.contains(&pair), "the LKG {pair:?} of {name} is not good");
                    prop_assert!(good.iter().all(|(k, _)| *k <= pair.0), "a newer Kubernetes commit is good for {name}");
                    prop_assert!(good.iter().all(|(k, p)| *k < pair.0 || *p <= pair.1), "a newer {name} commit is good there");
                }
            }
            // A culprit exactly when there is an LKG and the newest tested pair is bad.
            let newest_is_bad = oracle.tested[name].last_key_value().is_some_and(|(_, bad)| *bad);
            prop_assert_eq!(provider.culprit.is_some(), provider.lkg.is_some() && newest_is_bad, "culprit of {}", name);
            if let (Some(culprit), Some(lkg)) = (&provider.culprit, &provider.lkg) {
                let lkg_k = ordinal(&scenario.kubernetes, &lkg.kubernetes_commit);
                if let Some(range) = &culprit.kubernetes {
                    prop_assert_eq!(&range.last_good, &lkg.kubernetes_commit);
                    let first_bad = ordinal(&scenario.kubernetes, &range.first_bad);
                    let expected: Vec<&String> = scenario.kubernetes[lkg_k + 1..=first_bad].iter().rev().collect();
                    prop_assert_eq!(range.commits.iter().collect::<Vec<_>>(), expected);
                    prop_assert!(oracle.tested[name].iter().any(|((k, _), bad)| *k == first_bad && *bad));
                }
            }
        }
        let members: Vec<&String> =
            scenario.providers.iter().filter(|(_, (_, policy))| policy.in_version_set).map(|(name, _)| name).collect();
        let good_for_all = |k: usize| !members.is_empty() && members.iter().all(|name| oracle.good[*name].iter().any(|(gk, _)| *gk == k));
        let newest_good_for_all = (0..scenario.kubernetes.len()).rev().find(|k| good_for_all(*k));
        let reported = report.version_set.as_ref().map(|set| ordinal(&scenario.kubernetes, &set.kubernetes_commit));
        prop_assert_eq!(reported, newest_good_for_all);
    }

    #[test]
    fn the_engine_run_by_run_in_any_order_agrees_with_compute(
        (scenario, order) in scenario().prop_flat_map(|scenario| {
            let indexes: Vec<usize> = (0..scenario.runs.len()).collect();
            (Just(scenario), Just(indexes).prop_shuffle())
        })
    ) {
        let shuffled: Vec<Run> = order.iter().map(|i| scenario.runs[*i].clone()).collect();
        let mut engine = Engine::new(Scenario::history(&scenario.kubernetes), scenario.specs());
        for run in &shuffled {
            engine.add_run(run).unwrap();
        }
        let from_scratch = scenario.compute(&shuffled);
        prop_assert_eq!(&engine.report(), &from_scratch);
        for name in scenario.providers.keys() {
            prop_assert_eq!(engine.lkg(name).unwrap(), from_scratch.providers[name].lkg.clone());
            prop_assert_eq!(engine.culprit(name).unwrap(), from_scratch.providers[name].culprit.clone());
        }
        // Where a single good run makes a pair good, the LKG does not depend on the order of runs.
        let in_order = scenario.compute(&scenario.runs);
        for (name, (_, policy)) in &scenario.providers {
            if policy.flake.consecutive_good_runs.get() == 1 {
                let commits = |report: &Report| report.providers[name].lkg.as_ref().map(|lkg| (lkg.kubernetes_commit.clone(), lkg.provider_commit.clone()));
                prop_assert_eq!(commits(&in_order), commits(&from_scratch));
            }
        }
    }

    /// What a loader that stores each build's verdict does (judge apart, add the verdict) gives
    /// exactly what adding the runs' tests gives: retried, flaky, skipped tests and failed builds
    /// included.
    #[test]
    fn runs_judged_apart_are_added_like_the_runs_they_were_judged_from(scenario in scenario()) {
        let runs: Vec<Run> = scenario.runs.iter().enumerate().map(|(n, run)| {
            let build_passed = [None, Some(true), Some(false)][n % 3];
            Run { build_passed, ..run.clone() }
        }).collect();
        let mut by_tests = Engine::new(Scenario::history(&scenario.kubernetes), scenario.specs());
        let mut by_verdicts = Engine::new(Scenario::history(&scenario.kubernetes), scenario.specs());
        for name in TESTS {
            by_verdicts.intern_test(name);
        }
        let mut judging = by_verdicts.catalog().clone();
        let mut judges: BTreeMap<&String, RunJudge> = scenario.providers.iter()
            .map(|(name, (_, policy))| (name, RunJudge::new(policy, &mut judging)))
            .collect();
        for run in &runs {
            let added = by_tests.add_run(run).unwrap();
            let results: Vec<CompactResult> = run.tests.iter()
                .map(|test| CompactResult::new(judging.id(&test.name).unwrap(), TestStatus::of_attempts(&test.attempts)))
                .collect();
            let verdict = judges.get_mut(&run.provider).unwrap().judge(&results, &judging).unwrap();
            let judged = JudgedRun {
                build_id: run.build_id.clone(),
                provider: run.provider.clone(),
                kubernetes_version: run.kubernetes_version.clone(),
                provider_version: run.provider_version.clone(),
                verdict,
                build_passed: run.build_passed,
            };
            prop_assert_eq!(by_verdicts.add_judged_run(&judged).unwrap(), added);
        }
        prop_assert_eq!(by_verdicts.report(), by_tests.report());
    }
}

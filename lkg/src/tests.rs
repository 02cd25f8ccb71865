//! Scenario tests of the public API over a small Kubernetes history (k1 oldest .. k6 newest) and
//! providers whose histories are <initial>1 .. <initial>4 (aws: a1 .. a4).

use std::collections::BTreeMap;
use std::num::NonZeroU32;

use crate::*;

const PASS: &[Attempt] = &[Attempt::Pass];
const FAIL: &[Attempt] = &[Attempt::Fail];
const FLAKY: &[Attempt] = &[Attempt::Fail, Attempt::Pass];
const SKIP: &[Attempt] = &[Attempt::Skip];

fn kubernetes_history() -> History {
    History::new(["k6", "k5", "k4", "k3", "k2", "k1"])
        .unwrap()
        .with_tags([("v1.30.0", "k2"), ("v1.31.0", "k5")])
        .unwrap()
}

fn provider_history(provider: &str) -> History {
    let initial = &provider[..1];
    History::new((1..=4).rev().map(|n| format!("{initial}{n}")))
        .unwrap()
        .with_tags([("v0.2.0", format!("{initial}2"))])
        .unwrap()
}

fn specs(policies: &[(&str, ProviderPolicy)]) -> BTreeMap<String, ProviderSpec> {
    policies
        .iter()
        .map(|(name, policy)| {
            (name.to_string(), ProviderSpec { history: provider_history(name), policy: policy.clone() })
        })
        .collect()
}

fn engine(policies: &[(&str, ProviderPolicy)]) -> Engine {
    Engine::new(kubernetes_history(), specs(policies))
}

fn aws_engine() -> Engine {
    engine(&[("aws", ProviderPolicy::default())])
}

fn requiring(tests: &[&str]) -> ProviderPolicy {
    ProviderPolicy { required_tests: tests.iter().map(|t| t.to_string()).collect(), ..Default::default() }
}

fn run(build: &str, provider: &str, kubernetes: &str, provider_version: &str, tests: &[(&str, &[Attempt])]) -> Run {
    Run {
        build_id: build.into(),
        provider: provider.into(),
        kubernetes_version: kubernetes.into(),
        provider_version: provider_version.into(),
        tests: tests
            .iter()
            .map(|(name, attempts)| TestResult { name: name.to_string(), attempts: attempts.to_vec() })
            .collect(),
    }
}

fn green(build: &str, provider: &str, kubernetes: &str, provider_version: &str) -> Run {
    run(build, provider, kubernetes, provider_version, &[("a", PASS), ("b", PASS)])
}

fn red(build: &str, provider: &str, kubernetes: &str, provider_version: &str) -> Run {
    run(build, provider, kubernetes, provider_version, &[("a", PASS), ("b", FAIL)])
}

fn add_all(engine: &mut Engine, runs: &[Run]) {
    for run in runs {
        assert_eq!(engine.add_run(run), Ok(RunAdded::New), "run {}", run.build_id);
    }
}

fn verdict(engine: &Engine, provider: &str, kubernetes: &str, provider_version: &str) -> Option<Verdict> {
    engine.pair(provider, kubernetes, provider_version).unwrap().map(|pair| pair.verdict)
}

/// (Kubernetes commit, provider commit) of the LKG.
fn lkg(engine: &Engine, provider: &str) -> Option<(String, String)> {
    engine.lkg(provider).unwrap().map(|pair| (pair.kubernetes_commit, pair.provider_commit))
}

fn pair_of(kubernetes: &str, provider: &str) -> Option<(String, String)> {
    Some((kubernetes.into(), provider.into()))
}

fn range(last_good: &str, first_bad: &str, commits: &[&str]) -> Option<CommitRange> {
    Some(CommitRange {
        last_good: last_good.into(),
        first_bad: first_bad.into(),
        commits: commits.iter().map(|c| c.to_string()).collect(),
    })
}

#[test]
fn a_pair_is_good_when_every_required_test_passed() {
    let mut engine = engine(&[("aws", requiring(&["a", "b"]))]);
    add_all(&mut engine, &[green("1", "aws", "k3", "a1")]);
    let lkg = engine.lkg("aws").unwrap().expect("a good pair");
    assert_eq!((lkg.kubernetes_commit.as_str(), lkg.provider_commit.as_str()), ("k3", "a1"));
    assert_eq!(lkg.verdict, Verdict::Good);
    assert_eq!(lkg.evidence, ["1"]);
    assert!(lkg.bad_runs.is_empty());
}

#[test]
fn a_failed_required_test_makes_the_pair_bad() {
    let mut engine = engine(&[("aws", requiring(&["a", "b"]))]);
    add_all(&mut engine, &[red("1", "aws", "k3", "a1")]);
    let pair = engine.pair("aws", "k3", "a1").unwrap().expect("a tested pair");
    assert_eq!(pair.verdict, Verdict::Bad);
    assert_eq!(pair.bad_runs, ["1"]);
    assert_eq!(engine.lkg("aws").unwrap(), None);
}

#[test]
fn a_required_test_that_is_missing_or_skipped_has_not_passed() {
    let mut engine = engine(&[("aws", requiring(&["a", "b", "c"]))]);
    add_all(
        &mut engine,
        &[
            run("1", "aws", "k2", "a1", &[("a", PASS), ("b", PASS)]),
            run("2", "aws", "k3", "a1", &[("a", PASS), ("b", PASS), ("c", SKIP)]),
            run("3", "aws", "k4", "a1", &[("a", PASS), ("b", PASS), ("c", PASS)]),
        ],
    );
    assert_eq!(verdict(&engine, "aws", "k2", "a1"), Some(Verdict::Bad));
    assert_eq!(verdict(&engine, "aws", "k3", "a1"), Some(Verdict::Bad));
    assert_eq!(verdict(&engine, "aws", "k4", "a1"), Some(Verdict::Good));
}

#[test]
fn failures_outside_the_required_tests_do_not_count() {
    let mut engine = engine(&[("aws", requiring(&["a"]))]);
    add_all(&mut engine, &[red("1", "aws", "k3", "a1")]);
    assert_eq!(verdict(&engine, "aws", "k3", "a1"), Some(Verdict::Good));
}

#[test]
fn with_no_required_tests_every_test_that_ran_must_pass() {
    let mut engine = aws_engine();
    add_all(
        &mut engine,
        &[
            run("1", "aws", "k2", "a1", &[("a", PASS), ("b", SKIP)]),
            run("2", "aws", "k3", "a1", &[("a", PASS), ("c", FAIL)]),
            run("3", "aws", "k4", "a1", &[("a", SKIP)]),
        ],
    );
    assert_eq!(verdict(&engine, "aws", "k2", "a1"), Some(Verdict::Good));
    assert_eq!(verdict(&engine, "aws", "k3", "a1"), Some(Verdict::Bad));
    assert_eq!(verdict(&engine, "aws", "k4", "a1"), Some(Verdict::Bad), "nothing ran");
}

#[test]
fn a_test_that_passed_on_retry_is_flaky_counts_as_passed_and_is_reported() {
    let mut engine = aws_engine();
    add_all(
        &mut engine,
        &[
            run("1", "aws", "k3", "a1", &[("a", FLAKY), ("b", PASS)]),
            run("2", "aws", "k3", "a1", &[("a", FLAKY), ("b", FLAKY)]),
        ],
    );
    let pair = engine.pair("aws", "k3", "a1").unwrap().unwrap();
    assert_eq!(pair.verdict, Verdict::Good);
    assert_eq!(pair.evidence, ["1", "2"]);
    assert_eq!(
        pair.flaky_tests,
        [
            FlakyTest { name: "a".into(), builds: vec!["1".into(), "2".into()] },
            FlakyTest { name: "b".into(), builds: vec!["2".into()] },
        ]
    );
}

#[test]
fn a_flaky_test_fails_the_run_when_the_policy_says_so_and_is_still_reported() {
    let strict = ProviderPolicy {
        flake: FlakePolicy { flaky_counts_as_passed: false, ..Default::default() },
        ..Default::default()
    };
    let mut engine = engine(&[("aws", strict)]);
    add_all(&mut engine, &[run("1", "aws", "k3", "a1", &[("a", FLAKY)])]);
    let pair = engine.pair("aws", "k3", "a1").unwrap().unwrap();
    assert_eq!(pair.verdict, Verdict::Bad);
    assert_eq!(pair.flaky_tests, [FlakyTest { name: "a".into(), builds: vec!["1".into()] }]);
}

#[test]
fn one_good_run_makes_the_pair_good_even_among_bad_ones() {
    let mut engine = aws_engine();
    add_all(&mut engine, &[red("1", "aws", "k3", "a1"), green("2", "aws", "k3", "a1"), red("3", "aws", "k3", "a1")]);
    let pair = engine.pair("aws", "k3", "a1").unwrap().unwrap();
    assert_eq!(pair.verdict, Verdict::Good);
    assert_eq!(pair.evidence, ["2"]);
    assert_eq!(pair.bad_runs, ["1", "3"]);
}

#[test]
fn a_policy_asking_for_consecutive_good_runs_waits_for_the_streak() {
    let two_in_a_row = ProviderPolicy {
        flake: FlakePolicy { consecutive_good_runs: NonZeroU32::new(2).unwrap(), ..Default::default() },
        ..Default::default()
    };
    let mut engine = engine(&[("aws", two_in_a_row)]);
    let verdict_after = |engine: &mut Engine, run: Run| {
        engine.add_run(&run).unwrap();
        verdict(engine, "aws", "k3", "a1").unwrap()
    };
    assert_eq!(verdict_after(&mut engine, green("1", "aws", "k3", "a1")), Verdict::Pending);
    assert_eq!(verdict_after(&mut engine, red("2", "aws", "k3", "a1")), Verdict::Bad);
    assert_eq!(verdict_after(&mut engine, green("3", "aws", "k3", "a1")), Verdict::Pending);
    assert_eq!(engine.lkg("aws").unwrap(), None);
    assert_eq!(verdict_after(&mut engine, green("4", "aws", "k3", "a1")), Verdict::Good);
    assert_eq!(lkg(&engine, "aws"), pair_of("k3", "a1"));
}

#[test]
fn the_lkg_is_the_newest_good_commit_in_history_order_not_run_order() {
    let mut engine = aws_engine();
    add_all(
        &mut engine,
        &[
            green("1", "aws", "k5", "a3"),
            green("2", "aws", "k2", "a4"),
            green("3", "aws", "k5", "a1"),
            green("4", "aws", "k4", "a4"),
            red("5", "aws", "k6", "a4"),
        ],
    );
    let lkg = engine.lkg("aws").unwrap().unwrap();
    assert_eq!((lkg.kubernetes_commit.as_str(), lkg.provider_commit.as_str()), ("k5", "a3"));
    assert_eq!(lkg.evidence, ["1"]);
}

#[test]
fn the_version_set_is_the_newest_commit_good_with_every_provider_in_it() {
    let optional = ProviderPolicy { in_version_set: false, ..Default::default() };
    let mut engine =
        engine(&[("aws", ProviderPolicy::default()), ("gce", ProviderPolicy::default()), ("openstack", optional)]);
    add_all(
        &mut engine,
        &[
            green("1", "aws", "k5", "a2"),
            green("2", "aws", "k4", "a1"),
            green("3", "gce", "k3", "g1"),
            green("4", "gce", "k4", "g2"),
            green("5", "gce", "k4", "g1"),
            red("6", "gce", "k5", "g2"),
            red("7", "openstack", "k4", "o1"),
        ],
    );
    let set = engine.version_set().expect("k4 is good with aws and gce");
    assert_eq!(set.kubernetes_commit, "k4");
    let chosen: Vec<(&str, &str)> =
        set.providers.iter().map(|(name, pair)| (name.as_str(), pair.provider_commit.as_str())).collect();
    assert_eq!(chosen, [("aws", "a1"), ("gce", "g2")]);
    assert_eq!(set.providers["gce"].evidence, ["4"]);
}

#[test]
fn there_is_no_version_set_while_a_provider_in_it_was_never_good() {
    let mut engine = engine(&[("aws", ProviderPolicy::default()), ("gce", ProviderPolicy::default())]);
    add_all(&mut engine, &[green("1", "aws", "k4", "a1"), red("2", "gce", "k4", "g1")]);
    assert_eq!(engine.version_set(), None);
    add_all(&mut engine, &[green("3", "gce", "k3", "g1")]);
    assert_eq!(engine.version_set(), None, "aws and gce are good at different commits");
    add_all(&mut engine, &[green("4", "aws", "k3", "a1")]);
    assert_eq!(engine.version_set().map(|set| set.kubernetes_commit), Some("k3".into()));
}

#[test]
fn the_culprit_range_on_the_kubernetes_side_runs_from_the_lkg_to_the_first_bad_commit() {
    let mut engine = aws_engine();
    add_all(&mut engine, &[red("1", "aws", "k6", "a1"), green("2", "aws", "k2", "a1"), red("3", "aws", "k5", "a1")]);
    let culprit = engine.culprit("aws").unwrap().expect("the newest pair is bad");
    assert_eq!(culprit.kubernetes, range("k2", "k5", &["k5", "k4", "k3"]));
    assert_eq!(culprit.provider, None, "the provider commit did not change");
}

#[test]
fn the_culprit_range_on_the_provider_side_runs_from_the_lkg_to_the_first_bad_provider_commit() {
    let mut engine = aws_engine();
    add_all(&mut engine, &[green("1", "aws", "k3", "a1"), red("2", "aws", "k3", "a4"), red("3", "aws", "k3", "a3")]);
    let culprit = engine.culprit("aws").unwrap().expect("the newest pair is bad");
    assert_eq!(culprit.kubernetes, None, "the Kubernetes commit did not change");
    assert_eq!(culprit.provider, range("a1", "a3", &["a3", "a2"]));
}

#[test]
fn the_culprit_range_covers_both_sides_when_both_changed() {
    let mut engine = aws_engine();
    add_all(&mut engine, &[green("1", "aws", "k2", "a1"), red("2", "aws", "k4", "a2"), red("3", "aws", "k6", "a4")]);
    let culprit = engine.culprit("aws").unwrap().expect("the newest pair is bad");
    assert_eq!(culprit.kubernetes, range("k2", "k4", &["k4", "k3"]));
    assert_eq!(culprit.provider, range("a1", "a2", &["a2"]));
}

#[test]
fn there_is_no_culprit_when_the_newest_pair_is_good_or_nothing_was_ever_good() {
    let mut recovered = aws_engine();
    add_all(
        &mut recovered,
        &[green("1", "aws", "k2", "a1"), red("2", "aws", "k3", "a1"), green("3", "aws", "k4", "a1")],
    );
    assert_eq!(recovered.culprit("aws").unwrap(), None);
    let mut never_good = aws_engine();
    add_all(&mut never_good, &[red("1", "aws", "k3", "a1")]);
    assert_eq!(never_good.culprit("aws").unwrap(), None);
}

#[test]
fn tags_resolve_to_their_commits() {
    let mut engine = aws_engine();
    add_all(&mut engine, &[green("1", "aws", "v1.31.0", "v0.2.0"), red("2", "aws", "k5", "a2")]);
    let pair = engine.pair("aws", "v1.31.0", "a2").unwrap().expect("tag and commit name one pair");
    assert_eq!((pair.kubernetes_commit.as_str(), pair.provider_commit.as_str()), ("k5", "a2"));
    assert_eq!((pair.evidence, pair.bad_runs), (vec!["1".to_string()], vec!["2".to_string()]));
    assert_eq!(engine.pair("aws", "k5", "v0.2.0"), engine.pair("aws", "v1.31.0", "a2"));
}

#[test]
fn an_unknown_commit_is_a_clear_error_and_changes_nothing() {
    let mut engine = aws_engine();
    add_all(&mut engine, &[green("1", "aws", "k3", "a1")]);
    let before = engine.report();

    let error = engine.add_run(&green("7", "aws", "deadbeef", "a1")).unwrap_err();
    assert_eq!(error.to_string(), r#"run 7: "deadbeef" is neither a commit nor a tag of the kubernetes history"#);
    let error = engine.add_run(&green("8", "aws", "k3", "v9.9.9")).unwrap_err();
    assert_eq!(
        error,
        LkgError::InvalidRun {
            build_id: "8".into(),
            reason: Box::new(LkgError::UnknownRevision { repo: "aws".into(), revision: "v9.9.9".into() }),
        }
    );
    let error = engine.add_run(&green("9", "azure", "k3", "a1")).unwrap_err();
    assert_eq!(error.to_string(), r#"run 9: unknown provider "azure": it has no history or policy"#);

    assert_eq!(engine.report(), before);
    assert_eq!(engine.add_run(&green("7", "aws", "k4", "a1")), Ok(RunAdded::New), "a refused build id is not taken");
}

#[test]
fn queries_about_unknown_providers_or_revisions_are_errors() {
    let engine = aws_engine();
    assert_eq!(engine.lkg("azure"), Err(LkgError::UnknownProvider { provider: "azure".into() }));
    assert_eq!(
        engine.pair("aws", "k9", "a1"),
        Err(LkgError::UnknownRevision { repo: "kubernetes".into(), revision: "k9".into() })
    );
}

#[test]
fn adding_a_build_twice_is_a_no_op() {
    let mut engine = aws_engine();
    assert_eq!(engine.add_run(&green("1", "aws", "k3", "a1")), Ok(RunAdded::New));
    assert_eq!(engine.add_run(&red("1", "aws", "k3", "a1")), Ok(RunAdded::AlreadyKnown));
    let pair = engine.pair("aws", "k3", "a1").unwrap().unwrap();
    assert_eq!((pair.evidence, pair.bad_runs), (vec!["1".to_string()], vec![]));
}

fn mixed_policies() -> Vec<(&'static str, ProviderPolicy)> {
    let strict_gce = ProviderPolicy {
        flake: FlakePolicy { flaky_counts_as_passed: false, ..Default::default() },
        ..requiring(&["a"])
    };
    let streaky_openstack = ProviderPolicy {
        flake: FlakePolicy { consecutive_good_runs: NonZeroU32::new(2).unwrap(), ..Default::default() },
        in_version_set: false,
        ..Default::default()
    };
    vec![("aws", ProviderPolicy::default()), ("gce", strict_gce), ("openstack", streaky_openstack)]
}

fn mixed_runs() -> Vec<Run> {
    vec![
        green("1", "aws", "k2", "a1"),
        green("2", "gce", "k3", "g1"),
        run("3", "gce", "k2", "g1", &[("a", PASS), ("b", FAIL)]),
        green("4", "openstack", "k3", "o1"),
        red("5", "aws", "k5", "a2"),
        green("6", "aws", "v1.30.0", "v0.2.0"),
        run("7", "gce", "k5", "g2", &[("a", FLAKY)]),
        green("8", "openstack", "k3", "o1"),
        green("9", "aws", "k3", "a1"),
        red("10", "openstack", "k4", "o2"),
        green("11", "aws", "k6", "a1"),
        red("11", "aws", "k6", "a1"),
        run("12", "aws", "k6", "a3", &[("a", FLAKY), ("b", PASS)]),
        green("13", "gce", "k4", "g2"),
        red("14", "aws", "k4", "a3"),
        run("15", "gce", "k6", "g3", &[("a", FAIL)]),
        green("16", "openstack", "k4", "o2"),
        green("17", "aws", "k4", "a1"),
    ]
}

#[test]
fn adding_runs_one_by_one_agrees_with_computing_from_scratch() {
    let policies = mixed_policies();
    let runs = mixed_runs();
    let mut engine = engine(&policies);
    for (added, run) in runs.iter().enumerate() {
        engine.add_run(run).unwrap();
        let from_scratch = compute(kubernetes_history(), specs(&policies), &runs[..=added]).unwrap();
        assert_eq!(engine.report(), from_scratch, "after run {} (#{added})", run.build_id);
    }
    // The data must exercise every answer, or the agreement above proves little.
    let report = engine.report();
    assert_eq!(report.version_set.map(|set| set.kubernetes_commit), Some("k4".into()));
    assert_eq!(lkg(&engine, "aws"), pair_of("k6", "a3"));
    let gce_culprit = report.providers["gce"].culprit.clone().expect("gce's newest pair is bad");
    assert_eq!(gce_culprit.kubernetes, range("k4", "k5", &["k5"]));
    assert_eq!(verdict(&engine, "openstack", "k4", "o2"), Some(Verdict::Pending));
    assert!(report.providers["aws"].pairs.iter().any(|pair| !pair.flaky_tests.is_empty()));
}

#[test]
fn the_report_round_trips_through_json() {
    let mut engine = engine(&mixed_policies());
    add_all(&mut engine, &mixed_runs()[..10]);
    let report = engine.report();
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["providers"]["aws"]["lkg"]["kubernetes_commit"], "k3");
    assert_eq!(json["providers"]["aws"]["newest"]["verdict"], "bad");
    let back: Report = serde_json::from_value(json).unwrap();
    assert_eq!(back, report);
}

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
        build_passed: None,
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
fn a_commit_not_in_the_history_is_reported_and_ignored_for_ordering() {
    let mut engine = aws_engine();
    add_all(&mut engine, &[green("1", "aws", "k3", "a1"), red("2", "aws", "k4", "a1")]);
    let before = engine.report();

    // A green run on a Kubernetes commit of another branch would be the newest good pair if it
    // were ordered; a red one on an unknown provider commit would be the newest pair.
    assert_eq!(engine.add_run(&green("7", "aws", "deadbeef", "a1")), Ok(RunAdded::Unplaced));
    assert_eq!(engine.add_run(&red("8", "aws", "k6", "v9.9.9")), Ok(RunAdded::Unplaced));
    assert_eq!(engine.add_run(&green("9", "aws", "nope", "nada")), Ok(RunAdded::Unplaced));
    assert_eq!(engine.add_run(&green("7", "aws", "k6", "a1")), Ok(RunAdded::AlreadyKnown), "build 7 is taken");

    let report = engine.report();
    let aws = &report.providers["aws"];
    assert_eq!((&aws.lkg, &aws.newest, &aws.culprit, &aws.pairs), {
        let before = &before.providers["aws"];
        (&before.lkg, &before.newest, &before.culprit, &before.pairs)
    });
    assert_eq!(lkg(&engine, "aws"), pair_of("k3", "a1"));
    let unplaced: Vec<(&str, Vec<&str>)> = aws
        .unplaced
        .iter()
        .map(|run| (run.build_id.as_str(), run.problems.iter().map(String::as_str).collect()))
        .collect();
    assert_eq!(
        unplaced,
        [
            (
                "7",
                vec![
                    r#""deadbeef" is not in the kubernetes history: neither a commit, a unique abbreviation, a tag nor a branch of it"#
                ]
            ),
            (
                "8",
                vec![
                    r#""v9.9.9" is not in the aws history: neither a commit, a unique abbreviation, a tag nor a branch of it"#
                ]
            ),
            (
                "9",
                vec![
                    r#""nope" is not in the kubernetes history: neither a commit, a unique abbreviation, a tag nor a branch of it"#,
                    r#""nada" is not in the aws history: neither a commit, a unique abbreviation, a tag nor a branch of it"#,
                ]
            ),
        ]
    );
    assert_eq!(
        aws.unplaced[0],
        UnplacedRun {
            build_id: "7".into(),
            kubernetes_version: "deadbeef".into(),
            provider_version: "a1".into(),
            problems: vec![r#""deadbeef" is not in the kubernetes history: neither a commit, a unique abbreviation, a tag nor a branch of it"#.into()],
        }
    );
    let runs = [green("1", "aws", "k3", "a1"), red("2", "aws", "k4", "a1"), green("7", "aws", "deadbeef", "a1")];
    assert_eq!(
        compute(kubernetes_history(), specs(&[("aws", ProviderPolicy::default())]), &runs).unwrap().providers["aws"]
            .unplaced
            .len(),
        1
    );
}

#[test]
fn a_run_of_an_unknown_provider_is_a_clear_error_and_changes_nothing() {
    let mut engine = aws_engine();
    add_all(&mut engine, &[green("1", "aws", "k3", "a1")]);
    let before = engine.report();
    let error = engine.add_run(&green("9", "azure", "k3", "a1")).unwrap_err();
    assert_eq!(
        error.to_string(),
        r#"run 9: unknown provider "azure": it has no history or policy; add it to the providers first"#
    );
    assert_eq!(engine.report(), before);
}

#[test]
fn queries_about_unknown_providers_or_revisions_are_errors() {
    let engine = aws_engine();
    assert_eq!(engine.lkg("azure"), Err(LkgError::UnknownProvider { provider: "azure".into() }));
    assert_eq!(
        engine.pair("aws", "k9", "a1"),
        Err(LkgError::UnknownRevision {
            repo: "kubernetes".into(),
            revision: "k9".into(),
            reason: "neither a commit, a unique abbreviation, a tag nor a branch of it".into()
        })
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
fn a_copy_keeps_its_answers_while_runs_are_added_to_the_original_and_the_other_way_round() {
    let policies = mixed_policies();
    let runs = mixed_runs();
    let mut engine = engine(&policies);
    let mut copies = Vec::new();
    for (added, run) in runs.iter().enumerate() {
        copies.push((added, engine.clone(), engine.report()));
        engine.add_run(run).unwrap();
    }
    // Each copy answers as when it was taken, though the maps it shares grew after.
    for (added, copy, report) in &copies {
        assert_eq!(&copy.report(), report, "the copy taken before run #{added}");
    }
    // Adding to a copy leaves the original alone, and the copy answers as a full computation.
    let (half, copy, _) = &copies[runs.len() / 2];
    let mut copy = copy.clone();
    let before = engine.report();
    for run in &runs[*half..] {
        copy.add_run(run).unwrap();
    }
    assert_eq!(engine.report(), before);
    assert_eq!(copy.report(), compute(kubernetes_history(), specs(&policies), &runs).unwrap());
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

/// One hand-built scenario of issue #7's acceptance list, checked on the engine and on `compute`.
struct Case {
    name: &'static str,
    providers: &'static [&'static str],
    runs: Vec<Run>,
    /// Per provider: its LKG as (Kubernetes commit, provider commit).
    lkg: &'static [(&'static str, Option<(&'static str, &'static str)>)],
    /// Per provider with a culprit: the Kubernetes and provider ranges.
    culprits: Vec<(&'static str, Option<CommitRange>, Option<CommitRange>)>,
    version_set: Option<&'static str>,
    /// (provider, flaky test) pairs reported on the LKG pair.
    flaky_on_lkg: &'static [(&'static str, &'static str)],
    unplaced: &'static [(&'static str, &'static str)],
}

fn acceptance_cases() -> Vec<Case> {
    let every_commit = |provider: &str, first_red: usize| -> Vec<Run> {
        (1..=6)
            .map(|n| {
                let (build, k) = (format!("{provider}-{n}"), format!("k{n}"));
                if n < first_red { green(&build, provider, &k, "a1") } else { red(&build, provider, &k, "a1") }
            })
            .collect()
    };
    vec![
        Case {
            name: "linear history, all good",
            providers: &["aws"],
            runs: (1..=6u32)
                .map(|n| green(&n.to_string(), "aws", &format!("k{n}"), &format!("a{}", n.div_ceil(2))))
                .collect(),
            lkg: &[("aws", Some(("k6", "a3")))],
            culprits: vec![],
            version_set: Some("k6"),
            flaky_on_lkg: &[],
            unplaced: &[],
        },
        Case {
            name: "regression in kubernetes at k4, a run at every commit: culprit range exactly (k3, k4]",
            providers: &["aws"],
            runs: every_commit("aws", 4),
            lkg: &[("aws", Some(("k3", "a1")))],
            culprits: vec![("aws", range("k3", "k4", &["k4"]), None)],
            version_set: Some("k3"),
            flaky_on_lkg: &[],
            unplaced: &[],
        },
        Case {
            name: "regression in kubernetes at k5, runs at k2, k5, k6: culprit range (k2, k5]",
            providers: &["aws"],
            runs: vec![green("1", "aws", "k2", "a1"), red("2", "aws", "k6", "a1"), red("3", "aws", "k5", "a1")],
            lkg: &[("aws", Some(("k2", "a1")))],
            culprits: vec![("aws", range("k2", "k5", &["k5", "k4", "k3"]), None)],
            version_set: Some("k2"),
            flaky_on_lkg: &[],
            unplaced: &[],
        },
        Case {
            name: "regression on the provider side at a3, Kubernetes unchanged",
            providers: &["aws"],
            runs: vec![
                green("1", "aws", "k3", "a1"),
                green("2", "aws", "k3", "a2"),
                red("3", "aws", "k3", "a3"),
                red("4", "aws", "k3", "a4"),
            ],
            lkg: &[("aws", Some(("k3", "a2")))],
            culprits: vec![("aws", None, range("a2", "a3", &["a3"]))],
            version_set: Some("k3"),
            flaky_on_lkg: &[],
            unplaced: &[],
        },
        Case {
            name: "a flaky test counts as passed and is reported",
            providers: &["aws"],
            runs: vec![green("1", "aws", "k2", "a1"), run("2", "aws", "k3", "a1", &[("a", PASS), ("b", FLAKY)])],
            lkg: &[("aws", Some(("k3", "a1")))],
            culprits: vec![],
            version_set: Some("k3"),
            flaky_on_lkg: &[("aws", "b")],
            unplaced: &[],
        },
        Case {
            name: "a provider with no runs is unknown, never good, and holds the version set back",
            providers: &["aws", "gce"],
            runs: vec![green("1", "aws", "k3", "a1")],
            lkg: &[("aws", Some(("k3", "a1"))), ("gce", None)],
            culprits: vec![],
            version_set: None,
            flaky_on_lkg: &[],
            unplaced: &[],
        },
        Case {
            name: "two providers whose LKGs differ: the version set is the newest commit good with both",
            providers: &["aws", "gce"],
            runs: [
                every_commit("aws", 7),
                vec![
                    green("g2", "gce", "k2", "g1"),
                    green("g3", "gce", "k3", "g2"),
                    green("g4", "gce", "k4", "g2"),
                    red("g5", "gce", "k5", "g2"),
                    red("g6", "gce", "k6", "g3"),
                ],
            ]
            .concat(),
            lkg: &[("aws", Some(("k6", "a1"))), ("gce", Some(("k4", "g2")))],
            culprits: vec![("gce", range("k4", "k5", &["k5"]), None)],
            version_set: Some("k4"),
            flaky_on_lkg: &[],
            unplaced: &[],
        },
        Case {
            name: "a commit in the results that is not in the history is reported and ignored for ordering",
            providers: &["aws"],
            runs: vec![green("1", "aws", "k2", "a1"), green("2", "aws", "0123abc", "a1"), red("3", "aws", "k3", "a1")],
            lkg: &[("aws", Some(("k2", "a1")))],
            culprits: vec![("aws", range("k2", "k3", &["k3"]), None)],
            version_set: Some("k2"),
            flaky_on_lkg: &[],
            unplaced: &[("aws", "2")],
        },
    ]
}

#[test]
fn the_acceptance_cases_of_issue_7() {
    for case in acceptance_cases() {
        let policies: Vec<(&str, ProviderPolicy)> =
            case.providers.iter().map(|name| (*name, ProviderPolicy::default())).collect();
        let mut engine = engine(&policies);
        for run in &case.runs {
            engine.add_run(run).unwrap();
        }
        let report = engine.report();
        let name = case.name;
        assert_eq!(report, compute(kubernetes_history(), specs(&policies), &case.runs).unwrap(), "{name}");
        for (provider, expected) in case.lkg {
            let expected = expected.map(|(k, p)| (k.to_string(), p.to_string()));
            assert_eq!(lkg(&engine, provider), expected, "{name}: LKG of {provider}");
            if let Some(lkg) = &report.providers[*provider].lkg {
                assert_eq!(lkg.verdict, Verdict::Good, "{name}: the LKG of {provider} is good");
            }
        }
        for provider in case.providers {
            let expected = case.culprits.iter().find(|(name, ..)| name == provider).map(|(_, kubernetes, provider)| {
                Culprit { kubernetes: kubernetes.clone(), provider: provider.clone() }
            });
            assert_eq!(engine.culprit(provider).unwrap(), expected, "{name}: culprit of {provider}");
            let flaky: Vec<&str> = report.providers[*provider]
                .lkg
                .iter()
                .flat_map(|lkg| lkg.flaky_tests.iter().map(|test| test.name.as_str()))
                .collect();
            let expected: Vec<&str> =
                case.flaky_on_lkg.iter().filter(|(name, _)| name == provider).map(|(_, test)| *test).collect();
            assert_eq!(flaky, expected, "{name}: flaky tests of {provider}");
            let unplaced: Vec<&str> =
                report.providers[*provider].unplaced.iter().map(|run| run.build_id.as_str()).collect();
            let expected: Vec<&str> =
                case.unplaced.iter().filter(|(name, _)| name == provider).map(|(_, build)| *build).collect();
            assert_eq!(unplaced, expected, "{name}: unplaced runs of {provider}");
        }
        assert_eq!(report.version_set.map(|set| set.kubernetes_commit).as_deref(), case.version_set, "{name}");
    }
}

#[test]
fn a_provider_with_no_runs_has_no_pair_and_no_answer_but_unknown() {
    let engine = engine(&[("aws", ProviderPolicy::default()), ("gce", ProviderPolicy::default())]);
    let gce = engine.provider_report("gce").unwrap();
    assert_eq!((gce.lkg, gce.newest, gce.culprit, gce.pairs.len()), (None, None, None, 0));
    assert_eq!(engine.pair("gce", "k6", "g4"), Ok(None), "never run: unknown, not bad and not good");
    assert_eq!(engine.version_set(), None);
}

#[test]
fn compact_runs_are_judged_like_named_ones() {
    let policies = mixed_policies();
    let runs = mixed_runs();
    let mut named = engine(&policies);
    let mut compact = engine(&policies);
    for run in &runs {
        named.add_run(run).unwrap();
        let results = run
            .tests
            .iter()
            .map(|test| CompactResult::new(compact.intern_test(&test.name), TestStatus::of_attempts(&test.attempts)))
            .collect();
        let run = CompactRun {
            build_id: run.build_id.clone(),
            provider: run.provider.clone(),
            kubernetes_version: run.kubernetes_version.clone(),
            provider_version: run.provider_version.clone(),
            results,
            build_passed: run.build_passed,
        };
        compact.add_compact_run(&run).unwrap();
    }
    assert_eq!(named.report(), compact.report());
    let error = compact
        .add_compact_run(&CompactRun {
            build_id: "99".into(),
            provider: "aws".into(),
            kubernetes_version: "k6".into(),
            provider_version: "a4".into(),
            results: vec![CompactResult::new(TestId(1000), TestStatus::Pass)],
            build_passed: None,
        })
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "run 99: test id 1000 is not in the test catalog (2 tests): intern test names in the engine's catalog"
    );
    assert_eq!(compact.add_run(&green("99", "aws", "k6", "a4")), Ok(RunAdded::New), "a refused build id is not taken");
}

/// A build `finished.json` calls failed (a required suite failed, a step outside the tests broke)
/// is never good evidence, even when every named required test passed in it.
#[test]
fn a_build_that_failed_is_never_good_whatever_its_required_tests_say() {
    let mut engine = engine(&[("aws", requiring(&["a"]))]);
    let failed_build = Run { build_passed: Some(false), ..green("1", "aws", "k3", "a1") };
    add_all(&mut engine, &[green("0", "aws", "k2", "a1"), failed_build]);
    assert_eq!(verdict(&engine, "aws", "k3", "a1"), Some(Verdict::Bad));
    assert_eq!(lkg(&engine, "aws"), pair_of("k2", "a1"), "the failed build is not the LKG");
    let culprit = engine.culprit("aws").unwrap().expect("a culprit range");
    assert_eq!(culprit.kubernetes, range("k2", "k3", &["k3"]));
    // A build whose own verdict is unknown is judged by its tests; one that passed, likewise.
    add_all(&mut engine, &[Run { build_passed: Some(true), ..green("2", "aws", "k4", "a1") }]);
    add_all(&mut engine, &[Run { build_passed: None, ..green("3", "aws", "k5", "a1") }]);
    assert_eq!(lkg(&engine, "aws"), pair_of("k5", "a1"));
    // And a build that passed does not rescue a required test that failed in it.
    add_all(&mut engine, &[Run { build_passed: Some(true), ..red("4", "aws", "k6", "a1") }]);
    let mut strict = self::engine(&[("aws", requiring(&["b"]))]);
    add_all(&mut strict, &[Run { build_passed: Some(true), ..red("5", "aws", "k6", "a1") }]);
    assert_eq!(verdict(&strict, "aws", "k6", "a1"), Some(Verdict::Bad));
}

/// A verdict judged apart names its flaky tests by id: an id the engine's catalog lacks is refused
/// like a compact run's, and the build id stays free.
#[test]
fn a_judged_run_naming_a_test_outside_the_catalog_is_refused_and_changes_nothing() {
    let mut engine = aws_engine();
    engine.intern_test("a");
    let judged = |flaky_tests| JudgedRun {
        build_id: "1".into(),
        provider: "aws".into(),
        kubernetes_version: "k3".into(),
        provider_version: "a1".into(),
        verdict: RunVerdict { good: true, flaky_tests },
        build_passed: None,
    };
    let error = engine.add_judged_run(&judged(vec![TestId(5)])).unwrap_err();
    assert_eq!(
        error.to_string(),
        "run 1: test id 5 is not in the test catalog (1 tests): intern test names in the engine's catalog"
    );
    assert_eq!(engine.pair("aws", "k3", "a1"), Ok(None));
    assert_eq!(engine.add_judged_run(&judged(vec![TestId(0)])), Ok(RunAdded::New));
    let pair = engine.pair("aws", "k3", "a1").unwrap().unwrap();
    assert_eq!((pair.verdict, pair.flaky_tests[0].name.as_str()), (Verdict::Good, "a"));
}

use std::path::Path;

use config::ProvidersConfig;
use junit::{Attempt, Detail, Outcome, Output, Report, Suite, TestCase};

use super::*;

const ROUTES: &str = "[cloud-e2e] [Feature:Routes] routes";
const AFFINITY: &str = "[It] [sig-network] LoadBalancers should have session affinity work";

/// The bundled `local` with two known failures: `ROUTES` in any suite, affinity in `cloud-e2e`.
fn provider() -> Provider {
    let mut local = ProvidersConfig::bundled().provider("local").unwrap().clone();
    let entry = |test: &str, suite: Option<&str>, n: u32| KnownFailure {
        test: config::TestMatcher::Name(test.into()),
        suite: suite.map(str::to_owned),
        reason: format!("reason {n}"),
        link: format!("https://github.com/o/p/issues/{n}"),
    };
    local.known_failures = vec![entry(ROUTES, None, 1), entry(AFFINITY, Some("cloud-e2e"), 2)];
    local
}

fn case(name: &str, outcomes: &[Outcome]) -> TestCase {
    let attempts = outcomes
        .iter()
        .map(|&outcome| Attempt {
            outcome,
            detail: (outcome == Outcome::Failed).then(|| Detail {
                message: Some("boom".into()),
                kind: None,
                text: Output::default(),
            }),
            ..Attempt::default()
        })
        .collect();
    TestCase { name: name.into(), classname: None, properties: Vec::new(), attempts }
}

/// A suite outcome whose JUnit (written under `dir`) holds `cases`; passed when none failed.
fn outcome(dir: &Path, cases: Vec<TestCase>) -> SuiteOutcome {
    let file = dir.join("junit_s.xml");
    let report = Report { name: None, suites: vec![Suite { name: "s".into(), cases, ..Suite::default() }] };
    junit::write_file(&report, &file).unwrap();
    let passed = report.counts().failed == 0;
    SuiteOutcome { passed, junit: vec![file], summary: "counts".into() }
}

#[test]
fn a_suite_failing_only_known_tests_passes_and_names_each_with_its_reason_and_link() {
    let dir = tempfile::tempdir().unwrap();
    let failed = outcome(dir.path(), vec![case(ROUTES, &[Outcome::Failed]), case("other", &[Outcome::Passed])]);
    let (outcome, met) = apply(&provider(), "cloud-e2e", failed);
    assert!(outcome.passed);
    assert_eq!(outcome.summary, format!("counts; known failure: {ROUTES} (reason 1; https://github.com/o/p/issues/1)"));
    assert_eq!(
        met,
        [Met {
            suite: "cloud-e2e".into(),
            test: ROUTES.into(),
            result: "failed",
            reason: "reason 1".into(),
            link: "https://github.com/o/p/issues/1".into(),
        }]
    );
}

#[test]
fn an_unlisted_failure_still_fails_the_suite_beside_a_known_one() {
    let dir = tempfile::tempdir().unwrap();
    let failed = outcome(dir.path(), vec![case(ROUTES, &[Outcome::Failed]), case("other", &[Outcome::Failed])]);
    let (outcome, met) = apply(&provider(), "cloud-e2e", failed);
    assert!(!outcome.passed, "{}", outcome.summary);
    assert_eq!(met.len(), 1, "the known one is still reported as met");
}

#[test]
fn an_entry_for_one_suite_does_not_cover_the_same_test_in_another() {
    let dir = tempfile::tempdir().unwrap();
    let in_cloud_e2e = outcome(dir.path(), vec![case(AFFINITY, &[Outcome::Failed])]);
    assert!(apply(&provider(), "cloud-e2e", in_cloud_e2e).0.passed);
    let elsewhere = outcome(dir.path(), vec![case(AFFINITY, &[Outcome::Failed])]);
    let (outcome, met) = apply(&provider(), "upstream-load-balancers", elsewhere);
    assert!(!outcome.passed && met.is_empty());
}

#[test]
fn a_known_failure_that_passes_is_reported_so_its_entry_can_go_and_a_flaky_pass_counts() {
    let dir = tempfile::tempdir().unwrap();
    let passing = outcome(
        dir.path(),
        vec![case(ROUTES, &[Outcome::Failed, Outcome::Passed]), case(AFFINITY, &[Outcome::Passed])],
    );
    let (outcome, met) = apply(&provider(), "cloud-e2e", passing);
    assert!(outcome.passed);
    let results: Vec<(&str, &str)> = met.iter().map(|m| (m.test.as_str(), m.result)).collect();
    assert_eq!(results, [(ROUTES, "passed"), (AFFINITY, "passed")]);
    assert!(outcome.summary.ends_with(&format!("; known failure passed, take it off known_failures: {AFFINITY}")));
}

#[test]
fn a_suite_that_failed_without_a_failing_test_stays_failed() {
    let dir = tempfile::tempdir().unwrap();
    // e.g. ginkgo exited non-zero having reported every spec passed.
    let mut broken = outcome(dir.path(), vec![case(ROUTES, &[Outcome::Passed])]);
    broken.passed = false;
    assert!(!apply(&provider(), "cloud-e2e", broken).0.passed);
    let unreadable = SuiteOutcome { passed: false, junit: vec![dir.path().join("missing.xml")], summary: "x".into() };
    let (outcome, met) = apply(&provider(), "cloud-e2e", unreadable);
    assert!(!outcome.passed && met.is_empty());
}

#[test]
fn without_known_failures_nothing_changes() {
    let dir = tempfile::tempdir().unwrap();
    let failed = outcome(dir.path(), vec![case(ROUTES, &[Outcome::Failed])]);
    let mut plain = provider();
    plain.known_failures.clear();
    let (outcome, met) = apply(&plain, "cloud-e2e", failed.clone());
    assert_eq!((outcome, met), (failed, Vec::new()));
}

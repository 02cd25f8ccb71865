//! Tests on the real upstream files in `tests/data/junit/` (see its README) and on crafted bad input.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::*;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/junit").join(name)
}

fn read(name: &str) -> Report {
    read_file(&data(name), &ReadOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn read_str(xml: &str, opts: &ReadOptions) -> Result<Report, JunitError> {
    read_from(xml.as_bytes(), Path::new("mem.xml"), opts)
}

fn case<'a>(report: &'a Report, name: &str) -> &'a TestCase {
    report.cases().map(|(_, c)| c).find(|c| c.name == name).unwrap_or_else(|| panic!("no case {name:?}"))
}

const REAL_FILES: &[&str] = &[
    "k8s-conformance-v1.7-gke-junit_01.xml",
    "k8s-conformance-v1.8-gke-junit_01.xml",
    "ginkgo-v2.34.0-generated-junit_01.xml",
    "kubetest2-writer-test-junit_runner.xml",
    "pytest-9.2.0-generated-junit.xml",
    "nextest-fixture-nextest-tests-junit.xml",
    "quick-junit-basic_report.xml",
];

#[test]
fn ginkgo_v1_conformance_file_counts_match_its_header() {
    // tests="125": the testcases that ran. Four names appear twice, each time a distinct spec
    // that ran and passed: eight cases, not four cases with two attempts each.
    let report = read("k8s-conformance-v1.7-gke-junit_01.xml");
    assert_eq!(report.suites.len(), 1);
    assert_eq!(report.suites[0].cases.len(), 651, "651 testcase elements");
    let counts = report.counts();
    assert_eq!((counts.passed, counts.skipped, counts.failed, counts.flaky), (125, 526, 0, 0));
    assert!(report.cases().all(|(_, c)| c.attempts.len() == 1));
    let report = read("k8s-conformance-v1.8-gke-junit_01.xml");
    assert_eq!(report.suites[0].cases.len(), 693);
    let counts = report.counts();
    assert_eq!((counts.passed, counts.skipped, counts.failed, counts.flaky), (125, 568, 0, 0));
}

#[test]
fn ginkgo_v1_same_named_specs_are_cases_of_their_own_named_as_testgrid_names_them() {
    let report = read("k8s-conformance-v1.7-gke-junit_01.xml");
    let name = "[k8s.io] Projected optional updates should be reflected in volume [Conformance] [Volume]";
    let times = |name: &str| case(&report, name).attempts.iter().map(|a| a.time).collect::<Vec<_>>();
    assert_eq!(times(name), [Some(26.325315627)]);
    assert_eq!(times(&format!("{name} [1]")), [Some(26.514370648)]);
    let repeated: Vec<&str> = report.cases().map(|(_, c)| c.name.as_str()).filter(|n| n.ends_with("] [1]")).collect();
    assert_eq!(repeated.len(), 4, "{repeated:#?}");
    // v1.8: the secret, configMap and downwardAPI specs of the one `Projected` describe.
    let report = read("k8s-conformance-v1.8-gke-junit_01.xml");
    let name = "[k8s.io] Projected optional updates should be reflected in volume [Conformance] [sig-storage]";
    assert_eq!(case(&report, name).attempts[0].time, Some(70.366796542));
    assert_eq!(case(&report, &format!("{name} [1]")).attempts[0].time, Some(26.324383637));
    let names: Vec<&str> = report.cases().map(|(_, c)| c.name.as_str()).collect();
    let distinct: std::collections::HashSet<&str> = names.iter().copied().collect();
    assert_eq!(distinct.len(), names.len(), "every case has a name of its own");
}

#[test]
fn ginkgo_v1_entities_in_names_and_runtime_skips_are_read() {
    let report = read("k8s-conformance-v1.7-gke-junit_01.xml");
    let quoted = case(
        &report,
        "[k8s.io] Variable Expansion should allow substituting values in a container's args [Conformance]",
    );
    assert_eq!(quoted.classname.as_deref(), Some("Kubernetes e2e suite"));
    let skipped_late = case(
        &report,
        "[k8s.io] Probing container should be restarted with a docker exec liveness probe with timeout [Conformance]",
    );
    assert_eq!(skipped_late.status(), Status::Skipped);
    assert_eq!(skipped_late.attempts[0].time, Some(6.1879445650000005));
}

#[test]
fn e2e_test_v1_37_dry_run_counts_match_what_ginkgo_wrote() {
    // 3,213 <testcase>s: 469 status="passed" (462 Conformance specs and 7 suite nodes, one of them,
    // [ReportBeforeSuite], twice) and 2,744 status="skipped".
    let report = read("e2e.test-v1.37.1-dryrun-conformance-junit_01.xml");
    assert_eq!(report.suites.len(), 1);
    assert_eq!(report.suites[0].name, "Kubernetes e2e suite");
    let attempts: usize = report.cases().map(|(_, c)| c.attempts.len()).sum();
    assert_eq!(attempts, 3213);
    let counts = report.counts();
    assert_eq!((counts.total, counts.passed, counts.skipped), (3213, 469, 2744));
    assert_eq!((counts.failed, counts.errors, counts.flaky), (0, 0, 0));
    // Two passing runs of one name (two suite nodes) are two cases, not a retry.
    assert_eq!(case(&report, "[ReportBeforeSuite]").status(), Status::Passed);
    assert_eq!(case(&report, "[ReportBeforeSuite] [1]").status(), Status::Passed);
}

#[test]
fn ginkgo_v2_statuses_properties_and_retry_markers() {
    let report = read("ginkgo-v2.34.0-generated-junit_01.xml");
    let suite = &report.suites[0];
    assert_eq!(suite.name, "Sample e2e suite");
    assert!(suite.properties.contains(&Property { name: "SuiteSucceeded".into(), value: "false".into() }));
    let status = |name: &str| case(&report, &format!("[It] [sig-cloud-provider] Nodes {name}")).status();
    assert_eq!(status("should be ready [Conformance]"), Status::Passed);
    assert_eq!(status("should have a provider ID [Conformance]"), Status::Failed);
    assert_eq!(status("should eventually get an address"), Status::Flaky);
    assert_eq!(status("should be skipped at runtime"), Status::Skipped);
    assert_eq!(status("is pending"), Status::Skipped);
    let flaky = case(&report, "[It] [sig-cloud-provider] Nodes should eventually get an address");
    assert_eq!(flaky.attempts.len(), 2);
    assert!(flaky.attempts[1].system_err.as_ref().unwrap().text.contains("attempt 2\n"));
}

#[test]
fn a_name_without_its_tags_is_the_same_test_across_releases() {
    let v136 =
        "[It] [sig-network] LoadBalancers ExternalTrafficPolicy: Local [Feature:LoadBalancer] [Slow] should work";
    let v137 =
        "[It] [sig-network] LoadBalancers ExternalTrafficPolicy: Local [Feature:LoadBalancer] should work [Slow]";
    assert_eq!(untagged_name(v136), "LoadBalancers ExternalTrafficPolicy: Local should work");
    assert_eq!(untagged_name(v136), untagged_name(v137));
    assert_eq!(untagged_name("[It] a  [x [nested]] b"), "a b");
}

#[test]
fn a_skip_gives_its_reason_unless_it_is_ginkgos_bare_skipped() {
    let report = read("ginkgo-v2.34.0-generated-junit_01.xml");
    let reason = |name: &str| {
        let case = case(&report, &format!("[It] [sig-cloud-provider] Nodes {name}"));
        case.skip_reason().and_then(|d| d.message.clone())
    };
    assert_eq!(reason("should be skipped at runtime").as_deref(), Some("skipped - not supported by this provider"));
    assert_eq!(reason("is pending").as_deref(), Some("pending"));
    assert_eq!(reason("should not be focused [Slow] [slow]"), None, "left out by ginkgo's filters: no reason");
    assert_eq!(reason("should have a provider ID [Conformance]"), None, "a failure is no skip");
    let pytest = read("pytest-9.2.0-generated-junit.xml");
    let xfail = case(&pytest, "test_known_bug").skip_reason().and_then(|d| d.message.clone());
    assert_eq!(xfail.as_deref(), Some("known bug 123"));
    let conformance = read("e2e.test-v1.37.1-dryrun-conformance-junit_01.xml");
    assert_eq!(conformance.cases().filter(|(_, c)| c.skip_reason().is_some()).count(), 0);
}

#[test]
fn ginkgo_v2_failure_message_resolves_character_references() {
    let report = read("ginkgo-v2.34.0-generated-junit_01.xml");
    let failed = case(&report, "[It] [sig-cloud-provider] Nodes should have a provider ID [Conformance]");
    let detail = failed.failure().expect("failure detail");
    assert_eq!(
        detail.message.as_deref(),
        Some("Expected\n    <string>: aws:///i-1\nto equal\n    <string>: gce://p/z/i-1")
    );
    assert_eq!(detail.kind.as_deref(), Some("failed"));
    assert!(detail.text.text.starts_with("[FAILED] Expected\n"));
}

#[test]
fn kubetest2_runner_file_has_a_testsuite_root() {
    let report = read("kubetest2-writer-test-junit_runner.xml");
    assert_eq!(report.name, None);
    assert_eq!(report.suites[0].name, "kubetest2");
    let failed = case(&report, "always fails (junitError)");
    assert_eq!(failed.status(), Status::Failed);
    assert_eq!(failed.failure().unwrap().text.text, "on noes");
    assert_eq!(failed.attempts[0].system_out.as_ref().unwrap().text, "uh oh");
    assert_eq!(report.counts(), Counts { total: 3, passed: 2, failed: 1, ..Counts::default() });
}

#[test]
fn pytest_errors_skips_xfails_and_case_properties() {
    let report = read("pytest-9.2.0-generated-junit.xml");
    assert_eq!(report.name.as_deref(), Some("pytest tests"));
    assert_eq!(report.counts(), Counts { total: 5, passed: 1, failed: 1, errors: 1, skipped: 2, flaky: 0 });
    let passed = case(&report, "test_node_ready");
    assert_eq!(passed.properties, [Property { name: "node".into(), value: "worker-1".into() }]);
    let failed = case(&report, "test_provider_id");
    assert!(failed.failure().unwrap().message.as_deref().unwrap().contains("provider ID <mismatch> & more"));
    let xfail = case(&report, "test_known_bug");
    assert_eq!(xfail.attempts[0].detail.as_ref().unwrap().kind.as_deref(), Some("pytest.xfail"));
    let error = case(&report, "test_needs_cluster");
    assert_eq!(error.status(), Status::Error);
}

#[test]
fn nextest_flaky_and_rerun_elements_become_attempts() {
    let report = read("nextest-fixture-nextest-tests-junit.xml");
    let flaky = case(&report, "test_flaky_mod_4");
    let outcomes: Vec<_> = flaky.attempts.iter().map(|a| a.outcome).collect();
    assert_eq!(outcomes, [Outcome::Failed, Outcome::Failed, Outcome::Failed, Outcome::Passed]);
    assert_eq!(flaky.status(), Status::Flaky);
    assert_eq!(flaky.attempts[1].timestamp.as_deref(), Some("2024-01-09T07:50:12.671+00:00"));
    assert!(flaky.attempts[2].system_err.as_ref().unwrap().text.contains("attempt 3 % 4 != 0"));
    let failed = case(&report, "test_failure_assert");
    assert_eq!(failed.attempts.len(), 3);
    assert_eq!(failed.status(), Status::Failed);
    assert!(failed.attempts[1].detail.as_ref().unwrap().text.text.starts_with("thread 'test_failure_assert' panicked"));
    assert_eq!(report.counts(), Counts { total: 3, passed: 1, failed: 1, flaky: 1, ..Counts::default() });
}

#[test]
fn quick_junit_fixture_flaky_errors_reruns_and_stack_traces() {
    let report = read("quick-junit-basic_report.xml");
    assert_eq!(report.suites[0].properties, [Property { name: "env".into(), value: "FOOBAR".into() }]);
    let flaky = case(&report, "testcase4");
    let outcomes: Vec<_> = flaky.attempts.iter().map(|a| a.outcome).collect();
    assert_eq!(outcomes, [Outcome::Failed, Outcome::Error, Outcome::Passed]);
    let flaky_error = flaky.attempts[1].detail.as_ref().unwrap();
    assert_eq!(
        flaky_error.text.text, "flaky error description\nflaky stack trace",
        "indentation around children dropped"
    );
    assert_eq!(flaky.attempts[1].system_out.as_ref().unwrap().text, "flaky system output");
    let rerun = case(&report, "testcase5");
    let outcomes: Vec<_> = rerun.attempts.iter().map(|a| a.outcome).collect();
    assert_eq!(outcomes, [Outcome::Failed, Outcome::Failed, Outcome::Error]);
    assert_eq!(rerun.status(), Status::Error);
    assert_eq!(case(&report, "testcase2").status(), Status::Error);
}

#[test]
fn writing_then_reading_gives_the_same_report_for_every_real_file() {
    for name in REAL_FILES {
        let report = read(name);
        let again = read_str(&to_string(&report), &ReadOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(again.suites, report.suites, "{name}");
        assert_eq!(again.name, report.name, "{name}");
    }
}

#[test]
fn writer_uses_retry_elements_and_repeats_attempts_that_are_no_retry() {
    let report = read("nextest-fixture-nextest-tests-junit.xml");
    let xml = to_string(&report);
    assert_eq!(xml.matches("<flakyFailure").count(), 3);
    assert_eq!(xml.matches("<rerunFailure").count(), 2);
    assert!(xml.contains("tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"0\""));
    // Every case the reader makes is one <testcase>: the same-named specs went in under numbers.
    let xml = to_string(&read("k8s-conformance-v1.7-gke-junit_01.xml"));
    assert_eq!(xml.matches("<testcase ").count(), 651);
    // Failures then a skip fit one element, as flaky elements before the skip.
    let attempt = |outcome| Attempt { outcome, ..Attempt::default() };
    let with = |outcomes: &[Outcome]| Report {
        name: None,
        suites: vec![Suite {
            name: "s".into(),
            cases: vec![TestCase {
                name: "x".into(),
                attempts: outcomes.iter().map(|&o| attempt(o)).collect(),
                ..TestCase::default()
            }],
            ..Suite::default()
        }],
    };
    let written = with(&[Outcome::Failed, Outcome::Error, Outcome::Skipped]);
    let xml = to_string(&written);
    assert_eq!(xml.matches("<testcase ").count(), 1, "{xml}");
    assert_eq!(read_str(&xml, &ReadOptions::default()).unwrap().suites, written.suites);
    // Attempts after a pass are no retry: repeated <testcase>s, read back as cases of their own.
    let xml = to_string(&with(&[Outcome::Passed, Outcome::Failed, Outcome::Passed]));
    assert_eq!(xml.matches("<testcase ").count(), 2, "{xml}");
    let again = read_str(&xml, &ReadOptions::default()).unwrap();
    assert_eq!(statuses(&again), [("x", Status::Passed), ("x [1]", Status::Flaky)]);
}

#[test]
fn writer_replaces_characters_xml_cannot_carry() {
    let mut case = TestCase { name: "ansi\u{1b}[31m".into(), ..TestCase::default() };
    case.attempts
        .push(Attempt { system_out: Some(Output::new("red \u{1b}[31mX\u{0} \r\n & <b>")), ..Attempt::default() });
    let report = Report { name: None, suites: vec![Suite { name: "s".into(), cases: vec![case], ..Suite::default() }] };
    let xml = to_string(&report);
    assert!(!xml.contains('\u{1b}') && !xml.contains('\u{0}'));
    let again = read_str(&xml, &ReadOptions::default()).unwrap();
    let out = again.suites[0].cases[0].attempts[0].system_out.as_ref().unwrap();
    assert_eq!(out.text, "red \u{FFFD}[31mX\u{FFFD} \r\n & <b>");
    assert_eq!(again.suites[0].cases[0].name, "ansi\u{FFFD}[31m");
}

#[test]
fn write_file_and_write_produce_the_same_bytes() {
    let report = read("pytest-9.2.0-generated-junit.xml");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junit_01.xml");
    write_file(&report, &path).unwrap();
    let mut buf = Vec::new();
    write(&report, &mut buf).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), buf);
}

#[test]
fn large_system_out_is_kept_up_to_the_cap_and_the_rest_counted() {
    let big = "0123456789&amp;".repeat(100_000); // 1.5 MB raw, an entity every 15 bytes
    let xml =
        format!("<testsuite name=\"s\"><testcase name=\"c\"><system-out>{big}</system-out></testcase></testsuite>");
    // 1003 raw bytes = 66 whole units and "0123456789&am": the cut reference is dropped.
    let opts = ReadOptions { max_text_bytes: 1003, ..ReadOptions::default() };
    let report = read_str(&xml, &opts).unwrap();
    let out = report.suites[0].cases[0].attempts[0].system_out.as_ref().unwrap();
    assert_eq!(out.text, "0123456789&".repeat(66) + "0123456789");
    assert_eq!(out.dropped_bytes, big.len() as u64 - 1003);
    assert!(out.is_truncated());
}

#[test]
fn cdata_text_is_read_and_capped() {
    let xml = "<testsuite><testcase name=\"c\"><failure><![CDATA[a < b & c]]></failure></testcase></testsuite>";
    let report = read_str(xml, &ReadOptions::default()).unwrap();
    assert_eq!(report.suites[0].cases[0].failure().unwrap().text.text, "a < b & c");
    let capped = read_str(xml, &ReadOptions { max_text_bytes: 3, ..ReadOptions::default() }).unwrap();
    assert_eq!(capped.suites[0].cases[0].failure().unwrap().text.text, "a <");
}

#[test]
fn status_attribute_alone_decides_when_there_are_no_children() {
    let xml = r#"<testsuites><testsuite name="s">
        <testcase name="a" status="failed"></testcase>
        <testcase name="b" status="timedout"/>
        <testcase name="c" status="pending"/>
    </testsuite></testsuites>"#;
    let report = read_str(xml, &ReadOptions::default()).unwrap();
    let statuses: Vec<_> = report.suites[0].cases.iter().map(TestCase::status).collect();
    assert_eq!(statuses, [Status::Failed, Status::Error, Status::Skipped]);
}

#[test]
fn nested_suites_are_flattened_parent_first() {
    let xml = r#"<testsuites><testsuite name="outer"><testcase name="o"/>
        <testsuite name="inner"><testcase name="i"/></testsuite></testsuite></testsuites>"#;
    let report = read_str(xml, &ReadOptions::default()).unwrap();
    let names: Vec<_> = report.suites.iter().map(|s| (s.name.as_str(), s.cases.len())).collect();
    assert_eq!(names, [("outer", 1), ("inner", 1)]);
}

/// A copy of the ginkgo v1 file cut after `marker` plus `extra` bytes.
fn cut_copy(marker: &str, extra: usize) -> (tempfile::TempDir, PathBuf) {
    let full = std::fs::read_to_string(data("k8s-conformance-v1.7-gke-junit_01.xml")).unwrap();
    let cut = full.find(marker).unwrap() + extra;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junit_01.xml");
    std::fs::write(&path, &full[..cut]).unwrap();
    (dir, path)
}

#[test]
fn a_file_cut_inside_a_tag_is_malformed_at_that_line() {
    let (_dir, path) = cut_copy("<testcase name=\"[k8s.io] ServiceAccounts", 600);
    let err = read_file(&path, &ReadOptions::default()).unwrap_err();
    assert!(matches!(err, JunitError::Malformed { .. }), "{err}");
    let message = err.to_string();
    assert!(message.starts_with(&format!("{} at line 33,", path.display())), "{message}");
}

#[test]
fn a_file_cut_between_elements_is_truncated_inside_the_suite() {
    let (_dir, path) = cut_copy("</testcase>", "</testcase>\n".len());
    let err = read_file(&path, &ReadOptions::default()).unwrap_err();
    let JunitError::Truncated { open, at, .. } = &err else { panic!("{err}") };
    assert_eq!(open, "testsuite");
    assert_eq!(at.line_column, Some((4, 1)), "{err}");
}

#[test]
fn a_file_ending_between_elements_is_truncated_inside_the_open_one() {
    let err =
        read_str("<testsuites><testsuite name=\"s\"><testcase name=\"c\">\n", &ReadOptions::default()).unwrap_err();
    match err {
        JunitError::Truncated { open, file, .. } => {
            assert_eq!(open, "testcase");
            assert_eq!(file, Path::new("mem.xml"));
        }
        other => panic!("{other}"),
    }
}

#[test]
fn a_file_ending_inside_an_output_names_that_element() {
    let xml = "<testsuite><testcase name=\"c\"><system-err>panic: runtime error";
    let err = read_str(xml, &ReadOptions::default()).unwrap_err();
    assert!(matches!(&err, JunitError::Truncated { open, .. } if open == "system-err"), "{err}");
}

#[test]
fn malformed_xml_names_the_position() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junit_bad.xml");
    std::fs::write(&path, "<testsuite>\n  <testcase name=\"a\">\n  </testsuite>\n").unwrap();
    let err = read_file(&path, &ReadOptions::default()).unwrap_err();
    let JunitError::Malformed { at, .. } = &err else { panic!("{err}") };
    assert_eq!(at.line_column.map(|(line, _)| line), Some(3), "{err}");
    assert!(err.to_string().contains("junit_bad.xml at line 3"), "{err}");
}

#[test]
fn a_wrong_root_element_is_refused() {
    let err = read_str("<?xml version=\"1.0\"?>\n<html><body/></html>", &ReadOptions::default()).unwrap_err();
    assert!(matches!(&err, JunitError::WrongRoot { found, .. } if found == "html"), "{err}");
    let err = read_str("<testcase name=\"x\"/>", &ReadOptions::default()).unwrap_err();
    assert!(matches!(&err, JunitError::WrongRoot { found, .. } if found == "testcase"), "{err}");
}

#[test]
fn an_empty_file_has_no_root() {
    let err = read_str("<?xml version=\"1.0\"?>\n", &ReadOptions::default()).unwrap_err();
    assert!(matches!(err, JunitError::Empty { .. }), "{err}");
}

const BILLION_LAUGHS: &str = r#"<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol9 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<testsuite name="&lol9;"><testcase name="c"><failure>&lol9;</failure></testcase></testsuite>"#;

#[test]
fn an_entity_bomb_is_refused_at_its_doctype() {
    let err = read_str(BILLION_LAUGHS, &ReadOptions::default()).unwrap_err();
    assert!(matches!(err, JunitError::Doctype { .. }), "{err}");
    assert!(err.to_string().contains("entity bomb"));
}

#[test]
fn a_doctype_is_refused_wherever_it_stands() {
    let bomb = read_bytes(BILLION_LAUGHS.as_bytes(), Path::new("bomb.xml"), &ReadOptions::default()).unwrap_err();
    let JunitError::Doctype { at, .. } = &bomb else { panic!("{bomb}") };
    assert_eq!(at.line_column.map(|(line, _)| line), Some(7), "after the DOCTYPE that ends on line 7");
    let inside = "<testsuite><!DOCTYPE x [<!ENTITY a \"b\">]><testcase name=\"c\"/></testsuite>";
    let err = read_str(inside, &ReadOptions::default()).unwrap_err();
    assert!(matches!(err, JunitError::Doctype { .. }), "{err}");
}

/// `depth` `<testsuite>`s, each inside the one before, the innermost holding `inner`.
fn nested_suites(depth: usize, inner: &str) -> String {
    let mut xml = "<testsuite name=\"s\">".repeat(depth);
    xml.push_str(inner);
    xml.push_str(&"</testsuite>".repeat(depth));
    xml
}

#[test]
fn suites_nested_a_hundred_thousand_deep_are_too_deep_not_a_stack_overflow() {
    let xml = nested_suites(100_000, "");
    let err = read_bytes(xml.as_bytes(), Path::new("deep.xml"), &ReadOptions::default()).unwrap_err();
    let JunitError::TooDeep { at, limit, .. } = &err else { panic!("{err}") };
    assert_eq!(*limit, 64);
    let suite_tag = "<testsuite name=\"s\">".len() as u64;
    assert_eq!(at.offset, 64 * suite_tag, "the 65th start tag is the one refused");
    assert_eq!(at.line_column, Some((1, 64 * suite_tag + 1)));
    let message = err.to_string();
    assert!(message.starts_with("deep.xml at line 1"), "{message}");
    assert!(message.contains("more than 64 deep") && message.contains("only a few levels"), "{message}");
}

#[test]
fn suites_nested_as_deep_as_the_limit_are_read() {
    let report = read_str(&nested_suites(64, ""), &ReadOptions::default()).unwrap();
    assert_eq!(report.suites.len(), 64);
    let err = read_str(&nested_suites(65, ""), &ReadOptions::default()).unwrap_err();
    assert!(matches!(err, JunitError::TooDeep { limit: 64, .. }), "{err}");
    // A case in the innermost suite is one element deeper than the suite.
    let case = "<testcase name=\"c\"/>";
    let report = read_str(&nested_suites(63, case), &ReadOptions::default()).unwrap();
    assert_eq!(report.suites.len(), 63);
    assert_eq!(report.suites[62].cases.len(), 1, "the case belongs to the innermost suite");
    assert!(report.suites[..62].iter().all(|s| s.cases.is_empty()));
    let err = read_str(&nested_suites(64, case), &ReadOptions::default()).unwrap_err();
    assert!(matches!(err, JunitError::TooDeep { limit: 64, .. }), "{err}");
}

#[test]
fn the_reader_does_not_recurse_even_without_a_depth_limit() {
    // Read on a thread with a small stack: a reader recursing once per suite would overflow it.
    let xml = nested_suites(100_000, "<testcase name=\"c\"/>");
    let opts = ReadOptions { max_depth: usize::MAX, ..ReadOptions::default() };
    let report = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || read_str(&xml, &opts).map(|r| (r.suites.len(), r.suites[99_999].cases.len())))
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(report.unwrap(), (100_000, 1));
}

#[test]
fn every_element_counts_toward_the_depth_limit() {
    let inside_a_failure = |levels: usize| {
        format!(
            "<testsuites><testsuite><testcase name=\"c\"><failure>{}{}</failure></testcase></testsuite></testsuites>",
            "<x>".repeat(levels),
            "</x>".repeat(levels)
        )
    };
    let opts = ReadOptions { max_depth: 8, ..ReadOptions::default() };
    assert!(read_str(&inside_a_failure(4), &opts).is_ok(), "4 levels of JUnit + 4 unknown = 8");
    let err = read_str(&inside_a_failure(5), &opts).unwrap_err();
    assert!(matches!(err, JunitError::TooDeep { limit: 8, .. }), "{err}");
    // An empty element is as deep as a start tag in its place.
    let empty = "<testsuites><testsuite><testcase name=\"c\"><skipped/></testcase></testsuite></testsuites>";
    assert!(read_str(empty, &ReadOptions { max_depth: 4, ..ReadOptions::default() }).is_ok());
    let err = read_str(empty, &ReadOptions { max_depth: 3, ..ReadOptions::default() }).unwrap_err();
    assert!(matches!(err, JunitError::TooDeep { limit: 3, .. }), "{err}");
}

#[test]
fn real_files_fit_well_within_the_default_depth() {
    let opts = ReadOptions { max_depth: 6, ..ReadOptions::default() };
    for name in REAL_FILES {
        read_file(&data(name), &opts).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn quick_xml_reports_declared_entities_without_expanding_them() {
    let mut reader = quick_xml::Reader::from_str(BILLION_LAUGHS);
    let mut refs = Vec::new();
    loop {
        match reader.read_event().unwrap() {
            quick_xml::events::Event::GeneralRef(r) => refs.push(r.into_inner().into_owned()),
            quick_xml::events::Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(refs, ["lol9"], "the reference is handed over by name, never expanded");
}

#[test]
fn undeclared_entities_are_errors_not_expanded() {
    let xml = "<testsuite><testcase name=\"c\"><failure>boom &lol9; boom</failure></testcase></testsuite>";
    let err = read_str(xml, &ReadOptions::default()).unwrap_err();
    assert!(matches!(err, JunitError::Malformed { .. }), "{err}");
    assert!(err.to_string().contains("lol9"), "{err}");
    let in_attribute = read_str("<testsuite name=\"&lol9;\"/>", &ReadOptions::default()).unwrap_err();
    assert!(matches!(in_attribute, JunitError::Malformed { .. }), "{in_attribute}");
}

#[test]
fn a_file_over_the_size_limit_is_refused_unread() {
    let path = data("k8s-conformance-v1.7-gke-junit_01.xml");
    let opts = ReadOptions { max_file_bytes: 100_000, ..ReadOptions::default() };
    let err = read_file(&path, &opts).unwrap_err();
    assert!(matches!(err, JunitError::TooLarge { size: Some(143_825), limit: 100_000, .. }), "{err}");
    assert!(err.to_string().contains("k8s-conformance-v1.7-gke-junit_01.xml"));
    let exact = ReadOptions { max_file_bytes: 143_825, ..ReadOptions::default() };
    assert!(read_file(&path, &exact).is_ok(), "a file of exactly the limit is read");
}

#[test]
fn a_stream_over_the_size_limit_is_cut_off_while_reading() {
    let bytes = std::fs::read(data("k8s-conformance-v1.7-gke-junit_01.xml")).unwrap();
    let opts = ReadOptions { max_file_bytes: 100_000, ..ReadOptions::default() };
    let err = read_from(&bytes[..], Path::new("stdin"), &opts).unwrap_err();
    assert!(matches!(err, JunitError::TooLarge { size: None, limit: 100_000, .. }), "{err}");
}

#[test]
fn a_growing_file_is_stopped_at_the_limit() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    write!(
        file,
        "<testsuite><testcase name=\"c\"><system-out>{}</system-out></testcase></testsuite>",
        "x".repeat(5000)
    )
    .unwrap();
    let opts = ReadOptions { max_file_bytes: 4096, ..ReadOptions::default() };
    let err = read_from(std::fs::File::open(file.path()).unwrap(), file.path(), &opts).unwrap_err();
    assert!(matches!(err, JunitError::TooLarge { .. }), "{err}");
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let err = read_file(Path::new("/nonexistent/junit_01.xml"), &ReadOptions::default()).unwrap_err();
    assert!(matches!(err, JunitError::Io { .. }));
    assert_eq!(err.file(), Path::new("/nonexistent/junit_01.xml"));
}

#[test]
fn flaky_is_decided_by_the_last_attempt_that_ran() {
    let attempt = |outcome| Attempt { outcome, ..Attempt::default() };
    let with = |outcomes: &[Outcome]| TestCase {
        attempts: outcomes.iter().map(|&o| attempt(o)).collect(),
        ..TestCase::default()
    };
    assert_eq!(with(&[Outcome::Failed, Outcome::Passed]).status(), Status::Flaky);
    assert_eq!(with(&[Outcome::Passed, Outcome::Failed]).status(), Status::Failed);
    assert_eq!(with(&[Outcome::Error, Outcome::Passed, Outcome::Skipped]).status(), Status::Flaky);
    assert_eq!(with(&[Outcome::Skipped, Outcome::Skipped]).status(), Status::Skipped);
    assert_eq!(with(&[]).status(), Status::Skipped);
}

/// Each case's name and status, in order.
fn statuses(report: &Report) -> Vec<(&str, Status)> {
    report.cases().map(|(_, c)| (c.name.as_str(), c.status())).collect()
}

/// A ginkgo v1-shaped suite of `<testcase>`s: (name, what it did) in order, where what it did is
/// `pass`, `fail`, `error`, `skip` (as ginkgo v1 writes a spec left out) or `skip:<reason>`.
fn ginkgo_v1_suite(cases: &[(&str, &str)]) -> String {
    let mut xml = String::from("<testsuite tests=\"0\" failures=\"0\" time=\"1\">\n");
    for (name, did) in cases {
        let body = match *did {
            "pass" => String::new(),
            "fail" => "<failure type=\"Failure\">boom</failure>".to_owned(),
            "error" => "<error message=\"panicked\"></error>".to_owned(),
            "skip" => "<skipped></skipped>".to_owned(),
            other => format!("<skipped message=\"{}\"></skipped>", other.strip_prefix("skip:").expect(other)),
        };
        xml.push_str(&format!("<testcase name=\"{name}\" classname=\"Kubernetes e2e suite\">{body}</testcase>\n"));
    }
    xml.push_str("</testsuite>");
    xml
}

fn read_suite(cases: &[(&str, &str)]) -> Report {
    read_str(&ginkgo_v1_suite(cases), &ReadOptions::default()).unwrap()
}

#[test]
fn a_failure_then_a_same_named_pass_elsewhere_in_the_file_is_a_failure_not_a_flake() {
    // Issue 18: two distinct specs with one name, the first failing, the second passing, with
    // other specs (skipped or passed) in between, as in ginkgo v1 conformance files. It was read
    // as one flaky case (0 failed), and `harness lkg check` called the run good.
    for between in ["skip", "pass"] {
        let report = read_suite(&[("X", "fail"), ("other", between), ("X", "pass")]);
        assert_eq!(
            statuses(&report),
            [
                ("X", Status::Failed),
                ("other", if between == "skip" { Status::Skipped } else { Status::Passed }),
                ("X [1]", Status::Passed)
            ]
        );
        assert_eq!((report.counts().failed, report.counts().flaky), (1, 0), "with a {between} in between");
    }
    // The same two specs the other way round: the same verdict.
    let report = read_suite(&[("X", "pass"), ("other", "skip"), ("X", "fail")]);
    assert_eq!(statuses(&report), [("X", Status::Passed), ("other", Status::Skipped), ("X [1]", Status::Failed)]);
    assert_eq!((report.counts().failed, report.counts().flaky), (1, 0));
}

#[test]
fn a_repeat_directly_after_a_failure_is_a_retry() {
    // ginkgo v1 --flakeAttempts: each attempt right after the failed one.
    let report = read_suite(&[("X", "fail"), ("X", "pass")]);
    assert_eq!(statuses(&report), [("X", Status::Flaky)]);
    assert_eq!(report.suites[0].cases[0].attempts.len(), 2);
    let report = read_suite(&[("X", "fail"), ("X", "error"), ("X", "pass"), ("Y", "pass")]);
    assert_eq!(statuses(&report), [("X", Status::Flaky), ("Y", Status::Passed)]);
    let outcomes: Vec<_> = report.suites[0].cases[0].attempts.iter().map(|a| a.outcome).collect();
    assert_eq!(outcomes, [Outcome::Failed, Outcome::Error, Outcome::Passed]);
    // Failing every attempt: one failed case.
    let report = read_suite(&[("X", "fail"), ("X", "fail")]);
    assert_eq!(statuses(&report), [("X", Status::Failed)]);
    assert_eq!(report.counts(), Counts { total: 1, failed: 1, ..Counts::default() });
}

#[test]
fn a_repeat_after_a_pass_or_a_skip_is_a_case_of_its_own() {
    // A pass then a failure: two cases, one failed (it was one failed case with two attempts).
    let report = read_suite(&[("X", "pass"), ("X", "fail")]);
    assert_eq!(statuses(&report), [("X", Status::Passed), ("X [1]", Status::Failed)]);
    // Passes are never retried.
    let report = read_suite(&[("X", "pass"), ("X", "pass"), ("X", "pass")]);
    assert_eq!(statuses(&report), [("X", Status::Passed), ("X [1]", Status::Passed), ("X [2]", Status::Passed)]);
    // A retried case, then another spec of the same name: TestGrid numbers every attempt it shows,
    // so the second case is `X [2]`.
    let report = read_suite(&[("X", "fail"), ("X", "pass"), ("X", "pass")]);
    assert_eq!(statuses(&report), [("X", Status::Flaky), ("X [2]", Status::Passed)]);
    // Skipped pairs (as in v1.34 files), and a repeat after a skip.
    let report = read_suite(&[("X", "skip"), ("X", "skip")]);
    assert_eq!(statuses(&report), [("X", Status::Skipped), ("X [1]", Status::Skipped)]);
    let report = read_suite(&[("X", "skip:not on this provider"), ("X", "fail"), ("X", "pass")]);
    assert_eq!(statuses(&report), [("X", Status::Skipped), ("X [1]", Status::Flaky)]);
    // A skip is never a retry, not even of a failure; and what follows it is not either.
    let report = read_suite(&[("X", "fail"), ("X", "skip:later"), ("X", "pass")]);
    assert_eq!(statuses(&report), [("X", Status::Failed), ("X [1]", Status::Skipped), ("X [2]", Status::Passed)]);
}

#[test]
fn cases_testgrid_leaves_out_are_numbered_after_those_it_shows() {
    // TestGrid drops a <skipped> without text or reason before it numbers the rows, so the pass
    // here is its row `X`; the dropped skip takes the next number.
    let report = read_suite(&[("X", "skip"), ("X", "pass")]);
    assert_eq!(statuses(&report), [("X [1]", Status::Skipped), ("X", Status::Passed)]);
    let report = read_suite(&[("X", "skip"), ("X", "skip:reason"), ("X", "skip"), ("X", "pass")]);
    let names: Vec<_> = statuses(&report).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["X [2]", "X", "X [3]", "X [1]"]);
}

#[test]
fn a_same_named_case_of_another_classname_is_no_retry_but_shares_the_numbering() {
    // TestGrid's row name is the suite and case name; the classname is not part of it.
    let xml = r#"<testsuites><testsuite name="pytest">
        <testcase classname="tests.test_a" name="test_x"><failure message="boom"/></testcase>
        <testcase classname="tests.test_b" name="test_x"/>
    </testsuite></testsuites>"#;
    let report = read_str(xml, &ReadOptions::default()).unwrap();
    assert_eq!(statuses(&report), [("test_x", Status::Failed), ("test_x [1]", Status::Passed)]);
}

#[test]
fn numbering_is_per_suite() {
    let xml = r#"<testsuites>
        <testsuite name="a"><testcase name="x"/><testcase name="x"/></testsuite>
        <testsuite name="b"><testcase name="x"/>
            <testsuite name="c"><testcase name="x"/></testsuite>
            <testcase name="x"/></testsuite>
    </testsuites>"#;
    let report = read_str(xml, &ReadOptions::default()).unwrap();
    let names: Vec<_> = report.cases().map(|(s, c)| (s.name.as_str(), c.name.as_str())).collect();
    assert_eq!(names, [("a", "x"), ("a", "x [1]"), ("b", "x"), ("b", "x [1]"), ("c", "x")]);
}

/// The v1.8 conformance file with a `<failure>` put into the `n`th (0-based) testcase named `name`.
fn v1_8_with_failure(name: &str, n: usize) -> Report {
    let xml = std::fs::read_to_string(data("k8s-conformance-v1.8-gke-junit_01.xml")).unwrap();
    let open = format!("<testcase name=\"{name}\"");
    let at = xml.match_indices(&open).nth(n).expect("the case").0;
    let end = at + xml[at..].find("></testcase>").unwrap() + 1;
    let failed = format!("{}<failure type=\"Failure\">timed out</failure>{}", &xml[..end], &xml[end..]);
    read_str(&failed, &ReadOptions::default()).unwrap()
}

#[test]
fn a_failed_projected_spec_in_a_real_file_fails_the_run_whichever_of_the_pair_it_is() {
    // The v1.8 file's secret and configMap specs "Projected optional updates should be reflected
    // in volume": the first ran at about a third of the file, the second near the end.
    let name = "[k8s.io] Projected optional updates should be reflected in volume [Conformance] [sig-storage]";
    for (n, failed, passed) in
        [(0, name.to_owned(), format!("{name} [1]")), (1, format!("{name} [1]"), name.to_owned())]
    {
        let report = v1_8_with_failure(name, n);
        let counts = report.counts();
        assert_eq!((counts.total, counts.passed, counts.failed, counts.flaky), (693, 124, 1, 0), "spec {n} failed");
        assert_eq!(case(&report, &failed).status(), Status::Failed);
        assert_eq!(case(&report, &passed).status(), Status::Passed);
    }
}

#[test]
fn every_short_sequence_of_repeats_reads_to_distinct_names_and_writes_back_the_same() {
    // Every sequence of up to four <testcase>s over two names and four outcomes.
    let names = ["X", "Y"];
    let outcomes = ["pass", "fail", "skip", "skip:why"];
    let mut sequences: Vec<Vec<(&str, &str)>> = vec![Vec::new()];
    let mut last = sequences.clone();
    for _ in 0..4 {
        let mut longer = Vec::new();
        for sequence in &last {
            for name in names {
                for outcome in outcomes {
                    let mut next = sequence.clone();
                    next.push((name, outcome));
                    longer.push(next);
                }
            }
        }
        sequences.extend(longer.iter().cloned());
        last = longer;
    }
    assert_eq!(sequences.len(), 1 + 8 + 64 + 512 + 4096);
    for sequence in &sequences {
        let report = read_suite(sequence);
        let cases = report.suites.first().map_or(&[][..], |s| &s.cases[..]);
        let distinct: std::collections::HashSet<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(distinct.len(), cases.len(), "{sequence:?}");
        let attempts: usize = cases.iter().map(|c| c.attempts.len()).sum();
        assert_eq!(attempts, sequence.len(), "{sequence:?}");
        for case in cases {
            let (last, before) = case.attempts.split_last().unwrap();
            assert!(before.iter().all(|a| a.outcome.is_failure()), "{sequence:?}: {case:?}");
            assert!(before.is_empty() || last.outcome != Outcome::Skipped, "{sequence:?}");
        }
        let again = read_str(&to_string(&report), &ReadOptions::default()).unwrap();
        assert_eq!(again.suites, report.suites, "{sequence:?}");
    }
}

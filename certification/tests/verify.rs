//! `verify` on a good submission and on each way one can be wrong: every mutation is refused by
//! its own check, with its reason, and by no other.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use certification::conformance_list;
use certification::{Inputs, Outcome, Verdict, verify};

const LIST: &str = r#"
- testname: Old
  codename: '[sig-node] Pods should be submitted and removed [NodeConformance] [Conformance]'
  description: x
  release: v1.9, v1.18
  file: a.go
- testname: Quoted
  codename: '[sig-node] Probing container should be restarted with a exec "cat /tmp/health" liveness probe [NodeConformance] [Conformance]'
  description: x
  release: v1.9
  file: b.go
- testname: New
  codename: '[sig-apps] Deployment doesn''t lose a pod [Conformance]'
  description: x
  release: v1.37
  file: c.go
"#;

const PRODUCT: &str = r#"vendor: Example
name: Example Kubernetes
version: "1.0"
website_url: https://example.org/
repo_url: https://github.com/example/kube
documentation_url: https://example.org/docs
type: distribution
description: A Kubernetes distribution.
contact_email_address: kube@example.org
"#;

fn junit(root: &str, skip_strings: &str, cases: &[(&str, &str)]) -> String {
    let mut xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<{root} tests=\"{n}\">\n<testsuite name=\"Kubernetes e2e suite\">\n<properties>\n\
         <property name=\"SuiteSucceeded\" value=\"true\"></property>\n\
         <property name=\"LabelFilter\" value=\"\"></property>\n\
         <property name=\"FocusStrings\" value=\"\\[Conformance\\]\"></property>\n\
         <property name=\"SkipStrings\" value=\"{skip_strings}\"></property>\n\
         <property name=\"DryRun\" value=\"false\"></property>\n</properties>\n\
         <testcase name=\"[SynchronizedBeforeSuite]\" status=\"passed\"></testcase>\n",
        n = cases.len()
    );
    for (name, status) in cases {
        let body = match *status {
            "failed" => "<failure message=\"boom\">boom</failure>",
            "skipped" => "<skipped message=\"skipped\"></skipped>",
            _ => "",
        };
        xml.push_str(&format!("<testcase name=\"{name}\" status=\"{status}\">{body}</testcase>\n"));
    }
    xml.push_str(&format!("</testsuite>\n</{root}>\n"));
    xml
}

/// The three required tests as `e2e.test` names them (entities escaped, as it writes them).
const CASES: [&str; 3] = [
    "[It] [sig-node] Pods should be submitted and removed [NodeConformance] [Conformance]",
    "[It] [sig-node] Probing container should be restarted with a exec &#39;cat /tmp/health&#39; liveness probe [NodeConformance] [Conformance]",
    "[It] [sig-apps] Deployment doesn&#39;t lose a pod [Conformance]",
];

fn good_junit() -> String {
    let mut cases: Vec<(&str, &str)> = CASES.iter().map(|c| (*c, "passed")).collect();
    cases.push(("[It] [sig-storage] not conformance [Slow]", "skipped"));
    junit("testsuites", "", &cases)
}

const LOG: &str = "I1128 e2e.go:109] Starting e2e run\n\
    Nov 28 10:00:00.000: INFO: e2e test version: v1.37.1\n\
    Ran 3 of 4 Specs in 12.000 seconds\n\
    SUCCESS! -- 3 Passed | 0 Failed | 0 Pending | 1 Skipped\n\
    \nGinkgo ran 1 suite in 13s\nTest Suite Passed\n";

/// A root holding `v1.37/example-kubernetes/` with the four good files.
fn good(root: &Path) -> PathBuf {
    let dir = root.join("v1.37/example-kubernetes");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("README.md"), "# Example\n\nRecreate the cluster with ...\n").unwrap();
    fs::write(dir.join("PRODUCT.yaml"), PRODUCT).unwrap();
    fs::write(dir.join("e2e.log"), LOG).unwrap();
    fs::write(dir.join("junit_01.xml"), good_junit()).unwrap();
    dir
}

fn inputs() -> Inputs {
    Inputs {
        conformance_list: conformance_list::parse(LIST).unwrap(),
        stable: "v1.37".parse().unwrap(),
        title: None,
        content_types: None,
    }
}

/// The checks that failed, with their reasons.
fn failures(verdict: &Verdict) -> Vec<(&'static str, String)> {
    verdict
        .checks
        .iter()
        .filter_map(|c| match &c.outcome {
            Outcome::Fail(reason) => Some((c.name, reason.clone())),
            _ => None,
        })
        .collect()
}

/// Exactly one check fails: `check`, with a reason containing `reason`.
fn refused_by(verdict: &Verdict, check: &str, reason: &str) {
    let failed = failures(verdict);
    assert_eq!(failed.len(), 1, "expected only '{check}' to fail, got {failed:#?}");
    assert_eq!(failed[0].0, check, "{failed:#?}");
    assert!(failed[0].1.contains(reason), "'{reason}' not in '{}'", failed[0].1);
    assert!(!verdict.passed());
}

#[test]
fn a_good_submission_passes_every_check_from_either_folder() {
    let root = tempfile::tempdir().unwrap();
    let dir = good(root.path());
    for given in [&dir, root.path()] {
        let verdict = verify(given, &inputs()).unwrap();
        assert_eq!(failures(&verdict), [], "{given:?}");
        assert!(verdict.passed());
        assert_eq!(verdict.title().as_deref(), Some("Conformance results for v1.37/example-kubernetes"));
        let skipped: Vec<_> = verdict.checks.iter().filter(|c| matches!(c.outcome, Outcome::NotChecked(_))).collect();
        assert_eq!(skipped.len(), 1, "only the URL fetch is left out: {skipped:?}");
    }
}

#[test]
fn a_missing_file_is_refused() {
    let root = tempfile::tempdir().unwrap();
    fs::remove_file(good(root.path()).join("README.md")).unwrap();
    refused_by(
        &verify(root.path(), &inputs()).unwrap(),
        "submission contains all required files",
        "missing file 'README.md'",
    );
}

#[test]
fn an_empty_file_is_refused() {
    let root = tempfile::tempdir().unwrap();
    fs::write(good(root.path()).join("README.md"), "").unwrap();
    refused_by(
        &verify(root.path(), &inputs()).unwrap(),
        "submission contains all required files",
        "'README.md' is empty",
    );
}

#[test]
fn a_fifth_file_is_refused() {
    let root = tempfile::tempdir().unwrap();
    fs::write(good(root.path()).join("sonobuoy.tar.gz"), "x").unwrap();
    refused_by(&verify(root.path(), &inputs()).unwrap(), "submission only contains required files", "sonobuoy.tar.gz");
}

#[test]
fn two_folders_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = good(root.path());
    let other = root.path().join("v1.37/other-kubernetes");
    fs::create_dir_all(&other).unwrap();
    fs::rename(dir.join("README.md"), other.join("README.md")).unwrap();
    refused_by(
        &verify(root.path(), &inputs()).unwrap(),
        "submission is only one product",
        "v1.37/example-kubernetes, v1.37/other-kubernetes",
    );
}

#[test]
fn files_outside_a_release_folder_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = good(root.path());
    let verdict = verify(&dir.join(".."), &inputs()).unwrap();
    let failed = failures(&verdict);
    assert!(
        failed.iter().any(|(name, reason)| name.starts_with("submission has files in structure")
            && reason.contains("file 'example-kubernetes/")),
        "{failed:#?}"
    );
}

#[test]
fn a_missing_conformance_test_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let cases = [(CASES[0], "passed"), (CASES[1], "passed")];
    fs::write(good(root.path()).join("junit_01.xml"), junit("testsuites", "", &cases)).unwrap();
    refused_by(
        &verify(root.path(), &inputs()).unwrap(),
        "all required conformance tests in the junit_01.xml are present",
        "1 of the 3 required test(s) are missing, skipped or failed:\n    - [sig-apps] Deployment doesn't lose a pod [Conformance]",
    );
}

#[test]
fn a_failed_conformance_test_is_refused_twice() {
    let root = tempfile::tempdir().unwrap();
    let cases = [(CASES[0], "passed"), (CASES[1], "failed"), (CASES[2], "passed")];
    fs::write(good(root.path()).join("junit_01.xml"), junit("testsuites", "", &cases)).unwrap();
    let verdict = verify(root.path(), &inputs()).unwrap();
    let failed = failures(&verdict);
    let names: Vec<_> = failed.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        names,
        ["all required conformance tests in the junit_01.xml are present", "all tests pass"],
        "{failed:#?}"
    );
    assert!(failed[0].1.contains("\"cat /tmp/health\""), "{failed:#?}");
    assert!(failed[1].1.contains("1 test(s) failed"), "{failed:#?}");
}

#[test]
fn a_skipped_conformance_test_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let cases = [(CASES[0], "skipped"), (CASES[1], "passed"), (CASES[2], "passed")];
    fs::write(good(root.path()).join("junit_01.xml"), junit("testsuites", "", &cases)).unwrap();
    refused_by(
        &verify(root.path(), &inputs()).unwrap(),
        "all required conformance tests in the junit_01.xml are present",
        "- [sig-node] Pods should be submitted and removed",
    );
}

#[test]
fn a_recorded_skip_flag_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let cases: Vec<_> = CASES.iter().map(|c| (*c, "passed")).collect();
    fs::write(good(root.path()).join("junit_01.xml"), junit("testsuites", r"\[Serial\]", &cases)).unwrap();
    refused_by(
        &verify(root.path(), &inputs()).unwrap(),
        "the run skipped nothing: no skip, label filter or dry run",
        r"the run had a skip (SkipStrings = \[Serial\])",
    );
}

#[test]
fn a_testsuite_root_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let cases: Vec<_> = CASES.iter().map(|c| (*c, "passed")).collect();
    fs::write(good(root.path()).join("junit_01.xml"), junit("testsuite", "", &cases)).unwrap();
    refused_by(
        &verify(root.path(), &inputs()).unwrap(),
        "junit_01.xml is the file e2e.test writes with --report-dir",
        "the root element is <testsuite>, not <testsuites>",
    );
}

fn with_product(root: &Path, from: &str, to: &str) {
    let dir = good(root);
    assert!(PRODUCT.contains(from));
    fs::write(dir.join("PRODUCT.yaml"), PRODUCT.replace(from, to)).unwrap();
}

#[test]
fn a_numeric_version_is_refused() {
    let root = tempfile::tempdir().unwrap();
    with_product(root.path(), "version: \"1.0\"", "version: 1.0");
    let verdict = verify(root.path(), &inputs()).unwrap();
    let failed = failures(&verdict);
    // The file cannot be read as strings at all, as for the checks' own YAML reading.
    assert!(!failed.is_empty() && failed.iter().all(|(name, _)| name.contains("PRODUCT.yaml")), "{failed:#?}");
    assert!(failed[0].1.contains("`version` is a float (1.0), not a string: quote it"), "{failed:#?}");
}

#[test]
fn a_type_outside_the_three_is_refused() {
    let root = tempfile::tempdir().unwrap();
    with_product(root.path(), "type: distribution", "type: platform");
    refused_by(
        &verify(root.path(), &inputs()).unwrap(),
        "the type field in PRODUCT.yaml is valid",
        "`platform` is not one of: distribution, hosted platform, installer",
    );
}

#[test]
fn a_bad_email_is_refused() {
    let root = tempfile::tempdir().unwrap();
    with_product(root.path(), "kube@example.org", "kube at example.org");
    refused_by(
        &verify(root.path(), &inputs()).unwrap(),
        "the URL and email fields in the PRODUCT.yaml are valid",
        "contact_email_address: `kube at example.org` is not an e-mail address",
    );
}

#[test]
fn a_relative_url_is_refused() {
    let root = tempfile::tempdir().unwrap();
    with_product(root.path(), "https://example.org/docs", "docs/index.html");
    refused_by(
        &verify(root.path(), &inputs()).unwrap(),
        "the URL and email fields in the PRODUCT.yaml are valid",
        "documentation_url: `docs/index.html` is not an absolute URL",
    );
}

#[test]
fn a_missing_field_is_refused() {
    let root = tempfile::tempdir().unwrap();
    with_product(root.path(), "description: A Kubernetes distribution.\n", "");
    refused_by(
        &verify(root.path(), &inputs()).unwrap(),
        "the PRODUCT.yaml metadata contains all required fields",
        "missing or empty field(s): description",
    );
}

#[test]
fn a_title_of_another_release_is_refused() {
    let root = tempfile::tempdir().unwrap();
    good(root.path());
    let inputs = Inputs { title: Some("Conformance results for v1.36/example-kubernetes".into()), ..inputs() };
    refused_by(
        &verify(root.path(), &inputs).unwrap(),
        "submission release version in title matches release version in folder structure",
        "the Kubernetes release in the title (v1.36) and in the folders (v1.37) differ",
    );
}

#[test]
fn a_release_older_than_stable_minus_two_is_refused() {
    let root = tempfile::tempdir().unwrap();
    good(root.path());
    let inputs = Inputs { stable: "v1.40".parse().unwrap(), ..inputs() };
    refused_by(
        &verify(root.path(), &inputs).unwrap(),
        "the submission release version is a supported version of Kubernetes",
        "v1.37 is older than the oldest release still accepted (v1.38, for stable v1.40)",
    );
}

#[test]
fn a_log_of_another_release_or_without_a_summary_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = good(root.path());
    fs::write(dir.join("e2e.log"), LOG.replace("v1.37.1", "v1.36.4")).unwrap();
    refused_by(
        &verify(root.path(), &inputs()).unwrap(),
        "the e2e.log output contains the Kubernetes release version",
        "e2e.log is of e2e test version v1.36.4, the folders say v1.37",
    );
    fs::write(dir.join("e2e.log"), LOG.replace("SUCCESS! -- 3 Passed | 0 Failed", "FAIL! -- 2 Passed | 1 Failed"))
        .unwrap();
    refused_by(
        &verify(root.path(), &inputs()).unwrap(),
        "the e2e.log output ends with ginkgo's summary of a run with no failure",
        "2 passed, 1 failed of 3 run",
    );
}

#[test]
fn fetched_content_types_are_checked() {
    let root = tempfile::tempdir().unwrap();
    good(root.path());
    let mut types: BTreeMap<String, String> = ["website_url", "repo_url", "documentation_url"]
        .into_iter()
        .map(|f| (f.to_owned(), "text/html; charset=utf-8".to_owned()))
        .collect();
    let passing = Inputs { content_types: Some(types.clone()), ..inputs() };
    assert_eq!(failures(&verify(root.path(), &passing).unwrap()), []);
    types.insert("documentation_url".into(), "application/pdf".into());
    let failing = Inputs { content_types: Some(types), ..inputs() };
    refused_by(
        &verify(root.path(), &failing).unwrap(),
        "the URL fields in the PRODUCT.yaml resolve to their specified data types",
        "documentation_url answered with content type 'application/pdf', not text/html",
    );
}

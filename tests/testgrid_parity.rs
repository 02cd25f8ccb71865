//! The reader against TestGrid's own code, on every real file in `tests/data/junit/` and on
//! repeats made up here: `tools/testing/testgrid-read --junit FILE` runs TestGrid's updater
//! (github.com/GoogleCloudPlatform/testgrid v0.0.176, `pkg/updater`, with its `metadata/junit`
//! parser) on one build holding the file and prints the rows it would show, and what its parser
//! made of each `<testcase>`. See `tests/data/junit/README.md` ("TestGrid parity").
//!
//! TestGrid shows a build's same-named results one of two ways: merged into one row (its default;
//! FLAKY when some passed and some failed, in any order) or, with `disable_merged_status: true`,
//! as rows `name`, `name [1]`, … (`SplitCells`). The reader's case names are the split rows'; its
//! statuses fold into the merged rows.
//!
//! The differences that remain are meant, and asserted here by name:
//! - a case with retry elements (`<flakyFailure>`, `<rerunFailure>`, …) or ginkgo v2's
//!   `Failed.  Retrying` markers is Flaky here; TestGrid ignores both and shows the element's
//!   own result (PASS).
//! - a repeat directly after a failure is a retry here, one Flaky case; TestGrid shows each attempt
//!   as a row (split) or the name as FLAKY (merged).
//! - a pass then a failure of one name is a failed case here; merged, TestGrid calls it FLAKY.

use crate::common;

use common::go_tools;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use junit::{ReadOptions, Report, Status, TestCase};
use serde_json::Value;

/// Every file in `tests/data/junit/`.
fn real_files() -> Vec<PathBuf> {
    let dir = go_tools::repo_root().join("tests/data/junit");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "xml"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "{files:?}");
    files
}

/// What TestGrid makes of one file.
struct TestGrid {
    /// Row name → TestStatus name, without the job's `Overall` row.
    rows: BTreeMap<String, String>,
    /// TestGrid's `metadata/junit` parse: one per `<testcase>`.
    testcases: Vec<Value>,
}

fn testgrid(file: &Path, split: bool) -> TestGrid {
    let mut cmd = Command::new(go_tools::go_tool("testgrid-read"));
    cmd.arg("--junit").arg(file);
    if split {
        cmd.arg("--disable-merged-status");
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "testgrid-read --junit {}: {}", file.display(), String::from_utf8_lossy(&out.stderr));
    let grid: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = grid["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["name"] != "junit.Overall")
        .map(|r| (r["name"].as_str().unwrap().to_owned(), r["results"][0].as_str().unwrap().to_owned()))
        .collect();
    TestGrid { rows, testcases: grid["testcases"].as_array().cloned().unwrap_or_default() }
}

fn read(file: &Path) -> Report {
    junit::read_file(file, &ReadOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// TestGrid's row name: suite and case name joined with "." (`dotName`).
fn row_name(suite: &str, case: &str) -> String {
    match (suite.is_empty(), case.is_empty()) {
        (false, false) => format!("{suite}.{case}"),
        (true, _) => case.to_owned(),
        (false, true) => suite.to_owned(),
    }
}

/// Whether TestGrid leaves the case out: a `<skipped>` with no text and no message but "skipped".
fn left_out(case: &TestCase) -> bool {
    case.status() == Status::Skipped
        && case.attempts.iter().all(|a| {
            a.detail
                .as_ref()
                .is_none_or(|d| d.text.text.is_empty() && matches!(d.message.as_deref(), None | Some("" | "skipped")))
        })
}

/// The result TestGrid shows for one `<testcase>` with this outcome (`convertResult`).
fn testgrid_result(status: Status) -> &'static str {
    match status {
        Status::Failed | Status::Error => "FAIL",
        Status::Skipped => "PASS_WITH_SKIPS",
        Status::Passed => "PASS",
        // TestGrid does not read retry elements or ginkgo's retry text: the element passed.
        Status::Flaky => "PASS",
    }
}

/// TestGrid's `MergeCells(flaky=true)` status: FLAKY when some passed and some failed, else the
/// most severe (`internal/result` severities: PASS < PASS_WITH_SKIPS < FLAKY < FAIL).
fn merged(results: &[&str]) -> String {
    let severity = |r: &str| ["PASS", "PASS_WITH_SKIPS", "FLAKY", "FAIL"].iter().position(|x| *x == r).unwrap();
    let passing = results.iter().any(|r| r.starts_with("PASS"));
    let failing = results.contains(&"FAIL");
    if passing && failing {
        return "FLAKY".to_owned();
    }
    results.iter().max_by_key(|r| severity(r)).unwrap().to_string()
}

/// The reader's cases as TestGrid rows: (row name, the result TestGrid gives the case's element,
/// the reader's status), for the cases TestGrid shows.
fn our_rows(report: &Report) -> Vec<(String, &'static str, Status)> {
    report
        .cases()
        .filter(|(_, c)| !left_out(c))
        .map(|(s, c)| (row_name(&s.name, &c.name), testgrid_result(c.status()), c.status()))
        .collect()
}

/// `name [3]` → `name`, the row TestGrid merges it into.
fn base_name(name: &str) -> &str {
    name.strip_suffix(']')
        .and_then(|s| s.rsplit_once(" ["))
        .filter(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .map_or(name, |(base, _)| base)
}

/// The flaky cases of the real files, which TestGrid shows as passed: their flakes are recorded
/// in retry elements or ginkgo's output, which TestGrid does not read.
const FLAKY_IN_ONE_ELEMENT: &[&str] = &[
    "Sample e2e suite.[It] [sig-cloud-provider] Nodes should eventually get an address",
    "nextest-tests::basic.test_flaky_mod_4",
    "testsuite0.testcase4",
];

#[test]
fn every_real_file_reads_as_testgrid_reads_it() {
    let mut flaky = Vec::new();
    for file in real_files() {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let report = read(&file);
        let split = testgrid(&file, true);

        // TestGrid's parser: one result per <testcase>, as many as the reader's cases (no file
        // here has a repeat right after a failure), with as many failures and skips.
        let counts = report.counts();
        let parsed = &split.testcases;
        let count = |key: &str| parsed.iter().filter(|t| t[key] == true).count();
        assert_eq!(parsed.len(), counts.total, "{name}: <testcase>s TestGrid parsed vs cases read");
        let failed = parsed.iter().filter(|t| t["failure"] == true || t["error"] == true).count();
        assert_eq!(failed, counts.failed + counts.errors, "{name}: failed");
        assert_eq!(count("skipped"), counts.skipped, "{name}: skipped");

        // Split rows: the reader's names and results, case for case.
        let ours = our_rows(&report);
        let left_out_count = report.cases().filter(|(_, c)| left_out(c)).count();
        assert_eq!(ours.len() + left_out_count, counts.total);
        let expected: BTreeMap<String, String> = ours.iter().map(|(n, r, _)| (n.clone(), r.to_string())).collect();
        assert_eq!(expected.len(), ours.len(), "{name}: two cases with one row name");
        assert_eq!(split.rows, expected, "{name}: rows with disable_merged_status");
        flaky.extend(ours.iter().filter(|(_, _, s)| *s == Status::Flaky).map(|(n, _, _)| n.clone()));

        // Merged rows (TestGrid's default): one per name, the statuses of its cases folded.
        let mut groups: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (row, result, _) in &ours {
            groups.entry(base_name(row)).or_default().push(result);
        }
        let expected: BTreeMap<String, String> = groups.iter().map(|(n, r)| (n.to_string(), merged(r))).collect();
        assert_eq!(testgrid(&file, false).rows, expected, "{name}: rows merged (TestGrid's default)");
    }
    flaky.sort();
    assert_eq!(flaky, FLAKY_IN_ONE_ELEMENT, "flaky cases TestGrid shows as PASS");
}

#[test]
fn the_same_named_specs_of_ginkgo_v1_files_are_testgrids_numbered_rows() {
    for (file, pairs, rows_split, rows_merged) in [
        ("k8s-conformance-v1.7-gke-junit_01.xml", 4, 125, 121),
        ("k8s-conformance-v1.8-gke-junit_01.xml", 4, 125, 121),
        ("e2e.test-v1.37.1-dryrun-conformance-junit_01.xml", 1, 469, 468),
    ] {
        let path = go_tools::repo_root().join("tests/data/junit").join(file);
        let split = testgrid(&path, true);
        let numbered: Vec<&String> = split.rows.keys().filter(|n| base_name(n) != n.as_str()).collect();
        assert_eq!(numbered.len(), pairs, "{file}: {numbered:#?}");
        assert_eq!(split.rows.len(), rows_split, "{file}");
        assert_eq!(testgrid(&path, false).rows.len(), rows_merged, "{file}");
        let report = read(&path);
        for row in numbered {
            assert!(report.cases().any(|(s, c)| row_name(&s.name, &c.name) == *row), "{file}: no case {row}");
        }
    }
}

/// Repeats no real file here has, written as ginkgo v1 writes its `junit_01.xml`.
fn ginkgo_v1_file(dir: &Path, cases: &[(&str, &str)]) -> PathBuf {
    let mut xml = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n  <testsuite tests=\"0\" failures=\"0\" time=\"1\">\n",
    );
    for (name, did) in cases {
        let body = match *did {
            "pass" => "",
            "fail" => "\n          <failure type=\"Failure\">boom</failure>\n      ",
            "skip" => "\n          <skipped></skipped>\n      ",
            other => panic!("{other}"),
        };
        xml.push_str(&format!(
            "      <testcase name=\"{name}\" classname=\"Kubernetes e2e suite\" time=\"1\">{body}</testcase>\n"
        ));
    }
    xml.push_str("  </testsuite>");
    let path = dir.join("junit_01.xml");
    std::fs::write(&path, xml).unwrap();
    path
}

#[test]
fn repeats_read_here_and_in_testgrid() {
    let dir = tempfile::tempdir().unwrap();
    let file = ginkgo_v1_file(
        dir.path(),
        &[
            ("retried", "fail"),
            ("retried", "pass"),
            ("pass-then-fail", "pass"),
            ("pass-then-fail", "fail"),
            ("fail-then-pass-elsewhere", "fail"),
            ("other", "pass"),
            ("fail-then-pass-elsewhere", "pass"),
            ("twice", "pass"),
            ("twice", "pass"),
            ("skipped-twice", "skip"),
            ("skipped-twice", "skip"),
            ("skip-then-pass", "skip"),
            ("skip-then-pass", "pass"),
            ("retried-then-another", "fail"),
            ("retried-then-another", "fail"),
            ("retried-then-another", "pass"),
            ("retried-then-another", "pass"),
        ],
    );
    let report = read(&file);
    let ours: Vec<(&str, Status)> = report.cases().map(|(_, c)| (c.name.as_str(), c.status())).collect();
    use Status::*;
    assert_eq!(
        ours,
        [
            ("retried", Flaky),
            ("pass-then-fail", Passed),
            ("pass-then-fail [1]", Failed),
            ("fail-then-pass-elsewhere", Failed),
            ("other", Passed),
            ("fail-then-pass-elsewhere [1]", Passed),
            ("twice", Passed),
            ("twice [1]", Passed),
            ("skipped-twice", Skipped),
            ("skipped-twice [1]", Skipped),
            ("skip-then-pass [1]", Skipped),
            ("skip-then-pass", Passed),
            ("retried-then-another", Flaky),
            ("retried-then-another [3]", Passed),
        ]
    );
    let counts = report.counts();
    assert_eq!((counts.failed, counts.flaky), (2, 2));

    let rows = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs.iter().map(|(n, r)| (n.to_string(), r.to_string())).collect()
    };
    // Split: a row per <testcase> TestGrid shows. Every case of the reader's that is no retry is
    // the row of its name; a retried case is the rows of its attempts.
    let split = testgrid(&file, true);
    assert_eq!(
        split.rows,
        rows(&[
            ("retried", "FAIL"),
            ("retried [1]", "PASS"),
            ("pass-then-fail", "PASS"),
            ("pass-then-fail [1]", "FAIL"),
            ("fail-then-pass-elsewhere", "FAIL"),
            ("other", "PASS"),
            ("fail-then-pass-elsewhere [1]", "PASS"),
            ("twice", "PASS"),
            ("twice [1]", "PASS"),
            ("skip-then-pass", "PASS"),
            ("retried-then-another", "FAIL"),
            ("retried-then-another [1]", "FAIL"),
            ("retried-then-another [2]", "PASS"),
            ("retried-then-another [3]", "PASS"),
        ])
    );
    let shown: BTreeSet<&str> = split.rows.keys().map(String::as_str).collect();
    for (name, status) in &ours {
        // Every skip here is ginkgo's bare <skipped>, which TestGrid leaves out.
        assert_eq!(shown.contains(name), *status != Skipped, "{name}");
    }
    // Merged (TestGrid's default): one row a name, FLAKY for any mix of passes and failures, in
    // either order. The reader is stricter where the order says it is no retry.
    assert_eq!(
        testgrid(&file, false).rows,
        rows(&[
            ("retried", "FLAKY"),
            ("pass-then-fail", "FLAKY"),
            ("fail-then-pass-elsewhere", "FLAKY"),
            ("other", "PASS"),
            ("twice", "PASS"),
            ("skip-then-pass", "PASS"),
            ("retried-then-another", "FLAKY"),
        ])
    );
}

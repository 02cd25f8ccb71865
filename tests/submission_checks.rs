//! The submission checks on real data: the conformance lists the pinned releases' own `e2e.test`
//! prints, and a real `junit_01.xml` of `e2e.test` v1.37.1 (a dry run of `[Conformance]`, so every
//! conformance spec is a case with its real name, quotes and all).
//!
//! Needs the toolchains installed (`harness toolchain install --all`, which `scripts/test` runs).

use std::fs;
use std::path::Path;

use certification::{Inputs, Outcome, conformance_list};
use harness::suites::certified_conformance::conformance_list as list_of;

const DRY_RUN_JUNIT: &str = include_str!("data/junit/e2e.test-v1.37.1-dryrun-conformance-junit_01.xml");

async fn list(version: &str) -> Vec<certification::ConformanceTest> {
    let release = toolchain::resolve(Some(version)).unwrap();
    let installed =
        toolchain::installed(&release).expect("the toolchain is installed (harness toolchain install --all)");
    list_of(&installed.binary("e2e.test")).await.unwrap()
}

#[tokio::test]
async fn the_pinned_releases_require_462_and_446_conformance_tests() {
    let v137 = list("v1.37.1").await;
    let v136 = list("v1.36.4").await;
    assert_eq!(conformance_list::required(&v137, "v1.37".parse().unwrap()).len(), 462);
    assert_eq!(conformance_list::required(&v136, "v1.36".parse().unwrap()).len(), 446);
    // The names are each release's own: v1.37 writes the labels in another order than v1.36
    // (`[Conformance] [NodeConformance]`, `[NodeConformance] [Conformance]`), so a submission is
    // checked against the list of its own release.
    let pods = |list: &[certification::ConformanceTest]| {
        list.iter().find(|t| t.codename.contains("Pods should be submitted and removed")).unwrap().codename.clone()
    };
    assert_eq!(pods(&v137), "[sig-node] Pods should be submitted and removed [Conformance] [NodeConformance]");
    assert_eq!(pods(&v136), "[sig-node] Pods should be submitted and removed [NodeConformance] [Conformance]");
}

fn submission(root: &Path, junit: &str) {
    let dir = root.join("v1.37/example");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("README.md"), "# Example\n").unwrap();
    fs::write(
        dir.join("PRODUCT.yaml"),
        "vendor: V\nname: Example\nversion: '1.0'\nwebsite_url: https://example.org/\n\
         documentation_url: https://example.org/docs\ntype: installer\ndescription: An example.\n\
         contact_email_address: a@example.org\n",
    )
    .unwrap();
    fs::write(
        dir.join("e2e.log"),
        "INFO: e2e test version: v1.37.1\nRan 462 of 3213 Specs in 0.3 seconds\nSUCCESS! -- 462 Passed | 0 Failed | 0 Pending | 2751 Skipped\n",
    )
    .unwrap();
    fs::write(dir.join("junit_01.xml"), junit).unwrap();
}

#[tokio::test]
async fn every_required_name_matches_a_real_junit_and_its_dry_run_is_refused() {
    let root = tempfile::tempdir().unwrap();
    submission(root.path(), DRY_RUN_JUNIT);
    let inputs = Inputs {
        conformance_list: list("v1.37.1").await,
        stable: "v1.37".parse().unwrap(),
        title: None,
        content_types: None,
    };
    let verdict = certification::verify(root.path(), &inputs).unwrap();
    let outcome = |name: &str| verdict.checks.iter().find(|c| c.name == name).unwrap().outcome.clone();
    // All 462 names of the list are found among the file's cases, after the unescaping.
    assert_eq!(outcome("all required conformance tests in the junit_01.xml are present"), Outcome::Pass);
    assert_eq!(outcome("all tests pass"), Outcome::Pass);
    // But it was a dry run: nothing ran.
    assert_eq!(
        outcome("the run skipped nothing: no skip, label filter or dry run"),
        Outcome::Fail("the run was a dry run (DryRun = true)".into())
    );
    let failed: Vec<_> = verdict.failures().map(|c| c.name).collect();
    assert_eq!(failed, ["the run skipped nothing: no skip, label filter or dry run"]);

    // One real name removed from the file is named as missing.
    let name = "[sig-node] Pods should be submitted and removed [Conformance] [NodeConformance]";
    let case = format!("<testcase name=\"[It] {name}\"");
    assert!(DRY_RUN_JUNIT.contains(&case), "the fixture holds {name}");
    submission(root.path(), &DRY_RUN_JUNIT.replace(&case, "<testcase name=\"[It] renamed\""));
    let verdict = certification::verify(root.path(), &inputs).unwrap();
    let Outcome::Fail(reason) = &verdict.checks.iter().find(|c| c.name.starts_with("all required")).unwrap().outcome
    else {
        panic!("{verdict:?}")
    };
    assert!(reason.starts_with("1 of the 462 required test(s)") && reason.contains(name), "{reason}");
}

//! `ginkgo` suites: their command lines, and their outcome with a stand-in `e2e.test` (the real
//! one against a real cluster is in `tests/suites.rs`).

use std::fs;
use std::path::Path;
use std::time::Duration;

use super::*;
use config::template::Placeholder;
use junit::{self, Attempt, Outcome, ReadOptions, Report, Status, Suite, TestCase};

fn ctx(root: &Path, provider: &str) -> SuiteContext {
    let mut vars = Vars::new();
    vars.insert(Placeholder::Cluster, "c1".into());
    SuiteContext {
        kubeconfig: root.join("kubeconfig"),
        artifacts: root.join("artifacts"),
        provider: provider.into(),
        kubernetes_version: "v1.37.1".into(),
        vars,
        timeout: Duration::from_secs(5400),
    }
}

fn binaries(root: &Path) -> Binaries {
    Binaries { e2e_test: root.join("bin/e2e.test"), ginkgo: root.join("bin/ginkgo"), kubectl: root.join("bin/kubectl") }
}

#[test]
fn sequential_suites_run_e2e_test_itself_with_kubetest2s_flags() {
    let root = Path::new("/r");
    let suite = GinkgoSuite::new(
        "conformance",
        Some(r"\[Conformance\]".into()),
        None,
        1,
        vec!["--dump-logs-on-failure=false".into(), "--cluster-name={cluster}".into()],
    );
    let argv = suite.argv(&ctx(root, "local"), &binaries(root), None).unwrap();
    assert_eq!(
        argv,
        [
            "/r/bin/e2e.test",
            "--kubeconfig=/r/kubeconfig",
            "--kubectl-path=/r/bin/kubectl",
            "--provider=local",
            r"--ginkgo.focus=\[Conformance\]",
            "--report-dir=/r/artifacts",
            "--ginkgo.timeout=5400s",
            "--ginkgo.no-color",
            "--ginkgo.silence-skips",
            "--dump-logs-on-failure=false",
            "--cluster-name=c1",
        ]
    );
}

#[test]
fn parallel_suites_go_through_the_ginkgo_cli() {
    let root = Path::new("/r");
    let suite = GinkgoSuite::new("quick", Some("a".into()), Some(r"\[Serial\]".into()), 4, Vec::new());
    let mut ctx = ctx(root, "aws-ccm");
    ctx.timeout = Duration::from_millis(1500);
    let argv = suite.argv(&ctx, &binaries(root), Some("quick_")).unwrap();
    assert_eq!(
        argv,
        [
            "/r/bin/ginkgo",
            "--nodes=4",
            "--timeout=1500ms",
            "--no-color",
            "/r/bin/e2e.test",
            "--",
            "--kubeconfig=/r/kubeconfig",
            "--kubectl-path=/r/bin/kubectl",
            "--provider=skeleton",
            "--ginkgo.focus=a",
            r"--ginkgo.skip=\[Serial\]",
            "--report-dir=/r/artifacts",
            "--report-prefix=quick_",
            "--ginkgo.timeout=1500ms",
            "--ginkgo.no-color",
            "--ginkgo.silence-skips",
        ]
    );
    let bad = GinkgoSuite::new("quick", None, None, 1, vec!["--x={nope}".into()]);
    assert!(bad.argv(&ctx, &binaries(root), None).is_err());
}

#[test]
fn flake_attempts_become_ginkgos_and_the_suites_args_still_come_last() {
    let root = Path::new("/r");
    let suite = GinkgoSuite::new("g", None, None, 1, vec!["--ginkgo.v".into()]).with_flake_attempts(3);
    let argv = suite.argv(&ctx(root, "local"), &binaries(root), None).unwrap();
    assert_eq!(argv[argv.len() - 2..], ["--ginkgo.flake-attempts=3", "--ginkgo.v"]);
    let once = GinkgoSuite::new("g", None, None, 1, Vec::new()).with_flake_attempts(1);
    let argv = once.argv(&ctx(root, "local"), &binaries(root), None).unwrap();
    assert!(!argv.iter().any(|a| a.contains("flake")), "one attempt is ginkgo's default: {argv:?}");
}

#[test]
fn the_provider_is_e2es_own_name_or_skeleton() {
    for known in E2E_PROVIDERS {
        assert_eq!(e2e_provider(known), *known);
    }
    assert_eq!(e2e_provider("local"), "local");
    assert_eq!(e2e_provider("gce"), "gce");
    assert_eq!(e2e_provider("aws-ccm"), "skeleton");
    assert_eq!(e2e_provider(""), "skeleton");
    assert_eq!(go_duration(Duration::from_secs(3 * 3600)), "10800s");
    assert_eq!(go_duration(Duration::from_millis(250)), "250ms");
}

/// A stand-in `e2e.test`: prints its arguments, then copies `junit` (if any) to where the real one
/// writes its report, and exits with `code`.
fn fake_e2e(root: &Path, junit: Option<&Path>, code: i32) -> Binaries {
    let bin = binaries(root);
    fs::create_dir_all(root.join("bin")).unwrap();
    let copy = match junit {
        Some(file) => format!("cp {} \"$dir/junit_${{prefix}}01.xml\"", file.display()),
        None => "echo 'panic: runtime error: invalid memory address' >&2".into(),
    };
    let script = format!(
        "#!/bin/sh\necho \"e2e.test $*\"\nprefix=\nfor a in \"$@\"; do case \"$a\" in --report-dir=*) dir=${{a#--report-dir=}};; --report-prefix=*) prefix=${{a#--report-prefix=}};; esac; done\n{copy}\nexit {code}\n"
    );
    testing::write_executable(&bin.e2e_test, &script);
    bin
}

fn report(outcomes: &[(&str, Outcome)]) -> Report {
    let cases = outcomes
        .iter()
        .map(|(name, outcome)| TestCase {
            name: (*name).into(),
            attempts: vec![Attempt { outcome: *outcome, ..Attempt::default() }],
            ..TestCase::default()
        })
        .collect();
    Report { name: None, suites: vec![Suite { name: "Kubernetes e2e suite".into(), cases, ..Suite::default() }] }
}

#[tokio::test]
async fn the_outcome_is_read_from_the_junit_e2e_test_writes() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let ctx = ctx(root, "local");
    let staged = root.join("staged.xml");
    junit::write_file(&report(&[("[It] a", Outcome::Passed), ("[It] b", Outcome::Skipped)]), &staged).unwrap();
    let suite = GinkgoSuite::new("conformance", Some("a".into()), None, 1, Vec::new()).with_binaries(fake_e2e(
        root,
        Some(&staged),
        0,
    ));
    let outcome = suite.run(&ctx).await.unwrap();
    assert!(outcome.passed, "{outcome:?}");
    assert_eq!(outcome.junit, [ctx.artifacts.join("junit_01.xml")]);
    assert!(outcome.summary.starts_with("1 passed, 0 failed, 1 skipped in "), "{}", outcome.summary);
    let output = fs::read_to_string(ctx.artifacts.join("conformance-output.txt")).unwrap();
    assert!(output.starts_with(&format!("e2e.test --kubeconfig={}", ctx.kubeconfig.display())), "{output}");

    // A second ginkgo suite of the run keeps the first one's junit_01.xml.
    junit::write_file(&report(&[("[It] a", Outcome::Passed), ("[It] c", Outcome::Failed)]), &staged).unwrap();
    let suite = GinkgoSuite::new("quick", Some("c".into()), None, 1, Vec::new()).with_binaries(fake_e2e(
        root,
        Some(&staged),
        1,
    ));
    let outcome = suite.run(&ctx).await.unwrap();
    assert!(!outcome.passed);
    assert_eq!(outcome.junit, [ctx.artifacts.join("junit_quick_01.xml")]);
    assert!(outcome.summary.starts_with("1 passed, 1 failed, 0 skipped in "), "{}", outcome.summary);
    assert!(outcome.summary.ends_with("; exit status 1"), "{}", outcome.summary);
    let first = junit::read_file(&ctx.artifacts.join("junit_01.xml"), &ReadOptions::default()).unwrap();
    assert_eq!(first.counts().failed, 0, "the first suite's results are intact");
}

#[tokio::test]
async fn an_e2e_test_that_writes_no_junit_fails_with_the_tail_of_its_output() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let ctx = ctx(root, "local");
    let suite = GinkgoSuite::new("conformance", None, None, 1, Vec::new()).with_binaries(fake_e2e(root, None, 2));
    let outcome = suite.run(&ctx).await.unwrap();
    assert!(!outcome.passed);
    assert_eq!(outcome.junit, [ctx.artifacts.join("junit_conformance.xml")]);
    let report = junit::read_file(&outcome.junit[0], &ReadOptions::default()).unwrap();
    let (_, case) = report.cases().next().unwrap();
    assert_eq!((case.name.as_str(), case.status()), ("conformance", Status::Failed));
    let failure = case.failure().unwrap();
    assert_eq!(failure.message.as_deref(), Some("exit status 2"));
    assert!(failure.text.text.ends_with("panic: runtime error: invalid memory address\n"), "{}", failure.text.text);
}

#[tokio::test]
async fn missing_programs_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut ctx = ctx(root, "local");
    let suite = GinkgoSuite::new("conformance", None, None, 1, Vec::new());
    let err = suite.clone().with_binaries(binaries(root)).run(&ctx).await.unwrap_err().to_string();
    assert_eq!(err, format!("suite conformance: {} does not exist", root.join("bin/e2e.test").display()));

    ctx.kubernetes_version = "v1.99.0".into();
    let err = suite.run(&ctx).await.unwrap_err().to_string();
    assert!(err.starts_with("suite conformance: e2e.test: Kubernetes version 'v1.99.0' is not pinned"), "{err}");
}

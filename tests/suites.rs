//! Suite runners against a real local cluster: `exec` commands driving the toolchain's kubectl,
//! and upstream `e2e.test` v1.37.1 (the toolchain's) under ginkgo.
//!
//! The nodes are kwok's: pods are scheduled and reported Running, but no container runs. So the
//! conformance specs that pass here are the ones that only exercise the API server and the
//! controllers (CRDs, ConfigMaps, Secrets); a spec that needs a container to do something fails.
//!
//! Needs the toolchains installed (`harness toolchain install`, which `scripts/test` runs).

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common;

use common::{TestCluster, assert_torn_down, bring_up, options};
use config::CommandSpec;
use config::template::{Placeholder, Vars};
use harness::suites::exec::ExecSuite;
use harness::suites::ginkgo::GinkgoSuite;
use harness::suites::{SuiteContext, SuiteOutcome, SuiteRunner};
use junit::{self, Attempt, ReadOptions, Report, Status, Suite, TestCase};
use local_cluster::clouds::local::LocalSetup;
use local_cluster::process;
use toolchain::{self, Release};

fn release() -> Release {
    toolchain::resolve(Some("v1.37.1")).expect("v1.37.1 is pinned")
}

fn context(cluster: &TestCluster, artifacts: &Path, timeout: Duration) -> SuiteContext {
    let mut vars = Vars::new();
    vars.insert(Placeholder::Cluster, cluster.state.name.clone());
    SuiteContext {
        kubeconfig: cluster.state.kubeconfig.clone(),
        artifacts: artifacts.to_path_buf(),
        provider: "local".into(),
        kubernetes_version: cluster.state.kubernetes_version.clone(),
        vars,
        timeout,
    }
}

fn command(argv: &[&str]) -> CommandSpec {
    CommandSpec { argv: argv.iter().map(|a| a.to_string()).collect(), ..CommandSpec::default() }
}

fn read(path: &Path) -> Report {
    junit::read_file(path, &ReadOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn file_names(outcome: &SuiteOutcome) -> Vec<String> {
    outcome.junit.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect()
}

/// The one case of a JUnit file the harness wrote for a suite.
fn suite_case(path: &Path) -> TestCase {
    let report = read(path);
    let cases: Vec<TestCase> = report.cases().map(|(_, c)| c.clone()).collect();
    assert_eq!(cases.len(), 1, "{}: {cases:?}", path.display());
    cases.into_iter().next().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn exec_suites_run_commands_against_the_cluster() {
    let cluster = bring_up(options("suites-exec", release(), 1)).await;
    let tmp = tempfile::tempdir().unwrap();
    let artifacts = tmp.path().join("artifacts");
    let ctx = context(&cluster, &artifacts, Duration::from_secs(60));
    let kubectl = toolchain::installed(&release()).unwrap().binary("kubectl").display().to_string();

    // Passing: kubectl finds the cluster through the KUBECONFIG the suite exports.
    let outcome =
        ExecSuite::new("exec-pass", command(&[&kubectl, "get", "nodes", "-o", "name"]), None).run(&ctx).await.unwrap();
    assert!(outcome.passed, "{outcome:?}");
    assert_eq!(file_names(&outcome), ["junit_exec-pass.xml"]);
    let case = suite_case(&outcome.junit[0]);
    assert_eq!((case.name.as_str(), case.status()), ("exec-pass", Status::Passed));
    let output = fs::read_to_string(artifacts.join("exec-pass-output.txt")).unwrap();
    assert_eq!(output, "node/suites-exec-worker-0\n");

    // Failing: the exit status, as kubetest2 words it, and the end of the output.
    let outcome =
        ExecSuite::new("exec-fail", command(&[&kubectl, "get", "node", "no-such-node"]), None).run(&ctx).await.unwrap();
    assert!(!outcome.passed);
    assert!(outcome.summary.ends_with("; exit status 1"), "{}", outcome.summary);
    assert_eq!(file_names(&outcome), ["junit_exec-fail.xml"]);
    let case = suite_case(&outcome.junit[0]);
    assert_eq!(case.status(), Status::Failed);
    let failure = case.failure().unwrap();
    assert_eq!(failure.message.as_deref(), Some("exit status 1"));
    assert!(failure.text.text.contains(r#"nodes "no-such-node" not found"#), "{}", failure.text.text);

    // Its own JUnit: written by the command (copied in once kubectl has listed the namespaces).
    let staged = tmp.path().join("staged.xml");
    let report = Report {
        name: None,
        suites: vec![Suite {
            name: "provider-tests".into(),
            cases: ["lists namespaces", "lists nodes"]
                .map(|name| TestCase { name: name.into(), attempts: vec![Attempt::default()], ..TestCase::default() })
                .to_vec(),
            ..Suite::default()
        }],
    };
    junit::write_file(&report, &staged).unwrap();
    let script = format!(
        "{kubectl} get namespaces && {kubectl} --kubeconfig={{kubeconfig}} get nodes && cp {} {{artifacts}}/junit_provider.xml",
        staged.display()
    );
    let outcome = ExecSuite::new("exec-own", command(&["sh", "-c", &script]), None).run(&ctx).await.unwrap();
    assert!(outcome.passed, "{outcome:?}");
    assert_eq!(file_names(&outcome), ["junit_provider.xml"]);
    assert!(outcome.summary.starts_with("2 passed, 0 failed, 0 skipped in "), "{}", outcome.summary);
    assert!(!artifacts.join("junit_exec-own.xml").exists());

    // Hanging: a watch that never ends, and a child in the background; killed after 2s.
    let marker = format!("harness-suite-hang-{}", std::process::id());
    let script = format!("sleep 600 & {kubectl} get pods --watch -l marker={marker}; wait");
    let hang_ctx = SuiteContext { timeout: Duration::from_secs(2), ..ctx.clone() };
    let started = Instant::now();
    let outcome = ExecSuite::new("exec-hang", command(&["sh", "-c", &script]), None).run(&hang_ctx).await.unwrap();
    // The deadline plus the grace before SIGKILL: under it, SIGTERM at the deadline ended it.
    assert!(
        started.elapsed() < Duration::from_secs(2) + harness::suites::exec::EXEC_KILL_GRACE,
        "{:?}",
        started.elapsed()
    );
    assert!(!outcome.passed);
    assert!(outcome.summary.ends_with("; timed out after 2s"), "{}", outcome.summary);
    let case = suite_case(&outcome.junit[0]);
    assert_eq!(case.failure().unwrap().message.as_deref(), Some("timed out after 2s"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !process::find_by_marker(Path::new(&marker)).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(process::find_by_marker(Path::new(&marker)).is_empty(), "the watch survived its suite");

    // A program that is not there cannot run: an error for the run, not a JUnit failure.
    let err = ExecSuite::new("exec-missing", command(&["kubectl-nope", "version"]), None).run(&ctx).await.unwrap_err();
    assert!(err.to_string().contains("cannot start `kubectl-nope`: not found"), "{err}");

    let mut junit_files: Vec<String> = fs::read_dir(&artifacts)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("junit"))
        .collect();
    junit_files.sort();
    assert_eq!(
        junit_files,
        ["junit_exec-fail.xml", "junit_exec-hang.xml", "junit_exec-pass.xml", "junit_provider.xml"]
    );
    assert_torn_down(cluster);
}

/// Conformance specs that pass on the local cluster: API machinery only.
const PASSING: [&str; 3] = [
    "[sig-api-machinery] CustomResourceDefinition resources [Privileged:ClusterAdmin] Simple CustomResourceDefinition creating/deleting custom resource definition objects works [Conformance]",
    "[sig-node] ConfigMap should run through a ConfigMap lifecycle [Conformance]",
    "[sig-node] Secrets should patch a secret [Conformance]",
];

/// Fails in seconds on kwok nodes: the spec expects the pod to stay Pending (its subpath cannot be
/// expanded), and kwok reports every pod Running.
const FAILS_FAST: &str = "[sig-node] Variable Expansion should verify that a failing subpath expansion can be modified during the lifecycle of a container [Conformance] [Slow]";

/// Waits for its pod to succeed and then reads the container's output: no container runs here, so
/// it waits until ginkgo's suite timeout stops it.
const NEEDS_A_CONTAINER: &str = "[sig-node] Downward API should provide pod name, namespace and IP address as env vars [Conformance] [NodeConformance]";

/// A ginkgo focus matching exactly these specs.
fn focus(names: &[&str]) -> String {
    names.iter().map(|n| regex_escape(n)).collect::<Vec<_>>().join("|")
}

fn regex_escape(text: &str) -> String {
    text.chars().fold(String::new(), |mut out, c| {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
        out
    })
}

/// The specs of `report` that ran (not skipped), by name without ginkgo's `[It] ` prefix. (The
/// suite-level nodes, `[SynchronizedBeforeSuite]`, `[ReportAfterSuite] ...`, are cases too.)
fn ran(report: &Report) -> Vec<(String, Status)> {
    report
        .cases()
        .filter(|(_, c)| c.status() != Status::Skipped)
        .filter_map(|(_, c)| Some((c.name.strip_prefix("[It] ")?.to_owned(), c.status())))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn ginkgo_suites_run_upstream_e2e_test() {
    // e2e.test waits for every node to be schedulable: the CCM must have initialised them.
    let started = Instant::now();
    let ccm = tokio::task::spawn_blocking(toolchain::workspace::build_reference_ccm)
        .await
        .unwrap()
        .expect("building reference-ccm");
    eprintln!("reference-ccm built: {:?}", started.elapsed());
    let mut up = options("suites-ginkgo", release(), 2);
    up.cloud = Some(std::sync::Arc::new(LocalSetup::new(ccm)));
    let started = Instant::now();
    let cluster = bring_up(up).await;
    eprintln!("cluster up: {:?}", started.elapsed());
    let tmp = tempfile::tempdir().unwrap();
    let artifacts = tmp.path().join("artifacts");

    // Passing specs: e2e.test directly.
    let ctx = context(&cluster, &artifacts, Duration::from_secs(180));
    let started = Instant::now();
    let outcome =
        GinkgoSuite::new("conformance-api", Some(focus(&PASSING)), None, 1, Vec::new()).run(&ctx).await.unwrap();
    eprintln!("passing specs: {:?}, {}", started.elapsed(), outcome.summary);
    let output = artifacts.join("conformance-api-output.txt");
    assert!(outcome.passed, "{outcome:?}\n{}", fs::read_to_string(&output).unwrap_or_default());
    assert_eq!(outcome.junit, [artifacts.join("junit_01.xml")]);
    assert!(outcome.summary.contains(" passed, 0 failed, "), "{}", outcome.summary);
    let mut expected: Vec<(String, Status)> = PASSING.iter().map(|n| (n.to_string(), Status::Passed)).collect();
    let mut got = ran(&read(&outcome.junit[0]));
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got, expected);
    assert!(fs::read_to_string(&output).unwrap().contains("Ran 3 of "), "the output is captured");

    // A spec that fails here, in the same artifacts: its report does not overwrite junit_01.xml.
    let ctx = context(&cluster, &artifacts, Duration::from_secs(90));
    let started = Instant::now();
    let outcome =
        GinkgoSuite::new("conformance-fails", Some(focus(&[FAILS_FAST])), None, 1, Vec::new()).run(&ctx).await.unwrap();
    eprintln!("failing spec: {:?}, {}", started.elapsed(), outcome.summary);
    assert!(!outcome.passed);
    assert_eq!(outcome.junit, [artifacts.join("junit_conformance-fails_01.xml")]);
    assert!(outcome.summary.contains(" passed, 1 failed, "), "{}", outcome.summary);
    assert!(outcome.summary.ends_with("; exit status 1"), "{}", outcome.summary);
    let report = read(&outcome.junit[0]);
    assert_eq!(ran(&report), [(FAILS_FAST.to_owned(), Status::Failed)]);
    let (_, case) = report.cases().find(|(_, c)| c.status() == Status::Failed).unwrap();
    let text = &case.failure().unwrap().text.text;
    assert!(text.contains("Expected Pod to be in <v1.PodPhase>: Pending"), "{text}");
    assert_eq!(ran(&read(&artifacts.join("junit_01.xml"))).len(), 3, "the first suite's report is intact");

    // A spec that waits for a container, through the ginkgo CLI (2 processes), with a 20s limit:
    // ginkgo stops it at the limit and reports it timed out.
    let ctx = context(&cluster, &tmp.path().join("artifacts-timeout"), Duration::from_secs(20));
    let started = Instant::now();
    let outcome = GinkgoSuite::new("conformance-slow", Some(focus(&[NEEDS_A_CONTAINER])), None, 2, Vec::new())
        .run(&ctx)
        .await
        .unwrap();
    let took = started.elapsed();
    eprintln!("timed-out spec: {took:?}, {}", outcome.summary);
    let output = fs::read_to_string(ctx.artifacts.join("conformance-slow-output.txt")).unwrap_or_default();
    assert!(took >= Duration::from_secs(20), "{took:?}");
    assert!(!outcome.passed);
    assert_eq!(outcome.junit, [ctx.artifacts.join("junit_01.xml")], "{}\n{output}", outcome.summary);
    let report = read(&outcome.junit[0]);
    let specs = ran(&report);
    assert!(matches!(&specs[..], [(name, Status::Failed | Status::Error)] if name == NEEDS_A_CONTAINER), "{specs:?}");
    let (_, case) = report.cases().find(|(_, c)| c.name.ends_with(NEEDS_A_CONTAINER)).unwrap();
    assert!(case.failure().unwrap().text.text.contains("A suite timeout occurred"), "{case:?}");
    assert!(output.contains("Running in parallel across 2 processes"), "{output}");
    assert!(!output.contains('\u{1b}'), "colours are off");

    let started = Instant::now();
    assert_torn_down(cluster);
    eprintln!("cluster down: {:?}", started.elapsed());
}

//! `exec` suites with real processes (no cluster: the kubeconfig is only passed along).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::*;
use config::template::Placeholder;
use junit::{Status, read_file};

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    ctx: SuiteContext,
}

fn fixture(timeout: Duration) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let kubeconfig = root.join("kubeconfig");
    fs::write(&kubeconfig, "apiVersion: v1\nkind: Config\n").unwrap();
    let mut vars = Vars::new();
    vars.insert(Placeholder::Cluster, "test-cluster".into());
    let ctx = SuiteContext {
        kubeconfig,
        artifacts: root.join("artifacts"),
        provider: "local".into(),
        kubernetes_version: "v1.37.1".into(),
        vars,
        timeout,
    };
    Fixture { _dir: dir, root, ctx }
}

fn sh(script: &str) -> CommandSpec {
    CommandSpec { argv: vec!["sh".into(), "-c".into(), script.into()], ..CommandSpec::default() }
}

async fn run(suite: &str, command: CommandSpec, ctx: &SuiteContext) -> SuiteOutcome {
    ExecSuite::new(suite, command, None).run(ctx).await.unwrap()
}

/// The single case of a JUnit file the harness wrote.
fn only_case(path: &Path) -> junit::TestCase {
    let report = read_file(path, &ReadOptions::default()).unwrap();
    let cases: Vec<_> = report.cases().map(|(_, c)| c.clone()).collect();
    assert_eq!(cases.len(), 1, "{cases:?}");
    cases.into_iter().next().unwrap()
}

fn names(files: &[PathBuf]) -> Vec<String> {
    files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect()
}

/// Running and not a zombie.
fn alive(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| stat[stat.rfind(')')? + 2..].chars().next())
        .is_some_and(|state| state != 'Z')
}

#[tokio::test]
async fn a_passing_command_gets_one_passing_case_and_its_output_in_a_file() {
    let f = fixture(Duration::from_secs(30));
    let outcome = run("smoke", sh(r#"echo "hello from $0"; echo "K=$KUBECONFIG A=$ARTIFACTS" >&2"#), &f.ctx).await;
    assert!(outcome.passed, "{outcome:?}");
    assert_eq!(names(&outcome.junit), ["junit_smoke.xml"]);
    assert!(outcome.summary.starts_with("1 passed, 0 failed, 0 skipped in "), "{}", outcome.summary);

    let case = only_case(&outcome.junit[0]);
    assert_eq!((case.name.as_str(), case.status()), ("smoke", Status::Passed));
    let output = fs::read_to_string(f.ctx.artifacts.join("smoke-output.txt")).unwrap();
    assert!(output.contains("hello from sh"), "{output}");
    let env_line = format!("K={} A={}", f.ctx.kubeconfig.display(), f.ctx.artifacts.display());
    assert!(output.contains(&env_line), "{output}");
}

#[tokio::test]
async fn a_failing_command_fails_with_its_exit_status_and_the_last_50_lines() {
    let f = fixture(Duration::from_secs(30));
    let script = r#"i=1; while [ $i -le 80 ]; do echo "line $i"; i=$((i+1)); done; echo "it broke" >&2; exit 3"#;
    let outcome = run("broken", sh(script), &f.ctx).await;
    assert!(!outcome.passed);
    assert!(outcome.summary.starts_with("0 passed, 1 failed, 0 skipped in "), "{}", outcome.summary);
    assert!(outcome.summary.ends_with("; exit status 3"), "{}", outcome.summary);

    let case = only_case(&outcome.junit[0]);
    assert_eq!(case.status(), Status::Failed);
    let failure = case.failure().unwrap();
    assert_eq!(failure.message.as_deref(), Some("exit status 3"));
    let text = &failure.text.text;
    assert!(text.starts_with("[last 50 lines of the output; all of it is in broken-output.txt]\n"), "{text}");
    assert!(text.contains("line 32\n") && text.ends_with("line 80\nit broke\n"), "{text}");
    assert!(!text.contains("line 31\n"), "{text}");
}

#[tokio::test]
async fn junit_the_command_writes_is_its_result() {
    let f = fixture(Duration::from_secs(30));
    let staged = f.root.join("staged.xml");
    let failing = junit::Report {
        name: None,
        suites: vec![Suite {
            name: "mine".into(),
            cases: vec![
                TestCase { name: "ok".into(), attempts: vec![Attempt::default()], ..TestCase::default() },
                TestCase {
                    name: "bad".into(),
                    attempts: vec![Attempt { outcome: Outcome::Failed, ..Attempt::default() }],
                    ..TestCase::default()
                },
            ],
            ..Suite::default()
        }],
    };
    junit::write_file(&failing, &staged).unwrap();
    // An older file that the command leaves alone is not its result.
    fs::create_dir_all(&f.ctx.artifacts).unwrap();
    fs::write(f.ctx.artifacts.join("junit_earlier.xml"), "not even XML").unwrap();

    let copy = format!("mkdir -p \"$ARTIFACTS/sub\" && cp {} \"$ARTIFACTS/sub/junit_mine.xml\"", staged.display());
    let outcome = run("own", sh(&copy), &f.ctx).await;
    assert!(!outcome.passed, "a failed case fails the suite even when the command exits 0");
    assert_eq!(names(&outcome.junit), ["junit_mine.xml"]);
    assert_eq!(outcome.summary.split(" in ").next(), Some("1 passed, 1 failed, 0 skipped"));
    assert!(!f.ctx.artifacts.join("junit_own.xml").exists());

    // All passing, exit 0: passed. All passing but exit 1: failed, and a case says why.
    let passing = junit::Report {
        suites: vec![Suite { cases: failing.suites[0].cases[..1].to_vec(), ..failing.suites[0].clone() }],
        ..failing
    };
    junit::write_file(&passing, &staged).unwrap();
    let outcome = run("own", sh(&copy), &f.ctx).await;
    assert!(outcome.passed, "{outcome:?}");
    assert_eq!(names(&outcome.junit), ["junit_mine.xml"]);

    let outcome = run("own", sh(&format!("{copy}; echo 'cleanup failed'; exit 1")), &f.ctx).await;
    assert!(!outcome.passed);
    assert_eq!(names(&outcome.junit), ["junit_mine.xml", "junit_own.xml"]);
    let case = only_case(&outcome.junit[1]);
    assert_eq!(case.failure().unwrap().message.as_deref(), Some("exit status 1"));
    assert!(case.failure().unwrap().text.text.contains("cleanup failed"));
}

#[tokio::test]
async fn an_unreadable_junit_file_fails_the_suite_and_says_why() {
    let f = fixture(Duration::from_secs(30));
    let outcome =
        run("garbled", sh(r#"echo '<testsuite><testcase name="x">' > "$ARTIFACTS/junit_1.xml""#), &f.ctx).await;
    assert!(!outcome.passed);
    assert_eq!(names(&outcome.junit), ["junit_1.xml", "junit_garbled.xml"]);
    let message = only_case(&outcome.junit[1]).failure().unwrap().message.clone().unwrap();
    assert!(message.starts_with("unreadable JUnit: ") && message.contains("junit_1.xml"), "{message}");
}

#[tokio::test]
async fn a_command_past_its_timeout_is_killed_with_its_whole_group() {
    let f = fixture(Duration::from_secs(2));
    let pids = f.root.join("pids");
    let script = format!(
        "sleep 300 & echo $! > {pids}; sh -c 'echo $$ >> {pids}; sleep 300' & echo $$ >> {pids}; echo waiting; wait",
        pids = pids.display()
    );
    let started = Instant::now();
    let outcome = run("hang", sh(&script), &f.ctx).await;
    let took = started.elapsed();
    // SIGTERM at the deadline ended it: a SIGKILL would only have come EXEC_KILL_GRACE later.
    assert!(took >= Duration::from_secs(2) && took < Duration::from_secs(2) + EXEC_KILL_GRACE, "{took:?}");
    assert!(!outcome.passed);
    assert!(outcome.summary.ends_with("; timed out after 2s"), "{}", outcome.summary);
    let case = only_case(&outcome.junit[0]);
    let failure = case.failure().unwrap();
    assert_eq!(failure.message.as_deref(), Some("timed out after 2s"));
    assert_eq!(failure.text.text, "waiting\n");

    let pids: Vec<i32> = fs::read_to_string(&pids).unwrap().lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(pids.len(), 3, "{pids:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|pid| alive(*pid)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left: Vec<_> = pids.iter().filter(|pid| alive(**pid)).collect();
    assert!(left.is_empty(), "still running: {left:?}");
}

#[tokio::test]
async fn a_command_that_ignores_sigterm_gets_sigkill() {
    let f = fixture(Duration::from_millis(300));
    let invocation = Invocation {
        argv: vec!["sh".into(), "-c".into(), "trap '' TERM; sleep 300".into()],
        env: Vec::new(),
        cwd: None,
        output: None,
        timeout: Duration::from_millis(300),
        stop: vec![(Signal::SIGTERM, Duration::from_millis(300))],
    };
    let started = Instant::now();
    let finished = run_captured("stubborn", &f.ctx, &invocation).await.unwrap();
    // Without the SIGKILL `sleep 300` would run on; a minute is room for a loaded machine.
    assert!(started.elapsed() < Duration::from_secs(60), "{:?}", started.elapsed());
    assert_eq!(finished.end, End::TimedOut { limit: Duration::from_millis(300) });
    assert_eq!(finished.end.reason().unwrap(), "timed out after 300ms");
}

#[tokio::test]
async fn a_command_that_cannot_start_is_an_error_naming_it() {
    let f = fixture(Duration::from_secs(5));
    let missing = CommandSpec { argv: vec!["no-such-program-xyz".into(), "--help".into()], ..CommandSpec::default() };
    let err = ExecSuite::new("ghost", missing, None).run(&f.ctx).await.unwrap_err().to_string();
    assert_eq!(err, "suite ghost: cannot start `no-such-program-xyz`: not found (no such file, and not on PATH)");

    let script = f.root.join("script.sh");
    fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    let not_executable = CommandSpec { argv: vec![script.display().to_string()], ..CommandSpec::default() };
    let err = ExecSuite::new("ghost", not_executable, None).run(&f.ctx).await.unwrap_err().to_string();
    assert!(err.contains("not executable"), "{err}");

    let elsewhere = sh("true");
    let err =
        ExecSuite::new("ghost", elsewhere, Some(f.root.join("nowhere"))).run(&f.ctx).await.unwrap_err().to_string();
    assert!(err.contains(&format!("working directory {}/nowhere does not exist", f.root.display())), "{err}");

    let needs_node = sh("echo {node}");
    let err = ExecSuite::new("ghost", needs_node, None).run(&f.ctx).await.unwrap_err().to_string();
    assert_eq!(err, "suite ghost: command: no value for placeholder {node} here");
    assert!(!f.ctx.artifacts.join("junit_ghost.xml").exists());
}

#[tokio::test]
async fn placeholders_env_and_working_directory_are_applied() {
    let f = fixture(Duration::from_secs(30));
    let checkout = f.root.join("checkout");
    fs::create_dir_all(checkout.join("test")).unwrap();
    let script = checkout.join("test/run.sh");
    testing::write_executable(&script, "#!/bin/sh\necho \"args=$* pwd=$(pwd) suite=$SUITE_ENV kube=$KUBECONFIG\"\n");

    let command = CommandSpec {
        argv: vec!["./run.sh".into(), "{cluster}".into(), "{artifacts}/x".into(), "{{literal}}".into()],
        env: BTreeMap::from([("SUITE_ENV".into(), "kc={kubeconfig}".into()), ("KUBECONFIG".into(), "/own".into())]),
        dir: Some("test".into()),
    };
    let suite = ExecSuite::new("vars", command, Some(checkout.join("test")));
    assert_eq!(suite.working_dir(), Some(checkout.join("test")));
    let outcome = suite.run(&f.ctx).await.unwrap();
    assert!(outcome.passed, "{outcome:?}");
    let output = fs::read_to_string(f.ctx.artifacts.join("vars-output.txt")).unwrap();
    let expected = format!(
        "args=test-cluster {}/x {{literal}} pwd={} suite=kc={} kube=/own\n",
        f.ctx.artifacts.display(),
        checkout.join("test").display(),
        f.ctx.kubeconfig.display()
    );
    assert_eq!(output, expected);
}

#[test]
fn working_directory_combinations() {
    let spec = |dir: Option<&str>| CommandSpec { dir: dir.map(PathBuf::from), ..sh("true") };
    let wd = |given: Option<&str>, dir| ExecSuite::new("s", spec(dir), given.map(PathBuf::from)).working_dir();
    assert_eq!(wd(Some("/repo/e2e"), Some("e2e")), Some(PathBuf::from("/repo/e2e")), "the caller resolved it");
    assert_eq!(wd(Some("/repo"), None), Some(PathBuf::from("/repo")));
    assert_eq!(wd(None, Some("e2e")), Some(PathBuf::from("e2e")));
    assert_eq!(wd(None, None), None);
}

#[tokio::test]
async fn exits_are_worded_as_go_words_them() {
    // Started as any child of the harness is: a harness launched in the background (SIGINT
    // ignored, as a shell does for background jobs) must not make `kill -INT $$` a no-op.
    let status = |script: &str| {
        cli_support::signals::with_default_signals(std::process::Command::new("sh").args(["-c", script]))
            .status()
            .unwrap()
    };
    assert_eq!(go_exit_text(status("exit 2")), "exit status 2");
    assert_eq!(go_exit_text(status("kill -KILL $$")), "signal: killed");
    assert_eq!(go_exit_text(status("kill -TERM $$")), "signal: terminated");
    assert_eq!(go_exit_text(status("kill -INT $$")), "signal: interrupt");
}

#[test]
fn the_tail_is_bounded_and_readable() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.txt");
    let long = "S".repeat(5_000);
    fs::write(&file, format!("\x1b[1mbold\x1b[0m\r\n{long}\nlast")).unwrap();
    let tail = tail_text(&file, 50);
    assert_eq!(tail, format!("bold\n{}… (4000 more bytes)\nlast\n", "S".repeat(1_000)));

    fs::write(&file, "a\nb\nc\n").unwrap();
    assert_eq!(tail_text(&file, 2), "[last 2 lines of the output; all of it is in out.txt]\nb\nc\n");
    assert_eq!(tail_text(&file, 3), "a\nb\nc\n");

    // Only the end of a large file is read; its first, partial line is dropped.
    let big: String = (0..100_000).map(|i| format!("line {i}\n")).collect();
    fs::write(&file, &big).unwrap();
    let tail = tail_text(&file, 50);
    assert!(tail.starts_with("[last 50 lines") && tail.ends_with("line 99999\n"), "{tail}");
    assert_eq!(tail.lines().count(), 51);
    assert!(tail_text(&dir.path().join("absent"), 5).starts_with("(cannot read the output in "));
}

/// Past its limit a command gets each signal of its stop sequence in turn (a ginkgo suite: an
/// interrupt, then a second one, ginkgo's "report only" level), and exits on the second here.
#[tokio::test]
async fn past_the_limit_a_command_gets_each_stop_signal_in_turn() {
    let f = fixture(Duration::from_millis(300));
    let script = "n=0; trap 'n=$((n+1)); echo interrupt $n; [ $n -ge 2 ] && exit 0' INT; echo started; \
                  while :; do sleep 0.05; done";
    let invocation = Invocation {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        env: Vec::new(),
        cwd: None,
        output: None,
        timeout: Duration::from_millis(300),
        // The second wait is long: SIGKILL would end the command without its "interrupt 2".
        stop: vec![(Signal::SIGINT, Duration::from_secs(1)), (Signal::SIGINT, Duration::from_secs(120))],
    };
    let finished = run_captured("interrupted", &f.ctx, &invocation).await.unwrap();
    assert_eq!(finished.end, End::TimedOut { limit: Duration::from_millis(300) });
    assert_eq!(fs::read_to_string(&finished.output).unwrap(), "started\ninterrupt 1\ninterrupt 2\n");
    assert!(finished.elapsed < Duration::from_secs(120), "it exited on the second interrupt, not at SIGKILL");
}

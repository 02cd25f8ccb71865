//! The program runner of the deployers: quoting, timeouts, cancellation, logs, lookup.

use std::ffi::OsStr;
use std::time::Duration;

use super::*;
use crate::deploy::test_support::*;

fn invocation<'a>(bin: &'a OsStr, log: &Path, timeout: Duration) -> Invocation<'a> {
    Invocation {
        program: "prog",
        args: vec!["an arg".into(), "it's".into(), "--plain=1".into()],
        env: vec![("HARNESS_TEST_VALUE", "set".into())],
        dir: None,
        search_path: Some(bin),
        log: log.to_path_buf(),
        timeout,
    }
}

#[tokio::test]
async fn a_program_that_overruns_is_stopped_with_what_it_started() {
    let sandbox = Sandbox::new();
    let (tmp, bin) = (sandbox.path(), &sandbox.bin);
    let pids = tmp.join("pids");
    write_script(
        bin,
        "prog",
        &format!("echo \"value=$HARNESS_TEST_VALUE\"\nsleep 300 &\necho $$ $! > '{}'\nwait\n", pids.display()),
    );
    let path = sandbox.search_path();
    let log = tmp.join("logs/prog.log");
    let call = invocation(&path, &log, Duration::from_secs(1));
    let started = std::time::Instant::now();
    let failure = run(&call).await.unwrap_err();
    // The timeout (1 s) plus the grace before SIGKILL: under it, SIGTERM is what ended it.
    assert!(started.elapsed() < Duration::from_secs(1) + super::KILL_GRACE, "SIGTERM ends it before the grace");
    let Failure::TimedOut { tail } = &failure else { panic!("expected a timeout, got {failure:?}") };
    assert!(tail.contains("value=set"), "{tail}");
    let text = std::fs::read_to_string(&pids).unwrap();
    for pid in text.split_whitespace() {
        assert!(gone_soon(pid.parse().unwrap()), "process {pid} was stopped");
    }
    let message = call.describe(&failure, "do something");
    assert!(
        message
            .starts_with("`prog 'an arg' 'it'\\''s' --plain=1` did not finish within 1s and was stopped; do something"),
        "{message}"
    );
}

#[tokio::test]
async fn a_cancelled_run_kills_the_process_group() {
    let sandbox = Sandbox::new();
    let (tmp, bin) = (sandbox.path(), &sandbox.bin);
    let pids = tmp.join("pids");
    write_script(bin, "prog", &format!("sleep 300 &\necho $$ $! > '{}'\nwait\n", pids.display()));
    let path = sandbox.search_path();
    let log = tmp.join("prog.log");
    let call = invocation(&path, &log, Duration::from_secs(300));
    let cancelled = tokio::time::timeout(Duration::from_millis(1500), run(&call)).await;
    assert!(cancelled.is_err(), "still running when dropped");
    let text = std::fs::read_to_string(&pids).unwrap();
    for pid in text.split_whitespace() {
        assert!(gone_soon(pid.parse().unwrap()), "process {pid} was killed with the dropped run");
    }
}

#[tokio::test]
async fn a_failing_program_reports_its_status_and_last_lines_of_this_run_only() {
    let sandbox = Sandbox::new();
    let (tmp, bin) = (sandbox.path(), &sandbox.bin);
    write_script(bin, "prog", "for i in $(seq 1 40); do echo \"line $i\"; done\necho 'the reason' >&2\nexit 3\n");
    let path = sandbox.search_path();
    let log = tmp.join("prog.log");
    std::fs::write(&log, "an earlier run's output\n").unwrap();
    let call = invocation(&path, &log, Duration::from_secs(30));
    let failure = run(&call).await.unwrap_err();
    let Failure::Exited { status, tail } = &failure else { panic!("expected an exit, got {failure:?}") };
    assert_eq!(status.code(), Some(3));
    assert_eq!(tail.lines().count(), TAIL_LINES);
    assert!(tail.contains("the reason") && tail.contains("line 40") && !tail.contains("line 20"), "{tail}");
    let message = call.describe(&failure, "fix it");
    let first = message.lines().next().unwrap();
    assert!(
        first.ends_with(&format!("failed (exit status: 3); fix it; the last lines of {}:", log.display())),
        "{first}"
    );
    assert!(std::fs::read_to_string(&log).unwrap().starts_with("an earlier run's output\n"), "the log is appended to");

    let missing = Invocation { program: "no-such-program", ..invocation(&path, &log, Duration::from_secs(1)) };
    assert!(matches!(run(&missing).await, Err(Failure::Missing)));
    assert_eq!(find_program("prog", Some(&path)), Some(bin.join("prog")));
    std::fs::write(bin.join("not-executable"), "").unwrap();
    assert_eq!(find_program("not-executable", Some(&path)), None);
}

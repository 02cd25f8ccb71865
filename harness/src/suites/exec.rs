//! `exec` suites: any command, run as kubetest2's exec tester runs one.
//!
//! The command's argv and env are rendered with the run's placeholders (`{kubeconfig}` and
//! `{artifacts}` always filled in from the [`SuiteContext`]), and it runs with the harness's
//! environment plus `KUBECONFIG` and `ARTIFACTS` (what kubetest2 exports to its testers), then the
//! command's own `env`. It runs in a process group of its own; its stdout and stderr go straight
//! to `<artifacts>/<suite>-output.txt` (the file is the pipe: nothing is buffered in the harness).
//! Past the suite's timeout the group gets SIGTERM, then SIGKILL; when the command ends, whatever
//! it left running in its group is killed too.
//!
//! # Results
//! - JUnit files the command wrote into `{artifacts}` (files matching `junit*.xml`, at any depth,
//!   that are new or changed since it started; `junit_runner.xml` is the run's own and never
//!   counts) are its results: it passed when it exited 0 and no case in them failed.
//! - When it wrote none, the harness writes `junit_<suite>.xml` with one test case named after the
//!   suite, as kubetest2 records the exec tester's `Test` step: passing when the command exited 0,
//!   else failing with Go's wording of the exit (`exit status 1`, `signal: killed`) as the
//!   message and the last [`TAIL_LINES`] lines of the output as the text. (kubetest2 puts the
//!   whole output in `<system-out>`; here it is in the output file, which the text names.)
//! - A failure the command's own JUnit does not show (it timed out, exited non-zero with every case
//!   passing, or wrote a file that cannot be read) gets that same case too, so that every failed
//!   suite has a failing test on the grid. A timeout is `timed out after <timeout>`.
//!
//! A command that cannot start at all (not found, not executable, a placeholder with no value) is a
//! [`SuiteError::CannotRun`], not a JUnit failure: the run turns that into a failed step.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::LazyLock;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::{SuiteContext, SuiteError, SuiteOutcome, SuiteRunner};
use config::CommandSpec;
use config::template::{Placeholder, Vars};
use junit::{self, Attempt, Counts, Detail, Outcome, Output, ReadOptions, Report, Suite, TestCase};

/// How many lines of output a failure the harness reports carries.
pub const TAIL_LINES: usize = 50;
/// How long an `exec` command has between SIGTERM and SIGKILL once its time is up.
pub const EXEC_KILL_GRACE: Duration = Duration::from_secs(10);

/// Longer lines of the tail are cut (ginkgo's progress line of `S`s is one line per thousand specs).
const TAIL_LINE_BYTES: usize = 1_000;
/// How much of the end of the output file is read for the tail.
const TAIL_READ_BYTES: u64 = 256 * 1024;
/// How deep under `{artifacts}` JUnit files are looked for.
const JUNIT_SEARCH_DEPTH: usize = 4;

/// An `exec` suite of `providers.yaml`.
#[derive(Debug, Clone)]
pub struct ExecSuite {
    name: String,
    command: CommandSpec,
    dir: Option<PathBuf>,
}

impl ExecSuite {
    /// `dir` is the directory the command runs in, resolved by the caller (the provider's checkout
    /// joined with the command's `dir`); when it is `None`, the command's own `dir` (relative to
    /// the harness's working directory), else the harness's working directory.
    pub fn new(name: impl Into<String>, command: CommandSpec, dir: Option<PathBuf>) -> Self {
        ExecSuite { name: name.into(), command, dir }
    }

    pub fn command(&self) -> &CommandSpec {
        &self.command
    }

    /// Where the command runs.
    pub fn working_dir(&self) -> Option<PathBuf> {
        self.dir.clone().or_else(|| self.command.dir.clone())
    }
}

#[async_trait]
impl SuiteRunner for ExecSuite {
    fn name(&self) -> &str {
        &self.name
    }

    async fn run(&self, ctx: &SuiteContext) -> Result<SuiteOutcome, SuiteError> {
        let vars = suite_vars(ctx);
        let (argv, env) = self.command.render(&vars).map_err(|e| cannot_run(&self.name, format!("command: {e}")))?;
        let invocation = Invocation {
            argv,
            env: env.into_iter().collect(),
            cwd: self.working_dir(),
            output: None,
            timeout: ctx.timeout,
            stop: vec![(Signal::SIGTERM, EXEC_KILL_GRACE)],
        };
        let before = JunitSnapshot::take(&ctx.artifacts);
        let finished = run_captured(&self.name, ctx, &invocation).await?;
        conclude(&self.name, ctx, &before, &finished)
    }
}

pub(crate) fn cannot_run(suite: &str, message: impl Into<String>) -> SuiteError {
    SuiteError::CannotRun { suite: suite.to_owned(), message: message.into() }
}

pub(crate) fn write_error(suite: &str, file: &Path) -> impl FnOnce(std::io::Error) -> SuiteError {
    let (suite, file) = (suite.to_owned(), file.to_path_buf());
    move |source| SuiteError::Write { suite, file, source }
}

/// The context's placeholder values, with `{kubeconfig}` and `{artifacts}` (absolute) from it.
pub(crate) fn suite_vars(ctx: &SuiteContext) -> Vars {
    let mut vars = ctx.vars.clone();
    vars.insert(Placeholder::Kubeconfig, absolute(&ctx.kubeconfig).display().to_string());
    vars.insert(Placeholder::Artifacts, absolute(&ctx.artifacts).display().to_string());
    vars
}

pub(crate) fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// `<artifacts>/<suite>-output.txt`.
pub fn output_file(artifacts: &Path, suite: &str) -> PathBuf {
    artifacts.join(format!("{suite}-output.txt"))
}

/// A command to run for a suite.
#[derive(Debug, Clone)]
pub(crate) struct Invocation {
    pub argv: Vec<String>,
    /// Set after `KUBECONFIG` and `ARTIFACTS`, so the suite's own values win.
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    /// Where its stdout and stderr go; [`output_file`] when `None`.
    pub output: Option<PathBuf>,
    /// When the process group is asked to stop.
    pub timeout: Duration,
    /// How it is asked, in order: each signal to the process group, then that long for it to
    /// exit before the next step. SIGKILL follows the last.
    pub stop: Vec<(Signal, Duration)>,
}

/// How the command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    Exited(ExitStatus),
    /// Killed at the deadline; `limit` is the suite's timeout, as reported.
    TimedOut {
        limit: Duration,
    },
}

impl End {
    pub fn success(&self) -> bool {
        matches!(self, End::Exited(status) if status.success())
    }

    /// What went wrong, in the words kubetest2 (Go's `os/exec`) uses: `exit status 2`,
    /// `signal: killed`; or `timed out after 2s`.
    pub fn reason(&self) -> Option<String> {
        match self {
            End::Exited(status) if status.success() => None,
            End::Exited(status) => Some(go_exit_text(*status)),
            End::TimedOut { limit } => Some(format!("timed out after {}", humantime::format_duration(*limit))),
        }
    }
}

/// What a finished command left.
#[derive(Debug, Clone)]
pub(crate) struct Finished {
    pub end: End,
    pub started: SystemTime,
    pub elapsed: Duration,
    /// Its stdout and stderr.
    pub output: PathBuf,
}

/// Go's `ProcessState.String()`, which is what kubetest2 reports for a failed command.
/// What `e2e.test <flag>` prints (`--list-tests`, `--list-conformance-tests`): a list it prints
/// without a cluster; an error naming the flag when it cannot.
pub(crate) async fn e2e_test_list(e2e_test: &Path, flag: &str) -> Result<String, String> {
    let output = tokio::process::Command::new(e2e_test)
        .arg(flag)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| format!("cannot run {} {flag}: {e}", e2e_test.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} {flag}: {}: {}",
            e2e_test.display(),
            go_exit_text(output.status),
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

pub(crate) fn go_exit_text(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        return format!("exit status {code}");
    }
    let Some(signal) = status.signal() else { return status.to_string() };
    let name = match Signal::try_from(signal) {
        Ok(Signal::SIGHUP) => "hangup".to_owned(),
        Ok(Signal::SIGINT) => "interrupt".to_owned(),
        Ok(Signal::SIGQUIT) => "quit".to_owned(),
        Ok(Signal::SIGILL) => "illegal instruction".to_owned(),
        Ok(Signal::SIGTRAP) => "trace/breakpoint trap".to_owned(),
        Ok(Signal::SIGABRT) => "aborted".to_owned(),
        Ok(Signal::SIGBUS) => "bus error".to_owned(),
        Ok(Signal::SIGFPE) => "floating point exception".to_owned(),
        Ok(Signal::SIGKILL) => "killed".to_owned(),
        Ok(Signal::SIGUSR1) => "user defined signal 1".to_owned(),
        Ok(Signal::SIGSEGV) => "segmentation fault".to_owned(),
        Ok(Signal::SIGUSR2) => "user defined signal 2".to_owned(),
        Ok(Signal::SIGPIPE) => "broken pipe".to_owned(),
        Ok(Signal::SIGALRM) => "alarm clock".to_owned(),
        Ok(Signal::SIGTERM) => "terminated".to_owned(),
        _ => format!("signal {signal}"),
    };
    let core = if status.core_dumped() { " (core dumped)" } else { "" };
    format!("signal: {name}{core}")
}

/// Kills the process group when dropped while armed: the suite's future was dropped (the run
/// was interrupted) or panicked with the command still running.
pub(crate) struct GroupGuard(pub(crate) Option<Pid>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(group) = self.0.take() {
            let _ = killpg(group, Signal::SIGKILL);
        }
    }
}

/// Runs `invocation` for `suite` with `KUBECONFIG` and `ARTIFACTS` set from `ctx`, its output in
/// [`output_file`], and stops it at its deadline.
pub(crate) async fn run_captured(
    suite: &str,
    ctx: &SuiteContext,
    invocation: &Invocation,
) -> Result<Finished, SuiteError> {
    let Some((program, args)) = invocation.argv.split_first() else {
        return Err(cannot_run(suite, "the command is empty"));
    };
    if let Some(cwd) = &invocation.cwd
        && !cwd.is_dir()
    {
        return Err(cannot_run(suite, format!("working directory {} does not exist", cwd.display())));
    }
    // A relative path with a slash names a file in the command's working directory (made
    // absolute: whether a child resolves it before or after changing directory is unspecified).
    let program_path = match &invocation.cwd {
        Some(cwd) if program.contains('/') && Path::new(program).is_relative() => absolute(&cwd.join(program)),
        _ => PathBuf::from(program),
    };

    fs::create_dir_all(&ctx.artifacts).map_err(write_error(suite, &ctx.artifacts))?;
    let output = invocation.output.clone().unwrap_or_else(|| output_file(&ctx.artifacts, suite));
    let out = fs::File::create(&output).map_err(write_error(suite, &output))?;
    let err = out.try_clone().map_err(write_error(suite, &output))?;

    let mut command = tokio::process::Command::new(&program_path);
    command
        .args(args)
        .env("KUBECONFIG", absolute(&ctx.kubeconfig))
        .env("ARTIFACTS", absolute(&ctx.artifacts))
        .envs(invocation.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .kill_on_drop(true);
    cli_support::signals::with_default_signals_async(&mut command);
    if let Some(cwd) = &invocation.cwd {
        command.current_dir(cwd);
    }

    let started = SystemTime::now();
    let clock = Instant::now();
    let mut child = command.spawn().map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::NotFound => "not found (no such file, and not on PATH)".to_owned(),
            std::io::ErrorKind::PermissionDenied => "not executable (permission denied)".to_owned(),
            _ => e.to_string(),
        };
        cannot_run(suite, format!("cannot start `{program}`: {why}"))
    })?;
    let group = Pid::from_raw(child.id().expect("a child just spawned has a pid") as i32);
    let mut guard = GroupGuard(Some(group));
    let wait_error = |e: std::io::Error| cannot_run(suite, format!("waiting for `{program}`: {e}"));

    let end = match tokio::time::timeout(invocation.timeout, child.wait()).await {
        Ok(status) => End::Exited(status.map_err(wait_error)?),
        Err(_) => {
            tracing::warn!(
                "suite {suite}: `{program}` still running after {}; stopping it",
                humantime::format_duration(invocation.timeout)
            );
            let mut exited = false;
            for (signal, wait) in &invocation.stop {
                let _ = killpg(group, *signal);
                if tokio::time::timeout(*wait, child.wait()).await.is_ok() {
                    exited = true;
                    break;
                }
                tracing::warn!(
                    "suite {suite}: `{program}` still running {} after {signal}",
                    humantime::format_duration(*wait)
                );
            }
            if !exited {
                tracing::warn!("suite {suite}: killing `{program}`");
                let _ = killpg(group, Signal::SIGKILL);
                child.wait().await.map_err(wait_error)?;
            }
            End::TimedOut { limit: invocation.timeout }
        }
    };
    // Whatever the command left behind in its group goes with it.
    let _ = killpg(group, Signal::SIGKILL);
    guard.0 = None;
    Ok(Finished { end, started, elapsed: clock.elapsed(), output })
}

/// The JUnit files under a directory, with what tells a rewrite apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct JunitSnapshot(BTreeMap<PathBuf, (Option<SystemTime>, u64)>);

impl JunitSnapshot {
    pub fn take(dir: &Path) -> Self {
        let mut files = BTreeMap::new();
        collect_junit(dir, JUNIT_SEARCH_DEPTH, &mut files);
        JunitSnapshot(files)
    }

    pub fn contains(&self, path: &Path) -> bool {
        self.0.contains_key(path)
    }

    /// Files in `self` that are not in `before`, or changed since.
    pub fn written_since(&self, before: &JunitSnapshot) -> Vec<PathBuf> {
        self.0.iter().filter(|(path, seen)| before.0.get(*path) != Some(seen)).map(|(path, _)| path.clone()).collect()
    }
}

/// A JUnit file a suite may write: TestGrid reads `junit*.xml`; `junit_runner.xml` is the run's.
pub(crate) fn is_junit_name(name: &str) -> bool {
    name.starts_with("junit") && name.ends_with(".xml") && name != "junit_runner.xml"
}

fn collect_junit(dir: &Path, depth: usize, files: &mut BTreeMap<PathBuf, (Option<SystemTime>, u64)>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else { continue };
        let path = entry.path();
        if kind.is_dir() && depth > 0 {
            collect_junit(&path, depth - 1, files);
        } else if kind.is_file() && entry.file_name().to_str().is_some_and(is_junit_name) {
            let meta = entry.metadata().ok();
            let seen = (meta.as_ref().and_then(|m| m.modified().ok()), meta.map_or(0, |m| m.len()));
            files.insert(path, seen);
        }
    }
}

fn add_counts(total: &mut Counts, more: Counts) {
    total.total += more.total;
    total.passed += more.passed;
    total.failed += more.failed;
    total.errors += more.errors;
    total.skipped += more.skipped;
    total.flaky += more.flaky;
}

/// "12 passed, 1 failed, 3 skipped", with flaky and errors when there are some.
pub(crate) fn counts_text(counts: &Counts) -> String {
    let mut parts = vec![format!("{} passed", counts.passed)];
    if counts.flaky > 0 {
        parts.push(format!("{} flaky", counts.flaky));
    }
    parts.push(format!("{} failed", counts.failed));
    if counts.errors > 0 {
        parts.push(format!("{} errors", counts.errors));
    }
    parts.push(format!("{} skipped", counts.skipped));
    parts.join(", ")
}

/// The outcome of a finished command: its own JUnit when it wrote some, else (or when its JUnit
/// does not show the failure) `junit_<suite>.xml` written here. See the module docs.
pub(crate) fn conclude(
    suite: &str,
    ctx: &SuiteContext,
    before: &JunitSnapshot,
    finished: &Finished,
) -> Result<SuiteOutcome, SuiteError> {
    let after = JunitSnapshot::take(&ctx.artifacts);
    let mut junit_files = after.written_since(before);
    let mut counts = Counts::default();
    let mut unreadable = Vec::new();
    for file in &junit_files {
        match junit::read_file(file, &ReadOptions::default()) {
            Ok(report) => add_counts(&mut counts, report.counts()),
            Err(e) => unreadable.push(e.to_string()),
        }
    }
    let shows_failure = counts.failed + counts.errors > 0;
    let passed = finished.end.success() && !shows_failure && unreadable.is_empty();

    let reason = finished.end.reason().or_else(|| unreadable.first().map(|e| format!("unreadable JUnit: {e}")));
    let own_case =
        junit_files.is_empty() || matches!(finished.end, End::TimedOut { .. }) || (!passed && !shows_failure);
    if own_case {
        let file = own_junit_file(&ctx.artifacts, suite, &after);
        let failure = reason.clone().filter(|_| !passed);
        let report = suite_report(suite, finished, failure.as_deref());
        junit::write_file(&report, &file).map_err(write_error(suite, &file))?;
        add_counts(&mut counts, report.counts());
        junit_files.push(file);
    }

    let mut summary = format!("{} in {:.1}s", counts_text(&counts), finished.elapsed.as_secs_f64());
    if let Some(reason) = reason.filter(|_| !passed) {
        summary.push_str("; ");
        summary.push_str(&reason);
    }
    Ok(SuiteOutcome { passed, junit: junit_files, summary })
}

/// `junit_<suite>.xml`, or `junit_<suite>-harness.xml` when the command wrote a file of that name.
fn own_junit_file(artifacts: &Path, suite: &str, existing: &JunitSnapshot) -> PathBuf {
    let plain = artifacts.join(format!("junit_{suite}.xml"));
    if existing.contains(&plain) { artifacts.join(format!("junit_{suite}-harness.xml")) } else { plain }
}

/// One test case named after the suite: passed, or failed with `failure` as its message and the
/// tail of the output as its text.
pub(crate) fn suite_report(suite: &str, finished: &Finished, failure: Option<&str>) -> Report {
    let time = Some(finished.elapsed.as_secs_f64());
    let timestamp = Some(humantime::format_rfc3339_seconds(finished.started).to_string());
    let (outcome, detail) = match failure {
        None => (Outcome::Passed, None),
        Some(message) => {
            let text = tail_text(&finished.output, TAIL_LINES);
            (Outcome::Failed, Some(Detail { message: Some(message.to_owned()), kind: None, text: Output::new(text) }))
        }
    };
    let attempt = Attempt { outcome, time, timestamp: timestamp.clone(), detail, system_out: None, system_err: None };
    let case = TestCase { name: suite.to_owned(), classname: None, properties: Vec::new(), attempts: vec![attempt] };
    Report {
        name: None,
        suites: vec![Suite { name: suite.to_owned(), timestamp, time, cases: vec![case], ..Suite::default() }],
    }
}

static ANSI_ESCAPE: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]").expect("valid regex"));

/// The last `lines` lines of `file`, ANSI escapes removed and long lines cut, under a line that
/// names the file when there is more of it.
pub(crate) fn tail_text(file: &Path, lines: usize) -> String {
    let (text, whole) = match read_end(file, TAIL_READ_BYTES) {
        Ok(read) => read,
        Err(e) => return format!("(cannot read the output in {}: {e})", file.display()),
    };
    let text = ANSI_ESCAPE.replace_all(&text, "");
    let all: Vec<&str> = text.trim_end_matches('\n').split('\n').map(|l| l.trim_end_matches('\r')).collect();
    // Without the start of the file the first line read is likely cut: drop it.
    let all = if whole || all.len() <= 1 { &all[..] } else { &all[1..] };
    let shown = &all[all.len().saturating_sub(lines)..];
    let mut out = String::new();
    if !whole || shown.len() < all.len() {
        let name = file.file_name().map_or_else(|| file.display().to_string(), |n| n.to_string_lossy().into_owned());
        out.push_str(&format!("[last {} lines of the output; all of it is in {name}]\n", shown.len()));
    }
    for line in shown {
        out.push_str(&cut_line(line));
        out.push('\n');
    }
    out
}

fn cut_line(line: &str) -> String {
    if line.len() <= TAIL_LINE_BYTES {
        return line.to_owned();
    }
    let mut end = TAIL_LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} more bytes)", &line[..end], line.len() - end)
}

/// The last `max` bytes of `file` as text, and whether that is the whole file.
fn read_end(file: &Path, max: u64) -> std::io::Result<(String, bool)> {
    let mut f = fs::File::open(file)?;
    let len = f.metadata()?.len();
    let start = len.saturating_sub(max);
    f.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::with_capacity((len - start) as usize);
    f.take(max).read_to_end(&mut bytes)?;
    Ok((String::from_utf8_lossy(&bytes).into_owned(), start == 0))
}

#[cfg(test)]
mod tests;

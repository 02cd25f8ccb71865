//! Runs the programs of the deployers (`kind`, `kubetest2-<deployer>`), and holds the settings
//! every such deployer has (`Tooling`).
//!
//! Every program run by a deployer goes through `run`: found on `PATH` first (a missing one is
//! `Failure::Missing`, which the deployers report as
//! [`DeployError::MissingProgram`](super::DeployError::MissingProgram)), its stdout and stderr
//! appended to a log under `<artifacts>/deploy/`, a timeout per call ([`Timeouts`]) after which its
//! process group gets SIGTERM then SIGKILL, and the group killed when the call is dropped
//! (cancelled).

use std::ffi::{OsStr, OsString};
use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, SystemTime};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use config::template::Vars;

/// How long each step of a deployer may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// The program that brings the cluster up (`kind create cluster`, `kubetest2-<d> --up`).
    pub up: Duration,
    /// The program that tears it down.
    pub down: Duration,
    /// Collecting the cluster's logs.
    pub dump_logs: Duration,
    /// One API server request (`GET /version`, a list) in `up` and `is_up`.
    pub api: Duration,
}

/// The process settings of a deployer that runs programs, with the builder steps its own `with_*`
/// methods delegate to.
#[derive(Debug, Clone)]
pub(crate) struct Tooling {
    /// Holds what must not be published with the artifacts (kubeconfigs, run dirs).
    pub state_dir: PathBuf,
    /// `PATH` for finding and running the programs; the harness's own when `None`.
    pub search_path: Option<OsString>,
    pub timeouts: Timeouts,
    /// Placeholder values for the deployer's templated settings.
    pub vars: Vars,
}

impl Tooling {
    pub(crate) fn new(state_dir: PathBuf, timeouts: Timeouts, vars: Vars) -> Self {
        Tooling { state_dir, search_path: None, timeouts, vars }
    }

    /// Adds to (or overrides) the placeholder values.
    pub(crate) fn with_vars(mut self, vars: Vars) -> Self {
        self.vars.extend(vars);
        self
    }

    pub(crate) fn with_timeouts(self, timeouts: Timeouts) -> Self {
        Tooling { timeouts, ..self }
    }

    pub(crate) fn with_state_dir(self, dir: &Path) -> Self {
        Tooling { state_dir: dir.to_path_buf(), ..self }
    }

    pub(crate) fn with_search_path(self, path: impl Into<OsString>) -> Self {
        Tooling { search_path: Some(path.into()), ..self }
    }

    /// `program` on this `PATH`.
    pub(crate) fn find(&self, program: &str) -> Option<PathBuf> {
        find_program(program, self.search_path.as_deref())
    }

    /// A run of `program` in `dir` with this `PATH`, its output appended to `log`.
    pub(crate) fn invocation<'a>(
        &'a self,
        program: &'a str,
        args: Vec<String>,
        dir: &'a Path,
        log: PathBuf,
        timeout: Duration,
    ) -> Invocation<'a> {
        Invocation {
            program,
            args,
            env: Vec::new(),
            dir: Some(dir),
            search_path: self.search_path.as_deref(),
            log,
            timeout,
        }
    }
}

/// How long a program has to exit after SIGTERM before its process group gets SIGKILL.
pub(crate) const KILL_GRACE: Duration = Duration::from_secs(10);
/// The lines of its log quoted when a program fails.
pub(crate) const TAIL_LINES: usize = 15;

/// One run of a program.
pub(crate) struct Invocation<'a> {
    /// A name looked up on `PATH`.
    pub program: &'a str,
    pub args: Vec<String>,
    /// Set on top of the harness's environment.
    pub env: Vec<(&'static str, OsString)>,
    pub dir: Option<&'a Path>,
    /// `PATH` for the lookup and the program; the harness's when `None`.
    pub search_path: Option<&'a OsStr>,
    /// stdout and stderr are appended here, after a line naming the command.
    pub log: PathBuf,
    pub timeout: Duration,
}

#[derive(Debug)]
pub(crate) enum Failure {
    /// `program` is not on `PATH`.
    Missing,
    Io {
        what: String,
        source: std::io::Error,
    },
    /// Stopped after the timeout; the last lines of its output.
    TimedOut {
        tail: String,
    },
    Exited {
        status: ExitStatus,
        tail: String,
    },
}

impl Invocation<'_> {
    /// `program args...`, quoted for a shell where needed.
    pub(crate) fn command_line(&self) -> String {
        std::iter::once(self.program)
            .chain(self.args.iter().map(String::as_str))
            .map(quote)
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A line saying what went wrong and `hint`, what to do; then the last lines of the log.
    pub(crate) fn describe(&self, failure: &Failure, hint: &str) -> String {
        let command = self.command_line();
        let output = |tail: &str| match tail.trim() {
            "" => format!("it printed nothing (log {})", self.log.display()),
            _ => format!("the last lines of {}:\n{tail}", self.log.display()),
        };
        match failure {
            Failure::Missing => format!("{} not found on PATH; {hint}", self.program),
            Failure::Io { what, source } => format!("{what}: {source}; {hint}"),
            Failure::TimedOut { tail } => format!(
                "`{command}` did not finish within {} and was stopped; {hint}; {}",
                humantime::format_duration(self.timeout),
                output(tail)
            ),
            Failure::Exited { status, tail } => format!("`{command}` failed ({status}); {hint}; {}", output(tail)),
        }
    }
}

pub(crate) fn quote(arg: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:@,+%".contains(c);
    if !arg.is_empty() && arg.chars().all(plain) { arg.to_owned() } else { format!("'{}'", arg.replace('\'', r"'\''")) }
}

/// The first executable file `program` in the dirs of `search_path` (else `$PATH`).
pub(crate) fn find_program(program: &str, search_path: Option<&OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = search_path.map(OsStr::to_os_string).or_else(|| std::env::var_os("PATH"))?;
    std::env::split_paths(&path)
        .map(|dir| if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir })
        .map(|dir| dir.join(program))
        .find(|candidate| {
            fs::metadata(candidate).is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}

/// Kills the process group when dropped while armed: the run was cancelled or timed out.
struct GroupGuard(Option<Pid>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(group) = self.0 {
            let _ = killpg(group, Signal::SIGKILL);
        }
    }
}

/// Runs `invocation` to its end; `Ok` when it exits 0.
pub(crate) async fn run(invocation: &Invocation<'_>) -> Result<(), Failure> {
    let program = find_program(invocation.program, invocation.search_path).ok_or(Failure::Missing)?;
    let log_path = &invocation.log;
    let io = |what: &str| {
        let what = format!("{what} {}", log_path.display());
        move |source| Failure::Io { what, source }
    };
    if let Some(dir) = log_path.parent() {
        fs::create_dir_all(dir).map_err(io("cannot create the dir of"))?;
    }
    let mut log = OpenOptions::new().create(true).append(true).open(log_path).map_err(io("cannot open"))?;
    let now = humantime::format_rfc3339_seconds(SystemTime::now());
    writeln!(log, "# {now} $ {}", invocation.command_line()).map_err(io("cannot write"))?;
    // Errors quote this run's output only, not the line above (their first line names it).
    let start = log.metadata().map_err(io("cannot read"))?.len();

    let mut command = tokio::process::Command::new(&program);
    command
        .args(&invocation.args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().map_err(io("cannot open"))?)
        .stderr(log.try_clone().map_err(io("cannot open"))?)
        // Its own process group, so that what it starts (docker, scripts) is stopped with it.
        .process_group(0)
        .kill_on_drop(true);
    cli_support::signals::with_default_signals_async(&mut command);
    if let Some(dir) = invocation.dir {
        command.current_dir(dir);
    }
    if let Some(path) = invocation.search_path {
        command.env("PATH", path);
    }
    for (key, value) in &invocation.env {
        command.env(key, value);
    }
    let mut child = command
        .spawn()
        .map_err(|source| Failure::Io { what: format!("cannot start {}", program.display()), source })?;
    let mut guard = GroupGuard(child.id().and_then(|id| i32::try_from(id).ok()).map(Pid::from_raw));
    tracing::debug!("running `{}` (log {})", invocation.command_line(), log_path.display());

    let status = match tokio::time::timeout(invocation.timeout, child.wait()).await {
        Ok(status) => {
            status.map_err(|source| Failure::Io { what: format!("waiting for {}", invocation.program), source })?
        }
        Err(_) => {
            if let Some(group) = guard.0 {
                let _ = killpg(group, Signal::SIGTERM);
                if tokio::time::timeout(KILL_GRACE, child.wait()).await.is_err() {
                    let _ = killpg(group, Signal::SIGKILL);
                }
                // What the group's leader left behind goes too.
                let _ = killpg(group, Signal::SIGKILL);
            }
            let _ = child.wait().await;
            guard.0 = None;
            let tail = tail(log_path, start, TAIL_LINES);
            let timeout = humantime::format_duration(invocation.timeout);
            let _ = writeln!(log, "# the harness stopped it after {timeout}");
            return Err(Failure::TimedOut { tail });
        }
    };
    guard.0 = None;
    let tail = if status.success() { String::new() } else { tail(log_path, start, TAIL_LINES) };
    let _ = writeln!(log, "# {status}");
    if status.success() { Ok(()) } else { Err(Failure::Exited { status, tail }) }
}

/// The last `lines` lines written to `log` after byte `start`.
pub(crate) fn tail(log: &Path, start: u64, lines: usize) -> String {
    let mut text = String::new();
    if let Ok(mut file) = fs::File::open(log) {
        let _ = file.seek(SeekFrom::Start(start));
        let mut bytes = Vec::new();
        let _ = file.read_to_end(&mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    let last: Vec<&str> = text.lines().rev().take(lines).collect();
    last.into_iter().rev().collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests;

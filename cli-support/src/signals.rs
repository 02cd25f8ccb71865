//! Signals: how the harness stops when asked ([`until_signal`], [`until_interrupted`],
//! [`Interrupted`]), and the dispositions of the processes it starts.
//!
//! A non-interactive shell starts its background jobs (`nohup harness run &`, a CI runner's
//! steps) with SIGINT and SIGQUIT ignored, and an ignored signal stays ignored across `exec`: every
//! suite, deployer and cluster component the harness started would inherit that, and the ways
//! they are asked to stop (ginkgo's interrupt, a test's own `kill -INT`) would silently do nothing.
//! So every child starts with those two back at their defaults. SIGHUP is left as it was: `nohup`
//! ignores it on purpose, for the whole job.

use std::fmt;
use std::future::Future;

use nix::sys::signal::{SigHandler, Signal, signal};

/// A signal asking the harness to stop: what was running is dropped, which runs its teardown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT: Ctrl-C, or `kill -INT`.
    Interrupt,
    /// SIGTERM: Kubernetes (and Prow) stopping a pod, or `kill`.
    Terminate,
}

impl StopSignal {
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
        }
    }
}

impl fmt::Display for StopSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Waits for the first SIGINT or SIGTERM. Where the handlers cannot be installed (no signal
/// support in the runtime), it says so and never returns: the work it guards runs to its end.
pub async fn until_signal() -> StopSignal {
    use tokio::signal::unix::{SignalKind, signal};
    let (mut sigint, mut sigterm) = match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
        (Ok(sigint), Ok(sigterm)) => (sigint, sigterm),
        (Err(error), _) | (_, Err(error)) => {
            tracing::warn!("cannot handle SIGINT and SIGTERM ({error}): running on until the work ends");
            return std::future::pending().await;
        }
    };
    tokio::select! {
        _ = sigint.recv() => StopSignal::Interrupt,
        _ = sigterm.recv() => StopSignal::Terminate,
    }
}

/// Interrupted by SIGINT or SIGTERM: what was running was dropped, and its cleanup ran. A command
/// ending with it exits 130, as shells report SIGINT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted by {0}; everything started so far was stopped")]
pub struct Interrupted(pub StopSignal);

/// Runs `work` until it ends or a SIGINT/SIGTERM arrives; on a signal, `work` is dropped (which
/// runs its teardown) and [`Interrupted`] is returned.
pub async fn until_interrupted<T>(work: impl Future<Output = T>) -> Result<T, Interrupted> {
    tokio::select! {
        result = work => Ok(result),
        signal = until_signal() => Err(Interrupted(signal)),
    }
}

/// The signals a shell ignores for its background jobs, restored to their defaults in children.
pub const RESTORED: [Signal; 2] = [Signal::SIGINT, Signal::SIGQUIT];

/// Runs in the child between `fork` and `exec`: only async-signal-safe calls (`sigaction`).
fn restore_defaults() -> std::io::Result<()> {
    for sig in RESTORED {
        // SAFETY: setting a signal to SIG_DFL installs no handler; nothing else runs in the child.
        unsafe { signal(sig, SigHandler::SigDfl) }.map_err(std::io::Error::from)?;
    }
    Ok(())
}

/// `command`, set to start its process with [`RESTORED`] at their default dispositions.
pub fn with_default_signals(command: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook only calls sigaction, which is async-signal-safe.
    unsafe { command.pre_exec(restore_defaults) }
}

/// [`with_default_signals`] for tokio's `Command`.
pub fn with_default_signals_async(command: &mut tokio::process::Command) -> &mut tokio::process::Command {
    // SAFETY: as above.
    unsafe { command.pre_exec(restore_defaults) }
}

/// Whether `sig` is ignored by process `pid`, from the `SigIgn` mask of `/proc/<pid>/status`.
pub fn is_ignored(pid: i32, sig: Signal) -> std::io::Result<bool> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let mask = status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .ok_or_else(|| std::io::Error::other(format!("/proc/{pid}/status has no SigIgn line")))?;
    Ok(mask & (1 << (sig as i32 - 1)) != 0)
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    /// A child of a process that ignores SIGINT: `sh -c 'kill -INT $$'` exits 0 unless the
    /// disposition is restored. The ignoring parent is a shell, so this test's own process (and
    /// the other tests running beside it) keep their dispositions.
    fn interrupt_self(restore: bool) -> std::process::ExitStatus {
        use std::os::unix::process::ExitStatusExt;
        let me = std::env::current_exe().unwrap();
        let mut command = Command::new(me);
        command.args(["--exact", "signals::tests::child_interrupts_itself", "--nocapture", "--include-ignored"]);
        command.env("HARNESS_TEST_INTERRUPT_SELF", if restore { "restore" } else { "inherit" });
        // SAFETY: only sigaction in the child.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut command, || {
                signal(Signal::SIGINT, SigHandler::SigIgn).map(|_| ()).map_err(std::io::Error::from)
            });
        }
        let output = command.output().unwrap();
        let text = String::from_utf8_lossy(&output.stdout);
        let code = text.lines().find_map(|l| l.strip_prefix("child status: ")).unwrap_or_else(|| panic!("{text}"));
        ExitStatusExt::from_raw(code.trim().parse().unwrap())
    }

    #[test]
    #[ignore = "run by interrupt_self in a process that ignores SIGINT"]
    fn child_interrupts_itself() {
        use std::os::unix::process::ExitStatusExt;
        let mut sh = Command::new("sh");
        sh.args(["-c", "kill -INT $$"]);
        if std::env::var("HARNESS_TEST_INTERRUPT_SELF").as_deref() == Ok("restore") {
            with_default_signals(&mut sh);
        }
        println!("child status: {}", sh.status().unwrap().into_raw());
    }

    #[test]
    fn children_get_sigint_back_when_the_harness_was_started_ignoring_it() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(interrupt_self(false).code(), Some(0), "an inherited ignored SIGINT: `kill -INT $$` does nothing");
        assert_eq!(interrupt_self(true).signal(), Some(Signal::SIGINT as i32), "restored: the child dies of SIGINT");
    }

    #[test]
    fn the_ignored_mask_is_read_from_proc() {
        let mut sleeper = Command::new("sh");
        // SAFETY: only sigaction in the child.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut sleeper, || {
                signal(Signal::SIGQUIT, SigHandler::SigIgn).map(|_| ()).map_err(std::io::Error::from)
            });
        }
        let mut child = sleeper.args(["-c", "exec sleep 30"]).spawn().unwrap();
        let pid = child.id() as i32;
        assert!(is_ignored(pid, Signal::SIGQUIT).unwrap());
        assert!(!is_ignored(pid, Signal::SIGUSR1).unwrap());
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

//! Faults the run watches for while its suites run (issue 56): a process the cluster cannot lose
//! exiting (the CCM, kube-apiserver, etcd, the cloud's services: [`Deployer::vital_processes`]).
//! The Test step then ends at once, naming the process, how it ended and the end of its log,
//! instead of each remaining test waiting out its own timeout and failing as "timed out".
//!
//! [`Deployer::vital_processes`]: crate::deploy::Deployer::vital_processes

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use local_cluster::process::ProcessRecord;

/// How often the processes are looked at: a fault ends the step within about this.
const POLL: Duration = Duration::from_secs(1);

/// How many lines of the process's log the fault quotes.
const LOG_LINES: usize = 20;

/// A vital process that exited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub component: String,
    pub pid: i32,
    /// "exit status 2", "killed by SIGKILL" or "exited".
    pub ended: String,
    pub log: PathBuf,
    /// Its last lines, ANSI escapes removed.
    pub log_tail: String,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (pid {}) exited: {}", self.component, self.pid, self.ended)?;
        match self.log_tail.trim() {
            "" => write!(f, "; its log ({}) is empty", self.log.display()),
            tail => write!(f, "; the end of its log ({}):\n{tail}", self.log.display()),
        }
    }
}

/// The first of `processes` found to have exited; never returns while all run (or when there are
/// none to watch).
pub async fn first_exit(processes: &[ProcessRecord]) -> Fault {
    loop {
        if let Some(fault) = exited(processes) {
            return fault;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The first of `processes` that has exited, now.
fn exited(processes: &[ProcessRecord]) -> Option<Fault> {
    processes.iter().find_map(|process| {
        let ended = process.ended()?;
        Some(Fault {
            component: process.component.clone(),
            pid: process.pid,
            ended,
            log: process.log.clone(),
            log_tail: crate::suites::exec::tail_text(&process.log, LOG_LINES),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real child process recorded as the cluster records its components.
    fn started(component: &str, script: &str, log: &std::path::Path) -> ProcessRecord {
        let args = ["-c".to_owned(), script.to_owned()];
        local_cluster::process::spawn(component, std::path::Path::new("/bin/sh"), &args, log).unwrap()
    }

    #[tokio::test]
    async fn the_first_vital_process_to_exit_is_named_with_its_status_and_log() {
        let dir = tempfile::tempdir().unwrap();
        let steady = started("kube-apiserver", "exec sleep 60", &dir.path().join("kube-apiserver.log"));
        let crashing = started(
            "reference-ccm",
            r"printf '\033[31mE1206 lost the cloud API: connection refused\033[0m\n'; sleep 1; exit 3",
            &dir.path().join("reference-ccm.log"),
        );
        let watched = [steady.clone(), crashing.clone()];
        assert_eq!(exited(&watched), None, "both run at first");
        let fault =
            tokio::time::timeout(Duration::from_secs(10), first_exit(&watched)).await.expect("seen within 10 s");
        assert_eq!(
            (fault.component.as_str(), fault.pid, fault.ended.as_str()),
            ("reference-ccm", crashing.pid, "exit status 3")
        );
        let said = fault.to_string();
        assert!(
            said.starts_with(&format!(
                "reference-ccm (pid {}) exited: exit status 3; the end of its log (",
                crashing.pid
            )),
            "{said}"
        );
        assert!(said.ends_with("reference-ccm.log):\nE1206 lost the cloud API: connection refused"), "{said}");

        nix::sys::signal::kill(nix::unistd::Pid::from_raw(steady.pid), nix::sys::signal::Signal::SIGKILL).unwrap();
        let killed = tokio::time::timeout(Duration::from_secs(10), first_exit(&[steady])).await.expect("seen");
        assert_eq!(killed.ended, "killed by SIGKILL");
        assert!(killed.to_string().ends_with("is empty"), "{killed}");
    }

    #[tokio::test]
    async fn nothing_to_watch_is_never_a_fault() {
        assert!(tokio::time::timeout(Duration::from_millis(1500), first_exit(&[])).await.is_err());
    }
}

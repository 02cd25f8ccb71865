//! Control-plane processes the harness starts and must be able to stop from another invocation.
//!
//! Each component runs in a process group of its own, detached from the terminal's (a Ctrl-C at
//! `harness cluster up` reaches the harness, which then stops them; it does not kill them behind its
//! back half way through). A process is identified by its PID *and* its start time from
//! `/proc/<pid>/stat`, so a recycled PID is never signalled. Every component's command line or
//! environment ([`CLUSTER_DIR_VARIABLE`]) names the cluster's state directory, which [`sweep`] uses
//! to find strays a crash (or an unreadable `cluster.json`) left unrecorded; [`COMPONENT_VARIABLE`]
//! names the component whose process started a stray.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// A started component, as recorded in `cluster.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProcessRecord {
    pub component: String,
    pub pid: i32,
    /// Start time in clock ticks since boot (field 22 of `/proc/<pid>/stat`).
    pub start_ticks: u64,
    pub log: PathBuf,
    /// Consecutive processes of one batch stop at once ([`stop_together`]): a cloud's services.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
}

/// Starts `binary args...` with stdout and stderr appended to `log`, in a new process group.
pub fn spawn(component: &str, binary: &Path, args: &[String], log: &Path) -> std::io::Result<ProcessRecord> {
    spawn_with_env(component, binary, args, &Environment::default(), log)
}

/// Variables a process gets set, and inherited ones it must not see.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    pub set: Vec<(String, String)>,
    pub removed: Vec<String>,
}

/// [`spawn`] with `env` applied to the inherited environment.
pub fn spawn_with_env(
    component: &str,
    binary: &Path,
    args: &[String],
    env: &Environment,
    log: &Path,
) -> std::io::Result<ProcessRecord> {
    use std::os::unix::process::CommandExt;
    let out = fs::OpenOptions::new().create(true).append(true).open(log)?;
    let mut command = Command::new(binary);
    for name in &env.removed {
        command.env_remove(name);
    }
    command.envs(env.set.iter().map(|(k, v)| (k, v))).env(COMPONENT_VARIABLE, component);
    let child = cli_support::signals::with_default_signals(&mut command)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0)
        .spawn()?;
    let pid = child.id() as i32;
    // The Child handle is dropped on purpose: the process outlives this invocation of the harness.
    // Whoever stops it reaps it if it is still our child (see `terminate`).
    drop(child);
    let start_ticks = stat(pid).map(|s| s.start_ticks).unwrap_or_default();
    Ok(ProcessRecord { component: component.to_string(), pid, start_ticks, log: log.to_path_buf(), batch: None })
}

/// A process identified as [`ProcessRecord`]s are, by PID and start time: the harness process a
/// cluster goes with.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Owner {
    pub pid: i32,
    pub start_ticks: u64,
}

impl Owner {
    pub fn this_process() -> Self {
        let pid = std::process::id() as i32;
        Owner { pid, start_ticks: stat(pid).map(|s| s.start_ticks).unwrap_or_default() }
    }

    /// Whether this very process still runs (a zombie does not).
    pub fn is_running(&self) -> bool {
        stat(self.pid).is_some_and(|s| s.start_ticks == self.start_ticks && s.state != 'Z')
    }
}

struct Stat {
    state: char,
    start_ticks: u64,
}

fn stat(pid: i32) -> Option<Stat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces: parse after the last ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat { state: fields.first()?.chars().next()?, start_ticks: fields.get(19)?.parse().ok()? })
}

impl ProcessRecord {
    /// Whether this very process (not a recycled PID) is still running; zombies count as gone.
    pub fn is_running(&self) -> bool {
        reap(self.pid);
        stat(self.pid).is_some_and(|s| s.start_ticks == self.start_ticks && s.state != 'Z')
    }

    /// How the process ended, once it has: its exit status or the signal that killed it when it
    /// was this process's child (the harness that started it), else "exited"; `None` while it
    /// runs.
    pub fn ended(&self) -> Option<String> {
        use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
        match waitpid(Pid::from_raw(self.pid), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(_, code)) => return Some(format!("exit status {code}")),
            Ok(WaitStatus::Signaled(_, signal, _)) => return Some(format!("killed by {signal}")),
            _ => {}
        }
        (!self.is_running()).then(|| "exited".to_owned())
    }

    /// The last `lines` lines of the component's log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(lines).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }
}

/// Collects the exit status of `pid` if it is a child of this process, so it does not linger as a
/// zombie that looks alive.
fn reap(pid: i32) {
    use nix::sys::wait::{WaitPidFlag, waitpid};
    let _ = waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG));
}

/// Stops every process, last started first (clients of the API server before it, and it before
/// etcd, so none waits on a dependency already gone): SIGTERM, then SIGKILL after `grace`. The
/// processes of one cloud ([`stop_together`]) are stopped at once.
pub fn terminate(records: &[ProcessRecord], grace: Duration) {
    for batch in stop_together(records) {
        stop(&batch, grace);
    }
}

/// `records` last started first, in batches stopped at once: consecutive processes of one
/// [`ProcessRecord::batch`] (a cloud's services, such as OpenStack's dozen that each take a second
/// or two to stop) make one batch, every other process one of its own.
pub fn stop_together(records: &[ProcessRecord]) -> Vec<Vec<&ProcessRecord>> {
    let mut batches: Vec<Vec<&ProcessRecord>> = Vec::new();
    for record in records.iter().rev() {
        match batches.last_mut() {
            Some(batch) if record.batch.is_some() && batch[0].batch == record.batch => batch.push(record),
            _ => batches.push(vec![record]),
        }
    }
    batches
}

/// Stops the processes of one batch of [`stop_together`] at once: SIGTERM to each one's group, then
/// SIGKILL to those still running after `grace`.
pub fn stop(batch: &[&ProcessRecord], grace: Duration) {
    let running: Vec<&ProcessRecord> = batch.iter().copied().filter(|r| r.is_running()).collect();
    for record in &running {
        signal_group(record.pid, Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    for record in running {
        if wait_until_gone(record, deadline.saturating_duration_since(Instant::now())) {
            continue;
        }
        tracing::warn!("{} (pid {}) ignored SIGTERM for {grace:?}; killing it", record.component, record.pid);
        signal_group(record.pid, Signal::SIGKILL);
        wait_until_gone(record, Duration::from_secs(5));
    }
}

fn wait_until_gone(record: &ProcessRecord, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while record.is_running() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

fn signal_group(pid: i32, signal: Signal) {
    // The component leads its own group; fall back to the single process if the group is gone.
    if killpg(Pid::from_raw(pid), signal).is_err() {
        let _ = kill(Pid::from_raw(pid), signal);
    }
}

/// The variable every process of a cluster gets, set to the cluster's state directory: found
/// even in a process that rewrites its command line (gunicorn's `gunicorn: master [...]`) or
/// never names the directory in it (epmd).
pub const CLUSTER_DIR_VARIABLE: &str = "HARNESS_CLUSTER_DIR";

/// Processes (other than this one) whose command line mentions `marker`, e.g. a cluster's
/// state directory (as a whole: see [`mentions`]), or whose [`CLUSTER_DIR_VARIABLE`] is it.
pub fn find_by_marker(marker: &Path) -> Vec<i32> {
    let marker = marker.to_string_lossy().into_owned();
    let variable = format!("{CLUSTER_DIR_VARIABLE}={marker}").into_bytes();
    let me = std::process::id() as i32;
    let Ok(entries) = fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            let in_cmdline = fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| mentions(&String::from_utf8_lossy(&cmdline).replace('\0', " "), &marker));
            in_cmdline
                || fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|environ| environ.split(|b| *b == 0).any(|pair| pair == variable.as_slice()))
        })
        .filter(|pid| stat(*pid).is_some_and(|s| s.state != 'Z'))
        .collect()
}

/// Whether `text` mentions the path `marker` as a whole, not as the start or the end of a longer
/// name: cluster `ci`'s state dir `/s/clusters/ci` is in `--data-dir=/s/clusters/ci/etcd`, never
/// in cluster `ci-2`'s `/s/clusters/ci-2/etcd` (whose processes `down ci` must leave alone).
pub fn mentions(text: &str, marker: &str) -> bool {
    let continues_a_name = |c: char| c.is_alphanumeric() || "-_.".contains(c);
    !marker.is_empty()
        && text.match_indices(marker).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + marker.len()..].chars().next();
            !before.is_some_and(|c| continues_a_name(c) || c == '/') && !after.is_some_and(continues_a_name)
        })
}

/// The variable every process the harness starts gets, set to its component (`etcd`,
/// `<node>-containerd`): inherited by what it starts in turn (a containerd's runc shims), so a
/// process found by [`sweep`] says whose it is.
pub const COMPONENT_VARIABLE: &str = "HARNESS_COMPONENT";

/// The last resort, once a cluster's processes were stopped in order: kills every process
/// [`find_by_marker`] still finds for `marker`. Each one was left behind unexpectedly (a crash, a
/// state file that lost track of it), so each is a warning naming it; returns how many there were.
pub fn sweep(marker: &Path) -> usize {
    kill_marked(marker, |pid| tracing::warn!("stopping stray process {} of {}", describe(pid), marker.display()))
}

/// Kills the processes of `marker` that are meant to outlive the ones stopped before them (`what`,
/// e.g. a node's runc shims, which outlive containerd by design); returns how many there were.
pub fn kill_expected(marker: &Path, what: &str) -> usize {
    kill_marked(marker, |pid| tracing::debug!("stopping {what}: {}", describe(pid)))
}

fn kill_marked(marker: &Path, log: impl Fn(i32)) -> usize {
    let found = find_by_marker(marker);
    for pid in &found {
        log(*pid);
        let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        reap(*pid);
    }
    found.len()
}

/// Process `pid` as a log line names it: its program, and the component that started it (from
/// [`COMPONENT_VARIABLE`]) when it has one.
pub fn describe(pid: i32) -> String {
    let program = fs::read_to_string(format!("/proc/{pid}/comm")).map(|c| c.trim().to_owned());
    let program = program.unwrap_or_else(|_| "a process".into());
    let prefix = format!("{COMPONENT_VARIABLE}=").into_bytes();
    let component = fs::read(format!("/proc/{pid}/environ")).ok().and_then(|environ| {
        let value = environ.split(|b| *b == 0).find_map(|pair| pair.strip_prefix(prefix.as_slice()))?;
        Some(String::from_utf8_lossy(value).into_owned())
    });
    match component {
        Some(component) => format!("{program} (pid {pid}, started by component {component})"),
        None => format!("{program} (pid {pid})"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_clouds_processes_stop_together_the_others_one_by_one_last_started_first() {
        let record = |component: &str| super::ProcessRecord {
            component: component.into(),
            pid: 0,
            start_ticks: 0,
            log: "/dev/null".into(),
            batch: component.starts_with("openstack-").then(|| "openstack".to_owned()),
        };
        let records: Vec<_> = ["etcd", "kube-apiserver", "openstack-mariadb", "openstack-keystone", "kubelet-0", "ccm"]
            .map(record)
            .to_vec();
        let batches: Vec<Vec<&str>> = super::stop_together(&records)
            .iter()
            .map(|batch| batch.iter().map(|r| r.component.as_str()).collect())
            .collect();
        assert_eq!(
            batches,
            [
                vec!["ccm"],
                vec!["kubelet-0"],
                vec!["openstack-keystone", "openstack-mariadb"],
                vec!["kube-apiserver"],
                vec!["etcd"]
            ]
        );
    }

    use super::*;

    #[test]
    fn a_batch_stopped_together_leaves_none_of_its_processes_even_one_that_ignores_sigterm() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("cloud.log");
        let stubborn = ["-c".to_owned(), "trap '' TERM; sleep 300 & wait".to_owned()];
        let mut records = vec![
            spawn("openstack-mariadb", Path::new("/bin/sleep"), &["300".into()], &log).unwrap(),
            spawn("openstack-keystone", Path::new("/bin/sh"), &stubborn, &log).unwrap(),
        ];
        for record in &mut records {
            record.batch = Some("openstack".into());
        }
        assert_eq!(stop_together(&records).len(), 1);
        std::thread::sleep(Duration::from_millis(200));
        terminate(&records, Duration::from_millis(500));
        assert!(records.iter().all(|r| !r.is_running()), "{records:?}");
    }

    #[test]
    fn terminate_stops_a_running_process_and_is_running_tells_the_truth() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("sleep.log");
        let record = spawn("sleep", Path::new("/bin/sleep"), &["300".into()], &log).unwrap();
        assert!(record.is_running());
        terminate(std::slice::from_ref(&record), Duration::from_secs(5));
        assert!(!record.is_running());
    }

    #[test]
    fn a_recycled_pid_is_not_mistaken_for_the_recorded_process() {
        let me = ProcessRecord {
            component: "me".into(),
            pid: std::process::id() as i32,
            start_ticks: stat(std::process::id() as i32).unwrap().start_ticks + 1,
            log: PathBuf::new(),
            batch: None,
        };
        assert!(!me.is_running());
    }

    #[test]
    fn sweep_finds_processes_by_the_marker_in_their_environment() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("cluster-dir");
        // `sleep` never names the marker in its command line, as gunicorn's rewritten one does not.
        let env =
            Environment { set: vec![(CLUSTER_DIR_VARIABLE.into(), marker.display().to_string())], removed: vec![] };
        let record =
            spawn_with_env("sleep", Path::new("/bin/sleep"), &["30".into()], &env, &dir.path().join("log")).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while find_by_marker(&marker).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(find_by_marker(&marker), vec![record.pid]);
        assert_eq!(describe(record.pid), format!("sleep (pid {}, started by component sleep)", record.pid));
        // Only the variable's whole value: another cluster's `cluster-dir-2` is not this one's.
        assert_eq!(find_by_marker(&dir.path().join("cluster")), Vec::<i32>::new());
        assert_eq!(sweep(&marker), 1);
        std::thread::sleep(Duration::from_millis(100));
        assert!(!record.is_running());
    }

    #[test]
    fn sweep_finds_processes_by_the_marker_in_their_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("unique-marker");
        // One process that never forks, with the marker in its command line (a shell would fork).
        fs::write(&marker, "").unwrap();
        let args = ["-f".to_string(), marker.display().to_string()];
        let record = spawn("tail", Path::new("/usr/bin/tail"), &args, &dir.path().join("log")).unwrap();
        // Until it has exec'd, the child still shows the test binary's command line.
        let deadline = Instant::now() + Duration::from_secs(5);
        while find_by_marker(&marker).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(find_by_marker(&marker), vec![record.pid]);
        // A marker that only starts the process's path (another cluster's dir named `<this>-2`)
        // finds nothing: sweeping it must not kill the other cluster's processes.
        let prefix = dir.path().join("unique");
        assert_eq!(find_by_marker(&prefix), Vec::<i32>::new());
        assert_eq!(sweep(&prefix), 0);
        assert!(record.is_running());
        assert_eq!(sweep(&marker), 1);
        std::thread::sleep(Duration::from_millis(100));
        assert!(find_by_marker(&marker).is_empty());
    }

    #[test]
    fn a_marker_is_mentioned_only_as_a_whole_path() {
        let dir = "/s/clusters/ci";
        for text in
            ["tail -f /s/clusters/ci", "etcd --data-dir=/s/clusters/ci/etcd", "x,/s/clusters/ci:y", "a /s/clusters/ci/"]
        {
            assert!(mentions(text, dir), "{text}");
        }
        for text in [
            "etcd --data-dir=/s/clusters/ci-2/etcd",
            "tail -f /s/clusters/ci.old",
            "/t/s/clusters/ci/etcd",
            "/s/clusters/cix",
        ] {
            assert!(!mentions(text, dir), "{text}");
        }
        // The second mention counts when the first is another cluster's.
        assert!(mentions("--a=/s/clusters/ci-2 --b=/s/clusters/ci/x", dir));
        assert!(mentions("--http-port=18089", "--http-port=18089"));
        assert!(!mentions("--http-port=180890", "--http-port=18089"));
        assert!(!mentions("anything", ""));
    }
}

//! Faults the run watches for while its suites run (issue 56), on a deployer that supervises
//! processes of its own ([`Watch`]): a process the cluster cannot lose exiting (the CCM,
//! kube-apiserver, etcd, the cloud's services, a node's kubelet), a node that should be up going
//! NotReady (cut off from the network), the cloud's API failing every call; and on any deployer,
//! the disk of the build directory full. The Test step then ends at once, naming the fault,
//! how it showed and the end of the log that explains it, instead of each remaining test waiting
//! out its own timeout and failing as "timed out".

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use local_cluster::clouds::ApiCalls;
use local_cluster::process::ProcessRecord;

use crate::deploy::Watch;

/// How often the cluster is looked at: a fault ends the step within about this (a node's, once it
/// has been NotReady for [`NODE_LOST_AFTER`]).
const POLL: Duration = Duration::from_secs(1);

/// How many lines of a log a fault quotes.
const LOG_LINES: usize = 20;

/// What ended the Test step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    Exited(Exited),
    NotReady(NotReady),
    CloudDown(CloudDown),
    /// The disk of the build directory, full.
    DiskFull {
        dir: PathBuf,
        available: u64,
        size: u64,
    },
}

/// The cloud's API failing every call for a while.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudDown {
    /// How long every call failed, none answered.
    pub for_: Duration,
    /// The calls that failed then, by `"<operation> <status>"`.
    pub failed: std::collections::BTreeMap<String, u64>,
}

/// A process on the watch list that exited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exited {
    pub component: String,
    pub pid: i32,
    /// "exit status 2", "killed by SIGKILL" or "exited".
    pub ended: String,
    pub log: PathBuf,
    /// Its last lines, ANSI escapes removed.
    pub log_tail: String,
}

/// A node that should be up, not Ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotReady {
    pub node: String,
    /// Its Ready condition: `Unknown (NodeStatusUnknown: Kubelet stopped posting node status.)
    /// since 2026-12-06T17:01:02Z`, or that it has none.
    pub condition: String,
    /// Its kubelet, which still runs, and the end of its log.
    pub kubelet: Option<(ProcessRecord, String)>,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Exited(exited) => {
                write!(f, "{} (pid {}) exited: {}", exited.component, exited.pid, exited.ended)?;
                log_tail(f, &exited.log, &exited.log_tail)
            }
            Fault::DiskFull { dir, available, size } => write!(
                f,
                "the disk of the artifacts directory {} is full: {} KiB of {} KiB available",
                dir.display(),
                available / 1024,
                size / 1024
            ),
            Fault::CloudDown(down) => {
                let failed: Vec<String> = down.failed.iter().map(|(call, n)| format!("{call} × {n}")).collect();
                write!(
                    f,
                    "the cloud's API failed every call for the last {} s, answering none: {}",
                    down.for_.as_secs(),
                    failed.join(", ")
                )
            }
            Fault::NotReady(not_ready) => {
                write!(f, "node {} went NotReady: Ready is {}", not_ready.node, not_ready.condition)?;
                let Some((kubelet, tail)) = &not_ready.kubelet else { return Ok(()) };
                write!(f, "; its kubelet (pid {}) still runs", kubelet.pid)?;
                log_tail(f, &kubelet.log, tail)
            }
        }
    }
}

fn log_tail(f: &mut fmt::Formatter<'_>, log: &std::path::Path, tail: &str) -> fmt::Result {
    match tail.trim() {
        "" => write!(f, "; its log ({}) is empty", log.display()),
        tail => write!(f, "; the end of its log ({}):\n{tail}", log.display()),
    }
}

/// The first fault of the run: the disk of its build directory `artifacts` full, or one of the
/// cluster `watch` watches, when the deployer gives one; never returns while there is none. Nodes
/// are looked at only with a `client` (a look the API server does not answer is no fault of a
/// node's: the API server's own exit is the fault then).
pub async fn first_fault(artifacts: &Path, watch: Option<&dyn Watch>, client: Option<kube::Client>) -> Fault {
    let mut nodes = NodeLooks::default();
    let mut cloud = CloudLooks::default();
    loop {
        if let Some((available, size)) = super::space::full(artifacts) {
            return Fault::DiskFull { dir: artifacts.to_path_buf(), available, size };
        }
        if let Some(watch) = watch
            && let Some(fault) = look(watch, client.as_ref(), &mut nodes, &mut cloud).await
        {
            return fault;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// One look at the cluster `watch` watches.
async fn look(
    watch: &dyn Watch,
    client: Option<&kube::Client>,
    nodes: &mut NodeLooks,
    cloud: &mut CloudLooks,
) -> Option<Fault> {
    let processes = watch.processes();
    if let Some(exited) = exited(&processes) {
        return Some(Fault::Exited(exited));
    }
    if let Some(calls) = watch.cloud_api_calls().await
        && let Some(down) = cloud.look(Instant::now(), calls)
    {
        return Some(Fault::CloudDown(down));
    }
    let client = client?;
    nodes.look(client, &watch.nodes_up(), &processes).await.map(Fault::NotReady)
}

/// How long a node that should be up may stay NotReady before it counts as lost: Kubernetes' own
/// default for giving up on a node (the `tolerationSeconds: 300` every pod gets for the not-ready
/// and unreachable taints). Shorter was not safe: on a loaded machine a kubelet that runs can miss
/// its lease for tens of seconds and be back.
const NODE_LOST_AFTER: Duration = Duration::from_secs(300);

/// What the looks at the nodes saw so far. A node is at fault when it turns NotReady after it was
/// seen Ready with the same kubelet, and stays so for [`NODE_LOST_AFTER`]: a machine a test
/// started again has a new kubelet, NotReady until that kubelet reports, which is no fault.
#[derive(Default)]
struct NodeLooks {
    /// The nodes seen Ready, and the PID of their kubelet then.
    ready_with: std::collections::HashMap<String, i32>,
    /// The nodes seen NotReady since they were last Ready, and since when.
    not_ready_since: std::collections::HashMap<String, Instant>,
}

impl NodeLooks {
    async fn look(
        &mut self,
        client: &kube::Client,
        nodes_up: &[String],
        processes: &[ProcessRecord],
    ) -> Option<NotReady> {
        if nodes_up.is_empty() {
            return None;
        }
        let api = Api::<Node>::all(client.clone());
        let listed = tokio::time::timeout(POLL * 5, api.list(&Default::default())).await.ok()?.ok()?;
        let now = Instant::now();
        self.not_ready_since.retain(|node, _| nodes_up.contains(node));
        for node in &listed.items {
            let Some(name) = node.metadata.name.as_deref().filter(|name| nodes_up.iter().any(|n| n == name)) else {
                continue;
            };
            let Some(kubelet) = processes.iter().find(|p| p.component == format!("{name}-kubelet")) else { continue };
            match ready_condition(node) {
                None => {
                    self.ready_with.insert(name.to_owned(), kubelet.pid);
                    self.not_ready_since.remove(name);
                }
                Some(condition) if self.ready_with.get(name) == Some(&kubelet.pid) => {
                    let since = *self.not_ready_since.entry(name.to_owned()).or_insert(now);
                    if now.duration_since(since) >= NODE_LOST_AFTER {
                        let tail = crate::suites::exec::tail_text(&kubelet.log, LOG_LINES);
                        let condition = format!("{condition}, for {} s", now.duration_since(since).as_secs());
                        return Some(NotReady {
                            node: name.to_owned(),
                            condition,
                            kubelet: Some((kubelet.clone(), tail)),
                        });
                    }
                }
                Some(_) => {}
            }
        }
        None
    }
}

/// How long the cloud's API must fail every call, answering none, to be down: long enough that a
/// test's own injected faults (a few calls failed to see a retry) are not taken for it.
const CLOUD_DOWN_AFTER: Duration = Duration::from_secs(30);
/// And at least this many calls must have failed in that time: a CCM idle for 30 s says nothing.
const CLOUD_DOWN_CALLS: u64 = 3;

/// The counts of the cloud's API calls seen at each look, oldest first, as far back as needed.
#[derive(Default)]
struct CloudLooks {
    seen: std::collections::VecDeque<(Instant, ApiCalls)>,
}

impl CloudLooks {
    /// Down when, since the newest look at least [`CLOUD_DOWN_AFTER`] ago, no call was answered
    /// and at least [`CLOUD_DOWN_CALLS`] failed.
    fn look(&mut self, now: Instant, calls: ApiCalls) -> Option<CloudDown> {
        self.seen.push_back((now, calls));
        // Keep one look older than the window, the baseline.
        while self.seen.get(1).is_some_and(|(at, _)| now.duration_since(*at) >= CLOUD_DOWN_AFTER) {
            self.seen.pop_front();
        }
        let (since, base) = self.seen.front()?;
        let (_, latest) = self.seen.back()?;
        if now.duration_since(*since) < CLOUD_DOWN_AFTER || latest.answered > base.answered {
            return None;
        }
        let failed: std::collections::BTreeMap<String, u64> = latest
            .failed
            .iter()
            .map(|(call, n)| (call.clone(), n.saturating_sub(base.failed.get(call).copied().unwrap_or(0))))
            .filter(|(_, n)| *n > 0)
            .collect();
        (failed.values().sum::<u64>() >= CLOUD_DOWN_CALLS)
            .then(|| CloudDown { for_: now.duration_since(*since), failed })
    }
}

/// The first of `processes` that has exited, now.
fn exited(processes: &[ProcessRecord]) -> Option<Exited> {
    processes.iter().find_map(|process| {
        let ended = process.ended()?;
        Some(Exited {
            component: process.component.clone(),
            pid: process.pid,
            ended,
            log: process.log.clone(),
            log_tail: crate::suites::exec::tail_text(&process.log, LOG_LINES),
        })
    })
}

/// How `node`'s Ready condition reads when it is not True: `None` when it is.
fn ready_condition(node: &Node) -> Option<String> {
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_deref()).unwrap_or_default();
    let Some(ready) = conditions.iter().find(|c| c.type_ == "Ready") else {
        return Some("missing (the node reports no Ready condition)".into());
    };
    if ready.status == "True" {
        return None;
    }
    let why = [ready.reason.as_deref(), ready.message.as_deref()].into_iter().flatten().collect::<Vec<_>>().join(": ");
    let since = ready.last_transition_time.as_ref().map(|t| format!(" since {}", t.0)).unwrap_or_default();
    Some(match why.is_empty() {
        true => format!("{}{since}", ready.status),
        false => format!("{} ({why}){since}", ready.status),
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

    /// A fixed watch list, as a deployer's.
    struct Fixed(Vec<ProcessRecord>);

    impl Watch for Fixed {
        fn processes(&self) -> Vec<ProcessRecord> {
            self.0.clone()
        }
        fn nodes_up(&self) -> Vec<String> {
            Vec::new()
        }
    }

    async fn first_exit(processes: Vec<ProcessRecord>) -> Exited {
        let (watch, dir) = (Fixed(processes), tempfile::tempdir().unwrap());
        let fault = first_fault(dir.path(), Some(&watch), None);
        match tokio::time::timeout(Duration::from_secs(10), fault).await.expect("seen within 10 s") {
            Fault::Exited(exited) => exited,
            other => panic!("{other}"),
        }
    }

    #[tokio::test]
    async fn the_first_watched_process_to_exit_is_named_with_its_status_and_log() {
        let dir = tempfile::tempdir().unwrap();
        let steady = started("kube-apiserver", "exec sleep 60", &dir.path().join("kube-apiserver.log"));
        let crashing = started(
            "reference-ccm",
            r"printf '\033[31mE1206 lost the cloud API: connection refused\033[0m\n'; sleep 1; exit 3",
            &dir.path().join("reference-ccm.log"),
        );
        let watched = [steady.clone(), crashing.clone()];
        assert_eq!(exited(&watched), None, "both run at first");
        let fault = first_exit(watched.to_vec()).await;
        assert_eq!(
            (fault.component.as_str(), fault.pid, fault.ended.as_str()),
            ("reference-ccm", crashing.pid, "exit status 3")
        );
        let said = Fault::Exited(fault).to_string();
        assert!(
            said.starts_with(&format!(
                "reference-ccm (pid {}) exited: exit status 3; the end of its log (",
                crashing.pid
            )),
            "{said}"
        );
        assert!(said.ends_with("reference-ccm.log):\nE1206 lost the cloud API: connection refused"), "{said}");

        nix::sys::signal::kill(nix::unistd::Pid::from_raw(steady.pid), nix::sys::signal::Signal::SIGKILL).unwrap();
        let killed = first_exit(vec![steady]).await;
        assert_eq!(killed.ended, "killed by SIGKILL");
        assert!(Fault::Exited(killed).to_string().ends_with("is empty"), "{said}");
    }

    #[tokio::test]
    async fn nothing_to_watch_is_never_a_fault() {
        let (watch, dir) = (Fixed(Vec::new()), tempfile::tempdir().unwrap());
        let fault = first_fault(dir.path(), Some(&watch), None);
        assert!(tokio::time::timeout(Duration::from_millis(1500), fault).await.is_err());
    }

    #[test]
    fn the_cloud_is_down_once_every_call_failed_for_the_window_and_up_again_at_an_answer() {
        let calls = |answered: u64, failed: &[(&str, u64)]| ApiCalls {
            answered,
            failed: failed.iter().map(|(call, n)| (call.to_string(), *n)).collect(),
        };
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut looks = CloudLooks::default();
        // Answering; then a test's injected fault fails two calls: no fault.
        assert_eq!(looks.look(at(0), calls(10, &[])), None);
        assert_eq!(looks.look(at(5), calls(12, &[("create_route 503", 2)])), None);
        // The last answer by 10 s; from then, every call fails.
        assert_eq!(looks.look(at(10), calls(13, &[("create_route 503", 2)])), None);
        assert_eq!(looks.look(at(25), calls(13, &[("create_route 503", 2), ("list_routes 503", 3)])), None);
        assert_eq!(looks.look(at(39), calls(13, &[("create_route 503", 2), ("list_routes 503", 6)])), None, "29 s");
        let down = looks.look(at(40), calls(13, &[("create_route 503", 3), ("list_routes 503", 6)])).expect("30 s");
        assert_eq!(down.for_, Duration::from_secs(30));
        let failed: Vec<(&str, u64)> = down.failed.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(failed, [("create_route 503", 1), ("list_routes 503", 6)]);
        assert_eq!(
            Fault::CloudDown(down).to_string(),
            "the cloud's API failed every call for the last 30 s, answering none: create_route 503 × 1, list_routes 503 × 6"
        );
        // One call answered in the window: up.
        assert_eq!(looks.look(at(41), calls(14, &[("create_route 503", 3), ("list_routes 503", 7)])), None);

        // Idle (no call at all) for as long is no fault.
        let mut idle = CloudLooks::default();
        assert_eq!(idle.look(at(0), calls(5, &[])), None);
        assert_eq!(idle.look(at(60), calls(5, &[])), None);
    }

    fn node(conditions: serde_json::Value) -> Node {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "n"}, "status": {"conditions": conditions}}))
            .unwrap()
    }

    #[test]
    fn a_node_is_not_ready_unless_its_ready_condition_is_true_and_says_why() {
        let ready = |status: &str| {
            serde_json::json!([
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": status, "reason": "NodeStatusUnknown",
                 "message": "Kubelet stopped posting node status.", "lastTransitionTime": "2026-12-06T17:01:02Z"}
            ])
        };
        assert_eq!(ready_condition(&node(ready("True"))), None);
        assert_eq!(
            ready_condition(&node(ready("Unknown"))).as_deref(),
            Some("Unknown (NodeStatusUnknown: Kubelet stopped posting node status.) since 2026-12-06T17:01:02Z")
        );
        let bare = serde_json::json!([{"type": "Ready", "status": "False"}]);
        assert_eq!(ready_condition(&node(bare)).as_deref(), Some("False"));
        let none = serde_json::json!([{"type": "MemoryPressure", "status": "False"}]);
        assert_eq!(ready_condition(&node(none)).as_deref(), Some("missing (the node reports no Ready condition)"));
    }
}

//! The machines of a local cluster with a cloud: each is an instance of its cloud
//! ([`crate::clouds::CloudState::act`]) and its node. Shutting a machine down or terminating it stops both, as on a real cloud (where
//! the kubelet dies with its VM); starting it brings both back. These are the `local` provider's
//! cloud-e2e hooks (`harness cluster instance ...`).
//!
//! A kwok node's kubelet is simulated: an annotation makes kwok report it NotReady. A real node's
//! machine really stops: its kube-proxy, kubelet and containerd are stopped, its pods killed and
//! its `/run` cleared, as by a power-off; their command lines are kept in the cluster's state
//! (`stopped`) and `start` runs them again, so the node comes back as after a reboot. `terminate`
//! also stops the process holding the node's namespaces, which takes its network and mounts.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::clouds::{CloudState, Lack};
use super::process::{self, ProcessRecord};
use super::{ClusterError, ClusterState, Result, client_for, cluster_dir, load_state, nodes, real, save_state};
use serde::{Deserialize, Serialize};

pub use super::clouds::InstanceState;

/// What happens to a machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MachineAction {
    /// Stop it; the instance still exists and can be started again.
    Shutdown,
    /// Start a shut-down machine.
    Start,
    /// Destroy it for good.
    Terminate,
}

impl MachineAction {
    pub(crate) fn verb(self) -> &'static str {
        match self {
            MachineAction::Shutdown => "shutting down",
            MachineAction::Start => "starting",
            MachineAction::Terminate => "terminating",
        }
    }
}

/// The cloud of cluster `state`.
pub(crate) fn cloud_of(state: &ClusterState) -> Result<&dyn CloudState> {
    state.cloud.as_deref().ok_or_else(|| ClusterError::NoCloud { cluster: state.name.clone() })
}

/// Applies `action` to the machine of node `node` of cluster `cluster`: its instance in the
/// cluster's cloud, and the node's kubelet; returns its instance.
pub async fn act(cluster: &str, node: &str, action: MachineAction) -> Result<InstanceState> {
    let state = load_state(cluster)?;
    let instance = cloud_of(&state)?.act(node, action).await?;
    act_on_node(&state, node, action).await?;
    Ok(instance)
}

/// What `action` does to node `node` itself: a real node's processes stop or start; a kwok
/// node's simulated kubelet stops or starts reporting.
async fn act_on_node(state: &ClusterState, node: &str, action: MachineAction) -> Result<()> {
    let cluster = state.name.as_str();
    if real::is_real_node(state, node) {
        let dir = cluster_dir(cluster);
        tokio::task::spawn_blocking({
            let node = node.to_owned();
            move || act_on_real_node(&dir, &node, action)
        })
        .await
        .map_err(|e| ClusterError::RealNodes(format!("{} node {node}: {e}", action.verb())))??;
        return Ok(());
    }
    let kubelet = match action {
        MachineAction::Start => serde_json::Value::Null,
        MachineAction::Shutdown | MachineAction::Terminate => json!("stopped"),
    };
    let patch = json!({"metadata": {"annotations": {nodes::KUBELET_STOPPED: kubelet}}});
    let api: Api<Node> = Api::all(client_for(state).await?);
    match api.patch(node, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        // A deleted node has no kubelet left to stop.
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(ClusterError::Kube { cluster: cluster.to_owned(), source }),
    }
}

/// A process of a real node stopped with its machine: how to start it again.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StoppedProcess {
    pub node: String,
    /// The record it had while it ran (component, log).
    pub record: ProcessRecord,
    /// Its command line and environment, read from `/proc` before it was stopped: the program's
    /// own, run in the node's namespaces (`nsenter` exec'd it, and is no longer in its command line).
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// How long a process of a node gets to exit on SIGTERM before SIGKILL: a powered-off machine
/// does not wait, and the hook that asked has a timeout of its own (30 s in providers.yaml).
const STOP_GRACE: Duration = Duration::from_secs(2);
/// How long a restarted containerd gets to serve before its kubelet starts anyway.
const CONTAINERD_START: Duration = Duration::from_secs(10);

/// The processes of node `node`'s machine, in start order, and the one holding its namespaces.
fn machine_components(node: &str) -> ([String; 3], String) {
    let components = ["containerd", "kubelet", "kube-proxy"].map(|c| format!("{node}-{c}"));
    (components, format!("{node}-namespaces"))
}

/// Machine actions on one cluster take turns: each reads, changes and writes the cluster's state,
/// and two at once (cloud-e2e shuts one node down while it terminates another) lost each other's
/// writes. The lock goes with the cluster's dir.
pub(crate) fn take_turn(dir: &std::path::Path) -> Result<std::fs::File> {
    let path = dir.join("machines.lock");
    let lock = std::fs::File::create(&path).map_err(super::io_err("creating", &path))?;
    lock.lock().map_err(super::io_err("locking", &path))?;
    Ok(lock)
}

fn act_on_real_node(dir: &std::path::Path, node: &str, action: MachineAction) -> Result<()> {
    let _turn = take_turn(dir)?;
    let mut state = super::load_state_at(dir)?;
    let index = state.nodes.iter().position(|n| n == node).ok_or_else(|| {
        ClusterError::RealNodes(format!("cluster '{}' has no node {node} (its nodes: {:?})", state.name, state.nodes))
    })? as u32;
    let (components, holder_component) = machine_components(node);
    match action {
        MachineAction::Shutdown | MachineAction::Terminate => {
            let (stopping, kept): (Vec<ProcessRecord>, Vec<ProcessRecord>) =
                state.processes.drain(..).partition(|p| components.contains(&p.component));
            state.processes = kept;
            for record in &stopping {
                if let Some(stopped) = snapshot(node, record) {
                    state.stopped.push(stopped);
                }
            }
            // Recorded first: a harness killed half way leaves the state saying what to start again.
            save_state(dir, &state)?;
            process::terminate(&stopping, STOP_GRACE);
            let holder = state.processes.iter().find(|p| p.component == holder_component).map(|p| p.pid);
            real::kill_pods(dir, node, index, holder)?;
            if action == MachineAction::Terminate {
                let (holders, kept): (Vec<ProcessRecord>, Vec<ProcessRecord>) =
                    state.processes.drain(..).partition(|p| p.component == holder_component);
                state.processes = kept;
                // Gone for good: nothing to start again.
                state.stopped.retain(|s| s.node != node);
                // Off the record before it stops, as above: a run watching the cluster's
                // processes takes an exit on the record for a fault.
                save_state(dir, &state)?;
                process::terminate(&holders, STOP_GRACE);
            }
            save_state(dir, &state)
        }
        MachineAction::Start => {
            let (starting, kept): (Vec<StoppedProcess>, Vec<StoppedProcess>) =
                state.stopped.drain(..).partition(|s| s.node == node);
            state.stopped = kept;
            if !state.processes.iter().any(|p| p.component == holder_component) {
                return Err(ClusterError::RealNodes(format!("node {node}'s machine was terminated; it cannot start")));
            }
            let mut starting = starting;
            starting.sort_by_key(|s| components.iter().position(|c| *c == s.record.component));
            let holder = state.processes.iter().find(|p| p.component == holder_component).map_or(0, |p| p.pid);
            for stopped in starting {
                let record = restart(&stopped, holder)?;
                state.processes.push(record);
                save_state(dir, &state)?;
                if stopped.record.component.ends_with("-containerd") {
                    wait_for_containerd(&real::node_containerd_socket(dir, index));
                }
            }
            save_state(dir, &state)
        }
    }
}

/// What it takes to start `record` again, from `/proc` (nothing when it no longer runs).
pub(crate) fn snapshot(node: &str, record: &ProcessRecord) -> Option<StoppedProcess> {
    if !record.is_running() {
        return None;
    }
    let split = |bytes: Vec<u8>| -> Vec<String> {
        bytes.split(|b| *b == 0).filter(|s| !s.is_empty()).map(|s| String::from_utf8_lossy(s).into_owned()).collect()
    };
    let argv = split(std::fs::read(format!("/proc/{}/cmdline", record.pid)).ok()?);
    let env = split(std::fs::read(format!("/proc/{}/environ", record.pid)).ok()?)
        .into_iter()
        .filter_map(|pair| pair.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect();
    (!argv.is_empty()).then(|| StoppedProcess { node: node.to_owned(), record: record.clone(), argv, env })
}

/// Starts a stopped process again in the namespaces `holder` holds, with its command line,
/// environment and log.
pub(crate) fn restart(stopped: &StoppedProcess, holder: i32) -> Result<ProcessRecord> {
    let nsenter = PathBuf::from("/usr/bin/nsenter");
    let mut args = vec![format!("--net=/proc/{holder}/ns/net"), format!("--mount=/proc/{holder}/ns/mnt"), "--".into()];
    args.extend(stopped.argv.iter().cloned());
    let env = process::Environment { set: stopped.env.clone(), removed: Vec::new() };
    process::spawn_with_env(&stopped.record.component, &nsenter, &args, &env, &stopped.record.log)
        .map_err(super::io_err("starting", &nsenter))
}

/// Waits (bounded) until containerd accepts connections on `socket`; kubelet retries after that.
fn wait_for_containerd(socket: &std::path::Path) {
    let deadline = Instant::now() + CONTAINERD_START;
    while std::os::unix::net::UnixStream::connect(socket).is_err() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The load balancers of cluster `cluster`'s cloud, as JSON: none when the cloud has none (a
/// listing hook then finds that nothing was made, which is true).
pub async fn load_balancers(cluster: &str) -> Result<Vec<serde_json::Value>> {
    load_balancers_of(&load_state(cluster)?).await
}

pub(crate) async fn load_balancers_of(state: &ClusterState) -> Result<Vec<serde_json::Value>> {
    let cloud = cloud_of(state)?;
    match cloud.load_balancers() {
        Some(balancers) => balancers.list_load_balancers().await,
        None => {
            tracing::debug!("{}", lacks(state, cloud, Lack::LoadBalancers));
            Ok(Vec::new())
        }
    }
}

/// The routes the cloud of cluster `cluster` holds for its nodes' pod CIDRs, as JSON.
pub async fn routes(cluster: &str) -> Result<Vec<serde_json::Value>> {
    routes_of(&load_state(cluster)?).await
}

pub(crate) async fn routes_of(state: &ClusterState) -> Result<Vec<serde_json::Value>> {
    let cloud = cloud_of(state)?;
    match cloud.routes() {
        Some(routes) => routes.list_routes(&state.name).await,
        None => Err(lacks(state, cloud, Lack::Routes)),
    }
}

fn lacks(state: &ClusterState, cloud: &dyn CloudState, what: Lack) -> ClusterError {
    let facts = cloud.facts();
    ClusterError::CloudLacks {
        cluster: state.name.clone(),
        cloud: facts.name,
        what: what.as_str(),
        why: facts.lacks(what).unwrap_or("it keeps none"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Machine actions at once on one cluster (cloud-e2e's shutdown and deletion tests) each
    /// read, change and write its state: none loses another's write.
    #[test]
    fn machine_actions_at_once_lose_none_of_each_others_writes() {
        let dir = tempfile::tempdir().unwrap();
        let state = ClusterState::new("race", "v1.37.1", dir.path().join("kubeconfig"));
        save_state(dir.path(), &state).unwrap();
        std::thread::scope(|scope| {
            for i in 0..16 {
                let dir = dir.path();
                scope.spawn(move || {
                    let _turn = take_turn(dir).unwrap();
                    let mut state = super::super::load_state_at(dir).unwrap();
                    std::thread::sleep(Duration::from_millis(5));
                    state.nodes.push(format!("node-{i}"));
                    save_state(dir, &state).unwrap();
                });
            }
        });
        let nodes = super::super::load_state_at(dir.path()).unwrap().nodes;
        assert_eq!(nodes.len(), 16, "{nodes:?}");
    }
}

//! Changing the Kubernetes release a running cluster's components run, one component at a time, as
//! an operator upgrades (or rolls back) a cluster: the process is stopped and started again from
//! another release's toolchain with the command line, environment and log it had. Nothing else
//! changes: etcd and its data, the certificates, the nodes' containerd and their pods all stay.
//!
//! A process being replaced is taken off the cluster's record before it stops (as a machine a test
//! shuts down is), so whoever watches the cluster does not take the stop for a fault.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;

use super::machines::{self, StoppedProcess};
use super::process::{self, ProcessRecord};
use super::{ClusterError, Result, client_for, cluster_dir, load_state_at, save_state};

/// The control plane's components an upgrade replaces, in the order it replaces them.
pub const CONTROL_PLANE: [&str; 3] = ["kube-apiserver", "kube-controller-manager", "kube-scheduler"];
/// A node's components an upgrade replaces (containerd is not Kubernetes': it stays).
pub const NODE_COMPONENTS: [&str; 2] = ["kubelet", "kube-proxy"];

/// How long a replaced component gets to exit on SIGTERM (kube-apiserver drains its requests): a
/// static pod's default `terminationGracePeriodSeconds`, as kubeadm's control plane has.
const STOP_GRACE: Duration = Duration::from_secs(30);
/// How long a component started from the other release gets to serve.
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// What a replacement changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replaced {
    /// The cluster's process names (`kube-apiserver`, `<node>-kubelet`).
    pub components: Vec<String>,
    pub from: PathBuf,
    pub to: PathBuf,
}

/// Replaces control-plane `component` of cluster `cluster` with the one of `toolchain`, and waits
/// until it serves (kube-apiserver's `/readyz`; the others' secure port).
pub async fn replace_control_plane(
    cluster: &str,
    component: &str,
    toolchain: &toolchain::Toolchain,
) -> Result<Replaced> {
    if !CONTROL_PLANE.contains(&component) {
        return Err(ClusterError::Upgrade(format!("{component} is not one of the control plane's {CONTROL_PLANE:?}")));
    }
    let dir = cluster_dir(cluster);
    let binary = toolchain.binary(component);
    let replaced = tokio::task::spawn_blocking({
        let (dir, component) = (dir.clone(), component.to_owned());
        move || replace(&dir, &[component], None, &binary)
    })
    .await
    .map_err(|e| ClusterError::Upgrade(format!("replacing {component}: {e}")))??;
    if component == "kube-apiserver" {
        // The cluster's version is its API server's.
        let state = {
            let _turn = machines::take_turn(&dir)?;
            let mut state = load_state_at(&dir)?;
            state.kubernetes_version = toolchain.version.clone();
            save_state(&dir, &state)?;
            state
        };
        super::wait_for_api(&super::LocalCluster { state, dir }).await?;
    } else {
        let state = load_state_at(&dir)?;
        wait_for_port(&state, component, &secure_port(&dir, component)?).await?;
    }
    Ok(replaced)
}

/// Replaces node `node`'s kubelet and kube-proxy with `toolchain`'s, and waits until the node is
/// Ready with the new kubelet. The caller cordons and drains it first, if it wants to.
pub async fn replace_node(cluster: &str, node: &str, toolchain: &toolchain::Toolchain) -> Result<Replaced> {
    let dir = cluster_dir(cluster);
    let components: Vec<String> = NODE_COMPONENTS.iter().map(|c| format!("{node}-{c}")).collect();
    let replaced = tokio::task::spawn_blocking({
        let (dir, node, components) = (dir.clone(), node.to_owned(), components.clone());
        let toolchain = toolchain.clone();
        move || {
            let mut replaced = None;
            // kube-proxy goes first and comes back last: its rules stay in place while it is away.
            for (component, name) in components.iter().zip(NODE_COMPONENTS).rev() {
                let one = replace(&dir, std::slice::from_ref(component), Some(&node), &toolchain.binary(name))?;
                replaced.get_or_insert(one);
            }
            Ok::<_, ClusterError>(replaced.expect("a node has components"))
        }
    })
    .await
    .map_err(|e| ClusterError::Upgrade(format!("replacing node {node}'s components: {e}")))??;
    let state = load_state_at(&dir)?;
    wait_for_kubelet(&state, node, &toolchain.version).await?;
    Ok(Replaced { components, ..replaced })
}

/// Stops `components` (recorded processes of the cluster at `dir`) and starts each again from
/// `binary`, with its command line, environment and log; in node `node`'s namespaces when given.
fn replace(dir: &Path, components: &[String], node: Option<&str>, binary: &Path) -> Result<Replaced> {
    if !binary.is_file() {
        return Err(ClusterError::Upgrade(format!("{} does not exist: install its release first", binary.display())));
    }
    let _turn = machines::take_turn(dir)?;
    let mut state = load_state_at(dir)?;
    let (replacing, kept): (Vec<ProcessRecord>, Vec<ProcessRecord>) =
        state.processes.drain(..).partition(|p| components.contains(&p.component));
    state.processes = kept;
    let missing: Vec<&String> = components.iter().filter(|c| !replacing.iter().any(|p| &p.component == *c)).collect();
    let snapshots: Vec<StoppedProcess> =
        replacing.iter().filter_map(|record| machines::snapshot(node.unwrap_or_default(), record)).collect();
    if !missing.is_empty() || snapshots.len() != replacing.len() {
        let why = format!(
            "cluster '{}' runs no {missing:?}, or they exited (running: {:?})",
            state.name,
            replacing.iter().filter(|p| p.is_running()).map(|p| &p.component).collect::<Vec<_>>()
        );
        state.processes.extend(replacing);
        save_state(dir, &state)?;
        return Err(ClusterError::Upgrade(why));
    }
    // Off the record first: a watcher takes the exit of a recorded process for a fault, and a
    // harness killed half way leaves the state without a process that no longer runs.
    save_state(dir, &state)?;
    process::terminate(&replacing, STOP_GRACE);
    let from = snapshots.first().map(|s| PathBuf::from(&s.argv[0])).unwrap_or_default();
    let holder = node.and_then(|node| {
        let holder = format!("{node}-namespaces");
        state.processes.iter().find(|p| p.component == holder).map(|p| p.pid)
    });
    for mut snapshot in snapshots {
        snapshot.argv[0] = binary.display().to_string();
        let record = match holder {
            Some(holder) => machines::restart(&snapshot, holder)?,
            None => {
                let env = process::Environment { set: snapshot.env.clone(), removed: Vec::new() };
                process::spawn_with_env(
                    &snapshot.record.component,
                    binary,
                    &snapshot.argv[1..],
                    &env,
                    &snapshot.record.log,
                )
                .map_err(super::io_err("starting", binary))?
            }
        };
        tracing::info!(
            "cluster '{}': {} now runs {} (pid {})",
            state.name,
            record.component,
            binary.display(),
            record.pid
        );
        state.processes.push(record);
        save_state(dir, &state)?;
    }
    Ok(Replaced { components: components.to_vec(), from, to: binary.to_path_buf() })
}

/// The `--secure-port` control-plane `component` was started with.
fn secure_port(dir: &Path, component: &str) -> Result<String> {
    let state = load_state_at(dir)?;
    let record = state.processes.iter().find(|p| p.component == component);
    let argv = record.and_then(|r| std::fs::read(format!("/proc/{}/cmdline", r.pid)).ok()).unwrap_or_default();
    let argv = String::from_utf8_lossy(&argv);
    argv.split('\0')
        .find_map(|arg| arg.strip_prefix("--secure-port="))
        .map(str::to_owned)
        .ok_or_else(|| ClusterError::Upgrade(format!("{component} of cluster '{}' has no --secure-port", state.name)))
}

/// Waits until `component` listens on its port again, failing at once if it exits.
async fn wait_for_port(state: &super::ClusterState, component: &str, port: &str) -> Result<()> {
    let started = Instant::now();
    loop {
        let record = state.processes.iter().find(|p| p.component == component);
        if let Some(record) = record.filter(|r| !r.is_running()) {
            return Err(ClusterError::ComponentExited {
                cluster: state.name.clone(),
                component: component.to_owned(),
                log: record.log.clone(),
                tail: record.log_tail(12),
            });
        }
        if tokio::net::TcpStream::connect(format!("127.0.0.1:{port}")).await.is_ok() {
            return Ok(());
        }
        if started.elapsed() > READY_TIMEOUT {
            return Err(ClusterError::Timeout {
                what: format!("{component} to listen on 127.0.0.1:{port}"),
                waited: started.elapsed(),
                logs: cluster_dir(&state.name).join("logs"),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until node `node` reports kubelet `version` and is Ready.
async fn wait_for_kubelet(state: &super::ClusterState, node: &str, version: &str) -> Result<()> {
    let api: Api<Node> = Api::all(client_for(state).await?);
    let started = Instant::now();
    loop {
        let last = match api.get(node).await {
            Ok(found) => {
                let status = found.status.unwrap_or_default();
                let reported = status.node_info.map(|i| i.kubelet_version).unwrap_or_default();
                let ready = status.conditions.unwrap_or_default().into_iter().find(|c| c.type_ == "Ready");
                let ready_now = ready.as_ref().is_some_and(|c| c.status == "True");
                if reported == version && ready_now {
                    return Ok(());
                }
                format!(
                    "kubelet {reported}, Ready {}",
                    ready.map_or("unknown".into(), |c| format!("{} ({})", c.status, c.message.unwrap_or_default()))
                )
            }
            Err(e) => e.to_string(),
        };
        if started.elapsed() > READY_TIMEOUT {
            return Err(ClusterError::Timeout {
                what: format!("node {node} to be Ready with kubelet {version} (last seen: {last})"),
                waited: started.elapsed(),
                logs: cluster_dir(&state.name).join("logs"),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

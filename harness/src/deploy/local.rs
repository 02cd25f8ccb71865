//! `local`: the embedded cluster of this repository ([`local_cluster`]): etcd, kube-apiserver,
//! kube-controller-manager (`--cloud-provider=external`) and kube-scheduler as supervised
//! processes on loopback, with one of the emulated clouds of [`local_cluster::clouds`]
//! (providers.yaml `deployer.cloud`: a machine per node), and nodes that are real (kubelet,
//! containerd, kube-proxy in namespaces of their own, [`local_cluster::real`]) or simulated by kwok
//! (`deployer.node_kind`). The CCM is not started by `up`: the run deploys it as a step of its own
//! ([`ProcessHost::start_ccm_process`]), so a broken CCM shows as a failed Deploy, not a failed Up.

use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::{DeployError, Deployer, ProcessHost, Upgrader, Watch};
use config::template::{Placeholder, Vars};
use local_cluster::process::ProcessRecord;
use local_cluster::{LocalCluster, NodeKind, UpOptions, nodes, real};

const NAME: &str = "local";

pub struct LocalDeployer {
    options: UpOptions,
    cluster: Option<LocalCluster>,
    /// `up` got past the check that no cluster of that name runs: the name is this run's to tear
    /// down. Until then it may be another run's cluster, which `down` must leave alone.
    owns_name: bool,
}

impl LocalDeployer {
    /// The cluster `options` describe ([`UpOptions::on_cloud`] gives it its cloud).
    pub fn new(mut options: UpOptions) -> Self {
        // A run's cluster goes with the run: one whose harness was killed is cleared by the next.
        options.owned = true;
        LocalDeployer { options, cluster: None, owns_name: false }
    }

    /// The pod range the nodes' CIDRs come from: a CCM's `--cluster-cidr` (`{cluster_cidr}`).
    pub fn cluster_cidr(&self) -> &'static str {
        match self.options.node_kind {
            NodeKind::Real => real::CLUSTER_CIDR,
            NodeKind::Kwok => nodes::CLUSTER_CIDR,
        }
    }

    /// The running cluster, after `up`.
    pub fn cluster(&self) -> Option<&LocalCluster> {
        self.cluster.as_ref()
    }

    fn err(message: impl std::fmt::Display) -> DeployError {
        DeployError::Other { deployer: NAME.into(), message: message.to_string() }
    }
}

#[async_trait]
impl Deployer for LocalDeployer {
    fn name(&self) -> String {
        NAME.into()
    }

    async fn up(&mut self) -> Result<(), DeployError> {
        let cluster = match local_cluster::up(self.options.clone()).await {
            Ok(cluster) => cluster,
            // Someone else's cluster: not ours to bring down.
            Err(source @ local_cluster::ClusterError::AlreadyRunning { .. }) => {
                return Err(DeployError::Local { step: "up", source });
            }
            Err(source) => {
                self.owns_name = true;
                return Err(DeployError::Local { step: "up", source });
            }
        };
        self.owns_name = true;
        self.cluster = Some(cluster);
        Ok(())
    }

    async fn down(&mut self) -> Result<(), DeployError> {
        self.cluster = None;
        if !self.owns_name {
            return Ok(());
        }
        // By name, so a cluster whose `up` failed half way (and left state behind) also goes.
        let name = self.options.name.clone();
        tokio::task::spawn_blocking(move || local_cluster::down(&name))
            .await
            .map_err(Self::err)?
            .map(|_| ())
            .map_err(|source| DeployError::Local { step: "down", source })
    }

    async fn is_up(&self) -> Result<bool, DeployError> {
        match local_cluster::load_state(&self.options.name) {
            Ok(state) => Ok(state.processes.iter().all(|p| p.is_running())),
            Err(_) => Ok(false),
        }
    }

    fn kubeconfig(&self) -> Option<PathBuf> {
        self.cluster.as_ref().map(|c| c.state.kubeconfig.clone())
    }

    async fn dump_logs(&self, dir: &Path) -> Result<(), DeployError> {
        let Some(cluster) = &self.cluster else { return Ok(()) };
        // Every component's log, the nodes' kubelet, containerd and kube-proxy among them.
        copy_files(&cluster.dir.join("logs"), dir)?;
        // Real nodes: every container's log, as `pods/<node>/<namespace>_<pod>_<uid>/<container>/0.log`.
        for (node, pods) in real::pod_log_dirs(&cluster.dir) {
            copy_tree(&pods, &dir.join("pods").join(node))?;
        }
        Ok(())
    }

    fn vars(&self) -> Vars {
        let mut vars = Vars::new();
        vars.insert(Placeholder::Cluster, self.options.name.clone());
        vars.insert(Placeholder::ClusterCidr, self.cluster_cidr().into());
        if let Some(cluster) = &self.cluster {
            vars.insert(Placeholder::Kubeconfig, cluster.state.kubeconfig.display().to_string());
            vars.insert(Placeholder::CloudConfig, cluster.cloud_config().display().to_string());
            vars.insert(Placeholder::CloudStateDir, cluster.cloud_state_dir().display().to_string());
            if let Some(port) = cluster.state.ccm_port {
                vars.insert(Placeholder::SecurePort, port.to_string());
            }
        }
        vars
    }

    fn keep(&mut self) -> String {
        // Neither `down` nor the drop below touches the cluster now, nor the next run's `up`.
        if let Err(e) = local_cluster::disown(&self.options.name) {
            tracing::warn!("cluster '{}' may be cleared by the next run of its name: {e}", self.options.name);
        }
        self.cluster = None;
        self.owns_name = false;
        format!("harness cluster down --name {}", self.options.name)
    }

    fn process_host(&mut self) -> Option<&mut dyn ProcessHost> {
        Some(self)
    }

    fn upgrader(&mut self) -> Option<&mut dyn Upgrader> {
        Some(self)
    }

    fn watch(&self) -> Option<Box<dyn Watch>> {
        self.cluster.as_ref().map(|cluster| Box::new(LocalWatch { name: cluster.state.name.clone() }) as Box<dyn Watch>)
    }
}

#[async_trait]
impl ProcessHost for LocalDeployer {
    async fn start_ccm_process(&mut self, binary: &Path, args: &[String]) -> Result<(), DeployError> {
        // The cluster may have changed since `up` (a machine a test stopped and started again).
        self.reload()?;
        let cluster = self.cluster.as_mut().ok_or_else(|| Self::err("the cluster is not up"))?;
        cluster.start_ccm(binary, args).await.map_err(|source| DeployError::Local { step: "CCM start", source })
    }

    async fn stop_ccm_process(&mut self, binary: &Path) -> Result<(), DeployError> {
        self.reload()?;
        let cluster = self.cluster.as_mut().ok_or_else(|| Self::err("the cluster is not up"))?;
        cluster.stop_ccm(binary).map_err(|source| DeployError::Local { step: "CCM stop", source })
    }
}

#[async_trait]
impl Upgrader for LocalDeployer {
    async fn replace_control_plane(&mut self, component: &str, version: &str) -> Result<(), DeployError> {
        let toolchain = toolchain_of(version).await?;
        local_cluster::upgrade::replace_control_plane(&self.options.name, component, &toolchain)
            .await
            .map_err(|source| DeployError::Local { step: "upgrade", source })?;
        self.reload()
    }

    async fn upgradable_nodes(&self) -> Result<Vec<String>, DeployError> {
        let state = local_cluster::load_state(&self.options.name)
            .map_err(|source| DeployError::Local { step: "upgrade", source })?;
        let has_kubelet = |node: &String| state.processes.iter().any(|p| p.component == format!("{node}-kubelet"));
        Ok(state.nodes.iter().filter(|node| real::is_real_node(&state, node) && has_kubelet(node)).cloned().collect())
    }

    async fn replace_node(&mut self, node: &str, version: &str) -> Result<(), DeployError> {
        let toolchain = toolchain_of(version).await?;
        local_cluster::upgrade::replace_node(&self.options.name, node, &toolchain)
            .await
            .map_err(|source| DeployError::Local { step: "upgrade", source })?;
        self.reload()
    }

    async fn routes(&self) -> Option<Vec<serde_json::Value>> {
        local_cluster::machines::routes(&self.options.name).await.ok()
    }
}

impl LocalDeployer {
    /// Reads the cluster's state again after a change made through its name.
    fn reload(&mut self) -> Result<(), DeployError> {
        if self.cluster.is_none() {
            return Ok(());
        }
        let state = local_cluster::load_state(&self.options.name)
            .map_err(|source| DeployError::Local { step: "upgrade", source })?;
        if let Some(cluster) = self.cluster.as_mut() {
            cluster.state = state;
        }
        Ok(())
    }
}

/// The installed toolchain of release `version` (built now if it is not cached).
async fn toolchain_of(version: &str) -> Result<toolchain::Toolchain, DeployError> {
    let version = version.to_owned();
    let install = tokio::task::spawn_blocking(move || {
        let release = toolchain::resolve_or_pin(&version)?;
        toolchain::install_with(&release, false, &local_cluster::upgrade::CONTROL_PLANE)
    });
    Ok(install.await.map_err(LocalDeployer::err)??)
}

/// Copies the files directly in `from` into `to`.
fn copy_files(from: &Path, to: &Path) -> Result<(), DeployError> {
    std::fs::create_dir_all(to).map_err(|e| LocalDeployer::err(format!("cannot create {}: {e}", to.display())))?;
    let entries =
        std::fs::read_dir(from).map_err(|e| LocalDeployer::err(format!("cannot list {}: {e}", from.display())))?;
    for entry in entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_file())) {
        let target = to.join(entry.file_name());
        std::fs::copy(entry.path(), &target).map_err(|e| {
            LocalDeployer::err(format!("cannot copy {} to {}: {e}", entry.path().display(), target.display()))
        })?;
    }
    Ok(())
}

/// Copies the directory tree `from` into `to` (files and directories; links are left out).
fn copy_tree(from: &Path, to: &Path) -> Result<(), DeployError> {
    copy_files(from, to)?;
    let entries =
        std::fs::read_dir(from).map_err(|e| LocalDeployer::err(format!("cannot list {}: {e}", from.display())))?;
    for entry in entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())) {
        copy_tree(&entry.path(), &to.join(entry.file_name()))?;
    }
    Ok(())
}

impl Drop for LocalDeployer {
    /// A run dropped half way (a panic, an error that skipped its Down) still leaves nothing
    /// running, unless it kept the cluster ([`Deployer::keep`]).
    fn drop(&mut self) {
        if let Some(cluster) = self.cluster.take() {
            let _ = cluster.down();
        }
    }
}

/// The local cluster as its `cluster.json` says now ([`local_cluster::watched`]); nothing to
/// watch when it cannot be read (the watch looks again a second later).
struct LocalWatch {
    name: String,
}

#[async_trait]
impl Watch for LocalWatch {
    fn processes(&self) -> Vec<ProcessRecord> {
        local_cluster::watched(&self.name).map(|w| w.processes).unwrap_or_default()
    }

    fn nodes_up(&self) -> Vec<String> {
        local_cluster::watched(&self.name).map(|w| w.nodes_up).unwrap_or_default()
    }

    async fn cloud_api_calls(&self) -> Option<local_cluster::clouds::ApiCalls> {
        let cloud = local_cluster::load_state(&self.name).ok()?.cloud?;
        cloud.api_calls().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_a_ccm_process_once_its_cluster_is_up() {
        let release = toolchain::resolve(None).unwrap();
        let mut deployer = LocalDeployer::new(UpOptions::new("process-host", release));
        let host = deployer.process_host().expect("the local deployer runs a CCM as one of its processes");
        let error = host.start_ccm_process(Path::new("/bin/true"), &[]).await.unwrap_err();
        assert!(error.to_string().contains("the cluster is not up"), "{error}");
    }
}

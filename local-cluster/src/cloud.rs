//! `--cloud local`: the local simulated cloud and the bundled reference CCM, started with the
//! cluster. The cloud gets one running instance per simulated node (same name, the node's IP, a
//! zone of three), and `reference-ccm` runs against both with leader election, as a provider's
//! CCM would in a real cluster.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures::StreamExt;
use local_cloud::api::{Address, AddressType, CreateInstance};
use local_cloud::{ClientConfig, LocalCloud};

use super::node_sets::NodeSet;
use super::{ClusterError, LocalCluster, nodes};
use cli_support::progress;

/// The zones instances are spread over, round robin.
pub const ZONES: &[&str] = &["local-a", "local-b", "local-c"];
pub const REGION: &str = "local";

/// The local cloud, and whether `up` also starts the reference CCM against it.
#[derive(Debug, Clone)]
pub struct CloudOptions {
    /// `reference-ccm`: its `local-cloud serve` is the cloud, and it is the CCM `up` starts.
    pub ccm_binary: PathBuf,
    /// `false` leaves the CCM to the caller ([`super::LocalCluster::start_ccm`]): a run deploys it
    /// as a step of its own.
    pub start_ccm: bool,
}

impl CloudOptions {
    /// The cloud and the reference CCM, both from `ccm_binary`.
    pub fn new(ccm_binary: PathBuf) -> Self {
        CloudOptions { ccm_binary, start_ccm: true }
    }
}

/// Arguments of `reference-ccm local-cloud ... serve`. The cloud picks its own free port and
/// writes it to its address file: a port picked here could be taken by the time it binds.
pub fn cloud_args(state_dir: &Path) -> Vec<String> {
    vec![
        "local-cloud".into(),
        format!("--state-dir={}", state_dir.display()),
        "serve".into(),
        "--listen=127.0.0.1:0".into(),
    ]
}

/// Arguments of `reference-ccm` itself, with upstream's flag names.
pub fn ccm_args(cluster: &str, kubeconfig: &Path, cloud_config: &Path, port: u16) -> Vec<String> {
    vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        "--cloud-provider=local".into(),
        format!("--cloud-config={}", cloud_config.display()),
        format!("--cluster-name={cluster}"),
        "--leader-elect=true".into(),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        format!("--cluster-cidr={}", nodes::CLUSTER_CIDR),
        "--allocate-node-cidrs=true".into(),
        "--configure-cloud-routes=true".into(),
        "--node-monitor-period=5s".into(),
        "--route-reconciliation-period=5s".into(),
    ]
}

/// Writes the CCM's `--cloud-config`: it finds the cloud through the cloud's state dir.
pub fn write_cloud_config(path: &Path, state_dir: &Path) -> Result<(), ClusterError> {
    let text = format!("stateDir: {}\n", state_dir.display());
    std::fs::write(path, text).map_err(|source| ClusterError::Io { action: "writing", path: path.into(), source })
}

/// A client of the cloud at `url`.
pub fn client(url: &str) -> Result<LocalCloud, ClusterError> {
    LocalCloud::new(ClientConfig::new(url)).map_err(|e| ClusterError::Cloud(e.to_string()))
}

/// The instance node `index` of `cluster` runs on.
pub fn instance_for(cluster: &str, index: u32) -> CreateInstance {
    let name = nodes::node_name(cluster, index);
    CreateInstance {
        name: name.clone(),
        instance_type: Some("local.standard".into()),
        zone: Some(ZONES[index as usize % ZONES.len()].into()),
        region: Some(REGION.into()),
        addresses: vec![
            Address { kind: AddressType::InternalIP, address: nodes::node_ip(index).to_string() },
            Address { kind: AddressType::InternalIP, address: nodes::node_ipv6(index).to_string() },
            Address { kind: AddressType::Hostname, address: name },
        ],
    }
}

/// The instance real node `index` of `cluster` runs on: its addresses on the cluster's hub network.
pub fn real_instance_for(cluster: &str, index: u32) -> CreateInstance {
    let mut instance = instance_for(cluster, index);
    instance.addresses = vec![
        Address { kind: AddressType::InternalIP, address: super::real::node_ip(index).to_string() },
        Address { kind: AddressType::InternalIP, address: super::real::node_ipv6(index).to_string() },
        Address { kind: AddressType::Hostname, address: instance.name.clone() },
    ];
    instance
}

impl CloudOptions {
    /// Starts the cloud as the cluster's process `local-cloud`, with one instance per node
    /// (`nodes` gives each its addresses), and writes the CCM's `--cloud-config`.
    pub(crate) async fn start(
        &self,
        cluster: &mut LocalCluster,
        count: u32,
        nodes: &impl NodeSet,
    ) -> Result<(), ClusterError> {
        let step = progress::step(format!("starting the local cloud with {count} instances"));
        let state_dir = cluster.cloud_state_dir();
        let mut args = cloud_args(&state_dir);
        if let Some(pool) = nodes.ingress_pool() {
            args.push(format!("--private-ip-pool={pool}"));
        }
        cluster.start(&self.ccm_binary, "local-cloud", args)?;
        let url = wait_for_address(&state_dir, cluster).await?;
        let name = cluster.state.name.clone();
        create_instances(&url, count, |index| nodes.cloud_instance(&name, index)).await?;
        cluster.state.cloud_url = Some(url);
        write_cloud_config(&cluster.dir.join(super::CLOUD_CONFIG), &state_dir)?;
        step.done();
        Ok(())
    }
}

/// How long a running cloud may take to write its address file (a busy machine starting a debug
/// build is slow; a cloud that exited is reported at once).
const CLOUD_START_TIMEOUT: Duration = Duration::from_secs(120);

/// Waits for the address file of the cloud `cluster` serves `state_dir` with, and gives its URL.
async fn wait_for_address(state_dir: &Path, cluster: &LocalCluster) -> Result<String, ClusterError> {
    let started = Instant::now();
    loop {
        if let Ok(url) = local_cloud::url_from_state_dir(state_dir) {
            return Ok(url);
        }
        super::check_alive(&cluster.state)?;
        if started.elapsed() > CLOUD_START_TIMEOUT {
            return Err(cluster.timeout("the local cloud to write its address file", started));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates the instances `instance` gives for node indices `0..count` in the cloud at `url`.
pub async fn create_instances(
    url: &str,
    count: u32,
    instance: impl Fn(u32) -> CreateInstance,
) -> Result<(), ClusterError> {
    let cloud = client(url)?;
    let creates = (0..count).map(|index| {
        let cloud = &cloud;
        let instance = instance(index);
        async move { cloud.create_instance(&instance).await }
    });
    let mut results = futures::stream::iter(creates).buffer_unordered(32);
    while let Some(result) = results.next().await {
        result.map_err(|e| ClusterError::Cloud(format!("creating an instance: {e}")))?;
    }
    Ok(())
}

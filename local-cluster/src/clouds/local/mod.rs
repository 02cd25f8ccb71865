//! `cloud: local`: the local simulated cloud and the bundled reference CCM. The cloud
//! (`reference-ccm local-cloud serve`) gets one running instance per node (same name, the node's
//! addresses, a zone of three), and `reference-ccm` runs against both with leader election, as a
//! provider's CCM would in a real cluster. With real nodes, its data plane
//! (`reference-ccm local-cloud data-plane`) carries its load balancers' traffic and programs its
//! routes on the nodes' network, from its own pool of ingress IPs there (`--private-ip-pool`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use local_cloud::api::{Address, AddressType, CreateInstance};
use local_cloud::{ClientConfig, LocalCloud};
use serde::{Deserialize, Serialize};

use super::{
    Cloud, CloudError, CloudErrorKind, CloudFacts, CloudKind, CloudSettings, CloudState, InstanceState, LoadBalancers,
    Machine, Machines, Routes,
};
use crate::machines::MachineAction;
use crate::{ClusterError, LocalCluster, Result, nodes};
use cli_support::progress;

/// The zones instances are spread over, round robin.
pub const ZONES: &[&str] = &["local-a", "local-b", "local-c"];
pub const REGION: &str = "local";
/// The CCM's `--cloud-config`, in the cluster dir.
pub const CLOUD_CONFIG: &str = "cloud-config.yaml";

fn facts() -> &'static CloudFacts {
    config::clouds::named("local").expect("config::clouds lists the local cloud")
}

fn error(kind: CloudErrorKind, what: impl Into<String>, message: impl std::fmt::Display) -> ClusterError {
    CloudError::new(facts(), kind, what, message).into()
}

/// The local cloud in the registry.
pub struct Local;

impl CloudKind for Local {
    fn facts(&self) -> &'static CloudFacts {
        facts()
    }

    /// The cloud is the reference CCM's own, built with it on first use: nothing to install.
    fn install(&self, _force: bool) -> Result<Vec<String>> {
        Ok(Vec::new())
    }

    fn prepare(&self, settings: &CloudSettings) -> Result<Arc<dyn Cloud>> {
        let reference_ccm = match &settings.reference_ccm {
            Some(binary) => binary.clone(),
            None => build_reference_ccm()?,
        };
        Ok(Arc::new(LocalSetup { reference_ccm, start_ccm: settings.start_ccm }))
    }
}

fn build_reference_ccm() -> Result<PathBuf> {
    let step = progress::step("building the reference CCM");
    let binary = toolchain::workspace::build_reference_ccm()?;
    step.done();
    Ok(binary)
}

/// The local cloud, and whether `up` also starts the reference CCM against it.
#[derive(Debug, Clone)]
pub struct LocalSetup {
    /// `reference-ccm`: its `local-cloud serve` is the cloud, and it is the CCM `up` starts.
    pub reference_ccm: PathBuf,
    /// `false` leaves the CCM to the caller ([`crate::LocalCluster::start_ccm`]): a run deploys it
    /// as a step of its own.
    pub start_ccm: bool,
}

impl LocalSetup {
    /// The cloud and the reference CCM, both from `reference_ccm`.
    pub fn new(reference_ccm: PathBuf) -> Self {
        LocalSetup { reference_ccm, start_ccm: true }
    }
}

/// What `cluster.json` records of the local cloud.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LocalState {
    /// The cloud's URL, from the address file it wrote.
    pub url: String,
}

impl LocalState {
    /// A client of the cloud.
    pub fn client(&self) -> Result<LocalCloud> {
        client(&self.url)
    }
}

/// The calls the local cloud's `/metrics` text counts, answered and failed.
fn api_calls(metrics: &str) -> super::ApiCalls {
    let mut calls = super::ApiCalls::default();
    for line in metrics.lines() {
        let Some(rest) = line.strip_prefix("local_cloud_requests_total{") else { continue };
        let Some((labels, value)) = rest.split_once("} ") else { continue };
        let label = |name: &str| {
            labels.split(',').find_map(|pair| pair.strip_prefix(name)?.strip_prefix("=\"")?.strip_suffix('"'))
        };
        // OpenMetrics counters may be written as floats (`7.0`).
        let count = value.trim().parse::<f64>().map(|count| count as u64);
        let (Some(operation), Some(status), Ok(count)) = (label("operation"), label("status"), count) else {
            continue;
        };
        match status.parse::<u16>() {
            Ok(status) if status < 500 => calls.answered += count,
            _ => *calls.failed.entry(format!("{operation} {status}")).or_default() += count,
        }
    }
    calls
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
pub fn write_cloud_config(path: &Path, state_dir: &Path) -> Result<()> {
    let text = format!("stateDir: {}\n", state_dir.display());
    std::fs::write(path, text).map_err(crate::io_err("writing", path))
}

/// A client of the cloud at `url`.
pub fn client(url: &str) -> Result<LocalCloud> {
    LocalCloud::new(ClientConfig::new(url)).map_err(|e| error(CloudErrorKind::Invalid, format!("a client of {url}"), e))
}

/// The instance of `machine`: its name, a zone of [`ZONES`] by its index, and its addresses.
pub fn instance_for(machine: &Machine) -> CreateInstance {
    CreateInstance {
        name: machine.name.clone(),
        instance_type: Some("local.standard".into()),
        zone: Some(ZONES[machine.index as usize % ZONES.len()].into()),
        region: Some(REGION.into()),
        addresses: vec![
            Address { kind: AddressType::InternalIP, address: machine.ipv4.to_string() },
            Address { kind: AddressType::InternalIP, address: machine.ipv6.to_string() },
            Address { kind: AddressType::Hostname, address: machine.name.clone() },
        ],
    }
}

#[async_trait]
impl Cloud for LocalSetup {
    fn facts(&self) -> &'static CloudFacts {
        facts()
    }

    /// Starts the cloud as the cluster's process `local-cloud`, with one instance per machine,
    /// and writes the CCM's `--cloud-config`.
    async fn start(
        &self,
        cluster: &mut LocalCluster,
        machines: &Machines,
        _client: &kube::Client,
    ) -> Result<Arc<dyn CloudState>> {
        let step = progress::step(format!("starting the local cloud with {} instances", machines.list.len()));
        let state_dir = cluster.cloud_state_dir();
        let mut args = cloud_args(&state_dir);
        if let Some(pool) = machines.ingress_pool {
            args.push(format!("--private-ip-pool={pool}"));
        }
        cluster.start(&self.reference_ccm, "local-cloud", args)?;
        let url = wait_for_address(&state_dir, cluster).await?;
        create_instances(&url, &machines.list).await?;
        write_cloud_config(&cluster.dir.join(CLOUD_CONFIG), &state_dir)?;
        step.done();
        Ok(Arc::new(LocalState { url }))
    }

    fn data_plane(&self) -> Option<PathBuf> {
        Some(self.reference_ccm.clone())
    }

    fn ccm(&self, cluster: &LocalCluster, cluster_cidr: &str, port: u16) -> Option<(PathBuf, Vec<String>)> {
        let cloud_config = cluster.dir.join(CLOUD_CONFIG);
        let mut args = ccm_args(&cluster.state.name, &cluster.state.kubeconfig, &cloud_config, port);
        for arg in args.iter_mut().filter(|a| a.starts_with("--cluster-cidr=")) {
            *arg = format!("--cluster-cidr={cluster_cidr}");
        }
        self.start_ccm.then(|| (self.reference_ccm.clone(), args))
    }
}

#[typetag::serde(name = "local")]
#[async_trait]
impl CloudState for LocalState {
    fn facts(&self) -> &'static CloudFacts {
        facts()
    }

    fn cloud_config_file(&self) -> &'static str {
        CLOUD_CONFIG
    }

    /// The reference CCM serves plain HTTP; providers' CCMs serve HTTPS, as k8s.io/cloud-provider's do.
    fn ccm_scheme(&self) -> &'static str {
        "http"
    }

    async fn act(&self, node: &str, action: MachineAction) -> Result<InstanceState> {
        let cloud = self.client()?;
        let instance = match action {
            MachineAction::Shutdown => cloud.shutdown_instance(node).await,
            MachineAction::Start => cloud.start_instance(node).await,
            MachineAction::Terminate => cloud.terminate_instance(node).await,
        }
        .map_err(|e| error(api_error_kind(&e), format!("{} instance {node}", action.verb()), e))?;
        Ok(InstanceState { id: instance.id, state: format!("{:?}", instance.state) })
    }

    /// From its `/metrics` (`local_cloud_requests_total{operation,status}`), which no fault touches.
    async fn api_calls(&self) -> Option<super::ApiCalls> {
        let client = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().ok()?;
        let response = client.get(format!("{}/metrics", self.url)).send().await.ok()?.error_for_status().ok()?;
        Some(api_calls(&response.text().await.ok()?))
    }

    fn load_balancers(&self) -> Option<&dyn LoadBalancers> {
        Some(self)
    }

    fn routes(&self) -> Option<&dyn Routes> {
        Some(self)
    }
}

#[async_trait]
impl LoadBalancers for LocalState {
    async fn list_load_balancers(&self) -> Result<Vec<serde_json::Value>> {
        let balancers = self
            .client()?
            .list_load_balancers()
            .await
            .map_err(|e| error(api_error_kind(&e), "listing load balancers", e))?;
        Ok(balancers.iter().map(|lb| serde_json::to_value(lb).expect("a load balancer serialises")).collect())
    }
}

#[async_trait]
impl Routes for LocalState {
    async fn list_routes(&self, cluster: &str) -> Result<Vec<serde_json::Value>> {
        let routes = self
            .client()?
            .routes("listing routes", cluster)
            .await
            .map_err(|e| error(api_error_kind(&e), "listing routes", e))?;
        Ok(routes.iter().map(|route| serde_json::to_value(route).expect("a route serialises")).collect())
    }
}

/// What kind of failure an answer of the local cloud's API is.
fn api_error_kind(error: &local_cloud::ApiError) -> CloudErrorKind {
    match error.status() {
        None => CloudErrorKind::Unreachable,
        Some(404) => CloudErrorKind::NotFound,
        Some(_) => CloudErrorKind::Refused,
    }
}

/// How long a running cloud may take to write its address file (a busy machine starting a debug
/// build is slow; a cloud that exited is reported at once).
const CLOUD_START_TIMEOUT: Duration = Duration::from_secs(120);

/// Waits for the address file of the cloud `cluster` serves `state_dir` with, and gives its URL.
async fn wait_for_address(state_dir: &Path, cluster: &LocalCluster) -> Result<String> {
    let started = Instant::now();
    loop {
        if let Ok(url) = local_cloud::url_from_state_dir(state_dir) {
            return Ok(url);
        }
        crate::check_alive(&cluster.state)?;
        if started.elapsed() > CLOUD_START_TIMEOUT {
            return Err(cluster.timeout("the local cloud to write its address file", started));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates an instance for each of `machines` in the cloud at `url`.
pub async fn create_instances(url: &str, machines: &[Machine]) -> Result<()> {
    let cloud = client(url)?;
    let creates = machines.iter().map(instance_for).map(|instance| {
        let cloud = &cloud;
        async move { cloud.create_instance(&instance).await }
    });
    let mut results = futures::stream::iter(creates).buffer_unordered(32);
    while let Some(result) = results.next().await {
        result.map_err(|e| error(api_error_kind(&e), "creating an instance", e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_metrics_count_answers_below_500_and_failures_by_operation_and_status() {
        let metrics = "# TYPE local_cloud_requests counter\n\
            local_cloud_requests_total{operation=\"list_routes\",status=\"200\"} 7\n\
            local_cloud_requests_total{operation=\"instance_by_name\",status=\"404\"} 2\n\
            local_cloud_requests_total{operation=\"list_routes\",status=\"503\"} 4\n\
            local_cloud_requests_total{operation=\"create_route\",status=\"500\"} 1\n\
            local_cloud_injected_faults_total{operation=\"*\",mode=\"fail\"} 5\n\
            # EOF\n";
        let calls = super::api_calls(metrics);
        assert_eq!(calls.answered, 9);
        let failed: Vec<(&str, u64)> = calls.failed.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(failed, [("create_route 500", 1), ("list_routes 503", 4)]);
    }
}

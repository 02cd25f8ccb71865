//! `cloud: vcsim`: the cloud of the `vsphere` provider. govmomi's vcsim (the vCenter API, installed
//! by `harness toolchain install --all`) runs as a process of the cluster on loopback, with a user
//! and password it checks. Its inventory is one datacenter (`DC0`) with one cluster (`DC0_C0`) of
//! a host per zone; the harness gives it, through govc, what a vSphere cluster has: one VM per
//! real node, on its zone's host, whose BIOS UUID is the UUID the node's kubelet reports, whose
//! guest host name is the node's name and whose guest IP is the node's address; zone and region
//! tags (categories `k8s-zone`, `k8s-region`) on the hosts and the datacenter. The unmodified
//! cloud-provider-vsphere CCM then finds every VM by itself, with the credentials in the Secret
//! `kube-system/vsphere-cloud-secret` its cloud config names, as its documentation sets it up.
//!
//! What vcsim cannot give: load balancers and routes (the CCM's need NSX-T), so pods reach each
//! other over routes the harness sets as a host-gateway CNI would ([`crate::real::route_pod_cidrs`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::PostParams;
use serde::{Deserialize, Serialize};

use super::{
    Cloud, CloudError, CloudErrorKind, CloudFacts, CloudKind, CloudSettings, CloudState, InstanceState, Machines,
};
use crate::machines::MachineAction;
use crate::{ClusterError, LocalCluster, Result, UpOptions, io_err, real};
pub use config::VsphereTags;
use toolchain::vsphere::Govmomi;

pub const DATACENTER: &str = "DC0";
const COMPUTE_CLUSTER: &str = "DC0_C0";
const NETWORK: &str = "VM Network";
/// The guest OS of every VM: the CCM's instance type ends in `os-<its name for it>`.
pub const GUEST_ID: &str = "ubuntu64Guest";
pub const VM_CPUS: u32 = 1;
pub const ZONE_CATEGORY: &str = "k8s-zone";
pub const REGION_CATEGORY: &str = "k8s-region";
/// The user vcsim accepts (with a password made per cluster). vcsim v0.46.3 refuses every login
/// for a user name with an `@` (`administrator@vsphere.local`), so a plain one.
pub const USERNAME: &str = "harness";
pub const SECRET_NAMESPACE: &str = "kube-system";
pub const SECRET_NAME: &str = "vsphere-cloud-secret";
/// The vCenter's name in the cloud config and the Secret's keys (`<server>.username`).
const SERVER: &str = "127.0.0.1";
/// The CCM's `--cloud-config` (its YAML form), in the cluster dir.
pub const CLOUD_CONFIG: &str = "vsphere.conf";

fn facts() -> &'static CloudFacts {
    config::clouds::named("vcsim").expect("config::clouds lists vcsim")
}

fn error(kind: CloudErrorKind, what: impl Into<String>, message: impl std::fmt::Display) -> ClusterError {
    CloudError::new(facts(), kind, what, message).into()
}

/// vcsim in the registry.
pub struct Vcsim;

impl CloudKind for Vcsim {
    fn facts(&self) -> &'static CloudFacts {
        facts()
    }

    fn install(&self, force: bool) -> Result<Vec<String>> {
        let govmomi = toolchain::vsphere::install_govmomi(force)?;
        Ok(vec![format!("vcsim and govc {}: {}", toolchain::vsphere::govmomi_version(), govmomi.vcsim.display())])
    }

    fn provider_ccm(&self) -> Option<&'static toolchain::provider_ccm::ProviderCcm> {
        Some(&toolchain::vsphere::CCM)
    }

    fn prepare(&self, settings: &CloudSettings) -> Result<Arc<dyn Cloud>> {
        let govmomi = toolchain::vsphere::install_govmomi(false)?;
        let tags = settings.tags.clone().unwrap_or_else(VsphereTags::default_tags);
        Ok(Arc::new(VcsimSetup { govmomi, tags }))
    }
}

/// How the harness starts vcsim.
#[derive(Debug, Clone)]
pub struct VcsimSetup {
    pub govmomi: Govmomi,
    pub tags: VsphereTags,
}

/// What `cluster.json` records of the cluster's vSphere.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct VcsimState {
    /// vcsim's SDK endpoint, without credentials (`https://127.0.0.1:<port>/sdk`).
    pub url: String,
    pub port: u16,
    pub username: String,
    pub password: String,
    pub govc: PathBuf,
    /// Where govc keeps its state: the cluster's, not the user's `~/.govmomi`.
    pub govc_home: PathBuf,
    /// Node name to its VM's BIOS UUID.
    pub vms: BTreeMap<String, String>,
    /// The zone of each node's host, when the inventory has zones.
    #[serde(default)]
    pub zones: BTreeMap<String, String>,
    #[serde(default)]
    pub region: Option<String>,
}

/// A node's VM as vcsim reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmStatus {
    pub uuid: String,
    pub power_state: String,
}

impl VcsimState {
    /// A govc command against this vcsim, as its user.
    fn govc(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.govc);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("GOVC_") {
                command.env_remove(key);
            }
        }
        command
            .args(args)
            .env("GOVC_URL", &self.url)
            .env("GOVC_USERNAME", &self.username)
            .env("GOVC_PASSWORD", &self.password)
            .env("GOVC_INSECURE", "1")
            .env("GOVC_PERSIST_SESSION", "false")
            .env("GOVC_DATACENTER", DATACENTER)
            .env("GOVMOMI_HOME", &self.govc_home);
        command
    }

    /// Runs govc with `args`; its output, or an error with what it printed.
    pub fn run_govc(&self, what: &str, args: &[&str]) -> Result<String> {
        let output = self.govc(args).output().map_err(io_err("running", &self.govc))?;
        if output.status.success() {
            return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let kind = match stderr.contains("connection refused") {
            true => CloudErrorKind::Unreachable,
            false => CloudErrorKind::Refused,
        };
        Err(error(kind, format!("{what}: `govc {}` failed", args.join(" ")), stderr.trim()))
    }

    /// The VM of `node`.
    pub fn vm(&self, node: &str) -> Result<&str> {
        self.vms.get(node).map(String::as_str).ok_or_else(|| {
            let known: Vec<&str> = self.vms.keys().map(String::as_str).collect();
            let what = format!("no VM of node {node} in vcsim; the nodes are: {}", known.join(", "));
            error(CloudErrorKind::NotFound, what, "")
        })
    }

    /// The VM of `node` as vcsim has it now, `None` when it is gone.
    pub fn vm_status(&self, node: &str) -> Result<Option<VmStatus>> {
        let out = self.run_govc("reading a VM", &["vm.info", "-json", node])?;
        let info: serde_json::Value =
            serde_json::from_str(&out).map_err(|e| error(CloudErrorKind::Refused, "govc vm.info", e))?;
        let Some(vm) = info["virtualMachines"].as_array().and_then(|v| v.first()) else { return Ok(None) };
        let text = |value: &serde_json::Value| value.as_str().unwrap_or_default().to_owned();
        Ok(Some(VmStatus { uuid: text(&vm["config"]["uuid"]), power_state: text(&vm["runtime"]["powerState"]) }))
    }
}

/// Whether the vSphere CCM's log (`log`) shows it failed to initialise a node because vCenter
/// refused its login: the CCM retries for ever, so the wait ends with its own line. (A login
/// refused once at start-up, before it has read its Secret, is not that: it then initialises.)
pub fn login_refused(log: &str) -> Result<()> {
    let refused =
        log.lines().find(|line| line.contains("failed to get instance metadata") && line.contains("Login failure"));
    match refused {
        None => Ok(()),
        Some(line) => Err(error(
            CloudErrorKind::Invalid,
            format!(
                "the CCM could not log in to vcsim, so it initialises no node. Its log says:\n  {}\nFix the user and \
                 password it reads: Secret {SECRET_NAMESPACE}/{SECRET_NAME} (keys `{SERVER}.username`, `{SERVER}.password`) \
                 or the `user`/`password` of its --cloud-config",
                line.trim()
            ),
            "",
        )),
    }
}

/// What happens to a node's VM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VmAction {
    PowerOff,
    PowerOn,
    Destroy,
}

/// Applies `action` to the VM of `node`; returns its power state after (`destroyed` when gone).
pub fn act(state: &VcsimState, node: &str, action: VmAction) -> Result<String> {
    state.vm(node)?;
    match action {
        VmAction::PowerOff => state.run_govc("powering a VM off", &["vm.power", "-off", "-force", node])?,
        VmAction::PowerOn => state.run_govc("powering a VM on", &["vm.power", "-on", node])?,
        VmAction::Destroy => state.run_govc("destroying a VM", &["vm.destroy", node])?,
    };
    Ok(state.vm_status(node)?.map_or_else(|| "destroyed".to_owned(), |vm| vm.power_state))
}

/// vcsim's command line: a datacenter with one cluster of `hosts` hosts, no VMs of its own, and
/// this user and password.
pub fn vcsim_args(hosts: u32, password: &str) -> Vec<String> {
    [
        "-l",
        "127.0.0.1:0",
        "-dc",
        "1",
        "-cluster",
        "1",
        "-host",
        &hosts.to_string(),
        "-standalone-host",
        "0",
        "-vm",
        "0",
        "-app",
        "0",
        "-pod",
        "0",
        "-username",
        USERNAME,
        "-password",
        password,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// The port in the `export GOVC_URL=https://user:password@127.0.0.1:<port>/sdk` line vcsim prints
/// once it listens.
pub fn listening_port(log: &str) -> Option<u16> {
    let url = log.lines().find_map(|line| line.split_whitespace().find_map(|w| w.strip_prefix("GOVC_URL=")))?;
    let authority = url.strip_prefix("https://")?.split('/').next()?;
    authority.rsplit('@').next()?.rsplit(':').next()?.parse().ok()
}

/// The host of node `index`: the hosts of `DC0_C0` take the nodes round robin.
pub fn host_path(index: u32, hosts: u32) -> String {
    format!("/{DATACENTER}/host/{COMPUTE_CLUSTER}/{COMPUTE_CLUSTER}_H{}", index % hosts.max(1))
}

#[async_trait]
impl Cloud for VcsimSetup {
    fn facts(&self) -> &'static CloudFacts {
        facts()
    }

    fn preflight(&self, options: &UpOptions) -> Result<()> {
        let max = self.tags.max_nodes();
        if options.nodes > max {
            let what = format!(
                "--nodes {}: vcsim's inventory of {} host(s) (one per zone, 4 GiB each) holds at most {max} node VMs of 1 GiB; add zones or use fewer nodes",
                options.nodes,
                self.tags.hosts()
            );
            return Err(error(CloudErrorKind::Invalid, what, ""));
        }
        Ok(())
    }

    /// Starts vcsim as the cluster's process `vcsim`, gives it a VM per node and the tags, writes
    /// the CCM's cloud config and its credentials' Secret.
    async fn start(
        &self,
        cluster: &mut LocalCluster,
        machines: &Machines,
        client: &kube::Client,
    ) -> Result<Arc<dyn CloudState>> {
        let count = machines.list.len() as u32;
        let step = cli_support::progress::step(format!("starting vcsim (the vsphere cloud) with {count} VMs"));
        let password = crate::new_password();
        // vcsim keeps its datastores in a temporary directory: the cluster's, so `down` removes it
        // even when vcsim is killed before it cleans up.
        let tmp = cluster.dir.join("vcsim-tmp");
        std::fs::create_dir_all(&tmp).map_err(io_err("creating", &tmp))?;
        let env =
            crate::process::Environment { set: vec![("TMPDIR".into(), tmp.display().to_string())], removed: vec![] };
        cluster.start_with_env(&self.govmomi.vcsim, "vcsim", vcsim_args(self.tags.hosts(), &password), &env)?;
        let port = wait_listening(cluster).await?;
        let govc_home = cluster.dir.join("govmomi");
        std::fs::create_dir_all(&govc_home).map_err(io_err("creating", &govc_home))?;
        let mut state = VcsimState {
            url: format!("https://127.0.0.1:{port}/sdk"),
            port,
            username: USERNAME.to_owned(),
            password,
            govc: self.govmomi.govc.clone(),
            govc_home,
            vms: BTreeMap::new(),
            zones: BTreeMap::new(),
            region: self.tags.region.clone(),
        };
        let name = cluster.state.name.clone();
        let tags = self.tags.clone();
        let state = tokio::task::spawn_blocking(move || {
            provision(&mut state, &name, count, &tags)?;
            Ok::<_, ClusterError>(state)
        })
        .await
        .map_err(|e| error(CloudErrorKind::Setup, "provisioning vcsim", e))??;
        write_cloud_config(&cluster.dir.join(CLOUD_CONFIG), &state, &self.tags)?;
        create_secret(client, &cluster.state.name, &state).await?;
        step.done();
        Ok(Arc::new(state))
    }
}

#[typetag::serde(name = "vcsim")]
#[async_trait]
impl CloudState for VcsimState {
    fn facts(&self) -> &'static CloudFacts {
        facts()
    }

    fn cloud_config_file(&self) -> &'static str {
        CLOUD_CONFIG
    }

    fn ccm_failed(&self, log: &str) -> Result<()> {
        login_refused(log)
    }

    async fn act(&self, node: &str, action: MachineAction) -> Result<InstanceState> {
        let vm_action = match action {
            MachineAction::Shutdown => VmAction::PowerOff,
            MachineAction::Start => VmAction::PowerOn,
            MachineAction::Terminate => VmAction::Destroy,
        };
        let (state, node_name) = (self.clone(), node.to_owned());
        let what = format!("{} VM {node}", action.verb());
        let now = super::blocking(facts(), &what, move || act(&state, &node_name, vm_action)).await?;
        Ok(InstanceState { id: self.vms.get(node).cloned().unwrap_or_default(), state: now })
    }
}

/// Waits for vcsim's log to say where it listens; fails at once if it exited.
async fn wait_listening(cluster: &LocalCluster) -> Result<u16> {
    let log = cluster.dir.join("logs").join("vcsim.log");
    let started = Instant::now();
    loop {
        crate::check_alive(&cluster.state)?;
        if let Some(port) = std::fs::read_to_string(&log).ok().as_deref().and_then(listening_port) {
            return Ok(port);
        }
        if started.elapsed() > Duration::from_secs(60) {
            return Err(cluster.timeout("vcsim to listen", started));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Creates node `i`'s VM on its host for each of `count` nodes (powered on, its UUID, guest host
/// name and IP set), and the zone and region tags.
pub fn provision(state: &mut VcsimState, cluster: &str, count: u32, tags: &VsphereTags) -> Result<()> {
    let memory = config::nodes::VCSIM_VM_MEMORY_MIB.to_string();
    let cpus = VM_CPUS.to_string();
    for index in 0..count {
        let node = crate::nodes::node_name(cluster, index);
        let host = host_path(index, tags.hosts());
        let uuid = real::system_uuid(cluster, &node);
        let ip = real::node_ip(index).to_string();
        state.run_govc(
            "creating a node's VM",
            &[
                "vm.create",
                "-on=true",
                "-net",
                NETWORK,
                "-c",
                &cpus,
                "-m",
                &memory,
                "-g",
                GUEST_ID,
                "-host",
                &host,
                &node,
            ],
        )?;
        let hostname = format!("SET.guest.hostName={node}");
        let address = format!("SET.guest.ipAddress={ip}");
        state.run_govc(
            "setting a VM's UUID and guest identity",
            &["vm.change", "-vm", &node, "-uuid", &uuid, "-e", &hostname, "-e", &address],
        )?;
        if let Some(zone) = tags.zones.get((index % tags.hosts()) as usize) {
            state.zones.insert(node.clone(), zone.clone());
        }
        state.vms.insert(node, uuid);
    }
    if tags.zones.is_empty() {
        return Ok(());
    }
    for category in [ZONE_CATEGORY, REGION_CATEGORY] {
        state.run_govc("creating a tag category", &["tags.category.create", category])?;
    }
    for (index, zone) in tags.zones.iter().enumerate() {
        state.run_govc("creating a zone tag", &["tags.create", "-c", ZONE_CATEGORY, zone])?;
        let host = host_path(index as u32, tags.hosts());
        state.run_govc("tagging a host with its zone", &["tags.attach", "-c", ZONE_CATEGORY, zone, &host])?;
    }
    if let Some(region) = &tags.region {
        state.run_govc("creating the region tag", &["tags.create", "-c", REGION_CATEGORY, region])?;
        let datacenter = format!("/{DATACENTER}");
        state.run_govc("tagging the datacenter", &["tags.attach", "-c", REGION_CATEGORY, region, &datacenter])?;
    }
    Ok(())
}

/// The CCM's `--cloud-config` (its YAML form): the vCenter, its datacenter, the Secret that holds
/// the credentials, and the tag categories of zones and regions.
pub fn cloud_config(state: &VcsimState, tags: &VsphereTags) -> String {
    let mut config = serde_json::json!({
        "global": {
            "port": state.port,
            "insecureFlag": true,
            "secretName": SECRET_NAME,
            "secretNamespace": SECRET_NAMESPACE,
        },
        "vcenter": {
            "vcsim": {"server": SERVER, "datacenters": [DATACENTER]},
        },
    });
    if !tags.zones.is_empty() {
        config["labels"] = serde_json::json!({"zone": ZONE_CATEGORY, "region": REGION_CATEGORY});
    }
    serde_yaml_ng::to_string(&config).expect("the cloud config serialises")
}

fn write_cloud_config(path: &Path, state: &VcsimState, tags: &VsphereTags) -> Result<()> {
    std::fs::write(path, cloud_config(state, tags)).map_err(io_err("writing", path))
}

/// The Secret the cloud config names: `<server>.username` and `<server>.password`.
pub fn secret(state: &VcsimState) -> Secret {
    let data = BTreeMap::from([
        (format!("{SERVER}.username"), state.username.clone()),
        (format!("{SERVER}.password"), state.password.clone()),
    ]);
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET_NAME, "namespace": SECRET_NAMESPACE},
        "stringData": data,
    }))
    .expect("a Secret")
}

async fn create_secret(client: &kube::Client, cluster: &str, state: &VcsimState) -> Result<()> {
    let api: Api<Secret> = Api::namespaced(client.clone(), SECRET_NAMESPACE);
    api.create(&PostParams::default(), &secret(state))
        .await
        .map_err(|source| ClusterError::Kube { cluster: cluster.to_owned(), source })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> VcsimState {
        VcsimState {
            url: "https://127.0.0.1:8989/sdk".into(),
            port: 8989,
            username: USERNAME.into(),
            password: "s3cret".into(),
            govc: "govc".into(),
            govc_home: "/tmp".into(),
            vms: BTreeMap::new(),
            zones: BTreeMap::new(),
            region: None,
        }
    }

    #[test]
    fn the_port_is_read_from_the_line_vcsim_prints() {
        let log = "export GOVC_URL=https://harness:ab12@127.0.0.1:35821/sdk GOVC_SIM_PID=497\n";
        assert_eq!(listening_port(log), Some(35821));
        assert_eq!(listening_port("starting\n"), None);
    }

    #[test]
    fn the_cloud_config_names_the_secret_and_labels_only_with_zones() {
        let with = cloud_config(&state(), &VsphereTags::default_tags());
        let parsed: serde_json::Value = serde_yaml_ng::from_str(&with).unwrap();
        assert_eq!(parsed["global"]["port"], 8989);
        assert_eq!(parsed["global"]["secretName"], SECRET_NAME);
        assert_eq!(parsed["global"]["secretNamespace"], SECRET_NAMESPACE);
        assert_eq!(parsed["vcenter"]["vcsim"]["server"], SERVER);
        assert_eq!(parsed["labels"]["zone"], ZONE_CATEGORY);
        assert!(!with.contains("s3cret"), "credentials live in the Secret only: {with}");
        let without = cloud_config(&state(), &VsphereTags { zones: vec![], region: None });
        assert!(!without.contains("labels"), "{without}");
    }

    #[test]
    fn the_secret_keys_are_the_servers_as_the_ccm_parses_them() {
        let secret = secret(&state());
        let data = secret.string_data.unwrap();
        assert_eq!(data["127.0.0.1.username"], USERNAME);
        assert_eq!(data["127.0.0.1.password"], "s3cret");
    }

    #[test]
    fn a_refused_login_that_stops_node_initialisation_is_reported_with_the_ccms_line() {
        let startup = "E1128 11:31:57.249806 18458 connection.go:69] Failed to create govmomi client. err: ServerFaultCode: Login failure\n";
        assert!(login_refused(startup).is_ok(), "a refusal before the Secret is read is not fatal");
        let stuck = format!(
            "{startup}I1128 11:40:51.862189 20176 node_controller.go:236] error syncing 'vs-worker-2': failed to get instance metadata for node vs-worker-2: ServerFaultCode: Login failure, requeuing\n"
        );
        let err = login_refused(&stuck).unwrap_err().to_string();
        assert!(
            err.contains("failed to get instance metadata for node vs-worker-2: ServerFaultCode: Login failure"),
            "{err}"
        );
        assert!(err.contains("Secret kube-system/vsphere-cloud-secret"), "{err}");
    }

    #[test]
    fn nodes_go_round_robin_over_the_hosts() {
        assert_eq!(host_path(0, 3), "/DC0/host/DC0_C0/DC0_C0_H0");
        assert_eq!(host_path(4, 3), "/DC0/host/DC0_C0/DC0_C0_H1");
        assert_eq!(host_path(2, 0), "/DC0/host/DC0_C0/DC0_C0_H0");
    }
}

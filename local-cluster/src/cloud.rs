//! `--cloud local`: the local simulated cloud and the bundled reference CCM, started with the
//! cluster. The cloud gets one running instance per simulated node (same name, the node's IP, a
//! zone of three), and `reference-ccm` runs against both with leader election, as a provider's
//! CCM would in a real cluster.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ccm::local_cloud::api::{Address, AddressType, CreateInstance};
use ccm::local_cloud::{ClientConfig, LocalCloud};
use futures::StreamExt;

use super::{ClusterError, nodes};

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

/// Builds `reference-ccm` from this workspace with cargo (the harness's own build profile) and
/// returns its path.
pub fn build_reference_ccm() -> Result<PathBuf, ClusterError> {
    build_workspace_binary("ccm", "reference-ccm")
}

/// Builds binary `bin` of package `package` of this workspace with cargo (the harness's own build
/// profile) and returns its path.
pub fn build_workspace_binary(package: &str, bin: &str) -> Result<PathBuf, ClusterError> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("harness/ lives in the workspace");
    cargo_build(workspace, package, bin)
}

/// Builds binary `bin` of package `package` of the cargo workspace at `workspace` (a checkout of
/// this repository at another commit, for `harness bisect`) with the harness's own build profile,
/// and returns a copy of it kept in `workspace/.harness-build/`. Checkouts share cargo's target
/// directory, whose binary the next build overwrites: builds and copies take turns, so a run
/// never gets another checkout's binary. Cargo names a workspace's own crates by their path in
/// the workspace and tells them fresh by their files' times, so a checkout made before another's
/// build would pass for built: its files are touched first.
pub fn build_binary_in(workspace: &Path, package: &str, bin: &str) -> Result<PathBuf, ClusterError> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = TURN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    touch_sources(workspace, std::time::SystemTime::now())?;
    let built = cargo_build(workspace, package, bin)?;
    let dir = workspace.join(".harness-build");
    let kept = dir.join(bin);
    std::fs::create_dir_all(&dir).map_err(super::io_err("creating", &dir))?;
    std::fs::copy(&built, &kept).map_err(super::io_err("copying the built CCM to", &kept))?;
    Ok(kept)
}

/// Sets the modification time of every file under `dir` (but `.git`, `target`, `.harness-build`).
fn touch_sources(dir: &Path, now: std::time::SystemTime) -> Result<(), ClusterError> {
    let entries = std::fs::read_dir(dir).map_err(super::io_err("reading", dir))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() {
            if ![".git", "target", ".harness-build"].contains(&entry.file_name().to_str().unwrap_or_default()) {
                touch_sources(&path, now)?;
            }
        } else if kind.is_file() {
            let file = std::fs::File::options().write(true).open(&path).map_err(super::io_err("opening", &path))?;
            file.set_modified(now).map_err(super::io_err("touching", &path))?;
        }
    }
    Ok(())
}

fn cargo_build(workspace: &Path, package: &str, bin: &str) -> Result<PathBuf, ClusterError> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.current_dir(workspace).args(["build", "--locked", "-p", package, "--bin", bin]);
    command.arg("--message-format=json-render-diagnostics");
    if !cfg!(debug_assertions) {
        command.arg("--release");
    }
    let output = command.output().map_err(|source| ClusterError::Io {
        action: "running cargo build for reference-ccm in",
        path: workspace.to_path_buf(),
        source,
    })?;
    let executable = String::from_utf8_lossy(&output.stdout).lines().rev().find_map(|line| {
        let message: serde_json::Value = serde_json::from_str(line).ok()?;
        (message["target"]["name"] == bin).then(|| message["executable"].as_str().map(PathBuf::from))?
    });
    match executable {
        Some(path) if output.status.success() => Ok(path),
        _ => Err(ClusterError::CcmBuild {
            detail: String::from_utf8_lossy(&output.stderr).lines().rev().take(8).collect::<Vec<_>>().join(" | "),
        }),
    }
}

/// Arguments of `reference-ccm local-cloud ... serve`.
pub fn cloud_args(state_dir: &Path, port: u16) -> Vec<String> {
    vec![
        "local-cloud".into(),
        format!("--state-dir={}", state_dir.display()),
        "serve".into(),
        format!("--listen=127.0.0.1:{port}"),
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

/// Waits for the cloud's address file, then creates one instance per node.
pub async fn create_instances(state_dir: &Path, cluster: &str, count: u32, real: bool) -> Result<String, ClusterError> {
    let started = Instant::now();
    let url = loop {
        match ccm::local_cloud::url_from_state_dir(state_dir) {
            Ok(url) => break url,
            Err(_) if started.elapsed() < Duration::from_secs(30) => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => return Err(ClusterError::Cloud(format!("the local cloud did not start: {e}"))),
        }
    };
    let cloud = client(&url)?;
    let creates = (0..count).map(|index| {
        let cloud = &cloud;
        let instance = if real { real_instance_for(cluster, index) } else { instance_for(cluster, index) };
        async move { cloud.create_instance(&instance).await }
    });
    let mut results = futures::stream::iter(creates).buffer_unordered(32);
    while let Some(result) = results.next().await {
        result.map_err(|e| ClusterError::Cloud(format!("creating an instance: {e}")))?;
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-crate workspace whose binary prints `says`.
    fn workspace(dir: &Path, says: &str) {
        std::fs::create_dir_all(dir.join("src")).unwrap();
        let manifest =
            "[package]\nname = \"bisect-race-probe\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[workspace]\n";
        std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
        std::fs::write(dir.join("src/main.rs"), format!("fn main() {{ println!(\"{says}\"); }}\n")).unwrap();
        let lock = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .current_dir(dir)
            .args(["generate-lockfile", "--offline"])
            .output()
            .unwrap();
        assert!(lock.status.success(), "{}", String::from_utf8_lossy(&lock.stderr));
    }

    /// Checkouts built at once (harness bisect --parallel) share cargo's target directory (when
    /// CARGO_TARGET_DIR is set, as in CI): each still gets the binary of its own source.
    #[test]
    fn checkouts_built_at_once_each_get_their_own_binary() {
        let tmp = tempfile::tempdir().unwrap();
        let checkouts: Vec<PathBuf> = (0..3).map(|i| tmp.path().join(format!("checkout-{i}"))).collect();
        for (i, dir) in checkouts.iter().enumerate() {
            workspace(dir, &format!("checkout {i}"));
        }
        let built: Vec<PathBuf> = std::thread::scope(|scope| {
            let builds: Vec<_> = checkouts
                .iter()
                .map(|dir| scope.spawn(move || build_binary_in(dir, "bisect-race-probe", "bisect-race-probe")))
                .collect();
            builds.into_iter().map(|b| b.join().unwrap().unwrap()).collect()
        });
        for (i, binary) in built.iter().enumerate() {
            assert!(binary.starts_with(&checkouts[i]), "kept in its checkout: {}", binary.display());
            let output = Command::new(binary).output().unwrap();
            assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), format!("checkout {i}"));
        }
    }
}

//! The `kind` deployer: `kind create cluster` with the cloud provider external, so that the CCM
//! under test initialises the nodes.
//!
//! - `up`: `kind create cluster --name <cluster> --image <image> --config <generated>
//!   --kubeconfig <state>/kubeconfig --wait 5m`, then one `GET /version` and a node list through
//!   that kubeconfig. The image is `deployer.image` (placeholders filled in), else
//!   `kindest/node:<kubernetes version>` (a tag that exists only for releases a kind release
//!   published images for: set `image` for the others).
//! - `down`: `kind delete cluster --name <cluster> --kubeconfig <state>/kubeconfig` (kind's delete
//!   is idempotent); nothing when `up` never started `kind`.
//! - `dump_logs`: `kind export logs <dir> --name <cluster>`.
//!
//! The generated kind config ([`kind_config`]) is the user's `deployer.config` (or a control plane
//! and two workers, as cloud-provider-kind's own `kind.yaml`), with kubeadm patches appended that
//! set `cloud-provider: external` on the kubelet (`InitConfiguration` and `JoinConfiguration`
//! `nodeRegistration.kubeletExtraArgs`) and on kube-controller-manager (`ClusterConfiguration`
//! `controllerManager.extraArgs`). It is written to `<artifacts>/deploy/kind-config.yaml`; the
//! kubeconfig stays in the state dir, since the artifacts are published.
//!
//! `kind` runs through `command::run` (a log per call under `<artifacts>/deploy/`, a timeout per
//! step from [`Timeouts`], its process group stopped on timeout or cancellation).
//!
//! **Kind cannot run on the machine this was written on (no Docker).** The tests cover the command
//! lines, the generated config (parsed back, keys checked, a user config merged), the missing
//! binary, and the whole deployer (`up`, `is_up`, `kubeconfig`, `dump_logs`, `down`) against a
//! fake `kind` script first on `PATH` that records its argv and writes a kubeconfig pointing at a
//! fake API server. They do not prove that a real kind, kubeadm and kubelet accept the config: the
//! patches follow upstream's shape (cited at [`kind_config`]), and a run on a machine with Docker is
//! the remaining check.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use serde_yaml_ng::{Mapping, Value};

use super::command::Timeouts;
use super::command::{self, Tooling};
use super::existing;
use super::{DeployError, Deployer};
use config::KubernetesVersion;
use config::template::{self, Placeholder, Vars};

const DEPLOYER: &str = "kind";
const PROGRAM: &str = "kind";
const INSTALL_HINT: &str = "install kind (`go install sigs.k8s.io/kind@latest`, or a release binary from \
     https://kind.sigs.k8s.io/docs/user/quick-start/#installation) and make sure Docker or Podman runs";

/// What `kind create cluster --wait` waits for the control plane.
const KIND_WAIT: &str = "5m";

/// The `kubeadmConfigPatches` that make the cloud provider external, for kubeadm's v1beta3 config
/// (kind's for Kubernetes 1.23 to 1.35: maps of flags) and v1beta4 (kind's from 1.36: lists of
/// `{name, value}`). Each names its `apiVersion`, so kind applies only the one matching the
/// kubeadm config it generates.
const PATCHES: [&str; 6] = [
    "apiVersion: kubeadm.k8s.io/v1beta3
kind: ClusterConfiguration
controllerManager:
  extraArgs:
    cloud-provider: external
",
    "apiVersion: kubeadm.k8s.io/v1beta3
kind: InitConfiguration
nodeRegistration:
  kubeletExtraArgs:
    cloud-provider: external
",
    "apiVersion: kubeadm.k8s.io/v1beta3
kind: JoinConfiguration
nodeRegistration:
  kubeletExtraArgs:
    cloud-provider: external
",
    "apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
controllerManager:
  extraArgs:
  - name: cloud-provider
    value: external
",
    "apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
nodeRegistration:
  kubeletExtraArgs:
  - name: cloud-provider
    value: external
",
    "apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
nodeRegistration:
  kubeletExtraArgs:
  - name: cloud-provider
    value: external
",
];

/// The kind config for `kind create cluster --config`: `user` (the text of `deployer.config`), or a
/// control plane and two workers when there is none, with [`PATCHES`] appended to its cluster-wide
/// `kubeadmConfigPatches` (after the user's own, so that ours win for `cloud-provider`).
///
/// Matched upstream:
/// - kubernetes-sigs/cloud-provider-kind `kind.yaml`: kubelet `cloud-provider: "external"` through
///   `InitConfiguration`/`JoinConfiguration` `nodeRegistration.kubeletExtraArgs`, and
///   controller-manager `cloud-provider: "external"` through `ClusterConfiguration`
///   `controllerManager.extraArgs`; nodes: a control plane and two workers.
/// - kubernetes-sigs/kind `pkg/internal/patch/resource.go` (`matches`): a patch applies to the
///   documents of its `kind`, and, when it sets `apiVersion`, only to that group/version; and
///   `pkg/internal/patch/kubeadm_merge.go`: against a v1beta4 document, `extraArgs` and
///   `kubeletExtraArgs` lists are merged by `name` (append or replace), so kind's own `node-ip`,
///   `provider-id` and `node-labels` stay. kind#4173 adopts v1beta4 for Kubernetes 1.36.0+, and
///   kind#3847 / kubernetes#135016 recommend exactly this: versioned v1beta3 *and* v1beta4 patches.
/// - kubeadm v1beta4 (kubernetes/website `kubeadm-config.v1beta4.md`): `extraArgs` and
///   `kubeletExtraArgs` are lists of `{name, value}`.
fn kind_config(user: Option<&str>) -> Result<String, String> {
    let mut config = match user {
        None => {
            let mut config = Mapping::new();
            config.insert("kind".into(), "Cluster".into());
            config.insert("apiVersion".into(), "kind.x-k8s.io/v1alpha4".into());
            let node = |role: &str| Value::Mapping(Mapping::from_iter([("role".into(), role.into())]));
            config.insert("nodes".into(), Value::Sequence(vec![node("control-plane"), node("worker"), node("worker")]));
            config
        }
        Some(text) => match serde_yaml_ng::from_str::<Value>(text) {
            Ok(Value::Mapping(config)) => config,
            Ok(Value::Null) => return Err("it is empty".to_owned()),
            Ok(_) => return Err("it is not a YAML mapping".to_owned()),
            Err(e) => return Err(format!("it is not valid YAML: {e}")),
        },
    };
    let field = |key: &str| config.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
    if field("kind") != "Cluster" || !field("apiVersion").starts_with("kind.x-k8s.io/") {
        return Err(format!(
            "it is not a kind cluster config (`kind: Cluster`, `apiVersion: kind.x-k8s.io/v1alpha4`), it has kind `{}` \
             and apiVersion `{}`",
            field("kind"),
            field("apiVersion")
        ));
    }
    let patches = config.entry("kubeadmConfigPatches".into()).or_insert_with(|| Value::Sequence(Vec::new()));
    if patches.is_null() {
        *patches = Value::Sequence(Vec::new());
    }
    let Value::Sequence(patches) = patches else {
        return Err("its `kubeadmConfigPatches` is not a list".to_owned());
    };
    patches.extend(PATCHES.iter().map(|patch| Value::String((*patch).to_owned())));
    serde_yaml_ng::to_string(&Value::Mapping(config)).map_err(|e| format!("it cannot be written back: {e}"))
}

/// A kind cluster named after the run.
pub struct KindDeployer {
    cluster: String,
    /// `deployer.image` as written (may hold placeholders), or `kindest/node:<version>`.
    image: String,
    /// `deployer.config`, resolved against the provider's checkout.
    user_config: Option<PathBuf>,
    artifacts: PathBuf,
    /// The provider's checkout: kind runs there, so relative paths of its config resolve there.
    repo_dir: PathBuf,
    /// The state dir holds the kubeconfig; `PATH` for finding and running `kind`.
    tooling: Tooling,
    /// `kind create cluster` was started, so there may be something to delete.
    create_started: bool,
}

impl KindDeployer {
    pub const DEFAULT_TIMEOUTS: Timeouts = Timeouts {
        up: Duration::from_secs(15 * 60),
        down: Duration::from_secs(5 * 60),
        dump_logs: Duration::from_secs(5 * 60),
        api: Duration::from_secs(30),
    };

    /// From `deployer: {kind: kind, config, image}` and the run: the cluster's name, the Kubernetes
    /// version, the artifacts dir and the provider's checkout (`config` is relative to it).
    pub fn new(
        config: Option<&Path>,
        image: Option<&str>,
        cluster: &str,
        kubernetes_version: &KubernetesVersion,
        artifacts: &Path,
        repo_dir: &Path,
    ) -> Self {
        KindDeployer {
            cluster: cluster.to_owned(),
            image: image.map_or_else(|| format!("kindest/node:{kubernetes_version}"), str::to_owned),
            user_config: config.map(|c| repo_dir.join(c)),
            artifacts: artifacts.to_path_buf(),
            repo_dir: repo_dir.to_path_buf(),
            tooling: Tooling::new(
                cli_support::roots::state_root().join("kind").join(cluster),
                Self::DEFAULT_TIMEOUTS,
                Vars::from([(Placeholder::KubernetesVersion, kubernetes_version.to_string())]),
            ),
            create_started: false,
        }
    }

    /// More placeholder values for `image` (e.g. `{provider_version}`); `{cluster}` and
    /// `{kubeconfig}` are the deployer's own.
    pub fn with_vars(self, vars: Vars) -> Self {
        KindDeployer { tooling: self.tooling.with_vars(vars), ..self }
    }

    pub fn with_timeouts(self, timeouts: Timeouts) -> Self {
        KindDeployer { tooling: self.tooling.with_timeouts(timeouts), ..self }
    }

    /// Where the kubeconfig goes; default `<state root>/kind/<cluster>`.
    pub fn with_state_dir(self, dir: &Path) -> Self {
        KindDeployer { tooling: self.tooling.with_state_dir(dir), ..self }
    }

    /// The `PATH` to find and run `kind` with, instead of the harness's.
    pub fn with_search_path(self, path: impl Into<OsString>) -> Self {
        KindDeployer { tooling: self.tooling.with_search_path(path), ..self }
    }

    fn kubeconfig_path(&self) -> PathBuf {
        self.tooling.state_dir.join("kubeconfig")
    }

    fn config_path(&self) -> PathBuf {
        self.artifacts.join("deploy").join("kind-config.yaml")
    }

    fn image(&self) -> Result<String, DeployError> {
        let mut vars = self.tooling.vars.clone();
        vars.extend(self.vars());
        template::render(&self.image, &vars).map_err(|e| other(format!("deployer.image `{}`: {e}", self.image)))
    }

    fn create_args(&self, image: &str) -> Vec<String> {
        let mut args = vec!["create".into(), "cluster".into(), "--name".into(), self.cluster.clone()];
        args.extend(["--image".into(), image.to_owned()]);
        args.extend(["--config".into(), self.config_path().display().to_string()]);
        args.extend(["--kubeconfig".into(), self.kubeconfig_path().display().to_string()]);
        args.extend(["--wait".into(), KIND_WAIT.into()]);
        args
    }

    fn delete_args(&self) -> Vec<String> {
        let kubeconfig = self.kubeconfig_path().display().to_string();
        vec![
            "delete".into(),
            "cluster".into(),
            "--name".into(),
            self.cluster.clone(),
            "--kubeconfig".into(),
            kubeconfig,
        ]
    }

    fn export_logs_args(&self, dir: &Path) -> Vec<String> {
        vec!["export".into(), "logs".into(), dir.display().to_string(), "--name".into(), self.cluster.clone()]
    }

    fn invocation(&self, step: &str, args: Vec<String>, timeout: Duration) -> command::Invocation<'_> {
        let log = self.artifacts.join("deploy").join(format!("kind-{step}.log"));
        self.tooling.invocation(PROGRAM, args, &self.repo_dir, log, timeout)
    }

    fn write_config(&self) -> Result<(), DeployError> {
        let user = match &self.user_config {
            Some(path) => Some(std::fs::read_to_string(path).map_err(|e| {
                let path = path.display();
                other(format!(
                    "cannot read the kind config {path} (deployer.config): {e}; \
                     fix the path, relative to the provider's checkout"
                ))
            })?),
            None => None,
        };
        let config = kind_config(user.as_deref()).map_err(|why| match &self.user_config {
            Some(path) => other(format!("the kind config {} (deployer.config) cannot be used: {why}", path.display())),
            None => other(format!("cannot generate a kind config: {why}")),
        })?;
        let path = self.config_path();
        create_dir(path.parent().expect("a file in a dir"))?;
        std::fs::write(&path, config).map_err(|e| other(format!("cannot write {}: {e}", path.display())))
    }
}

fn other(message: String) -> DeployError {
    DeployError::Other { deployer: DEPLOYER.to_owned(), message }
}

fn create_dir(dir: &Path) -> Result<(), DeployError> {
    std::fs::create_dir_all(dir).map_err(|e| other(format!("cannot create {}: {e}", dir.display())))
}

fn missing() -> DeployError {
    DeployError::MissingProgram { program: PROGRAM.to_owned(), hint: INSTALL_HINT.to_owned() }
}

#[async_trait]
impl Deployer for KindDeployer {
    fn name(&self) -> String {
        DEPLOYER.to_owned()
    }

    async fn up(&mut self) -> Result<(), DeployError> {
        let up_error = |message| DeployError::Up { deployer: DEPLOYER.to_owned(), message };
        if self.tooling.find(PROGRAM).is_none() {
            return Err(missing());
        }
        let image = self.image()?;
        self.write_config()?;
        create_dir(&self.tooling.state_dir)?;
        let kubeconfig = self.kubeconfig_path();
        // A kubeconfig left by an earlier cluster of this name must not pass for this one's.
        let _ = std::fs::remove_file(&kubeconfig);
        self.create_started = true;
        let invocation = self.invocation("create-cluster", self.create_args(&image), self.tooling.timeouts.up);
        if let Err(failure) = command::run(&invocation).await {
            let hint = if matches!(&failure, command::Failure::Exited { tail, .. } if tail.contains("already exist")) {
                format!(
                    "a kind cluster named {0} already exists: delete it with `kind delete cluster --name {0}`",
                    self.cluster
                )
            } else {
                "check that Docker runs (`docker info`) and that the node image exists".to_owned()
            };
            return Err(match failure {
                command::Failure::Missing => missing(),
                failure => up_error(invocation.describe(&failure, &hint)),
            });
        }
        existing::check_cluster(&kubeconfig, self.tooling.timeouts.api)
            .await
            .map(|_| ())
            .map_err(|why| up_error(format!("`kind create cluster` succeeded but the cluster does not answer: {why}")))
    }

    async fn down(&mut self) -> Result<(), DeployError> {
        if !self.create_started {
            tracing::debug!("kind: no `kind create cluster` was started for {}, nothing to delete", self.cluster);
            return Ok(());
        }
        let invocation = self.invocation("delete-cluster", self.delete_args(), self.tooling.timeouts.down);
        match command::run(&invocation).await {
            Ok(()) => {
                let _ = std::fs::remove_file(self.kubeconfig_path());
                Ok(())
            }
            Err(command::Failure::Missing) => Err(missing()),
            Err(failure) => Err(DeployError::Down {
                deployer: DEPLOYER.to_owned(),
                message: invocation.describe(
                    &failure,
                    &format!("delete it by hand with `kind delete cluster --name {}`", self.cluster),
                ),
            }),
        }
    }

    fn keep(&mut self) -> String {
        format!("kind delete cluster --name {}", self.cluster)
    }

    async fn is_up(&self) -> Result<bool, DeployError> {
        let kubeconfig = self.kubeconfig_path();
        Ok(kubeconfig.is_file() && existing::check_cluster(&kubeconfig, self.tooling.timeouts.api).await.is_ok())
    }

    fn kubeconfig(&self) -> Option<PathBuf> {
        Some(self.kubeconfig_path()).filter(|path| path.is_file())
    }

    async fn dump_logs(&self, dir: &Path) -> Result<(), DeployError> {
        create_dir(dir)?;
        let invocation = self.invocation("export-logs", self.export_logs_args(dir), self.tooling.timeouts.dump_logs);
        command::run(&invocation).await.map_err(|failure| match failure {
            command::Failure::Missing => missing(),
            failure => other(invocation.describe(&failure, "the cluster's logs are incomplete")),
        })
    }

    fn vars(&self) -> Vars {
        Vars::from([
            (Placeholder::Cluster, self.cluster.clone()),
            (Placeholder::Kubeconfig, self.kubeconfig_path().display().to_string()),
        ])
    }
}

#[cfg(test)]
mod tests;

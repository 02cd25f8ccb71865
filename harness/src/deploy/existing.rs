//! The `existing` deployer: a cluster someone else runs, reached through a kubeconfig.
//!
//! The kubeconfig is `deployer.kubeconfig` (relative to the working directory; a leading `~/` is
//! the home dir), else `$KUBECONFIG`, else `~/.kube/config`. A `$KUBECONFIG` listing several files
//! is merged as kubectl does (the first to set a value wins; missing files are skipped) into one
//! file under the state dir, so that `{kubeconfig}` is a single path.
//!
//! - `up` checks that the API server answers `GET /version` within the API timeout and that nodes
//!   are registered; it creates nothing.
//! - `down` does nothing: the cluster is not the harness's to tear down.
//! - `dump_logs` writes what `kubectl cluster-info dump` would, cheaply, through the API:
//!   `version.json`, `nodes.json`, `kube-system/{pods,events,services,daemonsets,deployments}.json`
//!   and `kube-system/<pod>/logs.txt` (the last [`LOG_TAIL_LINES`] lines of each container, and of
//!   its previous instance when it restarted).
//! - `vars`: `{cluster}` is the kubeconfig's current context, `{kubeconfig}` its path.
//!
//! The API helpers ([`check_cluster`], [`dump_cluster_info`]) serve the `kind` and `kubetest2`
//! deployers too.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Event, Node, Pod, Service};
use k8s_openapi::apimachinery::pkg::version::Info;
use kube::api::{Api, ListParams, LogParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::command::Timeouts;
use super::{DeployError, Deployer};
use config::template::{Placeholder, Vars};

const DEPLOYER: &str = "existing";

/// The lines of each container's log [`dump_cluster_info`] keeps.
pub const LOG_TAIL_LINES: i64 = 5000;

/// Where the kubeconfig came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    Configured,
    Env,
    Merged(Vec<PathBuf>),
    Home,
}

impl Source {
    fn describe(&self) -> String {
        match self {
            Source::Configured => "deployer.kubeconfig".to_owned(),
            Source::Env => "$KUBECONFIG".to_owned(),
            Source::Merged(paths) => format!(
                "$KUBECONFIG, merged from {}",
                paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            ),
            Source::Home => "the default ~/.kube/config".to_owned(),
        }
    }
}

/// Which kubeconfig to use: `configured`, else the files of `$KUBECONFIG` (`env`), else
/// `~/.kube/config`. Several files in `$KUBECONFIG` come back as [`Source::Merged`], to be merged.
fn locate(
    configured: Option<&Path>,
    env: Option<OsString>,
    home: Option<PathBuf>,
    cwd: &Path,
) -> Result<(PathBuf, Source), String> {
    if let Some(path) = configured {
        let path = match (path.strip_prefix("~"), &home) {
            (Ok(rest), Some(home)) => home.join(rest),
            _ => cwd.join(path),
        };
        return Ok((path, Source::Configured));
    }
    let listed: Vec<PathBuf> =
        env.iter().flat_map(std::env::split_paths).filter(|p| !p.as_os_str().is_empty()).map(|p| cwd.join(p)).collect();
    match listed.len() {
        0 => {}
        1 => return Ok((listed.into_iter().next().expect("one"), Source::Env)),
        _ => {
            let present: Vec<PathBuf> = listed.into_iter().filter(|p| p.exists()).collect();
            return match present.len() {
                0 => Err("none of the files $KUBECONFIG lists exists".to_owned()),
                1 => Ok((present.into_iter().next().expect("one"), Source::Env)),
                _ => Ok((PathBuf::new(), Source::Merged(present))),
            };
        }
    }
    let home = home.ok_or("there is no home dir to find ~/.kube/config in")?;
    Ok((home.join(".kube").join("config"), Source::Home))
}

/// Merges `paths` as kubectl does and writes the result, private, into `dir`.
fn write_merged(paths: &[PathBuf], dir: &Path) -> Result<PathBuf, String> {
    use sha2::Digest;
    use std::os::unix::fs::OpenOptionsExt;
    let mut merged = Kubeconfig::default();
    for path in paths {
        let next = Kubeconfig::read_from(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        merged = merged.merge(next).map_err(|e| format!("cannot merge {}: {e}", path.display()))?;
    }
    let text = serde_yaml_ng::to_string(&merged).map_err(|e| format!("cannot write the merged kubeconfig: {e}"))?;
    let key: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let digest = hex::encode(sha2::Sha256::digest(key.join("\n").as_bytes()));
    let file = dir.join(format!("kubeconfig-{}", &digest[..12]));
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let temporary = dir.join(format!(".kubeconfig-{}.{}", &digest[..12], std::process::id()));
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut out =
            std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&temporary)?;
        out.write_all(text.as_bytes())?;
        std::fs::rename(&temporary, &file)
    };
    write().map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    Ok(file)
}

/// A client for the cluster of a kubeconfig, and the names to give it in messages.
pub(crate) struct Connection {
    pub client: Client,
    pub server: String,
    pub context: Option<String>,
}

/// A client for `kubeconfig`'s current context, whose requests time out after `timeout`.
pub(crate) async fn connect(kubeconfig: &Path, timeout: Duration) -> Result<Connection, String> {
    let bad = |e: kube::config::KubeconfigError| format!("kubeconfig {}: {}", kubeconfig.display(), one_line(&e));
    let file = Kubeconfig::read_from(kubeconfig).map_err(bad)?;
    let context = file.current_context.clone();
    let mut config = Config::from_custom_kubeconfig(file, &KubeConfigOptions::default()).await.map_err(bad)?;
    config.connect_timeout = Some(timeout);
    config.read_timeout = Some(timeout);
    config.write_timeout = Some(timeout);
    let server = config.cluster_url.to_string();
    let client = Client::try_from(config)
        .map_err(|e| format!("kubeconfig {}: no client for {server}: {}", kubeconfig.display(), one_line(&e)))?;
    Ok(Connection { client, server, context })
}

fn one_line(error: &dyn std::fmt::Display) -> String {
    error.to_string().split_whitespace().collect::<Vec<_>>().join(" ")
}

async fn within<T, E: std::fmt::Display>(
    timeout: Duration,
    what: &str,
    call: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(format!("{what}: {}", one_line(&e))),
        Err(_) => Err(format!("{what}: no answer within {}", humantime::format_duration(timeout))),
    }
}

/// What [`check_cluster`] found.
#[derive(Debug, Clone)]
pub(crate) struct ClusterInfo {
    pub server: String,
    pub context: Option<String>,
    pub version: Info,
}

/// Checks that the API server of `kubeconfig` answers `GET /version` and has nodes registered;
/// the error is one line naming the kubeconfig and the server.
pub(crate) async fn check_cluster(kubeconfig: &Path, timeout: Duration) -> Result<ClusterInfo, String> {
    let connection = connect(kubeconfig, timeout).await?;
    let Connection { client, server, context } = connection;
    let at = || format!("the API server {server} of kubeconfig {}", kubeconfig.display());
    let version = within(timeout, "GET /version", client.apiserver_version())
        .await
        .map_err(|why| format!("{} does not answer ({why})", at()))?;
    let nodes = within(timeout, "listing nodes", Api::<Node>::all(client).list(&ListParams::default().limit(1)))
        .await
        .map_err(|why| format!("{} answers /version but not a node list ({why})", at()))?;
    if nodes.items.is_empty() {
        return Err(format!("{} has no nodes registered; the suites need at least one", at()));
    }
    Ok(ClusterInfo { server, context, version })
}

/// Writes the cluster's state as `kubectl cluster-info dump --output-directory dir` lays it out,
/// for kube-system: JSON lists and the tail of each container's log. Fails on the first list the
/// API refuses; a container whose log cannot be read gets the reason in `logs.txt` instead.
pub(crate) async fn dump_cluster_info(kubeconfig: &Path, dir: &Path, timeout: Duration) -> Result<(), String> {
    use futures::StreamExt;
    const NAMESPACE: &str = "kube-system";
    let Connection { client, .. } = connect(kubeconfig, timeout).await?;
    let namespace_dir = dir.join(NAMESPACE);
    std::fs::create_dir_all(&namespace_dir).map_err(|e| format!("cannot create {}: {e}", namespace_dir.display()))?;
    let write = |path: PathBuf, bytes: Vec<u8>| {
        std::fs::write(&path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
    };

    let version = within(timeout, "GET /version", client.apiserver_version()).await?;
    write(dir.join("version.json"), pretty_json(&version))?;
    let all = ListParams::default();
    let nodes = within(timeout, "listing nodes", Api::<Node>::all(client.clone()).list(&all)).await?;
    write(dir.join("nodes.json"), pretty_json(&nodes))?;
    let events =
        within(timeout, "listing events", Api::<Event>::namespaced(client.clone(), NAMESPACE).list(&all)).await?;
    write(namespace_dir.join("events.json"), pretty_json(&events))?;
    let services =
        within(timeout, "listing services", Api::<Service>::namespaced(client.clone(), NAMESPACE).list(&all)).await?;
    write(namespace_dir.join("services.json"), pretty_json(&services))?;
    let daemonsets =
        within(timeout, "listing daemonsets", Api::<DaemonSet>::namespaced(client.clone(), NAMESPACE).list(&all))
            .await?;
    write(namespace_dir.join("daemonsets.json"), pretty_json(&daemonsets))?;
    let deployments =
        within(timeout, "listing deployments", Api::<Deployment>::namespaced(client.clone(), NAMESPACE).list(&all))
            .await?;
    write(namespace_dir.join("deployments.json"), pretty_json(&deployments))?;
    let pods_api = Api::<Pod>::namespaced(client, NAMESPACE);
    let pods = within(timeout, "listing pods", pods_api.list(&all)).await?;
    write(namespace_dir.join("pods.json"), pretty_json(&pods))?;

    // The logs, a few pods at a time.
    let logs = pods.items.into_iter().map(|pod| {
        let pods_api = pods_api.clone();
        async move {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let statuses = pod.status.as_ref().and_then(|s| s.container_statuses.clone()).unwrap_or_default();
            let mut text = String::new();
            for container in pod.spec.iter().flat_map(|spec| &spec.containers) {
                let restarted = statuses.iter().any(|s| s.name == container.name && s.restart_count > 0);
                for previous in [true, false] {
                    if previous && !restarted {
                        continue;
                    }
                    let which = if previous { "previous container" } else { "container" };
                    let params = LogParams {
                        container: Some(container.name.clone()),
                        tail_lines: Some(LOG_TAIL_LINES),
                        previous,
                        ..LogParams::default()
                    };
                    let log = within(timeout, "reading the log", pods_api.logs(&name, &params))
                        .await
                        .unwrap_or_else(|why| format!("(no log: {why})\n"));
                    let header = format!("{which} {} of pod {NAMESPACE}/{name}", container.name);
                    text.push_str(&format!("==== START logs for {header} ====\n{log}"));
                    if !log.ends_with('\n') {
                        text.push('\n');
                    }
                    text.push_str(&format!("==== END logs for {header} ====\n"));
                }
            }
            (name, text)
        }
    });
    let logs: Vec<(String, String)> = futures::stream::iter(logs).buffer_unordered(4).collect().await;
    for (name, text) in logs {
        let pod_dir = namespace_dir.join(&name);
        std::fs::create_dir_all(&pod_dir).map_err(|e| format!("cannot create {}: {e}", pod_dir.display()))?;
        write(pod_dir.join("logs.txt"), text.into_bytes())?;
    }
    Ok(())
}

fn pretty_json<T: serde::Serialize>(value: &T) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}").into_bytes());
    bytes.push(b'\n');
    bytes
}

/// A cluster that is already there.
pub struct ExistingDeployer {
    kubeconfig: PathBuf,
    source: Source,
    /// The kubeconfig's current context.
    context: Option<String>,
    timeouts: Timeouts,
}

impl ExistingDeployer {
    pub const DEFAULT_TIMEOUTS: Timeouts = Timeouts {
        up: Duration::from_secs(30),
        down: Duration::ZERO,
        dump_logs: Duration::from_secs(5 * 60),
        api: Duration::from_secs(30),
    };

    /// From `deployer: {kind: existing, kubeconfig}`: finds and reads the kubeconfig. Fails, saying
    /// which file it tried and how to give another, when there is none or it cannot be read.
    pub fn new(kubeconfig: Option<&Path>) -> Result<Self, DeployError> {
        let cwd = std::env::current_dir().unwrap_or_default();
        Self::locate(
            kubeconfig,
            std::env::var_os("KUBECONFIG"),
            dirs::home_dir(),
            &cwd,
            &cli_support::roots::state_root(),
        )
    }

    fn locate(
        configured: Option<&Path>,
        env: Option<OsString>,
        home: Option<PathBuf>,
        cwd: &Path,
        state_root: &Path,
    ) -> Result<Self, DeployError> {
        const WHAT_TO_DO: &str =
            "set `deployer.kubeconfig` in providers.yaml, or $KUBECONFIG, to the cluster's kubeconfig";
        let (mut path, source) =
            locate(configured, env, home, cwd).map_err(|why| other(format!("{why}; {WHAT_TO_DO}")))?;
        if let Source::Merged(paths) = &source {
            path = write_merged(paths, &state_root.join("existing"))
                .map_err(|why| other(format!("{why}; {WHAT_TO_DO}")))?;
        }
        let file = Kubeconfig::read_from(&path).map_err(|e| {
            other(format!("kubeconfig {} ({}): {}; {WHAT_TO_DO}", path.display(), source.describe(), one_line(&e)))
        })?;
        let context = file.current_context.clone();
        if context.is_none() {
            return Err(other(format!(
                "kubeconfig {} ({}) has no current-context; \
                 set one with `kubectl --kubeconfig {} config use-context NAME`",
                path.display(),
                source.describe(),
                path.display()
            )));
        }
        Ok(ExistingDeployer { kubeconfig: path, source, context, timeouts: Self::DEFAULT_TIMEOUTS })
    }

    /// `up` and `is_up` use `api`; `dump_logs` uses `dump_logs`.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }
}

fn other(message: String) -> DeployError {
    DeployError::Other { deployer: DEPLOYER.to_owned(), message }
}

#[async_trait]
impl Deployer for ExistingDeployer {
    fn name(&self) -> String {
        DEPLOYER.to_owned()
    }

    async fn up(&mut self) -> Result<(), DeployError> {
        let info = check_cluster(&self.kubeconfig, self.timeouts.api).await.map_err(|why| DeployError::Up {
            deployer: DEPLOYER.to_owned(),
            message: format!(
                "{why} (kubeconfig from {}); check that the cluster runs and the credentials are valid: \
                 `kubectl --kubeconfig {} get nodes`",
                self.source.describe(),
                self.kubeconfig.display()
            ),
        })?;
        tracing::info!(
            "existing cluster {} at {} answers, Kubernetes {}",
            info.context.as_deref().unwrap_or("?"),
            info.server,
            info.version.git_version
        );
        Ok(())
    }

    async fn down(&mut self) -> Result<(), DeployError> {
        tracing::debug!(
            "existing: leaving cluster {} ({}) as it is: it is not the harness's to tear down",
            self.context.as_deref().unwrap_or("?"),
            self.kubeconfig.display()
        );
        Ok(())
    }

    fn keep(&mut self) -> String {
        "nothing to bring down: the harness never tears an existing cluster down".into()
    }

    async fn is_up(&self) -> Result<bool, DeployError> {
        Ok(check_cluster(&self.kubeconfig, self.timeouts.api).await.is_ok())
    }

    fn kubeconfig(&self) -> Option<PathBuf> {
        Some(self.kubeconfig.clone())
    }

    async fn dump_logs(&self, dir: &Path) -> Result<(), DeployError> {
        let dump = dump_cluster_info(&self.kubeconfig, dir, self.timeouts.api);
        match tokio::time::timeout(self.timeouts.dump_logs, dump).await {
            Ok(result) => result.map_err(|why| other(format!("the cluster's logs are incomplete: {why}"))),
            Err(_) => Err(other(format!(
                "dumping the cluster's logs took more than {} and was stopped; what was written is in {}",
                humantime::format_duration(self.timeouts.dump_logs),
                dir.display()
            ))),
        }
    }

    fn vars(&self) -> Vars {
        Vars::from([
            (Placeholder::Cluster, self.context.clone().unwrap_or_default()),
            (Placeholder::Kubeconfig, self.kubeconfig.display().to_string()),
        ])
    }
}

#[cfg(test)]
mod tests;

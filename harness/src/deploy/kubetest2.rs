//! The `kubetest2` deployer: passes through to any kubetest2 deployer binary, `kubetest2-<deployer>`
//! on `PATH`, the way `kubetest2 <deployer> ...` does.
//!
//! The contract, from kubernetes-sigs/kubetest2:
//! - `pkg/app/shim/shim.go` and `pkg/app/shim/deployers.go`: `kubetest2 <deployer> args...` looks up
//!   `kubetest2-<deployer>` on `PATH` and execs it with the remaining args; the harness runs that
//!   binary directly.
//! - `pkg/app/cmd.go`: the common flags `--up`, `--down`, `--build`, `--test`, `--run-id` (default
//!   `$PROW_JOB_ID`, else a new UUID), `--rundir-in-artifacts`; args after a bare `--` go to the
//!   tester. `pkg/artifacts/paths.go`: `--artifacts` (default `$ARTIFACTS`, else `./_artifacts`) and
//!   the run dir `$KUBETEST2_RUN_DIR` (default `./_rundir`); `RunDir()` is `<run dir>/<run id>`.
//! - `pkg/app/app.go` (`RealMain`): `--up` calls the deployer's `Up`, `--down` its `Down`; a
//!   SIGINT/SIGTERM during `--up` makes it call `Down` itself. The deployer's `Kubeconfig()` is only
//!   handed to a kubetest2 tester (as `$KUBECONFIG`), and no flag runs `DumpClusterLogs` (deployers
//!   call it from their `Up`/`Down`): a passthrough has to find the kubeconfig on disk, and dumps
//!   the cluster through its API.
//!
//! So `up` runs `kubetest2-<deployer> --up --artifacts=<artifacts>/kubetest2-<deployer>
//! --run-id=<id> <args...>` with `ARTIFACTS` set to the same dir and `KUBETEST2_RUN_DIR` to a dir
//! under the state dir (the run dir holds kubeconfigs: it is not published), in the provider's
//! checkout. `down` runs the same with `--down` instead (and without `--build`); the run id is the
//! same for both, as deployers name their resources after it (kubetest2-gce's instance prefix).
//! The run id is the args' own `--run-id`, else `$PROW_JOB_ID`, else a new UUID-shaped id.
//!
//! After `--up` the kubeconfig is the first file that exists of:
//! 1. `{kubeconfig}` (`<state>/kubeconfig`), when `args` use that placeholder, e.g.
//!    `--kubeconfig={kubeconfig}` for kubetest2-kind (its `--kubeconfig` flag);
//! 2. the value of a `--kubeconfig` flag in `args` (relative to the provider's checkout);
//! 3. `<run dir>/<run id>/kubetest2-kubeconfig` (kubetest2-gce: `filepath.Join(opts.RunDir(),
//!    "kubetest2-kubeconfig")` in `kubetest2-gce/deployer/deployer.go`), then
//!    `<run dir>/<run id>/kubeconfig`;
//! 4. `<kubetest2 artifacts>/kubetest2-kubeconfig` (older kubetest2-gce, in `ArtifactsDir()`), then
//!    `<kubetest2 artifacts>/kubeconfig`;
//! 5. the first file of `$KUBECONFIG`, else `~/.kube/config` (kubetest2-kind's `Kubeconfig()`
//!    default in `kubetest2-kind/deployer/deployer.go`; gcloud-based deployers write there too).
//!
//! Then, as for the other deployers, the API server must answer and have nodes.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;

use super::command::{self, Timeouts, Tooling};
use super::{DeployError, Deployer, existing};
use config::KubernetesVersion;
use config::template::{self, Placeholder, Vars};

/// Flags the harness sets itself, refused in `deployer.args`.
const OWN_FLAGS: [(&str, &str); 6] = [
    ("--up", "the harness adds it for `up`"),
    ("--down", "the harness adds it for `down`"),
    ("--test", "the harness runs the suites itself"),
    ("--artifacts", "the harness sets it to <artifacts>/kubetest2-<deployer>"),
    ("--rundir", "the harness sets $KUBETEST2_RUN_DIR under its state dir"),
    ("--rundir-in-artifacts", "the run dir holds kubeconfigs and must not be published"),
];

/// `value` of `--name=value` or `--name value` among `args` (before a bare `--`).
fn flag_value(args: &[String], name: &str) -> Option<String> {
    let mut args = args.iter().take_while(|a| *a != "--");
    while let Some(arg) = args.next() {
        if let Some(value) = arg.strip_prefix(name).and_then(|rest| rest.strip_prefix('=')) {
            return Some(value.to_owned());
        }
        if arg == name {
            return args.next().cloned();
        }
    }
    None
}

fn is_flag(arg: &str, name: &str) -> bool {
    arg == name || arg.strip_prefix(name).is_some_and(|rest| rest.starts_with('='))
}

/// A fresh kubetest2 run id: `$PROW_JOB_ID` (as kubetest2 itself), else UUID-shaped hex unique to
/// this cluster, process and moment.
fn fresh_run_id(cluster: &str) -> String {
    if let Some(id) = std::env::var("PROW_JOB_ID").ok().filter(|id| !id.is_empty()) {
        return id;
    }
    use sha2::Digest;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let seed = format!("{cluster}/{}/{}", std::process::id(), now.as_nanos());
    let hex = hex::encode(sha2::Sha256::digest(seed.as_bytes()));
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// Where kubectl would look: the first file of `$KUBECONFIG` (`env`) that exists, relative to `cwd`,
/// else `~/.kube/config`.
fn default_kubeconfig(env: Option<OsString>, home: Option<PathBuf>, cwd: &Path) -> Option<PathBuf> {
    let listed = env.iter().flat_map(std::env::split_paths).filter(|p| !p.as_os_str().is_empty()).map(|p| cwd.join(p));
    listed.into_iter().find(|p| p.exists()).or_else(|| home.map(|home| home.join(".kube").join("config")))
}

/// `kubetest2-<deployer>`.
pub struct Kubetest2Deployer {
    deployer: String,
    /// `deployer.args` as written, with placeholders.
    args: Vec<String>,
    cluster: String,
    artifacts: PathBuf,
    repo_dir: PathBuf,
    default_run_id: String,
    /// The state dir holds the run dir and `{kubeconfig}`; the vars fill in `args`.
    tooling: Tooling,
    up_started: bool,
    /// The first file of `$KUBECONFIG`, else `~/.kube/config`: the last place to look.
    default_kubeconfig: Option<PathBuf>,
    /// Found after `up`.
    kubeconfig: Option<PathBuf>,
}

impl Kubetest2Deployer {
    pub const DEFAULT_TIMEOUTS: Timeouts = Timeouts {
        up: Duration::from_secs(60 * 60),
        down: Duration::from_secs(30 * 60),
        dump_logs: Duration::from_secs(5 * 60),
        api: Duration::from_secs(30),
    };

    /// From `deployer: {kind: kubetest2, deployer, args}` and the run: the cluster's name, the
    /// Kubernetes version, the artifacts dir and the provider's checkout (where it runs). Refuses
    /// args that set what the harness sets (`--up`, `--down`, `--test`, `--artifacts`, `--rundir`).
    pub fn new(
        deployer: &str,
        args: &[String],
        cluster: &str,
        kubernetes_version: &KubernetesVersion,
        artifacts: &Path,
        repo_dir: &Path,
    ) -> Result<Self, DeployError> {
        let program = format!("kubetest2-{deployer}");
        for arg in args.iter().take_while(|a| *a != "--") {
            if let Some((flag, why)) = OWN_FLAGS.iter().find(|(flag, _)| is_flag(arg, flag)) {
                return Err(DeployError::Other {
                    deployer: program,
                    message: format!("remove `{arg}` from deployer.args: {why} (`{flag}`)"),
                });
            }
        }
        let vars = Vars::from([
            (Placeholder::KubernetesVersion, kubernetes_version.to_string()),
            (Placeholder::Artifacts, artifacts.display().to_string()),
            (Placeholder::RepoDir, repo_dir.display().to_string()),
        ]);
        Ok(Kubetest2Deployer {
            deployer: deployer.to_owned(),
            args: args.to_vec(),
            cluster: cluster.to_owned(),
            artifacts: artifacts.to_path_buf(),
            repo_dir: repo_dir.to_path_buf(),
            default_run_id: fresh_run_id(cluster),
            tooling: Tooling::new(
                cli_support::roots::state_root().join("kubetest2").join(cluster),
                Self::DEFAULT_TIMEOUTS,
                vars,
            ),
            up_started: false,
            default_kubeconfig: default_kubeconfig(std::env::var_os("KUBECONFIG"), dirs::home_dir(), repo_dir),
            kubeconfig: None,
        })
    }

    /// More placeholder values for `args` (e.g. `{provider_version}`, `{ccm_binary}`).
    pub fn with_vars(self, vars: Vars) -> Self {
        Kubetest2Deployer { tooling: self.tooling.with_vars(vars), ..self }
    }

    pub fn with_timeouts(self, timeouts: Timeouts) -> Self {
        Kubetest2Deployer { tooling: self.tooling.with_timeouts(timeouts), ..self }
    }

    /// Where the run dir and `{kubeconfig}` go; default `<state root>/kubetest2/<cluster>`.
    pub fn with_state_dir(self, dir: &Path) -> Self {
        Kubetest2Deployer { tooling: self.tooling.with_state_dir(dir), ..self }
    }

    /// The `PATH` to find and run `kubetest2-<deployer>` with, instead of the harness's.
    pub fn with_search_path(self, path: impl Into<OsString>) -> Self {
        Kubetest2Deployer { tooling: self.tooling.with_search_path(path), ..self }
    }

    /// The run id both `--up` and `--down` get.
    pub fn run_id(&self) -> String {
        self.rendered_args()
            .ok()
            .and_then(|args| flag_value(&args, "--run-id"))
            .unwrap_or_else(|| self.default_run_id.clone())
    }

    fn program(&self) -> String {
        format!("kubetest2-{}", self.deployer)
    }

    fn planned_kubeconfig(&self) -> PathBuf {
        self.tooling.state_dir.join("kubeconfig")
    }

    fn run_dir(&self) -> PathBuf {
        self.tooling.state_dir.join("rundir")
    }

    fn kubetest2_artifacts(&self) -> PathBuf {
        self.artifacts.join(self.program())
    }

    fn rendered_args(&self) -> Result<Vec<String>, DeployError> {
        let mut vars = self.tooling.vars.clone();
        vars.insert(Placeholder::Cluster, self.cluster.clone());
        vars.insert(Placeholder::Kubeconfig, self.planned_kubeconfig().display().to_string());
        self.args
            .iter()
            .map(|arg| template::render(arg, &vars))
            .collect::<Result<_, _>>()
            .map_err(|e| self.other(format!("deployer.args: {e}")))
    }

    /// The argv after the program: the harness's flags first (so that a `--` in `args` cannot
    /// swallow them), then `args`, without `--build` when tearing down.
    fn argv(&self, up: bool) -> Result<Vec<String>, DeployError> {
        let args = self.rendered_args()?;
        let mut argv = vec![if up { "--up" } else { "--down" }.to_owned()];
        argv.push(format!("--artifacts={}", self.kubetest2_artifacts().display()));
        if flag_value(&args, "--run-id").is_none() {
            argv.push(format!("--run-id={}", self.default_run_id));
        }
        let mut tester_args = false;
        for arg in args {
            tester_args |= arg == "--";
            if up || tester_args || !is_flag(&arg, "--build") {
                argv.push(arg);
            }
        }
        Ok(argv)
    }

    fn env(&self) -> Vec<(&'static str, OsString)> {
        vec![("ARTIFACTS", self.kubetest2_artifacts().into()), ("KUBETEST2_RUN_DIR", self.run_dir().into())]
    }

    /// Where the kubeconfig may be after `--up`, in the order tried (see the module's doc).
    fn kubeconfig_candidates(&self) -> Vec<PathBuf> {
        let mut candidates = Vec::new();
        let uses_placeholder =
            self.args.iter().any(|arg| template::placeholders(arg).is_ok_and(|p| p.contains(&Placeholder::Kubeconfig)));
        if uses_placeholder {
            candidates.push(self.planned_kubeconfig());
        }
        if let Some(flag) = self.rendered_args().ok().and_then(|args| flag_value(&args, "--kubeconfig")) {
            candidates.push(self.repo_dir.join(flag));
        }
        let run_dir = self.run_dir().join(self.run_id());
        candidates.push(run_dir.join("kubetest2-kubeconfig"));
        candidates.push(run_dir.join("kubeconfig"));
        candidates.push(self.kubetest2_artifacts().join("kubetest2-kubeconfig"));
        candidates.push(self.kubetest2_artifacts().join("kubeconfig"));
        candidates.extend(self.default_kubeconfig.clone());
        candidates
    }

    fn invocation<'a>(
        &'a self,
        program: &'a str,
        step: &str,
        args: Vec<String>,
        timeout: Duration,
    ) -> command::Invocation<'a> {
        let log = self.artifacts.join("deploy").join(format!("{}-{step}.log", self.program()));
        command::Invocation { env: self.env(), ..self.tooling.invocation(program, args, &self.repo_dir, log, timeout) }
    }

    /// How to tear the cluster down without the harness.
    fn down_by_hand(&self) -> String {
        format!("run `{} --down --run-id={}` with the same args by hand", self.program(), self.run_id())
    }

    fn other(&self, message: String) -> DeployError {
        DeployError::Other { deployer: self.program(), message }
    }

    fn missing(&self) -> DeployError {
        DeployError::MissingProgram {
            program: self.program(),
            hint: format!(
                "install it with `go install sigs.k8s.io/kubetest2/{0}@latest` (a deployer kept elsewhere comes from \
                 its own repository) and put $(go env GOPATH)/bin on PATH",
                self.program()
            ),
        }
    }

    fn create_dir(&self, dir: &Path) -> Result<(), DeployError> {
        std::fs::create_dir_all(dir).map_err(|e| self.other(format!("cannot create {}: {e}", dir.display())))
    }

    async fn run(
        &self,
        step: &str,
        up: bool,
        timeout: Duration,
        hint: &str,
        error: impl Fn(String) -> DeployError,
    ) -> Result<(), DeployError> {
        let program = self.program();
        let invocation = self.invocation(&program, step, self.argv(up)?, timeout);
        command::run(&invocation).await.map_err(|failure| match failure {
            command::Failure::Missing => self.missing(),
            failure => error(invocation.describe(&failure, hint)),
        })
    }
}

#[async_trait]
impl Deployer for Kubetest2Deployer {
    fn name(&self) -> String {
        self.program()
    }

    async fn up(&mut self) -> Result<(), DeployError> {
        let program = self.program();
        let up_error = |message| DeployError::Up { deployer: program.clone(), message };
        if self.tooling.find(&self.program()).is_none() {
            return Err(self.missing());
        }
        self.argv(true)?;
        for dir in [self.run_dir(), self.kubetest2_artifacts()] {
            self.create_dir(&dir)?;
        }
        // Kubeconfigs an earlier run left in the harness's own dirs must not pass for this cluster's.
        for stale in self.kubeconfig_candidates().iter().filter(|path| path.starts_with(&self.tooling.state_dir)) {
            let _ = std::fs::remove_file(stale);
        }
        self.up_started = true;
        self.kubeconfig = None;
        let hint = format!("its own output says why (it may have logs under {})", self.kubetest2_artifacts().display());
        self.run("up", true, self.tooling.timeouts.up, &hint, &up_error).await?;
        let candidates = self.kubeconfig_candidates();
        let Some(kubeconfig) = candidates.iter().find(|path| path.is_file()).cloned() else {
            let tried = candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
            return Err(up_error(format!(
                "`{} --up` succeeded but no kubeconfig is where the harness looks ({tried}); if the deployer takes a \
                 --kubeconfig flag, add `--kubeconfig={{kubeconfig}}` to deployer.args",
                self.program()
            )));
        };
        tracing::info!("{}: the cluster's kubeconfig is {}", self.program(), kubeconfig.display());
        existing::check_cluster(&kubeconfig, self.tooling.timeouts.api).await.map_err(|why| {
            up_error(format!("`{} --up` succeeded but the cluster does not answer: {why}", self.program()))
        })?;
        self.kubeconfig = Some(kubeconfig);
        Ok(())
    }

    async fn down(&mut self) -> Result<(), DeployError> {
        if !self.up_started {
            tracing::debug!("{}: `--up` never ran for {}, nothing to tear down", self.program(), self.cluster);
            return Ok(());
        }
        let hint = format!("its resources may be left: {}", self.down_by_hand());
        let program = self.program();
        self.run("down", false, self.tooling.timeouts.down, &hint, |message| DeployError::Down {
            deployer: program.clone(),
            message,
        })
        .await?;
        self.kubeconfig = None;
        Ok(())
    }

    fn keep(&mut self) -> String {
        self.down_by_hand()
    }

    async fn is_up(&self) -> Result<bool, DeployError> {
        Ok(match &self.kubeconfig {
            Some(kubeconfig) => existing::check_cluster(kubeconfig, self.tooling.timeouts.api).await.is_ok(),
            None => false,
        })
    }

    fn kubeconfig(&self) -> Option<PathBuf> {
        self.kubeconfig.clone()
    }

    async fn dump_logs(&self, dir: &Path) -> Result<(), DeployError> {
        let Some(kubeconfig) = &self.kubeconfig else {
            return Err(
                self.other(format!("no cluster to dump the logs of: `{} --up` has not brought one up", self.program()))
            );
        };
        let dump = existing::dump_cluster_info(kubeconfig, dir, self.tooling.timeouts.api);
        match tokio::time::timeout(self.tooling.timeouts.dump_logs, dump).await {
            Ok(result) => result.map_err(|why| self.other(format!("the cluster's logs are incomplete: {why}"))),
            Err(_) => Err(self.other(format!(
                "dumping the cluster's logs took more than {} and was stopped; what was written is in {}",
                humantime::format_duration(self.tooling.timeouts.dump_logs),
                dir.display()
            ))),
        }
    }

    fn vars(&self) -> Vars {
        let kubeconfig = self.kubeconfig.clone().unwrap_or_else(|| self.planned_kubeconfig());
        Vars::from([
            (Placeholder::Cluster, self.cluster.clone()),
            (Placeholder::Kubeconfig, kubeconfig.display().to_string()),
        ])
    }
}

#[cfg(test)]
mod tests;

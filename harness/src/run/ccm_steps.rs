//! The CCM steps of a run: Build (cargo for the bundled reference CCM, the run's Kubernetes
//! toolchain for `local-upstream-ccm`, the provider's command otherwise), the deployer it runs on, and Deploy (a process beside the cluster, a manifest, or a
//! command).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use super::{Plan, RunOptions};
use crate::deploy::{self, DeployError, Deployer};
use config::template::{Placeholder, Vars};
use config::{BuildOutput, CcmBuild, CcmDeploy, CommandSpec, Provider};

/// What the Build step produced.
#[derive(Debug, Clone, Default)]
pub struct Built {
    pub binary: Option<PathBuf>,
    pub manifest: Option<PathBuf>,
    /// What the binary says of itself (`--version`), for `finished.json`'s `ccm-version`.
    pub version: Option<String>,
}

pub(super) async fn build(
    provider: &Provider,
    opts: &RunOptions,
    vars: &Vars,
    artifacts: &Path,
) -> Result<Built, String> {
    match &provider.ccm.build {
        CcmBuild::Cargo { package, bin, timeout } => {
            let (package, bin) = (package.clone(), bin.clone());
            let workspace = opts.cargo_workspace.clone();
            let build = tokio::task::spawn_blocking(move || match workspace {
                Some(workspace) => toolchain::workspace::build_binary_in(&workspace, &package, &bin),
                None => toolchain::workspace::build_workspace_binary(&package, &bin),
            });
            let binary = tokio::time::timeout(*timeout, build)
                .await
                .map_err(|_| format!("cargo build did not finish within {}", humantime::format_duration(*timeout)))?
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            let version = binary_version(&binary).await;
            Ok(Built { binary: Some(binary), manifest: None, version })
        }
        CcmBuild::Toolchain { bin, timeout } => {
            let version = vars.get(&config::template::Placeholder::KubernetesVersion).map(String::as_str);
            let release = toolchain::resolve(version).map_err(|e| e.to_string())?;
            let (bin, libraries) = (bin.clone(), opts.ccm_libraries);
            let install = tokio::task::spawn_blocking(move || toolchain::install_ccm(&release, &bin, libraries));
            let binary = tokio::time::timeout(*timeout, install)
                .await
                .map_err(|_| {
                    format!("building the CCM did not finish within {}", humantime::format_duration(*timeout))
                })?
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            let version = binary_version(&binary).await;
            Ok(Built { binary: Some(binary), manifest: None, version })
        }
        CcmBuild::Command { command, output, timeout } => {
            run_command("CCM build", command, vars, &opts.provider_dir, &artifacts.join("ccm-build.log"), *timeout)
                .await?;
            let (path, is_binary) = match output {
                BuildOutput::Binary(path) => (opts.provider_dir.join(path), true),
                BuildOutput::Manifest(path) => (opts.provider_dir.join(path), false),
            };
            if !path.exists() {
                return Err(format!("the build command succeeded but left no {}", path.display()));
            }
            if is_binary {
                let version = binary_version(&path).await;
                Ok(Built { binary: Some(path), manifest: None, version })
            } else {
                Ok(Built { binary: None, manifest: Some(path), version: None })
            }
        }
    }
}

/// The build `built` moved into a directory of its own (`kept`, made now), when it is a binary a
/// provider's build command wrote: the next build (an upgrade run's newer release) writes the
/// same path. Cargo's and the toolchain's builds have a path of their own already.
pub(super) fn keep_aside(
    provider: &Provider,
    built: Built,
    kept: &mut Option<tempfile::TempDir>,
) -> Result<Built, String> {
    let (CcmBuild::Command { .. }, Some(binary)) = (&provider.ccm.build, built.binary.as_ref()) else {
        return Ok(built);
    };
    let dir = tempfile::Builder::new()
        .prefix("harness-ccm-")
        .tempdir()
        .map_err(|e| format!("keeping the CCM build aside: {e}"))?;
    let name = binary.file_name().ok_or_else(|| format!("{} has no file name", binary.display()))?;
    let target = dir.path().join(name);
    std::fs::copy(binary, &target).map_err(|e| format!("copying {} to {}: {e}", binary.display(), target.display()))?;
    *kept = Some(dir);
    Ok(Built { binary: Some(target), ..built })
}

/// The deployer of the run's provider: the local cloud's is served by the reference CCM's binary,
/// the one Build made when it is that one.
pub(super) fn deployer(
    plan: &Plan<'_>,
    opts: &RunOptions,
    built: &Built,
    vars: &Vars,
) -> Result<Box<dyn Deployer>, DeployError> {
    let artifacts = opts.artifacts.join(results::layout::ARTIFACTS);
    let setting = deploy::RunSetting {
        cluster_name: &opts.cluster_name,
        kubernetes: plan.up_version(),
        artifacts: &artifacts,
        provider_dir: &opts.provider_dir,
        vars,
        built_ccm: built.binary.as_deref(),
    };
    deploy::from_config(&plan.provider.deployer, &setting)
}

pub(super) async fn deploy(
    provider: &Provider,
    opts: &RunOptions,
    deployer: &mut dyn Deployer,
    built: &Built,
    vars: &Vars,
) -> Result<(), String> {
    let artifacts = PathBuf::from(vars.get(&Placeholder::Artifacts).cloned().unwrap_or_default());
    match &provider.ccm.deploy {
        CcmDeploy::Process { args, env: _, timeout } => {
            let binary = built.binary.as_ref().ok_or("a process deploy needs a build that produces a binary")?;
            let args: Vec<String> = args
                .iter()
                .map(|a| config::template::render(a, vars))
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?;
            let deployer_name = deployer.name();
            let host = deployer
                .process_host()
                .ok_or_else(|| DeployError::NoProcessHost { deployer: deployer_name }.to_string())?;
            tokio::time::timeout(*timeout, host.start_ccm_process(binary, &args))
                .await
                .map_err(|_| {
                    format!("the CCM did not initialise the nodes within {}", humantime::format_duration(*timeout))
                })?
                .map_err(|e| e.to_string())
        }
        CcmDeploy::Manifest { path, timeout } => {
            let manifest = path.as_ref().map(|p| opts.provider_dir.join(p)).or(built.manifest.clone());
            let manifest = manifest.ok_or("a manifest deploy needs a path or a build that produces a manifest")?;
            let kubeconfig = deployer.kubeconfig().ok_or("the deployer gave no kubeconfig")?;
            let apply = CommandSpec {
                argv: vec![
                    "kubectl".into(),
                    "apply".into(),
                    format!("--kubeconfig={}", kubeconfig.display()),
                    "-f".into(),
                    manifest.display().to_string(),
                ],
                env: BTreeMap::new(),
                dir: None,
            };
            run_command("kubectl apply", &apply, vars, &opts.provider_dir, &artifacts.join("ccm-deploy.log"), *timeout)
                .await
        }
        CcmDeploy::Command { command, timeout } => {
            run_command("CCM deploy", command, vars, &opts.provider_dir, &artifacts.join("ccm-deploy.log"), *timeout)
                .await
        }
    }
}

/// Runs a templated command in `dir` (or its own `dir` below it), output to `log`; a non-zero
/// exit or the timeout is an error carrying the last lines of the output.
async fn run_command(
    what: &str,
    command: &CommandSpec,
    vars: &Vars,
    dir: &Path,
    log: &Path,
    timeout: Duration,
) -> Result<(), String> {
    let (argv, env) = command.render(vars).map_err(|e| format!("{what}: {e}"))?;
    let (program, args) = argv.split_first().ok_or_else(|| format!("{what}: empty command"))?;
    let dir = command.dir.as_ref().map_or(dir.to_path_buf(), |d| dir.join(d));
    let out = std::fs::File::create(log).map_err(|e| format!("{what}: cannot create {}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| format!("{what}: {e}"))?;
    let mut child = cli_support::signals::with_default_signals_async(&mut tokio::process::Command::new(program))
        .args(args)
        .envs(&env)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .kill_on_drop(true)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("{what}: cannot run {program} (in {}): {e}", dir.display()))?;
    let status = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(status) => status.map_err(|e| format!("{what}: {e}"))?,
        Err(_) => {
            if let Some(pid) = child.id() {
                let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::SIGKILL);
            }
            return Err(format!("{what} timed out after {}{}", humantime::format_duration(timeout), tail(log)));
        }
    };
    if status.success() { Ok(()) } else { Err(format!("{what} ({program}) exited with {status}{}", tail(log))) }
}

/// ": <last lines of the log>" (at most 5 lines), or nothing.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let last = &lines[lines.len().saturating_sub(5)..];
    if last.is_empty() { String::new() } else { format!(": {} (full output: {})", last.join(" | "), log.display()) }
}

/// The first line `binary --version` prints, if it answers within a few seconds.
async fn binary_version(binary: &Path) -> Option<String> {
    let output = tokio::process::Command::new(binary).arg("--version").kill_on_drop(true).output();
    let output = tokio::time::timeout(Duration::from_secs(10), output).await.ok()?.ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines().next().map(|l| l.trim().to_owned()).filter(|l| !l.is_empty())
}

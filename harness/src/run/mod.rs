//! `harness run`: one provider × Kubernetes version, end to end, as a Prow job runs it.
//!
//! ```text
//! started.json ─► Build (the CCM) ─► Up (deployer) ─► Deploy (the CCM) ─► Test (each suite)
//!   ─► DumpClusterLogs ─► Down (always) ─► junit_runner.xml, build-log.txt ─► finished.json
//!   ─► publish (store + SQL index)
//! ```
//! Each step is a test case of `junit_runner.xml` (kubetest2's convention). A failed step skips the
//! ones after it up to Down, which always runs: after a failure, the `--timeout`, or SIGINT/SIGTERM
//! (then the build ends `ABORTED`). A step cut short is recorded failed after the time it ran, with
//! the suite it was running when it was Test; every result the suites wrote stays in the build
//! (cloud-e2e writes its JUnit as each test ends). Every check of the input (provider, version, suites, artifacts
//! directory, store and database, deployer programs) happens before anything starts.
//!
//! The local build directory is `--artifacts` (`$ARTIFACTS`, default `./_artifacts`), in Prow's
//! shape: `started.json`, `finished.json`, `build-log.txt`, and `artifacts/` where the suites write
//! their `junit_*.xml` (the suites' `$ARTIFACTS`). It is what `harness publish --dir` takes, and the
//! run publishes it itself at the end, retried while the store or the index cannot be reached
//! ([`publishing`]); a build still not published stays there, and the report gives the `harness
//! publish` command for it. A directory holding an earlier build is reused only once that build is
//! in the index (published); otherwise the run refuses it rather than lose it, with that command.

mod ccm_steps;
pub mod faults;
pub mod publishing;
mod space;
pub mod steps;
mod submission;
mod upgrade_steps;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::deploy::{self, Deployer};
use crate::suites::{SuiteContext, SuiteRunner, known_failures};
use cli_support::exclusive;
use cli_support::signals::{self, StopSignal};
use config::template::{Placeholder, Vars};
use config::{self, KubernetesVersion, Provider, ProvidersConfig, SuiteKind};
use junit::{self, ReadOptions, Status};
use results::index::Index;
use results::layout::{
    self, BuildLocation, BuildWriter, FINISHED_JSON, Finished, JobResult, MetaValue, Metadata, STARTED_JSON, Started,
    Versions,
};
use results::store::ResultStore;
use results::unix_now;
use steps::{StepResult, Steps};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("unknown provider {name:?}: providers.yaml defines {known}")]
    UnknownProvider { name: String, known: String },
    #[error(
        "provider {provider} has no Kubernetes {requested:?}: its matrix is {known}; or name a release tag the Go \
         module proxy serves (v1.37.2), latest or latest-1.37"
    )]
    UnknownVersion { provider: String, requested: String, known: String },
    #[error("unknown suite {name:?} for provider {provider}: providers.yaml defines {known}")]
    UnknownSuite { provider: String, name: String, known: String },
    #[error(
        "{}: the run sets {} KiB aside there for its last files, and could not ({source}): free space on its disk or pass another --artifacts",
        dir.display(), needed / 1024
    )]
    NoRoom { dir: PathBuf, needed: u64, source: std::io::Error },
    #[error("{dir}: cannot write the run's artifacts there: {source}")]
    Artifacts { dir: PathBuf, source: std::io::Error },
    #[error(
        "{dir} holds build {build}, which is not published yet: publish it with {command}, or pass another --artifacts"
    )]
    UnpublishedBuild { dir: PathBuf, build: String, command: String },
    #[error("{} is in use by another harness run, {holder}: wait for it to end, or pass another --artifacts", dir.display())]
    ArtifactsInUse { dir: PathBuf, holder: String },
    #[error(transparent)]
    Skew(#[from] Box<config::skew::SkewError>),
    #[error("--upgrade-from {0}")]
    BadUpgradeFrom(String),
    #[error(
        "provider {provider} runs on the {deployer} deployer, which cannot change a running cluster's release: an \
         upgrade run (--upgrade-from) needs the local deployer"
    )]
    UpgradeNeedsLocal { provider: String, deployer: String },
    #[error(
        "suite `certified-conformance` certifies one release, and an upgrade run (--upgrade-from) runs two: run it \
         without --upgrade-from"
    )]
    CertificationInUpgrade,
    #[error(transparent)]
    Cluster(local_cluster::ClusterError),
    #[error(transparent)]
    Deploy(#[from] deploy::DeployError),
    #[error(transparent)]
    Layout(#[from] layout::LayoutError),
    #[error(transparent)]
    Store(#[from] results::store::StoreError),
    #[error(transparent)]
    Index(#[from] results::index::IndexError),
    #[error(transparent)]
    Toolchain(#[from] toolchain::ToolchainError),
    #[error(
        "provider {provider} has no `certification:` block in providers.yaml, and suite certified-conformance writes \
         the submission of the product it names: add one (docs/providers.md), or run other --suites"
    )]
    NoCertification { provider: String },
    #[error(
        "suite `certified-conformance` runs alone, so its job ({job}) shows only certification runs; \
         run --suites certified-conformance, and the other suites ({others}) in a run of their own"
    )]
    CertificationNotAlone { job: String, others: String },
}

/// What `harness run` was asked to do.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub provider: String,
    /// A version of the provider's matrix (`v1.37.1`, `1.37`); its first when `None`.
    pub kubernetes: Option<String>,
    /// The provider's commit or version under test (recorded; `unknown` when not given).
    pub provider_version: Option<String>,
    /// The suites to run; the provider's when `None`.
    pub suites: Option<Vec<String>>,
    /// The job name; the matrix cell's (`ci-cloud-provider-<p>-k8s-<minor>`) when `None`.
    pub job: Option<String>,
    pub build_id: String,
    /// The local build directory (see the module doc).
    pub artifacts: PathBuf,
    pub store: String,
    pub database: String,
    /// For Build, Up, Deploy and Test together; Down runs after it regardless.
    pub timeout: Duration,
    /// Leave the cluster up after the run (for debugging); the build still ends.
    pub keep_cluster: bool,
    /// The provider's source checkout: relative paths of its entry are relative to it.
    pub provider_dir: PathBuf,
    /// The local cluster's name (distinct per parallel run).
    pub cluster_name: String,
    /// A run whose Build or Up failed (the CCM could not be built, or no cluster came up) ends
    /// `ERROR`, Prow's result for a job that could not test anything, rather than `FAILURE`: the
    /// LKG takes no verdict from it (`harness bisect` marks such a point untestable).
    pub infrastructure_error: bool,
    /// Where a `cargo` build builds: a checkout of this repository (`harness bisect`'s worktree
    /// at the commit under test); this harness's own workspace when `None`.
    pub cargo_workspace: Option<PathBuf>,
    /// Where a Go provider's CCM (aws, vsphere, openstack) built for Kubernetes from a checkout
    /// takes its `k8s.io/*` libraries: the checkout's staging modules, or its release's go.mod.
    pub ccm_libraries: toolchain::Libraries,
    /// The waits before each retry of a publish the store or the index failed (`--publish-retries`).
    pub publish_retries: publishing::PublishRetries,
    /// An upgrade run ([`crate::upgrade`]): up at `from`, upgraded to the run's version, rolled back.
    pub upgrade: Option<crate::upgrade::UpgradeOptions>,
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub job: String,
    pub build: String,
    pub kubernetes_version: String,
    pub passed: bool,
    /// The signal that interrupted the run, if one did.
    pub interrupted: Option<StopSignal>,
    pub steps: Vec<steps::Step>,
    pub build_dir: PathBuf,
    /// Where the build was published, or why not and how to publish it later.
    pub published: Result<String, publishing::NotPublished>,
}

impl RunReport {
    /// The signal that stopped the run, or its publishing.
    pub fn stopped_by(&self) -> Option<StopSignal> {
        self.interrupted.or(self.published.as_ref().err().and_then(|e| e.interrupted))
    }

    /// The one-line reason a run failed; a build not published says so, with the command that
    /// publishes it, whatever else failed.
    pub fn failure(&self) -> Option<String> {
        let unpublished = self.published.as_ref().err().map(|e| {
            format!(
                "was not published: {e}; it is kept in {}: publish it with {}",
                e.later.dir.display(),
                e.later.quoted()
            )
        });
        let why = if let Some(signal) = self.interrupted {
            format!("interrupted by {signal}; the cluster was brought down")
        } else if let Some(step) = self.steps.iter().find(|s| matches!(s.result, StepResult::Failed(_))) {
            let StepResult::Failed(why) = &step.result else { unreachable!() };
            format!("step {} failed: {why}", step.name)
        } else {
            return unpublished.map(|unpublished| format!("the build ran but {unpublished}"));
        };
        Some(match unpublished {
            Some(unpublished) => format!("{why}; and the build {unpublished}"),
            None => why,
        })
    }
}

/// A new build id when Prow gives none: milliseconds since the epoch, which sort as Prow's do.
pub fn generated_build_id() -> String {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or_default().to_string()
}

/// Everything checked before a run starts anything.
struct Plan<'a> {
    config: &'a ProvidersConfig,
    provider: &'a Provider,
    /// From the provider's matrix, or any release tag `--kubernetes` names (pinned at run time).
    version: KubernetesVersion,
    suites: Vec<&'a config::Suite>,
    job: String,
    /// `--provider-version`, else the commit the bundled CCM is built from, else `unknown`.
    provider_version: String,
    /// An upgrade run's older release (`--upgrade-from`): the cluster comes up at it.
    upgrade_from: Option<KubernetesVersion>,
}

impl Plan<'_> {
    /// The release the cluster comes up at: an upgrade run's older one, else the run's.
    fn up_version(&self) -> &KubernetesVersion {
        self.upgrade_from.as_ref().unwrap_or(&self.version)
    }
}

/// Pins the run's Kubernetes release from the Go module proxy when the harness embeds no pin of
/// it and the run needs its toolchain (a local cluster, or upstream `e2e.test`), so that a release
/// the proxy does not serve, or one this Go cannot build, is refused before anything starts.
async fn pin_kubernetes(plan: &Plan<'_>) -> Result<(), RunError> {
    let local = matches!(plan.provider.deployer, config::Deployer::Local { .. });
    let ginkgo = plan.suites.iter().any(|suite| suite.kind.runs_e2e_test());
    if !local && !ginkgo {
        return Ok(());
    }
    for version in [Some(&plan.version), plan.upgrade_from.as_ref()].into_iter().flatten() {
        let version = version.to_string();
        tokio::task::spawn_blocking(move || toolchain::resolve_or_pin(&version))
            .await
            .expect("pinning does not panic")?;
    }
    Ok(())
}

fn plan<'a>(config: &'a ProvidersConfig, opts: &RunOptions) -> Result<Plan<'a>, RunError> {
    let provider = config.provider(&opts.provider).ok_or_else(|| RunError::UnknownProvider {
        name: opts.provider.clone(),
        known: config.providers.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", "),
    })?;
    let version = match provider.kubernetes_version(opts.kubernetes.as_deref()) {
        Some(version) => version.clone(),
        // A release outside the matrix, as CI tests a patch the day it ships.
        None => {
            opts.kubernetes.as_deref().and_then(|v| v.trim().parse().ok()).ok_or_else(|| RunError::UnknownVersion {
                provider: provider.name.clone(),
                requested: opts.kubernetes.clone().unwrap_or_default(),
                known: provider.kubernetes.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", "),
            })?
        }
    };
    let names = opts.suites.clone().unwrap_or_else(|| provider.suites.clone());
    let suites = names
        .iter()
        .map(|name| {
            config.suite(name).ok_or_else(|| RunError::UnknownSuite {
                provider: provider.name.clone(),
                name: name.clone(),
                known: config.suites.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", "),
            })
        })
        .collect::<Result<Vec<&config::Suite>, _>>()?;
    let certifies = suites.iter().any(|suite| matches!(suite.kind, SuiteKind::CertifiedConformance { .. }));
    if certifies && provider.certification.is_none() {
        return Err(RunError::NoCertification { provider: provider.name.clone() });
    }
    // Certification runs are a job of their own, so that its grid shows only full, skip-free runs.
    let job = opts.job.clone().unwrap_or_else(|| {
        config::jobs::job_name(&provider.name, certifies.then_some(config::CERTIFICATION_JOB), &version)
    });
    if certifies && suites.len() > 1 {
        let others = suites.iter().filter(|s| s.name != config::CERTIFIED_CONFORMANCE).map(|s| s.name.as_str());
        return Err(RunError::CertificationNotAlone { job, others: others.collect::<Vec<_>>().join(", ") });
    }
    let upgrade_from = match &opts.upgrade {
        None => None,
        Some(upgrade) => Some(check_upgrade(provider, &version, upgrade, certifies)?),
    };
    let job = match (&opts.job, &upgrade_from) {
        (None, Some(_)) => config::jobs::job_name(&provider.name, Some(UPGRADE_JOB), &version),
        _ => job,
    };
    let provider_version =
        opts.provider_version.clone().unwrap_or_else(|| default_provider_version(provider, &version));
    Ok(Plan { config, provider, version, suites, job, provider_version, upgrade_from })
}

/// The job of a provider's upgrade runs: `ci-cloud-provider-<p>-upgrade-k8s-<minor>`.
pub const UPGRADE_JOB: &str = "upgrade";

/// An upgrade run's older release, checked: a release, a pair and an order the version-skew
/// policy allows (or a forbidden order asked for as a negative test), on a deployer that can
/// upgrade.
fn check_upgrade(
    provider: &Provider,
    to: &KubernetesVersion,
    upgrade: &crate::upgrade::UpgradeOptions,
    certifies: bool,
) -> Result<KubernetesVersion, RunError> {
    let from: KubernetesVersion = match provider.kubernetes_version(Some(&upgrade.from)) {
        Some(version) => version.clone(),
        None => upgrade.from.trim().parse().map_err(RunError::BadUpgradeFrom)?,
    };
    config::skew::check_upgrade(&from, to, &upgrade.order, upgrade.allow_skew_violation).map_err(Box::new)?;
    if !matches!(provider.deployer, config::Deployer::Local { .. }) {
        return Err(RunError::UpgradeNeedsLocal {
            provider: provider.name.clone(),
            deployer: provider.deployer.kind().as_str().to_owned(),
        });
    }
    if certifies {
        return Err(RunError::CertificationInUpgrade);
    }
    Ok(from)
}

/// The release tag of a provider's CCM the toolchain builds from the Go module proxy (`goproxy:`
/// histories order those); the commit of this workspace when the CCM is built from it (the bundled
/// one, or the toolchain's own from `tools/`), so LKG can order its runs; `unknown` otherwise, or
/// when the workspace is not a git checkout.
fn default_provider_version(provider: &Provider, kubernetes: &KubernetesVersion) -> String {
    if let config::CcmBuild::Toolchain { bin, .. } = &provider.ccm.build
        && let Ok(release) = toolchain::resolve(Some(&kubernetes.to_string()))
        && let Some(version) = toolchain::provider_ccm_version(&release, bin)
    {
        return version.to_owned();
    }
    let bundled = match &provider.ccm.build {
        config::CcmBuild::Cargo { .. } => true,
        config::CcmBuild::Toolchain { bin, .. } => toolchain::TOOLCHAIN_CCMS.contains(&bin.as_str()),
        config::CcmBuild::Command { .. } => false,
    };
    bundled.then(workspace_commit).flatten().unwrap_or_else(|| "unknown".into())
}

/// The commit of the workspace the bundled CCM is built from: the checkout's HEAD now, when the
/// harness runs in the checkout it was built in (which builds the CCM); else the commit the
/// harness itself was built from (a copied harness runs the CCM built with it).
fn workspace_commit() -> Option<String> {
    let Some(workspace) = toolchain::workspace::checkout() else {
        return crate::built_from_commit().map(str::to_owned);
    };
    let output =
        std::process::Command::new("git").arg("-C").arg(workspace).args(["rev-parse", "HEAD"]).output().ok()?;
    let commit = String::from_utf8(output.stdout).ok()?.trim().to_owned();
    (output.status.success() && !commit.is_empty()).then_some(commit)
}

/// Runs one build end to end (see the module doc). `Err` only for what is checked before anything
/// starts; a failing step is a failed [`RunReport`].
pub async fn run(config: &ProvidersConfig, opts: &RunOptions) -> Result<RunReport, RunError> {
    let plan = plan(config, opts)?;
    let location = BuildLocation::periodic(&plan.job, &opts.build_id)?;
    let store = ResultStore::open(&opts.store)?;
    let index = Index::open(&opts.database).await?;
    deploy::check_programs(&plan.provider.deployer)?;
    pin_kubernetes(&plan).await?;
    let _holds = hold_for_the_run(&plan, opts)?;
    reuse_artifacts_dir(&opts.artifacts, &index, store.url(), &opts.database).await?;
    let mut reserve = space::Reserve::set_aside(&opts.artifacts).map_err(|source| RunError::NoRoom {
        dir: opts.artifacts.clone(),
        needed: space::RESERVED,
        source,
    })?;
    let writer = BuildWriter::create(&opts.artifacts, &started(plan.provider, &plan.version, &location))?;
    std::fs::create_dir_all(writer.artifacts_dir())
        .map_err(|source| RunError::Artifacts { dir: writer.artifacts_dir(), source })?;

    let mut steps = Steps::default();
    steps.note(format!(
        "harness run: provider {} at {}, Kubernetes {}, job {} build {}",
        plan.provider.name, plan.provider_version, plan.version, plan.job, opts.build_id
    ));
    let mut deployer: Option<Box<dyn Deployer>> = None;
    let mut ccm_version = None;
    let mut tested = Tested::default();
    let cut_short = {
        let work = run_steps(&plan, opts, &writer, &mut steps, &mut deployer, &mut ccm_version, &mut tested);
        tokio::select! {
            () = work => None,
            () = tokio::time::sleep(opts.timeout) => Some(CutShort::TimedOut(opts.timeout)),
            signal = signals::until_signal() => Some(CutShort::Signal(signal)),
        }
    };
    let signal = match cut_short {
        Some(CutShort::Signal(signal)) => Some(signal),
        _ => None,
    };
    if let Some(why) = &cut_short {
        // The step under way when the run was cut short failed; the ones after it did not run.
        steps.interrupt(&interrupted_step(&why.to_string(), tested.under_way.as_deref()));
    }
    tear_down(opts, signal, &writer, &mut steps, &mut deployer).await;
    // The suites (or the dumped logs) may have filled the disk: room for the build's last files.
    reserve.release();

    writer.write_junit(steps::RUNNER_FILE, &steps.report())?;
    writer.write_build_log(steps.build_log().as_bytes())?;
    let passed = steps.passed() && cut_short.is_none();
    let untestable = opts.infrastructure_error && untestable(steps.all()).is_some();
    let result = match (signal, passed) {
        (Some(_), _) => JobResult::Aborted,
        (None, true) => JobResult::Success,
        (None, false) if untestable => JobResult::Error,
        (None, false) => JobResult::Failure,
    };
    let versions = Versions {
        kubernetes_version: Some(plan.version.to_string()),
        provider: Some(plan.provider.name.clone()),
        provider_version: Some(plan.provider_version.clone()),
        ccm_version,
        job_version: Some(plan.version.to_string()),
        repos: kubernetes_repos(&plan.version),
        ..Versions::default()
    };
    let mut metadata = versions.to_metadata();
    if let Some(from) = &plan.upgrade_from {
        metadata.insert_string(layout::keys::UPGRADE_FROM, from.to_string());
        let order = opts.upgrade.iter().flat_map(|u| u.order.iter().map(|s| s.as_str())).collect::<Vec<_>>();
        metadata.insert_string(layout::keys::UPGRADE_ORDER, order.join(","));
    }
    if !tested.known_failures.is_empty() {
        let met = serde_json::to_value(&tested.known_failures).expect("known failures serialise");
        metadata.0.insert(layout::keys::KNOWN_FAILURES.into(), MetaValue::Other(met));
    }
    let finished = Finished {
        timestamp: Some(unix_now()),
        passed: Some(passed),
        result: Some(result),
        metadata,
        ..Finished::default()
    };
    // Under Prow, the sidecar merges `$ARTIFACTS/metadata.json` into the finished.json it writes,
    // so TestGrid's version rows show there too.
    let metadata = serde_json::to_vec_pretty(&finished.metadata).expect("metadata serialises");
    writer.write_artifact(Path::new("metadata.json"), &metadata)?;
    let build_dir = writer.dir().to_path_buf();
    writer.finish(&finished)?;

    let published =
        publishing::publish_or_keep(&store, &index, &build_dir, &location, &opts.publish_retries, &opts.database).await;
    Ok(RunReport {
        job: plan.job,
        build: opts.build_id.clone(),
        kubernetes_version: plan.version.to_string(),
        passed,
        interrupted: signal,
        steps: steps.all().to_vec(),
        build_dir,
        published,
    })
}

/// `kubernetes/kubernetes` at the commit the run built, as Prow records a repository it cloned
/// (`<branch>:<commit>`), when the run's Kubernetes is a checkout's (`--kubernetes-source`).
fn kubernetes_repos(version: &KubernetesVersion) -> std::collections::BTreeMap<String, String> {
    let checkout = toolchain::resolve(Some(&version.to_string())).ok().and_then(|release| release.source);
    let Some(checkout) = checkout else { return Default::default() };
    let at = match &checkout.branch {
        Some(branch) => format!("{branch}:{}", checkout.commit),
        None => checkout.commit.clone(),
    };
    [("kubernetes/kubernetes".to_owned(), at)].into()
}

/// The steps that decide whether a run tested anything: Build (the CCM) and Up (the cluster).
pub const INFRASTRUCTURE_STEPS: [&str; 2] = ["Build", "Up"];

/// Why a run could not test anything: the first of [`INFRASTRUCTURE_STEPS`] that failed, and how.
pub fn untestable(steps: &[steps::Step]) -> Option<String> {
    steps.iter().find_map(|step| match &step.result {
        StepResult::Failed(why) if INFRASTRUCTURE_STEPS.contains(&step.name.as_str()) => {
            Some(format!("step {} failed: {why}", step.name))
        }
        _ => None,
    })
}

/// Why the step under way failed when the run was cut short (`why`), naming the suite Test was
/// running, if it was.
fn interrupted_step(why: &str, suite: Option<&str>) -> String {
    match suite {
        Some(suite) => format!("{why} during suite {suite} (the results it wrote so far are kept)"),
        None => why.to_owned(),
    }
}

/// What the Test step leaves for the caller, which reads it even when the step's future is
/// dropped (timeout, signal).
#[derive(Default)]
struct Tested {
    /// The suite running now.
    under_way: Option<String>,
    /// The provider's known failures the suites met, for `metadata.json`.
    known_failures: Vec<known_failures::Met>,
    /// Where an upgrade run keeps the older release's CCM build while it builds the newer one.
    ccm_builds: Option<tempfile::TempDir>,
}

/// Build, Up, Deploy, Test; a failed step skips the rest.
async fn run_steps(
    plan: &Plan<'_>,
    opts: &RunOptions,
    writer: &BuildWriter,
    steps: &mut Steps,
    deployer_slot: &mut Option<Box<dyn Deployer>>,
    ccm_version: &mut Option<String>,
    tested: &mut Tested,
) {
    let artifacts = writer.artifacts_dir();
    let mut vars = base_vars(plan, opts, &artifacts);

    // An upgrade run builds the CCM of each of its releases; the cluster comes up with the older.
    let to_vars = with_version(&vars, &plan.version);
    let build = async {
        let from = ccm_steps::build(plan.provider, opts, &vars, &artifacts).await?;
        if opts.upgrade.is_none() {
            return Ok((from.clone(), from));
        }
        let from = ccm_steps::keep_aside(plan.provider, from, &mut tested.ccm_builds)?;
        Ok::<_, String>((from, ccm_steps::build(plan.provider, opts, &to_vars, &artifacts).await?))
    };
    let Some((built, built_to)) = steps.run("Build", build).await else {
        return skip_rest(steps, &["Up", "Deploy", "Test"], "Build failed");
    };
    *ccm_version = built_to.version.clone();
    if let Some(binary) = &built.binary {
        vars.insert(Placeholder::CcmBinary, binary.display().to_string());
    }

    let deployer = match ccm_steps::deployer(plan, opts, &built, &vars) {
        Ok(deployer) => deployer_slot.insert(deployer),
        Err(e) => {
            steps.record("Up", StepResult::Failed(e.to_string()), Duration::ZERO);
            return skip_rest(steps, &["Deploy", "Test"], "Up failed");
        }
    };
    if steps.run("Up", deployer.up()).await.is_none() {
        return skip_rest(steps, &["Deploy", "Test"], "Up failed");
    }
    vars.extend(deployer.vars());

    if steps.run("Deploy", ccm_steps::deploy(plan.provider, opts, deployer.as_mut(), &built, &vars)).await.is_none() {
        return skip_rest(steps, &["Test"], "Deploy failed");
    }

    if let Some(upgrade) = &opts.upgrade {
        let built = upgrade_steps::Builds { from: &built, to: &built_to };
        return upgrade_steps::run(plan, opts, writer, steps, deployer.as_mut(), &built, &vars, tested, upgrade).await;
    }
    let artifacts_dir = artifacts.clone();
    test_step(
        "Test",
        plan,
        opts,
        writer,
        steps,
        deployer.as_ref(),
        &vars,
        tested,
        &plan.version.to_string(),
        &artifacts_dir,
    )
    .await;
}

/// The Test step `name`: each suite of the plan against the cluster at `version`, writing its
/// results to `artifacts`, watched for faults.
#[allow(clippy::too_many_arguments)]
async fn test_step(
    name: &str,
    plan: &Plan<'_>,
    opts: &RunOptions,
    writer: &BuildWriter,
    steps: &mut Steps,
    deployer: &dyn Deployer,
    vars: &Vars,
    tested: &mut Tested,
    version: &str,
    artifacts: &Path,
) -> bool {
    let Some(kubeconfig) = deployer.kubeconfig() else {
        steps.record(name, StepResult::Failed("the deployer gave no kubeconfig".into()), Duration::ZERO);
        return false;
    };
    if let Err(e) = std::fs::create_dir_all(artifacts) {
        steps.record(name, StepResult::Failed(format!("creating {}: {e}", artifacts.display())), Duration::ZERO);
        return false;
    }
    let ctx = |suite: &config::Suite| SuiteContext {
        kubeconfig: kubeconfig.clone(),
        artifacts: artifacts.to_path_buf(),
        provider: plan.provider.name.clone(),
        kubernetes_version: version.to_owned(),
        vars: vars.clone(),
        timeout: suite.timeout,
    };
    let watch = deployer.watch();
    // Nodes are watched through the API server; without a client, processes only.
    let watch_client = match &watch {
        Some(_) => crate::suites::cloud_e2e::client(&kubeconfig).await.ok(),
        None => None,
    };
    let suites = async |tested: &mut Tested| {
        let mut failed = Vec::new();
        for suite in &plan.suites {
            tested.under_way = Some(suite.name.clone());
            let outcome = runner(suite, plan, opts, vars)?.run(&ctx(suite)).await.map_err(|e| e.to_string())?;
            tested.under_way = None;
            // Certification takes every conformance test passing: nothing listed excuses one there.
            let (outcome, met) = match suite.kind {
                SuiteKind::CertifiedConformance { .. } => (outcome, Vec::new()),
                _ => known_failures::apply(plan.provider, &suite.name, outcome),
            };
            tested.known_failures.extend(met);
            steps_note(&outcome.summary, &suite.name);
            // A certification run fails whenever its submission would be refused.
            let required = plan.provider.required.suites.contains(&suite.name)
                || matches!(suite.kind, SuiteKind::CertifiedConformance { .. });
            if !outcome.passed && required {
                failed.push(format!("{} ({})", suite.name, outcome.summary));
            }
        }
        failed.extend(missing_required_tests(plan.provider, artifacts));
        if failed.is_empty() { Ok(()) } else { Err(format!("required tests failed: {}", failed.join("; "))) }
    };
    // The suites, unless the run has a fault first (a process the cluster cannot lose exits, a
    // node goes NotReady, the cloud's API or the disk fails): then at once, naming it.
    let test = async {
        let fault = tokio::select! {
            passed = suites(&mut *tested) => return passed,
            fault = faults::first_fault(writer.dir(), watch.as_deref(), watch_client) => fault,
        };
        let during = tested.under_way.take().map(|suite| format!(" during suite {suite}")).unwrap_or_default();
        Err(format!("the run had a fault{during} (the results the suite wrote so far are kept): {fault}"))
    };
    steps.run(name, test).await.is_some()
}

fn steps_note(summary: &str, suite: &str) {
    tracing::info!("suite {suite}: {summary}");
}

fn skip_rest(steps: &mut Steps, names: &[&str], why: &str) {
    for name in names {
        steps.record(name, StepResult::Skipped(why.into()), Duration::ZERO);
    }
}

/// DumpClusterLogs and Down, whatever happened before. `--keep-cluster` keeps the cluster of a
/// run that got here by itself (passed, failed or timed out), for a look or a rerun; a run
/// `interrupted` by a signal brings it down all the same: SIGINT or SIGTERM (Ctrl-C, a CI job
/// aborted) asks for the machine back, and what a suite was doing when cut short is no state to
/// debug from.
async fn tear_down(
    opts: &RunOptions,
    interrupted: Option<StopSignal>,
    writer: &BuildWriter,
    steps: &mut Steps,
    deployer: &mut Option<Box<dyn Deployer>>,
) {
    let Some(deployer) = deployer else {
        return skip_rest(steps, &["Down"], "no cluster was started");
    };
    let logs = writer.artifacts_dir().join("cluster-logs");
    steps.run("DumpClusterLogs", deployer.dump_logs(&logs)).await;
    match (opts.keep_cluster, interrupted) {
        (true, None) => {
            let kubeconfig = deployer.kubeconfig().map(|k| k.display().to_string()).unwrap_or_default();
            let down = deployer.keep();
            steps.note(format!("--keep-cluster: the cluster stays up (kubeconfig {kubeconfig}); to remove it: {down}"));
            steps.record("Down", StepResult::Skipped("--keep-cluster".into()), Duration::ZERO);
        }
        (true, Some(signal)) => {
            steps.note(format!("--keep-cluster: the run was interrupted by {signal}, so its cluster goes down"));
            steps.run("Down", deployer.down()).await;
        }
        (false, _) => {
            steps.run("Down", deployer.down()).await;
        }
    }
}

/// The suite runner for a suite of providers.yaml.
fn runner(
    suite: &config::Suite,
    plan: &Plan<'_>,
    opts: &RunOptions,
    vars: &Vars,
) -> Result<Box<dyn SuiteRunner>, String> {
    let provider = plan.provider;
    match &suite.kind {
        SuiteKind::Exec { command } => {
            let dir = command.dir.as_ref().map(|d| opts.provider_dir.join(d)).or(Some(opts.provider_dir.clone()));
            Ok(Box::new(crate::suites::exec::ExecSuite::new(&suite.name, command.clone(), dir)))
        }
        SuiteKind::Ginkgo { focus, skip, parallel, args } => {
            // The built-in conformance suites leave out what the local deployer's nodes cannot do.
            let skip = match (&provider.deployer, suite.builtin) {
                (config::Deployer::Local { node_kind, .. }, true) => {
                    crate::suites::local_skips::with_local_skips(skip.as_deref(), *node_kind)
                }
                _ => skip.clone(),
            };
            Ok(Box::new(
                crate::suites::ginkgo::GinkgoSuite::new(&suite.name, focus.clone(), skip, *parallel, args.clone())
                    .with_flake_attempts(suite.flake_attempts),
            ))
        }
        SuiteKind::CloudE2e { focus, skip } => {
            crate::suites::cloud_e2e::CloudE2eSuite::new(&suite.name, provider, focus.as_deref(), skip.as_deref())
                .map(|runner| Box::new(runner.with_flake_attempts(suite.flake_attempts)) as Box<dyn SuiteRunner>)
                .map_err(|e| e.to_string())
        }
        SuiteKind::CertifiedConformance { parallel } => {
            submission::suite(&suite.name, *parallel, plan, vars).map(|suite| Box::new(suite) as Box<dyn SuiteRunner>)
        }
        SuiteKind::UpstreamLoadBalancers { skip, parallel } => {
            crate::suites::upstream_load_balancers::UpstreamLoadBalancersSuite::new(
                &suite.name,
                *parallel,
                provider,
                vars.clone(),
            )
            .with_flake_attempts(suite.flake_attempts)
            .with_skip(skip.as_deref())
            .map(|suite| Box::new(suite) as Box<dyn SuiteRunner>)
            .map_err(|e| e.to_string())
        }
    }
}

/// Required tests (`required.tests`) that no JUnit file of the run shows passing.
fn missing_required_tests(provider: &Provider, artifacts: &Path) -> Vec<String> {
    if provider.required.tests.is_empty() {
        return Vec::new();
    }
    let mut outcomes: Vec<(String, Status)> = Vec::new();
    for file in junit_files(artifacts) {
        if let Ok(report) = junit::read_file(&file, &ReadOptions::default()) {
            outcomes.extend(report.cases().map(|(_, c)| (c.name.clone(), c.status())));
        }
    }
    provider
        .required
        .tests
        .iter()
        .filter_map(|matcher| {
            let matching: Vec<&Status> = outcomes.iter().filter(|(n, _)| matcher.matches(n)).map(|(_, s)| s).collect();
            let passed = !matching.is_empty() && matching.iter().all(|s| matches!(s, Status::Passed | Status::Flaky));
            (!passed).then(|| format!("required test {matcher:?} did not pass"))
        })
        .collect()
}

fn junit_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return found };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(junit_files(&path));
        } else if layout::junit_artifact(&format!("a/{}", entry.file_name().to_string_lossy())).is_some() {
            found.push(path);
        }
    }
    found
}

/// `vars` with the Kubernetes version `version`.
fn with_version(vars: &Vars, version: &KubernetesVersion) -> Vars {
    let mut vars = vars.clone();
    vars.insert(Placeholder::KubernetesVersion, version.to_string());
    vars
}

fn base_vars(plan: &Plan<'_>, opts: &RunOptions, artifacts: &Path) -> Vars {
    let mut vars = Vars::new();
    vars.insert(Placeholder::Artifacts, artifacts.display().to_string());
    vars.insert(Placeholder::RepoDir, opts.provider_dir.display().to_string());
    vars.insert(Placeholder::KubernetesVersion, plan.up_version().to_string());
    vars.insert(Placeholder::ProviderVersion, plan.provider_version.clone());
    vars.insert(Placeholder::Cluster, opts.cluster_name.clone());
    if let Ok(exe) = std::env::current_exe() {
        vars.insert(Placeholder::Harness, exe.display().to_string());
    }
    vars
}

/// `started.json`'s metadata keys naming the build, so a later run can tell whether the build a
/// reused artifacts directory holds was published (and `harness publish --dir` where it goes).
const JOB_KEY: &str = layout::keys::HARNESS_JOB;
const BUILD_KEY: &str = layout::keys::HARNESS_BUILD;

fn started(provider: &Provider, version: &KubernetesVersion, location: &BuildLocation) -> Started {
    let mut metadata = Metadata::default();
    metadata.insert_string(layout::keys::PROVIDER, provider.name.clone());
    metadata.insert_string(layout::keys::KUBERNETES_VERSION, version.to_string());
    metadata.insert_string(JOB_KEY, location.job());
    metadata.insert_string(BUILD_KEY, location.build());
    Started {
        timestamp: unix_now(),
        repos: [(provider.repo.trim_start_matches("https://github.com/").to_owned(), provider.branch.clone())]
            .into_iter()
            .collect(),
        metadata,
        ..Started::default()
    }
}

/// What one run has to itself until it ends, so that a second run at once is refused with the
/// first's PID before it starts anything (never clearing or overwriting what the first is using):
/// its artifacts directory and, on the local deployer, its cluster's name.
fn hold_for_the_run(
    plan: &Plan<'_>,
    opts: &RunOptions,
) -> Result<(exclusive::Hold, Option<local_cluster::ClusterHold>), RunError> {
    let dir = &opts.artifacts;
    std::fs::create_dir_all(dir).map_err(|source| RunError::Artifacts { dir: dir.clone(), source })?;
    let artifacts = exclusive::hold_dir(dir).map_err(|e| match e {
        exclusive::HoldError::Held { holder, .. } => RunError::ArtifactsInUse { dir: dir.clone(), holder },
        exclusive::HoldError::Io { source, .. } => RunError::Artifacts { dir: dir.clone(), source },
    })?;
    let cluster = match plan.provider.deployer {
        config::Deployer::Local { .. } => Some(local_cluster::hold(&opts.cluster_name).map_err(RunError::Cluster)?),
        _ => None,
    };
    Ok((artifacts, cluster))
}

/// An artifacts directory may hold the previous run's build: reused once that build is indexed;
/// else refused, with the command that publishes it to `store` and `database`.
async fn reuse_artifacts_dir(dir: &Path, index: &Index, store: &str, database: &str) -> Result<(), RunError> {
    let artifacts_err = |source| RunError::Artifacts { dir: dir.to_path_buf(), source };
    std::fs::create_dir_all(dir).map_err(artifacts_err)?;
    let probe = dir.join(".harness-write-check");
    std::fs::write(&probe, b"").map_err(artifacts_err)?;
    let _ = std::fs::remove_file(&probe);
    let Ok(bytes) = std::fs::read(dir.join(STARTED_JSON)) else { return Ok(()) };
    let previous = serde_json::from_slice::<Started>(&bytes).unwrap_or_default();
    let (job, build) = (previous.metadata.string(JOB_KEY), previous.metadata.string(BUILD_KEY));
    let published = match (job, build) {
        (Some(job), Some(build)) => index.build(job, build).await?.is_some(),
        _ => false,
    };
    if !published {
        let env_database = std::env::var("DATABASE_URL").ok();
        let later = publishing::publish_command(dir, job, build, store, database, env_database.as_deref());
        let (command, build) = (later.quoted(), build.unwrap_or("(unnamed)").to_owned());
        return Err(RunError::UnpublishedBuild { dir: later.dir, build, command });
    }
    space::remove_stale(dir);
    for entry in [STARTED_JSON, FINISHED_JSON, layout::BUILD_LOG] {
        let _ = std::fs::remove_file(dir.join(entry));
    }
    let _ = std::fs::remove_dir_all(dir.join(layout::ARTIFACTS));
    Ok(())
}

/// Why a run ended before its steps did.
enum CutShort {
    TimedOut(Duration),
    Signal(StopSignal),
}

impl std::fmt::Display for CutShort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CutShort::TimedOut(after) => write!(f, "timed out after {}", humantime::format_duration(*after)),
            CutShort::Signal(signal) => write!(f, "interrupted by {signal}"),
        }
    }
}

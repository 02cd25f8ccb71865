//! `harness run` and `harness matrix`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;
use futures::StreamExt;
use sha2::Digest as _;

use cli_support::signals::Interrupted;

use config::{Cell, KubernetesVersion};

use super::ConfigArg;
use harness::run::publishing::PublishRetries;
use harness::run::{self, RunOptions, RunReport, steps::StepResult};
use results::{default_database_url, default_store_url};

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The provider of providers.yaml to test.
    #[arg(long, default_value = "local")]
    pub provider: String,
    /// The Kubernetes version: one of the provider's matrix (v1.37.1, 1.37), any other release or
    /// pre-release tag the Go module proxy serves (v1.37.2: pinned, built and cached on first use,
    /// its job the matrix's for that minor), or latest, latest-1.37 (the newest the proxy serves)
    /// [default: the matrix's first].
    #[arg(long, value_name = "VERSION")]
    pub kubernetes: Option<String>,
    /// A kubernetes/kubernetes git checkout to build Kubernetes from, at whatever commit it is (under
    /// Prow, the path alias k8s.io/kubernetes): the run's version is upstream's for that commit
    /// (v1.37.1-3+0123456789abcd), its job the matrix's for that minor.
    #[arg(long, value_name = "DIR", conflicts_with = "kubernetes", env = "HARNESS_KUBERNETES_SOURCE")]
    pub kubernetes_source: Option<std::path::PathBuf>,
    /// The provider's commit or version under test, recorded in finished.json.
    #[arg(long, env = "PROVIDER_VERSION")]
    pub provider_version: Option<String>,
    /// Comma-separated suites to run [default: the provider's].
    #[arg(long, value_delimiter = ',')]
    pub suites: Option<Vec<String>>,
    /// The job name [default: the matrix cell's, ci-cloud-provider-<provider>-k8s-<minor>; with the
    /// certified-conformance suite, ci-cloud-provider-<provider>-certified-conformance-k8s-<minor>].
    #[arg(long, env = "JOB_NAME")]
    pub job: Option<String>,
    /// The build id [default: $BUILD_ID, else $PROW_JOB_ID, else a new one].
    #[arg(long)]
    pub build_id: Option<String>,
    #[command(flatten)]
    pub common: CommonArgs,
    /// The local cluster's name (local deployer).
    #[arg(long, default_value = "harness-run")]
    pub cluster_name: String,
    #[command(flatten)]
    pub upgrade: UpgradeArgs,
}

/// An upgrade run's flags.
#[derive(Debug, Args)]
pub struct UpgradeArgs {
    /// Make this an upgrade run: the cluster comes up at this older release with the provider's
    /// CCM for it, a workload with a load balancer per protocol goes on it, then each component is
    /// upgraded to --kubernetes (control plane, each node cordoned and drained, the CCM), the
    /// suites run, everything rolls back the same way, and the suites run again. Each stage is a
    /// step of junit_runner.xml with its disruption as properties; it fails when a node, a load
    /// balancer or a route the CCM made changed. Job ci-cloud-provider-<provider>-upgrade-k8s-<minor>.
    #[arg(long, value_name = "VERSION")]
    pub upgrade_from: Option<String>,
    /// The stages' order, comma-separated: control-plane (kube-apiserver, kube-controller-manager,
    /// kube-scheduler), nodes (each node's kubelet and kube-proxy), ccm; the rollback takes the
    /// reverse one. An order the version-skew policy forbids (nodes before the control plane) is
    /// refused.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        requires = "upgrade_from",
        default_value = "control-plane,nodes,ccm",
        hide_possible_values = true
    )]
    pub upgrade_order: Vec<config::skew::Stage>,
    /// Run an --upgrade-order the version-skew policy forbids, as a negative test.
    #[arg(long, requires = "upgrade_from")]
    pub allow_skew_violation: bool,
    /// The longest a load balancer of the workload may carry no traffic during a stage.
    #[arg(long, requires = "upgrade_from", default_value = "30s", value_parser = humantime::parse_duration)]
    pub max_traffic_gap: Duration,
}

impl UpgradeArgs {
    fn options(&self) -> Option<harness::upgrade::UpgradeOptions> {
        let from = self.upgrade_from.clone()?;
        Some(harness::upgrade::UpgradeOptions {
            from,
            order: self.upgrade_order.clone(),
            allow_skew_violation: self.allow_skew_violation,
            max_traffic_gap: self.max_traffic_gap,
        })
    }
}

/// Flags `run` and `matrix` share.
#[derive(Debug, Args)]
pub struct CommonArgs {
    #[command(flatten)]
    pub config: ConfigArg,
    /// The local build directory: started.json, finished.json, build-log.txt, artifacts/ (the
    /// suites' $ARTIFACTS). For `matrix`, one directory per job below it. For `run` under Prow's pod
    /// utilities ($JOB_SPEC set), $ARTIFACTS is the artifacts/ directory Prow uploads: the build
    /// directory is its parent, so junit files and metadata.json land in $ARTIFACTS and
    /// started.json and finished.json are left to Prow.
    #[arg(long, env = "ARTIFACTS", default_value = "./_artifacts")]
    pub artifacts: PathBuf,
    #[command(flatten)]
    pub store: super::publish_command::StoreArgs,
    /// Time for Build, Up, Deploy and Test together; the cluster is brought down after it anyway
    /// (kept with --keep-cluster).
    #[arg(long, default_value = "2h", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// Leave the cluster up after the run, for debugging or a rerun: the run prints its kubeconfig
    /// and how to remove it (`harness cluster down --name N` for the local deployer). A run
    /// interrupted by SIGINT or SIGTERM brings it down all the same.
    #[arg(long)]
    pub keep_cluster: bool,
    /// The provider's source checkout (relative paths of its providers.yaml entry start there).
    #[arg(long, default_value = ".")]
    pub provider_dir: PathBuf,
    /// With --kubernetes-source: where a Go provider's CCM (aws, vsphere, openstack) takes its
    /// k8s.io libraries from. `checkout`: the checkout's staging modules, in a Go workspace (as
    /// add-kubernetes-to-workspace.sh does), so a change there that breaks the CCM's compile fails
    /// its Build step at that commit; `pinned`: the versions its pinned release's go.mod requires.
    /// local-upstream-ccm, the toolchain's own, is built against the checkout either way.
    #[arg(long, value_enum, default_value_t = CcmLibraries::Checkout)]
    pub ccm_libraries: CcmLibraries,
    /// The waits before each retry of publishing when the store or the database cannot be reached
    /// (refused, timed out, 5xx, busy), comma-separated, or `none`. A build still not published stays
    /// in its directory, and the run prints the `harness publish` command that publishes it later
    /// (and exits 1).
    #[arg(long, env = "HARNESS_PUBLISH_RETRIES", value_name = "WAITS", default_value_t = PublishRetries::default())]
    pub publish_retries: PublishRetries,
}

/// `--ccm-libraries`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CcmLibraries {
    Checkout,
    Pinned,
}

#[derive(Debug, Args)]
pub struct MatrixArgs {
    /// Only these providers [default: all].
    #[arg(long = "provider")]
    pub providers: Vec<String>,
    /// Only these Kubernetes versions (v1.37.1 or 1.37), or another release of a minor in the
    /// matrix, run in that minor's cells instead (v1.37.2, latest-1.37: pinned at run time)
    /// [default: each provider's matrix].
    #[arg(long = "kubernetes")]
    pub versions: Vec<String>,
    /// A kubernetes/kubernetes git checkout to build Kubernetes from: the cells of its minor run
    /// it, at the commit it is at or at each --kubernetes-commit, versioned as upstream versions
    /// that commit (v1.37.1-3+0123456789abcd); the other minors' cells do not run.
    #[arg(long, value_name = "DIR", conflicts_with = "versions", env = "HARNESS_KUBERNETES_SOURCE")]
    pub kubernetes_source: Option<PathBuf>,
    /// With --kubernetes-source: the commits to run, oldest first (commits, tags or branches of the
    /// checkout; comma-separated or repeated), each built in a worktree of its own under the
    /// harness's cache, the checkout itself left as it is [default: the checkout as it is].
    #[arg(long = "kubernetes-commit", value_name = "REV", value_delimiter = ',', requires = "kubernetes_source")]
    pub kubernetes_commits: Vec<String>,
    /// Comma-separated suites to run [default: each provider's].
    #[arg(long, value_delimiter = ',')]
    pub suites: Option<Vec<String>>,
    /// Cells run at once, each on its own cluster and ports.
    #[arg(long, default_value_t = 1)]
    pub parallel: usize,
    #[command(flatten)]
    pub common: CommonArgs,
}

impl MatrixArgs {
    /// Whether `--provider` and `--kubernetes` keep `cell` (no filter keeps every cell).
    pub(super) fn selects(&self, cell: &Cell<'_>) -> bool {
        let provider = self.providers.is_empty() || self.providers.contains(&cell.provider.name);
        provider && (self.versions.is_empty() || self.version_of(cell).is_some())
    }

    /// The Kubernetes version `cell` runs: its own when `--kubernetes` names it (`v1.37.1`,
    /// `1.37`), or another release of its minor that `--kubernetes` names (`v1.37.2`, not in the
    /// matrix: pinned at run time), or its own when there is no filter.
    pub(super) fn version_of(&self, cell: &Cell<'_>) -> Option<KubernetesVersion> {
        if self.versions.is_empty() {
            return Some(cell.kubernetes.clone());
        }
        self.versions.iter().find_map(|requested| {
            if cell.provider.kubernetes_version(Some(requested)) == Some(cell.kubernetes) {
                return Some(cell.kubernetes.clone());
            }
            let other: KubernetesVersion = requested.trim().parse().ok()?;
            (other.minor_line() == cell.kubernetes.minor_line()).then_some(other)
        })
    }
}

/// A matrix cell's cluster: `m-<provider>[-<job>]-<minor>`; past a cluster name's 40 characters,
/// the provider and job are cut short and a digest of the whole name keeps cells apart.
pub(super) fn cluster_name(cell: &Cell<'_>) -> String {
    cluster_name_with(cell, "")
}

/// [`cluster_name`] with `suffix` after the minor (`-2`: the cell at a matrix's third commit).
fn cluster_name_with(cell: &Cell<'_>, suffix: &str) -> String {
    const MAX: usize = 40;
    let minor = format!("{}{suffix}", cell.kubernetes.minor_line().replace('.', "-"));
    let stem = match &cell.job.name {
        Some(job) => format!("m-{}-{job}", cell.provider.name),
        None => format!("m-{}", cell.provider.name),
    };
    let name = format!("{stem}-{minor}");
    if name.len() <= MAX {
        return name;
    }
    let digest = hex::encode(&sha2::Sha256::digest(name.as_bytes())[..3]);
    let keep = MAX - digest.len() - minor.len() - 2;
    let kept: String = stem.chars().take(keep).collect();
    format!("{}-{digest}-{minor}", kept.trim_end_matches('-'))
}

impl CommonArgs {
    fn options(&self, provider: &str, build_id: String, artifacts: PathBuf, cluster_name: String) -> RunOptions {
        RunOptions {
            provider: provider.to_owned(),
            kubernetes: None,
            provider_version: None,
            suites: None,
            job: None,
            build_id,
            artifacts,
            store: self.store.store.clone().unwrap_or_else(default_store_url),
            database: self.store.database.clone().unwrap_or_else(default_database_url),
            timeout: self.timeout,
            keep_cluster: self.keep_cluster,
            provider_dir: self.provider_dir.clone(),
            cluster_name,
            infrastructure_error: false,
            cargo_workspace: None,
            ccm_libraries: match self.ccm_libraries {
                CcmLibraries::Checkout => toolchain::Libraries::Checkout,
                CcmLibraries::Pinned => toolchain::Libraries::Pinned,
            },
            publish_retries: self.publish_retries.clone(),
            upgrade: None,
        }
    }
}

fn default_build_id() -> String {
    ["BUILD_ID", "PROW_JOB_ID"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(run::generated_build_id)
}

pub async fn run_one(args: RunArgs) -> Result<()> {
    let config = args.common.config.load()?;
    let build_id = args.build_id.clone().unwrap_or_else(default_build_id);
    let build_dir = build_dir(&args.common.artifacts, prow_artifacts().as_deref());
    let mut opts = args.common.options(&args.provider, build_id, build_dir, args.cluster_name);
    (opts.provider_version, opts.suites, opts.job) = (args.provider_version, args.suites, args.job);
    opts.upgrade = args.upgrade.options();
    opts.kubernetes = match &args.kubernetes_source {
        // Opened (and refused, when it is no checkout) before anything starts.
        Some(dir) => Some(toolchain::from_checkout(dir)?.version.to_owned()),
        None => super::resolve_marker(args.kubernetes).await?,
    };
    let report = run::run(&config, &opts).await?;
    print_report(&report);
    outcome(&report)
}

/// `$ARTIFACTS` when the run is a Prow job's test container: Prow's pod utilities set `JOB_SPEC`
/// and point `ARTIFACTS` at the directory the sidecar uploads as the build's `artifacts/`.
fn prow_artifacts() -> Option<PathBuf> {
    std::env::var_os("JOB_SPEC").filter(|spec| !spec.is_empty())?;
    std::env::var_os("ARTIFACTS").filter(|dir| !dir.is_empty()).map(PathBuf::from)
}

/// The run's build directory for `--artifacts DIR`: DIR, or its parent when DIR is Prow's
/// `$ARTIFACTS` (named `artifacts`, as Prow's decoration names it), so that the build's
/// `artifacts/` is the directory Prow uploads (junit files, and the `metadata.json` the sidecar
/// merges into Prow's `finished.json`) and the harness's own `started.json`, `finished.json` and
/// `build-log.txt` are beside it, where Prow's upload does not take them.
pub(super) fn build_dir(artifacts: &std::path::Path, prow_artifacts: Option<&std::path::Path>) -> PathBuf {
    let is_prows = prow_artifacts.is_some_and(|prow| prow == artifacts);
    match artifacts.parent() {
        Some(parent) if is_prows && artifacts.file_name() == Some(results::layout::ARTIFACTS.as_ref()) => {
            parent.to_path_buf()
        }
        _ if is_prows => {
            tracing::warn!(
                "$ARTIFACTS ({}) is not named {}, as Prow's decoration names it: it is the build directory, and metadata.json goes to its artifacts/",
                artifacts.display(),
                results::layout::ARTIFACTS
            );
            artifacts.to_path_buf()
        }
        _ => artifacts.to_path_buf(),
    }
}

/// Every cell of the matrix (`config::jobs::cells`: provider × Kubernetes version × job, each job
/// with its own suites), or those the filters keep, each a `harness run` on a cluster of its own.
pub async fn run_matrix(mut args: MatrixArgs) -> Result<()> {
    let config = args.common.config.load()?;
    let mut versions = Vec::new();
    for requested in std::mem::take(&mut args.versions) {
        versions.extend(super::resolve_marker(Some(requested)).await?);
    }
    args.versions = versions;
    for name in &args.providers {
        if config.provider(name).is_none() {
            bail!("unknown provider {name:?}: providers.yaml defines {}", provider_names(&config));
        }
    }
    let cells: Vec<Cell<'_>> = config.cells().into_iter().filter(|cell| args.selects(cell)).collect();
    if cells.is_empty() {
        bail!("the matrix is empty: no provider × Kubernetes version matches the filters");
    }
    // Opened (and refused, when no checkout) before anything starts; worktrees kept to the end.
    let checkout_builds = checkout_builds(&args)?;
    let planned = plan_cells(&args, &cells, checkout_builds.as_ref())?;
    let base = run::generated_build_id();
    // A SIGINT or SIGTERM stops the cell under way (each run handles it) and every cell not started.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let stop = &stop;
    let runs = planned.iter().enumerate().map(|(i, planned)| {
        let cell = &planned.cell;
        // Its own cluster (name, state dir, free ports) and artifacts directory per cell.
        let artifacts = args.common.artifacts.join(&planned.dir_name);
        let mut opts =
            args.common.options(&cell.provider.name, format!("{base}{i}"), artifacts, planned.cluster.clone());
        opts.kubernetes = planned.kubernetes.clone();
        opts.job = Some(cell.name.clone());
        opts.suites = Some(args.suites.clone().unwrap_or_else(|| cell.suites().to_vec()));
        let config = &config;
        async move {
            if stop.load(std::sync::atomic::Ordering::SeqCst) {
                return (planned.dir_name.clone(), None);
            }
            let result = run::run(config, &opts).await;
            if result.as_ref().is_ok_and(|report| report.stopped_by().is_some()) {
                stop.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            (planned.dir_name.clone(), Some(result))
        }
    });
    let results: Vec<_> = futures::stream::iter(runs).buffer_unordered(args.parallel.max(1)).collect().await;
    let mut failed = Vec::new();
    let mut interrupted = None;
    for (cell, result) in &results {
        let Some(result) = result else {
            println!("== {cell}: not run (the matrix was interrupted)");
            continue;
        };
        match result {
            Ok(report) => {
                println!("== {cell}: {}", if report.passed { "PASSED" } else { "FAILED" });
                print_report(report);
                interrupted = interrupted.or(report.stopped_by());
                if let Some(why) = report.failure() {
                    failed.push(format!("{cell}: {why}"));
                }
            }
            Err(e) => failed.push(format!("{cell}: {e}")),
        }
    }
    if let Some(signal) = interrupted {
        return Err(Interrupted(signal).into());
    }
    if !failed.is_empty() {
        bail!("{} of {} matrix cells failed: {}", failed.len(), results.len(), failed.join("; "));
    }
    Ok(())
}

/// A run of the matrix: a cell, at its version or a checkout's build.
pub(super) struct PlannedCell<'a> {
    pub(super) cell: Cell<'a>,
    pub(super) kubernetes: Option<String>,
    /// Its artifacts directory: the cell's name, and for a checkout's commit, the commit's.
    pub(super) dir_name: String,
    pub(super) cluster: String,
}

/// Kubernetes from `--kubernetes-source`: one build per commit (the checkout as it is, or a
/// worktree per `--kubernetes-commit`), oldest first.
pub(super) struct CheckoutBuilds {
    /// Each build's version and commit.
    builds: Vec<(String, String)>,
    /// Removed when the matrix ends.
    _worktrees: Vec<harness::bisect::git::Worktree>,
}

impl CheckoutBuilds {
    /// Builds of these versions and commits, in no worktree.
    #[cfg(test)]
    pub(super) fn of(builds: Vec<(String, String)>) -> Self {
        CheckoutBuilds { builds, _worktrees: Vec::new() }
    }
}

fn checkout_builds(args: &MatrixArgs) -> Result<Option<CheckoutBuilds>> {
    let Some(dir) = &args.kubernetes_source else { return Ok(None) };
    let release = toolchain::from_checkout(dir)?;
    let checkout = release.source.expect("a checkout's release has its source");
    if args.kubernetes_commits.is_empty() {
        let builds = vec![(release.version.to_owned(), checkout.commit.clone())];
        return Ok(Some(CheckoutBuilds { builds, _worktrees: Vec::new() }));
    }
    let repo = harness::bisect::git::Repo::open(&checkout.dir)?;
    repo.prune_worktrees();
    let (mut builds, mut worktrees) = (Vec::new(), Vec::new());
    for rev in &args.kubernetes_commits {
        let commit = repo.resolve(rev)?;
        // One per process: two matrices of one commit at once each have their own.
        let name = format!("{commit}-{}", std::process::id());
        let place = cli_support::roots::cache_root().join("kubernetes-worktrees").join(name);
        if place.exists() {
            // Left by a killed matrix that had this process id.
            std::fs::remove_dir_all(&place)?;
            repo.prune_worktrees();
        }
        let worktree = repo.add_worktree(&place, &commit)?;
        let release = toolchain::from_checkout(worktree.dir())?;
        builds.push((release.version.to_owned(), commit));
        worktrees.push(worktree);
    }
    Ok(Some(CheckoutBuilds { builds, _worktrees: worktrees }))
}

/// The runs of `cells`: each at its version; with a checkout, each cell of its minor at each of
/// its builds (build after build, so a commit's cells run together).
pub(super) fn plan_cells<'a>(
    args: &MatrixArgs,
    cells: &[Cell<'a>],
    checkout: Option<&CheckoutBuilds>,
) -> Result<Vec<PlannedCell<'a>>> {
    let Some(checkout) = checkout else {
        let plan = cells.iter().map(|cell| PlannedCell {
            cell: cell.clone(),
            kubernetes: args.version_of(cell).map(|version| version.to_string()),
            dir_name: cell.name.clone(),
            cluster: cluster_name(cell),
        });
        return Ok(plan.collect());
    };
    let mut plan = Vec::new();
    for (i, (version, commit)) in checkout.builds.iter().enumerate() {
        let parsed: KubernetesVersion = version.parse().map_err(|e: String| anyhow::anyhow!(e))?;
        let suffix = if checkout.builds.len() > 1 { format!("-{i}") } else { String::new() };
        for cell in cells.iter().filter(|cell| cell.kubernetes.minor_line() == parsed.minor_line()) {
            plan.push(PlannedCell {
                cell: cell.clone(),
                kubernetes: Some(version.clone()),
                dir_name: format!("{}-{}", cell.name, &commit[..12]),
                cluster: cluster_name_with(cell, &suffix),
            });
        }
    }
    if plan.is_empty() {
        let (version, _) = &checkout.builds[0];
        bail!(
            "no cell of the matrix the filters keep is of Kubernetes {version}'s minor: the checkout's cells are \
             those of its minor (providers.yaml's `kubernetes:` lists each provider's)"
        );
    }
    Ok(plan)
}

fn provider_names(config: &config::ProvidersConfig) -> String {
    config.providers.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")
}

fn print_report(report: &RunReport) {
    println!("job {} build {} (Kubernetes {})", report.job, report.build, report.kubernetes_version);
    for step in &report.steps {
        let (mark, detail) = match &step.result {
            StepResult::Passed => ("ok     ", String::new()),
            StepResult::Failed(why) => ("FAILED ", format!(": {why}")),
            StepResult::Skipped(why) => ("skipped", format!(": {why}")),
        };
        println!("  {mark} {:<16} {:>7.1}s{detail}", step.name, step.duration.as_secs_f64());
    }
    println!("  build dir: {}", report.build_dir.display());
    match &report.published {
        Ok(url) => println!("  published: {url}"),
        Err(e) => {
            println!("  NOT published: {e}");
            println!(
                "  the build is kept in {}; to publish it once the store and database answer:",
                e.later.dir.display()
            );
            println!("    {}", e.later.command);
            if let Some(needs) = &e.later.needs {
                println!("  with {needs}");
            }
        }
    }
}

fn outcome(report: &RunReport) -> Result<()> {
    if let Some(signal) = report.stopped_by() {
        return Err(Interrupted(signal).into());
    }
    match report.failure() {
        Some(why) => bail!("{why}"),
        None => Ok(()),
    }
}

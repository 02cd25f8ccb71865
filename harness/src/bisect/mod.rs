//! `harness bisect`: from a provider's culprit range to the commit that broke it.
//!
//! The search itself is [`lkg::bisect`] (pure); this is the driver. It takes the range from the
//! LKG engine (the provider side of the provider's culprit range on a release line) or from
//! `--good`/`--bad`, lists the provider repository's first-parent commits in it, and tests points
//! of it: each point is a real `harness run` ([`crate::run::run`]) of the provider built at that
//! commit in a git worktree of its repository, on the provider's deployer, with its required suites,
//! published as a build of job `bisect-<provider>-<line>` with its versions. So the LKG engine, the
//! dashboard and the API see every step, and the culprit range shrinks as they come in.
//!
//! The verdict of each run is read back from the index, never from the run's own report: a build
//! that passed is good, one that failed is bad (run again up to `--runs-per-point` times, the
//! flake policy), and one whose Build or Up step failed ends `ERROR` and is *untestable* (skipped
//! around, as `git bisect skip`; the LKG takes no verdict from it). Nothing else is kept: killed
//! and started again, a bisection reads the builds of its job from the index and goes on.

pub mod git;
pub mod kubernetes;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use lkg::api::{CulpritView, Snapshot};
use lkg::bisect::{Answer, Bisection, Outcome, PointVerdict};
use serde::Serialize;

use crate::run::{self, RunOptions, steps::RUNNER_SUITE};
use config::{Provider, ProvidersConfig};
use git::{CommitInfo, Repo};
use results::index::Index;
use results::known_good::{HistorySpec, LkgOptions};
use results::record::{BuildInfo, State, TestStatus};

/// Which repository's history to bisect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Provider,
    Kubernetes,
}

/// What `harness bisect` was asked to do.
#[derive(Debug, Clone)]
pub struct BisectOptions {
    pub provider: String,
    pub side: Side,
    /// The release line [default: the newest, as the LKG answers].
    pub line: Option<String>,
    /// Points tested at once, each its own run (and cluster).
    pub parallel: usize,
    /// Runs of a failing point before it counts as bad.
    pub runs_per_point: u32,
    pub good: Option<String>,
    pub bad: Option<String>,
    /// A clone of the provider's repository [default: the `git:` path of its --provider-history].
    pub repo: Option<PathBuf>,
    /// The Kubernetes version every point runs with [default: the first bad pair's].
    pub kubernetes: Option<String>,
    /// `--side kubernetes`: the provider commit every point runs with [default: the repo's HEAD].
    pub commit: Option<String>,
    /// `--side kubernetes`: the tags to test between the ends [default: every tag the Go module
    /// proxy serves between them].
    pub points: Option<Vec<String>>,
    /// `--side kubernetes`: a kubernetes/kubernetes checkout whose first-parent commits between
    /// the ends are the points, each built in a worktree of its own.
    pub kubernetes_source: Option<PathBuf>,
    pub store: String,
    pub database: String,
    pub lkg: LkgOptions,
    /// Where each point's worktree and build directory go (removed after the run).
    pub work_dir: PathBuf,
    /// Each run's `--timeout`.
    pub timeout: Duration,
}

/// A build of the bisect job, as the answer links it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BuildRef {
    pub job: String,
    pub build: String,
    /// The build directory in the store.
    pub artifacts_url: String,
    /// The dashboard's page of the build (`harness serve`).
    pub page: String,
}

impl BuildRef {
    fn new(job: &str, build: &str, artifacts_url: &str) -> Self {
        BuildRef {
            job: job.to_owned(),
            build: build.to_owned(),
            artifacts_url: artifacts_url.to_owned(),
            page: format!("/job/{job}/build/{build}"),
        }
    }
}

/// One run of a point.
#[derive(Debug, Clone, Serialize)]
pub struct PointRun {
    #[serde(flatten)]
    pub build: BuildRef,
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Wall time of the run; `None` for a run read back from the index.
    pub seconds: Option<f64>,
    /// `--side kubernetes`: time spent pinning and building the point's toolchain before the run
    /// (0 when cached); `None` on the provider side and for a run read back from the index.
    pub toolchain_seconds: Option<f64>,
    /// Read from the index (an earlier invocation ran it).
    pub resumed: bool,
    /// The round of this invocation it ran in (0 when resumed).
    pub round: u32,
}

/// A point that was run.
#[derive(Debug, Clone, Serialize)]
pub struct PointReport {
    pub commit: String,
    pub subject: String,
    /// Its place in the range, 1 = the oldest commit after the good end.
    pub position: usize,
    #[serde(flatten)]
    pub verdict: PointVerdict,
    pub runs: Vec<PointRun>,
}

/// What `harness bisect` found.
#[derive(Debug, Clone, Serialize)]
pub struct BisectReport {
    pub provider: String,
    pub line: String,
    pub side: Side,
    pub job: String,
    /// The Kubernetes version every point ran with (`--side provider`), or `range` when the
    /// points are Kubernetes versions (`--side kubernetes`).
    pub kubernetes: String,
    /// The provider commit every point ran with on `--side kubernetes`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_commit: Option<String>,
    pub repo: PathBuf,
    /// Where the range came from: `lkg` (the provider's culprit range) or `flags`.
    pub range_from: &'static str,
    pub good: String,
    pub bad: String,
    /// Commits in the range (the bad end included): the possible answers at the start.
    pub commits: usize,
    pub parallel: usize,
    pub runs_per_point: u32,
    /// Rounds this invocation ran (points tested at once count as one).
    pub rounds: u32,
    /// Rounds a bisection of the range takes with no flake and no untestable point.
    pub expected_rounds: u32,
    /// Runs read back from the index rather than run.
    pub resumed_runs: usize,
    pub points: Vec<PointReport>,
    pub answer: Answer,
    /// The first bad commit: subject, author and date from git.
    pub first_bad: CommitInfo,
    /// When untestable points leave a range: every commit the first bad one may be, oldest first.
    pub candidates: Vec<CommitInfo>,
    /// Tests that fail at the first bad commit and pass at the last good one.
    pub failing_tests: Vec<String>,
    pub bad_build: Option<BuildRef>,
    pub good_build: Option<BuildRef>,
    /// Points that passed above the first bad one: the runs disagree with one regression.
    pub inconsistent: Vec<String>,
    pub wall_seconds: f64,
}

/// The job a provider's bisections on a line publish to.
pub fn job_name(provider: &str, line: &str) -> String {
    lkg::api::bisect_job(provider, line)
}

/// The range to bisect and what it is run with.
struct Plan<'a> {
    provider: &'a Provider,
    side: Side,
    line: String,
    /// The Kubernetes version held fixed (`--side provider`).
    kubernetes: String,
    /// The provider commit held fixed (`--side kubernetes`).
    commit: Option<String>,
    good: String,
    bad: String,
    range_from: &'static str,
    snapshot: Option<Snapshot>,
    /// `--side kubernetes --kubernetes-source`: the points are commits of this checkout.
    checkout: Option<CheckoutRange>,
}

/// The commits of a kubernetes/kubernetes checkout a Kubernetes-side bisection runs.
struct CheckoutRange {
    repo: Repo,
    /// The points, oldest first.
    commits: Vec<String>,
    /// Each point's version, as its build records it (`v1.37.1-3+0123456789abcd`).
    versions: Vec<String>,
}

/// Runs a bisection to its answer (see the module doc).
pub async fn bisect(config: &ProvidersConfig, opts: &BisectOptions) -> Result<BisectReport> {
    let wall = Instant::now();
    let provider = config.provider(&opts.provider).with_context(|| {
        let known = config.providers.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ");
        format!("unknown provider {:?}: {} defines {known}", opts.provider, config.source.display())
    })?;
    if opts.parallel == 0 {
        bail!("--parallel must be at least 1");
    }
    let repo = Repo::open(&repo_dir(provider, opts)?)?;
    let (plan, good, points) = match opts.side {
        Side::Provider => {
            let plan = plan(config, provider, opts).await?;
            let (good, points) = repo.first_parent_range(&plan.good, &plan.bad)?;
            (plan, good, points)
        }
        Side::Kubernetes => kubernetes_plan(provider, opts, &repo).await?,
    };
    let mut bisection = Bisection::new(good.clone(), points.clone(), opts.runs_per_point)?;
    let job = job_name(&provider.name, &plan.line);
    // Every run publishes to the index: opening it here also creates it for --good/--bad.
    let index = Index::open(&opts.database).await?;
    repo.prune_worktrees();

    let mut runs: BTreeMap<usize, Vec<PointRun>> = BTreeMap::new();
    let resumed = resume(&index, &job, &plan, &mut bisection, &mut runs).await?;
    if resumed > 0 {
        println!("{job}: {resumed} run(s) of this range read back from the index");
    }
    let ctx = Ctx { config, opts, repo: &repo, index: &index, job: &job, plan: &plan };
    let mut rounds = 0;
    loop {
        let next = bisection.next(opts.parallel);
        if next.is_empty() {
            break;
        }
        rounds += 1;
        let current = bisection.current();
        println!(
            "round {rounds}: {} point(s) of the {} commit(s) after {} up to {}",
            next.len(),
            bisection.position(&current.first_bad).map_or(0, |i| i + 1)
                - bisection.position(&current.last_good).map_or(0, |i| i + 1),
            short(&current.last_good),
            short(&current.first_bad)
        );
        let evaluations = next.iter().enumerate().map(|(slot, &point)| {
            let failures = match bisection.verdict(point) {
                PointVerdict::Retrying { failures } => failures,
                _ => 0,
            };
            ctx.evaluate(point, &points[point], failures, slot, rounds)
        });
        let done: Vec<Result<(usize, Vec<PointRun>)>> =
            futures::stream::iter(evaluations).buffer_unordered(opts.parallel).collect().await;
        for result in done {
            let (point, point_runs) = result?;
            for run in point_runs {
                bisection.record(point, run.outcome.clone());
                runs.entry(point).or_default().push(run);
            }
        }
    }
    let answer = bisection.answer().expect("the loop ends when nothing is left to run");
    report(&ctx, &bisection, runs, answer, rounds, resumed, wall.elapsed()).await
}

/// The provider's repository: --repo, else its `git:` history.
fn repo_dir(provider: &Provider, opts: &BisectOptions) -> Result<PathBuf> {
    if let Some(dir) = &opts.repo {
        return Ok(dir.clone());
    }
    match opts.lkg.provider_histories.get(&provider.name) {
        Some(HistorySpec::Git { path, .. }) => Ok(path.clone()),
        _ => bail!(
            "harness bisect needs a local clone of {}'s repository ({}): give --repo PATH, or \
             --provider-history {}=git:PATH (which also orders its commits for the LKG)",
            provider.name,
            provider.repo,
            provider.name
        ),
    }
}

/// The range and the Kubernetes version: from --good/--bad, else the LKG's culprit range.
async fn plan<'a>(config: &'a ProvidersConfig, provider: &'a Provider, opts: &BisectOptions) -> Result<Plan<'a>> {
    match (&opts.good, &opts.bad) {
        (Some(good), Some(bad)) => {
            let line = opts.line.clone().unwrap_or_else(|| lkg::api::DEFAULT_LINE.to_owned());
            let lines: Vec<String> = provider.release_lines().into_iter().map(|(line, _)| line).collect();
            if !lines.contains(&line) {
                bail!(
                    "provider {} has no release line {line:?}: its lines are {} (a release-1.X branch in `branches` \
                     makes line 1.X)",
                    provider.name,
                    lines.join(", ")
                );
            }
            let requested = opts.kubernetes.clone().or_else(|| (line != lkg::api::DEFAULT_LINE).then(|| line.clone()));
            let kubernetes = match requested {
                Some(requested) => matrix_version(provider, &requested)?,
                None => provider.kubernetes.first().map(ToString::to_string).unwrap_or_default(),
            };
            Ok(Plan {
                provider,
                side: Side::Provider,
                line,
                kubernetes,
                commit: None,
                good: good.clone(),
                bad: bad.clone(),
                range_from: "flags",
                snapshot: None,
                checkout: None,
            })
        }
        (None, None) => lkg_plan(config, provider, opts).await,
        _ => bail!("give both --good and --bad, or neither (the range then comes from the LKG's culprit range)"),
    }
}

async fn lkg_plan<'a>(config: &'a ProvidersConfig, provider: &'a Provider, opts: &BisectOptions) -> Result<Plan<'a>> {
    let index = Index::open_existing(&opts.database).await?;
    let snapshot = results::known_good::load(config, &opts.lkg, &index).await;
    index.close().await;
    let snapshot = snapshot?;
    let view = lkg::api::culprits(&snapshot, opts.line.as_deref(), &provider.name)?;
    let range = provider_range(&view)?;
    let kubernetes = match (&opts.kubernetes, view.culprit.as_ref().and_then(|c| c.kubernetes.as_ref())) {
        (Some(version), _) => version.clone(),
        (None, None) => recorded_kubernetes(&view).with_context(|| {
            format!(
                "the LKG of {} names no build whose Kubernetes version a run can take: give --kubernetes V",
                provider.name
            )
        })?,
        (None, Some(kubernetes)) => bail!(
            "both sides changed between {}'s LKG and its first bad pair (Kubernetes {}..{}): give --kubernetes V \
             to hold Kubernetes at one version while the provider side is bisected, or bisect the Kubernetes side first",
            provider.name,
            kubernetes.last_good,
            kubernetes.first_bad
        ),
    };
    let kubernetes = matrix_version(provider, &kubernetes)?;
    Ok(Plan {
        provider,
        side: Side::Provider,
        line: view.line.clone(),
        kubernetes,
        commit: None,
        good: range.last_good.clone(),
        bad: range.first_bad.clone(),
        range_from: "lkg",
        snapshot: Some(snapshot),
        checkout: None,
    })
}

/// The Kubernetes side: the tags between `--good` and `--bad` that the Go module proxy serves are
/// the points, and the provider commit `--commit` (default: the repository's HEAD) is held fixed.
async fn kubernetes_plan<'a>(
    provider: &'a Provider,
    opts: &BisectOptions,
    repo: &Repo,
) -> Result<(Plan<'a>, String, Vec<String>)> {
    let (Some(good), Some(bad)) = (&opts.good, &opts.bad) else {
        bail!(
            "--side kubernetes needs --good and --bad Kubernetes tags (for example --good v1.36.4 --bad v1.37.1); \
             taking them from the LKG's culprit range is not supported yet"
        );
    };
    if let Some(kubernetes) = &opts.kubernetes {
        bail!(
            "--kubernetes {kubernetes} holds Kubernetes fixed, but --side kubernetes bisects it: give the provider \
             commit to hold fixed with --commit REV instead"
        );
    }
    let line = opts.line.clone().unwrap_or_else(|| lkg::api::DEFAULT_LINE.to_owned());
    let lines: Vec<String> = provider.release_lines().into_iter().map(|(line, _)| line).collect();
    if !lines.contains(&line) {
        bail!("provider {} has no release line {line:?}: its lines are {}", provider.name, lines.join(", "));
    }
    let commit = repo.resolve(opts.commit.as_deref().unwrap_or("HEAD"))?;
    if let Some(source) = &opts.kubernetes_source {
        if opts.points.is_some() {
            bail!("--points names tags; with --kubernetes-source every first-parent commit of the range is a point");
        }
        let plan = checkout_plan(provider, line, commit, source, good, bad)?;
        let (good, points) = (plan.good.clone(), plan.checkout.as_ref().map(|c| c.commits.clone()).unwrap_or_default());
        return Ok((plan, good, points));
    }
    let (good_tag, bad_tag) = (kubernetes::end("good", good)?, kubernetes::end("bad", bad)?);
    let points = match &opts.points {
        Some(given) => kubernetes::given_points(&good_tag, &bad_tag, given)?,
        None => {
            let (g, b) = (good_tag.clone(), bad_tag.clone());
            let points = tokio::task::spawn_blocking(move || kubernetes::points(&g, &b)).await??;
            println!(
                "Kubernetes {good_tag}..{bad_tag}: the Go module proxy serves {} point(s): {}",
                points.len(),
                points.join(" ")
            );
            points
        }
    };
    let plan = Plan {
        provider,
        side: Side::Kubernetes,
        line,
        kubernetes: format!("{good_tag}..{bad_tag}"),
        commit: Some(commit),
        good: good_tag.to_string(),
        bad: bad_tag.to_string(),
        range_from: "flags",
        snapshot: None,
        checkout: None,
    };
    Ok((plan, good_tag.to_string(), points))
}

/// The Kubernetes side over a checkout: the first-parent commits of `good..bad` in it are the
/// points, each with the version its build will record (read from git, nothing checked out).
fn checkout_plan<'a>(
    provider: &'a Provider,
    line: String,
    commit: String,
    source: &std::path::Path,
    good: &str,
    bad: &str,
) -> Result<Plan<'a>> {
    // Refused here, before anything runs, when it is no kubernetes/kubernetes checkout.
    let checkout = toolchain::checkout::Checkout::open(source)?;
    let repo = Repo::open(&checkout.dir)?;
    let (good, commits) = repo.first_parent_range(good, bad)?;
    let versions = commits
        .iter()
        .map(|commit| toolchain::checkout::version_at(repo.dir(), commit))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let bad = commits.last().cloned().unwrap_or_default();
    println!(
        "Kubernetes {}..{} in {}: {} first-parent commit(s): {}",
        short(&good),
        short(&bad),
        repo.dir().display(),
        commits.len(),
        versions.join(" ")
    );
    Ok(Plan {
        provider,
        side: Side::Kubernetes,
        line,
        kubernetes: format!("{}..{}", short(&good), short(&bad)),
        commit: Some(commit),
        good,
        bad,
        range_from: "flags",
        snapshot: None,
        checkout: Some(CheckoutRange { repo, versions, commits }),
    })
}

impl CheckoutRange {
    /// The point a build of `version` ran.
    fn position(&self, version: &str) -> Option<usize> {
        self.versions.iter().position(|v| v == version)
    }
}

/// The Kubernetes version the LKG's evidence builds recorded (`v1.37.1`, what `harness run` takes),
/// rather than the commit the LKG's history resolved it to.
fn recorded_kubernetes(view: &CulpritView) -> Option<String> {
    let lkg = view.lkg.as_ref()?;
    lkg.evidence.iter().find_map(|id| view.builds.get(id)).map(|link| link.kubernetes_version.clone())
}

/// `requested` as the provider's matrix names it (`1.37` → `v1.37.1`), so every point runs, and is
/// read back, with the same version.
fn matrix_version(provider: &Provider, requested: &str) -> Result<String> {
    let version = provider.kubernetes_version(Some(requested)).with_context(|| {
        let known = provider.kubernetes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
        format!(
            "provider {} is not tested against Kubernetes {requested:?}: a point runs one of its matrix, {known}; \
             give --kubernetes with one of them",
            provider.name
        )
    })?;
    Ok(version.to_string())
}

fn provider_range(view: &CulpritView) -> Result<&lkg::CommitRange> {
    let Some(culprit) = &view.culprit else {
        bail!(
            "provider {} has no culprit range on line {}: {}; give --good REV --bad REV to bisect a range of your own",
            view.provider,
            view.line,
            match (&view.lkg, &view.newest) {
                (None, _) => "it was never good (no LKG to bisect from)",
                (Some(_), _) => "its newest pair is good",
            }
        );
    };
    culprit.provider.as_ref().with_context(|| {
        format!(
            "the culprit range of {} on line {} is on the Kubernetes side only (the provider commit did not change): \
             bisect it with --side kubernetes",
            view.provider, view.line
        )
    })
}

/// The runs of this range the index already holds (this job, this Kubernetes version, a commit of
/// the range), oldest first, recorded in `bisection`; how many.
async fn resume(
    index: &Index,
    job: &str,
    plan: &Plan<'_>,
    bisection: &mut Bisection,
    runs: &mut BTreeMap<usize, Vec<PointRun>>,
) -> Result<usize> {
    let mut builds = index.latest_builds(job, i64::MAX).await?;
    builds.reverse();
    let mut count = 0;
    for info in builds {
        let (Some(version), Some(k)) = (&info.versions.provider_version, &info.versions.kubernetes_version) else {
            continue;
        };
        // The point is the side's own version; the other side's must be the one held fixed.
        let (point, fixed) = match plan.side {
            Side::Provider => (bisection.position(version), k == &plan.kubernetes),
            Side::Kubernetes => {
                let point = match &plan.checkout {
                    Some(range) => range.position(k),
                    None => bisection.position(k),
                };
                (point, plan.commit.as_deref() == Some(version.as_str()))
            }
        };
        let Some(point) = point.filter(|_| fixed) else { continue };
        let Some(outcome) = outcome_of(index, &info).await? else { continue };
        bisection.record(point, outcome.clone());
        let run = PointRun {
            build: BuildRef::new(job, &info.build, &info.artifacts_url),
            outcome,
            seconds: None,
            toolchain_seconds: None,
            resumed: true,
            round: 0,
        };
        runs.entry(point).or_default().push(run);
        count += 1;
    }
    Ok(count)
}

/// A build's verdict as the index has it; `None` for a build that says nothing (running, killed,
/// interrupted).
async fn outcome_of(index: &Index, info: &BuildInfo) -> Result<Option<Outcome>> {
    if info.state != State::Finished || info.result.as_deref() == Some("ABORTED") {
        return Ok(None);
    }
    if info.result.as_deref() == Some("ERROR") {
        let results = index.build_results(&info.job, &info.build).await?;
        let step = results.iter().find(|r| r.suite == RUNNER_SUITE && r.status == TestStatus::Fail);
        let reason = match step {
            Some(step) => format!("step {} failed: {}", step.name, step.message.as_deref().unwrap_or("")),
            None => "the build or the cluster failed".to_owned(),
        };
        return Ok(Some(Outcome::Untestable(reason.trim_end_matches([':', ' ']).to_owned())));
    }
    Ok(Some(if info.passed == Some(true) { Outcome::Pass } else { Outcome::Fail }))
}

struct Ctx<'a> {
    config: &'a ProvidersConfig,
    opts: &'a BisectOptions,
    repo: &'a Repo,
    index: &'a Index,
    job: &'a str,
    plan: &'a Plan<'a>,
}

impl Ctx<'_> {
    /// Runs point `point` until it has a verdict: once, or again after each failure until
    /// `--runs-per-point` failures.
    async fn evaluate(
        &self,
        point: usize,
        commit: &str,
        mut failures: u32,
        slot: usize,
        round: u32,
    ) -> Result<(usize, Vec<PointRun>)> {
        let mut runs = Vec::new();
        loop {
            let run = self.run_point(point, commit, slot, round).await?;
            let failed = run.outcome == Outcome::Fail;
            runs.push(run);
            if !failed {
                break;
            }
            failures += 1;
            if failures >= self.opts.runs_per_point {
                break;
            }
        }
        Ok((point, runs))
    }

    /// One `harness run` of the provider built at `commit`, and its verdict read from the index.
    async fn run_point(&self, point: usize, value: &str, slot: usize, round: u32) -> Result<PointRun> {
        // The point is a provider commit, or (the Kubernetes side) a Kubernetes version, or a
        // commit of the Kubernetes checkout, built in a worktree of its own.
        let mut kubernetes_worktree = None;
        let (commit, kubernetes) = match (self.plan.side, &self.plan.checkout) {
            (Side::Provider, _) => (value, self.plan.kubernetes.clone()),
            (Side::Kubernetes, checkout) => {
                let commit = self.plan.commit.as_deref().expect("the Kubernetes side holds a commit");
                let kubernetes = match checkout {
                    None => value.to_owned(),
                    Some(range) => {
                        let place = self.opts.work_dir.join("kubernetes").join(next_build_id());
                        let worktree = range.repo.add_worktree(&place, value)?;
                        let release = toolchain::from_checkout(worktree.dir())?;
                        kubernetes_worktree = Some(worktree);
                        release.version.to_owned()
                    }
                };
                (commit, kubernetes)
            }
        };
        let (config, toolchain_seconds) = match self.plan.side {
            Side::Provider => (std::borrow::Cow::Borrowed(self.config), None),
            Side::Kubernetes => {
                let (config, seconds) = self.kubernetes_point(&kubernetes).await?;
                (std::borrow::Cow::Owned(config), Some(seconds))
            }
        };
        let build_id = next_build_id();
        let worktree = self.repo.add_worktree(&self.opts.work_dir.join("worktrees").join(&build_id), commit)?;
        let artifacts = self.opts.work_dir.join("builds").join(&build_id);
        let required = &self.plan.provider.required.suites;
        let opts = RunOptions {
            provider: self.plan.provider.name.clone(),
            kubernetes: Some(kubernetes.clone()),
            provider_version: Some(commit.to_owned()),
            suites: (!required.is_empty()).then(|| required.clone()),
            job: Some(self.job.to_owned()),
            build_id: build_id.clone(),
            artifacts: artifacts.clone(),
            store: self.opts.store.clone(),
            database: self.opts.database.clone(),
            timeout: self.opts.timeout,
            keep_cluster: false,
            provider_dir: worktree.dir().to_path_buf(),
            cluster_name: format!("bisect-{}-{slot}", self.plan.provider.name),
            infrastructure_error: true,
            // The bundled reference CCM is built from the worktree: its commit is the point.
            cargo_workspace: Some(worktree.dir().to_path_buf()),
            ccm_libraries: toolchain::Libraries::Checkout,
            publish_retries: Default::default(),
            upgrade: None,
        };
        let started = Instant::now();
        let report = run::run(&config, &opts).await;
        drop(worktree);
        drop(kubernetes_worktree);
        let _ = std::fs::remove_dir_all(&artifacts);
        let report = report.with_context(|| format!("running point {}", short(value)))?;
        if let Some(signal) = report.interrupted {
            return Err(cli_support::signals::Interrupted(signal).into());
        }
        if let Err(why) = &report.published {
            bail!("point {}: build {build_id} ran but was not published, so it cannot count: {why}", short(value));
        }
        let info = self
            .index
            .build(self.job, &build_id)
            .await?
            .with_context(|| format!("build {}/{build_id} is not in the index after publishing", self.job))?;
        let outcome = outcome_of(self.index, &info)
            .await?
            .with_context(|| format!("build {}/{build_id} has no result in the index", self.job))?;
        let seconds = started.elapsed().as_secs_f64();
        let said = match &outcome {
            Outcome::Pass => "good".to_owned(),
            Outcome::Fail => "bad".to_owned(),
            Outcome::Untestable(why) => format!("untestable ({why})"),
        };
        println!(
            "point {} (position {}): {said} in {seconds:.1}s, build {}/{build_id} {}",
            short(value),
            point + 1,
            self.job,
            info.artifacts_url
        );
        Ok(PointRun {
            build: BuildRef::new(self.job, &build_id, &info.artifacts_url),
            outcome,
            seconds: Some(seconds),
            toolchain_seconds,
            resumed: false,
            round,
        })
    }
}

impl Ctx<'_> {
    /// Pins and builds the toolchain of Kubernetes `version` (unless cached) and returns the
    /// configuration a run of it takes: the provider's matrix is that one version. A toolchain that
    /// cannot be built is left to the run, whose Build or Up step then fails: the point is untestable.
    async fn kubernetes_point(&self, version: &str) -> Result<(ProvidersConfig, f64)> {
        let started = Instant::now();
        let parsed: config::KubernetesVersion =
            version.parse().map_err(|e: String| anyhow::anyhow!(e)).context("a point of the Kubernetes side")?;
        let mut config = self.config.clone();
        for provider in config.providers.iter_mut().filter(|p| p.name == self.plan.provider.name) {
            provider.kubernetes = vec![parsed.clone()];
        }
        if !kubernetes::needs_toolchain(self.config, self.plan.provider) {
            return Ok((config, 0.0));
        }
        let requested = version.to_owned();
        let install = tokio::task::spawn_blocking(move || {
            let release = toolchain::resolve_or_pin(&requested)?;
            toolchain::install(&release, false)
        })
        .await?;
        let seconds = started.elapsed().as_secs_f64();
        match install {
            Ok(toolchain) => {
                println!("Kubernetes {version}: toolchain {} ready in {seconds:.1}s", toolchain.dir.display())
            }
            Err(e) => tracing::warn!("Kubernetes {version}: no toolchain ({e}); the run will say why"),
        }
        Ok((config, seconds))
    }

    /// What the report says of a point: its commit on the provider side; on the Kubernetes side,
    /// the version (its subject `Kubernetes vX`; no author or date).
    fn point_info(&self, point: &str) -> Result<CommitInfo> {
        match (self.plan.side, &self.plan.checkout) {
            (Side::Provider, _) => Ok(self.repo.commit_info(point)?),
            (Side::Kubernetes, Some(range)) => Ok(range.repo.commit_info(point)?),
            (Side::Kubernetes, None) => Ok(CommitInfo {
                commit: point.to_owned(),
                subject: format!("Kubernetes {point}"),
                author: String::new(),
                date: String::new(),
            }),
        }
    }
}

/// Build ids that sort as Prow's do (milliseconds since the epoch), distinct within the process.
fn next_build_id() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    format!("{}{:03}", run::generated_build_id(), COUNTER.fetch_add(1, Ordering::Relaxed) % 1000)
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

async fn report(
    ctx: &Ctx<'_>,
    bisection: &Bisection,
    runs: BTreeMap<usize, Vec<PointRun>>,
    answer: Answer,
    rounds: u32,
    resumed: usize,
    wall: Duration,
) -> Result<BisectReport> {
    let repo = ctx.repo;
    let points = runs
        .into_iter()
        .map(|(point, runs)| {
            let commit = bisection.points()[point].clone();
            let subject = ctx.point_info(&commit).map(|c| c.subject).unwrap_or_default();
            Ok(PointReport { commit, subject, position: point + 1, verdict: bisection.verdict(point), runs })
        })
        .collect::<Result<Vec<_>>>()?;
    let bad_builds = ctx.builds_of(&points, &answer.first_bad, false).await?;
    let good_build = ctx.builds_of(&points, &answer.last_good, true).await?.into_iter().next();
    let failing_tests = failing_tests(ctx.index, &bad_builds, good_build.as_ref()).await?;
    let bad_build = bad_builds.into_iter().next();
    let candidates = if answer.is_exact() {
        Vec::new()
    } else {
        answer.candidates().into_iter().map(|c| ctx.point_info(c)).collect::<Result<_>>()?
    };
    Ok(BisectReport {
        provider: ctx.plan.provider.name.clone(),
        line: ctx.plan.line.clone(),
        side: ctx.plan.side,
        job: ctx.job.to_owned(),
        kubernetes: ctx.plan.kubernetes.clone(),
        provider_commit: ctx.plan.commit.clone(),
        repo: repo.dir().to_path_buf(),
        range_from: ctx.plan.range_from,
        good: bisection.last_good().to_owned(),
        bad: bisection.points().last().cloned().unwrap_or_default(),
        commits: bisection.points().len(),
        parallel: ctx.opts.parallel,
        runs_per_point: ctx.opts.runs_per_point,
        rounds,
        expected_rounds: lkg::bisect::expected_rounds(bisection.points().len(), ctx.opts.parallel),
        resumed_runs: resumed,
        points,
        first_bad: ctx.point_info(&answer.first_bad)?,
        candidates,
        failing_tests,
        bad_build,
        good_build,
        inconsistent: bisection.inconsistent().into_iter().map(str::to_owned).collect(),
        answer,
        wall_seconds: wall.as_secs_f64(),
    })
}

impl Ctx<'_> {
    /// The builds of `commit` that passed (`good`) or failed: this bisection's, else (an end of the
    /// range it did not test) one the LKG holds with the same Kubernetes version.
    async fn builds_of(&self, points: &[PointReport], commit: &str, good: bool) -> Result<Vec<BuildRef>> {
        let wanted = if good { Outcome::Pass } else { Outcome::Fail };
        let own: Vec<BuildRef> = points
            .iter()
            .filter(|p| p.commit == commit)
            .flat_map(|p| &p.runs)
            .filter(|r| r.outcome == wanted)
            .map(|r| r.build.clone())
            .collect();
        if !own.is_empty() {
            return Ok(own);
        }
        let Some(snapshot) = &self.plan.snapshot else { return Ok(Vec::new()) };
        if self.plan.side == Side::Kubernetes {
            return Ok(Vec::new());
        }
        let same = |version: &str| version.len() >= 7 && (commit.starts_with(version) || version.starts_with(commit));
        for (id, link) in snapshot.builds.iter().rev() {
            if !same(&link.provider_version) || link.kubernetes_version != self.plan.kubernetes {
                continue;
            }
            let Some((job, build)) = id.rsplit_once('/') else { continue };
            let Some(info) = self.index.build(job, build).await? else { continue };
            if matches!(outcome_of(self.index, &info).await?, Some(o) if o == wanted) {
                return Ok(vec![BuildRef::new(job, build, &info.artifacts_url)]);
            }
        }
        Ok(Vec::new())
    }
}

/// The tests that failed in every build of `bad` and passed (or were flaky) in `good`; every test
/// that failed in all of `bad` when no good build is known. The runner's steps are left out.
async fn failing_tests(index: &Index, bad: &[BuildRef], good: Option<&BuildRef>) -> Result<Vec<String>> {
    let mut failed: Option<BTreeSet<String>> = None;
    for build in bad {
        let here: BTreeSet<String> = index
            .build_results(&build.job, &build.build)
            .await?
            .into_iter()
            .filter(|r| r.status == TestStatus::Fail && r.suite != RUNNER_SUITE)
            .map(|r| r.name)
            .collect();
        failed = Some(match failed {
            Some(before) => before.intersection(&here).cloned().collect(),
            None => here,
        });
    }
    let failed = failed.unwrap_or_default();
    let Some(good) = good else { return Ok(failed.into_iter().collect()) };
    let passed: BTreeSet<String> = index
        .build_results(&good.job, &good.build)
        .await?
        .into_iter()
        .filter(|r| matches!(r.status, TestStatus::Pass | TestStatus::Flaky))
        .map(|r| r.name)
        .collect();
    Ok(failed.intersection(&passed).cloned().collect())
}

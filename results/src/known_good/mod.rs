//! Last known good from the SQL index: takes every finished build's verdict against its
//! provider's policy (stored in the index, or judged once from the build's results and stored:
//! [`verdicts`]), orders the builds by the commit histories (a local git repository, GitHub, or the
//! versions the index has runs of) and hands them to the `lkg` engine. `harness lkg` prints the
//! answers, `harness serve` serves them.

mod cache;
pub mod export;
mod histories;
mod verdicts;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use lkg::api::{BuildLink, Snapshot};
use lkg::sources::HistoryCache;
use lkg::{
    CompactResult, Engine, JudgedRun, ProviderSpec, RunAdded, RunVerdict, TestCatalog, TestId, TestStatus, UnplacedRun,
};
use tracing::{info, warn};

pub use histories::HistorySpec;

use crate::index::{Index, LkgBuild};
use crate::record;
use config::{ProvidersConfig, TestMatcher};

/// Where the runs and the histories come from.
#[derive(Debug, Clone)]
pub struct LkgOptions {
    pub kubernetes_history: HistorySpec,
    /// Per provider; a provider not named here uses [`HistorySpec::Tested`].
    pub provider_histories: BTreeMap<String, HistorySpec>,
    /// Commits fetched at most per history.
    pub depth: usize,
    /// The GitHub API (`https://api.github.com`, or an Enterprise or test server).
    pub github_api: String,
}

/// The LKG of everything `index` holds, as of now.
pub async fn load(config: &ProvidersConfig, options: &LkgOptions, index: &Index) -> Result<Snapshot> {
    let snapshot = load_full(config, options, index).await?.snapshot;
    Ok(Arc::try_unwrap(snapshot).unwrap_or_else(|shared| (*shared).clone()))
}

/// The snapshot of a load that judges every build's results in the engines, as loads did before
/// verdicts were stored: the reference the stored verdicts must agree with.
#[cfg(test)]
async fn snapshot_from_results(config: &ProvidersConfig, options: &LkgOptions, index: &Index) -> Result<Snapshot> {
    let builds = index.lkg_builds().await?;
    let tests = verdicts::Tests::of(index.lkg_tests().await?);
    let policies = verdicts::policies(config, &tests.catalog);
    let rows: Vec<i64> = builds.iter().map(|b| b.row).collect();
    let (results, _) = read_results(index, None, &rows, &tests.ids).await?;
    let cache: Arc<dyn HistoryCache> = Arc::new(cache::IndexCache(index.clone()));
    snapshot(config, options, builds, &tests.catalog, &policies, Runs::Results(&results), &cache).await
}

/// Refuses `--provider-history` entries for providers that providers.yaml lacks.
pub fn check_options(config: &ProvidersConfig, options: &LkgOptions) -> Result<()> {
    if let Some(unknown) = options.provider_histories.keys().find(|name| config.provider(name).is_none()) {
        bail!(
            "--provider-history names provider {unknown:?}, which is not in {}: use one of {}",
            config.source.display(),
            config.providers.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")
        );
    }
    Ok(())
}

/// A loaded LKG and what it was computed from: every finished build and its verdict (a few bytes a
/// build, whatever its results), so later loads read from the index only what was indexed since,
/// and a rebuild (new histories, a build replaced) reads nothing but the histories.
#[derive(Debug)]
pub struct Loaded {
    /// The answers, shared with the server's readers: an update replaces it.
    pub snapshot: Arc<Snapshot>,
    /// Every finished build, in the order runs are added (start time, then row).
    builds: Vec<LkgBuild>,
    /// Build row → the verdict on its tests under its provider's policy.
    verdicts: HashMap<i64, RunVerdict>,
    tests: verdicts::Tests,
    /// Each provider's policy, as judged by: fixed for the life of a load.
    policies: BTreeMap<String, verdicts::Policy>,
    /// Builds the last load or update judged from their results (the others' verdicts were read).
    judged: usize,
    /// Each job's generation when its builds were read: an update reads the builds of the jobs
    /// whose generation moved, not every build.
    generations: HashMap<String, i64>,
    /// The snapshot lacks what `builds` holds, or its histories are due to be fetched again: the
    /// next update rebuilds it.
    stale: bool,
}

/// What [`load_new`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    /// Nothing was indexed since.
    Unchanged,
    /// The new builds were added to a copy of the engines.
    Added { builds: usize },
    /// The snapshot was computed again from the builds held (histories fetched again), for the
    /// reason given.
    Rebuilt { reason: String },
    /// Only reading the whole index again gives the right answer, for the reason given; nothing
    /// was changed.
    NeedsFull(String),
}

impl Loaded {
    /// The next update rebuilds the snapshot (fetching the histories again) even if nothing new
    /// was indexed.
    pub fn mark_stale(&mut self) {
        self.stale = true;
    }

    /// Build verdicts held, for the logs and the benchmarks.
    pub fn verdicts_held(&self) -> usize {
        self.verdicts.len()
    }

    /// Builds the last load or update judged from their results; the others' verdicts were read.
    pub fn judged(&self) -> usize {
        self.judged
    }
}

/// Every finished build in the index, read from scratch: each one's stored verdict, or its
/// results judged and the verdict stored.
pub async fn load_full(config: &ProvidersConfig, options: &LkgOptions, index: &Index) -> Result<Loaded> {
    check_options(config, options)?;
    // Before the builds: a build indexed in between is read again by the next update, never missed.
    let generations = index.job_generations().await?;
    let builds = index.lkg_builds().await?;
    let tests = verdicts::Tests::of(index.lkg_tests().await?);
    let policies = verdicts::policies(config, &tests.catalog);
    // Builds finished since the builds were read wait for the next load, as do tests committed
    // since (a build naming one is judged without it, as its results were, and not stored).
    let found = verdicts::verdicts(index, &policies, &tests, &with_providers(config, &builds), false).await?;
    let mut loaded = Loaded {
        snapshot: Arc::default(),
        builds,
        verdicts: found.verdicts,
        tests,
        policies,
        judged: found.judged,
        generations,
        stale: true,
    };
    rebuild(config, options, index, &mut loaded).await?;
    Ok(loaded)
}

/// Each build with the name of its provider; builds of providers not in the config are left out.
fn with_providers<'b, 'c>(config: &'c ProvidersConfig, builds: &'b [LkgBuild]) -> Vec<(&'b LkgBuild, &'c str)> {
    builds.iter().filter_map(|build| Some((build, provider_of(config, build)?.name.as_str()))).collect()
}

/// The results of the builds `rows` (of every build when `only` is `None`, else of those in it),
/// compact; and whether any names a test `test_ids` lacks (those are left out).
async fn read_results(
    index: &Index,
    only: Option<&[i64]>,
    rows: &[i64],
    test_ids: &HashMap<i64, TestId>,
) -> Result<(HashMap<i64, Vec<CompactResult>>, bool)> {
    let mut results: HashMap<i64, Vec<CompactResult>> = rows.iter().map(|row| (*row, Vec::new())).collect();
    let mut unknown_test = false;
    index
        .for_each_lkg_result(only, |build, test, status| match (results.get_mut(&build), test_ids.get(&test)) {
            (Some(held), Some(id)) => held.push(CompactResult::new(*id, lkg_status(status))),
            (Some(_), None) => unknown_test = true,
            (None, _) => {}
        })
        .await?;
    Ok((results, unknown_test))
}

/// Computes `loaded`'s snapshot again from the builds it holds, fetching the histories again.
pub async fn rebuild(config: &ProvidersConfig, options: &LkgOptions, index: &Index, loaded: &mut Loaded) -> Result<()> {
    let cache: Arc<dyn HistoryCache> = Arc::new(cache::IndexCache(index.clone()));
    let runs = Runs::Verdicts(&loaded.verdicts);
    let snapshot =
        snapshot(config, options, loaded.builds.clone(), &loaded.tests.catalog, &loaded.policies, runs, &cache).await?;
    loaded.snapshot = Arc::new(snapshot);
    loaded.stale = false;
    Ok(())
}

/// Takes in what was indexed since `loaded` was: the builds of the jobs whose generation moved are
/// listed (no other build is read), the verdicts of their new and replaced builds read (or judged
/// from their results and stored), and their builds that left the index dropped. New builds that
/// start after every build held, with versions already in their line's histories, are added to a
/// copy of the engines; anything else (or a stale snapshot) rebuilds the snapshot from the builds held.
/// Either way the answer is the one a full load would give (with the histories of the last
/// rebuild when builds were only added).
pub async fn load_new(
    config: &ProvidersConfig,
    options: &LkgOptions,
    index: &Index,
    loaded: &mut Loaded,
) -> Result<Update> {
    let generations = index.job_generations().await?;
    let moved = |job: &String| generations.get(job) != loaded.generations.get(job);
    let changed: BTreeSet<String> =
        generations.keys().chain(loaded.generations.keys()).filter(|j| moved(j)).cloned().collect();
    if changed.is_empty() && !loaded.stale {
        return Ok(Update::Unchanged);
    }
    // The builds of the other jobs are as held.
    let fresh = index.lkg_builds_of(&changed.iter().cloned().collect::<Vec<_>>()).await?;
    let held: HashMap<i64, &str> =
        loaded.builds.iter().filter(|b| changed.contains(&b.job)).map(|b| (b.row, b.digest.as_str())).collect();
    let mut read = std::collections::HashSet::new();
    let (mut new, mut replaced) = (0, 0);
    for build in &fresh {
        match held.get(&build.row) {
            Some(digest) if *digest == build.digest => {}
            Some(_) => {
                replaced += 1;
                read.insert(build.row);
            }
            None => {
                new += 1;
                read.insert(build.row);
            }
        }
    }
    let still: std::collections::HashSet<i64> = fresh.iter().map(|b| b.row).collect();
    let gone: Vec<i64> = held.keys().copied().filter(|row| !still.contains(row)).collect();
    if read.is_empty() && gone.is_empty() && !loaded.stale {
        loaded.generations = generations;
        return Ok(Update::Unchanged);
    }
    let mut reading = with_providers(config, &fresh);
    reading.retain(|(build, _)| read.contains(&build.row));
    let found = verdicts::verdicts(index, &loaded.policies, &loaded.tests, &reading, true).await?;
    if found.unknown_test {
        return Ok(Update::NeedsFull("a new build ran a test not loaded before".into()));
    }
    let last = loaded.builds.last().map(|b| (b.started_at, b.row));
    let appended: Vec<LkgBuild> = fresh.iter().filter(|b| !held.contains_key(&b.row)).cloned().collect();
    let only_appended = replaced == 0
        && gone.is_empty()
        && !loaded.stale
        && appended.iter().all(|b| Some((b.started_at, b.row)) > last);
    // From here on `loaded` holds the index's builds: a failed rebuild leaves it stale, to rebuild
    // at the next update.
    let left = gone.len();
    for row in gone {
        loaded.verdicts.remove(&row);
    }
    loaded.verdicts.extend(found.verdicts);
    loaded.judged = found.judged;
    if only_appended {
        loaded.builds.extend(appended.iter().cloned());
    } else {
        loaded.builds.retain(|b| !changed.contains(&b.job));
        loaded.builds.extend(fresh);
        loaded.builds.sort_by_key(|b| (b.started_at, b.row));
    }
    loaded.generations = generations;
    loaded.stale = true;
    let reason = if !only_appended {
        format!("{new} new, {replaced} replaced and {left} removed build(s), or histories due")
    } else {
        match add_to_copy(config, loaded, appended) {
            Ok(added) => {
                loaded.snapshot = Arc::new(added);
                loaded.stale = false;
                return Ok(Update::Added { builds: new });
            }
            Err(reason) => reason,
        }
    };
    rebuild(config, options, index, loaded).await?;
    Ok(Update::Rebuilt { reason })
}

/// `loaded`'s snapshot with `appended` added, or why that would not be what a full load gives.
fn add_to_copy(config: &ProvidersConfig, loaded: &Loaded, appended: Vec<LkgBuild>) -> Result<Snapshot, String> {
    let (builds, versionless) = attribute(config, appended);
    if let Some(provider) = versionless.keys().next() {
        return Err(format!("a new build of {provider} carries no versions"));
    }
    for build in &builds {
        let placed =
            loaded.snapshot.lines.get(&build.line).is_some_and(|engine| {
                engine.places(&build.provider, &build.kubernetes_version, &build.provider_version)
            });
        if !placed {
            return Err(format!(
                "build {}/{} names a version not in the histories of line {}",
                build.build.job, build.build.build, build.line
            ));
        }
    }
    let mut snapshot = (*loaded.snapshot).clone();
    for line in builds.iter().map(|b| b.line.clone()).collect::<BTreeSet<_>>() {
        let in_line: Vec<&Attributed> = builds.iter().filter(|b| b.line == line).collect();
        let engine = snapshot.lines.get_mut(&line).expect("placed above");
        snapshot.builds.append(&mut add_builds(engine, &in_line, Runs::Verdicts(&loaded.verdicts)));
    }
    snapshot.loaded_at = crate::unix_now();
    Ok(snapshot)
}

/// A build as the LKG takes it: its provider and versions settled, its release line chosen.
#[derive(Debug, Clone)]
struct Attributed {
    build: LkgBuild,
    provider: String,
    kubernetes_version: String,
    provider_version: String,
    line: String,
}

/// How a build's run goes into an engine: by its verdict, or (the reference the verdicts are
/// tested against) by its results, judged by the engine.
#[derive(Clone, Copy)]
enum Runs<'a> {
    Verdicts(&'a HashMap<i64, RunVerdict>),
    #[cfg(test)]
    Results(&'a HashMap<i64, Vec<CompactResult>>),
}

async fn snapshot(
    config: &ProvidersConfig,
    options: &LkgOptions,
    builds: Vec<LkgBuild>,
    catalog: &TestCatalog,
    policies: &BTreeMap<String, verdicts::Policy>,
    runs: Runs<'_>,
    cache: &Arc<dyn HistoryCache>,
) -> Result<Snapshot> {
    let (builds, versionless) = attribute(config, builds);
    let mut lines = BTreeMap::new();
    let mut links = BTreeMap::new();
    for line in line_names(config) {
        let in_line: Vec<&Attributed> = builds.iter().filter(|b| b.line == line).collect();
        let branch = kubernetes_branch(&line);
        let spec = if line == lkg::api::DEFAULT_LINE {
            options.kubernetes_history.clone()
        } else {
            options.kubernetes_history.on_branch(&branch)
        };
        let kubernetes = spec
            .history("kubernetes", &branch, &revisions(&in_line, |b| &b.kubernetes_version), options, cache)
            .await
            .with_context(|| format!("the Kubernetes history of line {line}"))?;
        let providers = provider_specs(config, options, &line, &in_line, policies, cache).await?;
        let mut engine = Engine::with_catalog(kubernetes, providers, catalog.clone());
        links.append(&mut add_builds(&mut engine, &in_line, runs));
        // A build with no Kubernetes version has no line either: the default line names it.
        if line == lkg::api::DEFAULT_LINE {
            for (provider, unplaced) in &versionless {
                for run in unplaced {
                    let _ = engine.add_unplaced(provider, run.clone());
                }
            }
        }
        lines.insert(line, engine);
    }
    info!("LKG over {} build(s) of {} provider(s) on {} line(s)", builds.len(), config.providers.len(), lines.len());
    Ok(Snapshot { lines, builds: links, loaded_at: crate::unix_now() })
}

/// Every release line of the providers: `master`, then each `release-1.X` branch's `1.X`.
fn line_names(config: &ProvidersConfig) -> BTreeSet<String> {
    config.providers.iter().flat_map(|p| p.release_lines().into_iter().map(|(line, _)| line)).collect()
}

/// The kubernetes/kubernetes branch a line tests against: `master`, or `release-1.X`.
fn kubernetes_branch(line: &str) -> String {
    if line == lkg::api::DEFAULT_LINE { line.to_owned() } else { format!("release-{line}") }
}

/// Each build's provider (its own metadata, else providers.yaml's `prow.jobs` or job-name rule),
/// versions (the harness's keys, else Prow's fields) and release line. Builds of no known
/// provider are left out with a warning; builds with no versions to be had are returned per
/// provider as unplaced runs, so every answer names them.
fn attribute(config: &ProvidersConfig, builds: Vec<LkgBuild>) -> (Vec<Attributed>, BTreeMap<String, Vec<UnplacedRun>>) {
    let (mut attributed, mut versionless, mut foreign) =
        (Vec::new(), BTreeMap::<String, Vec<UnplacedRun>>::new(), BTreeSet::new());
    for build in builds {
        let Some(provider) = provider_of(config, &build) else {
            foreign.insert(build.provider.clone().unwrap_or_else(|| format!("(job {})", build.job)));
            continue;
        };
        let provider_version = build.provider_version.clone().or_else(|| {
            let repo = provider.prow_repo()?;
            build.repos.get(&repo).and_then(|value| crate::layout::repo_ref_commit(value)).map(str::to_owned)
        });
        let kubernetes_version = build.kubernetes_version.clone();
        let (Some(kubernetes_version), Some(provider_version)) = (kubernetes_version, provider_version) else {
            let missing = missing_versions(&build, provider);
            versionless.entry(provider.name.clone()).or_default().push(UnplacedRun {
                build_id: format!("{}/{}", build.job, build.build),
                kubernetes_version: build.kubernetes_version.clone().unwrap_or_default(),
                provider_version: build.provider_version.clone().unwrap_or_default(),
                problems: vec![missing],
            });
            continue;
        };
        let line = line_of(provider, &kubernetes_version);
        attributed.push(Attributed {
            provider: provider.name.clone(),
            kubernetes_version,
            provider_version,
            line,
            build,
        });
    }
    if !foreign.is_empty() {
        let names = foreign.into_iter().collect::<Vec<_>>().join(", ");
        warn!("builds of providers not in {} left out: {names}", config.source.display());
    }
    for (provider, runs) in &versionless {
        let mut jobs: BTreeMap<&str, usize> = BTreeMap::new();
        for run in runs {
            *jobs.entry(run.build_id.split('/').next().unwrap_or_default()).or_default() += 1;
        }
        for (job, count) in jobs {
            warn!("{count} build(s) of job {job} ({provider}) carry no versions: listed as unplaced");
        }
    }
    (attributed, versionless)
}

/// A build's provider: the one its metadata names, else the one providers.yaml gives its job;
/// `None` when that is not in providers.yaml.
fn provider_of<'c>(config: &'c ProvidersConfig, build: &LkgBuild) -> Option<&'c config::Provider> {
    match build.provider.as_deref() {
        Some(name) => config.provider(name),
        None => config.provider_of_job(&build.job),
    }
}

/// What a build without versions lacks, and where the harness looked.
fn missing_versions(build: &LkgBuild, provider: &config::Provider) -> String {
    let mut missing = Vec::new();
    if build.kubernetes_version.is_none() {
        missing.push(
            "no Kubernetes version (finished.json metadata kubernetes-version or job-version, or a kubernetes/kubernetes commit in started.json repos)"
                .to_owned(),
        );
    }
    if build.provider_version.is_none() {
        let repo = provider.prow_repo().unwrap_or_else(|| "the provider's repository".into());
        missing.push(format!(
            "no provider version (finished.json metadata provider-version, or a {repo} commit in started.json repos; set prow.repo in providers.yaml if its key differs)"
        ));
    }
    format!("carries {}", missing.join(" and "))
}

/// The line a run belongs to: the provider's `release-1.X` line when its Kubernetes version is a
/// 1.X (release, pre-release or CI version), else `master`.
fn line_of(provider: &config::Provider, kubernetes_version: &str) -> String {
    let minor = histories::parse_version(kubernetes_version).map(|v| format!("{}.{}", v.major, v.minor));
    provider
        .release_lines()
        .into_iter()
        .map(|(line, _)| line)
        .find(|line| minor.as_deref() == Some(line.as_str()))
        .unwrap_or_else(|| lkg::api::DEFAULT_LINE.to_owned())
}

/// The history (holding the versions its builds on `line` name) and policy of each provider that
/// keeps `line`.
async fn provider_specs(
    config: &ProvidersConfig,
    options: &LkgOptions,
    line: &str,
    builds: &[&Attributed],
    policies: &BTreeMap<String, verdicts::Policy>,
    cache: &Arc<dyn HistoryCache>,
) -> Result<BTreeMap<String, ProviderSpec>> {
    let mut providers = BTreeMap::new();
    for provider in &config.providers {
        let Some((_, branch)) = provider.release_lines().into_iter().find(|(l, _)| l == line) else { continue };
        let spec = options.provider_histories.get(&provider.name).unwrap_or(&HistorySpec::Tested);
        // A branch named in --provider-history is the master line's; release lines use their own.
        let spec = if line == lkg::api::DEFAULT_LINE { spec.clone() } else { spec.on_branch(&branch) };
        let own: Vec<&Attributed> = builds.iter().copied().filter(|b| b.provider == provider.name).collect();
        let history = spec
            .history(&provider.name, &branch, &revisions(&own, |b| &b.provider_version), options, cache)
            .await
            .with_context(|| format!("the history of provider {} on line {line}", provider.name))?;
        let policy = policies[&provider.name].policy.clone();
        providers.insert(provider.name.clone(), ProviderSpec { history, policy });
    }
    Ok(providers)
}

/// Adds every build as a run (ids `job/build`), and returns where each one's artifacts are.
fn add_builds(engine: &mut Engine, builds: &[&Attributed], runs: Runs) -> BTreeMap<String, BuildLink> {
    let mut links = BTreeMap::new();
    let mut unplaced = 0;
    for attributed in builds {
        let build = &attributed.build;
        let id = format!("{}/{}", build.job, build.build);
        let run = JudgedRun {
            build_id: id.clone(),
            provider: attributed.provider.clone(),
            kubernetes_version: attributed.kubernetes_version.clone(),
            provider_version: attributed.provider_version.clone(),
            // A build none was found for had no results: nothing ran, so nothing makes it good.
            verdict: RunVerdict { good: false, flaky_tests: Vec::new() },
            build_passed: build.passed,
        };
        let added = match runs {
            Runs::Verdicts(verdicts) => match verdicts.get(&build.row) {
                Some(verdict) => engine.add_judged_run(&JudgedRun { verdict: verdict.clone(), ..run }),
                None => engine.add_judged_run(&run),
            },
            #[cfg(test)]
            Runs::Results(results) => engine.add_compact_run(&lkg::CompactRun {
                build_id: run.build_id,
                provider: run.provider,
                kubernetes_version: run.kubernetes_version,
                provider_version: run.provider_version,
                results: results.get(&build.row).cloned().unwrap_or_default(),
                build_passed: run.build_passed,
            }),
        };
        match added {
            Ok(RunAdded::Unplaced) => unplaced += 1,
            Ok(_) => {}
            Err(error) => warn!("build {id} left out of the LKG: {error}"),
        }
        let link = BuildLink {
            artifacts_url: build.artifacts_url.clone(),
            started_at: build.started_at,
            kubernetes_version: attributed.kubernetes_version.clone(),
            provider_version: attributed.provider_version.clone(),
        };
        links.insert(id, link);
    }
    if unplaced > 0 {
        warn!("{unplaced} build(s) name a version not in its history: listed as unplaced, left out of the ordering");
    }
    links
}

/// Each version the builds name, with when it was first tested.
fn revisions(builds: &[&Attributed], version: impl Fn(&Attributed) -> &String) -> BTreeMap<String, i64> {
    let mut first_tested = BTreeMap::new();
    for build in builds {
        let at = first_tested.entry(version(build).clone()).or_insert(build.build.started_at);
        *at = (*at).min(build.build.started_at);
    }
    first_tested
}

/// `required.tests` as names: exact names as given, patterns as every indexed test they match.
/// Empty means every test that ran must pass.
fn required_tests(matchers: &[TestMatcher], catalog: &TestCatalog) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for matcher in matchers {
        match matcher {
            TestMatcher::Name(name) => {
                names.insert(name.clone());
            }
            TestMatcher::Regex(_) => {
                names.extend(catalog.names().filter(|name| matcher.matches(name)).map(str::to_owned));
            }
        }
    }
    names
}

fn lkg_status(status: record::TestStatus) -> TestStatus {
    match status {
        record::TestStatus::Pass => TestStatus::Pass,
        record::TestStatus::Fail => TestStatus::Fail,
        record::TestStatus::Skip => TestStatus::Skip,
        record::TestStatus::Flaky => TestStatus::Flaky,
    }
}

#[cfg(test)]
mod tests;

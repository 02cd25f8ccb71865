//! Last known good from the SQL index: takes every finished build's verdict against its
//! provider's policy (stored in the index, or judged once from the build's results and stored:
//! [`verdicts`]), orders the builds by the commit histories (a local git repository, GitHub, or the
//! versions the index has runs of) and hands them to the `lkg` engine. `harness lkg` prints the
//! answers, `harness serve` serves them.

mod cache;
pub mod export;
mod held;
mod histories;
mod verdicts;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use lkg::api::{BuildLinks, Snapshot};
use lkg::sources::HistoryCache;
use lkg::{CompactResult, Engine, JudgedRun, ProviderSpec, RunAdded, RunVerdict, TestCatalog, TestId, TestStatus};
use tracing::{info, warn};

use held::{Digest, Held, OnLine, Place, Strings};
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
    let (builds, links) = held::hold(config, builds, &mut Strings::default());
    let lines = engines(config, options, &builds, &tests.catalog, &policies, Runs::Results(&results), &cache).await?;
    Ok(Snapshot { lines, builds: links, loaded_at: crate::unix_now() })
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

/// A loaded LKG and what it was computed from: every finished build and its verdict (a few dozen
/// bytes a build, whatever its results), so later loads read from the index only what was indexed
/// since, and a rebuild (new histories, a build replaced) reads nothing but the histories.
#[derive(Debug)]
pub struct Loaded {
    /// The answers, shared with the server's readers: an update replaces it.
    pub snapshot: Arc<Snapshot>,
    /// Every finished build, in the order runs are added (start time, then row).
    builds: Vec<Held>,
    /// Where each build on a line has its artifacts: the answers' map, kept current here.
    links: BuildLinks,
    strings: Strings,
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
    let mut strings = Strings::default();
    let mut holder = held::Holder::new(config, &mut strings);
    index.for_each_lkg_build(|build| holder.add(build)).await?;
    let (builds, links) = holder.finish();
    let tests = verdicts::Tests::of(index.lkg_tests().await?);
    let policies = verdicts::policies(config, &tests.catalog);
    // Builds finished since the builds were read wait for the next load, as do tests committed
    // since (a build naming one is judged without it, as its results were, and not stored).
    let found = verdicts::verdicts(index, &policies, &tests, &held::with_providers(&builds), false).await?;
    let mut loaded = Loaded {
        snapshot: Arc::default(),
        builds,
        links,
        strings,
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
    let (builds, catalog) = (&loaded.builds, &loaded.tests.catalog);
    let lines = engines(config, options, builds, catalog, &loaded.policies, runs, &cache).await?;
    loaded.snapshot = Arc::new(Snapshot { lines, builds: loaded.links.clone(), loaded_at: crate::unix_now() });
    loaded.stale = false;
    Ok(())
}

/// Takes in what was indexed since `loaded` was: the builds of the jobs whose generation moved are
/// listed (no other build is read), the verdicts of their new and replaced builds read (or judged
/// from their results and stored), and their builds that left the index dropped. New builds that
/// start after every build held, with versions already in their line's histories, are added to a
/// copy of the engines (which shares all but the paths it changes); anything else (or a stale
/// snapshot) rebuilds the snapshot from the builds held. Either way the answer is the one a full
/// load would give (with the histories of the last rebuild when builds were only added).
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
    let held: HashMap<i64, &Held> =
        loaded.builds.iter().filter(|b| changed.contains(&*b.job)).map(|b| (b.row, b)).collect();
    let (mut read, mut replaced) = (HashSet::new(), 0);
    for build in &fresh {
        match held.get(&build.row) {
            Some(held) if held.digest == Digest::of(&build.digest) => {}
            Some(_) => {
                replaced += 1;
                read.insert(build.row);
            }
            None => {
                read.insert(build.row);
            }
        }
    }
    let still: HashSet<i64> = fresh.iter().map(|b| b.row).collect();
    let gone: HashSet<i64> = held.keys().copied().filter(|row| !still.contains(row)).collect();
    if read.is_empty() && gone.is_empty() && !loaded.stale {
        loaded.generations = generations;
        return Ok(Update::Unchanged);
    }
    let fresh: Vec<LkgBuild> = fresh.into_iter().filter(|b| read.contains(&b.row)).collect();
    let (fresh, links) = held::hold(config, fresh, &mut loaded.strings);
    let found = verdicts::verdicts(index, &loaded.policies, &loaded.tests, &held::with_providers(&fresh), true).await?;
    if found.unknown_test {
        return Ok(Update::NeedsFull("a new build ran a test not loaded before".into()));
    }
    let last = loaded.builds.last().map(|b| (b.started_at, b.row));
    let only_appended =
        replaced == 0 && gone.is_empty() && !loaded.stale && fresh.iter().all(|b| Some((b.started_at, b.row)) > last);
    let dropped: Vec<String> =
        held.values().filter(|b| gone.contains(&b.row) || read.contains(&b.row)).map(|b| b.id()).collect();
    // From here on `loaded` holds the index's builds: a failed rebuild leaves it stale, to rebuild
    // at the next update.
    let (new, left) = (read.len() - replaced, gone.len());
    for id in &dropped {
        loaded.links.remove(id);
    }
    loaded.links.extend(links);
    for row in &gone {
        loaded.verdicts.remove(row);
    }
    loaded.verdicts.extend(found.verdicts);
    loaded.judged = found.judged;
    if !only_appended {
        loaded.builds.retain(|b| !gone.contains(&b.row) && !read.contains(&b.row));
    }
    let appended = loaded.builds.len();
    loaded.builds.extend(fresh);
    if !only_appended {
        loaded.builds.sort_by_key(|b| (b.started_at, b.row));
    }
    loaded.generations = generations;
    loaded.stale = true;
    let reason = if !only_appended {
        format!("{new} new, {replaced} replaced and {left} removed build(s), or histories due")
    } else {
        match add_to_copy(loaded, &loaded.builds[appended..]) {
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
/// The copy shares everything the new builds do not change with the snapshot readers hold.
fn add_to_copy(loaded: &Loaded, appended: &[Held]) -> Result<Snapshot, String> {
    for build in appended {
        match &build.place {
            Place::Line(on) => {
                let placed =
                    loaded.snapshot.lines.get(&*on.line).is_some_and(|engine| {
                        engine.places(&on.provider, &on.kubernetes_version, &on.provider_version)
                    });
                if !placed {
                    return Err(format!(
                        "build {} names a version not in the histories of line {}",
                        build.id(),
                        on.line
                    ));
                }
            }
            Place::Versionless { provider, .. } => {
                return Err(format!("a new build of {provider} carries no versions"));
            }
            Place::Foreign => {}
        }
    }
    let mut snapshot = (*loaded.snapshot).clone();
    for (line, engine) in snapshot.lines.iter_mut() {
        let in_line = on_line(appended, line);
        if !in_line.is_empty() {
            add_builds(engine, &in_line, Runs::Verdicts(&loaded.verdicts));
        }
    }
    snapshot.builds = loaded.links.clone();
    snapshot.loaded_at = crate::unix_now();
    Ok(snapshot)
}

/// The builds of `builds` on `line`, each with its provider and versions.
fn on_line<'b>(builds: &'b [Held], line: &str) -> Vec<(&'b Held, &'b OnLine)> {
    builds.iter().filter_map(|b| Some((b, b.on_line()?))).filter(|(_, on)| &*on.line == line).collect()
}

/// How a build's run goes into an engine: by its verdict, or (the reference the verdicts are
/// tested against) by its results, judged by the engine.
#[derive(Clone, Copy)]
enum Runs<'a> {
    Verdicts(&'a HashMap<i64, RunVerdict>),
    #[cfg(test)]
    Results(&'a HashMap<i64, Vec<CompactResult>>),
}

/// An engine per release line, each with the builds on its line and the histories they name.
async fn engines(
    config: &ProvidersConfig,
    options: &LkgOptions,
    builds: &[Held],
    catalog: &Arc<TestCatalog>,
    policies: &BTreeMap<String, verdicts::Policy>,
    runs: Runs<'_>,
    cache: &Arc<dyn HistoryCache>,
) -> Result<BTreeMap<String, Engine>> {
    let mut lines = BTreeMap::new();
    for line in line_names(config) {
        let in_line = on_line(builds, &line);
        let branch = kubernetes_branch(&line);
        let spec = if line == lkg::api::DEFAULT_LINE {
            options.kubernetes_history.clone()
        } else {
            options.kubernetes_history.on_branch(&branch)
        };
        let kubernetes = spec
            .history("kubernetes", &branch, &revisions(&in_line, |on| &on.kubernetes_version), options, cache)
            .await
            .with_context(|| format!("the Kubernetes history of line {line}"))?;
        let providers = provider_specs(config, options, &line, &in_line, policies, cache).await?;
        let mut engine = Engine::with_shared_catalog(kubernetes, providers, catalog.clone());
        add_builds(&mut engine, &in_line, runs);
        // A build with no Kubernetes version has no line either: the default line names it.
        if line == lkg::api::DEFAULT_LINE {
            for build in builds {
                if let Place::Versionless { provider, run } = &build.place {
                    let _ = engine.add_unplaced(provider, (**run).clone());
                }
            }
        }
        lines.insert(line, engine);
    }
    info!("LKG over {} build(s) of {} provider(s) on {} line(s)", builds.len(), config.providers.len(), lines.len());
    Ok(lines)
}

/// Every release line of the providers: `master`, then each `release-1.X` branch's `1.X`.
fn line_names(config: &ProvidersConfig) -> BTreeSet<String> {
    config.providers.iter().flat_map(|p| p.release_lines().into_iter().map(|(line, _)| line)).collect()
}

/// The kubernetes/kubernetes branch a line tests against: `master`, or `release-1.X`.
fn kubernetes_branch(line: &str) -> String {
    if line == lkg::api::DEFAULT_LINE { line.to_owned() } else { format!("release-{line}") }
}

/// A build's provider: the one its metadata names, else the one providers.yaml gives its job;
/// `None` when that is not in providers.yaml.
fn provider_of<'c>(config: &'c ProvidersConfig, build: &LkgBuild) -> Option<&'c config::Provider> {
    match build.provider.as_deref() {
        Some(name) => config.provider(name),
        None => config.provider_of_job(&build.job),
    }
}

/// The history (holding the versions its builds on `line` name) and policy of each provider that
/// keeps `line`.
async fn provider_specs(
    config: &ProvidersConfig,
    options: &LkgOptions,
    line: &str,
    builds: &[(&Held, &OnLine)],
    policies: &BTreeMap<String, verdicts::Policy>,
    cache: &Arc<dyn HistoryCache>,
) -> Result<BTreeMap<String, ProviderSpec>> {
    let mut providers = BTreeMap::new();
    for provider in &config.providers {
        let Some((_, branch)) = provider.release_lines().into_iter().find(|(l, _)| l == line) else { continue };
        let spec = options.provider_histories.get(&provider.name).unwrap_or(&HistorySpec::Tested);
        // A branch named in --provider-history is the master line's; release lines use their own.
        let spec = if line == lkg::api::DEFAULT_LINE { spec.clone() } else { spec.on_branch(&branch) };
        let own: Vec<(&Held, &OnLine)> =
            builds.iter().copied().filter(|(_, on)| *on.provider == *provider.name).collect();
        let history = spec
            .history(&provider.name, &branch, &revisions(&own, |on| &on.provider_version), options, cache)
            .await
            .with_context(|| format!("the history of provider {} on line {line}", provider.name))?;
        let policy = policies[&provider.name].policy.clone();
        providers.insert(provider.name.clone(), ProviderSpec { history, policy });
    }
    Ok(providers)
}

/// Adds every build as a run (ids `job/build`).
fn add_builds(engine: &mut Engine, builds: &[(&Held, &OnLine)], runs: Runs) {
    let mut unplaced = 0;
    for (build, on) in builds {
        let run = JudgedRun {
            build_id: build.id(),
            provider: on.provider.to_string(),
            kubernetes_version: on.kubernetes_version.to_string(),
            provider_version: on.provider_version.to_string(),
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
            Err(error) => warn!("build {} left out of the LKG: {error}", build.id()),
        }
    }
    if unplaced > 0 {
        warn!("{unplaced} build(s) name a version not in its history: listed as unplaced, left out of the ordering");
    }
}

/// Each version the builds name, with when it was first tested.
fn revisions(builds: &[(&Held, &OnLine)], version: impl Fn(&OnLine) -> &Arc<str>) -> BTreeMap<String, i64> {
    let mut first_tested = BTreeMap::new();
    for (build, on) in builds {
        let at = first_tested.entry(version(on).to_string()).or_insert(build.started_at);
        *at = (*at).min(build.started_at);
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

/// A known failure counts as passed, as in the run that met it: the provider lists it, with a
/// reason and a link, as failing for now (`known_failures`).
fn lkg_status(status: record::TestStatus) -> TestStatus {
    match status {
        record::TestStatus::Pass | record::TestStatus::KnownFailure => TestStatus::Pass,
        record::TestStatus::Fail => TestStatus::Fail,
        record::TestStatus::Skip => TestStatus::Skip,
        record::TestStatus::Flaky => TestStatus::Flaky,
    }
}

#[cfg(test)]
mod tests;

//! Last known good from the SQL index: loads every finished build's test results, orders them by
//! the commit histories (a local git repository, GitHub, or the versions the index has runs of) and
//! hands them to the `lkg` engine. `harness lkg` prints the answers, `harness serve` serves them.

mod cache;
mod histories;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use lkg::api::{BuildLink, Snapshot};
use lkg::sources::HistoryCache;
use lkg::{CompactResult, CompactRun, Engine, ProviderPolicy, ProviderSpec, RunAdded, TestCatalog, TestId, TestStatus};
use tracing::{info, warn};

pub use histories::HistorySpec;

use crate::config::{ProvidersConfig, TestMatcher};
use crate::results::index::{Index, LkgBuild, LkgRows};
use crate::results::record;

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
    if let Some(unknown) = options.provider_histories.keys().find(|name| config.provider(name).is_none()) {
        bail!(
            "--provider-history names provider {unknown:?}, which is not in {}: use one of {}",
            config.source.display(),
            config.providers.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")
        );
    }
    let cache: Arc<dyn HistoryCache> = Arc::new(cache::IndexCache(index.clone()));
    snapshot(config, options, index.lkg_rows().await?, &cache).await
}

async fn snapshot(
    config: &ProvidersConfig,
    options: &LkgOptions,
    rows: LkgRows,
    cache: &Arc<dyn HistoryCache>,
) -> Result<Snapshot> {
    let LkgRows { builds, tests, results } = rows;
    let mut catalog = TestCatalog::new();
    let test_ids: HashMap<i64, TestId> = tests.iter().map(|(row, name)| (*row, catalog.intern(name))).collect();
    let builds = of_known_providers(config, builds);
    let kubernetes = options
        .kubernetes_history
        .history("kubernetes", "master", &revisions(&builds, |b| &b.kubernetes_version), options, cache)
        .await
        .context("the Kubernetes history")?;
    let providers = provider_specs(config, options, &builds, &catalog, cache).await?;
    let mut engine = Engine::with_catalog(kubernetes, providers, catalog);
    let mut by_build: HashMap<i64, Vec<CompactResult>> = HashMap::new();
    for (build, test, status) in results {
        if let Some(id) = test_ids.get(&test) {
            by_build.entry(build).or_default().push(CompactResult::new(*id, lkg_status(status)));
        }
    }
    let links = add_builds(&mut engine, &builds, by_build);
    info!("LKG over {} build(s) of {} provider(s)", builds.len(), config.providers.len());
    Ok(Snapshot { engine, builds: links, loaded_at: crate::results::unix_now() })
}

/// The builds of providers in providers.yaml; the others are left out, with a warning.
fn of_known_providers(config: &ProvidersConfig, builds: Vec<LkgBuild>) -> Vec<LkgBuild> {
    let known: BTreeSet<&str> = config.providers.iter().map(|p| p.name.as_str()).collect();
    let (builds, foreign): (Vec<LkgBuild>, Vec<LkgBuild>) =
        builds.into_iter().partition(|build| known.contains(build.provider.as_str()));
    if !foreign.is_empty() {
        let names: BTreeSet<&str> = foreign.iter().map(|b| b.provider.as_str()).collect();
        let names = names.into_iter().collect::<Vec<_>>().join(", ");
        warn!("{} build(s) of providers not in {} left out: {names}", foreign.len(), config.source.display());
    }
    builds
}

/// Each provider's history (holding the versions its builds name) and policy.
async fn provider_specs(
    config: &ProvidersConfig,
    options: &LkgOptions,
    builds: &[LkgBuild],
    catalog: &TestCatalog,
    cache: &Arc<dyn HistoryCache>,
) -> Result<BTreeMap<String, ProviderSpec>> {
    let mut providers = BTreeMap::new();
    for provider in &config.providers {
        let spec = options.provider_histories.get(&provider.name).unwrap_or(&HistorySpec::Tested);
        let own: Vec<LkgBuild> = builds.iter().filter(|b| b.provider == provider.name).cloned().collect();
        let history = spec
            .history(&provider.name, &provider.branch, &revisions(&own, |b| &b.provider_version), options, cache)
            .await
            .with_context(|| format!("the history of provider {}", provider.name))?;
        let policy =
            ProviderPolicy { required_tests: required_tests(&provider.required.tests, catalog), ..Default::default() };
        providers.insert(provider.name.clone(), ProviderSpec { history, policy });
    }
    Ok(providers)
}

/// Adds every build as a run (ids `job/build`), and returns where each one's artifacts are.
fn add_builds(
    engine: &mut Engine,
    builds: &[LkgBuild],
    mut results: HashMap<i64, Vec<CompactResult>>,
) -> BTreeMap<String, BuildLink> {
    let mut links = BTreeMap::new();
    let mut unplaced = 0;
    for build in builds {
        let id = format!("{}/{}", build.job, build.build);
        let run = CompactRun {
            build_id: id.clone(),
            provider: build.provider.clone(),
            kubernetes_version: build.kubernetes_version.clone(),
            provider_version: build.provider_version.clone(),
            results: results.remove(&build.row).unwrap_or_default(),
        };
        match engine.add_compact_run(&run) {
            Ok(RunAdded::Unplaced) => unplaced += 1,
            Ok(_) => {}
            Err(error) => warn!("build {id} left out of the LKG: {error}"),
        }
        let link = BuildLink {
            artifacts_url: build.artifacts_url.clone(),
            started_at: build.started_at,
            kubernetes_version: build.kubernetes_version.clone(),
            provider_version: build.provider_version.clone(),
        };
        links.insert(id, link);
    }
    if unplaced > 0 {
        warn!("{unplaced} build(s) name a version not in its history: listed as unplaced, left out of the ordering");
    }
    links
}

/// Each version the builds name, with when it was first tested.
fn revisions(builds: &[LkgBuild], version: impl Fn(&LkgBuild) -> &String) -> BTreeMap<String, i64> {
    let mut first_tested = BTreeMap::new();
    for build in builds {
        let at = first_tested.entry(version(build).clone()).or_insert(build.started_at);
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

fn lkg_status(status: record::TestStatus) -> TestStatus {
    match status {
        record::TestStatus::Pass => TestStatus::Pass,
        record::TestStatus::Fail => TestStatus::Fail,
        record::TestStatus::Skip => TestStatus::Skip,
        record::TestStatus::Flaky => TestStatus::Flaky,
    }
}

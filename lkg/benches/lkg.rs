//! LKG at scale: a synthetic history of 100,000 builds spread over 20 providers (5,000 each), every
//! build with results for the provider's 500 required tests, on a Kubernetes history of 50,000
//! first-parent commits and provider histories of 1,000 commits. Builds come in 5,000 rounds of a
//! matrix job (each provider against the round's Kubernetes commit, 2% against a neighbour), 15%
//! of them fail, flake or skip a test, a third of the providers regress in the last 40 rounds, 4
//! of them ask for 2 good runs in a row (and run each commit in two rounds), and 2 stay out of the
//! version set.
//!
//! - `full recompute`: `compute_compact` from scratch over all 100,000 builds (50 million test
//!   results judged, every pair placed, every provider's report, the version set). Target ≤ 200 ms.
//! - `incremental update`: one new build (a `Run` with 500 named tests) added to an `Engine` that
//!   holds the 100,000, then the answers that can change read back: that provider's LKG and culprit
//!   range, and the version set. Target ≤ 5 ms.
//! - `engine report`: the whole `Report` (every tested pair of every provider) read off the engine;
//!   no target, for scale.
//!
//! `cargo bench -p lkg --bench lkg`

use std::collections::BTreeMap;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use lkg::{
    Attempt, CompactResult, CompactRun, Engine, FlakePolicy, History, ProviderPolicy, ProviderSpec, Run, TestCatalog,
    TestResult, TestStatus, compute_compact,
};

const KUBERNETES_COMMITS: usize = 50_000;
const PROVIDERS: usize = 20;
const BUILDS: usize = 100_000;
const REQUIRED_TESTS: usize = 500;
const PROVIDER_COMMITS: usize = 1_000;

/// xorshift64*: deterministic data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn sha(repo: &str, n: usize) -> String {
    // 40 hex digits, like a commit id.
    format!("{:016x}{:024x}", n as u64 ^ 0x9e37_79b9_7f4a_7c15, repo.len() * 1_000_003 + n)
}

fn test_name(n: usize) -> String {
    format!("[sig-cloud-provider] [Conformance] test {n:03} should keep the cloud resources in step with the cluster")
}

struct Data {
    kubernetes: History,
    providers: BTreeMap<String, ProviderSpec>,
    catalog: TestCatalog,
    runs: Vec<CompactRun>,
}

fn synthetic() -> Data {
    let kubernetes = History::new((0..KUBERNETES_COMMITS).rev().map(|n| sha("kubernetes", n))).unwrap();
    let mut catalog = TestCatalog::new();
    let tests: Vec<_> = (0..REQUIRED_TESTS).map(|n| catalog.intern(&test_name(n))).collect();
    let names: Vec<String> = (0..PROVIDERS).map(|p| format!("provider-{p:02}")).collect();
    let providers = names
        .iter()
        .enumerate()
        .map(|(p, name)| {
            let history = History::new((0..PROVIDER_COMMITS).rev().map(|n| sha(name, n))).unwrap();
            let policy = ProviderPolicy {
                required_tests: (0..REQUIRED_TESTS).map(test_name).collect(),
                flake: FlakePolicy {
                    flaky_counts_as_passed: true,
                    consecutive_good_runs: NonZeroU32::new(if p % 5 == 0 { 2 } else { 1 }).unwrap(),
                },
                in_version_set: p % 7 != 6,
            };
            (name.clone(), ProviderSpec { history, policy })
        })
        .collect();
    let mut rng = Rng(0x5eed);
    let per_provider = BUILDS / PROVIDERS;
    let mut runs = Vec::with_capacity(BUILDS);
    for build in 0..per_provider {
        for (p, name) in names.iter().enumerate() {
            // Rounds of a matrix job walk the histories, every provider against the round's
            // Kubernetes commit (one build in fifty against a neighbour); a third of the providers
            // regress near the end.
            // Providers asking for 2 good runs in a row run each commit in two rounds.
            let round = if p % 5 == 0 { build - build % 2 } else { build };
            let jitter = if rng.below(50) == 0 { 1 + rng.below(9) } else { 0 };
            let kubernetes = (round * KUBERNETES_COMMITS / per_provider + jitter).min(KUBERNETES_COMMITS - 1);
            let provider = build * PROVIDER_COMMITS / per_provider;
            let regressed = p % 3 == 0 && build > per_provider - 40;
            let mut statuses = vec![TestStatus::Pass; REQUIRED_TESTS];
            match rng.below(20) {
                0 => statuses[rng.below(REQUIRED_TESTS)] = TestStatus::Fail,
                1 => statuses[rng.below(REQUIRED_TESTS)] = TestStatus::Flaky,
                2 => statuses[rng.below(REQUIRED_TESTS)] = TestStatus::Skip,
                _ => {}
            }
            if regressed {
                statuses[7] = TestStatus::Fail;
            }
            let results = tests.iter().zip(statuses).map(|(id, status)| CompactResult::new(*id, status)).collect();
            runs.push(CompactRun {
                build_id: format!("{}", 1_800_000_000_000_000_000u64 + (build * PROVIDERS + p) as u64),
                provider: name.clone(),
                kubernetes_version: sha("kubernetes", kubernetes),
                provider_version: sha(name, provider),
                results,
                build_passed: None,
            });
        }
    }
    Data { kubernetes, providers, catalog, runs }
}

fn named_run(build: u64, provider: &str, kubernetes: &str, provider_version: &str, failing: bool) -> Run {
    Run {
        build_id: format!("new-{build}"),
        provider: provider.into(),
        kubernetes_version: kubernetes.into(),
        provider_version: provider_version.into(),
        tests: (0..REQUIRED_TESTS)
            .map(|n| TestResult {
                name: test_name(n),
                attempts: vec![if failing && n == 7 { Attempt::Fail } else { Attempt::Pass }],
            })
            .collect(),
        build_passed: None,
    }
}

fn lkg_benches(c: &mut Criterion) {
    let data = synthetic();
    let mut group = c.benchmark_group("lkg 100k builds x 20 providers x 500 required tests");
    group.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(8));

    group.bench_function("full recompute", |b| {
        b.iter_batched(
            || (data.kubernetes.clone(), data.providers.clone(), data.catalog.clone()),
            |(kubernetes, providers, catalog)| compute_compact(kubernetes, providers, catalog, &data.runs).unwrap(),
            BatchSize::PerIteration,
        )
    });

    let mut engine = Engine::with_catalog(data.kubernetes.clone(), data.providers.clone(), data.catalog.clone());
    for run in &data.runs {
        engine.add_compact_run(run).unwrap();
    }
    // The data must exercise every answer, or the figures say little.
    let set = engine.version_set().expect("a version set");
    let culprit = engine.culprit("provider-03").unwrap().expect("provider-03 regressed");
    let pairs: usize =
        (0..PROVIDERS).map(|p| engine.provider_report(&format!("provider-{p:02}")).unwrap().pairs.len()).sum();
    eprintln!(
        "{BUILDS} builds on {pairs} pairs; version set at Kubernetes ordinal {}; provider-03's culprit range holds {} \
         Kubernetes commits",
        data.kubernetes.ordinal(&set.kubernetes_commit).unwrap(),
        culprit.kubernetes.map_or(0, |range| range.commits.len()),
    );
    let newest_kubernetes = sha("kubernetes", KUBERNETES_COMMITS - 1);
    let provider = "provider-03";
    let provider_commit = sha(provider, PROVIDER_COMMITS - 1);
    let mut build = 0u64;
    group.sample_size(50).measurement_time(Duration::from_secs(5));
    group.bench_function("incremental update (one new build, then LKG, culprit, version set)", |b| {
        b.iter_batched(
            || {
                build += 1;
                named_run(build, provider, &newest_kubernetes, &provider_commit, build.is_multiple_of(2))
            },
            |run| {
                engine.add_run(&run).unwrap();
                (engine.lkg(provider).unwrap(), engine.culprit(provider).unwrap(), engine.version_set())
            },
            BatchSize::SmallInput,
        )
    });

    // What `harness serve` does with a new build: readers keep the engine, the build goes into a copy.
    group.bench_function("copy and add one build (a served update)", |b| {
        b.iter_batched(
            || {
                build += 1;
                named_run(build, provider, &newest_kubernetes, &provider_commit, build.is_multiple_of(2))
            },
            |run| {
                let mut copy = engine.clone();
                copy.add_run(&run).unwrap();
                copy
            },
            BatchSize::SmallInput,
        )
    });

    group.sample_size(10);
    group.bench_function("engine report (every pair of every provider)", |b| b.iter(|| black_box(engine.report())));
    group.finish();
}

criterion_group!(benches, lkg_benches);
criterion_main!(benches);

//! Full tier: needs PostgreSQL (the server `scripts/test` starts).
//!
//! Loads that take in only what was indexed since give what a full load gives, on both databases.

use super::*;
use crate::index::Indexed;
use crate::layout::Versions;
use crate::record::{BuildInfo, BuildRecord, State, TestResult};
use testing::fresh_postgres_database;

/// A fresh index on each backend; the temp dir holds the SQLite file.
async fn both() -> (tempfile::TempDir, [Index; 2]) {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Index::open(&format!("sqlite://{}", dir.path().join("index.sqlite").display())).await.unwrap();
    let postgres = Index::open(&fresh_postgres_database().await).await.unwrap();
    (dir, [sqlite, postgres])
}

fn options() -> LkgOptions {
    LkgOptions {
        kubernetes_history: HistorySpec::Tested,
        provider_histories: BTreeMap::new(),
        depth: 100,
        github_api: String::new(),
    }
}

/// A finished build of the bundled `local` provider; `failing` names the tests that fail.
fn build(number: u32, started_at: i64, kubernetes: &str, provider_version: &str, failing: &[&str]) -> BuildRecord {
    let names = ["[cloud-e2e] nodes", "[cloud-e2e] load balancers", "[sig-node] pods"];
    let results: Vec<TestResult> = names
        .iter()
        .map(|name| TestResult {
            suite: "cloud-e2e".into(),
            name: (*name).into(),
            status: if failing.contains(name) { record::TestStatus::Fail } else { record::TestStatus::Pass },
            duration_seconds: Some(1.0),
            message: None,
        })
        .collect();
    let info = BuildInfo {
        job: "ci-local".into(),
        build: number.to_string(),
        path: format!("logs/ci-local/{number}"),
        pull: None,
        provider: Some("local".into()),
        state: State::Finished,
        started_at,
        finished_at: Some(started_at + 60),
        passed: Some(failing.is_empty()),
        result: Some(if failing.is_empty() { "SUCCESS" } else { "FAILURE" }.into()),
        versions: Versions {
            kubernetes_version: Some(kubernetes.into()),
            provider: Some("local".into()),
            provider_version: Some(provider_version.into()),
            ccm_version: None,
            job_version: None,
            repo_commit: None,
            repos: BTreeMap::new(),
        },
        artifacts_url: format!("file:///store/logs/ci-local/{number}"),
        digest: format!("{number}-{started_at}-{kubernetes}-{provider_version}-{}", failing.join(",")),
    };
    BuildRecord { info, results, problems: vec![] }
}

/// Every line's report and build links: what the API serves, without the load time.
fn answers(snapshot: &Snapshot) -> serde_json::Value {
    let lines: BTreeMap<&String, Report> =
        snapshot.lines.iter().map(|(line, engine)| (line, engine.report())).collect();
    let builds: BTreeMap<&String, &lkg::api::BuildLink> = snapshot.builds.iter().collect();
    serde_json::json!({ "lines": lines, "builds": builds })
}

async fn assert_same_as_full(index: &Index, loaded: &Loaded, when: &str) {
    let full = load_full(&ProvidersConfig::bundled(), &options(), index).await.unwrap();
    assert_eq!(answers(&loaded.snapshot), answers(&full.snapshot), "{}: {when}", index.name());
    assert_eq!(loaded.verdicts_held(), full.verdicts_held(), "{}: {when}", index.name());
}

use lkg::Report;

async fn update(index: &Index, loaded: &mut Loaded) -> Update {
    load_new(&ProvidersConfig::bundled(), &options(), index, loaded).await.unwrap()
}

#[tokio::test]
async fn updates_read_only_what_was_indexed_since_and_answer_as_a_full_load_on_both_databases() {
    let (_dir, indexes) = both().await;
    let config = ProvidersConfig::bundled();
    for index in &indexes {
        for (number, started) in [(1, 100), (2, 200), (3, 300)] {
            index.index_build(&build(number, started, "v1.37.0", "a", &[])).await.unwrap();
        }
        let mut loaded = load_full(&config, &options(), index).await.unwrap();
        assert_eq!(update(index, &mut loaded).await, Update::Unchanged);

        // A later build of versions already loaded: added to a copy of the engines; the answers
        // readers hold are untouched, though the copy shares their maps.
        let (served, served_answers) = (loaded.snapshot.clone(), answers(&loaded.snapshot));
        index.index_build(&build(4, 400, "v1.37.0", "a", &["[sig-node] pods"])).await.unwrap();
        assert_eq!(update(index, &mut loaded).await, Update::Added { builds: 1 });
        assert_same_as_full(index, &loaded, "a build of known versions added").await;
        assert!(loaded.snapshot.builds.contains_key("ci-local/4"), "{}", index.name());
        assert_eq!(answers(&served), served_answers, "{}: the answers served before", index.name());
        assert!(!served.builds.contains_key("ci-local/4"), "{}", index.name());

        // A new provider version is not in the `tested` history yet: rebuilt from what is held.
        index.index_build(&build(5, 500, "v1.37.1", "b", &[])).await.unwrap();
        assert!(matches!(update(index, &mut loaded).await, Update::Rebuilt { .. }));
        assert_same_as_full(index, &loaded, "a build of new versions").await;

        // A build that started before the newest one held: rebuilt in start order.
        index.index_build(&build(6, 50, "v1.37.0", "a", &["[cloud-e2e] nodes"])).await.unwrap();
        assert!(matches!(update(index, &mut loaded).await, Update::Rebuilt { .. }));
        assert_same_as_full(index, &loaded, "a build that started earlier").await;

        // A build indexed again with other content replaces what was held of it.
        assert_eq!(
            index.index_build(&build(5, 500, "v1.37.1", "b", &["[cloud-e2e] nodes"])).await.unwrap(),
            Indexed::Replaced
        );
        assert!(matches!(update(index, &mut loaded).await, Update::Rebuilt { .. }));
        assert_same_as_full(index, &loaded, "a build replaced").await;

        // A running build is not evidence yet.
        let mut running = build(7, 700, "v1.37.1", "b", &[]);
        running.info.state = State::Running;
        running.info.passed = None;
        index.index_build(&running).await.unwrap();
        assert_eq!(update(index, &mut loaded).await, Update::Unchanged);

        // A test never loaded before: only a full load knows its id.
        let mut renamed = build(8, 800, "v1.37.1", "b", &[]);
        renamed.results[0].name = "[cloud-e2e] a test added today".into();
        index.index_build(&renamed).await.unwrap();
        let before = answers(&loaded.snapshot);
        assert!(matches!(update(index, &mut loaded).await, Update::NeedsFull(_)));
        assert_eq!(answers(&loaded.snapshot), before, "{}: a refused update changed nothing", index.name());

        // Due histories rebuild even with nothing new.
        let mut loaded = load_full(&config, &options(), index).await.unwrap();
        loaded.mark_stale();
        assert!(matches!(update(index, &mut loaded).await, Update::Rebuilt { .. }));
        assert_same_as_full(index, &loaded, "a stale snapshot").await;
    }
}

/// A small random generator (xorshift), so the generated histories are the same in every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// `count` finished builds of several providers, versions and release lines, started in no
/// particular order, whose tests pass, fail, flake, are skipped, are known failures or are retried
/// (one test listed twice), and whose own verdict is passed, failed or missing.
fn generated_builds(seed: u64, count: u32) -> Vec<BuildRecord> {
    let mut rng = Rng(seed);
    let names = ["[cloud-e2e] nodes", "[cloud-e2e] zones", "[sig-node] pods [Conformance]", "[sig-apps] jobs"];
    let statuses = [
        record::TestStatus::Pass,
        record::TestStatus::Pass,
        record::TestStatus::Pass,
        record::TestStatus::Fail,
        record::TestStatus::Flaky,
        record::TestStatus::Skip,
        record::TestStatus::KnownFailure,
    ];
    (0..count)
        .map(|number| {
            let provider = *rng.pick(&["local", "aws", "vsphere"]);
            let kubernetes = *rng.pick(&["v1.37.0", "v1.37.1", "v1.36.4"]);
            let provider_version = *rng.pick(&["a", "b", "c"]);
            let started_at = 1_000 + rng.below(10_000) as i64;
            let mut results = Vec::new();
            for name in names {
                if rng.below(6) != 0 {
                    let status = *rng.pick(&statuses);
                    let (suite, name) = ("e2e".into(), name.into());
                    results.push(TestResult { suite, name, status, duration_seconds: None, message: None });
                }
            }
            if let Some(first) = results.first().cloned().filter(|_| rng.below(4) == 0) {
                // Retried: the first attempt failed, the second is listed after.
                results.insert(0, TestResult { status: record::TestStatus::Fail, ..first });
            }
            let mut record = build(number, started_at, kubernetes, provider_version, &[]);
            let info = &mut record.info;
            info.job = format!("ci-{provider}");
            info.path = format!("logs/ci-{provider}/{number}");
            info.artifacts_url = format!("file:///store/logs/ci-{provider}/{number}");
            info.provider = Some(provider.into());
            info.versions.provider = Some(provider.into());
            info.passed = *rng.pick(&[Some(true), Some(true), Some(false), None]);
            info.digest = format!("{number}-{seed}-{}", rng.below(u64::MAX));
            record.results = results;
            record
        })
        .collect()
}

/// Bundled providers.yaml with required tests for aws (a name and a pattern) and vsphere (a name no
/// build ran), so policies with and without required tests judge; aws keeps a 1.36 release line.
fn requiring_config(pattern: &str) -> ProvidersConfig {
    let mut config = ProvidersConfig::bundled();
    for provider in &mut config.providers {
        if provider.name == "aws" {
            provider.release_branches = vec!["release-1.36".into()];
        }
        provider.required.tests = match provider.name.as_str() {
            "aws" => vec![
                config::TestMatcher::Name("[cloud-e2e] nodes".into()),
                config::TestMatcher::Regex(regex::Regex::new(pattern).unwrap()),
            ],
            "vsphere" => vec![config::TestMatcher::Name("[cloud-e2e] never run".into())],
            _ => vec![],
        };
    }
    config
}

async fn assert_same_as_from_results(config: &ProvidersConfig, index: &Index, loaded: &Loaded, when: &str) {
    let reference = snapshot_from_results(config, &options(), index).await.unwrap();
    assert_eq!(answers(&loaded.snapshot), answers(&reference), "{}: {when}", index.name());
}

/// The answers from stored verdicts are exactly those of judging every build's results, on both
/// databases: when judged and stored, when read back, under a changed policy (judged again, the
/// old policy's verdicts kept and never mixed in), and after a build is replaced.
/// A failure the provider lists (`known_failures`) is stored as a known failure, and the LKG counts
/// it as the run that met it did: passed. The same failure unlisted makes its pair bad.
#[tokio::test]
async fn a_known_failure_counts_as_passed_in_the_lkg_and_an_unlisted_one_does_not_on_both_databases() {
    let (_dir, indexes) = both().await;
    for index in &indexes {
        let mut known = build(1, 100, "v1.37.1", "a", &[]);
        known.results[1].status = record::TestStatus::KnownFailure;
        let failed = build(2, 200, "v1.37.1", "b", &["[cloud-e2e] load balancers"]);
        for record in [&known, &failed] {
            index.index_build(record).await.unwrap();
        }
        let loaded = load_full(&ProvidersConfig::bundled(), &options(), index).await.unwrap();
        let reports: Vec<Report> = loaded.snapshot.lines.values().map(|engine| engine.report()).collect();
        let verdicts: BTreeMap<String, lkg::Verdict> = reports
            .iter()
            .flat_map(|r| r.providers.values())
            .flat_map(|p| &p.pairs)
            .map(|pair| (pair.provider_commit.clone(), pair.verdict))
            .collect();
        let expected = BTreeMap::from([("a".to_owned(), lkg::Verdict::Good), ("b".to_owned(), lkg::Verdict::Bad)]);
        assert_eq!(verdicts, expected, "{}", index.name());
    }
}

#[tokio::test]
async fn answers_from_stored_verdicts_are_those_of_judging_every_result_on_both_databases() {
    let (_dir, indexes) = both().await;
    let conformance = requiring_config(r"\[Conformance\]");
    let jobs = requiring_config(r"\[sig-apps\]");
    for index in &indexes {
        let builds = generated_builds(0x5eed, 80);
        for record in &builds {
            index.index_build(record).await.unwrap();
        }
        let first = load_full(&conformance, &options(), index).await.unwrap();
        assert_eq!((first.judged(), first.verdicts_held()), (80, 80), "{}: every build judged once", index.name());
        assert_same_as_from_results(&conformance, index, &first, "judged and stored").await;
        let reports: Vec<Report> = first.snapshot.lines.values().map(|engine| engine.report()).collect();
        let pairs = || reports.iter().flat_map(|r| r.providers.values()).flat_map(|p| &p.pairs);
        assert!(pairs().any(|pair| !pair.flaky_tests.is_empty()), "{}: some tests flaked", index.name());
        let verdicts: Vec<lkg::Verdict> = pairs().map(|pair| pair.verdict).collect();
        assert!(verdicts.contains(&lkg::Verdict::Good) && verdicts.contains(&lkg::Verdict::Bad), "{verdicts:?}");
        assert!(first.snapshot.lines.len() > 1, "{}: builds of two release lines", index.name());

        let again = load_full(&conformance, &options(), index).await.unwrap();
        assert_eq!(again.judged(), 0, "{}: every verdict read back", index.name());
        assert_same_as_from_results(&conformance, index, &again, "read back").await;

        // Another required pattern for aws: its builds are judged again, the others' are read.
        let aws = builds.iter().filter(|b| b.info.provider.as_deref() == Some("aws")).count();
        let changed = load_full(&jobs, &options(), index).await.unwrap();
        assert_eq!(changed.judged(), aws, "{}: only aws's policy changed", index.name());
        assert_same_as_from_results(&jobs, index, &changed, "a changed policy").await;
        assert_ne!(answers(&changed.snapshot), answers(&again.snapshot), "{}: the policy matters", index.name());
        let back = load_full(&conformance, &options(), index).await.unwrap();
        assert_eq!(back.judged(), 0, "{}: the first policy's verdicts are kept", index.name());
        assert_eq!(answers(&back.snapshot), answers(&again.snapshot), "{}", index.name());

        // A build replaced by other content is judged again, alone.
        let mut replaced = builds[3].clone();
        replaced.info.digest.push_str("-replaced");
        replaced.results.iter_mut().for_each(|r| r.status = record::TestStatus::Fail);
        assert_eq!(index.index_build(&replaced).await.unwrap(), Indexed::Replaced);
        let after = load_full(&conformance, &options(), index).await.unwrap();
        assert_eq!(after.judged(), 1, "{}", index.name());
        assert_same_as_from_results(&conformance, index, &after, "a build replaced").await;
    }
}

/// The answers of `loaded` brought up to date, against judging every result with `config`.
async fn assert_current(config: &ProvidersConfig, index: &Index, loaded: &mut Loaded, when: &str) {
    if let Update::NeedsFull(_) = load_new(config, &options(), index, loaded).await.unwrap() {
        *loaded = load_full(config, &options(), index).await.unwrap();
    }
    assert_same_as_from_results(config, index, loaded, when).await;
    let reread = load_full(config, &options(), index).await.unwrap();
    assert_same_as_from_results(config, index, &reread, &format!("{when}, loaded again")).await;
}

/// Two replicas with different policies (one of them changed in providers.yaml) load and judge at
/// once while a third indexes builds, on one Postgres, many times: each replica's answers are
/// always exactly its own policy's, whatever the other stored meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn two_replicas_of_two_policies_judging_while_builds_are_indexed_never_mix_them() {
    let url = fresh_postgres_database().await;
    let (writer, a, b) =
        (Index::open(&url).await.unwrap(), Index::open(&url).await.unwrap(), Index::open(&url).await.unwrap());
    let (conformance, jobs) = (requiring_config(r"\[Conformance\]"), requiring_config(r"\[sig-apps\]"));
    let builds = generated_builds(0xc0ffee, 200);
    let (mut held_a, mut held_b): (Option<Loaded>, Option<Loaded>) = (None, None);
    for (trial, batch) in builds.chunks(20).enumerate() {
        let index_all = async {
            for record in batch {
                writer.index_build(record).await.unwrap();
            }
        };
        let load_a = async {
            match held_a.take() {
                Some(mut loaded) => {
                    load_new(&conformance, &options(), &a, &mut loaded).await.unwrap();
                    loaded
                }
                None => load_full(&conformance, &options(), &a).await.unwrap(),
            }
        };
        let options_b = options();
        let load_b = load_full(&jobs, &options_b, &b);
        let ((), loaded_a, loaded_b) = tokio::join!(index_all, load_a, load_b);
        let (mut loaded_a, mut loaded_b) = (loaded_a, loaded_b.unwrap());
        assert_current(&conformance, &a, &mut loaded_a, &format!("replica a, trial {trial}")).await;
        assert_current(&jobs, &b, &mut loaded_b, &format!("replica b, trial {trial}")).await;
        held_a = Some(loaded_a);
        held_b = Some(loaded_b);
    }
    assert_eq!(held_b.map(|loaded| loaded.verdicts_held()), Some(200));
}

/// Each build's results as its page shows them: every status by name, and the failed and flaky
/// ones whole.
async fn pages(index: &Index, builds: &[BuildRecord]) -> Vec<Vec<(String, record::TestStatus, Option<TestResult>)>> {
    let mut pages = Vec::new();
    for record in builds {
        let results = index.build_results(&record.info.job, &record.info.build).await.unwrap();
        let page = results
            .into_iter()
            .map(|r| {
                let kept = matches!(r.status, record::TestStatus::Fail | record::TestStatus::Flaky).then(|| r.clone());
                (r.name, r.status, kept)
            })
            .collect();
        pages.push(page);
    }
    pages
}

/// Expiring every result keeps every build, verdict, failure, status and cited build, and the LKG
/// answers: read back, and judged again from the packed results under another policy.
#[tokio::test]
async fn expired_results_keep_builds_verdicts_failures_and_the_lkg_on_both_databases() {
    let (_dir, indexes) = both().await;
    let (conformance, jobs) = (requiring_config(r"\[Conformance\]"), requiring_config(r"\[sig-apps\]"));
    for index in &indexes {
        let mut builds = generated_builds(0xe3b0, 60);
        for (n, record) in builds.iter_mut().enumerate() {
            for result in &mut record.results {
                result.duration_seconds = Some(n as f64);
                if result.status == record::TestStatus::Fail {
                    result.message = Some(format!("build {n}: timed out waiting for the node"));
                }
            }
            index.index_build(record).await.unwrap();
        }
        let before = answers(&load_full(&conformance, &options(), index).await.unwrap().snapshot);
        let before_jobs = answers(&load_full(&jobs, &options(), index).await.unwrap().snapshot);
        let failures = || async {
            let mut failures: Vec<String> =
                index.failures_since(0, ("", "")).await.unwrap().iter().map(|f| format!("{f:?}")).collect();
            failures.sort();
            failures
        };
        let (pages_before, failures_before) = (pages(index, &builds).await, failures().await);
        let results_before = index.counts().await.unwrap();

        let expired = index.expire_results(i64::MAX, 42).await.unwrap();
        assert_eq!(expired.builds, 60, "{}", index.name());
        assert!(expired.results > 0, "{}", index.name());
        let results_after = index.counts().await.unwrap();
        assert_eq!(results_after.0, results_before.0, "{}: every build kept", index.name());
        assert_eq!(results_after.1, results_before.1 - expired.results as i64, "{}", index.name());
        assert_eq!(index.expire_results(i64::MAX, 43).await.unwrap(), Default::default(), "{}: once", index.name());

        assert_eq!(pages(index, &builds).await, pages_before, "{}: every status, every failure", index.name());
        assert!(failures().await == failures_before, "{}: the failure clusters' input changed", index.name());
        let read_back = load_full(&conformance, &options(), index).await.unwrap();
        assert_eq!((answers(&read_back.snapshot), read_back.judged()), (before.clone(), 0), "{}", index.name());
        index.forget_verdicts().await;
        let judged_again = load_full(&jobs, &options(), index).await.unwrap();
        assert_eq!(judged_again.judged(), 60, "{}: judged from the packed results", index.name());
        assert_eq!(answers(&judged_again.snapshot), before_jobs, "{}", index.name());
        for (id, _) in judged_again.snapshot.builds.iter() {
            let (job, build) = id.split_once('/').unwrap();
            assert!(index.build(job, build).await.unwrap().is_some(), "{}: cited build {id} kept", index.name());
        }

        // A build indexed again with other content has all its results again.
        let mut replaced = builds[0].clone();
        replaced.info.digest.push_str("-again");
        index.index_build(&replaced).await.unwrap();
        let page = index.build_results(&replaced.info.job, &replaced.info.build).await.unwrap();
        assert_eq!(page, replaced.results, "{}", index.name());
    }
}

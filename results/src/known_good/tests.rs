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
            failure_message: None,
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
    serde_json::json!({ "lines": lines, "builds": snapshot.builds })
}

async fn assert_same_as_full(index: &Index, loaded: &Loaded, when: &str) {
    let full = load_full(&ProvidersConfig::bundled(), &options(), index).await.unwrap();
    assert_eq!(answers(&loaded.snapshot), answers(&full.snapshot), "{}: {when}", index.name());
    assert_eq!(loaded.results_held(), full.results_held(), "{}: {when}", index.name());
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

        // A later build of versions already loaded: added to the engines as they are.
        index.index_build(&build(4, 400, "v1.37.0", "a", &["[sig-node] pods"])).await.unwrap();
        assert_eq!(update(index, &mut loaded).await, Update::Added { builds: 1 });
        assert_same_as_full(index, &loaded, "a build of known versions added").await;
        assert!(loaded.snapshot.builds.contains_key("ci-local/4"), "{}", index.name());

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

//! Full tier: needs PostgreSQL (the server `scripts/test` starts).
//!
//! Every query of the index, run against both databases: a SQLite file, and the Postgres server
//! that `scripts/test` starts (`HARNESS_TEST_POSTGRES_URL`; each test gets a database of its own).

use std::collections::HashMap;

use super::*;
use crate::layout::Versions;
use crate::record::{BuildInfo, BuildRecord, Problem, State, TestResult, TestStatus};
use sqlx::migrate::Migrator;
use testing::fresh_postgres_database;

/// A fresh index on each backend; the temp dir holds the SQLite file.
async fn both() -> (tempfile::TempDir, [Index; 2]) {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Index::open(&format!("sqlite://{}", dir.path().join("index.sqlite").display())).await.unwrap();
    let postgres = Index::open(&fresh_postgres_database().await).await.unwrap();
    (dir, [sqlite, postgres])
}

fn result(name: &str, status: TestStatus) -> TestResult {
    TestResult {
        suite: "Kubernetes e2e suite".into(),
        name: name.into(),
        status,
        duration_seconds: Some(1.25),
        message: matches!(status, TestStatus::Fail | TestStatus::KnownFailure)
            .then(|| format!("{name} failed: expected 3 nodes, saw 2")),
    }
}

fn record(job: &str, build: &str, started_at: i64, results: Vec<TestResult>) -> BuildRecord {
    let info = BuildInfo {
        job: job.into(),
        build: build.into(),
        path: format!("logs/{job}/{build}"),
        pull: None,
        provider: Some("local".into()),
        state: State::Finished,
        started_at,
        finished_at: Some(started_at + 60),
        passed: Some(results.iter().all(|r| r.status != TestStatus::Fail)),
        result: Some("SUCCESS".into()),
        versions: Versions {
            kubernetes_version: Some("v1.37.1".into()),
            provider: Some("local".into()),
            provider_version: Some("abc123".into()),
            ccm_version: Some("0.1.0".into()),
            job_version: None,
            repo_commit: None,
            repos: Default::default(),
        },
        artifacts_url: format!("file:///store/logs/{job}/{build}"),
        digest: format!("digest-{build}-{}", results.len()),
    };
    BuildRecord { info, results, problems: vec![] }
}

#[tokio::test]
async fn a_build_and_its_results_read_back_the_same_on_both_databases() {
    let (_dir, indexes) = both().await;
    let mut rec = record(
        "ci-local",
        "100",
        1_700_000_000,
        vec![
            result("[cloud-e2e] nodes get a providerID", TestStatus::Pass),
            result("[cloud-e2e] load balancers get an address", TestStatus::Fail),
            result("[sig-storage] skipped one", TestStatus::Skip),
            result("[cloud-e2e] routes", TestStatus::Flaky),
            result("[sig-network] session affinity", TestStatus::KnownFailure),
        ],
    );
    rec.info.passed = Some(false);
    rec.results[2].duration_seconds = None;
    rec.problems = vec![Problem { file: "artifacts/junit_02.xml".into(), message: "truncated".into() }];
    for index in &indexes {
        assert_eq!(index.index_build(&rec).await.unwrap(), Indexed::Inserted, "{}", index.name());
        let build = index.build("ci-local", "100").await.unwrap().unwrap();
        assert_eq!(build.passed, Some(false));
        assert_eq!(build.state, State::Finished);
        assert_eq!(build.provider.as_deref(), Some("local"));
        assert_eq!(build.versions.kubernetes_version.as_deref(), Some("v1.37.1"));
        assert_eq!(build.finished_at, Some(1_700_000_060));
        assert_eq!(index.build_results("ci-local", "100").await.unwrap(), rec.results, "{}", index.name());
        assert_eq!(index.build_problems("ci-local", "100").await.unwrap(), rec.problems);
        assert_eq!(index.build("ci-local", "101").await.unwrap(), None);
    }
    let [sqlite, postgres] = &indexes;
    assert_eq!(sqlite.snapshot().await.unwrap(), postgres.snapshot().await.unwrap());
    // SQLite's table was rebuilt for the status (migration 0012): its indexes came back with it
    // (and 0013 added one).
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'test_results' AND sql IS NOT NULL ORDER BY name",
    )
    .fetch_all(&sqlite.pool)
    .await
    .unwrap();
    assert_eq!(names, ["test_results_build", "test_results_failed", "test_results_said", "test_results_test_build"]);
}

#[tokio::test]
async fn unknown_outcomes_stay_unknown() {
    let (_dir, indexes) = both().await;
    let mut running = record("ci-local", "7", 1_700_000_000, vec![]);
    let i = &mut running.info;
    (i.state, i.passed, i.result, i.finished_at) = (State::Running, None, None, None);
    for index in &indexes {
        index.index_build(&running).await.unwrap();
        let build = index.build("ci-local", "7").await.unwrap().unwrap();
        assert_eq!((build.state, build.passed, build.finished_at), (State::Running, None, None), "{}", index.name());
    }
}

#[tokio::test]
async fn latest_builds_come_newest_first_and_limited() {
    let (_dir, indexes) = both().await;
    for index in &indexes {
        for (build, started) in [("1", 100), ("3", 300), ("2", 200), ("4", 400)] {
            index.index_build(&record("ci-a", build, started, vec![result("t", TestStatus::Pass)])).await.unwrap();
        }
        index.index_build(&record("ci-b", "9", 999, vec![])).await.unwrap();
        let latest: Vec<String> = index.latest_builds("ci-a", 3).await.unwrap().into_iter().map(|b| b.build).collect();
        assert_eq!(latest, ["4", "3", "2"], "{}", index.name());
        assert!(index.latest_builds("nope", 3).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn a_test_history_spans_builds_and_jobs_newest_first() {
    let (_dir, indexes) = both().await;
    for index in &indexes {
        let t = "[cloud-e2e] nodes get a providerID";
        index.index_build(&record("ci-a", "1", 100, vec![result(t, TestStatus::Pass)])).await.unwrap();
        index.index_build(&record("ci-b", "5", 300, vec![result(t, TestStatus::Fail)])).await.unwrap();
        index.index_build(&record("ci-a", "2", 200, vec![result("other", TestStatus::Pass)])).await.unwrap();
        let history = index.test_history(t, 10).await.unwrap();
        let seen: Vec<_> = history.iter().map(|r| (r.job.as_str(), r.build.as_str(), r.result.status)).collect();
        assert_eq!(seen, [("ci-b", "5", TestStatus::Fail), ("ci-a", "1", TestStatus::Pass)], "{}", index.name());
        assert!(history[0].result.message.as_deref().unwrap().contains("expected 3 nodes"));
    }
}

#[tokio::test]
async fn indexing_the_same_build_again_is_a_no_op_and_new_content_replaces_it() {
    let (_dir, indexes) = both().await;
    let first = record("ci-a", "1", 100, vec![result("a", TestStatus::Pass), result("b", TestStatus::Fail)]);
    let mut second = record("ci-a", "1", 100, vec![result("a", TestStatus::Pass)]);
    second.info.digest = "another".into();
    for index in &indexes {
        assert_eq!(index.index_build(&first).await.unwrap(), Indexed::Inserted);
        assert_eq!(index.index_build(&first).await.unwrap(), Indexed::Unchanged);
        assert_eq!(index.counts().await.unwrap(), (1, 2));
        assert_eq!(index.index_build(&second).await.unwrap(), Indexed::Replaced);
        assert_eq!(index.counts().await.unwrap(), (1, 1), "{}", index.name());
        assert_eq!(index.build_results("ci-a", "1").await.unwrap(), second.results);
        packed_cells_agree_with_results(index, 1).await;
    }
}

/// Every build has a packed row, packed from its content, holding what its results hold.
async fn packed_cells_agree_with_results(index: &Index, builds: usize) {
    let packed = index
        .fetch_rows(
            "SELECT c.build_id, c.cells, c.digest, b.digest, c.passed_tests, c.ran_tests \
             FROM build_cells c JOIN builds b ON b.id = c.build_id",
            "read packed cells",
            |r| {
                let row: (i64, String, String, String) = (r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?);
                Ok((row, (r.try_get::<i64, _>(4)?, r.try_get::<i64, _>(5)?)))
            },
        )
        .await
        .unwrap();
    assert_eq!(packed.len(), builds, "{}: a build without its packed row", index.name());
    let mut from_results: HashMap<i64, Vec<(i64, TestStatus)>> = HashMap::new();
    index
        .for_each_lkg_result(None, |build, test, status| from_results.entry(build).or_default().push((test, status)))
        .await
        .unwrap();
    for ((build, cells, digest, build_digest), counts) in packed {
        assert_eq!(digest, build_digest, "{}: packed from other content", index.name());
        let mut unpacked = packed_cells::unpack(&cells).unwrap();
        unpacked.sort_by_key(|(test, _)| *test);
        let mut expected = from_results.remove(&build).unwrap_or_default();
        expected.sort_by_key(|(test, _)| *test);
        assert_eq!(unpacked, expected, "{}: build {build}", index.name());
        let passed = expected.iter().filter(|(_, s)| matches!(s, TestStatus::Pass | TestStatus::Flaky)).count();
        let ran = expected.iter().filter(|(_, s)| *s != TestStatus::Skip).count();
        assert_eq!(counts, (passed as i64, ran as i64), "{}: build {build}", index.name());
    }
}

#[tokio::test]
async fn concurrent_replacements_of_one_build_leave_its_packed_cells_as_its_results() {
    let (_dir, indexes) = both().await;
    let content = |i: usize| {
        let status = if i.is_multiple_of(2) { TestStatus::Pass } else { TestStatus::Fail };
        let mut rec = record("ci-a", "1", 100, (0..300).map(|t| result(&format!("t{}", t + i), status)).collect());
        rec.info.digest = format!("content-{i}");
        rec
    };
    for index in &indexes {
        let tasks: Vec<_> = (0..12)
            .map(|i| {
                let (index, rec) = (index.clone(), content(i));
                tokio::spawn(async move { index.index_build(&rec).await })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        packed_cells_agree_with_results(index, 1).await;
    }
}

#[tokio::test]
async fn the_grid_and_trends_read_packed_cells_and_the_results_of_a_build_whose_packed_row_is_stale_or_missing() {
    let (_dir, indexes) = both().await;
    for index in &indexes {
        index.index_build(&record("ci-a", "1", 100, vec![result("t", TestStatus::Pass)])).await.unwrap();
        let read = async || index.grid_builds("ci-a", 1).await.unwrap()[0].results.clone();
        let [(test, status)] = read().await[..] else { panic!("one result") };
        assert_eq!(status, TestStatus::Pass);
        let counts = async || {
            let trend = &index.job_trends(1).await.unwrap()[0];
            (trend.passed_tests, trend.ran_tests)
        };
        assert_eq!(counts().await, (1, 1));
        // Packed cells and counts are what the grid and the sparklines read...
        index.pool.execute("UPDATE build_cells SET cells = '999f', passed_tests = 7, ran_tests = 9").await.unwrap();
        assert_eq!(read().await, [(999, TestStatus::Fail)], "{}", index.name());
        assert_eq!(counts().await, (7, 9), "{}", index.name());
        // ... unless packed from other content (a build replaced by a binary that predates them).
        index.pool.execute("UPDATE build_cells SET digest = 'older'").await.unwrap();
        assert_eq!(read().await, [(test, TestStatus::Pass)], "{}", index.name());
        assert_eq!(counts().await, (1, 1), "{}", index.name());
        index.pool.execute("DELETE FROM build_cells").await.unwrap();
        assert_eq!(read().await, [(test, TestStatus::Pass)], "{}", index.name());
        assert_eq!(counts().await, (1, 1), "{}", index.name());
    }
}

#[tokio::test]
async fn builds_indexed_before_the_packed_cells_get_theirs_from_the_migration_on_both_databases() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite://{}?mode=rwc", dir.path().join("index.sqlite").display());
    for (url, dialect) in [(sqlite, "sqlite"), (fresh_postgres_database().await, "postgres")] {
        let old = dir.path().join(format!("migrations-{dialect}"));
        std::fs::create_dir(&old).unwrap();
        let all = Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations").join(dialect);
        for entry in std::fs::read_dir(&all).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.as_str() < "0008" {
                std::fs::copy(&path, old.join(&name)).unwrap();
            }
        }
        sqlx::any::install_default_drivers();
        let pool = AnyPool::connect(&url).await.unwrap();
        Migrator::new(old.as_path()).await.unwrap().run(&pool).await.unwrap();
        let statements = [
            "INSERT INTO jobs (name) VALUES ('ci-a')",
            "INSERT INTO builds (job_id, build, path, state, started_at, artifacts_url, digest) \
             VALUES (1, '1', 'logs/ci-a/1', 'finished', 100, 'file:///s/logs/ci-a/1', 'd1')",
            "INSERT INTO builds (job_id, build, path, state, started_at, artifacts_url, digest) \
             VALUES (1, '2', 'logs/ci-a/2', 'finished', 200, 'file:///s/logs/ci-a/2', 'd2')",
            "INSERT INTO tests (suite, name) VALUES ('s', 't'), ('s', 'u'), ('s', 'v'), ('s', 'w')",
            "INSERT INTO test_results (build_id, test_id, status) \
             VALUES (1, 1, 'pass'), (1, 2, 'fail'), (1, 3, 'flaky'), (1, 4, 'skip')",
        ];
        for statement in statements {
            pool.execute(statement).await.unwrap();
        }
        pool.close().await;
        let index = Index::open(&url).await.unwrap();
        assert_eq!(index.suites().await.unwrap(), ["s"], "{dialect}: build 1's suite, from the migration");
        packed_cells_agree_with_results(&index, 2).await;
        let mut builds = index.grid_builds("ci-a", 2).await.unwrap();
        builds[1].results.sort_by_key(|(test, _)| *test);
        let results: Vec<&[(i64, TestStatus)]> = builds.iter().map(|b| b.results.as_slice()).collect();
        let one = [(1, TestStatus::Pass), (2, TestStatus::Fail), (3, TestStatus::Flaky), (4, TestStatus::Skip)];
        assert_eq!(results, [&[][..], &one[..]], "{dialect}");
    }
}

#[tokio::test]
async fn twenty_concurrent_indexings_of_one_build_leave_one_build() {
    let (_dir, indexes) = both().await;
    let rec = record("ci-a", "1", 100, (0..500).map(|i| result(&format!("t{i}"), TestStatus::Pass)).collect());
    for index in &indexes {
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let (index, rec) = (index.clone(), rec.clone());
                tokio::spawn(async move { index.index_build(&rec).await })
            })
            .collect();
        let mut outcomes = Vec::new();
        for task in tasks {
            outcomes.push(task.await.unwrap().unwrap());
        }
        let inserted = outcomes.iter().filter(|o| **o == Indexed::Inserted).count();
        assert_eq!(inserted, 1, "{}: {outcomes:?}", index.name());
        assert_eq!(index.counts().await.unwrap(), (1, 500), "{}", index.name());
        packed_cells_agree_with_results(index, 1).await;
    }
}

#[tokio::test]
async fn a_failure_midway_leaves_nothing_half_written() {
    let (_dir, indexes) = both().await;
    let mut rec = record("ci-a", "1", 100, (0..2500).map(|i| result(&format!("t{i}"), TestStatus::Pass)).collect());
    rec.problems = vec![Problem { file: "artifacts/junit_x.xml".into(), message: "bad".into() }];
    for index in &indexes {
        // The build row and 2,500 results go in before the problem row, whose table is gone.
        index.pool.execute("DROP TABLE build_problems").await.unwrap();
        let err = index.index_build(&rec).await.unwrap_err().to_string();
        assert!(err.contains("add a problem"), "{err}");
        assert_eq!(index.counts().await.unwrap(), (0, 0), "{}", index.name());
        assert!(index.latest_builds("ci-a", 1).await.unwrap().is_empty());
        packed_cells_agree_with_results(index, 0).await;
    }
}

#[tokio::test]
async fn tests_added_by_a_rolled_back_build_are_not_taken_as_known() {
    let (_dir, indexes) = both().await;
    let mut rec = record("ci-a", "1", 100, vec![result("brand new test", TestStatus::Pass)]);
    rec.problems = vec![Problem { file: "artifacts/junit_x.xml".into(), message: "bad".into() }];
    for index in &indexes {
        let problems = "CREATE TABLE build_problems (id BIGINT PRIMARY KEY, build_id BIGINT NOT NULL, \
                        file TEXT NOT NULL, message TEXT NOT NULL)";
        index.pool.execute("DROP TABLE build_problems").await.unwrap();
        index.index_build(&rec).await.unwrap_err();
        // The test row was rolled back with the build: indexing again must add it again, not
        // reuse the id the failed transaction saw.
        index.pool.execute(problems).await.unwrap();
        rec.problems.clear();
        assert_eq!(index.index_build(&rec).await.unwrap(), Indexed::Inserted, "{}", index.name());
        assert_eq!(index.build_results("ci-a", "1").await.unwrap(), rec.results);
        rec.problems = vec![Problem { file: "artifacts/junit_x.xml".into(), message: "bad".into() }];
    }
}

#[tokio::test]
async fn a_second_process_finds_the_tests_the_first_added() {
    let dir = tempfile::tempdir().unwrap();
    let urls = [format!("sqlite://{}", dir.path().join("index.sqlite").display()), fresh_postgres_database().await];
    for url in urls {
        let first = Index::open(&url).await.unwrap();
        let old = vec![result("a", TestStatus::Pass), result("b", TestStatus::Fail)];
        first.index_build(&record("ci-a", "1", 100, old)).await.unwrap();
        // A new Index knows no test ids: the existing ones are looked up, the new one added.
        let second = Index::open(&url).await.unwrap();
        let mixed = vec![result("b", TestStatus::Pass), result("c", TestStatus::Skip), result("a", TestStatus::Fail)];
        second.index_build(&record("ci-a", "2", 200, mixed.clone())).await.unwrap();
        assert_eq!(second.build_results("ci-a", "2").await.unwrap(), mixed, "{url}");
        let history: Vec<_> = second.test_history("a", 5).await.unwrap().into_iter().map(|r| r.result.status).collect();
        assert_eq!(history, [TestStatus::Fail, TestStatus::Pass], "{url}");
    }
}

#[tokio::test]
async fn opening_a_new_sqlite_file_from_many_tasks_at_once_migrates_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("new.sqlite").display());
    let opens: Vec<_> = (0..8)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { Index::open(&url).await })
        })
        .collect();
    for open in opens {
        open.await.unwrap().unwrap_or_else(|e| panic!("{e}"));
    }
}

#[tokio::test]
async fn bad_and_dead_databases_are_named_without_their_password() {
    let err = Index::open("mysql://x").await.unwrap_err().to_string();
    assert!(err.contains("\"mysql://x\"") && err.contains("sqlite://"), "{err}");
    let err = Index::open("sqlite://").await.unwrap_err().to_string();
    assert!(err.contains("not a database URL"), "{err}");
    // Nothing listens on port 1 of loopback.
    let err = Index::open("postgres://harness:s3cret@127.0.0.1:1/index").await.unwrap_err().to_string();
    assert!(err.contains("cannot connect to postgres://harness:***@127.0.0.1:1/index"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
}

#[test]
fn placeholders_number_every_bind_in_order() {
    assert_eq!(placeholders(2, 3), "($1, $2, $3), ($4, $5, $6)");
    assert_eq!(placeholders(1, 1), "($1)");
}

#[test]
fn sqlite_urls_create_their_file() {
    let (backend, url) = normalise_url("sqlite:///tmp/x/index.sqlite").unwrap();
    assert_eq!((backend, url.as_str()), (Backend::Sqlite, "sqlite:///tmp/x/index.sqlite?mode=rwc"));
    let (_, url) = normalise_url("sqlite://rel.db?mode=ro").unwrap();
    assert_eq!(url, "sqlite://rel.db?mode=ro");
    assert_eq!(normalise_url("postgresql://h/db").unwrap().0, Backend::Postgres);
}

#[tokio::test]
async fn lkg_rows_hold_every_finished_build_in_start_order_with_prow_fields_on_both_databases() {
    let (_dir, indexes) = both().await;
    for index in &indexes {
        let late = record("ci-a", "2", 200, vec![result("t1", TestStatus::Fail), result("t2", TestStatus::Flaky)]);
        let early = record("ci-a", "1", 100, vec![result("t1", TestStatus::Pass)]);
        let mut running = record("ci-a", "3", 300, vec![result("t1", TestStatus::Pass)]);
        running.info.state = State::Running;
        // A build Prow wrote: no provider version of ours, the provider's commit in `repos`.
        let mut unversioned = record("ci-a", "4", 400, vec![]);
        unversioned.info.versions.provider_version = None;
        unversioned.info.versions.repos = [("acme/cloud-provider-acme".into(), "master:fedcba".into())].into();
        for rec in [&late, &early, &running, &unversioned] {
            index.index_build(rec).await.unwrap();
        }
        let rows = index.lkg_rows().await.unwrap();
        let builds: Vec<(&str, Option<&str>, Option<&str>)> = rows
            .builds
            .iter()
            .map(|b| (b.build.as_str(), b.provider.as_deref(), b.provider_version.as_deref()))
            .collect();
        let expected =
            [("1", Some("local"), Some("abc123")), ("2", Some("local"), Some("abc123")), ("4", Some("local"), None)];
        assert_eq!(builds, expected, "{}", index.name());
        assert_eq!(rows.builds[2].repos["acme/cloud-provider-acme"], "master:fedcba", "{}", index.name());
        let name = |test: i64| rows.tests.iter().find(|(id, _)| *id == test).map(|(_, n)| n.as_str()).unwrap();
        let of = |build: i64| -> Vec<(&str, TestStatus)> {
            rows.results.iter().filter(|(b, _, _)| *b == build).map(|(_, t, s)| (name(*t), *s)).collect()
        };
        assert_eq!(of(rows.builds[1].row), [("t1", TestStatus::Fail), ("t2", TestStatus::Flaky)], "{}", index.name());
        assert_eq!(of(rows.builds[0].row), [("t1", TestStatus::Pass)]);
        assert_eq!(rows.builds[0].artifacts_url, "file:///store/logs/ci-a/1");
    }
}

#[tokio::test]
async fn the_history_cache_keeps_the_latest_answer_per_request_on_both_databases() {
    let (_dir, indexes) = both().await;
    for index in &indexes {
        let key = "https://api.github.com/repos/kubernetes/kubernetes/commits?sha=master";
        assert_eq!(index.cached_history(key).await.unwrap(), None, "{}", index.name());
        index.cache_history(key, Some("\"e1\""), Some("https://next"), "[1]", 10).await.unwrap();
        index.cache_history(key, None, None, "[2]", 20).await.unwrap();
        let cached = index.cached_history(key).await.unwrap();
        assert_eq!(cached, Some((None, None, "[2]".to_string(), 20)), "{}", index.name());
    }
}

#[tokio::test]
async fn grid_results_hold_the_latest_builds_of_one_job_on_both_databases() {
    let (_dir, indexes) = both().await;
    for index in &indexes {
        for (build, started, status) in
            [("1", 100, TestStatus::Fail), ("2", 200, TestStatus::Pass), ("3", 300, TestStatus::Flaky)]
        {
            index.index_build(&record("ci-a", build, started, vec![result("t", status)])).await.unwrap();
        }
        index.index_build(&record("ci-b", "9", 999, vec![result("t", TestStatus::Fail)])).await.unwrap();
        assert_eq!(index.job_generation("ci-a").await.unwrap(), Some(3), "three builds written");
        index.index_build(&record("ci-a", "3", 300, vec![result("t", TestStatus::Flaky)])).await.unwrap();
        assert_eq!(index.job_generation("ci-a").await.unwrap(), Some(3), "the same build again changes nothing");
        assert_eq!(index.job_generation("ci-z").await.unwrap(), None);
        let builds = index.grid_builds("ci-a", 2).await.unwrap();
        let paths: Vec<&str> = builds.iter().map(|b| b.info.path.as_str()).collect();
        assert_eq!(paths, ["logs/ci-a/3", "logs/ci-a/2"], "newest first: {}", index.name());
        let test = builds[0].results[0].0;
        let results: Vec<&[(i64, TestStatus)]> = builds.iter().map(|b| b.results.as_slice()).collect();
        assert_eq!(results, [&[(test, TestStatus::Flaky)][..], &[(test, TestStatus::Pass)]], "{}", index.name());
        assert_eq!(
            index.test_names(&[test]).await.unwrap(),
            [(test, "Kubernetes e2e suite".to_string(), "t".to_string())],
            "the test named once"
        );
        assert_eq!(index.grid_builds("ci-z", 2).await.unwrap(), []);
        let jobs = index.jobs().await.unwrap();
        assert_eq!(jobs, [("ci-a".to_string(), Some("local".to_string())), ("ci-b".into(), Some("local".into()))]);
        let mut matrix = index.matrix_builds().await.unwrap();
        matrix.sort_by(|a, b| (&a.job, &a.build).cmp(&(&b.job, &b.build)));
        let builds: Vec<_> = matrix.iter().map(|b| (b.job.as_str(), b.build.as_str(), b.passed)).collect();
        let (pass, fail) = (Some(true), Some(false));
        assert_eq!(builds, [("ci-a", "1", fail), ("ci-a", "2", pass), ("ci-a", "3", pass), ("ci-b", "9", fail)]);
    }
}

#[tokio::test]
async fn the_index_generation_grows_with_every_change_and_lkg_records_only_move_forward() {
    let (_dir, indexes) = both().await;
    for index in &indexes {
        assert_eq!(index.index_generation().await.unwrap(), 0);
        let first = record("ci-a", "1", 100, vec![result("a", TestStatus::Pass)]);
        index.index_build(&first).await.unwrap();
        index.index_build(&record("ci-b", "1", 100, vec![])).await.unwrap();
        index.index_build(&first).await.unwrap();
        assert_eq!(index.index_generation().await.unwrap(), 2, "{}: an unchanged build moved it", index.name());

        assert_eq!(index.record_lkg(2, "{\"two\":1}", 10).await.unwrap(), LkgRecorded::Written);
        assert_eq!(index.record_lkg(2, "{\"two\":1}", 11).await.unwrap(), LkgRecorded::Same);
        assert_eq!(index.record_lkg(2, "{\"two\":2}", 12).await.unwrap(), LkgRecorded::Conflict);
        assert_eq!(index.record_lkg(1, "{\"one\":1}", 13).await.unwrap(), LkgRecorded::Stale { recorded: 2 });
        assert_eq!(index.latest_lkg().await.unwrap(), Some((2, "{\"two\":1}".to_owned())), "{}", index.name());
    }
}

#[tokio::test]
async fn concurrent_lkg_records_of_one_generation_write_it_once() {
    let (_dir, indexes) = both().await;
    for index in &indexes {
        let tasks: Vec<_> = (0..16)
            .map(|i| {
                let index = index.clone();
                tokio::spawn(async move { index.record_lkg(5 + i % 2, "{}", 1).await })
            })
            .collect();
        let mut outcomes = Vec::new();
        for task in tasks {
            outcomes.push(task.await.unwrap().unwrap());
        }
        let written = outcomes.iter().filter(|o| **o == LkgRecorded::Written).count();
        // Generation 5 may be written before 6 or be stale by then; 6 is written exactly once.
        assert!((1..=2).contains(&written), "{}: {outcomes:?}", index.name());
        assert_eq!(index.latest_lkg().await.unwrap().unwrap().0, 6);
    }
}

#[tokio::test]
async fn tokens_are_kept_by_hash_and_revoked_once() {
    let (_dir, indexes) = both().await;
    for index in &indexes {
        let id = index.add_token("alpha", "hash-1", "CI", 100).await.unwrap();
        index.add_token("beta", "hash-2", "", 101).await.unwrap();
        let found = index.token_by_hash("hash-1").await.unwrap().unwrap();
        assert_eq!((found.id, found.provider.as_str(), found.revoked_at), (id, "alpha", None));
        assert!(index.add_token("alpha", "hash-1", "", 102).await.is_err(), "a hash is unique");
        assert!(index.revoke_token(id, 200).await.unwrap());
        assert!(!index.revoke_token(id, 201).await.unwrap());
        assert_eq!(index.token_by_hash("hash-1").await.unwrap().unwrap().revoked_at, Some(200));
        assert_eq!(index.tokens().await.unwrap().len(), 2, "{}", index.name());
        assert!(index.token_by_hash("nope").await.unwrap().is_none());
    }
}

/// A presubmit's record: the job and build of `periodic`, in `pr-logs/pull/o_r/7/…`.
fn presubmit(periodic: &BuildRecord, digest: &str) -> BuildRecord {
    let mut rec = periodic.clone();
    rec.info.path = format!("pr-logs/pull/o_r/7/{}/{}", rec.info.job, rec.info.build);
    rec.info.pull = Some("7".into());
    rec.info.digest = digest.into();
    rec
}

#[tokio::test]
async fn a_presubmit_and_the_periodic_build_of_one_id_are_two_builds_on_both_databases() {
    let (_dir, indexes) = both().await;
    let periodic = record("ci-a", "1", 100, vec![result("a", TestStatus::Pass)]);
    let mut pr = presubmit(&record("ci-a", "1", 200, vec![result("b", TestStatus::Fail)]), "pr");
    pr.info.passed = Some(false);
    let only_pr = presubmit(&record("ci-a", "2", 300, vec![result("c", TestStatus::Pass)]), "pr-2");
    for index in &indexes {
        assert_eq!(index.index_build(&periodic).await.unwrap(), Indexed::Inserted);
        assert_eq!(index.index_build(&pr).await.unwrap(), Indexed::Inserted, "{}", index.name());
        assert_eq!(index.index_build(&periodic).await.unwrap(), Indexed::Unchanged);
        assert_eq!(index.index_build(&only_pr).await.unwrap(), Indexed::Inserted);
        assert_eq!(index.counts().await.unwrap(), (3, 3));
        // By job and id, the periodic build; the presubmit by its directory.
        let named = index.build("ci-a", "1").await.unwrap().unwrap();
        assert_eq!((named.path.as_str(), named.passed), ("logs/ci-a/1", Some(true)), "{}", index.name());
        assert_eq!(index.build_results("ci-a", "1").await.unwrap(), periodic.results);
        let at = index.build_at(&pr.info.path).await.unwrap().unwrap();
        assert_eq!((at.pull.as_deref(), at.passed), (Some("7"), Some(false)));
        assert_eq!(index.build("ci-a", "2").await.unwrap().unwrap().path, only_pr.info.path);
        assert_eq!(index.build_results("ci-a", "2").await.unwrap(), only_pr.results);
        let grid = index.grid_builds("ci-a", 10).await.unwrap();
        let mut paths: Vec<&str> = grid.iter().flat_map(|b| b.results.iter().map(|_| b.info.path.as_str())).collect();
        paths.sort();
        assert_eq!(paths, ["logs/ci-a/1", "pr-logs/pull/o_r/7/ci-a/1", "pr-logs/pull/o_r/7/ci-a/2"]);
        let mut states = index.build_states().await.unwrap();
        states.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(states.len(), 3);
        assert!(states.iter().all(|(_, state)| *state == State::Finished));
    }
}

#[tokio::test]
async fn of_concurrent_claims_on_a_build_one_wins_and_a_changed_claim_is_not_taken_over_on_both_databases() {
    let (_dir, indexes) = both().await;
    for index in &indexes {
        let digests: Vec<String> = (0..20).map(|i| format!("d{i}")).collect();
        let tasks: Vec<_> = digests
            .iter()
            .map(|digest| {
                let (index, digest) = (index.clone(), digest.clone());
                tokio::spawn(async move {
                    let claim = Claim { path: "logs/ci-a/1", digest: &digest, finished: true };
                    index.claim_build(&claim, 1000).await
                })
            })
            .collect();
        let mut won = 0;
        for task in tasks {
            won += usize::from(task.await.unwrap().unwrap().is_none());
        }
        assert_eq!(won, 1, "{}", index.name());
        let seen = index.build_claim("logs/ci-a/1").await.unwrap().unwrap();
        let mine = Claim { path: "logs/ci-a/1", digest: &seen.digest, finished: true };
        assert_eq!((seen.claimed_at, seen.done_at, seen.finished), (1000, None, true));
        assert_eq!(index.claims_being_written(1000).await.unwrap(), ["logs/ci-a/1"]);
        assert!(index.claims_being_written(1001).await.unwrap().is_empty());
        // Renewed since it was seen: not taken over; seen as it is: taken over, once.
        assert!(index.renew_claim(&mine, 1010).await.unwrap());
        let other = Claim { path: "logs/ci-a/1", digest: "other", finished: false };
        assert!(!index.take_over_claim(&other, &seen, 1100).await.unwrap(), "{}", index.name());
        let seen = index.build_claim("logs/ci-a/1").await.unwrap().unwrap();
        assert!(index.take_over_claim(&other, &seen, 1100).await.unwrap());
        assert!(!index.take_over_claim(&other, &seen, 1100).await.unwrap());
        assert!(!index.finish_claim(&mine, 1200).await.unwrap(), "no longer its claim");
        assert!(index.finish_claim(&other, 1200).await.unwrap());
        let done = index.build_claim("logs/ci-a/1").await.unwrap().unwrap();
        assert_eq!((done.digest.as_str(), done.finished, done.done_at), ("other", false, Some(1200)));
        // A done claim is taken over as seen; a released one is gone.
        let last = Claim { path: "logs/ci-a/1", digest: "last", finished: true };
        assert!(index.take_over_claim(&last, &done, 1300).await.unwrap(), "{}", index.name());
        index.release_claim(&last).await.unwrap();
        assert_eq!(index.build_claim("logs/ci-a/1").await.unwrap(), None);
    }
}

#[tokio::test]
async fn a_new_job_goes_to_the_first_provider_that_claims_it_on_both_databases() {
    let (_dir, indexes) = both().await;
    for index in &indexes {
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let index = index.clone();
                let provider = if i % 2 == 0 { "alpha" } else { "beta" };
                tokio::spawn(async move { index.claim_job("shared", provider).await })
            })
            .collect();
        let mut owners = Vec::new();
        for task in tasks {
            owners.push(task.await.unwrap().unwrap());
        }
        owners.dedup();
        assert_eq!(owners.len(), 1, "{}: {owners:?}", index.name());
        assert_eq!(index.job_provider("shared").await.unwrap().as_ref(), Some(&owners[0]));
        // A build naming another provider, indexed later (harness index), does not move the job.
        let mut rec = record("shared", "1", 100, vec![]);
        rec.info.provider = Some("gamma".into());
        index.index_build(&rec).await.unwrap();
        assert_eq!(index.job_provider("shared").await.unwrap().as_ref(), Some(&owners[0]), "{}", index.name());
    }
}

#[tokio::test]
async fn a_sqlite_index_of_the_older_schema_keeps_its_builds_and_results_through_the_identity_migration() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("migrations");
    std::fs::create_dir(&old).unwrap();
    let all = Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations/sqlite");
    for entry in std::fs::read_dir(&all).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.as_str() < "0006" {
            std::fs::copy(&path, old.join(&name)).unwrap();
        }
    }
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("index.sqlite").display());
    sqlx::any::install_default_drivers();
    let pool = AnyPool::connect(&url).await.unwrap();
    Migrator::new(old.as_path()).await.unwrap().run(&pool).await.unwrap();
    let statements = [
        "INSERT INTO jobs (name) VALUES ('ci-a')",
        "INSERT INTO builds (job_id, build, path, state, started_at, artifacts_url, digest) \
         VALUES (1, '1', 'logs/ci-a/1', 'finished', 100, 'file:///s/logs/ci-a/1', 'd')",
        "INSERT INTO tests (suite, name) VALUES ('s', 't')",
        "INSERT INTO test_results (build_id, test_id, status) VALUES (1, 1, 'pass')",
        "INSERT INTO build_problems (build_id, file, message) VALUES (1, 'f', 'm')",
    ];
    for statement in statements {
        pool.execute(statement).await.unwrap();
    }
    pool.close().await;
    let index = Index::open(&url).await.unwrap();
    assert_eq!(index.counts().await.unwrap(), (1, 1), "the rebuild of builds lost rows");
    assert_eq!(index.build_problems("ci-a", "1").await.unwrap().len(), 1);
    let mut pr = presubmit(&record("ci-a", "1", 200, vec![]), "pr");
    pr.info.provider = None;
    assert_eq!(index.index_build(&pr).await.unwrap(), Indexed::Inserted);
    // Foreign keys are on again: a result of no build is refused.
    let orphan =
        index.pool.execute("INSERT INTO test_results (build_id, test_id, status) VALUES (99, 1, 'pass')").await;
    assert!(orphan.is_err(), "foreign keys are off after the migration");
}

#[tokio::test]
async fn failures_since_a_time_and_each_jobs_latest_builds_with_their_pass_rates_on_both_databases() {
    let (_dir, indexes) = both().await;
    for index in &indexes {
        let results = |statuses: &[(&str, TestStatus)]| statuses.iter().map(|(n, s)| result(n, *s)).collect();
        index
            .index_build(&record("ci-a", "1", 100, results(&[("t", TestStatus::Fail), ("u", TestStatus::Pass)])))
            .await
            .unwrap();
        index
            .index_build(&record("ci-a", "2", 200, results(&[("t", TestStatus::Fail), ("u", TestStatus::Skip)])))
            .await
            .unwrap();
        index
            .index_build(&record("ci-a", "3", 300, results(&[("t", TestStatus::Flaky), ("u", TestStatus::Pass)])))
            .await
            .unwrap();
        index.index_build(&record("ci-b", "9", 250, results(&[("t", TestStatus::Fail)]))).await.unwrap();
        let step =
            record("ci-a", "4", 400, vec![TestResult { suite: "harness".into(), ..result("Test", TestStatus::Fail) }]);
        index.index_build(&step).await.unwrap();
        let mut failures = index.failures_since(200, ("harness", "Test")).await.unwrap();
        failures.sort_by(|a, b| (&a.job, &a.build).cmp(&(&b.job, &b.build)));
        let seen: Vec<(&str, &str, &str, Option<&str>)> = failures
            .iter()
            .map(|f| (f.job.as_str(), f.build.as_str(), f.test.as_str(), f.message.as_deref()))
            .collect();
        let message = Some("t failed: expected 3 nodes, saw 2");
        assert_eq!(seen, [("ci-a", "2", "t", message), ("ci-b", "9", "t", message)], "{}", index.name());
        assert_eq!(
            (failures[0].provider.as_deref(), failures[0].kubernetes_version.as_deref()),
            (Some("local"), Some("v1.37.1"))
        );
        // Normalised once, when indexed; a key of another version of the normaliser is not read.
        let normalised = failures::normalise("t failed: expected 3 nodes, saw 2");
        assert_eq!(failures[0].normalised.as_deref(), Some(normalised.as_str()), "{}", index.name());
        index.pool.execute("UPDATE test_results SET failure_key = 'stale', failure_key_version = 0").await.unwrap();
        let failures = index.failures_since(200, ("harness", "Test")).await.unwrap();
        assert!(failures.iter().all(|f| f.normalised.is_none()), "{}: {failures:?}", index.name());
        let trends = index.job_trends(2).await.unwrap();
        let rows: Vec<(&str, &str, Option<i64>, i64, i64)> = trends
            .iter()
            .map(|t| (t.job.as_str(), t.build.as_str(), t.finished_at, t.passed_tests, t.ran_tests))
            .collect();
        assert_eq!(
            rows,
            [("ci-a", "3", Some(360), 2, 2), ("ci-a", "4", Some(460), 0, 1), ("ci-b", "9", Some(310), 0, 1)],
            "each job's latest two, oldest first: {}",
            index.name()
        );
        assert_eq!(trends[0].passed, Some(true));
    }
}

#[tokio::test]
async fn a_suites_builds_and_results_with_skip_reasons_on_both_databases() {
    let (_dir, indexes) = both().await;
    let in_suite = |suite: &str, name: &str, status, message: Option<&str>| TestResult {
        suite: suite.into(),
        message: message.map(str::to_owned),
        ..result(name, status)
    };
    let skip_reason = "the provider does not declare the capability `load-balancer-source-ip`";
    for index in &indexes {
        let lb = |status, message| in_suite("upstream-load-balancers", "source IP", status, message);
        let other = in_suite("cloud-e2e", "nodes", TestStatus::Fail, Some("no providerID"));
        let tcp = in_suite("upstream-load-balancers", "tcp", TestStatus::Pass, None);
        let first = vec![lb(TestStatus::Skip, Some(skip_reason)), other.clone(), tcp];
        index.index_build(&record("ci-a", "1", 100, first)).await.unwrap();
        index.index_build(&record("ci-b", "2", 200, vec![other.clone()])).await.unwrap();
        let mut running = record("ci-a", "3", 300, vec![lb(TestStatus::Pass, None)]);
        running.info.state = State::Running;
        index.index_build(&running).await.unwrap();
        let builds = index.suite_builds("upstream-load-balancers").await.unwrap();
        let named: Vec<(&str, &str, &str)> =
            builds.iter().map(|(_, b)| (b.provider.as_str(), b.job.as_str(), b.build.as_str())).collect();
        assert_eq!(named, [("local", "ci-a", "1")], "finished builds with the suite's results only: {}", index.name());
        let ids: Vec<i64> = builds.iter().map(|(id, _)| *id).collect();
        // From the packed results, then (a build packed before its content changed) its results.
        let packed = index.suite_results("upstream-load-balancers", &ids).await.unwrap();
        index.pool.execute("UPDATE build_cells SET digest = 'older'").await.unwrap();
        let unpacked = index.suite_results("upstream-load-balancers", &ids).await.unwrap();
        for results in [packed, unpacked] {
            let read: Vec<(i64, TestStatus, Option<&str>)> =
                results.iter().map(|r| (r.build_id, r.status, r.message.as_deref())).collect();
            let expected = [(ids[0], TestStatus::Skip, Some(skip_reason)), (ids[0], TestStatus::Pass, None)];
            assert_eq!(read, expected, "{}", index.name());
            let names = index.test_names(&[results[0].test_id]).await.unwrap();
            assert_eq!(names[0].2, "source IP", "{}", index.name());
        }
        assert_eq!(index.suites().await.unwrap(), ["cloud-e2e", "upstream-load-balancers"], "{}", index.name());
        // Replaced without the suite: no longer one of its builds.
        let mut replaced = record("ci-a", "1", 100, vec![other.clone()]);
        replaced.info.digest = "replaced".into();
        assert_eq!(index.index_build(&replaced).await.unwrap(), Indexed::Replaced);
        assert_eq!(index.suite_builds("upstream-load-balancers").await.unwrap(), [], "{}", index.name());
    }
}

/// Every Postgres session of the index runs without JIT: compiling a short query's plan took longer
/// than running it (docs/benchmarks.md, "The central service at SIG scale").
#[tokio::test]
async fn postgres_sessions_of_the_index_run_without_jit() {
    let index = Index::open(&fresh_postgres_database().await).await.unwrap();
    for _ in 0..3 {
        let row = sqlx::query("SHOW jit").fetch_one(&index.pool).await.unwrap();
        assert_eq!(row.try_get::<String, _>(0).unwrap(), "off");
    }
}

/// A Postgres session the server ends (a restart, a failover: SQLSTATE 57P01) is worth retrying; a
/// statement the server refuses is not.
#[tokio::test]
async fn postgres_ending_a_session_is_transient_and_refusing_a_statement_is_not() {
    use sqlx::Connection;
    let url = fresh_postgres_database().await;
    let query = |source| IndexError::Query { database: redact(&url), action: "indexing a build", source };
    let mut session = sqlx::AnyConnection::connect(&url).await.unwrap();
    let refused = query(session.execute("SELECT * FROM nowhere").await.unwrap_err());
    assert!(!refused.is_transient(), "{refused}");
    let ended = query(session.execute("SELECT pg_terminate_backend(pg_backend_pid())").await.unwrap_err());
    assert!(ended.is_transient(), "{ended}");
    let auth = Index::open(&url.replacen("postgres://harness@", "postgres://nobody@", 1)).await.unwrap_err();
    assert!(!auth.is_transient(), "a role the server does not know stays unknown: {auth}");
}

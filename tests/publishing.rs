//! The results layer end to end, on real parts: real upstream JUnit files published to a local
//! store and to a GCS emulator (fake-gcs-server), indexed into SQLite and Postgres, re-indexed from
//! the stores, and read by TestGrid's own updater.

use crate::common;

use std::time::Duration;

use common::builds::*;
use common::fake_gcs::FakeGcs;
use results::index::Indexed;
use results::layout::BuildLocation;
use results::publish::{self, PublishError};
use results::record::{ReadBuildOptions, State, TestStatus, Unfinished};
use results::store::{ResultStore, StoreOptions};

fn gcs_store(gcs: &FakeGcs, bucket: &str) -> ResultStore {
    gcs.create_bucket(bucket);
    let options = StoreOptions { gcs_emulator_host: Some(gcs.emulator_host().to_owned()), ..StoreOptions::default() };
    ResultStore::open_with(&format!("gs://{bucket}"), &options).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn publish_then_reindex_gives_identical_rows_on_every_store_and_database() {
    let tmp = tempfile::tempdir().unwrap();
    let gcs = FakeGcs::start();
    let stores = [ResultStore::open_dir(&tmp.path().join("store")).unwrap(), gcs_store(&gcs, "results")];
    let t = now() - 3600;
    let passing = build_dir(tmp.path(), "b1", t, Some(&finished_json(t, true, "v1.37.1", "abc123")), REAL_FILES);
    let failing_files = &REAL_FILES[2..4];
    let failing =
        build_dir(tmp.path(), "b2", t + 60, Some(&finished_json(t + 60, false, "v1.37.1", "def456")), failing_files);

    // Published into SQLite from the local store, into Postgres from GCS.
    let published_into = [sqlite(tmp.path(), "published.sqlite").await, postgres().await];
    for (store, index) in stores.iter().zip(&published_into) {
        for (dir, build) in [(&passing, "1001"), (&failing, "1002")] {
            let location = BuildLocation::periodic(JOB, build).unwrap();
            let published = publish::publish(store, index, dir, &location, &ended()).await.unwrap();
            assert_eq!(published.indexed, Indexed::Inserted, "{}", published.url);
            assert!(published.problems().is_empty(), "{:?}", published.problems());
        }
        let expected_results = (cases_in(REAL_FILES) + cases_in(failing_files)) as i64;
        assert_eq!(index.counts().await.unwrap(), (2, expected_results), "{}", index.name());
        assert_eq!(store.get(&format!("logs/{JOB}/latest-build.txt")).await.unwrap().unwrap(), "1002");
    }

    // Each store re-indexed into fresh SQLite and Postgres databases gives the same rows.
    for (store, published) in stores.iter().zip(&published_into) {
        let expected = published.snapshot().await.unwrap();
        for fresh in [sqlite(tmp.path(), "fresh.sqlite").await, postgres().await] {
            let report = publish::reindex(store, &fresh, &ended()).await.unwrap();
            assert_eq!((report.inserted, report.failed.len()), (2, 0), "{}", store.url());
            assert_eq!(fresh.snapshot().await.unwrap(), expected, "{} into {}", store.url(), fresh.name());
            std::fs::remove_file(tmp.path().join("fresh.sqlite")).ok();
        }
    }
    let [local_rows, gcs_rows] = [&published_into[0], &published_into[1]];
    let (local_rows, gcs_rows) = (local_rows.snapshot().await.unwrap(), gcs_rows.snapshot().await.unwrap());
    assert_eq!(without_store_urls(local_rows.clone()), without_store_urls(gcs_rows.clone()));
    assert!(gcs_rows.builds[0].artifacts_url.starts_with("gs://results/logs/"));

    // The rows say what the files say.
    let build = &local_rows.builds[1];
    assert_eq!((build.build.as_str(), build.passed, build.state), ("1002", Some(false), State::Finished));
    assert_eq!(build.versions.provider_version.as_deref(), Some("def456"));
    assert_eq!(build.provider.as_deref(), Some("local"));
    let status_of = |name: &str| {
        local_rows.results.iter().find(|(_, b, r)| b == "1001" && r.name.contains(name)).map(|(_, _, r)| r.status)
    };
    // ginkgo v2: one spec failed, one passed on its second attempt.
    assert_eq!(status_of("Nodes should have a provider ID"), Some(TestStatus::Fail));
    assert_eq!(status_of("Nodes should eventually get an address"), Some(TestStatus::Flaky));
    assert_eq!(status_of("Nodes should be ready [Conformance]"), Some(TestStatus::Pass));

    // Publishing the same build again writes nothing and changes no row.
    let location = BuildLocation::periodic(JOB, "1001").unwrap();
    for (store, index) in stores.iter().zip(&published_into) {
        let again = publish::publish(store, index, &passing, &location, &ended()).await.unwrap();
        assert_eq!((again.written, again.indexed), (0, Indexed::Unchanged), "{}", store.url());
    }
    assert_eq!(published_into[0].snapshot().await.unwrap(), local_rows);
}

#[tokio::test(flavor = "multi_thread")]
async fn twenty_concurrent_publishes_of_one_build_index_it_once() {
    let tmp = tempfile::tempdir().unwrap();
    let gcs = FakeGcs::start();
    let t = now();
    let dir = build_dir(tmp.path(), "b", t, Some(&finished_json(t, true, "v1.37.1", "abc")), &REAL_FILES[..2]);
    let targets = [
        (ResultStore::open_dir(&tmp.path().join("store")).unwrap(), sqlite(tmp.path(), "index.sqlite").await),
        (gcs_store(&gcs, "results"), postgres().await),
    ];
    let location = BuildLocation::periodic(JOB, "77").unwrap();
    for (store, index) in &targets {
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let (store, index, dir, location) = (store.clone(), index.clone(), dir.clone(), location.clone());
                tokio::spawn(async move { publish::publish(&store, &index, &dir, &location, &ended()).await })
            })
            .collect();
        let mut inserted = 0;
        for task in tasks {
            let published = task.await.unwrap().unwrap_or_else(|e| panic!("{}: {e}", store.url()));
            inserted += usize::from(published.indexed == Indexed::Inserted);
        }
        assert_eq!(inserted, 1, "{}", store.url());
        assert_eq!(index.counts().await.unwrap(), (1, cases_in(&REAL_FILES[..2]) as i64), "{}", index.name());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_build_is_indexed_as_running_then_replaced_when_it_finishes() {
    let tmp = tempfile::tempdir().unwrap();
    let store = ResultStore::open_dir(&tmp.path().join("store")).unwrap();
    let index = sqlite(tmp.path(), "index.sqlite").await;
    let t = now();
    let dir = build_dir(tmp.path(), "b", t, None, &REAL_FILES[2..3]);
    let location = BuildLocation::periodic(JOB, "5").unwrap();
    let may_run = ReadBuildOptions {
        unfinished: Unfinished::RunningUnlessOlderThan(Duration::from_secs(3600)),
        ..ReadBuildOptions::default()
    };
    let first = publish::publish(&store, &index, &dir, &location, &may_run).await.unwrap();
    assert_eq!((first.record.info.state, first.record.info.passed), (State::Running, None));
    // Re-indexed by someone who knows the run is over: aborted.
    publish::reindex(&store, &index, &ended()).await.unwrap();
    assert_eq!(index.build(JOB, "5").await.unwrap().unwrap().state, State::Aborted);

    std::fs::write(dir.join("finished.json"), finished_json(t, true, "v1.37.1", "abc")).unwrap();
    let done = publish::publish(&store, &index, &dir, &location, &may_run).await.unwrap();
    assert_eq!((done.indexed, done.written), (Indexed::Replaced, 1));
    let row = index.build(JOB, "5").await.unwrap().unwrap();
    assert_eq!((row.state, row.passed, row.finished_at), (State::Finished, Some(true), Some(t + 600)));
    assert_eq!(index.counts().await.unwrap(), (1, cases_in(&REAL_FILES[2..3]) as i64));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_presubmit_goes_under_pr_logs_with_prows_alias_and_latest_build_files() {
    let tmp = tempfile::tempdir().unwrap();
    let gcs = FakeGcs::start();
    let store = gcs_store(&gcs, "results");
    let index = sqlite(tmp.path(), "index.sqlite").await;
    let t = now();
    let dir = build_dir(tmp.path(), "b", t, Some(&finished_json(t, true, "v1.37.1", "abc")), &REAL_FILES[3..4]);
    let job = "pull-cloud-provider-local-e2e";
    let location = BuildLocation::presubmit("kubernetes_cloud-provider-aws", 1234, job, "8001").unwrap();
    publish::publish(&store, &index, &dir, &location, &ended()).await.unwrap();

    let build_dir = format!("pr-logs/pull/kubernetes_cloud-provider-aws/1234/{job}/8001");
    let text = |path: String| String::from_utf8(store_get(&gcs, &path)).unwrap();
    assert_eq!(text(format!("pr-logs/directory/{job}/8001.txt")), format!("gs://results/{build_dir}"));
    assert_eq!(text(format!("pr-logs/directory/{job}/latest-build.txt")), "8001");
    assert_eq!(text(format!("pr-logs/pull/kubernetes_cloud-provider-aws/1234/{job}/latest-build.txt")), "8001");
    assert!(gcs.download("results", &format!("{build_dir}/artifacts/junit_runner.xml")).is_some());

    let fresh = sqlite(tmp.path(), "fresh.sqlite").await;
    let report = publish::reindex(&store, &fresh, &ended()).await.unwrap();
    assert_eq!((report.inserted, report.failed.len()), (1, 0), "{:?}", report.failed);
    let row = fresh.build(job, "8001").await.unwrap().unwrap();
    assert_eq!((row.path.as_str(), row.pull.as_deref()), (build_dir.as_str(), Some("1234")));
    assert_eq!(fresh.snapshot().await.unwrap(), index.snapshot().await.unwrap());
}

fn store_get(gcs: &FakeGcs, path: &str) -> Vec<u8> {
    gcs.download("results", path).unwrap_or_else(|| panic!("gs://results/{path} is missing"))
}

const ENTITY_BOMB: &str = r#"<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<testsuites><testsuite name="bomb"><testcase name="&lol3;"/></testsuite></testsuites>
"#;

#[tokio::test(flavor = "multi_thread")]
async fn broken_files_are_named_and_the_rest_of_the_build_is_indexed() {
    let tmp = tempfile::tempdir().unwrap();
    let good = &REAL_FILES[2..4];
    let dir = build_dir(tmp.path(), "b", now(), Some(r#"{"timestamp": "yesterday", "passed": "yes"}"#), good);
    let real = std::fs::read(real_file(REAL_FILES[1].0)).unwrap();
    std::fs::write(dir.join("artifacts/junit_truncated.xml"), &real[..real.len() / 2]).unwrap();
    std::fs::write(dir.join("artifacts/junit_bomb.xml"), ENTITY_BOMB).unwrap();
    std::fs::write(dir.join("artifacts/junit_malformed.xml"), "<testsuites><testsuite name=\"x\"></testsuites>")
        .unwrap();
    // 2 GiB, sparse: the reader must refuse it by its size, never read it.
    std::fs::File::create(dir.join("artifacts/junit_huge.xml")).unwrap().set_len(2 << 30).unwrap();

    let store = ResultStore::open_dir(&tmp.path().join("store")).unwrap();
    let index = sqlite(tmp.path(), "index.sqlite").await;
    let location = BuildLocation::periodic(JOB, "9").unwrap();
    let published = publish::publish(&store, &index, &dir, &location, &ended()).await.unwrap();

    let problems: Vec<(&str, &str)> =
        published.problems().iter().map(|p| (p.file.as_str(), p.message.as_str())).collect();
    let message_of = |file: &str| problems.iter().find(|(f, _)| *f == file).map(|(_, m)| *m).unwrap_or("");
    assert_eq!(problems.len(), 5, "{problems:#?}");
    assert!(message_of("finished.json").contains("outcome is unknown"), "{problems:#?}");
    assert!(message_of("artifacts/junit_truncated.xml").contains("truncated"), "{problems:#?}");
    assert!(message_of("artifacts/junit_bomb.xml").contains("entity bomb"), "{problems:#?}");
    assert!(message_of("artifacts/junit_malformed.xml").contains("malformed XML"), "{problems:#?}");
    assert!(message_of("artifacts/junit_huge.xml").contains("2147483648 bytes"), "{problems:#?}");
    assert!(message_of("artifacts/junit_truncated.xml").contains("junit_truncated.xml at line"), "{problems:#?}");

    // The sound files are indexed, the outcome is unknown, and the problems are kept.
    let expected = cases_in(good) as i64;
    let build = index.build(JOB, "9").await.unwrap().unwrap();
    assert_eq!((build.state, build.passed), (State::Finished, None));
    assert_eq!(index.counts().await.unwrap(), (1, expected));
    assert_eq!(index.build_problems(JOB, "9").await.unwrap(), published.problems());
    // Everything was uploaded all the same: nothing is lost.
    assert_eq!(store.size(&format!("logs/{JOB}/9/artifacts/junit_huge.xml")).await.unwrap(), Some(2 << 30));

    // Postgres, re-indexed from the store, keeps the same rows and problems.
    let pg = postgres().await;
    let report = publish::reindex(&store, &pg, &ended()).await.unwrap();
    assert_eq!(report.problems.len(), 5);
    assert_eq!(pg.snapshot().await.unwrap(), index.snapshot().await.unwrap());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_build_without_started_json_is_refused_and_skipped_by_the_reindex() {
    let tmp = tempfile::tempdir().unwrap();
    let store = ResultStore::open_dir(&tmp.path().join("store")).unwrap();
    let index = sqlite(tmp.path(), "index.sqlite").await;
    let dir = build_dir(tmp.path(), "b", now(), Some(&finished_json(now(), true, "v1", "p")), &REAL_FILES[3..4]);
    std::fs::remove_file(dir.join("started.json")).unwrap();

    let location = BuildLocation::periodic(JOB, "3").unwrap();
    let err = publish::publish(&store, &index, &dir, &location, &ended()).await.unwrap_err();
    assert!(matches!(err, PublishError::MissingStarted { .. }), "{err}");
    assert!(err.to_string().contains(&format!("{}: not a build directory", dir.display())), "{err}");
    assert!(store.list("").await.unwrap().is_empty(), "nothing uploaded");
    assert_eq!(index.counts().await.unwrap(), (0, 0));

    // In the store (as a killed upload could leave it) beside a sound build: the reindex names it
    // and indexes the other.
    store.put_if_changed(&format!("logs/{JOB}/3/finished.json"), "{}".into()).await.unwrap();
    let sound = build_dir(tmp.path(), "ok", now(), Some(&finished_json(now(), true, "v1", "p")), &REAL_FILES[3..4]);
    publish::publish(&store, &index, &sound, &BuildLocation::periodic(JOB, "4").unwrap(), &ended()).await.unwrap();
    let fresh = sqlite(tmp.path(), "fresh.sqlite").await;
    let report = publish::reindex(&store, &fresh, &ended()).await.unwrap();
    assert_eq!(report.inserted, 1);
    assert_eq!(report.failed.len(), 1, "{:?}", report.failed);
    assert!(
        report.failed[0].contains(&format!("logs/{JOB}/3: not a build: started.json is missing")),
        "{:?}",
        report.failed
    );
}

mod testgrid_reads_what_we_publish {
    use super::*;
    use common::testgrid::ReadGrid;

    /// TestGrid's cell for a test of ours: flaky cases pass there (it ignores retry elements, and
    /// ginkgo v2 marks a spec that passed on retry `passed`); a skip is no result or a pass with skips;
    /// a known failure failed, and TestGrid shows that.
    fn expected_cells(status: TestStatus) -> &'static [&'static str] {
        match status {
            TestStatus::Pass | TestStatus::Flaky => &["PASS"],
            TestStatus::Fail | TestStatus::KnownFailure => &["FAIL"],
            TestStatus::Skip => &["NO_RESULT", "PASS_WITH_SKIPS"],
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn testgrid_shows_the_builds_versions_and_results_the_index_holds() {
        let tmp = tempfile::tempdir().unwrap();
        let gcs = FakeGcs::start();
        let store = gcs_store(&gcs, "kubernetes-ci-logs");
        let index = postgres().await;
        let files = [REAL_FILES[2], REAL_FILES[3], REAL_FILES[5]];
        let t = now() - 7200;
        // Build 1001 passed with a failing test its provider lists: its metadata says so, a list
        // among TestGrid's string values.
        let failing_test = "[It] [sig-cloud-provider] Nodes should have a provider ID [Conformance]";
        let mut passed_with_known: serde_json::Value =
            serde_json::from_str(&finished_json(t, true, "v1.37.1", "abc123")).unwrap();
        passed_with_known["metadata"]["known-failures"] = serde_json::json!([{
            "suite": "conformance", "test": failing_test, "result": "failed",
            "reason": "no provider ID on kwok nodes", "link": "https://github.com/o/p/issues/1",
        }]);
        let builds = [
            ("1001", build_dir(tmp.path(), "a", t, Some(&passed_with_known.to_string()), &files)),
            (
                "1002",
                build_dir(tmp.path(), "b", t + 60, Some(&finished_json(t + 60, false, "v1.36.4", "def456")), &files),
            ),
            // Still running: no finished.json.
            ("1003", build_dir(tmp.path(), "c", now(), None, &files)),
        ];
        let may_run = ReadBuildOptions::default();
        for (build, dir) in &builds {
            let location = BuildLocation::periodic(JOB, build).unwrap();
            publish::publish(&store, &index, dir, &location, &may_run).await.unwrap();
        }

        // Read once with the TestGrid config `harness testgrid-config` generates from the bundled
        // providers.yaml (TestGrid's own validator checks it), and once asking for TestGrid's
        // column version as a `Commit` header row.
        let config = tmp.path().join("testgrid.yaml");
        let input = config::jobs::testgrid_input(&config::ProvidersConfig::bundled());
        std::fs::write(&config, config::testgrid::generate_yaml(&input).unwrap()).unwrap();
        let host = gcs.emulator_host().to_owned();
        let (grid, commits) = tokio::task::spawn_blocking(move || {
            let mut from_config = ReadGrid::new("");
            (from_config.config_yaml, from_config.name) = (Some(config), Some(JOB.to_owned()));
            let mut commits = ReadGrid::new(&format!("kubernetes-ci-logs/logs/{JOB}")).column_headers(&["Commit"]);
            commits.fresh = true;
            (from_config.run(&host), commits.run(&host))
        })
        .await
        .unwrap();

        // Columns: TestGrid's build order, our version keys as its header rows, and its version
        // rule as ours computes it.
        let columns: Vec<(&str, &[String])> = grid.columns.iter().map(|c| (c.build.as_str(), &c.extra[..])).collect();
        let none = ["".to_owned(), "".to_owned()];
        assert_eq!(columns[0], ("1003", &none[..]), "a running build has no versions yet");
        assert_eq!(columns[1], ("1002", &["v1.36.4".to_owned(), "def456".to_owned()][..]));
        assert_eq!(columns[2], ("1001", &["v1.37.1".to_owned(), "abc123".to_owned()][..]));
        for (build, dir) in &builds[..2] {
            let started = serde_json::from_slice(&std::fs::read(dir.join("started.json")).unwrap()).unwrap();
            let finished = serde_json::from_slice(&std::fs::read(dir.join("finished.json")).unwrap()).unwrap();
            let ours = results::layout::column_version(&started, &finished);
            assert_eq!(commits.column(build).extra, [ours], "build {build}");
        }
        let overall = format!("{JOB}.Overall");
        assert_eq!(grid.result(&overall, "1001"), "PASS");
        assert_eq!(grid.result(&overall, "1002"), "FAIL");
        assert_eq!(grid.result(&overall, "1003"), "RUNNING");
        assert_eq!(index.build(JOB, "1003").await.unwrap().unwrap().state, State::Running);

        // Every test the index holds for a finished build is the row TestGrid shows, same outcome.
        let mut compared = 0;
        for build in ["1001", "1002"] {
            for result in index.build_results(JOB, build).await.unwrap() {
                let row = format!("{}.{}", result.suite, result.name);
                let cell = grid.rows.iter().find(|r| r.name == row).map(|_| grid.result(&row, build));
                let cell = cell.unwrap_or("NO_RESULT");
                assert!(
                    expected_cells(result.status).contains(&cell),
                    "{row} in {build}: index says {:?}, TestGrid shows {cell}",
                    result.status
                );
                compared += usize::from(result.status != TestStatus::Skip);
            }
        }
        assert!(compared >= 10, "only {compared} results compared");
        let failing = format!("Sample e2e suite.{failing_test}");
        assert_eq!(grid.result(&failing, "1001"), "FAIL");
        assert!(!grid.message(&failing, "1001").is_empty());
        // The index keeps that failure as a known one in 1001, and as a failure where unlisted.
        let status = |results: Vec<results::record::TestResult>| {
            results.into_iter().find(|r| r.name == failing_test).map(|r| r.status)
        };
        assert_eq!(status(index.build_results(JOB, "1001").await.unwrap()), Some(TestStatus::KnownFailure));
        assert_eq!(status(index.build_results(JOB, "1002").await.unwrap()), Some(TestStatus::Fail));
    }
}

/// A provider's existing Prow jobs as an LKG source, read from a GCS bucket (the emulator): builds
/// written the way pod-utils and kubetest2 write them, with none of the harness's metadata keys —
/// `started.json` `repos` (`{"org/repo": "branch:sha"}`) and `finished.json`
/// `metadata["job-version"]` (TestGrid's `metadata/job.go` reads both) — indexed for the
/// provider's jobs only, then counted by the LKG; a build that names no versions is listed.
#[tokio::test(flavor = "multi_thread")]
async fn existing_prow_builds_in_a_bucket_give_lkg_answers_with_no_harness_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let gcs = FakeGcs::start();
    let store = gcs_store(&gcs, "kubernetes-ci-logs");
    let job = "ci-cloud-provider-gcp-e2e-latest";
    let prow_build = |build: u32, kubernetes: Option<&str>, provider: Option<&str>, passed: bool| {
        let dir = format!("logs/{job}/{build}");
        let at = now() - 7200 + i64::from(build);
        let repos: serde_json::Value = match provider {
            Some(sha) => serde_json::json!({"kubernetes/cloud-provider-gcp": format!("master:{sha}")}),
            None => serde_json::json!({}),
        };
        let started = serde_json::json!({"timestamp": at, "node": "n", "repos": repos, "repo-version": "x"});
        let mut metadata = serde_json::json!({});
        if let Some(version) = kubernetes {
            metadata["job-version"] = version.into();
        }
        let finished = serde_json::json!({"timestamp": at + 30, "passed": passed,
            "result": if passed {"SUCCESS"} else {"FAILURE"}, "revision": "unused", "metadata": metadata});
        gcs.upload("kubernetes-ci-logs", &format!("{dir}/started.json"), started.to_string());
        gcs.upload("kubernetes-ci-logs", &format!("{dir}/finished.json"), finished.to_string());
        let failure = if passed { "" } else { "<failure message=\"x\">x</failure>" };
        let junit = format!("<testsuite name=\"e2e\"><testcase name=\"lb\">{failure}</testcase></testsuite>");
        gcs.upload("kubernetes-ci-logs", &format!("{dir}/artifacts/junit_01.xml"), junit);
    };
    prow_build(1, Some("v1.37.0-alpha.1.100+0123456789abcd"), Some("aaa111"), true);
    prow_build(2, Some("v1.37.0-alpha.1.250+fedcba98765432"), Some("aaa111"), false);
    prow_build(3, None, None, true);
    gcs.upload("kubernetes-ci-logs", "logs/ci-someone-else/1/started.json", r#"{"timestamp": 1}"#);

    let index = sqlite(tmp.path(), "prow.sqlite").await;
    let report = publish::reindex_jobs(&store, &index, &ended(), &[job.to_owned()]).await.unwrap();
    assert_eq!((report.inserted, report.failed.len()), (3, 0), "{report:?}");

    let bundled = config::BUNDLED;
    let local = config::bundled_entry("local").unwrap();
    let gcp = local
        .replacen("- name: local", "- name: gcp", 1)
        .replacen("    branch: main\n", &format!("    branch: master\n    prow:\n      jobs: [{job}]\n"), 1)
        .replacen(
            "https://github.com/cloud-provider-harness/cloud-provider-harness",
            "https://github.com/kubernetes/cloud-provider-gcp",
            1,
        );
    assert!(gcp.contains("kubernetes/cloud-provider-gcp") && gcp.contains(job), "the edits applied");
    let config = config::ProvidersConfig::parse(
        &format!("{}\n{}\n", bundled.trim_end(), gcp.trim_end()),
        std::path::Path::new("providers.yaml"),
    )
    .unwrap();
    let options = results::known_good::LkgOptions {
        kubernetes_history: results::known_good::HistorySpec::Tested,
        provider_histories: Default::default(),
        depth: 100,
        github_api: String::new(),
    };
    let snapshot = results::known_good::load(&config, &options, &index).await.unwrap();
    let view = lkg::api::provider(&snapshot, None, "gcp").unwrap();
    // CI versions ordered by semver precedence (alpha.1.100 before alpha.1.250), not as text.
    let lkg = view.report.lkg.as_ref().expect("an LKG");
    assert_eq!(
        (lkg.kubernetes_commit.as_str(), lkg.provider_commit.as_str()),
        ("v1.37.0-alpha.1.100+0123456789abcd", "aaa111")
    );
    let culprit = view.report.culprit.as_ref().and_then(|c| c.kubernetes.as_ref()).expect("a culprit range");
    assert_eq!(culprit.commits, ["v1.37.0-alpha.1.250+fedcba98765432"]);
    let unplaced: Vec<&str> = view.report.unplaced.iter().map(|run| run.build_id.as_str()).collect();
    assert_eq!(unplaced, [format!("{job}/3")]);
    assert!(view.report.unplaced[0].problems[0].contains("no Kubernetes version"), "{:?}", view.report.unplaced);
}

use std::fs;

use super::*;
use junit::{Attempt, Outcome, Suite, TestCase};

fn versions() -> Versions {
    Versions {
        kubernetes_version: Some("v1.34.1".into()),
        provider: Some("aws".into()),
        provider_version: Some("v1.34.0".into()),
        ccm_version: Some("v1.34.0-3-gabcdef0".into()),
        job_version: Some("v1.34.1+abcdef0123456789".into()),
        repo_commit: Some("0123456789abcdef".into()),
        repos: BTreeMap::from([("kubernetes/cloud-provider-aws".into(), "master".into())]),
    }
}

fn report() -> Report {
    let case = |name: &str, outcome| TestCase {
        name: name.into(),
        attempts: vec![Attempt { outcome, time: Some(1.5), ..Attempt::default() }],
        ..TestCase::default()
    };
    let cases = vec![case("passes", Outcome::Passed), case("fails", Outcome::Failed)];
    Report { name: None, suites: vec![Suite { name: "e2e".into(), cases, ..Suite::default() }] }
}

fn finished() -> Finished {
    Finished {
        timestamp: Some(1_700_000_600),
        passed: Some(false),
        result: Some(JobResult::Failure),
        revision: None,
        metadata: versions().to_metadata(),
        job_version: None,
    }
}

fn started() -> Started {
    Started {
        timestamp: 1_700_000_000,
        node: Some("runner-1".into()),
        repo_commit: Some("0123456789abcdef".into()),
        ..Started::default()
    }
}

#[test]
fn a_periodic_build_is_written_and_read_back() {
    let root = tempfile::tempdir().unwrap();
    let layout = Layout::new(root.path());
    let location = BuildLocation::periodic("ci-aws-conformance", "1001").unwrap();
    let build = layout.start(&location, &started()).unwrap();
    build.write_build_log(b"step 1\nstep 2\n").unwrap();
    build.write_junit("junit_01.xml", &report()).unwrap();
    build.write_artifact(Path::new("logs/kubelet.log"), b"kubelet").unwrap();
    build.finish(&finished()).unwrap();

    let dir = root.path().join("logs/ci-aws-conformance/1001");
    assert_eq!(layout.build_dir(&location), dir);
    let read = layout.read_build(&location, Liveness::MayBeRunning).unwrap();
    assert_eq!(read.started, started());
    assert_eq!(read.state, BuildState::Finished(finished()));
    assert_eq!(read.junit, [PathBuf::from("artifacts/junit_01.xml")]);
    assert!(read.has_build_log);
    assert_eq!(layout.latest_build("ci-aws-conformance").unwrap().as_deref(), Some("1001"));
    let reports = read.junit_reports(&ReadOptions::default());
    assert_eq!(reports[0].1.as_ref().unwrap().counts().failed, 1);
    let leftovers: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".partial"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn json_field_names_are_testgrids() {
    let started = serde_json::to_value(started()).unwrap();
    let keys: Vec<_> = started.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["node", "repo-commit", "timestamp"]);
    let finished = serde_json::to_value(finished()).unwrap();
    let keys: Vec<_> = finished.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["metadata", "passed", "result", "timestamp"]);
    assert_eq!(finished["result"], "FAILURE");
    let metadata = &finished["metadata"];
    for key in ["kubernetes-version", "provider", "provider-version", "ccm-version", "job-version", "repo-commit"] {
        assert!(metadata[key].is_string(), "{key} missing from {metadata}");
    }
    assert_eq!(metadata["repos"]["kubernetes/cloud-provider-aws"], "master");
}

#[test]
fn an_unknown_passed_is_written_as_null() {
    let json = serde_json::to_value(Finished::default()).unwrap();
    assert_eq!(json, serde_json::json!({ "passed": null }));
}

#[test]
fn prow_written_files_with_nested_and_odd_metadata_parse() {
    let finished: Finished = serde_json::from_str(
        r#"{"timestamp": 1546214400, "passed": true, "result": "SUCCESS", "revision": "v1.14.0-alpha.0.1+abc",
            "job-version": "ignored", "metadata": {"infra-commit": "d1d44b1",
            "repos": {"kubernetes/kubernetes": "master:0123"}, "links": {"resultstore": {"url": "https://x"}},
            "pull-list": ["a", "b"], "count": 3}}"#,
    )
    .unwrap();
    assert_eq!(finished.result, Some(JobResult::Success));
    let m = &finished.metadata;
    assert_eq!(m.string("infra-commit"), Some("d1d44b1"));
    assert_eq!(m.map("repos").and_then(|r| r.string("kubernetes/kubernetes")), Some("master:0123"));
    assert_eq!(m.map("links").and_then(|l| l.map("resultstore")).and_then(|r| r.string("url")), Some("https://x"));
    assert_eq!(m.string("repos"), None, "a map is not a string");
    assert_eq!(m.0["pull-list"], MetaValue::Other(serde_json::json!(["a", "b"])));
    assert_eq!(m.0["count"], MetaValue::Other(serde_json::json!(3)));
    let again: Finished = serde_json::from_value(serde_json::to_value(&finished).unwrap()).unwrap();
    assert_eq!(again, finished);
}

#[test]
fn versions_survive_the_metadata_round_trip() {
    assert_eq!(Versions::from_metadata(&versions().to_metadata()), versions());
    assert_eq!(Versions::from_metadata(&Metadata::default()), Versions::default());
}

#[test]
fn an_unknown_result_is_kept_verbatim() {
    let finished: Finished = serde_json::from_str(r#"{"result": "UNSTABLE"}"#).unwrap();
    assert_eq!(finished.result, Some(JobResult::Other("UNSTABLE".into())));
    assert_eq!(serde_json::to_value(&finished).unwrap()["result"], "UNSTABLE");
}

#[test]
fn finished_json_with_wrong_types_is_an_error_naming_the_file() {
    let root = tempfile::tempdir().unwrap();
    let layout = Layout::new(root.path());
    let location = BuildLocation::periodic("job", "7").unwrap();
    layout.start(&location, &started()).unwrap();
    let file = layout.build_dir(&location).join(FINISHED_JSON);
    fs::write(&file, r#"{"timestamp": 1700000000, "passed": "yes"}"#).unwrap();
    let err = layout.read_build(&location, Liveness::MayBeRunning).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, LayoutError::BadJson { .. }), "{message}");
    assert!(message.starts_with(&file.display().to_string()), "{message}");
    assert!(message.contains("expected a boolean") && message.contains("line 1"), "{message}");
    fs::write(&file, r#"{"timestamp": "yesterday"}"#).unwrap();
    let err = layout.read_build(&location, Liveness::MayBeRunning).unwrap_err();
    assert!(err.to_string().contains("expected i64"), "{err}");
}

#[test]
fn a_build_dir_without_started_json_is_an_error_naming_it() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("logs/job/8");
    fs::create_dir_all(dir.join(ARTIFACTS)).unwrap();
    fs::write(dir.join(FINISHED_JSON), r#"{"passed": true}"#).unwrap();
    let err = read_build_dir(&dir, Liveness::Ended).unwrap_err();
    assert!(matches!(err, LayoutError::MissingStarted { .. }));
    assert_eq!(err.to_string(), format!("{}: not a build: started.json is missing", dir.display()));
}

#[test]
fn a_build_without_finished_json_is_running_or_aborted() {
    let root = tempfile::tempdir().unwrap();
    let layout = Layout::new(root.path());
    let location = BuildLocation::periodic("job", "9").unwrap();
    let build = layout.start(&location, &started()).unwrap();
    assert_eq!(layout.read_build(&location, Liveness::MayBeRunning).unwrap().state, BuildState::Running);
    assert_eq!(layout.read_build(&location, Liveness::Ended).unwrap().state, BuildState::Aborted);
    build.finish(&finished()).unwrap();
    assert!(matches!(layout.read_build(&location, Liveness::Ended).unwrap().state, BuildState::Finished(_)));
}

#[test]
fn a_build_cannot_be_started_twice() {
    let root = tempfile::tempdir().unwrap();
    let layout = Layout::new(root.path());
    let location = BuildLocation::periodic("job", "10").unwrap();
    layout.start(&location, &started()).unwrap();
    let err = layout.start(&location, &started()).unwrap_err();
    assert!(matches!(err, LayoutError::AlreadyStarted { .. }), "{err}");
}

#[test]
fn presubmits_go_under_pr_logs_with_prows_latest_build_files() {
    let root = tempfile::tempdir().unwrap();
    let layout = Layout::new(root.path());
    let location = BuildLocation::presubmit("kubernetes_cloud-provider-aws", 1234, "pull-aws-e2e", "555").unwrap();
    layout.start(&location, &Started { pull: Some("1234".into()), ..started() }).unwrap();
    let base = root.path().join("pr-logs/pull/kubernetes_cloud-provider-aws/1234/pull-aws-e2e");
    assert!(base.join("555").join(STARTED_JSON).is_file());
    assert_eq!(fs::read_to_string(base.join(LATEST_BUILD)).unwrap(), "555");
    let directory = root.path().join("pr-logs/directory/pull-aws-e2e").join(LATEST_BUILD);
    assert_eq!(fs::read_to_string(directory).unwrap(), "555");
    let json: serde_json::Value =
        serde_json::from_slice(&fs::read(base.join("555").join(STARTED_JSON)).unwrap()).unwrap();
    assert_eq!(json["pull"], "1234");
}

#[test]
fn path_segments_are_checked() {
    let long = "a".repeat(MAX_NAME_BYTES + 1);
    for bad in ["", "..", "../x", "a/b", ".hidden", "a b", "a\\b", &long] {
        assert!(
            matches!(BuildLocation::periodic(bad, "1"), Err(LayoutError::InvalidName { what: "job name", .. })),
            "{bad:?}"
        );
        assert!(
            matches!(BuildLocation::periodic("job", bad), Err(LayoutError::InvalidName { what: "build id", .. })),
            "{bad:?}"
        );
    }
    assert!(BuildLocation::presubmit("org_repo", 1, "ci-job.v2", "8675309").is_ok());
    assert!(BuildLocation::periodic(&"a".repeat(MAX_NAME_BYTES), "1").is_ok());
}

#[test]
fn artifacts_stay_inside_the_artifacts_directory() {
    let root = tempfile::tempdir().unwrap();
    let build = Layout::new(root.path()).start(&BuildLocation::periodic("job", "11").unwrap(), &started()).unwrap();
    for bad in ["../started.json", "/etc/passwd", "", "a/../../b"] {
        assert!(
            matches!(build.write_artifact(Path::new(bad), b"x"), Err(LayoutError::BadArtifactPath { .. })),
            "{bad:?}"
        );
    }
    assert!(!root.path().join("logs/job/started.json").exists());
}

#[test]
fn junit_files_must_have_a_name_testgrid_reads() {
    let root = tempfile::tempdir().unwrap();
    let build = Layout::new(root.path()).start(&BuildLocation::periodic("job", "12").unwrap(), &started()).unwrap();
    for bad in ["results.xml", "not-junit.xml", "junit_01.xml.gz", "sub/junit_01.xml"] {
        assert!(matches!(build.write_junit(bad, &report()), Err(LayoutError::NotJunitName { .. })), "{bad:?}");
    }
    let path = build.write_junit("junit_runner.xml", &report()).unwrap();
    assert_eq!(junit::read_file(&path, &ReadOptions::default()).unwrap().suites, report().suites);
}

#[test]
fn junit_artifacts_are_found_by_testgrids_rule_anywhere_in_the_build() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("logs/job/13");
    fs::create_dir_all(dir.join("artifacts/nested")).unwrap();
    fs::write(dir.join(STARTED_JSON), r#"{"timestamp": 1}"#).unwrap();
    for name in [
        "artifacts/junit_01.xml",
        "artifacts/nested/junit_runner.xml",
        "junit.xml",
        "artifacts/not-junit.xml",
        "artifacts/results.xml",
    ] {
        fs::write(dir.join(name), "<testsuite/>").unwrap();
    }
    let build = read_build_dir(&dir, Liveness::MayBeRunning).unwrap();
    let expected: Vec<PathBuf> =
        ["artifacts/junit_01.xml", "artifacts/nested/junit_runner.xml", "junit.xml"].map(PathBuf::from).into();
    assert_eq!(build.junit, expected);
    assert!(!build.has_build_log);
}

#[test]
fn one_bad_junit_file_does_not_hide_the_others() {
    let root = tempfile::tempdir().unwrap();
    let layout = Layout::new(root.path());
    let location = BuildLocation::periodic("job", "14").unwrap();
    let build = layout.start(&location, &started()).unwrap();
    build.write_junit("junit_01.xml", &report()).unwrap();
    build.write_artifact(Path::new("junit_02.xml"), b"<testsuite><testcase name=\"cut").unwrap();
    let reports = layout.read_build(&location, Liveness::Ended).unwrap().junit_reports(&ReadOptions::default());
    assert_eq!(reports.len(), 2);
    assert!(reports[0].1.is_ok());
    let err = reports[1].1.as_ref().unwrap_err();
    assert!(err.file().ends_with("artifacts/junit_02.xml"), "{err}");
}

#[test]
fn junit_artifact_names_follow_testgrid() {
    let meta = |path: &str| junit_artifact(path).map(|m| (m.context, m.timestamp, m.thread));
    let some = |c: &str, ts: &str, th: &str| Some((c.to_owned(), ts.to_owned(), th.to_owned()));
    // The brief's names, under artifacts/.
    assert_eq!(meta("artifacts/junit_01.xml"), some("01", "", ""));
    assert_eq!(meta("artifacts/junit_runner.xml"), some("runner", "", ""));
    assert_eq!(meta("artifacts/junit.xml"), some("", "", ""));
    assert_eq!(meta("artifacts/junit_cloud-e2e_01.xml"), some("cloud-e2e", "", "01"));
    assert_eq!(meta("artifacts/not-junit.xml"), None);
    // TestGrid's own cases (util/gcs/read_test.go, TestParseSuitesMeta).
    assert_eq!(meta("./started.json"), None);
    assert_eq!(meta("./junit"), None);
    assert_eq!(meta("./junit.xml"), some("", "", ""));
    assert_eq!(meta("./junit_hello world isn't-this exciting!.xml"), some("hello world isn't-this exciting!", "", ""));
    assert_eq!(meta("./junit_12345.xml"), some("12345", "", ""));
    assert_eq!(meta("./junit_context_12345.xml"), some("context", "", "12345"));
    assert_eq!(meta("./junit_context_20180102-1234.xml"), some("context", "20180102-1234", ""));
    assert_eq!(meta("./junit_context_20180102-1234_5555.xml"), some("context", "20180102-1234", "5555"));
    // The catch-all branch, a name without a directory, and Go's ASCII-only \d.
    assert_eq!(meta("artifacts/junit-playwright.xml"), some("-playwright", "", ""));
    assert_eq!(meta("junit_01.xml"), None);
    // Arabic-Indic digits are not Go's \d: no thread, and the catch-all keeps the underscore.
    assert_eq!(meta("artifacts/junit_ctx_\u{661}\u{662}.xml"), some("_ctx_\u{661}\u{662}", "", ""));
}

#[test]
fn builds_are_listed_newest_first_in_natural_order() {
    let root = tempfile::tempdir().unwrap();
    let layout = Layout::new(root.path());
    for build in ["9", "10", "100", "2", "1700000000000000000"] {
        layout.start(&BuildLocation::periodic("job", build).unwrap(), &started()).unwrap();
    }
    assert_eq!(layout.builds("job").unwrap(), ["1700000000000000000", "100", "10", "9", "2"]);
    assert_eq!(layout.latest_build("job").unwrap().as_deref(), Some("1700000000000000000"));
    assert!(layout.builds("other").unwrap().is_empty());
    assert_eq!(natural_cmp("build-9", "build-10"), Ordering::Less);
}

#[test]
fn column_version_follows_testgrids_rule() {
    let mut finished = finished();
    assert_eq!(column_version(&started(), &finished), "012345678", "repo-commit outranks job-version");
    finished.metadata.0.remove(keys::REPO_COMMIT);
    assert_eq!(column_version(&started(), &finished), "abcdef012", "after the '+', 9 characters");
    finished.metadata = Metadata::default();
    assert_eq!(column_version(&started(), &finished), "012345678", "started.json's repo-commit");
    assert_eq!(column_version(&Started::default(), &finished), "missing");
}

//! Build directories as `harness run` leaves them, made of the real JUnit files in
//! `tests/data/junit/`, and the indexes the results tests publish them into.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use junit::{self, ReadOptions};
use results::index::{Index, Snapshot};
use results::record::{ReadBuildOptions, Unfinished};
use testing::fresh_postgres_database;

pub const JOB: &str = "ci-cloud-provider-local-k8s-1.37";

/// The real files of `tests/data/junit/` and the artifact names they are published under.
pub const REAL_FILES: &[(&str, &str)] = &[
    ("e2e.test-v1.37.1-dryrun-conformance-junit_01.xml", "artifacts/junit_01.xml"),
    ("k8s-conformance-v1.7-gke-junit_01.xml", "artifacts/conformance-v1.7/junit_01.xml"),
    ("ginkgo-v2.34.0-generated-junit_01.xml", "artifacts/junit_ginkgo.xml"),
    ("kubetest2-writer-test-junit_runner.xml", "artifacts/junit_runner.xml"),
    ("nextest-fixture-nextest-tests-junit.xml", "artifacts/junit_nextest.xml"),
    ("pytest-9.2.0-generated-junit.xml", "artifacts/junit_pytest.xml"),
    ("quick-junit-basic_report.xml", "artifacts/junit_quick.xml"),
];

pub fn real_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/junit").join(name)
}

pub fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// Writes a build directory as `harness run` leaves it; `finished` is `finished.json`'s text.
pub fn build_dir(root: &Path, name: &str, started_at: i64, finished: Option<&str>, files: &[(&str, &str)]) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("artifacts")).unwrap();
    let started = serde_json::json!({
        "timestamp": started_at,
        "repos": {"kubernetes/kubernetes": "master"},
        "metadata": {"provider": "local"},
    });
    std::fs::write(dir.join("started.json"), started.to_string()).unwrap();
    std::fs::write(dir.join("build-log.txt"), format!("build {name}\n")).unwrap();
    for (source, artifact) in files {
        let target = dir.join(artifact);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::copy(real_file(source), target).unwrap();
    }
    if let Some(finished) = finished {
        std::fs::write(dir.join("finished.json"), finished).unwrap();
    }
    dir
}

pub fn finished_json(started_at: i64, passed: bool, kubernetes: &str, provider_version: &str) -> String {
    serde_json::json!({
        "timestamp": started_at + 600,
        "passed": passed,
        "result": if passed { "SUCCESS" } else { "FAILURE" },
        "metadata": {
            "kubernetes-version": kubernetes,
            "provider": "local",
            "provider-version": provider_version,
            "ccm-version": "reference-ccm 0.1.0",
            "job-version": kubernetes,
            // TestGrid's column version: the part after '+', 9 characters.
            "repo-commit": format!("{kubernetes}+{provider_version}0123456789"),
        },
    })
    .to_string()
}

pub async fn sqlite(dir: &Path, name: &str) -> Index {
    Index::open(&format!("sqlite://{}", dir.join(name).display())).await.unwrap()
}

pub async fn postgres() -> Index {
    Index::open(&fresh_postgres_database().await).await.unwrap()
}

pub fn ended() -> ReadBuildOptions {
    ReadBuildOptions { unfinished: Unfinished::Aborted, ..ReadBuildOptions::default() }
}

/// A snapshot with each build's store URL cut to the path under the store.
pub fn without_store_urls(mut snapshot: Snapshot) -> Snapshot {
    for build in &mut snapshot.builds {
        build.artifacts_url = build.path.clone();
    }
    snapshot
}

/// Test cases in the real files, as the JUnit reader counts them.
pub fn cases_in(files: &[(&str, &str)]) -> usize {
    files.iter().map(|(f, _)| junit::read_file(&real_file(f), &ReadOptions::default()).unwrap().cases().count()).sum()
}

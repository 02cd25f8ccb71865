//! `harness publish`, `harness index` and `harness testgrid-config` as a user runs them: the
//! embedded defaults (a local store and a SQLite file under `HARNESS_DATA_DIR`), exit codes, and
//! one-line reasons that name the bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn harness(data: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_harness"));
    cmd.env("HARNESS_DATA_DIR", data).env("CI", "true").env_remove("RUST_LOG");
    for inherited in ["DATABASE_URL", "HARNESS_STORE", "HARNESS_CONFIG", "JOB_NAME", "BUILD_ID", "PULL_NUMBER"] {
        cmd.env_remove(inherited);
    }
    cmd
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn error_line(output: &Output) -> String {
    let err = stderr(output);
    err.lines().find(|l| l.starts_with("error: ")).unwrap_or_else(|| panic!("no error line in:\n{err}")).to_owned()
}

/// A build directory with one real JUnit file (kubetest2's `junit_runner.xml`).
fn build_dir(root: &Path) -> PathBuf {
    let dir = root.join("build");
    std::fs::create_dir_all(dir.join("artifacts")).unwrap();
    std::fs::write(dir.join("started.json"), r#"{"timestamp": 1700000000}"#).unwrap();
    let finished = r#"{"timestamp": 1700000600, "passed": true, "result": "SUCCESS",
        "metadata": {"kubernetes-version": "v1.37.1", "provider": "local", "provider-version": "abc"}}"#;
    std::fs::write(dir.join("finished.json"), finished).unwrap();
    std::fs::write(dir.join("build-log.txt"), "ok\n").unwrap();
    let junit =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/junit/kubetest2-writer-test-junit_runner.xml");
    std::fs::copy(junit, dir.join("artifacts/junit_runner.xml")).unwrap();
    dir
}

fn publish(data: &Path, dir: &Path, build: &str) -> Output {
    harness(data).args(["publish", "--job", "ci-local", "--build", build, "--dir"]).arg(dir).output().unwrap()
}

#[test]
fn publish_and_index_use_the_embedded_defaults_and_are_idempotent() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let dir = build_dir(tmp.path());

    let first = publish(&data, &dir, "1");
    assert!(first.status.success(), "{}", stderr(&first));
    let out = stdout(&first);
    let store_dir = data.join("results/logs/ci-local/1");
    assert!(
        out.contains(&format!("published file://{}: 4 file(s) written, 0 unchanged", store_dir.display())),
        "{out}"
    );
    assert!(out.contains(&format!("indexed in sqlite://{}", data.join("index.sqlite").display())), "{out}");
    assert!(out.contains("finished PASSED"), "{out}");
    assert_eq!(std::fs::read_to_string(data.join("results/logs/ci-local/latest-build.txt")).unwrap(), "1");

    let again = publish(&data, &dir, "1");
    assert!(stdout(&again).contains("0 file(s) written, 4 unchanged; already indexed"), "{}", stdout(&again));

    let index = harness(&data).arg("index").output().unwrap();
    assert!(stdout(&index).contains("0 new, 0 replaced, 1 unchanged builds"), "{}", stdout(&index));
    // The store is the source of truth: a lost index is rebuilt from it.
    std::fs::remove_file(data.join("index.sqlite")).unwrap();
    let rebuilt = harness(&data).arg("index").output().unwrap();
    assert!(rebuilt.status.success(), "{}", stderr(&rebuilt));
    assert!(stdout(&rebuilt).contains("1 new, 0 replaced, 0 unchanged builds"), "{}", stdout(&rebuilt));
}

#[test]
fn a_directory_without_started_json_is_refused_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_dir(tmp.path());
    std::fs::remove_file(dir.join("started.json")).unwrap();
    let output = publish(&tmp.path().join("data"), &dir, "1");
    assert_eq!(output.status.code(), Some(1));
    let line = error_line(&output);
    assert!(line.contains(&format!("{}: not a build directory: started.json is missing", dir.display())), "{line}");
}

#[test]
fn a_broken_junit_file_is_named_and_the_rest_is_published() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = build_dir(tmp.path());
    std::fs::write(dir.join("artifacts/junit_02.xml"), "<testsuites><testsuite name=\"x\">").unwrap();
    let output = publish(&tmp.path().join("data"), &dir, "2");
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("artifacts/junit_02.xml: "), "{}", stderr(&output));
    assert!(stderr(&output).contains("truncated"), "{}", stderr(&output));
    let line = error_line(&output);
    assert!(line.contains("1 file(s) of file://") && line.contains("everything else was published"), "{line}");
    assert!(stdout(&output).contains("indexed in sqlite://"), "{}", stdout(&output));
}

/// What `harness run` tells a user whose artifacts directory holds an unpublished build:
/// `harness publish --dir DIR`, which reads the job and build from the directory's started.json.
#[test]
fn publish_dir_alone_publishes_a_build_harness_run_wrote() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let dir = build_dir(tmp.path());
    let started = r#"{"timestamp": 1700000000, "metadata": {"harness-job": "ci-local-run", "harness-build": "77"}}"#;
    std::fs::write(dir.join("started.json"), started).unwrap();
    let output = harness(&data).args(["publish", "--dir"]).arg(&dir).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("logs/ci-local-run/77"), "{}", stdout(&output));
    assert!(data.join("results/logs/ci-local-run/77/finished.json").is_file());
    // --build still wins over the recorded one.
    let output = harness(&data).args(["publish", "--build", "78", "--dir"]).arg(&dir).output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(data.join("results/logs/ci-local-run/78/finished.json").is_file());

    // A directory that does not name them: a one-line reason, exit 1 (not clap's 2).
    std::fs::write(dir.join("started.json"), r#"{"timestamp": 1700000000}"#).unwrap();
    let output = harness(&data).args(["publish", "--dir"]).arg(&dir).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(error_line(&output).contains("pass --job and --build"), "{}", error_line(&output));
}

/// Uploaded files are served inert, and every dashboard page works under its policy, in headless
/// Chromium (Debian's, driven by playwright-core: `scripts/browser install`): a build holding
/// XHTML, SVG and HTML files with a script each (dashboards/browser/inert.mjs checks none runs).
#[test]
fn hostile_uploads_never_run_on_the_dashboards_origin_in_a_real_browser() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/browser/inert.mjs");
    let installed = script.with_file_name("node_modules").join("playwright-core").is_dir()
        && Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(installed, "the browser tests need node, Chromium and playwright-core: run `scripts/browser install`");
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let dir = build_dir(tmp.path());
    let payload = "document.title='pwned';localStorage.setItem('pwned','1');fetch('/pwned');console.log('pwned')";
    let hostile = [
        (
            "evil.xml",
            format!(r#"<html xmlns="http://www.w3.org/1999/xhtml"><body><script>{payload}</script></body></html>"#),
        ),
        (
            "evil.xhtml",
            format!(r#"<html xmlns="http://www.w3.org/1999/xhtml"><body><script>{payload}</script></body></html>"#),
        ),
        ("evil.svg", format!(r#"<svg xmlns="http://www.w3.org/2000/svg"><script>{payload}</script></svg>"#)),
        ("evil.html", format!("<html><body><script>{payload}</script></body></html>")),
    ];
    for (name, content) in &hostile {
        std::fs::write(dir.join("artifacts").join(name), content).unwrap();
    }
    for build in ["1", "2"] {
        let output = publish(&data, &dir, build);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let mut serve = harness(&data)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(serve.stdout.take().unwrap()), &mut first).unwrap();
    let url = first.trim().strip_prefix("serving on ").unwrap_or_else(|| panic!("{first:?}")).to_owned();
    testing::central::wait_for_lkg(&url);
    let output =
        Command::new("node").arg(&script).args(["--url", &url, "--job", "ci-local", "--build", "2"]).output().unwrap();
    let _ = serve.kill();
    let _ = serve.wait();
    assert!(output.status.success(), "{}{}", stdout(&output), stderr(&output));
}

#[test]
fn bad_stores_and_databases_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let dir = build_dir(tmp.path());
    let run_build = |build: &str, extra: &[&str]| {
        let mut cmd = harness(&data);
        cmd.args(["publish", "--job", "j", "--build", build, "--dir"]).arg(&dir).args(extra);
        cmd.output().unwrap()
    };
    let run = |extra: &[&str]| run_build("1", extra);
    let line = error_line(&run(&["--store", "ftp://host/bucket"]));
    assert!(line.contains("\"ftp://host/bucket\" is not a store URL"), "{line}");
    let line = error_line(&run(&["--database", "mysql://db"]));
    assert!(line.contains("\"mysql://db\" is not a database URL"), "{line}");
    let line = error_line(&run(&["--database", "postgres://u:pw@127.0.0.1:1/db"]));
    assert!(line.contains("cannot connect to postgres://u:***@127.0.0.1:1/db"), "{line}");
    let line = error_line(&run_build("../escape", &[]));
    assert!(line.contains("invalid build id \"../escape\""), "{line}");
}

#[test]
fn testgrid_config_comes_from_providers_yaml_and_bad_files_are_located() {
    let tmp = tempfile::tempdir().unwrap();
    let output = harness(tmp.path()).current_dir(tmp.path()).arg("testgrid-config").output().unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    let yaml = stdout(&output);
    assert!(yaml.contains("gcs_prefix: kubernetes-ci-logs/logs/ci-cloud-provider-local-k8s-1.37"), "{yaml}");
    assert!(yaml.contains("configuration_value: kubernetes-version"), "{yaml}");

    let bad = tmp.path().join("providers.yaml");
    std::fs::write(&bad, "testgrid:\n  gcs_bucket: b\nproviders:\n  - name: x\n    colour: blue\n").unwrap();
    let output = harness(tmp.path()).arg("testgrid-config").arg("--config").arg(&bad).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let line = error_line(&output);
    assert!(line.contains(&format!("{}:5:5", bad.display())) && line.contains("colour"), "{line}");
}

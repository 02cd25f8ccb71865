//! `harness run` as CI invokes it, on the real local cluster: a passing run, a broken CCM, SIGINT
//! during Test, and bad input. Each test gets its own state, data and artifacts directories, and a
//! providers.yaml made of the bundled one plus test providers and suites.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use junit::{self, ReadOptions, Status};
use local_cluster::process::find_by_marker;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The bundled providers.yaml, with its suites list extended and more providers: `local-real`
/// (`local` on real nodes), `fixture` (the
/// local one on kwok nodes with a quick exec suite), `broken` (a CCM that exits at once), `buggy`
/// (the reference CCM with two deliberate bugs, running cloud-e2e on the nodes `local` has),
/// `gated` (fails on Kubernetes 1.37), `north` and `south`, two providers sharing a deliberately
/// failing test (`shared`), `flaky` (a hook that fails once, known failures) and `local-kwok`
/// (`local` on kwok nodes). Tests that only need a
/// cluster run on kwok nodes: they come up in seconds and run nothing in a pod.
/// A bundled provider entry as the test providers are made from it: one job running its `suites`
/// (as an entry without `jobs:`), those suites alone required, and no known failures (a test
/// provider lists its own).
fn base_entry(entry: &str) -> String {
    let mut kept = Vec::new();
    let mut dropping = false;
    for line in entry.lines() {
        if line == "    jobs:" || line == "    known_failures:" {
            dropping = true;
        } else if !(dropping && line.starts_with("      ")) {
            dropping = false;
            kept.push(line);
        }
    }
    let text = kept.join("\n") + "\n";
    let base = text.replacen(", upstream-load-balancers]\n", "]\n", 1);
    assert!(!base.contains("    jobs:") && !base.contains("known_failures:"), "{base}");
    base
}

fn providers_yaml(dir: &Path) -> PathBuf {
    let bundled = config::BUNDLED;
    let broken_ccm = dir.join("broken-ccm");
    std::fs::write(&broken_ccm, "#!/bin/sh\necho 'broken-ccm: refusing to start' >&2\nexit 1\n").unwrap();
    set_executable(&broken_ccm);
    let extra = String::from(
        r#"
suites:
  # Upstream's load-balancer tests without the rolling-update one (a quarter of an hour of pods
  # draining for a minute each), for CI's time.
  - name: upstream-load-balancers-quick
    kind: upstream-load-balancers
    skip: rolling update
    timeout: 30m
  # The node-deletion test, retried once: its hook fails the first call (provider `flaky`).
  - name: deletion-flaky
    kind: cloud-e2e
    focus: terminated
    flake_attempts: 2
    timeout: 10m
  # A failing test `flaky` lists as a known failure, and a passing one it still lists.
  - name: known-broken
    kind: exec
    command:
      - sh
      - -c
      - |
        cat > "$ARTIFACTS/junit_known-broken.xml" <<EOF
        <testsuite name="known-broken" tests="2" failures="1">
          <testcase name="[It] a test the provider cannot pass yet" time="2">
            <failure message="expected 2 endpoints, saw 1">known failure</failure>
          </testcase>
          <testcase name="[It] a test fixed long ago" time="1"/>
        </testsuite>
        EOF
        exit 1
    timeout: 1m
  - name: smoke
    kind: exec
    command: [sh, -c, 'test -s "$KUBECONFIG" && echo cluster reachable through $KUBECONFIG']
    timeout: 1m
  - name: hang
    kind: exec
    command: [sleep, "317"]
    timeout: 10m
  - name: hang-longer
    kind: exec
    command: [sleep, "318"]
    timeout: 10m
  - name: hang-matrix
    kind: exec
    command: [sleep, "320"]
    timeout: 10m
  - name: hang-real
    kind: exec
    command: [sleep, "319"]
    timeout: 10m
  - name: hang-fault
    kind: exec
    command: [sleep, "321"]
    timeout: 10m
  # Longer than a cut-off node takes to be found lost (20 s, then 300 s NotReady).
  - name: hang-node
    kind: exec
    command: [sleep, "622"]
    timeout: 10m
  - name: hang-cloud
    kind: exec
    command: [sleep, "323"]
    timeout: 10m
  # Fills the disk its $ARTIFACTS is on, then waits: only the run's watch of the disk ends it.
  - name: fill-disk
    kind: exec
    command: [sh, -c, 'dd if=/dev/zero of="$ARTIFACTS/filler" bs=64k; exec sleep 324']
    timeout: 10m
  # Long enough for a second run started beside it to find it running.
  - name: pause
    kind: exec
    command: [sleep, "6"]
    timeout: 1m
  - name: shared
    kind: exec
    command:
      - sh
      - -c
      - |
        n=$$
        cat > "$ARTIFACTS/junit_shared.xml" <<EOF
        <testsuite name="shared" tests="3" failures="1" skipped="1">
          <testcase name="[It] [sig-network] Services should reach the backends of a LoadBalancer Service [Conformance]" time="31">
            <failure message="timed out after $((n % 50 + 30)).$((n % 10))s waiting for pod web-7d9c8b6f5-x$((n % 10))k4p at 127.0.$((n % 250)).$((n % 200 + 1)):8080">shared failure</failure>
          </testcase>
          <testcase name="[It] [sig-node] Pods should be scheduled" time="1"/>
          <testcase name="[It] [sig-network] LoadBalancers should support UDP" time="0">
            <skipped message="the provider does not declare the capability load-balancer-udp (providers.yaml capabilities)"/>
          </testcase>
        </testsuite>
        EOF
        exit 1
    timeout: 1m
  - name: gate
    kind: exec
    command: [sh, -c, 'if test "{kubernetes_version}" = v1.37.1; then echo "fixture: broken on {kubernetes_version}" >&2; exit 1; fi']
    timeout: 1m
"#,
    );
    let local_entry = &base_entry(config::bundled_entry("local").expect("the bundled file has `local`"));
    // Kwok nodes cannot pass conformance: no `certification:` block, so no certification job
    // (and `matrix` runs only the providers' own jobs).
    let (uncertified, _) = local_entry.split_once("\n    certification:\n").expect("local certifies");
    let local_kwok = format!("{uncertified}\n").replacen("- name: local", "- name: local-kwok", 1).replacen(
        "      node_kind: real\n",
        "      node_kind: kwok\n",
        1,
    );
    // `local` on real nodes (kubelet, containerd, pods), whatever the bundled entry says.
    let local_real = local_entry.replacen("- name: local", "- name: local-real", 1).replacen(
        "      node_kind: kwok\n",
        "      node_kind: real\n",
        1,
    );
    assert!(local_real.contains("node_kind: real"), "local-real is on real nodes");
    let fixture = local_kwok.replacen("- name: local-kwok", "- name: fixture", 1).replace(
        "suites: [cloud-e2e, conformance-quick]\n    required:\n      suites: [cloud-e2e, conformance-quick]",
        "suites: [smoke]\n    required:\n      suites: [smoke]",
    );
    assert!(local_kwok.contains("node_kind: kwok") && fixture.contains("node_kind: kwok"), "pinned to kwok nodes");
    let broken = fixture.replacen("- name: fixture", "- name: broken", 1).replace(
        "build:\n        kind: cargo\n        package: reference-ccm\n        bin: reference-ccm",
        &format!(
            "build:\n        kind: command\n        command: [\"true\"]\n        binary: {}",
            broken_ccm.display()
        ),
    );
    // Passes on Kubernetes v1.36.4 and fails on v1.37.1: a regression for LKG to find.
    let gated = fixture.replacen("- name: fixture", "- name: gated", 1).replace(
        "suites: [smoke]\n    required:\n      suites: [smoke]",
        "suites: [smoke, gate]\n    required:\n      suites: [smoke, gate]",
    );
    let buggy = local_entry
        .replacen("- name: local", "- name: buggy", 1)
        .replacen(
            "          - --route-reconciliation-period=5s\n",
            "          - --route-reconciliation-period=5s\n          - --testing-bugs=keep-shutdown-taint,leak-load-balancers\n",
            1,
        )
        .replace(
            "suites: [cloud-e2e, conformance-quick]\n    required:\n      suites: [cloud-e2e, conformance-quick]",
            "suites: [cloud-e2e]\n    required:\n      suites: [cloud-e2e]",
        );
    assert!(fixture.contains("suites: [smoke]") && broken.contains("kind: command"), "the fixture edits applied");
    assert!(buggy.contains("--testing-bugs") && buggy.contains("suites: [cloud-e2e]\n"), "the buggy edits applied");
    assert!(gated.contains("suites: [smoke, gate]"), "the gated edits applied");
    // Two providers failing the same test, with messages that differ in durations, pod names and
    // addresses: one failure cluster, likely Kubernetes-side.
    let shared = |name: &str| {
        fixture.replacen("- name: fixture", &format!("- name: {name}"), 1).replace(
            "suites: [smoke]\n    required:\n      suites: [smoke]",
            "suites: [smoke, shared]\n    required:\n      suites: [smoke, shared]",
        )
    };
    let (north, south) = (shared("north"), shared("south"));
    assert!(north.contains("suites: [smoke, shared]"), "the shared edits applied");
    // A flake and known failures: the terminate hook fails its first call, and `known-broken`
    // fails a test the provider lists.
    let flaky_terminate = dir.join("flaky-terminate");
    std::fs::write(
        &flaky_terminate,
        "#!/bin/sh\nif mkdir \"$0.failed-once\" 2>/dev/null; then echo 'flaky-terminate: the cloud API timed out' >&2; exit 1; fi\nexec \"$@\"\n",
    )
    .unwrap();
    set_executable(&flaky_terminate);
    let flaky = local_kwok
        .replacen("- name: local-kwok", "- name: flaky", 1)
        .replacen(
            r#"command: ["{harness}", cluster, instance, --name, "{cluster}", terminate, "{node}"]"#,
            &format!(
                r#"command: ["{}", "{{harness}}", cluster, instance, --name, "{{cluster}}", terminate, "{{node}}"]"#,
                flaky_terminate.display()
            ),
            1,
        )
        .replace(
            "suites: [cloud-e2e, conformance-quick]\n    required:\n      suites: [cloud-e2e, conformance-quick]",
            "suites: [deletion-flaky, known-broken]\n    required:\n      suites: [deletion-flaky, known-broken]",
        )
        + "    known_failures:\n      - test: '[It] a test the provider cannot pass yet'\n        suite: known-broken\n        reason: the fixture fails it on purpose\n        link: https://github.com/kubernetes/cloud-provider/issues/1\n      - test: {regex: 'fixed long ago$'}\n        reason: fixed since\n        link: https://github.com/kubernetes/cloud-provider/issues/2\n";
    assert!(
        flaky.contains("flaky-terminate") && flaky.contains("[deletion-flaky, known-broken]"),
        "the flaky edits applied"
    );
    let text = format!(
        "{bundled}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{}\n{extra}",
        indent_providers(&local_kwok),
        indent_providers(&local_real),
        indent_providers(&fixture),
        indent_providers(&broken),
        indent_providers(&buggy),
        indent_providers(&gated),
        indent_providers(&north),
        indent_providers(&south),
        indent_providers(&flaky)
    );
    let path = dir.join("providers.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The provider entries as items of the top-level `providers:` list (they already are, indented).
pub(crate) fn indent_providers(entry: &str) -> String {
    entry.trim_end().to_owned()
}

pub(crate) fn set_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

pub(crate) struct Env {
    _tmp: tempfile::TempDir,
    pub(crate) root: PathBuf,
    pub(crate) config: PathBuf,
}

impl Env {
    pub(crate) fn new() -> Env {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let config = providers_yaml(&root);
        Env { _tmp: tmp, root, config }
    }

    /// `harness run` with this test's directories and nothing else.
    fn bare(&self) -> Command {
        self.command("run")
    }

    /// `harness <subcommand>` with this test's directories.
    pub(crate) fn command(&self, subcommand: &str) -> Command {
        let mut cmd = self.program(env!("CARGO_BIN_EXE_harness"));
        cmd.arg(subcommand);
        cmd
    }

    /// `program` with this test's directories, and nothing of the caller's that a run reads.
    pub(crate) fn program(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("HARNESS_STATE_DIR", self.root.join("state"))
            .env("HARNESS_DATA_DIR", self.root.join("data"))
            .env("CI", "true")
            .env_remove("RUST_LOG");
        for inherited in
            ["DATABASE_URL", "HARNESS_STORE", "HARNESS_CONFIG", "ARTIFACTS", "BUILD_ID", "PROW_JOB_ID", "JOB_NAME"]
        {
            cmd.env_remove(inherited);
        }
        cmd
    }

    /// `harness run --config <fixture> --artifacts <dir> ARGS`.
    pub(crate) fn harness(&self, args: &[&str]) -> Command {
        let mut cmd = self.bare();
        cmd.arg("--config").arg(&self.config).arg("--artifacts").arg(self.artifacts()).args(args);
        cmd
    }

    pub(crate) fn artifacts(&self) -> PathBuf {
        self.root.join("_artifacts")
    }

    pub(crate) fn finished(&self) -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(self.artifacts().join("finished.json")).unwrap()).unwrap()
    }

    /// The build id in `started.json`'s build directory (the last run's).
    fn finished_build_id(&self) -> String {
        let log = std::fs::read_to_string(self.artifacts().join("build-log.txt")).unwrap();
        let line = log.lines().find(|l| l.contains(" build ")).unwrap_or_else(|| panic!("no build line:\n{log}"));
        line.rsplit(" build ").next().unwrap().trim().to_owned()
    }

    pub(crate) fn runner_steps(&self) -> Vec<(String, Status)> {
        let file = self.artifacts().join("artifacts/junit_runner.xml");
        let report = junit::read_file(&file, &ReadOptions::default()).unwrap();
        report.cases().map(|(_, c)| (c.name.clone(), c.status())).collect()
    }

    /// `harness cluster up` of one real node named `cluster` with `images` imported and `hub_ports`
    /// forwarded; on failure the cluster is taken down before the panic.
    pub(crate) fn cluster_up_with_images(&self, cluster: &str, hub_ports: &[u16], images: &[&Path]) {
        let mut up = self.command("cluster");
        up.args(["up", "--name", cluster, "--nodes", "1"]);
        for port in hub_ports {
            up.arg("--hub-port").arg(port.to_string());
        }
        for archive in images {
            up.arg("--image").arg(archive);
        }
        let up = up.output().unwrap();
        if !up.status.success() {
            self.cluster_down(cluster);
            panic!("{}", text(&up));
        }
    }

    pub(crate) fn cluster_down(&self, cluster: &str) -> Output {
        self.command("cluster").args(["down", "--name", cluster]).output().unwrap()
    }

    pub(crate) fn assert_nothing_left(&self) {
        let state = self.root.join("state");
        let left = find_by_marker(&state);
        assert!(left.is_empty(), "processes left running: {left:?}");
    }
}

pub(crate) fn text(output: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

pub(crate) fn error_line(output: &Output) -> String {
    let err = String::from_utf8_lossy(&output.stderr);
    err.lines().find(|l| l.starts_with("error: ")).unwrap_or_else(|| panic!("no error line:\n{err}")).to_owned()
}

#[test]
fn a_passing_run_writes_a_finished_build_tears_down_and_publishes() {
    let env = Env::new();
    let output =
        env.harness(&["--provider", "fixture", "--provider-version", "abc123", "--build-id", "101"]).output().unwrap();
    assert!(output.status.success(), "{}", text(&output));

    let steps = env.runner_steps();
    let names: Vec<&str> = steps.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["Build", "Up", "Deploy", "Test", "DumpClusterLogs", "Down"]);
    assert!(steps.iter().all(|(_, s)| *s == Status::Passed), "{steps:?}");
    let finished = env.finished();
    assert_eq!((finished["passed"].as_bool(), finished["result"].as_str()), (Some(true), Some("SUCCESS")));
    assert_eq!(finished["metadata"]["kubernetes-version"], "v1.37.1");
    assert_eq!(finished["metadata"]["provider-version"], "abc123");
    assert!(finished["metadata"]["ccm-version"].as_str().is_some_and(|v| !v.is_empty()), "{finished}");
    let smoke = std::fs::read_to_string(env.artifacts().join("artifacts/smoke-output.txt")).unwrap_or_default();
    assert!(smoke.contains("cluster reachable"), "{smoke}");
    assert!(env.artifacts().join("artifacts/cluster-logs/kube-apiserver.log").is_file());
    // What Prow's sidecar merges into its own finished.json.
    let metadata: serde_json::Value =
        serde_json::from_slice(&std::fs::read(env.artifacts().join("artifacts/metadata.json")).unwrap()).unwrap();
    assert_eq!(metadata, finished["metadata"]);

    // Published to the default store and index, in the Prow layout.
    let build = env.root.join("data/results/logs/ci-cloud-provider-fixture-k8s-1.37/101");
    for file in ["started.json", "finished.json", "build-log.txt", "artifacts/junit_runner.xml"] {
        assert!(build.join(file).is_file(), "{} missing", build.join(file).display());
    }
    let read = results::layout::read_build_dir(&build, results::layout::Liveness::Ended).unwrap();
    assert!(matches!(read.state, results::layout::BuildState::Finished(_)));
    env.assert_nothing_left();

    // The same artifacts directory serves the next run once its build is published.
    let again = env.harness(&["--provider", "fixture", "--build-id", "102"]).output().unwrap();
    assert!(again.status.success(), "{}", text(&again));
    env.assert_nothing_left();
}

/// The store down when a run publishes (issue 56): an S3 store whose endpoint nothing answers yet.
/// The run retries, then keeps its build where it is, exits 1 and prints the `harness publish`
/// command for it; the next run on that directory refuses to overwrite it, printing the same
/// command; once the store is up, that command, run as printed, publishes every file of the build
/// and indexes every result, and running it again writes and indexes nothing twice.
#[test]
fn a_store_down_at_publish_time_keeps_the_build_and_the_printed_command_publishes_it_later() {
    let env = Env::new();
    // A port nothing listens on until fake-s3 starts there, once the run has given up.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let database = format!("sqlite://{}", env.root.join("index.sqlite").display());
    let run = |build: &str| {
        let args =
            ["--provider", "fixture", "--build-id", build, "--store", "s3://results/ci", "--database", &database];
        let mut cmd = env.harness(&args);
        cmd.args(["--publish-retries", "1s"]).env("AWS_ENDPOINT", &endpoint).env_remove("AWS_ACCESS_KEY_ID");
        cmd.output().unwrap()
    };
    let begun = Instant::now();
    let output = run("601");
    let took = begun.elapsed();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let job = "ci-cloud-provider-fixture-k8s-1.37";
    let command = format!(
        "harness publish --dir {} --job {job} --build 601 --store s3://results/ci --database {database}",
        env.artifacts().display()
    );
    let printed: Vec<&str> = stdout.lines().filter_map(|line| line.strip_prefix("    ")).collect();
    assert_eq!(printed, [command.as_str()], "{}", text(&output));
    let not_published = stdout.lines().find(|line| line.starts_with("  NOT published: ")).unwrap_or_default();
    assert!(not_published.ends_with("Connection refused (os error 111) (2 attempts)"), "{stdout}");
    assert!(stdout.contains(&format!("  the build is kept in {};", env.artifacts().display())), "{stdout}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("publishing failed (attempt 1 of 2): ") && stderr.contains("retrying in 1s"), "{stderr}");
    let line = error_line(&output);
    assert!(line.contains("the build ran but was not published: ") && line.contains(&format!("`{command}`")), "{line}");
    // The build is whole where the run wrote it.
    assert!(env.runner_steps().iter().all(|(_, status)| *status == Status::Passed), "{:?}", env.runner_steps());
    assert_eq!(env.finished()["result"], "SUCCESS");
    let files = files_under(&env.artifacts());
    assert!(files.iter().any(|(name, _)| name == "artifacts/junit_runner.xml"), "{files:?}");

    // The next run on that directory keeps it as it is, and says how to publish it.
    let refused = run("602");
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    let line = error_line(&refused);
    assert!(line.contains("holds build 601, which is not published yet"), "{line}");
    let with = "(with the store's AWS_* settings (credentials, AWS_ENDPOINT) as this run had them)";
    assert!(line.contains(&format!("publish it with `{command}` {with}, or pass another --artifacts")), "{line}");
    assert_eq!(files_under(&env.artifacts()), files, "the refused run changed the build");

    // The store is back: the printed command, as printed, publishes the build.
    let s3 = testing::emulator::Emulator::start(
        "fake-s3",
        &["-host", "127.0.0.1", "-port", &port.to_string(), "-bucket", "results"],
    );
    s3.wait_until_answers("GET", "/");
    let harness_dir = Path::new(env!("CARGO_BIN_EXE_harness")).parent().unwrap();
    let path = format!("{}:{}", harness_dir.display(), std::env::var("PATH").unwrap_or_default());
    let publish = || {
        let mut cmd = env.program("sh");
        cmd.arg("-c").arg(&command).env("PATH", &path).env("AWS_ENDPOINT", &endpoint).env_remove("AWS_ACCESS_KEY_ID");
        cmd.output().unwrap()
    };
    let published = publish();
    assert!(published.status.success(), "{}", text(&published));
    let summary = String::from_utf8_lossy(&published.stdout).into_owned();
    let written = format!("{} file(s) written, 0 unchanged; indexed", files.len());
    assert!(summary.contains(&format!("published s3://results/ci/logs/{job}/601: {written}")), "{summary}");
    // Every file of the build, in the store as it is on disk.
    for (name, bytes) in &files {
        let key: Vec<String> = format!("ci/logs/{job}/601/{name}").split('/').map(testing::fake_gcs::encode).collect();
        let (status, stored) = s3.request("GET", &format!("/results/{}", key.join("/")), None, b"");
        assert!(
            status == 200 && &stored == bytes,
            "{name}: {status}, {} bytes stored of {}",
            stored.len(),
            bytes.len()
        );
    }
    // Every test case of its JUnit files, in the index.
    let cases = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = files
            .iter()
            .filter(|(name, _)| name.rsplit('/').next().is_some_and(|file| file.starts_with("junit")))
            .flat_map(|(name, _)| {
                let report = junit::read_file(&dir.join(name), &ReadOptions::default()).unwrap();
                report.cases().map(|(_, case)| case.name.clone()).collect::<Vec<_>>()
            })
            .collect();
        names.sort();
        names
    };
    let expected = cases(&env.artifacts());
    assert!(expected.len() > 6, "the steps and the suite's tests: {expected:?}");
    let indexed = || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let snapshot = runtime.block_on(async {
            let index = results::index::Index::open_existing(&database).await.unwrap();
            index.snapshot().await.unwrap()
        });
        let build = snapshot.builds.iter().find(|b| b.build == "601").cloned();
        let mut names: Vec<String> = snapshot.results.into_iter().map(|(_, _, result)| result.name).collect();
        names.sort();
        (snapshot.builds.len(), build.map(|b| (b.job, b.passed)), names)
    };
    assert_eq!(indexed(), (1, Some((job.to_owned(), Some(true))), expected.clone()));

    // Published twice: nothing written or indexed again.
    let again = publish();
    assert!(again.status.success(), "{}", text(&again));
    let again = String::from_utf8_lossy(&again.stdout).into_owned();
    assert!(again.contains(&format!("0 file(s) written, {} unchanged; already indexed", files.len())), "{again}");
    assert_eq!(indexed(), (1, Some((job.to_owned(), Some(true))), expected));
    env.assert_nothing_left();
    let verdict = "exit 1 after 2 publish attempts (--publish-retries 1s; 6 over 31 s by default), the build kept and \
                   the `harness publish` command printed; run later, it publishes every file and result (the time: the whole run)";
    chaos_row("the store unreachable at publish time (s3://, a closed port)", verdict, took, "the whole build");
}

/// Every file under `dir`, by its path relative to it, with its bytes, sorted.
fn files_under(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(dir: &Path, relative: &str, found: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = format!("{relative}{}", entry.file_name().to_string_lossy());
            if entry.file_type().unwrap().is_dir() {
                walk(&entry.path(), &format!("{name}/"), found);
            } else {
                found.push((name, std::fs::read(entry.path()).unwrap()));
            }
        }
    }
    let mut found = Vec::new();
    walk(dir, "", &mut found);
    found.sort();
    found
}

#[test]
fn under_prows_pod_utilities_a_run_writes_what_the_sidecar_uploads_and_nothing_that_competes() {
    let env = Env::new();
    // Prow's decoration: an emptyDir at /logs, ARTIFACTS=/logs/artifacts, JOB_SPEC from the ProwJob.
    let logs = env.root.join("logs");
    let artifacts = logs.join("artifacts");
    let job = "ci-cloud-provider-fixture-k8s-1.37";
    let spec = format!(r#"{{"type":"periodic","job":"{job}","buildid":"301","prowjobid":"0b1d"}}"#);
    let output = env
        .bare()
        .arg("--config")
        .arg(&env.config)
        .args(["--provider", "fixture", "--provider-version", "abc123", "--build-id", "301"])
        .env("JOB_SPEC", spec)
        .env("JOB_NAME", job)
        .env("ARTIFACTS", &artifacts)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));

    // The sidecar merges $ARTIFACTS/metadata.json into the finished.json it uploads.
    let metadata: serde_json::Value =
        serde_json::from_slice(&std::fs::read(artifacts.join("metadata.json")).unwrap()).unwrap();
    assert_eq!(metadata["kubernetes-version"], "v1.37.1");
    assert_eq!(metadata["provider-version"], "abc123");
    assert!(metadata["ccm-version"].as_str().is_some_and(|v| !v.is_empty()), "{metadata}");
    assert!(artifacts.join("junit_runner.xml").is_file(), "junit files directly in $ARTIFACTS");
    assert!(artifacts.join("smoke-output.txt").is_file(), "the suites' $ARTIFACTS is Prow's");
    // Prow's initupload and sidecar write the build's started.json and finished.json.
    let mut uploaded = Vec::new();
    collect_names(&artifacts, &mut uploaded);
    let competing: Vec<_> = uploaded
        .iter()
        .filter(|name| ["started.json", "finished.json", "build-log.txt"].contains(&name.as_str()))
        .collect();
    assert!(competing.is_empty(), "in what the sidecar uploads: {competing:?}");
    // The harness's own record is beside $ARTIFACTS, and published as any run's.
    let finished: serde_json::Value =
        serde_json::from_slice(&std::fs::read(logs.join("finished.json")).unwrap()).unwrap();
    assert_eq!(finished["metadata"], metadata);
    let build = env.root.join(format!("data/results/logs/{job}/301"));
    assert!(build.join("artifacts/metadata.json").is_file(), "{} not published", build.display());
    assert!(build.join("artifacts/junit_runner.xml").is_file());
    env.assert_nothing_left();
}

/// The names of the files under `dir`, at any depth.
fn collect_names(dir: &Path, names: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            collect_names(&entry.path(), names);
        } else {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
}

/// Flake attempts and known failures in a real run (issue 54): the node-deletion test fails its
/// first attempt (its hook's first call fails) and passes its second, recorded flaky in the JUnit
/// and the index; `known-broken` fails a test the provider lists, so the run passes, saying so in
/// its metadata, and a listed test that passed is reported.
#[test]
fn a_flaky_test_is_retried_and_recorded_flaky_and_a_known_failure_passes_the_run() {
    let env = Env::new();
    let output = env.harness(&["--provider", "flaky", "--build-id", "103"]).output().unwrap();
    assert!(output.status.success(), "{}", text(&output));

    let file = env.artifacts().join("artifacts/junit_deletion-flaky.xml");
    let report = junit::read_file(&file, &ReadOptions::default()).unwrap();
    let cases: Vec<_> = report.cases().map(|(_, case)| case).collect();
    assert_eq!(cases.len(), 1, "{cases:#?}");
    assert!(cases[0].name.contains("terminated"), "{}", cases[0].name);
    assert_eq!((cases[0].status(), cases[0].attempts.len()), (Status::Flaky, 2), "{:#?}", cases[0]);
    let first = cases[0].attempts[0].detail.as_ref().and_then(|d| d.message.clone()).unwrap_or_default();
    assert!(first.contains("flaky-terminate: the cloud API timed out"), "{first}");

    let finished = env.finished();
    assert_eq!(finished["passed"], true, "{finished}");
    let known = &finished["metadata"]["known-failures"];
    let met: Vec<(&str, &str, &str)> = known
        .as_array()
        .unwrap_or_else(|| panic!("{finished}"))
        .iter()
        .map(|m| (m["suite"].as_str().unwrap(), m["test"].as_str().unwrap(), m["result"].as_str().unwrap()))
        .collect();
    assert_eq!(
        met,
        [
            ("known-broken", "[It] a test the provider cannot pass yet", "failed"),
            ("known-broken", "[It] a test fixed long ago", "passed"),
        ]
    );
    assert_eq!(known[0]["link"], "https://github.com/kubernetes/cloud-provider/issues/1");
    let said = text(&output);
    assert!(said.contains("known failure passed, take it off known_failures: [It] a test fixed long ago"), "{said}");

    // Published and indexed as it ran: flaky, and the known failure as one (the grid shows it so,
    // and the LKG counts it as the run did), the listed test that passed as a pass.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let results = runtime.block_on(async {
        let database = format!("sqlite://{}", env.root.join("data/index.sqlite").display());
        let index = results::index::Index::open(&database).await.unwrap();
        index.build_results("ci-cloud-provider-flaky-k8s-1.37", "103").await.unwrap()
    });
    let status = |name: &str| results.iter().find(|r| r.name.contains(name)).map(|r| r.status);
    assert_eq!(status("terminated"), Some(results::record::TestStatus::Flaky), "{results:#?}");
    assert_eq!(status("cannot pass yet"), Some(results::record::TestStatus::KnownFailure), "{results:#?}");
    assert_eq!(status("fixed long ago"), Some(results::record::TestStatus::Pass), "{results:#?}");
    env.assert_nothing_left();
}

#[test]
fn a_broken_ccm_fails_the_deploy_step_and_the_cluster_still_goes_down() {
    let env = Env::new();
    let output = env.harness(&["--provider", "broken", "--build-id", "7"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(error_line(&output).contains("step Deploy failed"), "{}", error_line(&output));
    let steps = env.runner_steps();
    let status = |name: &str| steps.iter().find(|(n, _)| n == name).map(|(_, s)| *s);
    assert_eq!(status("Build"), Some(Status::Passed));
    assert_eq!(status("Up"), Some(Status::Passed));
    assert_eq!(status("Deploy"), Some(Status::Failed));
    assert_eq!(status("Test"), Some(Status::Skipped));
    assert_eq!(status("Down"), Some(Status::Passed));
    assert_eq!(env.finished()["result"], "FAILURE");
    env.assert_nothing_left();
    let report =
        junit::read_file(&env.artifacts().join("artifacts/junit_runner.xml"), &ReadOptions::default()).unwrap();
    let deploy = report.cases().map(|(_, case)| case).find(|case| case.name == "Deploy").unwrap();
    let failure = deploy.failure().and_then(|d| d.message.clone()).unwrap_or_default();
    assert!(failure.contains("broken-ccm: refusing to start"), "quotes the CCM's own line: {failure}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("  published: "), "{}", text(&output));
    let took = Duration::from_secs_f64(deploy.attempts[0].time.unwrap_or_default());
    let verdict = format!("exit 1, Deploy failed: {}", failure.replace('\n', " "));
    chaos_row("the CCM crash-looping (exits 1 at every start)", &verdict, took, "the build published as FAILURE");
}

/// A fault injected once a run is in its Test step (issue 56), and how the run took it.
struct FaultedRun {
    output: Output,
    /// From the fault to the run's exit, teardown included.
    took: Duration,
    /// The Test step's failure message in `junit_runner.xml`.
    failure: String,
}

/// Runs `provider`'s `suite` (a `sleep`: only a fault ends it early), calls `inject` with the
/// cluster's state once the suite runs, and checks what every fault must leave: exit 1, Down
/// passed, a FAILURE build published, nothing running.
fn fault_during_the_suites(
    env: &Env,
    provider: &str,
    suite: &str,
    inject: impl FnOnce(&local_cluster::ClusterState),
) -> FaultedRun {
    let mut command = env.harness(&["--provider", provider, "--suites", suite, "--build-id", "14"]);
    let child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let started = Instant::now();
    while !env.artifacts().join(format!("artifacts/{suite}-output.txt")).exists() {
        assert!(started.elapsed() < Duration::from_secs(600), "the run never got to its Test step");
        std::thread::sleep(Duration::from_millis(200));
    }
    inject(&cluster_state(&env.root.join("state/clusters/harness-run")));
    let injected = Instant::now();
    let output = child.wait_with_output().unwrap();
    let took = injected.elapsed();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let report =
        junit::read_file(&env.artifacts().join("artifacts/junit_runner.xml"), &ReadOptions::default()).unwrap();
    let test = report.cases().map(|(_, case)| case).find(|case| case.name == "Test").expect("a Test step");
    let failure = test.failure().and_then(|d| d.message.clone()).unwrap_or_default();
    assert!(failure.contains(&format!("the run had a fault during suite {suite}")), "{failure}");
    let steps = env.runner_steps();
    assert!(steps.contains(&("Down".to_owned(), Status::Passed)), "{steps:?}");
    assert_eq!(env.finished()["result"], "FAILURE");
    env.assert_nothing_left();
    assert!(env.artifacts().join(format!("artifacts/{suite}-output.txt")).exists(), "the suite's output was lost");
    assert!(String::from_utf8_lossy(&output.stdout).contains("  published: "), "{}", text(&output));
    FaultedRun { output, took, failure }
}

impl FaultedRun {
    /// Its row of `scripts/chaos`'s table: what the checks above proved.
    fn row(&self, fault: &str) {
        let verdict = self.failure.split_once("are kept): ").map_or(self.failure.as_str(), |(_, fault)| fault);
        let verdict = verdict.lines().next().unwrap_or_default();
        let kept = "the suite's output; the build published as FAILURE";
        chaos_row(fault, &format!("exit 1, Test failed: {verdict}"), self.took, kept);
    }
}

/// A line `scripts/chaos` gathers into its table (fault, verdict, time to verdict, what was left
/// behind, what was kept): printed only once the test's checks passed, so "nothing" is checked.
fn chaos_row(fault: &str, verdict: &str, took: Duration, kept: &str) {
    let verdict: String = verdict.chars().take(240).collect();
    eprintln!("chaos-row\t{fault}\t{verdict}\t{:.1} s\tnothing\t{kept}", took.as_secs_f64());
}

/// The pid of the cluster's process `component`.
fn pid_of(state: &local_cluster::ClusterState, component: &str) -> i32 {
    state.processes.iter().find(|p| p.component == component).unwrap_or_else(|| panic!("no {component}")).pid
}

/// The CCM, kube-apiserver or etcd killed while the suites run (issue 56): the Test step ends
/// within seconds, not when the suite's timeout is up, naming the process, how it ended, its log
/// and the suite under way; the cluster goes down with nothing left, the suite's process with it,
/// and the build is published as a failure. (Nothing restarts a process of the embedded control
/// plane, as a kubelet restarts a static pod: its exit is the run's end.)
#[test]
fn a_control_plane_process_killed_during_the_suites_ends_the_test_step_at_once_naming_it() {
    for component in ["reference-ccm", "kube-apiserver", "etcd"] {
        let env = Env::new();
        let mut pid = 0;
        let run = fault_during_the_suites(&env, "fixture", "hang-fault", |state| {
            pid = pid_of(state, component);
            kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
        });
        eprintln!("{component} killed: the run ended {:?} after, teardown included", run.took);
        assert!(run.took < Duration::from_secs(60), "{component}: the run took {:?}: {}", run.took, text(&run.output));
        let failure = &run.failure;
        assert!(failure.contains(&format!("{component} (pid {pid}) exited: killed by SIGKILL")), "{failure}");
        assert!(failure.contains(&format!("{component}.log")), "names its log: {failure}");
        assert!(!process_running(b"sleep\x00321\x00"), "the suite's process outlived the run");
        run.row(&format!("{component} SIGKILLed (kwok nodes)"));
    }
}

/// The cloud's API down while the suites run (issue 56): every call fails, as the local cloud's
/// fault injection makes it (`*` until cleared, 503). The Test step ends once no call has been
/// answered for 30 s (the CCM's route reconciliation calls every 5 s), naming the calls that failed.
#[test]
fn the_clouds_api_down_during_the_suites_ends_the_test_step_naming_it() {
    let env = Env::new();
    let run = fault_during_the_suites(&env, "fixture", "hang-cloud", |state| {
        let url =
            serde_json::to_value(state).unwrap()["cloud"]["url"].as_str().expect("the local cloud's URL").to_owned();
        let fault = r#"{"operation": "*", "count": null, "mode": "fail", "status": 503, "delay_ms": 0}"#;
        let mut inject = Command::new("curl");
        inject.args(["-sSf", "-X", "POST", "-H", "content-type: application/json", "-d", fault]);
        let inject = inject.arg(format!("{url}/admin/faults")).output().unwrap();
        assert!(inject.status.success(), "{}", text(&inject));
    });
    eprintln!("the cloud's API down: the run ended {:?} after, teardown included", run.took);
    assert!(run.took < Duration::from_secs(75), "the run took {:?}: {}", run.took, text(&run.output));
    let failure = &run.failure;
    assert!(failure.contains("the cloud's API failed every call for the last 30 s, answering none: "), "{failure}");
    assert!(failure.contains("list_routes 503 × "), "names the calls that failed: {failure}");
    assert!(!process_running(b"sleep\x00323\x00"), "the suite's process outlived the run");
    run.row("the cloud's API down (the local cloud failing every call, 503)");
}

/// The disk of the build directory filled by a suite (issue 56; `--artifacts` on an 8 MiB tmpfs):
/// the Test step ends at once naming the disk, and the run still writes `junit_runner.xml`,
/// `build-log.txt` and `finished.json` in the room it set aside when it started, and publishes
/// the build with what the suite wrote.
#[test]
fn a_full_disk_during_the_suites_ends_the_test_step_and_the_build_is_still_written_and_published() {
    let env = Env::new();
    /// Unmounts the tmpfs (lazily: nothing may use it by then) before the test's directory goes.
    struct Mounted(PathBuf);
    impl Drop for Mounted {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
    std::fs::create_dir_all(env.artifacts()).unwrap();
    let mount = Command::new("mount").args(["-t", "tmpfs", "-o", "size=8m", "tmpfs"]).arg(env.artifacts()).output();
    let mount = mount.unwrap();
    assert!(mount.status.success(), "{}", text(&mount));
    let _mounted = Mounted(env.artifacts());
    let run = fault_during_the_suites(&env, "fixture", "fill-disk", |_| {});
    eprintln!("the disk filled: the run ended {:?} after, teardown included", run.took);
    assert!(run.took < Duration::from_secs(60), "the run took {:?}: {}", run.took, text(&run.output));
    let expected = format!("the disk of the artifacts directory {} is full: ", env.artifacts().display());
    assert!(run.failure.contains(&expected) && run.failure.contains("KiB of 8192 KiB available"), "{}", run.failure);
    let filler = std::fs::metadata(env.artifacts().join("artifacts/filler")).expect("what the suite wrote is kept");
    assert!(filler.len() > 4 * 1024 * 1024, "{filler:?}");
    assert!(std::fs::read_to_string(env.artifacts().join("build-log.txt")).unwrap().contains("is full"));
    assert!(!process_running(b"sleep\x00324\x00"), "the suite's process outlived the run");
    run.row("the artifacts directory's disk full (an 8 MiB tmpfs a suite fills)");

    // A disk without the room to set aside is refused before anything starts.
    let tiny = env.root.join("tiny");
    std::fs::create_dir_all(&tiny).unwrap();
    let mount = Command::new("mount").args(["-t", "tmpfs", "-o", "size=512k", "tmpfs"]).arg(&tiny).output().unwrap();
    assert!(mount.status.success(), "{}", text(&mount));
    let _tiny = Mounted(tiny.clone());
    let mut refused = env.bare();
    refused.arg("--config").arg(&env.config).arg("--artifacts").arg(&tiny).args(["--provider", "fixture"]);
    let line = error_line(&refused.output().unwrap());
    let expected = format!("{}: the run sets 1024 KiB aside there for its last files, and could not (", tiny.display());
    assert!(line.contains(&expected) && line.contains("pass another --artifacts"), "{line}");
    assert!(!tiny.join("started.json").exists() && !tiny.join(".space-reserve.partial").exists());
}

/// A real node's faults while the suites run (issue 56). Its kubelet killed ends the Test step at
/// once, naming it. Its network cut (the link of its namespace down) ends it once the control
/// plane has marked the node NotReady (`--node-monitor-grace-period=20s`) and it stayed so for
/// 300 s, naming the node, its condition and that its kubelet still runs, with the end of the
/// kubelet's log. Nothing of the
/// real nodes is left either way.
#[test]
fn a_real_nodes_kubelet_killed_or_its_network_cut_during_the_suites_ends_the_test_step_naming_it() {
    use local_cluster::real;
    if let Some(missing) = real::missing_kernel_feature() {
        eprintln!("SKIPPED: real nodes cannot run on this machine: {missing}");
        return;
    }
    let env = Env::new();
    let mut kubelet = (String::new(), 0);
    let run = fault_during_the_suites(&env, "local-real", "hang-node", |state| {
        let node = state.nodes.last().unwrap();
        kubelet = (node.clone(), pid_of(state, &format!("{node}-kubelet")));
        kill(Pid::from_raw(kubelet.1), Signal::SIGKILL).unwrap();
    });
    eprintln!("{}'s kubelet killed: the run ended {:?} after, teardown included", kubelet.0, run.took);
    assert!(run.took < Duration::from_secs(60), "the run took {:?}: {}", run.took, text(&run.output));
    let expected = format!("{}-kubelet (pid {}) exited: killed by SIGKILL", kubelet.0, kubelet.1);
    assert!(run.failure.contains(&expected), "{}", run.failure);
    assert!(!process_running(b"sleep\x00622\x00"), "the suite's process outlived the run");
    run.row("a real node's kubelet SIGKILLed");

    let env = Env::new();
    let mut cut = String::new();
    let run = fault_during_the_suites(&env, "local-real", "hang-node", |state| {
        cut = state.nodes.last().unwrap().clone();
        let holder = pid_of(state, &format!("{cut}-namespaces"));
        let mut down = Command::new("nsenter");
        let down = down.arg(format!("--net=/proc/{holder}/ns/net")).args(["ip", "link", "set", "eth0", "down"]);
        let down = down.output().unwrap();
        assert!(down.status.success(), "{}", text(&down));
    });
    eprintln!("{cut}'s network cut: the run ended {:?} after, teardown included", run.took);
    // The control plane's 20 s grace, then the 300 s a node may stay NotReady (a kubelet on a
    // loaded machine can miss its lease for tens of seconds and be back), then teardown.
    assert!(run.took < Duration::from_secs(400), "the run took {:?}: {}", run.took, text(&run.output));
    let failure = &run.failure;
    assert!(failure.contains(&format!("node {cut} went NotReady: Ready is Unknown (NodeStatusUnknown")), "{failure}");
    assert!(failure.contains(", for 30"), "NotReady for 300 s or a little more: {failure}");
    assert!(failure.contains("its kubelet (pid ") && failure.contains("still runs"), "{failure}");
    assert!(failure.contains(&format!("{cut}-kubelet.log):")), "quotes the kubelet's log: {failure}");
    assert!(!process_running(b"sleep\x00622\x00"), "the suite's process outlived the run");
    run.row("a real node cut off (its eth0 down)");
}

#[test]
fn sigint_during_test_aborts_the_build_and_brings_the_cluster_down() {
    interrupt_during_test(Launch::Terminal, Signal::SIGINT, "hang", "317");
}

/// As `nohup harness run &` or a CI runner starts it: SIGINT ignored. SIGTERM still stops it, and
/// what it started did not inherit the ignored SIGINT.
#[test]
fn sigterm_stops_a_run_launched_with_sigint_ignored() {
    interrupt_during_test(Launch::SigintIgnored, Signal::SIGTERM, "hang-longer", "318");
}

/// SIGTERM to `harness matrix` (what Prow sends at its timeout) stops the whole matrix: the cell
/// under way is aborted and brought down, and no further cell starts.
#[test]
fn sigterm_stops_a_matrix_not_just_its_current_cell() {
    let env = Env::new();
    let mut command = env.command("matrix");
    command.arg("--config").arg(&env.config).arg("--artifacts").arg(env.artifacts());
    command.args(["--provider", "fixture", "--kubernetes", "v1.37.1", "--kubernetes", "v1.36.4"]);
    command.args(["--suites", "hang-matrix"]).stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = command.spawn().unwrap();
    let first = env.artifacts().join("ci-cloud-provider-fixture-k8s-1.37");
    let second = env.artifacts().join("ci-cloud-provider-fixture-k8s-1.36");
    let sleep_cmdline = b"sleep\x00320\x00".to_vec();
    wait_for_process(&sleep_cmdline);
    let started: Vec<bool> =
        [&first, &second].iter().map(|dir| dir.join("artifacts/hang-matrix-output.txt").exists()).collect();
    assert_eq!(started, [true, false], "cells run one at a time, in file order");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", text(&output));
    assert!(!second.join("started.json").exists(), "the second cell started after SIGTERM:\n{}", text(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("not run (the matrix was interrupted)"),
        "{}",
        text(&output)
    );
    let finished: serde_json::Value =
        serde_json::from_slice(&std::fs::read(first.join("finished.json")).unwrap()).unwrap();
    assert_eq!(finished["result"], "ABORTED");
    env.assert_nothing_left();
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Launch {
    Terminal,
    SigintIgnored,
}

/// Runs the `suite` (a `sleep SECONDS`; each test its own, so tests running at once tell their
/// processes apart) and sends `signal` to the harness while it runs.
fn interrupt_during_test(launch: Launch, signal: Signal, suite: &str, seconds: &str) {
    let env = Env::new();
    let mut command = env.harness(&["--provider", "fixture", "--suites", suite, "--build-id", "9"]);
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    if launch == Launch::SigintIgnored {
        use std::os::unix::process::CommandExt;
        // SAFETY: only sigaction runs in the child before exec.
        unsafe {
            command.pre_exec(|| {
                nix::sys::signal::signal(Signal::SIGINT, nix::sys::signal::SigHandler::SigIgn)
                    .map(|_| ())
                    .map_err(std::io::Error::from)
            });
        }
    }
    let child = command.spawn().unwrap();
    let started = Instant::now();
    let hang_output = env.artifacts().join(format!("artifacts/{suite}-output.txt"));
    let sleep_cmdline = format!("sleep\0{seconds}\0").into_bytes();
    while !hang_output.exists() {
        assert!(started.elapsed() < Duration::from_secs(300), "the hang suite never started");
        std::thread::sleep(Duration::from_millis(200));
    }
    let sleeper = wait_for_process(&sleep_cmdline);
    assert!(
        !cli_support::signals::is_ignored(sleeper, Signal::SIGINT).unwrap(),
        "the suite's process inherited an ignored SIGINT"
    );
    kill(Pid::from_raw(child.id() as i32), signal).unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", text(&output));
    let finished = env.finished();
    assert_eq!((finished["passed"].as_bool(), finished["result"].as_str()), (Some(false), Some("ABORTED")));
    let steps = env.runner_steps();
    assert!(steps.contains(&("Test".to_owned(), Status::Failed)), "{steps:?}");
    assert!(steps.contains(&("Down".to_owned(), Status::Passed)), "{steps:?}");
    env.assert_nothing_left();
    assert!(!process_running(&sleep_cmdline), "the suite's process outlived the run");
}

/// SIGINT while a run on real nodes (`local-real`) is in its Test step, with one
/// node's machine shut down by the `shutdown_instance` hook's command: the run ends within a
/// bounded time, the build ABORTED, and nothing of the real nodes is left: no process, network or
/// mount namespace, mount, cgroup or socket dir; the root network namespace's links and iptables
/// rules and the global sysctls are as before. The dumped logs have the containers' logs.
#[test]
fn sigint_during_a_real_run_leaves_nothing_of_its_real_nodes() {
    use local_cluster::real;
    if let Some(missing) = real::missing_kernel_feature() {
        eprintln!("SKIPPED: real nodes cannot run on this machine: {missing}");
        return;
    }
    let env = Env::new();
    let host = testing::host::HostSnapshot::take();
    let cluster = "run-real-sigint";
    let mut command = env.harness(&["--provider", "local-real", "--suites", "hang-real", "--cluster-name", cluster]);
    let child = command.args(["--build-id", "12"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let started = Instant::now();
    let sleep_cmdline = b"sleep\x00319\x00".to_vec();
    while !env.artifacts().join("artifacts/hang-real-output.txt").exists() {
        assert!(started.elapsed() < Duration::from_secs(600), "the run never got to its Test step");
        std::thread::sleep(Duration::from_millis(200));
    }
    wait_for_process(&sleep_cmdline);
    let dir = env.root.join("state/clusters").join(cluster);
    let state = cluster_state(&dir);
    let namespaces = real::namespaces(&state);
    assert_eq!(
        namespaces.names.len(),
        3 * 2 + 1,
        "three real nodes' network and mount namespaces, the hub's: {namespaces:?}"
    );
    let running = real::leftovers(&dir);
    assert!(running.iter().any(|l| l.starts_with("cgroup ")), "no cgroups before the signal: {running:?}");

    // CoreDNS runs in pods once the CCM initialised the nodes: wait for a container log of it.
    let coredns_log = || {
        let logs =
            std::fs::read_dir(dir.join("real")).into_iter().flatten().flatten().map(|n| n.path().join("var-log/pods"));
        logs.flat_map(|pods| std::fs::read_dir(pods).into_iter().flatten().flatten())
            .filter(|pod| pod.file_name().to_string_lossy().starts_with("kube-system_coredns-"))
            .any(|pod| std::fs::metadata(pod.path().join("coredns/0.log")).is_ok_and(|m| m.len() > 0))
    };
    while !coredns_log() {
        assert!(started.elapsed() < Duration::from_secs(900), "no CoreDNS container ever logged");
        std::thread::sleep(Duration::from_millis(500));
    }

    // A machine shut down, as cloud-e2e's NodeShutdown test leaves one while it waits.
    let node = format!("{cluster}-worker-1");
    let shutdown = env.command("cluster").args(["instance", "--name", cluster, "shutdown", &node]).output().unwrap();
    assert!(shutdown.status.success(), "{}", text(&shutdown));
    let state = cluster_state(&dir);
    let stopped: Vec<&str> = state.stopped.iter().map(|s| s.record.component.as_str()).collect();
    assert_eq!(stopped.len(), 3, "{node}'s containerd, kubelet and kube-proxy are stopped: {stopped:?}");
    assert!(state.stopped.iter().all(|s| !s.record.is_running()), "{stopped:?} still run");

    let signalled = Instant::now();
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(signalled.elapsed() < Duration::from_secs(120), "the run took {:?} to end", signalled.elapsed());
    assert_eq!(output.status.code(), Some(130), "{}", text(&output));
    assert_eq!(env.finished()["result"], "ABORTED");
    let steps = env.runner_steps();
    assert!(steps.contains(&("Down".to_owned(), Status::Passed)), "{steps:?}");

    assert_real_nodes_gone(&dir, &namespaces, &host);
    env.assert_nothing_left();
    assert!(!process_running(&sleep_cmdline), "the suite's process outlived the run");

    // CoreDNS ran in pods: its containers' logs were dumped with the cluster's.
    let pods = env.artifacts().join("artifacts/cluster-logs/pods");
    let dumped = std::fs::read_dir(&pods)
        .unwrap_or_else(|e| panic!("{}: {e}", pods.display()))
        .flatten()
        .flat_map(|node| std::fs::read_dir(node.path()).into_iter().flatten().flatten())
        .filter(|pod| pod.file_name().to_string_lossy().starts_with("kube-system_coredns-"))
        .any(|pod| std::fs::metadata(pod.path().join("coredns/0.log")).is_ok_and(|m| m.len() > 0));
    assert!(dumped, "no CoreDNS container's log under {}", pods.display());
    for component in ["kubelet", "containerd", "kube-proxy"] {
        let node_log = env.artifacts().join(format!("artifacts/cluster-logs/{cluster}-worker-0-{component}.log"));
        assert!(node_log.is_file(), "{} missing", node_log.display());
    }
}

/// `--keep-cluster` on real nodes: the run ends, its Down skipped, and the cluster stays up and
/// usable (listed, its kubeconfig reaches it, a pod runs on it); `harness cluster down` then
/// removes it with nothing left. Neither command prints a warning.
#[test]
fn keep_cluster_leaves_a_working_cluster_that_cluster_down_removes() {
    use local_cluster::real;
    if let Some(missing) = real::missing_kernel_feature() {
        eprintln!("SKIPPED: real nodes cannot run on this machine: {missing}");
        return;
    }
    let env = Env::new();
    let host = testing::host::HostSnapshot::take();
    let cluster = "run-kept";
    let run = env
        .harness(&["--provider", "local-real", "--suites", "smoke", "--cluster-name", cluster, "--keep-cluster"])
        .args(["--build-id", "401"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", text(&run));
    assert_no_warnings(&run);
    let steps = env.runner_steps();
    assert!(steps.contains(&("Down".to_owned(), Status::Skipped)), "{steps:?}");
    let log = std::fs::read_to_string(env.artifacts().join("build-log.txt")).unwrap();
    assert!(log.contains(&format!("to remove it: harness cluster down --name {cluster}")), "{log}");

    let listed = env.command("cluster").arg("list").output().unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(listed.lines().any(|l| l.starts_with(&format!("{cluster}\trunning"))), "{listed}");
    let kubeconfig = env.command("cluster").args(["kubeconfig", "--name", cluster]).output().unwrap();
    assert!(kubeconfig.status.success(), "{}", text(&kubeconfig));
    let kubeconfig = String::from_utf8_lossy(&kubeconfig.stdout).trim().to_owned();
    let bin = env.command("toolchain").arg("path").output().unwrap();
    let kubectl = PathBuf::from(String::from_utf8_lossy(&bin.stdout).trim()).join("kubectl");
    let kubectl = |args: &[&str]| {
        let output = Command::new(&kubectl).arg("--kubeconfig").arg(&kubeconfig).args(args).output().unwrap();
        assert!(output.status.success(), "kubectl {args:?}: {}", text(&output));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let nodes = kubectl(&["get", "nodes", "-o", "name"]);
    assert_eq!(nodes.lines().count(), 3, "{nodes}");
    let busybox = "--image=registry.k8s.io/e2e-test-images/busybox:1.37.0-2";
    kubectl(&["run", "kept-probe", busybox, "--restart=Never", "--command", "--", "sh", "-c", "echo still-here"]);
    kubectl(&["wait", "pod/kept-probe", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=180s"]);
    assert_eq!(kubectl(&["logs", "kept-probe"]).trim(), "still-here");

    let dir = env.root.join("state/clusters").join(cluster);
    let state = cluster_state(&dir);
    let namespaces = real::namespaces(&state);
    let down = env.command("cluster").args(["down", "--name", cluster]).output().unwrap();
    assert!(down.status.success(), "{}", text(&down));
    assert_no_warnings(&down);
    assert_real_nodes_gone(&dir, &namespaces, &host);
    env.assert_nothing_left();
    let listed = env.command("cluster").arg("list").output().unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).trim().is_empty(), "{}", text(&listed));
}

/// The `cluster.json` of the cluster in `dir`.
fn cluster_state(dir: &Path) -> local_cluster::ClusterState {
    serde_json::from_slice(&std::fs::read(dir.join("cluster.json")).unwrap()).unwrap()
}

/// Nothing of the real nodes of the cluster in `dir` is left (no process, mount, cgroup, socket
/// dir or namespace of `namespaces`), and the machine is as `host` saw it.
fn assert_real_nodes_gone(
    dir: &Path,
    namespaces: &local_cluster::real::Namespaces,
    host: &testing::host::HostSnapshot,
) {
    use local_cluster::real;
    assert_eq!(real::leftovers(dir), Vec::<String>::new(), "processes, mounts, cgroups or sockets left");
    assert_eq!(real::namespaces_in_use(namespaces), Vec::<String>::new(), "namespaces left");
    assert_eq!(host.changes_since(), Vec::<String>::new(), "the machine changed");
}

/// A clean run or teardown logs no warning: one would mean something went wrong (a stray process
/// the orderly stop missed, say).
fn assert_no_warnings(output: &Output) {
    let all = text(output);
    let warnings: Vec<&str> = all.lines().filter(|l| l.contains(" WARN ")).collect();
    assert!(warnings.is_empty(), "warnings in a clean run: {warnings:#?}");
}

/// The pid of the process with exactly this command line, once it runs (within 3 minutes: the
/// run that starts it brings a cluster up first, slower while real clusters run beside it).
fn wait_for_process(cmdline: &[u8]) -> i32 {
    let started = Instant::now();
    loop {
        let found = std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
            let pid = e.file_name().to_str()?.parse::<i32>().ok()?;
            (std::fs::read(e.path().join("cmdline")).ok()? == cmdline).then_some(pid)
        });
        if let Some(pid) = found {
            return pid;
        }
        assert!(started.elapsed() < Duration::from_secs(180), "no process {:?}", String::from_utf8_lossy(cmdline));
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Issue 19, item 11: SIGTERM while cloud-e2e runs. The build ends ABORTED and the cluster goes
/// down, as before; and now the results cloud-e2e had so far are in its JUnit file (the tests cut
/// short marked as such), and the Test step shows the time it ran and the suite it was in.
#[test]
fn sigterm_during_cloud_e2e_keeps_its_results_so_far_and_the_test_steps_real_duration() {
    use std::io::BufRead;
    let env = Env::new();
    let mut child = env
        .harness(&["--provider", "local-kwok", "--suites", "cloud-e2e", "--build-id", "11"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, log) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let mut seen = String::new();
    let mut wait_for = |needle: &str| loop {
        let line = log.recv_timeout(Duration::from_secs(600)).unwrap_or_else(|_| panic!("no {needle:?} in:\n{seen}"));
        seen.push_str(&line);
        seen.push('\n');
        if line.contains(needle) {
            return Instant::now();
        }
    };
    let test_began = wait_for("step Deploy: passed");
    wait_for("cloud-e2e: PASSED");
    std::thread::sleep(Duration::from_secs(1));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let ran_at_least = test_began.elapsed();
    let status = child.wait().unwrap();
    assert!(!status.success(), "{status:?}");
    assert_eq!(env.finished()["result"], "ABORTED");

    // Every way the build misrepresents the interrupted run, at once.
    let mut wrong = Vec::new();
    let runner =
        junit::read_file(&env.artifacts().join("artifacts/junit_runner.xml"), &ReadOptions::default()).unwrap();
    let (_, test) = runner.cases().find(|(_, c)| c.name == "Test").expect("a Test step");
    assert_eq!(test.status(), Status::Failed);
    let message = test.failure().and_then(|f| f.message.clone()).unwrap_or_default();
    if !message.contains("interrupted by SIGTERM during suite cloud-e2e") {
        wrong.push(format!("the Test step's failure names no suite: {message:?}"));
    }
    let took = test.total_time().unwrap_or_default();
    if took < ran_at_least.as_secs_f64() - 0.5 {
        wrong.push(format!("the Test step shows {took}s; it ran at least {ran_at_least:?}"));
    }
    let file = env.artifacts().join("artifacts/junit_cloud-e2e.xml");
    if file.exists() {
        let (passed, failed, skipped) = cloud_e2e_results(&env);
        assert!(failed.is_empty(), "{failed:#?}");
        if passed.is_empty() {
            wrong.push("junit_cloud-e2e.xml holds no passed test".to_owned());
        }
        let report = junit::read_file(&file, &ReadOptions::default()).unwrap();
        let not_finished = |c: &junit::TestCase| {
            c.attempts.iter().any(|a| {
                a.detail.as_ref().and_then(|d| d.message.as_deref()).is_some_and(|m| m.contains("not finished"))
            })
        };
        let unfinished = report.cases().filter(|(_, c)| not_finished(c)).count();
        assert!(unfinished > 0, "every test had ended before the signal: send it earlier");
        // The others skipped said why before the signal (e.g. tests that need real pods, on kwok).
        let says_why = |c: &junit::TestCase| {
            c.attempts
                .iter()
                .any(|a| a.detail.as_ref().and_then(|d| d.message.as_deref()).is_some_and(|m| !m.is_empty()))
        };
        let unexplained: Vec<&str> = report
            .cases()
            .filter(|(_, c)| c.status() == Status::Skipped && !says_why(c))
            .map(|(_, c)| c.name.as_str())
            .collect();
        if !unexplained.is_empty() {
            wrong.push(format!(
                "of {} skipped tests, {unexplained:?} say neither why nor that they were cut short",
                skipped.len()
            ));
        }
    } else {
        wrong.push("no junit_cloud-e2e.xml: the results cloud-e2e had before the signal were dropped".to_owned());
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    env.assert_nothing_left();
}

/// Whether a process with exactly this command line (NUL-separated) runs.
fn process_running(cmdline: &[u8]) -> bool {
    let entries = std::fs::read_dir("/proc").unwrap();
    entries.flatten().any(|e| std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == cmdline))
}

#[test]
fn bad_input_is_refused_before_anything_starts() {
    let env = Env::new();
    let line = error_line(&env.harness(&["--provider", "nope"]).output().unwrap());
    assert!(line.contains("unknown provider \"nope\"") && line.contains("local"), "{line}");
    let line = error_line(&env.harness(&["--provider", "fixture", "--kubernetes", "1.20"]).output().unwrap());
    assert!(line.contains("has no Kubernetes \"1.20\"") && line.contains("latest-1.37"), "{line}");
    // A release tag outside the matrix is asked of the Go module proxy, which serves no v1.99.0.
    let line = error_line(&env.harness(&["--provider", "fixture", "--kubernetes", "v1.99.0"]).output().unwrap());
    assert!(line.contains("does not serve k8s.io/kubernetes v1.99.0"), "{line}");
    let line = error_line(&env.harness(&["--provider", "fixture", "--kubernetes", "latest-1.99"]).output().unwrap());
    assert!(line.contains("latest-1.99: the Go module proxy serves no such release"), "{line}");
    let line = error_line(&env.harness(&["--provider", "fixture", "--suites", "nope"]).output().unwrap());
    assert!(line.contains("unknown suite \"nope\""), "{line}");
    // Certification runs publish as a job of their own: nothing else may run in them.
    let line =
        error_line(&env.harness(&["--provider", "fixture", "--suites", "certified-conformance"]).output().unwrap());
    assert!(line.contains("provider fixture has no `certification:` block"), "{line}");
    let args = ["--provider", "local-real", "--suites", "smoke,certified-conformance"];
    let line = error_line(&env.harness(&args).output().unwrap());
    assert!(
        line.contains("suite `certified-conformance` runs alone")
            && line.contains("ci-cloud-provider-local-real-certified-conformance-k8s-1.37")
            && line.contains("(smoke)"),
        "{line}"
    );
    assert!(!env.root.join("_artifacts/started.json").exists(), "a build was started");

    let bad_yaml = env.root.join("bad.yaml");
    std::fs::write(&bad_yaml, "providers: [\n").unwrap();
    let mut cmd = env.bare();
    cmd.arg("--config").arg(&bad_yaml);
    let line = error_line(&cmd.output().unwrap());
    assert!(line.contains(&bad_yaml.display().to_string()), "{line}");

    // A real-cloud provider whose deployer (kubetest2-kops) is not installed here.
    let aws = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples/providers.aws.yaml");
    let mut cmd = env.bare();
    cmd.arg("--config").arg(&aws).arg("--artifacts").arg(env.root.join("aws")).args(["--provider", "aws"]);
    cmd.env("PATH", "/usr/bin:/bin");
    let line = error_line(&cmd.output().unwrap());
    assert!(line.contains("kubetest2-kops not found on PATH") && line.contains("go install"), "{line}");
    assert!(!env.root.join("aws/started.json").exists(), "a build was started");

    let unwritable = Path::new("/proc/harness-artifacts");
    let mut cmd = env.bare();
    cmd.arg("--config").arg(&env.config).arg("--artifacts").arg(unwritable).args(["--provider", "fixture"]);
    let line = error_line(&cmd.output().unwrap());
    assert!(line.contains("/proc/harness-artifacts: cannot write the run's artifacts there"), "{line}");
    assert!(!env.root.join("state/clusters").exists(), "a cluster was started");
}

#[test]
fn the_matrix_runs_each_kubernetes_version_on_its_own_cluster() {
    let env = Env::new();
    let mut cmd = env.command("matrix");
    cmd.arg("--config").arg(&env.config).arg("--artifacts").arg(env.artifacts());
    let output = cmd.args(["--provider", "fixture", "--parallel", "2"]).output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    for (job, version) in
        [("ci-cloud-provider-fixture-k8s-1.37", "v1.37.1"), ("ci-cloud-provider-fixture-k8s-1.36", "v1.36.4")]
    {
        let finished = env.artifacts().join(job).join("finished.json");
        let finished: serde_json::Value = serde_json::from_slice(&std::fs::read(&finished).unwrap()).unwrap();
        assert_eq!(finished["metadata"]["kubernetes-version"], version, "{job}");
        assert_eq!(finished["result"], "SUCCESS", "{job}");
        let published = env.root.join("data/results/logs").join(job);
        let builds: Vec<_> = std::fs::read_dir(&published).unwrap().flatten().filter(|e| e.path().is_dir()).collect();
        assert_eq!(builds.len(), 1, "{}", published.display());
    }
    env.assert_nothing_left();
}

/// The cases of `artifacts/junit_cloud-e2e.xml` by status: (passed, failed with message, skipped).
fn cloud_e2e_results(env: &Env) -> (Vec<String>, Vec<(String, String)>, Vec<String>) {
    let file = env.artifacts().join("artifacts/junit_cloud-e2e.xml");
    let report = junit::read_file(&file, &ReadOptions::default()).unwrap();
    let (mut passed, mut failed, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
    for (suite, case) in report.cases() {
        assert_eq!(suite.name, "cloud-e2e");
        match case.status() {
            Status::Passed => passed.push(case.name.clone()),
            Status::Skipped => skipped.push(case.name.clone()),
            _ => failed.push((case.name.clone(), case.failure().and_then(|f| f.message.clone()).unwrap_or_default())),
        }
    }
    (passed, failed, skipped)
}

/// The skipped cases of `artifacts/junit_cloud-e2e.xml` that are not the data-path tests (and the
/// health-check one) skipped because the nodes are kwok's (they need pods that run): with their
/// messages.
fn unexpected_skips(env: &Env) -> Vec<(String, String)> {
    let file = env.artifacts().join("artifacts/junit_cloud-e2e.xml");
    let report = junit::read_file(&file, &ReadOptions::default()).unwrap();
    report
        .cases()
        .filter(|(_, case)| case.status() == Status::Skipped)
        .map(|(_, case)| {
            let message = case.attempts.iter().find_map(|a| a.detail.as_ref()?.message.clone()).unwrap_or_default();
            (case.name.clone(), message)
        })
        .filter(|(name, message)| {
            let needs_pods =
                name.contains("[Feature:LoadBalancerDataPath]") || name.contains("[Feature:LoadBalancerHealthChecks]");
            !(needs_pods && message.contains("simulated by kwok"))
        })
        .collect()
}

#[test]
fn cloud_e2e_passes_every_test_against_the_reference_ccm_and_skips_none() {
    // On real nodes: the machine hooks stop and start a node's kubelet, containerd and pods.
    let env = Env::new();
    let output =
        env.harness(&["--provider", "local-real", "--suites", "cloud-e2e", "--build-id", "201"]).output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    // Its Down stopped everything in order: the last-resort sweep found nothing to warn of.
    assert_no_warnings(&output);
    let (passed, failed, skipped) = cloud_e2e_results(&env);
    assert!(failed.is_empty(), "{failed:#?}");
    // Every capability and hook is declared; only the data-path tests skip, and only on kwok nodes.
    let unexpected = unexpected_skips(&env);
    assert!(unexpected.is_empty(), "`local` declares every capability and hook: {unexpected:#?}");
    let all = harness::suites::cloud_e2e::tests();
    assert_eq!(passed.len() + skipped.len(), all.len(), "{passed:#?}");
    env.assert_nothing_left();
}

/// cloud-e2e's data-path tests through a load balancer that answers with a DNS name, as AWS's do
/// (issue 54): the reference CCM gives each ingress as `lb-a-b-c-d.lb.cloud-e2e.test`
/// (`--testing-hostname-ingress`), and the suite runs in a mount namespace whose `/etc/hosts` maps
/// those names to the load-balancer pool: every data-path test resolves the name and passes. The
/// same test without the names mapped fails on resolving it, so the ingress was a name.
#[test]
fn the_data_path_tests_pass_through_a_load_balancer_that_answers_with_a_host_name() {
    const DOMAIN: &str = "lb.cloud-e2e.test";
    let env = Env::new();
    let reference = toolchain::workspace::build_reference_ccm().expect("building reference-ccm");
    let ccm = env.root.join("ccm-with-host-names");
    // The same binary serves the local cloud (`reference-ccm local-cloud ...`): the flag is the CCM's.
    let script = format!(
        "#!/bin/sh\ncase \"$1\" in local-cloud) exec '{0}' \"$@\";; esac\nexec '{0}' \"$@\" --testing-hostname-ingress={DOMAIN}\n",
        reference.display()
    );
    std::fs::write(&ccm, script).unwrap();
    set_executable(&ccm);
    let (pool, bits) = local_cluster::real::LB_POOL.split_once('/').unwrap();
    assert_eq!(bits, "24", "the pool's addresses are written out below");
    let prefix = pool.rsplit_once('.').unwrap().0;
    let mut hosts = String::from("127.0.0.1 localhost\n");
    for n in 1..255 {
        let ip = format!("{prefix}.{n}");
        // The CCM's naming: `10.250.1.7` is `lb-10-250-1-7.<domain>`.
        hosts.push_str(&format!("{ip} lb-{}.{DOMAIN}\n", ip.replace('.', "-")));
    }
    let hosts_file = env.root.join("hosts");
    std::fs::write(&hosts_file, hosts).unwrap();

    let mut up = env.command("cluster");
    let up = up.args(["up", "--name", "hostnames", "--node-kind", "real", "--ccm-binary"]).arg(&ccm).output().unwrap();
    if !up.status.success() {
        env.cluster_down("hostnames");
        panic!("{}", text(&up));
    }
    let suite = |mapped: bool, focus: &str, artifacts: &str| {
        let mut command = env.program("unshare");
        command.args(["--mount", "--propagation", "private", "sh", "-c"]);
        match mapped {
            true => command.arg(r#"mount --bind "$0" /etc/hosts && exec "$@""#).arg(&hosts_file),
            false => command.arg(r#"exec "$@""#).arg("sh"),
        };
        command.arg(env!("CARGO_BIN_EXE_harness")).args([
            "suite",
            "cloud-e2e",
            "--cluster",
            "hostnames",
            "--focus",
            focus,
        ]);
        command.arg("--artifacts").arg(env.root.join(artifacts)).output().unwrap()
    };
    let mapped = suite(true, "LoadBalancerDataPath", "mapped");
    let unmapped = suite(false, r"LoadBalancerDataPath\].*TCP", "unmapped");
    let down = env.cluster_down("hostnames");
    assert!(down.status.success(), "{}", text(&down));

    assert!(mapped.status.success(), "{}", text(&mapped));
    let report = junit::read_file(&env.root.join("mapped/junit_cloud-e2e.xml"), &ReadOptions::default()).unwrap();
    let statuses: Vec<(String, Status)> = report.cases().map(|(_, case)| (case.name.clone(), case.status())).collect();
    assert!(statuses.len() >= 3, "{statuses:#?}");
    assert!(statuses.iter().all(|(_, status)| *status == Status::Passed), "{statuses:#?}");
    assert_eq!(unmapped.status.code(), Some(1), "{}", text(&unmapped));
    let said = text(&unmapped);
    assert!(said.contains(&format!(".{DOMAIN}\" does not resolve")), "{said}");
    env.assert_nothing_left();
}

/// A harness copied away from its checkout (into an image, onto another machine) still runs
/// `harness run` with no flags, from an empty directory: it runs the reference CCM beside it, and
/// records the commit it was built from as the CCM's version. The run does not see the checkout
/// (a tmpfs over it, in a mount namespace of its own), as on a machine that has none: a cargo
/// build, or a file read from the sources, would fail it.
#[test]
fn a_harness_copied_out_of_its_checkout_runs_without_being_told_where_its_parts_are() {
    // No --ccm-binary, no --checkout, no provider: only `--suites cloud-e2e`, so the test proves
    // what it is about (the CCM found beside the binary, the commit it was built from) without
    // the 225 conformance tests that only add load beside the other cluster tests.
    let env = Env::new();
    let bin = env.root.join("bin");
    let work = env.root.join("work");
    for dir in [&bin, &work] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let reference = toolchain::workspace::build_reference_ccm().expect("building reference-ccm");
    std::fs::copy(env!("CARGO_BIN_EXE_harness"), bin.join("harness")).unwrap();
    std::fs::copy(&reference, bin.join("reference-ccm")).unwrap();
    let checkout = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let head = Command::new("git").arg("-C").arg(checkout).args(["rev-parse", "HEAD"]).output().unwrap();
    let head = String::from_utf8(head.stdout).unwrap().trim().to_owned();

    let mut cmd = env.program("unshare");
    cmd.args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg(r#"mount -t tmpfs checkout-hidden "$0" && cd "$1" && exec "$2" run --suites cloud-e2e"#)
        .args([checkout, &work, &bin.join("harness")]);
    let output = cmd.output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let finished: serde_json::Value =
        serde_json::from_slice(&std::fs::read(work.join("_artifacts/finished.json")).unwrap()).unwrap();
    assert_eq!(finished["result"], "SUCCESS", "{finished}");
    assert_eq!(finished["metadata"]["provider-version"], head.as_str(), "{finished}");
    // The CCM beside it ran: with the checkout hidden, cargo could have built none.
    assert!(finished["metadata"]["ccm-version"].as_str().is_some_and(|v| !v.is_empty()), "{finished}");
    env.assert_nothing_left();
}

/// Issue 52, item 1: a release the harness embeds no pin of runs with no change to `tools/`: it
/// is pinned from the Go module proxy, built and cached, and recorded as the run's version.
#[test]
#[ignore = "builds a whole Kubernetes release the harness does not embed (12 minutes cold, which a fresh CI machine cannot spare): run by `scripts/test --releases`"]
fn a_release_outside_the_matrix_runs_pinned_from_the_go_module_proxy() {
    const RELEASE: &str = "v1.37.2";
    assert!(
        toolchain::releases().iter().all(|release| release.version != RELEASE),
        "{RELEASE} is embedded now: make this test name a release the proxy serves that tools/kube does not pin"
    );
    let env = Env::new();
    let args = ["--provider", "local-kwok", "--kubernetes", RELEASE, "--suites", "cloud-e2e", "--build-id", "204"];
    let output = env.harness(&args).output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let finished = env.finished();
    assert_eq!(finished["result"], "SUCCESS", "{finished}");
    assert_eq!(finished["metadata"]["kubernetes-version"], RELEASE, "{finished}");
    assert_eq!(finished["metadata"]["job-version"], RELEASE, "{finished}");
    // The job is the matrix's for that minor, so its builds sit beside the pinned patch's.
    let started = std::fs::read_to_string(env.artifacts().join("build-log.txt")).unwrap();
    assert!(started.contains("job ci-cloud-provider-local-kwok-k8s-1.37 build 204"), "{started}");
    // What ran is that release, built here: its API server says so.
    let bin = env.command("toolchain").args(["path", "--kubernetes", RELEASE]).output().unwrap();
    assert!(bin.status.success(), "{}", text(&bin));
    let bin = PathBuf::from(String::from_utf8(bin.stdout).unwrap().trim());
    let version = Command::new(bin.join("kube-apiserver")).arg("--version").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&version.stdout).trim(), format!("Kubernetes {RELEASE}"));
    env.assert_nothing_left();
}

/// Issue 52, item 2: Kubernetes built from a kubernetes/kubernetes checkout at a commit no release
/// names, versioned as upstream versions it, recorded with the commit as Prow records a clone.
#[test]
#[ignore = "builds Kubernetes from a k/k-shaped checkout assembled from Go's module cache (25 minutes cold, which a fresh CI machine cannot spare): run by `scripts/test --releases`"]
fn a_kubernetes_checkout_at_a_commit_after_its_tag_runs_versioned_as_upstream_versions_it() {
    let env = Env::new();
    let (checkout, _) = checkout_fixture(&env, "checkout-fixture.sh");
    // A commit after the tag, made the same on every run so its toolchain is cached once.
    std::fs::write(checkout.join("CHANGELOG/README.md"), "A commit after the fixture's tag.\n").unwrap();
    let git = |args: &[&str]| {
        let output = Command::new("git")
            .args(["-c", "user.name=fixture", "-c", "user.email=fixture@localhost", "-C"])
            .arg(&checkout)
            .args(args)
            .env("GIT_AUTHOR_DATE", "2026-01-02T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "2026-01-02T00:00:00Z")
            .output()
            .unwrap();
        assert!(output.status.success(), "git {args:?}: {}", text(&output));
        String::from_utf8(output.stdout).unwrap().trim().to_owned()
    };
    git(&["commit", "-q", "-am", "a commit after the tag"]);
    let commit = git(&["rev-parse", "HEAD"]);
    let version = format!("v1.37.1-fixture.0.1+{}", &commit[..14]);

    let source = checkout.to_str().unwrap();
    let args =
        ["--provider", "local-kwok", "--kubernetes-source", source, "--suites", "cloud-e2e", "--build-id", "205"];
    let output = env.harness(&args).output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let finished = env.finished();
    assert_eq!(finished["result"], "SUCCESS", "{finished}");
    assert_eq!(finished["metadata"]["kubernetes-version"], version.as_str(), "{finished}");
    assert_eq!(finished["metadata"]["job-version"], version.as_str(), "{finished}");
    assert_eq!(finished["metadata"]["repos"]["kubernetes/kubernetes"], format!("master:{commit}"), "{finished}");
    let log = std::fs::read_to_string(env.artifacts().join("build-log.txt")).unwrap();
    assert!(log.contains("job ci-cloud-provider-local-kwok-k8s-1.37 build 205"), "{log}");

    // Its binaries say what upstream's say at that commit; their cache is the commit's.
    let bin = env.command("toolchain").args(["path", "--kubernetes-source", source]).output().unwrap();
    assert!(bin.status.success(), "{}", text(&bin));
    let bin = PathBuf::from(String::from_utf8(bin.stdout).unwrap().trim());
    assert!(bin.to_string_lossy().contains(&format!("checkout-{commit}")), "{}", bin.display());
    let apiserver = Command::new(bin.join("kube-apiserver")).arg("--version").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&apiserver.stdout).trim(), format!("Kubernetes {version}"));
    let kubectl = Command::new(bin.join("kubectl")).args(["version", "--client", "-o", "json"]).output().unwrap();
    let client: serde_json::Value = serde_json::from_slice(&kubectl.stdout).unwrap();
    let client = &client["clientVersion"];
    assert_eq!(client["gitVersion"], version.as_str(), "{client}");
    assert_eq!(client["gitCommit"], commit.as_str(), "{client}");
    assert_eq!(client["gitTreeState"], "clean", "{client}");
    assert_eq!((client["major"].as_str(), client["minor"].as_str()), (Some("1"), Some("37+")), "{client}");
    assert_eq!(client["buildDate"], "2026-01-02T00:00:00Z", "{client}");
    env.assert_nothing_left();
}

/// Issue 52 end to end (items 4, 5 and 7): the k/k-shaped checkout with three commits on its tag
/// (`tools/kube/fixture-commits.sh`: a harmless one; a kubelet change that stops tainting nodes for
/// the CCM, which breaks every provider; a `k8s.io/cloud-provider` rename, which breaks the compile
/// of a Go CCM). `harness matrix` runs the four commits × `local` (the reference CCM) and
/// `local-upstream` (upstream's CCM built against the checkout's staging modules), each published
/// and indexed; the LKG over the checkout's git history names the kubelet commit as the culprit of
/// both; `harness bisect --side kubernetes --kubernetes-source` finds it.
#[test]
#[ignore = "builds Kubernetes at four commits of a k/k-shaped checkout and runs 10 clusters of real nodes (an hour cold): run by `scripts/test --releases`"]
fn a_kubernetes_commit_that_breaks_providers_is_their_lkg_culprit_and_the_bisections_answer() {
    let env = Env::new();
    let (checkout, tag) = checkout_fixture(&env, "checkout-fixture.sh");
    let (_, listed) = checkout_fixture(&env, "fixture-commits.sh");
    let tag = tag.trim().to_owned();
    let commits: Vec<String> = std::iter::once(tag)
        .chain(listed.lines().map(|line| line.split_whitespace().next().unwrap().to_owned()))
        .collect();
    let [c0, c1, c2, c3] = &commits[..] else { panic!("four commits: {listed}") };
    let config = checkout_providers_yaml(&env.root);
    let source = checkout.to_str().unwrap();
    let short = |commit: &str| commit[..12].to_owned();

    let mut matrix = env.command("matrix");
    matrix.arg("--config").arg(&config).arg("--artifacts").arg(env.root.join("_matrix"));
    matrix.args(["--provider", "local", "--provider", "local-upstream", "--suites", "cloud-e2e"]);
    matrix.args(["--kubernetes-source", source, "--kubernetes-commit", &commits.join(",")]);
    let output = matrix.output().unwrap();
    assert_eq!(output.status.code(), Some(1), "cells fail: {}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    for (commit, passes) in [(c0, true), (c1, true), (c2, false), (c3, false)] {
        for provider in ["local", "local-upstream"] {
            let said = format!(
                "== ci-cloud-provider-{provider}-k8s-1.37-{}: {}",
                short(commit),
                match passes {
                    true => "PASSED",
                    false => "FAILED",
                }
            );
            assert!(stdout.contains(&said), "{said}: {}", text(&output));
        }
    }
    // At the rename, upstream's CCM fails its Build step with the compiler's message.
    let cell = env.root.join(format!("_matrix/ci-cloud-provider-local-upstream-k8s-1.37-{}", short(c3)));
    let junit = std::fs::read_to_string(cell.join("artifacts/junit_runner.xml")).unwrap();
    assert!(junit.contains("undefined: app.DefaultInitFuncConstructors"), "{junit}");
    let finished: serde_json::Value =
        serde_json::from_slice(&std::fs::read(cell.join("finished.json")).unwrap()).unwrap();
    let version = format!("v1.37.1-fixture.0.3+{}", &c3[..14]);
    assert_eq!(finished["metadata"]["kubernetes-version"], version.as_str(), "{finished}");
    assert_eq!(finished["metadata"]["repos"]["kubernetes/kubernetes"], c3.as_str(), "a detached worktree: {finished}");
    // At the kubelet change, the reference CCM's cloud-e2e fails: no node was initialized.
    let cell = env.root.join(format!("_matrix/ci-cloud-provider-local-k8s-1.37-{}", short(c2)));
    let junit = std::fs::read_to_string(cell.join("artifacts/junit_cloud-e2e.xml")).unwrap();
    assert!(junit.contains("<failure"), "{junit}");

    // The LKG, the Kubernetes side ordered by the checkout's history: the kubelet commit alone.
    let history = format!("git:{source}");
    for provider in ["local", "local-upstream"] {
        let mut lkg = env.command("lkg");
        lkg.args(["show", provider, "--kubernetes-history", &history, "--output", "json", "--config"]).arg(&config);
        let output = lkg.output().unwrap();
        let report: serde_json::Value =
            serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&output)));
        let range = &report["culprit"]["kubernetes"];
        assert_eq!(range["commits"], serde_json::json!([c2]), "{provider}: {report:#}");
        assert_eq!(
            (&range["last_good"], &range["first_bad"]),
            (&c1.as_str().into(), &c2.as_str().into()),
            "{report:#}"
        );
    }

    // Bisection over the checkout's commits: the same commit, with its subject.
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut bisect = env.command("bisect");
    bisect.arg("--config").arg(&config).arg("--artifacts").arg(env.root.join("_bisect")).arg("--repo").arg(&repo);
    bisect.args(["--provider", "local-upstream", "--side", "kubernetes", "--kubernetes-source", source]);
    bisect.args(["--good", c0, "--bad", c3, "--output", "json"]);
    let output = bisect.output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: serde_json::Value = serde_json::from_str(&stdout[stdout.find("\n{").map_or(0, |at| at + 1)..])
        .unwrap_or_else(|e| panic!("{e}: {}", text(&output)));
    assert_eq!(report["first_bad"]["commit"], c2.as_str(), "{report:#}");
    assert_eq!(
        report["first_bad"]["subject"],
        "kubelet: add the cloud provider's taint with the other registration taints"
    );
    assert_eq!(report["answer"]["last_good"], c1.as_str(), "{report:#}");
    assert_eq!(report["commits"], 3, "{report:#}");
    // Nothing of the checkout was touched, and no worktree is left.
    let git = Command::new("git").arg("-C").arg(&checkout).args(["worktree", "list"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&git.stdout).lines().count(), 1, "{}", text(&git));
    env.assert_nothing_left();
}

/// `tools/kube/<script> <test root>/kubernetes`: the checkout and what the script printed.
fn checkout_fixture(env: &Env, script: &str) -> (PathBuf, String) {
    let checkout = env.root.join("kubernetes");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/kube").join(script);
    let made = Command::new(script).arg(&checkout).output().unwrap();
    assert!(made.status.success(), "{}", text(&made));
    (checkout, String::from_utf8(made.stdout).unwrap())
}

/// `local` (the reference CCM) and `local-upstream`, on real nodes as bundled, without the
/// certification job and the load-balancer one: one cell each per minor.
fn checkout_providers_yaml(dir: &Path) -> PathBuf {
    let local = base_entry(config::bundled_entry("local").expect("the bundled file has `local`"));
    let (local, _) = local.split_once("\n    certification:\n").expect("local certifies");
    let upstream = base_entry(config::bundled_entry("local-upstream").expect("the bundled file has `local-upstream`"));
    assert!(!upstream.contains("\n    certification:\n") && local.contains("node_kind: real"));
    let path = dir.join("checkout-providers.yaml");
    let text =
        format!("testgrid:\n  gcs_bucket: test-logs\nproviders:\n{}\n{}\n", local.trim_end(), upstream.trim_end());
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn cloud_e2e_passes_every_test_against_upstreams_controllers_on_the_local_cloud() {
    // `local-upstream`: k8s.io/cloud-provider's own CCM (tools/local-upstream-ccm), built with the
    // toolchain, on the same local cloud and nodes as the reference CCM.
    let env = Env::new();
    let output =
        env.harness(&["--provider", "local-upstream", "--suites", "cloud-e2e", "--build-id", "203"]).output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let (passed, failed, skipped) = cloud_e2e_results(&env);
    assert!(failed.is_empty(), "{failed:#?}");
    let unexpected = unexpected_skips(&env);
    assert!(unexpected.is_empty(), "`local-upstream` declares every capability and hook: {unexpected:#?}");
    assert_eq!(passed.len() + skipped.len(), harness::suites::cloud_e2e::tests().len(), "{passed:#?}");
    let finished = env.finished();
    assert_eq!(finished["metadata"]["provider"], "local-upstream");
    // The CCM that ran is upstream's, stamped with the run's Kubernetes release.
    let default = toolchain::default_release().version;
    assert_eq!(finished["metadata"]["kubernetes-version"], default);
    assert_eq!(finished["metadata"]["ccm-version"], format!("Kubernetes {default}"));
    // Upstream's controller manager started its four controllers (its log, dumped with the cluster's).
    let ccm_log = std::fs::read_to_string(find_file(&env.artifacts(), "local-upstream-ccm.log")).unwrap();
    for controller in
        ["cloud-node-controller", "cloud-node-lifecycle-controller", "service-lb-controller", "node-route-controller"]
    {
        assert!(ccm_log.contains(&format!("Started \"{controller}\"")), "{controller}: {ccm_log}");
    }
    env.assert_nothing_left();
}

/// The first file named `name` under `dir`.
fn find_file(dir: &Path, name: &str) -> PathBuf {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if entry.file_name() == name {
                return path;
            }
        }
    }
    panic!("no {name} under {}", dir.display());
}

#[test]
fn cloud_e2e_fails_exactly_the_tests_of_the_bugs_a_ccm_has() {
    let env = Env::new();
    let output = env.harness(&["--provider", "buggy", "--build-id", "202"]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let (passed, failed, _) = cloud_e2e_results(&env);
    // `buggy` runs on kwok nodes: only the data-path tests skip there, saying why.
    let unexpected = unexpected_skips(&env);
    assert!(unexpected.is_empty(), "{unexpected:#?}");
    let failed_names: Vec<&str> = failed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        failed_names,
        [
            "[cloud-e2e] [Feature:LoadBalancer] Service of type LoadBalancer should have its load balancer deleted and its finalizer removed when deleted",
            "[cloud-e2e] [Feature:LoadBalancer] Service changed from LoadBalancer to ClusterIP should have its load balancer deleted",
            "[cloud-e2e] [Feature:NodeShutdown] Node whose instance is shut down should get the shutdown taint and lose it once the instance is started again",
        ],
        "passed: {passed:#?}"
    );
    // Each message says what was awaited and what was seen instead.
    let [(_, deleted), (_, to_cluster_ip), (_, shutdown)] = &failed[..] else { unreachable!() };
    for leak in [deleted, to_cluster_ip] {
        assert!(
            leak.starts_with(
                "timed out after 1m waiting for the cloud to stop listing the load balancer of service cloud-e2e-"
            ),
            "{leak}"
        );
        assert!(leak.contains("last seen: the cloud still lists {"), "{leak}");
    }
    assert!(
        shutdown.contains("waiting for node ")
            && shutdown.contains("to be Ready without node.cloudprovider.kubernetes.io/shutdown"),
        "{shutdown}"
    );
    assert!(
        shutdown.contains("last seen: Ready=True, taints [\"node.cloudprovider.kubernetes.io/shutdown:NoSchedule\"]"),
        "{shutdown}"
    );
    let finished = env.finished();
    assert_eq!((finished["passed"].as_bool(), finished["result"].as_str()), (Some(false), Some("FAILURE")));
    env.assert_nothing_left();
}

#[test]
fn a_missing_or_hanging_hook_fails_only_the_test_that_calls_it() {
    let env = Env::new();
    let bundled = config::BUNDLED;
    let local_entry = config::bundled_entry("local").unwrap();
    let hooked = local_entry
        .replacen("- name: local", "- name: hooked", 1)
        .replacen(
            r#"command: ["{harness}", cluster, instance, --name, "{cluster}", shutdown, "{node}"]"#,
            r#"command: [sh, -c, "sleep 611", "{node}"]"#,
            1,
        )
        .replacen(
            r#"command: ["{harness}", cluster, instance, --name, "{cluster}", terminate, "{node}"]"#,
            r#"command: [/nonexistent/terminate-instance, "{node}"]"#,
            1,
        )
        .replacen("timeout: 30s", "timeout: 2s", 2);
    assert!(hooked.contains("sleep 611") && hooked.contains("/nonexistent/"), "the hook edits applied");
    let config = env.root.join("hooked.yaml");
    std::fs::write(&config, format!("{bundled}\n{}\n", hooked.trim_end())).unwrap();

    let mut up = env.command("cluster");
    let up =
        up.args(["up", "--name", "hooks", "--nodes", "2", "--cloud", "local", "--node-kind", "kwok"]).output().unwrap();
    assert!(up.status.success(), "{}", text(&up));
    let mut suite = env.command("suite");
    suite.args([
        "cloud-e2e",
        "--provider",
        "hooked",
        "--cluster",
        "hooks",
        "--focus",
        r"NodeShutdown|NodeDeletion|Feature:CCM\] The CCM should answer",
    ]);
    let started = Instant::now();
    let output =
        suite.arg("--config").arg(&config).arg("--artifacts").arg(env.artifacts().join("artifacts")).output().unwrap();
    let took = started.elapsed();
    let mut down = env.command("cluster");
    assert!(down.args(["down", "--name", "hooks"]).output().unwrap().status.success());

    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(env.artifacts().join("artifacts/junit_cloud-e2e.xml").is_file(), "{}", text(&output));
    // As kubetest2's exec tester would leave it, the tested server's version as `job-version`.
    let metadata: serde_json::Value =
        serde_json::from_slice(&std::fs::read(env.artifacts().join("artifacts/metadata.json")).unwrap()).unwrap();
    assert_eq!(metadata["job-version"], "v1.37.1", "{}", text(&output));
    let (passed, failed, skipped) = cloud_e2e_results(&env);
    assert_eq!(passed, ["[cloud-e2e] [Feature:CCM] The CCM should answer /healthz with 200"], "{failed:#?}");
    assert!(skipped.is_empty(), "{skipped:#?}");
    let messages: Vec<&str> = failed.iter().map(|(_, m)| m.as_str()).collect();
    assert_eq!(messages.len(), 2, "{failed:#?}");
    assert!(
        messages[0].starts_with(
            "hook shutdown_instance (`sh -c sleep 611 hooks-worker-1`) did not finish within 2s; it was killed"
        ),
        "{}",
        messages[0]
    );
    assert_eq!(
        messages[1],
        "hook terminate_instance: cannot start `/nonexistent/terminate-instance`: not found (no such file, and not on PATH)"
    );
    assert!(took < Duration::from_secs(60), "the hang was bounded by the hook's timeout: {took:?}");
    env.assert_nothing_left();
    // A duration of its own: pods of a conformance run beside this test sleep 600.
    assert!(!process_running(b"sleep\x00611\x00"), "the hanging hook was killed");
}

/// Two runs at once on one machine (issue 56). Started together on one artifacts directory and
/// one cluster name, one runs and passes and the other is refused at once, naming the first's
/// PID, round after round, and the first's build is whole; on directories of their own but one
/// cluster name, the second is refused naming the cluster; with both their own, both pass.
#[test]
fn two_runs_at_once_never_share_a_build_directory_or_a_cluster() {
    let env = Env::new();
    let start = |artifacts: &Path, cluster: &str, build: u32| {
        let mut cmd = env.bare();
        cmd.args(["--build-id", &build.to_string(), "--cluster-name", cluster]);
        cmd.arg("--config").arg(&env.config).arg("--artifacts").arg(artifacts);
        cmd.args(["--provider", "fixture", "--suites", "pause"]);
        // Into files, not pipes: both are waited for at once, neither read until both end.
        let (out, err) = (env.root.join(format!("{build}.out")), env.root.join(format!("{build}.err")));
        cmd.stdout(std::fs::File::create(&out).unwrap()).stderr(std::fs::File::create(&err).unwrap());
        (build, cmd.spawn().unwrap(), out, err)
    };
    // Each run's output and how long it took, the one that passed first.
    type Started = (u32, std::process::Child, PathBuf, PathBuf);
    let both = |a: Started, b: Started| {
        let begun = Instant::now();
        let mut runs = [a, b].map(|run| (run, None));
        while runs.iter().any(|(_, took)| took.is_none()) {
            for ((_, child, _, _), took) in &mut runs {
                if took.is_none() && child.try_wait().unwrap().is_some() {
                    *took = Some(begun.elapsed());
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let [a, b] = runs.map(|((build, mut child, out, err), took)| {
            let status = child.wait().unwrap();
            let output = Output { status, stdout: std::fs::read(out).unwrap(), stderr: std::fs::read(err).unwrap() };
            (build, output, took.unwrap())
        });
        match a.1.status.success() {
            true => (a, b),
            false => (b, a),
        }
    };
    let mut refused_in = Duration::ZERO;
    for round in 0..4 {
        let (ran, refused) = both(
            start(&env.artifacts(), "harness-run", 400 + 2 * round),
            start(&env.artifacts(), "harness-run", 401 + 2 * round),
        );
        assert!(ran.1.status.success(), "round {round}: {}", text(&ran.1));
        assert_eq!(refused.1.status.code(), Some(1), "round {round}: {}", text(&refused.1));
        let line = error_line(&refused.1);
        let expected = format!("{} is in use by another harness run, pid ", env.artifacts().display());
        assert!(line.contains(&expected), "round {round}: {line}");
        assert!(line.contains(&format!("(harness run --build-id {} ", ran.0)), "names the run that has it: {line}");
        assert_eq!(env.finished_build_id(), ran.0.to_string(), "round {round}: the directory holds the build that ran");
        assert_eq!(env.finished()["result"], "SUCCESS");
        refused_in = refused_in.max(refused.2);
    }

    let (first, second) = (env.root.join("first"), env.root.join("second"));
    let (ran, refused) = both(start(&first, "shared-name", 500), start(&second, "shared-name", 501));
    assert!(ran.1.status.success(), "{}", text(&ran.1));
    let line = error_line(&refused.1);
    assert!(line.contains("cluster 'shared-name' is in use by another harness, pid "), "{line}");
    assert!(line.contains(&format!("--build-id {}", ran.0)) && line.contains("--cluster-name"), "{line}");
    let refused_dir = if ran.0 == 500 { &second } else { &first };
    assert!(!refused_dir.join("started.json").exists(), "the refused run started a build");

    let (a, b) = both(start(&first, "one", 502), start(&second, "two", 503));
    assert!(a.1.status.success() && b.1.status.success(), "{}\n{}", text(&a.1), text(&b.1));
    env.assert_nothing_left();
    let verdict = "the second refused at once (exit 1) naming the first's pid and command; the first passes";
    chaos_row(
        "a second harness run at once, same --artifacts and cluster (4 rounds)",
        verdict,
        refused_in,
        "the first's build, whole",
    );
    let verdict = "both pass, on clusters, ports and state of their own";
    chaos_row(
        "a second harness run at once, own --artifacts and --cluster-name",
        verdict,
        Duration::ZERO,
        "both builds",
    );
}

/// SIGKILL of the harness while it brings its cluster up (issue 56): nothing can stop what it had
/// started then. The next run of the same cluster name finds that cluster's owner gone, clears
/// what it left (saying so) and runs to a pass, and nothing of either run is left.
#[test]
fn a_run_killed_during_up_leaves_a_cluster_that_the_next_run_clears() {
    let env = Env::new();
    let mut first = env.harness(&["--provider", "fixture", "--build-id", "21"]);
    let mut first = first.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let state = env.root.join("state/clusters/harness-run/cluster.json");
    let started = Instant::now();
    while !std::fs::read_to_string(&state).is_ok_and(|s| s.contains("\"kube-apiserver\"")) {
        assert!(started.elapsed() < Duration::from_secs(300), "the first run never started its control plane");
        std::thread::sleep(Duration::from_millis(50));
    }
    kill(Pid::from_raw(first.id() as i32), Signal::SIGKILL).unwrap();
    first.wait().unwrap();
    let left = find_by_marker(&env.root.join("state"));
    assert!(!left.is_empty(), "a SIGKILLed harness left nothing to clear: the test proves nothing");

    // Its build directory keeps its unfinished build: the next run takes another.
    let mut second = env.bare();
    second.arg("--config").arg(&env.config).arg("--artifacts").arg(env.root.join("second"));
    let begun = Instant::now();
    let second = second.args(["--provider", "fixture", "--build-id", "22"]).output().unwrap();
    let took = begun.elapsed();
    assert!(second.status.success(), "{}", text(&second));
    assert!(
        text(&second).contains("was left running by the harness that owned it (pid ")
            && text(&second).contains("which is gone (killed?): stopping what it left"),
        "{}",
        text(&second)
    );
    let still: Vec<i32> =
        left.iter().copied().filter(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists()).collect();
    assert!(still.is_empty(), "the killed run's processes {still:?} outlived the next run");
    env.assert_nothing_left();
    let verdict = "the next run (its whole time here) clears what it left, naming the dead owner, and passes";
    chaos_row("the harness SIGKILLed during Up, then the next run", verdict, took, "the killed run's started.json");
}

#[test]
fn a_run_whose_cluster_name_is_taken_leaves_that_cluster_running() {
    let env = Env::new();
    let mut up = env.command("cluster");
    let up = up.args(["up", "--name", "taken", "--nodes", "1", "--node-kind", "kwok"]).output().unwrap();
    assert!(up.status.success(), "{}", text(&up));

    let output =
        env.harness(&["--provider", "fixture", "--cluster-name", "taken", "--build-id", "301"]).output().unwrap();
    let mut list = env.command("cluster");
    let listed = String::from_utf8_lossy(&list.arg("list").output().unwrap().stdout).into_owned();
    let mut down = env.command("cluster");
    assert!(down.args(["down", "--name", "taken"]).output().unwrap().status.success());

    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let steps = env.runner_steps();
    assert_eq!(steps[1], ("Up".to_owned(), Status::Failed), "{steps:?}");
    assert!(error_line(&output).contains("cluster 'taken' already exists and is running"), "{}", text(&output));
    // The other cluster was not this run's to bring down.
    assert!(listed.lines().any(|l| l.starts_with("taken\trunning")), "{listed}");
    env.assert_nothing_left();
}

/// `harness lkg ARGS --config <fixture> --output json` as JSON.
fn lkg_json(env: &Env, args: &[&str]) -> (bool, serde_json::Value) {
    let mut cmd = env.command("lkg");
    cmd.args(args).arg("--config").arg(&env.config).args(["--output", "json"]);
    let output = cmd.output().unwrap();
    let json = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&output)));
    (output.status.success(), json)
}

/// `harness serve --listen 127.0.0.1:0 --config <fixture> ARGS`, and the address it printed.
fn start_serve(env: &Env, args: &[&str]) -> (std::process::Child, String) {
    let mut serve = env.command("serve");
    serve.args(["--listen", "127.0.0.1:0", "--config"]).arg(&env.config).args(args);
    let mut server = serve.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut first_line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(server.stdout.take().unwrap()), &mut first_line).unwrap();
    let address = first_line.trim().strip_prefix("serving on http://").unwrap_or_else(|| panic!("{first_line:?}"));
    testing::central::wait_for_lkg(address);
    (server, address.to_owned())
}

/// An HTTP/1.0 GET on 127.0.0.1: (status, body).
fn http_get(address: &str, path: &str) -> (u16, String) {
    http_get_accepting(address, path, "*/*")
}

fn http_get_accepting(address: &str, path: &str, accept: &str) -> (u16, String) {
    let (status, _, body) = http_get_with(address, path, &[("Accept", accept)]);
    (status, String::from_utf8(body).unwrap())
}

/// An HTTP/1.0 GET with these headers: (status, response head, body bytes).
fn http_get_with(address: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String, Vec<u8>) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n").unwrap();
    for (name, value) in headers {
        write!(stream, "{name}: {value}\r\n").unwrap();
    }
    write!(stream, "\r\n").unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8(response[..split].to_vec()).unwrap();
    (head.split(' ').nth(1).unwrap().parse().unwrap(), head, response[split + 4..].to_vec())
}

/// A response header's value (names compared case-insensitively).
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

/// Two real `harness run`s of the fixture provider `gated`: passing on Kubernetes 1.36, failing
/// (its `gate` test) on 1.37. Returns the provider version both ran.
fn two_gated_runs(env: &Env) -> String {
    for (kubernetes, passes) in [("1.36", true), ("1.37", false)] {
        let output = env.harness(&["--provider", "gated", "--kubernetes", kubernetes]).output().unwrap();
        assert_eq!(output.status.success(), passes, "Kubernetes {kubernetes}: {}", text(&output));
    }
    env.finished()["metadata"]["provider-version"].as_str().unwrap().to_owned()
}

/// The job of `two_gated_runs` that fails.
const FAILING_JOB: &str = "ci-cloud-provider-gated-k8s-1.37";

#[test]
fn two_runs_one_failing_on_the_newer_kubernetes_give_its_lkg_and_culprit_through_the_cli_and_the_api() {
    let env = Env::new();
    let provider_version = two_gated_runs(&env);

    let (ok, report) = lkg_json(&env, &["show", "gated"]);
    assert!(ok, "{report}");
    assert_eq!(report["lkg"]["kubernetes_commit"], "v1.36.4", "{report:#}");
    assert_eq!(report["lkg"]["provider_commit"], provider_version.as_str());
    assert_eq!(
        (&report["newest"]["kubernetes_commit"], &report["newest"]["verdict"]),
        (&"v1.37.1".into(), &"bad".into())
    );
    let range = &report["culprit"]["kubernetes"];
    assert_eq!((&range["last_good"], &range["first_bad"]), (&"v1.36.4".into(), &"v1.37.1".into()), "{report:#}");
    assert_eq!(range["commits"], serde_json::json!(["v1.37.1"]));
    let evidence = report["lkg"]["evidence"][0].as_str().unwrap();
    assert!(report["builds"][evidence]["artifacts_url"].as_str().unwrap().starts_with("file://"), "{report:#}");

    let (good, check) = lkg_json(
        &env,
        &["check", "--provider", "gated", "--provider-version", &provider_version, "--kubernetes", "v1.36.4"],
    );
    assert!(good && check["verdict"] == "good", "{check}");
    let (good, check) = lkg_json(
        &env,
        &["check", "--provider", "gated", "--provider-version", &provider_version, "--kubernetes", "v1.37.1"],
    );
    assert!(!good && check["verdict"] == "bad", "a bad pair exits non-zero: {check}");

    let mut unknown = env.command("lkg");
    unknown.args(["show", "--provider-history", "nosuch=tested", "--config"]).arg(&env.config);
    let output = unknown.output().unwrap();
    assert!(!output.status.success());
    assert!(error_line(&output).contains(r#"--provider-history names provider "nosuch""#), "{}", text(&output));

    let output =
        env.command("lkg").args(["export", "--provider", "gated", "--config"]).arg(&env.config).output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    // Exactly one line, the version; the evidence goes to stderr when the version goes to stdout.
    assert_eq!(String::from_utf8(output.stdout).unwrap(), "v1.36.4\n");
    let evidence = String::from_utf8(output.stderr).unwrap();
    assert!(evidence.contains(&format!("with provider commit {provider_version}")), "{evidence}");

    // The same answers over HTTP.
    let (mut server, address) = start_serve(&env, &[]);
    let (status, body) = http_get(&address, "/api/v1/lkg");
    let global: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!((status, &global["providers"]["gated"]["kubernetes_commit"]), (200, &"v1.36.4".into()), "{body}");
    let (status, body) = http_get(&address, "/api/v1/culprits/gated");
    let culprits: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!((status, &culprits["culprit"]["kubernetes"]["first_bad"]), (200, &"v1.37.1".into()), "{body}");
    let (status, body) = http_get(
        &address,
        &format!("/api/v1/lkg/check?provider=gated&provider_version={provider_version}&kubernetes=v1.37.1"),
    );
    assert!(status == 200 && body.contains(r#""verdict":"bad""#), "{status} {body}");
    let (status, body) = http_get(&address, "/api/v1/lkg/nosuch");
    assert!(status == 404 && body.contains("unknown provider"), "{status} {body}");
    let (status, body) = http_get(&address, "/api/v1/lkg/check?provider=gated");
    assert_eq!(status, 400, "{body}");
    assert_eq!(http_get(&address, "/healthz"), (200, "ok".to_owned()));
    let (_, metrics) = http_get(&address, "/metrics");
    assert!(metrics.contains("harness_lkg_builds 2"), "{metrics}");

    // The dashboard: the matrix and job list, the failing job's grid (HTML and JSON), a filter,
    // build pages with the log's tail, the LKG page, bad input.
    let failing_job = FAILING_JOB;
    let (status, home) = http_get(&address, "/");
    assert!(status == 200 && home.contains(&format!("href=\"/job/{failing_job}\"")), "{status} {home}");
    assert!(home.contains(r#"<th scope="col">1.37</th><th scope="col">1.36</th>"#), "{home}");
    assert!(home.contains(r#"title="gated on 1.37: latest build"#) && home.contains("0% of 1"), "{home}");
    assert!(home.contains(r#"title="gated on 1.36: latest build"#) && home.contains("100% of 1"), "{home}");
    // The fixture's other providers never ran, so no commit is good with all of them: the home
    // page names them (not `gated`, which has a good run) and says how to run them.
    assert!(home.contains("No version set yet") && home.contains("no good run"), "{home}");
    assert!(home.contains("harness run --provider") && !home.contains("<strong>gated"), "{home}");
    let (status, lkg_page) = http_get(&address, "/lkg");
    assert!(
        status == 200
            && lkg_page.contains(r#"href="https://github.com/kubernetes/kubernetes/compare/v1.36.4...v1.37.1""#),
        "{lkg_page}"
    );
    assert!(lkg_page.contains(r#"aria-label="gated: 2 pairs tested over 2 Kubernetes commits, 1 good""#), "{lkg_page}");
    let (status, grid) = http_get(&address, &format!("/job/{failing_job}"));
    assert_eq!(status, 200, "{grid}");
    let build = env.finished_build_id();
    let gate_row = grid
        .split("<tr>")
        .find(|row| row.contains(r#"title="gate">gate</a>"#))
        .unwrap_or_else(|| panic!("no gate row: {grid}"));
    assert!(gate_row.contains("<td class=\"fail\">fail</td>"), "{gate_row}");
    assert!(grid.contains(&format!("<a href=\"/job/{failing_job}/build/{build}\">{build}</a>")), "{grid}");
    assert!(grid.contains("failing since"), "{grid}");
    let (_, json) =
        http_get_accepting(&address, &format!("/job/{failing_job}?status=fail&test=^ga"), "application/json");
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["rows"].as_array().unwrap().len(), 1, "only the failing test named ^ga: {json:#}");
    assert_eq!(
        (&json["rows"][0]["test"], &json["columns"][0]["kubernetes_version"]),
        (&"gate".into(), &"v1.37.1".into())
    );
    let (status, page) = http_get(&address, &format!("/job/{failing_job}/build/{build}"));
    assert!(status == 200 && page.contains(r#"<li class="fail">Test fail</li>"#), "{status} {page}");
    assert!(page.contains("<summary>gate</summary>") && page.contains("<pre>exit status 1</pre>"), "{page}");
    let log_link = format!("/job/{failing_job}/build/{build}/file/build-log.txt");
    assert!(page.contains(&format!("<a href=\"{log_link}\">build-log.txt</a>")), "{page}");
    let (status, log) = http_get(&address, &log_link);
    assert!(status == 200 && page.contains(log.lines().last().unwrap()), "the page shows the log's last line: {log}");
    assert!(page.contains("artifacts/junit_runner.xml"), "{page}");
    assert_eq!(http_get(&address, "/job/no-such-job").0, 404);
    assert_eq!(http_get(&address, &format!("/job/{failing_job}?test=(")).0, 400);

    // Operations: gzip when asked, an ETag to revalidate with, requests counted by route.
    let grid_path = format!("/job/{failing_job}");
    let (_, head, gzipped) = http_get_with(&address, &grid_path, &[("Accept-Encoding", "gzip")]);
    assert_eq!(header(&head, "content-encoding"), Some("gzip"), "{head}");
    assert!(gzipped.len() < grid.len() / 2, "{} gzipped bytes for {} bytes", gzipped.len(), grid.len());
    let etag = header(&head, "etag").unwrap_or_else(|| panic!("no ETag: {head}")).to_owned();
    assert_eq!(header(&head, "cache-control"), Some("no-cache"), "{head}");
    let (status, _, body) = http_get_with(&address, &grid_path, &[("If-None-Match", &etag)]);
    assert!(status == 304 && body.is_empty(), "{status}");
    let (_, metrics) = http_get(&address, "/metrics");
    let counted = r#"harness_http_requests_total{method="GET",route="/job/{job}",status="200"}"#;
    assert!(metrics.contains(counted) && metrics.contains(r#"route="/job/{job}",status="404"}"#), "{metrics}");
    assert!(metrics.contains(r#"harness_http_request_duration_seconds_count{route="/lkg"} 1"#), "{metrics}");
    kill(Pid::from_raw(server.id() as i32), Signal::SIGTERM).unwrap();
    assert!(server.wait().unwrap().success(), "serve exits cleanly on SIGTERM");
    env.assert_nothing_left();
}

/// `harness serve` on a Postgres server that is restarted: `/healthz` and the dashboard answer 503
/// while it is down, and both recover, with the same data, when it is back.
#[test]
fn serve_reports_a_database_that_is_down_and_recovers_when_it_restarts() {
    let postgres = testing::OwnPostgres::start();
    let env = Env::new();
    let output = env.harness(&["--provider", "gated", "--kubernetes", "1.36", "--database", &postgres.url]).output();
    assert!(output.as_ref().unwrap().status.success(), "{}", text(&output.unwrap()));
    let (mut server, address) = start_serve(&env, &["--database", &postgres.url]);
    let grid = "/job/ci-cloud-provider-gated-k8s-1.36";
    assert_eq!(http_get(&address, "/healthz"), (200, "ok".to_owned()));
    let (status, before) = http_get(&address, grid);
    assert!(status == 200 && before.contains(r#"<td class="pass">"#), "{status} {before}");

    postgres.down();
    let (status, body) = http_get(&address, "/healthz");
    assert!(status == 503 && body.contains("unhealthy"), "{status} {body}");
    let (status, body) = http_get(&address, "/readyz");
    assert!(status == 503 && body.contains("not ready"), "{status} {body}");
    for page in ["/", grid] {
        let (status, body) = http_get(&address, page);
        assert!(status == 503 && body.contains("the results are unavailable"), "{page}: {status} {body}");
    }

    postgres.up();
    let deadline = Instant::now() + Duration::from_secs(30);
    while http_get(&address, "/healthz").0 != 200 {
        assert!(Instant::now() < deadline, "/healthz did not recover within 30 s of the database's return");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(http_get(&address, grid), (200, before), "the same grid once the database is back");
    assert_eq!(http_get(&address, "/readyz"), (200, "ok".to_owned()));
    kill(Pid::from_raw(server.id() as i32), Signal::SIGTERM).unwrap();
    assert!(server.wait().unwrap().success());
    env.assert_nothing_left();
}

/// A build of `job` with the results of a real conformance dry run (3,213 tests, most skipped),
/// published with `harness publish`.
fn publish_conformance_sized(env: &Env, job: &str, build: &str, started: u64) {
    let dir = env.root.join(format!("conformance-{build}"));
    std::fs::create_dir_all(dir.join("artifacts")).unwrap();
    std::fs::write(dir.join("started.json"), format!(r#"{{"timestamp": {started}}}"#)).unwrap();
    let finished = format!(
        r#"{{"timestamp": {}, "passed": true, "result": "SUCCESS",
        "metadata": {{"kubernetes-version": "v1.37.1"}}}}"#,
        started + 600
    );
    std::fs::write(dir.join("finished.json"), finished).unwrap();
    std::fs::write(dir.join("build-log.txt"), "ok\n").unwrap();
    let junit = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data/junit/e2e.test-v1.37.1-dryrun-conformance-junit_01.xml");
    std::fs::copy(junit, dir.join("artifacts/junit_01.xml")).unwrap();
    let output = env.command("publish").args(["--job", job, "--build", build, "--dir"]).arg(&dir).output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
}

/// The dashboard in headless Chromium (Debian's, driven by playwright-core) at 1280×800: every
/// page of a `harness serve` over real runs (two of `gated`, one each of `north` and `south`,
/// which share a deliberately failing test) and two published builds of a real conformance run:
/// cells and colours, results on the first screen, always-skipped tests hidden and shown, a group
/// collapsed, sparklines, a filter, a cell followed to its build, the failure cluster of the shared
/// test flagged likely Kubernetes-side, the shared suite's tests by provider with a skip's reason. Screenshots go to `$ARTIFACTS/dashboard-browser` (or the
/// test's target dir).
#[test]
fn the_dashboard_works_in_a_real_browser() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards/browser/dashboard.mjs");
    let installed = script.with_file_name("node_modules").join("playwright-core").is_dir()
        && Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success());
    assert!(installed, "the browser tests need node, Chromium and playwright-core: run `scripts/browser install`");
    let env = Env::new();
    two_gated_runs(&env);
    for provider in ["north", "south"] {
        let output = env.harness(&["--provider", provider, "--kubernetes", "1.37"]).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{provider} fails its shared test: {}", text(&output));
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    publish_conformance_sized(&env, CONFORMANCE_JOB, "1", now - 7200);
    publish_conformance_sized(&env, CONFORMANCE_JOB, "2", now - 3600);
    let (mut server, address) = start_serve(&env, &[]);
    let screenshots = match std::env::var_os("ARTIFACTS") {
        Some(artifacts) => PathBuf::from(artifacts).join("dashboard-browser"),
        None => Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-browser"),
    };
    let output = Command::new("node")
        .arg(&script)
        .args(["--url", &format!("http://{address}"), "--job", FAILING_JOB, "--conformance-job", CONFORMANCE_JOB])
        .args(["--shared-test", SHARED_TEST, "--screenshots"])
        .arg(&screenshots)
        .output()
        .unwrap();
    kill(Pid::from_raw(server.id() as i32), Signal::SIGTERM).unwrap();
    server.wait().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    for page in [
        "matrix",
        "lkg",
        "grid",
        "grid-filtered",
        "build",
        "not-found",
        "conformance-first-screen",
        "conformance-skipped-shown",
        "conformance-group-collapsed",
        "clusters",
        "cluster",
        "flaky",
        "suite",
    ] {
        let shot = screenshots.join(format!("{page}.png"));
        let bytes = std::fs::read(&shot).unwrap_or_else(|e| panic!("{}: {e}", shot.display()));
        assert!(bytes.starts_with(b"\x89PNG") && bytes.len() > 2000, "{} is no screenshot", shot.display());
    }
    env.assert_nothing_left();
}

/// The job `publish_conformance_sized` publishes.
const CONFORMANCE_JOB: &str = "ci-conformance-dry-run";
/// The test `north` and `south` both fail.
const SHARED_TEST: &str =
    "[It] [sig-network] Services should reach the backends of a LoadBalancer Service [Conformance]";

//! `harness bisect` end to end through the `harness` binary: a provider repository made here (33
//! commits: a good one, then 32 with a regression introduced at a known commit), a provider whose
//! build (a shell script writing a tiny CCM) and suite (a script writing JUnit) take a second,
//! on the `existing` deployer against one real local cluster (`harness cluster up`). Every point is
//! a real `harness run` published to a store and index of the test's own; every verdict is read
//! from what was published. Covered: the culprit range from the LKG narrowed to the commit, in
//! ⌈log₂ 32⌉ = 5 rounds sequentially and 3 with `--parallel 3`; a flaky test with
//! `--runs-per-point 2`; killed after two points and resumed; an untestable commit beside the
//! culprit; and bad input (reversed, unknown, adjacent ends; no culprit range), where nothing runs.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// The number of commits after the good one, and the first bad one among them (1-based).
const RANGE: usize = 32;
const CULPRIT: usize = 20;

/// A git repository made by the test: commit 0 good, commits 1..=32 on top, the behaviour
/// regressed from `CULPRIT` on, and `broken-build` (the build fails) at the commits in `unbuildable`.
struct Repo {
    dir: PathBuf,
    commits: Vec<String>,
}

impl Repo {
    fn new(dir: PathBuf, unbuildable: &[usize]) -> Repo {
        std::fs::create_dir_all(&dir).unwrap();
        let mut repo = Repo { dir, commits: Vec::new() };
        repo.git(&["init", "-q", "-b", "master"]);
        repo.git(&["config", "user.email", "dev@example.com"]);
        repo.git(&["config", "user.name", "Provider Dev"]);
        std::fs::write(repo.dir.join("build.sh"), BUILD_SH).unwrap();
        std::fs::write(repo.dir.join("suite.sh"), SUITE_SH).unwrap();
        for i in 0..=RANGE {
            std::fs::write(repo.dir.join("version"), format!("{i}\n")).unwrap();
            let behaviour = if i >= CULPRIT { "regressed" } else { "ok" };
            std::fs::write(repo.dir.join("behaviour"), format!("{behaviour}\n")).unwrap();
            let broken = repo.dir.join("broken-build");
            if unbuildable.contains(&i) {
                std::fs::write(&broken, "the build fails here\n").unwrap();
            } else {
                let _ = std::fs::remove_file(&broken);
            }
            repo.git(&["add", "-A"]);
            let subject = if i == CULPRIT {
                "load balancers: skip the address (the regression)".to_owned()
            } else {
                format!("change {i}")
            };
            repo.git(&["commit", "-q", "-m", &subject]);
            repo.commits.push(repo.git(&["rev-parse", "HEAD"]));
        }
        repo
    }

    fn git(&self, args: &[&str]) -> String {
        let output = Command::new("git").arg("-C").arg(&self.dir).args(args).output().unwrap();
        assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap().trim().to_owned()
    }

    /// A checkout of commit `i`, for the runs that give the LKG its range.
    fn checkout(&self, i: usize, dir: &Path) -> PathBuf {
        let path = dir.join(format!("checkout-{i}"));
        self.git(&["worktree", "add", "-q", "--detach", &path.display().to_string(), &self.commits[i]]);
        path
    }
}

/// The provider's build: a tiny CCM (a script printing its version), unless `broken-build` exists.
const BUILD_SH: &str = r#"#!/bin/sh
set -e
if [ -f broken-build ]; then echo "build.sh: $(cat broken-build)" >&2; exit 1; fi
printf '#!/bin/sh\necho quick-ccm %s\n' "$(cat version)" > ccm
chmod +x ccm
"#;

/// The provider's suite: JUnit with two tests, one failing once the behaviour regressed; with
/// `flaky`, a third test that fails the first time it runs at each commit.
const SUITE_SH: &str = r#"#!/bin/sh
lb='<testcase name="[quick] load balancers get an address" time="0.1"/>'
if grep -q regressed behaviour; then
  lb='<testcase name="[quick] load balancers get an address" time="0.1"><failure message="no address">the service got no ingress address</failure></testcase>'
fi
# With `kubernetes VERSION`: regressed from Kubernetes v1.37.0-rc.1 on, whatever the commit.
if [ "$1" = kubernetes ]; then
  case "$2" in
    v1.37.0-alpha.*|v1.37.0-beta.*|v1.36.*) lb='<testcase name="[quick] load balancers get an address" time="0.1"/>' ;;
    *) lb='<testcase name="[quick] load balancers get an address" time="0.1"><failure message="no address">Kubernetes '"$2"' broke it</failure></testcase>' ;;
  esac
fi
flaky=''
if [ "$1" = flaky ]; then
  marker="$FLAKY_STATE/$(git rev-parse HEAD)"
  if [ -e "$marker" ]; then
    flaky='<testcase name="[quick] a flaky test" time="0.1"/>'
  else
    mkdir -p "$FLAKY_STATE" && touch "$marker"
    flaky='<testcase name="[quick] a flaky test" time="0.1"><failure message="flake">timed out</failure></testcase>'
  fi
fi
cat > "$ARTIFACTS/junit_quick.xml" <<EOF
<testsuite name="quick">
<testcase name="[quick] nodes are initialised" time="0.1"/>
$lb
$flaky
</testsuite>
EOF
! grep -q '<failure' "$ARTIFACTS/junit_quick.xml"
"#;

fn providers_yaml(dir: &Path, kubeconfig: &Path) -> PathBuf {
    let flaky_state = dir.join("flaky-state");
    let provider = |name: &str, suite: &str| {
        format!(
            r#"
  - name: {name}
    repo: https://github.com/example/cloud-provider-{name}
    branch: master
    kubernetes: [v1.37.1]
    ccm:
      build:
        kind: command
        command: [sh, build.sh]
        binary: ccm
        timeout: 1m
      deploy:
        kind: command
        command: ["true"]
        timeout: 1m
    deployer:
      kind: existing
      kubeconfig: {kubeconfig}
    capabilities: [instances]
    suites: [{suite}]
    required:
      suites: [{suite}]
"#,
            kubeconfig = kubeconfig.display()
        )
    };
    let text = format!(
        r#"testgrid:
  gcs_bucket: test-logs
suites:
  - name: quick
    kind: exec
    command: [sh, suite.sh]
    timeout: 1m
  - name: quick-flaky
    kind: exec
    command: [sh, suite.sh, flaky]
    env:
      FLAKY_STATE: {flaky_state}
    timeout: 1m
  - name: quick-by-kubernetes
    kind: exec
    command: [sh, suite.sh, kubernetes, "{{kubernetes_version}}"]
    timeout: 1m
providers:{}{}{}"#,
        provider("quick", "quick"),
        provider("flaky", "quick-flaky"),
        provider("kube", "quick-by-kubernetes"),
        flaky_state = flaky_state.display()
    );
    let path = dir.join("providers.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A test's directories and the `harness` commands that use them.
struct Env {
    root: PathBuf,
    config: PathBuf,
}

/// `harness ARGS` with the state and data directories under `root`.
fn harness(root: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_harness"));
    cmd.env("HARNESS_STATE_DIR", root.join("state"))
        .env("HARNESS_DATA_DIR", root.join("data"))
        .env("CI", "true")
        .env_remove("RUST_LOG")
        .current_dir(root);
    for inherited in
        ["DATABASE_URL", "HARNESS_STORE", "HARNESS_CONFIG", "ARTIFACTS", "BUILD_ID", "PROW_JOB_ID", "JOB_NAME"]
    {
        cmd.env_remove(inherited);
    }
    cmd.args(args);
    cmd
}

impl Env {
    fn command(&self, args: &[&str]) -> Command {
        harness(&self.root, args)
    }

    /// A command on scenario `name`'s own store and index, with the providers file.
    fn scenario(&self, name: &str, args: &[&str]) -> Command {
        let mut cmd = self.command(args);
        let data = self.root.join(name);
        cmd.arg("--config").arg(&self.config);
        cmd.arg("--store").arg(data.join("store"));
        cmd.arg("--database").arg(format!("sqlite://{}", data.join("index.sqlite").display()));
        cmd.arg("--artifacts").arg(data.join("_artifacts"));
        cmd
    }

    fn bisect(&self, name: &str, repo: &Repo, args: &[&str]) -> Command {
        let mut cmd = self.scenario(name, &["bisect", "--output", "json"]);
        cmd.arg("--repo").arg(&repo.dir).args(args);
        cmd
    }
}

/// `harness lkg culprits quick --output json` on scenario `name`'s index.
fn lkg_culprits(env: &Env, name: &str, history: &str) -> Value {
    let database = format!("sqlite://{}", env.root.join(name).join("index.sqlite").display());
    let output = env
        .command(&["lkg", "culprits", "quick", "--provider-history", history, "--output", "json"])
        .args(["--database", &database])
        .arg("--config")
        .arg(&env.config)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    serde_json::from_slice::<Value>(&output.stdout).unwrap()
}

fn text(output: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The JSON report: the last top-level object of stdout (progress lines come before it).
fn report(output: &Output) -> Value {
    assert!(output.status.success(), "{}", text(output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let start = stdout.find("\n{").map_or(0, |at| at + 1);
    serde_json::from_str(&stdout[start..]).unwrap_or_else(|e| panic!("{e}: {}", text(output)))
}

fn runs(report: &Value) -> Vec<&Value> {
    report["points"].as_array().unwrap().iter().flat_map(|p| p["runs"].as_array().unwrap()).collect()
}

/// A local cluster of its own for the test, brought down when dropped.
struct Cluster {
    root: PathBuf,
    kubeconfig: PathBuf,
}

impl Cluster {
    fn up(root: &Path) -> Cluster {
        let output = harness(root, &["cluster", "up", "--node-kind", "kwok", "--name", "bisect", "--nodes", "1"])
            .output()
            .unwrap();
        assert!(output.status.success(), "cluster up: {}", text(&output));
        let output = harness(root, &["cluster", "kubeconfig", "--name", "bisect"]).output().unwrap();
        assert!(output.status.success(), "{}", text(&output));
        Cluster {
            root: root.to_path_buf(),
            kubeconfig: PathBuf::from(String::from_utf8(output.stdout).unwrap().trim()),
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = harness(&self.root, &["cluster", "down", "--name", "bisect"]).output();
    }
}

fn setup() -> (tempfile::TempDir, Env) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let env = Env { root, config: PathBuf::new() };
    (tmp, env)
}

#[test]
fn bisect_finds_the_commit_that_broke_the_provider() {
    let (_tmp, mut env) = setup();
    let cluster = Cluster::up(&env.root);
    env.config = providers_yaml(&env.root, &cluster.kubeconfig);
    let repo = Repo::new(env.root.join("repo"), &[]);
    let culprit = &repo.commits[CULPRIT];

    // The LKG's culprit range: a good run at commit 0 and a bad one at commit 32.
    let history = format!("quick=git:{}", repo.dir.display());
    for i in [0, RANGE] {
        let checkout = repo.checkout(i, &env.root);
        let mut run = env.scenario("lkg", &["run", "--provider", "quick", "--provider-version", &repo.commits[i]]);
        let output = run.arg("--provider-dir").arg(&checkout).output().unwrap();
        assert_eq!(output.status.success(), i == 0, "run at commit {i}: {}", text(&output));
    }
    let culprits = |env: &Env| lkg_culprits(env, "lkg", &history);
    let before = culprits(&env);
    assert_eq!(before["culprit"]["provider"]["commits"].as_array().unwrap().len(), RANGE, "{before}");

    // Sequentially from the LKG's range: ⌈log₂ 32⌉ = 5 rounds, one run each.
    let mut cmd = env.scenario("lkg", &["bisect", "--provider", "quick", "--output", "json"]);
    let sequential = report(&cmd.args(["--provider-history", &history]).output().unwrap());
    assert_eq!(sequential["first_bad"]["commit"], culprit.as_str(), "{sequential:#}");
    assert_eq!(sequential["first_bad"]["subject"], "load balancers: skip the address (the regression)");
    assert_eq!(sequential["first_bad"]["author"], "Provider Dev <dev@example.com>");
    assert_eq!(sequential["range_from"], "lkg");
    assert_eq!((sequential["rounds"].as_u64(), sequential["expected_rounds"].as_u64()), (Some(5), Some(5)));
    assert_eq!(runs(&sequential).len(), 5);
    assert_eq!(sequential["failing_tests"], serde_json::json!(["[quick] load balancers get an address"]));
    assert_eq!(sequential["answer"]["last_good"], repo.commits[CULPRIT - 1].as_str());
    let bad_build = &sequential["bad_build"];
    assert!(bad_build["artifacts_url"].as_str().unwrap().contains("/logs/bisect-quick-master/"), "{bad_build}");
    assert!(sequential["good_build"]["page"].as_str().unwrap().starts_with("/job/bisect-quick-master/build/"));
    // The LKG engine saw every point: the culprit range is now the one commit.
    let after = culprits(&env);
    assert_eq!(after["culprit"]["provider"]["commits"], serde_json::json!([culprit]), "{after:#}");
    assert_eq!(after["culprit"]["provider"]["last_good"], repo.commits[CULPRIT - 1].as_str());
    assert_eq!(after["bisection"]["narrowed_to"], culprit.as_str(), "the API's culprit view: {after:#}");
    assert_eq!(after["bisection"]["builds"].as_array().unwrap().len(), 5);
    let database = format!("sqlite://{}", env.root.join("lkg/index.sqlite").display());
    let mut table = env.command(&["lkg", "culprits", "quick", "--provider-history", &history, "--database", &database]);
    let table = table.arg("--config").arg(&env.config).output().unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains(&format!("Bisection (bisect-quick-master, 5 build(s)): narrowed to {culprit}")), "{table}");

    // Started again when done, it runs nothing: the answer comes from the index, as text.
    let mut again = env.scenario("lkg", &["bisect", "--provider", "quick", "--provider-history", &history]);
    let again = again.args(["--good", &repo.commits[0], "--bad", &repo.commits[RANGE]]).output().unwrap();
    assert!(again.status.success(), "{}", text(&again));
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(stdout.contains(&format!("first bad commit of quick (line master): {culprit}")), "{stdout}");
    assert!(stdout.contains("load balancers: skip the address (the regression)"), "{stdout}");
    assert!(stdout.contains("5 run(s) (5 read back from the index), 0 round(s)"), "{stdout}");

    // Three points at once: 32 → 8 → 2 → 1, three rounds.
    let good = repo.commits[0].as_str();
    let bad = repo.commits[RANGE].as_str();
    let flags = ["--provider", "quick", "--good", good, "--bad", bad];
    let parallel = report(&env.bisect("parallel", &repo, &flags).args(["--parallel", "3"]).output().unwrap());
    assert_eq!(parallel["first_bad"]["commit"], culprit.as_str(), "{parallel:#}");
    assert_eq!((parallel["rounds"].as_u64(), parallel["expected_rounds"].as_u64()), (Some(3), Some(3)));
    assert!(runs(&parallel).len() <= 9);

    // A flaky test failing the first run at every commit: each failing point is run again.
    let flaky_flags = ["--provider", "flaky", "--good", good, "--bad", bad, "--runs-per-point", "2"];
    let flaky = report(&env.bisect("flaky", &repo, &flaky_flags).output().unwrap());
    assert_eq!(flaky["first_bad"]["commit"], culprit.as_str(), "{flaky:#}");
    for point in flaky["points"].as_array().unwrap() {
        assert_eq!(point["runs"].as_array().unwrap().len(), 2, "every point failed once first: {point}");
    }
    assert_eq!(flaky["failing_tests"], serde_json::json!(["[quick] load balancers get an address"]));

    // Killed after two points, then started again: it reads those two back and runs neither again.
    let mut child = env.bisect("resume", &repo, &flags).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut done = 0;
    while done < 2 {
        let line = lines.next().expect("bisect ended before two points").unwrap();
        done += usize::from(line.starts_with("point "));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let resumed = report(&env.bisect("resume", &repo, &flags).output().unwrap());
    assert_eq!(resumed["first_bad"]["commit"], culprit.as_str(), "{resumed:#}");
    let all = runs(&resumed);
    let earlier: Vec<&&Value> = all.iter().filter(|r| r["resumed"] == true).collect();
    assert!(earlier.len() >= 2, "the two points published before the kill are read back: {resumed:#}");
    assert_eq!(all.len(), 5, "no point was run twice: {resumed:#}");
    assert_eq!(resumed["rounds"].as_u64(), Some(5 - earlier.len() as u64));

    // An untestable commit just before the culprit: the answer is the two of them, with the reason.
    let broken = Repo::new(env.root.join("broken-repo"), &[CULPRIT - 1]);
    let flags = ["--provider", "quick", "--good", &broken.commits[0], "--bad", &broken.commits[RANGE]];
    let untestable = report(&env.bisect("untestable", &broken, &flags).output().unwrap());
    let candidates: Vec<&str> =
        untestable["candidates"].as_array().unwrap().iter().map(|c| c["commit"].as_str().unwrap()).collect();
    assert_eq!(candidates, [broken.commits[CULPRIT - 1].as_str(), broken.commits[CULPRIT].as_str()], "{untestable:#}");
    let reason = untestable["answer"]["untestable"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("step Build failed") && reason.contains("the build fails here"), "{reason}");
    // Published ERROR: the LKG takes no verdict from it.
    let error = untestable["points"].as_array().unwrap().iter().find(|p| p["verdict"] == "untestable").unwrap();
    let url = error["runs"][0]["artifacts_url"].as_str().unwrap().trim_start_matches("file://").to_owned();
    let finished: Value =
        serde_json::from_slice(&std::fs::read(Path::new(&url).join("finished.json")).unwrap()).unwrap();
    assert_eq!(finished["result"], "ERROR", "{finished}");
    // The LKG sees the bisection's good and bad points, not the untestable one: two commits left.
    let lkg = lkg_culprits(&env, "untestable", &format!("quick=git:{}", broken.dir.display()));
    let left: Vec<&str> =
        lkg["culprit"]["provider"]["commits"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
    assert_eq!(left, [broken.commits[CULPRIT].as_str(), broken.commits[CULPRIT - 1].as_str()], "{lkg:#}");
    assert_eq!((lkg["bisection"]["commits_left"].as_u64(), &lkg["bisection"]["narrowed_to"]), (Some(2), &Value::Null));
}

#[test]
fn bad_ranges_are_refused_and_nothing_runs() {
    let (_tmp, mut env) = setup();
    env.config = providers_yaml(&env.root, &env.root.join("no-cluster.kubeconfig"));
    let repo = Repo::new(env.root.join("repo"), &[]);
    let c = |i: usize| repo.commits[i].clone();
    let side = repo.git(&["commit-tree", "-m", "not on master", &format!("{}^{{tree}}", c(3))]);
    let cases: [(Vec<String>, &str); 5] = [
        (vec![c(10), c(2)], "the range is reversed"),
        (vec!["v9.9.9".into(), c(2)], "\"v9.9.9\" is not a commit of"),
        (vec![side, c(5)], "is not in the first-parent history of the bad end"),
        (vec![c(4), c(5)], "the range is already one commit"),
        (vec![c(4), c(4)], "are the same commit"),
    ];
    for (ends, expected) in cases {
        let args = ["--provider", "quick", "--good", &ends[0], "--bad", &ends[1]];
        let output = env.bisect("bad", &repo, &args).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{}", text(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.lines().next().unwrap_or_default().contains(expected), "{expected}: {stderr}");
    }
    // A release line the provider does not keep.
    let args = ["--provider", "quick", "--good", &repo.commits[1], "--bad", &repo.commits[9], "--line", "1.37"];
    let output = env.bisect("bad", &repo, &args).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("has no release line \"1.37\": its lines are master"));
    // No culprit range: a provider with no builds in an index that exists.
    let url = format!("sqlite://{}", env.root.join("bad/index.sqlite").display());
    let migrate = env.command(&["migrate", "--database", &url]).output().unwrap();
    assert!(migrate.status.success(), "{}", text(&migrate));
    let history = format!("quick=git:{}", repo.dir.display());
    let output =
        env.scenario("bad", &["bisect", "--provider", "quick", "--provider-history", &history]).output().unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("provider quick has no culprit range on line master"), "{stderr}");
    // Nothing ran: no build was published, no worktree was made.
    assert!(!env.root.join("bad/store/logs").exists(), "nothing is published");
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
}

/// `--side kubernetes` end to end: the provider's commit held fixed, Kubernetes tags as the points
/// (given with `--points`, so that no Go module proxy is asked), on the `existing` deployer, whose
/// runs take no toolchain; the suite regresses from Kubernetes v1.37.0-rc.1 on. Every point is a
/// real run published with the point as its Kubernetes version, read back when run again.
#[test]
fn bisect_finds_the_kubernetes_version_that_broke_the_provider() {
    let (_tmp, mut env) = setup();
    let cluster = Cluster::up(&env.root);
    env.config = providers_yaml(&env.root, &cluster.kubeconfig);
    let repo = Repo::new(env.root.join("repo"), &[]);
    let points = "v1.37.0-alpha.2,v1.37.0-alpha.3,v1.37.0-beta.0,v1.37.0-rc.1,v1.37.0";
    let args = [
        "--provider",
        "kube",
        "--side",
        "kubernetes",
        "--good",
        "v1.36.4",
        "--bad",
        "v1.37.1",
        "--points",
        points,
        "--commit",
        &repo.commits[3],
    ];
    let first = report(&env.bisect("kube", &repo, &args).output().unwrap());
    assert_eq!(first["side"], "kubernetes", "{first:#}");
    assert_eq!(first["first_bad"]["commit"], "v1.37.0-rc.1", "{first:#}");
    assert_eq!(first["answer"]["last_good"], "v1.37.0-beta.0", "{first:#}");
    assert_eq!(first["provider_commit"], repo.commits[3].as_str());
    assert_eq!(first["commits"], 6, "five points and the bad end");
    assert_eq!(first["failing_tests"], serde_json::json!(["[quick] load balancers get an address"]));
    let ran = runs(&first);
    assert!(!ran.is_empty() && ran.len() <= 3, "⌈log₂ 6⌉ = 3 runs at most: {first:#}");
    for run in &ran {
        assert_eq!(run["toolchain_seconds"], 0.0, "the existing deployer takes no toolchain: {run}");
    }
    // Every point ran as a real build of the bisect job with the point as its Kubernetes version.
    let tested: Vec<&str> = first["points"].as_array().unwrap().iter().map(|p| p["commit"].as_str().unwrap()).collect();
    for point in &first["points"].as_array().unwrap()[..] {
        let build = &point["runs"][0];
        let dir = env
            .root
            .join("kube/store/logs")
            .join(build["job"].as_str().unwrap())
            .join(build["build"].as_str().unwrap());
        let finished: Value = serde_json::from_slice(&std::fs::read(dir.join("finished.json")).unwrap()).unwrap();
        assert_eq!(finished["metadata"]["kubernetes-version"], point["commit"], "{finished}");
        assert_eq!(finished["metadata"]["provider-version"], repo.commits[3].as_str(), "{finished}");
    }
    assert!(tested.contains(&"v1.37.0-rc.1") && tested.contains(&"v1.37.0-beta.0"), "{tested:?}");

    // Run again: every verdict is read back from the index, nothing runs.
    let again = report(&env.bisect("kube", &repo, &args).output().unwrap());
    assert_eq!(again["first_bad"]["commit"], "v1.37.0-rc.1");
    assert_eq!(again["resumed_runs"].as_u64(), Some(ran.len() as u64), "{again:#}");
    assert_eq!(again["rounds"], 0);

    // Bad input on this side: not a tag, reversed, a point outside the range, a fixed --kubernetes.
    let cases: [(&[&str], &str); 4] = [
        (&["--good", "abc123", "--bad", "v1.37.1"], "--good \"abc123\" is not a Kubernetes release or pre-release tag"),
        (&["--good", "v1.37.1", "--bad", "v1.37.0"], "is not older than --bad v1.37.0"),
        (&["--good", "v1.36.4", "--bad", "v1.37.1", "--points", "v1.38.0"], "--points v1.38.0 is not between"),
        (
            &["--good", "v1.36.4", "--bad", "v1.37.1", "--kubernetes", "v1.37.1"],
            "give the provider commit to hold fixed",
        ),
    ];
    for (ends, expected) in cases {
        let output = env
            .bisect("kube-bad", &repo, &[&["--provider", "kube", "--side", "kubernetes"][..], ends].concat())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "{}", text(&output));
        assert!(String::from_utf8_lossy(&output.stderr).contains(expected), "{expected}: {}", text(&output));
    }
    // A --kubernetes-source that is no kubernetes/kubernetes checkout, named before anything runs.
    let nowhere = env.root.join("no-kubernetes-here");
    std::fs::create_dir_all(&nowhere).unwrap();
    let output = env
        .bisect(
            "kube-bad",
            &repo,
            &["--provider", "kube", "--side", "kubernetes", "--good", "v1.36.4", "--bad", "v1.37.1"],
        )
        .arg("--kubernetes-source")
        .arg(&nowhere)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("is not a kubernetes/kubernetes checkout") && stderr.contains("no-kubernetes-here"),
        "{stderr}"
    );
    assert!(!env.root.join("kube-bad/store/logs").exists(), "nothing is published");
}

//! Last known good as a provider maintainer adopts it, end to end through the `harness` binary:
//! real git histories made here (a Kubernetes repository and a provider repository, each with a
//! `release-1.36` branch and tags), builds written the way Prow's pod-utils and kubetest2 write
//! them (no harness metadata: `started.json` `repos`, `finished.json` `metadata["job-version"]`
//! as a Kubernetes CI version), indexed with `harness index --job`, then `harness lkg` per
//! release line, the one-line export read back the way provider scripts read their pins, and the
//! marker objects in the store.
//!
//! Field shapes, from the sources: `started.json` `repos` is `{"org/repo": "branch:sha"}` and
//! `finished.json` `metadata["job-version"]` the version under test (TestGrid's
//! `metadata/job.go`, which reads both; kubetest2 records `job-version` in `metadata`); Kubernetes
//! CI versions are `v1.37.0-alpha.1.<n>+<14 hex>` (`dl.k8s.io/ci/latest.txt`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A git repository made by the test.
struct Repo {
    dir: PathBuf,
}

impl Repo {
    fn new(dir: PathBuf) -> Repo {
        std::fs::create_dir_all(&dir).unwrap();
        let repo = Repo { dir };
        repo.git(&["init", "-q", "-b", "master"]);
        repo.git(&["config", "user.email", "test@example.com"]);
        repo.git(&["config", "user.name", "test"]);
        repo
    }

    fn git(&self, args: &[&str]) -> String {
        let output = Command::new("git").arg("-C").arg(&self.dir).args(args).output().unwrap();
        assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap().trim().to_owned()
    }

    /// `count` commits on the current branch; their ids, oldest first.
    fn commits(&self, name: &str, count: usize) -> Vec<String> {
        (0..count)
            .map(|i| {
                // A file per series, so branches merge without conflicts.
                let file = name.replace(' ', "-");
                std::fs::write(self.dir.join(&file), format!("{name} {i}\n")).unwrap();
                self.git(&["add", &file]);
                self.git(&["commit", "-q", "-m", &format!("{name} {i}")]);
                self.git(&["rev-parse", "HEAD"])
            })
            .collect()
    }

    /// `git rev-list --first-parent first_bad ^last_good`, newest first.
    fn range(&self, last_good: &str, first_bad: &str) -> Vec<String> {
        let text = self.git(&["rev-list", "--first-parent", first_bad, &format!("^{last_good}")]);
        text.lines().map(str::to_owned).collect()
    }
}

fn ci_version(n: usize, commit: &str) -> String {
    format!("v1.37.0-alpha.1.{n}+{}", &commit[..14])
}

/// A build of job `job` as Prow writes it: no harness keys.
fn prow_build(store: &Path, job: &str, build: u32, kubernetes: Option<&str>, provider: Option<&str>, passed: bool) {
    let dir = store.join("logs").join(job).join(build.to_string());
    std::fs::create_dir_all(dir.join("artifacts")).unwrap();
    let at = 1_800_000_000 + i64::from(build) * 100;
    let mut repos = BTreeMap::new();
    if let Some(provider) = provider {
        repos.insert("acme/cloud-provider-acme", format!("master:{provider}"));
    }
    let started = serde_json::json!({"timestamp": at, "node": "prow-node", "repos": repos,
                                     "repo-commit": provider.unwrap_or("")});
    std::fs::write(dir.join("started.json"), started.to_string()).unwrap();
    let mut metadata = serde_json::json!({"pod": "some-pod"});
    if let Some(kubernetes) = kubernetes {
        metadata["job-version"] = kubernetes.into();
    }
    let finished = serde_json::json!({"timestamp": at + 50, "passed": passed,
                                      "result": if passed { "SUCCESS" } else { "FAILURE" }, "metadata": metadata});
    std::fs::write(dir.join("finished.json"), finished.to_string()).unwrap();
    let failure = if passed { "" } else { r#"<failure message="boom">load balancer never got an address</failure>"# };
    let junit = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="Kubernetes e2e suite" tests="2" failures="{}">
<testcase name="[sig-cloud-provider] nodes get a provider ID" classname="Kubernetes e2e suite" time="1"></testcase>
<testcase name="[sig-network] load balancers get an address" classname="Kubernetes e2e suite" time="2">{failure}</testcase>
</testsuite></testsuites>"#,
        u8::from(!passed)
    );
    std::fs::write(dir.join("artifacts/junit_01.xml"), junit).unwrap();
    std::fs::write(dir.join("build-log.txt"), "ok\n").unwrap();
}

fn providers_yaml(dir: &Path) -> PathBuf {
    let bundled = config::BUNDLED;
    let local = config::bundled_entry("local").expect("the bundled file has `local`");
    let acme = local
        .replacen("- name: local", "- name: acme", 1)
        .replacen(
            "    branch: main\n",
            "    branch: master\n    branches: [master, release-1.36]\n    prow:\n      jobs: [ci-acme-e2e-latest, ci-acme-e2e-1-36]\n      repo: acme/cloud-provider-acme\n",
            1,
        );
    assert!(acme.contains("branches: [master, release-1.36]"), "the edit applied");
    let path = dir.join("providers.yaml");
    std::fs::write(&path, format!("{}\n{}\n", bundled.trim_end(), acme.trim_end())).unwrap();
    path
}

struct Env {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    config: PathBuf,
    kubernetes: Repo,
    provider: Repo,
}

impl Env {
    fn harness(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_harness"));
        cmd.env("CI", "true").env_remove("RUST_LOG").env("HARNESS_DATA_DIR", self.root.join("data"));
        for inherited in ["DATABASE_URL", "HARNESS_STORE", "HARNESS_CONFIG"] {
            cmd.env_remove(inherited);
        }
        cmd.args(args).output().unwrap()
    }

    fn database(&self) -> String {
        format!("sqlite://{}", self.root.join("index.sqlite").display())
    }

    fn store(&self) -> PathBuf {
        self.root.join("store")
    }

    /// `harness lkg SUBCOMMAND ... --config ... --database ... --kubernetes-history git:... --provider-history acme=git:...`.
    fn lkg(&self, args: &[&str]) -> Output {
        let kubernetes = format!("git:{}", self.kubernetes.dir.display());
        let provider = format!("acme=git:{}", self.provider.dir.display());
        let config = self.config.display().to_string();
        let database = self.database();
        let mut all = vec!["lkg"];
        all.extend_from_slice(args);
        all.extend(["--config", &config, "--database", &database, "--kubernetes-history", &kubernetes]);
        all.extend(["--provider-history", &provider]);
        self.harness(&all)
    }

    fn lkg_json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.extend(["--output", "json"]);
        let output = self.lkg(&all);
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}\n{}", text(&output)))
    }
}

fn text(output: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// What each real reader idiom makes of a version file.
fn read_back(file: &Path) -> [String; 3] {
    let sh = |script: &str| {
        let output = Command::new("sh").arg("-c").arg(script).arg("sh").arg(file).output().unwrap();
        String::from_utf8(output.stdout).unwrap()
    };
    [
        // cloud-provider-gcp's `make print-k8s-version`.
        sh(r#"cat "$1" | tr -d '[:space:]'"#),
        // A shell script's `$(cat FILE)`.
        sh(r#"v=$(cat "$1"); printf '%s' "$v""#),
        // kops's versionFromFile: the whole file, trimmed.
        std::fs::read_to_string(file).unwrap().trim().to_owned(),
    ]
}

#[test]
fn release_lines_prow_builds_revisions_and_exports_on_real_histories() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    let config = providers_yaml(&root);

    // Kubernetes: 45 first-parent commits on master (a merge among them), release-1.36 branched
    // at the 10th with 8 commits of its own, tagged v1.36.0 and v1.36.1.
    let kubernetes = Repo::new(root.join("kubernetes"));
    let mut k = kubernetes.commits("k8s", 10);
    kubernetes.git(&["checkout", "-q", "-b", "release-1.36"]);
    let r = kubernetes.commits("k8s release-1.36", 8);
    kubernetes.git(&["tag", "-a", "v1.36.0", &r[2], "-m", "v1.36.0"]);
    kubernetes.git(&["tag", "v1.36.1", &r[6]]);
    kubernetes.git(&["checkout", "-q", "master"]);
    kubernetes.git(&["checkout", "-q", "-b", "feature"]);
    kubernetes.commits("k8s feature", 2);
    kubernetes.git(&["checkout", "-q", "master"]);
    k.extend(kubernetes.commits("k8s", 20));
    kubernetes.git(&["merge", "-q", "--no-ff", "feature", "-m", "Merge feature"]);
    k.push(kubernetes.git(&["rev-parse", "HEAD"]));
    k.extend(kubernetes.commits("k8s", 14));
    assert_eq!(kubernetes.git(&["rev-list", "--first-parent", "--count", "master"]), "45");

    // The provider: 40 commits on master, release-1.36 at the 5th with its own tags.
    let provider = Repo::new(root.join("provider"));
    let p = provider.commits("acme", 5);
    provider.git(&["checkout", "-q", "-b", "release-1.36"]);
    let pr = provider.commits("acme release-1.36", 4);
    provider.git(&["tag", "v1.36.0", &pr[1]]);
    provider.git(&["checkout", "-q", "master"]);
    let p: Vec<String> = p.into_iter().chain(provider.commits("acme", 35)).collect();

    let env = Env { _tmp: tmp, root: root.clone(), config, kubernetes, provider };
    let store = env.store();

    // Master line, job ci-acme-e2e-latest, provider at p[30]: good through k[25], bad from k[31].
    let master = "ci-acme-e2e-latest";
    for (build, (n, passed)) in [(5, true), (15, true), (25, true), (31, false), (40, false)].into_iter().enumerate() {
        prow_build(&store, master, 100 + build as u32, Some(&ci_version(n, &k[n])), Some(&p[30]), passed);
    }
    // A build whose job wrote no versions at all: counted, named, never dropped silently.
    prow_build(&store, master, 150, None, None, true);
    // Release line 1.36, job ci-acme-e2e-1-36, provider at its v1.36.0: good at Kubernetes
    // v1.36.0 (an annotated tag), bad at the release branch's r[5] (before v1.36.1).
    let line = "ci-acme-e2e-1-36";
    prow_build(&store, line, 200, Some("v1.36.0"), Some(&pr[1]), true);
    prow_build(&store, line, 201, Some(&format!("v1.36.1-rc.0.3+{}", &r[5][..14])), Some(&pr[1]), false);
    // Another job in the same bucket, not this provider's: left alone by --job.
    prow_build(&store, "ci-other-e2e", 300, Some("v1.37.0"), Some(&p[0]), false);

    let database = env.database();
    let store_arg = store.display().to_string();
    let indexed =
        env.harness(&["index", "--store", &store_arg, "--database", &database, "--job", master, "--job", line]);
    assert!(indexed.status.success(), "{}", text(&indexed));
    assert!(String::from_utf8_lossy(&indexed.stdout).contains("8 new"), "{}", text(&indexed));

    // The master line: LKG at k[25], culprit range exactly the first-parent commits (k[25], k[31]].
    let view = env.lkg_json(&["show", "acme"]);
    assert_eq!(view["line"], "master");
    assert_eq!(view["lkg"]["kubernetes_commit"], k[25].as_str(), "{view:#}");
    assert_eq!(view["lkg"]["provider_commit"], p[30].as_str());
    let culprit = &view["culprit"]["kubernetes"];
    assert_eq!(culprit["commits"], serde_json::json!(env.kubernetes.range(&k[25], &k[31])), "{view:#}");
    assert_eq!(culprit["commits"].as_array().unwrap().len(), 6);
    // The build with no versions is listed, with what it lacks.
    let unplaced = view["unplaced"].as_array().unwrap();
    assert_eq!(unplaced.len(), 1, "{view:#}");
    assert_eq!(unplaced[0]["build_id"], format!("{master}/150"));
    let problem = unplaced[0]["problems"][0].as_str().unwrap();
    assert!(problem.contains("no Kubernetes version") && problem.contains("no provider version"), "{problem}");

    // The release line: its own LKG and culprit range, on the release branches.
    let view = env.lkg_json(&["show", "acme", "--line", "1.36"]);
    assert_eq!(view["line"], "1.36");
    assert_eq!(view["lkg"]["kubernetes_commit"], r[2].as_str(), "{view:#}");
    assert_eq!(view["culprit"]["kubernetes"]["commits"], serde_json::json!(env.kubernetes.range(&r[2], &r[5])));
    assert!(view["unplaced"].as_array().unwrap().is_empty(), "{view:#}");
    let all = env.lkg_json(&["show"]);
    assert_eq!(all["lines"], serde_json::json!(["master", "1.36"]));

    // check: a full id, 7-, 9- and 12-character abbreviations, a tag, a CI version.
    for kubernetes in [k[25].clone(), k[25][..7].to_owned(), k[25][..9].to_owned(), k[25][..12].to_owned()] {
        for provider in [p[30].clone(), p[30][..7].to_owned()] {
            let output =
                env.lkg(&["check", "--provider", "acme", "--provider-version", &provider, "--kubernetes", &kubernetes]);
            assert!(output.status.success(), "{kubernetes} {provider}: {}", text(&output));
        }
    }
    let ci = ci_version(25, &k[25]);
    let output = env.lkg(&["check", "--provider", "acme", "--provider-version", &p[30], "--kubernetes", &ci]);
    assert!(output.status.success(), "{}", text(&output));
    let output = env.lkg(&[
        "check",
        "--provider",
        "acme",
        "--provider-version",
        "v1.36.0",
        "--kubernetes",
        "v1.36.0",
        "--line",
        "1.36",
    ]);
    assert!(output.status.success(), "tags on the release line: {}", text(&output));
    let bad =
        env.lkg(&["check", "--provider", "acme", "--provider-version", &p[30][..9], "--kubernetes", &k[31][..12]]);
    assert_eq!(bad.status.code(), Some(1), "{}", text(&bad));
    // A commit of another branch is unknown, and says why.
    let view = env.lkg_json(&["check", "--provider", "acme", "--provider-version", &p[30], "--kubernetes", &r[2]]);
    assert_eq!(view["verdict"], "unknown");
    let reason = view["reason"].as_str().unwrap();
    assert!(reason.contains("not among the 45 first-parent commits of master"), "{reason}");

    // The export: exactly one line, the bare version through every reader idiom.
    let file = root.join("ginko-test-package-version.env");
    let evidence = root.join("evidence.txt");
    let file_arg = file.display().to_string();
    let evidence_arg = evidence.display().to_string();
    let output = env.lkg(&["export", "--provider", "acme", "--file", &file_arg, "--evidence", &evidence_arg]);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), format!("{ci}\n"));
    assert_eq!(read_back(&file), [ci.clone(), ci.clone(), ci.clone()]);
    assert!(std::fs::read_to_string(&evidence).unwrap().contains(&format!("{master}/102")));
    for (format, expected) in [("sha", k[25].clone()), ("short-sha", k[25][..12].to_owned())] {
        let output = env.lkg(&["export", "--provider", "acme", "--format", format, "--file", &file_arg]);
        assert!(output.status.success(), "{}", text(&output));
        assert_eq!(read_back(&file), [expected.clone(), expected.clone(), expected.clone()], "{format}");
        assert!(String::from_utf8_lossy(&output.stdout).contains("evidence:"), "evidence goes to stdout");
    }
    let output = env.lkg(&["export", "--provider", "acme", "--line", "1.36", "--format", "json"]);
    let json = String::from_utf8(output.stdout).unwrap();
    assert_eq!(json.lines().count(), 1, "{json}");
    let export: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!((export["kubernetes_version"].as_str(), export["line"].as_str()), (Some("v1.36.0"), Some("1.36")));

    // The markers: one object a CI job reads with one `cat`.
    let output = env.lkg(&["publish-markers", "--store", &store_arg]);
    assert!(output.status.success(), "{}", text(&output));
    let marker = store.join("lkg/acme/master/latest-lkg.txt");
    assert_eq!(read_back(&marker), [ci.clone(), ci.clone(), ci.clone()]);
    assert_eq!(read_back(&store.join("lkg/acme/1.36/latest-lkg.txt"))[0], "v1.36.0");
    let marker_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.join("lkg/acme/master/latest-lkg.json")).unwrap()).unwrap();
    assert_eq!(marker_json["kubernetes_commit"], k[25].as_str());
    let again = env.lkg(&["publish-markers", "--store", &store_arg]);
    assert!(String::from_utf8_lossy(&again.stdout).starts_with("0 marker object(s) written"), "{}", text(&again));
}

#[test]
fn read_only_commands_refuse_a_database_that_does_not_exist() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("typo/x.sqlite");
    let database = format!("sqlite://{}", missing.display());
    for args in [vec!["lkg", "show"], vec!["lkg", "culprits", "local"], vec!["serve", "--listen", "127.0.0.1:0"]] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_harness"));
        cmd.env("CI", "true")
            .env_remove("RUST_LOG")
            .env_remove("HARNESS_CONFIG")
            .args(&args)
            .args(["--database", &database]);
        let output = cmd.output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{args:?}: {}", text(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(&format!("no index at {}", missing.display())), "{args:?}: {stderr}");
        // Someone setting up a new central service is told the commands that create the index.
        assert!(stderr.contains("`harness migrate`") && stderr.contains("`harness serve --migrate`"), "{stderr}");
        assert!(!tmp.path().join("typo").exists(), "{args:?} created the directory");
    }
}

#[test]
fn check_on_an_empty_index_says_no_build_ran_the_pair() {
    let tmp = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", tmp.path().join("index.sqlite").display());
    let migrate =
        Command::new(env!("CARGO_BIN_EXE_harness")).args(["migrate", "--database", &database]).output().unwrap();
    assert!(migrate.status.success(), "{}", text(&migrate));
    let output = Command::new(env!("CARGO_BIN_EXE_harness"))
        .env("CI", "true")
        .env_remove("HARNESS_CONFIG")
        .args(["lkg", "check", "--provider", "local", "--provider-version", "abc", "--kubernetes", "v1.37.1"])
        .args(["--database", &database])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("unknown (no build ran this pair: the index holds no runs of local yet)"),
        "{}",
        text(&output)
    );
}

//! The kubetest2 passthrough against a fake `kubetest2-fake` first on `PATH`.

use super::*;
use crate::deploy::test_support::*;

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

fn deployer(tmp: &Path, args: &[&str]) -> Kubetest2Deployer {
    let mut deployer = Kubetest2Deployer::new(
        "fake",
        &strings(args),
        "harness-test",
        &version(),
        &tmp.join("artifacts"),
        &tmp.join("repo"),
    )
    .unwrap()
    .with_state_dir(&tmp.join("state"));
    // Hermetic: not the kubeconfig of whoever runs the tests.
    deployer.default_kubeconfig = Some(tmp.join("home/.kube/config"));
    deployer
}

#[test]
fn flags_the_harness_sets_are_refused_in_args() {
    let tmp = tempfile::tempdir().unwrap();
    for flag in
        ["--up", "--down", "--test=exec", "--artifacts", "--artifacts=/x", "--rundir=/r", "--rundir-in-artifacts"]
    {
        let error =
            Kubetest2Deployer::new("gce", &strings(&["--gcp-zone=z", flag]), "c", &version(), tmp.path(), tmp.path())
                .err()
                .unwrap_or_else(|| panic!("{flag} accepted"))
                .to_string();
        assert!(error.starts_with(&format!("kubetest2-gce: remove `{flag}` from deployer.args: ")), "{error}");
    }
    // After a bare `--`, args are the tester's.
    Kubetest2Deployer::new("gce", &strings(&["--", "--test"]), "c", &version(), tmp.path(), tmp.path()).unwrap();
    // Flags that only start like ours are the deployer's.
    Kubetest2Deployer::new(
        "gce",
        &strings(&["--upgrade-to=x", "--test-infra"]),
        "c",
        &version(),
        tmp.path(),
        tmp.path(),
    )
    .unwrap();
}

#[test]
fn up_and_down_argv() {
    let tmp = tempfile::tempdir().unwrap();
    let args = ["--build", "--cluster-name={cluster}", "--version={kubernetes_version}", "--repo-root={repo_dir}"];
    let kubetest2 = deployer(tmp.path(), &args);
    let run_id = kubetest2.run_id();
    assert_eq!(run_id.len(), 36, "UUID-shaped: {run_id}");
    let artifacts = format!("--artifacts={}", tmp.path().join("artifacts/kubetest2-fake").display());
    let repo = format!("--repo-root={}", tmp.path().join("repo").display());
    assert_eq!(
        kubetest2.argv(true).unwrap(),
        strings(&[
            "--up",
            &artifacts,
            &format!("--run-id={run_id}"),
            "--build",
            "--cluster-name=harness-test",
            "--version=v1.37.1",
            &repo,
        ])
    );
    assert_eq!(
        kubetest2.argv(false).unwrap(),
        strings(&[
            "--down",
            &artifacts,
            &format!("--run-id={run_id}"),
            "--cluster-name=harness-test",
            "--version=v1.37.1",
            &repo
        ])
    );
    assert_eq!(kubetest2.name(), "kubetest2-fake");

    // The args' own run id is used, and tester args stay after `--`.
    let kubetest2 = deployer(tmp.path(), &["--run-id", "run-{cluster}", "--", "--build"]);
    assert_eq!(kubetest2.run_id(), "run-harness-test");
    assert_eq!(
        kubetest2.argv(false).unwrap(),
        strings(&["--down", &artifacts, "--run-id", "run-harness-test", "--", "--build"])
    );

    // A placeholder the run did not give is an error when rendering.
    let kubetest2 = deployer(tmp.path(), &["--ccm={ccm_binary}"]);
    assert!(kubetest2.argv(true).unwrap_err().to_string().contains("{ccm_binary}"));
    let kubetest2 = kubetest2.with_vars(Vars::from([(Placeholder::CcmBinary, "/bin/ccm".to_owned())]));
    assert_eq!(kubetest2.argv(true).unwrap().last().unwrap(), "--ccm=/bin/ccm");
}

#[test]
fn where_the_kubeconfig_is_looked_for() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let kubetest2 = deployer(tmp.path(), &["--kubeconfig={kubeconfig}", "--run-id=r1"]);
    let artifacts = tmp.path().join("artifacts/kubetest2-fake");
    assert_eq!(
        kubetest2.kubeconfig_candidates(),
        [
            state.join("kubeconfig"),
            state.join("kubeconfig"),
            state.join("rundir/r1/kubetest2-kubeconfig"),
            state.join("rundir/r1/kubeconfig"),
            artifacts.join("kubetest2-kubeconfig"),
            artifacts.join("kubeconfig"),
            tmp.path().join("home/.kube/config"),
        ]
    );
    let kubetest2 = deployer(tmp.path(), &["--kubeconfig", "out/kc", "--run-id=r1"]);
    assert_eq!(kubetest2.kubeconfig_candidates()[0], tmp.path().join("repo/out/kc"));
    assert_eq!(kubetest2.vars()[&Placeholder::Kubeconfig], state.join("kubeconfig").display().to_string());

    let listed = std::env::join_paths([tmp.path().join("absent"), tmp.path().join("present")]).unwrap();
    std::fs::write(tmp.path().join("present"), "").unwrap();
    assert_eq!(default_kubeconfig(Some(listed), None, Path::new("/")), Some(tmp.path().join("present")));
    assert_eq!(default_kubeconfig(None, Some("/h".into()), Path::new("/")), Some(PathBuf::from("/h/.kube/config")));
}

#[tokio::test]
async fn without_the_binary_up_says_how_to_install_it() {
    let sandbox = Sandbox::new();
    let mut kubetest2 = deployer(sandbox.path(), &[]).with_search_path(sandbox.empty_path());
    assert_missing(kubetest2.up().await, "kubetest2-fake", "go install sigs.k8s.io/kubetest2/kubetest2-fake@latest");
    kubetest2.down().await.unwrap();
}

/// A fake kubetest2 deployer in `sandbox`, recording `ARTIFACTS` and `KUBETEST2_RUN_DIR` too:
/// `--up` copies `kubeconfig`, if given, where kubetest2-gce writes its own
/// (`$KUBETEST2_RUN_DIR/<run id>/kubetest2-kubeconfig`). Returns a deployer with `args` that runs
/// it.
fn fake_kubetest2(sandbox: &Sandbox, kubeconfig: Option<&Path>, extra: &str, args: &[&str]) -> Kubetest2Deployer {
    let write = match kubeconfig {
        Some(source) => format!(
            r#"if [ "$1" = --up ]; then
  for a in "$@"; do case "$a" in --run-id=*) run_id="${{a#--run-id=}}";; esac; done
  mkdir -p "$KUBETEST2_RUN_DIR/$run_id" && cp '{}' "$KUBETEST2_RUN_DIR/$run_id/kubetest2-kubeconfig"
fi"#,
            source.display()
        ),
        None => String::new(),
    };
    let body = format!("{extra}\n{write}\necho \"kubetest2-fake $1 done\"\nexit 0\n");
    sandbox.fake_program("kubetest2-fake", &["ARTIFACTS", "KUBETEST2_RUN_DIR"], &body);
    deployer(sandbox.path(), args).with_search_path(sandbox.search_path())
}

#[tokio::test]
async fn up_is_up_dump_logs_and_down_run_the_deployer_binary() {
    let sandbox = Sandbox::new();
    let (_api, source) = sandbox.fake_cluster().await;
    let mut kubetest2 = fake_kubetest2(&sandbox, Some(&source), "", &["--build", "--num-nodes=2"]);
    let run_id = kubetest2.run_id();
    let (tmp, state) = (sandbox.path(), sandbox.path().join("state"));

    assert!(!kubetest2.is_up().await.unwrap());
    let early = kubetest2.dump_logs(&tmp.join("early")).await.unwrap_err().to_string();
    assert!(early.contains("has not brought one up"), "{early}");
    kubetest2.up().await.unwrap();
    let kubeconfig = state.join("rundir").join(&run_id).join("kubetest2-kubeconfig");
    assert_eq!(kubetest2.kubeconfig(), Some(kubeconfig.clone()));
    assert_eq!(kubetest2.vars()[&Placeholder::Kubeconfig], kubeconfig.display().to_string());
    assert_eq!(kubetest2.vars()[&Placeholder::Cluster], "harness-test");
    assert!(kubetest2.is_up().await.unwrap());
    let dump = tmp.join("dump");
    kubetest2.dump_logs(&dump).await.unwrap();
    assert!(std::fs::read_to_string(dump.join("nodes.json")).unwrap().contains("fake-node-1"));
    kubetest2.down().await.unwrap();
    assert_eq!(kubetest2.kubeconfig(), None);

    let calls = sandbox.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    let artifacts = tmp.join("artifacts/kubetest2-fake");
    assert_eq!(argv(&calls[0]), kubetest2.argv(true).unwrap());
    assert_eq!(argv(&calls[0])[0], "--up");
    assert!(argv(&calls[0]).contains(&"--build".to_owned()));
    assert_eq!(argv(&calls[1]), kubetest2.argv(false).unwrap());
    assert_eq!(argv(&calls[1])[0], "--down");
    assert!(!argv(&calls[1]).contains(&"--build".to_owned()));
    for call in &calls {
        assert!(argv(call).contains(&format!("--run-id={run_id}")), "the same run id for up and down");
        assert_eq!(value(call, "ARTIFACTS").unwrap(), artifacts.display().to_string());
        assert_eq!(value(call, "KUBETEST2_RUN_DIR").unwrap(), state.join("rundir").display().to_string());
        assert_eq!(value(call, "pwd").unwrap(), tmp.join("repo").display().to_string());
    }
    let log = std::fs::read_to_string(tmp.join("artifacts/deploy/kubetest2-fake-up.log")).unwrap();
    assert!(log.contains("$ kubetest2-fake --up") && log.contains("kubetest2-fake --up done"), "{log}");
}

#[tokio::test]
async fn the_kubeconfig_placeholder_tells_where_the_kubeconfig_goes() {
    let sandbox = Sandbox::new();
    let (_api, source) = sandbox.fake_cluster().await;
    // Like kubetest2-kind: writes the kubeconfig its --kubeconfig flag names.
    let extra = format!(
        r#"for a in "$@"; do
  case "$a" in --kubeconfig=*) [ "$1" = --up ] && cp '{}' "${{a#--kubeconfig=}}";; esac
done"#,
        source.display()
    );
    let mut kubetest2 = fake_kubetest2(&sandbox, None, &extra, &["--kubeconfig={kubeconfig}"]);
    kubetest2.up().await.unwrap();
    assert_eq!(kubetest2.kubeconfig(), Some(sandbox.path().join("state/kubeconfig")));
}

#[tokio::test]
async fn no_kubeconfig_after_up_says_what_to_add() {
    let sandbox = Sandbox::new();
    let mut kubetest2 = fake_kubetest2(&sandbox, None, "", &[]);
    let error = kubetest2.up().await.unwrap_err().to_string();
    assert!(
        error.starts_with("kubetest2-fake up failed: `kubetest2-fake --up` succeeded but no kubeconfig"),
        "{error}"
    );
    assert!(error.contains("add `--kubeconfig={kubeconfig}` to deployer.args"), "{error}");
    assert_eq!(error.lines().count(), 1, "{error}");
    // The partial up is torn down.
    kubetest2.down().await.unwrap();
}

#[tokio::test]
async fn a_failed_up_quotes_its_output() {
    let sandbox = Sandbox::new();
    let fail = "if [ \"$1\" = --up ]; then echo 'Error: gcp project must be set' >&2; exit 1; fi";
    let mut kubetest2 = fake_kubetest2(&sandbox, None, fail, &[]);
    assert_failed_run(
        kubetest2.up().await.unwrap_err(),
        "kubetest2-fake up failed: `kubetest2-fake --up --artifacts=",
        &["failed (exit status: 1)"],
        "Error: gcp project must be set",
    );
    kubetest2.down().await.unwrap();
    assert_eq!(sandbox.last_argv()[0], "--down");
}

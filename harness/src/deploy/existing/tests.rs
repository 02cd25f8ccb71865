//! The existing deployer against a fake API server; where it finds the kubeconfig.

use std::time::Duration;

use super::*;
use crate::deploy::test_support::*;

fn paths(paths: &[&Path]) -> Option<OsString> {
    Some(std::env::join_paths(paths).unwrap())
}

#[test]
fn the_kubeconfig_is_the_configured_one_else_kubeconfig_else_home() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let home = Some(PathBuf::from("/home/someone"));
    let relative = locate(Some(Path::new("conf/kubeconfig")), paths(&[Path::new("/env")]), home.clone(), cwd).unwrap();
    assert_eq!(relative, (cwd.join("conf/kubeconfig"), Source::Configured));
    let tilde = locate(Some(Path::new("~/.kube/prod")), None, home.clone(), cwd).unwrap();
    assert_eq!(tilde, (PathBuf::from("/home/someone/.kube/prod"), Source::Configured));
    let env = locate(None, paths(&[Path::new("/etc/kube.conf")]), home.clone(), cwd).unwrap();
    assert_eq!(env, (PathBuf::from("/etc/kube.conf"), Source::Env));
    let empty_env = locate(None, Some(OsString::new()), home.clone(), cwd).unwrap();
    assert_eq!(empty_env, (PathBuf::from("/home/someone/.kube/config"), Source::Home));
    assert!(locate(None, None, None, cwd).unwrap_err().contains("no home dir"));

    // Several files: those that exist; one is used as it is, more are merged.
    let (a, b) = (cwd.join("a"), cwd.join("b"));
    std::fs::write(&a, "").unwrap();
    let one = locate(None, paths(&[&a, &cwd.join("missing")]), home.clone(), cwd).unwrap();
    assert_eq!(one, (a.clone(), Source::Env));
    std::fs::write(&b, "").unwrap();
    let two = locate(None, paths(&[&a, &cwd.join("missing"), &b]), home.clone(), cwd).unwrap();
    assert_eq!(two.1, Source::Merged(vec![a.clone(), b.clone()]));
    let none = locate(None, paths(&[&cwd.join("x"), &cwd.join("y")]), home, cwd).unwrap_err();
    assert!(none.contains("none of the files $KUBECONFIG lists exists"), "{none}");
}

#[tokio::test]
async fn a_kubeconfig_list_is_merged_into_one_file() {
    let tmp = tempfile::tempdir().unwrap();
    let api = FakeApi::start().await;
    let first = tmp.path().join("first");
    api.write_kubeconfig(&first);
    let second = tmp.path().join("second");
    let other = "apiVersion: v1\nkind: Config\nclusters:\n- name: other\n  cluster:\n    server: https://other:6443\n\
                 contexts:\n- name: other-context\n  context:\n    cluster: other\n    user: other\n\
                 users:\n- name: other\n  user: {}\ncurrent-context: other-context\n";
    std::fs::write(&second, other).unwrap();
    let state = tmp.path().join("state");
    let mut existing = ExistingDeployer::locate(None, paths(&[&first, &second]), None, tmp.path(), &state).unwrap();
    let merged = existing.kubeconfig().unwrap();
    assert!(merged.starts_with(state.join("existing")), "{}", merged.display());
    let file = Kubeconfig::read_from(&merged).unwrap();
    assert_eq!(file.current_context.as_deref(), Some("fake-context"), "the first file's current context wins");
    let contexts: Vec<&str> = file.contexts.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(contexts, ["fake-context", "other-context"]);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&merged).unwrap().permissions().mode() & 0o777, 0o600);
    existing.up().await.unwrap();
    assert!(matches!(existing.source, Source::Merged(_)));
}

#[tokio::test]
async fn up_checks_the_cluster_answers_and_down_leaves_it() {
    let tmp = tempfile::tempdir().unwrap();
    let api = FakeApi::start().await;
    let kubeconfig = tmp.path().join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let mut existing = ExistingDeployer::locate(Some(&kubeconfig), None, None, tmp.path(), tmp.path()).unwrap();
    assert_eq!(existing.name(), "existing");
    existing.up().await.unwrap();
    assert!(existing.is_up().await.unwrap());
    assert_eq!(existing.kubeconfig(), Some(kubeconfig.clone()));
    let vars = existing.vars();
    assert_eq!(vars[&Placeholder::Cluster], "fake-context");
    assert_eq!(vars[&Placeholder::Kubeconfig], kubeconfig.display().to_string());
    existing.down().await.unwrap();
    existing.down().await.unwrap();
    assert!(existing.is_up().await.unwrap(), "down leaves the cluster alone");
    assert!(existing.process_host().is_none(), "a CCM process beside someone else's cluster is not ours to run");
}

#[tokio::test]
async fn dump_logs_writes_a_cluster_info_dump() {
    let tmp = tempfile::tempdir().unwrap();
    let api = FakeApi::start().await;
    let kubeconfig = tmp.path().join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let existing = ExistingDeployer::locate(Some(&kubeconfig), None, None, tmp.path(), tmp.path()).unwrap();
    let dir = tmp.path().join("dump");
    existing.dump_logs(&dir).await.unwrap();
    let json = |path: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(path)).unwrap()).unwrap()
    };
    assert_eq!(json("version.json")["gitVersion"], "v1.37.1");
    assert_eq!(json("nodes.json")["items"][0]["metadata"]["name"], "fake-node-1");
    assert_eq!(json("kube-system/pods.json")["items"][0]["metadata"]["name"], "fake-ccm-0");
    for list in ["events", "services", "daemonsets", "deployments"] {
        assert!(json(&format!("kube-system/{list}.json"))["items"].as_array().unwrap().is_empty());
    }
    let logs = std::fs::read_to_string(dir.join("kube-system/fake-ccm-0/logs.txt")).unwrap();
    // The restarted container's previous log first, then its current one; the other's current one.
    let headers: Vec<&str> = logs.lines().filter(|l| l.starts_with("==== START")).collect();
    assert_eq!(
        headers,
        [
            "==== START logs for previous container ccm of pod kube-system/fake-ccm-0 ====",
            "==== START logs for container ccm of pod kube-system/fake-ccm-0 ====",
            "==== START logs for container sidecar of pod kube-system/fake-ccm-0 ====",
        ]
    );
    assert!(logs.contains("container=ccm") && logs.contains("previous=true"), "{logs}");
    assert!(logs.contains(&format!("tailLines={LOG_TAIL_LINES}")), "{logs}");
}

#[tokio::test]
async fn up_fails_in_one_line_naming_the_kubeconfig_and_server() {
    let tmp = tempfile::tempdir().unwrap();
    let kubeconfig = tmp.path().join("kubeconfig");
    let url = closed_url().await;
    write_kubeconfig(&kubeconfig, &url);
    let timeouts = Timeouts { api: Duration::from_secs(2), ..ExistingDeployer::DEFAULT_TIMEOUTS };
    let mut existing = ExistingDeployer::locate(Some(&kubeconfig), None, None, tmp.path(), tmp.path())
        .unwrap()
        .with_timeouts(timeouts);
    let error = existing.up().await.unwrap_err().to_string();
    assert_eq!(error.lines().count(), 1, "{error}");
    assert!(error.starts_with("existing up failed: the API server "), "{error}");
    assert!(error.contains(&url) && error.contains(&kubeconfig.display().to_string()), "{error}");
    assert!(error.contains("(kubeconfig from deployer.kubeconfig)"), "{error}");
    assert!(error.contains("get nodes`"), "says what to run: {error}");
    assert!(!existing.is_up().await.unwrap());
    assert!(existing.dump_logs(&tmp.path().join("dump")).await.is_err());
}

#[tokio::test]
async fn up_fails_without_nodes() {
    let tmp = tempfile::tempdir().unwrap();
    let api = FakeApi::start().await;
    api.with_nodes.store(false, std::sync::atomic::Ordering::SeqCst);
    let kubeconfig = tmp.path().join("kubeconfig");
    api.write_kubeconfig(&kubeconfig);
    let mut existing = ExistingDeployer::locate(Some(&kubeconfig), None, None, tmp.path(), tmp.path()).unwrap();
    let error = existing.up().await.unwrap_err().to_string();
    assert!(error.contains("has no nodes registered"), "{error}");
}

#[test]
fn a_missing_or_contextless_kubeconfig_is_refused_with_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope");
    let error = ExistingDeployer::locate(Some(&missing), None, None, tmp.path(), tmp.path()).err().unwrap().to_string();
    assert!(
        error.starts_with(&format!("existing: kubeconfig {} (deployer.kubeconfig): ", missing.display())),
        "{error}"
    );
    assert!(
        error.ends_with("set `deployer.kubeconfig` in providers.yaml, or $KUBECONFIG, to the cluster's kubeconfig")
    );
    assert_eq!(error.lines().count(), 1, "{error}");

    let home = tmp.path().join("home");
    let error =
        ExistingDeployer::locate(None, None, Some(home.clone()), tmp.path(), tmp.path()).err().unwrap().to_string();
    assert!(
        error.contains(&format!("{} (the default ~/.kube/config)", home.join(".kube/config").display())),
        "{error}"
    );

    let contextless = tmp.path().join("contextless");
    std::fs::write(&contextless, "apiVersion: v1\nkind: Config\nclusters: []\n").unwrap();
    let error =
        ExistingDeployer::locate(Some(&contextless), None, None, tmp.path(), tmp.path()).err().unwrap().to_string();
    assert!(error.contains("has no current-context") && error.contains("config use-context"), "{error}");
}

/// Against a real cluster, when `HARNESS_TEST_KUBECONFIG` names its kubeconfig (e.g. one from
/// `harness cluster up`): `cargo test -p harness --lib deploy::existing -- --ignored`.
#[tokio::test]
#[ignore = "needs a real cluster: set HARNESS_TEST_KUBECONFIG"]
async fn against_a_real_cluster() {
    let kubeconfig = PathBuf::from(std::env::var_os("HARNESS_TEST_KUBECONFIG").expect("HARNESS_TEST_KUBECONFIG"));
    let mut existing = ExistingDeployer::new(Some(&kubeconfig)).unwrap();
    existing.up().await.unwrap();
    assert!(existing.is_up().await.unwrap());
    let tmp = tempfile::tempdir().unwrap();
    existing.dump_logs(tmp.path()).await.unwrap();
    let nodes: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(tmp.path().join("nodes.json")).unwrap()).unwrap();
    assert!(!nodes["items"].as_array().unwrap().is_empty());
    existing.down().await.unwrap();
}

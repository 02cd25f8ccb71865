//! The kind deployer without kind: command lines, the generated config, and the whole deployer
//! against a fake `kind` first on `PATH`.

use std::time::Duration;

use serde_yaml_ng::Value;

use super::*;
use crate::deploy::test_support::*;

fn deployer(tmp: &Path) -> KindDeployer {
    KindDeployer::new(None, None, "harness-test", &version(), &tmp.join("artifacts"), &tmp.join("repo"))
        .with_state_dir(&tmp.join("state"))
}

fn get<'a>(value: &'a Value, path: &[&str]) -> &'a Value {
    path.iter().fold(value, |value, key| value.get(*key).unwrap_or_else(|| panic!("no `{key}` in {value:?}")))
}

/// The patches of a generated config, parsed.
fn patches(config: &Value) -> Vec<Value> {
    get(config, &["kubeadmConfigPatches"])
        .as_sequence()
        .expect("a list")
        .iter()
        .map(|patch| serde_yaml_ng::from_str(patch.as_str().expect("a string patch")).expect("a YAML patch"))
        .collect()
}

fn patch<'a>(patches: &'a [Value], api_version: &str, kind: &str) -> &'a Value {
    let mut matching = patches.iter().filter(|p| p["apiVersion"] == api_version && p["kind"] == kind);
    let found = matching.next().unwrap_or_else(|| panic!("no {api_version} {kind} patch"));
    assert!(matching.next().is_none(), "one {api_version} {kind} patch");
    found
}

fn assert_external_cloud_provider(config: &Value) {
    let patches = patches(config);
    let v1beta3 = "kubeadm.k8s.io/v1beta3";
    let cluster = patch(&patches, v1beta3, "ClusterConfiguration");
    assert_eq!(get(cluster, &["controllerManager", "extraArgs", "cloud-provider"]), "external");
    for kind in ["InitConfiguration", "JoinConfiguration"] {
        let node = patch(&patches, v1beta3, kind);
        assert_eq!(get(node, &["nodeRegistration", "kubeletExtraArgs", "cloud-provider"]), "external");
    }
    // v1beta4: lists of {name, value}.
    let v1beta4 = "kubeadm.k8s.io/v1beta4";
    let external = |args: &Value| {
        let args = args.as_sequence().expect("v1beta4 args are a list");
        assert_eq!(args.len(), 1);
        assert_eq!(args[0]["name"], "cloud-provider");
        assert_eq!(args[0]["value"], "external");
    };
    external(get(patch(&patches, v1beta4, "ClusterConfiguration"), &["controllerManager", "extraArgs"]));
    for kind in ["InitConfiguration", "JoinConfiguration"] {
        external(get(patch(&patches, v1beta4, kind), &["nodeRegistration", "kubeletExtraArgs"]));
    }
    assert_eq!(patches.len(), 6);
}

#[test]
fn the_generated_config_makes_the_cloud_provider_external() {
    let config: Value = serde_yaml_ng::from_str(&kind_config(None).unwrap()).unwrap();
    assert_eq!(config["kind"], "Cluster");
    assert_eq!(config["apiVersion"], "kind.x-k8s.io/v1alpha4");
    let roles: Vec<&str> =
        get(&config, &["nodes"]).as_sequence().unwrap().iter().map(|n| n["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["control-plane", "worker", "worker"]);
    assert_external_cloud_provider(&config);
}

#[test]
fn a_user_config_is_kept_and_gets_the_patches_after_its_own() {
    let user = r#"
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
name: ignored-for-the-flag
networking:
  ipFamily: dual
nodes:
- role: control-plane
  kubeadmConfigPatches:
  - |
    kind: InitConfiguration
    nodeRegistration:
      kubeletExtraArgs:
        node-labels: "ingress-ready=true"
- role: worker
kubeadmConfigPatches:
- |
  kind: ClusterConfiguration
  apiServer:
    extraArgs:
      v: "5"
"#;
    let config: Value = serde_yaml_ng::from_str(&kind_config(Some(user)).unwrap()).unwrap();
    assert_eq!(get(&config, &["networking", "ipFamily"]), "dual");
    assert_eq!(config["name"], "ignored-for-the-flag");
    let nodes = get(&config, &["nodes"]).as_sequence().unwrap();
    assert_eq!(nodes.len(), 2);
    assert!(nodes[0]["kubeadmConfigPatches"][0].as_str().unwrap().contains("ingress-ready=true"));
    let all = get(&config, &["kubeadmConfigPatches"]).as_sequence().unwrap();
    assert_eq!(all.len(), 7);
    assert!(all[0].as_str().unwrap().contains(r#"v: "5""#), "the user's patch first: {all:?}");
    let ours = Value::Mapping(serde_yaml_ng::Mapping::from_iter([(
        "kubeadmConfigPatches".into(),
        Value::Sequence(all[1..].to_vec()),
    )]));
    assert_external_cloud_provider(&ours);

    let null_patches = "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nkubeadmConfigPatches:\n";
    let config: Value = serde_yaml_ng::from_str(&kind_config(Some(null_patches)).unwrap()).unwrap();
    assert_external_cloud_provider(&config);
    assert!(config.get("nodes").is_none(), "kind's default nodes for a user config without any");
}

#[test]
fn a_config_that_is_not_a_kind_cluster_is_refused() {
    let wrong_kind = kind_config(Some("kind: Pod\napiVersion: v1\n")).unwrap_err();
    assert!(wrong_kind.contains("not a kind cluster config") && wrong_kind.contains("`Pod`"), "{wrong_kind}");
    assert!(kind_config(Some("- a\n- list\n")).unwrap_err().contains("not a YAML mapping"));
    assert!(kind_config(Some("")).unwrap_err().contains("empty"));
    assert!(kind_config(Some("kind: [unclosed")).unwrap_err().contains("not valid YAML"));
    let bad_patches = "kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nkubeadmConfigPatches: {a: b}\n";
    assert!(kind_config(Some(bad_patches)).unwrap_err().contains("not a list"));
}

#[test]
fn command_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let kind = deployer(tmp.path());
    let state = tmp.path().join("state");
    let artifacts = tmp.path().join("artifacts");
    let strings = |args: &[&str]| args.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    assert_eq!(kind.image().unwrap(), "kindest/node:v1.37.1");
    assert_eq!(
        kind.create_args(&kind.image().unwrap()),
        strings(&[
            "create",
            "cluster",
            "--name",
            "harness-test",
            "--image",
            "kindest/node:v1.37.1",
            "--config",
            &artifacts.join("deploy/kind-config.yaml").display().to_string(),
            "--kubeconfig",
            &state.join("kubeconfig").display().to_string(),
            "--wait",
            "5m",
        ])
    );
    assert_eq!(
        kind.delete_args(),
        strings(&[
            "delete",
            "cluster",
            "--name",
            "harness-test",
            "--kubeconfig",
            &state.join("kubeconfig").display().to_string()
        ])
    );
    assert_eq!(
        kind.export_logs_args(Path::new("/logs")),
        strings(&["export", "logs", "/logs", "--name", "harness-test"])
    );
    assert_eq!(kind.vars()[&Placeholder::Cluster], "harness-test");
    assert_eq!(kind.vars()[&Placeholder::Kubeconfig], state.join("kubeconfig").display().to_string());
    assert_eq!(kind.name(), "kind");
}

#[test]
fn the_image_may_use_placeholders() {
    let tmp = tempfile::tempdir().unwrap();
    let kind = KindDeployer::new(
        Some(Path::new("hack/kind.yaml")),
        Some("registry.example/node:{kubernetes_version}-{provider_version}"),
        "c",
        &version(),
        tmp.path(),
        Path::new("/checkout"),
    );
    let missing = kind.image().unwrap_err().to_string();
    assert!(missing.contains("{provider_version}"), "{missing}");
    let kind = kind.with_vars(Vars::from([(Placeholder::ProviderVersion, "abc123".to_owned())]));
    assert_eq!(kind.image().unwrap(), "registry.example/node:v1.37.1-abc123");
    assert_eq!(kind.user_config.as_deref(), Some(Path::new("/checkout/hack/kind.yaml")));
}

#[tokio::test]
async fn without_kind_on_path_up_says_how_to_install_it() {
    let sandbox = Sandbox::new();
    let mut kind = deployer(sandbox.path()).with_search_path(sandbox.empty_path());
    assert_missing(kind.up().await, "kind", "go install sigs.k8s.io/kind@latest");
    // Nothing was started, so there is nothing to delete (and no kind needed for it).
    kind.down().await.unwrap();
    assert_missing(kind.dump_logs(&sandbox.path().join("logs")).await, "kind", "install kind");
}

/// A fake `kind` in `sandbox`: `create cluster` copies `kubeconfig` to its `--kubeconfig` and
/// saves its `--config` next to the record; `export logs DIR` writes a file there. Returns a
/// deployer that runs it.
fn fake_kind(sandbox: &Sandbox, kubeconfig: &Path, extra: &str) -> KindDeployer {
    let body = format!(
        r#"
{extra}
if [ "$1 $2" = "create cluster" ]; then
  prev=""
  for a in "$@"; do
    [ "$prev" = "--kubeconfig" ] && cp '{kubeconfig}' "$a"
    [ "$prev" = "--config" ] && cp "$a" '{saved}'
    prev="$a"
  done
  echo "Creating cluster ..."
fi
if [ "$1 $2" = "export logs" ]; then mkdir -p "$3" && echo "exported" > "$3/kind-version.txt"; fi
exit 0
"#,
        kubeconfig = kubeconfig.display(),
        saved = sandbox.record.with_extension("config").display(),
    );
    sandbox.fake_program("kind", &[], &body);
    deployer(sandbox.path()).with_search_path(sandbox.search_path())
}

#[tokio::test]
async fn up_is_up_dump_logs_and_down_call_kind_as_expected() {
    let sandbox = Sandbox::new();
    let (_api, source) = sandbox.fake_cluster().await;
    let mut kind = fake_kind(&sandbox, &source, "");
    let state = sandbox.path().join("state");
    let artifacts = sandbox.path().join("artifacts");

    assert_eq!(kind.kubeconfig(), None);
    kind.up().await.unwrap();
    assert_eq!(kind.kubeconfig(), Some(state.join("kubeconfig")));
    assert!(kind.is_up().await.unwrap());
    let logs = sandbox.path().join("cluster-logs");
    kind.dump_logs(&logs).await.unwrap();
    assert_eq!(std::fs::read_to_string(logs.join("kind-version.txt")).unwrap(), "exported\n");
    kind.down().await.unwrap();
    kind.down().await.unwrap();
    assert_eq!(kind.kubeconfig(), None);

    let calls = sandbox.calls();
    assert_eq!(calls.len(), 4, "{calls:?}");
    assert_eq!(argv(&calls[0]), kind.create_args("kindest/node:v1.37.1"));
    assert_eq!(argv(&calls[1]), kind.export_logs_args(&logs));
    assert_eq!(argv(&calls[2]), kind.delete_args());
    assert_eq!(argv(&calls[3]), kind.delete_args());
    // kind runs in the provider's checkout, so that relative paths of its config resolve there.
    assert_eq!(value(&calls[0], "pwd").unwrap(), sandbox.path().join("repo").display().to_string());
    // The config it got is the generated one, also left in the artifacts.
    let given = std::fs::read_to_string(sandbox.record.with_extension("config")).unwrap();
    assert_external_cloud_provider(&serde_yaml_ng::from_str(&given).unwrap());
    assert!(artifacts.join("deploy/kind-config.yaml").is_file());
    // Every call's output is in its log, after the command line.
    let create_log = std::fs::read_to_string(artifacts.join("deploy/kind-create-cluster.log")).unwrap();
    assert!(create_log.contains("$ kind create cluster --name harness-test"), "{create_log}");
    assert!(create_log.contains("Creating cluster ..."), "{create_log}");
    let delete_log = std::fs::read_to_string(artifacts.join("deploy/kind-delete-cluster.log")).unwrap();
    assert_eq!(delete_log.matches("$ kind delete cluster").count(), 2, "{delete_log}");
}

#[tokio::test]
async fn a_failed_create_quotes_kinds_output_and_says_what_to_do() {
    let sandbox = Sandbox::new();
    let fail = r#"if [ "$1" = create ]; then
  echo 'Creating cluster "harness-test" ...'
  echo 'ERROR: failed to create cluster: node(s) already exist for a cluster with the name "harness-test"' >&2
  exit 1
fi"#;
    let mut kind = fake_kind(&sandbox, Path::new("/nonexistent"), fail);
    assert_failed_run(
        kind.up().await.unwrap_err(),
        "kind up failed: `kind create cluster --name harness-test",
        &["exit status: 1", "delete it with `kind delete cluster --name harness-test`"],
        "node(s) already exist",
    );
    // A partial up is torn down.
    kind.down().await.unwrap();
    assert_eq!(sandbox.last_argv(), kind.delete_args());
}

#[tokio::test]
async fn a_cluster_that_does_not_answer_after_create_fails_up() {
    let sandbox = Sandbox::new();
    let source = sandbox.dead_cluster().await;
    let timeouts = Timeouts { api: Duration::from_secs(2), ..KindDeployer::DEFAULT_TIMEOUTS };
    let mut kind = fake_kind(&sandbox, &source, "").with_timeouts(timeouts);
    let error = kind.up().await.unwrap_err().to_string();
    assert!(error.contains("succeeded but the cluster does not answer"), "{error}");
    assert!(error.contains("does not answer (GET /version"), "{error}");
    assert_eq!(error.lines().count(), 1, "{error}");
    assert!(!kind.is_up().await.unwrap());
}

#[tokio::test]
async fn a_missing_user_config_is_reported_before_kind_runs() {
    let sandbox = Sandbox::new();
    fake_kind(&sandbox, Path::new("/nonexistent"), "");
    let tmp = sandbox.path();
    let mut kind = KindDeployer::new(Some(Path::new("no-such.yaml")), None, "c", &version(), tmp, &tmp.join("repo"))
        .with_state_dir(&tmp.join("state"))
        .with_search_path(sandbox.search_path());
    let error = kind.up().await.unwrap_err().to_string();
    assert!(error.contains("no-such.yaml (deployer.config)"), "{error}");
    assert!(sandbox.calls().is_empty());
    kind.down().await.unwrap();
    assert!(sandbox.calls().is_empty(), "nothing was created, nothing is deleted");
}

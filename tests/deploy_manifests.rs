//! The manifests that run `harness serve` as the central service (deploy/): a real kube-apiserver
//! accepts every one in a server-side dry run, with strict field validation and without a warning
//! from the `restricted` Pod Security level, and rejects broken copies; and the manifests agree with
//! each other (probes, ports, selectors, image, config path, Secret names).
//!
//! Needs the toolchains installed (`harness toolchain install`, which `scripts/test` runs); without
//! them the cluster test fails with the command to run, rather than skip.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common;

use config::ProvidersConfig;
use serde::Deserialize;
use serde_yaml_ng::Value;

const NAMESPACE: &str = "harness";
/// Applied on its own, before the rest (deploy/README.md); every other manifest is in the kustomization.
const MIGRATE_JOB: &str = "migrate-job.yaml";

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// The Kubernetes objects of deploy/: (file name, object), kustomization.yaml left out.
fn objects() -> Vec<(String, Value)> {
    let mut files: Vec<_> = std::fs::read_dir(deploy_dir())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".yaml") && name != "kustomization.yaml")
        .collect();
    files.sort();
    let mut objects = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(deploy_dir().join(&file)).unwrap();
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let value = Value::deserialize(document).unwrap_or_else(|e| panic!("deploy/{file}: {e}"));
            if !value.is_null() {
                objects.push((file.clone(), value));
            }
        }
    }
    objects
}

fn the<'a>(objects: &'a [(String, Value)], kind: &str) -> &'a Value {
    let found: Vec<_> = objects.iter().filter(|(_, o)| o["kind"] == kind).map(|(_, o)| o).collect();
    assert_eq!(found.len(), 1, "deploy/ should hold exactly one {kind}");
    found[0]
}

fn str_of(value: &Value) -> &str {
    value.as_str().unwrap_or_else(|| panic!("not a string: {value:?}"))
}

fn name_of(object: &Value) -> &str {
    str_of(&object["metadata"]["name"])
}

/// kubectl's name for an object: `deployment.apps/harness`, `service/harness`.
fn kubectl_name(object: &Value) -> String {
    let kind = str_of(&object["kind"]).to_lowercase();
    match str_of(&object["apiVersion"]).split_once('/') {
        Some((group, _)) => format!("{kind}.{group}/{}", name_of(object)),
        None => format!("{kind}/{}", name_of(object)),
    }
}

/// Whether every label `selector` asks for is among `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let selector = selector.as_mapping().expect("a selector");
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn container<'a>(pod_spec: &'a Value, name: &str) -> &'a Value {
    pod_spec["containers"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

/// The number a probe's or Service's port means: a number, or the name of one of `container`'s ports.
fn resolve_port(port: &Value, container: &Value) -> u64 {
    if let Some(number) = port.as_u64() {
        return number;
    }
    let name = str_of(port);
    let ports = container["ports"].as_sequence().unwrap();
    let named = ports.iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("no container port named {name}"));
    named["containerPort"].as_u64().unwrap()
}

/// The Secret and key an environment variable of `container` is read from.
fn secret_ref<'a>(container: &'a Value, variable: &str) -> (&'a str, &'a str, bool) {
    let env = container["env"].as_sequence().unwrap();
    let var = env.iter().find(|e| e["name"] == variable).unwrap_or_else(|| panic!("no {variable} in env"));
    let reference = &var["valueFrom"]["secretKeyRef"];
    (str_of(&reference["name"]), str_of(&reference["key"]), reference["optional"].as_bool().unwrap_or(false))
}

fn env_value<'a>(container: &'a Value, variable: &str) -> Option<&'a str> {
    container["env"].as_sequence().unwrap().iter().find(|e| e["name"] == variable).and_then(|e| e["value"].as_str())
}

fn arg_after<'a>(container: &'a Value, flag: &str) -> &'a str {
    let args: Vec<&str> = container["args"].as_sequence().unwrap().iter().map(str_of).collect();
    let at = args.iter().position(|a| *a == flag).unwrap_or_else(|| panic!("no {flag} in {args:?}"));
    args[at + 1]
}

/// The path `volume`'s mount in `container` is at.
fn mount_of<'a>(container: &'a Value, volume: &str) -> &'a str {
    let mounts = container["volumeMounts"].as_sequence().unwrap();
    let mount = mounts.iter().find(|m| m["name"] == volume).unwrap_or_else(|| panic!("{volume} is not mounted"));
    str_of(&mount["mountPath"])
}

fn volume<'a>(pod_spec: &'a Value, name: &str) -> &'a Value {
    let volumes = pod_spec["volumes"].as_sequence().unwrap();
    volumes.iter().find(|v| v["name"] == name).unwrap_or_else(|| panic!("no volume {name}"))
}

/// Non-root, read-only root filesystem, with /tmp a writable emptyDir.
fn assert_hardened(what: &str, pod_spec: &Value, container: &Value) {
    assert_eq!(pod_spec["securityContext"]["runAsNonRoot"], true, "{what}");
    assert_eq!(pod_spec["automountServiceAccountToken"], false, "{what}");
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true, "{what}");
    assert_eq!(container["securityContext"]["allowPrivilegeEscalation"], false, "{what}");
    let tmp = container["volumeMounts"].as_sequence().unwrap().iter().find(|m| m["mountPath"] == "/tmp");
    let tmp = tmp.unwrap_or_else(|| panic!("{what}: nothing writable at /tmp"));
    assert!(volume(pod_spec, str_of(&tmp["name"])).get("emptyDir").is_some(), "{what}: /tmp is not an emptyDir");
    for resource in ["requests", "limits"] {
        assert!(container["resources"][resource]["memory"].is_string(), "{what}: no memory {resource}");
    }
}

#[test]
fn the_manifests_agree_with_each_other() {
    let objects = objects();

    // Every manifest but the migration Job is in the kustomization, so `apply -k` misses none.
    let kustomization: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(deploy_dir().join("kustomization.yaml")).unwrap()).unwrap();
    let listed: BTreeSet<&str> = kustomization["resources"].as_sequence().unwrap().iter().map(str_of).collect();
    let files: BTreeSet<&str> = objects.iter().map(|(f, _)| f.as_str()).filter(|f| *f != MIGRATE_JOB).collect();
    assert_eq!(listed, files, "kustomization.yaml's resources");
    for (file, object) in &objects {
        assert!(object["metadata"].get("namespace").is_none(), "deploy/{file}: the namespace is `apply -n`'s");
        assert_ne!(object["kind"], "Secret", "deploy/{file}: Secrets are created by hand (deploy/README.md)");
    }

    let deployment = the(&objects, "Deployment");
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"], 2);
    assert_eq!(spec["strategy"]["type"], "RollingUpdate");
    assert_eq!(spec["strategy"]["rollingUpdate"]["maxUnavailable"], 0);
    let pod_labels = &spec["template"]["metadata"]["labels"];
    assert!(selects(&spec["selector"]["matchLabels"], pod_labels));
    let pod = &spec["template"]["spec"];
    let serve = container(pod, "harness");
    // The Prow jobs' image at the workspace's release tag, never :latest.
    let image = config::prow::ProwOptions::default().image;
    assert_eq!(serve["image"], image.as_str(), "the Prow jobs' image");
    assert_eq!(serve["args"][0], "serve");
    assert_hardened("the Deployment", pod, serve);
    assert!(pod["terminationGracePeriodSeconds"].as_u64().is_some());

    // One port, the one `--listen` binds, which the probes, the Service and Prometheus use.
    let listen = arg_after(serve, "--listen");
    let port: u64 = listen.rsplit_once(':').unwrap().1.parse().unwrap();
    assert_eq!(resolve_port(&Value::from("http"), serve), port, "the http port is not --listen's {listen}");
    for (probe, path) in [("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        let get = &serve[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert_eq!(resolve_port(&get["port"], serve), port, "{probe}'s port");
    }
    let annotations = &spec["template"]["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"], "true");
    assert_eq!(annotations["prometheus.io/port"], port.to_string().as_str());
    assert_eq!(annotations["prometheus.io/path"], "/metrics");

    let service = the(&objects, "Service");
    assert_eq!(service["spec"]["type"], "ClusterIP");
    assert!(selects(&service["spec"]["selector"], pod_labels), "the Service does not select the pods");
    let service_port = &service["spec"]["ports"][0];
    assert_eq!((&service_port["name"], &service_port["port"]), (&Value::from("http"), &Value::from(80)));
    assert_eq!(resolve_port(&service_port["targetPort"], serve), port, "the Service's targetPort");

    let budget = the(&objects, "PodDisruptionBudget");
    assert_eq!(budget["spec"]["minAvailable"], 1);
    assert!(selects(&budget["spec"]["selector"]["matchLabels"], pod_labels));

    let account = the(&objects, "ServiceAccount");
    assert_eq!(pod["serviceAccountName"], name_of(account));
    assert_eq!(account["automountServiceAccountToken"], false);

    // --config names providers.yaml in the ConfigMap's mount, and that file is a valid providers file.
    let config_map = the(&objects, "ConfigMap");
    let config_path = Path::new(arg_after(serve, "--config"));
    let config_volume =
        pod["volumes"].as_sequence().unwrap().iter().find(|v| v["configMap"]["name"] == name_of(config_map));
    let config_volume = config_volume.expect("the ConfigMap is not a volume of the Deployment");
    assert_eq!(Path::new(mount_of(serve, str_of(&config_volume["name"]))), config_path.parent().unwrap());
    let key = config_path.file_name().unwrap().to_str().unwrap();
    let providers = str_of(&config_map["data"][key]);
    if let Err(e) = ProvidersConfig::parse(providers, config_path) {
        panic!("the ConfigMap's {key} is not a valid providers file: {e}");
    }

    // The database's Secret is required; the store's credentials are optional.
    assert_eq!(secret_ref(serve, "DATABASE_URL"), ("harness-database", "DATABASE_URL", false));
    for variable in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT"] {
        assert_eq!(secret_ref(serve, variable), ("harness-store-credentials", variable, true));
    }
    let key_file = Path::new(env_value(serve, "GOOGLE_APPLICATION_CREDENTIALS").unwrap());
    let key_volume = volume(pod, "store-credentials");
    assert_eq!(key_volume["secret"]["secretName"], "harness-store-credentials");
    assert_eq!(key_volume["secret"]["optional"], true);
    assert_eq!(Path::new(mount_of(serve, "store-credentials")), key_file.parent().unwrap());
    assert!(env_value(serve, "HARNESS_STORE").is_some());

    // The migration Job: same image and database, pods the Service and the budget do not count.
    let job = the(&objects, "Job");
    let job_pod = &job["spec"]["template"];
    let migrate = container(&job_pod["spec"], "migrate");
    assert_eq!(migrate["image"], serve["image"]);
    assert_eq!(migrate["command"], serve["command"]);
    assert_eq!(migrate["args"], Value::from(vec!["migrate"]));
    assert_eq!(secret_ref(migrate, "DATABASE_URL"), secret_ref(serve, "DATABASE_URL"));
    assert_hardened("the migration Job", &job_pod["spec"], migrate);
    assert!(job["spec"]["backoffLimit"].as_u64().is_some());
    assert!(job["spec"]["ttlSecondsAfterFinished"].as_u64().is_some());
    assert!(!selects(&service["spec"]["selector"], &job_pod["metadata"]["labels"]), "the Service selects the Job");
}

fn kubectl(kubectl: &Path, kubeconfig: &Path, args: &[&str]) -> Output {
    Command::new(kubectl).arg("--kubeconfig").arg(kubeconfig).args(args).output().unwrap()
}

fn text(output: &Output) -> (String, String) {
    (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// A server-side dry run in the namespace; unknown or duplicate fields are errors, not warnings.
const DRY_RUN: [&str; 5] = ["apply", "--dry-run=server", "--validate=strict", "-n", NAMESPACE];

#[tokio::test(flavor = "multi_thread")]
async fn a_real_api_server_accepts_every_manifest_and_rejects_broken_ones() {
    let release = toolchain::default_release();
    let kubectl_path = toolchain::installed(&release).unwrap_or_else(|e| panic!("{e}")).binary("kubectl");
    let cluster = common::bring_up(common::options("e2e-deploy", release, 1)).await;
    let kubeconfig = cluster.state.kubeconfig.clone();
    let run = |args: &[&str]| kubectl(&kubectl_path, &kubeconfig, args);

    // The namespace for real; the `restricted` Pod Security level warns about any pod template short of it.
    for args in [
        &["create", "namespace", NAMESPACE][..],
        &["label", "namespace", NAMESPACE, "pod-security.kubernetes.io/warn=restricted"],
    ] {
        let output = run(args);
        assert!(output.status.success(), "kubectl {}: {:?}", args.join(" "), text(&output));
    }

    let objects = objects();
    let deploy = deploy_dir();
    let kustomize = [&DRY_RUN[..], &["-k", deploy.to_str().unwrap()]].concat();
    let job_file = deploy.join(MIGRATE_JOB);
    let job = [&DRY_RUN[..], &["-f", job_file.to_str().unwrap()]].concat();
    let (in_job, in_kustomization): (Vec<_>, Vec<_>) = objects.iter().partition(|(f, _)| f == MIGRATE_JOB);
    for (args, applied) in [(kustomize, in_kustomization), (job, in_job)] {
        let output = run(&args);
        let (stdout, stderr) = text(&output);
        assert!(output.status.success(), "kubectl {}:\n{stdout}{stderr}", args.join(" "));
        assert!(!stderr.contains("Warning"), "kubectl {}: {stderr}", args.join(" "));
        for (file, object) in applied {
            let line = format!("{} created (server dry run)", kubectl_name(object));
            assert!(stdout.lines().any(|l| l == line), "deploy/{file}: no `{line}` in\n{stdout}");
        }
    }

    // Broken copies of the Deployment: the server must say no, or the dry run above proves nothing.
    let deployment = objects.iter().find(|(_, o)| o["kind"] == "Deployment").map(|(_, o)| o).unwrap().clone();
    let scratch = tempfile::tempdir().unwrap();
    let try_apply = |name: &str, broken: &Value| {
        let path = scratch.path().join(format!("{name}.yaml"));
        std::fs::write(&path, serde_yaml_ng::to_string(broken).unwrap()).unwrap();
        let output = run(&[&DRY_RUN[..], &["-f", path.to_str().unwrap()]].concat());
        (output.status.success(), text(&output))
    };

    let mut replicas_two = deployment.clone();
    replicas_two["spec"]["replicas"] = Value::from("two");
    let (ok, (stdout, stderr)) = try_apply("replicas-two", &replicas_two);
    assert!(!ok, "replicas: \"two\" was accepted: {stdout}");
    assert!(stderr.contains("replicas"), "{stderr}");

    let mut unknown_field = deployment.clone();
    unknown_field["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] =
        unknown_field["spec"]["template"]["spec"]["containers"][0]["readinessProbe"].clone();
    let (ok, (stdout, stderr)) = try_apply("unknown-field", &unknown_field);
    assert!(!ok, "an unknown field was accepted: {stdout}");
    assert!(stderr.contains("unknown field") && stderr.contains("readinessProbes"), "{stderr}");

    // Without its container securityContext the Deployment is accepted with a Pod Security warning,
    // so the absence of one above means the manifests meet the `restricted` level.
    let mut privileged = deployment.clone();
    privileged["spec"]["template"]["spec"]["containers"][0].as_mapping_mut().unwrap().remove("securityContext");
    let (ok, (stdout, stderr)) = try_apply("privileged", &privileged);
    assert!(ok, "{stdout}{stderr}");
    assert!(stderr.contains("would violate PodSecurity \"restricted"), "no Pod Security warning: {stderr}");

    // A dry run creates nothing (the namespace's default ServiceAccount is the controller's).
    let kinds = "deployments,services,configmaps,poddisruptionbudgets,jobs,serviceaccounts";
    let output = run(&["get", kinds, "-n", NAMESPACE, "-o", "name"]);
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stderr}");
    let left: Vec<&str> =
        stdout.lines().filter(|l| !matches!(*l, "serviceaccount/default" | "configmap/kube-root-ca.crt")).collect();
    assert!(left.is_empty(), "the dry run left objects behind: {left:?}");

    common::assert_torn_down(cluster);
}

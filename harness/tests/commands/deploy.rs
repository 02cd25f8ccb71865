//! The central service as `deploy/` runs it, on the embedded cluster: the harness's image imported
//! into a real node, the migrate Job, then `kubectl apply -k` of an operator's overlay over
//! `deploy/` (their image tag, their providers file, their store) and two `harness serve` replicas
//! behind the Service. PostgreSQL and the GCS emulator run on this machine, as a managed database
//! and bucket would outside a cluster; pods reach them at the hub's address (`cluster up
//! --hub-port`).
//!
//! Publishes go through the Service: one from a Job's pod by its DNS name with a token from a
//! Secret, as a provider's CI in the cluster posts; and a load of publishers at its cluster IP from
//! inside the node's network namespace (where kube-proxy's rules are), during which one replica's
//! `harness serve` is SIGKILLed while it has uploads in flight. Every build must be indexed exactly
//! once and stored whole, and the dashboard must answer through the Service.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testing::fake_gcs::FakeGcs;
use testing::load::{self, Plan};

use crate::real_prow::Kubectl;
use crate::run::{Env, text};

const NAMESPACE: &str = "harness";
/// The bucket `deploy/deployment.yaml` names as its store.
const BUCKET: &str = "kubernetes-ci-logs";
const HUB_IP: &str = "10.250.0.1";
/// The image `deploy/` names, whose tag an operator sets.
const DEPLOYED_IMAGE: &str = "ghcr.io/cloud-provider-harness/harness";
/// The build a Job's pod publishes.
const POD_JOB: &str = "ci-cloud-provider-alpha-deploy";
const PLAN: Plan = Plan { publishers: 12, builds_each: 40, tests: 200 };

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy").canonicalize().unwrap()
}

impl Kubectl {
    /// kubectl `args` in the service's namespace, which must succeed; its stdout.
    fn harness_ns(&self, args: &[&str], stdin: Option<&str>) -> String {
        let mut all = vec!["-n", NAMESPACE];
        all.extend_from_slice(args);
        let output = self.run(&all, stdin.map(str::as_bytes));
        assert!(output.status.success(), "kubectl {all:?}: {}", text(&output));
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.harness_ns(&all, None)).unwrap()
    }
}

/// The directory of an operator's overlay over `deploy/`: the image they built, their providers
/// file (replacing the ConfigMap's), and the GCS emulator for the store.
fn overlay(root: &Path, tag: &str, providers: &Path, gcs_port: u16) -> PathBuf {
    let dir = root.join("overlay");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(providers, dir.join("providers.yaml")).unwrap();
    // kustomize takes a base by a path relative to the overlay.
    let up = "../".repeat(dir.components().count() - 1);
    let base = format!("{up}{}", deploy_dir().display().to_string().trim_start_matches('/'));
    let kustomization = format!(
        r#"apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- {base}
images:
- name: {DEPLOYED_IMAGE}
  newTag: {tag}
configMapGenerator:
- name: harness-providers
  behavior: replace
  files:
  - providers.yaml
  options:
    disableNameSuffixHash: true
patches:
- patch: |
    apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: harness}}
    spec:
      template:
        spec:
          containers:
          - name: harness
            env:
            - {{name: HARNESS_STORE, value: "gs://{BUCKET}"}}
            - {{name: STORAGE_EMULATOR_HOST, value: "http://{HUB_IP}:{gcs_port}"}}
"#
    );
    std::fs::write(dir.join("kustomization.yaml"), kustomization).unwrap();
    dir
}

/// Runs `work` on a thread of its own in the network namespace of process `holder` (a node's),
/// as a program on that node would run: the Service's cluster IP means something there.
fn in_node_network<T, F, Fut>(holder: i32, work: F) -> std::thread::JoinHandle<T>
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T>,
{
    std::thread::spawn(move || {
        let namespace = std::fs::File::open(format!("/proc/{holder}/ns/net")).unwrap();
        // The network namespace is a thread's own: only this thread moves.
        nix::sched::setns(&namespace, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(work())
    })
}

/// The PID of the process holding the namespaces of the cluster's only node.
fn node_holder(env: &Env, cluster: &str) -> i32 {
    let path = env.root.join("state/clusters").join(cluster).join("cluster.json");
    let state: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let holders: Vec<i32> = state["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["component"].as_str().is_some_and(|c| c.ends_with("-namespaces")))
        .map(|p| p["pid"].as_i64().unwrap() as i32)
        .collect();
    assert_eq!(holders.len(), 1, "one node's namespaces in {}", path.display());
    holders[0]
}

/// The host PID of `harness serve` in the pod with UID `uid` (containers share the host's PID
/// namespace's view from here; the kubelet's cgroup path names the pod).
fn serve_pid(uid: &str) -> i32 {
    let uid_underscored = uid.replace('-', "_");
    let found: Vec<i32> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
            cmdline.starts_with(b"harness\0serve\0") && (cgroup.contains(uid) || cgroup.contains(&uid_underscored))
        })
        .collect();
    assert_eq!(found.len(), 1, "harness serve processes of pod {uid}: {found:?}");
    found[0]
}

/// The replicas' pods, by name, with their UIDs.
fn replicas(kubectl: &Kubectl) -> Vec<(String, String)> {
    let pods = kubectl.json(&["get", "pods", "-l", "app.kubernetes.io/component=server"]);
    pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["metadata"]["name"].as_str().unwrap().into(), p["metadata"]["uid"].as_str().unwrap().into()))
        .collect()
}

/// A replica's `harness_uploads_in_flight`, read through the API server's pod proxy.
fn uploads_in_flight(kubectl: &Kubectl, pod: &str) -> i64 {
    let path = format!("/api/v1/namespaces/{NAMESPACE}/pods/{pod}:8080/proxy/metrics");
    let output = kubectl.run(&["get", "--raw", &path], None);
    let metrics = String::from_utf8_lossy(&output.stdout);
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("harness_uploads_in_flight "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// `kubectl exec` in a replica: a token for `provider`, made as deploy/README.md says.
fn token(kubectl: &Kubectl, provider: &str) -> String {
    let args = ["exec", "deploy/harness", "-c", "harness", "--", "harness", "token", "create", "--provider", provider];
    let mut all = args.to_vec();
    all.extend(["--description", "deploy test"]);
    kubectl.harness_ns(&all, None).trim().to_owned()
}

/// A Job whose pod publishes the build in ConfigMap `pod-build` to the Service by its DNS name,
/// with the token of Secret `publish-token`, as deploy/README.md tells a provider's CI to. Each
/// file is mounted on its own (`subPath`): a whole ConfigMap volume also holds the kubelet's
/// `..data` links and timestamped directory, which would be published with it.
fn publish_job(image: &str) -> String {
    let files = ["started.json", "finished.json", "build-log.txt", "artifacts/junit_01.xml"];
    let mut mounts: Vec<Value> = files
        .iter()
        .map(|f| json!({"name": "build", "mountPath": format!("/build/{f}"), "subPath": f.rsplit('/').next().unwrap()}))
        .collect();
    mounts.push(json!({"name": "tmp", "mountPath": "/tmp"}));
    json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "publish"},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532},
            "containers": [{
                "name": "publish", "image": image, "command": ["harness"],
                "args": ["publish", "--remote", format!("http://harness.{NAMESPACE}.svc"), "--job", POD_JOB,
                         "--build", "1", "--dir", "/build"],
                "env": [{"name": "HOME", "value": "/tmp"},
                        {"name": "HARNESS_TOKEN", "valueFrom": {"secretKeyRef": {"name": "publish-token", "key": "token"}}}],
                "securityContext": {"readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false},
                "volumeMounts": mounts,
            }],
            "volumes": [{"name": "build", "configMap": {"name": "pod-build"}}, {"name": "tmp", "emptyDir": {}}],
        }}},
    })
    .to_string()
}

fn pod_build_configmap() -> String {
    let data: serde_json::Map<String, Value> = load::build_files(0, 1, 3)
        .into_iter()
        .map(|(name, bytes)| {
            let key = name.rsplit('/').next().unwrap().to_owned();
            (key, Value::String(String::from_utf8(bytes.to_vec()).unwrap()))
        })
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pod-build"}, "data": data}).to_string()
}

/// Waits until the Deployment has `ready` ready replicas and no other pods.
fn wait_for_replicas(kubectl: &Kubectl, ready: i64) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let deployment = kubectl.json(&["get", "deployment", "harness"]);
        let status = &deployment["status"];
        if status["readyReplicas"].as_i64() == Some(ready) && status["replicas"].as_i64() == Some(ready) {
            return;
        }
        if Instant::now() > deadline {
            let described = kubectl.harness_ns(&["describe", "pods"], None);
            panic!("{ready} replicas never ready: {status}\n{described}");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn deploy_runs_two_replicas_that_index_each_build_once_through_the_service_when_one_is_killed() {
    if let Some(missing) = local_cluster::real::missing_kernel_feature() {
        eprintln!("SKIPPED: real nodes cannot run on this machine: {missing}");
        return;
    }
    let started = Instant::now();
    let env = Env::new();
    let database = testing::fresh_postgres_database().await;
    let gcs = FakeGcs::start_public_at(HUB_IP);
    gcs.create_bucket(BUCKET);
    let postgres_port = reqwest::Url::parse(&database).unwrap().port().expect("the test Postgres URL has a port");
    let gcs_port = gcs.emulator_host().parse::<std::net::SocketAddr>().unwrap().port();

    let archive = env.root.join("harness.oci.tar");
    let built = env.command("image").args(["build", "-o"]).arg(&archive).output().unwrap();
    assert!(built.status.success(), "{}", text(&built));
    let image = local_cluster::images::oci::archive_reference(&archive).unwrap();
    let tag = image.strip_prefix(&format!("{DEPLOYED_IMAGE}:")).expect("the image deploy/ names").to_owned();

    let image_built = started.elapsed();
    let cluster = "harness-deploy";
    env.cluster_up_with_images(cluster, &[postgres_port, gcs_port], &[&archive]);
    let down = || env.cluster_down(cluster);
    let harness_stdout = |args: &[&str]| {
        let output = env.command(args[0]).args(&args[1..]).output().unwrap();
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    let kubectl = Kubectl {
        binary: PathBuf::from(harness_stdout(&["toolchain", "path"])).join("kubectl"),
        kubeconfig: PathBuf::from(harness_stdout(&["cluster", "kubeconfig", "--name", cluster])),
    };
    let cluster_up = started.elapsed() - image_built;
    let holder = node_holder(&env, cluster);
    let outcome = tokio::task::spawn_blocking({
        let (env_root, database) = (env.root.clone(), database.clone());
        move || {
            let kubectl = kubectl;
            apply_deploy(&kubectl, &env_root, &database, &image, &tag, gcs_port);
            kubectl
        }
    })
    .await;
    let kubectl = match outcome {
        Ok(kubectl) => kubectl,
        Err(panic) => {
            down();
            std::panic::resume_unwind(panic.into_panic());
        }
    };
    let checked = std::panic::AssertUnwindSafe(publish_and_kill(&kubectl, holder, &database, &gcs));
    let outcome = futures::FutureExt::catch_unwind(checked).await;
    let gone = down();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
    assert!(gone.status.success(), "{}", text(&gone));
    env.assert_nothing_left();
    eprintln!(
        "deploy/ on the embedded cluster: image {:.0} s, cluster up {:.0} s, all {:.0} s",
        image_built.as_secs_f64(),
        cluster_up.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// The install of deploy/README.md: namespace, database Secret, migrate Job, then the overlay;
/// two replicas ready.
fn apply_deploy(kubectl: &Kubectl, root: &Path, database: &str, image: &str, tag: &str, gcs_port: u16) {
    let started = Instant::now();
    kubectl.run(&["create", "namespace", NAMESPACE], None);
    let in_cluster = database.replacen("127.0.0.1", HUB_IP, 1);
    kubectl.harness_ns(
        &["create", "secret", "generic", "harness-database", &format!("--from-literal=DATABASE_URL={in_cluster}")],
        None,
    );
    let job = std::fs::read_to_string(deploy_dir().join("migrate-job.yaml")).unwrap();
    let deployed = format!("{DEPLOYED_IMAGE}:v0.1.0");
    assert!(job.contains(&deployed), "migrate-job.yaml names {deployed}");
    kubectl.harness_ns(&["apply", "-f", "-"], Some(&job.replace(&deployed, image)));
    let waited = kubectl
        .run(&["-n", NAMESPACE, "wait", "--for=condition=complete", "job/harness-migrate", "--timeout=180s"], None);
    if !waited.status.success() {
        let logs = kubectl.run(&["-n", NAMESPACE, "logs", "job/harness-migrate"], None);
        panic!("the migrate Job did not complete: {}\n{}", text(&waited), text(&logs));
    }
    let providers = testing::central::providers_yaml(root);
    let overlay = overlay(root, tag, &providers, gcs_port);
    kubectl.harness_ns(&["apply", "-k", &overlay.display().to_string()], None);
    wait_for_replicas(kubectl, 2);
    eprintln!("deploy/: migrated and 2 replicas ready in {:.0} s", started.elapsed().as_secs_f64());
}

async fn publish_and_kill(kubectl: &Kubectl, holder: i32, database: &str, gcs: &FakeGcs) {
    let tokens = [token(kubectl, "alpha"), token(kubectl, "beta")];
    let image = kubectl.json(&["get", "deployment", "harness"])["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap()
        .to_owned();

    // A provider's CI in the cluster: the Service by name, the token from a Secret.
    kubectl.harness_ns(&["apply", "-f", "-"], Some(&pod_build_configmap()));
    kubectl.harness_ns(
        &["create", "secret", "generic", "publish-token", &format!("--from-literal=token={}", tokens[0])],
        None,
    );
    kubectl.harness_ns(&["apply", "-f", "-"], Some(&publish_job(&image)));
    let waited =
        kubectl.run(&["-n", NAMESPACE, "wait", "--for=condition=complete", "job/publish", "--timeout=120s"], None);
    let logs = kubectl.run(&["-n", NAMESPACE, "logs", "job/publish"], None);
    if !waited.status.success() {
        let served =
            kubectl.run(&["-n", NAMESPACE, "logs", "-l", "app.kubernetes.io/component=server", "--tail=30"], None);
        panic!("the publishing Job: {}\n{}\n{}\n{}", text(&waited), text(&logs), text(&served), gcs.log());
    }

    // The load, at the Service's cluster IP from the node; one replica killed mid-upload.
    let service = kubectl.json(&["get", "service", "harness"]);
    let url = format!("http://{}", service["spec"]["clusterIP"].as_str().unwrap());
    let pods = replicas(kubectl);
    assert_eq!(pods.len(), 2, "{pods:?}");
    let progress = Arc::new(AtomicUsize::new(0));
    let load = in_node_network(holder, {
        let (url, progress) = (url.clone(), progress.clone());
        let mut options = results::remote::RemoteOptions::new(Vec::new(), String::new());
        options.min_delay = Duration::from_millis(200);
        options.max_delay = Duration::from_secs(4);
        options.attempts = 12;
        move || async move { load::run(&[url], &tokens, PLAN, &options, progress).await }
    });
    let total = PLAN.publishers * PLAN.builds_each;
    let started = Instant::now();
    let killed = loop {
        assert!(!load.is_finished(), "the load ended before a replica was seen uploading");
        assert!(started.elapsed() < Duration::from_secs(300), "no replica was seen uploading in 5 minutes");
        let uploading = || pods.iter().find(|(name, _)| uploads_in_flight(kubectl, name) >= 2);
        if progress.load(Ordering::SeqCst) >= total / 4
            && let Some((name, uid)) = uploading()
        {
            let pid = serve_pid(uid);
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).unwrap();
            eprintln!(
                "SIGKILLed harness serve in {name} (PID {pid}) at {} of {total} builds",
                progress.load(Ordering::SeqCst)
            );
            break name.clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let report = tokio::task::spawn_blocking(move || load.join().unwrap()).await.unwrap();
    assert_eq!(report.errors, Vec::<String>::new());
    assert_eq!(report.created + report.existed, total);
    assert!(report.retries > 0, "no publish was retried: the kill hit no upload");
    eprintln!(
        "load through the Service: {total} builds in {:.1} s, {} retries, p99 {:?}",
        report.elapsed.as_secs_f64(),
        report.retries,
        report.quantile(0.99)
    );

    // The killed replica restarted in its pod, and both serve again.
    let pod = kubectl.json(&["get", "pod", &killed]);
    let container = &pod["status"]["containerStatuses"][0];
    assert!(container["restartCount"].as_i64() >= Some(1), "{container}");
    assert_eq!(container["lastState"]["terminated"]["exitCode"], 137, "{container}");
    tokio::task::block_in_place(|| wait_for_replicas(kubectl, 2));

    let index = results::index::Index::open(database).await.unwrap();
    let (builds, results) = index.counts().await.unwrap();
    let pod_results = 3 + 1;
    assert_eq!((builds, results), ((total + 1) as i64, (total * (PLAN.tests + 1) + pod_results) as i64));
    for p in 0..PLAN.publishers {
        assert_eq!(index.latest_builds(&load::job_of(p), 1000).await.unwrap().len(), PLAN.builds_each);
    }
    assert_eq!(index.latest_builds(POD_JOB, 10).await.unwrap().len(), 1);
    let finished = gcs.list(BUCKET, "logs/").into_iter().filter(|o| o.ends_with("/finished.json")).count();
    assert_eq!(finished, total + 1, "finished.json objects in gs://{BUCKET}/logs/");

    // The dashboard, through the Service: from the node at its cluster IP, and by the API server's
    // service proxy as `kubectl proxy` users reach it.
    let page = format!("{url}/job/{POD_JOB}/build/1/file/build-log.txt");
    let (status, body) = in_node_network(holder, move || async move {
        let response = reqwest::get(&page).await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    })
    .join()
    .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(&format!("build 1 of {}", load::job_of(0))), "{body}");
    let proxied =
        kubectl.run(&["get", "--raw", &format!("/api/v1/namespaces/{NAMESPACE}/services/harness:http/proxy/")], None);
    assert!(proxied.status.success(), "{}", text(&proxied));
    assert!(String::from_utf8_lossy(&proxied.stdout).contains(POD_JOB), "{}", text(&proxied));
}

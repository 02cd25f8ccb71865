//! A generated periodic run as a ProwJob by real Prow (`sigs.k8s.io/prow`, built from
//! `tools/prow`) on the embedded cluster: the ProwJob CRD applied server-side, plank
//! (`prow-controller-manager`), horologium, crier and sinker on this machine with the cluster's
//! kubeconfig, the pod utilities as images of their own (`harness image program`) and the
//! harness's image with what the aws and local cells need in it (`harness image build --provider
//! aws --provider local`: the toolchain, aws's CCM and moto, the node images and what real nodes
//! run from Debian), all imported into a real node. The job's pod uploads to the GCS emulator
//! through the hub (`cluster up --hub-port`), where TestGrid's updater reads the columns and
//! `harness index --store gs://…` indexes the builds.
//!
//! Horologium starts the periodics on its first tick: the aws cell as generated (kwok nodes and
//! moto in an unprivileged pod), the local cell as generated but for its suites, cloud-e2e alone
//! (a privileged pod in which the harness brings up three real nodes of its own, nested in the
//! node the pod runs on, with the local cloud), and the aws cell made to fail (a Kubernetes release its image lacks, and no Go to
//! build it with). `mkpj` makes one more ProwJob of the failing one. `scripts/test --prow` runs it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use testing::fake_gcs::FakeGcs;
use testing::go_tools::go_tool;
use testing::testgrid::ReadGrid;

use crate::run::{Env, text};

const BUCKET: &str = "kubernetes-ci-logs";
const JOB: &str = "ci-cloud-provider-aws-k8s-1.37";
const BROKEN: &str = "ci-cloud-provider-aws-k8s-1.37-broken";
/// The privileged cell: real nodes nested in the job's pod.
const NESTED: &str = "ci-cloud-provider-local-k8s-1.37";
/// The pod utilities' images, under a name that says they are built here, at Prow's version.
const UTILITY_IMAGE: &str = "localhost/prow";
const PROW_VERSION: &str = "v20250307-7a867cddc9d5";
const HUB_IP: &str = "10.250.0.1";

/// The repository's providers file: its aws provider is the one whose cell runs.
fn providers_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../providers.yaml")
}

/// A program of Prow's running on this machine, its output in a log file; killed when dropped.
struct Daemon {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Daemon {
    fn start(env: &Env, name: &str, args: &[String], vars: &[(&str, String)]) -> Daemon {
        let log = env.root.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let mut command = env.program(go_tool(&format!("prow/{name}")));
        command.args(args).stdin(Stdio::null()).stdout(file.try_clone().unwrap()).stderr(file);
        for (var, value) in vars {
            command.env(var, value);
        }
        Daemon { name: name.into(), child: command.spawn().unwrap(), log }
    }

    fn log(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        format!("--- {} (last 30 lines)\n{}", self.name, lines[lines.len().saturating_sub(30)..].join("\n"))
    }

    fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// kubectl of the cluster's toolchain with its kubeconfig.
pub(crate) struct Kubectl {
    pub(crate) binary: PathBuf,
    pub(crate) kubeconfig: PathBuf,
}

impl Kubectl {
    /// kubectl `args`, given `stdin`; its output, whatever its exit.
    pub(crate) fn run(&self, args: &[&str], stdin: Option<&[u8]>) -> std::process::Output {
        let mut command = Command::new(&self.binary);
        command.arg("--kubeconfig").arg(&self.kubeconfig).args(args);
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().unwrap();
        if let Some(input) = stdin {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(input).unwrap();
        }
        drop(child.stdin.take());
        child.wait_with_output().unwrap()
    }

    fn ok(&self, args: &[&str], stdin: Option<&[u8]>) -> String {
        let output = self.run(args, stdin);
        assert!(output.status.success(), "kubectl {args:?}: {}", text(&output));
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    fn prowjobs(&self) -> Vec<Value> {
        let json: Value =
            serde_json::from_str(&self.ok(&["get", "prowjobs", "-n", "default", "-o", "json"], None)).unwrap();
        json["items"].as_array().cloned().unwrap_or_default()
    }
}

/// The machine's memory in use above what it was when sampling started, at its highest: every
/// process of the run together (the cluster, Prow, the job's pod), sampled from /proc/meminfo.
struct PeakMemory {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    sampler: std::thread::JoinHandle<u64>,
}

impl PeakMemory {
    fn start() -> PeakMemory {
        fn available() -> u64 {
            let info = std::fs::read_to_string("/proc/meminfo").unwrap();
            let line = info.lines().find(|l| l.starts_with("MemAvailable:")).unwrap();
            line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let sampler = std::thread::spawn(move || {
            let start = available();
            let mut lowest = start;
            while !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                lowest = lowest.min(available());
                std::thread::sleep(Duration::from_millis(500));
            }
            start - lowest
        });
        PeakMemory { stop, sampler }
    }

    fn bytes(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.sampler.join().unwrap()
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `harness <args>`, which must succeed; its stdout.
fn harness(env: &Env, args: &[&str]) -> String {
    let mut command = env.program(env!("CARGO_BIN_EXE_harness"));
    let output = command.args(args).output().unwrap();
    assert!(output.status.success(), "harness {args:?}: {}", text(&output));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The pod utilities' images; the uploading ones with the emulator at the hub's address.
fn utility_images(env: &Env, gcs_port: u16) -> (Vec<PathBuf>, BTreeMap<&'static str, String>) {
    let mut archives = Vec::new();
    let mut references = BTreeMap::new();
    for name in ["initupload", "entrypoint", "sidecar"] {
        let reference = format!("{UTILITY_IMAGE}/{name}:{PROW_VERSION}");
        let archive = env.root.join(format!("{name}.oci.tar"));
        let binary = go_tool(&format!("prow/{name}")).display().to_string();
        let mut args = vec!["image", "program", &binary, "--reference", &reference, "-o"];
        let archive_arg = archive.display().to_string();
        args.push(&archive_arg);
        let emulator = format!("STORAGE_EMULATOR_HOST=http://{HUB_IP}:{gcs_port}");
        if name != "entrypoint" {
            args.extend(["--env", &emulator]);
        }
        harness(env, &args);
        archives.push(archive);
        references.insert(name, reference);
    }
    (archives, references)
}

/// Prow's `config.yaml`: ProwJobs in `default`, pods in `test-pods`, every job decorated with the
/// images above, uploading to the bucket TestGrid reads.
fn prow_config(images: &BTreeMap<&str, String>) -> String {
    format!(
        r#"prowjob_namespace: default
pod_namespace: test-pods
log_level: info
horologium:
  tick_interval: 1s
sinker:
  resync_period: 10s
  max_prowjob_age: 48h
  max_pod_age: 48h
  terminated_pod_ttl: 30m
plank:
  default_decoration_config_entries:
  - config:
      timeout: 2h
      grace_period: 15s
      utility_images:
        # Never run: the jobs clone nothing (skip_cloning).
        clonerefs: {UTILITY_IMAGE}/clonerefs:{PROW_VERSION}
        initupload: {initupload}
        entrypoint: {entrypoint}
        sidecar: {sidecar}
      gcs_configuration:
        bucket: {BUCKET}
        path_strategy: explicit
"#,
        initupload = images["initupload"],
        entrypoint = images["entrypoint"],
        sidecar = images["sidecar"],
    )
}

/// `harness prow-config`'s periodics for the aws and local cells, as generated for a cluster of one
/// small node, and the aws one made to fail.
fn job_config(env: &Env, image: &str) -> String {
    let generated = harness(
        env,
        &[
            "prow-config",
            "--config",
            &providers_file().display().to_string(),
            "--skip-cloning",
            "--image",
            image,
            "--requests",
            "cpu=500m,memory=1Gi",
            "--limits",
            "cpu=,memory=6Gi",
        ],
    );
    let mut jobs: Value = serde_yaml_ng::from_str(&generated).unwrap();
    let periodics = jobs["periodics"].as_array_mut().unwrap();
    let periodic = |name: &str| {
        periodics.iter().find(|p| p["name"] == name).unwrap_or_else(|| panic!("no {name} in:\n{generated}")).clone()
    };
    let (good, mut nested) = (periodic(JOB), periodic(NESTED));
    assert_eq!(nested["spec"]["containers"][0]["securityContext"]["privileged"], true, "real nodes need privileges");
    // cloud-e2e alone: it drives the CCM and the cloud on the nested nodes. (conformance-quick,
    // as generated, passed 225 of 226 nested in its one run here: docs/real-nodes.md.)
    let args = nested["spec"]["containers"][0]["args"].as_array_mut().unwrap();
    let at = args.iter().position(|a| a == "--suites").expect("the job names its suites");
    args[at + 1] = "cloud-e2e".into();
    let mut broken = good.clone();
    broken["name"] = BROKEN.into();
    let args = broken["spec"]["containers"][0]["args"].as_array_mut().unwrap();
    let at = args.iter().position(|a| a == "--kubernetes").expect("the job names its Kubernetes release");
    args[at + 1] = "v1.36.4".into();
    serde_yaml_ng::to_string(&serde_json::json!({ "periodics": [good, nested, broken] })).unwrap()
}

/// Waits until there are `wanted` ProwJobs and every one has ended (or a daemon exits); each
/// ProwJob's states in the order seen, with its last object.
fn wait_for_prowjobs(
    kubectl: &Kubectl,
    wanted: usize,
    daemons: &mut [Daemon],
) -> BTreeMap<String, (Vec<String>, Value)> {
    let started = Instant::now();
    let mut seen: BTreeMap<String, (Vec<String>, Value)> = BTreeMap::new();
    loop {
        for job in kubectl.prowjobs() {
            let id = job["metadata"]["name"].as_str().unwrap().to_owned();
            let state = job["status"]["state"].as_str().unwrap_or("").to_owned();
            let entry = seen.entry(id).or_default();
            if entry.0.last() != Some(&state) {
                eprintln!("{:>5.0} s  {} {state}", started.elapsed().as_secs_f64(), job["spec"]["job"]);
                entry.0.push(state);
            }
            entry.1 = job;
        }
        let ended =
            |states: &Vec<String>| states.last().is_some_and(|s| !["", "triggered", "pending"].contains(&s.as_str()));
        if seen.len() >= wanted && seen.values().all(|(states, _)| ended(states)) {
            return seen;
        }
        for daemon in daemons.iter_mut() {
            assert!(daemon.is_running(), "{} exited:\n{}", daemon.name, daemon.log());
        }
        if started.elapsed() > Duration::from_secs(40 * 60) {
            let logs: Vec<String> = daemons.iter().map(Daemon::log).collect();
            panic!("the ProwJobs did not end in 40 minutes: {seen:#?}\n{}", logs.join("\n"));
        }
        std::thread::sleep(Duration::from_secs(2));
    }
}

#[test]
#[ignore = "scripts/test --prow: builds Prow's controllers and a 3 GB image, and runs the aws and local cells as ProwJobs (about 10 minutes with both built)"]
fn a_generated_periodic_runs_as_a_prowjob_under_real_prow_and_reaches_testgrid() {
    if let Some(missing) = local_cluster::real::missing_kernel_feature() {
        eprintln!("SKIPPED: real nodes cannot run on this machine: {missing}");
        return;
    }
    let started = Instant::now();
    let memory = PeakMemory::start();
    let env = Env::new();
    let gcs = FakeGcs::start();
    gcs.create_bucket(BUCKET);
    let gcs_port: u16 = gcs.emulator_host().rsplit(':').next().unwrap().parse().unwrap();

    let harness_archive = env.root.join("harness.oci.tar");
    let built = harness(
        &env,
        &[
            "image",
            "build",
            "--provider",
            "aws",
            "--provider",
            "local",
            "--kubernetes",
            "v1.37.1",
            "--config",
            &providers_file().display().to_string(),
            "-o",
            &harness_archive.display().to_string(),
        ],
    );
    eprintln!("{built}");
    let image = local_cluster::images::oci::archive_reference(&harness_archive).unwrap();
    let (utilities, references) = utility_images(&env, gcs_port);
    let images_built = started.elapsed();

    let cluster = "real-prow";
    let images: Vec<&Path> = std::iter::once(&harness_archive).chain(&utilities).map(PathBuf::as_path).collect();
    env.cluster_up_with_images(cluster, &[gcs_port], &images);
    let down = || env.cluster_down(cluster);
    let cluster_up = started.elapsed() - images_built;
    let kubectl = Kubectl {
        binary: PathBuf::from(harness(&env, &["toolchain", "path"]).trim()).join("kubectl"),
        kubeconfig: PathBuf::from(harness(&env, &["cluster", "kubeconfig", "--name", cluster]).trim()),
    };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_under_prow(&env, &gcs, &kubectl, &image, &references)
    }));
    let gone = down();
    let prow_ran = match outcome {
        Ok(took) => took,
        Err(panic) => std::panic::resume_unwind(panic),
    };
    assert!(gone.status.success(), "{}", text(&gone));
    env.assert_nothing_left();
    eprintln!(
        "real Prow: images {:.0} s, cluster up {:.0} s, ProwJobs created to ended {:.0} s, all {:.0} s; peak memory in use {:.1} GiB",
        images_built.as_secs_f64(),
        cluster_up.as_secs_f64(),
        prow_ran.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        memory.bytes() as f64 / f64::from(1 << 30),
    );
}

/// Runs the jobs under Prow and checks what they left; how long the ProwJobs took to end.
fn run_under_prow(
    env: &Env,
    gcs: &FakeGcs,
    kubectl: &Kubectl,
    image: &str,
    utilities: &BTreeMap<&str, String>,
) -> Duration {
    let prow = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/prow");
    let crd = prow_module_file(&prow, "config/prow/cluster/prowjob-crd/prowjob_customresourcedefinition.yaml");
    kubectl.ok(&["apply", "--server-side", "-f", &crd.display().to_string()], None);
    // Plank exits at start when the API server does not serve ProwJobs yet (and `kubectl wait`
    // for Established errors out while the new CRD has no conditions at all).
    let served = Instant::now();
    while !kubectl.run(&["get", "prowjobs", "-n", "default"], None).status.success() {
        assert!(served.elapsed() < Duration::from_secs(60), "the API server does not serve ProwJobs");
        std::thread::sleep(Duration::from_millis(500));
    }
    kubectl.ok(&["create", "namespace", "test-pods"], None);
    let config = env.root.join("config.yaml");
    std::fs::write(&config, prow_config(utilities)).unwrap();
    let jobs = env.root.join("jobs.yaml");
    std::fs::write(&jobs, job_config(env, image)).unwrap();

    let common = |name: &str| -> Vec<String> {
        let mut args = vec![
            format!("--config-path={}", config.display()),
            format!("--job-config-path={}", jobs.display()),
            format!("--kubeconfig={}", kubectl.kubeconfig.display()),
            format!("--health-port={}", free_port()),
            format!("--metrics-port={}", free_port()),
            format!("--pprof-port={}", free_port()),
        ];
        if name != "crier" {
            args.push("--dry-run=false".into());
        }
        args
    };
    let emulator = vec![("STORAGE_EMULATOR_HOST", gcs.emulator_host().to_owned())];
    let mut plank_args = common("prow-controller-manager");
    plank_args.push("--enable-controller=plank".into());
    let mut crier_args = common("crier");
    crier_args.extend(["--blob-storage-workers=1".into(), "--kubernetes-blob-storage-workers=1".into()]);
    let started = Instant::now();
    let mut daemons = vec![
        Daemon::start(env, "prow-controller-manager", &plank_args, &emulator),
        Daemon::start(env, "horologium", &common("horologium"), &[]),
        Daemon::start(env, "crier", &crier_args, &emulator),
        Daemon::start(env, "sinker", &common("sinker"), &[]),
    ];

    // mkpj: one more ProwJob of the failing periodic, as an operator makes one by hand.
    let made = env
        .program(go_tool("prow/mkpj"))
        .arg(format!("--config-path={}", config.display()))
        .arg(format!("--job-config-path={}", jobs.display()))
        .arg(format!("--job={BROKEN}"))
        .output()
        .unwrap();
    assert!(made.status.success(), "mkpj: {}", text(&made));
    kubectl.ok(&["create", "-n", "default", "-f", "-"], Some(&made.stdout));

    let ended = wait_for_prowjobs(kubectl, 4, &mut daemons);
    let took = started.elapsed();
    let logs: Vec<String> = daemons.iter().map(Daemon::log).collect();
    let logs = logs.join("\n");
    let summary: Vec<String> =
        ended.values().map(|(states, pj)| format!("{} {}", pj["spec"]["job"], states.join(" → "))).collect();
    eprintln!("the ProwJobs ended in {:.0} s: {summary:#?}", took.as_secs_f64());
    let of = |job: &str| -> Vec<&(Vec<String>, Value)> {
        ended.values().filter(|(_, pj)| pj["spec"]["job"] == job).collect()
    };
    let good = of(JOB);
    assert_eq!(good.len(), 1, "horologium started {JOB} once: {summary:#?}");
    let (states, prowjob) = good[0];
    assert_eq!(states.last().map(String::as_str), Some("success"), "{JOB}: {states:?}\n{prowjob:#}\n{logs}");
    assert!(states.iter().any(|s| s == "pending"), "plank ran its pod: {states:?}");
    let nested = of(NESTED);
    assert_eq!(nested.len(), 1, "horologium started {NESTED} once: {summary:#?}");
    let (nested_states, nested_prowjob) = nested[0];
    let nested_build = nested_prowjob["status"]["build_id"].as_str().unwrap().to_owned();
    let nested_log = gcs.download(BUCKET, &format!("logs/{NESTED}/{nested_build}/build-log.txt")).unwrap_or_default();
    let nested_log = String::from_utf8_lossy(&nested_log);
    assert_eq!(
        nested_states.last().map(String::as_str),
        Some("success"),
        "{NESTED}: {nested_states:?}\n{nested_prowjob:#}\n{nested_log}\n{logs}"
    );
    // Its cluster was three real nodes of its own, and cloud-e2e passed there whole.
    assert!(nested_log.contains("starting 3 real nodes"), "{nested_log}");
    assert!(nested_log.contains("suite cloud-e2e: 23 passed, 0 failed, 0 skipped"), "{nested_log}");
    let nested_listing = gcs.list(BUCKET, &format!("logs/{NESTED}/{nested_build}/artifacts/"));
    assert!(nested_listing.iter().any(|o| o.contains("junit_cloud-e2e")), "{nested_listing:?}");
    let broken = of(BROKEN);
    assert_eq!(broken.len(), 2, "horologium's and mkpj's: {summary:#?}");
    for (states, prowjob) in &broken {
        assert_eq!(states.last().map(String::as_str), Some("failure"), "{BROKEN}: {states:?}\n{prowjob:#}");
    }

    let build = prowjob["status"]["build_id"].as_str().unwrap().to_owned();
    let prefix = format!("logs/{JOB}/{build}/");
    let listing = gcs.list(BUCKET, &prefix);
    for file in [
        "started.json",
        "finished.json",
        "build-log.txt",
        "podinfo.json",
        "prowjob.json",
        "artifacts/junit_runner.xml",
        "artifacts/metadata.json",
    ] {
        assert!(listing.iter().any(|o| *o == format!("{prefix}{file}")), "{file} not in the bucket: {listing:?}");
    }
    assert!(listing.iter().any(|o| o.contains("/artifacts/junit_cloud-e2e")), "cloud-e2e's junit: {listing:?}");
    let object = |name: &str| -> Value {
        serde_json::from_slice(&gcs.download(BUCKET, &format!("{prefix}{name}")).unwrap()).unwrap()
    };
    let finished = object("finished.json");
    assert_eq!(finished["passed"], true, "{finished}");
    assert_eq!(finished["metadata"]["kubernetes-version"], "v1.37.1", "the harness's metadata, merged: {finished}");
    let provider_version = finished["metadata"]["provider-version"].as_str().unwrap_or_default().to_owned();
    assert!(!provider_version.is_empty(), "{finished}");
    assert_eq!(object("prowjob.json")["status"]["state"], "success");
    assert!(object("podinfo.json")["pod"]["metadata"]["name"].is_string(), "crier's podinfo.json");

    // TestGrid's updater, on the test groups `harness testgrid-config` generates.
    let testgrid = env.root.join("testgrid.yaml");
    harness(
        env,
        &[
            "testgrid-config",
            "--config",
            &providers_file().display().to_string(),
            "-o",
            &testgrid.display().to_string(),
        ],
    );
    let grid = ReadGrid {
        name: Some(JOB.to_owned()),
        config_yaml: Some(testgrid),
        ..ReadGrid::new(&format!("{BUCKET}/logs/{JOB}"))
    }
    .run(gcs.emulator_host());
    assert_eq!(grid.columns.len(), 1, "{grid:#?}");
    assert_eq!(grid.columns[0].build, build);
    assert_eq!(grid.columns[0].extra, ["v1.37.1", provider_version.as_str()], "the column's headers");
    assert_eq!(grid.row(&format!("{JOB}.Overall")).results, ["PASS"]);
    let cloud_e2e = grid.rows.iter().filter(|r| r.name.contains("cloud-e2e")).count();
    assert!(cloud_e2e > 5, "cloud-e2e's rows: {grid:#?}");

    // The failing cell is a failure in the bucket too.
    let (_, failed) = broken[0];
    let failed_build = failed["status"]["build_id"].as_str().unwrap();
    let finished: Value =
        serde_json::from_slice(&gcs.download(BUCKET, &format!("logs/{BROKEN}/{failed_build}/finished.json")).unwrap())
            .unwrap();
    assert_eq!(finished["passed"], false, "{finished}");

    // The builds, indexed from the bucket as the central service indexes Prow's.
    let indexed = env
        .command("index")
        .args(["--store", &format!("gs://{BUCKET}")])
        .env("STORAGE_EMULATOR_HOST", gcs.emulator_host())
        .output()
        .unwrap();
    assert!(indexed.status.success(), "harness index: {}", text(&indexed));
    let said = String::from_utf8_lossy(&indexed.stdout);
    assert!(said.contains(": 4 new, 0 replaced"), "the four ProwJobs' builds: {}", text(&indexed));
    took
}

/// A file of the pinned Prow module (`go list -m -f {{.Dir}}` in `tools/prow`).
fn prow_module_file(tools_prow: &Path, file: &str) -> PathBuf {
    let output = Command::new("go")
        .args(["list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/prow"])
        .current_dir(tools_prow)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=readonly")
        .output()
        .unwrap();
    assert!(output.status.success(), "go list: {}", text(&output));
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()).join(file)
}

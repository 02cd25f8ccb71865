//! `cargo bench -p harness --bench ccm_scale [-- NODES] [--rounds N] [--services N]`: the reference
//! CCM against upstream's own controllers (`local-upstream-ccm`: k8s.io/cloud-provider's CCM over the
//! local cloud), side by side on one control plane and one local cloud.
//!
//! Runs alternate, A B A B ... (`--rounds`, default 3, each CCM once per round), each CCM started
//! fresh with the arguments its provider gives it in the bundled providers.yaml (`local`,
//! `local-upstream`). A run first waits for the CCM to initialise a probe node (so start-up and
//! leader election are not timed), then registers NODES (default 1,000) new nodes, each with its
//! instance, and measures: the time from the first registration to every node initialised, the
//! time after the last registration, cloud-node reconciles per second over that time (the reference
//! CCM's `cloud_controller_manager_reconciles_total{controller="cloud-node"}`, upstream's items
//! processed by its cloud-node workqueue `Nodes`), and the CCM's CPU seconds over it. The nodes are
//! then deleted and their instances terminated, and the CCM churns `--services` (default 200)
//! LoadBalancer services: time until every one has an ingress IP, then, after deleting them all,
//! until every finalizer is gone. Peak RSS (VmHWM) is read as the CCM stops. The end prints each
//! CCM's medians and the ratios reference / upstream, as a Markdown table.
//!
//! For a profile: `--only local` (or `local-upstream`) runs one CCM, and `CCM_SCALE_WRAP="heaptrack
//! -o DIR/ccm"` starts each CCM under that command (its RSS and CPU are then the wrapper's, not the
//! CCM's).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use config::template::{self, Placeholder, Vars};
use config::{CcmDeploy, ProvidersConfig};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use local_cluster::clouds::local::{self as cloud, LocalSetup, LocalState};
use local_cluster::{LocalCluster, UpOptions, nodes};

const CLUSTER: &str = "ccm-scale";
/// How many API calls (or cloud calls) a step keeps in flight.
const CONCURRENCY: usize = 32;
const WAIT_LIMIT: Duration = Duration::from_secs(900);

struct Ccm {
    /// The provider in the bundled providers.yaml whose CCM this is.
    provider: &'static str,
    binary: PathBuf,
    /// The Prometheus sample counting the CCM's cloud-node reconciles.
    reconciles: &'static str,
}

#[derive(Debug, Default, Clone)]
struct Measured {
    registration: f64,
    to_all_initialised: f64,
    after_last_registration: f64,
    reconciles: f64,
    reconciles_per_s: f64,
    cpu_nodes: f64,
    to_all_ingress: f64,
    to_finalizers_gone: f64,
    cpu_services: f64,
    peak_rss_mib: f64,
}

fn arg_value(args: &[String], flag: &str) -> Option<usize> {
    let at = args.iter().position(|a| a == flag)?;
    args.get(at + 1)?.parse().ok()
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flags_with_values = ["--rounds", "--services", "--only"];
    let count: u32 = args
        .iter()
        .enumerate()
        .filter(|(i, a)| !a.starts_with("--") && (*i == 0 || !flags_with_values.contains(&args[i - 1].as_str())))
        .find_map(|(_, a)| a.parse().ok())
        .unwrap_or(1000);
    let rounds = arg_value(&args, "--rounds").unwrap_or(3);
    let services = arg_value(&args, "--services").unwrap_or(200);
    let only = args.iter().position(|a| a == "--only").and_then(|at| args.get(at + 1)).cloned();

    let release = toolchain::default_release();
    let reference = toolchain::workspace::build_reference_ccm().expect("building reference-ccm");
    let installed = toolchain::install_with(&release, false, &[toolchain::UPSTREAM_CCM])
        .expect("installing the toolchain (with local-upstream-ccm)");
    let ccms = [
        Ccm {
            provider: "local",
            binary: reference.clone(),
            reconciles: "cloud_controller_manager_reconciles_total{controller=\"cloud-node\"}",
        },
        Ccm {
            provider: "local-upstream",
            binary: installed.binary(toolchain::UPSTREAM_CCM),
            reconciles: "workqueue_work_duration_seconds_count{name=\"Nodes\"}",
        },
    ];
    let ccms: Vec<Ccm> = ccms
        .into_iter()
        .filter(|c| only.as_deref().is_none_or(|o| o == c.provider))
        .map(|c| Ccm { binary: wrapped(&c.binary), ..c })
        .collect();

    let mut options = UpOptions::new(CLUSTER, release);
    options.nodes = 1;
    options.cloud = Some(std::sync::Arc::new(LocalSetup { reference_ccm: reference, start_ccm: false }));
    local_cluster::down(CLUSTER).expect("clearing a leftover cluster");
    let mut cluster = local_cluster::up(options).await.expect("cluster up");
    let config = ProvidersConfig::bundled();
    let mut next_index = 1;
    let mut results: Vec<Vec<Measured>> = vec![Vec::new(); ccms.len()];
    println!("{count} nodes and {services} LoadBalancer services per run, {rounds} rounds of A B");
    for round in 1..=rounds {
        for (at, ccm) in ccms.iter().enumerate() {
            let args = ccm_args(&config, ccm.provider, &cluster);
            let measured = measure(&mut cluster, ccm, &args, &mut next_index, count, services, round).await;
            println!(
                "round {round} {:<15} all initialised {:>7.2}s (registration {:.2}s, {:.2}s after the last), \
                 {:.0} reconciles ({:.0}/s), CPU {:.2}s; services: ingress {:.2}s, finalizers gone {:.2}s, \
                 CPU {:.2}s; peak RSS {:.1} MiB",
                ccm.provider,
                measured.to_all_initialised,
                measured.registration,
                measured.after_last_registration,
                measured.reconciles,
                measured.reconciles_per_s,
                measured.cpu_nodes,
                measured.to_all_ingress,
                measured.to_finalizers_gone,
                measured.cpu_services,
                measured.peak_rss_mib,
            );
            results[at].push(measured);
        }
    }
    cluster.down().expect("cluster down");
    print_table(&ccms, &results);
}

/// With `CCM_SCALE_WRAP` set, a script of the binary's own name (the cluster finds the CCM's process
/// by it) that runs the binary under that command; otherwise the binary itself.
fn wrapped(binary: &std::path::Path) -> PathBuf {
    let Ok(wrap) = std::env::var("CCM_SCALE_WRAP") else { return binary.to_path_buf() };
    let dir = std::env::temp_dir().join(format!("ccm-scale-wrap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("creating the wrapper's directory");
    let script = dir.join(binary.file_name().expect("a binary name"));
    let text = format!("#!/bin/sh\nexec {wrap} {} \"$@\"\n", binary.display());
    std::fs::write(&script, text).expect("writing the wrapper");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    script
}

/// The CCM's arguments as `harness run` gives them: its provider's `ccm.deploy.args`, rendered.
fn ccm_args(config: &ProvidersConfig, provider: &str, cluster: &LocalCluster) -> Vec<String> {
    let provider = config.providers.iter().find(|p| p.name == provider).expect("a bundled provider");
    let CcmDeploy::Process { args, .. } = &provider.ccm.deploy else {
        panic!("{} is not a process deploy", provider.name)
    };
    let mut vars = Vars::new();
    vars.insert(Placeholder::Cluster, CLUSTER.into());
    vars.insert(Placeholder::ClusterCidr, nodes::CLUSTER_CIDR.into());
    vars.insert(Placeholder::Kubeconfig, cluster.state.kubeconfig.display().to_string());
    vars.insert(Placeholder::CloudConfig, cluster.cloud_config().display().to_string());
    vars.insert(Placeholder::CloudStateDir, cluster.cloud_state_dir().display().to_string());
    vars.insert(Placeholder::SecurePort, cluster.state.ccm_port.expect("a CCM port").to_string());
    args.iter().map(|a| template::render(a, &vars).expect("the bundled args render")).collect()
}

async fn measure(
    cluster: &mut LocalCluster,
    ccm: &Ccm,
    args: &[String],
    next_index: &mut u32,
    count: u32,
    services: usize,
    round: usize,
) -> Measured {
    let client = cluster.client().await.unwrap();
    let api: Api<Node> = Api::all(client.clone());
    let local_cloud = cluster.state.cloud_as::<LocalState>().expect("the local cloud").client().unwrap();
    let version = cluster.state.kubernetes_version.clone();
    cluster.start_ccm(&ccm.binary, args).await.expect("starting the CCM");
    let component = ccm.binary.file_name().unwrap().to_string_lossy().into_owned();
    let pid = cluster.state.processes.iter().find(|p| p.component == component).expect("the CCM's process").pid;
    let metrics_url = format!("127.0.0.1:{}", cluster.state.ccm_port.unwrap());

    // Warm up: the CCM is running its controllers once it initialised a node registered now.
    let probe = *next_index;
    let batch: Vec<u32> = (probe + 1..=probe + count).collect();
    *next_index = probe + count + 1;
    create_instances(&local_cloud, &[probe]).await;
    register(&api, &[probe], &version).await;
    wait_initialised(&api, &[probe], &format!("{} to initialise its first node", ccm.provider)).await;

    create_instances(&local_cloud, &batch).await;
    let reconciles_before = metric(&metrics_url, ccm.reconciles).await;
    let cpu_before = cpu_seconds(pid);
    let registering = Instant::now();
    register(&api, &batch, &version).await;
    let registration = registering.elapsed();
    wait_initialised(&api, &batch, &format!("{} to initialise {count} nodes", ccm.provider)).await;
    let to_all = registering.elapsed();
    let cpu_nodes = cpu_seconds(pid) - cpu_before;
    let reconciles = metric(&metrics_url, ccm.reconciles).await - reconciles_before;

    // The nodes go (instances first, as machines do), and the CCM removes their routes.
    let gone: Vec<u32> = std::iter::once(probe).chain(batch.iter().copied()).collect();
    terminate_instances(&local_cloud, &gone).await;
    delete_nodes(&api, &gone).await;
    wait_routes_cleaned(&api, &local_cloud).await;

    let namespace = format!("ccm-scale-{round}-{}", ccm.provider);
    let cpu_before = cpu_seconds(pid);
    let (to_ingress, to_gone) = churn_services(&client, &namespace, services).await;
    let cpu_services = cpu_seconds(pid) - cpu_before;

    let peak_rss_mib = vm_hwm_kib(pid) as f64 / 1024.0;
    cluster.stop_ccm(&ccm.binary).expect("stopping the CCM");
    let seconds = to_all.as_secs_f64();
    Measured {
        registration: registration.as_secs_f64(),
        to_all_initialised: seconds,
        after_last_registration: (to_all - registration).as_secs_f64(),
        reconciles,
        reconciles_per_s: reconciles / seconds,
        cpu_nodes,
        to_all_ingress: to_ingress.as_secs_f64(),
        to_finalizers_gone: to_gone.as_secs_f64(),
        cpu_services,
        peak_rss_mib,
    }
}

async fn create_instances(local_cloud: &local_cloud::LocalCloud, indices: &[u32]) {
    futures::stream::iter(
        indices.iter().map(|&i| async move {
            local_cloud.create_instance(&cloud::instance_for(&nodes::machine(CLUSTER, i))).await
        }),
    )
    .buffer_unordered(CONCURRENCY)
    .for_each(|r| async {
        r.expect("creating an instance");
    })
    .await;
}

async fn terminate_instances(local_cloud: &local_cloud::LocalCloud, indices: &[u32]) {
    futures::stream::iter(
        indices.iter().map(|&i| async move { local_cloud.terminate_instance(&nodes::node_name(CLUSTER, i)).await }),
    )
    .buffer_unordered(CONCURRENCY)
    .for_each(|r| async {
        r.expect("terminating an instance");
    })
    .await;
}

async fn register(api: &Api<Node>, indices: &[u32], version: &str) {
    futures::stream::iter(indices.iter().map(|&i| {
        let api = api.clone();
        let node = nodes::manifest(CLUSTER, i, version);
        async move { api.create(&PostParams::default(), &node).await }
    }))
    .buffer_unordered(CONCURRENCY)
    .for_each(|r| async {
        r.expect("registering a node");
    })
    .await;
}

async fn delete_nodes(api: &Api<Node>, indices: &[u32]) {
    futures::stream::iter(indices.iter().map(|&i| {
        let api = api.clone();
        async move { api.delete(&nodes::node_name(CLUSTER, i), &DeleteParams::default()).await }
    }))
    .buffer_unordered(CONCURRENCY)
    .for_each(|r| async move {
        match r {
            Ok(_) => {}
            // The CCM's lifecycle controller may have deleted it first (its instance is terminated).
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => panic!("deleting a node: {error}"),
        }
    })
    .await;
}

/// Waits until every node of `indices` exists without the uninitialized taint.
async fn wait_initialised(api: &Api<Node>, indices: &[u32], what: &str) {
    let names: std::collections::BTreeSet<String> = indices.iter().map(|&i| nodes::node_name(CLUSTER, i)).collect();
    let started = Instant::now();
    loop {
        let list = api.list(&ListParams::default()).await.unwrap();
        let done = list
            .items
            .iter()
            .filter(|n| n.metadata.name.as_ref().is_some_and(|name| names.contains(name)))
            .filter(|n| !nodes::is_uninitialized(n))
            .count();
        if done == names.len() {
            return;
        }
        assert!(started.elapsed() < WAIT_LIMIT, "timed out after {WAIT_LIMIT:?} waiting for {what}: {done} done");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the cloud routes no pod CIDR of a node that is gone (the CCM deletes them).
async fn wait_routes_cleaned(api: &Api<Node>, local_cloud: &local_cloud::LocalCloud) {
    let started = Instant::now();
    loop {
        let live: std::collections::BTreeSet<String> =
            api.list(&ListParams::default()).await.unwrap().items.into_iter().filter_map(|n| n.metadata.name).collect();
        let routes = local_cloud.list_all_routes().await.expect("listing routes");
        let stale = routes.iter().filter(|r| r.cluster == CLUSTER && !live.contains(&r.target_node)).count();
        if stale == 0 {
            return;
        }
        if started.elapsed() > Duration::from_secs(180) {
            println!("  ({stale} routes of deleted nodes still there after 3m; going on)");
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Creates `count` LoadBalancer services in a new `namespace` and waits for every ingress IP,
/// then deletes them all and waits until they are gone (their finalizers removed).
async fn churn_services(client: &kube::Client, namespace: &str, count: usize) -> (Duration, Duration) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": namespace}})).unwrap();
    namespaces.create(&PostParams::default(), &ns).await.expect("creating the namespace");
    let api: Api<Service> = Api::namespaced(client.clone(), namespace);
    let started = Instant::now();
    futures::stream::iter((0..count).map(|i| {
        let api = api.clone();
        let service: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("lb-{i}")},
            "spec": {"type": "LoadBalancer", "selector": {"app": "none"}, "ports": [{"port": 80, "protocol": "TCP"}]},
        }))
        .unwrap();
        async move { api.create(&PostParams::default(), &service).await }
    }))
    .buffer_unordered(CONCURRENCY)
    .for_each(|r| async {
        r.expect("creating a service");
    })
    .await;
    loop {
        let list = api.list(&ListParams::default()).await.unwrap();
        let with_ingress = list
            .items
            .iter()
            .filter(|s| {
                let status = s.status.as_ref().and_then(|s| s.load_balancer.as_ref());
                status.and_then(|lb| lb.ingress.as_ref()).is_some_and(|i| !i.is_empty())
            })
            .count();
        if with_ingress == count {
            break;
        }
        assert!(started.elapsed() < WAIT_LIMIT, "{with_ingress} of {count} services got an ingress IP");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let to_ingress = started.elapsed();
    let deleting = Instant::now();
    futures::stream::iter((0..count).map(|i| {
        let api = api.clone();
        async move { api.delete(&format!("lb-{i}"), &DeleteParams::default()).await }
    }))
    .buffer_unordered(CONCURRENCY)
    .for_each(|r| async {
        r.expect("deleting a service");
    })
    .await;
    loop {
        let left = api.list(&ListParams::default()).await.unwrap().items.len();
        if left == 0 {
            break;
        }
        assert!(deleting.elapsed() < WAIT_LIMIT, "{left} services still held by their finalizer");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let to_gone = deleting.elapsed();
    namespaces.delete(namespace, &DeleteParams::default()).await.expect("deleting the namespace");
    (to_ingress, to_gone)
}

fn vm_hwm_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap_or_default();
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// User + system CPU seconds of process `pid` (fields 14 and 15 of /proc/PID/stat).
fn cpu_seconds(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let ticks = |at: usize| fields.get(at).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (ticks(11) + ticks(12)) as f64 / clock_ticks_per_second()
}

fn clock_ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        let output = std::process::Command::new("getconf").arg("CLK_TCK").output();
        output.ok().and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok()).unwrap_or(100.0)
    })
}

/// The value of the sample `name` (with its labels) on the CCM's /metrics: plain HTTP for the
/// reference CCM, HTTPS with a self-signed certificate for upstream's.
async fn metric(address: &str, name: &str) -> f64 {
    let client =
        reqwest::Client::builder().danger_accept_invalid_certs(true).timeout(Duration::from_secs(10)).build().unwrap();
    for scheme in ["http", "https"] {
        let Ok(response) = client.get(format!("{scheme}://{address}/metrics")).send().await else { continue };
        let body = response.text().await.unwrap_or_default();
        if body.contains("HTTP request to an HTTPS server") {
            continue;
        }
        return body
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no sample {name} on {scheme}://{address}/metrics"));
    }
    panic!("no /metrics on {address}");
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn print_table(ccms: &[Ccm], results: &[Vec<Measured>]) {
    type Column = (&'static str, fn(&Measured) -> f64);
    let columns: [Column; 9] = [
        ("time to all initialised (s)", |m| m.to_all_initialised),
        ("after the last registration (s)", |m| m.after_last_registration),
        ("cloud-node reconciles/s", |m| m.reconciles_per_s),
        ("peak RSS (MiB)", |m| m.peak_rss_mib),
        ("CPU s, nodes", |m| m.cpu_nodes),
        ("200 services: all ingress (s)", |m| m.to_all_ingress),
        ("all finalizers gone (s)", |m| m.to_finalizers_gone),
        ("CPU s, services", |m| m.cpu_services),
        ("registration (s)", |m| m.registration),
    ];
    let medians: Vec<Vec<f64>> =
        results.iter().map(|runs| columns.iter().map(|(_, get)| median(runs.iter().map(get))).collect()).collect();
    println!();
    println!("medians of {} runs each", results.first().map_or(0, Vec::len));
    if ccms.len() < 2 {
        for (at, (name, _)) in columns.iter().enumerate() {
            println!("| {name} | {:.2} |", medians[0][at]);
        }
        return;
    }
    println!("| | {} | {} | reference / upstream |", ccms[0].provider, ccms[1].provider);
    println!("|---|---:|---:|---:|");
    for (at, (name, _)) in columns.iter().enumerate() {
        let (a, b) = (medians[0][at], medians[1][at]);
        let format = |v: f64| if v.abs() >= 100.0 { format!("{v:.0}") } else { format!("{v:.2}") };
        println!("| {name} | {} | {} | {:.2}× |", format(a), format(b), a / b);
    }
}

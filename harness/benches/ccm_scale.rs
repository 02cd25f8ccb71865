//! `cargo bench -p harness --bench ccm_scale [-- NODES]`: the reference CCM at scale. On a local
//! cluster with the local cloud, registers NODES (default 1,000) new nodes, each with its instance,
//! and measures the time from the first registration to every node initialised, the cloud-node
//! reconciles per second over that time, and the CCM's peak RSS (VmHWM) afterwards.

use std::time::{Duration, Instant};

use futures::StreamExt;
use harness::cluster::cloud::{self, CloudOptions};
use harness::cluster::{self, UpOptions, nodes};
use harness::toolchain;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, PostParams};

fn vm_hwm_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap_or_default();
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
}

async fn metric(base: &str, name: &str) -> f64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let host = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(host).await.expect("CCM metrics port");
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut body = String::new();
    stream.read_to_string(&mut body).await.unwrap();
    body.lines().find(|l| l.starts_with(name)).and_then(|l| l.rsplit(' ').next()?.parse().ok()).unwrap_or(0.0)
}

#[tokio::main]
async fn main() {
    let count: u32 =
        std::env::args().skip(1).find(|a| !a.starts_with("--")).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let release = toolchain::default_release();
    let ccm_binary = cloud::build_reference_ccm().expect("building reference-ccm");
    let mut options = UpOptions::new("ccm-scale", release);
    options.nodes = 1;
    options.cloud = Some(CloudOptions::new(ccm_binary));
    cluster::down("ccm-scale").expect("clearing a leftover cluster");
    let cluster = cluster::up(options).await.expect("cluster up");
    let client = cluster.client().await.unwrap();
    let api: Api<Node> = Api::all(client);
    let local_cloud = cloud::client(cluster.state.cloud_url.as_deref().unwrap()).unwrap();
    let ccm = cluster.state.processes.iter().find(|p| p.component == "reference-ccm").unwrap().clone();
    let ccm_url = cluster.state.ccm_url.clone().unwrap();

    let started = Instant::now();
    let indices = 1..=count;
    let instances = futures::stream::iter(indices.clone().map(|i| {
        let local_cloud = &local_cloud;
        async move { local_cloud.create_instance(&cloud::instance_for("ccm-scale", i)).await }
    }));
    instances
        .buffer_unordered(32)
        .for_each(|r| async {
            r.expect("instance");
        })
        .await;
    println!("{count} instances created in {:.2}s", started.elapsed().as_secs_f64());

    let reconciles_before =
        metric(&ccm_url, "cloud_controller_manager_reconciles_total{controller=\"cloud-node\"}").await;
    let registering = Instant::now();
    let creates = futures::stream::iter(indices.map(|i| {
        let api = api.clone();
        async move { api.create(&PostParams::default(), &nodes::manifest("ccm-scale", i, release.version)).await }
    }));
    creates
        .buffer_unordered(32)
        .for_each(|r| async {
            r.expect("node");
        })
        .await;
    let registered = registering.elapsed();
    loop {
        let list = api.list(&ListParams::default()).await.unwrap();
        if list.items.len() as u32 > count && list.items.iter().all(|n| !nodes::is_uninitialized(n)) {
            break;
        }
        assert!(registering.elapsed() < Duration::from_secs(600), "nodes were not initialised in 10 minutes");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let elapsed = registering.elapsed();
    let reconciles = metric(&ccm_url, "cloud_controller_manager_reconciles_total{controller=\"cloud-node\"}").await
        - reconciles_before;
    println!(
        "{count} nodes registered in {:.2}s; all initialised {:.2}s after the first registration",
        registered.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    println!("cloud-node: {reconciles} reconciles, {:.0} reconciles/s", reconciles / elapsed.as_secs_f64());
    println!("reference-ccm peak RSS: {:.1} MiB", vm_hwm_kib(ccm.pid) as f64 / 1024.0);
    cluster.down().expect("cluster down");
}

//! `cargo bench -p harness --bench cluster_up [-- RUNS NODES [kwok|real]]`: time from `cluster up`
//! to every node Ready on a warm toolchain cache (median, min, max of RUNS, default 5), and the
//! control plane's memory: each component's peak RSS (VmHWM) after the cluster settled, and their
//! sum (an upper bound of the whole control plane's peak). With `real`, the nodes are real
//! (kubelet, containerd; `--cloud local`, so "up" includes the CCM initialising them) and their
//! processes are measured too.
//!
//! Not a criterion bench: one sample brings a whole cluster up, so five are all we take.

use std::time::{Duration, Instant};

use local_cluster::{NodeKind, UpOptions};

fn vm_kib(pid: i32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let runs: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let nodes: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    let real = args.next().is_some_and(|kind| kind == "real");
    let release = toolchain::default_release();
    toolchain::install_with(&release, false, toolchain::ON_DEMAND).expect("toolchain");
    let ccm = real.then(|| toolchain::workspace::build_reference_ccm().expect("reference-ccm"));

    let mut times = Vec::new();
    for run in 0..runs {
        let mut options = UpOptions::new("bench", release);
        options.nodes = nodes;
        if let Some(ccm) = &ccm {
            options.node_kind = NodeKind::Real;
            options.cloud = Some(std::sync::Arc::new(local_cluster::clouds::local::LocalSetup::new(ccm.clone())));
        }
        let started = Instant::now();
        let cluster = local_cluster::up(options).await.expect("cluster up");
        let elapsed = started.elapsed();
        println!("run {}: up with {nodes} Ready nodes in {:.2}s", run + 1, elapsed.as_secs_f64());
        times.push(elapsed);
        if run + 1 == runs {
            // Let the controllers' initial syncs and kwok's first heartbeats pass before reading peaks.
            tokio::time::sleep(Duration::from_secs(15)).await;
            let mut total = 0;
            for process in &cluster.state.processes {
                let peak = vm_kib(process.pid, "VmHWM:");
                total += peak;
                println!("  {:<24} peak RSS {:>7.1} MiB", process.component, peak as f64 / 1024.0);
            }
            println!("  {:<24} peak RSS {:>7.1} MiB (sum of the peaks)", "control plane", total as f64 / 1024.0);
        }
        cluster.down().expect("cluster down");
    }
    times.sort();
    let secs = |d: &Duration| d.as_secs_f64();
    println!(
        "cluster up ({nodes} {} nodes, Kubernetes {}): median {:.2}s, min {:.2}s, max {:.2}s over {runs} runs",
        if real { "real" } else { "kwok" },
        release.version,
        secs(&times[times.len() / 2]),
        secs(&times[0]),
        secs(&times[times.len() - 1])
    );
}

//! `cargo bench -p harness --bench dashboard_load`: the dashboard's grid under load. Indexes 200
//! builds × 1,000 tests (the names of the largest real JUnit file in `tests/data/junit/`, real
//! conformance test names; about 4% failing, 1% flaky, 5% skipped) into SQLite and, when
//! `HARNESS_TEST_POSTGRES_URL` names a server, Postgres; starts the real `harness serve` on each;
//! then measures each page (the grid as HTML and JSON, the other pages): its first (cold) render,
//! as the first request of a server just started (once it is idle: its wall time, and the CPU time
//! the server spent on it, which a loaded machine stretches less) and as the first request of that
//! page on a server that answered the pages listed before it, the median of 20 requests after it (warm), its size
//! plain and gzipped, and with `wrk` on loopback p50, p99 and requests/s. Needs `wrk` (apt-get
//! install wrk) unless `WRK_SECONDS=0`.
//!
//! `WRK_SECONDS` (default 10; 0: no wrk) and `WRK_CONNECTIONS` (default 16) tune the load;
//! `COLD_ROUNDS` (default 3) is how many servers are started per page for its fresh-server figure
//! (the median); `PAGES=clusters` measures only the pages whose name contains `clusters`.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use junit::{self, ReadOptions};
use results::index::Index;
use results::layout::Versions;
use results::record::{BuildInfo, BuildRecord, State, TestResult, TestStatus};

const BUILDS: usize = 200;
const TESTS: usize = 1000;
const JOB: &str = "ci-bench-grid";

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` lists benches; there is nothing to list.
    }
    // WRK_SECONDS=0 measures only the single requests (no wrk needed).
    let wrk_seconds = std::env::var("WRK_SECONDS").unwrap_or_else(|_| "10".into());
    let with_wrk = wrk_seconds != "0";
    if with_wrk && Command::new("wrk").arg("--version").output().is_err() {
        eprintln!("dashboard_load needs wrk on PATH (apt-get install wrk), or WRK_SECONDS=0");
        std::process::exit(1);
    }
    let cold_rounds: usize = std::env::var("COLD_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(3).max(1);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut targets = vec![("SQLite", format!("sqlite://{}", tmp.path().join("index.sqlite").display()))];
    match std::env::var("HARNESS_TEST_POSTGRES_URL") {
        Ok(_) => targets.push(("Postgres", rt.block_on(testing::fresh_postgres_database()))),
        Err(_) => eprintln!("dashboard_load: skipping Postgres: HARNESS_TEST_POSTGRES_URL is not set"),
    }
    let names = test_names();
    println!(
        "| database | request | cold (fresh server, median of {cold_rounds}) | its server CPU | cold (after the pages above) | warm (median of {WARM}) | body | gzipped | p50 | p99 | requests/s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (database, url) in targets {
        let seeded = Instant::now();
        rt.block_on(seed(&url, &names));
        eprintln!("dashboard_load: {database}: {BUILDS} builds × {TESTS} tests indexed in {:.1?}", seeded.elapsed());
        // Each page as the first request of a server just started (nothing read or kept yet), the
        // median of COLD_ROUNDS servers.
        // Its wall time, and the CPU time the server spent on it (what the machine's load does not
        // stretch), each the median.
        let fresh: Vec<(Duration, Duration)> = pages()
            .into_iter()
            .map(|(_, path, accept)| {
                let (mut walls, mut cpus): (Vec<Duration>, Vec<Duration>) = (0..cold_rounds)
                    .map(|_| {
                        let (mut server, address) = serve(&url, tmp.path());
                        let before = settled_cpu(server.id());
                        let (first, _) = get(&address, &path, accept, false);
                        let cpu = cpu_time(server.id()) - before;
                        server.kill().unwrap();
                        server.wait().unwrap();
                        (first, cpu)
                    })
                    .unzip();
                walls.sort();
                cpus.sort();
                (walls[cold_rounds / 2], cpus[cold_rounds / 2])
            })
            .collect();
        let (mut server, address) = serve(&url, tmp.path());
        for ((request, path, accept), fresh) in pages().into_iter().zip(fresh) {
            // The first request renders (a grid is then kept until the job changes); the same
            // request gzipped is served from what the first rendered.
            let (cold, body) = get(&address, &path, accept, false);
            let (_, gzipped) = get(&address, &path, accept, true);
            let mut warm: Vec<Duration> = (0..WARM).map(|_| get(&address, &path, accept, false).0).collect();
            warm.sort();
            let load = if with_wrk {
                wrk(&address, &path, accept, &wrk_seconds)
            } else {
                Load { p50: "-".into(), p99: "-".into(), requests_per_second: "-".into() }
            };
            println!(
                "| {database} | {request} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms | {:.0} KiB | {:.0} KiB | {} | {} | {} |",
                fresh.0.as_secs_f64() * 1000.0,
                fresh.1.as_secs_f64() * 1000.0,
                cold.as_secs_f64() * 1000.0,
                warm[WARM / 2].as_secs_f64() * 1000.0,
                body as f64 / 1024.0,
                gzipped as f64 / 1024.0,
                load.p50,
                load.p99,
                load.requests_per_second
            );
        }
        server.kill().unwrap();
        server.wait().unwrap();
    }
}

/// How many requests the warm figure is the median of.
const WARM: usize = 20;

/// The pages measured: (what, path, Accept); only those whose name contains `PAGES`, if set.
fn pages() -> Vec<(&'static str, String, &'static str)> {
    let only = std::env::var("PAGES").unwrap_or_default();
    let mut pages = all_pages();
    pages.retain(|(what, _, _)| what.contains(only.as_str()));
    pages
}

fn all_pages() -> Vec<(&'static str, String, &'static str)> {
    vec![
        ("grid HTML (50 builds, the default)", format!("/job/{JOB}"), "text/html"),
        ("grid JSON (50 builds)", format!("/job/{JOB}"), "application/json"),
        ("grid HTML (all 200 builds)", format!("/job/{JOB}?builds=200"), "text/html"),
        ("grid JSON (all 200 builds)", format!("/job/{JOB}?builds=200"), "application/json"),
        ("home (matrix)", "/".into(), "text/html"),
        ("build page", format!("/job/{JOB}/build/{}", 1_000_000 + BUILDS - 1), "text/html"),
        // The seeded builds started in 2023: a window that reaches them.
        ("failure clusters (all 200 builds)", "/clusters?days=3650".into(), "text/html"),
        ("flakiest tests (50 builds)", format!("/flaky?job={JOB}"), "text/html"),
        ("suite by provider (1,000 tests)", "/suite/Kubernetes%20e2e%20suite".into(), "text/html"),
    ]
}

/// 1,000 real test names.
fn test_names() -> Vec<String> {
    let path = common::largest_real_junit_file();
    let report = junit::read_from(&std::fs::read(&path).unwrap()[..], &path, &ReadOptions::default()).unwrap();
    let mut names: Vec<String> = report.suites.iter().flat_map(|s| &s.cases).map(|c| c.name.clone()).collect();
    names.sort();
    names.dedup();
    assert!(names.len() >= TESTS, "the largest JUnit file has only {} tests", names.len());
    names.truncate(TESTS);
    names
}

async fn seed(url: &str, names: &[String]) {
    let index = Index::open(url).await.unwrap();
    for build in 0..BUILDS {
        let results = names
            .iter()
            .enumerate()
            .map(|(test, name)| {
                // Deterministic spread: a few tests fail for stretches, some flake, some skip.
                let status = match (test * 7 + build * 13) % 100 {
                    0..=3 => TestStatus::Fail,
                    4 => TestStatus::Flaky,
                    5..=9 => TestStatus::Skip,
                    _ => TestStatus::Pass,
                };
                TestResult {
                    suite: "Kubernetes e2e suite".into(),
                    name: name.clone(),
                    status,
                    duration_seconds: Some(1.0),
                    // Messages as real ones differ: a duration, a pod name and an address that change.
                    message: (status == TestStatus::Fail).then(|| {
                        format!(
                            "timed out after {}.{}s waiting for pod web-{:x}-{:05} at 10.{}.0.{}:8080: expected 3 nodes, saw 2",
                            30 + build % 7,
                            build % 10,
                            build * 7919,
                            test,
                            build % 250,
                            test % 250
                        )
                    }),
                }
            })
            .collect::<Vec<_>>();
        let started_at = 1_700_000_000 + build as i64 * 3600;
        let info = BuildInfo {
            job: JOB.into(),
            build: (1_000_000 + build).to_string(),
            path: format!("logs/{JOB}/{}", 1_000_000 + build),
            pull: None,
            provider: Some("local".into()),
            state: State::Finished,
            started_at,
            finished_at: Some(started_at + 600),
            passed: Some(!results.iter().any(|r| r.status == TestStatus::Fail)),
            result: Some("FAILURE".into()),
            versions: Versions {
                kubernetes_version: Some(format!("v1.37.{}", build / 20)),
                provider: Some("local".into()),
                provider_version: Some(format!("{:040x}", build)),
                ..Versions::default()
            },
            artifacts_url: format!("file:///store/logs/{JOB}/{}", 1_000_000 + build),
            digest: format!("bench-{build}"),
        };
        index.index_build(&BuildRecord { info, results, problems: vec![] }).await.unwrap();
    }
    index.close().await;
}

fn serve(database: &str, tmp: &std::path::Path) -> (Child, String) {
    let mut server = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["serve", "--listen", "127.0.0.1:0", "--refresh", "1h", "--database", database, "--store"])
        .arg(tmp.join("store"))
        .env("HARNESS_DATA_DIR", tmp.join("data"))
        .env("HARNESS_STATE_DIR", tmp.join("state"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let address = line.trim().strip_prefix("serving on http://").unwrap_or_else(|| panic!("{line:?}")).to_owned();
    testing::central::wait_for_lkg(&address);
    (server, address)
}

/// The CPU time a process's threads have run (Linux: `/proc/<pid>/task/*/schedstat`, nanoseconds).
fn cpu_time(pid: u32) -> Duration {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    let nanos: u64 = tasks
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(nanos)
}

/// The server's CPU time once it is idle (less than 1 ms of CPU in 100 ms: done loading, so the
/// next request has it alone), at most after 10 s.
fn settled_cpu(pid: u32) -> Duration {
    let mut last = cpu_time(pid);
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(100));
        let now = cpu_time(pid);
        if now - last < Duration::from_millis(1) {
            return now;
        }
        last = now;
    }
    last
}

/// One GET (gzipped when `gzip`): how long it took, and the body's size as sent.
fn get(address: &str, path: &str, accept: &str, gzip: bool) -> (Duration, usize) {
    let started = Instant::now();
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    let encoding = if gzip { "Accept-Encoding: gzip\r\n" } else { "" };
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\nAccept: {accept}\r\n{encoding}\r\n").unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let took = started.elapsed();
    assert!(response.starts_with(b"HTTP/1.0 200") || response.starts_with(b"HTTP/1.1 200"), "{path}");
    let body = response.windows(4).position(|w| w == b"\r\n\r\n").map_or(0, |at| response.len() - at - 4);
    (took, body)
}

struct Load {
    p50: String,
    p99: String,
    requests_per_second: String,
}

fn wrk(address: &str, path: &str, accept: &str, seconds: &str) -> Load {
    let connections = std::env::var("WRK_CONNECTIONS").unwrap_or_else(|_| "16".into());
    let output = Command::new("wrk")
        .args(["-t2", "-c", &connections, "-d", &format!("{seconds}s"), "--latency", "-H"])
        .arg(format!("Accept: {accept}"))
        .arg(format!("http://{address}{path}"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success() && !text.contains("Non-2xx"), "wrk: {text}");
    let field = |prefix: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(prefix).map(|v| v.split_whitespace().next().unwrap_or("").to_owned()))
            .unwrap_or_else(|| panic!("no {prefix:?} in wrk's output: {text}"))
    };
    Load { p50: field("50%"), p99: field("99%"), requests_per_second: field("Requests/sec:") }
}

//! `cargo bench -p harness --bench serve_scale [-- SIZES...] [--shape sig|uniform] [--binary NAME=PATH]... [--keep]`:
//! the central `harness serve` over a Postgres index (`HARNESS_TEST_POSTGRES_URL`, which
//! `scripts/postgres start` prints) of SIZES test results (default 10 M and 30 M).
//!
//! Shapes, each made once by SQL (every build's results also packed, as `harness` writes them) in
//! database `harness_bench_<shape>_<results>`, dropped after measuring unless `--keep`:
//! - `sig` (default): a year of the SIG's CI cut to SIZES. 30 providers, each on three release lines
//!   (master against `v1.38.0-alpha.N`, release-1.37, release-1.36), each with a periodic
//!   conformance job (3,200 cases a build, one in eight run and the rest skipped, as upstream's
//!   JUnit lists every spec), a periodic cloud-e2e job and a presubmit (30 cases each, under
//!   `pr-logs/`); of the cases that run about 1 % fail and 0.5 % flake; 2 % of builds failed; the
//!   builds spread over 365 days.
//! - `uniform`: two providers, 1,000 tests a build, versions shared by 20 builds, 0.1 % failures,
//!   10 % skips (issue 19's restart bench).
//!
//! For this commit's binary and each `--binary` (an older commit's, run on a copy of the index
//! without the migrations it does not know: `--before-migrations N`, its last, 9 by default),
//! alternating, ROUNDS rounds: the time from spawn to listening, to the first LKG answer (200 from
//! `/api/v1/lkg`), the RSS once loaded and its peak (VmHWM), and the time to serve one more build
//! (a copy of the newest build of the first provider's first job, indexed as `harness` does, until
//! `/metrics` shows its generation, and the incremental load that took it in as `/metrics` timed it).
//! This commit's binary starts twice a round: with no stored
//! verdicts (the first start after an upgrade: every build judged, the verdicts stored), then again
//! (a restart: the verdicts read). Then, on this commit's binary alone: each dashboard page, cold
//! (the first request of a server that just loaded) and warm (the median of the next 10); ingestion
//! by two replicas (`testing::load`: 20 publishers × 10 builds at once); and the database's size.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use results::remote::RemoteOptions;
use testing::central::Service;
use testing::load::{self, Plan};

const ROUNDS: usize = 2;
/// Providers of the `sig` shape; the first two are named as `testing::load` publishes.
const SIG_PROVIDERS: usize = 30;
const CONFORMANCE_CASES: i64 = 3_200;
const CLOUD_E2E_CASES: i64 = 30;
const UNIFORM_TESTS: i64 = 1_000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Sig,
    Uniform,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Sig => "sig",
            Shape::Uniform => "uniform",
        }
    }

    /// The job one more build is indexed to, and whose grid is measured.
    fn job(self) -> &'static str {
        match self {
            Shape::Sig => "ci-cloud-provider-alpha-conformance",
            Shape::Uniform => "ci-alpha",
        }
    }
}

struct Args {
    sizes: Vec<i64>,
    shape: Shape,
    binaries: Vec<(String, String)>,
    before_migrations: i64,
    keep: bool,
}

fn args() -> Args {
    let mut args =
        Args { sizes: Vec::new(), shape: Shape::Sig, binaries: Vec::new(), before_migrations: 9, keep: false };
    let given: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let mut rest = given.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--binary" => {
                let value = rest.next().expect("--binary NAME=PATH");
                let (name, path) = value.split_once('=').expect("--binary NAME=PATH");
                args.binaries.push((name.to_owned(), path.to_owned()));
            }
            "--before-migrations" => {
                args.before_migrations = rest.next().and_then(|n| n.parse().ok()).expect("--before-migrations N");
            }
            "--shape" => {
                args.shape = match rest.next().map(String::as_str) {
                    Some("sig") => Shape::Sig,
                    Some("uniform") => Shape::Uniform,
                    other => panic!("--shape sig|uniform, not {other:?}"),
                }
            }
            "--keep" => args.keep = true,
            size => args.sizes.push(size.parse().unwrap_or_else(|_| panic!("{size:?}: a number of results"))),
        }
    }
    if args.sizes.is_empty() {
        args.sizes = vec![10_000_000, 30_000_000];
    }
    args
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` lists benches; there is nothing to list.
    }
    let args = args();
    let server = std::env::var("HARNESS_TEST_POSTGRES_URL")
        .expect("HARNESS_TEST_POSTGRES_URL: start one with `eval \"$(scripts/postgres start)\"`");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = match args.shape {
        Shape::Sig => sig_providers_yaml(dir.path()),
        Shape::Uniform => testing::central::providers_yaml(dir.path()),
    };
    let store = dir.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    let this = env!("CARGO_BIN_EXE_harness");
    for size in &args.sizes {
        let (database, made) = rt.block_on(seeded(&server, args.shape, *size));
        if let Some(took) = made {
            println!("\nmade the {} index of {size} results in {:.0} s", args.shape.name(), took.as_secs_f64());
        }
        let older = match args.binaries.is_empty() {
            true => None,
            false => Some(rt.block_on(copy_for_older(&server, &database, args.before_migrations))),
        };
        println!(
            "\n| results | binary | start | round | listening | first LKG answer | RSS loaded | peak RSS | build served after | its update |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|");
        for round in 1..=ROUNDS {
            let mut starts = vec![("this", this, database.as_str(), "first"), ("this", this, &database, "restart")];
            for (name, path) in &args.binaries {
                starts.push((name.as_str(), path.as_str(), older.as_deref().unwrap(), "restart"));
            }
            for (name, binary, database, start) in starts {
                if start == "first" {
                    rt.block_on(forget_verdicts(database));
                }
                let serve = Serve { binary, database, config: &config, store: &store };
                let figures = serve.measure(&rt, args.shape.job());
                println!(
                    "| {size} | {name} | {start} | {round} | {:.2} s | {:.2} s | {} MiB | {} MiB | {:.2} s | {} |",
                    figures.listening.as_secs_f64(),
                    figures.first_answer.as_secs_f64(),
                    figures.rss_kib / 1024,
                    figures.peak_kib / 1024,
                    figures.next_build.as_secs_f64(),
                    figures.update.map_or("–".to_owned(), |update| format!("{:.1} ms", ms(update))),
                );
            }
        }
        let serve = Serve { binary: this, database: &database, config: &config, store: &store };
        serve.pages(&rt, args.shape.job());
        ingest(&rt, this, &database, &config);
        rt.block_on(sizes(&database));
        if !args.keep {
            rt.block_on(drop_database(&server, &database));
            if let Some(older) = &older {
                rt.block_on(drop_database(&server, older));
            }
        }
    }
}

struct Figures {
    listening: Duration,
    first_answer: Duration,
    rss_kib: u64,
    peak_kib: u64,
    next_build: Duration,
    /// The incremental load that took the build in, as `/metrics` timed it (none when the build
    /// needed a whole load).
    update: Option<Duration>,
}

struct Serve<'a> {
    binary: &'a str,
    database: &'a str,
    config: &'a Path,
    store: &'a Path,
}

impl Serve<'_> {
    /// A server spawned and loaded: its address, and how long listening and the LKG took.
    fn start(&self) -> (Child, String, Duration, Duration) {
        let started = Instant::now();
        let mut child = self.spawn();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let listening = started.elapsed();
        let address = line.trim().strip_prefix("serving on http://").unwrap_or_else(|| panic!("{line:?}")).to_owned();
        while testing::central::status_of(&address, "/api/v1/lkg").ok() != Some(200) {
            assert!(started.elapsed() < Duration::from_secs(1800), "no LKG answer in 30 minutes");
            std::thread::sleep(Duration::from_millis(10));
        }
        (child, address, listening, started.elapsed())
    }

    fn measure(&self, rt: &tokio::runtime::Runtime, job: &str) -> Figures {
        let (mut child, address, listening, first_answer) = self.start();
        std::thread::sleep(Duration::from_secs(2));
        let (rss_kib, peak_kib) = memory(child.id());
        let generation = rt.block_on(add_build(self.database, job));
        let added = Instant::now();
        let needle = format!("harness_lkg_index_generation {generation}\n");
        while !get(&address, "/metrics", "text/plain").contains(&needle) {
            assert!(added.elapsed() < Duration::from_secs(600), "the new build was never served");
            std::thread::sleep(Duration::from_millis(10));
        }
        let next_build = added.elapsed();
        let update = incremental_load(&get(&address, "/metrics", "text/plain"));
        stop(&mut child);
        Figures { listening, first_answer, rss_kib, peak_kib, next_build, update }
    }

    /// Each page's first request on a server that just loaded, and the median of 10 after it.
    fn pages(&self, rt: &tokio::runtime::Runtime, job: &str) {
        let newest = rt.block_on(newest_build(self.database, job));
        let pages = [
            ("home (matrix)", "/".to_owned()),
            ("LKG", "/lkg".to_owned()),
            ("grid (50 builds)", format!("/job/{job}")),
            ("build page", format!("/job/{job}/build/{newest}")),
            ("failure clusters (last 7 days)", "/clusters".to_owned()),
            ("flakiest tests", format!("/flaky?job={job}")),
            ("conformance by provider (/suite)", "/suite/Kubernetes%20e2e%20suite".to_owned()),
            ("cloud-e2e by provider (/suite)", "/suite/cloud-e2e".to_owned()),
        ];
        println!("\n| page | cold | warm (median of 10) | bytes |");
        println!("|---|---|---|---|");
        for (what, path) in pages {
            let (mut child, address, _, _) = self.start();
            let timed = || {
                let started = Instant::now();
                let body = get(&address, &path, "text/html");
                assert!(body.starts_with("HTTP/1.1 200") || body.starts_with("HTTP/1.0 200"), "{path}: {body:.300}");
                (started.elapsed(), body.len())
            };
            let (cold, bytes) = timed();
            let mut warm: Vec<Duration> = (0..10).map(|_| timed().0).collect();
            warm.sort();
            println!("| {what} | {:.0} ms | {:.1} ms | {bytes} |", ms(cold), ms(warm[5]));
            stop(&mut child);
        }
    }

    fn spawn(&self) -> Child {
        Command::new(self.binary)
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--poll",
                "100ms",
                "--refresh",
                "1h",
                "--database",
                self.database,
            ])
            .arg("--config")
            .arg(self.config)
            .arg("--store")
            .arg(self.store)
            .env("CI", "true")
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }
}

/// The mean time of the incremental LKG loads `/metrics` counted (one here: the build added).
fn incremental_load(metrics: &str) -> Option<Duration> {
    let value = |name: &str| -> Option<f64> {
        let prefix = format!("harness_lkg_load_duration_seconds_{name}{{kind=\"incremental\"}} ");
        metrics.lines().find_map(|l| l.strip_prefix(prefix.as_str())).and_then(|v| v.trim().parse().ok())
    };
    Some(Duration::from_secs_f64(value("sum")? / value("count")?.max(1.0)))
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

fn stop(child: &mut Child) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    child.wait().unwrap();
}

/// Two replicas on the index take 20 publishers' 10 builds each at once.
fn ingest(rt: &tokio::runtime::Runtime, binary: &str, database: &str, config: &Path) {
    let mut service = Service::new(Path::new(binary), database.to_owned());
    service.config = config.to_path_buf();
    let tokens = [service.token("alpha"), service.token("beta")];
    let replicas: Vec<_> = (0..2).map(|r| service.replica(&format!("r{r}"), &[])).collect();
    let remotes: Vec<String> = replicas.iter().map(|r| r.url.clone()).collect();
    let plan = Plan { publishers: 20, builds_each: 10, tests: 5 };
    let options = RemoteOptions::new(Vec::new(), String::new());
    let report = rt.block_on(load::run(&remotes, &tokens, plan, &options, Default::default()));
    assert!(report.errors.is_empty(), "{:?}", &report.errors[..report.errors.len().min(5)]);
    println!("\n| ingestion, 2 replicas | builds | elapsed | builds/s | p50 | p99 | retries |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "| 20 publishers × 10 builds | {} | {:.1} s | {:.1} | {:.0} ms | {:.0} ms | {} |",
        report.created + report.existed,
        report.elapsed.as_secs_f64(),
        report.throughput(),
        ms(report.quantile(0.5)),
        ms(report.quantile(0.99)),
        report.retries
    );
}

/// VmRSS and VmHWM of a process, KiB.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn get(address: &str, path: &str, accept: &str) -> String {
    let Ok(mut stream) = std::net::TcpStream::connect(address) else { return String::new() };
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\nAccept: {accept}\r\n\r\n").unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
}

/// providers.yaml with `SIG_PROVIDERS` copies of the bundled `local` provider (`alpha`, `beta`,
/// `p02`, ...), each with release-1.37 and release-1.36 lines beside master.
fn sig_providers_yaml(dir: &Path) -> PathBuf {
    let bundled = config::BUNDLED;
    let header = &bundled[..bundled.find("\n  - name: ").expect("the bundled file lists providers") + 1];
    let local = config::bundled_entry("local").expect("the bundled file has `local`");
    let local =
        local.replacen("    branch: main\n", "    branch: main\n    branches: [main, release-1.37, release-1.36]\n", 1);
    let entries: Vec<String> = (0..SIG_PROVIDERS)
        .map(|p| local.replacen("- name: local", &format!("- name: {}", provider_name(p)), 1).trim_end().to_owned())
        .collect();
    let path = dir.join("providers.yaml");
    std::fs::write(&path, format!("{header}{}\n", entries.join("\n"))).unwrap();
    path
}

fn provider_name(p: usize) -> String {
    match p {
        0 => "alpha".into(),
        1 => "beta".into(),
        p => format!("p{p:02}"),
    }
}

async fn connect(url: &str) -> sqlx::AnyConnection {
    sqlx::any::install_default_drivers();
    <sqlx::AnyConnection as sqlx::Connection>::connect(url).await.unwrap_or_else(|e| panic!("{url}: {e}"))
}

fn url_of(server: &str, name: &str) -> String {
    format!("{}/{name}", server.rsplit_once('/').unwrap().0)
}

/// The database of `results` results of `shape`, made by SQL if not there yet (and how long that
/// took).
async fn seeded(server: &str, shape: Shape, results: i64) -> (String, Option<Duration>) {
    use sqlx::{Executor, Row};
    let name = format!("harness_bench_{}_{results}", shape.name());
    let url = url_of(server, &name);
    let mut admin = connect(server).await;
    let exists = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT 1 FROM pg_database WHERE datname = '{name}'")))
        .fetch_optional(&mut admin)
        .await
        .unwrap()
        .is_some();
    if exists {
        let mut conn = connect(&url).await;
        let counts = "SELECT (SELECT COUNT(*) FROM test_results), (SELECT COUNT(*) FROM build_cells)";
        let row = sqlx::query(counts).fetch_one(&mut conn).await.unwrap();
        if row.get::<i64, _>(0) >= results * 9 / 10 && row.get::<i64, _>(1) > 0 {
            return (url, None);
        }
        drop(conn);
        admin.execute(sqlx::AssertSqlSafe(format!("DROP DATABASE {name}"))).await.unwrap();
    }
    admin.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).await.unwrap();
    results::index::Index::open(&url).await.unwrap().close().await;
    let started = Instant::now();
    let statements = match shape {
        Shape::Sig => sig_statements(results),
        Shape::Uniform => uniform_statements(results),
    };
    let mut conn = connect(&url).await;
    for statement in statements {
        conn.execute(sqlx::AssertSqlSafe(statement.clone())).await.unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    // What migration 0013 does to an index of this size when it is upgraded, timed.
    let backfill = Instant::now();
    conn.execute(SUITES_OF_BUILDS).await.unwrap_or_else(|e| panic!("{SUITES_OF_BUILDS}: {e}"));
    println!(
        "\nbuild_suites filled from {results} results (migration 0013's statement) in {:.1} s",
        backfill.elapsed().as_secs_f64()
    );
    for statement in [
        PACK_RESULTS.replace("{builds}", "SELECT id FROM builds"),
        "UPDATE jobs SET generation = generation + 1".to_owned(),
        "ANALYZE".to_owned(),
    ] {
        conn.execute(sqlx::AssertSqlSafe(statement.clone())).await.unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    (url, Some(started.elapsed()))
}

/// The `sig` shape's rows: providers, jobs, tests, builds and results.
fn sig_statements(results: i64) -> Vec<String> {
    // A conformance build and its two smaller siblings.
    let per_round = CONFORMANCE_CASES + 2 * CLOUD_E2E_CASES;
    let builds = 3 * (results / per_round).max(1);
    let providers: Vec<String> = (0..SIG_PROVIDERS).map(|p| format!("('{}')", provider_name(p))).collect();
    let year = 365 * 24 * 3600;
    vec![
        format!("INSERT INTO providers (name) VALUES {}", providers.join(", ")),
        "INSERT INTO jobs (name, provider_id) SELECT k.job, p.id FROM providers p CROSS JOIN LATERAL \
         (VALUES ('ci-cloud-provider-' || p.name || '-conformance'), ('ci-cloud-provider-' || p.name || '-cloud-e2e'), \
         ('pull-cloud-provider-' || p.name || '-e2e')) AS k(job)"
            .to_owned(),
        format!(
            "INSERT INTO tests (suite, name) SELECT 'Kubernetes e2e suite', '[sig-area-' || (g % 12) || \
             '] a conformance spec of the benchmark, number ' || g || ' [Conformance]' FROM generate_series(1, {CONFORMANCE_CASES}) g"
        ),
        format!(
            "INSERT INTO tests (suite, name) SELECT 'cloud-e2e', '[cloud-e2e] capability ' || g \
             FROM generate_series(1, {CLOUD_E2E_CASES}) g"
        ),
        // Build g: provider (g / 3) % 30, job kind g % 3, release line (g / 90) % 3; a new
        // Kubernetes version every 270 builds on master (2,700 on a release branch), a new
        // provider version every 180.
        format!(
            "INSERT INTO builds (job_id, build, path, pull, state, started_at, finished_at, passed, result, \
             kubernetes_version, provider_version, artifacts_url, digest) \
             SELECT j.id, g::text, CASE WHEN g % 3 = 2 THEN 'pr-logs/pull/org_repo/' || (g % 500) || '/' || j.name || '/' || g \
             ELSE 'logs/' || j.name || '/' || g END, CASE WHEN g % 3 = 2 THEN (g % 500)::text END, 'finished', \
             1735689600 + g * {year} / {builds}, 1735689600 + g * {year} / {builds} + 1800, g % 50 <> 0, \
             CASE WHEN g % 50 <> 0 THEN 'SUCCESS' ELSE 'FAILURE' END, \
             CASE (g / 90) % 3 WHEN 0 THEN 'v1.38.0-alpha.' || (g / 270) WHEN 1 THEN 'v1.37.' || (g / 2700) \
             ELSE 'v1.36.' || (g / 2700) END, 'c' || (g / 180), 'file:///store/' || g, 'digest-' || g \
             FROM generate_series(1::bigint, {builds}) g JOIN providers p ON p.name = CASE (g / 3) % {SIG_PROVIDERS} \
             WHEN 0 THEN 'alpha' WHEN 1 THEN 'beta' ELSE 'p' || lpad(((g / 3) % {SIG_PROVIDERS})::text, 2, '0') END \
             JOIN jobs j ON j.provider_id = p.id AND j.name = CASE g % 3 \
             WHEN 0 THEN 'ci-cloud-provider-' || p.name || '-conformance' WHEN 1 THEN 'ci-cloud-provider-' || p.name || '-cloud-e2e' \
             ELSE 'pull-cloud-provider-' || p.name || '-e2e' END"
        ),
        // One conformance case in eight runs; of those that run ~1 % fail and ~0.5 % flake.
        "INSERT INTO test_results (build_id, test_id, status, duration_seconds, failure_message) \
         SELECT b.id, t.id, s.status, CASE WHEN s.status = 'skip' THEN 0 ELSE 12.5 END, \
         CASE WHEN s.status = 'fail' THEN 'timed out waiting for the condition on pods' END \
         FROM builds b JOIN jobs j ON j.id = b.job_id AND j.name LIKE '%-conformance' \
         JOIN tests t ON t.suite = 'Kubernetes e2e suite' CROSS JOIN LATERAL (SELECT CASE \
         WHEN t.id % 8 <> 0 THEN 'skip' WHEN (b.id * 7919 + t.id * 104729) % 10007 < 100 THEN 'fail' \
         WHEN (b.id * 7919 + t.id * 104729) % 10007 < 150 THEN 'flaky' ELSE 'pass' END AS status) s"
            .to_owned(),
        // cloud-e2e and presubmit builds: every case runs, ~2 % fail.
        "INSERT INTO test_results (build_id, test_id, status, duration_seconds, failure_message) \
         SELECT b.id, t.id, s.status, 3.5, CASE WHEN s.status = 'fail' THEN 'node never got its provider ID' END \
         FROM builds b JOIN jobs j ON j.id = b.job_id AND j.name NOT LIKE '%-conformance' \
         JOIN tests t ON t.suite = 'cloud-e2e' CROSS JOIN LATERAL (SELECT CASE \
         WHEN (b.id * 7919 + t.id * 104729) % 10007 < 200 THEN 'fail' ELSE 'pass' END AS status) s"
            .to_owned(),
    ]
}

/// The `uniform` shape's rows (issue 19's restart bench).
fn uniform_statements(results: i64) -> Vec<String> {
    let builds = results / UNIFORM_TESTS;
    vec![
        "INSERT INTO providers (name) VALUES ('alpha'), ('beta')".to_owned(),
        "INSERT INTO jobs (name, provider_id) SELECT 'ci-' || name, id FROM providers".to_owned(),
        format!(
            "INSERT INTO tests (suite, name) SELECT 'Kubernetes e2e suite', \
             '[sig-bench] a test of the benchmark, number ' || g FROM generate_series(1, {UNIFORM_TESTS}) g"
        ),
        format!(
            "INSERT INTO builds (job_id, build, path, state, started_at, finished_at, passed, result, \
             kubernetes_version, provider_version, artifacts_url, digest) \
             SELECT j.id, g::text, 'logs/' || j.name || '/' || g, 'finished', 1700000000 + g * 60, \
             1700000000 + g * 60 + 30, true, 'SUCCESS', 'v1.37.0-alpha.' || (g / 20), 'p' || (g / 20), \
             'file:///store/logs/' || j.name || '/' || g, 'digest-' || g \
             FROM generate_series(1, {builds}) g JOIN jobs j ON j.name = CASE WHEN g % 2 = 0 THEN 'ci-alpha' ELSE 'ci-beta' END"
        ),
        "INSERT INTO test_results (build_id, test_id, status) SELECT b.id, t.id, \
         CASE WHEN (b.id * 31 + t.id) % 1009 = 0 THEN 'fail' WHEN t.id % 10 = 0 THEN 'skip' ELSE 'pass' END \
         FROM builds b CROSS JOIN tests t"
            .to_owned(),
    ]
}

/// Packs the results of the builds `{builds}` selects into `build_cells`, as `harness` writes
/// them with the results (`<test id><status letter>` in insertion order, and the counts).
const PACK_RESULTS: &str = "INSERT INTO build_cells (build_id, digest, cells, passed_tests, ran_tests) \
     SELECT b.id, b.digest, COALESCE(string_agg(r.test_id::text || CASE r.status WHEN 'pass' THEN 'p' \
     WHEN 'fail' THEN 'f' WHEN 'flaky' THEN 'k' ELSE 's' END, '' ORDER BY r.id), ''), \
     COUNT(r.id) FILTER (WHERE r.status IN ('pass', 'flaky')), COUNT(r.id) FILTER (WHERE r.status <> 'skip') \
     FROM builds b LEFT JOIN test_results r ON r.build_id = b.id WHERE b.id IN ({builds}) GROUP BY b.id, b.digest";

/// The suites of every build, as migration 0013 fills them for the builds indexed before it.
const SUITES_OF_BUILDS: &str = "INSERT INTO build_suites (suite, build_id) \
     SELECT DISTINCT te.suite, t.build_id FROM test_results t JOIN tests te ON te.id = t.test_id";

/// Drops every stored verdict: the next start judges every build, as the first after an upgrade.
async fn forget_verdicts(url: &str) {
    let mut conn = connect(url).await;
    sqlx::query("DELETE FROM build_verdicts").execute(&mut conn).await.unwrap();
}

/// A copy of the index at `url` as a binary whose last migration is `last` left it: the newer
/// migrations' tables and columns dropped and their records removed (an older binary refuses a
/// database a newer one migrated).
async fn copy_for_older(server: &str, url: &str, last: i64) -> String {
    use sqlx::Executor;
    let source = url.rsplit_once('/').unwrap().1;
    let name = format!("{source}_older");
    let mut admin = connect(server).await;
    admin.execute(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name}"))).await.unwrap();
    admin.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name} TEMPLATE {source}"))).await.unwrap();
    let copy = url_of(server, &name);
    let mut conn = connect(&copy).await;
    // What each migration after 9 added, newest first.
    let undo = [
        (13, "DROP TABLE IF EXISTS build_suites"),
        (13, "DROP INDEX IF EXISTS test_results_said"),
        (11, "ALTER TABLE builds DROP COLUMN IF EXISTS results_expired_at"),
        (10, "DROP TABLE IF EXISTS build_verdicts"),
    ];
    for (version, statement) in undo {
        if version > last {
            conn.execute(statement).await.unwrap();
        }
    }
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version > $1").bind(last).execute(&mut conn).await.unwrap();
    copy
}

async fn drop_database(server: &str, url: &str) {
    use sqlx::Executor;
    let name = url.rsplit_once('/').unwrap().1;
    let mut admin = connect(server).await;
    admin.execute(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))).await.unwrap();
}

/// The database's size, and its largest tables'.
async fn sizes(url: &str) {
    use sqlx::Row;
    let mut conn = connect(url).await;
    let row = sqlx::query(
        "SELECT pg_database_size(current_database()), pg_total_relation_size('test_results'), \
         pg_total_relation_size('build_cells'), pg_total_relation_size('build_verdicts'), \
         (SELECT COUNT(*) FROM builds), (SELECT COUNT(*) FROM test_results)",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    let mib = |i: usize| row.get::<i64, _>(i) / (1 << 20);
    println!("\n| builds | results | database | test_results | build_cells | build_verdicts |");
    println!("|---|---|---|---|---|---|");
    println!(
        "| {} | {} | {} MiB | {} MiB | {} MiB | {} MiB |",
        row.get::<i64, _>(4),
        row.get::<i64, _>(5),
        mib(0),
        mib(1),
        mib(2),
        mib(3)
    );
}

/// The newest build of `job` the index was made with.
async fn newest_build(url: &str, job: &str) -> String {
    use sqlx::Row;
    let mut conn = connect(url).await;
    let row = sqlx::query(
        "SELECT b.build FROM builds b JOIN jobs j ON j.id = b.job_id WHERE j.name = $1 \
         AND b.build NOT LIKE 'next-%' ORDER BY b.started_at DESC LIMIT 1",
    )
    .bind(job)
    .fetch_one(&mut conn)
    .await
    .unwrap();
    row.get(0)
}

/// Indexes a copy of the newest build of `job` (its versions, its results, started a minute after
/// the newest build of all, so the LKG can add it to what it holds)
/// the way `harness` does (one transaction, results packed, the job's generation bumped), and
/// returns the index generation that follows.
async fn add_build(url: &str, job: &str) -> i64 {
    use sqlx::{Connection, Row};
    let mut conn = connect(url).await;
    let mut tx = conn.begin().await.unwrap();
    let newest: i64 = sqlx::query(
        "SELECT b.id FROM builds b JOIN jobs j ON j.id = b.job_id WHERE j.name = $1 ORDER BY b.started_at DESC LIMIT 1",
    )
    .bind(job)
    .fetch_one(&mut *tx)
    .await
    .unwrap()
    .get(0);
    let row = sqlx::query(
        "INSERT INTO builds (job_id, build, path, state, started_at, finished_at, passed, result, \
         kubernetes_version, provider_version, artifacts_url, digest) \
         SELECT b.job_id, 'next-' || (m.n + 1), 'logs/' || $2 || '/next-' || (m.n + 1), 'finished', m.newest + 60, \
         m.newest + 90, b.passed, b.result, b.kubernetes_version, b.provider_version, 'file:///x', 'next-' || (m.n + 1) \
         FROM builds b, (SELECT COUNT(*) AS n, MAX(started_at) AS newest FROM builds) m WHERE b.id = $1 RETURNING id",
    )
    .bind(newest)
    .bind(job)
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    let build: i64 = row.get(0);
    sqlx::query(
        "INSERT INTO test_results (build_id, test_id, status, duration_seconds, failure_message) \
         SELECT $1, test_id, status, duration_seconds, failure_message FROM test_results WHERE build_id = $2 ORDER BY id",
    )
    .bind(build)
    .bind(newest)
    .execute(&mut *tx)
    .await
    .unwrap();
    sqlx::query("INSERT INTO build_suites (suite, build_id) SELECT suite, $1 FROM build_suites WHERE build_id = $2")
        .bind(build)
        .bind(newest)
        .execute(&mut *tx)
        .await
        .unwrap();
    let pack = PACK_RESULTS.replace("{builds}", &build.to_string());
    sqlx::query(sqlx::AssertSqlSafe(pack)).execute(&mut *tx).await.unwrap();
    sqlx::query("UPDATE jobs SET generation = generation + 1 WHERE name = $1")
        .bind(job)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let row = sqlx::query("SELECT CAST(SUM(generation) AS BIGINT) FROM jobs").fetch_one(&mut conn).await.unwrap();
    row.get(0)
}

//! `cargo bench -p harness --bench serve_restart [-- RESULTS...] [--binary NAME=PATH]...`: a
//! restart of `harness serve` over a Postgres index (`HARNESS_TEST_POSTGRES_URL`, which
//! `scripts/postgres start` prints) of 1 M and 10 M test results (1,000 tests a build, two
//! providers, versions shared by 20 builds, each build's results also packed as `harness` writes
//! them). Each index is made once by SQL and kept (database `harness_bench_restart_<results>`).
//! For each binary, alternating, ROUNDS times, it measures: the time from spawn to listening, to
//! the first LKG answer (200 from `/api/v1/lkg`), the RSS once loaded and its peak (VmHWM), and the
//! time to serve a build indexed while running (one more build of 1,000 results, until `/metrics`
//! shows its generation). This commit's binary starts twice a round: with no stored verdicts (the
//! first start after an upgrade, judging every build and storing the verdicts), then again (a
//! restart, reading them).
//!
//! `--binary before=/tmp/harness-old` adds another `harness` (an older commit's, say) to compare;
//! it runs on a copy of the index without the migrations it does not know (`--before-migrations N`:
//! its last one, 9 by default).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TESTS: i64 = 1_000;
const ROUNDS: usize = 2;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        return; // `cargo test --benches` lists benches; there is nothing to list.
    }
    let mut binaries = Vec::new();
    let mut sizes = Vec::new();
    let mut before_migrations = 9;
    let mut rest = args.iter().filter(|a| *a != "--bench");
    while let Some(arg) = rest.next() {
        if arg == "--binary" {
            let value = rest.next().expect("--binary NAME=PATH");
            let (name, path) = value.split_once('=').expect("--binary NAME=PATH");
            binaries.push((name.to_owned(), path.to_owned()));
        } else if arg == "--before-migrations" {
            before_migrations = rest.next().and_then(|n| n.parse().ok()).expect("--before-migrations N");
        } else if let Ok(size) = arg.parse::<i64>() {
            sizes.push(size);
        }
    }
    if sizes.is_empty() {
        sizes = vec![1_000_000, 10_000_000];
    }
    let server = std::env::var("HARNESS_TEST_POSTGRES_URL")
        .expect("HARNESS_TEST_POSTGRES_URL: start one with `eval \"$(scripts/postgres start)\"`");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = testing::central::providers_yaml(dir.path());
    let store = dir.path().join("store");
    std::fs::create_dir_all(&store).unwrap();
    println!(
        "| results | binary | start | round | listening | first LKG answer | RSS loaded | peak RSS | build served after |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let this = env!("CARGO_BIN_EXE_harness");
    for size in sizes {
        let database = rt.block_on(seeded(&server, size));
        let older = rt.block_on(copy_for_older(&server, &database, before_migrations));
        for round in 1..=ROUNDS {
            let mut starts = vec![("this", this, database.as_str(), "first"), ("this", this, &database, "restart")];
            starts
                .extend(binaries.iter().map(|(name, path)| (name.as_str(), path.as_str(), older.as_str(), "restart")));
            for (name, binary, database, start) in starts {
                if start == "first" {
                    rt.block_on(forget_verdicts(database));
                }
                let serve = Serve { binary, database, config: &config, store: &store };
                let figures = serve.measure(&rt);
                println!(
                    "| {size} | {name} | {start} | {round} | {:.2} s | {:.2} s | {} MiB | {} MiB | {:.2} s |",
                    figures.listening.as_secs_f64(),
                    figures.first_answer.as_secs_f64(),
                    figures.rss_kib / 1024,
                    figures.peak_kib / 1024,
                    figures.next_build.as_secs_f64(),
                );
            }
        }
    }
}

/// Drops every stored verdict: the next start judges every build, as the first after an upgrade.
async fn forget_verdicts(url: &str) {
    let mut conn = connect(url).await;
    sqlx::query("DELETE FROM build_verdicts").execute(&mut conn).await.unwrap();
}

/// A copy of the index at `url` as a binary whose last migration is `last` left it: the newer
/// migrations' tables dropped and their records removed (an older binary refuses a database a newer
/// one migrated).
async fn copy_for_older(server: &str, url: &str, last: i64) -> String {
    use sqlx::Executor;
    let source = url.rsplit_once('/').unwrap().1;
    let name = format!("{source}_older");
    let mut admin = connect(server).await;
    admin.execute(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name}"))).await.unwrap();
    admin.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name} TEMPLATE {source}"))).await.unwrap();
    let copy = format!("{}/{name}", server.rsplit_once('/').unwrap().0);
    let mut conn = connect(&copy).await;
    // The tables of migrations after 9, newest first.
    for (version, table) in [(10, "build_verdicts")] {
        if version > last {
            conn.execute(sqlx::AssertSqlSafe(format!("DROP TABLE IF EXISTS {table}"))).await.unwrap();
        }
    }
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version > $1").bind(last).execute(&mut conn).await.unwrap();
    copy
}

struct Figures {
    listening: Duration,
    first_answer: Duration,
    rss_kib: u64,
    peak_kib: u64,
    next_build: Duration,
}

struct Serve<'a> {
    binary: &'a str,
    database: &'a str,
    config: &'a std::path::Path,
    store: &'a std::path::Path,
}

impl Serve<'_> {
    fn measure(&self, rt: &tokio::runtime::Runtime) -> Figures {
        let started = Instant::now();
        let mut child = self.spawn();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let listening = started.elapsed();
        let address = line.trim().strip_prefix("serving on http://").unwrap_or_else(|| panic!("{line:?}")).to_owned();
        while testing::central::status_of(&address, "/api/v1/lkg").ok() != Some(200) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let first_answer = started.elapsed();
        std::thread::sleep(Duration::from_secs(2));
        let (rss_kib, peak_kib) = memory(child.id());
        let generation = rt.block_on(add_build(self.database));
        let added = Instant::now();
        let needle = format!("harness_lkg_index_generation {generation}\n");
        while !get(&address, "/metrics").contains(&needle) {
            assert!(added.elapsed() < Duration::from_secs(600), "the new build was never served");
            std::thread::sleep(Duration::from_millis(10));
        }
        let next_build = added.elapsed();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), nix::sys::signal::Signal::SIGTERM)
            .unwrap();
        child.wait().unwrap();
        Figures { listening, first_answer, rss_kib, peak_kib, next_build }
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

/// VmRSS and VmHWM of a process, KiB.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        let line = status.lines().find(|l| l.starts_with(name)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn get(address: &str, path: &str) -> String {
    let Ok(mut stream) = std::net::TcpStream::connect(address) else { return String::new() };
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
}

async fn connect(url: &str) -> sqlx::AnyConnection {
    sqlx::any::install_default_drivers();
    <sqlx::AnyConnection as sqlx::Connection>::connect(url).await.unwrap_or_else(|e| panic!("{url}: {e}"))
}

/// The database of `results` results, made (by SQL, in a few minutes for 10 M) if not there yet.
async fn seeded(server: &str, results: i64) -> String {
    use sqlx::{Executor, Row};
    let name = format!("harness_bench_restart_{results}");
    let url = format!("{}/{name}", server.rsplit_once('/').unwrap().0);
    let mut admin = connect(server).await;
    let exists = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT 1 FROM pg_database WHERE datname = '{name}'")))
        .fetch_optional(&mut admin)
        .await
        .unwrap()
        .is_some();
    if exists {
        let mut conn = connect(&url).await;
        // Made by this bench, packed results included (an older bench did not pack them).
        let counts = "SELECT (SELECT COUNT(*) FROM test_results), (SELECT COUNT(*) FROM build_cells)";
        let row = sqlx::query(counts).fetch_one(&mut conn).await.unwrap();
        if row.get::<i64, _>(0) >= results && row.get::<i64, _>(1) > 0 {
            return url;
        }
        drop(conn);
        admin.execute(sqlx::AssertSqlSafe(format!("DROP DATABASE {name}"))).await.unwrap();
    }
    admin.execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).await.unwrap();
    results::index::Index::open(&url).await.unwrap().close().await;
    let started = Instant::now();
    let builds = results / TESTS;
    let mut conn = connect(&url).await;
    for statement in [
        "INSERT INTO providers (name) VALUES ('alpha'), ('beta')".to_owned(),
        "INSERT INTO jobs (name, provider_id) SELECT 'ci-' || name, id FROM providers".to_owned(),
        format!(
            "INSERT INTO tests (suite, name) SELECT 'Kubernetes e2e suite', \
             '[sig-bench] a test of the benchmark, number ' || g FROM generate_series(1, {TESTS}) g"
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
        PACK_RESULTS.replace("{builds}", "SELECT id FROM builds"),
        "UPDATE jobs SET generation = generation + 1".to_owned(),
        "ANALYZE".to_owned(),
    ] {
        conn.execute(sqlx::AssertSqlSafe(statement.clone())).await.unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    eprintln!("made {name} ({results} results) in {:.0} s", started.elapsed().as_secs_f64());
    url
}

/// Packs the results of the builds `{builds}` selects into `build_cells`, as `harness` writes
/// them with the results (`<test id><status letter>` in insertion order, and the counts).
const PACK_RESULTS: &str = "INSERT INTO build_cells (build_id, digest, cells, passed_tests, ran_tests) \
     SELECT b.id, b.digest, COALESCE(string_agg(r.test_id::text || CASE r.status WHEN 'pass' THEN 'p' \
     WHEN 'fail' THEN 'f' WHEN 'flaky' THEN 'k' ELSE 's' END, '' ORDER BY r.id), ''), \
     COUNT(*) FILTER (WHERE r.status IN ('pass', 'flaky')), COUNT(*) FILTER (WHERE r.status <> 'skip') \
     FROM builds b LEFT JOIN test_results r ON r.build_id = b.id WHERE b.id IN ({builds}) GROUP BY b.id, b.digest";

/// Indexes one more finished build of `ci-alpha` (its versions those of the newest build, 1,000
/// passing results) the way `harness` does (one transaction, the job's generation bumped), and
/// returns the index generation that follows.
async fn add_build(url: &str) -> i64 {
    use sqlx::{Connection, Row};
    let mut conn = connect(url).await;
    let mut tx = conn.begin().await.unwrap();
    let row = sqlx::query(
        "INSERT INTO builds (job_id, build, path, state, started_at, finished_at, passed, result, \
         kubernetes_version, provider_version, artifacts_url, digest) \
         SELECT b.job_id, 'next-' || (m.n + 1), 'logs/ci-alpha/next-' || (m.n + 1), 'finished', b.started_at + 60, \
         b.started_at + 90, true, 'SUCCESS', b.kubernetes_version, b.provider_version, 'file:///x', 'next-' || (m.n + 1) \
         FROM builds b, (SELECT COUNT(*) AS n FROM builds) m \
         WHERE b.job_id = (SELECT id FROM jobs WHERE name = 'ci-alpha') ORDER BY b.started_at DESC LIMIT 1 RETURNING id",
    )
    .fetch_one(&mut *tx)
    .await
    .unwrap();
    let build: i64 = row.get(0);
    sqlx::query("INSERT INTO test_results (build_id, test_id, status) SELECT $1, id, 'pass' FROM tests")
        .bind(build)
        .execute(&mut *tx)
        .await
        .unwrap();
    let pack = PACK_RESULTS.replace("{builds}", &build.to_string());
    sqlx::query(sqlx::AssertSqlSafe(pack)).execute(&mut *tx).await.unwrap();
    sqlx::query("UPDATE jobs SET generation = generation + 1 WHERE name = 'ci-alpha'").execute(&mut *tx).await.unwrap();
    tx.commit().await.unwrap();
    let row = sqlx::query("SELECT CAST(SUM(generation) AS BIGINT) FROM jobs").fetch_one(&mut conn).await.unwrap();
    row.get(0)
}

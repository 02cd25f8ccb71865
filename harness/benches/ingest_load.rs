//! `cargo bench -p harness --bench ingest_load`: the ingestion API under load. 50 publishers post
//! 40 builds each (4 files, a JUnit file of 6 tests) at once to `harness serve` replicas on one
//! Postgres (`HARNESS_TEST_POSTGRES_URL`, which `scripts/postgres start` prints), through the same
//! client `harness publish --remote` uses; prints builds/s, p50 and p99 of a publish, for two
//! replicas and for one. The load test in `harness/tests/commands/ingest.rs` runs the same load for correctness.
//!
//! `INGEST_PUBLISHERS` and `INGEST_BUILDS` change the plan.

use std::path::Path;

use results::remote::RemoteOptions;
use testing::central::Service;
use testing::load::{self, Plan};

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` lists benches; there is nothing to list.
    }
    let number = |name: &str, default: usize| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let plan = Plan { publishers: number("INGEST_PUBLISHERS", 50), builds_each: number("INGEST_BUILDS", 40), tests: 5 };
    let rt = tokio::runtime::Runtime::new().unwrap();
    println!("| replicas | builds | elapsed | builds/s | p50 | p99 | retries |");
    println!("|---|---|---|---|---|---|---|");
    for replicas in [2, 1] {
        let service =
            Service::new(Path::new(env!("CARGO_BIN_EXE_harness")), rt.block_on(testing::fresh_postgres_database()));
        let tokens = [service.token("alpha"), service.token("beta")];
        let running: Vec<_> = (0..replicas).map(|r| service.replica(&format!("r{r}"), &[])).collect();
        let remotes: Vec<String> = running.iter().map(|r| r.url.clone()).collect();
        let options = RemoteOptions::new(Vec::new(), String::new());
        let report = rt.block_on(load::run(&remotes, &tokens, plan, &options, Default::default()));
        assert!(report.errors.is_empty(), "{:?}", &report.errors[..report.errors.len().min(5)]);
        println!(
            "| {replicas} | {} | {:.1} s | {:.0} | {:.0} ms | {:.0} ms | {} |",
            report.created + report.existed,
            report.elapsed.as_secs_f64(),
            report.throughput(),
            report.quantile(0.5).as_secs_f64() * 1000.0,
            report.quantile(0.99).as_secs_f64() * 1000.0,
            report.retries
        );
    }
}

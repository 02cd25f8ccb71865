//! `cargo bench -p harness --bench index_build`: indexing throughput, in test results per second
//! (criterion's elements throughput), of one build holding the largest real JUnit file in
//! `tests/data/junit/` (upstream `e2e.test`'s ginkgo v2 `junit_01.xml`, thousands of cases): one
//! transaction per build, as `harness publish` does, into SQLite (a file, WAL) and, when
//! `HARNESS_TEST_POSTGRES_URL` names a server (`eval "$(scripts/postgres start)"`), Postgres.
//! Each iteration indexes the build under a new build id, so every one inserts every row. Two
//! cases: `known`, the tests already in the index (every build of a job after its first: the
//! steady state), and `new`, every test new to the index (its suite renamed each time).

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use results::index::Index;
use results::layout::BuildLocation;
use results::record::{self, BuildRecord, ReadBuildOptions};
use results::store::ResultStore;

/// The build record `harness publish` would index for a build holding that file.
async fn real_record(store_dir: &Path) -> BuildRecord {
    let store = ResultStore::open_dir(store_dir).unwrap();
    let dir = "logs/ci-bench/1";
    let put = |name: &str, bytes: Vec<u8>| {
        let store = store.clone();
        let path = format!("{dir}/{name}");
        async move { store.put_if_changed(&path, bytes.into()).await.unwrap() }
    };
    put("started.json", br#"{"timestamp": 1700000000}"#.to_vec()).await;
    put("finished.json", br#"{"timestamp": 1700000600, "passed": true, "metadata": {"provider": "local"}}"#.to_vec())
        .await;
    put("artifacts/junit_01.xml", std::fs::read(common::largest_real_junit_file()).unwrap()).await;
    let location = BuildLocation::periodic("ci-bench", "1").unwrap();
    record::read_build(&store, &location, &ReadBuildOptions::default()).await.unwrap()
}

fn bench_index(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let record = rt.block_on(real_record(&tmp.path().join("store")));
    let mut targets = vec![("sqlite", format!("sqlite://{}", tmp.path().join("index.sqlite").display()))];
    match std::env::var("HARNESS_TEST_POSTGRES_URL") {
        Ok(_) => targets.push(("postgres", rt.block_on(testing::fresh_postgres_database()))),
        Err(_) => eprintln!(
            "index_build: skipping Postgres: HARNESS_TEST_POSTGRES_URL is not set (eval \"$(scripts/postgres start)\")"
        ),
    }
    let name = common::largest_real_junit_file().file_name().unwrap().to_string_lossy().into_owned();
    let mut group = c.benchmark_group("index_build");
    group.sample_size(20);
    group.throughput(Throughput::Elements(record.results.len() as u64));
    for (backend, url) in targets {
        let index = rt.block_on(Index::open(&url)).unwrap();
        let next = AtomicU64::new(2);
        for tests in ["known", "new"] {
            group.bench_function(format!("{backend}/{tests}/{name}"), |b| {
                b.iter(|| {
                    let mut build = record.clone();
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    build.info.build = n.to_string();
                    if tests == "new" {
                        build.results.iter_mut().for_each(|r| r.suite = format!("{} {n}", r.suite));
                    }
                    rt.block_on(index.index_build(&build)).unwrap()
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_index);
criterion_main!(benches);

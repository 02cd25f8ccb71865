//! `cargo bench -p harness --bench junit_parse`: JUnit parse throughput of the streaming reader on
//! the largest real file in `tests/data/junit/` (an upstream ginkgo v1 `junit_01.xml`), in MB/s
//! (criterion's bytes throughput) and test cases per second (its elements throughput), parsing
//! from memory so the disk is not measured.

use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use harness::results::junit::{self, ReadOptions};

fn largest_real_file() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/junit");
    let files = std::fs::read_dir(&dir).expect("tests/data/junit exists").flatten().map(|e| e.path());
    let xml =
        files.filter(|p| p.extension().is_some_and(|e| e == "xml") && !p.to_string_lossy().contains("synthetic-"));
    xml.max_by_key(|p| p.metadata().map(|m| m.len()).unwrap_or(0)).expect("a real JUnit file")
}

fn parse(c: &mut Criterion) {
    let path = largest_real_file();
    let bytes = std::fs::read(&path).expect("readable");
    let opts = ReadOptions::default();
    let report = junit::read_from(&bytes[..], &path, &opts).expect("parses");
    let elements: usize = report.suites.iter().flat_map(|s| &s.cases).map(|c| c.attempts.len()).sum();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();

    let mut group = c.benchmark_group("junit_parse");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.bench_function(format!("MB/{name}"), |b| {
        b.iter(|| junit::read_from(black_box(&bytes[..]), &path, &opts).unwrap())
    });
    group.throughput(Throughput::Elements(elements as u64));
    group.bench_function(format!("testcases/{name}"), |b| {
        b.iter(|| junit::read_from(black_box(&bytes[..]), &path, &opts).unwrap())
    });
    group.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);

//! `cargo bench -p harness --bench junit_parse`: JUnit parse throughput of the streaming reader on
//! the largest real file in `tests/data/junit/` (the ginkgo v2 `junit_01.xml` of Kubernetes
//! v1.37.1's `e2e.test` in a Conformance dry run: 1.08 MB, 3,213 testcases), in MB/s (criterion's
//! bytes throughput) and test cases per second (its elements throughput: attempts, so a case the
//! reader took as a retry of a failed one counts twice), parsing from memory so the disk
//! is not measured.

mod common;

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use junit::{self, ReadOptions};

fn parse(c: &mut Criterion) {
    let path = common::largest_real_junit_file();
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

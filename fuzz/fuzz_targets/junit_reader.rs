//! Arbitrary bytes into the JUnit reader, under small limits: it must return a report or an error,
//! never panic, hang or run away with memory. A report it returns must survive the writer: written
//! back out and read again, it reads without error and keeps its suites.
#![no_main]

use std::path::Path;

use junit::ReadOptions;
use libfuzzer_sys::fuzz_target;

/// Small, so that the fuzzer reaches every limit (file size, text caps, nesting) often.
const LIMITS: ReadOptions = ReadOptions { max_file_bytes: 64 * 1024, max_text_bytes: 256, max_depth: 16 };

fuzz_target!(|data: &[u8]| {
    let Ok(report) = junit::read_bytes(data, Path::new("fuzz.xml"), &LIMITS) else { return };
    // What the rest of the harness computes from a report.
    let _ = report.counts();
    for (_, case) in report.cases() {
        let _ = (case.status(), case.total_time(), case.failure());
    }
    let xml = junit::to_string(&report);
    // The writer nests five elements deep at most and may grow text by escaping it: the default
    // limits, not the fuzzing ones.
    let again = junit::read_bytes(xml.as_bytes(), Path::new("written.xml"), &ReadOptions::default())
        .unwrap_or_else(|e| panic!("the writer's output does not read back: {e}\n{xml}"));
    assert_eq!(again.suites.len(), report.suites.len(), "suites lost or gained in the round trip\n{xml}");
});

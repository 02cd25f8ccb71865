//! Results: where a run's outcome lands so that TestGrid, our dashboard and the LKG engine can read it.
//!
//! Two parts so far:
//! - [`junit`]: the one JUnit model of the project (suites, test cases with their attempts, so a
//!   test that failed then passed on retry is *flaky*), a streaming reader for the files real
//!   runners write (ginkgo v1 and v2 `junit_01.xml`, kubetest2's `junit_runner.xml`, pytest,
//!   cargo-nextest) and a writer.
//! - [`layout`]: the Prow/GCS build layout TestGrid reads, on a local directory:
//!   `logs/<job>/<build>/{started.json, finished.json, build-log.txt, artifacts/junit_*.xml}`
//!   (presubmits under `pr-logs/pull/<org_repo>/<pr>/<job>/<build>/`), with `started.json` and
//!   `finished.json` shaped as TestGrid's `metadata/job.go` and its JUnit artifact name rule.
//!
//! The contracts are in `DESIGN.md`, "Results: the Prow/GCS layout TestGrid reads".

pub mod junit;
pub mod layout;

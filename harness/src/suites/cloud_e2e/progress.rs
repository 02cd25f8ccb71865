//! The suite's JUnit file, written as the suite goes: first with every selected test unfinished,
//! then again each time one ends. A run stopped midway (SIGTERM, `--timeout`) keeps every result
//! so far, and marks the tests it cut short: skipped, with a message saying the run stopped before
//! they finished. Each write goes to a `.partial` file first, renamed into place, so a reader (or a
//! publish of the artifacts) never sees half a file.

use std::io;
use std::path::PathBuf;
use std::time::Instant;

use super::{Verdict, case, report};
use junit::{self, Report, TestCase};

/// The message of a test the run stopped before it finished.
pub const UNFINISHED: &str = "not finished: the run was stopped (SIGTERM, SIGINT or --timeout) while this suite ran";

/// The results of a suite's tests so far, kept in its JUnit file.
pub struct Progress {
    file: PathBuf,
    started: Instant,
    names: Vec<&'static str>,
    cases: Vec<Option<TestCase>>,
}

impl Progress {
    /// Writes `file` with every test of `names` (in that order) unfinished.
    pub fn start(file: PathBuf, names: Vec<&'static str>) -> io::Result<Progress> {
        let cases = vec![None; names.len()];
        let progress = Progress { file, started: Instant::now(), names, cases };
        progress.write()?;
        Ok(progress)
    }

    /// Records the case of test number `slot` and writes the file again.
    pub fn done(&mut self, slot: usize, case: TestCase) -> io::Result<()> {
        self.cases[slot] = Some(case);
        self.write()
    }

    /// The report as of now: the finished cases, and the unfinished ones marked so.
    pub fn report(&self) -> Report {
        let cases = self
            .names
            .iter()
            .zip(&self.cases)
            .map(|(name, case)| case.clone().unwrap_or_else(|| unfinished(name)))
            .collect();
        report(cases, self.started.elapsed())
    }

    fn write(&self) -> io::Result<()> {
        let name = self.file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let partial = self.file.with_file_name(format!(".{name}.partial"));
        junit::write_file(&self.report(), &partial)?;
        std::fs::rename(&partial, &self.file)
    }
}

fn unfinished(name: &str) -> TestCase {
    case(name, Err(Verdict::Skipped(UNFINISHED.into())), std::time::Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::super::SUITE;
    use super::*;
    use junit::{ReadOptions, Status};

    fn statuses(file: &std::path::Path) -> Vec<(String, Status)> {
        let report = junit::read_file(file, &ReadOptions::default()).unwrap();
        report.cases().map(|(_, c)| (c.name.clone(), c.status())).collect()
    }

    #[test]
    fn every_result_so_far_is_in_the_file_and_the_unfinished_tests_are_marked() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("junit_cloud-e2e.xml");
        let mut progress = Progress::start(file.clone(), vec!["a", "b", "c"]).unwrap();
        let skipped = |name: &str| (name.to_owned(), Status::Skipped);
        assert_eq!(statuses(&file), [skipped("a"), skipped("b"), skipped("c")]);
        progress.done(1, case("b", Ok(()), std::time::Duration::from_secs(2))).unwrap();
        progress.done(0, case("a", Err(Verdict::Failed("boom".into())), std::time::Duration::ZERO)).unwrap();
        // The run stops here: what the file says.
        assert_eq!(statuses(&file), [("a".into(), Status::Failed), ("b".into(), Status::Passed), skipped("c")]);
        let report = junit::read_file(&file, &ReadOptions::default()).unwrap();
        let (_, c) = report.cases().nth(2).unwrap();
        assert_eq!(c.attempts[0].detail.as_ref().and_then(|d| d.message.as_deref()), Some(UNFINISHED));
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, [std::ffi::OsString::from("junit_cloud-e2e.xml")], "no partial file is left");
        assert_eq!(progress.report().suites[0].name, SUITE);
    }
}

//! The steps of a run as kubetest2 records them: each one a test case of `junit_runner.xml`, so an
//! infrastructure failure shows on the grid like a test failure; and a line each in
//! `build-log.txt`. A step cut short (the run's `--timeout`, a signal) is recorded failed after the
//! time it ran ([`Steps::interrupt`]).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use junit::{Attempt, Detail, Outcome, Output, Report, Suite, TestCase};

/// The suite (and classname) of `junit_runner.xml`'s cases.
pub use results::layout::{RUNNER_FILE, RUNNER_SUITE};

/// How a step ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepResult {
    Passed,
    Failed(String),
    /// Not run, and why (an earlier step failed, the run was interrupted).
    Skipped(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub name: String,
    pub result: StepResult,
    pub duration: Duration,
    /// What the step measured (an upgrade stage's disruption), as properties of its case.
    pub properties: Vec<junit::Property>,
}

/// Records steps as they end.
#[derive(Debug, Default)]
pub struct Steps {
    steps: Vec<Step>,
    log: String,
    /// The step [`Steps::run`] is running, and since when.
    under_way: Option<(String, Instant)>,
}

impl Steps {
    /// Runs `work` as the step `name`, timing it; its error becomes the step's failure message.
    pub async fn run<T, E: std::fmt::Display>(
        &mut self,
        name: &str,
        work: impl Future<Output = Result<T, E>>,
    ) -> Option<T> {
        // A spinner on a terminal, a plain line in CI; the step's own line follows either way.
        let progress = cli_support::progress::step(format!("step {name}"));
        let started = Instant::now();
        self.under_way = Some((name.to_owned(), started));
        let result = work.await;
        self.under_way = None;
        let duration = started.elapsed();
        match result {
            Ok(value) => {
                progress.done();
                self.record(name, StepResult::Passed, duration);
                Some(value)
            }
            Err(e) => {
                self.record(name, StepResult::Failed(e.to_string()), duration);
                None
            }
        }
    }

    pub fn record(&mut self, name: &str, result: StepResult, duration: Duration) {
        self.record_measured(name, result, duration, Vec::new());
    }

    /// [`Steps::record`] with what the step measured; the properties go to its line too.
    pub fn record_measured(
        &mut self,
        name: &str,
        result: StepResult,
        duration: Duration,
        properties: Vec<junit::Property>,
    ) {
        let line = match &result {
            StepResult::Passed => format!("step {name}: passed in {:.1}s", duration.as_secs_f64()),
            StepResult::Failed(why) => format!("step {name}: FAILED after {:.1}s: {why}", duration.as_secs_f64()),
            StepResult::Skipped(why) => format!("step {name}: skipped: {why}"),
        };
        match &result {
            StepResult::Failed(_) => tracing::error!("{line}"),
            _ => tracing::info!("{line}"),
        }
        let _ = writeln!(self.log, "{line}");
        if !properties.is_empty() {
            let shown: Vec<String> = properties.iter().map(|p| format!("{}={}", p.name, p.value)).collect();
            let _ = writeln!(self.log, "  {}", shown.join(" "));
        }
        self.steps.push(Step { name: name.to_owned(), result, duration, properties });
    }

    /// Records the step that was under way when its work was dropped (the run timed out, or was
    /// signalled) as failed with `why`, after the time it ran; its name, `None` when no step was.
    pub fn interrupt(&mut self, why: &str) -> Option<String> {
        let (name, started) = self.under_way.take()?;
        self.record(&name, StepResult::Failed(why.to_owned()), started.elapsed());
        Some(name)
    }

    /// A line for `build-log.txt` that is not a step.
    pub fn note(&mut self, line: impl std::fmt::Display) {
        tracing::info!("{line}");
        let _ = writeln!(self.log, "{line}");
    }

    pub fn all(&self) -> &[Step] {
        &self.steps
    }

    /// Every step that ran passed.
    pub fn passed(&self) -> bool {
        self.steps.iter().all(|s| !matches!(s.result, StepResult::Failed(_)))
    }

    /// The first failed step, for the one-line reason.
    pub fn first_failure(&self) -> Option<&Step> {
        self.steps.iter().find(|s| matches!(s.result, StepResult::Failed(_)))
    }

    pub fn build_log(&self) -> &str {
        &self.log
    }

    /// `junit_runner.xml`: one case per step.
    pub fn report(&self) -> Report {
        let cases = self.steps.iter().map(|step| {
            let (outcome, detail) = match &step.result {
                StepResult::Passed => (Outcome::Passed, None),
                StepResult::Failed(why) => (Outcome::Failed, Some(why)),
                StepResult::Skipped(why) => (Outcome::Skipped, Some(why)),
            };
            let detail =
                detail.map(|why| Detail { message: Some(why.clone()), kind: None, text: Output::new(why.clone()) });
            TestCase {
                name: step.name.clone(),
                classname: Some(RUNNER_SUITE.into()),
                properties: step.properties.clone(),
                attempts: vec![Attempt {
                    outcome,
                    time: Some(step.duration.as_secs_f64()),
                    detail,
                    ..Attempt::default()
                }],
            }
        });
        let total: f64 = self.steps.iter().map(|s| s.duration.as_secs_f64()).sum();
        Report {
            name: None,
            suites: vec![Suite {
                name: RUNNER_SUITE.into(),
                time: Some(total),
                cases: cases.collect(),
                ..Suite::default()
            }],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use junit::{self, ReadOptions, Status};

    #[tokio::test]
    async fn steps_become_runner_cases_that_read_back() {
        let mut steps = Steps::default();
        assert_eq!(steps.run("Build", async { Ok::<_, String>(7) }).await, Some(7));
        assert_eq!(steps.run("Up", async { Err::<(), _>("kube-apiserver exited") }).await, None);
        steps.record("Test", StepResult::Skipped("Up failed".into()), Duration::ZERO);
        assert!(!steps.passed());
        assert_eq!(steps.first_failure().unwrap().name, "Up");
        assert!(steps.build_log().contains("step Up: FAILED after"), "{}", steps.build_log());

        let xml = junit::to_string(&steps.report());
        let back =
            junit::read_from(xml.as_bytes(), std::path::Path::new(RUNNER_FILE), &ReadOptions::default()).unwrap();
        let statuses: Vec<(String, Status)> = back.cases().map(|(_, c)| (c.name.clone(), c.status())).collect();
        assert_eq!(
            statuses,
            [("Build".into(), Status::Passed), ("Up".into(), Status::Failed), ("Test".into(), Status::Skipped)]
        );
        let (_, up) = back.cases().nth(1).unwrap();
        assert_eq!(up.failure().unwrap().message.as_deref(), Some("kube-apiserver exited"));
    }

    #[tokio::test]
    async fn a_step_cut_short_is_recorded_failed_after_the_time_it_ran() {
        let mut steps = Steps::default();
        assert_eq!(steps.interrupt("interrupted by SIGTERM"), None, "no step under way");
        let cut = tokio::time::timeout(
            Duration::from_millis(300),
            steps.run("Test", std::future::pending::<Result<(), String>>()),
        );
        assert!(cut.await.is_err());
        assert_eq!(steps.interrupt("interrupted by SIGTERM during suite cloud-e2e").as_deref(), Some("Test"));
        assert_eq!(steps.interrupt("again"), None, "recorded once");
        let test = &steps.all()[0];
        assert_eq!(test.result, StepResult::Failed("interrupted by SIGTERM during suite cloud-e2e".into()));
        assert!(test.duration >= Duration::from_millis(300), "{:?}", test.duration);
        let (_, case) = steps.report().cases().next().map(|(s, c)| (s.clone(), c.clone())).unwrap();
        assert!(case.total_time().unwrap() >= 0.3, "the runner's JUnit shows the time it ran");
        assert!(steps.build_log().contains("step Test: FAILED after 0."), "{}", steps.build_log());
    }
}

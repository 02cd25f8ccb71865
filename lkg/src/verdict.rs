//! Verdicts at three levels: a test within a run, a run against its provider's policy, and a
//! (Kubernetes commit, provider commit) pair across all its runs.

use std::collections::BTreeMap;
use std::num::NonZeroU32;

use serde::{Deserialize, Serialize};

use crate::{Attempt, FlakePolicy, ProviderPolicy, TestResult};

/// The verdict on a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// It had as many good runs in a row as its policy asks for (one by default).
    Good,
    /// Its latest runs were good, but not yet as many in a row as its policy asks for.
    Pending,
    /// Never good, and its latest run was bad.
    Bad,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TestOutcome {
    Passed,
    Flaky,
    Failed,
    Skipped,
}

/// The last attempt that ran decides; a pass after an earlier failure is flaky.
pub(crate) fn test_outcome(attempts: &[Attempt]) -> TestOutcome {
    let mut ran = attempts.iter().filter(|attempt| **attempt != Attempt::Skip);
    match ran.next_back() {
        None => TestOutcome::Skipped,
        Some(Attempt::Fail) => TestOutcome::Failed,
        Some(_) if ran.any(|attempt| *attempt == Attempt::Fail) => TestOutcome::Flaky,
        Some(_) => TestOutcome::Passed,
    }
}

/// The verdict on one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunVerdict {
    pub good: bool,
    pub flaky_tests: Vec<String>,
}

pub(crate) fn judge_run(tests: &[TestResult], policy: &ProviderPolicy) -> RunVerdict {
    let outcomes = outcomes_by_test(tests);
    let good = if policy.required_tests.is_empty() {
        every_run_test_passed(&outcomes, &policy.flake)
    } else {
        policy
            .required_tests
            .iter()
            .all(|name| outcomes.get(name.as_str()).is_some_and(|outcome| counts_as_passed(*outcome, &policy.flake)))
    };
    let flaky_tests = outcomes
        .iter()
        .filter(|(_, outcome)| **outcome == TestOutcome::Flaky)
        .map(|(name, _)| name.to_string())
        .collect();
    RunVerdict { good, flaky_tests }
}

/// Results sharing a name (e.g. from two junit files) are one test whose attempts follow each other.
fn outcomes_by_test(tests: &[TestResult]) -> BTreeMap<&str, TestOutcome> {
    let mut attempts: BTreeMap<&str, Vec<Attempt>> = BTreeMap::new();
    for test in tests {
        attempts.entry(&test.name).or_default().extend(&test.attempts);
    }
    attempts.into_iter().map(|(name, attempts)| (name, test_outcome(&attempts))).collect()
}

/// A run in which nothing ran proves nothing, so it is not good.
fn every_run_test_passed(outcomes: &BTreeMap<&str, TestOutcome>, flake: &FlakePolicy) -> bool {
    let mut ran = outcomes.values().filter(|outcome| **outcome != TestOutcome::Skipped).peekable();
    ran.peek().is_some() && ran.all(|outcome| counts_as_passed(*outcome, flake))
}

fn counts_as_passed(outcome: TestOutcome, flake: &FlakePolicy) -> bool {
    match outcome {
        TestOutcome::Passed => true,
        TestOutcome::Flaky => flake.flaky_counts_as_passed,
        TestOutcome::Failed | TestOutcome::Skipped => false,
    }
}

/// One run as a pair remembers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunRecord {
    pub build_id: String,
    pub good: bool,
    pub flaky_tests: Vec<String>,
}

/// The runs of one pair in the order they were added, with the streaks of good runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PairRecord {
    runs: Vec<RunRecord>,
    current_streak: u32,
    best_streak: u32,
}

impl PairRecord {
    pub fn push(&mut self, build_id: String, verdict: RunVerdict) {
        self.current_streak = if verdict.good { self.current_streak + 1 } else { 0 };
        self.best_streak = self.best_streak.max(self.current_streak);
        self.runs.push(RunRecord { build_id, good: verdict.good, flaky_tests: verdict.flaky_tests });
    }

    /// Once good, a pair stays good: a known-good pair is not unproven by a later failure.
    pub fn verdict(&self, consecutive_good_runs: NonZeroU32) -> Verdict {
        if self.best_streak >= consecutive_good_runs.get() {
            Verdict::Good
        } else if self.current_streak > 0 {
            Verdict::Pending
        } else {
            Verdict::Bad
        }
    }

    pub fn runs(&self) -> &[RunRecord] {
        &self.runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Attempt::{Fail, Pass, Skip};

    fn result(name: &str, attempts: &[Attempt]) -> TestResult {
        TestResult { name: name.into(), attempts: attempts.to_vec() }
    }

    fn good(good: bool) -> RunVerdict {
        RunVerdict { good, flaky_tests: vec![] }
    }

    #[test]
    fn the_last_attempt_that_ran_decides_and_a_pass_after_a_failure_is_flaky() {
        let cases: [(&[Attempt], TestOutcome); 8] = [
            (&[], TestOutcome::Skipped),
            (&[Skip], TestOutcome::Skipped),
            (&[Pass], TestOutcome::Passed),
            (&[Fail], TestOutcome::Failed),
            (&[Fail, Pass], TestOutcome::Flaky),
            (&[Fail, Skip, Pass], TestOutcome::Flaky),
            (&[Pass, Fail], TestOutcome::Failed),
            (&[Pass, Skip], TestOutcome::Passed),
        ];
        for (attempts, expected) in cases {
            assert_eq!(test_outcome(attempts), expected, "attempts {attempts:?}");
        }
    }

    #[test]
    fn results_sharing_a_name_are_one_test() {
        let tests = [result("t", &[Fail]), result("t", &[Pass])];
        let verdict = judge_run(&tests, &ProviderPolicy::default());
        assert_eq!(verdict, RunVerdict { good: true, flaky_tests: vec!["t".into()] });
    }

    #[test]
    fn a_run_where_nothing_ran_is_not_good() {
        let verdict = judge_run(&[result("t", &[Skip])], &ProviderPolicy::default());
        assert!(!verdict.good);
        assert!(!judge_run(&[], &ProviderPolicy::default()).good);
    }

    #[test]
    fn a_pair_needs_the_configured_streak_and_then_stays_good() {
        let two = NonZeroU32::new(2).unwrap();
        let mut pair = PairRecord::default();
        pair.push("1".into(), good(true));
        assert_eq!(pair.verdict(two), Verdict::Pending);
        pair.push("2".into(), good(false));
        assert_eq!(pair.verdict(two), Verdict::Bad);
        pair.push("3".into(), good(true));
        pair.push("4".into(), good(true));
        assert_eq!(pair.verdict(two), Verdict::Good);
        pair.push("5".into(), good(false));
        assert_eq!(pair.verdict(two), Verdict::Good);
        assert_eq!(pair.runs().len(), 5);
    }
}

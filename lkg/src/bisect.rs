//! Bisection of a culprit range: which commits to test next, and when the first bad one is known.
//! Pure: the caller runs the points and records what each run said.
//!
//! The range is `last_good` (excluded, known good) and `points`, oldest first, whose last is the
//! first bad commit known so far (known bad). Each point gets runs; a run passes, fails, or could
//! not test the point at all (its build or its cluster failed: *untestable*, as `git bisect skip`).
//! A point is *good* once a run of it passed, *bad* once `runs_per_point` runs of it failed (a
//! failing point is run again up to that many times: the provider's flake policy), and
//! *untestable* once a run could not test it and none passed or failed.
//!
//! The search keeps the newest good point `lo` below the oldest bad point `hi`; the first bad
//! commit is in `(lo, hi]`. Each round tests `n` untested points of `(lo, hi)` that split it into
//! `n + 1` parts as even as the untestable points allow (an (n+1)-ary search: a range of 64
//! commits takes 6 rounds with `n = 1` and 3 with `n = 3`). It is done when no point of `(lo, hi)`
//! is left to test: the answer is `hi`, or, when untestable points lie between `lo` and `hi`, the
//! range of those and `hi`.

use serde::{Deserialize, Serialize};

/// What one run of a point said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", content = "reason", rename_all = "lowercase")]
pub enum Outcome {
    Pass,
    Fail,
    /// The point could not be tested (its build or its cluster failed), for this reason.
    Untestable(String),
}

/// What is known of a point from its runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "lowercase")]
pub enum PointVerdict {
    /// No run yet.
    Untested,
    /// A run passed.
    Good,
    /// `runs_per_point` runs failed, none passed.
    Bad,
    /// Failed fewer times than `runs_per_point`, none passed: to be run again.
    Retrying { failures: u32 },
    /// A run could not test it, and none passed or failed.
    Untestable { reason: String },
}

/// Why a range cannot be bisected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BisectError {
    #[error("the range after {last_good} is empty: there is no commit to bisect")]
    Empty { last_good: String },
    #[error(
        "the range is already one commit: {first_bad} is the first bad commit after {last_good}; nothing to bisect"
    )]
    Adjacent { last_good: String, first_bad: String },
    #[error("--runs-per-point must be at least 1")]
    NoRuns,
}

/// The first bad commit, as far as the runs can tell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    /// The newest good commit before it.
    pub last_good: String,
    /// The oldest commit known bad.
    pub first_bad: String,
    /// Untestable commits between `last_good` and `first_bad` (oldest first) with why: when there
    /// are any, the first bad commit is one of them or `first_bad`, not known which.
    pub untestable: Vec<UntestablePoint>,
}

impl Answer {
    /// One commit, not a range.
    pub fn is_exact(&self) -> bool {
        self.untestable.is_empty()
    }

    /// The commits the first bad one is among, oldest first.
    pub fn candidates(&self) -> Vec<&str> {
        self.untestable.iter().map(|u| u.commit.as_str()).chain([self.first_bad.as_str()]).collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UntestablePoint {
    pub commit: String,
    pub reason: String,
}

/// A bisection in progress: the points and what their runs said.
#[derive(Debug, Clone)]
pub struct Bisection {
    last_good: String,
    /// Oldest first; the last is the first bad commit known when the bisection started.
    points: Vec<String>,
    runs: Vec<Vec<Outcome>>,
    runs_per_point: u32,
}

impl Bisection {
    /// `points` oldest first, the last the first bad commit known so far.
    pub fn new(last_good: impl Into<String>, points: Vec<String>, runs_per_point: u32) -> Result<Self, BisectError> {
        let last_good = last_good.into();
        if runs_per_point == 0 {
            return Err(BisectError::NoRuns);
        }
        match points.len() {
            0 => Err(BisectError::Empty { last_good }),
            1 => Err(BisectError::Adjacent { last_good, first_bad: points[0].clone() }),
            len => Ok(Self { last_good, points, runs: vec![Vec::new(); len], runs_per_point }),
        }
    }

    pub fn points(&self) -> &[String] {
        &self.points
    }

    pub fn last_good(&self) -> &str {
        &self.last_good
    }

    /// The index of `commit` among the points.
    pub fn position(&self, commit: &str) -> Option<usize> {
        self.points.iter().position(|p| p == commit)
    }

    /// Records a run of point `index`.
    pub fn record(&mut self, index: usize, outcome: Outcome) {
        self.runs[index].push(outcome);
    }

    pub fn runs(&self, index: usize) -> &[Outcome] {
        &self.runs[index]
    }

    pub fn verdict(&self, index: usize) -> PointVerdict {
        let runs = &self.runs[index];
        if runs.contains(&Outcome::Pass) {
            return PointVerdict::Good;
        }
        let failures = runs.iter().filter(|r| **r == Outcome::Fail).count() as u32;
        if failures >= self.runs_per_point {
            return PointVerdict::Bad;
        }
        if failures > 0 {
            return PointVerdict::Retrying { failures };
        }
        match runs.iter().find_map(|r| if let Outcome::Untestable(why) = r { Some(why) } else { None }) {
            Some(reason) => PointVerdict::Untestable { reason: reason.clone() },
            None => PointVerdict::Untested,
        }
    }

    /// `(lo, hi)` as positions: 0 is `last_good`, `i + 1` is point `i`. `hi` is the oldest bad
    /// point (the last point when none was found bad), `lo` the newest good position below it.
    fn bounds(&self) -> (usize, usize) {
        let len = self.points.len();
        let hi = (0..len).find(|&i| self.verdict(i) == PointVerdict::Bad).map_or(len, |i| i + 1);
        let lo = (0..hi - 1).rev().find(|&i| self.verdict(i) == PointVerdict::Good).map_or(0, |i| i + 1);
        (lo, hi)
    }

    /// Points known good above the oldest bad one: the runs disagree with a single regression (a
    /// flake the retries did not catch, or a fix and a second breakage).
    pub fn inconsistent(&self) -> Vec<&str> {
        let (_, hi) = self.bounds();
        (hi..self.points.len())
            .filter(|&i| self.verdict(i) == PointVerdict::Good)
            .map(|i| self.points[i].as_str())
            .collect()
    }

    /// The points to run next, at most `n` (indices into [`Bisection::points`]): points failing
    /// fewer times than `runs_per_point` first, then untested points splitting the open range
    /// evenly. Empty when the bisection is done.
    pub fn next(&self, n: usize) -> Vec<usize> {
        let n = n.max(1);
        let (lo, hi) = self.bounds();
        let inside = lo..hi - 1; // point indices strictly between the positions lo and hi
        let mut chosen: Vec<usize> =
            inside.clone().filter(|&i| matches!(self.verdict(i), PointVerdict::Retrying { .. })).take(n).collect();
        let mut untested: Vec<usize> = inside.filter(|&i| self.verdict(i) == PointVerdict::Untested).collect();
        let slots = n - chosen.len();
        let span = (hi - lo) as f64;
        for k in 1..=slots {
            if untested.is_empty() {
                break;
            }
            // The ideal position, and the untested point nearest to it (the older one on a tie).
            let ideal = lo as f64 + span * k as f64 / (slots + 1) as f64;
            let nearest = (0..untested.len())
                .min_by(|&a, &b| {
                    let distance = |i: usize| ((untested[i] + 1) as f64 - ideal).abs();
                    distance(a).total_cmp(&distance(b)).then(a.cmp(&b))
                })
                .expect("not empty");
            chosen.push(untested.remove(nearest));
        }
        chosen.sort_unstable();
        chosen
    }

    /// The answer once [`Bisection::next`] has nothing left to run.
    pub fn answer(&self) -> Option<Answer> {
        if !self.next(1).is_empty() {
            return None;
        }
        Some(self.current())
    }

    /// What the runs so far narrow the range to (the answer once done).
    pub fn current(&self) -> Answer {
        let (lo, hi) = self.bounds();
        let untestable = (lo..hi - 1)
            .filter_map(|i| match self.verdict(i) {
                PointVerdict::Untestable { reason } => Some(UntestablePoint { commit: self.points[i].clone(), reason }),
                _ => None,
            })
            .collect();
        Answer {
            last_good: if lo == 0 { self.last_good.clone() } else { self.points[lo - 1].clone() },
            first_bad: self.points[hi - 1].clone(),
            untestable,
        }
    }
}

/// Rounds a bisection of `commits` commits (the first bad one among them) takes with `n` points a
/// round and no untestable point or flake: `⌈log_{n+1} commits⌉`.
pub fn expected_rounds(commits: usize, n: usize) -> u32 {
    let (mut rounds, mut covered) = (0, 1usize);
    while covered < commits {
        covered = covered.saturating_mul(n.max(1) + 1);
        rounds += 1;
    }
    rounds
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commits(count: usize) -> Vec<String> {
        (1..=count).map(|i| format!("c{i}")).collect()
    }

    /// Runs a bisection of `count` commits whose first bad one is `c{culprit}`, `n` points a round,
    /// with `untestable` commits and `flaky` commits failing their first run; the answer and rounds.
    fn simulate(count: usize, culprit: usize, n: usize, untestable: &[usize], flaky: &[usize]) -> (Answer, u32) {
        let runs_per_point = if flaky.is_empty() { 1 } else { 2 };
        let mut bisection = Bisection::new("c0", commits(count), runs_per_point).unwrap();
        let mut rounds = 0;
        loop {
            let next = bisection.next(n);
            if next.is_empty() {
                break;
            }
            assert!(next.len() <= n, "at most n points a round");
            rounds += 1;
            for i in next {
                let number = i + 1;
                let outcome = if untestable.contains(&number) {
                    Outcome::Untestable(format!("build of c{number} failed"))
                } else if number >= culprit || (flaky.contains(&number) && bisection.runs(i).is_empty()) {
                    Outcome::Fail
                } else {
                    Outcome::Pass
                };
                bisection.record(i, outcome);
            }
            assert!(rounds < 100, "the bisection ends");
        }
        (bisection.answer().expect("done"), rounds)
    }

    #[test]
    fn sequential_bisection_finds_every_culprit_in_log2_rounds() {
        for count in [2, 3, 5, 32, 33, 64] {
            for culprit in 1..=count {
                let (answer, rounds) = simulate(count, culprit, 1, &[], &[]);
                assert_eq!(answer.first_bad, format!("c{culprit}"), "{count} commits, culprit {culprit}");
                assert!(answer.is_exact());
                // The last commit is known bad: count - 1 unknown points, `count` possible answers.
                assert!(rounds <= expected_rounds(count, 1), "{count} commits, culprit {culprit}: {rounds} rounds");
            }
        }
        assert_eq!(simulate(32, 20, 1, &[], &[]).1, 5);
        assert_eq!(expected_rounds(32, 1), 5);
    }

    #[test]
    fn parallel_bisection_takes_log_n_plus_1_rounds() {
        for culprit in 1..=64 {
            let (answer, rounds) = simulate(64, culprit, 3, &[], &[]);
            assert_eq!(answer.first_bad, format!("c{culprit}"));
            assert!(rounds <= 3, "64 commits with 3 at a time: {rounds} rounds for culprit {culprit}");
        }
        for culprit in 1..=32 {
            assert!(simulate(32, culprit, 3, &[], &[]).1 <= 3);
        }
        assert_eq!(expected_rounds(64, 3), 3);
        assert_eq!(expected_rounds(64, 1), 6);
    }

    #[test]
    fn a_flaky_failure_is_run_again_and_does_not_mislead() {
        for culprit in [2, 7, 17, 31] {
            let flaky: Vec<usize> = (1..=32).collect();
            let (answer, _) = simulate(32, culprit, 1, &[], &flaky);
            assert_eq!(answer.first_bad, format!("c{culprit}"));
        }
        let mut bisection = Bisection::new("c0", commits(8), 3).unwrap();
        let first = bisection.next(1);
        bisection.record(first[0], Outcome::Fail);
        assert_eq!(bisection.verdict(first[0]), PointVerdict::Retrying { failures: 1 });
        assert!(bisection.next(2).contains(&first[0]), "the failing point is run again");
        assert_eq!(bisection.next(1), first, "before any other");
    }

    #[test]
    fn untestable_points_are_skipped_around_and_leave_a_range() {
        // The commit just before the culprit cannot be built: the answer is the two of them.
        let (answer, _) = simulate(32, 20, 1, &[19], &[]);
        assert_eq!(answer.first_bad, "c20");
        assert_eq!(answer.candidates(), ["c19", "c20"]);
        assert_eq!(answer.untestable[0].reason, "build of c19 failed");
        assert_eq!(answer.last_good, "c18");
        // Untestable points away from the culprit cost nothing in the answer.
        let (answer, _) = simulate(32, 20, 1, &[16, 8, 24], &[]);
        assert!(answer.is_exact(), "{answer:?}");
        assert_eq!(answer.first_bad, "c20");
    }

    #[test]
    fn recorded_runs_resume_where_they_left_off() {
        let mut fresh = Bisection::new("c0", commits(32), 1).unwrap();
        let first = fresh.next(1)[0];
        fresh.record(first, Outcome::Pass);
        let second = fresh.next(1)[0];
        fresh.record(second, Outcome::Fail);
        // Another bisection given the same runs (read back from the index) asks for the same next point.
        let mut resumed = Bisection::new("c0", commits(32), 1).unwrap();
        resumed.record(second, Outcome::Fail);
        resumed.record(first, Outcome::Pass);
        assert_eq!(resumed.next(1), fresh.next(1));
        assert!(resumed.next(1) != vec![first] && resumed.next(1) != vec![second]);
    }

    #[test]
    fn ranges_with_nothing_to_bisect_are_refused() {
        assert!(matches!(Bisection::new("a", vec![], 1), Err(BisectError::Empty { .. })));
        let adjacent = Bisection::new("a", vec!["b".into()], 1).unwrap_err();
        assert!(adjacent.to_string().contains("b is the first bad commit after a"), "{adjacent}");
        assert_eq!(Bisection::new("a", commits(3), 0).unwrap_err(), BisectError::NoRuns);
    }

    #[test]
    fn a_good_point_above_a_bad_one_is_reported() {
        let mut bisection = Bisection::new("c0", commits(8), 1).unwrap();
        bisection.record(3, Outcome::Fail);
        bisection.record(5, Outcome::Pass);
        assert_eq!(bisection.inconsistent(), ["c6"]);
    }
}

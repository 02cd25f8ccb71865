//! Verdicts at three levels: a test within a run, a run against its provider's policy, and a
//! (Kubernetes commit, provider commit) pair across all its runs.

use std::num::NonZeroU32;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{CompactResult, ProviderPolicy, TestCatalog, TestId, TestStatus};

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

/// The verdict on one run's tests against its provider's policy: what a store keeps per build so
/// a later load need not judge the run again ([`Engine::add_judged_run`](crate::Engine::add_judged_run)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunVerdict {
    /// Its tests make it good. A build that failed is still never good evidence: the engine
    /// applies the build's own verdict when the run is added.
    pub good: bool,
    /// Each flaky test once, in the order the run lists them.
    pub flaky_tests: Vec<TestId>,
}

/// A provider's policy, ready to judge runs of test ids from a catalog: the judging the engine does
/// when a run is added, done apart so its verdict can be stored.
#[derive(Debug, Clone)]
pub struct RunJudge {
    judge: Judge,
    scratch: Scratch,
}

impl RunJudge {
    /// The required tests of `policy` are added to `catalog` (as the engine adds them to its own):
    /// ids of tests no run has yet are then the catalog's, not a run's.
    pub fn new(policy: &ProviderPolicy, catalog: &mut TestCatalog) -> Self {
        Self { judge: Judge::new(policy, |name| catalog.intern(name)), scratch: Scratch::default() }
    }

    /// The verdict on a run's `results`, exactly as [`Engine::add_compact_run`](crate::Engine::add_compact_run)
    /// reaches it; `catalog` is the one the ids come from.
    pub fn judge(&mut self, results: &[CompactResult], catalog: &TestCatalog) -> Result<RunVerdict, crate::LkgError> {
        self.judge
            .judge(results, catalog.len(), &mut self.scratch)
            .map_err(|id| crate::LkgError::UnknownTestId { id: id.0, catalog_len: catalog.len() })
    }
}

/// A provider's policy compiled against the test catalog.
#[derive(Debug, Clone)]
pub(crate) struct Judge {
    /// Required test ids, sorted and without repeats.
    required: Vec<TestId>,
    /// The same as a table indexed by id: 1 when required (a byte each, for a load with no shift).
    required_table: Vec<u8>,
    flaky_counts_as_passed: bool,
}

/// Per-test state reused across runs: `slots[id]` holds `generation << 2 | status` for the tests of
/// the run being judged, so nothing needs clearing between runs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scratch {
    slots: Vec<u32>,
    generation: u32,
}

const GENERATION_SHIFT: u32 = 2;
const LAST_GENERATION: u32 = u32::MAX >> GENERATION_SHIFT;

impl Scratch {
    fn start(&mut self, tests: usize) -> u32 {
        if self.slots.len() < tests {
            self.slots.resize(tests, 0);
        }
        if self.generation == LAST_GENERATION {
            self.slots.iter_mut().for_each(|slot| *slot = 0);
            self.generation = 0;
        }
        self.generation += 1;
        self.generation
    }
}

impl Judge {
    /// `intern` gives a required test's id, adding it to the catalog if it is new.
    pub fn new(policy: &ProviderPolicy, mut intern: impl FnMut(&str) -> TestId) -> Self {
        let mut required: Vec<TestId> = policy.required_tests.iter().map(|name| intern(name)).collect();
        required.sort_unstable();
        required.dedup();
        let mut required_table = vec![0u8; required.last().map_or(0, |id| id.index() + 1)];
        for id in &required {
            required_table[id.index()] = 1;
        }
        Self { required, required_table, flaky_counts_as_passed: policy.flake.flaky_counts_as_passed }
    }

    fn is_required(&self, id: TestId) -> bool {
        self.required_table.get(id.index()) == Some(&1)
    }

    fn counts_as_passed(&self, status: TestStatus) -> bool {
        match status {
            TestStatus::Pass => true,
            TestStatus::Flaky => self.flaky_counts_as_passed,
            TestStatus::Fail | TestStatus::Skip => false,
        }
    }

    /// Judges a run; `tests` is the catalog's length, and an id at or above it is returned as the
    /// error.
    ///
    /// With required tests, the run is good when each of them counts as passed; with none, when
    /// every test that ran counts as passed and at least one ran (a run where nothing ran proves
    /// nothing).
    pub fn judge(&self, results: &[CompactResult], tests: usize, scratch: &mut Scratch) -> Result<RunVerdict, TestId> {
        match self.judge_sorted(results, tests)? {
            Some(verdict) => Ok(verdict),
            None => self.judge_any_order(results, tests, scratch),
        }
    }

    /// One pass with no per-test state, exact when the ids strictly increase (each test listed
    /// once, in id order, as a loader ordering by test id gives them); `None` otherwise.
    fn judge_sorted(&self, results: &[CompactResult], tests: usize) -> Result<Option<RunVerdict>, TestId> {
        if results.len() > usize::from(u16::MAX) {
            return Ok(None);
        }
        // Four counters in the 16-bit lanes of one word, bumped by a table lookup per result:
        // indexed by `required << 2 | status` (status 0 skip, 1 pass, 2 fail, 3 flaky).
        const SKIPPED: u64 = 1;
        const PASSED: u64 = 1 << 16;
        const FLAKY: u64 = 1 << 32;
        const REQUIRED_PASSED: u64 = 1 << 48;
        let flaky_passes = if self.flaky_counts_as_passed { PASSED } else { 0 };
        let counts: [u64; 8] = [
            SKIPPED,
            PASSED,
            0,
            FLAKY | flaky_passes,
            SKIPPED,
            PASSED | REQUIRED_PASSED,
            0,
            FLAKY | flaky_passes | if self.flaky_counts_as_passed { REQUIRED_PASSED } else { 0 },
        ];
        let table = &self.required_table[..];
        let (mut sorted, mut next, mut lanes) = (true, 0u32, 0u64);
        for result in results {
            let (id, status) = (result.bits() >> 2, result.bits() & 3);
            sorted &= id >= next;
            next = id.wrapping_add(1);
            let required = u32::from(table.get(id as usize).copied().unwrap_or(0) & 1);
            lanes += counts[(required << 2 | status) as usize];
        }
        let lane = |shift: u32| (lanes >> shift & 0xffff) as usize;
        let (skipped, passed, flaky, required_passed) = (lane(0), lane(16), lane(32), lane(48));
        let (ran, ran_passed, any_flaky) = (results.len() - skipped, passed, flaky > 0);
        if !sorted {
            return Ok(None);
        }
        if let Some(last) = results.last().filter(|last| last.test().index() >= tests) {
            return Err(last.test());
        }
        let good = if self.required.is_empty() {
            ran > 0 && ran == ran_passed
        } else {
            required_passed == self.required.len()
        };
        let flaky_tests = if any_flaky {
            results.iter().filter(|result| result.status() == TestStatus::Flaky).map(|result| result.test()).collect()
        } else {
            Vec::new()
        };
        Ok(Some(RunVerdict { good, flaky_tests }))
    }

    fn judge_any_order(
        &self,
        results: &[CompactResult],
        tests: usize,
        scratch: &mut Scratch,
    ) -> Result<RunVerdict, TestId> {
        let generation = scratch.start(tests);
        let mark = generation << GENERATION_SHIFT;
        let slots = &mut scratch.slots[..tests];
        // One pass that is exact when no test is listed twice (the usual case).
        let (mut repeats, mut any_flaky) = (false, false);
        let (mut required_passed, mut ran, mut ran_passed) = (0usize, 0usize, 0usize);
        for result in results {
            let (id, status) = (result.test(), result.status());
            let Some(slot) = slots.get_mut(id.index()) else { return Err(id) };
            if *slot >> GENERATION_SHIFT == generation {
                repeats = true;
                *slot = mark | TestStatus::from_bits(*slot).then(status) as u32;
                continue;
            }
            *slot = mark | status as u32;
            any_flaky |= status == TestStatus::Flaky;
            let passed = self.counts_as_passed(status);
            ran += usize::from(status != TestStatus::Skip);
            ran_passed += usize::from(passed);
            required_passed += usize::from(passed && self.is_required(id));
        }
        let final_status = |slots: &[u32], id: TestId| {
            let slot = slots[id.index()];
            (slot >> GENERATION_SHIFT == generation).then(|| TestStatus::from_bits(slot))
        };
        let good = if !repeats {
            if self.required.is_empty() { ran > 0 && ran == ran_passed } else { required_passed == self.required.len() }
        } else if self.required.is_empty() {
            let statuses = || results.iter().filter_map(|result| final_status(slots, result.test()));
            statuses().any(|status| status != TestStatus::Skip)
                && statuses().all(|status| status == TestStatus::Skip || self.counts_as_passed(status))
        } else {
            self.required.iter().all(|id| {
                id.index() < slots.len() && final_status(slots, *id).is_some_and(|status| self.counts_as_passed(status))
            })
        };
        let mut flaky_tests = Vec::new();
        if any_flaky || repeats {
            for id in results.iter().map(|result| result.test()) {
                if final_status(slots, id) == Some(TestStatus::Flaky) {
                    flaky_tests.push(id);
                    // Reported once: the slot now reads as another generation.
                    slots[id.index()] = 0;
                }
            }
        }
        Ok(RunVerdict { good, flaky_tests })
    }
}

/// One run as a pair remembers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunRecord {
    pub build_id: Arc<str>,
    pub good: bool,
    pub flaky_tests: Vec<TestId>,
}

/// The runs of one pair in the order they were added, with the streaks of good runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PairRecord {
    /// Most pairs have one run: it is kept inline, the others in `more`.
    first: Option<RunRecord>,
    more: Vec<RunRecord>,
    current_streak: u32,
    best_streak: u32,
}

impl PairRecord {
    pub fn push(&mut self, build_id: Arc<str>, verdict: RunVerdict) {
        self.current_streak = if verdict.good { self.current_streak + 1 } else { 0 };
        self.best_streak = self.best_streak.max(self.current_streak);
        let run = RunRecord { build_id, good: verdict.good, flaky_tests: verdict.flaky_tests };
        if self.first.is_none() {
            self.first = Some(run);
        } else {
            self.more.push(run);
        }
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

    /// In the order they were added.
    pub fn runs(&self) -> impl Iterator<Item = &RunRecord> {
        self.first.iter().chain(&self.more)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Attempt, FlakePolicy};
    use Attempt::{Fail, Pass, Skip};

    fn good(good: bool) -> RunVerdict {
        RunVerdict { good, flaky_tests: vec![] }
    }

    #[test]
    fn the_last_attempt_that_ran_decides_and_a_pass_after_a_failure_is_flaky() {
        let cases: [(&[Attempt], TestStatus); 9] = [
            (&[], TestStatus::Skip),
            (&[Skip], TestStatus::Skip),
            (&[Pass], TestStatus::Pass),
            (&[Fail], TestStatus::Fail),
            (&[Fail, Pass], TestStatus::Flaky),
            (&[Fail, Skip, Pass], TestStatus::Flaky),
            (&[Pass, Fail], TestStatus::Fail),
            (&[Pass, Skip], TestStatus::Pass),
            (&[Fail, Pass, Pass], TestStatus::Flaky),
        ];
        for (attempts, expected) in cases {
            assert_eq!(TestStatus::of_attempts(attempts), expected, "attempts {attempts:?}");
        }
    }

    #[test]
    fn folding_statuses_is_folding_their_attempts() {
        let attempts_of = |status: TestStatus| match status {
            TestStatus::Skip => vec![Skip],
            TestStatus::Pass => vec![Pass],
            TestStatus::Fail => vec![Fail],
            TestStatus::Flaky => vec![Fail, Pass],
        };
        let all = [TestStatus::Skip, TestStatus::Pass, TestStatus::Fail, TestStatus::Flaky];
        for first in all {
            for next in all {
                let attempts = [attempts_of(first), attempts_of(next)].concat();
                assert_eq!(first.then(next), TestStatus::of_attempts(&attempts), "{first:?} then {next:?}");
            }
        }
    }

    fn judge(policy: &ProviderPolicy, tests: &[(&str, TestStatus)]) -> (bool, Vec<String>) {
        let mut catalog = TestCatalog::new();
        let judge = Judge::new(policy, |name| catalog.intern(name));
        let results: Vec<_> =
            tests.iter().map(|(name, status)| CompactResult::new(catalog.intern(name), *status)).collect();
        let mut scratch = Scratch::default();
        // Judged twice with one scratch: the second must not see the first's tests.
        judge.judge_any_order(&results, catalog.len(), &mut scratch).unwrap();
        let verdict = judge.judge_any_order(&results, catalog.len(), &mut scratch).unwrap();
        // The one-pass path, where it applies, agrees.
        if let Some(sorted) = judge.judge_sorted(&results, catalog.len()).unwrap() {
            assert_eq!(sorted, verdict, "{tests:?}");
        }
        let names = verdict.flaky_tests.iter().map(|id| catalog.name(*id).unwrap().to_owned()).collect();
        (verdict.good, names)
    }

    fn requiring(tests: &[&str]) -> ProviderPolicy {
        ProviderPolicy { required_tests: tests.iter().map(|t| t.to_string()).collect(), ..Default::default() }
    }

    #[test]
    fn results_sharing_a_name_are_one_test() {
        use TestStatus::*;
        let any = ProviderPolicy::default();
        assert_eq!(judge(&any, &[("t", Fail), ("t", Pass)]), (true, vec!["t".into()]));
        assert_eq!(judge(&any, &[("t", Pass), ("t", Fail), ("u", Pass)]), (false, vec![]));
        assert_eq!(judge(&any, &[("t", Pass), ("t", Skip)]), (true, vec![]));
        let a = requiring(&["a", "b"]);
        assert_eq!(judge(&a, &[("a", Pass), ("a", Pass)]), (false, vec![]), "b never ran");
        assert_eq!(judge(&a, &[("a", Flaky), ("b", Pass), ("a", Pass)]), (true, vec!["a".into()]));
        assert_eq!(judge(&a, &[("a", Pass), ("b", Pass), ("a", Fail)]), (false, vec![]));
    }

    #[test]
    fn required_tests_must_count_as_passed_and_others_do_not_matter() {
        use TestStatus::*;
        let a = requiring(&["a"]);
        assert_eq!(judge(&a, &[("a", Pass), ("b", Fail)]), (true, vec![]));
        assert_eq!(judge(&a, &[("a", Skip), ("b", Pass)]), (false, vec![]));
        assert_eq!(judge(&a, &[("b", Pass)]), (false, vec![]));
        let strict = ProviderPolicy { flake: FlakePolicy { flaky_counts_as_passed: false, ..Default::default() }, ..a };
        assert_eq!(judge(&strict, &[("a", Flaky)]), (false, vec!["a".into()]));
    }

    #[test]
    fn an_id_outside_the_catalog_is_returned() {
        let mut catalog = TestCatalog::new();
        let judge = Judge::new(&requiring(&["a"]), |name| catalog.intern(name));
        let sorted = [CompactResult::new(TestId(0), TestStatus::Pass), CompactResult::new(TestId(7), TestStatus::Pass)];
        assert_eq!(judge.judge(&sorted, catalog.len(), &mut Scratch::default()), Err(TestId(7)));
        let unsorted =
            [CompactResult::new(TestId(7), TestStatus::Pass), CompactResult::new(TestId(0), TestStatus::Pass)];
        assert_eq!(judge.judge(&unsorted, catalog.len(), &mut Scratch::default()), Err(TestId(7)));
    }

    #[test]
    fn a_run_where_nothing_ran_is_not_good() {
        let any = ProviderPolicy::default();
        assert_eq!(judge(&any, &[("t", TestStatus::Skip)]), (false, vec![]));
        assert_eq!(judge(&any, &[]), (false, vec![]));
        assert_eq!(judge(&any, &[("t", TestStatus::Skip), ("t", TestStatus::Skip)]), (false, vec![]));
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
        assert_eq!(pair.runs().map(|run| &*run.build_id).collect::<Vec<_>>(), ["1", "2", "3", "4", "5"]);
    }
}

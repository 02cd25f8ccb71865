//! What the built-in `conformance-quick` suite runs: upstream's `[Conformance]` tests but the
//! slow, serial and disruptive ones and the node's own ([`QUICK_SKIP`]), and but the tests
//! `data/conformance-quick-moved.yaml` leaves to the full `conformance` suite, each with why.
//!
//! `conformance-quick` is the smoke suite of the default run, timed for two cores: the full
//! `conformance` suite is what a release is judged by, and it still runs every test moved here.
//! A test moves when it waits on a clock (a CronJob's minute boundaries, hundreds of sequential
//! updates) or took long on 2 cores where a faster test of its SIG and area stays (over 20 s with
//! nothing moved, then over 15 s in the quick suite: on 2 cores it is bound by its tests' total
//! time), so that the suite keeps a test of every SIG and area it covered.

use serde::Deserialize;

/// What `conformance-quick` leaves out by tag: the slow and disruptive tests, and the node's own
/// (`[NodeConformance]`: the kubelet and container runtime), so what stays exercises the API
/// server, the scheduler and the controllers.
pub const QUICK_SKIP: &str = r"\[Serial\]|\[Slow\]|\[Disruptive\]|\[NodeConformance\]";

const MOVED_DATA: &str = include_str!("data/conformance-quick-moved.yaml");

/// The data file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Moved {
    /// How the tests' times were measured.
    pub measured: String,
    /// Reason key → why a test with it is left to the full suite.
    pub reasons: std::collections::BTreeMap<String, String>,
    pub tests: Vec<MovedTest>,
}

/// One test `conformance-quick` leaves to the full suite.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MovedTest {
    /// Its name as ginkgo's JUnit report has it (`[It] [sig-...] ... [Conformance]`).
    pub name: String,
    /// A key of [`Moved::reasons`].
    pub reason: String,
    /// Its median time in the measured runs, in seconds.
    pub seconds: f64,
}

/// The bundled list.
pub fn moved() -> Moved {
    serde_yaml_ng::from_str(MOVED_DATA)
        .unwrap_or_else(|e| panic!("data/conformance-quick-moved.yaml parses (checked by a unit test): {e}"))
}

/// `conformance-quick`'s ginkgo `--skip`: [`QUICK_SKIP`] and every moved test.
pub fn quick_skip() -> String {
    let moved = moved();
    let names: Vec<&str> = moved.tests.iter().map(|test| test.name.as_str()).collect();
    match exactly(&names) {
        Some(moved) => format!("{QUICK_SKIP}|{moved}"),
        None => QUICK_SKIP.to_owned(),
    }
}

/// A ginkgo `--focus`/`--skip` regex (RE2) matching exactly the tests named as ginkgo's JUnit
/// names them, or `None` for none. Ginkgo matches a spec's text: the JUnit name without `[It] `.
pub fn exactly(junit_names: &[&str]) -> Option<String> {
    let texts: Vec<String> =
        junit_names.iter().map(|name| regex::escape(name.strip_prefix("[It] ").unwrap_or(name))).collect();
    (!texts.is_empty()).then(|| texts.join("|"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_moved_list_parses_and_every_test_has_a_known_reason_and_its_time() {
        let moved = moved();
        assert!(!moved.tests.is_empty() && !moved.measured.is_empty());
        for test in &moved.tests {
            assert!(test.name.starts_with("[It] [sig-") && test.name.contains("[Conformance]"), "{}", test.name);
            assert!(moved.reasons.contains_key(&test.reason), "{}: unknown reason {}", test.name, test.reason);
            assert!(test.seconds > 0.0, "{}", test.name);
        }
        let mut names: Vec<&str> = moved.tests.iter().map(|t| t.name.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), moved.tests.len(), "no test listed twice");
    }

    /// The skip matches each moved test's spec text and nothing else of what stays.
    #[test]
    fn the_quick_skip_matches_the_moved_tests_exactly_and_the_tags() {
        let skip = regex::Regex::new(&quick_skip()).unwrap();
        for test in moved().tests {
            assert!(skip.is_match(test.name.strip_prefix("[It] ").unwrap()), "{}", test.name);
        }
        let stays = "[sig-apps] CronJob should support CronJob API operations [Conformance]";
        assert!(!skip.is_match(stays));
        assert!(skip.is_match("[sig-apps] Daemon set [Serial] should rollback [Conformance]"));
        // Special characters in a name are literal: `(pod generation)`, `1.17`, `>100`.
        let exact = exactly(&["[It] [sig-x] a (b) 1.17 [Conformance]"]).unwrap();
        assert!(regex::Regex::new(&exact).unwrap().is_match("[sig-x] a (b) 1.17 [Conformance]"));
        assert!(!regex::Regex::new(&exact).unwrap().is_match("[sig-x] a b 1x17 [Conformance]"));
    }
}

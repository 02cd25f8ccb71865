//! The upstream conformance tests the `local` deployer cannot pass, and why: one list per kind of
//! node.
//!
//! On kwok nodes (`node_kind: kwok`) nodes and pods are simulated: there is no kubelet to exec into
//! a container or read its logs, no container runtime to run a command, no pod network to carry
//! traffic. `data/conformance-local-skips.yaml` lists the conformance tests that fail for those
//! reasons, derived from a real run of the whole suite (its header says which run).
//! On real nodes (`node_kind: real`, the default) pods really run, and
//! `data/conformance-real-skips.yaml` lists only what a run on them showed cannot pass on one
//! machine. The built-in `conformance` and `conformance-quick` suites skip the list of the
//! deployer's node kind; on any other deployer nothing is skipped.

use std::collections::BTreeMap;

use serde::Deserialize;

use local_cluster::NodeKind;

const KWOK_DATA: &str = include_str!("data/conformance-local-skips.yaml");
const REAL_DATA: &str = include_str!("data/conformance-real-skips.yaml");

/// The data file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalSkips {
    /// The Kubernetes version of the run the list was derived from.
    pub kubernetes: String,
    /// Reason key → what the test needs that the local deployer lacks.
    pub reasons: BTreeMap<String, String>,
    pub tests: Vec<SkippedTest>,
}

/// One conformance test the local deployer skips.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkippedTest {
    /// Its name as ginkgo's JUnit report has it (`[It] [sig-...] ... [Conformance]`).
    pub name: String,
    /// A key of [`LocalSkips::reasons`].
    pub reason: String,
    /// The failure the derivation run saw.
    pub seen: String,
}

/// The bundled list for nodes of `kind`.
pub fn local_skips(kind: NodeKind) -> LocalSkips {
    let (data, file) = match kind {
        NodeKind::Kwok => (KWOK_DATA, "data/conformance-local-skips.yaml"),
        NodeKind::Real => (REAL_DATA, "data/conformance-real-skips.yaml"),
    };
    serde_yaml_ng::from_str(data).unwrap_or_else(|e| panic!("{file} parses (checked by a unit test): {e}"))
}

impl LocalSkips {
    /// A ginkgo `--skip` regex (RE2) matching exactly the listed tests, or `None` if there are none.
    /// Ginkgo matches it against a spec's text, which is the JUnit name without its `[It] `.
    pub fn skip_regex(&self) -> Option<String> {
        let names: Vec<&str> = self.tests.iter().map(|t| t.name.as_str()).collect();
        config::quick::exactly(&names)
    }
}

/// What ginkgo's `--focus`/`--skip` match: the JUnit name without the leaf node type.
#[cfg(test)]
fn spec_text(junit_name: &str) -> &str {
    junit_name.strip_prefix("[It] ").unwrap_or(junit_name)
}

/// `skip` widened by the local deployer's list for nodes of `kind`.
pub fn with_local_skips(skip: Option<&str>, kind: NodeKind) -> Option<String> {
    match (skip, local_skips(kind).skip_regex()) {
        (Some(skip), Some(local)) => Some(format!("{skip}|{local}")),
        (skip, local) => skip.map(str::to_owned).or(local),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lists_are_well_formed_sorted_and_every_reason_is_explained() {
        for kind in [NodeKind::Kwok, NodeKind::Real] {
            well_formed(&local_skips(kind));
        }
    }

    #[test]
    fn real_nodes_skip_far_fewer_tests_than_kwok_nodes() {
        let (kwok, real) = (local_skips(NodeKind::Kwok).tests.len(), local_skips(NodeKind::Real).tests.len());
        assert!(real * 5 < kwok, "{real} skipped on real nodes, {kwok} on kwok nodes");
    }

    fn well_formed(skips: &LocalSkips) {
        assert!(skips.kubernetes.starts_with("v1."), "{}", skips.kubernetes);
        let names: Vec<&str> = skips.tests.iter().map(|t| t.name.as_str()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(names, sorted, "the tests are sorted by name, each once");
        for test in &skips.tests {
            assert!(skips.reasons.contains_key(&test.reason), "{}: unknown reason {}", test.name, test.reason);
            assert!(test.name.contains("[Conformance]"), "{}", test.name);
            assert!(!test.seen.is_empty(), "{}", test.name);
        }
    }

    #[test]
    fn the_skip_regex_matches_each_listed_test_and_no_other() {
        let skips = local_skips(NodeKind::Kwok);
        let regex = regex::Regex::new(&skips.skip_regex().expect("the list is not empty")).unwrap();
        for test in &skips.tests {
            assert!(regex.is_match(spec_text(&test.name)), "{}", test.name);
        }
        assert!(!regex.is_match("[sig-api-machinery] Namespaces should be created [Conformance]"));
        let combined = with_local_skips(Some(r"\[Serial\]"), NodeKind::Kwok).unwrap();
        assert!(combined.starts_with(r"\[Serial\]|"), "{combined}");
    }
}

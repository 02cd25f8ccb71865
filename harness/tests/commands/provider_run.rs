//! What the tests of a bundled third-party provider share: `harness run` of its checked entry
//! (`<provider>-checked`, see [`checked_providers_yaml`]) with cloud-e2e alone between the dumps of
//! the nodes and the cluster, and the checks every such provider passes.

use std::path::PathBuf;

use super::aws::{checked_providers_yaml, harness_run, verdicts};

/// cloud-e2e's tests of the four node capabilities (`instances`, `zones`, `node-shutdown`,
/// `node-deletion`).
pub(crate) const NODE_CAPABILITY_TESTS: [&str; 6] = [
    "Nodes should get a providerID from the CCM",
    "Nodes should carry the zone and region labels from the cloud",
    "Nodes should report the cloud's addresses, the provided node IP first",
    "Nodes should carry the instance-type labels from the cloud",
    "Node whose instance is shut down should get the shutdown taint and lose it once the instance is started again",
    "Node whose instance is terminated should be deleted by the CCM",
];

/// A finished run: its directory (removed with it), and what cloud-e2e skipped and reported.
pub(crate) struct CheckedRun {
    dir: tempfile::TempDir,
    pub passed: Vec<String>,
    pub skipped: Vec<String>,
    /// `artifacts/junit_cloud-e2e.xml`.
    pub report: String,
}

impl CheckedRun {
    /// Runs `provider` on `version` as CI does, cloud-e2e alone (conformance-quick, the entries'
    /// second required suite, is left to `harness run` and the matrix for CI's time); asserts that
    /// it passed and that the node capabilities' tests did.
    pub(crate) fn cloud_e2e(provider: &str, version: &str, cluster: &str) -> CheckedRun {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let config = checked_providers_yaml(root, provider, "cloud-e2e, conformance-quick");
        let text = std::fs::read_to_string(&config)
            .unwrap()
            .replace("nodes-before, cloud-e2e, conformance-quick, nodes-after", "nodes-before, cloud-e2e, nodes-after");
        std::fs::write(&config, text).unwrap();
        let (success, text) = harness_run(root, &config, &format!("{provider}-checked"), version, cluster);
        let junit = root.join("_artifacts/artifacts/junit_cloud-e2e.xml");
        let (passed, skipped, failed) = verdicts(&junit, &text);
        assert!(failed.is_empty(), "{failed:#?}\n{text}");
        assert!(success, "{text}");
        for wanted in NODE_CAPABILITY_TESTS {
            assert!(passed.iter().any(|name| name.contains(wanted)), "{wanted} did not pass: {passed:#?}");
        }
        let report = std::fs::read_to_string(junit).unwrap();
        CheckedRun { dir, passed, skipped, report }
    }

    fn artifacts(&self) -> PathBuf {
        self.dir.path().join("_artifacts")
    }

    /// A JSON file the exec suites saved (`nodes-before.json`, `cluster-after.json`, ...).
    pub(crate) fn read(&self, name: &str) -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(self.artifacts().join("artifacts").join(name)).unwrap()).unwrap()
    }

    /// Whether the cloud-e2e test named `name` (in part) passed.
    pub(crate) fn passed_test(&self, name: &str) -> bool {
        self.passed.iter().any(|passed| passed.contains(name))
    }

    /// Asserts that each of `features` was skipped (the provider declares it unsupported).
    pub(crate) fn assert_skipped(&self, features: &[&str]) {
        for feature in features {
            assert!(
                self.skipped.iter().any(|name| name.contains(feature)),
                "{feature} not skipped: {:#?}",
                self.skipped
            );
        }
    }

    /// The nodes before the termination test, and after it (one fewer).
    pub(crate) fn nodes_before_and_after(&self, count: usize) -> Vec<serde_json::Value> {
        let before = self.read("nodes-before.json")["items"].as_array().unwrap().clone();
        assert_eq!(before.len(), count);
        let after = self.read("nodes-after.json");
        assert_eq!(after["items"].as_array().unwrap().len(), count - 1, "the terminated node is gone: {after}");
        before
    }

    /// A node's addresses, as (type, address).
    pub(crate) fn addresses(node: &serde_json::Value) -> Vec<(String, String)> {
        node["status"]["addresses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| (a["type"].as_str().unwrap().to_owned(), a["address"].as_str().unwrap().to_owned()))
            .collect()
    }

    /// finished.json names the provider's and Kubernetes's versions, and no process is left.
    pub(crate) fn assert_finished(&self, provider_version: &str, version: &str) {
        let finished: serde_json::Value =
            serde_json::from_slice(&std::fs::read(self.artifacts().join("finished.json")).unwrap()).unwrap();
        assert_eq!(finished["metadata"]["provider-version"], provider_version, "{finished}");
        assert_eq!(finished["metadata"]["kubernetes-version"], version);
        let left = local_cluster::process::find_by_marker(&self.dir.path().join("state"));
        assert!(left.is_empty(), "processes left running: {left:?}");
    }
}

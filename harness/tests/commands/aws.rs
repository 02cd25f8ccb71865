//! `harness run --provider aws` for real, on both pinned Kubernetes versions: cloud-provider-aws's
//! CCM (built by `harness toolchain install --all`) against moto on the local cluster. Besides
//! cloud-e2e's own verdicts, exec suites around it dump the nodes and the cluster's record of its
//! moto instances, so the test checks the AWS shapes themselves: `aws:///<zone>/i-…` providerIDs,
//! the instance type and zone of each node's instance, and the terminated node gone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use junit::{self, ReadOptions, Status};

/// The bundled providers.yaml with `<provider>-checked`: the bundled `provider` entry as it is, but
/// with exec suites before and after its suites (`suites` as its entry lists them) that save
/// `kubectl get nodes -o json`, the cluster's state and, where the harness reads them, its cloud's
/// routes and load balancers (`harness cluster routes`, `harness cluster load-balancers`) into the
/// build's artifacts.
pub(crate) fn checked_providers_yaml(dir: &Path, provider: &str, suites: &str) -> PathBuf {
    let bundled = config::BUNDLED;
    let start = bundled.find(&format!("  - name: {provider}\n")).expect("the bundled file has the provider");
    let entry = &bundled[start..];
    let entry = &entry[..entry[1..].find("\n  - name: ").map_or(entry.len(), |end| end + 2)];
    let listed = format!("suites: [{suites}]\n    required:\n      suites: [{suites}]");
    let checked_suites = format!("nodes-before, {suites}, nodes-after");
    let checked = entry
        .replacen(&format!("- name: {provider}\n"), &format!("- name: {provider}-checked\n"), 1)
        .replace(&listed, &format!("suites: [{checked_suites}]\n    required:\n      suites: [{checked_suites}]"));
    assert!(checked.contains("nodes-before"), "the {provider} entry's suites changed:\n{entry}");
    // The route controller reconciles every 5 s (`--route-reconciliation-period`): the route of a
    // node the last test deleted goes at its next pass, so routes are read after two.
    let dump = |when: &str| {
        let settle = if when == "after" { 10 } else { 0 };
        format!(
            r#"  - name: nodes-{when}
    kind: exec
    command: [sh, -c, 'bin=$("$0" toolchain path --kubernetes "$1") && "$bin/kubectl" --kubeconfig "$KUBECONFIG" get nodes -o json > "$2/nodes-{when}.json" && cp "$HARNESS_STATE_DIR/clusters/$3/cluster.json" "$2/cluster-{when}.json" && ("$0" cluster routes --name "$3" >/dev/null 2>&1 && sleep {settle} && "$0" cluster routes --name "$3" > "$2/routes-{when}.json" || true) && ("$0" cluster load-balancers --name "$3" > "$2/load-balancers-{when}.json" 2>/dev/null || true)', "{{harness}}", "{{kubernetes_version}}", "{{artifacts}}", "{{cluster}}"]
    timeout: 2m
"#
        )
    };
    let text =
        bundled.replacen("providers:\n", &format!("suites:\n{}{}\nproviders:\n", dump("before"), dump("after")), 1);
    let text = format!("{}\n\n{}", text.trim_end(), checked.trim_end());
    let path = dir.join("providers.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `harness run` of `provider` (in `config`) on `version` as CI runs it, its state and data in
/// `root`; its output, stdout then stderr.
pub(crate) fn harness_run(root: &Path, config: &Path, provider: &str, version: &str, cluster: &str) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_harness"));
    cmd.env("HARNESS_STATE_DIR", root.join("state")).env("HARNESS_DATA_DIR", root.join("data")).env("CI", "true");
    for inherited in
        ["DATABASE_URL", "HARNESS_STORE", "HARNESS_CONFIG", "ARTIFACTS", "BUILD_ID", "JOB_NAME", "RUST_LOG"]
    {
        cmd.env_remove(inherited);
    }
    let output = cmd
        .args(["run", "--config"])
        .arg(config)
        .arg("--artifacts")
        .arg(root.join("_artifacts"))
        .args(["--provider", provider, "--kubernetes", version, "--cluster-name", cluster])
        .output()
        .unwrap();
    let text = format!("{}\n{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

/// The names of the passed and skipped cases of a JUnit file, and the failed ones with their message.
pub(crate) fn verdicts(path: &Path, text: &str) -> (Vec<String>, Vec<String>, Vec<(String, String)>) {
    let report = junit::read_file(path, &ReadOptions::default())
        .unwrap_or_else(|e| panic!("no report {} ({e}):\n{text}", path.display()));
    let (mut passed, mut skipped, mut failed) = (Vec::new(), Vec::new(), Vec::new());
    for (_, case) in report.cases() {
        match case.status() {
            Status::Passed => passed.push(case.name.clone()),
            Status::Skipped => skipped.push(case.name.clone()),
            _ => failed.push((case.name.clone(), case.failure().and_then(|f| f.message.clone()).unwrap_or_default())),
        }
    }
    (passed, skipped, failed)
}

fn run(version: &str, ccm_version: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let config = checked_providers_yaml(root, "aws", "cloud-e2e");
    let artifacts = root.join("_artifacts");
    let (success, text) = harness_run(root, &config, "aws-checked", version, "aws-e2e");

    // cloud-e2e: every test the capabilities select passed; exactly the others were skipped.
    let (passed, skipped, failed) = verdicts(&artifacts.join("artifacts/junit_cloud-e2e.xml"), &text);
    assert!(failed.is_empty(), "{failed:#?}\n{text}");
    assert!(success, "{text}");
    for feature in ["[Feature:Routes]", "[Feature:DualStack]"] {
        assert!(skipped.iter().any(|name| name.contains(feature)), "{feature} not skipped: {skipped:#?}");
    }
    // And the four data-path tests and the health-check one: moto's load balancers carry no traffic.
    let data_path = skipped.iter().filter(|name| name.contains("[Feature:LoadBalancerDataPath]")).count();
    let health_checks = skipped.iter().filter(|name| name.contains("[Feature:LoadBalancerHealthChecks]")).count();
    assert_eq!((skipped.len(), data_path, health_checks), (2 + 4 + 1, 4, 1), "{skipped:#?}");
    for wanted in [
        "Nodes should get a providerID from the CCM",
        "Nodes should carry the zone and region labels from the cloud",
        "Service of type LoadBalancer should get an ingress address and a cleanup finalizer",
        "Service of type LoadBalancer should have its load balancer deleted and its finalizer removed when deleted",
        "Service of type LoadBalancer should apply its loadBalancerSourceRanges and their changes",
        // An NLB (the entry's udp_annotations), whose ingress is a DNS name.
        "Service of type LoadBalancer with a UDP port should get an ingress address",
        "Node whose instance is shut down should get the shutdown taint",
        "Node whose instance is terminated should be deleted by the CCM",
    ] {
        assert!(passed.iter().any(|name| name.contains(wanted)), "{wanted} did not pass: {passed:#?}");
    }

    // The nodes as the CCM left them, against moto's instances.
    let read = |name: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(artifacts.join("artifacts").join(name)).unwrap()).unwrap()
    };
    let cluster = read("cluster-before.json");
    assert_eq!(cluster["cloud"]["kind"], "moto", "cluster.json tags its cloud: {cluster}");
    let instances: BTreeMap<String, String> = serde_json::from_value(cluster["cloud"]["instances"].clone()).unwrap();
    assert_eq!(instances.len(), 3, "{cluster}");
    let nodes = read("nodes-before.json");
    let nodes = nodes["items"].as_array().unwrap();
    assert_eq!(nodes.len(), 3);
    for node in nodes {
        let name = node["metadata"]["name"].as_str().unwrap();
        assert!(name.starts_with("ip-127-1-") && name.ends_with(".ec2.internal"), "{name}: a private DNS name");
        let labels = &node["metadata"]["labels"];
        let zone = labels["topology.kubernetes.io/zone"].as_str().unwrap_or_default();
        assert!(local_cluster::clouds::moto::ZONES.contains(&zone), "{name}: zone {zone:?}");
        assert_eq!(labels["topology.kubernetes.io/region"], "us-east-1", "{name}");
        assert_eq!(labels["node.kubernetes.io/instance-type"], local_cluster::clouds::moto::INSTANCE_TYPE, "{name}");
        let instance = &instances[name];
        assert_eq!(node["spec"]["providerID"], format!("aws:///{zone}/{instance}"), "{name}");
        let addresses = node["status"]["addresses"].as_array().unwrap();
        assert!(addresses.iter().any(|a| a["type"] == "InternalDNS" && a["address"] == name), "{name}: {addresses:?}");
    }
    // The terminated instance's node is gone; the others stay.
    let after = read("nodes-after.json");
    assert_eq!(after["items"].as_array().unwrap().len(), 2, "{after}");

    let finished: serde_json::Value =
        serde_json::from_slice(&std::fs::read(artifacts.join("finished.json")).unwrap()).unwrap();
    assert_eq!(finished["metadata"]["provider-version"], ccm_version, "{finished}");
    assert_eq!(finished["metadata"]["kubernetes-version"], version);
    assert_eq!(finished["result"], "SUCCESS");
    let left = local_cluster::process::find_by_marker(&root.join("state"));
    assert!(left.is_empty(), "processes left running: {left:?}");
}

#[test]
fn the_aws_ccm_passes_cloud_e2e_against_moto_on_kubernetes_1_37() {
    run("v1.37.1", "v1.37.1");
}

#[test]
fn the_aws_ccm_passes_cloud_e2e_against_moto_on_kubernetes_1_36() {
    run("v1.36.4", "v1.36.2");
}

//! `upstream-load-balancers`: upstream's own `[Feature:LoadBalancer]` tests from the toolchain's
//! `e2e.test`, run by `harness run` on the `local` provider's real nodes through its
//! `run_on_cloud_network` hook (`harness cluster exec`), every skip explained by a capability; and
//! the capability table compared with each pinned release's list of tests.

use std::collections::BTreeSet;

use harness::suites::upstream_load_balancers::{self, CAPABILITY_PROPERTY, Decision, UNMAPPED_PROPERTY};
use junit::{ReadOptions, Status};

use super::run::Env;

/// Every load-balancer test of each pinned release is in the table: none would run unmapped.
#[test]
fn the_table_maps_every_load_balancer_test_of_each_pinned_release() {
    let table = upstream_load_balancers::table();
    for version in &table.checked {
        let release = toolchain::resolve(Some(version)).expect("a pinned release");
        let e2e_test =
            toolchain::installed(&release).expect("the toolchain (harness toolchain install)").binary("e2e.test");
        let output = std::process::Command::new(&e2e_test).arg("--list-tests").output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let listed = upstream_load_balancers::listed_tests(&String::from_utf8_lossy(&output.stdout));
        assert!(listed.len() >= 17, "{version}: {listed:#?}");
        let planned = upstream_load_balancers::plan(&listed, &table, &BTreeSet::new(), &Default::default(), None);
        let unmapped: Vec<&str> =
            planned.iter().filter(|p| p.decision == Decision::RunUnmapped).map(|p| p.name.as_str()).collect();
        assert!(unmapped.is_empty(), "{version}: not in the table: {unmapped:#?}");
        let keys: BTreeSet<String> = listed.iter().map(|name| upstream_load_balancers::key(name)).collect();
        let stale: Vec<&str> =
            table.tests.iter().map(|row| row.test.as_str()).filter(|test| !keys.contains(*test)).collect();
        assert!(stale.is_empty(), "{version}: in the table, not in the release: {stale:#?}");
    }
}

/// The suite on the embedded default (three real nodes, the reference CCM, the local cloud carrying
/// traffic), as CI runs it, less its rolling-update test (`upstream-load-balancers-quick` of the
/// test's providers.yaml: 15 minutes of pods draining; the whole suite is measured in
/// docs/benchmarks.md): every test the local cloud's capabilities claim passes, each other one is
/// skipped naming the capability and the provider's reason, and the e2e processes' client
/// namespace goes with the run.
#[test]
fn upstream_load_balancer_tests_pass_on_the_local_provider_with_every_skip_explained() {
    let env = Env::new();
    let artifacts = env.root.join("_artifacts");
    let output = env
        .command("run")
        .args(["--provider", "local", "--suites", "upstream-load-balancers-quick", "--cluster-name", "uplb"])
        .arg("--config")
        .arg(&env.config)
        .arg("--artifacts")
        .arg(&artifacts)
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let junit_file = artifacts.join("artifacts/junit_upstream-load-balancers-quick.xml");
    let report = junit::read_file(&junit_file, &ReadOptions::default()).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let local = config::ProvidersConfig::load(&env.config).unwrap().provider("local").unwrap().clone();
    let mut passed = Vec::new();
    let mut known = Vec::new();
    for (_, case) in report.cases() {
        match case.status() {
            Status::Passed => passed.push(case.name.clone()),
            // Listed in the provider's known_failures, with why: the run passes all the same.
            Status::Failed if local.known_failure("upstream-load-balancers-quick", &case.name).is_some() => {
                known.push(case.name.clone());
            }
            Status::Skipped if case.name.contains("rolling update") => {
                let message = case.attempts[0].detail.as_ref().and_then(|d| d.message.clone()).unwrap_or_default();
                assert!(message.contains("left out by the suite's skip"), "{}: {message}", case.name);
            }
            Status::Skipped => {
                let capability = case.properties.iter().find(|p| p.name == CAPABILITY_PROPERTY);
                let capability = capability.unwrap_or_else(|| panic!("{}: skipped without a capability", case.name));
                let message = case.attempts[0].detail.as_ref().and_then(|d| d.message.clone()).unwrap_or_default();
                assert!(
                    message.contains(&format!("`{}`", capability.value)) && message.contains("local cloud"),
                    "{}: {message}",
                    case.name
                );
            }
            status => panic!("{}: {status:?}\n{text}", case.name),
        }
        assert!(!case.properties.iter().any(|p| p.name == UNMAPPED_PROPERTY), "{}", case.name);
    }
    assert!(output.status.success(), "{text}");
    for wanted in [
        "type and ports of a TCP service",
        "type and ports of a UDP service",
        "source ranges",
        "UDP traffic",
        // The local cloud's health checks of healthCheckNodePort and its client-IP affinity.
        "should target all nodes with endpoints",
        "session affinity work for LoadBalancer service with Local traffic policy",
        "switch session affinity for LoadBalancer service with Cluster traffic policy",
    ] {
        assert!(passed.iter().any(|name| name.contains(wanted)), "{wanted} did not pass: {passed:#?}");
    }
    assert!(passed.len() >= 12, "{passed:#?}");
    assert!(known.len() <= 1, "{known:#?}");
    let finished: serde_json::Value =
        serde_json::from_slice(&std::fs::read(artifacts.join("finished.json")).unwrap()).unwrap();
    let met = finished["metadata"]["known-failures"].as_array().cloned().unwrap_or_default();
    assert_eq!(met.len(), known.len(), "each known failure met is in the build's metadata: {met:#?}");
    let left = local_cluster::process::find_by_marker(&env.root.join("state"));
    assert!(left.is_empty(), "processes left running: {left:?}");
    // This cluster's probe clients (their holder names a file in its socket directory): other
    // tests running beside this one probe their own load balancers all along (upgrade runs).
    let sockets = local_cluster::real::socket_dir(&env.root.join("state/clusters/uplb"));
    let pattern = format!("{}/probe-.*holder", sockets.display());
    let sessions = std::process::Command::new("pgrep").args(["-f", &pattern]).output().unwrap();
    assert!(sessions.stdout.is_empty(), "client namespaces left: {}", String::from_utf8_lossy(&sessions.stdout));
}

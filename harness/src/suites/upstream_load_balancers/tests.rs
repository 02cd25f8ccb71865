//! The table, the plan a provider's capabilities make of a release's list, and the suite's JUnit,
//! with a stand-in `e2e.test` (the real one against real nodes is in `tests/suites.rs`).

use std::fs;
use std::path::Path;
use std::time::Duration;

use super::*;
use config::template::Placeholder;
use config::{Hook, ProvidersConfig};
use junit::{Status, Suite};

/// `e2e.test --list-tests` of v1.37.1, the load-balancer lines and two others.
const LIST_V137: &str = "\
    k8s.io/kubernetes@v1.37.1/test/e2e/network/loadbalancer.go:1081: [sig-network] LoadBalancers ExternalTrafficPolicy: Local [Feature:LoadBalancer] should only target nodes with endpoints [Slow]
    k8s.io/kubernetes@v1.37.1/test/e2e/network/loadbalancer.go:132: [sig-network] LoadBalancers [Feature:LoadBalancer] should be able to change the type and ports of a TCP service [Slow]
    k8s.io/kubernetes@v1.37.1/test/e2e/network/loadbalancer.go:610: [sig-network] LoadBalancers [Feature:LoadBalancer] should handle load balancer cleanup finalizer for service [Slow]
    k8s.io/kubernetes@v1.37.1/test/e2e/network/service.go:3708: [sig-network] Services should serve endpoints on same port and different protocol for internal traffic on Type LoadBalancer
    k8s.io/kubernetes@v1.37.1/test/e2e/apps/job.go:80: [sig-apps] Job should run a job to completion [Conformance]
";

const TCP: &str = "[sig-network] LoadBalancers [Feature:LoadBalancer] should be able to change the type and ports of a TCP service [Slow]";
const FINALIZER: &str = "[sig-network] LoadBalancers [Feature:LoadBalancer] should handle load balancer cleanup finalizer for service [Slow]";
const ONLY_ENDPOINTS: &str = "[sig-network] LoadBalancers ExternalTrafficPolicy: Local [Feature:LoadBalancer] should only target nodes with endpoints [Slow]";
/// A test no release has: upstream adding one.
const NEW: &str = "[sig-network] LoadBalancers [Feature:LoadBalancer] should do something new [Slow]";

fn provider(name: &str) -> Provider {
    let config = ProvidersConfig::bundled();
    config.providers.into_iter().find(|p| p.name == name).expect("a built-in provider")
}

/// `local` as it was before its load balancers probed health-check ports: the capability
/// undeclared, with its reason.
fn local_without_health_checks() -> Provider {
    let mut local = provider("local");
    local.capabilities.remove(&Capability::LoadBalancerHealthChecks);
    let reason = "the local cloud's load balancers probe no healthCheckNodePort".to_owned();
    local.unsupported.insert(Capability::LoadBalancerHealthChecks, reason);
    local
}

#[test]
fn the_table_parses_each_test_once_with_known_capabilities() {
    let table = table();
    assert!(!table.checked.is_empty() && table.checked.iter().all(|v| v.starts_with("v1.")), "{:?}", table.checked);
    let mut keys = BTreeSet::new();
    for row in &table.tests {
        assert_eq!(key(&row.test), row.test, "{}: written as its key (no tags, single spaces)", row.test);
        assert!(keys.insert(row.test.clone()), "{} twice", row.test);
        let needs = row.capabilities();
        assert_eq!(needs.first(), Some(&Capability::LoadBalancers), "{}: load-balancers first", row.test);
        assert!(!row.checks.trim().is_empty(), "{}", row.test);
    }
}

#[test]
fn the_key_drops_tags_wherever_a_release_puts_them() {
    let v136 = "[sig-network] LoadBalancers ExternalTrafficPolicy: Local [Feature:LoadBalancer] [Slow] should work for type=LoadBalancer";
    let v137 = "[sig-network] LoadBalancers ExternalTrafficPolicy: Local [Feature:LoadBalancer] should work for type=LoadBalancer [Slow]";
    assert_eq!(key(v136), "LoadBalancers ExternalTrafficPolicy: Local should work for type=LoadBalancer");
    assert_eq!(key(v136), key(v137));
    assert_eq!(key("[It] a  [x] b"), "a b");
}

#[test]
fn the_list_keeps_the_load_balancer_tests_of_e2e_test_output() {
    assert_eq!(listed_tests(LIST_V137), [ONLY_ENDPOINTS, TCP, FINALIZER]);
    assert_eq!(listed_tests("no tests\n"), Vec::<String>::new());
}

#[test]
fn each_test_runs_or_is_skipped_by_the_capabilities_the_provider_declares() {
    let local = local_without_health_checks();
    let listed = listed_tests(LIST_V137);
    let planned = plan(&listed, &table(), &local.capabilities, &local.unsupported, None);
    let decision = |name: &str| planned.iter().find(|p| p.name == name).unwrap().decision.clone();
    assert_eq!(decision(TCP), Decision::Run);
    assert_eq!(decision(FINALIZER), Decision::Run);
    let Decision::Skip { capability, reason } = decision(ONLY_ENDPOINTS) else { panic!("{planned:?}") };
    assert_eq!(capability, Capability::LoadBalancerHealthChecks);
    assert!(reason.starts_with("the provider does not declare the capability `load-balancer-health-checks`"));
    assert!(reason.ends_with(&local.unsupported[&Capability::LoadBalancerHealthChecks]), "{reason}");

    // vsphere has no load balancers: everything is skipped, naming the first capability it lacks.
    let vsphere = provider("vsphere");
    for planned in plan(&listed, &table(), &vsphere.capabilities, &vsphere.unsupported, None) {
        let Decision::Skip { capability, reason } = planned.decision else { panic!("{planned:?}") };
        assert_eq!(capability, Capability::LoadBalancers);
        assert!(reason.contains("NSX-T"), "{reason}");
    }
    // aws has load balancers that carry no traffic: the finalizer test runs, the traffic ones skip.
    let aws = provider("aws");
    let planned = plan(&listed, &table(), &aws.capabilities, &aws.unsupported, None);
    assert_eq!(planned.iter().filter(|p| p.decision == Decision::Run).count(), 1, "{planned:?}");
    let skipped = planned.iter().find(|p| p.name == TCP).unwrap();
    assert!(
        matches!(&skipped.decision, Decision::Skip { capability: Capability::LoadBalancerDataPath, reason } if reason.contains("moto"))
    );
}

#[test]
fn a_test_upstream_adds_runs_and_is_reported_unmapped() {
    let mut listed = listed_tests(LIST_V137);
    listed.push(NEW.into());
    // Even a provider without load balancers runs it: nothing says what it needs.
    let vsphere = provider("vsphere");
    let planned = plan(&listed, &table(), &vsphere.capabilities, &vsphere.unsupported, None);
    assert_eq!(planned.last().unwrap().decision, Decision::RunUnmapped);

    let ran = vec![report(&[(NEW, Outcome::Passed)])];
    let report = suite_report("upstream-load-balancers", &planned, Some(&ran));
    let case = report.cases().map(|(_, c)| c).find(|c| c.name == format!("[It] {NEW}")).unwrap();
    assert_eq!(case.status(), Status::Passed);
    assert_eq!(case.properties[0].name, UNMAPPED_PROPERTY);
    let outcome = outcome("upstream-load-balancers", &planned, &report, None, "j.xml".into());
    assert!(outcome.passed, "{outcome:?}");
    assert!(outcome.summary.contains(&format!("1 unmapped (ran; add to data/upstream-load-balancers.yaml): {NEW}")));
}

fn report(outcomes: &[(&str, Outcome)]) -> Report {
    let cases = outcomes
        .iter()
        .map(|(name, outcome)| TestCase {
            name: format!("[It] {name}"),
            attempts: vec![Attempt { outcome: *outcome, ..Attempt::default() }],
            ..TestCase::default()
        })
        .collect();
    Report { name: None, suites: vec![Suite { name: "Kubernetes e2e suite".into(), cases, ..Suite::default() }] }
}

#[test]
fn the_junit_has_each_listed_test_once_skips_with_reasons_and_what_else_failed() {
    let local = local_without_health_checks();
    let listed = listed_tests(LIST_V137);
    let planned = plan(&listed, &table(), &local.capabilities, &local.unsupported, None);
    // e2e.test reports the TCP test failed, a suite node failed, the finalizer test not at all,
    // and thousands of specs it skipped.
    let mut ran = report(&[(TCP, Outcome::Failed), ("[sig-apps] Job should run", Outcome::Skipped)]);
    ran.suites[0].cases.push(TestCase {
        name: "[SynchronizedAfterSuite]".into(),
        attempts: vec![Attempt { outcome: Outcome::Failed, ..Attempt::default() }],
        ..TestCase::default()
    });
    let report = suite_report("upstream-load-balancers", &planned, Some(&vec![ran]));
    let cases: Vec<(String, Status)> = report.cases().map(|(_, c)| (c.name.clone(), c.status())).collect();
    assert_eq!(
        cases,
        [
            (format!("[It] {ONLY_ENDPOINTS}"), Status::Skipped),
            (format!("[It] {TCP}"), Status::Failed),
            (format!("[It] {FINALIZER}"), Status::Failed),
            ("[SynchronizedAfterSuite]".into(), Status::Failed),
        ]
    );
    let skipped = report.cases().map(|(_, c)| c).find(|c| c.status() == Status::Skipped).unwrap();
    assert_eq!(skipped.properties[0].value, "load-balancer-health-checks");
    assert!(skipped.attempts[0].detail.as_ref().unwrap().message.as_ref().unwrap().contains("healthCheckNodePort"));
    let missing = report.cases().map(|(_, c)| c).find(|c| c.name.ends_with(FINALIZER)).unwrap();
    assert!(missing.failure().unwrap().message.as_ref().unwrap().contains("reported nothing"));
    let outcome = outcome("upstream-load-balancers", &planned, &report, None, "j.xml".into());
    assert!(!outcome.passed);
    assert!(
        outcome.summary.starts_with("0 of 3 upstream load-balancer tests passed, 3 failed, 1 skipped"),
        "{}",
        outcome.summary
    );
}

fn ctx(root: &Path) -> SuiteContext {
    let mut vars = Vars::new();
    vars.insert(Placeholder::Cluster, "c1".into());
    SuiteContext {
        kubeconfig: root.join("kubeconfig"),
        artifacts: root.join("artifacts"),
        provider: "local".into(),
        kubernetes_version: "v1.37.1".into(),
        vars,
        timeout: Duration::from_secs(600),
    }
}

/// A stand-in `e2e.test`: lists [`LIST_V137`] for `--list-tests`; else records its arguments and
/// writes `junit` where the real one writes its report.
fn fake_e2e(root: &Path, junit: &Path) -> Binaries {
    let bin = Binaries {
        e2e_test: root.join("bin/e2e.test"),
        ginkgo: root.join("bin/ginkgo"),
        kubectl: root.join("bin/kubectl"),
    };
    fs::create_dir_all(root.join("bin")).unwrap();
    fs::write(root.join("list.txt"), LIST_V137).unwrap();
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = --list-tests ]; then cat {list}; exit 0; fi\nfor a in \"$@\"; do echo \"$a\"; done > {args}\nfor a in \"$@\"; do case \"$a\" in --report-dir=*) dir=${{a#--report-dir=}};; esac; done\ncp {junit} \"$dir/junit_01.xml\"\n",
        list = root.join("list.txt").display(),
        args = root.join("args.txt").display(),
        junit = junit.display(),
    );
    testing::write_executable(&bin.e2e_test, &script);
    // Three nodes, one of them tainted NoSchedule: two that e2e.test would schedule on.
    let nodes = serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": [
        node_json("n0", true, &[]),
        node_json("n1", true, &["NoSchedule"]),
        node_json("n2", true, &["PreferNoSchedule"]),
    ]});
    fs::write(root.join("nodes.json"), nodes.to_string()).unwrap();
    testing::write_executable(&bin.kubectl, &format!("#!/bin/sh\ncat {}\n", root.join("nodes.json").display()));
    bin
}

fn node_json(name: &str, ready: bool, taints: &[&str]) -> serde_json::Value {
    let taints: Vec<serde_json::Value> =
        taints.iter().map(|effect| serde_json::json!({"key": "k", "effect": effect})).collect();
    serde_json::json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
        "spec": {"taints": taints},
        "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
    })
}

#[test]
fn e2e_test_counts_ready_untainted_uncordoned_nodes_with_a_network() {
    let node = |value: serde_json::Value| serde_json::from_value::<k8s_openapi::api::core::v1::Node>(value).unwrap();
    let mut cordoned = node_json("c", true, &[]);
    cordoned["spec"]["unschedulable"] = true.into();
    let mut no_network = node_json("w", true, &[]);
    no_network["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"type": "NetworkUnavailable", "status": "True"}));
    let mut network_unknown = node_json("u", true, &[]);
    network_unknown["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"type": "NetworkUnavailable", "status": "Unknown"}));
    let mut network_up = node_json("n", true, &[]);
    network_up["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"type": "NetworkUnavailable", "status": "False"}));
    let nodes = [
        node(network_unknown),
        node(network_up),
        node(node_json("a", true, &[])),
        node(node_json("b", true, &["PreferNoSchedule"])),
        node(node_json("r", false, &[])),
        node(node_json("t", true, &["NoExecute"])),
        node(cordoned),
        node(no_network),
    ];

    assert_eq!(schedulable_nodes(&nodes), 3, "n, a and b: an Unknown network counts as unavailable, as upstream's");
}

#[tokio::test]
async fn the_suite_runs_what_the_provider_can_through_its_cloud_network_hook() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let staged = root.join("staged.xml");
    junit::write_file(&report(&[(TCP, Outcome::Passed), (FINALIZER, Outcome::Passed)]), &staged).unwrap();
    // The hook: a wrapper that says it ran, then runs the command line it was given.
    let wrapper = root.join("bin/on-network");
    fs::create_dir_all(root.join("bin")).unwrap();
    testing::write_executable(
        &wrapper,
        &format!("#!/bin/sh\necho \"$1\" > {}\nshift\nexec \"$@\"\n", root.join("wrapped").display()),
    );
    let mut local = local_without_health_checks();
    local.hooks.run_on_cloud_network = Some(Hook {
        command: CommandSpec { argv: vec![wrapper.display().to_string(), "{cluster}".into()], ..Default::default() },
        timeout: Duration::from_secs(1),
    });
    let ctx = ctx(root);
    let suite = UpstreamLoadBalancersSuite::new("upstream-load-balancers", 1, &local, ctx.vars.clone())
        .with_binaries(fake_e2e(root, &staged));
    let outcome = suite.run(&ctx).await.unwrap();
    assert!(outcome.passed, "{outcome:?}");
    assert!(
        outcome.summary.starts_with("2 of 3 upstream load-balancer tests passed, 0 failed, 1 skipped"),
        "{}",
        outcome.summary
    );
    assert_eq!(fs::read_to_string(root.join("wrapped")).unwrap(), "c1\n", "the hook ran with its placeholders");
    let args = fs::read_to_string(root.join("args.txt")).unwrap();
    let focus = args.lines().find_map(|a| a.strip_prefix("--ginkgo.focus=")).unwrap();
    let focus = regex::Regex::new(focus).unwrap();
    assert!(focus.is_match(TCP) && focus.is_match(FINALIZER) && !focus.is_match(ONLY_ENDPOINTS), "{focus}");
    assert!(args.contains("--provider=skeleton"), "{args}");
    assert!(args.lines().any(|a| a == "--num-nodes=2"), "every ginkgo process knows the node count: {args}");
    // TestGrid reads the suite's file; e2e.test's own report is kept out of its glob.
    assert_eq!(outcome.junit, [ctx.artifacts.join("junit_upstream-load-balancers.xml")]);
    let scratch = ctx.artifacts.join("upstream-load-balancers-e2e");
    assert!(scratch.join("e2e-junit_01.xml").is_file() && !scratch.join("junit_01.xml").exists());
}

#[tokio::test]
async fn a_provider_that_can_run_nothing_skips_everything_without_starting_e2e_test() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let staged = root.join("staged.xml");
    junit::write_file(&report(&[]), &staged).unwrap();
    let vsphere = provider("vsphere");
    let ctx = ctx(root);
    let suite = UpstreamLoadBalancersSuite::new("upstream-load-balancers", 1, &vsphere, ctx.vars.clone())
        .with_binaries(fake_e2e(root, &staged));
    let outcome = suite.run(&ctx).await.unwrap();
    assert!(outcome.passed, "{outcome:?}");
    assert!(!root.join("args.txt").exists(), "e2e.test ran");
    let report = junit::read_file(&outcome.junit[0], &ReadOptions::default()).unwrap();
    assert_eq!(report.counts().skipped, 3);
}

#[test]
fn a_suites_own_skip_leaves_tests_out_and_says_so() {
    let local = local_without_health_checks();
    let listed = listed_tests(LIST_V137);
    let skip = regex::Regex::new("cleanup finalizer").unwrap();
    let planned = plan(&listed, &table(), &local.capabilities, &local.unsupported, Some(&skip));
    let finalizer = planned.iter().find(|p| p.name == FINALIZER).unwrap();
    assert_eq!(finalizer.decision, Decision::Excluded { skip: "cleanup finalizer".into() });
    assert!(!finalizer.decision.runs());
    let ran = vec![report(&[(TCP, Outcome::Passed)])];
    let report = suite_report("lb", &planned, Some(&ran));
    let case = report.cases().map(|(_, c)| c).find(|c| c.name.ends_with(FINALIZER)).unwrap();
    assert_eq!(case.status(), Status::Skipped);
    assert!(case.properties.is_empty(), "no capability is missing");
    let message = case.attempts[0].detail.as_ref().unwrap().message.clone().unwrap();
    assert!(message.contains("left out by the suite's skip \"cleanup finalizer\""), "{message}");
    let outcome = outcome("lb", &planned, &report, None, "j.xml".into());
    assert!(outcome.passed && outcome.summary.contains(", 1 left out by the suite's skip"), "{}", outcome.summary);
}

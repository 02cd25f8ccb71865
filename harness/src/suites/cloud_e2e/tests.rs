use std::collections::BTreeSet;

use super::*;
use config::{CommandSpec, Hook, ProvidersConfig};
use futures::FutureExt;

fn local_provider() -> Provider {
    let config = ProvidersConfig::bundled();
    config.providers.into_iter().find(|p| p.name == "local").expect("the built-in file has `local`")
}

#[test]
fn names_are_unique_e2e_style_and_cover_every_capability() {
    let all = tests();
    let names: BTreeSet<&str> = all.iter().map(|t| t.name).collect();
    assert_eq!(names.len(), all.len(), "duplicate test names");
    for test in &all {
        assert!(test.name.starts_with("[cloud-e2e] [Feature:"), "{}", test.name);
    }
    // Every capability is exercised here or by upstream's load-balancer tests.
    let upstream = crate::suites::upstream_load_balancers::table();
    let covered: BTreeSet<Capability> = all
        .iter()
        .flat_map(|t| t.needs.iter().copied())
        .chain(upstream.tests.iter().flat_map(|row| row.capabilities()))
        .collect();
    assert_eq!(covered, Capability::ALL.into_iter().collect(), "a capability no test exercises");
    assert!(all.last().unwrap().name.contains("terminated"), "node deletion destroys a node: it runs last");
}

/// The node-lifecycle tests disturb a worker each and run last; everything that disturbs every
/// node or load balancer runs before them, alone.
#[test]
fn the_lifecycle_tests_run_last_on_a_worker_each_when_there_are_enough() {
    let all = tests();
    let own: Vec<&str> = all.iter().filter(|t| t.disturbs == Disturbs::OwnWorker).map(|t| t.name).collect();
    assert_eq!(own.len(), 2, "{own:?}");
    assert!(own[0].contains("shut down") && own[1].contains("terminated"), "{own:?}");
    let first_own = all.iter().position(|t| t.disturbs == Disturbs::OwnWorker).unwrap();
    assert!(all[first_own..].iter().all(|t| t.disturbs == Disturbs::OwnWorker), "they come last");
    assert!(all.iter().any(|t| t.disturbs == Disturbs::Everything && t.name.contains("excluded")));
    // At once only when neither needs the first worker, which the load-balancer tests use.
    assert!(!lifecycle::worker_each(2) && lifecycle::worker_each(3));
}

#[test]
fn the_local_provider_declares_everything_the_suite_needs() {
    let local = local_provider();
    let suite = CloudE2eSuite::new("cloud-e2e", &local, None, None).unwrap();
    let hooks = HookRunner::new(local.hooks.clone(), Default::default());
    for test in tests() {
        assert_eq!(suite.skip_reason(&test, &hooks), None, "{}", test.name);
    }
}

#[test]
fn a_missing_capability_or_hook_is_a_skip_that_says_which() {
    let mut provider = local_provider();
    provider.capabilities.remove(&Capability::LoadBalancerSourceRanges);
    provider.hooks.start_instance = None;
    let suite = CloudE2eSuite::new("cloud-e2e", &provider, None, None).unwrap();
    let hooks = HookRunner::new(provider.hooks.clone(), Default::default());
    let reasons: Vec<(&str, String)> =
        tests().iter().filter_map(|t| suite.skip_reason(t, &hooks).map(|r| (t.name, r))).collect();
    assert_eq!(reasons.len(), 2, "{reasons:#?}");
    assert!(reasons[0].0.contains("loadBalancerSourceRanges"));
    assert_eq!(
        reasons[0].1,
        "the provider does not declare the capability `load-balancer-source-ranges` (providers.yaml capabilities)"
    );
    assert!(reasons[1].0.contains("shut down"));
    assert_eq!(reasons[1].1, "the provider declares no `start_instance` hook (providers.yaml hooks)");
}

#[test]
fn a_skip_for_an_unsupported_capability_gives_the_providers_reason() {
    let mut provider = local_provider();
    provider.capabilities.remove(&Capability::Routes);
    provider.unsupported.insert(Capability::Routes, "routes need NSX-T".into());
    let suite = CloudE2eSuite::new("cloud-e2e", &provider, None, None).unwrap();
    let hooks = HookRunner::new(provider.hooks.clone(), Default::default());
    let reasons: Vec<String> = tests().iter().filter_map(|t| suite.skip_reason(t, &hooks)).collect();
    assert!(!reasons.is_empty());
    for reason in reasons {
        assert_eq!(
            reason,
            "the provider does not declare the capability `routes` (providers.yaml capabilities): routes need NSX-T"
        );
    }
}

#[test]
fn focus_and_skip_select_by_name_and_a_bad_regex_is_an_error() {
    let local = local_provider();
    let suite = CloudE2eSuite::new("cloud-e2e", &local, Some(r"\[Feature:LoadBalancer"), Some("UDP")).unwrap();
    let selected: Vec<&str> = tests().iter().map(|t| t.name).filter(|n| suite.selected(n)).collect();
    assert!(!selected.is_empty());
    assert!(selected.iter().all(|n| n.contains("[Feature:LoadBalancer") && !n.contains("UDP")), "{selected:#?}");
    let err = CloudE2eSuite::new("cloud-e2e", &local, Some("("), None).unwrap_err().to_string();
    assert!(err.starts_with("suite cloud-e2e: focus \"(\" is not a regular expression"), "{err}");
}

#[test]
fn verdicts_become_junit_cases_that_read_back() {
    let cases = vec![
        case("a", Ok(()), Duration::from_millis(1500)),
        case("b", fail("expected x, saw y"), Duration::from_secs(2)),
        case("c", Err(Verdict::Skipped("no hook".into())), Duration::ZERO),
    ];
    let xml = junit::to_string(&report(cases, Duration::from_secs(4)));
    let back = junit::read_from(xml.as_bytes(), Path::new("junit_cloud-e2e.xml"), &Default::default()).unwrap();
    let read: Vec<(String, junit::Status, Option<String>)> = back
        .cases()
        .map(|(s, c)| {
            assert_eq!(s.name, SUITE);
            (c.name.clone(), c.status(), c.attempts[0].detail.as_ref().and_then(|d| d.message.clone()))
        })
        .collect();
    assert_eq!(
        read,
        [
            ("a".into(), junit::Status::Passed, None),
            ("b".into(), junit::Status::Failed, Some("expected x, saw y".into())),
            ("c".into(), junit::Status::Skipped, Some("no hook".into())),
        ]
    );
}

#[tokio::test]
async fn an_unreachable_api_server_is_a_suite_that_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    // A port nothing listens on: bind one, then let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n\
             users: [{{name: u, user: {{}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n"
        ),
    )
    .unwrap();
    let err = client(&kubeconfig).await.err().expect("no API server");
    assert!(err.starts_with(&format!("the API server http://127.0.0.1:{port}/ of kubeconfig")), "{err}");
    let missing = client(&dir.path().join("nope")).await.err().expect("no kubeconfig");
    assert!(missing.starts_with("cannot read kubeconfig"), "{missing}");
}

#[test]
fn hooks_are_rendered_with_the_node() {
    let hook = Hook {
        command: CommandSpec { argv: vec!["x".into(), "{node}".into()], ..CommandSpec::default() },
        timeout: Duration::from_secs(1),
    };
    let hooks = Hooks { terminate_instance: Some(hook), ..Hooks::default() };
    assert!(HookRunner::new(hooks, Default::default()).has(HookKind::TerminateInstance));
}

#[test]
fn load_balancers_are_named_as_upstream_names_them() {
    let mut service = k8s_openapi::api::core::v1::Service::default();
    service.metadata.uid = Some("1b4e28ba-2fa1-11d2-883f-0016d3cca427".into());
    // cloudprovider.DefaultLoadBalancerName: "a" + the UID without dashes, 32 bytes at most.
    assert_eq!(load_balancers::default_load_balancer_name(&service), "a1b4e28ba2fa111d2883f0016d3cca42");
    service.metadata.uid = Some("short".into());
    assert_eq!(load_balancers::default_load_balancer_name(&service), "ashort");
    service.metadata.namespace = Some("shop".into());
    service.metadata.name = Some("web".into());
    assert!(load_balancers::belongs("ashort 10.0.0.1", &service));
    assert!(load_balancers::belongs("lb shop/web", &service));
    assert!(!load_balancers::belongs("lb shop/webx", &service));
}

#[test]
fn services_get_the_providers_annotations_and_class_udp_ones_on_udp_services() {
    let services = config::LoadBalancerServices {
        annotations: [("example.com/tier".to_owned(), "gold".to_owned())].into(),
        udp_annotations: [("service.beta.kubernetes.io/aws-load-balancer-type".to_owned(), "nlb".to_owned())].into(),
        load_balancer_class: Some("example.com/internal".into()),
    };
    let service = |protocol: &str, class: Option<&str>| -> k8s_openapi::api::core::v1::Service {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "s"},
            "spec": {"type": "LoadBalancer", "loadBalancerClass": class, "ports": [{"port": 53, "protocol": protocol}]},
        }))
        .unwrap()
    };
    let tcp = for_cloud(&services, service("TCP", None));
    let annotations = tcp.metadata.annotations.clone().unwrap();
    assert_eq!(annotations.len(), 1, "{annotations:?}");
    assert_eq!(tcp.spec.unwrap().load_balancer_class.as_deref(), Some("example.com/internal"));
    let udp = for_cloud(&services, service("UDP", None));
    assert_eq!(udp.metadata.annotations.unwrap()["service.beta.kubernetes.io/aws-load-balancer-type"], "nlb");
    // The test of a foreign class keeps its own.
    let foreign = for_cloud(&services, service("TCP", Some("cloud-e2e.example.com/nobody")));
    assert_eq!(foreign.spec.unwrap().load_balancer_class.as_deref(), Some("cloud-e2e.example.com/nobody"));
    // Nothing declared, nothing added.
    let plain = for_cloud(&config::LoadBalancerServices::default(), service("UDP", None));
    assert!(plain.metadata.annotations.is_none() && plain.spec.unwrap().load_balancer_class.is_none());
}

#[tokio::test]
async fn an_ingress_is_an_ipv4_or_ipv6_address_or_a_host_name_that_resolves() {
    use super::data_path::ingress_address;
    assert_eq!(ingress_address("10.250.1.2").await.unwrap().to_string(), "10.250.1.2");
    assert_eq!(ingress_address("fd00:250::1:2").await.unwrap().to_string(), "fd00:250::1:2");
    // A host name, as AWS's load balancers give one: resolved, IPv4 first.
    let local = ingress_address("localhost").await.unwrap();
    assert!(local.is_loopback(), "{local}");
    let err = ingress_address("no-such-load-balancer.invalid").await.unwrap_err();
    assert!(err.contains("no-such-load-balancer.invalid") && err.contains("does not resolve"), "{err}");
}

/// A world whose client is never used: the tests below run no request.
fn offline_world() -> World {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    World {
        client: kube::Client::try_from(config).unwrap(),
        namespace: "unused".into(),
        hooks: HookRunner::new(Default::default(), Default::default()),
        ccm_healthz_url: None,
        services: Default::default(),
    }
}

static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Fails its first two calls, passes after.
fn fails_twice(_: &World) -> futures::future::BoxFuture<'_, TestResult> {
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    async move { if call < 2 { fail(format!("call {call} fails")) } else { Ok(()) } }.boxed()
}

#[tokio::test]
async fn flake_attempts_retry_a_failing_test_and_a_later_pass_is_flaky_not_passed() {
    let test = Test::new("[cloud-e2e] flaky", &[], fails_twice);
    let world = offline_world();
    let deadline = Instant::now() + Duration::from_secs(60);
    let provider = local_provider();

    // One attempt (the default): the failure stands.
    let once = CloudE2eSuite::new("cloud-e2e", &provider, None, None).unwrap();
    let case = once.run_test(&test, &world, deadline).await;
    assert_eq!((case.status(), case.attempts.len()), (junit::Status::Failed, 1));
    // Two, both failing: still failed.
    let twice = CloudE2eSuite::new("cloud-e2e", &provider, None, None).unwrap().with_flake_attempts(2);
    CALLS.store(0, std::sync::atomic::Ordering::SeqCst);
    let case = twice.run_test(&test, &world, deadline).await;
    assert_eq!((case.status(), case.attempts.len()), (junit::Status::Failed, 2));
    // Three: the third passes, and the case is flaky with every attempt kept, messages included.
    let thrice = CloudE2eSuite::new("cloud-e2e", &provider, None, None).unwrap().with_flake_attempts(3);
    CALLS.store(0, std::sync::atomic::Ordering::SeqCst);
    let case = thrice.run_test(&test, &world, deadline).await;
    assert_eq!((case.status(), case.attempts.len()), (junit::Status::Flaky, 3));
    let messages: Vec<_> = case.attempts.iter().map(|a| a.detail.as_ref().and_then(|d| d.message.clone())).collect();
    assert_eq!(messages, [Some("call 0 fails".into()), Some("call 1 fails".into()), None]);
    // A pass stops the retries; the JUnit keeps the attempts and reads back flaky.
    let xml = junit::to_string(&report(vec![case], Duration::from_secs(1)));
    let back = junit::read_from(xml.as_bytes(), Path::new("junit_cloud-e2e.xml"), &Default::default()).unwrap();
    assert_eq!(back.counts().flaky, 1, "{xml}");
    assert_eq!(back.counts().passed, 0, "a flaky test is never a clean pass");
    assert_eq!(CALLS.load(std::sync::atomic::Ordering::SeqCst), 3, "no attempt after the pass");
}

use std::path::Path;
use std::time::Duration;

use super::locate::YamlPath;
use super::validate::{format_duration, parse_duration};
use super::*;

const AWS_EXAMPLE: &str = include_str!("../../docs/examples/providers.aws.yaml");

/// A valid file; line numbers matter to the tests below (line 14 is free for additions).
const BASE: &str = "\
testgrid:
  gcs_bucket: my-logs
providers:
  - name: p
    repo: https://github.com/o/p
    branch: main
    kubernetes: [v1.37.1]
    ccm:
      build: {kind: cargo, package: reference-ccm, bin: reference-ccm}
      deploy: {kind: process}
    deployer: {kind: existing}
    capabilities: [instances]
    suites: [cloud-e2e]
";

fn load(text: &str) -> Result<ProvidersConfig, ConfigError> {
    ProvidersConfig::parse(text, Path::new("providers.yaml"))
}

/// BASE with `line` replaced by `with` (whole-line match, indentation included).
fn edit(line: &str, with: &str) -> String {
    assert!(BASE.lines().any(|l| l == line), "no line {line:?} in BASE");
    BASE.lines().map(|l| if l == line { with } else { l }).collect::<Vec<_>>().join("\n") + "\n"
}

fn problems(text: &str) -> Vec<Diagnostic> {
    match load(text) {
        Err(ConfigError::Invalid { problems, .. }) => problems,
        other => panic!("expected semantic problems, got {other:?}"),
    }
}

fn only_problem(text: &str) -> Diagnostic {
    let mut all = problems(text);
    assert_eq!(all.len(), 1, "{all:#?}");
    all.remove(0)
}

fn at(line: usize, column: usize) -> Option<Location> {
    Some(Location { line, column })
}

// ---- the shipped files ----

#[test]
fn the_repository_providers_yaml_is_valid_and_describes_the_local_reference_provider() {
    let config = ProvidersConfig::bundled();
    assert_eq!(config.testgrid.gcs_bucket, "kubernetes-ci-logs");
    let local = config.provider("local").expect("local provider");
    assert_eq!(
        local.ccm.build,
        CcmBuild::Cargo {
            package: "reference-ccm".into(),
            bin: "reference-ccm".into(),
            timeout: validate::DEFAULT_BUILD_TIMEOUT
        }
    );
    let CcmDeploy::Process { args, .. } = &local.ccm.deploy else { panic!("{:?}", local.ccm.deploy) };
    assert!(args.contains(&"--cloud-provider=local".to_owned()), "{args:?}");
    assert_eq!(
        local.deployer,
        Deployer::Local {
            nodes: 3,
            cloud: crate::clouds::named("local").unwrap(),
            node_kind: crate::nodes::NodeKind::Real,
            tags: None
        }
    );
    assert_eq!(local.suites, ["cloud-e2e", "conformance-quick"]);
    assert_eq!(local.required.suites, ["cloud-e2e", "conformance-quick", "upstream-load-balancers"]);
    for capability in [Capability::Instances, Capability::LoadBalancers, Capability::Routes, Capability::NodeShutdown] {
        assert!(local.has(capability), "{capability}");
    }
    let pinned: Vec<String> = crate::pins::kubernetes_versions().into_iter().map(str::to_owned).collect();
    let tested: Vec<String> = local.kubernetes.iter().map(ToString::to_string).collect();
    assert_eq!(tested, pinned, "providers.yaml: the local provider tests every release pinned in tools/kube/");
}

#[test]
fn the_aws_provider_runs_the_toolchains_ccm_against_moto_with_honest_capabilities() {
    let config = ProvidersConfig::bundled();
    let aws = config.provider("aws").expect("aws provider");
    assert!(matches!(&aws.ccm.build, CcmBuild::Toolchain { bin, .. } if bin == "aws-cloud-controller-manager"));
    let CcmDeploy::Process { args, .. } = &aws.ccm.deploy else { panic!("{:?}", aws.ccm.deploy) };
    assert!(args.contains(&"--cloud-provider=aws".to_owned()), "{args:?}");
    assert_eq!(
        aws.deployer,
        Deployer::Local {
            nodes: 3,
            cloud: crate::clouds::named("moto").unwrap(),
            node_kind: crate::nodes::NodeKind::Kwok,
            tags: None
        }
    );
    // What moto and an IPv4 VPC do not give (docs/providers.md says why).
    for missing in [Capability::Routes, Capability::DualStack, Capability::LoadBalancerDataPath] {
        assert!(!aws.has(missing), "{missing}");
    }
    // UDP through an NLB: a classic ELB, the CCM's default, has none, so UDP Services ask for one.
    assert!(aws.has(Capability::LoadBalancerUdp));
    let udp = aws.load_balancer_services.annotations_for(true);
    assert_eq!(udp["service.beta.kubernetes.io/aws-load-balancer-type"], "nlb");
    assert!(aws.load_balancer_services.annotations_for(false).is_empty(), "TCP Services keep the classic ELB");
    let local = config.provider("local").unwrap();
    let tested: Vec<String> = aws.kubernetes.iter().map(ToString::to_string).collect();
    assert_eq!(tested, local.kubernetes.iter().map(ToString::to_string).collect::<Vec<_>>());
}

#[test]
fn the_vsphere_provider_runs_its_ccm_on_vcsims_real_nodes_and_says_why_it_lacks_what_it_lacks() {
    let config = ProvidersConfig::bundled();
    let vsphere = config.provider("vsphere").expect("vsphere provider");
    assert!(matches!(&vsphere.ccm.build, CcmBuild::Toolchain { bin, .. } if bin == "vsphere-cloud-controller-manager"));
    let CcmDeploy::Process { args, .. } = &vsphere.ccm.deploy else { panic!("{:?}", vsphere.ccm.deploy) };
    assert!(args.contains(&"--cloud-provider=vsphere".to_owned()), "{args:?}");
    let Deployer::Local { cloud, node_kind, tags: Some(tags), .. } = &vsphere.deployer else {
        panic!("{:?}", vsphere.deployer)
    };
    assert_eq!((cloud.name, *node_kind), ("vcsim", crate::nodes::NodeKind::Real));
    assert_eq!(tags.zones.len(), 3);
    let declared: Vec<Capability> = vsphere.capabilities.iter().copied().collect();
    assert_eq!(
        declared,
        [Capability::Instances, Capability::Zones, Capability::NodeShutdown, Capability::NodeDeletion]
    );
    for missing in [Capability::LoadBalancers, Capability::Routes, Capability::LoadBalancerDataPath] {
        assert!(vsphere.unsupported[&missing].contains("NSX-T"), "{missing}");
    }
    assert!(vsphere.suites.contains(&"conformance-quick".to_owned()));
}

#[test]
fn a_vcsim_inventory_that_cannot_hold_the_nodes_or_label_its_zones_is_refused_where_it_is_written() {
    let local = |rest: &str| edit("    deployer: {kind: existing}", &format!("    deployer: {{kind: local, {rest}}}"));
    let problem = only_problem(&local("cloud: vcsim, node_kind: kwok"));
    assert_eq!(problem.path, "providers[0].deployer.node_kind");
    assert!(problem.problem.to_string().contains("use `node_kind: real`"), "{}", problem.problem);

    // Three hosts of 4 GiB hold three 1 GiB VMs each; one zone, one host.
    assert!(load(&local("cloud: vcsim, nodes: 9")).is_ok());
    let problem = only_problem(&local("cloud: vcsim, nodes: 10"));
    assert_eq!((problem.path.as_str(), problem.location), ("providers[0].deployer.nodes", at(11, 50)));
    assert!(problem.problem.to_string().contains("at most 9 nodes; add zones"), "{}", problem.problem);
    let problem = only_problem(&local("cloud: vcsim, zones: [a], region: r, nodes: 4"));
    assert!(problem.problem.to_string().contains("1 host(s)"), "{}", problem.problem);

    let problem = only_problem(&local("cloud: vcsim, zones: [], region: r"));
    assert_eq!(problem.path, "providers[0].deployer.region");
    assert!(problem.problem.to_string().contains("a region tag needs zone tags"), "{}", problem.problem);
    let text =
        local("cloud: vcsim, zones: []").replace("capabilities: [instances]", "capabilities: [instances, zones]");
    let problem = only_problem(&text);
    assert_eq!(problem.path, "providers[0].deployer.zones");
    assert!(problem.problem.to_string().contains("capability `zones` needs zone tags"), "{}", problem.problem);
    assert!(load(&local("cloud: vcsim, zones: []")).is_ok(), "no zones and no zones capability");

    let problem = only_problem(&local("cloud: vcsim, zones: [Zone A]"));
    assert_eq!(problem.path, "providers[0].deployer.zones[0]");
    let problem = only_problem(&local("cloud: moto, zones: [a]"));
    assert_eq!(problem.path, "providers[0].deployer.zones");
    assert!(problem.problem.to_string().contains("set `cloud: vcsim`"), "{}", problem.problem);
}

#[test]
fn an_unsupported_capability_needs_a_reason_and_cannot_be_declared_too() {
    let with = |unsupported: &str| {
        edit("    suites: [cloud-e2e]", &format!("    suites: [cloud-e2e]\n    unsupported: {unsupported}"))
    };
    let config = load(&with("{routes: no NSX-T}")).unwrap();
    assert_eq!(config.providers[0].unsupported[&Capability::Routes], "no NSX-T");
    let problem = only_problem(&with("{instances: why}"));
    assert_eq!(problem.path, "providers[0].unsupported.instances");
    assert!(problem.problem.to_string().contains("both declared"), "{}", problem.problem);
    assert_eq!(only_problem(&with("{teleport: no}")).path, "providers[0].unsupported.teleport");
    assert_eq!(only_problem(&with("{routes: ' '}")).path, "providers[0].unsupported.routes");
}

#[test]
fn node_kind_defaults_by_cloud_and_a_bad_one_is_refused_naming_the_file_and_field() {
    use crate::nodes::NodeKind;
    let deployer =
        |line: &str| load(&edit("    deployer: {kind: existing}", line)).unwrap().providers[0].deployer.clone();
    let kind = |deployer: Deployer| match deployer {
        Deployer::Local { node_kind, .. } => node_kind,
        other => panic!("{other:?}"),
    };
    assert_eq!(kind(deployer("    deployer: {kind: local}")), NodeKind::Real);
    assert_eq!(kind(deployer("    deployer: {kind: local, cloud: moto}")), NodeKind::Kwok);
    assert_eq!(kind(deployer("    deployer: {kind: local, node_kind: kwok}")), NodeKind::Kwok);

    let problem = only_problem(&edit("    deployer: {kind: existing}", "    deployer: {kind: local, node_kind: vm}"));
    assert_eq!(problem.path, "providers[0].deployer.node_kind");
    let rendered = problem.render(Path::new("/etc/providers.yaml"));
    assert!(rendered.starts_with("/etc/providers.yaml:"), "{rendered}");
    assert!(rendered.contains("deployer.node_kind: unknown node kind `vm`; use one of: real, kwok"), "{rendered}");

    let text = edit("    deployer: {kind: existing}", "    deployer: {kind: local, cloud: moto, node_kind: real}");
    let problem = only_problem(&text);
    assert_eq!(problem.path, "providers[0].deployer.node_kind");
    assert!(problem.problem.to_string().contains("use `node_kind: kwok`"), "{}", problem.problem);

    let text = edit("    deployer: {kind: existing}", "    deployer: {kind: local, nodes: 300}");
    assert_eq!(only_problem(&text).path, "providers[0].deployer.nodes", "real nodes: at most 200");
    assert!(
        load(&edit("    deployer: {kind: existing}", "    deployer: {kind: local, nodes: 300, node_kind: kwok}"))
            .is_ok()
    );
}

#[test]
fn an_unknown_local_cloud_or_toolchain_ccm_is_refused_with_the_known_ones() {
    let text = edit("    deployer: {kind: existing}", "    deployer: {kind: local, cloud: ec2}");
    let problem = only_problem(&text);
    assert_eq!(problem.path, "providers[0].deployer.cloud");
    let message = problem.problem.to_string();
    assert!(message.contains("`ec2`") && message.contains("local, moto, vcsim"), "{message}");

    let text = edit(
        "      build: {kind: cargo, package: reference-ccm, bin: reference-ccm}",
        "      build: {kind: toolchain, bin: gce-ccm}",
    );
    let message = only_problem(&text).problem.to_string();
    assert!(message.contains("`gce-ccm`") && message.contains("aws-cloud-controller-manager"), "{message}");
}

#[test]
fn local_upstream_runs_upstreams_ccm_from_the_toolchain_with_the_reference_ccms_flags() {
    let config = ProvidersConfig::bundled();
    let upstream = config.provider("local-upstream").expect("local-upstream provider");
    let local = config.provider("local").unwrap();
    assert_eq!(
        upstream.ccm.build,
        CcmBuild::Toolchain { bin: "local-upstream-ccm".into(), timeout: validate::DEFAULT_BUILD_TIMEOUT }
    );
    assert!(upstream.ccm.build.produces_binary());
    let (CcmDeploy::Process { args, .. }, CcmDeploy::Process { args: reference, .. }) =
        (&upstream.ccm.deploy, &local.ccm.deploy)
    else {
        panic!("{:?}", upstream.ccm.deploy)
    };
    // Every flag of the reference CCM, plus what upstream's secure serving needs to open /metrics.
    let extra: Vec<&String> = args.iter().filter(|a| !reference.contains(a)).collect();
    assert_eq!(extra, ["--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"]);
    assert_eq!(args.len(), reference.len() + 1);
    assert_eq!(
        (&upstream.deployer, &upstream.capabilities, &upstream.hooks),
        (&local.deployer, &local.capabilities, &local.hooks)
    );
    assert_eq!(
        (upstream.suites.as_slice(), upstream.required.suites.as_slice()),
        (&["cloud-e2e".to_owned()][..], &["cloud-e2e".to_owned(), "upstream-load-balancers".to_owned()][..])
    );
    assert_eq!(upstream.kubernetes, local.kubernetes);
}

#[test]
fn a_toolchain_build_names_a_ccm_the_toolchain_builds() {
    let text = edit(
        "      build: {kind: cargo, package: reference-ccm, bin: reference-ccm}",
        "      build: {kind: toolchain, bin: kube-apiserver}",
    );
    let problem = only_problem(&text);
    assert_eq!(problem.path, "providers[0].ccm.build.bin");
    let message = problem.problem.to_string();
    assert!(message.contains("`kube-apiserver` is not a CCM the toolchain builds"), "{message}");
    assert!(message.contains("local-upstream-ccm"), "{message}");

    let text = edit(
        "      build: {kind: cargo, package: reference-ccm, bin: reference-ccm}",
        "      build: {kind: toolchain, bin: local-upstream-ccm, package: reference-ccm}",
    );
    assert!(only_problem(&text).problem.to_string().contains("`package` is not an option of a `toolchain` build"));
    let text = edit(
        "      build: {kind: cargo, package: reference-ccm, bin: reference-ccm}",
        "      build: {kind: toolchain, bin: local-upstream-ccm}",
    );
    assert_eq!(load(&text).unwrap().providers[0].ccm.build.kind(), "toolchain");
}

#[test]
fn the_aws_example_is_valid() {
    let config = ProvidersConfig::parse(AWS_EXAMPLE, Path::new("providers.aws.yaml")).unwrap();
    assert_eq!(config.testgrid.gcs_bucket, "kubernetes-ci-logs", "gs:// is stripped");
    let aws = config.provider("aws").unwrap();
    assert!(matches!(&aws.deployer, Deployer::Kubetest2 { deployer, .. } if deployer == "kops"));
    assert!(matches!(&aws.ccm.build, CcmBuild::Command { output: BuildOutput::Manifest(_), .. }));
    assert_eq!(aws.ccm.deploy, CcmDeploy::Manifest { path: None, timeout: Duration::from_secs(600) });
    assert_eq!(aws.required.tests.len(), 2);
    assert!(aws.required.tests[1].matches("[sig-cloud-provider] Nodes should be initialised"));
    let exec = config.suite("aws-nlb").unwrap();
    let SuiteKind::Exec { command } = &exec.kind else { panic!("{exec:?}") };
    assert_eq!(command.argv[..2], ["hack/e2e/nlb.sh".to_owned(), "--kubeconfig".to_owned()]);
    assert_eq!(aws.github_repo(), Some(("kubernetes", "cloud-provider-aws")));
}

// ---- jobs and TestGrid ----

#[test]
fn job_names_are_per_provider_job_and_release_line() {
    let config = ProvidersConfig::bundled();
    let names: Vec<String> = config.cells().into_iter().map(|c| c.name).collect();
    assert_eq!(
        names,
        [
            "ci-cloud-provider-aws-k8s-1.37",
            "ci-cloud-provider-aws-k8s-1.36",
            "ci-cloud-provider-vsphere-k8s-1.37",
            "ci-cloud-provider-vsphere-k8s-1.36",
            "ci-cloud-provider-openstack-k8s-1.37",
            "ci-cloud-provider-openstack-k8s-1.36",
            "ci-cloud-provider-local-k8s-1.37",
            "ci-cloud-provider-local-load-balancers-k8s-1.37",
            "ci-cloud-provider-local-certified-conformance-k8s-1.37",
            "ci-cloud-provider-local-k8s-1.36",
            "ci-cloud-provider-local-load-balancers-k8s-1.36",
            "ci-cloud-provider-local-certified-conformance-k8s-1.36",
            "ci-cloud-provider-local-upstream-k8s-1.37",
            "ci-cloud-provider-local-upstream-load-balancers-k8s-1.37",
            "ci-cloud-provider-local-upstream-k8s-1.36",
            "ci-cloud-provider-local-upstream-load-balancers-k8s-1.36"
        ]
    );

    let aws = ProvidersConfig::parse(AWS_EXAMPLE, Path::new("x")).unwrap();
    let cells = aws.cells();
    let names: Vec<&str> = cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "ci-cloud-provider-aws-e2e-k8s-1.37",
            "ci-cloud-provider-aws-conformance-k8s-1.37",
            "ci-cloud-provider-aws-e2e-k8s-1.36",
            "ci-cloud-provider-aws-conformance-k8s-1.36",
            "ci-cloud-provider-aws-e2e-k8s-1.35",
            "ci-cloud-provider-aws-conformance-k8s-1.35",
        ]
    );
    let cell = aws.cell("ci-cloud-provider-aws-conformance-k8s-1.36").unwrap();
    assert_eq!((cell.kubernetes.to_string(), cell.suites()), ("v1.36.4".to_owned(), &["conformance".to_owned()][..]));
    assert_eq!(format_duration(cell.interval()), "24h");
    assert_eq!(cell.gcs_prefix(&aws), "kubernetes-ci-logs/logs/ci-cloud-provider-aws-conformance-k8s-1.36");
}

#[test]
fn testgrid_input_has_a_job_per_cell_under_the_bucket() {
    let config = ProvidersConfig::bundled();
    let input = testgrid_input(&config);
    assert_eq!(input.dashboard_group.as_deref(), Some("sig-cloud-provider-harness"));
    let [aws, vsphere, openstack, provider, upstream] = &input.providers[..] else { panic!("{input:?}") };
    assert_eq!((aws.dashboard.as_str(), aws.num_failures_to_alert), ("cloud-provider-aws", 3));
    assert_eq!(vsphere.dashboard, "cloud-provider-vsphere");
    assert_eq!(openstack.dashboard, "cloud-provider-openstack");
    assert_eq!(upstream.dashboard, "cloud-provider-local-upstream");
    assert_eq!((provider.dashboard.as_str(), provider.num_failures_to_alert), ("cloud-provider-local", 3));
    assert_eq!(provider.jobs[0].gcs_prefix, "kubernetes-ci-logs/logs/ci-cloud-provider-local-k8s-1.37");
    let generated = crate::testgrid::generate(&input).unwrap();
    assert_eq!(generated.test_groups.len(), 16);
    // The certification jobs, and only they, on the provider's conformance dashboard.
    let tabs = |name: &str| -> Vec<String> {
        let dashboard = generated.dashboards.iter().find(|d| d.name == name).unwrap_or_else(|| panic!("{name}"));
        dashboard.dashboard_tab.iter().map(|tab| tab.test_group_name.clone()).collect()
    };
    assert_eq!(
        tabs("conformance-cloud-provider-local"),
        [
            "ci-cloud-provider-local-certified-conformance-k8s-1.36",
            "ci-cloud-provider-local-certified-conformance-k8s-1.37"
        ]
    );
    // Upstream's load-balancer tests: a job and a tab of their own beside the default job's.
    assert_eq!(
        tabs("cloud-provider-local"),
        [
            "ci-cloud-provider-local-k8s-1.36",
            "ci-cloud-provider-local-k8s-1.37",
            "ci-cloud-provider-local-load-balancers-k8s-1.36",
            "ci-cloud-provider-local-load-balancers-k8s-1.37"
        ]
    );
    let local = config.provider("local").unwrap();
    let load_balancers = local.jobs.iter().find(|j| j.name.as_deref() == Some("load-balancers")).unwrap();
    assert_eq!(
        (load_balancers.suites.as_slice(), format_duration(load_balancers.interval)),
        (&["upstream-load-balancers".to_owned()][..], "24h".to_owned())
    );
    assert!(local.required.suites.contains(&"upstream-load-balancers".to_owned()), "its failures fail its job");
    let group = &generated.dashboard_groups[0].dashboard_names;
    assert!(group.contains(&"conformance-cloud-provider-local".to_owned()), "{group:?}");

    let aws = ProvidersConfig::parse(AWS_EXAMPLE, Path::new("x")).unwrap();
    let generated = crate::testgrid::generate(&testgrid_input(&aws)).unwrap();
    assert_eq!(generated.test_groups.len(), 6);
    assert_eq!(generated.dashboards[0].name, "provider-aws-cloud-provider-harness");
}

#[test]
fn two_versions_of_one_release_line_would_share_a_job_and_are_refused() {
    let text = edit("    kubernetes: [v1.37.1]", "    kubernetes: [v1.37.1, v1.36.4, v1.37.2]");
    let problem = only_problem(&text);
    assert_eq!((problem.path.as_str(), problem.location), ("providers[0].kubernetes[2]", at(7, 36)));
    assert!(matches!(problem.problem, Problem::SameReleaseLine { ref line, .. } if line == "1.37"), "{problem:?}");
}

#[test]
fn a_job_without_a_name_is_the_default_one_and_keeps_its_name_beside_others() {
    let text = edit(
        "    suites: [cloud-e2e]",
        "    suites: [cloud-e2e]\n    jobs:\n      - suites: [cloud-e2e]\n      - {name: lb, suites: [cloud-e2e], interval: 24h}",
    );
    let config = load(&text).unwrap();
    let cells: Vec<(String, String)> =
        config.cells().into_iter().map(|c| (c.name.clone(), format_duration(c.interval()))).collect();
    assert_eq!(
        cells,
        [
            ("ci-cloud-provider-p-k8s-1.37".to_owned(), format_duration(validate::DEFAULT_INTERVAL)),
            ("ci-cloud-provider-p-lb-k8s-1.37".to_owned(), "24h".to_owned()),
        ],
        "the default job's name (and its TestGrid history) is the one it had without `jobs`"
    );

    let two = edit(
        "    suites: [cloud-e2e]",
        "    suites: [cloud-e2e]\n    jobs:\n      - suites: [cloud-e2e]\n      - suites: [cloud-e2e]",
    );
    let problem = only_problem(&two);
    assert_eq!(problem.path, "providers[0].jobs[1]");
    let message = problem.problem.to_string();
    assert!(
        message.contains("ci-cloud-provider-<provider>-k8s-<minor>") && message.contains("at line 15"),
        "{message}"
    );
}

#[test]
fn job_names_clashing_across_providers_are_refused() {
    // Provider `p-e2e`'s default job is provider `p`'s job `e2e`.
    let second = BASE.split_once("providers:\n").unwrap().1.replace("name: p\n", "name: p-e2e\n");
    let text = edit("    suites: [cloud-e2e]", "    suites: [cloud-e2e]\n    jobs: [{name: e2e, suites: [cloud-e2e]}]")
        + &second;
    let problem = only_problem(&text);
    assert!(
        matches!(&problem.problem, Problem::JobNameClash { job, first, .. }
        if job == "ci-cloud-provider-p-e2e-k8s-1.37" && first.0 == Some(14)),
        "{problem:?}"
    );
    assert_eq!(problem.location, at(15, 11));
}

// ---- errors: reading and parsing ----

#[test]
fn a_missing_file_names_it_and_says_what_to_do() {
    let err = ProvidersConfig::load("/nonexistent/providers.yaml").unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }));
    let message = err.to_string();
    assert!(message.starts_with("cannot read /nonexistent/providers.yaml: "), "{message}");
    assert!(message.contains("--config"), "{message}");
}

#[test]
fn an_empty_file_or_one_of_comments_only_is_empty() {
    for text in ["", "\n\n", "# nothing yet\n", "---\n"] {
        let err = load(text).unwrap_err();
        assert!(matches!(err, ConfigError::Empty { .. }), "{text:?}: {err:?}");
        assert!(err.to_string().starts_with("providers.yaml is empty: it needs"), "{err}");
    }
}

#[test]
fn load_reads_a_file_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("providers.yaml");
    std::fs::write(&path, BASE).unwrap();
    let config = ProvidersConfig::load(&path).unwrap();
    assert_eq!(config.source, path);
    assert_eq!(config.providers[0].name, "p");
}

#[test]
fn an_unknown_field_is_refused_with_its_line_and_column() {
    let text = edit("    suites: [cloud-e2e]", "    suites: [cloud-e2e]\n    capabilites: [routes]");
    let err = load(&text).unwrap_err();
    assert!(matches!(err, ConfigError::Parse { .. }), "{err:?}");
    assert_eq!(err.location(), at(14, 5));
    let message = err.to_string();
    assert!(
        message.starts_with("providers.yaml:14:5: providers[0]: unknown field `capabilites`, expected one of"),
        "{message}"
    );
    assert!(message.contains("fix its spelling"), "{message}");
}

#[test]
fn an_unknown_field_in_a_flow_mapping_points_at_the_key() {
    let text = edit("    deployer: {kind: existing}", "    deployer: {kind: existing, kubecfg: x}");
    let err = load(&text).unwrap_err();
    assert_eq!(err.location(), at(11, 32), "{err}");
    assert!(err.to_string().contains("providers[0].deployer: unknown field `kubecfg`"), "{err}");
}

#[test]
fn a_wrong_type_is_refused_with_its_line_and_column() {
    let text = edit("    deployer: {kind: existing}", "    deployer: {kind: local, nodes: three}");
    let err = load(&text).unwrap_err();
    assert_eq!(err.location(), at(11, 36), "{err}");
    let message = err.to_string();
    assert!(message.contains("providers[0].deployer.nodes: invalid type: string \"three\", expected u32"), "{message}");
    assert!(message.contains("expected type"), "{message}");
}

#[test]
fn a_version_written_as_a_number_is_still_read_as_text() {
    // YAML's `1.30` is a float, but serde_yaml_ng hands a string field the scalar as written.
    let problem = only_problem(&edit("    kubernetes: [v1.37.1]", "    kubernetes: [1.30]"));
    assert_eq!(problem.location, at(7, 18));
    assert!(problem.problem.to_string().starts_with("`1.30` is not a Kubernetes version"), "{}", problem.problem);
}

#[test]
fn a_missing_field_is_refused_at_its_mapping() {
    let err = load(&edit("    branch: main", "")).unwrap_err();
    assert!(err.to_string().contains("providers[0]: missing field `branch`"), "{err}");
    assert_eq!(err.location().map(|l| l.line), Some(4), "{err}");
}

#[test]
fn broken_yaml_is_refused_with_its_line_and_column() {
    let err = load(&edit("    branch: main", "    branch: main: x")).unwrap_err();
    assert!(matches!(err, ConfigError::Parse { .. }), "{err:?}");
    assert_eq!(err.location(), at(6, 17), "{err}");
    assert!(err.to_string().starts_with("providers.yaml:6:17: mapping values are not allowed"), "{err}");
}

// ---- errors: meaning ----

#[test]
fn an_unknown_capability_is_named_with_the_valid_ones() {
    let text = edit("    capabilities: [instances]", "    capabilities: [instances, load-balancer]");
    let err = load(&text).unwrap_err();
    assert_eq!(err.location(), at(12, 31));
    let message = err.to_string();
    assert!(
        message.starts_with(
            "providers.yaml:12:31: providers[0].capabilities[1]: unknown capability `load-balancer`; \
             the capabilities are: instances, zones, node-shutdown"
        ),
        "{message}"
    );
    assert!(message.contains("load-balancers"), "{message}");
}

#[test]
fn an_unknown_deployer_lists_the_deployers() {
    let problem = only_problem(&edit("    deployer: {kind: existing}", "    deployer:\n      kind: kind3"));
    assert_eq!((problem.path.as_str(), problem.location), ("providers[0].deployer.kind", at(12, 13)));
    assert_eq!(problem.problem.to_string(), "unknown deployer `kind3`; use one of: local, existing, kind, kubetest2");
}

#[test]
fn an_option_of_another_deployer_is_refused_at_its_key() {
    let problem =
        only_problem(&edit("    deployer: {kind: existing}", "    deployer:\n      kind: existing\n      nodes: 3"));
    assert_eq!(problem.location, at(13, 7));
    assert_eq!(
        problem.problem.to_string(),
        "`nodes` is not an option of the `existing` deployer; its options are: kind, kubeconfig"
    );
}

#[test]
fn a_duplicate_provider_is_refused_at_the_second_and_points_at_the_first() {
    let second = BASE.split_once("providers:\n").unwrap().1;
    let text = format!("{BASE}{second}");
    let problem = only_problem(&text);
    assert_eq!((problem.path.as_str(), problem.location), ("providers[1].name", at(14, 11)));
    assert_eq!(
        problem.problem.to_string(),
        "provider `p` is already defined at line 4; give each provider its own name"
    );
}

#[test]
fn a_hook_without_node_is_refused() {
    let hooks = "    hooks:\n      terminate_instance:\n        command: [cloud, delete, instance]";
    let problem = only_problem(&edit("    suites: [cloud-e2e]", &format!("    suites: [cloud-e2e]\n{hooks}")));
    assert_eq!(
        (problem.path.as_str(), problem.location),
        ("providers[0].hooks.terminate_instance.command", at(16, 18))
    );
    assert!(matches!(problem.problem, Problem::HookWithoutNode("terminate_instance")));
    assert!(problem.problem.to_string().contains("`{node}`"), "{}", problem.problem);
}

#[test]
fn node_outside_instance_hooks_and_unknown_placeholders_are_refused() {
    let hooks = "    hooks:\n      list_load_balancers: {command: [lbs, '{node}', '{nod}', '{{literal}}']}";
    let all = problems(&edit("    suites: [cloud-e2e]", &format!("    suites: [cloud-e2e]\n{hooks}")));
    let found: Vec<_> = all.iter().map(|d| (d.path.as_str(), d.location.unwrap().column)).collect();
    assert_eq!(
        found,
        [
            ("providers[0].hooks.list_load_balancers.command[1]", 44),
            ("providers[0].hooks.list_load_balancers.command[2]", 54)
        ]
    );
    assert!(matches!(all[0].problem, Problem::PlaceholderNotHere { placeholder: Placeholder::Node, .. }));
    assert!(matches!(&all[1].problem, Problem::Template(TemplateError::Unknown { name }) if name == "nod"));
}

#[test]
fn a_capability_whose_hook_is_missing_is_refused() {
    let problem = only_problem(&edit("    capabilities: [instances]", "    capabilities: [node-deletion]"));
    assert_eq!(problem.location, at(12, 20));
    assert!(problem.problem.to_string().starts_with("capability `node-deletion` needs `hooks.terminate_instance`"));
}

#[test]
fn an_unknown_suite_required_is_refused_with_the_known_ones() {
    let text = edit(
        "    suites: [cloud-e2e]",
        "    suites: [cloud-e2e]\n    required:\n      suites: [cloud-e2e, conformence]",
    );
    let problem = only_problem(&text);
    assert_eq!((problem.path.as_str(), problem.location), ("providers[0].required.suites[1]", at(15, 27)));
    assert_eq!(
        problem.problem.to_string(),
        "unknown suite `conformence`; the suites are: certified-conformance, cloud-e2e, conformance, conformance-quick, \
         upstream-load-balancers (define more under the top-level `suites:`)"
    );
}

#[test]
fn a_required_suite_that_no_job_runs_is_refused() {
    let text = edit("    suites: [cloud-e2e]", "    suites: [cloud-e2e]\n    required: {suites: [conformance]}");
    let problem = only_problem(&text);
    assert!(matches!(&problem.problem, Problem::RequiredSuiteNotRun(s) if s == "conformance"), "{problem:?}");
}

#[test]
fn a_bad_version_string_says_how_to_write_one() {
    let problem = only_problem(&edit("    kubernetes: [v1.37.1]", "    kubernetes: [v1.37]"));
    assert_eq!(problem.location, at(7, 18));
    assert_eq!(
        problem.problem.to_string(),
        "`v1.37` is not a Kubernetes version (it needs major.minor.patch): write a release like v1.37.1 or \
         v1.38.0-alpha.1, or a CI build's like v1.37.1-3+0123456789abcd"
    );
}

#[test]
fn a_ci_builds_version_is_read_and_written_as_upstream_makes_it() {
    for text in
        ["v1.37.1-3+0123456789abcd", "v1.38.0-alpha.1.234+3f2a6b1c0d9e8f", "v1.37.1-fixture.0.2+abcdefabcdefab-dirty"]
    {
        let version: KubernetesVersion = text.parse().unwrap();
        assert!(version.is_ci_build(), "{text}");
        assert_eq!(version.to_string(), text);
    }
    let version: KubernetesVersion = "v1.37.1-3+0123456789abcd".parse().unwrap();
    assert_eq!(
        (version.minor, version.pre.as_deref(), version.build.as_deref()),
        (37, Some("3"), Some("0123456789abcd"))
    );
    assert!(!"v1.37.1".parse::<KubernetesVersion>().unwrap().is_ci_build());
    for bad in ["v1.37.1+", "v1.37.1-3+abc..d", "v1.37.1-3+abc_d"] {
        assert!(bad.parse::<KubernetesVersion>().is_err(), "{bad}");
    }
}

#[test]
fn the_local_deployer_takes_a_release_it_does_not_embed_and_refuses_manifest_deploys() {
    // v1.38.0-beta.0 is pinned from the Go module proxy when a run needs it, not refused here.
    let text = edit("    deployer: {kind: existing}", "    deployer: {kind: local}")
        .replace("[v1.37.1]", "[v1.38.0-beta.0]")
        .replace("deploy: {kind: process}", "deploy: {kind: manifest, path: ccm.yaml}");
    let all = problems(&text);
    assert!(matches!(all[0].problem, Problem::LocalNeedsProcess("manifest")), "{all:#?}");
    assert_eq!(all.len(), 1, "{all:#?}");
    let config = load(&text.replace("deploy: {kind: manifest, path: ccm.yaml}", "deploy: {kind: process}")).unwrap();
    assert_eq!(config.providers[0].kubernetes[0].to_string(), "v1.38.0-beta.0");
}

#[test]
fn every_problem_is_reported_one_per_line() {
    let text = edit("    capabilities: [instances]", "    capabilities: [lbs]")
        .replace("[v1.37.1]", "[\"1.37\"]")
        .replace("{kind: existing}", "{kind: cluster}");
    let err = load(&text).unwrap_err();
    let lines: Vec<String> = err.to_string().lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(lines[0].starts_with("providers.yaml:7:18: providers[0].kubernetes[0]: `1.37` is not"), "{err}");
    assert!(lines[1].starts_with("providers.yaml:11:22: providers[0].deployer.kind: unknown deployer"), "{err}");
    assert!(lines[2].starts_with("providers.yaml:12:20: providers[0].capabilities[0]: unknown capability"), "{err}");
}

#[test]
fn a_build_command_needs_one_output_and_a_process_deploy_a_binary() {
    let build = "      build: {kind: command, command: [make], manifest: out/ccm.yaml}";
    let problem = only_problem(&edit("      build: {kind: cargo, package: reference-ccm, bin: reference-ccm}", build));
    assert_eq!((problem.path.as_str(), problem.problem), ("providers[0].ccm.deploy.kind", Problem::ProcessNeedsBinary));

    let build = "      build: {kind: command, command: [make]}";
    let problem = only_problem(&edit("      build: {kind: cargo, package: reference-ccm, bin: reference-ccm}", build));
    assert!(matches!(problem.problem, Problem::MissingOption { .. }), "{problem:?}");
    assert_eq!(problem.location, at(9, 14));
}

#[test]
fn suites_of_the_file_are_checked() {
    let suites = "\
suites:
  - {name: conformance, kind: exec, command: [x]}
  - {name: mine, kind: ginkgo, focus: '[unclosed'}
  - {name: lb, kind: exec, command: [], timeout: 5 minutes}
  - {name: mine, kind: cloud-e2e}
  - {name: other, kind: shell}
";
    let all = problems(&format!("{suites}{BASE}"));
    let found: Vec<(&str, Option<Location>)> = all.iter().map(|d| (d.path.as_str(), d.location)).collect();
    assert_eq!(
        found,
        [
            ("suites[0].name", at(2, 12)),
            ("suites[1].focus", at(3, 39)),
            ("suites[2].command", at(4, 37)),
            ("suites[2].timeout", at(4, 50)),
            ("suites[3].name", at(5, 12)),
            ("suites[4].kind", at(6, 25)),
        ]
    );
    assert!(matches!(all[0].problem, Problem::BuiltinSuiteRedefined(_)));
    assert!(matches!(all[1].problem, Problem::BadRegex { .. }));
    assert!(matches!(all[2].problem, Problem::EmptyCommand));
    assert!(matches!(all[3].problem, Problem::BadDuration { .. }));
    assert!(matches!(all[4].problem, Problem::DuplicateSuite { first: validate::AtLine(Some(3)), .. }));
    assert!(matches!(all[5].problem, Problem::UnknownKind { what: "suite kind", .. }));
}

#[test]
fn an_upstream_load_balancers_suite_takes_a_skip_and_parallel_only() {
    let suites = "\
suites:
  - {name: lb-quick, kind: upstream-load-balancers, skip: rolling update, timeout: 30m}
";
    let config = load(&format!("{suites}{BASE}")).unwrap();
    let suite = config.suite("lb-quick").unwrap();
    assert_eq!(
        suite.kind,
        SuiteKind::UpstreamLoadBalancers {
            skip: Some("rolling update".into()),
            parallel: UPSTREAM_LOAD_BALANCERS_PARALLEL
        }
    );
    assert!(suite.kind.runs_e2e_test());
    let built_in = config.suite(UPSTREAM_LOAD_BALANCERS).unwrap();
    assert_eq!(
        built_in.kind,
        SuiteKind::UpstreamLoadBalancers { skip: None, parallel: UPSTREAM_LOAD_BALANCERS_PARALLEL }
    );

    let suites = "\
suites:
  - {name: lb, kind: upstream-load-balancers, focus: TCP, parallel: 0}
";
    let all = problems(&format!("{suites}{BASE}"));
    let found: Vec<&str> = all.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(found, ["suites[0].focus", "suites[0].parallel"], "{all:#?}");
}

#[test]
fn load_balancer_services_give_annotations_and_a_class_with_bad_keys_located() {
    let text = edit(
        "    capabilities: [instances]",
        "    capabilities: [instances]\n    load_balancer_services:\n      annotations: {example.com/tier: gold}\n      udp_annotations: {service.beta.kubernetes.io/aws-load-balancer-type: nlb, example.com/tier: udp}\n      load_balancer_class: example.com/internal",
    );
    let config = load(&text).unwrap();
    let services = &config.providers[0].load_balancer_services;
    assert_eq!(services.load_balancer_class.as_deref(), Some("example.com/internal"));
    let tcp = services.annotations_for(false);
    assert_eq!(tcp.into_iter().collect::<Vec<_>>(), [("example.com/tier".to_owned(), "gold".to_owned())]);
    let udp = services.annotations_for(true);
    assert_eq!(udp["example.com/tier"], "udp", "the UDP ones win");
    assert_eq!(udp["service.beta.kubernetes.io/aws-load-balancer-type"], "nlb");
    assert_eq!(load(BASE).unwrap().providers[0].load_balancer_services, LoadBalancerServices::default());

    let text = edit(
        "    capabilities: [instances]",
        "    capabilities: [instances]\n    load_balancer_services:\n      annotations: {Bad_Prefix/x: y}\n      load_balancer_class: internal-",
    );
    let all = problems(&text);
    let found: Vec<&str> = all.iter().map(|d| d.path.as_str()).collect();
    assert_eq!(
        found,
        [
            "providers[0].load_balancer_services.annotations.Bad_Prefix/x",
            "providers[0].load_balancer_services.load_balancer_class"
        ],
        "{all:#?}"
    );
    assert!(all[0].problem.to_string().contains("DNS subdomain"), "{}", all[0].problem);
}

#[test]
fn defaults_fill_in() {
    let config = load(BASE).unwrap();
    let p = &config.providers[0];
    assert_eq!(p.required.suites, ["cloud-e2e"]);
    assert_eq!(
        p.jobs,
        [JobSpec {
            name: None,
            suites: vec!["cloud-e2e".into()],
            interval: validate::DEFAULT_INTERVAL,
            certification: false
        }]
    );
    assert_eq!(p.testgrid, ProviderTestGrid { dashboard: "cloud-provider-p".into(), num_failures_to_alert: 3 });
    assert_eq!(p.deployer, Deployer::Existing { kubeconfig: None });
    assert_eq!(config.suites.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), BUILTIN_SUITES);
    assert_eq!(config.testgrid.dashboard_group, None);
    assert_eq!(p.kubernetes_version(None).unwrap().to_string(), "v1.37.1");
    assert_eq!(p.kubernetes_version(Some("1.37")).unwrap().to_string(), "v1.37.1");
    assert_eq!(p.kubernetes_version(Some("v1.37.1")).unwrap().to_string(), "v1.37.1");
    assert!(p.kubernetes_version(Some("v1.36")).is_none());
}

#[test]
fn a_bucket_with_a_path_or_another_scheme_is_refused() {
    for (bucket, reason) in [("s3://b", "GCS only"), ("b/logs", "only the bucket"), ("B", "3-222")] {
        let problem = only_problem(&BASE.replace("gcs_bucket: my-logs", &format!("gcs_bucket: {bucket}")));
        assert_eq!(problem.location, at(2, 15));
        assert!(problem.problem.to_string().contains(reason), "{bucket}: {}", problem.problem);
    }
}

// ---- pieces ----

#[test]
fn kubernetes_versions_parse_and_print() {
    for text in ["v1.37.1", "v1.38.0-alpha.1", "v1.36.0-rc.0", "v2.0.10"] {
        assert_eq!(text.parse::<KubernetesVersion>().unwrap().to_string(), text);
    }
    for text in ["1.37.1", "v1.37", "v1.37.x", "v1.037.1", "v1.37.1-", "v1.37.1-al_pha", "latest", "v1.37.1.2"] {
        assert!(text.parse::<KubernetesVersion>().is_err(), "{text}");
    }
    assert_eq!("v1.38.0-alpha.1".parse::<KubernetesVersion>().unwrap().minor_line(), "1.38");
}

#[test]
fn durations_parse_the_go_way() {
    assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
    assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
    assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
    for bad in ["", "5", "5 minutes", "m", "0s", "1d", "-1s"] {
        assert!(parse_duration(bad).is_err(), "{bad}");
    }
    for (duration, text) in [(5400, "1h30m"), (90, "1m30s"), (21600, "6h"), (0, "0s")] {
        assert_eq!(format_duration(Duration::from_secs(duration)), text);
    }
}

#[test]
fn templates_render_and_refuse_bad_braces() {
    let vars: Vars = [(Placeholder::Node, "n1".to_owned())].into();
    assert_eq!(template::render("--node={node} {{x}}", &vars).unwrap(), "--node=n1 {x}");
    assert_eq!(template::render("{cluster}", &vars), Err(TemplateError::Missing(Placeholder::Cluster)));
    assert_eq!(template::placeholders("a {b"), Err(TemplateError::Unclosed { at: 2 }));
    assert_eq!(template::placeholders("a } b"), Err(TemplateError::Unopened { at: 2 }));
    assert!(matches!(template::placeholders("{Node}"), Err(TemplateError::Unknown { .. })));
    assert_eq!(template::placeholders("{node}-{cluster}").unwrap(), [Placeholder::Node, Placeholder::Cluster]);
}

#[test]
fn locate_finds_values_keys_and_sequence_items() {
    let text = "a:\n  b: [x, {c: 1}]\n  d:\n    - e: f\n";
    let root = YamlPath::root();
    assert_eq!(root.key("a").key("b").locate(text), at(2, 6));
    assert_eq!(root.key("a").key("b").index(1).key("c").locate(text), at(2, 14));
    assert_eq!(root.key("a").key("b").index(1).key("c").the_key().locate(text), at(2, 11));
    assert_eq!(root.key("a").key("d").index(0).key("e").locate(text), at(4, 10));
    assert_eq!(root.key("a").key("d").the_key().locate(text), at(3, 3));
    assert_eq!(root.key("a").key("zz").locate(text), None);
    assert_eq!(root.key("a").key("b").index(7).locate(text), None);
    assert_eq!(root.key("a").key("b").index(1).key("c").to_string(), "a.b[1].c");
}

#[test]
fn a_bad_required_test_regex_is_reported_on_one_line() {
    let text = edit(
        "    suites: [cloud-e2e]",
        "    suites: [cloud-e2e]\n    required:\n      tests: [exact name, {regex: '('}]",
    );
    let problem = only_problem(&text);
    assert_eq!((problem.path.as_str(), problem.location), ("providers[0].required.tests[1].regex", at(15, 35)));
    assert_eq!(problem.problem.to_string(), "`(` is not a valid regular expression: unclosed group");
}

#[test]
fn release_branches_are_release_lines_and_existing_prow_jobs_map_to_their_provider() {
    let text = edit(
        "    branch: main",
        "    branch: main\n    branches: [main, release-1.36, release-1.35]\n    prow: {jobs: [ci-p-e2e-latest], repo: o/p}",
    );
    let config = load(&text).unwrap();
    let p = config.provider("p").unwrap();
    let lines: Vec<(String, String)> = p.release_lines();
    assert_eq!(
        lines,
        [
            ("master".into(), "main".into()),
            ("1.36".into(), "release-1.36".into()),
            ("1.35".into(), "release-1.35".into())
        ]
    );
    assert_eq!(config.provider_of_job("ci-p-e2e-latest").map(|p| p.name.as_str()), Some("p"));
    assert_eq!(config.provider_of_job("ci-cloud-provider-p-k8s-1.37").map(|p| p.name.as_str()), Some("p"));
    assert!(config.provider_of_job("ci-other-e2e").is_none());
    assert_eq!(p.prow_repo().as_deref(), Some("o/p"));

    let bad = only_problem(&edit("    branch: main", "    branch: main\n    branches: [feature-x]"));
    assert!(bad.problem.to_string().contains("release-MAJOR.MINOR"), "{bad:?}");
    let bad = only_problem(&edit("    branch: main", "    branch: main\n    prow: {repo: just-a-name}"));
    assert!(bad.problem.to_string().contains("org/repo"), "{bad:?}");
}

#[test]
fn the_flake_policy_gives_bisect_its_runs_per_commit() {
    assert_eq!(load(BASE).unwrap().providers[0].flake_runs, 1, "one run by default");
    let text = edit("    deployer: {kind: existing}", "    deployer: {kind: existing}\n    flake: {runs: 3}");
    assert_eq!(load(&text).unwrap().providers[0].flake_runs, 3);
    let problem =
        only_problem(&edit("    deployer: {kind: existing}", "    deployer: {kind: existing}\n    flake: {runs: 0}"));
    assert_eq!(problem.path, "providers[0].flake.runs");
    assert!(problem.problem.to_string().contains("at least one run"), "{}", problem.problem);
}

#[test]
fn a_suite_retries_failing_tests_only_when_it_says_so_and_never_past_five_attempts() {
    let suites = |body: &str| format!("{BASE}suites:\n{body}");
    let config = load(&suites("  - {name: mine, kind: cloud-e2e, flake_attempts: 3}\n")).unwrap();
    assert_eq!(config.suite("mine").unwrap().flake_attempts, 3);
    assert_eq!(config.suite("cloud-e2e").unwrap().flake_attempts, 1, "built-in suites do not retry");
    let ginkgo = load(&suites("  - {name: g, kind: ginkgo, focus: x, flake_attempts: 2}\n")).unwrap();
    assert_eq!(ginkgo.suite("g").unwrap().flake_attempts, 2);
    let upstream = load(&suites("  - {name: u, kind: upstream-load-balancers, flake_attempts: 2}\n")).unwrap();
    assert_eq!(upstream.suite("u").unwrap().flake_attempts, 2);

    let zero = only_problem(&suites("  - {name: mine, kind: cloud-e2e, flake_attempts: 0}\n"));
    assert_eq!(zero.path, "suites[0].flake_attempts");
    assert_eq!(zero.problem.to_string(), "`flake_attempts` must be at least 1");
    let many = only_problem(&suites("  - {name: mine, kind: cloud-e2e, flake_attempts: 9}\n"));
    assert!(many.problem.to_string().contains("at most 5"), "{}", many.problem);
    // An exec suite's command runs its own tests: the harness cannot retry one of them.
    let exec = only_problem(&suites("  - {name: e, kind: exec, command: [\"true\"], flake_attempts: 2}\n"));
    assert!(
        exec.problem.to_string().starts_with("`flake_attempts` is not an option of a `exec` suite"),
        "{}",
        exec.problem
    );
}

#[test]
fn known_failures_name_a_test_a_reason_and_a_link_and_cover_only_their_suite() {
    let with = |entries: &str| {
        edit("    suites: [cloud-e2e]", &format!("    suites: [cloud-e2e]\n    known_failures:\n{entries}"))
    };
    let text = with(
        "      - {test: '[cloud-e2e] routes', reason: 'no routes on this cloud yet', link: 'https://github.com/o/p/issues/7'}
      - {test: {regex: 'Services .* affinity'}, suite: cloud-e2e, reason: 'kube-proxy bug', link: 'https://github.com/o/p/issues/8'}",
    );
    let provider = load(&text).unwrap().providers.remove(0);
    assert_eq!(provider.known_failures.len(), 2);
    let routes = provider.known_failure("conformance", "[cloud-e2e] routes").expect("any suite");
    assert_eq!(
        (routes.reason.as_str(), routes.link.as_str()),
        ("no routes on this cloud yet", "https://github.com/o/p/issues/7")
    );
    assert!(provider.known_failure("cloud-e2e", "Services keep affinity").is_some());
    assert!(provider.known_failure("conformance", "Services keep affinity").is_none(), "only in its suite");
    assert!(provider.known_failure("cloud-e2e", "[cloud-e2e] routes again").is_none(), "a name matches whole");
    assert!(matches!(&provider.known_failures[1].test, TestMatcher::Regex(r) if r.as_str() == "Services .* affinity"));
    assert!(load(BASE).unwrap().providers[0].known_failures.is_empty());

    let all = problems(&with(
        "      - {test: '', suite: conformance, reason: ' ', link: 'github.com/o/p/issues/7'}
      - {test: {regex: '('}, reason: r, link: 'https://x'}",
    ));
    let paths: Vec<&str> = all.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "providers[0].known_failures[0].test",
            "providers[0].known_failures[0].suite",
            "providers[0].known_failures[0].reason",
            "providers[0].known_failures[0].link",
            "providers[0].known_failures[1].test.regex",
        ],
        "{all:#?}"
    );
    assert!(all[3].problem.to_string().contains("http(s) address of the issue"), "{}", all[3].problem);
    assert!(all[1].problem.to_string().contains("it runs cloud-e2e"), "{}", all[1].problem);
    assert_eq!(all[3].location, at(15, 59), "the value, on its line: {:?}", all[3]);
    let certified =
        only_problem(&with("      - {test: t, suite: certified-conformance, reason: r, link: 'https://x'}"));
    assert!(
        certified.problem.to_string().contains("certification takes every conformance test"),
        "{}",
        certified.problem
    );
}

// ---- certification ----

const CERTIFICATION: &str = "    certification:
      vendor: Example
      name: Example Kubernetes
      version: 1.0
      website_url: https://example.org/
      documentation_url: https://example.org/docs
      type: distribution
      description: A distribution.
      contact_email_address: kube@example.org
";

#[test]
fn a_certification_block_becomes_the_product() {
    let config = load(&format!("{BASE}{CERTIFICATION}")).unwrap();
    let product = config.provider("p").unwrap().certification.clone().unwrap();
    // Read as the string it was written as, and written to PRODUCT.yaml as one.
    assert_eq!(product.version, "1.0");
    assert_eq!(product.folder(), "example-kubernetes");
    let bundled = ProvidersConfig::bundled();
    let local = bundled.provider("local").unwrap().certification.clone().expect("local certifies this project");
    assert_eq!(local.version, "{provider_version}");
    assert_eq!(local.problems(), []);
}

#[test]
fn a_bad_certification_field_is_refused_at_its_line() {
    let text = format!("{BASE}{}", CERTIFICATION.replace("type: distribution", "type: platform"));
    let problem = only_problem(&text);
    assert_eq!(problem.location, at(20, 13), "{problem:?}");
    assert_eq!(
        problem.problem.to_string(),
        "certification `type` `platform` is not one of: distribution, hosted platform, installer"
    );
    let text = format!("{BASE}{}", CERTIFICATION.replace("kube@example.org", "kube at example"));
    let problem = only_problem(&text);
    assert_eq!(problem.location, at(22, 30), "{problem:?}");
    assert!(
        problem
            .problem
            .to_string()
            .starts_with("certification `contact_email_address` `kube at example` is not an e-mail address"),
        "{problem:?}"
    );
    let text = format!("{BASE}{}", CERTIFICATION.replace("https://example.org/docs", "docs/"));
    assert_eq!(only_problem(&text).location, at(19, 26));
}

#[test]
fn a_missing_certification_field_is_refused_by_name() {
    let text = format!("{BASE}{}", CERTIFICATION.replace("      description: A distribution.\n", ""));
    let err = load(&text).unwrap_err();
    assert!(err.to_string().contains("missing field `description`"), "{err}");
    assert_eq!(err.location().map(|l| l.line), Some(15), "{err}");
}

#[test]
fn certification_placeholders_are_the_two_versions_only() {
    let text = format!("{BASE}{}", CERTIFICATION.replace("version: 1.0", "version: \"{provider_version}-{cluster}\""));
    let problem = only_problem(&text);
    assert_eq!(problem.location, at(17, 16));
    assert!(
        problem.problem.to_string().contains("PRODUCT.yaml takes only {provider_version} and {kubernetes_version}"),
        "{problem:?}"
    );
    let fine = format!("{BASE}{}", CERTIFICATION.replace("version: 1.0", "version: \"{provider_version}\""));
    assert!(load(&fine).is_ok());
}

#[test]
fn the_certified_suite_needs_a_certification_block() {
    let problem = only_problem(&edit("    suites: [cloud-e2e]", "    suites: [cloud-e2e, certified-conformance]"));
    assert_eq!(problem.location, at(13, 25));
    assert!(problem.problem.to_string().contains("has no `certification:` block"), "{problem:?}");
    let config = load(BASE).unwrap();
    let suite = config.suite(CERTIFIED_CONFORMANCE).unwrap();
    assert_eq!(suite.kind, SuiteKind::CertifiedConformance { parallel: CERTIFIED_CONFORMANCE_PARALLEL });
}

#[test]
fn a_certification_block_adds_a_certification_job_on_every_release_line() {
    let text = format!("{}{CERTIFICATION}", edit("    kubernetes: [v1.37.1]", "    kubernetes: [v1.37.1, v1.36.4]"));
    let config = load(&text).unwrap();
    let cells: Vec<_> =
        config.cells().into_iter().map(|c| (c.name.clone(), c.suites().to_vec(), c.interval())).collect();
    let certified = |line: &str| {
        (
            format!("ci-cloud-provider-p-certified-conformance-k8s-{line}"),
            vec![CERTIFIED_CONFORMANCE.to_owned()],
            CERTIFICATION_INTERVAL,
        )
    };
    let default = |line: &str| {
        (format!("ci-cloud-provider-p-k8s-{line}"), vec!["cloud-e2e".to_owned()], validate::DEFAULT_INTERVAL)
    };
    assert_eq!(cells, [default("1.37"), certified("1.37"), default("1.36"), certified("1.36")]);
    // Without the block, no such job.
    assert_eq!(load(BASE).unwrap().cells().len(), 1);
}

#[test]
fn the_certified_suite_listed_beside_a_certification_block_is_refused_as_its_own_job() {
    let text =
        format!("{}{CERTIFICATION}", edit("    suites: [cloud-e2e]", "    suites: [cloud-e2e, certified-conformance]"));
    let problem = only_problem(&text);
    assert_eq!(problem.location, at(13, 25));
    assert_eq!(
        problem.problem.to_string(),
        "suite `certified-conformance` runs in a job of its own, which the `certification:` block adds on every \
         Kubernetes release line (`ci-cloud-provider-p-certified-conformance-k8s-<minor>`): remove it here"
    );
}

#[test]
fn a_certification_job_name_too_long_for_prow_is_refused_at_the_block() {
    let long = "a-provider-name-of-20";
    let text = format!("{}{CERTIFICATION}", BASE.replace("name: p\n", &format!("name: {long}\n")));
    let problem = only_problem(&text);
    assert_eq!(problem.path, "providers[0].certification");
    assert!(
        matches!(&problem.problem, Problem::JobNameTooLong { job, len: 70 }
            if job == &format!("ci-cloud-provider-{long}-certified-conformance-k8s-1.37")),
        "{problem:?}"
    );
}

#[test]
fn a_provider_entry_is_its_text_as_written() {
    let text = format!("{BASE}{CERTIFICATION}  # the next one\n  - name: q\n    repo: x\ntestgrid_after: 1\n");
    let entry = provider_entry(&text, "p").unwrap();
    assert!(entry.starts_with("  - name: p\n    repo: https://github.com/o/p\n"), "{entry}");
    assert!(entry.ends_with("      contact_email_address: kube@example.org\n"), "{entry}");
    assert_eq!(provider_entry(&text, "q"), Some("  - name: q\n    repo: x\n"));
    assert_eq!(provider_entry(&text, "nope"), None);
    let local = provider_entry(BUNDLED, "local").unwrap();
    assert!(local.contains("certification:") && !local.contains("name: local-upstream"), "{local}");
}

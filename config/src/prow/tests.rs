use std::path::Path;

use serde_yaml_ng::Value;

use super::*;

/// Three providers: `a` splits its suites over two jobs and has its own dashboard; `b` and `c` share
/// one; `c` alerts at TestGrid's default (0). Listed out of name order on purpose.
const MATRIX: &str = "\
testgrid:
  gcs_bucket: my-logs
providers:
  - name: c
    repo: https://github.com/o/c
    branch: main
    kubernetes: [v1.37.1]
    ccm:
      build: {kind: cargo, package: reference-ccm, bin: reference-ccm}
      deploy: {kind: process}
    deployer: {kind: existing}
    capabilities: [instances]
    suites: [cloud-e2e]
    testgrid: {dashboard: shared, num_failures_to_alert: 0}
  - name: a
    repo: https://github.com/o/a
    branch: main
    kubernetes: [v1.37.1, v1.36.4]
    ccm:
      build: {kind: cargo, package: reference-ccm, bin: reference-ccm, timeout: 10m}
      deploy: {kind: process, timeout: 1m}
    deployer: {kind: existing}
    capabilities: [instances]
    suites: [cloud-e2e, conformance]
    interval: 12h
    jobs:
      - {name: e2e, suites: [cloud-e2e], interval: 2h}
      - {name: conformance, suites: [conformance]}
  - name: b
    repo: https://github.com/o/b
    branch: main
    kubernetes: [v1.36.4]
    ccm:
      build: {kind: cargo, package: reference-ccm, bin: reference-ccm}
      deploy: {kind: process}
    deployer: {kind: existing}
    capabilities: [instances]
    suites: [cloud-e2e]
    testgrid: {dashboard: shared, num_failures_to_alert: 5}
";

fn matrix() -> ProvidersConfig {
    ProvidersConfig::parse(MATRIX, Path::new("providers.yaml")).expect("MATRIX is valid")
}

fn job<'a>(config: &'a ProwConfig, name: &str) -> &'a Periodic {
    config.periodics.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("no job {name}"))
}

fn keys(value: &Value) -> Vec<&str> {
    value.as_mapping().expect("a mapping").keys().map(|k| k.as_str().expect("string keys")).collect()
}

fn strings(map: &[(&str, &str)]) -> BTreeMap<String, String> {
    map.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn bundled_config_gives_one_periodic_per_cell_with_prows_field_names() {
    let config = ProvidersConfig::bundled();
    let yaml = prow_yaml(&config, &ProwOptions::default());
    assert!(yaml.starts_with("# Prow jobs of"), "{yaml}");

    let doc: Value = serde_yaml_ng::from_str(&yaml).unwrap();
    assert_eq!(keys(&doc), ["periodics"]);
    let periodics = doc["periodics"].as_sequence().unwrap();
    let names: Vec<&str> = periodics.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "ci-cloud-provider-aws-k8s-1.36",
            "ci-cloud-provider-aws-k8s-1.37",
            "ci-cloud-provider-local-certified-conformance-k8s-1.36",
            "ci-cloud-provider-local-certified-conformance-k8s-1.37",
            "ci-cloud-provider-local-k8s-1.36",
            "ci-cloud-provider-local-k8s-1.37",
            "ci-cloud-provider-local-load-balancers-k8s-1.36",
            "ci-cloud-provider-local-load-balancers-k8s-1.37",
            "ci-cloud-provider-local-upstream-k8s-1.36",
            "ci-cloud-provider-local-upstream-k8s-1.37",
            "ci-cloud-provider-local-upstream-load-balancers-k8s-1.36",
            "ci-cloud-provider-local-upstream-load-balancers-k8s-1.37",
            "ci-cloud-provider-openstack-k8s-1.36",
            "ci-cloud-provider-openstack-k8s-1.37",
            "ci-cloud-provider-vsphere-k8s-1.36",
            "ci-cloud-provider-vsphere-k8s-1.37"
        ]
    );
    assert_eq!(periodics.len(), config.cells().len());

    // The certification job: certified-conformance alone, daily, on the conformance dashboard.
    let certified = periodics.iter().find(|p| p["name"] == "ci-cloud-provider-local-certified-conformance-k8s-1.37");
    let certified = certified.unwrap();
    assert_eq!(certified["interval"], "24h");
    assert_eq!(certified["annotations"]["testgrid-dashboards"], "conformance-cloud-provider-local");
    assert_eq!(certified["annotations"]["testgrid-tab-name"], "certified-conformance-k8s-1.37");
    let args: Vec<&str> =
        certified["spec"]["containers"][0]["args"].as_sequence().unwrap().iter().filter_map(Value::as_str).collect();
    let suites = args.iter().position(|a| *a == "--suites").unwrap();
    assert_eq!(args[suites + 1], "certified-conformance");

    let job = periodics.iter().find(|p| p["name"] == "ci-cloud-provider-local-k8s-1.37").unwrap();
    assert_eq!(
        keys(job),
        ["name", "interval", "cluster", "decorate", "decoration_config", "extra_refs", "annotations", "spec"]
    );
    assert_eq!(job["interval"], "6h");
    assert_eq!(job["cluster"], "default");
    assert_eq!(job["decorate"], Value::Bool(true));
    assert_eq!(keys(&job["decoration_config"]), ["timeout"]);
    // cloud-e2e 30m + conformance-quick 60m + cargo build 30m + deploy 2m + run slack 15m, then
    // teardown slack 15m for Prow.
    assert_eq!(job["decoration_config"]["timeout"], "2h32m");

    let refs = job["extra_refs"].as_sequence().unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(keys(&refs[0]), ["org", "repo", "base_ref", "workdir"]);
    assert_eq!(refs[0]["org"], "cloud-provider-harness");
    assert_eq!(refs[0]["repo"], "cloud-provider-harness");
    assert_eq!(refs[0]["base_ref"], "main");
    assert_eq!(refs[0]["workdir"], Value::Bool(true));

    assert_eq!(
        keys(&job["annotations"]),
        ["description", "testgrid-dashboards", "testgrid-num-failures-to-alert", "testgrid-tab-name"]
    );
    assert_eq!(job["annotations"]["testgrid-dashboards"], "cloud-provider-local");
    assert_eq!(job["annotations"]["testgrid-tab-name"], "k8s-1.37");
    // A string, as Prow's map[string]string needs: quoted in the YAML.
    assert_eq!(job["annotations"]["testgrid-num-failures-to-alert"], Value::String("3".into()));
    assert!(yaml.contains("testgrid-num-failures-to-alert: '3'"), "{yaml}");
    assert_eq!(
        job["annotations"]["description"],
        "cloud-provider-harness: suites cloud-e2e, conformance-quick of provider local on Kubernetes v1.37.1, every 6h"
    );

    // Real nodes nested in the pod keep their clusters in an emptyDir (not on the overlay root).
    assert_eq!(keys(&job["spec"]), ["containers", "volumes"]);
    assert_eq!(job["spec"]["volumes"][0]["name"], "harness-state");
    assert!(job["spec"]["volumes"][0]["emptyDir"].is_mapping(), "{yaml}");
    let containers = job["spec"]["containers"].as_sequence().unwrap();
    assert_eq!(containers.len(), 1);
    let container = &containers[0];
    assert_eq!(keys(container), ["image", "command", "args", "env", "resources", "securityContext", "volumeMounts"]);
    assert_eq!(container["env"][0]["name"], "HARNESS_STATE_DIR");
    assert_eq!(container["volumeMounts"][0]["mountPath"], container["env"][0]["value"]);
    assert_eq!(container["volumeMounts"][0]["name"], "harness-state");
    assert_eq!(container["image"], format!("{IMAGE_REPOSITORY}:v{}", env!("CARGO_PKG_VERSION")), "never :latest");
    assert_eq!(container["command"], serde_yaml_ng::to_value(["harness"]).unwrap());
    let args: Vec<&str> = container["args"].as_sequence().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    assert_eq!(
        args,
        [
            "run",
            "--provider",
            "local",
            "--kubernetes",
            "v1.37.1",
            "--suites",
            "cloud-e2e,conformance-quick",
            "--job",
            "$(JOB_NAME)",
            "--build-id",
            "$(BUILD_ID)",
            "--artifacts",
            "$(ARTIFACTS)",
            "--timeout",
            "2h17m"
        ]
    );
    assert_eq!(keys(&container["resources"]), ["requests", "limits"]);
    assert_eq!(container["resources"]["requests"]["cpu"], Value::String("4".into()));
    assert_eq!(container["resources"]["limits"]["memory"], "8Gi");

    // Real nodes need a privileged container (namespaces, cgroups, mounts); kwok nodes do not.
    for (name, privileged) in [
        ("ci-cloud-provider-local-k8s-1.37", true),
        ("ci-cloud-provider-vsphere-k8s-1.37", true),
        ("ci-cloud-provider-openstack-k8s-1.36", true),
        ("ci-cloud-provider-aws-k8s-1.37", false),
    ] {
        let job = periodics.iter().find(|p| p["name"] == name).unwrap();
        let context = &job["spec"]["containers"][0]["securityContext"];
        assert_eq!(context["privileged"].as_bool().unwrap_or(false), privileged, "{name}: {context:?}");
    }
}

#[test]
fn yaml_parses_back_to_the_jobs() {
    let config = matrix();
    let opts = ProwOptions { alert_email: Some("team@example.com".into()), ..ProwOptions::default() };
    let parsed: ProwConfig = serde_yaml_ng::from_str(&prow_yaml(&config, &opts)).unwrap();
    assert_eq!(parsed, prow_jobs(&config, &opts));
}

#[test]
fn every_cell_is_one_job_sorted_by_name() {
    let config = matrix();
    let jobs = prow_jobs(&config, &ProwOptions::default());
    let names: Vec<&str> = jobs.periodics.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "ci-cloud-provider-a-conformance-k8s-1.36",
            "ci-cloud-provider-a-conformance-k8s-1.37",
            "ci-cloud-provider-a-e2e-k8s-1.36",
            "ci-cloud-provider-a-e2e-k8s-1.37",
            "ci-cloud-provider-b-k8s-1.36",
            "ci-cloud-provider-c-k8s-1.37",
        ]
    );
    let mut cell_names: Vec<String> = config.cells().into_iter().map(|c| c.name).collect();
    cell_names.sort();
    assert_eq!(names, cell_names);

    // Each job runs its own cell: suites, version and interval.
    let e2e = job(&jobs, "ci-cloud-provider-a-e2e-k8s-1.36");
    assert_eq!(e2e.interval, "2h");
    let args = &e2e.job.spec.containers[0].args;
    assert_eq!(args[1..7], ["--provider", "a", "--kubernetes", "v1.36.4", "--suites", "cloud-e2e"]);
    let conformance = job(&jobs, "ci-cloud-provider-a-conformance-k8s-1.37");
    assert_eq!(conformance.interval, "12h");
    assert_eq!(
        conformance.job.spec.containers[0].args[1..7],
        ["--provider", "a", "--kubernetes", "v1.37.1", "--suites", "conformance"]
    );
    // conformance 180m + build 10m + deploy 1m + run slack 15m; Prow's 15m more.
    assert_eq!(conformance.job.spec.containers[0].args[13..], ["--timeout", "3h26m"]);
    assert_eq!(conformance.job.decoration_config.timeout, "3h41m");
    // cloud-e2e 30m + default build 30m + default deploy 5m + run slack 15m; Prow's 15m more.
    let b = job(&jobs, "ci-cloud-provider-b-k8s-1.36");
    assert_eq!(b.job.spec.containers[0].args[13..], ["--timeout", "1h20m"]);
    assert_eq!(b.job.decoration_config.timeout, "1h35m");
}

#[test]
fn a_kubernetes_branch_is_one_job_per_provider_and_job_cloning_kubernetes_at_its_path_alias() {
    let opts = ProwOptions { kubernetes_ref: Some("master".into()), ..ProwOptions::default() };
    let jobs = prow_jobs(&matrix(), &opts);
    let names: Vec<&str> = jobs.periodics.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "ci-cloud-provider-a-conformance-k8s-master",
            "ci-cloud-provider-a-e2e-k8s-master",
            "ci-cloud-provider-b-k8s-master",
            "ci-cloud-provider-c-k8s-master",
        ]
    );
    let e2e = job(&jobs, "ci-cloud-provider-a-e2e-k8s-master");
    let kubernetes = Refs {
        org: "kubernetes".into(),
        repo: "kubernetes".into(),
        base_ref: "master".into(),
        path_alias: Some("k8s.io/kubernetes".into()),
        workdir: false,
        clone_uri: None,
    };
    assert_eq!(e2e.job.extra_refs.len(), 2);
    assert!(e2e.job.extra_refs[0].workdir, "the job still starts in the harness' checkout");
    assert_eq!(e2e.job.extra_refs[1], kubernetes);
    let args = &e2e.job.spec.containers[0].args;
    assert_eq!(
        args[1..7],
        ["--provider", "a", "--kubernetes-source", "/home/prow/go/src/k8s.io/kubernetes", "--suites", "cloud-e2e"]
    );
    // Its own suites and interval: the newest minor's job's.
    assert_eq!(e2e.interval, "2h");
}

#[test]
fn output_does_not_depend_on_provider_order() {
    let config = matrix();
    let mut reversed = config.clone();
    reversed.providers.reverse();
    let opts = ProwOptions::default();
    assert_eq!(prow_yaml(&config, &opts), prow_yaml(&reversed, &opts));
    assert_eq!(prow_yaml(&config, &opts), prow_yaml(&matrix(), &opts));
}

#[test]
fn testgrid_annotations_follow_each_providers_dashboard() {
    let jobs = prow_jobs(&matrix(), &ProwOptions::default());

    // Its own dashboard: the tab drops the provider's name.
    let a = &job(&jobs, "ci-cloud-provider-a-e2e-k8s-1.37").job.annotations;
    assert_eq!(a["testgrid-dashboards"], "cloud-provider-a");
    assert_eq!(a["testgrid-tab-name"], "e2e-k8s-1.37");
    assert_eq!(a["testgrid-num-failures-to-alert"], "3");
    assert!(!a.contains_key("testgrid-alert-email"));

    // A shared dashboard: the tab keeps it, so tabs of different providers cannot clash.
    let b = &job(&jobs, "ci-cloud-provider-b-k8s-1.36").job.annotations;
    assert_eq!(b["testgrid-dashboards"], "shared");
    assert_eq!(b["testgrid-tab-name"], "b-k8s-1.36");
    assert_eq!(b["testgrid-num-failures-to-alert"], "5");
    let c = &job(&jobs, "ci-cloud-provider-c-k8s-1.37").job.annotations;
    assert_eq!(c["testgrid-tab-name"], "c-k8s-1.37");
    // 0: TestGrid's default, so no annotation.
    assert!(!c.contains_key("testgrid-num-failures-to-alert"));

    // Tab names are unique per dashboard.
    let mut tabs = BTreeSet::new();
    for periodic in &jobs.periodics {
        let tab = (&periodic.job.annotations["testgrid-dashboards"], &periodic.job.annotations["testgrid-tab-name"]);
        assert!(tabs.insert(tab), "duplicate tab {tab:?}");
    }
}

#[test]
fn alert_email_only_when_configured() {
    let config = matrix();
    for blank in [None, Some(""), Some("  ")] {
        let opts = ProwOptions { alert_email: blank.map(str::to_owned), ..ProwOptions::default() };
        assert!(
            prow_jobs(&config, &opts).periodics.iter().all(|p| !p.job.annotations.contains_key("testgrid-alert-email"))
        );
        assert!(!prow_yaml(&config, &opts).contains("testgrid-alert-email"));
    }
    let opts = ProwOptions { alert_email: Some("cloud-team@example.com".into()), ..ProwOptions::default() };
    for periodic in prow_jobs(&config, &opts).periodics {
        assert_eq!(periodic.job.annotations["testgrid-alert-email"], "cloud-team@example.com");
    }
}

#[test]
fn options_reach_every_job() {
    let opts = ProwOptions {
        image: "registry.example/harness:v1".into(),
        cluster: "build-eks".into(),
        repo: "https://github.com/me/my-harness.git".parse().unwrap(),
        base_ref: "release-1".into(),
        path_alias: Some("example.com/harness".into()),
        timeout: Some(Duration::from_secs(5400)),
        config_path: Some("ci/providers.yaml".into()),
        alert_email: None,
        labels: strings(&[("preset-service-account", "true")]),
        env: strings(&[("RUST_LOG", "debug"), ("HARNESS_CACHE_DIR", "/cache")]),
        resources: ResourceRequirements { requests: strings(&[("cpu", "2")]), limits: BTreeMap::new() },
        clone_uri: Some("https://git.example/mirror/my-harness.git".into()),
        ..ProwOptions::default()
    };
    let config = ProvidersConfig::bundled();
    let jobs = prow_jobs(&config, &opts);
    assert_eq!(jobs.periodics.len(), 16);
    // `local`'s jobs (`local-upstream` runs cloud-e2e alone, with a toolchain build: other timeouts).
    let local: Vec<_> = jobs.periodics.iter().filter(|p| p.name.starts_with("ci-cloud-provider-local-k8s-")).collect();
    assert_eq!(local.len(), 2);
    for periodic in local {
        assert_eq!(periodic.job.cluster, "build-eks");
        assert_eq!(periodic.job.decoration_config.timeout, "1h30m");
        assert_eq!(periodic.job.labels, opts.labels);
        assert_eq!(
            periodic.job.extra_refs,
            [Refs {
                org: "me".into(),
                repo: "my-harness".into(),
                base_ref: "release-1".into(),
                path_alias: Some("example.com/harness".into()),
                workdir: true,
                clone_uri: opts.clone_uri.clone(),
            }]
        );
        let container = &periodic.job.spec.containers[0];
        assert_eq!(container.image, "registry.example/harness:v1");
        assert_eq!(container.args[..3], ["run", "--config", "ci/providers.yaml"]);
        // Prow's timeout less the teardown slack.
        assert_eq!(container.args[container.args.len() - 2..], ["--timeout", "1h15m"]);
        // Sorted by name.
        let env: Vec<(&str, &str)> = container.env.iter().map(|e| (e.name.as_str(), e.value.as_str())).collect();
        if container.security_context.is_some() {
            let state = ("HARNESS_STATE_DIR", NESTED_STATE_DIR);
            assert_eq!(env, [("HARNESS_CACHE_DIR", "/cache"), state, ("RUST_LOG", "debug")]);
        } else {
            assert_eq!(env, [("HARNESS_CACHE_DIR", "/cache"), ("RUST_LOG", "debug")]);
        }
        assert_eq!(container.resources, opts.resources);
    }

    let doc: Value = serde_yaml_ng::from_str(&prow_yaml(&config, &opts)).unwrap();
    let job = &doc["periodics"][0];
    assert_eq!(keys(job)[6], "labels");
    assert_eq!(keys(&job["extra_refs"][0]), ["org", "repo", "base_ref", "path_alias", "workdir", "clone_uri"]);
    assert_eq!(keys(&job["spec"]["containers"][0]), ["image", "command", "args", "env", "resources"]);
    assert_eq!(keys(&job["spec"]["containers"][0]["env"][0]), ["name", "value"]);
    assert_eq!(keys(&job["spec"]["containers"][0]["resources"]), ["requests"]);
}

#[test]
fn repo_refs_parse() {
    for text in ["o/r", "https://github.com/o/r", "https://github.com/o/r.git", "https://github.com/o/r/", " o/r "] {
        assert_eq!(text.parse::<RepoRef>(), Ok(RepoRef { org: "o".into(), repo: "r".into() }), "{text}");
    }
    assert_eq!(DEFAULT_REPO.parse::<RepoRef>().unwrap().to_string(), DEFAULT_REPO);
    for bad in ["", "o", "o/", "/r", "o/r/x", "https://gitlab.com/o/r", "o r/x"] {
        let error = bad.parse::<RepoRef>().unwrap_err();
        assert!(error.contains("org/repo"), "{bad}: {error}");
    }
}

#[test]
fn tab_names_fall_back_to_the_job_name() {
    let config = ProvidersConfig::bundled();
    let mut cell = config.cells().remove(0);
    cell.name = "periodic-something-else".into();
    assert_eq!(tab_name(&cell, &BTreeSet::new()), "periodic-something-else");
}

#[test]
fn harness_stops_before_prow_does() {
    for (prow, run) in [(150, 135), (20, 10), (0, 0)] {
        let timeouts = Timeouts::from_prow(Duration::from_secs(prow * 60));
        assert_eq!(timeouts, Timeouts { run: Duration::from_secs(run * 60), prow: Duration::from_secs(prow * 60) });
    }
    let config = matrix();
    for cell in config.cells() {
        let timeouts = Timeouts::for_cell(&config, &cell);
        assert_eq!(timeouts.prow, timeouts.run + TEARDOWN_SLACK, "{}", cell.name);
        assert_eq!(Timeouts::of(&config, &cell, &ProwOptions::default()), timeouts);
    }
}

#[test]
fn skipping_clones_reads_the_images_providers_file_and_clones_nothing() {
    let opts = ProwOptions { skip_cloning: true, ..ProwOptions::default() };
    let jobs = prow_jobs(&matrix(), &opts);
    for periodic in &jobs.periodics {
        assert_eq!(periodic.job.decoration_config.skip_cloning, Some(true));
        assert!(periodic.job.extra_refs.is_empty(), "{}: nothing to clone", periodic.name);
        assert_eq!(periodic.job.spec.containers[0].args[..3], ["run", "--config", IMAGE_PROVIDERS_FILE]);
    }
    let named = ProwOptions { config_path: Some("/etc/mine.yaml".into()), ..opts };
    let jobs = prow_jobs(&matrix(), &named);
    assert_eq!(jobs.periodics[0].job.spec.containers[0].args[..3], ["run", "--config", "/etc/mine.yaml"]);
    let cloned = prow_jobs(&matrix(), &ProwOptions::default());
    assert_eq!(cloned.periodics[0].job.decoration_config.skip_cloning, None, "Prow's default unless asked");
    assert!(
        !cloned.periodics[0].job.spec.containers[0].args.contains(&"--config".to_owned()),
        "./providers.yaml of the checkout"
    );
}

#[test]
fn decoration_fields_reach_every_job_beside_its_timeout() {
    let decoration: BTreeMap<String, Value> =
        serde_yaml_ng::from_str("gcs_configuration: {bucket: my-bucket, path_strategy: explicit}\ngrace_period: 30s\n")
            .unwrap();
    let opts = ProwOptions { decoration: decoration.clone(), ..ProwOptions::default() };
    let doc: Value = serde_yaml_ng::from_str(&prow_jobs(&matrix(), &opts).to_yaml()).unwrap();
    for job in doc["periodics"].as_sequence().unwrap() {
        let config = &job["decoration_config"];
        assert_eq!(keys(config), ["timeout", "gcs_configuration", "grace_period"]);
        assert_eq!(config["gcs_configuration"]["bucket"], "my-bucket");
        assert_eq!(config["grace_period"], "30s");
    }
}

#[test]
fn postsubmits_run_each_push_to_a_providers_branch_on_its_newest_minor() {
    let opts = ProwOptions { postsubmits: true, ..ProwOptions::default() };
    let jobs = prow_jobs(&matrix(), &opts);
    let repos: Vec<&str> = jobs.postsubmits.keys().map(String::as_str).collect();
    assert_eq!(repos, ["o/a", "o/b", "o/c"]);
    let names: Vec<&str> = jobs.postsubmits["o/a"].iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        ["post-cloud-provider-a-conformance-k8s-1.37", "post-cloud-provider-a-e2e-k8s-1.37"],
        "1.37, not 1.36"
    );
    let post = &jobs.postsubmits["o/a"][1];
    assert_eq!(post.branches, ["^main$"]);
    assert_eq!(post.job.annotations["testgrid-tab-name"], "post-e2e-k8s-1.37");
    assert!(post.job.extra_refs[0].workdir, "the job starts in the harness's checkout");
    let args = &post.job.spec.containers[0].args;
    let tail: Vec<&str> = args[args.len() - 4..].iter().map(String::as_str).collect();
    assert_eq!(tail, ["--provider-dir", "/home/prow/go/src/github.com/o/a", "--provider-version", "$(PULL_BASE_SHA)"]);
    assert!(args.windows(2).any(|w| w == ["--kubernetes", "v1.37.1"]), "{args:?}");
    let periodic = job(&jobs, "ci-cloud-provider-a-e2e-k8s-1.37");
    assert_eq!(post.job.spec.containers[0].args[..args.len() - 4], periodic.job.spec.containers[0].args[..]);
    assert!(prow_jobs(&matrix(), &ProwOptions::default()).postsubmits.is_empty(), "only when asked");

    // A provider in the harness's own repository: its pushes are the harness's checkout, cloned once.
    let bundled = prow_jobs(&ProvidersConfig::bundled(), &opts);
    let own = &bundled.postsubmits[DEFAULT_REPO];
    assert!(own.iter().any(|p| p.name == "post-cloud-provider-local-k8s-1.37"), "{own:#?}");
    assert!(own.iter().all(|p| p.job.extra_refs.is_empty()), "{own:#?}");
}

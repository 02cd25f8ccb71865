//! Prow accepts the periodic jobs `harness prow-config` generates: Prow's own config checker
//! (`sigs.k8s.io/prow/cmd/checkconfig`, built from `tools/prow`) loads a minimal
//! Prow `config.yaml` with our job config, strictly: every warning is an error, unknown fields
//! anywhere in a job (pod spec included) are reported, decoration must be complete, and the TestGrid
//! annotations are required. And it rejects jobs broken on purpose, so a pass means something.

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::process::Command;

use common::go_tools::{go_tool, repo_root};
use config::ProvidersConfig;
use config::prow::{ProwConfig, ProwOptions, prow_jobs, prow_yaml};

/// A minimal Prow config under which `decorate: true` validates: namespaces, and default decoration
/// (utility images, GCS upload with the layout TestGrid reads: `<bucket>/logs/<job>/<build>`).
/// checkconfig only checks that the utility images are named.
const PROW_CONFIG: &str = "\
prowjob_namespace: prow
pod_namespace: test-pods
plank:
  job_url_prefix_config:
    '*': https://prow.example.com/view/
  default_decoration_config_entries:
    - config:
        timeout: 2h
        grace_period: 15s
        utility_images:
          clonerefs: us-docker.pkg.dev/k8s-infra-prow/images/clonerefs:v20250307-7a867cddc
          initupload: us-docker.pkg.dev/k8s-infra-prow/images/initupload:v20250307-7a867cddc
          entrypoint: us-docker.pkg.dev/k8s-infra-prow/images/entrypoint:v20250307-7a867cddc
          sidecar: us-docker.pkg.dev/k8s-infra-prow/images/sidecar:v20250307-7a867cddc
        gcs_configuration:
          bucket: kubernetes-ci-logs
          path_strategy: explicit
        gcs_credentials_secret: gcs-credentials
";

/// checkconfig's flags after `--config-path` and `--job-config-path`: warnings are errors; the default
/// warnings plus a complete decoration config and unknown fields in job configs too; and the TestGrid
/// annotations every job must have.
const STRICT: [&str; 7] = [
    "--strict",
    "--include-default-warnings",
    "--warnings=valid-decoration-config",
    "--warnings=unknown-fields-all",
    "--required-job-annotations=testgrid-dashboards",
    "--required-job-annotations=testgrid-tab-name",
    "--required-job-annotations=description",
];

struct Checked {
    success: bool,
    output: String,
}

/// Runs checkconfig on `PROW_CONFIG` and the job config files `jobs` (name, YAML) in one directory.
fn checkconfig(jobs: &[(&str, &str)]) -> Checked {
    let bin = go_tool("prow/checkconfig");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    fs::write(&config, PROW_CONFIG).unwrap();
    let job_dir = dir.path().join("jobs");
    fs::create_dir(&job_dir).unwrap();
    for (name, yaml) in jobs {
        fs::write(job_dir.join(name), yaml).unwrap();
    }
    let output = Command::new(&bin)
        .arg("--config-path")
        .arg(&config)
        .arg("--job-config-path")
        .arg(&job_dir)
        .args(STRICT)
        .current_dir(dir.path())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", bin.display()));
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    Checked { success: output.status.success(), output: text }
}

fn aws_example() -> ProvidersConfig {
    ProvidersConfig::load(repo_root().join("docs/examples/providers.aws.yaml")).expect("the AWS example is valid")
}

/// Options that set every optional field.
fn full_options() -> ProwOptions {
    ProwOptions {
        image: "registry.example/harness:v1".into(),
        cluster: "build-eks".into(),
        repo: "https://github.com/me/my-harness".parse().unwrap(),
        base_ref: "release-1".into(),
        path_alias: Some("example.com/harness".into()),
        timeout: None,
        config_path: Some("docs/examples/providers.aws.yaml".into()),
        alert_email: Some("cloud-provider-aws@example.com".into()),
        labels: BTreeMap::from([("preset-aws-credential".into(), "true".into())]),
        env: BTreeMap::from([("RUST_LOG".into(), "debug".into())]),
        ..ProwOptions::default()
    }
}

#[test]
fn prow_accepts_the_generated_jobs() {
    let local = prow_yaml(&ProvidersConfig::bundled(), &ProwOptions::default());
    let aws = prow_yaml(&aws_example(), &full_options());
    // Jobs of kubernetes/kubernetes' master: a second clone, at k/k's path alias.
    let master = ProwOptions { kubernetes_ref: Some("master".into()), ..ProwOptions::default() };
    let master = prow_yaml(&ProvidersConfig::bundled(), &master);
    let operators = prow_yaml(&ProvidersConfig::bundled(), &operator_options());
    // Postsubmits on each provider's repository, the harness cloned from a mirror.
    let pushes = ProwOptions {
        postsubmits: true,
        clone_uri: Some("https://git.example/mirror/cloud-provider-harness.git".into()),
        ..ProwOptions::default()
    };
    let bundled_pushes = prow_yaml(&ProvidersConfig::bundled(), &pushes);
    let pushes = prow_yaml(&aws_example(), &pushes);
    assert!(pushes.contains("postsubmits:\n  kubernetes/cloud-provider-aws:\n"), "{pushes}");
    let checked = checkconfig(&[("local.yaml", &local), ("aws.yaml", &aws), ("master.yaml", &master)]);
    assert!(checked.success, "checkconfig rejected\n{local}\n{aws}\n{master}\n{}", checked.output);
    assert!(checked.output.contains("checkconfig passes without any error!"), "{}", checked.output);
    // Each variant on its own: they name the same jobs.
    for (name, yaml) in
        [("operators.yaml", &operators), ("pushes.yaml", &pushes), ("bundled-pushes.yaml", &bundled_pushes)]
    {
        let checked = checkconfig(&[(name, yaml)]);
        assert!(checked.success, "checkconfig rejected {name}\n{yaml}\n{}", checked.output);
    }
}

/// What an operator of a small, offline build cluster sets: nothing cloned, small resources, and
/// decoration of their own (their bucket, utility images, grace period).
fn operator_options() -> ProwOptions {
    let decoration = "\
gcs_configuration: {bucket: my-ci-logs, path_strategy: explicit}
utility_images:
  clonerefs: registry.local/prow/clonerefs:v20250307-7a867cddc
  initupload: registry.local/prow/initupload:v20250307-7a867cddc
  entrypoint: registry.local/prow/entrypoint:v20250307-7a867cddc
  sidecar: registry.local/prow/sidecar:v20250307-7a867cddc
grace_period: 30s
";
    let quantities =
        |cpu: &str, memory: &str| BTreeMap::from([("cpu".into(), cpu.into()), ("memory".into(), memory.into())]);
    ProwOptions {
        image: "registry.local/harness:v0.1.0-0123456789ab".into(),
        skip_cloning: true,
        decoration: serde_yaml_ng::from_str(decoration).unwrap(),
        resources: config::prow::ResourceRequirements {
            requests: quantities("1", "2Gi"),
            limits: quantities("2", "3Gi"),
        },
        ..ProwOptions::default()
    }
}

/// The generated jobs with one change, and what checkconfig must say about it.
fn rejected(name: &str, yaml: &str, expected: &str) {
    let checked = checkconfig(&[("jobs.yaml", yaml)]);
    assert!(!checked.success, "{name}: checkconfig accepted\n{yaml}\n{}", checked.output);
    assert!(checked.output.contains(expected), "{name}: expected {expected:?} in\n{}", checked.output);
}

#[test]
fn prow_rejects_broken_jobs() {
    let config = ProvidersConfig::bundled();
    let jobs = prow_jobs(&config, &ProwOptions::default());
    // The unbroken jobs pass (checked here too, so each rejection below is due to its change).
    let good = checkconfig(&[("jobs.yaml", &ProwConfig::to_yaml(&jobs))]);
    assert!(good.success, "{}", good.output);

    let mut duplicated = jobs.clone();
    duplicated.periodics[1].name = duplicated.periodics[0].name.clone();
    let first = jobs.periodics[0].name.clone();
    rejected("duplicate name", &ProwConfig::to_yaml(&duplicated), &format!("duplicated periodic job: {first}"));

    let mut bad_interval = jobs.clone();
    bad_interval.periodics[0].interval = "6 hours".into();
    rejected("invalid interval", &ProwConfig::to_yaml(&bad_interval), &format!("cannot parse duration for {first}"));

    let mut bad_timeout = jobs.clone();
    bad_timeout.periodics[0].job.decoration_config.timeout = "two hours".into();
    rejected("invalid timeout", &ProwConfig::to_yaml(&bad_timeout), "time: invalid duration");

    let mut unannotated = jobs.clone();
    unannotated.periodics[0].job.annotations.remove("testgrid-dashboards");
    rejected("no dashboard", &ProwConfig::to_yaml(&unannotated), "missing required annotations: testgrid-dashboards");

    let mut no_command = jobs.clone();
    no_command.periodics[0].job.spec.containers[0].command.clear();
    no_command.periodics[0].job.spec.containers[0].args.clear();
    rejected(
        "no command",
        &ProwConfig::to_yaml(&no_command),
        "decorated job containers must specify command and/or args",
    );

    let mut misdecorated = prow_jobs(&config, &operator_options());
    let gcs = misdecorated.periodics[0].job.decoration_config.more.remove("gcs_configuration").unwrap();
    misdecorated.periodics[0].job.decoration_config.more.insert("gcs_configuraton".into(), gcs);
    rejected("misspelled decoration", &misdecorated.to_yaml(), "unknown field \\\"gcs_configuraton\\\"");

    // Misspelled fields, at the job's top level and inside the pod spec.
    let yaml = jobs.to_yaml();
    for (right, wrong) in
        [("decoration_config:", "decoration_configs"), ("workdir:", "work_dir"), ("resources:", "resource")]
    {
        assert!(yaml.contains(right), "{yaml}");
        let misspelled = yaml.replacen(right, &format!("{wrong}:"), 1);
        rejected(wrong, &misspelled, &format!("unknown field \\\"{wrong}\\\""));
    }
}

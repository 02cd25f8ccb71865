//! The command lines other parts of the project write for the harness (providers.yaml's hooks,
//! the generated Prow jobs) parse as the harness's own.

use std::path::Path;

use clap::Parser;
use config::ProvidersConfig;
use config::prow::{ProwOptions, Timeouts, prow_jobs};
use config::template::{Placeholder, Vars};

use super::{Cli, Command};

#[test]
fn the_local_hooks_are_real_harness_commands() {
    let config = ProvidersConfig::bundled();
    let hooks = &config.provider("local").unwrap().hooks;
    let vars: Vars = [
        (Placeholder::Harness, "/bin/harness".to_owned()),
        (Placeholder::Cluster, "c1".to_owned()),
        (Placeholder::Node, "c1-worker-1".to_owned()),
    ]
    .into();
    let (argv, _) = hooks.terminate_instance.as_ref().unwrap().command.render(&vars).unwrap();
    assert_eq!(argv, ["/bin/harness", "cluster", "instance", "--name", "c1", "terminate", "c1-worker-1"]);
    // Each argv parses as the harness's own command line.
    for hook in [&hooks.terminate_instance, &hooks.shutdown_instance, &hooks.start_instance, &hooks.list_load_balancers]
    {
        let (argv, _) = hook.as_ref().unwrap().command.render(&vars).unwrap();
        let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        assert!(matches!(cli.command, Command::Cluster(_)), "{argv:?}");
    } // The probe hook, with what cloud-e2e appends.
    let (mut argv, _) = hooks.probe_load_balancer.as_ref().unwrap().command.render(&vars).unwrap();
    argv.extend(["--ip=10.250.1.1", "--port=80", "--udp", "--send=echo x"].map(String::from));
    let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    assert!(matches!(cli.command, Command::Cluster(_)), "{argv:?}");
}

/// The container's command line is one `harness run` takes, meaning what the cell says (with the
/// values Kubernetes puts in place of `$(JOB_NAME)`, `$(BUILD_ID)` and `$(ARTIFACTS)`).
#[test]
fn harness_run_accepts_the_jobs_command_line() {
    let config = ProvidersConfig::bundled();
    let opts = ProwOptions { config_path: Some("ci/providers.yaml".into()), ..ProwOptions::default() };
    for periodic in prow_jobs(&config, &opts).periodics {
        let container = &periodic.job.spec.containers[0];
        let argv = container.command.iter().chain(&container.args).map(|arg| {
            arg.replace("$(JOB_NAME)", &periodic.name)
                .replace("$(BUILD_ID)", "1234")
                .replace("$(ARTIFACTS)", "/logs/artifacts")
        });
        let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{}: {e}", periodic.name));
        let Command::Run(run) = cli.command else { panic!("{}: not `harness run`", periodic.name) };
        let cell = config.cell(&periodic.name).unwrap();
        assert_eq!(run.provider, cell.provider.name);
        assert_eq!(run.kubernetes, Some(cell.kubernetes.to_string()));
        assert_eq!(run.suites.as_deref(), Some(cell.suites()));
        assert_eq!(run.job.as_deref(), Some(periodic.name.as_str()));
        assert_eq!(run.build_id.as_deref(), Some("1234"));
        assert_eq!(run.common.artifacts, Path::new("/logs/artifacts"));
        assert_eq!(run.common.config.path.as_deref(), Some(Path::new("ci/providers.yaml")));
        assert_eq!(run.common.timeout, Timeouts::for_cell(&config, &cell).run);
    }
}

/// `harness matrix` runs the cells `config` defines, jobs included: a provider whose `jobs` split
/// its suites runs each job with its own suites, as its own job, on a cluster of its own.
#[test]
fn the_matrix_runs_each_job_of_a_provider_with_its_own_suites() {
    let yaml = "\
testgrid:
  gcs_bucket: my-logs
providers:
  - name: provider-with-long-name
    repo: https://github.com/o/a
    branch: main
    kubernetes: [v1.37.1, v1.36.4]
    ccm:
      build: {kind: cargo, package: reference-ccm, bin: reference-ccm}
      deploy: {kind: process}
    deployer: {kind: existing}
    capabilities: [instances]
    suites: [cloud-e2e, conformance]
    jobs:
      - {name: e2e, suites: [cloud-e2e]}
      - {name: conformance, suites: [conformance]}
  - name: b
    repo: https://github.com/o/b
    branch: main
    kubernetes: [v1.37.1]
    ccm:
      build: {kind: cargo, package: reference-ccm, bin: reference-ccm}
      deploy: {kind: process}
    deployer: {kind: existing}
    capabilities: [instances]
    suites: [cloud-e2e]
";
    let config = ProvidersConfig::parse(yaml, Path::new("providers.yaml")).unwrap();
    let Command::Matrix(args) =
        Cli::try_parse_from(["harness", "matrix", "--provider", "provider-with-long-name", "--kubernetes", "1.37"])
            .unwrap()
            .command
    else {
        panic!("not `harness matrix`")
    };
    let cells: Vec<_> = config.cells().into_iter().filter(|cell| args.selects(cell)).collect();
    let chosen: Vec<(&str, &[String])> = cells.iter().map(|cell| (cell.name.as_str(), cell.suites())).collect();
    assert_eq!(
        chosen,
        [
            ("ci-cloud-provider-provider-with-long-name-e2e-k8s-1.37", &["cloud-e2e".to_owned()][..]),
            ("ci-cloud-provider-provider-with-long-name-conformance-k8s-1.37", &["conformance".to_owned()][..]),
        ]
    );
    let clusters: Vec<String> = cells.iter().map(super::run::cluster_name).collect();
    assert!(clusters.iter().all(|name| name.len() <= 40 && name.ends_with("-1-37")), "{clusters:?}");
    assert_ne!(clusters[0], clusters[1], "each cell has a cluster of its own");
    let short = config.cells().into_iter().find(|cell| cell.provider.name == "b").unwrap();
    assert_eq!(super::run::cluster_name(&short), "m-b-1-37", "as before jobs were honoured");
}

/// One provider, `a`, tested on two minors.
const TWO_MINORS: &str = "\
testgrid:
  gcs_bucket: my-logs
providers:
  - name: a
    repo: https://github.com/o/a
    branch: main
    kubernetes: [v1.37.1, v1.36.4]
    ccm:
      build: {kind: cargo, package: reference-ccm, bin: reference-ccm}
      deploy: {kind: process}
    deployer: {kind: existing}
    capabilities: [instances]
    suites: [cloud-e2e]
";

/// `harness matrix --kubernetes v1.37.2`, a release no matrix lists: every cell of minor 1.37 runs
/// on it instead (pinned at run time), and the other minors' cells do not run.
#[test]
fn the_matrix_runs_a_release_outside_it_in_the_cells_of_its_minor() {
    let config = ProvidersConfig::parse(TWO_MINORS, Path::new("providers.yaml")).unwrap();
    let matrix = |args: &[&str]| {
        let argv = ["harness", "matrix"].iter().chain(args).copied().collect::<Vec<_>>();
        let Command::Matrix(args) = Cli::try_parse_from(argv).unwrap().command else { panic!("not `harness matrix`") };
        let cells = config.cells().into_iter().filter(|cell| args.selects(cell));
        cells.map(|cell| (cell.name.clone(), args.version_of(&cell).unwrap().to_string())).collect::<Vec<_>>()
    };
    assert_eq!(
        matrix(&["--kubernetes", "v1.37.2"]),
        [("ci-cloud-provider-a-k8s-1.37".to_owned(), "v1.37.2".to_owned())]
    );
    assert_eq!(matrix(&["--kubernetes", "1.36"]), [("ci-cloud-provider-a-k8s-1.36".to_owned(), "v1.36.4".to_owned())]);
    assert_eq!(matrix(&["--kubernetes", "v1.38.0"]), Vec::<(String, String)>::new(), "no cell of minor 1.38");
    assert_eq!(matrix(&[]).len(), 2);
}

/// `harness matrix --kubernetes-source DIR --kubernetes-commit A,B`: each cell of the checkout's
/// minor runs at each commit, in commit order, with its own artifacts directory and cluster; the
/// other minors' cells do not run, and a checkout of a minor no cell has is refused.
#[test]
fn the_matrix_runs_each_commit_of_a_checkout_in_the_cells_of_its_minor() {
    let config = ProvidersConfig::parse(TWO_MINORS, Path::new("providers.yaml")).unwrap();
    let argv = ["harness", "matrix", "--kubernetes-source", "/k", "--kubernetes-commit", "A,B"];
    let Command::Matrix(args) = Cli::try_parse_from(argv).unwrap().command else { panic!("not `harness matrix`") };
    assert_eq!(args.kubernetes_commits, ["A", "B"]);
    let cells: Vec<_> = config.cells().into_iter().filter(|cell| args.selects(cell)).collect();
    let (first, second) = ("0".repeat(40), "1".repeat(40));
    let builds = super::run::CheckoutBuilds::of(vec![
        ("v1.37.1-fixture.0".to_owned(), first.clone()),
        (format!("v1.37.1-fixture.0.1+{}", &second[..14]), second.clone()),
    ]);
    let planned = super::run::plan_cells(&args, &cells, Some(&builds)).unwrap();
    let seen: Vec<(&str, Option<&str>, &str)> =
        planned.iter().map(|p| (p.dir_name.as_str(), p.kubernetes.as_deref(), p.cell.name.as_str())).collect();
    let job = "ci-cloud-provider-a-k8s-1.37";
    let second_version = format!("v1.37.1-fixture.0.1+{}", &second[..14]);
    assert_eq!(
        seen,
        [
            (format!("{job}-{}", &first[..12]).as_str(), Some("v1.37.1-fixture.0"), job),
            (format!("{job}-{}", &second[..12]).as_str(), Some(second_version.as_str()), job),
        ]
    );
    assert_ne!(planned[0].cluster, planned[1].cluster, "two commits of a cell can run at once");
    let newer = super::run::CheckoutBuilds::of(vec![("v1.38.0-alpha.0.5+0123456789abcd".to_owned(), first)]);
    let error = super::run::plan_cells(&args, &cells, Some(&newer)).err().unwrap().to_string();
    assert!(error.contains("no cell of the matrix") && error.contains("v1.38.0-alpha.0.5+0123456789abcd"), "{error}");
    let refused = Cli::try_parse_from(["harness", "matrix", "--kubernetes-commit", "A"]).err().unwrap().to_string();
    assert!(refused.contains("--kubernetes-source"), "a commit needs the checkout: {refused}");
}

#[test]
fn under_prow_the_build_directory_is_the_parent_of_the_artifacts_prow_uploads() {
    use super::run::build_dir;
    let prow = Path::new("/logs/artifacts");
    assert_eq!(build_dir(prow, Some(prow)), Path::new("/logs"), "junit and metadata.json land in $ARTIFACTS");
    assert_eq!(build_dir(prow, None), prow, "outside Prow --artifacts is the build directory");
    let other = Path::new("/work/_artifacts");
    assert_eq!(build_dir(other, Some(prow)), other, "a directory other than Prow's $ARTIFACTS");
    let unnamed = Path::new("/logs/out");
    assert_eq!(build_dir(unnamed, Some(unnamed)), unnamed, "an $ARTIFACTS Prow did not name artifacts");
}

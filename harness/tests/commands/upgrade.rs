//! Upgrade runs (`harness run --upgrade-from`, issue 55) on the embedded default: real nodes, the
//! local cloud, whose load balancers carry traffic, and the reference CCM. An upgrade and rollback
//! that holds passes every stage and cloud-e2e after each way; one whose CCM renames what it made
//! in the cloud fails at the CCM's stage, naming what changed.

use std::path::Path;

use junit::{ReadOptions, Status};

use super::run::{Env, error_line, indent_providers, set_executable, text};

/// A case of `junit_runner.xml`.
#[derive(Debug)]
struct RunnerCase {
    name: String,
    status: Status,
    properties: Vec<(String, String)>,
    took: f64,
    message: String,
}

/// The cases of `junit_runner.xml`, with their properties.
fn runner_cases(env: &Env) -> Vec<RunnerCase> {
    let file = env.artifacts().join("artifacts/junit_runner.xml");
    let report = junit::read_file(&file, &ReadOptions::default()).unwrap();
    report
        .cases()
        .map(|(_, case)| RunnerCase {
            name: case.name.clone(),
            status: case.status(),
            properties: case.properties.iter().map(|p| (p.name.clone(), p.value.clone())).collect(),
            took: case.total_time().unwrap_or_default(),
            message: case.failure().and_then(|f| f.message.clone()).unwrap_or_default(),
        })
        .collect()
}

/// v1.36.4 → v1.37.1 → v1.36.4, with cloud-e2e after each way.
const UPGRADE: [&str; 6] = ["--upgrade-from", "v1.36.4", "--kubernetes", "v1.37.1", "--suites", "cloud-e2e"];

fn property<'a>(properties: &'a [(String, String)], name: &str) -> Option<&'a str> {
    properties.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

/// The versions a component's log shows it started at, in order (kubelet and kube-apiserver log
/// their version first thing).
fn started_versions(log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    let mut versions: Vec<String> = Vec::new();
    for line in text.lines() {
        for marker in ["kubeletVersion=\"", "\"Version\" version=\"", "Version: "] {
            let Some((_, rest)) = line.split_once(marker) else { continue };
            let version: String = rest.chars().take_while(|c| *c != '"' && !c.is_whitespace()).collect();
            if version.starts_with("v1.") && versions.last() != Some(&version) {
                versions.push(version);
            }
        }
    }
    versions
}

#[test]
fn an_upgrade_and_rollback_of_the_embedded_default_holds_every_stage_and_passes_cloud_e2e_after_each() {
    let env = Env::new();
    let mut args = vec!["--provider", "local-real", "--build-id", "551", "--cluster-name", "upgrade"];
    args.extend(UPGRADE);
    let output = env.harness(&args).output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let cases = runner_cases(&env);
    for RunnerCase { name, status, properties, took, .. } in &cases {
        let shown: Vec<String> = properties.iter().map(|(n, v)| format!("{n}={v}")).collect();
        eprintln!("upgrade-row\t{name}\t{status:?}\t{took:.1} s\t{}", shown.join(" "));
    }
    let names: Vec<&str> = cases.iter().map(|case| case.name.as_str()).collect();
    let nodes: Vec<String> = (0..3).map(|i| format!("upgrade-worker-{i}")).collect();
    let mut expected = vec![
        "Build".to_owned(),
        "Up".into(),
        "Deploy".into(),
        "Workload".into(),
        "Upgrade kube-apiserver".into(),
        "Upgrade kube-controller-manager".into(),
        "Upgrade kube-scheduler".into(),
    ];
    expected.extend(nodes.iter().map(|n| format!("Upgrade node {n}")));
    expected.extend(["Upgrade cloud-controller-manager".into(), "Test (upgraded)".into()]);
    expected.push("Roll back cloud-controller-manager".into());
    // cloud-e2e terminates a node's machine for good: the rollback has the others.
    let rolled_back_nodes: Vec<&str> = names.iter().filter_map(|n| n.strip_prefix("Roll back node ")).collect();
    assert!(rolled_back_nodes.len() >= 2, "{names:?}");
    expected.extend(rolled_back_nodes.iter().map(|n| format!("Roll back node {n}")));
    expected.extend(
        ["Roll back kube-scheduler", "Roll back kube-controller-manager", "Roll back kube-apiserver"].map(String::from),
    );
    expected.extend(["Test (rolled back)", "DumpClusterLogs", "Down"].map(String::from));
    assert_eq!(names, expected);
    for RunnerCase { name, status, properties, message, .. } in &cases {
        assert_eq!(*status, Status::Passed, "{name}: {message}");
        if name.starts_with("Upgrade ") || name.starts_with("Roll back ") {
            let to = if name.starts_with("Upgrade ") { "v1.37.1" } else { "v1.36.4" };
            assert_eq!(property(properties, "to"), Some(to), "{name}");
            // The local cloud's load balancers carry traffic: both protocols were probed all along.
            for probe in ["api-server", "lb-netexec-tcp", "lb-netexec-udp"] {
                let gap: f64 = property(properties, &format!("{probe}-worst-gap-seconds"))
                    .unwrap_or_else(|| panic!("{name}: no {probe} gap in {properties:?}"))
                    .parse()
                    .unwrap();
                if probe != "api-server" {
                    assert!(gap <= 30.0, "{name}: {probe} carried no traffic for {gap} s");
                }
            }
        }
    }
    // Restarting kube-apiserver is an outage of the (single) API server, measured as such.
    let apiserver = cases.iter().find(|case| case.name == "Upgrade kube-apiserver").unwrap();
    let gap: f64 = property(&apiserver.properties, "api-server-worst-gap-seconds").unwrap().parse().unwrap();
    assert!(gap >= 1.0, "kube-apiserver restarted without a gap in its /readyz? {apiserver:?}");

    // cloud-e2e passed on the upgraded cluster and again after the rollback, in files of their own.
    for (dir, suffix) in [("upgraded", ""), ("rolled-back", " (rolled back)")] {
        let file = env.artifacts().join(format!("artifacts/{dir}/junit_cloud-e2e.xml"));
        let report = junit::read_file(&file, &ReadOptions::default()).unwrap();
        let cases: Vec<(String, Status)> = report.cases().map(|(_, c)| (c.name.clone(), c.status())).collect();
        assert!(cases.len() >= 20, "{dir}: {cases:?}");
        for (name, status) in &cases {
            assert!(matches!(status, Status::Passed), "{dir}: {name}: {status:?}");
            assert!(name.ends_with(suffix), "{dir}: {name}");
        }
    }

    // The components really ran the other release, and came back: their logs say so.
    let logs = env.artifacts().join("artifacts/cluster-logs");
    assert_eq!(started_versions(&logs.join("kube-apiserver.log")), ["v1.36.4", "v1.37.1", "v1.36.4"]);
    let kubelet = started_versions(&logs.join(format!("{}-kubelet.log", rolled_back_nodes[0])));
    assert!(
        kubelet.starts_with(&["v1.36.4".into(), "v1.37.1".into()]) && kubelet.last().unwrap() == "v1.36.4",
        "{kubelet:?}"
    );

    let finished = env.finished();
    assert_eq!(finished["metadata"]["upgrade-from"], "v1.36.4", "{finished}");
    assert_eq!(finished["metadata"]["kubernetes-version"], "v1.37.1", "{finished}");
    assert_eq!(finished["metadata"]["upgrade-order"], "control-plane,nodes,ccm", "{finished}");
    let published = env.root.join("data/results/logs/ci-cloud-provider-local-real-upgrade-k8s-1.37/551/finished.json");
    assert!(published.exists(), "published under the upgrade job: {}", published.display());
    env.assert_nothing_left();
}

/// The reference CCM whose newer release's build names its cloud resources after another cluster
/// (`--cluster-name` changed: a CCM that changes how it names load balancers and routes does the
/// same), built by a provider's own build command for each release.
fn renaming_provider(env: &Env, reference_ccm: &Path) -> std::path::PathBuf {
    let build = env.root.join("build-renaming-ccm");
    let script = r#"#!/bin/sh
# $1: the Kubernetes release to build for; $2: the reference CCM; $3: where the CCM goes.
renamed=
if [ "$1" = v1.37.1 ]; then renamed=renamed-by-the-upgrade; fi
cat > "$3" <<EOF
#!/bin/sh
renamed=$renamed
for arg in "\$@"; do
  shift
  case "\$arg" in --cluster-name=*) [ -n "\$renamed" ] && arg="--cluster-name=\$renamed" ;; esac
  set -- "\$@" "\$arg"
done
exec $2 "\$@"
EOF
chmod +x "$3"
"#;
    std::fs::write(&build, script).unwrap();
    set_executable(&build);
    let output = env.root.join("renaming-ccm");
    let bundled = std::fs::read_to_string(&env.config).unwrap();
    let local_real = bundled.split("\n  - name: local-real\n").nth(1).expect("the fixture has local-real");
    let entry = local_real.split("\n  - name: ").next().unwrap();
    let entry = format!("  - name: renaming\n{entry}").replacen(
        "build:\n        kind: cargo\n        package: reference-ccm\n        bin: reference-ccm",
        &format!(
            "build:\n        kind: command\n        command: [\"{}\", \"{{kubernetes_version}}\", \"{}\", \"{}\"]\n        binary: {}",
            build.display(),
            reference_ccm.display(),
            output.display(),
            output.display()
        ),
        1,
    );
    assert!(entry.contains("build-renaming-ccm"), "{entry}");
    let config = env.root.join("providers-renaming.yaml");
    let (head, suites) = bundled.split_once("\nsuites:\n").expect("the fixture has suites");
    std::fs::write(&config, format!("{head}\n{}\n\nsuites:\n{suites}", indent_providers(&entry))).unwrap();
    config
}

#[test]
fn an_upgrade_whose_ccm_recreates_the_load_balancers_fails_at_the_ccms_stage_naming_what_changed() {
    let env = Env::new();
    let reference = toolchain::workspace::build_reference_ccm().expect("building reference-ccm");
    let config = renaming_provider(&env, &reference);
    let mut command = env.command("run");
    command.arg("--config").arg(&config).arg("--artifacts").arg(env.artifacts());
    command.args(["--provider", "renaming", "--cluster-name", "renaming"]).args(UPGRADE);
    let output = command.output().unwrap();
    assert!(!output.status.success(), "{}", text(&output));
    let cases = runner_cases(&env);
    let status = |name: &str| cases.iter().find(|case| case.name == name).map(|case| case.status);
    for passed in ["Workload", "Upgrade kube-apiserver", "Upgrade node renaming-worker-2"] {
        assert_eq!(status(passed), Some(Status::Passed), "{passed}: {cases:#?}");
    }
    let RunnerCase { status: ccm_status, properties, message, .. } =
        cases.iter().find(|case| case.name == "Upgrade cloud-controller-manager").expect("the CCM's stage ran");
    assert_eq!(*ccm_status, Status::Failed);
    assert!(
        message.contains("service upgrade-workload/netexec-tcp's ingress changed")
            && message.contains("still changed 60s after the stage"),
        "{message}"
    );
    assert!(property(properties, "lb-netexec-tcp-worst-gap-seconds").is_some(), "{properties:?}");
    for skipped in ["Test (upgraded)", "Test (rolled back)"] {
        assert_eq!(status(skipped), Some(Status::Skipped), "{skipped}");
    }
    assert!(!cases.iter().any(|case| case.name.starts_with("Roll back")), "nothing rolled back after the failure");
    assert_eq!(status("Down"), Some(Status::Passed));
    let line = error_line(&output);
    assert!(line.contains("step Upgrade cloud-controller-manager failed"), "{line}");
    env.assert_nothing_left();
}

#[test]
fn an_upgrade_the_skew_policy_forbids_is_refused_before_anything_starts() {
    let env = Env::new();
    let upgrade = ["--provider", "local-real", "--upgrade-from", "v1.36.4", "--kubernetes", "v1.37.1"];
    let refused = |extra: &[&str]| {
        let mut args = upgrade.to_vec();
        args.extend_from_slice(extra);
        error_line(&env.harness(&args).output().unwrap())
    };
    let line = refused(&["--upgrade-order", "nodes,control-plane,ccm"]);
    assert!(
        line.contains("kubelet must not be newer than kube-apiserver")
            && line.contains("kubelet would run v1.37.1 against kube-apiserver v1.36.4")
            && line.contains("--allow-skew-violation"),
        "{line}"
    );
    let line = refused(&["--upgrade-order", "control-plane,nodes"]);
    assert!(line.contains("must name each of control-plane, nodes and ccm once"), "{line}");
    let line = error_line(
        &env.harness(&["--provider", "local-real", "--upgrade-from", "v1.35.0", "--kubernetes", "v1.37.1"])
            .output()
            .unwrap(),
    );
    assert!(line.contains("one minor at a time") && line.contains("upgrade to v1.36 first"), "{line}");
    let line = error_line(
        &env.harness(&["--provider", "local-real", "--upgrade-from", "v1.37.1", "--kubernetes", "v1.36.4"])
            .output()
            .unwrap(),
    );
    assert!(line.contains("an upgrade goes to a newer release"), "{line}");
    let line =
        error_line(&env.harness(&["--provider", "local-real", "--upgrade-from", "one-thirty-six"]).output().unwrap());
    assert!(line.contains("--upgrade-from `one-thirty-six` is not a Kubernetes version"), "{line}");
    // A deployer that cannot change a running cluster's release.
    let aws = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples/providers.aws.yaml");
    let mut cmd = env.command("run");
    cmd.arg("--config").arg(&aws).arg("--artifacts").arg(env.root.join("aws"));
    cmd.args(["--provider", "aws", "--upgrade-from", "v1.36.4", "--kubernetes", "v1.37.1"]);
    let line = error_line(&cmd.output().unwrap());
    assert!(line.contains("needs the local deployer"), "{line}");
    assert!(!env.root.join("_artifacts/started.json").exists(), "a build was started");
    assert!(!env.root.join("state/clusters").exists(), "a cluster was started");
}

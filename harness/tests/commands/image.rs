//! `harness image build`: the image the Prow jobs and deploy/ run, built here, imported into real
//! nodes (`harness cluster up --image`), and run there as deploy/ runs it (non-root, read-only root
//! filesystem): its harness is the one that built it, and its providers file the one it was given.

use std::path::PathBuf;

use crate::real_prow::Kubectl;
use crate::run::{Env, text};

/// A pod of the image, with the Deployment's security context, one container per command.
fn pod(image: &str, commands: &[(&str, &[&str])]) -> String {
    let containers: Vec<serde_json::Value> = commands
        .iter()
        .map(|(name, command)| {
            serde_json::json!({
                "name": name, "image": image, "imagePullPolicy": "Never", "command": command,
                "securityContext": {"readOnlyRootFilesystem": true, "allowPrivilegeEscalation": false},
                "env": [{"name": "HOME", "value": "/tmp"}],
                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
            })
        })
        .collect();
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "harness-image"},
        "spec": {"restartPolicy": "Never", "containers": containers, "volumes": [{"name": "tmp", "emptyDir": {}}],
                 "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532}},
    })
    .to_string()
}

#[test]
fn the_harness_image_runs_on_real_nodes_as_the_harness_that_built_it() {
    if let Some(missing) = local_cluster::real::missing_kernel_feature() {
        eprintln!("SKIPPED: real nodes cannot run on this machine: {missing}");
        return;
    }
    let env = Env::new();
    let archive = env.root.join("harness.oci.tar");
    let built =
        env.command("image").args(["build", "--config"]).arg(&env.config).arg("-o").arg(&archive).output().unwrap();
    assert!(built.status.success(), "{}", text(&built));
    let version = env.program(env!("CARGO_BIN_EXE_harness")).arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
    let commit = version.split("(commit ").nth(1).unwrap().trim_end_matches(')').to_owned();
    let reference = format!("ghcr.io/cloud-provider-harness/harness:v{}-{}", env!("CARGO_PKG_VERSION"), &commit[..12]);
    let printed = String::from_utf8_lossy(&built.stdout);
    assert!(printed.starts_with(&format!("{reference}: {}", archive.display())), "{printed}");
    assert_eq!(local_cluster::images::oci::archive_reference(&archive).unwrap(), reference);

    let cluster = "harness-image";
    env.cluster_up_with_images(cluster, &[], &[&archive]);
    let down = || env.cluster_down(cluster);
    let kubeconfig = env.command("cluster").args(["kubeconfig", "--name", cluster]).output().unwrap();
    let bin = env.command("toolchain").arg("path").output().unwrap();
    let cluster_kubectl = Kubectl {
        binary: PathBuf::from(String::from_utf8_lossy(&bin.stdout).trim()).join("kubectl"),
        kubeconfig: PathBuf::from(String::from_utf8_lossy(&kubeconfig.stdout).trim()),
    };
    let kubectl = |args: &[&str], stdin: Option<&str>| {
        let output = cluster_kubectl.run(args, stdin.map(str::as_bytes));
        (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned(), text(&output))
    };
    let commands: [(&str, &[&str]); 3] = [
        ("version", &["harness", "--version"]),
        ("ccm", &["reference-ccm", "--help"]),
        (
            "jobs",
            &["harness", "prow-config", "--config", "/etc/cloud-provider-harness/providers.yaml", "--skip-cloning"],
        ),
    ];
    let (applied, _, said) = kubectl(&["apply", "-f", "-"], Some(&pod(&reference, &commands)));
    let (done, _, waited) =
        kubectl(&["wait", "pod/harness-image", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=180s"], None);
    let logs: Vec<String> =
        commands.iter().map(|(name, _)| kubectl(&["logs", "harness-image", "-c", name], None).1).collect();
    let (_, described, _) = kubectl(&["describe", "pod", "harness-image"], None);
    let gone = down();
    assert!(applied, "{said}");
    assert!(done, "{waited}\n{described}\n{logs:#?}");
    assert_eq!(logs[0].trim(), version, "the image's harness is the one that built it");
    assert!(logs[1].contains("Usage"), "{}", logs[1]);
    // The providers file it was given, read from the image: the test providers are in its jobs.
    assert!(logs[2].contains("name: ci-cloud-provider-fixture-k8s-1.37"), "{}", logs[2]);
    assert!(gone.status.success(), "{}", text(&gone));
    env.assert_nothing_left();
}

#[test]
fn image_builds_refuse_bad_input_naming_the_flag_before_building_anything() {
    let env = Env::new();
    let archive = env.root.join("refused.oci.tar");
    let refused = |args: &[&str]| {
        let output = env.command("image").args(args).arg("-o").arg(&archive).output().unwrap();
        assert!(!output.status.success(), "{args:?}: {}", text(&output));
        assert!(!archive.exists(), "{args:?} wrote an archive");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let config = env.config.display().to_string();
    let unknown = refused(&["build", "--config", &config, "--provider", "nosuch"]);
    assert!(unknown.contains("--provider nosuch: no such provider") && unknown.contains("fixture"), "{unknown}");
    let env_pair = refused(&["program", "/bin/true", "--reference", "example.com/true:v1", "--env", "NOVALUE"]);
    assert!(env_pair.contains("--env") && env_pair.contains("NAME=VALUE"), "{env_pair}");
    let missing = refused(&["program", "/no/such/program", "--reference", "example.com/none:v1"]);
    assert!(missing.contains("/no/such/program"), "{missing}");
}

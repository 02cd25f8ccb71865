//! `harness image build`: the image the Prow jobs and deploy/ run, built here, pushed to a real
//! registry (Debian's docker-registry, CNCF Distribution) with `harness image push`, pulled from it
//! by real nodes' containerd through the hub, and run there as deploy/ runs it (non-root, read-only
//! root filesystem): its harness is the one that built it, and its providers file the one it was
//! given. (deploy.rs and real_prow.rs import it instead: `harness cluster up --image`.)

use std::path::PathBuf;

use crate::real_prow::Kubectl;
use crate::run::{Env, text};

/// A pod of the image, pulled each time, with the Deployment's security context, one container
/// per command.
fn pod(image: &str, commands: &[(&str, &[&str])]) -> String {
    let containers: Vec<serde_json::Value> = commands
        .iter()
        .map(|(name, command)| {
            serde_json::json!({
                "name": name, "image": image, "imagePullPolicy": "Always", "command": command,
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
fn the_harness_image_pushed_to_a_registry_runs_on_real_nodes_as_the_harness_that_built_it() {
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

    // Pushed to a registry on the host, which the nodes reach at the hub's address.
    let registry = testing::registry::Registry::start();
    let tag = reference.rsplit_once(':').unwrap().1;
    let repository = "cloud-provider-harness/harness";
    let target = format!("{}/{repository}:{tag}", registry.host());
    let pushed = env.command("image").arg("push").arg(&archive).arg(&target).arg("--plain-http").output().unwrap();
    assert!(pushed.status.success(), "{}\n{}", text(&pushed), registry.log());
    let printed = String::from_utf8_lossy(&pushed.stdout);
    let digest = registry.manifest_digest(repository, tag).expect("the registry has the pushed tag");
    assert!(printed.starts_with(&format!("{target}@{digest} (4 blobs")), "{printed}");
    let pulled_by = format!("{}:{}/{repository}:{tag}", local_cluster::real::HUB_IP, registry.port());

    let cluster = "harness-image";
    env.cluster_up_with_images(cluster, &[registry.port()], &[]);
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
    let (applied, _, said) = kubectl(&["apply", "-f", "-"], Some(&pod(&pulled_by, &commands)));
    let (done, _, waited) =
        kubectl(&["wait", "pod/harness-image", "--for=jsonpath={.status.phase}=Succeeded", "--timeout=180s"], None);
    let logs: Vec<String> =
        commands.iter().map(|(name, _)| kubectl(&["logs", "harness-image", "-c", name], None).1).collect();
    let (_, described, _) = kubectl(&["describe", "pod", "harness-image"], None);
    let gone = down();
    assert!(applied, "{said}");
    assert!(done, "{waited}\n{described}\n{logs:#?}\n{}", registry.log());
    assert!(described.contains(&format!("Successfully pulled image \"{pulled_by}\"")), "{described}");
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

#[test]
fn a_push_to_a_registry_that_wants_a_login_uses_docker_logins_credentials_and_is_refused_without() {
    let env = Env::new();
    let archive = env.root.join("true.oci.tar");
    let built = env
        .command("image")
        .args(["program", "/bin/true", "--reference", "example.com/true:v1", "-o"])
        .arg(&archive)
        .output()
        .unwrap();
    assert!(built.status.success(), "{}", text(&built));
    let registry = testing::registry::Registry::start_with_login("ci", "s3cret");
    let target = format!("{}/tools/true:v1", registry.host());
    let docker = env.root.join("docker");
    std::fs::create_dir_all(&docker).unwrap();
    let push = |docker_config: &std::path::Path| {
        env.command("image")
            .arg("push")
            .arg(&archive)
            .arg(&target)
            .arg("--plain-http")
            .env("DOCKER_CONFIG", docker_config)
            .output()
            .unwrap()
    };

    let anonymous = push(&docker);
    assert!(!anonymous.status.success(), "{}", text(&anonymous));
    let said = String::from_utf8_lossy(&anonymous.stderr);
    assert!(said.contains(&format!("docker login {}", registry.host())), "{said}");
    assert_eq!(registry.manifest_digest("tools/true", "v1"), None, "nothing was tagged");

    // What `docker login` writes: base64 of user:password under the registry's host.
    std::fs::write(
        docker.join("config.json"),
        format!(r#"{{"auths": {{"{}": {{"auth": "Y2k6czNjcmV0"}}}}}}"#, registry.host()),
    )
    .unwrap();
    let pushed = push(&docker);
    assert!(pushed.status.success(), "{}\n{}", text(&pushed), registry.log());
    let digest = registry.manifest_digest("tools/true", "v1").expect("the registry has the pushed tag");
    let layout = local_cluster::images::oci::ArchiveLayout::read(&archive).unwrap();
    assert_eq!(layout.index["manifests"][0]["digest"], digest.as_str(), "the archive's manifest, byte for byte");
    for blob in layout.blobs.keys().filter(|blob| **blob != digest) {
        assert!(registry.has_blob("tools/true", blob), "{blob} was not pushed");
    }
    let printed = String::from_utf8_lossy(&pushed.stdout);
    assert!(printed.starts_with(&format!("{target}@{digest} ({} blobs", layout.blobs.len())), "{printed}");

    // Plain HTTP without --plain-http: said what to add.
    let https =
        env.command("image").arg("push").arg(&archive).arg(&target).env("DOCKER_CONFIG", &docker).output().unwrap();
    assert!(!https.status.success());
    assert!(String::from_utf8_lossy(&https.stderr).contains("--plain-http"), "{}", text(&https));
    let missing = env.command("image").args(["push", "/no/such.oci.tar", &target]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("/no/such.oci.tar: no such image archive"),
        "{}",
        text(&missing)
    );
}

//! The `harness` binary as a user and a CI job meet it: bad input gets a one-line error saying what
//! to do and a non-zero exit; an interrupted or failed `cluster up` leaves nothing running.
//!
//! Each test points HARNESS_STATE_DIR (and, where it needs a particular cache, HARNESS_CACHE_DIR)
//! at its own temporary directory. The tests that start processes need the default toolchain
//! installed (`harness toolchain install`, run by `scripts/test`).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use local_cluster::process::find_by_marker;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

fn harness(state: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_harness"));
    cmd.env("HARNESS_STATE_DIR", state).env("CI", "true").env_remove("RUST_LOG");
    cmd
}

/// The first line of stderr that is not a log line: the one-line reason.
fn error_line(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr);
    stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line in:\n{stderr}"))
        .to_string()
}

fn assert_fails_with(output: Output, expected: &[&str]) {
    assert_eq!(output.status.code(), Some(1), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    let line = error_line(&output);
    for fragment in expected {
        assert!(line.contains(fragment), "{line:?} lacks {fragment:?}");
    }
}

#[test]
fn help_lists_the_commands() {
    let state = tempfile::tempdir().unwrap();
    let output = harness(state.path()).arg("--help").output().unwrap();
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for command in ["toolchain", "cluster"] {
        assert!(help.contains(command), "{help}");
    }
}

#[test]
fn an_unknown_kubernetes_version_names_the_pinned_ones() {
    let state = tempfile::tempdir().unwrap();
    let up = |version: &str| {
        let args = ["cluster", "up", "--node-kind", "kwok", "--kubernetes", version];
        harness(state.path()).args(args).output().unwrap()
    };
    // A minor that is no tag: the pinned releases, and how to pin another.
    let pinned = toolchain::default_release().version;
    assert_fails_with(up("1.99"), &["'1.99' is not pinned", pinned, "tools/kube/pin.sh"]);
    // A tag is asked of the Go module proxy, which serves no v1.99.0.
    assert_fails_with(up("v1.99.0"), &["does not serve k8s.io/kubernetes v1.99.0", "--kubernetes latest"]);
}

#[test]
fn a_kubernetes_source_that_is_no_checkout_is_refused_before_anything_starts() {
    let state = tempfile::tempdir().unwrap();
    let empty_cache = tempfile::tempdir().unwrap();
    let not_kubernetes = tempfile::tempdir().unwrap();
    std::fs::write(not_kubernetes.path().join("go.mod"), "module example.com/ccm\n\ngo 1.26.0\n").unwrap();
    let source = not_kubernetes.path().to_str().unwrap();
    for args in [
        vec!["toolchain", "install", "--kubernetes-source", source],
        vec!["cluster", "up", "--node-kind", "kwok", "--kubernetes-source", source],
        vec!["run", "--config", PROVIDERS_YAML, "--provider", "local", "--kubernetes-source", source],
    ] {
        let output = harness(state.path()).args(&args).env("HARNESS_CACHE_DIR", empty_cache.path()).output().unwrap();
        assert_fails_with(
            output,
            &["is not a kubernetes/kubernetes checkout", "not module k8s.io/kubernetes", "--kubernetes-source"],
        );
    }
    // Nothing was built or started.
    assert_eq!(std::fs::read_dir(empty_cache.path()).unwrap().count(), 0);
    let both = ["toolchain", "install", "--kubernetes", "v1.37.1", "--kubernetes-source", source];
    let output = harness(state.path()).args(both).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "a command line clap refuses");
    assert!(String::from_utf8_lossy(&output.stderr).contains("cannot be used with"));
}

/// The repository's providers.yaml.
const PROVIDERS_YAML: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../providers.yaml");

#[test]
fn a_missing_go_toolchain_says_how_to_get_one() {
    let state = tempfile::tempdir().unwrap();
    let empty_cache = tempfile::tempdir().unwrap();
    let output = harness(state.path())
        .args(["toolchain", "install"])
        .env("HARNESS_CACHE_DIR", empty_cache.path())
        .env("PATH", "/nonexistent")
        .env_remove("GO")
        .output()
        .unwrap();
    assert_fails_with(output, &["Go toolchain not usable", "`go` is not on PATH", "install Go 1.26"]);
}

#[test]
fn an_uninstalled_version_is_reported_with_the_install_command() {
    let state = tempfile::tempdir().unwrap();
    let empty_cache = tempfile::tempdir().unwrap();
    let output = harness(state.path())
        .args(["toolchain", "path"])
        .env("HARNESS_CACHE_DIR", empty_cache.path())
        .output()
        .unwrap();
    assert_fails_with(output, &["not installed", "harness toolchain install --kubernetes"]);
}

#[test]
fn a_corrupt_cache_entry_is_refused_with_the_rebuild_command() {
    let state = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let version = toolchain::default_release().version;
    let entry = cache.path().join("toolchains").join(version);
    fs::create_dir_all(entry.join("bin")).unwrap();

    fs::write(entry.join("manifest.json"), "{ not json").unwrap();
    let output = harness(state.path())
        .args(["cluster", "up", "--node-kind", "kwok"])
        .env("HARNESS_CACHE_DIR", cache.path())
        .output()
        .unwrap();
    assert_fails_with(output, &["is corrupt", "manifest.json does not parse", "--force"]);

    // A binary cut short (a full disk, a killed copy) is caught by its recorded size. `cluster up`
    // would rebuild it (toolchain::install); a command that only uses the toolchain names the one
    // that does, which needs no --force.
    let mut manifest = serde_json::json!({"kubernetes_version": version, "go_version": "go1.26", "binaries": {}});
    for name in toolchain::BINARIES {
        fs::write(entry.join("bin").join(name), b"truncated").unwrap();
        manifest["binaries"][name] = serde_json::json!({"size": 1_000_000, "sha256": "00"});
    }
    fs::write(entry.join("manifest.json"), manifest.to_string()).unwrap();
    let output = harness(state.path())
        .args(["toolchain", "path", "--kubernetes", version])
        .env("HARNESS_CACHE_DIR", cache.path())
        .output()
        .unwrap();
    let rebuilds = format!("`harness toolchain install --kubernetes {version}` rebuilds e2e.test, etcd");
    assert_fails_with(output, &["is corrupt", "9 bytes, the manifest says 1000000 (truncated?)", &rebuilds]);
}

#[test]
fn a_port_in_use_is_named() {
    let state = tempfile::tempdir().unwrap();
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port().to_string();
    let output = harness(state.path())
        .args(["cluster", "up", "--node-kind", "kwok", "--api-server-port", &port])
        .output()
        .unwrap();
    assert_fails_with(output, &[&format!("port {port} on 127.0.0.1 is already in use"), "--api-server-port"]);
}

#[test]
fn bad_names_and_node_counts_are_refused() {
    let state = tempfile::tempdir().unwrap();
    let output =
        harness(state.path()).args(["cluster", "up", "--node-kind", "kwok", "--name", "../etc"]).output().unwrap();
    assert_fails_with(output, &["cluster name '../etc' is not valid"]);
    let output = harness(state.path()).args(["cluster", "up", "--node-kind", "kwok", "--nodes", "0"]).output().unwrap();
    assert_fails_with(output, &["--nodes 0 is out of range"]);
}

#[test]
fn unknown_clusters_are_reported_and_down_is_idempotent() {
    let state = tempfile::tempdir().unwrap();
    let output = harness(state.path()).args(["cluster", "kubeconfig", "--name", "nope"]).output().unwrap();
    assert_fails_with(output, &["no cluster named 'nope'", "harness cluster list"]);
    let output = harness(state.path()).args(["cluster", "down", "--name", "nope"]).output().unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("nothing to do"));
}

/// Waits until `cluster.json` of `name` records `component` as started.
fn wait_until_started(state: &Path, name: &str, component: &str, child: &mut Child) {
    let record = state.join("clusters").join(name).join("cluster.json");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if fs::read_to_string(&record).is_ok_and(|text| text.contains(&format!("\"component\": \"{component}\""))) {
            return;
        }
        assert!(child.try_wait().unwrap().is_none(), "harness exited before starting {component}");
        assert!(Instant::now() < deadline, "{component} never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_for_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "harness did not exit after the signal");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_nothing_left(state: &Path, name: &str) {
    let dir = state.join("clusters").join(name);
    let survivors = find_by_marker(state);
    assert!(survivors.is_empty(), "processes survived: {survivors:?}");
    assert!(!dir.exists(), "{} was left behind", dir.display());
}

fn interrupt_half_way(signal: Signal, after: &str) {
    let state = tempfile::tempdir().unwrap();
    let name = "interrupted";
    let mut child = harness(state.path())
        .args(["cluster", "up", "--node-kind", "kwok", "--name", name])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until_started(state.path(), name, after, &mut child);
    kill(Pid::from_raw(child.id() as i32), signal).unwrap();
    let status = wait_for_exit(&mut child);
    assert_eq!(status.code(), Some(130), "exit status after {signal}");
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains(&format!("error: interrupted by {signal}")), "{stderr}");
    assert_nothing_left(state.path(), name);
}

#[test]
fn sigint_half_way_through_up_leaves_nothing_running() {
    interrupt_half_way(Signal::SIGINT, "kube-apiserver");
}

#[test]
fn sigterm_after_the_control_plane_started_leaves_nothing_running() {
    interrupt_half_way(Signal::SIGTERM, "kwok");
}

/// A toolchain cache whose kube-scheduler dies at once: `up` fails after etcd and the API server
/// are already running, and must stop them.
fn cache_with_broken_scheduler() -> tempfile::TempDir {
    let release = toolchain::default_release();
    let real = toolchain::installed(&release).expect("the default toolchain is installed (scripts/test does it)");
    let cache = tempfile::tempdir().unwrap();
    let entry = cache.path().join("toolchains").join(release.version);
    fs::create_dir_all(entry.join("bin")).unwrap();
    let mut manifest: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(real.dir.join("manifest.json")).unwrap()).unwrap();
    // kwok included: the real toolchain has it (scripts/test installs with --all).
    for name in toolchain::BINARIES.iter().chain(toolchain::ON_DEMAND) {
        let target: PathBuf = entry.join("bin").join(name);
        if *name == "kube-scheduler" {
            let script = "#!/bin/sh\necho 'scheduler: configuration exploded' >&2\nexit 3\n";
            fs::write(&target, script).unwrap();
            fs::set_permissions(&target, fs::Permissions::from_mode(0o755)).unwrap();
            // Recorded as built, or the check before use would find it corrupt and rebuild it.
            manifest["binaries"][name]["size"] = script.len().into();
            manifest["binaries"][name]["sha256"] = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(script)).into();
        } else {
            std::os::unix::fs::symlink(real.binary(name), &target).unwrap();
        }
    }
    fs::write(entry.join("manifest.json"), manifest.to_string()).unwrap();
    cache
}

#[test]
fn a_component_that_dies_during_up_is_reported_and_the_rest_is_stopped() {
    let state = tempfile::tempdir().unwrap();
    let cache = cache_with_broken_scheduler();
    let output = harness(state.path())
        .args(["cluster", "up", "--node-kind", "kwok", "--name", "broken"])
        .env("HARNESS_CACHE_DIR", cache.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(error_line(&output).contains("kube-scheduler exited while cluster 'broken' was starting"));
    assert!(String::from_utf8_lossy(&output.stderr).contains("scheduler: configuration exploded"));
    assert_nothing_left(state.path(), "broken");
}

#[test]
fn up_list_kubeconfig_down_round_trip() {
    let state = tempfile::tempdir().unwrap();
    let up = harness(state.path())
        .args(["cluster", "up", "--node-kind", "kwok", "--name", "roundtrip", "--nodes", "2"])
        .output()
        .unwrap();
    assert!(up.status.success(), "{}", String::from_utf8_lossy(&up.stderr));
    assert!(String::from_utf8_lossy(&up.stdout).contains("2 nodes"));

    let list = harness(state.path()).args(["cluster", "list"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout).to_string();
    assert!(list.starts_with("roundtrip\trunning\t"), "{list}");

    let again =
        harness(state.path()).args(["cluster", "up", "--node-kind", "kwok", "--name", "roundtrip"]).output().unwrap();
    assert_fails_with(again, &["already exists and is running", "harness cluster down --name roundtrip"]);

    let kubeconfig = harness(state.path()).args(["cluster", "kubeconfig", "--name", "roundtrip"]).output().unwrap();
    let path = PathBuf::from(String::from_utf8_lossy(&kubeconfig.stdout).trim());
    assert!(fs::read_to_string(&path).unwrap().contains("current-context: harness-roundtrip"));

    let down = harness(state.path()).args(["cluster", "down", "--name", "roundtrip"]).output().unwrap();
    assert!(down.status.success());
    assert_nothing_left(state.path(), "roundtrip");
}

//! A generated Prow job's test container under Prow's own pod utilities (`sigs.k8s.io/prow`
//! `initupload`, `entrypoint` and `sidecar`, built from `tools/prow`), uploading to the GCS
//! emulator, then read by TestGrid's updater (`tools/testing/testgrid-read`) with the test group
//! `harness testgrid-config` generates: the decoration contract, on Prow's code and TestGrid's,
//! without a Kubernetes cluster around them. The utilities are configured as Prow's decoration
//! configures them in a pod (`pkg/pod-utils/decorate/podspec.go`): `/logs` is a directory of the
//! test's, `ARTIFACTS` its `artifacts/`, the sidecar uploads that directory and the process log.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use testing::fake_gcs::FakeGcs;
use testing::go_tools::go_tool;
use testing::testgrid::{Grid, ReadGrid};

use crate::run::{Env, text};

/// Where the jobs' builds go: providers.yaml's `testgrid.gcs_bucket` (the bundled file's).
const BUCKET: &str = "kubernetes-ci-logs";

/// A decorated job's pod, as directories and the utilities' options.
struct Pod<'a> {
    env: &'a Env,
    gcs: &'a FakeGcs,
    logs: PathBuf,
    job: String,
    build: String,
}

impl Pod<'_> {
    fn artifacts(&self) -> PathBuf {
        self.logs.join("artifacts")
    }

    /// `JOB_SPEC`: what Prow's downward API gives every container of a periodic's pod.
    fn job_spec(&self) -> String {
        json!({"type": "periodic", "job": self.job, "buildid": self.build, "prowjobid": format!("pj-{}", self.build)})
            .to_string()
    }

    fn gcs_options(&self) -> Value {
        json!({"bucket": BUCKET, "path_strategy": "explicit", "dry_run": false})
    }

    /// The wrapper options entrypoint and sidecar share (one test container, no prefix).
    fn wrapper(&self, args: &[String]) -> Value {
        json!({
            "args": args,
            "process_log": self.logs.join("process-log.txt"),
            "marker_file": self.logs.join("marker-file.txt"),
            "metadata_file": self.artifacts().join("metadata.json"),
        })
    }

    /// A pod utility with the environment Prow gives it: the emulator, the job spec.
    fn utility(&self, name: &str) -> Command {
        let mut cmd = self.env.program(go_tool(&format!("prow/{name}")));
        cmd.env("STORAGE_EMULATOR_HOST", self.gcs.emulator_host()).env("JOB_SPEC", self.job_spec());
        cmd
    }

    /// initupload, then the test container's `command` + `args` under entrypoint with the sidecar
    /// beside it, as the pod runs them; the sidecar's output.
    fn run(&self, command_and_args: &[String], extra_env: &[(&str, &str)]) -> String {
        std::fs::create_dir_all(self.artifacts()).unwrap();
        let mut initupload = self.utility("initupload");
        initupload.env("INITUPLOAD_OPTIONS", self.gcs_options().to_string());
        let output = initupload.output().unwrap();
        assert!(output.status.success(), "initupload: {}", text(&output));

        let wrapper = self.wrapper(command_and_args);
        let mut gcs_options = self.gcs_options();
        gcs_options["items"] = json!([self.artifacts()]);
        let mut sidecar = self.utility("sidecar");
        sidecar
            .env("SIDECAR_OPTIONS", json!({"gcs_options": gcs_options, "entries": [wrapper]}).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let sidecar = sidecar.spawn().unwrap();

        let mut entrypoint = self.utility("entrypoint");
        let mut options = wrapper;
        options["timeout"] = json!(20 * 60 * 1_000_000_000u64);
        options["grace_period"] = json!(15 * 1_000_000_000u64);
        options["artifact_dir"] = json!(self.artifacts());
        entrypoint
            .env("ENTRYPOINT_OPTIONS", options.to_string())
            .env("ARTIFACTS", self.artifacts())
            .env("JOB_NAME", &self.job)
            .env("BUILD_ID", &self.build)
            .env("JOB_TYPE", "periodic");
        for (name, value) in extra_env {
            entrypoint.env(name, value);
        }
        let ran = entrypoint.output().unwrap();
        let uploaded = sidecar.wait_with_output().unwrap();
        let log = std::fs::read_to_string(self.logs.join("process-log.txt")).unwrap_or_default();
        assert!(
            uploaded.status.success(),
            "sidecar: {}\nentrypoint: {}\nprocess log:\n{log}",
            text(&uploaded),
            text(&ran)
        );
        String::from_utf8_lossy(&uploaded.stderr).into_owned()
    }

    fn object(&self, name: &str) -> Option<Vec<u8>> {
        self.gcs.download(BUCKET, &format!("logs/{}/{}/{name}", self.job, self.build))
    }

    fn json(&self, name: &str) -> Value {
        let bytes = self.object(name).unwrap_or_else(|| panic!("no {name} in the build: {:?}", self.listing()));
        serde_json::from_slice(&bytes).unwrap()
    }

    fn listing(&self) -> Vec<String> {
        self.gcs.list(BUCKET, &format!("logs/{}/{}/", self.job, self.build))
    }
}

/// The container `harness prow-config` generates for `job`: its `command` and `args`, with the
/// `$(VAR)` references Kubernetes expands from the container's environment expanded.
fn generated_container(env: &Env, job: &str, vars: &[(&str, &str)]) -> Vec<String> {
    let output = env.command("prow-config").arg("--config").arg(&env.config).output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    let jobs: Value = serde_yaml_ng::from_slice(&output.stdout).unwrap();
    let periodic = jobs["periodics"].as_array().unwrap().iter().find(|p| p["name"] == job).unwrap_or_else(|| {
        panic!("no periodic {job} in:\n{}", String::from_utf8_lossy(&output.stdout));
    });
    let container = &periodic["spec"]["containers"][0];
    let words = container["command"].as_array().unwrap().iter().chain(container["args"].as_array().unwrap());
    words
        .map(|word| {
            let mut word = word.as_str().unwrap().to_owned();
            for (name, value) in vars {
                word = word.replace(&format!("$({name})"), value);
            }
            word
        })
        .collect()
}

/// TestGrid's grid for `job`, from the test group `harness testgrid-config` generates.
fn testgrid(env: &Env, gcs: &FakeGcs, job: &str) -> Grid {
    let config = env.root.join("testgrid.yaml");
    let output =
        env.command("testgrid-config").arg("--config").arg(&env.config).arg("-o").arg(&config).output().unwrap();
    assert!(output.status.success(), "{}", text(&output));
    ReadGrid { name: Some(job.to_owned()), config_yaml: Some(config), ..ReadGrid::new(&format!("{BUCKET}/logs/{job}")) }
        .run(gcs.emulator_host())
}

/// The harness binary's directory first on `PATH`, as in the job's image.
fn path_with_harness() -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_harness")).parent().unwrap().to_path_buf();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default())
}

#[test]
fn a_generated_job_under_prows_pod_utilities_reaches_testgrid_with_the_harness_versions_in_its_headers() {
    let env = Env::new();
    let gcs = FakeGcs::start();
    gcs.create_bucket(BUCKET);
    let job = "ci-cloud-provider-fixture-k8s-1.37";
    let path = path_with_harness();
    let column = |build: &str, provider: &str, passes: bool| {
        let pod = Pod {
            env: &env,
            gcs: &gcs,
            logs: env.root.join(format!("pod-{build}/logs")),
            job: job.into(),
            build: build.into(),
        };
        let artifacts = pod.artifacts().display().to_string();
        let mut args =
            generated_container(&env, job, &[("JOB_NAME", job), ("BUILD_ID", build), ("ARTIFACTS", &artifacts)]);
        // The fixture's job with another provider's CCM: `broken` fails its Deploy step.
        if let Some(at) = args.iter().position(|a| a == "--provider") {
            args[at + 1] = provider.into();
        }
        args.extend(["--config".into(), env.config.display().to_string()]);
        let sidecar_log = pod.run(&args, &[("PATH", &path), ("PROVIDER_VERSION", "abc123")]);
        assert!(!sidecar_log.contains("Failed to upload"), "{sidecar_log}");

        // Prow's own files, with the harness's metadata merged into finished.json.
        let started = pod.json("started.json");
        assert!(started["timestamp"].as_i64().is_some(), "initupload's started.json: {started}");
        let finished = pod.json("finished.json");
        assert_eq!(finished["passed"], passes, "{finished}");
        assert_eq!(finished["result"], if passes { "SUCCESS" } else { "FAILURE" });
        assert_eq!(finished["metadata"]["kubernetes-version"], "v1.37.1", "{finished}");
        assert_eq!(finished["metadata"]["provider-version"], "abc123", "{finished}");
        let log = String::from_utf8(pod.object("build-log.txt").expect("build-log.txt")).unwrap();
        assert!(log.contains("harness run: provider"), "the container's output is the build log:\n{log}");
        let listing = pod.listing();
        for file in ["artifacts/junit_runner.xml", "artifacts/metadata.json"] {
            assert!(listing.iter().any(|o| o.ends_with(file)), "{file} not uploaded: {listing:?}");
        }
        let competing: Vec<_> =
            listing.iter().filter(|o| o.contains("/artifacts/") && o.ends_with("ed.json")).collect();
        assert!(competing.is_empty(), "a second started.json or finished.json: {competing:?}");
        assert_eq!(
            String::from_utf8(gcs.download(BUCKET, &format!("logs/{job}/latest-build.txt")).unwrap()).unwrap(),
            build
        );
    };
    column("1001", "fixture", true);
    column("1002", "broken", false);

    let grid = testgrid(&env, &gcs, job);
    let builds: Vec<&str> = grid.columns.iter().map(|c| c.build.as_str()).collect();
    assert_eq!(builds, ["1002", "1001"], "{grid:#?}");
    for column in &grid.columns {
        assert_eq!(column.extra, ["v1.37.1", "abc123"], "column headers kubernetes-version, provider-version");
    }
    let overall = grid.row(&format!("{job}.Overall"));
    assert_eq!(overall.results, ["FAIL", "PASS"], "{overall:?}");
    let deploy = grid.rows.iter().find(|r| r.name.ends_with(".Deploy")).unwrap_or_else(|| panic!("{grid:#?}"));
    assert_eq!(deploy.results, ["FAIL", "PASS"], "{deploy:?}");
    env.assert_nothing_left();
}

//! Upstream's conformance image, `registry.k8s.io/conformance:<version>`, built here as
//! `test/conformance/image` of the release builds it: the release's `ginkgo`, `e2e.test` and
//! `kubectl` in `/usr/local/bin`, its go-runner (`test/conformance/image/go-runner`) as
//! `/usr/local/bin/kubeconformance` (the entrypoint) and as the legacy `/run_e2e.sh` and
//! `/gorunner`, the module's `cluster/` as `/kubernetes/cluster` (go-runner's `--repo-root`), and
//! the Dockerfile's environment. It is what Hydrophone and Sonobuoy run in a pod; real nodes get it
//! only when asked (`harness cluster up --conformance-image`), since it weighs about 200 MB.
//!
//! One difference from upstream's: the base is the busybox layer of the node images (a shell,
//! `/tmp`, a `nobody` user) rather than `debian-base` (bookworm); go-runner, ginkgo and the test
//! binaries are static Go programs that need nothing else of it.
//!
//! Cached in `<images dir>/<version>-conformance/`, built in a `.partial` directory and renamed
//! into place, with a [`oci::RegistryIndex`] of its own that the cluster's registry serves beside
//! the node images'.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::{Image, ImageError, PATH_ENV, Result, busybox, busybox_layer, io_err, oci, take_turn};
use toolchain::{Release, Toolchain};

/// The image's `ImageID`, as [`Image::id`] names it (upstream's manifest.go does not list it).
pub const ID: &str = "Conformance";

/// Where the archive and its registry index are cached.
fn cache_dir(release: &Release) -> PathBuf {
    let images = super::dir(release);
    let parent = images.parent().expect("images/format-N/<version>");
    parent.join(format!("{}-conformance", release.cache_key()))
}

/// `registry.k8s.io/conformance:<version>`, the name Hydrophone derives from the server version.
pub fn reference(release: &Release) -> String {
    format!("{}/conformance:{}", oci::MIRRORED_REGISTRY, release.image_tag())
}

/// The conformance image of `release` and its registry index, built unless cached.
pub fn install(release: &Release, toolchain: &Toolchain) -> Result<(Image, PathBuf)> {
    let dir = cache_dir(release);
    let archive = dir.join("conformance.oci.tar");
    let index = dir.join("registry.json");
    let image = Image { id: ID, reference: reference(release), archive: archive.clone() };
    if index.is_file() {
        return Ok((image, index));
    }
    let parent = dir.parent().expect("images/format-N");
    fs::create_dir_all(parent).map_err(io_err("creating", parent))?;
    let _turn = take_turn(&parent.join(format!("{}-conformance.lock", release.cache_key())))?;
    if index.is_file() {
        return Ok((image, index));
    }
    let step = cli_support::progress::step(format!("building the conformance image of Kubernetes {}", release.version));
    let partial = parent.join(format!("{}-conformance.partial", release.cache_key()));
    let _ = fs::remove_dir_all(&partial);
    fs::create_dir_all(&partial).map_err(io_err("creating", &partial))?;
    build(release, toolchain, &partial)
        .map_err(|e| ImageError::Build { image: image.reference.clone(), detail: e.to_string() })?;
    let _ = fs::remove_dir_all(&dir);
    fs::rename(&partial, &dir).map_err(io_err("renaming into place", &dir))?;
    step.done();
    Ok((image, index))
}

fn build(release: &Release, toolchain: &Toolchain, partial: &Path) -> Result<()> {
    let source = toolchain::kubernetes_source(release)?;
    let read = |name: &str| {
        let path = toolchain.binary(name);
        fs::read(&path).map_err(io_err("reading", &path))
    };
    let base = busybox_layer(&busybox::binary(&source, partial)?, &read("wget")?)?;
    let runner = read("go-runner")?;
    let (ginkgo, e2e, kubectl) = (read("ginkgo")?, read("e2e.test")?, read("kubectl")?);
    let mut layer = oci::Layer::new();
    for dir in ["usr", "usr/local", "usr/local/bin", "kubernetes", "kubernetes/cluster"] {
        layer.dir(dir, 0o755)?;
    }
    for (path, contents) in [
        ("usr/local/bin/ginkgo", &ginkgo),
        ("usr/local/bin/e2e.test", &e2e),
        ("usr/local/bin/kubectl", &kubectl),
        ("usr/local/bin/kubeconformance", &runner),
        ("run_e2e.sh", &runner),
        ("gorunner", &runner),
    ] {
        layer.file(path, contents, 0o755)?;
    }
    layer.tree_under(&source.join("cluster"), "kubernetes/cluster")?;
    let files = layer.finish()?;
    let archive = partial.join("conformance.oci.tar");
    oci::write_archive(&archive, &reference(release), &[&base, &files], config(release))?;
    let mut index = oci::RegistryIndex::default();
    index.add_archive(&archive)?;
    let index_path = partial.join("registry.json");
    fs::write(&index_path, serde_json::to_vec_pretty(&index).expect("serialises"))
        .map_err(io_err("writing", &index_path))
}

/// The Dockerfile's `ENV` and `ENTRYPOINT`.
fn config(release: &Release) -> serde_json::Value {
    json!({
        "Entrypoint": ["kubeconformance"],
        "Env": [
            PATH_ENV,
            "E2E_FOCUS=\\[Conformance\\]",
            "E2E_SKIP=",
            "E2E_PROVIDER=local",
            "E2E_PARALLEL=1",
            "E2E_VERBOSITY=4",
            "RESULTS_DIR=/tmp/results",
            "KUBECONFIG=",
        ],
        "Labels": {
            "org.opencontainers.image.version": release.version,
            "org.opencontainers.image.vendor": "built by cloud-provider-harness",
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `ENV` lines of `test/conformance/image/Dockerfile` (v1.36 and v1.37 alike).
    const DOCKERFILE_ENV: &str = r#"ENV E2E_FOCUS="\[Conformance\]"
ENV E2E_SKIP=""
ENV E2E_PROVIDER="local"
ENV E2E_PARALLEL="1"
ENV E2E_VERBOSITY="4"
ENV RESULTS_DIR="/tmp/results"
ENV KUBECONFIG=""
"#;

    #[test]
    fn the_environment_and_entrypoint_are_the_dockerfiles() {
        let release = toolchain::resolve(None).unwrap();
        let config = config(&release);
        let env: Vec<&str> = config["Env"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        let expected: Vec<String> = DOCKERFILE_ENV
            .lines()
            .map(|line| line.strip_prefix("ENV ").unwrap().replacen("=\"", "=", 1).trim_end_matches('"').to_owned())
            .collect();
        assert_eq!(env[1..], expected.iter().map(String::as_str).collect::<Vec<_>>()[..]);
        assert!(env[0].starts_with("PATH=") && env[0].contains("/usr/local/bin"), "kubeconformance is found on PATH");
        assert_eq!(config["Entrypoint"], json!(["kubeconformance"]));
        assert_eq!(reference(&release), format!("registry.k8s.io/conformance:{}", release.image_tag()));
    }
}

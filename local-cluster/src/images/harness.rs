//! The harness's own image, which its Prow jobs and `deploy/` run: built here like the node images
//! (no Docker), an OCI image archive `ctr images import` takes (`harness cluster up --image`).
//!
//! Two layers: Debian's C library and `libgcc_s` (what the Rust binaries link; `apt-get download`
//! of this machine's release, so they are the ones the binaries were built against), with the
//! machine's CA bundle at `/etc/ssl/certs/ca-certificates.crt`, `/etc/passwd` and `/etc/group` naming
//! root and nonroot (65532, as `deploy/` runs it), and `/tmp`; then `harness` and `reference-ccm` in
//! `/usr/local/bin` and the providers file the image was built with at
//! `/etc/cloud-provider-harness/providers.yaml`. The config sets `PATH`, `SSL_CERT_FILE` and the
//! OCI labels `org.opencontainers.image.{version,revision,source}`; no entrypoint (Prow's
//! decoration and `deploy/` name the command).

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::oci::{Layer, write_archive};
use super::{ImageError, Result, debian, io_err};

/// This image's name in errors and in the Debian layer's work directory.
const IMAGE: &str = "harness";

/// The machine's CA bundle (Debian's `update-ca-certificates` output).
const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

const PASSWD: &[u8] =
    b"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n";
const GROUP: &[u8] = b"root:x:0:\nnonroot:x:65532:\n";

/// What goes into the image.
pub struct Contents<'a> {
    /// `name:tag`, e.g. `ghcr.io/cloud-provider-harness/harness:v0.1.0-0123456789ab`.
    pub reference: &'a str,
    pub harness: &'a Path,
    pub reference_ccm: &'a Path,
    pub providers_file: &'a [u8],
    /// `org.opencontainers.image.version` (the tag) and `.revision` (the commit, if known).
    pub version: &'a str,
    pub revision: Option<&'a str>,
}

/// The built archive.
#[derive(Debug, Clone)]
pub struct Built {
    pub archive: PathBuf,
    pub bytes: u64,
    /// Each layer's size, bottom up.
    pub layer_bytes: Vec<u64>,
}

/// Builds the image into the archive `output` (written in full or not at all), working in `work`.
pub fn build(contents: &Contents<'_>, output: &Path, work: &Path) -> Result<Built> {
    let base = base_layer(work)?;
    let binaries = binaries_layer(contents)?;
    let labels = json!({
        "org.opencontainers.image.version": contents.version,
        "org.opencontainers.image.revision": contents.revision.unwrap_or(""),
        "org.opencontainers.image.source": format!("https://github.com/{}", config::prow::DEFAULT_REPO),
    });
    let config = json!({
        "Env": ["PATH=/usr/local/bin:/usr/bin:/bin", format!("SSL_CERT_FILE={CA_BUNDLE}")],
        "Labels": labels,
    });
    let partial = output
        .with_file_name(format!(".{}.partial", output.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()));
    write_archive(&partial, contents.reference, &[&base, &binaries], config)?;
    fs::rename(&partial, output).map_err(io_err("renaming into place", output))?;
    let bytes = fs::metadata(output).map_err(io_err("reading", output))?.len();
    Ok(Built { archive: output.to_path_buf(), bytes, layer_bytes: vec![base.len() as u64, binaries.len() as u64] })
}

fn base_layer(work: &Path) -> Result<Vec<u8>> {
    let ca_bundle = fs::read(CA_BUNDLE).map_err(|e| ImageError::Missing {
        image: IMAGE.into(),
        what: format!("the CA bundle {CA_BUNDLE} ({e})"),
        hint: "install Debian's ca-certificates (apt-get install ca-certificates)".into(),
    })?;
    let files: [(&str, &[u8], u32); 3] = [
        ("etc/ssl/certs/ca-certificates.crt", &ca_bundle, 0o644),
        ("etc/passwd", PASSWD, 0o644),
        ("etc/group", GROUP, 0o644),
    ];
    fs::create_dir_all(work).map_err(io_err("creating", work))?;
    super::debian_layer(IMAGE, &["libc6", "libgcc-s1"], &debian::Extra { files: &files, links: &[] }, work)
}

fn binaries_layer(contents: &Contents<'_>) -> Result<Vec<u8>> {
    let read = |path: &Path| fs::read(path).map_err(io_err("reading", path));
    let (harness, ccm) = (read(contents.harness)?, read(contents.reference_ccm)?);
    let mut layer = Layer::new();
    layer.dir("tmp", 0o1777)?;
    for dir in ["usr", "usr/local", "usr/local/bin", "etc", "etc/cloud-provider-harness", "home", "home/nonroot"] {
        layer.dir(dir, 0o755)?;
    }
    layer.file("usr/local/bin/harness", &harness, 0o755)?;
    layer.file("usr/local/bin/reference-ccm", &ccm, 0o755)?;
    let providers_file = config::prow::IMAGE_PROVIDERS_FILE.trim_start_matches('/');
    layer.file(providers_file, contents.providers_file, 0o644)?;
    layer.finish()
}

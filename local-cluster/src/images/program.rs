//! An image of one program, which is its entrypoint: how Prow ships its pod utilities
//! (`initupload`, `entrypoint`, `sidecar`), whose containers Prow's decoration gives arguments and
//! environment but no command (`pkg/pod-utils/decorate/podspec.go`; `entrypoint --copy-mode-only`
//! copies its own binary into the job's `/tools`). Built here like the harness's image (no Docker):
//! one layer of the program at `/<its file name>`, the machine's CA bundle and `/tmp`.
//!
//! The program must need no shared library (a Go program built with `CGO_ENABLED=0`, as Prow's
//! are): the image has no C library.

use std::fs;
use std::path::Path;

use serde_json::json;

use super::harness::{Built, CA_BUNDLE, ca_bundle, write_whole};
use super::oci::Layer;
use super::{ImageError, Result, io_err};

/// What goes into the image.
pub struct Program<'a> {
    /// `name:tag`, e.g. `gcr.io/k8s-prow/sidecar:v20250307-7a867cddc`.
    pub reference: &'a str,
    pub binary: &'a Path,
    /// `NAME=value`s the image's config sets, after `PATH` and `SSL_CERT_FILE` (Prow's
    /// `STORAGE_EMULATOR_HOST`, which its uploads read and its decoration cannot set on its own
    /// containers).
    pub env: &'a [String],
}

/// Builds the image into the archive `output` (written in full or not at all).
pub fn build(program: &Program<'_>, output: &Path) -> Result<Built> {
    let name =
        program.binary.file_name().map(|n| n.to_string_lossy().into_owned()).ok_or_else(|| ImageError::Build {
            image: program.reference.into(),
            detail: format!("{} names no program", program.binary.display()),
        })?;
    let binary = fs::read(program.binary).map_err(io_err("reading", program.binary))?;
    let ca = ca_bundle(program.reference)?;
    let mut layer = Layer::new();
    layer.dir("tmp", 0o1777)?;
    for dir in ["etc", "etc/ssl", "etc/ssl/certs"] {
        layer.dir(dir, 0o755)?;
    }
    layer.file(CA_BUNDLE.trim_start_matches('/'), &ca, 0o644)?;
    layer.file(&name, &binary, 0o755)?;
    let layer = layer.finish()?;
    let mut env = vec!["PATH=/usr/local/bin:/usr/bin:/bin".to_owned(), format!("SSL_CERT_FILE={CA_BUNDLE}")];
    env.extend(program.env.iter().cloned());
    let config = json!({ "Entrypoint": [format!("/{name}")], "Env": env });
    write_whole(output, program.reference, &[&layer], config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_is_the_entrypoint_and_the_environment_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let binary = dir.path().join("sidecar");
        fs::write(&binary, b"#!/bin/sh\n").unwrap();
        let output = dir.path().join("sidecar.oci.tar");
        let env = ["STORAGE_EMULATOR_HOST=http://10.250.0.1:4443".to_owned()];
        let built =
            build(&Program { reference: "example.com/sidecar:v1", binary: &binary, env: &env }, &output).unwrap();
        assert_eq!(built.archive, output);
        assert_eq!(super::super::oci::archive_reference(&output).unwrap(), "example.com/sidecar:v1");
        let config = super::super::oci::archive_config(&output).unwrap();
        assert_eq!(config["config"]["Entrypoint"], json!(["/sidecar"]));
        let env = config["config"]["Env"].as_array().unwrap();
        assert!(env.contains(&json!("STORAGE_EMULATOR_HOST=http://10.250.0.1:4443")), "{env:?}");
        assert!(!dir.path().read_dir().unwrap().flatten().any(|e| e.file_name().to_string_lossy().contains("partial")));
    }
}

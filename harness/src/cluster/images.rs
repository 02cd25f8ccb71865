//! Container images for real nodes, built on this machine: no registry, no Docker. Each is an OCI
//! image archive (an OCI image layout in a tar) under the upstream name the pinned release's
//! conformance tests use (`test/utils/image/manifest.go` of the `k8s.io/kubernetes` module), so a
//! pod that says `registry.k8s.io/e2e-test-images/agnhost:2.66.1` starts from what `ctr images
//! import` put in the node's containerd.
//!
//! - `pause`: `build/pause/linux/pause.c` of the module, `gcc -static`, as upstream builds it;
//! - `busybox`: Debian's static busybox (`busybox-static`) with a link per applet;
//! - `agnhost`: the toolchain's `agnhost` (built from the module's `test/images/agnhost`) over the
//!   busybox layer, entrypoint `/agnhost` as upstream's.
//!
//! Archives are cached in `<cache>/images/<version>/`; a build happens in `<version>.partial` and
//! is renamed into place, so an entry is whole or absent. Layers are uncompressed tars: their digest
//! is their diff ID, and nothing crosses a network.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use sha2::{Digest, Sha256};

use crate::toolchain::{self, Release, Toolchain};

/// The Debian package whose static busybox the images carry.
pub const BUSYBOX: &str = "/bin/busybox";

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error(
        "test/utils/image/manifest.go of Kubernetes {version} does not name image {image}; this harness builds {known}"
    )]
    NotInManifest { version: String, image: String, known: String },
    #[error("{what} is needed to build the {image} image: {hint}")]
    Missing { image: String, what: String, hint: String },
    #[error("building the {image} image: {detail}")]
    Build { image: String, detail: String },
    #[error(transparent)]
    Toolchain(#[from] toolchain::ToolchainError),
    #[error("{action} {path}: {source}")]
    Io { action: &'static str, path: PathBuf, source: std::io::Error },
}

type Result<T> = std::result::Result<T, ImageError>;

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ImageError {
    let path = path.to_path_buf();
    move |source| ImageError::Io { action, path, source }
}

/// The images built here, by their `ImageID` in `manifest.go` (and [`COREDNS`], which is not there).
pub const BUILT: &[&str] = &["Pause", "BusyBox", "Agnhost", COREDNS];

/// The cluster DNS's image: the toolchain's CoreDNS.
pub const COREDNS: &str = "CoreDNS";

/// The name the CoreDNS image is imported under (kubeadm's repository, the pinned version).
pub fn coredns_reference() -> String {
    let version =
        toolchain::pins::required_version(&toolchain::pins::COREDNS, "github.com/coredns/coredns").unwrap_or("v0");
    format!("registry.k8s.io/coredns/coredns:{version}")
}

/// A built image: its upstream reference and its archive.
#[derive(Debug, Clone)]
pub struct Image {
    pub id: &'static str,
    pub reference: String,
    pub archive: PathBuf,
}

/// The references of `manifest.go` (its `initRegistry` and `configs[...]` lines), by `ImageID`.
pub fn references(manifest_go: &str) -> BTreeMap<String, String> {
    let registry = regex::Regex::new(r#"^\s*(\w+Registry):\s*"([^"]+)",\s*$"#).expect("a valid regex");
    let config = regex::Regex::new(r#"configs\[(\w+)\]\s*=\s*Config\{list\.(\w+),\s*"([^"]+)",\s*"([^"]+)"\}"#)
        .expect("a valid regex");
    let registries: BTreeMap<&str, &str> = manifest_go
        .lines()
        .filter_map(|line| registry.captures(line))
        .map(|c| (c.get(1).unwrap().as_str(), c.get(2).unwrap().as_str()))
        .collect();
    config
        .captures_iter(manifest_go)
        .filter_map(|c| {
            let registry = registries.get(&c[2])?;
            Some((c[1].to_string(), format!("{registry}/{}:{}", &c[3], &c[4])))
        })
        .collect()
}

/// The image archives of `release`, built unless cached.
pub fn install(release: &Release, toolchain: &Toolchain) -> Result<Vec<Image>> {
    let dir = toolchain::cache_root().join("images").join(release.version);
    let index = dir.join("images.json");
    if let Ok(text) = fs::read_to_string(&index)
        && let Ok(recorded) = serde_json::from_str::<BTreeMap<String, String>>(&text)
        && BUILT.iter().all(|id| recorded.contains_key(*id) && dir.join(archive_name(id)).is_file())
    {
        return Ok(BUILT
            .iter()
            .map(|id| Image { id, reference: recorded[*id].clone(), archive: dir.join(archive_name(id)) })
            .collect());
    }
    let step = crate::progress::step(format!("building the node images of Kubernetes {}", release.version));
    let source = toolchain::kubernetes_source(release)?;
    let manifest_path = source.join("test/utils/image/manifest.go");
    let manifest_go = fs::read_to_string(&manifest_path).map_err(io_err("reading", &manifest_path))?;
    let names = references(&manifest_go);
    let reference = |id: &str| {
        if id == COREDNS {
            return Ok(coredns_reference());
        }
        names.get(id).cloned().ok_or_else(|| ImageError::NotInManifest {
            version: release.version.into(),
            image: id.into(),
            known: BUILT.join(", "),
        })
    };

    let partial = dir.with_extension("partial");
    let _ = fs::remove_dir_all(&partial);
    fs::create_dir_all(&partial).map_err(io_err("creating", &partial))?;
    let busybox = busybox_layer()?;
    let pause = pause_layer(&source, &partial)?;
    let agnhost = file_layer(&[(
        "agnhost",
        &fs::read(toolchain.binary("agnhost")).map_err(io_err("reading", &toolchain.binary("agnhost")))?,
    )])?;
    let coredns_path = toolchain.binary("coredns");
    let coredns = file_layer(&[("coredns", &fs::read(&coredns_path).map_err(io_err("reading", &coredns_path))?)])?;
    let builds: [(&'static str, Vec<&[u8]>, serde_json::Value); 4] = [
        ("Pause", vec![&pause], json!({"Entrypoint": ["/pause"]})),
        ("BusyBox", vec![&busybox], json!({"Cmd": ["sh"], "Env": [PATH_ENV]})),
        ("Agnhost", vec![&busybox, &agnhost], json!({"Entrypoint": ["/agnhost"], "Cmd": ["pause"], "Env": [PATH_ENV]})),
        (COREDNS, vec![&coredns], json!({"Entrypoint": ["/coredns"]})),
    ];
    let mut recorded = BTreeMap::new();
    for (id, layers, config) in builds {
        let reference = reference(id)?;
        let path = partial.join(archive_name(id));
        write_archive(&path, &reference, &layers, config)?;
        recorded.insert(id.to_string(), reference);
    }
    let index_partial = partial.join("images.json");
    fs::write(&index_partial, serde_json::to_vec_pretty(&recorded).expect("serialises"))
        .map_err(io_err("writing", &index_partial))?;
    let _ = fs::remove_dir_all(&dir);
    fs::rename(&partial, &dir).map_err(io_err("renaming into place", &dir))?;
    step.done();
    Ok(BUILT
        .iter()
        .map(|id| Image { id, reference: recorded[*id].clone(), archive: dir.join(archive_name(id)) })
        .collect())
}

const PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn archive_name(id: &str) -> String {
    format!("{}.oci.tar", id.to_lowercase())
}

/// The pause binary: upstream's `CFLAGS` (`-Os -Wall -Werror -static`).
fn pause_layer(source: &Path, work: &Path) -> Result<Vec<u8>> {
    let out = work.join("pause");
    let missing = |what: &str| ImageError::Missing {
        image: "pause".into(),
        what: what.into(),
        hint: "install gcc and libc6-dev (apt-get install gcc libc6-dev)".into(),
    };
    let output = Command::new("gcc")
        .args(["-Os", "-Wall", "-Werror", "-static", "-DVERSION=harness", "-o"])
        .arg(&out)
        .arg(source.join("build/pause/linux/pause.c"))
        .output()
        .map_err(|_| missing("gcc"))?;
    if !output.status.success() {
        return Err(ImageError::Build {
            image: "pause".into(),
            detail: String::from_utf8_lossy(&output.stderr).into(),
        });
    }
    let binary = fs::read(&out).map_err(io_err("reading", &out))?;
    let _ = fs::remove_file(&out);
    file_layer(&[("pause", &binary)])
}

/// Debian's static busybox at `/bin/busybox`, a symlink per applet in the directories upstream's
/// busybox image has them, `/etc/passwd`, `/etc/group` and `/tmp`.
fn busybox_layer() -> Result<Vec<u8>> {
    let missing = || ImageError::Missing {
        image: "busybox".into(),
        what: format!("a static busybox at {BUSYBOX}"),
        hint: "install Debian's busybox-static (apt-get install busybox-static)".into(),
    };
    let binary = fs::read(BUSYBOX).map_err(|_| missing())?;
    if !is_static_elf(&binary) {
        return Err(missing());
    }
    let list = Command::new(BUSYBOX).arg("--list-full").output().map_err(|_| missing())?;
    let applets: Vec<String> = String::from_utf8_lossy(&list.stdout).lines().map(str::to_owned).collect();
    let mut builder = tar::Builder::new(Vec::new());
    for dir in ["bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "tmp", "root", "var", "proc", "sys", "dev"] {
        let mode = if dir == "tmp" { 0o1777 } else { 0o755 };
        append_dir(&mut builder, dir, mode)?;
    }
    append_file(&mut builder, "bin/busybox", &binary, 0o755)?;
    for applet in applets.iter().filter(|a| a.as_str() != "bin/busybox") {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        header.set_mode(0o777);
        header.set_mtime(0);
        builder.append_link(&mut header, applet, "/bin/busybox").map_err(tar_err("busybox"))?;
    }
    append_file(
        &mut builder,
        "etc/passwd",
        b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
        0o644,
    )?;
    append_file(&mut builder, "etc/group", b"root:x:0:\nnogroup:x:65534:\n", 0o644)?;
    builder.into_inner().map_err(tar_err("busybox"))
}

fn is_static_elf(binary: &[u8]) -> bool {
    // A dynamically linked ELF names its interpreter in a PT_INTERP segment: look for the path.
    binary.starts_with(b"\x7fELF") && !binary.windows(14).any(|w| w == b"/lib64/ld-linu")
}

/// A layer of executables at the root.
fn file_layer(files: &[(&str, &[u8])]) -> Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, contents) in files {
        append_file(&mut builder, name, contents, 0o755)?;
    }
    builder.into_inner().map_err(tar_err("a layer"))
}

fn tar_err(what: &str) -> impl FnOnce(std::io::Error) -> ImageError {
    let image = what.to_string();
    move |e| ImageError::Build { image, detail: e.to_string() }
}

fn append_file(builder: &mut tar::Builder<Vec<u8>>, path: &str, contents: &[u8], mode: u32) -> Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(contents.len() as u64);
    header.set_mode(mode);
    header.set_mtime(0);
    header.set_entry_type(tar::EntryType::Regular);
    builder.append_data(&mut header, path, contents).map_err(tar_err(path))
}

fn append_dir(builder: &mut tar::Builder<Vec<u8>>, path: &str, mode: u32) -> Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_size(0);
    header.set_mode(mode);
    header.set_mtime(0);
    header.set_entry_type(tar::EntryType::Directory);
    builder.append_data(&mut header, format!("{path}/"), std::io::empty()).map_err(tar_err(path))
}

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Writes an OCI image layout holding one linux/amd64 image named `reference` as a tar at `path`.
pub fn write_archive(path: &Path, reference: &str, layers: &[&[u8]], config: serde_json::Value) -> Result<()> {
    let layer_digests: Vec<String> = layers.iter().map(|l| digest(l)).collect();
    let image_config = serde_json::to_vec(&json!({
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": layer_digests},
    }))
    .expect("serialises");
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(&image_config), "size": image_config.len()},
        "layers": layers.iter().zip(&layer_digests).map(|(layer, d)| json!({
            "mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": d, "size": layer.len(),
        })).collect::<Vec<_>>(),
    }))
    .expect("serialises");
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": digest(&manifest),
            "size": manifest.len(),
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {
                "io.containerd.image.name": reference,
                "org.opencontainers.image.ref.name": reference.rsplit_once(':').map_or(reference, |(_, tag)| tag),
            },
        }],
    }))
    .expect("serialises");

    let mut builder = tar::Builder::new(Vec::new());
    append_file(&mut builder, "oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#, 0o644)?;
    append_file(&mut builder, "index.json", &index, 0o644)?;
    let mut blobs: Vec<&[u8]> = vec![&image_config, &manifest];
    blobs.extend(layers.iter().copied());
    let mut written = std::collections::BTreeSet::new();
    for blob in blobs {
        let name = format!("blobs/sha256/{}", digest(blob).trim_start_matches("sha256:"));
        if written.insert(name.clone()) {
            append_file(&mut builder, &name, blob, 0o644)?;
        }
    }
    let bytes = builder.into_inner().map_err(tar_err(reference))?;
    let mut file = fs::File::create(path).map_err(io_err("creating", path))?;
    file.write_all(&bytes).map_err(io_err("writing", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST_GO: &str = r#"
	initRegistry = RegistryList{
		PromoterE2eRegistry:      "registry.k8s.io/e2e-test-images",
		GcRegistry:               "registry.k8s.io",
	}
	configs[Agnhost] = Config{list.PromoterE2eRegistry, "agnhost", "2.66.1"}
	configs[BusyBox] = Config{list.PromoterE2eRegistry, "busybox", "1.37.0-2"}
	configs[Pause] = Config{list.GcRegistry, "pause", "3.10.2"}
"#;

    #[test]
    fn references_are_the_upstream_names_of_the_manifest() {
        let refs = references(MANIFEST_GO);
        assert_eq!(refs["Agnhost"], "registry.k8s.io/e2e-test-images/agnhost:2.66.1");
        assert_eq!(refs["BusyBox"], "registry.k8s.io/e2e-test-images/busybox:1.37.0-2");
        assert_eq!(refs["Pause"], "registry.k8s.io/pause:3.10.2");
    }

    #[test]
    fn an_archive_is_an_oci_layout_whose_digests_match_its_blobs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.tar");
        let layer = file_layer(&[("hello", b"hi")]).unwrap();
        write_archive(&path, "registry.k8s.io/x:1", &[&layer], json!({"Cmd": ["/hello"]})).unwrap();
        let mut archive = tar::Archive::new(fs::File::open(&path).unwrap());
        let mut files = BTreeMap::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut bytes).unwrap();
            files.insert(entry.path().unwrap().display().to_string(), bytes);
        }
        for (name, bytes) in &files {
            if let Some(hash) = name.strip_prefix("blobs/sha256/") {
                assert_eq!(digest(bytes), format!("sha256:{hash}"), "{name}");
            }
        }
        let index: serde_json::Value = serde_json::from_slice(&files["index.json"]).unwrap();
        let entry = &index["manifests"][0];
        assert_eq!(entry["annotations"]["io.containerd.image.name"], "registry.k8s.io/x:1");
        let manifest_blob =
            &files[&format!("blobs/sha256/{}", entry["digest"].as_str().unwrap().trim_start_matches("sha256:"))];
        let manifest: serde_json::Value = serde_json::from_slice(manifest_blob).unwrap();
        assert_eq!(manifest["layers"][0]["digest"], digest(&layer));
    }
}

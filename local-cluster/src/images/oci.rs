//! OCI image archives (an OCI image layout in a tar, as `ctr images import` takes), their layers
//! (uncompressed tars: a layer's digest is its diff ID), and the index the registry serves them by.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::{ImageError, Result, io_err};

pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar";

pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

pub(super) fn tar_err(what: &str) -> impl FnOnce(std::io::Error) -> ImageError {
    let image = what.to_string();
    move |e| ImageError::Build { image, detail: e.to_string() }
}

/// A layer being written: entries owned by root, dated the epoch, so equal inputs make equal digests.
pub struct Layer(tar::Builder<Vec<u8>>);

impl Default for Layer {
    fn default() -> Self {
        Self::new()
    }
}

impl Layer {
    pub fn new() -> Self {
        Layer(tar::Builder::new(Vec::new()))
    }

    fn header(kind: tar::EntryType, size: u64, mode: u32) -> tar::Header {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(kind);
        header.set_size(size);
        header.set_mode(mode);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        header
    }

    pub fn file(&mut self, path: &str, contents: &[u8], mode: u32) -> Result<()> {
        let mut header = Self::header(tar::EntryType::Regular, contents.len() as u64, mode);
        self.0.append_data(&mut header, path, contents).map_err(tar_err(path))
    }

    pub fn dir(&mut self, path: &str, mode: u32) -> Result<()> {
        let mut header = Self::header(tar::EntryType::Directory, 0, mode);
        self.0
            .append_data(&mut header, format!("{}/", path.trim_end_matches('/')), std::io::empty())
            .map_err(tar_err(path))
    }

    pub fn symlink(&mut self, path: &str, target: &str) -> Result<()> {
        let mut header = Self::header(tar::EntryType::Symlink, 0, 0o777);
        self.0.append_link(&mut header, path, target).map_err(tar_err(path))
    }

    /// Every file, directory and symlink under `root` (not `root` itself), in name order, modes kept.
    pub fn tree(&mut self, root: &Path) -> Result<()> {
        self.walk(root, root, "")
    }

    /// [`Layer::tree`] with every path under `prefix` (a directory the layer already has).
    pub fn tree_under(&mut self, root: &Path, prefix: &str) -> Result<()> {
        self.walk(root, root, prefix)
    }

    fn walk(&mut self, root: &Path, dir: &Path, prefix: &str) -> Result<()> {
        let mut entries: Vec<_> = fs::read_dir(dir).map_err(io_err("reading", dir))?.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            let relative = path.strip_prefix(root).expect("under root").to_string_lossy().into_owned();
            let name = if prefix.is_empty() { relative } else { format!("{prefix}/{relative}") };
            let meta = fs::symlink_metadata(&path).map_err(io_err("reading", &path))?;
            let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777;
            if meta.file_type().is_symlink() {
                let target = fs::read_link(&path).map_err(io_err("reading", &path))?;
                self.symlink(&name, &target.to_string_lossy())?;
            } else if meta.is_dir() {
                self.dir(&name, mode)?;
                self.walk(root, &path, prefix)?;
            } else if meta.is_file() {
                let contents = fs::read(&path).map_err(io_err("reading", &path))?;
                self.file(&name, &contents, mode)?;
            }
        }
        Ok(())
    }

    pub fn finish(self) -> Result<Vec<u8>> {
        self.0.into_inner().map_err(tar_err("a layer"))
    }
}

/// A layer of files at the given paths, each with its mode (directories on the way made 0755).
pub fn files_layer(files: &[(&str, &[u8], u32)]) -> Result<Vec<u8>> {
    let mut layer = Layer::new();
    let mut made = std::collections::BTreeSet::new();
    for (path, contents, mode) in files {
        let mut parent = String::new();
        for part in path.split('/').collect::<Vec<_>>().split_last().map_or(&[][..], |(_, dirs)| dirs) {
            parent = if parent.is_empty() { part.to_string() } else { format!("{parent}/{part}") };
            if made.insert(parent.clone()) {
                layer.dir(&parent, 0o755)?;
            }
        }
        layer.file(path, contents, *mode)?;
    }
    layer.finish()
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
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": digest(&image_config), "size": image_config.len()},
        "layers": layers.iter().zip(&layer_digests).map(|(layer, d)| json!({
            "mediaType": LAYER_MEDIA_TYPE, "digest": d, "size": layer.len(),
        })).collect::<Vec<_>>(),
    }))
    .expect("serialises");
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": MANIFEST_MEDIA_TYPE,
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

    let mut builder = Layer::new();
    builder.file("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#, 0o644)?;
    builder.file("index.json", &index, 0o644)?;
    let mut blobs: Vec<&[u8]> = vec![&image_config, &manifest];
    blobs.extend(layers.iter().copied());
    let mut written = std::collections::BTreeSet::new();
    for blob in blobs {
        let name = format!("blobs/sha256/{}", digest(blob).trim_start_matches("sha256:"));
        if written.insert(name.clone()) {
            builder.file(&name, blob, 0o644)?;
        }
    }
    let bytes = builder.finish()?;
    let mut file = fs::File::create(path).map_err(io_err("creating", path))?;
    file.write_all(&bytes).map_err(io_err("writing", path))
}

/// The reference an archive from [`write_archive`] (or any OCI image layout in a tar) names: its
/// index's `io.containerd.image.name`.
pub fn archive_reference(path: &Path) -> Result<String> {
    let bad = |detail: String| ImageError::Build { image: path.display().to_string(), detail };
    let mut archive = tar::Archive::new(fs::File::open(path).map_err(io_err("opening", path))?);
    for entry in archive.entries().map_err(io_err("reading", path))? {
        let mut entry = entry.map_err(io_err("reading", path))?;
        if entry.path().map_err(io_err("reading", path))?.as_os_str() != "index.json" {
            continue;
        }
        let mut text = Vec::new();
        entry.read_to_end(&mut text).map_err(io_err("reading", path))?;
        let index: serde_json::Value = serde_json::from_slice(&text).map_err(|e| bad(format!("index.json: {e}")))?;
        return index["manifests"][0]["annotations"]["io.containerd.image.name"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| bad("index.json names no image (io.containerd.image.name)".into()));
    }
    Err(bad("no index.json: not an OCI image archive".into()))
}

/// The image config of an archive from [`write_archive`]: its `config` has the `Entrypoint` and
/// `Env` a container starts with.
pub fn archive_config(path: &Path) -> Result<serde_json::Value> {
    let bad = |detail: String| ImageError::Build { image: path.display().to_string(), detail };
    // The index, the manifest and the config are small; layers are skipped unread.
    let mut small = BTreeMap::new();
    let mut archive = tar::Archive::new(fs::File::open(path).map_err(io_err("opening", path))?);
    for entry in archive.entries().map_err(io_err("reading", path))? {
        let mut entry = entry.map_err(io_err("reading", path))?;
        if entry.size() > 1 << 20 {
            continue;
        }
        let name = entry.path().map_err(io_err("reading", path))?.to_string_lossy().into_owned();
        let mut text = Vec::new();
        entry.read_to_end(&mut text).map_err(io_err("reading", path))?;
        small.insert(name, text);
    }
    let json = |name: &str| -> Result<serde_json::Value> {
        let text = small.get(name).ok_or_else(|| bad(format!("no {name}")))?;
        serde_json::from_slice(text).map_err(|e| bad(format!("{name}: {e}")))
    };
    let blob = |digest: &serde_json::Value| {
        format!("blobs/sha256/{}", digest.as_str().unwrap_or("").trim_start_matches("sha256:"))
    };
    let manifest = json(&blob(&json("index.json")?["manifests"][0]["digest"]))?;
    json(&blob(&manifest["config"]["digest"]))
}

/// Where a blob lies in an archive, as the registry (`tools/kube/registry`) reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobLocation {
    /// The archive's file name, in the directory of the index.
    pub file: String,
    pub offset: u64,
    pub size: u64,
    #[serde(rename = "mediaType")]
    pub media_type: String,
}

/// What the registry serves: each repository's tags (to manifest digests) and every blob's place.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegistryIndex {
    pub repositories: BTreeMap<String, BTreeMap<String, String>>,
    pub blobs: BTreeMap<String, BlobLocation>,
}

/// The registry host whose repositories the index serves (the one real nodes mirror).
pub const MIRRORED_REGISTRY: &str = "registry.k8s.io";

impl RegistryIndex {
    /// Adds the archive at `path` (from [`write_archive`]): its blobs by where their bytes lie in
    /// the tar, its manifest under its reference's repository and tag.
    pub fn add_archive(&mut self, path: &Path) -> Result<()> {
        let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let layout = ArchiveLayout::read(path)?;
        let manifests = layout.index["manifests"].as_array().cloned().unwrap_or_default();
        for (digest, place) in layout.blobs {
            let media_type = manifests
                .iter()
                .find(|m| m["digest"] == digest.as_str())
                .and_then(|m| m["mediaType"].as_str())
                .unwrap_or("application/octet-stream");
            let location = BlobLocation {
                file: file_name.clone(),
                offset: place.offset,
                size: place.size,
                media_type: media_type.into(),
            };
            self.blobs.entry(digest).or_insert(location);
        }
        for manifest in manifests {
            let reference = manifest["annotations"]["io.containerd.image.name"].as_str().unwrap_or_default();
            let digest = manifest["digest"].as_str().unwrap_or_default();
            if let Some((repository, tag)) = split_reference(reference) {
                self.repositories.entry(repository).or_default().insert(tag, digest.to_string());
            }
        }
        Ok(())
    }
}

/// Where one blob's bytes lie in an archive's tar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobPlace {
    pub offset: u64,
    pub size: u64,
}

/// An OCI image archive read once, blobs unread (seeked past, not read through: an archive of a
/// job's image is gigabytes): its `index.json` and where each blob lies.
#[derive(Debug, Clone)]
pub struct ArchiveLayout {
    pub index: serde_json::Value,
    /// By digest (`sha256:…`).
    pub blobs: BTreeMap<String, BlobPlace>,
}

impl ArchiveLayout {
    pub fn read(path: &Path) -> Result<Self> {
        let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let bad = |detail: String| ImageError::Build { image: file_name.clone(), detail };
        let mut archive = tar::Archive::new(fs::File::open(path).map_err(io_err("opening", path))?);
        let mut index_json = None;
        let mut blobs = BTreeMap::new();
        for entry in archive.entries_with_seek().map_err(io_err("reading", path))? {
            let mut entry = entry.map_err(io_err("reading", path))?;
            let name = entry.path().map_err(io_err("reading", path))?.to_string_lossy().into_owned();
            if let Some(hex) = name.strip_prefix("blobs/sha256/") {
                blobs.insert(
                    format!("sha256:{hex}"),
                    BlobPlace { offset: entry.raw_file_position(), size: entry.size() },
                );
            } else if name == "index.json" {
                let mut text = Vec::new();
                entry.read_to_end(&mut text).map_err(io_err("reading", path))?;
                index_json = Some(text);
            }
        }
        let text = index_json.ok_or_else(|| bad("no index.json: not an OCI image archive".into()))?;
        let index = serde_json::from_slice(&text).map_err(|e| bad(format!("index.json: {e}")))?;
        Ok(ArchiveLayout { index, blobs })
    }
}

/// `registry.k8s.io/e2e-test-images/agnhost:2.66.1` → (`e2e-test-images/agnhost`, `2.66.1`), for
/// references of [`MIRRORED_REGISTRY`] only.
pub fn split_reference(reference: &str) -> Option<(String, String)> {
    let rest = reference.strip_prefix(MIRRORED_REGISTRY)?.strip_prefix('/')?;
    let (repository, tag) = rest.rsplit_once(':')?;
    Some((repository.to_string(), tag.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(path: &Path) -> BTreeMap<String, Vec<u8>> {
        let mut archive = tar::Archive::new(fs::File::open(path).unwrap());
        let mut files = BTreeMap::new();
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).unwrap();
            files.insert(entry.path().unwrap().display().to_string(), bytes);
        }
        files
    }

    #[test]
    fn an_archive_is_an_oci_layout_whose_digests_match_its_blobs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.tar");
        let layer = files_layer(&[("hello", b"hi", 0o755)]).unwrap();
        write_archive(&path, "registry.k8s.io/x:1", &[&layer], json!({"Cmd": ["/hello"]})).unwrap();
        let files = read_all(&path);
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

    #[test]
    fn the_registry_index_points_at_each_blobs_bytes_and_tags_the_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let layer = files_layer(&[("usr/local/bin/tool", b"#!/bin/sh\n", 0o755)]).unwrap();
        let path = dir.path().join("tool.oci.tar");
        write_archive(&path, "registry.k8s.io/e2e-test-images/tool:1.2", &[&layer], json!({})).unwrap();
        let mut index = RegistryIndex::default();
        index.add_archive(&path).unwrap();
        // Another registry's image is not served: containerd mirrors registry.k8s.io only.
        let other = dir.path().join("other.oci.tar");
        write_archive(&other, "docker.io/library/tool:1", &[&layer], json!({"Cmd": ["x"]})).unwrap();
        index.add_archive(&other).unwrap();
        assert_eq!(index.repositories.keys().collect::<Vec<_>>(), ["e2e-test-images/tool"]);

        let manifest_digest = &index.repositories["e2e-test-images/tool"]["1.2"];
        let bytes = fs::read(&path).unwrap();
        for (digest_, location) in &index.blobs {
            let file = fs::read(dir.path().join(&location.file)).unwrap();
            let blob = &file[location.offset as usize..(location.offset + location.size) as usize];
            assert_eq!(&digest(blob), digest_, "{location:?}");
        }
        let manifest = &index.blobs[manifest_digest];
        assert_eq!((manifest.file.as_str(), manifest.media_type.as_str()), ("tool.oci.tar", MANIFEST_MEDIA_TYPE));
        let blob = &bytes[manifest.offset as usize..(manifest.offset + manifest.size) as usize];
        let parsed: serde_json::Value = serde_json::from_slice(blob).unwrap();
        assert_eq!(parsed["layers"][0]["digest"], digest(&layer));
        assert!(index.blobs.contains_key(&digest(&layer)));
    }

    #[test]
    fn a_tree_layer_keeps_modes_and_symlinks_and_sorts_its_entries() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("usr/bin")).unwrap();
        fs::write(root.join("usr/bin/b"), "b").unwrap();
        fs::write(root.join("usr/bin/a"), "a").unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(root.join("usr/bin/a"), fs::Permissions::from_mode(0o4755)).unwrap();
        std::os::unix::fs::symlink("/usr/bin/a", root.join("usr/bin/c")).unwrap();
        let mut layer = Layer::new();
        layer.tree(root).unwrap();
        let bytes = layer.finish().unwrap();
        let mut archive = tar::Archive::new(&bytes[..]);
        let entries: Vec<(String, u32, Option<String>)> = archive
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let link = e.link_name().unwrap().map(|l| l.display().to_string());
                (e.path().unwrap().display().to_string(), e.header().mode().unwrap(), link)
            })
            .collect();
        assert_eq!(
            entries,
            [
                ("usr/".into(), 0o755, None),
                ("usr/bin/".into(), 0o755, None),
                ("usr/bin/a".into(), 0o4755, None),
                ("usr/bin/b".into(), 0o644, None),
                ("usr/bin/c".into(), 0o777, Some("/usr/bin/a".into())),
            ]
        );
    }

    #[test]
    fn references_of_other_registries_are_not_split() {
        assert_eq!(
            split_reference("registry.k8s.io/e2e-test-images/agnhost:2.66.1"),
            Some(("e2e-test-images/agnhost".into(), "2.66.1".into()))
        );
        assert_eq!(split_reference("registry.k8s.io/pause:3.10.2"), Some(("pause".into(), "3.10.2".into())));
        assert_eq!(split_reference("invalid.registry.k8s.io/alpine:3.1"), None);
    }

    #[test]
    fn an_archive_names_its_reference_and_anything_else_is_refused_saying_why() {
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("x.oci.tar");
        let layer = files_layer(&[("bin/x", b"x", 0o755)]).unwrap();
        write_archive(&archive, "registry.example/x:v1", &[&layer], json!({})).unwrap();
        assert_eq!(archive_reference(&archive).unwrap(), "registry.example/x:v1");
        let not_oci = dir.path().join("plain.tar");
        fs::write(&not_oci, &layer).unwrap();
        let error = archive_reference(&not_oci).unwrap_err().to_string();
        assert!(error.contains("not an OCI image archive"), "{error}");
    }
}

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
//!
//! A job's image also carries what its runs need offline ([`Contents::offline`]): directories of
//! this machine's cache (a release's toolchain, a provider's CCM, its cloud's virtualenv), at the same
//! place under [`CACHE_DIR`], which the config names as `HARNESS_CACHE_DIR`; and more of Debian's
//! packages in the first layer ([`Contents::debian_packages`]: python3 for moto's virtualenv).

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::oci::{Layer, write_archive};
use super::{ImageError, Result, debian, io_err};

/// This image's name in errors and in the Debian layer's work directory.
const IMAGE: &str = "harness";

/// The machine's CA bundle (Debian's `update-ca-certificates` output).
pub(super) const CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

const PASSWD: &[u8] =
    b"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n";
const GROUP: &[u8] = b"root:x:0:\nnonroot:x:65532:\n";

/// The image's cache root (`HARNESS_CACHE_DIR`), holding [`Contents::offline`].
pub const CACHE_DIR: &str = "/var/cache/cloud-provider-harness";

/// A directory of a cache that the image carries as `<CACHE_DIR>/<relative>`.
#[derive(Debug, Clone)]
pub struct CacheTree {
    pub source: PathBuf,
    /// Its path under the cache root: `toolchains/v1.37.1`, `providers/aws/v1.37.0`.
    pub relative: String,
}

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
    /// What a job needs offline, in a third layer.
    pub offline: &'a [CacheTree],
    /// Debian packages beyond the C library (with their closure).
    pub debian_packages: &'a [&'a str],
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
    let base = base_layer(contents.debian_packages, work)?;
    let binaries = binaries_layer(contents)?;
    let mut layers = vec![base, binaries];
    if !contents.offline.is_empty() {
        layers.push(offline_layer(contents.offline)?);
    }
    let labels = json!({
        "org.opencontainers.image.version": contents.version,
        "org.opencontainers.image.revision": contents.revision.unwrap_or(""),
        "org.opencontainers.image.source": format!("https://github.com/{}", config::prow::DEFAULT_REPO),
    });
    let config = json!({
        "Env": [
            // Debian's root PATH: kube-proxy in a nested node finds iptables in /usr/sbin.
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_owned(),
            format!("SSL_CERT_FILE={CA_BUNDLE}"),
            format!("HARNESS_CACHE_DIR={CACHE_DIR}"),
        ],
        "Labels": labels,
    });
    let layers: Vec<&[u8]> = layers.iter().map(Vec::as_slice).collect();
    write_whole(output, contents.reference, &layers, config)
}

/// Writes the archive beside `output` and renames it into place, so `output` is whole or absent.
pub(super) fn write_whole(
    output: &Path,
    reference: &str,
    layers: &[&[u8]],
    config: serde_json::Value,
) -> Result<Built> {
    let partial = output
        .with_file_name(format!(".{}.partial", output.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()));
    write_archive(&partial, reference, layers, config)?;
    fs::rename(&partial, output).map_err(io_err("renaming into place", output))?;
    let bytes = fs::metadata(output).map_err(io_err("reading", output))?.len();
    Ok(Built { archive: output.to_path_buf(), bytes, layer_bytes: layers.iter().map(|l| l.len() as u64).collect() })
}

/// The machine's CA bundle, which `image` carries at the same path ([`CA_BUNDLE`]).
pub(super) fn ca_bundle(image: &str) -> Result<Vec<u8>> {
    let bundle = fs::read(CA_BUNDLE).map_err(|e| ImageError::Missing {
        image: image.into(),
        what: format!("the CA bundle {CA_BUNDLE} ({e})"),
        hint: "install Debian's ca-certificates (apt-get install ca-certificates)".into(),
    })?;
    Ok(bundle)
}

fn base_layer(debian_packages: &[&str], work: &Path) -> Result<Vec<u8>> {
    let ca_bundle = ca_bundle(IMAGE)?;
    let files: [(&str, &[u8], u32); 3] = [
        (CA_BUNDLE.trim_start_matches('/'), &ca_bundle, 0o644),
        ("etc/passwd", PASSWD, 0o644),
        ("etc/group", GROUP, 0o644),
    ];
    fs::create_dir_all(work).map_err(io_err("creating", work))?;
    let packages: Vec<&str> = ["libc6", "libgcc-s1"].into_iter().chain(debian_packages.iter().copied()).collect();
    let mut links = if debian_packages.contains(&"iptables") { iptables_links()? } else { Vec::new() };
    if debian_packages.contains(&"mawk") {
        links.push(("usr/bin/awk".into(), "/usr/bin/mawk".into()));
    }
    let links: Vec<(&str, &str)> = links.iter().map(|(l, t)| (l.as_str(), t.as_str())).collect();
    let extra = debian::Extra { files: &files, links: &links, merged_usr: true };
    super::debian_layer(IMAGE, &packages, &extra, work)
}

/// The links `update-alternatives` makes when iptables is installed (unpacking runs no maintainer
/// script): `/usr/sbin/iptables` and its kin to the variant this machine chose, nft or legacy, so
/// a node in the image drives the kernel as the machine's own nodes do.
fn iptables_links() -> Result<Vec<(String, String)>> {
    let chosen = fs::read_link("/etc/alternatives/iptables").map_err(|e| ImageError::Missing {
        image: IMAGE.into(),
        what: format!("this machine's iptables alternative, /etc/alternatives/iptables ({e})"),
        hint: "apt-get install iptables".into(),
    })?;
    let variant = if chosen.to_string_lossy().ends_with("-legacy") { "legacy" } else { "nft" };
    Ok(iptables_links_to(variant))
}

/// `usr/sbin/iptables-restore` → `/usr/sbin/iptables-<variant>-restore`, and the rest of the kin.
fn iptables_links_to(variant: &str) -> Vec<(String, String)> {
    // iptables -> iptables-nft, iptables-restore -> iptables-nft-restore, as Debian names them.
    let names = ["iptables", "ip6tables"].into_iter().flat_map(|family| {
        ["", "-restore", "-save"].map(|tool| (format!("{family}{tool}"), format!("{family}-{variant}{tool}")))
    });
    names.map(|(name, target)| (format!("usr/sbin/{name}"), format!("/usr/sbin/{target}"))).collect()
}

fn binaries_layer(contents: &Contents<'_>) -> Result<Vec<u8>> {
    let read = |path: &Path| fs::read(path).map_err(io_err("reading", path));
    let (harness, ccm) = (read(contents.harness)?, read(contents.reference_ccm)?);
    let mut layer = Layer::new();
    layer.dir("tmp", 0o1777)?;
    // root's home, where a job (run as root) keeps its state and its local store.
    layer.dir("root", 0o700)?;
    for dir in ["usr", "usr/local", "usr/local/bin", "etc", "etc/cloud-provider-harness", "home", "home/nonroot"] {
        layer.dir(dir, 0o755)?;
    }
    // What a nested real node mounts over in its own mount namespace (real::mount_node_filesystems).
    for dir in ["run", "var", "var/lib", "var/log"] {
        layer.dir(dir, 0o755)?;
    }
    layer.file("usr/local/bin/harness", &harness, 0o755)?;
    layer.file("usr/local/bin/reference-ccm", &ccm, 0o755)?;
    let providers_file = config::prow::IMAGE_PROVIDERS_FILE.trim_start_matches('/');
    layer.file(providers_file, contents.providers_file, 0o644)?;
    layer.finish()
}

/// Each tree at `<CACHE_DIR>/<relative>`, with the directories leading to it.
fn offline_layer(trees: &[CacheTree]) -> Result<Vec<u8>> {
    let mut layer = Layer::new();
    let mut made = std::collections::BTreeSet::new();
    for tree in trees {
        let path = format!("{}/{}", CACHE_DIR.trim_start_matches('/'), tree.relative.trim_matches('/'));
        let mut dir = String::new();
        for part in path.split('/') {
            dir = if dir.is_empty() { part.to_owned() } else { format!("{dir}/{part}") };
            if made.insert(dir.clone()) {
                layer.dir(&dir, 0o755)?;
            }
        }
        layer.tree_under(&tree.source, &path)?;
    }
    layer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iptables_and_its_kin_link_to_the_variant_under_debians_names() {
        let links = iptables_links_to("nft");
        assert_eq!(links.len(), 6);
        assert!(links.contains(&("usr/sbin/iptables".into(), "/usr/sbin/iptables-nft".into())));
        assert!(links.contains(&("usr/sbin/iptables-restore".into(), "/usr/sbin/iptables-nft-restore".into())));
        assert!(links.contains(&("usr/sbin/ip6tables-save".into(), "/usr/sbin/ip6tables-nft-save".into())));
    }

    #[test]
    fn the_offline_layer_puts_each_tree_under_the_image_cache_once() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        fs::create_dir_all(a.join("bin")).unwrap();
        fs::write(a.join("bin/kube-apiserver"), b"x").unwrap();
        fs::create_dir_all(&b).unwrap();
        fs::write(b.join("aws-cloud-controller-manager"), b"y").unwrap();
        let trees = [
            CacheTree { source: a, relative: "toolchains/v1.37.1".into() },
            CacheTree { source: b, relative: "providers/aws/v1.37.0".into() },
        ];
        let layer = offline_layer(&trees).unwrap();
        let mut archive = tar::Archive::new(layer.as_slice());
        let names: Vec<String> =
            archive.entries().unwrap().map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned()).collect();
        let cache = CACHE_DIR.trim_start_matches('/');
        assert!(names.contains(&format!("{cache}/toolchains/v1.37.1/bin/kube-apiserver")), "{names:?}");
        assert!(names.contains(&format!("{cache}/providers/aws/v1.37.0/aws-cloud-controller-manager")), "{names:?}");
        let cache_dirs = names.iter().filter(|n| n.trim_end_matches('/') == cache).count();
        assert_eq!(cache_dirs, 1, "each directory once: {names:?}");
    }
}

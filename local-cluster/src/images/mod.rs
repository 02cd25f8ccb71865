//! Container images for real nodes, built on this machine: no registry to pull from, no Docker.
//! Each is an OCI image archive (an OCI image layout in a tar) under the upstream name the pinned
//! release's conformance tests use (`test/utils/image/manifest.go` of the `k8s.io/kubernetes`
//! module), so a pod that says `registry.k8s.io/e2e-test-images/agnhost:2.66.1` starts from what
//! `ctr images import` put in the node's containerd. [`BUILT`] lists them and how each is made;
//! `docs/real-nodes.md` has the table with the tests that use each.
//!
//! Layers: busybox (upstream's, built from Debian's source package of the version upstream's image
//! has: [`busybox`]; a link per applet, the toolchain's `wget` in place of the applet), agnhost's tools (Debian's
//! OpenBSD netcat, curl, dig: what tests exec in upstream's Alpine-based agnhost), the toolchain's Go programs (agnhost, sample-apiserver,
//! nonewprivs, etcd, CoreDNS), `pause` (`gcc -static` of the module's `build/pause/linux/pause.c`),
//! the module's `test/images/*/html` files, and Debian packages unpacked with `dpkg-deb -x`
//! ([`debian`]).
//!
//! Archives are cached in `<cache>/images/format-<FORMAT>/<version>/` with `registry.json`, the
//! index the cluster's registry serves them by ([`oci::RegistryIndex`]); a build happens in
//! `<version>.partial` and is renamed into place, so an entry is whole or absent, and two builds take turns through a lock.
//! An image that cannot be built fails the whole build, naming the image and the conformance tests
//! that need it ([`catalog`]), before any cluster process starts.

mod busybox;
mod catalog;
pub mod conformance;
mod debian;
pub mod harness;
pub mod oci;
pub mod program;
pub mod push;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};
use serde_json::json;

pub use oci::write_archive;

use toolchain::{Release, Toolchain};

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
    #[error(
        "cannot build image {reference} ({id}), so no cluster was started: {source}. The [Conformance] tests that need it ({count}): {tests}"
    )]
    Unbuildable { id: String, reference: String, count: usize, tests: String, source: Box<ImageError> },
    #[error("pushing {reference}: {detail}")]
    Push { reference: String, detail: String },
    #[error(transparent)]
    Toolchain(#[from] toolchain::ToolchainError),
    #[error("{action} {path}: {source}")]
    Io { action: &'static str, path: PathBuf, source: std::io::Error },
}

type Result<T> = std::result::Result<T, ImageError>;

/// Holds the lock file at `path` until dropped: two builds of one cache entry take turns.
fn take_turn(path: &Path) -> Result<fs::File> {
    let lock = fs::File::create(path).map_err(io_err("creating", path))?;
    lock.lock().map_err(io_err("locking", path))?;
    Ok(lock)
}

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ImageError {
    let path = path.to_path_buf();
    move |source| ImageError::Io { action, path, source }
}

/// The cluster DNS's image: the toolchain's CoreDNS (not in `manifest.go`).
pub const COREDNS: &str = "CoreDNS";
/// The id of an image archive `up` was given (`UpOptions::images`).
pub const GIVEN: &str = "given";

/// One image: its `ImageID` in `manifest.go`, its layers bottom up, and its image config.
struct Recipe {
    id: &'static str,
    layers: &'static [Part],
    config: fn() -> serde_json::Value,
}

/// The layers images are made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Part {
    Pause,
    Busybox,
    /// What upstream's agnhost image (Alpine) carries and tests exec in it: `nc` (OpenBSD's, with
    /// `-v -t -z -w`), `curl`, `dig`, `ss` (iproute2), `getent` (the DNS tests' `/etc/hosts` probes).
    AgnhostTools,
    Agnhost,
    /// A file naming the previous tag: `AgnhostPrev` differs from `Agnhost` by a layer, as upstream's.
    AgnhostPrevMark,
    CoreDns,
    Nginx,
    GlibcDns,
    Kitten,
    Nautilus,
    SampleApiserver,
    Etcd,
    Nonewprivs,
}

const PATH_ENV: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Every image built, in build order.
const RECIPES: &[Recipe] = &[
    Recipe { id: "Pause", layers: &[Part::Pause], config: || json!({"Entrypoint": ["/pause"]}) },
    Recipe { id: "BusyBox", layers: &[Part::Busybox], config: || json!({"Cmd": ["sh"], "Env": [PATH_ENV]}) },
    Recipe {
        id: "Agnhost",
        layers: &[Part::Busybox, Part::AgnhostTools, Part::Agnhost],
        config: || json!({"Entrypoint": ["/agnhost"], "Cmd": ["pause"], "Env": [PATH_ENV], "WorkingDir": "/"}),
    },
    Recipe {
        id: "AgnhostPrev",
        layers: &[Part::Busybox, Part::AgnhostTools, Part::Agnhost, Part::AgnhostPrevMark],
        config: || json!({"Entrypoint": ["/agnhost"], "Cmd": ["pause"], "Env": [PATH_ENV], "WorkingDir": "/"}),
    },
    Recipe {
        id: "Nginx",
        layers: &[Part::Busybox, Part::Nginx],
        config: || json!({"Cmd": NGINX_CMD, "Env": [PATH_ENV], "ExposedPorts": {"80/tcp": {}}}),
    },
    Recipe {
        id: "NginxNew",
        layers: &[Part::Busybox, Part::Nginx],
        config: || json!({"Cmd": NGINX_CMD, "Env": [PATH_ENV], "ExposedPorts": {"80/tcp": {}}}),
    },
    Recipe {
        id: "GlibcDnsTesting",
        layers: &[Part::Busybox, Part::GlibcDns, Part::CoreDns],
        config: || json!({"Cmd": ["sh"], "Env": [PATH_ENV]}),
    },
    Recipe {
        id: "Kitten",
        layers: &[Part::Busybox, Part::AgnhostTools, Part::Agnhost, Part::Kitten],
        config: || json!({"Entrypoint": ["/agnhost"], "Cmd": ["test-webserver"], "Env": [PATH_ENV], "WorkingDir": "/"}),
    },
    Recipe {
        id: "Nautilus",
        layers: &[Part::Busybox, Part::AgnhostTools, Part::Agnhost, Part::Nautilus],
        config: || json!({"Entrypoint": ["/agnhost"], "Cmd": ["test-webserver"], "Env": [PATH_ENV], "WorkingDir": "/"}),
    },
    Recipe {
        id: "APIServer",
        layers: &[Part::Busybox, Part::SampleApiserver],
        config: || json!({"Entrypoint": ["/sample-apiserver"], "Env": [PATH_ENV]}),
    },
    Recipe {
        id: "Etcd",
        layers: &[Part::Busybox, Part::Etcd],
        config: || json!({"Cmd": ["/usr/local/bin/etcd"], "Env": [PATH_ENV]}),
    },
    Recipe {
        id: "Nonewprivs",
        layers: &[Part::Busybox, Part::Nonewprivs],
        config: || json!({"Cmd": ["nnp"], "Env": [PATH_ENV]}),
    },
    Recipe {
        id: "NonRoot",
        layers: &[Part::Busybox],
        config: || json!({"Cmd": ["sh"], "Env": [PATH_ENV], "User": "1234"}),
    },
    Recipe { id: COREDNS, layers: &[Part::CoreDns], config: || json!({"Entrypoint": ["/coredns"]}) },
];

const NGINX_CMD: [&str; 5] = ["nginx", "-e", "stderr", "-g", "daemon off;"];

/// The images built here, by their `ImageID` in `manifest.go` (and [`COREDNS`], which is not there).
pub const BUILT: &[&str] = &[
    "Pause",
    "BusyBox",
    "Agnhost",
    "AgnhostPrev",
    "Nginx",
    "NginxNew",
    "GlibcDnsTesting",
    "Kitten",
    "Nautilus",
    "APIServer",
    "Etcd",
    "Nonewprivs",
    "NonRoot",
    COREDNS,
];

/// Images of `manifest.go` that conformance files name but that are not built, and why.
pub const NOT_BUILT: &[(&str, &str)] = &[
    ("AgnhostPrivate", "a private registry's image with credentials: its tests are not [Conformance] and skip off GCE"),
    ("InvalidRegistryImage", "an image that must fail to pull: the test expects the pull error"),
];

/// Bumped when a recipe changes, so that cached images of an older harness are rebuilt.
const FORMAT: u32 = 6;

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

/// What `images.json` records of a cache entry.
#[derive(Debug, Serialize, Deserialize)]
struct Recorded {
    format: u32,
    images: BTreeMap<String, String>,
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

/// The cache directory of `release`'s images.
pub fn dir(release: &Release) -> PathBuf {
    // Under the recipes' format: harnesses of other formats on the machine (an older checkout's
    // CI run beside this one) build and read caches of their own, never each other's.
    cli_support::roots::cache_root().join("images").join(format!("format-{FORMAT}")).join(release.cache_key())
}

/// The index the cluster's registry serves `release`'s images by.
pub fn registry_index(release: &Release) -> PathBuf {
    dir(release).join("registry.json")
}

/// Whether `release`'s node images are built and cached whole.
pub fn is_cached(release: &Release) -> bool {
    cached(&dir(release)).is_some()
}

fn cached(dir: &Path) -> Option<Vec<Image>> {
    let recorded: Recorded = serde_json::from_str(&fs::read_to_string(dir.join("images.json")).ok()?).ok()?;
    let whole = recorded.format == FORMAT
        && dir.join("registry.json").is_file()
        && BUILT.iter().all(|id| recorded.images.contains_key(*id) && dir.join(archive_name(id)).is_file());
    whole.then(|| {
        BUILT
            .iter()
            .map(|id| Image { id, reference: recorded.images[*id].clone(), archive: dir.join(archive_name(id)) })
            .collect()
    })
}

/// The image archives of `release`, built unless cached.
pub fn install(release: &Release, toolchain: &Toolchain) -> Result<Vec<Image>> {
    install_from(release, toolchain, BTreeMap::new())
}

/// [`install`], starting from `early`'s layers (from [`source_layers`]).
fn install_from(release: &Release, toolchain: &Toolchain, early: BTreeMap<Part, Vec<u8>>) -> Result<Vec<Image>> {
    let dir = dir(release);
    if let Some(images) = cached(&dir) {
        return Ok(images);
    }
    let parent = dir.parent().expect("images/<version>");
    fs::create_dir_all(parent).map_err(io_err("creating", parent))?;
    // Two `up`s at once (parallel tests) take turns; the second finds the first's images.
    // (Not `with_extension`: a version's dots are not an extension.)
    let _turn = take_turn(&parent.join(format!("{}.lock", release.cache_key())))?;
    if let Some(images) = cached(&dir) {
        return Ok(images);
    }
    let step = cli_support::progress::step(format!("building the node images of Kubernetes {}", release.version));
    let source = toolchain::kubernetes_source(release)?;
    let built = Builder { release, toolchain, source: &source, layers: early }.build_all(&dir)?;
    step.done();
    if release.source.is_some() {
        toolchain::checkout::prune_entries(parent, &dir);
    }
    Ok(built)
}

/// Installs the toolchain with `install` and then the node images of `release`, as [`install`],
/// but builds meanwhile what the images need of the release's sources alone: busybox (compiled),
/// Debian's packages (downloaded and unpacked) and pause. That part waits on the network and on
/// one core for about a minute, which the toolchain's Go builds fill.
pub fn install_alongside(
    release: &Release,
    install_toolchain: impl FnOnce() -> std::result::Result<Toolchain, toolchain::ToolchainError>,
) -> Result<(Toolchain, Vec<Image>)> {
    if let Some(images) = cached(&dir(release)) {
        return Ok((install_toolchain()?, images));
    }
    let (toolchain, early) = std::thread::scope(|scope| {
        let early = scope.spawn(|| source_layers(release));
        (install_toolchain(), early.join().expect("building layers does not panic"))
    });
    let toolchain = toolchain?;
    // On failure built again below, where the error names the image and the tests that need it.
    let early = early.unwrap_or_else(|e| {
        tracing::warn!("building the node images' layers from sources: {e}");
        BTreeMap::new()
    });
    let images = install_from(release, &toolchain, early)?;
    Ok((toolchain, images))
}

/// The layers of [`FROM_SOURCES`] and the busybox binary (cached on disk), under the images' lock.
fn source_layers(release: &Release) -> Result<BTreeMap<Part, Vec<u8>>> {
    let parent = dir(release).parent().expect("images/<version>").to_path_buf();
    fs::create_dir_all(&parent).map_err(io_err("creating", &parent))?;
    let _turn = take_turn(&parent.join(format!("{}.lock", release.cache_key())))?;
    if cached(&dir(release)).is_some() {
        return Ok(BTreeMap::new());
    }
    let started = std::time::Instant::now();
    let source = toolchain::kubernetes_source(release)?;
    let work = tempfile::Builder::new()
        .prefix(&format!("{}.sources", release.cache_key()))
        .tempdir_in(&parent)
        .map_err(io_err("creating a directory in", &parent))?;
    busybox::binary(&source, work.path())?;
    let mut layers = BTreeMap::new();
    for part in FROM_SOURCES {
        layers.insert(*part, source_part(*part, &source, work.path()).expect("a part built from sources")?);
    }
    tracing::info!(
        "built the node images' layers from Kubernetes {}'s sources (busybox, Debian's packages, pause) in {:.1?}",
        release.version,
        started.elapsed()
    );
    Ok(layers)
}

/// Builds every recipe's archive, each layer once.
struct Builder<'a> {
    release: &'a Release,
    toolchain: &'a Toolchain,
    source: &'a Path,
    layers: BTreeMap<Part, Vec<u8>>,
}

impl Builder<'_> {
    fn build_all(mut self, dir: &Path) -> Result<Vec<Image>> {
        let manifest_path = self.source.join("test/utils/image/manifest.go");
        let manifest_go = fs::read_to_string(&manifest_path).map_err(io_err("reading", &manifest_path))?;
        let names = references(&manifest_go);
        let partial = dir.parent().expect("images/<version>").join(format!("{}.partial", self.release.cache_key()));
        let _ = fs::remove_dir_all(&partial);
        fs::create_dir_all(&partial).map_err(io_err("creating", &partial))?;

        let mut recorded = BTreeMap::new();
        let mut index = oci::RegistryIndex::default();
        for recipe in RECIPES {
            let reference = match recipe.id {
                COREDNS => coredns_reference(),
                id => names.get(id).cloned().ok_or_else(|| ImageError::NotInManifest {
                    version: self.release.version.into(),
                    image: id.into(),
                    known: BUILT.join(", "),
                })?,
            };
            let path = partial.join(archive_name(recipe.id));
            self.build(recipe, &reference, &path, &partial).map_err(|e| self.unbuildable(recipe.id, &reference, e))?;
            index.add_archive(&path)?;
            recorded.insert(recipe.id.to_string(), reference);
        }
        let index_path = partial.join("registry.json");
        fs::write(&index_path, serde_json::to_vec_pretty(&index).expect("serialises"))
            .map_err(io_err("writing", &index_path))?;
        let images_path = partial.join("images.json");
        let record = Recorded { format: FORMAT, images: recorded };
        fs::write(&images_path, serde_json::to_vec_pretty(&record).expect("serialises"))
            .map_err(io_err("writing", &images_path))?;
        let _ = fs::remove_dir_all(dir);
        fs::rename(&partial, dir).map_err(io_err("renaming into place", dir))?;
        Ok(cached(dir).expect("just written"))
    }

    fn build(&mut self, recipe: &Recipe, reference: &str, path: &Path, work: &Path) -> Result<()> {
        for part in recipe.layers {
            if !self.layers.contains_key(part) {
                let layer = self.part(*part, work)?;
                self.layers.insert(*part, layer);
            }
        }
        let layers: Vec<&[u8]> = recipe.layers.iter().map(|p| self.layers[p].as_slice()).collect();
        let mut config = (recipe.config)();
        // The tag as a label: images that share every layer (nginx, nginx-new) still differ.
        let tag = reference.rsplit_once(':').map_or("", |(_, tag)| tag);
        config["Labels"] = json!({
            "org.opencontainers.image.version": tag,
            "org.opencontainers.image.vendor": "built by cloud-provider-harness",
        });
        write_archive(path, reference, &layers, config)
    }

    /// Wraps a build failure with the conformance tests that need the image.
    fn unbuildable(&self, id: &str, reference: &str, source: ImageError) -> ImageError {
        let users = catalog::conformance_users(&self.source.join("test/e2e"));
        let tests = users.get(id).cloned().unwrap_or_default();
        unbuildable(id, reference, &tests, source)
    }

    fn binary(&self, name: &str) -> Result<Vec<u8>> {
        let path = self.toolchain.binary(name);
        fs::read(&path).map_err(io_err("reading", &path))
    }

    fn part(&self, part: Part, work: &Path) -> Result<Vec<u8>> {
        if let Some(layer) = source_part(part, self.source, work) {
            return layer;
        }
        match part {
            Part::Busybox => busybox_layer(&busybox::binary(self.source, work)?, &self.binary("wget")?),
            Part::Agnhost => {
                let porter = self.source.join("test/images/agnhost/porter");
                let read = |name: &str| fs::read(porter.join(name)).map_err(io_err("reading", &porter.join(name)));
                let tls = (read("localhost.crt")?, read("localhost.key")?);
                agnhost_layer(&self.binary("agnhost")?, &self.binary("coredns")?, &tls)
            }
            Part::AgnhostPrevMark => {
                let mark = format!(
                    "agnhost of Kubernetes {}'s test/images/agnhost, tagged as the previous agnhost by cloud-provider-harness\n",
                    self.release.version
                );
                oci::files_layer(&[("etc/agnhost-previous-tag", mark.as_bytes(), 0o644)])
            }
            Part::CoreDns => oci::files_layer(&[("coredns", &self.binary("coredns")?, 0o755)]),
            Part::SampleApiserver => {
                oci::files_layer(&[("sample-apiserver", &self.binary("sample-apiserver")?, 0o755)])
            }
            Part::Etcd => oci::files_layer(&[("usr/local/bin/etcd", &self.binary("etcd")?, 0o755)]),
            // Setuid, as upstream's (`chmod +s`): the test checks the effective uid it prints.
            Part::Nonewprivs => oci::files_layer(&[("usr/local/bin/nnp", &self.binary("nonewprivs")?, 0o4755)]),
            Part::Pause | Part::AgnhostTools | Part::Nginx | Part::GlibcDns | Part::Kitten | Part::Nautilus => {
                unreachable!("{part:?} is built from sources alone, above")
            }
        }
    }
}

/// The layers built from the release's sources alone, without the toolchain: what
/// [`install_alongside`] builds while the toolchain's Go builds run (the html ones are too small
/// to matter).
const FROM_SOURCES: &[Part] = &[Part::Pause, Part::AgnhostTools, Part::Nginx, Part::GlibcDns];

/// The layer of `part` when it needs only the release's sources at `source` (and Debian's
/// packages), or `None` when it needs the toolchain's binaries.
fn source_part(part: Part, source: &Path, work: &Path) -> Option<Result<Vec<u8>>> {
    let html = |image: &str, files: &[&str]| -> Result<Vec<u8>> {
        let dir = source.join("test/images").join(image).join("html");
        let mut contents = Vec::new();
        for file in files {
            contents.push((*file, fs::read(dir.join(file)).map_err(io_err("reading", &dir.join(file)))?));
        }
        let mut entries: Vec<(&str, &[u8], u32)> = contents.iter().map(|(n, c)| (*n, c.as_slice(), 0o644)).collect();
        entries.push(("etc/os-release", OS_RELEASE.as_bytes(), 0o644));
        oci::files_layer(&entries)
    };
    let layer = match part {
        Part::Pause => pause_layer(source, work),
        Part::AgnhostTools => {
            // The links update-alternatives makes on install; busybox's nc applet is usr/bin/nc.
            let links = [("usr/bin/nc", "/bin/nc.openbsd"), ("bin/nc", "/bin/nc.openbsd")];
            // Without it glibc's getent asks DNS alone and never reads the kubelet's /etc/hosts
            // (Alpine's musl, upstream's base, reads the file first): the DNS hosts tests use getent.
            let files: [(&str, &[u8], u32); 1] = [("etc/nsswitch.conf", NSSWITCH, 0o644)];
            let extra = debian::Extra { files: &files, links: &links, ..Default::default() };
            debian_layer("agnhost", &["netcat-openbsd", "curl", "bind9-dnsutils", "iproute2", "libc-bin"], &extra, work)
        }
        Part::Nginx => {
            debian_layer("nginx", &["nginx"], &debian::Extra { files: &nginx_files(), ..Default::default() }, work)
        }
        Part::GlibcDns => {
            let files: [(&str, &[u8], u32); 1] = [("etc/nsswitch.conf", NSSWITCH, 0o644)];
            let extra = debian::Extra { files: &files, ..Default::default() };
            debian_layer("glibc-dns-testing", &["bind9-dnsutils", "libc-bin"], &extra, work)
        }
        Part::Kitten => html("kitten", &["kitten.jpg", "data.json"]),
        Part::Nautilus => html("nautilus", &["nautilus.jpg", "data.json"]),
        _ => return None,
    };
    Some(layer)
}

/// A layer of Debian's `packages` and their closure (downloaded into the cache's `debs/`), with `extra`.
fn debian_layer(image: &str, packages: &[&str], extra: &debian::Extra, work: &Path) -> Result<Vec<u8>> {
    let wanted = debian::closure(image, packages)?;
    let debs = debian::download(image, &cli_support::roots::cache_root().join("debs"), &wanted)?;
    debian::layer(image, &debs, work, extra)
}

fn unbuildable(id: &str, reference: &str, tests: &[String], source: ImageError) -> ImageError {
    ImageError::Unbuildable {
        id: id.into(),
        reference: reference.into(),
        count: tests.len(),
        tests: catalog::summary(tests, 5),
        source: Box::new(source),
    }
}

/// glibc's name service order for the images with glibc tools: the hosts file, then DNS.
const NSSWITCH: &[u8] = b"hosts: files dns\n";

/// The os-release of the html images. The ImageVolume conformance test reads it from kitten and
/// expects upstream's base (Alpine Linux) named in it: this one names it, and says what it is.
const OS_RELEASE: &str = "NAME=\"cloud-provider-harness test image\"\nID=harness\nPRETTY_NAME=\"built by cloud-provider-harness in place of upstream's Alpine Linux based image\"\n";

/// nginx's configuration: port 80, a page, logs to the container's output, temporary files in /tmp.
fn nginx_files() -> Vec<(&'static str, &'static [u8], u32)> {
    const CONF: &str = "user nobody nogroup;\nworker_processes 1;\npid /tmp/nginx.pid;\nerror_log stderr;\nevents { worker_connections 256; }\nhttp {\n  include /etc/nginx/mime.types;\n  access_log /dev/stdout;\n  client_body_temp_path /tmp/nginx-body;\n  proxy_temp_path /tmp/nginx-proxy;\n  fastcgi_temp_path /tmp/nginx-fastcgi;\n  uwsgi_temp_path /tmp/nginx-uwsgi;\n  scgi_temp_path /tmp/nginx-scgi;\n  server {\n    listen 80 default_server;\n    root /usr/share/nginx/html;\n    index index.html;\n  }\n}\n";
    const INDEX: &str = "<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head>\n<body><h1>Welcome to nginx!</h1></body></html>\n";
    vec![("etc/nginx/nginx.conf", CONF.as_bytes(), 0o644), ("usr/share/nginx/html/index.html", INDEX.as_bytes(), 0o644)]
}

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
    oci::files_layer(&[("pause", &binary, 0o755)])
}

/// Upstream's busybox at `/bin/busybox` ([`busybox`]) with a link per applet in `/bin`, as docker's
/// busybox image has them (tests exec `/bin/sysctl`), and at the path busybox itself lists (its
/// `--install` layout); `wget` is the toolchain's (see `tools/kube/wget`); `/etc/passwd`,
/// `/etc/group` and `/tmp`.
fn busybox_layer(busybox: &Path, wget: &[u8]) -> Result<Vec<u8>> {
    let binary = fs::read(busybox).map_err(io_err("reading", busybox))?;
    let list = Command::new(busybox).arg("--list-full").output().map_err(io_err("running", busybox))?;
    let listed: Vec<String> = String::from_utf8_lossy(&list.stdout).lines().map(str::to_owned).collect();
    let mut paths: BTreeSet<String> = listed.iter().cloned().collect();
    paths.extend(listed.iter().filter_map(|p| p.rsplit('/').next()).map(|name| format!("bin/{name}")));
    let mut layer = oci::Layer::new();
    for dir in ["bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "tmp", "root", "var", "proc", "sys", "dev"] {
        layer.dir(dir, if dir == "tmp" { 0o1777 } else { 0o755 })?;
    }
    layer.file("bin/busybox", &binary, 0o755)?;
    for path in paths.iter().filter(|p| *p != "bin/busybox") {
        if path.ends_with("/wget") {
            layer.file(path, wget, 0o755)?;
        } else {
            layer.symlink(path, "/bin/busybox")?;
        }
    }
    layer.file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n", 0o644)?;
    layer.file("etc/group", b"root:x:0:\nnogroup:x:65534:\n", 0o644)?;
    layer.finish()
}

/// agnhost at `/agnhost` (and `/agnhost-2`, a link some tests exec), `/uploads`, porter's TLS
/// certificate and key in `/` (its `SERVE_TLS_PORT_*` ports read them from the working directory),
/// CoreDNS at `/coredns` (DNS tests run it), and the user and group upstream's image defines
/// (tests run as them by name), as upstream's Dockerfile.
fn agnhost_layer(agnhost: &[u8], coredns: &[u8], (crt, key): &(Vec<u8>, Vec<u8>)) -> Result<Vec<u8>> {
    let mut layer = oci::Layer::new();
    layer.dir("etc", 0o755)?;
    layer.file(
        "etc/passwd",
        b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\nuser-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n",
        0o644,
    )?;
    layer.file(
        "etc/group",
        b"root:x:0:\nnogroup:x:65534:\nuser-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n",
        0o644,
    )?;
    layer.dir("uploads", 0o755)?;
    layer.file("localhost.crt", crt, 0o644)?;
    layer.file("localhost.key", key, 0o644)?;
    layer.file("coredns", coredns, 0o755)?;
    layer.file("agnhost", agnhost, 0o755)?;
    layer.symlink("agnhost-2", "agnhost")?;
    layer.finish()
}

fn is_static_elf(binary: &[u8]) -> bool {
    // A dynamically linked ELF names its interpreter in a PT_INTERP segment: look for the path.
    binary.starts_with(b"\x7fELF") && !binary.windows(14).any(|w| w == b"/lib64/ld-linu")
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
    fn every_built_image_has_one_recipe_and_previous_agnhost_differs_by_a_layer() {
        let ids: Vec<&str> = RECIPES.iter().map(|r| r.id).collect();
        assert_eq!(ids, BUILT);
        let layers = |id: &str| RECIPES.iter().find(|r| r.id == id).unwrap().layers;
        assert_eq!(&layers("AgnhostPrev")[..layers("Agnhost").len()], layers("Agnhost"));
        assert!(layers("AgnhostPrev").len() > layers("Agnhost").len());
        for (id, _) in NOT_BUILT {
            assert!(!BUILT.contains(id), "{id}");
        }
    }

    #[test]
    fn a_debian_package_that_does_not_exist_is_an_error_naming_the_image_and_its_tests() {
        let Err(source) = debian::closure("nginx", &["no-such-package-harness"]) else {
            panic!("apt-cache found a package that does not exist");
        };
        let tests = vec!["apps/deployment.go: deployment should support rollover".to_string()];
        let err = unbuildable("Nginx", "registry.k8s.io/e2e-test-images/nginx:1.27.0-2", &tests, source).to_string();
        assert!(err.contains("cannot build image registry.k8s.io/e2e-test-images/nginx:1.27.0-2 (Nginx)"), "{err}");
        assert!(err.contains("no cluster was started"), "{err}");
        assert!(err.contains("no-such-package-harness"), "{err}");
        assert!(
            err.contains("tests that need it (1): apps/deployment.go: deployment should support rollover"),
            "{err}"
        );
    }
}

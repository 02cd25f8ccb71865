//! The Kubernetes toolchain: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, the
//! upstream conformance suite `e2e.test` and the `ginkgo` CLI that runs it, etcd, what real nodes
//! run ([`NODE_BINARIES`]), and on first use ([`ON_DEMAND`]) kwok and `local-upstream-ccm`
//! (upstream's CCM over the local cloud: [`UPSTREAM_CCM`]), built from the Go
//! module proxy at the versions pinned in `tools/kube/` and `tools/local-upstream-ccm/` (`go build`, and `go test -c
//! k8s.io/kubernetes/test/e2e` for `e2e.test`), the Kubernetes ones stamped with their real version,
//! and cached under the user cache dir keyed by version; or built from a kubernetes/kubernetes
//! checkout ([`from_checkout`], [`checkout`]) and cached keyed by its commit (`checkout-<commit>`).
//!
//! Layout: `<cache>/toolchains/<version>/{bin/<binary>, manifest.json}`; a build happens in
//! `<cache>/toolchains/<version>.partial` and is renamed into place once every binary is there, so
//! a cache entry is either whole or absent. The manifest records each binary's size and SHA-256.
//!
//! Before use ([`installed`], [`install`]) every binary the manifest records is checked against it:
//! its size, and its SHA-256 unless a *stamp* vouches for it. The stamps,
//! `<cache>/toolchains/<version>.verified.json` beside the entry (not in it: a harness image carries
//! the entry whole), hold for each binary the stat it had (size, device, inode, mtime and ctime, to
//! the nanosecond) when it was last hashed and found right: a binary whose stat is still the same
//! is trusted, any other is hashed again, and a match renews its stamp. A write to a file always
//! moves its ctime, which no user can set back, so a binary truncated or rewritten in place since
//! (same size or not) is hashed and found out (a binary is stamped only once its ctime is a few
//! seconds old, `SETTLED_NS`, so that a write in the same tick of the file system's clock cannot
//! hide behind an equal ctime); an unchanged entry costs a `stat` per binary
//! (docs/benchmarks.md, "Toolchain binaries checked before use"). The stamps are replaced whole
//! (written beside and renamed), so concurrent harnesses never see half of them; one torn or
//! unreadable only means hashing again. A corrupt binary (wrong size or hash) is never run:
//! `install` rebuilds it (as it builds a missing one, below), and `installed`, which cannot build,
//! refuses with the command that does. `harness toolchain verify` ([`verify`]) hashes every binary
//! whatever the stamps say.
//!
//! An entry an older harness wrote, whose manifest lacks binaries added since (`e2e.test`,
//! `ginkgo`, `local-upstream-ccm`), is *incomplete*: `install` keeps the binaries it has (hard-linked into the
//! `.partial` directory with their manifest records) and builds only the missing ones, and the
//! corrupt ones.

pub mod aws;
pub mod checkout;
pub mod openstack;
pub mod provider_ccm;
pub mod virtualenv;
pub mod vsphere;
pub use config::pins;
pub mod proxy_pins;
pub mod workspace;

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use cli_support::progress;
use cli_support::roots::cache_root;
use pins::GoModule;

/// The binaries every toolchain holds: what the default run (real nodes, the reference CCM) needs.
pub const BINARIES: &[&str] = &[
    "e2e.test",
    "etcd",
    "ginkgo",
    "go-runner",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kubelet",
    "kube-proxy",
    "agnhost",
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    "coredns",
    "netproxy",
    "wget",
    "registry",
    "sample-apiserver",
    "nonewprivs",
];

/// Binaries built into a toolchain the first time something needs them ([`install_with`]), or by
/// `harness toolchain install --all`: kwok (clusters with `--node-kind kwok`) and
/// [`UPSTREAM_CCM`] (the `local-upstream` provider). Building them with every install cost a fresh
/// clone's quickstart over a minute for a run that uses neither.
pub const ON_DEMAND: &[&str] = &["kwok", UPSTREAM_CCM];

/// What real nodes run (`harness cluster up --node-kind real`), built with every toolchain:
/// kubelet and kube-proxy of the release, containerd v2 with its runc shim and `ctr`, CoreDNS, the
/// image registry, and the programs of the conformance tests' images (packed into OCI images by
/// [`crate::images`]): agnhost, sample-apiserver and nonewprivs of the release, and wget.
pub const NODE_BINARIES: &[&str] = &[
    "kubelet",
    "kube-proxy",
    "agnhost",
    "containerd",
    "containerd-shim-runc-v2",
    "ctr",
    "coredns",
    "netproxy",
    "wget",
    "registry",
    "sample-apiserver",
    "nonewprivs",
];

pub use config::pins::{BUILDABLE_CCMS, TOOLCHAIN_CCMS, UPSTREAM_CCM_BINARY as UPSTREAM_CCM};

/// The CCM `bin` (one of [`BUILDABLE_CCMS`]) for `release`, built unless cached. For a checkout's
/// release, a provider's CCM takes its Kubernetes libraries from `libraries`; `local-upstream-ccm`,
/// the toolchain's own, is built against the checkout either way.
pub fn install_ccm(release: &Release, bin: &str, libraries: Libraries) -> Result<PathBuf> {
    match provider_ccm(bin) {
        Some(ccm) => ccm.install(release, false, libraries),
        None => Ok(install_with(release, false, &[bin])?.binary(bin)),
    }
}

/// Where a Go CCM built for Kubernetes from a checkout ([`from_checkout`]) takes its `k8s.io/*`
/// libraries (client-go, cloud-provider, component-base, …) from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Libraries {
    /// The checkout's own staging modules, in a Go workspace ([`checkout::Checkout::write_workspace`]):
    /// a change to them that breaks the CCM's compile fails its build at that commit.
    #[default]
    Checkout,
    /// The published versions the CCM's pinned release requires in its go.mod.
    Pinned,
}

/// The providers' CCMs the toolchain builds from their own modules.
pub const PROVIDER_CCMS: [&provider_ccm::ProviderCcm; 3] = [&aws::CCM, &vsphere::CCM, &openstack::CCM];

fn provider_ccm(bin: &str) -> Option<&'static provider_ccm::ProviderCcm> {
    PROVIDER_CCMS.into_iter().find(|ccm| ccm.binary == bin)
}

/// The version a CCM the toolchain builds from a provider's module reports itself as (its release
/// tag), or `None` for the toolchain's own CCMs, which are built from this workspace.
pub fn provider_ccm_version(release: &Release, bin: &str) -> Option<&'static str> {
    provider_ccm(bin).and_then(|ccm| ccm.version(release).ok())
}

/// The package `e2e.test` is the test binary of.
const E2E_PACKAGE: &str = "k8s.io/kubernetes/test/e2e";

/// The ginkgo CLI, built at the version of `github.com/onsi/ginkgo/v2` the release requires.
const GINKGO_PACKAGE: &str = "github.com/onsi/ginkgo/v2/ginkgo";

/// The conformance image's entrypoint, which runs ginkgo as Hydrophone and Sonobuoy expect.
const GO_RUNNER_PACKAGE: &str = "k8s.io/kubernetes/test/conformance/image/go-runner";

/// agnhost, the image most conformance tests run, from the release's own sources.
const AGNHOST_PACKAGE: &str = "k8s.io/kubernetes/test/images/agnhost";

/// The programs of two more conformance images, from the release's own module: the aggregated API
/// server of the aggregator tests (`k8s.io/sample-apiserver`, replaced there by the release's
/// staging version) and `nonewprivs` (`test/images/nonewprivs`).
const IMAGE_PACKAGES: &[&str] = &["k8s.io/sample-apiserver", "k8s.io/kubernetes/test/images/nonewprivs"];

/// containerd's commands, as `tools/kube/containerd/go.mod` names them.
const CONTAINERD_PACKAGES: &[&str] = &[
    "github.com/containerd/containerd/v2/cmd/containerd",
    "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
    "github.com/containerd/containerd/v2/cmd/ctr",
];

/// The containerd release `tools/kube/containerd` pins.
pub fn containerd_version() -> &'static str {
    pins::required_version(&pins::CONTAINERD, "github.com/containerd/containerd/v2").unwrap_or("v2")
}

/// The oldest Go that builds the pinned modules (their `go` directive).
const MIN_GO_MINOR: u32 = 26;

#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    #[error(
        "Kubernetes version '{requested}' is not pinned by this harness (pinned: {pinned}); use one of those, install a release or pre-release tag the Go module proxy serves with `harness toolchain install --kubernetes v1.X.Y[-rc.N]`, or pin it with `tools/kube/pin.sh vX.Y.Z`"
    )]
    UnknownVersion { requested: String, pinned: String },
    #[error("Go toolchain not usable ({detail}): install Go 1.{MIN_GO_MINOR} or newer on PATH, or set GO=/path/to/go")]
    GoMissing { detail: String },
    #[error(
        "Kubernetes {version} needs Go {needs} (the `go` line of its go.mod), and {go} is {have}, which the harness \
         runs with GOTOOLCHAIN=local: set GO=/path/to/go{needs}-or-newer, or use a release this Go builds"
    )]
    GoTooOld { version: String, needs: String, go: PathBuf, have: String },
    #[error(
        "{dir} is not a kubernetes/kubernetes checkout: {reason}; give --kubernetes-source the root of a git clone \
         of kubernetes/kubernetes (where Prow's path alias k8s.io/kubernetes puts it)"
    )]
    NotACheckout { dir: PathBuf, reason: String },
    #[error(
        "the Go module proxy does not serve k8s.io/kubernetes {version} (or did not answer: check GOPROXY): \
         name a release it serves (harness run --kubernetes latest, or latest-1.37, takes the newest)"
    )]
    NotServed { version: String },
    #[error(
        "{marker}: the Go module proxy serves no such release (or did not answer: check GOPROXY), and the harness \
         has none (it has {known}): name a release tag, or another minor (latest-1.37)"
    )]
    NoRelease { marker: String, known: String },
    #[error(
        "Kubernetes {version} toolchain is not installed in {dir}; run `harness toolchain install --kubernetes {version}`"
    )]
    NotInstalled { version: String, dir: PathBuf },
    /// The entry as a whole (its manifest), or `binaries` of it (their size or hash is not what the
    /// manifest records): those `install` rebuilds without `--force`. (Boxed: every error of the
    /// harness carries this one, and a `Vec` would make them all larger.)
    #[error("toolchain cache entry {dir} is corrupt ({reason}); {}", corrupt_fix(version, binaries))]
    Corrupt { version: String, dir: PathBuf, reason: String, binaries: Box<[&'static str]> },
    #[error(
        "Kubernetes {version} toolchain in {dir} lacks {} (an older harness installed it); run `harness toolchain install --kubernetes {version}` to build just those",
        missing.join(", ")
    )]
    Incomplete { version: String, dir: PathBuf, missing: Vec<&'static str> },
    #[error("building {what} failed ({status}){}; the whole output is in {log}", said(excerpt))]
    BuildFailed { what: String, status: String, excerpt: Box<str>, log: PathBuf },
    #[error(
        "cargo could not build {bin} of package {package} ({detail}); run `cargo build -p {package} --bin {bin}` to see why"
    )]
    CargoBuild { package: String, bin: String, detail: String },
    #[error(
        "{bin} is not built here: this harness was built in {built_in}, which is not on this machine, so it cannot build it; put a {bin} binary beside the harness ({beside}) or on PATH"
    )]
    NoCheckout { bin: String, built_in: PathBuf, beside: PathBuf },
    #[error("{what} is not installed: {hint}")]
    ProviderNotInstalled { what: String, hint: String },
    #[error(
        "Python not usable ({detail}): install Python 3 with its venv module (Debian: apt-get install python3-venv), or set PYTHON=/path/to/python3"
    )]
    PythonMissing { detail: String },
    #[error("{action} {path}: {source}")]
    Io { action: &'static str, path: PathBuf, source: std::io::Error },
}

type Result<T> = std::result::Result<T, ToolchainError>;

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ToolchainError {
    let path = path.to_path_buf();
    move |source| ToolchainError::Io { action, path, source }
}

/// A pinned Kubernetes release.
#[derive(Debug, Clone, Copy)]
pub struct Release {
    /// e.g. `v1.37.1`
    pub version: &'static str,
    module: &'static GoModule,
    /// `local-upstream-ccm`'s module for the release.
    ccm: &'static GoModule,
    /// Pinned at run time ([`proxy_pins`]) rather than embedded.
    pub made_at_run_time: bool,
    /// Built from a kubernetes/kubernetes checkout ([`from_checkout`]) rather than a release's module.
    pub source: Option<&'static checkout::Checkout>,
}

impl Release {
    /// `1` and `37` of `v1.37.1`.
    pub fn minor(&self) -> &'static str {
        self.version.split('.').nth(1).unwrap_or_default()
    }

    /// What names its caches (toolchain, node images): its version, or for a checkout
    /// `checkout-<commit>[-dirty-<digest>]`, since a version string names no commit at a tag.
    pub fn cache_key(&self) -> String {
        match self.source {
            Some(checkout) => format!("checkout-{}", checkout.entry_name()),
            None => self.version.to_owned(),
        }
    }

    /// Its version as an image tag: `+` is not allowed there, and upstream writes it `_`.
    pub fn image_tag(&self) -> String {
        self.version.replace('+', "_")
    }
}

/// Every pinned release, newest first.
pub fn releases() -> Vec<Release> {
    pins::KUBERNETES
        .iter()
        .map(|module| Release {
            version: pins::required_version(module, "k8s.io/kubernetes").expect("pins require k8s.io/kubernetes"),
            module,
            ccm: pins::upstream_ccm(module).expect("every Kubernetes pin has a local-upstream-ccm module"),
            made_at_run_time: false,
            source: None,
        })
        .collect()
}

/// The default release: the newest pinned one.
pub fn default_release() -> Release {
    releases()[0]
}

/// Resolves `v1.37.1`, `1.37.1`, `v1.37`, `1.37` (newest pinned patch) or `latest` to a pinned release.
pub fn resolve(requested: Option<&str>) -> Result<Release> {
    let Some(requested) = requested.map(str::trim).filter(|r| !r.is_empty() && *r != "latest") else {
        return Ok(default_release());
    };
    if let Some(release) = registered_checkout(requested) {
        return Ok(release);
    }
    let wanted = requested.strip_prefix('v').unwrap_or(requested);
    releases()
        .into_iter()
        .find(|release| {
            let pinned = &release.version[1..];
            pinned == wanted || pinned.rsplit_once('.').is_some_and(|(minor, _)| minor == wanted)
        })
        .or_else(|| made_at_run_time(requested))
        .ok_or_else(|| ToolchainError::UnknownVersion {
            requested: requested.to_string(),
            pinned: releases().iter().map(|r| r.version).collect::<Vec<_>>().join(", "),
        })
}

/// The release tag a marker stands for (`latest`, `latest-1.37`): the newest stable release the Go
/// module proxy serves (of that minor), else, when the proxy does not answer, the newest the
/// harness has (embedded, or pinned earlier), with a warning. `Ok(None)` when `requested` is no
/// marker. What `--kubernetes latest` means to every command.
pub fn resolve_marker(requested: &str) -> Result<Option<String>> {
    let Some(marker) = proxy_pins::Marker::parse(requested) else { return Ok(None) };
    let known: Vec<proxy_pins::Tag> =
        releases().iter().filter_map(|r| proxy_pins::Tag::parse(r.version)).chain(proxy_pins::cached()).collect();
    let newest_minor = known.iter().map(|tag| tag.minor).max().unwrap_or_default();
    let served = proxy_pins::served(&marker.candidates(newest_minor)).unwrap_or_else(|error| {
        tracing::warn!("{marker}: could not ask the Go module proxy: {error}");
        Vec::new()
    });
    let tag = marker.pick(&served).or_else(|| {
        let newest = marker.pick(&known)?;
        tracing::warn!("{marker}: the Go module proxy named no release; taking the newest the harness has, {newest}");
        Some(newest)
    });
    tag.map(|tag| Some(tag.to_string())).ok_or_else(|| ToolchainError::NoRelease {
        marker: marker.to_string(),
        known: known.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
    })
}

/// The release whose pin [`proxy_pins`] made earlier for the tag `version`, if any.
fn made_at_run_time(version: &str) -> Option<Release> {
    let (version, module, ccm) = proxy_pins::load(version)?;
    Some(Release { version, module, ccm, made_at_run_time: true, source: None })
}

/// The release built from the kubernetes/kubernetes checkout `dir` (`--kubernetes-source`): its
/// Kubernetes binaries, `e2e.test` and images from the checkout's commit, etcd and the
/// `local-upstream-ccm` from the pins of its minor. Refused before anything is built when `dir` is
/// no checkout or its go.mod needs a newer Go than the machine's. Registered, so [`resolve`] finds it
/// by its version for the rest of the process.
pub fn from_checkout(dir: &Path) -> Result<Release> {
    let checkout = checkout::Checkout::open(dir)?;
    if let Some(needs) = &checkout.go_line {
        proxy_pins::check_go_version(&checkout.version, needs)?;
    }
    let mut registered = CHECKOUTS.lock().expect("not poisoned");
    let same = |release: &&Release| {
        release.source.is_some_and(|known| known.dir == checkout.dir && known.entry_name() == checkout.entry_name())
    };
    if let Some(known) = registered.iter().find(same) {
        return Ok(*known);
    }
    let release = release_of(Box::leak(Box::new(checkout)));
    registered.push(release);
    Ok(release)
}

/// The releases [`from_checkout`] made in this process, so that [`resolve`] finds a checkout's by
/// the version a run recorded for it (at an exact tag, that version alone would name a pin).
static CHECKOUTS: std::sync::Mutex<Vec<Release>> = std::sync::Mutex::new(Vec::new());

fn registered_checkout(version: &str) -> Option<Release> {
    CHECKOUTS.lock().expect("not poisoned").iter().rev().find(|release| release.version == version).copied()
}

fn release_of(checkout: &'static checkout::Checkout) -> Release {
    let go_mod = fs::read_to_string(checkout.dir.join("go.mod")).unwrap_or_default();
    let minor = checkout.major_minor().1.trim_end_matches('+').to_owned();
    let same_minor = releases().into_iter().find(|r| r.minor() == minor).unwrap_or_else(default_release);
    // What the cache entry depends on, so that its binaries' source records change with the commit.
    let files: &'static [(&'static str, &'static str)] =
        Box::leak(Box::new([("checkout", &*Box::leak(checkout.entry_name().into_boxed_str()))]));
    let module: &'static GoModule = Box::leak(Box::new(GoModule {
        dir: Box::leak(format!("checkout-{}", checkout.entry_name()).into_boxed_str()),
        go_mod: Box::leak(go_mod.into_boxed_str()),
        go_sum: "",
        files,
    }));
    Release {
        version: Box::leak(checkout.version.clone().into_boxed_str()),
        module,
        ccm: same_minor.ccm,
        made_at_run_time: true,
        source: Some(checkout),
    }
}

/// [`resolve`], else a pin made from the Go module proxy for the release or pre-release tag
/// `requested` (`v1.37.0-rc.1`): what `harness toolchain install --kubernetes` and `harness bisect
/// --side kubernetes` take. Needs the proxy the first time; cached under [`proxy_pins::pins_dir`].
pub fn resolve_or_pin(requested: &str) -> Result<Release> {
    match resolve(Some(requested)) {
        Err(ToolchainError::UnknownVersion { .. }) if proxy_pins::Tag::parse(requested.trim()).is_some() => {
            let tag = proxy_pins::Tag::parse(requested.trim()).expect("checked");
            proxy_pins::make(&tag)?;
            made_at_run_time(&tag.to_string()).ok_or_else(|| ToolchainError::Corrupt {
                version: tag.to_string(),
                dir: proxy_pins::pins_dir().join(tag.to_string()),
                reason: "its pin lacks go.mod, go.sum or e2e_imports.go".into(),
                binaries: Box::new([]),
            })
        }
        other => other,
    }
}

/// An installed toolchain.
#[derive(Debug, Clone)]
pub struct Toolchain {
    pub version: String,
    pub dir: PathBuf,
}

impl Toolchain {
    pub fn binary(&self, name: &str) -> PathBuf {
        self.dir.join("bin").join(name)
    }

    /// The Go release its binaries were built with (`go1.26.8`), from its manifest.
    pub fn go_version(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.dir.join("manifest.json")).ok()?;
        serde_json::from_str::<Manifest>(&text).ok().map(|manifest| manifest.go_version)
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    kubernetes_version: String,
    go_version: String,
    binaries: std::collections::BTreeMap<String, BinaryRecord>,
}

#[derive(Debug, Serialize, Deserialize)]
struct BinaryRecord {
    size: u64,
    sha256: String,
    /// The digest of the module sources it was built from ([`source_digest`]): a binary built from
    /// other sources (a harness whose `tools/kube/` changed since) is rebuilt. Absent in records of
    /// harnesses before it, which are kept as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<String>,
}

/// The digest of what `module` is built from: its go.mod, go.sum and source files.
fn source_digest(module: &GoModule) -> String {
    let mut hasher = Sha256::new();
    for (name, text) in [("go.mod", module.go_mod), ("go.sum", module.go_sum)].iter().chain(module.files) {
        hasher.update(format!("{name} {}\n", text.len()));
        hasher.update(text);
    }
    format!("{:x}", hasher.finalize())
}

/// The binaries of `manifest` built from sources other than `release`'s plan has now.
fn stale(release: &Release, manifest: &Manifest) -> Vec<&'static str> {
    let mut stale = Vec::new();
    for build in plan(release) {
        let digest = source_digest(build.module);
        for name in &build.outputs {
            let recorded = manifest.binaries.get(*name).and_then(|r| r.source.as_deref());
            if recorded.is_some_and(|r| r != digest) {
                stale.push(*name);
            }
        }
    }
    stale
}

fn toolchain_dir(release: &Release) -> PathBuf {
    cache_root().join("toolchains").join(release.cache_key())
}

/// The installed toolchain for `release`, every binary checked against its manifest before use:
/// its size, and its SHA-256 unless its stamp vouches for it (then a `stat` is all it costs).
pub fn installed(release: &Release) -> Result<Toolchain> {
    installed_with(release, &[])
}

/// [`installed`], with `extra` of [`ON_DEMAND`] there too.
fn installed_with(release: &Release, extra: &[&str]) -> Result<Toolchain> {
    installed_at(release, toolchain_dir(release), extra)
}

/// [`installed_with`] from the cache entry `dir`.
fn installed_at(release: &Release, dir: PathBuf, extra: &[&str]) -> Result<Toolchain> {
    let wanted = wanted(extra);
    let found = inspect(release.version, &dir, &wanted)?;
    if !found.corrupt.is_empty() {
        return Err(corrupt_binaries(release.version, &dir, &found.corrupt));
    }
    let mut missing = found.missing;
    missing.extend(stale(release, &found.manifest).into_iter().filter(|name| wanted.contains(name)));
    if !missing.is_empty() {
        return Err(ToolchainError::Incomplete { version: release.version.into(), dir, missing });
    }
    Ok(Toolchain { version: release.version.into(), dir })
}

/// [`BINARIES`] and the names of `extra` that are [`ON_DEMAND`] binaries.
fn wanted(extra: &[&str]) -> Vec<&'static str> {
    let extra = ON_DEMAND.iter().filter(|name| extra.contains(name));
    BINARIES.iter().chain(extra).copied().collect()
}

/// What [`inspect`] found in a cache entry.
#[derive(Debug)]
struct Found {
    manifest: Manifest,
    /// The names of `wanted` the manifest lacks.
    missing: Vec<&'static str>,
    /// The binaries that are not what the manifest records, each with why.
    corrupt: Vec<(&'static str, String)>,
}

/// Reads the manifest of the cache entry `dir` and checks every binary it records
/// ([`check_binaries`], trusting the stamps); returns it with the names of `wanted` it lacks and
/// the corrupt binaries. An error only when the entry is absent or its manifest unusable.
fn inspect(version: &str, dir: &Path, wanted: &[&'static str]) -> Result<Found> {
    let manifest = read_manifest(version, dir)?;
    let missing = wanted.iter().copied().filter(|name| !manifest.binaries.contains_key(*name)).collect();
    let corrupt = check_binaries(dir, &manifest, Stamps::Trusted).corrupt;
    Ok(Found { manifest, missing, corrupt })
}

/// The manifest of the cache entry `dir`, which must be `version`'s.
fn read_manifest(version: &str, dir: &Path) -> Result<Manifest> {
    let corrupt = |reason: String| ToolchainError::Corrupt {
        version: version.into(),
        dir: dir.to_path_buf(),
        reason,
        binaries: Box::new([]),
    };
    let manifest_path = dir.join("manifest.json");
    let text = match fs::read_to_string(&manifest_path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(if dir.exists() {
                corrupt("manifest.json is missing".into())
            } else {
                ToolchainError::NotInstalled { version: version.into(), dir: dir.to_path_buf() }
            });
        }
        Err(e) => return Err(io_err("reading", &manifest_path)(e)),
    };
    let manifest: Manifest =
        serde_json::from_str(&text).map_err(|e| corrupt(format!("manifest.json does not parse: {e}")))?;
    if manifest.kubernetes_version != version {
        return Err(corrupt(format!("manifest is for {}", manifest.kubernetes_version)));
    }
    Ok(manifest)
}

/// The error for the corrupt binaries `corrupt` of the entry `dir`.
fn corrupt_binaries(version: &str, dir: &Path, corrupt: &[(&'static str, String)]) -> ToolchainError {
    ToolchainError::Corrupt {
        version: version.into(),
        dir: dir.to_path_buf(),
        reason: corrupt.iter().map(|(_, why)| why.as_str()).collect::<Vec<_>>().join("; "),
        binaries: corrupt.iter().map(|(name, _)| *name).collect(),
    }
}

/// Hashes every binary against the manifest, whatever the stamps say (`harness toolchain verify`),
/// and renews the stamps of those found right.
pub fn verify(release: &Release) -> Result<Toolchain> {
    let dir = toolchain_dir(release);
    let manifest = read_manifest(release.version, &dir)?;
    let checked = check_binaries(&dir, &manifest, Stamps::Ignored);
    if !checked.corrupt.is_empty() {
        return Err(corrupt_binaries(release.version, &dir, &checked.corrupt));
    }
    installed(release)
}

/// Whether [`check_binaries`] trusts a binary its stamp vouches for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stamps {
    Trusted,
    /// Every binary hashed ([`verify`]).
    Ignored,
}

/// What [`check_binaries`] found.
#[derive(Debug, Default)]
struct Checked {
    corrupt: Vec<(&'static str, String)>,
    hashed: Vec<&'static str>,
}

/// Checks every binary of [`BINARIES`] and [`ON_DEMAND`] that `manifest` records in the cache entry
/// `dir`: a missing one or one of the wrong size is corrupt; one whose stat its stamp (for the
/// SHA-256 the manifest records) vouches for is right, unless `stamps` is [`Stamps::Ignored`];
/// any other is hashed (on every core: a toolchain is over a gigabyte), and a match renews its
/// stamp, which a mismatch drops.
fn check_binaries(dir: &Path, manifest: &Manifest, stamps: Stamps) -> Checked {
    check_binaries_at(dir, manifest, stamps, now_ns())
}

/// [`check_binaries`] at the time `now` (nanoseconds since the epoch): a binary is stamped only
/// when it last changed [`SETTLED_NS`] before.
fn check_binaries_at(dir: &Path, manifest: &Manifest, stamps: Stamps, now: i64) -> Checked {
    let stamps_path = stamps_path(dir);
    let known = read_stamps(&stamps_path);
    let mut checked = Checked::default();
    let mut to_hash = Vec::new();
    for name in BINARIES.iter().chain(ON_DEMAND) {
        let Some(record) = manifest.binaries.get(*name) else { continue };
        let path = dir.join("bin").join(name);
        let stat = match fs::metadata(&path) {
            Ok(metadata) => FileStat::of(&metadata),
            Err(e) => {
                checked.corrupt.push((name, format!("{name}: {e}")));
                continue;
            }
        };
        if stat.size != record.size {
            let hint = if stat.size < record.size { " (truncated?)" } else { "" };
            checked
                .corrupt
                .push((name, format!("{name} is {} bytes, the manifest says {}{hint}", stat.size, record.size)));
            continue;
        }
        let stamped = Stamp { sha256: record.sha256.clone(), stat };
        if stamps == Stamps::Trusted && known.binaries.get(*name) == Some(&stamped) {
            continue;
        }
        to_hash.push((*name, path, stamped));
    }
    if to_hash.is_empty() {
        return checked;
    }
    let started = std::time::Instant::now();
    let hashes = on_every_core(&to_hash, |(_, path, _)| {
        let hash = sha256_file(path);
        // Stamped only when what was hashed stayed the same file throughout.
        let after = fs::metadata(path).ok().map(|metadata| FileStat::of(&metadata));
        (hash, after)
    });
    let mut renewed = std::collections::BTreeMap::new();
    for ((name, _, stamp), (hash, after)) in to_hash.into_iter().zip(hashes) {
        checked.hashed.push(name);
        let hash = match hash {
            Ok(hash) => hash,
            Err(e) => {
                checked.corrupt.push((name, e.to_string()));
                renewed.insert(name, None);
                continue;
            }
        };
        if hash != stamp.sha256 {
            let why =
                format!("{name} has SHA-256 {hash}, the manifest says {} (changed since it was built?)", stamp.sha256);
            checked.corrupt.push((name, why));
            renewed.insert(name, None);
        } else if after == Some(stamp.stat) && settled(&stamp.stat, now) {
            renewed.insert(name, Some(stamp));
        }
    }
    tracing::debug!("hashed {} binaries of {} in {:?}", checked.hashed.len(), dir.display(), started.elapsed());
    if let Err(e) = renew_stamps(&stamps_path, &renewed) {
        // Only costs hashing again next time (a cache on a read-only file system).
        tracing::debug!("could not write {}: {e}", stamps_path.display());
    }
    checked
}

/// How long before a check began a binary must have last changed for the check to stamp it. File
/// times move in ticks (a few milliseconds on ext4 before Linux 6.13, a second or two on some
/// file systems), and a write within the tick of the stamped ctime would leave the ctime as the
/// stamp has it. A binary stamped only when its ctime is this much older than the check, a write
/// the check could have missed (one after it began) falls in a later tick and moves the ctime.
const SETTLED_NS: i64 = 2_000_000_000;

/// Whether a binary of `stat` may be stamped at `now`: it last changed [`SETTLED_NS`] before.
fn settled(stat: &FileStat, now: i64) -> bool {
    stat.ctime_ns < now.saturating_sub(SETTLED_NS)
}

/// Now, in nanoseconds since the epoch.
fn now_ns() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_nanos()).unwrap_or(i64::MAX)
}

/// Where the stamps of the cache entry `dir` are kept: `<dir>.verified.json`, beside it rather
/// than in it, since a harness image carries the entry whole and another machine's stamps would
/// only change its bytes.
fn stamps_path(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".verified.json");
    dir.with_file_name(name)
}

/// A binary's stat when it was last hashed and found to have `sha256`, the SHA-256 its manifest
/// record names: while its stat is the same, the binary is trusted without hashing it again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    sha256: String,
    #[serde(flatten)]
    stat: FileStat,
}

/// What of a file's stat changes when the file does: a write moves its mtime and its ctime, and
/// though a user can set the mtime back, only the kernel sets the ctime; a file replaced is
/// another inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct FileStat {
    size: u64,
    dev: u64,
    ino: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

impl FileStat {
    fn of(metadata: &fs::Metadata) -> FileStat {
        use std::os::unix::fs::MetadataExt;
        let ns = |secs: i64, nanos: i64| secs.saturating_mul(1_000_000_000).saturating_add(nanos);
        FileStat {
            size: metadata.size(),
            dev: metadata.dev(),
            ino: metadata.ino(),
            mtime_ns: ns(metadata.mtime(), metadata.mtime_nsec()),
            ctime_ns: ns(metadata.ctime(), metadata.ctime_nsec()),
        }
    }
}

/// The stamps of a cache entry, by binary.
#[derive(Debug, Default, Serialize, Deserialize)]
struct StampFile {
    binaries: std::collections::BTreeMap<String, Stamp>,
}

/// The stamps at `path`: none when it is absent, torn or unreadable (everything is hashed again).
fn read_stamps(path: &Path) -> StampFile {
    fs::read(path).ok().and_then(|bytes| serde_json::from_slice(&bytes).ok()).unwrap_or_default()
}

/// Sets (`Some`) or drops (`None`) the stamps of `renewed` in the file at `path`, keeping the
/// others it holds now: written beside it and renamed into place, so a reader (another harness
/// checking the same entry) sees the old file or the new one, never half of one. Two writers at
/// once may lose one's renewals; that only costs hashing those binaries again.
fn renew_stamps(path: &Path, renewed: &std::collections::BTreeMap<&str, Option<Stamp>>) -> std::io::Result<()> {
    let mut stamps = read_stamps(path);
    let before = stamps.binaries.clone();
    for (name, stamp) in renewed {
        match stamp {
            Some(stamp) => stamps.binaries.insert((*name).to_owned(), stamp.clone()),
            None => stamps.binaries.remove(*name),
        };
    }
    if stamps.binaries == before && path.exists() {
        return Ok(());
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut file = tempfile::Builder::new().prefix(".verified.").suffix(".tmp").tempfile_in(dir)?;
    file.write_all(&serde_json::to_vec_pretty(&stamps).expect("stamps serialise"))?;
    // Readable by whoever shares the cache, as the manifest is.
    use std::os::unix::fs::PermissionsExt;
    file.as_file().set_permissions(fs::Permissions::from_mode(0o644))?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// `work` of each of `items`, in order, on as many threads as there are cores (at most one per item).
fn on_every_core<T: Sync, R: Send>(items: &[T], work: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len());
    if threads <= 1 {
        return items.iter().map(work).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut done: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break done };
                        done.push((i, work(item)));
                    }
                })
            })
            .collect();
        workers.into_iter().flat_map(|worker| worker.join().expect("a hashing thread panicked")).collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, result)| result).collect()
}

/// Installs `release` unless it already is: a no-op on a warm cache. An incomplete entry gets its
/// missing binaries, and one with corrupt binaries (of the wrong size or hash) those rebuilt; an
/// entry whose manifest is unusable is an error unless `force`, which rebuilds everything.
pub fn install(release: &Release, force: bool) -> Result<Toolchain> {
    install_with(release, force, &[])
}

/// [`install`], and the binaries of `extra` that are [`ON_DEMAND`] ones, built if missing.
pub fn install_with(release: &Release, force: bool, extra: &[&str]) -> Result<Toolchain> {
    if !force {
        match installed_with(release, extra) {
            Err(ToolchainError::NotInstalled { .. } | ToolchainError::Incomplete { .. }) => {}
            Err(ToolchainError::Corrupt { binaries, .. }) if !binaries.is_empty() => {}
            other => return other,
        }
    }
    let root = cache_root();
    let toolchains = root.join("toolchains");
    fs::create_dir_all(&toolchains).map_err(io_err("creating", &toolchains))?;
    // Two installs of one version at once (parallel tests, two terminals) take turns.
    let entry = release.cache_key();
    let lock_path = toolchains.join(format!("{entry}.lock"));
    let lock = fs::File::create(&lock_path).map_err(io_err("creating", &lock_path))?;
    lock.lock().map_err(io_err("locking", &lock_path))?;
    let dir = toolchain_dir(release);
    // What an older harness left (checked as before use), kept with its manifest records.
    let wanted = wanted(extra);
    let (mut kept, kept_go) = match inspect(release.version, &dir, &wanted) {
        Ok(found)
            if !force
                && found.missing.is_empty()
                && found.corrupt.is_empty()
                && stale(release, &found.manifest).is_empty() =>
        {
            return installed_with(release, extra);
        }
        Ok(found) if !force => {
            let go_version = found.manifest.go_version.clone();
            (keepable(release, found, &wanted), Some(go_version))
        }
        _ => (Default::default(), None),
    };

    let go = find_go()?;
    let partial = toolchains.join(format!("{entry}.partial"));
    let _ = fs::remove_dir_all(&partial);
    let bin = partial.join("bin");
    fs::create_dir_all(&bin).map_err(io_err("creating", &bin))?;
    // Each kept binary as linked: a build of its siblings may replace it (`go build` of several
    // commands writes them all), and then it is recorded anew.
    let mut linked = std::collections::BTreeMap::new();
    for name in kept.keys() {
        let (from, to) = (dir.join("bin").join(name), bin.join(name));
        fs::hard_link(&from, &to).or_else(|_| fs::copy(&from, &to).map(drop)).map_err(io_err("copying", &from))?;
        linked.insert(name.clone(), FileStat::of(&fs::metadata(&to).map_err(io_err("reading", &to))?));
    }

    let build_root = root.join("build");
    let plan = plan(release);
    let builds = needed(&plan, &kept, &wanted);
    let kubernetes_ldflags = match builds.iter().any(|build| build.stamped) {
        true => version_ldflags(release, &build_date(release, &go, &build_root)?),
        false => String::new(),
    };
    for build in builds {
        let own_ldflags =
            build.version_vars.iter().fold("-s -w".to_string(), |f, (var, v)| format!("{f} -X {var}={v}"));
        let ldflags = if build.stamped { kubernetes_ldflags.as_str() } else { own_ldflags.as_str() };
        let step = progress::step(format!("building {}", build.label));
        match release.source {
            // Kubernetes' own packages, in the checkout with its go.work, staging/ and vendor/.
            Some(checkout) if std::ptr::eq(build.module, release.module) => {
                let logs = build_root.join(release.module.dir);
                fs::create_dir_all(&logs).map_err(io_err("creating", &logs))?;
                go_build(&go, &checkout.dir, &logs, build, ldflags, &bin, None)?;
            }
            // local-upstream-ccm, against the checkout's libraries.
            Some(checkout) if std::ptr::eq(build.module, release.ccm) => {
                let module_dir = write_module(&build_root, build.module)?;
                let workspace = checkout_workspace(&build_root, release, checkout, &module_dir, build)?;
                let logs = workspace.parent().expect("a workspace file has a directory");
                go_build(&go, &module_dir, logs, build, ldflags, &bin, Some(&workspace))?;
            }
            _ => {
                let module_dir = write_module(&build_root, build.module)?;
                go_build(&go, &module_dir, &module_dir, build, ldflags, &bin, None)?;
            }
        }
        step.done();
    }

    let mut binaries = std::collections::BTreeMap::new();
    let sources: std::collections::BTreeMap<&str, String> =
        plan.iter().flat_map(|b| b.outputs.iter().map(|name| (*name, source_digest(b.module)))).collect();
    // The wanted ones, and on-demand ones an earlier install built.
    let recorded: Vec<&str> = ON_DEMAND.iter().copied().filter(|name| kept.contains_key(*name)).collect();
    let mut built = Vec::new();
    let now = now_ns();
    for name in wanted.iter().chain(&recorded).collect::<std::collections::BTreeSet<_>>() {
        let path = bin.join(name);
        let stat = FileStat::of(&fs::metadata(&path).map_err(io_err("reading", &path))?);
        match kept.remove(*name) {
            Some(record) if linked.get(*name) == Some(&stat) => {
                binaries.insert((*name).to_string(), record);
            }
            _ => built.push((*name, path, stat)),
        }
    }
    // Hashed for the manifest, and stamped with what they are now (but those built the last
    // moments, `settled`): the first use hashes none of the others again.
    let mut stamps = std::collections::BTreeMap::new();
    for ((name, _, stat), sha256) in built.iter().zip(on_every_core(&built, |(_, path, _)| sha256_file(path))) {
        let sha256 = sha256?;
        let source = sources.get(name).cloned();
        binaries.insert((*name).to_string(), BinaryRecord { size: stat.size, sha256: sha256.clone(), source });
        if settled(stat, now) {
            stamps.insert(*name, Some(Stamp { sha256, stat: *stat }));
        }
    }
    let go_version = match kept_go.filter(|old| *old != go.version) {
        Some(old) => format!("{} (binaries kept from an earlier install: {old})", go.version),
        None => go.version.clone(),
    };
    let manifest = Manifest { kubernetes_version: release.version.into(), go_version, binaries };
    let manifest_path = partial.join("manifest.json");
    fs::write(&manifest_path, serde_json::to_vec_pretty(&manifest).expect("manifest serialises"))
        .map_err(io_err("writing", &manifest_path))?;

    let _ = fs::remove_dir_all(&dir);
    fs::rename(&partial, &dir).map_err(io_err("renaming into place", &dir))?;
    if let Err(e) = renew_stamps(&stamps_path(&dir), &stamps) {
        tracing::debug!("could not write {}: {e}", stamps_path(&dir).display());
    }
    if release.source.is_some() {
        checkout::prune_entries(&toolchains, &dir);
    }
    // The kept binaries are hashed again here: linking them moved their ctime.
    installed_with(release, extra)
}

/// The binaries of the entry `found` that an install of `release` with `wanted` keeps, with their
/// records: all but the stale ones and the corrupt ones, which are rebuilt (as missing ones are)
/// when wanted and dropped otherwise (an on-demand binary is built again when something needs it).
fn keepable(
    release: &Release,
    found: Found,
    wanted: &[&'static str],
) -> std::collections::BTreeMap<String, BinaryRecord> {
    for (name, why) in &found.corrupt {
        let what = if wanted.contains(name) { "rebuilding it" } else { "dropping it (built again when needed)" };
        tracing::warn!("toolchain {}: {why}: {what}", release.version);
    }
    let stale = stale(release, &found.manifest);
    let mut kept = found.manifest.binaries;
    kept.retain(|name, _| {
        let name = name.as_str();
        (BINARIES.contains(&name) || ON_DEMAND.contains(&name))
            && !stale.contains(&name)
            && !found.corrupt.iter().any(|(corrupt, _)| *corrupt == name)
    });
    kept
}

/// The Go workspace file over `module_dir` and `checkout` that `build` of `release` runs with:
/// `<build>/workspaces/<cache key>/<binary>.work`, its log beside it.
fn checkout_workspace(
    build_root: &Path,
    release: &Release,
    checkout: &checkout::Checkout,
    module_dir: &Path,
    build: &Build,
) -> Result<PathBuf> {
    let file = build_root.join("workspaces").join(release.cache_key()).join(format!("{}.work", build.outputs[0]));
    checkout.write_workspace(module_dir, &file)?;
    Ok(file)
}

/// How a [`Build`] runs Go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GoCommand {
    /// `go build -o bin/ <packages>`: a binary per package, named after its last path element.
    Build,
    /// `go test -c -vet=off -o bin/<output> <package>`: the test binary of one package. `go test`
    /// vets the package first, which needs vet facts of every package it imports (thousands for
    /// `e2e.test`) and adds minutes to a cold build for code upstream's CI already vetted.
    TestBinary,
}

/// One Go invocation of an install and what it leaves in `bin/`.
#[derive(Debug)]
struct Build {
    module: &'static GoModule,
    command: GoCommand,
    packages: Vec<&'static str>,
    outputs: Vec<&'static str>,
    /// Stamped with the Kubernetes version, as upstream's release binaries are.
    stamped: bool,
    /// `-X variable=value` flags of a binary stamped with its own version (containerd).
    version_vars: Vec<(&'static str, &'static str)>,
    label: String,
}

/// Every build of `release`'s toolchain. Kubernetes' commands come first, so that `e2e.test`
/// (which shares most of their packages) finds them in Go's build cache.
fn plan(release: &Release) -> Vec<Build> {
    let version = release.version;
    let ginkgo = pins::required_version(release.module, "github.com/onsi/ginkgo/v2").unwrap_or("?");
    vec![
        Build {
            module: release.module,
            command: GoCommand::Build,
            packages: vec![
                "k8s.io/kubernetes/cmd/kube-apiserver",
                "k8s.io/kubernetes/cmd/kube-controller-manager",
                "k8s.io/kubernetes/cmd/kube-scheduler",
                "k8s.io/kubernetes/cmd/kubectl",
            ],
            outputs: vec!["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"],
            stamped: true,
            version_vars: vec![],
            label: format!("Kubernetes {version} (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl)"),
        },
        Build {
            module: release.module,
            command: GoCommand::TestBinary,
            packages: vec![E2E_PACKAGE],
            outputs: vec!["e2e.test"],
            stamped: true,
            version_vars: vec![],
            label: format!("e2e.test of Kubernetes {version} (go test -c {E2E_PACKAGE})"),
        },
        Build {
            module: release.module,
            command: GoCommand::Build,
            packages: vec![GINKGO_PACKAGE],
            outputs: vec!["ginkgo"],
            stamped: false,
            version_vars: vec![],
            label: format!("ginkgo {ginkgo} (for Kubernetes {version})"),
        },
        Build {
            module: release.module,
            command: GoCommand::Build,
            packages: vec![GO_RUNNER_PACKAGE],
            outputs: vec!["go-runner"],
            stamped: false,
            version_vars: vec![],
            label: format!("go-runner of Kubernetes {version} (the conformance image's entrypoint)"),
        },
        // etcd's wrapper module builds a binary named after its folder.
        Build {
            module: &pins::ETCD,
            command: GoCommand::Build,
            packages: vec!["."],
            outputs: vec!["etcd"],
            stamped: false,
            version_vars: vec![],
            label: etcd_label(),
        },
        Build {
            module: release.ccm,
            command: GoCommand::Build,
            packages: vec!["."],
            outputs: vec![UPSTREAM_CCM],
            stamped: true,
            version_vars: vec![],
            label: match release.source {
                Some(checkout) => format!(
                    "{UPSTREAM_CCM} (k8s.io/cloud-provider of kubernetes/kubernetes {}, over the local cloud)",
                    &checkout.commit[..12]
                ),
                None => format!("{UPSTREAM_CCM} (k8s.io/cloud-provider v0.{} over the local cloud)", &version[3..]),
            },
        },
        Build {
            module: release.module,
            command: GoCommand::Build,
            packages: vec!["k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kube-proxy"],
            outputs: vec!["kubelet", "kube-proxy"],
            stamped: true,
            version_vars: vec![],
            label: format!("Kubernetes {version} node binaries (kubelet, kube-proxy)"),
        },
        Build {
            module: release.module,
            command: GoCommand::Build,
            packages: vec![AGNHOST_PACKAGE],
            outputs: vec!["agnhost"],
            stamped: false,
            version_vars: vec![],
            label: format!("agnhost of Kubernetes {version} (the conformance tests' image)"),
        },
        Build {
            module: release.module,
            command: GoCommand::Build,
            packages: IMAGE_PACKAGES.to_vec(),
            outputs: vec!["sample-apiserver", "nonewprivs"],
            stamped: true,
            version_vars: vec![],
            label: format!("sample-apiserver and nonewprivs of Kubernetes {version} (conformance images)"),
        },
        Build {
            module: &pins::CONTAINERD,
            command: GoCommand::Build,
            packages: CONTAINERD_PACKAGES.to_vec(),
            outputs: vec!["containerd", "containerd-shim-runc-v2", "ctr"],
            stamped: false,
            version_vars: vec![("github.com/containerd/containerd/v2/version.Version", containerd_version())],
            label: format!("containerd {} (containerd, containerd-shim-runc-v2, ctr)", containerd_version()),
        },
        Build {
            module: &pins::COREDNS,
            command: GoCommand::Build,
            packages: vec!["."],
            outputs: vec!["coredns"],
            stamped: false,
            version_vars: vec![],
            label: format!(
                "CoreDNS {}",
                pins::required_version(&pins::COREDNS, "github.com/coredns/coredns").unwrap_or("?")
            ),
        },
        Build {
            module: &pins::NETPROXY,
            command: GoCommand::Build,
            packages: vec!["."],
            outputs: vec!["netproxy"],
            stamped: false,
            version_vars: vec![],
            label: "netproxy (the harness's root-to-hub namespace forwarder)".into(),
        },
        Build {
            module: &pins::WGET,
            command: GoCommand::Build,
            packages: vec!["."],
            outputs: vec!["wget"],
            stamped: false,
            version_vars: vec![],
            label: "wget (the busybox images' wget)".into(),
        },
        Build {
            module: &pins::REGISTRY,
            command: GoCommand::Build,
            packages: vec!["."],
            outputs: vec!["registry"],
            stamped: false,
            version_vars: vec![],
            label: "registry (real nodes' read-only image registry)".into(),
        },
        Build {
            module: &pins::KWOK,
            command: GoCommand::Build,
            packages: vec!["sigs.k8s.io/kwok/cmd/kwok"],
            outputs: vec!["kwok"],
            stamped: false,
            version_vars: vec![],
            label: kwok_label(),
        },
    ]
}

/// The builds that make a binary of `wanted` not in `kept`.
fn needed<'a, V>(plan: &'a [Build], kept: &std::collections::BTreeMap<String, V>, wanted: &[&str]) -> Vec<&'a Build> {
    let missing = |name: &&str| wanted.contains(name) && !kept.contains_key(*name);
    plan.iter().filter(|build| build.outputs.iter().any(missing)).collect()
}

fn etcd_label() -> String {
    format!("etcd {}", pins::required_version(&pins::ETCD, "go.etcd.io/etcd/server/v3").unwrap_or("?"))
}

fn kwok_label() -> String {
    format!("kwok {}", pins::required_version(&pins::KWOK, "sigs.k8s.io/kwok").unwrap_or("?"))
}

struct Go {
    path: PathBuf,
    version: String,
}

/// The `GOGC` of the toolchain's Go builds.
const GO_GC_PERCENT: &str = "400";

impl Go {
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.path);
        // Never let go fetch another toolchain (no internet beyond the module proxy), and build
        // static binaries as upstream's release does.
        cmd.env("GOTOOLCHAIN", "local").env("CGO_ENABLED", "0");
        // The compiler collects garbage less often: 19% less CPU time for containerd's build from
        // an empty cache, for 9% more memory, in alternating pairs (docs/benchmarks.md, "A new,
        // slower machine"). A GOGC of the user's own is kept.
        if std::env::var_os("GOGC").is_none() {
            cmd.env("GOGC", GO_GC_PERCENT);
        }
        cmd
    }
}

fn find_go() -> Result<Go> {
    let path = match std::env::var_os("GO") {
        Some(go) => PathBuf::from(go),
        None => search_path("go").ok_or_else(|| ToolchainError::GoMissing { detail: "`go` is not on PATH".into() })?,
    };
    let output = Command::new(&path)
        .arg("version")
        .output()
        .map_err(|e| ToolchainError::GoMissing { detail: format!("running {}: {e}", path.display()) })?;
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    let version = text.split_whitespace().nth(2).unwrap_or_default().to_string();
    let minor =
        version.strip_prefix("go1.").and_then(|rest| rest.split('.').next()).and_then(|m| m.parse::<u32>().ok());
    match minor {
        Some(minor) if minor >= MIN_GO_MINOR => Ok(Go { path, version }),
        _ => Err(ToolchainError::GoMissing { detail: format!("{} reports '{}'", path.display(), text.trim()) }),
    }
}

/// Finds an executable on PATH, as a shell would.
pub fn search_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

/// Whether `path` is a file someone may execute.
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn write_module(build_root: &Path, module: &GoModule) -> Result<PathBuf> {
    let dir = build_root.join(module.dir);
    fs::create_dir_all(&dir).map_err(io_err("creating", &dir))?;
    let files = [("go.mod", module.go_mod), ("go.sum", module.go_sum)].into_iter().chain(module.files.iter().copied());
    for (name, contents) in files {
        let path = dir.join(name);
        if fs::read(&path).is_ok_and(|old| old == contents.as_bytes()) {
            continue;
        }
        // Renamed into place: a `go` of another thread may be reading the module (images from
        // sources are built alongside the Go builds), and must never see a file half written.
        let mut file = tempfile::NamedTempFile::new_in(&dir).map_err(io_err("creating a file in", &dir))?;
        file.write_all(contents.as_bytes()).map_err(io_err("writing", &path))?;
        file.persist(&path).map_err(|e| io_err("writing", &path)(e.error))?;
    }
    Ok(dir)
}

/// The source of the release's `k8s.io/kubernetes` module in Go's module cache (downloaded through
/// the module proxy unless there): what node images are built from.
pub fn kubernetes_source(release: &Release) -> Result<PathBuf> {
    if let Some(checkout) = release.source {
        return Ok(checkout.dir.clone());
    }
    let go = find_go()?;
    let dir = write_module(&cache_root().join("build"), release.module)?;
    let output = go
        .command()
        .args(["mod", "download", "-json", &format!("k8s.io/kubernetes@{}", release.version)])
        .current_dir(&dir)
        .output()
        .map_err(io_err("running go mod download in", &dir))?;
    let parsed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    match parsed["Dir"].as_str() {
        Some(source) if output.status.success() => Ok(PathBuf::from(source)),
        _ => Err(ToolchainError::BuildFailed {
            what: format!("downloading the source of k8s.io/kubernetes {}", release.version),
            status: output.status.to_string(),
            excerpt: String::from_utf8_lossy(&output.stderr).trim().into(),
            log: dir,
        }),
    }
}

/// The release's publication time on the module proxy, upstream's `buildDate` format
/// (reproducible, unlike the time of the build).
fn build_date(release: &Release, go: &Go, build_root: &Path) -> Result<String> {
    if let Some(checkout) = release.source {
        return Ok(checkout.commit_time.clone());
    }
    let dir = write_module(build_root, release.module)?;
    let output = go
        .command()
        .args(["list", "-m", "-f", "{{.Time}}", "k8s.io/kubernetes"])
        .current_dir(&dir)
        .output()
        .map_err(io_err("running go list in", &dir))?;
    let build_date = String::from_utf8_lossy(&output.stdout).trim().replace(" +0000 UTC", "Z").replace(' ', "T");
    Ok(if output.status.success() && !build_date.is_empty() { build_date } else { "1970-01-01T00:00:00Z".into() })
}

/// The `-X` flags upstream's `hack/lib/version.sh` sets, so `--version` and `/version` tell the
/// truth (and `e2e.test`'s framework logs the right version).
fn version_ldflags(release: &Release, build_date: &str) -> String {
    let (major, minor, tree_state, commit) = match release.source {
        Some(checkout) => {
            let (major, minor) = checkout.major_minor();
            (major, minor, checkout.tree_state.as_str(), Some(checkout.commit.as_str()))
        }
        None => ("1".into(), release.minor().into(), "clean", None),
    };
    let mut vars = vec![
        ("gitVersion", release.version),
        ("gitMajor", major.as_str()),
        ("gitMinor", minor.as_str()),
        ("gitTreeState", tree_state),
        ("buildDate", build_date),
    ];
    vars.extend(commit.map(|commit| ("gitCommit", commit)));
    ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"]
        .iter()
        .flat_map(|package| vars.iter().map(move |(var, value)| format!("-X {package}.{var}={value}")))
        .fold("-s -w".to_string(), |flags, flag| format!("{flags} {flag}"))
}

/// The arguments of `go` for `build`, writing into `bin`.
fn go_args(build: &Build, ldflags: &str, bin: &Path) -> Vec<std::ffi::OsString> {
    let (mut args, out): (Vec<std::ffi::OsString>, PathBuf) = match build.command {
        // A trailing slash makes `-o` a directory even for one package.
        GoCommand::Build => (vec!["build".into()], bin.join("")),
        GoCommand::TestBinary => (vec!["test".into(), "-c".into(), "-vet=off".into()], bin.join(build.outputs[0])),
    };
    // The version is stamped from `ldflags`: Go's own VCS stamping would run git in a checkout
    // (and fail on one another user owns).
    args.extend(["-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o"].map(Into::into));
    args.push(out.into());
    args.extend(build.packages.iter().map(Into::into));
    args
}

/// Runs `go` for `build` in `module_dir` (in the Go workspace `workspace` when given), its output
/// to a log in `log_dir`.
fn go_build(
    go: &Go,
    module_dir: &Path,
    log_dir: &Path,
    build: &Build,
    ldflags: &str,
    bin: &Path,
    workspace: Option<&Path>,
) -> Result<()> {
    let log_path = log_dir.join(format!("build-{}.log", build.outputs[0]));
    let log = fs::File::create(&log_path).map_err(io_err("creating", &log_path))?;
    let mut command = go.command();
    if let Some(workspace) = workspace {
        command.env("GOWORK", workspace);
    }
    let status = command
        .current_dir(module_dir)
        .args(go_args(build, ldflags, bin))
        .stdout(log.try_clone().map_err(io_err("opening", &log_path))?)
        .stderr(log)
        .status()
        .map_err(io_err("running go in", module_dir))?;
    if !status.success() {
        let text = fs::read_to_string(&log_path).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(15).collect();
        for line in tail.into_iter().rev() {
            tracing::error!("go: {line}");
        }
        return Err(ToolchainError::BuildFailed {
            what: build.label.clone(),
            status: status.to_string(),
            excerpt: compiler_errors(&text).into(),
            log: log_path,
        });
    }
    Ok(())
}

/// What rebuilds a corrupt entry: `--force` for the entry as a whole, a plain install for binaries.
fn corrupt_fix(version: &str, binaries: &[&str]) -> String {
    match binaries {
        [] => format!("rebuild it with `harness toolchain install --kubernetes {version} --force`"),
        _ => format!("`harness toolchain install --kubernetes {version}` rebuilds {}", binaries.join(", ")),
    }
}

/// `excerpt` after a colon, or nothing when empty.
fn said(excerpt: &str) -> String {
    if excerpt.is_empty() { String::new() } else { format!(": {excerpt}") }
}

/// What a failed `go build` said that matters, on one line: the compiler's `file.go:line:col:
/// message` errors (and the packages they are in), at most [`EXCERPT_LINES`]; else its last lines
/// (a module that cannot be resolved, a linker error).
pub(crate) fn compiler_errors(output: &str) -> String {
    let lines: Vec<&str> = output.lines().map(str::trim).filter(|line| !line.is_empty()).collect();
    let is_error = |line: &&str| {
        let mut parts = line.splitn(3, ':');
        parts.next().is_some_and(|file| file.ends_with(".go"))
            && parts.next().is_some_and(|row| row.parse::<u32>().is_ok())
    };
    let errors: Vec<&str> = lines.iter().copied().filter(is_error).take(EXCERPT_LINES).collect();
    let chosen = if errors.is_empty() { lines[lines.len().saturating_sub(EXCERPT_LINES)..].to_vec() } else { errors };
    match chosen.is_empty() {
        true => "it printed nothing".to_owned(),
        false => chosen.join("; "),
    }
}

/// The most lines of a failed build's output an error carries.
const EXCERPT_LINES: usize = 8;

fn sha256_file(path: &Path) -> Result<String> {
    let mut file = fs::File::open(path).map_err(io_err("opening", path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io_err("reading", path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failed build is told by the compiler's `file.go:line:col:` errors, else its last lines.
    #[test]
    fn a_failed_build_is_told_by_the_compilers_errors() {
        let output = "go: downloading k8s.io/api v0.37.1\n# cloud-provider-harness/tools/local-upstream-ccm\n\
                      ./main.go:34:71: undefined: app.DefaultInitFuncConstructors\n\
                      ./provider.go:9:2: \"fmt\" imported and not used\n";
        assert_eq!(
            compiler_errors(output),
            "./main.go:34:71: undefined: app.DefaultInitFuncConstructors; ./provider.go:9:2: \"fmt\" imported and not used"
        );
        let refused = "go: downloading k8s.io/x v1\ngo: k8s.io/x@v1: reading https://proxy/k8s.io/x: 403 Forbidden\n";
        assert_eq!(compiler_errors(refused), refused.trim().replace('\n', "; "));
        assert_eq!(compiler_errors(""), "it printed nothing");
        let error = ToolchainError::BuildFailed {
            what: "local-upstream-ccm".into(),
            status: "exit status: 1".into(),
            excerpt: compiler_errors(output).into(),
            log: "/cache/build.log".into(),
        };
        let text = error.to_string();
        assert!(
            text.contains("(exit status: 1): ./main.go:34:71: undefined") && text.ends_with("/cache/build.log"),
            "{text}"
        );
    }

    /// A module's files are replaced whole (a `go` reading them alongside never sees half of one)
    /// and left alone when unchanged.
    #[test]
    fn a_module_is_written_whole_and_left_alone_when_unchanged() {
        static MODULE: GoModule =
            GoModule { dir: "m", go_mod: "module m\n", go_sum: "", files: &[("main.go", "package main\n")] };
        let tmp = tempfile::tempdir().unwrap();
        let dir = write_module(tmp.path(), &MODULE).unwrap();
        let go_mod = dir.join("go.mod");
        assert_eq!(fs::read_to_string(&go_mod).unwrap(), "module m\n");
        let inode = |path: &Path| std::os::unix::fs::MetadataExt::ino(&fs::metadata(path).unwrap());
        let before = inode(&go_mod);
        write_module(tmp.path(), &MODULE).unwrap();
        assert_eq!(inode(&go_mod), before, "unchanged: not written again");
        fs::write(&go_mod, "module old\n").unwrap();
        write_module(tmp.path(), &MODULE).unwrap();
        assert_eq!(fs::read_to_string(&go_mod).unwrap(), "module m\n");
        assert_ne!(inode(&go_mod), before, "changed: a new file renamed into place");
        let names: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 3, "no temporary file left: {names:?}");
    }

    #[test]
    fn resolves_every_spelling_of_a_pinned_version() {
        let newest = default_release();
        let minor = &newest.version[..newest.version.rfind('.').unwrap()];
        for spelling in [newest.version, &newest.version[1..], minor, &minor[1..], "latest"] {
            assert_eq!(resolve(Some(spelling)).unwrap().version, newest.version, "{spelling}");
        }
        assert_eq!(resolve(None).unwrap().version, newest.version);
    }

    #[test]
    fn an_unknown_version_names_the_pinned_ones() {
        let err = resolve(Some("v1.99.0")).unwrap_err().to_string();
        assert!(err.contains("'v1.99.0' is not pinned"), "{err}");
        for release in releases() {
            assert!(err.contains(release.version), "{err}");
        }
    }

    #[test]
    fn the_build_plan_makes_every_binary_once() {
        for release in releases() {
            let mut made: Vec<&str> = plan(&release).iter().flat_map(|b| b.outputs.clone()).collect();
            made.sort();
            let mut expected = [BINARIES, ON_DEMAND].concat();
            expected.sort();
            assert_eq!(made, expected, "{}", release.version);
        }
    }

    #[test]
    fn e2e_test_is_upstreams_test_binary_stamped_like_the_control_plane() {
        let release = default_release();
        let plan = plan(&release);
        let e2e = plan.iter().find(|b| b.outputs == ["e2e.test"]).unwrap();
        assert_eq!(
            (e2e.command, e2e.packages.as_slice(), e2e.stamped),
            (GoCommand::TestBinary, &[E2E_PACKAGE][..], true)
        );
        assert!(std::ptr::eq(e2e.module, release.module), "built in the release's own module");
        let apiserver = plan.iter().find(|b| b.outputs.contains(&"kube-apiserver")).unwrap();
        assert!(apiserver.stamped);

        let ldflags = version_ldflags(&release, "2026-01-02T03:04:05Z");
        let minor = release.minor();
        for flag in [
            format!("-X k8s.io/component-base/version.gitVersion={}", release.version),
            format!("-X k8s.io/component-base/version.gitMinor={minor}"),
            "-X k8s.io/component-base/version.buildDate=2026-01-02T03:04:05Z".into(),
            format!("-X k8s.io/client-go/pkg/version.gitVersion={}", release.version),
        ] {
            assert!(ldflags.contains(&flag), "{ldflags} lacks {flag}");
        }
        let args: Vec<String> =
            go_args(e2e, &ldflags, Path::new("/c/v/bin")).into_iter().map(|a| a.into_string().unwrap()).collect();
        assert_eq!(args[..3], ["test", "-c", "-vet=off"]);
        assert_eq!(args[args.len() - 3..], ["-o", "/c/v/bin/e2e.test", E2E_PACKAGE]);
        assert!(args.contains(&ldflags));

        let build = go_args(apiserver, "-s -w", Path::new("/c/v/bin"));
        assert_eq!(build[0], "build");
        assert!(build.contains(&"/c/v/bin/".into()), "{build:?}: -o names the directory");
    }

    #[test]
    fn ginkgo_is_built_at_the_version_the_release_requires() {
        for release in releases() {
            let ginkgo = pins::required_version(release.module, "github.com/onsi/ginkgo/v2").unwrap();
            let build = plan(&release).into_iter().find(|b| b.outputs == ["ginkgo"]).unwrap();
            assert_eq!(
                (build.command, build.packages.as_slice(), build.stamped),
                (GoCommand::Build, &[GINKGO_PACKAGE][..], false)
            );
            assert!(std::ptr::eq(build.module, release.module), "{}", release.version);
            assert!(build.label.contains(ginkgo), "{}", build.label);
        }
    }

    #[test]
    fn a_binary_built_from_other_sources_is_stale_and_one_without_a_record_of_them_is_kept() {
        let release = default_release();
        let record =
            |source: Option<&str>| BinaryRecord { size: 1, sha256: "00".into(), source: source.map(Into::into) };
        let current = source_digest(&pins::REGISTRY);
        let manifest = Manifest {
            kubernetes_version: release.version.into(),
            go_version: "go".into(),
            binaries: [
                ("wget".to_string(), record(Some("an older wget's sources"))),
                ("registry".to_string(), record(Some(&current))),
                ("netproxy".to_string(), record(None)),
            ]
            .into(),
        };
        assert_eq!(stale(&release, &manifest), ["wget"]);
        assert_ne!(source_digest(&pins::WGET), source_digest(&pins::REGISTRY));
    }

    /// A cache entry in `dir` holding `names`, each a file of `size` bytes, with a manifest saying
    /// each is `recorded` bytes (and has the SHA-256 of `recorded` bytes as the entry writes them).
    fn entry(dir: &Path, version: &str, names: &[&str], size: usize, recorded: u64) {
        fs::create_dir_all(dir.join("bin")).unwrap();
        let built = sha256_hex(&vec![b'x'; recorded as usize]);
        let mut binaries = std::collections::BTreeMap::new();
        for name in names {
            fs::write(dir.join("bin").join(name), vec![b'x'; size]).unwrap();
            binaries.insert(name.to_string(), BinaryRecord { size: recorded, sha256: built.clone(), source: None });
        }
        let manifest = Manifest { kubernetes_version: version.into(), go_version: "go1.26.0".into(), binaries };
        fs::write(dir.join("manifest.json"), serde_json::to_vec(&manifest).unwrap()).unwrap();
    }

    fn sha256_hex(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    /// A time at which every binary of a test's entry has settled ([`SETTLED_NS`]): what a check
    /// sees of binaries built more than a moment before it.
    fn later() -> i64 {
        now_ns() + 2 * SETTLED_NS
    }

    /// [`check_binaries_at`] of the entry `dir` at `now`, trusting its stamps.
    fn check(dir: &Path, now: i64) -> Checked {
        let manifest = read_manifest(default_release().version, dir).unwrap();
        check_binaries_at(dir, &manifest, Stamps::Trusted, now)
    }

    fn corrupt_names(corrupt: &[(&'static str, String)]) -> Vec<&'static str> {
        corrupt.iter().map(|(name, _)| *name).collect()
    }

    fn stamped(dir: &Path) -> Vec<String> {
        read_stamps(&stamps_path(dir)).binaries.into_keys().collect()
    }

    fn sorted(names: &[&str]) -> Vec<String> {
        let mut names: Vec<String> = names.iter().map(|name| name.to_string()).collect();
        names.sort();
        names
    }

    /// Moves the file's ctime (the kernel's clock, a moment later) and nothing else.
    fn touch_ctime(path: &Path) {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mtime = fs::metadata(path).unwrap().modified().unwrap();
        fs::File::options().write(true).open(path).unwrap().set_modified(mtime).unwrap();
    }

    /// What the harness installed before e2e.test and ginkgo were part of the toolchain.
    const OLDER_BINARIES: &[&str] =
        &["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok"];

    #[test]
    fn an_entry_from_before_e2e_test_is_incomplete_and_only_the_missing_builds_run() {
        let tmp = tempfile::tempdir().unwrap();
        let version = default_release().version;
        let dir = tmp.path().join(version);

        entry(&dir, version, BINARIES, 3, 3);
        let found = inspect(version, &dir, BINARIES).unwrap();
        assert!(found.missing.is_empty() && found.corrupt.is_empty(), "{found:?}");

        fs::remove_dir_all(&dir).unwrap();
        entry(&dir, version, OLDER_BINARIES, 3, 3);
        let Found { manifest, missing, corrupt } = inspect(version, &dir, BINARIES).unwrap();
        assert!(corrupt.is_empty(), "{corrupt:?}");
        let expected: Vec<&str> =
            ["e2e.test", "ginkgo", "go-runner"].into_iter().chain(NODE_BINARIES.iter().copied()).collect();
        assert_eq!(missing, expected);
        let err = installed_at(&default_release(), dir.clone(), &[]).unwrap_err();
        assert!(matches!(&err, ToolchainError::Incomplete { missing: m, .. } if *m == missing), "{err}");
        let text = err.to_string();
        assert!(text.contains("lacks e2e.test, ginkgo, go-runner, kubelet"), "{text}");
        assert!(text.contains(&format!("harness toolchain install --kubernetes {version}")), "{text}");

        let plan = plan(&default_release());
        let labels: Vec<&str> = needed(&plan, &manifest.binaries, BINARIES).iter().map(|b| b.outputs[0]).collect();
        assert_eq!(
            labels,
            [
                "e2e.test",
                "ginkgo",
                "go-runner",
                "kubelet",
                "agnhost",
                "sample-apiserver",
                "containerd",
                "coredns",
                "netproxy",
                "wget",
                "registry"
            ]
        );
        let nothing = std::collections::BTreeMap::<String, ()>::new();
        assert_eq!(needed(&plan, &nothing, &wanted(ON_DEMAND)).len(), plan.len());
    }

    #[test]
    fn on_demand_binaries_are_built_only_when_asked_for_and_kept_once_built() {
        let tmp = tempfile::tempdir().unwrap();
        let version = default_release().version;
        let dir = tmp.path().join(version);
        entry(&dir, version, BINARIES, 3, 3);
        let plan = plan(&default_release());
        for extra in [&[][..], &["not-a-binary"]] {
            let found = inspect(version, &dir, &wanted(extra)).unwrap();
            assert!(found.missing.is_empty(), "{extra:?}: {:?}", found.missing);
            assert!(needed(&plan, &found.manifest.binaries, &wanted(extra)).is_empty(), "{extra:?}");
        }
        let found = inspect(version, &dir, &wanted(&["kwok"])).unwrap();
        assert_eq!(found.missing, ["kwok"]);
        let builds: Vec<&str> =
            needed(&plan, &found.manifest.binaries, &wanted(&["kwok"])).iter().map(|b| b.outputs[0]).collect();
        assert_eq!(builds, ["kwok"]);

        fs::remove_dir_all(&dir).unwrap();
        entry(&dir, version, &wanted(ON_DEMAND), 3, 3);
        let found = inspect(version, &dir, &wanted(&["kwok"])).unwrap();
        assert!(found.missing.is_empty(), "{:?}", found.missing);
        // A built on-demand binary is still checked, though nobody asked for it this time.
        fs::write(dir.join("bin").join(UPSTREAM_CCM), b"truncated!").unwrap();
        assert_eq!(corrupt_names(&inspect(version, &dir, BINARIES).unwrap().corrupt), [UPSTREAM_CCM]);
        let err = installed_at(&default_release(), dir.clone(), &[]).unwrap_err().to_string();
        assert!(err.contains(UPSTREAM_CCM) && err.contains("is corrupt"), "{err}");
        // An install that does not want it drops it rather than keeping it (built again when needed).
        let kept = keepable(&default_release(), inspect(version, &dir, BINARIES).unwrap(), BINARIES);
        assert!(!kept.contains_key(UPSTREAM_CCM) && kept.contains_key("kwok"), "{:?}", kept.keys());
    }

    #[test]
    fn a_truncated_binary_is_corrupt_even_in_an_incomplete_entry() {
        let tmp = tempfile::tempdir().unwrap();
        let version = default_release().version;
        let dir = tmp.path().join(version);
        entry(&dir, version, OLDER_BINARIES, 3, 1_000);
        let found = inspect(version, &dir, BINARIES).unwrap();
        assert_eq!(sorted(&corrupt_names(&found.corrupt)), sorted(OLDER_BINARIES));
        assert!(!found.missing.is_empty());
        let err = installed_at(&default_release(), dir.clone(), &[]).unwrap_err();
        assert!(matches!(&err, ToolchainError::Corrupt { binaries, .. } if binaries.len() == OLDER_BINARIES.len()));
        let err = err.to_string();
        assert!(
            err.contains("is corrupt") && err.contains("kubectl is 3 bytes, the manifest says 1000 (truncated?)"),
            "{err}"
        );
        assert!(matches!(
            inspect(version, &tmp.path().join("absent"), BINARIES),
            Err(ToolchainError::NotInstalled { .. })
        ));
    }

    /// Issue 56: "A truncated cached binary is rebuilt, not run." `installed`, which cannot build,
    /// refuses it naming the command that rebuilds it; an install keeps every other binary and
    /// rebuilds it, whatever its stamp said before.
    #[test]
    fn a_truncated_binary_is_refused_before_use_and_rebuilt_not_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let release = default_release();
        let dir = tmp.path().join(release.version);
        entry(&dir, release.version, BINARIES, 3, 3);
        assert!(check(&dir, later()).corrupt.is_empty());
        assert_eq!(stamped(&dir), sorted(BINARIES), "every binary stamped");

        fs::File::options().write(true).open(dir.join("bin/kubectl")).unwrap().set_len(1).unwrap();
        let err = installed_at(&release, dir.clone(), &[]).unwrap_err();
        assert!(matches!(&err, ToolchainError::Corrupt { binaries, .. } if binaries[..] == ["kubectl"]), "{err}");
        let text = err.to_string();
        let rebuilds = format!("`harness toolchain install --kubernetes {}` rebuilds kubectl", release.version);
        assert!(text.contains("(kubectl is 1 bytes, the manifest says 3 (truncated?))"), "{text}");
        assert!(text.contains(&rebuilds) && !text.contains("--force"), "{text}");

        let found = inspect(release.version, &dir, BINARIES).unwrap();
        let kept = keepable(&release, found, BINARIES);
        assert!(!kept.contains_key("kubectl"), "a corrupt binary is not kept: {:?}", kept.keys());
        assert_eq!(kept.len(), BINARIES.len() - 1, "{:?}", kept.keys());
        let plan = plan(&release);
        let builds: Vec<&[&str]> = needed(&plan, &kept, BINARIES).iter().map(|b| b.outputs.as_slice()).collect();
        assert_eq!(builds, [["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"]]);
    }

    #[test]
    fn a_binary_rewritten_at_its_size_is_found_by_its_hash() {
        let tmp = tempfile::tempdir().unwrap();
        let release = default_release();
        let dir = tmp.path().join(release.version);
        entry(&dir, release.version, BINARIES, 3, 3);
        let first = check(&dir, later());
        assert_eq!((first.corrupt.len(), first.hashed.len()), (0, BINARIES.len()));
        assert!(check(&dir, later()).hashed.is_empty(), "stamped: none hashed again");

        std::thread::sleep(std::time::Duration::from_millis(20));
        let kubectl = dir.join("bin/kubectl");
        let inode = |path: &Path| std::os::unix::fs::MetadataExt::ino(&fs::metadata(path).unwrap());
        let before = inode(&kubectl);
        fs::File::options().write(true).open(&kubectl).unwrap().write_all(b"yyy").unwrap();
        assert_eq!((inode(&kubectl), fs::metadata(&kubectl).unwrap().len()), (before, 3), "rewritten in place");

        let checked = check(&dir, later());
        assert_eq!(checked.hashed, ["kubectl"]);
        assert_eq!(corrupt_names(&checked.corrupt), ["kubectl"]);
        let why = &checked.corrupt[0].1;
        assert!(
            why.contains(&format!(
                "kubectl has SHA-256 {}, the manifest says {}",
                sha256_hex(b"yyy"),
                sha256_hex(b"xxx")
            )),
            "{why}"
        );
        assert!(!stamped(&dir).contains(&"kubectl".to_string()), "its stamp dropped");
        assert_eq!(check(&dir, later()).hashed, ["kubectl"], "hashed again at every check until rebuilt");
        let err = installed_at(&release, dir.clone(), &[]).unwrap_err().to_string();
        assert!(err.contains("kubectl has SHA-256") && err.contains("rebuilds kubectl"), "{err}");
        let kept = keepable(&release, inspect(release.version, &dir, BINARIES).unwrap(), BINARIES);
        assert!(!kept.contains_key("kubectl"));
    }

    /// A binary whose stamp matches its stat is not hashed: kubectl's manifest record here names
    /// a SHA-256 it does not have, and the stamp for that record is believed, until kubectl's ctime
    /// moves (its mtime set back to what it was) and it is hashed and found out. A stamp for
    /// another SHA-256 than the manifest's (an earlier build's) vouches for nothing.
    #[test]
    fn a_binary_its_stamp_vouches_for_is_not_hashed_until_it_changes() {
        let tmp = tempfile::tempdir().unwrap();
        let release = default_release();
        let dir = tmp.path().join(release.version);
        entry(&dir, release.version, BINARIES, 3, 3);
        let mut manifest = read_manifest(release.version, &dir).unwrap();
        let wrong = "f".repeat(64);
        manifest.binaries.get_mut("kubectl").unwrap().sha256 = wrong.clone();
        fs::write(dir.join("manifest.json"), serde_json::to_vec(&manifest).unwrap()).unwrap();
        let stat = |name: &str| FileStat::of(&fs::metadata(dir.join("bin").join(name)).unwrap());
        let stamps = [
            ("kubectl", Some(Stamp { sha256: wrong.clone(), stat: stat("kubectl") })),
            ("etcd", Some(Stamp { sha256: "e".repeat(64), stat: stat("etcd") })),
        ];
        renew_stamps(&stamps_path(&dir), &stamps.into_iter().collect()).unwrap();

        let checked = check(&dir, later());
        assert!(checked.corrupt.is_empty(), "kubectl trusted on its stamp: {:?}", checked.corrupt);
        assert!(!checked.hashed.contains(&"kubectl"), "{:?}", checked.hashed);
        assert!(checked.hashed.contains(&"etcd"), "a stamp for another SHA-256 is not trusted");
        assert_eq!(checked.hashed.len(), BINARIES.len() - 1);
        assert!(check(&dir, later()).hashed.is_empty());
        let ignored = check_binaries_at(&dir, &manifest, Stamps::Ignored, later());
        assert_eq!(
            (ignored.hashed.len(), corrupt_names(&ignored.corrupt)),
            (BINARIES.len(), vec!["kubectl"]),
            "verify"
        );

        let kubectl = dir.join("bin/kubectl");
        let mtime = fs::metadata(&kubectl).unwrap().modified().unwrap();
        touch_ctime(&kubectl);
        assert_eq!(fs::metadata(&kubectl).unwrap().modified().unwrap(), mtime, "only the ctime moved");
        let checked = check(&dir, later());
        assert_eq!((checked.hashed.clone(), corrupt_names(&checked.corrupt)), (vec!["kubectl"], vec!["kubectl"]));
    }

    /// A binary that changed a moment ago is hashed but not stamped: a write within the same tick
    /// of the file system's clock would leave its ctime as the stamp has it.
    #[test]
    fn a_binary_changed_a_moment_ago_is_not_stamped() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(default_release().version);
        entry(&dir, default_release().version, BINARIES, 3, 3);
        for _ in 0..2 {
            let checked = check(&dir, now_ns());
            assert_eq!((checked.corrupt.len(), checked.hashed.len()), (0, BINARIES.len()));
            assert!(stamped(&dir).is_empty(), "{:?}", stamped(&dir));
        }
        assert_eq!(check(&dir, later()).hashed.len(), BINARIES.len());
        assert_eq!(stamped(&dir), sorted(BINARIES));
        assert!(check(&dir, now_ns()).hashed.is_empty(), "a stamp, once written, is trusted");
    }

    #[test]
    fn a_torn_stamp_file_only_means_hashing_again() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(default_release().version);
        entry(&dir, default_release().version, BINARIES, 3, 3);
        check(&dir, later());
        let path = stamps_path(&dir);
        assert_eq!(path, tmp.path().join(format!("{}.verified.json", default_release().version)));
        let whole = fs::read(&path).unwrap();
        fs::write(&path, &whole[..whole.len() / 2]).unwrap();
        let checked = check(&dir, later());
        assert_eq!((checked.corrupt.len(), checked.hashed.len()), (0, BINARIES.len()));
        assert_eq!(stamped(&dir), sorted(BINARIES), "written whole again");
    }

    /// Harnesses checking one entry at once (threads here; processes share the same file) each
    /// rewrite the stamps while the others read them: every read finds a whole file, no check
    /// finds a sound binary corrupt, and no temporary file is left.
    #[test]
    fn concurrent_checks_leave_a_whole_stamp_file() {
        let tmp = tempfile::tempdir().unwrap();
        let release = default_release();
        let dir = tmp.path().join(release.version);
        entry(&dir, release.version, BINARIES, 1 << 16, 1 << 16);
        std::thread::scope(|scope| {
            for thread in 0..6 {
                let dir = &dir;
                scope.spawn(move || {
                    for round in 0..30 {
                        // A binary whose ctime moved is hashed and stamped again: a write of the file.
                        touch_ctime(&dir.join("bin").join(BINARIES[(thread + round) % BINARIES.len()]));
                        let checked = check(dir, later());
                        assert!(checked.corrupt.is_empty(), "thread {thread}, round {round}: {:?}", checked.corrupt);
                        let text = fs::read(stamps_path(dir)).unwrap();
                        let parsed = serde_json::from_slice::<StampFile>(&text);
                        assert!(parsed.is_ok(), "thread {thread}, round {round}: {parsed:?}");
                    }
                });
            }
        });
        check(&dir, later());
        assert_eq!(stamped(&dir), sorted(BINARIES));
        assert!(check(&dir, later()).hashed.is_empty());
        let names: Vec<_> = fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 2, "the entry and its stamps, no temporary file: {names:?}");
    }

    #[test]
    fn the_upstream_ccm_is_built_per_release_from_its_own_module_and_stamped() {
        for release in releases() {
            let build = plan(&release).into_iter().find(|b| b.outputs == [UPSTREAM_CCM]).unwrap();
            let module = pins::upstream_ccm(release.module).unwrap();
            assert!(std::ptr::eq(build.module, module), "{}", release.version);
            assert!(build.module.dir.ends_with(release.module.dir), "{}", build.module.dir);
            assert_eq!((build.command, build.packages.as_slice(), build.stamped), (GoCommand::Build, &["."][..], true));
            let cloud_provider = pins::required_version(module, "k8s.io/cloud-provider").unwrap();
            assert!(build.label.contains(cloud_provider), "{}", build.label);
        }
    }

    #[test]
    fn node_binaries_are_built_from_the_release_and_containerd_is_stamped_with_its_version() {
        let release = default_release();
        let plan = plan(&release);
        let kubelet = plan.iter().find(|b| b.outputs.contains(&"kubelet")).unwrap();
        assert!(std::ptr::eq(kubelet.module, release.module) && kubelet.stamped);
        assert!(kubelet.outputs.contains(&"kube-proxy"));
        let containerd = plan.iter().find(|b| b.outputs.contains(&"containerd")).unwrap();
        assert_eq!(containerd.outputs, ["containerd", "containerd-shim-runc-v2", "ctr"]);
        assert_eq!(
            containerd.version_vars,
            [("github.com/containerd/containerd/v2/version.Version", containerd_version())]
        );
        assert!(containerd_version().starts_with("v2."), "{}", containerd_version());
        for name in NODE_BINARIES {
            assert!(BINARIES.contains(name), "{name}");
        }
    }

    #[test]
    fn at_least_two_minors_are_pinned_for_the_matrix() {
        let minors: std::collections::BTreeSet<_> = releases().iter().map(|r| r.minor()).collect();
        assert!(minors.len() >= 2, "{minors:?}");
    }
}

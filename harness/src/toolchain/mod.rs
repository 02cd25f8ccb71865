//! The Kubernetes toolchain: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, etcd
//! and kwok, built with `go build` from the Go module proxy at the versions pinned in `tools/kube/`,
//! stamped with their real version, and cached under the user cache dir keyed by version.
//!
//! Layout: `<cache>/toolchains/<version>/{bin/<binary>, manifest.json}`; a build happens in
//! `<cache>/toolchains/<version>.partial` and is renamed into place once every binary is there, so
//! a cache entry is either whole or absent. The manifest records each binary's size and SHA-256:
//! a cheap size check on every use catches truncation, `harness toolchain verify` hashes.

pub mod pins;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::progress;
use pins::GoModule;

/// The binaries every toolchain holds.
pub const BINARIES: &[&str] =
    &["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok"];

/// The oldest Go that builds the pinned modules (their `go` directive).
const MIN_GO_MINOR: u32 = 26;

#[derive(Debug, thiserror::Error)]
pub enum ToolchainError {
    #[error(
        "Kubernetes version '{requested}' is not pinned by this harness (pinned: {pinned}); use one of those, or pin it with `tools/kube/pin.sh vX.Y.Z`"
    )]
    UnknownVersion { requested: String, pinned: String },
    #[error("Go toolchain not usable ({detail}): install Go 1.{MIN_GO_MINOR} or newer on PATH, or set GO=/path/to/go")]
    GoMissing { detail: String },
    #[error(
        "Kubernetes {version} toolchain is not installed in {dir}; run `harness toolchain install --kubernetes {version}`"
    )]
    NotInstalled { version: String, dir: PathBuf },
    #[error(
        "toolchain cache entry {dir} is corrupt ({reason}); rebuild it with `harness toolchain install --kubernetes {version} --force`"
    )]
    Corrupt { version: String, dir: PathBuf, reason: String },
    #[error("`go build` of {what} failed ({status}); see {log} for the compiler's output")]
    BuildFailed { what: String, status: String, log: PathBuf },
    #[error("{action} {path}: {source}")]
    Io { action: &'static str, path: PathBuf, source: std::io::Error },
}

type Result<T> = std::result::Result<T, ToolchainError>;

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ToolchainError {
    let path = path.to_path_buf();
    move |source| ToolchainError::Io { action, path, source }
}

/// The harness's cache root: `$HARNESS_CACHE_DIR`, else `<user cache dir>/cloud-provider-harness`.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("HARNESS_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    dirs::cache_dir().unwrap_or_else(std::env::temp_dir).join("cloud-provider-harness")
}

/// A pinned Kubernetes release.
#[derive(Debug, Clone, Copy)]
pub struct Release {
    /// e.g. `v1.37.1`
    pub version: &'static str,
    module: &'static GoModule,
}

impl Release {
    /// `1` and `37` of `v1.37.1`.
    pub fn minor(&self) -> &'static str {
        self.version.split('.').nth(1).unwrap_or_default()
    }
}

/// Every pinned release, newest first.
pub fn releases() -> Vec<Release> {
    pins::KUBERNETES
        .iter()
        .map(|module| Release {
            version: pins::required_version(module, "k8s.io/kubernetes").expect("pins require k8s.io/kubernetes"),
            module,
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
    let wanted = requested.strip_prefix('v').unwrap_or(requested);
    releases()
        .into_iter()
        .find(|release| {
            let pinned = &release.version[1..];
            pinned == wanted || pinned.rsplit_once('.').is_some_and(|(minor, _)| minor == wanted)
        })
        .ok_or_else(|| ToolchainError::UnknownVersion {
            requested: requested.to_string(),
            pinned: releases().iter().map(|r| r.version).collect::<Vec<_>>().join(", "),
        })
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
}

fn toolchain_dir(release: &Release) -> PathBuf {
    cache_root().join("toolchains").join(release.version)
}

/// The installed toolchain for `release`, checked against its manifest (sizes only: fast).
pub fn installed(release: &Release) -> Result<Toolchain> {
    let dir = toolchain_dir(release);
    let corrupt =
        |reason: String| ToolchainError::Corrupt { version: release.version.into(), dir: dir.clone(), reason };
    let manifest_path = dir.join("manifest.json");
    let text = match fs::read_to_string(&manifest_path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(if dir.exists() {
                corrupt("manifest.json is missing".into())
            } else {
                ToolchainError::NotInstalled { version: release.version.into(), dir }
            });
        }
        Err(e) => return Err(io_err("reading", &manifest_path)(e)),
    };
    let manifest: Manifest =
        serde_json::from_str(&text).map_err(|e| corrupt(format!("manifest.json does not parse: {e}")))?;
    if manifest.kubernetes_version != release.version {
        return Err(corrupt(format!("manifest is for {}", manifest.kubernetes_version)));
    }
    for name in BINARIES {
        let record = manifest.binaries.get(*name).ok_or_else(|| corrupt(format!("manifest lacks {name}")))?;
        let path = dir.join("bin").join(name);
        let size = fs::metadata(&path).map_err(|e| corrupt(format!("{name}: {e}")))?.len();
        if size != record.size {
            return Err(corrupt(format!("{name} is {size} bytes, the manifest says {}", record.size)));
        }
    }
    Ok(Toolchain { version: release.version.into(), dir })
}

/// Hashes every binary against the manifest (slow; `harness toolchain verify`).
pub fn verify(release: &Release) -> Result<Toolchain> {
    let toolchain = installed(release)?;
    let manifest: Manifest = serde_json::from_str(
        &fs::read_to_string(toolchain.dir.join("manifest.json")).map_err(io_err("reading", &toolchain.dir))?,
    )
    .expect("installed() parsed it");
    for (name, record) in &manifest.binaries {
        let actual = sha256_file(&toolchain.binary(name))?;
        if actual != record.sha256 {
            return Err(ToolchainError::Corrupt {
                version: release.version.into(),
                dir: toolchain.dir.clone(),
                reason: format!("{name} has SHA-256 {actual}, the manifest says {}", record.sha256),
            });
        }
    }
    Ok(toolchain)
}

/// Installs `release` unless it already is: a no-op on a warm cache. A corrupt entry is an error
/// unless `force`, which rebuilds.
pub fn install(release: &Release, force: bool) -> Result<Toolchain> {
    if !force {
        match installed(release) {
            Err(ToolchainError::NotInstalled { .. }) => {}
            other => return other,
        }
    }
    let root = cache_root();
    let toolchains = root.join("toolchains");
    fs::create_dir_all(&toolchains).map_err(io_err("creating", &toolchains))?;
    // Two installs of one version at once (parallel tests, two terminals) take turns.
    let lock_path = toolchains.join(format!("{}.lock", release.version));
    let lock = fs::File::create(&lock_path).map_err(io_err("creating", &lock_path))?;
    lock.lock().map_err(io_err("locking", &lock_path))?;
    if !force && let Ok(toolchain) = installed(release) {
        return Ok(toolchain);
    }

    let go = find_go()?;
    let partial = toolchains.join(format!("{}.partial", release.version));
    let _ = fs::remove_dir_all(&partial);
    let bin = partial.join("bin");
    fs::create_dir_all(&bin).map_err(io_err("creating", &bin))?;

    let build_root = root.join("build");
    let kubernetes_ldflags = kubernetes_ldflags(release, &go, &build_root)?;
    let builds: [(&GoModule, Vec<&str>, String, String); 3] = [
        (
            release.module,
            vec![
                "k8s.io/kubernetes/cmd/kube-apiserver",
                "k8s.io/kubernetes/cmd/kube-controller-manager",
                "k8s.io/kubernetes/cmd/kube-scheduler",
                "k8s.io/kubernetes/cmd/kubectl",
            ],
            kubernetes_ldflags,
            format!(
                "Kubernetes {} (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl)",
                release.version
            ),
        ),
        (&pins::ETCD, vec!["."], "-s -w".into(), etcd_label()),
        (&pins::KWOK, vec!["sigs.k8s.io/kwok/cmd/kwok"], "-s -w".into(), kwok_label()),
    ];
    for (module, packages, ldflags, label) in builds {
        let step = progress::step(format!("building {label}"));
        let module_dir = write_module(&build_root, module)?;
        go_build(&go, &module_dir, &packages, &ldflags, &bin, &label)?;
        step.done();
    }
    // etcd's wrapper module builds a binary named after its folder.
    debug_assert!(bin.join("etcd").exists());

    let mut binaries = std::collections::BTreeMap::new();
    for name in BINARIES {
        let path = bin.join(name);
        let size = fs::metadata(&path).map_err(io_err("reading", &path))?.len();
        binaries.insert((*name).to_string(), BinaryRecord { size, sha256: sha256_file(&path)? });
    }
    let manifest = Manifest { kubernetes_version: release.version.into(), go_version: go.version.clone(), binaries };
    let manifest_path = partial.join("manifest.json");
    fs::write(&manifest_path, serde_json::to_vec_pretty(&manifest).expect("manifest serialises"))
        .map_err(io_err("writing", &manifest_path))?;

    let dir = toolchain_dir(release);
    let _ = fs::remove_dir_all(&dir);
    fs::rename(&partial, &dir).map_err(io_err("renaming into place", &dir))?;
    installed(release)
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

impl Go {
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.path);
        // Never let go fetch another toolchain (no internet beyond the module proxy), and build
        // static binaries as upstream's release does.
        cmd.env("GOTOOLCHAIN", "local").env("CGO_ENABLED", "0");
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
    std::env::split_paths(&std::env::var_os("PATH")?).map(|dir| dir.join(name)).find(|candidate| {
        use std::os::unix::fs::PermissionsExt;
        fs::metadata(candidate).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

fn write_module(build_root: &Path, module: &GoModule) -> Result<PathBuf> {
    let dir = build_root.join(module.dir);
    fs::create_dir_all(&dir).map_err(io_err("creating", &dir))?;
    let files = [("go.mod", module.go_mod), ("go.sum", module.go_sum)].into_iter().chain(module.files.iter().copied());
    for (name, contents) in files {
        let path = dir.join(name);
        fs::write(&path, contents).map_err(io_err("writing", &path))?;
    }
    Ok(dir)
}

/// The `-X` flags upstream's `hack/lib/version.sh` sets, so `--version` and `/version` tell the
/// truth; the build date is the release's publication time on the module proxy (reproducible).
fn kubernetes_ldflags(release: &Release, go: &Go, build_root: &Path) -> Result<String> {
    let dir = write_module(build_root, release.module)?;
    let output = go
        .command()
        .args(["list", "-m", "-f", "{{.Time}}", "k8s.io/kubernetes"])
        .current_dir(&dir)
        .output()
        .map_err(io_err("running go list in", &dir))?;
    let build_date = String::from_utf8_lossy(&output.stdout).trim().replace(" +0000 UTC", "Z").replace(' ', "T");
    let build_date =
        if output.status.success() && !build_date.is_empty() { build_date } else { "1970-01-01T00:00:00Z".into() };
    let minor = release.minor();
    Ok([
        ("k8s.io/component-base/version.gitVersion", release.version),
        ("k8s.io/component-base/version.gitMajor", "1"),
        ("k8s.io/component-base/version.gitMinor", minor),
        ("k8s.io/component-base/version.gitTreeState", "clean"),
        ("k8s.io/component-base/version.buildDate", &build_date),
        ("k8s.io/client-go/pkg/version.gitVersion", release.version),
        ("k8s.io/client-go/pkg/version.gitMajor", "1"),
        ("k8s.io/client-go/pkg/version.gitMinor", minor),
        ("k8s.io/client-go/pkg/version.buildDate", &build_date),
    ]
    .iter()
    .fold("-s -w".to_string(), |flags, (var, value)| format!("{flags} -X {var}={value}")))
}

fn go_build(go: &Go, module_dir: &Path, packages: &[&str], ldflags: &str, out: &Path, label: &str) -> Result<()> {
    let log_path = module_dir.join("build.log");
    let log = fs::File::create(&log_path).map_err(io_err("creating", &log_path))?;
    let mut out_arg = out.as_os_str().to_owned();
    out_arg.push("/");
    let status = go
        .command()
        .current_dir(module_dir)
        .args(["build", "-trimpath", "-ldflags", ldflags, "-o"])
        .arg(out_arg)
        .args(packages)
        .stdout(log.try_clone().map_err(io_err("opening", &log_path))?)
        .stderr(log)
        .status()
        .map_err(io_err("running go build in", module_dir))?;
    if !status.success() {
        if let Ok(text) = fs::read_to_string(&log_path) {
            let tail: Vec<&str> = text.lines().rev().take(15).collect();
            for line in tail.into_iter().rev() {
                tracing::error!("go build: {line}");
            }
        }
        return Err(ToolchainError::BuildFailed { what: label.into(), status: status.to_string(), log: log_path });
    }
    Ok(())
}

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
    fn at_least_two_minors_are_pinned_for_the_matrix() {
        let minors: std::collections::BTreeSet<_> = releases().iter().map(|r| r.minor()).collect();
        assert!(minors.len() >= 2, "{minors:?}");
    }
}

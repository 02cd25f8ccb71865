//! A provider's own CCM, built unmodified from the Go module proxy at a release pinned in
//! `tools/<provider>/v1.<minor>/` (a wrapper module whose `tool` is the CCM's main package), stamped
//! with its version as the provider's Makefile does: `<cache>/providers/<provider>/<version>/bin/`.
//! Built in place of a `.partial` and renamed, so a cache entry is whole or rebuilt.

use std::fs;
use std::path::PathBuf;

use super::checkout::Checkout;
use super::pins::GoModule;
use super::{Build, GoCommand, Libraries, Release, Result, ToolchainError, cache_root, find_go, go_build, io_err};
use cli_support::progress;

/// A provider's CCM and where its releases are pinned.
#[derive(Debug)]
pub struct ProviderCcm {
    /// The provider's directory under `tools/` and the cache's `providers/`.
    pub provider: &'static str,
    /// The repository's name, as people know it (`cloud-provider-aws`).
    pub project: &'static str,
    /// The Go module released; its tags are the provider's versions.
    pub module: &'static str,
    pub package: &'static str,
    pub binary: &'static str,
    /// The pinned releases, newest first; `dir` ends in the minor they go with (`aws-v1.37`).
    pub pins: &'static [GoModule],
    /// How many Kubernetes minors a pinned release may lag behind the cluster's: 0 when every minor
    /// has a release of its own; 1 when the newest release goes with the next minor too, as the
    /// version skew policy allows a CCM one minor older than its control plane.
    pub skew: u32,
    /// `-X` flags the provider's Makefile stamps the version with (`{version}` is replaced).
    pub version_vars: &'static [&'static str],
}

impl ProviderCcm {
    /// The pin of the release that goes with `release`: the same minor's, else (within `skew`) the
    /// newest older one's.
    pub fn pin(&self, release: &Release) -> Result<&'static GoModule> {
        let wanted: u32 = release.minor().parse().unwrap_or_default();
        let pin_minor = |pin: &GoModule| pin.dir.rsplit("v1.").next().and_then(|m| m.parse::<u32>().ok());
        self.pins
            .iter()
            .filter_map(|pin| pin_minor(pin).map(|minor| (pin, minor)))
            .filter(|(_, minor)| *minor <= wanted && wanted - minor <= self.skew)
            .max_by_key(|(_, minor)| *minor)
            .map(|(pin, _)| pin)
            .ok_or_else(|| ToolchainError::ProviderNotInstalled {
                what: format!("{} for Kubernetes {}", self.project, release.version),
                hint: format!(
                    "no {} release is pinned for Kubernetes 1.{wanted}; pin one with `tools/{}/pin.sh v1.{wanted}.N`",
                    self.project, self.provider
                ),
            })
    }

    /// The CCM version (the module's tag) pinned for `release`.
    pub fn version(&self, release: &Release) -> Result<&'static str> {
        let pin = self.pin(release)?;
        Ok(super::pins::required_version(pin, self.module).expect("a provider's pin requires its module"))
    }

    fn dir(&self, version: &str) -> PathBuf {
        cache_root().join("providers").join(self.provider).join(version)
    }

    /// The cache entry of its CCM for `release`: `<version>`, or built against a checkout's
    /// libraries, `<version>+<the checkout's cache key>`.
    fn entry(&self, release: &Release, libraries: Libraries) -> Result<PathBuf> {
        let version = self.version(release)?;
        Ok(match against(release, libraries) {
            Some(_) => self.dir(&format!("{version}+{}", release.cache_key())),
            None => self.dir(version),
        })
    }

    /// The installed CCM for `release`, its libraries from `libraries` (a checkout's release only).
    pub fn installed(&self, release: &Release, libraries: Libraries) -> Result<PathBuf> {
        let version = self.version(release)?;
        let binary = self.entry(release, libraries)?.join("bin").join(self.binary);
        match fs::metadata(&binary) {
            Ok(meta) if meta.len() > 0 => Ok(binary),
            _ => Err(ToolchainError::ProviderNotInstalled {
                what: format!("{} {version} (for Kubernetes {})", self.project, release.version),
                hint: "run `harness toolchain install --all`".into(),
            }),
        }
    }

    /// Builds the CCM for `release` unless it is cached (or `force`); returns the binary. For a
    /// checkout's release and [`Libraries::Checkout`], in a Go workspace over the checkout.
    pub fn install(&self, release: &Release, force: bool, libraries: Libraries) -> Result<PathBuf> {
        let version = self.version(release)?;
        let against = against(release, libraries);
        let build = Build {
            module: self.pin(release)?,
            command: GoCommand::Build,
            packages: vec![self.package],
            outputs: vec![self.binary],
            stamped: false,
            version_vars: vec![],
            label: match against {
                Some(checkout) => format!(
                    "{} {version} ({}) against kubernetes/kubernetes {}",
                    self.project,
                    self.binary,
                    &checkout.commit[..12]
                ),
                None => format!("{} {version} ({}, for Kubernetes 1.{})", self.project, self.binary, release.minor()),
            },
        };
        let dir = self.entry(release, libraries)?;
        let into = CacheEntry { dir, force, ldflags: self.ldflags(version), against };
        build_cached(&build, &into, || self.installed(release, libraries))
    }

    /// The provider's Makefile `LDFLAGS`: the version in `--version` and in the metrics.
    pub fn ldflags(&self, version: &str) -> String {
        let mut flags = String::from("-s -w");
        for var in self.version_vars {
            flags.push_str(&format!(" -X {}", var.replace("{version}", version)));
        }
        flags
    }
}

/// The checkout a CCM for `release` is built against: its own, unless `libraries` says pinned.
fn against(release: &Release, libraries: Libraries) -> Option<&'static Checkout> {
    release.source.filter(|_| libraries == Libraries::Checkout)
}

/// Where [`build_cached`] puts a build's binaries: `<dir>/bin/`.
pub(super) struct CacheEntry {
    pub dir: PathBuf,
    /// Build even when the entry is complete.
    pub force: bool,
    pub ldflags: String,
    /// Built in a Go workspace over this checkout's libraries ([`Checkout::write_workspace`]).
    pub against: Option<&'static Checkout>,
}

/// Builds `build` into `into` unless `installed` finds it there already (or `into.force`), one
/// process at a time (a lock file beside the entry), in place of a `.partial` that is renamed
/// into place when complete; returns what `installed` then finds.
pub(super) fn build_cached<T>(build: &Build, into: &CacheEntry, installed: impl Fn() -> Result<T>) -> Result<T> {
    if !into.force
        && let Ok(found) = installed()
    {
        return Ok(found);
    }
    let parent = into.dir.parent().expect("a cache entry has a parent").to_path_buf();
    let name = into.dir.file_name().expect("a cache entry has a name").to_string_lossy().into_owned();
    fs::create_dir_all(&parent).map_err(io_err("creating", &parent))?;
    let lock_path = parent.join(format!("{name}.lock"));
    let lock = fs::File::create(&lock_path).map_err(io_err("creating", &lock_path))?;
    lock.lock().map_err(io_err("locking", &lock_path))?;
    if !into.force
        && let Ok(found) = installed()
    {
        return Ok(found);
    }
    let go = find_go()?;
    let partial = parent.join(format!("{name}.partial"));
    let _ = fs::remove_dir_all(&partial);
    let bin = partial.join("bin");
    fs::create_dir_all(&bin).map_err(io_err("creating", &bin))?;
    let step = progress::step(format!("building {}", build.label));
    let module_dir = super::write_module(&cache_root().join("build"), build.module)?;
    match into.against {
        Some(checkout) => {
            // The workspace file and the build's log: `<entry>.workspace/`, kept when the build fails.
            let logs = parent.join(format!("{name}.workspace"));
            let workspace = logs.join(format!("{}.work", build.outputs[0]));
            checkout.write_workspace(&module_dir, &workspace)?;
            go_build(&go, &module_dir, &logs, build, &into.ldflags, &bin, Some(&workspace))?;
        }
        None => go_build(&go, &module_dir, &module_dir, build, &into.ldflags, &bin, None)?,
    }
    step.done();
    let _ = fs::remove_dir_all(&into.dir);
    fs::rename(&partial, &into.dir).map_err(io_err("renaming into place", &into.dir))?;
    installed()
}

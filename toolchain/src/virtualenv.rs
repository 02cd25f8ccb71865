//! A Python virtualenv of pinned packages from PyPI, cached under `<cache>/<name>/<version>/venv/`:
//! moto for the `aws` provider's cloud, the OpenStack services for the `openstack` provider's.
//! A virtualenv cannot move, so it is built in place and marked complete by a file written last
//! ([`COMPLETE`]); an entry without it is removed and built again.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Result, ToolchainError, cache_root, io_err, search_path};
use cli_support::progress;

/// Written last by [`Virtualenv::install`]: the virtualenv is complete.
const COMPLETE: &str = "installed.txt";

/// A package of this repository's, installed into the virtualenv from its files after the pinned
/// requirements (`pip install --no-deps <dir>`).
#[derive(Debug)]
pub struct LocalPackage {
    pub dir: &'static str,
    /// Paths inside `dir` and their contents.
    pub files: &'static [(&'static str, &'static str)],
}

/// A virtualenv the harness installs.
#[derive(Debug)]
pub struct Virtualenv {
    /// Its directory under the cache root, and what pip's progress line names.
    pub name: &'static str,
    /// What it is for, in errors: "the aws provider's cloud".
    pub purpose: &'static str,
    /// `pip freeze` output: every package pinned with `==`.
    pub requirements: &'static str,
    pub local_packages: &'static [LocalPackage],
}

impl Virtualenv {
    /// Its version: the cache key. A short hash of the requirements and local packages, so that a
    /// new pin or a changed local package installs afresh.
    pub fn version(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        hash.update(self.requirements);
        for package in self.local_packages {
            for (path, text) in package.files {
                hash.update(format!("\0{}/{path}\0", package.dir));
                hash.update(text);
            }
        }
        hex::encode(&hash.finalize()[..6])
    }

    /// `<cache>/<name>/<version>`: the virtualenv is its `venv/`.
    pub fn dir(&self) -> PathBuf {
        self.dir_for(&self.version())
    }

    fn dir_for(&self, version: &str) -> PathBuf {
        cache_root().join(self.name).join(version)
    }

    /// The installed virtualenv's `bin/`.
    pub fn installed(&self) -> Result<PathBuf> {
        self.installed_as(&self.version())
    }

    /// [`Virtualenv::installed`] from the cache entry `version`.
    pub fn installed_as(&self, version: &str) -> Result<PathBuf> {
        self.installed_at(&self.dir_for(version))
    }

    fn installed_at(&self, dir: &Path) -> Result<PathBuf> {
        let bin = dir.join("venv").join("bin");
        if dir.join(COMPLETE).is_file() && bin.join("python3").is_file() {
            return Ok(bin);
        }
        Err(ToolchainError::ProviderNotInstalled {
            what: format!("{} (the virtualenv of {})", self.name, self.purpose),
            hint: "run `harness toolchain install --all`".into(),
        })
    }

    /// Installs the virtualenv unless it is there (or `force`); returns its `bin/`.
    pub fn install(&self, force: bool) -> Result<PathBuf> {
        self.install_as(&self.version(), force)
    }

    /// [`Virtualenv::install`] into the cache entry `version` (moto's is named after moto's own).
    pub fn install_as(&self, version: &str, force: bool) -> Result<PathBuf> {
        let dir = self.dir_for(version);
        if !force && let Ok(bin) = self.installed_at(&dir) {
            return Ok(bin);
        }
        let parent = dir.parent().expect("a virtualenv's dir has a parent").to_path_buf();
        fs::create_dir_all(&parent).map_err(io_err("creating", &parent))?;
        let lock_path = parent.join(format!("{version}.lock"));
        let lock = fs::File::create(&lock_path).map_err(io_err("creating", &lock_path))?;
        lock.lock().map_err(io_err("locking", &lock_path))?;
        if !force && let Ok(bin) = self.installed_at(&dir) {
            return Ok(bin);
        }
        self.build(&dir, &find_python()?)?;
        self.installed_at(&dir)
    }

    /// Builds the virtualenv in `dir` (its `venv/`, emptied first) with `python`, and marks it
    /// complete: where a caller wants it, not in the cache (the harness's image carries one built
    /// with Debian's `/usr/bin/python3`, the interpreter the image has).
    pub fn build(&self, dir: &Path, python: &Path) -> Result<()> {
        let step = progress::step(format!("installing {} into a virtualenv (pip)", self.name));
        let _ = fs::remove_dir_all(dir);
        fs::create_dir_all(dir).map_err(io_err("creating", dir))?;
        let requirements = dir.join("requirements.txt");
        fs::write(&requirements, self.requirements).map_err(io_err("writing", &requirements))?;
        let venv = dir.join("venv");
        let log = dir.join("install.log");
        run_logged(Command::new(python).args(["-m", "venv"]).arg(&venv), &log, "python3 -m venv", || {
            "python3 -m venv failed: install Python's venv module (Debian: apt-get install python3-venv)".into()
        })?;
        let pip = venv.join("bin").join("pip");
        let mut install = Command::new(&pip);
        install.args(["install", "--no-input", "--disable-pip-version-check", "-r"]).arg(&requirements);
        let what = format!("pip install {}", self.name);
        run_logged(&mut install, &log, &what, || {
            format!(
                "pip could not install {}'s pinned packages (is PyPI, or the index in PIP_INDEX_URL, reachable?)",
                self.name
            )
        })?;
        for package in self.local_packages {
            let source = write_package(dir, package)?;
            let mut install = Command::new(&pip);
            install.args(["install", "--no-input", "--disable-pip-version-check", "--no-deps"]).arg(&source);
            run_logged(&mut install, &log, &format!("pip install {}", package.dir), || {
                format!("pip could not build {} (it needs setuptools from PyPI)", package.dir)
            })?;
        }
        let complete = dir.join(COMPLETE);
        // `<name> <version>`: the cache entry's name, which is the version it was installed as.
        let version = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        fs::write(&complete, format!("{} {version}\n", self.name)).map_err(io_err("writing", &complete))?;
        step.done();
        Ok(())
    }
}

fn write_package(dir: &Path, package: &LocalPackage) -> Result<PathBuf> {
    let root = dir.join(package.dir);
    for (path, text) in package.files {
        let file = root.join(path);
        let parent = file.parent().expect("a package file lies in a dir");
        fs::create_dir_all(parent).map_err(io_err("creating", parent))?;
        fs::write(&file, text).map_err(io_err("writing", &file))?;
    }
    Ok(root)
}

fn find_python() -> Result<PathBuf> {
    match std::env::var_os("PYTHON") {
        Some(python) => Ok(PathBuf::from(python)),
        None => search_path("python3")
            .ok_or_else(|| ToolchainError::PythonMissing { detail: "`python3` is not on PATH".into() }),
    }
}

/// Runs `command` with its output appended to `log`; a failure is an error with `hint` and the log.
fn run_logged(command: &mut Command, log: &Path, what: &str, hint: impl FnOnce() -> String) -> Result<()> {
    let out = fs::OpenOptions::new().create(true).append(true).open(log).map_err(io_err("opening", log))?;
    let err = out.try_clone().map_err(io_err("opening", log))?;
    let status = command
        .stdout(out)
        .stderr(err)
        .status()
        .map_err(|e| ToolchainError::PythonMissing { detail: format!("running {what}: {e}") })?;
    if status.success() {
        return Ok(());
    }
    Err(ToolchainError::BuildFailed {
        what: format!("{what} ({})", hint()),
        status: status.to_string(),
        excerpt: "".into(),
        log: log.into(),
    })
}

/// Every requirement of `requirements` that is not pinned with `==` (comments and blanks aside).
pub fn unpinned(requirements: &str) -> Vec<&str> {
    requirements.lines().map(str::trim).filter(|l| !l.starts_with('#') && !l.is_empty() && !l.contains("==")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENV: Virtualenv = Virtualenv {
        name: "example",
        purpose: "a test",
        requirements: "a==1\n",
        local_packages: &[LocalPackage { dir: "pkg", files: &[("setup.py", "x")] }],
    };

    #[test]
    fn the_version_changes_with_a_pin_or_a_local_file() {
        let other_pin = Virtualenv { requirements: "a==2\n", ..ENV };
        const FILES: &[LocalPackage] = &[LocalPackage { dir: "pkg", files: &[("setup.py", "y")] }];
        let other_file = Virtualenv { local_packages: FILES, ..ENV };
        assert_eq!(ENV.version().len(), 12);
        assert_ne!(ENV.version(), other_pin.version());
        assert_ne!(ENV.version(), other_file.version());
        assert_eq!(ENV.version(), Virtualenv { ..ENV }.version());
    }

    #[test]
    fn unpinned_requirements_are_named() {
        assert_eq!(unpinned("# c\na==1\n\nb>=2\nc\n"), vec!["b>=2", "c"]);
    }
}

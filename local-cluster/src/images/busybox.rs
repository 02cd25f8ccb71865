//! Upstream's busybox, built here. Upstream's busybox image is docker's `busybox:<version>`
//! (`test/images/busybox/BASEIMAGE`): upstream's sources, `make defconfig`, static. Debian's
//! `busybox-static` is not the same program: its ash drops environment variables whose names are not
//! shell identifiers (a ConfigMap's `data-1`, which the ConfigMap/Secret env conformance tests print
//! with `sh -c env`), where upstream's ash keeps them. So the image's busybox is built from the
//! upstream tarball of Debian's source package of that version (`apt-get source`, no Debian patch
//! applied), once per version, and cached in `<cache>/build/busybox/<version>/busybox`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{ImageError, Result, io_err, is_static_elf};

const IMAGE: &str = "busybox";

/// Debian suites whose sources are searched for the version: together they span several years.
const SUITES: &[&str] = &["stable", "testing", "unstable", "oldstable"];

/// Debian's archive keys (package debian-archive-keyring), which sign every suite's indexes.
const DEBIAN_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// The static busybox of the version upstream's busybox image is based on, built unless cached.
pub fn binary(kubernetes_source: &Path, work: &Path) -> Result<PathBuf> {
    let version = base_version(kubernetes_source)?;
    let root = cli_support::roots::cache_root().join("build").join("busybox");
    let dir = root.join(&version);
    let cached = dir.join("busybox");
    let is_built = || fs::read(&cached).is_ok_and(|b| is_static_elf(&b));
    if is_built() {
        return Ok(cached);
    }
    // The images of two releases may be built at once: one builds busybox, the other then finds it
    // (apt's lists also take one `apt-get update` at a time).
    fs::create_dir_all(&root).map_err(io_err("creating", &root))?;
    let _turn = super::take_turn(&root.join("lock"))?;
    if is_built() {
        return Ok(cached);
    }
    tracing::info!("building busybox {version} (upstream's image's busybox) from Debian's source package");
    let tarball = upstream_tarball(&version, work)?;
    let built = build(&tarball, &version, work)?;
    fs::create_dir_all(&dir).map_err(io_err("creating", &dir))?;
    // Renamed into place: a build that stops half way leaves no binary behind.
    let partial = dir.join("busybox.partial");
    fs::copy(&built, &partial).map_err(io_err("copying", &built))?;
    fs::rename(&partial, &cached).map_err(io_err("renaming into place", &cached))?;
    Ok(cached)
}

/// The busybox version of upstream's image: `linux/amd64=busybox:1.37.0` in `BASEIMAGE`.
fn base_version(kubernetes_source: &Path) -> Result<String> {
    let path = kubernetes_source.join("test/images/busybox/BASEIMAGE");
    let text = fs::read_to_string(&path).map_err(io_err("reading", &path))?;
    parse_base_version(&text).ok_or_else(|| ImageError::Build {
        image: IMAGE.into(),
        detail: format!("{} names no linux/amd64=busybox:<version> base image", path.display()),
    })
}

fn parse_base_version(text: &str) -> Option<String> {
    let line = text.lines().find_map(|l| l.trim().strip_prefix("linux/amd64="))?;
    let (_, tag) = line.rsplit_once(':')?;
    // `1.37.0`, or a variant such as `1.37.0-glibc`: the version is the part before any `-`.
    let version = tag.split('-').next()?;
    (!version.is_empty() && version.chars().all(|c| c.is_ascii_digit() || c == '.')).then(|| version.to_owned())
}

/// The upstream part of a Debian version: `1:1.37.0-6+b9` is `1.37.0`.
fn upstream_version(debian: &str) -> &str {
    let without_epoch = debian.split_once(':').map_or(debian, |(_, rest)| rest);
    without_epoch.rsplit_once('-').map_or(without_epoch, |(upstream, _)| upstream)
}

/// apt with a sources list of its own (Debian's source indexes), so the machine's apt stays as it
/// was; the machine's apt.conf (proxies) still applies.
fn apt(program: &str, apt_dir: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .arg(format!("-oDir::Etc::SourceList={}", apt_dir.join("sources.list").display()))
        .arg("-oDir::Etc::SourceParts=/nonexistent")
        .arg(format!("-oDir::State::Lists={}", apt_dir.join("lists").display()))
        .arg(format!("-oDir::Cache={}", apt_dir.join("cache").display()))
        .arg("-oAPT::Sandbox::User=root");
    command
}

fn run(command: &mut Command, what: &str, hint: &str) -> Result<Vec<u8>> {
    let output = command.output().map_err(|e| ImageError::Missing {
        image: IMAGE.into(),
        what: format!("{what} ({e})"),
        hint: hint.into(),
    })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<&str> = stderr.lines().collect();
        let tail = lines[lines.len().saturating_sub(15)..].join("\n");
        return Err(ImageError::Build { image: IMAGE.into(), detail: format!("{what}: {tail}; {hint}") });
    }
    Ok(output.stdout)
}

/// The Debian mirrors the machine's apt uses (`http://deb.debian.org/debian/` if none is found).
fn debian_mirrors() -> Vec<String> {
    let output = Command::new("apt-get").args(["indextargets", "--format", "$(REPO_URI)"]).output();
    let text = output.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
    let mut mirrors: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|u| u.trim_end_matches('/').ends_with("/debian"))
        .map(str::to_owned)
        .collect();
    mirrors.sort();
    mirrors.dedup();
    if mirrors.is_empty() {
        mirrors.push("http://deb.debian.org/debian/".into());
    }
    mirrors
}

/// `busybox_<version>.orig.tar.*` of Debian's source package of `version`, downloaded into `work`.
fn upstream_tarball(version: &str, work: &Path) -> Result<PathBuf> {
    let apt_dir = cli_support::roots::cache_root().join("debs").join("apt-sources");
    for dir in [apt_dir.join("lists/partial"), apt_dir.join("cache/archives/partial")] {
        fs::create_dir_all(&dir).map_err(io_err("creating", &dir))?;
    }
    let keyring = Path::new(DEBIAN_KEYRING);
    let signed_by = if keyring.is_file() { format!("[signed-by={DEBIAN_KEYRING}] ") } else { String::new() };
    let list: String = debian_mirrors()
        .iter()
        .flat_map(|mirror| SUITES.iter().map(move |suite| (mirror, suite)))
        .map(|(mirror, suite)| format!("deb-src {signed_by}{mirror} {suite} main\n"))
        .collect();
    let list_path = apt_dir.join("sources.list");
    fs::write(&list_path, list).map_err(io_err("writing", &list_path))?;
    let hint = "real nodes' busybox image is built from Debian's busybox source package: check that apt reaches the Debian mirror";
    let source_version = match debian_version(&apt_dir, version)? {
        Some(found) => found,
        None => {
            run(apt("apt-get", &apt_dir).arg("update"), "apt-get update of Debian's source indexes", hint)?;
            debian_version(&apt_dir, version)?.ok_or_else(|| ImageError::Build {
                image: IMAGE.into(),
                detail: format!(
                    "no Debian source package of busybox {version} in suites {} (upstream's busybox image is busybox {version})",
                    SUITES.join(", ")
                ),
            })?
        }
    };
    let download = work.join("busybox-source");
    let _ = fs::remove_dir_all(&download);
    fs::create_dir_all(&download).map_err(io_err("creating", &download))?;
    let what = format!("apt-get source --download-only busybox={source_version}");
    run(
        apt("apt-get", &apt_dir)
            .args(["source", "--download-only", &format!("busybox={source_version}")])
            .current_dir(&download),
        &what,
        hint,
    )?;
    let prefix = format!("busybox_{version}.orig.tar.");
    fs::read_dir(&download)
        .map_err(io_err("reading", &download))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&prefix)))
        .ok_or_else(|| ImageError::Build {
            image: IMAGE.into(),
            detail: format!("{what} left no {prefix}* in {}", download.display()),
        })
}

/// The Debian version of a busybox source package of upstream `version`, if the indexes have one.
fn debian_version(apt_dir: &Path, version: &str) -> Result<Option<String>> {
    let output = apt("apt-cache", apt_dir).args(["showsrc", "busybox"]).output().map_err(|e| ImageError::Missing {
        image: IMAGE.into(),
        what: format!("apt-cache ({e})"),
        hint: "build on Debian or Ubuntu with apt".into(),
    })?;
    let text = String::from_utf8_lossy(&output.stdout);
    Ok(text
        .lines()
        .filter_map(|l| l.strip_prefix("Version: "))
        .map(str::trim)
        .find(|v| upstream_version(v) == version)
        .map(str::to_owned))
}

/// `make defconfig` with `CONFIG_STATIC=y`, as docker's image: the built binary.
fn build(tarball: &Path, version: &str, work: &Path) -> Result<PathBuf> {
    let hint = "install make, gcc, libc6-dev and bzip2 (apt-get install make gcc libc6-dev bzip2)";
    let root = work.join("busybox-build");
    let _ = fs::remove_dir_all(&root);
    fs::create_dir_all(&root).map_err(io_err("creating", &root))?;
    run(Command::new("tar").arg("-xf").arg(tarball).arg("-C").arg(&root), "unpacking busybox's sources", hint)?;
    let tree = root.join(format!("busybox-{version}"));
    run(Command::new("make").arg("defconfig").current_dir(&tree), "busybox's make defconfig", hint)?;
    let config_path = tree.join(".config");
    let config = fs::read_to_string(&config_path).map_err(io_err("reading", &config_path))?;
    fs::write(&config_path, config.replace("# CONFIG_STATIC is not set", "CONFIG_STATIC=y"))
        .map_err(io_err("writing", &config_path))?;
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    run(Command::new("make").arg(format!("-j{jobs}")).arg("busybox").current_dir(&tree), "building busybox", hint)?;
    let binary = tree.join("busybox");
    let bytes = fs::read(&binary).map_err(io_err("reading", &binary))?;
    if !is_static_elf(&bytes) {
        return Err(ImageError::Build { image: IMAGE.into(), detail: "the built busybox is not static".into() });
    }
    Ok(binary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_version_is_read_from_baseimage() {
        let text = "linux/amd64=busybox:1.37.0\nlinux/arm64=arm64v8/busybox:1.37.0\nwindows/amd64/1809=mcr.microsoft.com/windows/nanoserver:1809\n";
        assert_eq!(parse_base_version(text).as_deref(), Some("1.37.0"));
        assert_eq!(parse_base_version("linux/amd64=busybox:1.36.1-glibc\n").as_deref(), Some("1.36.1"));
        assert_eq!(parse_base_version("linux/arm64=arm64v8/busybox:1.37.0\n"), None);
        assert_eq!(parse_base_version("linux/amd64=busybox:latest\n"), None);
    }

    #[test]
    fn debian_versions_lose_their_epoch_and_revision() {
        assert_eq!(upstream_version("1:1.37.0-6+b9"), "1.37.0");
        assert_eq!(upstream_version("1:1.35.0-4+deb12u1"), "1.35.0");
        assert_eq!(upstream_version("1.36.1"), "1.36.1");
    }
}

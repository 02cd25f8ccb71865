//! Debian packages as image layers: `apt-get download` of the packages and of what they depend on
//! (cached in `<cache>/debs/`), unpacked with `dpkg-deb -x` (no maintainer scripts run, nothing is
//! installed on the machine), documentation dropped.

use std::collections::{BTreeSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::oci::Layer;
use super::{ImageError, Result, io_err};

/// Packages an image never needs although packages depend on them: they serve maintainer scripts
/// (debconf, dpkg, install-info, tar), init scripts (iproute2, libcap2-bin) or documentation.
const SKIPPED: &[&str] =
    &["debconf", "cdebconf", "dpkg", "install-info", "tar", "iproute2", "libcap2-bin", "perl-base", "gcc-12-base"];

/// What an image's rootfs does not need of a package: documentation, translations.
const PRUNED: &[&str] = &["usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/lintian"];

/// The dependencies `apt-cache depends` lists for each package (`Depends` and `PreDepends`): of an
/// alternative group (`|Depends: a` then `Depends: b`) the first real package, and no group any of
/// whose alternatives is [`SKIPPED`].
pub fn parse_depends(output: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut group: Vec<String> = Vec::new();
    for line in output.lines() {
        let Some(rest) = line.strip_prefix("  ").or_else(|| line.strip_prefix(" |")) else { continue };
        let Some(name) = rest.strip_prefix("Depends: ").or_else(|| rest.strip_prefix("PreDepends: ")) else {
            continue;
        };
        group.push(name.trim().to_string());
        // A `|` marks an alternative that continues on the next line.
        if line.starts_with(" |") {
            continue;
        }
        let skipped = group.iter().any(|p| SKIPPED.contains(&p.as_str()));
        if !skipped && let Some(real) = group.iter().find(|p| !p.starts_with('<')) {
            found.push(real.clone());
        }
        group.clear();
    }
    found
}

fn apt_missing(image: &str) -> impl Fn(std::io::Error) -> ImageError + '_ {
    move |e| ImageError::Missing {
        image: image.into(),
        what: format!("apt-cache and apt-get ({e})"),
        hint: "build on Debian or Ubuntu with apt; `apt-get update` if the package lists are empty".into(),
    }
}

/// Runs an apt command for `image`'s build; its output, or an error naming `what` failed, with
/// apt's own message and `hint`.
fn apt(image: &str, command: &mut Command, what: &str, hint: &str) -> Result<Vec<u8>> {
    let output = command.output().map_err(apt_missing(image))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(ImageError::Build { image: image.into(), detail: format!("{what}: {}{hint}", stderr.trim()) });
    }
    Ok(output.stdout)
}

/// `packages` and everything they depend on, minus [`SKIPPED`].
pub fn closure(image: &str, packages: &[&str]) -> Result<BTreeSet<String>> {
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut queue: VecDeque<String> = packages.iter().map(|p| p.to_string()).collect();
    while !queue.is_empty() {
        let batch: Vec<String> = queue.drain(..).filter(|p| !seen.contains(p)).collect();
        if batch.is_empty() {
            break;
        }
        let mut command = Command::new("apt-cache");
        command
            .args(["depends", "--no-recommends", "--no-suggests", "--no-conflicts", "--no-breaks"])
            .args(["--no-replaces", "--no-enhances"])
            .args(&batch);
        let what = format!("apt-cache depends {}", batch.join(" "));
        let stdout = apt(image, &mut command, &what, "; check the names, or run `apt-get update`")?;
        seen.extend(batch);
        for dependency in parse_depends(&String::from_utf8_lossy(&stdout)) {
            if !seen.contains(&dependency) {
                queue.push_back(dependency);
            }
        }
    }
    Ok(seen)
}

/// The cached .deb of `package` in `debs`, if any (`<name>_<version>_<arch>.deb`).
fn cached(debs: &Path, package: &str) -> Option<PathBuf> {
    let prefix = format!("{package}_");
    fs::read_dir(debs).ok()?.flatten().map(|e| e.path()).find(|p| {
        p.extension().is_some_and(|x| x == "deb")
            && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&prefix))
    })
}

/// The .debs of `packages` (downloaded into `debs` unless there).
pub fn download(image: &str, debs: &Path, packages: &BTreeSet<String>) -> Result<Vec<PathBuf>> {
    fs::create_dir_all(debs).map_err(io_err("creating", debs))?;
    let missing: Vec<&String> = packages.iter().filter(|p| cached(debs, p).is_none()).collect();
    if !missing.is_empty() {
        tracing::info!("downloading {} Debian packages for the {image} image", missing.len());
        let mut command = Command::new("apt-get");
        command.arg("download").args(&missing).current_dir(debs);
        let names: Vec<&str> = missing.iter().map(|s| s.as_str()).collect();
        let what = format!("apt-get download of Debian packages {}", names.join(", "));
        apt(image, &mut command, &what, "")?;
    }
    packages
        .iter()
        .map(|p| {
            cached(debs, p).ok_or_else(|| ImageError::Build {
                image: image.into(),
                detail: format!("apt-get download left no .deb of {p} in {}", debs.display()),
            })
        })
        .collect()
}

/// What an image adds over its unpacked packages: files (path, contents, mode) and symlinks (path,
/// target), such as the links `update-alternatives` would have made at install time.
#[derive(Default)]
pub struct Extra<'a> {
    pub files: &'a [(&'a str, &'a [u8], u32)],
    pub links: &'a [(&'a str, &'a str)],
    /// `/bin`, `/sbin`, `/lib` and `/lib64` as links into `/usr`, as on Debian since bookworm
    /// (usrmerge): a package's `/sbin/ip` is then also `/usr/sbin/ip`, where the harness and
    /// its machine look for it.
    pub merged_usr: bool,
}

/// The directories a merged `/usr` makes links of.
const MERGED: &[&str] = &["bin", "sbin", "lib", "lib64"];

/// Moves `root/<dir>`'s entries into `root/usr/<dir>` and makes `root/<dir>` a link to `usr/<dir>`,
/// for each of [`MERGED`]; of an entry in both, `/usr`'s is kept.
fn merge_usr(root: &Path) -> Result<()> {
    for dir in MERGED {
        let (top, usr) = (root.join(dir), root.join("usr").join(dir));
        if fs::symlink_metadata(&top).is_ok_and(|m| m.is_dir()) {
            merge_into(&top, &usr)?;
        }
        let _ = fs::remove_file(&top);
        if !top.exists() {
            fs::create_dir_all(&usr).map_err(io_err("creating", &usr))?;
            std::os::unix::fs::symlink(format!("usr/{dir}"), &top).map_err(io_err("linking", &top))?;
        }
    }
    Ok(())
}

/// Moves every entry of the directory `from` into `to` (merging directories in both), then
/// removes `from`.
fn merge_into(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to).map_err(io_err("creating", to))?;
    for entry in fs::read_dir(from).map_err(io_err("reading", from))?.flatten() {
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        let is_dir = |path: &Path| fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
        if is_dir(&source) && is_dir(&target) {
            merge_into(&source, &target)?;
        } else if fs::symlink_metadata(&target).is_err() {
            fs::rename(&source, &target).map_err(io_err("moving", &source))?;
        }
    }
    fs::remove_dir_all(from).map_err(io_err("removing", from))
}

/// Unpacks `debs` into `root` (`dpkg-deb -x`: no maintainer scripts).
fn unpack(image: &str, debs: &[PathBuf], root: &Path) -> Result<()> {
    fs::create_dir_all(root).map_err(io_err("creating", root))?;
    for deb in debs {
        let output =
            Command::new("dpkg-deb").arg("-x").arg(deb).arg(root).output().map_err(|e| ImageError::Missing {
                image: image.into(),
                what: format!("dpkg-deb ({e})"),
                hint: "install dpkg (Debian's package tool)".into(),
            })?;
        if !output.status.success() {
            return Err(ImageError::Build {
                image: image.into(),
                detail: format!("dpkg-deb -x {}: {}", deb.display(), String::from_utf8_lossy(&output.stderr).trim()),
            });
        }
    }
    Ok(())
}

/// A layer of the unpacked `debs`, with `extra` written over them.
pub fn layer(image: &str, debs: &[PathBuf], work: &Path, extra: &Extra) -> Result<Vec<u8>> {
    let root = work.join(format!("{image}-rootfs"));
    let _ = fs::remove_dir_all(&root);
    unpack(image, debs, &root)?;
    for pruned in PRUNED {
        let _ = fs::remove_dir_all(root.join(pruned));
    }
    if extra.merged_usr {
        merge_usr(&root)?;
    }
    for (path, target) in extra.links {
        let link = root.join(path);
        if let Some(parent) = link.parent() {
            fs::create_dir_all(parent).map_err(io_err("creating", parent))?;
        }
        let _ = fs::remove_file(&link);
        std::os::unix::fs::symlink(target, &link).map_err(io_err("linking", &link))?;
    }
    for (path, contents, mode) in extra.files {
        let target = root.join(path);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(io_err("creating", parent))?;
        }
        let _ = fs::remove_file(&target);
        fs::write(&target, contents).map_err(io_err("writing", &target))?;
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&target, fs::Permissions::from_mode(*mode)).map_err(io_err("writing", &target))?;
    }
    let mut layer = Layer::new();
    layer.tree(&root)?;
    let _ = fs::remove_dir_all(&root);
    layer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    // What `apt-cache depends --no-recommends ... nginx-common bind9-dnsutils libc6` prints on bookworm.
    const DEPENDS: &str = "nginx-common
 |Depends: debconf
  Depends: <debconf-2.0>
    cdebconf
    debconf
bind9-dnsutils
 |Depends: bind9-host
  Depends: <host>
    bind9-host
  Depends: bind9-libs
  Depends: libc6
libc6
  Depends: libgcc-s1
  Breaks: aide
  PreDepends: libzstd1
";

    #[test]
    fn dependencies_take_the_first_real_alternative_and_skip_maintainer_script_tools() {
        assert_eq!(parse_depends(DEPENDS), ["bind9-host", "bind9-libs", "libc6", "libgcc-s1", "libzstd1"]);
    }

    #[test]
    fn a_merged_usr_keeps_every_file_and_reaches_it_by_both_paths() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (path, contents) in [
            ("bin/ip", "ip"),
            ("lib/x86_64-linux-gnu/libc.so.6", "libc"),
            ("usr/lib/x86_64-linux-gnu/libz.so.1", "libz"),
            ("usr/bin/sort", "sort"),
            ("lib64/ld-linux-x86-64.so.2", "ld"),
        ] {
            fs::create_dir_all(root.join(path).parent().unwrap()).unwrap();
            fs::write(root.join(path), contents).unwrap();
        }
        fs::create_dir_all(root.join("sbin")).unwrap();
        std::os::unix::fs::symlink("/bin/ip", root.join("sbin/ip")).unwrap();
        merge_usr(root).unwrap();
        for dir in MERGED {
            assert_eq!(fs::read_link(root.join(dir)).unwrap(), Path::new("usr").join(dir));
        }
        for (path, contents) in [
            ("usr/bin/ip", "ip"),
            ("bin/ip", "ip"),
            ("usr/lib/x86_64-linux-gnu/libc.so.6", "libc"),
            ("lib/x86_64-linux-gnu/libz.so.1", "libz"),
            ("usr/bin/sort", "sort"),
            ("lib64/ld-linux-x86-64.so.2", "ld"),
        ] {
            assert_eq!(fs::read_to_string(root.join(path)).unwrap(), contents, "{path}");
        }
        assert_eq!(fs::read_link(root.join("usr/sbin/ip")).unwrap(), Path::new("/bin/ip"));
    }

    #[test]
    fn a_layer_of_debs_drops_documentation_and_keeps_extra_files() {
        let dir = tempfile::tempdir().unwrap();
        let extra = Extra {
            files: &[("etc/nginx/nginx.conf", b"daemon off;", 0o644)],
            links: &[("bin/nc", "/bin/nc.openbsd")],
            merged_usr: false,
        };
        let bytes = layer("test", &[], dir.path(), &extra).unwrap();
        let mut archive = tar::Archive::new(&bytes[..]);
        let names: Vec<String> =
            archive.entries().unwrap().map(|e| e.unwrap().path().unwrap().display().to_string()).collect();
        // Directories as tar writes them, with a trailing slash.
        assert_eq!(names, ["bin/", "bin/nc", "etc/", "etc/nginx/", "etc/nginx/nginx.conf"]);
    }
}

//! Binaries of this cargo workspace, built with cargo in the harness's own build profile: the
//! reference CCM a local cluster runs, a provider's `ccm.build` of `kind: cargo`, and the same
//! at another commit of this repository (`harness bisect`'s worktrees). A harness away from the
//! checkout it was built in (copied to another machine, or into an image) builds nothing: it runs
//! the binary beside it, or on `PATH`.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Result, ToolchainError, io_err};

/// Builds `reference-ccm` from this workspace with cargo (the harness's own build profile) and
/// returns its path.
pub fn build_reference_ccm() -> Result<PathBuf> {
    build_workspace_binary("reference-ccm", "reference-ccm")
}

/// The packages `scripts/quickstart` builds in one cargo invocation. Cargo unifies dependencies'
/// features across the packages of one build, so `-p reference-ccm` alone would compile 71 crates
/// again in another feature set (2 min 13 s on 2 cores); built with these, a binary of this
/// workspace reuses what the harness's own build compiled.
pub const BUILT_TOGETHER: [&str; 2] = ["harness", "reference-ccm"];

/// The checkout this harness was built in, when it is still there.
pub fn checkout() -> Option<&'static Path> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    workspace.join("reference-ccm/Cargo.toml").is_file().then_some(workspace)
}

/// Binary `bin` of package `package` of this workspace: in the checkout the harness was built
/// in, built with cargo (the harness's own build profile, its dependencies' features as
/// [`BUILT_TOGETHER`] unify them); away from it, the `bin` beside the harness's own executable,
/// else on `PATH`.
pub fn build_workspace_binary(package: &str, bin: &str) -> Result<PathBuf> {
    let Some(workspace) = checkout() else { return installed_binary(bin) };
    let mut packages: Vec<&str> = BUILT_TOGETHER.to_vec();
    if !packages.contains(&package) {
        packages.push(package);
    }
    cargo_build(workspace, &packages, package, bin)
}

/// `bin` beside the running executable, else on `PATH`.
fn installed_binary(bin: &str) -> Result<PathBuf> {
    let beside = std::env::current_exe().ok().and_then(|exe| Some(exe.parent()?.join(bin)));
    match beside.clone().filter(|path| super::is_executable(path)).or_else(|| super::search_path(bin)) {
        Some(path) => Ok(path),
        None => Err(ToolchainError::NoCheckout {
            bin: bin.to_owned(),
            built_in: Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap_or(Path::new("/")).to_path_buf(),
            beside: beside.unwrap_or_default(),
        }),
    }
}

/// Builds binary `bin` of package `package` of the cargo workspace at `workspace` (a checkout of
/// this repository at another commit, for `harness bisect`) with the harness's own build profile,
/// and returns a copy of it kept in `workspace/.harness-build/`. Checkouts share cargo's target
/// directory, whose binary the next build overwrites: builds and copies take turns, so a run
/// never gets another checkout's binary. Cargo names a workspace's own crates by their path in
/// the workspace and tells them fresh by their files' times, so a checkout made before another's
/// build would pass for built: its files are touched first.
pub fn build_binary_in(workspace: &Path, package: &str, bin: &str) -> Result<PathBuf> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = TURN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    touch_sources(workspace, std::time::SystemTime::now())?;
    let built = cargo_build(workspace, &[package], package, bin)?;
    let dir = workspace.join(".harness-build");
    let kept = dir.join(bin);
    std::fs::create_dir_all(&dir).map_err(io_err("creating", &dir))?;
    std::fs::copy(&built, &kept).map_err(io_err("copying the built CCM to", &kept))?;
    Ok(kept)
}

/// Sets the modification time of every file under `dir` (but `.git`, `target`, `.harness-build`).
fn touch_sources(dir: &Path, now: std::time::SystemTime) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(io_err("reading", dir))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() {
            if ![".git", "target", ".harness-build"].contains(&entry.file_name().to_str().unwrap_or_default()) {
                touch_sources(&path, now)?;
            }
        } else if kind.is_file() {
            let file = std::fs::File::options().write(true).open(&path).map_err(io_err("opening", &path))?;
            file.set_modified(now).map_err(io_err("touching", &path))?;
        }
    }
    Ok(())
}

/// `cargo build` of binary `bin` of `package`, with the dependencies' features unified across
/// `packages` (which include `package`).
fn cargo_build(workspace: &Path, packages: &[&str], package: &str, bin: &str) -> Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.current_dir(workspace).args(["build", "--locked"]);
    for package in packages {
        command.args(["-p", package]);
    }
    command.args(["--bin", bin]);
    command.arg("--message-format=json-render-diagnostics");
    if !cfg!(debug_assertions) {
        command.arg("--release");
    }
    let output = command.output().map_err(|source| ToolchainError::Io {
        action: "running cargo build in",
        path: workspace.to_path_buf(),
        source,
    })?;
    let executable = String::from_utf8_lossy(&output.stdout).lines().rev().find_map(|line| {
        let message: serde_json::Value = serde_json::from_str(line).ok()?;
        (message["target"]["name"] == bin).then(|| message["executable"].as_str().map(PathBuf::from))?
    });
    match executable {
        Some(path) if output.status.success() => Ok(path),
        _ => Err(ToolchainError::CargoBuild {
            package: package.to_owned(),
            bin: bin.to_owned(),
            detail: String::from_utf8_lossy(&output.stderr).lines().rev().take(8).collect::<Vec<_>>().join(" | "),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-crate workspace whose binary prints `says`.
    fn workspace(dir: &Path, says: &str) {
        std::fs::create_dir_all(dir.join("src")).unwrap();
        let manifest =
            "[package]\nname = \"bisect-race-probe\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[workspace]\n";
        std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
        std::fs::write(dir.join("src/main.rs"), format!("fn main() {{ println!(\"{says}\"); }}\n")).unwrap();
        let lock = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .current_dir(dir)
            .args(["generate-lockfile", "--offline"])
            .output()
            .unwrap();
        assert!(lock.status.success(), "{}", String::from_utf8_lossy(&lock.stderr));
    }

    /// Checkouts built at once (harness bisect --parallel) share cargo's target directory (when
    /// CARGO_TARGET_DIR is set, as in CI): each still gets the binary of its own source.
    #[test]
    fn checkouts_built_at_once_each_get_their_own_binary() {
        let tmp = tempfile::tempdir().unwrap();
        let checkouts: Vec<PathBuf> = (0..3).map(|i| tmp.path().join(format!("checkout-{i}"))).collect();
        for (i, dir) in checkouts.iter().enumerate() {
            workspace(dir, &format!("checkout {i}"));
        }
        let built: Vec<PathBuf> = std::thread::scope(|scope| {
            let builds: Vec<_> = checkouts
                .iter()
                .map(|dir| scope.spawn(move || build_binary_in(dir, "bisect-race-probe", "bisect-race-probe")))
                .collect();
            builds.into_iter().map(|b| b.join().unwrap().unwrap()).collect()
        });
        for (i, binary) in built.iter().enumerate() {
            assert!(binary.starts_with(&checkouts[i]), "kept in its checkout: {}", binary.display());
            let output = Command::new(binary).output().unwrap();
            assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), format!("checkout {i}"));
        }
    }
}

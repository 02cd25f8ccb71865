//! The Go tools of `tools/testing/` (fake-gcs-server, testgrid-read) and Prow's commands of
//! `tools/prow/` (`prow/checkconfig`, `prow/sidecar`, …), built on first use with `go build` from
//! their committed go.mod/go.sum (`GOTOOLCHAIN=local`, `CGO_ENABLED=0`).
//!
//! A build lands in `$CARGO_TARGET_DIR` (or `target/`)`/go-tools/<name>-<hash>`, the hash covering
//! the module's go.mod, go.sum and Go sources, so an unchanged tool is not rebuilt and a changed one
//! is. Test binaries run at the same time take turns through a lock file, and a build is renamed
//! into place only when complete. `HARNESS_<NAME>_BIN` (e.g. `HARNESS_FAKE_GCS_SERVER_BIN`,
//! `HARNESS_TESTGRID_READ_BIN`) names a prebuilt binary instead.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

use sha2::{Digest, Sha256};

/// The repository's root (this crate's parent).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ has a parent").to_path_buf()
}

/// The binary of `tools/testing/<name>`, or of Prow's command `<command>` for `prow/<command>`
/// (one of `tools/prow/go.mod`'s `tool` lines), built if needed; panics saying what failed.
pub fn go_tool(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    // Held across the build: the tests of one binary wait for a single build.
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(path) = built.get(name) {
        return path.clone();
    }
    let path = locate(name).unwrap_or_else(|e| panic!("go tool {name}: {e}"));
    built.insert(name.to_string(), path.clone());
    path
}

fn env_override(name: &str) -> String {
    format!("HARNESS_{}_BIN", name.to_uppercase().replace(['-', '/'], "_"))
}

fn locate(name: &str) -> Result<PathBuf, String> {
    let var = env_override(name);
    if let Some(bin) = std::env::var_os(&var).filter(|v| !v.is_empty()) {
        let bin = PathBuf::from(bin);
        return if bin.is_file() { Ok(bin) } else { Err(format!("{var}={} is not a file", bin.display())) };
    }

    let (module, command) = match name.split_once('/') {
        Some((tools, command)) => (repo_root().join("tools").join(tools), Some(command)),
        None => (repo_root().join("tools/testing").join(name), None),
    };
    let go_mod = fs::read_to_string(module.join("go.mod"))
        .map_err(|e| format!("reading {}: {e}", module.join("go.mod").display()))?;
    let (key, has_sources) = source_hash(&module)?;
    // A module with its own main package builds it; one that only pins tools builds the one named.
    let package = match command {
        None if has_sources => ".".to_string(),
        _ => tool_package(&go_mod, command).ok_or_else(|| {
            format!("{} has no Go sources and no `tool` {}", module.display(), command.unwrap_or("line"))
        })?,
    };
    let name = &name.replace('/', "-");

    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target"))
        .join("go-tools");
    let bin = dir.join(format!("{name}-{key}"));
    if bin.is_file() {
        return Ok(bin);
    }
    fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let lock_path = dir.join(format!("{name}.lock"));
    let lock = fs::File::create(&lock_path).map_err(|e| format!("creating {}: {e}", lock_path.display()))?;
    lock.lock().map_err(|e| format!("locking {}: {e}", lock_path.display()))?;
    if bin.is_file() {
        return Ok(bin); // another process built it while we waited
    }

    let partial = dir.join(format!(".{name}-{key}.{}.partial", std::process::id()));
    let go = std::env::var_os("GO").unwrap_or_else(|| "go".into());
    let mut cmd = Command::new(&go);
    cmd.current_dir(&module)
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", "0")
        .args(["build", "-mod=readonly", "-buildvcs=false", "-trimpath", "-ldflags=-s -w", "-o"])
        .arg(&partial)
        .arg(&package);
    let shown = format!(
        "{} build -mod=readonly -buildvcs=false -trimpath -ldflags='-s -w' -o {} {package}",
        go.to_string_lossy(),
        partial.display()
    );
    eprintln!("building {name}: `{shown}` in {}", module.display());
    let output = cmd.output().map_err(|e| format!("running `{shown}` in {}: {e}", module.display()))?;
    if !output.status.success() {
        let _ = fs::remove_file(&partial);
        return Err(format!(
            "`{shown}` in {} failed ({}):\n{}",
            module.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim_end()
        ));
    }
    fs::rename(&partial, &bin).map_err(|e| format!("renaming {} into place: {e}", bin.display()))?;

    // Builds of earlier sources are of no further use.
    if let Ok(entries) = fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            if let Some(rest) = file.strip_prefix(&format!("{name}-"))
                && rest.len() == key.len()
                && rest.bytes().all(|b| b.is_ascii_hexdigit())
                && rest != key
            {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
    Ok(bin)
}

/// The package of go.mod's `tool` line (one line or a `tool ( … )` block) whose last element is
/// `command`, or the first when `command` is `None`.
fn tool_package(go_mod: &str, command: Option<&str>) -> Option<String> {
    let mut in_block = false;
    let mut tools = Vec::new();
    for line in go_mod.lines().map(str::trim) {
        match line {
            "tool (" => in_block = true,
            ")" => in_block = false,
            _ if in_block && !line.is_empty() => tools.push(line),
            _ => tools.extend(line.strip_prefix("tool ").map(str::trim)),
        }
    }
    tools
        .into_iter()
        .find(|tool| command.is_none_or(|command| tool.rsplit('/').next() == Some(command)))
        .map(str::to_owned)
}

/// A hash of go.mod, go.sum and the module's top-level Go sources, and whether it has any sources.
fn source_hash(module: &Path) -> Result<(String, bool), String> {
    let mut files: Vec<PathBuf> = fs::read_dir(module)
        .map_err(|e| format!("reading {}: {e}", module.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "go"))
        .collect();
    files.sort();
    let has_sources = !files.is_empty();
    let mut hasher = Sha256::new();
    for file in [module.join("go.mod"), module.join("go.sum")].into_iter().chain(files) {
        let bytes = fs::read(&file).unwrap_or_default();
        hasher.update(file.file_name().unwrap_or_default().as_encoded_bytes());
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    let digest = hasher.finalize();
    Ok((digest[..8].iter().map(|b| format!("{b:02x}")).collect(), has_sources))
}

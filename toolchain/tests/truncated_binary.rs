//! Full tier: a Go build (kubectl relinked from Go's build cache) from a copy of the installed default toolchain.
//!
//! Issue 56: "A truncated cached binary is rebuilt, not run." A copy of the installed default
//! toolchain (`harness toolchain install`, which `scripts/test` runs) in a cache of its own, its
//! kubectl cut short, is refused by `installed` and rebuilt by `install` with the real Go build,
//! every other binary kept. The installed toolchain itself is only read.
//!
//! The test's cache is `HARNESS_CACHE_DIR`, set before anything else of this binary reads the
//! environment: it is the only test here.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use sha2::{Digest, Sha256};

fn sha256(path: &Path) -> String {
    let mut file = fs::File::open(path).unwrap();
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).unwrap();
    hex::encode(hasher.finalize())
}

#[test]
fn a_truncated_cached_kubectl_is_rebuilt_by_go_not_run() {
    let release = toolchain::default_release();
    let real = toolchain::installed(&release)
        .unwrap_or_else(|e| panic!("the default toolchain must be installed (harness toolchain install): {e}"));
    let manifest: serde_json::Value =
        serde_json::from_slice(&fs::read(real.dir.join("manifest.json")).unwrap()).unwrap();
    let recorded = manifest["binaries"]["kubectl"].clone();
    let size = recorded["size"].as_u64().unwrap();

    // A copy, file by file (never a hard link: cutting one short would cut the installed one).
    let cache = tempfile::tempdir().unwrap();
    let entry = cache.path().join("toolchains").join(release.version);
    fs::create_dir_all(entry.join("bin")).unwrap();
    fs::copy(real.dir.join("manifest.json"), entry.join("manifest.json")).unwrap();
    for name in manifest["binaries"].as_object().unwrap().keys() {
        fs::copy(real.binary(name), entry.join("bin").join(name)).unwrap();
    }
    let kubectl = entry.join("bin/kubectl");
    fs::File::options().write(true).open(&kubectl).unwrap().set_len(size / 2).unwrap();
    let kept = |name: &str| std::os::unix::fs::MetadataExt::ino(&fs::metadata(entry.join("bin").join(name)).unwrap());
    let etcd = kept("etcd");

    // SAFETY: the only test of this binary, and no other thread of it reads the environment.
    unsafe { std::env::set_var("HARNESS_CACHE_DIR", cache.path()) };

    let refused = toolchain::installed(&release).unwrap_err();
    let text = refused.to_string();
    assert!(
        matches!(&refused, toolchain::ToolchainError::Corrupt { binaries, .. } if binaries[..] == ["kubectl"]),
        "{text}"
    );
    assert!(text.contains(&format!("kubectl is {} bytes, the manifest says {size} (truncated?)", size / 2)), "{text}");

    let started = Instant::now();
    let installed = toolchain::install(&release, false).unwrap_or_else(|e| panic!("{e}"));
    let took = started.elapsed();
    eprintln!("kubectl rebuilt in {took:.1?}");
    assert_eq!(installed.dir, entry);

    // Rebuilt as it was built: the record the installed toolchain has, and the bytes it names.
    let rebuilt: serde_json::Value = serde_json::from_slice(&fs::read(entry.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(rebuilt["binaries"]["kubectl"], recorded);
    assert_eq!(fs::metadata(&kubectl).unwrap().len(), size);
    assert_eq!(sha256(&kubectl), recorded["sha256"].as_str().unwrap());
    let version = Command::new(&kubectl).args(["version", "--client"]).output().unwrap();
    let said = String::from_utf8_lossy(&version.stdout);
    assert!(version.status.success() && said.contains(release.version), "{said}");

    // Nothing else was rebuilt: etcd is the very file that was copied, and every record as it was.
    assert_eq!(kept("etcd"), etcd, "etcd kept, not rebuilt");
    assert_eq!(rebuilt["binaries"], manifest["binaries"]);
    toolchain::verify(&release).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fs::metadata(real.binary("kubectl")).unwrap().len(), size, "the installed toolchain untouched");
    // A row of `scripts/chaos`'s table, once every check above held.
    eprintln!(
        "chaos-row\ta cached toolchain binary truncated (kubectl)\tfound by its recorded size and SHA-256 before use, \
         rebuilt by go build, not run\t{:.1} s\tnothing\tevery other binary, as it was",
        took.as_secs_f64()
    );
}

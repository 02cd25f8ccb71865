//! `cargo bench -p toolchain --bench binaries_checked [-- RUNS]`: what checking the installed
//! default toolchain's binaries before use costs (`toolchain::installed`, which every `cluster up`
//! and run goes through), with no stamps (every binary hashed: the first use after an older
//! harness installed it) and with them (a `stat` per binary), beside the size-only check before
//! stamps (the manifest read and a `stat` per binary). Median, min and max of RUNS (default 5;
//! the stamped and size-only checks 20 times as many).
//!
//! The installed toolchain is only read: the bench checks an entry of its own in a temporary
//! `HARNESS_CACHE_DIR`, its manifest a copy and its binaries symbolic links to the installed ones,
//! so its stamps are its own to remove. Hashing reads the binaries from the page cache when they
//! were read lately (as after a run); the bench does not empty it.

use std::path::Path;
use std::time::{Duration, Instant};

fn summary(name: &str, mut times: Vec<Duration>) {
    times.sort();
    let median = times[times.len() / 2];
    println!(
        "{name}: median {median:.3?}, min {:.3?}, max {:.3?} ({} runs)",
        times[0],
        times[times.len() - 1],
        times.len()
    );
}

/// The check before stamps: the manifest parsed, and each binary's size compared with its record.
fn size_only(dir: &Path) -> bool {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    manifest["binaries"].as_object().unwrap().iter().all(|(name, record)| {
        std::fs::metadata(dir.join("bin").join(name)).is_ok_and(|m| Some(m.len()) == record["size"].as_u64())
    })
}

fn main() {
    let runs: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(5);
    let release = toolchain::default_release();
    let real = toolchain::installed(&release).expect("the default toolchain installed (harness toolchain install)");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(real.dir.join("manifest.json")).unwrap()).unwrap();
    let binaries = manifest["binaries"].as_object().unwrap();
    let bytes: u64 = binaries.values().map(|record| record["size"].as_u64().unwrap()).sum();

    let cache = tempfile::tempdir().unwrap();
    let toolchains = cache.path().join("toolchains");
    let entry = toolchains.join(release.version);
    std::fs::create_dir_all(entry.join("bin")).unwrap();
    std::fs::copy(real.dir.join("manifest.json"), entry.join("manifest.json")).unwrap();
    for name in binaries.keys() {
        std::os::unix::fs::symlink(real.binary(name), entry.join("bin").join(name)).unwrap();
    }
    let stamps = toolchains.join(format!("{}.verified.json", release.version));
    // SAFETY: no other thread runs yet.
    unsafe { std::env::set_var("HARNESS_CACHE_DIR", cache.path()) };
    println!(
        "Kubernetes {}: {} binaries, {:.2} GB ({})",
        release.version,
        binaries.len(),
        bytes as f64 / 1e9,
        real.dir.display()
    );

    let (mut fresh, mut stamped, mut sizes) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let _ = std::fs::remove_file(&stamps);
        let started = Instant::now();
        toolchain::installed(&release).expect("checked");
        fresh.push(started.elapsed());
        assert!(stamps.exists(), "the check stamped the binaries");
        for _ in 0..20 {
            let started = Instant::now();
            toolchain::installed(&release).expect("checked");
            stamped.push(started.elapsed());
            let started = Instant::now();
            assert!(size_only(&entry));
            sizes.push(started.elapsed());
        }
    }
    let median = {
        let mut sorted = fresh.clone();
        sorted.sort();
        sorted[sorted.len() / 2]
    };
    summary("no stamps, every binary hashed", fresh);
    println!("  {:.2} GB/s", bytes as f64 / 1e9 / median.as_secs_f64());
    summary("stamped, a stat per binary", stamped);
    summary("the size-only check before stamps", sizes);
}

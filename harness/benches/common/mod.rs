//! Shared by the benches: the real JUnit data they measure on.

use std::path::{Path, PathBuf};

/// The largest real JUnit file in `tests/data/junit/` (hand-written `synthetic-*` files excluded).
pub fn largest_real_junit_file() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/junit");
    let files = std::fs::read_dir(&dir).expect("tests/data/junit exists").flatten().map(|e| e.path());
    let xml =
        files.filter(|p| p.extension().is_some_and(|e| e == "xml") && !p.to_string_lossy().contains("synthetic-"));
    xml.max_by_key(|p| p.metadata().map(|m| m.len()).unwrap_or(0)).expect("a real JUnit file")
}

//! Arbitrary bodies into the ingestion API's upload reader, under small limits: it must return an
//! upload or an error, never panic. An upload it returns must hold only what its rules allow: file
//! names that stay inside the build directory, at most the limits, a `started.json`, no file twice.
#![no_main]

use std::collections::BTreeSet;

use libfuzzer_sys::fuzz_target;
use upload::Limits;

const LIMITS: Limits = Limits { max_body_bytes: 64 * 1024, max_file_bytes: 16 * 1024, max_files: 16 };

fuzz_target!(|data: &[u8]| {
    // The first byte picks the Content-Type, so the boundary parser is fuzzed too.
    let (content_type, body) = match data.split_first() {
        Some((0, rest)) => match rest.iter().position(|b| *b == b'\n') {
            Some(end) => (String::from_utf8_lossy(&rest[..end]).into_owned(), &rest[end + 1..]),
            None => return,
        },
        Some((_, rest)) => ("multipart/form-data; boundary=XyZ".to_owned(), rest),
        None => return,
    };
    let Ok(upload) = upload::read_bytes(&content_type, body, &LIMITS) else { return };
    assert!(upload.files.len() <= LIMITS.max_files, "{} files", upload.files.len());
    assert!(upload.files.iter().any(|f| f.path == "started.json"), "no started.json");
    let mut seen = BTreeSet::new();
    for file in &upload.files {
        upload::check_path(&file.path).unwrap_or_else(|e| panic!("a refused path got through: {e}"));
        assert!(!file.path.split('/').any(|s| s == ".." || s.is_empty()) && !file.path.starts_with('/'), "{:?}", file.path);
        assert!(file.bytes.len() as u64 <= LIMITS.max_file_bytes, "{} bytes", file.bytes.len());
        assert!(seen.insert(file.path.clone()), "{:?} twice", file.path);
    }
    assert!(upload.pull.is_some() == upload.org_repo.is_some());
});

//! `s3://` stores end to end on a real S3-compatible server: `tools/testing/fake-s3`
//! (johannesboyne/gofakes3, in memory) reached through the `object_store` crate exactly as a
//! deployment with `AWS_ENDPOINT` set would, path-style and unsigned. The store API on its own
//! (idempotent writes, reads, listings, multipart uploads of large files), then real upstream JUnit
//! files published to it, indexed into SQLite and re-indexed from it.

use crate::common;

use std::path::Path;

use common::builds::*;
use common::fake_s3::FakeS3;
use results::index::Indexed;
use results::layout::BuildLocation;
use results::publish;
use results::record::State;
use results::store::{Entry, Put, ResultStore, StoreOptions};

const BUCKET: &str = "results";
/// The prefix of the store URL, under which the layout lives in the bucket.
const PREFIX: &str = "some/prefix";

/// store.rs uploads files above 16 MiB in parts of 8 MiB.
const MULTIPART_THRESHOLD: usize = 16 * 1024 * 1024;
const CHUNK: usize = 8 * 1024 * 1024;

/// The store at `s3://results/some/prefix` on the server. The machine's AWS credentials must not
/// leak in: store.rs signs requests when `AWS_ACCESS_KEY_ID` is set, and this test is about the
/// unsigned path an emulator takes.
fn s3_store(s3: &FakeS3) -> ResultStore {
    assert!(
        std::env::var_os("AWS_ACCESS_KEY_ID").is_none(),
        "AWS_ACCESS_KEY_ID is set in this environment: the S3 store would sign its requests with the \
         machine's credentials; run this test without AWS_* credentials (`env -u AWS_ACCESS_KEY_ID \
         -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN cargo test -p e2e -- results_s3::`)"
    );
    let options = StoreOptions { s3_endpoint: Some(s3.endpoint()), ..StoreOptions::default() };
    ResultStore::open_with(&format!("s3://{BUCKET}/{PREFIX}"), &options)
        .unwrap_or_else(|e| panic!("opening the S3 store at {}: {e}", s3.endpoint()))
}

/// Every file under `dir`, relative, with `/` separators, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, relative: &str, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = if relative.is_empty() { name } else { format!("{relative}/{name}") };
            if entry.file_type().unwrap().is_dir() {
                walk(&entry.path(), &path, found);
            } else {
                found.push(path);
            }
        }
    }
    let mut found = Vec::new();
    walk(dir, "", &mut found);
    found.sort();
    found
}

/// How many multipart uploads of `key` the server completed, from its request log, once it has
/// logged at least `at_least` (its log reaches us through a pipe, a moment after the response).
fn multipart_completions(s3: &FakeS3, key: &str, at_least: usize) -> usize {
    let count = || s3.log().lines().filter(|l| l.contains("complete multipart upload") && l.contains(key)).count();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while count() < at_least && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    count()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_store_api_works_on_an_s3_server_under_a_prefix() {
    let s3 = FakeS3::start(&[BUCKET]);
    let store = s3_store(&s3);
    assert_eq!(store.url(), "s3://results/some/prefix");
    assert_eq!(store.url_of("logs/j/1/started.json"), "s3://results/some/prefix/logs/j/1/started.json");
    // A sibling whose name the prefix is a prefix of, written behind the store's back: never the store's.
    s3.upload(BUCKET, "some/prefix-other/logs/j/9/started.json", b"{}");

    // Written once, then unchanged; other bytes are written again.
    let bytes: &'static [u8] = b"{\"timestamp\":1}";
    let other: &'static [u8] = b"{\"timestamp\":22}";
    assert_eq!(store.put_if_changed("logs/j/1/started.json", bytes.into()).await.unwrap(), Put::Written);
    assert_eq!(store.put_if_changed("logs/j/1/started.json", bytes.into()).await.unwrap(), Put::Unchanged);
    assert_eq!(store.put_if_changed("logs/j/1/started.json", other.into()).await.unwrap(), Put::Written);
    assert_eq!(store.put_if_changed("logs/j/1/started.json", other.into()).await.unwrap(), Put::Unchanged);
    assert_eq!(store.get("logs/j/1/started.json").await.unwrap().as_deref(), Some(other));
    assert_eq!(store.size("logs/j/1/started.json").await.unwrap(), Some(other.len() as u64));
    assert_eq!(store.get("logs/j/1/finished.json").await.unwrap(), None);
    assert_eq!(store.size("logs/j/1/finished.json").await.unwrap(), None);
    // What the server holds, read without object_store: the object is under the prefix.
    assert_eq!(s3.download(BUCKET, "some/prefix/logs/j/1/started.json").as_deref(), Some(other));
    // Stored with the content type store.rs gives JSON, so a browser shows it as text.
    assert_eq!(s3.content_type(BUCKET, "some/prefix/logs/j/1/started.json").as_deref(), Some("application/json"));

    store.put_if_changed("logs/j/2/started.json", bytes.into()).await.unwrap();
    store.put_if_changed("logs/j/10/artifacts/junit_01.xml", "<testsuites/>".into()).await.unwrap();
    store.put_if_changed("logs/k/latest-build.txt", "7".into()).await.unwrap();
    assert_eq!(store.list_dirs("").await.unwrap(), ["logs"]);
    assert_eq!(store.list_dirs("logs").await.unwrap(), ["j", "k"]);
    assert_eq!(store.list_dirs("logs/j").await.unwrap(), ["1", "10", "2"]);
    assert_eq!(store.list_dirs("logs/j/10").await.unwrap(), ["artifacts"]);
    assert!(store.list_dirs("logs/k").await.unwrap().is_empty(), "a file is not a directory");
    assert!(store.list_dirs("nothing/here").await.unwrap().is_empty());
    let entry = |path: &str, size: usize| Entry { path: path.to_owned(), size: size as u64 };
    assert_eq!(
        store.list("logs/j").await.unwrap(),
        [
            entry("logs/j/1/started.json", other.len()),
            entry("logs/j/10/artifacts/junit_01.xml", "<testsuites/>".len()),
            entry("logs/j/2/started.json", bytes.len()),
        ]
    );
    assert_eq!(store.list("").await.unwrap().len(), 4, "the sibling prefix is not listed");
    assert!(store.list("logs/j/1/started").await.unwrap().is_empty(), "list takes whole path segments");
    assert_eq!(
        s3.keys(BUCKET, ""),
        [
            "some/prefix-other/logs/j/9/started.json",
            "some/prefix/logs/j/1/started.json",
            "some/prefix/logs/j/10/artifacts/junit_01.xml",
            "some/prefix/logs/j/2/started.json",
            "some/prefix/logs/k/latest-build.txt",
        ]
    );

    // A file above the multipart threshold: uploaded in parts, read back whole, compared on the
    // next upload without being written again, and written again when one byte differs.
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("big.log");
    let content: Vec<u8> = (0..MULTIPART_THRESHOLD + 3 * CHUNK / 2).map(|i| (i % 251) as u8).collect();
    std::fs::write(&file, &content).unwrap();
    let key = "some/prefix/logs/j/1/artifacts/big.log";
    assert_eq!(store.upload_file_if_changed("logs/j/1/artifacts/big.log", &file).await.unwrap(), Put::Written);
    assert_eq!(multipart_completions(&s3, key, 1), 1, "not uploaded in parts:\n{}", s3.log());
    assert_eq!(s3.content_type(BUCKET, key).as_deref(), Some("text/plain; charset=utf-8"));
    assert_eq!(store.size("logs/j/1/artifacts/big.log").await.unwrap(), Some(content.len() as u64));
    assert!(store.get("logs/j/1/artifacts/big.log").await.unwrap().unwrap() == content[..], "bytes differ");
    assert!(s3.download(BUCKET, key).unwrap() == content, "the server holds other bytes");
    assert_eq!(store.upload_file_if_changed("logs/j/1/artifacts/big.log", &file).await.unwrap(), Put::Unchanged);
    assert_eq!(multipart_completions(&s3, key, 1), 1, "an unchanged file was uploaded again");
    let mut changed = content;
    *changed.last_mut().unwrap() ^= 1;
    std::fs::write(&file, &changed).unwrap();
    assert_eq!(store.upload_file_if_changed("logs/j/1/artifacts/big.log", &file).await.unwrap(), Put::Written);
    assert_eq!(multipart_completions(&s3, key, 2), 2);
    assert!(s3.download(BUCKET, key).unwrap() == changed, "the server holds other bytes");
    assert_eq!(store.list_dirs("logs/j/1").await.unwrap(), ["artifacts"]);
    // A file of exactly the threshold goes in one request.
    let small = tmp.path().join("threshold.log");
    std::fs::write(&small, &changed[..MULTIPART_THRESHOLD]).unwrap();
    assert_eq!(store.upload_file_if_changed("logs/j/1/threshold.log", &small).await.unwrap(), Put::Written);
    assert_eq!(multipart_completions(&s3, "some/prefix/logs/j/1/threshold.log", 0), 0);
    assert_eq!(store.upload_file_if_changed("logs/j/1/threshold.log", &small).await.unwrap(), Put::Unchanged);
}

#[tokio::test(flavor = "multi_thread")]
async fn listings_longer_than_a_page_are_listed_whole_and_once() {
    // S3 answers 1000 entries a page: 1001 "directories" of 2 objects each take object_store through
    // continuation tokens, a page ending inside a directory. (gofakes3 then lists that directory
    // again on the next page, where S3 would resume after it; object_store's list_with_delimiter
    // merges common prefixes into a set, so the store sees each once all the same.)
    let s3 = FakeS3::start(&[BUCKET]);
    let store = s3_store(&s3);
    let builds: Vec<String> = (0..1001).map(|n| format!("{n:04}")).collect();
    for build in &builds {
        for file in ["finished.json", "started.json"] {
            s3.upload(BUCKET, &format!("{PREFIX}/logs/many/{build}/{file}"), b"{}");
        }
    }
    s3.upload(BUCKET, "some/prefix-other/logs/many/0000/started.json", b"{}");
    assert_eq!(store.list_dirs("logs/many").await.unwrap(), builds);
    let listed: Vec<String> = store.list("logs/many").await.unwrap().into_iter().map(|e| e.path).collect();
    let expected: Vec<String> = builds
        .iter()
        .flat_map(|b| [format!("logs/many/{b}/finished.json"), format!("logs/many/{b}/started.json")])
        .collect();
    assert_eq!(listed, expected);
    assert_eq!(s3.keys(BUCKET, PREFIX).len(), 2 * 1001 + 1, "the raw listing pages too");
}

#[tokio::test(flavor = "multi_thread")]
async fn builds_published_to_s3_reindex_into_identical_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let s3 = FakeS3::start(&[BUCKET]);
    let store = s3_store(&s3);
    let t = now() - 3600;
    let passing = build_dir(tmp.path(), "b1", t, Some(&finished_json(t, true, "v1.37.1", "abc123")), REAL_FILES);
    let failing_files = &REAL_FILES[2..4];
    let failing =
        build_dir(tmp.path(), "b2", t + 60, Some(&finished_json(t + 60, false, "v1.37.1", "def456")), failing_files);
    let builds = [(&passing, "1001"), (&failing, "1002")];

    let index = sqlite(tmp.path(), "published.sqlite").await;
    for (dir, build) in builds {
        let location = BuildLocation::periodic(JOB, build).unwrap();
        let published = publish::publish(&store, &index, dir, &location, &ended()).await.unwrap();
        assert_eq!(published.indexed, Indexed::Inserted, "{}", published.url);
        assert_eq!(published.url, format!("s3://{BUCKET}/{PREFIX}/logs/{JOB}/{build}"));
        assert_eq!((published.written, published.unchanged), (files_under(dir).len(), 0), "{}", published.url);
        assert!(published.problems().is_empty(), "{:?}", published.problems());
    }
    let expected_results = (cases_in(REAL_FILES) + cases_in(failing_files)) as i64;
    assert_eq!(index.counts().await.unwrap(), (2, expected_results));
    assert_eq!(store.get(&format!("logs/{JOB}/latest-build.txt")).await.unwrap().unwrap(), "1002");

    // The bucket holds the Prow layout under the prefix, byte for byte.
    let mut expected_keys = vec![format!("{PREFIX}/logs/{JOB}/latest-build.txt")];
    for (dir, build) in builds {
        for file in files_under(dir) {
            let key = format!("{PREFIX}/logs/{JOB}/{build}/{file}");
            assert_eq!(s3.download(BUCKET, &key), Some(std::fs::read(dir.join(&file)).unwrap()), "{key}");
            expected_keys.push(key);
        }
    }
    expected_keys.sort();
    assert_eq!(s3.keys(BUCKET, ""), expected_keys);

    // Re-indexed from S3 into a fresh database: the same rows.
    let published_rows = index.snapshot().await.unwrap();
    let fresh = sqlite(tmp.path(), "fresh.sqlite").await;
    let report = publish::reindex(&store, &fresh, &ended()).await.unwrap();
    assert_eq!((report.inserted, report.replaced, report.failed.len()), (2, 0, 0), "{:?}", report.failed);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(fresh.snapshot().await.unwrap(), published_rows);
    assert_eq!(published_rows.builds.len(), 2);
    assert!(published_rows.builds.iter().all(|b| b.artifacts_url.starts_with("s3://results/some/prefix/logs/")));
    let build = &published_rows.builds[1];
    assert_eq!((build.build.as_str(), build.passed, build.state), ("1002", Some(false), State::Finished));
    assert_eq!(build.versions.provider_version.as_deref(), Some("def456"));

    // The same builds through a local directory store give the same rows but for the store URL.
    let local = ResultStore::open_dir(&tmp.path().join("store")).unwrap();
    let local_index = sqlite(tmp.path(), "local.sqlite").await;
    for (dir, build) in builds {
        let location = BuildLocation::periodic(JOB, build).unwrap();
        publish::publish(&local, &local_index, dir, &location, &ended()).await.unwrap();
    }
    assert_eq!(without_store_urls(local_index.snapshot().await.unwrap()), without_store_urls(published_rows.clone()));

    // Publishing again writes nothing and changes no row.
    for (dir, build) in builds {
        let location = BuildLocation::periodic(JOB, build).unwrap();
        let again = publish::publish(&store, &index, dir, &location, &ended()).await.unwrap();
        assert_eq!((again.written, again.indexed), (0, Indexed::Unchanged), "{}", again.url);
        assert_eq!(again.unchanged, files_under(dir).len());
    }
    assert_eq!(index.snapshot().await.unwrap(), published_rows);
    let report = publish::reindex(&store, &fresh, &ended()).await.unwrap();
    assert_eq!((report.inserted, report.replaced, report.unchanged), (0, 0, 2));
}

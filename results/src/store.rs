//! The object store builds are published to: a local directory (the default), `gs://` or `s3://`,
//! all through the `object_store` crate, so the embedded default and a real bucket share one path.
//!
//! A store URL names a bucket and an optional prefix under which the Prow layout (`logs/…`,
//! `pr-logs/…`) lives: `gs://kubernetes-ci-logs`, `s3://bucket/some/prefix`, `file:///srv/results`
//! or a plain directory path. Credentials come from the environment, as each cloud's tools expect:
//! for GCS `GOOGLE_SERVICE_ACCOUNT`/`GOOGLE_APPLICATION_CREDENTIALS` (or the instance's), and
//! `STORAGE_EMULATOR_HOST` (as Google's own clients honour it) points at an emulator such as
//! fake-gcs-server; for S3 the `AWS_*` variables (`AWS_ENDPOINT` for an S3-compatible server).
//!
//! [`ResultStore::put_if_changed`] is what makes publishing idempotent: an object whose bytes are
//! already there is not written again.
//!
//! Object names are kept as they are (UTF-8, as Prow's uploader writes them), never
//! percent-encoded: `artifacts/日本語.txt` is that object in a bucket and that file in a directory.
//! What a store can hold differs, and [`ResultStore::holds`] says it before anything is written: a
//! directory holds names of at most [`MAX_LOCAL_NAME_BYTES`] bytes per segment (Linux's 255 less
//! the temporary suffix the store writes through), a bucket keys of at most [`MAX_KEY_BYTES`]
//! bytes (GCS's and S3's limit) with its prefix. A path that cannot exist (a segment under a file,
//! a name too long) reads as absent, never as a failing store.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::prefix::PrefixStore;
use object_store::{ClientOptions, ObjectStore, PutPayload, WriteMultipart};
use tokio::io::AsyncReadExt;

/// Files above this are uploaded in parts, so a huge artifact never sits in memory whole.
const MULTIPART_THRESHOLD: u64 = 16 * 1024 * 1024;
const CHUNK: usize = 8 * 1024 * 1024;
/// A file name in a directory store: Linux file systems' 255 bytes, less the `#<n>` suffix of the
/// temporary file each object is written through.
pub const MAX_LOCAL_NAME_BYTES: usize = 250;
/// An object's whole key in GCS or S3, with the store's prefix.
pub const MAX_KEY_BYTES: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "{url:?} is not a store URL: use a directory path, file:///dir, gs://bucket[/prefix] or s3://bucket[/prefix]"
    )]
    BadUrl { url: String },
    #[error("cannot open store {url}: {source}")]
    Open { url: String, source: object_store::Error },
    #[error("cannot create the store directory {dir}: {source}")]
    CreateDir { dir: PathBuf, source: std::io::Error },
    #[error("{url}: cannot {action}: {source}")]
    Object { action: &'static str, url: String, source: object_store::Error },
    #[error("{file}: cannot read it to upload: {source}")]
    ReadLocal { file: PathBuf, source: std::io::Error },
    #[error("{path:?} cannot be stored: {rule}")]
    Unholdable { path: String, rule: String },
}

impl StoreError {
    /// Whether asking again later may succeed: the store could not be reached (a connection refused
    /// or cut, a timeout) or answered that it is unavailable (a 5xx, a 429), after the client's own
    /// retries of that request. A refusal (403, 401, 400), an object that cannot be stored, a bad URL
    /// or a local file that cannot be read stays as it is.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Object { source, .. } => object_store_transient(source),
            StoreError::BadUrl { .. }
            | StoreError::Open { .. }
            | StoreError::CreateDir { .. }
            | StoreError::ReadLocal { .. }
            | StoreError::Unholdable { .. } => false,
        }
    }
}

/// An `object_store` error a later attempt may not meet (see [`StoreError::is_transient`]). Its
/// client's errors are `Generic`, their type private: a network failure shows in the causes, and a
/// status the client gave up on only in the message, "Server returned non-2xx status code: 503
/// Service Unavailable" (or "Server returned error response: …", a 200 whose body is S3's
/// `InternalError` or `SlowDown`).
fn object_store_transient(error: &object_store::Error) -> bool {
    let object_store::Error::Generic { source, .. } = error else { return false };
    if crate::network_failure(source.as_ref()) {
        return true;
    }
    let message = source.to_string();
    let unavailable = |status: &str| status.starts_with('5') || status.starts_with("429") || status.starts_with("408");
    message.split("status code: ").skip(1).any(unavailable) || message.contains("Server returned error response")
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// Whether [`ResultStore::put_if_changed`] wrote anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    Written,
    Unchanged,
}

/// An object found by [`ResultStore::list`]: its path relative to the store root, and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: String,
    pub size: u64,
}

/// A bucket (or directory) holding the Prow layout.
#[derive(Clone)]
pub struct ResultStore {
    inner: Arc<dyn ObjectStore>,
    /// The URL it was opened with, without a trailing slash; object URLs are `<base>/<path>`.
    base: String,
    /// What names it can hold.
    names: Names,
}

/// The naming limits of a kind of store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Names {
    /// A local directory: each segment a file name.
    Directory,
    /// A bucket: the whole key, `prefix` bytes of which the store's prefix takes (with its `/`).
    Bucket { prefix: usize },
}

impl std::fmt::Debug for ResultStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResultStore").field("base", &self.base).finish()
    }
}

/// Settings that usually come from the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreOptions {
    /// `host:port` (or a URL) of a GCS emulator, e.g. fake-gcs-server: `STORAGE_EMULATOR_HOST`.
    pub gcs_emulator_host: Option<String>,
    /// An S3-compatible server's URL, e.g. `http://127.0.0.1:9000`: `AWS_ENDPOINT` (or
    /// `AWS_ENDPOINT_URL`). Requests use path-style addressing; without `AWS_ACCESS_KEY_ID` they
    /// go unsigned (an emulator, or a public bucket).
    pub s3_endpoint: Option<String>,
}

impl StoreOptions {
    pub fn from_env() -> Self {
        let var = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
        StoreOptions {
            gcs_emulator_host: var("STORAGE_EMULATOR_HOST"),
            s3_endpoint: var("AWS_ENDPOINT").or_else(|| var("AWS_ENDPOINT_URL")),
        }
    }
}

impl ResultStore {
    /// Opens the store a URL names, with settings from the environment ([`StoreOptions::from_env`]);
    /// a local directory is created if missing.
    pub fn open(url: &str) -> Result<Self> {
        Self::open_with(url, &StoreOptions::from_env())
    }

    /// Opens the store a URL names.
    pub fn open_with(url: &str, options: &StoreOptions) -> Result<Self> {
        let bad = || StoreError::BadUrl { url: url.to_owned() };
        let open_err = |source| StoreError::Open { url: url.to_owned(), source };
        if let Some(rest) = url.strip_prefix("gs://") {
            let (bucket, prefix) = split_bucket(rest).ok_or_else(bad)?;
            let store = gcs_builder(bucket, options).build().map_err(open_err)?;
            return Ok(Self::wrap(
                Arc::new(store),
                prefix,
                format!("gs://{}", rest.trim_end_matches('/')),
                bucket_names(prefix),
            ));
        }
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = split_bucket(rest).ok_or_else(bad)?;
            let store = s3_builder(bucket, options).build().map_err(open_err)?;
            return Ok(Self::wrap(
                Arc::new(store),
                prefix,
                format!("s3://{}", rest.trim_end_matches('/')),
                bucket_names(prefix),
            ));
        }
        let dir = match url.strip_prefix("file://") {
            Some(path) => PathBuf::from(path),
            None if url.contains("://") || url.is_empty() => return Err(bad()),
            None => PathBuf::from(url),
        };
        Self::open_dir(&dir)
    }

    /// A local directory as a store.
    pub fn open_dir(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir { dir: dir.to_path_buf(), source })?;
        let dir =
            std::path::absolute(dir).map_err(|source| StoreError::CreateDir { dir: dir.to_path_buf(), source })?;
        let base = format!("file://{}", dir.display());
        let store = LocalFileSystem::new_with_prefix(&dir)
            .map_err(|source| StoreError::Open { url: base.clone(), source })?
            .with_automatic_cleanup(true);
        Ok(Self::wrap(Arc::new(store), "", base, Names::Directory))
    }

    fn wrap(store: Arc<dyn ObjectStore>, prefix: &str, base: String, names: Names) -> Self {
        let inner: Arc<dyn ObjectStore> =
            if prefix.is_empty() { store } else { Arc::new(PrefixStore::new(store, ObjectPath::from(prefix))) };
        ResultStore { inner, base: base.trim_end_matches('/').to_owned(), names }
    }

    /// Whether the store can hold an object at `path`: `Err` names the rule it breaks.
    pub fn holds(&self, path: &str) -> Result<()> {
        let refuse = |rule: String| Err(StoreError::Unholdable { path: path.to_owned(), rule });
        if let Err(e) = ObjectPath::parse(path) {
            return refuse(format!("not an object name ({e})"));
        }
        match self.names {
            Names::Directory => {
                if let Some(long) = path.split('/').find(|segment| segment.len() > MAX_LOCAL_NAME_BYTES) {
                    return refuse(format!(
                        "the name {long:?} is {} bytes of UTF-8; a directory store holds at most {MAX_LOCAL_NAME_BYTES} per name",
                        long.len()
                    ));
                }
                let name = path.rsplit('/').next().unwrap_or_default();
                if name.rsplit_once('#').is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) {
                    return refuse("a name ending in #<digits> is a directory store's temporary file".to_owned());
                }
                Ok(())
            }
            Names::Bucket { prefix } if prefix + path.len() > MAX_KEY_BYTES => refuse(format!(
                "the key is {} bytes of UTF-8 with the store's prefix; a bucket holds at most {MAX_KEY_BYTES}",
                prefix + path.len()
            )),
            Names::Bucket { .. } => Ok(()),
        }
    }

    /// The URL the store was opened with (normalised: absolute for a directory, no trailing slash).
    pub fn url(&self) -> &str {
        &self.base
    }

    /// The URL of an object or directory under the store.
    pub fn url_of(&self, path: &str) -> String {
        format!("{}/{}", self.base, path.trim_start_matches('/'))
    }

    /// Reads an object; `None` when it does not exist (or cannot: see [`absent`]).
    pub async fn get(&self, path: &str) -> Result<Option<Bytes>> {
        let Some(location) = location(path) else { return Ok(None) };
        match self.inner.get(&location).await {
            Ok(result) => result.bytes().await.map(Some).map_err(self.err("read", path)),
            Err(e) if absent(&e) => Ok(None),
            Err(e) => Err(self.err("read", path)(e)),
        }
    }

    /// The last `max` bytes of an object and its whole size; `None` when it does not exist.
    pub async fn get_tail(&self, path: &str, max: u64) -> Result<Option<(Bytes, u64)>> {
        let Some(size) = self.size(path).await? else { return Ok(None) };
        let range = size.saturating_sub(max)..size;
        if range.is_empty() {
            return Ok(Some((Bytes::new(), size)));
        }
        let Some(location) = location(path) else { return Ok(None) };
        match self.inner.get_range(&location, range).await {
            Ok(bytes) => Ok(Some((bytes, size))),
            Err(e) if absent(&e) => Ok(None),
            Err(e) => Err(self.err("read", path)(e)),
        }
    }

    /// The size of an object; `None` when it does not exist.
    pub async fn size(&self, path: &str) -> Result<Option<u64>> {
        let Some(location) = location(path) else { return Ok(None) };
        match self.inner.head(&location).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(e) if absent(&e) => Ok(None),
            Err(e) => Err(self.err("stat", path)(e)),
        }
    }

    /// Writes `bytes` unless the object already holds exactly them.
    pub async fn put_if_changed(&self, path: &str, bytes: Bytes) -> Result<Put> {
        if self.size(path).await? == Some(bytes.len() as u64) && self.get(path).await?.as_ref() == Some(&bytes) {
            return Ok(Put::Unchanged);
        }
        self.holds(path)?;
        let location = ObjectPath::parse(path).expect("held paths parse");
        self.inner.put(&location, PutPayload::from_bytes(bytes)).await.map_err(self.err("write", path))?;
        Ok(Put::Written)
    }

    /// Deletes an object; one that does not exist is deleted already.
    pub async fn delete(&self, path: &str) -> Result<()> {
        let Some(location) = location(path) else { return Ok(()) };
        match self.inner.delete(&location).await {
            Ok(()) => Ok(()),
            Err(e) if absent(&e) => Ok(()),
            Err(e) => Err(self.err("delete", path)(e)),
        }
    }

    /// Uploads a local file unless the object already holds its bytes. Large files are streamed in
    /// parts, and compared chunk by chunk, so their size never matters to memory.
    pub async fn upload_file_if_changed(&self, path: &str, file: &Path) -> Result<Put> {
        let read_err = |source| StoreError::ReadLocal { file: file.to_path_buf(), source };
        let len = tokio::fs::metadata(file).await.map_err(read_err)?.len();
        if len <= MULTIPART_THRESHOLD {
            let bytes = tokio::fs::read(file).await.map_err(read_err)?;
            return self.put_if_changed(path, Bytes::from(bytes)).await;
        }
        if self.size(path).await? == Some(len) && self.same_content(path, file).await? {
            return Ok(Put::Unchanged);
        }
        self.holds(path)?;
        let location = ObjectPath::parse(path).expect("held paths parse");
        let upload = self.inner.put_multipart(&location).await.map_err(self.err("start writing", path))?;
        let mut writer = WriteMultipart::new_with_chunk_size(upload, CHUNK);
        let mut reader = tokio::fs::File::open(file).await.map_err(read_err)?;
        let mut buf = vec![0; CHUNK];
        loop {
            let n = reader.read(&mut buf).await.map_err(read_err)?;
            if n == 0 {
                break;
            }
            writer.wait_for_capacity(4).await.map_err(self.err("write", path))?;
            writer.write(&buf[..n]);
        }
        writer.finish().await.map_err(self.err("finish writing", path))?;
        Ok(Put::Written)
    }

    async fn same_content(&self, path: &str, file: &Path) -> Result<bool> {
        let read_err = |source| StoreError::ReadLocal { file: file.to_path_buf(), source };
        let location = ObjectPath::parse(path).expect("held paths parse");
        let result = self.inner.get(&location).await.map_err(self.err("read", path))?;
        let mut remote = result.into_stream();
        let mut local = tokio::fs::File::open(file).await.map_err(read_err)?;
        let mut buf = Vec::new();
        while let Some(chunk) = remote.try_next().await.map_err(self.err("read", path))? {
            buf.resize(chunk.len(), 0);
            local.read_exact(&mut buf).await.map_err(read_err)?;
            if buf[..] != chunk[..] {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Every object under a prefix (recursively), sorted by path.
    pub async fn list(&self, prefix: &str) -> Result<Vec<Entry>> {
        let Some(location) = location(prefix) else { return Ok(Vec::new()) };
        let stream = self.inner.list(Some(&location));
        let mut entries: Vec<Entry> = stream
            .map_ok(|meta| Entry { path: meta.location.to_string(), size: meta.size })
            .try_collect()
            .await
            .map_err(self.err("list", prefix))?;
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(entries)
    }

    /// The names of the "directories" directly under a prefix, sorted.
    pub async fn list_dirs(&self, prefix: &str) -> Result<Vec<String>> {
        let Some(location) = location(prefix) else { return Ok(Vec::new()) };
        let listing = self.inner.list_with_delimiter(Some(&location)).await.map_err(self.err("list", prefix))?;
        let mut dirs: Vec<String> =
            listing.common_prefixes.iter().filter_map(|p| p.filename().map(str::to_owned)).collect();
        dirs.sort();
        Ok(dirs)
    }

    fn err(&self, action: &'static str, path: &str) -> impl FnOnce(object_store::Error) -> StoreError {
        let url = self.url_of(path);
        move |source| StoreError::Object { action, url, source }
    }
}

/// The object a path names, as it is (no percent-encoding); `None` when no object can have that
/// name (an empty, `.` or `..` segment, a control character).
fn location(path: &str) -> Option<ObjectPath> {
    ObjectPath::parse(path).ok()
}

/// An error that means there is no such object: not found, or a path that cannot exist in this
/// store (a segment under a file, a name too long for the file system).
fn absent(error: &object_store::Error) -> bool {
    if matches!(error, object_store::Error::NotFound { .. }) {
        return true;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = source {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            return matches!(io.kind(), std::io::ErrorKind::NotADirectory | std::io::ErrorKind::InvalidFilename);
        }
        source = error.source();
    }
    false
}

fn bucket_names(prefix: &str) -> Names {
    Names::Bucket { prefix: if prefix.is_empty() { 0 } else { prefix.len() + 1 } }
}

/// `bucket[/prefix]` → (bucket, prefix); `None` for an empty bucket name.
fn split_bucket(rest: &str) -> Option<(&str, &str)> {
    let rest = rest.trim_end_matches('/');
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    (!bucket.is_empty()).then_some((bucket, prefix.trim_matches('/')))
}

fn gcs_builder(bucket: &str, options: &StoreOptions) -> GoogleCloudStorageBuilder {
    let Some(host) = &options.gcs_emulator_host else {
        return GoogleCloudStorageBuilder::from_env().with_bucket_name(bucket).with_client_options(client_options());
    };
    // An emulator takes no credentials, so none are read from the environment: a
    // GOOGLE_APPLICATION_CREDENTIALS naming an absent key file (deploy/ sets one) would fail the
    // store. object_store reaches an emulator through a key that names its URL.
    let base = if host.contains("://") { host.clone() } else { format!("http://{host}") };
    let key = serde_json::json!({
        "gcs_base_url": base.trim_end_matches('/'),
        "disable_oauth": true,
        "client_email": "",
        "private_key": "",
        "private_key_id": "",
    });
    GoogleCloudStorageBuilder::new()
        .with_bucket_name(bucket)
        .with_client_options(client_options())
        .with_service_account_key(key.to_string())
}

fn s3_builder(bucket: &str, options: &StoreOptions) -> AmazonS3Builder {
    let builder = AmazonS3Builder::from_env().with_bucket_name(bucket).with_client_options(client_options());
    match &options.s3_endpoint {
        Some(endpoint) => {
            let unsigned = std::env::var_os("AWS_ACCESS_KEY_ID").is_none();
            builder
                .with_endpoint(endpoint)
                .with_virtual_hosted_style_request(false)
                .with_skip_signature(unsigned)
                .with_region(std::env::var("AWS_REGION").unwrap_or_else(|_| "us-east-1".to_owned()))
        }
        None => builder,
    }
}

/// Content types for the files of the layout, so a browser shows logs and JSON as text.
fn client_options() -> ClientOptions {
    ClientOptions::new()
        .with_allow_http(true)
        .with_content_type_for_suffix("txt", "text/plain; charset=utf-8")
        .with_content_type_for_suffix("log", "text/plain; charset=utf-8")
        .with_content_type_for_suffix("json", "application/json")
        .with_content_type_for_suffix("xml", "application/xml")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_urls_name_a_bucket_and_prefix() {
        assert_eq!(split_bucket("bucket"), Some(("bucket", "")));
        assert_eq!(split_bucket("bucket/"), Some(("bucket", "")));
        assert_eq!(split_bucket("bucket/a/b/"), Some(("bucket", "a/b")));
        assert_eq!(split_bucket(""), None);
        assert_eq!(split_bucket("/x"), None);
    }

    #[test]
    fn unknown_schemes_and_empty_urls_are_refused_by_name() {
        for url in ["azure://x", "http://example.com/bucket", "", "gs://"] {
            let err = ResultStore::open(url).unwrap_err().to_string();
            assert!(err.contains(&format!("{url:?}")), "{err}");
            assert!(err.contains("gs://bucket"), "{err}");
        }
    }

    /// An S3 store at `endpoint` whose client does not retry: each failure shows at once.
    fn s3_without_retries(endpoint: &str) -> ResultStore {
        let options = StoreOptions { s3_endpoint: Some(endpoint.to_owned()), ..StoreOptions::default() };
        let retry = object_store::RetryConfig { max_retries: 0, ..Default::default() };
        let store = s3_builder("results", &options).with_retry(retry).build().unwrap();
        ResultStore::wrap(Arc::new(store), "", "s3://results".into(), bucket_names(""))
    }

    async fn write_error(store: &ResultStore) -> StoreError {
        store.put_if_changed("logs/j/1/started.json", Bytes::from_static(b"{}")).await.unwrap_err()
    }

    #[tokio::test]
    async fn a_store_that_is_down_or_unavailable_is_transient_and_one_that_refuses_is_not() {
        // A port just freed: nothing listens there.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let refused = write_error(&s3_without_retries(&format!("http://{closed}"))).await;
        assert!(refused.is_transient(), "{refused}");
        for (status, transient) in [(503, true), (500, true), (429, true), (400, false), (401, false), (403, false)] {
            let status = axum::http::StatusCode::from_u16(status).unwrap();
            let app = axum::Router::new().fallback(move || async move { (status, "<Error><Code>Nope</Code></Error>") });
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let address = listener.local_addr().unwrap();
            tokio::spawn(async move { axum::serve(listener, app).await });
            let error = write_error(&s3_without_retries(&format!("http://{address}"))).await;
            assert_eq!(error.is_transient(), transient, "{status}: {error}");
        }
        let unholdable =
            ResultStore::open_dir(tempfile::tempdir().unwrap().path()).unwrap().holds("a/b#1").unwrap_err();
        assert!(!unholdable.is_transient(), "{unholdable}");
        let unreadable = StoreError::ReadLocal { file: "/x".into(), source: std::io::ErrorKind::TimedOut.into() };
        assert!(!unreadable.is_transient(), "a local file is no network: {unreadable}");
    }

    #[tokio::test]
    async fn a_directory_store_writes_once_and_lists_what_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let store = ResultStore::open(&dir.path().join("bucket").display().to_string()).unwrap();
        assert!(store.url().starts_with("file:///"));
        let bytes = Bytes::from_static(b"{\"timestamp\":1}");
        assert_eq!(store.put_if_changed("logs/j/1/started.json", bytes.clone()).await.unwrap(), Put::Written);
        assert_eq!(store.put_if_changed("logs/j/1/started.json", bytes.clone()).await.unwrap(), Put::Unchanged);
        let other = Bytes::from_static(b"{\"timestamp\":2}");
        assert_eq!(store.put_if_changed("logs/j/1/started.json", other.clone()).await.unwrap(), Put::Written);
        assert_eq!(store.get("logs/j/1/started.json").await.unwrap(), Some(other.clone()));
        assert_eq!(store.get("logs/j/1/finished.json").await.unwrap(), None);
        store.put_if_changed("logs/j/2/started.json", bytes).await.unwrap();
        assert_eq!(store.list_dirs("logs/j").await.unwrap(), ["1", "2"]);
        let listed: Vec<String> = store.list("logs").await.unwrap().into_iter().map(|e| e.path).collect();
        assert_eq!(listed, ["logs/j/1/started.json", "logs/j/2/started.json"]);
        let tail = store.get_tail("logs/j/1/started.json", 3).await.unwrap();
        assert_eq!(tail, Some((Bytes::from_static(b":2}"), 15)));
        assert_eq!(store.get_tail("logs/j/1/started.json", 100).await.unwrap().unwrap().0, other);
        assert_eq!(store.get_tail("logs/j/1/none.txt", 3).await.unwrap(), None);
        store.delete("logs/j/2/started.json").await.unwrap();
        store.delete("logs/j/2/started.json").await.unwrap();
        let listed: Vec<String> = store.list("logs").await.unwrap().into_iter().map(|e| e.path).collect();
        assert_eq!(listed, ["logs/j/1/started.json"]);
    }

    #[tokio::test]
    async fn names_are_kept_as_they_are_and_what_a_directory_cannot_hold_is_refused_or_absent() {
        let dir = tempfile::tempdir().unwrap();
        let store = ResultStore::open_dir(&dir.path().join("bucket")).unwrap();
        // 80 CJK characters: 240 bytes of UTF-8, 720 once percent-encoded.
        let cjk = format!("logs/j/1/artifacts/{}.txt", "日".repeat(80));
        store.put_if_changed(&cjk, Bytes::from_static(b"kept")).await.unwrap();
        assert!(dir.path().join("bucket").join(&cjk).is_file(), "stored under its own name");
        assert_eq!(store.get(&cjk).await.unwrap().as_deref(), Some(&b"kept"[..]));
        let listed: Vec<String> = store.list("logs/j/1").await.unwrap().into_iter().map(|e| e.path).collect();
        assert_eq!(listed, std::slice::from_ref(&cjk));
        let percent = "logs/j/1/artifacts/100% #done [x].txt";
        store.put_if_changed(percent, Bytes::from_static(b"%")).await.unwrap();
        assert!(dir.path().join("bucket").join(percent).is_file());
        assert_eq!(store.list("logs/j/1").await.unwrap().len(), 2);

        let too_long = format!("logs/j/1/artifacts/{}.txt", "日".repeat(84));
        let err = store.put_if_changed(&too_long, Bytes::new()).await.unwrap_err().to_string();
        assert!(err.contains("at most 250"), "{err}");
        assert!(store.holds("logs/j/1/artifacts/junit#1").is_err());
        assert!(store.holds("logs/j/1/artifacts/junit#1.xml").is_ok());
        // A path that cannot exist reads as absent, not as a store failure.
        store.put_if_changed("logs/j/1/build-log.txt", Bytes::from_static(b"log")).await.unwrap();
        assert_eq!(store.get("logs/j/1/build-log.txt/sub").await.unwrap(), None);
        assert_eq!(store.size("logs/j/1/build-log.txt/sub").await.unwrap(), None);
        assert_eq!(store.get(&format!("logs/j/1/{}", "x".repeat(300))).await.unwrap(), None);
        assert_eq!(store.get_tail("logs/j/1/build-log.txt/sub", 10).await.unwrap(), None);
    }

    #[test]
    fn a_bucket_holds_keys_of_1024_bytes_with_its_prefix() {
        let names = bucket_names("some/prefix");
        let store = ResultStore {
            inner: Arc::new(object_store::memory::InMemory::new()),
            base: "gs://b/some/prefix".into(),
            names,
        };
        assert!(store.holds(&format!("logs/{}", "a".repeat(1024 - 12 - 5))).is_ok());
        let err = store.holds(&format!("logs/{}", "a".repeat(1024 - 12 - 4))).unwrap_err().to_string();
        assert!(err.contains("at most 1024"), "{err}");
        assert!(store.holds(&format!("logs/{}", "a".repeat(300))).is_ok(), "no per-name limit in a bucket");
    }

    #[tokio::test]
    async fn large_files_stream_in_parts_and_are_compared_without_rewriting() {
        let dir = tempfile::tempdir().unwrap();
        let store = ResultStore::open_dir(&dir.path().join("bucket")).unwrap();
        let file = dir.path().join("big.log");
        let content: Vec<u8> = (0..(MULTIPART_THRESHOLD as usize + 3 * CHUNK / 2)).map(|i| (i % 251) as u8).collect();
        std::fs::write(&file, &content).unwrap();
        assert_eq!(store.upload_file_if_changed("a/big.log", &file).await.unwrap(), Put::Written);
        assert_eq!(store.get("a/big.log").await.unwrap().unwrap().as_ref(), &content[..]);
        assert_eq!(store.upload_file_if_changed("a/big.log", &file).await.unwrap(), Put::Unchanged);
        // Same size, one byte different in the last chunk: written again.
        let mut changed = content.clone();
        *changed.last_mut().unwrap() ^= 1;
        std::fs::write(&file, &changed).unwrap();
        assert_eq!(store.upload_file_if_changed("a/big.log", &file).await.unwrap(), Put::Written);
        assert_eq!(store.get("a/big.log").await.unwrap().unwrap().as_ref(), &changed[..]);
    }
}

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
            return Ok(Self::wrap(Arc::new(store), prefix, format!("gs://{}", rest.trim_end_matches('/'))));
        }
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, prefix) = split_bucket(rest).ok_or_else(bad)?;
            let store = s3_builder(bucket, options).build().map_err(open_err)?;
            return Ok(Self::wrap(Arc::new(store), prefix, format!("s3://{}", rest.trim_end_matches('/'))));
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
        Ok(Self::wrap(Arc::new(store), "", base))
    }

    fn wrap(store: Arc<dyn ObjectStore>, prefix: &str, base: String) -> Self {
        let inner: Arc<dyn ObjectStore> =
            if prefix.is_empty() { store } else { Arc::new(PrefixStore::new(store, ObjectPath::from(prefix))) };
        ResultStore { inner, base: base.trim_end_matches('/').to_owned() }
    }

    /// The URL the store was opened with (normalised: absolute for a directory, no trailing slash).
    pub fn url(&self) -> &str {
        &self.base
    }

    /// The URL of an object or directory under the store.
    pub fn url_of(&self, path: &str) -> String {
        format!("{}/{}", self.base, path.trim_start_matches('/'))
    }

    /// Reads an object; `None` when it does not exist.
    pub async fn get(&self, path: &str) -> Result<Option<Bytes>> {
        match self.inner.get(&ObjectPath::from(path)).await {
            Ok(result) => result.bytes().await.map(Some).map_err(self.err("read", path)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
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
        match self.inner.get_range(&ObjectPath::from(path), range).await {
            Ok(bytes) => Ok(Some((bytes, size))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err("read", path)(e)),
        }
    }

    /// The size of an object; `None` when it does not exist.
    pub async fn size(&self, path: &str) -> Result<Option<u64>> {
        match self.inner.head(&ObjectPath::from(path)).await {
            Ok(meta) => Ok(Some(meta.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.err("stat", path)(e)),
        }
    }

    /// Writes `bytes` unless the object already holds exactly them.
    pub async fn put_if_changed(&self, path: &str, bytes: Bytes) -> Result<Put> {
        if self.size(path).await? == Some(bytes.len() as u64) && self.get(path).await?.as_ref() == Some(&bytes) {
            return Ok(Put::Unchanged);
        }
        let location = ObjectPath::from(path);
        self.inner.put(&location, PutPayload::from_bytes(bytes)).await.map_err(self.err("write", path))?;
        Ok(Put::Written)
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
        let upload =
            self.inner.put_multipart(&ObjectPath::from(path)).await.map_err(self.err("start writing", path))?;
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
        let result = self.inner.get(&ObjectPath::from(path)).await.map_err(self.err("read", path))?;
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
        let location = ObjectPath::from(prefix);
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
        let location = ObjectPath::from(prefix);
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

/// `bucket[/prefix]` → (bucket, prefix); `None` for an empty bucket name.
fn split_bucket(rest: &str) -> Option<(&str, &str)> {
    let rest = rest.trim_end_matches('/');
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    (!bucket.is_empty()).then_some((bucket, prefix.trim_matches('/')))
}

fn gcs_builder(bucket: &str, options: &StoreOptions) -> GoogleCloudStorageBuilder {
    let builder = GoogleCloudStorageBuilder::from_env().with_bucket_name(bucket).with_client_options(client_options());
    match &options.gcs_emulator_host {
        // An emulator takes no credentials; object_store reaches one through a key that names its URL.
        Some(host) => {
            let base = if host.contains("://") { host.clone() } else { format!("http://{host}") };
            let key = serde_json::json!({
                "gcs_base_url": base.trim_end_matches('/'),
                "disable_oauth": true,
                "client_email": "",
                "private_key": "",
                "private_key_id": "",
            });
            builder.with_service_account_key(key.to_string())
        }
        None => builder,
    }
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

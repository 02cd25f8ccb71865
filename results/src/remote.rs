//! `harness publish --remote`: a local build directory posted to a central `harness serve`
//! (`POST /api/v1/builds`, the `upload` crate's format) instead of written to the store directly.
//!
//! A 5xx, a 429 or a failed connection is retried with exponential backoff and jitter, each retry
//! on the next of the given servers (replicas behind no load balancer, or a second region). The
//! server's answer makes retrying safe: the same build posted twice is indexed once. Any other
//! 4xx is final and reported with the server's message.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use bytes::Bytes;
use reqwest::StatusCode;
use reqwest::multipart::{Form, Part};
use tracing::warn;

use super::layout::BuildLocation;
use super::publish::{PublishError, check_started, collect_files};

#[derive(Debug, Clone)]
pub struct RemoteOptions {
    /// Base URLs of `harness serve` replicas (`https://harness.example.com`), tried in turn.
    pub remotes: Vec<String>,
    pub token: String,
    /// Attempts in all, the first included.
    pub attempts: usize,
    pub min_delay: Duration,
    pub max_delay: Duration,
    /// For one attempt, the upload included.
    pub timeout: Duration,
}

impl RemoteOptions {
    pub fn new(remotes: Vec<String>, token: String) -> Self {
        RemoteOptions {
            remotes,
            token,
            attempts: 8,
            min_delay: Duration::from_millis(200),
            max_delay: Duration::from_secs(10),
            timeout: Duration::from_secs(300),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error(transparent)]
    Local(#[from] PublishError),
    #[error("{file}: cannot read: {source}")]
    ReadFile { file: PathBuf, source: std::io::Error },
    #[error("{url} refused the build ({status}): {message}")]
    Refused { url: String, status: StatusCode, message: String },
    #[error("{url} is unavailable ({status}): {message}")]
    Unavailable { url: String, status: StatusCode, message: String },
    #[error("cannot reach {url}: {source}")]
    Unreachable { url: String, source: reqwest::Error },
    #[error("no --remote given")]
    NoRemote,
}

impl RemoteError {
    fn retryable(&self) -> bool {
        matches!(self, RemoteError::Unavailable { .. } | RemoteError::Unreachable { .. })
    }
}

/// What the server answered, and how many attempts it took.
#[derive(Debug, Clone)]
pub struct RemotePublished {
    pub url: String,
    pub status: StatusCode,
    pub body: serde_json::Value,
    pub attempts: usize,
}

/// Posts the build directory `dir` as `location`'s build.
pub async fn publish_remote(
    client: &reqwest::Client,
    dir: &Path,
    location: &BuildLocation,
    options: &RemoteOptions,
) -> Result<RemotePublished, RemoteError> {
    check_started(dir)?;
    let files = read_files(dir).await?;
    post_files(client, &files, location, options).await
}

/// Posts a build held in memory: `(path in the build directory, content)` pairs.
pub async fn post_files(
    client: &reqwest::Client,
    files: &[(String, Bytes)],
    location: &BuildLocation,
    options: &RemoteOptions,
) -> Result<RemotePublished, RemoteError> {
    if options.remotes.is_empty() {
        return Err(RemoteError::NoRemote);
    }
    let attempt = AtomicUsize::new(0);
    let backoff = ExponentialBuilder::default()
        .with_min_delay(options.min_delay)
        .with_max_delay(options.max_delay)
        .with_max_times(options.attempts.saturating_sub(1))
        .with_jitter();
    let post = || async {
        let n = attempt.fetch_add(1, Ordering::SeqCst);
        let base = options.remotes[n % options.remotes.len()].trim_end_matches('/');
        let url = format!("{base}{}", upload::PATH);
        post_once(client, &url, location, files, options).await.map(|(status, body)| RemotePublished {
            url: url.clone(),
            status,
            body,
            attempts: n + 1,
        })
    };
    post.retry(backoff)
        .when(RemoteError::retryable)
        .notify(|error, delay| warn!("{error}; retrying in {}", humantime::format_duration(round_ms(delay))))
        .await
}

async fn post_once(
    client: &reqwest::Client,
    url: &str,
    location: &BuildLocation,
    files: &[(String, Bytes)],
    options: &RemoteOptions,
) -> Result<(StatusCode, serde_json::Value), RemoteError> {
    let response = client
        .post(url)
        .bearer_auth(&options.token)
        .multipart(form(location, files))
        .timeout(options.timeout)
        .send()
        .await
        .map_err(|source| RemoteError::Unreachable { url: url.to_owned(), source })?;
    let status = response.status();
    let text = response.text().await.map_err(|source| RemoteError::Unreachable { url: url.to_owned(), source })?;
    let body: serde_json::Value = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
    if status.is_success() {
        return Ok((status, body));
    }
    let message = body["error"]["message"].as_str().map_or_else(|| body.to_string(), str::to_owned);
    let url = url.to_owned();
    if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
        Err(RemoteError::Unavailable { url, status, message })
    } else {
        Err(RemoteError::Refused { url, status, message })
    }
}

/// The request body: the location's fields, then every file, named by its path in the build.
fn form(location: &BuildLocation, files: &[(String, Bytes)]) -> Form {
    let mut form =
        Form::new().text(upload::JOB, location.job().to_owned()).text(upload::BUILD, location.build().to_owned());
    if let BuildLocation::Presubmit { org_repo, pr, .. } = location {
        form = form.text(upload::PULL, pr.to_string()).text(upload::ORG_REPO, org_repo.clone());
    }
    for (path, bytes) in files {
        form = form.part(upload::FILE, Part::stream(bytes.clone()).file_name(path.clone()));
    }
    form
}

/// Every file of the directory with its `/`-separated path.
async fn read_files(dir: &Path) -> Result<Vec<(String, Bytes)>, RemoteError> {
    let mut relative = Vec::new();
    collect_files(dir, Path::new(""), &mut relative)?;
    let mut files = Vec::with_capacity(relative.len());
    for path in relative {
        let file = dir.join(&path);
        let bytes = tokio::fs::read(&file).await.map_err(|source| RemoteError::ReadFile { file, source })?;
        files.push((super::layout::object_path(&path), Bytes::from(bytes)));
    }
    Ok(files)
}

fn round_ms(delay: Duration) -> Duration {
    Duration::from_millis(delay.as_millis() as u64)
}

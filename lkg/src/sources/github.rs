//! GitHub's REST API v3 as a history source, over reqwest (rustls with ring). Not octocrab: its
//! typed API was never used here (answers are cached and decoded as raw JSON, retries and rate limits
//! are ours), and it was the slowest crate of a cold build, on the path to every crate after `lkg`.
//!
//! Requests: `GET /repos/{owner}/{repo}/commits?sha=&per_page=&page=` (pages followed through the
//! `Link` header), `GET /repos/{owner}/{repo}/compare/{base}...{head}` and
//! `GET /repos/{owner}/{repo}/commits/{ref}` (a tag, branch or commit; GitHub peels annotated
//! tags to their commit in that one request) and `GET /repos/{owner}/{repo}/tags` (every tag with
//! its commit, so queries can name any tag).
//!
//! Every answer is cached with its ETag in a [`HistoryCache`]: the next request for it carries
//! `If-None-Match`, and a `304 Not Modified` serves the cached body (conditional requests that get a
//! 304 do not count against the rate limit). A used-up rate limit (403 or 429 with
//! `x-ratelimit-remaining: 0`, or a `retry-after`) is waited out when it resets soon enough, and is
//! a clear error naming the reset time otherwise; server errors (5xx) and network failures are
//! retried with exponential backoff, then are a clear error. While GitHub fails in any of these
//! ways, a cached answer is served instead, with a warning.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use backon::{ExponentialBuilder, Retryable};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde::Deserialize;

use super::{CachedResponse, Commit, HistoryCache, HistorySource, MemoryCache, SourceError, Walk};

/// How to reach GitHub and how patient to be with it.
#[derive(Debug, Clone)]
pub struct GitHubConfig {
    /// `https://api.github.com`, a GitHub Enterprise `https://HOST/api/v3`, or a test server.
    pub base_url: String,
    /// A token raises the rate limit from 60 to 5,000 requests an hour.
    pub token: Option<String>,
    /// Commits per page when listing (GitHub allows up to 100).
    pub per_page: u32,
    /// Retries of a server error or network failure, after the first attempt.
    pub max_retries: usize,
    pub min_backoff: Duration,
    pub max_backoff: Duration,
    /// A used-up rate limit that resets within this is waited out; a later reset is an error.
    pub max_rate_limit_wait: Duration,
    /// Pages fetched at most by one listing, so a `until` commit that is not on the branch cannot
    /// walk the whole repository.
    pub max_pages: usize,
    pub timeout: Duration,
}

impl Default for GitHubConfig {
    fn default() -> Self {
        Self {
            base_url: "https://api.github.com".into(),
            token: None,
            per_page: 100,
            max_retries: 4,
            min_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            max_rate_limit_wait: Duration::from_secs(60),
            max_pages: 100,
            timeout: Duration::from_secs(30),
        }
    }
}

/// One repository on GitHub.
pub struct GitHub {
    client: reqwest::Client,
    owner: String,
    repo: String,
    config: GitHubConfig,
    cache: Arc<dyn HistoryCache>,
    warnings: Mutex<Vec<String>>,
}

impl std::fmt::Debug for GitHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHub").field("repo", &self.describe()).field("base_url", &self.config.base_url).finish()
    }
}

/// An answer, fresh or from the cache.
struct Page {
    body: String,
    next: Option<String>,
}

/// One attempt's outcome.
enum Fetched {
    Fresh { etag: Option<String>, next: Option<String>, body: String },
    NotModified,
}

#[derive(Deserialize)]
struct ApiCommit {
    sha: String,
    commit: ApiCommitDetail,
    #[serde(default)]
    parents: Vec<ApiParent>,
    html_url: Option<String>,
}

#[derive(Deserialize)]
struct ApiCommitDetail {
    message: String,
    author: Option<ApiSignature>,
}

#[derive(Deserialize)]
struct ApiSignature {
    date: Option<String>,
}

#[derive(Deserialize)]
struct ApiParent {
    sha: String,
}

#[derive(Deserialize)]
struct ApiCompare {
    commits: Vec<ApiCommit>,
}

impl From<ApiCommit> for Commit {
    fn from(commit: ApiCommit) -> Self {
        Commit {
            sha: commit.sha,
            message: commit.commit.message,
            author_date: commit.commit.author.and_then(|author| author.date),
            parents: commit.parents.into_iter().map(|parent| parent.sha).collect(),
            url: commit.html_url,
        }
    }
}

impl GitHub {
    /// `owner/repo` on the configured GitHub, with an in-memory cache.
    pub fn new(owner: &str, repo: &str, config: GitHubConfig) -> Result<Self, SourceError> {
        Self::with_cache(owner, repo, config, Arc::new(MemoryCache::new()))
    }

    pub fn with_cache(
        owner: &str,
        repo: &str,
        mut config: GitHubConfig,
        cache: Arc<dyn HistoryCache>,
    ) -> Result<Self, SourceError> {
        config.base_url = config.base_url.trim_end_matches('/').to_owned();
        let client_error = |message: String| SourceError::Client { base_url: config.base_url.clone(), message };
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/vnd.github+json"));
        headers.insert("x-github-api-version", HeaderValue::from_static("2022-11-28"));
        if let Some(token) = &config.token {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| client_error("the GitHub token (GITHUB_TOKEN) has characters an HTTP header cannot carry, such as a line break: set it to the token alone".into()))?;
            value.set_sensitive(true);
            headers.insert(header::AUTHORIZATION, value);
        }
        // GitHub refuses requests without a User-Agent.
        let client = reqwest::Client::builder()
            .user_agent(concat!("cloud-provider-harness/", env!("CARGO_PKG_VERSION")))
            .default_headers(headers)
            .connect_timeout(config.timeout)
            .read_timeout(config.timeout)
            .build()
            .map_err(|error| client_error(error.to_string()))?;
        Ok(Self { client, owner: owner.into(), repo: repo.into(), config, cache, warnings: Mutex::new(Vec::new()) })
    }

    /// Warnings about cached answers served while GitHub failed, oldest first; taking them clears
    /// them.
    pub fn take_warnings(&self) -> Vec<String> {
        std::mem::take(&mut *self.warnings.lock().expect("warnings lock"))
    }

    fn repo_url(&self, rest: &str) -> String {
        format!("{}/repos/{}/{}/{rest}", self.config.base_url, self.owner, self.repo)
    }

    /// GETs `url`: conditionally when cached, retried, rate limits waited out, and from the cache
    /// while GitHub is unavailable.
    async fn get(&self, url: &str) -> Result<Page, SourceError> {
        let cached = self.cache.get(url).await;
        let etag = cached.as_ref().and_then(|cached| cached.etag.clone());
        match self.fetch(url, etag.as_deref()).await {
            Ok(Fetched::Fresh { etag, next, body }) => {
                let response = CachedResponse { etag, next: next.clone(), body: body.clone(), fetched_at: now() };
                self.cache.put(url, response).await;
                Ok(Page { body, next })
            }
            Ok(Fetched::NotModified) => match cached {
                Some(mut cached) => {
                    cached.fetched_at = now();
                    self.cache.put(url, cached.clone()).await;
                    Ok(Page { body: cached.body, next: cached.next })
                }
                None => Err(SourceError::Refused {
                    url: url.into(),
                    status: 304,
                    message: "Not Modified to a request that was not conditional".into(),
                }),
            },
            Err(error) if error.is_unavailable() => match cached {
                Some(cached) => {
                    let warning = format!(
                        "serving the copy of {url} cached at unix time {} because GitHub is unavailable: {error}",
                        cached.fetched_at
                    );
                    tracing::warn!("{warning}");
                    self.warnings.lock().expect("warnings lock").push(warning);
                    Ok(Page { body: cached.body, next: cached.next })
                }
                None => Err(error),
            },
            Err(error) => Err(error),
        }
    }

    async fn fetch(&self, url: &str, etag: Option<&str>) -> Result<Fetched, SourceError> {
        let backoff = ExponentialBuilder::default()
            .with_min_delay(self.config.min_backoff)
            .with_max_delay(self.config.max_backoff)
            .with_max_times(self.config.max_retries)
            .with_jitter();
        let mut rate_limit_waits = 0;
        loop {
            let attempt = || self.fetch_once(url, etag);
            let result = attempt
                .retry(backoff)
                .sleep(tokio::time::sleep)
                .when(SourceError::is_transient)
                .notify(|error, delay| tracing::debug!("retrying in {delay:?}: {error}"))
                .await;
            match result {
                Err(SourceError::RateLimited { reset_epoch, .. }) if rate_limit_waits < 2 => {
                    let wait = Duration::from_secs(reset_epoch.saturating_sub(now())) + Duration::from_millis(250);
                    if wait > self.config.max_rate_limit_wait {
                        return result;
                    }
                    tracing::warn!("GitHub's rate limit is used up; waiting {wait:?} for it to reset");
                    rate_limit_waits += 1;
                    tokio::time::sleep(wait).await;
                }
                Err(SourceError::Server { url, status, .. }) => {
                    return Err(SourceError::Server { url, status, attempts: self.config.max_retries + 1 });
                }
                result => return result,
            }
        }
    }

    async fn fetch_once(&self, url: &str, etag: Option<&str>) -> Result<Fetched, SourceError> {
        let mut request = self.client.get(url);
        if let Some(etag) = etag.and_then(|etag| HeaderValue::from_str(etag).ok()) {
            request = request.header(header::IF_NONE_MATCH, etag);
        }
        let transport =
            |error: reqwest::Error| SourceError::Transport { url: url.into(), message: error_chain(&error) };
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let headers = response.headers().clone();
        let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok()).map(str::to_owned);
        if status == StatusCode::NOT_MODIFIED {
            return Ok(Fetched::NotModified);
        }
        let body = response.text().await.map_err(transport)?;
        if status.is_success() {
            let next = text(header::LINK.as_str()).and_then(|link| next_link(&link));
            return Ok(Fetched::Fresh { etag: text(header::ETAG.as_str()), next, body });
        }
        let number = |name: &str| text(name).and_then(|value| value.trim().parse::<u64>().ok());
        let rate_limited = number("x-ratelimit-remaining") == Some(0) || text("retry-after").is_some();
        if (status == StatusCode::FORBIDDEN || status == StatusCode::TOO_MANY_REQUESTS) && rate_limited {
            let reset_epoch = match number("retry-after") {
                Some(seconds) => now() + seconds,
                None => number("x-ratelimit-reset").unwrap_or_else(|| now() + 60),
            };
            return Err(SourceError::RateLimited { url: url.into(), reset_epoch, reset_at: utc(reset_epoch) });
        }
        if status.is_server_error() {
            return Err(SourceError::Server { url: url.into(), status: status.as_u16(), attempts: 1 });
        }
        if status == StatusCode::NOT_FOUND {
            return Err(SourceError::NotFound { url: url.into() });
        }
        let message = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|json| json.get("message").and_then(|m| m.as_str()).map(str::to_owned))
            .unwrap_or(body);
        Err(SourceError::Refused { url: url.into(), status: status.as_u16(), message })
    }

    fn decode<T: for<'de> Deserialize<'de>>(url: &str, body: &str) -> Result<T, SourceError> {
        serde_json::from_str(body).map_err(|error| SourceError::Decode { url: url.into(), message: error.to_string() })
    }
}

#[async_trait]
impl HistorySource for GitHub {
    fn describe(&self) -> String {
        format!("{}/{}", self.owner, self.repo)
    }

    /// GitHub lists every commit reachable from the branch, newest first by date; the first-parent
    /// chain is walked through it from the branch's head, fetching pages as the chain needs them.
    async fn first_parent_commits(&self, branch: &str, walk: &Walk) -> Result<Vec<Commit>, SourceError> {
        let mut listed: std::collections::HashMap<String, Commit> = std::collections::HashMap::new();
        let mut url =
            Some(self.repo_url(&format!("commits?sha={}&per_page={}&page=1", encode(branch), self.config.per_page)));
        let mut pages = 0;
        let mut chain: Vec<Commit> = Vec::new();
        let mut wanted: Option<String> = None;
        loop {
            // Follow the chain as far as the pages fetched so far reach.
            while chain.len() < walk.limit {
                let Some(sha) = wanted.clone() else { break };
                if walk.until.as_deref() == Some(sha.as_str()) {
                    return Ok(chain);
                }
                let Some(commit) = listed.remove(&sha) else { break };
                wanted = commit.parents.first().cloned();
                chain.push(commit);
            }
            if chain.len() >= walk.limit || (!chain.is_empty() && wanted.is_none()) {
                return Ok(chain);
            }
            let Some(page_url) = url.take() else {
                // The listing ended before the chain did: what was listed is what there is.
                return Ok(chain);
            };
            pages += 1;
            if pages > self.config.max_pages {
                return Ok(chain);
            }
            let page = self.get(&page_url).await?;
            let commits: Vec<ApiCommit> = Self::decode(&page_url, &page.body)?;
            if commits.is_empty() && chain.is_empty() {
                return Err(SourceError::UnknownRevision { repo: self.describe(), revision: branch.into() });
            }
            if wanted.is_none() && chain.is_empty() {
                wanted = commits.first().map(|commit| commit.sha.clone());
            }
            listed.extend(commits.into_iter().map(|commit| (commit.sha.clone(), Commit::from(commit))));
            url = page.next;
        }
    }

    /// GitHub's compare lists the commits oldest first, up to 250 per page; they are returned
    /// newest first, like `git rev-list base..head`.
    async fn compare(&self, base: &str, head: &str) -> Result<Vec<Commit>, SourceError> {
        let mut url = Some(self.repo_url(&format!("compare/{}...{}", encode(base), encode(head))));
        let mut commits = Vec::new();
        while let Some(page_url) = url.take() {
            let page = self.get(&page_url).await?;
            let compare: ApiCompare = Self::decode(&page_url, &page.body)?;
            commits.extend(compare.commits.into_iter().map(Commit::from));
            url = page.next;
        }
        commits.reverse();
        Ok(commits)
    }

    async fn resolve(&self, revision: &str) -> Result<String, SourceError> {
        let url = self.repo_url(&format!("commits/{}", encode(revision)));
        match self.get(&url).await {
            Ok(page) => Ok(Self::decode::<ApiCommit>(&url, &page.body)?.sha),
            // 422 "No commit found for SHA: ..." is GitHub's answer to an unknown ref.
            Err(SourceError::NotFound { .. } | SourceError::Refused { status: 422, .. }) => {
                Err(SourceError::UnknownRevision { repo: self.describe(), revision: revision.into() })
            }
            Err(error) => Err(error),
        }
    }

    /// `GET /repos/{owner}/{repo}/tags`, every page up to `max_pages` (each tag with its commit).
    async fn refs(&self) -> Result<Vec<(String, String)>, SourceError> {
        let mut url = Some(self.repo_url(&format!("tags?per_page={}", self.config.per_page)));
        let (mut refs, mut pages) = (Vec::new(), 0);
        while let Some(page_url) = url.take() {
            pages += 1;
            if pages > self.config.max_pages {
                break;
            }
            let page = self.get(&page_url).await?;
            let tags: Vec<ApiTag> = Self::decode(&page_url, &page.body)?;
            refs.extend(tags.into_iter().map(|tag| (tag.name, tag.commit.sha)));
            url = page.next;
        }
        Ok(refs)
    }
}

#[derive(Deserialize)]
struct ApiTag {
    name: String,
    commit: ApiParent,
}

/// An error with its causes: reqwest's own message alone says "error sending request".
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message = format!("{message}: {cause}");
        source = cause.source();
    }
    message
}

/// The `rel="next"` URL of a `Link` header.
fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        let is_next = params.split(';').any(|param| matches!(param.trim(), "rel=\"next\"" | "rel=next"));
        is_next.then(|| target.trim().trim_start_matches('<').trim_end_matches('>').to_owned())
    })
}

/// Percent-encodes a ref for a path segment or query value (slashes in branch names stay).
fn encode(revision: &str) -> String {
    let mut encoded = String::with_capacity(revision.len());
    for byte in revision.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => encoded.push(byte as char),
            _ => encoded.push_str(&format!("%{byte:02X}")),
        }
    }
    encoded
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_secs())
}

/// Unix seconds as `YYYY-MM-DDTHH:MM:SSZ`.
fn utc(epoch: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + std::time::Duration::from_secs(epoch)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_link_is_found_among_others() {
        let link = r#"<https://api.github.com/repositories/20580498/commits?sha=release-1.30&per_page=2&page=2>; rel="next", <https://api.github.com/repositories/20580498/commits?sha=release-1.30&per_page=2&page=3>; rel="last""#;
        assert_eq!(
            next_link(link).as_deref(),
            Some("https://api.github.com/repositories/20580498/commits?sha=release-1.30&per_page=2&page=2")
        );
        assert_eq!(next_link(r#"<https://x/?page=1>; rel="prev", <https://x/?page=1>; rel="first""#), None);
    }

    #[test]
    fn unix_time_is_written_in_utc() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(1_713_374_823), "2024-04-17T17:27:03Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn refs_are_encoded_for_urls() {
        assert_eq!(encode("release-1.30"), "release-1.30");
        assert_eq!(encode("feature/a b"), "feature/a%20b");
        assert_eq!(encode("v1.30.0^{}"), "v1.30.0%5E%7B%7D");
    }
}

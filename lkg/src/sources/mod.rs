//! Commit history sources: where the first-parent histories the algorithm orders runs by come
//! from. One async trait, [`HistorySource`], with two implementations: [`LocalGit`] (a local
//! repository, through the `git` command) and [`GitHub`] (the REST API v3, through octocrab, with
//! conditional requests, rate-limit handling, retries and a pluggable [`HistoryCache`]).
//!
//! Behind the `sources` cargo feature (on by default); the algorithm itself does no I/O.

mod cache;
mod error;
mod github;
mod local_git;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use cache::{CachedResponse, HistoryCache, MemoryCache};
pub use error::SourceError;
pub use github::{GitHub, GitHubConfig};
pub use local_git::LocalGit;

use crate::{History, LkgError};

/// One commit as a history source reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commit {
    pub sha: String,
    /// The full commit message.
    pub message: String,
    /// The author date as the source gives it (ISO 8601), when it gives one.
    pub author_date: Option<String>,
    /// Parent commit ids, the first parent first.
    pub parents: Vec<String>,
    /// A page for people (GitHub's `html_url`); `None` for a local repository.
    pub url: Option<String>,
}

impl Commit {
    /// The first line of the message.
    pub fn summary(&self) -> &str {
        self.message.lines().next().unwrap_or_default()
    }
}

/// How far back [`HistorySource::first_parent_commits`] goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walk {
    /// At most this many commits.
    pub limit: usize,
    /// Stop before this commit id (one the caller already has); it is not returned.
    pub until: Option<String>,
}

impl Walk {
    pub fn limit(limit: usize) -> Self {
        Self { limit, until: None }
    }

    pub fn until(limit: usize, known: impl Into<String>) -> Self {
        Self { limit, until: Some(known.into()) }
    }
}

/// Where commit histories come from.
#[async_trait]
pub trait HistorySource: Send + Sync {
    /// A name for messages: the repository path or `owner/repo`.
    fn describe(&self) -> String;

    /// The first-parent commits of `branch`, newest first (as `git rev-list --first-parent`).
    async fn first_parent_commits(&self, branch: &str, walk: &Walk) -> Result<Vec<Commit>, SourceError>;

    /// The commits reachable from `head` and not from `base`, newest first (`git rev-list
    /// base..head`).
    async fn compare(&self, base: &str, head: &str) -> Result<Vec<Commit>, SourceError>;

    /// The commit id a tag, branch or (possibly abbreviated) commit id names.
    async fn resolve(&self, revision: &str) -> Result<String, SourceError>;

    /// Tags and branches with the commit each names (annotated tags peeled), so a history can
    /// answer for them without asking the source again. A source that cannot list them cheaply
    /// returns none, and only the revisions runs name are resolved.
    async fn refs(&self) -> Result<Vec<(String, String)>, SourceError> {
        Ok(Vec::new())
    }

    /// Whether `ancestor` is reachable from `head` (`git merge-base --is-ancestor`).
    async fn is_ancestor(&self, ancestor: &str, head: &str) -> Result<bool, SourceError> {
        Ok(self.compare(head, ancestor).await?.is_empty())
    }
}

/// The algorithm's [`History`] of first-parent commits listed newest first.
pub fn history_of(newest_first: &[Commit]) -> Result<History, LkgError> {
    History::new(newest_first.iter().map(|commit| commit.sha.clone()))
}

/// The first-parent history of `branch` as the algorithm takes it, with `tags` (release tags such as
/// `v1.36.3`) resolved through the source and attached as aliases of their commits.
pub async fn fetch_history(
    source: &dyn HistorySource,
    branch: &str,
    walk: &Walk,
    tags: &[&str],
) -> Result<History, SourceError> {
    let invalid = |error: LkgError| SourceError::History { repo: source.describe(), message: error.to_string() };
    let commits = source.first_parent_commits(branch, walk).await?;
    let mut resolved = Vec::with_capacity(tags.len());
    for tag in tags {
        resolved.push((tag.to_string(), source.resolve(tag).await?));
    }
    history_of(&commits).and_then(|history| history.with_tags(resolved)).map_err(invalid)
}

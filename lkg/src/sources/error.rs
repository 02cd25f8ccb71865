//! What fetching a history can fail with; every message names the input and what to do.

use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    #[error("could not run `git` for {repo}: {message}; install git or put it on PATH")]
    GitMissing { repo: PathBuf, message: String },
    #[error("`git {args}` failed in {repo}: {stderr}; check that it is a git repository and the revisions exist")]
    Git { repo: PathBuf, args: String, stderr: String },
    #[error("{revision:?} is not a commit, branch or tag of {repo}; fetch it or check its spelling")]
    UnknownRevision { repo: String, revision: String },
    #[error("GitHub has no {url} (404 Not Found): check the owner, repository, branch and tag names")]
    NotFound { url: String },
    #[error(
        "GitHub's rate limit is used up for {url}; it resets at {reset_at} (unix time {reset_epoch}): wait until then, or \
         configure a token for a higher limit"
    )]
    RateLimited { url: String, reset_epoch: u64, reset_at: String },
    #[error("GitHub answered {status} to {url}, {attempts} times in a row with backoff; try again later")]
    Server { url: String, status: u16, attempts: usize },
    #[error("GitHub answered {status} to {url}: {message}")]
    Refused { url: String, status: u16, message: String },
    #[error("the request to {url} failed: {message}; check the network and the configured base URL")]
    Transport { url: String, message: String },
    #[error("GitHub's answer to {url} is not what the REST API v3 returns: {message}")]
    Decode { url: String, message: String },
    #[error("the history fetched from {repo} cannot be used: {message}")]
    History { repo: String, message: String },
    #[error("the GitHub client could not be set up for {base_url}: {message}")]
    Client { base_url: String, message: String },
}

impl SourceError {
    /// Worth retrying with backoff: server errors and transport failures.
    pub fn is_transient(&self) -> bool {
        matches!(self, SourceError::Server { .. } | SourceError::Transport { .. })
    }

    /// GitHub did not serve the request for now (rate limit, server errors, network), as opposed to
    /// refusing it: a cached answer may stand in.
    pub fn is_unavailable(&self) -> bool {
        self.is_transient() || matches!(self, SourceError::RateLimited { .. })
    }
}

//! Errors of the LKG algorithm: histories that do not hold together, and runs or queries that do not
//! fit the histories and providers they are checked against.

/// Everything the LKG algorithm can refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LkgError {
    #[error("commit {commit:?} appears twice in the history: pass each first-parent commit once")]
    DuplicateCommit { commit: String },
    #[error("tag {tag:?} points to {commit:?}, which is not in the history: fetch a history that reaches it")]
    DanglingTag { tag: String, commit: String },
    #[error("unknown provider {provider:?}: it has no history or policy; add it to the providers first")]
    UnknownProvider { provider: String },
    /// `reason` says why, as precisely as the history knows (see [`crate::History::reason`]).
    #[error("{revision:?} is not in the {repo} history: {reason}")]
    UnknownRevision { repo: String, revision: String, reason: String },
    #[error("test id {id} is not in the test catalog ({catalog_len} tests): intern test names in the engine's catalog")]
    UnknownTestId { id: u32, catalog_len: usize },
    /// A run that was refused; the engine is unchanged.
    #[error("run {build_id}: {reason}")]
    InvalidRun { build_id: String, reason: Box<LkgError> },
}

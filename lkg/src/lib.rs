//! Last known good (LKG): which Kubernetes commits are good with which provider commits.
//!
//! A pure algorithm over commit histories, runs and provider policies; no I/O. Definitions (see
//! the design doc, "Last known good"):
//! - a *run* is good when every required test of its provider passed in it (a test that failed then
//!   passed on retry is *flaky*: it counts as passed unless the policy says otherwise, and is
//!   reported); with no required tests, every test that ran must pass and at least one must run;
//! - a *pair* (Kubernetes commit, provider commit) is good once it had a good run (or as many good
//!   runs in a row as the provider's policy asks for);
//! - the *LKG* of a provider is its good pair with the newest Kubernetes commit in first-parent
//!   order, and the newest provider commit there;
//! - the *version set* is the newest Kubernetes commit good with every provider in the set;
//! - the *culprit range* of a provider whose newest pair is bad runs from its LKG (excluded) to the
//!   oldest bad pair after it (included), on the Kubernetes side and on the provider side.
//!
//! [`Engine`] updates all of this one run at a time; [`compute`] does it from scratch. Runs come
//! with test names ([`Run`]) or with ids interned in a [`TestCatalog`] ([`CompactRun`], what large
//! recomputations take), or judged before by a [`RunJudge`] ([`JudgedRun`], what a loader that
//! stores each build's verdict takes). A run naming a commit or tag that is not in its history is listed in its
//! provider's report and takes no part in any ordering.
//!
//! The commit histories come from [`sources`] (feature `sources`, on by default): a local git
//! repository or GitHub.

pub mod bisect;
mod catalog;
mod compute;
mod engine;
mod error;
mod fast_hash;
pub mod history;
mod ledger;
mod model;
mod report;
mod verdict;

/// The release line of a provider's master branch (against Kubernetes' master): the line an answer
/// is for when none is named.
pub const DEFAULT_LINE: &str = "master";

#[cfg(feature = "api")]
pub mod api;
#[cfg(feature = "sources")]
pub mod sources;
#[cfg(test)]
mod tests;

pub use catalog::TestCatalog;
pub use compute::{compute, compute_compact};
pub use engine::{Engine, RunAdded};
pub use error::LkgError;
pub use history::History;
pub use model::{
    Attempt, CompactResult, CompactRun, FlakePolicy, JudgedRun, ProviderPolicy, ProviderSpec, Run, TestId, TestResult,
    TestStatus,
};
pub use report::{CommitRange, Culprit, FlakyTest, PairReport, ProviderReport, Report, UnplacedRun, VersionSet};
pub use verdict::{RunJudge, RunVerdict, Verdict};

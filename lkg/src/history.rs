//! Commit histories: the first-parent order of a tracked branch, with tags and branches as aliases.
//!
//! A revision names a commit of the history as git would take it: the commit id, a unique
//! abbreviation of it (4 hex digits or more, as `git rev-parse` accepts), an alias (a tag or
//! branch the source resolved), or a Kubernetes CI version such as `v1.37.0-alpha.1.234+0123456789abcd`
//! (what `dl.k8s.io/ci/latest.txt` names): placed by the commit its `+<sha>` suffix abbreviates.

use std::collections::BTreeMap;

use crate::LkgError;
use crate::fast_hash::FastMap;

/// The shortest abbreviated commit id taken as one (git's minimum).
pub const MIN_ABBREVIATION: usize = 4;

/// The first-parent commits of one branch, plus aliases (tags, branches) that resolve to them.
///
/// Each commit has an *ordinal*: 0 is the oldest and newer commits have larger ordinals, so the
/// ordinals of known commits stay put when newer commits are appended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct History {
    oldest_first: Vec<String>,
    ordinals: FastMap<String, usize>,
    /// Ordinals sorted by their commit id, for abbreviated ids.
    by_commit: Vec<usize>,
    tags: BTreeMap<String, String>,
    /// Why a revision a source was asked about is not in this history (on another branch, older
    /// than the commits fetched, unknown to the repository).
    reasons: BTreeMap<String, String>,
    fallback_reason: Option<String>,
}

impl History {
    /// `newest_first` is the order `git rev-list --first-parent` prints.
    pub fn new<I, S>(newest_first: I) -> Result<Self, LkgError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut oldest_first: Vec<String> = newest_first.into_iter().map(Into::into).collect();
        oldest_first.reverse();
        let mut ordinals = FastMap::with_capacity_and_hasher(oldest_first.len(), Default::default());
        for (ordinal, commit) in oldest_first.iter().enumerate() {
            if ordinals.insert(commit.clone(), ordinal).is_some() {
                return Err(LkgError::DuplicateCommit { commit: commit.clone() });
            }
        }
        let mut by_commit: Vec<usize> = (0..oldest_first.len()).collect();
        by_commit.sort_unstable_by(|a, b| oldest_first[*a].cmp(&oldest_first[*b]));
        Ok(Self {
            oldest_first,
            ordinals,
            by_commit,
            tags: BTreeMap::new(),
            reasons: BTreeMap::new(),
            fallback_reason: None,
        })
    }

    /// Adds `(alias, commit)` aliases (tags, branches); every commit must be in the history.
    pub fn with_tags<I, T, C>(mut self, tags: I) -> Result<Self, LkgError>
    where
        I: IntoIterator<Item = (T, C)>,
        T: Into<String>,
        C: Into<String>,
    {
        for (tag, commit) in tags {
            let (tag, commit) = (tag.into(), commit.into());
            if !self.ordinals.contains_key(&commit) {
                return Err(LkgError::DanglingTag { tag, commit });
            }
            self.tags.insert(tag, commit);
        }
        Ok(self)
    }

    /// Records why `revision` is not in this history, for the answers that name it.
    pub fn with_reason(mut self, revision: impl Into<String>, reason: impl Into<String>) -> Self {
        self.reasons.insert(revision.into(), reason.into());
        self
    }

    /// Says why any revision with no reason of its own is not in this history (what the history
    /// is made of: "no build in the index tested it", "not among the 5000 commits fetched").
    pub fn with_fallback_reason(mut self, reason: impl Into<String>) -> Self {
        self.fallback_reason = Some(reason.into());
        self
    }

    /// Why `revision` is not in this history, when a source said.
    pub fn reason(&self, revision: &str) -> Option<&str> {
        self.reasons.get(revision).map(String::as_str)
    }

    /// Why `revision` (not in this history) is not: its own reason, else the history's.
    pub fn why_unknown(&self, revision: &str) -> String {
        if let Some(reason) = self.reason(revision).or(self.fallback_reason.as_deref()) {
            return reason.to_owned();
        }
        if let Some(commit) = ci_commit(revision) {
            return format!("no commit of it starts with {commit}, the commit its CI version names");
        }
        if revision.len() >= MIN_ABBREVIATION
            && revision.bytes().all(|b| b.is_ascii_hexdigit())
            && self.abbreviated_count(revision) > 1
        {
            return "it abbreviates more than one commit: give more of the commit id".into();
        }
        "neither a commit, a unique abbreviation, a tag nor a branch of it".into()
    }

    /// The ordinal of a revision: a commit id, an alias, a unique abbreviation, or a CI version
    /// (see the module docs). A commit id wins over an alias of the same name.
    pub fn ordinal(&self, revision: &str) -> Option<usize> {
        if let Some(ordinal) = self.ordinals.get(revision) {
            return Some(*ordinal);
        }
        if let Some(tagged) = self.tags.get(revision) {
            return self.ordinals.get(tagged).copied();
        }
        self.abbreviated(revision).or_else(|| ci_commit(revision).and_then(|commit| self.abbreviated(commit)))
    }

    /// The commit id a revision stands for.
    pub fn resolve(&self, revision: &str) -> Option<&str> {
        self.ordinal(revision).map(|ordinal| self.commit(ordinal))
    }

    /// The commit `prefix` abbreviates, when exactly one commit of the history starts with it.
    fn abbreviated(&self, prefix: &str) -> Option<usize> {
        let mut matches = self.starting_with(prefix)?;
        let first = matches.next()?;
        matches.next().is_none().then_some(first)
    }

    fn abbreviated_count(&self, prefix: &str) -> usize {
        self.starting_with(prefix).map_or(0, Iterator::count)
    }

    /// The ordinals of the commits starting with `prefix`, a hex abbreviation of git's length.
    fn starting_with(&self, prefix: &str) -> Option<impl Iterator<Item = usize> + '_> {
        if prefix.len() < MIN_ABBREVIATION || !prefix.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let prefix = prefix.to_ascii_lowercase();
        let start = self.by_commit.partition_point(|ordinal| self.oldest_first[*ordinal].as_str() < prefix.as_str());
        Some(self.by_commit[start..].iter().copied().take_while(move |o| self.oldest_first[*o].starts_with(&prefix)))
    }

    /// The commit at `ordinal`; panics when the ordinal did not come from this history.
    pub fn commit(&self, ordinal: usize) -> &str {
        &self.oldest_first[ordinal]
    }

    /// The aliases of a commit id (tags and branches), sorted.
    pub fn aliases_of<'a>(&'a self, commit: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.tags.iter().filter(move |(_, c)| c.as_str() == commit).map(|(tag, _)| tag.as_str())
    }

    pub fn newest_first(&self) -> impl Iterator<Item = &str> {
        self.oldest_first.iter().rev().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.oldest_first.len()
    }

    pub fn is_empty(&self) -> bool {
        self.oldest_first.is_empty()
    }

    /// The commits after `last_good` up to and including `first_bad`, newest first.
    pub(crate) fn commits_after_up_to(&self, last_good: usize, first_bad: usize) -> Vec<String> {
        self.oldest_first[last_good + 1..=first_bad].iter().rev().cloned().collect()
    }
}

/// The abbreviated commit id in a Kubernetes CI version's build metadata
/// (`v1.37.0-alpha.1.234+0123456789abcd` → `0123456789abcd`); `None` for anything else, such as
/// `v1.34.1+k3s1`, whose metadata is not a commit.
pub fn ci_commit(version: &str) -> Option<&str> {
    let (release, metadata) = version.rsplit_once('+')?;
    let metadata = metadata.strip_suffix("-dirty").unwrap_or(metadata);
    let is_commit = metadata.len() >= 7 && metadata.bytes().all(|b| b.is_ascii_hexdigit());
    (is_commit && release.starts_with(|c: char| c == 'v' || c.is_ascii_digit())).then_some(metadata)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history() -> History {
        History::new(["c3", "c2", "c1"]).unwrap().with_tags([("v1", "c2")]).unwrap()
    }

    #[test]
    fn newer_commits_have_larger_ordinals() {
        let history = history();
        assert_eq!(["c1", "c2", "c3"].map(|c| history.ordinal(c)), [Some(0), Some(1), Some(2)]);
        assert_eq!(history.newest_first().collect::<Vec<_>>(), ["c3", "c2", "c1"]);
    }

    #[test]
    fn tags_resolve_to_their_commit_and_unknown_revisions_to_nothing() {
        let history = history();
        assert_eq!(history.resolve("v1"), Some("c2"));
        assert_eq!(history.resolve("v2"), None);
    }

    #[test]
    fn a_commit_id_wins_over_a_tag_of_the_same_name() {
        let history = History::new(["c2", "c1"]).unwrap().with_tags([("c1", "c2")]).unwrap();
        assert_eq!(history.resolve("c1"), Some("c1"));
    }

    #[test]
    fn a_commit_listed_twice_is_refused() {
        assert_eq!(History::new(["c2", "c1", "c2"]), Err(LkgError::DuplicateCommit { commit: "c2".into() }));
    }

    #[test]
    fn a_tag_to_an_unknown_commit_is_refused() {
        let error = History::new(["c1"]).unwrap().with_tags([("v1", "c9")]).unwrap_err();
        assert_eq!(error, LkgError::DanglingTag { tag: "v1".into(), commit: "c9".into() });
    }

    #[test]
    fn unique_abbreviations_and_ci_versions_name_their_commit() {
        let history = History::new(["fedcba9876543210", "0123456789abcdef", "0123999999999999"]).unwrap();
        assert_eq!(history.resolve("fedc"), Some("fedcba9876543210"));
        assert_eq!(history.resolve("FEDCBA98"), Some("fedcba9876543210"), "hex is case-insensitive");
        assert_eq!(history.resolve("0123"), None, "ambiguous");
        assert_eq!(history.resolve("01234"), Some("0123456789abcdef"));
        assert_eq!(history.resolve("fed"), None, "shorter than git takes");
        assert_eq!(history.resolve("v1.37.0-alpha.1.234+0123456789abcd"), Some("0123456789abcdef"));
        assert_eq!(history.resolve("v1.37.0-alpha.1.234+0123456789abcd-dirty"), Some("0123456789abcdef"));
        assert_eq!(history.resolve("v1.34.1+k3s1"), None, "k3s metadata is not a commit");
        assert_eq!(ci_commit("v1.34.1+k3s1"), None);
        assert_eq!(ci_commit("v1.37.0-alpha.1.234+fedcba98765432"), Some("fedcba98765432"));
    }

    #[test]
    fn reasons_are_kept_for_the_answers() {
        let history = History::new(["c1"]).unwrap().with_reason("abc", "on branch release-1.36, not master");
        assert_eq!(history.reason("abc"), Some("on branch release-1.36, not master"));
        assert_eq!(history.reason("c1"), None);
    }

    #[test]
    fn commits_after_up_to_excludes_the_good_end_and_lists_newest_first() {
        let history = History::new(["c4", "c3", "c2", "c1"]).unwrap();
        assert_eq!(history.commits_after_up_to(0, 2), ["c3", "c2"]);
    }
}

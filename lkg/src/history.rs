//! Commit histories: the first-parent order of a tracked branch, with release tags as aliases.

use std::collections::BTreeMap;

use crate::LkgError;
use crate::fast_hash::FastMap;

/// The first-parent commits of one branch, plus tags that resolve to them.
///
/// Each commit has an *ordinal*: 0 is the oldest and newer commits have larger ordinals, so the
/// ordinals of known commits stay put when newer commits are appended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct History {
    oldest_first: Vec<String>,
    ordinals: FastMap<String, usize>,
    tags: BTreeMap<String, String>,
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
        Ok(Self { oldest_first, ordinals, tags: BTreeMap::new() })
    }

    /// Adds `(tag, commit)` aliases; every commit must be in the history.
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

    /// The ordinal of a commit id or tag; a commit id wins over a tag of the same name.
    pub fn ordinal(&self, revision: &str) -> Option<usize> {
        let commit = match self.tags.get(revision) {
            Some(tagged) if !self.ordinals.contains_key(revision) => tagged.as_str(),
            _ => revision,
        };
        self.ordinals.get(commit).copied()
    }

    /// The commit id a commit id or tag stands for.
    pub fn resolve(&self, revision: &str) -> Option<&str> {
        self.ordinal(revision).map(|ordinal| self.commit(ordinal))
    }

    /// The commit at `ordinal`; panics when the ordinal did not come from this history.
    pub fn commit(&self, ordinal: usize) -> &str {
        &self.oldest_first[ordinal]
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
    fn commits_after_up_to_excludes_the_good_end_and_lists_newest_first() {
        let history = History::new(["c4", "c3", "c2", "c1"]).unwrap();
        assert_eq!(history.commits_after_up_to(0, 2), ["c3", "c2"]);
    }
}

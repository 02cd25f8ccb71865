//! A local repository as a history source, through the `git` command.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use tokio::process::Command;

use super::{Commit, HistorySource, SourceError, Walk};

/// Fields of one commit, separated by unit separators; commits end with a record separator, since a
/// message may hold newlines.
const FORMAT: &str = "--format=%H%x1f%P%x1f%aI%x1f%B%x1e";

/// A git repository on disk.
#[derive(Debug, Clone)]
pub struct LocalGit {
    repo: PathBuf,
    git: PathBuf,
}

impl LocalGit {
    pub fn new(repo: impl Into<PathBuf>) -> Self {
        Self { repo: repo.into(), git: PathBuf::from("git") }
    }

    /// Uses this `git` binary instead of the one on PATH.
    pub fn with_git(mut self, git: impl Into<PathBuf>) -> Self {
        self.git = git.into();
        self
    }

    pub fn path(&self) -> &Path {
        &self.repo
    }

    async fn git(&self, args: &[&str]) -> Result<String, SourceError> {
        let output = Command::new(&self.git)
            .arg("-C")
            .arg(&self.repo)
            .args(args)
            .env("GIT_TERMINAL_PROMPT", "0")
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|error| SourceError::GitMissing { repo: self.repo.clone(), message: error.to_string() })?;
        if !output.status.success() {
            return Err(SourceError::Git {
                repo: self.repo.clone(),
                args: args.join(" "),
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            });
        }
        String::from_utf8(output.stdout).map_err(|error| SourceError::Git {
            repo: self.repo.clone(),
            args: args.join(" "),
            stderr: format!("output is not UTF-8: {error}"),
        })
    }

    /// The commit id of `revision`, checked to exist.
    async fn commit_id(&self, revision: &str) -> Result<String, SourceError> {
        if revision.starts_with('-') {
            return Err(self.unknown(revision));
        }
        let spec = format!("{revision}^{{commit}}");
        match self.git(&["rev-parse", "--verify", "--quiet", "--end-of-options", &spec]).await {
            Ok(sha) => Ok(sha.trim().to_owned()),
            // `--quiet` leaves stderr empty for a revision that does not exist; anything else (not
            // a repository, say) is the real problem.
            Err(SourceError::Git { stderr, .. }) if stderr.is_empty() => Err(self.unknown(revision)),
            Err(error) => Err(error),
        }
    }

    fn unknown(&self, revision: &str) -> SourceError {
        SourceError::UnknownRevision { repo: self.repo.display().to_string(), revision: revision.to_owned() }
    }

    async fn rev_list(&self, extra: &[&str]) -> Result<Vec<Commit>, SourceError> {
        let mut args = vec!["rev-list", "--no-commit-header", FORMAT];
        args.extend_from_slice(extra);
        let output = self.git(&args).await?;
        Ok(parse(&output))
    }
}

fn parse(output: &str) -> Vec<Commit> {
    output
        .split('\x1e')
        .map(|record| record.trim_start_matches('\n'))
        .filter(|record| !record.is_empty())
        .filter_map(|record| {
            let mut fields = record.splitn(4, '\x1f');
            let sha = fields.next()?.to_owned();
            let parents = fields.next()?.split_whitespace().map(String::from).collect();
            let author_date = Some(fields.next()?.to_owned()).filter(|date| !date.is_empty());
            let message = fields.next().unwrap_or_default().trim_end().to_owned();
            Some(Commit { sha, message, author_date, parents, url: None })
        })
        .collect()
}

#[async_trait]
impl HistorySource for LocalGit {
    fn describe(&self) -> String {
        self.repo.display().to_string()
    }

    async fn first_parent_commits(&self, branch: &str, walk: &Walk) -> Result<Vec<Commit>, SourceError> {
        let head = self.commit_id(branch).await?;
        let max_count = format!("--max-count={}", walk.limit);
        let mut args = vec!["--first-parent", max_count.as_str(), head.as_str()];
        let known;
        if let Some(until) = &walk.until {
            known = format!("^{}", self.commit_id(until).await?);
            args.push(&known);
        }
        self.rev_list(&args).await
    }

    async fn compare(&self, base: &str, head: &str) -> Result<Vec<Commit>, SourceError> {
        let range = format!("{}..{}", self.commit_id(base).await?, self.commit_id(head).await?);
        self.rev_list(&[&range]).await
    }

    async fn resolve(&self, revision: &str) -> Result<String, SourceError> {
        self.commit_id(revision).await
    }

    async fn refs(&self) -> Result<Vec<(String, String)>, SourceError> {
        let format = "--format=%(refname:short)%09%(objectname)%09%(*objectname)";
        let output = self.git(&["for-each-ref", format, "refs/tags", "refs/heads"]).await?;
        Ok(parse_refs(&output))
    }
}

/// `for-each-ref` lines `name<TAB>object<TAB>peeled`: an annotated tag names its tag object, and
/// `peeled` is the commit.
fn parse_refs(output: &str) -> Vec<(String, String)> {
    output
        .lines()
        .filter_map(|line| {
            let mut fields = line.split('\t');
            let (name, object, peeled) = (fields.next()?, fields.next()?, fields.next().unwrap_or_default());
            let commit = if peeled.is_empty() { object } else { peeled };
            (!name.is_empty() && !commit.is_empty()).then(|| (name.to_owned(), commit.to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_take_the_peeled_commit_of_annotated_tags() {
        let output = "master\taaa\t\nv1.0.0\ttagobject\tbbb\nv0.9.0\tccc\t\n";
        assert_eq!(
            parse_refs(output),
            [("master".into(), "aaa".into()), ("v1.0.0".into(), "bbb".into()), ("v0.9.0".into(), "ccc".into())]
        );
    }

    #[test]
    fn records_split_on_separators_and_keep_multi_line_messages() {
        let output = "aaa\x1fbbb ccc\x1f2024-04-17T17:27:03+00:00\x1fMerge pull request #1\n\nbody\n\x1e\n\
                      bbb\x1f\x1f2024-04-16T10:00:00+00:00\x1finitial\n\x1e\n";
        let commits = parse(output);
        assert_eq!(commits.len(), 2);
        assert_eq!(commits[0].parents, ["bbb", "ccc"]);
        assert_eq!(commits[0].message, "Merge pull request #1\n\nbody");
        assert_eq!(commits[0].summary(), "Merge pull request #1");
        assert_eq!((commits[1].sha.as_str(), commits[1].parents.len()), ("bbb", 0));
    }
}

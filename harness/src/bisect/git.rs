//! The provider repository as `harness bisect` reads it: the first-parent commits of a range, a
//! commit's subject, author and date, and a worktree per point.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

/// Why a range of the repository cannot be bisected. Each names the revision and the repository.
#[derive(Debug, thiserror::Error)]
pub enum RangeError {
    #[error("{repo} is not a git repository (give a clone of the provider's repository with --repo): {detail}")]
    NotARepository { repo: PathBuf, detail: String },
    #[error("{rev:?} is not a commit of {repo}: {detail}")]
    UnknownRevision { repo: PathBuf, rev: String, detail: String },
    #[error(
        "the range is reversed: the bad end {bad} is older than the good end {good} in {repo}; swap --good and --bad"
    )]
    Reversed { repo: PathBuf, good: String, bad: String },
    #[error("the good end {good} and the bad end {bad} are the same commit: nothing to bisect")]
    Same { good: String, bad: String },
    #[error(
        "the good end {good} is not in the first-parent history of the bad end {bad} in {repo}: bisect walks \
         first-parent history, so give a good commit of the branch itself"
    )]
    NotInHistory { repo: PathBuf, good: String, bad: String },
    #[error("git {args} in {repo} failed: {detail}")]
    Git { repo: PathBuf, args: String, detail: String },
}

/// A commit as the answer shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitInfo {
    pub commit: String,
    pub subject: String,
    pub author: String,
    /// The commit date, RFC 3339.
    pub date: String,
}

/// A local clone of the provider's repository.
#[derive(Debug, Clone)]
pub struct Repo {
    dir: PathBuf,
}

impl Repo {
    pub fn open(dir: &Path) -> Result<Repo, RangeError> {
        let repo = Repo { dir: dir.to_path_buf() };
        repo.git(&["rev-parse", "--git-dir"])
            .map_err(|e| RangeError::NotARepository { repo: dir.to_path_buf(), detail: e.to_string() })?;
        Ok(repo)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn git(&self, args: &[&str]) -> Result<String, RangeError> {
        let output = Command::new("git").arg("-C").arg(&self.dir).args(args).output().map_err(|e| RangeError::Git {
            repo: self.dir.clone(),
            args: args.join(" "),
            detail: e.to_string(),
        })?;
        if !output.status.success() {
            return Err(RangeError::Git {
                repo: self.dir.clone(),
                args: args.join(" "),
                detail: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            });
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    }

    /// The full commit id `rev` names.
    pub fn resolve(&self, rev: &str) -> Result<String, RangeError> {
        self.git(&["rev-parse", "--verify", "--quiet", &format!("{rev}^{{commit}}")]).map_err(|e| {
            RangeError::UnknownRevision {
                repo: self.dir.clone(),
                rev: rev.to_owned(),
                detail: match e {
                    RangeError::Git { detail, .. } if !detail.is_empty() => detail,
                    _ => "no such commit, tag or branch".to_owned(),
                },
            }
        })
    }

    /// The commits after `good` up to and including `bad` in `bad`'s first-parent history, oldest
    /// first (full ids); `good` and `bad` resolved to their full ids.
    pub fn first_parent_range(&self, good: &str, bad: &str) -> Result<(String, Vec<String>), RangeError> {
        let (good_id, bad_id) = (self.resolve(good)?, self.resolve(bad)?);
        if good_id == bad_id {
            return Err(RangeError::Same { good: good.to_owned(), bad: bad.to_owned() });
        }
        let history = self.git(&["rev-list", "--first-parent", &bad_id])?;
        let mut points: Vec<String> = Vec::new();
        for commit in history.lines() {
            if commit == good_id {
                points.reverse();
                return Ok((good_id, points));
            }
            points.push(commit.to_owned());
        }
        let reversed = self.git(&["merge-base", "--is-ancestor", &bad_id, &good_id]).is_ok();
        let (repo, good, bad) = (self.dir.clone(), good.to_owned(), bad.to_owned());
        Err(if reversed {
            RangeError::Reversed { repo, good, bad }
        } else {
            RangeError::NotInHistory { repo, good, bad }
        })
    }

    pub fn commit_info(&self, commit: &str) -> Result<CommitInfo, RangeError> {
        let text = self.git(&["log", "-1", "--format=%H%x00%s%x00%an <%ae>%x00%cI", commit])?;
        let mut fields = text.split('\0').map(str::to_owned);
        let mut next = || fields.next().unwrap_or_default();
        Ok(CommitInfo { commit: next(), subject: next(), author: next(), date: next() })
    }

    /// A detached worktree of `commit` at `dir` (the build runs there).
    pub fn add_worktree(&self, dir: &Path, commit: &str) -> Result<Worktree, RangeError> {
        if let Some(parent) = dir.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let path = dir.display().to_string();
        self.git(&["worktree", "add", "--quiet", "--detach", "--force", &path, commit])?;
        Ok(Worktree { repo: self.clone(), dir: dir.to_path_buf() })
    }

    /// Forgets worktrees whose directories are gone (a bisection killed mid-run).
    pub fn prune_worktrees(&self) {
        let _ = self.git(&["worktree", "prune"]);
    }
}

/// A worktree, removed when dropped.
#[derive(Debug)]
pub struct Worktree {
    repo: Repo,
    dir: PathBuf,
}

impl Worktree {
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Worktree {
    fn drop(&mut self) {
        let path = self.dir.display().to_string();
        if self.repo.git(&["worktree", "remove", "--force", &path]).is_err() {
            let _ = std::fs::remove_dir_all(&self.dir);
            self.repo.prune_worktrees();
        }
    }
}

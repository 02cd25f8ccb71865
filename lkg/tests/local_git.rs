//! `LocalGit` against a real repository made with `git` in a temporary directory.
#![cfg(feature = "sources")]

use std::path::Path;
use std::process::Command;

use lkg::sources::{HistorySource, LocalGit, SourceError, Walk, fetch_history, history_of};

fn git(repo: &Path, args: &[&str], seconds: u64) -> String {
    let date = format!("{} +0000", 1_700_000_000 + seconds * 60);
    let output = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=harness-dev", "-c", "user.email=dev@cloud-provider-harness.invalid"])
        .args(["-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false", "-c", "init.defaultBranch=main"])
        .args(args)
        .env("GIT_AUTHOR_DATE", &date)
        .env("GIT_COMMITTER_DATE", &date)
        .output()
        .expect("git runs");
    assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

struct Repo {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    /// c1, c2, t1 (on topic), c3, m (merge of topic into main).
    commits: [String; 5],
}

/// main: c1 - c2 - c3 - m, where m merges topic (c2 - t1); v1 tags c2 (annotated).
fn repo() -> Repo {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    git(&path, &["init", "--quiet"], 0);
    let commit = |message: &str, minute: u64| {
        git(&path, &["commit", "--quiet", "--allow-empty", "-m", message], minute);
        git(&path, &["rev-parse", "HEAD"], minute)
    };
    let c1 = commit("c1: initial", 1);
    let c2 = commit("c2: second\n\nwith a body", 2);
    git(&path, &["tag", "-a", "v1", "-m", "release v1"], 2);
    git(&path, &["checkout", "--quiet", "-b", "topic"], 3);
    let t1 = commit("t1: on the topic branch", 3);
    git(&path, &["checkout", "--quiet", "main"], 4);
    let c3 = commit("c3: third", 4);
    git(&path, &["merge", "--quiet", "--no-ff", "topic", "-m", "Merge branch 'topic'"], 5);
    let m = git(&path, &["rev-parse", "HEAD"], 5);
    Repo { _dir: dir, path, commits: [c1, c2, t1, c3, m] }
}

fn shas(commits: &[lkg::sources::Commit]) -> Vec<&str> {
    commits.iter().map(|commit| commit.sha.as_str()).collect()
}

#[tokio::test]
async fn first_parent_commits_skip_merged_branches_and_stop_at_the_limit_or_a_known_commit() {
    let repo = repo();
    let [c1, c2, t1, c3, m] = &repo.commits;
    let source = LocalGit::new(&repo.path);

    let all = source.first_parent_commits("main", &Walk::limit(100)).await.unwrap();
    assert_eq!(shas(&all), [m, c3, c2, c1]);
    assert!(!shas(&all).contains(&t1.as_str()));
    assert_eq!(all[0].parents, [c3.clone(), t1.clone()]);
    assert_eq!(all[2].message, "c2: second\n\nwith a body");
    assert_eq!(all[2].summary(), "c2: second");
    assert_eq!(all[3].author_date.as_deref(), Some("2023-11-14T22:14:20+00:00"));

    assert_eq!(shas(&source.first_parent_commits("main", &Walk::limit(2)).await.unwrap()), [m, c3]);
    assert_eq!(shas(&source.first_parent_commits("main", &Walk::until(100, "v1")).await.unwrap()), [m, c3]);
    assert_eq!(shas(&source.first_parent_commits("topic", &Walk::limit(100)).await.unwrap()), [t1, c2, c1]);

    let history = history_of(&all).unwrap();
    assert_eq!(history.newest_first().collect::<Vec<_>>(), [m, c3, c2, c1]);
}

#[tokio::test]
async fn compare_lists_what_head_has_and_base_has_not() {
    let repo = repo();
    let [_, c2, t1, c3, m] = &repo.commits;
    let source = LocalGit::new(&repo.path);
    assert_eq!(shas(&source.compare("v1", "main").await.unwrap()), [m, c3, t1]);
    assert_eq!(shas(&source.compare(c2, c3).await.unwrap()), [c3]);
    assert!(source.compare("main", "v1").await.unwrap().is_empty());
}

#[tokio::test]
async fn tags_branches_and_short_ids_resolve_to_commits() {
    let repo = repo();
    let [_, c2, t1, _, m] = &repo.commits;
    let source = LocalGit::new(&repo.path);
    assert_eq!(&source.resolve("v1").await.unwrap(), c2, "an annotated tag is peeled to its commit");
    assert_eq!(&source.resolve("main").await.unwrap(), m);
    assert_eq!(&source.resolve(&t1[..10]).await.unwrap(), t1);
}

#[tokio::test]
async fn unknown_revisions_and_missing_repositories_are_clear_errors() {
    let repo = repo();
    let source = LocalGit::new(&repo.path);
    let error = source.resolve("v9.9.9").await.unwrap_err();
    assert_eq!(
        error,
        SourceError::UnknownRevision { repo: repo.path.display().to_string(), revision: "v9.9.9".into() }
    );
    let expected = format!("is not a commit, branch or tag of {}; fetch it or check its spelling", repo.path.display());
    assert!(error.to_string().ends_with(&expected), "{error}");
    let error = source.first_parent_commits("no-such-branch", &Walk::limit(5)).await.unwrap_err();
    assert!(matches!(error, SourceError::UnknownRevision { .. }), "{error}");
    assert!(matches!(source.resolve("--all").await.unwrap_err(), SourceError::UnknownRevision { .. }));

    let empty = tempfile::tempdir().unwrap();
    let error = LocalGit::new(empty.path()).first_parent_commits("main", &Walk::limit(5)).await.unwrap_err();
    assert!(matches!(error, SourceError::Git { .. }), "{error}");
    assert!(error.to_string().contains("not a git repository"), "{error}");

    let error = LocalGit::new(&repo.path).with_git("/nonexistent/git").resolve("main").await.unwrap_err();
    assert!(error.to_string().contains("install git or put it on PATH"), "{error}");
}

#[tokio::test]
async fn a_fetched_history_carries_its_release_tags_and_orders_runs() {
    let repo = repo();
    let [c1, c2, _, c3, m] = &repo.commits;
    let source = LocalGit::new(&repo.path);
    let history = fetch_history(&source, "main", &Walk::limit(100), &["v1"]).await.unwrap();
    assert_eq!(history.resolve("v1"), Some(c2.as_str()));
    assert_eq!([c1, c2, c3, m].map(|c| history.ordinal(c)), [Some(0), Some(1), Some(2), Some(3)]);

    // A tag older than the commits fetched cannot be placed: the error says so.
    let error = fetch_history(&source, "main", &Walk::limit(2), &["v1"]).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "the history fetched from {} cannot be used: tag \"v1\" points to \"{c2}\", which is not in the history: \
             fetch a history that reaches it",
            repo.path.display()
        )
    );
}

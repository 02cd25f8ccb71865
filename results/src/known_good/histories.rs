//! Where a commit history comes from: `tested` (the versions the index has runs of), a local git
//! repository, or GitHub.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use lkg::History;
use lkg::sources::{GitHub, GitHubConfig, HistoryCache, HistorySource, LocalGit, SourceError, Walk, history_of};

use super::LkgOptions;

/// How to get one repository's first-parent history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HistorySpec {
    /// No repository: the versions the index has runs of, ordered as releases when every one is a
    /// version such as `v1.36.4`, else by when each was first tested.
    Tested,
    /// `git:PATH[@BRANCH]`: `git rev-list --first-parent` of a local clone.
    Git { path: PathBuf, branch: Option<String> },
    /// `github:OWNER/REPO[@BRANCH]`: the REST API.
    GitHub { owner: String, repo: String, branch: Option<String> },
    /// `goproxy:MODULE[@BRANCH]`: the release tags of a Go module as the Go module proxy lists them
    /// (`$GOPROXY/<module>/@v/list`), newest first by semver; on a `release-1.X` branch, only the
    /// `v1.X.*` tags. A provider released as a Go module (k8s.io/cloud-provider-aws) is versioned
    /// by those tags.
    GoProxy { module: String, branch: Option<String> },
}

impl FromStr for HistorySpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let usage = "use tested, git:PATH[@BRANCH], github:OWNER/REPO[@BRANCH] or goproxy:MODULE[@BRANCH]";
        let split_branch = |rest: &str| match rest.rsplit_once('@') {
            Some((what, branch)) if !branch.is_empty() => (what.to_owned(), Some(branch.to_owned())),
            _ => (rest.to_owned(), None),
        };
        if text == "tested" {
            return Ok(Self::Tested);
        }
        if let Some(rest) = text.strip_prefix("git:") {
            let (path, branch) = split_branch(rest);
            if path.is_empty() {
                return Err(format!("{text:?} names no repository: {usage}"));
            }
            return Ok(Self::Git { path: path.into(), branch });
        }
        if let Some(rest) = text.strip_prefix("goproxy:") {
            let (module, branch) = split_branch(rest);
            if module.is_empty() || !module.contains('/') || module.contains(char::is_whitespace) {
                return Err(format!(
                    "{text:?}: expected goproxy:MODULE such as goproxy:k8s.io/cloud-provider-aws; {usage}"
                ));
            }
            return Ok(Self::GoProxy { module, branch });
        }
        if let Some(rest) = text.strip_prefix("github:") {
            let (full, branch) = split_branch(rest);
            return match full.split_once('/') {
                Some((owner, repo)) if !owner.is_empty() && !repo.is_empty() && !repo.contains('/') => {
                    Ok(Self::GitHub { owner: owner.into(), repo: repo.into(), branch })
                }
                _ => Err(format!("{text:?}: expected github:OWNER/REPO; {usage}")),
            };
        }
        Err(format!("{text:?} is not a history source: {usage}"))
    }
}

impl HistorySpec {
    /// The same source on `branch` (a release line's): a `tested` history stays as it is.
    pub fn on_branch(&self, branch: &str) -> HistorySpec {
        match self {
            Self::Tested => Self::Tested,
            Self::Git { path, .. } => Self::Git { path: path.clone(), branch: Some(branch.to_owned()) },
            Self::GitHub { owner, repo, .. } => {
                Self::GitHub { owner: owner.clone(), repo: repo.clone(), branch: Some(branch.to_owned()) }
            }
            Self::GoProxy { module, .. } => Self::GoProxy { module: module.clone(), branch: Some(branch.to_owned()) },
        }
    }

    /// The history of `name` (for messages), on `default_branch` unless the spec names one, taking
    /// in `revisions` (each version the runs name, with when it was first tested). GitHub's answers
    /// go through `cache`.
    pub async fn history(
        &self,
        name: &str,
        default_branch: &str,
        revisions: &BTreeMap<String, i64>,
        options: &LkgOptions,
        cache: &Arc<dyn HistoryCache>,
    ) -> Result<History> {
        match self {
            Self::Tested => tested(revisions).with_context(|| format!("ordering the tested versions of {name}")),
            Self::Git { path, branch } => {
                let source = LocalGit::new(path);
                fetched(&source, branch.as_deref().unwrap_or(default_branch), revisions, options.depth).await
            }
            Self::GitHub { owner, repo, branch } => {
                let config = GitHubConfig {
                    base_url: options.github_api.clone(),
                    token: std::env::var("GITHUB_TOKEN").ok().filter(|t| !t.is_empty()),
                    ..GitHubConfig::default()
                };
                let source = GitHub::with_cache(owner, repo, config, cache.clone())?;
                fetched(&source, branch.as_deref().unwrap_or(default_branch), revisions, options.depth).await
            }
            Self::GoProxy { module, branch } => {
                let proxy = go_proxy();
                let list = go_proxy_list(&proxy, module)
                    .await
                    .with_context(|| format!("listing the versions of {module} on {proxy} (GOPROXY)"))?;
                module_history(module, &list, branch.as_deref().unwrap_or(default_branch))
            }
        }
    }
}

/// The first module proxy of `$GOPROXY` (default proxy.golang.org).
fn go_proxy() -> String {
    let value = std::env::var("GOPROXY").unwrap_or_default();
    value
        .split([',', '|'])
        .map(str::trim)
        .find(|p| p.starts_with("http://") || p.starts_with("https://"))
        .unwrap_or("https://proxy.golang.org")
        .trim_end_matches('/')
        .to_owned()
}

/// `$proxy/<escaped module>/@v/list`: one version per line (the Go module proxy protocol).
async fn go_proxy_list(proxy: &str, module: &str) -> Result<String> {
    // Upper-case letters are escaped as `!` and the lower-case letter.
    let escaped: String = module
        .chars()
        .flat_map(|c| if c.is_ascii_uppercase() { vec!['!', c.to_ascii_lowercase()] } else { vec![c] })
        .collect();
    let url = format!("{proxy}/{escaped}/@v/list");
    let client = reqwest::Client::builder().timeout(std::time::Duration::from_secs(30)).build()?;
    let response = client.get(&url).send().await.with_context(|| format!("GET {url}"))?;
    let status = response.status();
    let body = response.text().await.with_context(|| format!("GET {url}"))?;
    if !status.is_success() {
        bail!("GET {url}: {status}: {}", body.trim());
    }
    Ok(body)
}

/// The release history of a module from its proxy version list, newest first; on `release-1.X`
/// only the `v1.X.*` versions.
fn module_history(module: &str, list: &str, branch: &str) -> Result<History> {
    let minor = branch.strip_prefix("release-").map(|line| format!("v{line}."));
    let mut versions: Vec<(semver::Version, &str)> = list
        .lines()
        .map(str::trim)
        .filter(|v| minor.as_deref().is_none_or(|prefix| v.starts_with(prefix)))
        .filter_map(|v| Some((parse_version(v)?, v)))
        .collect();
    if versions.is_empty() {
        bail!("the Go module proxy lists no versions of {module} for {branch}");
    }
    versions.sort_by(|a, b| b.0.cmp_precedence(&a.0).then(b.1.cmp(a.1)));
    let history = History::new(versions.into_iter().map(|(_, v)| v.to_owned()))?;
    Ok(history.with_fallback_reason(format!(
        "not a version of {module} on {branch} as the Go module proxy lists them (its release tags)"
    )))
}

/// The first-parent history of `branch`, with the source's tags and branches that point into it as
/// aliases, and every revision the runs name that the source resolves into it (a tag, an
/// abbreviated commit id, a CI version's commit) as an alias too. A revision it cannot place is
/// left for the engine to report as unplaced, with the reason the source gave.
async fn fetched(
    source: &dyn HistorySource,
    branch: &str,
    revisions: &BTreeMap<String, i64>,
    depth: usize,
) -> Result<History> {
    let commits = source.first_parent_commits(branch, &Walk::limit(depth)).await?;
    let history = history_of(&commits)?;
    let refs: Vec<(String, String)> = match source.refs().await {
        Ok(refs) => refs.into_iter().filter(|(_, commit)| history.ordinal(commit).is_some()).collect(),
        Err(error) => {
            tracing::warn!(
                "listing the tags of {}: {error}; only the revisions builds name are resolved",
                source.describe()
            );
            Vec::new()
        }
    };
    let mut reasons = Vec::new();
    let head = commits.first().map(|commit| commit.sha.clone());
    let truncated = commits.len() >= depth;
    let history = history.with_tags(refs)?;
    let mut aliases = Vec::new();
    for revision in revisions.keys().filter(|revision| history.ordinal(revision).is_none()) {
        let asked = lkg::history::ci_commit(revision).unwrap_or(revision);
        match source.resolve(asked).await {
            Ok(commit) if history.ordinal(&commit).is_some() => aliases.push((revision.clone(), commit)),
            Ok(commit) => {
                let reason = outside_reason(source, branch, head.as_deref(), &commit, truncated, depth).await;
                reasons.push((revision.clone(), format!("{commit} in {}: {reason}", source.describe())));
            }
            Err(SourceError::UnknownRevision { .. }) => reasons.push((
                revision.clone(),
                format!(
                    "{} has no commit, tag or branch {asked:?}: not a version of this repository",
                    source.describe()
                ),
            )),
            Err(error) => reasons.push((revision.clone(), format!("{}: {error}", source.describe()))),
        }
    }
    let fallback = format!(
        "not among the {} first-parent commits of {branch} fetched from {}, nor a tag, branch or abbreviation of one",
        commits.len(),
        source.describe()
    );
    let history = history.with_tags(aliases)?.with_fallback_reason(fallback);
    Ok(reasons.into_iter().fold(history, |history, (revision, reason)| history.with_reason(revision, reason)))
}

/// Why a commit the source knows is not in the fetched first-parent history of `branch`.
async fn outside_reason(
    source: &dyn HistorySource,
    branch: &str,
    head: Option<&str>,
    commit: &str,
    truncated: bool,
    depth: usize,
) -> String {
    let Some(head) = head else { return format!("{branch} has no commits") };
    match source.is_ancestor(commit, head).await {
        Ok(true) if truncated => {
            format!("older than the {depth} newest first-parent commits of {branch} fetched: raise --history-depth")
        }
        Ok(true) => format!(
            "reachable from {branch} but not on its first-parent line (a commit of a branch merged into it): test the merge commit"
        ),
        Ok(false) => format!("not on {branch}: a commit of another branch (a release line has its own history)"),
        Err(error) => format!("not among the first-parent commits of {branch} fetched ({error})"),
    }
}

/// The tested versions, newest first: as versions when all are (semver precedence: build
/// metadata ignored, numeric identifiers compared as numbers; ties by first test), else by first
/// test. A revision not in it was never tested: the history knows nothing else.
fn tested(revisions: &BTreeMap<String, i64>) -> Result<History> {
    let mut ordered: Vec<(&String, i64)> = revisions.iter().map(|(revision, at)| (revision, *at)).collect();
    if ordered.iter().any(|(revision, _)| revision.is_empty()) {
        bail!("a build names an empty version");
    }
    let versions: Option<Vec<semver::Version>> = ordered.iter().map(|(revision, _)| parse_version(revision)).collect();
    match versions {
        Some(_) => ordered.sort_by(|a, b| {
            let (va, vb) = (parse_version(a.0).expect("parsed above"), parse_version(b.0).expect("parsed above"));
            va.cmp_precedence(&vb).then(a.1.cmp(&b.1)).then(a.0.cmp(b.0))
        }),
        None => ordered.sort_by(|a, b| (a.1, a.0).cmp(&(b.1, b.0))),
    }
    let history = History::new(ordered.into_iter().rev().map(|(revision, _)| revision.clone()))?;
    Ok(history.with_fallback_reason(
        "no build in the index tested it (a `tested` history holds only the versions builds ran with: give a git: or github: history to name other revisions)",
    ))
}

/// `v1.36.4`, `1.37.0-rc.1`, `v1.37.0-alpha.1.234+0123456789abcd`, `v1.34.1+k3s1` as semver.
pub(crate) fn parse_version(text: &str) -> Option<semver::Version> {
    semver::Version::parse(text.strip_prefix('v').unwrap_or(text)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pre_releases_are_ordered_as_semver_orders_them() {
        let history = tested(&revisions(&[
            ("v1.38.0-alpha.10", 1),
            ("v1.38.0-alpha.9", 2),
            ("v1.38.0-beta.0", 3),
            ("v1.38.0-rc.1", 4),
            ("v1.38.0", 5),
            ("v1.38.0-alpha.2", 6),
        ]))
        .unwrap();
        assert_eq!(
            newest_first(&history),
            ["v1.38.0", "v1.38.0-rc.1", "v1.38.0-beta.0", "v1.38.0-alpha.10", "v1.38.0-alpha.9", "v1.38.0-alpha.2"]
        );
    }

    fn revisions(list: &[(&str, i64)]) -> BTreeMap<String, i64> {
        list.iter().map(|(r, at)| (r.to_string(), *at)).collect()
    }

    fn newest_first(history: &History) -> Vec<&str> {
        history.newest_first().collect()
    }

    #[test]
    fn ci_versions_are_ordered_by_semver_precedence_ignoring_build_metadata() {
        // As dl.k8s.io/ci/latest.txt names them: the build number is numeric, the commit is metadata.
        let history = tested(&revisions(&[
            ("v1.37.0-alpha.1.234+fedcba98765432", 1),
            ("v1.37.0-alpha.1.99+0123456789abcd", 2),
            ("v1.37.0-alpha.2", 3),
            ("v1.36.1+k3s1", 4),
            ("v1.36.1", 5),
            ("v1.36.1-rc.0+k3s1", 6),
        ]))
        .unwrap();
        assert_eq!(
            newest_first(&history),
            [
                "v1.37.0-alpha.2",
                "v1.37.0-alpha.1.234+fedcba98765432",
                "v1.37.0-alpha.1.99+0123456789abcd",
                // Equal precedence (build metadata ignored): the later tested is newer.
                "v1.36.1",
                "v1.36.1+k3s1",
                "v1.36.1-rc.0+k3s1",
            ]
        );
    }

    #[test]
    fn release_versions_are_ordered_as_releases_whenever_they_were_tested() {
        let history =
            tested(&revisions(&[("v1.37.1", 1), ("v1.36.4", 5), ("v1.37.0-rc.1", 9), ("v1.100.0", 2)])).unwrap();
        assert_eq!(newest_first(&history), ["v1.100.0", "v1.37.1", "v1.37.0-rc.1", "v1.36.4"]);
    }

    #[test]
    fn commit_ids_are_ordered_by_when_they_were_first_tested() {
        let history = tested(&revisions(&[("aaa", 30), ("bbb", 10), ("v1.2.3", 20)])).unwrap();
        assert_eq!(newest_first(&history), ["aaa", "v1.2.3", "bbb"]);
    }

    #[test]
    fn history_specs_parse_and_bad_ones_say_what_is_expected() {
        assert_eq!("tested".parse(), Ok(HistorySpec::Tested));
        assert_eq!(
            "git:/src/k8s@release-1.36".parse(),
            Ok(HistorySpec::Git { path: "/src/k8s".into(), branch: Some("release-1.36".into()) })
        );
        assert_eq!(
            "github:kubernetes/cloud-provider-gcp".parse(),
            Ok(HistorySpec::GitHub { owner: "kubernetes".into(), repo: "cloud-provider-gcp".into(), branch: None })
        );
        assert_eq!(
            "goproxy:k8s.io/cloud-provider-aws".parse(),
            Ok(HistorySpec::GoProxy { module: "k8s.io/cloud-provider-aws".into(), branch: None })
        );
        for bad in ["svn:/x", "github:kubernetes", "git:", "", "goproxy:", "goproxy:nodots"] {
            let error = bad.parse::<HistorySpec>().unwrap_err();
            assert!(error.contains("git:PATH[@BRANCH]"), "{bad}: {error}");
        }
    }

    #[test]
    fn a_go_module_history_is_its_release_tags_newest_first_per_line() {
        // As proxy.golang.org lists k8s.io/cloud-provider-aws (unordered).
        let list = "v1.36.2\nv1.35.3\nv1.37.0\nv1.37.1\nv1.34.4\nv1.37.0-rc.1\n";
        let all = module_history("k8s.io/cloud-provider-aws", list, "master").unwrap();
        assert_eq!(newest_first(&all), ["v1.37.1", "v1.37.0", "v1.37.0-rc.1", "v1.36.2", "v1.35.3", "v1.34.4"]);
        let line = module_history("k8s.io/cloud-provider-aws", list, "release-1.37").unwrap();
        assert_eq!(newest_first(&line), ["v1.37.1", "v1.37.0", "v1.37.0-rc.1"]);
        let error = module_history("k8s.io/cloud-provider-aws", list, "release-1.99").unwrap_err().to_string();
        assert!(error.contains("no versions of k8s.io/cloud-provider-aws for release-1.99"), "{error}");
    }

    #[tokio::test]
    async fn a_go_module_history_comes_from_the_proxy_in_goproxy() {
        let app = axum::Router::new().route(
            "/k8s.io/cloud-provider-aws/@v/list",
            axum::routing::get(|| async { "v1.36.2\nv1.37.1\nv1.37.0\n" }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let list = go_proxy_list(&base, "k8s.io/cloud-provider-aws").await.unwrap();
        let history = module_history("k8s.io/cloud-provider-aws", &list, "master").unwrap();
        assert_eq!(newest_first(&history), ["v1.37.1", "v1.37.0", "v1.36.2"]);
        let missing = go_proxy_list(&base, "k8s.io/nope").await.unwrap_err().to_string();
        assert!(missing.contains("404"), "{missing}");
    }

    /// A GitHub that lists two commits with an ETag, answers 304 to a matching `If-None-Match`,
    /// and 500 to everything once `failing` is set; it records the status of each answer.
    mod fake_github {
        use std::sync::{Arc, Mutex};

        use axum::http::{HeaderMap, StatusCode, header};
        use axum::response::{IntoResponse, Response};

        #[derive(Default)]
        pub struct GitHub {
            pub failing: Mutex<bool>,
            pub answers: Mutex<Vec<u16>>,
        }

        pub async fn serve() -> (String, Arc<GitHub>) {
            let github = Arc::new(GitHub::default());
            let state = github.clone();
            let app = axum::Router::new().route(
                "/repos/kubernetes/kubernetes/commits",
                axum::routing::get(move |headers: HeaderMap| answer(state.clone(), headers)),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let base = format!("http://{}", listener.local_addr().unwrap());
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
            (base, github)
        }

        async fn answer(github: Arc<GitHub>, headers: HeaderMap) -> Response {
            let response = if *github.failing.lock().unwrap() {
                StatusCode::INTERNAL_SERVER_ERROR.into_response()
            } else if headers.get(header::IF_NONE_MATCH).is_some_and(|etag| etag == "\"v1\"") {
                StatusCode::NOT_MODIFIED.into_response()
            } else {
                let commit = |sha: &str, parent: &str| {
                    serde_json::json!({"sha": sha, "commit": {"message": sha, "author": {"date": "2026-11-01T00:00:00Z"}},
                                       "parents": [{"sha": parent}], "html_url": null})
                };
                let body = serde_json::json!([commit("bbb", "aaa"), commit("aaa", "000")]).to_string();
                ([(header::ETAG, "\"v1\""), (header::CONTENT_TYPE, "application/json")], body).into_response()
            };
            github.answers.lock().unwrap().push(response.status().as_u16());
            response
        }
    }

    #[tokio::test]
    async fn github_histories_are_cached_in_the_index_across_processes_and_served_while_github_fails() {
        let (base, github) = fake_github::serve().await;
        let dir = tempfile::tempdir().unwrap();
        let database = format!("sqlite://{}", dir.path().join("index.sqlite").display());
        let options = LkgOptions {
            kubernetes_history: HistorySpec::Tested,
            provider_histories: BTreeMap::new(),
            depth: 100,
            github_api: base,
        };
        let spec: HistorySpec = "github:kubernetes/kubernetes".parse().unwrap();
        // Each load opens the index anew, as each `harness lkg` process does.
        let load = || async {
            let index = crate::index::Index::open(&database).await.unwrap();
            let cache: Arc<dyn HistoryCache> = Arc::new(super::super::cache::IndexCache(index));
            spec.history("kubernetes", "master", &BTreeMap::new(), &options, &cache).await
        };
        assert_eq!(newest_first(&load().await.unwrap()), ["bbb", "aaa"]);
        assert_eq!(newest_first(&load().await.unwrap()), ["bbb", "aaa"]);
        assert_eq!(*github.answers.lock().unwrap(), [200, 304], "the second load was a conditional request");
        *github.failing.lock().unwrap() = true;
        assert_eq!(newest_first(&load().await.unwrap()), ["bbb", "aaa"], "the cached history while GitHub fails");
        assert!(github.answers.lock().unwrap()[2..].iter().all(|status| *status == 500));
    }
}

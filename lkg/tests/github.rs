//! The `GitHub` source against recorded GitHub REST API v3 answers (`tests/data/github/`, see its
//! README) served by a local axum server on 127.0.0.1.
#![cfg(feature = "sources")]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use lkg::sources::{GitHub, GitHubConfig, HistorySource, MemoryCache, SourceError, Walk, fetch_history, history_of};

const V1_30: [(&str, &str); 6] = [
    ("v1.30.5", "74e84a90c725047b1328ff3d589fedb1cb7a120e"),
    ("v1.30.4", "a51b3b711150f57ffc1f526a640ec058514ed596"),
    ("v1.30.3", "6fc0a69044f1ac4c13841ec4391224a2df241460"),
    ("v1.30.2", "39683505b630ff2121012f3c5b16215a1449d5ed"),
    ("v1.30.1", "6911225c3f747e1cd9d109c305436d08b668f086"),
    ("v1.30.0", "7c48c2bd72b9bf5c44d21d7338cc7bea77d0ad2a"),
];

fn sha(tag: &str) -> &'static str {
    V1_30.iter().find(|(t, _)| *t == tag).unwrap().1
}

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/data/github/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

#[derive(Debug, Clone)]
struct Canned {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Canned {
    fn json(body: String, headers: &[(&str, String)]) -> Self {
        let mut all: Vec<(String, String)> = vec![
            ("content-type".into(), "application/json; charset=utf-8".into()),
            ("x-github-api-version-selected".into(), "2022-11-28".into()),
            ("x-ratelimit-limit".into(), "60".into()),
            ("x-ratelimit-remaining".into(), "59".into()),
            ("x-ratelimit-reset".into(), (now() + 3600).to_string()),
            ("x-ratelimit-used".into(), "1".into()),
            ("x-ratelimit-resource".into(), "core".into()),
        ];
        all.retain(|(name, _)| headers.iter().all(|(extra, _)| extra != name));
        all.extend(headers.iter().map(|(name, value)| (name.to_string(), value.clone())));
        Self { status: 200, headers: all, body }
    }

    fn error(status: u16, message: &str, headers: &[(&str, String)]) -> Self {
        let body = format!(
            r#"{{"message":"{message}","documentation_url":"https://docs.github.com/rest","status":"{status}"}}"#
        );
        Self { status, ..Self::json(body, headers) }
    }

    fn rate_limited(reset: u64) -> Self {
        let message = "API rate limit exceeded for 127.0.0.1. (But here's the good news: Authenticated requests get a \
                       higher rate limit. Check out the documentation for more details.)";
        Self::error(403, message, &[("x-ratelimit-remaining", "0".into()), ("x-ratelimit-reset", reset.to_string())])
    }
}

#[derive(Default)]
struct Mock {
    /// Answers by path and query; `If-None-Match` equal to their ETag gets a 304.
    routes: HashMap<String, Canned>,
    /// One-shot answers, used before `routes`.
    queued: Mutex<HashMap<String, VecDeque<Canned>>>,
    /// Answers every request to the path and query while set.
    outage: Mutex<HashMap<String, Canned>>,
    /// (path and query, If-None-Match, status answered).
    log: Mutex<Vec<(String, Option<String>, u16)>>,
    /// The headers of every request, in order.
    headers: Mutex<Vec<axum::http::HeaderMap>>,
}

impl Mock {
    fn queue(&self, key: &str, canned: Canned) {
        self.queued.lock().unwrap().entry(key.into()).or_default().push_back(canned);
    }

    fn requests(&self) -> Vec<(String, Option<String>, u16)> {
        self.log.lock().unwrap().clone()
    }
}

async fn answer(State(mock): State<Arc<Mock>>, request: Request) -> Response {
    let key = request.uri().path_and_query().map(|pq| pq.as_str().to_owned()).unwrap_or_default();
    mock.headers.lock().unwrap().push(request.headers().clone());
    let if_none_match = request.headers().get("if-none-match").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let queued = mock.queued.lock().unwrap().get_mut(&key).and_then(VecDeque::pop_front);
    let outage = mock.outage.lock().unwrap().get(&key).cloned();
    let canned = queued
        .or(outage)
        .or_else(|| mock.routes.get(&key).cloned())
        .unwrap_or_else(|| Canned::error(404, "Not Found", &[]));
    let etag = canned.headers.iter().find(|(name, _)| name == "etag").map(|(_, value)| value.clone());
    let not_modified = canned.status == 200 && etag.is_some() && etag == if_none_match;
    let status = if not_modified { 304 } else { canned.status };
    mock.log.lock().unwrap().push((key, if_none_match, status));
    let mut response = Response::builder().status(StatusCode::from_u16(status).unwrap());
    for (name, value) in &canned.headers {
        if !(not_modified && name == "content-type") {
            response = response.header(name, value);
        }
    }
    response.body(if not_modified { Body::empty() } else { Body::from(canned.body) }).unwrap()
}

const K: &str = "/repos/kubernetes/kubernetes";

fn page_key(page: usize) -> String {
    format!("{K}/commits?sha=release-1.30&per_page=2&page={page}")
}

/// The recorded answers, with `Link` headers pointing at `base` as GitHub points them at itself.
fn routes(base: &str) -> HashMap<String, Canned> {
    let mut routes = HashMap::new();
    for page in 1..=3 {
        let link = |n: usize, rel: &str| format!("<{base}{}>; rel=\"{rel}\"", page_key(n));
        let mut links = Vec::new();
        if page > 1 {
            links.extend([link(page - 1, "prev"), link(1, "first")]);
        }
        if page < 3 {
            links.extend([link(page + 1, "next"), link(3, "last")]);
        }
        let body = fixture(&format!("kubernetes-release-1.30-commits-page{page}.json"));
        let etag = format!("W/\"4f3c2a1b{page:0>24}\"");
        routes.insert(page_key(page), Canned::json(body, &[("etag", etag), ("link", links.join(", "))]));
    }
    let compare = fixture("kubernetes-compare-v1.30.0...v1.30.2.json");
    routes.insert(format!("{K}/compare/v1.30.0...v1.30.2"), Canned::json(compare, &[("etag", "W/\"c0ffee\"".into())]));
    let tag = fixture("kubernetes-commits-v1.30.0.json");
    routes.insert(format!("{K}/commits/v1.30.0"), Canned::json(tag, &[("etag", "W/\"7a9\"".into())]));
    routes.insert(format!("{K}/commits/v9.9.9"), Canned::error(422, "No commit found for SHA: v9.9.9", &[]));
    let aws = fixture("cloud-provider-aws-master-commits-page1.json");
    routes.insert(
        "/repos/kubernetes/cloud-provider-aws/commits?sha=master&per_page=2&page=1".into(),
        Canned::json(aws, &[]),
    );
    routes
}

async fn serve() -> (String, Arc<Mock>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let mock = Arc::new(Mock { routes: routes(&base), ..Mock::default() });
    let app = Router::new().fallback(answer).with_state(mock.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (base, mock)
}

fn config(base: &str) -> GitHubConfig {
    GitHubConfig {
        base_url: base.into(),
        per_page: 2,
        max_retries: 3,
        min_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(40),
        max_rate_limit_wait: Duration::from_secs(5),
        timeout: Duration::from_secs(5),
        ..GitHubConfig::default()
    }
}

fn kubernetes(base: &str) -> GitHub {
    GitHub::new("kubernetes", "kubernetes", config(base)).unwrap()
}

fn shas(commits: &[lkg::sources::Commit]) -> Vec<&str> {
    commits.iter().map(|commit| commit.sha.as_str()).collect()
}

fn statuses(mock: &Mock) -> Vec<u16> {
    mock.requests().iter().map(|(_, _, status)| *status).collect()
}

#[tokio::test]
async fn a_branch_is_listed_across_three_pages_through_the_link_header() {
    let (base, mock) = serve().await;
    let github = kubernetes(&base);
    let commits = github.first_parent_commits("release-1.30", &Walk::limit(100)).await.unwrap();
    assert_eq!(shas(&commits), V1_30.map(|(_, sha)| sha));
    let requested: Vec<String> = mock.requests().into_iter().map(|(key, _, _)| key).collect();
    assert_eq!(requested, [page_key(1), page_key(2), page_key(3)]);

    let newest = &commits[0];
    assert_eq!(newest.summary(), "Release commit for Kubernetes v1.30.5");
    assert_eq!(newest.author_date.as_deref(), Some("2024-09-12T00:17:07Z"));
    assert_eq!(newest.parents, [sha("v1.30.4")]);
    assert_eq!(
        newest.url.as_deref(),
        Some("https://github.com/kubernetes/kubernetes/commit/74e84a90c725047b1328ff3d589fedb1cb7a120e")
    );
    let history = history_of(&commits).unwrap();
    assert_eq!(history.ordinal(sha("v1.30.0")), Some(0));
    assert_eq!(history.ordinal(sha("v1.30.5")), Some(5));
}

#[tokio::test]
async fn a_listing_stops_at_the_limit_or_a_known_commit_without_fetching_more_pages() {
    let (base, mock) = serve().await;
    let github = kubernetes(&base);
    let three = github.first_parent_commits("release-1.30", &Walk::limit(3)).await.unwrap();
    assert_eq!(shas(&three), [sha("v1.30.5"), sha("v1.30.4"), sha("v1.30.3")]);
    assert_eq!(mock.requests().len(), 2);
    let newer = github.first_parent_commits("release-1.30", &Walk::until(100, sha("v1.30.3"))).await.unwrap();
    assert_eq!(shas(&newer), [sha("v1.30.5"), sha("v1.30.4")]);
}

#[tokio::test]
async fn the_first_parent_chain_skips_commits_of_merged_branches() {
    let (base, _) = serve().await;
    let github = GitHub::new("kubernetes", "cloud-provider-aws", config(&base)).unwrap();
    let commits = github.first_parent_commits("master", &Walk::limit(100)).await.unwrap();
    assert_eq!(
        shas(&commits),
        ["77f3729b88ac56f90ceec2b4e0c2b85831e19b36", "cc974d367fd79151f15b235eef30b92fd7d6d144"]
    );
}

#[tokio::test]
async fn a_second_listing_is_conditional_and_a_304_serves_the_cached_pages() {
    let (base, mock) = serve().await;
    let github = kubernetes(&base);
    let first = github.first_parent_commits("release-1.30", &Walk::limit(100)).await.unwrap();
    let second = github.first_parent_commits("release-1.30", &Walk::limit(100)).await.unwrap();
    assert_eq!(first, second);
    let requests = mock.requests();
    assert_eq!(requests.len(), 6);
    for (key, if_none_match, status) in &requests[3..] {
        assert_eq!(*status, 304, "{key}");
        assert!(if_none_match.as_deref().is_some_and(|etag| etag.starts_with("W/\"4f3c2a1b")), "{key}");
    }
    assert!(requests[..3].iter().all(|(_, if_none_match, status)| if_none_match.is_none() && *status == 200));
    assert!(github.take_warnings().is_empty());
}

#[tokio::test]
async fn a_used_up_rate_limit_that_resets_soon_is_waited_out() {
    let (base, mock) = serve().await;
    let github = kubernetes(&base);
    mock.queue(&page_key(1), Canned::rate_limited(now() + 1));
    let started = Instant::now();
    let commits = github.first_parent_commits("release-1.30", &Walk::limit(2)).await.unwrap();
    assert_eq!(shas(&commits), [sha("v1.30.5"), sha("v1.30.4")]);
    assert_eq!(statuses(&mock), [403, 200]);
    assert!(started.elapsed() >= Duration::from_millis(250), "waited {:?}", started.elapsed());
}

#[tokio::test]
async fn a_rate_limit_that_resets_later_is_a_clear_error_naming_the_reset_time() {
    let (base, mock) = serve().await;
    let github = kubernetes(&base);
    let reset = 4_102_444_800; // 2100-01-01
    mock.queue(&page_key(1), Canned::rate_limited(reset));
    let error = github.first_parent_commits("release-1.30", &Walk::limit(2)).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "GitHub's rate limit is used up for {base}{}; it resets at 2100-01-01T00:00:00Z (unix time {reset}): wait until \
             then, or configure a token for a higher limit",
            page_key(1)
        )
    );
    assert_eq!(statuses(&mock), [403], "no retry before the reset");
}

#[tokio::test]
async fn a_secondary_rate_limit_with_retry_after_is_waited_out() {
    let (base, mock) = serve().await;
    let github = kubernetes(&base);
    let message = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.";
    mock.queue(&page_key(1), Canned::error(429, message, &[("retry-after", "0".into())]));
    let commits = github.first_parent_commits("release-1.30", &Walk::limit(1)).await.unwrap();
    assert_eq!(shas(&commits), [sha("v1.30.5")]);
    assert_eq!(statuses(&mock), [429, 200]);
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff_then_succeed() {
    let (base, mock) = serve().await;
    let github = kubernetes(&base);
    mock.queue(&page_key(1), Canned::error(500, "Server Error", &[]));
    mock.queue(&page_key(1), Canned::error(502, "Bad Gateway", &[]));
    let commits = github.first_parent_commits("release-1.30", &Walk::limit(2)).await.unwrap();
    assert_eq!(commits.len(), 2);
    assert_eq!(statuses(&mock), [500, 502, 200]);
}

#[tokio::test]
async fn server_errors_that_persist_are_a_clear_error_and_cached_history_is_still_served() {
    let (base, mock) = serve().await;
    let cache = Arc::new(MemoryCache::new());
    let github = GitHub::with_cache("kubernetes", "kubernetes", config(&base), cache.clone()).unwrap();

    // Nothing cached yet: the error says what happened and what to do.
    mock.outage.lock().unwrap().insert(page_key(1), Canned::error(500, "Server Error", &[]));
    let error = github.first_parent_commits("release-1.30", &Walk::limit(100)).await.unwrap_err();
    assert_eq!(error, SourceError::Server { url: format!("{base}{}", page_key(1)), status: 500, attempts: 4 });
    assert_eq!(
        error.to_string(),
        format!("GitHub answered 500 to {base}{}, 4 times in a row with backoff; try again later", page_key(1))
    );
    assert_eq!(statuses(&mock), [500; 4]);

    // Once the history is cached, an outage serves it, with a warning.
    mock.outage.lock().unwrap().clear();
    let fresh = github.first_parent_commits("release-1.30", &Walk::limit(100)).await.unwrap();
    assert_eq!(cache.len(), 3);
    for page in 1..=3 {
        mock.outage.lock().unwrap().insert(page_key(page), Canned::error(503, "Service Unavailable", &[]));
    }
    let served = github.first_parent_commits("release-1.30", &Walk::limit(100)).await.unwrap();
    assert_eq!(served, fresh);
    let warnings = github.take_warnings();
    assert_eq!(warnings.len(), 3, "{warnings:#?}");
    assert!(warnings[0].starts_with(&format!("serving the copy of {base}{} cached at unix time", page_key(1))));
    assert!(warnings[0].contains("GitHub answered 503"), "{}", warnings[0]);

    // A rate limit with a late reset is served from the cache likewise.
    mock.outage.lock().unwrap().insert(page_key(1), Canned::rate_limited(4_102_444_800));
    assert_eq!(github.first_parent_commits("release-1.30", &Walk::limit(100)).await.unwrap(), fresh);
    assert!(github.take_warnings()[0].contains("rate limit"));
}

#[tokio::test]
async fn compare_lists_the_commits_between_two_revisions_newest_first() {
    let (base, _) = serve().await;
    let commits = kubernetes(&base).compare("v1.30.0", "v1.30.2").await.unwrap();
    assert_eq!(shas(&commits), [sha("v1.30.2"), sha("v1.30.1")]);
    assert_eq!(commits[1].summary(), "Release commit for Kubernetes v1.30.1");
}

#[tokio::test]
async fn requests_carry_the_token_the_api_version_and_a_user_agent_as_github_requires() {
    let (base, mock) = serve().await;
    let with_token = GitHubConfig { token: Some("ghp_harness_test".into()), ..config(&base) };
    GitHub::new("kubernetes", "kubernetes", with_token).unwrap().resolve("v1.30.0").await.unwrap();
    kubernetes(&base).resolve("v1.30.0").await.unwrap();
    let headers = mock.headers.lock().unwrap().clone();
    let [authenticated, anonymous] = headers.as_slice() else { panic!("two requests, got {}", headers.len()) };
    let header = |headers: &axum::http::HeaderMap, name: &str| {
        headers.get(name).map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default()
    };
    assert_eq!(header(authenticated, "authorization"), "Bearer ghp_harness_test");
    assert!(anonymous.get("authorization").is_none(), "{anonymous:?}");
    for headers in [authenticated, anonymous] {
        assert_eq!(header(headers, "accept"), "application/vnd.github+json");
        assert_eq!(header(headers, "x-github-api-version"), "2022-11-28");
        assert!(header(headers, "user-agent").starts_with("cloud-provider-harness/"), "{headers:?}");
    }
}

#[test]
fn a_token_no_header_can_carry_is_refused_naming_it() {
    let config = GitHubConfig { token: Some("ghp_harness_test\n".into()), ..config("http://127.0.0.1:1") };
    let error = GitHub::new("kubernetes", "kubernetes", config).unwrap_err().to_string();
    assert!(error.contains("GITHUB_TOKEN") && error.contains("line break"), "{error}");
}

#[tokio::test]
async fn a_tag_resolves_to_its_commit_and_an_unknown_one_is_a_clear_error() {
    let (base, _) = serve().await;
    let github = kubernetes(&base);
    assert_eq!(github.resolve("v1.30.0").await.unwrap(), sha("v1.30.0"));
    let error = github.resolve("v9.9.9").await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "\"v9.9.9\" is not a commit, branch or tag of kubernetes/kubernetes; fetch it or check its spelling"
    );
    let error = GitHub::new("kubernetes", "no-such-repo", config(&base))
        .unwrap()
        .first_parent_commits("main", &Walk::limit(5))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("(404 Not Found): check the owner, repository, branch and tag names"),
        "{error}"
    );
}

#[tokio::test]
async fn a_history_from_github_orders_runs_by_release_tags() {
    let (base, _) = serve().await;
    let history = fetch_history(&kubernetes(&base), "release-1.30", &Walk::limit(100), &["v1.30.0"]).await.unwrap();
    assert_eq!(history.resolve("v1.30.0"), Some(sha("v1.30.0")));
    let provider =
        lkg::ProviderSpec { history: lkg::History::new(["p2", "p1"]).unwrap(), policy: lkg::ProviderPolicy::default() };
    let mut engine = lkg::Engine::new(history, [("local".to_string(), provider)].into());
    let run = |build: &str, kubernetes: &str, attempt: lkg::Attempt| lkg::Run {
        build_id: build.into(),
        provider: "local".into(),
        kubernetes_version: kubernetes.into(),
        provider_version: "p1".into(),
        tests: vec![lkg::TestResult { name: "conformance".into(), attempts: vec![attempt] }],
        build_passed: None,
    };
    engine.add_run(&run("1", "v1.30.0", lkg::Attempt::Pass)).unwrap();
    engine.add_run(&run("2", sha("v1.30.3"), lkg::Attempt::Fail)).unwrap();
    assert_eq!(engine.lkg("local").unwrap().unwrap().kubernetes_commit, sha("v1.30.0"));
    let culprit = engine.culprit("local").unwrap().unwrap().kubernetes.unwrap();
    assert_eq!(culprit.commits, [sha("v1.30.3"), sha("v1.30.2"), sha("v1.30.1")]);
}

//! The dashboard's pages as an axum router, one module per area: the matrix (home), each job's
//! grid, build pages, the LKG page, the failure clusters across providers, the flakiest tests and
//! each suite's tests by provider. Data comes through [`Source`], which the harness implements
//! over its SQL index and object store. Every page is also JSON, at the same path with
//! `Accept: application/json`.

mod build;
pub use build::BUILD_LOG;
mod cache;
pub use job::FilterRejected;
mod clusters;
mod error;
pub use error::SourceError;
mod flaky;
mod home;
mod job;
pub mod layout;
mod lkg_page;
mod suite;

use std::sync::Arc;

use async_trait::async_trait;
use axum::Router;
use axum::routing::get;
use serde::{Deserialize, Serialize};

use crate::grid::{Cell, Column, GridData};
use crate::matrix::MatrixBuild;
use crate::suite_table::SuiteBuild;
use crate::trends::JobTrend;
use failures::Failure;

/// A job as the home page lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSummary {
    pub job: String,
    pub provider: Option<String>,
}

/// Where the dashboard's data comes from. Each error says its kind, which decides the page's
/// status ([`SourceError`]).
#[async_trait]
pub trait Source: Send + Sync + 'static {
    async fn jobs(&self) -> Result<Vec<JobSummary>, SourceError>;
    /// Every finished build that names its provider and Kubernetes version.
    async fn matrix(&self) -> Result<Vec<MatrixBuild>, SourceError>;
    /// Every suite with results, by name (the runner's own steps left out).
    async fn suites(&self) -> Result<Vec<String>, SourceError>;
    /// Of each provider × Kubernetes minor, the newest finished build with results of `suite`
    /// ([`crate::suite_table::newest_per_column`]), with those results; empty for a suite
    /// without any.
    async fn suite(&self, suite: &str) -> Result<Vec<SuiteBuild>, SourceError>;
    /// A number that changes whenever the job's builds or results do; `None` for an unknown job.
    /// Rendered grids are kept until it changes.
    async fn grid_generation(&self, job: &str) -> Result<Option<i64>, SourceError>;
    /// A number that changes whenever any build or result does. Rendered failure clusters and
    /// flakiest tests are kept until it changes.
    async fn index_generation(&self) -> Result<i64, SourceError>;
    /// The job's latest `builds` builds (newest first), their tests and results; `None` for an
    /// unknown job.
    async fn grid(&self, job: &str, builds: usize) -> Result<Option<GridData>, SourceError>;
    /// Every failed result of the builds started at or after `since` (epoch seconds), with its
    /// message, for the failure clusters.
    async fn failures(&self, since: i64) -> Result<Vec<Failure>, SourceError>;
    /// Each job's latest `builds` finished builds, oldest first, for its sparklines.
    async fn trends(&self, builds: usize) -> Result<Vec<JobTrend>, SourceError>;
    /// One build; `None` when the job has no such build.
    async fn build(&self, job: &str, build: &str) -> Result<Option<BuildView>, SourceError>;
    /// A file of a build's directory in the object store; `None` when there is no such file (or no
    /// store).
    async fn artifact(&self, job: &str, build: &str, path: &str) -> Result<Option<Vec<u8>>, SourceError>;
    /// The LKG answers now served, if any are loaded.
    fn lkg(&self) -> Option<Arc<lkg::api::Snapshot>>;
    /// The web URL of a provider's repository (`kubernetes` for kubernetes/kubernetes), for commit
    /// links.
    fn repo(&self, provider: &str) -> Option<String>;
}

/// What a build page shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildView {
    pub job: String,
    /// With its `finished_at`.
    #[serde(flatten)]
    pub column: Column,
    /// SUCCESS, FAILURE, ABORTED ... as finished.json says.
    pub result: Option<String>,
    /// The build directory in the object store.
    pub artifacts_url: String,
    /// The runner's steps (Build, Up, Deploy, Test, Down) and how each went.
    pub steps: Vec<(String, Cell)>,
    /// Every other test that failed, with its message.
    pub failures: Vec<(String, Option<String>)>,
    /// Failed tests the provider lists as known failures (`known_failures`), with their messages.
    #[serde(default)]
    pub known_failures: Vec<(String, Option<String>)>,
    /// Tests by state, steps left out.
    pub counts: Vec<(Cell, usize)>,
    /// The build directory's files; `None` when the server has no store to read them from.
    pub artifacts: Option<Vec<Artifact>>,
    /// The end of `build-log.txt`, when there is one.
    pub log_tail: Option<LogTail>,
}

/// A file of a build directory, relative to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    pub path: String,
    pub size: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogTail {
    /// The last lines, whole lines only.
    pub text: String,
    /// The whole log's size in bytes.
    pub size: u64,
}

/// How many builds a grid shows unless the query says otherwise.
pub const DEFAULT_BUILDS: usize = 50;

/// The page routes, for the server's fallback message and request metrics.
pub const PATHS: &[&str] = &[
    "/",
    "/lkg",
    "/job/{job}",
    "/job/{job}/build/{build}",
    "/job/{job}/build/{build}/file/{*path}",
    "/clusters",
    "/clusters/{id}",
    "/flaky",
    "/suite/{suite}",
];

/// The router's state: the data, and the pages already rendered.
#[derive(Clone)]
struct Dashboard {
    source: Arc<dyn Source>,
    grids: Arc<cache::PageCache<job::GridKey>>,
    clusters: Arc<cache::PageCache<clusters::ClustersKey>>,
    flaky: Arc<cache::PageCache<flaky::FlakyKey>>,
    suites: Arc<cache::PageCache<suite::SuiteKey>>,
}

impl axum::extract::FromRef<Dashboard> for Arc<dyn Source> {
    fn from_ref(dashboard: &Dashboard) -> Self {
        dashboard.source.clone()
    }
}

pub fn router(source: Arc<dyn Source>) -> Router {
    Router::new()
        .route(PATHS[0], get(home::page))
        .route(PATHS[1], get(lkg_page::page))
        .route(PATHS[2], get(job::grid_page))
        .route(PATHS[3], get(build::page))
        .route(PATHS[4], get(build::file))
        .route(PATHS[5], get(clusters::list))
        .route(PATHS[6], get(clusters::one))
        .route(PATHS[7], get(flaky::page))
        .route(PATHS[8], get(suite::page))
        .with_state(Dashboard {
            source,
            grids: Arc::default(),
            clusters: Arc::new(cache::PageCache::new(Some(clusters::KEPT))),
            flaky: Arc::default(),
            suites: Arc::default(),
        })
        .layer(axum::middleware::map_response(layout::secure_headers))
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use axum::http::{StatusCode, header};

    use super::*;
    use crate::grid::Grid;

    /// One job `ci-a` with two builds, or a database that is down.
    #[derive(Default)]
    struct Fixed {
        down: bool,
        /// Every call fails with this.
        fails: Option<SourceError>,
        generation: std::sync::atomic::AtomicI64,
        grids_read: std::sync::atomic::AtomicUsize,
        failures_read: std::sync::atomic::AtomicUsize,
        snapshot: Option<Arc<lkg::api::Snapshot>>,
    }

    #[async_trait]
    impl Source for Fixed {
        async fn jobs(&self) -> Result<Vec<JobSummary>, SourceError> {
            if self.down {
                return Err(SourceError::Unavailable("connection refused".into()));
            }
            if let Some(error) = &self.fails {
                return Err(error.clone());
            }
            Ok(vec![JobSummary { job: "ci-a".into(), provider: Some("local".into()) }])
        }

        async fn matrix(&self) -> Result<Vec<MatrixBuild>, SourceError> {
            self.jobs().await?;
            let build = |build: &str, kubernetes: &str, passed| MatrixBuild {
                provider: "local".into(),
                job: "ci-a".into(),
                build: build.into(),
                kubernetes_version: kubernetes.into(),
                provider_version: Some("abc".into()),
                started_at: build.parse().unwrap(),
                passed: Some(passed),
            };
            Ok(vec![build("1", "v1.37.1", true), build("2", "v1.37.1", false), build("3", "v1.36.4", true)])
        }

        async fn suites(&self) -> Result<Vec<String>, SourceError> {
            self.jobs().await?;
            Ok(vec!["upstream load-balancers".into()])
        }

        async fn suite(&self, suite: &str) -> Result<Vec<SuiteBuild>, SourceError> {
            use crate::suite_table::SuiteResult;
            if suite != "upstream load-balancers" {
                return Ok(Vec::new());
            }
            let builds = self.matrix().await?;
            let result = |test: &str, cell, message: Option<&str>| SuiteResult {
                test: test.into(),
                cell,
                message: message.map(str::to_owned),
            };
            let udp_skip = "the provider does not declare the capability `load-balancer-udp`: <no UDP>";
            let columns = builds.into_iter().map(|build| {
                let results = vec![
                    result("[It] TCP", if build.passed == Some(true) { Cell::Pass } else { Cell::Fail }, None),
                    result("[It] UDP", Cell::Skip, Some(udp_skip)),
                    result("[It] left out", Cell::Skip, None),
                ];
                SuiteBuild { build, results }
            });
            Ok(crate::suite_table::newest_per_column(columns.collect(), |b| &b.build))
        }

        async fn grid_generation(&self, job: &str) -> Result<Option<i64>, SourceError> {
            self.jobs().await?;
            Ok((job == "ci-a").then(|| self.generation.load(std::sync::atomic::Ordering::Relaxed)))
        }

        async fn index_generation(&self) -> Result<i64, SourceError> {
            self.jobs().await?;
            Ok(self.generation.load(std::sync::atomic::Ordering::Relaxed))
        }

        async fn artifact(&self, job: &str, build: &str, path: &str) -> Result<Option<Vec<u8>>, SourceError> {
            self.jobs().await?;
            Ok((job == "ci-a" && build == "2" && path == "build-log.txt").then(|| b"line 1\nline 2\n".to_vec()))
        }

        fn lkg(&self) -> Option<Arc<lkg::api::Snapshot>> {
            self.snapshot.clone()
        }

        fn repo(&self, _provider: &str) -> Option<String> {
            None
        }

        async fn failures(&self, since: i64) -> Result<Vec<Failure>, SourceError> {
            self.jobs().await?;
            self.failures_read.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let failure = |provider: &str, build: &str, message: &str| Failure {
                provider: Some(provider.into()),
                job: format!("ci-{provider}"),
                build: build.into(),
                started_at: since + build.parse::<i64>().unwrap(),
                kubernetes_version: Some("v1.37.1".into()),
                provider_version: Some(format!("{provider}-abc")),
                test: "[sig-network] LoadBalancers should work".into(),
                message: Some(message.into()),
                normalised: None,
            };
            Ok(vec![
                failure("aws", "1", "timed out after 30s waiting for 10.0.0.1:80"),
                failure("gce", "2", "timed out after 45s waiting for 10.9.8.7:80"),
                failure("gce", "3", "quota exceeded"),
            ])
        }

        async fn trends(&self, _builds: usize) -> Result<Vec<JobTrend>, SourceError> {
            self.jobs().await?;
            let point = |build: &str, rate| crate::trends::Point {
                build: build.into(),
                started_at: 0,
                duration_seconds: Some(60),
                passed: Some(rate == 1.0),
                pass_rate: Some(rate),
            };
            Ok(vec![JobTrend { job: "ci-a".into(), points: vec![point("1", 1.0), point("2", 0.5)] }])
        }

        async fn grid(&self, job: &str, _builds: usize) -> Result<Option<GridData>, SourceError> {
            self.jobs().await?;
            self.grids_read.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if job != "ci-a" {
                return Ok(None);
            }
            let column = |build: &str| Column {
                build: build.into(),
                started_at: 0,
                finished_at: Some(60),
                kubernetes_version: Some("v1.37.1".into()),
                provider_version: None,
                state: "finished".into(),
                passed: Some(true),
            };
            let row = |column, test, cell| crate::grid::ResultRow { column, test, cell };
            let test = |name: &str| crate::grid::TestName { suite: "s".into(), name: name.into() };
            Ok(Some(GridData {
                columns: vec![column("2"), column("1")],
                tests: vec![test("t"), test("u"), test("never-run")],
                results: vec![
                    row(0, 0, Cell::Fail),
                    row(1, 0, Cell::Pass),
                    row(0, 1, Cell::Pass),
                    row(0, 2, Cell::Skip),
                    row(1, 2, Cell::Skip),
                ],
            }))
        }

        async fn build(&self, job: &str, build: &str) -> Result<Option<BuildView>, SourceError> {
            let Some(data) = self.grid(job, 2).await? else { return Ok(None) };
            let Some(column) = data.columns.into_iter().find(|c| c.build == build) else { return Ok(None) };
            Ok(Some(BuildView {
                job: job.into(),
                column,
                result: Some("FAILURE".into()),
                artifacts_url: "file:///store/logs/ci-a/2".into(),
                steps: vec![("Up".into(), Cell::Pass), ("Test".into(), Cell::Fail)],
                failures: vec![("t".into(), Some("expected <3> nodes, saw <2>".into()))],
                known_failures: vec![("k".into(), Some("affinity lost".into()))],
                counts: vec![(Cell::Pass, 1), (Cell::Fail, 1), (Cell::KnownFailure, 1)],
                artifacts: Some(vec![Artifact { path: "build-log.txt".into(), size: 14 }]),
                log_tail: Some(LogTail { text: "line 2\n".into(), size: 14 }),
            }))
        }
    }

    async fn get(down: bool, uri: &str, accept: &str) -> (StatusCode, String) {
        let request = Request::get(uri).header(header::ACCEPT, accept).body(Body::empty()).unwrap();
        let response = router(Arc::new(Fixed { down, ..Fixed::default() })).oneshot(request).await.unwrap();
        let status = response.status();
        (status, String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap())
    }

    /// A page of each area that reads the source.
    const SOURCE_PAGES: [&str; 7] = [
        "/",
        "/job/ci-a",
        "/job/ci-a/build/2",
        "/job/ci-a/build/2/file/build-log.txt",
        "/clusters",
        "/flaky",
        "/suite/upstream%20load-balancers",
    ];

    /// Each kind of source error is its own status, on every page that reads the source, and the
    /// page says what the source said.
    #[tokio::test]
    async fn a_source_error_answers_404_400_503_or_500_by_its_kind() {
        let kinds = [
            (SourceError::NotFound("no such build in the index".into()), StatusCode::NOT_FOUND),
            (SourceError::BadRequest("a filter the index refuses".into()), StatusCode::BAD_REQUEST),
            (SourceError::Unavailable("pool timed out".into()), StatusCode::SERVICE_UNAVAILABLE),
            (SourceError::Internal("column started_at holds \"x\"".into()), StatusCode::INTERNAL_SERVER_ERROR),
        ];
        for (error, status) in kinds {
            let source = Arc::new(Fixed { fails: Some(error.clone()), ..Fixed::default() });
            for uri in SOURCE_PAGES {
                let request = Request::get(uri).header(header::ACCEPT, "text/html").body(Body::empty()).unwrap();
                let response = router(source.clone()).oneshot(request).await.unwrap();
                assert_eq!(response.status(), status, "{uri} with {error:?}");
                let body = response.into_body().collect().await.unwrap().to_bytes();
                let body = String::from_utf8_lossy(&body);
                assert!(body.contains(&error.to_string().replace('"', "&quot;")), "{uri}: {body}");
            }
        }
    }

    #[tokio::test]
    async fn the_grid_is_html_or_json_at_the_same_path() {
        let (status, html) = get(false, "/job/ci-a", "text/html").await;
        assert_eq!(status, StatusCode::OK);
        assert!(html.starts_with("<!DOCTYPE html>") && html.contains(r#"<td class="fail">fail</td>"#), "{html}");
        let (_, json) = get(false, "/job/ci-a?status=fail", "application/json").await;
        let grid: Grid = serde_json::from_str(&json).unwrap();
        assert_eq!((grid.rows.len(), grid.total_rows, grid.rows[0].failing_since.as_deref()), (1, 3, Some("2")));
    }

    #[tokio::test]
    async fn the_grid_hides_the_tests_skipped_in_every_build_and_shows_them_when_asked() {
        let (_, html) = get(false, "/job/ci-a", "text/html").await;
        assert!(!html.contains(">never-run<") && html.contains(r#"href="?skipped=show">show them</a>"#), "{html}");
        assert!(html.contains("pass rate <strong>67%</strong>"), "{html}");
        assert!(
            html.contains(r#"<svg class="spark pass-rate""#)
                && html.contains("ci-a: test pass rate of the last 2 builds, oldest first: 100%, 50%"),
            "{html}"
        );
        let (_, html) = get(false, "/job/ci-a?skipped=show", "text/html").await;
        assert!(html.contains(">never-run<") && html.contains(">hide them</a>"), "{html}");
    }

    #[tokio::test]
    async fn failures_cluster_across_providers_with_a_page_per_cluster_in_html_and_json() {
        let (status, json) = get(false, "/clusters", "application/json").await;
        assert_eq!(status, StatusCode::OK, "{json}");
        let page: serde_json::Value = serde_json::from_str(&json).unwrap();
        let first = &page["clusters"][0];
        assert_eq!((&first["side"], &first["failures"]), (&"kubernetes".into(), &2.into()), "{json}");
        assert_eq!(first["providers"], serde_json::json!(["aws", "gce"]));
        assert_eq!(first["message"], "timed out after DURATION waiting for ADDR");
        assert_eq!(page["clusters"][1]["side"], "provider");
        let id = first["id"].as_str().unwrap();
        let (status, html) = get(false, &format!("/clusters/{id}"), "text/html").await;
        assert_eq!(status, StatusCode::OK, "{html}");
        assert!(html.contains(r#"<strong class="side kubernetes-side">likely Kubernetes-side</strong>: seen by aws, gce on the same Kubernetes version."#), "{html}");
        assert!(html.contains(r#"<a href="/job/ci-aws/build/1">ci-aws 1</a>"#), "{html}");
        let (_, json) = get(false, &format!("/clusters/{id}"), "application/json").await;
        let one: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(one["hits"].as_array().unwrap().len(), 2, "{json}");
        assert_eq!(get(false, "/clusters/0000000000000000", "text/html").await.0, StatusCode::NOT_FOUND);
        assert_eq!(get(false, "/clusters?days=0", "text/html").await.0, StatusCode::BAD_REQUEST);
    }

    #[tokio::test]
    async fn the_flakiest_tests_of_a_job_and_the_home_pages_sparklines() {
        let (status, json) = get(false, "/flaky?job=ci-a", "application/json").await;
        assert_eq!(status, StatusCode::OK, "{json}");
        let page: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!((&page["tests"][0]["test"], &page["tests"][0]["failures"]), (&"t".into(), &1.into()), "{json}");
        assert_eq!(get(false, "/flaky?provider=nope", "text/html").await.0, StatusCode::NOT_FOUND);
        let (_, home) = get(false, "/", "text/html").await;
        assert!(
            home.contains(r#"aria-label="ci-a: duration of the last 2 builds, oldest first: 1m0s, 1m0s""#),
            "{home}"
        );
    }

    #[tokio::test]
    async fn a_grid_is_read_once_per_generation_and_query() {
        use std::sync::atomic::Ordering::Relaxed;
        let source = Arc::new(Fixed::default());
        let app = router(source.clone());
        let get = |uri: &'static str| {
            let app = app.clone();
            async move {
                let response = app.oneshot(Request::get(uri).body(Body::empty()).unwrap()).await.unwrap();
                let etag = response.headers()[header::ETAG].to_str().unwrap().to_owned();
                (etag, response.into_body().collect().await.unwrap().to_bytes())
            }
        };
        let (etag, first) = get("/job/ci-a").await;
        assert_eq!(get("/job/ci-a").await, (etag.clone(), first.clone()));
        assert_eq!(source.grids_read.load(Relaxed), 1, "the second request was served as rendered");
        let (filtered_etag, _) = get("/job/ci-a?status=fail").await;
        assert_ne!(filtered_etag, etag, "another query is another entity");
        assert_eq!(source.grids_read.load(Relaxed), 2);
        source.generation.store(2, Relaxed);
        let (new_etag, _) = get("/job/ci-a").await;
        assert_ne!(new_etag, etag, "a new build of the job is a new grid");
        assert_eq!(source.grids_read.load(Relaxed), 3);
    }

    #[tokio::test]
    async fn failure_clusters_and_flakiest_tests_are_computed_once_per_index_generation_and_query() {
        use std::sync::atomic::Ordering::Relaxed;
        let source = Arc::new(Fixed::default());
        let app = router(source.clone());
        let get = |uri: &'static str| {
            let app = app.clone();
            async move {
                let response = app.oneshot(Request::get(uri).body(Body::empty()).unwrap()).await.unwrap();
                (response.status(), response.into_body().collect().await.unwrap().to_bytes())
            }
        };
        let (status, clusters) = get("/clusters").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(get("/clusters").await.1, clusters);
        assert_eq!(source.failures_read.load(Relaxed), 1, "the second request was served as rendered");
        get("/clusters?days=7").await;
        assert_eq!(source.failures_read.load(Relaxed), 2, "another window is another page");
        assert_eq!(get("/clusters?days=0").await.0, StatusCode::BAD_REQUEST, "an error is answered, never kept");
        assert_eq!(get("/clusters?days=0").await.0, StatusCode::BAD_REQUEST);
        let (_, flaky) = get("/flaky?job=ci-a").await;
        let grids = source.grids_read.load(Relaxed);
        assert_eq!(get("/flaky?job=ci-a").await.1, flaky);
        assert_eq!(source.grids_read.load(Relaxed), grids, "the flakiest tests were served as rendered");
        source.generation.store(2, Relaxed);
        get("/clusters").await;
        get("/flaky?job=ci-a").await;
        assert_eq!(source.failures_read.load(Relaxed), 3, "a change of the index is new clusters");
        assert_eq!(source.grids_read.load(Relaxed), grids + 1, "and new flakiest tests");
    }

    #[tokio::test]
    async fn a_build_page_shows_its_steps_and_failures_with_their_messages() {
        let (status, html) = get(false, "/job/ci-a/build/2", "text/html").await;
        assert_eq!(status, StatusCode::OK);
        assert!(html.contains(r#"<li class="fail">Test fail</li>"#), "{html}");
        assert!(html.contains("<summary>t</summary><pre>expected &lt;3&gt; nodes, saw &lt;2&gt;</pre>"), "{html}");
        // A known failure has a section of its own, apart from the failures.
        let known = html.find("<h2>Known failures</h2>").expect("a known-failures section");
        assert!(html[known..].contains("<summary>k</summary><pre>affinity lost</pre>"), "{html}");
        assert!(!html[..known].contains("<summary>k</summary>"), "not among the failures: {html}");
        let (_, json) = get(false, "/job/ci-a/build/2", "application/json").await;
        let view: BuildView = serde_json::from_str(&json).unwrap();
        assert_eq!(view.known_failures, [("k".to_owned(), Some("affinity lost".to_owned()))]);
        assert_eq!((view.column.build.as_str(), view.result.as_deref()), ("2", Some("FAILURE")));
        assert_eq!(get(false, "/job/ci-a/build/9", "text/html").await.0, StatusCode::NOT_FOUND);
    }

    #[tokio::test]
    async fn bad_input_gets_an_error_page_that_says_what_to_do() {
        let (status, page) = get(false, "/job/nope", "text/html").await;
        assert!(status == StatusCode::NOT_FOUND && page.contains("see the job list at /"), "{page}");
        let (status, page) = get(false, "/job/ci-a?status=broken", "text/html").await;
        assert!(status == StatusCode::BAD_REQUEST && page.contains("use pass, fail"), "{page}");
        let (status, page) = get(false, "/job/ci-a?test=(", "text/html").await;
        assert!(status == StatusCode::BAD_REQUEST && page.contains("is not a regex"), "{page}");
    }

    #[tokio::test]
    async fn the_home_page_is_the_matrix_with_the_latest_result_and_pass_rate_per_cell() {
        let (status, html) = get(false, "/", "text/html").await;
        assert_eq!(status, StatusCode::OK);
        assert!(html.contains("<th scope=\"col\">1.37</th><th scope=\"col\">1.36</th>"), "{html}");
        assert!(html.contains(r#"<td class="fail" title="local on 1.37: latest build 2 fail"#), "{html}");
        assert!(
            html.contains(
                r#"<a href="/job/ci-a/build/2">fail</a><br><small class="versions">CCM abc on v1.37.1</small><br><small>50% of 2</small>"#
            ),
            "{html}"
        );
        // This source has no LKG loaded (a server that has just started): the page says so.
        assert!(html.contains("still loading") && !html.contains("No version set yet"), "{html}");
        let (_, json) = get(false, "/", "application/json").await;
        let home: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(home["lkg_loading"], true, "{json}");
        assert_eq!(home["matrix"]["rows"][0]["cells"][1]["passed"], 1, "{json}");
        assert_eq!(home["jobs"][0]["job"], "ci-a");
    }

    #[tokio::test]
    async fn a_suites_table_shows_each_providers_newest_build_per_minor_with_skip_reasons_as_notes() {
        let (_, home) = get(false, "/", "text/html").await;
        assert!(home.contains(r#"<a href="/suite/upstream%20load-balancers">upstream load-balancers</a>"#), "{home}");
        let (status, html) = get(false, "/suite/upstream%20load-balancers", "text/html").await;
        assert_eq!(status, StatusCode::OK, "{html}");
        // Columns: local on 1.37 (its newest build there, 2, which failed) and on 1.36.
        let header = html.find("<thead>").unwrap();
        let body = html.find("<tbody>").unwrap();
        assert!(html[header..body].contains(r#"<a href="/job/ci-a/build/2">local<br>1.37</a>"#), "{html}");
        assert!(html[header..body].contains(r#"<a href="/job/ci-a/build/3">local<br>1.36</a>"#), "{html}");
        assert!(
            html.contains(
                r#"<th class="test" scope="row">[It] TCP</th><td class="fail">fail</td><td class="pass">pass</td>"#
            ),
            "{html}"
        );
        let skip = r##"<td class="skip">skip <a href="#note-1" aria-label="note 1"><sup>1</sup></a></td>"##;
        assert!(html.contains(&format!("[It] UDP</th>{skip}{skip}")), "{html}");
        assert!(html.contains("<code class=\"message\">the provider does not declare the capability `load-balancer-udp`: &lt;no UDP&gt;</code>"), "{html}");
        assert!(
            !html.contains("[It] left out") && html.contains("1 skipped without a reason in every column are hidden"),
            "{html}"
        );
        let (_, shown) = get(false, "/suite/upstream%20load-balancers?skipped=show", "text/html").await;
        assert!(shown.contains("[It] left out"), "{shown}");
        let (_, json) = get(false, "/suite/upstream%20load-balancers", "application/json").await;
        let table: crate::suite_table::SuiteTable = serde_json::from_str(&json).unwrap();
        assert_eq!((table.columns.len(), table.rows.len(), table.hidden), (2, 2, 1), "{json}");
        let (status, page) = get(false, "/suite/nope", "text/html").await;
        assert!(status == StatusCode::NOT_FOUND && page.contains("see the suites listed at /"), "{page}");
    }

    #[tokio::test]
    async fn a_build_log_is_served_from_the_store_and_a_path_outside_the_build_is_refused() {
        let (status, log) = get(false, "/job/ci-a/build/2/file/build-log.txt", "*/*").await;
        assert_eq!((status, log.as_str()), (StatusCode::OK, "line 1\nline 2\n"));
        let (_, html) = get(false, "/job/ci-a/build/2", "text/html").await;
        assert!(html.contains(r#"<a href="/job/ci-a/build/2/file/build-log.txt">build-log.txt</a> (14 bytes in all):</p><pre class="log">line 2"#), "{html}");
        assert_eq!(get(false, "/job/ci-a/build/2/file/none.txt", "*/*").await.0, StatusCode::NOT_FOUND);
        let (status, page) = get(false, "/job/ci-a/build/2/file/a/../../../x", "*/*").await;
        assert!(status == StatusCode::BAD_REQUEST && page.contains("not a path inside the build directory"), "{page}");
    }

    /// Two release lines: `master` (local good at k2) and `1.36` (local good at r1).
    fn two_lines() -> lkg::api::Snapshot {
        let engine = |commits: [&str; 2], good: &str| {
            let history = lkg::History::new(commits).unwrap();
            let spec = lkg::ProviderSpec {
                history: lkg::History::new(["p1"]).unwrap(),
                policy: lkg::ProviderPolicy::default(),
            };
            let mut engine = lkg::Engine::new(history, [("local".to_string(), spec)].into());
            let run = lkg::Run {
                build_id: format!("ci-a/{good}"),
                provider: "local".into(),
                kubernetes_version: good.into(),
                provider_version: "p1".into(),
                tests: vec![lkg::TestResult { name: "t".into(), attempts: vec![lkg::Attempt::Pass] }],
                build_passed: Some(true),
            };
            engine.add_run(&run).unwrap();
            engine
        };
        let mut snapshot = lkg::api::Snapshot::single(engine(["k2", "k1"], "k2"), [], 1);
        snapshot.lines.insert("1.36".into(), engine(["r2", "r1"], "r1"));
        snapshot
    }

    #[tokio::test]
    async fn the_lkg_page_shows_one_release_line_at_a_time_and_links_the_others() {
        let source = Fixed { snapshot: Some(Arc::new(two_lines())), ..Fixed::default() };
        let app = router(Arc::new(source));
        let get = |uri: &'static str| {
            let app = app.clone();
            async move {
                let request = Request::get(uri).header(header::ACCEPT, "application/json").body(Body::empty()).unwrap();
                let response = app.oneshot(request).await.unwrap();
                let status = response.status();
                (status, String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap())
            }
        };
        let (status, json) = get("/lkg").await;
        let page: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(
            (status, &page["line"], &page["lines"]),
            (StatusCode::OK, &"master".into(), &serde_json::json!(["master", "1.36"]))
        );
        assert_eq!(page["providers"][0]["lkg"]["kubernetes_commit"], "k2");
        let (_, json) = get("/lkg?line=1.36").await;
        let page: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!((&page["line"], &page["providers"][0]["lkg"]["kubernetes_commit"]), (&"1.36".into(), &"r1".into()));
        let (status, _) = get("/lkg?line=1.99").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let request = Request::get("/lkg").header(header::ACCEPT, "text/html").body(Body::empty()).unwrap();
        let response = app.clone().oneshot(request).await.unwrap();
        let html = String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
        assert!(html.contains(r#"<a href="/lkg?line=1.36">1.36</a>"#), "{html}");
        assert!(html.contains(r#"<strong aria-current="page">master</strong>"#), "{html}");
    }

    #[tokio::test]
    async fn without_an_lkg_the_lkg_page_says_when_there_will_be_one() {
        let (status, page) = get(false, "/lkg", "text/html").await;
        assert!(status == StatusCode::SERVICE_UNAVAILABLE && page.contains("every --refresh"), "{page}");
    }

    #[tokio::test]
    async fn a_database_that_is_down_is_a_503_page() {
        for uri in SOURCE_PAGES {
            let (status, page) = get(true, uri, "text/html").await;
            assert!(status == StatusCode::SERVICE_UNAVAILABLE && page.contains("connection refused"), "{uri}: {page}");
        }
    }
}

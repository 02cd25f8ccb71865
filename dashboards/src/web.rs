//! The dashboard's pages as an axum router: the job list (home) and each job's grid. Data comes
//! through [`Source`], which the harness implements over its SQL index. Every page is also JSON,
//! at the same path with `Accept: application/json`.

use std::sync::Arc;

use async_trait::async_trait;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Json, Response};
use axum::routing::get;
use maud::{DOCTYPE, Markup, html};
use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::grid::{self, Cell, Column, Filter, Grid, ResultRow};

/// A job as the home page lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSummary {
    pub job: String,
    pub provider: Option<String>,
}

/// Where the dashboard's data comes from.
#[async_trait]
pub trait Source: Send + Sync + 'static {
    async fn jobs(&self) -> Result<Vec<JobSummary>, String>;
    /// The job's latest `builds` builds (newest first) and their results; `None` for an unknown job.
    async fn grid(&self, job: &str, builds: usize) -> Result<Option<(Vec<Column>, Vec<ResultRow>)>, String>;
    /// One build; `None` when the job has no such build.
    async fn build(&self, job: &str, build: &str) -> Result<Option<BuildView>, String>;
}

/// What a build page shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildView {
    pub job: String,
    #[serde(flatten)]
    pub column: Column,
    pub finished_at: Option<i64>,
    /// SUCCESS, FAILURE, ABORTED ... as finished.json says.
    pub result: Option<String>,
    /// The build directory in the object store.
    pub artifacts_url: String,
    /// The runner's steps (Build, Up, Deploy, Test, Down) and how each went.
    pub steps: Vec<(String, Cell)>,
    /// Every other test that failed, with its message.
    pub failures: Vec<(String, Option<String>)>,
    /// Tests by state, steps left out.
    pub counts: Vec<(Cell, usize)>,
}

/// How many builds a grid shows unless the query says otherwise.
pub const DEFAULT_BUILDS: usize = 50;

pub fn router(source: Arc<dyn Source>) -> Router {
    Router::new()
        .route("/", get(home))
        .route("/job/{job}", get(job_grid))
        .route("/job/{job}/build/{build}", get(build_page))
        .with_state(source)
}

async fn home(State(source): State<Arc<dyn Source>>, headers: HeaderMap) -> Response {
    match source.jobs().await {
        Ok(jobs) if wants_json(&headers) => Json(jobs).into_response(),
        Ok(jobs) => page(
            "Jobs",
            html! {
                h1 { "Jobs" }
                ul.jobs { @for job in &jobs { li { a href={ "/job/" (job.job) } { (job.job) } " " small { (job.provider.as_deref().unwrap_or("")) } } } }
            },
        ),
        Err(error) => unavailable(&error),
    }
}

#[derive(Debug, Deserialize)]
struct GridQuery {
    /// A regex on test names.
    test: Option<String>,
    /// Comma-separated cell states: fail,flaky,...
    status: Option<String>,
    builds: Option<usize>,
}

async fn job_grid(
    State(source): State<Arc<dyn Source>>,
    Path(job): Path<String>,
    Query(query): Query<GridQuery>,
    headers: HeaderMap,
) -> Response {
    let filter = match filter_of(&query) {
        Ok(filter) => filter,
        Err(message) => return error_page(StatusCode::BAD_REQUEST, &message),
    };
    match source.grid(&job, query.builds.unwrap_or(DEFAULT_BUILDS).clamp(1, 1000)).await {
        Ok(Some((columns, results))) => {
            let grid = Grid::new(&job, columns, results, &filter);
            if wants_json(&headers) {
                return Json(grid).into_response();
            }
            page(&job, html! { h1 { (job) } (filter_form(&query)) (grid::render(&grid)) })
        }
        Ok(None) => error_page(StatusCode::NOT_FOUND, &format!("no job {job:?}: see the job list at /")),
        Err(error) => unavailable(&error),
    }
}

async fn build_page(
    State(source): State<Arc<dyn Source>>,
    Path((job, build)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    match source.build(&job, &build).await {
        Ok(Some(view)) if wants_json(&headers) => Json(view).into_response(),
        Ok(Some(view)) => page(&format!("{job} {build}"), render_build(&view)),
        Ok(None) => error_page(StatusCode::NOT_FOUND, &format!("job {job:?} has no build {build:?}: see /job/{job}")),
        Err(error) => unavailable(&error),
    }
}

fn render_build(view: &BuildView) -> Markup {
    let column = &view.column;
    html! {
        h1 { a href={ "/job/" (view.job) } { (view.job) } " " (column.build) }
        dl.meta {
            dt { "result" } dd class=(grid::column_class(column)) { (view.result.as_deref().unwrap_or(&column.state)) }
            dt { "Kubernetes" } dd { (column.kubernetes_version.as_deref().unwrap_or("?")) }
            dt { "provider version" } dd { (column.provider_version.as_deref().unwrap_or("?")) }
            dt { "started" } dd { (column.started_at) }
            dt { "finished" } dd { (view.finished_at.map(|t| t.to_string()).unwrap_or_else(|| "-".into())) }
            dt { "artifacts" } dd { a href=(view.artifacts_url) { (view.artifacts_url) } }
        }
        h2 { "Steps" }
        ol.steps { @for (name, cell) in &view.steps { li class=(cell.as_str()) aria-label={ (name) ": " (cell.as_str()) } { (name) " " (cell.as_str()) } } }
        h2 { "Tests" }
        p.counts { @for (cell, count) in &view.counts { span class={ "cell " (cell.as_str()) } {} " " (count) " " (cell.as_str()) "  " } }
        @if !view.failures.is_empty() {
            h2 { "Failures" }
            @for (test, message) in &view.failures { details.failure { summary { (test) } pre { (message.as_deref().unwrap_or("(no message)")) } } }
        }
    }
}

fn filter_of(query: &GridQuery) -> Result<Filter, String> {
    let test = match query.test.as_deref().filter(|t| !t.is_empty()) {
        Some(pattern) => Some(Regex::new(pattern).map_err(|e| format!("test filter {pattern:?} is not a regex: {e}"))?),
        None => None,
    };
    let mut statuses = Vec::new();
    for name in query.status.iter().flat_map(|s| s.split(',')).filter(|s| !s.is_empty()) {
        let cell = Cell::ALL
            .into_iter()
            .find(|cell| cell.as_str() == name)
            .ok_or_else(|| format!("unknown status {name:?}: use pass, fail, flaky, skip, running or none"))?;
        statuses.push(cell);
    }
    Ok(Filter { test, statuses })
}

fn filter_form(query: &GridQuery) -> Markup {
    html! {
        form.filter method="get" {
            label { "test " input type="search" name="test" value=(query.test.as_deref().unwrap_or("")) placeholder="regex"; }
            label { " status " input type="text" name="status" value=(query.status.as_deref().unwrap_or("")) placeholder="fail,flaky"; }
            button type="submit" { "filter" }
        }
    }
}

fn wants_json(headers: &HeaderMap) -> bool {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("application/json"))
}

fn page(title: &str, body: Markup) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { (title) " · cloud-provider-harness" }
                style { (maud::PreEscaped(CSS)) }
            }
            body { nav { a href="/" { "cloud-provider-harness" } } main { (body) } }
        }
    };
    Html(markup.into_string()).into_response()
}

fn error_page(status: StatusCode, message: &str) -> Response {
    let mut response =
        page(status.canonical_reason().unwrap_or("error"), html! { h1 { (status.as_u16()) } p.error { (message) } });
    *response.status_mut() = status;
    response
}

fn unavailable(error: &str) -> Response {
    error_page(StatusCode::SERVICE_UNAVAILABLE, &format!("the results database is unavailable: {error}"))
}

const CSS: &str = "body{font:14px system-ui,sans-serif;margin:0}nav{padding:8px;background:#223}nav a{color:#fff}\
main{padding:8px}table.grid{border-collapse:collapse}table.grid th,table.grid td{border:1px solid #ddd;padding:0}\
table.grid thead th{position:sticky;top:0;background:#fff;font-weight:normal;font-size:11px;padding:2px}\
table.grid th.test{position:sticky;left:0;background:#fff;text-align:left;padding:0 4px;white-space:nowrap}\
td a{display:block;width:14px;height:16px;text-align:center;text-decoration:none;color:#000;font-size:10px}\
.pass{background:#4caf50}.fail{background:#e53935}.flaky{background:#ffb300}.skip{background:#cfd8dc}\
.running{background:#64b5f6}.none{background:#fff}.cell{display:inline-block;width:12px;height:12px}\
ul.legend{list-style:none;display:flex;gap:12px;padding:0}.since{color:#b71c1c;font-size:11px}";

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    /// One job `ci-a` with two builds, or a database that is down.
    struct Fixed {
        down: bool,
    }

    #[async_trait]
    impl Source for Fixed {
        async fn jobs(&self) -> Result<Vec<JobSummary>, String> {
            if self.down {
                return Err("connection refused".into());
            }
            Ok(vec![JobSummary { job: "ci-a".into(), provider: Some("local".into()) }])
        }

        async fn grid(&self, job: &str, _builds: usize) -> Result<Option<(Vec<Column>, Vec<ResultRow>)>, String> {
            self.jobs().await?;
            if job != "ci-a" {
                return Ok(None);
            }
            let column = |build: &str| Column {
                build: build.into(),
                started_at: 0,
                kubernetes_version: Some("v1.37.1".into()),
                provider_version: None,
                state: "finished".into(),
                passed: Some(true),
            };
            let row = |column, test: &str, cell| ResultRow { column, test: test.into(), cell };
            Ok(Some((
                vec![column("2"), column("1")],
                vec![row(0, "t", Cell::Fail), row(1, "t", Cell::Pass), row(0, "u", Cell::Pass)],
            )))
        }

        async fn build(&self, job: &str, build: &str) -> Result<Option<BuildView>, String> {
            let Some((columns, _)) = self.grid(job, 2).await? else { return Ok(None) };
            let Some(column) = columns.into_iter().find(|c| c.build == build) else { return Ok(None) };
            Ok(Some(BuildView {
                job: job.into(),
                column,
                finished_at: Some(60),
                result: Some("FAILURE".into()),
                artifacts_url: "file:///store/logs/ci-a/2".into(),
                steps: vec![("Up".into(), Cell::Pass), ("Test".into(), Cell::Fail)],
                failures: vec![("t".into(), Some("expected <3> nodes, saw <2>".into()))],
                counts: vec![(Cell::Pass, 1), (Cell::Fail, 1)],
            }))
        }
    }

    async fn get(down: bool, uri: &str, accept: &str) -> (StatusCode, String) {
        let request = Request::get(uri).header(header::ACCEPT, accept).body(Body::empty()).unwrap();
        let response = router(Arc::new(Fixed { down })).oneshot(request).await.unwrap();
        let status = response.status();
        (status, String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap())
    }

    #[tokio::test]
    async fn the_grid_is_html_or_json_at_the_same_path() {
        let (status, html) = get(false, "/job/ci-a", "text/html").await;
        assert_eq!(status, StatusCode::OK);
        assert!(html.starts_with("<!DOCTYPE html>") && html.contains(r#"aria-label="t in build 2: fail""#), "{html}");
        let (_, json) = get(false, "/job/ci-a?status=fail", "application/json").await;
        let grid: Grid = serde_json::from_str(&json).unwrap();
        assert_eq!((grid.rows.len(), grid.total_rows, grid.rows[0].failing_since.as_deref()), (1, 2, Some("2")));
    }

    #[tokio::test]
    async fn a_build_page_shows_its_steps_and_failures_with_their_messages() {
        let (status, html) = get(false, "/job/ci-a/build/2", "text/html").await;
        assert_eq!(status, StatusCode::OK);
        assert!(html.contains(r#"<li class="fail" aria-label="Test: fail">"#), "{html}");
        assert!(html.contains("<summary>t</summary><pre>expected &lt;3&gt; nodes, saw &lt;2&gt;</pre>"), "{html}");
        let (_, json) = get(false, "/job/ci-a/build/2", "application/json").await;
        let view: BuildView = serde_json::from_str(&json).unwrap();
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
    async fn a_database_that_is_down_is_a_503_page() {
        for uri in ["/", "/job/ci-a", "/job/ci-a/build/2"] {
            let (status, page) = get(true, uri, "text/html").await;
            assert!(status == StatusCode::SERVICE_UNAVAILABLE && page.contains("connection refused"), "{uri}: {page}");
        }
    }
}

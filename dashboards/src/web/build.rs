//! A build's page (result, versions, runner steps, failures, the log's tail, artifacts) and its
//! files, read from the object store.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};

use super::layout::{error_page, negotiate, not_found, time, unavailable};
use super::{BuildView, Source};
use crate::grid;

/// What a build's log is called in its directory (Prow's pod utilities write it).
pub const BUILD_LOG: &str = "build-log.txt";

pub async fn page(
    State(source): State<Arc<dyn Source>>,
    Path((job, build)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    match source.build(&job, &build).await {
        Ok(Some(view)) => negotiate(&headers, &view, &format!("{build} · {job}"), render),
        Ok(None) => not_found(&format!("job {job:?} has no build {build:?}: see /job/{job}")),
        Err(error) => unavailable(&error),
    }
}

pub async fn file(
    State(source): State<Arc<dyn Source>>,
    Path((job, build, path)): Path<(String, String, String)>,
) -> Response {
    if !is_relative_inside(&path) {
        return error_page(StatusCode::BAD_REQUEST, &format!("{path:?} is not a path inside the build directory"));
    }
    match source.artifact(&job, &build, &path).await {
        Ok(Some(bytes)) => ([(header::CONTENT_TYPE, content_type(&path))], bytes).into_response(),
        Ok(None) => {
            not_found(&format!("build {build:?} of job {job:?} has no file {path:?}: see /job/{job}/build/{build}"))
        }
        Err(error) => unavailable(&error),
    }
}

/// No absolute paths, no `..`, no empty or `.` segments: a file of this build only.
fn is_relative_inside(path: &str) -> bool {
    !path.is_empty() && path.split('/').all(|segment| !matches!(segment, "" | "." | "..") && !segment.contains('\\'))
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, extension)| extension) {
        Some("txt" | "log") => "text/plain; charset=utf-8",
        Some("xml") => "application/xml",
        Some("json") => "application/json",
        Some("html") => "text/plain; charset=utf-8", // never run a build's HTML in the dashboard's origin
        _ => "application/octet-stream",
    }
}

fn render(view: &BuildView) -> Markup {
    let column = &view.column;
    let file = |path: &str| format!("/job/{}/build/{}/file/{path}", view.job, column.build);
    html! {
        h1 { a href={ "/job/" (view.job) } { (view.job) } " " (column.build) }
        dl.meta {
            dt { "result" } dd { span class=(grid::column_class(column)) { (view.result.as_deref().unwrap_or(&column.state)) } }
            dt { "Kubernetes" } dd { (column.kubernetes_version.as_deref().unwrap_or("?")) }
            dt { "provider version" } dd { (column.provider_version.as_deref().unwrap_or("?")) }
            dt { "started" } dd { (time(column.started_at)) }
            dt { "finished" } dd { (view.finished_at.map(time).unwrap_or_else(|| "-".into())) }
            dt { "artifacts" } dd { (view.artifacts_url) }
        }
        h2 { "Steps" }
        ol.steps { @for (name, cell) in &view.steps { li class=(cell.as_str()) { (name) " " (cell.as_str()) } } }
        h2 { "Tests" }
        p.counts { @for (cell, count) in &view.counts { span class={ "cell " (cell.as_str()) } {} " " (count) " " (cell.as_str()) "  " } }
        @if !view.failures.is_empty() {
            h2 { "Failures" }
            @for (test, message) in &view.failures { details.failure { summary { (test) } pre { (message.as_deref().unwrap_or("(no message)")) } } }
        }
        h2 { "Build log" }
        @match &view.log_tail {
            Some(tail) => {
                p { "The end of " a href=(file(BUILD_LOG)) { (BUILD_LOG) } " (" (tail.size) " bytes in all):" }
                pre.log { (tail.text) }
            }
            None if view.artifacts.is_none() => p { "This server was started without --store, so it cannot read the build's files." },
            None => p { "This build has no " (BUILD_LOG) "." },
        }
        @if let Some(artifacts) = &view.artifacts {
            h2 { "Artifacts" }
            ul.artifacts { @for artifact in artifacts { li { a href=(file(&artifact.path)) { (artifact.path) } " " small { (artifact.size) " bytes" } } } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_inside_the_build_directory_are_served() {
        for good in ["build-log.txt", "artifacts/junit_runner.xml", "a/b.c/d"] {
            assert!(is_relative_inside(good), "{good}");
        }
        for bad in ["", "/etc/passwd", "../../x", "a/../../b", "a//b", "./a", "a\\..\\b"] {
            assert!(!is_relative_inside(bad), "{bad}");
        }
    }
}

//! A build's page (result, versions, runner steps, failures, the log's tail, artifacts) and its
//! files, read from the object store.
//!
//! A build's files are whatever its uploader sent, so they are served inert, never as what they
//! claim to be: UTF-8 text as `text/plain`, anything else as a download, every one with
//! `nosniff` and a policy (`default-src 'none'; sandbox`) under which nothing in it can run or
//! load, even opened directly on the dashboard's origin.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};

use super::layout::{error_page, negotiate, not_found, percent_encode, time};
use super::{Artifact, BuildView, Source};
use crate::grid;

/// What a build's log is called in its directory (Prow's pod utilities write it).
pub const BUILD_LOG: &str = "build-log.txt";

/// A build's file: nothing in it loads or runs, and it is shown in no frame.
const FILE_POLICY: &str = "default-src 'none'; sandbox; frame-ancestors 'none'";

pub async fn page(
    State(source): State<Arc<dyn Source>>,
    Path((job, build)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    match source.build(&job, &build).await {
        Ok(Some(view)) => negotiate(&headers, &view, &format!("{build} · {job}"), render),
        Ok(None) => not_found(&format!("job {job:?} has no build {build:?}: see /job/{job}")),
        Err(error) => error.into_response(),
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
        Ok(Some(bytes)) => inert(&path, bytes),
        Ok(None) => {
            not_found(&format!("build {build:?} of job {job:?} has no file {path:?}: see /job/{job}/build/{build}"))
        }
        Err(error) => error.into_response(),
    }
}

/// No absolute paths, no `..`, no empty or `.` segments: a file of this build only.
fn is_relative_inside(path: &str) -> bool {
    !path.is_empty() && path.split('/').all(|segment| !matches!(segment, "" | "." | "..") && !segment.contains('\\'))
}

/// A build's file as a response that cannot run: text shown as text, the rest downloaded.
fn inert(path: &str, bytes: Vec<u8>) -> Response {
    let text = !bytes.contains(&0) && std::str::from_utf8(&bytes).is_ok();
    let name = path.rsplit('/').next().unwrap_or(path);
    let (content_type, disposition) =
        if text { ("text/plain; charset=utf-8", "inline") } else { ("application/octet-stream", "attachment") };
    // The file name as the header can carry it (RFC 6266's ASCII form; the rest becomes `_`).
    let ascii: String =
        name.chars().map(|c| if c.is_ascii_graphic() && c != '"' && c != '\\' { c } else { '_' }).collect();
    let disposition = HeaderValue::from_str(&format!("{disposition}; filename=\"{ascii}\""))
        .unwrap_or(HeaderValue::from_static("attachment"));
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (header::CONTENT_DISPOSITION, disposition),
        (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(FILE_POLICY)),
        (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
    ];
    (headers, bytes).into_response()
}

/// A path as a URL path: each segment percent-encoded but for RFC 3986's unreserved characters.
fn url_path(path: &str) -> String {
    percent_encode(path, b"/")
}

/// Where the harness's `certified-conformance` suite writes a submission (`vX.Y/<product>/`) in
/// a build directory, and the output of the checks it applied to it.
pub const SUBMISSIONS: &str = "artifacts/k8s-conformance/";
pub const CHECKS_FILE: &str = "artifacts/certification-checks.txt";

/// The submission folder among a build's files (`v1.37/<product>`), and its files.
fn submission(artifacts: &[Artifact]) -> Option<(String, Vec<&Artifact>)> {
    let first = artifacts.iter().find_map(|a| a.path.strip_prefix(SUBMISSIONS))?;
    let (release, rest) = first.split_once('/')?;
    let (product, _) = rest.split_once('/')?;
    let folder = format!("{release}/{product}");
    let prefix = format!("{SUBMISSIONS}{folder}/");
    Some((folder, artifacts.iter().filter(|a| a.path.starts_with(&prefix)).collect()))
}

fn render(view: &BuildView) -> Markup {
    let column = &view.column;
    let file = |path: &str| format!("/job/{}/build/{}/file/{}", view.job, column.build, url_path(path));
    html! {
        h1 { a href={ "/job/" (view.job) } { (view.job) } " " (column.build) }
        dl.meta {
            dt { "result" } dd { span class=(grid::column_class(column)) { (view.result.as_deref().unwrap_or(&column.state)) } }
            dt { "Kubernetes" } dd { (column.kubernetes_version.as_deref().unwrap_or("?")) }
            dt { "provider version" } dd { (column.provider_version.as_deref().unwrap_or("?")) }
            dt { "started" } dd { (time(column.started_at)) }
            dt { "finished" } dd { (column.finished_at.map(time).unwrap_or_else(|| "-".into())) }
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
        @if !view.known_failures.is_empty() {
            h2 { "Known failures" }
            p { "Failed, and listed in the provider's " code { "known_failures" } " (with a reason and a link): the run passed without them." }
            @for (test, message) in &view.known_failures { details.known-failure { summary { (test) } pre { (message.as_deref().unwrap_or("(no message)")) } } }
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
        @if let Some((folder, files)) = view.artifacts.as_deref().and_then(submission) {
            h2 { "Conformance submission" }
            p {
                "The folder of a " code { "cncf/k8s-conformance" } " pull request, " code { (folder) }
                ", as the certified-conformance suite wrote it; "
                a href=(file(CHECKS_FILE)) { "its checks" } "."
            }
            ul.submission { @for artifact in files { li { a href=(file(&artifact.path)) { (artifact.path.rsplit('/').next().unwrap_or_default()) } " " small { (artifact.size) " bytes" } } } }
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

    #[test]
    fn a_conformance_submission_gets_a_section_of_its_own() {
        let artifact = |path: &str| Artifact { path: path.into(), size: 7 };
        let artifacts = vec![
            artifact("artifacts/junit_runner.xml"),
            artifact("artifacts/certification-checks.txt"),
            artifact("artifacts/k8s-conformance/v1.37/reference-ccm/PRODUCT.yaml"),
            artifact("artifacts/k8s-conformance/v1.37/reference-ccm/junit_01.xml"),
        ];
        let (folder, files) = submission(&artifacts).unwrap();
        assert_eq!(folder, "v1.37/reference-ccm");
        assert_eq!(files.len(), 2);
        assert_eq!(submission(&artifacts[..2]), None);
        let view = BuildView {
            job: "ci-cloud-provider-local-certified-conformance-k8s-1.37".into(),
            column: grid::Column {
                build: "1".into(),
                started_at: 0,
                finished_at: None,
                kubernetes_version: None,
                provider_version: None,
                state: "finished".into(),
                passed: Some(true),
            },
            result: Some("SUCCESS".into()),
            artifacts_url: "file:///r".into(),
            steps: Vec::new(),
            failures: Vec::new(),
            known_failures: Vec::new(),
            counts: Vec::new(),
            artifacts: Some(artifacts),
            log_tail: None,
        };
        let html = render(&view).into_string();
        assert!(html.contains("<h2>Conformance submission</h2>"), "{html}");
        assert!(html.contains("<code>v1.37/reference-ccm</code>"), "{html}");
        assert!(
            html.contains("/file/artifacts/k8s-conformance/v1.37/reference-ccm/PRODUCT.yaml\">PRODUCT.yaml</a>"),
            "{html}"
        );
        assert!(html.contains("/file/artifacts/certification-checks.txt\">its checks</a>"), "{html}");
    }

    #[test]
    fn links_to_files_are_percent_encoded_per_segment() {
        assert_eq!(url_path("artifacts/junit_01.xml"), "artifacts/junit_01.xml");
        assert_eq!(url_path("artifacts/100% #1?.txt"), "artifacts/100%25%20%231%3F.txt");
        assert_eq!(url_path("artifacts/日.txt"), "artifacts/%E6%97%A5.txt");
    }

    #[tokio::test]
    async fn files_are_served_inert_whatever_they_claim_to_be() {
        use http_body_util::BodyExt;
        let xhtml = br#"<html xmlns="http://www.w3.org/1999/xhtml"><script>alert(1)</script></html>"#.to_vec();
        for path in ["artifacts/evil.xml", "artifacts/evil.xhtml", "artifacts/evil.svg", "artifacts/evil.html"] {
            let response = inert(path, xhtml.clone());
            let headers = response.headers();
            assert_eq!(headers[header::CONTENT_TYPE], "text/plain; charset=utf-8", "{path}");
            assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff", "{path}");
            assert_eq!(headers[header::CONTENT_SECURITY_POLICY], FILE_POLICY, "{path}");
            assert!(headers[header::CONTENT_DISPOSITION].to_str().unwrap().starts_with("inline; filename=\"evil."));
            assert_eq!(response.into_body().collect().await.unwrap().to_bytes().to_vec(), xhtml);
        }
        let binary = inert("artifacts/日 \"x\".png", vec![0x89, b'P', b'N', b'G', 0]);
        assert_eq!(binary.headers()[header::CONTENT_TYPE], "application/octet-stream");
        assert_eq!(binary.headers()[header::CONTENT_DISPOSITION], "attachment; filename=\"___x_.png\"");
    }
}

//! What every response goes through: request metrics and an access log line, and validators for
//! caches (a weak ETag over the body, `304 Not Modified` when the client already has it).

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::info;

use super::metrics::Metrics;

/// Bodies larger than this (or of unknown size: streams) are sent without an ETag rather than
/// buffered.
const MAX_ETAG_BODY: usize = 32 * 1024 * 1024;

/// Counts and times each request by its route pattern, and logs it.
pub async fn observe(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let route = request.extensions().get::<MatchedPath>().map_or("unmatched", |m| m.as_str()).to_owned();
    let response = next.run(request).await;
    let took = started.elapsed();
    let status = response.status().as_u16();
    metrics.request(method.as_str(), &route, status, took);
    if let Some(rejected) = response.extensions().get::<dashboards::web::FilterRejected>() {
        metrics.filter_rejected(rejected.0);
    }
    info!(target: "harness::serve::access", %method, %path, %route, status, micros = took.as_micros() as u64, "request");
    response
}

/// Adds `Cache-Control: no-cache` and a weak ETag to successful GETs (clients and proxies keep the
/// page and revalidate it), and answers `304` when `If-None-Match` names the same body.
/// Health and metrics are never cached.
pub async fn validators(request: Request, next: Next) -> Response {
    let uncached = matches!(request.uri().path(), "/healthz" | "/readyz" | "/metrics");
    let get = request.method() == Method::GET;
    let if_none_match = request.headers().get(header::IF_NONE_MATCH).cloned();
    let response = next.run(request).await;
    if uncached {
        return with_cache_control(response, "no-store");
    }
    if !get || response.status() != StatusCode::OK {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    parts.headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // A handler that knows its version (the grid: the job's generation) sets the ETag itself.
    if let Some(etag) = parts.headers.get(header::ETAG).cloned() {
        if if_none_match.as_ref().is_some_and(|tags| matches(tags, &etag)) {
            return not_modified(parts);
        }
        return Response::from_parts(parts, body);
    }
    // A large file of a build (a log of hundreds of MB) goes out as it is, without an ETag.
    if axum::body::HttpBody::size_hint(&body).exact().is_none_or(|size| size > MAX_ETAG_BODY as u64) {
        return Response::from_parts(parts, body);
    }
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ETAG_BODY).await else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "the response could not be read to send").into_response();
    };
    let etag = etag_of(&bytes);
    parts.headers.insert(header::ETAG, etag.clone());
    if if_none_match.as_ref().is_some_and(|tags| matches(tags, &etag)) {
        return not_modified(parts);
    }
    Response::from_parts(parts, Body::from(bytes))
}

fn not_modified(mut parts: axum::http::response::Parts) -> Response {
    parts.status = StatusCode::NOT_MODIFIED;
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::empty())
}

fn with_cache_control(mut response: Response, value: &'static str) -> Response {
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static(value));
    response
}

/// Weak: the same entity may be sent gzipped or not.
fn etag_of(body: &[u8]) -> HeaderValue {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut hasher);
    HeaderValue::from_str(&format!("W/\"{:016x}-{:x}\"", hasher.finish(), body.len())).expect("hex is a valid header")
}

/// `If-None-Match: W/"a", "b"` or `*`; compared weakly, as RFC 9110 says for If-None-Match.
fn matches(if_none_match: &HeaderValue, etag: &HeaderValue) -> bool {
    let strip = |tag: &str| tag.trim().trim_start_matches("W/").to_owned();
    let ours = strip(etag.to_str().unwrap_or_default());
    if_none_match.to_str().unwrap_or_default().split(',').any(|tag| tag.trim() == "*" || strip(tag) == ours)
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    async fn send(uri: &str, if_none_match: Option<&str>) -> Response {
        let app = Router::new()
            .route("/page", get(|| async { "a page" }))
            .route("/metrics", get(|| async { "counters" }))
            .layer(axum::middleware::from_fn(validators));
        let mut request = Request::get(uri);
        if let Some(tag) = if_none_match {
            request = request.header(header::IF_NONE_MATCH, tag);
        }
        app.oneshot(request.body(Body::empty()).unwrap()).await.unwrap()
    }

    #[tokio::test]
    async fn pages_get_an_etag_and_a_304_when_it_matches_and_metrics_are_never_cached() {
        let page = send("/page", None).await;
        let etag = page.headers()[header::ETAG].to_str().unwrap().to_owned();
        assert_eq!(page.headers()[header::CACHE_CONTROL], "no-cache");
        let again = send("/page", Some(&etag)).await;
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(send("/page", Some("W/\"other\"")).await.status(), StatusCode::OK);
        let metrics = send("/metrics", Some(&etag)).await;
        assert_eq!(metrics.status(), StatusCode::OK);
        assert_eq!(metrics.headers()[header::CACHE_CONTROL], "no-store");
        assert!(!metrics.headers().contains_key(header::ETAG));
    }

    #[test]
    fn if_none_match_compares_weakly_and_accepts_lists_and_star() {
        let etag = etag_of(b"page");
        let value = etag.to_str().unwrap().to_owned();
        let strong = value.trim_start_matches("W/").to_owned();
        for header in [value.clone(), strong, format!("\"other\", {value}"), "*".to_owned()] {
            assert!(matches(&HeaderValue::from_str(&header).unwrap(), &etag), "{header}");
        }
        assert!(!matches(&HeaderValue::from_static("\"other\""), &etag));
        assert_ne!(etag_of(b"page"), etag_of(b"page2"));
    }
}

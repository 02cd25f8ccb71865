//! The LKG HTTP API: an axum router that `harness serve` mounts, documented in `lkg/openapi.yaml`.
//!
//! - `GET /api/v1/lkg`: the global version set and every provider's LKG;
//! - `GET /api/v1/lkg/{provider}`: one provider's LKG, newest pair, culprit range and pairs;
//! - `GET /api/v1/lkg/check?provider=&provider_version=&kubernetes=`: good / pending / bad / unknown,
//!   with the evidence builds;
//! - `GET /api/v1/culprits/{provider}`.
//!
//! Every route takes `?line=` (a release line: `master` or a Kubernetes minor such as `1.36`); the
//! default is the newest line, and every answer names the line it is for.
//!
//! Answers come from the latest [`Snapshot`] the server was handed through a `watch` channel (the
//! loader refreshes it); until the first one arrives every route answers 503 with `Retry-After`.
//! Errors are JSON `{"error": {"status", "message"}}`.

mod views;

use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

pub use views::{
    BisectionView, BuildLink, BuildLinks, CheckVerdict, CheckView, CulpritView, DEFAULT_LINE, LkgView, ProviderView,
    Snapshot, ViewError, bisect_job, check, culprits, lkg, provider,
};

/// The routes under `/api/v1`, for the OpenAPI document's test.
pub const PATHS: &[&str] =
    &["/api/v1/lkg", "/api/v1/lkg/check", "/api/v1/lkg/{provider}", "/api/v1/culprits/{provider}"];

/// What the API answers from: `None` until the first snapshot is loaded.
pub type Snapshots = watch::Receiver<Option<Arc<Snapshot>>>;

/// How long a client is told to wait while the first snapshot loads.
const LOADING_RETRY_SECONDS: u64 = 5;

/// The API over the snapshots `snapshots` receives.
pub fn router(snapshots: Snapshots) -> Router {
    Router::new()
        .route("/api/v1/lkg", get(get_lkg))
        // A static segment wins over the parameter: `check` is never a provider name here.
        .route("/api/v1/lkg/check", get(get_check))
        .route("/api/v1/lkg/{provider}", get(get_provider))
        .route("/api/v1/culprits/{provider}", get(get_culprits))
        .with_state(snapshots)
}

type SnapshotState = State<Snapshots>;

/// The snapshot to answer from, or 503 while the first one is still loading.
fn current(snapshots: &Snapshots) -> Result<Arc<Snapshot>, ApiError> {
    snapshots.borrow().clone().ok_or_else(ApiError::loading)
}

/// `?line=`, on every route.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LineQuery {
    line: Option<String>,
}

type LineParam = Result<Query<LineQuery>, QueryRejection>;

fn line_of(query: LineParam) -> Result<Option<String>, ApiError> {
    let Query(query) = query.map_err(|rejection| {
        ApiError::bad_request(format!(
            "{}; the only parameter here is ?line=master or ?line=1.36",
            rejection.body_text()
        ))
    })?;
    Ok(query.line.filter(|line| !line.trim().is_empty()))
}

async fn get_lkg(State(snapshots): SnapshotState, query: LineParam) -> Result<Json<LkgView>, ApiError> {
    let snapshot = current(&snapshots)?;
    Ok(Json(lkg(&snapshot, line_of(query)?.as_deref())?))
}

async fn get_provider(
    State(snapshots): SnapshotState,
    Path(name): Path<String>,
    query: LineParam,
) -> Result<Json<ProviderView>, ApiError> {
    let snapshot = current(&snapshots)?;
    Ok(Json(provider(&snapshot, line_of(query)?.as_deref(), &name)?))
}

async fn get_culprits(
    State(snapshots): SnapshotState,
    Path(name): Path<String>,
    query: LineParam,
) -> Result<Json<CulpritView>, ApiError> {
    let snapshot = current(&snapshots)?;
    Ok(Json(culprits(&snapshot, line_of(query)?.as_deref(), &name)?))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckQuery {
    provider: String,
    provider_version: String,
    kubernetes: String,
    line: Option<String>,
}

async fn get_check(
    State(snapshots): SnapshotState,
    query: Result<Query<CheckQuery>, QueryRejection>,
) -> Result<Json<CheckView>, ApiError> {
    let Query(query) = query.map_err(|rejection| {
        ApiError::bad_request(format!(
            "{}; expected ?provider=NAME&provider_version=REVISION&kubernetes=REVISION[&line=LINE]",
            rejection.body_text()
        ))
    })?;
    let empty = [
        ("provider", &query.provider),
        ("provider_version", &query.provider_version),
        ("kubernetes", &query.kubernetes),
    ]
    .into_iter()
    .find(|(_, value)| value.trim().is_empty());
    if let Some((name, _)) = empty {
        return Err(ApiError::bad_request(format!(
            "query parameter {name} is empty: give a commit id, an abbreviation of one, a tag or a branch"
        )));
    }
    let line = query.line.as_deref().filter(|line| !line.trim().is_empty());
    let snapshot = current(&snapshots)?;
    Ok(Json(check(&snapshot, line, &query.provider, &query.provider_version, &query.kubernetes)?))
}

/// An error as the API returns it: its status and a message saying what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    fn bad_request(message: String) -> Self {
        Self { status: StatusCode::BAD_REQUEST, message }
    }

    fn loading() -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: format!(
                "the LKG is still loading from the index (the server has just started): retry in {LOADING_RETRY_SECONDS} s"
            ),
        }
    }
}

impl From<ViewError> for ApiError {
    fn from(error: ViewError) -> Self {
        match error {
            ViewError::UnknownProvider { .. } | ViewError::UnknownLine { .. } => {
                Self { status: StatusCode::NOT_FOUND, message: error.to_string() }
            }
        }
    }
}

/// The JSON body of an error.
#[derive(Debug, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub status: u16,
    pub message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status;
        let body = ErrorBody { error: ErrorDetail { status: status.as_u16(), message: self.message } };
        let mut response = (status, Json(body)).into_response();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, LOADING_RETRY_SECONDS.into());
        }
        response
    }
}

#[cfg(test)]
mod tests;

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
//! loader refreshes it); errors are JSON `{"error": {"status", "message"}}`.

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
    BuildLink, CheckVerdict, CheckView, CulpritView, DEFAULT_LINE, LkgView, ProviderView, Snapshot, ViewError, check,
    culprits, lkg, provider,
};

/// The routes under `/api/v1`, for the OpenAPI document's test.
pub const PATHS: &[&str] =
    &["/api/v1/lkg", "/api/v1/lkg/check", "/api/v1/lkg/{provider}", "/api/v1/culprits/{provider}"];

/// The API over the snapshots `snapshots` receives.
pub fn router(snapshots: watch::Receiver<Arc<Snapshot>>) -> Router {
    Router::new()
        .route("/api/v1/lkg", get(get_lkg))
        // A static segment wins over the parameter: `check` is never a provider name here.
        .route("/api/v1/lkg/check", get(get_check))
        .route("/api/v1/lkg/{provider}", get(get_provider))
        .route("/api/v1/culprits/{provider}", get(get_culprits))
        .with_state(snapshots)
}

type Snapshots = State<watch::Receiver<Arc<Snapshot>>>;

fn current(snapshots: &watch::Receiver<Arc<Snapshot>>) -> Arc<Snapshot> {
    snapshots.borrow().clone()
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

async fn get_lkg(State(snapshots): Snapshots, query: LineParam) -> Result<Json<LkgView>, ApiError> {
    Ok(Json(lkg(&current(&snapshots), line_of(query)?.as_deref())?))
}

async fn get_provider(
    State(snapshots): Snapshots,
    Path(name): Path<String>,
    query: LineParam,
) -> Result<Json<ProviderView>, ApiError> {
    Ok(Json(provider(&current(&snapshots), line_of(query)?.as_deref(), &name)?))
}

async fn get_culprits(
    State(snapshots): Snapshots,
    Path(name): Path<String>,
    query: LineParam,
) -> Result<Json<CulpritView>, ApiError> {
    Ok(Json(culprits(&current(&snapshots), line_of(query)?.as_deref(), &name)?))
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
    State(snapshots): Snapshots,
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
    Ok(Json(check(&current(&snapshots), line, &query.provider, &query.provider_version, &query.kubernetes)?))
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
        let body = ErrorBody { error: ErrorDetail { status: self.status.as_u16(), message: self.message } };
        (self.status, Json(body)).into_response()
    }
}

#[cfg(test)]
mod tests;

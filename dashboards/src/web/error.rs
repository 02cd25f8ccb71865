//! Why the dashboard's data could not be had, by kind, each kind one HTTP status (as
//! realworld-axum-sqlx's `http/error.rs` maps its errors): a page never says "unavailable" for a
//! decode bug, nor "not found" for a database that is down.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::layout::error_page;

/// An error of a [`super::Source`], kept whole until the page is answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// What was asked for is not there. 404.
    #[error("{0}")]
    NotFound(String),
    /// The request asks for what cannot be (a filter the source refuses). 400.
    #[error("{0}")]
    BadRequest(String),
    /// The index or the object store did not answer (down, timed out, refused). 503: try again.
    #[error("the results are unavailable: {0}")]
    Unavailable(String),
    /// The data is there but does not read (a row that does not decode): a bug, not an outage. 500.
    #[error("the results could not be read: {0}")]
    Internal(String),
}

impl SourceError {
    pub fn status(&self) -> StatusCode {
        match self {
            SourceError::NotFound(_) => StatusCode::NOT_FOUND,
            SourceError::BadRequest(_) => StatusCode::BAD_REQUEST,
            SourceError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            SourceError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for SourceError {
    fn into_response(self) -> Response {
        if self.status() == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!("dashboard: {self}");
        }
        error_page(self.status(), &self.to_string())
    }
}

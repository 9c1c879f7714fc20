//! [`ConsoleError`]: why a console page or action failed, as the page that says so.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// A console request failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsoleError {
    /// No relay of this name.
    #[error("no relay named `{relay}`")]
    UnknownRelay {
        /// The name asked for.
        relay: String,
    },
    /// The relay has not connected to its database yet.
    #[error("relay `{relay}` is not connected to its database yet")]
    NotConnected {
        /// The relay.
        relay: String,
    },
    /// Nothing with this id.
    #[error("{what} not found")]
    NotFound {
        /// What was asked for.
        what: String,
    },
    /// The request was malformed (an id that is not one).
    #[error("{0}")]
    BadRequest(String),
    /// The database failed.
    #[error("database error: {0}")]
    Database(#[from] sea_orm::DbErr),
    /// An operation refused (wrong status, missing reason, input too long).
    #[error("{0}")]
    Refused(#[from] outbox_seaorm::ops::OpsError),
    /// The operating system's random source failed.
    #[error("no random numbers: {0}")]
    Random(#[from] getrandom::Error),
}

impl ConsoleError {
    /// The HTTP status of this error.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::UnknownRelay { .. } | Self::NotFound { .. } => StatusCode::NOT_FOUND,
            Self::NotConnected { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Refused(_) => StatusCode::CONFLICT,
            Self::Database(_) | Self::Random(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        if self.status().is_server_error() {
            tracing::warn!(error = %self, "console request failed");
        }
        let status = self.status();
        (status, super::page::message_page(status, &self.to_string())).into_response()
    }
}

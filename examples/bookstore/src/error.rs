//! [`DemoError`]: why a scenario could not run.

use sea_orm::DbErr;

/// Why a scenario could not run (as opposed to running and measuring facts that differ
/// from the article's, which its report shows).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DemoError {
    /// The scenario needs a database or broker the demo was not given.
    #[error("skipped: {reason}")]
    Skipped {
        /// Why, and what to pass to run it.
        reason: String,
    },
    /// A command line setting is invalid.
    #[error("invalid setting: {0}")]
    Config(String),
    /// The database failed.
    #[error("database: {0}")]
    Database(#[from] DbErr),
    /// The outbox configuration or a unit of work failed.
    #[error("outbox: {0}")]
    Outbox(String),
    /// The relay failed.
    #[error("relay: {0}")]
    Relay(#[from] outbox_seaorm::relay::RelayError),
    /// The log relay stopped with an error (other than a missing prerequisite, which skips
    /// the scenario).
    #[error("log relay: {0}")]
    LogRelay(#[from] outbox_seaorm::relay::log::LogRelayError),
    /// The consumer failed.
    #[error("consumer: {0}")]
    Consumer(String),
    /// The broker failed outside what the scenario plays (setup, reading messages back).
    #[error("broker: {0}")]
    Broker(String),
    /// A step did not happen in time.
    #[error("timed out: {0}")]
    Timeout(String),
    /// A file-system or network error.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

impl DemoError {
    /// Whether the scenario was skipped (not failed).
    pub fn is_skipped(&self) -> bool {
        matches!(self, Self::Skipped { .. })
    }

    /// A [`DemoError::Outbox`] from any displayable error.
    pub fn outbox(error: impl std::fmt::Display) -> Self {
        Self::Outbox(error.to_string())
    }

    /// A [`DemoError::Broker`] from any displayable error.
    pub fn broker(error: impl std::fmt::Display) -> Self {
        Self::Broker(error.to_string())
    }
}

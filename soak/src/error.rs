//! [`SoakError`]: why a role of the soak stopped, shared by every role.

/// Why a role stopped before its work was done.
#[derive(Debug, thiserror::Error)]
pub enum SoakError {
    /// The plan handed to a child role is missing or malformed.
    #[error("the soak plan: {0}")]
    Plan(String),
    /// A database statement failed.
    #[error("database: {0}")]
    Database(#[from] sea_orm::DbErr),
    /// The broker failed.
    #[error("broker: {0}")]
    Broker(String),
    /// A process could not be started or stopped.
    #[error("process: {0}")]
    Process(#[from] std::io::Error),
    /// Setup or configuration failed.
    #[error("{0}")]
    Setup(String),
}

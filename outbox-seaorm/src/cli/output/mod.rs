//! What a command prints: [`human`] text or [`json`] documents, one function per result,
//! each writing the whole result to the output it is given.

pub(super) mod human;
pub(super) mod json;
pub(super) mod log_relay;
pub(super) mod periodic;
pub(super) mod scheduled;
mod text;
pub(super) mod unique;

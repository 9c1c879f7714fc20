//! The statements of the operations API: the status report's counts, reading given-up
//! rows, and operator actions with their log.

mod action;
mod rows;
mod status;

pub(crate) use action::ActionRow;

//! The statements of the operations API: the status report's counts, reading given-up
//! rows, operator actions with their log, and the live relay instances with their leases.

mod action;
mod instances;
mod rows;
mod status;

pub(crate) use action::ActionRow;
pub(crate) use instances::InstanceRow;

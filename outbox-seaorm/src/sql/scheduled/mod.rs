//! The scheduled rows' statements (see [`crate::schedule`]): a commit's insert of rows due
//! later, the promotion that moves due rows into the outbox table, reading them back, an
//! operator's cancel or new due time, and a job the log relay snoozes.

mod analyze;
mod change;
mod insert;
mod list;
mod promote;
mod snooze;

pub(crate) use insert::{insert_scheduled, prepare_scheduled};
pub(crate) use list::Which;
pub(crate) use snooze::SnoozeWriteError;

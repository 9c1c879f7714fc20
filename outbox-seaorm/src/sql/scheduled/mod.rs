//! The scheduled rows' statements (see [`crate::schedule`]): a commit's insert of rows due
//! later, the promotion that moves due rows into the outbox table, reading them back, and an
//! operator's cancel or new due time.

mod analyze;
mod change;
mod insert;
mod list;
mod promote;

pub(crate) use insert::{insert_scheduled, prepare_scheduled};
pub(crate) use list::Which;

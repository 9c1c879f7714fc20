//! The scheduled rows' statements (see [`crate::schedule`]): a commit's insert of rows due
//! later, and the promotion that moves due rows into the outbox table.

mod insert;
mod promote;

pub(crate) use insert::{insert_scheduled, prepare_scheduled};

//! The statements of the inbox side: receiving a message (the inbox row), the consumers'
//! dead letters and parked messages, and the aggregates they hold.

pub(crate) mod dead_letter;
pub(crate) mod hold;
pub(crate) mod parked;
pub(crate) mod receive;

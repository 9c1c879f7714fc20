//! The worker keys' concurrency slots (`<outbox>_worker_slots`, see
//! [`OutboxBuilder::worker_key_limit`](crate::OutboxBuilder::worker_key_limit)): the slot
//! rows written once per relay, and a batch's take of free slots.

mod ensure;
mod take;

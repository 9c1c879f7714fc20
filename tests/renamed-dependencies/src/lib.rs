//! Nothing but a home for `tests/renamed.rs`: outbox-core and outbox-seaorm depended on under
//! other names (`renamed_core`, `renamed_seaorm`), with the macros told so by `crate = "…"`.

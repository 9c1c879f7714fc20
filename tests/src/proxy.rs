//! The loopback TCP proxy that cuts and restores connections: it lives in
//! [`outbox_brokers::testing`] (feature `testing`), shared with the Bookstore demo; this
//! module keeps the tests' `outbox_tests::proxy::Proxy` path.

pub use outbox_brokers::testing::Proxy;

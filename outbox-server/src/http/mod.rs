//! The service's HTTP endpoints: the operations routes ([`ops`]: `/healthz`, `/readyz`,
//! `/metrics`) and the Prometheus recorder behind `/metrics` ([`metrics`]).

pub mod metrics;
pub mod ops;

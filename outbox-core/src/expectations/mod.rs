//! Consumer expectations: what a consumer team's handlers read of other teams' contracts,
//! written by `schemas expect` into a folder the consumer hands to the producer, and checked
//! by the producer's `schemas check --consumers DIR` (see [`check_all`] and [`with_consumers`]).
//!
//! ```text
//! DIR/expectations.json                        the consumer, and per contract it reads:
//!                                              the handler, key and aggregate type, the
//!                                              fields it reads
//! DIR/schemas/<consumer>/<event_type>.json     the schema of the type the handler decodes
//!                                              (deserialize mode: a field with a default is
//!                                              not required)
//! ```
//!
//! The fields a consumer reads are derived from its types — the generated or hand-written
//! handler argument — so a consumer that wants to depend on less declares a narrower type.
//! Files are deterministic (sorted keys, no timestamp): commit the folder and review its diff.

mod check;
mod folder;

use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::compat::field_reads;
use crate::consumed::ConsumedContracts;
use crate::name::check_consumer_name;
use crate::schema::{DRAFT_2020_12, SCHEMAS_DIR, SchemaError};

pub use self::check::{
    ConsumerReport, ConsumersReport, ExpectationReport, check, check_all, load_consumers,
    with_consumers,
};
pub use self::folder::{load, write};

/// The file at the root of an expectations folder.
pub const EXPECTATIONS_FILE: &str = "expectations.json";
/// Version of the `expectations.json` layout, written as its `format_version`.
pub const EXPECTATIONS_FORMAT_VERSION: u32 = 1;

/// The contents of `expectations.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Expectations {
    /// Layout version ([`EXPECTATIONS_FORMAT_VERSION`]).
    pub format_version: u32,
    /// Who the consumer is (a service or team name; the report names it).
    pub consumer: String,
    /// One entry per inbox consumer and contract it decodes, sorted.
    pub contracts: Vec<Expectation>,
}

/// What one inbox consumer reads of one contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Expectation {
    /// The versioned event type.
    pub event_type: String,
    /// The inbox consumer name, e.g. `inventory.reserve-stock`.
    pub inbox_consumer: String,
    /// The handler's path in the consumer's code.
    pub handler: String,
    /// The aggregate type the consumer's copy of the contract declares.
    pub aggregate_type: String,
    /// The key field it declares.
    pub key_field: String,
    /// The schema file of the type the handler decodes, relative to the folder.
    pub schema: String,
    /// The fields it reads, as change paths (`$.books[].quantity`).
    pub reads: Vec<FieldRead>,
}

/// One field a consumer's type declares.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FieldRead {
    /// Where, as a change path (see [`crate::compat`]).
    pub path: String,
    /// Whether decoding fails without it.
    pub required: bool,
}

/// An expectations folder, loaded: the file and each contract's schema.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectationSet {
    /// The folder.
    pub dir: PathBuf,
    /// `expectations.json`.
    pub expectations: Expectations,
    /// The schema of each entry of `expectations.contracts`, in the same order.
    pub schemas: Vec<Value>,
}

/// Why expectations could not be written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExpectationsError {
    /// The folder has no `expectations.json`.
    #[error(
        "`{}` is not an expectations folder: it has no {EXPECTATIONS_FILE} (the consumer writes \
         it with `schemas expect --name NAME --out DIR`)",
        dir.display()
    )]
    MissingFile {
        /// The folder.
        dir: PathBuf,
    },
    /// The folder was written by a newer version.
    #[error(
        "`{}` has format_version {found}; this version reads {EXPECTATIONS_FORMAT_VERSION} at \
         most: upgrade outbox to the consumer's version",
        path.display()
    )]
    NewerFormat {
        /// The file.
        path: PathBuf,
        /// Its `format_version`.
        found: u64,
    },
    /// A file could not be read, or is too large.
    #[error("cannot read `{}`: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A file is not what is expected.
    #[error("`{}` is not valid at `{pointer}`: {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where (a JSON pointer).
        pointer: String,
        /// What is wrong.
        reason: String,
    },
    /// No inbox handler is linked into the binary.
    #[error(
        "no inbox handler is linked into this binary: `schemas expect` lists what \
         `#[inbox_handler]` functions decode"
    )]
    NoHandlers,
    /// The consumer name given is not a valid name.
    #[error("invalid consumer name `{name}`: {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
    /// Writing failed.
    #[error(transparent)]
    Write(#[from] SchemaError),
}

/// The expectations of the handlers linked into the binary, named `consumer`.
///
/// # Errors
/// [`ExpectationsError::NoHandlers`] or [`ExpectationsError::InvalidName`].
pub fn collect(
    consumer: &str,
    consumed: &ConsumedContracts,
) -> Result<(Expectations, Vec<Value>), ExpectationsError> {
    check_consumer_name(consumer).map_err(|e| ExpectationsError::InvalidName {
        name: consumer.to_owned(),
        reason: e.to_string(),
    })?;
    if consumed.is_empty() {
        return Err(ExpectationsError::NoHandlers);
    }
    let mut contracts = Vec::new();
    let mut schemas = Vec::new();
    for registration in consumed.contracts() {
        let mut schema = (registration.schema)().to_value();
        if let Value::Object(map) = &mut schema {
            map.insert("$schema".to_owned(), json!(DRAFT_2020_12));
        }
        let reads = field_reads(&schema)
            .into_iter()
            .map(|(path, required)| FieldRead { path, required })
            .collect();
        contracts.push(Expectation {
            event_type: registration.event_type.to_owned(),
            inbox_consumer: registration.consumer.to_owned(),
            handler: registration.handler.to_owned(),
            aggregate_type: registration.aggregate_type.to_owned(),
            key_field: registration.key_field.to_owned(),
            schema: schema_file(registration.consumer, registration.event_type),
            reads,
        });
        schemas.push(schema);
    }
    Ok((
        Expectations {
            format_version: EXPECTATIONS_FORMAT_VERSION,
            consumer: consumer.to_owned(),
            contracts,
        },
        schemas,
    ))
}

/// `schemas/<inbox consumer>/<event_type>.json`.
pub fn schema_file(inbox_consumer: &str, event_type: &str) -> String {
    format!("{SCHEMAS_DIR}/{inbox_consumer}/{event_type}.json")
}

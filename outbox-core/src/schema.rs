//! JSON Schema (draft 2020-12) and AsyncAPI 3.0 export of the registered contracts.
//!
//! [`export`] writes, for a [`ContractRegistry`], the folder consumer teams read and the
//! breaking-change [`check`](crate::compat) compares against:
//!
//! ```text
//! DIR/index.json                      every contract: event type, version, key, Rust type, …
//! DIR/asyncapi.json                   AsyncAPI 3.0.0: one channel, message and send operation
//!                                     per contract, CloudEvents binary-mode headers
//! DIR/schemas/<event_type>.json       one JSON Schema (draft 2020-12) per contract
//! ```
//!
//! # Contract schema files
//!
//! Each file is the schema schemars builds for the contract type with a fresh generator
//! (serialize mode, so nested types' `$defs` stay inside the file), decorated with:
//!
//! | keyword | value |
//! |---|---|
//! | `$schema` | `https://json-schema.org/draft/2020-12/schema` |
//! | `$id` | [`schema_id`]: `urn:outbox:contract:<event_type>` |
//! | `title` | the schema name schemars gives the Rust type, e.g. `OrderPlacedV1` (a good type name for code generators); the event type is in `$id` and `x-event-type` |
//! | `description` | the contract type's doc comment (absent when it has none) |
//! | `x-event-type` | the versioned event type |
//! | `x-schema-version` | the contract version (a number) |
//! | `x-aggregate-type` | the aggregate type the key identifies |
//! | `x-key-field` | the payload field whose value is the aggregate id (`ce-subject`) |
//!
//! # Determinism
//!
//! Every file is pretty-printed JSON with object keys sorted at every level, a trailing
//! newline and no timestamp, so exporting twice from the same code gives byte-identical files
//! and the exported folder can be committed and diffed in review.
//!
//! # The AsyncAPI document
//!
//! One channel per contract (address = event type, which is also the channel, message id
//! and, prefixed with `send.`, the operation id). Each message's `payload` is a relative
//! `$ref` to `schemas/<event_type>.json`; that file declares draft 2020-12 through its own
//! `$schema`. Message `headers` describe the CloudEvents 1.0 binary-mode mapping of
//! [`cloudevents`], and `correlationId` points at `ce-correlationid`.
//!
//! ```
//! use outbox_kernel::schema::{render, ExportOptions};
//! use outbox_kernel::ContractRegistry;
//!
//! let registry = ContractRegistry::from_registrations([])?;
//! let files = render(&registry, &ExportOptions::default())?;
//! let paths: Vec<_> = files.iter().map(|f| f.path.to_string_lossy().into_owned()).collect();
//! assert_eq!(paths, ["asyncapi.json", "index.json"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::cloudevents::{self, CONTENT_TYPE_JSON, SPEC_VERSION, header};
use crate::name::{EventType, EventTypeError};
use crate::registry::{ContractRegistration, ContractRegistry};

/// The `$schema` of every exported contract schema.
pub const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";
/// The AsyncAPI version of the exported document.
pub const ASYNCAPI_VERSION: &str = "3.0.0";
/// File name of the contract index inside the export folder.
pub const INDEX_FILE: &str = "index.json";
/// File name of the AsyncAPI document inside the export folder.
pub const ASYNCAPI_FILE: &str = "asyncapi.json";
/// Folder, inside the export folder, that holds one schema file per contract.
pub const SCHEMAS_DIR: &str = "schemas";
/// Version of the `index.json` layout, written as its `format_version`.
pub const INDEX_FORMAT_VERSION: u32 = 1;

/// A fresh schema generator configured the way every contract schema is built:
/// draft 2020-12, serialize mode (the shape consumers receive).
pub fn generator() -> schemars::SchemaGenerator {
    schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
}

/// The `$id` of a contract's schema (it lives with the event-type grammar, in [`crate::name`]).
pub use crate::name::schema_id;

/// The path of a contract's schema file relative to the export folder, with `/` separators:
/// `schemas/<event_type>.json`.
pub fn schema_file(event_type: &str) -> String {
    format!("{SCHEMAS_DIR}/{event_type}.json")
}

/// The largest file an export, baseline or expectations folder may hold (a contract schema or
/// an index is a few KiB): such folders come from other teams, and are bounded before they
/// are parsed.
pub const MAX_FOLDER_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// Reads a file of an exported (or expectations) folder, at most [`MAX_FOLDER_FILE_BYTES`].
///
/// # Errors
/// The operating system's error, or one of kind [`io::ErrorKind::FileTooLarge`] for a larger
/// file (nothing past the limit is read).
pub fn read_bounded(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    fs::File::open(path)?
        .take(MAX_FOLDER_FILE_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FOLDER_FILE_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("larger than {MAX_FOLDER_FILE_BYTES} bytes"),
        ));
    }
    Ok(bytes)
}

/// Why the contracts could not be rendered or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// A registration's event type does not follow the event-type grammar (only possible for
    /// registrations built by hand: the derive checks it at compile time).
    #[error("contract `{rust_type}` has an invalid event type `{event_type}`: {source}")]
    InvalidEventType {
        /// The offending event type.
        event_type: String,
        /// The Rust type that declares it.
        rust_type: String,
        /// What is wrong with it.
        #[source]
        source: EventTypeError,
    },
    /// The contract's schema is a boolean schema instead of an object.
    #[error("the schema of `{event_type}` is a boolean schema, an object schema is required")]
    NotAnObject {
        /// The contract's event type.
        event_type: String,
    },
    /// A document could not be serialized to JSON.
    #[error("cannot serialize {what} to JSON: {source}")]
    Serialize {
        /// Which document.
        what: String,
        /// The serializer's error.
        #[source]
        source: serde_json::Error,
    },
    /// Reading, writing or removing a file failed.
    #[error("cannot {action} `{}`: {source}", path.display())]
    Io {
        /// What was being done (`write`, `create folder`, `remove`, `read folder`).
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
}

/// Settings of an export: the AsyncAPI `info` object and what happens to stale files.
///
/// ```
/// use outbox_kernel::schema::ExportOptions;
///
/// let options = ExportOptions::default()
///     .with_title("Bookstore integration events")
///     .with_version("2.1.0");
/// assert_eq!(options.title, "Bookstore integration events");
/// assert!(!options.prune_stale_schemas);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExportOptions {
    /// AsyncAPI `info.title`. Default: `Integration events`.
    pub title: String,
    /// AsyncAPI `info.version` (the version of the document, not of a contract).
    /// Default: `1.0.0`.
    pub version: String,
    /// AsyncAPI `info.description`, omitted when `None`.
    pub description: Option<String>,
    /// Whether [`export`] removes `schemas/*.json` files it did not produce, so that the folder
    /// mirrors the code exactly. Default: `false` (the library only writes); the CLI's
    /// `schemas export` sets it.
    pub prune_stale_schemas: bool,
}

impl Default for ExportOptions {
    fn default() -> Self {
        Self {
            title: "Integration events".to_owned(),
            version: "1.0.0".to_owned(),
            description: None,
            prune_stale_schemas: false,
        }
    }
}

impl ExportOptions {
    /// Sets the AsyncAPI `info.title`.
    #[must_use]
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = title.into();
        self
    }

    /// Sets the AsyncAPI `info.version`.
    #[must_use]
    pub fn with_version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// Sets the AsyncAPI `info.description`.
    #[must_use]
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Sets whether stale `schemas/*.json` files are removed.
    #[must_use]
    pub fn with_prune_stale_schemas(mut self, prune: bool) -> Self {
        self.prune_stale_schemas = prune;
        self
    }
}

/// One file of an export, in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedFile {
    /// Path relative to the export folder, e.g. `schemas/shop.ordering.order-paid.v1.json`.
    pub path: PathBuf,
    /// The exact bytes written.
    pub contents: Vec<u8>,
}

/// What [`export`] did, paths relative to the export folder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExportReport {
    /// Files created or whose contents changed.
    pub written: Vec<PathBuf>,
    /// Files that already had exactly these contents (left untouched).
    pub unchanged: Vec<PathBuf>,
    /// Stale `schemas/*.json` files removed (only with
    /// [`ExportOptions::prune_stale_schemas`]).
    pub removed: Vec<PathBuf>,
}

/// The contents of `index.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ContractIndex {
    /// Layout version of this file ([`INDEX_FORMAT_VERSION`]).
    pub format_version: u32,
    /// The contracts, sorted by event type.
    pub contracts: Vec<IndexEntry>,
}

/// One contract in `index.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct IndexEntry {
    /// Full versioned event type.
    pub event_type: String,
    /// Event type without its version segment.
    pub name: String,
    /// Contract version.
    pub version: u32,
    /// Aggregate type the key identifies.
    pub aggregate_type: String,
    /// Name of the key field (its value is the aggregate id).
    pub key_field: String,
    /// Fully qualified Rust type.
    pub rust_type: String,
    /// Schema file, relative to the export folder ([`schema_file`]).
    pub schema: String,
    /// The contract type's doc comment (empty when it has none).
    #[serde(default)]
    pub description: String,
}

impl IndexEntry {
    /// The index entry of a registered contract.
    pub fn of(registration: &ContractRegistration) -> Self {
        Self {
            event_type: registration.event_type.to_owned(),
            name: registration.name.to_owned(),
            version: registration.version,
            aggregate_type: registration.aggregate_type.to_owned(),
            key_field: registration.key_field.to_owned(),
            rust_type: registration.rust_type.to_owned(),
            schema: schema_file(registration.event_type),
            description: registration.description.trim().to_owned(),
        }
    }
}

/// The index of a registry's contracts (what `index.json` holds).
pub fn contract_index(registry: &ContractRegistry) -> ContractIndex {
    ContractIndex {
        format_version: INDEX_FORMAT_VERSION,
        contracts: registry
            .contracts()
            .iter()
            .map(|r| IndexEntry::of(r))
            .collect(),
    }
}

fn checked_event_type(
    registration: &ContractRegistration,
) -> Result<EventType<'static>, SchemaError> {
    EventType::parse(registration.event_type).map_err(|source| SchemaError::InvalidEventType {
        event_type: registration.event_type.to_owned(),
        rust_type: registration.rust_type.to_owned(),
        source,
    })
}

/// The exported JSON Schema of one contract: the schema schemars builds for the type
/// (fresh generator, draft 2020-12, serialize mode) with `$schema`, `$id`, `description` and
/// the `x-…` contract keywords set (see the [module documentation](self)). Keys are not
/// sorted yet: [`to_canonical_json`] does that.
///
/// # Errors
/// [`SchemaError::InvalidEventType`] for an event type outside the grammar,
/// [`SchemaError::NotAnObject`] for a boolean schema.
pub fn contract_schema(registration: &ContractRegistration) -> Result<Value, SchemaError> {
    checked_event_type(registration)?;
    let Value::Object(mut schema) = registration.json_schema().to_value() else {
        return Err(SchemaError::NotAnObject {
            event_type: registration.event_type.to_owned(),
        });
    };
    schema.insert("$schema".to_owned(), json!(DRAFT_2020_12));
    schema.insert("$id".to_owned(), json!(schema_id(registration.event_type)));
    let description = registration.description.trim();
    if !description.is_empty() {
        schema.insert("description".to_owned(), json!(description));
    }
    schema.insert("x-event-type".to_owned(), json!(registration.event_type));
    schema.insert("x-schema-version".to_owned(), json!(registration.version));
    schema.insert(
        "x-aggregate-type".to_owned(),
        json!(registration.aggregate_type),
    );
    schema.insert("x-key-field".to_owned(), json!(registration.key_field));
    Ok(Value::Object(schema))
}

/// The CloudEvents 1.0 binary-mode headers of one contract's messages, as a JSON Schema
/// (the AsyncAPI message `headers`).
fn headers_schema(registration: &ContractRegistration, event_type: &EventType<'_>) -> Value {
    let key = registration.key_field;
    let aggregate = registration.aggregate_type;
    json!({
        "type": "object",
        "description": "CloudEvents 1.0 binary-mode headers. Headers not listed here are \
            free-form envelope headers (names never start with `ce-`).",
        "properties": {
            header::ID: {
                "type": "string",
                "format": "uuid",
                "description": "Message id (UUIDv7), stable across redeliveries: the \
                    consumer's deduplication key."
            },
            header::SPEC_VERSION: { "type": "string", "const": SPEC_VERSION },
            header::TYPE: {
                "type": "string",
                "const": registration.event_type,
                "description": "The versioned event type."
            },
            header::SOURCE: {
                "type": "string",
                "format": "uri-reference",
                "const": cloudevents::source_of(event_type),
                "description": "The producing context: `/` and the event type's context with \
                    `/` for `.`."
            },
            header::TIME: {
                "type": "string",
                "format": "date-time",
                "description": "When the event occurred (RFC 3339)."
            },
            header::SUBJECT: {
                "type": "string",
                "description": format!(
                    "The aggregate id: the value of the payload's key field `{key}` \
                     (aggregate type `{aggregate}`). Messages with one subject are \
                     delivered in order."
                )
            },
            header::DATA_SCHEMA: {
                "type": "string",
                "const": schema_id(registration.event_type),
                "description": "The `$id` of the payload schema."
            },
            header::AGGREGATE_TYPE: {
                "type": "string",
                "const": aggregate,
                "description": "CloudEvents extension: the aggregate type."
            },
            header::CORRELATION_ID: {
                "type": "string",
                "format": "uuid",
                "description": "CloudEvents extension: the conversation this message \
                    belongs to."
            },
            header::CAUSATION_ID: {
                "type": "string",
                "format": "uuid",
                "description": "CloudEvents extension: the id of the message that caused \
                    this one."
            },
            header::CONTENT_TYPE: { "type": "string", "const": CONTENT_TYPE_JSON },
            header::TRACEPARENT: {
                "type": "string",
                "pattern": "^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$",
                "description": "W3C trace context."
            },
            header::TRACESTATE: { "type": "string", "description": "W3C trace context." }
        },
        "required": [
            header::SPEC_VERSION,
            header::ID,
            header::TYPE,
            header::SOURCE,
            header::TIME,
            header::SUBJECT,
            header::DATA_SCHEMA,
            header::AGGREGATE_TYPE,
            header::CONTENT_TYPE
        ],
        "additionalProperties": { "type": "string" }
    })
}

/// The AsyncAPI 3.0.0 document of a registry (see the [module documentation](self)).
///
/// # Errors
/// [`SchemaError::InvalidEventType`] for an event type outside the grammar.
pub fn asyncapi_document(
    registry: &ContractRegistry,
    options: &ExportOptions,
) -> Result<Value, SchemaError> {
    let mut channels = Map::new();
    let mut operations = Map::new();
    let mut messages = Map::new();
    for registration in registry.contracts() {
        let event_type = checked_event_type(registration)?;
        let id = registration.event_type;
        let description = registration.description.trim();
        let mut message = json!({
            "name": id,
            "title": registration.rust_type.rsplit("::").next().unwrap_or(id),
            "contentType": CONTENT_TYPE_JSON,
            "headers": headers_schema(registration, &event_type),
            "payload": { "$ref": schema_file(id) },
            "correlationId": {
                "description": "Correlation id of the conversation (CloudEvents extension).",
                "location": format!("$message.header#/{}", header::CORRELATION_ID)
            },
            "x-event-type": id,
            "x-schema-version": registration.version,
            "x-aggregate-type": registration.aggregate_type,
            "x-key-field": registration.key_field,
            "x-rust-type": registration.rust_type
        });
        let mut channel = json!({
            "address": id,
            "messages": { id: { "$ref": format!("#/components/messages/{id}") } }
        });
        if !description.is_empty() {
            let summary = description.lines().next().unwrap_or(description).trim();
            message["summary"] = json!(summary);
            message["description"] = json!(description);
            channel["description"] = json!(description);
        }
        messages.insert(id.to_owned(), message);
        channels.insert(id.to_owned(), channel);
        operations.insert(
            format!("send.{id}"),
            json!({
                "action": "send",
                "summary": format!("Publishes `{id}` through the outbox relay."),
                "channel": { "$ref": format!("#/channels/{id}") },
                "messages": [ { "$ref": format!("#/channels/{id}/messages/{id}") } ]
            }),
        );
    }
    let mut info = json!({ "title": options.title, "version": options.version });
    if let Some(description) = &options.description {
        info["description"] = json!(description);
    }
    Ok(json!({
        "asyncapi": ASYNCAPI_VERSION,
        "info": info,
        "defaultContentType": CONTENT_TYPE_JSON,
        "channels": channels,
        "operations": operations,
        "components": { "messages": messages }
    }))
}

/// Rebuilds `value` with the keys of every object in sorted order (whatever map type
/// `serde_json` was compiled with); array order is kept.
pub fn sort_keys(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|k| (k.clone(), sort_keys(&map[k])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sort_keys).collect()),
        other => other.clone(),
    }
}

/// The canonical bytes of a JSON document: keys sorted at every level, pretty-printed with
/// two-space indentation, and a trailing newline.
///
/// # Errors
/// [`SchemaError::Serialize`] if serialization fails (it does not for `serde_json::Value`).
pub fn to_canonical_json(value: &Value, what: &str) -> Result<Vec<u8>, SchemaError> {
    let mut bytes =
        serde_json::to_vec_pretty(&sort_keys(value)).map_err(|source| SchemaError::Serialize {
            what: what.to_owned(),
            source,
        })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Renders every file of an export in memory, in a stable order: `asyncapi.json`,
/// `index.json`, then `schemas/<event_type>.json` sorted by event type.
///
/// # Errors
/// See [`contract_schema`] and [`asyncapi_document`].
pub fn render(
    registry: &ContractRegistry,
    options: &ExportOptions,
) -> Result<Vec<ExportedFile>, SchemaError> {
    let mut files = Vec::with_capacity(registry.len() + 2);
    files.push(ExportedFile {
        path: PathBuf::from(ASYNCAPI_FILE),
        contents: to_canonical_json(&asyncapi_document(registry, options)?, ASYNCAPI_FILE)?,
    });
    let index = serde_json::to_value(contract_index(registry)).map_err(|source| {
        SchemaError::Serialize {
            what: INDEX_FILE.to_owned(),
            source,
        }
    })?;
    files.push(ExportedFile {
        path: PathBuf::from(INDEX_FILE),
        contents: to_canonical_json(&index, INDEX_FILE)?,
    });
    for registration in registry.contracts() {
        let schema = contract_schema(registration)?;
        let relative = schema_file(registration.event_type);
        files.push(ExportedFile {
            contents: to_canonical_json(&schema, &relative)?,
            path: PathBuf::from(relative),
        });
    }
    Ok(files)
}

fn io_error<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> SchemaError + 'a {
    move |source| SchemaError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

/// Writes every file of [`render`] into `dir` (created if missing), leaving files whose
/// contents are already identical untouched.
///
/// Files other than the rendered ones are left alone, unless
/// [`ExportOptions::prune_stale_schemas`] is set: then every `schemas/*.json` file that was
/// not rendered (a contract that no longer exists) is removed, so that the folder mirrors
/// the code. The CLI's `schemas export` always prunes.
///
/// # Errors
/// Any rendering error, or [`SchemaError::Io`] naming the file that could not be written.
pub fn export(
    registry: &ContractRegistry,
    dir: &Path,
    options: &ExportOptions,
) -> Result<ExportReport, SchemaError> {
    let files = render(registry, options)?;
    let schemas_dir = dir.join(SCHEMAS_DIR);
    fs::create_dir_all(&schemas_dir).map_err(io_error("create folder", &schemas_dir))?;
    let mut report = ExportReport::default();
    for file in &files {
        let target = dir.join(&file.path);
        if fs::read(&target).is_ok_and(|existing| existing == file.contents) {
            report.unchanged.push(file.path.clone());
            continue;
        }
        fs::write(&target, &file.contents).map_err(io_error("write", &target))?;
        report.written.push(file.path.clone());
    }
    if options.prune_stale_schemas {
        let produced: BTreeSet<&Path> = files.iter().map(|f| f.path.as_path()).collect();
        let entries = fs::read_dir(&schemas_dir).map_err(io_error("read folder", &schemas_dir))?;
        let mut stale = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_error("read folder", &schemas_dir))?;
            let name = entry.file_name();
            let relative = Path::new(SCHEMAS_DIR).join(&name);
            let is_json = Path::new(&name).extension().is_some_and(|e| e == "json");
            let is_file = entry.file_type().is_ok_and(|t| t.is_file());
            if is_json && is_file && !produced.contains(relative.as_path()) {
                stale.push(relative);
            }
        }
        stale.sort();
        for relative in stale {
            let target = dir.join(&relative);
            fs::remove_file(&target).map_err(io_error("remove", &target))?;
            report.removed.push(relative);
        }
    }
    Ok(report)
}

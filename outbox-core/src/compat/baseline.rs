//! The two sides of a check as sets of exported contracts: a baseline folder loaded
//! ([`ContractSet::load`]) and the current registry rendered the way the export writes it
//! ([`ContractSet::from_registry`]).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::name::{EventType, EventTypeError};
use crate::registry::ContractRegistry;
use crate::schema::{
    self, ContractIndex, INDEX_FILE, INDEX_FORMAT_VERSION, IndexEntry, SchemaError,
};

/// Why a baseline could not be loaded or the current contracts rendered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompatError {
    /// The baseline folder has no `index.json`.
    #[error(
        "`{}` is not a contract baseline: it has no {INDEX_FILE}; create it with \
         `schemas export --out {}`",
        dir.display(),
        dir.display()
    )]
    MissingIndex {
        /// The baseline folder.
        dir: PathBuf,
    },
    /// The folder was written by a newer exporter, whose layout this version does not know.
    #[error(
        "`{}` has format_version {found}; this version reads format_version \
         {INDEX_FORMAT_VERSION} at most: upgrade outbox to the version that wrote it",
        path.display()
    )]
    NewerFormat {
        /// The `index.json`.
        path: PathBuf,
        /// Its `format_version`.
        found: u32,
    },
    /// A baseline file could not be read.
    #[error("cannot read `{}`: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// A baseline file is not the JSON expected.
    #[error("`{}` is not valid: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// The baseline index lists an event type outside the grammar.
    #[error("the baseline index lists an invalid event type `{event_type}`: {source}")]
    InvalidEventType {
        /// The offending event type.
        event_type: String,
        /// What is wrong with it.
        #[source]
        source: EventTypeError,
    },
    /// The baseline index lists an event type twice.
    #[error("the baseline index lists `{event_type}` twice")]
    DuplicateEventType {
        /// The repeated event type.
        event_type: String,
    },
    /// The current contracts could not be rendered.
    #[error(transparent)]
    Render(#[from] SchemaError),
}

/// One contract as exported: its index entry and its schema.
#[derive(Debug, Clone, PartialEq)]
pub struct ContractSnapshot {
    /// The `index.json` entry.
    pub entry: IndexEntry,
    /// The exported schema (`schemas/<event_type>.json`).
    pub schema: Value,
}

/// A set of exported contracts, by event type: either the current registry or a baseline
/// folder.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContractSet {
    contracts: BTreeMap<String, ContractSnapshot>,
}

impl ContractSet {
    /// The contracts of a registry, rendered exactly as [`schema::export`] writes them.
    ///
    /// # Errors
    /// A [`SchemaError`] from rendering.
    pub fn from_registry(registry: &ContractRegistry) -> Result<Self, SchemaError> {
        let mut contracts = BTreeMap::new();
        for registration in registry.contracts() {
            let schema = schema::contract_schema(registration)?;
            contracts.insert(
                registration.event_type.to_owned(),
                ContractSnapshot {
                    entry: IndexEntry::of(registration),
                    schema,
                },
            );
        }
        Ok(Self { contracts })
    }

    /// Loads a baseline folder written by [`schema::export`]: `index.json`, then
    /// `schemas/<event_type>.json` for every contract it lists (the path is derived from the
    /// validated event type, never taken from the file).
    ///
    /// # Errors
    /// [`CompatError::MissingIndex`], [`CompatError::NewerFormat`] (a folder from a newer
    /// exporter), [`CompatError::Read`], [`CompatError::Parse`],
    /// [`CompatError::InvalidEventType`] or [`CompatError::DuplicateEventType`].
    pub fn load(dir: &Path) -> Result<Self, CompatError> {
        let index_path = dir.join(INDEX_FILE);
        let index_text = match schema::read_bounded(&index_path) {
            Ok(text) => text,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(CompatError::MissingIndex {
                    dir: dir.to_owned(),
                });
            }
            Err(source) => {
                return Err(CompatError::Read {
                    path: index_path,
                    source,
                });
            }
        };
        let index: ContractIndex =
            serde_json::from_slice(&index_text).map_err(|source| CompatError::Parse {
                path: index_path.clone(),
                source,
            })?;
        if index.format_version > INDEX_FORMAT_VERSION {
            return Err(CompatError::NewerFormat {
                path: index_path,
                found: index.format_version,
            });
        }
        let mut contracts = BTreeMap::new();
        for entry in index.contracts {
            EventType::parse(&entry.event_type).map_err(|source| {
                CompatError::InvalidEventType {
                    event_type: entry.event_type.clone(),
                    source,
                }
            })?;
            let path = dir.join(schema::schema_file(&entry.event_type));
            let text = schema::read_bounded(&path).map_err(|source| CompatError::Read {
                path: path.clone(),
                source,
            })?;
            let schema: Value = serde_json::from_slice(&text)
                .map_err(|source| CompatError::Parse { path, source })?;
            let event_type = entry.event_type.clone();
            if contracts
                .insert(event_type.clone(), ContractSnapshot { entry, schema })
                .is_some()
            {
                return Err(CompatError::DuplicateEventType { event_type });
            }
        }
        Ok(Self { contracts })
    }

    /// The contract with this event type.
    pub fn get(&self, event_type: &str) -> Option<&ContractSnapshot> {
        self.contracts.get(event_type)
    }

    /// The contracts, sorted by event type.
    pub fn iter(&self) -> impl Iterator<Item = &ContractSnapshot> {
        self.contracts.values()
    }

    /// Number of contracts.
    pub fn len(&self) -> usize {
        self.contracts.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.contracts.is_empty()
    }

    /// The event types, sorted.
    pub(super) fn event_types(&self) -> impl Iterator<Item = &String> {
        self.contracts.keys()
    }
}

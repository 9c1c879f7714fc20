//! Breaking-change check of contract schemas against a baseline.
//!
//! The baseline is a folder written by [`schema::export`] (usually
//! committed next to the code). [`check`] renders the current registry's schemas exactly as
//! the export would and compares them, contract by contract, with the baseline.
//!
//! # Policy
//!
//! A published contract version (`…v1`) is a promise in two directions:
//!
//! * **Consumers keep what they rely on.** A field removed (required or optional), a
//!   `oneOf`/`anyOf` variant removed or an enum value removed breaks them.
//! * **Messages already written stay valid.** Rows still in an outbox, messages retained by a
//!   broker and replays were produced under the old schema; a consumer built from the new one
//!   must accept them. So every *narrowing* is breaking: a field added as required, an
//!   optional field made required, a type changed or narrowed (`number` → `integer`, a type
//!   removed from a type set, `null` removed from a nullable), a string `format` added or
//!   changed, an upper bound (`maximum`, `maxLength`, `maxItems`, …) added or lowered, a
//!   lower bound (`minimum`, `minLength`, …) added or raised, a `pattern`, `const` or `enum`
//!   added, `additionalProperties` tightened (absent/`true` → `false` or a schema).
//!
//! The checker follows local `$ref`s (`#/$defs/…`) on both sides, so a change inside a nested
//! definition is reported at every field path that reaches it. It recurses into
//! `properties`, `items`, `prefixItems`, `additionalProperties`, `anyOf`/`oneOf` variants and
//! `allOf`. `$ref` cycles (recursive types) are compared once.
//!
//! Severities:
//!
//! | severity | meaning | examples |
//! |---|---|---|
//! | [`Severity::Breaking`] | fails the check | the list above; a removed contract; a changed key field or aggregate type; a change of a keyword the checker does not understand |
//! | [`Severity::Warning`] | compatible for the schema, but a strict or exhaustive consumer may stumble | an enum value or `oneOf` variant **added** (exhaustive `match`es), any widening (`integer` → `number`, `null` allowed, a bound relaxed, a required field made optional), an optional field added to a closed (`additionalProperties: false`) object |
//! | [`Severity::Compatible`] | a note | an optional field added, a description or title changed, a new contract |
//!
//! A **new contract** (including `…v2` published beside `…v1`) is reported as added and
//! passes. A **removed contract** is breaking: retiring a published version is a deliberate
//! act, done by re-exporting the baseline once no consumer reads it any more.
//!
//! # Paths
//!
//! Changes are located with a JSONPath-like path rooted at the payload, `$`:
//!
//! | segment | meaning |
//! |---|---|
//! | `.name` / `["odd-name"]` | object property (bracket form when the name is not an identifier) |
//! | `[]` | every array item (`items`) |
//! | `[0]` | a tuple element (`prefixItems`) |
//! | `.*` | every value of a map (`additionalProperties`) |
//! | `(kind=card)` | the `oneOf`/`anyOf` variant whose `kind` property is the constant `card`; otherwise the variant's constant, its single external tag, its `$defs` name, its title, or `#index` |
//!
//! e.g. `$.books[].unit_price.currency`, `$.payment(kind=card).last4`, `$.stock.*`.
//!
//! ```
//! use outbox_core::compat::{compare_schemas, ChangeKind, Severity};
//! use serde_json::json;
//!
//! let old = json!({"type": "object", "properties": {"price": {"type": "number"}},
//!                  "required": ["price"]});
//! let new = json!({"type": "object", "properties": {"price": {"type": "integer"}},
//!                  "required": ["price"]});
//! let changes = compare_schemas(&old, &new);
//! assert_eq!(changes[0].kind, ChangeKind::TypeNarrowed);
//! assert_eq!(changes[0].severity, Severity::Breaking);
//! assert_eq!(changes[0].path, "$.price");
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use crate::name::{EventType, EventTypeError};
use crate::registry::ContractRegistry;
use crate::schema::{self, ContractIndex, INDEX_FILE, IndexEntry, SchemaError};

/// How serious a change is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Severity {
    /// Breaks consumers or messages already written: the check fails.
    Breaking,
    /// Compatible for the schema, but strict or exhaustive consumers may stumble.
    Warning,
    /// A compatible change, listed as a note.
    Compatible,
}

impl Severity {
    /// The lowercase name used in the human and JSON renderings.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Breaking => "breaking",
            Self::Warning => "warning",
            Self::Compatible => "compatible",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ChangeKind {
    /// A contract that is not in the baseline.
    ContractAdded,
    /// A baseline contract that no longer exists.
    ContractRemoved,
    /// The contract's aggregate type changed (routing and `ce-aggregatetype`).
    AggregateTypeChanged,
    /// The contract's key field changed (partitioning and ordering).
    KeyFieldChanged,
    /// The Rust type behind the contract was renamed or moved.
    RustTypeChanged,
    /// A property was removed.
    FieldRemoved,
    /// A required property was added.
    FieldAddedRequired,
    /// An optional property was added.
    FieldAddedOptional,
    /// An optional property became required.
    FieldBecameRequired,
    /// A required property became optional.
    FieldBecameOptional,
    /// The accepted types no longer overlap (e.g. `string` → `object`).
    TypeChanged,
    /// Some accepted type is no longer accepted (e.g. `number` → `integer`).
    TypeNarrowed,
    /// A type is accepted that was not before (e.g. `integer` → `number`).
    TypeWidened,
    /// `null` is no longer accepted.
    NullRemoved,
    /// `null` is now accepted.
    NullAdded,
    /// A `format` was added.
    FormatAdded,
    /// The `format` changed.
    FormatChanged,
    /// The `format` was removed.
    FormatRemoved,
    /// A bound, `pattern`, `multipleOf`, `uniqueItems`, `items`, `oneOf`/`anyOf` or `allOf`
    /// restriction was added or tightened.
    ConstraintTightened,
    /// Such a restriction was removed or relaxed.
    ConstraintRelaxed,
    /// A `const` was added where any value (of the type) was accepted.
    ConstAdded,
    /// The `const` value changed.
    ConstChanged,
    /// An `enum` was added where any value (of the type) was accepted.
    EnumAdded,
    /// An enum value (or `const` alternative) was removed.
    EnumValueRemoved,
    /// An enum value was added.
    EnumValueAdded,
    /// An `enum` or `const` restriction was removed.
    ValuesUnrestricted,
    /// A `oneOf`/`anyOf` variant was removed.
    VariantRemoved,
    /// A `oneOf`/`anyOf` variant was added.
    VariantAdded,
    /// `additionalProperties` (or `unevaluatedProperties`) became stricter.
    AdditionalPropertiesTightened,
    /// `additionalProperties` (or `unevaluatedProperties`) became looser.
    AdditionalPropertiesRelaxed,
    /// A tuple element (`prefixItems`) was removed.
    TupleElementRemoved,
    /// A tuple element (`prefixItems`) was added.
    TupleElementAdded,
    /// A `$ref` could not be resolved, so the checker could not compare what it points to.
    ReferenceUnresolved,
    /// A keyword the checker does not interpret changed; it cannot prove it compatible.
    KeywordChanged,
    /// A `description`, `title`, `examples`, `default`, `deprecated`, … changed.
    AnnotationChanged,
    /// The schemas nest deeper than the checker follows.
    DepthLimitReached,
}

impl ChangeKind {
    /// The snake_case name used in the human and JSON renderings.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ContractAdded => "contract_added",
            Self::ContractRemoved => "contract_removed",
            Self::AggregateTypeChanged => "aggregate_type_changed",
            Self::KeyFieldChanged => "key_field_changed",
            Self::RustTypeChanged => "rust_type_changed",
            Self::FieldRemoved => "field_removed",
            Self::FieldAddedRequired => "field_added_required",
            Self::FieldAddedOptional => "field_added_optional",
            Self::FieldBecameRequired => "field_became_required",
            Self::FieldBecameOptional => "field_became_optional",
            Self::TypeChanged => "type_changed",
            Self::TypeNarrowed => "type_narrowed",
            Self::TypeWidened => "type_widened",
            Self::NullRemoved => "null_removed",
            Self::NullAdded => "null_added",
            Self::FormatAdded => "format_added",
            Self::FormatChanged => "format_changed",
            Self::FormatRemoved => "format_removed",
            Self::ConstraintTightened => "constraint_tightened",
            Self::ConstraintRelaxed => "constraint_relaxed",
            Self::ConstAdded => "const_added",
            Self::ConstChanged => "const_changed",
            Self::EnumAdded => "enum_added",
            Self::EnumValueRemoved => "enum_value_removed",
            Self::EnumValueAdded => "enum_value_added",
            Self::ValuesUnrestricted => "values_unrestricted",
            Self::VariantRemoved => "variant_removed",
            Self::VariantAdded => "variant_added",
            Self::AdditionalPropertiesTightened => "additional_properties_tightened",
            Self::AdditionalPropertiesRelaxed => "additional_properties_relaxed",
            Self::TupleElementRemoved => "tuple_element_removed",
            Self::TupleElementAdded => "tuple_element_added",
            Self::ReferenceUnresolved => "reference_unresolved",
            Self::KeywordChanged => "keyword_changed",
            Self::AnnotationChanged => "annotation_changed",
            Self::DepthLimitReached => "depth_limit_reached",
        }
    }
}

impl fmt::Display for ChangeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Serialized as [`as_str`](Severity::as_str), [`ChangeKind::as_str`] and
/// [`ContractStatus::as_str`]: one spelling for the human and the JSON renderings.
macro_rules! serialize_as_str {
    ($($ty:ty),+) => {$(
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }
    )+};
}

serialize_as_str!(Severity, ChangeKind, ContractStatus);

/// One difference between the baseline and the current schema of a contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    /// How serious it is.
    pub severity: Severity,
    /// What changed.
    pub kind: ChangeKind,
    /// Where, as a JSONPath-like path into the payload (see the [module docs](self)).
    pub path: String,
    /// A sentence for humans: old and new value, and why it matters.
    pub detail: String,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<10} {}: {} [{}]",
            self.severity.as_str().to_uppercase(),
            self.path,
            self.detail,
            self.kind
        )
    }
}

/// The outcome for one contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContractStatus {
    /// Identical schema and metadata.
    Unchanged,
    /// Only warnings and compatible notes.
    Changed,
    /// At least one breaking change.
    Breaking,
    /// Not in the baseline: a new contract (or a new version beside an old one).
    Added,
    /// In the baseline but no longer registered (breaking).
    Removed,
}

impl ContractStatus {
    /// The lowercase name used in the human and JSON renderings.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unchanged => "unchanged",
            Self::Changed => "changed",
            Self::Breaking => "breaking",
            Self::Added => "added",
            Self::Removed => "removed",
        }
    }
}

/// The changes of one contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContractReport {
    /// The contract's event type.
    pub event_type: String,
    /// The overall outcome.
    pub status: ContractStatus,
    /// Every change, most severe first, then by path.
    pub changes: Vec<Change>,
}

impl ContractReport {
    /// Whether any change is breaking.
    pub fn is_breaking(&self) -> bool {
        self.changes
            .iter()
            .any(|c| c.severity == Severity::Breaking)
    }
}

/// The result of comparing the current contracts with a baseline.
///
/// `Display` renders it for humans; [`to_json`](Self::to_json) (or serde) for machines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompatReport {
    /// One entry per event type present on either side, sorted by event type.
    pub contracts: Vec<ContractReport>,
}

/// Counts of a [`CompatReport`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CompatSummary {
    /// Contracts compared or listed.
    pub contracts: usize,
    /// Contracts without any change.
    pub unchanged: usize,
    /// Contracts with only non-breaking changes.
    pub changed: usize,
    /// Contracts with breaking changes.
    pub breaking: usize,
    /// New contracts.
    pub added: usize,
    /// Removed contracts.
    pub removed: usize,
    /// Breaking changes, all contracts together.
    pub breaking_changes: usize,
    /// Warnings, all contracts together.
    pub warnings: usize,
    /// Compatible notes, all contracts together.
    pub notes: usize,
}

impl CompatReport {
    /// Whether any contract has a breaking change (a removed contract counts).
    pub fn is_breaking(&self) -> bool {
        self.contracts.iter().any(ContractReport::is_breaking)
    }

    /// Whether any change is a warning.
    pub fn has_warnings(&self) -> bool {
        self.changes().any(|(_, c)| c.severity == Severity::Warning)
    }

    /// Every change with its event type.
    pub fn changes(&self) -> impl Iterator<Item = (&str, &Change)> {
        self.contracts.iter().flat_map(|c| {
            c.changes
                .iter()
                .map(|change| (c.event_type.as_str(), change))
        })
    }

    /// The report of one event type.
    pub fn contract(&self, event_type: &str) -> Option<&ContractReport> {
        self.contracts.iter().find(|c| c.event_type == event_type)
    }

    /// The counts.
    pub fn summary(&self) -> CompatSummary {
        let mut summary = CompatSummary {
            contracts: self.contracts.len(),
            ..CompatSummary::default()
        };
        for contract in &self.contracts {
            match contract.status {
                ContractStatus::Unchanged => summary.unchanged += 1,
                ContractStatus::Changed => summary.changed += 1,
                ContractStatus::Breaking => summary.breaking += 1,
                ContractStatus::Added => summary.added += 1,
                ContractStatus::Removed => summary.removed += 1,
            }
            for change in &contract.changes {
                match change.severity {
                    Severity::Breaking => summary.breaking_changes += 1,
                    Severity::Warning => summary.warnings += 1,
                    Severity::Compatible => summary.notes += 1,
                }
            }
        }
        summary
    }

    /// The pretty-printed JSON rendering (with a trailing newline):
    /// `{"breaking": bool, "summary": {…}, "contracts": [{"event_type", "status", "changes":
    /// [{"severity", "kind", "path", "detail"}]}]}`.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self)
            .unwrap_or_else(|e| format!("{{\"error\": {:?}}}", e.to_string()));
        text.push('\n');
        text
    }
}

impl Serialize for CompatReport {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct View<'a> {
            breaking: bool,
            summary: CompatSummary,
            contracts: &'a [ContractReport],
        }
        View {
            breaking: self.is_breaking(),
            summary: self.summary(),
            contracts: &self.contracts,
        }
        .serialize(serializer)
    }
}

impl fmt::Display for CompatReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let summary = self.summary();
        for contract in &self.contracts {
            if contract.status == ContractStatus::Unchanged {
                continue;
            }
            writeln!(f, "{}: {}", contract.event_type, contract.status.as_str())?;
            for change in &contract.changes {
                writeln!(f, "  {change}")?;
            }
        }
        writeln!(
            f,
            "{} contract(s): {} unchanged, {} changed, {} breaking, {} added, {} removed; \
             {} breaking change(s), {} warning(s), {} note(s)",
            summary.contracts,
            summary.unchanged,
            summary.changed,
            summary.breaking,
            summary.added,
            summary.removed,
            summary.breaking_changes,
            summary.warnings,
            summary.notes
        )?;
        if self.is_breaking() {
            writeln!(
                f,
                "result: breaking changes found. A published contract version must stay \
                 compatible: publish the change as a new version (e.g. `…v2`) beside the old \
                 one. Retiring a version is a deliberate baseline update (`schemas export`)."
            )
        } else {
            writeln!(f, "result: no breaking changes")
        }
    }
}

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
    /// [`CompatError::MissingIndex`], [`CompatError::Read`], [`CompatError::Parse`],
    /// [`CompatError::InvalidEventType`] or [`CompatError::DuplicateEventType`].
    pub fn load(dir: &Path) -> Result<Self, CompatError> {
        let index_path = dir.join(INDEX_FILE);
        let index_text = match fs::read(&index_path) {
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
        let mut contracts = BTreeMap::new();
        for entry in index.contracts {
            EventType::parse(&entry.event_type).map_err(|source| {
                CompatError::InvalidEventType {
                    event_type: entry.event_type.clone(),
                    source,
                }
            })?;
            let path = dir.join(schema::schema_file(&entry.event_type));
            let text = fs::read(&path).map_err(|source| CompatError::Read {
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
}

/// Compares the current registry with the baseline folder `baseline_dir`.
///
/// # Errors
/// A [`CompatError`] when the baseline cannot be loaded or the registry rendered.
pub fn check(
    registry: &ContractRegistry,
    baseline_dir: &Path,
) -> Result<CompatReport, CompatError> {
    let baseline = ContractSet::load(baseline_dir)?;
    let current = ContractSet::from_registry(registry)?;
    Ok(compare(&baseline, &current))
}

/// Compares two contract sets: every event type of either side gets a [`ContractReport`].
pub fn compare(baseline: &ContractSet, current: &ContractSet) -> CompatReport {
    let event_types: BTreeSet<&String> = baseline
        .contracts
        .keys()
        .chain(current.contracts.keys())
        .collect();
    let contracts = event_types
        .into_iter()
        .map(
            |event_type| match (baseline.get(event_type), current.get(event_type)) {
                (Some(old), Some(new)) => compare_contract(old, new),
                (Some(_), None) => ContractReport {
                    event_type: event_type.clone(),
                    status: ContractStatus::Removed,
                    changes: vec![Change {
                        severity: Severity::Breaking,
                        kind: ChangeKind::ContractRemoved,
                        path: ROOT.to_owned(),
                        detail: "contract removed: consumers of this published version lose \
                                 it; retire a version by re-exporting the baseline once no \
                                 consumer reads it"
                            .to_owned(),
                    }],
                },
                (None, _) => {
                    let previous = current.get(event_type).and_then(|new| {
                        baseline
                            .iter()
                            .filter(|old| old.entry.name == new.entry.name)
                            .map(|old| old.entry.version)
                            .max()
                    });
                    let detail = match previous {
                        Some(version) => format!(
                            "new contract version (the baseline has v{version} of this name)"
                        ),
                        None => "new contract".to_owned(),
                    };
                    ContractReport {
                        event_type: event_type.clone(),
                        status: ContractStatus::Added,
                        changes: vec![Change {
                            severity: Severity::Compatible,
                            kind: ChangeKind::ContractAdded,
                            path: ROOT.to_owned(),
                            detail,
                        }],
                    }
                }
            },
        )
        .collect();
    CompatReport { contracts }
}

fn compare_contract(old: &ContractSnapshot, new: &ContractSnapshot) -> ContractReport {
    let mut changes = Vec::new();
    let metadata = [
        (
            ChangeKind::AggregateTypeChanged,
            Severity::Breaking,
            "aggregate type",
            &old.entry.aggregate_type,
            &new.entry.aggregate_type,
        ),
        (
            ChangeKind::KeyFieldChanged,
            Severity::Breaking,
            "key field (aggregate id, partitioning and ordering)",
            &old.entry.key_field,
            &new.entry.key_field,
        ),
        (
            ChangeKind::RustTypeChanged,
            Severity::Compatible,
            "Rust type",
            &old.entry.rust_type,
            &new.entry.rust_type,
        ),
    ];
    for (kind, severity, what, before, after) in metadata {
        if before != after {
            changes.push(Change {
                severity,
                kind,
                path: ROOT.to_owned(),
                detail: format!("{what} changed from `{before}` to `{after}`"),
            });
        }
    }
    changes.extend(compare_schemas(&old.schema, &new.schema));
    sort_changes(&mut changes);
    let status = if changes.is_empty() {
        ContractStatus::Unchanged
    } else if changes.iter().any(|c| c.severity == Severity::Breaking) {
        ContractStatus::Breaking
    } else {
        ContractStatus::Changed
    };
    ContractReport {
        event_type: new.entry.event_type.clone(),
        status,
        changes,
    }
}

fn sort_changes(changes: &mut [Change]) {
    changes.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then_with(|| a.path.cmp(&b.path))
    });
}

/// Compares two JSON Schemas (each a whole document whose local `$ref`s resolve against
/// itself) and lists every change, most severe first, then by path.
pub fn compare_schemas(old: &Value, new: &Value) -> Vec<Change> {
    let mut comparison = Comparison {
        old_root: old,
        new_root: new,
        changes: Vec::new(),
        expanding: Vec::new(),
    };
    comparison.node(old, new, ROOT.to_owned(), 0);
    let mut changes = comparison.changes;
    sort_changes(&mut changes);
    changes
}

const ROOT: &str = "$";
/// How many schemas deep the comparison follows before giving up with a warning.
const MAX_DEPTH: usize = 128;
/// How many `$ref`s / nullable wrappers one node may go through.
const MAX_HOPS: usize = 32;

const ALL_TYPES: [&str; 7] = [
    "array", "boolean", "integer", "null", "number", "object", "string",
];

/// Keywords that only annotate: a change is a compatible note.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentEncoding",
    "contentMediaType",
];

/// Keywords interpreted by the comparison (or irrelevant to it).
const INTERPRETED: &[&str] = &[
    "$schema",
    "$id",
    "$ref",
    "$defs",
    "definitions",
    "$comment",
    "$anchor",
    "type",
    "enum",
    "const",
    "format",
    "pattern",
    "multipleOf",
    "uniqueItems",
    "maximum",
    "exclusiveMaximum",
    "maxLength",
    "maxItems",
    "maxProperties",
    "maxContains",
    "minimum",
    "exclusiveMinimum",
    "minLength",
    "minItems",
    "minProperties",
    "minContains",
    "properties",
    "required",
    "additionalProperties",
    "unevaluatedProperties",
    "items",
    "prefixItems",
    "anyOf",
    "oneOf",
    "allOf",
];

/// Upper bounds: adding or lowering one narrows.
const UPPER_BOUNDS: &[&str] = &[
    "maximum",
    "exclusiveMaximum",
    "maxLength",
    "maxItems",
    "maxProperties",
    "maxContains",
];

/// Lower bounds: adding or raising one narrows. The count bounds default to 0.
const LOWER_BOUNDS: &[(&str, Option<f64>)] = &[
    ("minimum", None),
    ("exclusiveMinimum", None),
    ("minLength", Some(0.0)),
    ("minItems", Some(0.0)),
    ("minProperties", Some(0.0)),
    ("minContains", Some(1.0)),
];

/// A schema node after following `$ref`s and unwrapping a nullable `anyOf`/`oneOf`.
struct Resolved {
    /// The effective schema: an object, or `false`.
    schema: Value,
    /// The last `$ref` followed, if any (the node's identity for cycle detection).
    via: Option<String>,
    /// Whether a `{"type": "null"}` variant was unwrapped.
    nullable: bool,
    /// A `$ref` that could not be resolved.
    unresolved: Option<String>,
}

fn lookup<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    root.pointer(pointer)
}

/// `true` → `{}`; objects unchanged; `false` stays `false`.
fn normalized(schema: &Value) -> Value {
    match schema {
        Value::Bool(true) => Value::Object(Map::new()),
        other => other.clone(),
    }
}

/// The target of a `$ref` with the referencing schema's other keywords laid over it.
fn merged(target: &Value, siblings: &Map<String, Value>, skip: &str) -> Value {
    match normalized(target) {
        Value::Object(mut map) => {
            for (key, value) in siblings {
                if key != skip && key != "$ref" {
                    map.insert(key.clone(), value.clone());
                }
            }
            Value::Object(map)
        }
        other => other,
    }
}

fn is_null_schema(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else {
        return false;
    };
    let is_null = map.get("type") == Some(&Value::String("null".to_owned()))
        || map.get("const") == Some(&Value::Null);
    is_null
        && map
            .keys()
            .all(|k| k == "type" || k == "const" || ANNOTATIONS.contains(&k.as_str()))
}

fn resolve(root: &Value, node: &Value) -> Resolved {
    let mut current = normalized(node);
    let mut via = None;
    let mut nullable = false;
    for _ in 0..MAX_HOPS {
        let Value::Object(map) = &current else {
            break;
        };
        if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
            let Some(target) = lookup(root, reference) else {
                return Resolved {
                    schema: current.clone(),
                    via,
                    nullable,
                    unresolved: Some(reference.to_owned()),
                };
            };
            via = Some(reference.to_owned());
            current = merged(target, map, "$ref");
            continue;
        }
        let wrapper = ["anyOf", "oneOf"].into_iter().find_map(|keyword| {
            let variants = map.get(keyword)?.as_array()?;
            variants
                .iter()
                .any(is_null_schema)
                .then_some((keyword, variants))
        });
        let Some((keyword, variants)) = wrapper else {
            break;
        };
        nullable = true;
        let rest: Vec<Value> = variants
            .iter()
            .filter(|v| !is_null_schema(v))
            .cloned()
            .collect();
        if let [single] = rest.as_slice() {
            current = merged(single, map, keyword);
        } else {
            let mut map = map.clone();
            map.insert(keyword.to_owned(), Value::Array(rest));
            current = Value::Object(map);
            break;
        }
    }
    Resolved {
        schema: current,
        via,
        nullable,
        unresolved: None,
    }
}

/// The JSON Schema type of a value (`integer` for numbers stored without a fraction).
fn value_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The types a schema accepts; `None` when unrestricted.
fn accepted_types(root: &Value, resolved: &Resolved, depth: usize) -> Option<BTreeSet<String>> {
    let mut types = match &resolved.schema {
        Value::Bool(false) => Some(BTreeSet::new()),
        Value::Object(map) => types_of(root, map, depth),
        _ => None,
    }?;
    if resolved.nullable {
        types.insert("null".to_owned());
    }
    Some(types)
}

fn types_of(root: &Value, map: &Map<String, Value>, depth: usize) -> Option<BTreeSet<String>> {
    match map.get("type") {
        Some(Value::String(t)) => return Some(BTreeSet::from([t.clone()])),
        Some(Value::Array(ts)) => {
            return Some(
                ts.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
            );
        }
        _ => {}
    }
    if let Some(value) = map.get("const") {
        return Some(BTreeSet::from([value_type(value).to_owned()]));
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        return Some(values.iter().map(|v| value_type(v).to_owned()).collect());
    }
    if depth >= MAX_HOPS {
        return None;
    }
    let variants = ["anyOf", "oneOf"]
        .into_iter()
        .find_map(|k| map.get(k).and_then(Value::as_array))?;
    let mut union = BTreeSet::new();
    for variant in variants {
        union.extend(accepted_types(root, &resolve(root, variant), depth + 1)?);
    }
    Some(union)
}

/// Whether a type set accepts values of type `t` (`number` accepts `integer`).
fn accepts(types: Option<&BTreeSet<String>>, t: &str) -> bool {
    types.is_none_or(|set| set.contains(t) || (t == "integer" && set.contains("number")))
}

/// The values a schema is restricted to (`const`, `enum`, or `oneOf`/`anyOf` of constants),
/// without `null`, and whether it came from a `const`.
fn value_set(root: &Value, map: &Map<String, Value>) -> Option<(Vec<Value>, bool)> {
    if let Some(value) = map.get("const") {
        return Some((vec![value.clone()], true));
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        return Some((
            values.iter().filter(|v| !v.is_null()).cloned().collect(),
            false,
        ));
    }
    let variants = ["anyOf", "oneOf"]
        .into_iter()
        .find_map(|k| map.get(k).and_then(Value::as_array))?;
    let mut values = Vec::new();
    for variant in variants {
        let resolved = resolve(root, variant);
        let variant_map = resolved.schema.as_object()?;
        let only_values = variant_map.keys().all(|k| {
            k == "type" || k == "const" || k == "enum" || ANNOTATIONS.contains(&k.as_str())
        });
        if !only_values {
            return None;
        }
        let (more, _) = value_set(root, variant_map)?;
        values.extend(more);
    }
    Some((values, false))
}

fn show(value: &Value) -> String {
    match value {
        Value::String(s) => format!("`{s}`"),
        other => format!("`{other}`"),
    }
}

/// A short rendering of an annotation value: at most 60 characters of its JSON.
fn excerpt(value: &Value) -> String {
    const LIMIT: usize = 60;
    let text = value.to_string();
    if text.chars().count() <= LIMIT {
        text
    } else {
        let cut: String = text.chars().take(LIMIT).collect();
        format!("{cut}…")
    }
}

fn show_types(types: Option<&BTreeSet<String>>) -> String {
    match types {
        None => "any type".to_owned(),
        Some(set) if set.is_empty() => "no value".to_owned(),
        Some(set) => set
            .iter()
            .map(|t| format!("`{t}`"))
            .collect::<Vec<_>>()
            .join(" | "),
    }
}

fn property_segment(name: &str) -> String {
    let mut chars = name.chars();
    let identifier = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if identifier {
        format!(".{name}")
    } else {
        format!("[{}]", Value::String(name.to_owned()))
    }
}

/// The label of a `oneOf`/`anyOf` variant (see the module docs), unique within its list.
fn variant_labels(root: &Value, variants: &[Value]) -> Vec<String> {
    let labels: Vec<String> = variants
        .iter()
        .enumerate()
        .map(|(index, raw)| variant_label(root, raw).unwrap_or_else(|| format!("#{index}")))
        .collect();
    labels
        .iter()
        .enumerate()
        .map(|(index, label)| {
            if labels.iter().filter(|l| *l == label).count() > 1 {
                format!("#{index}")
            } else {
                label.clone()
            }
        })
        .collect()
}

fn variant_label(root: &Value, raw: &Value) -> Option<String> {
    let resolved = resolve(root, raw);
    let map = resolved.schema.as_object()?;
    let plain = |value: &Value| match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if let Some(value) = map.get("const") {
        return Some(plain(value));
    }
    if let Some(properties) = map.get("properties").and_then(Value::as_object) {
        let tags: Vec<String> = properties
            .iter()
            .filter_map(|(name, schema)| {
                let resolved = resolve(root, schema);
                let value = resolved.schema.get("const")?;
                Some(format!("{name}={}", plain(value)))
            })
            .collect();
        if !tags.is_empty() {
            return Some(tags.join(","));
        }
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if let [name] = required.as_slice()
            && properties.len() == 1
            && properties.contains_key(*name)
        {
            return Some((*name).to_owned());
        }
    }
    if let Some(reference) = raw.get("$ref").and_then(Value::as_str) {
        return reference.rsplit('/').next().map(str::to_owned);
    }
    map.get("title").and_then(Value::as_str).map(str::to_owned)
}

fn required_set(map: &Map<String, Value>) -> BTreeSet<String> {
    map.get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// `additionalProperties` / `unevaluatedProperties`: open (absent or `true`), closed
/// (`false`) or a schema.
enum Openness<'a> {
    Open,
    Closed,
    Schema(&'a Value),
}

fn openness<'a>(map: &'a Map<String, Value>, keyword: &str) -> Openness<'a> {
    match map.get(keyword) {
        None | Some(Value::Bool(true)) => Openness::Open,
        Some(Value::Bool(false)) => Openness::Closed,
        Some(Value::Object(o)) if o.is_empty() => Openness::Open,
        Some(schema) => Openness::Schema(schema),
    }
}

struct Comparison<'a> {
    old_root: &'a Value,
    new_root: &'a Value,
    changes: Vec<Change>,
    /// `$ref` pairs being compared further up: meeting one again is a cycle.
    expanding: Vec<(Option<String>, Option<String>)>,
}

impl Comparison<'_> {
    fn report(&mut self, severity: Severity, kind: ChangeKind, path: &str, detail: String) {
        self.changes.push(Change {
            severity,
            kind,
            path: path.to_owned(),
            detail,
        });
    }

    fn node(&mut self, old: &Value, new: &Value, path: String, depth: usize) {
        if depth > MAX_DEPTH {
            self.report(
                Severity::Warning,
                ChangeKind::DepthLimitReached,
                &path,
                format!("schemas nest deeper than {MAX_DEPTH} levels; not compared further"),
            );
            return;
        }
        let old = resolve(self.old_root, old);
        let new = resolve(self.new_root, new);
        if old.unresolved.is_some() || new.unresolved.is_some() {
            if old.unresolved != new.unresolved {
                let (side, reference) = match (&old.unresolved, &new.unresolved) {
                    (Some(r), _) => ("baseline", r),
                    (None, Some(r)) => ("current", r),
                    (None, None) => return,
                };
                self.report(
                    Severity::Breaking,
                    ChangeKind::ReferenceUnresolved,
                    &path,
                    format!(
                        "cannot resolve `$ref` `{reference}` in the {side} schema, so the \
                         change cannot be proven compatible"
                    ),
                );
            }
            return;
        }
        let key = (old.via.clone(), new.via.clone());
        let through_reference = key.0.is_some() || key.1.is_some();
        if through_reference && self.expanding.contains(&key) {
            return;
        }
        if through_reference {
            self.expanding.push(key);
        }
        self.resolved(&old, &new, &path, depth);
        if through_reference {
            self.expanding.pop();
        }
    }

    fn resolved(&mut self, old: &Resolved, new: &Resolved, path: &str, depth: usize) {
        match (&old.schema, &new.schema) {
            (Value::Bool(false), Value::Bool(false)) => return,
            (Value::Bool(false), _) => {
                self.report(
                    Severity::Warning,
                    ChangeKind::ConstraintRelaxed,
                    path,
                    "accepts values now (was the `false` schema)".to_owned(),
                );
                return;
            }
            (_, Value::Bool(false)) => {
                self.report(
                    Severity::Breaking,
                    ChangeKind::TypeChanged,
                    path,
                    "accepts no value any more (the `false` schema)".to_owned(),
                );
                return;
            }
            _ => {}
        }
        let (Some(o), Some(n)) = (old.schema.as_object(), new.schema.as_object()) else {
            return;
        };
        if !self.types(old, new, path, depth) {
            return;
        }
        let values_compared = self.values(o, n, path);
        self.format_and_bounds(o, n, path);
        self.properties(o, n, path, depth);
        for keyword in ["additionalProperties", "unevaluatedProperties"] {
            self.openness(o, n, keyword, path, depth);
        }
        self.arrays(o, n, path, depth);
        if !values_compared {
            self.variants(o, n, path, depth);
        }
        self.all_of(o, n, path, depth);
        self.annotations(o, n, path);
        self.other_keywords(o, n, path);
    }

    /// Compares accepted types; returns `false` when they no longer overlap (nothing more to
    /// compare).
    fn types(&mut self, old: &Resolved, new: &Resolved, path: &str, depth: usize) -> bool {
        let old_types = accepted_types(self.old_root, old, depth);
        let new_types = accepted_types(self.new_root, new, depth);
        let old_list: Vec<&str> = match &old_types {
            Some(set) => set.iter().map(String::as_str).collect(),
            None => ALL_TYPES.to_vec(),
        };
        let new_list: Vec<&str> = match &new_types {
            Some(set) => set.iter().map(String::as_str).collect(),
            None => ALL_TYPES.to_vec(),
        };
        let removed: Vec<&str> = old_list
            .iter()
            .copied()
            .filter(|t| !accepts(new_types.as_ref(), t))
            .collect();
        let added: Vec<&str> = new_list
            .iter()
            .copied()
            .filter(|t| !accepts(old_types.as_ref(), t))
            .collect();
        let (old_shown, new_shown) = (
            show_types(old_types.as_ref()),
            show_types(new_types.as_ref()),
        );
        let old_non_null = old_list.iter().any(|t| *t != "null");
        let new_non_null = new_list.iter().any(|t| *t != "null");
        let overlap = old_list
            .iter()
            .any(|t| *t != "null" && accepts(new_types.as_ref(), t))
            || new_list
                .iter()
                .any(|t| *t != "null" && accepts(old_types.as_ref(), t));
        if old_non_null && new_non_null && !overlap {
            self.report(
                Severity::Breaking,
                ChangeKind::TypeChanged,
                path,
                format!("type changed from {old_shown} to {new_shown}"),
            );
            return false;
        }
        if removed.contains(&"null") {
            self.report(
                Severity::Breaking,
                ChangeKind::NullRemoved,
                path,
                "no longer nullable: messages already written with `null` here become \
                 invalid"
                    .to_owned(),
            );
        }
        if removed.iter().any(|t| *t != "null") {
            self.report(
                Severity::Breaking,
                ChangeKind::TypeNarrowed,
                path,
                format!(
                    "type narrowed from {old_shown} to {new_shown}: values of type {} are no \
                     longer accepted",
                    removed
                        .iter()
                        .filter(|t| **t != "null")
                        .map(|t| format!("`{t}`"))
                        .collect::<Vec<_>>()
                        .join(" | ")
                ),
            );
        }
        if added.contains(&"null") {
            self.report(
                Severity::Warning,
                ChangeKind::NullAdded,
                path,
                "became nullable: consumers that expect a value may receive `null`".to_owned(),
            );
        }
        if added.iter().any(|t| *t != "null") {
            self.report(
                Severity::Warning,
                ChangeKind::TypeWidened,
                path,
                format!(
                    "type widened from {old_shown} to {new_shown}: existing consumers may \
                     reject the new values"
                ),
            );
        }
        true
    }

    /// Compares `const` / `enum` restrictions; returns whether both sides were value sets
    /// (then their variants need no separate comparison).
    fn values(&mut self, o: &Map<String, Value>, n: &Map<String, Value>, path: &str) -> bool {
        let old = value_set(self.old_root, o);
        let new = value_set(self.new_root, n);
        match (old, new) {
            (None, None) => false,
            (Some(_), None) => {
                self.report(
                    Severity::Warning,
                    ChangeKind::ValuesUnrestricted,
                    path,
                    "no longer restricted to fixed values (`enum`/`const` removed): consumers \
                     may receive values they do not know"
                        .to_owned(),
                );
                true
            }
            (None, Some((values, from_const))) => {
                let shown: Vec<String> = values.iter().map(show).collect();
                if from_const {
                    self.report(
                        Severity::Breaking,
                        ChangeKind::ConstAdded,
                        path,
                        format!(
                            "`const` {} added: every other value becomes invalid",
                            shown.join(", ")
                        ),
                    );
                } else {
                    self.report(
                        Severity::Breaking,
                        ChangeKind::EnumAdded,
                        path,
                        format!(
                            "restricted to the values {}: every other value becomes invalid",
                            shown.join(", ")
                        ),
                    );
                }
                true
            }
            (Some((old_values, old_const)), Some((new_values, new_const))) => {
                if old_const && new_const && old_values != new_values {
                    let (before, after) = (
                        old_values.first().map(show).unwrap_or_default(),
                        new_values.first().map(show).unwrap_or_default(),
                    );
                    self.report(
                        Severity::Breaking,
                        ChangeKind::ConstChanged,
                        path,
                        format!("`const` changed from {before} to {after}"),
                    );
                    return true;
                }
                for value in old_values.iter().filter(|v| !new_values.contains(v)) {
                    self.report(
                        Severity::Breaking,
                        ChangeKind::EnumValueRemoved,
                        path,
                        format!(
                            "value {} removed: consumers handling it and messages already \
                             carrying it break",
                            show(value)
                        ),
                    );
                }
                for value in new_values.iter().filter(|v| !old_values.contains(v)) {
                    self.report(
                        Severity::Warning,
                        ChangeKind::EnumValueAdded,
                        path,
                        format!(
                            "value {} added: consumers that match the values exhaustively \
                             must handle it",
                            show(value)
                        ),
                    );
                }
                true
            }
        }
    }

    fn format_and_bounds(&mut self, o: &Map<String, Value>, n: &Map<String, Value>, path: &str) {
        match (o.get("format"), n.get("format")) {
            (None, Some(f)) => self.report(
                Severity::Breaking,
                ChangeKind::FormatAdded,
                path,
                format!("`format` {} added", show(f)),
            ),
            (Some(before), Some(after)) if before != after => self.report(
                Severity::Breaking,
                ChangeKind::FormatChanged,
                path,
                format!("`format` changed from {} to {}", show(before), show(after)),
            ),
            (Some(f), None) => self.report(
                Severity::Warning,
                ChangeKind::FormatRemoved,
                path,
                format!(
                    "`format` {} removed: consumers may receive other values",
                    show(f)
                ),
            ),
            _ => {}
        }
        for keyword in ["pattern", "multipleOf"] {
            match (o.get(keyword), n.get(keyword)) {
                (None, Some(v)) => self.report(
                    Severity::Breaking,
                    ChangeKind::ConstraintTightened,
                    path,
                    format!("`{keyword}` {} added", show(v)),
                ),
                (Some(before), Some(after)) if before != after => self.report(
                    Severity::Breaking,
                    ChangeKind::ConstraintTightened,
                    path,
                    format!(
                        "`{keyword}` changed from {} to {}",
                        show(before),
                        show(after)
                    ),
                ),
                (Some(v), None) => self.report(
                    Severity::Warning,
                    ChangeKind::ConstraintRelaxed,
                    path,
                    format!("`{keyword}` {} removed", show(v)),
                ),
                _ => {}
            }
        }
        let unique = |m: &Map<String, Value>| m.get("uniqueItems") == Some(&Value::Bool(true));
        match (unique(o), unique(n)) {
            (false, true) => self.report(
                Severity::Breaking,
                ChangeKind::ConstraintTightened,
                path,
                "`uniqueItems` added".to_owned(),
            ),
            (true, false) => self.report(
                Severity::Warning,
                ChangeKind::ConstraintRelaxed,
                path,
                "`uniqueItems` removed".to_owned(),
            ),
            _ => {}
        }
        for &keyword in UPPER_BOUNDS {
            let (before, after) = (
                o.get(keyword).and_then(Value::as_f64),
                n.get(keyword).and_then(Value::as_f64),
            );
            self.bound(keyword, before, after, |b, a| a < b, path);
        }
        for &(keyword, default) in LOWER_BOUNDS {
            let (before, after) = (
                o.get(keyword).and_then(Value::as_f64).or(default),
                n.get(keyword).and_then(Value::as_f64).or(default),
            );
            self.bound(keyword, before, after, |b, a| a > b, path);
        }
    }

    /// Reports a bound change: adding one, or moving it so that `tighter(before, after)`,
    /// is breaking; removing or loosening one is a warning.
    fn bound(
        &mut self,
        keyword: &str,
        before: Option<f64>,
        after: Option<f64>,
        tighter: impl Fn(f64, f64) -> bool,
        path: &str,
    ) {
        match (before, after) {
            (None, Some(a)) => self.report(
                Severity::Breaking,
                ChangeKind::ConstraintTightened,
                path,
                format!("`{keyword}` {a} added"),
            ),
            (Some(b), None) => self.report(
                Severity::Warning,
                ChangeKind::ConstraintRelaxed,
                path,
                format!("`{keyword}` {b} removed: consumers may receive values beyond it"),
            ),
            (Some(b), Some(a)) if tighter(b, a) => self.report(
                Severity::Breaking,
                ChangeKind::ConstraintTightened,
                path,
                format!("`{keyword}` tightened from {b} to {a}"),
            ),
            (Some(b), Some(a)) if b != a => self.report(
                Severity::Warning,
                ChangeKind::ConstraintRelaxed,
                path,
                format!("`{keyword}` relaxed from {b} to {a}: consumers may receive values beyond the old bound"),
            ),
            _ => {}
        }
    }

    fn properties(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        path: &str,
        depth: usize,
    ) {
        let empty = Map::new();
        let old_properties = o
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let new_properties = n
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let (old_required, new_required) = (required_set(o), required_set(n));
        let old_closed = matches!(openness(o, "additionalProperties"), Openness::Closed)
            || matches!(openness(o, "unevaluatedProperties"), Openness::Closed);
        let names: BTreeSet<&String> = old_properties.keys().chain(new_properties.keys()).collect();
        for name in names {
            let field = format!("{path}{}", property_segment(name));
            let was_required = old_required.contains(name.as_str());
            let is_required = new_required.contains(name.as_str());
            match (old_properties.get(name), new_properties.get(name)) {
                (Some(_), None) => self.report(
                    Severity::Breaking,
                    ChangeKind::FieldRemoved,
                    &field,
                    format!(
                        "{} field `{name}` removed: consumers that read it break",
                        if was_required { "required" } else { "optional" }
                    ),
                ),
                (None, Some(_)) if is_required => self.report(
                    Severity::Breaking,
                    ChangeKind::FieldAddedRequired,
                    &field,
                    format!("required field `{name}` added: messages already written lack it"),
                ),
                (None, Some(_)) if old_closed => self.report(
                    Severity::Warning,
                    ChangeKind::FieldAddedOptional,
                    &field,
                    format!(
                        "optional field `{name}` added to an object that allowed no other \
                         properties: strict consumers reject it"
                    ),
                ),
                (None, Some(_)) => self.report(
                    Severity::Compatible,
                    ChangeKind::FieldAddedOptional,
                    &field,
                    format!("optional field `{name}` added"),
                ),
                (Some(before), Some(after)) => {
                    if is_required && !was_required {
                        self.report(
                            Severity::Breaking,
                            ChangeKind::FieldBecameRequired,
                            &field,
                            format!(
                                "field `{name}` became required: messages already written \
                                 may lack it"
                            ),
                        );
                    } else if was_required && !is_required {
                        self.report(
                            Severity::Warning,
                            ChangeKind::FieldBecameOptional,
                            &field,
                            format!(
                                "field `{name}` became optional: consumers that expect it may \
                                 not receive it"
                            ),
                        );
                    }
                    self.node(before, after, field, depth + 1);
                }
                (None, None) => {}
            }
        }
    }

    fn openness(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        keyword: &str,
        path: &str,
        depth: usize,
    ) {
        match (openness(o, keyword), openness(n, keyword)) {
            (Openness::Open, Openness::Open) | (Openness::Closed, Openness::Closed) => {}
            (Openness::Schema(before), Openness::Schema(after)) => {
                self.node(before, after, format!("{path}.*"), depth + 1);
            }
            (Openness::Open, Openness::Closed) | (Openness::Schema(_), Openness::Closed) => {
                self.report(
                    Severity::Breaking,
                    ChangeKind::AdditionalPropertiesTightened,
                    path,
                    format!(
                        "`{keyword}: false` added: messages with other properties become \
                         invalid"
                    ),
                );
            }
            (Openness::Open, Openness::Schema(_)) => self.report(
                Severity::Breaking,
                ChangeKind::AdditionalPropertiesTightened,
                path,
                format!("`{keyword}` restricted to a schema (was open)"),
            ),
            (Openness::Closed, _) | (Openness::Schema(_), Openness::Open) => self.report(
                Severity::Warning,
                ChangeKind::AdditionalPropertiesRelaxed,
                path,
                format!("`{keyword}` relaxed: consumers may receive properties they do not know"),
            ),
        }
    }

    fn arrays(&mut self, o: &Map<String, Value>, n: &Map<String, Value>, path: &str, depth: usize) {
        match (o.get("items"), n.get("items")) {
            (Some(before), Some(after)) => {
                self.node(before, after, format!("{path}[]"), depth + 1);
            }
            (None, Some(_)) => self.report(
                Severity::Breaking,
                ChangeKind::ConstraintTightened,
                path,
                "`items` restricted (was any item)".to_owned(),
            ),
            (Some(_), None) => self.report(
                Severity::Warning,
                ChangeKind::ConstraintRelaxed,
                path,
                "`items` no longer restricted".to_owned(),
            ),
            (None, None) => {}
        }
        let empty = Vec::new();
        let before = o
            .get("prefixItems")
            .and_then(Value::as_array)
            .unwrap_or(&empty);
        let after = n
            .get("prefixItems")
            .and_then(Value::as_array)
            .unwrap_or(&empty);
        for (index, (b, a)) in before.iter().zip(after).enumerate() {
            self.node(b, a, format!("{path}[{index}]"), depth + 1);
        }
        for index in after.len()..before.len() {
            self.report(
                Severity::Breaking,
                ChangeKind::TupleElementRemoved,
                &format!("{path}[{index}]"),
                format!("tuple element {index} removed"),
            );
        }
        for index in before.len()..after.len() {
            self.report(
                Severity::Warning,
                ChangeKind::TupleElementAdded,
                &format!("{path}[{index}]"),
                format!("tuple element {index} added"),
            );
        }
    }

    fn variants(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        path: &str,
        depth: usize,
    ) {
        let list = |m: &Map<String, Value>| {
            ["oneOf", "anyOf"]
                .into_iter()
                .find_map(|k| m.get(k).and_then(Value::as_array).map(|v| (k, v.clone())))
        };
        match (list(o), list(n)) {
            (None, None) => {}
            (None, Some((keyword, _))) => self.report(
                Severity::Breaking,
                ChangeKind::ConstraintTightened,
                path,
                format!("`{keyword}` added: values must now match one of its variants"),
            ),
            (Some((keyword, _)), None) => self.report(
                Severity::Warning,
                ChangeKind::ConstraintRelaxed,
                path,
                format!("`{keyword}` removed"),
            ),
            (Some((_, before)), Some((_, after))) => {
                let old_labels = variant_labels(self.old_root, &before);
                let new_labels = variant_labels(self.new_root, &after);
                for (label, old_variant) in old_labels.iter().zip(&before) {
                    let variant_path = format!("{path}({label})");
                    match new_labels.iter().position(|l| l == label) {
                        Some(i) => self.node(old_variant, &after[i], variant_path, depth + 1),
                        None => self.report(
                            Severity::Breaking,
                            ChangeKind::VariantRemoved,
                            &variant_path,
                            format!("variant `{label}` removed: messages already written with it become invalid"),
                        ),
                    }
                }
                for label in new_labels.iter().filter(|l| !old_labels.contains(l)) {
                    self.report(
                        Severity::Warning,
                        ChangeKind::VariantAdded,
                        &format!("{path}({label})"),
                        format!(
                            "variant `{label}` added: consumers that match the variants \
                             exhaustively must handle it"
                        ),
                    );
                }
            }
        }
    }

    fn all_of(&mut self, o: &Map<String, Value>, n: &Map<String, Value>, path: &str, depth: usize) {
        let empty = Vec::new();
        let before = o.get("allOf").and_then(Value::as_array).unwrap_or(&empty);
        let after = n.get("allOf").and_then(Value::as_array).unwrap_or(&empty);
        for (b, a) in before.iter().zip(after) {
            self.node(b, a, path.to_owned(), depth + 1);
        }
        if after.len() > before.len() {
            self.report(
                Severity::Breaking,
                ChangeKind::ConstraintTightened,
                path,
                format!("{} `allOf` schema(s) added", after.len() - before.len()),
            );
        } else if before.len() > after.len() {
            self.report(
                Severity::Warning,
                ChangeKind::ConstraintRelaxed,
                path,
                format!("{} `allOf` schema(s) removed", before.len() - after.len()),
            );
        }
    }

    fn annotations(&mut self, o: &Map<String, Value>, n: &Map<String, Value>, path: &str) {
        for &keyword in ANNOTATIONS {
            let (before, after) = (o.get(keyword), n.get(keyword));
            if before == after {
                continue;
            }
            let detail = match (before, after) {
                (None, Some(a)) => format!("`{keyword}` added: {}", excerpt(a)),
                (Some(b), None) => format!("`{keyword}` removed (was {})", excerpt(b)),
                (Some(b), Some(a)) => {
                    format!("`{keyword}` changed from {} to {}", excerpt(b), excerpt(a))
                }
                (None, None) => continue,
            };
            self.report(
                Severity::Compatible,
                ChangeKind::AnnotationChanged,
                path,
                detail,
            );
        }
    }

    fn other_keywords(&mut self, o: &Map<String, Value>, n: &Map<String, Value>, path: &str) {
        let keywords: BTreeSet<&String> = o.keys().chain(n.keys()).collect();
        for keyword in keywords {
            let interpreted = INTERPRETED.contains(&keyword.as_str())
                || ANNOTATIONS.contains(&keyword.as_str())
                || keyword.starts_with("x-");
            if interpreted || o.get(keyword) == n.get(keyword) {
                continue;
            }
            self.report(
                Severity::Breaking,
                ChangeKind::KeywordChanged,
                path,
                format!(
                    "`{keyword}` changed; the checker does not interpret it and cannot prove \
                     the change compatible"
                ),
            );
        }
    }
}

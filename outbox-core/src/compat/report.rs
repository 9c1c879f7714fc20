//! The report model: what changed ([`Change`], its [`Severity`] and [`ChangeKind`]), per
//! contract ([`ContractReport`]) and for the whole check ([`CompatReport`]), with its human
//! (`Display`) and JSON renderings.

use std::fmt;

use serde::{Serialize, Serializer};

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
    /// Where, as a JSONPath-like path into the payload (see the [module docs](crate::compat)).
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

/// The path of the payload itself, where every change's path starts.
pub(super) const ROOT: &str = "$";

/// Sorts changes the way a report lists them: most severe first, then by path.
pub(crate) fn sort_changes(changes: &mut [Change]) {
    changes.sort_by(|a, b| {
        a.severity
            .cmp(&b.severity)
            .then_with(|| a.path.cmp(&b.path))
    });
}

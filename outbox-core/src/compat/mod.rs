//! Breaking-change check of contract schemas against a baseline.
//!
//! The baseline is a folder written by [`schema::export`](crate::schema::export) (usually
//! committed next to the code). [`check`] renders the current registry's schemas exactly as
//! the export would and compares them, contract by contract, with the baseline.
//!
//! The parts: the report model ([`CompatReport`]), the two sides of a check as
//! [`ContractSet`]s (a baseline folder loaded, or the registry rendered), the comparison of
//! two sets contract by contract ([`compare`]) and, under it, the schema diff engine
//! ([`compare_schemas`]).
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
//! use outbox_kernel::compat::{compare_schemas, ChangeKind, Severity};
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

mod baseline;
mod contracts;
mod diff;
mod report;

use std::path::Path;

use crate::registry::ContractRegistry;

pub use self::baseline::{CompatError, ContractSet, ContractSnapshot};
pub use self::contracts::compare;
pub use self::diff::compare_schemas;
pub(crate) use self::diff::field_reads;
pub(crate) use self::report::sort_changes as sort_report_changes;
pub use self::report::{
    Change, ChangeKind, CompatReport, CompatSummary, ContractReport, ContractStatus, Severity,
};

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

//! Consumer-driven checks: each consumer's expectations against the producer's contracts,
//! and a producer's breaking changes weighed by who reads what.
//!
//! A consumer breaks when a message the producer may send fails to decode with the
//! consumer's type. The schema diff runs from the producer's schema (old) to the consumer's
//! (new) and is read that way round: the consumer accepting **less** than the producer sends
//! (a type, a format, an enum value, a bound, a required field the producer leaves out or
//! does not send) is breaking; the consumer accepting more, or not reading a field, is not.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{ExpectationSet, ExpectationsError, load};
use crate::compat::{
    Change, ChangeKind, CompatReport, ContractSet, ContractStatus, Severity, compare_schemas,
};

/// The outcome of one expectation: one contract as one inbox consumer decodes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ExpectationReport {
    /// The versioned event type.
    pub event_type: String,
    /// The inbox consumer that decodes it.
    pub inbox_consumer: String,
    /// Its handler.
    pub handler: String,
    /// Whether the producer's current contract breaks it.
    pub breaking: bool,
    /// What the consumer would stumble on (breaking) or should know (notes).
    pub changes: Vec<Change>,
}

/// The outcome for one consumer (one expectations folder).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ConsumerReport {
    /// The consumer's name (`expectations.json`'s `consumer`).
    pub consumer: String,
    /// Its folder.
    pub dir: PathBuf,
    /// Whether any of its expectations breaks.
    pub breaking: bool,
    /// One entry per expectation.
    pub contracts: Vec<ExpectationReport>,
}

/// Every consumer's outcome, and (with a baseline) the producer's own changes weighed by
/// who reads them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsumersReport {
    /// The baseline check, its breaking changes in fields no consumer reads turned into notes.
    pub baseline: Option<CompatReport>,
    /// One entry per consumer, sorted by name.
    pub consumers: Vec<ConsumerReport>,
}

impl ConsumersReport {
    /// Whether any consumer breaks, or the baseline check found a breaking change that a
    /// consumer reads.
    pub fn is_breaking(&self) -> bool {
        self.consumers.iter().any(|c| c.breaking)
            || self
                .baseline
                .as_ref()
                .is_some_and(CompatReport::is_breaking)
    }

    /// Whether any change is a warning (the baseline's).
    pub fn has_warnings(&self) -> bool {
        self.baseline
            .as_ref()
            .is_some_and(CompatReport::has_warnings)
    }

    /// The consumers that break, by name.
    pub fn breaking_consumers(&self) -> Vec<&str> {
        self.consumers
            .iter()
            .filter(|c| c.breaking)
            .map(|c| c.consumer.as_str())
            .collect()
    }

    /// Pretty-printed JSON with a trailing newline: `{"breaking", "baseline": {…} | null,
    /// "consumers": [{"consumer", "dir", "breaking", "contracts": [{"event_type",
    /// "inbox_consumer", "handler", "breaking", "changes": [{"severity", "kind", "path",
    /// "detail"}]}]}]}`.
    pub fn to_json(&self) -> String {
        #[derive(Serialize)]
        struct View<'a> {
            breaking: bool,
            breaking_consumers: Vec<&'a str>,
            baseline: Option<&'a CompatReport>,
            consumers: &'a [ConsumerReport],
        }
        let view = View {
            breaking: self.is_breaking(),
            breaking_consumers: self.breaking_consumers(),
            baseline: self.baseline.as_ref(),
            consumers: &self.consumers,
        };
        let mut text = serde_json::to_string_pretty(&view)
            .unwrap_or_else(|e| format!("{{\"error\": {:?}}}", e.to_string()));
        text.push('\n');
        text
    }
}

impl fmt::Display for ConsumersReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(baseline) = &self.baseline {
            write!(f, "{baseline}")?;
        }
        for consumer in &self.consumers {
            let verdict = if consumer.breaking { "BREAKS" } else { "ok" };
            writeln!(
                f,
                "consumer {} ({}): {verdict}",
                consumer.consumer,
                consumer.dir.display()
            )?;
            for contract in &consumer.contracts {
                let verdict = if contract.breaking { "breaks" } else { "ok" };
                writeln!(
                    f,
                    "  {} read by {} ({}): {verdict}",
                    contract.event_type, contract.inbox_consumer, contract.handler
                )?;
                for change in &contract.changes {
                    writeln!(f, "    {change}")?;
                }
            }
        }
        let breaking = self.breaking_consumers();
        if breaking.is_empty() {
            writeln!(
                f,
                "consumers: {} checked, none breaks",
                self.consumers.len()
            )
        } else {
            writeln!(
                f,
                "consumers: {} checked, {} break: {}",
                self.consumers.len(),
                breaking.len(),
                breaking.join(", ")
            )
        }
    }
}

/// The last segment of a change path removed: `$.a.b` → `$.a`, `$.a["x-y"]` → `$.a`.
fn parent(path: &str) -> &str {
    let cut = if path.ends_with("\"]") {
        path.rfind("[\"")
    } else {
        path.rfind('.')
    };
    cut.map_or(path, |i| &path[..i])
}

/// Whether `a` is `b` or contains it, at a segment boundary.
fn covers(a: &str, b: &str) -> bool {
    b.strip_prefix(a)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[', '(']))
}

/// The changes of the producer's schema (`old`) against a consumer's (`new`), read for the
/// consumer (see the module documentation).
fn reader_changes(producer: &serde_json::Value, consumer: &serde_json::Value) -> Vec<Change> {
    let raw = compare_schemas(producer, consumer);
    let closed: Vec<String> = raw
        .iter()
        .filter(|c| c.kind == ChangeKind::AdditionalPropertiesTightened)
        .map(|c| c.path.clone())
        .collect();
    let mut changes = Vec::new();
    for change in raw {
        let (severity, detail) = match change.kind {
            // The producer sends a field the consumer's type does not declare: ignored,
            // unless that type denies unknown fields.
            ChangeKind::FieldRemoved if closed.iter().any(|p| p == parent(&change.path)) => (
                Severity::Breaking,
                "the producer sends this field and the consumer's type denies unknown fields"
                    .to_owned(),
            ),
            ChangeKind::FieldRemoved
            | ChangeKind::AdditionalPropertiesTightened
            | ChangeKind::AnnotationChanged
            | ChangeKind::RustTypeChanged => continue,
            ChangeKind::FieldAddedRequired => (
                Severity::Breaking,
                "the consumer requires this field and the producer does not send it".to_owned(),
            ),
            ChangeKind::FieldBecameRequired => (
                Severity::Breaking,
                "the consumer requires this field and the producer may leave it out".to_owned(),
            ),
            ChangeKind::FieldAddedOptional => (
                Severity::Compatible,
                "the consumer reads this optional field, which the producer does not send (it \
                 gets its default)"
                    .to_owned(),
            ),
            _ if change.severity == Severity::Breaking => (
                Severity::Breaking,
                format!(
                    "the consumer accepts less than the producer sends: {}",
                    change.detail
                ),
            ),
            // The consumer accepts more than the producer sends.
            _ => continue,
        };
        changes.push(Change {
            severity,
            detail,
            ..change
        });
    }
    changes
}

/// Checks one consumer's expectations against the producer's contracts.
pub fn check(producer: &ContractSet, consumer: &ExpectationSet) -> ConsumerReport {
    let contracts: Vec<ExpectationReport> = consumer
        .expectations
        .contracts
        .iter()
        .zip(&consumer.schemas)
        .map(|(entry, schema)| {
            let mut changes = Vec::new();
            match producer.get(&entry.event_type) {
                None => changes.push(Change {
                    severity: Severity::Breaking,
                    kind: ChangeKind::ContractRemoved,
                    path: "$".to_owned(),
                    detail: format!(
                        "the producer no longer exports `{}`, which this consumer decodes",
                        entry.event_type
                    ),
                }),
                Some(contract) => {
                    for (kind, what, theirs, ours) in [
                        (
                            ChangeKind::KeyFieldChanged,
                            "key field",
                            &contract.entry.key_field,
                            &entry.key_field,
                        ),
                        (
                            ChangeKind::AggregateTypeChanged,
                            "aggregate type",
                            &contract.entry.aggregate_type,
                            &entry.aggregate_type,
                        ),
                    ] {
                        if theirs != ours {
                            changes.push(Change {
                                severity: Severity::Breaking,
                                kind,
                                path: "$".to_owned(),
                                detail: format!(
                                    "the producer's {what} is `{theirs}`, the consumer's `{ours}`"
                                ),
                            });
                        }
                    }
                    changes.extend(reader_changes(&contract.schema, schema));
                }
            }
            ExpectationReport {
                event_type: entry.event_type.clone(),
                inbox_consumer: entry.inbox_consumer.clone(),
                handler: entry.handler.clone(),
                breaking: changes.iter().any(|c| c.severity == Severity::Breaking),
                changes,
            }
        })
        .collect();
    ConsumerReport {
        consumer: consumer.expectations.consumer.clone(),
        dir: consumer.dir.clone(),
        breaking: contracts.iter().any(|c| c.breaking),
        contracts,
    }
}

/// Loads every consumer under `dir`: `dir` itself when it holds an `expectations.json`, else
/// each of its sub-folders (one per consumer).
///
/// # Errors
/// An [`ExpectationsError`] naming the folder or file; two folders naming the same consumer
/// are [`ExpectationsError::Invalid`].
pub fn load_consumers(dir: &Path) -> Result<Vec<ExpectationSet>, ExpectationsError> {
    if dir.join(super::EXPECTATIONS_FILE).exists() {
        return Ok(vec![load(dir)?]);
    }
    let entries = fs::read_dir(dir).map_err(|source| ExpectationsError::Read {
        path: dir.to_owned(),
        source,
    })?;
    let mut folders = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|source| ExpectationsError::Read {
                path: dir.to_owned(),
                source,
            })?
            .path();
        if path.is_dir() {
            folders.push(path);
        }
    }
    folders.sort();
    if folders.is_empty() {
        return Err(ExpectationsError::MissingFile {
            dir: dir.to_owned(),
        });
    }
    let mut by_name: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut sets = Vec::new();
    for folder in folders {
        let set = load(&folder)?;
        if let Some(first) = by_name.insert(set.expectations.consumer.clone(), folder.clone()) {
            return Err(ExpectationsError::Invalid {
                path: folder.join(super::EXPECTATIONS_FILE),
                pointer: "/consumer".to_owned(),
                reason: format!(
                    "consumer `{}` is also described by `{}`: one folder per consumer",
                    set.expectations.consumer,
                    first.display()
                ),
            });
        }
        sets.push(set);
    }
    sets.sort_by(|a, b| a.expectations.consumer.cmp(&b.expectations.consumer));
    Ok(sets)
}

/// Checks every consumer against the producer's contracts.
pub fn check_all(producer: &ContractSet, consumers: &[ExpectationSet]) -> ConsumersReport {
    ConsumersReport {
        baseline: None,
        consumers: consumers.iter().map(|c| check(producer, c)).collect(),
    }
}

/// The producer's gate with its consumers: the baseline check's breaking changes weighed by
/// who reads them, and every consumer checked against the current contracts.
///
/// A breaking change that no consumer reads (a field removed that no consumer's type
/// declares, a contract no consumer decodes) becomes a note saying so; one that a consumer
/// reads stays breaking and names the consumers. Only the consumers whose folders are given
/// are known: a consumer that handed in nothing is not protected.
pub fn with_consumers(
    baseline: CompatReport,
    current: &ContractSet,
    consumers: &[ExpectationSet],
) -> ConsumersReport {
    let names: Vec<&str> = consumers
        .iter()
        .map(|c| c.expectations.consumer.as_str())
        .collect();
    let mut baseline = baseline;
    for contract in &mut baseline.contracts {
        let event_type = contract.event_type.clone();
        // One entry per consumer: each folder names a consumer once.
        let readers = |path: &str| -> Vec<String> {
            consumers
                .iter()
                .filter(|c| {
                    c.expectations.contracts.iter().any(|e| {
                        e.event_type == event_type
                            && e.reads
                                .iter()
                                .any(|r| covers(path, &r.path) || covers(&r.path, path))
                    }) || (path == "$"
                        && c.expectations
                            .contracts
                            .iter()
                            .any(|e| e.event_type == event_type))
                })
                .map(|c| c.expectations.consumer.clone())
                .collect()
        };
        for change in &mut contract.changes {
            if change.severity != Severity::Breaking {
                continue;
            }
            let readers = readers(&change.path);
            if readers.is_empty() {
                change.severity = Severity::Compatible;
                change.detail = format!(
                    "{}; no known consumer reads it (consumers checked: {})",
                    change.detail,
                    if names.is_empty() {
                        "none".to_owned()
                    } else {
                        names.join(", ")
                    }
                );
            } else {
                change.detail = format!("{}; read by {}", change.detail, readers.join(", "));
            }
        }
        crate::compat::sort_report_changes(&mut contract.changes);
        contract.status = match contract.status {
            ContractStatus::Breaking | ContractStatus::Removed
                if !contract
                    .changes
                    .iter()
                    .any(|c| c.severity == Severity::Breaking) =>
            {
                if contract.status == ContractStatus::Removed {
                    ContractStatus::Removed
                } else {
                    ContractStatus::Changed
                }
            }
            status => status,
        };
    }
    let mut report = check_all(current, consumers);
    report.baseline = Some(baseline);
    report
}

#[cfg(test)]
mod tests {
    use super::{covers, parent};

    #[test]
    fn paths_nest_at_segment_boundaries() {
        assert!(covers("$.books", "$.books[].quantity"));
        assert!(covers("$.books", "$.books"));
        assert!(!covers("$.book", "$.books"));
        assert!(covers("$", "$.a"));
        assert_eq!(parent("$.a.b"), "$.a");
        assert_eq!(parent("$.a[\"x-y\"]"), "$.a");
        assert_eq!(parent("$.a"), "$");
    }
}

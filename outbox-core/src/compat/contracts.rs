//! The comparison of two contract sets, contract by contract: added and removed contracts,
//! changed metadata (aggregate type, key field, Rust type), and the schema diff of each
//! contract present on both sides.

use std::collections::BTreeSet;

use super::baseline::{ContractSet, ContractSnapshot};
use super::diff::compare_schemas;
use super::report::{
    Change, ChangeKind, CompatReport, ContractReport, ContractStatus, ROOT, Severity, sort_changes,
};

/// Compares two contract sets: every event type of either side gets a [`ContractReport`].
pub fn compare(baseline: &ContractSet, current: &ContractSet) -> CompatReport {
    let event_types: BTreeSet<&String> = baseline
        .event_types()
        .chain(current.event_types())
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

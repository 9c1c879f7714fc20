//! The schema diff engine: two JSON Schema documents compared node by node, following
//! local `$ref`s on both sides.
//!
//! The walk (`walk`) resolves each pair of nodes (`resolve`) and descends into their
//! subschemas (properties, items, variants, `allOf`); at each node it compares what the node
//! accepts: its types (`types`), its fixed values (`values`), its restrictions
//! (`constraints`: format, pattern, bounds) and the remaining keywords (`keywords`:
//! annotations, keywords the checker does not interpret). Each change goes into the
//! `findings`; `path` names where it is.

mod constraints;
mod findings;
mod keywords;
mod path;
mod reads;
mod resolve;
mod types;
mod values;
mod walk;

use serde_json::Value;

pub(crate) use self::reads::field_reads;
use self::walk::Walk;
use super::report::{Change, ROOT, sort_changes};

/// Compares two JSON Schemas (each a whole document whose local `$ref`s resolve against
/// itself) and lists every change, most severe first, then by path.
pub fn compare_schemas(old: &Value, new: &Value) -> Vec<Change> {
    let mut walk = Walk::new(old, new);
    walk.node(old, new, ROOT.to_owned(), 0);
    let mut changes = walk.into_changes();
    sort_changes(&mut changes);
    changes
}

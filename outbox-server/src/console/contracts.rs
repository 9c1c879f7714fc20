//! The contracts page: every contract compiled into the process (the `inventory`
//! registry) and those of a folder written by `schemas export`, with version, aggregate,
//! key and JSON Schema.

use std::path::Path;

use axum::extract::{Path as UrlPath, State};
use maud::{Markup, html};
use outbox_core::ContractRegistry;
use outbox_core::schema::{ContractIndex, INDEX_FILE, IndexEntry};

use super::Console;
use super::auth::Operator;
use super::error::ConsoleError;
use super::page::{layout, pretty_json, short};

/// One contract the console shows.
#[derive(Debug, Clone)]
pub struct Contract {
    /// The versioned event type.
    pub event_type: String,
    /// Its version.
    pub version: u32,
    /// The aggregate type its key identifies.
    pub aggregate_type: String,
    /// The key field.
    pub key_field: String,
    /// The Rust type.
    pub rust_type: String,
    /// Its doc comment.
    pub description: String,
    /// Its JSON Schema, pretty-printed.
    pub schema: String,
    /// `compiled in` or the folder it was read from.
    pub source: String,
}

impl Contract {
    /// The contract of an index entry, with its schema text and where it was read.
    fn of(entry: IndexEntry, schema: String, source: String) -> Self {
        Self {
            event_type: entry.event_type,
            version: entry.version,
            aggregate_type: entry.aggregate_type,
            key_field: entry.key_field,
            rust_type: entry.rust_type,
            description: entry.description,
            schema,
            source,
        }
    }
}

/// The contracts: compiled in, then those of `folder` (a contract in both shows once, as
/// compiled in); and what went wrong reading the folder.
pub fn load(folder: Option<&Path>) -> (Vec<Contract>, Option<String>) {
    let mut contracts = Vec::new();
    let mut problem = None;
    match ContractRegistry::collect() {
        Ok(registry) => {
            for registration in registry.contracts() {
                let schema =
                    serde_json::to_string_pretty(&registration.json_schema()).unwrap_or_default();
                let entry = IndexEntry::of(registration);
                contracts.push(Contract::of(entry, schema, "compiled in".to_owned()));
            }
        }
        Err(error) => problem = Some(error.to_string()),
    }
    if let Some(folder) = folder {
        match read_folder(folder) {
            Ok(read) => {
                for contract in read {
                    if !contracts
                        .iter()
                        .any(|known| known.event_type == contract.event_type)
                    {
                        contracts.push(contract);
                    }
                }
            }
            Err(error) => {
                tracing::warn!(folder = %folder.display(), %error, "console: cannot read the contracts folder");
                problem = Some(format!("{}: {error}", folder.display()));
            }
        }
    }
    contracts.sort_by(|a, b| a.event_type.cmp(&b.event_type));
    (contracts, problem)
}

fn read_folder(folder: &Path) -> Result<Vec<Contract>, String> {
    let index = std::fs::read_to_string(folder.join(INDEX_FILE))
        .map_err(|error| format!("{INDEX_FILE}: {error}"))?;
    let index: ContractIndex =
        serde_json::from_str(&index).map_err(|error| format!("{INDEX_FILE}: {error}"))?;
    index
        .contracts
        .into_iter()
        .map(|entry| {
            let schema = std::fs::read_to_string(folder.join(&entry.schema))
                .map_err(|error| format!("{}: {error}", entry.schema))?;
            Ok(Contract::of(
                entry,
                pretty_json(&schema),
                folder.display().to_string(),
            ))
        })
        .collect()
}

/// `GET /contracts`.
pub async fn list(State(console): State<Console>, operator: Operator) -> Markup {
    let base = &operator.base;
    let body = html! {
        @if let Some(problem) = console.contracts_problem() {
            p.error role="alert" { "Some contracts could not be read: " (problem) }
        }
        @if console.contracts().is_empty() {
            p { "No contracts: none is compiled into this process, and no folder written by "
                code { "schemas export" } " is configured (" code { "[console] contracts" } ")." }
        } @else {
            table #contracts {
                thead { tr { th { "Event type" } th { "Version" } th { "Aggregate" } th { "Key" } th { "Description" } th { "Source" } } }
                tbody {
                    @for contract in console.contracts() {
                        tr {
                            td { a href=(base.at(&format!("/contracts/{}", contract.event_type))) { (contract.event_type) } }
                            td { (contract.version) }
                            td { (contract.aggregate_type) }
                            td { code { (contract.key_field) } }
                            td { (short(&contract.description, 120)) }
                            td { (contract.source) }
                        }
                    }
                }
            }
        }
    };
    layout(base, &operator.session, "Contracts", body)
}

/// `GET /contracts/{event_type}`.
pub async fn show(
    State(console): State<Console>,
    operator: Operator,
    UrlPath(event_type): UrlPath<String>,
) -> Result<Markup, ConsoleError> {
    let contract = console
        .contracts()
        .iter()
        .find(|contract| contract.event_type == event_type)
        .ok_or_else(|| ConsoleError::NotFound {
            what: format!("contract `{event_type}`"),
        })?;
    let body = html! {
        dl {
            dt { "Version" } dd { (contract.version) }
            dt { "Aggregate type" } dd { (contract.aggregate_type) }
            dt { "Key field" } dd { code { (contract.key_field) } }
            dt { "Rust type" } dd { code { (contract.rust_type) } }
            dt { "Source" } dd { (contract.source) }
        }
        @if !contract.description.is_empty() { p { (contract.description) } }
        h2 { "JSON Schema" }
        pre.json #schema { (contract.schema) }
    };
    Ok(layout(
        &operator.base,
        &operator.session,
        &contract.event_type,
        body,
    ))
}

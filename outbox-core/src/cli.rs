//! The embeddable `schemas` command line (feature `cli`).
//!
//! A binary that links the contracts crates gets the whole command line in one line:
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     // outbox_kernel::link_contracts!(bookstore_contracts);
//!     outbox_kernel::cli::run()
//! }
//! ```
//!
//! ```text
//! my-contracts schemas list [--format human|json]
//! my-contracts schemas export --out DIR [--title T] [--api-version V] [--description D]
//! my-contracts schemas check [--baseline DIR] [--consumers DIR] [--producer DIR]
//!                            [--format human|json] [--deny-warnings]
//! my-consumer  schemas expect --name NAME --out DIR
//! ```
//!
//! `schemas export` writes a complete set (see [`schema::export`]) and
//! removes the `schemas/*.json` files it did not produce, so that a committed folder mirrors
//! the code. `schemas check` compares the current contracts with such a folder (see
//! [`compat`]).
//!
//! Exit codes: [`EXIT_OK`] (0) success, [`EXIT_CHECK_FAILED`] (1) breaking changes found (or
//! warnings with `--deny-warnings`), or a consumer broken, [`EXIT_ERROR`] (2) usage,
//! registry, expectations or I/O error.
//!
//! A bigger command line (e.g. one that also manages the outbox tables) embeds
//! [`SchemasCommand`] as one of its clap subcommands and calls
//! [`SchemasCommand::execute`]:
//!
//! ```
//! use clap::{Parser, Subcommand};
//! use outbox_kernel::cli::SchemasCommand;
//!
//! #[derive(Parser)]
//! struct Ops {
//!     #[command(subcommand)]
//!     command: OpsCommand,
//! }
//!
//! #[derive(Subcommand)]
//! enum OpsCommand {
//!     /// Contract schemas.
//!     Schemas(SchemasCommand),
//!     // Outbox { … }, DeadLetters { … }, …
//! }
//!
//! let ops = Ops::try_parse_from(["ops", "schemas", "list", "--format", "json"])?;
//! let OpsCommand::Schemas(schemas) = ops.command;
//! let registry = outbox_kernel::ContractRegistry::from_registrations([])?;
//! let mut out = Vec::new();
//! let outcome = schemas.execute(&registry, &mut out)?;
//! assert_eq!(outcome.code(), 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::ffi::OsString;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::compat::{self, CompatError, ContractSet};
use crate::consumed::ConsumedContracts;
use crate::expectations::{self, ExpectationsError};
use crate::registry::{ContractRegistry, RegistryError};
use crate::schema::{self, ExportOptions, SchemaError};

/// Exit code of a successful command.
pub const EXIT_OK: u8 = 0;
/// Exit code of `schemas check` when it finds breaking changes.
pub const EXIT_CHECK_FAILED: u8 = 1;
/// Exit code of a usage, registry or I/O error.
pub const EXIT_ERROR: u8 = 2;

/// `schemas`: list, export and check the registered contract schemas.
#[derive(Debug, Clone, Args)]
pub struct SchemasCommand {
    /// What to do.
    #[command(subcommand)]
    pub action: SchemasAction,
}

/// The subcommands of [`SchemasCommand`].
#[derive(Debug, Clone, Subcommand)]
#[non_exhaustive]
pub enum SchemasAction {
    /// List the registered contracts.
    List(ListArgs),
    /// Export JSON Schemas, an AsyncAPI document and an index into a folder (a complete set:
    /// stale `schemas/*.json` files are removed).
    Export(ExportArgs),
    /// Compare the registered contracts with a baseline folder written by `export`, and/or
    /// check consumers' expectations against them; exit 1 on breaking changes.
    Check(CheckArgs),
    /// Write what this binary's inbox handlers read (consumer-driven contracts) into a
    /// folder to hand to the producer.
    Expect(ExpectArgs),
}

/// Arguments of `schemas expect`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct ExpectArgs {
    /// The consumer's name in the producer's reports (a service or team, e.g.
    /// `bookstore-inventory`).
    #[arg(long)]
    pub name: String,
    /// Folder to write (created if missing; its `schemas/` is rewritten).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// Arguments of `schemas list`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct ListArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
}

/// Arguments of `schemas export`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
pub struct ExportArgs {
    /// Folder to write (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// AsyncAPI `info.title` (default: "Integration events").
    #[arg(long)]
    pub title: Option<String>,
    /// AsyncAPI `info.version` (default: 1.0.0).
    #[arg(long, value_name = "VERSION")]
    pub api_version: Option<String>,
    /// AsyncAPI `info.description`.
    #[arg(long)]
    pub description: Option<String>,
}

impl ExportArgs {
    /// The export options these arguments describe (stale schema files are always pruned).
    pub fn options(&self) -> ExportOptions {
        let mut options = ExportOptions::default().with_prune_stale_schemas(true);
        if let Some(title) = &self.title {
            options = options.with_title(title.clone());
        }
        if let Some(version) = &self.api_version {
            options = options.with_version(version.clone());
        }
        if let Some(description) = &self.description {
            options = options.with_description(description.clone());
        }
        options
    }
}

/// Arguments of `schemas check`: at least one of `--baseline`, `--consumers`, `--producer`.
#[derive(Debug, Clone, Args)]
#[non_exhaustive]
#[command(group(clap::ArgGroup::new("against").required(true).multiple(true)
    .args(["baseline", "consumers", "producer"])))]
pub struct CheckArgs {
    /// Baseline folder written by `schemas export`.
    #[arg(long, value_name = "DIR")]
    pub baseline: Option<PathBuf>,
    /// The consumers' expectations (written by their `schemas expect`): a folder of
    /// folders, one per consumer, or one consumer's folder.
    #[arg(long, value_name = "DIR")]
    pub consumers: Option<PathBuf>,
    /// The consumer's side: check this binary's inbox handlers against the producer's
    /// export folder.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["baseline", "consumers"])]
    pub producer: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
    /// Fail (exit 1) on warnings too, e.g. an added enum value.
    #[arg(long)]
    pub deny_warnings: bool,
}

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
#[non_exhaustive]
pub enum OutputFormat {
    /// Text for people.
    #[default]
    Human,
    /// Pretty-printed JSON for tools.
    Json,
}

/// How a command ended when it did not fail with a [`CliError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Done; nothing to object to.
    Success,
    /// `schemas check` found breaking changes (or warnings with `--deny-warnings`).
    CheckFailed,
}

impl Outcome {
    /// The process exit code: [`EXIT_OK`] or [`EXIT_CHECK_FAILED`].
    pub fn code(self) -> u8 {
        match self {
            Self::Success => EXIT_OK,
            Self::CheckFailed => EXIT_CHECK_FAILED,
        }
    }

    /// The process exit code as an [`ExitCode`].
    pub fn exit_code(self) -> ExitCode {
        ExitCode::from(self.code())
    }
}

/// Why a command failed (exit code [`EXIT_ERROR`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// The contracts could not be collected (e.g. two types claim one event type).
    #[error("cannot collect the contracts: {0}")]
    Registry(#[from] RegistryError),
    /// Rendering or writing the export failed.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// The baseline could not be loaded.
    #[error(transparent)]
    Compat(#[from] CompatError),
    /// Expectations could not be written or loaded.
    #[error(transparent)]
    Expectations(#[from] ExpectationsError),
    /// No contract is linked into the binary: exporting would empty the schema folder and
    /// checking would report every contract as removed.
    #[error(
        "no contracts are registered in this binary: call \
         `outbox_kernel::link_contracts!(your_contracts_crate)` at the start of `main`, and \
         `outbox_kernel::contracts_crate!()` once at the root of each contracts crate"
    )]
    NoContracts,
    /// The arguments do not say what to do.
    #[error("{0}")]
    Usage(String),
    /// Writing the command's output failed.
    #[error("cannot write the output: {0}")]
    Output(#[source] io::Error),
}

impl CliError {
    /// The process exit code: always [`EXIT_ERROR`].
    pub fn code(&self) -> u8 {
        EXIT_ERROR
    }
}

fn output(error: io::Error) -> CliError {
    CliError::Output(error)
}

fn to_json<T: serde::Serialize>(value: &T, what: &str) -> Result<String, CliError> {
    let mut text = serde_json::to_string_pretty(value).map_err(|source| {
        CliError::Schema(SchemaError::Serialize {
            what: what.to_owned(),
            source,
        })
    })?;
    text.push('\n');
    Ok(text)
}

impl SchemasCommand {
    /// Runs the command against `registry`, writing its result to `out`.
    ///
    /// # Errors
    /// A [`CliError`] for export, baseline or output failures (exit code [`EXIT_ERROR`]).
    pub fn execute(
        &self,
        registry: &ContractRegistry,
        out: &mut dyn Write,
    ) -> Result<Outcome, CliError> {
        self.execute_with(registry, &ConsumedContracts::collect(), out)
    }

    /// Like [`execute`](Self::execute) with the inbox handlers' registrations given (for
    /// `expect` and `check --producer`) instead of collected from the binary.
    ///
    /// # Errors
    /// A [`CliError`] for export, baseline, expectations or output failures.
    pub fn execute_with(
        &self,
        registry: &ContractRegistry,
        consumed: &ConsumedContracts,
        out: &mut dyn Write,
    ) -> Result<Outcome, CliError> {
        let needs_contracts = match &self.action {
            SchemasAction::List(_) | SchemasAction::Expect(_) => false,
            SchemasAction::Check(args) => args.producer.is_none(),
            SchemasAction::Export(_) => true,
        };
        if needs_contracts && registry.is_empty() {
            return Err(CliError::NoContracts);
        }
        match &self.action {
            SchemasAction::List(args) => list(registry, args, out),
            SchemasAction::Export(args) => export(registry, args, out),
            SchemasAction::Check(args) => check(registry, consumed, args, out),
            SchemasAction::Expect(args) => expect(consumed, args, out),
        }
    }
}

fn list(
    registry: &ContractRegistry,
    args: &ListArgs,
    out: &mut dyn Write,
) -> Result<Outcome, CliError> {
    let index = schema::contract_index(registry);
    if args.format == OutputFormat::Json {
        out.write_all(to_json(&index, "the contract list")?.as_bytes())
            .map_err(output)?;
        return Ok(Outcome::Success);
    }
    let header = ["EVENT TYPE", "VERSION", "AGGREGATE", "KEY", "RUST TYPE"];
    let rows: Vec<[String; 5]> = index
        .contracts
        .iter()
        .map(|c| {
            [
                c.event_type.clone(),
                c.version.to_string(),
                c.aggregate_type.clone(),
                c.key_field.clone(),
                c.rust_type.clone(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut line = |cells: [&str; 5]| -> io::Result<()> {
        let mut text = String::new();
        for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                text.push_str(cell);
            } else {
                text.push_str(&format!("{cell:<width$}  "));
            }
        }
        writeln!(out, "{}", text.trim_end())
    };
    line(header).map_err(output)?;
    for row in &rows {
        line(row.each_ref().map(String::as_str)).map_err(output)?;
    }
    writeln!(out, "{} contract(s)", rows.len()).map_err(output)?;
    if rows.is_empty() {
        writeln!(out, "{}", CliError::NoContracts).map_err(output)?;
    }
    Ok(Outcome::Success)
}

fn export(
    registry: &ContractRegistry,
    args: &ExportArgs,
    out: &mut dyn Write,
) -> Result<Outcome, CliError> {
    let report = schema::export(registry, &args.out, &args.options())?;
    writeln!(
        out,
        "exported {} contract(s) to {}: {} file(s) written, {} unchanged, {} stale removed",
        registry.len(),
        args.out.display(),
        report.written.len(),
        report.unchanged.len(),
        report.removed.len()
    )
    .map_err(output)?;
    for path in &report.written {
        writeln!(out, "  written  {}", path.display()).map_err(output)?;
    }
    for path in &report.removed {
        writeln!(out, "  removed  {}", path.display()).map_err(output)?;
    }
    Ok(Outcome::Success)
}

fn expect(
    consumed: &ConsumedContracts,
    args: &ExpectArgs,
    out: &mut dyn Write,
) -> Result<Outcome, CliError> {
    let (expectations, schemas) = expectations::collect(&args.name, consumed)?;
    let written = expectations::write(&args.out, &expectations, &schemas)?;
    writeln!(
        out,
        "wrote the expectations of `{}` to {}: {} contract read(s), {} file(s)",
        args.name,
        args.out.display(),
        expectations.contracts.len(),
        written.len()
    )
    .map_err(output)?;
    for entry in &expectations.contracts {
        let required = entry.reads.iter().filter(|r| r.required).count();
        writeln!(
            out,
            "  {} by {}: {} field(s), {} required",
            entry.event_type,
            entry.inbox_consumer,
            entry.reads.len(),
            required
        )
        .map_err(output)?;
    }
    Ok(Outcome::Success)
}

fn check(
    registry: &ContractRegistry,
    consumed: &ConsumedContracts,
    args: &CheckArgs,
    out: &mut dyn Write,
) -> Result<Outcome, CliError> {
    if let Some(producer) = &args.producer {
        let producer = ContractSet::load(producer)?;
        let (own, schemas) = expectations::collect("this-consumer", consumed)?;
        let set = expectations::ExpectationSet {
            dir: PathBuf::from("."),
            expectations: own,
            schemas,
        };
        let report = expectations::check_all(&producer, std::slice::from_ref(&set));
        return print_consumers(&report, args, out);
    }
    if let Some(consumers) = &args.consumers {
        let sets = expectations::load_consumers(consumers)?;
        let current = ContractSet::from_registry(registry).map_err(CompatError::from)?;
        let report = match &args.baseline {
            Some(baseline) => {
                let baseline_report = compat::check(registry, baseline)?;
                expectations::with_consumers(baseline_report, &current, &sets)
            }
            None => expectations::check_all(&current, &sets),
        };
        return print_consumers(&report, args, out);
    }
    let Some(baseline) = &args.baseline else {
        return Err(CliError::Usage(
            "`schemas check` needs --baseline, --consumers or --producer".to_owned(),
        ));
    };
    let report = compat::check(registry, baseline)?;
    match args.format {
        OutputFormat::Json => out.write_all(report.to_json().as_bytes()),
        OutputFormat::Human => writeln!(
            out,
            "checking {} contract(s) against the baseline {}",
            registry.len(),
            baseline.display()
        )
        .and_then(|()| write!(out, "{report}")),
    }
    .map_err(output)?;
    Ok(verdict(report.is_breaking(), report.has_warnings(), args))
}

/// A check's outcome: failed on a breaking change, or on a warning with `--deny-warnings`.
fn verdict(breaking: bool, warnings: bool, args: &CheckArgs) -> Outcome {
    if breaking || (args.deny_warnings && warnings) {
        Outcome::CheckFailed
    } else {
        Outcome::Success
    }
}

fn print_consumers(
    report: &expectations::ConsumersReport,
    args: &CheckArgs,
    out: &mut dyn Write,
) -> Result<Outcome, CliError> {
    match args.format {
        OutputFormat::Json => out.write_all(report.to_json().as_bytes()),
        OutputFormat::Human => write!(out, "{report}"),
    }
    .map_err(output)?;
    Ok(verdict(report.is_breaking(), report.has_warnings(), args))
}

/// The stand-alone command line: `<binary> schemas …`.
#[derive(Debug, Parser)]
#[command(
    name = "outbox",
    about = "Integration-event contracts: list, export and check their schemas"
)]
struct StandAlone {
    #[command(subcommand)]
    command: StandAloneCommand,
}

#[derive(Debug, Subcommand)]
enum StandAloneCommand {
    /// List, export and check the contract schemas.
    Schemas(SchemasCommand),
}

/// Runs the command line with the process's arguments and every contract linked into the
/// binary, printing to stdout / stderr. Returns the exit code to hand back from `main`.
pub fn run() -> ExitCode {
    run_from(std::env::args_os())
}

/// Like [`run`] with explicit arguments (the first one is the program name).
pub fn run_from<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let stdout = io::stdout();
    let stderr = io::stderr();
    let code = run_with(
        args,
        ContractRegistry::collect,
        &mut stdout.lock(),
        &mut stderr.lock(),
    );
    ExitCode::from(code)
}

/// Parses a command line the way every embeddable CLI of this framework does: `--help` and
/// `--version` print to `out` and yield [`EXIT_OK`]; a usage error prints to `err` and yields
/// [`EXIT_ERROR`].
///
/// # Errors
/// The exit code to return when the arguments did not yield a command to run.
pub fn parse_args<P, I, T>(args: I, out: &mut dyn Write, err: &mut dyn Write) -> Result<P, u8>
where
    P: clap::Parser,
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    P::try_parse_from(args).map_err(|e| {
        let informational = matches!(
            e.kind(),
            clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
        );
        let rendered = e.render();
        // A failure to print the usage leaves nothing better to do.
        if informational {
            let _ = write!(out, "{rendered}");
            EXIT_OK
        } else {
            let _ = write!(err, "{rendered}");
            EXIT_ERROR
        }
    })
}

/// The whole command line with everything injected: the arguments (program name first), the
/// source of the registry (called only once the arguments parsed, so `--help` works even
/// with a broken registry), the output and the error output. Returns the numeric exit code.
pub fn run_with<I, T>(
    args: I,
    registry: impl FnOnce() -> Result<ContractRegistry, RegistryError>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match parse_args::<StandAlone, _, _>(args, out, err) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let StandAloneCommand::Schemas(command) = cli.command;
    let result = registry()
        .map_err(CliError::from)
        .and_then(|registry| command.execute(&registry, out));
    match result {
        Ok(outcome) => outcome.code(),
        Err(e) => {
            // Nothing better to do when the error output itself fails.
            let _ = writeln!(err, "error: {e}");
            e.code()
        }
    }
}

//! `outbox-schemas generate`: a consumer's Rust types from a producer's exported folder.
//!
//! ```text
//! outbox-schemas generate --from DIR --out FILE [--kernel-path PATH] [--only EVENT_TYPE]...
//!                         [--derive DERIVE]... [--check]
//! ```
//!
//! Exit codes: 0 written (or, with `--check`, up to date), 1 `--check` found the file out of
//! date, 2 usage, schema or I/O error (the message names the file and the JSON pointer).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use outbox_codegen::{CodegenConfig, build_script, generate};

#[derive(Parser)]
#[command(
    name = "outbox-schemas",
    version,
    about = "Rust types for a consumer team, generated from a producer's exported contract schemas"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate the types of an export folder into one formatted Rust file.
    Generate {
        /// The folder the producer wrote with `schemas export`.
        #[arg(long, value_name = "DIR")]
        from: PathBuf,
        /// The Rust file to write (created with its folders).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// How the consumer's crate names outbox-kernel (`outbox_core`, `outbox::core`, …).
        #[arg(long, value_name = "PATH", default_value = "outbox_kernel")]
        kernel_path: String,
        /// Generate only this event type (repeatable); default every contract.
        #[arg(long, value_name = "EVENT_TYPE")]
        only: Vec<String>,
        /// Add a derive to every generated type (repeatable), e.g. `PartialEq`.
        #[arg(long, value_name = "DERIVE")]
        derive: Vec<String>,
        /// Write nothing; exit 1 when FILE is not what the folder generates (for CI).
        #[arg(long)]
        check: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let Command::Generate {
        from,
        out,
        kernel_path,
        only,
        derive,
        check,
    } = cli.command;
    let mut config = CodegenConfig::builder().kernel_path(kernel_path).only(only);
    for derive in derive {
        config = config.derive(derive);
    }
    let code = match generate(&from, &config.build()) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(2);
        }
    };
    if check {
        return if std::fs::read_to_string(&out).is_ok_and(|current| current == code.source) {
            ExitCode::SUCCESS
        } else {
            eprintln!(
                "`{}` is not what `{}` generates: run `outbox-schemas generate --from {} --out {}`",
                out.display(),
                from.display(),
                from.display(),
                out.display()
            );
            ExitCode::from(1)
        };
    }
    match build_script::write_if_changed(&out, &code.source) {
        Ok(written) => {
            let state = if written { "written" } else { "unchanged" };
            #[allow(clippy::print_stdout)]
            {
                println!(
                    "{state}: {} ({} contract(s) from {})",
                    out.display(),
                    code.contracts.len(),
                    from.display()
                );
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(2)
        }
    }
}

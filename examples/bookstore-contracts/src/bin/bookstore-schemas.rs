//! The Bookstore's schema tool: `schemas list`, `schemas export --out DIR`,
//! `schemas check --baseline DIR`.

fn main() -> std::process::ExitCode {
    outbox_core::link_contracts!(bookstore_contracts);
    outbox_core::cli::run()
}

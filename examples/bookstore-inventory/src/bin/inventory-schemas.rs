//! Inventory's `schemas` command line: `schemas expect --name bookstore-inventory --out
//! expectations` writes what its handlers read; `schemas check --producer DIR` checks them
//! against Ordering's latest export.

fn main() -> std::process::ExitCode {
    bookstore_inventory::link();
    outbox_core::cli::run()
}

//! `roundtrip-schemas schemas export --out schemas`: the producer's export of this crate.

fn main() -> std::process::ExitCode {
    outbox_codegen_roundtrip::producer::__outbox_contracts_anchor();
    outbox_core::cli::run()
}

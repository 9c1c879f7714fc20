//! The `outbox` binary: the relay service (see the crate documentation and
//! [`outbox_server::cli`]).

fn main() -> std::process::ExitCode {
    outbox_server::cli::run()
}

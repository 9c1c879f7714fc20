//! The operations command line (`outbox_seaorm::cli`), run in process on a test's database
//! and outbox, as `ops ARGS…` with no contracts registered.

use outbox_seaorm::Outbox;

use crate::db::TestDb;

/// Runs `ops ARGS…` on `db` and `outbox`: the exit code, stdout and stderr.
pub async fn run(db: &TestDb, outbox: &Outbox, args: &[&str]) -> (u8, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = outbox_seaorm::cli::run_with(
        std::iter::once("ops").chain(args.iter().copied()),
        db.conn().clone(),
        outbox.clone(),
        || outbox_core::ContractRegistry::from_registrations([]),
        &mut out,
        &mut err,
    )
    .await;
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

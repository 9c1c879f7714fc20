//! Compile-time behaviour of `#[inbox_handler]`: every diagnostic of the attribute
//! (`tests/inbox_ui/fail`, with the expected compiler output in the `.stderr` next to each
//! file; each case also uses the function, to show that a mistake does not cascade into
//! "cannot find function" errors) and the accepted forms (`tests/inbox_ui/pass`, each running
//! `main`).
//!
//! After an intended change of a diagnostic, regenerate the `.stderr` files with
//! `TRYBUILD=overwrite cargo test -p outbox-seaorm --test inbox_ui` and review them.

#[test]
fn inbox_ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/inbox_ui/fail/*.rs");
    cases.pass("tests/inbox_ui/pass/*.rs");
}

//! No public API writes an outbox row outside a unit of work's commit: the obvious bypasses
//! do not compile (`tests/no_bypass/fail`, the expected compiler output in the `.stderr` next
//! to each file), while the same code that only reads does (`tests/no_bypass/pass`), so a
//! failure cannot come from a typo in the surrounding code.
//!
//! After an intended change, regenerate the `.stderr` files with
//! `TRYBUILD=overwrite cargo test -p outbox-seaorm --test no_bypass` and review them.

#[test]
fn no_bypass() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/no_bypass/fail/*.rs");
    cases.pass("tests/no_bypass/pass/*.rs");
}

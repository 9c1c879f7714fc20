//! Compile-time behaviour of `#[derive(IntegrationEvent)]` and `#[derive(DomainEvent)]`
//! (the `domain_event_*` cases): every diagnostic of the derives (`tests/ui/fail`, with the
//! expected compiler output in the `.stderr` next to each file) and the accepted forms
//! (`tests/ui/pass`, each running `main`).
//!
//! After an intended change of a diagnostic, regenerate the `.stderr` files with
//! `TRYBUILD=overwrite cargo test -p outbox-core --test ui` and review them.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/fail/*.rs");
    cases.pass("tests/ui/pass/*.rs");
}

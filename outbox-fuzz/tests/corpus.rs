//! Replays the committed corpus: every file under `corpus/<target>/` through its target
//! (see `outbox_fuzz::TARGETS`). An input that once crashed a target is kept there, so
//! the crash stays fixed; a target without inputs, or a folder without a target, fails.

use std::path::Path;

#[test]
fn every_committed_input_keeps_its_targets_invariants() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut folders: Vec<String> = std::fs::read_dir(&corpus)
        .expect("outbox-fuzz/corpus exists")
        .map(|entry| {
            entry
                .expect("a corpus folder")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    folders.sort();
    let mut targets: Vec<&str> = outbox_fuzz::TARGETS.iter().map(|(name, _)| *name).collect();
    targets.sort_unstable();
    assert_eq!(folders, targets, "one corpus folder per target");

    for (name, run) in outbox_fuzz::TARGETS {
        let mut inputs: Vec<_> = std::fs::read_dir(corpus.join(name))
            .expect("the target's corpus folder")
            .map(|entry| entry.expect("a corpus file").path())
            .collect();
        inputs.sort();
        assert!(
            inputs.len() >= 5,
            "{name}: {} inputs, at least 5 expected",
            inputs.len()
        );
        for input in &inputs {
            let data = std::fs::read(input).expect("a corpus file");
            if let Err(panic) = std::panic::catch_unwind(|| run(&data)) {
                let message = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)");
                panic!("{name}: {} breaks an invariant: {message}", input.display());
            }
        }
    }
}

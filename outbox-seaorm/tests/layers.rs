//! The layering rule of `outbox-seaorm`: each top-level module of `src/` imports only
//! modules on a floor below its own (CONTRIBUTING.md, "The workspace"). This test reads
//! every `crate::…` path of the sources (outside comments) and fails on an import that runs
//! up or sideways, and on a module that has no floor yet — place it in [`FLOORS`].
//!
//! `cargo test -p outbox-seaorm --test layers`

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The floors, from the top down; a module may import the modules of the floors below its
/// own, never those of its own floor or above.
const FLOORS: &[&[&str]] = &[
    // the faces a user or a test reaches first
    &["cli", "testing", "__private"],
    // operator actions over both relays and the inbox
    &["ops"],
    // the engines, and the migrations of their tables
    &["relay", "inbox", "migration"],
    // what the engines share: the write side, the tables, retention, outage, status
    &[
        "unit_of_work",
        "schema",
        "retention",
        "schedule",
        "periodic",
        "outage",
        "status_report",
    ],
    // every SQL statement; jobs (a configuration of rows)
    &["sql", "job"],
    // the Outbox and its builder
    &["config"],
    // plain rows read back, table names, lease naming
    &["record", "table", "lease"],
    // plain facts
    &[
        "status",
        "limits",
        "backend",
        "partition",
        "trace",
        "wakeup",
        "error",
        "transaction",
        "gtid",
    ],
    // the connections a server's relays share
    &["budget"],
];

/// The floor of `module` (0 is the top), if it has one.
fn floor(module: &str) -> Option<usize> {
    FLOORS.iter().position(|floor| floor.contains(&module))
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, files);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
}

/// The source without its comments (line and block), string contents kept: a doc link to
/// another module is not an import.
fn without_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\\' {
                out.extend(chars.next());
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match (c, chars.peek()) {
            ('/', Some('/')) => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut previous = ' ';
                for c in chars.by_ref() {
                    if previous == '*' && c == '/' {
                        break;
                    }
                    previous = c;
                }
            }
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// The top-level modules a source names through `crate::`: `crate::a::b`, and each
/// first-level name of `crate::{a::{b, c}, d}`.
fn imported_modules(source: &str) -> Vec<String> {
    let mut modules = Vec::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in source.match_indices("crate::") {
        // `outbox_crate::` or `$crate::` is not this crate.
        let before = source[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let rest = &source[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut expecting = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => expecting = true,
                    c if expecting && depth == 1 && (c.is_ascii_alphabetic() || c == '_') => {
                        modules.push(ident(&group[i..]));
                        expecting = false;
                    }
                    _ => {}
                }
            }
        } else {
            modules.push(ident(rest));
        }
    }
    modules
}

#[test]
fn each_module_imports_only_the_floors_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut problems = Vec::new();
    let mut imports: BTreeMap<String, usize> = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(&src).expect("under src/");
        let first = relative
            .components()
            .next()
            .expect("a path")
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_owned();
        if module == "lib" {
            continue; // the crate root declares and re-exports every module
        }
        let Some(own) = floor(&module) else {
            problems.push(format!(
                "src/{}: module `{module}` has no floor: place it in FLOORS (outbox-seaorm/tests/layers.rs) and in CONTRIBUTING.md's map",
                relative.display()
            ));
            continue;
        };
        let source = fs::read_to_string(file).expect("a readable source");
        for imported in imported_modules(&without_comments(&source)) {
            if imported == module || imported.is_empty() {
                continue;
            }
            *imports
                .entry(format!("{module} -> {imported}"))
                .or_default() += 1;
            match floor(&imported) {
                Some(theirs) if theirs > own => {}
                Some(theirs) => problems.push(format!(
                    "src/{}: `{module}` (floor {own}) imports `crate::{imported}` (floor {theirs}): an import runs {}",
                    relative.display(),
                    if theirs == own { "sideways" } else { "up" }
                )),
                None => problems.push(format!(
                    "src/{}: `crate::{imported}` is not a module with a floor",
                    relative.display()
                )),
            }
        }
    }
    assert!(
        problems.is_empty(),
        "the layering rule is broken:\n{}",
        problems.join("\n")
    );
    // The scan sees the imports it should: a reader that found none would pass anything.
    for known in ["relay -> sql", "inbox -> unit_of_work", "sql -> table"] {
        assert!(
            imports.contains_key(known),
            "no `{known}` seen: {imports:?}"
        );
    }
}

#[test]
fn the_scan_reads_groups_and_skips_comments() {
    let source = "use crate::{a::{b, c}, d};\n// crate::e\n/* crate::f */\nlet _ = crate::g::h;\nlet s = \"// not a comment\"; $crate::i; outbox_crate::j;";
    assert_eq!(imported_modules(&without_comments(source)), ["a", "d", "g"]);
}

//! The documentation's shape (issue 33): README.md is a front door of at most 300 lines whose
//! quick start is `examples/quick-start` verbatim; every relative link of README.md,
//! CONTRIBUTING.md and the book points at a file that exists, and at a heading of it that
//! exists; every chapter is in the book's summary. (The Rust blocks themselves run as doc
//! tests of this package: `tests/src/lib.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

#[test]
fn readme_is_a_front_door_of_at_most_300_lines() {
    let readme = read(&root().join("README.md"));
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines");
    for heading in ["## Install", "## Quick start", "## Known limits"] {
        assert!(
            readme.lines().any(|line| line == heading),
            "README.md has {heading}"
        );
    }
}

#[test]
fn readme_quick_start_is_the_example_verbatim() {
    let readme = read(&root().join("README.md"));
    let start = "<!-- quick-start: examples/quick-start/src/main.rs -->\n```rust\n";
    let begin = readme.find(start).expect("the quick start's markers") + start.len();
    let end = begin
        + readme[begin..]
            .find("```\n<!-- /quick-start -->")
            .expect("its end");
    let example = read(&root().join("examples/quick-start/src/main.rs"));
    assert_eq!(
        &readme[begin..end],
        example,
        "README's quick start and examples/quick-start/src/main.rs differ"
    );
}

/// The anchor mdBook and GitHub give a heading: lowercase, spaces to `-`, punctuation
/// other than `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut found = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced && line.starts_with('#') {
            let title = line.trim_start_matches('#');
            if title.starts_with(' ') {
                found.insert(anchor(title));
            }
        }
    }
    found
}

/// The relative link targets (`path#anchor`, `#anchor`) of a Markdown file, outside code
/// blocks and inline code.
fn links(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut found = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Drop inline code spans.
        let prose: String = line
            .split('`')
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, part)| part)
            .collect();
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(close) = rest.find(')') else {
                break;
            };
            let target = &rest[..close];
            if !target.contains("://") && !target.starts_with("mailto:") {
                found.push(target.to_owned());
            }
            rest = &rest[close..];
        }
    }
    found
}

fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md"), root().join("CONTRIBUTING.md")];
    let book = root().join("docs/book/src");
    let mut chapters: Vec<PathBuf> = std::fs::read_dir(&book)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    chapters.sort();
    files.extend(chapters);
    files
}

#[test]
fn book_links_point_at_files_and_headings_that_exist() {
    let mut broken = Vec::new();
    for file in markdown_files() {
        let text = read(&file);
        for link in links(&text) {
            let (path, fragment) = link.split_once('#').unwrap_or((link.as_str(), ""));
            let target = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !target.exists() {
                broken.push(format!("{}: {link} (no such file)", file.display()));
                continue;
            }
            let is_markdown = target.extension().is_some_and(|ext| ext == "md");
            if !fragment.is_empty() && is_markdown && !anchors(&read(&target)).contains(fragment) {
                broken.push(format!("{}: {link} (no such heading)", file.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_chapter_is_in_the_summary() {
    let book = root().join("docs/book/src");
    let summary = read(&book.join("SUMMARY.md"));
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    for file in markdown_files() {
        if file.parent() != Some(book.as_path()) || file.ends_with("SUMMARY.md") {
            continue;
        }
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        assert!(listed.contains(&name), "{name} is not in SUMMARY.md");
    }
}

#[test]
fn anchors_follow_the_renderers() {
    assert_eq!(
        anchor(" The relay service and console"),
        "the-relay-service-and-console"
    );
    assert_eq!(anchor(" Publishing: the relay"), "publishing-the-relay");
    assert_eq!(anchor(" `outbox_core` and you"), "outbox_core-and-you");
}

/// The book's chapters by title (their first heading), with their headings' anchors.
fn chapters() -> Vec<(String, BTreeSet<String>)> {
    markdown_files()
        .into_iter()
        .filter(|file| file.parent() == Some(root().join("docs/book/src").as_path()))
        .map(|file| {
            let text = read(&file);
            let title = text
                .lines()
                .next()
                .and_then(|line| line.strip_prefix("# "))
                .unwrap_or_default()
                .to_owned();
            (title, anchors(&text))
        })
        .collect()
}

/// The files whose text may point readers at the documentation: sources, manifests,
/// scripts, operations files.
fn pointing_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !matches!(
                name.as_str(),
                "target" | ".git" | "docs" | "fuzz" | "corpus"
            ) {
                pointing_files(&path, found);
            }
        } else if ["rs", "toml", "yml", "sh"]
            .iter()
            .any(|ext| name.ends_with(&format!(".{ext}")))
        {
            found.push(path);
        }
    }
}

/// A reference to the documentation in code or messages reads `(book: <chapter>)` or
/// `(book: <chapter> § <heading>)`, on one line; each must name a chapter and a heading that
/// exist. `README, <section>` references are gone with the README's sections: none may
/// come back.
#[test]
fn references_to_the_book_name_chapters_and_headings_that_exist() {
    let chapters = chapters();
    let mut files = Vec::new();
    pointing_files(&root(), &mut files);
    let mut broken = Vec::new();
    for file in files {
        if file.ends_with("tests/tests/docs.rs") {
            continue;
        }
        let text = read(&file);
        for (number, line) in text.lines().enumerate() {
            let at = format!("{}:{}", file.display(), number + 1);
            if line.contains("README, ") || line.contains("README: ") {
                broken.push(format!("{at}: a README section reference: {line}"));
            }
            let mut rest = line;
            while let Some(start) = rest.find("(book: ") {
                rest = &rest[start + "(book: ".len()..];
                let end = rest.find([')', '"', '`', ';']).unwrap_or(rest.len());
                let reference = rest[..end].trim_end_matches(['.', ',', ' ']);
                let (chapter, heading) = match reference.split_once(" § ") {
                    Some((chapter, heading)) => (chapter, Some(heading)),
                    None => (reference.split(", ").next().unwrap_or(reference), None),
                };
                match chapters.iter().find(|(title, _)| title == chapter) {
                    None => broken.push(format!("{at}: no chapter `{chapter}`")),
                    Some((_, headings)) => {
                        if let Some(heading) = heading
                            && !headings.contains(&anchor(heading))
                        {
                            broken.push(format!("{at}: no heading `{heading}` in `{chapter}`"));
                        }
                    }
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn links_are_read_outside_code() {
    let text = "see [a](a.md#x) and `[b](b.md)`\n```\n[c](c.md)\n```\n[d](https://x.y) [e](#here)";
    assert_eq!(links(text), ["a.md#x", "#here"]);
}

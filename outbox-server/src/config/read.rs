//! Reading a TOML value into the file's serde view ([`super::file`]) without stopping at
//! the first value of the wrong type.
//!
//! serde gives up at the first type error. So [`read`] records it with its key path, drops
//! that one value (the field then reads as absent, the file's fields all being optional;
//! an array element becomes an empty table if that reads, so that the elements after it
//! keep their indices) and reads again, until the rest reads: every type error is
//! reported, and every other setting is still read and checked. Keys the file's structs do
//! not know are reported from that last, complete reading.

use serde::de::DeserializeOwned;

use super::problem::Problems;

/// One step of a key path: a table's key or an array's index.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// `.key`
    Key(String),
    /// `[index]`
    Index(usize),
}

/// Deserializes `value` (at key path `path`; empty for the file itself), recording each
/// value of the wrong type and each unknown key as a problem at its key path. `None` when
/// `value` as a whole is not what `T` reads (e.g. a `[[relay]]` entry that is not a table);
/// otherwise `T` without the values that could not be read, which
/// [`Problems::add_unreadable`] marks so that they are not reported again as missing.
pub(crate) fn read<T: DeserializeOwned>(
    mut value: toml::Value,
    path: &str,
    problems: &mut Problems,
) -> Option<T> {
    // The values dropped so far, by their key paths in the file (not in `value`, whose
    // arrays are shorter once an element is dropped).
    let mut dropped: Vec<Vec<Step>> = Vec::new();
    // The array element last replaced by an empty table (at its key path in `value`).
    let mut emptied: Option<Vec<Step>> = None;
    loop {
        let mut ignored = Vec::new();
        let result = serde_path_to_error::deserialize(serde_ignored::Deserializer::new(
            value.clone(),
            &mut |key: serde_ignored::Path<'_>| ignored.push(ignored_steps(&key)),
        ));
        let error = match result {
            Ok(read) => {
                report_unknown(&ignored, &dropped, path, problems);
                return Some(read);
            }
            Err(error) => error,
        };
        let steps = error_steps(error.path());
        let at = steps.as_deref().map(|steps| in_file(steps, &dropped));
        if let (Some(steps), Some(at)) = (&steps, &at)
            && emptied.as_ref() == Some(steps)
        {
            // Not a table either: the element goes (its problem is recorded already).
            if drop_value(&mut value, steps) {
                dropped.push(at.clone());
                emptied = None;
                continue;
            }
        }
        let at_path = join(path, &at.as_deref().map(render).unwrap_or_default());
        let at_path = if at_path.is_empty() {
            "file".to_owned()
        } else {
            at_path
        };
        problems.add_unreadable(at_path, type_message(error.inner().message()));
        match (steps, at) {
            // An array element is first replaced by an empty table, so that the elements
            // after it keep their indices in what is read (`console.user[i]`).
            (Some(steps), Some(_))
                if matches!(steps.last(), Some(Step::Index(_)))
                    && empty_element(&mut value, &steps) =>
            {
                emptied = Some(steps);
            }
            (Some(steps), Some(at)) if drop_value(&mut value, &steps) => dropped.push(at),
            // The value as a whole, or a place serde cannot name: nothing of it is read.
            _ => {
                report_unknown(&ignored, &dropped, path, problems);
                return None;
            }
        }
    }
}

/// Replaces the array element at `steps` in `value` by an empty table; `false` when there
/// is none.
fn empty_element(value: &mut toml::Value, steps: &[Step]) -> bool {
    match find(value, steps) {
        Some(element) => {
            *element = toml::Value::Table(toml::Table::new());
            true
        }
        None => false,
    }
}

/// The value at `steps` in `value`.
fn find<'a>(value: &'a mut toml::Value, steps: &[Step]) -> Option<&'a mut toml::Value> {
    let mut at = value;
    for step in steps {
        at = match (step, at) {
            (Step::Key(key), toml::Value::Table(table)) => table.get_mut(key)?,
            (Step::Index(index), toml::Value::Array(array)) => array.get_mut(*index)?,
            _ => return None,
        };
    }
    Some(at)
}

/// Records each key in `ignored` (key paths in the value read) as unknown.
fn report_unknown(
    ignored: &[Vec<Step>],
    dropped: &[Vec<Step>],
    path: &str,
    problems: &mut Problems,
) {
    for key in ignored {
        // `relay` entries are read on their own: the whole file does not know their keys.
        problems.add(join(path, &render(&in_file(key, dropped))), "unknown key");
    }
}

/// `path` followed by the key path `inner` below it.
fn join(path: &str, inner: &str) -> String {
    match (path.is_empty(), inner.is_empty()) {
        (true, _) => inner.to_owned(),
        (false, true) => path.to_owned(),
        (false, false) if inner.starts_with('[') => format!("{path}{inner}"),
        (false, false) => format!("{path}.{inner}"),
    }
}

/// `a.b[2].c`.
fn render(steps: &[Step]) -> String {
    let mut text = String::new();
    for step in steps {
        match step {
            Step::Index(index) => text.push_str(&format!("[{index}]")),
            Step::Key(key) => {
                if !text.is_empty() {
                    text.push('.');
                }
                text.push_str(key);
            }
        }
    }
    text
}

/// The key path in the file of the value at `steps` in the value being read, from which
/// the values at `dropped` (key paths in the file) were removed: each array index counts
/// the elements dropped before it.
fn in_file(steps: &[Step], dropped: &[Vec<Step>]) -> Vec<Step> {
    let mut at: Vec<Step> = Vec::with_capacity(steps.len());
    for step in steps {
        let step = match step {
            Step::Key(key) => Step::Key(key.clone()),
            Step::Index(index) => {
                let mut gone: Vec<usize> = dropped
                    .iter()
                    .filter_map(|path| match path.split_last() {
                        Some((Step::Index(gone), parent)) if parent == at.as_slice() => Some(*gone),
                        _ => None,
                    })
                    .collect();
                gone.sort_unstable();
                let mut index = *index;
                for gone in gone {
                    if gone <= index {
                        index += 1;
                    }
                }
                Step::Index(index)
            }
        };
        at.push(step);
    }
    at
}

/// Removes the value at `steps` (not the root) from `value`; `false` when there is none.
fn drop_value(value: &mut toml::Value, steps: &[Step]) -> bool {
    let Some((last, parents)) = steps.split_last() else {
        return false;
    };
    let Some(parent) = find(value, parents) else {
        return false;
    };
    match (last, parent) {
        (Step::Key(key), toml::Value::Table(table)) => table.remove(key).is_some(),
        (Step::Index(index), toml::Value::Array(array)) if *index < array.len() => {
            array.remove(*index);
            true
        }
        _ => false,
    }
}

/// The key path of an ignored (unknown) key.
fn ignored_steps(path: &serde_ignored::Path<'_>) -> Vec<Step> {
    use serde_ignored::Path;
    match path {
        Path::Root => Vec::new(),
        Path::Seq { parent, index } => {
            let mut steps = ignored_steps(parent);
            steps.push(Step::Index(*index));
            steps
        }
        Path::Map { parent, key } => {
            let mut steps = ignored_steps(parent);
            steps.push(Step::Key(key.clone()));
            steps
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => ignored_steps(parent),
    }
}

/// The key path of a type error; `None` when serde cannot name a step of it.
fn error_steps(path: &serde_path_to_error::Path) -> Option<Vec<Step>> {
    use serde_path_to_error::Segment;
    path.iter()
        .map(|segment| match segment {
            Segment::Seq { index } => Some(Step::Index(*index)),
            Segment::Map { key } => Some(Step::Key(key.clone())),
            Segment::Enum { .. } | Segment::Unknown => None,
        })
        .collect()
}

/// serde's message, with "a table" for the name of a struct of [`super::file`].
fn type_message(message: &str) -> String {
    let message = message.trim();
    match message.split_once("expected struct File") {
        Some((before, _)) => format!("{before}expected a table"),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Default, Deserialize)]
    struct FileInner {
        count: Option<u32>,
    }

    #[derive(Debug, Default, Deserialize)]
    struct FileOuter {
        name: Option<String>,
        keys: Option<Vec<String>>,
        inner: Option<FileInner>,
        #[serde(default)]
        items: Vec<FileInner>,
        options: Option<BTreeMap<String, String>>,
    }

    fn read_text(text: &str) -> (Option<FileOuter>, Vec<String>) {
        let table: toml::Table = toml::from_str(text).unwrap();
        let mut problems = Problems::default();
        let read = read::<FileOuter>(toml::Value::Table(table), "relay[1]", &mut problems);
        let found = problems
            .finish(|| ())
            .err()
            .map(|error| error.problems.iter().map(ToString::to_string).collect())
            .unwrap_or_default();
        (read, found)
    }

    #[test]
    fn every_type_error_is_reported_and_the_rest_is_read() {
        let (read, problems) = read_text(
            r#"
name = 42
keys = [1, "a", 2, "b", true]
inner = { count = "x", extra = 1 }
items = [{ count = 1 }, "no", { count = "y" }, { count = 3, other = 0 }]
options = { a = "1", b = 2 }
unknown = 1
"#,
        );
        let read = read.unwrap();
        assert_eq!(read.name, None);
        assert_eq!(read.keys.unwrap(), ["a", "b"]);
        assert_eq!(read.inner.unwrap().count, None);
        assert_eq!(read.items.len(), 4, "a bad element keeps its place");
        assert_eq!(read.options.unwrap().len(), 1);
        for expected in [
            "relay[1].name: invalid type: integer `42`, expected a string",
            "relay[1].keys[0]: invalid type: integer `1`, expected a string",
            "relay[1].keys[2]: invalid type: integer `2`, expected a string",
            "relay[1].keys[4]: invalid type: boolean `true`, expected a string",
            "relay[1].inner.count: invalid type: string \"x\", expected u32",
            "relay[1].inner.extra: unknown key",
            "relay[1].items[1]: invalid type: string \"no\", expected a table",
            "relay[1].items[2].count: invalid type: string \"y\", expected u32",
            "relay[1].items[3].other: unknown key",
            "relay[1].options.b: invalid type: integer `2`, expected a string",
            "relay[1].unknown: unknown key",
        ] {
            assert!(
                problems.iter().any(|problem| problem == expected),
                "{expected} not in {problems:#?}"
            );
        }
        assert_eq!(problems.len(), 11, "{problems:#?}");
    }

    #[test]
    fn a_value_that_is_not_a_table_is_not_read() {
        let mut problems = Problems::default();
        let read = read::<FileOuter>(toml::Value::Integer(3), "relay[0]", &mut problems);
        assert!(read.is_none());
        assert!(problems.is_unreadable("relay[0]"));
        let error = problems.finish(|| ()).unwrap_err();
        assert_eq!(
            error.problems[0].to_string(),
            "relay[0]: invalid type: integer `3`, expected a table"
        );
    }

    #[test]
    fn an_unreadable_value_is_not_reported_again_as_missing() {
        let mut problems = Problems::default();
        let read = read::<FileOuter>(
            toml::Value::Table(toml::from_str("inner = 5").unwrap()),
            "relay[0]",
            &mut problems,
        );
        assert!(read.unwrap().inner.is_none());
        problems.add("relay[0].inner", "missing");
        problems.add("relay[0].inner.count", "missing");
        problems.add("relay[0].inner_other", "missing");
        problems.add("relay[0].inner (from OUTBOX_X)", "wrong");
        let error = problems.finish(|| ()).unwrap_err();
        let paths: Vec<&str> = error.problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "relay[0].inner",
                "relay[0].inner_other",
                "relay[0].inner (from OUTBOX_X)"
            ]
        );
    }
}

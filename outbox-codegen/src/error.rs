//! Why generation failed: every error names the file and, inside a schema, the JSON pointer.

use std::io;
use std::path::PathBuf;

/// Why types could not be generated from an export folder.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenerateError {
    /// The folder has no `index.json`: it is not a folder written by `schemas export`.
    #[error(
        "`{}` is not an exported contract folder: it has no index.json (the producer writes it \
         with `schemas export --out DIR`)",
        dir.display()
    )]
    MissingIndex {
        /// The folder given.
        dir: PathBuf,
    },
    /// The folder was written by a newer exporter whose layout this generator does not know.
    #[error(
        "`{}` has format_version {found}; this outbox-codegen reads format_version {supported} \
         at most: upgrade outbox-codegen to the producer's outbox version",
        path.display()
    )]
    NewerFormat {
        /// The `index.json`.
        path: PathBuf,
        /// Its `format_version`.
        found: u64,
        /// The newest layout this crate reads.
        supported: u32,
    },
    /// A file could not be read.
    #[error("cannot read `{}`: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// A file is larger than a contract schema can reasonably be.
    #[error("`{}` is {size} bytes, more than the {limit} bytes a schema file may have", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A file is not the JSON expected.
    #[error("`{}` is not valid at `{pointer}`: {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Where in it (a JSON pointer; empty for the whole document).
        pointer: String,
        /// What is wrong.
        reason: String,
    },
    /// A contract was asked for that the folder does not export.
    #[error(
        "`{}` does not export `{event_type}` (it exports: {available})",
        dir.display()
    )]
    UnknownContract {
        /// The folder.
        dir: PathBuf,
        /// The event type asked for.
        event_type: String,
        /// What it exports, comma-separated.
        available: String,
    },
    /// A `$ref` points at nothing in its file.
    #[error(
        "`{}` at `{pointer}`: `$ref` `{reference}` does not resolve (only local references to \
         `#/$defs/<name>` that exist in the same file, or `#`, are followed)",
        path.display()
    )]
    UnresolvedReference {
        /// The schema file.
        path: PathBuf,
        /// Where the `$ref` is.
        pointer: String,
        /// Its value.
        reference: String,
    },
    /// A schema uses a keyword the generator cannot express as a Rust type.
    #[error(
        "`{}` at `{pointer}`: the keyword `{keyword}` is not supported by the generator ({reason})",
        path.display()
    )]
    UnsupportedConstruct {
        /// The schema file.
        path: PathBuf,
        /// Where the keyword is.
        pointer: String,
        /// The keyword.
        keyword: String,
        /// Why, and what to do.
        reason: String,
    },
    /// Two contracts would generate the same top-level type name.
    #[error(
        "`{first}` and `{second}` both generate the type `{type_name}`: generate one of them \
         (`only`) or put them in separate files"
    )]
    TypeNameClash {
        /// The type name.
        type_name: String,
        /// One event type.
        first: String,
        /// The other.
        second: String,
    },
    /// typify refused the schema (or failed on it).
    #[error("`{}`: the generator (typify) cannot convert it: {message}", path.display())]
    Generator {
        /// The schema file.
        path: PathBuf,
        /// typify's message.
        message: String,
    },
    /// The generated code did not parse as Rust (a bug of the generator).
    #[error("the code generated for `{}` does not parse: {message}", path.display())]
    Unparsable {
        /// The schema file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// Writing the output failed.
    #[error("cannot write `{}`: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
}

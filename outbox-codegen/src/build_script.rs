//! Generation from a build script, into `OUT_DIR`.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

use crate::config::CodegenConfig;
use crate::error::GenerateError;
use crate::generate::{GeneratedCode, generate};

/// Generates the types of the export folder `dir` into `$OUT_DIR/<file_name>`, for
/// `include!(concat!(env!("OUT_DIR"), "/<file_name>"))`, and tells Cargo to run the build
/// script again when the folder changes. Call it from `build.rs`:
///
/// ```no_run
/// // build.rs, in `fn main`:
/// let config = outbox_codegen::CodegenConfig::builder().kernel_path("outbox_core").build();
/// if let Err(error) =
///     outbox_codegen::build_script::generate_into_out_dir("ordering-schemas", "ordering.rs", &config)
/// {
///     panic!("{error}");
/// }
/// ```
///
/// A relative `dir` is relative to the package (`CARGO_MANIFEST_DIR`), where Cargo runs
/// build scripts. The file is rewritten only when its contents change.
///
/// # Errors
/// A [`GenerateError`] from [`generate`], or [`GenerateError::Write`].
pub fn generate_into_out_dir(
    dir: impl AsRef<Path>,
    file_name: &str,
    config: &CodegenConfig,
) -> Result<GeneratedCode, GenerateError> {
    let dir = dir.as_ref();
    // Cargo reruns the script when a file under the folder changes (or one is added).
    println_rerun(dir);
    let code = generate(dir, config)?;
    let out_dir =
        env::var_os("OUT_DIR")
            .map(PathBuf::from)
            .ok_or_else(|| GenerateError::Write {
                path: PathBuf::from(file_name),
                source: std::io::Error::other("OUT_DIR is not set: call this from a build script"),
            })?;
    write_if_changed(&out_dir.join(file_name), &code.source)?;
    Ok(code)
}

#[allow(clippy::print_stdout)] // the build-script protocol is stdout
fn println_rerun(dir: &Path) {
    println!("cargo::rerun-if-changed={}", dir.display());
}

/// Writes `source` to `path` unless it already holds exactly that (a checked-in file keeps
/// its timestamp, so nothing rebuilds).
///
/// # Errors
/// [`GenerateError::Write`].
pub fn write_if_changed(path: &Path, source: &str) -> Result<bool, GenerateError> {
    if fs::read_to_string(path).is_ok_and(|current| current == source) {
        return Ok(false);
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(|source| GenerateError::Write {
            path: parent.to_owned(),
            source,
        })?;
    }
    fs::write(path, source).map_err(|source| GenerateError::Write {
        path: path.to_owned(),
        source,
    })?;
    Ok(true)
}

//! Readers and writers: workload files, placement files, atomic output.

pub mod placement_json;
pub mod workload_json;

pub use placement_json::{parse_placement, placement_to_raw, read_placement, RawPlacement};
pub use workload_json::{parse_workload, read_workload, workload_to_json};

use std::path::Path;

use crate::model::WorkloadError;

/// Errors of reading and writing files. Every message names the file, field or node.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    #[error("{path}: {source}")]
    File { path: String, source: std::io::Error },
    #[error("{0}")]
    Format(String),
    #[error("invalid workload: {0}")]
    Invalid(#[from] WorkloadError),
    #[error("{path}: {message}")]
    InFile { path: String, message: String },
}

impl IoError {
    fn in_file(self, path: &Path) -> IoError {
        match self {
            IoError::File { .. } | IoError::InFile { .. } => self,
            other => IoError::InFile { path: path.display().to_string(), message: other.to_string() },
        }
    }
}

pub(crate) fn read_text(path: &Path) -> Result<String, IoError> {
    std::fs::read_to_string(path).map_err(|source| IoError::File { path: path.display().to_string(), source })
}

/// Writes `contents` to `path` atomically: a temporary file in the same folder, then a
/// rename, so a reader never sees a half-written file.
pub fn write_atomically(path: &Path, contents: &str) -> Result<(), IoError> {
    use std::io::Write;
    let err = |source| IoError::File { path: path.display().to_string(), source };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(err)?;
    tmp.write_all(contents.as_bytes()).map_err(err)?;
    tmp.as_file().sync_all().map_err(err)?;
    tmp.persist(path).map_err(|e| err(e.error))?;
    Ok(())
}

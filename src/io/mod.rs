//! Readers and writers: workload files, placement files, atomic output.
//!
//! - [`json`]: the rules of every JSON file read (one value, optional UTF-8 BOM, errors
//!   with a JSON path and line/column);
//! - [`workload_json`], [`placement_json`]: the two file formats of MODEL.md;
//! - [`output_file`]: `--out` files, written atomically over regular files only.

pub mod json;
pub mod output_file;
pub mod placement_json;
pub mod workload_json;

pub use output_file::{check_output_target, write_atomically};
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

/// Reads a whole text file; a file that is not UTF-8 is an error saying where.
pub(crate) fn read_text(path: &Path) -> Result<String, IoError> {
    let bytes = std::fs::read(path).map_err(|source| IoError::File { path: path.display().to_string(), source })?;
    match json::text_of(&bytes) {
        Ok(_) => Ok(String::from_utf8(bytes).expect("checked above")),
        Err(message) => Err(IoError::InFile { path: path.display().to_string(), message }),
    }
}

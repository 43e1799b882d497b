//! Readers and writers: workload files, placement files, cluster files, atomic output.
//!
//! - [`json`]: the rules of every JSON file read (one value, optional UTF-8 BOM, errors
//!   with a JSON path and line/column);
//! - [`workload_json`], [`placement_json`]: the two file formats of MODEL.md;
//! - [`layout_json`]: 3D plan files (`plan --parallel 3d --json`) read back;
//! - [`cluster_file`]: cluster descriptions (TOML, short form) and a workload's cluster section;
//! - [`cluster_resolve`]: a cluster document or `--cluster` short form resolved into a
//!   [`crate::model::Cluster`], defaults from the device profiles;
//! - [`profile_file`]: device profile files (TOML);
//! - [`tensor_parallel_json`]: a workload JSON's optional per-node `tensorParallel` options
//!   (`plan WORKLOAD.json --parallel 3d`);
//! - [`input_file`]: input files read whole within a size limit, never a device;
//! - [`output_file`]: `--out` files, written atomically over regular files only.

pub mod cluster_file;
pub mod cluster_resolve;
pub mod input_file;
pub mod json;
pub mod layout_json;
pub mod output_file;
pub mod piper_file;
pub mod placement_json;
pub mod profile_file;
pub mod tensor_parallel_json;
pub mod workload_json;

pub use input_file::{read_input, read_input_text, text_of, TEXT_LIMIT_BYTES};
pub use output_file::{check_output_target, write_atomically};
pub use piper_file::{parse_piper, read_piper};
pub use placement_json::{parse_placement, placement_to_raw, read_placement, RawPlacement};
pub use workload_json::{parse_workload, read_workload, workload_to_json};

use std::path::Path;

use crate::model::WorkloadError;

/// Errors of reading and writing files. Every message names the file, field or node.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    #[error("{path}: {source}")]
    File {
        path: String,
        source: std::io::Error,
    },
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
            other => IoError::InFile {
                path: path.display().to_string(),
                message: other.to_string(),
            },
        }
    }
}

/// Reads a whole text file ([`input_file`]); every error names the file.
pub(crate) fn read_text(path: &Path) -> Result<String, IoError> {
    read_input_text(path, TEXT_LIMIT_BYTES).map_err(|message| IoError::InFile {
        path: path.display().to_string(),
        message,
    })
}

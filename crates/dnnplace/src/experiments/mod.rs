//! Many workloads at once: finding them on disk and running methods over them, the drivers
//! behind `dnnplace reproduce` and `dnnplace bench`. Everything here returns data;
//! [`crate::report`] renders it and the command line prints it.
//!
//! - [`reproduce`]: every applicable method on every published workload, on threads;
//! - [`bench`](mod@bench): `dnnplace plan` timed on workload files, one child process each;
//! - [`parallel`](mod@parallel): parallel layouts at scale and Megatron-LM's published
//!   configurations under our model (`dnnplace bench --parallel`).

pub mod bench;
pub mod parallel;
pub mod reproduce;

use std::path::{Path, PathBuf};

use crate::io::IoError;

/// The workload files under `path`: the file itself, or every `*.json` in the folder and its
/// subfolders, sorted by path. Errors if `path` does not exist or a folder cannot be read.
pub fn workload_files(path: &Path) -> Result<Vec<PathBuf>, IoError> {
    let mut out = Vec::new();
    collect(path, &mut out)?;
    Ok(out)
}

fn collect(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), IoError> {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|source| IoError::File {
                path: path.display().to_string(),
                source,
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for e in entries {
            if e.is_dir() || e.extension().is_some_and(|x| x == "json") {
                collect(&e, out)?;
            }
        }
    } else if path.exists() {
        out.push(path.to_path_buf());
    } else {
        return Err(IoError::Format(format!(
            "{}: no such file or folder",
            path.display()
        )));
    }
    Ok(())
}

/// The human-expert split for the workload named `name` in the folder `experts`:
/// `NAME_expert.json`, or for a training graph `M_training` without its own the inference
/// split `M_inference_expert.json` (completed by colour class when read).
pub fn expert_split(experts: &Path, name: &str) -> Option<PathBuf> {
    let own = experts.join(format!("{name}_expert.json"));
    if own.is_file() {
        return Some(own);
    }
    let model = name.strip_suffix("_training")?;
    let inference = experts.join(format!("{model}_inference_expert.json"));
    inference.is_file().then_some(inference)
}

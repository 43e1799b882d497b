//! `dnnplace bench`: `dnnplace plan FILE --json` timed on workload files, each in a child
//! process so that its peak memory is its own; optionally a human-expert split scored beside
//! each. [`crate::report::bench`] renders the rows.

use std::path::{Path, PathBuf};

use crate::io::{read_placement, read_workload, IoError};
use crate::score::evaluate;
use crate::solve::MethodId;

/// What to time.
#[derive(Clone, Debug)]
pub struct BenchSpec {
    /// The `dnnplace` executable to run.
    pub exe: PathBuf,
    /// `--method` of each run.
    pub method: MethodId,
    /// More flags for `plan`.
    pub plan_args: Vec<String>,
    /// A folder of expert splits ([`super::expert_split`]) to score beside each workload.
    pub experts: Option<PathBuf>,
}

/// One workload file's row.
#[derive(Clone, Debug)]
pub struct BenchRow {
    /// The file's path below the folder it was found in, without `.json`.
    pub name: String,
    /// The run, or why `plan` failed (its stderr on one line).
    pub run: Result<BenchRun, String>,
    pub expert: ExpertScore,
}

/// What one successful `plan --json` reported.
#[derive(Clone, Debug)]
pub struct BenchRun {
    /// The method's own time, seconds.
    pub solve_s: Option<f64>,
    /// The child process's wall time, seconds.
    pub wall_s: f64,
    pub ideals: Option<u64>,
    pub ideal_pairs: Option<u64>,
    pub peak_memory_bytes: Option<u64>,
    pub objective: Option<f64>,
}

/// The expert split's TPS, when the folder has one for the workload.
#[derive(Clone, Debug, PartialEq)]
pub enum ExpertScore {
    /// No split (or no folder).
    None,
    /// A split of the same name for another graph (layer vs operator granularity).
    OtherGraph,
    /// The split breaks a rule: the first violation.
    Invalid(String),
    /// Its TPS.
    Tps(f64),
}

/// Errors that stop the whole bench (a failing `plan` is a row, not an error).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Input(#[from] IoError),
    #[error("{0}")]
    Run(String),
}

/// The files of `paths` ([`super::workload_files`]), named by their path below the folder
/// given (a file given directly keeps its path).
pub fn named_files(paths: &[PathBuf]) -> Result<Vec<(String, PathBuf)>, IoError> {
    let mut files = Vec::new();
    for p in paths {
        for f in super::workload_files(p)? {
            let short = f
                .strip_prefix(p)
                .ok()
                .filter(|s| !s.as_os_str().is_empty())
                .map(|s| s.with_extension(""));
            files.push((
                short.map_or_else(|| f.display().to_string(), |s| s.display().to_string()),
                f,
            ));
        }
    }
    Ok(files)
}

/// Times `spec` on every file, one after the other.
pub fn run(spec: &BenchSpec, files: &[(String, PathBuf)]) -> Result<Vec<BenchRow>, BenchError> {
    files
        .iter()
        .map(|(name, file)| run_one(spec, name, file))
        .collect()
}

fn run_one(spec: &BenchSpec, name: &str, file: &Path) -> Result<BenchRow, BenchError> {
    let wall = std::time::Instant::now();
    let output = std::process::Command::new(&spec.exe)
        .arg("plan")
        .arg(file)
        .arg("--json")
        .arg("--method")
        .arg(spec.method.name())
        .args(&spec.plan_args)
        .output()
        .map_err(|e| BenchError::Run(format!("running {}: {e}", spec.exe.display())))?;
    let wall_s = wall.elapsed().as_secs_f64();
    let expert = match (&spec.experts, file.file_stem().and_then(|s| s.to_str())) {
        (Some(dir), Some(stem)) => expert_score(dir, stem, file)?,
        _ => ExpertScore::None,
    };
    if !output.status.success() {
        let err = String::from_utf8_lossy(&output.stderr)
            .trim()
            .replace('\n', " ");
        return Ok(BenchRow {
            name: name.into(),
            run: Err(err),
            expert,
        });
    }
    let v: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| BenchError::Run(format!("plan --json printed no JSON: {e}")))?;
    let run = BenchRun {
        solve_s: v["timeS"].as_f64(),
        wall_s,
        ideals: v["ideals"].as_u64(),
        ideal_pairs: v["idealPairs"].as_u64(),
        peak_memory_bytes: v["peakMemoryBytes"].as_u64(),
        objective: v["value"].as_f64(),
    };
    Ok(BenchRow {
        name: name.into(),
        run: Ok(run),
        expert,
    })
}

fn expert_score(dir: &Path, stem: &str, file: &Path) -> Result<ExpertScore, BenchError> {
    let Some(split) = super::expert_split(dir, stem) else {
        return Ok(ExpertScore::None);
    };
    let w = read_workload(file)?;
    // A split of the same name may belong to another granularity (layer vs operator).
    Ok(match read_placement(&split, &w) {
        Err(_) => ExpertScore::OtherGraph,
        Ok(p) => {
            let e = evaluate(&w, &p, false);
            match e.violations.first() {
                None => ExpertScore::Tps(e.max_load),
                Some(v) => ExpertScore::Invalid(v.to_string()),
            }
        }
    })
}

/// Peak resident memory of this process (Linux `VmHWM`), bytes.
pub fn peak_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

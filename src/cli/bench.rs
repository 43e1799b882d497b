//! `dnnplace bench`: the DP on a set of workload files, each planned in a child process
//! (`dnnplace plan FILE --json`) so that its peak memory is its own. Prints a table of
//! time, groups, ideals, ideal pairs evaluated, peak memory and TPS.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::CliError;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Workload files or folders (searched recursively for *.json).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Method to time.
    #[arg(long, default_value = "dp")]
    pub method: String,
    /// Extra flags for `plan` (e.g. --time-limit=60s), repeatable.
    #[arg(long = "plan-arg", allow_hyphen_values = true)]
    pub plan_args: Vec<String>,
    /// Print a Markdown table.
    #[arg(long)]
    pub markdown: bool,
    /// Folder of human-expert splits: `X_expert.json` (or, for `X_training`, the inference
    /// split `X_inference_expert.json`) is scored for workload `X.json` in an extra column.
    #[arg(long, value_name = "DIR")]
    pub experts: Option<PathBuf>,
}

/// The expert split for a workload file, if the folder has one.
fn expert_for(dir: &std::path::Path, workload: &std::path::Path) -> Option<PathBuf> {
    let stem = workload.file_stem()?.to_str()?;
    let own = dir.join(format!("{stem}_expert.json"));
    if own.exists() {
        return Some(own);
    }
    let inference = dir.join(format!("{}_expert.json", stem.strip_suffix("_training")?.to_owned() + "_inference"));
    inference.exists().then_some(inference)
}

/// Peak resident memory of this process (Linux `VmHWM`), bytes.
pub fn peak_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn collect(path: &PathBuf, out: &mut Vec<PathBuf>) -> Result<(), CliError> {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| CliError::Input(format!("{}: {e}", path.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for e in entries {
            if e.is_dir() || e.extension().is_some_and(|x| x == "json") {
                collect(&e, out)?;
            }
        }
    } else if path.exists() {
        out.push(path.clone());
    } else {
        return Err(CliError::Input(format!("{}: no such file or folder", path.display())));
    }
    Ok(())
}

pub fn run_bench(args: BenchArgs) -> Result<(), CliError> {
    let mut files = Vec::new();
    for p in &args.paths {
        let mut found = Vec::new();
        collect(p, &mut found)?;
        files.extend(found.into_iter().map(|f| {
            let short = f.strip_prefix(p).ok().filter(|s| !s.as_os_str().is_empty()).map(|s| s.with_extension(""));
            (short.map_or_else(|| f.display().to_string(), |s| s.display().to_string()), f)
        }));
    }
    let exe = std::env::current_exe().map_err(|e| CliError::Internal(format!("cannot find this program: {e}")))?;
    let mut rows = Vec::new();
    for (name, file) in &files {
        let wall = std::time::Instant::now();
        let output = std::process::Command::new(&exe)
            .arg("plan")
            .arg(file)
            .arg("--json")
            .arg("--method")
            .arg(&args.method)
            .args(&args.plan_args)
            .output()
            .map_err(|e| CliError::Internal(format!("running {}: {e}", exe.display())))?;
        let wall_s = wall.elapsed().as_secs_f64();
        let name = name.clone();
        let expert = match args.experts.as_deref().and_then(|d| expert_for(d, file)) {
            None => "-".to_string(),
            Some(split) => {
                let w = crate::io::read_workload(file)?;
                // A split of the same name may belong to another granularity (layer vs operator).
                match crate::io::read_placement(&split, &w) {
                    Err(_) => "n/a (other graph)".to_string(),
                    Ok(p) => {
                        let e = crate::score::evaluate(&w, &p, false);
                        if e.is_valid() {
                            format!("{:.6}", e.max_load)
                        } else {
                            format!("invalid: {}", e.violations[0])
                        }
                    }
                }
            }
        };
        if !output.status.success() {
            let err = String::from_utf8_lossy(&output.stderr).trim().replace('\n', " ");
            rows.push(vec![name, "failed".into(), err, String::new(), String::new(), String::new(), String::new(), expert]);
            continue;
        }
        let v: serde_json::Value = serde_json::from_slice(&output.stdout)
            .map_err(|e| CliError::Internal(format!("plan --json printed no JSON: {e}")))?;
        let num = |k: &str| v[k].as_f64();
        let int = |k: &str| v[k].as_u64().map_or("-".to_string(), |x| x.to_string());
        rows.push(vec![
            name,
            format!("{:.3}", num("timeS").unwrap_or(f64::NAN)),
            format!("{wall_s:.3}"),
            int("ideals"),
            int("idealPairs"),
            v["peakMemoryBytes"].as_u64().map_or("-".into(), |b| format!("{:.1}", b as f64 / (1024.0 * 1024.0))),
            format!("{:.9}", num("value").unwrap_or(f64::NAN)),
            expert,
        ]);
    }
    let header = ["workload", "solve s", "wall s", "ideals", "ideal pairs", "peak MiB", "objective", "expert"];
    let mut stdout = std::io::stdout().lock();
    if args.markdown {
        writeln!(stdout, "| {} |", header.join(" | "))?;
        writeln!(stdout, "|{}", "---|".repeat(header.len()))?;
        for r in &rows {
            writeln!(stdout, "| {} |", r.join(" | "))?;
        }
    } else {
        let width: Vec<usize> =
            (0..header.len()).map(|i| rows.iter().map(|r| r[i].len()).chain([header[i].len()]).max().unwrap_or(0)).collect();
        let line = |cells: Vec<&str>| {
            cells.iter().enumerate().map(|(i, c)| format!("{c:>w$}", w = width[i])).collect::<Vec<_>>().join("  ")
        };
        writeln!(stdout, "{}", line(header.to_vec()))?;
        for r in &rows {
            writeln!(stdout, "{}", line(r.iter().map(String::as_str).collect()))?;
        }
    }
    Ok(())
}

//! `dnnplace bench`: flags, then [`crate::experiments::bench`] runs `plan` on each file in
//! a child process and [`crate::report::bench`] prints the table.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::experiments::bench::{named_files, run, BenchError, BenchSpec};
use crate::report::bench::bench_table;

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

pub fn run_bench(args: BenchArgs) -> Result<(), CliError> {
    let method = super::settings::method_id(&args.method)?;
    let files = named_files(&args.paths)?;
    let exe = std::env::current_exe().map_err(|e| CliError::Internal(format!("cannot find this program: {e}")))?;
    let spec = BenchSpec { exe, method: method.name().into(), plan_args: args.plan_args, experts: args.experts };
    let rows = run(&spec, &files).map_err(|e| match e {
        BenchError::Input(e) => CliError::from(e),
        BenchError::Run(e) => CliError::Internal(e),
    })?;
    let table = bench_table(&rows);
    let mut stdout = std::io::stdout().lock();
    write!(stdout, "{}", if args.markdown { table.markdown() } else { table.text() })?;
    stdout.flush()?;
    Ok(())
}

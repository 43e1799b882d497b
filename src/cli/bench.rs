//! `dnnplace bench`: flags, then [`crate::experiments::bench`] runs `plan` on each file in
//! a child process and [`crate::report::bench`] prints the table. `--scale` runs the
//! generated scale rows instead ([`super::bench_scale`]), `--hard` the hard families of
//! issue 29 ([`super::bench_hard`]).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::CliError;
use crate::experiments::bench::{named_files, run, BenchError, BenchSpec};
use crate::report::bench::bench_table;

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("generated").args(["scale", "hard"])))]
pub struct BenchArgs {
    /// Workload files or folders (searched recursively for *.json).
    #[arg(required_unless_present_any = ["scale", "parallel", "hard"])]
    pub paths: Vec<PathBuf>,
    /// Instead of files: `--method auto` on generated graphs of 1k-100k operators and the
    /// memory-bound GNMT cases (see `cli::bench_scale`); only rows whose name contains
    /// FILTER (e.g. `gpt`, `wide`, `transformer-1536`).
    #[arg(long, value_name = "FILTER", num_args = 0..=1, default_missing_value = "", conflicts_with_all = ["paths", "experts"])]
    pub scale: Option<String>,
    /// Instead of files: parallel layouts (issue 26) — a Llama-3-70B-shaped model on 1,024
    /// H100s, and Megatron-LM's Table 1 configurations (SC'21) under our model next to our
    /// plan (docs/parallel.md).
    #[arg(long, conflicts_with_all = ["paths", "experts", "scale"])]
    pub parallel: bool,
    /// Instead of files: `--method auto` on the hard families of issue 29 (parallel
    /// chains, wide blocks, a 3-type 256-GPU cluster, GNMT with k = 8 and 16 under tight
    /// memory, a 100k-op GPT of another shape; see `cli::bench_hard`); only rows whose
    /// name contains FILTER.
    #[arg(long, value_name = "FILTER", num_args = 0..=1, default_missing_value = "", conflicts_with_all = ["paths", "experts", "scale", "parallel"])]
    pub hard: Option<String>,
    /// --scale, --hard: the time limit of each run.
    #[arg(long, value_parser = super::parse_seconds, value_name = "TIME", default_value = "60s", requires = "generated")]
    pub time_limit: f64,
    /// --scale, --hard: the folder with the published gnmt_inference.json and
    /// gnmt_training.json.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "../shared/workloads/paper/throughput/layer",
        requires = "generated"
    )]
    pub gnmt_dir: PathBuf,
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
    if args.parallel {
        return super::bench_parallel::run(args.markdown);
    }
    if let Some(filter) = &args.hard {
        let limit = super::settings::time_limit("--time-limit", args.time_limit, "")?;
        return super::bench_hard::run(
            filter,
            limit,
            &args.gnmt_dir,
            &args.plan_args,
            args.markdown,
        );
    }
    if let Some(filter) = &args.scale {
        let limit = super::settings::time_limit("--time-limit", args.time_limit, "")?;
        return super::bench_scale::run(
            filter,
            limit,
            &args.gnmt_dir,
            &args.plan_args,
            args.markdown,
        );
    }
    let method = super::settings::method_id(&args.method)?;
    let files = named_files(&args.paths)?;
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Internal(format!("cannot find this program: {e}")))?;
    let spec = BenchSpec {
        exe,
        method,
        plan_args: args.plan_args,
        experts: args.experts,
    };
    let rows = run(&spec, &files).map_err(|e| match e {
        BenchError::Input(e) => CliError::from(e),
        BenchError::Run(e) => CliError::Internal(e),
    })?;
    let table = bench_table(&rows);
    let mut stdout = std::io::stdout().lock();
    write!(
        stdout,
        "{}",
        if args.markdown {
            table.markdown()
        } else {
            table.text()
        }
    )?;
    stdout.flush()?;
    Ok(())
}

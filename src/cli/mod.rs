//! The command line: raw flags (clap, the argument types here) → validated settings
//! ([`settings`]) → library calls → one report. Notes about what the settings decided (an
//! implied flag, a clamped count) go to stderr as `note:` lines.
//!
//! Exit status ([`EXIT_STATUS`], also in `--help`): 0 success (a closed output pipe counts
//! as success); 1 `score` of a placement that breaks a rule (the table or JSON is printed
//! all the same); 2 bad input (an unreadable or invalid workload or placement, a flag out of
//! range, an `--out` that is not a regular file, an instance with no feasible placement with
//! the reason, or no plan found within the limits with the limit that stopped the run); 3 an
//! internal check failed (a bug: a solver's plan that the scorer rejects).

pub mod bench;
pub mod bench_hard;
pub mod bench_parallel;
pub mod bench_scale;
pub mod calibrate_cmd;
pub mod cluster_cmd;
pub mod costmodel_cmds;
pub mod export_cmds;
pub mod parallel_cmd;
pub mod piper_cmd;
pub mod settings;
pub mod simulate;

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub use settings::{parse_count, parse_fraction, parse_seconds};

use crate::experiments::bench::peak_memory_bytes;
use crate::io::{check_output_target, read_placement, read_workload, write_atomically, IoError};
use crate::model::schedule::{Pipeline, Schedule};
use crate::model::{human_bytes, parse_bytes, DeviceSet, WorkloadError};
use crate::report::plan_json::{ExportJson, PipelineJson};
use crate::report::table::status_text;
use crate::report::{
    comparison_json, comparison_markdown, comparison_text, placement_json, plan_table, ClaimJson,
    EvaluationJson, PlanJson,
};
use crate::score::{evaluate_with, DeviceMemory, LatencyScoring};
use crate::solve::auto::Auto;
use crate::solve::baselines::expert::Expert;
use crate::solve::milp::IpExperiment;
use crate::solve::{self, Method, MethodId, Objective, Outcome, Problem, SolveError, Status};
use settings::{
    fit_to_workload, CompareSettings, DeviceOverrides, PlanSettings, ReproduceSettings,
};

/// The exit statuses, as `--help` prints them.
pub const EXIT_STATUS: &str = "Exit status:
  0  success
  1  score: the placement breaks a rule (device count, colour class, support, memory, deadlock)
  2  bad input: unreadable or invalid workload, placement, model or flag; --out not a regular
     file; no feasible placement, or no plan within the limits (the message says why)
  3  internal check failed (a bug; please report it)";

#[derive(Parser, Debug)]
#[command(name = "dnnplace", version, about = "Optimal device placement of DNN operator graphs", after_help = EXIT_STATUS)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The commands. Each one's flags are added to clap's command only when that command is
/// parsed (`defer`): building all of them took about half a megabyte of heap and a fifth
/// of `dnnplace --version`'s instructions (callgrind), at every start.
#[derive(Subcommand, Debug)]
#[command(defer = true)]
pub enum Command {
    /// Compute a placement of a workload.
    Plan(Box<PlanArgs>),
    /// Score a placement file against a workload: validity, loads, TPS, latency. Exits 1
    /// when the placement breaks a rule.
    #[command(after_help = EXIT_STATUS)]
    Score(ScoreArgs),
    /// Run every applicable method on a workload and print one comparison table.
    Compare(CompareArgs),
    /// Regenerate the comparison over every published workload (docs/results.md).
    Reproduce(ReproduceArgs),
    /// Run a plan through a pipeline schedule, event by event: iteration time, bubble, memory.
    Simulate(simulate::SimulateArgs),
    /// Time the DP on workload files (each in its own process): time, ideals, pairs, peak
    /// memory; with --scale, `--method auto` on generated graphs of 1k-100k operators.
    Bench(bench::BenchArgs),
    /// Write a plan in a framework's form: torch, torch-json, deepspeed, megatron, vllm, accelerate.
    Export(export_cmds::ExportArgs),
    /// Cost models: `devices`, `import`, `generate` (see costmodel_cmds).
    #[command(flatten)]
    Cost(costmodel_cmds::CostCommand),
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum CoarsenArg {
    /// Coarsen only when the exact DP does not fit the time limit.
    Auto,
    /// Never coarsen (the exact DP only).
    Off,
    /// Coarsen by `layerId`.
    Layers,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum ObjectiveArg {
    /// Time-Per-Sample (max device load), pipelined throughput.
    Throughput,
    /// Synchronous pipelines: max forward load + max backward load.
    Sync,
    /// Single-sample latency.
    Latency,
    /// Parallel layouts (`--parallel 3d`): time per iteration of `--global-batch` samples.
    Iteration,
}

// Knobs of the search methods, shared by `plan` and `compare`.
#[derive(Args, Debug, Clone)]
pub struct SearchFlags {
    /// Largest number of ideals the DP may enumerate (1 to 2^32 - 1).
    #[arg(long, default_value_t = 2_000_000, value_parser = parse_count)]
    pub max_ideals: usize,
    /// Random seed (local search, partitioner).
    #[arg(long, default_value_t = 1, value_parser = parse_count)]
    pub seed: usize,
    /// Restarts (local search; 1 to 1,000,000).
    #[arg(long, default_value_t = 10, value_parser = parse_count)]
    pub restarts: usize,
    /// Policy-gradient steps (`--method rl`, default 1,000) or generations (`--method
    /// genetic`, default 100); 1 to 1,000,000.
    #[arg(long, value_name = "N", value_parser = parse_count)]
    pub steps: Option<usize>,
    /// Memory the methods may allocate for tables and models in proportion to the input
    /// (IP model, local-search counts, DP tables), e.g. 16GiB (1 MiB to 1 PiB). A method
    /// that would need more stops with a message naming what needed it.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes, default_value = "4GiB")]
    pub memory_budget: f64,
}

// Flags that override the workload's device set.
#[derive(Args, Debug, Clone, Default)]
pub struct DeviceFlags {
    /// Number of accelerators k (overrides maxFPGAs; more than the nodes is clamped to them).
    #[arg(long, value_name = "K", value_parser = parse_count)]
    pub accelerators: Option<usize>,
    /// Number of CPU cores ℓ (overrides maxCPUs; more than the nodes is clamped to them).
    #[arg(long, value_name = "L", value_parser = parse_count)]
    pub cpus: Option<usize>,
    /// Memory per accelerator, bytes or with a unit: 16GiB, 80GB (overrides maxSizePerFPGA).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub memory: Option<f64>,
}

#[derive(Args, Debug)]
pub struct PlanArgs {
    /// Workload JSON file (MODEL.md format), or an ONNX model (.onnx) priced with --device.
    pub workload: PathBuf,
    /// How to price a model file (ignored for workload JSON, where giving them is an error).
    #[command(flatten)]
    pub model: costmodel_cmds::CostFlags,
    /// Placement method (`auto`: the exact DP when it fits the time limit, else a
    /// coarsened DP with refinement, then the IP; always a plan with its bound and gap).
    #[arg(long, default_value = "auto")]
    pub method: String,
    /// Coarsening for --method auto: auto (when the exact DP does not fit), off (exact DP
    /// only), layers (by layerId).
    #[arg(long, value_enum, value_name = "MODE")]
    pub coarsen: Option<CoarsenArg>,
    /// --method auto: run the DP on the finest coarse level with at most N clusters (1 …).
    #[arg(long, value_name = "N", value_parser = parse_count)]
    pub coarsen_target: Option<usize>,
    /// What to minimise.
    #[arg(long, value_enum, default_value = "throughput")]
    pub objective: ObjectiveArg,
    /// Allow non-contiguous splits (an accelerator may hold several pieces). Implied by the
    /// methods that only make non-contiguous plans (local-search, partitioner).
    #[arg(long)]
    pub non_contiguous: bool,
    /// Latency: the most contiguous pieces one accelerator may hold (at least 1; more than
    /// the nodes is clamped to them).
    #[arg(long, default_value_t = 1, value_name = "Q", value_parser = parse_count)]
    pub pieces: usize,
    #[command(flatten)]
    pub devices: DeviceFlags,
    /// Time limit, e.g. 60s, 2m (auto: default 60s; IP, local search: none; 1ms to 1e9s).
    #[arg(long, value_parser = parse_seconds, value_name = "TIME")]
    pub time_limit: Option<f64>,
    /// Relative MIP gap to stop at, e.g. 1% or 0.01 (IP; 0 to 100%).
    #[arg(long, value_parser = parse_fraction, value_name = "GAP")]
    pub gap: Option<f64>,
    /// Solver threads (IP; more than the cores is clamped to them).
    #[arg(long, value_parser = parse_count)]
    pub threads: Option<usize>,
    #[command(flatten)]
    pub search: SearchFlags,
    #[command(flatten)]
    pub piper: piper_cmd::PiperFlags,
    /// IP formulation experiment (docs/ip.md), repeatable: nosym, nowarm, noreach,
    /// nocapacity, nobound, boundafter, positions. Not for normal use.
    #[arg(long, value_name = "WORD", value_delimiter = ',', value_parser = settings::parse_ip_experiment)]
    pub ip_experiment: Vec<IpExperiment>,
    /// A HiGHS option for the IP, NAME=VALUE (e.g. presolve=off), repeatable. Not for
    /// normal use.
    #[arg(long, value_name = "NAME=VALUE", value_parser = settings::parse_highs_option)]
    pub highs_option: Vec<(String, String)>,
    /// The split to score with --method expert (placement JSON, MODEL.md shape).
    #[arg(long, value_name = "FILE")]
    pub split: Option<PathBuf>,
    /// Write the placement (MODEL.md shape) to this file, atomically.
    #[arg(long, value_name = "PLAN.json")]
    pub out: Option<PathBuf>,
    /// Where stage boundaries may fall: `layer` keeps every layerId block on one device
    /// (alias --split-at blocks). [default: layer with --export, else operator]
    #[arg(long, value_enum, alias = "split-at")]
    pub granularity: Option<export_cmds::Granularity>,
    /// Also write the plan for a framework: torch, torch-json, deepspeed, megatron, vllm,
    /// accelerate; with --parallel 3d: megatron, deepspeed, torchtitan, vllm.
    #[arg(long, value_name = "FORMAT")]
    pub export: Option<String>,
    /// Where --export writes, atomically (default: stdout, after the table).
    #[arg(long, value_name = "FILE", requires = "export")]
    pub export_out: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write the visual report (one self-contained HTML file) here.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    #[command(flatten)]
    pub schedule: simulate::PlanScheduleFlags,
    #[command(flatten)]
    pub parallel: parallel_cmd::ParallelFlags,
    /// The scaling curve: the optimum with at most n accelerators for every n from 1 to the
    /// cluster's size (a workload without a cluster: its device set as one machine).
    #[arg(long)]
    pub sweep: bool,
    /// The cheapest accelerator mix of the cluster whose time per sample is at most this
    /// many ms (prices per type: the profiles' or the cluster file's price_per_hour).
    #[arg(long, value_name = "MS", value_parser = settings::parse_target_tps)]
    pub target_tps: Option<f64>,
    /// The fastest accelerator mix of the cluster costing at most this much per hour.
    #[arg(long, value_name = "PRICE", value_parser = settings::parse_nonnegative)]
    pub budget: Option<f64>,
    /// With --sweep, --target-tps or --budget: also draw the sweep (with --sweep) or the
    /// price frontier (otherwise) as an SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Workload JSON file.
    pub workload: PathBuf,
    /// What to compare on (the table shows TPS and latency either way).
    #[arg(long, value_enum, default_value = "throughput")]
    pub objective: ObjectiveArg,
    /// Latency: the most contiguous pieces one accelerator may hold.
    #[arg(long, default_value_t = 1, value_name = "Q", value_parser = parse_count)]
    pub pieces: usize,
    #[command(flatten)]
    pub devices: DeviceFlags,
    /// An expert split to include (placement JSON, MODEL.md shape).
    #[arg(long, value_name = "FILE")]
    pub split: Option<PathBuf>,
    /// Time limit of each method run (the IP's, and local search's), e.g. 60s.
    #[arg(long, value_parser = parse_seconds, value_name = "TIME", default_value = "60s")]
    pub ip_time_limit: f64,
    /// Time limit of the whole comparison, e.g. 5m: each method gets at most an equal share
    /// of what is left; methods not reached are listed as skipped (1ms to 1e9s).
    #[arg(long, value_parser = parse_seconds, value_name = "TIME")]
    pub time_limit: Option<f64>,
    #[command(flatten)]
    pub search: SearchFlags,
    /// Print JSON instead of a table.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print a Markdown table.
    #[arg(long)]
    pub markdown: bool,
    #[command(flatten)]
    pub parallel: parallel_cmd::CompareParallelFlags,
}

#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// The published workloads: a folder with throughput/, latency/ and experts/.
    pub dir: PathBuf,
    /// Where to write the Markdown page.
    #[arg(long, value_name = "FILE", default_value = "docs/results.md")]
    pub out: PathBuf,
    /// Time limit of each method run (the IP's, and local search's), e.g. 60s.
    #[arg(long, value_parser = parse_seconds, value_name = "TIME", default_value = "60s")]
    pub ip_time_limit: f64,
    /// Memory the DP may use for its ideals and table, bytes or with a unit: 4GiB
    /// (1 MiB to 1 PiB) [default: 1.5 GiB].
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub memory_budget: Option<f64>,
    /// Random seed (local search, partitioner).
    #[arg(long, default_value_t = 1, value_parser = parse_count)]
    pub seed: usize,
    /// Restarts (local search; 1 to 1,000,000).
    #[arg(long, default_value_t = 10, value_parser = parse_count)]
    pub restarts: usize,
    /// Workloads run at a time (1 to 1024). [default: the number of cores]
    #[arg(long, value_name = "N", value_parser = parse_count)]
    pub jobs: Option<usize>,
    /// Run rl and genetic with seeds 1..=N on every workload's contiguous problem and on
    /// the cluster instances, for their spread over seeds (1 to 100).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = parse_count)]
    pub seeds: usize,
}

#[derive(Args, Debug)]
pub struct ScoreArgs {
    /// Workload JSON file.
    pub workload: PathBuf,
    /// Placement JSON file (MODEL.md shape; unlisted nodes follow their colour class).
    #[arg(
        required_unless_present = "from_export",
        conflicts_with = "from_export"
    )]
    pub placement: Option<PathBuf>,
    /// Score a framework's split instead: FORMAT (torch, torch-json, deepspeed, megatron,
    /// vllm, accelerate) and the FILE in that form. With --parallel 3d: a 3D layout
    /// (megatron, deepspeed, torchtitan, vllm) of the Hugging Face config.json given.
    #[arg(long, num_args = 2, value_names = ["FORMAT", "FILE"])]
    pub from_export: Option<Vec<String>>,
    /// Which objective to report as "the" objective.
    #[arg(long, value_enum, default_value = "throughput")]
    pub objective: ObjectiveArg,
    #[command(flatten)]
    pub devices: DeviceFlags,
    /// Score on a cluster: `MxNxTYPE` terms joined by `+`, or a cluster TOML file
    /// (docs/cluster.md). Replaces the workload's device set; devices are numbered
    /// accelerators machine by machine, then CPU cores.
    #[arg(long, value_name = "SPEC")]
    pub cluster: Option<String>,
    /// Device profile files (JSON) for the types of --cluster; they take precedence over
    /// the built-in profiles.
    #[arg(long, value_name = "FILE")]
    pub device_file: Vec<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub parallel: parallel_cmd::ScoreParallelFlags,
}

/// A failure of one command, with its exit status.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    Internal(String),
    /// `score`: the placement breaks a rule (exit 1).
    #[error("{0}")]
    Rejected(String),
    #[error("broken pipe")]
    BrokenPipe,
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Input(_) => 2,
            CliError::Internal(_) => 3,
            CliError::Rejected(_) => 1,
            CliError::BrokenPipe => 0,
        }
    }
}

impl From<IoError> for CliError {
    fn from(e: IoError) -> Self {
        CliError::Input(e.to_string())
    }
}

impl From<WorkloadError> for CliError {
    fn from(e: WorkloadError) -> Self {
        CliError::Input(format!("invalid workload: {e}"))
    }
}

impl From<SolveError> for CliError {
    fn from(e: SolveError) -> Self {
        match e {
            SolveError::Check(_) | SolveError::Solver(_) => CliError::Internal(e.to_string()),
            _ => CliError::Input(e.to_string()),
        }
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            CliError::BrokenPipe
        } else {
            CliError::Internal(format!("writing output: {e}"))
        }
    }
}

/// A JSON document as every command prints and writes it: pretty-printed, one newline
/// after it.
pub(crate) fn json_text(value: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(value).expect("json") + "\n"
}

/// The command line: every flag that takes a value also takes a negative number, so
/// `--pieces -1` reaches the flag's own check and its range message ("must be at least
/// 1") instead of clap's "unexpected argument '-1'".
pub fn command() -> clap::Command {
    fn negatives(cmd: clap::Command) -> clap::Command {
        // Set on the command, not on its arguments: a deferred command has none yet, and
        // clap gives the setting to each argument that takes a value when it builds the
        // command (the setting `Arg::allow_negative_numbers` replaced, still clap 4's).
        #[allow(deprecated)]
        cmd.allow_negative_numbers(true).mut_subcommands(negatives)
    }
    negatives(<Cli as clap::CommandFactory>::command())
}

/// Entry point of the binary: runs the command line and returns the exit status. clap's
/// own messages (`--help`, `--version`, a usage error) are printed here with clap's status
/// (0, or 2 for a usage error) rather than by `clap::Error::exit`, so that the binary
/// alone decides how the process ends (src/main.rs).
pub fn main() -> u8 {
    let parsed = command()
        .try_get_matches()
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return u8::try_from(e.exit_code()).unwrap_or(2);
        }
    };
    match run(cli) {
        Ok(()) => 0,
        Err(CliError::BrokenPipe) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

/// Runs one command.
pub fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Plan(args) => run_plan(*args),
        Command::Score(args) => run_score(args),
        Command::Compare(args) => run_compare(args),
        Command::Reproduce(args) => run_reproduce(args),
        Command::Simulate(args) => simulate::run_simulate(args),
        Command::Bench(args) => bench::run_bench(args),
        Command::Export(args) => export_cmds::run_export(args),
        Command::Cost(command) => costmodel_cmds::run_cost_command(command),
    }
}

/// Reads a workload file (one without a cluster section) and applies the device overrides.
pub fn load_workload(
    path: &std::path::Path,
    devices: &DeviceOverrides,
) -> Result<crate::model::Workload, CliError> {
    let w = read_workload(path)?;
    if w.cluster().is_some() {
        return Err(CliError::Input(format!(
            "{}: the workload has a cluster section; only plan and score work on a cluster so far",
            path.display()
        )));
    }
    devices.apply(w)
}

/// The workload of `plan`/`score`: a workload file, on `--cluster` when given (which then
/// replaces its device set and cluster section).
fn workload_with_cluster(
    path: &std::path::Path,
    devices: &DeviceOverrides,
    cluster: Option<&str>,
    device_files: &[PathBuf],
) -> Result<crate::model::Workload, CliError> {
    let w = workload_on_cluster_flag(path, devices, cluster, device_files)?;
    if let Some(c) = w.cluster() {
        print_notes(c.notes());
    }
    Ok(w)
}

fn workload_on_cluster_flag(
    path: &std::path::Path,
    devices: &DeviceOverrides,
    cluster: Option<&str>,
    device_files: &[PathBuf],
) -> Result<crate::model::Workload, CliError> {
    match cluster {
        Some(spec) => {
            if *devices != DeviceOverrides::default() {
                return Err(CliError::Input("--cluster replaces the device set: --accelerators, --cpus and --memory do not apply".into()));
            }
            costmodel_cmds::workload_on_cluster(read_workload(path)?, spec, device_files)
        }
        None => {
            let w = read_workload(path)?;
            if w.cluster().is_none() {
                return devices.apply(w);
            }
            if *devices != DeviceOverrides::default() {
                return Err(CliError::Input(format!(
                    "{}: the workload has a cluster section; --accelerators, --cpus and --memory apply to MODEL.md's device set (edit the cluster, or give --cluster)",
                    path.display()
                )));
            }
            Ok(w)
        }
    }
}

/// The error of a plan without a placement: no placement exists (infeasible), or none was
/// found within the limits.
fn no_plan_error(outcome: &Outcome) -> CliError {
    CliError::Input(match &outcome.status {
        Status::Infeasible { reason, .. } => format!("no feasible placement: {reason}"),
        _ => status_text(outcome),
    })
}

fn print_notes(notes: &[String]) {
    for note in notes {
        eprintln!("note: {note}");
    }
}

fn run_plan(args: PlanArgs) -> Result<(), CliError> {
    let started = std::time::Instant::now();
    if args.parallel.parallel.is_some() {
        return parallel_cmd::run(&args, started);
    }
    parallel_cmd::check_unused(&args.parallel)?;
    if let Some(result) = piper_cmd::dispatch_plan(&args) {
        return result;
    }
    let mut settings = PlanSettings::new(&args)?;
    if let Some(out) = &args.out {
        check_output_target(out)?;
    }
    let w = plan_workload(&args, &settings)?;
    // From here every phase of every method polls one budget: the time since the command
    // began, the memory grown since the input was read, and Ctrl-C.
    solve::budget::set_run_limits(
        started,
        settings.limits.time_limit_s,
        settings.limits.memory_budget_bytes,
    );
    sigint_setup();
    if w.cluster().is_some() {
        refuse_schedules_on_cluster(&args)?;
        return cluster_cmd::run_plan(&args, &settings, &w);
    }
    if args.plot.is_some() {
        return Err(CliError::Input(
            "--plot draws the result of --sweep, --target-tps or --budget".into(),
        ));
    }
    let (w, objective) =
        fit_to_workload(w, settings.objective, settings.method, &mut settings.notes)?;
    settings.objective = objective;
    let method: Box<dyn Method> = match (&settings.split, settings.method) {
        (Some(path), _) => Box::new(Expert::new(
            read_placement(path, &w)?,
            path.display().to_string(),
        )),
        (None, MethodId::Auto) => Box::new(Auto::new(settings.coarsen)),
        (None, id) => solve::method(id),
    };
    print_notes(&settings.notes);
    let problem = settings.problem(&w);
    let granularity = args.granularity.unwrap_or(if args.export.is_some() {
        export_cmds::Granularity::Layer
    } else {
        export_cmds::Granularity::Operator
    });
    let layers = match granularity {
        export_cmds::Granularity::Layer => Some(export_cmds::layers_of(&w)?),
        export_cmds::Granularity::Operator => None,
    };
    if settings.method.uses_milp_solver() {
        ip_session_setup();
    }
    let plan = match &layers {
        Some(layers) => solve::layer_granular::plan_by_layers(method.as_ref(), &problem, layers),
        None => solve::plan(method.as_ref(), &problem),
    };
    if PROGRESS_SHOWN.swap(false, std::sync::atomic::Ordering::SeqCst) {
        eprintln!();
    }
    let mut plan = plan?;
    plan.outcome.stats.notes.splice(0..0, settings.notes);
    let (Some(placement), Some(evaluation)) = (&plan.outcome.placement, &plan.evaluation) else {
        return Err(no_plan_error(&plan.outcome));
    };
    let report = match &args.report {
        Some(_) => Some(simulate::plan_report(
            &args.workload,
            &w,
            placement,
            evaluation,
            Some(&plan.outcome),
            &args.schedule.simulated(),
        )?),
        None => None,
    };
    let names = match &layers {
        Some(l) => l.clone(),
        None => export_cmds::layers_for_names(&w),
    };
    let export = match &args.export {
        Some(format) => {
            let export_layers = match &layers {
                Some(l) => l.clone(),
                None => export_cmds::layers_of(&w)?,
            };
            Some((
                format,
                export_cmds::export_text(format, &w, &export_layers, placement)?,
            ))
        }
        None => None,
    };
    if let Some(out) = &args.out {
        let file = placement_json(&w, placement, evaluation, problem.objective);
        write_atomically(out, &json_text(&file))?;
    }
    if let (Some(path), Some(page)) = (&args.report, &report) {
        write_atomically(path, page)?;
    }
    if let (Some(out), Some((_, text))) = (&args.export_out, &export) {
        write_atomically(out, text)?;
    }
    print_plan(
        &args,
        &w,
        &plan,
        &problem,
        layers.is_some(),
        &names,
        &export,
    )
}

/// The workload of `plan`: a model file priced, or a workload JSON with its cluster; a
/// cluster of MODEL.md's devices when --sweep, --target-tps or --budget needs one.
fn plan_workload(
    args: &PlanArgs,
    settings: &PlanSettings,
) -> Result<crate::model::Workload, CliError> {
    let w = if costmodel_cmds::is_model_file(&args.workload) {
        costmodel_cmds::load_model_workload(&args.workload, &args.model, &settings.devices)?
    } else {
        costmodel_cmds::check_no_cost_flags(&args.workload, &args.model)?;
        workload_with_cluster(
            &args.workload,
            &settings.devices,
            args.model.cluster.as_deref(),
            &args.model.device_file,
        )?
    };
    let w = if w.cluster().is_none()
        && (args.sweep || args.target_tps.is_some() || args.budget.is_some())
    {
        let cluster = crate::model::Cluster::model_md(w.devices(), &w.platform().reference);
        w.with_platform(crate::model::Platform {
            cluster: Some(cluster),
            ..w.platform().clone()
        })?
    } else {
        w
    };
    Ok(w)
}

/// The cluster planner does not price a schedule's memory: --recompute and --schedule
/// are refused with --cluster.
fn refuse_schedules_on_cluster(args: &PlanArgs) -> Result<(), CliError> {
    if let Some(r) = args.schedule.recompute {
        return Err(CliError::Input(format!(
            "--recompute {r}: the cluster planner does not price a schedule's memory (plan without --cluster)"
        )));
    }
    if let Some(s) = args.schedule.schedule {
        return Err(CliError::Input(format!(
            "--schedule {s}: the cluster planner does not price a schedule's memory yet (plan without --cluster, or without --schedule for MODEL.md's one sample in flight)"
        )));
    }
    Ok(())
}

/// Prints a plan: its JSON, or the table, the layer holdings, the pipeline memory and
/// where the files went.
fn print_plan(
    args: &PlanArgs,
    w: &crate::model::Workload,
    plan: &solve::Plan,
    problem: &solve::Problem,
    layer_granular: bool,
    names: &crate::model::layers::Layers,
    export: &Option<(&String, String)>,
) -> Result<(), CliError> {
    let (Some(placement), Some(evaluation)) = (&plan.outcome.placement, &plan.evaluation) else {
        return Err(no_plan_error(&plan.outcome));
    };
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let evaluation = EvaluationJson::of(w, placement, problem.objective, evaluation);
        let claim = ClaimJson::of(&plan.outcome, plan.outcome.method.name());
        let holdings = crate::report::layers::holdings_json(w, names, placement);
        let v = PlanJson {
            peak_memory_bytes: peak_memory_bytes(),
            export: export.as_ref().map(|(format, text)| ExportJson {
                format: format.to_string(),
                text: text.clone(),
            }),
            pipeline: problem
                .pipeline
                .as_ref()
                .zip(plan.pipeline_memory.as_ref())
                .map(|(pipeline, memory)| PipelineJson::of(pipeline, memory)),
            ..PlanJson::new(evaluation, claim, holdings)
        };
        write!(stdout, "{}", json_text(&v))?;
    } else {
        write!(
            stdout,
            "{}",
            plan_table(w, Some(&plan.outcome), problem.objective, evaluation)
        )?;
        if layer_granular {
            writeln!(
                stdout,
                "\ngranularity: layer ({}; stage boundaries only between layers)",
                crate::report::layers::layers_summary(names)
            )?;
        } else {
            writeln!(stdout)?;
        }
        write!(
            stdout,
            "{}",
            crate::report::layers::holdings_table(w, names, placement, evaluation)
        )?;
        if let (Some(pipeline), Some(memory)) = (&problem.pipeline, &plan.pipeline_memory) {
            write!(
                stdout,
                "{}",
                pipeline_memory_text(pipeline, memory, w.devices())
            )?;
        }
        if let Some(out) = &args.out {
            writeln!(stdout, "placement written to {}", out.display())?;
        }
        if let Some(path) = &args.report {
            writeln!(stdout, "report written to {}", path.display())?;
        }
        match (&export, &args.export_out) {
            (Some((format, _)), Some(out)) => {
                writeln!(stdout, "{format} export written to {}", out.display())?
            }
            (Some((format, text)), None) => write!(stdout, "\n--- {format} export ---\n{text}")?,
            _ => {}
        }
    }
    stdout.flush()?;
    Ok(())
}

/// The accelerators' memory under the planned schedule, one line each.
fn pipeline_memory_text(
    pipeline: &Pipeline,
    memory: &[DeviceMemory],
    devices: &DeviceSet,
) -> String {
    let m = pipeline.micro_batches;
    let limit_bytes = devices.memory_per_accelerator_bytes;
    if let Schedule::Interleaved { chunks } = pipeline.schedule {
        return interleaved_memory_text(
            pipeline,
            chunks,
            devices.accelerators,
            memory,
            limit_bytes,
        );
    }
    let mut out = format!(
        "\nmemory under {} with {m} micro-batches (resident + in flight x stash, limit {}):\n",
        pipeline.schedule,
        human_bytes(limit_bytes)
    );
    for d in memory.iter().filter(|d| d.device.is_accelerator()) {
        let parts = if d.recomputes {
            format!(
                "{} + {} + {} x {} input = {}   (recomputes: keeps its inputs, its stash only during a backward pass)",
                human_bytes(d.resident_bytes),
                human_bytes(d.stash_bytes),
                d.in_flight,
                human_bytes(d.input_bytes),
                human_bytes(d.bytes)
            )
        } else {
            format!(
                "{} + {} x {} = {}",
                human_bytes(d.resident_bytes),
                d.in_flight,
                human_bytes(d.stash_bytes),
                human_bytes(d.bytes)
            )
        };
        out += &format!(
            "{:<8}  stage {:>3}  {parts}\n",
            d.device.to_string(),
            d.stage
        );
    }
    out
}

/// The accelerators' chunks and memory under the interleaved schedule, one line each:
/// chunk c of accelerator d is stage c·p + d.
fn interleaved_memory_text(
    pipeline: &Pipeline,
    chunks: usize,
    p: usize,
    memory: &[DeviceMemory],
    limit_bytes: f64,
) -> String {
    let mut out = format!(
        "\nchunks and memory under {} with {} micro-batches (chunk c of acc d is stage c x {p} + d; resident + the peak of the chunks' stashes in the schedule's order, limit {}):\n",
        pipeline.schedule,
        pipeline.micro_batches,
        human_bytes(limit_bytes)
    );
    for d in memory {
        let parts: Vec<String> = (0..chunks)
            .map(|c| {
                format!(
                    "stage {}: {} nodes, stash {}",
                    c * p + d.stage,
                    d.chunk_nodes.get(c).copied().unwrap_or(0),
                    human_bytes(d.chunk_stash_bytes.get(c).copied().unwrap_or(0.0))
                )
            })
            .collect();
        let recomputes = if d.recomputes {
            let inputs: Vec<String> = d
                .chunk_input_bytes
                .iter()
                .map(|&b| human_bytes(b))
                .collect();
            format!(
                "   (recomputes: keeps each chunk's input ({}) per micro-batch in flight, a chunk's stash only during its backward pass)",
                inputs.join(", ")
            )
        } else {
            String::new()
        };
        out += &format!(
            "{:<8}  {}   {} + peak {} = {}{recomputes}\n",
            d.device.to_string(),
            parts.join(" | "),
            human_bytes(d.resident_bytes),
            human_bytes(d.bytes - d.resident_bytes),
            human_bytes(d.bytes)
        );
    }
    out
}

fn run_compare(args: CompareArgs) -> Result<(), CliError> {
    let started = std::time::Instant::now();
    if args.parallel.layout.parallel.is_some() {
        return parallel_cmd::run_compare(&args, started);
    }
    parallel_cmd::check_compare_unused(&args.parallel)?;
    let settings = CompareSettings::new(&args)?;
    let w = load_workload(&args.workload, &settings.devices)?;
    let mut list: Vec<Box<dyn Method>> = solve::methods();
    if let Some(path) = &args.split {
        let split = read_placement(path, &w)?;
        for m in list.iter_mut().filter(|m| m.id() == MethodId::Expert) {
            *m = Box::new(Expert::new(split.clone(), path.display().to_string()));
        }
    }
    // Each method runs on the device set clamped to the node count (solve::plan); say so once.
    let problem = Problem {
        workload: &w,
        devices: crate::solve::Devices::of(&w),
        objective: settings.objective,
        contiguous: true,
        limits: settings.limits.clone(),
        pipeline: None,
    };
    print_notes(&solve::clamp_to_nodes(&problem)?.notes);
    solve::budget::set_run_limits(
        started,
        settings.limits.time_limit_s,
        settings.limits.memory_budget_bytes,
    );
    sigint_setup();
    let comparison = solve::compare::compare_within(
        &w,
        settings.objective,
        &settings.limits,
        &list,
        false,
        &settings.budget(),
    );
    let mut stdout = std::io::stdout().lock();
    if args.json {
        write!(stdout, "{}", json_text(&comparison_json(&comparison)))?;
    } else if args.markdown {
        write!(stdout, "{}", comparison_markdown(&comparison))?;
    } else {
        writeln!(
            stdout,
            "workload: {}   nodes: {}   accelerators: {} x {}   cpus: {}",
            args.workload.display(),
            w.len(),
            w.devices().accelerators,
            human_bytes(w.devices().memory_per_accelerator_bytes),
            w.devices().cpus
        )?;
        write!(stdout, "{}", comparison_text(&comparison))?;
    }
    stdout.flush()?;
    Ok(())
}

fn run_reproduce(args: ReproduceArgs) -> Result<(), CliError> {
    let settings = ReproduceSettings::new(&args)?;
    if let Some(parent) = args.out.parent() {
        if !parent.as_os_str().is_empty() {
            std::fs::create_dir_all(parent)
                .map_err(|e| CliError::Input(format!("{}: {e}", parent.display())))?;
        }
    }
    check_output_target(&args.out)?;
    let command = format!(
        "dnnplace reproduce {} --ip-time-limit {}s --seed {} --restarts {} --jobs {} --seeds {}",
        args.dir.display(),
        args.ip_time_limit,
        args.seed,
        args.restarts,
        settings.jobs,
        settings.seeds
    );
    let started = std::time::Instant::now();
    let run = crate::experiments::reproduce::reproduce(
        &args.dir,
        &settings.limits,
        settings.jobs,
        settings.seeds,
        |task| {
            eprintln!("[{:>6.1} s] {task}", started.elapsed().as_secs_f64());
        },
    )?;
    let page = crate::report::reproduce::results_page(&run, &settings.limits, &command);
    let folder = args.out.parent().unwrap_or(std::path::Path::new(""));
    let charts = crate::report::reproduce::quality_charts(&run);
    if !charts.is_empty() {
        let dir = folder.join(crate::report::reproduce::CHARTS_DIR);
        std::fs::create_dir_all(&dir)
            .map_err(|e| CliError::Input(format!("{}: {e}", dir.display())))?;
    }
    for (path, svg) in &charts {
        write_atomically(&folder.join(path), svg)?;
    }
    write_atomically(&args.out, &page)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(
        stdout,
        "wrote {} in {:.1} s",
        args.out.display(),
        started.elapsed().as_secs_f64()
    )?;
    stdout.flush()?;
    Ok(())
}

static PROGRESS_SHOWN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// For `plan` and `compare`: Ctrl-C stops the run (every method polls the budget; the IP and
/// local search print the best plan so far, the DP, which has no plan before its last level,
/// says where it stopped; a second Ctrl-C exits at once with status 130).
pub(crate) fn sigint_setup() {
    extern "C" fn on_sigint(_: libc::c_int) {
        if solve::budget::interrupt_requested() {
            // SAFETY: _exit is async-signal-safe.
            unsafe { libc::_exit(130) };
        }
        solve::budget::request_interrupt();
    }
    solve::budget::clear_interrupt();
    // SAFETY: the handler only touches an atomic and calls _exit.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
}

/// For `--method ip`: progress goes to stderr when it is a terminal.
fn ip_session_setup() {
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        fn show(p: &solve::milp::highs::Progress) {
            let gap = if p.incumbent.is_finite() && p.incumbent.abs() > 0.0 {
                format!(
                    "{:.3}%",
                    100.0 * (p.incumbent - p.bound).max(0.0) / p.incumbent.abs()
                )
            } else {
                "-".into()
            };
            PROGRESS_SHOWN.store(true, std::sync::atomic::Ordering::SeqCst);
            eprint!(
                "\r[ip] {:7.1} s  incumbent {:<12.6}  bound {:<12.6}  gap {gap:<9}  nodes {}   ",
                p.elapsed_s, p.incumbent, p.bound, p.nodes
            );
        }
        solve::milp::highs::set_progress_hook(Some(show));
    }
}

fn run_score(args: ScoreArgs) -> Result<(), CliError> {
    if args.parallel.parallel.is_some() {
        return parallel_cmd::run_score(&args);
    }
    parallel_cmd::check_score_unused(&args)?;
    // The device set is taken as given: a placement file names devices by index.
    let w = workload_with_cluster(
        &args.workload,
        &DeviceOverrides::new(&args.devices),
        args.cluster.as_deref(),
        &args.device_file,
    )?;
    let placement = match (&args.placement, &args.from_export) {
        (_, Some(pair)) => {
            export_cmds::placement_from_export(&w, &pair[0], std::path::Path::new(&pair[1]))?
        }
        (Some(path), None) => read_placement(path, &w)?,
        (None, None) => {
            return Err(CliError::Input(
                "give a placement file or --from-export FORMAT FILE".into(),
            ))
        }
    };
    if w.cluster().is_some() {
        return cluster_cmd::run_score_on_cluster(&args, &w, &placement);
    }
    let objective = match args.objective {
        ObjectiveArg::Throughput => Objective::Throughput,
        ObjectiveArg::Sync => Objective::Sync,
        ObjectiveArg::Latency => Objective::Latency { pieces: usize::MAX },
        ObjectiveArg::Iteration => {
            return Err(CliError::Input(
                "--objective iteration scores parallel layouts: use `plan --parallel 3d`".into(),
            ))
        }
    };
    let latency = matches!(objective, Objective::Latency { .. });
    // `score` always reports latency, however long the greedy cut takes.
    let scoring = if latency {
        LatencyScoring::Rules
    } else {
        LatencyScoring::Always
    };
    let e = evaluate_with(&w, &placement, scoring);
    let placement = if latency {
        e.attach_cut(placement)
    } else {
        placement
    };
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let v = EvaluationJson::of(&w, &placement, objective, &e);
        write!(stdout, "{}", json_text(&v))?;
    } else {
        write!(stdout, "{}", plan_table(&w, None, objective, &e))?;
        writeln!(stdout)?;
        let names = export_cmds::layers_for_names(&w);
        write!(
            stdout,
            "{}",
            crate::report::layers::holdings_table(&w, &names, &placement, &e)
        )?;
    }
    stdout.flush()?;
    match e.violations.len() {
        0 => Ok(()),
        n => Err(CliError::Rejected(format!(
            "the placement breaks {n} rule{} (listed in the output); first: {}",
            if n == 1 { "" } else { "s" },
            e.violations[0]
        ))),
    }
}

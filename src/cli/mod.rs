//! The command line: raw flags (clap) → validated settings → library calls → one report.
//!
//! Exit status: 0 success (a closed output pipe counts as success); 2 bad input (an
//! unreadable or invalid workload or placement, a bad flag, or an instance with no
//! feasible placement, with the reason); 3 an internal check failed (a bug: a solver's
//! plan that the scorer rejects).

pub mod costmodel_cmds;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub mod bench;

use crate::io::{read_placement, read_workload, write_atomically, IoError};
use crate::model::{parse_bytes, DeviceSet, Workload, WorkloadError};
use crate::report::{comparison_json, comparison_markdown, comparison_text, evaluation_json, placement_json, plan_table};
use crate::score::evaluate;
use crate::solve::baselines::expert::Expert;
use crate::solve::{self, Limits, Objective, Problem, SolveError, Status};

#[derive(Parser, Debug)]
#[command(name = "dnnplace", version, about = "Optimal device placement of DNN operator graphs")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Compute a placement of a workload.
    Plan(PlanArgs),
    /// Score a placement file against a workload: validity, loads, TPS, latency.
    Score(ScoreArgs),
    /// Run every applicable method on a workload and print one comparison table.
    Compare(CompareArgs),
    /// Regenerate the comparison over every published workload (docs/results.md).
    Reproduce(ReproduceArgs),
    /// Time the DP on workload files (each in its own process): time, ideals, pairs, peak memory.
    Bench(bench::BenchArgs),
    /// Cost models: `devices`, `import`, `generate` (see costmodel_cmds).
    #[command(flatten)]
    Cost(costmodel_cmds::CostCommand),
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum ObjectiveArg {
    /// Time-Per-Sample (max device load), pipelined throughput.
    Throughput,
    /// Synchronous pipelines: max forward load + max backward load.
    Sync,
    /// Single-sample latency.
    Latency,
}

/// Knobs of the search methods, shared by `plan` and `compare`.
#[derive(Args, Debug, Clone)]
pub struct SearchFlags {
    /// Largest number of ideals the DP may enumerate.
    #[arg(long, default_value_t = 2_000_000)]
    pub max_ideals: usize,
    /// Random seed (local search, partitioner).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Restarts (local search).
    #[arg(long, default_value_t = 10)]
    pub restarts: usize,
}

/// Flags that override the workload's device set.
#[derive(Args, Debug, Clone, Default)]
pub struct DeviceFlags {
    /// Number of accelerators k (overrides maxFPGAs).
    #[arg(long, value_name = "K")]
    pub accelerators: Option<usize>,
    /// Number of CPU cores ℓ (overrides maxCPUs).
    #[arg(long, value_name = "L")]
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
    /// Placement method.
    #[arg(long, default_value = "dp")]
    pub method: String,
    /// What to minimise.
    #[arg(long, value_enum, default_value = "throughput")]
    pub objective: ObjectiveArg,
    /// Allow non-contiguous splits (an accelerator may hold several pieces).
    #[arg(long)]
    pub non_contiguous: bool,
    /// Latency: the most contiguous pieces one accelerator may hold.
    #[arg(long, default_value_t = 1, value_name = "Q")]
    pub pieces: usize,
    #[command(flatten)]
    pub devices: DeviceFlags,
    /// Time limit, e.g. 60s, 2m (IP, local search).
    #[arg(long, value_parser = parse_seconds, value_name = "TIME")]
    pub time_limit: Option<f64>,
    /// Relative MIP gap to stop at, e.g. 1% or 0.01 (IP).
    #[arg(long, value_parser = parse_fraction, value_name = "GAP")]
    pub gap: Option<f64>,
    /// Solver threads (IP).
    #[arg(long)]
    pub threads: Option<usize>,
    #[command(flatten)]
    pub search: SearchFlags,
    /// The split to score with --method expert (placement JSON, MODEL.md shape).
    #[arg(long, value_name = "FILE")]
    pub split: Option<PathBuf>,
    /// Write the placement (MODEL.md shape) to this file, atomically.
    #[arg(long, value_name = "PLAN.json")]
    pub out: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Workload JSON file.
    pub workload: PathBuf,
    /// What to compare on (the table shows TPS and latency either way).
    #[arg(long, value_enum, default_value = "throughput")]
    pub objective: ObjectiveArg,
    /// Latency: the most contiguous pieces one accelerator may hold.
    #[arg(long, default_value_t = 1, value_name = "Q")]
    pub pieces: usize,
    #[command(flatten)]
    pub devices: DeviceFlags,
    /// An expert split to include (placement JSON, MODEL.md shape).
    #[arg(long, value_name = "FILE")]
    pub split: Option<PathBuf>,
    /// Time limit of each method run (the IP's, and local search's), e.g. 60s.
    #[arg(long, value_parser = parse_seconds, value_name = "TIME", default_value = "60s")]
    pub ip_time_limit: f64,
    #[command(flatten)]
    pub search: SearchFlags,
    /// Print JSON instead of a table.
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Print a Markdown table.
    #[arg(long)]
    pub markdown: bool,
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
    /// Random seed (local search, partitioner).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Restarts (local search).
    #[arg(long, default_value_t = 10)]
    pub restarts: usize,
    /// Workloads run at a time. [default: the number of cores]
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
}

#[derive(Args, Debug)]
pub struct ScoreArgs {
    /// Workload JSON file.
    pub workload: PathBuf,
    /// Placement JSON file (MODEL.md shape; unlisted nodes follow their colour class).
    pub placement: PathBuf,
    /// Which objective to report as "the" objective.
    #[arg(long, value_enum, default_value = "throughput")]
    pub objective: ObjectiveArg,
    #[command(flatten)]
    pub devices: DeviceFlags,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// `60`, `60s`, `2m`, `1h`, `250ms` → seconds.
pub fn parse_seconds(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (number, scale) = if let Some(x) = t.strip_suffix("ms") {
        (x, 1e-3)
    } else if let Some(x) = t.strip_suffix('s') {
        (x, 1.0)
    } else if let Some(x) = t.strip_suffix('m') {
        (x, 60.0)
    } else if let Some(x) = t.strip_suffix('h') {
        (x, 3600.0)
    } else {
        (t, 1.0)
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v * scale),
        _ => Err(format!("'{text}' is not a duration (try 60s, 2m)")),
    }
}

/// `1%` → 0.01, `0.01` → 0.01.
pub fn parse_fraction(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (number, scale) = match t.strip_suffix('%') {
        Some(x) => (x, 0.01),
        None => (t, 1.0),
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v * scale),
        _ => Err(format!("'{text}' is not a gap (try 1% or 0.01)")),
    }
}

/// A failure of one command, with its exit status.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    Internal(String),
    #[error("broken pipe")]
    BrokenPipe,
}

impl CliError {
    pub fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Input(_) => ExitCode::from(2),
            CliError::Internal(_) => ExitCode::from(3),
            CliError::BrokenPipe => ExitCode::SUCCESS,
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

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::BrokenPipe) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

/// Runs one command.
pub fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Plan(args) => run_plan(args),
        Command::Score(args) => run_score(args),
        Command::Compare(args) => run_compare(args),
        Command::Reproduce(args) => run_reproduce(args),
        Command::Bench(args) => bench::run_bench(args),
        Command::Cost(command) => costmodel_cmds::run_cost_command(command),
    }
}

/// Reads a workload and applies device overrides.
pub fn load_workload(path: &std::path::Path, flags: &DeviceFlags) -> Result<Workload, CliError> {
    let w = read_workload(path)?;
    apply_device_flags(w, flags)
}

/// Applies `--accelerators/--cpus/--memory`.
pub fn apply_device_flags(w: Workload, flags: &DeviceFlags) -> Result<Workload, CliError> {
    if flags.accelerators.is_none() && flags.cpus.is_none() && flags.memory.is_none() {
        return Ok(w);
    }
    let d = w.devices();
    let devices = DeviceSet {
        accelerators: flags.accelerators.unwrap_or(d.accelerators),
        cpus: flags.cpus.unwrap_or(d.cpus),
        memory_per_accelerator_bytes: flags.memory.unwrap_or(d.memory_per_accelerator_bytes),
    };
    Ok(w.with_devices(devices)?)
}

fn objective_of(arg: ObjectiveArg, pieces: usize) -> Objective {
    match arg {
        ObjectiveArg::Throughput => Objective::Throughput,
        ObjectiveArg::Sync => Objective::Sync,
        ObjectiveArg::Latency => Objective::Latency { pieces },
    }
}

fn run_plan(args: PlanArgs) -> Result<(), CliError> {
    if args.pieces == 0 {
        return Err(CliError::Input("--pieces must be at least 1".into()));
    }
    let w = if costmodel_cmds::is_model_file(&args.workload) {
        costmodel_cmds::load_model_workload(&args.workload, &args.model, &args.devices)?
    } else {
        costmodel_cmds::check_no_cost_flags(&args.workload, &args.model)?;
        load_workload(&args.workload, &args.devices)?
    };
    let mut method = solve::method_by_name(&args.method).ok_or_else(|| {
        CliError::Input(format!("unknown method '{}'; known: {}", args.method, solve::method_names().join(", ")))
    })?;
    match (&args.split, method.name()) {
        (Some(path), "expert") => {
            let split = read_placement(path, &w)?;
            method = Box::new(Expert::new(split, path.display().to_string()));
        }
        (Some(_), other) => return Err(CliError::Input(format!("--split is for --method expert, not {other}"))),
        (None, _) => {}
    }
    let problem = Problem {
        workload: &w,
        objective: objective_of(args.objective, args.pieces),
        contiguous: !args.non_contiguous,
        limits: Limits {
            time_limit_s: args.time_limit,
            mip_gap: args.gap,
            threads: args.threads,
            max_ideals: args.search.max_ideals,
            seed: args.search.seed,
            restarts: args.search.restarts,
            ..Limits::default()
        },
    };
    if method.name() == "ip" {
        ip_session_setup();
    }
    let plan = solve::plan(method.as_ref(), &problem);
    if PROGRESS_SHOWN.swap(false, std::sync::atomic::Ordering::SeqCst) {
        eprintln!();
    }
    let plan = plan?;
    let (Some(placement), Some(evaluation)) = (&plan.outcome.placement, &plan.evaluation) else {
        let reason = match &plan.outcome.status {
            Status::Infeasible { reason } => reason.clone(),
            other => format!("{other:?}"),
        };
        return Err(CliError::Input(format!("no feasible placement: {reason}")));
    };
    if let Some(out) = &args.out {
        let file = placement_json(&w, placement, evaluation, problem.objective);
        write_atomically(out, &(serde_json::to_string_pretty(&file).expect("json") + "\n"))?;
    }
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let mut v = evaluation_json(&w, placement, Some(&plan.outcome), problem.objective, evaluation);
        v["peakMemoryBytes"] = serde_json::json!(bench::peak_memory_bytes());
        writeln!(stdout, "{}", serde_json::to_string_pretty(&v).expect("json"))?;
    } else {
        write!(stdout, "{}", plan_table(&w, Some(&plan.outcome), problem.objective, evaluation))?;
        if let Some(out) = &args.out {
            writeln!(stdout, "placement written to {}", out.display())?;
        }
    }
    stdout.flush()?;
    Ok(())
}

fn run_compare(args: CompareArgs) -> Result<(), CliError> {
    if args.pieces == 0 {
        return Err(CliError::Input("--pieces must be at least 1".into()));
    }
    let w = load_workload(&args.workload, &args.devices)?;
    let mut list: Vec<Box<dyn solve::Method>> = solve::methods();
    if let Some(path) = &args.split {
        let split = read_placement(path, &w)?;
        for m in list.iter_mut().filter(|m| m.name() == "expert") {
            *m = Box::new(Expert::new(split.clone(), path.display().to_string()));
        }
    }
    let limits = Limits {
        time_limit_s: Some(args.ip_time_limit),
        max_ideals: args.search.max_ideals,
        seed: args.search.seed,
        restarts: args.search.restarts,
        ..Limits::default()
    };
    let comparison = solve::compare::compare(&w, objective_of(args.objective, args.pieces), &limits, &list, false);
    let mut stdout = std::io::stdout().lock();
    if args.json {
        writeln!(stdout, "{}", serde_json::to_string_pretty(&comparison_json(&comparison)).expect("json"))?;
    } else if args.markdown {
        write!(stdout, "{}", comparison_markdown(&comparison))?;
    } else {
        writeln!(
            stdout,
            "workload: {}   nodes: {}   accelerators: {} x {}   cpus: {}",
            args.workload.display(),
            w.len(),
            w.devices().accelerators,
            crate::report::table::human_bytes(w.devices().memory_per_accelerator_bytes),
            w.devices().cpus
        )?;
        write!(stdout, "{}", comparison_text(&comparison))?;
    }
    stdout.flush()?;
    Ok(())
}

fn run_reproduce(args: ReproduceArgs) -> Result<(), CliError> {
    let limits = Limits {
        time_limit_s: Some(args.ip_time_limit),
        seed: args.seed,
        restarts: args.restarts,
        ..Limits::default()
    };
    let command = format!(
        "dnnplace reproduce {} --ip-time-limit {}s --seed {} --restarts {}",
        args.dir.display(),
        args.ip_time_limit,
        args.seed,
        args.restarts
    );
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let started = std::time::Instant::now();
    let page = crate::report::reproduce::reproduce(&args.dir, &limits, &command, jobs, |case| {
        eprintln!("[{:>6.1} s] {}/{}", started.elapsed().as_secs_f64(), case.section, case.name);
    })?;
    if let Some(parent) = args.out.parent() {
        if !parent.as_os_str().is_empty() {
            std::fs::create_dir_all(parent)
                .map_err(|e| CliError::Input(format!("{}: {e}", parent.display())))?;
        }
    }
    write_atomically(&args.out, &page)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "wrote {} in {:.1} s", args.out.display(), started.elapsed().as_secs_f64())?;
    stdout.flush()?;
    Ok(())
}

static PROGRESS_SHOWN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// For `--method ip`: Ctrl-C stops the solve and prints the best plan so far (a second
/// Ctrl-C exits at once with status 130), and progress goes to stderr when it is a terminal.
fn ip_session_setup() {
    extern "C" fn on_sigint(_: libc::c_int) {
        if solve::milp::interrupt_requested() {
            // SAFETY: _exit is async-signal-safe.
            unsafe { libc::_exit(130) };
        }
        solve::milp::request_interrupt();
    }
    solve::milp::clear_interrupt();
    // SAFETY: the handler only touches an atomic and calls _exit.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t);
    }
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        fn show(p: &solve::milp::Progress) {
            let gap = if p.incumbent.is_finite() && p.incumbent.abs() > 0.0 {
                format!("{:.3}%", 100.0 * (p.incumbent - p.bound).max(0.0) / p.incumbent.abs())
            } else {
                "-".into()
            };
            PROGRESS_SHOWN.store(true, std::sync::atomic::Ordering::SeqCst);
            eprint!(
                "\r[ip] {:7.1} s  incumbent {:<12.6}  bound {:<12.6}  gap {gap:<9}  nodes {}   ",
                p.elapsed_s, p.incumbent, p.bound, p.nodes
            );
        }
        solve::milp::set_progress_hook(Some(show));
    }
}

fn run_score(args: ScoreArgs) -> Result<(), CliError> {
    let w = load_workload(&args.workload, &args.devices)?;
    let placement = read_placement(&args.placement, &w)?;
    let objective = objective_of(args.objective, usize::MAX);
    let latency = matches!(objective, Objective::Latency { .. });
    let e = evaluate(&w, &placement, latency);
    let placement = if latency { e.latency.attach_cut(placement) } else { placement };
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let v = evaluation_json(&w, &placement, None, objective, &e);
        writeln!(stdout, "{}", serde_json::to_string_pretty(&v).expect("json"))?;
    } else {
        write!(stdout, "{}", plan_table(&w, None, objective, &e))?;
    }
    stdout.flush()?;
    Ok(())
}

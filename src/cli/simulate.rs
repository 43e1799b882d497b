//! `dnnplace simulate WORKLOAD PLAN.json`: a plan run through a pipeline schedule, and the
//! `--report` HTML page that `plan` also writes.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

use super::settings::DeviceOverrides;
use super::{load_workload, CliError, DeviceFlags};
use crate::io::{read_placement, write_atomically};
use crate::model::recompute::Recompute;
use crate::model::schedule::{Pipeline, Schedule};
use crate::model::{Placement, Workload};
use crate::report::html::{gantt_svg, report_html, ReportInput};
use crate::report::simulation::{simulation_json, simulation_table};
use crate::score::{recompute_where_needed, Evaluation};
use crate::simulate::{pipeline_evaluation, simulate, Settings, SimulateError, Simulation};
use crate::solve::Outcome;

pub(super) fn parse_schedule(text: &str) -> Result<Schedule, String> {
    text.parse()
}

// The schedule a simulation plays.
#[derive(Args, Debug, Clone)]
pub struct ScheduleFlags {
    /// Pipeline schedule: gpipe, 1f1b (PipeDream-Flush) or interleaved[:v] (Megatron-LM,
    /// v chunks per device). Inference graphs run a plain pipeline whatever is given.
    #[arg(long, default_value = "1f1b", value_parser = parse_schedule, value_name = "SCHEDULE")]
    pub schedule: Schedule,
    /// Micro-batches per iteration.
    #[arg(long, default_value_t = DEFAULT_MICRO_BATCHES, value_name = "M")]
    pub micro_batches: usize,
}

// `plan`'s schedule flags: the memory the planner prices, and the schedule `--report`
// simulates.
#[derive(Args, Debug, Clone)]
pub struct PlanScheduleFlags {
    /// Plan each stage's memory as this pipeline schedule keeps micro-batches in flight:
    /// gpipe or 1f1b (--method dp, auto or ip), or interleaved[:v] (v chunks per
    /// accelerator; the interleaved DP and IP, m a multiple of the accelerators). Without
    /// it a node's size is held once (MODEL.md). Also the schedule --report simulates
    /// [there default: 1f1b].
    #[arg(long, value_parser = parse_schedule, value_name = "SCHEDULE")]
    pub schedule: Option<Schedule>,
    /// Micro-batches per iteration, for --schedule and --report (1 to 2^20) [default: 8].
    #[arg(long, value_name = "M", value_parser = super::settings::parse_count)]
    pub micro_batches: Option<usize>,
    /// Activation recomputation under --schedule: none (every stage stashes its
    /// activations) or auto (a stage that does not fit otherwise keeps only its inputs and
    /// runs its forward pass again; docs/schedule.md) [default: none].
    #[arg(long, value_parser = parse_recompute, value_name = "none|auto")]
    pub recompute: Option<Recompute>,
}

pub(super) fn parse_recompute(text: &str) -> Result<Recompute, String> {
    text.parse()
}

impl PlanScheduleFlags {
    /// What `--report` simulates.
    pub fn simulated(&self) -> ScheduleFlags {
        ScheduleFlags {
            schedule: self.schedule.unwrap_or(Schedule::OneFOneB),
            micro_batches: self.micro_batches.unwrap_or(DEFAULT_MICRO_BATCHES),
        }
    }
}

/// Micro-batches when `--micro-batches` is not given.
pub const DEFAULT_MICRO_BATCHES: usize = 8;

impl ScheduleFlags {
    pub fn settings(&self) -> Settings {
        Settings {
            schedule: self.schedule,
            micro_batches: self.micro_batches,
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum SimulateFormat {
    /// A table per device and the iteration's figures.
    Text,
    /// Everything, every task included.
    Json,
    /// The Gantt chart alone, as an SVG file.
    Svg,
}

#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// Workload JSON file (with --parallel 3d: the Hugging Face config.json the plan was
    /// made for).
    pub workload: PathBuf,
    /// Placement JSON file (MODEL.md shape), e.g. written by `plan --out`; with --parallel
    /// 3d, the JSON of `plan --parallel 3d --json` or `--out` (uniform or --free).
    pub plan: PathBuf,
    #[command(flatten)]
    pub schedule: ScheduleFlags,
    #[command(flatten)]
    pub devices: DeviceFlags,
    /// Activation recomputation: none (no device recomputes, whatever the plan says) or
    /// auto (an accelerator recomputes exactly where it does not fit otherwise at its
    /// place in the chain, as plan --recompute auto chooses; under interleaved, exactly
    /// where its chunks do not fit otherwise) [default: as
    /// the plan file's per-device "recompute" says].
    #[arg(long, value_parser = parse_recompute, value_name = "none|auto")]
    pub recompute: Option<Recompute>,
    /// What to print.
    #[arg(long, value_enum, default_value = "text")]
    pub format: SimulateFormat,
    /// JSON output, as every other command takes it (the same as --format json).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Also write the visual report (one self-contained HTML file) here.
    #[arg(long, value_name = "FILE.html")]
    pub report: Option<PathBuf>,
    #[command(flatten)]
    pub parallel: super::parallel_cmd::SimulateParallelFlags,
}

impl From<SimulateError> for CliError {
    fn from(e: SimulateError) -> Self {
        match e {
            SimulateError::Check(_) => CliError::Internal(e.to_string()),
            _ => CliError::Input(e.to_string()),
        }
    }
}

fn title(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// The report page of a plan: simulates it with `flags` and renders everything.
pub fn plan_report(
    workload_path: &Path,
    w: &Workload,
    placement: &Placement,
    evaluation: &Evaluation,
    outcome: Option<&Outcome>,
    flags: &ScheduleFlags,
) -> Result<String, CliError> {
    let simulation = simulate(w, placement, &flags.settings())?;
    Ok(page(
        workload_path,
        w,
        placement,
        evaluation,
        outcome,
        &simulation,
    ))
}

fn page(
    path: &Path,
    w: &Workload,
    placement: &Placement,
    evaluation: &Evaluation,
    outcome: Option<&Outcome>,
    simulation: &Simulation,
) -> String {
    let title = title(path);
    report_html(&ReportInput {
        title: &title,
        workload: w,
        placement,
        evaluation,
        outcome,
        simulation: Some(simulation),
    })
}

/// The plan with `simulate --recompute` applied: `none` clears the plan's marks, `auto`
/// chooses them as the planner does.
fn recomputed(
    w: &Workload,
    placement: Placement,
    recompute: Option<Recompute>,
    flags: &ScheduleFlags,
) -> Result<Placement, CliError> {
    match recompute {
        None => Ok(placement),
        Some(Recompute::None) => Ok(placement.with_recompute(Vec::new())),
        Some(Recompute::Auto) => {
            let pipeline = Pipeline {
                schedule: flags.schedule,
                micro_batches: flags.micro_batches,
                recompute: Recompute::Auto,
            };
            recompute_where_needed(w, &placement, &pipeline)
                .map_err(|e| CliError::Input(format!("--recompute auto: {e}")))
        }
    }
}

/// Runs `simulate`.
pub fn run_simulate(args: SimulateArgs) -> Result<(), CliError> {
    if args.parallel.parallel.is_some() {
        return super::parallel_cmd::run_simulate(&args);
    }
    super::parallel_cmd::check_simulate_unused(&args.parallel)?;
    let w = load_workload(&args.workload, &DeviceOverrides::new(&args.devices))?;
    let placement = recomputed(
        &w,
        read_placement(&args.plan, &w)?,
        args.recompute,
        &args.schedule,
    )?;
    let simulation = simulate(&w, &placement, &args.schedule.settings())?;
    if let Some(path) = &args.report {
        let evaluation = pipeline_evaluation(&w, &placement);
        write_atomically(
            path,
            &page(
                &args.workload,
                &w,
                &placement,
                &evaluation,
                None,
                &simulation,
            ),
        )?;
    }
    let mut stdout = std::io::stdout().lock();
    let format = if args.json {
        SimulateFormat::Json
    } else {
        args.format
    };
    match format {
        SimulateFormat::Text => {
            write!(stdout, "{}", simulation_table(&simulation))?;
            if let Some(path) = &args.report {
                writeln!(stdout, "report written to {}", path.display())?;
            }
        }
        SimulateFormat::Json => write!(
            stdout,
            "{}",
            super::json_text(&simulation_json(&simulation))
        )?,
        SimulateFormat::Svg => write!(stdout, "{}", gantt_svg(&simulation))?,
    }
    stdout.flush()?;
    Ok(())
}

//! `plan CONFIG.json|WORKLOAD.json --parallel 3d`: the whole parallel layout of a
//! transformer's config.json or a MODEL.md training workload — stages, TP and DP degrees,
//! ZeRO stage, micro-batch — on a cluster of identical machines (`docs/parallel.md`). The
//! flags become the library's [`ParallelSettings`], which checks them and builds the
//! [`ParallelProblem`] (the road Python's `plan_parallel` takes too); here remain the
//! flags of the search's mode and outputs (`--sweep`, `--target-tps`, `--out`, `--report`,
//! `--export-out`), the library's one entry [`parallel::plan`] (or the problem's sweep and
//! fewest-devices questions), and the table or JSON, `--out` written atomically. `score`
//! and `simulate` of a 3D layout (`--from-export`, a plan file) live here too.
//!
//! What each question takes, uniform (the default) or `--free`, on one type or several
//! (`--cluster A+B`: counts in whole machines, in the cluster's order):
//!
//! | question | uniform | `--free` |
//! | --- | --- | --- |
//! | one layout | time per sample or iteration; `--export`, `--report` | time per sample or simulated iteration; `--report` (one type); no `--export` |
//! | `--sweep [--plot F.svg]` | one row per count: value, bound, gap, time | the same rows, each the free search's |
//! | `--target-tps MS` | fewest count meeting it, proven by the bound below | the same; an open count (a stopped search whose bound does not exclude it) named in text and `target.open` |
//! | `--budget P` | the devices (machines) `P` per hour buys, one search | the same |
//!
//! `--budget` with `--sweep` or `--target-tps`, and `--target-tps` with `--objective
//! iteration`, exit 2 naming the flag.

use std::path::Path;
use std::time::Instant;

use clap::{Args, ValueEnum};

use super::{costmodel_cmds, CliError, ObjectiveArg, PlanArgs};
use crate::costmodel::operators::DType;
use crate::costmodel::parallel::{
    transformer_chain, transformer_chain_with, valid_tp_degrees, with_batch, SequenceParallel,
};
use crate::costmodel::transformer::TransformerSpec;
use crate::export::parallel::Training;
use crate::model::parallel::{Topology, Zero};
use crate::model::profiles::DeviceProfile;
use crate::model::schedule::Schedule;
use crate::report::parallel::{layout_json, layout_text, LayoutJson};
use crate::solve::budget::Budget;
use crate::solve::parallel::settings::{self, MAX_GLOBAL_BATCH};
use crate::solve::parallel::{
    Answer, Choice, Goal, Layouts, Objective, ParallelDevices, ParallelModel, ParallelProblem,
    ParallelSettings, SettingsError, Target,
};
use crate::solve::{self, Status};

/// Which parallel layouts `plan` searches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ParallelKind {
    /// Stages × tensor parallelism × data parallelism (with ZeRO and the micro-batch).
    #[value(name = "3d")]
    ThreeD,
}

// The flags of parallel layouts.
#[derive(Args, Debug, Clone, Default)]
pub struct ParallelFlags {
    /// Plan the whole parallel layout of a transformer given as a Hugging Face config.json,
    /// or of a training workload JSON (its layers as the chain, TP costs from its nodes'
    /// optional tensorParallel options): `3d` = pipeline stages × tensor parallel × data
    /// parallel, with ZeRO and the micro-batch (docs/parallel.md). Needs --cluster and
    /// --global-batch.
    #[arg(long, value_enum, value_name = "KIND")]
    pub parallel: Option<ParallelKind>,
    /// --parallel 3d: TP degrees to consider, a comma list (1,2,4,8) or `auto` (every
    /// degree that divides a machine, the heads, the key/value heads and the FFN) [default: auto].
    #[arg(long, value_name = "LIST|auto")]
    pub tensor_parallel: Option<String>,
    /// --parallel 3d: DP degree, a number or `auto` [default: auto].
    #[arg(long, value_name = "N|auto")]
    pub data_parallel: Option<String>,
    /// --parallel 3d: pipeline stages, a number or `auto` [default: auto].
    #[arg(long, value_name = "N|auto")]
    pub pipeline_parallel: Option<String>,
    /// --parallel 3d: ZeRO stage 0–3 or `auto` [default: auto].
    #[arg(long, value_name = "0..3|auto")]
    pub zero: Option<String>,
    /// --parallel 3d: samples per iteration B (1 to 2^24).
    #[arg(long, value_name = "B")]
    pub global_batch: Option<usize>,
    /// --parallel 3d: samples per micro-batch b (a divisor of B), or `auto` (the powers of
    /// two up to 16 that divide B) [default: auto].
    #[arg(long, value_name = "b|auto")]
    pub micro_batch: Option<String>,
    /// --parallel 3d: only layouts with the same t and d in every stage (what Megatron-LM,
    /// DeepSpeed, vLLM and torchtitan run). The default.
    #[arg(long)]
    pub uniform: bool,
    /// --parallel 3d: the TP groups also split the sequence (Megatron-LM's
    /// --sequence-parallel): the norms and residual adds divided by t, the same
    /// communication. On by itself with --export torchtitan (its TP plan always does it);
    /// refused with --export deepspeed or vllm.
    #[arg(long)]
    pub sequence_parallel: bool,
    /// --parallel 3d: overlap each stage's DP gradient sync with its last micro-batch's
    /// backward (Megatron-LM's --overlap-grad-reduce): the sync starts when that backward
    /// starts, so the iteration pays max(0, sync − backward) per stage instead of the sync.
    /// Off by default (the sync after the stage's last backward).
    #[arg(long)]
    pub overlap_grad_reduce: bool,
    /// --parallel 3d: free layouts, each stage with its own t and d (Piper's space; the time
    /// per sample, or with --objective iteration the simulated iteration; with --sweep,
    /// --target-tps and --budget as uniform layouts; no --export).
    #[arg(long, conflicts_with = "uniform")]
    pub free: bool,
}

impl ParallelFlags {
    /// The settings of the layout flags for the model at `path` (the rest at their
    /// defaults): what `plan` and `compare` read alike.
    fn settings(&self, path: &Path) -> ParallelSettings {
        ParallelSettings {
            global_batch: self.global_batch,
            micro_batch: self.micro_batch.as_deref().map(Choice::count),
            tensor_parallel: (self.tensor_parallel.as_deref())
                .map_or(Choice::Auto, Choice::degrees),
            data_parallel: (self.data_parallel.as_deref()).map_or(Choice::Auto, Choice::count),
            pipeline_parallel: (self.pipeline_parallel.as_deref())
                .map_or(Choice::Auto, Choice::count),
            zero: self.zero.as_deref().map_or(Choice::Auto, Choice::zero),
            layouts: if self.free {
                Layouts::Free
            } else {
                Layouts::Uniform
            },
            sequence_parallel: self.sequence_parallel,
            overlap_grad_reduce: self.overlap_grad_reduce,
            ..ParallelSettings::new(ParallelModel::Path(path.to_path_buf()))
        }
    }
}

// The flags of `compare CONFIG.json --parallel 3d`: the layout flags of `plan --parallel
// 3d` and the model's.
#[derive(Args, Debug, Clone, Default)]
pub struct CompareParallelFlags {
    #[command(flatten)]
    pub layout: ParallelFlags,
    /// --parallel 3d: the cluster, `MxNxTYPE` terms joined by `+` or a cluster TOML file.
    #[arg(long, value_name = "SPEC")]
    pub cluster: Option<String>,
    /// --parallel 3d: a config's tokens per sample (1 to 2^20) [default: 512].
    #[arg(long, value_name = "S", value_parser = super::settings::parse_count)]
    pub seq: Option<usize>,
    /// --parallel 3d: a config's number format: fp32, tf32, fp16, bf16 [default: the
    /// config's, else bf16].
    #[arg(long, value_parser = DType::parse, value_name = "DTYPE")]
    pub dtype: Option<DType>,
    /// --parallel 3d: load a device profile from a TOML file (repeatable).
    #[arg(long, value_name = "FILE.toml")]
    pub device_file: Vec<std::path::PathBuf>,
    /// --parallel 3d: gpipe or 1f1b [default: 1f1b].
    #[arg(long, value_parser = super::simulate::parse_schedule, value_name = "SCHEDULE")]
    pub schedule: Option<Schedule>,
    /// --parallel 3d: none (no recomputation) or auto (searched off and on) [default: auto].
    #[arg(long, value_parser = super::simulate::parse_recompute, value_name = "none|auto")]
    pub recompute: Option<crate::model::recompute::Recompute>,
}

/// Rejects the `compare --parallel 3d` flags without --parallel.
pub fn check_compare_unused(f: &CompareParallelFlags) -> Result<(), CliError> {
    check_unused(&f.layout)?;
    let given = [
        ("--cluster", f.cluster.is_some()),
        ("--seq", f.seq.is_some()),
        ("--dtype", f.dtype.is_some()),
        ("--device-file", !f.device_file.is_empty()),
        ("--schedule", f.schedule.is_some()),
        ("--recompute", f.recompute.is_some()),
    ];
    match given.iter().find(|g| g.1) {
        Some((name, _)) => Err(CliError::Input(format!(
            "{name} applies to `compare CONFIG.json --parallel 3d` (the workload's own devices are compared otherwise)"
        ))),
        None => Ok(()),
    }
}

/// Runs `compare CONFIG.json|WORKLOAD.json --parallel 3d`: the problem built by the library
/// as `plan --parallel 3d` builds it, both searches and the layouts by hand
/// ([`crate::solve::parallel::compare`]), one table or JSON.
pub fn run_compare(args: &super::CompareArgs, started: Instant) -> Result<(), CliError> {
    use crate::report::parallel::{compare_json, compare_text};
    let f = &args.parallel;
    let refused = [
        ("--free", f.layout.free),
        ("--uniform", f.layout.uniform),
        ("--split", args.split.is_some()),
        ("--accelerators", args.devices.accelerators.is_some()),
        ("--cpus", args.devices.cpus.is_some()),
        ("--markdown", args.markdown),
    ];
    if let Some((name, _)) = refused.iter().find(|r| r.1) {
        return Err(CliError::Input(format!(
            "{name} does not apply to `compare --parallel 3d` (it runs the uniform and the free search and the layouts by hand; the devices are --cluster's)"
        )));
    }
    if let Some(s @ Schedule::Interleaved { .. }) = f.schedule {
        return Err(CliError::Input(format!(
            "--schedule {s} does not apply to `compare --parallel 3d` (its free search and layouts by hand run gpipe or 1f1b; plan the interleaved layout with `plan --parallel 3d --schedule {s}`)"
        )));
    }
    let objective = objective_of(args.objective)?;
    let settings = ParallelSettings {
        cluster: f.cluster.clone(),
        device_files: f.device_file.clone(),
        memory_bytes: args.devices.memory,
        dtype: f.dtype,
        seq: f.seq,
        recompute: f.recompute,
        schedule: f.schedule,
        objective,
        ..f.layout.settings(&args.workload)
    };
    let input = |e: SettingsError| CliError::Input(e.to_string());
    settings.check().map_err(input)?;
    let mut notes = Vec::new();
    let built = settings.build(&mut notes);
    print_notes(&notes);
    let problem = built.map_err(input)?;
    let budget = run_budget(args.time_limit, args.search.memory_budget, started)?;
    let rows = crate::simulate::parallel::compare(&problem, &budget).map_err(CliError::Internal)?;
    let topo = problem.topology();
    if args.json {
        let json = compare_json(&rows, &topo, objective);
        println!(
            "{}",
            serde_json::to_string_pretty(&json).map_err(|e| CliError::Internal(e.to_string()))?
        );
    } else {
        print!("{}", compare_text(&rows, objective));
    }
    let planned = |r: &crate::solve::parallel::compare::Row| {
        r.result.as_ref().is_ok_and(|o| o.plan.is_some())
    };
    if rows.iter().any(planned) {
        Ok(())
    } else {
        Err(CliError::Input(
            "no layout fits: neither search nor any layout by hand has a plan (the rows say why)"
                .into(),
        ))
    }
}

/// Rejects the --parallel 3d flags without --parallel.
pub fn check_unused(flags: &ParallelFlags) -> Result<(), CliError> {
    let given = [
        ("--tensor-parallel", flags.tensor_parallel.is_some()),
        ("--data-parallel", flags.data_parallel.is_some()),
        ("--pipeline-parallel", flags.pipeline_parallel.is_some()),
        ("--zero", flags.zero.is_some()),
        ("--global-batch", flags.global_batch.is_some()),
        ("--micro-batch", flags.micro_batch.is_some()),
        ("--uniform", flags.uniform),
        ("--sequence-parallel", flags.sequence_parallel),
        ("--overlap-grad-reduce", flags.overlap_grad_reduce),
        ("--free", flags.free),
    ];
    match given.iter().find(|g| g.1) {
        Some((name, _)) => Err(CliError::Input(format!(
            "{name} describes a parallel layout: add --parallel 3d"
        ))),
        None => Ok(()),
    }
}

/// Flags of `plan` that a parallel layout does not use, named when given.
fn check_not_given(args: &PlanArgs) -> Result<(), CliError> {
    let s = &args.schedule;
    let given = [
        ("--method", args.method != "auto"),
        ("--coarsen", args.coarsen.is_some()),
        ("--coarsen-target", args.coarsen_target.is_some()),
        ("--non-contiguous", args.non_contiguous),
        ("--pieces", args.pieces != 1),
        ("--accelerators", args.devices.accelerators.is_some()),
        ("--cpus", args.devices.cpus.is_some()),
        ("--gap", args.gap.is_some()),
        ("--threads", args.threads.is_some()),
        ("--split", args.split.is_some()),
        ("--granularity", args.granularity.is_some()),
        (
            "--plot (without --sweep)",
            args.plot.is_some() && !args.sweep,
        ),
        ("--micro-batches", s.micro_batches.is_some()),
        ("--batch", args.model.batch.is_some()),
        ("--device", args.model.device.is_some()),
        ("--cpu-device", args.model.cpu_device.is_some()),
        ("--ip-experiment", !args.ip_experiment.is_empty()),
        ("--cost-model", args.piper.cost_model.is_some()),
        ("--devices", args.piper.devices.is_some()),
        ("--highs-option", !args.highs_option.is_empty()),
    ];
    match given.iter().find(|g| g.1) {
        Some((name, _)) => Err(CliError::Input(format!(
            "{name} does not apply to --parallel 3d (docs/parallel.md lists its flags; the micro-batch is --micro-batch, the cluster --cluster)"
        ))),
        None => Ok(()),
    }
}

/// `--sweep`: the best layout per GPU count, as a table or JSON, and `--plot` as SVG.
fn write_sweep(
    args: &PlanArgs,
    rows: &[(usize, crate::solve::parallel::ParallelOutcome)],
    topo: &Topology,
    objective: Objective,
) -> Result<(), CliError> {
    use crate::report::parallel::{sweep_json, sweep_svg, sweep_text};
    if let Some(plot) = &args.plot {
        crate::io::write_atomically(plot, &sweep_svg(rows))
            .map_err(|e| CliError::Input(e.to_string()))?;
    }
    let json = sweep_json(rows, topo, objective);
    if let Some(out) = &args.out {
        let text =
            serde_json::to_string_pretty(&json).map_err(|e| CliError::Internal(e.to_string()))?;
        crate::io::write_atomically(out, &(text + "\n"))
            .map_err(|e| CliError::Input(e.to_string()))?;
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json).map_err(|e| CliError::Internal(e.to_string()))?
        );
    } else {
        print!("{}", sweep_text(rows, objective));
    }
    if rows.iter().all(|(_, o)| o.plan.is_none()) {
        return Err(CliError::Input(
            crate::report::parallel::NO_SWEEP_LAYOUT.into(),
        ));
    }
    Ok(())
}

/// The settings of the flags; the library checks them ([`ParallelSettings::build`]).
fn settings_of(args: &PlanArgs, objective: Objective) -> ParallelSettings {
    ParallelSettings {
        cluster: args.model.cluster.clone(),
        device_files: args.model.device_file.clone(),
        memory_bytes: args.devices.memory,
        dtype: args.model.dtype,
        seq: args.model.seq,
        recompute: args.schedule.recompute,
        schedule: args.schedule.schedule,
        objective,
        export: args.export.clone(),
        price_cap: args.budget,
        goal: match args.target_tps {
            Some(target_ms) => Goal::FewestDevices { target_ms },
            None if args.sweep => Goal::Sweep,
            None => Goal::One,
        },
        ..args.parallel.settings(&args.workload)
    }
}

/// `--sweep` and `--target-tps` ask two questions at once (the library checks the rest of
/// what the goal takes, [`ParallelSettings::check`]).
fn check_goal(args: &PlanArgs) -> Result<(), CliError> {
    if args.target_tps.is_some() && args.sweep {
        return Err(CliError::Input(
            "--target-tps finds the fewest accelerators for a time per sample: give it without --sweep".into(),
        ));
    }
    Ok(())
}

/// The objective of `--objective` for a parallel layout, or exit 2 naming it.
fn objective_of(arg: ObjectiveArg) -> Result<Objective, CliError> {
    match arg {
        ObjectiveArg::Throughput => Ok(Objective::TimePerSample),
        ObjectiveArg::Iteration => Ok(Objective::Iteration),
        other => Err(CliError::Input(format!(
            "--objective {}: parallel layouts minimise `iteration` or `throughput` (time per sample)",
            format!("{other:?}").to_lowercase()
        ))),
    }
}

/// The cluster of `--cluster`, its profiles, and its topology with `--memory` applied
/// ([`settings::cluster_topology`]); its notes printed; exit 2 without one or when its
/// machines differ.
fn topology_of(
    spec: Option<&str>,
    device_files: &[std::path::PathBuf],
    memory: Option<f64>,
) -> Result<(crate::model::Cluster, Vec<DeviceProfile>, Topology), CliError> {
    let mut notes = Vec::new();
    let found = settings::cluster_topology(spec, device_files, memory, &mut notes);
    print_notes(&notes);
    found.map_err(|e| CliError::Input(e.to_string()))
}

fn print_notes(notes: &[String]) {
    for note in notes {
        eprintln!("note: {note}");
    }
}

/// Runs `plan CONFIG.json|WORKLOAD.json --parallel 3d`: the flags checked here (those of
/// the search's mode and outputs) and by the library (the problem's), the problem built
/// by the library, its search and output.
pub fn run(args: &PlanArgs, started: Instant) -> Result<(), CliError> {
    check_not_given(args)?;
    check_outputs(args)?;
    let input = |e: SettingsError| CliError::Input(e.to_string());
    args.export
        .as_deref()
        .map(Target::parse)
        .transpose()
        .map_err(input)?;
    if let Some(out) = &args.export_out {
        super::check_output_target(out)?;
    }
    let objective = objective_of(args.objective)?;
    check_goal(args)?;
    let settings = settings_of(args, objective);
    let target = settings.check().map_err(input)?;
    if args.model.training && settings::is_workload_json(&args.workload) {
        return Err(CliError::Input("--training does not apply to a workload JSON: it describes a transformer given as a config.json (a workload's nodes carry their own costs)".into()));
    }
    let mut notes = Vec::new();
    let built = settings.build(&mut notes);
    print_notes(&notes);
    let problem = built.map_err(input)?;
    if let (ParallelDevices::Mixed(topo), Some(_)) = (&problem.devices, &args.report) {
        let names: Vec<&str> = topo.groups.iter().map(|g| g.type_name.as_str()).collect();
        return Err(CliError::Input(format!(
            "--report does not apply to a cluster of several types ({}): the simulator's page covers one accelerator type",
            names.join(", ")
        )));
    }
    let export = match problem.layouts {
        Layouts::Uniform => target.map(Target::name),
        Layouts::Free => None,
    };
    solve_problem(args, started, &problem, settings.goal, export)
}

/// The answer of `problem` to `goal` (the sweep, the fewest devices, or one plan) and its
/// output: the tail every `plan --parallel 3d` shares.
pub(super) fn solve_problem(
    args: &PlanArgs,
    started: Instant,
    problem: &ParallelProblem,
    goal: Goal,
    export: Option<&str>,
) -> Result<(), CliError> {
    let budget = run_budget(args.time_limit, args.search.memory_budget, started)?;
    let (topo, objective) = (&problem.topology(), problem.objective);
    let mixed = match &problem.devices {
        ParallelDevices::Mixed(m) => Some(m),
        ParallelDevices::One(_) => None,
    };
    let export = export.map(|format| ExportTo { format, mixed });
    match crate::simulate::parallel::answer(problem, goal, &budget).map_err(CliError::Internal)? {
        Answer::Sweep(rows) => write_sweep(args, &rows, topo, objective),
        Answer::FewestDevices(found) => write_target(args, &found, topo, objective, export),
        Answer::One(outcome) => finish(args, &outcome, topo, objective, export, None, true),
    }
}

/// The names of the model's units (embeddings, blocks, head), in chain order: what a plan
/// file's or an export's `layers` name.
fn unit_names(
    spec: &TransformerSpec,
    dtype: DType,
    profile: &DeviceProfile,
) -> Result<Vec<String>, CliError> {
    let chain = transformer_chain(&with_batch(spec, 1), dtype, profile, &[1]);
    let units = chain.map_err(CliError::Input)?.units;
    Ok(units.into_iter().map(|u| u.name).collect())
}

/// The run's budget: `--time-limit` (60 s when absent) and `--memory-budget`, set for the
/// whole process, with Ctrl-C caught.
fn run_budget(
    time_limit: Option<f64>,
    memory_budget: f64,
    started: Instant,
) -> Result<Budget, CliError> {
    let time_limit = time_limit
        .map(|t| super::settings::time_limit("--time-limit", t, "; omit it for no limit"))
        .transpose()?;
    let memory = super::settings::memory_budget(memory_budget)?;
    solve::budget::set_run_limits(started, time_limit.or(Some(60.0)), Some(memory));
    super::sigint_setup();
    Ok(Budget::new(time_limit.or(Some(60.0)), Some(memory)))
}

/// The output files `plan --parallel 3d` may write are writable targets, and `--sweep` is
/// not given with an option that shows or writes one layout.
fn check_outputs(args: &PlanArgs) -> Result<(), CliError> {
    for path in [&args.out, &args.plot, &args.report].into_iter().flatten() {
        super::check_output_target(path)?;
    }
    if args.sweep && args.report.is_some() {
        return Err(CliError::Input(
            "--report shows one layout: give it without --sweep".into(),
        ));
    }
    if args.sweep && args.export.is_some() {
        return Err(CliError::Input(
            "--export writes one layout: give it without --sweep".into(),
        ));
    }
    Ok(())
}

/// What `--export` writes: the format and, on a cluster of several types, its topology
/// (the export then carries the node-rank table).
#[derive(Clone, Copy)]
struct ExportTo<'a> {
    format: &'a str,
    mixed: Option<&'a crate::model::parallel::MixedTopology>,
}

/// `--target-tps MS`: the fewest devices whose best layout meets the target. The best
/// layout is printed either way; one that misses the target writes no file and exits 2.
fn write_target(
    args: &PlanArgs,
    found: &crate::solve::parallel::TargetOutcome,
    topo: &Topology,
    objective: Objective,
    export: Option<ExportTo>,
) -> Result<(), CliError> {
    use crate::report::parallel::{target_json, target_line, target_missed};
    let line = target_line(found);
    let met = found.devices.is_some();
    let export = if met { export } else { None };
    finish(
        args,
        &found.outcome,
        topo,
        objective,
        export,
        Some((target_json(found), &line)),
        met,
    )?;
    if met {
        Ok(())
    } else {
        Err(CliError::Input(target_missed(found)))
    }
}

/// Prints (table or JSON), writes `--out` (when `write_files`) and the export of a
/// search's outcome; `target` is what `--target-tps` found, as JSON and a line of text; exit 2
/// without a plan.
fn finish(
    args: &PlanArgs,
    outcome: &crate::solve::parallel::ParallelOutcome,
    topo: &Topology,
    objective: Objective,
    export: Option<ExportTo>,
    target: Option<(serde_json::Value, &str)>,
    write_files: bool,
) -> Result<(), CliError> {
    let mut json = layout_json(outcome, topo, objective);
    json.peak_memory_bytes = crate::experiments::bench::peak_memory_bytes();
    let mut line = "";
    if let Some((found, text)) = target {
        json.target = Some(found);
        line = text;
    }
    let text = |v: &LayoutJson| {
        serde_json::to_string_pretty(v).map_err(|e| CliError::Internal(e.to_string()))
    };
    let report = match (&args.report, &outcome.plan) {
        (Some(path), Some(plan)) if write_files => {
            let (page, summary) = simulated_report(&args.workload, plan, topo)?;
            json.simulation = Some(summary);
            Some((path, page))
        }
        _ => None,
    };
    let out = if write_files { args.out.as_ref() } else { None };
    if let (Some(out), Some(_)) = (out, &outcome.plan) {
        crate::io::write_atomically(out, &(text(&json)? + "\n"))
            .map_err(|e| CliError::Input(e.to_string()))?;
    }
    if let Some((path, page)) = &report {
        crate::io::write_atomically(path, page).map_err(|e| CliError::Input(e.to_string()))?;
    }
    if args.json {
        println!("{}", text(&json)?);
    } else {
        print!("{}{line}", layout_text(outcome, topo, objective));
        if let Some((path, _)) = &report {
            let s = json.simulation.as_ref().unwrap_or(&serde_json::Value::Null);
            println!(
                "simulated: iteration {} ms (pipeline {} ms + DP syncs), {} micro-batches over the replicas; report written to {}",
                s["iterationMs"],
                s["pipelineMs"],
                s["globalMicroBatches"],
                path.display()
            );
        }
    }
    if let (Some(ExportTo { format, mixed }), Some(plan)) = (export, &outcome.plan) {
        let text = match mixed {
            Some(m) => crate::export::parallel::render_mixed(format, plan, m),
            None => crate::export::parallel::render(format, plan),
        }
        .map_err(|why| CliError::Input(format!("cannot export to {format}: {why}")))?;
        match &args.export_out {
            Some(path) => crate::io::write_atomically(path, &text)
                .map_err(|e| CliError::Input(e.to_string()))?,
            None => print!("{text}"),
        }
    }
    match (&outcome.plan, &outcome.status) {
        (Some(_), _) => Ok(()),
        (None, Status::Infeasible { reason, .. }) => {
            Err(CliError::Input(format!("no feasible layout: {reason}")))
        }
        (None, _) => Err(CliError::Input(crate::report::parallel::status_line(
            outcome,
        ))),
    }
}

/// `--report`: the plan simulated ([`crate::simulate::parallel`]) and its HTML page
/// ([`crate::report::parallel_html`]), with the simulation's figures as JSON.
fn simulated_report(
    config: &std::path::Path,
    plan: &crate::solve::parallel::ParallelPlan,
    topo: &Topology,
) -> Result<(String, serde_json::Value), CliError> {
    let sim = crate::simulate::parallel::simulate_layout(&plan.chain, topo, &plan.layout)?;
    let title = config.file_name().map_or_else(
        || config.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let page = crate::report::parallel_html::layout_html(&title, plan, topo, &sim);
    let summary = serde_json::json!({
        "schedule": sim.schedule.to_string(),
        "microBatches": sim.micro_batches,
        "globalMicroBatches": sim.global_micro_batches,
        "iterationMs": sim.iteration_ms,
        "pipelineMs": sim.pipeline_ms,
        "steadyPerSampleMs": sim.steady_per_sample_ms,
        "busyTimePerSampleMs": sim.busy_time_per_sample_ms,
        "syncMs": sim.sync_ms,
    });
    Ok((page, summary))
}

// The flags of `score CONFIG.json --parallel 3d --from-export FORMAT FILE`.
#[derive(Args, Debug, Clone, Default)]
pub struct ScoreParallelFlags {
    /// Score a 3D layout of a transformer given as a Hugging Face config.json, read from a
    /// framework's file (--from-export megatron|deepspeed|torchtitan|vllm); needs --cluster.
    #[arg(long, value_enum, value_name = "KIND", requires = "from_export")]
    pub parallel: Option<ParallelKind>,
    /// --parallel 3d with a vLLM file (which carries no training settings): samples per
    /// iteration B.
    #[arg(long, value_name = "B")]
    pub global_batch: Option<usize>,
    /// --parallel 3d with a vLLM file: samples per micro-batch [default: 1].
    #[arg(long, value_name = "b")]
    pub micro_batch: Option<usize>,
    /// --parallel 3d with a vLLM file: ZeRO stage 0–3 [default: 0].
    #[arg(long, value_name = "0..3")]
    pub zero: Option<u8>,
    /// --parallel 3d with a vLLM file: full recomputation.
    #[arg(long)]
    pub recompute_all: bool,
    /// --parallel 3d: tokens per sample [default: 512, as for plan].
    #[arg(long, value_name = "S")]
    pub seq: Option<usize>,
}

/// Rejects the `score --parallel 3d` flags without --parallel.
pub fn check_score_unused(args: &super::ScoreArgs) -> Result<(), CliError> {
    let f = &args.parallel;
    let given = [
        ("--global-batch", f.global_batch.is_some()),
        ("--micro-batch", f.micro_batch.is_some()),
        ("--zero", f.zero.is_some()),
        ("--recompute-all", f.recompute_all),
        ("--seq", f.seq.is_some()),
    ];
    if let Some((name, _)) = given.iter().find(|g| g.1) {
        return Err(CliError::Input(format!(
            "{name} describes a 3D layout: add --parallel 3d"
        )));
    }
    match &args.from_export {
        Some(pair) if pair[0] == "torchtitan" => Err(CliError::Input(
            "--from-export torchtitan reads a 3D layout: add --parallel 3d and give the model's config.json".into(),
        )),
        _ => Ok(()),
    }
}

/// The training settings a vLLM file lacks, from the flags; for the other formats, none
/// may be given (the file carries them).
fn serving_training(format: &str, f: &ScoreParallelFlags) -> Result<Training, CliError> {
    if format != "vllm" {
        let given = [
            ("--global-batch", f.global_batch.is_some()),
            ("--micro-batch", f.micro_batch.is_some()),
            ("--zero", f.zero.is_some()),
            ("--recompute-all", f.recompute_all),
        ];
        if let Some((name, _)) = given.iter().find(|g| g.1) {
            return Err(CliError::Input(format!(
                "{name}: the {format} file carries the training settings (only a vLLM file needs them)"
            )));
        }
        return Ok(Training {
            micro_batch: 1,
            global_batch: 1,
            zero: Zero::Off,
            schedule: Schedule::OneFOneB,
            recompute: false,
            overlap_grad_reduce: false,
        });
    }
    let micro_batch = f.micro_batch.unwrap_or(1);
    let global_batch = f.global_batch.ok_or_else(|| {
        CliError::Input("--from-export vllm: give --global-batch B (a serving command line has no training batch)".into())
    })?;
    if micro_batch == 0
        || global_batch == 0
        || global_batch > MAX_GLOBAL_BATCH
        || global_batch % micro_batch != 0
    {
        return Err(CliError::Input(format!(
            "--micro-batch {micro_batch} must be ≥ 1 and divide --global-batch {global_batch} (1 to 2^24)"
        )));
    }
    let zero = match f.zero {
        None => Zero::Off,
        Some(z) => Zero::from_stage(z)
            .ok_or_else(|| CliError::Input(format!("--zero {z}: give a ZeRO stage 0 to 3")))?,
    };
    Ok(Training {
        micro_batch,
        global_batch,
        zero,
        schedule: Schedule::OneFOneB,
        recompute: f.recompute_all,
        overlap_grad_reduce: false,
    })
}

/// Runs `score CONFIG.json --parallel 3d --cluster SPEC --from-export FORMAT FILE`: the
/// layout a framework's file describes, scored under the model `plan --parallel 3d` uses.
pub fn run_score(args: &super::ScoreArgs) -> Result<(), CliError> {
    use crate::export::parallel::{read_layout, FORMATS};
    use crate::report::parallel::{scored_json, scored_text};
    let pair = args.from_export.as_ref().ok_or_else(|| {
        CliError::Input(
            "--parallel 3d scores a framework's file: give --from-export FORMAT FILE".into(),
        )
    })?;
    let (format, file) = (pair[0].as_str(), Path::new(&pair[1]));
    if !FORMATS.contains(&format) {
        return Err(CliError::Input(format!(
            "--from-export {format}: with --parallel 3d the formats are {}",
            FORMATS.join(", ")
        )));
    }
    let objective = objective_of(args.objective)?;
    let serving = serving_training(format, &args.parallel)?;
    let cost = costmodel_cmds::CostFlags {
        seq: args.parallel.seq,
        ..Default::default()
    };
    let model = costmodel_cmds::hf_model(&args.workload, &cost).map_err(|e| {
        CliError::Input(format!(
            "{e} (--parallel 3d reads a Hugging Face config.json)"
        ))
    })?;
    let dtype = model.dtype.unwrap_or(DType::Bf16);
    let (profiles, devices) = score_devices(args)?;
    let topo = match &devices {
        ParallelDevices::One(t) => t.clone(),
        ParallelDevices::Mixed(m) => m.display(),
    };
    let text = crate::io::read_input_text(file, crate::io::TEXT_LIMIT_BYTES)
        .map_err(|e| CliError::Input(format!("{}: {e}", file.display())))?;
    let names = unit_names(&model.spec, dtype, &profiles[0])?;
    let in_file = |e: String| CliError::Input(format!("{}: {e}", file.display()));
    let (mut layout, notes) =
        read_layout(format, &text, &names, topo.devices(), serving).map_err(in_file)?;
    if let ParallelDevices::Mixed(m) = &devices {
        layout = crate::export::parallel::place_on_machines(format, &text, layout, m)
            .map_err(in_file)?;
    }
    let t = layout.stages[0].tensor_parallel;
    let valid = valid_tp_degrees(&model.spec, topo.per_machine);
    if !valid.contains(&t) {
        return Err(CliError::Input(format!(
            "{}: TP {t}: the degree must divide the model's heads, key/value heads and feed-forward width, and a machine's {} accelerators (these do: {valid:?})",
            file.display(),
            topo.per_machine
        )));
    }
    let sp = if crate::export::parallel::sequence_parallel_in(format, &text) {
        SequenceParallel::On
    } else {
        SequenceParallel::Off
    };
    let micro_batch = layout.micro_batch;
    let chain_on = |profile: &DeviceProfile| {
        transformer_chain_with(
            &with_batch(&model.spec, micro_batch),
            dtype,
            profile,
            &[1, t],
            sp,
        )
        .map_err(CliError::Input)
    };
    let plan = match &devices {
        ParallelDevices::One(topo) => {
            let chain = chain_on(&profiles[0])?;
            let score = crate::score::parallel::score_layout(&chain, topo, &layout)
                .map_err(|e| in_file(e.to_string()))?;
            crate::solve::parallel::ParallelPlan {
                layout,
                score,
                chain,
                accelerators: None,
            }
        }
        ParallelDevices::Mixed(m) => {
            mixed_plan(m, &profiles, layout, chain_on).map_err(|e| match e {
                CliError::Input(e) => in_file(e),
                other => other,
            })?
        }
    };
    for note in &notes {
        eprintln!("note: {note}");
    }
    let source = format!("{format} file {}", file.display());
    if args.json {
        let v = scored_json(&plan, &topo, objective, &source);
        println!(
            "{}",
            serde_json::to_string_pretty(&v).map_err(|e| CliError::Internal(e.to_string()))?
        );
    } else {
        print!("{}", scored_text(&plan, &topo, objective, &source));
    }
    if plan.score.fits {
        Ok(())
    } else {
        Err(CliError::Rejected(format!(
            "the layout of {} does not fit in the accelerators' memory",
            file.display()
        )))
    }
}

/// The cluster of `score --parallel 3d` (`--cluster`, `--device-file`, `--memory`): its
/// profiles and its devices, one topology on one type, the groups on several.
fn score_devices(
    args: &super::ScoreArgs,
) -> Result<(Vec<DeviceProfile>, ParallelDevices), CliError> {
    let mut notes = Vec::new();
    let found = settings::cluster_of(args.cluster.as_deref(), &args.device_file, &mut notes);
    let (cluster, profiles) = found.map_err(|e| CliError::Input(e.to_string()))?;
    if cluster.types().len() < 2 {
        let (_, profiles, topo) = topology_of(
            args.cluster.as_deref(),
            &args.device_file,
            args.devices.memory,
        )?;
        return Ok((profiles, ParallelDevices::One(topo)));
    }
    print_notes(&notes);
    let mut topo = crate::model::parallel::MixedTopology::from_cluster(&cluster).map_err(|e| {
        CliError::Input(format!(
            "--cluster {}: {e}",
            args.cluster.as_deref().unwrap_or_default()
        ))
    })?;
    if let Some(m) = args.devices.memory {
        for g in &mut topo.groups {
            g.memory_bytes = m;
        }
    }
    Ok((profiles, ParallelDevices::Mixed(topo)))
}

/// `layout` (on the devices of `topo`) scored with each group's chain (`chain_on` its
/// profile) as the plan of a uniform layout on several types.
fn mixed_plan(
    topo: &crate::model::parallel::MixedTopology,
    profiles: &[DeviceProfile],
    layout: crate::model::parallel::Layout,
    chain_on: impl Fn(&DeviceProfile) -> Result<crate::model::parallel::ChainCosts, CliError>,
) -> Result<crate::solve::parallel::ParallelPlan, CliError> {
    let mut chains = Vec::with_capacity(topo.groups.len());
    for g in &topo.groups {
        let profile = profiles
            .iter()
            .find(|p| p.name == g.profile)
            .ok_or_else(|| CliError::Input(format!("no device profile '{}'", g.profile)))?;
        chains.push(chain_on(profile)?);
    }
    let score = crate::score::parallel::score_mixed(&chains, topo, &layout)
        .map_err(|e| CliError::Input(e.to_string()))?;
    let mut starts = Vec::new();
    let mut at = 0;
    for g in &topo.groups {
        starts.push(at..at + g.devices());
        at += g.devices();
    }
    let accelerators = layout
        .stages
        .iter()
        .map(|st| {
            let g = starts
                .iter()
                .position(|r| r.contains(&st.first_device))
                .unwrap_or(0);
            topo.groups[g].type_name.clone()
        })
        .collect();
    let first = starts
        .iter()
        .position(|r| r.contains(&layout.stages[0].first_device))
        .unwrap_or(0);
    Ok(crate::solve::parallel::ParallelPlan {
        layout,
        score,
        chain: chains.swap_remove(first),
        accelerators: Some(accelerators),
    })
}

// The flags of `simulate CONFIG.json PLAN.json --parallel 3d`.
#[derive(Args, Debug, Clone, Default)]
pub struct SimulateParallelFlags {
    /// Simulate a 3D plan file (the JSON of `plan --parallel 3d`, uniform or --free) of
    /// the transformer given as a Hugging Face config.json; needs --cluster, and the
    /// --seq and --dtype the plan was made with. The plan file gives the schedule and the
    /// batches (--schedule and --micro-batches do not apply).
    #[arg(long = "parallel", value_enum, value_name = "KIND")]
    pub parallel: Option<ParallelKind>,
    /// --parallel 3d: the cluster the plan was made for (`MxNxTYPE` or a cluster TOML).
    #[arg(long, value_name = "SPEC")]
    pub cluster: Option<String>,
    /// --parallel 3d: tokens per sample [default: 512, as for plan].
    #[arg(long, value_name = "S")]
    pub seq: Option<usize>,
    /// --parallel 3d: the dtype [default: the config's, else bf16, as for plan].
    #[arg(long, value_parser = DType::parse, value_name = "DTYPE")]
    pub dtype: Option<DType>,
}

/// Rejects the `simulate --parallel 3d` flags without --parallel.
pub fn check_simulate_unused(f: &SimulateParallelFlags) -> Result<(), CliError> {
    let given = [
        ("--cluster", f.cluster.is_some()),
        ("--seq", f.seq.is_some()),
        ("--dtype", f.dtype.is_some()),
    ];
    match given.iter().find(|g| g.1) {
        Some((name, _)) => Err(CliError::Input(format!(
            "{name} applies to simulate --parallel 3d (a 3D plan file); a placement file takes the workload's devices"
        ))),
        None => Ok(()),
    }
}

/// Runs `simulate CONFIG.json PLAN.json --parallel 3d --cluster SPEC`: the plan file read
/// back ([`crate::io::layout_json`]), re-scored, checked against the file's planned stage
/// times, simulated ([`crate::simulate::parallel`]) and printed beside the planned figures.
pub fn run_simulate(args: &super::simulate::SimulateArgs) -> Result<(), CliError> {
    let f = &args.parallel;
    if args.recompute.is_some() {
        return Err(CliError::Input(
            "--recompute does not apply to --parallel 3d: the plan file says whether it recomputes"
                .into(),
        ));
    }
    let cost = costmodel_cmds::CostFlags {
        seq: f.seq,
        ..Default::default()
    };
    let model = costmodel_cmds::hf_model(&args.workload, &cost).map_err(|e| {
        CliError::Input(format!(
            "{e} (--parallel 3d reads a Hugging Face config.json)"
        ))
    })?;
    let dtype = f.dtype.or(model.dtype).unwrap_or(DType::Bf16);
    let (_, profiles, topo) = topology_of(f.cluster.as_deref(), &[], args.devices.memory)?;
    let file = &args.plan;
    let text = crate::io::read_input_text(file, crate::io::TEXT_LIMIT_BYTES)
        .map_err(|e| CliError::Input(format!("{}: {e}", file.display())))?;
    let names = unit_names(&model.spec, dtype, &profiles[0])?;
    let read = crate::io::layout_json::parse_layout_json(&text, &names)
        .map_err(|e| CliError::Input(format!("{}: {e}", file.display())))?;
    let valid = valid_tp_degrees(&model.spec, topo.per_machine);
    let mut degrees = vec![1];
    for (s, st) in read.layout.stages.iter().enumerate() {
        if !valid.contains(&st.tensor_parallel) {
            return Err(CliError::Input(format!(
                "{}: stages[{s}].tensorParallel {}: the degree must divide the model's heads, key/value heads and feed-forward width, and a machine's {} accelerators (these do: {valid:?})",
                file.display(),
                st.tensor_parallel,
                topo.per_machine
            )));
        }
        degrees.push(st.tensor_parallel);
    }
    degrees.sort_unstable();
    degrees.dedup();
    let sp = if read.sequence_parallel {
        SequenceParallel::On
    } else {
        SequenceParallel::Off
    };
    let chain = transformer_chain_with(
        &with_batch(&model.spec, read.layout.micro_batch),
        dtype,
        &profiles[0],
        &degrees,
        sp,
    )
    .map_err(CliError::Input)?;
    let score = crate::score::parallel::score_layout(&chain, &topo, &read.layout)
        .map_err(|e| CliError::Input(format!("{}: {e}", file.display())))?;
    for (s, (sc, &ms)) in score
        .stages
        .iter()
        .zip(&read.planned_micro_batch_ms)
        .enumerate()
    {
        if (sc.micro_batch_ms - ms).abs() > 1e-6 * ms.abs().max(1e-9) {
            return Err(CliError::Input(format!(
                "{}: stages[{s}].microBatchTimeMs is {ms} but the stage takes {} ms on --cluster {} at this --seq and --dtype: give the flags the plan was made with",
                file.display(),
                sc.micro_batch_ms,
                f.cluster.as_deref().unwrap_or("")
            )));
        }
    }
    let plan = crate::solve::parallel::ParallelPlan {
        layout: read.layout,
        score,
        chain,
        accelerators: None,
    };
    if let Some(report) = &args.report {
        super::check_output_target(report)?;
    }
    let (page, summary) = simulated_report(&args.workload, &plan, &topo)?;
    if let Some(report) = &args.report {
        crate::io::write_atomically(report, &page)?;
    }
    let planned = serde_json::json!({
        "iterationMs": plan.score.iteration_ms,
        "timePerSampleMs": plan.score.time_per_sample_ms,
    });
    if args.json || args.format == super::simulate::SimulateFormat::Json {
        let v = serde_json::json!({"planned": planned, "simulation": summary});
        println!("{}", super::json_text(&v));
    } else {
        print!("{}", simulate_text(&plan, &summary));
        if let Some(report) = &args.report {
            println!("report written to {}", report.display());
        }
    }
    Ok(())
}

/// The planned and simulated figures of a 3D plan, as text.
fn simulate_text(plan: &crate::solve::parallel::ParallelPlan, sim: &serde_json::Value) -> String {
    let l = &plan.layout;
    let shape: Vec<String> = l.stages[..l.pipeline_stages()]
        .iter()
        .map(|s| format!("t{}·d{}", s.tensor_parallel, s.data_parallel))
        .collect();
    let num = |v: &serde_json::Value| v.as_f64().map_or("-".to_string(), |x| format!("{x:.3}"));
    let planned_iteration = plan
        .score
        .iteration_ms
        .map_or("not defined (stages with different d)".to_string(), |x| {
            format!("{x:.3} ms")
        });
    format!(
        "layout: p{} ({}) b{} B{} z{} {}{}\n\
         planned:   iteration {planned_iteration}, time per sample {:.6} ms\n\
         simulated: iteration {} ms (pipeline {} ms + DP syncs), {} micro-batches over the replicas\n\
         simulated: steady state {} ms per sample (DP syncs apart), bottleneck busy time {} ms per sample\n",
        l.pipeline_stages(),
        shape.join("|"),
        l.micro_batch,
        l.global_batch,
        l.zero.stage(),
        l.schedule,
        if l.recompute { " rc" } else { "" },
        plan.score.time_per_sample_ms,
        num(&sim["iterationMs"]),
        num(&sim["pipelineMs"]),
        sim["globalMicroBatches"],
        sim["steadyPerSampleMs"]
            .as_f64()
            .map_or("-".to_string(), |x| format!("{x:.6}")),
        sim["busyTimePerSampleMs"]
            .as_f64()
            .map_or("-".to_string(), |x| format!("{x:.6}")),
    )
}

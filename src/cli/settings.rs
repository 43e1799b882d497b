//! Raw flags → validated settings → library objects (ripgrep's low-level and high-level
//! arguments).
//!
//! clap parses each flag's *syntax* into the raw argument types of [`super`] (a count with
//! [`parse_count`], a duration with [`parse_seconds`], a fraction with [`parse_fraction`],
//! bytes with [`crate::model::parse_bytes`]). The constructors here ([`PlanSettings::new`],
//! [`CompareSettings::new`], [`ReproduceSettings::new`], [`import_options`],
//! [`TransformerSizes::new`]) then check every *value* once against its range, failing with exit
//! status 2 and a message that names the flag, the value, the allowed range and why; and
//! the settings build the library's objects ([`Limits`], the method, the device set).
//! Once the workload is read, [`fit_to_workload`] clamps what exceeds what a plan on its n
//! nodes can use, with a note on stderr.
//!
//! | flag | allowed | why, and what happens beyond |
//! | --- | --- | --- |
//! | `--accelerators K`, `--cpus L` | any count | more than the n nodes is the same as n (a plan puts each node on one device): clamped to n with a note |
//! | `--pieces Q` | 1 … | more than n is the same as n: clamped with a note |
//! | `--threads N` | 1 … | more than the machine's cores gains nothing: clamped to the cores with a note |
//! | `--restarts N` | 1 … 1,000,000 | each restart is a full local search |
//! | `--steps N` | 1 … 1,000,000 | policy-gradient steps (`rl`) or generations (`genetic`); bound the run with `--time-limit` instead |
//! | `--seed S` | 0 … 2⁶⁴−1 | any |
//! | `--max-ideals N` | 1 … 2³²−1 | the DP numbers ideals with 32 bits |
//! | `--memory-budget B` | 1 MiB … 1 PiB | what the DP's ideals and table may take; beyond it the DP stops before allocating, naming the budget |
//! | `--coarsen`, `--coarsen-target N` | `--method auto` only; N ≥ 1, not with `--coarsen off` | they steer auto's coarsened path |
//! | `--time-limit`, `--ip-time-limit` | 1 ms … 10⁹ s (31.7 years) | omit `--time-limit` for none |
//! | `--gap` | 0 … 1 (100%) | a relative gap above 100% stops at the first plan, as 100% does |
//! | `--memory` | a finite byte count ≥ 0 | |
//! | `--memory-budget` | 1 MiB … 1 PiB | below 1 MiB no model fits; above 1 PiB is no limit on any machine |
//! | `--micro-batches M` | 1 … 2²⁰ | needs `--schedule` or `--report`; stash bytes times M stay exact |
//! | `--schedule S` | gpipe, 1f1b, interleaved[:v] | gpipe and 1f1b: `--method dp`, `auto` (which then runs the exact DP) or `ip`; interleaved:v puts v chunks on each accelerator, not one contiguous stage: `--method dp` (the interleaved DP), `ip` or `auto` (the DP, then the IP from its plan), `m` a multiple of the accelerators k; other methods refused, or with `--report` only simulated (a note says so) |
//! | `--recompute R` | none, auto | needs `--schedule`: with MODEL.md's memory nothing is stashed per micro-batch, so nothing to recompute; under interleaved an accelerator recomputes all its chunks or none (`--method dp`, `ip` or `auto`); not with `--cluster` (its planner does not price a schedule's memory) |
//! | `--jobs N` | 1 … 1,024 | workloads run at a time, one thread each |
//! | `--seeds N` | 1 … 100 | `reproduce`: rl and genetic with seeds 1..=N, each a full run |
//! | `--batch`, `--seq` | 1 … 2²⁰ | tensor sizes stay exact in 64 bits |
//! | `--layers` | 1 … 10,000 | about 20 operators per block: 200,000 operators |
//! | `--hidden`, `--heads`, `--ffn`, `--vocab` | 1 … 2²⁰ | products such as batch·seq·hidden stay exact in 64 bits |

use std::fmt::Display;
use std::path::PathBuf;

use super::simulate::{PlanScheduleFlags, DEFAULT_MICRO_BATCHES};
use super::{
    CliError, CoarsenArg, CompareArgs, DeviceFlags, ObjectiveArg, PlanArgs, ReproduceArgs,
    SearchFlags,
};
use crate::costmodel::onnx::ImportOptions;
use crate::costmodel::DType;
use crate::model::schedule::{Pipeline, Schedule};
use crate::model::{DeviceSet, Workload};
use crate::solve::budget::Budget;
use crate::solve::coarsen::{CoarsenMode, CoarsenSettings};
use crate::solve::milp::{IpExperiment, IpOptions};
use crate::solve::{clamp_to_nodes, method_names, Limits, MethodId, Objective, Problem};

/// The longest time limit, seconds (about 31.7 years).
pub const MAX_TIME_LIMIT_S: f64 = 1e9;
/// The shortest time limit, seconds.
pub const MIN_TIME_LIMIT_S: f64 = 1e-3;
/// The smallest and largest `--memory-budget`, bytes (1 MiB, 1 PiB).
pub const MIN_MEMORY_BUDGET: f64 = (1u64 << 20) as f64;
pub const MAX_MEMORY_BUDGET: f64 = (1u64 << 50) as f64;
/// The most local-search restarts.
pub const MAX_RESTARTS: usize = 1_000_000;
/// The most ideals the DP may be asked to enumerate (it numbers them with `u32`).
pub const MAX_IDEALS: usize = u32::MAX as usize;
/// The most workloads `reproduce` runs at a time.
pub const MAX_JOBS: usize = 1024;
/// The largest batch, sequence length and transformer width.
pub const MAX_DIMENSION: usize = 1 << 20;
/// The most transformer blocks.
pub const MAX_LAYERS: usize = 10_000;

/// A count: `12`, `1000000`, `1_000_000`, or exact scientific notation `1e6`, `2.5e3`.
pub fn parse_count(text: &str) -> Result<usize, String> {
    let t = text.trim().replace('_', "");
    if let Ok(v) = t.parse::<usize>() {
        return Ok(v);
    }
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 && v.fract() == 0.0 => {
            if v < usize::MAX as f64 {
                Ok(v as usize)
            } else {
                Err(format!("'{text}' is too large (at most {})", usize::MAX))
            }
        }
        _ => Err(format!(
            "'{text}' is not a count (a whole number ≥ 0, e.g. 4 or 1e6)"
        )),
    }
}

/// `60`, `60s`, `2m`, `1h`, `250ms` → seconds (any finite number; the range is checked by
/// the settings).
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
        Ok(v) if (v * scale).is_finite() => Ok(v * scale),
        _ => Err(format!("'{text}' is not a duration (try 60s, 2m)")),
    }
}

/// `1%` → 0.01, `0.01` → 0.01 (any finite number; the range is checked by the settings).
pub fn parse_fraction(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (number, scale) = match t.strip_suffix('%') {
        Some(x) => (x, 0.01),
        None => (t, 1.0),
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v * scale),
        _ => Err(format!("'{text}' is not a gap (try 1% or 0.01)")),
    }
}

/// `value` of `flag` if it lies in `lo..=hi`; otherwise an error naming the flag, the value,
/// the range and `why` the range is what it is.
fn in_range<T: PartialOrd + Display>(
    flag: &str,
    value: T,
    lo: T,
    hi: T,
    why: &str,
) -> Result<T, CliError> {
    if value < lo || value > hi {
        return Err(CliError::Input(format!(
            "{flag} {value} is out of range ({lo} to {hi}): {why}"
        )));
    }
    Ok(value)
}

/// `value` of `flag` if it is at least `lo`.
fn at_least(flag: &str, value: usize, lo: usize, what: &str) -> Result<usize, CliError> {
    if value < lo {
        return Err(CliError::Input(format!(
            "{flag} {value} is out of range: {what} must be at least {lo}"
        )));
    }
    Ok(value)
}

fn seconds_text(s: f64) -> String {
    if s.abs() >= 1e6 {
        format!("{s:e} s")
    } else {
        format!("{s} s")
    }
}

/// A time limit in seconds within [`MIN_TIME_LIMIT_S`]..=[`MAX_TIME_LIMIT_S`]; `hint` says
/// what to do instead of a longer one.
pub fn time_limit(flag: &str, seconds: f64, hint: &str) -> Result<f64, CliError> {
    if !(MIN_TIME_LIMIT_S..=MAX_TIME_LIMIT_S).contains(&seconds) {
        return Err(CliError::Input(format!(
            "{flag} {} is out of range (1 ms to 1e9 s, about 31.7 years){hint}",
            seconds_text(seconds)
        )));
    }
    Ok(seconds)
}

/// The method called `name`.
pub fn method_id(name: &str) -> Result<MethodId, CliError> {
    MethodId::from_name(name).ok_or_else(|| {
        CliError::Input(format!(
            "unknown method '{name}'; known: {}",
            method_names().join(", ")
        ))
    })
}

/// `--threads`: at least 1; more than the machine's cores is clamped to them, with a note.
fn threads(value: Option<usize>, notes: &mut Vec<String>) -> Result<Option<usize>, CliError> {
    let Some(n) = value else { return Ok(None) };
    at_least("--threads", n, 1, "the number of solver threads")?;
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    if n > cores {
        notes.push(format!(
            "--threads {n} is more than the {cores} cores of this machine: using {cores}"
        ));
        return Ok(Some(cores));
    }
    Ok(Some(n))
}

/// The most seeds `reproduce --seeds` runs (each a full rl and genetic run per workload).
const MAX_SEEDS: usize = 100;

fn restarts(value: usize) -> Result<usize, CliError> {
    in_range(
        "--restarts",
        value,
        1,
        MAX_RESTARTS,
        "each restart is a full local search from a random start; bound the run with --time-limit instead",
    )
}

/// `--max-ideals`, `--seed`, `--restarts`, `--steps`, `--memory-budget` into the fields of [`Limits`].
fn search_limits(flags: &SearchFlags, limits: &mut Limits) -> Result<(), CliError> {
    limits.max_ideals = in_range(
        "--max-ideals",
        flags.max_ideals,
        1,
        MAX_IDEALS,
        "the DP numbers ideals with 32 bits; coarsen the graph instead",
    )?;
    limits.seed = flags.seed as u64;
    limits.restarts = restarts(flags.restarts)?;
    limits.search_steps = flags
        .steps
        .map(|n| {
            in_range(
                "--steps",
                n,
                1,
                MAX_RESTARTS,
                "each step scores at least one plan; bound the run with --time-limit instead",
            )
        })
        .transpose()?;
    limits.memory_budget_bytes = Some(memory_budget(flags.memory_budget)?);
    Ok(())
}

/// `--memory-budget` within [`MIN_MEMORY_BUDGET`]..=[`MAX_MEMORY_BUDGET`].
pub fn memory_budget(bytes: f64) -> Result<f64, CliError> {
    if !(MIN_MEMORY_BUDGET..=MAX_MEMORY_BUDGET).contains(&bytes) {
        return Err(CliError::Input(format!(
            "--memory-budget {} is out of range (1 MiB to 1 PiB): below 1 MiB no model fits, above 1 PiB is no limit on any machine",
            crate::model::human_bytes(bytes)
        )));
    }
    Ok(bytes)
}

/// `--ip-experiment` and `--highs-option` as [`IpOptions`].
fn ip_options(experiments: &[IpExperiment], highs_options: &[(String, String)]) -> IpOptions {
    let mut options = experiments
        .iter()
        .fold(IpOptions::default(), |o, &e| o.with(e));
    options.highs_options = highs_options.to_vec();
    options
}

/// `--ip-experiment WORD`.
pub fn parse_ip_experiment(word: &str) -> Result<IpExperiment, String> {
    IpExperiment::from_word(word.trim()).ok_or_else(|| {
        let words: Vec<&str> = IpExperiment::ALL.iter().map(|e| e.word()).collect();
        format!(
            "unknown IP experiment '{word}'; known: {}",
            words.join(", ")
        )
    })
}

/// `--highs-option NAME=VALUE`, checked against HiGHS's option table
/// ([`crate::solve::milp::options`]): an unknown option, a value of the wrong type or out of
/// range is a usage error (exit 2) naming the option.
pub fn parse_highs_option(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() && !value.trim().is_empty() => {
            let (name, value) = (name.trim(), value.trim());
            crate::solve::milp::options::check_highs_option(name, value)?;
            Ok((name.to_string(), value.to_string()))
        }
        _ => Err(format!("'{text}' is not NAME=VALUE (e.g. presolve=off)")),
    }
}

/// `--accelerators/--cpus/--memory`, validated: what replaces the workload's device set.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceOverrides {
    pub accelerators: Option<usize>,
    pub cpus: Option<usize>,
    pub memory_bytes: Option<f64>,
}

impl DeviceOverrides {
    /// Every count is allowed here (more devices than nodes is clamped once the workload is
    /// known, by [`fit_to_workload`]); the byte count was checked by its parser.
    pub fn new(flags: &DeviceFlags) -> DeviceOverrides {
        DeviceOverrides {
            accelerators: flags.accelerators,
            cpus: flags.cpus,
            memory_bytes: flags.memory,
        }
    }

    /// `w` with these overrides (re-validated for feasibility).
    pub fn apply(&self, w: Workload) -> Result<Workload, CliError> {
        if *self == DeviceOverrides::default() {
            return Ok(w);
        }
        let d = w.devices();
        let devices = DeviceSet {
            accelerators: self.accelerators.unwrap_or(d.accelerators),
            cpus: self.cpus.unwrap_or(d.cpus),
            memory_per_accelerator_bytes: self
                .memory_bytes
                .unwrap_or(d.memory_per_accelerator_bytes),
        };
        Ok(w.with_devices(devices)?)
    }
}

fn objective_of(arg: ObjectiveArg, pieces: usize) -> Result<Objective, CliError> {
    let pieces = at_least("--pieces", pieces, 1, "the pieces one accelerator may hold")?;
    Ok(match arg {
        ObjectiveArg::Throughput => Objective::Throughput,
        ObjectiveArg::Sync => Objective::Sync,
        ObjectiveArg::Latency => Objective::Latency { pieces },
        ObjectiveArg::Iteration => {
            return Err(CliError::Input(
                "--objective iteration is the time per iteration of a parallel layout: add --parallel 3d".into(),
            ))
        }
    })
}

/// The settings of `dnnplace plan`, every flag checked.
#[derive(Clone, Debug)]
pub struct PlanSettings {
    pub method: MethodId,
    /// The split of `--method expert`.
    pub split: Option<PathBuf>,
    pub objective: Objective,
    pub contiguous: bool,
    pub devices: DeviceOverrides,
    pub limits: Limits,
    /// `--coarsen` and `--coarsen-target` (for `--method auto`).
    pub coarsen: CoarsenSettings,
    /// What the settings decided for the user (implied flags, clamps), one line each.
    pub notes: Vec<String>,
    /// The schedule whose memory the planner prices (`--schedule`, `--micro-batches`).
    pub pipeline: Option<Pipeline>,
}

/// The most micro-batches.
pub const MAX_MICRO_BATCHES: usize = 1 << 20;

/// `--schedule`, `--micro-batches` and `--recompute` of `plan`, checked.
fn pipeline_of(
    flags: &PlanScheduleFlags,
    method: MethodId,
    report: bool,
    notes: &mut Vec<String>,
) -> Result<Option<Pipeline>, CliError> {
    if let Some(m) = flags.micro_batches {
        in_range(
            "--micro-batches",
            m,
            1,
            MAX_MICRO_BATCHES,
            "the micro-batches of one iteration",
        )?;
        if flags.schedule.is_none() && !report {
            return Err(CliError::Input(format!(
                "--micro-batches {m} needs --schedule gpipe|1f1b (the memory to plan) or --report (the schedule to simulate)"
            )));
        }
    }
    let recompute = flags.recompute.unwrap_or_default();
    let Some(schedule) = flags.schedule else {
        return match flags.recompute {
            Some(r) => Err(CliError::Input(format!(
                "--recompute {r} needs --schedule gpipe|1f1b|interleaved:v: recomputation trades the activations a schedule keeps in flight for a second forward pass"
            ))),
            None => Ok(None),
        };
    };
    let planned_only = |why: String| -> Result<(), CliError> {
        match flags.recompute {
            Some(r) => Err(CliError::Input(format!(
                "--recompute {r}: {why}, so nothing is planned to recompute"
            ))),
            None => Ok(()),
        }
    };
    if let Schedule::Interleaved { .. } = schedule {
        if matches!(method, MethodId::Dp | MethodId::Ip | MethodId::Auto) {
            return Ok(Some(Pipeline {
                schedule,
                micro_batches: flags.micro_batches.unwrap_or(DEFAULT_MICRO_BATCHES),
                recompute,
            }));
        }
        if report {
            planned_only(format!(
                "--schedule {schedule} is only simulated (the plan uses MODEL.md's memory)"
            ))?;
            notes.push(format!(
                "--schedule {schedule} is simulated for --report; the plan is made with MODEL.md's memory (the planner gives each device one contiguous stage, {schedule} runs several chunks per device)"
            ));
            return Ok(None);
        }
        return Err(CliError::Input(format!(
            "--schedule {schedule}: --method {method} gives each device one contiguous stage, and {schedule} runs several chunks per device; use --method dp, ip or auto (the interleaved DP and IP), or plan with --schedule 1f1b and simulate the plan with --schedule {schedule}"
        )));
    }
    if !matches!(method, MethodId::Dp | MethodId::Auto | MethodId::Ip) {
        if report {
            planned_only(format!(
                "{method} plans with MODEL.md's memory (only --method dp, auto and ip plan under a schedule)"
            ))?;
            notes.push(format!("--schedule {schedule} is simulated for --report; {method} plans with MODEL.md's memory (only --method dp, auto and ip plan under a schedule's memory)"));
            return Ok(None);
        }
        return Err(CliError::Input(format!(
            "--schedule: only --method dp, auto and ip plan under a schedule's memory ({method} does not model it)"
        )));
    }
    Ok(Some(Pipeline {
        schedule,
        micro_batches: flags.micro_batches.unwrap_or(DEFAULT_MICRO_BATCHES),
        recompute,
    }))
}

impl PlanSettings {
    pub fn new(args: &PlanArgs) -> Result<PlanSettings, CliError> {
        let method = method_id(&args.method)?;
        match (&args.split, method) {
            (Some(_), MethodId::Expert) | (None, _) => {}
            (Some(_), other) => {
                return Err(CliError::Input(format!(
                    "--split is for --method expert, not {other}"
                )))
            }
        }
        let mut notes = Vec::new();
        let mut contiguous = !args.non_contiguous;
        if contiguous && method.only_non_contiguous() {
            contiguous = false;
            notes.push(format!("{method} only makes non-contiguous plans: solving the non-contiguous problem (as with --non-contiguous)"));
        }
        let mut limits = Limits {
            time_limit_s: args
                .time_limit
                .map(|t| time_limit("--time-limit", t, "; omit it for no limit"))
                .transpose()?,
            mip_gap: args
                .gap
                .map(|g| {
                    in_range(
                        "--gap",
                        g,
                        0.0,
                        1.0,
                        "a relative gap above 100% stops at the first plan, as 100% does",
                    )
                })
                .transpose()?,
            threads: threads(args.threads, &mut notes)?,
            ip: ip_options(&args.ip_experiment, &args.highs_option),
            ..Limits::default()
        };
        search_limits(&args.search, &mut limits)?;
        let pipeline = pipeline_of(&args.schedule, method, args.report.is_some(), &mut notes)?;
        Ok(PlanSettings {
            method,
            split: args.split.clone(),
            objective: objective_of(args.objective, args.pieces)?,
            contiguous,
            devices: DeviceOverrides::new(&args.devices),
            limits,
            coarsen: coarsen_settings(method, args.coarsen, args.coarsen_target)?,
            notes,
            pipeline,
        })
    }

    /// The problem on `w`.
    pub fn problem<'a>(&self, w: &'a Workload) -> Problem<'a> {
        Problem {
            workload: w,
            devices: crate::solve::Devices::of(w),
            objective: self.objective,
            contiguous: self.contiguous,
            limits: self.limits.clone(),
            pipeline: self.pipeline,
        }
    }
}

/// `--coarsen MODE` and `--coarsen-target N`: only with `--method auto`, N ≥ 1, and no
/// target with `--coarsen off`.
fn coarsen_settings(
    method: MethodId,
    mode: Option<CoarsenArg>,
    target: Option<usize>,
) -> Result<CoarsenSettings, CliError> {
    if (mode.is_some() || target.is_some()) && method != MethodId::Auto {
        return Err(CliError::Input(format!(
            "--coarsen and --coarsen-target are for --method auto, not {method}"
        )));
    }
    let mode = match mode.unwrap_or(CoarsenArg::Auto) {
        CoarsenArg::Auto => CoarsenMode::Auto,
        CoarsenArg::Off => CoarsenMode::Off,
        CoarsenArg::Layers => CoarsenMode::Layers,
    };
    if mode == CoarsenMode::Off && target.is_some() {
        return Err(CliError::Input(
            "--coarsen-target needs coarsening; it contradicts --coarsen off".into(),
        ));
    }
    let target = target
        .map(|t| {
            at_least(
                "--coarsen-target",
                t,
                1,
                "the clusters of the level the DP runs on",
            )
        })
        .transpose()?;
    Ok(CoarsenSettings { mode, target })
}

/// The settings of `dnnplace compare`, every flag checked.
#[derive(Clone, Debug)]
pub struct CompareSettings {
    pub objective: Objective,
    pub devices: DeviceOverrides,
    /// Each method run's limits.
    pub limits: Limits,
    /// The whole comparison's time limit, seconds.
    pub total_time_limit_s: Option<f64>,
}

impl CompareSettings {
    pub fn new(args: &CompareArgs) -> Result<CompareSettings, CliError> {
        let mut limits = Limits {
            time_limit_s: Some(time_limit("--ip-time-limit", args.ip_time_limit, "")?),
            ..Limits::default()
        };
        search_limits(&args.search, &mut limits)?;
        Ok(CompareSettings {
            objective: objective_of(args.objective, args.pieces)?,
            devices: DeviceOverrides::new(&args.devices),
            limits,
            total_time_limit_s: args
                .time_limit
                .map(|t| time_limit("--time-limit", t, "; omit it for no limit"))
                .transpose()?,
        })
    }

    /// The whole comparison's budget, starting now (time only: each run gets the memory budget).
    pub fn budget(&self) -> Budget {
        Budget::new(self.total_time_limit_s, None)
    }
}

/// The settings of `dnnplace reproduce`, every flag checked.
#[derive(Clone, Debug)]
pub struct ReproduceSettings {
    pub limits: Limits,
    /// Workloads run at a time.
    pub jobs: usize,
    /// The search placers run with seeds `1..=seeds`.
    pub seeds: u64,
}

impl ReproduceSettings {
    pub fn new(args: &ReproduceArgs) -> Result<ReproduceSettings, CliError> {
        let limits = Limits {
            time_limit_s: Some(time_limit("--ip-time-limit", args.ip_time_limit, "")?),
            seed: args.seed as u64,
            restarts: restarts(args.restarts)?,
            ..Limits::default()
        };
        let jobs = match args.jobs {
            Some(j) => in_range(
                "--jobs",
                j,
                1,
                MAX_JOBS,
                "workloads run at a time, one thread each",
            )?,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let seeds = in_range(
            "--seeds",
            args.seeds,
            1,
            MAX_SEEDS,
            "rl and genetic run once per seed on every workload and cluster instance",
        )? as u64;
        Ok(ReproduceSettings {
            limits,
            jobs,
            seeds,
        })
    }
}

/// The workload and objective a search runs on: k, ℓ and q clamped to what a plan on the
/// workload's n nodes can use ([`clamp_to_nodes`]), with a note per clamp. Only for a
/// method that searches: a given split keeps the file's device numbers.
pub fn fit_to_workload(
    w: Workload,
    objective: Objective,
    method: MethodId,
    notes: &mut Vec<String>,
) -> Result<(Workload, Objective), CliError> {
    if !method.searches() {
        return Ok((w, objective));
    }
    let problem = Problem {
        workload: &w,
        devices: crate::solve::Devices::of(&w),
        objective,
        contiguous: true,
        limits: Limits::default(),
        pipeline: None,
    };
    let clamped = clamp_to_nodes(&problem)?;
    notes.extend(clamped.notes);
    let objective = clamped.objective.unwrap_or(objective);
    Ok((clamped.workload.unwrap_or(w), objective))
}

/// `--batch` and `--seq` of an import, checked.
pub fn import_options(
    batch: Option<usize>,
    seq: Option<usize>,
    dtype: DType,
    training: bool,
) -> Result<ImportOptions, CliError> {
    let dimension = |flag: &str, v: Option<usize>| {
        v.map(|v| {
            in_range(
                flag,
                v,
                1,
                MAX_DIMENSION,
                "tensor sizes must stay exact in 64 bits",
            )
        })
        .transpose()
    };
    Ok(ImportOptions {
        batch: dimension("--batch", batch)?,
        seq: dimension("--seq", seq)?,
        dtype,
        training,
    })
}

/// The sizes of a generated transformer, checked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TransformerSizes {
    pub layers: usize,
    pub hidden: usize,
    pub heads: usize,
    /// `None`: the style's default.
    pub ffn: Option<usize>,
    /// `None`: the style's default.
    pub vocab: Option<usize>,
}

impl TransformerSizes {
    pub fn new(
        layers: usize,
        hidden: usize,
        heads: usize,
        ffn: Option<usize>,
        vocab: Option<usize>,
    ) -> Result<Self, CliError> {
        let why = "products such as batch·seq·hidden must stay exact in 64 bits";
        Ok(TransformerSizes {
            layers: in_range(
                "--layers",
                layers,
                1,
                MAX_LAYERS,
                "a block is about 20 operators: 10,000 blocks are 200,000 operators",
            )?,
            hidden: in_range("--hidden", hidden, 1, MAX_DIMENSION, why)?,
            heads: in_range("--heads", heads, 1, MAX_DIMENSION, why)?,
            ffn: ffn
                .map(|f| in_range("--ffn", f, 1, MAX_DIMENSION, why))
                .transpose()?,
            vocab: vocab
                .map(|v| in_range("--vocab", v, 1, MAX_DIMENSION, why))
                .transpose()?,
        })
    }
}

/// `--target-tps MS`: a time per sample from 1e-9 ms (a picosecond: below any device's
/// step) to 1e15 ms. Beyond, the cheapest-mix search reports ratios of hundreds of digits.
pub fn parse_target_tps(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) if (1e-9..=1e15).contains(&x) => Ok(x),
        _ => Err(format!(
            "'{text}' is not a time per sample from 1e-9 to 1e15 ms"
        )),
    }
}

/// A finite number >= 0 (`--budget`).
pub fn parse_nonnegative(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("'{text}' is not a finite number >= 0")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_accept_whole_numbers_in_any_notation() {
        assert_eq!(parse_count("12"), Ok(12));
        assert_eq!(parse_count("1_000_000"), Ok(1_000_000));
        assert_eq!(parse_count("1e8"), Ok(100_000_000));
        assert_eq!(parse_count("2.5e3"), Ok(2500));
        assert_eq!(parse_count("18446744073709551615"), Ok(usize::MAX));
        assert!(parse_count("1e99").unwrap_err().contains("too large"));
        assert!(parse_count("-1").unwrap_err().contains("not a count"));
        assert!(parse_count("1.5").unwrap_err().contains("not a count"));
        assert!(parse_count("lots").is_err());
    }

    #[test]
    fn ranges_name_the_flag_the_value_and_the_reason() {
        let e = time_limit("--time-limit", 1e99, "")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--time-limit 1e99 s is out of range (1 ms to 1e9 s"),
            "{e}"
        );
        assert!(time_limit("--time-limit", 0.0, "").is_err());
        assert_eq!(time_limit("--time-limit", 60.0, "").unwrap(), 60.0);
        let e = restarts(0).unwrap_err().to_string();
        assert!(
            e.contains("--restarts 0 is out of range (1 to 1000000)"),
            "{e}"
        );
        let e = memory_budget(1000.0).unwrap_err().to_string();
        assert!(
            e.contains("--memory-budget 1000 B is out of range (1 MiB to 1 PiB)"),
            "{e}"
        );
        assert_eq!(
            memory_budget(4.0 * 1024.0 * 1024.0 * 1024.0).unwrap(),
            4294967296.0
        );
        let e = import_options(Some(0), None, DType::Fp32, false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--batch 0 is out of range"), "{e}");
    }

    #[test]
    fn threads_beyond_the_cores_are_clamped_with_a_note() {
        let mut notes = Vec::new();
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        assert_eq!(threads(Some(1_000_000), &mut notes).unwrap(), Some(cores));
        assert!(notes[0].contains("--threads 1000000"), "{notes:?}");
        assert!(threads(Some(0), &mut notes).is_err());
    }
}

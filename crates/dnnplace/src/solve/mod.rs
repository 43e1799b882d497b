//! The placement methods, behind one interface.
//!
//! Every method takes a [`Problem`] (workload, device set, objective, contiguity, limits,
//! schedule) and returns an
//! [`Outcome`] (plan, objective, proven lower bound, [`Status`], statistics). [`plan`] runs
//! a method and re-scores its plan with the independent evaluator ([`crate::score`])
//! before anyone sees it: an invalid plan, a broken contiguity promise or an objective
//! that disagrees with the scorer is an error, never a result.
//!
//! - [`method`](mod@method): the [`Method`] trait, the typed [`MethodId`] and the registry;
//! - [`outcome`]: what a run returns, [`Status`], [`StopReason`] and [`Infeasibility`] as
//!   data;
//! - [`check`]: the internal checks every plan passes, [`CheckFailure`] as data;
//! - [`budget`]: the time and memory budget every method checks, and Ctrl-C;
//! - [`ideals`]: the lattice of ideals of the group DAG;
//! - [`ideal_cost`]: the load of `I \ J` from per-ideal summaries;
//! - [`leaf_folding`]: zero-cost leaves folded into their neighbour before the DP;
//! - [`knapsack`]: the fractional knapsack (compute CPUs can absorb), for the DP and bounds;
//! - [`bounds`]: the proven lower bounds every method reports its gap against (load,
//!   minimum cut, latency, and the cluster's);
//! - [`candidate`]: a held plan (warm start, baseline, heuristic) checked against the
//!   problem and scored;
//! - [`layer_granular`]: plans that cut only between layers (`--granularity layer`);
//! - [`dp`]: the contiguous max-load optimum by dynamic programming over ideals, the
//!   optimal split of one topological order ([`dp::chain`]) and the interleaved DP;
//! - [`split_search`]: the same optimum on graphs of at most 128 groups by branch and
//!   bound over stage splits (wide graphs whose ideal pairs the DP cannot afford);
//! - [`fork_join`]: the same optimum on one fork-join block by branch and bound;
//! - [`coarsen`]: multilevel coarsening, the DP on a coarse level, refinement back down;
//! - [`auto`]: the default method: the exact DP when its lattice fits the budget,
//!   otherwise the coarsened path, then the IP for what time is left;
//! - [`milp`]: integer programs on HiGHS (non-contiguous and contiguous max-load, sync,
//!   latency) and the HiGHS driver they share; [`guard`]: the numbers HiGHS accepts;
//! - [`brute_force`]: exhaustive search, the oracle of the tests;
//! - [`cluster`]: the same problem on a cluster of machines and device types: its DP,
//!   chains, IP, brute force, sweep and price frontier;
//! - [`learned`]: the learned placers (policy gradient, BRKGA) for the comparison;
//! - [`parallel`]: parallel layouts (stages × TP × DP × ZeRO × micro-batch), uniform,
//!   free and on several types, exactly, with their brute-force oracles;
//! - [`piper`]: Piper's problem (stages × t × d × recomputation), solved exactly;
//! - [`compare`]: every applicable method on one workload;
//! - [`baselines`]: the paper's baselines (PipeDream, local search, METIS, greedy,
//!   single accelerator, expert splits).

pub mod auto;
pub mod baselines;
pub mod bounds;
pub mod brute_force;
pub mod budget;
pub mod candidate;
pub mod check;
pub mod cluster;
pub mod coarsen;
pub mod compare;
pub mod dp;
pub mod fork_join;
pub mod guard;
pub mod ideal_cost;
pub mod ideals;
pub mod knapsack;
pub mod layer_granular;
pub mod leaf_folding;
pub mod learned;
pub mod method;
pub mod milp;
pub mod outcome;
pub mod parallel;
pub mod piper;
pub mod split_search;

pub use check::CheckFailure;
pub use method::{method, method_by_name, method_names, methods, Method, MethodId, Unsupported};
pub use outcome::{
    Infeasibility, LayoutFamily, Outcome, PartitionFailure, Provenance, Prover, Stats, Status,
    StopReason, TracePoint,
};

/// The relative gap within which a plan meets its lower bound when `--gap` is not given:
/// HiGHS's MIP gap, and the closeness at which the DPs call a plan at their load bound
/// proven (the bounds are flow values and compensated sums, exact only to rounding).
pub const DEFAULT_GAP: f64 = 1e-7;

/// Seconds auto may run when no time limit is given.
pub const DEFAULT_TIME_LIMIT_S: f64 = 60.0;

use crate::model::schedule::Pipeline;
use crate::model::{Cluster, DeviceSet, Placement, Platform, Reference, Workload};
use crate::score::{evaluate, pipeline_memory, DeviceMemory, Evaluation};

/// What to minimise.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Objective {
    /// Time-Per-Sample: the maximum device load.
    Throughput,
    /// Synchronous pipelines: `max_d FW(d) + max_d BW(d)`.
    Sync,
    /// Single-sample latency with at most `pieces` contiguous pieces per accelerator.
    Latency { pieces: usize },
}

impl Objective {
    /// The objective's value under the scorer.
    pub fn value(&self, e: &Evaluation) -> f64 {
        match self {
            Objective::Throughput => e.max_load,
            Objective::Sync => e.sync_objective,
            Objective::Latency { .. } => e.latency_total().unwrap_or(f64::INFINITY),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Objective::Throughput => "throughput (TPS)",
            Objective::Sync => "synchronous (max FW + max BW)",
            Objective::Latency { .. } => "latency",
        }
    }
}

/// Limits and knobs shared by the methods. Each field says which methods read it.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Wall-clock limit, seconds (DP, IP, local search). [default: none]
    pub time_limit_s: Option<f64>,
    /// Relative MIP gap at which to stop (IP). [default: solver default]
    pub mip_gap: Option<f64>,
    /// Threads (IP; the DP uses rayon's pool). More than the machine's cores is clamped to
    /// them. [default: all]
    pub threads: Option<usize>,
    /// Largest number of ideals the DP may enumerate (the memory budget may allow fewer;
    /// the error says which limit applied). [default: 2,000,000]
    pub max_ideals: usize,
    /// Random seed (local search, partitioner). [default: 1]
    pub seed: u64,
    /// Restarts (local search). [default: 10]
    pub restarts: usize,
    /// Policy-gradient steps (`rl`, default 1,000) or generations (`genetic`, default 100).
    /// [default: none: the method's own]
    pub search_steps: Option<usize>,
    /// Memory the methods may allocate for their own tables, bytes (the IP's model, local
    /// search's counts, the DP's tables; the CLI's `--memory-budget`, 4 GiB). [default: none]
    pub memory_budget_bytes: Option<f64>,
    /// Formulation switches of the IP (docs/ip.md). [default: the measured best]
    pub ip: milp::IpOptions,
    /// A plan to start from (IP: held and handed to HiGHS instead of running the DP for
    /// one; `auto` passes its contiguous plan this way). [default: none]
    pub warm_start: Option<Placement>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            time_limit_s: None,
            mip_gap: None,
            threads: None,
            max_ideals: 2_000_000,
            seed: 1,
            restarts: 10,
            search_steps: None,
            memory_budget_bytes: None,
            ip: milp::IpOptions::default(),
            warm_start: None,
        }
    }
}

impl Limits {
    /// A [`budget::Budget`] starting now with these limits.
    pub fn budget(&self) -> budget::Budget {
        budget::Budget::new(self.time_limit_s, self.memory_budget_bytes)
    }
}

/// The device set a problem is planned on. MODEL.md's `k` identical accelerators and `ℓ`
/// CPU cores are the one-machine cluster ([`Devices::as_cluster`], [`Cluster::model_md`]);
/// [`plan`] gives them to the single-machine methods, the fast path, and a cluster of
/// several machines or types to the cluster methods ([`cluster::plan::OnCluster`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Devices<'a> {
    /// MODEL.md's device set: `k` accelerators of one memory and `ℓ` CPU cores.
    OneMachine(&'a DeviceSet),
    /// A cluster: machines with accelerators of one or several types, CPU cores and links.
    Cluster(&'a Cluster),
}

impl<'a> Devices<'a> {
    /// The workload's own device set: its cluster when it has one, else MODEL.md's.
    pub fn of(w: &'a Workload) -> Devices<'a> {
        match w.cluster() {
            Some(c) => Devices::Cluster(c),
            None => Devices::OneMachine(w.devices()),
        }
    }

    /// Whether this is `w`'s own device set ([`Devices::of`]).
    pub fn is_of(&self, w: &Workload) -> bool {
        match (self, w.cluster()) {
            (Devices::Cluster(c), Some(own)) => std::ptr::eq(*c, own) || *c == own,
            (Devices::OneMachine(d), None) => std::ptr::eq(*d, w.devices()) || *d == w.devices(),
            _ => false,
        }
    }

    /// The device set as a cluster: a cluster as it is, MODEL.md's as the one-machine
    /// cluster priced against `reference` ([`Cluster::model_md`]).
    pub fn as_cluster(&self, reference: &Reference) -> std::borrow::Cow<'a, Cluster> {
        match *self {
            Devices::Cluster(c) => std::borrow::Cow::Borrowed(c),
            Devices::OneMachine(d) => std::borrow::Cow::Owned(Cluster::model_md(d, reference)),
        }
    }

    /// `w` with this device set in place of its own (`None` when it is already `w`'s).
    fn applied_to(&self, w: &Workload) -> Result<Option<Workload>, crate::model::WorkloadError> {
        if self.is_of(w) {
            return Ok(None);
        }
        match *self {
            Devices::OneMachine(d) => w.with_devices(d.clone()).map(Some),
            Devices::Cluster(c) => w
                .with_platform(Platform {
                    cluster: Some(c.clone()),
                    ..w.platform().clone()
                })
                .map(Some),
        }
    }
}

/// One placement problem: the workload, the device set it is placed on, the objective,
/// the plan space (contiguity), the limits and the pipeline schedule.
#[derive(Clone, Debug)]
pub struct Problem<'a> {
    pub workload: &'a Workload,
    /// The device set ([`Devices::of`] the workload unless a problem asks for another:
    /// [`plan`] then plans the workload on this one).
    pub devices: Devices<'a>,
    pub objective: Objective,
    /// Only contiguous placements are allowed.
    pub contiguous: bool,
    pub limits: Limits,
    /// Stage memory as a pipeline schedule keeps it in flight (`None`: MODEL.md's memory;
    /// only the DP plans under it).
    pub pipeline: Option<Pipeline>,
}

impl<'a> Problem<'a> {
    /// Whether the plan is made for the interleaved schedule: its devices hold chunks that
    /// form a chain of ideals together ([`crate::score::contiguity::interleaved_stages`],
    /// checked with the memory) instead of one contiguous stage each.
    pub fn interleaved(&self) -> bool {
        self.pipeline.is_some_and(|p| p.schedule.chunks() > 1)
    }

    /// Whether the interleaved schedule can run this problem at all, the conditions every
    /// interleaved method shares (the DP's and the IP's): the schedule's order exists for
    /// the accelerators and micro-batches (Megatron-LM's rules: `m` a multiple of `p`), and
    /// no node is CPU-only (a chunk's device is an accelerator). `Ok` when the schedule is
    /// not interleaved.
    pub fn interleaved_supported(&self) -> Result<(), Unsupported> {
        let Some(pipeline) = self.pipeline.filter(|_| self.interleaved()) else {
            return Ok(());
        };
        let w = self.workload;
        crate::model::schedule::compressed_order(
            pipeline.schedule,
            w.devices().accelerators.max(1),
            pipeline.micro_batches,
            0,
        )
        .map_err(|e| Unsupported::ScheduleOrder {
            schedule: pipeline.schedule.to_string(),
            accelerators: w.devices().accelerators,
            reason: e.to_string(),
        })?;
        if let Some(v) = (0..w.len()).find(|&v| !w.node(v).supported_on_accelerator) {
            return Err(Unsupported::InterleavedCpuOnly {
                id: w.node(v).id,
                name: w.node(v).name.as_deref().unwrap_or("unnamed").into(),
            });
        }
        Ok(())
    }

    /// The same objective, plan space, limits and schedule on `workload` with its own
    /// device set: for a transformed copy of this problem's workload (resized, relabelled,
    /// presolved) that a method solves in its place.
    pub fn on<'b>(&self, workload: &'b Workload) -> Problem<'b> {
        Problem {
            workload,
            devices: Devices::of(workload),
            objective: self.objective,
            contiguous: self.contiguous,
            limits: self.limits.clone(),
            pipeline: self.pipeline,
        }
    }

    /// Contiguous TPS minimisation with default limits.
    pub fn throughput(workload: &'a Workload) -> Self {
        Problem {
            workload,
            devices: Devices::of(workload),
            objective: Objective::Throughput,
            contiguous: true,
            limits: Limits::default(),
            pipeline: None,
        }
    }
}

/// Errors of solving (not of finding no placement, which is [`Status::Infeasible`]).
#[derive(Debug, thiserror::Error)]
pub enum SolveError {
    /// The DP's ideals exceed `limit`, the smaller of `--max-ideals` and what the DP's memory
    /// budget holds for the device count; `which` says which applied and how `found` was
    /// counted.
    #[error("the group DAG has more than {limit} ideals, the most {which}; coarsen the graph (fuse layers) or use --method ip")]
    TooManyIdeals {
        found: usize,
        limit: usize,
        which: String,
    },
    /// A method ran out of its budget (time, Ctrl-C, memory) before it had a plan;
    /// `detail` says how far it got and what to change.
    #[error("{method} stopped without a plan: {reason} {detail}")]
    Stopped {
        method: MethodId,
        reason: budget::Exhausted,
        detail: String,
    },
    #[error("method {method} does not support {what}")]
    Unsupported { method: MethodId, what: String },
    /// A cluster refuses the method, objective or plan space
    /// ([`cluster::plan::ClusterMethod::choose`]).
    #[error("on a cluster, {0}")]
    OnCluster(#[from] cluster::plan::ClusterRefusal),
    /// HiGHS refused the model, an option or the warm start, or failed
    /// ([`milp::highs::HighsFailure`], with HiGHS's own status where it gives one).
    #[error("solver failure: {0}")]
    Solver(milp::highs::HighsFailure),
    /// A plan failed an internal check ([`CheckFailure`]): a bug, never an answer.
    #[error("internal check failed: {0}")]
    Check(CheckFailure),
}

/// A checked plan: the method's outcome and the scorer's evaluation of it.
#[derive(Clone, Debug)]
pub struct Plan {
    pub outcome: Outcome,
    pub evaluation: Option<Evaluation>,
    /// Every device's memory under the problem's schedule, as the scorer computes it
    /// ([`crate::score::pipeline_memory`]); `None` without a schedule or a plan.
    pub pipeline_memory: Option<Vec<DeviceMemory>>,
    /// On a cluster: the checked plan with the cluster scorer's evaluation (`evaluation`
    /// is then `None`); `None` on one machine.
    pub cluster: Option<cluster::plan::ClusterPlan>,
}

impl Plan {
    /// The objective as the scorer computes it (infinite when there is no plan).
    pub fn objective(&self, objective: Objective) -> f64 {
        if let Some(c) = &self.cluster {
            return c.best.as_ref().map_or(f64::INFINITY, |b| b.value);
        }
        self.evaluation
            .as_ref()
            .map_or(f64::INFINITY, |e| objective.value(e))
    }
}

/// The most chunks per accelerator the interleaved planners take: the interleaved DP
/// numbers a device's chunks with a byte. (Chunks may be empty, so more chunks than nodes
/// is a valid, if useless, schedule: the brute force and the DP agree on it.)
pub const MAX_CHUNKS: usize = 256;

/// `interleaved:v` with `v` ≤ [`MAX_CHUNKS`] (`v` ≥ 100,000 aborted the interleaved
/// planners' allocations; an error naming the largest `v` instead).
pub fn check_chunks(method: MethodId, w: &Workload, v: usize) -> Result<(), SolveError> {
    let p = w.devices().accelerators;
    if v > MAX_CHUNKS {
        return Err(SolveError::Unsupported {
            method,
            what: format!(
                "--schedule interleaved:{v} on {p} accelerator{} and {} nodes: more than {MAX_CHUNKS} chunks per accelerator; use at most interleaved:{MAX_CHUNKS}",
                if p == 1 { "" } else { "s" },
                w.len()
            ),
        });
    }
    Ok(())
}

/// Runs `method` on `problem` and re-scores its plan. Fails if the plan breaks a rule,
/// breaks a promised contiguity or piece limit, or if the method's objective differs from
/// the scorer's beyond the method's tolerance.
///
/// A method that searches ([`MethodId::searches`]) runs on the problem with its device
/// counts and piece limit clamped to the node count ([`clamp_to_nodes`]); the plan is
/// scored against the problem as given.
///
/// # Example
///
/// The contiguous TPS optimum of a three-layer chain on two accelerators and a CPU core:
/// ```
/// use dnnplace::io::parse_workload;
/// use dnnplace::solve::{dp::Dp, method, plan, MethodId, Objective, Problem, Status};
///
/// let w = parse_workload(r#"{"maxSizePerFPGA": 1e9, "maxFPGAs": 2, "maxCPUs": 1,
///     "nodes": [{"id": 1, "fpgaLatency": 2, "cpuLatency": 20},
///               {"id": 2, "fpgaLatency": 3, "cpuLatency": 30},
///               {"id": 3, "fpgaLatency": 2, "cpuLatency": 20}],
///     "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5},
///               {"sourceId": 2, "destId": 3, "cost": 0.5}]}"#)?;
/// let checked = plan(&Dp, &Problem::throughput(&w))?;
/// assert_eq!(checked.outcome.status, Status::Optimal);
/// // {1, 2} | {3}: loads 2 + 3 + 0.5 (sending 2's output) and 2 + 0.5 (receiving it).
/// assert_eq!(checked.objective(Objective::Throughput), 5.5);
///
/// // Any method by its id; a heuristic makes no claim.
/// let greedy = plan(method(MethodId::Greedy).as_ref(), &Problem::throughput(&w))?;
/// assert_eq!(greedy.outcome.status, Status::Heuristic);
/// assert!(greedy.objective(Objective::Throughput) >= 5.5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn plan(method: &dyn Method, problem: &Problem) -> Result<Plan, SolveError> {
    let placed;
    let moved;
    let problem = match problem.devices.applied_to(problem.workload) {
        Ok(None) => problem,
        Ok(Some(w)) => {
            placed = w;
            moved = Problem {
                workload: &placed,
                devices: Devices::of(&placed),
                ..problem.clone()
            };
            &moved
        }
        Err(e) => {
            return Err(SolveError::Unsupported {
                method: method.id(),
                what: format!("the problem's device set: {e}"),
            })
        }
    };
    if let Devices::Cluster(_) = problem.devices {
        return plan_on_cluster(method, problem);
    }
    // Under the interleaved schedule the accelerators' indices are positions on the
    // chain (stage c·k + d): their count is the pipeline's, not clamped.
    let clamped = if method.id().searches() && !problem.interleaved() {
        clamp_to_nodes(problem)?
    } else {
        Clamped::default()
    };
    let narrowed;
    let run = if clamped.workload.is_some() || clamped.objective.is_some() {
        let workload = clamped.workload.as_ref().unwrap_or(problem.workload);
        narrowed = Problem {
            workload,
            devices: Devices::of(workload),
            objective: clamped.objective.unwrap_or(problem.objective),
            contiguous: problem.contiguous,
            limits: problem.limits.clone(),
            pipeline: problem.pipeline,
        };
        &narrowed
    } else {
        problem
    };
    if let Some(pipeline) = problem.pipeline.filter(|_| problem.interleaved()) {
        check_chunks(method.id(), problem.workload, pipeline.schedule.chunks())?;
    }
    if problem.pipeline.is_some()
        && !matches!(method.id(), MethodId::Dp | MethodId::Auto | MethodId::Ip)
    {
        return Err(SolveError::Unsupported {
            method: method.id(),
            what: "planning under a schedule's memory (--schedule; use --method dp or ip)".into(),
        });
    }
    method
        .supports(run)
        .map_err(|why| SolveError::Unsupported {
            method: method.id(),
            what: why.to_string(),
        })?;
    let start = std::time::Instant::now();
    let mut outcome = method.solve(run)?;
    outcome.stats.notes.splice(0..0, clamped.notes);
    // The whole method's time: an IP's held plans and presolve run before its model.
    outcome.stats.time_s = start.elapsed().as_secs_f64();
    let Some(placement) = &outcome.placement else {
        return Ok(Plan {
            outcome,
            evaluation: None,
            pipeline_memory: None,
            cluster: None,
        });
    };
    let evaluation = checked_evaluation(method, problem, placement)?;
    let latency_rules = matches!(problem.objective, Objective::Latency { .. });
    let pipeline_memory = match &problem.pipeline {
        Some(pipeline) => Some(checked_pipeline_memory(
            method,
            problem.workload,
            placement,
            pipeline,
        )?),
        None => None,
    };
    if latency_rules && placement.pieces.is_none() {
        outcome.placement = Some(evaluation.attach_cut(placement.clone()));
    }
    let scored = problem.objective.value(&evaluation);
    let tolerance = method.tolerance();
    if (scored - outcome.objective).abs() > tolerance * scored.abs().max(1.0) {
        return Err(SolveError::Check(CheckFailure::ObjectiveMismatch {
            method: method.id(),
            claimed: outcome.objective,
            rescored: scored,
        }));
    }
    outcome.objective = scored;
    if outcome.bound > scored {
        // A bound above a plan we hold is unsound (MODEL.md, Numerics): clamp and say so.
        outcome.stats.notes.push(format!(
            "the reported bound {} exceeded the plan's score; clamped",
            outcome.bound
        ));
        outcome.bound = scored;
    }
    Ok(Plan {
        outcome,
        evaluation: Some(evaluation),
        pipeline_memory,
        cluster: None,
    })
}

/// The scorer's evaluation of `method`'s `placement` for `problem` (under the interleaved
/// schedule without contiguity or latency: its chain of chunks is checked with the memory);
/// an error when the plan breaks a rule, a promised contiguity or the piece limit.
fn checked_evaluation(
    method: &dyn Method,
    problem: &Problem,
    placement: &Placement,
) -> Result<Evaluation, SolveError> {
    let latency_rules = matches!(problem.objective, Objective::Latency { .. });
    let mut evaluation = evaluate(problem.workload, placement, latency_rules);
    if problem.interleaved() {
        // A device holds several chunks, which are not one contiguous set: the chain of
        // chunks (checked with the memory below) is what the plan promises instead. One
        // sample's latency would run each chunk (forward and backward passes) as one call,
        // which no training graph can: it is not computed.
        evaluation.non_contiguous.clear();
        evaluation.latency = None;
    }
    if let Some(v) = evaluation.violations.first() {
        return Err(SolveError::Check(CheckFailure::InvalidPlan {
            method: method.id(),
            violation: v.clone(),
        }));
    }
    if problem.contiguous && !problem.interleaved() {
        if let Some(v) = evaluation.non_contiguous.first() {
            return Err(SolveError::Check(CheckFailure::NotContiguous {
                method: method.id(),
                violation: v.clone(),
            }));
        }
    }
    if let Objective::Latency { pieces } = problem.objective {
        if evaluation.max_pieces() > pieces {
            return Err(SolveError::Check(CheckFailure::TooManyPieces {
                method: method.id(),
                pieces: evaluation.max_pieces(),
                allowed: pieces,
            }));
        }
    }
    Ok(evaluation)
}

/// [`plan`] on a workload with a cluster: the cluster method chosen for `method`
/// ([`cluster::plan::OnCluster::choose`]; `auto` is the cluster DP) plans it and the
/// cluster scorer checks the plan ([`cluster::plan`]).
fn plan_on_cluster(method: &dyn Method, problem: &Problem) -> Result<Plan, SolveError> {
    let chosen = cluster::plan::OnCluster::choose(method.id(), problem)?;
    let checked = chosen.plan(problem)?;
    Ok(Plan {
        outcome: checked.outcome(),
        evaluation: None,
        pipeline_memory: None,
        cluster: Some(checked),
    })
}

/// Whether `method` plans `problem`: on one machine, [`Method::supports`]; on a cluster,
/// whether a cluster method answers for it ([`cluster::plan::ClusterMethod::choose`]).
pub fn supports(method: &dyn Method, problem: &Problem) -> Result<(), Unsupported> {
    if let Devices::Cluster(_) = problem.devices {
        return cluster::plan::OnCluster::choose(method.id(), problem)
            .map(|_| ())
            .map_err(Unsupported::OnCluster);
    }
    method.supports(problem)
}

/// The scorer's memory of every device under `pipeline`; an error if an accelerator
/// holds more than its memory.
fn checked_pipeline_memory(
    method: &dyn Method,
    w: &Workload,
    placement: &Placement,
    pipeline: &Pipeline,
) -> Result<Vec<DeviceMemory>, SolveError> {
    let limit = w.devices().memory_per_accelerator_bytes;
    let memory = pipeline_memory(w, placement, pipeline).map_err(|error| {
        SolveError::Check(CheckFailure::PipelineMemory {
            method: method.id(),
            error,
        })
    })?;
    if let Some(d) = memory
        .iter()
        .find(|d| d.device.is_accelerator() && d.bytes > limit * (1.0 + 1e-9))
    {
        return Err(SolveError::Check(CheckFailure::MemoryExceeded {
            method: method.id(),
            memory: Box::new(d.clone()),
            schedule: pipeline.schedule,
            limit_bytes: limit,
        }));
    }
    Ok(memory)
}

/// What [`clamp_to_nodes`] changed: the workload with k and ℓ clamped and the latency
/// objective with q clamped (each `None` when already within n), and a note per change.
#[derive(Debug, Default)]
pub struct Clamped {
    pub workload: Option<Workload>,
    pub objective: Option<Objective>,
    pub notes: Vec<String>,
}

/// Clamps what a problem allows to what a plan on its n nodes can use: every node is on one
/// device, so a plan uses at most n accelerators, n CPUs and n pieces per accelerator, and
/// k' = min(k, n), ℓ' = min(ℓ, n), q' = min(q, n) define the same problem. Methods size
/// tables by k, ℓ and q (the DP's (k+1)(ℓ+1) device states, the IPs' k·q slots), so this
/// keeps those sizes polynomial in n whatever the input says (a `maxFPGAs` of 2⁶³ included).
/// O(n + m) when something is clamped (the workload is copied), O(1) otherwise.
pub fn clamp_to_nodes(problem: &Problem) -> Result<Clamped, SolveError> {
    let w = problem.workload;
    let n = w.len();
    let nodes = if n == 1 {
        "1 node".to_string()
    } else {
        format!("{n} nodes")
    };
    let d = w.devices();
    let mut out = Clamped::default();
    let devices = d.clamped_to(n);
    if devices != *d {
        for (what, given) in [("accelerators", d.accelerators), ("CPUs", d.cpus)] {
            if given > n {
                out.notes.push(format!(
                    "{given} {what} for {nodes}: a plan puts each node on one device, so it was planned with {n}"
                ));
            }
        }
        out.workload = Some(
            w.with_devices(devices)
                .map_err(|e| SolveError::Check(CheckFailure::ClampedDevices(e)))?,
        );
    }
    if let Objective::Latency { pieces } = problem.objective {
        if pieces > n {
            out.notes.push(format!(
                "{pieces} pieces per accelerator for {nodes}: an accelerator holds at most one piece per node, so it was planned with {n}"
            ));
            out.objective = Some(Objective::Latency { pieces: n });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamping_keeps_what_a_plan_can_use() {
        let w = crate::io::parse_workload(
            r#"{"maxSizePerFPGA": 1, "maxFPGAs": 18446744073709551615, "maxCPUs": 2, "edges": [],
                "nodes": [{"id": 0, "fpgaLatency": 1, "cpuLatency": 1}, {"id": 1, "fpgaLatency": 1, "cpuLatency": 1},
                          {"id": 2, "fpgaLatency": 1, "cpuLatency": 1}]}"#,
        )
        .unwrap();
        let problem = Problem {
            objective: Objective::Latency { pieces: 10 },
            ..Problem::throughput(&w)
        };
        let c = clamp_to_nodes(&problem).unwrap();
        let d = c.workload.as_ref().unwrap().devices();
        assert_eq!((d.accelerators, d.cpus), (3, 2));
        assert_eq!(c.objective, Some(Objective::Latency { pieces: 3 }));
        assert_eq!(c.notes.len(), 2, "{:?}", c.notes);
        let fitting = Problem::throughput(c.workload.as_ref().unwrap());
        let again = clamp_to_nodes(&fitting).unwrap();
        assert!(again.workload.is_none() && again.objective.is_none() && again.notes.is_empty());
    }
}

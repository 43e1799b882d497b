//! The placement methods, behind one interface.
//!
//! Every method takes a [`Problem`] (workload, objective, contiguity, limits) and returns an
//! [`Outcome`] (plan, objective, proven lower bound, [`Status`], statistics). [`plan`] runs
//! a method and re-scores its plan with the independent evaluator ([`crate::score`])
//! before anyone sees it: an invalid plan, a broken contiguity promise or an objective
//! that disagrees with the scorer is an error, never a result.
//!
//! - [`budget`]: the time and memory budget every method checks, and Ctrl-C;
//! - [`ideals`]: the lattice of ideals of the group DAG;
//! - [`ideal_cost`]: the load of `I \ J` from per-ideal summaries;
//! - [`chain`]: optimal split of one topological order into consecutive stages;
//! - [`leaf_folding`]: zero-cost leaves folded into their neighbour before the DP;
//! - [`dp`]: the contiguous max-load optimum by dynamic programming over ideals;
//! - [`milp`]: integer programs on HiGHS (non-contiguous and contiguous max-load, sync,
//!   latency);
//! - [`brute_force`]: exhaustive search, the oracle of the tests;
//! - [`compare`]: every applicable method on one workload;
//! - [`baselines`]: the paper's baselines (PipeDream, local search, METIS, greedy,
//!   single accelerator, expert splits).

pub mod baselines;
pub mod brute_force;
pub mod budget;
pub mod chain;
pub mod compare;
pub mod dp;
pub mod ideal_cost;
pub mod ideals;
pub mod leaf_folding;
pub mod milp;

use crate::model::{Placement, Workload};
use crate::score::{evaluate, Evaluation};

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
            Objective::Latency { .. } => e.latency.total,
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
    /// Wall-clock limit, seconds (IP, local search). [default: none]
    pub time_limit_s: Option<f64>,
    /// Relative MIP gap at which to stop (IP). [default: solver default]
    pub mip_gap: Option<f64>,
    /// Threads (IP; the DP uses rayon's pool). [default: all]
    pub threads: Option<usize>,
    /// Largest number of ideals the DP may enumerate. [default: 2,000,000]
    pub max_ideals: usize,
    /// Random seed (local search, partitioner). [default: 1]
    pub seed: u64,
    /// Restarts (local search). [default: 10]
    pub restarts: usize,
    /// Memory the methods may allocate for their own tables, bytes. [default: none]
    pub memory_budget_bytes: Option<f64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { time_limit_s: None, mip_gap: None, threads: None, max_ideals: 2_000_000, seed: 1, restarts: 10, memory_budget_bytes: None }
    }
}

impl Limits {
    /// A [`budget::Budget`] starting now with these limits.
    pub fn budget(&self) -> budget::Budget {
        budget::Budget::new(self.time_limit_s, self.memory_budget_bytes)
    }
}

/// One placement problem.
#[derive(Clone, Debug)]
pub struct Problem<'a> {
    pub workload: &'a Workload,
    pub objective: Objective,
    /// Only contiguous placements are allowed.
    pub contiguous: bool,
    pub limits: Limits,
}

impl<'a> Problem<'a> {
    /// Contiguous TPS minimisation with default limits.
    pub fn throughput(workload: &'a Workload) -> Self {
        Problem { workload, objective: Objective::Throughput, contiguous: true, limits: Limits::default() }
    }
}

/// How a method's run ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    /// The plan is optimal (bound = objective).
    Optimal,
    /// A plan was found; the gap to the bound is not closed. `reason` says why it stopped.
    Feasible { reason: String },
    /// A heuristic: a plan with no optimality claim.
    Heuristic,
    /// No placement satisfies the rules; the reason says which rule to relax.
    Infeasible { reason: String },
}

/// Counters a method reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    pub time_s: f64,
    /// Ideals enumerated (DP).
    pub ideals: Option<usize>,
    /// Pairs `J ⊂ I` whose load was evaluated (DP).
    pub ideal_pairs: Option<u64>,
    /// Groups after colour-class contraction.
    pub groups: Option<usize>,
    /// Free-form notes (what was pruned, solver messages).
    pub notes: Vec<String>,
}

/// What a method returns.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub method: String,
    pub placement: Option<Placement>,
    /// The method's own objective value (re-checked by [`plan`]).
    pub objective: f64,
    /// A proven lower bound on the optimum (0 when the method proves none).
    pub bound: f64,
    pub status: Status,
    pub stats: Stats,
}

/// Errors of solving (not of finding no placement, which is [`Status::Infeasible`]).
#[derive(Debug, thiserror::Error)]
pub enum SolveError {
    #[error("the forward graph has more than {limit} ideals ({found} found before stopping); coarsen the graph (fuse layers) or use --method ip")]
    TooManyIdeals { found: usize, limit: usize },
    #[error("method {method} does not support {what}")]
    Unsupported { method: String, what: String },
    #[error("solver failure: {0}")]
    Solver(String),
    #[error("internal check failed: {0}")]
    Check(String),
}

/// A placement method.
pub trait Method: Sync {
    /// Short name used on the command line (`dp`, `ip`, `brute-force`, ...).
    fn name(&self) -> &'static str;
    /// Whether the method handles this problem (objective, contiguity); `Err` says why not.
    fn supports(&self, problem: &Problem) -> Result<(), String>;
    /// Solves; the plan is checked by [`plan`], not here.
    fn solve(&self, problem: &Problem) -> Result<Outcome, SolveError>;
    /// Whether the method proves optimality (an exact solver rather than a heuristic).
    /// `compare` uses it to skip re-proving a contiguous optimum another method has
    /// proven. [default: true for the registry's exact methods `dp`, `ip`, `brute-force`]
    fn proves_optimality(&self) -> bool {
        matches!(self.name(), "dp" | "ip" | "brute-force")
    }
    /// Relative tolerance between the method's objective and the scorer's. [default: 1e-9]
    fn tolerance(&self) -> f64 {
        1e-9
    }
}

/// A checked plan: the method's outcome and the scorer's evaluation of it.
#[derive(Clone, Debug)]
pub struct Plan {
    pub outcome: Outcome,
    pub evaluation: Option<Evaluation>,
}

impl Plan {
    /// The objective as the scorer computes it (infinite when there is no plan).
    pub fn objective(&self, objective: Objective) -> f64 {
        self.evaluation.as_ref().map_or(f64::INFINITY, |e| objective.value(e))
    }
}

/// Runs `method` on `problem` and re-scores its plan. Fails if the plan breaks a rule,
/// breaks a promised contiguity or piece limit, or if the method's objective differs from
/// the scorer's beyond the method's tolerance.
pub fn plan(method: &dyn Method, problem: &Problem) -> Result<Plan, SolveError> {
    method
        .supports(problem)
        .map_err(|what| SolveError::Unsupported { method: method.name().into(), what })?;
    let start = std::time::Instant::now();
    let mut outcome = method.solve(problem)?;
    if outcome.stats.time_s == 0.0 {
        outcome.stats.time_s = start.elapsed().as_secs_f64();
    }
    let Some(placement) = &outcome.placement else {
        return Ok(Plan { outcome, evaluation: None });
    };
    let latency_rules = matches!(problem.objective, Objective::Latency { .. });
    let evaluation = evaluate(problem.workload, placement, latency_rules);
    if let Some(v) = evaluation.violations.first() {
        return Err(SolveError::Check(format!("{} produced an invalid plan: {v}", method.name())));
    }
    if problem.contiguous {
        if let Some(v) = evaluation.non_contiguous.first() {
            return Err(SolveError::Check(format!("{} promised a contiguous plan: {v}", method.name())));
        }
    }
    if let Objective::Latency { pieces } = problem.objective {
        if evaluation.latency.max_pieces() > pieces {
            return Err(SolveError::Check(format!(
                "{} produced {} pieces on one accelerator, more than the {pieces} allowed",
                method.name(),
                evaluation.latency.max_pieces()
            )));
        }
    }
    if latency_rules && placement.pieces.is_none() {
        outcome.placement = Some(evaluation.latency.attach_cut(placement.clone()));
    }
    let scored = problem.objective.value(&evaluation);
    let tolerance = method.tolerance();
    if (scored - outcome.objective).abs() > tolerance * scored.abs().max(1.0) {
        return Err(SolveError::Check(format!(
            "{} reported objective {} but the scorer computes {scored}",
            method.name(),
            outcome.objective
        )));
    }
    outcome.objective = scored;
    if outcome.bound > scored {
        // A bound above a plan we hold is unsound (MODEL.md, Numerics): clamp and say so.
        outcome.stats.notes.push(format!("the reported bound {} exceeded the plan's score; clamped", outcome.bound));
        outcome.bound = scored;
    }
    Ok(Plan { outcome, evaluation: Some(evaluation) })
}

/// Every method the command line knows, by name.
pub fn methods() -> Vec<Box<dyn Method>> {
    vec![
        Box::new(dp::Dp),
        Box::new(milp::Ip),
        Box::new(baselines::pipedream::PipeDream),
        Box::new(baselines::pipedream::PipeDreamTopo),
        Box::new(baselines::local_search::LocalSearch),
        Box::new(baselines::partitioner::Partitioner),
        Box::new(baselines::greedy::Greedy),
        Box::new(baselines::single::Single),
        Box::new(baselines::expert::Expert::default()),
        Box::new(brute_force::BruteForce),
    ]
}

/// Names of [`methods`].
pub fn method_names() -> Vec<&'static str> {
    methods().iter().map(|m| m.name()).collect()
}

/// The method called `name`.
pub fn method_by_name(name: &str) -> Option<Box<dyn Method>> {
    methods().into_iter().find(|m| m.name() == name)
}

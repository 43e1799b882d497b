//! Integer programs solved with HiGHS (`--method ip`): the non-contiguous and contiguous
//! max-load problems, the synchronous objective and single-sample latency.
//!
//! - [`units`]: what the IP places (colour classes, or SCC-fused groups when contiguous,
//!   as a [`Grouping`](crate::model::grouping::Grouping)), the cut indicator of a
//!   communication hyperedge and the contiguity and symmetry constraints shared by the
//!   models;
//! - [`throughput`]: max-load (TPS) and `max FW + max BW` (sync), non-contiguous;
//! - [`stages`]: the same objectives, contiguous, as a chain of ideals;
//! - [`crate::solve::cluster::ip`]: max-load on a cluster (per-type times and memory,
//!   communication by where the data goes), non-contiguous or in the cluster DP's
//!   contiguous plan space — beside the cluster DP, on this driver;
//! - [`latency`]: the call model with up to `q` pieces per accelerator;
//! - [`latency_runs`]: held plans for it, topological orders cut into runs by a DP;
//! - [`crate::solve::guard`]: the numeric guard every model passes before HiGHS sees it (numbers HiGHS
//!   would refuse stop the IP with a clear error, never a panic);
//! - [`options`]: `--highs-option` checked against HiGHS's own option table;
//! - [`second_opinion`]: every "optimal" or "infeasible" of HiGHS's own is checked by
//!   another run (another `random_seed`, no warm start, objective bound below the claimed
//!   optimum) before it is believed;
//! - [`presolve`]: what HiGHS sees — coefficients capped against a held plan and rescaled
//!   by powers of two so HiGHS never rejects a finite model, and the answer cross-checked
//!   against the original workload;
//! - [`highs`]: the HiGHS driver every model runs on — the model [`Builder`](highs::Builder),
//!   limits and `--highs-option`s, warm start, the progress and interrupt callbacks,
//!   HiGHS's result as [`Solved`](highs::Solved);
//! - this file: the [`Ip`] method, its options, the held plans it starts from and the
//!   mapping of a run to an [`Outcome`] ([`finish`], [`status_with_plan`]).
//!
//! The combinatorial bounds the models take as the lower bound of their objective column
//! are in [`crate::solve::bounds`] (load, minimum cut, latency).
//!
//! Each model reads like its module doc (as egg writes its ILP extraction): a struct of
//! its variables, one `add_<family>` method per constraint family of the doc (its formula
//! in the method's doc comment), the warm-start values of a held plan, and the extraction
//! of a plan from HiGHS's solution.
//!
//! # Honesty
//! The IP's own objective value is never reported: the plan read off the solution is
//! re-scored by [`crate::score::evaluate`] and that score is the objective. The best plan
//! we already hold (the DP plan; for latency also "all on CPU", "one accelerator" and the greedy baseline) is
//! passed to HiGHS as a warm start *and* kept: the IP returns whichever plan scores
//! better, so it is never worse. HiGHS's dual bound is the reported lower bound; if it
//! exceeds a plan we hold (beyond the solver's tolerances) it is clamped, noted, and the
//! result is not called optimal. For the max-load and sync models the bound is the larger
//! of HiGHS's and the combinatorial one of [`crate::solve::bounds::load`], and HiGHS is stopped
//! (`run_to`) once its incumbent meets the latter. [`Status::Optimal`] means HiGHS proved
//! optimality (and a second run along another search path, [`second_opinion`], found nothing
//! better), or was stopped at the combinatorial bound, at relative gap [`DEFAULT_GAP`]
//! (or 1e-5, relative above 1, absolute below: the solver's own tolerance per MODEL.md)
//! *and* the scored plan agrees.
//!
//! # Tolerances
//! HiGHS's feasibility tolerances stay at their defaults (MODEL.md, Numerics); only the
//! termination gap is tightened from HiGHS's 1e-4 to [`DEFAULT_GAP`] unless `--gap` says
//! otherwise.
//!
//! # Time, memory, progress and Ctrl-C
//! One [`Budget`] per solve (`--time-limit`, `--memory-budget`): the combinatorial bounds
//! take a share of it and stop early with the best bound proven so far; the model
//! [`Builder`](highs::Builder) counts the columns, rows and nonzeros it hands to HiGHS and stops adding
//! rows once HiGHS's estimated memory ([`Builder::estimated_bytes`](highs::Builder::estimated_bytes)) exceeds the budget
//! (the IP then stops with [`StopReason::MemoryBudget`], naming the model's size and
//! `--memory-budget`), or once the time is up; HiGHS gets the time that is left, and is
//! not started when none is.
//! HiGHS callbacks (`kHighsCallbackMipInterrupt`, `kHighsCallbackSimplexInterrupt` and
//! `kHighsCallbackIpmInterrupt`, for a root LP solved by interior point,
//! through `highs-sys`) are installed on every solve: they poll [`interrupt_requested`]
//! and the deadline and ask HiGHS to stop, which returns the best incumbent found so
//! far; and, if a progress hook was registered with
//! [`set_progress_hook`](highs::set_progress_hook), it calls it about once a second with the incumbent, the bound
//! and the elapsed time. The library itself never prints; the CLI registers a hook that
//! writes to stderr when stderr is a terminal, and a SIGINT handler that calls
//! [`request_interrupt`].

pub mod highs;
pub mod interleaved;
pub mod latency;
pub mod latency_runs;
pub mod options;
pub mod presolve;
pub mod second_opinion;
pub mod stages;
pub mod throughput;
pub mod units;

use std::time::Instant;

use super::bounds::load::LoadBoundUse;
use super::budget::Budget;
use super::candidate::{candidate, Candidate};
use super::{
    CheckFailure, Infeasibility, Method, MethodId, Objective, Outcome, Problem, SolveError, Stats,
    Status, StopReason, Unsupported, DEFAULT_GAP,
};
use crate::model::Placement;
use ::highs::HighsModelStatus;
use highs::{stop_reason, Solved};

/// Relative tolerance between the IP's plan and the scorer (MILP feasibility tolerances).
pub const TOLERANCE: f64 = 1e-5;

pub use super::budget::{clear_interrupt, interrupt_requested, request_interrupt};

/// The integer programs (`--method ip`).
pub struct Ip;

impl Method for Ip {
    fn id(&self) -> MethodId {
        MethodId::Ip
    }

    fn supports(&self, problem: &Problem) -> Result<(), Unsupported> {
        if let Objective::Latency { pieces: 0 } = problem.objective {
            return Err(Unsupported::ZeroPieces);
        }
        if problem.pipeline.is_some() {
            if problem.objective != Objective::Throughput {
                return Err(Unsupported::ScheduleObjective);
            }
            if !problem.contiguous {
                return Err(Unsupported::ScheduleNonContiguous);
            }
            if problem.interleaved() {
                return problem.interleaved_supported();
            }
            if problem.limits.ip.contiguous_model != ContiguousModel::Stages {
                return Err(Unsupported::SchedulePositionsModel);
            }
        }
        Ok(())
    }

    fn solve(&self, problem: &Problem) -> Result<Outcome, SolveError> {
        presolve::solve_prepared(problem, |problem| match problem.objective {
            Objective::Throughput | Objective::Sync => throughput::solve(problem),
            Objective::Latency { pieces } => latency::solve(problem, pieces),
        })
    }

    fn tolerance(&self) -> f64 {
        TOLERANCE
    }
}

/// Formulation switches of the IP, for measuring what each choice changes (docs/ip.md).
/// The default is the formulation the measurements settled on; the command line reaches the
/// others with `--ip-experiment WORD` ([`IpExperiment`]) and `--highs-option NAME=VALUE`.
/// Not for normal use.
#[derive(Clone, Debug, PartialEq)]
pub struct IpOptions {
    /// Symmetry-breaking rows among accelerators and among CPUs (throughput model).
    /// [default: on; `nosym` turns it off]
    pub symmetry_breaking: bool,
    /// HiGHS starts from the best plan we hold. [default: on; `nowarm`]
    pub warm_start: bool,
    /// Per-set contiguity (reach) rows of the per-device contiguous model.
    /// [default: on; `noreach`]
    pub reach_rows: bool,
    /// Capacity rows `Σ_t load(t) ≤ k τ` of the stage model. [default: on; `nocapacity`]
    pub capacity_rows: bool,
    /// How the combinatorial load bound ([`crate::solve::bounds::load`]) is used.
    /// [default: in the model; `boundafter`, `nobound`]
    pub load_bound: LoadBoundUse,
    /// The contiguous max-load model. [default: stages; `positions`]
    pub contiguous_model: ContiguousModel,
    /// HiGHS options set as given, `(name, value)`, e.g. `("presolve", "off")`; a value is
    /// tried as an integer, a float, a boolean, then a string. [default: none]
    pub highs_options: Vec<(String, String)>,
    /// Set by [`presolve`] when it capped or rescaled coefficients: the model is then exact
    /// only within HiGHS's absolute tolerances (integrality 1e-6 times a capped coefficient
    /// can exceed [`TOLERANCE`]), so an incumbent objective below its plan's score is noted,
    /// not an error. [default: off; not a flag]
    pub presolved: bool,
}

impl Default for IpOptions {
    fn default() -> Self {
        IpOptions {
            symmetry_breaking: true,
            warm_start: true,
            reach_rows: true,
            capacity_rows: true,
            load_bound: LoadBoundUse::InModel,
            contiguous_model: ContiguousModel::Stages,
            highs_options: Vec::new(),
            presolved: false,
        }
    }
}

/// The contiguous max-load model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContiguousModel {
    /// The chain of stages of [`stages`].
    Stages,
    /// The per-device model of [`throughput`] with reach rows and device positions.
    Positions,
}

/// One formulation experiment: a switch of [`IpOptions`] away from its default, by the word
/// docs/ip.md uses for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpExperiment {
    NoSymmetry,
    NoWarmStart,
    NoReach,
    NoCapacity,
    NoBound,
    BoundAfter,
    Positions,
}

impl IpExperiment {
    pub const ALL: [IpExperiment; 7] = [
        IpExperiment::NoSymmetry,
        IpExperiment::NoWarmStart,
        IpExperiment::NoReach,
        IpExperiment::NoCapacity,
        IpExperiment::NoBound,
        IpExperiment::BoundAfter,
        IpExperiment::Positions,
    ];

    /// The word (`nosym`, `nowarm`, `noreach`, `nocapacity`, `nobound`, `boundafter`,
    /// `positions`).
    pub fn word(self) -> &'static str {
        match self {
            IpExperiment::NoSymmetry => "nosym",
            IpExperiment::NoWarmStart => "nowarm",
            IpExperiment::NoReach => "noreach",
            IpExperiment::NoCapacity => "nocapacity",
            IpExperiment::NoBound => "nobound",
            IpExperiment::BoundAfter => "boundafter",
            IpExperiment::Positions => "positions",
        }
    }

    /// The experiment called `word`.
    pub fn from_word(word: &str) -> Option<IpExperiment> {
        IpExperiment::ALL.into_iter().find(|e| e.word() == word)
    }
}

impl IpOptions {
    /// These options with `experiment` applied.
    pub fn with(mut self, experiment: IpExperiment) -> IpOptions {
        match experiment {
            IpExperiment::NoSymmetry => self.symmetry_breaking = false,
            IpExperiment::NoWarmStart => self.warm_start = false,
            IpExperiment::NoReach => self.reach_rows = false,
            IpExperiment::NoCapacity => self.capacity_rows = false,
            IpExperiment::NoBound => self.load_bound = LoadBoundUse::Off,
            IpExperiment::BoundAfter => self.load_bound = LoadBoundUse::ReportOnly,
            IpExperiment::Positions => self.contiguous_model = ContiguousModel::Positions,
        }
        self
    }
}

/// The DP plan (the contiguous optimum) as a held plan, when the DP can enumerate the
/// ideals; otherwise a note says why there is none.
pub(crate) fn dp_warm_start(problem: &Problem, stats: &mut Stats) -> Option<Candidate> {
    if let Some(p) = &problem.limits.warm_start {
        let held = candidate(problem, p.clone(), "warm start");
        if held.is_none() {
            stats
                .notes
                .push("the given warm start is not a valid plan for this problem".into());
        }
        return held;
    }
    // The DP may take half the time limit; the IP needs the rest.
    match dp_plan(problem, &problem.limits.budget().share(0.5)) {
        Ok(o) => o.placement.and_then(|p| candidate(problem, p, "dp")),
        Err(e) => {
            stats.notes.push(format!("no DP warm start: {e}"));
            None
        }
    }
}

/// The DP's plan within `budget`: the exact contiguous optimum, under the problem's
/// pipeline schedule when it has one ([`crate::solve::dp::solve_pipeline`]); under the
/// interleaved schedule the interleaved DP's ([`crate::solve::dp::interleaved`]).
pub(crate) fn dp_plan(problem: &Problem, budget: &Budget) -> Result<Outcome, SolveError> {
    match problem.pipeline {
        None => crate::solve::dp::solve_within(problem.workload, problem.limits.max_ideals, budget),
        Some(_) if problem.interleaved() => {
            crate::solve::dp::interleaved::solve_within(problem, budget, false)
        }
        Some(pipeline) => {
            let mut limits = problem.limits.clone();
            limits.time_limit_s = budget.remaining_s();
            crate::solve::dp::solve_pipeline(problem.workload, &limits, Some(pipeline))
        }
    }
}

/// Turns HiGHS's result, the plan read from it and the warm-start plan into an outcome:
/// the better scored plan of the two, HiGHS's bound clamped to it, and why the run stopped.
///
/// Every model here is exact (its objective equals the scorer's on its own plans), so an
/// IP objective below the scorer's beyond [`TOLERANCE`] is a formulation bug and an error.
/// `started`: when the solve began; the outcome's time is the whole solve's (HiGHS's own
/// is in a note).
pub(crate) fn finish(
    problem: &Problem,
    solved: &Solved,
    from_ip: Option<Placement>,
    warm: Option<Candidate>,
    mut stats: Stats,
    started: Instant,
) -> Result<Outcome, SolveError> {
    let ip = scored_ip_plan(problem, solved, from_ip, &mut stats)?;
    stats.time_s = started.elapsed().as_secs_f64();
    match &solved.stopped {
        Some(reason) if solved.abandoned => {
            stats.notes.push(format!("HiGHS still running when stopped ({reason}; its presolve checks no clock): its answer is not waited for"))
        }
        Some(_) if !solved.checks.is_empty() => {}
        Some(reason) => stats.notes.push(format!("HiGHS not run: {reason}")),
        None => stats.notes.push(format!("HiGHS: {:?} after {:.2} s, {} nodes", solved.status, solved.time_s, solved.nodes)),
    }
    stats
        .notes
        .extend(solved.checks.iter().map(second_opinion::Check::note));
    if solved.columns.is_some() {
        stats
            .notes
            .push(format!("HiGHS incumbent objective {}", solved.objective));
    }
    if let Some(w) = &warm {
        stats
            .notes
            .push(format!("warm start ({}) scores {}", w.source, w.score));
    }
    let best = match (ip, warm) {
        (Some(a), Some(b)) => Some(if b.score < a.score { b } else { a }),
        (a, b) => a.or(b),
    };
    let Some(best) = best else {
        return Ok(no_plan(solved, stats));
    };
    let mut bound = if solved.bound.is_finite() {
        solved.bound.max(0.0)
    } else {
        0.0
    };
    if solved.status == HighsModelStatus::Infeasible {
        // With the warm start's objective as a cut-off nothing better exists; but HiGHS
        // does not claim a bound, so we claim none either.
        bound = 0.0;
    }
    let tol = TOLERANCE * best.score.abs().max(1.0);
    let unreliable = bound > best.score + tol;
    if unreliable {
        stats.notes.push(format!(
            "HiGHS's bound {bound} exceeds the score {} of a plan we hold: bound unreliable, clamped",
            best.score
        ));
    }
    bound = bound.min(best.score);
    let status = status_with_plan(problem, solved, best.score, bound, unreliable);
    if best.source != "ip" {
        stats.notes.push(format!(
            "returning the {} plan: the IP found nothing better",
            best.source
        ));
    }
    Ok(Outcome {
        method: MethodId::Ip,
        placement: Some(best.placement),
        objective: best.score,
        bound,
        status,
        stats,
    })
}

/// The IP's plan, scored; `None` (with a note) when the scorer rejects it. An error when
/// HiGHS's objective is below the scorer's for that plan.
fn scored_ip_plan(
    problem: &Problem,
    solved: &Solved,
    from_ip: Option<Placement>,
    stats: &mut Stats,
) -> Result<Option<Candidate>, SolveError> {
    let had_plan = from_ip.is_some();
    let ip = from_ip.and_then(|p| candidate(problem, p, "ip"));
    if had_plan && ip.is_none() {
        stats.notes.push("the scorer rejected the IP's plan (rules, contiguity or piece count); kept the best held plan".into());
    }
    if let Some(c) = &ip {
        let below = solved.objective < c.score - TOLERANCE * c.score.abs().max(1.0);
        if below && problem.limits.ip.presolved {
            stats.notes.push(format!(
                "HiGHS's objective {} is below the score {} of its plan (within its tolerances on presolved coefficients)",
                solved.objective, c.score
            ));
        } else if below {
            return Err(SolveError::Check(CheckFailure::IpBelowScorer {
                cluster: false,
                objective: solved.objective,
                scored: c.score,
            }));
        }
    }
    Ok(ip)
}

/// The outcome when neither HiGHS nor the held plans give a plan: infeasible when HiGHS
/// proved it, otherwise "no plan" with the reason HiGHS stopped.
fn no_plan(solved: &Solved, stats: Stats) -> Outcome {
    // Every model here minimises columns with non-negative costs and lower bounds, so it
    // is bounded below: "infeasible or unbounded" can only be infeasible.
    let status = match solved.status {
        HighsModelStatus::Infeasible | HighsModelStatus::UnboundedOrInfeasible => {
            Status::infeasible(Infeasibility::IntegerProgram)
        }
        _ if solved.stopped.is_some() => Status::NoPlan {
            reason: solved.stopped.clone().unwrap_or(StopReason::TimeLimit),
        },
        HighsModelStatus::Optimal => Status::NoPlan {
            reason: StopReason::Solver {
                status: "Optimal, but the scorer rejected its plan".into(),
            },
        },
        s => Status::NoPlan {
            reason: stop_reason(s),
        },
    };
    Outcome {
        method: MethodId::Ip,
        placement: None,
        objective: f64::INFINITY,
        bound: if matches!(status, Status::Infeasible { .. }) {
            f64::INFINITY
        } else {
            solved.bound.max(0.0)
        },
        status,
        stats,
    }
}

/// The status of a run that returns a plan scoring `score` with lower bound `bound`
/// (already clamped to `score`; `unreliable` when it had to be).
pub(crate) fn status_with_plan(
    problem: &Problem,
    solved: &Solved,
    score: f64,
    bound: f64,
    unreliable: bool,
) -> Status {
    let gap = problem.limits.mip_gap.unwrap_or(DEFAULT_GAP);
    // HiGHS's objective and bound live within its feasibility tolerances (MODEL.md,
    // Numerics: about 1e-5 absolute), so a plan that close to the bound is proven optimal.
    let closed = score - bound <= (gap * score.abs()).max(1e-5 * score.abs().max(1.0));
    // Stopped at a known lower bound: as good as HiGHS's own proof when the plan meets it.
    let stopped_at_bound =
        solved.status == HighsModelStatus::ReachedInterrupt && solved.reached_target;
    let proven = solved.status == HighsModelStatus::Optimal || stopped_at_bound;
    if proven && closed && !unreliable {
        if problem.limits.mip_gap.is_some_and(|g| g > DEFAULT_GAP) && score - bound > 1e-6 {
            Status::Feasible {
                reason: StopReason::GapReached { gap },
            }
        } else {
            Status::Optimal
        }
    } else if proven && unreliable {
        Status::Feasible {
            reason: StopReason::UnreliableBound,
        }
    } else if stopped_at_bound {
        Status::Feasible {
            reason: StopReason::PlanAboveBound,
        }
    } else if solved.status == HighsModelStatus::Optimal {
        Status::Feasible {
            reason: StopReason::SolverGap { gap },
        }
    } else if let Some(reason) = &solved.stopped {
        Status::Feasible {
            reason: reason.clone(),
        }
    } else {
        Status::Feasible {
            reason: stop_reason(solved.status),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn experiments_switch_one_option_each() {
        let all = IpExperiment::ALL
            .into_iter()
            .fold(IpOptions::default(), |o, e| o.with(e));
        assert!(!all.symmetry_breaking && !all.warm_start && !all.reach_rows && !all.capacity_rows);
        assert_eq!(
            (all.contiguous_model, all.load_bound),
            (ContiguousModel::Positions, LoadBoundUse::ReportOnly)
        );
        assert_eq!(
            IpOptions::default().with(IpExperiment::NoBound).load_bound,
            LoadBoundUse::Off
        );
        for e in IpExperiment::ALL {
            assert_eq!(IpExperiment::from_word(e.word()), Some(e));
            assert_ne!(IpOptions::default().with(e), IpOptions::default(), "{e:?}");
        }
    }
}

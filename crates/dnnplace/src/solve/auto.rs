//! `--method auto`, the default: a valid plan within the time limit, with a proven lower
//! bound and the gap, and the path it took.
//!
//! # Contiguous throughput (TPS)
//!
//! 0. **Fork-join search.** On a fork-join block (one source, parallel chains, one sink)
//!    whose lattice may exceed [`SPLIT_SEARCH_MIN_IDEALS`] ideals, the branch and bound over the chains' pieces ([`fork_join`]) runs from the best
//!    baseline plan with [`FORK_JOIN_SHARE`] of the time (path `fork-join search`). When
//!    it finishes, its plan (or the baseline's) is the proven optimum; otherwise its best
//!    plan joins the steps below.
//!
//!    **Split search.** On graphs of at most [`split_search::MAX_GROUPS`] groups whose
//!    lattice may exceed [`SPLIT_SEARCH_MIN_IDEALS`] ideals (wide graphs: many ideal
//!    pairs), the branch and bound over stage splits ([`split_search`]) runs from the
//!    best baseline plan with [`SPLIT_SEARCH_SHARE`] of the time (path `split search`).
//!    When it finishes, its plan (or the baseline's) is the proven optimum; otherwise its
//!    best plan and the bound of its finished rounds join the steps below. On a smaller
//!    lattice it runs after the exact DP, if the DP stops (its ideal pairs).
//! 1. **Exact.** The size of the ideal lattice of the group DAG is estimated first
//!    ([`coarsen::lattice_size`], bounded by [`coarsen::coarse_ideal_limit`] for the time
//!    left). When it fits, the DP runs and its plan is the proven optimum (path
//!    `exact DP`).
//! 2. **Coarsened.** Otherwise the multilevel path of [`coarsen`]: the DP on the finest
//!    level that fits, refinement back down (at most half of the time left). Its lower
//!    bound is the combinatorial bound on the *fine* groups ([`coarsen::lower_bound`]:
//!    its cheap tests, then all of them within half of the time left and at most a tenth
//!    of the limit), so the gap is against every contiguous plan.
//! 3. **Closing the gap.** With time left, a gap above 1e-7, and at most [`IP_MAX_GROUPS`]
//!    groups, the contiguous IP (chain of stages, [`crate::solve::milp::stages`]) runs
//!    warm-started from the plan for the rest of the time: it keeps the better plan and
//!    the larger bound.
//! 4. **Never nothing.** The greedy baseline (and PipeDream's chain split of a
//!    topological order on graphs of at most [`CHAIN_SPLIT_MAX_GROUPS`] groups) run after
//!    the coarsened path: they supply a plan when it has none and replace its plan when
//!    better, with the bound from step 2; if no plan exists yet, the contiguous IP without a warm start (on at most [`IP_MAX_GROUPS`]
//!    groups) finds one or proves there is none.
//!
//! `--coarsen off` skips step 2 (the exact DP only, then the fallbacks); `--coarsen layers`
//! skips step 1 and coarsens by `layerId` runs; `--coarsen-target N` skips step 1 and runs
//! the DP on the finest level with at most N clusters.
//!
//! # Other objectives
//!
//! Sync, latency and non-contiguous throughput are the IP's ([`crate::solve::milp`]): auto
//! first finds the contiguous TPS plan above with a third of the time (a valid plan for
//! all of them, so there is always an answer) and hands it to the IP as its warm start
//! ([`crate::solve::Limits::warm_start`]) for the rest. Graphs with more than
//! [`IP_MAX_UNITS`] IP units skip the IP: the contiguous plan is returned, scored under the
//! objective, with the max-load bound (for TPS and sync, since `max FW + max BW ≥ max
//! load`) or the latency finish-time bound.
//!
//! When the contiguous TPS plan breaks latency's `q` pieces per accelerator (a training
//! graph: an accelerator holding a layer's forward and backward is cut into two pieces),
//! the accelerators cut into more than `q` pieces move to a CPU core until none is
//! ([`within_pieces`]): a valid latency plan, reported with the finish-time bound.
//!
//! # Under a schedule's memory (GPipe, 1F1B)
//!
//! With the same count `c` of micro-batches in flight on every stage (GPipe: `m`; 1F1B with
//! `m = 1`) and no recomputation, the problem is MODEL.md's on node sizes `size + (c − 1)·A`
//! and runs the contiguous path above as it stands. Otherwise (1F1B's counts depend on the
//! stage's place; `--recompute auto`) the exact DP under the schedule runs with
//! [`SCHEDULE_DP_SHARE`] of the time; unless it proves its plan, the relaxation (MODEL.md's
//! memory: its bound holds), the exact DP under the schedule on the layer-relabelled workload,
//! and restrictions (every stash counted `c` times, `c` from the fullest stage's count
//! halving to 2) each supply a plan, kept where it fits under the schedule
//! ([`Auto::under_schedule`]).
//!
//! The time limit defaults to [`super::DEFAULT_TIME_LIMIT_S`] when none is given.

use std::time::Instant;

use super::baselines::greedy::Greedy;
use super::baselines::pipedream::PipeDreamTopo;
use super::bounds::load as load_bounds;
use super::budget::Budget;
use super::coarsen::{self, CoarsenMode, CoarsenSettings, LatticeSize};
use super::milp;
use super::{
    dp, Infeasibility, Method, MethodId, Objective, Outcome, Problem, Prover, SolveError, Stats,
    Status, StopReason,
};
use super::{fork_join, split_search};
use crate::model::contraction::Contraction;
use crate::model::grouping::Grouping;
use crate::model::Placement;
use crate::score::evaluate;

/// Largest group count for which auto runs the contiguous IP to close the gap.
pub const IP_MAX_GROUPS: usize = 2_000;

/// Largest unit count for which auto hands sync, latency or non-contiguous problems to the IP.
pub const IP_MAX_UNITS: usize = 5_000;

/// The share of the time the split search may use before the other paths.
pub const SPLIT_SEARCH_SHARE: f64 = 0.5;

/// The share of the time the fork-join search may use before the other paths.
pub const FORK_JOIN_SHARE: f64 = 0.5;

/// Lattices of at most this many ideals go to the exact DP first, larger ones on at
/// most [`split_search::MAX_GROUPS`] groups to the split search.
pub const SPLIT_SEARCH_MIN_IDEALS: usize = 20_000;

/// Largest group count for the O(n²) chain-split fallback.
pub const CHAIN_SPLIT_MAX_GROUPS: usize = 5_000;

/// Plans within this relative distance of their bound are proven optimal (the IP's
/// default gap, `super::DEFAULT_GAP`).
const CLOSED: f64 = 1e-7;

/// The default method (module documentation).
#[derive(Clone, Debug, Default)]
pub struct Auto {
    pub coarsen: CoarsenSettings,
}

impl Auto {
    pub fn new(coarsen: CoarsenSettings) -> Auto {
        Auto { coarsen }
    }
}

impl Method for Auto {
    fn id(&self) -> MethodId {
        MethodId::Auto
    }

    fn supports(&self, problem: &Problem) -> Result<(), crate::solve::Unsupported> {
        if problem.interleaved() {
            // Under the interleaved schedule auto is the interleaved DP, then IP (below): the IP's conditions.
            return milp::Ip.supports(problem);
        }
        if problem.pipeline.is_some() {
            // Under a schedule auto is the exact DP (below).
            return dp::Dp.supports(problem);
        }
        milp::Ip.supports(problem)
    }

    fn solve(&self, problem: &Problem) -> Result<Outcome, SolveError> {
        let started = Instant::now();
        if problem.interleaved() {
            // The interleaved DP, then (unless it proved its plan) the interleaved IP from
            // its plan: the IP's bound may close more of the gap.
            let limit = problem
                .limits
                .time_limit_s
                .unwrap_or(super::DEFAULT_TIME_LIMIT_S);
            let dp = dp::interleaved::solve_within(
                problem,
                &Budget::new(Some(0.8 * limit), problem.limits.memory_budget_bytes),
                false,
            )?;
            if dp.status == Status::Optimal
                || dp.placement.is_none() && matches!(dp.status, Status::Infeasible { .. })
            {
                let mut outcome = dp;
                outcome.method = MethodId::Auto;
                outcome.stats.notes.push(
                    "auto under the interleaved schedule: the interleaved DP proved it".into(),
                );
                return Ok(outcome);
            }
            let mut second = problem.clone();
            second.limits.time_limit_s = Some((limit - started.elapsed().as_secs_f64()).max(0.0));
            if let Some(placement) = &dp.placement {
                second.limits.warm_start = Some(placement.clone());
            }
            let mut outcome = milp::Ip.solve(&second)?;
            if outcome.placement.is_none() && dp.placement.is_some() {
                outcome.placement = dp.placement;
                outcome.objective = dp.objective;
                outcome.status = dp.status;
            }
            // Both bounds are proven; the larger holds.
            outcome.bound = outcome.bound.max(dp.bound).min(outcome.objective);
            if outcome.placement.is_some()
                && outcome.objective <= outcome.bound * (1.0 + super::DEFAULT_GAP)
            {
                outcome.status = Status::Optimal;
            }
            outcome.method = MethodId::Auto;
            outcome.stats.notes.splice(0..0, dp.stats.notes);
            outcome.stats.notes.push("auto under the interleaved schedule: the interleaved DP, then the interleaved IP from its plan".into());
            return Ok(outcome);
        }
        if problem.pipeline.is_some() {
            let mut outcome = self.under_schedule(problem)?;
            outcome.method = MethodId::Auto;
            outcome.stats.time_s = started.elapsed().as_secs_f64();
            return Ok(outcome);
        }
        let limit = problem
            .limits
            .time_limit_s
            .unwrap_or(super::DEFAULT_TIME_LIMIT_S);
        let budget = Budget::new(Some(limit), problem.limits.memory_budget_bytes);
        let mut outcome = match (problem.objective, problem.contiguous) {
            (Objective::Throughput, true) => self.contiguous_throughput(problem, &budget)?,
            _ => self.through_ip(problem, &budget)?,
        };
        outcome.method = MethodId::Auto;
        outcome.stats.time_s = started.elapsed().as_secs_f64();
        Ok(outcome)
    }

    fn tolerance(&self) -> f64 {
        // Plans from the IP carry the scorer's value; DP plans its exact recurrence.
        milp::TOLERANCE
    }
}

/// The share of the time the exact DP takes under a schedule's memory before the
/// relaxation ([`Auto::under_schedule`]).
pub const SCHEDULE_DP_SHARE: f64 = 0.5;

impl Auto {
    /// Under a GPipe or 1F1B schedule's memory: the exact DP (it prices the schedule's
    /// memory; coarsening does not) with [`SCHEDULE_DP_SHARE`] of the time. Unless it proved
    /// its plan or that there is none, the **relaxation**: the same problem under MODEL.md's
    /// memory (each node's size held once), solved by auto's contiguous path with the time
    /// left. Every device holds at least as much under the schedule
    /// (`Σ resident + c_d · Σ A ≥ Σ size` with `c_d ≥ 1` micro-batches in flight; with
    /// recomputation `Σ resident + Σ A + c_d · In ≥ Σ size`, and recomputing only adds
    /// time), so the relaxation's bound is a bound here, and its plan is kept when it fits
    /// under the schedule (recomputing where needed under `--recompute auto`,
    /// [`milp::candidate`]) and beats the DP's.
    fn under_schedule(&self, problem: &Problem) -> Result<Outcome, SolveError> {
        let pipeline = problem.pipeline.expect("under a schedule");
        if !pipeline.needs_positions() {
            return self.uniform_schedule(problem, pipeline.uniform_in_flight());
        }
        let started = Instant::now();
        let limit = problem
            .limits
            .time_limit_s
            .unwrap_or(super::DEFAULT_TIME_LIMIT_S);
        let mut first = problem.clone();
        first.limits.time_limit_s = Some(SCHEDULE_DP_SHARE * limit);
        let mut notes = vec!["auto under a schedule's memory: the exact DP first".to_string()];
        let dp = match dp::Dp.solve(&first) {
            Ok(o) => Some(o),
            Err(SolveError::Stopped { reason, detail, .. }) => {
                // Interrupted too: the steps below then run on their cheap paths only (the
                // baselines), so that Ctrl-C still gets a plan that fits.
                notes.push(format!(
                    "the exact DP stopped without a plan: {reason} {detail}"
                ));
                None
            }
            Err(e @ SolveError::TooManyIdeals { .. }) => {
                notes.push(format!("the exact DP did not run: {e}"));
                None
            }
            Err(e) => return Err(e),
        };
        if let Some(o) = &dp {
            let proven = o.status == Status::Optimal
                || o.placement.is_none() && matches!(o.status, Status::Infeasible { .. });
            if proven || super::budget::interrupt_requested() {
                let mut o = o.clone();
                o.stats.notes.splice(0..0, notes);
                return Ok(o);
            }
        }
        let left = |share: f64| Some(share * (limit - started.elapsed().as_secs_f64()).max(0.0));
        let mut relaxed = problem.clone();
        relaxed.pipeline = None;
        relaxed.limits.time_limit_s = left(0.25);
        let budget = Budget::new(
            relaxed.limits.time_limit_s,
            problem.limits.memory_budget_bytes,
        );
        let free = self.contiguous_throughput(&relaxed, &budget)?;
        let mut plans = vec![(free.placement.clone(), "the relaxation's plan".to_string())];
        if let Some((placement, what)) = layer_granular_under_schedule(problem, left(0.5)) {
            plans.push((Some(placement), what));
        }
        // Restrictions: every node's stash counted `c` times, from as often as the fullest
        // stage holds it (a plan that fits everywhere) down to 2 (a plan that may fit where
        // the later stages hold fewer), each with an equal share of the time left.
        let d = problem.workload.devices();
        let fullest = pipeline.in_flight(d.accelerators + d.cpus, 0);
        let counts = restriction_counts(fullest);
        for (i, &c) in counts.iter().enumerate() {
            let w = stashes_counted(problem.workload, c);
            let mut tight = relaxed.on(&w);
            tight.limits.time_limit_s = left(1.0 / (counts.len() - i) as f64);
            let budget = Budget::new(
                tight.limits.time_limit_s,
                problem.limits.memory_budget_bytes,
            );
            let held = self.contiguous_throughput(&tight, &budget)?;
            plans.push((
                held.placement,
                format!("the plan with {c} stashes in flight on every stage"),
            ));
        }
        Ok(schedule_outcome(problem, dp, &free, plans, notes))
    }
}

impl Auto {
    /// A schedule whose every stage holds `c` stashes in flight (GPipe; 1F1B with one
    /// micro-batch), without recomputation: a stage's memory is `Σ size + (c − 1)·Σ A`
    /// whatever its place ([`crate::score::pipeline_memory`]), so the problem *is*
    /// MODEL.md's on the workload whose node sizes are [`Pipeline::node_bytes`] at `c`, and
    /// auto's contiguous path (exact DP, coarsening, bounds) solves it as it stands. The
    /// plan is re-checked under the schedule by [`crate::solve::plan`].
    ///
    /// [`Pipeline::node_bytes`]: crate::model::schedule::Pipeline::node_bytes
    fn uniform_schedule(&self, problem: &Problem, c: usize) -> Result<Outcome, SolveError> {
        let w = stashes_counted(problem.workload, c);
        let mut sized = problem.on(&w);
        sized.pipeline = None;
        let limit = problem
            .limits
            .time_limit_s
            .unwrap_or(super::DEFAULT_TIME_LIMIT_S);
        let budget = Budget::new(Some(limit), problem.limits.memory_budget_bytes);
        let mut outcome = self.contiguous_throughput(&sized, &budget)?;
        outcome.stats.notes.insert(
            0,
            format!("auto under a schedule with {c} stashes in flight on every stage: MODEL.md's problem with each node's size + {} x its stash", c.saturating_sub(1)),
        );
        Ok(outcome)
    }
}

/// The exact DP under the schedule on the layer-relabelled workload
/// ([`super::layer_granular`]: stage boundaries only between layers, the same nodes, bytes
/// and edges, so its plan is valid on the original), within `time_limit_s`, when the
/// layers are fewer than the nodes: its plan and what it is.
fn layer_granular_under_schedule(
    problem: &Problem,
    time_limit_s: Option<f64>,
) -> Option<(Placement, String)> {
    let w = problem.workload;
    let layers = crate::model::layers::Layers::new(w).ok()?;
    if layers.len() >= w.len() {
        return None;
    }
    let relabelled = super::layer_granular::contract_by_layers(w, &layers).ok()?;
    let mut coarse = problem.on(&relabelled);
    coarse.limits.time_limit_s = time_limit_s;
    let outcome = dp::Dp.solve(&coarse).ok()?;
    Some((
        outcome.placement?,
        format!("the exact DP under the schedule on {} layers", layers.len()),
    ))
}

/// `w` with every node's stash counted `c` times ([`Pipeline::node_bytes`]).
///
/// [`Pipeline::node_bytes`]: crate::model::schedule::Pipeline::node_bytes
fn stashes_counted(w: &crate::model::Workload, c: usize) -> crate::model::Workload {
    w.with_sizes(&crate::model::schedule::Pipeline::node_bytes(w, c))
}

/// The stash counts the restrictions of [`Auto::under_schedule`] try: `fullest`, then
/// halving down to 2 (at most 6 counts).
fn restriction_counts(fullest: usize) -> Vec<usize> {
    let mut counts = vec![fullest.max(1)];
    let mut c = fullest / 2;
    while c >= 2 && counts.len() < 6 {
        counts.push(c);
        c /= 2;
    }
    counts
}

/// The best of the DP's plan (under the schedule) and the `plans` (with what they are)
/// that fit under the schedule, with the larger of the DP's bound and the relaxation's
/// (`free`).
fn schedule_outcome(
    problem: &Problem,
    dp: Option<Outcome>,
    free: &Outcome,
    plans: Vec<(Option<Placement>, String)>,
    mut notes: Vec<String>,
) -> Outcome {
    let free_path = free.stats.path.clone().unwrap_or_default();
    notes.push(format!(
        "the relaxation (MODEL.md memory: {free_path}): bound {}",
        free.bound
    ));
    let bound = dp.as_ref().map_or(0.0, |o| o.bound).max(free.bound);
    let mut out = dp.unwrap_or(Outcome {
        method: MethodId::Auto,
        placement: None,
        objective: f64::INFINITY,
        bound,
        status: Status::NoPlan {
            reason: StopReason::SearchExhausted {
                what: "neither the exact DP under the schedule nor the relaxation's plan gave a plan that fits (raise --time-limit, or try --method ip)".into(),
            },
        },
        stats: Stats::default(),
    });
    let mut path = vec![out
        .stats
        .path
        .clone()
        .unwrap_or_else(|| "exact DP under the schedule".into())];
    for (placement, what) in plans {
        let Some(placement) = placement else {
            notes.push(format!("{what}: none"));
            continue;
        };
        let Some(c) = super::candidate::candidate(problem, placement, "held") else {
            notes.push(format!("{what} does not fit under the schedule"));
            continue;
        };
        notes.push(format!("{what}: {}", c.score));
        if out.placement.is_none() || c.score < out.objective {
            out.placement = Some(c.placement);
            out.objective = c.score;
            path.push(what);
        }
    }
    out.bound = bound.min(out.objective);
    if out.placement.is_some() {
        out.status = if out.objective <= out.bound * (1.0 + CLOSED) {
            Status::Optimal
        } else {
            Status::Feasible {
                reason: match free.status.stop_reason() {
                    _ if super::budget::interrupt_requested() => StopReason::Interrupted,
                    Some(r) => r.clone(),
                    None => StopReason::TimeLimit,
                },
            }
        };
    }
    out.stats.path = Some(path.join("; "));
    out.stats.notes.splice(0..0, notes);
    out
}

/// A contiguous plan and its max load by the scorer.
struct Found {
    placement: Placement,
    max_load: f64,
    source: String,
}

fn scored(w: &crate::model::Workload, placement: Placement, source: &str) -> Option<Found> {
    let e = evaluate(w, &placement, false);
    (e.is_valid() && e.is_contiguous()).then(|| Found {
        max_load: e.max_load,
        placement,
        source: source.into(),
    })
}

/// What the contiguous search holds between its phases: the statistics and path so far,
/// the best plan, the proven bound, and why the plan is not proven if it is not.
struct Search {
    stats: Stats,
    path: Vec<String>,
    best: Option<Found>,
    bound: f64,
    status_reason: StopReason,
    /// The split search was left to after the exact DP (a small lattice).
    split_deferred: bool,
}

impl Search {
    /// Keeps `found` when it beats the best plan; `what` names it in the path.
    fn offer(&mut self, found: Found, what: String) {
        if self
            .best
            .as_ref()
            .is_none_or(|b| found.max_load < b.max_load)
        {
            self.path.push(what);
            self.best = Some(found);
        }
    }
}

impl Auto {
    /// The contiguous throughput plan: the exact DP when the lattice fits, the coarsened
    /// path, the baselines, the fine graph's lower bound, then the IP for what is left
    /// (from the best plan, or as the last resort on small graphs).
    fn contiguous_throughput(
        &self,
        problem: &Problem,
        budget: &Budget,
    ) -> Result<Outcome, SolveError> {
        let w = problem.workload;
        let total_s = budget.remaining_s();
        let c = Contraction::new(w);
        let mut search = Search {
            stats: Stats {
                groups: Some(c.len()),
                ..Stats::default()
            },
            path: Vec::new(),
            best: None,
            bound: 0.0,
            status_reason: StopReason::TimeLimit,
            split_deferred: false,
        };
        if let Some(proven) = self.fork_join(problem, budget, &mut search) {
            return Ok(proven);
        }
        if let Some(proven) = self.split_search(problem, &c, budget, &mut search, true) {
            return Ok(proven);
        }
        if let Some(proven) = self.exact_dp(problem, budget, &mut search)? {
            return Ok(proven);
        }
        if search.split_deferred {
            // The DP stopped on a small lattice (its pairs): the split search after all.
            if let Some(proven) = self.split_search(problem, &c, budget, &mut search, false) {
                return Ok(proven);
            }
        }
        if self.coarsen.mode != CoarsenMode::Off {
            self.coarsened(problem, budget, &mut search);
        }
        // The baselines are cheap (linear, or a chain split on small graphs): they supply a
        // plan when the paths above have none, and replace theirs when better.
        for found in fallbacks(problem, &c, budget) {
            search
                .stats
                .notes
                .push(format!("baseline {}: {}", found.source, found.max_load));
            let what = format!(
                "{} baseline{}",
                found.source,
                if search.best.is_some() {
                    " (better)"
                } else {
                    ""
                }
            );
            search.offer(found, what);
        }
        fine_bound(w, budget, total_s, &mut search);
        ip_from_plan(problem, c.len(), budget, &mut search);
        if search.best.is_none()
            && c.len() <= IP_MAX_GROUPS
            && budget.remaining_s().is_none_or(|s| s >= 0.5)
        {
            ip_last_resort(problem, budget, &mut search);
        }
        Ok(finish(search))
    }

    /// Phase 1: the exact DP when the lattice fits (mode off: with all the time and the user's
    /// `--max-ideals`; auto: at most half of the time, so the coarsened path has the rest
    /// if it stops). Its outcome when proven (or infeasible); an unproven plan becomes the
    /// best with its bound.
    fn exact_dp(
        &self,
        problem: &Problem,
        budget: &Budget,
        search: &mut Search,
    ) -> Result<Option<Outcome>, SolveError> {
        let w = problem.workload;
        let mode = self.coarsen.mode;
        let try_exact = mode == CoarsenMode::Off
            || (mode == CoarsenMode::Auto && self.coarsen.target.is_none());
        if !try_exact {
            return Ok(None);
        }
        let (share, limit) = if mode == CoarsenMode::Off {
            (budget.share(1.0), problem.limits.max_ideals)
        } else {
            let share = budget.share(0.5);
            (
                share,
                coarsen::coarse_ideal_limit(share.remaining_s(), problem.limits.max_ideals),
            )
        };
        let size = if mode == CoarsenMode::Off {
            LatticeSize::AtMost(0)
        } else {
            let (reduced, _) = dp::reduced_contraction(w);
            coarsen::lattice_size_within(&reduced, limit, &share)
        };
        if let LatticeSize::MoreThan(n) = size {
            search.stats.notes.push(format!(
                "exact DP skipped: the ideal lattice has more than {n} ideals (counted before listing; {limit} fit the time)"
            ));
            return Ok(None);
        }
        match dp::solve_within(w, limit, &share) {
            Ok(mut o) if matches!(o.status, Status::Optimal | Status::Infeasible { .. }) => {
                o.stats.path = Some(format!(
                    "exact DP ({} ideals){}",
                    o.stats.ideals.map_or("?".into(), |i| i.to_string()),
                    if o.status == Status::Optimal {
                        ": proven optimal"
                    } else {
                        ""
                    }
                ));
                return Ok(Some(o));
            }
            Ok(o) => {
                // A plan with a bound but no proof (folds it could not certify).
                search
                    .stats
                    .notes
                    .push(format!("the exact DP stopped early: {:?}", o.status));
                if let Some(found) = o
                    .placement
                    .and_then(|p| scored(w, p, "exact DP (unproven)"))
                {
                    search.offer(found, "exact DP without its proof".into());
                    search.bound = search.bound.max(o.bound);
                }
            }
            Err(e @ (SolveError::TooManyIdeals { .. } | SolveError::Stopped { .. })) => {
                search.stats.notes.push(format!("exact DP: {e}"));
            }
            Err(e) => return Err(e),
        }
        Ok(None)
    }

    /// Phase 0, on graphs of at most [`split_search::MAX_GROUPS`] groups whose ideal
    /// lattice may hold more than [`SPLIT_SEARCH_MIN_IDEALS`] ideals: the split search ([`split_search`]) from the best baseline
    /// plan, with [`SPLIT_SEARCH_SHARE`] of the time. Its outcome when it finishes (the
    /// proven optimum, or infeasible); otherwise its best plan joins the search. With
    /// `before_dp`, a smaller lattice defers it (`split_deferred`) to after the exact DP,
    /// which then runs it only if it stopped.
    fn split_search(
        &self,
        problem: &Problem,
        c: &Contraction,
        budget: &Budget,
        search: &mut Search,
        before_dp: bool,
    ) -> Option<Outcome> {
        let w = problem.workload;
        if self.coarsen.mode != CoarsenMode::Auto
            || self.coarsen.target.is_some()
            || c.len() > split_search::MAX_GROUPS
            || w.cluster().is_some()
        {
            return None;
        }
        let started = Instant::now();
        if before_dp {
            let (reduced, _) = dp::reduced_contraction(w);
            let size =
                coarsen::lattice_size_within(&reduced, SPLIT_SEARCH_MIN_IDEALS, &budget.share(0.1));
            if matches!(size, LatticeSize::Exactly(_) | LatticeSize::AtMost(_)) {
                // A lattice this small is the DP's (it proves the published layer graphs
                // in about a second, where the search may list many more stages).
                search.split_deferred = true;
                return None;
            }
        }
        for found in fallbacks(problem, c, budget) {
            let what = format!("{} baseline", found.source);
            search.offer(found, what);
        }
        let start = search.best.as_ref().map_or(f64::INFINITY, |b| b.max_load);
        let share = budget.share(SPLIT_SEARCH_SHARE);
        let found = split_search::solve(w, start, &share)?;
        let elapsed = started.elapsed().as_secs_f64();
        search.stats.notes.push(format!(
            "split search from {start}: {} states, {} stages in {elapsed:.2} s, bound {}{}",
            found.states,
            found.stages,
            found.bound,
            match &found.finished {
                Ok(()) => String::new(),
                Err(e) => format!(", stopped: {}", StopReason::from(e.clone())),
            }
        ));
        if let Some(f) = found.placement.and_then(|p| scored(w, p, "split search")) {
            search.offer(f, "split search".into());
        }
        search.bound = search.bound.max(found.bound);
        found.finished.ok()?;
        // Finished: no split is below min(start, its best), up to the sums' slack.
        let proven = found.value.min(start) * (1.0 - split_search::SUM_SLACK);
        search.bound = search.bound.max(proven);
        search.path.push(format!(
            "proven optimal by the split search ({} states)",
            found.states
        ));
        Some(proven_outcome(search, Prover::SplitSearch))
    }

    /// Phase 0 on a fork-join block ([`fork_join`]: parallel chains between one source and
    /// one sink) whose lattice may exceed [`SPLIT_SEARCH_MIN_IDEALS`] ideals (a smaller one
    /// is the exact DP's): the search over the chains' pieces from the best baseline plan, with
    /// [`FORK_JOIN_SHARE`] of the time. Its outcome when it finishes (the proven optimum,
    /// or infeasible); otherwise its best plan joins the search.
    fn fork_join(
        &self,
        problem: &Problem,
        budget: &Budget,
        search: &mut Search,
    ) -> Option<Outcome> {
        let w = problem.workload;
        if self.coarsen.mode != CoarsenMode::Auto
            || self.coarsen.target.is_some()
            || !fork_join::fits(w)
        {
            return None;
        }
        let started = Instant::now();
        let (reduced, _) = dp::reduced_contraction(w);
        let size =
            coarsen::lattice_size_within(&reduced, SPLIT_SEARCH_MIN_IDEALS, &budget.share(0.1));
        if matches!(size, LatticeSize::Exactly(_) | LatticeSize::AtMost(_)) {
            // A lattice this small is the exact DP's (polynomial in its ideals).
            return None;
        }
        for found in fallbacks(problem, &Contraction::new(w), budget) {
            let what = format!("{} baseline", found.source);
            search.offer(found, what);
        }
        let start = search.best.as_ref().map_or(f64::INFINITY, |b| b.max_load);
        let found = fork_join::solve(w, start, &budget.share(FORK_JOIN_SHARE))?;
        search.stats.notes.push(format!(
            "fork-join search from {start}: {} chains (twin classes {:?}), {} nodes in {:.2} s{}",
            found.chains,
            found.twin_classes,
            found.nodes,
            started.elapsed().as_secs_f64(),
            match &found.finished {
                Ok(()) => String::new(),
                Err(e) => format!(", stopped: {}", StopReason::from(e.clone())),
            }
        ));
        if let Some(f) = found
            .placement
            .and_then(|p| scored(w, p, "fork-join search"))
        {
            search.offer(f, "fork-join search".into());
        }
        found.finished.ok()?;
        // Finished: no plan is below min(start, its best), up to the sums' slack.
        let proven = found.value.min(start) * (1.0 - split_search::SUM_SLACK);
        search.bound = search.bound.max(proven);
        search.path.push(format!(
            "proven optimal by the fork-join search ({} nodes)",
            found.nodes
        ));
        Some(proven_outcome(search, Prover::ForkJoinSearch))
    }

    /// Phase 2: the coarsened path (half of what is left): its plan when better.
    fn coarsened(&self, problem: &Problem, budget: &Budget, search: &mut Search) {
        let mut notes = Vec::new();
        let coarse = coarsen::solve(
            problem.workload,
            &self.coarsen,
            &problem.limits,
            &budget.share(0.5),
            &mut notes,
        );
        search.stats.notes.append(&mut notes);
        match coarse {
            Ok(Some(s)) => {
                search.path.push(format!(
                    "coarsened: DP on level {} of {} ({} of {} groups), refined down",
                    s.dp_level,
                    s.level_sizes.len(),
                    s.level_sizes[s.dp_level],
                    s.level_sizes[0]
                ));
                search.stats.ideals = s.dp_ideals;
                if search.best.as_ref().is_none_or(|b| s.max_load < b.max_load) {
                    search.best = Some(Found {
                        placement: s.placement,
                        max_load: s.max_load,
                        source: "coarsened".into(),
                    });
                }
            }
            Ok(None) => search
                .stats
                .notes
                .push("coarsened path: no level gave a plan".into()),
            Err(e) => search
                .stats
                .notes
                .push(format!("coarsened path failed: {e}")),
        }
    }
}

/// The lower bound on the fine groups, with half of what is left (at most a tenth of the
/// whole limit `total_s`).
fn fine_bound(
    w: &crate::model::Workload,
    budget: &Budget,
    total_s: Option<f64>,
    search: &mut Search,
) {
    let bound_started = Instant::now();
    let share = budget
        .remaining_s()
        .map(|s| (0.5 * s).min(0.1 * total_s.unwrap_or(s)));
    let deadline = share.map(|s| Instant::now() + std::time::Duration::from_secs_f64(s));
    let (fine_bound, finished) = coarsen::lower_bound(w, deadline);
    search.bound = search.bound.max(fine_bound);
    search.stats.notes.push(format!(
        "lower bound {fine_bound} on the fine groups ({:.2} s{})",
        bound_started.elapsed().as_secs_f64(),
        if finished {
            ""
        } else {
            ", stopped at its time share"
        }
    ));
}

/// Phase 3: the IP warm-started from the best plan while the gap is open, on at most
/// [`IP_MAX_GROUPS`] groups with 2 s left; on more groups, the reason the gap stays open.
fn ip_from_plan(problem: &Problem, groups: usize, budget: &Budget, search: &mut Search) {
    let Some(b) = &search.best else {
        return;
    };
    let w = problem.workload;
    let gap_open = b.max_load > search.bound * (1.0 + CLOSED);
    let left = budget.remaining_s().unwrap_or(f64::INFINITY);
    if gap_open && groups <= IP_MAX_GROUPS && left >= 2.0 {
        let held = b.max_load;
        let mut ip_problem = problem.clone();
        ip_problem.limits.warm_start = Some(b.placement.clone());
        ip_problem.limits.time_limit_s = Some((left - 0.5).max(1.0));
        let ip_started = Instant::now();
        match ip_within(&ip_problem, left - 0.25) {
            Some(Ok(o)) => {
                search.path.push("contiguous IP from the plan".into());
                search.stats.notes.push(format!(
                    "IP: {} (bound {}, {:?}) in {:.2} s of {:.2} s given",
                    o.objective,
                    o.bound,
                    o.status,
                    ip_started.elapsed().as_secs_f64(),
                    left - 0.5
                ));
                search
                    .stats
                    .notes
                    .extend(o.stats.notes.iter().map(|n| format!("IP: {n}")));
                search.bound = search.bound.max(o.bound.min(o.objective));
                if let Some(p) = o.placement {
                    if o.objective < held {
                        search.best = scored(w, p, "ip");
                    }
                }
                if let Status::Feasible { reason } = o.status {
                    search.status_reason = reason;
                }
            }
            Some(Err(e)) => search.stats.notes.push(format!("IP failed: {e}")),
            None => search.stats.notes.push(ABANDONED.into()),
        }
    } else if gap_open && groups > IP_MAX_GROUPS {
        search.status_reason = StopReason::SearchExhausted {
            what: format!(
                "refinement ended and {groups} groups are more than the IP's {IP_MAX_GROUPS} (raise --coarsen-target for a finer coarse DP)"
            ),
        };
    }
}

/// The last resort on small graphs when no path found a plan: the IP without a warm start
/// finds one if there is one (and proves infeasibility otherwise).
fn ip_last_resort(problem: &Problem, budget: &Budget, search: &mut Search) {
    let mut ip_problem = problem.clone();
    let left = budget.remaining_s().unwrap_or(super::DEFAULT_TIME_LIMIT_S);
    ip_problem.limits.time_limit_s = Some((left - 0.25).max(0.5));
    ip_problem.limits.max_ideals = ip_problem.limits.max_ideals.min(20_000);
    match ip_within(&ip_problem, left) {
        Some(Ok(o)) => {
            search.stats.notes.push(format!(
                "IP without a warm start: {} ({:?})",
                o.objective, o.status
            ));
            if matches!(o.status, Status::Infeasible { .. }) {
                search.bound = f64::INFINITY;
            }
            if let Some(p) = o.placement {
                search
                    .path
                    .push("contiguous IP (no other path found a plan)".into());
                search.bound = search.bound.max(o.bound.min(o.objective));
                search.best = scored(problem.workload, p, "ip");
            }
        }
        Some(Err(e)) => search.stats.notes.push(format!("IP failed: {e}")),
        None => search.stats.notes.push(ABANDONED.into()),
    }
}

/// The outcome of the search: its best plan, optimal when it meets the bound; without a
/// plan, infeasible when the IP proved it (bound ∞), else no plan.
/// The outcome of a search that finished (`by`: which): its plan proven optimal, or no
/// contiguous split at all (infeasible); `search` is left empty.
fn proven_outcome(search: &mut Search, by: Prover) -> Outcome {
    let mut taken = std::mem::replace(
        search,
        Search {
            stats: Stats::default(),
            path: Vec::new(),
            best: None,
            bound: 0.0,
            status_reason: StopReason::TimeLimit,
            split_deferred: false,
        },
    );
    if taken.best.is_none() {
        // Nothing below ∞: no contiguous split fits.
        taken.bound = f64::INFINITY;
    }
    let mut out = finish(taken);
    if out.placement.is_none() {
        out.status = Status::infeasible(Infeasibility::NoContiguousSplit { by });
    }
    out
}

fn finish(search: Search) -> Outcome {
    let Search {
        mut stats,
        path,
        best,
        bound,
        status_reason,
        ..
    } = search;
    stats.path = Some(path.join("; "));
    let Some(best) = best else {
        if bound == f64::INFINITY {
            return Outcome {
                method: MethodId::Auto,
                placement: None,
                objective: f64::INFINITY,
                bound,
                status: Status::infeasible(Infeasibility::NoContiguousSplit { by: Prover::Ip }),
                stats,
            };
        }
        return Outcome {
            method: MethodId::Auto,
            placement: None,
            objective: f64::INFINITY,
            bound,
            status: Status::NoPlan {
                reason: StopReason::SearchExhausted {
                    what: "neither the DP, the coarsened path nor the fallbacks found a contiguous plan (add devices or memory, raise --time-limit, or allow non-contiguous splits with --non-contiguous)".into(),
                },
            },
            stats,
        };
    };
    let bound = bound.min(best.max_load);
    let status = if best.max_load <= bound * (1.0 + CLOSED) {
        Status::Optimal
    } else {
        Status::Feasible {
            reason: status_reason,
        }
    };
    Outcome {
        method: MethodId::Auto,
        placement: Some(best.placement),
        objective: best.max_load,
        bound,
        status,
        stats,
    }
}

impl Auto {
    fn through_ip(&self, problem: &Problem, budget: &Budget) -> Result<Outcome, SolveError> {
        let w = problem.workload;
        let mut tps = problem.clone();
        tps.objective = Objective::Throughput;
        tps.contiguous = true;
        let first = self.contiguous_throughput(&tps, &budget.share(1.0 / 3.0))?;
        let mut stats = Stats::default();
        stats.notes.extend(
            first
                .stats
                .notes
                .iter()
                .map(|n| format!("contiguous TPS: {n}")),
        );
        let first_path = first.stats.path.clone().unwrap_or_default();
        let units = Grouping::units(w, problem.contiguous).0.len();
        let latency = matches!(problem.objective, Objective::Latency { .. });
        if units <= IP_MAX_UNITS {
            let mut ip_problem = problem.clone();
            ip_problem.limits.warm_start = first.placement.clone();
            let left = budget.remaining_s().unwrap_or(super::DEFAULT_TIME_LIMIT_S);
            ip_problem.limits.time_limit_s = Some((left - 0.5).max(1.0));
            match ip_within(&ip_problem, left - 0.25) {
                Some(Ok(mut o)) if o.placement.is_some() || first.placement.is_none() => {
                    o.stats.path = Some(format!(
                        "IP warm-started from the contiguous TPS plan ({first_path})"
                    ));
                    o.stats.notes.extend(stats.notes);
                    return Ok(o);
                }
                Some(Ok(o)) => stats
                    .notes
                    .push(format!("the IP returned no plan: {:?}", o.status)),
                Some(Err(e)) => stats.notes.push(format!("the IP failed: {e}")),
                None => stats.notes.push(ABANDONED.into()),
            }
        }
        let Some(placement) = first.placement else {
            return Ok(Outcome { stats, ..first });
        };
        let mut e = evaluate(w, &placement, latency);
        let mut placement = placement;
        if let Objective::Latency { pieces } = problem.objective {
            if e.max_pieces() > pieces {
                let Some((p, within, moved)) = within_pieces(w, placement, pieces) else {
                    return Err(SolveError::Unsupported {
                        method: MethodId::Auto,
                        what: format!("latency with at most {pieces} pieces per accelerator on a graph of {units} units (more than the IP's {IP_MAX_UNITS}): no plan within the pieces was found"),
                    });
                };
                stats.notes.push(format!(
                    "the contiguous TPS plan has accelerators of more than {pieces} pieces: {moved} of them moved to a CPU core"
                ));
                placement = p;
                e = within;
            }
        }
        let objective = problem.objective.value(&e);
        let bound = match problem.objective {
            Objective::Latency { .. } => {
                let d = w.devices();
                let may: Vec<bool> = (0..w.len())
                    .map(|v| {
                        d.accelerators > 0
                            && w.node(v).supported_on_accelerator
                            && w.node(v).size_bytes <= d.memory_per_accelerator_bytes
                    })
                    .collect();
                super::bounds::latency::latency_lower_bound(&super::bounds::latency::finish_bounds(
                    w, &may,
                ))
            }
            _ => {
                let (units, _) = Grouping::units(w, problem.contiguous);
                let hyperedges = units.hyperedges(w, false);
                load_bounds::LowerBound::new(
                    &units,
                    &hyperedges,
                    w.devices(),
                    load_bounds::Tests::ALL,
                )
                .within(budget.share(0.5))
                .value()
            }
        };
        let why = if units > IP_MAX_UNITS {
            format!("IP skipped: {units} units are more than {IP_MAX_UNITS}")
        } else {
            "the IP gave no plan".into()
        };
        stats.path = Some(format!("contiguous TPS plan ({first_path}); {why}"));
        let bound = bound.min(objective);
        Ok(Outcome {
            method: MethodId::Auto,
            placement: Some(match (latency, &e.latency) {
                (true, Some(l)) => l.attach_cut(placement),
                _ => placement,
            }),
            objective,
            bound,
            status: if objective <= bound * (1.0 + CLOSED) {
                Status::Optimal
            } else {
                Status::Feasible {
                    reason: StopReason::SearchExhausted { what: why },
                }
            },
            stats,
        })
    }
}

/// `placement` with every accelerator that the latency scorer cuts into more than `q`
/// pieces moved, nodes and all, to CPU core 0, until none is (a latency plan within the
/// pieces: MODEL.md's CPU nodes are not pieces and latency ignores `maxCPUs`). Moving one
/// accelerator's nodes can change the greedy cut of another, hence the loop; each round
/// empties at least one accelerator, so it ends. The plan, its evaluation and how many
/// accelerators were emptied; `None` when the result is not a valid placement (a node a
/// CPU cannot run).
fn within_pieces(
    w: &crate::model::Workload,
    mut placement: Placement,
    q: usize,
) -> Option<(Placement, crate::score::Evaluation, usize)> {
    use crate::model::Device;
    let mut moved = 0;
    loop {
        let e = evaluate(w, &placement, true);
        if !e.is_valid() {
            return None;
        }
        let over: Vec<usize> = e
            .latency
            .as_ref()?
            .pieces
            .iter()
            .filter(|&&(_, p)| p > q)
            .map(|&(a, _)| a)
            .collect();
        if over.is_empty() {
            return Some((placement, e, moved));
        }
        moved += over.len();
        let devices = placement
            .assignment
            .iter()
            .map(|&d| match d {
                Device::Accelerator(a) if over.contains(&a) => Device::Cpu(0),
                other => other,
            })
            .collect();
        placement = Placement::new(devices);
    }
}

/// Note for an IP still running at auto's deadline.
const ABANDONED: &str = "the IP was still running at the time limit (HiGHS checks its limit only between some steps); its answer is not waited for";

/// The IP on `problem` in a worker thread, waited for at most `wait_s` seconds: HiGHS
/// checks its time limit only between some steps (a phase of the warm-started solve ran
/// 20 s past its limit on an 8-branch wide graph), and auto answers within the limit.
/// `None`: still running at the deadline; the thread finishes on HiGHS's own limit and
/// its answer is dropped.
fn ip_within(problem: &Problem, wait_s: f64) -> Option<Result<Outcome, SolveError>> {
    let workload = problem.workload.clone();
    let (objective, contiguous, limits) = (
        problem.objective,
        problem.contiguous,
        problem.limits.clone(),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("auto-ip".into())
        .spawn(move || {
            let p = Problem {
                workload: &workload,
                devices: crate::solve::Devices::of(&workload),
                objective,
                contiguous,
                limits,
                pipeline: None,
            };
            let _ = tx.send(milp::Ip.solve(&p));
        });
    if spawned.is_err() {
        return Some(milp::Ip.solve(problem));
    }
    rx.recv_timeout(std::time::Duration::from_secs_f64(wait_s.max(0.0)))
        .ok()
}

/// The greedy baseline and, on graphs small enough, PipeDream's chain split: the valid
/// contiguous plans among them.
fn fallbacks(problem: &Problem, c: &Contraction, budget: &Budget) -> Vec<Found> {
    let w = problem.workload;
    let mut found = Vec::new();
    let mut tps = problem.clone();
    // The chain split stops at the time left (the greedy is linear).
    tps.limits.time_limit_s = budget.remaining_s();
    tps.objective = Objective::Throughput;
    tps.contiguous = true;
    if let Ok(o) = Greedy.solve(&tps) {
        found.extend(o.placement.and_then(|p| scored(w, p, "greedy")));
    }
    if c.len() <= CHAIN_SPLIT_MAX_GROUPS && PipeDreamTopo.supports(&tps).is_ok() {
        if let Ok(o) = PipeDreamTopo.solve(&tps) {
            found.extend(o.placement.and_then(|p| scored(w, p, "pipedream-topo")));
        }
    }
    found
}

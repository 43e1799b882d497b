//! The contiguous max-load optimum by dynamic programming over the ideals of the group DAG
//! (Tarnawski et al., NeurIPS 2020, Section 3).
//!
//! A contiguous split is a chain of ideals `∅ = I_0 ⊂ … ⊂ I_r = V`, each difference on one
//! device. With `dp[l][k][I]` the least max-load of placing the ideal `I` on at most `k`
//! accelerators and `l` CPUs:
//!
//! ```text
//! dp[l][k][∅] = 0
//! dp[l][k][I] = min( dp[l][k−1][I], dp[l−1][k][I],
//!                    min_{J ⊊ I} max(dp[l][k−1][J], acc(I \ J)),
//!                    min_{J ⊊ I} max(dp[l−1][k][J], cpu(I \ J)) )
//! ```
//!
//! where `acc(S)` is the accelerator load of MODEL.md (∞ if `S` exceeds the memory or holds
//! an unsupported group) and `cpu(S) = Σ cpuLatency`. The answer is `dp[ℓ][k][V]`; backward
//! nodes ride with their groups, so training graphs need nothing more.
//!
//! The solve, in order (each step keeps the optimum exact):
//! 1. exact reductions: zero-cost leaves folded into their neighbour
//!    ([`crate::solve::leaf_folding`]);
//! 2. the ideals counted before they are listed ([`ideals::estimate`]); a count beyond
//!    `--max-ideals` or the memory budget stops here, before any allocation;
//! 3. the ideals, enumerated without duplicates as a tree of canonical parents, as trimmed
//!    bitsets ([`ideals`]), and their summaries, each from its parent's in O(degree)
//!    ([`crate::solve::ideal_cost`]): `acc(I \ J)` then costs O(frontier);
//! 4. an upper bound `U` from the best chain split of two topological orders
//!    ([`crate::solve::dp::chain`]), and the lower bound `L` of the groups' least loads
//!    ([`pruning::group_floor`]): a chain split with `U ≤ L` is optimal and the solve
//!    ends here;
//! 5. the table reserved against the memory budget, then relaxed level by level in
//!    parallel ([`relax`]) with the exact pruning rules of [`pruning`] (live states, a
//!    window of `J` by compute, reach, the floor `L`);
//! 6. the split read off the back links ([`reconstruct`]).
//!
//! The [`Budget`] (time limit, Ctrl-C, memory) is checked between blocks of the
//! enumeration and between levels of the relaxation; a stop returns
//! [`SolveError::Stopped`] saying why and what to change (the DP has no plan before its
//! last level).
//!
//! Complexity: O(|𝓘| · width) to enumerate and summarise on chain-like graphs (in
//! general O(Σ_I (s_I + |A(I)| + |C(I)| + deg))), O(Σ_I W_I · (s + φ + (k+1)(ℓ+1))) to
//! relax, for |𝓘| ideals, W_I pairs left in the window of `I`, s stored bitset words and φ
//! the frontier width; memory O(|𝓘| · ((k+1)(ℓ+1) + s + φ)) ([`memory_estimate`]).

pub mod chain;
pub mod interleaved;
pub mod pruning;
pub mod reconstruct;
pub mod relax;

use self::pruning::{group_floor, Pruning, Windows};
use self::relax::{Positioned, Relaxation, Table};
use super::budget::{Budget, Exhausted};
use super::ideal_cost::{PairCost, Summaries};
use super::ideals::{self, EnumerationStop, Ideals};
use super::knapsack::FractionalKnapsack;
use super::leaf_folding::fold_leaves;
use super::{
    Infeasibility, Limits, Method, MethodId, Objective, Outcome, Problem, SolveError, Stats,
    Status, StopReason,
};
use crate::model::contraction::Contraction;
use crate::model::numerics::Rescale;
use crate::model::numerics::Sum;
use crate::model::recompute::Recompute;
use crate::model::schedule::{held_bytes, Pipeline};
use crate::model::{Device, Placement, Workload};
use chain::chain_upper_bound;

/// The ideal-lattice DP (`--method dp`).
pub struct Dp;

impl Method for Dp {
    fn id(&self) -> MethodId {
        MethodId::Dp
    }

    fn supports(&self, problem: &Problem) -> Result<(), crate::solve::Unsupported> {
        if problem.objective != Objective::Throughput {
            return Err(crate::solve::Unsupported::DpObjective {
                objective: problem.objective.name(),
            });
        }
        if !problem.contiguous {
            return Err(crate::solve::Unsupported::DpNonContiguous);
        }
        if problem.interleaved() {
            return problem.interleaved_supported();
        }
        Ok(())
    }

    fn solve(&self, problem: &Problem) -> Result<Outcome, SolveError> {
        if problem.interleaved() {
            return interleaved::solve(problem);
        }
        solve_pipeline(problem.workload, &problem.limits, problem.pipeline)
    }
}

/// Solves the contiguous max-load problem with each stage's memory as `pipeline` keeps it
/// in flight (`None`: MODEL.md's memory, [`solve`]).
///
/// - A count that does not depend on the position (GPipe: `m`; one micro-batch: 1) is a
///   per-node size: the plain DP on the workload with `size + (c − 1)·A` per node.
/// - 1F1B (`min(m, P − s)` at stage `s` of `P`), and any schedule with more than one
///   micro-batch in flight under `--recompute auto`: the DP with exact device counts and
///   the stage's position in the state, once per chain length `P` ([`relax`], positioned
///   memory; with recomputation the stage cost `acc_s` of [`relax`]). Only the leaf folds
///   that are safe under the worst case (`m` in flight everywhere, nothing recomputed)
///   are made — a weightless leaf also adds no forward time and moving it beside its only
///   neighbour never adds a stage input; the chain bound, priced with one micro-batch, is
///   not used.
///
/// The position is the stage's place in the split's chain of ideals: stage `s` of the
/// chain sends to stage `s + 1`, as a pipeline runtime runs it.
pub fn solve_pipeline(
    w: &Workload,
    limits: &Limits,
    pipeline: Option<Pipeline>,
) -> Result<Outcome, SolveError> {
    let Some(mut pipeline) = pipeline else {
        return solve(w, limits);
    };
    // Nothing stashed: `mem_r = Σ size + c·In ≥ Σ size = mem`, so no stage recomputes.
    let stashless =
        pipeline.recompute == Recompute::Auto && held_bytes(w).iter().all(|h| h.stash_bytes == 0.0);
    if stashless {
        pipeline.recompute = Recompute::None;
    }
    if !pipeline.needs_positions() {
        let sized = w.with_sizes(&Pipeline::node_bytes(w, pipeline.uniform_in_flight()));
        let mut outcome = solve(&sized, limits)?;
        outcome.stats.notes.push(format!(
            "{}: every stage holds its size plus {} x its stashed activations",
            describe(&pipeline),
            pipeline.uniform_in_flight() - 1
        ));
        if pipeline.recompute == Recompute::Auto {
            outcome.stats.notes.push("recompute auto: with one micro-batch in flight recomputing never saves memory; no stage recomputes".into());
        }
        if stashless {
            outcome.stats.notes.push("recompute auto: no node stashes activations (no activationBytes), so recomputing never saves memory; no stage recomputes".into());
        }
        return Ok(outcome);
    }
    let start = std::time::Instant::now();
    let budget = limits.budget();
    let worst = w.with_sizes(&Pipeline::node_bytes(w, pipeline.micro_batches));
    let folding = fold_leaves(&worst, Contraction::new(&worst), false);
    let c = folding.contraction;
    let held = held_bytes(w);
    let (mut size, mut stash) = (vec![0.0; c.len()], vec![0.0; c.len()]);
    for (v, h) in held.iter().enumerate() {
        let g = c.group_of[v];
        size[g] += w.node(v).size_bytes;
        stash[g] += h.stash_bytes;
    }
    let mut notes = Vec::new();
    if folding.folded > 0 {
        notes.push(format!(
            "{} zero-cost leaf groups folded into their neighbours",
            folding.folded
        ));
    }
    if stashless {
        notes.push("recompute auto: no node stashes activations (no activationBytes), so recomputing never saves memory; no stage recomputes".into());
    }
    let run = solve_dag_with(
        w,
        &c,
        limits.max_ideals,
        &budget,
        start,
        Some(&Staged {
            pipeline,
            size,
            stash,
        }),
    )?;
    Ok(run.outcome(Status::Optimal, None, notes, start))
}

/// Memory the DP may use for its tables when the limits set no budget, bytes (1.5 GiB).
pub const DEFAULT_MEMORY_BUDGET_BYTES: f64 = 1536.0 * 1024.0 * 1024.0;

/// Bytes per ideal besides its bitset words and cut list: the table's `(k+1)(ℓ+1)` values
/// and back links, the summary, the bitset's span and parent, and the two sorted windows.
pub fn fixed_bytes_per_ideal(k: usize, l: usize) -> usize {
    Table::bytes_per_ideal((k + 1) * (l + 1))
        + std::mem::size_of::<super::ideal_cost::IdealSummary>()
        + 8
        + Ideals::BYTES_PER_IDEAL
        + Windows::BYTES_PER_IDEAL
}

/// The memory the DP needs for `ideals` ideals on `k` accelerators and `ℓ` CPUs, bytes,
/// before they are listed: [`fixed_bytes_per_ideal`] plus one bitset word and two cut-list
/// entries per ideal (the typical size on chain-like graphs; the real figure is checked
/// against the budget once the ideals are known).
pub fn memory_estimate(ideals: u128, k: usize, l: usize) -> f64 {
    ideals as f64 * (fixed_bytes_per_ideal(k, l) + 8 + 2 * 8) as f64
}

/// The group DAG the DP enumerates: the colour-class contraction with every free leaf
/// folded ([`crate::solve::leaf_folding`], memory-bound leaves included), and how many
/// leaves were folded. Its ideal count ([`ideals::estimate`]) is what the DP lists first.
pub fn reduced_contraction(w: &Workload) -> (Contraction, usize) {
    let f = fold_leaves(w, Contraction::new(w), true);
    (f.contraction, f.folded)
}

/// Solves the contiguous max-load problem to optimality within the limits' time and memory
/// budget (the memory budget defaults to [`DEFAULT_MEMORY_BUDGET_BYTES`]).
pub fn solve(w: &Workload, limits: &Limits) -> Result<Outcome, SolveError> {
    solve_within(w, limits.max_ideals, &limits.budget())
}

/// Solves the contiguous max-load problem to optimality, enumerating at most `max_ideals`
/// ideals, within `budget` (without a memory allowance, [`DEFAULT_MEMORY_BUDGET_BYTES`]).
///
/// Leaves folded although memory may bind are certified as [`crate::solve::leaf_folding`]
/// describes: the DP with them weightless (`R`, a lower bound) and, when its plan does not
/// fit with their bytes, with their bytes (`F`, a plan); when the two differ, the DP runs
/// on the DAG without those folds, and if that is beyond the limits the outcome is `F`'s
/// plan with `R`'s bound ([`Status::Feasible`]).
///
/// Where sums over the workload could overflow, the DP runs on the workload rescaled by
/// powers of two ([`Rescale::for_sums`]; exact) and its objective and bound are scaled back.
pub fn solve_within(
    w: &Workload,
    max_ideals: usize,
    budget: &Budget,
) -> Result<Outcome, SolveError> {
    let rescale = Rescale::for_sums(w);
    if rescale.is_identity() {
        return solve_unscaled(w, max_ideals, budget);
    }
    let mut outcome = solve_unscaled(&rescale.apply(w), max_ideals, budget)?;
    outcome.objective /= rescale.time;
    outcome.bound /= rescale.time;
    if matches!(outcome.status, Status::Infeasible { .. }) {
        outcome.status = infeasibility(w, &Contraction::new(w));
    }
    outcome.stats.notes.push(format!(
        "times scaled by {:e} and bytes by {:e} (powers of two) to keep sums finite",
        rescale.time, rescale.bytes
    ));
    Ok(outcome)
}

fn solve_unscaled(w: &Workload, max_ideals: usize, budget: &Budget) -> Result<Outcome, SolveError> {
    let start = std::time::Instant::now();
    let folding = fold_leaves(w, Contraction::new(w), true);
    let mut notes = Vec::new();
    let safe_folds = folding.folded - folding.memory_bound;
    if safe_folds > 0 {
        notes.push(format!(
            "{safe_folds} zero-cost leaf groups folded into their neighbours"
        ));
    }
    if folding.memory_bound == 0 {
        let run = solve_dag(w, &folding.contraction, max_ideals, budget, start)?;
        return Ok(run.outcome(Status::Optimal, None, notes, start));
    }
    let leaves = folding.memory_bound;
    let safe = fold_leaves(w, Contraction::new(w), false);
    let (relaxed, unfolded) = (
        ideals::estimate_in(&folding.contraction, budget),
        ideals::estimate_in(&safe.contraction, budget),
    );
    if unfolded.upper_bound <= relaxed.upper_bound.saturating_mul(2) {
        notes.push(format!("{leaves} zero-cost leaf groups with bytes kept apart (memory binds; the DAG stays small)"));
        let run = solve_dag(w, &safe.contraction, max_ideals, budget, start)?;
        return Ok(run.outcome(Status::Optimal, None, notes, start));
    }
    let weightless = solve_dag(w, &folding.weightless(), max_ideals, budget, start)?;
    let Some(lower_plan) = &weightless.placement else {
        // No plan even with the leaves weightless: none for the workload (OPT(R) ≤ OPT(G)).
        return Ok(weightless.outcome(Status::Optimal, None, notes, start));
    };
    if fits_memory(w, lower_plan) {
        notes.push(format!(
            "{leaves} zero-cost leaf groups with bytes folded into their neighbours; certified: the optimum with them weightless fits memory"
        ));
        return Ok(weightless.outcome(Status::Optimal, None, notes, start));
    }
    let lower = weightless.objective;
    let folded = solve_dag(w, &folding.contraction, max_ideals, budget, start)?;
    if folded.placement.is_some() && folded.objective <= lower * (1.0 + 1e-9) {
        notes.push(format!(
            "{leaves} zero-cost leaf groups with bytes folded into their neighbours; certified: the folded optimum equals the optimum with them weightless"
        ));
        return Ok(folded.outcome(Status::Optimal, None, notes, start));
    }
    match solve_dag(w, &safe.contraction, max_ideals, budget, start) {
        Ok(run) => {
            notes.push(format!("{leaves} zero-cost leaf groups with bytes kept apart (folding them costs: {} > {lower})", folded.objective));
            Ok(run.outcome(Status::Optimal, None, notes, start))
        }
        Err(e @ (SolveError::TooManyIdeals { .. } | SolveError::Stopped { .. }))
            if folded.placement.is_some() =>
        {
            notes.push(format!(
                "{leaves} zero-cost leaves folded into their neighbours under a binding memory; the DAG without that folding is beyond the limits ({e})"
            ));
            let reason = match e {
                SolveError::Stopped { reason, .. } => StopReason::from(reason),
                SolveError::TooManyIdeals { limit, .. } => StopReason::IdealLimit { limit },
                _ => unreachable!("matched above"),
            };
            Ok(folded.outcome(Status::Feasible { reason }, Some(lower), notes, start))
        }
        Err(e) => Err(e),
    }
}

/// Whether every accelerator of `p` holds at most its memory.
fn fits_memory(w: &Workload, p: &Placement) -> bool {
    let mut used: std::collections::HashMap<usize, f64> = Default::default();
    for (v, d) in p.assignment.iter().enumerate() {
        if let Device::Accelerator(a) = *d {
            *used.entry(a).or_insert(0.0) += w.node(v).size_bytes;
        }
    }
    used.values()
        .all(|&b| b <= w.devices().memory_per_accelerator_bytes)
}

/// The DP's result on one group DAG.
struct Run {
    /// The optimum (infinite when no split exists).
    objective: f64,
    placement: Option<Placement>,
    /// Why no split exists, when none does.
    infeasible: Option<Status>,
    stats: Stats,
}

impl Run {
    /// The outcome: `status` when there is a plan, [`Status::Infeasible`] otherwise;
    /// `bound` the proven lower bound when it is not the objective.
    fn outcome(
        self,
        status: Status,
        bound: Option<f64>,
        notes: Vec<String>,
        start: std::time::Instant,
    ) -> Outcome {
        let mut stats = self.stats;
        stats.notes.splice(0..0, notes);
        stats.time_s = start.elapsed().as_secs_f64();
        let status = match self.infeasible {
            Some(infeasible) => infeasible,
            None => status,
        };
        Outcome {
            method: MethodId::Dp,
            objective: self.objective,
            bound: bound.unwrap_or(self.objective),
            placement: self.placement,
            status,
            stats,
        }
    }
}

/// The exact DP on the group DAG `c`.
fn solve_dag(
    w: &Workload,
    c: &Contraction,
    max_ideals: usize,
    budget: &Budget,
    start: std::time::Instant,
) -> Result<Run, SolveError> {
    solve_dag_with(w, c, max_ideals, budget, start, None)
}

/// Stage memory under a schedule whose stash count depends on the position (1F1B), per
/// group of the DAG: `size` with one micro-batch in flight, `stash` per further one (and,
/// with `pipeline.recompute`, the choice to recompute, [`relax`]).
struct Staged {
    pipeline: Pipeline,
    size: Vec<f64>,
    stash: Vec<f64>,
}

/// The exact DP on the group DAG `c`; with `staged`, one exact-count relaxation per chain
/// length `P = 1 … k + ℓ` ([`relax`], positioned memory), each pruned by the best split
/// of the lengths before it, and the best over all `P`.
fn solve_dag_with(
    w: &Workload,
    c: &Contraction,
    max_ideals: usize,
    budget: &Budget,
    start: std::time::Instant,
    staged: Option<&Staged>,
) -> Result<Run, SolveError> {
    let cost = match staged {
        Some(st) if st.pipeline.recompute == Recompute::Auto => PairCost::new(w, c)
            .with_memory(st.size.clone(), st.stash.clone())
            .with_stage_inputs(w, c),
        Some(st) => PairCost::new(w, c).with_memory(st.size.clone(), st.stash.clone()),
        None => PairCost::new(w, c),
    };
    let devices = w.devices();
    let stop = Stop { start };
    let allowance = budget.memory_bytes().unwrap_or(DEFAULT_MEMORY_BUDGET_BYTES);
    let (limit, which) = ideal_limit(allowance, max_ideals, devices.accelerators, devices.cpus);
    let ideals = enumerate_within(c, limit, &which, budget, stop)?;
    let n_ideals = ideals.len();
    let summaries = Summaries::of_ideals(&cost, &ideals, budget)
        .map_err(|r| stop.at(r, format!("while summarising {n_ideals} ideals")))?;
    let forward: Option<Vec<Sum>> = cost
        .prices_recomputation()
        .then(|| cost.forward_sums(&ideals));
    let dag = Dag {
        w,
        c,
        cost,
        ideals,
        summaries,
        forward,
        k: devices.accelerators,
        l: devices.cpus,
        memory: devices.memory_per_accelerator_bytes,
        budget,
        stop,
    };
    dag.check_memory(allowance, staged.is_some())?;
    let stats = Stats {
        ideals: Some(n_ideals),
        groups: Some(c.len()),
        ..Stats::default()
    };
    match staged {
        Some(staged) => dag.solve_staged(staged, stats),
        None => dag.solve_plain(stats),
    }
}

/// How a stop of the DP is reported: [`SolveError::Stopped`] with the phase and the time
/// since `start`.
#[derive(Clone, Copy)]
struct Stop {
    start: std::time::Instant,
}

impl Stop {
    fn at(self, reason: Exhausted, phase: String) -> SolveError {
        SolveError::Stopped {
            method: MethodId::Dp,
            detail: stop_detail(&reason, &phase, self.start.elapsed().as_secs_f64()),
            reason,
        }
    }
}

/// The most ideals the DP lists: `--max-ideals`, or fewer when the memory `allowance`
/// holds fewer at the fixed bytes per ideal for `k` accelerators and `l` CPUs; with the
/// sentence saying which limit it is.
fn ideal_limit(allowance: f64, max_ideals: usize, k: usize, l: usize) -> (usize, String) {
    let per_ideal = fixed_bytes_per_ideal(k, l);
    let memory_cap = (allowance / per_ideal as f64)
        .floor()
        .min(usize::MAX as f64) as usize;
    if max_ideals <= memory_cap {
        (max_ideals, "--max-ideals allows".to_string())
    } else {
        (
            memory_cap,
            format!(
                "the DP's memory budget of {} holds for this many devices at {per_ideal} bytes per ideal, fewer than the {max_ideals} allowed (--max-ideals)",
                gib(allowance)
            ),
        )
    }
}

/// The ideals of `c`, at most `limit` of them (refused before listing when the estimate
/// already exceeds it); errors say which limit (`which`) stopped it.
fn enumerate_within(
    c: &Contraction,
    limit: usize,
    which: &str,
    budget: &Budget,
    stop: Stop,
) -> Result<Ideals, SolveError> {
    let estimate = ideals::estimate_in(c, budget);
    if estimate.lower_bound > limit as u128 {
        let found = usize::try_from(estimate.lower_bound).unwrap_or(usize::MAX);
        let counted = if estimate.exact {
            "exactly"
        } else {
            "at least"
        };
        return Err(SolveError::TooManyIdeals {
            found,
            limit,
            which: format!("{which}: it has {counted} {found}, counted before enumerating"),
        });
    }
    Ideals::enumerate(c, limit, budget).map_err(|e| match e {
        EnumerationStop::TooMany { found } => SolveError::TooManyIdeals {
            found,
            limit,
            which: format!("{which}: {found} enumerated before stopping"),
        },
        EnumerationStop::Budget { reason, found } => {
            stop.at(reason, format!("while enumerating ideals ({found} so far)"))
        }
    })
}

/// The DP's lattice of one workload: the pair costs, the ideals with their summaries (and
/// forward sums when stages may recompute), the devices (`k` accelerators of `memory`
/// bytes, `ℓ` CPUs) and the budget.
struct Dag<'a> {
    w: &'a Workload,
    c: &'a Contraction,
    cost: PairCost,
    ideals: Ideals,
    summaries: Summaries,
    forward: Option<Vec<Sum>>,
    k: usize,
    l: usize,
    memory: f64,
    budget: &'a Budget,
    stop: Stop,
}

impl Dag<'_> {
    /// Refuses (as a memory stop) a DP whose ideals, summaries, forward sums, tables (two
    /// under a staged schedule: the best so far beside the one being relaxed) and windows
    /// pass the memory `allowance`.
    fn check_memory(&self, allowance: f64, staged: bool) -> Result<(), SolveError> {
        let n_ideals = self.ideals.len();
        let tables = if staged { 2 } else { 1 };
        let forward_bytes = self
            .forward
            .as_ref()
            .map_or(0, |f| f.capacity() * std::mem::size_of::<Sum>());
        let needed = (self.ideals.heap_bytes()
            + self.summaries.heap_bytes()
            + forward_bytes
            + n_ideals
                * (tables * Table::bytes_per_ideal((self.k + 1) * (self.l + 1))
                    + Windows::BYTES_PER_IDEAL)) as f64;
        if needed > allowance {
            let what = format!("the DP over {n_ideals} ideals (table, summaries and bitsets)");
            return Err(self.stop.at(
                Exhausted::Memory {
                    what,
                    needed_bytes: needed,
                    budget_bytes: allowance,
                },
                String::new(),
            ));
        }
        Ok(())
    }

    /// A run without a plan: the DP's table has no finite split of the whole graph.
    fn infeasible(&self, stats: Stats) -> Run {
        Run {
            objective: f64::INFINITY,
            placement: None,
            infeasible: Some(infeasibility(self.w, self.c)),
            stats,
        }
    }

    /// The best split over the chain lengths `P = 1 … k + ℓ`, each relaxed with exact
    /// device counts and positioned memory, pruned by the best of the lengths before it;
    /// the stages that recompute under `--recompute auto` are noted and placed.
    fn solve_staged(&self, staged: &Staged, mut stats: Stats) -> Result<Run, SolveError> {
        let (k, l) = (self.k, self.l);
        let full = self.ideals.len() - 1;
        let windows = Windows::new(&self.summaries.heads, l > 0);
        let mut best: Option<(f64, usize, usize, Table)> = None;
        let mut pairs = 0;
        for p in 1..=(k + l).min(self.c.len()) {
            let (table, priced) =
                self.relax_stages(staged, p, best.as_ref().map(|b| b.0), &windows)?;
            pairs += priced;
            let ends = (0..=l.min(p))
                .filter(|&cl| p - cl <= k)
                .map(|cl| (table.at(full, cl, p - cl), cl, p - cl));
            if let Some((v, cl, ck)) = ends.min_by(|a, b| a.0.total_cmp(&b.0)) {
                if v < best.as_ref().map_or(f64::INFINITY, |b| b.0) {
                    best = Some((v, cl, ck, table));
                }
            }
        }
        stats.ideal_pairs = Some(pairs);
        let Some((objective, cl, ck, table)) = best else {
            return Ok(self.infeasible(stats));
        };
        let stages =
            reconstruct::stages_from(&table, full, cl, ck).expect("the best state is finite");
        stats.notes.push(format!(
            "{}: {} pipeline stages, each holding its size plus (in flight - 1) x its stashed activations",
            describe(&staged.pipeline),
            stages.len()
        ));
        let recomputing = recomputing_stages(
            &stages,
            &self.summaries,
            Positioned {
                pipeline: staged.pipeline,
                stages: stages.len(),
            },
            self.memory,
        );
        if staged.pipeline.recompute == Recompute::Auto {
            stats.notes.push(match recomputing.len() {
                0 => "recompute auto: every stage fits with its activations stashed; none recomputes".to_string(),
                r => format!(
                    "recompute auto: {r} of {} stages recompute their activations (they fit only keeping their inputs)",
                    stages.len()
                ),
            });
        }
        let placement = placement_of(&stages, &self.ideals, self.c, recomputing);
        Ok(Run {
            objective,
            placement: Some(placement),
            infeasible: None,
            stats,
        })
    }

    /// The table of splits into exactly `p` stages (positioned memory), pruned by `best`,
    /// the best value over the lengths before; with the pairs priced.
    fn relax_stages(
        &self,
        staged: &Staged,
        p: usize,
        best: Option<f64>,
        windows: &Windows,
    ) -> Result<(Table, u64), SolveError> {
        let n_ideals = self.ideals.len();
        let levels = self.ideals.level_start.len() - 2;
        let pruning = Pruning::new(
            self.c,
            best,
            self.summaries.heads[n_ideals - 1].fpga.value(),
            self.k,
            self.l,
        );
        let relaxation = Relaxation {
            family: &self.ideals,
            summaries: &self.summaries,
            cost: &self.cost,
            pruning: &pruning,
            windows,
            memory: self.memory,
            positioned: Some(Positioned {
                pipeline: staged.pipeline,
                stages: p,
            }),
            forward: self.forward.as_deref(),
        };
        relaxation.run(self.budget).map_err(|(r, level)| match level {
            0 => self.stop.at(r, format!("while filling the table of {n_ideals} ideals for {p} pipeline stages")),
            _ => self.stop.at(r, format!("while relaxing level {level} of {levels} ({n_ideals} ideals) for {p} pipeline stages")),
        })
    }

    /// The DP at its best split, pruned by the chain splits' upper bound.
    fn solve_plain(&self, mut stats: Stats) -> Result<Run, SolveError> {
        let (k, l) = (self.k, self.l);
        let n_ideals = self.ideals.len();
        let full = n_ideals - 1;
        let upper =
            chain_upper_bound(self.c, &self.cost, k, l, self.memory, self.budget).map_err(|r| {
                self.stop.at(
                    r,
                    format!("while computing the chain bound ({n_ideals} ideals enumerated)"),
                )
            })?;
        if let Some((u, _)) = &upper {
            stats
                .notes
                .push(format!("upper bound from chain splits: {u}"));
        }
        let floor = group_floor(self.c, k, l, self.memory);
        if let Some((u, placement)) = upper.as_ref().filter(|(u, _)| *u <= floor) {
            // The chain split meets the floor (pruning, the floor rule): it is optimal.
            stats.ideal_pairs = Some(0);
            stats.notes.push(format!(
                "the chain split meets the lower bound {floor} (a group's least load on any device it fits): optimal without relaxing the ideals"
            ));
            return Ok(Run {
                objective: *u,
                placement: Some(placement.clone()),
                infeasible: None,
                stats,
            });
        }
        let pruning = Pruning::new(
            self.c,
            upper.map(|(u, _)| u),
            self.summaries.heads[n_ideals - 1].fpga.value(),
            k,
            l,
        )
        .with_floor(floor);
        let windows = Windows::new(&self.summaries.heads, l > 0);
        self.budget.check().map_err(|r| {
            self.stop
                .at(r, format!("while sorting {n_ideals} ideals by load"))
        })?;
        let relaxation = Relaxation {
            family: &self.ideals,
            summaries: &self.summaries,
            cost: &self.cost,
            pruning: &pruning,
            windows: &windows,
            memory: self.memory,
            positioned: None,
            forward: None,
        };
        let levels = self.ideals.level_start.len() - 2;
        let (table, pairs) = relaxation
            .run(self.budget)
            .map_err(|(r, level)| match level {
                0 => self
                    .stop
                    .at(r, format!("while filling the table of {n_ideals} ideals")),
                _ => self.stop.at(
                    r,
                    format!("while relaxing level {level} of {levels} ({n_ideals} ideals)"),
                ),
            })?;
        stats.ideal_pairs = Some(pairs);
        let Some(stages) = reconstruct::stages(&table, full) else {
            return Ok(self.infeasible(stats));
        };
        let placement = placement_of(&stages, &self.ideals, self.c, Vec::new());
        Ok(Run {
            objective: table.at(full, l, k),
            placement: Some(placement),
            infeasible: None,
            stats,
        })
    }
}

/// The placement of a split's stages, `recompute` the devices that recompute.
fn placement_of(
    stages: &[reconstruct::Stage],
    ideals: &Ideals,
    c: &Contraction,
    recompute: Vec<Device>,
) -> Placement {
    let mut group_device = vec![Device::Cpu(0); c.len()];
    for stage in stages {
        for g in ideals.get(stage.ideal).difference(&ideals.get(stage.from)) {
            group_device[g] = stage.device;
        }
    }
    Placement::new(c.group_of.iter().map(|&g| group_device[g]).collect())
        .with_recompute(recompute)
        .canonical()
}

/// The accelerators of a positioned split (`stages`, the last pipeline stage first) whose
/// stage does not fit with its stash held at its position: the ones the relaxation priced
/// as recomputing ([`relax`]), by the same test on the same sums.
fn recomputing_stages(
    stages: &[reconstruct::Stage],
    summaries: &Summaries,
    chain: Positioned,
    memory: f64,
) -> Vec<Device> {
    let p = stages.len();
    stages
        .iter()
        .enumerate()
        .filter(|(_, st)| st.device.is_accelerator())
        .filter(|(t, st)| {
            let (hi, hj) = (&summaries.heads[st.ideal], &summaries.heads[st.from]);
            let (size, stash) = (hi.size.minus_sum(hj.size).value(), hi.stash - hj.stash);
            // Walk order t puts the stage at position p − 1 − t, reaching p − t devices.
            matches!(
                chain.fit(p - t, size, stash, memory),
                relax::StageFit::Recompute { .. }
            )
        })
        .map(|(_, st)| st.device)
        .collect()
}

/// `1f1b with 8 micro-batches`.
fn describe(p: &Pipeline) -> String {
    let m = p.micro_batches;
    format!(
        "{} with {m} micro-batch{}",
        p.schedule,
        if m == 1 { "" } else { "es" }
    )
}

/// What a stopped run was doing and what to change.
fn stop_detail(reason: &Exhausted, phase: &str, elapsed_s: f64) -> String {
    match reason {
        Exhausted::TimeLimit => {
            format!("{phase} after {elapsed_s:.1} s; raise --time-limit, coarsen the graph (fuse layers) or use --method ip")
        }
        Exhausted::Interrupted => format!("{phase} after {elapsed_s:.1} s"),
        Exhausted::Memory { .. } => String::new(),
    }
}

fn gib(bytes: f64) -> String {
    format!("{:.2} GiB", bytes / (1024.0 * 1024.0 * 1024.0))
}

/// The most accelerator compute CPUs can take off the accelerators within a CPU-time
/// budget `B`: the fractional knapsack of [`super::knapsack`] over the groups (weight cpu
/// time, value fpga time), 0 for `B ≤ 0` (no CPU), scaled up by 1e-9 for rounding. An
/// upper bound on any real choice of groups, so pruning with it is exact.
struct CpuAbsorption(FractionalKnapsack);

impl CpuAbsorption {
    fn new(c: &Contraction) -> Self {
        CpuAbsorption(FractionalKnapsack::new(
            c.groups.iter().map(|g| (g.cpu_latency, g.fpga_latency)),
        ))
    }

    fn at(&self, budget: f64) -> f64 {
        if budget <= 0.0 {
            return 0.0;
        }
        if !budget.is_finite() {
            return f64::INFINITY;
        }
        self.0.value(budget) * (1.0 + 1e-9)
    }
}

fn infeasibility(w: &Workload, c: &Contraction) -> Status {
    let d = w.devices();
    if let Some(g) = c
        .groups
        .iter()
        .find(|g| g.size_bytes > d.memory_per_accelerator_bytes && d.cpus == 0)
    {
        return Status::infeasible(Infeasibility::GroupFitsNoDevice {
            node: w.node(g.nodes[0]).id,
            size_bytes: g.size_bytes,
            memory_bytes: d.memory_per_accelerator_bytes,
        });
    }
    Status::Infeasible {
        reason: Infeasibility::NoContiguousSplitOnDevices {
            accelerators: d.accelerators,
            memory_bytes: d.memory_per_accelerator_bytes,
            cpus: d.cpus,
        },
        non_contiguous_may_help: true,
    }
}

//! The exact DP under Megatron-LM's interleaved schedule (`--schedule interleaved:v`).
//!
//! An interleaved plan ([`crate::model::schedule`]) is a chain of `T = p·v` ideals
//! `∅ = I_0 ⊆ I_1 ⊆ … ⊆ I_T = V` of the group DAG, stage `t = I_{t+1} \ I_t` being chunk
//! `⌊t/p⌋` of accelerator `t mod p`. Device `d` holds the union `S_d` of its `v` chunks,
//! and pays MODEL.md's load of that union (not the sum of its chunks' loads: an edge
//! between two of its chunks costs nothing) and the schedule's memory of its chunks
//! (`resident + max_{n ∈ N_d} Σ_c n_c·a_c`, [`crate::solve::milp::interleaved`]). The
//! objective `max_d load(S_d)` is a maximum of per-device costs, but a device's chunks lie
//! `p` stages apart, so the DP of [`super`] (one stage per step) cannot price them.
//!
//! **Devices as steps.** Write round `r` for the stages `r·p … r·p + p − 1` (chunk `r` of
//! every device), and `X_r = I_{r·p}` for the ideal where round `r` starts. Taking the
//! devices in order `d = 0 … p − 1`, device `d` advances every round by one stage at once:
//! the state before device `d` is the tuple
//!
//! ```text
//! σ_d = (X_1, …, X_{v−1}; F_0, …, F_{v−1}),   F_r = I_{r·p + d},   X_r ⊆ F_r ⊆ X_{r+1}
//! ```
//!
//! (`X_0 = ∅`, `X_v = V`), and device `d` moves to `σ_{d+1}` by choosing `F'_r ⊇ F_r` with
//! `F'_r ⊆ X_{r+1}` for every `r`; its set is `S_d = ∪_r (F'_r \ F_r)`, known in full at
//! that step, so its exact load and memory are its cost:
//!
//! ```text
//! f_0(X; F = (∅, X_1, …, X_{v−1})) = 0                       for every X_1 ⊆ … ⊆ X_{v−1}
//! f_{d+1}(σ') = min over σ → σ' of max(f_d(σ), cost_d(S_d))
//! answer      = f_p(X; F = (X_1, …, X_{v−1}, V))             (F_r = X_{r+1}: rounds meet)
//! ```
//!
//! with `cost_d(S) = load(S)` if `S` fits holding its stashes, `load(S) + R(S)` if it does
//! not and fits recomputing (`--recompute auto`; [`crate::model::recompute`]), `∞`
//! otherwise. Every chain of `T` ideals is one path `σ_0 → … → σ_p` and every path is one
//! chain, so over the whole ideal lattice `𝓘` this is exact. The junctions `X_r` stay in
//! the state because round `r − 1` must end exactly where round `r` began.
//!
//! **Complexity.** `|σ| ≤ |𝓘|^{2v−1}` states per device and `|𝓘|^v` moves each:
//! O(p·|𝓘|^{3v−1}·(G + Σ|T_e|)) — `|𝓘|^5` for `v = 2`, polynomial but steep. Exact
//! prunings against a target `τ` (only plans of value below `τ` are sought) keep it small:
//! a move whose compute alone, or whose value, reaches `τ` is not taken (moves come by
//! increasing compute, so a loop stops at the first); nor one that leaves the later
//! devices more compute than `(p − d − 1)·τ` (the last round's move starts where that
//! allows, by binary search); memory is screened from per-ideal sums before any group is
//! read; a state reached twice keeps the smaller value. The states of one device step are
//! expanded in parallel (rayon), in blocks with their own tables, merged keeping the
//! smaller value (ties to the smaller parent: the result does not depend on the threads).
//!
//! **The solve.** Upper bound `U`: the best of the interleaved IP's heuristic plans
//! ([`chain_plans`], and [`crate::model::schedule::split_plans`]). Lower bound `L`: the
//! combinatorial load bound of every assignment of the groups to the accelerators
//! ([`crate::solve::bounds::load`]; interleaved plans are among them and
//! recomputation only adds time), at least the compute shared by `p`. Then:
//!
//! 1. the DP over prefixes of a topological order at `K = 16, 32, 64, …` cuts (balanced
//!    by compute and by count; any chain drawn from them is a plan), `τ` just below `U`,
//!    each run tightening `U`;
//! 2. when the lattice has at most [`LATTICE_LIMIT`] ideals, runs over all of `𝓘` with
//!    `τ = L + f·(U − L)`, `f = 0.5, 0.75, 0.9, 0.97, 1`: a run that finds no plan below
//!    `τ` proves `L = τ`, and the first that finds one has found the optimum (the least of
//!    all plans below `τ`); at `f = 1` a run that finds none proves `U`'s plan optimal.
//!
//! A plan within [`crate::solve::DEFAULT_GAP`] of `L` is optimal at once. A run cut
//! short by the budget (time, Ctrl-C, checked every 4,096 moves and every block of
//! states) or by the state limit leaves the best plan, `L` and the gap.

use std::collections::HashMap;
use std::time::Instant;

use rayon::prelude::*;

use crate::model::contraction::Contraction;
use crate::model::grouping::{Grouping, Hyperedge};
use crate::model::recompute::{backward_input_vectors, recompute_data, Recompute, RecomputeData};
use crate::model::schedule::{held_bytes, split_plans, stash_vectors, Pipeline, Schedule};
use crate::model::{Device, DeviceSet, Placement, Workload};
use crate::solve::budget::Budget;
use crate::solve::candidate::{candidate, Candidate};
use crate::solve::ideals::Ideals;
use crate::solve::{
    CheckFailure, Infeasibility, MethodId, Outcome, Problem, SolveError, Stats, Status, StopReason,
};

/// The largest ideal lattice the exact run takes on.
pub const LATTICE_LIMIT: usize = 3000;
/// States kept per device step before a run gives up (about 100 bytes each).
const STATE_LIMIT: usize = 4_000_000;
/// About what one state costs beside its key's `2v − 1` junctions (4 bytes each): the
/// key's vector header and allocation, its copy in the index, the index entry and the
/// value; measured ~100 bytes a state at v = 2.
const STATE_BYTES: f64 = 90.0;

/// Bytes of one state with `v` chunks per device, as counted against the memory budget.
fn state_bytes(v: usize) -> f64 {
    STATE_BYTES + 8.0 * (2 * v - 1) as f64
}

/// The states one device step may keep: [`STATE_LIMIT`], and what a third of the memory
/// budget holds (a step keeps its states and builds the next's, each block its own table).
fn state_limit(v: usize, budget: &Budget) -> usize {
    let held = budget
        .memory_bytes()
        .map_or(f64::INFINITY, |m| m / 3.0 / state_bytes(v));
    STATE_LIMIT.min(held.min(usize::MAX as f64) as usize)
}
/// States expanded by one parallel task.
const BLOCK_STATES: usize = 64;
/// The accelerator time's place in [`Figures`].
const COMPUTE: usize = 4;
/// Relative tolerance of the memory limit, as the scorer's check.
const MEMORY_TOLERANCE: f64 = 1e-9;
/// A plan within this relative distance of `U` does not count as better.
const PRUNE: f64 = 1e-9;

/// Solves the max-load problem of `problem` under its interleaved schedule exactly
/// (module docs).
/// Without `--time-limit` it stops after [`crate::solve::DEFAULT_TIME_LIMIT_S`].
pub fn solve(problem: &Problem) -> Result<Outcome, SolveError> {
    let budget = match problem.limits.time_limit_s {
        Some(_) => problem.limits.budget(),
        None => Budget::new(
            Some(crate::solve::DEFAULT_TIME_LIMIT_S),
            problem.limits.memory_budget_bytes,
        ),
    };
    solve_within(problem, &budget, true)
}

/// [`solve`] within `budget`. Without `unbounded`, the lattice is searched only below a
/// plan in hand: with none (nothing fits yet) the search over every chain that fits can be
/// long, and the caller (`auto`) leaves infeasibility to the IP.
pub fn solve_within(
    problem: &Problem,
    budget: &Budget,
    unbounded: bool,
) -> Result<Outcome, SolveError> {
    let started = Instant::now();
    let w = problem.workload;
    let pipeline = problem
        .pipeline
        .expect("the interleaved DP runs under a schedule");
    let p = w.devices().accelerators;
    let v = pipeline.schedule.chunks();
    let contraction = Contraction::new(w);
    let mut stats = Stats {
        groups: Some(contraction.len()),
        ..Stats::default()
    };
    if p == 0 {
        return Ok(outcome(
            None,
            f64::INFINITY,
            f64::INFINITY,
            Status::infeasible(Infeasibility::InterleavedWithoutAccelerators),
            stats,
        ));
    }
    let vectors = device_vectors(&pipeline, p)?;
    if let Some(reason) = memory_certificate(w, pipeline, &vectors) {
        return Ok(outcome(
            None,
            f64::INFINITY,
            f64::INFINITY,
            Status::infeasible(reason),
            stats,
        ));
    }
    // Warm starts: the heuristic plans of the interleaved IP, scored exactly.
    let heuristic = chain_plans(w, &problem.limits, &budget.share(0.2), pipeline)
        .ok()
        .and_then(|o| o.placement)
        .and_then(|placement| candidate(problem, placement, "dp warm start"));
    let lattice = Ideals::enumerate(&contraction, LATTICE_LIMIT, &budget.share(0.1)).ok();
    let units = contraction.into_grouping();
    let best: Option<Candidate> = split_plans(&units, p, v)
        .into_iter()
        .filter_map(|placement| candidate(problem, placement, "split"))
        .chain(heuristic)
        .min_by(|a, b| a.score.total_cmp(&b.score));
    if let Some(b) = &best {
        stats
            .notes
            .push(format!("warm start ({}) scores {}", b.source, b.score));
    }
    let model = Model::new(&units, w, pipeline, p, vectors);
    let lower = lower_bound(problem, &units, &model, budget, &mut stats);
    let mut search = Search {
        problem,
        model: &model,
        units: &units,
        proven: best.as_ref().is_some_and(|b| meets_bound(b.score, lower)),
        best,
        lower,
        stop: None,
        moves: 0,
        stats,
    };
    search.prefix_chains(lattice.as_ref().map(|l| l.len()), budget)?;
    if search.proven {
        search.stats.notes.push(format!(
            "the best plan meets the lower bound {}: optimal",
            search.lower
        ));
    }
    match lattice {
        _ if search.proven => {}
        Some(_) if !unbounded && search.best.is_none() => {
            search.stop = Some(StopReason::SearchExhausted {
                what: "no plan from the prefixes, and the lattice is searched only below one here"
                    .into(),
            });
        }
        Some(ideals) => search.lattice(ideals, budget)?,
        None => {
            search.stop = Some(StopReason::IdealLimit {
                limit: LATTICE_LIMIT,
            });
            search.stats.notes.push(format!("more than {LATTICE_LIMIT} ideals (or no time to list them): the DP searched chains of prefixes only, so it proves no optimum"));
        }
    }
    Ok(search.finish(started))
}

/// Per accelerator `d` of `p`: its stash vector and its backward inputs' vector under the
/// schedule; a schedule these sizes do not take is refused, naming it.
fn device_vectors(pipeline: &Pipeline, p: usize) -> Result<Vec<DeviceVectors>, SolveError> {
    (0..p)
        .map(|d| {
            let inputs = backward_input_vectors(pipeline.schedule, p, pipeline.micro_batches, d);
            Ok((stash_vectors(pipeline, p, d)?, inputs?))
        })
        .collect::<Result<Vec<_>, crate::model::schedule::ScheduleError>>()
        .map_err(|e| SolveError::Unsupported {
            method: MethodId::Dp,
            what: format!("{} with these sizes: {e}", pipeline.schedule),
        })
}

/// The combinatorial load bound of every assignment of the groups to the accelerators
/// (interleaved plans are among them; recomputation only adds time), and the compute
/// alone: every load is at least its compute, and `p` devices share the groups'.
fn lower_bound(
    problem: &Problem,
    units: &Grouping,
    model: &Model,
    budget: &Budget,
    stats: &mut Stats,
) -> f64 {
    let w = problem.workload;
    let devices = DeviceSet {
        cpus: 0,
        ..w.devices().clone()
    };
    let compute: Vec<f64> = units.groups.iter().map(|g| g.fpga_latency).collect();
    crate::solve::bounds::load::for_model(
        units,
        &model.hyperedges,
        &devices,
        false,
        problem.limits.ip.load_bound,
        &budget.share(0.15),
        stats,
    )
    .objective(false)
    .max(compute.iter().sum::<f64>() / model.p as f64)
    .max(compute.iter().copied().fold(0.0, f64::max))
}

/// The interleaved DP's search between its phases: the best plan, the lower bound,
/// whether the plan is proven, why the search stopped, the moves made and the statistics.
struct Search<'s> {
    problem: &'s Problem<'s>,
    model: &'s Model<'s>,
    units: &'s Grouping,
    best: Option<Candidate>,
    lower: f64,
    proven: bool,
    stop: Option<StopReason>,
    moves: u64,
    stats: Stats,
}

impl Search<'_> {
    /// Chains of prefixes at ever finer cuts (16, 32, …): each run only looks below the
    /// best so far. Without the lattice to prove with, the prefix families get (nearly) all
    /// the time; a family near the lattice's size proves nothing the lattice would not.
    fn prefix_chains(
        &mut self,
        lattice_len: Option<usize>,
        budget: &Budget,
    ) -> Result<(), SolveError> {
        let (model, units) = (self.model, self.units);
        let chain_budget = budget.share(if lattice_len.is_some() { 0.4 } else { 0.9 });
        let mut k = 16usize;
        while !self.proven {
            let family = Family::chain(units, k, &model.per_group);
            let run = model.run(
                &family,
                below(upper(&self.best)),
                &chain_budget,
                &mut self.moves,
            );
            if let Some(chain) = &run.chain {
                keep_plan(self.problem, model, &family, chain, &mut self.best)?;
            }
            self.stats.notes.push(format!(
                "prefix family of {} cuts: {}, best {} ({} moves so far)",
                family.len(),
                run.stopped
                    .as_ref()
                    .map_or("finished".to_string(), |r| format!("stopped ({r:?})")),
                upper(&self.best),
                self.moves
            ));
            self.proven = meets_bound(upper(&self.best), self.lower);
            let finer = Family::chain_len(units, 2 * k);
            if run.stopped.is_some()
                || family.len() > units.len()
                || lattice_len.is_some_and(|n| 2 * finer > n)
                || chain_budget.is_exhausted()
            {
                break;
            }
            k *= 2;
        }
        Ok(())
    }

    /// The whole ideal lattice, with targets τ rising toward the best plan: a run that
    /// finds a plan below τ has found the optimum (it is the least of all plans below τ);
    /// one that finds none proves τ a lower bound. Runs below the optimum are the cheap
    /// ones.
    fn lattice(&mut self, ideals: Ideals, budget: &Budget) -> Result<(), SolveError> {
        let model = self.model;
        self.stats.ideals = Some(ideals.len());
        let family = Family::lattice(self.units, ideals, &model.per_group);
        let lattice_budget = budget.share(0.9);
        for fraction in [0.5, 0.75, 0.9, 0.97, 1.0] {
            let ub = upper(&self.best);
            let target = if ub.is_finite() && fraction < 1.0 {
                self.lower + fraction * (ub - self.lower)
            } else {
                below(ub)
            };
            if ub.is_finite() && target <= self.lower {
                self.proven = true;
                break;
            }
            let run = model.run(&family, target, &lattice_budget, &mut self.moves);
            self.stats.notes.push(format!(
                "ideal lattice of {} ideals, below {target}: {} ({} moves so far)",
                family.len(),
                match (&run.stopped, &run.chain) {
                    (Some(r), _) => format!("stopped ({r:?})"),
                    (None, Some(_)) => "the optimum".to_string(),
                    (None, None) => "no plan: a lower bound".to_string(),
                },
                self.moves
            ));
            if let Some(reason) = &run.stopped {
                self.stop = Some(reason.clone());
                break;
            }
            match run.chain {
                Some(chain) => {
                    keep_plan(self.problem, model, &family, &chain, &mut self.best)?;
                    self.proven = true;
                    break;
                }
                None if fraction == 1.0 || !ub.is_finite() => {
                    self.proven = true;
                    break;
                }
                None => self.lower = self.lower.max(target),
            }
        }
        Ok(())
    }

    /// The outcome: proven, the best plan as optimal (or infeasible without one); else the
    /// best plan with the bound and why the search stopped (the time limit if nothing
    /// else), or no plan.
    fn finish(self, started: Instant) -> Outcome {
        let mut stats = self.stats;
        stats.ideal_pairs = Some(self.moves);
        stats.time_s = started.elapsed().as_secs_f64();
        if self.proven {
            return match self.best {
                Some(c) => outcome(Some(c.placement), c.score, c.score, Status::Optimal, stats),
                None => outcome(
                    None,
                    f64::INFINITY,
                    f64::INFINITY,
                    Status::infeasible(Infeasibility::NoInterleavedChain),
                    stats,
                ),
            };
        }
        let bound = self.lower;
        let reason = self.stop.unwrap_or(StopReason::TimeLimit);
        match self.best {
            Some(c) => {
                let bound = bound.min(c.score);
                outcome(
                    Some(c.placement),
                    c.score,
                    bound,
                    Status::Feasible { reason },
                    stats,
                )
            }
            None => outcome(None, f64::INFINITY, bound, Status::NoPlan { reason }, stats),
        }
    }
}

/// Scores the plan of a DP chain (an error if the scorer refuses it: the DP's costs are
/// the scorer's) and keeps it in `best` when better.
fn keep_plan(
    problem: &Problem,
    model: &Model,
    family: &Family,
    chain: &(Vec<usize>, Vec<bool>),
    best: &mut Option<Candidate>,
) -> Result<(), SolveError> {
    let c = candidate(problem, model.placement(family, chain), "dp")
        .ok_or(SolveError::Check(CheckFailure::InterleavedDpPlanRejected))?;
    if c.score < upper(best) {
        *best = Some(c);
    }
    Ok(())
}

/// Whether a plan of value `value` is proven optimal by the lower bound `lower`: within the
/// relative gap at which the IP declares a plan optimal
/// ([`crate::solve::DEFAULT_GAP`]; the load bound is a flow value with rounding).
fn meets_bound(value: f64, lower: f64) -> bool {
    value <= lower * (1.0 + crate::solve::DEFAULT_GAP)
}

/// The cut that keeps only plans better than `upper` by more than [`PRUNE`].
fn below(upper: f64) -> f64 {
    if upper.is_finite() {
        upper * (1.0 - PRUNE)
    } else {
        f64::INFINITY
    }
}

fn upper(best: &Option<Candidate>) -> f64 {
    best.as_ref().map_or(f64::INFINITY, |c| c.score)
}

fn outcome(
    placement: Option<Placement>,
    objective: f64,
    bound: f64,
    status: Status,
    stats: Stats,
) -> Outcome {
    Outcome {
        method: MethodId::Dp,
        placement,
        objective,
        bound,
        status,
        stats,
    }
}

/// A family of ideals of the group DAG, with their sums and, for each, the members that
/// contain it sorted by compute.
struct Family {
    kind: Kind,
    compute: Vec<f64>,
    /// Per member: the sums of its groups' [`Figures`].
    sums: Vec<Figures>,
    /// `ups[i]`: every member `j ⊇ i`, by increasing compute.
    ups: Vec<Vec<u32>>,
    full: usize,
}

enum Kind {
    /// Prefixes of the groups' order (Contraction numbers them topologically): member `i`
    /// holds the groups `0 … cuts[i] − 1`.
    Chain {
        cuts: Vec<usize>,
    },
    Lattice(Ideals),
}

/// A group's figures as [`Family::sums`] adds them up: resident, stashed and total bytes,
/// forward time, accelerator time.
type Figures = [f64; 5];

fn add(a: Figures, b: &Figures) -> Figures {
    std::array::from_fn(|i| a[i] + b[i])
}

impl Family {
    /// Prefixes of a topological order of the groups at about `k` cuts balanced by compute
    /// and `k` balanced by count.
    fn chain(units: &Grouping, k: usize, per_group: &[Figures]) -> Family {
        let cuts = Self::cuts(units, k);
        let mut prefix = vec![[0.0; 5]; per_group.len() + 1];
        for (g, figures) in per_group.iter().enumerate() {
            prefix[g + 1] = add(prefix[g], figures);
        }
        let sums: Vec<Figures> = cuts.iter().map(|&c| prefix[c]).collect();
        let len = cuts.len();
        let ups = (0..len).map(|i| (i as u32..len as u32).collect()).collect();
        Family {
            kind: Kind::Chain { cuts },
            compute: sums.iter().map(|f| f[COMPUTE]).collect(),
            sums,
            ups,
            full: len - 1,
        }
    }

    /// The members [`Family::chain`] would have.
    fn chain_len(units: &Grouping, k: usize) -> usize {
        Self::cuts(units, k).len()
    }

    /// The cut positions of [`Family::chain`] in the order `0 … n − 1`.
    fn cuts(units: &Grouping, k: usize) -> Vec<usize> {
        let n = units.len();
        let total: f64 = units.groups.iter().map(|g| g.fpga_latency).sum();
        let mut cuts = vec![0, n];
        let mut before = 0.0;
        for (i, unit) in units.groups.iter().enumerate() {
            let mid = before + unit.fpga_latency / 2.0;
            before += unit.fpga_latency;
            if total > 0.0 {
                let share = ((mid / total) * k as f64) as usize;
                let next = (((before / total) * k as f64) as usize).min(k);
                if next > share {
                    cuts.push(i + 1);
                }
            }
            if (i + 1) * k / n.max(1) != i * k / n.max(1) {
                cuts.push(i + 1);
            }
        }
        cuts.sort_unstable();
        cuts.dedup();
        cuts
    }

    /// Every ideal.
    fn lattice(units: &Grouping, ideals: Ideals, per_group: &[Figures]) -> Family {
        let len = ideals.len();
        let sums: Vec<Figures> = (0..len)
            .map(|i| {
                (ideals.get(i).groups().iter()).fold([0.0; 5], |acc, &g| add(acc, &per_group[g]))
            })
            .collect();
        let compute: Vec<f64> = sums.iter().map(|f| f[COMPUTE]).collect();
        let ups = (0..len)
            .map(|i| {
                let mut up: Vec<u32> = (0..len)
                    .filter(|&j| ideals.is_subset(i, j))
                    .map(|j| j as u32)
                    .collect();
                up.sort_by(|&a, &b| compute[a as usize].total_cmp(&compute[b as usize]));
                up
            })
            .collect();
        let full = (0..len)
            .find(|&i| ideals.level_of(i) == units.len())
            .expect("the whole set is an ideal");
        Family {
            kind: Kind::Lattice(ideals),
            compute,
            sums,
            ups,
            full,
        }
    }

    fn len(&self) -> usize {
        self.compute.len()
    }

    /// The sums of `I_i \ I_j`.
    fn between(&self, j: usize, i: usize) -> Figures {
        std::array::from_fn(|k| self.sums[i][k] - self.sums[j][k])
    }
    /// Round `round`'s next move from its cursor on: the first member `to` of
    /// `ups[from]` at or after the cursor that is the round's limit on the last device,
    /// keeps the rounds' compute so far below the cut, and lies inside the limit. `None`
    /// (the cursor at the end) once none is left: `ups` is in increasing compute, so the
    /// first move that reaches the cut ends the round.
    fn next_move(&self, round: Round, cursor: &mut usize) -> Option<(usize, f64)> {
        let ups = &self.ups[round.from];
        while *cursor < ups.len() {
            let to = ups[*cursor] as usize;
            if round.last && to != round.limit {
                *cursor += 1;
                continue;
            }
            let add = self.compute[to] - self.compute[round.from];
            if round.partial + add >= round.cut {
                *cursor = ups.len();
                return None;
            }
            if !self.is_subset(to, round.limit) {
                *cursor += 1;
                continue;
            }
            return Some((to, add));
        }
        None
    }

    fn is_subset(&self, j: usize, i: usize) -> bool {
        match &self.kind {
            Kind::Chain { .. } => j <= i,
            Kind::Lattice(ideals) => ideals.is_subset(j, i),
        }
    }

    fn contains(&self, i: usize, g: usize) -> bool {
        match &self.kind {
            Kind::Chain { cuts } => g < cuts[i],
            Kind::Lattice(ideals) => ideals.get(i).contains(g),
        }
    }

    /// Appends the groups of `I_i \ I_j` (`j ⊆ i`) to `out`.
    fn difference(&self, j: usize, i: usize, out: &mut Vec<usize>) {
        match &self.kind {
            Kind::Chain { cuts } => out.extend(cuts[j]..cuts[i]),
            Kind::Lattice(ideals) => out.extend(ideals.get(i).difference(&ideals.get(j))),
        }
    }
}

/// A device's maximal stash vectors and, per chunk, its backward input vectors.
type DeviceVectors = (Vec<Vec<usize>>, Vec<Vec<Vec<usize>>>);

/// One parallel block's states (the best per tuple) and its count of moves.
type Block = Result<(HashMap<Vec<u32>, State>, u64), StopReason>;

/// The per-group data the device cost reads.
struct Model<'a> {
    units: &'a Grouping,
    p: usize,
    v: usize,
    memory: f64,
    /// Per group: its [`Figures`].
    per_group: Vec<Figures>,
    hyperedges: Vec<Hyperedge>,
    incident: Vec<Vec<u32>>,
    recompute: Option<RecomputeData>,
    /// Per group, the recompute inputs it reads.
    reads: Vec<Vec<u32>>,
    /// Per device: its maximal stash vectors and, per chunk, its backward input vectors.
    vectors: Vec<DeviceVectors>,
}

/// One layer of the interleaved DP: its keys (tuples of family members) and states.
type Layer = (Vec<Vec<u32>>, Vec<State>);

/// The first layer's keys: every tuple of `v − 1` junctions `0 ⊆ J_1 ⊆ …` of the family,
/// written as the key `(J…, 0, J…)`. Each tuple is counted against the state `limit` (the
/// memory budget's share) and the clock is read every 4,096: with `v ≥ 3` there can be
/// `|𝓘|^{v−1}` of them.
fn first_keys(
    family: &Family,
    v: usize,
    limit: usize,
    budget: &Budget,
) -> Result<Vec<Vec<u32>>, StopReason> {
    let mut keys: Vec<Vec<u32>> = Vec::new();
    let mut junctions = vec![0u32; v.saturating_sub(1)];
    let empty = 0usize;
    let mut at = Tuples {
        family,
        junctions: &mut junctions,
        out: &mut keys,
        limit,
        budget,
    };
    at.extend(0, empty)?;
    Ok(keys)
}

/// The depth-first listing of junction tuples behind [`first_keys`].
struct Tuples<'t> {
    family: &'t Family,
    junctions: &'t mut Vec<u32>,
    out: &'t mut Vec<Vec<u32>>,
    limit: usize,
    budget: &'t Budget,
}

impl Tuples<'_> {
    /// Every tuple whose junctions `r…` lie above member `from`.
    fn extend(&mut self, r: usize, from: usize) -> Result<(), StopReason> {
        if r == self.junctions.len() {
            let mut key = self.junctions.clone();
            key.push(0);
            key.extend_from_slice(self.junctions);
            self.out.push(key);
            if self.out.len() > self.limit {
                return Err(StopReason::MemoryBudget {
                    what: "the interleaved DP's first states (tuples of junctions)".into(),
                    needed_bytes: state_bytes(self.junctions.len() + 1) * self.out.len() as f64,
                    budget_bytes: state_bytes(self.junctions.len() + 1) * self.limit as f64,
                });
            }
            if self.out.len().is_multiple_of(4096) {
                self.budget.check().map_err(StopReason::from)?;
            }
            return Ok(());
        }
        for &j in &self.family.ups[from] {
            self.junctions[r] = j;
            self.extend(r + 1, j as usize)?;
        }
        Ok(())
    }
}

/// What a run of the DP over one family found.
struct Run {
    /// The chain of `T + 1` family members of the best plan below the bound, with the
    /// devices that recompute.
    chain: Option<(Vec<usize>, Vec<bool>)>,
    stopped: Option<StopReason>,
}

/// Keeps `state` for `next` in `table` unless a state of smaller value (or of equal value
/// and smaller parent) is there.
fn keep_better(table: &mut HashMap<Vec<u32>, State>, next: Vec<u32>, state: State) {
    match table.entry(next) {
        std::collections::hash_map::Entry::Occupied(mut e) => {
            let old = e.get_mut();
            if (state.value, state.parent) < (old.value, old.parent) {
                *old = state;
            }
        }
        std::collections::hash_map::Entry::Vacant(e) => {
            e.insert(state);
        }
    }
}

/// A state: its tuple (junctions, then frontiers), value and back link.
struct State {
    value: f64,
    parent: u32,
    recomputes: bool,
}

/// One round of a device step's depth-first search ([`Model::expand`]): the member
/// `from` the round's chunk starts at, the `limit` it may not pass (the next device's
/// frontier, or the whole family in the last round), whether this is the last device
/// (which must reach its limit), the compute of the rounds before it (`partial`) and the
/// step's `cut`.
#[derive(Clone, Copy, Debug)]
struct Round {
    from: usize,
    limit: usize,
    last: bool,
    partial: f64,
    cut: f64,
}

/// Scratch space for [`Model::cost`].
/// Device `d`'s layer of the DP over `family`: the moves whose value stays below `cut`,
/// within `budget`.
#[derive(Clone, Copy)]
struct Step<'a> {
    family: &'a Family,
    d: usize,
    cut: f64,
    budget: &'a Budget,
}

/// A state of the layer before a [`Step`]: its tuple, its index in the layer, its value.
#[derive(Clone, Copy)]
struct Origin<'k> {
    key: &'k [u32],
    index: usize,
    value: f64,
}

struct Scratch {
    stamp: u64,
    mark: Vec<u64>,
    chunk: Vec<u8>,
    seen_edge: Vec<u64>,
    seen_input: Vec<u64>,
    groups: Vec<usize>,
    /// Per chunk of the device being priced: its stash and (recomputing) its input bytes.
    stash: Vec<f64>,
    input: Vec<f64>,
}

/// Why no plan fits, when the memory alone proves it (without recomputation): every node
/// lies on an accelerator, and device `d` holds its resident bytes plus
/// `max_{n ∈ N_d} Σ_c n_c·a_c ≥ κ_d·Σ_c a_c` with `κ_d = max_{n ∈ N_d} min_c n_c`, so the
/// devices together need at least `Σ resident + (min_d κ_d)·Σ stash`; more than `p·M` is a
/// proof that no plan fits. `None` when it does not prove it (or recomputation may shrink
/// the stashes).
fn memory_certificate(
    w: &crate::model::Workload,
    pipeline: Pipeline,
    vectors: &[DeviceVectors],
) -> Option<Infeasibility> {
    if pipeline.recompute == Recompute::Auto {
        return None;
    }
    let held = held_bytes(w);
    let resident: f64 = held.iter().map(|h| h.resident_bytes).sum();
    let stash: f64 = held.iter().map(|h| h.stash_bytes).sum();
    let kappa = (vectors.iter())
        .map(|(ns, _)| {
            (ns.iter())
                .map(|n| n.iter().copied().min().unwrap_or(0))
                .max()
                .unwrap_or(0)
        })
        .min()
        .unwrap_or(0);
    let devices = w.devices();
    let capacity = devices.accelerators as f64 * devices.memory_per_accelerator_bytes;
    let need = resident + kappa as f64 * stash;
    (need > capacity * (1.0 + MEMORY_TOLERANCE)).then_some(Infeasibility::InterleavedMemory {
        accelerators: devices.accelerators,
        capacity_bytes: capacity,
        resident_bytes: resident,
        micro_batches: kappa,
        stash_bytes: stash,
    })
}

impl<'a> Model<'a> {
    fn new(
        units: &'a Grouping,
        w: &crate::model::Workload,
        pipeline: Pipeline,
        p: usize,
        vectors: Vec<DeviceVectors>,
    ) -> Model<'a> {
        let held = held_bytes(w);
        let stash: Vec<f64> = (units.groups.iter())
            .map(|g| g.nodes.iter().map(|&x| held[x].stash_bytes).sum())
            .collect();
        let size: Vec<f64> = units.groups.iter().map(|g| g.size_bytes).collect();
        let recompute = (pipeline.recompute == Recompute::Auto).then(|| recompute_data(units, w));
        let per_group = (0..units.len())
            .map(|g| {
                let forward = recompute.as_ref().map_or(0.0, |r| r.forward[g]);
                [
                    size[g] - stash[g],
                    stash[g],
                    size[g],
                    forward,
                    units[g].fpga_latency,
                ]
            })
            .collect();
        let hyperedges = units.hyperedges(w, false);
        let mut incident = vec![Vec::new(); units.len()];
        for (e, h) in hyperedges.iter().enumerate() {
            for &g in &h.groups {
                incident[g].push(e as u32);
            }
        }
        let mut reads = vec![Vec::new(); units.len()];
        if let Some(data) = &recompute {
            for (k, (_, readers, _)) in data.inputs.iter().enumerate() {
                for &g in readers {
                    reads[g].push(k as u32);
                }
            }
        }
        Model {
            units,
            p,
            v: pipeline.schedule.chunks(),
            memory: w.devices().memory_per_accelerator_bytes,
            per_group,
            hyperedges,
            incident,
            recompute,
            reads,
            vectors,
        }
    }

    fn scratch(&self) -> Scratch {
        Scratch {
            stamp: 0,
            mark: vec![0; self.units.len()],
            chunk: vec![0; self.units.len()],
            seen_edge: vec![0; self.hyperedges.len()],
            seen_input: vec![0; self.recompute.as_ref().map_or(0, |r| r.inputs.len())],
            groups: Vec::new(),
            stash: vec![0.0; self.v],
            input: vec![0.0; self.v],
        }
    }

    /// `cost_d(S)` of device `d` holding chunks `F_r' \ F_r` (`moves[r] = (F_r, F'_r)`),
    /// and whether it recomputes; `None` when it fits neither way (module docs).
    fn cost(
        &self,
        family: &Family,
        d: usize,
        moves: &[(usize, usize)],
        compute: f64,
        cut: f64,
        s: &mut Scratch,
    ) -> Option<(f64, bool)> {
        let mut resident = 0.0;
        let mut size = 0.0;
        let mut forward = 0.0;
        let stash = &mut s.stash;
        for (r, &(from, to)) in moves.iter().enumerate() {
            let [held, stashed, total, fwd, _] = family.between(from, to);
            resident += held;
            stash[r] = stashed;
            size += total;
            forward += fwd;
        }
        let limit = self.memory * (1.0 + MEMORY_TOLERANCE);
        if size > limit {
            return None;
        }
        let (stash_vectors, input_vectors) = &self.vectors[d];
        let held = stash_vectors
            .iter()
            .map(|n| {
                n.iter()
                    .zip(stash.iter())
                    .map(|(&k, a)| k as f64 * a)
                    .sum::<f64>()
            })
            .fold(0.0, f64::max);
        let recomputes = resident + held > limit;
        let extra = if recomputes { forward } else { 0.0 };
        if recomputes && (self.recompute.is_none() || compute + extra >= cut) {
            return None;
        }
        s.stamp += 1;
        let stamp = s.stamp;
        s.groups.clear();
        let mut start = 0;
        for (r, &(from, to)) in moves.iter().enumerate() {
            family.difference(from, to, &mut s.groups);
            for &g in &s.groups[start..] {
                s.mark[g] = stamp;
                s.chunk[g] = r as u8;
            }
            start = s.groups.len();
        }
        if let Some(data) = self.recompute.as_ref().filter(|_| recomputes) {
            s.input.fill(0.0);
            for &g in &s.groups {
                let r = s.chunk[g];
                for &k in &self.reads[g] {
                    let (producer, _, bytes) = &data.inputs[k as usize];
                    // One count per (input, chunk): the stamp encodes the chunk.
                    let key = stamp * 256 + r as u64;
                    if s.seen_input[k as usize] == key {
                        continue;
                    }
                    s.seen_input[k as usize] = key;
                    if s.mark[*producer] != stamp || s.chunk[*producer] != r {
                        s.input[r as usize] += bytes;
                    }
                }
            }
            let peak = input_vectors
                .iter()
                .enumerate()
                .flat_map(|(c, vs)| vs.iter().map(move |n| (c, n)))
                .map(|(c, n)| {
                    s.stash[c]
                        + n.iter()
                            .zip(&s.input)
                            .map(|(&k, i)| k as f64 * i)
                            .sum::<f64>()
                })
                .fold(0.0, f64::max);
            if resident + peak > limit {
                return None;
            }
        }
        let mut comm = 0.0;
        for &g in &s.groups {
            for &e in &self.incident[g] {
                if s.seen_edge[e as usize] == stamp {
                    continue;
                }
                s.seen_edge[e as usize] = stamp;
                let h = &self.hyperedges[e as usize];
                if h.groups.iter().any(|&x| s.mark[x] != stamp) {
                    comm += h.cost;
                    if compute + extra + comm >= cut {
                        return None;
                    }
                }
            }
        }
        Some((compute + comm + extra, recomputes))
    }

    /// The DP over chains drawn from `family` whose value is below `cut` (module docs): the
    /// least of them, if any.
    fn run(&self, family: &Family, cut: f64, budget: &Budget, moves: &mut u64) -> Run {
        let p = self.p;
        let limit = state_limit(self.v, budget);
        let stopped = |reason| Run {
            chain: None,
            stopped: Some(reason),
        };
        // Layer 0: every tuple of junctions, each at value 0.
        let keys = match first_keys(family, self.v, limit, budget) {
            Ok(keys) => keys,
            Err(reason) => return stopped(reason),
        };
        let mut layers: Vec<Layer> = Vec::with_capacity(p + 1);
        let states = keys
            .iter()
            .map(|_| State {
                value: 0.0,
                parent: u32::MAX,
                recomputes: false,
            })
            .collect();
        layers.push((keys, states));
        for d in 0..p {
            match self.next_layer(family, d, &layers[d], cut, (limit, budget), moves) {
                Ok(layer) => layers.push(layer),
                Err(reason) => return stopped(reason),
            }
        }
        let (keys, states) = &layers[p];
        let Some(end) =
            (0..keys.len()).min_by(|&a, &b| states[a].value.total_cmp(&states[b].value))
        else {
            return Run {
                chain: None,
                stopped: None,
            };
        };
        Run {
            chain: Some(self.chain_back(family, &layers, end)),
            stopped: None,
        }
    }

    /// The states after device `d` from `layer`'s: blocks of states expanded in parallel,
    /// each with its own scratch space and table; the tables merged keeping the smaller
    /// value (on a tie the smaller parent, so the result does not depend on the threads).
    /// Stops on the budget or once the states pass `limit`.
    fn next_layer(
        &self,
        family: &Family,
        d: usize,
        (keys, states): &Layer,
        cut: f64,
        (limit, budget): (usize, &Budget),
        moves: &mut u64,
    ) -> Result<Layer, StopReason> {
        let blocks: Vec<Block> = (0..keys.len())
            .step_by(BLOCK_STATES)
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|start| {
                budget.check().map_err(StopReason::from)?;
                let mut s = self.scratch();
                let mut table: HashMap<Vec<u32>, State> = HashMap::new();
                let mut count = 0u64;
                for i in start..(start + BLOCK_STATES).min(keys.len()) {
                    let from = Origin {
                        key: &keys[i],
                        index: i,
                        value: states[i].value,
                    };
                    self.expand(
                        Step {
                            family,
                            d,
                            cut,
                            budget,
                        },
                        from,
                        &mut s,
                        &mut count,
                        &mut |next, state| keep_better(&mut table, next, state),
                    )?;
                }
                Ok((table, count))
            })
            .collect();
        let mut index: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut next_keys: Vec<Vec<u32>> = Vec::new();
        let mut next_states: Vec<State> = Vec::new();
        for block in blocks {
            let (table, count) = block?;
            *moves += count;
            for (next, state) in table {
                match index.get(&next) {
                    Some(&at) => {
                        let old = &mut next_states[at as usize];
                        if (state.value, state.parent) < (old.value, old.parent) {
                            *old = state;
                        }
                    }
                    None => {
                        index.insert(next.clone(), next_keys.len() as u32);
                        next_keys.push(next);
                        next_states.push(state);
                    }
                }
            }
            if next_keys.len() > limit {
                return Err(StopReason::MemoryBudget {
                    what: "the interleaved DP's states".into(),
                    needed_bytes: state_bytes(self.v) * next_keys.len() as f64,
                    budget_bytes: state_bytes(self.v) * limit as f64,
                });
            }
        }
        Ok((next_keys, next_states))
    }

    /// The chain of family members of the plan ending at state `end` of the last layer,
    /// by the back links (layer d's tuple holds `F_r = I_{r·p + d}`), with the devices
    /// that recompute.
    fn chain_back(&self, family: &Family, layers: &[Layer], end: usize) -> (Vec<usize>, Vec<bool>) {
        let (p, v) = (self.p, self.v);
        let mut chain = vec![family.full; p * v + 1];
        let mut recomputes = vec![false; p];
        let mut at = end;
        for d in (0..=p).rev() {
            let (keys, states) = &layers[d];
            if d < p {
                for r in 0..v {
                    chain[r * p + d] = keys[at][v - 1 + r] as usize;
                }
            }
            if d > 0 {
                recomputes[d - 1] = states[at].recomputes;
                at = states[at].parent as usize;
            }
        }
        (chain, recomputes)
    }

    /// Every move of device `step.d` from the state `from` whose value stays below
    /// `step.cut`, handed to `keep` (module docs: the prunings).
    fn expand(
        &self,
        step: Step,
        from: Origin,
        s: &mut Scratch,
        moves: &mut u64,
        keep: &mut dyn FnMut(Vec<u32>, State),
    ) -> Result<(), StopReason> {
        let Step {
            family,
            d,
            cut,
            budget,
        } = step;
        let Origin {
            key,
            index: i,
            value,
        } = from;
        let (p, v) = (self.p, self.v);
        let last = d + 1 == p;
        let limit_of = |r: usize| -> usize {
            if r + 1 < v {
                key[r] as usize
            } else {
                family.full
            }
        };
        let frontier = |r: usize| key[v - 1 + r] as usize;
        // Depth-first over the rounds: position r tries F'_r in increasing compute.
        // The later devices' loads hold at least their compute, so the last round's
        // move must reach `need` with the others': skip the moves below it (the
        // remaining-work test below would drop them one by one).
        let later_capacity = (p - d - 1) as f64 * cut;
        let need: f64 = (0..v).map(|r| family.compute[limit_of(r)]).sum::<f64>() - later_capacity;
        let first_useful = |chosen: &[(usize, usize)]| -> usize {
            if last || !need.is_finite() {
                return 0;
            }
            let reached: f64 = chosen.iter().map(|&(_, to)| family.compute[to]).sum();
            let threshold = need - reached - 1e-9 * cut.abs();
            family.ups[frontier(v - 1)].partition_point(|&j| family.compute[j as usize] < threshold)
        };
        let mut choice = vec![(0usize, 0usize); v];
        let mut cursor = vec![0usize; v];
        if v == 1 {
            cursor[0] = first_useful(&[]);
        }
        let mut partial = vec![0.0; v + 1];
        let mut r = 0usize;
        loop {
            if r == v {
                *moves += 1;
                if (*moves).is_multiple_of(4096) {
                    budget.check().map_err(StopReason::from)?;
                }
                let remaining: f64 = (0..v)
                    .map(|r| family.compute[limit_of(r)] - family.compute[choice[r].1])
                    .sum();
                // Each later device's load is at least its compute.
                let later = (p - d - 1) as f64;
                if later == 0.0 || remaining <= later * cut * (1.0 + 1e-12) {
                    if let Some((cost, recomputes)) =
                        self.cost(family, d, &choice, partial[v], cut, s)
                    {
                        let value = value.max(cost);
                        if value < cut {
                            let mut next: Vec<u32> = key[..v - 1].to_vec();
                            next.extend(choice.iter().map(|&(_, to)| to as u32));
                            keep(
                                next,
                                State {
                                    value,
                                    parent: i as u32,
                                    recomputes,
                                },
                            );
                        }
                    }
                }
                r -= 1;
                cursor[r] += 1;
                continue;
            }
            let from = frontier(r);
            let round = Round {
                from,
                limit: limit_of(r),
                last,
                partial: partial[r],
                cut,
            };
            if let Some((to, add)) = family.next_move(round, &mut cursor[r]) {
                choice[r] = (from, to);
                partial[r + 1] = partial[r] + add;
                r += 1;
                if r < v {
                    cursor[r] = if r + 1 == v {
                        first_useful(&choice[..r])
                    } else {
                        0
                    };
                }
            } else {
                if r == 0 {
                    return Ok(());
                }
                r -= 1;
                cursor[r] += 1;
            }
        }
    }

    /// The plan of a chain of `T + 1` family members: group g on the first stage whose
    /// ideal holds it.
    fn placement(
        &self,
        family: &Family,
        (chain, recomputes): &(Vec<usize>, Vec<bool>),
    ) -> Placement {
        let p = self.p;
        let stage_of: Vec<usize> = (0..self.units.len())
            .map(|g| {
                (0..chain.len() - 1)
                    .find(|&t| family.contains(chain[t + 1], g))
                    .unwrap_or(chain.len() - 2)
            })
            .collect();
        let device: Vec<Device> = stage_of
            .iter()
            .map(|&t| Device::Accelerator(t % p))
            .collect();
        let mut chunks = vec![0; self.units.group_of.len()];
        for (g, group) in self.units.groups.iter().enumerate() {
            for &x in &group.nodes {
                chunks[x] = stage_of[g] / p;
            }
        }
        let recompute = (0..p)
            .filter(|&d| recomputes[d])
            .map(Device::Accelerator)
            .collect();
        self.units
            .placement(&device)
            .with_pieces(chunks)
            .with_recompute(recompute)
    }
}
/// A valid interleaved plan from the contiguous DP (this DP's first upper bound and the
/// interleaved IP's warm start), the better of two (each DP within half the budget):
///
/// - the contiguous optimum on the k accelerators alone with every stage holding `m`
///   stashes (GPipe's memory), its devices in chain order and every node in chunk 0 (the
///   later chunks empty): a device holds at most `m` stashes of its chunk 0 at once;
/// - the contiguous optimum on `T = p·v` accelerators of `M / v` bytes each under 1F1B
///   (stage `s` of a chain of `u` used stages holding `min(m, u − s)` stashes), its used
///   stages put last on the chain of `T` and stage `s` dealt to chunk `⌊s/p⌋` of
///   accelerator `s mod p`: where the interleaved order keeps no more stashes of a chunk
///   than 1F1B keeps at that stage, each chunk holds at most `M / v` and the device at
///   most `M`.
///
/// The caller scores them exactly and drops one that does not fit.
pub fn chain_plans(
    w: &Workload,
    limits: &crate::solve::Limits,
    budget: &crate::solve::budget::Budget,
    pipeline: Pipeline,
) -> Result<Outcome, SolveError> {
    let p = w.devices().accelerators;
    let v = pipeline.schedule.chunks();
    let gpipe = Pipeline::new(Schedule::GPipe, pipeline.micro_batches);
    let first = chain_plan(w, limits, &budget.share(0.5), gpipe, p, 1);
    let one_f_one_b = Pipeline::new(Schedule::OneFOneB, pipeline.micro_batches);
    let second = chain_plan(w, limits, budget, one_f_one_b, p, v);
    let score = |o: &Result<Outcome, SolveError>| match o {
        Ok(Outcome {
            placement: Some(placement),
            ..
        }) => crate::score::max_load(&crate::score::device_loads(w, placement)).0,
        _ => f64::INFINITY,
    };
    if score(&second) < score(&first) {
        second
    } else {
        first
    }
}

/// The DP's contiguous optimum on `p·spread` accelerators of `M / spread` bytes under
/// `schedule` (gpipe or 1f1b), no CPU, its used stages last on the chain of `p·spread`,
/// stage `s` on chunk `⌊s/p⌋` of accelerator `s mod p` ([`chain_plans`]).
fn chain_plan(
    w: &Workload,
    limits: &crate::solve::Limits,
    budget: &crate::solve::budget::Budget,
    pipeline: Pipeline,
    p: usize,
    spread: usize,
) -> Result<Outcome, SolveError> {
    let accelerators_only = w
        .with_devices(DeviceSet {
            cpus: 0,
            accelerators: p * spread,
            memory_per_accelerator_bytes: w.devices().memory_per_accelerator_bytes / spread as f64,
        })
        .map_err(|e| SolveError::Unsupported {
            method: MethodId::Dp,
            what: format!("the accelerators alone: {e}"),
        })?;
    let mut limits = limits.clone();
    limits.time_limit_s = budget.remaining_s();
    let mut outcome = super::solve_pipeline(&accelerators_only, &limits, Some(pipeline))?;
    if let Some(placement) = outcome.placement.take() {
        let memory = crate::score::pipeline_memory(&accelerators_only, &placement, &pipeline)
            .map_err(|error| {
                SolveError::Check(CheckFailure::DpPlanMemory {
                    schedule: pipeline.schedule,
                    error,
                })
            })?;
        let shift = p * spread - memory.len();
        let stage_of = |x: usize| {
            shift
                + memory
                    .iter()
                    .find(|d| d.device == placement.assignment[x])
                    .map_or(0, |d| d.stage)
        };
        let device = (0..w.len())
            .map(|x| Device::Accelerator(stage_of(x) % p))
            .collect();
        let chunks = (0..w.len()).map(|x| stage_of(x) / p).collect();
        outcome.placement = Some(Placement::new(device).with_pieces(chunks));
    }
    Ok(outcome)
}

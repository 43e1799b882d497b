//! Piper's problem ([`crate::model::piper`]) solved exactly: stages × tensor degree `t` ×
//! data degree `d` × one configuration per node, minimising the largest stage time per
//! sample under the per-device memory `M`.
//!
//! Piper (`algo.cpp`) fills `dp[ideal][k][s]` for every pair of ideals, every `k ≤ K` and
//! every replica count `s ≤ min(N, K)`: Θ(P · D · K) work per table row with the `s`
//! dimension on top, ≈ K² growth, and a greedy heuristic for each stage's configuration
//! knapsack. Here:
//!
//! 1. **Relaxation first** ([`dp::relaxed`]): every stage priced with one micro-batch in
//!    flight and no limit on `Σ d`. It drops the `s` dimension (O(P · D · K) in all) and
//!    gives a proven lower bound `L` and a plan, whose stages are then re-configured at their
//!    true in-flight counts and re-scored by the independent evaluator
//!    ([`crate::score::piper`]). If the score equals `L` (relative 1e-9) the plan is optimal.
//! 2. **Otherwise the exact search** ([`dp::exact`]): Piper's recurrence turned around —
//!    for a threshold `T`, the fewest devices per (ideal, replica count) — and a binary
//!    search over the stage values `≥ L`, with the exact knapsack ([`stage`]) instead of
//!    Piper's greedy one. Its plan is re-scored as well.
//!
//! Both passes run the pairs of one ideal in parallel (rayon) and poll the [`Budget`]
//! (time, memory, Ctrl-C) per ideal; a run cut short keeps the relaxed plan (if it is
//! valid) with the bound `L`.
//!
//! The search covers Piper's whole plan space: every contiguous split (ideal differences,
//! also disconnected stages), every `(t, d)` with `d | N` and `Σ t d ≤ K`, every
//! configuration per node. The one difference is to Piper's favour: our knapsack is exact.

pub mod brute_force;
pub mod dp;
pub mod stage;

use crate::model::contraction::Contraction;
use crate::model::grouping::Group;
use crate::model::piper::{PiperInstance, PiperPlan};
use crate::score::piper::{evaluate_piper, PiperScore};
use crate::solve::budget::Budget;
use crate::solve::ideals::{EnumerationStop, Ideals};
use crate::solve::outcome::{Infeasibility, Stats, Status, StopReason};

/// What the solver returns.
#[derive(Clone, Debug)]
pub struct PiperOutcome {
    pub plan: Option<PiperPlan>,
    /// The evaluator's figures for `plan`.
    pub score: Option<PiperScore>,
    /// Time per sample of `plan` (∞ without one).
    pub value: f64,
    /// A proven lower bound on the optimum.
    pub bound: f64,
    pub status: Status,
    pub stats: Stats,
}

/// A bug: the evaluator disagrees with the DP.
#[derive(Debug, thiserror::Error)]
#[error("internal check failed: {0}")]
pub struct PiperInternalError(pub String);

/// Relative tolerance between the DP's figure and the evaluator's.
pub const TOLERANCE: f64 = 1e-9;

/// The ideal lattice of `ins` (reversed graph, module docs of [`dp`]).
fn lattice<'a>(
    ins: &'a PiperInstance,
    max_ideals: usize,
    budget: &Budget,
) -> Result<dp::Lattice<'a>, EnumerationStop> {
    let n = ins.len();
    // A topological order of the original graph (Kahn, smallest index first).
    let mut indeg = vec![0usize; n];
    for e in &ins.edges {
        indeg[e.dest] += 1;
    }
    let mut ready: std::collections::BTreeSet<usize> = (0..n).filter(|&v| indeg[v] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(v) = ready.pop_first() {
        order.push(v);
        for &e in &ins.nodes[v].outgoing {
            let w = ins.edges[e].dest;
            indeg[w] -= 1;
            if indeg[w] == 0 {
                ready.insert(w);
            }
        }
    }
    let node_of: Vec<usize> = order.iter().rev().copied().collect();
    let mut group_of = vec![0; n];
    for (g, &v) in node_of.iter().enumerate() {
        group_of[v] = g;
    }
    let (mut pred, mut succ) = (vec![Vec::new(); n], vec![Vec::new(); n]);
    for e in &ins.edges {
        // Reversed: dest → source.
        let (a, b) = (group_of[e.dest], group_of[e.source]);
        succ[a].push(b);
        pred[b].push(a);
    }
    for l in pred.iter_mut().chain(succ.iter_mut()) {
        l.sort_unstable();
        l.dedup();
    }
    let c = Contraction {
        groups: node_of
            .iter()
            .map(|&v| Group {
                nodes: vec![v],
                ..Group::default()
            })
            .collect(),
        group_of,
        succ,
        pred,
    };
    let ideals = Ideals::enumerate(&c, max_ideals, budget)?;
    let k = ins.max_devices;
    let degrees = ins
        .tensor_degrees()
        .into_iter()
        .filter(|&t| t <= k)
        .map(|t| {
            let ds = (1..=k / t)
                .filter(|d| ins.mbs_in_batch.is_multiple_of(*d))
                .collect();
            (t, ds)
        })
        .collect();
    Ok(dp::Lattice {
        ins,
        node_of,
        ideals,
        degrees,
        k,
        s: ins.mbs_in_batch.min(k),
    })
}

/// A run that stopped (`reason`) without a plan, with the bound it proved.
fn no_plan(reason: StopReason, bound: f64, stats: Stats) -> PiperOutcome {
    PiperOutcome {
        plan: None,
        score: None,
        value: f64::INFINITY,
        bound,
        status: Status::NoPlan { reason },
        stats,
    }
}

/// The outcome of the exact parametric search's `end`: its optimum re-scored by the
/// evaluator (an internal error when they differ), infeasible, or, when it stopped, the
/// better held plan (its own, else the relaxation's `relaxed`) with the bound
/// `max(its bound, lower)`.
fn exact_outcome(
    ins: &PiperInstance,
    end: dp::ExactEnd,
    lower: f64,
    relaxed: Option<(PiperPlan, PiperScore)>,
    mut stats: Stats,
) -> Result<PiperOutcome, PiperInternalError> {
    match end {
        dp::ExactEnd::Done {
            value,
            plan: Some(plan),
            tests,
        } => {
            stats
                .notes
                .push(format!("parametric search: {tests} threshold tests"));
            let score = evaluate_piper(ins, &plan)
                .map_err(|e| PiperInternalError(format!("the exact search's plan: {e}")))?;
            if (score.time_per_sample - value).abs() > TOLERANCE * value.max(1e-300) {
                return Err(PiperInternalError(format!(
                    "the exact search says {value}, the evaluator {}",
                    score.time_per_sample
                )));
            }
            Ok(PiperOutcome {
                value: score.time_per_sample,
                bound: value.min(score.time_per_sample),
                plan: Some(plan),
                score: Some(score),
                status: Status::Optimal,
                stats,
            })
        }
        dp::ExactEnd::Done { plan: None, .. } => Ok(PiperOutcome {
            plan: None,
            score: None,
            value: f64::INFINITY,
            bound: f64::INFINITY,
            status: Status::infeasible(Infeasibility::PiperMemory),
            stats,
        }),
        dp::ExactEnd::Stopped {
            reason,
            best,
            bound,
        } => {
            let reason: StopReason = reason.into();
            let held = best
                .and_then(|p| evaluate_piper(ins, &p).ok().map(|s| (p, s)))
                .or(relaxed);
            Ok(match held {
                Some((plan, score)) => PiperOutcome {
                    value: score.time_per_sample,
                    bound: bound.max(lower).min(score.time_per_sample),
                    plan: Some(plan),
                    score: Some(score),
                    status: Status::Feasible { reason },
                    stats,
                },
                None => no_plan(reason, bound.max(lower), stats),
            })
        }
    }
}

/// Solves `ins` (module docs). `max_ideals` bounds the lattice.
pub fn solve_piper(
    ins: &PiperInstance,
    max_ideals: usize,
    budget: &Budget,
) -> Result<PiperOutcome, PiperInternalError> {
    let mut stats = Stats::default();
    let lat = match lattice(ins, max_ideals, budget) {
        Ok(l) => l,
        Err(EnumerationStop::TooMany { .. }) => {
            stats.time_s = budget.elapsed_s();
            return Ok(no_plan(
                StopReason::IdealLimit { limit: max_ideals },
                0.0,
                stats,
            ));
        }
        Err(EnumerationStop::Budget { reason, .. }) => {
            stats.time_s = budget.elapsed_s();
            return Ok(no_plan(reason.into(), 0.0, stats));
        }
    };
    stats.ideals = Some(lat.ideals.len());
    let (lower, relaxed_plan, pairs) = match dp::relaxed(&lat, lat.k, budget) {
        Ok(r) => r,
        Err(e) => {
            stats.time_s = budget.elapsed_s();
            return Ok(no_plan(e.into(), 0.0, stats));
        }
    };
    stats.ideal_pairs = Some(pairs);
    if relaxed_plan.is_none() {
        stats.time_s = budget.elapsed_s();
        return Ok(PiperOutcome {
            plan: None,
            score: None,
            value: f64::INFINITY,
            bound: f64::INFINITY,
            status: Status::infeasible(Infeasibility::PiperRelaxedMemory),
            stats,
        });
    }
    let relaxed_scored = relaxed_plan.and_then(|p| evaluate_piper(ins, &p).ok().map(|s| (p, s)));
    if let Some((plan, score)) = &relaxed_scored {
        if score.time_per_sample <= lower * (1.0 + TOLERANCE) {
            stats
                .notes
                .push("the relaxation's plan meets its bound".into());
            stats.path = Some("relaxed".into());
            stats.time_s = budget.elapsed_s();
            return Ok(PiperOutcome {
                value: score.time_per_sample,
                bound: lower.min(score.time_per_sample),
                plan: Some(plan.clone()),
                score: Some(score.clone()),
                status: Status::Optimal,
                stats,
            });
        }
    }
    stats.path = Some("exact".into());
    // An upper bound: the relaxed plan on min(N, K) devices, where Σ d ≤ N holds by itself.
    let mut relaxed_scored = relaxed_scored;
    if relaxed_scored.is_none() && lat.s < lat.k {
        if let Ok((_, Some(p), _)) = dp::relaxed(&lat, lat.s, budget) {
            relaxed_scored = evaluate_piper(ins, &p).ok().map(|s| (p, s));
        }
    }
    let upper = relaxed_scored
        .as_ref()
        .map_or(f64::INFINITY, |(_, s)| s.time_per_sample);
    let end = dp::exact(&lat, lower, upper, budget);
    stats.time_s = budget.elapsed_s();
    exact_outcome(ins, end, lower, relaxed_scored, stats)
}

//! Uniform layouts on a cluster of several accelerator types (`docs/parallel.md`, "Several
//! accelerator types"): every stage with the same TP degree `t` and DP degree `d` — what
//! a framework that takes one `t` and one `d` runs — each stage on the machines of one type,
//! priced with that type's costs, memory and links. Objective: the time per sample.
//!
//! **The space** is the space of [`super::mixed`] (each type's stages one contiguous run of
//! the pipeline, the types in any order, each run packed from its group's device 0) with
//! every stage's `(t_s, d_s)` equal to one pair `(t, d)`: the union over the pairs of the
//! mixed space whose TP choices are `{t}` and DP choices `{d}`.
//!
//! **Exactness.** The optimum over a union is the least of the optima over its parts, so
//! [`plan_mixed_uniform`] runs [`super::mixed::plan_mixed`] (exact for its space, with a
//! proven bound) on each pair's part. Pairs are taken in increasing order of their parts'
//! volume bound ([`super::mixed::space_bound`]); once the next pair's bound is not below the
//! best value, every remaining part is proven no better and the search stops. The bound of
//! the answer is the least of the best value and, over the parts not proven no better,
//! their bounds (a part whose run stopped early: its run's bound; a part not run: its volume
//! bound). Each run gets an equal share of the time left ([`Budget::share`]).

use super::mixed::{plan_mixed, space_bound};
use super::{ParallelOutcome, Space};
use crate::model::parallel::{ChainCosts, MixedTopology};
use crate::solve::budget::Budget;
use crate::solve::{LayoutFamily, Status, StopReason};

/// The pairs `(t, d)` of `space` that fit one of the groups: `t` a TP choice, `d` the fixed
/// DP degree or every degree with `t·d` at most the largest group's devices and `d·b`
/// dividing the global batch for one of the micro-batch sizes.
pub(super) fn pairs(topo: &MixedTopology, space: &Space) -> Vec<(usize, usize)> {
    let largest = topo.groups.iter().map(|g| g.devices()).max().unwrap_or(0);
    let divides = |d: usize| {
        space
            .micro_batches
            .iter()
            .any(|&b| space.global_batch.is_multiple_of(d * b))
    };
    let mut out = Vec::new();
    for &t in &space.tensor_parallel {
        for d in 1..=largest / t.max(1) {
            if space.data_parallel.is_none_or(|x| x == d) && divides(d) {
                out.push((t, d));
            }
        }
    }
    out
}

/// The best uniform layout on a cluster of several types (module documentation).
pub fn plan_mixed_uniform(
    chains: &[Vec<ChainCosts>],
    topo: &MixedTopology,
    space: &Space,
    budget: &Budget,
) -> Result<ParallelOutcome, String> {
    let part = |(t, d): (usize, usize)| Space {
        tensor_parallel: vec![t],
        data_parallel: Some(d),
        ..space.clone()
    };
    let mut parts: Vec<(f64, Space)> = pairs(topo, space)
        .into_iter()
        .map(|p| {
            let s = part(p);
            (space_bound(chains, topo, &s), s)
        })
        .filter(|(bound, _)| bound.is_finite())
        .collect();
    parts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total = parts.len();
    let mut best: Option<ParallelOutcome> = None;
    // The least bound of a part not proven no better than the best, and why a run stopped.
    let mut open = f64::INFINITY;
    let mut stop: Option<StopReason> = None;
    let mut solved = 0;
    for (i, (bound, s)) in parts.iter().enumerate() {
        let best_value = best.as_ref().map_or(f64::INFINITY, |b| b.value);
        if *bound >= best_value {
            break;
        }
        if let Err(e) = budget.check() {
            stop.get_or_insert(e.into());
            open = open.min(*bound);
            break;
        }
        let share = budget.share(1.0 / (total - i) as f64);
        let found = plan_mixed(chains, topo, s, None, &share)?;
        solved += 1;
        if let Some(reason) = found.status.stop_reason() {
            stop.get_or_insert(reason.clone());
        }
        // An optimal run's part is settled by its value, an infeasible one's has no layout.
        if !matches!(found.status, Status::Optimal | Status::Infeasible { .. }) {
            open = open.min(found.bound);
        }
        if found.plan.is_some() && found.value < best.as_ref().map_or(f64::INFINITY, |b| b.value) {
            best = Some(found);
        }
    }
    Ok(outcome_of(best, open, stop, solved, total, budget))
}

/// The outcome of the runs: the best plan, its bound against the parts left open.
fn outcome_of(
    best: Option<ParallelOutcome>,
    open: f64,
    stop: Option<StopReason>,
    solved: usize,
    total: usize,
    budget: &Budget,
) -> ParallelOutcome {
    let value = best.as_ref().map_or(f64::INFINITY, |b| b.value);
    let bound = value.min(open);
    let status = match (&best, bound >= value, stop) {
        (Some(_), true, _) => Status::Optimal,
        (Some(_), false, reason) => Status::Feasible {
            reason: reason.unwrap_or(StopReason::TimeLimit),
        },
        (None, _, Some(reason)) => Status::NoPlan { reason },
        (None, _, None) => Status::infeasible(LayoutFamily::UniformAnyType),
    };
    ParallelOutcome {
        plan: best.and_then(|b| b.plan),
        value,
        bound: if value.is_finite() { bound } else { open },
        status,
        configs_solved: solved,
        configs: total,
        elapsed_s: budget.elapsed_s(),
        free: false,
        valuation: super::Valuation::Model,
    }
}

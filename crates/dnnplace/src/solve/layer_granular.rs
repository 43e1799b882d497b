//! Plans whose stage boundaries fall only between layers (`--granularity layer`).
//!
//! Let `λ(v)` be the label of node `v` ([`crate::model::layers::layer_labels`]). A placement
//! is *layer-granular* when `λ(u) = λ(v) ⇒ d(u) = d(v)` and every device holds a contiguous
//! set of layers in the layer graph `G_λ` (the colour-class graph over the labels). The
//! first rule is MODEL.md's colour-class rule for the colouring `λ`, and `G_λ` is exactly
//! the class graph of the workload relabelled with `colorClass := λ`
//! ([`contract_by_layers`]): same nodes, edges, costs and devices, hence the same loads,
//! TPS, sync objective and latency for every placement (none of them reads colour classes).
//! So the method (the DP by default) on the relabelled workload optimises over exactly the
//! layer-granular placements; its group DAG is `G_λ` (a DAG: [`Layers::new`] refuses a
//! cycle, which the colour-class contraction would otherwise fuse).
//!
//! **Valid on the original.** `λ` is closed under the original colour classes, so the
//! relabelled rule implies the original one. Each original class lies inside one label, and
//! a backward class without forward nodes keeps its own label, so every arc of the original
//! class graph `G_c` projects onto an arc of `G_λ` or stays inside a label; a walk of `G_c`
//! that leaves a union of labels `X` and re-enters it therefore projects onto a walk of
//! `G_λ` that does the same. Hence contiguity in `G_λ` implies contiguity in `G_c`, and
//! the plan is contiguous for the scorer. (The converse can fail when the classes of one
//! layer are not connected to each other: layer-granular contiguity is then stricter, by
//! definition.) The plan is re-scored by the independent evaluator on the *original*
//! workload, and that evaluation is the one reported; a disagreement with the relabelled
//! score, or a rule the original rejects, is an internal error. An optimum proven on the
//! relabelled workload is the optimum over layer-granular plans, not over all plans.
//!
//! **Under a schedule** (`Problem::pipeline`, `--schedule gpipe|1f1b`): the relabelled
//! workload has the same nodes (sizes, stashes), edges and devices, so its device graph and
//! every device's resident and stashed bytes are the original's; the DP's schedule-aware
//! memory therefore optimises over layer-granular plans that fit under the schedule, and the
//! pipeline memory ([`crate::score::pipeline_memory`]) is re-checked on the original.
//!
//! Complexity: O(n + m) to relabel, plus the method on `|layers|` groups instead of n.

use super::{
    plan, CheckFailure, Infeasibility, Method, Outcome, Plan, Problem, SolveError, Stats, Status,
};
use crate::model::layers::Layers;
use crate::model::{Node, Workload, WorkloadError};
use crate::score::evaluate;

/// `w` with `colorClass(v) := λ(v)` (module documentation). Fails only when no
/// layer-granular placement exists (a layer larger than an accelerator with no CPU), with
/// the reason.
pub fn contract_by_layers(w: &Workload, layers: &Layers) -> Result<Workload, WorkloadError> {
    let nodes: Vec<Node> = w
        .nodes()
        .iter()
        .enumerate()
        .map(|(v, node)| Node {
            color_class: Some(layers.layer_of[v] as i64),
            ..node.clone()
        })
        .collect();
    let edges = w
        .edges()
        .iter()
        .map(|e| (w.node(e.from).id, w.node(e.to).id, e.cost, e.size_bytes))
        .collect();
    Workload::new(nodes, edges, w.devices().clone())
}

/// Runs `method` on the layer-relabelled workload and re-scores its plan on the original
/// (module documentation). The outcome's notes say how many layers the plan kept whole.
pub fn plan_by_layers(
    method: &dyn Method,
    problem: &Problem,
    layers: &Layers,
) -> Result<Plan, SolveError> {
    let w = problem.workload;
    let relabelled = match contract_by_layers(w, layers) {
        Ok(r) => r,
        Err(e) => {
            let reason = match e {
                WorkloadError::Infeasible { reason } => {
                    Infeasibility::AtLayerGranularity(Box::new(reason.into()))
                }
                other => Infeasibility::LayerWorkloadRejected(other),
            };
            let outcome = Outcome {
                method: method.id(),
                placement: None,
                objective: f64::INFINITY,
                bound: 0.0,
                status: Status::infeasible(reason),
                stats: Stats::default(),
            };
            return Ok(Plan {
                outcome,
                evaluation: None,
                pipeline_memory: None,
                cluster: None,
            });
        }
    };
    let coarse = problem.on(&relabelled);
    let mut result = plan(method, &coarse)?;
    let Some(placement) = &result.outcome.placement else {
        return Ok(result);
    };
    let latency_rules = matches!(problem.objective, super::Objective::Latency { .. });
    let evaluation = evaluate(w, placement, latency_rules);
    if let Some(v) = evaluation.violations.first() {
        return Err(SolveError::Check(CheckFailure::LayerPlanInvalid(v.clone())));
    }
    // Under the interleaved schedule a device holds several chunks: its chain of chunks is
    // checked with the memory below (as `plan` checks it), not per-device contiguity.
    if problem.contiguous && !problem.interleaved() {
        if let Some(v) = evaluation.non_contiguous.first() {
            return Err(SolveError::Check(CheckFailure::LayerPlanNotContiguous(
                v.clone(),
            )));
        }
    }
    let scored = problem.objective.value(&evaluation);
    let coarse_value = result.objective(problem.objective);
    if (scored - coarse_value).abs() > 1e-9 * scored.abs().max(1.0) {
        return Err(SolveError::Check(CheckFailure::LayerPlanScore {
            relabelled: coarse_value,
            original: scored,
        }));
    }
    if let Some(pipeline) = &problem.pipeline {
        result.pipeline_memory = Some(super::checked_pipeline_memory(
            method, w, placement, pipeline,
        )?);
    }
    result.outcome.objective = scored;
    result.outcome.bound = result.outcome.bound.min(scored);
    result.outcome.stats.groups = Some(layers.len());
    result.outcome.stats.notes.push(format!(
        "layer granularity: {} layers kept whole; the optimum is over plans that cut only between layers",
        layers.len()
    ));
    result.evaluation = Some(evaluation);
    Ok(result)
}

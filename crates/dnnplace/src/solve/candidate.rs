//! A plan held beside a method's own search — a warm start, a baseline's plan, a
//! heuristic split — checked against the problem and scored before anyone counts on it.
//!
//! [`candidate`] keeps a placement only when the problem would accept it as an answer:
//! the scorer finds it valid, contiguous when contiguity is promised (pieces per chunk are
//! the interleaved schedule's business), within the latency objective's piece limit, and
//! every accelerator within its memory under the pipeline schedule, if any. Under
//! `--recompute auto` a plan that does not fit as marked is first marked where the scorer
//! finds it must recompute. Its score is the problem's objective of the scorer's
//! evaluation, so a held plan and a solver's plan compare on one scale.

use crate::model::Placement;
use crate::score::evaluate;
use crate::solve::{Objective, Problem};

/// A candidate plan with its score under the problem's objective.
pub(crate) struct Candidate {
    pub placement: Placement,
    pub score: f64,
    pub source: &'static str,
}

/// Scores `placement` and keeps it if it is valid for the problem (rules, contiguity when
/// promised, piece limit for latency, every accelerator's memory under the pipeline
/// schedule when there is one).
pub(crate) fn candidate(
    problem: &Problem,
    placement: Placement,
    source: &'static str,
) -> Option<Candidate> {
    let latency = matches!(problem.objective, Objective::Latency { .. });
    let fits = |placement: &Placement, pipeline: &crate::model::schedule::Pipeline| {
        let limit = problem.workload.devices().memory_per_accelerator_bytes;
        crate::score::pipeline_memory(problem.workload, placement, pipeline).is_ok_and(|memory| {
            memory
                .iter()
                .all(|d| !d.device.is_accelerator() || d.bytes <= limit * (1.0 + 1e-9))
        })
    };
    let placement = match &problem.pipeline {
        // Under `--recompute auto` a held plan that does not fit as it is marked (a
        // baseline's, which marks nothing) recomputes where the scorer finds it must.
        Some(pipeline)
            if pipeline.recompute == crate::model::recompute::Recompute::Auto
                && !fits(&placement, pipeline) =>
        {
            crate::score::recompute_where_needed(problem.workload, &placement, pipeline).ok()?
        }
        _ => placement,
    };
    let e = evaluate(problem.workload, &placement, latency);
    if !e.is_valid() || (problem.contiguous && !problem.interleaved() && !e.is_contiguous()) {
        return None;
    }
    if problem
        .pipeline
        .as_ref()
        .is_some_and(|pipeline| !fits(&placement, pipeline))
    {
        return None;
    }
    if let Objective::Latency { pieces } = problem.objective {
        if e.max_pieces() > pieces {
            return None;
        }
    }
    let placement = if latency {
        e.attach_cut(placement)
    } else {
        placement
    };
    Some(Candidate {
        score: problem.objective.value(&e),
        placement,
        source,
    })
}

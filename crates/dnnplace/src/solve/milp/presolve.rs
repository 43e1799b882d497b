//! What HiGHS sees: coefficients presolved against a held plan and rescaled by powers of
//! two, and the IP's answer cross-checked against the original workload.
//!
//! HiGHS rejects a model with a coefficient of 1e15 or more (`large_matrix_value`), takes
//! bounds of 1e20 as infinite and drops entries below 1e-9. So before a model is built:
//!
//! 1. **Presolve** (sound). Let `U` be the score, under the objective and on the original
//!    workload, of the best plan held: the greedy and single-accelerator plans, the
//!    caller's warm start if any, else the DP's plan (the contiguous optimum, within half
//!    the time left; it is then the IP's warm start, so the DP runs once). Every
//!    objective here (max load, `max FW + max BW`, latency) is at least each single
//!    compute or communication term its plan pays. So a plan that pays a term `x > U`
//!    scores above `U` and is not optimal; replacing every such `x` by `2U` keeps it above
//!    `U`, leaves every plan that pays none of them unchanged, and so keeps the optimum and
//!    the optimal plans. A node whose size alone exceeds the memory `M` cannot be on an
//!    accelerator: it is marked unsupported there, with size 0.
//! 2. **Rescale** (exact). Times are multiplied by the power of two that brings the
//!    compute floor `L = max(max_g m_g, Σ_g m_g / (k + ℓ))`, `m_g = min(fpga_g, cpu_g)` over
//!    the kinds g may use (a lower bound on every objective), into `[1, 2^16]` (no change
//!    when already there) — unless that lifts the largest capped time above 2^22, then by
//!    the one that brings it to 2^22; bytes by the one that brings the memory and the
//!    sizes below `2^20`. HiGHS's absolute tolerances (1e-7 on rows, 1e-5 on the
//!    objective, MODEL.md) then act as relative ones: a plan scoring 2e10 made HiGHS report
//!    "optimal with primal infeasibilities 1.2e-6" and fail, and an optimum scaled to 1e-4
//!    was "proven" 1.5% too high. Large coefficients are as harmful: on 5-node models
//!    HiGHS 1.15 proved plans up to 56× the optimum "optimal" (7 in 10,000 random
//!    log-uniform workloads, tests/numerics.rs) whenever a load row held a coefficient
//!    above about 7.5e8 (the same model with that one coefficient at 7e8 solved right),
//!    and memory rows with sizes near 1e11 did the same; with times below 2^22 and bytes
//!    below 2^20 none of 70,000 did. Values more than about 2^50 below `U` may fall under
//!    HiGHS's 1e-9 and be dropped, which relaxes the model (the bound stays a bound; the
//!    plan is re-scored). The objective and bound are scaled back.
//! 3. **Cross-check**. The returned plan is re-scored on the original workload; the
//!    held plan replaces it when better (or when HiGHS claimed infeasibility: then its
//!    answer is not trusted; when HiGHS stopped with no plan, that outcome stands), the
//!    bound is capped by every plan held, and "optimal" stands only when the re-scored
//!    plan meets the bound within the gap.
//!
//! Complexity: O(n + m) plus the two heuristics (O(n + m) each), the DP (its own, within
//! half the time) and the scorings.

use crate::model::numerics::{ceil_log2, pow2, Rescale, Sum};
use crate::model::Workload;
use crate::solve::candidate::{candidate, Candidate};
use crate::solve::DEFAULT_GAP;
use crate::solve::{method, MethodId, Outcome, Problem, SolveError, Status, StopReason};

/// The compute floor (or the largest time) is brought into `[1, 2^TIME_LOG2]`.
const TIME_LOG2: i32 = 16;
/// No time coefficient goes above `2^COEFFICIENT_LOG2` (HiGHS misjudged optima with
/// coefficients above about 2^29; see the module doc).
const COEFFICIENT_LOG2: i32 = 22;
/// The memory and sizes are brought below `2^BYTES_LOG2`.
const BYTES_LOG2: i32 = 20;

/// The power of two `f` with `x·f` in `[2^lo, 2^hi]` (`lo = i32::MIN`: no lower end), 1 when
/// already there or `x` is 0; the exponent stays within ±1000.
pub(crate) fn into_range(x: f64, lo: i32, hi: i32) -> f64 {
    if !x.is_finite() || x <= 0.0 {
        return 1.0;
    }
    let e = ceil_log2(x);
    if e > hi {
        pow2(-(e - hi).min(1000))
    } else if lo != i32::MIN && x < pow2(lo) {
        pow2((lo - e + 1).min(1000))
    } else {
        1.0
    }
}

/// Solves `problem` with `solve` on the presolved, rescaled workload, then cross-checks.
pub(crate) fn solve_prepared(
    problem: &Problem,
    solve: impl Fn(&Problem) -> Result<Outcome, SolveError>,
) -> Result<Outcome, SolveError> {
    let started = std::time::Instant::now();
    let w = problem.workload;
    let held = held_plan(problem);
    let cap = held
        .as_ref()
        .map(|c| 2.0 * c.score)
        .filter(|&c| c.is_finite() && c > 0.0);
    let memory = w.devices().memory_per_accelerator_bytes;
    let clamp = |x: f64| cap.map_or(x, |c| x.min(c));
    let changes =
        w.nodes().iter().any(|v| {
            clamp(v.fpga_latency) != v.fpga_latency || clamp(v.cpu_latency) != v.cpu_latency
        }) || w.edges().iter().any(|e| clamp(e.cost) != e.cost)
            || w.nodes()
                .iter()
                .any(|v| v.supported_on_accelerator && v.size_bytes > memory);
    let max_time = w
        .nodes()
        .iter()
        .flat_map(|v| [v.fpga_latency, v.cpu_latency])
        .chain(w.edges().iter().map(|e| e.cost))
        .map(clamp)
        .fold(0.0, f64::max);
    let max_bytes = w
        .nodes()
        .iter()
        .filter(|v| v.size_bytes <= memory)
        .map(|v| v.size_bytes)
        .fold(memory, f64::max);
    // Times: the lower bound L into [1, 2^20] (HiGHS's absolute tolerances become relative
    // to the optimum), unless that puts the largest capped time above 2^30.
    let floor = compute_floor(w);
    let anchor = if floor > 0.0 {
        floor
    } else {
        held.as_ref().map_or(max_time, |c| c.score)
    };
    let mut time = into_range(anchor, 0, TIME_LOG2);
    if max_time * time > pow2(COEFFICIENT_LOG2) {
        time = into_range(max_time, i32::MIN, COEFFICIENT_LOG2);
    }
    let rescale = Rescale {
        time,
        bytes: into_range(max_bytes, i32::MIN, BYTES_LOG2),
    };
    // The held plan is the IP's warm start: the DP is not run twice.
    let warm = held.as_ref().map(|c| c.placement.clone());
    if !changes && rescale.is_identity() {
        let mut inner = super::highs::remaining(problem, started);
        inner.limits.warm_start = warm;
        let outcome = solve_tolerant(&inner, &solve)?;
        return cross_check(problem, outcome, held, 1.0);
    }
    let prepared: Workload = rescale.apply_with(w, |mut v| {
        v.fpga_latency = clamp(v.fpga_latency);
        v.cpu_latency = clamp(v.cpu_latency);
        if v.size_bytes > memory {
            v.supported_on_accelerator = false;
            v.size_bytes = 0.0;
            v.memory = None;
        }
        v
    });
    let prepared = clamp_edges(&prepared, cap.map(|c| c * rescale.time));
    let mut inner = super::highs::remaining(problem, started).on(&prepared);
    inner.limits.ip.presolved = true;
    inner.limits.warm_start = warm;
    let mut outcome = solve_tolerant(&inner, &solve)?;
    if cap.is_some() && changes {
        outcome.stats.notes.push(format!(
            "presolve: times above 2 × the held plan's {} capped there",
            held.as_ref().map_or(0.0, |c| c.score)
        ));
    }
    if !rescale.is_identity() {
        outcome.stats.notes.push(format!(
            "coefficients scaled by {:e} (times) and {:e} (bytes), powers of two",
            rescale.time, rescale.bytes
        ));
    }
    cross_check(problem, outcome, held, rescale.time)
}

/// `solve(problem)`; when HiGHS fails (its status "Error") at our integrality tolerance
/// ([`super::highs::MIP_FEASIBILITY_TOLERANCE`]), once more at HiGHS's default 1e-6 in the time
/// left, with a note. (1e-9 avoids a false "optimal" HiGHS 1.15 proved at 1e-6, but on some
/// rescaled models HiGHS cannot meet it: tests/numerics.rs, seed 15066912747943284560.)
fn solve_tolerant(
    problem: &Problem,
    solve: &impl Fn(&Problem) -> Result<Outcome, SolveError>,
) -> Result<Outcome, SolveError> {
    let started = std::time::Instant::now();
    match solve(problem) {
        Err(SolveError::Solver(message)) if message.is_failed_run() => {
            let mut again = super::highs::remaining(problem, started);
            again
                .limits
                .ip
                .highs_options
                .insert(0, ("mip_feasibility_tolerance".into(), "1e-6".into()));
            let mut outcome = solve(&again)?;
            outcome.stats.notes.push(format!(
                "HiGHS failed at integrality tolerance {:e} ({message}); solved again at 1e-6",
                super::highs::MIP_FEASIBILITY_TOLERANCE
            ));
            Ok(outcome)
        }
        other => other,
    }
}

/// A lower bound on every objective's optimum from compute alone: every node runs
/// somewhere, at least `min(fpga, cpu)` (over the kinds it may use), and the k + ℓ devices
/// share `Σ` of those (a device's load, its `max FW + max BW` and one sample's latency are
/// each at least the device's compute).
fn compute_floor(w: &Workload) -> f64 {
    let d = w.devices();
    let least = |v: &crate::model::Node| match (
        v.supported_on_accelerator && d.accelerators > 0,
        d.cpus > 0,
    ) {
        (true, true) => v.fpga_latency.min(v.cpu_latency),
        (true, false) => v.fpga_latency,
        _ => v.cpu_latency,
    };
    let devices = (d.accelerators + d.cpus).max(1) as f64;
    let most = w.nodes().iter().map(least).fold(0.0, f64::max);
    let volume = Sum::of(w.nodes().iter().map(least)).lower_bound() / devices;
    most.max(volume * (1.0 - 1e-9))
}

/// `w` with every edge cost capped at `cap`.
fn clamp_edges(w: &Workload, cap: Option<f64>) -> Workload {
    let Some(cap) = cap else { return w.clone() };
    if w.edges().iter().all(|e| e.cost <= cap) {
        return w.clone();
    }
    let edges = w
        .edges()
        .iter()
        .map(|e| {
            (
                w.node(e.from).id,
                w.node(e.to).id,
                e.cost.min(cap),
                e.size_bytes,
            )
        })
        .collect();
    Workload::new(w.nodes().to_vec(), edges, w.devices().clone())
        .expect("capping edge costs keeps a valid workload valid")
}

/// The best plan we hold before HiGHS runs, scored on `problem`: the greedy and
/// single-accelerator plans, the caller's warm start ([`crate::solve::Limits::warm_start`])
/// and the DP's plan (the contiguous optimum, within half the time left), whichever scores
/// least. The cap `2U` is then within a factor 2 of the optimum wherever the DP's plan is
/// near it, which keeps every coefficient HiGHS sees in a range it handles.
fn held_plan(problem: &Problem) -> Option<Candidate> {
    let mut held: Vec<Candidate> = [(MethodId::Greedy, "greedy"), (MethodId::Single, "single")]
        .into_iter()
        .filter_map(|(id, source)| {
            candidate(problem, method(id).solve(problem).ok()?.placement?, source)
        })
        .collect();
    match &problem.limits.warm_start {
        Some(p) => held.extend(candidate(problem, p.clone(), "warm start")),
        None => {
            let budget = problem.limits.budget().share(0.5);
            if let Ok(o) = super::dp_plan(problem, &budget) {
                held.extend(o.placement.and_then(|p| candidate(problem, p, "dp")));
            }
        }
    }
    held.into_iter().min_by(|a, b| a.score.total_cmp(&b.score))
}

/// Scales `outcome` back by `1 / time_factor`, re-scores its plan on the original
/// workload, keeps the held plan when better and caps the bound by every plan held.
fn cross_check(
    problem: &Problem,
    mut outcome: Outcome,
    held: Option<Candidate>,
    time_factor: f64,
) -> Result<Outcome, SolveError> {
    outcome.bound /= time_factor;
    outcome.objective /= time_factor;
    if let (None, Status::NoPlan { reason }, Some(h)) = (&outcome.placement, &outcome.status, &held)
    {
        // The budget stopped the IP before it had a plan (its model beyond the memory
        // budget, or no time left to build or solve it): the best held plan is the answer,
        // with the bound proven so far and at least the compute floor, like every other
        // method that runs out of budget.
        outcome.stats.notes.push(format!(
            "the IP stopped before a plan of its own ({reason}): returning the held {} plan",
            h.source
        ));
        outcome.status = Status::Feasible {
            reason: reason.clone(),
        };
        outcome.bound = outcome.bound.max(compute_floor(problem.workload));
    }
    if outcome.placement.is_none()
        && !matches!(
            outcome.status,
            Status::Infeasible { .. } | Status::Feasible { .. }
        )
    {
        // No plan held either: "no plan within the limits" stays what it is.
        return Ok(outcome);
    }
    let scored = outcome
        .placement
        .take()
        .and_then(|p| candidate(problem, p, "ip"));
    let best = match (scored, held) {
        (Some(a), Some(b)) if b.score < a.score => {
            outcome.stats.notes.push(format!(
                "the {} plan ({}) beats the IP's; returned instead",
                b.source, b.score
            ));
            Some(b)
        }
        (a, b) => a.or(b),
    };
    let Some(best) = best else {
        return Ok(outcome);
    };
    if matches!(outcome.status, Status::Infeasible { .. }) {
        outcome.stats.notes.push(
            "the IP said infeasible, but a held plan is valid: the IP's answer is not trusted"
                .into(),
        );
        outcome.status = Status::Feasible {
            reason: StopReason::UnreliableBound,
        };
        outcome.bound = 0.0;
    }
    let gap = problem.limits.mip_gap.unwrap_or(DEFAULT_GAP);
    // Relative: the model was solved at a scale where the held plan scores at least 1.
    let tolerance = (gap * best.score.abs()).max(1e-5 * best.score.abs());
    if outcome.bound > best.score + tolerance {
        outcome.stats.notes.push(format!(
            "the IP's bound {} exceeds the re-scored plan's {}: not trusted",
            outcome.bound, best.score
        ));
        if outcome.status == Status::Optimal {
            outcome.status = Status::Feasible {
                reason: StopReason::UnreliableBound,
            };
        }
    }
    outcome.bound = outcome.bound.min(best.score).max(0.0);
    if outcome.status == Status::Optimal && best.score - outcome.bound > tolerance {
        outcome.status = Status::Feasible {
            reason: StopReason::PlanAboveBound,
        };
    }
    outcome.objective = best.score;
    outcome.placement = Some(best.placement);
    Ok(outcome)
}

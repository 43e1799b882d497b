//! The max-load (TPS) and synchronous IPs.
//!
//! Units g (classes, or groups when contiguous; see [`super::units`]), accelerators
//! `d ∈ 0..k`, CPUs `c ∈ 0..ℓ`, hyperedges `e = (T_e, c_e)`.
//!
//! ```text
//! x[g,d], y[g,c] ∈ {0,1}                     unit g on accelerator d / CPU c
//! Σ_d x[g,d] + Σ_c y[g,c] = 1                each unit on one device
//! x[g,d] = 0   if g is unsupported or size_g > M        (accelerator support, memory)
//! Σ_g size_g · x[g,d] ≤ M                     memory knapsack of accelerator d
//! z[e,d] ≥ cut of T_e by accelerator d        (units::cut_indicator; CPUs pay nothing)
//! throughput:  t ≥ Σ_g fpga_g x[g,d] + Σ_e c_e z[e,d]    for every accelerator d
//!              t ≥ Σ_g cpu_g y[g,c]                       for every CPU c
//!              minimise t
//! sync:        F ≥ FW(d), B ≥ BW(d) for every device, FW/BW the forward/backward parts
//!              (a hyperedge counts on the side of its producing nodes); minimise F + B
//! contiguity (when asked): units::contiguity for every accelerator and every CPU, and
//!              units::device_order (the devices in a pipeline order: a chain of ideals)
//! symmetry: units::symmetry among accelerators and among CPUs
//! bounds:   t ≥ LB (sync: F ≥ LB_F, B ≥ LB_B, F + B ≥ LB), combinatorial (super::load_bounds)
//! ```
//!
//! With contiguity the default is the chain-of-stages model of [`super::stages`], which
//! is tighter; the per-device formulation above stays available for comparison
//! (`--ip-experiment positions`).
//!
//! Colour classes hold by construction (one variable per class or group). Warm start:
//! the DP's optimal contiguous plan (valid for both variants), canonically relabelled.
//!
//! Size: (k + ℓ)·U binaries for U units; k·H cut variables and O(k·Σ|T_e|) rows for H
//! hyperedges; with contiguity (k + ℓ)·U reach variables and 2(k + ℓ)·A rows for A arcs.

use super::load_bounds::ModelBounds;
use super::units::{canonical_devices, contiguity, cut_indicator, device_order, symmetry, Units};
use super::{dp_warm_start, finish, run_to, Builder, Var};
use crate::model::{Device, Placement};
use crate::solve::{Objective, Outcome, Problem, SolveError, Stats};

/// Solves the throughput or sync IP of `problem`.
pub fn solve(problem: &Problem) -> Result<Outcome, SolveError> {
    let started = std::time::Instant::now();
    if problem.contiguous && problem.limits.ip.contiguous_model == super::ContiguousModel::Stages {
        return super::stages::solve(problem);
    }
    let w = problem.workload;
    let sync = problem.objective == Objective::Sync;
    let units = Units::new(w, problem.contiguous);
    let devices = w.devices();
    let (k, l, memory) = (devices.accelerators, devices.cpus, devices.memory_per_accelerator_bytes);
    let n_units = units.len();

    let mut b = Builder::new();
    let x: Vec<Vec<Var>> =
        (0..k).map(|_| (0..n_units).map(|g| b.binary(0.0, units.fits_accelerator(g, memory))).collect()).collect();
    let y: Vec<Vec<Var>> = (0..l).map(|_| (0..n_units).map(|_| b.binary(0.0, true)).collect()).collect();
    for g in 0..n_units {
        let terms: Vec<(Var, f64)> = x.iter().chain(y.iter()).map(|row| (row[g], 1.0)).collect();
        b.eq(&terms, 1.0);
    }
    if units.size.iter().any(|&s| s > 0.0) {
        let total: f64 = units.size.iter().sum();
        if total > memory {
            for row in &x {
                let terms: Vec<(Var, f64)> =
                    (0..n_units).filter(|&g| units.size[g] > 0.0).map(|g| (row[g], units.size[g])).collect();
                b.le(&terms, memory);
            }
        }
    }

    let hyperedges = units.hyperedges(w, sync);
    let mut stats = Stats { groups: Some(n_units), ..Stats::default() };
    let bound_use = problem.limits.ip.load_bound;
    let bounds = super::load_bounds::for_model(&units, &hyperedges, devices, sync, bound_use, &mut stats);
    let (t, f, bw) = objective_columns(&mut b, sync, &bounds.in_model(bound_use));
    for row in &x {
        // Loads of this accelerator: total, forward part, backward part.
        let mut total: Vec<(Var, f64)> = Vec::new();
        let mut forward: Vec<(Var, f64)> = Vec::new();
        let mut backward: Vec<(Var, f64)> = Vec::new();
        for g in 0..n_units {
            total.push((row[g], units.fpga[g]));
            forward.push((row[g], units.forward_fpga[g]));
            backward.push((row[g], units.fpga[g] - units.forward_fpga[g]));
        }
        for e in &hyperedges {
            let members: Vec<Var> = e.units.iter().map(|&g| row[g]).collect();
            let z = cut_indicator(&mut b, &members);
            total.push((z, e.cost));
            if e.backward { &mut backward } else { &mut forward }.push((z, e.cost));
        }
        add_load_rows(&mut b, t, f, bw, total, forward, backward);
    }
    for row in &y {
        let total = (0..n_units).map(|g| (row[g], units.cpu[g])).collect();
        let forward = (0..n_units).map(|g| (row[g], units.forward_cpu[g])).collect();
        let backward = (0..n_units).map(|g| (row[g], units.cpu[g] - units.forward_cpu[g])).collect();
        add_load_rows(&mut b, t, f, bw, total, forward, backward);
    }
    if problem.contiguous {
        if problem.limits.ip.reach_rows {
            for row in x.iter().chain(y.iter()) {
                contiguity(&mut b, row, &units.arcs);
            }
        }
        let all: Vec<Vec<Var>> = x.iter().chain(y.iter()).cloned().collect();
        device_order(&mut b, &all, &units.arcs, n_units);
    }
    if problem.limits.ip.symmetry_breaking {
        symmetry(&mut b, &x);
        symmetry(&mut b, &y);
    }

    // Warm start: the DP plan (contiguous optimum), when the DP can enumerate the ideals.
    let warm = dp_warm_start(problem, &mut stats);
    let warm_values = warm.as_ref().and_then(|c| canonical_devices(&units, &c.placement.assignment)).map(|dev| {
        let mut values = Vec::with_capacity(b.integer_columns.len());
        for d in 0..k {
            values.extend((0..n_units).map(|g| f64::from(dev[g] == Device::Accelerator(d))));
        }
        for c in 0..l {
            values.extend((0..n_units).map(|g| f64::from(dev[g] == Device::Cpu(c))));
        }
        values
    });
    stats.notes.push(format!("{} units, {} hyperedges, {} columns, {} rows", n_units, hyperedges.len(), b.columns(), b.rows));

    let lower = bounds.objective(sync);
    let target = lower * (1.0 + problem.limits.mip_gap.unwrap_or(super::DEFAULT_GAP));
    let mut solved = run_to(b, &super::remaining(problem, started), warm_values.as_deref(), target)?;
    solved.bound = solved.bound.max(lower);
    let from_ip = solved.columns.as_ref().map(|values| {
        let mut device = vec![Device::Cpu(0); n_units];
        for g in 0..n_units {
            if let Some(d) = (0..k).find(|&d| values[x[d][g].index()] > 0.5) {
                device[g] = Device::Accelerator(d);
            } else if let Some(c) = (0..l).find(|&c| values[y[c][g].index()] > 0.5) {
                device[g] = Device::Cpu(c);
            }
        }
        Placement::new(units.unit_of.iter().map(|&g| device[g]).collect())
    });
    finish(problem, &solved, from_ip, warm, stats)
}

/// The objective's columns: τ ≥ the bound on the max load (throughput), or F ≥ the bound
/// on the forward side, B ≥ the bound on the backward side and `F + B ≥` the bound on the
/// max load (sync; see [`super::load_bounds::ModelBounds`]).
pub(crate) fn objective_columns(
    b: &mut Builder,
    sync: bool,
    bounds: &ModelBounds,
) -> (Option<Var>, Option<Var>, Option<Var>) {
    if sync {
        let f = b.continuous(1.0, bounds.forward, f64::INFINITY);
        let bw = b.continuous(1.0, bounds.backward, f64::INFINITY);
        if bounds.total > bounds.forward + bounds.backward {
            b.ge(&[(f, 1.0), (bw, 1.0)], bounds.total);
        }
        (None, Some(f), Some(bw))
    } else {
        (Some(b.continuous(1.0, bounds.total, f64::INFINITY)), None, None)
    }
}

/// `t ≥ total` (throughput) or `F ≥ forward, B ≥ backward` (sync).
pub(crate) fn add_load_rows(
    b: &mut Builder,
    t: Option<Var>,
    f: Option<Var>,
    bw: Option<Var>,
    mut total: Vec<(Var, f64)>,
    mut forward: Vec<(Var, f64)>,
    mut backward: Vec<(Var, f64)>,
) {
    let nonzero = |terms: &mut Vec<(Var, f64)>| terms.retain(|&(_, c)| c != 0.0);
    if let Some(t) = t {
        nonzero(&mut total);
        total.push((t, -1.0));
        b.le(&total, 0.0);
    }
    if let (Some(f), Some(bw)) = (f, bw) {
        nonzero(&mut forward);
        nonzero(&mut backward);
        forward.push((f, -1.0));
        backward.push((bw, -1.0));
        b.le(&forward, 0.0);
        b.le(&backward, 0.0);
    }
}

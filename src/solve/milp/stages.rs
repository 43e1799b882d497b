//! The contiguous max-load and sync IPs as a chain of ideals (stages).
//!
//! A contiguous placement (MODEL.md, as the scorer checks it) is a chain of ideals
//! `∅ = I_0 ⊆ I_1 ⊆ … ⊆ I_T = V` of the group DAG, each difference on one device, with
//! `T = k + ℓ` stages (empty stages allowed). Devices of one kind are interchangeable, so
//! a stage only has to choose its *kind*. Groups g, stages t, arcs (u, v) of the group DAG:
//!
//! ```text
//! Y[g,t] ∈ {0,1}: g ∈ I_t;   Y[g,t] ≤ Y[g,t+1];   Y[g,T] = 1;   Y[g,0] = 0
//! Y[v,t] ≤ Y[u,t]                        (u → v)   every I_t is an ideal
//! κ[t] ∈ {0,1}: stage t is an accelerator;  Σ_t κ[t] = k   (so T − k = ℓ stages are CPUs)
//! A[g,t] + C[g,t] = Y[g,t] − Y[g,t−1]    membership of stage t, split by kind:
//! A[g,t] ≤ κ[t],  C[g,t] ≤ 1 − κ[t],  A[g,t] = 0 if g is unsupported or too large
//! Σ_g size_g A[g,t] ≤ M                  memory
//! z[e,t] ≥ cut of T_e by A[·,t]          (units::cut_indicator)
//! throughput: τ ≥ Σ_g fpga_g A[g,t] + Σ_e c_e z[e,t],   τ ≥ Σ_g cpu_g C[g,t];   min τ
//! sync:       F ≥ forward parts, B ≥ backward parts of the same;                min F + B
//! Σ_t acc_load(t) ≤ k τ,  Σ_t cpu_load(t) ≤ ℓ τ       capacity (F, B for sync)
//! τ ≥ LB (sync: F ≥ LB_F, B ≥ LB_B, F + B ≥ LB)   combinatorial (super::load_bounds)
//! ```
//!
//! No big-M appears: the kind split `A + C` replaces "if stage t is an accelerator then
//! …". The ideal constraints are the precedence constraints of a scheduling polytope and
//! give a much tighter relaxation than per-device contiguity with device positions
//! (docs/ip.md compares them). Stage t's set is `I_t \ I_{t−1}`: contiguous, and the
//! stages are a pipeline order, so the plan passes the scorer's contiguity check.
//!
//! Size: T·(3U + 1) columns, O(T·(U + A + Σ|T_e|)) rows.

use super::units::{cut_indicator, Units};
use super::{dp_warm_start, finish, run_to, Builder, Var};
use crate::model::contraction::Contraction;
use crate::model::{Device, Placement};
use crate::solve::{Objective, Outcome, Problem, SolveError, Stats};

/// Solves the contiguous throughput or sync IP as a chain of stages.
pub fn solve(problem: &Problem) -> Result<Outcome, SolveError> {
    let started = std::time::Instant::now();
    let w = problem.workload;
    let sync = problem.objective == Objective::Sync;
    let units = Units::new(w, true);
    let devices = w.devices();
    let (k, l, memory) = (devices.accelerators, devices.cpus, devices.memory_per_accelerator_bytes);
    let stages = k + l;
    let n_units = units.len();

    let mut b = Builder::new();
    let y: Vec<Vec<Var>> = (0..n_units)
        .map(|_| {
            (0..stages)
                .map(|t| {
                    let v = b.binary(0.0, true);
                    if t + 1 == stages {
                        b.eq(&[(v, 1.0)], 1.0);
                    }
                    v
                })
                .collect()
        })
        .collect();
    let kind: Vec<Var> = (0..stages).map(|_| b.binary(0.0, true)).collect();
    b.eq(&kind.iter().map(|&v| (v, 1.0)).collect::<Vec<_>>(), k as f64);
    for g in 0..n_units {
        for t in 0..stages.saturating_sub(1) {
            b.le(&[(y[g][t], 1.0), (y[g][t + 1], -1.0)], 0.0);
        }
    }
    for &(u, v) in &units.arcs {
        for t in 0..stages {
            b.le(&[(y[v][t], 1.0), (y[u][t], -1.0)], 0.0);
        }
    }
    let fits: Vec<bool> = (0..n_units).map(|g| units.fits_accelerator(g, memory)).collect();
    let mut acc: Vec<Vec<Var>> = vec![Vec::with_capacity(n_units); stages];
    let mut cpu: Vec<Vec<Var>> = vec![Vec::with_capacity(n_units); stages];
    for g in 0..n_units {
        for t in 0..stages {
            let a = b.continuous(0.0, 0.0, if fits[g] { 1.0 } else { 0.0 });
            let c = b.continuous(0.0, 0.0, 1.0);
            let mut terms = vec![(a, 1.0), (c, 1.0), (y[g][t], -1.0)];
            if t > 0 {
                terms.push((y[g][t - 1], 1.0));
            }
            b.eq(&terms, 0.0);
            if fits[g] {
                b.le(&[(a, 1.0), (kind[t], -1.0)], 0.0);
            }
            b.le(&[(c, 1.0), (kind[t], 1.0)], 1.0);
            acc[t].push(a);
            cpu[t].push(c);
        }
    }
    let limit_memory = units.size.iter().any(|&s| s > 0.0) && units.size.iter().sum::<f64>() > memory;
    let hyperedges = units.hyperedges(w, sync);
    let mut stats = Stats { groups: Some(n_units), ..Stats::default() };
    let bound_use = problem.limits.ip.load_bound;
    let bounds = super::load_bounds::for_model(&units, &hyperedges, devices, sync, bound_use, &mut stats);
    let (tau, f, bw) = super::throughput::objective_columns(&mut b, sync, &bounds.in_model(bound_use));
    // Aggregates over all stages, for the capacity rows below.
    let mut all_acc: [Vec<(Var, f64)>; 3] = Default::default();
    let mut all_cpu: [Vec<(Var, f64)>; 3] = Default::default();
    for t in 0..stages {
        if limit_memory {
            let terms: Vec<(Var, f64)> =
                (0..n_units).filter(|&g| units.size[g] > 0.0 && fits[g]).map(|g| (acc[t][g], units.size[g])).collect();
            b.le(&terms, memory);
        }
        let mut total: Vec<(Var, f64)> = Vec::new();
        let mut forward: Vec<(Var, f64)> = Vec::new();
        let mut backward: Vec<(Var, f64)> = Vec::new();
        for g in 0..n_units {
            total.push((acc[t][g], units.fpga[g]));
            forward.push((acc[t][g], units.forward_fpga[g]));
            backward.push((acc[t][g], units.fpga[g] - units.forward_fpga[g]));
        }
        for e in &hyperedges {
            let members: Vec<Var> = e.units.iter().map(|&g| acc[t][g]).collect();
            let z = cut_indicator(&mut b, &members);
            total.push((z, e.cost));
            if e.backward { &mut backward } else { &mut forward }.push((z, e.cost));
        }
        for (all, part) in all_acc.iter_mut().zip([&total, &forward, &backward]) {
            all.extend(part.iter().copied());
        }
        super::throughput::add_load_rows(&mut b, tau, f, bw, total, forward, backward);
        let total: Vec<(Var, f64)> = (0..n_units).map(|g| (cpu[t][g], units.cpu[g])).collect();
        let forward: Vec<(Var, f64)> = (0..n_units).map(|g| (cpu[t][g], units.forward_cpu[g])).collect();
        let backward: Vec<(Var, f64)> = (0..n_units).map(|g| (cpu[t][g], units.cpu[g] - units.forward_cpu[g])).collect();
        for (all, part) in all_cpu.iter_mut().zip([&total, &forward, &backward]) {
            all.extend(part.iter().copied());
        }
        super::throughput::add_load_rows(&mut b, tau, f, bw, total, forward, backward);
    }
    // Capacity: k accelerator stages and ℓ CPU stages, each at most the objective's part,
    // so Σ_t acc_load(t) ≤ k τ and Σ_t cpu_load(t) ≤ ℓ τ (likewise F and B for sync).
    // Valid for every plan; without them the relaxation spreads each group over all T
    // stages' CPU parts, as if there were T CPUs.
    if problem.limits.ip.capacity_rows {
        for (all, count) in [(&all_acc, k as f64), (&all_cpu, l as f64)] {
            let targets: Vec<(usize, Var)> = match (tau, f, bw) {
                (Some(tau), _, _) => vec![(0, tau)],
                (_, Some(f), Some(bw)) => vec![(1, f), (2, bw)],
                _ => Vec::new(),
            };
            for (part, var) in targets {
                let mut terms: Vec<(Var, f64)> = all[part].iter().copied().filter(|&(_, c)| c != 0.0).collect();
                terms.push((var, -count));
                b.le(&terms, 0.0);
            }
        }
    }

    let warm = dp_warm_start(problem, &mut stats);
    let warm_values = warm.as_ref().and_then(|c| stage_values(&units, w, &c.placement, k, l));
    stats.notes.push(format!(
        "{} groups, {} stages, {} hyperedges, {} columns, {} rows",
        n_units,
        stages,
        hyperedges.len(),
        b.columns(),
        b.rows
    ));

    let lower = bounds.objective(sync);
    let target = lower * (1.0 + problem.limits.mip_gap.unwrap_or(super::DEFAULT_GAP));
    let mut solved = run_to(b, &super::remaining(problem, started), warm_values.as_deref(), target)?;
    solved.bound = solved.bound.max(lower);
    let from_ip = solved.columns.as_ref().map(|values| {
        let (mut next_acc, mut next_cpu) = (0, 0);
        let mut device_of_stage = Vec::with_capacity(stages);
        for t in 0..stages {
            if values[kind[t].index()] > 0.5 {
                device_of_stage.push(Device::Accelerator(next_acc));
                next_acc += 1;
            } else {
                device_of_stage.push(Device::Cpu(next_cpu));
                next_cpu += 1;
            }
        }
        let device: Vec<Device> = (0..n_units)
            .map(|g| {
                let t = (0..stages).find(|&t| values[y[g][t].index()] > 0.5).unwrap_or(stages - 1);
                device_of_stage[t]
            })
            .collect();
        Placement::new(units.unit_of.iter().map(|&g| device[g]).collect())
    });
    finish(problem, &solved, from_ip, warm, stats)
}

/// Values of the integer columns (Y then κ) for a contiguous placement: its devices in a
/// pipeline order (a topological order of the device graph), accelerators' kinds set, the
/// unused stages at the end with the remaining kinds.
fn stage_values(units: &Units, w: &crate::model::Workload, p: &Placement, k: usize, l: usize) -> Option<Vec<f64>> {
    let c = Contraction::new(w);
    let device_of_group: Vec<Device> = c.groups.iter().map(|g| p.assignment[g.nodes[0]]).collect();
    let mut used: Vec<Device> = device_of_group.clone();
    used.sort();
    used.dedup();
    let index = |d: Device| used.iter().position(|&x| x == d).expect("used device");
    let m = used.len();
    let mut succ = vec![Vec::new(); m];
    let mut indegree = vec![0usize; m];
    for &(a, bb) in &units.arcs {
        let (da, db) = (index(device_of_group[a]), index(device_of_group[bb]));
        if da != db && !succ[da].contains(&db) {
            succ[da].push(db);
            indegree[db] += 1;
        }
    }
    let mut ready: Vec<usize> = (0..m).filter(|&d| indegree[d] == 0).collect();
    let mut order = Vec::with_capacity(m);
    while let Some(d) = ready.pop() {
        order.push(d);
        for &e in &succ[d] {
            indegree[e] -= 1;
            if indegree[e] == 0 {
                ready.push(e);
            }
        }
    }
    if order.len() != m {
        return None;
    }
    let stages = k + l;
    let mut stage_of_device = vec![0; m];
    let mut kinds = vec![0.0; stages];
    let mut accs = 0;
    for (t, &d) in order.iter().enumerate() {
        stage_of_device[d] = t;
        if used[d].is_accelerator() {
            kinds[t] = 1.0;
            accs += 1;
        }
    }
    for kind in kinds.iter_mut().skip(m) {
        if accs < k {
            *kind = 1.0;
            accs += 1;
        }
    }
    let mut values = Vec::with_capacity(units.len() * stages + stages);
    for g in 0..units.len() {
        let s = stage_of_device[index(device_of_group[g])];
        values.extend((0..stages).map(|t| f64::from(t >= s)));
    }
    values.extend(kinds);
    Some(values)
}

//! The latency IP: the call model of MODEL.md with up to `q` pieces per accelerator.
//!
//! Each accelerator d has `q` *slots* `(d, j)`; a slot is one call (piece). Units g
//! (classes, or groups when contiguous), nodes v with unit `g(v)`, `U` an upper bound on
//! the optimum (the best plan we hold), `Π = n + kq` (more than the longest chain of
//! items), items being the pieces and the CPU nodes.
//!
//! ```text
//! x[i,d,j] ∈ {0,1}   item i in slot j of accelerator d (0 if its unit is unsupported or
//!                    too large); items are the units when q = 1 and single nodes when
//!                    q ≥ 2 (a cut may put one class's nodes in different pieces)
//! a[g,d] = Σ_j x[i,d,j] for every item i of unit g     colour classes share accelerators
//! Σ_d a[g,d] ≤ 1                          the rest runs on CPUs: cpu_g = 1 − Σ a
//! Σ_g size_g a[g,d] ≤ M                   memory of accelerator d, shared by its pieces
//! D[d,j] ≥ Σ_g fpga_g x[g,d,j] + Σ_u c(u) z[u,d,j]      duration of the call;
//!          z[u,d,j] ≥ cut of T(u) by the slot (units::cut_indicator): u ∈ In ∪ Out
//! F_v ≥ cpu_v · (1 − Σ_{d,j} x[i(v),d,j])  and  F_v ≥ F_u + cpu_v · (1 − Σ_{d,j} x[i(v),d,j])   (u → v)     CPU nodes
//! F_v ≥ S[d,j] + D[d,j] − U (1 − x[i(v),d,j])           a piece's nodes end with it
//! S[d,j] ≥ F_u − U (1 − x[i(v),d,j] + x[i(u),d,j])  (u → v, i(u) ≠ i(v))
//!          a piece starts when its inputs from outside are ready
//! S[d,j+1] ≥ S[d,j] + D[d,j];  S[d,j] + D[d,j] ≤ L;  F_v ≤ L ≤ U;   minimise L
//! F_v ≥ f_cpu(v) (1 − Σ_{d,j} x[i(v),d,j]) + f_acc(v) Σ_{d,j} x[i(v),d,j]
//! F_v ≥ min(f_cpu(v), f_acc(v)),  L ≥ max_v min(f_cpu(v), f_acc(v))   (column bounds)
//!          f_cpu, f_acc: finish-time lower bounds by state, aware of communication and
//!          memory ([`super::latency_bound`], valid for every schedule of the call model)
//! ```
//!
//! **Acyclicity.** Calls must not wait on each other in a cycle (the scorer rejects such a
//! cut as a deadlock). Times alone do not forbid cycles of zero-duration items (the
//! published graphs have many zero-latency nodes), so positions do:
//!
//! ```text
//! π_v, P[d,j] ∈ [0, Π];   |π_v − P[d,j]| ≤ (Π+1)(1 − x[i(v),d,j])
//! π_v ≥ π_u + 1 − (Π+1) · Σ_{d,j} w[i(u),i(v),d,j]   (u → v, i(u) ≠ i(v)),
//!          w[a,b,d,j] ≤ x[a,d,j], w ≤ x[b,d,j]       (same piece ⇒ no +1)
//! π_v ≥ π_u   (u → v, i(u) = i(v));   P[d,j+1] ≥ P[d,j] + 1
//! ```
//!
//! Every cycle of the item graph passes through a piece and so has an arc between two
//! different items, whose +1 makes the positions infeasible. Conversely an acyclic item
//! graph has a topological numbering that satisfies them.
//!
//! **Exactness w.r.t. the scorer.** The IP's plan carries its cut: the nodes in slot
//! `(d, j)` are the piece of rank j on accelerator d ([`Placement::pieces`]), and the
//! scorer evaluates exactly that cut: a piece starts when its outside inputs and the
//! previous non-empty slot have finished, and its duration is the one above. The
//! positions make the item graph acyclic, which is what the scorer requires of a cut. So
//! for every q the IP's optimum is the optimum over (placement, cut with ≤ q pieces), the
//! search space of brute force (the property tests check both).
//!
//! Contiguity (when asked: per-set contiguity and a pipeline order of the devices on the
//! group DAG, [`super::units::device_order`]) and symmetry use the accelerator membership `a[g,d]`
//! (see [`super::units`]); CPU units get one CPU label each, so CPU sets are trivially
//! contiguous (latency ignores maxCPUs).

use std::collections::{HashMap, HashSet};

use super::{latency_bound, latency_runs};
use super::units::{contiguity, cut_indicator, device_order, symmetry, Units};
use super::{candidate, finish, run, Builder, Candidate, Var};
use crate::model::{Device, Placement};
use crate::solve::baselines::greedy::Greedy;
use crate::solve::{dp, Method, Outcome, Problem, SolveError, Stats};

/// Solves the latency IP with at most `q` pieces per accelerator.
pub fn solve(problem: &Problem, q: usize) -> Result<Outcome, SolveError> {
    solve_holding(problem, q, None)
}

/// The IP, given the held plans of the caller (`None`: build them here). The time limit
/// covers building them: HiGHS gets what is left.
fn solve_holding(problem: &Problem, q: usize, given: Option<&[Placement]>) -> Result<Outcome, SolveError> {
    let started = std::time::Instant::now();
    let w = problem.workload;
    let n = w.len();
    let units = Units::new(w, problem.contiguous);
    let n_units = units.len();
    let devices = w.devices();
    let (k, memory) = (devices.accelerators, devices.memory_per_accelerator_bytes);
    let cpu_label = |g: usize| Device::Cpu(if problem.contiguous { g } else { 0 });
    let mut stats = Stats { groups: Some(n_units), ..Stats::default() };

    // Plans we already hold: all on CPU, as much as fits on one accelerator, runs of the
    // topological order, the runs DP (latency_runs), the DP plan, the greedy baseline.
    let mut held: Vec<Candidate> = Vec::new();
    match given {
        Some(plans) => held.extend(plans.iter().filter_map(|p| candidate(problem, p.clone(), "held by the caller"))),
        None => held_plans(problem, &units, &mut held, &mut stats),
    }
    if q >= 2 {
        // The one-piece IP is smaller and often finds the plan to beat; its plan is a
        // valid plan with q pieces and a warm start below. It gets half the time left.
        let mut one = problem.clone();
        one.objective = crate::solve::Objective::Latency { pieces: 1 };
        one.limits.time_limit_s = super::remaining(problem, started).limits.time_limit_s.map(|t| t / 2.0);
        let plans: Vec<Placement> = held.iter().map(|c| c.placement.clone()).collect();
        let o = solve_holding(&one, 1, Some(&plans))?;
        stats.notes.push(format!("one-piece IP: {} ({:?})", o.objective, o.status));
        held.extend(o.placement.and_then(|p| candidate(problem, p, "one-piece ip")));
    }
    for c in &held {
        stats.notes.push(format!("held plan ({}) scores {}", c.source, c.score));
    }
    stats.notes.push(format!("held plans after {:.2} s", started.elapsed().as_secs_f64()));
    let warm = held.into_iter().min_by(|a, b| a.score.total_cmp(&b.score));
    let upper = warm.as_ref().map_or_else(
        || units.cpu.iter().sum::<f64>() + (0..n).map(|v| w.out_cost(v)).sum::<f64>() * 2.0 + units.fpga.iter().sum::<f64>(),
        |c| c.score,
    );
    let big = upper * (1.0 + 1e-6) + 1e-6;
    let positions = (n + k * q) as f64;
    let big_pos = positions + 1.0;

    // Slot items: the units when q = 1; single nodes when q ≥ 2, since a cut may put the
    // nodes of one colour class in different pieces of their accelerator.
    let items = if q == 1 { units.clone() } else { Units::singletons(w) };
    let n_items = items.len();
    let item_fits: Vec<bool> =
        (0..n_items).map(|i| units.fits_accelerator(units.unit_of[items.nodes[i][0]], memory)).collect();

    let mut b = Builder::new();
    // x[d][j][i]
    let x: Vec<Vec<Vec<Var>>> = (0..k)
        .map(|_| (0..q).map(|_| (0..n_items).map(|i| b.binary(0.0, item_fits[i])).collect()).collect())
        .collect();
    // Finish-time lower bounds by state, communication- and memory-aware
    // (super::latency_bound): column bounds F_v ≥ min_s f_s(v) and L ≥ max_v min_s f_s(v)
    // here, rows F_v ≥ f_cpu(v)·(1 − a_v) + f_acc(v)·a_v below.
    let may_accelerate: Vec<bool> = (0..n).map(|v| k > 0 && item_fits[items.unit_of[v]]).collect();
    let head = latency_bound::finish_bounds(w, &may_accelerate);
    let critical = latency_bound::latency_lower_bound(&head);
    stats.notes.push(format!("finish-time lower bound {critical}"));
    let latency = b.continuous(1.0, critical.min(big), big);
    let finish_t: Vec<Var> = (0..n).map(|v| b.continuous(0.0, head[v].min().min(big), big)).collect();
    let pos: Vec<Var> = (0..n).map(|_| b.continuous(0.0, 0.0, positions)).collect();
    let start: Vec<Vec<Var>> = (0..k).map(|_| (0..q).map(|_| b.continuous(0.0, 0.0, big)).collect()).collect();
    let duration: Vec<Vec<Var>> = (0..k).map(|_| (0..q).map(|_| b.continuous(0.0, 0.0, big)).collect()).collect();
    let slot_pos: Vec<Vec<Var>> = (0..k).map(|_| (0..q).map(|_| b.continuous(0.0, 0.0, positions)).collect()).collect();
    let on_acc = |i: usize| -> Vec<(Var, f64)> { x.iter().flatten().map(|slot| (slot[i], 1.0)).collect() };

    // Accelerator membership of the units: member[d][g] = Σ_j x[d][j][i] for every item i of g.
    let member: Vec<Vec<Var>> = if q == 1 {
        x.iter().map(|slots| slots[0].clone()).collect()
    } else {
        x.iter()
            .map(|slots| {
                (0..n_units)
                    .map(|g| {
                        let a = b.continuous(0.0, 0.0, if units.fits_accelerator(g, memory) { 1.0 } else { 0.0 });
                        for &v in &units.nodes[g] {
                            let mut terms: Vec<(Var, f64)> = slots.iter().map(|slot| (slot[v], 1.0)).collect();
                            terms.push((a, -1.0));
                            b.eq(&terms, 0.0);
                        }
                        a
                    })
                    .collect()
            })
            .collect()
    };
    for g in 0..n_units {
        if units.fits_accelerator(g, memory) {
            let terms: Vec<(Var, f64)> = member.iter().map(|row| (row[g], 1.0)).collect();
            b.le(&terms, 1.0);
        }
    }
    if units.size.iter().any(|&s| s > 0.0) && units.size.iter().sum::<f64>() > memory {
        for row in &member {
            let terms: Vec<(Var, f64)> =
                (0..n_units).filter(|&g| units.size[g] > 0.0).map(|g| (row[g], units.size[g])).collect();
            b.le(&terms, memory);
        }
    }
    // Durations.
    let hyperedges = items.hyperedges(w, false);
    for d in 0..k {
        for j in 0..q {
            let mut terms: Vec<(Var, f64)> =
                (0..n_items).filter(|&i| items.fpga[i] != 0.0).map(|i| (x[d][j][i], items.fpga[i])).collect();
            for e in &hyperedges {
                let members: Vec<Var> = e.units.iter().map(|&i| x[d][j][i]).collect();
                terms.push((cut_indicator(&mut b, &members), e.cost));
            }
            terms.push((duration[d][j], -1.0));
            b.le(&terms, 0.0);
            // End within the latency; slots one after another.
            b.le(&[(start[d][j], 1.0), (duration[d][j], 1.0), (latency, -1.0)], 0.0);
            if j + 1 < q {
                b.ge(&[(start[d][j + 1], 1.0), (start[d][j], -1.0), (duration[d][j], -1.0)], 0.0);
                b.ge(&[(slot_pos[d][j + 1], 1.0), (slot_pos[d][j], -1.0)], 1.0);
            }
        }
    }
    // Node times and positions.
    let mut same_piece: HashMap<(usize, usize), Vec<(Var, f64)>> = HashMap::new();
    let mut start_rows: HashSet<(usize, usize)> = HashSet::new();
    for v in 0..n {
        let g = items.unit_of[v];
        let cpu_v = w.node(v).cpu_latency;
        b.le(&[(finish_t[v], 1.0), (latency, -1.0)], 0.0);
        // F_v ≥ f_cpu(v) (1 − Σx) + f_acc(v) Σx   (latency_bound; Σx = a_v ∈ {0, 1})
        if may_accelerate[v] {
            let (f_cpu, f_acc) = (head[v].cpu.min(big), head[v].accelerator.min(big));
            if f_acc != f_cpu {
                let mut terms = vec![(finish_t[v], 1.0)];
                terms.extend(on_acc(g).into_iter().map(|(var, _)| (var, f_cpu - f_acc)));
                b.ge(&terms, f_cpu);
            }
        }
        // F_v ≥ cpu_v (1 − Σx)
        if cpu_v != 0.0 {
            let mut terms = vec![(finish_t[v], 1.0)];
            terms.extend(on_acc(g).into_iter().map(|(var, _)| (var, cpu_v)));
            b.ge(&terms, cpu_v);
        }
        for &u in w.predecessors(v) {
            let mut terms = vec![(finish_t[v], 1.0), (finish_t[u], -1.0)];
            if cpu_v != 0.0 {
                terms.extend(on_acc(g).into_iter().map(|(var, _)| (var, cpu_v)));
            }
            b.ge(&terms, cpu_v);
            let gu = items.unit_of[u];
            if gu == g {
                b.ge(&[(pos[v], 1.0), (pos[u], -1.0)], 0.0);
                continue;
            }
            // π_v ≥ π_u + 1 − (Π+1) Σ w
            let same = same_piece.entry((gu, g)).or_insert_with(|| {
                let mut list = Vec::new();
                if item_fits[gu] && item_fits[g] {
                    for slots in &x {
                        for slot in slots {
                            let wv = b.continuous(0.0, 0.0, 1.0);
                            b.le(&[(wv, 1.0), (slot[gu], -1.0)], 0.0);
                            b.le(&[(wv, 1.0), (slot[g], -1.0)], 0.0);
                            list.push((wv, big_pos));
                        }
                    }
                }
                list
            });
            let mut terms = vec![(pos[v], 1.0), (pos[u], -1.0)];
            terms.extend(same.iter().copied());
            b.ge(&terms, 1.0);
            // S[d,j] ≥ F_u − U (1 − x[g] + x[gu])
            if item_fits[g] && start_rows.insert((u, g)) {
                for d in 0..k {
                    for j in 0..q {
                        b.ge(
                            &[(start[d][j], 1.0), (finish_t[u], -1.0), (x[d][j][g], -big), (x[d][j][gu], big)],
                            -big,
                        );
                    }
                }
            }
        }
        if item_fits[g] {
            for d in 0..k {
                for j in 0..q {
                    let xv = x[d][j][g];
                    // F_v ≥ S + D − U (1 − x)
                    b.ge(&[(finish_t[v], 1.0), (start[d][j], -1.0), (duration[d][j], -1.0), (xv, -big)], -big);
                    // |π_v − P| ≤ (Π+1)(1 − x)
                    b.le(&[(pos[v], 1.0), (slot_pos[d][j], -1.0), (xv, big_pos)], big_pos);
                    b.le(&[(slot_pos[d][j], 1.0), (pos[v], -1.0), (xv, big_pos)], big_pos);
                }
            }
        }
    }
    if problem.contiguous {
        for row in &member {
            contiguity(&mut b, row, &units.arcs);
        }
        device_order(&mut b, &member, &units.arcs, n_units);
    }
    symmetry(&mut b, &member);

    // Warm start from the best held plan and its cut (held plans carry explicit pieces).
    let warm_values = warm.as_ref().and_then(|c| {
        let ranks = c.placement.pieces.as_ref()?;
        let dev = super::units::canonical_devices(&units, &c.placement.assignment)?;
        let mut values = Vec::with_capacity(b.integer_columns.len());
        for d in 0..k {
            for j in 0..q {
                values.extend((0..n_items).map(|i| {
                    let v = items.nodes[i][0];
                    f64::from(dev[units.unit_of[v]] == Device::Accelerator(d) && ranks[v] == j)
                }));
            }
        }
        Some(values)
    });
    stats.notes.push(format!(
        "{} units, {} slots, {} hyperedges, {} columns, {} rows",
        n_units,
        k * q,
        hyperedges.len(),
        b.columns(),
        b.rows
    ));

    stats.notes.push(format!("model built after {:.2} s", started.elapsed().as_secs_f64()));
    let mut solved = run(b, &super::remaining(problem, started), warm_values.as_deref())?;
    // The finish-time bound holds whatever HiGHS reached (it may stop before its root LP).
    solved.bound = solved.bound.max(critical);
    let from_ip = solved.columns.as_ref().map(|values| {
        let slot_of = |i: usize| {
            (0..k).flat_map(|d| (0..q).map(move |j| (d, j))).find(|&(d, j)| values[x[d][j][i].index()] > 0.5)
        };
        let slots: Vec<Option<(usize, usize)>> = (0..n_items).map(slot_of).collect();
        let device: Vec<Device> = (0..n_units)
            .map(|g| slots[items.unit_of[units.nodes[g][0]]].map_or(cpu_label(g), |(d, _)| Device::Accelerator(d)))
            .collect();
        let ranks: Vec<usize> = (0..n).map(|v| slots[items.unit_of[v]].map_or(0, |(_, j)| j)).collect();
        Placement::new(units.unit_of.iter().map(|&g| device[g]).collect()).with_pieces(ranks)
    });
    finish(problem, &solved, from_ip, warm, stats)
}

/// Plans we hold before the IP starts: all on CPU, as much as fits on one accelerator, runs
/// of the topological order, the runs DP (latency_runs), the DP plan, the greedy baseline.
fn held_plans(problem: &Problem, units: &Units, held: &mut Vec<Candidate>, stats: &mut Stats) {
    let w = problem.workload;
    let n = w.len();
    let n_units = units.len();
    let devices = w.devices();
    let (k, memory) = (devices.accelerators, devices.memory_per_accelerator_bytes);
    let cpu_label = |g: usize| Device::Cpu(if problem.contiguous { g } else { 0 });
    let all_cpu = Placement::new(units.unit_of.iter().map(|&g| cpu_label(g)).collect());
    held.extend(candidate(problem, all_cpu, "all on CPU"));
    if k > 0 {
        let mut used = 0.0;
        let device: Vec<Device> = (0..n_units)
            .map(|g| {
                if units.fits_accelerator(g, memory - used) {
                    used += units.size[g];
                    Device::Accelerator(0)
                } else {
                    cpu_label(g)
                }
            })
            .collect();
        held.extend(candidate(problem, Placement::new(units.unit_of.iter().map(|&g| device[g]).collect()), "one accelerator"));
    }
    if k > 0 {
        // Runs of the topological order: fill accelerator 0 with units in order of their
        // first node until the next unit does not fit, then accelerator 1, …; units that
        // fit nowhere go to CPUs and close the current run. Arcs only go forward, so the
        // calls form no cycle (unless colour classes span runs; the scorer checks).
        let position: Vec<usize> = {
            let mut p = vec![0; n];
            for (t, &v) in w.topological_order().iter().enumerate() {
                p[v] = t;
            }
            p
        };
        let mut order: Vec<usize> = (0..n_units).collect();
        order.sort_by_key(|&g| units.nodes[g].iter().map(|&v| position[v]).min());
        let (mut d, mut used) = (0, 0.0);
        let mut device = vec![Device::Cpu(0); n_units];
        for g in order {
            if !units.fits_accelerator(g, memory) {
                device[g] = cpu_label(g);
                // A later unit of this run could depend on this CPU unit: close the run.
                if used > 0.0 || device.contains(&Device::Accelerator(d)) {
                    d += 1;
                    used = 0.0;
                }
                continue;
            }
            if used + units.size[g] > memory {
                d += 1;
                used = 0.0;
            }
            if d < k {
                used += units.size[g];
                device[g] = Device::Accelerator(d);
            } else {
                device[g] = cpu_label(g);
            }
        }
        held.extend(candidate(problem, Placement::new(units.unit_of.iter().map(|&g| device[g]).collect()), "topological runs"));
        // The best cut of a topological order into runs, by DP (super::latency_runs).
        for (p, source) in latency_runs::plans(w) {
            held.extend(candidate(problem, p, source));
        }
    }
    match dp::solve(w, &problem.limits) {
        Ok(o) => held.extend(o.placement.and_then(|p| candidate(problem, p, "dp"))),
        Err(e) => stats.notes.push(format!("no DP plan: {e}")),
    }
    // The latency baseline, so the IP is never worse than what a user would try first.
    match Method::solve(&Greedy, problem) {
        Ok(o) => held.extend(o.placement.and_then(|p| candidate(problem, p, "greedy"))),
        Err(e) => stats.notes.push(format!("no greedy plan: {e}")),
    }
}

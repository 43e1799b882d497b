//! The latency IP: the call model of MODEL.md with up to `q` pieces per accelerator.
//!
//! Each accelerator d has `q` *slots* `(d, j)`; a slot is one call (piece). Units g
//! (classes, or groups when contiguous), nodes v with unit `g(v)`. *Items* i are what the
//! slots hold: the units when q = 1, single nodes when q ≥ 2 (a cut may put one class's
//! nodes in different pieces); `i(v)` is v's item and `a_v = Σ_{d,j} x[i(v),d,j]` says v
//! runs on an accelerator. `U` is an upper bound on the optimum (the best plan we hold),
//! `Π = n + kq` (more than the longest chain of items).
//!
//! The constraint families, in the order [`solve`] adds them, each by the function named
//! (methods of [`CallModel`]):
//!
//! ```text
//! variables          x[i,d,j] ∈ {0,1}: item i in slot j of accelerator d (0 if its unit is
//!                    unsupported or too large); L, F_v, S[d,j], D[d,j] ∈ [0, U];
//!                    π_v, P[d,j] ∈ [0, Π];  F_v ≥ min(f_cpu(v), f_acc(v)),
//!                    L ≥ max_v min(f_cpu(v), f_acc(v))   (column bounds; f below)
//! add_membership     a[g,d] = Σ_j x[i,d,j] for every item i of unit g (q ≥ 2; for q = 1
//!                    a[g,d] is x[g,d,0])                colour classes share accelerators
//! add_one_accelerator  Σ_d a[g,d] ≤ 1                  the rest runs on CPUs
//! add_memory         Σ_g size_g a[g,d] ≤ M              memory of d, shared by its pieces
//! for every slot (d, j):
//!   add_duration     D[d,j] ≥ Σ_i fpga_i x[i,d,j] + Σ_u c(u) z[u,d,j],
//!                    z[u,d,j] ≥ cut of T(u) by the slot (units::cut_indicator): u ∈ In ∪ Out
//!   add_slot_end     S[d,j] + D[d,j] ≤ L
//!   add_slot_order   S[d,j+1] ≥ S[d,j] + D[d,j];   P[d,j+1] ≥ P[d,j] + 1
//! for every node v:
//!   add_node_end     F_v ≤ L                            (minimise L)
//!   add_finish_bound F_v ≥ f_cpu(v) (1 − a_v) + f_acc(v) a_v
//!   add_cpu_finish   F_v ≥ cpu_v (1 − a_v)
//!   for every arc u → v:
//!     add_cpu_precedence  F_v ≥ F_u + cpu_v (1 − a_v)
//!     add_position_order  π_v ≥ π_u  if i(u) = i(v), else
//!                         π_v ≥ π_u + 1 − (Π+1) Σ_{d,j} w[i(u),i(v),d,j],
//!                         w[a,b,d,j] ≤ x[a,d,j],  w[a,b,d,j] ≤ x[b,d,j]   (same piece ⇒ no +1)
//!     add_inputs_ready    S[d,j] ≥ F_u − U (1 − x[i(v),d,j] + x[i(u),d,j])   (i(u) ≠ i(v))
//!                         a piece starts when its inputs from outside are ready
//!   add_in_slot      F_v ≥ S[d,j] + D[d,j] − U (1 − x[i(v),d,j])   a piece's nodes end with it
//!                    |π_v − P[d,j]| ≤ (Π+1)(1 − x[i(v),d,j])
//! add_contiguity     (when asked) units::contiguity and units::device_order on a[·,d]
//! add_symmetry       units::symmetry on a[·,d]
//! ```
//!
//! `f_cpu`, `f_acc`: finish-time lower bounds by state, aware of communication and memory
//! ([`crate::solve::bounds::latency`], valid for every schedule of the call model).
//!
//! **Acyclicity.** Calls must not wait on each other in a cycle (the scorer rejects such a
//! cut as a deadlock). Times alone do not forbid cycles of zero-duration items (the
//! published graphs have many zero-latency nodes), so the positions π, P do: every cycle of
//! the item graph passes through a piece and so has an arc between two different items,
//! whose +1 makes the positions infeasible. Conversely an acyclic item graph has a
//! topological numbering that satisfies them.
//!
//! **Exactness w.r.t. the scorer.** The IP's plan carries its cut: the nodes in slot
//! `(d, j)` are the piece of rank j on accelerator d ([`Placement::pieces`]), and the
//! scorer evaluates exactly that cut: a piece starts when its outside inputs and the
//! previous non-empty slot have finished, and its duration is the one above. The
//! positions make the item graph acyclic, which is what the scorer requires of a cut. So
//! for every q the IP's optimum is the optimum over (placement, cut with ≤ q pieces), the
//! search space of brute force (the property tests check both).
//!
//! Contiguity (per-set contiguity and a pipeline order of the devices on the group DAG,
//! [`super::units::device_order`]) and symmetry use the accelerator membership `a[g,d]`
//! (see [`super::units`]); CPU units get one CPU label each, so CPU sets are trivially
//! contiguous (latency ignores maxCPUs).
//!
//! Held plans ([`held_plans`]: all on CPU, one accelerator, topological runs, the runs DP
//! of [`super::latency_runs`], the DP plan, the greedy baseline; for q ≥ 2 the one-piece
//! IP's plan) bound U; the best is the warm start ([`CallModel::warm_values`], with its
//! cut). Extraction ([`CallModel::placement`]): an item goes to the slot whose binary is
//! > 0.5, its rank is the slot's.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use super::finish;
use super::highs::{run, Builder, Var};
use super::latency_runs;
use super::units::{
    canonical_devices, contiguity, cut_indicator, device_order, memory_binds, symmetry,
};
use crate::model::grouping::{Grouping, Hyperedge};
use crate::model::{Device, Placement, Workload};
use crate::solve::baselines::greedy::Greedy;
use crate::solve::bounds::latency::{self as latency_bound, FinishBound};
use crate::solve::budget::Budget;
use crate::solve::candidate::{candidate, Candidate};
use crate::solve::{dp, Method, Objective, Outcome, Problem, SolveError, Stats};

/// Solves the latency IP with at most `q` pieces per accelerator.
pub fn solve(problem: &Problem, q: usize) -> Result<Outcome, SolveError> {
    solve_holding(problem, q, None)
}

/// The IP, given the held plans of the caller (`None`: build them here). The time limit
/// covers building them: HiGHS gets what is left.
fn solve_holding(
    problem: &Problem,
    q: usize,
    given: Option<&[Placement]>,
) -> Result<Outcome, SolveError> {
    let started = Instant::now();
    let w = problem.workload;
    let (units, arcs) = Grouping::units(w, problem.contiguous);
    let mut stats = Stats {
        groups: Some(units.len()),
        ..Stats::default()
    };
    let held = held(problem, q, given, &units, &mut stats, started)?;
    let warm = held.into_iter().min_by(|a, b| a.score.total_cmp(&b.score));
    let upper = warm
        .as_ref()
        .map_or_else(|| trivial_upper_bound(w, &units), |c| c.score);

    let items = if q == 1 {
        units.clone()
    } else {
        Grouping::singletons(w)
    };
    let budget = super::highs::remaining(problem, started).limits.budget();
    let mut b = Builder::within(budget);
    // x (k·q per item), L, F and π per node, S, D and P per slot, a[g,d] when q ≥ 2.
    let k = w.devices().accelerators;
    let columns = k * q * items.len()
        + 1
        + 2 * w.len()
        + 3 * k * q
        + if q >= 2 { k * units.len() } else { 0 };
    if !b.reserve_columns(columns) {
        let mut solved = run(b, &super::highs::remaining(problem, started), None)?;
        let (_, may_accelerate) = accelerator_fits(w, &units, &items);
        // With no time left this is the grid-free bound (linear; latency_bound).
        let head = latency_bound::finish_bounds_within(w, &may_accelerate, &budget);
        solved.bound = solved.bound.max(latency_bound::latency_lower_bound(&head));
        return finish(problem, &solved, None, warm, stats, started);
    }
    let model = build(&mut b, problem, q, &units, &items, upper, &arcs);
    stats
        .notes
        .push(format!("finish-time lower bound {}", model.critical));
    let warm_values = warm.as_ref().and_then(|c| model.warm_values(&c.placement));
    stats.notes.push(format!(
        "{} units, {} slots, {} columns, {} rows",
        units.len(),
        model.slots().count(),
        b.columns(),
        b.rows
    ));
    stats.notes.push(format!(
        "model built after {:.2} s",
        started.elapsed().as_secs_f64()
    ));
    let mut solved = run(
        b,
        &super::highs::remaining(problem, started),
        warm_values.as_deref(),
    )?;
    // The finish-time bound holds whatever HiGHS reached (it may stop before its root LP).
    solved.bound = solved.bound.max(model.critical);
    let from_ip = solved
        .columns
        .as_ref()
        .map(|values| model.placement(values, problem.contiguous));
    finish(problem, &solved, from_ip, warm, stats, started)
}

/// The call model of the module docs built into `b`, every family in order.
fn build<'a>(
    b: &mut Builder,
    problem: &Problem<'a>,
    q: usize,
    units: &'a Grouping,
    items: &'a Grouping,
    upper: f64,
    arcs: &[(usize, usize)],
) -> CallModel<'a> {
    let w = problem.workload;
    let mut model = CallModel::variables(b, w, q, units, items, upper);
    model.add_membership(b);
    model.add_one_accelerator(b);
    model.add_memory(b);
    let hyperedges = items.hyperedges(w, false);
    for (d, j) in model.slots() {
        if b.stopped().is_some() {
            break;
        }
        model.add_duration(b, d, j, &hyperedges);
        model.add_slot_end(b, d, j);
        model.add_slot_order(b, d, j);
    }
    for v in 0..w.len() {
        if b.stopped().is_some() {
            break;
        }
        model.add_node_end(b, v);
        model.add_finish_bound(b, v);
        model.add_cpu_finish(b, v);
        for &u in w.predecessors(v) {
            model.add_cpu_precedence(b, u, v);
            model.add_position_order(b, u, v);
            model.add_inputs_ready(b, u, v);
        }
        model.add_in_slot(b, v);
    }
    if problem.contiguous {
        model.add_contiguity(b, arcs);
    }
    model.add_symmetry(b);
    model
}

/// The plans held before the model is built: the caller's, or [`held_plans`]; for q ≥ 2
/// also the one-piece IP's plan (a valid plan with q pieces), which gets half the time
/// left.
fn held(
    problem: &Problem,
    q: usize,
    given: Option<&[Placement]>,
    units: &Grouping,
    stats: &mut Stats,
    started: Instant,
) -> Result<Vec<Candidate>, SolveError> {
    let mut held: Vec<Candidate> = Vec::new();
    match given {
        Some(plans) => held.extend(
            plans
                .iter()
                .filter_map(|p| candidate(problem, p.clone(), "held by the caller")),
        ),
        None => held_plans(
            problem,
            units,
            &mut held,
            stats,
            &super::highs::remaining(problem, started).limits.budget(),
        ),
    }
    if q >= 2 {
        // The one-piece IP is smaller and often finds the plan to beat.
        let mut one = problem.clone();
        one.objective = Objective::Latency { pieces: 1 };
        one.limits.time_limit_s = super::highs::remaining(problem, started)
            .limits
            .time_limit_s
            .map(|t| t / 2.0);
        let plans: Vec<Placement> = held.iter().map(|c| c.placement.clone()).collect();
        let o = solve_holding(&one, 1, Some(&plans))?;
        stats
            .notes
            .push(format!("one-piece IP: {} ({:?})", o.objective, o.status));
        held.extend(
            o.placement
                .and_then(|p| candidate(problem, p, "one-piece ip")),
        );
    }
    for c in &held {
        stats
            .notes
            .push(format!("held plan ({}) scores {}", c.source, c.score));
    }
    stats.notes.push(format!(
        "held plans after {:.2} s",
        started.elapsed().as_secs_f64()
    ));
    Ok(held)
}

/// Whether each item's unit fits an accelerator, and whether each node may run on one.
fn accelerator_fits(w: &Workload, units: &Grouping, items: &Grouping) -> (Vec<bool>, Vec<bool>) {
    let memory = w.devices().memory_per_accelerator_bytes;
    let item_fits: Vec<bool> = (items.groups.iter())
        .map(|item| units[units.group_of[item.nodes[0]]].fits_accelerator(memory))
        .collect();
    let may_accelerate: Vec<bool> = (0..w.len())
        .map(|v| w.devices().accelerators > 0 && item_fits[items.group_of[v]])
        .collect();
    (item_fits, may_accelerate)
}

/// An upper bound on the latency of any plan when we hold none: all compute on both kinds
/// and every transfer twice.
fn trivial_upper_bound(w: &Workload, units: &Grouping) -> f64 {
    units.groups.iter().map(|g| g.cpu_latency).sum::<f64>()
        + (0..w.len()).map(|v| w.out_cost(v)).sum::<f64>() * 2.0
        + units.groups.iter().map(|g| g.fpga_latency).sum::<f64>()
}

/// The call model's variables (module docs), with the caches of its lazily built rows.
struct CallModel<'a> {
    w: &'a Workload,
    units: &'a Grouping,
    items: &'a Grouping,
    item_fits: Vec<bool>,
    /// Whether node v may run on an accelerator (its item fits, k ≥ 1).
    may_accelerate: Vec<bool>,
    /// `f_cpu(v)`, `f_acc(v)` ([`latency_bound::finish_bounds`]) and the bound on L.
    head: Vec<FinishBound>,
    critical: f64,
    /// U (with a little slack) and Π + 1: the big-Ms of times and positions.
    big: f64,
    big_pos: f64,
    /// `x[d][j][i]`.
    x: Vec<Vec<Vec<Var>>>,
    latency: Var,
    finish: Vec<Var>,
    pos: Vec<Var>,
    /// `start[d][j]`, `duration[d][j]`, `slot_pos[d][j]`.
    start: Vec<Vec<Var>>,
    duration: Vec<Vec<Var>>,
    slot_pos: Vec<Vec<Var>>,
    /// `member[d][g]` = a[g,d].
    member: Vec<Vec<Var>>,
    /// The `(w, Π+1)` terms of each pair of items, built on first use.
    same_piece: HashMap<(usize, usize), Vec<(Var, f64)>>,
    /// (u, item) pairs whose start rows exist.
    start_rows: HashSet<(usize, usize)>,
}

impl<'a> CallModel<'a> {
    /// The columns of the module docs' first line (and `a[g,d]` when q ≥ 2) for items
    /// `items` of `units` in `q` slots per accelerator, with `upper` = U.
    fn variables(
        b: &mut Builder,
        w: &'a Workload,
        q: usize,
        units: &'a Grouping,
        items: &'a Grouping,
        upper: f64,
    ) -> Self {
        let memory = w.devices().memory_per_accelerator_bytes;
        let (item_fits, may_accelerate) = accelerator_fits(w, units, items);
        let head = latency_bound::finish_bounds_within(w, &may_accelerate, b.budget());
        let critical = latency_bound::latency_lower_bound(&head);
        let (n, k) = (w.len(), w.devices().accelerators);
        let big = upper * (1.0 + 1e-6) + 1e-6;
        let positions = (n + k * q) as f64;
        let x: Vec<Vec<Vec<Var>>> = (0..k)
            .map(|_| {
                (0..q)
                    .map(|_| item_fits.iter().map(|&fits| b.binary(0.0, fits)).collect())
                    .collect()
            })
            .collect();
        let latency = b.continuous(1.0, critical.min(big), big);
        let finish = head
            .iter()
            .map(|h| b.continuous(0.0, h.min().min(big), big))
            .collect();
        let pos = (0..n).map(|_| b.continuous(0.0, 0.0, positions)).collect();
        let mut per_slot = |hi: f64| -> Vec<Vec<Var>> {
            (0..k)
                .map(|_| (0..q).map(|_| b.continuous(0.0, 0.0, hi)).collect())
                .collect()
        };
        let (start, duration, slot_pos) = (per_slot(big), per_slot(big), per_slot(positions));
        let member = if q == 1 {
            x.iter().map(|slots| slots[0].clone()).collect()
        } else {
            let bound = |g: usize| {
                if units[g].fits_accelerator(memory) {
                    1.0
                } else {
                    0.0
                }
            };
            (0..k)
                .map(|_| {
                    (0..units.len())
                        .map(|g| b.continuous(0.0, 0.0, bound(g)))
                        .collect()
                })
                .collect()
        };
        CallModel {
            w,
            units,
            items,
            item_fits,
            may_accelerate,
            head,
            critical,
            big,
            big_pos: positions + 1.0,
            x,
            latency,
            finish,
            pos,
            start,
            duration,
            slot_pos,
            member,
            same_piece: HashMap::new(),
            start_rows: HashSet::new(),
        }
    }

    /// The slots `(d, j)`, accelerator-major.
    fn slots(&self) -> impl Iterator<Item = (usize, usize)> {
        let q = self.x.first().map_or(0, |slots| slots.len());
        (0..self.x.len()).flat_map(move |d| (0..q).map(move |j| (d, j)))
    }

    /// The terms `x[i,d,j]` over all slots, with coefficient `c`: `c · a_v` for v in item i.
    fn on_accelerator(&self, i: usize, c: f64) -> impl Iterator<Item = (Var, f64)> + '_ {
        self.x.iter().flatten().map(move |slot| (slot[i], c))
    }

    fn memory(&self) -> f64 {
        self.w.devices().memory_per_accelerator_bytes
    }

    /// `a[g,d] = Σ_j x[i,d,j]` for every item i (node) of unit g, when q ≥ 2.
    fn add_membership(&self, b: &mut Builder) {
        if self.x.first().is_none_or(|slots| slots.len() < 2) {
            return;
        }
        for (slots, row) in self.x.iter().zip(&self.member) {
            for (unit, &a) in self.units.groups.iter().zip(row) {
                for &v in &unit.nodes {
                    let mut terms: Vec<(Var, f64)> =
                        slots.iter().map(|slot| (slot[v], 1.0)).collect();
                    terms.push((a, -1.0));
                    b.eq(&terms, 0.0);
                }
            }
        }
    }

    /// `Σ_d a[g,d] ≤ 1` for every unit g that fits an accelerator.
    fn add_one_accelerator(&self, b: &mut Builder) {
        for (g, unit) in self.units.groups.iter().enumerate() {
            if unit.fits_accelerator(self.memory()) {
                let terms: Vec<(Var, f64)> = self.member.iter().map(|row| (row[g], 1.0)).collect();
                b.le(&terms, 1.0);
            }
        }
    }

    /// `Σ_g size_g a[g,d] ≤ M` for every accelerator d (when it can bind).
    fn add_memory(&self, b: &mut Builder) {
        if !memory_binds(self.units, self.memory()) {
            return;
        }
        for row in &self.member {
            let terms: Vec<(Var, f64)> = (self.units.groups.iter().enumerate())
                .filter(|(_, unit)| unit.size_bytes > 0.0)
                .map(|(g, unit)| (row[g], unit.size_bytes))
                .collect();
            b.le(&terms, self.memory());
        }
    }

    /// `D[d,j] ≥ Σ_i fpga_i x[i,d,j] + Σ_u c(u) z[u,d,j]`, with `z[u,d,j] ≥` the cut of
    /// `T(u)` by the slot.
    fn add_duration(&self, b: &mut Builder, d: usize, j: usize, hyperedges: &[Hyperedge]) {
        let slot = &self.x[d][j];
        let mut terms: Vec<(Var, f64)> = (self.items.groups.iter().zip(slot))
            .filter(|(item, _)| item.fpga_latency != 0.0)
            .map(|(item, &x)| (x, item.fpga_latency))
            .collect();
        for e in hyperedges {
            let members: Vec<Var> = e.groups.iter().map(|&i| slot[i]).collect();
            terms.push((cut_indicator(b, &members), e.cost));
        }
        terms.push((self.duration[d][j], -1.0));
        b.le(&terms, 0.0);
    }

    /// `S[d,j] + D[d,j] ≤ L`.
    fn add_slot_end(&self, b: &mut Builder, d: usize, j: usize) {
        b.le(
            &[
                (self.start[d][j], 1.0),
                (self.duration[d][j], 1.0),
                (self.latency, -1.0),
            ],
            0.0,
        );
    }

    /// `S[d,j+1] ≥ S[d,j] + D[d,j]` and `P[d,j+1] ≥ P[d,j] + 1` (slots one after another).
    fn add_slot_order(&self, b: &mut Builder, d: usize, j: usize) {
        if j + 1 < self.start[d].len() {
            b.ge(
                &[
                    (self.start[d][j + 1], 1.0),
                    (self.start[d][j], -1.0),
                    (self.duration[d][j], -1.0),
                ],
                0.0,
            );
            b.ge(
                &[(self.slot_pos[d][j + 1], 1.0), (self.slot_pos[d][j], -1.0)],
                1.0,
            );
        }
    }

    /// `F_v ≤ L`.
    fn add_node_end(&self, b: &mut Builder, v: usize) {
        b.le(&[(self.finish[v], 1.0), (self.latency, -1.0)], 0.0);
    }

    /// `F_v ≥ f_cpu(v) (1 − a_v) + f_acc(v) a_v` (when v may run on an accelerator and the
    /// two bounds differ; `a_v ∈ {0, 1}`).
    fn add_finish_bound(&self, b: &mut Builder, v: usize) {
        let (f_cpu, f_acc) = (
            self.head[v].cpu.min(self.big),
            self.head[v].accelerator.min(self.big),
        );
        if self.may_accelerate[v] && f_acc != f_cpu {
            let mut terms = vec![(self.finish[v], 1.0)];
            terms.extend(self.on_accelerator(self.items.group_of[v], f_cpu - f_acc));
            b.ge(&terms, f_cpu);
        }
    }

    /// `F_v ≥ cpu_v (1 − a_v)`.
    fn add_cpu_finish(&self, b: &mut Builder, v: usize) {
        let cpu = self.w.node(v).cpu_latency;
        if cpu != 0.0 {
            let mut terms = vec![(self.finish[v], 1.0)];
            terms.extend(self.on_accelerator(self.items.group_of[v], cpu));
            b.ge(&terms, cpu);
        }
    }

    /// `F_v ≥ F_u + cpu_v (1 − a_v)`.
    fn add_cpu_precedence(&self, b: &mut Builder, u: usize, v: usize) {
        let cpu = self.w.node(v).cpu_latency;
        let mut terms = vec![(self.finish[v], 1.0), (self.finish[u], -1.0)];
        if cpu != 0.0 {
            terms.extend(self.on_accelerator(self.items.group_of[v], cpu));
        }
        b.ge(&terms, cpu);
    }

    /// `π_v ≥ π_u` if u and v are one item, else `π_v ≥ π_u + 1 − (Π+1) Σ w[i(u),i(v),d,j]`
    /// with `w ≤ x[i(u),d,j]`, `w ≤ x[i(v),d,j]` (built once per pair of items).
    fn add_position_order(&mut self, b: &mut Builder, u: usize, v: usize) {
        let (iu, iv) = (self.items.group_of[u], self.items.group_of[v]);
        if iu == iv {
            b.ge(&[(self.pos[v], 1.0), (self.pos[u], -1.0)], 0.0);
            return;
        }
        let (x, fits, big_pos) = (&self.x, &self.item_fits, self.big_pos);
        let same = self.same_piece.entry((iu, iv)).or_insert_with(|| {
            if !(fits[iu] && fits[iv]) {
                return Vec::new();
            }
            (x.iter().flatten())
                .map(|slot| {
                    let w = b.continuous(0.0, 0.0, 1.0);
                    b.le(&[(w, 1.0), (slot[iu], -1.0)], 0.0);
                    b.le(&[(w, 1.0), (slot[iv], -1.0)], 0.0);
                    (w, big_pos)
                })
                .collect()
        });
        let mut terms = vec![(self.pos[v], 1.0), (self.pos[u], -1.0)];
        terms.extend(same.iter().copied());
        b.ge(&terms, 1.0);
    }

    /// `S[d,j] ≥ F_u − U (1 − x[i(v),d,j] + x[i(u),d,j])` for every slot (once per pair of
    /// u and v's item; u and v in different items).
    fn add_inputs_ready(&mut self, b: &mut Builder, u: usize, v: usize) {
        let (iu, iv) = (self.items.group_of[u], self.items.group_of[v]);
        if iu == iv || !self.item_fits[iv] || !self.start_rows.insert((u, iv)) {
            return;
        }
        for (d, j) in self.slots() {
            let slot = &self.x[d][j];
            b.ge(
                &[
                    (self.start[d][j], 1.0),
                    (self.finish[u], -1.0),
                    (slot[iv], -self.big),
                    (slot[iu], self.big),
                ],
                -self.big,
            );
        }
    }

    /// `F_v ≥ S[d,j] + D[d,j] − U (1 − x[i(v),d,j])` and `|π_v − P[d,j]| ≤ (Π+1)(1 −
    /// x[i(v),d,j])` for every slot: v ends with its piece and sits at its position.
    fn add_in_slot(&self, b: &mut Builder, v: usize) {
        let i = self.items.group_of[v];
        if !self.item_fits[i] {
            return;
        }
        let (big, big_pos) = (self.big, self.big_pos);
        for (d, j) in self.slots() {
            let x = self.x[d][j][i];
            b.ge(
                &[
                    (self.finish[v], 1.0),
                    (self.start[d][j], -1.0),
                    (self.duration[d][j], -1.0),
                    (x, -big),
                ],
                -big,
            );
            b.le(
                &[
                    (self.pos[v], 1.0),
                    (self.slot_pos[d][j], -1.0),
                    (x, big_pos),
                ],
                big_pos,
            );
            b.le(
                &[
                    (self.slot_pos[d][j], 1.0),
                    (self.pos[v], -1.0),
                    (x, big_pos),
                ],
                big_pos,
            );
        }
    }

    /// Contiguity of every accelerator's unit set on the group DAG `arcs`, and a pipeline
    /// order of the devices.
    fn add_contiguity(&self, b: &mut Builder, arcs: &[(usize, usize)]) {
        for row in &self.member {
            contiguity(b, row, arcs);
        }
        device_order(b, &self.member, arcs, self.units.len());
    }

    /// Symmetry breaking among the accelerators.
    fn add_symmetry(&self, b: &mut Builder) {
        symmetry(b, &self.member);
    }

    /// Values of the binaries `x[i,d,j]` for a held plan with its cut (held plans carry
    /// explicit pieces); `None` without a cut or if the plan splits a unit.
    fn warm_values(&self, placement: &Placement) -> Option<Vec<f64>> {
        let ranks = placement.pieces.as_ref()?;
        let device = canonical_devices(self.units, &placement.assignment)?;
        let mut values = Vec::new();
        for (d, j) in self.slots() {
            values.extend(self.items.groups.iter().map(|item| {
                let v = item.nodes[0];
                f64::from(device[self.units.group_of[v]] == Device::Accelerator(d) && ranks[v] == j)
            }));
        }
        Some(values)
    }

    /// The plan of a solution with its cut: every item in the slot whose binary is > 0.5
    /// (rank j on accelerator d), or on a CPU (one per unit when `contiguous`).
    fn placement(&self, values: &[f64], contiguous: bool) -> Placement {
        let slot_of = |i: usize| {
            self.slots()
                .find(|&(d, j)| values[self.x[d][j][i].index()] > 0.5)
        };
        let slots: Vec<Option<(usize, usize)>> = (0..self.items.len()).map(slot_of).collect();
        let device: Vec<Device> = (self.units.groups.iter().enumerate())
            .map(|(g, unit)| {
                let cpu = Device::Cpu(if contiguous { g } else { 0 });
                slots[self.items.group_of[unit.nodes[0]]]
                    .map_or(cpu, |(d, _)| Device::Accelerator(d))
            })
            .collect();
        let ranks: Vec<usize> = (0..self.w.len())
            .map(|v| slots[self.items.group_of[v]].map_or(0, |(_, j)| j))
            .collect();
        self.units.placement(&device).with_pieces(ranks)
    }
}

/// Plans we hold before the IP starts: all on CPU, as much as fits on one accelerator, runs
/// of the topological order, the runs DP (latency_runs), the DP plan, the greedy baseline.
/// Each plan after the first is made only while `budget` lasts (a note names the ones left
/// out); the first (all on CPU, linear to make and score) is always made.
fn held_plans(
    problem: &Problem,
    units: &Grouping,
    held: &mut Vec<Candidate>,
    stats: &mut Stats,
    budget: &Budget,
) {
    let w = problem.workload;
    let cpu_label = |g: usize| Device::Cpu(if problem.contiguous { g } else { 0 });
    let all_cpu: Vec<Device> = (0..units.len()).map(cpu_label).collect();
    held.extend(candidate(problem, units.placement(&all_cpu), "all on CPU"));
    let spent = |what: &str, stats: &mut Stats| match budget.check() {
        Ok(()) => false,
        Err(e) => {
            stats
                .notes
                .push(format!("held plans from {what} on not made: {e}"));
            true
        }
    };
    if w.devices().accelerators > 0 {
        if spent("one accelerator", stats) {
            return;
        }
        held.extend(candidate(
            problem,
            units.placement(&one_accelerator(w, units, cpu_label)),
            "one accelerator",
        ));
        if spent("topological runs", stats) {
            return;
        }
        held.extend(candidate(
            problem,
            units.placement(&topological_runs(w, units, cpu_label)),
            "topological runs",
        ));
        // The best cut of a topological order into runs, by DP (super::latency_runs).
        if spent("the runs DP", stats) {
            return;
        }
        for (p, source) in latency_runs::plans_within(w, budget) {
            if spent(source, stats) {
                return;
            }
            held.extend(candidate(problem, p, source));
        }
    }
    if spent("the DP", stats) {
        return;
    }
    // The DP may take half the time left; the IP needs the rest.
    match &problem.limits.warm_start {
        Some(p) => held.extend(candidate(problem, p.clone(), "warm start")),
        None => match dp::solve_within(w, problem.limits.max_ideals, &budget.share(0.5)) {
            Ok(o) => held.extend(o.placement.and_then(|p| candidate(problem, p, "dp"))),
            Err(e) => stats.notes.push(format!("no DP plan: {e}")),
        },
    }
    if spent("the greedy baseline", stats) {
        return;
    }
    // The latency baseline, so the IP is never worse than what a user would try first.
    match Method::solve(&Greedy, problem) {
        Ok(o) => held.extend(o.placement.and_then(|p| candidate(problem, p, "greedy"))),
        Err(e) => stats.notes.push(format!("no greedy plan: {e}")),
    }
}

/// Units in index order onto accelerator 0 while its memory allows; the rest on CPUs.
fn one_accelerator(
    w: &Workload,
    units: &Grouping,
    cpu_label: impl Fn(usize) -> Device,
) -> Vec<Device> {
    let memory = w.devices().memory_per_accelerator_bytes;
    let mut used = 0.0;
    (units.groups.iter().enumerate())
        .map(|(g, unit)| {
            if unit.fits_accelerator(memory - used) {
                used += unit.size_bytes;
                Device::Accelerator(0)
            } else {
                cpu_label(g)
            }
        })
        .collect()
}

/// Runs of the topological order: fill accelerator 0 with units in order of their first
/// node until the next unit does not fit, then accelerator 1, …; units that fit nowhere go
/// to CPUs and close the current run. Arcs only go forward, so the calls form no cycle
/// (unless colour classes span runs; the scorer checks).
fn topological_runs(
    w: &Workload,
    units: &Grouping,
    cpu_label: impl Fn(usize) -> Device,
) -> Vec<Device> {
    let devices = w.devices();
    let (k, memory) = (devices.accelerators, devices.memory_per_accelerator_bytes);
    let mut position = vec![0; w.len()];
    for (t, &v) in w.topological_order().iter().enumerate() {
        position[v] = t;
    }
    let mut order: Vec<usize> = (0..units.len()).collect();
    order.sort_by_key(|&g| units[g].nodes.iter().map(|&v| position[v]).min());
    let (mut d, mut used) = (0, 0.0);
    let mut device = vec![Device::Cpu(0); units.len()];
    for g in order {
        let unit = &units[g];
        if !unit.fits_accelerator(memory) {
            device[g] = cpu_label(g);
            // A later unit of this run could depend on this CPU unit: close the run.
            if used > 0.0 || device.contains(&Device::Accelerator(d)) {
                d += 1;
                used = 0.0;
            }
            continue;
        }
        if used + unit.size_bytes > memory {
            d += 1;
            used = 0.0;
        }
        if d < k {
            used += unit.size_bytes;
            device[g] = Device::Accelerator(d);
        } else {
            device[g] = cpu_label(g);
        }
    }
    device
}

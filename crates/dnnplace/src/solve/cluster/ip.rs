//! The max-load (TPS) and synchronous integer programs on a cluster
//! ([`crate::model::cluster`]): exact under the cluster's communication rule, for
//! non-contiguous plans and for the cluster DP's contiguous plan space.
//!
//! **Index sets.** Units `g ∈ U` ([`Grouping::units`](crate::model::grouping::Grouping::units): colour classes, or with
//! contiguity the SCC-fused groups of the group DAG with arcs `A`); devices `d ∈ D`
//! (accelerators of type `t(d)`, CPU cores), each on machine `μ(d)`; machines `μ ∈ M`.
//! A *transfer* `τ = (p, R)` merges the nodes `u` with `c(u) > 0` of producer unit `p` whose
//! successors lie in the units `R ∌ p` (`R ≠ ∅`): they move together. Over link `L` it takes
//! `t_L(τ) = Σ_{u∈τ} t_L(u)` (each node pays `λ_L`, [`ClusterCosts`]).
//!
//! ```text
//! variables   x[g,d] ∈ {0,1}: unit g on device d; x[g,d] = 0 if d is an accelerator and
//!             g is CPU-only or size_g > M_{t(d)}                        (support, memory)
//!             a[p,μ], c[p,μ] ∈ [0,1]: producer p on an accelerator / a CPU core of μ
//! assignment  Σ_d x[g,d] = 1                                            for every g
//! memory      Σ_g size_g x[g,d] ≤ M_{t(d)}                              every accelerator d
//! location    a[p,μ] = Σ_{d acc on μ} x[p,d],  c[p,μ] = Σ_{d CPU on μ} x[p,d]
//! receivers   m[τ,d] ≥ x[w,d] (w ∈ R)   (m = x[w,d] when |R| = 1)       d holds a receiver
//! receive     for d on μ, with ρ = m[τ,d] − x[p,d] (d receives τ iff ρ = 1):
//!   another machine   n[τ,d] ≥ ρ − a[p,μ] − c[p,μ]           priced t_{N_μ}(τ)  (|M| > 1)
//!   d accelerator, μ without peer link:
//!                     h[τ,d] ≥ ρ + a[p,μ] + c[p,μ] − 1        priced t_{H_μ}(τ)
//!   d accelerator, μ with peer link:
//!                     h[τ,d] ≥ ρ + c[p,μ] − 1                 priced t_{H_μ}(τ)
//!                     q[τ,d] ≥ ρ + a[p,μ] − 1                 priced t_{P_μ}(τ)
//!   d a CPU, μ with peer link:
//!                     h[τ,d] ≥ ρ + a[p,μ] − 1                 priced t_{H_μ}(τ)
//!   (d a CPU, sender on μ without a peer link, or on a CPU of μ: free)
//! send        for an accelerator d on μ without peer link:
//!             i[τ,d] ≤ x[w,d] (w ∈ R),  s[τ,d] ≥ x[p,d] − i[τ,d]       priced t_{H_μ}(τ)
//! load        τ ≥ Σ_g x_{t(d)}(g) x[g,d] + Σ_τ (price · indicator)     every device d
//!             (x_{t}(g): the unit's nodes' times on type t; cpuLatency on a CPU)
//! objective   minimise τ,  τ ≥ LB (the cluster volume bound, the set bound below, and
//!             the DP's bound in the contiguous space)
//! sync        F ≥ FW(d), B ≥ BW(d) instead (compute by the nodes' side, a transfer on
//!             the side of its producing nodes: transfers are then kept apart by side),
//!             minimise F + B,  F + B ≥ LB (sync ≥ max load ≥ LB)
//! symmetry    devices of one type on one machine (CPU cores of one machine) are
//!             interchangeable: within each such group d_0, d_1, …, with prefix sums
//!             P[g,d] = Σ_{g'≤g} x[g',d]:  x[g,d_j] ≤ P[g−1,d_{j−1}]  (d_j holds g only
//!             if d_{j−1} holds a lower unit; every plan has one such labelling)
//! ```
//!
//! **Why the receive rows are exact.** Fix an integer `x`. Device `d` receives `τ` exactly
//! when it holds some unit of `R` and not `p` (the scorer's `d ∈ R(u)` for every `u ∈ τ`),
//! i.e. `ρ = max_{w∈R} x[w,d] − x[p,d] = 1` at the least `m`. Where `p` is, is one of
//! three disjoint events — on another machine (`a + c = 0` on `μ`), on a CPU core of `μ`
//! (`c = 1`), on an accelerator of `μ` (`a = 1`) — and each row forces its indicator to 1
//! exactly when `ρ = 1` and its event holds (its right side is `ρ − 1 + [event]`, ≤ 0
//! otherwise). The prices are the table of [`crate::model::cluster`] per event; events
//! with equal prices share one indicator (an accelerator without peer link pays the host
//! link whether `p` is on a CPU or an accelerator of `μ`). Every indicator has a
//! non-negative price in a load that is minimised, and no other row bounds it from above,
//! so at an optimum (and at any solution, up to slack that only raises τ) each equals its
//! lower bound and the load row is the scorer's load. **Send:** the sender pays `t_H` once
//! when some receiver unit is elsewhere: `s ≥ x[p,d] − min_{w∈R} x[w,d]`, the min by
//! `i ≤ x[w,d]` (`i` has no other row, so `i = min` at the least `s`). A node whose
//! successors are all in its own unit never moves and is no transfer.
//!
//! **The set bound** ([`crate::solve::bounds::cluster::set`]): the device `d` holding unit
//! `g` holds some set `S ∋ g` and pays at least its compute and the transfers `S`
//! receives (at the cheapest price of a place other than `d` that exists) and sends, so
//! `TPS ≥ max_g min_d min_{S ∋ g} load_d(S)`, one minimum cut per unit and device class.
//! It holds for every plan (contiguous or not, and for `max FW + max BW ≥ TPS`).
//!
//! **Contiguous plans** (`contiguous`), the cluster DP's plan space as
//! [`crate::score::cluster`] checks it: every device's set contiguous (units::contiguity,
//! reach rows), the devices in a pipeline order (units::device_order, positions), and
//! the machines too — with `L[g,μ] = a[g,μ] + c[g,μ]` (location rows for every unit) and
//! positions `π_μ ∈ [0, |M| − 1]`:
//!
//! ```text
//! π_μ' ≥ π_μ + 1 − |M| (2 − L[u,μ] − L[v,μ'])     every arc u → v of A, μ ≠ μ'
//! ```
//!
//! A machine cycle sums to `0 ≥ (cycle length)`: infeasible; an acyclic machine graph has a
//! topological numbering that satisfies every row (the right side is ≤ 0 when the arc does
//! not go from μ to μ'). This is exact but weaker in the LP than the DP; use it to check
//! the DP or on graphs the DP cannot enumerate.
//!
//! **Coefficients** are kept small as [`crate::solve::milp::presolve`] keeps them (HiGHS 1.15 proves
//! false optima with large coefficients): every time above twice the held plan's score
//! `U` is capped at `2U` (sound: a plan paying one such term scores above `U` either way),
//! times are scaled by the power of two that brings the lower bound into `[1, 2^16]` (or
//! the largest time down to `2^22`), bytes by the one that brings the memories below `2^20`.
//! The objective and bound are scaled back; the plan is re-scored by
//! [`evaluate_on_cluster`], and an IP objective below the scorer's (beyond
//! [`crate::solve::milp::TOLERANCE`], for a plan that pays no capped term) is a formulation bug and an
//! error.
//!
//! **Size.** `|U|·|D|` binaries; `|P|·|M|·2` location columns for `|P|` producer units;
//! for `|X|` transfers with `r̄` receiver units on average, at most `|X|·|D|·(r̄ + 5)`
//! rows of ≤ 4 nonzeros (plus the location rows' `|P|·|D|` nonzeros) and `|D|` load rows
//! of `|U| + 4|X|` nonzeros; symmetry `|U|` prefix columns and `2|U|` rows of ≤ 3
//! nonzeros per device after the first of its group. Contiguous: `+ |D|·(|U| + 2|A|)`
//! reach rows, `|D|·(2|U| + |A|)` position rows and `|A|·|M|(|M| − 1)` machine-order rows.

use crate::solve::MethodId;
use std::collections::HashMap;
use std::time::Instant;

use super::brute_force::interchangeable_groups;
use crate::model::grouping::Grouping;
use crate::model::numerics::pow2;
use crate::model::transfers::{transfers, Transfer};
use crate::model::{ClusterCosts, Device, Placement, Workload};
use crate::score::evaluate_on_cluster;
use crate::solve::bounds::cluster::set::set_bound;
use crate::solve::budget::Budget;
use crate::solve::milp::highs::{run_to_bound, Builder, Solved, Var};
use crate::solve::milp::presolve::into_range;
use crate::solve::milp::units::{contiguity, device_order};
use crate::solve::milp::{status_with_plan, TOLERANCE};
use crate::solve::{CheckFailure, Infeasibility};
use crate::solve::{
    Limits, Objective, Outcome, Problem, Provenance, SolveError, Stats, Status, DEFAULT_GAP,
};

/// The time floor (or the largest time) is brought into `[1, 2^TIME_LOG2]`.
const TIME_LOG2: i32 = 16;
/// No time coefficient above `2^COEFFICIENT_LOG2`.
const COEFFICIENT_LOG2: i32 = 22;
/// Memories and sizes below `2^BYTES_LOG2`.
const BYTES_LOG2: i32 = 20;

/// One device as the model sees it.
#[derive(Clone, Copy, Debug)]
struct Slot {
    device: Device,
    machine: usize,
    /// Accelerator type, `None` for a CPU core.
    ty: Option<usize>,
}

/// The model's variables.
struct Model {
    slots: Vec<Slot>,
    /// `x[d][g]`.
    x: Vec<Vec<Var>>,
    /// Interchangeable devices (indices into `slots`), in device order.
    groups: Vec<Vec<usize>>,
}

/// What [`solve`] returns beside the outcome: the model's size.
#[derive(Clone, Debug, Default)]
pub struct ModelSize {
    pub units: usize,
    pub transfers: usize,
    pub columns: usize,
    pub rows: usize,
}

impl ModelSize {
    /// The model's size and build time, for the run's notes.
    fn note(&self, started: Instant, scales: &Scales) -> String {
        format!(
            "{} units, {} transfers, {} columns, {} rows, built {:.2} s after the start; times × {}, bytes × {}",
            self.units,
            self.transfers,
            self.columns,
            self.rows,
            started.elapsed().as_secs_f64(),
            scales.time,
            scales.bytes
        )
    }
}

/// A held plan whose TPS `v` meets the lower bound, `v ≤ lower · (1 + gap)`, is optimal:
/// its outcome without running HiGHS (bound `min(lower, v)`); `None` otherwise.
fn held_meets_bound(
    held: Option<&(f64, Placement)>,
    lower: f64,
    limits: &Limits,
    stats: &Stats,
    started: Instant,
) -> Option<Outcome> {
    let (value, p) = held?;
    if *value > lower * (1.0 + limits.mip_gap.unwrap_or(DEFAULT_GAP)) {
        return None;
    }
    let mut stats = stats.clone();
    stats.notes.push(format!(
        "the held plan's TPS {value} meets the lower bound {lower}: optimal, HiGHS not run"
    ));
    stats.time_s = started.elapsed().as_secs_f64();
    Some(Outcome {
        method: MethodId::Ip,
        placement: Some(p.clone()),
        objective: *value,
        bound: lower.min(*value),
        status: Status::Optimal,
        stats: Stats {
            provenance: Some(Provenance::Held),
            ..stats
        },
    })
}

/// How HiGHS's run ended (stopped early, or its status, time and nodes) and the second
/// opinions on its answer, as notes.
fn note_run(solved: &Solved, stats: &mut Stats) {
    match &solved.stopped {
        Some(reason) => stats
            .notes
            .push(format!("HiGHS not run to the end: {reason}")),
        None => stats.notes.push(format!(
            "HiGHS: {:?} after {:.2} s, {} nodes",
            solved.status, solved.time_s, solved.nodes
        )),
    }
    (stats.notes).extend(
        solved
            .checks
            .iter()
            .map(crate::solve::milp::second_opinion::Check::note),
    );
}

/// Minimises the max load (`objective` throughput) or `max FW + max BW` (sync) of `w` on
/// the cluster of `costs` by HiGHS, over non-contiguous plans or (`contiguous`) the
/// cluster DP's plan space, within `limits` (time counted from the call). `held`: a plan to start from (warm start, and returned when the IP
/// finds nothing better); `lower`: a proven lower bound on the optimum of this plan space.
///
/// The outcome's objective is the scorer's value of its plan; its bound is HiGHS's bound
/// (at least `lower`), clamped to that TPS; `Optimal` only when proven within the gap.
pub fn solve(
    w: &Workload,
    costs: &ClusterCosts,
    limits: &Limits,
    objective: Objective,
    contiguous: bool,
    held: Option<Placement>,
    lower: f64,
) -> Result<(Outcome, ModelSize), SolveError> {
    let started = Instant::now();
    if matches!(objective, Objective::Latency { .. }) {
        return Err(SolveError::Unsupported {
            method: MethodId::Ip,
            what: "the latency objective on a cluster".into(),
        });
    }
    let sync = objective == Objective::Sync;
    let (units, arcs) = Grouping::units(w, contiguous);
    let mut stats = Stats {
        groups: Some(units.len()),
        ..Stats::default()
    };
    let ip = ClusterIp {
        w,
        costs,
        contiguous,
        sync,
        slots: slots(costs.cluster()),
        times: UnitTimes::of(w, costs, &units),
        units,
        arcs,
    };
    let held = held.and_then(|p| match ip.score(&p) {
        Some(v) => Some((v, p)),
        None => {
            stats
                .notes
                .push("the held plan is not valid for this problem; dropped".into());
            None
        }
    });
    if let Some(g) = ip.unplaceable() {
        stats.time_s = started.elapsed().as_secs_f64();
        return Ok((ip.fits_no_device(g, stats), ModelSize::default()));
    }
    let transfers = transfers(w, costs, &ip.units.group_of, sync);
    let lower = ip.with_set_bound(limits, lower, &mut stats);
    if let Some(outcome) = held_meets_bound(held.as_ref(), lower, limits, &stats, started) {
        return Ok((outcome, ModelSize::default()));
    }
    let scales = Scales::of(&ip, &transfers, held.as_ref().map(|h| h.0), lower);
    let mut b = Builder::within(limits.budget());
    let model = ip.build(&mut b, limits, &transfers, &scales, lower);
    let size = ModelSize {
        units: ip.units.len(),
        transfers: transfers.len(),
        columns: b.columns(),
        rows: b.rows,
    };
    stats.notes.push(size.note(started, &scales));
    let warm = held
        .as_ref()
        .and_then(|(_, p)| model.warm_values(&ip.units, &p.assignment));
    let problem = Problem {
        workload: w,
        devices: crate::solve::Devices::of(w),
        objective,
        contiguous,
        limits: limits.clone(),
        pipeline: None,
    };
    let solved = run_to_bound(b, &problem, started, warm.as_deref(), lower * scales.time)?;
    let best = ip.best_plan(&model, &solved, held, &scales, &mut stats)?;
    note_run(&solved, &mut stats);
    stats.time_s = started.elapsed().as_secs_f64();
    let outcome = match best {
        Some((value, placement, _)) => with_plan(
            &problem,
            &solved,
            value,
            placement,
            lower,
            scales.time,
            stats,
        ),
        None => without_plan(&solved, contiguous, lower, scales.time, stats),
    };
    Ok((outcome, size))
}

/// The units' compute per device class (accelerator types, then the CPU as class `|T|`),
/// and (sync) its forward nodes' part: `compute[c][g] = Σ_{v∈g} x_c(v)`.
struct UnitTimes {
    compute: Vec<Vec<f64>>,
    forward: Vec<Vec<f64>>,
}

impl UnitTimes {
    fn of(w: &Workload, costs: &ClusterCosts, units: &Grouping) -> UnitTimes {
        let types = costs.cluster().types().len();
        let mut compute = vec![vec![0.0f64; units.len()]; types + 1];
        let mut forward = compute.clone();
        for (g, unit) in units.groups.iter().enumerate() {
            for &v in &unit.nodes {
                let fw = !w.node(v).is_backward;
                for t in 0..types {
                    compute[t][g] += costs.time(t, v);
                    if fw {
                        forward[t][g] += costs.time(t, v);
                    }
                }
                compute[types][g] += w.node(v).cpu_latency;
                if fw {
                    forward[types][g] += w.node(v).cpu_latency;
                }
            }
        }
        UnitTimes { compute, forward }
    }
}

/// The coefficients' scales (module documentation): times × `time` (each first capped at
/// `cap`, twice the held plan's TPS), bytes × `bytes`.
struct Scales {
    time: f64,
    bytes: f64,
    cap: f64,
}

impl Scales {
    /// The time floor (the lower bound, else the held plan's TPS, else the largest time)
    /// into `[1, 2^TIME_LOG2]` unless the largest time would pass `2^COEFFICIENT_LOG2`;
    /// the largest memory or size below `2^BYTES_LOG2`.
    fn of(ip: &ClusterIp, transfers: &[Transfer], held: Option<f64>, lower: f64) -> Scales {
        let cap = held
            .map(|v| 2.0 * v)
            .filter(|c| c.is_finite() && *c > 0.0)
            .unwrap_or(f64::INFINITY);
        let max_time = ip
            .times
            .compute
            .iter()
            .flatten()
            .chain(
                transfers
                    .iter()
                    .flat_map(|t| t.host.iter().chain(&t.peer).chain(&t.network)),
            )
            .map(|&x| x.min(cap))
            .fold(0.0, f64::max);
        let anchor = if lower > 0.0 {
            lower
        } else {
            held.unwrap_or(max_time)
        };
        let mut time = into_range(anchor, 0, TIME_LOG2);
        if max_time * time > pow2(COEFFICIENT_LOG2) {
            time = into_range(max_time, i32::MIN, COEFFICIENT_LOG2);
        }
        let max_bytes = ip
            .units
            .groups
            .iter()
            .map(|g| g.size_bytes)
            .chain(ip.costs.cluster().types().iter().map(|t| t.memory_bytes))
            .filter(|b| b.is_finite())
            .fold(0.0, f64::max);
        Scales {
            time,
            bytes: into_range(max_bytes, i32::MIN, BYTES_LOG2),
            cap,
        }
    }

    /// A time as a coefficient.
    fn time_of(&self, x: f64) -> f64 {
        x.min(self.cap) * self.time
    }
}

/// The devices of a cluster as the model's slots: its accelerators, then its CPU cores.
fn slots(cluster: &crate::model::Cluster) -> Vec<Slot> {
    cluster
        .accelerators()
        .iter()
        .enumerate()
        .map(|(i, a)| Slot {
            device: Device::Accelerator(i),
            machine: a.machine,
            ty: Some(a.accelerator_type),
        })
        .chain(
            cluster
                .cpu_machines()
                .iter()
                .enumerate()
                .map(|(j, &m)| Slot {
                    device: Device::Cpu(j),
                    machine: m,
                    ty: None,
                }),
        )
        .collect()
}

/// A listed unit's location columns per machine `μ`: `(a[p,μ], c[p,μ])`, its share on
/// the machine's accelerators and CPU cores ([`Model::add_location`]); `None` for the others.
type Location = Option<Vec<(Option<Var>, Option<Var>)>>;

/// A plan with its scored value and where it came from.
type Best = (f64, Placement, Provenance);

/// One cluster IP: the problem, its units (contracted classes when `contiguous`) with
/// their arcs and times, and its slots.
struct ClusterIp<'a> {
    w: &'a Workload,
    costs: &'a ClusterCosts,
    contiguous: bool,
    sync: bool,
    slots: Vec<Slot>,
    times: UnitTimes,
    units: Grouping,
    arcs: Vec<(usize, usize)>,
}

impl ClusterIp<'_> {
    /// The scorer's value of `p` (max load, or `max FW + max BW` with `sync`), `None` when
    /// it breaks a rule or (`contiguous`) is not contiguous.
    fn score(&self, p: &Placement) -> Option<f64> {
        let e = evaluate_on_cluster(self.w, self.costs, p);
        (e.is_valid() && (!self.contiguous || e.is_contiguous())).then_some(if self.sync {
            e.sync_objective
        } else {
            e.max_load
        })
    }

    /// Whether unit `g` may go to slot `s`: a CPU core takes any unit, an accelerator one
    /// that may run there and fits its type's memory.
    fn allowed(&self, s: &Slot, g: usize) -> bool {
        match s.ty {
            None => true,
            Some(t) => {
                self.units.groups[g].supported_on_accelerator
                    && self.units.groups[g].size_bytes
                        <= self.costs.cluster().types()[t].memory_bytes
            }
        }
    }

    /// A unit that fits no device, if any: then no plan exists.
    fn unplaceable(&self) -> Option<usize> {
        (0..self.units.len()).find(|&g| !self.slots.iter().any(|s| self.allowed(s, g)))
    }

    /// The infeasible outcome for unit `g`, which fits no device, naming its first node.
    fn fits_no_device(&self, g: usize, stats: Stats) -> Outcome {
        let node = self.w.node(self.units.groups[g].nodes[0]);
        Outcome {
            method: MethodId::Ip,
            placement: None,
            objective: f64::INFINITY,
            bound: f64::INFINITY,
            status: Status::infeasible(Infeasibility::NodeFitsNoClusterDevice {
                node: node.id,
                name: node.name.clone(),
            }),
            stats,
        }
    }

    /// `lower`, raised to the set bound (a twentieth of the time limit) unless the load
    /// bounds are off; the set bound is noted.
    fn with_set_bound(&self, limits: &Limits, lower: f64, stats: &mut Stats) -> f64 {
        if limits.ip.load_bound == crate::solve::bounds::load::LoadBoundUse::Off {
            return lower;
        }
        let budget = Budget::new(limits.time_limit_s.map(|t| 0.05 * t), None);
        let set = set_bound(self.w, self.costs, &budget);
        stats.notes.push(format!("set bound {set}"));
        lower.max(set)
    }

    /// The whole model in `b`: assignment, memory, the objective's columns with the load
    /// rows (compute and communication), then (`contiguous`) the contiguity and device and
    /// machine order rows, and (when asked) symmetry breaking.
    fn build(
        &self,
        b: &mut Builder,
        limits: &Limits,
        transfers: &[Transfer],
        scales: &Scales,
        lower: f64,
    ) -> Model {
        let units = self.units.len();
        let x: Vec<Vec<Var>> = self
            .slots
            .iter()
            .map(|s| {
                (0..units)
                    .map(|g| b.binary(0.0, self.allowed(s, g)))
                    .collect()
            })
            .collect();
        let model = Model {
            groups: interchangeable_groups(self.costs)
                .into_iter()
                .map(|list| {
                    list.into_iter()
                        .map(|d| {
                            self.slots
                                .iter()
                                .position(|s| s.device == d)
                                .expect("a slot")
                        })
                        .collect()
                })
                .collect(),
            slots: self.slots.clone(),
            x,
        };
        model.add_assignment(b, units);
        model.add_memory(b, &self.units, self.costs, scales.bytes);
        let machines = self.costs.cluster().machines().len();
        let mut producers: Vec<usize> = transfers.iter().map(|t| t.p).collect();
        if self.contiguous && machines > 1 {
            producers = (0..units).collect();
        }
        producers.sort_unstable();
        producers.dedup();
        let location = model.add_location(b, &producers, units, machines);
        self.add_loads(b, &model, transfers, &location, scales, lower);
        if self.contiguous {
            for row in &model.x {
                contiguity(b, row, &self.arcs);
            }
            device_order(b, &model.x, &self.arcs, units);
            if machines > 1 {
                add_machine_order(b, &self.arcs, &location, machines);
            }
        }
        if limits.ip.symmetry_breaking {
            model.add_symmetry(b);
        }
        model
    }

    /// The objective's columns and the load rows: τ ≥ every device's compute plus
    /// communication (throughput), or F ≥ its forward and B ≥ its backward part with
    /// `F + B ≥ LB` (sync ≥ max load ≥ LB).
    fn add_loads(
        &self,
        b: &mut Builder,
        model: &Model,
        transfers: &[Transfer],
        location: &[Location],
        scales: &Scales,
        lower: f64,
    ) {
        let (tau, backward_side) = if self.sync {
            let f = b.continuous(1.0, 0.0, f64::INFINITY);
            let bw = b.continuous(1.0, 0.0, f64::INFINITY);
            if lower > 0.0 {
                b.ge(&[(f, 1.0), (bw, 1.0)], lower * scales.time);
            }
            (f, Some(bw))
        } else {
            (b.continuous(1.0, lower * scales.time, f64::INFINITY), None)
        };
        let mut loads = self.compute_terms(model, scales);
        let has_peer: Vec<bool> = (0..self.costs.cluster().machines().len())
            .map(|m| self.costs.has_peer(m))
            .collect();
        let time = |x: f64| scales.time_of(x);
        model.add_communication(b, transfers, location, &has_peer, &time, &mut loads);
        for [fw, bw] in loads {
            let rows = match backward_side {
                None => vec![(fw, tau)],
                Some(bside) => vec![(fw, tau), (bw, bside)],
            };
            for (mut row, bounded) in rows {
                if !row.is_empty() || backward_side.is_none() {
                    row.push((bounded, -1.0));
                    b.le(&row, 0.0);
                }
            }
        }
    }

    /// Per device, its [forward, backward] compute terms `x[d][g] · time` (throughput: all
    /// in the first).
    fn compute_terms(&self, model: &Model, scales: &Scales) -> Vec<[Vec<(Var, f64)>; 2]> {
        let types = self.costs.cluster().types().len();
        let (compute, forward) = (&self.times.compute, &self.times.forward);
        model
            .slots
            .iter()
            .enumerate()
            .map(|(d, s)| {
                let c = s.ty.unwrap_or(types);
                let side = |f: &dyn Fn(usize) -> f64| -> Vec<(Var, f64)> {
                    (0..self.units.len())
                        .map(|g| (model.x[d][g], scales.time_of(f(g))))
                        .filter(|&(_, c)| c != 0.0)
                        .collect()
                };
                if self.sync {
                    [
                        side(&|g| forward[c][g]),
                        side(&|g| compute[c][g] - forward[c][g]),
                    ]
                } else {
                    [side(&|g| compute[c][g]), Vec::new()]
                }
            })
            .collect()
    }

    /// The better of the IP's plan (scored; an objective below the scorer's is a
    /// formulation bug) and the held plan, with where it came from; both are noted.
    fn best_plan(
        &self,
        model: &Model,
        solved: &Solved,
        held: Option<(f64, Placement)>,
        scales: &Scales,
        stats: &mut Stats,
    ) -> Result<Option<Best>, SolveError> {
        let mut best: Option<Best> = None;
        if let Some(columns) = &solved.columns {
            let p = model.placement(&self.units, columns);
            match self.score(&p) {
                Some(v) => {
                    let value = solved.objective / scales.time;
                    let tol = TOLERANCE * v.abs().max(1.0);
                    if value < v - tol && value < scales.cap * (1.0 - TOLERANCE) {
                        return Err(SolveError::Check(CheckFailure::IpBelowScorer {
                            cluster: true,
                            objective: value,
                            scored: v,
                        }));
                    }
                    stats
                        .notes
                        .push(format!("HiGHS incumbent objective {value}"));
                    best = Some((v, p, Provenance::Solver));
                }
                None => stats.notes.push(
                    "the scorer rejected the IP's plan (rules or contiguity); kept the held plan"
                        .into(),
                ),
            }
        }
        if let Some((v, p)) = held {
            stats.notes.push(format!("held plan scores {v}"));
            if best.as_ref().is_none_or(|b| v < b.0) {
                if best.is_some() {
                    stats
                        .notes
                        .push("returning the held plan: the IP found nothing better".into());
                }
                best = Some((v, p, Provenance::Held));
            }
        }
        stats.provenance = best.as_ref().map(|b| b.2);
        Ok(best)
    }
}

/// The outcome without a plan: infeasible when HiGHS says so (no bound), else no plan
/// with HiGHS's bound (at least `lower`).
fn without_plan(
    solved: &Solved,
    contiguous: bool,
    lower: f64,
    time_scale: f64,
    stats: Stats,
) -> Outcome {
    let status = match solved.status {
        highs::HighsModelStatus::Infeasible | highs::HighsModelStatus::UnboundedOrInfeasible => {
            Status::infeasible(Infeasibility::ClusterIp { contiguous })
        }
        _ => Status::NoPlan {
            reason: solved
                .stopped
                .clone()
                .unwrap_or(crate::solve::StopReason::Solver {
                    status: format!("{:?}", solved.status),
                }),
        },
    };
    let bound = if matches!(status, Status::Infeasible { .. }) {
        f64::INFINITY
    } else {
        (solved.bound / time_scale).max(lower).max(0.0)
    };
    Outcome {
        method: MethodId::Ip,
        placement: None,
        objective: f64::INFINITY,
        bound,
        status,
        stats,
    }
}

/// The outcome with the plan of scored TPS `value`: HiGHS's bound (at least `lower`; none
/// when HiGHS says infeasible with the held plan as cut-off), clamped to `value` with a
/// note when it exceeds it.
fn with_plan(
    problem: &Problem,
    solved: &Solved,
    value: f64,
    placement: Placement,
    lower: f64,
    time_scale: f64,
    mut stats: Stats,
) -> Outcome {
    let mut bound = if solved.bound.is_finite() {
        (solved.bound / time_scale).max(lower)
    } else {
        lower
    };
    if solved.status == highs::HighsModelStatus::Infeasible {
        // Infeasible with the held plan as cut-off: HiGHS claims no bound, nor do we.
        bound = lower;
    }
    let unreliable = bound > value + TOLERANCE * value.abs().max(1.0);
    if unreliable {
        stats.notes.push(format!(
            "the bound {bound} exceeds the score {value} of a plan we hold: bound unreliable, clamped"
        ));
    }
    bound = bound.min(value);
    let status = status_with_plan(problem, solved, value, bound, unreliable);
    Outcome {
        method: MethodId::Ip,
        placement: Some(placement),
        objective: value,
        bound,
        status,
        stats,
    }
}

impl Model {
    /// `Σ_d x[g,d] = 1` for every unit g.
    fn add_assignment(&self, b: &mut Builder, units: usize) {
        for g in 0..units {
            let terms: Vec<(Var, f64)> = self.x.iter().map(|row| (row[g], 1.0)).collect();
            b.eq(&terms, 1.0);
        }
    }

    /// `Σ_g size_g x[g,d] ≤ M_{t(d)}` for every accelerator d whose memory can bind.
    fn add_memory(&self, b: &mut Builder, units: &Grouping, costs: &ClusterCosts, scale: f64) {
        let total: f64 = units.groups.iter().map(|g| g.size_bytes).sum();
        for (d, s) in self.slots.iter().enumerate() {
            let Some(t) = s.ty else { continue };
            let memory = costs.cluster().types()[t].memory_bytes;
            if total <= memory {
                continue;
            }
            let terms: Vec<(Var, f64)> = (units.groups.iter().enumerate())
                .filter(|(_, u)| u.size_bytes > 0.0)
                .map(|(g, u)| (self.x[d][g], u.size_bytes * scale))
                .collect();
            if !terms.is_empty() {
                b.le(&terms, memory * scale);
            }
        }
    }

    /// `a[p,μ] = Σ_{d acc on μ} x[p,d]`, `c[p,μ] = Σ_{d CPU on μ} x[p,d]` for the listed
    /// units; `None` for the others. Indexed `[g][μ] = (a, c)`; a kind of device the
    /// machine lacks gets no column.
    fn add_location(
        &self,
        b: &mut Builder,
        listed: &[usize],
        units: usize,
        machines: usize,
    ) -> Vec<Location> {
        let mut out = vec![None; units];
        for &g in listed {
            let per_machine = (0..machines)
                .map(|m| {
                    let mut side = |acc: bool| {
                        let terms: Vec<(Var, f64)> = (self.slots.iter().enumerate())
                            .filter(|(_, s)| s.machine == m && s.ty.is_some() == acc)
                            .map(|(d, _)| (self.x[d][g], 1.0))
                            .collect();
                        if terms.is_empty() {
                            return None;
                        }
                        let v = b.continuous(0.0, 0.0, 1.0);
                        let mut row = terms;
                        row.push((v, -1.0));
                        b.eq(&row, 0.0);
                        Some(v)
                    };
                    (side(true), side(false))
                })
                .collect();
            out[g] = Some(per_machine);
        }
        out
    }

    /// The receive and send rows of every transfer on every device, their priced
    /// indicators appended to the devices' loads (module documentation).
    fn add_communication(
        &self,
        b: &mut Builder,
        transfers: &[Transfer],
        location: &[Location],
        has_peer: &[bool],
        time: &impl Fn(f64) -> f64,
        loads: &mut [[Vec<(Var, f64)>; 2]],
    ) {
        let machines = has_peer.len();
        for t in transfers {
            let at = location[t.p]
                .as_ref()
                .expect("producers have location columns");
            for (d, s) in self.slots.iter().enumerate() {
                let mu = s.machine;
                let xp = self.x[d][t.p];
                // m[τ,d] ≥ x[w,d]: d holds a receiver.
                let holds = if t.recv.len() == 1 {
                    self.x[d][t.recv[0]]
                } else {
                    let m = b.continuous(0.0, 0.0, 1.0);
                    for &w in &t.recv {
                        b.ge(&[(m, 1.0), (self.x[d][w], -1.0)], 0.0);
                    }
                    m
                };
                let (acc_here, cpu_here) = at[mu];
                // indicator ≥ ρ + Σ sign·loc − shift, priced `price`.
                let mut receive =
                    |b: &mut Builder, locs: &[(Option<Var>, f64)], shift: f64, price: f64| {
                        let price = time(price);
                        if price == 0.0 {
                            return;
                        }
                        let z = b.continuous(0.0, 0.0, 1.0);
                        let mut row = vec![(z, 1.0), (holds, -1.0), (xp, 1.0)];
                        // Rows whose event cannot happen (the machine lacks the sender's kind of
                        // device) are dropped; an absent side holds nothing (location 0).
                        if shift > 0.0 && locs.iter().all(|(v, _)| v.is_none()) {
                            return;
                        }
                        row.extend(locs.iter().filter_map(|&(v, sign)| v.map(|v| (v, -sign))));
                        b.ge(&row, -shift);
                        loads[d][usize::from(t.backward)].push((z, price));
                    };
                if machines > 1 {
                    receive(b, &[(acc_here, -1.0), (cpu_here, -1.0)], 0.0, t.network[mu]);
                }
                match (s.ty.is_some(), has_peer[mu]) {
                    (true, false) => {
                        receive(b, &[(acc_here, 1.0), (cpu_here, 1.0)], 1.0, t.host[mu]);
                    }
                    (true, true) => {
                        receive(b, &[(cpu_here, 1.0)], 1.0, t.host[mu]);
                        receive(b, &[(acc_here, 1.0)], 1.0, t.peer[mu]);
                    }
                    (false, true) => {
                        receive(b, &[(acc_here, 1.0)], 1.0, t.host[mu]);
                    }
                    (false, false) => {}
                }
                // Send: an accelerator on a machine without peer link pays t_H once.
                if s.ty.is_some() && !has_peer[mu] {
                    let price = time(t.host[mu]);
                    if price == 0.0 {
                        continue;
                    }
                    let inside = if t.recv.len() == 1 {
                        self.x[d][t.recv[0]]
                    } else {
                        let i = b.continuous(0.0, 0.0, 1.0);
                        for &w in &t.recv {
                            b.le(&[(i, 1.0), (self.x[d][w], -1.0)], 0.0);
                        }
                        i
                    };
                    let z = b.continuous(0.0, 0.0, 1.0);
                    b.ge(&[(z, 1.0), (xp, -1.0), (inside, 1.0)], 0.0);
                    loads[d][usize::from(t.backward)].push((z, price));
                }
            }
        }
    }

    /// Within each group of interchangeable devices `d_0, d_1, …`: device `d_j` holds unit
    /// `g` only if `d_{j−1}` holds a lower unit, through prefix sums
    /// `P[g,d] = P[g−1,d] + x[g,d]` (continuous, `P[−1,d] = 0`):
    /// `x[g,d_j] ≤ P[g−1,d_{j−1}]`. The same labelling as units::symmetry (devices used in
    /// order of their lowest unit), with O(|U|) nonzeros per device instead of O(|U|²).
    fn add_symmetry(&self, b: &mut Builder) {
        for group in &self.groups {
            for pair in group.windows(2) {
                let (before, d) = (&self.x[pair[0]], &self.x[pair[1]]);
                // x[0,d] = 0: the lowest unit opens the first device.
                b.le(&[(d[0], 1.0)], 0.0);
                let mut prefix: Option<Var> = None;
                for g in 1..d.len() {
                    // P[g−1, before]
                    let p = b.continuous(0.0, 0.0, f64::INFINITY);
                    let mut row = vec![(p, 1.0), (before[g - 1], -1.0)];
                    if let Some(q) = prefix {
                        row.push((q, -1.0));
                    }
                    b.eq(&row, 0.0);
                    b.le(&[(d[g], 1.0), (p, -1.0)], 0.0);
                    prefix = Some(p);
                }
            }
        }
    }

    /// Values of the binaries for `assignment`, devices renumbered within each group of
    /// interchangeable devices in order of their lowest unit (the labelling the symmetry
    /// rows keep); `None` if it splits a unit.
    fn warm_values(&self, units: &Grouping, assignment: &[Device]) -> Option<Vec<f64>> {
        let device_of = units.device_of_groups(assignment)?;
        let slot_of: HashMap<Device, usize> = self
            .slots
            .iter()
            .enumerate()
            .map(|(d, s)| (s.device, d))
            .collect();
        let mut unit_slot: Vec<usize> = device_of
            .iter()
            .map(|dev| slot_of.get(dev).copied())
            .collect::<Option<_>>()?;
        for group in &self.groups {
            // Used devices of the group by lowest unit.
            let mut used: Vec<(usize, usize)> = Vec::new();
            for (g, &d) in unit_slot.iter().enumerate() {
                if group.contains(&d) && !used.iter().any(|&(_, x)| x == d) {
                    used.push((g, d));
                }
            }
            let rename: HashMap<usize, usize> = used
                .iter()
                .enumerate()
                .map(|(k, &(_, d))| (d, group[k]))
                .collect();
            for d in unit_slot.iter_mut() {
                if let Some(&to) = rename.get(d) {
                    *d = to;
                }
            }
        }
        let mut values = Vec::with_capacity(self.x.len() * units.len());
        for d in 0..self.x.len() {
            values.extend(unit_slot.iter().map(|&s| f64::from(s == d)));
        }
        Some(values)
    }

    /// The plan of a solution: each unit where its binary is > 0.5.
    fn placement(&self, units: &Grouping, values: &[f64]) -> Placement {
        let device: Vec<Device> = (0..units.len())
            .map(|g| {
                (0..self.x.len())
                    .find(|&d| values[self.x[d][g].index()] > 0.5)
                    .map_or(self.slots[0].device, |d| self.slots[d].device)
            })
            .collect();
        units.placement(&device)
    }
}

/// Machines in a pipeline order: `π_μ' ≥ π_μ + 1 − |M|(2 − L[u,μ] − L[v,μ'])` for every
/// arc and ordered pair of machines (module documentation).
fn add_machine_order(
    b: &mut Builder,
    arcs: &[(usize, usize)],
    location: &[Location],
    machines: usize,
) {
    let big = machines as f64;
    let pi: Vec<Var> = (0..machines)
        .map(|_| b.continuous(0.0, 0.0, big - 1.0))
        .collect();
    let on = |g: usize, m: usize| -> Vec<Var> {
        let (a, c) = location[g].as_ref().expect("every unit located")[m];
        a.into_iter().chain(c).collect()
    };
    for &(u, v) in arcs {
        for m in 0..machines {
            let here = on(u, m);
            if here.is_empty() {
                continue;
            }
            for n in (0..machines).filter(|&n| n != m) {
                let there = on(v, n);
                if there.is_empty() {
                    continue;
                }
                let mut row = vec![(pi[n], 1.0), (pi[m], -1.0)];
                row.extend(here.iter().map(|&l| (l, -big)));
                row.extend(there.iter().map(|&l| (l, -big)));
                b.ge(&row, 1.0 - 2.0 * big);
            }
        }
    }
}

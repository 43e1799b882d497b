//! The max-load (TPS) and synchronous IPs.
//!
//! Units g (classes, or groups when contiguous; see [`super::units`]), accelerators
//! `d ∈ 0..k`, CPUs `c ∈ 0..ℓ`, hyperedges `e = (T_e, c_e)`. The constraint families, in
//! the order [`solve`] adds them, each by the function named:
//!
//! ```text
//! variables        x[g,d], y[g,c] ∈ {0,1}: unit g on accelerator d / CPU c;
//!                  x[g,d] = 0 if g is unsupported or size_g > M   (support, memory)
//! add_assignment   Σ_d x[g,d] + Σ_c y[g,c] = 1                    each unit on one device
//! add_memory       Σ_g size_g · x[g,d] ≤ M                         memory of accelerator d
//! LoadObjective    throughput: τ ≥ LB;   minimise τ
//!                  sync: F ≥ LB_F, B ≥ LB_B, F + B ≥ LB;  minimise F + B
//!                  (LB: combinatorial, solve::bounds::load)
//! add_accelerator_loads
//!                  z[e,d] ≥ cut of T_e by accelerator d            (units::cut_indicator)
//!                  τ ≥ Σ_g fpga_g x[g,d] + Σ_e c_e z[e,d]           for every accelerator d
//!                  sync: F ≥ FW(d), B ≥ BW(d), the forward/backward parts (a hyperedge
//!                  counts on the side of its producing nodes)
//! add_cpu_loads    τ ≥ Σ_g cpu_g y[g,c] (sync: F, B by side)       for every CPU c; CPUs
//!                  pay no communication
//! add_contiguity   (when asked) units::contiguity for every accelerator and every CPU,
//!                  and units::device_order (the devices in a pipeline order: a chain of
//!                  ideals)
//! add_symmetry     units::symmetry among accelerators and among CPUs
//! ```
//!
//! With contiguity the default is the chain-of-stages model of [`super::stages`], which
//! is tighter; the per-device formulation above stays available for comparison
//! (`--ip-experiment positions`).
//!
//! Colour classes hold by construction (one variable per class or group). Warm start
//! ([`Assignment::warm_values`]): the DP's optimal contiguous plan (valid for both
//! variants), canonically relabelled. Extraction ([`Assignment::placement`]): a unit goes
//! where its binary is > 0.5.
//!
//! Size: (k + ℓ)·U binaries for U units; k·H cut variables and O(k·Σ|T_e|) rows for H
//! hyperedges; with contiguity (k + ℓ)·U reach variables and 2(k + ℓ)·A rows for A arcs.

use std::time::Instant;

use super::highs::{run_to_bound, Builder, Var};
use super::units::{
    canonical_devices, contiguity, cut_indicator, device_order, memory_binds, symmetry,
};
use super::{dp_warm_start, finish};
use crate::model::grouping::{Group, Grouping, Hyperedge};
use crate::model::{Device, DeviceSet, Placement};
use crate::solve::bounds::load::ModelBounds;
use crate::solve::budget::Budget;
use crate::solve::candidate::Candidate;
use crate::solve::{Objective, Outcome, Problem, SolveError, Stats};

/// Solves the throughput or sync IP of `problem`.
pub fn solve(problem: &Problem) -> Result<Outcome, SolveError> {
    let started = Instant::now();
    if problem.interleaved() {
        return super::interleaved::solve(problem);
    }
    if problem.contiguous && problem.limits.ip.contiguous_model == super::ContiguousModel::Stages {
        return super::stages::solve(problem);
    }
    let w = problem.workload;
    let sync = problem.objective == Objective::Sync;
    let (units, arcs) = Grouping::units(w, problem.contiguous);
    let devices = w.devices();

    let (k, l, n_units) = (
        devices.accelerators as f64,
        devices.cpus as f64,
        units.len() as f64,
    );
    let columns = (k + l) * n_units + k * (n_units + arcs.len() as f64);
    let (mut ip, mut b) = match LoadModel::start(problem, started, &units, columns) {
        Ok(started) => started,
        Err(refused) => return Ok(*refused),
    };
    let model = Assignment::variables(&mut b, &units, devices);
    model.add_assignment(&mut b);
    model.add_memory(&mut b, devices.memory_per_accelerator_bytes);
    let hyperedges = units.hyperedges(w, sync);
    let (bounds, objective) = ip.objective(&mut b, &units, &hyperedges, devices, sync);
    model.add_accelerator_loads(&mut b, &hyperedges, &objective);
    model.add_cpu_loads(&mut b, &objective);
    if problem.contiguous {
        model.add_contiguity(&mut b, &arcs, problem.limits.ip.reach_rows);
    }
    if problem.limits.ip.symmetry_breaking {
        model.add_symmetry(&mut b);
    }

    let warm = dp_warm_start(problem, &mut ip.stats);
    let warm_values = warm.as_ref().and_then(|c| model.warm_values(&c.placement));
    let size = format!("{} units, {} hyperedges", units.len(), hyperedges.len());
    let lower = bounds.objective(sync);
    ip.solve(b, size, warm, warm_values.as_deref(), lower, |values| {
        model.placement(values)
    })
}

/// The per-device assignment model's variables: `x[d][g]` (unit g on accelerator d) and
/// `y[c][g]` (on CPU c).
struct Assignment<'a> {
    units: &'a Grouping,
    x: Vec<Vec<Var>>,
    y: Vec<Vec<Var>>,
}

impl<'a> Assignment<'a> {
    /// `x[g,d], y[g,c] ∈ {0,1}`, `x[g,d] = 0` when g is unsupported or larger than M.
    fn variables(b: &mut Builder, units: &'a Grouping, devices: &DeviceSet) -> Self {
        let memory = devices.memory_per_accelerator_bytes;
        let x = (0..devices.accelerators)
            .map(|_| {
                units
                    .groups
                    .iter()
                    .map(|g| b.binary(0.0, g.fits_accelerator(memory)))
                    .collect()
            })
            .collect();
        let y = (0..devices.cpus)
            .map(|_| units.groups.iter().map(|_| b.binary(0.0, true)).collect())
            .collect();
        Assignment { units, x, y }
    }

    /// Every device's membership row: accelerators, then CPUs.
    fn devices(&self) -> impl Iterator<Item = &Vec<Var>> {
        self.x.iter().chain(self.y.iter())
    }

    /// `Σ_d x[g,d] + Σ_c y[g,c] = 1` for every unit g.
    fn add_assignment(&self, b: &mut Builder) {
        for g in 0..self.units.len() {
            let terms: Vec<(Var, f64)> = self.devices().map(|row| (row[g], 1.0)).collect();
            b.eq(&terms, 1.0);
        }
    }

    /// `Σ_g size_g · x[g,d] ≤ M` for every accelerator d (when it can bind).
    fn add_memory(&self, b: &mut Builder, memory: f64) {
        if !memory_binds(self.units, memory) {
            return;
        }
        for row in &self.x {
            let terms: Vec<(Var, f64)> = (self.units.groups.iter().enumerate())
                .filter(|(_, unit)| unit.size_bytes > 0.0)
                .map(|(g, unit)| (row[g], unit.size_bytes))
                .collect();
            b.le(&terms, memory);
        }
    }

    /// `z[e,d] ≥ cut of T_e by accelerator d` and `τ ≥ Σ_g fpga_g x[g,d] + Σ_e c_e z[e,d]`
    /// (sync: `F ≥ FW(d)`, `B ≥ BW(d)`) for every accelerator d.
    fn add_accelerator_loads(
        &self,
        b: &mut Builder,
        hyperedges: &[Hyperedge],
        objective: &LoadObjective,
    ) {
        for row in &self.x {
            let mut load = Load::compute(self.units, row, |unit| {
                (unit.fpga_latency, unit.forward_fpga_latency)
            });
            load.add_communication(b, hyperedges, row);
            objective.add_load_rows(b, load);
        }
    }

    /// `τ ≥ Σ_g cpu_g y[g,c]` (sync: `F ≥ FW(c)`, `B ≥ BW(c)`) for every CPU c.
    fn add_cpu_loads(&self, b: &mut Builder, objective: &LoadObjective) {
        for row in &self.y {
            let load = Load::compute(self.units, row, |unit| {
                (unit.cpu_latency, unit.forward_cpu_latency)
            });
            objective.add_load_rows(b, load);
        }
    }

    /// Per-device contiguity on the group DAG `arcs` (every accelerator, then every CPU;
    /// only with `reach_rows`, off under `--ip-experiment noreach`) and a pipeline order
    /// of the devices.
    fn add_contiguity(&self, b: &mut Builder, arcs: &[(usize, usize)], reach_rows: bool) {
        if reach_rows {
            for row in self.devices() {
                contiguity(b, row, arcs);
            }
        }
        let all: Vec<Vec<Var>> = self.devices().cloned().collect();
        device_order(b, &all, arcs, self.units.len());
    }

    /// Symmetry breaking among the accelerators and among the CPUs.
    fn add_symmetry(&self, b: &mut Builder) {
        symmetry(b, &self.x);
        symmetry(b, &self.y);
    }

    /// Values of the binaries (x, then y) for `placement`, devices canonically relabelled;
    /// `None` if it splits a unit.
    fn warm_values(&self, placement: &Placement) -> Option<Vec<f64>> {
        let device = canonical_devices(self.units, &placement.assignment)?;
        let mut values = Vec::with_capacity((self.x.len() + self.y.len()) * self.units.len());
        for d in 0..self.x.len() {
            values.extend(
                device
                    .iter()
                    .map(|&dev| f64::from(dev == Device::Accelerator(d))),
            );
        }
        for c in 0..self.y.len() {
            values.extend(device.iter().map(|&dev| f64::from(dev == Device::Cpu(c))));
        }
        Some(values)
    }

    /// The plan of a solution: each unit where its binary is > 0.5.
    fn placement(&self, values: &[f64]) -> Placement {
        let on = |var: Var| values[var.index()] > 0.5;
        let device: Vec<Device> = (0..self.units.len())
            .map(|g| {
                if let Some(d) = (0..self.x.len()).find(|&d| on(self.x[d][g])) {
                    Device::Accelerator(d)
                } else {
                    (0..self.y.len())
                        .find(|&c| on(self.y[c][g]))
                        .map_or(Device::Cpu(0), Device::Cpu)
                }
            })
            .collect();
        self.units.placement(&device)
    }
}

/// One device's load as linear terms: the total, its forward part and its backward part.
#[derive(Default)]
pub(crate) struct Load {
    pub total: Vec<(Var, f64)>,
    pub forward: Vec<(Var, f64)>,
    pub backward: Vec<(Var, f64)>,
}

impl Load {
    /// Appends the terms of `other` (for sums over devices).
    pub fn extend(&mut self, other: &Load) {
        self.total.extend(other.total.iter().copied());
        self.forward.extend(other.forward.iter().copied());
        self.backward.extend(other.backward.iter().copied());
    }

    /// `Σ_g time_g m_g` over the memberships `member`, with `time(unit)` = (total,
    /// forward part) of the unit's time on the device.
    pub fn compute(units: &Grouping, member: &[Var], time: impl Fn(&Group) -> (f64, f64)) -> Load {
        let mut load = Load::default();
        for (unit, &m) in units.groups.iter().zip(member) {
            let (total, forward) = time(unit);
            load.total.push((m, total));
            load.forward.push((m, forward));
            load.backward.push((m, total - forward));
        }
        load
    }

    /// `+ Σ_e c_e z[e]` with `z[e] ≥ cut of T_e` by the memberships `member`; a hyperedge
    /// counts on the side of its producers.
    pub fn add_communication(&mut self, b: &mut Builder, hyperedges: &[Hyperedge], member: &[Var]) {
        for e in hyperedges {
            let members: Vec<Var> = e.groups.iter().map(|&g| member[g]).collect();
            let z = cut_indicator(b, &members);
            self.total.push((z, e.cost));
            if e.backward {
                &mut self.backward
            } else {
                &mut self.forward
            }
            .push((z, e.cost));
        }
    }
}

/// The set-up and the end every load model over units shares (the assignment model here,
/// [`super::stages`] and [`super::interleaved`]): one budget for the whole solve — the
/// load bounds take a quarter of it, the model is built within it, and HiGHS gets what is
/// left — and the solve's statistics.
pub(crate) struct LoadModel<'p> {
    problem: &'p Problem<'p>,
    started: Instant,
    budget: Budget,
    pub(crate) stats: Stats,
}

impl<'p> LoadModel<'p> {
    /// The builder for a model over `units` of `columns` columns within the problem's
    /// budget (starting now), its statistics counting the units; the no-plan outcome
    /// naming the model when its estimated bytes pass the memory budget.
    pub(crate) fn start(
        problem: &'p Problem<'p>,
        started: Instant,
        units: &Grouping,
        columns: f64,
    ) -> Result<(LoadModel<'p>, Builder), Box<Outcome>> {
        let budget = problem.limits.budget();
        let stats = Stats {
            groups: Some(units.len()),
            ..Stats::default()
        };
        if let Some(outcome) = super::highs::refuse_model_size(&budget, columns, &stats) {
            return Err(Box::new(outcome));
        }
        let model = LoadModel {
            problem,
            started,
            budget,
            stats,
        };
        Ok((model, Builder::within(budget)))
    }

    /// The load bounds ([`crate::solve::bounds::load::for_model`], a quarter of the budget) and
    /// the objective's columns, bounded by them as `--load-bound` says.
    pub(crate) fn objective(
        &mut self,
        b: &mut Builder,
        units: &Grouping,
        hyperedges: &[Hyperedge],
        devices: &DeviceSet,
        sync: bool,
    ) -> (ModelBounds, LoadObjective) {
        let bound_use = self.problem.limits.ip.load_bound;
        let bounds = crate::solve::bounds::load::for_model(
            units,
            hyperedges,
            devices,
            sync,
            bound_use,
            &self.budget.share(0.25),
            &mut self.stats,
        );
        let objective = LoadObjective::new(b, sync, &bounds.in_model(bound_use));
        (bounds, objective)
    }

    /// HiGHS on `b` from `warm_values` down to the bound `lower`; its plan read by
    /// `placement`, and the outcome the better of it and `warm` ([`finish`]). `size` names
    /// the model's parts; the note says it with the builder's columns and rows.
    pub(crate) fn solve(
        mut self,
        b: Builder,
        size: String,
        warm: Option<Candidate>,
        warm_values: Option<&[f64]>,
        lower: f64,
        placement: impl FnOnce(&[f64]) -> Placement,
    ) -> Result<Outcome, SolveError> {
        (self.stats.notes).push(format!("{size}, {} columns, {} rows", b.columns(), b.rows));
        let solved = run_to_bound(b, self.problem, self.started, warm_values, lower)?;
        let from_ip = solved.columns.as_deref().map(placement);
        finish(
            self.problem,
            &solved,
            from_ip,
            warm,
            self.stats,
            self.started,
        )
    }
}

/// The objective's columns: τ (throughput), or F and B (sync).
pub(crate) enum LoadObjective {
    MaxLoad(Var),
    Sync { forward: Var, backward: Var },
}

impl LoadObjective {
    /// `τ ≥` the bound on the max load (throughput), or `F ≥` the bound on the forward
    /// side, `B ≥` the bound on the backward side and `F + B ≥` the bound on the max load
    /// (sync; see [`ModelBounds`]).
    pub fn new(b: &mut Builder, sync: bool, bounds: &ModelBounds) -> Self {
        if sync {
            let forward = b.continuous(1.0, bounds.forward, f64::INFINITY);
            let backward = b.continuous(1.0, bounds.backward, f64::INFINITY);
            if bounds.total > bounds.forward + bounds.backward {
                b.ge(&[(forward, 1.0), (backward, 1.0)], bounds.total);
            }
            LoadObjective::Sync { forward, backward }
        } else {
            LoadObjective::MaxLoad(b.continuous(1.0, bounds.total, f64::INFINITY))
        }
    }

    /// `τ ≥ total` (throughput) or `F ≥ forward`, `B ≥ backward` (sync); zero terms dropped.
    pub fn add_load_rows(&self, b: &mut Builder, load: Load) {
        let row = |b: &mut Builder, mut terms: Vec<(Var, f64)>, objective: Var| {
            terms.retain(|&(_, c)| c != 0.0);
            terms.push((objective, -1.0));
            b.le(&terms, 0.0);
        };
        match *self {
            LoadObjective::MaxLoad(tau) => row(b, load.total, tau),
            LoadObjective::Sync { forward, backward } => {
                row(b, load.forward, forward);
                row(b, load.backward, backward);
            }
        }
    }

    /// Capacity of `count` devices of one kind whose summed load is `all`:
    /// `Σ load ≤ count · τ` (sync: `Σ FW ≤ count · F`, `Σ BW ≤ count · B`); zero terms dropped.
    pub fn add_capacity_rows(&self, b: &mut Builder, all: &Load, count: f64) {
        let row = |b: &mut Builder, terms: &[(Var, f64)], objective: Var| {
            let mut terms: Vec<(Var, f64)> =
                terms.iter().copied().filter(|&(_, c)| c != 0.0).collect();
            terms.push((objective, -count));
            b.le(&terms, 0.0);
        };
        match *self {
            LoadObjective::MaxLoad(tau) => row(b, &all.total, tau),
            LoadObjective::Sync { forward, backward } => {
                row(b, &all.forward, forward);
                row(b, &all.backward, backward);
            }
        }
    }
}

//! The contiguous max-load and sync IPs as a chain of ideals (stages).
//!
//! A contiguous placement (MODEL.md, as the scorer checks it) is a chain of ideals
//! `∅ = I_0 ⊆ I_1 ⊆ … ⊆ I_T = V` of the group DAG, each difference on one device, with
//! `T = k + ℓ` stages (empty stages allowed). Devices of one kind are interchangeable, so
//! a stage only has to choose its *kind*. Groups g, stages t, arcs (u, v) of the group
//! DAG. The constraint families, in the order [`solve`] adds them, each by the function
//! named:
//!
//! ```text
//! variables        Y[g,t] ∈ {0,1}: g ∈ I_t (Y[g,0] = 0 is implicit);
//!                  κ[t] ∈ {0,1}: stage t is an accelerator;
//!                  A[g,t], C[g,t] ∈ [0,1]: g in stage t on an accelerator / a CPU,
//!                  A[g,t] = 0 if g is unsupported or too large
//! ideal_chain      (super::units) Y[g,T] = 1,  Y[g,t] ≤ Y[g,t+1],
//!                  Y[v,t] ≤ Y[u,t]  (u → v): every I_t is an ideal
//! add_kind_count   Σ_t κ[t] = k                    (so T − k = ℓ stages are CPUs)
//! add_kind_split   A[g,t] + C[g,t] = Y[g,t] − Y[g,t−1],  A[g,t] ≤ κ[t],  C[g,t] ≤ 1 − κ[t]
//! LoadObjective    τ ≥ LB (sync: F ≥ LB_F, B ≥ LB_B, F + B ≥ LB)   (solve::bounds::load)
//! for every stage t:
//!   add_memory     Σ_g size_g A[g,t] ≤ M
//!   add_loads      z[e,t] ≥ cut of T_e by A[·,t]    (units::cut_indicator)
//!                  throughput: τ ≥ Σ_g fpga_g A[g,t] + Σ_e c_e z[e,t],  τ ≥ Σ_g cpu_g C[g,t]
//!                  sync: F ≥ forward parts, B ≥ backward parts of the same;  min F + B
//! LoadObjective::add_capacity_rows (not under `--ip-experiment nocapacity`)
//!                  Σ_t acc_load(t) ≤ k τ,  Σ_t cpu_load(t) ≤ ℓ τ     (F, B for sync)
//! ```
//!
//! No big-M appears: the kind split `A + C` replaces "if stage t is an accelerator then
//! …". The ideal constraints are the precedence constraints of a scheduling polytope and
//! give a much tighter relaxation than per-device contiguity with device positions
//! (docs/ip.md compares them). Stage t's set is `I_t \ I_{t−1}`: contiguous, and the
//! stages are a pipeline order, so the plan passes the scorer's contiguity check.
//!
//! **Under a pipeline schedule** (`--schedule`, throughput only; [`Pipeline`]) a stage
//! holds its size plus its stash `S_g` (the groups' stashed activations,
//! [`crate::model::schedule::held_bytes`]) once more for every further micro-batch in flight
//! at its place in the chain, as the positioned DP and the scorer count it:
//!
//! ```text
//! add_memory       Σ_g (size_g + (c_t − 1)·S_g) A[g,t] ≤ M,   c_t = c(T − t stages, first place)
//! ```
//!
//! (coefficients above M are clamped to 2M: such a group cannot be on that stage). That is
//! the count of stage t when the used stages are the last ones, `T − t` of them from t on:
//! 1F1B `min(m, T − t)`, GPipe `m`. It is exact without ordering the stages: a used stage
//! with fewer used stages after it has at most this count in truth, so every solution fits
//! as the scorer counts it, and moving a chain's empty stages to its front gives every used
//! stage exactly its true count, so no plan is lost.
//!
//! **Recomputation** (`--recompute auto`; [`crate::model::recompute`]) where `c_t > 1`:
//! `ρ[t] ∈ {0,1}` (stage t recomputes) and `R[g,t] = A[g,t]·ρ[t]` linearised exactly
//! (`R ≤ A`, `R ≤ ρ`, `R ≥ A + ρ − 1`; A is integral at integral Y), so the stage's held
//! part is `A − R` and its recomputing part `R`:
//!
//! ```text
//! add_memory       Σ_g (size_g + (c_t − 1)·S_g)(A[g,t] − R[g,t]) ≤ M
//!                  Σ_g size_g R[g,t] + c_t·Σ_u b_u w[u,t] ≤ M,
//!                  w[u,t] ≥ R[g(x),t] − A[g(u),t]  for every forward edge u → x (w ≥ 0)
//! add_loads        τ ≥ (stage t's load) + Σ_g F_g R[g,t]
//! ```
//!
//! with `b_u` the output bytes of forward node u, `w[u,t]` at least "u's tensor enters
//! recomputing stage t" (exact at the optimum of any row it is in: it only appears with a
//! positive coefficient in a `≤` row) and `F_g` the forward accelerator time of g. No big-M.
//!
//! Warm start ([`Stages::warm_values`]): the DP plan, its devices in a pipeline order
//! (under a schedule, the order in which the scorer finds every accelerator fits, with the
//! used stages last).
//! Extraction ([`Stages::placement`]): accelerators and CPUs numbered in stage order, each
//! group on the stage where it first enters the chain.
//!
//! Size: T·(3U + 1) columns, O(T·(U + A + Σ|T_e|)) rows.

use std::time::Instant;

use super::dp_warm_start;
use super::highs::{Builder, Var};
use super::throughput::{Load, LoadModel, LoadObjective};
use super::units::{ideal_chain, memory_binds};
use crate::model::grouping::{Grouping, Hyperedge};
use crate::model::recompute::{recompute_data, Recompute, RecomputeData};
use crate::model::schedule::{held_bytes, Pipeline};
use crate::model::{Device, DeviceSet, Placement, Workload};
use crate::solve::{Objective, Outcome, Problem, SolveError};

/// Solves the contiguous throughput or sync IP as a chain of stages.
pub fn solve(problem: &Problem) -> Result<Outcome, SolveError> {
    let started = Instant::now();
    let w = problem.workload;
    let sync = problem.objective == Objective::Sync;
    let (units, arcs) = Grouping::units(w, true);
    let devices = w.devices();

    let (k, l, n_units) = (
        devices.accelerators as f64,
        devices.cpus as f64,
        units.len() as f64,
    );
    let columns = 3.0 * (k + l) * n_units;
    let (mut ip, mut b) = match LoadModel::start(problem, started, &units, columns) {
        Ok(started) => started,
        Err(refused) => return Ok(*refused),
    };
    let model = Stages::variables(&mut b, &units, devices, w, problem.pipeline);
    ideal_chain(&mut b, &model.y, &arcs);
    model.add_kind_count(&mut b, devices.accelerators);
    model.add_kind_split(&mut b);
    let hyperedges = units.hyperedges(w, sync);
    let (bounds, objective) = ip.objective(&mut b, &units, &hyperedges, devices, sync);
    let (mut all_acc, mut all_cpu) = (Load::default(), Load::default());
    let recompute = model.recompute_data(w);
    let mut rho = Vec::new();
    for t in 0..model.stages() {
        let recomputed = model.add_memory(&mut b, t, recompute.as_ref());
        rho.push(recomputed.as_ref().map(|r| r.rho));
        model.add_loads(
            &mut b,
            t,
            &hyperedges,
            &objective,
            [&mut all_acc, &mut all_cpu],
            recomputed.map(|r| r.time),
        );
    }
    if problem.limits.ip.capacity_rows {
        objective.add_capacity_rows(&mut b, &all_acc, devices.accelerators as f64);
        objective.add_capacity_rows(&mut b, &all_cpu, devices.cpus as f64);
    }

    let warm = dp_warm_start(problem, &mut ip.stats);
    let warm_values = warm
        .as_ref()
        .and_then(|c| model.warm_values(&c.placement, &arcs, devices, w, &rho));
    let size = format!(
        "{} groups, {} stages, {} hyperedges",
        units.len(),
        model.stages(),
        hyperedges.len()
    );
    let lower = bounds.objective(sync);
    ip.solve(b, size, warm, warm_values.as_deref(), lower, |values| {
        model.placement(values, &rho)
    })
}

/// The chain-of-stages model's variables (module docs).
struct Stages<'a> {
    units: &'a Grouping,
    /// `y[g][t]`: g ∈ I_t.
    y: Vec<Vec<Var>>,
    /// `kind[t]`: stage t is an accelerator.
    kind: Vec<Var>,
    /// `acc[t][g]`, `cpu[t][g]`: g is in stage t, which is an accelerator / a CPU.
    acc: Vec<Vec<Var>>,
    cpu: Vec<Vec<Var>>,
    /// Memory per accelerator M, bytes.
    memory: f64,
    /// The pipeline schedule whose memory the stages hold, and each group's stash.
    pipeline: Option<(Pipeline, Vec<f64>)>,
}

impl<'a> Stages<'a> {
    /// `Y`, `κ` (binary) and `A`, `C` (continuous; `A = 0` for groups that do not fit an
    /// accelerator) for `T = k + ℓ` stages.
    fn variables(
        b: &mut Builder,
        units: &'a Grouping,
        devices: &DeviceSet,
        w: &Workload,
        pipeline: Option<Pipeline>,
    ) -> Self {
        let stages = devices.accelerators + devices.cpus;
        let memory = devices.memory_per_accelerator_bytes;
        let y = units
            .groups
            .iter()
            .map(|_| (0..stages).map(|_| b.binary(0.0, true)).collect())
            .collect();
        let kind = (0..stages).map(|_| b.binary(0.0, true)).collect();
        let pipeline = pipeline.map(|p| {
            let held = held_bytes(w);
            let stash = units
                .groups
                .iter()
                .map(|g| g.nodes.iter().map(|&v| held[v].stash_bytes).sum())
                .collect();
            (p, stash)
        });
        let mut acc: Vec<Vec<Var>> = vec![Vec::with_capacity(units.len()); stages];
        let mut cpu: Vec<Vec<Var>> = vec![Vec::with_capacity(units.len()); stages];
        for unit in &units.groups {
            for t in 0..stages {
                acc[t].push(b.continuous(
                    0.0,
                    0.0,
                    if unit.fits_accelerator(memory) {
                        1.0
                    } else {
                        0.0
                    },
                ));
                cpu[t].push(b.continuous(0.0, 0.0, 1.0));
            }
        }
        Stages {
            units,
            y,
            kind,
            acc,
            cpu,
            memory,
            pipeline,
        }
    }

    /// Micro-batches in flight at stage t under the schedule (1 without one): with the
    /// used stages last, stage t is first of a chain of `T − t` stages (module docs).
    fn in_flight(&self, t: usize) -> usize {
        self.pipeline
            .as_ref()
            .map_or(1, |(p, _)| p.in_flight(self.stages() - t, 0))
    }

    /// The number of stages T.
    fn stages(&self) -> usize {
        self.kind.len()
    }

    /// `Σ_t κ[t] = k`.
    fn add_kind_count(&self, b: &mut Builder, accelerators: usize) {
        b.eq(
            &self.kind.iter().map(|&v| (v, 1.0)).collect::<Vec<_>>(),
            accelerators as f64,
        );
    }

    /// `A[g,t] + C[g,t] = Y[g,t] − Y[g,t−1]`, `A[g,t] ≤ κ[t]`, `C[g,t] ≤ 1 − κ[t]`.
    fn add_kind_split(&self, b: &mut Builder) {
        for g in 0..self.units.len() {
            for t in 0..self.stages() {
                let (a, c, kind) = (self.acc[t][g], self.cpu[t][g], self.kind[t]);
                let mut terms = vec![(a, 1.0), (c, 1.0), (self.y[g][t], -1.0)];
                if t > 0 {
                    terms.push((self.y[g][t - 1], 1.0));
                }
                b.eq(&terms, 0.0);
                if self.fits(g) {
                    b.le(&[(a, 1.0), (kind, -1.0)], 0.0);
                }
                b.le(&[(c, 1.0), (kind, 1.0)], 1.0);
            }
        }
    }

    /// Whether group g may be on an accelerator stage (its `A` columns are not fixed to 0).
    fn fits(&self, g: usize) -> bool {
        self.units[g].fits_accelerator(self.memory)
    }

    /// What the recomputation rows read (`--recompute auto` under a schedule): every
    /// forward edge `u → x` between groups with `b_u > 0` as `(u's group, x's group, b_u)`,
    /// and each group's forward accelerator time `F_g`.
    fn recompute_data(&self, w: &Workload) -> Option<RecomputeData> {
        let (pipeline, _) = self.pipeline.as_ref()?;
        if pipeline.recompute != Recompute::Auto {
            return None;
        }
        Some(recompute_data(self.units, w))
    }

    /// `Σ_g size_g A[g,t] ≤ M` for stage t (when it can bind); under a schedule
    /// `Σ_g (size_g + (c_t − 1)·S_g) A[g,t] ≤ M`, and with recomputation the two rows of
    /// the module docs, returning `ρ[t]` and the recomputation time `Σ_g F_g R[g,t]`.
    fn add_memory(
        &self,
        b: &mut Builder,
        t: usize,
        recompute: Option<&RecomputeData>,
    ) -> Option<Recomputed> {
        let Some((_, stash)) = &self.pipeline else {
            if !memory_binds(self.units, self.memory) {
                return None;
            }
            let terms: Vec<(Var, f64)> = (self.units.groups.iter().enumerate())
                .filter(|&(g, unit)| unit.size_bytes > 0.0 && self.fits(g))
                .map(|(g, unit)| (self.acc[t][g], unit.size_bytes))
                .collect();
            b.le(&terms, self.memory);
            return None;
        };
        let c = self.in_flight(t);
        let held_bytes = |g: usize| {
            (self.units[g].size_bytes + (c - 1) as f64 * stash[g]).min(2.0 * self.memory)
        };
        // With one micro-batch in flight recomputing never fits better (`mem_r ≥ mem`).
        let recompute = recompute.filter(|_| c > 1);
        let Some(data) = recompute else {
            let terms: Vec<(Var, f64)> = (0..self.units.len())
                .filter(|&g| self.fits(g))
                .map(|g| (self.acc[t][g], held_bytes(g)))
                .filter(|&(_, bytes)| bytes > 0.0)
                .collect();
            if terms.iter().map(|&(_, bytes)| bytes).sum::<f64>() > self.memory {
                b.le(&terms, self.memory);
            }
            return None;
        };
        let rho = b.binary(0.0, true);
        let (mut held, mut recomputing, mut time) = (Vec::new(), Vec::new(), Vec::new());
        let mut r = vec![None; self.units.len()];
        for g in (0..self.units.len()).filter(|&g| self.fits(g)) {
            let (a, rg) = (self.acc[t][g], b.continuous(0.0, 0.0, 1.0));
            r[g] = Some(rg);
            b.le(&[(rg, 1.0), (a, -1.0)], 0.0);
            b.le(&[(rg, 1.0), (rho, -1.0)], 0.0);
            b.le(&[(a, 1.0), (rho, 1.0), (rg, -1.0)], 1.0);
            if held_bytes(g) > 0.0 {
                held.push((a, held_bytes(g)));
                held.push((rg, -held_bytes(g)));
            }
            let size = self.units[g].size_bytes.min(2.0 * self.memory);
            if size > 0.0 {
                recomputing.push((rg, size));
            }
            if data.forward[g] > 0.0 {
                time.push((rg, data.forward[g]));
            }
        }
        for (producer, readers, bytes) in &data.inputs {
            let coefficient = (c as f64 * bytes).min(2.0 * self.memory);
            let w = b.continuous(0.0, 0.0, 1.0);
            for &x in readers {
                let Some(rx) = r[x] else { continue };
                // w ≥ R[x,t] − A[u,t] (A[u,t] = 0 where u cannot be on an accelerator).
                let mut terms = vec![(rx, 1.0), (w, -1.0)];
                if self.fits(*producer) {
                    terms.push((self.acc[t][*producer], -1.0));
                }
                b.le(&terms, 0.0);
            }
            recomputing.push((w, coefficient));
        }
        b.le(&held, self.memory);
        b.le(&recomputing, self.memory);
        Some(Recomputed { rho, time })
    }

    /// Stage t's accelerator part (with `z[e,t] ≥ cut of T_e by A[·,t]`) and CPU part
    /// against the objective, each also added to the sums `all = [accelerators, CPUs]`
    /// for the capacity rows.
    fn add_loads(
        &self,
        b: &mut Builder,
        t: usize,
        hyperedges: &[Hyperedge],
        objective: &LoadObjective,
        all: [&mut Load; 2],
        recompute_time: Option<Vec<(Var, f64)>>,
    ) {
        let [all_acc, all_cpu] = all;
        let mut acc = Load::compute(self.units, &self.acc[t], |unit| {
            (unit.fpga_latency, unit.forward_fpga_latency)
        });
        acc.add_communication(b, hyperedges, &self.acc[t]);
        for term in recompute_time.into_iter().flatten() {
            acc.total.push(term);
            acc.backward.push(term);
        }
        all_acc.extend(&acc);
        objective.add_load_rows(b, acc);
        let cpu = Load::compute(self.units, &self.cpu[t], |unit| {
            (unit.cpu_latency, unit.forward_cpu_latency)
        });
        all_cpu.extend(&cpu);
        objective.add_load_rows(b, cpu);
    }

    /// Values of the integer columns (Y then κ) for a contiguous `placement`: its devices
    /// in a pipeline order, the accelerators' kinds set, the unused stages at the end with
    /// the remaining kinds (a group is where its first node is). `None` if the devices
    /// feed each other in a cycle.
    fn warm_values(
        &self,
        placement: &Placement,
        arcs: &[(usize, usize)],
        devices: &DeviceSet,
        w: &Workload,
        rho: &[Option<Var>],
    ) -> Option<Vec<f64>> {
        let device_of_group: Vec<Device> = self
            .units
            .groups
            .iter()
            .map(|g| placement.assignment[g.nodes[0]])
            .collect();
        let order = match &self.pipeline {
            Some((pipeline, _)) => {
                let mut memory = crate::score::pipeline_memory(w, placement, pipeline).ok()?;
                memory.sort_by_key(|d| d.stage);
                memory.into_iter().map(|d| d.device).collect()
            }
            None => pipeline_order(&device_of_group, arcs)?,
        };
        let stages = self.stages();
        // Under a schedule the used stages are the last ones (their counts are then exact).
        let shift = if self.pipeline.is_some() {
            stages.checked_sub(order.len())?
        } else {
            0
        };
        let mut kinds = vec![0.0; stages];
        let mut accelerators = 0;
        for (t, device) in order.iter().enumerate() {
            if device.is_accelerator() {
                kinds[shift + t] = 1.0;
                accelerators += 1;
            }
        }
        let unused = (0..shift).chain(shift + order.len()..stages);
        for t in unused {
            if accelerators < devices.accelerators {
                kinds[t] = 1.0;
                accelerators += 1;
            }
        }
        let mut values = Vec::with_capacity(self.units.len() * stages + stages);
        for device in &device_of_group {
            let s = order
                .iter()
                .position(|d| d == device)
                .expect("every used device has a stage");
            values.extend((0..stages).map(|t| f64::from(t >= shift + s)));
        }
        values.extend(kinds);
        // ρ[t] (created stage by stage, after Y and κ): the device there recomputes.
        for (t, r) in rho.iter().enumerate() {
            if r.is_some() {
                let recomputes = t >= shift
                    && order
                        .get(t - shift)
                        .is_some_and(|&d| placement.recomputes(d));
                values.push(f64::from(recomputes));
            }
        }
        Some(values)
    }

    /// The plan of a solution: accelerators and CPUs numbered in stage order, each group
    /// on the first stage whose ideal holds it, the accelerators of stages with `ρ[t] = 1`
    /// recomputing.
    fn placement(&self, values: &[f64], rho: &[Option<Var>]) -> Placement {
        let on = |var: Var| values[var.index()] > 0.5;
        let (mut next_acc, mut next_cpu) = (0, 0);
        let mut device_of_stage = Vec::with_capacity(self.stages());
        for &kind in &self.kind {
            if on(kind) {
                device_of_stage.push(Device::Accelerator(next_acc));
                next_acc += 1;
            } else {
                device_of_stage.push(Device::Cpu(next_cpu));
                next_cpu += 1;
            }
        }
        let device: Vec<Device> = (self.y.iter())
            .map(|row| {
                device_of_stage[row.iter().position(|&y| on(y)).unwrap_or(self.stages() - 1)]
            })
            .collect();
        let recompute = (rho.iter().zip(&device_of_stage))
            .filter(|(r, d)| r.is_some_and(on) && d.is_accelerator() && device.contains(d))
            .map(|(_, &d)| d)
            .collect();
        self.units.placement(&device).with_recompute(recompute)
    }
}

/// A stage's recomputation choice and the time it adds.
struct Recomputed {
    rho: Var,
    time: Vec<(Var, f64)>,
}

/// The devices used by `device_of_group` in a pipeline order (a topological order of the
/// device graph that the group arcs induce; Kahn's algorithm, last ready first), or `None`
/// when the devices feed each other in a cycle.
fn pipeline_order(device_of_group: &[Device], arcs: &[(usize, usize)]) -> Option<Vec<Device>> {
    let mut used: Vec<Device> = device_of_group.to_vec();
    used.sort();
    used.dedup();
    let index = |d: Device| used.binary_search(&d).expect("a used device");
    let m = used.len();
    let mut succ = vec![Vec::new(); m];
    let mut indegree = vec![0usize; m];
    for &(a, b) in arcs {
        let (da, db) = (index(device_of_group[a]), index(device_of_group[b]));
        if da != db && !succ[da].contains(&db) {
            succ[da].push(db);
            indegree[db] += 1;
        }
    }
    let mut ready: Vec<usize> = (0..m).filter(|&d| indegree[d] == 0).collect();
    let mut order = Vec::with_capacity(m);
    while let Some(d) = ready.pop() {
        order.push(used[d]);
        for &e in &succ[d] {
            indegree[e] -= 1;
            if indegree[e] == 0 {
                ready.push(e);
            }
        }
    }
    (order.len() == m).then_some(order)
}

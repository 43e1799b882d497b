//! The max-load IP under Megatron-LM's interleaved 1F1B schedule (`--schedule interleaved:v`).
//!
//! An interleaved plan ([`crate::model::schedule`]) puts `v` chunks on each of the `p = k`
//! accelerators (CPU cores hold nothing); chunk `c` of accelerator `d` is stage
//! `t = c·p + d` of a chain of `T = p·v` stages, and the stages form a chain of ideals
//! `∅ = I_0 ⊆ I_1 ⊆ … ⊆ I_T = V` of the group DAG ([`crate::score::contiguity::interleaved_stages`]),
//! empty stages allowed. Unlike [`super::stages`], a stage's device is fixed by its index,
//! and a device is the union of its chunks, which is not contiguous. Groups g, stages t,
//! devices d, arcs (u, w) of the group DAG, hyperedges e = (T_e, c_e). The constraint
//! families, in the order [`solve`] adds them:
//!
//! ```text
//! variables        Y[g,t] ∈ {0,1}: g ∈ I_{t+1} (t = 0 … T−1);
//!                  A[g,t] ∈ [0,1]: g in stage t;  D[g,d] ∈ [0,1]: g on device d
//! ideal_chain      (super::units) Y[g,T−1] = 1,  Y[g,t] ≤ Y[g,t+1],
//!                  Y[w,t] ≤ Y[u,t]  (u → w): every I_t is an ideal
//! add_stages       A[g,t] = Y[g,t] − Y[g,t−1]  (Y[g,−1] = 0);  A[g,t] = 0 if g cannot be
//!                  on an accelerator (then the model is infeasible: nowhere else to go)
//! add_devices      D[g,d] = Σ_c A[g, c·p + d]
//! LoadObjective    τ ≥ LB                                (solve::bounds::load, ℓ = 0)
//! for every device d:
//!   add_loads      z[e,d] ≥ cut of T_e by D[·,d]          (units::cut_indicator)
//!                  τ ≥ Σ_g fpga_g D[g,d] + Σ_e c_e z[e,d]
//!   add_memory     Σ_c Σ_g (r_g + n_c·S_g)·A[g, c·p + d] ≤ M
//!                        for every maximal count vector n ∈ N_d (below)
//! capacity         Σ_d load(d) ≤ p·τ
//! ```
//!
//! with `r_g` and `S_g` the group's resident and stashed bytes
//! ([`crate::model::schedule::held_bytes`]; their sum is `size_g`).
//!
//! **The memory rows are exact.** Device d runs its tasks in the order
//! [`crate::model::schedule::device_order`]; after each forward step the stashes held are
//! `n_c` micro-batches of each chunk c (forwards minus backwards of chunk c so far), a
//! vector that does not depend on the plan. So the device holds at its peak
//! `resident + max_{n ∈ prefixes} Σ_c n_c·a_c` with `a_c = Σ_g S_g A[g, c·p + d]` ≥ 0,
//! which is [`crate::model::schedule::peak_stash_bytes`] exactly. Since every `a_c ≥ 0`,
//! a vector dominated componentwise by another never gives the maximum, so `N_d` keeps
//! only the maximal ones; "the maximum ≤ M" is "every one ≤ M": one linear row each, at
//! integral Y exactly the scorer's memory. `|N_d|` is small (at most 6 for v = 2 and 3,
//! 11 for v = 4, over p ≤ 5 and m ≤ 4p: the unit test here, which also checks the
//! exactness against the replay on random stashes), found in O(m·v·|N|) per device.
//!
//! **Loads** are per device (the union of its chunks), MODEL.md's load: the cut rows see
//! `D`, which is integral at integral Y. The bound `LB` is that of every assignment of
//! the groups to k accelerators (the non-contiguous plans, of which the interleaved ones
//! are a subset; recomputation only adds time, so it stays a bound).
//!
//! **Recomputation** (`--recompute auto`; [`crate::model::recompute`], "Under
//! interleaved"): device d recomputes all its chunks or none. For every device whose
//! memory rows can bind, `ρ_d ∈ {0,1}` and `R[g,t] = A[g,t]·ρ_d` for its stages t,
//! linearised exactly (`R ≤ A`, `R ≤ ρ_d`, `R ≥ A + ρ_d − 1`; A is integral at integral
//! Y), so that `A − R` is the part held when it does not recompute and `R` the part when
//! it does; the rows above become, with `in[u,t] ≥ R[x,t] − A[u,t]` for every forward edge
//! `u → x` between groups with `b_u > 0` (`in ≥ 0`; at least "u's tensor enters stage t of
//! a recomputing device", exact at the optimum of any row it is in: it only appears with a
//! positive coefficient in `≤` rows) and `i_t = Σ_u b_u in[u,t]`:
//!
//! ```text
//! add_memory     Σ_c Σ_g (r_g + n_c·S_g)·(A − R)[g, c·p + d] ≤ M          n ∈ N_d
//!                Σ_{c'} Σ_g (r_g + [c' = c]·S_g)·R[g, c'·p + d]
//!                    + Σ_{c'} n_{c'}·i_{c'·p+d} ≤ M                      n ∈ N^B_{d,c}, every c
//! add_loads      τ ≥ load(d) + Σ_t Σ_g F_g R[g,t]   (t over d's stages)
//! ```
//!
//! with `N^B_{d,c}` the maximal held-input vectors of d's backward steps of chunk c
//! ([`crate::model::recompute::backward_input_vectors`]; a dominated vector never gives
//! the maximum, as `i ≥ 0`) and `F_g` the group's forward accelerator time. At ρ_d = 0,
//! `R = 0` and `in = 0` satisfy the recompute rows and the held rows are the rows above;
//! at ρ_d = 1, `A − R = 0` and the recompute rows are exactly `mem_r(d) ≤ M`. The product
//! columns take the place of big-M terms: no big-M appears anywhere. A device whose held
//! rows cannot bind (each group in its largest term fits) gets no ρ_d: recomputing only
//! adds time there. A device with ρ_d also gets MODEL.md's rule
//!
//! ```text
//! add_size_row   Σ_g size_g·D[g,d] ≤ M
//! ```
//!
//! which every plan obeys (the evaluator checks it: [`crate::score::evaluate`]) and the
//! held rows imply (the schedule holds every chunk's stash at once after its warm-up), but
//! `mem_r(d)` may be below it: a recomputing device never holds two chunks' stashes at once.
//!
//! Warm start: the best valid plan among the held plan of [`super::presolve`] (the
//! interleaved DP's plan within half the budget, [`crate::solve::dp::interleaved`], or
//! the caller's warm start; a single accelerator) and two cuts of a topological
//! order into T consecutive stages dealt round-robin to the devices ([`crate::model::schedule::split_plans`]),
//! which answer at once on graphs where the DP does not. [`crate::solve::dp::interleaved::chain_plans`] (two contiguous DP
//! plans dealt to the chunks) is the interleaved DP's first upper bound.
//! Extraction ([`Interleaved::placement`]): each group on the first stage whose ideal
//! holds it, stage t being chunk `⌊t/p⌋` of accelerator `t mod p`.
//!
//! Warm values set `ρ_d` from the plan's recompute marks (a held plan that does not fit
//! holding its stashes is marked by [`crate::score::recompute_where_needed`] first).
//!
//! Size: `T·U` binaries, `(T + p)·U` continuous, `p·H` cut columns for U groups and H
//! hyperedges; O(T·(U + A) + p·Σ|T_e| + p·|N|·T·U) rows and nonzeros. With
//! recomputation `p` more binaries, `T·(U + I)` more columns for I producer nodes and
//! O(T·(U + Σ readers) + p·v·|N^B|·T·(U + I)) more rows and nonzeros.

use std::time::Instant;

use super::highs::{Builder, Var};
use super::throughput::{Load, LoadModel, LoadObjective};
use super::units::ideal_chain;
use crate::model::grouping::{Grouping, Hyperedge};
use crate::model::recompute::{backward_input_vectors, recompute_data, Recompute, RecomputeData};
use crate::model::schedule::{held_bytes, split_plans, stash_vectors};
use crate::model::{Device, DeviceSet, Placement};
use crate::solve::candidate::Candidate;
use crate::solve::{Infeasibility, MethodId, Outcome, Problem, SolveError, Stats, Status};

/// Solves the max-load IP of `problem` under its interleaved schedule.
pub fn solve(problem: &Problem) -> Result<Outcome, SolveError> {
    let started = Instant::now();
    let w = problem.workload;
    let pipeline = problem
        .pipeline
        .expect("the interleaved IP runs under a schedule");
    let (units, arcs) = Grouping::units(w, true);
    let devices = DeviceSet {
        cpus: 0,
        ..w.devices().clone()
    };
    let p = devices.accelerators;
    let v = pipeline.schedule.chunks();
    if p == 0 {
        return Ok(Outcome {
            method: MethodId::Ip,
            placement: None,
            objective: f64::INFINITY,
            bound: f64::INFINITY,
            status: Status::infeasible(Infeasibility::InterleavedWithoutAccelerators),
            stats: Stats {
                groups: Some(units.len()),
                ..Stats::default()
            },
        });
    }
    let unsupported = |e: crate::model::schedule::ScheduleError| SolveError::Unsupported {
        method: MethodId::Ip,
        what: format!("{} with these sizes: {e}", pipeline.schedule),
    };
    let vectors = (0..p)
        .map(|d| stash_vectors(&pipeline, p, d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(unsupported)?;
    let columns = ((2 * p * v + p) * units.len()) as f64;
    let (mut ip, mut b) = match LoadModel::start(problem, started, &units, columns) {
        Ok(started) => started,
        Err(refused) => return Ok(*refused),
    };
    let model = Interleaved::variables(&mut b, &units, &devices, v);
    ideal_chain(&mut b, &model.y, &arcs);
    model.add_stages(&mut b);
    model.add_devices(&mut b);
    let hyperedges = units.hyperedges(w, false);
    let (bounds, objective) = ip.objective(&mut b, &units, &hyperedges, &devices, false);
    let mut all = Load::default();
    let held = held_bytes(w);
    let stash: Vec<f64> = (units.groups.iter())
        .map(|g| g.nodes.iter().map(|&x| held[x].stash_bytes).sum())
        .collect();
    let recompute = (pipeline.recompute == Recompute::Auto).then(|| recompute_data(&units, w));
    let mut memory_rows = 0;
    let mut rho = Vec::with_capacity(p);
    for (d, vectors) in vectors.iter().enumerate() {
        // Each device's rows cost O(|vectors|·v·groups) to price (v = 256: seconds).
        if b.halted() {
            break;
        }
        let recomputed = match &recompute {
            Some(data) if model.held_binds(&mut b, vectors, &stash) => {
                let inputs =
                    backward_input_vectors(pipeline.schedule, p, pipeline.micro_batches, d)
                        .map_err(unsupported)?;
                let r = model.add_recompute(&mut b, d, &inputs, &stash, data);
                memory_rows += r.rows + model.add_size_row(&mut b, d);
                Some(r)
            }
            _ => None,
        };
        memory_rows += model.add_memory(&mut b, d, vectors, &stash, recomputed.as_ref());
        model.add_loads(
            &mut b,
            d,
            &hyperedges,
            &objective,
            &mut all,
            recomputed.as_ref(),
        );
        rho.push(recomputed.map(|r| r.rho));
    }
    if problem.limits.ip.capacity_rows {
        objective.add_capacity_rows(&mut b, &all, p as f64);
    }
    let warm = warm_start(problem, &units, p, v);
    let warm_values = warm
        .as_ref()
        .and_then(|c| model.warm_values(&c.placement, &rho));
    let size = format!(
        "{} groups, {p} devices x {v} chunks = {} stages, {} hyperedges, {memory_rows} memory rows",
        units.len(),
        model.stages(),
        hyperedges.len()
    );
    let lower = bounds.objective(false);
    ip.solve(b, size, warm, warm_values.as_deref(), lower, |values| {
        model.placement(values, &rho)
    })
}

/// The best-scoring start for HiGHS: the split plans of [`crate::model::schedule::split_plans`] and the problem's
/// own warm start, each scored as a candidate.
fn warm_start(problem: &Problem, units: &Grouping, p: usize, v: usize) -> Option<Candidate> {
    let held = problem
        .limits
        .warm_start
        .as_ref()
        .and_then(|placement| super::candidate(problem, placement.clone(), "warm start"));
    split_plans(units, p, v)
        .into_iter()
        .filter_map(|placement| super::candidate(problem, placement, "split"))
        .chain(held)
        .min_by(|a, b| a.score.total_cmp(&b.score))
}

/// The interleaved model's variables (module docs).
struct Interleaved<'a> {
    units: &'a Grouping,
    /// `y[g][t]`: g ∈ I_{t+1}.
    y: Vec<Vec<Var>>,
    /// `acc[t][g]`: g in stage t.
    acc: Vec<Vec<Var>>,
    /// `dev[d][g]`: g on device d.
    dev: Vec<Vec<Var>>,
    /// Accelerators p.
    devices: usize,
    /// Memory per accelerator M, bytes.
    memory: f64,
}

impl<'a> Interleaved<'a> {
    /// `Y` (binary), `A` and `D` (continuous; `A = D = 0` for groups that cannot be on an
    /// accelerator) for `T = p·v` stages.
    fn variables(b: &mut Builder, units: &'a Grouping, devices: &DeviceSet, v: usize) -> Self {
        let p = devices.accelerators;
        let stages = p * v;
        let memory = devices.memory_per_accelerator_bytes;
        let y = units
            .groups
            .iter()
            .map(|_| (0..stages).map(|_| b.binary(0.0, true)).collect())
            .collect();
        let upper = |g: usize| f64::from(u8::from(units[g].fits_accelerator(memory)));
        let acc = (0..stages)
            .map(|_| {
                (0..units.len())
                    .map(|g| b.continuous(0.0, 0.0, upper(g)))
                    .collect()
            })
            .collect();
        let dev = (0..p)
            .map(|_| {
                (0..units.len())
                    .map(|g| b.continuous(0.0, 0.0, upper(g)))
                    .collect()
            })
            .collect();
        Interleaved {
            units,
            y,
            acc,
            dev,
            devices: p,
            memory,
        }
    }

    fn stages(&self) -> usize {
        self.acc.len()
    }

    /// `A[g,t] = Y[g,t] − Y[g,t−1]`.
    fn add_stages(&self, b: &mut Builder) {
        for g in 0..self.units.len() {
            for t in 0..self.stages() {
                let mut terms = vec![(self.acc[t][g], 1.0), (self.y[g][t], -1.0)];
                if t > 0 {
                    terms.push((self.y[g][t - 1], 1.0));
                }
                b.eq(&terms, 0.0);
            }
        }
    }

    /// `D[g,d] = Σ_c A[g, c·p + d]`.
    fn add_devices(&self, b: &mut Builder) {
        let p = self.devices;
        for (d, row) in self.dev.iter().enumerate() {
            for (g, &x) in row.iter().enumerate() {
                let mut terms = vec![(x, -1.0)];
                terms.extend((d..self.stages()).step_by(p).map(|t| (self.acc[t][g], 1.0)));
                b.eq(&terms, 0.0);
            }
        }
    }

    /// `z[e,d] ≥ cut of T_e by D[·,d]` and `τ ≥ Σ_g fpga_g D[g,d] + Σ_e c_e z[e,d]`, the
    /// load also added to `all` for the capacity row.
    fn add_loads(
        &self,
        b: &mut Builder,
        d: usize,
        hyperedges: &[Hyperedge],
        objective: &LoadObjective,
        all: &mut Load,
        recomputed: Option<&Recomputed>,
    ) {
        let mut load = Load::compute(self.units, &self.dev[d], |unit| {
            (unit.fpga_latency, unit.forward_fpga_latency)
        });
        load.add_communication(b, hyperedges, &self.dev[d]);
        for &term in recomputed.iter().flat_map(|r| &r.time) {
            load.total.push(term);
            load.backward.push(term);
        }
        all.extend(&load);
        objective.add_load_rows(b, load);
    }

    /// The held bytes of group g in chunk c with `count` stashes in flight, `r_g + count·S_g`
    /// (clamped to 2M: such a group cannot be in that chunk).
    fn held(&self, g: usize, stash: &[f64], count: usize) -> f64 {
        let unit = &self.units[g];
        (unit.size_bytes - stash[g] + count as f64 * stash[g]).min(2.0 * self.memory)
    }

    /// Whether some held row of a device can bind: some `n` in `vectors` where the groups,
    /// each in its largest term, exceed M.
    fn held_binds(&self, b: &mut Builder, vectors: &[Vec<usize>], stash: &[f64]) -> bool {
        vectors.iter().any(|n| {
            if b.halted() {
                return false;
            }
            (0..self.units.len())
                .filter(|&g| self.units[g].fits_accelerator(self.memory))
                .map(|g| {
                    n.iter()
                        .map(|&k| self.held(g, stash, k))
                        .fold(0.0, f64::max)
                })
                .sum::<f64>()
                > self.memory
        })
    }

    /// `Σ_c Σ_g (r_g + n_c·S_g)·A[g, c·p + d] ≤ M` for every `n` in `vectors` (coefficients
    /// above M clamped to 2M: such a group cannot be in that chunk), `A − R` in place of A
    /// when the device may recompute (`recomputed`); a row is left out when it cannot bind
    /// (each group in its largest term still fits). Returns the rows added.
    fn add_memory(
        &self,
        b: &mut Builder,
        d: usize,
        vectors: &[Vec<usize>],
        stash: &[f64],
        recomputed: Option<&Recomputed>,
    ) -> usize {
        let p = self.devices;
        let mut rows = 0;
        for n in vectors {
            if b.halted() {
                break;
            }
            let mut terms = Vec::new();
            let mut most = 0.0;
            for g in 0..self.units.len() {
                if !self.units[g].fits_accelerator(self.memory) {
                    continue;
                }
                for (c, &count) in n.iter().enumerate() {
                    let bytes = self.held(g, stash, count);
                    if bytes > 0.0 {
                        terms.push((self.acc[c * p + d][g], bytes));
                        if let Some(r) = recomputed.and_then(|r| r.r[c][g]) {
                            terms.push((r, -bytes));
                        }
                    }
                }
                most += n
                    .iter()
                    .map(|&count| self.held(g, stash, count))
                    .fold(0.0, f64::max);
            }
            if most > self.memory {
                b.le(&terms, self.memory);
                rows += 1;
            }
        }
        rows
    }

    /// MODEL.md's rule `Σ_g size_g D[g,d] ≤ M` (coefficients clamped to 2M), which the
    /// held rows imply but a recomputing device's rows do not (module docs); left out when
    /// it cannot bind. Returns the rows added.
    fn add_size_row(&self, b: &mut Builder, d: usize) -> usize {
        let terms: Vec<(Var, f64)> = (0..self.units.len())
            .filter(|&g| {
                self.units[g].fits_accelerator(self.memory) && self.units[g].size_bytes > 0.0
            })
            .map(|g| {
                (
                    self.dev[d][g],
                    self.units[g].size_bytes.min(2.0 * self.memory),
                )
            })
            .collect();
        if terms.iter().map(|&(_, c)| c).sum::<f64>() > self.memory {
            b.le(&terms, self.memory);
            return 1;
        }
        0
    }

    /// Device d's recomputation (module docs): `ρ_d`, the products `R[g, c·p + d]` with
    /// their three rows, the stage-input columns `in[u, c·p + d]`, and one recompute row per
    /// chunk c and maximal vector of `inputs[c]` (the held-input vectors of d's backward
    /// steps of chunk c). Returns `ρ_d`, `R` and the time `Σ F_g R`.
    fn add_recompute(
        &self,
        b: &mut Builder,
        d: usize,
        inputs: &[Vec<Vec<usize>>],
        stash: &[f64],
        data: &RecomputeData,
    ) -> Recomputed {
        let p = self.devices;
        let v = self.stages() / p;
        let rho = b.binary(0.0, true);
        let fits = |g: usize| self.units[g].fits_accelerator(self.memory);
        let mut r = vec![vec![None; self.units.len()]; v];
        let mut time = Vec::new();
        for (c, row) in r.iter_mut().enumerate() {
            for g in (0..self.units.len()).filter(|&g| fits(g)) {
                let (a, rg) = (self.acc[c * p + d][g], b.continuous(0.0, 0.0, 1.0));
                row[g] = Some(rg);
                b.le(&[(rg, 1.0), (a, -1.0)], 0.0);
                b.le(&[(rg, 1.0), (rho, -1.0)], 0.0);
                b.le(&[(a, 1.0), (rho, 1.0), (rg, -1.0)], 1.0);
                if data.forward[g] > 0.0 {
                    time.push((rg, data.forward[g]));
                }
            }
        }
        // i_t = Σ_u b_u in[u,t] of chunk c's stage t = c·p + d.
        let mut input_terms: Vec<Vec<(Var, f64)>> = vec![Vec::new(); v];
        for (c, terms) in input_terms.iter_mut().enumerate() {
            for (producer, readers, bytes) in &data.inputs {
                if readers.iter().all(|&x| r[c][x].is_none()) {
                    continue;
                }
                let column = b.continuous(0.0, 0.0, 1.0);
                for &x in readers {
                    let Some(rx) = r[c][x] else { continue };
                    // in ≥ R[x,t] − A[u,t] (A[u,t] = 0 where u cannot be on an accelerator).
                    let mut row = vec![(rx, 1.0), (column, -1.0)];
                    if fits(*producer) {
                        row.push((self.acc[c * p + d][*producer], -1.0));
                    }
                    b.le(&row, 0.0);
                }
                terms.push((column, *bytes));
            }
        }
        let dominated =
            |a: &Vec<usize>, o: &Vec<usize>| a != o && a.iter().zip(o).all(|(x, y)| x <= y);
        let mut rows = 0;
        for (c, vectors) in inputs.iter().enumerate() {
            for n in vectors
                .iter()
                .filter(|n| !vectors.iter().any(|o| dominated(n, o)))
            {
                let mut terms = Vec::new();
                for (c2, row) in r.iter().enumerate() {
                    for (g, rg) in row.iter().enumerate() {
                        let Some(rg) = *rg else { continue };
                        let bytes = self.held(g, stash, usize::from(c2 == c));
                        if bytes > 0.0 {
                            terms.push((rg, bytes));
                        }
                    }
                    for &(column, bytes) in &input_terms[c2] {
                        let coefficient = (n[c2] as f64 * bytes).min(2.0 * self.memory);
                        if coefficient > 0.0 {
                            terms.push((column, coefficient));
                        }
                    }
                }
                b.le(&terms, self.memory);
                rows += 1;
            }
        }
        Recomputed { rho, r, time, rows }
    }

    /// Values of the binaries (Y) for an interleaved `placement`; `None` if it splits a
    /// group between stages.
    fn warm_values(&self, placement: &Placement, rho: &[Option<Var>]) -> Option<Vec<f64>> {
        let p = self.devices;
        let mut values = Vec::with_capacity(self.units.len() * self.stages());
        for group in &self.units.groups {
            let stage_of = |x: usize| match placement.assignment[x] {
                Device::Accelerator(d) if d < p => Some(placement.chunk(x) * p + d),
                _ => None,
            };
            let s = stage_of(group.nodes[0])?;
            if group.nodes.iter().any(|&x| stage_of(x) != Some(s)) {
                return None;
            }
            values.extend((0..self.stages()).map(|t| f64::from(t >= s)));
        }
        // ρ_d (created device by device, after Y).
        for (d, r) in rho.iter().enumerate() {
            if r.is_some() {
                values.push(f64::from(placement.recomputes(Device::Accelerator(d))));
            }
        }
        Some(values)
    }

    /// The plan of a solution: each group on the first stage whose ideal holds it, stage
    /// t being chunk `⌊t/p⌋` of accelerator `t mod p`, the accelerators in use with
    /// `ρ_d = 1` recomputing.
    fn placement(&self, values: &[f64], rho: &[Option<Var>]) -> Placement {
        let on = |var: Var| values[var.index()] > 0.5;
        let p = self.devices;
        let stage: Vec<usize> = (self.y.iter())
            .map(|row| row.iter().position(|&y| on(y)).unwrap_or(self.stages() - 1))
            .collect();
        let device: Vec<Device> = stage.iter().map(|&t| Device::Accelerator(t % p)).collect();
        let mut chunks = vec![0; self.units.group_of.len()];
        for (g, group) in self.units.groups.iter().enumerate() {
            for &x in &group.nodes {
                chunks[x] = stage[g] / p;
            }
        }
        let recompute = (rho.iter().enumerate())
            .filter(|(d, r)| r.is_some_and(on) && device.contains(&Device::Accelerator(*d)))
            .map(|(d, _)| Device::Accelerator(d))
            .collect();
        self.units
            .placement(&device)
            .with_pieces(chunks)
            .with_recompute(recompute)
    }
}

/// A device's recomputation columns ([`Interleaved::add_recompute`]).
struct Recomputed {
    /// `ρ_d`.
    rho: Var,
    /// `r[c][g] = R[g, c·p + d]` (None where g cannot be on an accelerator).
    r: Vec<Vec<Option<Var>>>,
    /// `Σ_g F_g R[g,t]` over d's stages, as terms.
    time: Vec<(Var, f64)>,
    /// Recompute memory rows added.
    rows: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::schedule::peak_stash_bytes;
    use crate::model::schedule::{Pipeline, Schedule};

    /// The memory rows' exactness (module docs): for any non-negative chunk stashes, the
    /// largest `Σ_c n_c·a_c` over the maximal vectors is the replayed peak.
    #[test]
    fn maximal_vectors_give_the_replayed_peak() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 1000) as f64 / 10.0
        };
        for v in 2..5 {
            let mut most_rows = 0;
            for p in 1..6 {
                for m in [p, 2 * p, 3 * p, 4 * p] {
                    let pipeline = Pipeline::new(Schedule::Interleaved { chunks: v }, m);
                    for d in 0..p {
                        let vectors = stash_vectors(&pipeline, p, d).unwrap();
                        most_rows = most_rows.max(vectors.len());
                        for _ in 0..20 {
                            let a: Vec<f64> = (0..v)
                                .map(|_| if next() < 30.0 { 0.0 } else { next() })
                                .collect();
                            let rows = vectors
                                .iter()
                                .map(|n| n.iter().zip(&a).map(|(&c, &x)| c as f64 * x).sum::<f64>())
                                .fold(0.0, f64::max);
                            let peak = peak_stash_bytes(pipeline.schedule, p, m, d, &a).unwrap();
                            assert!(
                                (rows - peak).abs() <= 1e-9 * peak.max(1.0),
                                "v={v} p={p} m={m} d={d} a={a:?}: rows {rows}, peak {peak}"
                            );
                        }
                    }
                }
            }
            eprintln!("v = {v}: at most {most_rows} memory rows per device (p ≤ 5, m ≤ 4p)");
            assert!(most_rows <= 4 * v, "{most_rows} rows on one device");
        }
    }
}

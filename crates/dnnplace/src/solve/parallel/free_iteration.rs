//! The search over free layouts ([`super::free`]'s packed space: per-stage `t_s`, `d_s`)
//! for the **iteration time** (`plan --parallel 3d --free --objective iteration`,
//! `docs/parallel.md`).
//!
//! **The value is the simulator's.** A layout's iteration is the makespan of its tasks on
//! the simulator's event loop ([`crate::simulate::parallel`]): per replica of stage `s` a
//! lane running `F(i, s)` and `B(i, s)` (`f_s + b_s = T_s`) for its `m_s = B/(d_s·b)`
//! micro-batches in the stage's order (`K_s` warm-up forwards, then one backward and one
//! forward), arcs `F(i, s) → F(i, s + 1)`, `F(i, p − 1) → B(i, p − 1)`, `B(i, s) → B(i, s −
//! 1)`, and stage `s`'s DP sync (`sync_s`) after its last backward; the iteration is the
//! last task's end. The scorer's `Σ T_s + (m − 1)·max T_s + max sync` is that makespan only
//! when the stages are equal, and is not defined when `d` differs, so it is not used here:
//! every candidate is simulated and the plan's value is the simulated iteration *of the
//! plan returned* (simulated again after its ZeRO stage is lowered), exact for it by
//! construction. The solve layer does not import the simulator: the search receives it as
//! an [`IterationClock`] ([`crate::simulate::parallel::plan`] passes it).
//!
//! **A lower bound on every layout.** Take a layout, a stage `s` of it (units `i..j`, pass
//! times `f_s + b_s = T_s`, `m_s` micro-batches per replica, sync `sync_s`), `R_s = Σ_{k>s}
//! T_k` and `n_s = min(m_s, ⌈K_s/d_s⌉)` (GPipe `m_s`): the micro-batches one replica holds
//! in flight ([`crate::model::schedule::replica_in_flight`]). Then
//!
//! ```text
//! iteration ≥ Σ_{k<s} f_k + m_s·T_s + idle_s + max(sync_s, Σ_{k<s} b_k)
//! idle_s = max(0, R_s − (n_s − 1)·f_s) + max(0, R_s − (n_s − 1)·b_s)    if n_s < m_s
//!        = max(0, R_s − (m_s − 1)·min(f_s, b_s))                         if n_s = m_s
//! ```
//!
//! Proof. Take any lane (replica `r`) of `s`. (a) Each of its tasks waits for some `F(i, s
//! − 1)`, which waits for `F(i, s − 2)`, …: none starts before `S = Σ_{k<s} f_k`. (b) In the
//! stage's order (`K_s` warm-up forwards, then backward, forward, …) the lane runs exactly
//! `n_s` forwards before its first backward `B(i₀, s)` (`i₀ = r`: the forwards of the
//! micro-batches `≡ r` in `0..K_s + r`) and exactly `n_s` backwards after its last forward
//! `F(i*, s)` (those `≡ r` in `i* − K_s < i ≤ i*`): `⌊(K_s − 1)/d_s⌋ + 1` each, capped by
//! `m_s`. (c) `B(i₀, s)` waits for `F(i₀, s)` and then for `F(i₀, s + 1 … p − 1)`, `B(i₀, p
//! − 1 … s + 1)`: it starts no earlier than `S + max(n_s f_s, f_s + R_s)`; likewise `B(i*,
//! s)`, one of the `n_s` backwards after `F(i*, s)`, ends no earlier than `F(i*, s)`'s end
//! `+ max(n_s b_s, R_s + b_s)`. If `n_s < m_s`, `F(i*, s)` comes after `B(i₀, s)`, and
//! between `B(i₀, s)`'s start and `F(i*, s)`'s end the lane runs every task but the first
//! `n_s` forwards and the last `n_s` backwards, one at a time (`m_s T_s − n_s f_s − n_s
//! b_s`); summing gives `S + m_s T_s + idle_s`. If `n_s = m_s`, either end alone gives it
//! (`S + m_s f_s + max(m_s b_s, R_s + b_s)`, or `S + max(m_s f_s, f_s + R_s) + m_s b_s`).
//! (d) The lane's last task is the backward of its last micro-batch `i_l`; the sync of `s`
//! starts after it, and `B(i_l, s − 1), …, B(i_l, 0)` follow it one after the other. ∎
//!
//! **With the sync overlapped** (`--overlap-grad-reduce`: stage `s`'s sync starts when the
//! last of its replicas starts its last backward, [`crate::simulate::parallel`]) (d)
//! becomes: that backward `B(i_l, s)` ends at some `E ≥ S + m_s·T_s + idle_s` (as above)
//! and started at `E − b_s`; the sync ends no earlier than `E − b_s + sync_s`, and the
//! backwards of `i_l` on the earlier stages at `E + Σ_{k<s} b_k`. So the last term is
//! `max(sync_s − b_s, Σ_{k<s} b_k)` (≥ 0), and with `b_s ≤ b̄_s` below,
//! `max(sync_s − b̄_s, Δ(i))` keeps every `W_s` a bound. `B` × the per-sample bound is then
//! no bound on the iteration (the time per sample counts the whole sync) and is dropped
//! from the bisection's floor.
//!
//! `idle_s` does not grow with `f_s`, `b_s`, so it stays a lower bound with `f_s ≤ f̄_s = T_s
//! − β_s` and `b_s ≤ b̄_s = T_s − φ_s`, where `φ_s` is the stage's units' forward compute and
//! forward TP all-reduces (`f_s` holds them, plus the activations received, host staging,
//! one ZeRO-3 gather; [`crate::score::parallel::pass_times`]) and `β_s` the rest of their
//! compute and TP time (backward, recomputation). Each unit's pass costs at least its least
//! over the configuration's TP degrees: `Φ(i) = Σ_{u<i} min_t fwd_u(t) ≤ Σ_{k<s} f_k`,
//! `Δ(i) = Σ_{u<i} min_t bwd_u(t) ≤ Σ_{k<s} b_k`. So every stage's
//!
//! ```text
//! W_s = Φ(i) + m_s·T_s + idle_s(f̄_s, b̄_s, R_s, n_s) + max(sync_s, Δ(i))  ≤  iteration,
//! ```
//!
//! `max_s W_s ≥ max_s (m_s·T_s + sync_s)` = `B` × the layout's time per sample. `W_s`
//! depends on the stage (units, `t`, `d`, its DP link and its neighbours' links), on the
//! suffix's capped replica sum `σ_s` (for `n_s`) and on `R_s`: [`super::free`]'s
//! feasibility DP takes it as a stage's value (`free::Measure::IterationBound`)
//! with `σ` in its points already and `R` added to them. A larger `σ` can lower `W_s`, so
//! points are compared only within a key `(stages, σ)`: the fewest devices, carrying the
//! least `R` of the key's points — a relaxation (a representative may carry another
//! layout's `R`), so a feasible answer proves nothing, but an **infeasible** `V` still
//! proves that every layout has a stage with `W_s > V`, hence an iteration `> V` (each
//! layout's suffixes extend a kept point at least as well: no more devices, the same `σ`,
//! no larger `R`). The scan over a stage's end stops once `Φ(i) + m_s·compute` passes the
//! threshold. The **bound** is the `lo` of `free::bisect`, between `B` ×
//! the per-sample bound and the best simulated value. With one stage `W_0 = m·T + sync`,
//! the simulated iteration itself; with equal 1F1B stages and `n_s = p − s < m` it is
//! `(m + p − 1)·T + sync_0` for stage 0 when `f̄ = f`, `b̄ = b`, `R` exact.
//!
//! **The search** (each candidate scored, fitting, then simulated; the best kept):
//! (1) the uniform iteration optimum ([`super::plan_uniform`], 15 % of the time left), (2)
//! the free per-sample search ([`super::free::plan_free`] to a 1 % gap, 30 %), (3) the
//! layout the DP traces at each feasible threshold of the bisection on `W` (70 % of what
//! is left), (4) for each configuration `(b, ZeRO, recompute)`, the DP's layout at the
//! threshold of the best value, (5) hill climbing from the best: move a cut by one unit,
//! halve or double a stage's `d`, change its `t`, merge two stages or split one, while a
//! neighbour is better. **Optimal** only when the best value is within `10⁻⁹` (relative)
//! of the bound (then the bound is the value); otherwise **feasible** with the bound (the
//! bisection's `lo`) and the gap, the stop reason `search-exhausted` when the search ran
//! to its end. `--time-limit`, `--memory-budget` and Ctrl-C stop any step with the best
//! layout so far (the two seeds are simulated even past the limit, so a plan comes back
//! whenever one fits).
//!
//! Per key `(stages, σ)` the front holds one point, so `F ≤ min(M, N) + 1` points per state
//! as in [`super::free`], but without its pruning across `σ` the fronts are fuller and a
//! DP slower (×3 to ×8 on the Llama-3-70B rows of `docs/parallel.md`).
//!
//! Cost: the two seeds' searches, then per bisection step one DP of [`super::free`]
//! (`O(U²·F·|T|·|D|·P)`), and per candidate one simulation (`O(K log K)`, `K = 2·p·M + p`
//! tasks, twice: the simulator also runs a half-length iteration for its steady state).

use std::collections::HashSet;

use super::free::{
    bisect, check_all, configs, feasible, packed, plan_free, FreeConfig, Measure, StageChoice,
};
use super::{
    checked_plan, plan_uniform, Objective, ParallelOutcome, ParallelPlan, Space, Valuation,
};
use crate::model::parallel::{ChainCosts, Layout, MixedTopology, Topology};
use crate::score::parallel::score_layout;
use crate::solve::budget::{Budget, Exhausted};
use crate::solve::{Status, StopReason};

/// How the search times a layout's iteration: the simulator
/// ([`crate::simulate::parallel::Simulator`]), given by a higher layer.
pub trait IterationClock {
    /// The iteration of `layout` (which fits) of `chain` on `topo`, ms.
    fn iteration_ms(
        &self,
        chain: &ChainCosts,
        topo: &Topology,
        layout: &Layout,
    ) -> Result<f64, String>;

    /// The iteration of `layout` (which fits) on a cluster of several types, `chains[g]`
    /// type `g`'s costs at the layout's micro-batch, ms ([`super::mixed_iteration`]).
    fn mixed_iteration_ms(
        &self,
        chains: &[ChainCosts],
        topo: &MixedTopology,
        layout: &Layout,
    ) -> Result<f64, String>;
}

/// Bytes a simulation holds per task, for the memory budget (pieces with their arcs, the
/// run's records and memory steps).
pub(super) const BYTES_PER_TASK: f64 = 512.0;

/// The candidates simulated so far and the best.
struct Candidates<'a> {
    chains: &'a [ChainCosts],
    topo: &'a Topology,
    space: &'a Space,
    clock: &'a dyn IterationClock,
    seen: HashSet<String>,
    /// `(value, chain index, layout)`.
    best: Option<(f64, usize, Layout)>,
    simulated: usize,
    /// The first layout the clock could not time, and why.
    clock_error: Option<String>,
}

impl Candidates<'_> {
    fn best_value(&self) -> f64 {
        self.best.as_ref().map_or(f64::INFINITY, |b| b.0)
    }

    /// Scores `layout` on chain `ci`; when it is in the space and fits, simulates it (once
    /// per layout) and keeps it if best. Returns whether it became the best. Without a
    /// `budget` (the seeds) it simulates whatever the limits and Ctrl-C say.
    fn offer(
        &mut self,
        ci: usize,
        layout: Layout,
        budget: Option<&Budget>,
    ) -> Result<bool, Exhausted> {
        let end = layout
            .stages
            .last()
            .map_or(0, |s| s.first_device + s.width());
        if end > self.space.max_devices.min(self.topo.devices())
            || self.space.stages.is_some_and(|p| p != layout.stages.len())
        {
            return Ok(false);
        }
        let key = format!("{ci} {layout:?}");
        if !self.seen.insert(key) {
            return Ok(false);
        }
        let chain = &self.chains[ci];
        match score_layout(chain, self.topo, &layout) {
            Ok(score) if score.fits => {}
            _ => return Ok(false),
        }
        if let Some(budget) = budget {
            budget.check()?;
            let tasks = 2 * layout.stages.len() * (layout.global_batch / layout.micro_batch);
            budget.reserve("a simulated iteration", tasks as f64 * BYTES_PER_TASK)?;
        }
        let value = match self.clock.iteration_ms(chain, self.topo, &layout) {
            Ok(v) => v,
            Err(e) => {
                self.clock_error.get_or_insert(e);
                return Ok(false);
            }
        };
        self.simulated += 1;
        if value < self.best_value() {
            self.best = Some((value, ci, layout));
            return Ok(true);
        }
        Ok(false)
    }

    /// [`Self::offer`] of a plan found by another search (a seed: no budget).
    fn offer_plan(&mut self, plan: &ParallelPlan) -> Result<bool, Exhausted> {
        let b = plan.layout.micro_batch;
        match self.chains.iter().position(|c| c.micro_batch == b) {
            Some(ci) => self.offer(ci, plan.layout.clone(), None),
            None => Ok(false),
        }
    }

    /// [`Self::offer`] of the packed layout of `stages` in configuration `cfg`.
    fn offer_stages(
        &mut self,
        cfg: FreeConfig,
        stages: &[StageChoice],
        budget: &Budget,
    ) -> Result<bool, Exhausted> {
        let layout = self.packed(cfg, stages);
        self.offer(cfg.chain, layout, Some(budget))
    }

    fn packed(&self, cfg: FreeConfig, stages: &[StageChoice]) -> Layout {
        packed(
            stages,
            self.chains[cfg.chain].micro_batch,
            self.space.global_batch,
            cfg.zero,
            self.space.schedule,
            cfg.recompute,
        )
        .overlapped(self.space.overlap_grad_reduce)
    }
}

/// Where the search stopped: the proven bound and why it stopped short, if it did.
pub(super) struct Progress {
    pub(super) bound: f64,
    pub(super) stop: Option<StopReason>,
    pub(super) checks: usize,
}

/// The best free layout of `space` for the simulated iteration (module documentation).
pub fn plan_free_iteration(
    chains: &[ChainCosts],
    topo: &Topology,
    space: &Space,
    budget: &Budget,
    clock: &dyn IterationClock,
) -> Result<ParallelOutcome, String> {
    let mut cands = Candidates {
        chains,
        topo,
        space,
        clock,
        seen: HashSet::new(),
        best: None,
        simulated: 0,
        clock_error: None,
    };
    let uniform = plan_uniform(
        chains,
        topo,
        space,
        Objective::Iteration,
        &budget.share(0.15),
    )?;
    let per_sample = plan_free(chains, topo, space, Some(0.01), &budget.share(0.3))?;
    for plan in [&uniform.plan, &per_sample.plan].into_iter().flatten() {
        cands
            .offer_plan(plan)
            .map_err(|e| format!("internal error: {e}"))?;
    }
    let tables = configs(chains, topo, space, Measure::IterationBound);
    // B × a proven bound on every free layout's time per sample bounds its iteration,
    // unless the sync is overlapped (the time per sample then counts more sync than the
    // iteration exposes).
    let scale = space.global_batch as f64;
    let known = [
        per_sample_floor(per_sample.bound, space) * scale,
        uniform_floor(&tables),
    ];
    let lo = known
        .into_iter()
        .filter(|x| x.is_finite())
        .fold(0.0, f64::max);
    let mut progress = bound_by_bisection(&tables, lo, &mut cands, &budget.share(0.7));
    if let Err(e) = widen(&tables, &mut cands, budget) {
        progress.stop.get_or_insert(StopReason::from(e));
    }
    let Some((_, ci, layout)) = cands.best.take() else {
        if let Some(e) = cands.clock_error {
            return Err(format!("no layout could be simulated: {e}"));
        }
        return Ok(no_plan(per_sample, progress, tables.len(), budget));
    };
    let plan = final_plan(&cands, ci, layout)?;
    let value = clock.iteration_ms(&plan.chain, topo, &plan.layout)?;
    finish(plan, value, progress, tables.len(), budget)
}

/// The bisection on `max_s W_s` (module documentation): every layout it finds is offered,
/// and its upper end is lowered to the best simulated value. Returns the proven bound.
fn bound_by_bisection(
    tables: &[(f64, super::free::Tables)],
    lo: f64,
    cands: &mut Candidates,
    budget: &Budget,
) -> Progress {
    let hi = cands.best_value();
    let lo = lo.min(hi);
    let stages = cands.space.stages;
    let mut offered: Option<Exhausted> = None;
    let run = bisect((lo, hi), None, budget, true, |v, strict, active, checks| {
        let found = check_all(tables, v, strict, stages, active, checks)?;
        Ok(found.map(|(cfg, found)| {
            if let Err(e) = cands.offer_stages(cfg, &found.stages, active) {
                offered.get_or_insert(e);
            }
            (found.value.min(cands.best_value()), ())
        }))
    });
    let stop = match (run.stop, offered) {
        (Some(s), _) => Some(s),
        (None, Some(e)) => Some(StopReason::from(e)),
        (None, None) => None,
    };
    Progress {
        bound: run.lo.min(run.hi),
        stop,
        checks: run.checks,
    }
}

/// The least configuration bound, `B` × the per-sample bound (∞ without a configuration).
/// `bound`, a proven bound on the time per sample, as a bound on the iteration over `B`:
/// itself (every lane of stage `s` runs `m_s·T_s`, then its sync), or 0 when the sync is
/// overlapped with backward (the per-sample figure counts the whole sync).
pub(super) fn per_sample_floor(bound: f64, space: &Space) -> f64 {
    if space.overlap_grad_reduce {
        0.0
    } else {
        bound
    }
}

fn uniform_floor(tables: &[(f64, super::free::Tables)]) -> f64 {
    tables.first().map_or(f64::INFINITY, |t| t.0)
}

/// Steps (4) and (5) of the search (module documentation).
fn widen(
    tables: &[(f64, super::free::Tables)],
    cands: &mut Candidates,
    budget: &Budget,
) -> Result<(), Exhausted> {
    for (lb, tb) in tables {
        let v = cands.best_value();
        if *lb >= v {
            break;
        }
        if let Some(found) = feasible(tb, v, false, cands.space.stages, budget)? {
            cands.offer_stages(tb.cfg, &found.stages, budget)?;
        }
    }
    climb(cands, budget)
}

/// Hill climbing from the best layout over [`neighbours`] while one is better.
fn climb(cands: &mut Candidates, budget: &Budget) -> Result<(), Exhausted> {
    loop {
        let Some((_, ci, layout)) = cands.best.clone() else {
            return Ok(());
        };
        let mut improved = false;
        for stages in neighbours(&layout, &cands.space.tensor_parallel, &cands.chains[ci]) {
            let moved = packed(
                &stages,
                layout.micro_batch,
                layout.global_batch,
                layout.zero,
                layout.schedule,
                layout.recompute,
            )
            .overlapped(layout.overlap_grad_reduce);
            improved |= cands.offer(ci, moved, Some(budget))?;
        }
        if !improved {
            return Ok(());
        }
    }
}

/// The stages of `layout` changed by one step: a cut moved by one unit, a stage's `d`
/// halved or doubled, its `t` changed to another of `tps`, two neighbouring stages merged
/// (the wider `t`, `d`), a stage of several units split in two halves with its `t`, `d`.
fn neighbours(layout: &Layout, tps: &[usize], chain: &ChainCosts) -> Vec<Vec<StageChoice>> {
    let base: Vec<StageChoice> = layout
        .stages
        .iter()
        .map(|s| (s.units.clone(), s.tensor_parallel, s.data_parallel))
        .collect();
    let p = base.len();
    let mut out = Vec::new();
    for k in 0..p.saturating_sub(1) {
        let (a, b) = (&base[k].0, &base[k + 1].0);
        for cut in [a.end - 1, a.end + 1] {
            if cut > a.start && cut < b.end {
                let mut x = base.clone();
                x[k].0 = a.start..cut;
                x[k + 1].0 = cut..b.end;
                out.push(x);
            }
        }
        let mut merged = base.clone();
        let (t, d) = (base[k].1.max(base[k + 1].1), base[k].2.max(base[k + 1].2));
        merged[k] = (a.start..b.end, t, d);
        merged.remove(k + 1);
        out.push(merged);
    }
    for s in 0..p {
        let (units, t, d) = base[s].clone();
        let mut degrees = vec![(t, d * 2)];
        if d % 2 == 0 {
            degrees.push((t, d / 2));
        }
        degrees.extend(tps.iter().filter(|&&x| x != t).map(|&x| (x, d)));
        for (t2, d2) in degrees {
            if chain.tp_index(t2).is_some() {
                let mut x = base.clone();
                x[s] = (units.clone(), t2, d2);
                out.push(x);
            }
        }
        if units.len() > 1 {
            let mid = units.start + units.len() / 2;
            let mut x = base.clone();
            x[s] = (units.start..mid, t, d);
            x.insert(s + 1, (mid..units.end, t, d));
            out.push(x);
        }
    }
    out
}

/// The best candidate as a plan: re-scored, its ZeRO stage lowered to the smallest of the
/// same time per sample that fits (ZeRO 0–2 take the same time, so the same iteration).
fn final_plan(cands: &Candidates, ci: usize, layout: Layout) -> Result<ParallelPlan, String> {
    let chain = &cands.chains[ci];
    let score = score_layout(chain, cands.topo, &layout).map_err(|e| e.to_string())?;
    let stages: Vec<StageChoice> = layout
        .stages
        .iter()
        .map(|s| (s.units.clone(), s.tensor_parallel, s.data_parallel))
        .collect();
    let with = |z| {
        packed(
            &stages,
            layout.micro_batch,
            layout.global_batch,
            z,
            layout.schedule,
            layout.recompute,
        )
        .overlapped(layout.overlap_grad_reduce)
    };
    checked_plan(
        chain,
        cands.topo,
        cands.space,
        (layout.zero, with),
        (score.time_per_sample_ms, Objective::TimePerSample),
    )
}

/// The outcome of the best plan with its simulated `value` (module documentation: when it
/// is optimal). A bound above the value would be a wrong proof: an error, never a plan.
pub(super) fn finish(
    plan: ParallelPlan,
    value: f64,
    progress: Progress,
    configs: usize,
    budget: &Budget,
) -> Result<ParallelOutcome, String> {
    let Progress {
        bound,
        stop,
        checks,
    } = progress;
    if bound > value * (1.0 + 1e-9) {
        return Err(format!(
            "internal error: the iteration bound {bound} ms is above the simulated iteration {value} ms of a layout"
        ));
    }
    let optimal = value <= bound * (1.0 + 1e-9);
    let status = match (optimal, stop) {
        (true, _) => Status::Optimal,
        (false, Some(reason)) => Status::Feasible { reason },
        (false, None) => Status::Feasible {
            reason: StopReason::SearchExhausted {
                what: "the search ran to its end; the bound (fill, steady state and drain of each stage) does not meet the simulated iteration".into(),
            },
        },
    };
    Ok(ParallelOutcome {
        plan: Some(plan),
        value,
        bound: if optimal { value } else { bound },
        status,
        configs_solved: checks,
        configs,
        elapsed_s: budget.elapsed_s(),
        free: true,
        valuation: Valuation::Simulation,
    })
}

/// The outcome without a plan: the per-sample search's status (its proof that nothing
/// fits, or why it stopped), with the iteration's bound.
pub(super) fn no_plan(
    per_sample: ParallelOutcome,
    progress: Progress,
    configs: usize,
    budget: &Budget,
) -> ParallelOutcome {
    let status = match (per_sample.status, progress.stop) {
        (s @ Status::Infeasible { .. }, _) => s,
        (_, Some(reason)) => Status::NoPlan { reason },
        (s, None) => s,
    };
    ParallelOutcome {
        plan: None,
        value: f64::INFINITY,
        bound: progress.bound,
        status,
        configs_solved: progress.checks,
        configs,
        elapsed_s: budget.elapsed_s(),
        free: true,
        valuation: Valuation::Simulation,
    }
}

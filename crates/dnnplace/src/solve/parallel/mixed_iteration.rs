//! The iteration time on a cluster of several accelerator types (`plan --parallel 3d
//! --cluster A+B --objective iteration`, with or without `--free`; `docs/parallel.md`,
//! "The iteration on several types"): the spaces of [`super::mixed`] (free layouts) and
//! [`super::mixed_uniform`] (one `(t, d)` for every stage), searched for the simulated
//! iteration as [`super::free_iteration`] searches one type's free layouts.
//!
//! **The value is the simulator's**, for uniform layouts too. On one type the uniform
//! search's iteration is the scorer's `Σ T_s + (m − 1)·max T_s + max sync`, the makespan of
//! GPipe and 1F1B when every stage takes the same time. On several types a uniform layout's
//! stages take different times (each type its own speed), and the formula is then not the
//! makespan: under GPipe with one micro-batch size the pipeline is a flow shop of identical
//! jobs (forward then backward), `T_pipe = Σ_s (f_s + b_s) + (m − 1)(max_s f_s + max_s b_s)`,
//! above the formula's `Σ T_s + (m − 1)·max_s T_s` whenever the largest forward and the
//! largest backward lie on different stages; under 1F1B unequal stages overlap their
//! passes and the simulation lies on either side of the formula; and each stage's DP sync
//! starts after its own last backward, not after the flush (`tests/parallel_mixed_iteration.rs`
//! checks the flow-shop identity on random two-type layouts and counts the layouts where the
//! formula differs from the simulation). So every candidate is simulated
//! ([`IterationClock::mixed_iteration_ms`], [`crate::simulate::parallel::simulate_mixed`]) and
//! the plan's value is the simulated iteration of the plan returned.
//!
//! **The bound** is [`super::free_iteration`]'s `W_s` (its module documentation has the
//! proof, which holds stage by stage whatever type each stage runs on), taken by the mixed
//! feasibility DP of [`super::mixed`] with two changes that keep every infeasible answer a
//! proof: (1) `Φ(i)`, `Δ(i)` (the least forward and backward parts of the units before a
//! stage) are the least over the types, since the stages before it may lie on any type;
//! (2) `R[S][i]` (the suffixes handed over to the types of `S`) keeps every capped replica
//! sum `σ` with the least `Σ T_k` of its layouts, not only the least `σ` (a larger `σ` can
//! lower `W_s`), and a handed-over suffix's `Σ T_k` enters the stage's `R_s`. The
//! configurations' floor is `B` × the volume bound of [`super::mixed`]. Uniform layouts: the
//! space is the union over the pairs `(t, d)` of the mixed space restricted to the pair, so
//! a threshold is infeasible for the union iff it is for every part: the check runs over
//! the configurations of every part, by ascending floor. The bound is the bisection's `lo`,
//! at least `B` × the per-sample search's proven bound.
//!
//! **The search** (each candidate scored by [`score_mixed`], fitting, then simulated; the
//! best kept): (1) the per-sample optimum of the same space ([`super::mixed::plan_mixed`]
//! to a 1 % gap, or [`super::mixed_uniform::plan_mixed_uniform`]; 30 % of the time) and,
//! for free layouts, the uniform layouts' iteration plan (this search on them, 15 %; the
//! free value is so never above the uniform one), (2)
//! the layout the DP traces at each feasible threshold of the bisection on `W` (70 % of
//! what is left), (3) per configuration the DP's layout at the best value, (4) hill
//! climbing from the best: a cut moved by one unit, a stage's (uniform: every stage's) `d`
//! halved or doubled or `t` changed, two neighbouring stages on one type merged, a stage
//! split in two; each stage keeps its type. **Optimal** only when the value is within
//! 10⁻⁹ of the bound; otherwise **feasible** with the bound and the gap
//! ([`super::free_iteration`]'s outcome).

use std::collections::HashSet;

use super::free::{bisect, FreeConfig, Measure};
use super::free_iteration::{finish, no_plan, IterationClock, Progress, BYTES_PER_TASK};
use super::mixed::{check_all, configs, feasible, packed_mixed, rescored, MixedChoice};
use super::mixed::{plan_mixed, MixedConfig};
use super::mixed_uniform::{pairs, plan_mixed_uniform};
use super::{Layouts, ParallelOutcome, ParallelPlan, Space};
use crate::model::parallel::{ChainCosts, Layout, MixedTopology};
use crate::score::parallel::score_mixed;
use crate::solve::budget::{Budget, Exhausted};
use crate::solve::StopReason;

/// The candidates simulated so far and the best.
struct Candidates<'a> {
    chains: &'a [Vec<ChainCosts>],
    topo: &'a MixedTopology,
    space: &'a Space,
    layouts: Layouts,
    clock: &'a dyn IterationClock,
    seen: HashSet<String>,
    /// `(value, chain index, layout)`.
    best: Option<(f64, usize, Layout)>,
    /// The first layout the clock could not time, and why.
    clock_error: Option<String>,
}

impl Candidates<'_> {
    fn best_value(&self) -> f64 {
        self.best.as_ref().map_or(f64::INFINITY, |b| b.0)
    }

    /// The costs of every type at chain index `ci`.
    fn costs(&self, ci: usize) -> Vec<ChainCosts> {
        self.chains.iter().map(|c| c[ci].clone()).collect()
    }

    /// Whether `stages` lie in the space: the stage count, each stage inside its group when
    /// packed, one `(t, d)` for uniform layouts.
    fn in_space(&self, stages: &[MixedChoice]) -> bool {
        if self.space.stages.is_some_and(|p| p != stages.len()) {
            return false;
        }
        if self.layouts == Layouts::Uniform
            && stages
                .iter()
                .any(|s| (s.1, s.2) != (stages[0].1, stages[0].2))
        {
            return false;
        }
        let mut next = vec![0usize; self.topo.groups.len()];
        stages.iter().all(|(_, t, d, g)| {
            let first = next[*g].div_ceil(*t) * t;
            next[*g] = first + t * d;
            next[*g] <= self.topo.groups[*g].devices()
        })
    }

    /// Scores the packed layout of `stages` at chain `ci`, ZeRO and recomputation of
    /// `like`; when it is in the space and fits, simulates it (once per layout) and keeps
    /// it if best. Returns whether it became the best. Without a `budget` (the seed) it
    /// simulates whatever the limits and Ctrl-C say.
    fn offer(
        &mut self,
        (ci, zero, recompute): (usize, crate::model::parallel::Zero, bool),
        stages: &[MixedChoice],
        budget: Option<&Budget>,
    ) -> Result<bool, Exhausted> {
        if stages.is_empty() || !self.in_space(stages) {
            return Ok(false);
        }
        let b = self.chains[0][ci].micro_batch;
        let layout = packed_mixed(
            stages,
            self.topo,
            (b, self.space.global_batch),
            zero,
            self.space.schedule,
            recompute,
        )
        .overlapped(self.space.overlap_grad_reduce);
        if !self.seen.insert(format!("{ci} {layout:?}")) {
            return Ok(false);
        }
        let costs = self.costs(ci);
        match score_mixed(&costs, self.topo, &layout) {
            Ok(score) if score.fits => {}
            _ => return Ok(false),
        }
        if let Some(budget) = budget {
            budget.check()?;
            let tasks = 2 * layout.stages.len() * (layout.global_batch / layout.micro_batch);
            budget.reserve("a simulated iteration", tasks as f64 * BYTES_PER_TASK)?;
        }
        let value = match self.clock.mixed_iteration_ms(&costs, self.topo, &layout) {
            Ok(v) => v,
            Err(e) => {
                self.clock_error.get_or_insert(e);
                return Ok(false);
            }
        };
        if value < self.best_value() {
            self.best = Some((value, ci, layout));
            return Ok(true);
        }
        Ok(false)
    }

    /// [`Self::offer`] of a plan found by another search (the seed: no budget).
    fn offer_plan(&mut self, plan: &ParallelPlan) -> Result<bool, Exhausted> {
        let l = &plan.layout;
        match self.chains[0]
            .iter()
            .position(|c| c.micro_batch == l.micro_batch)
        {
            Some(ci) => {
                let stages = choices(self.topo, l);
                self.offer((ci, l.zero, l.recompute), &stages, None)
            }
            None => Ok(false),
        }
    }
}

/// The stages of `layout` as `(units, t, d, group)`.
fn choices(topo: &MixedTopology, layout: &Layout) -> Vec<MixedChoice> {
    layout
        .stages
        .iter()
        .map(|s| {
            let g = topo.group_of(s.first_device).unwrap_or(0);
            (s.units.clone(), s.tensor_parallel, s.data_parallel, g)
        })
        .collect()
}

/// The configurations whose DPs bound the space: the whole space's (free layouts), or every
/// pair's part's (uniform layouts), by ascending floor.
fn bounding_configs<'a>(
    chains: &'a [Vec<ChainCosts>],
    topo: &MixedTopology,
    space: &Space,
    layouts: Layouts,
) -> Vec<MixedConfig<'a>> {
    let parts: Vec<Space> = match layouts {
        Layouts::Free => vec![space.clone()],
        Layouts::Uniform => pairs(topo, space)
            .into_iter()
            .map(|(t, d)| Space {
                tensor_parallel: vec![t],
                data_parallel: Some(d),
                ..space.clone()
            })
            .collect(),
    };
    let mut out: Vec<MixedConfig> = parts
        .iter()
        .flat_map(|p| configs(chains, topo, p, Measure::IterationBound))
        .collect();
    out.sort_by(|a, b| a.bound.total_cmp(&b.bound));
    out
}

/// The best layout of `space` on several types (`layouts`: uniform or free) for the
/// simulated iteration, timed by `clock` (module documentation).
pub fn plan_mixed_iteration(
    chains: &[Vec<ChainCosts>],
    topo: &MixedTopology,
    space: &Space,
    layouts: Layouts,
    budget: &Budget,
    clock: &dyn IterationClock,
) -> Result<ParallelOutcome, String> {
    let mut cands = Candidates {
        chains,
        topo,
        space,
        layouts,
        clock,
        seen: HashSet::new(),
        best: None,
        clock_error: None,
    };
    let seed_budget = budget.share(0.3);
    let per_sample = match layouts {
        Layouts::Free => plan_mixed(chains, topo, space, Some(0.01), &seed_budget)?,
        Layouts::Uniform => plan_mixed_uniform(chains, topo, space, &seed_budget)?,
    };
    // The uniform layouts are free layouts: their iteration optimum seeds the free search.
    let uniform = match layouts {
        Layouts::Free => {
            let share = budget.share(0.15);
            plan_mixed_iteration(chains, topo, space, Layouts::Uniform, &share, clock)?.plan
        }
        Layouts::Uniform => None,
    };
    for plan in [&per_sample.plan, &uniform].into_iter().flatten() {
        cands
            .offer_plan(plan)
            .map_err(|e| format!("internal error: {e}"))?;
    }
    let mut tables = bounding_configs(chains, topo, space, layouts);
    // B × a proven bound on every layout's time per sample bounds its iteration.
    let known = [
        super::free_iteration::per_sample_floor(per_sample.bound, space)
            * space.global_batch as f64,
        tables.first().map_or(f64::INFINITY, |c| c.bound),
    ];
    let lo = known
        .into_iter()
        .filter(|x| x.is_finite())
        .fold(0.0, f64::max);
    let mut progress = bound_by_bisection(&mut tables, lo, &mut cands, &budget.share(0.7));
    if let Err(e) = widen(&mut tables, &mut cands, budget) {
        progress.stop.get_or_insert(StopReason::from(e));
    }
    let count = tables.len();
    let Some((_, ci, layout)) = cands.best.take() else {
        if let Some(e) = cands.clock_error {
            return Err(format!("no layout could be simulated: {e}"));
        }
        let mut out = no_plan(per_sample, progress, count, budget);
        out.free = layouts == Layouts::Free;
        return Ok(out);
    };
    let costs = cands.costs(ci);
    let tps = score_mixed(&costs, topo, &layout)
        .map_err(|e| e.to_string())?
        .time_per_sample_ms;
    let cfg = FreeConfig {
        chain: ci,
        zero: layout.zero,
        recompute: layout.recompute,
    };
    let plan = rescored(chains, topo, space, cfg, &choices(topo, &layout), tps)?;
    let value = clock.mixed_iteration_ms(&costs, topo, &plan.layout)?;
    let mut out = finish(plan, value, progress, count, budget)?;
    out.free = layouts == Layouts::Free;
    Ok(out)
}

/// The bisection on `max_s W_s` over `tables` from `lo` (module documentation): every
/// layout it traces is offered, and its upper end is lowered to the best simulated value.
fn bound_by_bisection(
    tables: &mut [MixedConfig],
    lo: f64,
    cands: &mut Candidates,
    budget: &Budget,
) -> Progress {
    let hi = cands.best_value();
    let lo = lo.min(hi);
    let stages = cands.space.stages;
    let held = cands.best.is_some();
    let mut offered: Option<Exhausted> = None;
    let run = bisect((lo, hi), None, budget, held, |v, strict, active, checks| {
        let found = check_all(tables, v, strict, stages, active, checks)?;
        Ok(found.map(|(cfg, found)| {
            let how = (cfg.chain, cfg.zero, cfg.recompute);
            if let Err(e) = cands.offer(how, &found.stages, Some(active)) {
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

/// Steps (3) and (4) of the search (module documentation).
fn widen(
    tables: &mut [MixedConfig],
    cands: &mut Candidates,
    budget: &Budget,
) -> Result<(), Exhausted> {
    for c in tables.iter() {
        let v = cands.best_value();
        if c.bound >= v {
            break;
        }
        if let Some(found) = feasible(c, v, false, cands.space.stages, budget)? {
            let how = (c.cfg.chain, c.cfg.zero, c.cfg.recompute);
            cands.offer(how, &found.stages, Some(budget))?;
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
        let how = (ci, layout.zero, layout.recompute);
        let base = choices(cands.topo, &layout);
        let mut improved = false;
        for stages in neighbours(&base, &cands.space.tensor_parallel, cands.layouts) {
            improved |= cands.offer(how, &stages, Some(budget))?;
        }
        if !improved {
            return Ok(());
        }
    }
}

/// The stages `base` changed by one step (module documentation), each stage on its type.
/// Uniform layouts change `t` or `d` on every stage at once.
fn neighbours(base: &[MixedChoice], tps: &[usize], layouts: Layouts) -> Vec<Vec<MixedChoice>> {
    let p = base.len();
    let mut out = Vec::new();
    for k in 0..p.saturating_sub(1) {
        let (a, b) = (&base[k].0, &base[k + 1].0);
        for cut in [a.end - 1, a.end + 1] {
            if cut > a.start && cut < b.end {
                let mut x = base.to_vec();
                x[k].0 = a.start..cut;
                x[k + 1].0 = cut..b.end;
                out.push(x);
            }
        }
        if base[k].3 == base[k + 1].3 {
            let mut merged = base.to_vec();
            let (t, d) = (base[k].1.max(base[k + 1].1), base[k].2.max(base[k + 1].2));
            merged[k] = (a.start..b.end, t, d, base[k].3);
            merged.remove(k + 1);
            out.push(merged);
        }
    }
    let (t0, d0) = (base[0].1, base[0].2);
    let degrees = |t: usize, d: usize| {
        let mut out = vec![(t, d * 2)];
        if d.is_multiple_of(2) {
            out.push((t, d / 2));
        }
        out.extend(tps.iter().filter(|&&x| x != t).map(|&x| (x, d)));
        out
    };
    match layouts {
        Layouts::Uniform => {
            for (t, d) in degrees(t0, d0) {
                out.push(base.iter().map(|s| (s.0.clone(), t, d, s.3)).collect());
            }
        }
        Layouts::Free => {
            for s in 0..p {
                for (t, d) in degrees(base[s].1, base[s].2) {
                    let mut x = base.to_vec();
                    x[s] = (base[s].0.clone(), t, d, base[s].3);
                    out.push(x);
                }
            }
        }
    }
    for s in 0..p {
        let (units, t, d, g) = base[s].clone();
        if units.len() > 1 {
            let mid = units.start + units.len() / 2;
            let mut x = base.to_vec();
            x[s] = (units.start..mid, t, d, g);
            x.insert(s + 1, (mid..units.end, t, d, g));
            out.push(x);
        }
    }
    out
}

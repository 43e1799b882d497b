//! The search over uniform parallel layouts (`docs/parallel.md`): every stage with the same
//! TP degree `t` and DP degree `d` — what Megatron-LM, DeepSpeed, vLLM and torchtitan run —
//! over every `(b, t, d, ZeRO, p)` with `p·t·d` ≤ the devices, each `p` split optimally by
//! [`partition`].
//!
//! **Exactness.** Every configuration has a lower bound that every split of it respects
//! (`C` = the chain's compute and TP time per micro-batch, `m = B/(d·b)`):
//! iteration `≥ C + (m − 1)·C/p`, time per sample `≥ m·C/(p·B)`. Configurations are
//! solved in increasing bound order; once the next bound reaches the best value found,
//! every remaining configuration is proven no better and the plan is optimal. A run
//! stopped by the budget reports the smaller of the best value and the next bound as its
//! bound. ZeRO 0, 1 and 2 take the same time (ZeRO-1/2's reduce-scatter plus all-gather
//! moves what an all-reduce moves) and ZeRO-2 needs the least memory of the three, so
//! a choice of stages (`auto`: all four; an export target: the ones it runs) searches the
//! allowed one of least memory among ZeRO-0/1/2, and ZeRO-3, then lowers the plan's stage
//! to the smallest allowed that still fits with the same value; with `d = 1` the least
//! allowed stage (ZeRO shards nothing over one replica). Full recomputation is searched
//! off and on unless the space fixes it.
//!
//! **A fast pass first.** In bound order and within a tenth of the time, each configuration's
//! relaxed bound and greedy split ([`partition::relaxed_bound`], [`partition::greedy_split`]):
//! the best greedy split is the incumbent, a configuration whose relaxed bound reaches it is
//! proven no better without its exact split, and a stopped run's bound is the least relaxed
//! bound of what is left (the last 6 % of the time computes those missing). The exact splits
//! are unchanged.
//!
//! **Never without an answer.** A run past its time limit before any plan goes on (without
//! a deadline; Ctrl-C still stops it) to the first configuration with a plan, and reports
//! it with the next configuration's bound and the gap.
//!
//! The plan is re-scored by [`crate::score::parallel`]; a value that differs from the
//! search's by more than 1e-9 relative is an error, never a plan.
//!
//! **One entry.** [`ParallelProblem`] (chains, devices, space, objective, uniform or free
//! layouts) is what [`ParallelSettings::build`] ([`settings`]) makes of the command line's
//! flags and of Python's `plan_parallel` arguments, and [`plan`] ([`problem`]) sends it to
//! this search, the free one ([`free`]) or the mixed-type one ([`mixed`]).

pub mod brute_force;
pub mod compare;
pub mod free;
pub mod free_iteration;
pub mod interleaved;
pub mod mixed;
pub mod mixed_iteration;
pub mod mixed_uniform;
pub mod partition;
pub mod problem;
pub mod settings;

pub use free_iteration::IterationClock;
pub use problem::{
    answer, plan, plan_with, Answer, Goal, Layouts, ParallelDevices, ParallelProblem, PricedModel,
};
pub use settings::{Choice, ParallelModel, ParallelSettings, SettingsError, Target};

pub use crate::model::parallel::Uniform as Config;
use crate::model::parallel::{ChainCosts, Layout, Topology, Zero};
use crate::model::schedule::Schedule;
use crate::score::parallel::{score_layout, LayoutScore};
use crate::solve::budget::{Budget, Exhausted};
use crate::solve::{LayoutFamily, Status, StopReason};
pub use partition::Objective;
use partition::{best_split, greedy_split, relaxed_bound, Coster};

/// What the search may choose.
#[derive(Clone, Debug, PartialEq)]
pub struct Space {
    /// Candidate TP degrees (each must have costs in the chains).
    pub tensor_parallel: Vec<usize>,
    /// A fixed DP degree, or `None` for every one that fits.
    pub data_parallel: Option<usize>,
    /// A fixed number of pipeline stages, or `None` for every one.
    pub stages: Option<usize>,
    /// The ZeRO stages the search may choose, ascending ([`Zero::ALL`]: the best of every
    /// one; one stage: that one).
    pub zero: Vec<Zero>,
    /// Full recomputation on or off, or `None` for the best.
    pub recompute: Option<bool>,
    /// Candidate micro-batch sizes.
    pub micro_batches: Vec<usize>,
    pub global_batch: usize,
    pub schedule: Schedule,
    /// The DP sync overlapped with backward (`--overlap-grad-reduce`,
    /// [`Layout::overlap_grad_reduce`]): every layout of the space carries it.
    pub overlap_grad_reduce: bool,
    /// The most devices a layout may use.
    pub max_devices: usize,
}

/// A chosen layout with its figures and the chain it was priced on.
#[derive(Clone, Debug)]
pub struct ParallelPlan {
    pub layout: Layout,
    pub score: LayoutScore,
    /// The costs it was priced on (several types: those of the first stage's type).
    pub chain: ChainCosts,
    /// Each stage's accelerator type on a cluster of several types ([`mixed`]); `None` on
    /// one type (the topology's).
    pub accelerators: Option<Vec<String>>,
}

/// Where a plan's value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Valuation {
    /// The scorer's formula under the objective ([`crate::score::parallel`]).
    Model,
    /// The simulated iteration of the plan ([`free_iteration`]: free layouts under the
    /// iteration objective).
    Simulation,
}

impl Valuation {
    /// Its name in the JSON reports (`valueFrom`): `model` or `simulation`.
    pub fn code(self) -> &'static str {
        match self {
            Valuation::Model => "model",
            Valuation::Simulation => "simulation",
        }
    }
}

/// The outcome of a search.
#[derive(Clone, Debug)]
pub struct ParallelOutcome {
    pub plan: Option<ParallelPlan>,
    /// The plan's value, ms (infinite without one).
    pub value: f64,
    /// A proven lower bound on every layout of the space, ms.
    pub bound: f64,
    pub status: Status,
    /// Configurations `(b, t, d, ZeRO, p)` whose split was solved, and in all.
    pub configs_solved: usize,
    pub configs: usize,
    pub elapsed_s: f64,
    /// Free layouts (per-stage `t`, `d`; [`free`]) were searched: `configs_solved` counts
    /// feasibility checks over `configs` configurations `(b, ZeRO, recompute)`.
    pub free: bool,
    /// Where `value` comes from.
    pub valuation: Valuation,
}

impl ParallelOutcome {
    /// `(value − bound) / value`, 0 when optimal.
    pub fn gap(&self) -> f64 {
        if self.value.is_finite() && self.value > 0.0 {
            ((self.value - self.bound) / self.value).max(0.0)
        } else {
            f64::INFINITY
        }
    }
}

/// The value of `score` under `objective`.
pub fn objective_value(score: &LayoutScore, objective: Objective) -> f64 {
    match objective {
        Objective::Iteration => score.iteration_ms.unwrap_or(f64::INFINITY),
        Objective::TimePerSample => score.time_per_sample_ms,
    }
}

/// ZeRO stages the search tries for DP degree `d` (module documentation): with a choice,
/// the allowed stage of least memory among ZeRO-0/1/2 (which take the same time) and
/// ZeRO-3; over one replica the least allowed (ZeRO shards nothing there).
fn zero_stages(space: &Space, d: usize) -> Vec<Zero> {
    match space.zero.as_slice() {
        [] => Vec::new(),
        [z] => vec![*z],
        allowed if d == 1 => vec![allowed[0]],
        allowed => {
            let same_time = allowed.iter().rev().find(|z| **z != Zero::Parameters);
            let sharded = allowed.iter().find(|z| **z == Zero::Parameters);
            same_time.into_iter().chain(sharded).copied().collect()
        }
    }
}

/// Recomputation choices of `space`: off first.
fn recompute_choices(space: &Space) -> Vec<bool> {
    match space.recompute {
        Some(r) => vec![r],
        None => vec![false, true],
    }
}

/// Every configuration of `space` with its lower bound, ascending.
fn configurations(
    chains: &[ChainCosts],
    topo: &Topology,
    space: &Space,
    objective: Objective,
) -> Vec<(f64, usize, Config)> {
    let devices = space.max_devices.min(topo.devices());
    let mut out = Vec::new();
    for (ci, chain) in chains.iter().enumerate() {
        let b = chain.micro_batch;
        for &t in &space.tensor_parallel {
            let Some(ti) = chain.tp_index(t) else {
                continue;
            };
            if t > devices || !topo.per_machine.is_multiple_of(t) {
                continue;
            }
            let fw: f64 = chain.units.iter().map(|u| u.costs[ti].forward_ms).sum();
            let bw: f64 = chain.units.iter().map(|u| u.costs[ti].backward_ms).sum();
            let ds: Vec<usize> = match space.data_parallel {
                Some(d) => vec![d],
                None => (1..=devices / t).collect(),
            };
            for d in ds {
                if !space.global_batch.is_multiple_of(d * b) || t * d > devices {
                    continue;
                }
                let m = (space.global_batch / (d * b)) as f64;
                for (z, r) in zero_stages(space, d)
                    .into_iter()
                    .flat_map(|z| recompute_choices(space).into_iter().map(move |r| (z, r)))
                {
                    let c = fw + bw + if r { fw } else { 0.0 };
                    for p in 1..=chain.len().min(devices / (t * d)) {
                        if space.stages.is_some_and(|x| x != p) {
                            continue;
                        }
                        let pf = p as f64;
                        let bound = match objective {
                            Objective::Iteration => c + (m - 1.0) * c / pf,
                            Objective::TimePerSample => m * c / (pf * space.global_batch as f64),
                        };
                        let cfg = Config {
                            micro_batch: b,
                            tensor_parallel: t,
                            data_parallel: d,
                            zero: z,
                            recompute: r,
                            stages: p,
                        };
                        out.push((bound, ci, cfg));
                    }
                }
            }
        }
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

/// The best uniform layout of `space` (module documentation). `chains` holds one
/// [`ChainCosts`] per candidate micro-batch size. Under the interleaved schedule this is
/// [`interleaved::plan_interleaved`] without a clock (the time per sample;
/// [`plan_uniform_with`] gives the iteration its simulator).
pub fn plan_uniform(
    chains: &[ChainCosts],
    topo: &Topology,
    space: &Space,
    objective: Objective,
    budget: &Budget,
) -> Result<ParallelOutcome, String> {
    plan_uniform_with(chains, topo, space, objective, budget, None)
}

/// [`plan_uniform`], timing interleaved layouts' iterations with `clock`.
pub fn plan_uniform_with(
    chains: &[ChainCosts],
    topo: &Topology,
    space: &Space,
    objective: Objective,
    budget: &Budget,
    clock: Option<&dyn IterationClock>,
) -> Result<ParallelOutcome, String> {
    if let Schedule::Interleaved { .. } = space.schedule {
        return interleaved::plan_interleaved(chains, topo, space, objective, budget, clock);
    }
    let search = UniformSearch {
        chains,
        topo,
        space,
        objective,
        configs: configurations(chains, topo, space, objective),
    };
    let configs = &search.configs;
    let (mut strong, mut best) = search.fast_pass(budget);
    let mut incumbent = best.as_ref().map_or(f64::INFINITY, |b| b.3);
    let mut solved = 0;
    let mut stop = None;
    // Past the time limit without a plan, configurations go on without a deadline (Ctrl-C
    // still stops them) until the first plan; the run then stops with its gap. The exact
    // splits leave the last 6 % of the time to the bound of what is left.
    let unlimited = Budget::without_deadline();
    let exact = budget.share(0.94);
    let mut active = &exact;
    // The first configuration neither solved nor bounded out, if the run stopped.
    let mut open: Option<usize> = None;
    for (k, &(lb, ci, cfg)) in configs.iter().enumerate() {
        if lb >= incumbent {
            break;
        }
        if strong[k] >= incumbent {
            continue;
        }
        if stop.is_some() && best.is_some() {
            open = Some(k);
            break;
        }
        let Some(coster) = search.coster(k) else {
            continue;
        };
        let mut result = best_split(&coster, objective, incumbent, active);
        if matches!(result, Err(Exhausted::TimeLimit)) && best.is_none() {
            stop = Some(StopReason::TimeLimit);
            active = &unlimited;
            result = best_split(&coster, objective, incumbent, active);
        }
        match result {
            Ok(Some(split)) => {
                incumbent = split.value;
                best = Some((cfg, ci, split.cuts, split.value));
            }
            Ok(None) => {}
            Err(e) => {
                stop = Some(StopReason::from(e));
                open = Some(k);
                break;
            }
        }
        solved += 1;
    }
    let bound = match open {
        Some(k) => search.remaining_bound(&mut strong, k, incumbent, budget),
        None => {
            stop = None;
            f64::INFINITY
        }
    };
    search.outcome(best, stop, bound, solved, budget)
}

/// What the uniform search reads: the chains, the devices, the space, the objective and
/// the configurations with their bounds, ascending.
struct UniformSearch<'a> {
    chains: &'a [ChainCosts],
    topo: &'a Topology,
    space: &'a Space,
    objective: Objective,
    configs: Vec<(f64, usize, Config)>,
}

/// A configuration, its chain, its split's stage starts and value.
type Found = (Config, usize, Vec<usize>, f64);

impl UniformSearch<'_> {
    /// The coster of configuration `k` (`None`: it does not fit at all).
    fn coster(&self, k: usize) -> Option<Coster<'_>> {
        let (_, ci, cfg) = self.configs[k];
        let space = self.space;
        Coster::new(
            &self.chains[ci],
            self.topo,
            cfg,
            space.global_batch,
            space.schedule,
            space.overlap_grad_reduce,
        )
    }

    /// The fast pass: in bound order, while a configuration's bound is below the best value
    /// and a tenth of the time lasts, its relaxed bound ([`partition::relaxed_bound`], kept
    /// in `strong[k]`, never below its own bound) and, unless that rules it out, its greedy
    /// split ([`partition::greedy_split`]), kept where it is the best so far.
    fn fast_pass(&self, budget: &Budget) -> (Vec<f64>, Option<Found>) {
        let mut strong: Vec<f64> = self.configs.iter().map(|c| c.0).collect();
        let mut best: Option<Found> = None;
        let fast = budget.share(0.1);
        for (k, &(lb, ci, cfg)) in self.configs.iter().enumerate() {
            let value = best.as_ref().map_or(f64::INFINITY, |b| b.3);
            if lb >= value || fast.is_exhausted() {
                break;
            }
            let Some(coster) = self.coster(k) else {
                strong[k] = f64::INFINITY;
                continue;
            };
            if let Some(b) = relaxed_bound(&coster, self.objective, &fast) {
                strong[k] = strong[k].max(b);
            }
            if strong[k] >= value {
                continue;
            }
            if let Some(split) = greedy_split(&coster, self.objective, &fast) {
                if split.value < value {
                    best = Some((cfg, ci, split.cuts, split.value));
                }
            }
        }
        (strong, best)
    }

    /// A bound on every configuration from `open` on (the run stopped there): the least of
    /// `incumbent` and their bounds, each raised to its relaxed bound where the fast pass
    /// or the time left (`budget`) computes it.
    fn remaining_bound(
        &self,
        strong: &mut [f64],
        open: usize,
        incumbent: f64,
        budget: &Budget,
    ) -> f64 {
        let mut bound = incumbent;
        for (k, &(lb, _, _)) in self.configs.iter().enumerate().skip(open) {
            if lb >= bound {
                break;
            }
            if strong[k] <= lb && !budget.is_exhausted() {
                if let Some(b) = self.coster(k).map_or(Some(f64::INFINITY), |c| {
                    relaxed_bound(&c, self.objective, budget)
                }) {
                    strong[k] = strong[k].max(b);
                }
            }
            bound = bound.min(strong[k]);
        }
        bound
    }

    /// The outcome of the search: the best split scored, or none, with its status.
    fn outcome(
        &self,
        best: Option<Found>,
        stop: Option<StopReason>,
        bound: f64,
        solved: usize,
        budget: &Budget,
    ) -> Result<ParallelOutcome, String> {
        let (space, objective) = (self.space, self.objective);
        let elapsed_s = budget.elapsed_s();
        let stopped = stop.is_some();
        let Some((cfg, ci, cuts, value)) = best else {
            let status = match stop {
                Some(reason) => Status::NoPlan { reason },
                None => Status::infeasible(LayoutFamily::Uniform),
            };
            return Ok(ParallelOutcome {
                plan: None,
                value: f64::INFINITY,
                bound: if stopped { bound } else { f64::INFINITY },
                status,
                configs_solved: solved,
                configs: self.configs.len(),
                elapsed_s,
                free: false,
                valuation: Valuation::Model,
            });
        };
        let plan = rescored(
            &self.chains[ci],
            self.topo,
            space,
            cfg,
            &cuts,
            value,
            objective,
        )?;
        let status = match stop {
            Some(reason) => Status::Feasible { reason },
            None => Status::Optimal,
        };
        Ok(ParallelOutcome {
            value: objective_value(&plan.score, objective),
            bound: if stopped {
                bound.min(value)
            } else {
                objective_value(&plan.score, objective)
            },
            plan: Some(plan),
            status,
            configs_solved: solved,
            configs: self.configs.len(),
            elapsed_s,
            free: false,
            valuation: Valuation::Model,
        })
    }
}

/// The layout of `cfg` split at `cuts`, scored by the evaluator, with its ZeRO stage lowered
/// to the smallest of equal time that fits when the space leaves ZeRO free.
fn rescored(
    chain: &ChainCosts,
    topo: &Topology,
    space: &Space,
    cfg: Config,
    cuts: &[usize],
    value: f64,
    objective: Objective,
) -> Result<ParallelPlan, String> {
    let layout_with = |z: Zero| {
        let c = Config { zero: z, ..cfg };
        Layout::uniform(chain.len(), cuts, &c, space.global_batch, space.schedule)
            .overlapped(space.overlap_grad_reduce)
    };
    checked_plan(
        chain,
        topo,
        space,
        (cfg.zero, layout_with),
        (value, objective),
    )
}

/// The layout `layout_with(zero)` scored by the evaluator, which must fit and agree with
/// the search's `value` under `objective` to 1e-9 relative (an internal error otherwise);
/// then, when the space leaves ZeRO free, lowered to the smallest stage that fits with the
/// same value. Shared by the uniform and the free search.
pub(crate) fn checked_plan(
    chain: &ChainCosts,
    topo: &Topology,
    space: &Space,
    (zero, layout_with): (Zero, impl Fn(Zero) -> Layout),
    (value, objective): (f64, Objective),
) -> Result<ParallelPlan, String> {
    let mut layout = layout_with(zero);
    let mut score = score_layout(chain, topo, &layout).map_err(|e| e.to_string())?;
    let scored = objective_value(&score, objective);
    if !score.fits || (scored - value).abs() > 1e-9 * value.abs().max(1e-300) {
        return Err(format!(
            "internal error: the search valued the layout at {value} ms, the evaluator at {scored} ms (fits: {})",
            score.fits
        ));
    }
    if space.zero.len() > 1 && zero != Zero::Parameters {
        for z in space.zero.iter().copied().filter(|z| *z < zero) {
            let lower = layout_with(z);
            let s = score_layout(chain, topo, &lower).map_err(|e| e.to_string())?;
            if s.fits && objective_value(&s, objective) == scored {
                (layout, score) = (lower, s);
                break;
            }
        }
    }
    Ok(ParallelPlan {
        layout,
        score,
        chain: chain.clone(),
        accelerators: None,
    })
}

/// Device counts a sweep visits on `devices` accelerators: the powers of two below it, and
/// `devices` itself.
pub fn sweep_counts(devices: usize) -> Vec<usize> {
    let mut counts: Vec<usize> = std::iter::successors(Some(1usize), |&n| n.checked_mul(2))
        .take_while(|&n| n < devices)
        .collect();
    counts.push(devices);
    counts
}

/// The sweep's one loop: for each count of `counts`, ascending, the best layout
/// `plan_at(n, share)` finds with an equal share of the time left. The counts' meaning is
/// the caller's ([`ParallelProblem::sweep`]: the first `n` devices of one type, or the first
/// `n / G` machines of a cluster of several types).
pub fn sweep_over(
    counts: &[usize],
    budget: &Budget,
    mut plan_at: impl FnMut(usize, &Budget) -> Result<ParallelOutcome, String>,
) -> Result<Vec<(usize, ParallelOutcome)>, String> {
    let mut rows = Vec::with_capacity(counts.len());
    for (i, &n) in counts.iter().enumerate() {
        let share = budget.share(1.0 / (counts.len() - i) as f64);
        rows.push((n, plan_at(n, &share)?));
    }
    Ok(rows)
}

/// A count below the fewest-devices answer that no bound excludes: its search stopped
/// (time limit, memory budget, Ctrl-C) with its best layout missing the target but its
/// bound not above it, so it (and fewer devices) may still meet the target.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpenCount {
    pub devices: usize,
    /// Its best layout's value, ms (infinite without one).
    pub value: f64,
    /// Its proven bound, ms (at most the target).
    pub bound: f64,
}

/// The answer of [`fewest_devices`].
#[derive(Clone, Debug)]
pub struct TargetOutcome {
    /// The time per sample asked for, ms.
    pub target_ms: f64,
    /// The fewest accelerators found whose best layout meets the target; `None` when even
    /// the whole space does not.
    pub devices: Option<usize>,
    /// The search at `devices` (or over every accelerator when none meets the target).
    pub outcome: ParallelOutcome,
    /// Whether `devices` is proven least: the count just below it was shown, by its bound,
    /// to miss the target, hence every smaller count (the optimum never improves with
    /// fewer devices); with no answer, the whole space was shown to miss it.
    pub proven: bool,
    /// When not `proven`: the count whose bound does not exclude it (the one just below
    /// `devices`, or the whole space with no answer).
    pub open: Option<OpenCount>,
    /// Counts searched, in order.
    pub searched: Vec<usize>,
}

/// The fewest of the first accelerators (one type: the cheapest) whose best uniform layout
/// takes at most `target_ms` per sample ([`fewest_over`] on one type's devices).
pub fn fewest_devices(
    chains: &[ChainCosts],
    topo: &Topology,
    space: &Space,
    target_ms: f64,
    budget: &Budget,
) -> Result<TargetOutcome, String> {
    let all = space.max_devices.min(topo.devices());
    fewest_over(all, 1, target_ms, budget, |n, share| {
        let row = Space {
            max_devices: n,
            ..space.clone()
        };
        plan_uniform(chains, topo, &row, Objective::TimePerSample, share)
    })
}

/// The fewest-devices search's one loop: the least `k` in `1..=steps` whose best layout
/// `plan_at(k·step, share)` takes at most `target_ms` per sample, each search given an
/// equal share of the time left among the searches still to come (`1 + ⌈log₂ steps⌉` in
/// all). It relies on the optimum never worsening with more devices, which holds for every
/// space searched here (module documentation of `problem`: the layouts on fewer devices
/// are layouts on more), so a binary search over `k` finds the least: a count meets the
/// target when its plan's value does, and misses it otherwise. The answer `k` is proven
/// least when `k = 1` or the count `k − 1` (always searched) was shown to miss by its
/// bound (then every smaller count misses too, by monotonicity); a search stopped with a
/// bound at or below the target leaves it open, reported in [`TargetOutcome::open`].
/// Counts are reported in devices (`k·step`).
pub fn fewest_over(
    steps: usize,
    step: usize,
    target_ms: f64,
    budget: &Budget,
    mut plan_at: impl FnMut(usize, &Budget) -> Result<ParallelOutcome, String>,
) -> Result<TargetOutcome, String> {
    let all = steps * step;
    let mut left = 1 + steps.max(1).next_power_of_two().trailing_zeros() as usize;
    let mut search = |n: usize| {
        let share = budget.share(1.0 / left.max(1) as f64);
        left = left.saturating_sub(1);
        plan_at(n, &share)
    };
    let open_at = |n: usize, o: &ParallelOutcome| {
        (o.bound <= target_ms).then_some(OpenCount {
            devices: n,
            value: o.value,
            bound: o.bound,
        })
    };
    let mut searched = vec![all];
    let whole = search(all)?;
    if whole.value > target_ms {
        let open = open_at(all, &whole);
        return Ok(TargetOutcome {
            target_ms,
            devices: None,
            proven: open.is_none(),
            open,
            outcome: whole,
            searched,
        });
    }
    // Invariant: `hi` meets the target; every count below `lo` misses it; `below` is the
    // open miss at `lo − 1`, if it was open.
    let (mut lo, mut hi, mut best, mut below) = (1, steps, whole, None);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        searched.push(mid * step);
        let o = search(mid * step)?;
        if o.value <= target_ms {
            hi = mid;
            best = o;
        } else {
            below = open_at(mid * step, &o);
            lo = mid + 1;
        }
    }
    Ok(TargetOutcome {
        target_ms,
        devices: Some(hi * step),
        outcome: best,
        proven: below.is_none(),
        open: below,
        searched,
    })
}

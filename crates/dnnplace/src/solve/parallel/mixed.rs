//! Free layouts on a cluster of several accelerator types ([`MixedTopology`],
//! `docs/parallel.md`, "Several accelerator types"): every stage on machines of one type
//! (its TP groups and replicas all that type), priced with that type's costs, memory and
//! links; per-stage `t_s`, `d_s` as in [`super::free`]; `b`, ZeRO and recomputation common.
//! Objective: the time per sample `max_s (m_s·T_s + sync_s) / B`.
//!
//! **The space, exactly.** (1) The stages on each type form *one contiguous run* of the
//! pipeline (a pipeline never returns to a type it left); (2) the order of the types along
//! the pipeline is free (every order of every subset of the types); (3) inside its type's
//! group the run is *packed* from the group's device 0, exactly as one type's free layout
//! ([`super::free`]). Between two types a transfer runs on the receiving machine's
//! network link. On one type this is the free space itself.
//!
//! **Feasibility of a threshold `V`.** `R[S][i]` = for each capped replica sum `σ`
//! (1F1B's in-flight count needs `min(M, Σ_{j≥s} d_j)`, [`super::free`]), whether units
//! `i..U` can be laid out on the types of the set `S`, each used by at most one run, every
//! stage worth `≤ V` and fitting memory, with that `σ`; only the least such `σ` is kept (a
//! smaller suffix sum never costs an earlier stage memory, and the other groups' devices
//! are their own). For `S ≠ ∅`:
//!
//! ```text
//! R[S][i] = min_{g ∈ S} min { σ : (σ, n) on the front of D_g^{S∖g}[i][0][network], n ≤ N_g }
//! ```
//!
//! where `D_g^{S'}` is [`super::free::run_dp`] on group `g` (fronts of `(σ, fewest devices
//! of g)`) in which a stage ending at unit `j` may also *hand over* the rest to the types of
//! `S'` with `σ' = R[S'][j]`, at no device of `g`, its boundary priced on the network, its
//! own `σ_s = min(M, d_s + σ')`. With a fixed stage count the keys are `(stages, σ)` and
//! the least `σ` is kept per count. A run starting at unit `i > 0` receives from another
//! type: its first stage starts at the group's device 0 with its input on the network
//! (class `network, not sharing`). `V` is feasible iff `R[all types][0]` exists: exact for
//! the space. Per threshold `Σ_S |S| = L·2^(L−1)` group DPs (12 for three types), those of
//! one set size in parallel.
//!
//! **The optimum** by the same bisection as [`super::free`]: `lo` from a volume bound. With
//! `c_u^g = min_t t·C_u^g(t)` (the device-time of unit `u`'s compute and TP per micro-batch
//! on type `g`), a stage `s` on type `g` has `V ≥ m_s·T_s/B ≥ Σ_{u∈s} c_u^g/(t_s·d_s·b)`, so
//! the units placed on `g` carry `Σ_{u on g} c_u^g ≤ V·b·N_g` (`N_g` its devices). For any
//! weights `μ_g ≥ 0` with `Σ_g N_g·μ_g = 1`, `V·b = Σ_g N_g μ_g V b ≥ Σ_u min_g μ_g c_u^g`
//! — a valid bound for every `μ` (the Lagrangian of the fractional assignment of units to
//! types). `μ_g = 1/N` gives `Σ_u min_g c_u^g/(N·b)`; a coordinate search over `μ` keeps
//! the best value it evaluates (each evaluation is a bound, so the search need not be
//! optimal), lowered by 10⁻¹² relative against rounding. `hi` from the first feasible layout
//! (threshold `∞`: the fewest devices). Once `hi − lo ≤ 10⁻⁶·hi` the threshold is `hi`,
//! strictly: infeasible proves `hi` optimal. A run stopped by `--time-limit`,
//! `--memory-budget` or Ctrl-C reports its best layout, `lo` as its bound, and the gap;
//! past the time limit without any layout it goes on (Ctrl-C still stops it) to the first.
//!
//! Every plan is re-scored by [`crate::score::parallel::score_mixed`] (unit by unit, no
//! arithmetic shared with the DP); a difference above 1e-9 relative is an error.
//!
//! The iteration on several types ([`super::mixed_iteration`]) runs this DP with each stage
//! valued by its lower bound `W_s` on the simulated iteration ([`Measure::IterationBound`]):
//! `R[S][i]` then keeps every `σ` with the least `Σ T_k` of its layouts ([`feasible`]).

use std::ops::Range;

use rayon::prelude::*;

use super::free::{
    bisect, run_dp, Bisection, Dp, Found, FreeConfig, Handed, Measure, Tables, NET_APART,
};
use super::{zero_stages, ParallelOutcome, ParallelPlan, Space};
use crate::model::parallel::{ChainCosts, Layout, MixedTopology, StageLayout, Zero};
use crate::model::schedule::Schedule;
use crate::score::parallel::score_mixed;
use crate::solve::budget::{Budget, Exhausted};
use crate::solve::{LayoutFamily, Status, StopReason};

/// One stage of a mixed layout: its units, `t`, `d` and group (accelerator type).
pub type MixedChoice = (Range<usize>, usize, usize, usize);

/// The layout of `stages`, each group's stages packed from the group's first device in
/// pipeline order (module documentation), devices numbered as [`MixedTopology`] does.
pub fn packed_mixed(
    stages: &[MixedChoice],
    topo: &MixedTopology,
    (micro_batch, global_batch): (usize, usize),
    zero: Zero,
    schedule: Schedule,
    recompute: bool,
) -> Layout {
    let mut next = vec![0usize; topo.groups.len()];
    let stages = stages
        .iter()
        .map(|(units, t, d, g)| {
            let first = next[*g].div_ceil(*t) * t;
            next[*g] = first + t * d;
            StageLayout {
                units: units.clone(),
                tensor_parallel: *t,
                data_parallel: *d,
                first_device: topo.offset(*g) + first,
            }
        })
        .collect();
    Layout {
        stages,
        micro_batch,
        global_batch,
        zero,
        schedule,
        recompute,
        overlap_grad_reduce: false,
    }
}

/// One configuration `(b, ZeRO, recompute)`: per group its tables (`None`: no stage fits the
/// group's TP or DP choices), and the lower bound.
pub(super) struct MixedConfig<'a> {
    pub(super) cfg: FreeConfig,
    pub(super) groups: Vec<Option<Tables<'a>>>,
    pub(super) bound: f64,
    /// A threshold shown infeasible for this configuration (no layout of it is worth
    /// `≤ proven`): later checks at or below it skip it.
    proven: f64,
}

/// Every configuration of `space` valued by `measure`, by ascending bound. Under
/// [`Measure::IterationBound`] ([`super::mixed_iteration`]) each group's `(Φ, Δ)` is the
/// least over the usable groups and the bound is `B` × the volume bound (every lane of a
/// stage runs `m_s·T_s`).
pub(super) fn configs<'a>(
    chains: &'a [Vec<ChainCosts>],
    topo: &MixedTopology,
    space: &Space,
    measure: Measure,
) -> Vec<MixedConfig<'a>> {
    let recomputes = match space.recompute {
        Some(r) => vec![r],
        None => vec![false, true],
    };
    let mut out = Vec::new();
    for ci in 0..chains[0].len() {
        for &zero in &zero_stages(space, 2) {
            for &recompute in &recomputes {
                let cfg = FreeConfig {
                    chain: ci,
                    zero,
                    recompute,
                };
                let mut groups: Vec<Option<Tables>> = topo
                    .groups
                    .iter()
                    .zip(chains)
                    .map(|(t, c)| {
                        let tb = Tables::new(&c[ci], t, space, cfg);
                        (!tb.tps.is_empty() && !tb.ds.is_empty()).then_some(tb)
                    })
                    .collect();
                let mut scale = 1.0;
                if measure == Measure::IterationBound {
                    groups = for_iteration(groups);
                    scale = space.global_batch as f64;
                }
                if let Some(bound) = lower_bound(&groups).map(|b| b * scale) {
                    out.push(MixedConfig {
                        cfg,
                        groups,
                        bound,
                        proven: f64::NEG_INFINITY,
                    });
                }
            }
        }
    }
    out.sort_by(|a, b| a.bound.total_cmp(&b.bound));
    out
}

/// A lower bound on every layout of `space` (its best configuration's volume bound; ∞
/// when no configuration has a usable group): what [`super::mixed_uniform`] orders its
/// parts by.
pub fn space_bound(chains: &[Vec<ChainCosts>], topo: &MixedTopology, space: &Space) -> f64 {
    configs(chains, topo, space, Measure::PerSample)
        .first()
        .map_or(f64::INFINITY, |c| c.bound)
}

/// The groups' tables valuing stages by `W_s` ([`super::mixed_iteration`]), each with the
/// least `(Φ, Δ)` over the usable groups: the stages before a stage may lie on any type.
fn for_iteration(groups: Vec<Option<Tables>>) -> Vec<Option<Tables>> {
    let least = |k: usize| -> Vec<f64> {
        let usable: Vec<&[f64]> = groups
            .iter()
            .flatten()
            .map(|tb| if k == 0 { tb.passes().0 } else { tb.passes().1 })
            .collect();
        let n = usable.first().map_or(0, |x| x.len());
        let mut out = vec![0.0; n];
        for u in 1..n {
            let step = usable
                .iter()
                .map(|x| x[u] - x[u - 1])
                .fold(f64::INFINITY, f64::min);
            out[u] = out[u - 1] + step;
        }
        out
    };
    let passes = (least(0), least(1));
    groups
        .into_iter()
        .map(|g| g.map(|tb| tb.for_iteration().with_passes(passes.clone())))
        .collect()
}

/// The volume bound of the module documentation over the usable groups: the best
/// `Σ_u min_g μ_g c_u^g / b` the coordinate search over `μ` evaluates, never below the
/// uniform weights' `Σ_u min_g c_u^g/(N·b)`.
fn lower_bound(groups: &[Option<Tables>]) -> Option<f64> {
    let usable: Vec<&Tables> = groups.iter().flatten().collect();
    let first = usable.first()?;
    let n = first.chain.len();
    // cost[u][g] = min_t t·C_u^g(t): unit u's device-time per micro-batch on group g.
    let cost: Vec<Vec<f64>> = (0..n)
        .map(|u| {
            usable
                .iter()
                .map(|tb| {
                    tb.tps
                        .iter()
                        .zip(&tb.sums)
                        .map(|(&(t, _), s)| t as f64 * (s[0][u + 1] - s[0][u]))
                        .fold(f64::INFINITY, f64::min)
                })
                .collect()
        })
        .collect();
    let devices: Vec<f64> = usable.iter().map(|t| t.devices as f64).collect();
    let b = first.chain.micro_batch as f64;
    let bound = volume_bound(&cost, &devices) / b;
    Some(bound * (1.0 - 1e-12))
}

/// `max_μ Σ_u min_g μ_g·cost[u][g]` over weights `μ_g = λ_g / Σ_h N_h λ_h`, `λ > 0`, by a
/// coordinate search on `λ` from `λ = 1` (the uniform weights): each evaluation is a valid
/// bound (module documentation), so the largest one found is returned.
fn volume_bound(cost: &[Vec<f64>], devices: &[f64]) -> f64 {
    let value = |lambda: &[f64]| -> f64 {
        let norm: f64 = lambda.iter().zip(devices).map(|(l, n)| l * n).sum();
        cost.iter()
            .map(|row| {
                row.iter()
                    .zip(lambda)
                    .map(|(c, l)| c * (l / norm))
                    .fold(f64::INFINITY, f64::min)
            })
            .sum()
    };
    let mut lambda = vec![1.0; devices.len()];
    let mut best = value(&lambda);
    if devices.len() < 2 || !best.is_finite() {
        return best;
    }
    let mut step = 2.0_f64;
    while step > 1.0 + 1e-4 {
        let mut improved = false;
        for g in 0..lambda.len() {
            for factor in [step, 1.0 / step] {
                let mut trial = lambda.clone();
                trial[g] *= factor;
                let v = value(&trial);
                if v > best {
                    (best, lambda, improved) = (v, trial, true);
                }
            }
        }
        if !improved {
            step = step.sqrt();
        }
    }
    best
}

/// A feasible mixed layout of one check.
pub(super) struct MixedFound {
    pub(super) stages: Vec<MixedChoice>,
    pub(super) value: f64,
}

/// The feasibility of threshold `v` on one configuration (module documentation): a layout
/// whose every stage is worth `≤ v` (`< v` when `strict`), or `None`. Under
/// [`Measure::IterationBound`] a larger `σ` may lower a stage's value, so `R[S][i]` keeps
/// every `σ` with the least `Σ T` of its layouts ([`super::mixed_iteration`]); a feasible
/// answer is then a candidate, an infeasible one a proof.
pub(super) fn feasible(
    c: &MixedConfig,
    v: f64,
    strict: bool,
    stages: Option<usize>,
    budget: &Budget,
) -> Result<Option<MixedFound>, Exhausted> {
    let groups = c.groups.len();
    let n = c
        .groups
        .iter()
        .flatten()
        .next()
        .map_or(0, |t| t.chain.len());
    let usable: usize = (0..groups)
        .filter(|&g| c.groups[g].is_some())
        .map(|g| 1 << g)
        .sum();
    // reach[S][i]: per stage count (0 when free) the least capped replica sum `σ` of a
    // layout of units i..U on the types of S (iteration: every σ, with its least Σ T);
    // the empty set reaches only U (no stages).
    let mut reach: Vec<Vec<Vec<Handed>>> = vec![vec![Vec::new(); n + 1]; 1 << groups];
    let every_sigma = c
        .groups
        .iter()
        .flatten()
        .any(|t| t.measure() == Measure::IterationBound);
    let mut dps: Vec<Vec<Option<Dp>>> = (0..1usize << groups)
        .map(|_| (0..groups).map(|_| None).collect())
        .collect();
    // Level by level (sets of 1, 2, … types): a level's group DPs read only the smaller
    // sets' `R` and run in parallel (rayon).
    for level in 1..=groups as u32 {
        let jobs: Vec<(usize, usize)> = (1..=usable)
            .filter(|&set| set & !usable == 0 && set.count_ones() == level)
            .flat_map(|set| {
                (0..groups)
                    .filter(move |g| set >> g & 1 == 1)
                    .map(move |g| (set, g))
            })
            .collect();
        let done: Vec<Dp> = jobs
            .par_iter()
            .map(|&(set, g)| {
                let tb = c.groups[g].as_ref().expect("usable");
                let rest = &reach[set & !(1 << g)];
                run_dp(tb, v, strict, &|j| &rest[j][..], budget)
            })
            .collect::<Result<_, _>>()?;
        for (&(set, g), dp) in jobs.iter().zip(done) {
            let tb = c.groups[g].as_ref().expect("usable");
            for (i, keys) in reach[set].iter_mut().enumerate().take(n) {
                for p in &dp.fronts[dp.idx(i, 0, NET_APART)] {
                    if p.devices as usize <= tb.devices {
                        keep(keys, ((p.stages, p.sigma), p.rest), every_sigma);
                    }
                }
            }
            dps[set][g] = Some(dp);
        }
    }
    let fixed = stages.map(|p| p as u16);
    let Some(&(key, _)) = reach[usable][0]
        .iter()
        .find(|k| fixed.is_none_or(|p| p == k.0 .0))
    else {
        return Ok(None);
    };
    let mut out = MixedFound {
        stages: Vec::new(),
        value: 0.0,
    };
    let (mut set, mut i, mut key) = (usable, 0, key);
    while i < n {
        let (g, tb, dp) = (0..groups)
            .find_map(|g| {
                let dp = dps[set][g].as_ref()?;
                let tb = c.groups[g].as_ref()?;
                dp.fronts[dp.idx(i, 0, NET_APART)]
                    .iter()
                    .any(|p| (p.stages, p.sigma) == key && p.devices as usize <= tb.devices)
                    .then_some((g, tb, dp))
            })
            .expect("a reachable key has a group");
        let (Found { stages, value }, j, rest) = dp.trace(tb, (i, 0, NET_APART), key);
        out.stages
            .extend(stages.into_iter().map(|(u, t, d)| (u, t, d, g)));
        out.value = out.value.max(value);
        (set, i, key) = (set & !(1 << g), j, rest);
    }
    Ok(Some(out))
}

/// Keeps in `keys`, with `handed`: the least `σ` per stage count, or with `every_sigma`
/// each key `(stages, σ)` with the least `Σ T` of its layouts.
fn keep(keys: &mut Vec<Handed>, handed: Handed, every_sigma: bool) {
    let ((stages, sigma), rest) = handed;
    if every_sigma {
        match keys.iter_mut().find(|k| k.0 == (stages, sigma)) {
            Some(k) => k.1 = k.1.min(rest),
            None => keys.push(handed),
        }
        return;
    }
    match keys.iter_mut().find(|k| k.0 .0 == stages) {
        Some(k) => k.0 .1 = k.0 .1.min(sigma),
        None => keys.push(handed),
    }
}

/// The best free layout on a cluster of several types (module documentation). `chains[g]`
/// holds group `g`'s costs, one per micro-batch size of `space` in the same order; every
/// group's devices may be used (`space.max_devices` must cover the cluster). With
/// `target_gap` the bisection stops once `(hi − lo)/hi` reaches it.
pub fn plan_mixed(
    chains: &[Vec<ChainCosts>],
    topo: &MixedTopology,
    space: &Space,
    target_gap: Option<f64>,
    budget: &Budget,
) -> Result<ParallelOutcome, String> {
    if chains.len() != topo.groups.len() || space.max_devices < topo.devices() {
        return Err(format!(
            "internal error: {} chains for {} accelerator types, {} of {} devices allowed",
            chains.len(),
            topo.groups.len(),
            space.max_devices,
            topo.devices()
        ));
    }
    let mut configs = configs(chains, topo, space, Measure::PerSample);
    let lo = configs.first().map_or(f64::INFINITY, |c| c.bound);
    let run = bisect(
        (lo, f64::INFINITY),
        target_gap,
        budget,
        false,
        |v, strict, active, checks| {
            let found = check_all(&mut configs, v, strict, space.stages, active, checks)?;
            Ok(found.map(|(cfg, found)| (found.value, (cfg, found.stages))))
        },
    );
    let Bisection {
        lo,
        hi,
        best,
        checks,
        stop,
    } = run;
    let proven = lo >= hi;
    let plan = match &best {
        Some((cfg, stages)) => Some(rescored(chains, topo, space, *cfg, stages, hi)?),
        None => None,
    };
    let status = match (&plan, proven, stop) {
        (Some(_), true, _) => Status::Optimal,
        (Some(_), false, reason) => Status::Feasible {
            reason: reason.unwrap_or(StopReason::TimeLimit),
        },
        (None, _, Some(reason)) => Status::NoPlan { reason },
        (None, _, None) => Status::infeasible(LayoutFamily::FreeAnyType),
    };
    let value = plan
        .as_ref()
        .map_or(f64::INFINITY, |p| p.score.time_per_sample_ms);
    Ok(ParallelOutcome {
        plan,
        value,
        bound: if proven { value } else { lo.min(value) },
        status,
        configs_solved: checks,
        configs: configs.len(),
        elapsed_s: budget.elapsed_s(),
        free: true,
        valuation: super::Valuation::Model,
    })
}

/// The check of `v` on every configuration whose bound allows it and that an earlier check
/// at or above `v` did not already show infeasible; a configuration found infeasible at a
/// non-strict `v` records it.
pub(super) fn check_all(
    configs: &mut [MixedConfig],
    v: f64,
    strict: bool,
    stages: Option<usize>,
    budget: &Budget,
    checks: &mut usize,
) -> Result<Option<(FreeConfig, MixedFound)>, Exhausted> {
    for c in configs.iter_mut() {
        if c.bound > v || (strict && c.bound >= v) {
            break;
        }
        if v <= c.proven {
            continue;
        }
        *checks += 1;
        match feasible(c, v, strict, stages, budget)? {
            Some(found) => return Ok(Some((c.cfg, found))),
            None if !strict => c.proven = v,
            None => {}
        }
    }
    Ok(None)
}

/// The layout of `stages` scored by [`score_mixed`], which must fit and agree with the
/// search's `value` to 1e-9 relative; its ZeRO stage lowered to the smallest of equal
/// value that fits when the space leaves ZeRO free.
pub(super) fn rescored(
    chains: &[Vec<ChainCosts>],
    topo: &MixedTopology,
    space: &Space,
    cfg: FreeConfig,
    stages: &[MixedChoice],
    value: f64,
) -> Result<ParallelPlan, String> {
    let cs: Vec<ChainCosts> = chains.iter().map(|c| c[cfg.chain].clone()).collect();
    let b = cs[0].micro_batch;
    let layout_with = |z: Zero| {
        packed_mixed(
            stages,
            topo,
            (b, space.global_batch),
            z,
            space.schedule,
            cfg.recompute,
        )
        .overlapped(space.overlap_grad_reduce)
    };
    let mut layout = layout_with(cfg.zero);
    let mut score = score_mixed(&cs, topo, &layout).map_err(|e| e.to_string())?;
    let scored = score.time_per_sample_ms;
    if !score.fits || (scored - value).abs() > 1e-9 * value.abs().max(1e-300) {
        return Err(format!(
            "internal error: the search valued the layout at {value} ms, the evaluator at {scored} ms (fits: {})",
            score.fits
        ));
    }
    if space.zero.len() > 1 && cfg.zero != Zero::Parameters {
        for z in space.zero.iter().copied().filter(|z| *z < cfg.zero) {
            let lower = layout_with(z);
            let s = score_mixed(&cs, topo, &lower).map_err(|e| e.to_string())?;
            if s.fits && s.time_per_sample_ms == scored {
                (layout, score) = (lower, s);
                break;
            }
        }
    }
    let accelerators = stages
        .iter()
        .map(|st| topo.groups[st.3].type_name.clone())
        .collect();
    Ok(ParallelPlan {
        layout,
        score,
        chain: cs[stages[0].3].clone(),
        accelerators: Some(accelerators),
    })
}

#[cfg(test)]
mod tests {
    use super::volume_bound;

    /// One unit costing 1 on type A and 2 on type B, one device each: the fractional
    /// assignment `x` on A, `1 − x` on B has makespan `max(x, 2(1 − x))`, least at
    /// `x = 2/3`: 2/3. The uniform weights give `min(1, 2)/2 = 1/2`.
    #[test]
    fn the_volume_bound_reaches_the_fractional_assignment_and_never_passes_it() {
        let got = volume_bound(&[vec![1.0, 2.0]], &[1.0, 1.0]);
        assert!(got <= 2.0 / 3.0 + 1e-12, "{got} above the LP optimum 2/3");
        assert!(got >= 2.0 / 3.0 * (1.0 - 1e-3), "{got} far below 2/3");
        // Two units, each cheap on its own type: the bound is 1 (each on its own device),
        // against (1 + 1)/2 = 1 uniformly as well; never above the integral optimum 1.
        let got = volume_bound(&[vec![1.0, 10.0], vec![10.0, 1.0]], &[1.0, 1.0]);
        assert!((0.999..=1.0 + 1e-12).contains(&got), "{got}");
        // One type: the total work over its devices.
        let got = volume_bound(&[vec![3.0], vec![5.0]], &[4.0]);
        assert!((got - 2.0).abs() <= 1e-12, "{got}");
    }
}

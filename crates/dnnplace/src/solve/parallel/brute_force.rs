//! The oracle for [`super::plan_uniform`]: every uniform layout of a [`Space`] — every
//! micro-batch size, TP degree, DP degree, ZeRO stage (every one the space allows), recomputation (both when free), stage count and set of cut positions — built as a [`Layout`] and scored by the
//! independent evaluator [`crate::score::parallel`]; the best one that fits. Right by
//! construction: it shares no arithmetic with the search. O(Σ 2^(U−1)) layouts: small
//! chains only.

use super::mixed::{packed_mixed, MixedChoice};
use super::{objective_value, Objective, Space};
use crate::model::parallel::{ChainCosts, Layout, MixedTopology, Topology, Uniform, Zero};
use crate::score::parallel::{score_layout, score_mixed, LayoutScore};

/// The best uniform layout of `space` and its value, `None` when none fits.
pub fn brute_force_uniform(
    chains: &[ChainCosts],
    topo: &Topology,
    space: &Space,
    objective: Objective,
) -> Option<(Layout, f64)> {
    let devices = space.max_devices.min(topo.devices());
    let zeros: Vec<Zero> = space.zero.clone();
    let recomputes: Vec<bool> = space.recompute.map_or(vec![false, true], |r| vec![r]);
    let mut best: Option<(Layout, f64)> = None;
    for chain in chains {
        let n = chain.len();
        for &t in &space.tensor_parallel {
            for d in 1..=devices {
                if space.data_parallel.is_some_and(|x| x != d) {
                    continue;
                }
                for (&z, &r) in zeros
                    .iter()
                    .flat_map(|z| recomputes.iter().map(move |r| (z, r)))
                {
                    for mask in 0u64..(1u64 << (n - 1)) {
                        let cuts: Vec<usize> =
                            (1..n).filter(|c| mask >> (c - 1) & 1 == 1).collect();
                        if (cuts.len() + 1) * t * d > devices
                            || space.stages.is_some_and(|p| p != cuts.len() + 1)
                        {
                            continue;
                        }
                        let cfg = Uniform {
                            micro_batch: chain.micro_batch,
                            tensor_parallel: t,
                            data_parallel: d,
                            zero: z,
                            recompute: r,
                            stages: cuts.len() + 1,
                        };
                        let layout =
                            Layout::uniform(n, &cuts, &cfg, space.global_batch, space.schedule)
                                .overlapped(space.overlap_grad_reduce);
                        let Ok(score) = score_layout(chain, topo, &layout) else {
                            continue;
                        };
                        let v = objective_value(&score, objective);
                        if score.fits && best.as_ref().is_none_or(|b| v < b.1) {
                            best = Some((layout, v));
                        }
                    }
                }
            }
        }
    }
    best
}

/// The oracle for [`super::free::plan_free`]: every packed free layout of a [`Space`]
/// (`super::free`'s module documentation) — every micro-batch size, ZeRO stage the space
/// allows, recomputation (both when free), set of cut positions, and per stage every TP
/// degree of the space and every DP degree `1..=N` — built by [`super::free::packed`] and
/// scored by the independent evaluator; the best time per sample of one that fits.
/// Layouts the evaluator refuses (a batch `d·b` does not divide, a TP group that would
/// span machines) are skipped. Exponential: tiny chains and clusters only.
pub fn brute_force_free(
    chains: &[ChainCosts],
    topo: &Topology,
    space: &Space,
) -> Option<(Layout, f64)> {
    brute_force_free_by(chains, topo, space, |_, _, score| {
        Some(score.time_per_sample_ms)
    })
}

/// [`brute_force_free`] under any value: `value(chain, layout, score)` of every packed
/// free layout that the evaluator scores and that fits (`None`: not counted); the least.
/// The oracle of [`super::free_iteration`] passes the simulated iteration.
pub fn brute_force_free_by(
    chains: &[ChainCosts],
    topo: &Topology,
    space: &Space,
    mut value: impl FnMut(&ChainCosts, &Layout, &LayoutScore) -> Option<f64>,
) -> Option<(Layout, f64)> {
    let devices = space.max_devices.min(topo.devices());
    let recomputes: Vec<bool> = space.recompute.map_or(vec![false, true], |r| vec![r]);
    let mut best: Option<(Layout, f64)> = None;
    for chain in chains {
        let n = chain.len();
        for &z in &space.zero {
            for &r in &recomputes {
                for mask in 0u64..(1u64 << (n - 1)) {
                    let bounds: Vec<usize> = std::iter::once(0)
                        .chain((1..n).filter(|c| mask >> (c - 1) & 1 == 1))
                        .chain(std::iter::once(n))
                        .collect();
                    if space.stages.is_some_and(|p| p != bounds.len() - 1) {
                        continue;
                    }
                    let mut stages = Vec::new();
                    every_choice(&bounds, space, devices, 0, &mut stages, &mut |stages| {
                        let layout = super::free::packed(
                            stages,
                            chain.micro_batch,
                            space.global_batch,
                            z,
                            space.schedule,
                            r,
                        )
                        .overlapped(space.overlap_grad_reduce);
                        let Ok(score) = score_layout(chain, topo, &layout) else {
                            return;
                        };
                        if !score.fits {
                            return;
                        }
                        let Some(v) = value(chain, &layout, &score) else {
                            return;
                        };
                        if best.as_ref().is_none_or(|b| v < b.1) {
                            best = Some((layout, v));
                        }
                    });
                }
            }
        }
    }
    best
}

/// Calls `visit` with every choice of `(t, d)` per stage of `bounds` whose packed layout
/// ends within `devices`; `next` is the first free device.
fn every_choice(
    bounds: &[usize],
    space: &Space,
    devices: usize,
    next: usize,
    stages: &mut Vec<(std::ops::Range<usize>, usize, usize)>,
    visit: &mut impl FnMut(&[(std::ops::Range<usize>, usize, usize)]),
) {
    let s = stages.len();
    if s + 1 == bounds.len() {
        visit(stages);
        return;
    }
    for &t in &space.tensor_parallel {
        let first = next.div_ceil(t) * t;
        for d in 1..=devices {
            if first + t * d > devices {
                break;
            }
            if space.data_parallel.is_some_and(|x| x != d) {
                continue;
            }
            stages.push((bounds[s]..bounds[s + 1], t, d));
            every_choice(bounds, space, devices, first + t * d, stages, visit);
            stages.pop();
        }
    }
}

/// The oracle for [`super::mixed::plan_mixed`]: every layout of its space (`super::mixed`'s
/// module documentation) — every micro-batch size, ZeRO stage the space allows,
/// recomputation (both when free), set of cut positions, and per stage every accelerator
/// type (each type's stages one contiguous run of the pipeline, in any order), TP degree of
/// the space and DP degree `1..=N_g` — built by [`packed_mixed`] (each type's stages
/// packed on its own machines) and scored by [`score_mixed`]; the best time per sample of
/// one that fits. `chains[g]`: type `g`'s costs per micro-batch size. Exponential: tiny
/// chains and clusters only.
pub fn brute_force_mixed(
    chains: &[Vec<ChainCosts>],
    topo: &MixedTopology,
    space: &Space,
) -> Option<(Layout, f64)> {
    brute_force_mixed_by(chains, topo, space, |_, _, score| {
        Some(score.time_per_sample_ms)
    })
}

/// [`brute_force_mixed`] under any value: `value(costs, layout, score)` of every layout of
/// the space that [`score_mixed`] scores and that fits (`costs`: every type's at the
/// layout's micro-batch; `None`: not counted); the least. The oracle of
/// [`super::mixed_iteration`] passes the simulated iteration.
pub fn brute_force_mixed_by(
    chains: &[Vec<ChainCosts>],
    topo: &MixedTopology,
    space: &Space,
    mut value: impl FnMut(&[ChainCosts], &Layout, &LayoutScore) -> Option<f64>,
) -> Option<(Layout, f64)> {
    let recomputes: Vec<bool> = space.recompute.map_or(vec![false, true], |r| vec![r]);
    let mut best: Option<(Layout, f64)> = None;
    for ci in 0..chains[0].len() {
        let cs: Vec<ChainCosts> = chains.iter().map(|c| c[ci].clone()).collect();
        let n = cs[0].len();
        let b = cs[0].micro_batch;
        for &z in &space.zero {
            for &r in &recomputes {
                for mask in 0u64..(1u64 << (n - 1)) {
                    let bounds: Vec<usize> = std::iter::once(0)
                        .chain((1..n).filter(|c| mask >> (c - 1) & 1 == 1))
                        .chain(std::iter::once(n))
                        .collect();
                    if space.stages.is_some_and(|p| p != bounds.len() - 1) {
                        continue;
                    }
                    let mut next = vec![0; topo.groups.len()];
                    every_mixed(
                        &bounds,
                        space,
                        topo,
                        &mut next,
                        &mut Vec::new(),
                        &mut |st| {
                            let layout = packed_mixed(
                                st,
                                topo,
                                (b, space.global_batch),
                                z,
                                space.schedule,
                                r,
                            )
                            .overlapped(space.overlap_grad_reduce);
                            let Ok(score) = score_mixed(&cs, topo, &layout) else {
                                return;
                            };
                            if !score.fits {
                                return;
                            }
                            let Some(v) = value(&cs, &layout, &score) else {
                                return;
                            };
                            if best.as_ref().is_none_or(|b| v < b.1) {
                                best = Some((layout, v));
                            }
                        },
                    );
                }
            }
        }
    }
    best
}

/// Calls `visit` with every choice of type, `t` and `d` per stage of `bounds` whose types
/// form contiguous runs and whose stages fit their groups when packed; `next[g]`: group
/// `g`'s first free device.
fn every_mixed(
    bounds: &[usize],
    space: &Space,
    topo: &MixedTopology,
    next: &mut [usize],
    stages: &mut Vec<MixedChoice>,
    visit: &mut impl FnMut(&[MixedChoice]),
) {
    let s = stages.len();
    if s + 1 == bounds.len() {
        visit(stages);
        return;
    }
    for g in 0..topo.groups.len() {
        let left = stages.last().is_some_and(|l| l.3 != g);
        if left && stages.iter().any(|x| x.3 == g) {
            continue; // the pipeline would return to a type it left
        }
        let devices = topo.groups[g].devices();
        for &t in &space.tensor_parallel {
            let first = next[g].div_ceil(t) * t;
            for d in 1..=devices {
                if first + t * d > devices {
                    break;
                }
                if space.data_parallel.is_some_and(|x| x != d) {
                    continue;
                }
                let before = next[g];
                next[g] = first + t * d;
                stages.push((bounds[s]..bounds[s + 1], t, d, g));
                every_mixed(bounds, space, topo, next, stages, visit);
                stages.pop();
                next[g] = before;
            }
        }
    }
}

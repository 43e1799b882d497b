//! The oracle for [`super::plan_uniform`]: every uniform layout of a [`Space`] — every
//! micro-batch size, TP degree, DP degree, ZeRO stage (every one the space allows), recomputation (both when free), stage count and set of cut positions — built as a [`Layout`] and scored by the
//! independent evaluator [`crate::score::parallel`]; the best one that fits. Right by
//! construction: it shares no arithmetic with the search. O(Σ 2^(U−1)) layouts: small
//! chains only.

use super::{objective_value, Objective, Space};
use crate::model::parallel::{ChainCosts, Layout, Topology, Uniform, Zero};
use crate::score::parallel::score_layout;

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
                            Layout::uniform(n, &cuts, &cfg, space.global_batch, space.schedule);
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

//! The search over uniform **interleaved** layouts (`plan --parallel 3d --schedule
//! interleaved:v`, `docs/parallel.md` "The interleaved schedule").
//!
//! **The space.** Every configuration `(b, t, d, ZeRO, recompute, p)` of the uniform
//! search ([`super::plan_uniform`]: the same TP degrees, DP degrees, ZeRO choices and
//! recomputation) with `p ≥ 2` stages of `v` chunks each, `p·t·d` within the devices,
//! `m = B/(d·b)` a multiple of `p` (Megatron-LM's rule), and **Megatron-LM's even split**
//! of the chain into the `p·v` chunks ([`equal_chunk_bounds`]: the units between the first
//! and the last divided equally, `p·v` dividing their number; the first unit with chunk 0,
//! the last with chunk `p·v − 1`), chunk `c` on stage `c mod p`. So each configuration has
//! exactly one layout: the space is what Megatron-LM runs with
//! `--num-layers-per-virtual-pipeline-stage`, not every split into `p·v` chunks.
//!
//! **Values.** Time per sample: the scorer's `max_k (m·T_k + sync_k)/B`
//! ([`crate::score::parallel::interleaved`]). Iteration: the simulated iteration of the
//! layout ([`IterationClock`], as `--free --objective iteration`), which is the scorer's
//! `(m + (p − 1)/v)·max T_k + max sync` when the chunks are equal and the exact makespan
//! of Megatron-LM's order otherwise.
//!
//! **Bounds.** `Σ_k T_k ≥ C`, the chain's compute time per micro-batch at `t` (forward,
//! backward, and with recomputation the forward again), so `max_k T_k ≥ C/p` and
//!
//! ```text
//! time per sample ≥ m·C/(p·B),     iteration ≥ m·C/p
//! ```
//!
//! for the configuration's one layout (and every replica lane runs its `m·T_k` of tasks
//! one after the other, with the stage's sync after the last: `iteration ≥ max_k (m·T_k +
//! sync_k) = B ×` time per sample, the refined bound checked before simulating; with the
//! sync overlapped, `max_k (m·T_k + max(0, sync_k − b_k))`, `b_k` the backward of the
//! lane's last task, its first chunk's: the sync starts no earlier than that task's start).
//! Configurations are visited in increasing bound order; once the next bound reaches the
//! best value, every remaining one is proven no better and the plan is optimal. A run
//! stopped by the budget reports `min(best, next bound)` as its bound; past the time limit
//! without a plan it goes on without a deadline to the first plan, as the uniform search.
//!
//! **ZeRO.** As the uniform search: ZeRO 0, 1 and 2 take the same time (so the same
//! simulated iteration), so the least-memory allowed one of them and ZeRO-3 are searched,
//! and the plan's stage is then lowered to the smallest allowed that fits.
//!
//! Complexity: `K` configurations, each scored in `O(U + p·(w + p·v))` (the replayed
//! peak stash, `w ≤ 2p + p·v` warm-up steps), plus under the iteration objective one
//! simulation (`O(N log N)`, `N = 2·p·v·B/b` tasks) per configuration whose refined bound
//! is below the best value.

use super::{
    recompute_choices, zero_stages, Config, IterationClock, Objective, ParallelOutcome,
    ParallelPlan, Space, Valuation,
};
use crate::model::parallel::{equal_chunk_bounds, ChainCosts, Layout, Topology, Zero};
use crate::score::parallel::score_layout;
use crate::solve::budget::Budget;
use crate::solve::{LayoutFamily, Status, StopReason};

/// One configuration with its bound and its layout's chunk bounds.
struct Candidate {
    bound: f64,
    chain: usize,
    cfg: Config,
    bounds: Vec<usize>,
}

/// Every configuration of the space with its one layout (module documentation), in
/// increasing bound order.
fn candidates(
    chains: &[ChainCosts],
    topo: &Topology,
    space: &Space,
    objective: Objective,
) -> Vec<Candidate> {
    let v = space.schedule.chunks();
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
                let m = space.global_batch / (d * b);
                for z in zero_stages(space, d) {
                    for r in recompute_choices(space) {
                        let c = fw + bw + if r { fw } else { 0.0 };
                        for p in 2..=devices / (t * d) {
                            if space.stages.is_some_and(|x| x != p) || !m.is_multiple_of(p) {
                                continue;
                            }
                            let Some(bounds) = equal_chunk_bounds(chain.len(), p, v) else {
                                continue;
                            };
                            let per_stage = m as f64 * c / p as f64;
                            let bound = match objective {
                                Objective::Iteration => per_stage,
                                Objective::TimePerSample => per_stage / space.global_batch as f64,
                            };
                            let cfg = Config {
                                micro_batch: b,
                                tensor_parallel: t,
                                data_parallel: d,
                                zero: z,
                                recompute: r,
                                stages: p,
                            };
                            out.push(Candidate {
                                bound,
                                chain: ci,
                                cfg,
                                bounds,
                            });
                        }
                    }
                }
            }
        }
    }
    out.sort_by(|a, b| a.bound.total_cmp(&b.bound));
    out
}

/// How a layout is valued: the scorer's time per sample, or the clock's iteration.
struct Valuer<'a> {
    topo: &'a Topology,
    objective: Objective,
    clock: Option<&'a dyn IterationClock>,
}

impl Valuer<'_> {
    /// The value of `layout` when it fits and its refined bound is below `incumbent`;
    /// `None` otherwise.
    fn value(
        &self,
        chain: &ChainCosts,
        layout: &Layout,
        incumbent: f64,
    ) -> Result<Option<f64>, String> {
        let score = score_layout(chain, self.topo, layout).map_err(|e| e.to_string())?;
        if !score.fits {
            return Ok(None);
        }
        let per_sample = score.time_per_sample_ms;
        match self.objective {
            Objective::TimePerSample => Ok((per_sample < incumbent).then_some(per_sample)),
            Objective::Iteration => {
                // Each replica lane runs `m·T_k` one task at a time and ends with its first
                // chunk's backward; the sync follows it (overlapped: starts with it).
                let busy = score
                    .stages
                    .iter()
                    .map(|s| {
                        s.micro_batches as f64 * s.micro_batch_ms
                            + s.exposed_sync_ms(layout.overlap_grad_reduce)
                    })
                    .fold(0.0, f64::max);
                if busy >= incumbent {
                    return Ok(None);
                }
                let clock = self.clock.ok_or(
                    "internal error: the interleaved iteration is the simulator's; plan with simulate::parallel::plan",
                )?;
                clock.iteration_ms(chain, self.topo, layout).map(Some)
            }
        }
    }
}

/// The best interleaved layout of `space` (module documentation); `clock` times
/// iterations (needed under [`Objective::Iteration`]).
pub fn plan_interleaved(
    chains: &[ChainCosts],
    topo: &Topology,
    space: &Space,
    objective: Objective,
    budget: &Budget,
    clock: Option<&dyn IterationClock>,
) -> Result<ParallelOutcome, String> {
    let cands = candidates(chains, topo, space, objective);
    let valuer = Valuer {
        topo,
        objective,
        clock,
    };
    let v = space.schedule.chunks();
    let layout_of = |c: &Candidate, z: Zero| {
        let cfg = Config { zero: z, ..c.cfg };
        Layout::interleaved(&c.bounds, &cfg, space.global_batch, v)
            .overlapped(space.overlap_grad_reduce)
    };
    let unlimited = Budget::without_deadline();
    let mut active = budget;
    let (mut best, mut incumbent): (Option<(usize, f64)>, f64) = (None, f64::INFINITY);
    let (mut stop, mut bound, mut solved) = (None, None, 0);
    for (i, c) in cands.iter().enumerate() {
        if c.bound >= incumbent {
            break;
        }
        if let Err(e) = active.check() {
            if best.is_some() {
                stop = Some(StopReason::from(e));
                bound = Some(c.bound.min(incumbent));
                break;
            }
            stop = Some(StopReason::from(e));
            active = &unlimited;
        }
        let chain = &chains[c.chain];
        if let Some(value) = valuer.value(chain, &layout_of(c, c.cfg.zero), incumbent)? {
            if value < incumbent {
                (best, incumbent) = (Some((i, value)), value);
            }
        }
        solved += 1;
    }
    let proven = bound.is_none();
    let valuation = match objective {
        Objective::Iteration => Valuation::Simulation,
        Objective::TimePerSample => Valuation::Model,
    };
    let outcome = |plan, value: f64, bound: f64, status| ParallelOutcome {
        plan,
        value,
        bound,
        status,
        configs_solved: solved,
        configs: cands.len(),
        elapsed_s: budget.elapsed_s(),
        free: false,
        valuation,
    };
    let Some((i, value)) = best else {
        let status = match stop {
            Some(reason) => Status::NoPlan { reason },
            None => Status::infeasible(LayoutFamily::Interleaved),
        };
        return Ok(outcome(None, f64::INFINITY, f64::INFINITY, status));
    };
    let c = &cands[i];
    let plan = lowered(&chains[c.chain], &valuer, space, (c, value), &layout_of)?;
    let status = match (proven, stop) {
        (false, Some(reason)) => Status::Feasible { reason },
        _ => Status::Optimal,
    };
    let bound = if proven {
        value
    } else {
        bound.unwrap_or(value)
    };
    Ok(outcome(Some(plan), value, bound, status))
}

/// The plan of candidate `c` (valued `value`), its ZeRO stage lowered to the smallest
/// allowed one that fits with the same value (ZeRO 0–2 take the same time); the value
/// checked again on the plan returned.
fn lowered(
    chain: &ChainCosts,
    valuer: &Valuer,
    space: &Space,
    (c, value): (&Candidate, f64),
    layout_of: &dyn Fn(&Candidate, Zero) -> Layout,
) -> Result<ParallelPlan, String> {
    let mut zero = c.cfg.zero;
    if space.zero.len() > 1 && zero != Zero::Parameters {
        for z in space.zero.iter().copied().filter(|z| *z < c.cfg.zero) {
            let s =
                score_layout(chain, valuer.topo, &layout_of(c, z)).map_err(|e| e.to_string())?;
            if s.fits {
                zero = z;
                break;
            }
        }
    }
    let layout = layout_of(c, zero);
    let score = score_layout(chain, valuer.topo, &layout).map_err(|e| e.to_string())?;
    let again = valuer.value(chain, &layout, f64::INFINITY)?;
    if !again.is_some_and(|x| (x - value).abs() <= 1e-9 * value.abs().max(1e-300)) {
        return Err(format!(
            "internal error: the interleaved search valued its plan at {value} ms, the check at {again:?} ms"
        ));
    }
    Ok(ParallelPlan {
        layout,
        score,
        chain: chain.clone(),
        accelerators: None,
    })
}

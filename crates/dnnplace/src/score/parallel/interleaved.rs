//! Scoring interleaved layouts (`--schedule interleaved:v`, Megatron-LM's virtual
//! pipeline; `docs/parallel.md`, "The interleaved schedule").
//!
//! The layout's `stages` are the `P = p·v` chunks in chain order; chunk `c` runs on the
//! `t·d` devices of stage `k = c mod p` (every stage with one `t` and `d`, `p ≥ 2`, and
//! `m = B/(d·b)` a multiple of `p`, Megatron-LM's rules). Each chunk is priced by the
//! parent module's rules as if it were a stage of a `P`-stage chain — compute, TP
//! all-reduces, ZeRO-3's two weight all-gathers of its own weights, and the transfers it
//! receives from chunks `c − 1` and `c + 1` (`P − 1` chunk boundaries per micro-batch, each
//! on the link between the two stages' devices). Stage `k` then holds:
//!
//! ```text
//! T_k     = Σ_{c ≡ k (mod p)} T_c                                      (per micro-batch)
//! sync_k  = all-reduce(Σ_c G_c, d)  |  reduce-scatter(Σ_c G_c, d) (ZeRO-3)   (one per stage)
//! W, G, O = Σ_c of the chunks' (sharded) weights, gradients, optimizer state
//! stash_k = max over the prefixes of stage k's order of Σ_c a_c·(forwards − backwards of
//!           chunk c so far)   (+ recomputing: the largest unit stash of its chunks)
//! ```
//!
//! with `a_c` the chunk's stash per micro-batch ([`super::stash_per_micro_batch`]) and the
//! order Megatron-LM's interleaved 1F1B on one replica (`crate::model::schedule`:
//! warm-up `min(2(p − k − 1) + (v − 1)·p, m·v)` forward steps, all `m·v` when `m = p`),
//! replayed by [`peak_stash_bytes`] — with equal `a_c = a` that is
//! `a · min(2(p − k − 1) + (v − 1)·p + 1, m·v)` ([`in_flight`], the count reported). With
//! one `d` replica `r` of one stage talks only to replica `r` of the next: `d` independent
//! pipelines of `m` micro-batches each.
//!
//! **Time.** Time per sample `max_k (m·T_k + sync_k)/B`, as for every layout. Iteration
//! (the scorer's formula, Narayanan et al., SC'21: a bubble of `(p − 1)/v` stage-times):
//!
//! ```text
//! iteration = (m + (p − 1)/v) · max_k T_k + max_k sync_k
//! ```
//!
//! It is the simulated iteration exactly when every chunk has the same forward time and
//! the same backward time and every stage the same sync (tested in
//! `tests/parallel_interleaved.rs`); otherwise the planner values plans by the simulator
//! ([`crate::solve::parallel::interleaved`]).

use super::{
    assemble, boundary_link, check_layout, score_stage, stash_per_micro_batch, LayoutError,
    LayoutScore, StageScore,
};
use crate::model::parallel::{all_gather_ms, all_reduce_ms, ChainCosts, Layout, Topology, Zero};
use crate::model::schedule::{in_flight, peak_stash_bytes};

/// Scores an interleaved `layout` (module documentation); an error naming the broken rule.
pub fn score_interleaved(
    chain: &ChainCosts,
    topo: &Topology,
    layout: &Layout,
) -> Result<LayoutScore, LayoutError> {
    check_interleaved(chain, topo, layout)?;
    let n = layout.stages.len();
    let chunks: Vec<StageScore> = (0..n)
        .map(|c| {
            let st = &layout.stages[c];
            let input = (c > 0).then(|| boundary_link(topo, &layout.stages[c - 1], st));
            let output = (c + 1 < n).then(|| boundary_link(topo, st, &layout.stages[c + 1]));
            score_stage(chain, topo, layout, (c, st), (input, output))
        })
        .collect();
    let stages = (0..layout.pipeline_stages())
        .map(|k| stage_of_chunks(chain, topo, layout, k, &chunks))
        .collect();
    let peak = chain.peak_flops * layout.devices_used() as f64;
    Ok(assemble(layout, stages, chain, peak))
}

/// The interleaved rules on top of [`check_layout`]'s (module documentation).
fn check_interleaved(
    chain: &ChainCosts,
    topo: &Topology,
    layout: &Layout,
) -> Result<(), LayoutError> {
    let v = layout.schedule.chunks();
    let entries = layout.stages.len();
    if entries == 0 {
        return Err(LayoutError::Empty);
    }
    if !entries.is_multiple_of(v) || entries / v < 2 {
        return Err(LayoutError::Chunks { entries, chunks: v });
    }
    check_layout(chain, topo, layout)?;
    let p = layout.pipeline_stages();
    let first = &layout.stages[0];
    for (c, st) in layout.stages.iter().enumerate() {
        let home = &layout.stages[c % p];
        if st.first_device != home.first_device
            || (st.tensor_parallel, st.data_parallel)
                != (first.tensor_parallel, first.data_parallel)
        {
            return Err(LayoutError::ChunkDevices {
                chunk: c,
                stage: c % p,
            });
        }
    }
    let m = layout
        .micro_batches(first.data_parallel)
        .expect("checked by check_layout");
    if !m.is_multiple_of(p) {
        return Err(LayoutError::InterleavedMicroBatches {
            micro_batches: m,
            stages: p,
        });
    }
    Ok(())
}

/// Stage `k`'s figures from its chunks' (module documentation).
fn stage_of_chunks(
    chain: &ChainCosts,
    topo: &Topology,
    layout: &Layout,
    k: usize,
    chunks: &[StageScore],
) -> StageScore {
    let p = layout.pipeline_stages();
    let st = &layout.stages[k];
    let (t, d) = (st.tensor_parallel, st.data_parallel);
    let ti = chain.tp_index(t).expect("checked");
    let mut out = StageScore::default();
    let (mut raw_grads, mut stashes, mut working) = (0.0, Vec::new(), 0.0f64);
    for c in (k..layout.stages.len()).step_by(p) {
        let x = &chunks[c];
        out.compute_ms += x.compute_ms;
        out.tensor_parallel_ms += x.tensor_parallel_ms;
        out.transfer_ms += x.transfer_ms;
        out.gather_ms += x.gather_ms;
        out.micro_batch_ms += x.micro_batch_ms;
        out.weight_bytes += x.weight_bytes;
        out.gradient_bytes += x.gradient_bytes;
        out.optimizer_bytes += x.optimizer_bytes;
        raw_grads += layout.stages[c]
            .units
            .clone()
            .map(|u| chain.units[u].costs[ti].gradient_bytes)
            .sum::<f64>();
        let (stash, work) = stash_per_micro_batch(chain, layout, c);
        stashes.push(stash);
        working = working.max(work);
    }
    // Megatron-LM's interleaved order ends each replica with the backward of its first chunk.
    out.backward_ms = chunks[k].backward_ms;
    let dp_link = topo.link_among((0..d).map(|r| st.device(r, 0)));
    out.dp_sync_ms = if layout.zero == Zero::Parameters {
        all_gather_ms(dp_link, raw_grads, d)
    } else {
        all_reduce_ms(dp_link, raw_grads, d)
    };
    let m = layout.micro_batches(d).expect("checked");
    out.micro_batches = m;
    out.in_flight = in_flight(layout.schedule, p, m, k);
    let peak = peak_stash_bytes(layout.schedule, p, m, k, &stashes).expect("m is a multiple of p");
    out.activation_bytes = peak + working;
    out.memory_bytes =
        out.weight_bytes + out.gradient_bytes + out.optimizer_bytes + out.activation_bytes;
    out.fits = out.memory_bytes <= topo.memory_bytes;
    out.time_per_sample_ms =
        (m as f64 * out.micro_batch_ms + out.dp_sync_ms) / layout.global_batch as f64;
    out
}

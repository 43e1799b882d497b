//! The independent evaluator of parallel layouts ([`crate::model::parallel`]): every
//! stage's time per micro-batch, DP sync, memory per device, and the layout's iteration time,
//! time per sample, TFLOP/s per device and MFU, summed unit by unit from the chain's costs.
//!
//! For stage `s` with units `U_s`, TP `t`, DP `d`, on a [`Topology`]:
//!
//! ```text
//! compute_s  = Σ_{u ∈ U_s} (forward_u(t) + backward_u(t))
//! tp_s       = Σ_u ar_fw_u · all-reduce(x_u, t) + ar_bw_u · all-reduce(x'_u, t)   on the peer link
//! transfer_s = Σ_{forward producers before s} transfer(x) over the link from s − 1
//!            + Σ_{gradient producers after s} transfer(x) over the link from s + 1
//!            (+ the sender's host-link transfer of what it sends, on machines without a
//!              peer link: MODEL.md's push-once)
//! gather_s   = 2 · all-gather(W_s, d)      (ZeRO-3: weights gathered forward and backward)
//! T_s        = compute_s + tp_s + transfer_s + gather_s                   (per micro-batch)
//! sync_s     = all-reduce(G_s, d)  (ZeRO 0–2: reduce-scatter + all-gather, the same volume)
//!            | reduce-scatter(G_s, d)  (ZeRO-3)
//! ```
//!
//! on the link the stage's replicas span. `W_s`, `G_s`, `O_s`: the weights, gradients and
//! optimizer state of one device before ZeRO; ZeRO-1 divides `O_s` by `d`, ZeRO-2 also
//! `G_s`, ZeRO-3 also `W_s`. With full recomputation (`layout.recompute`) compute and TP
//! add the forward pass and its all-reduces again, and the stash per micro-batch is the
//! units' inputs (`checkpoint_bytes`) plus, once, the largest unit's full stash (the unit
//! being recomputed). Memory per device = `W + G + O + in_flight_s · A_s` with `A_s`
//! the stash per micro-batch and `in_flight_s` the micro-batches one replica holds under
//! the schedule ([`replica_in_flight`], the simulator's schedule: GPipe `m_s`; 1F1B
//! `min(m_s, ⌈Σ_{j≥s} d_j / d_s⌉)`, which is `min(m, p − s)` when every `d_s` is equal).
//! With `m_s = B / (d_s·b)` micro-batches per replica:
//!
//! ```text
//! time per sample = max_s (m_s · T_s + sync_s) / B                 (the bottleneck stage)
//! iteration       = Σ_s T_s + (m − 1) · max_s T_s + max_s sync_s   (every d_s equal: m_s = m)
//! ```
//!
//! The iteration formula is the makespan of GPipe and 1F1B when every stage takes the same
//! time (`(m + p − 1)·T`) and the pipeline's fill, steady state and drain otherwise; the DP
//! sync starts after the flush (not overlapped).
//!
//! **Overlapped DP sync** (`layout.overlap_grad_reduce`, `--overlap-grad-reduce`, Megatron-LM's
//! flag of that name, DeepSpeed's `overlap_comm`, PyTorch DDP's buckets): the gradients of
//! the last micro-batch are reduced while its backward runs, so stage `s`'s sync starts
//! when its last backward starts and ends at `max(end of that backward, its start +
//! sync_s)`: it adds `max(0, sync_s − b_s)` after that backward, with `b_s` the stage's
//! backward pass ([`pass_times`]). The iteration's sync term becomes
//! `max_s max(0, sync_s − b_s)`; with every stage equal the last backward of stage 0 ends
//! the pipeline and stage `s`'s `s·b` earlier, so the simulated iteration is
//! `(m + p − 1)·T + max(0, sync − b)`, the formula. The model is optimistic about
//! bucketing: Megatron-LM reduces its gradients in buckets, each launched once all its
//! gradients are ready, so the bucket holding the stage's first layers starts only at the
//! backward's end; this model lets the whole sync start at the backward's start (the
//! exposed time is between `max(0, sync_s − b_s)` and one bucket's reduction later). The
//! time per sample keeps `sync_s` whole (the stage's network is busy for it every
//! iteration). With `t = d = 1`, `b = B = 1` the time
//! per sample is MODEL.md's maximum load on a machine with a peer link: the receiving
//! stage pays each producer's transfer once, the sender nothing.
//!
//! Interleaved layouts (`stages` = the `p·v` chunks, [`crate::model::parallel`]) are scored
//! by [`interleaved`]: each chunk by these rules, each stage as the sum of its chunks.
//!
//! On several accelerator types ([`score_mixed`]) each stage is scored by these rules on its
//! own type's group, costs and memory; between stages on different types a transfer runs on
//! the receiving machine's network link.

pub mod interleaved;

use crate::model::parallel::{
    all_gather_ms, all_reduce_ms, transfer_ms, ChainCosts, Layout, MixedTopology, StageLayout,
    Topology, Zero,
};
use crate::model::schedule::{replica_in_flight, Schedule};
use crate::model::Link;

/// Why a layout cannot be scored.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LayoutError {
    #[error("stage {stage}: units {start}..{end} do not continue the previous stage or leave the chain of {units} units")]
    Units {
        stage: usize,
        start: usize,
        end: usize,
        units: usize,
    },
    #[error("stage {stage}: tensor-parallel degree {t} has no costs (available: {available:?})")]
    TensorParallel {
        stage: usize,
        t: usize,
        available: Vec<usize>,
    },
    #[error("stage {stage}: tensor-parallel degree {t} does not divide the {per_machine} accelerators of a machine (a TP group never spans machines)")]
    SpansMachines {
        stage: usize,
        t: usize,
        per_machine: usize,
    },
    #[error("stage {stage}: data-parallel degree must be at least 1")]
    DataParallel { stage: usize },
    #[error("stage {stage}: devices {start}..{end} overlap the previous stage, are not aligned to t = {t}, or leave the {devices} accelerators")]
    Devices {
        stage: usize,
        start: usize,
        end: usize,
        t: usize,
        devices: usize,
    },
    #[error("stage {stage}: the global batch {global} is not a multiple of d·b = {per}")]
    Batch {
        stage: usize,
        global: usize,
        per: usize,
    },
    #[error("the layout uses micro-batch {layout} but the costs are for micro-batch {costs}")]
    MicroBatch { layout: usize, costs: usize },
    #[error("{0} is not a schedule of these layouts (several accelerator types: gpipe or 1f1b)")]
    Schedule(String),
    #[error("interleaved:{chunks}: {entries} chunks are not a whole number of stages of {chunks} chunks, or fewer than 2 stages (Megatron-LM interleaves a pipeline of at least 2 stages)")]
    Chunks { entries: usize, chunks: usize },
    #[error("chunk {chunk}: an interleaved layout runs chunk c on the devices, t and d of stage c mod p (stage {stage}), and every stage with one t and d")]
    ChunkDevices { chunk: usize, stage: usize },
    #[error("interleaved: {micro_batches} micro-batches per replica are not a multiple of the {stages} pipeline stages (Megatron-LM's rule; --global-batch or --micro-batch)")]
    InterleavedMicroBatches { micro_batches: usize, stages: usize },
    #[error("a layout needs at least one stage")]
    Empty,
    #[error(
        "stage {stage}: devices {start}..{end} do not lie inside one accelerator type's machines"
    )]
    Group {
        stage: usize,
        start: usize,
        end: usize,
    },
    #[error("{chains} chains of costs for {groups} accelerator types")]
    Chains { chains: usize, groups: usize },
}

/// One stage's figures (module documentation).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct StageScore {
    pub compute_ms: f64,
    pub tensor_parallel_ms: f64,
    pub transfer_ms: f64,
    /// ZeRO-3's weight all-gathers per micro-batch.
    pub gather_ms: f64,
    /// `T_s`: the sum of the four above.
    pub micro_batch_ms: f64,
    /// DP sync per iteration.
    pub dp_sync_ms: f64,
    /// `b_s`: the backward pass of the stage's last task, which the DP sync may overlap
    /// ([`pass_times`]'s backward; interleaved: that of the stage's first chunk, the last
    /// backward of Megatron-LM's order).
    pub backward_ms: f64,
    /// `m_s`.
    pub micro_batches: usize,
    /// Micro-batches whose stash the stage holds at once.
    pub in_flight: usize,
    pub weight_bytes: f64,
    pub gradient_bytes: f64,
    pub optimizer_bytes: f64,
    /// `in_flight · A_s` (recomputing: `in_flight ·` the checkpoints `+` the largest unit
    /// stash).
    pub activation_bytes: f64,
    /// Per device: the four above summed.
    pub memory_bytes: f64,
    pub fits: bool,
    /// `(m_s · T_s + sync_s) / B`.
    pub time_per_sample_ms: f64,
}

impl StageScore {
    /// The DP sync left after the stage's last backward ends: `sync_s`, or with the sync
    /// overlapped with that backward (`--overlap-grad-reduce`) `max(0, sync_s − b_s)`.
    pub fn exposed_sync_ms(&self, overlap_grad_reduce: bool) -> f64 {
        if overlap_grad_reduce {
            (self.dp_sync_ms - self.backward_ms).max(0.0)
        } else {
            self.dp_sync_ms
        }
    }
}

/// A layout's figures (module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct LayoutScore {
    pub stages: Vec<StageScore>,
    pub time_per_sample_ms: f64,
    /// When every stage has the same DP degree.
    pub iteration_ms: Option<f64>,
    pub devices_used: usize,
    /// Model FLOPs per second per device used, TFLOP/s.
    pub tflops_per_device: f64,
    /// `tflops_per_device` over the device's peak.
    pub mfu: f64,
    /// Every stage fits its memory.
    pub fits: bool,
}

/// Scores `layout` (module documentation); an error when it is not a layout of `chain` on
/// `topo`.
pub fn score_layout(
    chain: &ChainCosts,
    topo: &Topology,
    layout: &Layout,
) -> Result<LayoutScore, LayoutError> {
    if let Schedule::Interleaved { .. } = layout.schedule {
        return interleaved::score_interleaved(chain, topo, layout);
    }
    check_layout(chain, topo, layout)?;
    let p = layout.stages.len();
    let mut stages = Vec::with_capacity(p);
    for s in 0..p {
        let st = &layout.stages[s];
        let input = (s > 0).then(|| boundary_link(topo, &layout.stages[s - 1], st));
        let output = (s + 1 < p).then(|| boundary_link(topo, st, &layout.stages[s + 1]));
        stages.push(score_stage(chain, topo, layout, (s, st), (input, output)));
    }
    let peak = chain.peak_flops * layout.devices_used() as f64;
    Ok(assemble(layout, stages, chain, peak))
}

/// The layout's figures from its stages' scores: time per sample and iteration
/// ([`pipeline_times`]), and the model FLOPs per second (`chain`'s per sample over the
/// seconds per sample) per device used and over `peak`, the summed peak FLOP/s of the
/// devices the stages use.
pub(crate) fn assemble(
    layout: &Layout,
    stages: Vec<StageScore>,
    chain: &ChainCosts,
    peak: f64,
) -> LayoutScore {
    let (time_per_sample_ms, iteration_ms) = pipeline_times(layout, &stages);
    let devices_used = layout.devices_used();
    let per_sample_flops = chain.model_flops / chain.micro_batch as f64;
    let seconds_per_sample =
        1e-3 * iteration_ms.map_or(time_per_sample_ms, |i| i / layout.global_batch as f64);
    let rate = per_sample_flops / seconds_per_sample;
    LayoutScore {
        fits: stages.iter().all(|s| s.fits),
        stages,
        time_per_sample_ms,
        iteration_ms,
        devices_used,
        tflops_per_device: rate / devices_used as f64 / 1e12,
        mfu: rate / peak,
    }
}

/// The layout's time per sample, `max_s T_s per sample`, and, when every stage has one `d`
/// (so one `m`), its iteration `Σ T_s + (m − 1)·max T_s + max sync` (docs/parallel.md);
/// interleaved with `v` chunks, `(m + (p − 1)/v)·max T_s + max sync`
/// ([`interleaved`]). With the sync overlapped, `max sync` is `max_s max(0, sync_s − b_s)`
/// ([`StageScore::exposed_sync_ms`]).
fn pipeline_times(layout: &Layout, stages: &[StageScore]) -> (f64, Option<f64>) {
    let time_per_sample_ms = stages
        .iter()
        .map(|s| s.time_per_sample_ms)
        .fold(0.0, f64::max);
    let d0 = layout.stages[0].data_parallel;
    let iteration_ms = layout
        .stages
        .iter()
        .all(|s| s.data_parallel == d0)
        .then(|| {
            let m = stages[0].micro_batches as f64;
            let sum: f64 = stages.iter().map(|s| s.micro_batch_ms).sum();
            let max = stages.iter().map(|s| s.micro_batch_ms).fold(0.0, f64::max);
            let sync = stages
                .iter()
                .map(|s| s.exposed_sync_ms(layout.overlap_grad_reduce))
                .fold(0.0, f64::max);
            match layout.schedule {
                Schedule::Interleaved { chunks } => {
                    let p = stages.len() as f64;
                    (m + (p - 1.0) / chunks as f64) * max + sync
                }
                _ => sum + (m - 1.0) * max + sync,
            }
        });
    (time_per_sample_ms, iteration_ms)
}

/// Scores `layout` on a cluster of several accelerator types ([`MixedTopology`]; its devices
/// numbered group by group): `chains[g]` prices the stages on group `g`'s type. Each stage
/// lies inside one group and is scored there by the rules above with its own type's costs,
/// links and memory; two neighbouring stages on one group exchange over
/// [`boundary_link`] of that group, on different groups over the receiving stage's network
/// link. MFU divides by the peak of the devices each stage uses. The stages on one group
/// must not overlap and must be aligned to their `t`; any order of types is scored.
pub fn score_mixed(
    chains: &[ChainCosts],
    topo: &MixedTopology,
    layout: &Layout,
) -> Result<LayoutScore, LayoutError> {
    let local = check_mixed(chains, topo, layout)?;
    let p = layout.stages.len();
    let mut stages = Vec::with_capacity(p);
    let mut peak = 0.0;
    for s in 0..p {
        let (g, st) = (local[s].0, &local[s].1);
        let gt = &topo.groups[g];
        let link = |a: usize, b: usize, receiver: usize| {
            if local[a].0 == local[b].0 {
                boundary_link(gt, &local[a].1, &local[b].1)
            } else {
                topo.groups[local[receiver].0].network
            }
        };
        let input = (s > 0).then(|| link(s - 1, s, s));
        let output = (s + 1 < p).then(|| link(s, s + 1, s));
        stages.push(score_stage(
            &chains[g],
            gt,
            layout,
            (s, st),
            (input, output),
        ));
        peak += chains[g].peak_flops * st.width() as f64;
    }
    Ok(assemble(layout, stages, &chains[local[0].0], peak))
}

/// [`score_mixed`]'s rules: each stage's group and its devices numbered inside the group.
fn check_mixed(
    chains: &[ChainCosts],
    topo: &MixedTopology,
    layout: &Layout,
) -> Result<Vec<(usize, StageLayout)>, LayoutError> {
    if chains.len() != topo.groups.len() {
        return Err(LayoutError::Chains {
            chains: chains.len(),
            groups: topo.groups.len(),
        });
    }
    if layout.stages.is_empty() {
        return Err(LayoutError::Empty);
    }
    if !matches!(layout.schedule, Schedule::GPipe | Schedule::OneFOneB) {
        return Err(LayoutError::Schedule(layout.schedule.to_string()));
    }
    if let Some(c) = chains.iter().find(|c| c.micro_batch != layout.micro_batch) {
        return Err(LayoutError::MicroBatch {
            layout: layout.micro_batch,
            costs: c.micro_batch,
        });
    }
    let mut local = Vec::with_capacity(layout.stages.len());
    let mut next_device = vec![0usize; topo.groups.len()];
    let mut next_unit = 0;
    for (i, s) in layout.stages.iter().enumerate() {
        let end = s.first_device + s.width();
        let g = topo.group_of(s.first_device);
        let Some(g) = g.filter(|&g| s.width() > 0 && topo.group_of(end - 1) == Some(g)) else {
            return Err(LayoutError::Group {
                stage: i,
                start: s.first_device,
                end,
            });
        };
        let mut st = s.clone();
        st.first_device -= topo.offset(g);
        if st.first_device < next_device[g] {
            return Err(LayoutError::Devices {
                stage: i,
                start: s.first_device,
                end,
                t: s.tensor_parallel,
                devices: topo.devices(),
            });
        }
        if s.units.start != next_unit
            || s.units.end <= s.units.start
            || s.units.end > chains[g].len()
            || (i + 1 == layout.stages.len() && s.units.end != chains[g].len())
        {
            return Err(LayoutError::Units {
                stage: i,
                start: s.units.start,
                end: s.units.end,
                units: chains[g].len(),
            });
        }
        check_stage(
            &chains[g],
            &topo.groups[g],
            layout,
            (i, &st),
            next_device[g],
        )?;
        next_device[g] = st.first_device + st.width();
        next_unit = s.units.end;
        local.push((g, st));
    }
    Ok(local)
}

/// The layout's rules, each failure named ([`LayoutError`]).
pub(crate) fn check_layout(
    chain: &ChainCosts,
    topo: &Topology,
    layout: &Layout,
) -> Result<(), LayoutError> {
    if layout.stages.is_empty() {
        return Err(LayoutError::Empty);
    }
    if layout.micro_batch != chain.micro_batch {
        return Err(LayoutError::MicroBatch {
            layout: layout.micro_batch,
            costs: chain.micro_batch,
        });
    }
    let (mut next_unit, mut next_device) = (0, 0);
    for (i, s) in layout.stages.iter().enumerate() {
        let last = i + 1 == layout.stages.len();
        if s.units.start != next_unit
            || s.units.end <= s.units.start
            || s.units.end > chain.len()
            || (last && s.units.end != chain.len())
        {
            return Err(LayoutError::Units {
                stage: i,
                start: s.units.start,
                end: s.units.end,
                units: chain.len(),
            });
        }
        // Interleaved: the chunks past the first p reuse their stage's devices
        // ([`interleaved`] checks them).
        if i < layout.pipeline_stages() {
            check_stage(chain, topo, layout, (i, s), next_device)?;
            next_device = s.first_device + s.width();
        }
        next_unit = s.units.end;
    }
    Ok(())
}

/// Stage `i`'s own rules on `topo` (`st`: its devices numbered there; `next_device`: the
/// first device after the stages before it there).
pub(crate) fn check_stage(
    chain: &ChainCosts,
    topo: &Topology,
    layout: &Layout,
    (i, s): (usize, &StageLayout),
    next_device: usize,
) -> Result<(), LayoutError> {
    let (t, d) = (s.tensor_parallel, s.data_parallel);
    if chain.tp_index(t).is_none() {
        return Err(LayoutError::TensorParallel {
            stage: i,
            t,
            available: chain.tp_degrees.clone(),
        });
    }
    if !topo.per_machine.is_multiple_of(t) {
        return Err(LayoutError::SpansMachines {
            stage: i,
            t,
            per_machine: topo.per_machine,
        });
    }
    if d == 0 {
        return Err(LayoutError::DataParallel { stage: i });
    }
    let end = s.first_device + s.width();
    if s.first_device < next_device || !s.first_device.is_multiple_of(t) || end > topo.devices() {
        return Err(LayoutError::Devices {
            stage: i,
            start: s.first_device,
            end,
            t,
            devices: topo.devices(),
        });
    }
    if layout.micro_batches(d).is_none() {
        return Err(LayoutError::Batch {
            stage: i,
            global: layout.global_batch,
            per: d * layout.micro_batch,
        });
    }
    Ok(())
}

/// The link between two neighbouring stages: the network when any device of `b` pairs with
/// a device of `a` on another machine (device `k` of `b` with device `k mod width(a)` of `a`).
pub(crate) fn boundary_link(topo: &Topology, a: &StageLayout, b: &StageLayout) -> Link {
    let crosses = b
        .devices()
        .enumerate()
        .any(|(k, dev)| topo.machine_of(dev) != topo.machine_of(a.first_device + k % a.width()));
    if crosses {
        topo.network
    } else {
        topo.intra_link()
    }
}

/// Stage `s`'s figures, `st` its devices numbered on `topo`, its transfers from and to its
/// neighbours on the links `input` and `output` (`None`: no neighbour there).
pub(crate) fn score_stage(
    chain: &ChainCosts,
    topo: &Topology,
    layout: &Layout,
    (s, st): (usize, &StageLayout),
    (input, output): (Option<Link>, Option<Link>),
) -> StageScore {
    let (t, d) = (st.tensor_parallel, st.data_parallel);
    let ti = chain.tp_index(t).expect("checked");
    let tp_link = topo.intra_link();
    let mut out = StageScore::default();
    let (mut weights, mut grads, mut optimizer, mut stash) = (0.0, 0.0, 0.0, 0.0);
    let mut working: f64 = 0.0;
    let again = u32::from(layout.recompute);
    for u in st.units.clone() {
        let c = &chain.units[u].costs[ti];
        out.compute_ms += c.forward_ms * f64::from(1 + again) + c.backward_ms;
        out.tensor_parallel_ms += c.tp_collectives_ms(tp_link, t, 1 + again);
        weights += c.weight_bytes;
        grads += c.gradient_bytes;
        optimizer += c.optimizer_bytes;
        if layout.recompute {
            stash += c.checkpoint_bytes;
            working = working.max(c.activation_bytes);
        } else {
            stash += c.activation_bytes;
        }
    }
    out.transfer_ms = stage_transfers(chain, topo, st, (input, output));
    out.backward_ms = stage_pass_times(chain, topo, layout, st, (input, output)).1;
    let dp_link = topo.link_among((0..d).map(|r| st.device(r, 0)));
    if layout.zero == Zero::Parameters {
        out.gather_ms = 2.0 * all_gather_ms(dp_link, weights, d);
        out.dp_sync_ms = all_gather_ms(dp_link, grads, d);
    } else {
        out.dp_sync_ms = all_reduce_ms(dp_link, grads, d);
    }
    out.micro_batch_ms = out.compute_ms + out.tensor_parallel_ms + out.transfer_ms + out.gather_ms;
    let m = layout.micro_batches(d).expect("checked");
    let suffix_replicas: usize = layout.stages[s..].iter().map(|x| x.data_parallel).sum();
    out.micro_batches = m;
    out.in_flight = replica_in_flight(layout.schedule, m, d, suffix_replicas);
    let z = layout.zero;
    let shard = |x: f64, from: Zero| if z >= from { x / d as f64 } else { x };
    out.weight_bytes = shard(weights, Zero::Parameters);
    out.gradient_bytes = shard(grads, Zero::Gradients);
    out.optimizer_bytes = shard(optimizer, Zero::Optimizer);
    out.activation_bytes = out.in_flight as f64 * stash + working;
    out.memory_bytes =
        out.weight_bytes + out.gradient_bytes + out.optimizer_bytes + out.activation_bytes;
    out.fits = out.memory_bytes <= topo.memory_bytes;
    out.time_per_sample_ms =
        (m as f64 * out.micro_batch_ms + out.dp_sync_ms) / layout.global_batch as f64;
    out
}

/// What stage `st` pays to receive from its neighbours (over `input` from the stage before,
/// `output` from the one after), and, on machines without a peer link, to stage what it
/// sends through host memory (module documentation).
fn stage_transfers(
    chain: &ChainCosts,
    topo: &Topology,
    st: &StageLayout,
    (input, output): (Option<Link>, Option<Link>),
) -> f64 {
    let staged = topo.peer.is_none();
    let mut ms = 0.0;
    if let Some(link) = input {
        let cut = &chain.cuts[st.units.start];
        ms += cut
            .forward
            .iter()
            .map(|&x| transfer_ms(link, x))
            .sum::<f64>();
        if staged {
            ms += cut
                .backward
                .iter()
                .map(|&x| transfer_ms(topo.host, x))
                .sum::<f64>();
        }
    }
    if let Some(link) = output {
        let cut = &chain.cuts[st.units.end];
        ms += cut
            .backward
            .iter()
            .map(|&x| transfer_ms(link, x))
            .sum::<f64>();
        if staged {
            ms += cut
                .forward
                .iter()
                .map(|&x| transfer_ms(topo.host, x))
                .sum::<f64>();
        }
    }
    ms
}

/// Stage (or chunk) `s`'s stash per micro-batch and its transient working stash, bytes:
/// the units' activations, or recomputing their checkpoints and, while one unit's backward
/// runs, the largest unit's activations. `layout` must pass [`score_layout`]'s checks.
pub fn stash_per_micro_batch(chain: &ChainCosts, layout: &Layout, s: usize) -> (f64, f64) {
    let st = &layout.stages[s];
    let ti = chain
        .tp_index(st.tensor_parallel)
        .expect("a checked layout");
    let costs = st.units.clone().map(|u| &chain.units[u].costs[ti]);
    if layout.recompute {
        let held = costs.clone().map(|c| c.checkpoint_bytes).sum();
        (held, costs.map(|c| c.activation_bytes).fold(0.0, f64::max))
    } else {
        (costs.map(|c| c.activation_bytes).sum(), 0.0)
    }
}

/// Stage `s`'s time per micro-batch split by pass, `(forward, backward)` ms, for the
/// simulator ([`crate::simulate::parallel`]); the two sum to [`StageScore::micro_batch_ms`]
/// (up to rounding). Forward: the units' forward passes and their TP all-reduces, the
/// activations received from stage `s − 1`, on machines without a peer link the host-link
/// staging of the activations sent to `s + 1`, and (ZeRO-3) one weight all-gather.
/// Backward: the units' backward passes and their all-reduces (with recomputation, the
/// forward pass and its all-reduces again), the gradients received from `s + 1`, the
/// staging of the gradients sent to `s − 1`, and the second all-gather. `layout` must pass
/// [`score_layout`]'s checks.
pub fn pass_times(chain: &ChainCosts, topo: &Topology, layout: &Layout, s: usize) -> (f64, f64) {
    let st = &layout.stages[s];
    let input = (s > 0).then(|| boundary_link(topo, &layout.stages[s - 1], st));
    let output =
        (s + 1 < layout.stages.len()).then(|| boundary_link(topo, st, &layout.stages[s + 1]));
    stage_pass_times(chain, topo, layout, st, (input, output))
}

/// [`pass_times`] on a cluster of several types ([`score_mixed`]'s rules): stage `s` priced
/// on its own group with its type's costs (`chains[g]`), its boundaries to a stage on
/// another group on its own group's network link. `layout` must pass [`score_mixed`]'s
/// checks.
pub fn pass_times_mixed(
    chains: &[ChainCosts],
    topo: &MixedTopology,
    layout: &Layout,
    s: usize,
) -> Result<(f64, f64), LayoutError> {
    let local = check_mixed(chains, topo, layout)?;
    let (g, st) = (local[s].0, &local[s].1);
    let gt = &topo.groups[g];
    let link = |a: usize, b: usize| {
        if local[a].0 == local[b].0 {
            boundary_link(gt, &local[a].1, &local[b].1)
        } else {
            gt.network
        }
    };
    let input = (s > 0).then(|| link(s - 1, s));
    let output = (s + 1 < local.len()).then(|| link(s, s + 1));
    Ok(stage_pass_times(
        &chains[g],
        gt,
        layout,
        st,
        (input, output),
    ))
}

/// The pass times of stage `st` (its devices numbered on `topo`) with its neighbours over
/// `input` and `output` ([`pass_times`]).
fn stage_pass_times(
    chain: &ChainCosts,
    topo: &Topology,
    layout: &Layout,
    st: &StageLayout,
    (input, output): (Option<Link>, Option<Link>),
) -> (f64, f64) {
    let (t, d) = (st.tensor_parallel, st.data_parallel);
    let ti = chain.tp_index(t).expect("a checked layout");
    let tp_link = topo.intra_link();
    let (mut forward, mut backward, mut weights) = (0.0, 0.0, 0.0);
    for u in st.units.clone() {
        let c = &chain.units[u].costs[ti];
        let ar = all_reduce_ms(tp_link, c.tp_all_reduce_bytes, t);
        let ar_back = all_reduce_ms(tp_link, c.tp_backward_all_reduce_bytes, t);
        let fw = c.forward_ms + f64::from(c.tp_forward_all_reduces) * ar;
        forward += fw;
        backward += c.backward_ms + f64::from(c.tp_backward_all_reduces) * ar_back;
        if layout.recompute {
            backward += fw;
        }
        weights += c.weight_bytes;
    }
    let sum = |xs: &[f64], link: Link| xs.iter().map(|&x| transfer_ms(link, x)).sum::<f64>();
    let staged = topo.peer.is_none();
    if let Some(link) = input {
        let cut = &chain.cuts[st.units.start];
        forward += sum(&cut.forward, link);
        if staged {
            backward += sum(&cut.backward, topo.host);
        }
    }
    if let Some(link) = output {
        let cut = &chain.cuts[st.units.end];
        backward += sum(&cut.backward, link);
        if staged {
            forward += sum(&cut.forward, topo.host);
        }
    }
    if layout.zero == Zero::Parameters {
        let gather = all_gather_ms(topo.link_among((0..d).map(|r| st.device(r, 0))), weights, d);
        forward += gather;
        backward += gather;
    }
    (forward, backward)
}

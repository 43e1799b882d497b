//! The memory of every device of a contiguous plan as a pipeline schedule runs it.
//!
//! With `resident(v) = size(v) − A(v)` and stash `A(v)` per micro-batch in flight
//! ([`crate::model::schedule::held_bytes`]), device `d` holds
//!
//! ```text
//! mem(d) = Σ_{v on d} resident(v) + c_d · Σ_{v on d} A(v)
//! ```
//!
//! where `c_d = c(s_d)` is the schedule's count of micro-batches in flight at `d`'s place
//! `s_d` in the pipeline's chain of `P` stages (every device in use is one stage):
//! GPipe `m`, 1F1B `min(m, P − s_d)` ([`crate::model::schedule::Pipeline::in_flight`]).
//! An accelerator that the placement marks as recomputing ([`crate::model::recompute`])
//! holds instead
//!
//! ```text
//! mem_r(d) = Σ_{v on d} resident(v) + Σ_{v on d} A(v) + c_d · In(d)
//! ```
//!
//! with `In(d)` the bytes its forward nodes read from other devices, computed here from the
//! edges node by node ([`crate::model::recompute::stage_inputs`]).
//!
//! **The chain.** A pipeline runs its stages as a chain: any order of the devices that
//! the forward edges allow (a device graph arc `a → b` puts `a` before `b`). The plan does
//! not say which, so the scorer decides whether *some* allowed order fits every
//! accelerator, and reports the figures under the one it finds. Device `d` fits at place
//! `s` iff `c(s) ≤ ĉ_d = max{c : res_d + c·A_d ≤ M}`, and `c(s)` does not increase along
//! the chain, so `d` needs `s ≥ r_d` (a release). Read backwards (`t = P − 1 − s`) that is
//! a deadline `t ≤ P − 1 − r_d` on unit jobs with precedences on one machine, which the
//! earliest-deadline rule with deadlines tightened along the precedences decides exactly
//! (Lawler, 1973: `1 | prec, p_j = 1 | L_max`). When the device graph is a path (each
//! stage feeds the next) the order is forced and these are the simulator's positions, so
//! `simulate`'s peaks equal these figures (tests/schedule_memory.rs).
//!
//! A device without forward nodes is free in the order. Contiguous plans have an acyclic
//! device graph (a cycle would leave a device's set and re-enter it); a non-contiguous
//! plan gets [`PipelineMemoryError::NotContiguous`].
//!
//! Complexity: O((n + m_E) log m_E + D·P) for n nodes, m_E edges and D = P devices.
//!
//! **Interleaved** (`interleaved:v`, [`interleaved_memory`]). The plan's chain is explicit:
//! every node is on an accelerator `d` of the workload's `p = k` (CPU cores hold nothing)
//! in chunk `c` ([`Placement::chunk`]), stage `s = c·p + d`, and the stages must form a
//! chain of ideals ([`crate::score::contiguity::interleaved_stages`]). With `a_c` the
//! stash of device `d`'s chunk `c` (Σ `A(v)` of its nodes),
//!
//! ```text
//! mem(d) = Σ_{v on d} resident(v) + peak_d(a_0, …, a_{v−1})
//! ```
//!
//! `peak_d` being the exact peak of the device's order replayed with those stashes
//! ([`crate::model::schedule::peak_stash_bytes`]). An accelerator that the placement marks
//! as recomputing (all its chunks; [`crate::model::recompute`], "Under interleaved") holds
//! instead
//!
//! ```text
//! mem_r(d) = Σ_{v on d} resident(v) + max_β ( a_{c_β} + Σ_c n^β_c · i_c )
//! ```
//!
//! over its backward steps `β` (`n^β` the chunk inputs held then, `i_c` chunk c's stage
//! input, [`crate::model::recompute::chunk_inputs`]): the exact peak of the replay in which
//! chunk c's input is held from its forward step to its backward step and its stash only
//! during the backward step, at most `max_c a_c + peak_d(i_0, …, i_{v−1})`.
//! O(n + m_E + p·m·v²).

use std::collections::HashMap;

use crate::model::recompute::{
    chunk_inputs, interleaved_recompute_peak, stage_bytes, stage_inputs,
};
use crate::model::schedule::{held_bytes, in_flight, peak_stash_bytes, Pipeline, Schedule};
use crate::model::{Device, Placement, Workload};

/// One device's memory under the schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceMemory {
    pub device: Device,
    /// Held for the whole run (weights, gradients, optimizer state, buffers), bytes.
    pub resident_bytes: f64,
    /// Stashed per micro-batch in flight, bytes.
    pub stash_bytes: f64,
    /// Whether the device recomputes its activations (then it keeps only `input_bytes` per
    /// micro-batch in flight, and `stash_bytes` once).
    pub recomputes: bool,
    /// `In(d)`: the bytes its forward nodes read from other devices.
    pub input_bytes: f64,
    /// Stage on the chain (0 = first).
    pub stage: usize,
    /// Micro-batches in flight at the stage.
    pub in_flight: usize,
    /// `resident + in_flight · stash`, or `resident + stash + in_flight · input` when it
    /// recomputes; interleaved: `resident + peak` over its chunks' stashes, or `mem_r(d)`
    /// of the module doc when it recomputes.
    pub bytes: f64,
    /// Interleaved only: the stash of each chunk per micro-batch, bytes (empty otherwise);
    /// `stash_bytes` is their sum, `stage` the device's index `d` (chunk `c` is stage
    /// `c·p + d`) and `in_flight` the most chunk-stashes it holds at once.
    pub chunk_stash_bytes: Vec<f64>,
    /// Interleaved only: the number of nodes in each chunk (empty otherwise).
    pub chunk_nodes: Vec<usize>,
    /// Interleaved only: each chunk's stage input `i_c`, bytes (empty otherwise);
    /// `input_bytes` is their sum.
    pub chunk_input_bytes: Vec<f64>,
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PipelineMemoryError {
    #[error("the plan's devices form a cycle through {0}: a schedule runs contiguous stages only")]
    NotContiguous(Device),
    #[error("{device} needs {bytes} bytes even as the last stage (fewest micro-batches in flight), more than its {limit}")]
    NeverFits {
        device: Device,
        bytes: f64,
        limit: f64,
    },
    #[error("{0}")]
    Chunks(#[from] crate::score::contiguity::ChunkChainError),
    #[error("{0}")]
    Schedule(#[from] crate::model::schedule::ScheduleError),
    #[error("{device} is marked to recompute its activations; under {schedule} only accelerators hold chunks, and only they recompute")]
    RecomputeInterleaved { device: Device, schedule: Schedule },
    #[error("no order of the plan's {stages} stages fits every accelerator's memory; {device} would need {bytes} bytes at stage {stage}")]
    NoOrderFits {
        stages: usize,
        device: Device,
        stage: usize,
        bytes: f64,
    },
}

/// Every device's memory under `pipeline` in a chain order in which every accelerator
/// fits `M` bytes (module documentation), devices in order; an error when there is none.
/// An accelerator recomputes where the placement says so.
pub fn pipeline_memory(
    w: &Workload,
    p: &Placement,
    pipeline: &Pipeline,
) -> Result<Vec<DeviceMemory>, PipelineMemoryError> {
    if let Schedule::Interleaved { .. } = pipeline.schedule {
        return interleaved_memory(w, p, pipeline);
    }
    chain_memory(w, p, pipeline, false)
}

/// Under `interleaved:v` (module documentation): every accelerator's memory, accelerators
/// holding nodes in order; an error naming the node when a node is on a CPU, past the last
/// chunk, or its stage breaks the chain of ideals, or when the plan marks a CPU core as
/// recomputing. An accelerator the plan marks recomputes all its chunks. It does not
/// compare with the memory limit (the caller does).
pub fn interleaved_memory(
    w: &Workload,
    p: &Placement,
    pipeline: &Pipeline,
) -> Result<Vec<DeviceMemory>, PipelineMemoryError> {
    let schedule = pipeline.schedule;
    let v = schedule.chunks();
    let k = w.devices().accelerators;
    if let Some(&device) = p.recompute.iter().find(|d| !d.is_accelerator()) {
        return Err(PipelineMemoryError::RecomputeInterleaved { device, schedule });
    }
    crate::score::contiguity::interleaved_stages(w, p, k, v)?;
    let mut resident = vec![0.0; k];
    let mut chunk_stash = vec![vec![0.0; v]; k];
    let mut used = vec![false; k];
    let mut chunk_nodes = vec![vec![0usize; v]; k];
    for (node, h) in held_bytes(w).iter().enumerate() {
        let Device::Accelerator(d) = p.assignment[node] else {
            unreachable!("interleaved_stages refuses CPU nodes")
        };
        used[d] = true;
        resident[d] += h.resident_bytes;
        chunk_stash[d][p.chunk(node)] += h.stash_bytes;
        chunk_nodes[d][p.chunk(node)] += 1;
    }
    let inputs = chunk_inputs(w, p);
    let m = pipeline.micro_batches;
    let mut out = Vec::new();
    for d in (0..k).filter(|&d| used[d]) {
        let device = Device::Accelerator(d);
        let input: Vec<f64> = (0..v)
            .map(|c| inputs.get(&(device, c)).copied().unwrap_or(0.0))
            .collect();
        let recomputes = p.recomputes(device);
        let peak = if recomputes {
            interleaved_recompute_peak(schedule, k, m, d, &chunk_stash[d], &input)?
        } else {
            peak_stash_bytes(schedule, k, m, d, &chunk_stash[d])?
        };
        out.push(DeviceMemory {
            device,
            resident_bytes: resident[d],
            stash_bytes: chunk_stash[d].iter().sum(),
            recomputes,
            input_bytes: input.iter().sum(),
            stage: d,
            in_flight: in_flight(schedule, k, pipeline.micro_batches, d),
            bytes: resident[d] + peak,
            chunk_stash_bytes: std::mem::take(&mut chunk_stash[d]),
            chunk_nodes: std::mem::take(&mut chunk_nodes[d]),
            chunk_input_bytes: input,
        });
    }
    Ok(out)
}

/// The placement `p` with the accelerators that recompute chosen as `--recompute auto`
/// does ([`crate::model::recompute`]): each accelerator recomputes exactly when, at its
/// place in a chain order that fits, it does not fit with its stash held. The placement's
/// own recompute marks are ignored. Device `d` fits at place `s` in one of the two ways iff
/// `s ≥ min(r_d, r'_d)` (the first places where it fits holding its stash and recomputing;
/// both tests are monotone in `s`), so the earliest-deadline rule with that release decides
/// exactly whether some order and choice fit; a device then recomputes iff its place is
/// before `r_d`. An error when no order fits even so. Under interleaved every device's
/// place is its own (its chunks' stages), so each accelerator recomputes exactly when it
/// does not fit holding its stashes and fits recomputing; the caller checks the fit.
pub fn recompute_where_needed(
    w: &Workload,
    p: &Placement,
    pipeline: &Pipeline,
) -> Result<Placement, PipelineMemoryError> {
    if let Schedule::Interleaved { .. } = pipeline.schedule {
        let limit = w.devices().memory_per_accelerator_bytes * (1.0 + 1e-9);
        let held = interleaved_memory(w, &p.clone().with_recompute(Vec::new()), pipeline)?;
        let all: Vec<Device> = held.iter().map(|d| d.device).collect();
        let recomputing = interleaved_memory(w, &p.clone().with_recompute(all), pipeline)?;
        let recompute = (held.iter().zip(&recomputing))
            .filter(|(h, r)| h.bytes > limit && r.bytes <= limit)
            .map(|(h, _)| h.device)
            .collect();
        return Ok(p.clone().with_recompute(recompute));
    }
    let memory = chain_memory(w, p, pipeline, true)?;
    let recompute = memory
        .iter()
        .filter(|d| d.recomputes)
        .map(|d| d.device)
        .collect();
    Ok(p.clone().with_recompute(recompute))
}

/// [`pipeline_memory`]; with `choose`, each accelerator's recomputation as
/// [`recompute_where_needed`] chooses it.
fn chain_memory(
    w: &Workload,
    p: &Placement,
    pipeline: &Pipeline,
    choose: bool,
) -> Result<Vec<DeviceMemory>, PipelineMemoryError> {
    let limit = w.devices().memory_per_accelerator_bytes;
    let mut devices: Vec<Device> = p.assignment.clone();
    devices.sort();
    devices.dedup();
    let index: HashMap<Device, usize> = devices.iter().enumerate().map(|(i, &d)| (d, i)).collect();
    let d_of = |v: usize| index[&p.assignment[v]];
    let stages = devices.len();
    let mut resident = vec![0.0; stages];
    let mut stash = vec![0.0; stages];
    for (v, h) in held_bytes(w).iter().enumerate() {
        resident[d_of(v)] += h.resident_bytes;
        stash[d_of(v)] += h.stash_bytes;
    }
    let inputs = stage_inputs(w, p);
    let input: Vec<f64> = devices
        .iter()
        .map(|d| inputs.get(d).copied().unwrap_or(0.0))
        .collect();
    let mut recomputes: Vec<bool> = devices
        .iter()
        .map(|&d| d.is_accelerator() && !choose && p.recomputes(d))
        .collect();
    let bytes = |d: usize, s: usize, r: bool| {
        stage_bytes(
            resident[d],
            stash[d],
            input[d],
            pipeline.in_flight(stages, s),
            r,
        )
    };
    // Releases: the first place where the accelerator fits (counts never rise along the
    // chain), holding its stash (`held`) and recomputing.
    let first_fit = |d: usize, r: bool| (0..stages).find(|&s| bytes(d, s, r) <= limit);
    let mut release = vec![0usize; stages];
    let mut held = vec![0usize; stages];
    for d in (0..stages).filter(|&d| devices[d].is_accelerator()) {
        let (hold, recompute) = if choose {
            (first_fit(d, false), first_fit(d, true))
        } else if recomputes[d] {
            (None, first_fit(d, true))
        } else {
            (first_fit(d, false), None)
        };
        held[d] = hold.unwrap_or(usize::MAX);
        release[d] = hold.into_iter().chain(recompute).min().ok_or_else(|| {
            PipelineMemoryError::NeverFits {
                device: devices[d],
                bytes: if choose {
                    bytes(d, stages - 1, false).min(bytes(d, stages - 1, true))
                } else {
                    bytes(d, stages - 1, recomputes[d])
                },
                limit,
            }
        })?;
    }
    let mut arcs = vec![Vec::new(); stages];
    for e in w.edges() {
        if !w.node(e.from).is_backward && !w.node(e.to).is_backward {
            let (a, b) = (d_of(e.from), d_of(e.to));
            if a != b {
                arcs[a].push(b);
            }
        }
    }
    for list in &mut arcs {
        list.sort_unstable();
        list.dedup();
    }
    let order = topological(&arcs).map_err(|d| PipelineMemoryError::NotContiguous(devices[d]))?;
    let place = latest_first(&arcs, &order, &release).map_err(|(d, s)| {
        PipelineMemoryError::NoOrderFits {
            stages,
            device: devices[d],
            stage: s,
            bytes: bytes(d, s, recomputes[d]),
        }
    })?;
    if choose {
        for d in (0..stages).filter(|&d| devices[d].is_accelerator()) {
            recomputes[d] = place[d] < held[d];
        }
    }
    Ok((0..stages)
        .map(|d| {
            let in_flight = pipeline.in_flight(stages, place[d]);
            DeviceMemory {
                device: devices[d],
                resident_bytes: resident[d],
                stash_bytes: stash[d],
                recomputes: recomputes[d],
                input_bytes: input[d],
                stage: place[d],
                in_flight,
                bytes: stage_bytes(resident[d], stash[d], input[d], in_flight, recomputes[d]),
                chunk_stash_bytes: Vec::new(),
                chunk_nodes: Vec::new(),
                chunk_input_bytes: Vec::new(),
            }
        })
        .collect())
}

/// A topological order of the digraph `arcs` (adjacency lists), or a vertex on a cycle.
fn topological(arcs: &[Vec<usize>]) -> Result<Vec<usize>, usize> {
    let n = arcs.len();
    let mut indegree = vec![0; n];
    for &b in arcs.iter().flatten() {
        indegree[b] += 1;
    }
    let mut ready: Vec<usize> = (0..n).filter(|&v| indegree[v] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(a) = ready.pop() {
        order.push(a);
        for &b in &arcs[a] {
            indegree[b] -= 1;
            if indegree[b] == 0 {
                ready.push(b);
            }
        }
    }
    if order.len() < n {
        return Err((0..n)
            .find(|&v| indegree[v] > 0)
            .expect("a vertex left on a cycle"));
    }
    Ok(order)
}

/// Places the `n` vertices on `0 … n−1`, arcs rising, vertex `v` at or after `release[v]`:
/// filling places from the last, among the vertices whose successors are all placed, the
/// one with the latest tightened release `r'(v) = max(r(v), max_{u→v} r'(u) + 1)` (the
/// earliest-deadline rule backwards). Returns each vertex's place, or a vertex and the
/// place it would get too early.
fn latest_first(
    arcs: &[Vec<usize>],
    order: &[usize],
    release: &[usize],
) -> Result<Vec<usize>, (usize, usize)> {
    let n = arcs.len();
    let mut tight = release.to_vec();
    for &a in order {
        for &b in &arcs[a] {
            tight[b] = tight[b].max(tight[a] + 1);
        }
    }
    let mut waiting: Vec<usize> = arcs.iter().map(Vec::len).collect();
    let mut preds = vec![Vec::new(); n];
    for (a, list) in arcs.iter().enumerate() {
        for &b in list {
            preds[b].push(a);
        }
    }
    let mut ready: std::collections::BinaryHeap<(usize, usize)> = (0..n)
        .filter(|&v| waiting[v] == 0)
        .map(|v| (tight[v], v))
        .collect();
    let mut place = vec![0; n];
    for s in (0..n).rev() {
        let (_, v) = ready
            .pop()
            .expect("an acyclic graph always has a vertex ready");
        if s < release[v] {
            return Err((v, s));
        }
        place[v] = s;
        for &u in &preds[v] {
            waiting[u] -= 1;
            if waiting[u] == 0 {
                ready.push((tight[u], u));
            }
        }
    }
    Ok(place)
}

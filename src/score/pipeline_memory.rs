//! The memory of every device of a contiguous plan as a pipeline schedule runs it.
//!
//! With `resident(v) = size(v) − A(v)` and stash `A(v)` per micro-batch in flight
//! ([`crate::model::schedule::held_bytes`]), device `d` holds
//!
//! ```text
//! mem(d) = Σ_{v on d} resident(v) + c_d · Σ_{v on d} A(v)
//! ```
//!
//! where `c_d` is the schedule's count of micro-batches in flight at `d`'s stage
//! ([`crate::model::schedule::in_flight`]): GPipe `m`; 1F1B `min(m, P − s_d)`. The stage
//! `s_d` and the chain length `P` are read off the plan alone, as the simulator places its
//! pieces (`crate::simulate::stages`): `s_d` is the depth of `d` in the graph of devices
//! linked by forward edges (longest path from a device without forward inputs), and
//! `P = 1 + max(max_d s_d, max_d s'_d)` with `s'_d` the same depth over backward edges. A
//! device without forward nodes holds one stash at a time (`c_d = 1`). On a plan whose
//! stages form a chain (each stage feeds the next, as the DP's split is run) `s_d` is the
//! stage's place in the chain, so this is the planner's figure; the simulator's peak equals
//! it (tests/schedule_memory.rs).
//!
//! Contiguous plans have an acyclic device graph (a cycle would leave a device's set and
//! re-enter it); a non-contiguous plan gets [`PipelineMemoryError::NotContiguous`].
//!
//! Complexity: O((n + m_E) log m_E) for n nodes and m_E edges.

use std::collections::HashMap;

use crate::model::schedule::{held_bytes, Pipeline};
use crate::model::{Device, Placement, Workload};

/// One device's memory under the schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceMemory {
    pub device: Device,
    /// Held for the whole run (weights, gradients, optimizer state, buffers), bytes.
    pub resident_bytes: f64,
    /// Stashed per micro-batch in flight, bytes.
    pub stash_bytes: f64,
    /// Stage on the chain (0 = first).
    pub stage: usize,
    /// Micro-batches in flight at the stage.
    pub in_flight: usize,
    /// `resident + in_flight · stash`.
    pub bytes: f64,
}

#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PipelineMemoryError {
    #[error("the plan's devices form a cycle through {0}: a schedule runs contiguous stages only")]
    NotContiguous(Device),
}

/// Every device's memory under `pipeline` (module documentation), devices in order.
pub fn pipeline_memory(w: &Workload, p: &Placement, pipeline: &Pipeline) -> Result<Vec<DeviceMemory>, PipelineMemoryError> {
    let mut devices: Vec<Device> = p.assignment.clone();
    devices.sort();
    devices.dedup();
    let index: HashMap<Device, usize> = devices.iter().enumerate().map(|(i, &d)| (d, i)).collect();
    let d_of = |v: usize| index[&p.assignment[v]];
    let n_dev = devices.len();
    let mut has_forward = vec![false; n_dev];
    for v in 0..w.len() {
        if !w.node(v).is_backward {
            has_forward[d_of(v)] = true;
        }
    }
    let depth = |backward: bool| -> Result<Vec<usize>, PipelineMemoryError> {
        let mut arcs = vec![Vec::new(); n_dev];
        for e in w.edges() {
            if w.node(e.from).is_backward == backward && w.node(e.to).is_backward == backward {
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
        longest_paths(&arcs).map_err(|d| PipelineMemoryError::NotContiguous(devices[d]))
    };
    let forward = depth(false)?;
    let backward = depth(true)?;
    let stages = 1 + forward.iter().chain(&backward).copied().max().unwrap_or(0);
    let mut resident = vec![0.0; n_dev];
    let mut stash = vec![0.0; n_dev];
    for (v, h) in held_bytes(w).iter().enumerate() {
        resident[d_of(v)] += h.resident_bytes;
        stash[d_of(v)] += h.stash_bytes;
    }
    Ok((0..n_dev)
        .map(|d| {
            let in_flight = if has_forward[d] { pipeline.in_flight(stages, forward[d]) } else { 1 };
            DeviceMemory {
                device: devices[d],
                resident_bytes: resident[d],
                stash_bytes: stash[d],
                stage: forward[d],
                in_flight,
                bytes: resident[d] + in_flight as f64 * stash[d],
            }
        })
        .collect())
}

/// Longest-path depth of every vertex of the digraph `arcs` (adjacency lists without
/// repeats), or a vertex on a cycle. Kahn's order; O(D + arcs).
fn longest_paths(arcs: &[Vec<usize>]) -> Result<Vec<usize>, usize> {
    let n = arcs.len();
    let mut indegree = vec![0; n];
    for &b in arcs.iter().flatten() {
        indegree[b] += 1;
    }
    let mut depth = vec![0; n];
    let mut ready: Vec<usize> = (0..n).filter(|&v| indegree[v] == 0).collect();
    let mut seen = 0;
    while let Some(a) = ready.pop() {
        seen += 1;
        for &b in &arcs[a] {
            depth[b] = depth[b].max(depth[a] + 1);
            indegree[b] -= 1;
            if indegree[b] == 0 {
                ready.push(b);
            }
        }
    }
    if seen < n {
        return Err((0..n).find(|&v| indegree[v] > 0).expect("a vertex left on a cycle"));
    }
    Ok(depth)
}

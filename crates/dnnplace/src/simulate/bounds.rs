//! Exact bounds on the iteration time `T` of a simulation, used as its check.
//!
//! Let `t(π)` be the task time of piece π (receive + compute + send), and for one
//! micro-batch with no device contention `e(π)` the longest path of task times ending just
//! before π and `q(π)` the longest path starting just after π (in the piece DAG). For a
//! device `d` with pieces `Π_d`, `L_d = Σ_{π∈Π_d} t(π)` is its MODEL.md load.
//!
//! - **Critical path**: `T ≥ max_π e(π) + t(π) + q(π)` — one micro-batch's chain of tasks
//!   runs in order.
//! - **Per device**: `T ≥ min_{π∈Π_d} e(π) + m·L_d + min_{π∈Π_d} q(π)` — no task of `d`
//!   starts before `min e`; `d` runs its `m` tasks per piece one at a time, so its last
//!   one ends at or after `min e + m·L_d`; the successors of that task still take at
//!   least `min q`. In particular `T ≥ m · max_d L_d = m · TPS`.
//! - **Upper**: `T ≤ m · Σ_d L_d` — at every instant before `T` some task runs. Suppose
//!   none does at time `τ` while tasks remain: take the unfinished task earliest in the
//!   order the simulator builds (schedule slot, then pass, micro-batch, piece), a linear
//!   extension of the dependencies; its predecessors and the tasks before it on its device
//!   come earlier, so they have ended, and it would have started at the last of those
//!   ends — a contradiction.
//!
//! Complexity: O(pieces + arcs).

use super::stages::Stages;

/// `(lower, upper)` bounds on `T` for `m` micro-batches, with `device_of[piece]` a dense
/// device index.
pub fn iteration_bounds(stages: &Stages, m: usize, device_of: &[usize]) -> (f64, f64) {
    let pieces = &stages.pieces;
    let t: Vec<f64> = pieces.iter().map(|x| x.duration_ms()).collect();
    // Pieces are numbered in a topological order of their graph.
    let mut before = vec![0.0f64; pieces.len()];
    for x in 0..pieces.len() {
        before[x] = pieces[x]
            .preds
            .iter()
            .map(|&y| before[y] + t[y])
            .fold(0.0, f64::max);
    }
    let mut after = vec![0.0f64; pieces.len()];
    for x in (0..pieces.len()).rev() {
        after[x] = pieces[x]
            .succs
            .iter()
            .map(|&y| after[y] + t[y])
            .fold(0.0, f64::max);
    }
    let critical = (0..pieces.len())
        .map(|x| before[x] + t[x] + after[x])
        .fold(0.0, f64::max);
    let devices = device_of.iter().copied().max().map_or(0, |d| d + 1);
    let mut head = vec![f64::INFINITY; devices];
    let mut tail = vec![f64::INFINITY; devices];
    let mut load = vec![0.0f64; devices];
    for x in 0..pieces.len() {
        let d = device_of[x];
        head[d] = head[d].min(before[x]);
        tail[d] = tail[d].min(after[x]);
        load[d] += t[x];
    }
    let per_device = (0..devices)
        .map(|d| head[d] + m as f64 * load[d] + tail[d])
        .fold(0.0, f64::max);
    (
        critical.max(per_device),
        m as f64 * load.iter().sum::<f64>(),
    )
}

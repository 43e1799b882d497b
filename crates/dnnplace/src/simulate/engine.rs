//! The discrete-event loop.
//!
//! State: per device its task list in schedule order and the index of the next one, per
//! task the number of predecessor tasks still running or waiting, and a priority queue of
//! task ends keyed by (time, sequence number). A device starts its next task the moment it
//! is idle and that task's predecessors have ended; it never skips ahead in its list (the
//! schedule is an order, not a preference). Each end event frees the device, releases
//! stashes and counts down the successors, then tries to start work on every device it
//! touched.
//!
//! Memory per device is a step function: resident bytes, plus each piece's stash from the
//! start of its task to its release, plus its transient bytes (a recomputed stash) during
//! its task (see [`super::stages`]).
//!
//! A piece marked [`super::Piece::per_iteration`] (a DP sync) takes its time only in its
//! task of the last micro-batch; its other tasks end as they start.
//!
//! Complexity: O(K log K) for K = pieces × m tasks, plus O(arcs × m) countdowns.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::stages::Stages;

/// One task as it ran.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TaskRun {
    pub piece: usize,
    pub micro_batch: usize,
    pub start_ms: f64,
    pub end_ms: f64,
}

/// What the loop produces, per device index of `device_of`.
pub(crate) struct Run {
    /// In start order.
    pub tasks: Vec<TaskRun>,
    /// `(time, bytes)` steps per device; the first at time 0.
    pub memory: Vec<Vec<(f64, f64)>>,
}

struct End {
    time: f64,
    seq: u64,
    task: usize,
}

impl PartialEq for End {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for End {}
impl PartialOrd for End {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for End {
    /// Reversed: the earliest end is the greatest, for a max-heap.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .time
            .total_cmp(&self.time)
            .then(other.seq.cmp(&self.seq))
    }
}

/// The loop's state (module doc).
struct Loop<'a> {
    stages: &'a Stages,
    m: usize,
    device_of: &'a [usize],
    orders: &'a [Vec<usize>],
    next: Vec<usize>,
    busy: Vec<bool>,
    /// Predecessor tasks not yet ended, per task `piece·m + micro_batch`.
    waiting: Vec<u32>,
    /// Backward tasks still to end before a forward task's stash is freed.
    stash_holders: Vec<u32>,
    /// `frees[b]`: the forward pieces whose stash backward piece `b` helps release.
    frees: Vec<Vec<usize>>,
    held: Vec<f64>,
    memory: Vec<Vec<(f64, f64)>>,
    runs: Vec<TaskRun>,
    queue: BinaryHeap<End>,
    seq: u64,
}

impl Loop<'_> {
    fn record(&mut self, d: usize, time: f64) {
        let bytes = self.held[d];
        match self.memory[d].last_mut() {
            Some(last) if last.0 == time => last.1 = bytes,
            _ => self.memory[d].push((time, bytes)),
        }
    }

    /// Starts device `d`'s next task if the device is idle and the task is ready.
    fn try_start(&mut self, d: usize, now: f64) {
        if self.busy[d] {
            return;
        }
        let Some(&task) = self.orders[d].get(self.next[d]) else {
            return;
        };
        if self.waiting[task] > 0 {
            return;
        }
        let piece = &self.stages.pieces[task / self.m];
        self.busy[d] = true;
        self.next[d] += 1;
        let last = task % self.m + 1 == self.m;
        let end = if piece.per_iteration && !last {
            now
        } else {
            now + piece.duration_ms()
        };
        self.runs.push(TaskRun {
            piece: task / self.m,
            micro_batch: task % self.m,
            start_ms: now,
            end_ms: end,
        });
        if piece.stash_bytes + piece.transient_bytes > 0.0 {
            self.held[d] += piece.stash_bytes + piece.transient_bytes;
            self.record(d, now);
        }
        self.seq += 1;
        self.queue.push(End {
            time: end,
            seq: self.seq,
            task,
        });
    }

    fn free_stash(&mut self, f: usize, time: f64) {
        let bytes = self.stages.pieces[f].stash_bytes;
        if bytes > 0.0 {
            let d = self.device_of[f];
            self.held[d] -= bytes;
            self.record(d, time);
        }
    }

    /// Handles the end of `task` at `time`.
    fn end(&mut self, task: usize, time: f64, touched: &mut Vec<usize>) {
        let (p, i) = (task / self.m, task % self.m);
        let stages = self.stages;
        let piece = &stages.pieces[p];
        let d = self.device_of[p];
        self.busy[d] = false;
        if piece.transient_bytes > 0.0 {
            self.held[d] -= piece.transient_bytes;
            self.record(d, time);
        }
        if piece.released_by.is_empty() {
            self.free_stash(p, time);
        }
        for k in 0..self.frees[p].len() {
            let f = self.frees[p][k];
            let holder = f * self.m + i;
            self.stash_holders[holder] -= 1;
            if self.stash_holders[holder] == 0 {
                self.free_stash(f, time);
            }
        }
        touched.clear();
        touched.push(d);
        for &s in &piece.succs {
            let t = s * self.m + i;
            self.waiting[t] -= 1;
            if self.waiting[t] == 0 {
                touched.push(self.device_of[s]);
            }
        }
    }
}

/// Runs every task. `device_of[piece]` is a dense device index, `orders[d]` the tasks
/// (`piece·m + micro_batch`) of device `d` in schedule order, `resident[d]` its resident
/// bytes. Returns `Err` naming the first stuck task if some never start (a bug: the orders
/// are built to make that impossible).
pub(crate) fn run(
    stages: &Stages,
    m: usize,
    device_of: &[usize],
    orders: &[Vec<usize>],
    resident: &[f64],
) -> Result<Run, String> {
    let pieces = &stages.pieces;
    let task_count = pieces.len() * m;
    let mut frees: Vec<Vec<usize>> = vec![Vec::new(); pieces.len()];
    for (f, piece) in pieces.iter().enumerate() {
        for &b in &piece.released_by {
            frees[b].push(f);
        }
    }
    let mut state = Loop {
        stages,
        m,
        device_of,
        orders,
        next: vec![0; orders.len()],
        busy: vec![false; orders.len()],
        waiting: (0..task_count)
            .map(|t| pieces[t / m].preds.len() as u32)
            .collect(),
        stash_holders: (0..task_count)
            .map(|t| pieces[t / m].released_by.len() as u32)
            .collect(),
        frees,
        held: resident.to_vec(),
        memory: resident.iter().map(|&r| vec![(0.0, r)]).collect(),
        runs: Vec::with_capacity(task_count),
        queue: BinaryHeap::new(),
        seq: 0,
    };
    for d in 0..orders.len() {
        state.try_start(d, 0.0);
    }
    let mut touched = Vec::new();
    while let Some(End { time, task, .. }) = state.queue.pop() {
        state.end(task, time, &mut touched);
        for &d in &touched {
            state.try_start(d, time);
        }
    }
    if let Some(d) = (0..orders.len()).find(|&d| state.next[d] < orders[d].len()) {
        let task = orders[d][state.next[d]];
        return Err(format!(
            "device #{d} stopped before piece {} of micro-batch {} ({} of its predecessors never ended)",
            task / m,
            task % m,
            state.waiting[task]
        ));
    }
    Ok(Run {
        tasks: state.runs,
        memory: state.memory,
    })
}

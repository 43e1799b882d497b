//! A 3D parallel layout ([`crate::model::parallel`]) run as tasks on the simulator's event
//! loop ([`super::engine`]), beside the placements of [`super`].
//!
//! **Lanes.** Replica `r` of stage `s` is one lane: its TP group of `t` devices runs in
//! lockstep, so the group is one sequence of tasks. With `p` stages of `d` replicas each
//! (every stage the same `d`, so every replica runs `m = B/(d·b)` micro-batches), replica
//! `r` of stage `s` receives from replica `r` of `s − 1`. Each stage also has a *sync
//! lane*: its DP group's gradient collective.
//!
//! **Tasks.** Per lane and micro-batch `i`, a forward task `F(i, s)` and a backward task
//! `B(i, s)` at position `s` of the schedule's chain; their times are the stage's
//! [`crate::score::parallel::pass_times`] `(f_s, b_s)`, `f_s + b_s = T_s` (the scorer's
//! time per micro-batch, checked): each holds its pass's compute and TP all-reduces
//! (recomputation: the forward again at the start of the backward), the transfer it
//! receives from its neighbour (store-and-forward: the sender's task ends, then the
//! receiver's starts) and ZeRO-3's weight all-gather. Arcs: `F(i, s) → F(i, s + 1)`,
//! `F(i, p − 1) → B(i, p − 1)`, `B(i, s) → B(i, s − 1)`. Each lane runs its tasks in the
//! schedule's order ([`crate::model::schedule::timetable`]: GPipe or 1F1B). The DP sync of
//! stage `s` is one task of time `sync_s` (the scorer's) after `B(m − 1, s)` of every
//! replica — each lane's last task ([`super::Piece::per_iteration`]).
//!
//! **Memory** per lane: resident `W + G + O` (after ZeRO), plus from the start of `F(i, s)`
//! to the end of `B(i, s)` the stash of micro-batch `i` (`Σ activation_u`; recomputing:
//! `Σ checkpoint_u`, and during `B(i, s)` the largest unit's stash). The peak is the
//! scorer's memory per device: `in_flight` stashes at once (GPipe `m`, 1F1B `min(m, p − s)`).
//!
//! **Figures.** `T` (the last task's end, syncs included), the pipeline's makespan
//! `T_pipe` (the last backward's end), the steady state `(T_pipe(m) − T_pipe(m'))/(m − m')`
//! per micro-batch for `m' = ⌊m/2⌋`, and the bottleneck's busy time per sample
//! `max_s (m·T_s + sync_s) / B` measured from the tasks that ran: the planned time per
//! sample. Exact relations (tested in `tests/simulate_parallel.rs`):
//!
//! - Every stage with the same `(f, b)` and `sync`: `T = (m + p − 1)(f + b) + sync`, the
//!   planned iteration `Σ_s T_s + (m − 1)·max_s T_s + max_s sync_s`, and the steady state
//!   is `f + b` per micro-batch: planned time per sample `= steady/(d·b) + sync/B`.
//! - GPipe in general (a flow shop of identical jobs, forward then backward):
//!   `T_pipe = Σ_s (f_s + b_s) + (m − 1)(max_s f_s + max_s b_s)` ≥ the planned pipeline
//!   term `Σ T_s + (m − 1) max T_s`, equal when one stage has both the largest `f` and
//!   the largest `b`; stage `s`'s last backward ends at
//!   `E_s = Σ f + (m − 1) max f + Σ_{j ≥ s} b_j + (m − 1) max_{j ≥ s} b_j`, and
//!   `T = max_s (E_s + sync_s)`.
//! - Always `T_pipe + sync_0 ≤ T ≤ T_pipe + max_s sync_s` (stage 0's last backward ends
//!   last): the planned formula's sync term, which waits for the flush, is the upper end.
//!
//! Complexity: O(K log K) for `K = 2·p·d·m + p·m` tasks.

use super::engine::{self, TaskRun};
use super::stages::{Piece, Stages};
use super::{SimulateError, MAX_TASKS};
use crate::model::parallel::{ChainCosts, Layout, Topology};
use crate::model::schedule::{timetable, Pass, Schedule};
use crate::model::Device;
use crate::score::parallel::{pass_times, score_layout, LayoutScore};

/// One lane of the run.
#[derive(Clone, Debug, PartialEq)]
pub struct Lane {
    pub stage: usize,
    /// The replica; `None` for the stage's DP sync lane.
    pub replica: Option<usize>,
    /// Its devices (a TP group; the sync lane: every device of the stage).
    pub devices: Vec<usize>,
    /// Summed time of its tasks, ms.
    pub busy_ms: f64,
    /// Resident bytes per device.
    pub resident_bytes: f64,
    /// The most memory one of its devices holds, bytes.
    pub peak_memory_bytes: f64,
}

/// A simulated 3D layout (module doc).
#[derive(Clone, Debug)]
pub struct LayoutSimulation {
    pub schedule: Schedule,
    /// Micro-batches per replica `m`.
    pub micro_batches: usize,
    /// The pieces: per lane a forward and a backward piece, per stage a sync piece.
    pub stages: Stages,
    /// Lane of every piece (index into `lanes`).
    pub lane_of: Vec<usize>,
    pub lanes: Vec<Lane>,
    /// `(f_s, b_s)` per stage, ms.
    pub pass_ms: Vec<(f64, f64)>,
    pub tasks: Vec<TaskRun>,
    /// `T`: the last task's end, DP syncs included.
    pub iteration_ms: f64,
    /// `T_pipe`: the last backward's end.
    pub pipeline_ms: f64,
    /// Per stage, when its DP sync starts and ends.
    pub sync_ms: Vec<(f64, f64)>,
    /// `(T_pipe(m) − T_pipe(m'))/(m − m')` per micro-batch, `m' = ⌊m/2⌋`; `None` when
    /// `m' = 0`.
    pub steady_micro_batch_ms: Option<f64>,
    /// `max_s (busy of a replica lane + sync_s) / B`, from the tasks that ran.
    pub busy_time_per_sample_ms: f64,
    /// The scorer's figures for the same layout.
    pub planned: LayoutScore,
}

/// Simulates `layout` of `chain` on `topo` (module doc).
pub fn simulate_layout(
    chain: &ChainCosts,
    topo: &Topology,
    layout: &Layout,
) -> Result<LayoutSimulation, SimulateError> {
    let planned =
        score_layout(chain, topo, layout).map_err(|e| SimulateError::InvalidPlan(e.to_string()))?;
    let d = layout.stages[0].data_parallel;
    if let Some((s, x)) = layout
        .stages
        .iter()
        .enumerate()
        .find(|(_, x)| x.data_parallel != d)
    {
        return Err(SimulateError::InvalidPlan(format!(
            "stage {s} has {} replicas and stage 0 has {d}: the simulator runs layouts whose stages have one data-parallel degree (each replica then runs the same micro-batches)",
            x.data_parallel
        )));
    }
    let p = layout.stages.len();
    let m = planned.stages[0].micro_batches;
    let pass_ms: Vec<(f64, f64)> = (0..p).map(|s| pass_times(chain, topo, layout, s)).collect();
    for (s, (&(f, b), sc)) in pass_ms.iter().zip(&planned.stages).enumerate() {
        if (f + b - sc.micro_batch_ms).abs() > 1e-9 * sc.micro_batch_ms.max(1.0) {
            return Err(SimulateError::Check(format!(
                "stage {s}: forward {f} + backward {b} ms is not the scorer's {} ms per micro-batch",
                sc.micro_batch_ms
            )));
        }
    }
    let built = build(chain, layout, &planned, &pass_ms);
    let tasks = built.stages.pieces.len().saturating_mul(m);
    if tasks > MAX_TASKS {
        return Err(SimulateError::TooLarge {
            tasks,
            pieces: built.stages.pieces.len(),
            micro_batches: m,
        });
    }
    let run = built.play(layout.schedule, m)?;
    let pipeline_ms = built.pipeline_end(&run);
    let half = m / 2;
    let steady_micro_batch_ms = if half >= 1 {
        let shorter = built.play(layout.schedule, half)?;
        Some((pipeline_ms - built.pipeline_end(&shorter)) / (m - half) as f64)
    } else {
        None
    };
    let mut lanes = built.lanes.clone();
    for t in &run.tasks {
        lanes[built.lane_of[t.piece]].busy_ms += t.end_ms - t.start_ms;
    }
    for (lane, steps) in lanes.iter_mut().zip(&run.memory) {
        lane.peak_memory_bytes = steps.iter().map(|&(_, b)| b).fold(0.0, f64::max);
    }
    let sync_ms: Vec<(f64, f64)> = (0..p)
        .map(|s| {
            let piece = built.sync_piece[s];
            run.tasks
                .iter()
                .find(|t| t.piece == piece && t.micro_batch + 1 == m)
                .map_or((0.0, 0.0), |t| (t.start_ms, t.end_ms))
        })
        .collect();
    let busy_time_per_sample_ms = (0..p)
        .map(|s| {
            let replica = lanes[s * d].busy_ms;
            (replica + (sync_ms[s].1 - sync_ms[s].0)) / layout.global_batch as f64
        })
        .fold(0.0, f64::max);
    Ok(LayoutSimulation {
        schedule: layout.schedule,
        micro_batches: m,
        iteration_ms: run.tasks.iter().map(|t| t.end_ms).fold(0.0, f64::max),
        pipeline_ms,
        sync_ms,
        steady_micro_batch_ms,
        busy_time_per_sample_ms,
        pass_ms,
        tasks: run.tasks,
        lane_of: built.lane_of,
        stages: built.stages,
        lanes,
        planned,
    })
}

/// The pieces, lanes and memory of a layout, ready to play.
struct Built {
    stages: Stages,
    lane_of: Vec<usize>,
    lanes: Vec<Lane>,
    sync_piece: Vec<usize>,
}

/// A piece with no nodes (a 3D task stands for a stage's units, not for graph nodes).
fn piece(lane: usize, pass: Pass, position: usize, ms: f64) -> Piece {
    Piece {
        device: Device::Accelerator(lane),
        pass,
        nodes: Vec::new(),
        position,
        compute_ms: ms,
        receive_ms: 0.0,
        send_ms: 0.0,
        stash_bytes: 0.0,
        recompute_ms: 0.0,
        transient_bytes: 0.0,
        preds: Vec::new(),
        succs: Vec::new(),
        released_by: Vec::new(),
        per_iteration: false,
    }
}

/// Per micro-batch stash and the transient working stash of stage `s` (module doc).
fn stash_of(chain: &ChainCosts, layout: &Layout, s: usize) -> (f64, f64) {
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

/// Pieces in a topological order: forwards by rising stage, backwards by falling stage,
/// then the syncs; lane `s·d + r` is replica `r` of stage `s`, lane `p·d + s` stage `s`'s
/// sync.
fn build(
    chain: &ChainCosts,
    layout: &Layout,
    planned: &LayoutScore,
    pass_ms: &[(f64, f64)],
) -> Built {
    let p = layout.stages.len();
    let d = layout.stages[0].data_parallel;
    let mut pieces = Vec::with_capacity(2 * p * d + p);
    let fw = |s: usize, r: usize| s * d + r;
    let bw = |s: usize, r: usize| p * d + (p - 1 - s) * d + r;
    for (s, &(f, _)) in pass_ms.iter().enumerate() {
        for r in 0..d {
            pieces.push(piece(s * d + r, Pass::Forward, s, f));
        }
    }
    for s in (0..p).rev() {
        for r in 0..d {
            pieces.push(piece(s * d + r, Pass::Backward, s, pass_ms[s].1));
        }
    }
    let sync_piece: Vec<usize> = (0..p).map(|s| 2 * p * d + s).collect();
    for (s, sc) in planned.stages.iter().enumerate() {
        let mut x = piece(p * d + s, Pass::Backward, s, sc.dp_sync_ms);
        x.per_iteration = true;
        pieces.push(x);
    }
    let mut arcs = Vec::new();
    for r in 0..d {
        for (s, &sync) in sync_piece.iter().enumerate() {
            if s + 1 < p {
                arcs.push((fw(s, r), fw(s + 1, r)));
            } else {
                arcs.push((fw(s, r), bw(s, r)));
            }
            if s > 0 {
                arcs.push((bw(s, r), bw(s - 1, r)));
            }
            arcs.push((bw(s, r), sync));
        }
    }
    for (a, b) in arcs {
        pieces[a].succs.push(b);
        pieces[b].preds.push(a);
    }
    let mut lanes = Vec::with_capacity(p * d + p);
    for (s, st) in layout.stages.iter().enumerate() {
        let (stash, working) = stash_of(chain, layout, s);
        let sc = &planned.stages[s];
        for r in 0..d {
            pieces[fw(s, r)].stash_bytes = stash;
            pieces[fw(s, r)].released_by = vec![bw(s, r)];
            pieces[bw(s, r)].transient_bytes = working;
            let t = st.tensor_parallel;
            lanes.push(Lane {
                stage: s,
                replica: Some(r),
                devices: (0..t).map(|j| st.device(r, j)).collect(),
                busy_ms: 0.0,
                resident_bytes: sc.weight_bytes + sc.gradient_bytes + sc.optimizer_bytes,
                peak_memory_bytes: 0.0,
            });
        }
    }
    for (s, st) in layout.stages.iter().enumerate() {
        lanes.push(Lane {
            stage: s,
            replica: None,
            devices: st.devices().collect(),
            busy_ms: 0.0,
            resident_bytes: 0.0,
            peak_memory_bytes: 0.0,
        });
    }
    let lane_of: Vec<usize> = pieces
        .iter()
        .map(|x| match x.device {
            Device::Accelerator(l) => l,
            _ => unreachable!("3D pieces are on lanes"),
        })
        .collect();
    let positions = p;
    Built {
        stages: Stages {
            pieces,
            positions,
            piece_of: Vec::new(),
        },
        lane_of,
        lanes,
        sync_piece,
    }
}

impl Built {
    /// Runs `m` micro-batches: each replica lane in the schedule's order, each sync lane
    /// in micro-batch order.
    fn play(&self, schedule: Schedule, m: usize) -> Result<engine::Run, SimulateError> {
        let table = timetable(schedule, self.stages.positions, m)?;
        let mut orders: Vec<Vec<usize>> = vec![Vec::new(); self.lanes.len()];
        for (x, &lane) in self.lane_of.iter().enumerate() {
            orders[lane].extend((0..m).map(|i| x * m + i));
        }
        let pieces = &self.stages.pieces;
        for order in &mut orders {
            order.sort_by_key(|&task| {
                let (x, i) = (task / m, task % m);
                let piece = &pieces[x];
                if piece.per_iteration {
                    (i, piece.pass, i, x)
                } else {
                    (table.slot(piece.pass, i, piece.position), piece.pass, i, x)
                }
            });
        }
        let resident: Vec<f64> = self.lanes.iter().map(|l| l.resident_bytes).collect();
        engine::run(&self.stages, m, &self.lane_of, &orders, &resident)
            .map_err(SimulateError::Check)
    }

    /// The end of the last task that is not a sync.
    fn pipeline_end(&self, run: &engine::Run) -> f64 {
        run.tasks
            .iter()
            .filter(|t| !self.stages.pieces[t.piece].per_iteration)
            .map(|t| t.end_ms)
            .fold(0.0, f64::max)
    }
}

//! A 3D parallel layout ([`crate::model::parallel`]) run as tasks on the simulator's event
//! loop ([`super::engine`]), beside the placements of [`super`]. Stages may have different
//! data-parallel degrees `d_s` (free layouts, `--free`), and lie on several accelerator
//! types ([`simulate_mixed`]: each stage's pass times, stash and links those
//! [`crate::score::parallel::score_mixed`] prices it with; the run is the same).
//!
//! **Micro-batches.** Every stage uses the layout's one micro-batch size `b`, so an
//! iteration is `M = B/b` *global* micro-batches `0..M`, each `b` samples, and `d_s | M`
//! (the scorer's check). Global micro-batch `i` runs on replica `i mod d_s` of stage `s`,
//! as that replica's local micro-batch `⌊i/d_s⌋`: every replica of stage `s` runs
//! `m_s = M/d_s = B/(d_s·b)` micro-batches, the scorer's `m_s`. A micro-batch is never split
//! or gathered between stages: replica `i mod d_s` of `s` sends the whole micro-batch's
//! activations to replica `i mod d_{s+1}` of `s + 1` (and its gradients back), one transfer
//! per producer and micro-batch, which is what `score::parallel` prices into `T_s` (on the
//! network when any pairing of the two stages' devices crosses machines, so every pairing
//! gets the same price). With one `d` for every stage replica `r` talks only to replica `r`.
//!
//! **Lanes.** Replica `r` of stage `s` is one lane: its TP group of `t_s` devices runs in
//! lockstep, so the group is one sequence of tasks. Each stage also has a *sync lane*: its
//! DP group's gradient collective.
//!
//! **Tasks.** Per stage and global micro-batch `i`, a forward task `F(i, s)` and a backward
//! task `B(i, s)` on lane `(s, i mod d_s)`; their times are the stage's
//! [`crate::score::parallel::pass_times`] `(f_s, b_s)`, `f_s + b_s = T_s` (the scorer's
//! time per micro-batch, checked): each holds its pass's compute and TP all-reduces
//! (recomputation: the forward again at the start of the backward), the transfer it
//! receives from its neighbour (store-and-forward: the sender's task ends, then the
//! receiver's starts) and ZeRO-3's weight all-gather. Arcs: `F(i, s) → F(i, s + 1)`,
//! `F(i, p − 1) → B(i, p − 1)`, `B(i, s) → B(i, s − 1)`, and every `B(i, s)` → stage `s`'s
//! DP sync, one task of time `sync_s` (the scorer's).
//!
//! **Order.** Stage `s` has one sequence over the global micro-batches with a warm-up of
//! `K_s` forwards: `F(0) … F(K_s − 1)`, then `B(0), F(K_s), B(1), F(K_s + 1), …` (keys
//! `F(i) = i` for `i < K_s`, else `2i − K_s + 1`; `B(i) = K_s + 2i`); each lane runs its own
//! tasks in that sequence's order. GPipe: `K_s = M` (every forward, then every backward).
//! 1F1B: `K_s = min(M, Σ_{j ≥ s} d_j)`. With one `d`, `K_s = d·(p − s)` and each replica's
//! order is exactly 1F1B's per-replica timetable ([`crate::model::schedule::timetable`]):
//! `p − s` warm-up forwards, then one backward and one forward. `K_s` never grows with
//! `s`, so the stage sequences and the arcs form an acyclic graph (stage `s`'s `B(k)` waits
//! for `F(k + K_{s+1} − 1, s + 1)`, which comes from `F(k + K_{s+1} − 1, s)`, before `B(k)`
//! in `s`'s sequence since `K_{s+1} ≤ K_s`), and the lowest unfinished task of a
//! topological order is always ready: the run never deadlocks. The warm-up keeps
//! `Σ_{j ≥ s} d_j` micro-batches in flight over stage `s`'s replicas, as many as a full
//! pipeline behind it holds when every stage processes `d_j` micro-batches per `T_j`;
//! with fewer (the scorer's `min(m_s, p − s)` per replica, the one `d` count) a stage
//! feeding wider stages starves (Little's law: `d_s·(p − s)` micro-batches over a round
//! trip of `Σ_{j ≥ s} T_j`).
//!
//! **Interleaved** (`interleaved:v`, one `d`, `m` a multiple of `p`): the tasks are per
//! chunk, `F(i, c)`, `B(i, c)` for the `p·v` chunks with [`pass_times`] of each chunk, the
//! same arcs along the chunks, on the lanes of stage `c mod p`; replica `r` of stage `k`
//! runs Megatron-LM's interleaved order for device `k`
//! ([`crate::model::schedule::device_order`]) on its micro-batches `i ≡ r (mod d)`, and
//! the stage's one sync waits for every backward of its chunks. The run never deadlocks:
//! the order is the one [`crate::model::schedule::timetable`] plays to the end. With
//! equal chunks (the same `f`, `b` per chunk and the same sync per stage) `T = (m + (p −
//! 1)/v)·T_k + sync`, the scorer's formula, and each replica's peak memory is the scorer's
//! replayed peak (tested in `tests/parallel_interleaved.rs`).
//!
//! **Overlapped DP sync** (`layout.overlap_grad_reduce`): stage `s`'s sync starts when the
//! last of its replicas starts its last backward (the last task of each replica lane's
//! order) and takes its own time beside it, so the stage ends at `max(end of its
//! backwards, that start + sync_s)` ([`crate::score::parallel`]'s model). Nothing waits
//! for a sync, so the run plays as without it and only the sync tasks move.
//!
//! **Memory** per lane: resident `W + G + O` (after ZeRO), plus from the start of `F(i, s)`
//! to the end of `B(i, s)` the stash of micro-batch `i` (`Σ activation_u`; recomputing:
//! `Σ checkpoint_u`, and during `B(i, s)` the largest unit's stash). A replica holds at
//! most `min(m_s, ⌈K_s/d_s⌉)` stashes at once (replica 0 at the end of the warm-up):
//! GPipe `m_s`; 1F1B `min(m_s, ⌈Σ_{j≥s} d_j/d_s⌉)`, `min(m, p − s)` with one `d` — the
//! scorer's count ([`crate::model::schedule::replica_in_flight`]), so every replica's
//! simulated peak is the scorer's memory per device (tested).
//!
//! **Figures.** `T` (the last task's end, syncs included), the pipeline's makespan
//! `T_pipe` (the last backward's end), the steady state per sample
//! `(T_pipe(M) − T_pipe(M'))/((M − M')·b)` for `M'` the largest multiple of
//! `L = lcm(d_s)` (interleaved: `d·p`) at most `M/2`, and the bottleneck's busy time per sample
//! `max_s (m_s·T_s + sync_s) / B` measured from the tasks that ran: the planned time per
//! sample. Exact relations (tested in `tests/simulate_parallel.rs`):
//!
//! - Every stage with the same `(f, b)`, `d` and `sync`: `T = (m + p − 1)(f + b) + sync`,
//!   the planned iteration `Σ_s T_s + (m − 1)·max_s T_s + max_s sync_s`, and the steady
//!   state is `(f + b)/(d·b)` per sample.
//! - Free layouts whose stages process samples at one rate (`f_s/d_s` and `b_s/d_s` the
//!   same for every stage): the steady state per sample is `max_s T_s/(d_s·b)`, the
//!   planned time per sample less its sync term.
//! - GPipe, one `d` (a flow shop of identical jobs, forward then backward):
//!   `T_pipe = Σ_s (f_s + b_s) + (m − 1)(max_s f_s + max_s b_s)` ≥ the planned pipeline
//!   term `Σ T_s + (m − 1) max T_s`, equal when one stage has both the largest `f` and
//!   the largest `b`.
//! - Always `T_pipe + sync_0 ≤ T ≤ T_pipe + max_s sync_s` (stage 0's last backward ends
//!   last): the planned formula's sync term, which waits for the flush, is the upper end.
//!   Overlapped: `T ≤ T_pipe + max_s max(0, sync_s − b_s)`, and with every stage equal
//!   `T = (m + p − 1)(f + b) + max(0, sync − b)`, the planned iteration.
//!
//! Complexity: O(K log K) for `K = 2·p·M + p` tasks.

use super::engine::{self, TaskRun};
use super::stages::{Piece, Stages};
use super::{SimulateError, MAX_TASKS};
use crate::model::parallel::{ChainCosts, Layout, MixedTopology, Topology};
use crate::model::schedule::{device_order, Pass, Schedule};
use crate::model::Device;
use crate::score::parallel::{
    pass_times, pass_times_mixed, score_layout, score_mixed, stash_per_micro_batch, LayoutScore,
};
use crate::solve::budget::Budget;
use crate::solve::parallel::{plan_with, IterationClock, ParallelOutcome, ParallelProblem};

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
    /// Micro-batches per replica of stage 0, `m_0` (every stage's `m` with one `d`).
    pub micro_batches: usize,
    /// `M = B/b`: the iteration's micro-batches over all replicas.
    pub global_micro_batches: usize,
    /// The pieces, one per task (the engine runs them with one micro-batch): forwards,
    /// backwards, then the syncs.
    pub stages: Stages,
    /// Lane of every piece (index into `lanes`).
    pub lane_of: Vec<usize>,
    pub lanes: Vec<Lane>,
    /// `(f_s, b_s)` per stage, ms.
    pub pass_ms: Vec<(f64, f64)>,
    /// As they ran; `micro_batch` is the global micro-batch (0 for a sync).
    pub tasks: Vec<TaskRun>,
    /// `T`: the last task's end, DP syncs included.
    pub iteration_ms: f64,
    /// `T_pipe`: the last backward's end.
    pub pipeline_ms: f64,
    /// Per stage, when its DP sync starts and ends.
    pub sync_ms: Vec<(f64, f64)>,
    /// `(T_pipe(M) − T_pipe(M'))/((M − M')·b)` (module doc); `None` when `M' = 0`.
    pub steady_per_sample_ms: Option<f64>,
    /// `max_s (busy of a replica lane + sync_s) / B`, from the tasks that ran.
    pub busy_time_per_sample_ms: f64,
    /// The scorer's figures for the same layout.
    pub planned: LayoutScore,
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Simulates `layout` of `chain` on `topo` (module doc).
pub fn simulate_layout(
    chain: &ChainCosts,
    topo: &Topology,
    layout: &Layout,
) -> Result<LayoutSimulation, SimulateError> {
    let planned =
        score_layout(chain, topo, layout).map_err(|e| SimulateError::InvalidPlan(e.to_string()))?;
    let n = layout.stages.len();
    let pass_ms: Vec<(f64, f64)> = (0..n).map(|c| pass_times(chain, topo, layout, c)).collect();
    let stash: Vec<(f64, f64)> = (0..n)
        .map(|c| stash_per_micro_batch(chain, layout, c))
        .collect();
    simulate_priced(layout, planned, pass_ms, &stash)
}

/// Simulates `layout` on a cluster of several accelerator types (module doc): the same run,
/// each stage's pass times and stash those of its own type's costs and links
/// ([`crate::score::parallel::pass_times_mixed`], [`score_mixed`]), `chains[g]` type `g`'s
/// costs at the layout's micro-batch.
pub fn simulate_mixed(
    chains: &[ChainCosts],
    topo: &MixedTopology,
    layout: &Layout,
) -> Result<LayoutSimulation, SimulateError> {
    let invalid =
        |e: crate::score::parallel::LayoutError| SimulateError::InvalidPlan(e.to_string());
    let planned = score_mixed(chains, topo, layout).map_err(invalid)?;
    let p = layout.stages.len();
    let mut pass_ms = Vec::with_capacity(p);
    let mut stash = Vec::with_capacity(p);
    for (s, st) in layout.stages.iter().enumerate() {
        pass_ms.push(pass_times_mixed(chains, topo, layout, s).map_err(invalid)?);
        let g = topo.group_of(st.first_device).expect("a checked layout");
        stash.push(stash_per_micro_batch(&chains[g], layout, s));
    }
    simulate_priced(layout, planned, pass_ms, &stash)
}

/// The run of `layout` from its scorer's figures `planned`, pass times `(f_c, b_c)` and
/// stash `(per micro-batch, working)` per chunk ([`stash_per_micro_batch`]).
fn simulate_priced(
    layout: &Layout,
    planned: LayoutScore,
    pass_ms: Vec<(f64, f64)>,
    stash: &[(f64, f64)],
) -> Result<LayoutSimulation, SimulateError> {
    let (n, p) = (layout.stages.len(), layout.pipeline_stages());
    let global = layout.global_batch / layout.micro_batch;
    for (s, sc) in planned.stages.iter().enumerate() {
        let sum: f64 = (s..n).step_by(p).map(|c| pass_ms[c].0 + pass_ms[c].1).sum();
        if (sum - sc.micro_batch_ms).abs() > 1e-9 * sc.micro_batch_ms.max(1.0) {
            return Err(SimulateError::Check(format!(
                "stage {s}: its forward and backward passes take {sum} ms, not the scorer's {} ms per micro-batch",
                sc.micro_batch_ms
            )));
        }
    }
    let tasks = (2 * n).saturating_mul(global).saturating_add(p);
    if tasks > MAX_TASKS {
        return Err(SimulateError::TooLarge {
            tasks,
            pieces: 2 * n + p,
            micro_batches: global,
        });
    }
    let built = build(stash, layout, &planned, &pass_ms, global);
    let mut run = built.play()?;
    if layout.overlap_grad_reduce {
        built.overlap_syncs(&mut run);
    }
    let pipeline_ms = built.pipeline_end(&run);
    let lcm = layout
        .stages
        .iter()
        .fold(1, |l, st| l / gcd(l, st.data_parallel) * st.data_parallel)
        // Interleaved: every replica's micro-batches a multiple of p.
        * if layout.schedule.chunks() > 1 { p } else { 1 };
    let shorter = (global / 2) / lcm * lcm;
    let steady_per_sample_ms = if shorter >= 1 {
        let short = build(stash, layout, &planned, &pass_ms, shorter);
        let step = pipeline_ms - short.pipeline_end(&short.play()?);
        Some(step / ((global - shorter) * layout.micro_batch) as f64)
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
            let piece = built.sync_piece(s);
            run.tasks
                .iter()
                .find(|t| t.piece == piece)
                .map_or((0.0, 0.0), |t| (t.start_ms, t.end_ms))
        })
        .collect();
    let busy_time_per_sample_ms = (0..p)
        .map(|s| {
            let replica = lanes[built.lane_base[s]].busy_ms;
            (replica + (sync_ms[s].1 - sync_ms[s].0)) / layout.global_batch as f64
        })
        .fold(0.0, f64::max);
    let iteration_ms = run.tasks.iter().map(|t| t.end_ms).fold(0.0, f64::max);
    let tasks = run
        .tasks
        .into_iter()
        .map(|t| TaskRun {
            micro_batch: built.micro_batch_of(t.piece),
            ..t
        })
        .collect();
    Ok(LayoutSimulation {
        schedule: layout.schedule,
        micro_batches: planned.stages[0].micro_batches,
        global_micro_batches: global,
        iteration_ms,
        pipeline_ms,
        sync_ms,
        steady_per_sample_ms,
        busy_time_per_sample_ms,
        pass_ms,
        tasks,
        lane_of: built.lane_of,
        stages: built.stages,
        lanes,
        planned,
    })
}

/// The pieces, lanes and memory of a layout run with `M` global micro-batches, ready to
/// play. Piece `F(i, s)` is `s·M + i`, `B(i, s)` is `p·M + (p − 1 − s)·M + i` (forwards by
/// rising stage, backwards by falling stage: a topological order), the sync of `s` is
/// `2·p·M + s`; lane `lane_base[s] + r` is replica `r` of stage `s`, lane `R + s` stage
/// `s`'s sync, `R = Σ d_s`.
struct Built {
    stages: Stages,
    lane_of: Vec<usize>,
    lanes: Vec<Lane>,
    lane_base: Vec<usize>,
    /// `M`.
    global: usize,
    /// The order of each lane's pieces.
    orders: Vec<Vec<usize>>,
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

/// Stage `s`'s warm-up `K_s` (module doc).
pub fn warm_up(layout: &Layout, s: usize, global: usize) -> usize {
    match layout.schedule {
        Schedule::OneFOneB => layout.stages[s..]
            .iter()
            .map(|x| x.data_parallel)
            .sum::<usize>()
            .min(global),
        _ => global,
    }
}

/// The key of pass `pass` of global micro-batch `i` in a stage sequence with warm-up `k`.
fn order_key(pass: Pass, i: usize, k: usize) -> usize {
    match pass {
        Pass::Forward if i < k => i,
        Pass::Forward => 2 * i + 1 - k,
        Pass::Backward => k + 2 * i,
    }
}

/// The tasks of `layout` with `global` micro-batches (module doc, [`Built`]): `n` chunks
/// (`n = p` unless interleaved), chunk `c` on the lanes of stage `c mod p`.
fn build(
    stash: &[(f64, f64)],
    layout: &Layout,
    planned: &LayoutScore,
    pass_ms: &[(f64, f64)],
    global: usize,
) -> Built {
    let (n, p) = (layout.stages.len(), layout.pipeline_stages());
    let big_m = global;
    let d: Vec<usize> = layout.stages.iter().map(|x| x.data_parallel).collect();
    let mut lane_base = Vec::with_capacity(p);
    let mut replicas = 0;
    for &x in &d[..p] {
        lane_base.push(replicas);
        replicas += x;
    }
    let ids = Numbering {
        chunks: n,
        global: big_m,
    };
    let (fw, bw) = (|c, i| ids.forward(c, i), |c, i| ids.backward(c, i));
    let lane = |c: usize, i: usize| lane_base[c % p] + i % d[c];
    let mut pieces = Vec::with_capacity(2 * n * big_m + p);
    for (c, &(f, _)) in pass_ms.iter().enumerate() {
        pieces.extend((0..big_m).map(|i| piece(lane(c, i), Pass::Forward, c, f)));
    }
    for c in (0..n).rev() {
        pieces.extend((0..big_m).map(|i| piece(lane(c, i), Pass::Backward, c, pass_ms[c].1)));
    }
    for (s, sc) in planned.stages.iter().enumerate() {
        let mut x = piece(replicas + s, Pass::Backward, s, sc.dp_sync_ms);
        x.per_iteration = true;
        pieces.push(x);
    }
    let mut arcs = Vec::with_capacity(3 * n * big_m);
    for i in 0..big_m {
        for c in 0..n {
            arcs.push(if c + 1 < n {
                (fw(c, i), fw(c + 1, i))
            } else {
                (fw(c, i), bw(c, i))
            });
            if c > 0 {
                arcs.push((bw(c, i), bw(c - 1, i)));
            }
            arcs.push((bw(c, i), 2 * n * big_m + c % p));
        }
    }
    for (a, b) in arcs {
        pieces[a].succs.push(b);
        pieces[b].preds.push(a);
    }
    for (c, &(held, working)) in stash.iter().enumerate().take(n) {
        for i in 0..big_m {
            pieces[fw(c, i)].stash_bytes = held;
            pieces[fw(c, i)].released_by = vec![bw(c, i)];
            pieces[bw(c, i)].transient_bytes = working;
        }
    }
    let mut orders = lane_orders(layout, replicas, ids);
    let mut lanes = Vec::with_capacity(replicas + p);
    for (s, st) in layout.stages[..p].iter().enumerate() {
        orders[replicas + s].push(2 * n * big_m + s);
        let sc = &planned.stages[s];
        for r in 0..d[s] {
            lanes.push(Lane {
                stage: s,
                replica: Some(r),
                devices: (0..st.tensor_parallel).map(|j| st.device(r, j)).collect(),
                busy_ms: 0.0,
                resident_bytes: sc.weight_bytes + sc.gradient_bytes + sc.optimizer_bytes,
                peak_memory_bytes: 0.0,
            });
        }
    }
    for (s, st) in layout.stages[..p].iter().enumerate() {
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
    Built {
        stages: Stages {
            pieces,
            positions: n,
            piece_of: Vec::new(),
        },
        lane_of,
        lanes,
        lane_base,
        global,
        orders,
    }
}

/// The piece numbers of a run of `chunks` chunks and `global` micro-batches ([`Built`]).
#[derive(Clone, Copy)]
struct Numbering {
    chunks: usize,
    global: usize,
}

impl Numbering {
    /// `F(i, c)`.
    fn forward(self, c: usize, i: usize) -> usize {
        c * self.global + i
    }

    /// `B(i, c)`: backwards by falling chunk after every forward.
    fn backward(self, c: usize, i: usize) -> usize {
        (2 * self.chunks - 1 - c) * self.global + i
    }
}

/// Each replica lane's pieces in its order (the sync lanes `replicas..` left empty), given
/// the piece numbers `F(i, c)`, `B(i, c)` of chunk `c`, global micro-batch `i`. GPipe and
/// 1F1B: stage `s`'s one sequence with warm-up `K_s` (module doc). Interleaved: replica `r`
/// of stage `k` runs Megatron-LM's order for device `k` of `p` with `m = M/d`
/// micro-batches ([`device_order`]): its step (pass, local micro-batch `j`, chunk `q`) is
/// chunk `q·p + k` on global micro-batch `j·d + r`.
fn lane_orders(layout: &Layout, replicas: usize, ids: Numbering) -> Vec<Vec<usize>> {
    let (big_m, fw, bw) = (
        ids.global,
        |c, i| ids.forward(c, i),
        |c, i| ids.backward(c, i),
    );
    let p = layout.pipeline_stages();
    let mut orders: Vec<Vec<usize>> = vec![Vec::new(); replicas + p];
    let mut base = 0;
    for (s, st) in layout.stages[..p].iter().enumerate() {
        let d = st.data_parallel;
        if let Schedule::Interleaved { .. } = layout.schedule {
            let order = device_order(layout.schedule, p, big_m / d, s)
                .expect("a scored interleaved layout has m a multiple of p");
            for r in 0..d {
                orders[base + r] = order
                    .iter()
                    .map(|step| {
                        let (c, i) = (step.chunk * p + s, step.micro_batch * d + r);
                        match step.pass {
                            Pass::Forward => fw(c, i),
                            Pass::Backward => bw(c, i),
                        }
                    })
                    .collect();
            }
        } else {
            let k = warm_up(layout, s, big_m);
            let mut keyed: Vec<(usize, usize, usize)> = (0..big_m)
                .flat_map(|i| {
                    [
                        (order_key(Pass::Forward, i, k), fw(s, i), i),
                        (order_key(Pass::Backward, i, k), bw(s, i), i),
                    ]
                })
                .collect();
            keyed.sort_unstable();
            for (_, x, i) in keyed {
                orders[base + i % d].push(x);
            }
        }
        base += d;
    }
    orders
}

impl Built {
    /// Runs every task (one per piece) in its lane's order.
    fn play(&self) -> Result<engine::Run, SimulateError> {
        let resident: Vec<f64> = self.lanes.iter().map(|l| l.resident_bytes).collect();
        engine::run(&self.stages, 1, &self.lane_of, &self.orders, &resident)
            .map_err(SimulateError::Check)
    }

    /// Moves each stage's DP sync to start with the stage's last backward
    /// (`--overlap-grad-reduce`, module doc): from the latest start of its replica lanes'
    /// last tasks (each lane's order ends with a backward), for its own time. Nothing waits
    /// for a sync, so no other task moves.
    fn overlap_syncs(&self, run: &mut engine::Run) {
        let mut task_of = vec![usize::MAX; self.stages.pieces.len()];
        for (k, t) in run.tasks.iter().enumerate() {
            task_of[t.piece] = k;
        }
        for (s, &base) in self.lane_base.iter().enumerate() {
            let replicas = self
                .lanes
                .iter()
                .filter(|l| l.stage == s && l.replica.is_some());
            let start = (base..base + replicas.count())
                .filter_map(|lane| self.orders[lane].last())
                .map(|&piece| run.tasks[task_of[piece]].start_ms)
                .fold(0.0, f64::max);
            let sync = &mut run.tasks[task_of[self.sync_piece(s)]];
            let ms = sync.end_ms - sync.start_ms;
            (sync.start_ms, sync.end_ms) = (start, start + ms);
        }
    }

    /// Stage `s`'s sync piece.
    fn sync_piece(&self, s: usize) -> usize {
        2 * self.stages.positions * self.global + s
    }

    /// The global micro-batch of a piece (0 for a sync).
    fn micro_batch_of(&self, piece: usize) -> usize {
        if piece >= 2 * self.stages.positions * self.global {
            0
        } else {
            piece % self.global
        }
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

/// The simulator as the free iteration search's clock
/// ([`crate::solve::parallel::free_iteration`]): a layout's iteration is its simulated
/// `T` (module doc).
pub struct Simulator;

impl IterationClock for Simulator {
    fn iteration_ms(
        &self,
        chain: &ChainCosts,
        topo: &Topology,
        layout: &Layout,
    ) -> Result<f64, String> {
        simulate_layout(chain, topo, layout)
            .map(|s| s.iteration_ms)
            .map_err(|e| e.to_string())
    }

    fn mixed_iteration_ms(
        &self,
        chains: &[ChainCosts],
        topo: &MixedTopology,
        layout: &Layout,
    ) -> Result<f64, String> {
        simulate_mixed(chains, topo, layout)
            .map(|s| s.iteration_ms)
            .map_err(|e| e.to_string())
    }
}

/// The best layout of `problem` within `budget` with the simulator at hand: the one entry
/// of the 3D searches ([`crate::solve::parallel::plan_with`]); free layouts under the
/// iteration objective are valued by [`Simulator`].
pub fn plan(problem: &ParallelProblem, budget: &Budget) -> Result<ParallelOutcome, String> {
    plan_with(problem, budget, Some(&Simulator))
}

/// The answer of `problem` to `goal` ([`crate::solve::parallel::answer`]) with the
/// simulator at hand: the one entry of `plan --parallel 3d` and Python's `plan_parallel` /
/// `sweep_parallel`.
pub fn answer(
    problem: &ParallelProblem,
    goal: crate::solve::parallel::Goal,
    budget: &Budget,
) -> Result<crate::solve::parallel::Answer, String> {
    crate::solve::parallel::answer(problem, goal, budget, Some(&Simulator))
}

/// The 3D comparison ([`crate::solve::parallel::compare::compare`]) with the simulator at
/// hand: `compare CONFIG.json --parallel 3d`.
pub fn compare(
    problem: &ParallelProblem,
    budget: &Budget,
) -> Result<Vec<crate::solve::parallel::compare::Row>, String> {
    crate::solve::parallel::compare::compare(problem, budget, Some(&Simulator))
}

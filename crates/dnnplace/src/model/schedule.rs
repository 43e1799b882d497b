//! Pipeline schedules and the memory they keep in flight.
//!
//! A training pipeline runs `m` micro-batches through `p` devices. Device `d` holds `v`
//! model *chunks* (v = 1 except for the interleaved schedule); chunk `c` of device `d` is
//! stage `s = c·p + d` of a chain of `P = p·v` stages. Stage `s` runs a forward task
//! `F(i, s)` and a backward task `B(i, s)` per micro-batch `i`; `F(i, s)` needs
//! `F(i, s−1)`, `B(i, s)` needs `B(i, s+1)` (and `B(i, P−1)` needs `F(i, P−1)`). A schedule
//! is the order in which every device runs its tasks ([`device_order`]):
//!
//! - **GPipe**: `F(0) … F(m−1)`, then `B(0) … B(m−1)`.
//! - **1F1B** (PipeDream-Flush): device `d` first runs `w_d = min(p − d − 1, m)` warm-up
//!   forwards, then alternates `F(w_d + j), B(j)` for `j = 0 … m − w_d − 1`, then the last
//!   `w_d` backwards.
//! - **Interleaved 1F1B** with `v ≥ 2` chunks (Megatron-LM): the `k`-th forward step of a
//!   device runs chunk `c_F(k) = ⌊(k mod pv) / p⌋` on micro-batch
//!   `μ(k) = ⌊k / pv⌋·p + (k mod p)`; the `k`-th backward step runs chunk
//!   `c_B(k) = v − 1 − c_F(k)` on `μ(k)`. Warm-up `w_d = min(2(p − d − 1) + (v − 1)p, mv)`
//!   forward steps (all `mv` when `m = p`), then `F(w_d + j), B(j)` pairs, then the
//!   remaining backwards. Megatron-LM requires `m` to be a multiple of `p`; so do we.
//!
//! **In flight.** A forward task stashes its activations until the backward task of the
//! same micro-batch and chunk ends. Counting a stash from the start of `F` to the end of
//! `B`, the most micro-batches device `d` holds at once ([`in_flight`]) is
//!
//! - GPipe: `m` (every forward precedes the first backward);
//! - 1F1B: `min(m, p − d)` — after the warm-up the device holds `w_d` stashes, the next
//!   forward makes `w_d + 1`, and every later `F` follows a `B`, so it never exceeds
//!   `w_d + 1 = min(p − d, m)` (0-based `d`; the first stage holds the most);
//! - interleaved: `min(w_d + 1, mv)` chunk-stashes, by the same argument over steps. The
//!   chunks differ in size, so the peak in bytes is the maximum over the prefix of the
//!   device's order of `Σ_c a_c·(forwards − backwards of chunk c so far)`
//!   ([`peak_stash_bytes`], exact by replaying the order; the steady state repeats every
//!   `pv` pairs, so [`compressed_order`] replays it in O(w_d + pv) whatever `m`).
//!
//! A stage's memory is then `resident + a·in_flight` ([`stage_memory_bytes`]), `resident`
//! being weights, gradients, optimizer state and working buffers and `a` the activation
//! bytes one micro-batch stashes. [`held_bytes`] reads both from the workload's memory
//! parts ([`crate::model::memory`]: `a = A(v)`, `resident = size(v) − A(v)`), which makes
//! this the cost model's `mem(S, m) = Σ size + (m − 1)·Σ A`; a node without parts is all
//! resident, MODEL.md's model: memory independent of the schedule.
//!
//! **Timetable.** [`timetable`] plays the schedule on its chain with every task one unit
//! long and returns each task's start *slot*. Every dependency ends before its dependant
//! starts, so the slot order is a linear extension of the dependencies that lists each
//! device's tasks in the schedule's order: for fixed `i`, slots increase along the forward
//! chain, decrease along the backward chain, and every `F(i, ·)` precedes every
//! `B(i, ·)`. The simulator (`crate::simulate`) orders each device's tasks by slot; any
//! plan whose dependencies respect those three monotonicities then runs without deadlock.
//! Complexity O(T·p) for `T ≤ 2mP + (bubble slots)` slots.

use crate::model::grouping::Grouping;
use crate::model::recompute::Recompute;
use crate::model::{Device, Placement, Workload};

/// A pipeline schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// All forwards, then all backwards (GPipe).
    GPipe,
    /// One forward, one backward after a warm-up (PipeDream-Flush).
    OneFOneB,
    /// Megatron-LM's interleaved 1F1B with `chunks` model chunks per device (≥ 2).
    Interleaved { chunks: usize },
}

impl Schedule {
    /// Model chunks per device: `v` for interleaved, else 1.
    pub fn chunks(&self) -> usize {
        match *self {
            Schedule::Interleaved { chunks } => chunks,
            _ => 1,
        }
    }
}

impl std::fmt::Display for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Schedule::GPipe => write!(f, "gpipe"),
            Schedule::OneFOneB => write!(f, "1f1b"),
            Schedule::Interleaved { chunks } => write!(f, "interleaved:{chunks}"),
        }
    }
}

impl std::str::FromStr for Schedule {
    type Err = String;
    /// `gpipe`, `1f1b`, `interleaved` (2 chunks) or `interleaved:v` (v ≥ 2).
    fn from_str(text: &str) -> Result<Self, String> {
        let t = text.trim().to_ascii_lowercase();
        match t.as_str() {
            "gpipe" => return Ok(Schedule::GPipe),
            "1f1b" | "pipedream-flush" => return Ok(Schedule::OneFOneB),
            "interleaved" => return Ok(Schedule::Interleaved { chunks: 2 }),
            _ => {}
        }
        if let Some(v) = t.strip_prefix("interleaved:") {
            return match v.parse::<usize>() {
                Ok(v) if v >= 2 => Ok(Schedule::Interleaved { chunks: v }),
                Ok(_) => Err(format!(
                    "'{text}': interleaved needs at least 2 chunks per device (use 1f1b for one)"
                )),
                Err(_) => Err(format!(
                    "'{text}': the number of chunks after 'interleaved:' must be an integer"
                )),
            };
        }
        Err(format!(
            "unknown schedule '{text}' (use gpipe, 1f1b or interleaved[:v])"
        ))
    }
}

/// Forward or backward.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pass {
    Forward,
    Backward,
}

/// One task of a device's order: a pass of one chunk on one micro-batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub pass: Pass,
    pub micro_batch: usize,
    /// The chunk on the device (0 unless interleaved); the stage is `chunk·p + device`.
    pub chunk: usize,
}

/// Why a schedule cannot run with the given sizes.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    #[error("the number of micro-batches must be at least 1")]
    NoMicroBatches,
    #[error("a pipeline needs at least one stage")]
    NoStages,
    #[error("{schedule} needs the number of stages ({stages}) to be a multiple of its {chunks} chunks per device")]
    StagesNotDivisible {
        schedule: Schedule,
        stages: usize,
        chunks: usize,
    },
    #[error("{schedule} needs the number of micro-batches ({micro_batches}) to be a multiple of the {devices} pipeline devices (as Megatron-LM does)")]
    MicroBatchesNotDivisible {
        schedule: Schedule,
        micro_batches: usize,
        devices: usize,
    },
    #[error("internal: the {schedule} timetable deadlocked at slot {slot}")]
    Deadlock { schedule: Schedule, slot: usize },
}

fn check(schedule: Schedule, p: usize, m: usize) -> Result<(), ScheduleError> {
    if m == 0 {
        return Err(ScheduleError::NoMicroBatches);
    }
    if p == 0 {
        return Err(ScheduleError::NoStages);
    }
    if let Schedule::Interleaved { .. } = schedule {
        if !m.is_multiple_of(p) {
            return Err(ScheduleError::MicroBatchesNotDivisible {
                schedule,
                micro_batches: m,
                devices: p,
            });
        }
    }
    Ok(())
}

/// Warm-up forward steps of device `d` of `p` (module doc): the steps before its first
/// backward. GPipe: all `m`.
pub fn warmup_steps(schedule: Schedule, p: usize, m: usize, d: usize) -> usize {
    match schedule {
        Schedule::GPipe => m,
        Schedule::OneFOneB => (p - d - 1).min(m),
        Schedule::Interleaved { chunks: v } => {
            let total = m * v;
            if m == p {
                total
            } else {
                (2 * (p - d - 1) + (v - 1) * p).min(total)
            }
        }
    }
}

/// The order of device `d` (0-based) of a pipeline of `p` devices and `m` micro-batches.
///
/// Complexity O(m·v).
pub fn device_order(
    schedule: Schedule,
    p: usize,
    m: usize,
    d: usize,
) -> Result<Vec<Step>, ScheduleError> {
    check(schedule, p, m)?;
    let total = m * schedule.chunks();
    let w = warmup_steps(schedule, p, m, d);
    let mut order = Vec::with_capacity(2 * total);
    order.extend((0..w).map(|k| forward_step(schedule, p, k)));
    for j in 0..total - w {
        order.push(forward_step(schedule, p, w + j));
        order.push(backward_step(schedule, p, j));
    }
    order.extend((total - w..total).map(|k| backward_step(schedule, p, k)));
    Ok(order)
}

/// Device `d`'s order with whole periods of its steady state left out: every held state
/// the full order passes through, in O(w_d + p·v) steps instead of O(m·v).
///
/// **Why it is exact.** Write `n_k ∈ ℕ^v` for the stashes held per chunk after step `k`
/// of [`device_order`]. In the steady state the `j`-th pair is `F(w + j), B(j)`; the
/// `k`-th forward runs chunk `⌊(k mod pv)/p⌋` and the `k`-th backward chunk
/// `v − 1 − ⌊(k mod pv)/p⌋`, so any `pv` consecutive forwards (or backwards) run every
/// chunk exactly `p` times. Hence `pv` consecutive pairs change no count, and the state
/// before pair `j + pv` equals the state before pair `j`. With `s = mv − w` steady pairs
/// and `s ≥ 2pv`, leaving out pairs `pv … pv·⌊s/pv⌋ − 1` (whole periods) keeps every
/// later state as it was and every left-out pair's (step chunk, state before, state
/// after) equals that of the kept pair `j mod pv`. So the set of (chunk, held vector)
/// pairs at forwards and at backwards, the peak of any weighted sum of the held vector,
/// and the warm-up and cool-down are the full order's. Checked against the full replay
/// in the tests (`compressed_orders_pass_through_every_state`).
///
/// Steps keep their full order's micro-batch and chunk labels. Length at most
/// `2w + 4pv`.
pub fn compressed_order(
    schedule: Schedule,
    p: usize,
    m: usize,
    d: usize,
) -> Result<Vec<Step>, ScheduleError> {
    check(schedule, p, m)?;
    let v = schedule.chunks();
    let period = p.saturating_mul(v);
    let total = m.saturating_mul(v);
    let w = warmup_steps(schedule, p, m, d);
    let steady = total - w;
    let skipped = if steady >= 2 * period {
        (steady / period - 1) * period
    } else {
        0
    };
    let kept = |j: usize| j < period || j >= period + skipped;
    let mut order = Vec::with_capacity(2 * (w + steady - skipped));
    order.extend((0..w).map(|k| forward_step(schedule, p, k)));
    for j in (0..steady).filter(|&j| kept(j)) {
        order.push(forward_step(schedule, p, w + j));
        order.push(backward_step(schedule, p, j));
    }
    order.extend((steady..total).map(|k| backward_step(schedule, p, k)));
    Ok(order)
}

/// The `k`-th forward step of a device's order (module doc).
fn forward_step(schedule: Schedule, p: usize, k: usize) -> Step {
    match schedule {
        Schedule::Interleaved { chunks: v } => Step {
            pass: Pass::Forward,
            micro_batch: (k / (p * v)) * p + k % p,
            chunk: (k % (p * v)) / p,
        },
        _ => Step {
            pass: Pass::Forward,
            micro_batch: k,
            chunk: 0,
        },
    }
}

/// The `k`-th backward step: the `k`-th forward's micro-batch, chunk `v − 1 − c`.
fn backward_step(schedule: Schedule, p: usize, k: usize) -> Step {
    let f = forward_step(schedule, p, k);
    Step {
        pass: Pass::Backward,
        micro_batch: f.micro_batch,
        chunk: schedule.chunks() - 1 - f.chunk,
    }
}

/// Most stashes device `d` holds at once (module doc): GPipe `m`, 1F1B `min(m, p − d)`,
/// interleaved `min(w_d + 1, mv)` chunk-stashes.
pub fn in_flight(schedule: Schedule, p: usize, m: usize, d: usize) -> usize {
    let total = m * schedule.chunks();
    (warmup_steps(schedule, p, m, d) + 1).min(total)
}

/// Most stashes one *replica* of stage `s` holds at once in a parallel layout whose stages
/// may have different DP degrees (`crate::simulate::parallel`'s schedule): stage `s` has
/// `d_s` replicas, each running `m_s` micro-batches (`M = m_s·d_s` global micro-batches,
/// global micro-batch `i` on replica `i mod d_s`), and `suffix_replicas = Σ_{j ≥ s} d_j`.
///
/// - GPipe: `m_s`.
/// - 1F1B: `min(m_s, ⌈Σ_{j≥s} d_j / d_s⌉)`. Stage `s` runs one sequence over the global
///   micro-batches with a warm-up of `K_s = min(M, Σ_{j≥s} d_j)` forwards, then `B(j)`,
///   `F(K_s + j)` pairs. After the warm-up and after each pair, the micro-batches in flight
///   on stage `s` are the window `j < i ≤ j + K_s` (warm-up: `0 ≤ i < K_s`) of `K_s`
///   consecutive global indices, of which replica `r` holds those `≡ r (mod d_s)`: at most
///   `⌈K_s/d_s⌉`, reached by replica 0 at the end of the warm-up; between `B(j)` and
///   `F(K_s + j)` it holds fewer. `d_s | M`, so `⌈min(M, S)/d_s⌉ = min(m_s, ⌈S/d_s⌉)`. With
///   one `d` for every stage, `Σ_{j≥s} d_j = d·(p − s)` and this is [`in_flight`]'s
///   `min(m, p − s)`.
/// - Interleaved: `m_s·v`, every chunk-stash (an upper bound; interleaved 3D layouts have
///   one `d`, and `crate::score::parallel::interleaved` counts their stash exactly with
///   [`in_flight`] and [`peak_stash_bytes`]).
pub fn replica_in_flight(
    schedule: Schedule,
    micro_batches: usize,
    data_parallel: usize,
    suffix_replicas: usize,
) -> usize {
    match schedule {
        Schedule::OneFOneB => micro_batches.min(suffix_replicas.div_ceil(data_parallel.max(1))),
        Schedule::GPipe => micro_batches,
        Schedule::Interleaved { chunks } => micro_batches * chunks,
    }
}

/// Peak stash of device `d`, bytes, when chunk `c` stashes `chunk_stash_bytes[c]` per
/// micro-batch: the maximum over the device's order of the stashes held, a stash counted
/// from the start of its forward to the end of its backward.
pub fn peak_stash_bytes(
    schedule: Schedule,
    p: usize,
    m: usize,
    d: usize,
    chunk_stash_bytes: &[f64],
) -> Result<f64, ScheduleError> {
    let mut held = 0.0;
    let mut peak: f64 = 0.0;
    for step in compressed_order(schedule, p, m, d)? {
        let a = chunk_stash_bytes.get(step.chunk).copied().unwrap_or(0.0);
        match step.pass {
            Pass::Forward => {
                held += a;
                peak = peak.max(held);
            }
            Pass::Backward => held -= a,
        }
    }
    Ok(peak)
}

/// Planning under a schedule (`plan --schedule S --micro-batches m`): a stage at position
/// `s` (0-based from the first) of a chain of `p` stages holds `size + (c − 1)·A` bytes,
/// `c = in_flight(S, p, m, s)` ([`in_flight`]): GPipe `m` wherever the stage is, 1F1B
/// `min(m, p − s)`, a count that depends only on the position from the end, `p − s`.
/// With `recompute` a stage may hold its inputs instead of its stash and run its forward
/// pass again ([`crate::model::recompute`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pipeline {
    pub schedule: Schedule,
    /// `m ≥ 1`.
    pub micro_batches: usize,
    /// Whether the planner may let stages recompute their activations (`--recompute`).
    pub recompute: Recompute,
}

impl Pipeline {
    /// `schedule` with `micro_batches` and no recomputation.
    pub fn new(schedule: Schedule, micro_batches: usize) -> Pipeline {
        Pipeline {
            schedule,
            micro_batches,
            recompute: Recompute::None,
        }
    }

    /// Whether a stage's cost depends on more than per-node sizes: its position (1F1B with
    /// m > 1), or a choice to recompute (with more than one micro-batch in flight; with one,
    /// recomputing never helps, [`crate::model::recompute`]).
    pub fn needs_positions(&self) -> bool {
        self.depends_on_position()
            || (self.recompute == Recompute::Auto && self.uniform_in_flight() > 1)
    }

    /// Stashes in flight at stage `s` (0-based) of a chain of `p` stages.
    pub fn in_flight(&self, p: usize, s: usize) -> usize {
        in_flight(self.schedule, p, self.micro_batches, s)
    }

    /// Whether the count depends on the stage's position (1F1B with m > 1); otherwise every
    /// stage holds [`Pipeline::uniform_in_flight`].
    pub fn depends_on_position(&self) -> bool {
        self.schedule == Schedule::OneFOneB && self.micro_batches > 1
    }

    /// The count of a schedule whose count does not depend on the position: `m` for
    /// GPipe, 1 for 1F1B with one micro-batch.
    pub fn uniform_in_flight(&self) -> usize {
        match self.schedule {
            Schedule::GPipe => self.micro_batches,
            _ => 1,
        }
    }

    /// Every node's bytes with `c` stashes in flight: `size + (c − 1)·A` (the bytes of
    /// [`held_bytes`] with the stash counted `c` times).
    pub fn node_bytes(w: &Workload, c: usize) -> Vec<f64> {
        held_bytes(w)
            .iter()
            .map(|h| stage_memory_bytes(h.resident_bytes, h.stash_bytes, c.max(1)))
            .collect()
    }
}

/// Memory of a stage: `resident + stash·in_flight` bytes.
pub fn stage_memory_bytes(resident_bytes: f64, stash_bytes: f64, in_flight: usize) -> f64 {
    resident_bytes + stash_bytes * in_flight as f64
}

/// How a node's bytes behave under a schedule: held for the whole run, or once per
/// micro-batch in flight.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct HeldBytes {
    /// Held throughout: weights, gradients, optimizer state, working buffers.
    pub resident_bytes: f64,
    /// Held once per micro-batch in flight: the activations stashed for the backward pass.
    pub stash_bytes: f64,
}

/// Every node's [`HeldBytes`], the one place where the workload's memory figures meet the
/// schedule: `stash = A(v)` (`activationBytes`, [`crate::model::memory`]) and
/// `resident = size(v) − A(v)`, so that `resident + stash · in_flight` is the cost model's
/// `size + (in_flight − 1)·A`, and one micro-batch in flight is `size`. A node without
/// memory parts (the published workloads) is all resident: MODEL.md's model.
pub fn held_bytes(w: &Workload) -> Vec<HeldBytes> {
    w.nodes()
        .iter()
        .map(|n| {
            let stash = n
                .memory
                .map_or(0.0, |m| m.activation_bytes)
                .min(n.size_bytes);
            HeldBytes {
                resident_bytes: n.size_bytes - stash,
                stash_bytes: stash,
            }
        })
        .collect()
}

/// Start slots of every task when the schedule runs on its chain of stages with unit
/// task times (module doc).
#[derive(Clone, Debug)]
pub struct Timetable {
    stages: usize,
    micro_batches: usize,
    forward: Vec<usize>,
    backward: Vec<usize>,
}

impl Timetable {
    /// The slot of a task; `stage < stages`, `micro_batch < micro_batches`.
    pub fn slot(&self, pass: Pass, micro_batch: usize, stage: usize) -> usize {
        let i = stage * self.micro_batches + micro_batch;
        match pass {
            Pass::Forward => self.forward[i],
            Pass::Backward => self.backward[i],
        }
    }
    pub fn stages(&self) -> usize {
        self.stages
    }
    /// Slots until the last task ends.
    pub fn length(&self) -> usize {
        self.backward.iter().max().map_or(0, |&s| s + 1)
    }
}

/// The unit-time timetable of `schedule` on a chain of `stages` stages (`stages / v`
/// devices) and `m` micro-batches.
pub fn timetable(schedule: Schedule, stages: usize, m: usize) -> Result<Timetable, ScheduleError> {
    if stages == 0 {
        return Err(ScheduleError::NoStages);
    }
    let v = schedule.chunks();
    if !stages.is_multiple_of(v) {
        return Err(ScheduleError::StagesNotDivisible {
            schedule,
            stages,
            chunks: v,
        });
    }
    let p = stages / v;
    let orders: Vec<Vec<Step>> = (0..p)
        .map(|d| device_order(schedule, p, m, d))
        .collect::<Result<_, _>>()?;
    const NOT_YET: usize = usize::MAX;
    let mut forward = vec![NOT_YET; stages * m];
    let mut backward = vec![NOT_YET; stages * m];
    let mut next = vec![0usize; p];
    let mut left: usize = orders.iter().map(Vec::len).sum();
    let mut slot = 0;
    while left > 0 {
        let mut started = false;
        for d in 0..p {
            let Some(step) = orders[d].get(next[d]) else {
                continue;
            };
            let s = step.chunk * p + d;
            let i = step.micro_batch;
            // A task that started at slot t ends at t + 1: its dependant may start at t + 1.
            let done = |x: usize| x != NOT_YET && x < slot;
            let ready = match step.pass {
                Pass::Forward => s == 0 || done(forward[(s - 1) * m + i]),
                Pass::Backward if s + 1 == stages => done(forward[s * m + i]),
                Pass::Backward => done(backward[(s + 1) * m + i]),
            };
            if ready {
                match step.pass {
                    Pass::Forward => forward[s * m + i] = slot,
                    Pass::Backward => backward[s * m + i] = slot,
                }
                next[d] += 1;
                left -= 1;
                started = true;
            }
        }
        // Tasks end one slot after they start, so a slot that starts nothing changes
        // nothing: every later slot would start nothing either.
        if !started {
            return Err(ScheduleError::Deadlock { schedule, slot });
        }
        slot += 1;
    }
    Ok(Timetable {
        stages,
        micro_batches: m,
        forward,
        backward,
    })
}

/// Plans that cut one topological order of the groups into `T = p·v` consecutive stages
/// (every prefix of a topological order is an ideal), stage t on chunk `⌊t/p⌋` of
/// accelerator `t mod p`: one cut balancing the accelerator time, one balancing the
/// bytes. Heuristic warm starts, O(U·T); the caller scores them.
pub fn split_plans(units: &Grouping, p: usize, v: usize) -> Vec<Placement> {
    let stages = p * v;
    let weights: [Box<dyn Fn(usize) -> f64>; 2] = [
        Box::new(|g| units[g].fpga_latency),
        Box::new(|g| units[g].size_bytes),
    ];
    weights
        .iter()
        .map(|weight| {
            let total: f64 = (0..units.len()).map(weight).sum();
            let mut stage_of = vec![0usize; units.len()];
            let mut before = 0.0;
            for (g, stage) in stage_of.iter_mut().enumerate() {
                // The stage whose share of the total holds the group's midpoint.
                let mid = before + weight(g) / 2.0;
                *stage = if total > 0.0 {
                    ((mid / total * stages as f64) as usize).min(stages - 1)
                } else {
                    g * stages / units.len().max(1)
                };
                before += weight(g);
            }
            let device: Vec<Device> = stage_of
                .iter()
                .map(|&t| Device::Accelerator(t % p))
                .collect();
            let mut chunks = vec![0; units.group_of.len()];
            for (g, group) in units.groups.iter().enumerate() {
                for &x in &group.nodes {
                    chunks[x] = stage_of[g] / p;
                }
            }
            units.placement(&device).with_pieces(chunks)
        })
        .collect()
}

/// The maximal vectors `n` of stashes held per chunk after a forward step of device `d`'s
/// order (the interleaved IP's memory rows, [`crate::solve::milp::interleaved`]): every vector that no other one dominates componentwise. The
/// compressed order ([`compressed_order`]) passes through every state of the full one, and
/// a vector can only be dominated by one of larger sum, so each is compared with those
/// alone (in the steady state every forward follows a backward: all share one sum).
pub fn stash_vectors(
    pipeline: &Pipeline,
    p: usize,
    d: usize,
) -> Result<Vec<Vec<usize>>, ScheduleError> {
    let v = pipeline.schedule.chunks();
    let mut held = vec![0usize; v];
    let mut seen: Vec<Vec<usize>> = Vec::new();
    let mut known: std::collections::HashSet<Vec<usize>> = Default::default();
    for step in compressed_order(pipeline.schedule, p, pipeline.micro_batches, d)? {
        match step.pass {
            Pass::Forward => {
                held[step.chunk] += 1;
                if known.insert(held.clone()) {
                    seen.push(held.clone());
                }
            }
            Pass::Backward => held[step.chunk] -= 1,
        }
    }
    let sum = |a: &Vec<usize>| a.iter().sum::<usize>();
    let dominated = |a: &Vec<usize>, b: &Vec<usize>| a.iter().zip(b).all(|(x, y)| x <= y);
    let mut by_sum: Vec<(usize, &Vec<usize>)> = seen.iter().map(|a| (sum(a), a)).collect();
    by_sum.sort_by_key(|x| std::cmp::Reverse(x.0));
    let mut kept: Vec<Vec<usize>> = Vec::new();
    for (i, &(s, a)) in by_sum.iter().enumerate() {
        let larger = by_sum[..i].iter().take_while(|(t, _)| *t > s);
        if !larger.clone().any(|(_, b)| dominated(a, b)) {
            kept.push(a.clone());
        }
    }
    // The order of first appearance, as before.
    let first: std::collections::HashMap<&Vec<usize>, usize> =
        seen.iter().enumerate().map(|(i, a)| (a, i)).collect();
    kept.sort_by_key(|a| first[a]);
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        for text in ["gpipe", "1f1b", "interleaved:3"] {
            let s: Schedule = text.parse().unwrap();
            assert_eq!(s.to_string(), text);
        }
        assert_eq!(
            "interleaved".parse::<Schedule>().unwrap(),
            Schedule::Interleaved { chunks: 2 }
        );
        assert!("interleaved:1"
            .parse::<Schedule>()
            .unwrap_err()
            .contains("at least 2"));
        assert!("zigzag"
            .parse::<Schedule>()
            .unwrap_err()
            .contains("unknown schedule"));
    }

    /// The compressed order passes through exactly the states of the full one: the same
    /// set of (pass, chunk, held vector before, held vector after), and at most
    /// `2w + 4pv` steps (the full replay is the oracle).
    #[test]
    fn compressed_orders_pass_through_every_state() {
        type States = std::collections::HashSet<(Pass, usize, Vec<usize>, Vec<usize>)>;
        let states = |order: &[Step], v: usize| -> States {
            let mut held = vec![0usize; v];
            let mut out = States::new();
            for st in order {
                let before = held.clone();
                match st.pass {
                    Pass::Forward => held[st.chunk] += 1,
                    Pass::Backward => held[st.chunk] -= 1,
                }
                out.insert((st.pass, st.chunk, before, held.clone()));
            }
            out
        };
        let mut shortened = 0;
        for schedule in [
            Schedule::GPipe,
            Schedule::OneFOneB,
            Schedule::Interleaved { chunks: 2 },
            Schedule::Interleaved { chunks: 3 },
            Schedule::Interleaved { chunks: 5 },
        ] {
            let v = schedule.chunks();
            for p in 1..6 {
                for m in (1..=14).map(|k| k * p) {
                    for d in 0..p {
                        let full = device_order(schedule, p, m, d).unwrap();
                        let short = compressed_order(schedule, p, m, d).unwrap();
                        assert_eq!(
                            states(&full, v),
                            states(&short, v),
                            "{schedule} p={p} m={m} d={d}"
                        );
                        let w = warmup_steps(schedule, p, m, d);
                        assert!(short.len() <= 2 * w + 4 * p * v, "{schedule} p={p} m={m}");
                        let a: Vec<f64> = (0..v).map(|c| (c * 7 % 5 + 1) as f64).collect();
                        let replay = |order: &[Step]| {
                            let (mut held, mut peak) = (0.0f64, 0.0f64);
                            for st in order {
                                match st.pass {
                                    Pass::Forward => {
                                        held += a[st.chunk];
                                        peak = peak.max(held);
                                    }
                                    Pass::Backward => held -= a[st.chunk],
                                }
                            }
                            peak
                        };
                        assert_eq!(
                            peak_stash_bytes(schedule, p, m, d, &a).unwrap(),
                            replay(&full)
                        );
                        shortened += usize::from(short.len() < full.len());
                    }
                }
            }
        }
        assert!(shortened > 100, "{shortened}");
        // m = 2^20 micro-batches of interleaved:256 on 4 devices: 2^29 steps in full.
        let long = compressed_order(Schedule::Interleaved { chunks: 256 }, 4, 1 << 20, 0).unwrap();
        assert!(
            long.len() <= 2 * (2 * 3 + 255 * 4) + 4 * 4 * 256,
            "{}",
            long.len()
        );
    }

    /// Every device's order runs each (pass, micro-batch, chunk) exactly once, and a
    /// chunk's backward of a micro-batch comes after its forward.
    #[test]
    fn orders_are_permutations() {
        for schedule in [
            Schedule::GPipe,
            Schedule::OneFOneB,
            Schedule::Interleaved { chunks: 2 },
            Schedule::Interleaved { chunks: 3 },
        ] {
            for p in 1..6 {
                for m in [p, 2 * p, 3 * p + usize::from(schedule.chunks() == 1)] {
                    let v = schedule.chunks();
                    for d in 0..p {
                        let order = device_order(schedule, p, m, d).unwrap();
                        assert_eq!(order.len(), 2 * m * v);
                        let mut seen = std::collections::HashSet::new();
                        for (k, st) in order.iter().enumerate() {
                            assert!(
                                seen.insert((st.pass, st.micro_batch, st.chunk)),
                                "{schedule} p={p} m={m} d={d}: {st:?} twice"
                            );
                            if st.pass == Pass::Backward {
                                let f = order.iter().position(|x| {
                                    x.pass == Pass::Forward
                                        && x.micro_batch == st.micro_batch
                                        && x.chunk == st.chunk
                                });
                                assert!(f.is_some_and(|f| f < k));
                            }
                        }
                    }
                }
            }
        }
    }

    /// One `d` for every stage: the per-replica count is the pipeline's.
    #[test]
    fn replica_in_flight_reduces_to_in_flight_with_one_d() {
        for p in 1..7 {
            for m in 1..12 {
                for d in 1..5 {
                    for s in 0..p {
                        for sch in [Schedule::GPipe, Schedule::OneFOneB] {
                            assert_eq!(
                                replica_in_flight(sch, m, d, d * (p - s)),
                                in_flight(sch, p, m, s)
                            );
                        }
                    }
                }
            }
        }
        // A stage of 2 replicas feeding one of 4 (M = 8): warm-up K = min(8, 6) = 6, the
        // window 0..6 holds 0, 2, 4 on replica 0: 3 stashes, not min(4, p − s) = 2.
        assert_eq!(replica_in_flight(Schedule::OneFOneB, 4, 2, 6), 3);
    }

    /// The textbook in-flight counts, and that the replayed peak agrees with them on
    /// uniform chunks.
    #[test]
    fn in_flight_counts() {
        for p in 1..7 {
            for m in 1..12 {
                for d in 0..p {
                    assert_eq!(in_flight(Schedule::GPipe, p, m, d), m);
                    assert_eq!(in_flight(Schedule::OneFOneB, p, m, d), m.min(p - d));
                    for s in [Schedule::GPipe, Schedule::OneFOneB] {
                        let peak = peak_stash_bytes(s, p, m, d, &[3.0]).unwrap();
                        assert_eq!(peak, 3.0 * in_flight(s, p, m, d) as f64);
                    }
                }
            }
        }
        for v in 2..4 {
            for p in 1..5 {
                for m in [p, 2 * p, 4 * p] {
                    for d in 0..p {
                        let s = Schedule::Interleaved { chunks: v };
                        let peak = peak_stash_bytes(s, p, m, d, &vec![1.0; v]).unwrap();
                        assert_eq!(
                            peak,
                            in_flight(s, p, m, d) as f64,
                            "v={v} p={p} m={m} d={d}"
                        );
                    }
                }
            }
        }
    }

    /// The unit timetable of GPipe and 1F1B on p stages lasts 2(m + p − 1) slots (the
    /// textbook bubble of p − 1 forward and p − 1 backward slots), and respects the chain.
    #[test]
    fn timetable_lengths_and_dependencies() {
        for s in [Schedule::GPipe, Schedule::OneFOneB] {
            for p in 1..6 {
                for m in 1..9 {
                    let t = timetable(s, p, m).unwrap();
                    assert_eq!(t.length(), 2 * (m + p - 1), "{s} p={p} m={m}");
                    for i in 0..m {
                        for st in 1..p {
                            assert!(
                                t.slot(Pass::Forward, i, st - 1) < t.slot(Pass::Forward, i, st)
                            );
                            assert!(
                                t.slot(Pass::Backward, i, st) < t.slot(Pass::Backward, i, st - 1)
                            );
                        }
                        assert!(t.slot(Pass::Forward, i, p - 1) < t.slot(Pass::Backward, i, p - 1));
                    }
                }
            }
        }
        for v in 2..4 {
            for p in 1..5 {
                for m in [p, 2 * p, 3 * p] {
                    let t = timetable(Schedule::Interleaved { chunks: v }, p * v, m).unwrap();
                    for i in 0..m {
                        for st in 1..p * v {
                            assert!(
                                t.slot(Pass::Forward, i, st - 1) < t.slot(Pass::Forward, i, st)
                            );
                            assert!(
                                t.slot(Pass::Backward, i, st) < t.slot(Pass::Backward, i, st - 1)
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn bad_sizes() {
        assert_eq!(
            device_order(Schedule::GPipe, 2, 0, 0).unwrap_err(),
            ScheduleError::NoMicroBatches
        );
        assert!(matches!(
            timetable(Schedule::Interleaved { chunks: 2 }, 5, 4).unwrap_err(),
            ScheduleError::StagesNotDivisible { .. }
        ));
        assert!(matches!(
            timetable(Schedule::Interleaved { chunks: 2 }, 4, 3).unwrap_err(),
            ScheduleError::MicroBatchesNotDivisible { .. }
        ));
    }
}

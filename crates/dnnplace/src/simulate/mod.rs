//! A discrete-event simulation of a plan running a pipeline schedule over `m`
//! micro-batches.
//!
//! **Tasks.** The plan is cut into pieces ([`stages`]): on a contiguous plan, one forward
//! and one backward piece per device; a non-contiguous plan gets more, ordered by their
//! data dependencies. Each piece runs one task per micro-batch `i`: receive its inputs
//! from other devices, compute (Σ `fpgaLatency` on an accelerator, Σ `cpuLatency` on a
//! CPU core), send its outputs — all on its device, because MODEL.md does not overlap
//! communication with compute. A task starts when the tasks of micro-batch `i` it reads
//! from have ended (a transfer goes through host memory: the sender's task ends, then the
//! receiver's starts) and its device is free. Per micro-batch a device's tasks take
//! exactly its MODEL.md load `L_d` (checked against the scorer), so the paper's
//! accounting is the special case of one micro-batch in a pipeline that never drains.
//!
//! **Order.** Each device runs its tasks in the schedule's order
//! ([`crate::model::schedule`]): a piece at chain position `s` runs `F(i, s)` or
//! `B(i, s)`, and a device sorts its tasks by the slot the schedule's unit timetable gives
//! them (then pass, micro-batch, piece). On a chain of one piece pair per device this is
//! exactly GPipe's, 1F1B's or Megatron's interleaved order. The slot order is a linear
//! extension of all dependencies (positions rise along forward arcs and fall along
//! backward ones), so the simulation cannot deadlock. Inference graphs (no backward node)
//! run a plain pipeline: each device takes its micro-batches in order.
//!
//! **Events.** A priority queue of task ends ([`engine`]); each end frees its device,
//! counts down its successors and starts whatever became ready. Memory per device is
//! resident bytes plus each micro-batch's stash, held by the forward task that produces it
//! until the backward tasks that mirror it end (see [`stages`]).
//!
//! **Results.** Iteration time `T` (last end), busy time per device (`m·L_d`), bubble
//! fraction `1 − Σ_d m·L_d / (D·T)` over the `D` devices in use, peak memory per device
//! over time, time per sample `T / m`. [`bounds`] proves `T ≥ m·TPS` (and sharper) and
//! `T ≤ m·Σ_d L_d`; for a chain of `p` equal stages of forward time `f` and backward
//! time `b`, GPipe and 1F1B give `T = (m + p − 1)(f + b)`: bubble `(p − 1)/(m + p − 1)`.
//!
//! **3D layouts** ([`parallel`]): a parallel layout's replicas run as lanes of stage
//! tasks and its DP syncs as tasks after each stage's last backward, on the same loop.
//!
//! Complexity: O(n + m_E) to cut, O(K log K) to run for K = pieces × m tasks.

pub mod bounds;
mod engine;
pub mod parallel;
pub mod stages;

pub use engine::TaskRun;
pub use stages::{Piece, Stages};

use crate::model::schedule::{held_bytes, timetable, HeldBytes, Pass, Schedule, ScheduleError};
use crate::model::{Device, Placement, Workload};
use crate::score::{
    contiguity_violations, device_loads, max_load, sync_objective, violations, DeviceLoad,
    Evaluation,
};

/// The most tasks (pieces × micro-batches) one simulation runs.
pub const MAX_TASKS: usize = 20_000_000;

/// What to simulate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settings {
    pub schedule: Schedule,
    /// m ≥ 1.
    pub micro_batches: usize,
}

/// One device over the run.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceRun {
    pub device: Device,
    /// Its MODEL.md load: task time per micro-batch.
    pub load_ms: f64,
    /// `m · load`.
    pub busy_ms: f64,
    /// The compute part of `busy_ms` (a recomputed forward pass included).
    pub compute_ms: f64,
    /// The communication part of `busy_ms` (receives and sends).
    pub communication_ms: f64,
    /// `1 − busy / T`.
    pub idle_fraction: f64,
    /// Weights and other memory held throughout, bytes.
    pub resident_bytes: f64,
    /// The most memory held at any time, bytes.
    pub peak_memory_bytes: f64,
    /// Memory over time: `(time_ms, bytes)` steps, the first at 0.
    pub memory: Vec<(f64, f64)>,
    /// The accelerator's memory, bytes (`None` for a CPU core).
    pub memory_limit_bytes: Option<f64>,
    /// Number of pieces.
    pub pieces: usize,
}

/// A finished simulation.
#[derive(Clone, Debug)]
pub struct Simulation {
    /// The schedule asked for.
    pub schedule: Schedule,
    pub micro_batches: usize,
    /// Whether the graph has backward nodes (otherwise a plain pipeline ran).
    pub training: bool,
    pub stages: Stages,
    /// Every task, in start order.
    pub tasks: Vec<TaskRun>,
    /// Devices holding nodes, accelerators first.
    pub devices: Vec<DeviceRun>,
    /// `T`: when the last task ends.
    pub iteration_ms: f64,
    /// When micro-batch 0's last task ends.
    pub first_completion_ms: f64,
    /// `T / m`: fill and drain included.
    pub time_per_sample_ms: f64,
    /// `(T(m) − T(m')) / (m − m')` for `m' = ⌊m/2⌋` (interleaved: the largest multiple of
    /// the device count not above it): what one more micro-batch costs once the pipeline
    /// is full. It tends to TPS for 1F1B and plain pipelines; GPipe's stays above TPS,
    /// as it drains between its phases. `None` when `m' = 0`.
    pub steady_time_per_sample_ms: Option<f64>,
    /// `1 − Σ busy / (D · T)`.
    pub bubble_fraction: f64,
    /// The plan's TPS (the scorer's maximum load) and its device.
    pub max_load_ms: f64,
    pub bottleneck: Option<Device>,
    /// Proven bounds on `T` ([`bounds`]).
    pub lower_bound_ms: f64,
    pub upper_bound_ms: f64,
    /// What the simulation assumed or adapted, for people.
    pub notes: Vec<String>,
}

impl Simulation {
    /// Index into [`Simulation::devices`] of a piece's device.
    pub fn device_index(&self, piece: usize) -> usize {
        let d = self.stages.pieces[piece].device;
        self.devices
            .iter()
            .position(|x| x.device == d)
            .expect("every piece's device is listed")
    }
}

/// Why a plan cannot be simulated.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    #[error("the plan is not valid for this workload: {0}")]
    InvalidPlan(String),
    #[error("{0}")]
    Schedule(#[from] ScheduleError),
    #[error("{tasks} tasks ({pieces} pieces x {micro_batches} micro-batches) is more than the {MAX_TASKS} one simulation runs; use fewer micro-batches")]
    TooLarge {
        tasks: usize,
        pieces: usize,
        micro_batches: usize,
    },
    #[error("internal check failed: {0}")]
    Check(String),
}

/// Simulates `p` on `w` with each node's memory from [`held_bytes`].
pub fn simulate(
    w: &Workload,
    p: &Placement,
    settings: &Settings,
) -> Result<Simulation, SimulateError> {
    simulate_with_memory(w, p, settings, &held_bytes(w))
}

/// Simulates `p` on `w`, node `v` holding `memory[v]`: checks the plan, cuts it into
/// pieces, runs `m` micro-batches (and about `m/2` for the steady state), and sums up
/// each device's run.
pub fn simulate_with_memory(
    w: &Workload,
    p: &Placement,
    settings: &Settings,
    memory: &[HeldBytes],
) -> Result<Simulation, SimulateError> {
    let m = settings.micro_batches;
    check_inputs(w, p, memory, m)?;
    let mut notes = Vec::new();
    let scored_loads = device_loads(w, p);
    let (max_load_ms, bottleneck) = max_load(&scored_loads);
    let stages = cut_for(w, p, memory, settings.schedule, &mut notes);
    let tasks = stages.pieces.len().saturating_mul(m);
    if tasks > MAX_TASKS {
        return Err(SimulateError::TooLarge {
            tasks,
            pieces: stages.pieces.len(),
            micro_batches: m,
        });
    }
    let training = stages.pieces.iter().any(|x| x.pass == Pass::Backward);
    let played = if training {
        settings.schedule
    } else {
        notes.push(format!(
            "no backward nodes: a plain pipeline of {m} micro-batches ran (the {} schedule orders training passes)",
            settings.schedule
        ));
        Schedule::GPipe
    };
    if let Some(note) = interleaving_note(&stages, played) {
        notes.push(note);
    }
    if !p.recompute.is_empty() {
        let list: Vec<String> = p.recompute.iter().map(Device::to_string).collect();
        notes.push(format!(
            "{} recompute{} activations: between the passes only the inputs are held; the forward pass runs again at the start of the backward one",
            list.join(", "),
            if list.len() == 1 { "s its" } else { " their" }
        ));
    }

    let devices = DeviceSet::new(p, &stages, memory);
    let (load, compute) = devices.loads(&stages, &scored_loads)?;
    let run = devices.play(&stages, played, m)?;
    let steady_time_per_sample_ms = steady_time_per_sample(&stages, played, m, &devices, &run)?;
    let iteration_ms = last_end(&run);
    let first_completion_ms = run
        .tasks
        .iter()
        .filter(|t| t.micro_batch == 0)
        .map(|t| t.end_ms)
        .fold(0.0, f64::max);
    let (lower_bound_ms, upper_bound_ms) = bounds::iteration_bounds(&stages, m, &devices.device_of);
    let mf = m as f64;
    let device_runs: Vec<DeviceRun> = devices
        .devices
        .iter()
        .enumerate()
        .map(|(d, &device)| {
            let busy = mf * load[d];
            DeviceRun {
                device,
                load_ms: load[d],
                busy_ms: busy,
                compute_ms: mf * compute[d],
                communication_ms: mf * (load[d] - compute[d]),
                idle_fraction: if iteration_ms > 0.0 {
                    1.0 - busy / iteration_ms
                } else {
                    0.0
                },
                resident_bytes: devices.resident[d],
                peak_memory_bytes: run.memory[d].iter().map(|&(_, b)| b).fold(0.0, f64::max),
                memory: run.memory[d].clone(),
                memory_limit_bytes: device
                    .is_accelerator()
                    .then_some(w.devices().memory_per_accelerator_bytes),
                pieces: devices.device_of.iter().filter(|&&x| x == d).count(),
            }
        })
        .collect();
    let busy_total: f64 = device_runs.iter().map(|d| d.busy_ms).sum();
    let bubble_fraction = if iteration_ms > 0.0 {
        1.0 - busy_total / (device_runs.len() as f64 * iteration_ms)
    } else {
        0.0
    };
    Ok(Simulation {
        schedule: settings.schedule,
        micro_batches: m,
        training,
        stages,
        tasks: run.tasks,
        devices: device_runs,
        iteration_ms,
        first_completion_ms,
        time_per_sample_ms: iteration_ms / mf,
        steady_time_per_sample_ms,
        bubble_fraction,
        max_load_ms,
        bottleneck,
        lower_bound_ms,
        upper_bound_ms,
        notes,
    })
}

/// The errors found before simulating: no micro-batch, a plan that breaks the scorer's
/// rules (the first rule named, with how many more), a memory list of the wrong length.
fn check_inputs(
    w: &Workload,
    p: &Placement,
    memory: &[HeldBytes],
    m: usize,
) -> Result<(), SimulateError> {
    if m == 0 {
        return Err(ScheduleError::NoMicroBatches.into());
    }
    // The scorer's rules and loads; not its single-sample latency, which a pipeline does
    // not need (and whose greedy cut is quadratic on large training graphs).
    let broken = violations(w, p, true);
    if let Some(v) = broken.first() {
        let more = broken.len() - 1;
        let tail = if more > 0 {
            format!(" (and {more} more)")
        } else {
            String::new()
        };
        return Err(SimulateError::InvalidPlan(format!("{v}{tail}")));
    }
    if memory.len() != w.len() {
        return Err(SimulateError::Check(format!(
            "{} memory entries for {} nodes",
            memory.len(),
            w.len()
        )));
    }
    Ok(())
}

/// The devices that run pieces, accelerators first, with each piece's device and each
/// device's resident memory.
struct DeviceSet {
    devices: Vec<Device>,
    /// Index into `devices` of every piece.
    device_of: Vec<usize>,
    /// Σ resident bytes of the nodes on each device.
    resident: Vec<f64>,
}

impl DeviceSet {
    fn new(p: &Placement, stages: &Stages, memory: &[HeldBytes]) -> DeviceSet {
        let mut devices: Vec<Device> = stages.pieces.iter().map(|x| x.device).collect();
        devices.sort();
        devices.dedup();
        let device_of: Vec<usize> = stages
            .pieces
            .iter()
            .map(|x| devices.binary_search(&x.device).expect("listed"))
            .collect();
        let mut resident = vec![0.0; devices.len()];
        for (v, mem) in memory.iter().enumerate() {
            resident[devices
                .binary_search(&p.assignment[v])
                .expect("every node is on a listed device")] += mem.resident_bytes;
        }
        DeviceSet {
            devices,
            device_of,
            resident,
        }
    }

    /// Each device's load and compute (with recompute) per micro-batch, checked against
    /// the scorer's load: the tasks of one micro-batch take each device's MODEL.md load.
    fn loads(
        &self,
        stages: &Stages,
        scored_loads: &[DeviceLoad],
    ) -> Result<(Vec<f64>, Vec<f64>), SimulateError> {
        let mut load = vec![0.0; self.devices.len()];
        let mut compute = vec![0.0; self.devices.len()];
        for (x, piece) in stages.pieces.iter().enumerate() {
            load[self.device_of[x]] += piece.duration_ms();
            compute[self.device_of[x]] += piece.compute_ms + piece.recompute_ms;
        }
        for (d, &device) in self.devices.iter().enumerate() {
            let scored = scored_loads
                .iter()
                .find(|x| x.device == device)
                .map_or(0.0, |x| x.load);
            if (scored - load[d]).abs() > 1e-9 * scored.abs().max(1.0) {
                return Err(SimulateError::Check(format!(
                    "{device}'s tasks of one micro-batch take {} but the scorer's load is {scored}",
                    load[d]
                )));
            }
        }
        Ok((load, compute))
    }

    /// [`play`] on these devices.
    fn play(
        &self,
        stages: &Stages,
        schedule: Schedule,
        m: usize,
    ) -> Result<engine::Run, SimulateError> {
        play(
            stages,
            schedule,
            m,
            &self.device_of,
            self.devices.len(),
            &self.resident,
        )
    }
}

/// The marginal time per sample, between `m' ≈ m/2` and `m` micro-batches (`m'` a
/// multiple of the device count under the interleaved schedule); `None` when `m' = 0`.
fn steady_time_per_sample(
    stages: &Stages,
    played: Schedule,
    m: usize,
    devices: &DeviceSet,
    run: &engine::Run,
) -> Result<Option<f64>, SimulateError> {
    let half = match played {
        Schedule::Interleaved { chunks } => {
            let p = stages.positions / chunks;
            (m / 2) / p * p
        }
        _ => m / 2,
    };
    if half >= 1 && half < m {
        let shorter = devices.play(stages, played, half)?;
        Ok(Some(
            (last_end(run) - last_end(&shorter)) / (m - half) as f64,
        ))
    } else {
        Ok(None)
    }
}

/// The scorer's figures a pipeline report shows (validity, contiguity, loads, TPS, sync),
/// without the single-sample latency: its greedy cut is quadratic on large training graphs
/// (68 s on 200,000 nodes) and a pipeline does not run one sample alone. The page says
/// the latency was not computed.
pub fn pipeline_evaluation(w: &Workload, p: &Placement) -> Evaluation {
    let devices = device_loads(w, p);
    let (max_load, bottleneck) = max_load(&devices);
    Evaluation {
        sync_objective: sync_objective(&devices),
        devices,
        max_load,
        bottleneck,
        latency: None,
        violations: violations(w, p, true),
        non_contiguous: contiguity_violations(w, p),
    }
}

/// The plan's pieces: under the interleaved schedule, when the plan has chunks
/// ([`Placement::chunk`]) that form a chain of ideals on the workload's `k` accelerators and respect the timetable's
/// monotonicities (forward arcs never to a lower position, backward arcs never to a
/// higher one), its chunks are the stages ([`stages::cut_chunks`]); otherwise they are
/// reconstructed from the unit graph, with a note when the plan has chunks.
fn cut_for(
    w: &Workload,
    p: &Placement,
    memory: &[HeldBytes],
    schedule: Schedule,
    notes: &mut Vec<String>,
) -> Stages {
    let v = schedule.chunks();
    let k = w.devices().accelerators;
    if v == 1 || p.pieces.is_none() {
        return stages::cut(w, p, memory);
    }
    if let Err(e) = crate::score::contiguity::interleaved_stages(w, p, k, v) {
        notes.push(format!("the plan's chunks are not used as the {schedule} stages ({e}); stages reconstructed from its data flow"));
        return stages::cut(w, p, memory);
    }
    let chunks = stages::Chunks {
        devices: k,
        chunks: v,
    };
    let cut = stages::cut_chunks(w, p, memory, Some(chunks));
    let monotone = cut.pieces.iter().all(|a| {
        a.succs.iter().all(|&b| {
            let b = &cut.pieces[b];
            match (a.pass, b.pass) {
                (Pass::Forward, Pass::Forward) => a.position <= b.position,
                (Pass::Backward, Pass::Backward) => a.position >= b.position,
                (Pass::Forward, Pass::Backward) => true,
                (Pass::Backward, Pass::Forward) => false,
            }
        })
    });
    if monotone {
        return cut;
    }
    notes.push(format!("the plan's chunks are not used as the {schedule} stages (a backward edge runs against the chain of chunks); stages reconstructed from its data flow"));
    stages::cut(w, p, memory)
}

/// Builds each device's task order for `m` micro-batches and runs it.
fn play(
    stages: &Stages,
    schedule: Schedule,
    m: usize,
    device_of: &[usize],
    devices: usize,
    resident: &[f64],
) -> Result<engine::Run, SimulateError> {
    let table = timetable(schedule, stages.positions, m)?;
    let mut orders: Vec<Vec<usize>> = vec![Vec::new(); devices];
    for x in 0..stages.pieces.len() {
        orders[device_of[x]].extend((0..m).map(|i| x * m + i));
    }
    for order in &mut orders {
        order.sort_by_key(|&task| {
            let (x, i) = (task / m, task % m);
            let piece = &stages.pieces[x];
            (table.slot(piece.pass, i, piece.position), piece.pass, i, x)
        });
    }
    engine::run(stages, m, device_of, &orders, resident).map_err(SimulateError::Check)
}

/// The end of the last task: the iteration time.
fn last_end(run: &engine::Run) -> f64 {
    run.tasks.iter().map(|t| t.end_ms).fold(0.0, f64::max)
}

/// For the interleaved schedule: whether the plan puts stage `s` on the device that holds
/// every stage `≡ s (mod p)`, as Megatron-LM's chunks are; a note when it does not.
fn interleaving_note(stages: &Stages, schedule: Schedule) -> Option<String> {
    let v = schedule.chunks();
    if v == 1 || !stages.positions.is_multiple_of(v) {
        return None;
    }
    let p = stages.positions / v;
    let mut owner: std::collections::HashMap<usize, Device> = Default::default();
    for piece in stages.pieces.iter().filter(|x| x.pass == Pass::Forward) {
        let slot = piece.position % p;
        match owner.get(&slot) {
            Some(&d) if d != piece.device => {
                return Some(format!(
                    "{schedule}: the plan's {} stages are not {v} chunks per device on {p} devices (stage {} is on {}, stage {slot} on {d}); each device's tasks still follow the schedule's timetable",
                    stages.positions, piece.position, piece.device
                ));
            }
            Some(_) => {}
            None => {
                owner.insert(slot, piece.device);
            }
        }
    }
    None
}

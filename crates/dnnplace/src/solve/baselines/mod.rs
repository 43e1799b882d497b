//! The baselines of the paper's evaluation, each a [`Method`](super::Method):
//!
//! | method | module | contiguous | objective |
//! | --- | --- | --- | --- |
//! | `pipedream` | [`pipedream`] | yes | TPS: biconnected pieces fused into a chain, split optimally |
//! | `pipedream-topo` | [`pipedream`] | yes | TPS: a topological order split optimally (reference figures) |
//! | `local-search` | [`local_search`] | no | TPS: best-improvement class moves from random starts |
//! | `partitioner` | [`partitioner`] | no | TPS: METIS k-way partition of the class graph, then repaired |
//! | `greedy` | [`greedy`] | yes | any: accelerators filled in topological order while memory allows |
//! | `single` | [`single`] | yes | any: everything on one accelerator |
//! | `expert` | [`expert`] | as given | any: a human split read from a file |
//!
//! The non-contiguous baselines work on colour classes ([`Grouping::classes`]): the unit
//! every placement must keep together, with the sums and communication hyperedges of
//! [`crate::model::grouping`] that the contraction's groups and the IPs' units have too.
//! Local search prices its moves through those hyperedges, so a move of one class changes
//! only the loads of its two devices.

pub mod expert;
pub mod greedy;
pub mod local_search;
pub mod partitioner;
pub mod pipedream;
pub mod single;

use crate::model::grouping::Grouping;
use crate::model::numerics::Sum;
use crate::model::{Device, Placement, Workload};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Makes a class assignment valid, deterministically, and says what it moved:
/// 1. a class that may not run on an accelerator goes to the least-loaded CPU;
/// 2. while an accelerator exceeds its memory, its largest class (by size, then index)
///    moves to the fitting accelerator with the least compute, or else to the
///    least-loaded CPU.
///
/// Returns `None` when a class fits nowhere (no CPU and no accelerator with room).
/// Complexity: O(C · (k + ℓ)) moves of C classes at most.
pub fn repair(
    m: &Grouping,
    w: &Workload,
    device: &mut [Device],
    notes: &mut Vec<String>,
) -> Option<()> {
    let d = w.devices();
    let (k, l, memory) = (d.accelerators, d.cpus, d.memory_per_accelerator_bytes);
    let mut cpu_load = vec![0.0; l];
    let mut acc_compute = vec![0.0; k];
    // Compensated: taking a 2^63-byte class off must leave the 12 bytes beside it (numerics).
    let mut acc_memory = vec![Sum::ZERO; k];
    for (x, dev) in device.iter().enumerate() {
        match *dev {
            Device::Cpu(i) => cpu_load[i] += m[x].cpu_latency,
            Device::Accelerator(i) => {
                acc_compute[i] += m[x].fpga_latency;
                acc_memory[i] = acc_memory[i].plus(m[x].size_bytes);
            }
        }
    }
    let least_cpu = |cpu_load: &[f64]| (0..l).min_by(|&a, &b| cpu_load[a].total_cmp(&cpu_load[b]));
    let (mut unsupported_moved, mut memory_moved) = (0, 0);
    for (x, slot) in device.iter_mut().enumerate() {
        if let Device::Accelerator(i) = *slot {
            if !m[x].supported_on_accelerator {
                let c = least_cpu(&cpu_load)?;
                acc_compute[i] -= m[x].fpga_latency;
                acc_memory[i] = acc_memory[i].minus(m[x].size_bytes);
                cpu_load[c] += m[x].cpu_latency;
                *slot = Device::Cpu(c);
                unsupported_moved += 1;
            }
        }
    }
    // The largest class of each accelerator (ties to the lowest index), from one heap per
    // accelerator: a class that moves is pushed onto its new accelerator's heap and left
    // in the old one, skipped when popped there. O(C log C) for C classes, where a scan per
    // move was O(C) (12,917 moves of a 50,000-class GPT took 4.5 s).
    let mut heaps: Vec<BinaryHeap<(Size, Reverse<usize>)>> = vec![BinaryHeap::new(); k];
    for (x, dev) in device.iter().enumerate() {
        if let Device::Accelerator(i) = *dev {
            heaps[i].push((Size(m[x].size_bytes), Reverse(x)));
        }
    }
    for i in 0..k {
        while acc_memory[i].value() > memory {
            let x = loop {
                let (_, Reverse(x)) = heaps[i].pop()?;
                if device[x] == Device::Accelerator(i) {
                    break x;
                }
            };
            let target = (0..k)
                .filter(|&j| j != i && acc_memory[j].plus(m[x].size_bytes).value() <= memory)
                .min_by(|&a, &b| acc_compute[a].total_cmp(&acc_compute[b]).then(a.cmp(&b)));
            acc_compute[i] -= m[x].fpga_latency;
            acc_memory[i] = acc_memory[i].minus(m[x].size_bytes);
            match target {
                Some(j) => {
                    acc_compute[j] += m[x].fpga_latency;
                    acc_memory[j] = acc_memory[j].plus(m[x].size_bytes);
                    device[x] = Device::Accelerator(j);
                    heaps[j].push((Size(m[x].size_bytes), Reverse(x)));
                }
                None => {
                    let c = least_cpu(&cpu_load)?;
                    cpu_load[c] += m[x].cpu_latency;
                    device[x] = Device::Cpu(c);
                }
            }
            memory_moved += 1;
        }
    }
    if unsupported_moved > 0 {
        notes.push(format!(
            "{unsupported_moved} colour classes not supported on accelerators moved to CPUs"
        ));
    }
    if memory_moved > 0 {
        notes.push(format!(
            "{memory_moved} colour classes moved off accelerators that exceeded their memory"
        ));
    }
    Some(())
}

/// A class size ordered by `f64::total_cmp`, for [`repair`]'s heaps.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Size(f64);

impl Eq for Size {}

impl PartialOrd for Size {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Size {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// A small deterministic generator (SplitMix64): the same seed gives the same plans on
/// every platform, with no dependency.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
}

/// A heuristic's outcome: the plan scored by the evaluator under the problem's objective.
pub(crate) fn scored_outcome(
    method: super::MethodId,
    problem: &super::Problem,
    placement: Placement,
    notes: Vec<String>,
) -> super::Outcome {
    let latency_rules = matches!(problem.objective, super::Objective::Latency { .. });
    let e = crate::score::evaluate(problem.workload, &placement, latency_rules);
    super::Outcome {
        method,
        objective: problem.objective.value(&e),
        placement: Some(placement),
        bound: 0.0,
        status: super::Status::Heuristic,
        stats: super::Stats {
            notes,
            ..super::Stats::default()
        },
    }
}

/// A heuristic's outcome whose run the budget cut short (time limit, Ctrl-C, memory): the
/// plan it holds, [`super::Status::Feasible`] with the real reason (the JSON's
/// `stopReason`), instead of [`super::Status::Heuristic`], which says it ran to its end.
pub(crate) fn cut_short(
    mut outcome: super::Outcome,
    stopped: Option<super::budget::Exhausted>,
) -> super::Outcome {
    if let (Some(e), true) = (stopped, outcome.placement.is_some()) {
        outcome.status = super::Status::Feasible { reason: e.into() };
    }
    outcome
}

/// An outcome without a plan, with a reason a person can act on.
pub(crate) fn infeasible_outcome(
    method: super::MethodId,
    reason: super::Infeasibility,
) -> super::Outcome {
    super::Outcome {
        method,
        placement: None,
        objective: f64::INFINITY,
        bound: 0.0,
        status: super::Status::infeasible(reason),
        stats: super::Stats::default(),
    }
}

/// [`infeasible_outcome`] of a contiguous problem whose obstacle is the contiguity rule.
pub(crate) fn contiguity_infeasible_outcome(
    method: super::MethodId,
    reason: super::Infeasibility,
) -> super::Outcome {
    let mut outcome = infeasible_outcome(method, reason);
    if let super::Status::Infeasible {
        non_contiguous_may_help,
        ..
    } = &mut outcome.status
    {
        *non_contiguous_may_help = true;
    }
    outcome
}

/// `Err` unless the objective is TPS: the planners below minimise the max load only.
pub(crate) fn throughput_only(problem: &super::Problem) -> Result<(), super::Unsupported> {
    match problem.objective {
        super::Objective::Throughput => Ok(()),
        other => Err(super::Unsupported::NotThroughput {
            objective: other.name(),
        }),
    }
}

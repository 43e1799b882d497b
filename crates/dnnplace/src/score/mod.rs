//! The independent evaluator: validity, per-device loads, TPS, the synchronous objective
//! and single-sample latency of any placement, computed from the workload's edges alone.
//!
//! Every plan any solver produces passes through [`evaluate`] before it is shown; the
//! solvers' own objective values are never trusted on their own.
//!
//! **Latency only where it is asked for or cheap.** Validity, loads, TPS, sync and
//! contiguity cost O(n + m) (contiguity O(k·(n + m))); the latency's greedy cut can cost
//! O(n · (n + m)) ([`latency`]). A latency plan ([`LatencyScoring::Rules`]) and
//! `dnnplace score` ([`LatencyScoring::Always`]) always get it. A throughput or sync plan
//! ([`LatencyScoring::WhenCheap`], what [`evaluate`] does without the latency rules) gets it
//! when the plan is a pipeline (then the cut is linear) or the estimated cut costs at most
//! [`CHEAP_LATENCY_STEPS`]; otherwise [`Evaluation::latency`] is `None` and the reports say
//! it was not computed. Nothing a throughput check needs depends on the latency.

pub mod cluster;
pub mod contiguity;
pub mod latency;
pub mod load;
pub mod parallel;
pub mod pipeline_memory;
pub mod piper;
pub mod validity;

pub use cluster::{evaluate_on_cluster, evaluate_on_cluster_in, ClusterEvaluation};
pub use contiguity::{contiguity_violations, contiguity_violations_in, ClassGraph};
pub use latency::{greedy_cut_steps, latency, Call, LatencyScore};
pub use load::{device_loads, max_load, sync_objective, tps, DeviceLoad};
pub use pipeline_memory::{
    pipeline_memory, recompute_where_needed, DeviceMemory, PipelineMemoryError,
};
pub use validity::{violations, Violation};

use crate::model::{Device, Placement, Workload};

/// Everything the scorer knows about a placement.
#[derive(Clone, Debug)]
pub struct Evaluation {
    /// Loads of the devices that hold nodes.
    pub devices: Vec<DeviceLoad>,
    /// Time-Per-Sample: the maximum load.
    pub max_load: f64,
    /// The device with the maximum load.
    pub bottleneck: Option<Device>,
    /// `max_d FW(d) + max_d BW(d)`.
    pub sync_objective: f64,
    /// Single-sample latency; `None` when it was not computed (module documentation).
    pub latency: Option<LatencyScore>,
    /// Broken hard rules (device counts, colour classes, support, memory).
    pub violations: Vec<Violation>,
    /// Devices whose sets are not contiguous (not a violation for non-contiguous methods).
    pub non_contiguous: Vec<Violation>,
}

impl Evaluation {
    /// Valid under the hard rules.
    pub fn is_valid(&self) -> bool {
        self.violations.is_empty()
    }
    /// Every device's set is contiguous.
    pub fn is_contiguous(&self) -> bool {
        self.non_contiguous.is_empty()
    }
    /// Single-sample latency, when computed.
    pub fn latency_total(&self) -> Option<f64> {
        self.latency.as_ref().map(|l| l.total)
    }
    /// The largest number of calls on one accelerator (0 when latency was not computed).
    pub fn max_pieces(&self) -> usize {
        self.latency.as_ref().map_or(0, LatencyScore::max_pieces)
    }
    /// `p` with the scorer's cut into calls attached ([`LatencyScore::attach_cut`]);
    /// unchanged when latency was not computed.
    pub fn attach_cut(&self, p: Placement) -> Placement {
        match &self.latency {
            Some(l) => l.attach_cut(p),
            None => p,
        }
    }
}

/// Whether and how [`evaluate_with`] computes single-sample latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatencyScoring {
    /// The latency objective's rules: latency computed, the CPU count relaxed (latency
    /// instances have as many cores as needed), a deadlocking cut a violation.
    Rules,
    /// Latency computed, as information; the throughput rules apply.
    Always,
    /// Latency computed when cheap (module documentation); the throughput rules apply.
    WhenCheap,
}

/// The most elementary steps [`LatencyScoring::WhenCheap`] spends on a latency cut
/// ([`greedy_cut_steps`]; about a tenth of a second). Every published workload's plans are
/// below it (the largest, operator-level BERT-12 training, needs at most 8.6·10⁶).
pub const CHEAP_LATENCY_STEPS: f64 = 5e7;

/// Scores `p` on `w`. `latency_rules` relaxes the CPU count (latency instances have as many
/// CPU cores as needed) and makes a deadlocking cut of the plan's own pieces a violation;
/// without them, latency is computed only when cheap ([`LatencyScoring::WhenCheap`]).
///
/// # Example
///
/// ```
/// use dnnplace::io::parse_workload;
/// use dnnplace::model::{Device, Placement};
/// use dnnplace::score::evaluate;
///
/// let w = parse_workload(r#"{"maxSizePerFPGA": 1e9, "maxFPGAs": 2, "maxCPUs": 1,
///     "nodes": [{"id": 1, "fpgaLatency": 2, "cpuLatency": 20},
///               {"id": 2, "fpgaLatency": 3, "cpuLatency": 30}],
///     "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5}]}"#)?;
/// // Node 1 on accelerator 0, node 2 on accelerator 1: each pays the transfer once.
/// let p = Placement::new(vec![Device::Accelerator(0), Device::Accelerator(1)]);
/// let e = evaluate(&w, &p, false);
/// assert!(e.is_valid() && e.is_contiguous());
/// assert_eq!(e.max_load, 3.5);
/// // Three accelerators are more than the device set has: a violation, not a panic.
/// let bad = Placement::new(vec![Device::Accelerator(0), Device::Accelerator(2)]);
/// assert!(!evaluate(&w, &bad, false).is_valid());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn evaluate(w: &Workload, p: &Placement, latency_rules: bool) -> Evaluation {
    evaluate_with(
        w,
        p,
        if latency_rules {
            LatencyScoring::Rules
        } else {
            LatencyScoring::WhenCheap
        },
    )
}

/// Scores `p` on `w`, computing latency as `scoring` says.
pub fn evaluate_with(w: &Workload, p: &Placement, scoring: LatencyScoring) -> Evaluation {
    let latency_rules = scoring == LatencyScoring::Rules;
    let mut violations = violations(w, p, !latency_rules);
    if !violations.is_empty()
        && matches!(
            violations[0],
            Violation::WrongLength { .. } | Violation::PiecesLength { .. }
        )
    {
        return Evaluation {
            devices: Vec::new(),
            max_load: f64::INFINITY,
            bottleneck: None,
            sync_objective: f64::INFINITY,
            latency: None,
            violations,
            non_contiguous: Vec::new(),
        };
    }
    let devices = device_loads(w, p);
    let (max_load, bottleneck) = max_load(&devices);
    let non_contiguous = contiguity_violations(w, p);
    let wanted = match scoring {
        LatencyScoring::Rules | LatencyScoring::Always => true,
        LatencyScoring::WhenCheap => greedy_cut_steps(w, p) <= CHEAP_LATENCY_STEPS,
    };
    let latency = wanted.then(|| latency(w, p));
    if let (true, Some(why)) = (
        latency_rules,
        latency.as_ref().and_then(|l| l.deadlock.as_ref()),
    ) {
        violations.push(Violation::Deadlock(why.clone()));
    }
    violations.shrink_to_fit();
    Evaluation {
        sync_objective: sync_objective(&devices),
        devices,
        max_load,
        bottleneck,
        latency,
        violations,
        non_contiguous,
    }
}

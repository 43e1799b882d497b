//! The independent evaluator: validity, per-device loads, TPS, the synchronous objective
//! and single-sample latency of any placement, computed from the workload's edges alone.
//!
//! Every plan any solver produces passes through [`evaluate`] before it is shown; the
//! solvers' own objective values are never trusted on their own.

pub mod contiguity;
pub mod latency;
pub mod load;
pub mod validity;

pub use contiguity::contiguity_violations;
pub use latency::{latency, Call, LatencyScore};
pub use load::{device_loads, max_load, sync_objective, DeviceLoad};
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
    /// Single-sample latency.
    pub latency: LatencyScore,
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
}

/// Scores `p` on `w`. `latency_rules` relaxes the CPU count (latency instances have as many
/// CPU cores as needed) and makes a deadlocking cut of the plan's own pieces a violation.
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
    let mut violations = violations(w, p, !latency_rules);
    if !violations.is_empty() && matches!(violations[0], Violation::WrongLength { .. } | Violation::PiecesLength { .. }) {
        return Evaluation {
            devices: Vec::new(),
            max_load: f64::INFINITY,
            bottleneck: None,
            sync_objective: f64::INFINITY,
            latency: LatencyScore {
                total: f64::INFINITY,
                pieces: Vec::new(),
                finish: Vec::new(),
                piece_rank: Vec::new(),
                deadlock: None,
                calls: Vec::new(),
            },
            violations,
            non_contiguous: Vec::new(),
        };
    }
    let devices = device_loads(w, p);
    let (max_load, bottleneck) = max_load(&devices);
    let non_contiguous = contiguity_violations(w, p);
    let latency = latency(w, p);
    if let (true, Some(why)) = (latency_rules, &latency.deadlock) {
        violations.push(Violation::Deadlock(why.clone()));
    }
    violations.shrink_to_fit();
    Evaluation { sync_objective: sync_objective(&devices), devices, max_load, bottleneck, latency, violations, non_contiguous }
}

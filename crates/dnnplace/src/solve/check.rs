//! The internal checks a plan passes before anyone sees it, as data: [`CheckFailure`]
//! says which check failed and with what numbers ([`super::SolveError::Check`]).
//!
//! Every method's plan is re-scored by the independent evaluator ([`crate::score`]); a
//! solver's claimed value must equal the re-scored one within the method's tolerance, a
//! plan must keep MODEL.md's rules (and its contiguity promise, and the latency pieces, and
//! every device's memory under the schedule), and a formulation's objective must not lie
//! below the scorer's value of its own plan. A failure is a bug of the method, never an
//! answer: the CLI reports it with exit status 3.

use crate::model::schedule::Schedule;
use crate::model::WorkloadError;
use crate::score::pipeline_memory::{DeviceMemory, PipelineMemoryError};
use crate::score::Violation;

use super::MethodId;

/// Which internal check failed. Display gives the sentence printed after "internal check
/// failed: ".
#[derive(Debug, thiserror::Error)]
pub enum CheckFailure {
    /// `method` claimed `claimed`; the scorer computes `rescored`.
    #[error("{method} reported objective {claimed} but the scorer computes {rescored}")]
    ObjectiveMismatch {
        method: MethodId,
        claimed: f64,
        rescored: f64,
    },
    /// `method`'s plan breaks a rule of MODEL.md.
    #[error("{method} produced an invalid plan: {violation}")]
    InvalidPlan {
        method: MethodId,
        violation: Violation,
    },
    /// `method` promised a contiguous plan and its plan is not.
    #[error("{method} promised a contiguous plan: {violation}")]
    NotContiguous {
        method: MethodId,
        violation: Violation,
    },
    /// `method`'s plan has `pieces` pieces on one accelerator, more than `allowed`.
    #[error(
        "{method} produced {pieces} pieces on one accelerator, more than the {allowed} allowed"
    )]
    TooManyPieces {
        method: MethodId,
        pieces: usize,
        allowed: usize,
    },
    /// The scorer finds no memory of `method`'s plan under the schedule.
    #[error("{method}: {error}")]
    PipelineMemory {
        method: MethodId,
        error: PipelineMemoryError,
    },
    /// `method`'s plan needs `memory.bytes` on `memory.device` under `schedule`, more than
    /// its `limit_bytes`.
    #[error("{method}'s plan needs {} bytes on {} under {schedule} ({}; stage {}), more than its {limit_bytes}", .memory.bytes, .memory.device, memory_parts(.memory), .memory.stage)]
    MemoryExceeded {
        method: MethodId,
        memory: Box<DeviceMemory>,
        schedule: Schedule,
        limit_bytes: f64,
    },
    /// The device set clamped to the node count is rejected.
    #[error("clamping the device set: {0}")]
    ClampedDevices(WorkloadError),
    /// The layer-granular plan breaks a rule on the original workload.
    #[error("the layer-granular plan is invalid on the original workload: {0}")]
    LayerPlanInvalid(Violation),
    /// The layer-granular plan is not contiguous on the original workload.
    #[error("the layer-granular plan is not contiguous on the original workload: {0}")]
    LayerPlanNotContiguous(Violation),
    /// The layer-granular plan scores `relabelled` on the relabelled workload and
    /// `original` on the original.
    #[error("the layer-granular plan scores {relabelled} on the relabelled workload but {original} on the original")]
    LayerPlanScore { relabelled: f64, original: f64 },
    /// An integer program's objective `objective` lies below the scorer's `scored` for its
    /// own plan (the cluster IP's when `cluster`): a formulation bug.
    #[error("the {}IP's objective {objective} is below the scorer's {scored} for its own plan (formulation bug)", if *.cluster { "cluster " } else { "" })]
    IpBelowScorer {
        cluster: bool,
        objective: f64,
        scored: f64,
    },
    /// The interleaved DP's plan is not a candidate the scorer accepts.
    #[error("the interleaved DP's plan fails the scorer")]
    InterleavedDpPlanRejected,
    /// The scorer finds no memory of the DP's plan under `schedule`.
    #[error("the DP's plan under {schedule}: {error}")]
    DpPlanMemory {
        schedule: Schedule,
        error: PipelineMemoryError,
    },
    /// The cluster plan breaks these rules.
    #[error("the cluster plan breaks a rule: {0:?}")]
    ClusterPlanInvalid(Vec<Violation>),
    /// The cluster plan is not contiguous, for these reasons.
    #[error("the cluster plan is not contiguous: {0:?}")]
    ClusterPlanNotContiguous(Vec<Violation>),
    /// A cluster solver claims `claimed` for its plan (TPS, or with `sync` max FW + max
    /// BW), the scorer `scored`.
    #[error("the solver says {} {claimed}, the scorer {scored}", if *.sync { "max FW + max BW" } else { "TPS" })]
    ClusterValueMismatch {
        sync: bool,
        claimed: f64,
        scored: f64,
    },
    /// A cluster plan was asked for and the plan has none.
    #[error("no cluster plan on a cluster")]
    NoClusterPlan,
    /// The coarsened workload is rejected.
    #[error("the coarse workload is invalid: {0}")]
    CoarseWorkloadInvalid(WorkloadError),
    /// The refined coarse plan breaks a rule or is not contiguous (the first violation).
    #[error("the refined coarse plan is rejected by the scorer: {}", .0.as_ref().map(ToString::to_string).unwrap_or_default())]
    RefinedPlanRejected(Option<Violation>),
    /// The coarse DP's plan is not contiguous.
    #[error("the coarse DP's plan is not contiguous")]
    CoarseDpNotContiguous,
    /// The coarse DP put the nodes of `cluster` of level `level` on several devices.
    #[error("the coarse DP split cluster {cluster} of level {level}")]
    CoarseDpSplitCluster { cluster: usize, level: usize },
}

/// What a device's bytes are made of ([`CheckFailure::MemoryExceeded`]).
fn memory_parts(d: &DeviceMemory) -> String {
    if d.recomputes {
        format!(
            "recomputing: {} resident + {} stashed once + {} in flight x {} input",
            d.resident_bytes, d.stash_bytes, d.in_flight, d.input_bytes
        )
    } else {
        format!(
            "{} resident + {} in flight x {} stashed",
            d.resident_bytes, d.in_flight, d.stash_bytes
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_print_the_sentences_of_the_strings_they_replaced() {
        let ip = CheckFailure::IpBelowScorer {
            cluster: true,
            objective: 1.5,
            scored: 2.0,
        };
        assert_eq!(
            ip.to_string(),
            "the cluster IP's objective 1.5 is below the scorer's 2 for its own plan (formulation bug)"
        );
        let mismatch = CheckFailure::ObjectiveMismatch {
            method: MethodId::Dp,
            claimed: 3.0,
            rescored: 3.5,
        };
        assert_eq!(
            mismatch.to_string(),
            "dp reported objective 3 but the scorer computes 3.5"
        );
        assert_eq!(
            CheckFailure::RefinedPlanRejected(None).to_string(),
            "the refined coarse plan is rejected by the scorer: "
        );
        let value = CheckFailure::ClusterValueMismatch {
            sync: false,
            claimed: 1.0,
            scored: 2.0,
        };
        assert_eq!(value.to_string(), "the solver says TPS 1, the scorer 2");
    }
}

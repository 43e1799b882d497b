//! `single`: every node on one accelerator, when it fits.
//!
//! The plan needs no communication: its TPS and its latency both equal Σ fpgaLatency.
//! Infeasible when a node may not run on an accelerator or the nodes need more memory
//! than one accelerator has. Contiguous for every objective.

use super::{infeasible_outcome, scored_outcome};
use crate::model::{Device, Placement};
use crate::solve::{Infeasibility, Method, MethodId, Outcome, Problem, SolveError};

/// Everything on accelerator 0 (`--method single`).
pub struct Single;

impl Method for Single {
    fn id(&self) -> MethodId {
        MethodId::Single
    }

    fn solve(&self, problem: &Problem) -> Result<Outcome, SolveError> {
        let w = problem.workload;
        let d = w.devices();
        if d.accelerators == 0 {
            return Ok(infeasible_outcome(self.id(), Infeasibility::NoAccelerator));
        }
        if let Some(node) = w.nodes().iter().find(|n| !n.supported_on_accelerator) {
            return Ok(infeasible_outcome(
                self.id(),
                Infeasibility::CpuOnlyNode { node: node.id },
            ));
        }
        let total: f64 = w.nodes().iter().map(|n| n.size_bytes).sum();
        if total > d.memory_per_accelerator_bytes {
            return Ok(infeasible_outcome(
                self.id(),
                Infeasibility::ExceedsOneAccelerator {
                    total_bytes: total,
                    memory_bytes: d.memory_per_accelerator_bytes,
                },
            ));
        }
        let placement = Placement::new(vec![Device::Accelerator(0); w.len()]);
        Ok(scored_outcome(self.id(), problem, placement, Vec::new()))
    }
}

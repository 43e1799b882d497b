//! Activation recomputation (activation checkpointing): a pipeline stage that keeps only
//! its inputs between its forward and backward passes and runs its forward pass once more
//! before the backward one. It trades stash memory for forward time, per stage.
//!
//! Symbols. A *stage* `S` is the node set of one device; `F` the forward nodes
//! (`isBackwardNode` false); `size(v)`, `A(v)` (stashed activations, `activationBytes`) and
//! `resident(v) = size(v) − A(v)` as in [`crate::model::memory`] and
//! [`crate::model::schedule::held_bytes`]; `c` the micro-batches in flight at the stage's
//! place in the pipeline ([`crate::model::schedule::Pipeline::in_flight`]); `M` an
//! accelerator's memory.
//!
//! **Output bytes** of a forward node `u`: `b(u) = max size(e)` over the edges `e = u → x`
//! into forward nodes `x` (the edge's `size` field: the tensor that travels; 0 when the
//! file gives none, as MODEL.md's published workloads mostly do). Backward nodes have
//! `b = 0`: a gradient arriving from the next stage is not part of the forward pass.
//!
//! **Stage input**: `In(S) = Σ_{u ∈ F \ S : ∃ u → x, x ∈ F ∩ S} b(u)` — every tensor the
//! stage's forward pass reads from another device, once however many of its nodes read it.
//!
//! **Memory** of an accelerator stage with `c` micro-batches in flight:
//!
//! ```text
//! no recompute:  mem(S, c)   = Σ_S resident + c · A(S)           = Σ_S size + (c − 1) · A(S)
//! recompute:     mem_r(S, c) = Σ_S resident + A(S) + c · In(S)   = Σ_S size + c · In(S)
//! ```
//!
//! A recomputing stage holds the inputs of each of the `c` micro-batches in flight, plus,
//! while the backward pass of one micro-batch runs, that micro-batch's full stash `A(S)`
//! (recomputed just before it). The formula is conservative by at most one input: where
//! the stash already contains the input (the cost models' `A(v') = input_bytes(v)` of the
//! stage's first node), a runtime need not copy it.
//!
//! **Time**: recomputing adds one forward pass of the stage to its load,
//!
//! ```text
//! load_r(S) = load(S) + R(S),   R(S) = Σ_{v ∈ S ∩ F} fpgaLatency(v)
//! ```
//!
//! and nothing to its communication (the inputs stay on the device). Under MODEL.md's
//! max-load objective a plan's TPS is `max_d load_r(d)` over its recomputing devices and
//! `load(d)` over the others; the scorer ([`crate::score::load`]) adds `R` to a device that
//! the plan marks as recomputing (the synchronous objective counts it as backward time:
//! it runs in the backward phase).
//!
//! **Only accelerators recompute.** A CPU core has no memory limit: recomputing there only
//! adds time, so the planner never does and a plan file that asks for it is refused.
//!
//! **`--recompute auto`** chooses per stage at place `s` (with `c = c(s)`):
//!
//! ```text
//! r(S, s) = no        if mem(S, c) ≤ M
//!         = yes       if mem(S, c) > M ≥ mem_r(S, c)
//!         (no stage)  otherwise
//! ```
//!
//! As `load(S) ≤ load_r(S)`, this is the choice with the lower stage load among those that
//! fit; a stage's choice changes no other stage's load or memory, so choosing per stage
//! minimises the maximum, and the DP's accelerator stage cost becomes
//! `acc_s(S) = load(S)` if `mem(S, c(s)) ≤ M`, `load_r(S)` if `mem_r(S, c(s)) ≤ M`, `∞`
//! otherwise (`crate::solve::dp::relax`). With `c = 1` (one micro-batch, or no schedule),
//! `mem_r = mem + In ≥ mem`: recomputation never helps, and `auto` equals `none`.

use std::collections::BTreeMap;

use crate::model::{Device, Placement, Workload};

/// Whether stages may recompute their activations (`plan --recompute`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Recompute {
    /// No stage recomputes: the stash is held (today's model).
    #[default]
    None,
    /// The planner recomputes a stage exactly when it does not fit otherwise (module doc).
    Auto,
}

impl std::fmt::Display for Recompute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Recompute::None => "none",
            Recompute::Auto => "auto",
        })
    }
}

impl std::str::FromStr for Recompute {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "none" | "off" => Ok(Recompute::None),
            "auto" => Ok(Recompute::Auto),
            _ => Err(format!(
                "unknown recompute mode '{text}' (use none or auto)"
            )),
        }
    }
}

/// `b(u)` of every node (module doc): the largest `size` of a forward node's edges into
/// forward nodes, 0 for backward nodes. O(n + m).
pub fn output_bytes(w: &Workload) -> Vec<f64> {
    let mut b = vec![0.0f64; w.len()];
    for e in w.edges() {
        if !w.node(e.from).is_backward && !w.node(e.to).is_backward {
            b[e.from] = b[e.from].max(e.size_bytes);
        }
    }
    b
}

/// `In(d)` of every device of `p` that reads a forward node's output from another device
/// (module doc): `b(u)` once per other device whose forward nodes read `u`. Devices that
/// read nothing are absent. O(n + m · r) for at most r reading devices per node.
pub fn stage_inputs(w: &Workload, p: &Placement) -> BTreeMap<Device, f64> {
    let b = output_bytes(w);
    let mut input = BTreeMap::new();
    let mut readers: Vec<Device> = Vec::new();
    for u in (0..w.len()).filter(|&u| b[u] > 0.0) {
        readers.clear();
        for &x in w.successors(u) {
            let dx = p.assignment[x];
            if !w.node(x).is_backward && dx != p.assignment[u] && !readers.contains(&dx) {
                readers.push(dx);
            }
        }
        for &dx in &readers {
            *input.entry(dx).or_insert(0.0) += b[u];
        }
    }
    input
}

/// `mem(S, c)` or `mem_r(S, c)` (module doc) of a stage holding `resident` bytes
/// throughout, stashing `stash` per micro-batch and reading `input` bytes from other
/// devices, with `in_flight` micro-batches in flight.
pub fn stage_bytes(
    resident: f64,
    stash: f64,
    input: f64,
    in_flight: usize,
    recompute: bool,
) -> f64 {
    let c = in_flight as f64;
    if recompute {
        resident + stash + c * input
    } else {
        resident + c * stash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print() {
        for text in ["none", "auto"] {
            assert_eq!(text.parse::<Recompute>().unwrap().to_string(), text);
        }
        assert!("sometimes"
            .parse::<Recompute>()
            .unwrap_err()
            .contains("none or auto"));
    }

    /// The two forms of the module doc agree, and one micro-batch never gains.
    #[test]
    fn memory_forms() {
        let (resident, stash, input) = (100.0, 40.0, 6.0);
        let size = resident + stash;
        for c in 1..6 {
            assert_eq!(
                stage_bytes(resident, stash, input, c, false),
                size + (c as f64 - 1.0) * stash
            );
            assert_eq!(
                stage_bytes(resident, stash, input, c, true),
                size + c as f64 * input
            );
        }
        assert!(
            stage_bytes(resident, stash, input, 1, true)
                >= stage_bytes(resident, stash, input, 1, false)
        );
    }
}

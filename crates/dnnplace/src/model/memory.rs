//! What a node's `size` is made of: the memory kinds a pipeline schedule treats differently.
//!
//! MODEL.md gives each node one number, `size(v)`: the bytes it occupies on its accelerator
//! with one sample in flight. A schedule that keeps m micro-batches in flight needs the
//! parts apart, because only the stashed activations grow with m. A node may therefore
//! carry a [`NodeMemory`] (the workload JSON's optional `weightBytes`, `gradientBytes`,
//! `optimizerBytes`, `activationBytes`):
//!
//! | kind | field | what it is | held |
//! | --- | --- | --- | --- |
//! | weights `W(v)` | `weightBytes` | parameters in the model's data type | once |
//! | gradients `G(v)` | `gradientBytes` | gradients of those parameters (training) | once |
//! | optimizer state `O(v)` | `optimizerBytes` | e.g. Adam's two fp32 moments, plus an fp32 master copy in mixed precision | once |
//! | activations `A(v)` | `activationBytes` | what the backward pass needs of one micro-batch (the stash) | per micro-batch in flight |
//! | the rest `R(v)` | `size − (W + G + O + A)` | working buffers (a forward node's output) | once |
//!
//! so that, for every node,
//!
//! ```text
//! size(v) = W(v) + G(v) + O(v) + A(v) + R(v),    R(v) ≥ 0
//! ```
//!
//! and the memory of a set `S` of nodes with `m` micro-batches in flight is
//!
//! ```text
//! mem(S, m) = Σ_{v∈S} size(v) + (m − 1) · Σ_{v∈S} A(v)
//! ```
//!
//! **Today's model is the m = 1 case**: `mem(S, 1) = Σ size(v)`, what every planner uses. A
//! node without a breakdown (the published paper workloads) has `A(v) = 0`: its `size` is
//! held once, whatever the schedule — exactly today's meaning.
//!
//! The cost models ([`crate::costmodel`]) fill the breakdown for every node, with `R` the
//! forward output buffer: a forward operator holds `W = P·e` and `R = output bytes`; its
//! backward node (training) holds `G = P·e`, `O = P·(8 + 4·[e = 2])` and `A = its forward
//! input bytes`, for `P` parameters of `e` bytes; a graph input holds only `R`.

/// The parts of a node's `size` (module documentation). All in bytes, each finite and
/// ≥ 0, their sum at most the node's `size`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NodeMemory {
    /// `W(v)`: parameters.
    pub weight_bytes: f64,
    /// `G(v)`: gradients of the parameters.
    pub gradient_bytes: f64,
    /// `O(v)`: optimizer state.
    pub optimizer_bytes: f64,
    /// `A(v)`: activations stashed per micro-batch in flight.
    pub activation_bytes: f64,
}

impl NodeMemory {
    /// `W + G + O + A`.
    pub fn total_bytes(&self) -> f64 {
        self.weight_bytes + self.gradient_bytes + self.optimizer_bytes + self.activation_bytes
    }

    /// The memory of a node of `size_bytes` with `in_flight` micro-batches in flight:
    /// `size + (m − 1)·A` (module documentation); `size` itself for `m = 1`.
    pub fn bytes_in_flight(memory: Option<&NodeMemory>, size_bytes: f64, in_flight: usize) -> f64 {
        let stash = memory.map_or(0.0, |m| m.activation_bytes);
        size_bytes + (in_flight.max(1) - 1) as f64 * stash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_micro_batch_is_todays_size() {
        let m = NodeMemory {
            weight_bytes: 40.0,
            gradient_bytes: 40.0,
            optimizer_bytes: 80.0,
            activation_bytes: 16.0,
        };
        assert_eq!(m.total_bytes(), 176.0);
        assert_eq!(NodeMemory::bytes_in_flight(Some(&m), 200.0, 1), 200.0);
        // Four micro-batches in flight: three more stashes.
        assert_eq!(NodeMemory::bytes_in_flight(Some(&m), 200.0, 4), 248.0);
        // Without a breakdown, size is held once.
        assert_eq!(NodeMemory::bytes_in_flight(None, 200.0, 8), 200.0);
    }
}

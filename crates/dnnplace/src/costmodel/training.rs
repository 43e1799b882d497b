//! Backward nodes of a training graph.
//!
//! For every forward operator `v` that is not a graph input, one backward node `v'` with
//! - **work**: `F(v') = 2·F(v)` if `v` has parameters (the gradients with respect to its
//!   input and to its weights, each a product as large as the forward one), `F(v') = F(v)`
//!   otherwise (the gradient with respect to its input only); `B(v') = 2·B(v)` (it reads the
//!   output gradient, the stashed input and the weights, and writes the input and weight
//!   gradients). The same roofline prices it ([`crate::costmodel::operators`]);
//! - **work of a lookup** ([`OpClass::Lookup`]: an embedding of a `V×h` table `T` of
//!   `|T|·e` bytes, gathering `r` rows, `|Y| = r·h` output elements): PyTorch's
//!   `embedding_dense_backward` (`nn.Embedding`, `sparse=False`; CUDA and CPU alike)
//!   allocates a **dense** gradient of the whole table, zero-fills it, scatter-adds the `r`
//!   rows of the output gradient into it, and autograd then adds that table into the
//!   parameter's gradient buffer (`AccumulateGrad`: every micro-batch after the first of a
//!   step; with a tied head, the sum with the head's weight gradient instead — one
//!   whole-table add either way, so tying does not change the price). So
//!   `B(v') = 4·|T|·e + 3·|Y|·e + input_bytes(v)`: zero-fill (write `|T|`), the add into the
//!   buffer (read two tables, write one), the scatter (read the output gradient, read and
//!   write the touched rows) and the ids; `F(v') = 0` (its adds, one per table element and
//!   per gathered element, are under 1 FLOP per 6 bytes moved, below every profile's
//!   ridge point, so they never bind). The forward, by contrast, moves only the rows it
//!   reads. Its size is the generic rule's (the gradient buffer `P·e` is already in
//!   `gradientBytes`; the transient zero-filled table, freed after the add, is not counted);
//! - **size**: `size(v') = stash + gradients + optimizer state` with
//!   `stash = input_bytes(v)` (the forward input kept for the backward pass, one sample in
//!   flight), `gradients = P·e` and `optimizer = P·(8 + 4·[e = 2])` for `P` parameters of
//!   `e` bytes: Adam's two fp32 moments, plus an fp32 master copy of the weights in mixed
//!   precision. The forward node keeps `P·e + output_bytes(v)`. The backward node's
//!   [`NodeMemory`] keeps the three apart: `activationBytes` = stash, `gradientBytes`,
//!   `optimizerBytes` (so a schedule can multiply only the stash by the micro-batches in
//!   flight);
//! - **colour class**: the forward node's, so both go to one device;
//! - **edges**: `v → v'` (the stashed activation; its cost is `c(v)` like every out-edge of
//!   `v`), and for every forward edge `u → v` with `u` not an input, `v' → u'` (the gradient
//!   flowing back) with cost `c(v') = 1e3 · input_bytes(v) / host_link` ms.
//!
//! Backward node ids are `n + 1 .. 2n` (`n` forward operators): `id(v') = id(v) + n`.

use super::graph::{transfer_ms, CostSettings, OpGraph};
use super::operators::{OpClass, OpCost};
use crate::model::{Node, NodeMemory};

/// The backward operator's work (module documentation).
pub fn backward_cost(forward: &OpCost) -> OpCost {
    if forward.class == OpClass::Lookup {
        return lookup_backward(forward);
    }
    let factor = if forward.param_bytes > 0.0 { 2.0 } else { 1.0 };
    OpCost {
        class: forward.class,
        flops: factor * forward.flops,
        macs: factor * forward.macs,
        bytes_moved: 2.0 * forward.bytes_moved,
        param_bytes: forward.param_bytes,
        output_bytes: forward.input_bytes,
        input_bytes: forward.output_bytes,
    }
}

/// The backward of a table lookup: the dense gradient of the whole table (module
/// documentation), `B = 4·|T|·e + 3·|Y|·e + input_bytes`, no FLOPs counted.
fn lookup_backward(forward: &OpCost) -> OpCost {
    let table = forward.param_bytes;
    OpCost {
        class: OpClass::Lookup,
        flops: 0.0,
        macs: 0.0,
        bytes_moved: 4.0 * table + 3.0 * forward.output_bytes + forward.input_bytes,
        param_bytes: table,
        output_bytes: table,
        input_bytes: forward.output_bytes,
    }
}

/// Bytes a backward node holds: stash + gradients + optimizer state.
pub fn backward_size_bytes(forward: &OpCost, element_bytes: f64) -> f64 {
    backward_memory(forward, element_bytes).total_bytes()
}

/// The parts of a backward node's size (module documentation): `activationBytes` = the
/// stashed forward input, `gradientBytes = P·e`, `optimizerBytes = P·(8 + 4·[e = 2])`.
pub fn backward_memory(forward: &OpCost, element_bytes: f64) -> NodeMemory {
    let params = forward.param_bytes / element_bytes;
    let master_copy = if element_bytes == 2.0 { 4.0 } else { 0.0 };
    NodeMemory {
        weight_bytes: 0.0,
        gradient_bytes: forward.param_bytes,
        optimizer_bytes: params * (8.0 + master_copy),
        activation_bytes: forward.input_bytes,
    }
}

/// Appends the backward nodes and edges of `graph` (forward ids `1..=n`).
pub(crate) fn add_backward(
    graph: &OpGraph,
    settings: &CostSettings,
    n: i64,
    nodes: &mut Vec<Node>,
    edges: &mut Vec<(i64, i64, f64, f64)>,
) {
    let e = settings.dtype.bytes();
    for (i, op) in graph.ops.iter().enumerate() {
        if op.is_input {
            continue;
        }
        let id = i as i64 + 1;
        let back = backward_cost(&op.cost);
        let memory = backward_memory(&op.cost, e);
        nodes.push(Node {
            id: id + n,
            name: Some(format!("{}_grad", op.name)),
            module: op.module.clone(),
            fpga_latency: back.time_ms(&settings.accelerator, settings.dtype),
            cpu_latency: back.time_ms(&settings.cpu, settings.dtype),
            size_bytes: memory.total_bytes(),
            supported_on_accelerator: true,
            is_backward: true,
            color_class: Some(id),
            layer_id: op.layer_id,
            memory: Some(memory),
        });
        let out = op.cost.output_bytes;
        edges.push((id, id + n, transfer_ms(out, &settings.accelerator), out));
        let grad = op.cost.input_bytes;
        for &u in &op.inputs {
            if !graph.ops[u].is_input {
                edges.push((
                    id + n,
                    u as i64 + 1 + n,
                    transfer_ms(grad, &settings.accelerator),
                    grad,
                ));
            }
        }
    }
}

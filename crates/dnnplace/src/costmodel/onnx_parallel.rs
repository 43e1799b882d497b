//! Tensor-parallel options of an imported ONNX transformer, Megatron-style
//! (`dnnplace import MODEL.onnx --tensor-parallel 2,4`; `docs/parallel.md`, "A workload
//! JSON"): the layers of the chain, how each operator divides among a TP group of `t`
//! devices, and each node's priced option at every degree, written into the workload JSON
//! ([`crate::io::tensor_parallel_json`]) for `plan WORKLOAD.json --parallel 3d`.
//!
//! **Layers** ([`assign_layers`]). An operator whose module path names a block
//! (`transformer.h.3.attn.c_attn`, `model.layers.3.mlp`: [`parallel::block_of`]) is in that
//! block's layer `N`; with `L` blocks, an operator outside the blocks is in layer −1 (the
//! embeddings) when it comes before the last block's last operator and reads only graph
//! inputs or layer −1, in the layer of its latest input when it comes between blocks, and
//! in layer `L` (the head) after the last block. A model without a block is refused.
//!
//! **Splits** ([`splits`]), in operator order, from the module path's split
//! ([`parallel::split_of_path`], the table the transformer generator uses) and the data flow
//! (whether an operator reads a tensor that is split among the group, "split" below):
//!
//! | module path says | operator | its split | output split |
//! | --- | --- | --- | --- |
//! | column (`c_attn`, `q_proj`, `gate_proj`, `lm_head`, …) | the matrix product | column: FLOPs, weights, output `/t` | yes |
//! | row (`c_proj`, `o_proj`, `down_proj`, …) | the matrix product | row: FLOPs, weights, input `/t` | no |
//! | vocabulary (`wte`, `embed_tokens`, …) | the table lookup | table `/t` | no |
//! | anything | any other operator reading a split tensor | per head / column: FLOPs, input, output `/t` | yes |
//! | column, row, vocabulary, per-head modules (`attn`, `self_attn`, `mlp`, `act_fn`, …) | any other operator, reading no split tensor | replicated | no |
//! | replicated (norms, residual adds, position embeddings, unknown) | any operator reading no split tensor | replicated | no |
//!
//! Refused ([`OnnxTpError::Unplaced`], naming the node): a column-parallel product that reads
//! a split tensor, a row-parallel product that reads none, and an operator whose module path
//! says replicated but that reads a split tensor — the graph is not Megatron's block, and
//! guessing would misprice it.
//!
//! **Degrees** ([`check_degree`]): `t` must divide, read from the graph's shapes, the output
//! features of every column-parallel product (`3h`, `h`, the key/value width, the FFN width),
//! the input features of every row-parallel product (`h`, the FFN width), the heads of every
//! split reshape into heads (rank 3 → 4, `[b, s, heads, d]`: axis −2; the query heads and
//! the key/value heads), and the heads of every split product of two activations (the
//! scores and the context, `[b, heads, s, ·]`: axis −3). Else [`OnnxTpError::Indivisible`]
//! names the node. The vocabulary (the embedding table's rows, the head's output features)
//! is not checked: Megatron-LM pads it to a multiple of `t`
//! ([`parallel::is_vocabulary_path`]); it is priced at `V/t`, the padding's fewer than `t`
//! rows left out, as the transformer generator's road does.
//!
//! **All-reduces** (`x = b·s·h·e` bytes each, the full tensor at any `t`): forward, after
//! every row-parallel product (its output bytes) and the vocabulary-parallel lookup (its
//! output bytes); backward, on the gradient of the input of each group of column-parallel
//! products reading the same input — the column products of one parent module
//! (`self_attn.{q,k,v}_proj`, `mlp.{gate,up}_proj`, `attn.c_attn`, `lm_head`) are one group,
//! its all-reduce on the first one's backward node (its input bytes). So a block adds two
//! forward and two backward, the embeddings one forward, a column-parallel head one backward.
//!
//! **Options** ([`tensor_parallel_options`]): at every degree `t > 1`, node `v` of forward
//! operator `o` gets `fpgaLatency` = the roofline ([`crate::costmodel::operators`]) of
//! [`parallel::divided`]`(o, split, t)` on the workload's accelerator, `weightBytes` its
//! divided parameters, `size` = weights + divided output (the importer's own rule,
//! [`crate::costmodel::graph`]); its backward node the training rule's backward of the
//! divided cost ([`training::backward_cost`], [`training::backward_memory`]). At `t = 1` the
//! node's own numbers (no option is written). Node ids are those of
//! [`crate::costmodel::to_workload`]: operator `i` is node `i + 1`, its backward `i + 1 + n`.
//!
//! Complexity: O((n + m) · |T|) for `n` operators, `m` operator inputs and `|T|` degrees.

use std::collections::HashSet;

use super::graph::{CostSettings, OpGraph};
use super::onnx::OpShapes;
use super::operators::OpClass;
use super::parallel::{self, divided, Split};
use super::training;
use crate::io::tensor_parallel_json::{TpOption, TpOptions};
use crate::model::NodeMemory;

/// Why an imported model cannot be given TP options (module documentation).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum OnnxTpError {
    #[error("--tensor-parallel: no operator's module path names a transformer block (h.N, layers.N, layer.N); export the model with its module scopes (torch.onnx.export names nodes /transformer/h.0/attn/...)")]
    NoBlocks,
    #[error("--tensor-parallel: degree 0 (each degree is at least 1)")]
    ZeroDegree,
    #[error("--tensor-parallel {degree}: node '{node}' ({op_type}, shape {shape:?}) splits {what} {count}, which {degree} does not divide")]
    Indivisible {
        degree: usize,
        node: String,
        op_type: String,
        shape: Vec<usize>,
        what: &'static str,
        count: usize,
    },
    #[error("--tensor-parallel: node '{node}' ({op_type}, module {module}) {why}; the graph is not a Megatron-style block there, so its split is not guessed")]
    Unplaced {
        node: String,
        op_type: String,
        module: String,
        why: String,
    },
}

/// How one imported operator divides among a TP group (module documentation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpSplit {
    pub split: Split,
    /// Bytes of the all-reduce its forward node adds at `t > 1` (0: none).
    pub forward_all_reduce_bytes: f64,
    /// Bytes of the all-reduce its backward node adds at `t > 1` (0: none).
    pub backward_all_reduce_bytes: f64,
}

/// Sets every operator's `layer_id` (module documentation); returns the number of blocks.
pub fn assign_layers(graph: &mut OpGraph) -> Result<usize, OnnxTpError> {
    let blocks: Vec<Option<usize>> = graph
        .ops
        .iter()
        .map(|o| o.module.as_deref().and_then(parallel::block_of))
        .collect();
    let last = blocks
        .iter()
        .rposition(Option::is_some)
        .ok_or(OnnxTpError::NoBlocks)?;
    let head = blocks.iter().flatten().max().map_or(0, |&b| b as i64 + 1);
    for (i, block) in blocks.iter().enumerate() {
        let layer = match block {
            Some(b) => *b as i64,
            None if graph.ops[i].is_input => -1,
            None if i > last => head,
            None => graph.ops[i]
                .inputs
                .iter()
                .map(|&u| graph.ops[u].layer_id.unwrap_or(-1))
                .max()
                .unwrap_or(-1),
        };
        graph.ops[i].layer_id = Some(layer);
    }
    Ok(head as usize)
}

/// The split of every operator and the all-reduces it adds (module documentation).
pub fn splits(graph: &OpGraph) -> Result<Vec<OpSplit>, OnnxTpError> {
    let mut out: Vec<OpSplit> = Vec::with_capacity(graph.ops.len());
    let mut split_out = vec![false; graph.ops.len()];
    let mut column_groups: HashSet<String> = HashSet::new();
    for (i, op) in graph.ops.iter().enumerate() {
        let module = op.module.as_deref().unwrap_or("");
        let says = if op.is_input || module.is_empty() {
            Split::Replicated
        } else {
            parallel::split_of_path(module)
        };
        let reads_split = op.inputs.iter().any(|&u| split_out[u]);
        let product = op.cost.class == OpClass::Matmul;
        let unplaced = |why: &str| OnnxTpError::Unplaced {
            node: op.name.clone(),
            op_type: op.op_type.clone(),
            module: if module.is_empty() { "none" } else { module }.to_string(),
            why: why.to_string(),
        };
        let split = match says {
            Split::Column if product && reads_split => {
                return Err(unplaced(
                    "is a column-parallel product but reads a tensor already split among the group",
                ))
            }
            Split::Row if product && !reads_split => {
                return Err(unplaced(
                    "is a row-parallel product but reads no split tensor",
                ))
            }
            Split::Replicated if reads_split => {
                return Err(unplaced(
                    "reads a tensor split among the TP group, but its module path says it is replicated (a norm, residual add, or unknown module)",
                ))
            }
            Split::Column | Split::Row if product => says,
            Split::VocabParallel if op.cost.class == OpClass::Lookup => says,
            _ if reads_split => Split::Sharded,
            _ => Split::Replicated,
        };
        split_out[i] = matches!(split, Split::Column | Split::Sharded);
        let (forward, backward) = match split {
            Split::Row | Split::VocabParallel => (op.cost.output_bytes, 0.0),
            Split::Column => {
                let parent = module.rsplit_once('.').map_or("", |(p, _)| p).to_string();
                let first = column_groups.insert(parent);
                (0.0, if first { op.cost.input_bytes } else { 0.0 })
            }
            _ => (0.0, 0.0),
        };
        out.push(OpSplit {
            split,
            forward_all_reduce_bytes: forward,
            backward_all_reduce_bytes: backward,
        });
    }
    Ok(out)
}

/// Whether degree `t` divides what `splits` divides, read from `shapes` (module
/// documentation).
pub fn check_degree(
    graph: &OpGraph,
    shapes: &[OpShapes],
    splits: &[OpSplit],
    t: usize,
) -> Result<(), OnnxTpError> {
    if t == 0 {
        return Err(OnnxTpError::ZeroDegree);
    }
    for ((op, sh), s) in graph.ops.iter().zip(shapes).zip(splits) {
        if op
            .module
            .as_deref()
            .is_some_and(parallel::is_vocabulary_path)
        {
            continue;
        }
        let first_input = sh.inputs.first().cloned().flatten().unwrap_or_default();
        let out = &sh.output;
        let at = |axis_from_end: usize| -> Option<usize> {
            out.len()
                .checked_sub(axis_from_end)
                .and_then(|a| out.get(a).copied())
        };
        let (what, count, shape) = match s.split {
            Split::Column => ("output features", at(1), out.clone()),
            Split::Row => ("input features", first_input.last().copied(), first_input),
            Split::Sharded if op.op_type == "Reshape" && out.len() == 4 && rank_in(sh) == 3 => {
                ("attention heads", at(2), out.clone())
            }
            Split::Sharded if op.op_type == "MatMul" && op.inputs.len() == 2 && out.len() == 4 => {
                ("attention heads", at(3), out.clone())
            }
            _ => continue,
        };
        if let Some(count) = count.filter(|c| c % t != 0) {
            return Err(OnnxTpError::Indivisible {
                degree: t,
                node: op.name.clone(),
                op_type: op.op_type.clone(),
                shape,
                what,
                count,
            });
        }
    }
    Ok(())
}

/// The rank of an operator's first input.
fn rank_in(sh: &OpShapes) -> usize {
    sh.inputs
        .first()
        .and_then(|s| s.as_ref())
        .map_or(0, Vec::len)
}

/// Every node's options at the degrees above 1 (module documentation); `graph` priced by
/// `settings` is the workload the node ids refer to.
pub fn tensor_parallel_options(
    graph: &OpGraph,
    splits: &[OpSplit],
    settings: &CostSettings,
    degrees: &[usize],
) -> TpOptions {
    let n = graph.ops.len() as i64;
    let (a, dtype) = (&settings.accelerator, settings.dtype);
    let e = dtype.bytes();
    let some = |x: f64| if x > 0.0 { vec![x] } else { vec![] };
    let mut options = TpOptions::new();
    for (i, (op, s)) in graph.ops.iter().zip(splits).enumerate() {
        let id = i as i64 + 1;
        for &t in degrees.iter().filter(|&&t| t > 1) {
            let fw = divided(&op.cost, s.split, t);
            let memory = NodeMemory {
                weight_bytes: fw.param_bytes,
                ..NodeMemory::default()
            };
            options.entry(id).or_default().push(TpOption {
                degree: t,
                fpga_latency: fw.time_ms(a, dtype),
                size_bytes: memory.total_bytes() + fw.output_bytes,
                memory,
                all_reduce_bytes: some(s.forward_all_reduce_bytes),
            });
            if !settings.training || op.is_input {
                continue;
            }
            let memory = training::backward_memory(&fw, e);
            options.entry(id + n).or_default().push(TpOption {
                degree: t,
                fpga_latency: training::backward_cost(&fw).time_ms(a, dtype),
                size_bytes: memory.total_bytes(),
                memory,
                all_reduce_bytes: some(s.backward_all_reduce_bytes),
            });
        }
    }
    options
}

/// Layers, splits and the degrees checked: what [`tensor_parallel_options`] needs, for an
/// imported `graph` with its `shapes` (module documentation). `degrees` are sorted and
/// deduplicated; 1 needs no check.
pub fn prepare(
    graph: &mut OpGraph,
    shapes: &[OpShapes],
    degrees: &mut Vec<usize>,
) -> Result<Vec<OpSplit>, OnnxTpError> {
    degrees.sort_unstable();
    degrees.dedup();
    if degrees.first() == Some(&0) {
        return Err(OnnxTpError::ZeroDegree);
    }
    assign_layers(graph)?;
    let s = splits(graph)?;
    for &t in degrees.iter().filter(|&&t| t > 1) {
        check_degree(graph, shapes, &s, t)?;
    }
    Ok(s)
}

//! Tensor-parallel costs of the transformer generator's operators, Megatron-style: the
//! [`ChainCosts`] of a transformer for one micro-batch size, one profile and a set of TP
//! degrees (`docs/parallel.md`).
//!
//! **Splits.** At TP degree `t`, each operator of [`crate::costmodel::transformer`] is one of
//!
//! | split | operators | divided by `t` |
//! | --- | --- | --- |
//! | column-parallel Linear | `query`/`key`/`value`, `c_attn`, `q/k/v_proj`, `intermediate.dense`, `mlp.c_fc`, `gate_proj`, `up_proj`, `lm_head`, `cls.predictions.decoder` | FLOPs, weights, output |
//! | row-parallel Linear | `attention.output.dense`, `attn.c_proj`, `o_proj`, `output.dense`, `mlp.c_proj`, `down_proj` | FLOPs, weights, input |
//! | per head / per column | attention `scores`, `softmax`, `context`, `rotary`; the MLP activation (`mlp.act`, `act_fn`, `intermediate_act_fn`) and gating product; an imported model's attention and MLP modules' own operators (`attn`, `self_attn`, `attention.self`, `mlp`) | FLOPs, input, output |
//! | vocabulary-parallel embedding | `word_embeddings`, `wte`, `embed_tokens` | table |
//! | replicated | norms, residual adds, position and token-type embeddings, the embedding sum, BERT's pooler, prediction transform and NSP head | nothing |
//!
//! The table is read by [`split_of_path`] on a generated operator's name or an imported
//! operator's module path (a wrapper's prefix allowed: `m.transformer.wte`), the one table
//! of both roads ([`crate::costmodel::onnx_parallel`] for the imported one).
//! (row-parallel biases are divided with their weights: `h` elements of `h·f`.) Each
//! operator's time at `t` is the roofline ([`crate::costmodel::operators`]) of its divided
//! cost, its backward the one of [`crate::costmodel::training`]; at `t = 1` every number is
//! the operator's own, so the units' times are the workload's `fpgaLatency` sums.
//!
//! **Collectives TP adds** (`x = b·s·h·e` bytes each): a block all-reduces twice forward
//! (after the row-parallel attention output and MLP output) and twice backward (the
//! gradients of the column-parallel inputs); the vocabulary-parallel embedding once forward;
//! a head with a column-parallel projection once backward.
//!
//! **Sequence parallelism** (Korthikanti et al. 2022; Megatron-LM `--sequence-parallel`,
//! torchtitan's TP plan always): at `t > 1` the operators a block replicates (its norms,
//! residual adds) and the final norm (`transformer.ln_f`, `model.norm`) are split along the
//! sequence: FLOPs, input and output divided by `t`, their parameters whole. Each all-reduce
//! becomes a reduce-scatter and an all-gather, which move together what it moves (module
//! [`crate::model::parallel`]: `all-reduce(x, n) = 2 · all-gather(x, n)`), so the counts per
//! unit stay (the embedding's forward reduce-scatter and backward all-gather are counted as
//! its one forward all-reduce, the head's all-gather and reduce-scatter as its one backward
//! all-reduce: the same time per micro-batch). A unit after the first keeps its input
//! sequence-sharded under recomputation (`checkpoint_bytes / t`). Not priced: the
//! all-reduce of the replicated norm parameters' gradients over the TP group (`4h` values a
//! block), and transfers between stages stay whole per TP rank, as without it.
//!
//! **Memory per device at `t`**: weights and gradients = the divided parameter bytes;
//! optimizer state = `P·(8 + 4·[e = 2])` for the divided parameter count `P`; the stash per
//! micro-batch = the divided forward inputs of every operator with a backward node.
//!
//! **Recomputation**: a unit keeps its input (`checkpoint_bytes`: the graph inputs for the
//! first unit, the forward transfers across the cut before it otherwise) per micro-batch.
//!
//! **Cuts**: the chain's units are the `layerId` groups in order; every operator input comes
//! from its own unit or the one before (checked). The transfers across the cut before unit
//! `c` are, by MODEL.md's rule, one per producer: forward, each operator of unit `c − 1` read
//! in unit `c` (its output bytes); backward, each operator `v` of unit `c` with an input from
//! unit `c − 1` that is not a graph input (its gradient node sends `input_bytes(v)`).
//! Every TP rank of the receiving stage receives the whole tensor.
//!
//! Complexity: O(|T| · n) for `n` operators and `|T|` TP degrees.

use super::graph::{Op, OpGraph};
use super::operators::{DType, OpClass, OpCost};
use super::profiles::DeviceProfile;
use super::training;
use super::transformer::{transformer_graph, TransformerSpec};
use crate::model::parallel::{ChainCosts, CutTransfers, TpCost, Unit};

/// How an operator is divided among a TP group (module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    Column,
    Row,
    Sharded,
    VocabParallel,
    Replicated,
}

const COLUMN: [&str; 11] = [
    ".query",
    ".key",
    ".value",
    ".c_attn",
    ".q_proj",
    ".k_proj",
    ".v_proj",
    ".intermediate.dense",
    ".mlp.c_fc",
    ".gate_proj",
    ".up_proj",
];
const ROW: [&str; 5] = [
    ".output.dense",
    ".attn.c_proj",
    ".mlp.c_proj",
    ".o_proj",
    ".down_proj",
];
const SHARDED: [&str; 8] = [
    ".scores", ".softmax", ".context", ".rotary", "_act_fn", ".act_fn", ".mlp.act", ".mlp.mul",
];
const VOCAB: [&str; 3] = [
    "bert.embeddings.word_embeddings",
    "transformer.wte",
    "model.embed_tokens",
];

/// Whether the TP group also splits the sequence (module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SequenceParallel {
    #[default]
    Off,
    On,
}

/// The final norms sequence parallelism splits beside the blocks' replicated operators.
const FINAL_NORMS: [&str; 2] = ["transformer.ln_f", "model.norm"];

/// The split of operator `op` of `spec`'s graph under `sp`: [`split_of`], except that with
/// sequence parallelism a replicated operator inside a block, or a final norm, is
/// [`Split::Sharded`] (divided along the sequence; its parameters whole).
pub fn split_with(op: &Op, spec: &TransformerSpec, sp: SequenceParallel) -> Split {
    let split = split_of(op);
    let in_block = op
        .layer_id
        .is_some_and(|l| l >= 0 && (l as usize) < spec.layers);
    let along_sequence = in_block || FINAL_NORMS.contains(&op.name.as_str());
    if sp == SequenceParallel::On && split == Split::Replicated && !op.is_input && along_sequence {
        Split::Sharded
    } else {
        split
    }
}

/// The split of a generated operator, by its name (module documentation).
pub fn split_of(op: &Op) -> Split {
    if op.is_input {
        Split::Replicated
    } else {
        split_of_path(&op.name)
    }
}

/// Modules whose own operators (not those of a child Linear) work per head or per column:
/// an imported model's attention and MLP modules (`…h.3.attn/MatMul`,
/// `…layers.3.self_attn/Softmax`, `…attention.self/MatMul`, `…layers.3.mlp/Mul`). The
/// generator names these operators `<module>.scores`, `.softmax`, … ([`SHARDED`]).
const SHARDED_MODULES: [&str; 4] = [".attn", ".self_attn", ".attention.self", ".mlp"];

/// The modules holding the blocks: `transformer.h.N`, `model.layers.N`,
/// `bert.encoder.layer.N`.
const BLOCK_CONTAINERS: [&str; 3] = ["h", "layers", "layer"];

/// Whether `path` is `name` or ends with `.name` (an imported module path may carry a
/// wrapper's prefix: `m.transformer.wte`).
fn is_path(path: &str, name: &str) -> bool {
    path == name
        || path
            .strip_suffix(name)
            .is_some_and(|rest| rest.ends_with('.'))
}

/// The split of the operator or module at `path`: a generated operator's name
/// (`transformer.h.3.attn.c_attn`), or an imported operator's module path
/// (`model.layers.3.self_attn.q_proj`, `m.transformer.h.3.attn`) — the one table of names
/// both roads use (module documentation). For a module, the split is its matrix product's;
/// [`crate::costmodel::onnx_parallel`] places the module's other operators by data flow.
pub fn split_of_path(n: &str) -> Split {
    let bert_head = n.starts_with("cls.") || n.contains(".cls.");
    if VOCAB.iter().any(|v| is_path(n, v)) {
        Split::VocabParallel
    } else if is_path(n, "lm_head")
        || is_path(n, "cls.predictions.decoder")
        || COLUMN.iter().any(|s| n.ends_with(s))
    {
        Split::Column
    } else if ROW.iter().any(|s| n.ends_with(s)) && !bert_head {
        Split::Row
    } else if (SHARDED.iter().any(|s| n.ends_with(s))
        || SHARDED_MODULES.iter().any(|s| n.ends_with(s)))
        && !bert_head
    {
        Split::Sharded
    } else {
        Split::Replicated
    }
}

/// Whether `path` is a vocabulary operator: a vocabulary-parallel embedding, or the head's
/// projection onto the vocabulary (`lm_head`, `cls.predictions.decoder`). Megatron-LM pads
/// the vocabulary to a multiple of the TP degree (`--make-vocab-size-divisible-by`), so a
/// degree need not divide it.
pub fn is_vocabulary_path(path: &str) -> bool {
    VOCAB.iter().any(|v| is_path(path, v))
        || is_path(path, "lm_head")
        || is_path(path, "cls.predictions.decoder")
}

/// The block index in `path` (`model.layers.3.mlp` → 3): the number after the first
/// block container atom ([`BLOCK_CONTAINERS`]), or `None` outside the blocks.
pub fn block_of(path: &str) -> Option<usize> {
    let atoms: Vec<&str> = path.split('.').collect();
    atoms.windows(2).find_map(|w| {
        (BLOCK_CONTAINERS.contains(&w[0]) && !w[1].is_empty())
            .then(|| w[1].parse::<usize>().ok())
            .flatten()
    })
}

/// `cost` divided among `t` devices by `split`; `cost` itself when `t = 1`.
pub fn divided(cost: &OpCost, split: Split, t: usize) -> OpCost {
    if t == 1 || split == Split::Replicated {
        return cost.clone();
    }
    let k = 1.0 / t as f64;
    let (fi, fp, fo, work) = match split {
        Split::Column => (1.0, k, k, k),
        Split::Row => (k, k, 1.0, k),
        Split::Sharded => (k, 1.0, k, k),
        Split::VocabParallel => (1.0, k, 1.0, 1.0),
        Split::Replicated => unreachable!(),
    };
    // A gather's table is not in its bytes moved; every other operator's parameters are.
    let params_moved = if split == Split::VocabParallel {
        0.0
    } else {
        1.0
    };
    let less = (1.0 - fi) * cost.input_bytes
        + params_moved * (1.0 - fp) * cost.param_bytes
        + (1.0 - fo) * cost.output_bytes;
    OpCost {
        class: cost.class,
        flops: work * cost.flops,
        macs: work * cost.macs,
        bytes_moved: cost.bytes_moved - less,
        param_bytes: fp * cost.param_bytes,
        output_bytes: fo * cost.output_bytes,
        input_bytes: fi * cost.input_bytes,
    }
}

/// The TP degrees `1 ≤ t ≤ max` that `spec` can be split by: `t` divides the heads, the
/// key/value heads and the feed-forward width.
pub fn valid_tp_degrees(spec: &TransformerSpec, max: usize) -> Vec<usize> {
    (1..=max)
        .filter(|&t| {
            spec.heads.is_multiple_of(t)
                && spec.kv_heads.is_multiple_of(t)
                && spec.ffn.is_multiple_of(t)
        })
        .collect()
}

/// The chain costs of `spec` at micro-batch `spec.batch` on `profile` (module
/// documentation). `tp_degrees` must start with 1 and each divide the heads, the key/value
/// heads and the feed-forward width.
pub fn transformer_chain(
    spec: &TransformerSpec,
    dtype: DType,
    profile: &DeviceProfile,
    tp_degrees: &[usize],
) -> Result<ChainCosts, String> {
    transformer_chain_with(spec, dtype, profile, tp_degrees, SequenceParallel::Off)
}

/// [`transformer_chain`] with or without sequence parallelism.
pub fn transformer_chain_with(
    spec: &TransformerSpec,
    dtype: DType,
    profile: &DeviceProfile,
    tp_degrees: &[usize],
    sp: SequenceParallel,
) -> Result<ChainCosts, String> {
    if tp_degrees.first() != Some(&1) {
        return Err("the TP degrees must start with 1".into());
    }
    let valid = valid_tp_degrees(spec, *tp_degrees.iter().max().unwrap_or(&1));
    if let Some(t) = tp_degrees.iter().find(|t| !valid.contains(t)) {
        return Err(format!(
            "tensor-parallel degree {t} does not divide the model's heads ({}), key/value heads ({}) and feed-forward width ({})",
            spec.heads, spec.kv_heads, spec.ffn
        ));
    }
    let graph = transformer_graph(spec, dtype)?;
    let unit_of = unit_indices(&graph)?;
    let units = (0..=*unit_of.iter().max().unwrap_or(&0))
        .map(|u| priced_unit(&graph, &unit_of, u, (spec, sp), dtype, profile, tp_degrees))
        .collect::<Vec<_>>();
    let peak = match dtype {
        DType::Fp32 => profile.peak_fp32_flops,
        DType::Tf32 => profile.peak_tf32_flops,
        DType::Fp16 | DType::Bf16 => profile.peak_fp16_flops,
    };
    let model_flops = units.iter().map(|u| u.costs[0].flops).sum();
    let cuts = cut_transfers(&graph, &unit_of, units.len());
    let mut units = units;
    for (u, unit) in units.iter_mut().enumerate() {
        let input: f64 = if u == 0 {
            graph
                .ops
                .iter()
                .filter(|o| o.is_input)
                .map(|o| o.cost.output_bytes)
                .sum()
        } else {
            cuts[u].forward.iter().sum()
        };
        for (c, &t) in unit.costs.iter_mut().zip(tp_degrees) {
            let sharded = sp == SequenceParallel::On && u > 0;
            c.checkpoint_bytes = if sharded { input / t as f64 } else { input };
        }
    }
    Ok(ChainCosts {
        tp_degrees: tp_degrees.to_vec(),
        micro_batch: spec.batch,
        sequence_parallel: sp == SequenceParallel::On,
        cuts,
        units,
        peak_flops: peak,
        model_flops,
    })
}

/// Unit index of every operator: `layerId` groups in order of first appearance; an error
/// when an operator reads from a unit other than its own or the one before.
fn unit_indices(graph: &OpGraph) -> Result<Vec<usize>, String> {
    let mut ids: Vec<i64> = Vec::new();
    let mut unit_of = Vec::with_capacity(graph.ops.len());
    for op in &graph.ops {
        let id = op.layer_id.unwrap_or(i64::MIN);
        if ids.last() != Some(&id) {
            if ids.contains(&id) {
                return Err(format!(
                    "operator '{}': layer {id} is not contiguous",
                    op.name
                ));
            }
            ids.push(id);
        }
        let u = ids.len() - 1;
        if let Some(&bad) = op.inputs.iter().find(|&&i| unit_of[i] + 1 < u) {
            return Err(format!(
                "operator '{}' reads '{}' from two or more layers back: not a chain of layers",
                op.name, graph.ops[bad].name
            ));
        }
        unit_of.push(u);
    }
    Ok(unit_of)
}

/// Unit `u`'s costs at every TP degree.
fn priced_unit(
    graph: &OpGraph,
    unit_of: &[usize],
    u: usize,
    (spec, sp): (&TransformerSpec, SequenceParallel),
    dtype: DType,
    profile: &DeviceProfile,
    tp_degrees: &[usize],
) -> Unit {
    let ops: Vec<&Op> = graph
        .ops
        .iter()
        .zip(unit_of)
        .filter(|(_, &x)| x == u)
        .map(|(o, _)| o)
        .collect();
    let layer_id = ops[0].layer_id.unwrap_or(0);
    let name = if layer_id < 0 {
        "embeddings".to_string()
    } else if layer_id as usize >= spec.layers {
        "head".to_string()
    } else {
        format!("layers.{layer_id}")
    };
    let (forward_ar, backward_ar) = if layer_id >= 0 && (layer_id as usize) < spec.layers {
        (2, 2)
    } else {
        let vocab = ops.iter().any(|o| split_of(o) == Split::VocabParallel);
        let head = ops
            .iter()
            .any(|o| split_of(o) == Split::Column && o.cost.class == OpClass::Matmul);
        (u32::from(vocab), u32::from(head && !vocab))
    };
    let x = (spec.batch * spec.seq * spec.hidden) as f64 * dtype.bytes();
    let costs = tp_degrees
        .iter()
        .map(|&t| {
            let mut c = unit_cost(&ops, |op| split_with(op, spec, sp), t, (dtype, profile));
            if t > 1 {
                (c.tp_forward_all_reduces, c.tp_backward_all_reduces) = (forward_ar, backward_ar);
                c.tp_all_reduce_bytes = x;
                c.tp_backward_all_reduce_bytes = x;
            }
            c
        })
        .collect();
    Unit {
        name,
        layer_id,
        costs,
    }
}

/// The sums over `ops` divided by `t` (module documentation).
fn unit_cost(
    ops: &[&Op],
    split: impl Fn(&Op) -> Split,
    t: usize,
    (dtype, profile): (DType, &DeviceProfile),
) -> TpCost {
    let e = dtype.bytes();
    let mut c = TpCost::default();
    for op in ops {
        let fw = divided(&op.cost, split(op), t);
        c.forward_ms += fw.time_ms(profile, dtype);
        c.flops += fw.flops;
        c.weight_bytes += fw.param_bytes;
        if op.is_input {
            continue;
        }
        let bw = training::backward_cost(&fw);
        c.backward_ms += bw.time_ms(profile, dtype);
        c.flops += bw.flops;
        let held = training::backward_memory(&fw, e);
        c.gradient_bytes += held.gradient_bytes;
        c.optimizer_bytes += held.optimizer_bytes;
        c.activation_bytes += held.activation_bytes;
    }
    c
}

/// The transfers across every cut (module documentation).
fn cut_transfers(graph: &OpGraph, unit_of: &[usize], units: usize) -> Vec<CutTransfers> {
    let mut cuts = vec![CutTransfers::default(); units + 1];
    let mut sent = vec![false; graph.ops.len()];
    for (v, op) in graph.ops.iter().enumerate() {
        let mut gradient = false;
        for &u in &op.inputs {
            if unit_of[u] + 1 == unit_of[v] {
                if !sent[u] {
                    sent[u] = true;
                    cuts[unit_of[v]]
                        .forward
                        .push(graph.ops[u].cost.output_bytes);
                }
                gradient |= !graph.ops[u].is_input;
            }
        }
        if gradient {
            cuts[unit_of[v]].backward.push(op.cost.input_bytes);
        }
    }
    cuts
}

/// A spec with another batch size (the micro-batch).
pub fn with_batch(spec: &TransformerSpec, batch: usize) -> TransformerSpec {
    TransformerSpec {
        batch,
        ..spec.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::costmodel::transformer::Style;
    use crate::model::profiles::find_profile;

    #[test]
    fn a_block_divides_as_megatron_does() {
        let spec = TransformerSpec::new(Style::Gpt2, 2, 64, 4, 16, 2);
        let h100 = find_profile("h100", &[]).unwrap();
        let chain = transformer_chain(&spec, DType::Fp16, &h100, &[1, 2, 4]).unwrap();
        assert_eq!(chain.len(), 4);
        assert_eq!(
            chain
                .units
                .iter()
                .map(|u| u.name.as_str())
                .collect::<Vec<_>>(),
            ["embeddings", "layers.0", "layers.1", "head"]
        );
        let (b, s, h) = (2.0, 16.0, 64.0);
        let block = &chain.units[1];
        // Matrix-product FLOPs forward: 24bsh² + 4bs²h, all divided; params 12h² + 13h of
        // which the LayerNorms' 4h are replicated.
        let g = transformer_graph(&spec, DType::Fp16).unwrap();
        let fw_flops = |t: usize| -> f64 {
            g.ops
                .iter()
                .filter(|o| o.layer_id == Some(0))
                .map(|o| divided(&o.cost, split_of(o), t).flops)
                .sum()
        };
        let matmul = 24.0 * b * s * h * h + 4.0 * b * s * s * h;
        let replicated = 8.0 * 2.0 * b * s * h + 2.0 * b * s * h; // two LayerNorms, two adds
        assert_eq!(fw_flops(1), spec.layer_flops_closed_form());
        let rest = spec.layer_flops_closed_form() - matmul - replicated;
        assert!((fw_flops(4) - (matmul / 4.0 + rest / 4.0 + replicated)).abs() < 1e-6);
        let params = |t: usize| block.costs[chain.tp_index(t).unwrap()].weight_bytes / 2.0;
        assert_eq!(params(1), 12.0 * h * h + 13.0 * h);
        assert_eq!(params(4), (12.0 * h * h + 9.0 * h) / 4.0 + 4.0 * h);
        assert_eq!(block.costs[2].tp_forward_all_reduces, 2);
        assert_eq!(block.costs[2].tp_all_reduce_bytes, b * s * h * 2.0);
        assert_eq!(block.costs[0].tp_forward_all_reduces, 0);
        assert_eq!(chain.units[0].costs[1].tp_forward_all_reduces, 1);
        assert_eq!(chain.units[3].costs[1].tp_backward_all_reduces, 1);
        // The cut before block 1 carries x forward, and two gradients back (ln_1 and the
        // residual add both read x).
        assert_eq!(chain.cuts[2].forward, vec![b * s * h * 2.0]);
        assert_eq!(chain.cuts[2].backward.len(), 2);
    }

    #[test]
    fn sequence_parallelism_divides_what_a_block_replicates() {
        let spec = TransformerSpec::new(Style::Gpt2, 2, 64, 4, 16, 2);
        let h100 = find_profile("h100", &[]).unwrap();
        let whole = transformer_chain(&spec, DType::Fp16, &h100, &[1, 4]).unwrap();
        let sp = transformer_chain_with(&spec, DType::Fp16, &h100, &[1, 4], SequenceParallel::On)
            .unwrap();
        assert!(sp.sequence_parallel && !whole.sequence_parallel);
        // At t = 1 nothing changes.
        for (a, b) in whole.units.iter().zip(&sp.units) {
            assert_eq!(a.costs[0], b.costs[0], "{}", a.name);
        }
        let (b, s, h) = (2.0, 16.0, 64.0);
        let x = b * s * h * 2.0;
        // Block 0 at t = 4: the two LayerNorms (8 FLOPs an element each) and the two
        // residual adds (1 each), 18·bsh FLOPs forward, are divided by 4 (the test above
        // counts them whole); the weights stay (the norms' 4h parameters whole on every rank).
        let (w, q) = (&whole.units[1].costs[1], &sp.units[1].costs[1]);
        let g = transformer_graph(&spec, DType::Fp16).unwrap();
        let fw = |sp: SequenceParallel| {
            g.ops
                .iter()
                .filter(|o| o.layer_id == Some(0))
                .map(|o| divided(&o.cost, split_with(o, &spec, sp), 4).flops)
                .sum::<f64>()
        };
        let replicated = 18.0 * b * s * h;
        let saved = fw(SequenceParallel::Off) - fw(SequenceParallel::On);
        assert!((saved - replicated * 3.0 / 4.0).abs() < 1e-6, "{saved}");
        assert_eq!(w.weight_bytes, q.weight_bytes);
        assert!(q.forward_ms < w.forward_ms && q.backward_ms < w.backward_ms);
        assert!(q.activation_bytes < w.activation_bytes);
        // The same collectives; the layer input kept under recomputation is a quarter.
        assert_eq!(
            (
                q.tp_forward_all_reduces,
                q.tp_backward_all_reduces,
                q.tp_all_reduce_bytes
            ),
            (2, 2, x)
        );
        assert_eq!(w.checkpoint_bytes, x);
        assert_eq!(q.checkpoint_bytes, x / 4.0);
        // The embeddings keep their inputs (token ids) whole; the final norm is split.
        assert_eq!(
            sp.units[0].costs[1].checkpoint_bytes,
            whole.units[0].costs[1].checkpoint_bytes
        );
        let head = |c: &ChainCosts| c.units[3].costs[1].forward_ms;
        assert!(head(&sp) < head(&whole));
    }

    #[test]
    fn degrees_that_do_not_divide_are_refused() {
        let mut spec = TransformerSpec::new(Style::Llama, 2, 64, 8, 16, 1);
        spec.kv_heads = 2;
        let h100 = find_profile("h100", &[]).unwrap();
        assert_eq!(valid_tp_degrees(&spec, 8), vec![1, 2]);
        let e = transformer_chain(&spec, DType::Bf16, &h100, &[1, 4]).unwrap_err();
        assert!(e.contains("degree 4"), "{e}");
    }
}

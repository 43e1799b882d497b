//! Synthetic operator graphs for scale tests: a GPT-like decoder with per-projection
//! attention branches, and *wide* graphs of parallel branches.
//!
//! Both are [`OpGraph`]s priced by the same roofline as everything else
//! ([`super::graph::to_workload`]); only the shapes are made up. Shapes: batch `b`,
//! sequence `s`, hidden `h`, heads `a` (head size `d = h/a`), `L` blocks, vocabulary `V`.
//!
//! # GPT-like ([`gpt_graph`])
//!
//! Pre-LayerNorm GPT-2 blocks exported operator by operator, the way an ONNX export of a
//! Hugging Face model looks (names `h.{l}.attn.q_proj`, …), with separate Q, K and V
//! projections so that attention fans out into three branches that meet again:
//!
//! ```text
//! x → ln_1 → {q,k,v}_proj → {q,k,v}_reshape → {q,k,v}_transpose
//! q_t, k_t → scores → scale → mask → softmax;  softmax, v_t → context
//! context → merge_transpose → merge_reshape → out_proj;  out_proj, x → residual_1
//! residual_1 → ln_2 → mlp.fc → mlp.gelu → mlp.proj;  mlp.proj, residual_1 → residual_2
//! ```
//!
//! 24 operators per block (residual edges skip 6 and 4 of them), plus 6 around them
//! (`input_ids`, `wte`, `wpe`, `embed_add`; `ln_f`, `lm_head`): `n = 24·L + 6` nodes,
//! so [`gpt_layers_for_nodes`] picks L for a node count. FLOPs per block as in
//! [`super::transformer`] (`24bsh² + 4bs²h` in products), reshapes and transposes are
//! pure data movement.
//!
//! # Wide ([`wide_graph`])
//!
//! `input → B₁ → … → B_m`, each block `B` a fan-out into `p` parallel branches of `r`
//! linear operators each, joined by one `Add`: branch `j` widens to `h·(1 + j mod 3)` and
//! back (`h → h_j → … → h_j → h`). `n = 1 + m·(p·r + 1)` nodes; the ideal lattice of
//! one block has `(r + 1)^p + 1` ideals, which is what makes these graphs hard for the
//! exact DP (8 branches of 4 operators: 390,626 per block).

use super::graph::{Op, OpGraph};
use super::operators::{self, DType, OpClass, OpCost};

/// Shapes of a GPT-like decoder (module documentation).
#[derive(Clone, Debug)]
pub struct GptSpec {
    pub layers: usize,
    pub hidden: usize,
    pub heads: usize,
    pub seq: usize,
    pub batch: usize,
    pub vocab: usize,
}

impl GptSpec {
    /// GPT-2 small shapes (h = 768, 12 heads, V = 50257) at s = 512, with `layers` blocks.
    pub fn gpt2(layers: usize) -> Self {
        GptSpec {
            layers,
            hidden: 768,
            heads: 12,
            seq: 512,
            batch: 1,
            vocab: 50257,
        }
    }

    fn validate(&self) -> Result<(), String> {
        super::transformer::check_dimensions(
            &[
                ("layers", self.layers),
                ("hidden", self.hidden),
                ("heads", self.heads),
                ("seq", self.seq),
                ("batch", self.batch),
                ("vocab", self.vocab),
            ],
            self.hidden,
            self.heads,
        )
    }
}

/// Operators per GPT-like block.
pub const GPT_OPS_PER_LAYER: usize = 24;

/// Operators outside the blocks (embeddings and head).
pub const GPT_EXTRA_OPS: usize = 6;

/// The number of blocks whose graph has about `nodes` operators (at least one).
pub fn gpt_layers_for_nodes(nodes: usize) -> usize {
    (nodes.saturating_sub(GPT_EXTRA_OPS) as f64 / GPT_OPS_PER_LAYER as f64)
        .round()
        .max(1.0) as usize
}

/// Builds the GPT-like graph (module documentation): the embeddings, `L` blocks, the
/// final LayerNorm and the head.
pub fn gpt_graph(spec: &GptSpec, dtype: DType) -> Result<OpGraph, String> {
    spec.validate()?;
    let mut gpt = GptBuilder::new(spec, dtype);
    let mut x = gpt.embeddings();
    for l in 1..=spec.layers {
        x = gpt.block(l, x);
    }
    gpt.head(x, spec.layers + 1);
    Ok(gpt.g)
}

/// The graph of [`gpt_graph`] as it grows, with the shapes its operators are priced by.
struct GptBuilder {
    g: OpGraph,
    /// Bytes per element.
    e: f64,
    /// Batch, sequence, hidden, heads, vocabulary, head size `d = h/a`, MLP width `4h`.
    b: usize,
    s: usize,
    h: usize,
    a: usize,
    v: usize,
    d: usize,
    f: usize,
}

impl GptBuilder {
    fn new(spec: &GptSpec, dtype: DType) -> GptBuilder {
        let (b, s, h, a, v) = (spec.batch, spec.seq, spec.hidden, spec.heads, spec.vocab);
        GptBuilder {
            g: OpGraph::default(),
            e: dtype.bytes(),
            b,
            s,
            h,
            a,
            v,
            d: h / a,
            f: 4 * h,
        }
    }

    /// `b·s`, the tokens of the batch.
    fn bs(&self) -> usize {
        self.b * self.s
    }

    /// `b·s·h`, the elements of one activation.
    fn bsh(&self) -> f64 {
        (self.bs() * self.h) as f64
    }

    /// `b·a·s²`, the elements of the attention scores.
    fn scores(&self) -> f64 {
        (self.b * self.a * self.s * self.s) as f64
    }

    /// Adds operator `name` of block `layer` (its module from [`module_of`]); its index.
    fn add(
        &mut self,
        name: String,
        op_type: &str,
        cost: OpCost,
        inputs: Vec<usize>,
        layer: usize,
    ) -> usize {
        let module = module_of(&name);
        self.g.push(Op {
            name,
            module,
            op_type: op_type.into(),
            cost,
            inputs,
            layer_id: Some(layer as i64),
            is_input: false,
        })
    }

    /// A linear layer `k → n` over the batch's tokens (with weights and bias).
    fn linear(&self, k: usize, n: usize) -> OpCost {
        operators::matmul(1, self.bs(), k, n, true, true, self.e)
    }

    /// An `Add` of two activations.
    fn residual(&self) -> OpCost {
        let bsh = self.bsh();
        operators::elementwise(bsh, 2.0 * bsh, 1.0, 0.0, self.e)
    }

    /// A LayerNorm of one activation.
    fn layer_norm(&self) -> OpCost {
        operators::normalization(self.bsh(), 2.0 * self.h as f64, true, self.e)
    }

    /// A reshape or transpose of one activation: data movement only.
    fn movement(&self) -> OpCost {
        operators::movement(self.bsh(), self.bsh(), 0.0, self.e)
    }

    /// `input_ids → {wte, wpe} → embed_add` (layer 0); the index of `embed_add`.
    fn embeddings(&mut self) -> usize {
        let (bs, bsh, hf, e) = (self.bs() as f64, self.bsh(), self.h as f64, self.e);
        let input = self.g.push(Op {
            name: "input_ids".into(),
            module: None,
            op_type: "Input".into(),
            cost: OpCost::input(bs * 8.0),
            inputs: vec![],
            layer_id: Some(0),
            is_input: true,
        });
        // Lookups ([`OpClass::Lookup`]): the forward is priced reading the table whole
        // (as an ONNX export's Gather is); the backward writes its dense gradient.
        let lookup = |rows: f64| OpCost {
            class: OpClass::Lookup,
            ..operators::movement(bs, bsh, rows * hf, e)
        };
        let wte_cost = lookup(self.v as f64);
        let wte = self.add("wte".into(), "Gather", wte_cost, vec![input], 0);
        let wpe_cost = lookup(self.s as f64);
        let wpe = self.add("wpe".into(), "Gather", wpe_cost, vec![input], 0);
        let cost = self.residual();
        self.add("embed_add".into(), "Add", cost, vec![wte, wpe], 0)
    }

    /// Block `l` (1-based, named `h.{l−1}`) on input `x`: attention, its residual, the
    /// MLP and its residual; the index of `residual_2`.
    fn block(&mut self, l: usize, x: usize) -> usize {
        let name = |op: &str| format!("h.{}.{op}", l - 1);
        let cost = self.layer_norm();
        let ln1 = self.add(name("ln_1"), "LayerNorm", cost, vec![x], l);
        let ctx = self.attention(l, ln1);
        let cost = self.linear(self.h, self.h);
        let out = self.add(name("attn.out_proj"), "MatMul", cost, vec![ctx], l);
        let cost = self.residual();
        let res1 = self.add(name("residual_1"), "Add", cost, vec![out, x], l);
        let cost = self.layer_norm();
        let ln2 = self.add(name("ln_2"), "LayerNorm", cost, vec![res1], l);
        let down = self.mlp(l, ln2);
        let cost = self.residual();
        self.add(name("residual_2"), "Add", cost, vec![down, res1], l)
    }

    /// Attention of block `l` on `ln1`: the Q, K and V branches (projection, reshape,
    /// transpose), scores, scale, mask, softmax, context, and the heads merged back; the
    /// index of `merge_reshape`.
    fn attention(&mut self, l: usize, ln1: usize) -> usize {
        let name = |op: &str| format!("h.{}.{op}", l - 1);
        let (b, s, a, d, e) = (self.b, self.s, self.a, self.d, self.e);
        let scores = self.scores();
        let mut heads = Vec::new();
        for p in ["q", "k", "v"] {
            let cost = self.linear(self.h, self.h);
            let proj = self.add(
                name(&format!("attn.{p}_proj")),
                "MatMul",
                cost,
                vec![ln1],
                l,
            );
            let cost = self.movement();
            let reshape = self.add(
                name(&format!("attn.{p}_reshape")),
                "Reshape",
                cost,
                vec![proj],
                l,
            );
            let cost = self.movement();
            heads.push(self.add(
                name(&format!("attn.{p}_transpose")),
                "Transpose",
                cost,
                vec![reshape],
                l,
            ));
        }
        let qk = operators::matmul(b * a, s, d, s, false, false, e);
        let sc = self.add(
            name("attn.scores"),
            "MatMul",
            qk,
            vec![heads[0], heads[1]],
            l,
        );
        let cost = operators::elementwise(scores, scores, 1.0, 0.0, e);
        let sc = self.add(name("attn.scale"), "Div", cost, vec![sc], l);
        let cost = operators::elementwise(scores, 2.0 * scores, 1.0, 0.0, e);
        let sc = self.add(name("attn.mask"), "Where", cost, vec![sc], l);
        let cost = operators::softmax(scores, e);
        let probs = self.add(name("attn.softmax"), "Softmax", cost, vec![sc], l);
        let pv = operators::matmul(b * a, s, s, d, false, false, e);
        let ctx = self.add(name("attn.context"), "MatMul", pv, vec![probs, heads[2]], l);
        let cost = self.movement();
        let ctx = self.add(
            name("attn.merge_transpose"),
            "Transpose",
            cost,
            vec![ctx],
            l,
        );
        let cost = self.movement();
        self.add(name("attn.merge_reshape"), "Reshape", cost, vec![ctx], l)
    }

    /// The MLP of block `l` on `ln2`: `fc` (h → 4h), GELU, `proj` (4h → h); the index of
    /// `proj`.
    fn mlp(&mut self, l: usize, ln2: usize) -> usize {
        let name = |op: &str| format!("h.{}.{op}", l - 1);
        let (h, f) = (self.h, self.f);
        let bsf = (self.bs() * f) as f64;
        let cost = self.linear(h, f);
        let up = self.add(name("mlp.fc"), "MatMul", cost, vec![ln2], l);
        let cost = operators::elementwise(bsf, bsf, 8.0, 0.0, self.e);
        let gelu = self.add(name("mlp.gelu"), "Gelu", cost, vec![up], l);
        let cost = self.linear(f, h);
        self.add(name("mlp.proj"), "MatMul", cost, vec![gelu], l)
    }

    /// `ln_f → lm_head` on `x`, as layer `top`.
    fn head(&mut self, x: usize, top: usize) {
        let cost = self.layer_norm();
        let lnf = self.add("ln_f".into(), "LayerNorm", cost, vec![x], top);
        let cost = operators::matmul(1, self.bs(), self.h, self.v, false, true, self.e);
        self.add("lm_head".into(), "MatMul", cost, vec![lnf], top);
    }
}

/// The module an operator of [`gpt_graph`] belongs to: itself for a layer with weights
/// (`h.3.attn.q_proj`, `h.3.ln_1`, `wte`), else the module around it (`h.3.attn` for
/// `h.3.attn.scores`).
fn module_of(name: &str) -> Option<String> {
    let last = name.rsplit('.').next().unwrap_or(name);
    let layer = last.ends_with("_proj")
        || matches!(
            last,
            "fc" | "proj" | "ln_1" | "ln_2" | "ln_f" | "lm_head" | "wte" | "wpe"
        );
    if layer {
        Some(name.to_string())
    } else {
        name.rsplit_once('.').map(|(parent, _)| parent.to_string())
    }
}

/// Shapes of a wide graph (module documentation).
#[derive(Clone, Debug)]
pub struct WideSpec {
    pub blocks: usize,
    pub branches: usize,
    /// Operators per branch.
    pub branch_ops: usize,
    pub hidden: usize,
    pub seq: usize,
    pub batch: usize,
}

impl WideSpec {
    /// `blocks` blocks of `branches` branches of `branch_ops` operators, h = 1024, s = 512.
    pub fn new(blocks: usize, branches: usize, branch_ops: usize) -> Self {
        WideSpec {
            blocks,
            branches,
            branch_ops,
            hidden: 1024,
            seq: 512,
            batch: 1,
        }
    }
}

/// Builds the wide graph (module documentation).
pub fn wide_graph(spec: &WideSpec, dtype: DType) -> Result<OpGraph, String> {
    for (name, v) in [
        ("blocks", spec.blocks),
        ("branches", spec.branches),
        ("branch-ops", spec.branch_ops),
        ("hidden", spec.hidden),
        ("seq", spec.seq),
        ("batch", spec.batch),
    ] {
        if v == 0 {
            return Err(format!("--{name} must be at least 1"));
        }
    }
    let e = dtype.bytes();
    let (h, bs) = (spec.hidden, spec.batch * spec.seq);
    let bsh = (bs * h) as f64;
    let mut g = OpGraph::default();
    let mut x = g.push(Op {
        name: "input".into(),
        module: None,
        op_type: "Input".into(),
        cost: OpCost::input(bsh * e),
        inputs: vec![],
        layer_id: Some(0),
        is_input: true,
    });
    for blk in 1..=spec.blocks {
        let mut ends = Vec::with_capacity(spec.branches);
        for j in 0..spec.branches {
            let width = h * (1 + j % 3);
            let mut prev = x;
            for i in 0..spec.branch_ops {
                let k_in = if i == 0 { h } else { width };
                let n_out = if i + 1 == spec.branch_ops { h } else { width };
                let cost = operators::matmul(1, bs, k_in, n_out, true, true, e);
                prev = g.push(Op {
                    name: format!("block{blk}.branch{j}.linear{i}"),
                    module: Some(format!("block{blk}.branch{j}.linear{i}")),
                    op_type: "MatMul".into(),
                    cost,
                    inputs: vec![prev],
                    layer_id: Some(blk as i64),
                    is_input: false,
                });
            }
            ends.push(prev);
        }
        let p = spec.branches as f64;
        x = g.push(Op {
            name: format!("block{blk}.join"),
            module: Some(format!("block{blk}")),
            op_type: "Add".into(),
            cost: operators::elementwise(bsh, p * bsh, p - 1.0, 0.0, e),
            inputs: ends,
            layer_id: Some(blk as i64),
            is_input: false,
        });
    }
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt_node_count_and_fan_out() {
        let g = gpt_graph(&GptSpec::gpt2(3), DType::Fp32).unwrap();
        assert_eq!(g.ops.len(), 3 * GPT_OPS_PER_LAYER + GPT_EXTRA_OPS);
        assert_eq!(
            gpt_layers_for_nodes(3 * GPT_OPS_PER_LAYER + GPT_EXTRA_OPS),
            3
        );
        // ln_1 feeds the three projections; residual_1 reads the block input.
        let ln1 = g.ops.iter().position(|o| o.name == "h.1.ln_1").unwrap();
        let readers = g.ops.iter().filter(|o| o.inputs.contains(&ln1)).count();
        assert_eq!(readers, 3);
        let res1 = g.ops.iter().find(|o| o.name == "h.1.residual_1").unwrap();
        assert_eq!(g.ops[res1.inputs[1]].name, "h.0.residual_2");
        // Products per block: 24bsh² + 4bs²h MACs·2, as the transformer generator's.
        let (s, h) = (512.0, 768.0);
        let macs: f64 = g
            .ops
            .iter()
            .filter(|o| o.name.starts_with("h.1."))
            .map(|o| o.cost.macs)
            .sum();
        assert_eq!(2.0 * macs, 24.0 * s * h * h + 4.0 * s * s * h);
    }

    #[test]
    fn wide_node_count_and_branches() {
        let g = wide_graph(&WideSpec::new(1, 8, 5), DType::Fp32).unwrap();
        assert_eq!(g.ops.len(), 1 + 8 * 5 + 1);
        let join = g.ops.last().unwrap();
        assert_eq!(join.inputs.len(), 8);
        let g = wide_graph(&WideSpec::new(8, 6, 4), DType::Fp32).unwrap();
        assert_eq!(g.ops.len(), 1 + 8 * (6 * 4 + 1));
        assert!(wide_graph(&WideSpec::new(0, 6, 4), DType::Fp32).is_err());
    }
}

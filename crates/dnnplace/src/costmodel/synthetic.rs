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
use super::operators::{self, DType, OpCost};

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

/// Builds the GPT-like graph (module documentation).
pub fn gpt_graph(spec: &GptSpec, dtype: DType) -> Result<OpGraph, String> {
    spec.validate()?;
    let e = dtype.bytes();
    let (b, s, h, a, v) = (spec.batch, spec.seq, spec.hidden, spec.heads, spec.vocab);
    let d = h / a;
    let bs = b * s;
    let bsh = (bs * h) as f64;
    let hf = h as f64;
    let f = 4 * h;
    let bsf = (bs * f) as f64;
    let scores = (b * a * s * s) as f64;
    let mut g = OpGraph::default();
    let add = |g: &mut OpGraph,
               name: String,
               op_type: &str,
               cost: OpCost,
               inputs: Vec<usize>,
               layer: usize| {
        let module = module_of(&name);
        g.push(Op {
            name,
            module,
            op_type: op_type.into(),
            cost,
            inputs,
            layer_id: Some(layer as i64),
            is_input: false,
        })
    };
    let input = g.push(Op {
        name: "input_ids".into(),
        module: None,
        op_type: "Input".into(),
        cost: OpCost::input(bs as f64 * 8.0),
        inputs: vec![],
        layer_id: Some(0),
        is_input: true,
    });
    let wte = add(
        &mut g,
        "wte".into(),
        "Gather",
        operators::movement(bs as f64, bsh, v as f64 * hf, e),
        vec![input],
        0,
    );
    let wpe = add(
        &mut g,
        "wpe".into(),
        "Gather",
        operators::movement(bs as f64, bsh, s as f64 * hf, e),
        vec![input],
        0,
    );
    let mut x = add(
        &mut g,
        "embed_add".into(),
        "Add",
        operators::elementwise(bsh, 2.0 * bsh, 1.0, 0.0, e),
        vec![wte, wpe],
        0,
    );
    for l in 1..=spec.layers {
        let name = |op: &str| format!("h.{}.{op}", l - 1);
        let linear = |k: usize, n: usize| operators::matmul(1, bs, k, n, true, true, e);
        let ln1 = add(
            &mut g,
            name("ln_1"),
            "LayerNorm",
            operators::normalization(bsh, 2.0 * hf, true, e),
            vec![x],
            l,
        );
        let mut heads = Vec::new();
        for p in ["q", "k", "v"] {
            let proj = add(
                &mut g,
                name(&format!("attn.{p}_proj")),
                "MatMul",
                linear(h, h),
                vec![ln1],
                l,
            );
            let reshape = add(
                &mut g,
                name(&format!("attn.{p}_reshape")),
                "Reshape",
                operators::movement(bsh, bsh, 0.0, e),
                vec![proj],
                l,
            );
            heads.push(add(
                &mut g,
                name(&format!("attn.{p}_transpose")),
                "Transpose",
                operators::movement(bsh, bsh, 0.0, e),
                vec![reshape],
                l,
            ));
        }
        let qk = operators::matmul(b * a, s, d, s, false, false, e);
        let sc = add(
            &mut g,
            name("attn.scores"),
            "MatMul",
            qk,
            vec![heads[0], heads[1]],
            l,
        );
        let sc = add(
            &mut g,
            name("attn.scale"),
            "Div",
            operators::elementwise(scores, scores, 1.0, 0.0, e),
            vec![sc],
            l,
        );
        let sc = add(
            &mut g,
            name("attn.mask"),
            "Where",
            operators::elementwise(scores, 2.0 * scores, 1.0, 0.0, e),
            vec![sc],
            l,
        );
        let probs = add(
            &mut g,
            name("attn.softmax"),
            "Softmax",
            operators::softmax(scores, e),
            vec![sc],
            l,
        );
        let pv = operators::matmul(b * a, s, s, d, false, false, e);
        let ctx = add(
            &mut g,
            name("attn.context"),
            "MatMul",
            pv,
            vec![probs, heads[2]],
            l,
        );
        let ctx = add(
            &mut g,
            name("attn.merge_transpose"),
            "Transpose",
            operators::movement(bsh, bsh, 0.0, e),
            vec![ctx],
            l,
        );
        let ctx = add(
            &mut g,
            name("attn.merge_reshape"),
            "Reshape",
            operators::movement(bsh, bsh, 0.0, e),
            vec![ctx],
            l,
        );
        let out = add(
            &mut g,
            name("attn.out_proj"),
            "MatMul",
            linear(h, h),
            vec![ctx],
            l,
        );
        let res1 = add(
            &mut g,
            name("residual_1"),
            "Add",
            operators::elementwise(bsh, 2.0 * bsh, 1.0, 0.0, e),
            vec![out, x],
            l,
        );
        let ln2 = add(
            &mut g,
            name("ln_2"),
            "LayerNorm",
            operators::normalization(bsh, 2.0 * hf, true, e),
            vec![res1],
            l,
        );
        let up = add(&mut g, name("mlp.fc"), "MatMul", linear(h, f), vec![ln2], l);
        let gelu = add(
            &mut g,
            name("mlp.gelu"),
            "Gelu",
            operators::elementwise(bsf, bsf, 8.0, 0.0, e),
            vec![up],
            l,
        );
        let down = add(
            &mut g,
            name("mlp.proj"),
            "MatMul",
            linear(f, h),
            vec![gelu],
            l,
        );
        x = add(
            &mut g,
            name("residual_2"),
            "Add",
            operators::elementwise(bsh, 2.0 * bsh, 1.0, 0.0, e),
            vec![down, res1],
            l,
        );
    }
    let top = spec.layers + 1;
    let lnf = add(
        &mut g,
        "ln_f".into(),
        "LayerNorm",
        operators::normalization(bsh, 2.0 * hf, true, e),
        vec![x],
        top,
    );
    add(
        &mut g,
        "lm_head".into(),
        "MatMul",
        operators::matmul(1, bs, h, v, false, true, e),
        vec![lnf],
        top,
    );
    Ok(g)
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

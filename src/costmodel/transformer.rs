//! An operator-level BERT/GPT workload generator.
//!
//! Shapes: batch `b`, sequence `s`, hidden `h`, heads `a` (head size `d = h/a`), feed-forward
//! width `f` (default `4h`), vocabulary `V`, `L` layers. Post-LayerNorm (BERT) blocks; a GPT
//! block has the same operators and costs (the causal mask does not change dense FLOPs).
//!
//! Operators and FLOPs (bias adds counted as 1 FLOP per output element):
//!
//! | operator | FLOPs | parameters |
//! | --- | --- | --- |
//! | `embeddings` (word + position + type gather, 2 adds) | `2bsh` | `(V + P + 2)·h`, `P = max(512, s)` |
//! | `embeddings.layernorm` | `8bsh` | `2h` |
//! | `layer{l}.q_proj`, `.k_proj`, `.v_proj` | `2bsh² + bsh` each | `h² + h` each |
//! | `layer{l}.attn_scores` (`QKᵀ` per head) | `2bs²h` | — |
//! | `layer{l}.attn_softmax` (scale, mask, softmax) | `7abs²` | — |
//! | `layer{l}.attn_context` (`P·V` per head) | `2bs²h` | — |
//! | `layer{l}.out_proj` | `2bsh² + bsh` | `h² + h` |
//! | `layer{l}.attn_residual` | `bsh` | — |
//! | `layer{l}.attn_layernorm` | `8bsh` | `2h` |
//! | `layer{l}.mlp_up` | `2bshf + bsf` | `hf + f` |
//! | `layer{l}.mlp_gelu` | `8bsf` | — |
//! | `layer{l}.mlp_down` | `2bshf + bsh` | `fh + h` |
//! | `layer{l}.mlp_residual` | `bsh` | — |
//! | `layer{l}.mlp_layernorm` | `8bsh` | `2h` |
//!
//! **Closed form per layer** (with `f = 4h`):
//!
//! ```text
//! F_layer = 24·b·s·h² + 4·b·s²·h + 7·a·b·s² + 59·b·s·h
//! ```
//!
//! of which the matrix products are `24bsh² + 4bs²h` (Q, K, V, output: `8bsh²`; MLP:
//! `16bsh²`; scores and context: `4bs²h`). Parameters per layer: `12h² + 13h`.
//!
//! Heads: `bert` = `pooler` (first token: `2bh² + bh` + tanh `8bh`) and the masked-LM head
//! `mlm.transform` (`2bsh² + bsh`), `mlm.gelu` (`8bsh`), `mlm.layernorm` (`8bsh`),
//! `mlm.decoder` (`2bshV + bsV`; its `hV + V` weights counted separately from the tied
//! embedding, as the profiled BERT workload does); `lm` = `final_layernorm` + `lm_head`
//! (`2bshV`, no bias); `none`.
//!
//! Edges follow the data: `x → q,k,v`; `q,k → scores → softmax`; `softmax, v → context →
//! out_proj`; `out_proj, x → attn_residual → attn_layernorm → mlp_up → gelu → mlp_down`;
//! `mlp_down, attn_layernorm → mlp_residual → mlp_layernorm → next layer`. Layer ids: the
//! input and embeddings 0, block `l` is `l`, the head `L + 1`.

use super::graph::{Op, OpGraph};
use super::operators::{self, DType, OpClass, OpCost};

/// Which head to put on top of the blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Head {
    /// BERT pre-training: pooler + masked-LM head.
    Bert,
    /// GPT: final LayerNorm + LM head.
    Lm,
    None,
}

/// Shapes of a transformer.
#[derive(Clone, Debug)]
pub struct TransformerSpec {
    pub layers: usize,
    pub hidden: usize,
    pub heads: usize,
    /// Feed-forward width (`4·hidden` for BERT and GPT).
    pub ffn: usize,
    pub seq: usize,
    pub batch: usize,
    pub vocab: usize,
    pub head: Head,
}

impl TransformerSpec {
    /// BERT-style shapes with `ffn = 4·hidden`, vocabulary 30522 and the BERT head.
    pub fn bert(layers: usize, hidden: usize, heads: usize, seq: usize, batch: usize) -> Self {
        TransformerSpec { layers, hidden, heads, ffn: 4 * hidden, seq, batch, vocab: 30522, head: Head::Bert }
    }

    /// Checks that every dimension is positive and `heads` divides `hidden`.
    pub fn validate(&self) -> Result<(), String> {
        for (name, v) in [
            ("layers", self.layers),
            ("hidden", self.hidden),
            ("heads", self.heads),
            ("ffn", self.ffn),
            ("seq", self.seq),
            ("batch", self.batch),
            ("vocab", self.vocab),
        ] {
            if v == 0 {
                return Err(format!("--{name} must be at least 1"));
            }
        }
        if !self.hidden.is_multiple_of(self.heads) {
            return Err(format!("--heads {} does not divide --hidden {}", self.heads, self.hidden));
        }
        Ok(())
    }

    /// The closed-form FLOPs of one block, for any `ffn = f`:
    /// `8bsh² + 4bshf + 4bs²h + 7abs² + 23bsh + 9bsf`, which for `f = 4h` is the module
    /// documentation's `24bsh² + 4bs²h + 7abs² + 59bsh`.
    pub fn layer_flops_closed_form(&self) -> f64 {
        let (b, s, h, a, f) =
            (self.batch as f64, self.seq as f64, self.hidden as f64, self.heads as f64, self.ffn as f64);
        // Q, K, V, out: 4·(2bsh² + bsh); scores + context: 4bs²h; softmax 7abs²;
        // residuals 2bsh; layer norms 16bsh; MLP: 2·2bshf + bsf + bsh + gelu 8bsf.
        4.0 * (2.0 * b * s * h * h + b * s * h)
            + 4.0 * b * s * s * h
            + 7.0 * a * b * s * s
            + 2.0 * b * s * h
            + 16.0 * b * s * h
            + 4.0 * b * s * h * f
            + b * s * f
            + b * s * h
            + 8.0 * b * s * f
    }
}

/// Builds the operator graph (module documentation).
pub fn transformer_graph(spec: &TransformerSpec, dtype: DType) -> Result<OpGraph, String> {
    spec.validate()?;
    let e = dtype.bytes();
    let (b, s, h, a, f, v) = (spec.batch, spec.seq, spec.hidden, spec.heads, spec.ffn, spec.vocab);
    let d = h / a;
    let bs = b * s;
    let bsh = (bs * h) as f64;
    let hf = h as f64;
    let mut g = OpGraph::default();
    let add = |g: &mut OpGraph, name: String, op_type: &str, cost: OpCost, inputs: Vec<usize>, layer: usize| {
        g.push(Op { name, module: None, op_type: op_type.into(), cost, inputs, layer_id: Some(layer as i64), is_input: false })
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
    // Embeddings: gather three rows per token and add them: 2 FLOPs per output element.
    let positions = s.max(512) as f64;
    let embed_params = (v as f64 + positions + 2.0) * hf;
    let embed = OpCost::new(OpClass::Vector, 2.0 * bsh, 0.0, 3.0 * bsh, 0.0, bsh, e);
    let embed = OpCost { param_bytes: embed_params * e, ..embed };
    let x = add(&mut g, "embeddings".into(), "Embedding", embed, vec![input], 0);
    let mut x = add(&mut g, "embeddings.layernorm".into(), "LayerNorm", operators::normalization(bsh, 2.0 * hf, true, e), vec![x], 0);
    for l in 1..=spec.layers {
        let name = |op: &str| format!("layer{l}.{op}");
        let linear = |k: usize, n: usize| operators::matmul(1, bs, k, n, true, true, e);
        let q = add(&mut g, name("q_proj"), "MatMul", linear(h, h), vec![x], l);
        let k = add(&mut g, name("k_proj"), "MatMul", linear(h, h), vec![x], l);
        let vv = add(&mut g, name("v_proj"), "MatMul", linear(h, h), vec![x], l);
        let scores = add(&mut g, name("attn_scores"), "MatMul", operators::matmul(b * a, s, d, s, false, false, e), vec![q, k], l);
        let probs_elems = (b * a * s * s) as f64;
        // Scale by 1/√d, add the mask, softmax: 7 FLOPs per score.
        let softmax = OpCost::new(OpClass::Vector, 7.0 * probs_elems, 0.0, probs_elems, 0.0, probs_elems, e);
        let probs = add(&mut g, name("attn_softmax"), "Softmax", softmax, vec![scores], l);
        let ctx = add(&mut g, name("attn_context"), "MatMul", operators::matmul(b * a, s, s, d, false, false, e), vec![probs, vv], l);
        let out = add(&mut g, name("out_proj"), "MatMul", linear(h, h), vec![ctx], l);
        let res1 = add(&mut g, name("attn_residual"), "Add", operators::elementwise(bsh, 2.0 * bsh, 1.0, 0.0, e), vec![out, x], l);
        let ln1 = add(&mut g, name("attn_layernorm"), "LayerNorm", operators::normalization(bsh, 2.0 * hf, true, e), vec![res1], l);
        let up = add(&mut g, name("mlp_up"), "MatMul", linear(h, f), vec![ln1], l);
        let bsf = (bs * f) as f64;
        let gelu = add(&mut g, name("mlp_gelu"), "Gelu", operators::elementwise(bsf, bsf, 8.0, 0.0, e), vec![up], l);
        let down = add(&mut g, name("mlp_down"), "MatMul", linear(f, h), vec![gelu], l);
        let res2 = add(&mut g, name("mlp_residual"), "Add", operators::elementwise(bsh, 2.0 * bsh, 1.0, 0.0, e), vec![down, ln1], l);
        x = add(&mut g, name("mlp_layernorm"), "LayerNorm", operators::normalization(bsh, 2.0 * hf, true, e), vec![res2], l);
    }
    let top = spec.layers + 1;
    match spec.head {
        Head::Bert => {
            // Pooler on the first token of each sequence, then tanh (8 FLOPs per element).
            let mut pooler = operators::matmul(1, b, h, h, true, true, e);
            pooler.flops += 8.0 * (b * h) as f64;
            pooler.class = OpClass::Matmul;
            add(&mut g, "pooler".into(), "Gemm", pooler, vec![x], top);
            let t = add(&mut g, "mlm.transform".into(), "MatMul", operators::matmul(1, bs, h, h, true, true, e), vec![x], top);
            let t = add(&mut g, "mlm.gelu".into(), "Gelu", operators::elementwise(bsh, bsh, 8.0, 0.0, e), vec![t], top);
            let t = add(&mut g, "mlm.layernorm".into(), "LayerNorm", operators::normalization(bsh, 2.0 * hf, true, e), vec![t], top);
            add(&mut g, "mlm.decoder".into(), "MatMul", operators::matmul(1, bs, h, v, true, true, e), vec![t], top);
        }
        Head::Lm => {
            let t = add(&mut g, "final_layernorm".into(), "LayerNorm", operators::normalization(bsh, 2.0 * hf, true, e), vec![x], top);
            add(&mut g, "lm_head".into(), "MatMul", operators::matmul(1, bs, h, v, false, true, e), vec![t], top);
        }
        Head::None => {}
    }
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer_ops(g: &OpGraph, l: i64) -> impl Iterator<Item = &Op> {
        g.ops.iter().filter(move |o| o.layer_id == Some(l))
    }

    #[test]
    fn bert_base_layer_matches_the_closed_form() {
        // BERT-base: h = 768, a = 12, s = 512, b = 1.
        let spec = TransformerSpec::bert(12, 768, 12, 512, 1);
        let g = transformer_graph(&spec, DType::Fp32).unwrap();
        let (b, s, h, a) = (1.0, 512.0, 768.0, 12.0);
        let closed = 24.0 * b * s * h * h + 4.0 * b * s * s * h + 7.0 * a * b * s * s + 59.0 * b * s * h;
        assert_eq!(spec.layer_flops_closed_form(), closed);
        for l in 1..=12 {
            let flops: f64 = layer_ops(&g, l).map(|o| o.cost.flops).sum();
            assert_eq!(flops, closed, "layer {l}");
            let macs: f64 = layer_ops(&g, l).map(|o| o.cost.macs).sum();
            assert_eq!(2.0 * macs, 24.0 * b * s * h * h + 4.0 * b * s * s * h);
            let params: f64 = layer_ops(&g, l).map(|o| o.cost.param_bytes).sum::<f64>() / 4.0;
            assert_eq!(params, 12.0 * h * h + 13.0 * h);
        }
        // 7.25 + 0.81 GFLOPs of matrix products per BERT-base layer at s = 512.
        assert_eq!(24.0 * s * h * h + 4.0 * s * s * h, 8_053_063_680.0);
    }

    #[test]
    fn one_attention_block_by_hand() {
        // b = 2, s = 4, h = 8, a = 2 (d = 4).
        let spec = TransformerSpec { layers: 1, hidden: 8, heads: 2, ffn: 32, seq: 4, batch: 2, vocab: 10, head: Head::None };
        let g = transformer_graph(&spec, DType::Fp32).unwrap();
        let op = |n: &str| g.ops.iter().find(|o| o.name == n).unwrap().cost.clone();
        // Q projection: (8×8)·(8×8) + bias: 2·8·8·8 + 64 = 1088.
        assert_eq!(op("layer1.q_proj").flops, 1088.0);
        // Scores: 4 (b·a) products (4×4)·(4×4): 4·2·64 = 512 FLOPs; context the same.
        assert_eq!(op("layer1.attn_scores").flops, 512.0);
        assert_eq!(op("layer1.attn_context").flops, 512.0);
        // Softmax over 2·2·4·4 = 64 scores at 7 FLOPs.
        assert_eq!(op("layer1.attn_softmax").flops, 448.0);
        // The 14 operators of a block; params of the block 12h² + 13h with f = 4h.
        assert_eq!(layer_ops(&g, 1).count(), 14);
        let params: f64 = layer_ops(&g, 1).map(|o| o.cost.param_bytes).sum::<f64>() / 4.0;
        assert_eq!(params, 12.0 * 64.0 + 13.0 * 8.0);
    }

    #[test]
    fn bad_shapes_are_rejected() {
        assert!(transformer_graph(&TransformerSpec::bert(2, 100, 3, 8, 1), DType::Fp32).is_err());
        assert!(transformer_graph(&TransformerSpec::bert(0, 64, 4, 8, 1), DType::Fp32).is_err());
    }
}

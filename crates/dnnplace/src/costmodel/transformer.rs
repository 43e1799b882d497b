//! An operator-level transformer generator in three styles — BERT, GPT-2 and Llama — named
//! the way the Hugging Face models they mimic name their modules.
//!
//! Shapes: batch `b`, sequence `s`, hidden `h`, heads `a` (head size `d = h/a`), feed-forward
//! width `f`, vocabulary `V`, `L` blocks. Bias adds count 1 FLOP per output element; a
//! Linear `k → n` over `bs` tokens is `2·bs·k·n (+ bs·n)` FLOPs with `k·n (+ n)` parameters.
//!
//! **Names.** Every operator has a unique `name` and the `module` path of the
//! `torch.nn.Module` that runs it in the Hugging Face model. An operator that *is* a module
//! (a Linear, a LayerNorm, an activation module, an embedding) is named after it; an
//! operator a module's `forward` computes itself (attention scores, softmax, context,
//! residual adds, the embedding sum) is named `<module>.<what>`. Block `i` (0-based, as in
//! the Hugging Face module list) has prefix `bert.encoder.layer.{i}` (BERT),
//! `transformer.h.{i}` (GPT-2) or `model.layers.{i}` (Llama).
//!
//! **Layer ids.** `layerId = i` for block `i`; the graph input and the embeddings have
//! `layerId = −1` (before block 0); the final norm and the head have `layerId = L` (after
//! the last block). So a split between `layerId` values `i − 1` and `i` is a split before
//! `layers.{i}`.
//!
//! **Blocks** (`A = <attention module>`):
//!
//! | style | operators of block i, in order | FLOPs |
//! | --- | --- | --- |
//! | `bert` (post-LN) | `attention.self.{query,key,value}`, `A.scores`, `A.softmax`, `A.context`, `attention.output.dense`, `attention.output.residual`, `attention.output.LayerNorm`, `intermediate.dense`, `intermediate.intermediate_act_fn` (GELU), `output.dense`, `output.residual`, `output.LayerNorm` | `8bsh² + 4bshf + 4bs²h + 7abs² + 23bsh + 9bsf` |
//! | `gpt2` (pre-LN) | `ln_1`, `attn.c_attn` (fused Q, K, V: `h → 3h`), `A.scores`, `A.softmax`, `A.context`, `attn.c_proj`, `attn_residual`, `ln_2`, `mlp.c_fc`, `mlp.act` (GELU), `mlp.c_proj`, `mlp_residual` | the same |
//! | `llama` (pre-RMSNorm, no biases) | `input_layernorm`, `self_attn.{q,k,v}_proj`, `A.rotary` (RoPE on q and k), `A.scores`, `A.softmax`, `A.context`, `self_attn.o_proj`, `attn_residual`, `post_attention_layernorm`, `mlp.{gate,up}_proj`, `mlp.act_fn` (SiLU), `mlp.mul`, `mlp.down_proj`, `mlp_residual` | `8bsh² + 6bshf + 4bs²h + 7abs² + 16bsh + 6bsf` (`g = a`, no q/k/v biases) |
//!
//! Llama-style grouped-query attention with `g` key/value heads (`kv_heads`; Mistral,
//! Llama 3, Qwen2) makes `k_proj` and `v_proj` `h → c` with `c = g·d`: a block is then
//! `4bsh² + 4bshc + 6bshf + 4bs²h + 7abs² + 3bs(h + c) + 10bsh + 6bsf` FLOPs (+ `bs(h + 2c)`
//! with Qwen2's q/k/v biases) and holds `2h² + 2hc + 3hf + 2h` parameters (+ `h + 2c`).
//! Scores and context keep `a` heads (the key/value heads are repeated).
//!
//! Per-operator FLOPs: scores and context `2bs²h` each (`b·a` products of `s×d` by `d×s`,
//! and `s×s` by `s×d`); softmax `7abs²` (scale, mask, softmax); LayerNorm `8·|Y|`
//! (parameters `2h`); RMSNorm `4·|Y|` (square, mean, scale, weight; parameters `h`);
//! GELU `8·|Y|`; SiLU `5·|Y|` (sigmoid 4, product 1); RoPE `3` per element of q and k
//! (`x·cos + rotate(x)·sin`); residual adds and the gating product `1·|Y|`.
//! With `f = 4h`, BERT and GPT-2 blocks are `24bsh² + 4bs²h + 7abs² + 59bsh` FLOPs, of which
//! `24bsh² + 4bs²h` are matrix products, and hold `12h² + 13h` parameters; a Llama block
//! holds `4h² + 3hf + 2h` (`g = a`).
//!
//! **Embeddings** (gathers move the rows they read; their tables are parameters but are not
//! read whole): BERT `bert.embeddings.{word,position,token_type}_embeddings` (tables
//! `V·h`, `P·h` with `P = max(512, s)`, `2·h`), `bert.embeddings.add` (`2bsh`),
//! `bert.embeddings.LayerNorm`; GPT-2 `transformer.wte`, `transformer.wpe`
//! (`P = max(1024, s)`), `transformer.embeddings_add` (`bsh`); Llama `model.embed_tokens`.
//! Position embeddings are one `s×h` slice, shared by the batch. Each lookup is an
//! [`OpClass::Lookup`]: in training its backward writes a dense gradient of its whole table
//! (`4·|T|·e + 3·|Y|·e` bytes and the ids; [`crate::costmodel::training`]).
//!
//! **Heads** ([`Head`]): `bert` (BERT pre-training, `--style bert` only): `bert.pooler`
//! (first token: `2bh² + bh`, tanh `8bh`), `cls.predictions.transform.dense`,
//! `.transform_act_fn`, `.LayerNorm`, `cls.predictions.decoder` (`2bshV + bsV`), and
//! `cls.seq_relationship` (`h → 2` on the pooled token); `lm`: BERT `cls.predictions.*`
//! without pooler; GPT-2 `transformer.ln_f` + `lm_head`; Llama `model.norm` + `lm_head`
//! (`2bshV`, no bias); `none`: no head (GPT-2 and Llama keep their final norm, which
//! belongs to the base model). Decoder and `lm_head` weights are counted separately from a
//! tied word embedding, as the profiled BERT workload does.
//!
//! Complexity: O(L) operators and edges.

use super::graph::{Op, OpGraph};
use super::operators::{self, DType, OpClass, OpCost};

/// Which Hugging Face architecture the graph and its names follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Style {
    /// BERT: learned positions, post-LayerNorm blocks, separate Q/K/V, GELU.
    #[default]
    Bert,
    /// GPT-2: learned positions, pre-LayerNorm blocks, fused QKV (`c_attn`), GELU.
    Gpt2,
    /// Llama: rotary positions, pre-RMSNorm blocks, no biases, SwiGLU MLP.
    Llama,
}

impl Style {
    pub fn name(self) -> &'static str {
        match self {
            Style::Bert => "bert",
            Style::Gpt2 => "gpt2",
            Style::Llama => "llama",
        }
    }

    /// The vocabulary of the reference models: 30522 (BERT), 50257 (GPT-2), 32000 (Llama 2).
    pub fn default_vocab(self) -> usize {
        match self {
            Style::Bert => 30522,
            Style::Gpt2 => 50257,
            Style::Llama => 32000,
        }
    }

    /// `4h` (BERT, GPT-2); Llama's `256·⌈⌊8h/3⌋ / 256⌉` (11008 for h = 4096).
    pub fn default_ffn(self, hidden: usize) -> usize {
        match self {
            Style::Bert | Style::Gpt2 => 4 * hidden,
            Style::Llama => (8 * hidden / 3).div_ceil(256) * 256,
        }
    }

    /// The head of the reference pre-training model: `bert` for BERT, `lm` otherwise.
    pub fn default_head(self) -> Head {
        match self {
            Style::Bert => Head::Bert,
            Style::Gpt2 | Style::Llama => Head::Lm,
        }
    }
}

/// Which head to put on top of the blocks (module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Head {
    /// BERT pre-training: pooler, masked-LM and next-sentence heads.
    Bert,
    /// Language-model head (and the final norm for GPT-2 and Llama).
    Lm,
    None,
}

/// Shapes of a transformer.
#[derive(Clone, Debug)]
pub struct TransformerSpec {
    pub layers: usize,
    pub hidden: usize,
    pub heads: usize,
    /// Feed-forward width ([`Style::default_ffn`]).
    pub ffn: usize,
    pub seq: usize,
    pub batch: usize,
    pub vocab: usize,
    pub head: Head,
    pub style: Style,
    /// Key/value heads `g` (grouped-query attention; Llama style only): `k_proj` and
    /// `v_proj` map `h → g·d`. [default: `heads`]
    pub kv_heads: usize,
    /// Biases on `q_proj`, `k_proj`, `v_proj` (Qwen2; Llama style only). [default: false]
    pub qkv_bias: bool,
    /// Rows of the learned position table (BERT, GPT-2). [default: max(512, s) for BERT,
    /// max(1024, s) for GPT-2]
    pub positions: Option<usize>,
}

impl TransformerSpec {
    /// The reference shapes of `style`: its feed-forward width, vocabulary and head.
    pub fn new(
        style: Style,
        layers: usize,
        hidden: usize,
        heads: usize,
        seq: usize,
        batch: usize,
    ) -> Self {
        TransformerSpec {
            layers,
            hidden,
            heads,
            ffn: style.default_ffn(hidden),
            seq,
            batch,
            vocab: style.default_vocab(),
            head: style.default_head(),
            style,
            kv_heads: heads,
            qkv_bias: false,
            positions: None,
        }
    }

    /// BERT-style shapes with `ffn = 4·hidden`, vocabulary 30522 and the BERT head.
    pub fn bert(layers: usize, hidden: usize, heads: usize, seq: usize, batch: usize) -> Self {
        TransformerSpec::new(Style::Bert, layers, hidden, heads, seq, batch)
    }

    /// Checks that every dimension is positive, `heads` divides `hidden`, and the head fits
    /// the style.
    pub fn validate(&self) -> Result<(), String> {
        check_dimensions(
            &[
                ("layers", self.layers),
                ("hidden", self.hidden),
                ("heads", self.heads),
                ("ffn", self.ffn),
                ("seq", self.seq),
                ("batch", self.batch),
                ("vocab", self.vocab),
            ],
            self.hidden,
            self.heads,
        )?;
        if self.kv_heads == 0 || !self.heads.is_multiple_of(self.kv_heads) {
            return Err(format!(
                "key/value heads {} must divide the attention heads {}",
                self.kv_heads, self.heads
            ));
        }
        if self.style != Style::Llama && (self.kv_heads != self.heads || self.qkv_bias) {
            return Err(
                "grouped-query attention and q/k/v biases are modelled for the llama style only"
                    .into(),
            );
        }
        if let Some(p) = self.positions {
            if p < self.seq {
                return Err(format!(
                    "the sequence {} is longer than the {p} learned positions",
                    self.seq
                ));
            }
        }
        if self.head == Head::Bert && self.style != Style::Bert {
            return Err(format!(
                "--head bert (pooler + masked-LM + next-sentence) exists only for --style bert; use --head lm or none with --style {}",
                self.style.name()
            ));
        }
        Ok(())
    }

    /// The closed-form FLOPs of one block (module documentation), for any `ffn = f`.
    pub fn layer_flops_closed_form(&self) -> f64 {
        let (b, s, h, a, f) = (
            self.batch as f64,
            self.seq as f64,
            self.hidden as f64,
            self.heads as f64,
            self.ffn as f64,
        );
        let attention = 4.0 * b * s * s * h + 7.0 * a * b * s * s;
        match self.style {
            // Q, K, V, out: 8bsh² + 4bsh; MLP: 4bshf + bsf + bsh, GELU 8bsf; residuals 2bsh;
            // two layer norms 16bsh.
            Style::Bert | Style::Gpt2 => {
                8.0 * b * s * h * h
                    + 4.0 * b * s * h * f
                    + attention
                    + 23.0 * b * s * h
                    + 9.0 * b * s * f
            }
            // Q, O: 4bsh²; K, V: 4bsh·c with c = g·d the key/value width; gate, up, down:
            // 6bshf; SiLU 5bsf + product bsf; RoPE 3bs(h + c); residuals 2bsh; two RMSNorms
            // 8bsh; q/k/v biases bs(h + 2c).
            Style::Llama => {
                let c = self.kv_width() as f64;
                let bias = if self.qkv_bias {
                    b * s * (h + 2.0 * c)
                } else {
                    0.0
                };
                4.0 * b * s * h * h
                    + 4.0 * b * s * h * c
                    + 6.0 * b * s * h * f
                    + attention
                    + 3.0 * b * s * (h + c)
                    + 10.0 * b * s * h
                    + 6.0 * b * s * f
                    + bias
            }
        }
    }

    /// The closed-form parameter count of one block (module documentation).
    pub fn layer_params_closed_form(&self) -> f64 {
        let (h, f) = (self.hidden as f64, self.ffn as f64);
        match self.style {
            Style::Bert | Style::Gpt2 => 4.0 * h * h + 2.0 * h * f + 9.0 * h + f,
            Style::Llama => {
                let c = self.kv_width() as f64;
                let bias = if self.qkv_bias { h + 2.0 * c } else { 0.0 };
                2.0 * h * h + 2.0 * h * c + 3.0 * h * f + 2.0 * h + bias
            }
        }
    }

    /// The key/value width `g·d` (`d = h/a`).
    pub fn kv_width(&self) -> usize {
        self.kv_heads * (self.hidden / self.heads)
    }
}

/// Builds the operator graph (module documentation).
///
/// # Example
///
/// A two-block BERT priced on a built-in profile, as a workload for the solvers:
/// ```
/// use dnnplace::costmodel::transformer::Style;
/// use dnnplace::costmodel::{find_profile, to_workload, transformer_graph, CostSettings, DType, TransformerSpec};
///
/// let mut spec = TransformerSpec::new(Style::Bert, 2, 64, 4, 32, 2);
/// spec.vocab = 1000;
/// let graph = transformer_graph(&spec, DType::Fp16)?;
/// let settings = CostSettings {
///     accelerator: find_profile("a100-80gb", &[])?,
///     cpu: find_profile("cpu-core", &[])?,
///     dtype: DType::Fp16,
///     training: false,
///     accelerators: 2,
///     cpus: 1,
/// };
/// let w = to_workload(&graph, &settings)?;
/// assert_eq!(w.len(), graph.ops.len());
/// assert_eq!(w.devices().accelerators, 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn transformer_graph(spec: &TransformerSpec, dtype: DType) -> Result<OpGraph, String> {
    spec.validate()?;
    let mut g = Builder {
        g: OpGraph::default(),
        spec,
        e: dtype.bytes(),
    };
    let input = g.g.push(Op {
        name: "input_ids".into(),
        module: None,
        op_type: "Input".into(),
        cost: OpCost::input((spec.batch * spec.seq) as f64 * 8.0),
        inputs: vec![],
        layer_id: Some(EMBEDDINGS_LAYER),
        is_input: true,
    });
    let mut x = match spec.style {
        Style::Bert => g.bert_embeddings(input),
        Style::Gpt2 => g.gpt2_embeddings(input),
        Style::Llama => g.gather("model.embed_tokens", spec.vocab, g.bsh(), input),
    };
    for i in 0..spec.layers {
        x = match spec.style {
            Style::Bert => g.bert_block(i, x),
            Style::Gpt2 => g.gpt2_block(i, x),
            Style::Llama => g.llama_block(i, x),
        };
    }
    g.head(x);
    Ok(g.g)
}

/// `layerId` of the graph input and the embeddings.
pub const EMBEDDINGS_LAYER: i64 = -1;

/// An elementwise operator's kind and size: `flops_per_element` FLOPs on each of
/// `elements` outputs.
#[derive(Clone, Copy, Debug)]
struct Pointwise {
    op_type: &'static str,
    flops_per_element: f64,
    elements: f64,
}

struct Builder<'s> {
    g: OpGraph,
    spec: &'s TransformerSpec,
    /// Bytes per element.
    e: f64,
}

impl Builder<'_> {
    fn bsh(&self) -> f64 {
        (self.spec.batch * self.spec.seq * self.spec.hidden) as f64
    }

    /// Adds an operator named `name`, run by `module`, in layer `layer`.
    fn push(
        &mut self,
        name: String,
        module: &str,
        op_type: &str,
        cost: OpCost,
        inputs: Vec<usize>,
        layer: i64,
    ) -> usize {
        self.g.push(Op {
            name,
            module: Some(module.to_string()),
            op_type: op_type.into(),
            cost,
            inputs,
            layer_id: Some(layer),
            is_input: false,
        })
    }

    /// A Linear module `k → n` over every token.
    fn linear(
        &mut self,
        module: &str,
        k: usize,
        n: usize,
        bias: bool,
        input: usize,
        layer: i64,
    ) -> usize {
        let bs = self.spec.batch * self.spec.seq;
        let cost = operators::matmul(1, bs, k, n, bias, true, self.e);
        self.push(module.into(), module, "MatMul", cost, vec![input], layer)
    }

    /// A LayerNorm module over every token (`8·|Y|`, parameters `2h`).
    fn layer_norm(&mut self, module: &str, input: usize, layer: i64) -> usize {
        let cost =
            operators::normalization(self.bsh(), 2.0 * self.spec.hidden as f64, true, self.e);
        self.push(module.into(), module, "LayerNorm", cost, vec![input], layer)
    }

    /// An RMSNorm module over every token (`4·|Y|`, parameters `h`).
    fn rms_norm(&mut self, module: &str, input: usize, layer: i64) -> usize {
        let y = self.bsh();
        let cost = OpCost::new(
            OpClass::Vector,
            4.0 * y,
            0.0,
            y,
            self.spec.hidden as f64,
            y,
            self.e,
        );
        self.push(module.into(), module, "RMSNorm", cost, vec![input], layer)
    }

    /// An elementwise operator `pw` over its outputs, reading `inputs` (each as large as the
    /// output).
    fn pointwise(
        &mut self,
        name: String,
        module: &str,
        pw: Pointwise,
        inputs: Vec<usize>,
        layer: i64,
    ) -> usize {
        let read = inputs.len() as f64 * pw.elements;
        let cost = operators::elementwise(pw.elements, read, pw.flops_per_element, 0.0, self.e);
        self.push(name, module, pw.op_type, cost, inputs, layer)
    }

    /// The GELU activation (8 FLOPs an element) over `elements` outputs.
    fn gelu(elements: f64) -> Pointwise {
        Pointwise {
            op_type: "Gelu",
            flops_per_element: 8.0,
            elements,
        }
    }

    /// A residual add of the hidden state (`b·s·h` elements, 1 FLOP each).
    fn residual(&self) -> Pointwise {
        Pointwise {
            op_type: "Add",
            flops_per_element: 1.0,
            elements: self.bsh(),
        }
    }

    /// An embedding lookup: `rows × h` table, `out` elements gathered from the input ids.
    fn gather(&mut self, module: &str, rows: usize, out: f64, input: usize) -> usize {
        let table = (rows * self.spec.hidden) as f64 * self.e;
        let moved = OpCost::new(OpClass::Lookup, 0.0, 0.0, out, 0.0, out, self.e);
        // The table is resident (size) but only the gathered rows move; the backward writes
        // a dense gradient of the whole table (`training`).
        let cost = OpCost {
            param_bytes: table,
            ..moved
        };
        self.push(
            module.into(),
            module,
            "Embedding",
            cost,
            vec![input],
            EMBEDDINGS_LAYER,
        )
    }

    /// Scores `QKᵀ`, softmax (scale, mask: 7 FLOPs per score) and context `P·V` of module
    /// `attn`; returns the context.
    fn attention_core(&mut self, attn: &str, qk: Vec<usize>, v: usize, layer: i64) -> usize {
        let (b, s, h, a) = (
            self.spec.batch,
            self.spec.seq,
            self.spec.hidden,
            self.spec.heads,
        );
        let d = h / a;
        let scores = operators::matmul(b * a, s, d, s, false, false, self.e);
        let scores = self.push(format!("{attn}.scores"), attn, "MatMul", scores, qk, layer);
        let p = (b * a * s * s) as f64;
        let softmax = OpCost::new(OpClass::Vector, 7.0 * p, 0.0, p, 0.0, p, self.e);
        let probs = self.push(
            format!("{attn}.softmax"),
            attn,
            "Softmax",
            softmax,
            vec![scores],
            layer,
        );
        let context = operators::matmul(b * a, s, s, d, false, false, self.e);
        self.push(
            format!("{attn}.context"),
            attn,
            "MatMul",
            context,
            vec![probs, v],
            layer,
        )
    }

    fn bert_embeddings(&mut self, input: usize) -> usize {
        let s = self.spec;
        let (bsh, sh) = (self.bsh(), (s.seq * s.hidden) as f64);
        let word = self.gather("bert.embeddings.word_embeddings", s.vocab, bsh, input);
        let position = self.gather(
            "bert.embeddings.position_embeddings",
            s.positions.unwrap_or(s.seq.max(512)),
            sh,
            input,
        );
        let token_type = self.gather("bert.embeddings.token_type_embeddings", 2, bsh, input);
        let sum = OpCost::new(
            OpClass::Vector,
            2.0 * bsh,
            0.0,
            2.0 * bsh + sh,
            0.0,
            bsh,
            self.e,
        );
        let m = "bert.embeddings";
        let sum = self.push(
            format!("{m}.add"),
            m,
            "Add",
            sum,
            vec![word, position, token_type],
            EMBEDDINGS_LAYER,
        );
        self.layer_norm("bert.embeddings.LayerNorm", sum, EMBEDDINGS_LAYER)
    }

    fn gpt2_embeddings(&mut self, input: usize) -> usize {
        let s = self.spec;
        let (bsh, sh) = (self.bsh(), (s.seq * s.hidden) as f64);
        let wte = self.gather("transformer.wte", s.vocab, bsh, input);
        let wpe = self.gather(
            "transformer.wpe",
            s.positions.unwrap_or(s.seq.max(1024)),
            sh,
            input,
        );
        let sum = OpCost::new(OpClass::Vector, bsh, 0.0, bsh + sh, 0.0, bsh, self.e);
        self.push(
            "transformer.embeddings_add".into(),
            "transformer",
            "Add",
            sum,
            vec![wte, wpe],
            EMBEDDINGS_LAYER,
        )
    }

    fn bert_block(&mut self, i: usize, x: usize) -> usize {
        let (h, f) = (self.spec.hidden, self.spec.ffn);
        let (l, p) = (i as i64, format!("bert.encoder.layer.{i}"));
        let attn = format!("{p}.attention.self");
        let q = self.linear(&format!("{attn}.query"), h, h, true, x, l);
        let k = self.linear(&format!("{attn}.key"), h, h, true, x, l);
        let v = self.linear(&format!("{attn}.value"), h, h, true, x, l);
        let ctx = self.attention_core(&attn, vec![q, k], v, l);
        let out = format!("{p}.attention.output");
        let dense = self.linear(&format!("{out}.dense"), h, h, true, ctx, l);
        let res = self.pointwise(
            format!("{out}.residual"),
            &out,
            self.residual(),
            vec![dense, x],
            l,
        );
        let x1 = self.layer_norm(&format!("{out}.LayerNorm"), res, l);
        let up = self.linear(&format!("{p}.intermediate.dense"), h, f, true, x1, l);
        let bsf = (self.spec.batch * self.spec.seq * f) as f64;
        let act = format!("{p}.intermediate.intermediate_act_fn");
        let act = self.pointwise(act.clone(), &act, Builder::gelu(bsf), vec![up], l);
        let down = self.linear(&format!("{p}.output.dense"), f, h, true, act, l);
        let out = format!("{p}.output");
        let res = self.pointwise(
            format!("{out}.residual"),
            &out,
            self.residual(),
            vec![down, x1],
            l,
        );
        self.layer_norm(&format!("{out}.LayerNorm"), res, l)
    }

    fn gpt2_block(&mut self, i: usize, x: usize) -> usize {
        let (h, f) = (self.spec.hidden, self.spec.ffn);
        let (l, p) = (i as i64, format!("transformer.h.{i}"));
        let ln1 = self.layer_norm(&format!("{p}.ln_1"), x, l);
        let attn = format!("{p}.attn");
        let qkv = self.linear(&format!("{attn}.c_attn"), h, 3 * h, true, ln1, l);
        let ctx = self.attention_core(&attn, vec![qkv], qkv, l);
        let proj = self.linear(&format!("{attn}.c_proj"), h, h, true, ctx, l);
        let x1 = self.pointwise(
            format!("{p}.attn_residual"),
            &p,
            self.residual(),
            vec![proj, x],
            l,
        );
        let ln2 = self.layer_norm(&format!("{p}.ln_2"), x1, l);
        let up = self.linear(&format!("{p}.mlp.c_fc"), h, f, true, ln2, l);
        let bsf = (self.spec.batch * self.spec.seq * f) as f64;
        let act = format!("{p}.mlp.act");
        let act = self.pointwise(act.clone(), &act, Builder::gelu(bsf), vec![up], l);
        let down = self.linear(&format!("{p}.mlp.c_proj"), f, h, true, act, l);
        self.pointwise(
            format!("{p}.mlp_residual"),
            &p,
            self.residual(),
            vec![down, x1],
            l,
        )
    }

    fn llama_block(&mut self, i: usize, x: usize) -> usize {
        let (h, f) = (self.spec.hidden, self.spec.ffn);
        let (l, p) = (i as i64, format!("model.layers.{i}"));
        let ln1 = self.rms_norm(&format!("{p}.input_layernorm"), x, l);
        let attn = format!("{p}.self_attn");
        let (c, bias) = (self.spec.kv_width(), self.spec.qkv_bias);
        let q = self.linear(&format!("{attn}.q_proj"), h, h, bias, ln1, l);
        let k = self.linear(&format!("{attn}.k_proj"), h, c, bias, ln1, l);
        let v = self.linear(&format!("{attn}.v_proj"), h, c, bias, ln1, l);
        // RoPE on q and k: x·cos + rotate(x)·sin, 3 FLOPs per element of each.
        let qk = ((self.spec.batch * self.spec.seq) * (h + c)) as f64;
        let rope = OpCost::new(OpClass::Vector, 3.0 * qk, 0.0, qk, 0.0, qk, self.e);
        let rope = self.push(
            format!("{attn}.rotary"),
            &attn,
            "Rotary",
            rope,
            vec![q, k],
            l,
        );
        let ctx = self.attention_core(&attn, vec![rope], v, l);
        let o = self.linear(&format!("{attn}.o_proj"), h, h, false, ctx, l);
        let x1 = self.pointwise(
            format!("{p}.attn_residual"),
            &p,
            self.residual(),
            vec![o, x],
            l,
        );
        let ln2 = self.rms_norm(&format!("{p}.post_attention_layernorm"), x1, l);
        let mlp = format!("{p}.mlp");
        let gate = self.linear(&format!("{mlp}.gate_proj"), h, f, false, ln2, l);
        let up = self.linear(&format!("{mlp}.up_proj"), h, f, false, ln2, l);
        let bsf = (self.spec.batch * self.spec.seq * f) as f64;
        let act = format!("{mlp}.act_fn");
        let act = self.pointwise(
            act.clone(),
            &act,
            Pointwise {
                op_type: "Silu",
                flops_per_element: 5.0,
                elements: bsf,
            },
            vec![gate],
            l,
        );
        let mul = self.pointwise(
            format!("{mlp}.mul"),
            &mlp,
            Pointwise {
                op_type: "Mul",
                flops_per_element: 1.0,
                elements: bsf,
            },
            vec![act, up],
            l,
        );
        let down = self.linear(&format!("{mlp}.down_proj"), f, h, false, mul, l);
        self.pointwise(
            format!("{p}.mlp_residual"),
            &p,
            self.residual(),
            vec![down, x1],
            l,
        )
    }

    /// The final norm (GPT-2, Llama) and the head, in layer `L`.
    fn head(&mut self, x: usize) {
        let s = self.spec;
        let (h, v, top) = (s.hidden, s.vocab, s.layers as i64);
        match s.style {
            Style::Bert => {
                if s.head == Head::Bert {
                    // Pooler on the first token of each sequence, then tanh (8 FLOPs per element).
                    let mut pooler = operators::matmul(1, s.batch, h, h, true, true, self.e);
                    pooler.flops += 8.0 * (s.batch * h) as f64;
                    let pooled = self.push(
                        "bert.pooler".into(),
                        "bert.pooler",
                        "Gemm",
                        pooler,
                        vec![x],
                        top,
                    );
                    self.bert_lm_head(x, top);
                    let nsp = operators::matmul(1, s.batch, h, 2, true, true, self.e);
                    self.push(
                        "cls.seq_relationship".into(),
                        "cls.seq_relationship",
                        "Gemm",
                        nsp,
                        vec![pooled],
                        top,
                    );
                } else if s.head == Head::Lm {
                    self.bert_lm_head(x, top);
                }
            }
            Style::Gpt2 | Style::Llama => {
                let norm = if s.style == Style::Gpt2 {
                    self.layer_norm("transformer.ln_f", x, top)
                } else {
                    self.rms_norm("model.norm", x, top)
                };
                if s.head == Head::Lm {
                    self.linear("lm_head", h, v, false, norm, top);
                }
            }
        }
    }

    /// BERT's masked-LM head `cls.predictions`: transform (dense, GELU, LayerNorm), decoder.
    fn bert_lm_head(&mut self, x: usize, top: i64) {
        let (h, v) = (self.spec.hidden, self.spec.vocab);
        let t = self.linear("cls.predictions.transform.dense", h, h, true, x, top);
        let act = "cls.predictions.transform.transform_act_fn";
        let t = self.pointwise(act.into(), act, Builder::gelu(self.bsh()), vec![t], top);
        let t = self.layer_norm("cls.predictions.transform.LayerNorm", t, top);
        self.linear("cls.predictions.decoder", h, v, true, t, top);
    }
}

/// Every named dimension (`--name`) is at least 1 and `heads` divides `hidden`: the
/// checks a generated transformer's sizes must pass.
pub(crate) fn check_dimensions(
    dims: &[(&str, usize)],
    hidden: usize,
    heads: usize,
) -> Result<(), String> {
    if let Some((name, _)) = dims.iter().find(|(_, v)| *v == 0) {
        return Err(format!("--{name} must be at least 1"));
    }
    if !hidden.is_multiple_of(heads) {
        return Err(format!("--heads {heads} does not divide --hidden {hidden}"));
    }
    Ok(())
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
        let closed =
            24.0 * b * s * h * h + 4.0 * b * s * s * h + 7.0 * a * b * s * s + 59.0 * b * s * h;
        assert_eq!(spec.layer_flops_closed_form(), closed);
        for l in 0..12 {
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
    fn every_style_matches_its_closed_forms() {
        for style in [Style::Bert, Style::Gpt2, Style::Llama] {
            let spec = TransformerSpec::new(style, 3, 96, 6, 40, 3);
            let g = transformer_graph(&spec, DType::Fp16).unwrap();
            for l in 0..3 {
                let flops: f64 = layer_ops(&g, l).map(|o| o.cost.flops).sum();
                assert_eq!(flops, spec.layer_flops_closed_form(), "{style:?} layer {l}");
                let params: f64 = layer_ops(&g, l).map(|o| o.cost.param_bytes).sum::<f64>() / 2.0;
                assert_eq!(
                    params,
                    spec.layer_params_closed_form(),
                    "{style:?} layer {l}"
                );
            }
        }
        // Llama-2-7B's feed-forward width and its block's parameters: 4h² + 3hf + 2h.
        let llama = TransformerSpec::new(Style::Llama, 32, 4096, 32, 4096, 1);
        assert_eq!(llama.ffn, 11008);
        assert_eq!(llama.layer_params_closed_form(), 202_383_360.0);
        assert_eq!(
            TransformerSpec::new(Style::Llama, 1, 5120, 40, 8, 1).ffn,
            13824
        );
    }

    #[test]
    fn one_attention_block_by_hand() {
        // b = 2, s = 4, h = 8, a = 2 (d = 4).
        let mut spec = TransformerSpec::bert(1, 8, 2, 4, 2);
        (spec.ffn, spec.vocab, spec.head) = (32, 10, Head::None);
        let g = transformer_graph(&spec, DType::Fp32).unwrap();
        let op = |n: &str| g.ops.iter().find(|o| o.name == n).unwrap().cost.clone();
        // Q projection: (8×8)·(8×8) + bias: 2·8·8·8 + 64 = 1088.
        assert_eq!(
            op("bert.encoder.layer.0.attention.self.query").flops,
            1088.0
        );
        // Scores: 4 (b·a) products (4×4)·(4×4): 4·2·64 = 512 FLOPs; context the same.
        assert_eq!(
            op("bert.encoder.layer.0.attention.self.scores").flops,
            512.0
        );
        assert_eq!(
            op("bert.encoder.layer.0.attention.self.context").flops,
            512.0
        );
        // Softmax over 2·2·4·4 = 64 scores at 7 FLOPs.
        assert_eq!(
            op("bert.encoder.layer.0.attention.self.softmax").flops,
            448.0
        );
        // The 14 operators of a block; params of the block 12h² + 13h with f = 4h.
        assert_eq!(layer_ops(&g, 0).count(), 14);
        let params: f64 = layer_ops(&g, 0).map(|o| o.cost.param_bytes).sum::<f64>() / 4.0;
        assert_eq!(params, 12.0 * 64.0 + 13.0 * 8.0);
        // Embedding tables: V·h + 512·h + 2·h parameters, none of them read whole.
        let word = op("bert.embeddings.word_embeddings");
        assert_eq!(
            (word.param_bytes, word.bytes_moved),
            (80.0 * 4.0, 2.0 * 64.0 * 4.0)
        );
        assert_eq!(
            op("bert.embeddings.position_embeddings").param_bytes,
            512.0 * 8.0 * 4.0
        );
    }

    #[test]
    fn an_embedding_backward_writes_the_dense_gradient_of_its_table() {
        use crate::costmodel::find_profile;
        use crate::costmodel::training::backward_cost;
        // GPT-2 124M's shapes at b = 1, s = 64, fp32 (the measured CPU profile's).
        let mut spec = TransformerSpec::new(Style::Gpt2, 1, 768, 12, 64, 1);
        spec.vocab = 50257;
        let g = transformer_graph(&spec, DType::Fp32).unwrap();
        let op = |n: &str| g.ops.iter().find(|o| o.name == n).unwrap().cost.clone();
        let (table, rows) = (50257.0 * 768.0 * 4.0, 64.0 * 768.0 * 4.0);
        let wte = op("transformer.wte");
        // Forward: only the gathered rows move (ids and output, as before).
        assert_eq!((wte.bytes_moved, wte.param_bytes), (2.0 * rows, table));
        // Backward: zero-fill + the whole-table add (4 tables), the scatter (3 row sets), ids.
        let back = backward_cost(&wte);
        assert_eq!(back.bytes_moved, 4.0 * table + 3.0 * rows + rows);
        assert_eq!(back.bytes_moved, 618_344_448.0);
        // On cpu-core (5.12 GB/s at 80%, 1 µs launch): 618,344,448 / 4.096e9 s + 0.001 ms.
        let cpu = find_profile("cpu-core", &[]).unwrap();
        let ms = back.time_ms(&cpu, DType::Fp32);
        assert!(
            (ms - (618_344_448.0 / 4.096e6 + 0.001)).abs() < 1e-9,
            "{ms}"
        );
        // The position table wpe: 1024 rows, one s×h slice gathered.
        let wpe = backward_cost(&op("transformer.wpe"));
        assert_eq!(wpe.bytes_moved, 4.0 * 1024.0 * 768.0 * 4.0 + 4.0 * rows);
        // Any other operator keeps the 2×/1× rule: the residual add moves twice its bytes.
        let add = op("transformer.h.0.attn_residual");
        assert_eq!(backward_cost(&add).bytes_moved, 2.0 * add.bytes_moved);
    }

    #[test]
    fn bad_shapes_and_heads_are_rejected() {
        assert!(transformer_graph(&TransformerSpec::bert(2, 100, 3, 8, 1), DType::Fp32).is_err());
        assert!(transformer_graph(&TransformerSpec::bert(0, 64, 4, 8, 1), DType::Fp32).is_err());
        let mut gpt = TransformerSpec::new(Style::Gpt2, 2, 64, 4, 8, 1);
        gpt.head = Head::Bert;
        assert!(transformer_graph(&gpt, DType::Fp32)
            .unwrap_err()
            .contains("--style bert"));
    }
}

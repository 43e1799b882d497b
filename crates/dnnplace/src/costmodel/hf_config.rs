//! Hugging Face `config.json` → [`TransformerSpec`]: the architectures the generator
//! ([`crate::costmodel::transformer`]) prices exactly, every field it cannot model refused
//! by name.
//!
//! | `model_type` | style | fields read |
//! | --- | --- | --- |
//! | `gpt2` | GPT-2 | `n_layer`, `n_embd`, `n_head`, `n_inner` (null: `4·n_embd`), `vocab_size`, `n_positions`, `activation_function` (a GELU), `tie_word_embeddings` |
//! | `bert` | BERT (head from `architectures`: `BertModel` none (no pooler either), `…ForMaskedLM` lm, else pre-training) | `num_hidden_layers`, `hidden_size`, `num_attention_heads`, `intermediate_size`, `vocab_size`, `max_position_embeddings`, `type_vocab_size` (2), `hidden_act` (a GELU) |
//! | `llama`, `mistral`, `qwen2` | Llama | `num_hidden_layers`, `hidden_size`, `num_attention_heads`, `num_key_value_heads` (default: the heads), `intermediate_size`, `vocab_size`, `max_position_embeddings`, `hidden_act` (`silu`), `head_dim` (= hidden/heads), `attention_bias`/`mlp_bias` (false), `sliding_window` (≥ the sequence, or off), `tie_word_embeddings`; Qwen2 has q/k/v biases |
//!
//! Mixture-of-experts configurations (`num_local_experts`, `num_experts`) and any other
//! `model_type` are refused. `torch_dtype` (or `dtype`) gives the data type when the caller
//! sets none. Positions: GPT-2 and BERT tables have `n_positions` /
//! `max_position_embeddings` rows, and a longer sequence is refused; the Llama styles refuse
//! a sequence beyond `max_position_embeddings` too.
//!
//! A tied word embedding (`tie_word_embeddings`, GPT-2's default) is still counted on the
//! head's node as well: `pipeline()` copies it into every stage that uses it
//! ([`HfModel::tied_parameters`] says how many parameters that counts twice).

use serde_json::{Map, Value};

use super::operators::DType;
use super::transformer::{Head, Style, TransformerSpec};

/// A configuration read: the spec, its data type and its tied parameters.
#[derive(Clone, Debug)]
pub struct HfModel {
    pub spec: TransformerSpec,
    /// `torch_dtype` / `dtype`, when given.
    pub dtype: Option<DType>,
    /// Parameters counted twice by the generator because the head's weight is the word
    /// embedding (`V·h` when `tie_word_embeddings`, else 0).
    pub tied_parameters: usize,
    /// `model_type`.
    pub model_type: String,
}

/// Why a configuration cannot be priced.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum HfConfigError {
    #[error("config.json is not valid JSON: {0}")]
    Json(String),
    #[error("config.json: the top level must be an object")]
    NotObject,
    #[error("config.json: '{field}' is missing")]
    Missing { field: &'static str },
    #[error("config.json: '{field}' is {value}; it must be {expected}")]
    Bad {
        field: String,
        value: String,
        expected: String,
    },
    #[error("config.json: {field} = {value}: {why}; dnnplace does not price it")]
    Unsupported {
        field: String,
        value: String,
        why: String,
    },
}

struct Fields<'a>(&'a Map<String, Value>);

impl Fields<'_> {
    fn get(&self, field: &str) -> Option<&Value> {
        self.0.get(field).filter(|v| !v.is_null())
    }

    fn count(&self, field: &'static str) -> Result<usize, HfConfigError> {
        self.count_or(field, None)
    }

    fn count_or(
        &self,
        field: &'static str,
        default: Option<usize>,
    ) -> Result<usize, HfConfigError> {
        match self.get(field) {
            None => default.ok_or(HfConfigError::Missing { field }),
            Some(v) => match v.as_u64() {
                Some(n) if (1..=1 << 24).contains(&n) => Ok(n as usize),
                _ => Err(HfConfigError::Bad {
                    field: field.into(),
                    value: v.to_string(),
                    expected: "an integer from 1 to 2^24".into(),
                }),
            },
        }
    }

    fn flag(&self, field: &str, default: bool) -> Result<bool, HfConfigError> {
        match self.get(field) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| HfConfigError::Bad {
                field: field.into(),
                value: v.to_string(),
                expected: "true or false".into(),
            }),
        }
    }

    fn text(&self, field: &str) -> Option<String> {
        self.get(field).and_then(|v| v.as_str()).map(str::to_string)
    }

    /// `field`, when present, must be one of `allowed`.
    fn one_of(&self, field: &str, allowed: &[&str]) -> Result<(), HfConfigError> {
        match self.get(field) {
            Some(v) if !allowed.iter().any(|a| v.as_str() == Some(a)) => {
                Err(HfConfigError::Unsupported {
                    field: field.into(),
                    value: v.to_string(),
                    why: format!("the generator's activation is {}", allowed[0]),
                })
            }
            _ => Ok(()),
        }
    }
}

fn unsupported(field: &str, value: &Value, why: &str) -> HfConfigError {
    HfConfigError::Unsupported {
        field: field.into(),
        value: value.to_string(),
        why: why.into(),
    }
}

/// Reads a `config.json` for a sequence of `seq` tokens and micro-batch `batch`.
pub fn parse_hf_config(text: &str, seq: usize, batch: usize) -> Result<HfModel, HfConfigError> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| HfConfigError::Json(e.to_string()))?;
    let map = value.as_object().ok_or(HfConfigError::NotObject)?;
    let f = Fields(map);
    for moe in ["num_local_experts", "num_experts", "n_routed_experts"] {
        if let Some(v) = f.get(moe) {
            return Err(unsupported(
                moe,
                v,
                "mixture-of-experts layers are not modelled",
            ));
        }
    }
    let model_type = f.text("model_type").ok_or(HfConfigError::Missing {
        field: "model_type",
    })?;
    let (spec, tied) = match model_type.as_str() {
        "gpt2" => gpt2(&f, seq, batch)?,
        "bert" => bert(&f, seq, batch)?,
        "llama" | "mistral" | "qwen2" => llama(&f, &model_type, seq, batch)?,
        other => {
            return Err(HfConfigError::Unsupported {
                field: "model_type".into(),
                value: format!("\"{other}\""),
                why: "known: gpt2, bert, llama, mistral, qwen2".into(),
            })
        }
    };
    spec.validate().map_err(|why| HfConfigError::Unsupported {
        field: "the configuration".into(),
        value: model_type.clone(),
        why,
    })?;
    let dtype = dtype_of(&f)?;
    let tied_parameters = if tied { spec.vocab * spec.hidden } else { 0 };
    Ok(HfModel {
        spec,
        dtype,
        tied_parameters,
        model_type,
    })
}

fn dtype_of(f: &Fields) -> Result<Option<DType>, HfConfigError> {
    let field = if f.get("torch_dtype").is_some() {
        "torch_dtype"
    } else {
        "dtype"
    };
    match f.text(field).as_deref() {
        None => Ok(None),
        Some("float32") => Ok(Some(DType::Fp32)),
        Some("bfloat16") => Ok(Some(DType::Bf16)),
        Some("float16") => Ok(Some(DType::Fp16)),
        Some(other) => Err(HfConfigError::Bad {
            field: field.into(),
            value: format!("\"{other}\""),
            expected: "float32, bfloat16 or float16".into(),
        }),
    }
}

fn positions(f: &Fields, field: &'static str, seq: usize) -> Result<usize, HfConfigError> {
    let p = f.count(field)?;
    if seq > p {
        return Err(HfConfigError::Unsupported {
            field: field.into(),
            value: p.to_string(),
            why: format!("the sequence {seq} is longer than the model's positions"),
        });
    }
    Ok(p)
}

fn gpt2(f: &Fields, seq: usize, batch: usize) -> Result<(TransformerSpec, bool), HfConfigError> {
    let hidden = f.count("n_embd")?;
    let mut spec = TransformerSpec::new(
        Style::Gpt2,
        f.count("n_layer")?,
        hidden,
        f.count("n_head")?,
        seq,
        batch,
    );
    spec.ffn = f.count_or("n_inner", Some(4 * hidden))?;
    spec.vocab = f.count("vocab_size")?;
    spec.positions = Some(positions(f, "n_positions", seq)?);
    spec.head = Head::Lm;
    f.one_of(
        "activation_function",
        &["gelu_new", "gelu", "gelu_pytorch_tanh", "gelu_fast"],
    )?;
    Ok((spec, f.flag("tie_word_embeddings", true)?))
}

fn bert(f: &Fields, seq: usize, batch: usize) -> Result<(TransformerSpec, bool), HfConfigError> {
    let mut spec = TransformerSpec::new(
        Style::Bert,
        f.count("num_hidden_layers")?,
        f.count("hidden_size")?,
        f.count("num_attention_heads")?,
        seq,
        batch,
    );
    spec.ffn = f.count("intermediate_size")?;
    spec.vocab = f.count("vocab_size")?;
    spec.positions = Some(positions(f, "max_position_embeddings", seq)?);
    if let Some(v) = f.get("type_vocab_size") {
        if v.as_u64() != Some(2) {
            return Err(unsupported(
                "type_vocab_size",
                v,
                "the generator has 2 token types",
            ));
        }
    }
    f.one_of("hidden_act", &["gelu", "gelu_new", "gelu_pytorch_tanh"])?;
    // The head from `architectures`: `BertModel` none, `…ForMaskedLM` the LM head, else
    // (`BertForPreTraining`, absent) the pre-training heads.
    let arch = f
        .get("architectures")
        .and_then(|a| a.get(0))
        .and_then(|a| a.as_str())
        .unwrap_or("");
    spec.head = if arch == "BertModel" {
        Head::None
    } else if arch.ends_with("ForMaskedLM") {
        Head::Lm
    } else {
        Head::Bert
    };
    let tied = spec.head != Head::None && f.flag("tie_word_embeddings", true)?;
    Ok((spec, tied))
}

fn llama(
    f: &Fields,
    model_type: &str,
    seq: usize,
    batch: usize,
) -> Result<(TransformerSpec, bool), HfConfigError> {
    let heads = f.count("num_attention_heads")?;
    let hidden = f.count("hidden_size")?;
    let mut spec = TransformerSpec::new(
        Style::Llama,
        f.count("num_hidden_layers")?,
        hidden,
        heads,
        seq,
        batch,
    );
    spec.ffn = f.count("intermediate_size")?;
    spec.vocab = f.count("vocab_size")?;
    spec.kv_heads = f.count_or("num_key_value_heads", Some(heads))?;
    spec.qkv_bias = model_type == "qwen2";
    spec.head = Head::Lm;
    positions(f, "max_position_embeddings", seq)?;
    f.one_of("hidden_act", &["silu"])?;
    if let Some(v) = f.get("head_dim") {
        if hidden % heads != 0 || v.as_u64() != Some((hidden / heads) as u64) {
            return Err(unsupported(
                "head_dim",
                v,
                "the generator's head size is hidden_size / num_attention_heads",
            ));
        }
    }
    for field in ["attention_bias", "mlp_bias"] {
        if f.flag(field, false)? {
            return Err(unsupported(
                field,
                &Value::Bool(true),
                "the Llama style has no such biases",
            ));
        }
    }
    let window_on = model_type != "qwen2" || f.flag("use_sliding_window", false)?;
    if let (true, Some(v)) = (window_on, f.get("sliding_window")) {
        if v.as_u64().is_none_or(|w| (w as usize) < seq) {
            return Err(unsupported(
                "sliding_window",
                v,
                &format!("a window shorter than the sequence {seq} changes attention's cost"),
            ));
        }
    }
    Ok((spec, f.flag("tie_word_embeddings", false)?))
}

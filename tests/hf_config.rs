//! Hugging Face `config.json` → workload (`crates/dnnplace/src/costmodel/hf_config.rs`,
//! `generate transformer --hf-config`): configurations written here from the published
//! values give the published parameter counts; grouped-query attention and q/k/v biases
//! keep the closed-form block FLOPs; what the generator cannot price is refused by name.

use std::process::Command;

use dnnplace::costmodel::hf_config::parse_hf_config;
use dnnplace::costmodel::{transformer_graph, DType};
use serde_json::json;

fn configs() -> Vec<(&'static str, serde_json::Value, f64)> {
    vec![
        // meta-llama/Meta-Llama-3-8B: 8,030,261,248 parameters.
        (
            "llama-3-8b",
            json!({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
            "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
            "vocab_size": 128256, "max_position_embeddings": 8192, "hidden_act": "silu", "rms_norm_eps": 1e-5,
            "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
            "attention_bias": false, "mlp_bias": false}),
            8_030_261_248.0,
        ),
        // mistralai/Mistral-7B-v0.1: 7,241,732,096.
        (
            "mistral-7b",
            json!({"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
            "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 32000,
            "max_position_embeddings": 32768, "sliding_window": 4096, "hidden_act": "silu",
            "tie_word_embeddings": false, "torch_dtype": "bfloat16"}),
            7_241_732_096.0,
        ),
        // Qwen/Qwen2-0.5B: 494,032,768 (q/k/v biases, tied embedding).
        (
            "qwen2-0.5b",
            json!({"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
            "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "vocab_size": 151936,
            "max_position_embeddings": 131072, "sliding_window": 131072, "use_sliding_window": false,
            "hidden_act": "silu", "tie_word_embeddings": true, "torch_dtype": "bfloat16"}),
            494_032_768.0,
        ),
        // openai-community/gpt2: 124,439,808 (tied embedding).
        (
            "gpt2",
            json!({"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "n_inner": null,
            "vocab_size": 50257, "n_positions": 1024, "n_ctx": 1024, "activation_function": "gelu_new"}),
            124_439_808.0,
        ),
        // google-bert/bert-base-uncased as BertForMaskedLM: 109,514,298 (tied decoder).
        (
            "bert-base",
            json!({"architectures": ["BertForMaskedLM"], "model_type": "bert", "hidden_size": 768,
            "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 30522,
            "max_position_embeddings": 512, "type_vocab_size": 2, "hidden_act": "gelu"}),
            109_514_298.0,
        ),
        // The same as BertModel without its pooler (`add_pooling_layer=False`): 108,891,648;
        // the generator's head "none" has no pooler (HF's default BertModel adds 590,592).
        (
            "bert-base-model",
            json!({"architectures": ["BertModel"], "model_type": "bert", "hidden_size": 768,
            "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 30522,
            "max_position_embeddings": 512, "type_vocab_size": 2, "hidden_act": "gelu"}),
            108_891_648.0,
        ),
    ]
}

#[test]
fn published_configs_give_the_published_parameter_counts() {
    for (name, cfg, published) in configs() {
        let model =
            parse_hf_config(&cfg.to_string(), 512, 1).unwrap_or_else(|e| panic!("{name}: {e}"));
        let graph = transformer_graph(&model.spec, DType::Fp32).unwrap();
        let params = graph.param_bytes() / 4.0 - model.tied_parameters as f64;
        let off = params / published - 1.0;
        println!(
            "{name}: {params} parameters, published {published} ({:+.4}%)",
            100.0 * off
        );
        assert!(
            off.abs() < 0.005,
            "{name}: {params} vs published {published}"
        );
    }
}

#[test]
fn bert_model_has_no_head() {
    let cfg = &configs()[5].1;
    let model = parse_hf_config(&cfg.to_string(), 128, 1).unwrap();
    let graph = transformer_graph(&model.spec, DType::Fp32).unwrap();
    assert!(graph.ops.iter().all(|o| {
        let m = o.module.as_deref().unwrap_or("");
        !m.starts_with("cls.") && !m.starts_with("bert.pooler")
    }));
    assert_eq!(model.tied_parameters, 0);
}

#[test]
fn grouped_query_attention_keeps_the_closed_form() {
    for (name, cfg, _) in configs()
        .into_iter()
        .filter(|c| c.0 == "llama-3-8b" || c.0 == "qwen2-0.5b")
    {
        let mut model = parse_hf_config(&cfg.to_string(), 256, 2).unwrap();
        model.spec.layers = 2;
        let graph = transformer_graph(&model.spec, DType::Bf16).unwrap();
        let block: f64 = graph
            .ops
            .iter()
            .filter(|o| o.layer_id == Some(1))
            .map(|o| o.cost.flops)
            .sum();
        let params: f64 = graph
            .ops
            .iter()
            .filter(|o| o.layer_id == Some(1))
            .map(|o| o.cost.param_bytes)
            .sum::<f64>()
            / 2.0;
        let closed = model.spec.layer_flops_closed_form();
        assert!(
            (block / closed - 1.0).abs() < 1e-12,
            "{name}: {block} vs {closed}"
        );
        assert!(
            (params / model.spec.layer_params_closed_form() - 1.0).abs() < 1e-12,
            "{name}"
        );
        // k_proj maps h -> g·d.
        let k = graph
            .ops
            .iter()
            .find(|o| o.name == "model.layers.1.self_attn.k_proj")
            .unwrap();
        let (h, c) = (model.spec.hidden as f64, model.spec.kv_width() as f64);
        let bias = if model.spec.qkv_bias { c } else { 0.0 };
        assert_eq!(k.cost.param_bytes, 2.0 * (h * c + bias), "{name}");
    }
}

fn dnnplace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dnnplace"))
}

#[test]
fn the_command_reads_a_config_and_refuses_what_it_cannot_price() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, v: &serde_json::Value| {
        let p = dir.path().join(name);
        std::fs::write(&p, v.to_string()).unwrap();
        p
    };
    let llama = write("llama.json", &configs()[0].1);
    let out = dnnplace()
        .args(["generate", "transformer", "--hf-config"])
        .arg(&llama)
        .args(["--seq", "1024", "--device", "h100", "--training"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("8.0303 B parameters") && stderr.contains("8 key/value heads"),
        "{stderr}"
    );
    let w: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = w["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["name"].as_str())
        .collect();
    assert!(names.contains(&"model.layers.31.mlp.up_proj") && names.contains(&"lm_head"));
    // torch_dtype bfloat16 is the default dtype: 2-byte weights on lm_head.
    let head = w["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "lm_head")
        .unwrap();
    assert_eq!(
        head["weightBytes"].as_f64().unwrap(),
        2.0 * 128256.0 * 4096.0
    );

    let mut cases = vec![];
    let mut moe = configs()[1].1.clone();
    moe["model_type"] = json!("mixtral");
    moe["num_local_experts"] = json!(8);
    cases.push(("moe.json", moe, vec![], "num_local_experts"));
    let mut other = configs()[0].1.clone();
    other["model_type"] = json!("gemma");
    cases.push(("gemma.json", other, vec![], "model_type"));
    cases.push((
        "window.json",
        configs()[1].1.clone(),
        vec!["--seq", "8192"],
        "sliding_window",
    ));
    cases.push((
        "long.json",
        configs()[3].1.clone(),
        vec!["--seq", "2048"],
        "n_positions",
    ));
    let mut gelu = configs()[0].1.clone();
    gelu["hidden_act"] = json!("gelu");
    cases.push(("act.json", gelu, vec![], "hidden_act"));
    let mut missing = configs()[0].1.clone();
    missing.as_object_mut().unwrap().remove("hidden_size");
    cases.push(("missing.json", missing, vec![], "'hidden_size' is missing"));
    for (file, cfg, extra, field) in cases {
        let p = write(file, &cfg);
        let out = dnnplace()
            .args(["generate", "transformer", "--hf-config"])
            .arg(&p)
            .args(&extra)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{file}: {stderr}");
        assert!(
            stderr.contains(field) && stderr.contains(file),
            "{file}: {stderr}"
        );
    }
    // The shape flags and --hf-config exclude each other.
    let out = dnnplace()
        .args(["generate", "transformer", "--layers", "4", "--hf-config"])
        .arg(&llama)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

fn any_value() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
    use proptest::prelude::*;
    prop_oneof![
        Just(json!(null)),
        any::<bool>().prop_map(|b| json!(b)),
        any::<i64>().prop_map(|i| json!(i)),
        (0u64..70000).prop_map(|i| json!(i)),
        any::<f64>()
            .prop_filter("finite", |x| x.is_finite())
            .prop_map(|x| json!(x)),
        "[a-z_]{0,12}".prop_map(|s| json!(s)),
        Just(json!([1, 2])),
        Just(json!({"a": 1})),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(400))]
    /// A field of a valid config replaced by any JSON value: a clear error or a workload the
    /// generator builds, never a panic; an error names a field or says what is wrong.
    #[test]
    fn mutated_configs_are_read_or_refused(which in 0usize..6, field in 0usize..20, value in any_value(),
                                          seq in 1usize..5000) {
        let mut cfg = configs()[which].1.clone();
        let keys: Vec<String> = cfg.as_object().unwrap().keys().cloned().collect();
        let key = keys[field % keys.len()].clone();
        cfg[&key] = value;
        match parse_hf_config(&cfg.to_string(), seq, 1) {
            Ok(model) => {
                let mut spec = model.spec.clone();
                spec.layers = spec.layers.min(2);
                spec.vocab = spec.vocab.min(4096);
                proptest::prop_assert!(transformer_graph(&spec, DType::Fp32).is_ok());
            }
            Err(e) => {
                let msg = e.to_string();
                proptest::prop_assert!(msg.starts_with("config.json"), "{}", msg);
            }
        }
    }
}

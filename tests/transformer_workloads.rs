//! Generated transformers of every style validate and plan with the DP for 4–64 layers; a
//! 2-layer model of each style has the Hugging Face module names (golden lists written by
//! hand) and block-index layer ids; names, modules and memory parts survive a JSON round
//! trip and follow the training rule; the shipped example is what the generator produces;
//! and (ignored, prints a table) our BERT-24 costs against the published profiled layer
//! workload.

use std::path::Path;

use dnnplace::costmodel::{
    find_profile, to_workload, transformer_graph, CostSettings, DType, Style, TransformerSpec,
};
use dnnplace::io::{parse_workload, read_workload, workload_to_json};
use dnnplace::solve::{self, dp::Dp, Problem, Status};

fn settings(device: &str, dtype: DType, training: bool, accelerators: usize) -> CostSettings {
    CostSettings {
        accelerator: find_profile(device, &[]).unwrap(),
        cpu: find_profile("cpu-core", &[]).unwrap(),
        dtype,
        training,
        accelerators,
        cpus: 1,
    }
}

/// Operators per block, before the blocks (input + embeddings) and after them (final norm
/// and the style's default head), by style: counted from the module documentation.
fn op_counts(style: Style) -> (usize, usize, usize) {
    match style {
        Style::Bert => (14, 6, 6),
        Style::Gpt2 => (12, 4, 2),
        Style::Llama => (17, 2, 2),
    }
}

#[test]
fn transformers_of_4_to_64_layers_plan() {
    for style in [Style::Bert, Style::Gpt2, Style::Llama] {
        for layers in [4, 8, 16, 32, 64] {
            for training in [false, true] {
                let spec = TransformerSpec::new(style, layers, 256, 4, 128, 4);
                let g = transformer_graph(&spec, DType::Fp16).unwrap();
                let w = to_workload(&g, &settings("a100-80gb", DType::Fp16, training, 8)).unwrap();
                assert_eq!(
                    w.len(),
                    if training {
                        2 * g.ops.len() - 1
                    } else {
                        g.ops.len()
                    }
                );
                let plan = solve::plan(&Dp, &Problem::throughput(&w)).unwrap();
                assert_eq!(plan.outcome.status, Status::Optimal);
                let (block, before, after) = op_counts(style);
                assert_eq!(g.ops.len(), block * layers + before + after, "{style:?}");
                // The ideals of a block: its chain, with the fan-outs (Q/K/V, gate/up) adding a
                // handful (Llama's 17-operator block, with two fan-outs, has the most).
                let ideals = plan.outcome.stats.ideals.unwrap();
                let per_block = if style == Style::Llama { 30 } else { 25 };
                assert!(
                    ideals <= per_block * layers + 20,
                    "{style:?} {layers} layers: {ideals} ideals"
                );
                let total: f64 = w.nodes().iter().map(|n| n.fpga_latency).sum();
                let tps = plan.evaluation.as_ref().unwrap().max_load;
                assert!(
                    tps < total,
                    "{layers} layers: TPS {tps} vs one device {total}"
                );
            }
        }
    }
}

/// The Hugging Face module names of a 2-layer model of each style, written out by hand from
/// the models' module trees (`BertForPreTraining`, `GPT2LMHeadModel`, `LlamaForCausalLM`);
/// `{i}` is the block index. Each entry: (name, module when it differs from the name).
type Named = Vec<(&'static str, Option<&'static str>)>;

fn golden(style: Style) -> (Named, Named, Vec<&'static str>) {
    match style {
        Style::Bert => (
            vec![
                ("bert.embeddings.word_embeddings", None),
                ("bert.embeddings.position_embeddings", None),
                ("bert.embeddings.token_type_embeddings", None),
                ("bert.embeddings.add", Some("bert.embeddings")),
                ("bert.embeddings.LayerNorm", None),
            ],
            vec![
                ("bert.encoder.layer.{i}.attention.self.query", None),
                ("bert.encoder.layer.{i}.attention.self.key", None),
                ("bert.encoder.layer.{i}.attention.self.value", None),
                (
                    "bert.encoder.layer.{i}.attention.self.scores",
                    Some("bert.encoder.layer.{i}.attention.self"),
                ),
                (
                    "bert.encoder.layer.{i}.attention.self.softmax",
                    Some("bert.encoder.layer.{i}.attention.self"),
                ),
                (
                    "bert.encoder.layer.{i}.attention.self.context",
                    Some("bert.encoder.layer.{i}.attention.self"),
                ),
                ("bert.encoder.layer.{i}.attention.output.dense", None),
                (
                    "bert.encoder.layer.{i}.attention.output.residual",
                    Some("bert.encoder.layer.{i}.attention.output"),
                ),
                ("bert.encoder.layer.{i}.attention.output.LayerNorm", None),
                ("bert.encoder.layer.{i}.intermediate.dense", None),
                (
                    "bert.encoder.layer.{i}.intermediate.intermediate_act_fn",
                    None,
                ),
                ("bert.encoder.layer.{i}.output.dense", None),
                (
                    "bert.encoder.layer.{i}.output.residual",
                    Some("bert.encoder.layer.{i}.output"),
                ),
                ("bert.encoder.layer.{i}.output.LayerNorm", None),
            ],
            vec![
                "bert.pooler",
                "cls.predictions.transform.dense",
                "cls.predictions.transform.transform_act_fn",
                "cls.predictions.transform.LayerNorm",
                "cls.predictions.decoder",
                "cls.seq_relationship",
            ],
        ),
        Style::Gpt2 => (
            vec![
                ("transformer.wte", None),
                ("transformer.wpe", None),
                ("transformer.embeddings_add", Some("transformer")),
            ],
            vec![
                ("transformer.h.{i}.ln_1", None),
                ("transformer.h.{i}.attn.c_attn", None),
                (
                    "transformer.h.{i}.attn.scores",
                    Some("transformer.h.{i}.attn"),
                ),
                (
                    "transformer.h.{i}.attn.softmax",
                    Some("transformer.h.{i}.attn"),
                ),
                (
                    "transformer.h.{i}.attn.context",
                    Some("transformer.h.{i}.attn"),
                ),
                ("transformer.h.{i}.attn.c_proj", None),
                ("transformer.h.{i}.attn_residual", Some("transformer.h.{i}")),
                ("transformer.h.{i}.ln_2", None),
                ("transformer.h.{i}.mlp.c_fc", None),
                ("transformer.h.{i}.mlp.act", None),
                ("transformer.h.{i}.mlp.c_proj", None),
                ("transformer.h.{i}.mlp_residual", Some("transformer.h.{i}")),
            ],
            vec!["transformer.ln_f", "lm_head"],
        ),
        Style::Llama => (
            vec![("model.embed_tokens", None)],
            vec![
                ("model.layers.{i}.input_layernorm", None),
                ("model.layers.{i}.self_attn.q_proj", None),
                ("model.layers.{i}.self_attn.k_proj", None),
                ("model.layers.{i}.self_attn.v_proj", None),
                (
                    "model.layers.{i}.self_attn.rotary",
                    Some("model.layers.{i}.self_attn"),
                ),
                (
                    "model.layers.{i}.self_attn.scores",
                    Some("model.layers.{i}.self_attn"),
                ),
                (
                    "model.layers.{i}.self_attn.softmax",
                    Some("model.layers.{i}.self_attn"),
                ),
                (
                    "model.layers.{i}.self_attn.context",
                    Some("model.layers.{i}.self_attn"),
                ),
                ("model.layers.{i}.self_attn.o_proj", None),
                ("model.layers.{i}.attn_residual", Some("model.layers.{i}")),
                ("model.layers.{i}.post_attention_layernorm", None),
                ("model.layers.{i}.mlp.gate_proj", None),
                ("model.layers.{i}.mlp.up_proj", None),
                ("model.layers.{i}.mlp.act_fn", None),
                ("model.layers.{i}.mlp.mul", Some("model.layers.{i}.mlp")),
                ("model.layers.{i}.mlp.down_proj", None),
                ("model.layers.{i}.mlp_residual", Some("model.layers.{i}")),
            ],
            vec!["model.norm", "lm_head"],
        ),
    }
}

#[test]
fn two_layer_models_have_the_hugging_face_names_and_block_layer_ids() {
    for style in [Style::Bert, Style::Gpt2, Style::Llama] {
        let spec = TransformerSpec::new(style, 2, 64, 4, 16, 2);
        let w = to_workload(
            &transformer_graph(&spec, DType::Fp32).unwrap(),
            &settings("a100-80gb", DType::Fp32, false, 2),
        )
        .unwrap();
        let (embeddings, block, head) = golden(style);
        // (name, module, layerId) expected in node order.
        let mut expected: Vec<(String, Option<String>, i64)> = vec![("input_ids".into(), None, -1)];
        for (name, module) in embeddings {
            expected.push((name.into(), Some(module.unwrap_or(name).into()), -1));
        }
        for i in 0..2 {
            for (name, module) in &block {
                let at = |t: &str| t.replace("{i}", &i.to_string());
                expected.push((at(name), Some(at(module.unwrap_or(name))), i));
            }
        }
        for name in head {
            expected.push((name.into(), Some(name.into()), 2));
        }
        let actual: Vec<(String, Option<String>, i64)> = w
            .nodes()
            .iter()
            .map(|n| {
                (
                    n.name.clone().unwrap(),
                    n.module.clone(),
                    n.layer_id.unwrap(),
                )
            })
            .collect();
        assert_eq!(actual, expected, "{style:?}");
    }
}

#[test]
fn names_modules_and_memory_survive_a_json_round_trip() {
    for style in [Style::Bert, Style::Gpt2, Style::Llama] {
        for (dtype, training) in [(DType::Fp32, false), (DType::Bf16, true)] {
            let spec = TransformerSpec::new(style, 2, 64, 4, 16, 2);
            let g = transformer_graph(&spec, dtype).unwrap();
            let w = to_workload(&g, &settings("h100", dtype, training, 2)).unwrap();
            let text = workload_to_json(&w);
            let back = parse_workload(&text).unwrap();
            assert_eq!(back.nodes(), w.nodes(), "{style:?} training={training}");
            assert_eq!(back.edges(), w.edges());
            assert_eq!(workload_to_json(&back), text);
            assert!(w.nodes().iter().all(|n| n.memory.is_some()));
        }
    }
}

#[test]
fn memory_parts_add_up_and_follow_the_training_rule() {
    // Llama, bf16, training: per forward operator W = P·e; per backward node G = P·e,
    // O = P·(8 + 4) (Adam moments + fp32 master copy), A = the forward input bytes.
    let spec = TransformerSpec::new(Style::Llama, 2, 64, 4, 16, 2);
    let g = transformer_graph(&spec, DType::Bf16).unwrap();
    let w = to_workload(&g, &settings("h100", DType::Bf16, true, 2)).unwrap();
    let n = g.ops.len();
    for (i, op) in g.ops.iter().enumerate() {
        let fwd = w.node(i);
        let m = fwd.memory.unwrap();
        assert_eq!(
            (
                m.weight_bytes,
                m.gradient_bytes,
                m.optimizer_bytes,
                m.activation_bytes
            ),
            (op.cost.param_bytes, 0.0, 0.0, 0.0)
        );
        assert_eq!(
            fwd.size_bytes,
            op.cost.param_bytes + op.cost.output_bytes,
            "{}",
            op.name
        );
        if op.is_input {
            continue;
        }
        let back = w.node(w.index_of(fwd.id + n as i64).unwrap());
        let m = back.memory.unwrap();
        let params = op.cost.param_bytes / 2.0;
        assert_eq!(m.gradient_bytes, op.cost.param_bytes);
        assert_eq!(m.optimizer_bytes, 12.0 * params);
        assert_eq!(m.activation_bytes, op.cost.input_bytes);
        assert_eq!(back.size_bytes, m.total_bytes(), "{}", op.name);
    }
    // Block 0's weights: 4h² + 3hf + 2h bf16 parameters (f = 256 for h = 64).
    let block0: f64 = w
        .nodes()
        .iter()
        .filter(|v| v.layer_id == Some(0))
        .filter_map(|v| v.memory)
        .map(|m| m.weight_bytes)
        .sum();
    assert_eq!(
        block0,
        2.0 * (4.0 * 64.0 * 64.0 + 3.0 * 64.0 * 256.0 + 2.0 * 64.0)
    );
}

#[test]
fn the_shipped_example_is_what_the_generator_makes() {
    // examples/README.md records the command; this is the same call.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bert-tiny.json");
    let shipped = read_workload(&path).unwrap();
    let mut spec = TransformerSpec::new(Style::Bert, 6, 512, 8, 128, 8);
    spec.vocab = 8192;
    let g = transformer_graph(&spec, DType::Fp32).unwrap();
    let w = to_workload(&g, &settings("a100-80gb", DType::Fp32, false, 4)).unwrap();
    assert_eq!(w.len(), shipped.len());
    assert_eq!(w.edges().len(), shipped.edges().len());
    let close = |x: f64, y: f64| (x - y).abs() <= 1e-12 * x.abs().max(1.0);
    for (a, b) in w.nodes().iter().zip(shipped.nodes()) {
        assert_eq!(
            (a.id, &a.name, &a.module, a.layer_id, a.memory),
            (b.id, &b.name, &b.module, b.layer_id, b.memory)
        );
        assert!(
            close(a.fpga_latency, b.fpga_latency) && close(a.cpu_latency, b.cpu_latency),
            "node {}",
            a.id
        );
        assert!(
            close(a.size_bytes, b.size_bytes),
            "node {}: size {} vs {}",
            a.id,
            a.size_bytes,
            b.size_bytes
        );
    }
    for (v, _) in w.nodes().iter().enumerate() {
        assert!(
            close(w.out_cost(v), shipped.out_cost(v)),
            "out cost of node {}",
            v + 1
        );
    }
    let plan = solve::plan(&Dp, &Problem::throughput(&shipped)).unwrap();
    assert_eq!(plan.outcome.status, Status::Optimal);
}

/// `cargo test --release --test transformer_workloads -- --ignored --nocapture`
/// prints our BERT-24 (h 1024, 16 heads, seq 512, batch 2, V100, fp32) against the
/// profiled `paper/throughput/layer/bert24_inference.json`, per layer type.
#[test]
#[ignore = "prints a comparison table; needs ../shared"]
fn bert24_against_the_profiled_layer_workload() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/workloads/paper/throughput/layer/bert24_inference.json");
    if !path.is_file() {
        println!("skipped: {} is absent", path.display());
        return;
    }
    let profiled = read_workload(&path).unwrap();
    let by_id = |id: i64| profiled.node(profiled.index_of(id).unwrap()).clone();
    let out_cost = |id: i64| profiled.out_cost(profiled.index_of(id).unwrap());
    let spec = TransformerSpec::bert(24, 1024, 16, 512, 2);
    let g = transformer_graph(&spec, DType::Fp32).unwrap();
    let w = to_workload(&g, &settings("v100", DType::Fp32, false, 6)).unwrap();
    // Our nodes grouped like the profiled layers (ids follow the operator order).
    let sum = |pred: &dyn Fn(&dnnplace::costmodel::Op) -> bool| {
        let mut acc = (0.0, 0.0, 0.0);
        for (i, op) in g.ops.iter().enumerate() {
            if pred(op) {
                let n = w.node(i);
                acc.0 += n.fpga_latency;
                acc.1 += n.cpu_latency;
                acc.2 += op.cost.param_bytes;
            }
        }
        acc
    };
    let embed = sum(&|o| o.layer_id == Some(-1) && !o.is_input);
    let layer_sum = sum(&|o| matches!(o.layer_id, Some(l) if (0..24).contains(&l)));
    let layer = (layer_sum.0 / 24.0, layer_sum.1 / 24.0, layer_sum.2 / 24.0);
    let pooler = sum(&|o| o.name == "bert.pooler");
    let mlm = sum(&|o| o.name.starts_with("cls.predictions."));
    let mean = |ids: &mut dyn Iterator<Item = i64>| {
        let v: Vec<_> = ids.map(by_id).collect();
        let k = v.len() as f64;
        (
            v.iter().map(|n| n.fpga_latency).sum::<f64>() / k,
            v.iter().map(|n| n.cpu_latency).sum::<f64>() / k,
        )
    };
    let rows = [
        ("embeddings (node 3)", embed, mean(&mut [3].into_iter())),
        (
            "encoder layer (nodes 5-28, mean)",
            layer,
            mean(&mut (5..=28)),
        ),
        ("pooler (node 29)", pooler, mean(&mut [29].into_iter())),
        ("MLM head (node 30)", mlm, mean(&mut [30].into_iter())),
    ];
    println!("| layer type | ours fpga ms | profiled fpga ms | ratio | ours cpu ms | profiled cpu ms | ratio |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (name, ours, prof) in rows {
        println!(
            "| {name} | {:.3} | {:.3} | {:.2} | {:.1} | {:.1} | {:.1} |",
            ours.0,
            prof.0,
            ours.0 / prof.0,
            ours.1,
            prof.1,
            ours.1 / prof.1
        );
    }
    // Sizes: ours = parameters + output; profiled the same convention.
    let layer_size: f64 = g
        .ops
        .iter()
        .enumerate()
        .filter(|(_, o)| o.layer_id == Some(0))
        .map(|(_, o)| o.cost.param_bytes)
        .sum::<f64>()
        + 2.0 * 512.0 * 1024.0 * 4.0;
    println!(
        "layer size: ours {layer_size} bytes (params + output), profiled {}",
        by_id(5).size_bytes
    );
    let ours_edge =
        1e3 * 2.0 * 512.0 * 1024.0 * 4.0 / find_profile("v100", &[]).unwrap().host_link_bytes_per_s;
    println!(
        "layer output transfer (4 MiB): ours {ours_edge:.4} ms, profiled {:.6} (ratio {:.0})",
        out_cost(5),
        ours_edge / out_cost(5)
    );
}

//! Exports to torch, DeepSpeed, Megatron-LM, vLLM and accelerate: golden texts on a 24-block
//! llama-style workload with a planted optimum (24 equal blocks on 4 GPUs split 6/6/6/6),
//! the targets' rules on the texts (each rule cited from the target's source in
//! docs/export.md), round trips (export → read back → identical placement and score) on
//! random splits, refusals with their reasons, files people write by hand, and an imported
//! ONNX model from ../shared/workloads/onnx (read at test time).
//!
//! Golden files live in tests/golden; `UPDATE_GOLDEN=1 cargo test --test exports`
//! rewrites them (review the diff: the key lines are also asserted independently below).

mod common;

use common::llama::{llama, Llama};
use dnnplace::export::{self, exporter_by_name, exporters, read_export, LayerPlan};
use dnnplace::model::layers::Layers;
use dnnplace::model::{Device, Placement, Workload};
use dnnplace::score::evaluate;
use dnnplace::solve::{dp::Dp, layer_granular::plan_by_layers, Problem, Status};
use proptest::prelude::*;

const FORMATS: [&str; 6] = [
    "torch",
    "torch-json",
    "deepspeed",
    "megatron",
    "vllm",
    "accelerate",
];

/// The layer-granular DP plan of `w`.
fn dp_plan(w: &Workload, layers: &Layers) -> Placement {
    let plan = plan_by_layers(&Dp, &Problem::throughput(w), layers).unwrap();
    assert_eq!(plan.outcome.status, Status::Optimal);
    plan.outcome.placement.unwrap()
}

/// A placement giving block runs of `counts` to accelerators 0, 1, …: the embedding with
/// the first stage, the head with the last.
fn split(w: &Workload, layers: &Layers, counts: &[usize]) -> Placement {
    let mut device = vec![Device::Accelerator(0); layers.len()];
    let mut stage_of_block = Vec::new();
    for (s, &c) in counts.iter().enumerate() {
        stage_of_block.extend(std::iter::repeat_n(s, c));
    }
    for (l, layer) in layers.layers.iter().enumerate() {
        device[l] = match layer.block {
            Some(i) => Device::Accelerator(stage_of_block[i]),
            None if l == 0 => Device::Accelerator(0),
            None => Device::Accelerator(counts.len() - 1),
        };
    }
    Placement::new((0..w.len()).map(|v| device[layers.layer_of[v]]).collect())
}

fn export_of(format: &str, w: &Workload, layers: &Layers, p: &Placement) -> Result<String, String> {
    let plan = LayerPlan::new(w, layers, p)?;
    export::export(exporter_by_name(format).unwrap().as_ref(), &plan).map_err(|e| e.to_string())
}

fn golden(name: &str, text: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    assert_eq!(
        text, expected,
        "{name} differs from tests/golden/{name}; if the cost model, the importer or the format changed on purpose, regenerate with UPDATE_GOLDEN=1 and review the diff"
    );
}

/// The line of `text` that starts with `prefix` (after leading spaces).
fn line<'t>(text: &'t str, prefix: &str) -> &'t str {
    text.lines()
        .find(|l| l.trim_start().starts_with(prefix))
        .unwrap_or_else(|| panic!("no line {prefix:?} in\n{text}"))
}

#[test]
fn the_dp_finds_the_planted_split_and_every_format_says_six_per_stage() {
    let w = llama(Llama::default());
    let layers = Layers::new(&w).unwrap();
    assert_eq!(layers.len(), 26);
    assert_eq!(layers.block_list.as_deref(), Some("model.layers"));
    let p = dp_plan(&w, &layers);
    // Planted: blocks of 1 ms, embedding and head free; the only optimum is 6/6/6/6 with TPS
    // 6 + 2·c (a middle stage receives one tensor and sends one).
    let tps = evaluate(&w, &p, false).max_load;
    assert!((tps - (6.0 + 2.0 * 0.001)).abs() < 1e-12, "{tps}");
    assert_eq!(p, split(&w, &layers, &[6, 6, 6, 6]));

    let texts: Vec<(&str, String)> = FORMATS
        .iter()
        .map(|f| (*f, export_of(f, &w, &layers, &p).unwrap()))
        .collect();
    let text = |f: &str| texts.iter().find(|(g, _)| *g == f).unwrap().1.clone();
    assert_eq!(
        line(&text("vllm"), "VLLM_PP"),
        "VLLM_PP_LAYER_PARTITION=\"6,6,6,6\" vllm serve MODEL --pipeline-parallel-size 4"
    );
    assert_eq!(
        line(&text("megatron"), "--pipeline"),
        "--pipeline-model-parallel-size 4 --num-layers 24 --pipeline-model-parallel-layout \"E,t*6|t*6|t*6|t*6,L\""
    );
    assert!(text("megatron")
        .contains("--decoder-first-pipeline-num-layers 6 --decoder-last-pipeline-num-layers 6"));
    // 26 layers: [input_ids + embed_tokens], 24 blocks, [norm + lm_head].
    assert_eq!(
        line(&text("deepspeed"), "parts ="),
        "parts = [0,7,13,19,26]"
    );
    let torch = text("torch");
    for key in ["model.layers.6", "model.layers.12", "model.layers.18"] {
        assert!(
            torch.contains(&format!("\"{key}\": SplitPoint.BEGINNING")),
            "{torch}"
        );
    }
    assert_eq!(torch.matches("\": SplitPoint.BEGINNING").count(), 3);
    let accelerate = text("accelerate");
    for (key, gpu) in [
        ("model.embed_tokens", 0),
        ("model.layers.5", 0),
        ("model.layers.6", 1),
        ("model.layers.23", 3),
        ("lm_head", 3),
    ] {
        assert!(
            accelerate.contains(&format!("\"{key}\": {gpu}")),
            "{key}: {accelerate}"
        );
    }
    for (f, t) in &texts {
        golden(&format!("llama24.{f}"), t);
    }
}

/// The layer-granular optimum by exhaustion over every split of the 26-layer chain into at
/// most 4 runs, scored by the evaluator: the oracle of the DP on the relabelled workload.
#[test]
fn layer_granular_dp_matches_exhaustive_chain_splits_with_heavy_ends() {
    let w = llama(Llama {
        embed_ms: 3.5,
        head_ms: 4.5,
        blocks: 12,
        ..Llama::default()
    });
    let layers = Layers::new(&w).unwrap();
    let n = layers.len();
    let p = dp_plan(&w, &layers);
    let dp = evaluate(&w, &p, false).max_load;
    let mut best = f64::INFINITY;
    for a in 1..=n {
        for b in a..=n {
            for c in b..=n {
                let cut = [0, a, b, c, n];
                let device: Vec<Device> = (0..n)
                    .map(|l| {
                        Device::Accelerator(
                            (0..4).find(|&s| cut[s] <= l && l < cut[s + 1]).unwrap(),
                        )
                    })
                    .collect();
                let q = Placement::new((0..w.len()).map(|v| device[layers.layer_of[v]]).collect());
                best = best.min(evaluate(&w, &q, false).max_load);
            }
        }
    }
    assert!(
        (dp - best).abs() <= 1e-9 * best,
        "DP {dp} vs exhaustive {best}"
    );
    // The embedding and head weigh 3.5 and 4.5 blocks: the end stages hold fewer blocks.
    let vllm = export_of("vllm", &w, &layers, &p).unwrap();
    let counts: Vec<usize> = line(&vllm, "VLLM_PP")
        .split('"')
        .nth(1)
        .unwrap()
        .split(',')
        .map(|c| c.parse().unwrap())
        .collect();
    assert_eq!(counts.iter().sum::<usize>(), 12);
    assert!(counts[0] < counts[1] && counts[3] < counts[2], "{counts:?}");
}

#[test]
fn training_graphs_export_like_inference_graphs() {
    let w = llama(Llama {
        training: true,
        ..Llama::default()
    });
    let layers = Layers::new(&w).unwrap();
    assert_eq!(layers.len(), 26, "backward nodes join their block");
    let p = dp_plan(&w, &layers);
    let vllm = export_of("vllm", &w, &layers, &p).unwrap();
    assert!(
        vllm.contains("VLLM_PP_LAYER_PARTITION=\"6,6,6,6\""),
        "{vllm}"
    );
    for f in FORMATS {
        export_of(f, &w, &layers, &p).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// export → read back gives the same placement and the same TPS, for every format.
    #[test]
    fn round_trip_is_identity(counts in proptest::collection::vec(1usize..5, 1..6), training in any::<bool>()) {
        let blocks: usize = counts.iter().sum();
        let w = llama(Llama { blocks, accelerators: counts.len(), training, ..Llama::default() });
        let layers = Layers::new(&w).unwrap();
        let p = split(&w, &layers, &counts);
        let tps = evaluate(&w, &p, false).max_load;
        for f in FORMATS {
            let text = export_of(f, &w, &layers, &p).unwrap();
            let back = read_export(exporter_by_name(f).unwrap().as_ref(), &text, &w, &layers).unwrap();
            prop_assert_eq!(&back, &p, "{}", f);
            prop_assert_eq!(evaluate(&w, &back, false).max_load, tps);
        }
    }
}

#[test]
fn a_stage_holding_only_the_embedding_or_the_head() {
    let w = llama(Llama {
        blocks: 4,
        accelerators: 3,
        ..Llama::default()
    });
    let layers = Layers::new(&w).unwrap();
    // Stage 0: input + embedding only; stage 1: blocks 0-3; stage 2: norm + lm_head.
    let device: Vec<Device> = (0..layers.len())
        .map(|l| {
            Device::Accelerator(if l == 0 {
                0
            } else if layers.layers[l].block.is_some() {
                1
            } else {
                2
            })
        })
        .collect();
    let p = Placement::new((0..w.len()).map(|v| device[layers.layer_of[v]]).collect());
    let vllm = export_of("vllm", &w, &layers, &p).unwrap();
    assert!(vllm.contains("VLLM_PP_LAYER_PARTITION=\"0,4,0\""), "{vllm}");
    let megatron = export_of("megatron", &w, &layers, &p).unwrap();
    assert!(megatron.contains("\"E|t*4|L\""), "{megatron}");
    assert!(megatron.contains("cannot express"), "{megatron}");
    for f in FORMATS {
        export_of(f, &w, &layers, &p).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
}

#[test]
fn a_plan_that_cuts_inside_a_block_is_refused_naming_block_and_devices() {
    let w = llama(Llama {
        blocks: 4,
        accelerators: 2,
        ..Llama::default()
    });
    let layers = Layers::new(&w).unwrap();
    let mut p = split(&w, &layers, &[2, 2]);
    let q_proj = (0..w.len())
        .find(|&v| w.node(v).name.as_deref() == Some("model.layers.1.mlp.down_proj"))
        .unwrap();
    p.assignment[q_proj] = Device::Accelerator(1);
    let why = LayerPlan::new(&w, &layers, &p).unwrap_err();
    assert!(
        why.contains("cuts inside layer model.layers.1")
            && why.contains("acc0 holds 8")
            && why.contains("acc1 holds 1"),
        "{why}"
    );
    assert!(why.contains("--granularity layer"), "{why}");
}

#[test]
fn cpu_stages_are_refused_except_by_accelerate() {
    let w = llama(Llama {
        blocks: 4,
        accelerators: 1,
        cpus: 2,
        ..Llama::default()
    });
    let layers = Layers::new(&w).unwrap();
    let mut p = split(&w, &layers, &[2, 2]);
    for d in &mut p.assignment {
        if *d == Device::Accelerator(1) {
            *d = Device::Cpu(0);
        }
    }
    for f in ["torch", "torch-json", "deepspeed", "megatron", "vllm"] {
        let why = export_of(f, &w, &layers, &p).unwrap_err();
        assert!(
            why.contains("GPU") && why.contains("cpu0") && why.contains("--cpus 0"),
            "{f}: {why}"
        );
    }
    let accelerate = export_of("accelerate", &w, &layers, &p).unwrap();
    assert!(
        accelerate.contains("\"model.layers.3\": \"cpu\"") && accelerate.contains("offload"),
        "{accelerate}"
    );
    assert!(
        line(&accelerate, "max_memory").contains("\"cpu\": \""),
        "{accelerate}"
    );
    // Two CPU cores: accelerate has one "cpu".
    let lm_head = (0..w.len())
        .find(|&v| w.node(v).name.as_deref() == Some("lm_head"))
        .unwrap();
    let norm = (0..w.len())
        .find(|&v| w.node(v).name.as_deref() == Some("model.norm"))
        .unwrap();
    p.assignment[lm_head] = Device::Cpu(1);
    p.assignment[norm] = Device::Cpu(1);
    let why = export_of("accelerate", &w, &layers, &p).unwrap_err();
    assert!(
        why.contains("one \"cpu\" device") && why.contains("cpu0, cpu1"),
        "{why}"
    );
}

#[test]
fn devices_are_numbered_in_pipeline_order_and_stages_must_be_runs() {
    let w = llama(Llama {
        blocks: 4,
        accelerators: 2,
        ..Llama::default()
    });
    let layers = Layers::new(&w).unwrap();
    // The plan's acc1 holds the embedding and blocks 0-1: it is the first stage, GPU 0.
    let device: Vec<Device> = (0..layers.len())
        .map(|l| match layers.layers[l].block {
            Some(i) if i >= 2 => Device::Accelerator(0),
            Some(_) => Device::Accelerator(1),
            None if l == 0 => Device::Accelerator(1),
            None => Device::Accelerator(0),
        })
        .collect();
    let p = Placement::new((0..w.len()).map(|v| device[layers.layer_of[v]]).collect());
    let vllm = export_of("vllm", &w, &layers, &p).unwrap();
    assert!(
        vllm.contains("# GPU 0: embed_tokens + layers 0-1 ("),
        "{vllm}"
    );
    for f in FORMATS {
        export_of(f, &w, &layers, &p).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
    // The head with the first stage: that device's layers are no run.
    let device: Vec<Device> = (0..layers.len())
        .map(|l| match layers.layers[l].block {
            Some(i) if i >= 2 => Device::Accelerator(1),
            _ => Device::Accelerator(0),
        })
        .collect();
    let p = Placement::new((0..w.len()).map(|v| device[layers.layer_of[v]]).collect());
    for f in ["deepspeed", "torch", "torch-json", "vllm", "megatron"] {
        let why = export_of(f, &w, &layers, &p).unwrap_err();
        assert!(
            why.contains("run of consecutive layers") && why.contains("model.norm+lm_head"),
            "{f}: {why}"
        );
    }
    assert!(
        export_of("accelerate", &w, &layers, &p).is_ok(),
        "a device_map needs no contiguity"
    );
}

#[test]
fn files_written_by_hand_are_read_with_the_targets_rules() {
    let w = llama(Llama {
        blocks: 26,
        accelerators: 4,
        embed_ms: 0.5,
        head_ms: 1.0,
        ..Llama::default()
    });
    let layers = Layers::new(&w).unwrap();
    let read =
        |f: &str, text: &str| read_export(exporter_by_name(f).unwrap().as_ref(), text, &w, &layers);
    let blocks_per_device = |p: &Placement| -> Vec<usize> {
        let mut counts = vec![0; 4];
        for layer in layers.layers.iter().filter(|l| l.block.is_some()) {
            if let Device::Accelerator(i) = p.assignment[layer.nodes[0]] {
                counts[i] += 1;
            }
        }
        counts
    };
    // vLLM without VLLM_PP_LAYER_PARTITION: get_pp_indices' default split of 26 over 4.
    let p = read("vllm", "vllm serve meta-llama/Llama -pp 4").unwrap();
    assert_eq!(blocks_per_device(&p), vec![6, 7, 7, 6]);
    let p = read(
        "vllm",
        "export VLLM_PP_LAYER_PARTITION=5,7,7,7\nvllm serve m --pipeline-parallel-size=4",
    )
    .unwrap();
    assert_eq!(blocks_per_device(&p), vec![5, 7, 7, 7]);
    let err = read("vllm", "VLLM_PP_LAYER_PARTITION=5,7,7,7 vllm serve m")
        .unwrap_err()
        .to_string();
    assert!(err.contains("does not match pp_size=1"), "{err}");
    // Megatron with first/last flags, and with an interleaved layout (2 ranks, 2 chunks each).
    let p = read("megatron", "--pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 5 --decoder-last-pipeline-num-layers 9").unwrap();
    assert_eq!(blocks_per_device(&p), vec![5, 6, 6, 9]);
    let p = read(
        "megatron",
        "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Et*6|t*7|t*6|t*7L'",
    )
    .unwrap();
    let mut counts = blocks_per_device(&p);
    counts.truncate(2);
    assert_eq!(counts, vec![12, 14]);
    assert!(
        !evaluate(&w, &p, false).is_contiguous(),
        "interleaved chunks are not contiguous"
    );
    let err = read(
        "megatron",
        "--pipeline-model-parallel-size 2 --pipeline-model-parallel-layout 'Et*6|t*7L'",
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("must match num_layers 26"), "{err}");
    // DeepSpeed JSON, and parts that do not end at the layer count.
    let p = read("deepspeed", "{\"parts\": [0, 8, 15, 22, 28]}").unwrap();
    assert_eq!(blocks_per_device(&p), vec![7, 7, 7, 5]);
    let err = read("deepspeed", "parts = [0, 8, 15, 22, 27]")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("ends at 27") && err.contains("28 layers"),
        "{err}"
    );
    // torch: a split after a module (END), and a key inside a block.
    let p = read(
        "torch",
        "split_spec = {\n  \"model.layers.9\": SplitPoint.END,  # after block 9\n}\n",
    )
    .unwrap();
    assert_eq!(blocks_per_device(&p)[..2], [10, 16]);
    let err = read("torch-json", "{\"model.layers.9.mlp\": \"BEGINNING\"}")
        .unwrap_err()
        .to_string();
    assert!(err.contains("cuts inside layer model.layers.9"), "{err}");
    // accelerate: the whole model on GPU 0 but one block on "cuda:1", nested keys, most specific wins.
    let p = read(
        "accelerate",
        "{\"\": 0, \"model.layers\": 0, \"model.layers.13\": \"cuda:1\"}",
    )
    .unwrap();
    assert_eq!(blocks_per_device(&p), vec![25, 1, 0, 0]);
    let err = read("accelerate", "device_map = {\"model\": 0}\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no device for node") && err.contains("lm_head"),
        "{err}"
    );
    let err = read("accelerate", "device_map = {\"\": \"disk\"}")
        .unwrap_err()
        .to_string();
    assert!(err.contains("no counterpart"), "{err}");
}

/// A workload without a list of numbered blocks: vLLM and Megatron say why they cannot.
#[test]
fn decoder_stack_targets_need_numbered_blocks() {
    let Some(dir) = common::shared_dir("onnx") else {
        return;
    };
    let w = onnx_workload(&dir.join("light_vgg19.onnx"), 4);
    let layers = Layers::new(&w).unwrap();
    let p = dp_plan(&w, &layers);
    for f in ["vllm", "megatron"] {
        let why = export_of(f, &w, &layers, &p).unwrap_err();
        assert!(why.contains("no list of numbered blocks"), "{f}: {why}");
    }
}

fn onnx_workload(path: &std::path::Path, accelerators: usize) -> Workload {
    use dnnplace::costmodel::onnx::{import_file, ImportOptions};
    use dnnplace::costmodel::{find_profile, to_workload, CostSettings, DType};
    let imported = import_file(path, &ImportOptions::default()).unwrap();
    let settings = CostSettings {
        accelerator: find_profile("a100-80gb", &[]).unwrap(),
        cpu: find_profile("cpu-core", &[]).unwrap(),
        dtype: DType::Fp32,
        training: false,
        accelerators,
        cpus: 0,
    };
    to_workload(&imported.graph, &settings).unwrap()
}

/// Imported ONNX models (read from ../shared at test time): a layer-granular DP plan
/// exports to every format that takes a list of modules and reads back identically.
#[test]
fn imported_onnx_models_export_and_read_back() {
    let Some(dir) = common::shared_dir("onnx") else {
        return;
    };
    for (name, k) in [
        ("light_vgg19", 4),
        ("light_bvlc_alexnet", 3),
        ("light_resnet50", 4),
        ("light_inception_v1", 2),
    ] {
        let w = onnx_workload(&dir.join(format!("{name}.onnx")), k);
        let layers = Layers::new(&w).unwrap();
        let p = dp_plan(&w, &layers);
        let tps = evaluate(&w, &p, false).max_load;
        for f in ["torch", "torch-json", "deepspeed", "accelerate"] {
            match export_of(f, &w, &layers, &p) {
                Ok(text) => {
                    let back =
                        read_export(exporter_by_name(f).unwrap().as_ref(), &text, &w, &layers)
                            .unwrap();
                    assert_eq!(evaluate(&w, &back, false).max_load, tps, "{name} {f}");
                    if name == "light_vgg19" && f != "torch-json" {
                        golden(&format!("{name}.{f}"), &text);
                    }
                }
                // A branching graph's stages need not be runs of the layer order.
                Err(why) => assert!(
                    f != "accelerate" && why.contains("run of consecutive layers"),
                    "{name} {f}: {why}"
                ),
            }
        }
    }
}

/// The cost model's own generator (`--style llama|gpt2|bert`, 24 blocks, 4 GPUs): the
/// layer-granular DP plan exports to every format, reads back identically, puts the
/// embedding on GPU 0 and the head on GPU 3, and gives vLLM and Megatron 24 decoder
/// layers; golden texts for the llama style.
#[test]
fn generated_transformers_export_in_every_format() {
    use dnnplace::costmodel::{
        find_profile, to_workload, transformer_graph, CostSettings, DType, Style, TransformerSpec,
    };
    for style in [Style::Llama, Style::Gpt2, Style::Bert] {
        let spec = TransformerSpec::new(style, 24, 1024, 16, 512, 2);
        let settings = CostSettings {
            accelerator: find_profile("a100-80gb", &[]).unwrap(),
            cpu: find_profile("cpu-core", &[]).unwrap(),
            dtype: DType::Bf16,
            training: style == Style::Bert,
            accelerators: 4,
            cpus: 0,
        };
        let w = to_workload(&transformer_graph(&spec, DType::Bf16).unwrap(), &settings).unwrap();
        let layers = Layers::new(&w).unwrap();
        assert_eq!(
            layers.layers.iter().filter(|l| l.block.is_some()).count(),
            24,
            "{style:?}"
        );
        let p = dp_plan(&w, &layers);
        let tps = evaluate(&w, &p, false).max_load;
        for f in FORMATS {
            let text =
                export_of(f, &w, &layers, &p).unwrap_or_else(|e| panic!("{style:?} {f}: {e}"));
            let back =
                read_export(exporter_by_name(f).unwrap().as_ref(), &text, &w, &layers).unwrap();
            assert_eq!(evaluate(&w, &back, false).max_load, tps, "{style:?} {f}");
            if style == Style::Llama {
                golden(&format!("generated-llama24.{f}"), &text);
            }
        }
        let vllm = export_of("vllm", &w, &layers, &p).unwrap();
        let counts: Vec<usize> = line(&vllm, "VLLM_PP")
            .split('"')
            .nth(1)
            .unwrap()
            .split(',')
            .map(|c| c.parse().unwrap())
            .collect();
        assert_eq!(
            (counts.len(), counts.iter().sum::<usize>()),
            (4, 24),
            "{style:?}"
        );
        let first = export_of("accelerate", &w, &layers, &p).unwrap();
        let embedding = match style {
            Style::Llama => "\"model.embed_tokens\": 0",
            Style::Gpt2 => "\"transformer.wte\": 0",
            Style::Bert => "\"bert.embeddings\": 0",
        };
        assert!(first.contains(embedding), "{style:?}: {first}");
    }
}

#[test]
fn every_format_is_registered_once() {
    let names: Vec<&str> = exporters().iter().map(|e| e.name()).collect();
    assert_eq!(names, FORMATS);
}

/// The folder holding the `megatron-core` package (`.ci/run` installs it into `.tools/py`),
/// or `None` with the reason printed; `DNNPLACE_REQUIRE_PYTHON_CHECKS` turns a skip into a
/// failure.
fn megatron_core() -> Option<std::path::PathBuf> {
    let site = std::env::var_os("DNNPLACE_MEGATRON_CORE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".tools/py"));
    let module = site.join("megatron/core/transformer/pipeline_parallel_layer_layout.py");
    if module.is_file() {
        return Some(site);
    }
    let why = format!(
        "{} is absent (python3 -m pip install --no-deps --target .tools/py megatron-core==0.16.1)",
        module.display()
    );
    if std::env::var_os("DNNPLACE_REQUIRE_PYTHON_CHECKS").is_some() {
        panic!("{why}, but DNNPLACE_REQUIRE_PYTHON_CHECKS is set");
    }
    eprintln!("SKIPPED: {why}");
    None
}

/// Our Megatron layouts (random splits, the planted optimum, embedding-only and head-only
/// stages) pass Megatron-LM's own parser and validator and give each rank the decoder
/// layers we planned; our grammar expands strings exactly as `parse_str_to_list` does, and
/// layouts we refuse are refused by Megatron too.
#[test]
fn megatron_layouts_pass_megatrons_own_parser() {
    use dnnplace::export::megatron::parse_layout;
    use dnnplace::export::shell_words;
    let Some(site) = megatron_core() else { return };
    let mut cases: Vec<serde_json::Value> = Vec::new();
    let mut rng = common::Rng::new(14);
    for round in 0..40 {
        let stages = 1 + rng.below(6) as usize;
        let counts: Vec<usize> = (0..stages).map(|_| 1 + rng.below(5) as usize).collect();
        let blocks: usize = counts.iter().sum();
        let w = llama(Llama {
            blocks,
            accelerators: stages,
            training: round % 2 == 1,
            ..Llama::default()
        });
        let layers = Layers::new(&w).unwrap();
        let text = export_of("megatron", &w, &layers, &split(&w, &layers, &counts)).unwrap();
        let words = shell_words(line(&text, "--pipeline")).unwrap();
        let layout = &words[words
            .iter()
            .position(|x| x == "--pipeline-model-parallel-layout")
            .unwrap()
            + 1];
        let mut ranks = Vec::new();
        let mut start = 0;
        for c in &counts {
            ranks.push([start, start + c]);
            start += c;
        }
        cases.push(serde_json::json!({"layout": layout, "pp": stages, "num_layers": blocks, "ranks": ranks}));
    }
    cases.push(serde_json::json!({"layout": "E|t*4|L", "pp": 3, "num_layers": 4, "ranks": [[0, 0], [0, 4], [4, 4]]}));
    for s in [
        "Ettt|(tt|)*29,m|L",
        "tt(E|t|L)*2,mm",
        "(tE)*3",
        "E,(t|)*2",
        "(|t)*2,L",
        "Et*3|t*3L",
        "E,t*12|t*12,L",
        "((t)*2)*3",
        "t**2",
    ] {
        match parse_layout(s) {
            Ok(list) => cases.push(serde_json::json!({"parse": s, "stages": list.iter().map(|st| st.iter().collect::<String>()).collect::<Vec<_>>()})),
            Err(_) => cases.push(serde_json::json!({"parse": s, "error": true})),
        }
    }
    for s in ["Ex|L", "E(t|L"] {
        assert!(parse_layout(s).is_err());
        cases.push(serde_json::json!({"parse": s, "error": true}));
    }
    for (layout, pp, n) in [
        ("Et|tL", 3, 2),
        ("t|EtL", 2, 2),
        ("Et|t", 2, 2),
        ("Et|tL", 2, 3),
        ("Et|EtL", 2, 2),
    ] {
        let ours = parse_layout(layout)
            .and_then(|l| dnnplace::export::megatron::validate_layout(&l, pp, n));
        assert!(ours.is_err(), "{layout}");
        cases.push(serde_json::json!({"layout": layout, "pp": pp, "num_layers": n, "error": true}));
    }
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/megatron_layout.py");
    let mut child = std::process::Command::new("python3")
        .arg(&script)
        .arg(&site)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        for c in &cases {
            writeln!(stdin, "{c}").unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        report.contains(&format!("{} passed, 0 failed", cases.len())),
        "{report}"
    );
    println!("Megatron-LM's parser: {}", report.trim());
}

//! Every light ONNX model of `../shared/workloads/onnx` imports, validates and plans with
//! the DP on 2, 4 and 8 accelerators; one op per data input and computing ONNX node, with
//! the node's name; parameter counts and MACs equal the published figures; module paths
//! come from PyTorch-style node names and survive into the workload JSON. Tests over the
//! shared folder are skipped, with the reason printed, when it is absent.

use std::path::{Path, PathBuf};

use dnnplace::costmodel::onnx::names::NAME_SCOPES_KEY;
use dnnplace::costmodel::onnx::*;
use dnnplace::costmodel::{find_profile, to_workload, CostSettings, DType};
use dnnplace::io::{parse_workload, workload_to_json};
use dnnplace::solve::{self, dp::Dp, Problem, Status};

const MODELS: [&str; 9] = [
    "light_bvlc_alexnet",
    "light_densenet121",
    "light_inception_v1",
    "light_inception_v2",
    "light_resnet50",
    "light_shufflenet",
    "light_squeezenet",
    "light_vgg19",
    "light_zfnet512",
];

fn onnx_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/workloads/onnx");
    if dir.is_dir() {
        Some(dir)
    } else {
        println!("skipped: {} is absent", dir.display());
        None
    }
}

fn settings(accelerators: usize, training: bool) -> CostSettings {
    CostSettings {
        accelerator: find_profile("a100-80gb", &[]).unwrap(),
        cpu: find_profile("cpu-core", &[]).unwrap(),
        dtype: DType::Fp32,
        training,
        accelerators,
        cpus: 1,
    }
}

#[test]
fn every_light_model_imports_validates_and_plans() {
    let Some(dir) = onnx_dir() else { return };
    for name in MODELS {
        let path = dir.join(format!("{name}.onnx"));
        let imported =
            import_file(&path, &ImportOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            imported.warnings.is_empty(),
            "{name}: {:?}",
            imported.warnings
        );
        let g = &imported.graph;
        assert!(g.macs() > 1e8, "{name}: {} MACs", g.macs());
        for k in [2, 4, 8] {
            let w = to_workload(g, &settings(k, false)).unwrap_or_else(|e| panic!("{name}: {e}"));
            let plan = solve::plan(&Dp, &Problem::throughput(&w))
                .unwrap_or_else(|e| panic!("{name} k={k}: {e}"));
            assert_eq!(plan.outcome.status, Status::Optimal, "{name} k={k}");
            let total: f64 = w.nodes().iter().map(|n| n.fpga_latency).sum();
            let tps = plan.evaluation.as_ref().unwrap().max_load;
            assert!(
                tps > 0.0 && tps <= total + 1e-9,
                "{name} k={k}: TPS {tps} vs total {total}"
            );
            println!(
                "{name:<20} ops {:>4} GMACs {:>6.3} params {:>6.1} MB  k={k}: TPS {tps:.4} ms (sum {total:.4} ms), ideals {:?}",
                g.ops.len(),
                g.macs() / 1e9,
                g.param_bytes() / 1e6,
                plan.outcome.stats.ideals
            );
        }
    }
}

#[test]
fn training_graphs_of_the_light_models_validate_and_plan() {
    let Some(dir) = onnx_dir() else { return };
    for name in ["light_resnet50", "light_inception_v1", "light_vgg19"] {
        let opts = ImportOptions {
            training: true,
            ..Default::default()
        };
        let g = import_file(&dir.join(format!("{name}.onnx")), &opts)
            .unwrap()
            .graph;
        let w = to_workload(&g, &settings(4, true)).unwrap();
        assert!(w.is_training());
        let plan = solve::plan(&Dp, &Problem::throughput(&w)).unwrap();
        assert_eq!(plan.outcome.status, Status::Optimal, "{name}");
    }
}

#[test]
fn resnet50_matches_the_published_flop_count() {
    let Some(dir) = onnx_dir() else { return };
    let g = import_file(&dir.join("light_resnet50.onnx"), &ImportOptions::default())
        .unwrap()
        .graph;
    // Published: about 4.1 G multiply-adds (≈ 8.2 GFLOPs) per 224×224 image.
    let gmacs = g.macs() / 1e9;
    let gflops = g.flops() / 1e9;
    println!(
        "ResNet-50: {gmacs:.4} GMACs, {gflops:.4} GFLOPs, {:.2} M parameters",
        g.param_bytes() / 4e6
    );
    assert!((4.0..4.2).contains(&gmacs), "{gmacs} GMACs");
    assert!((8.0..8.4).contains(&gflops), "{gflops} GFLOPs");
    // 25.5 M parameters (conv, BN, fc).
    assert!((25.0..26.5).contains(&(g.param_bytes() / 4e6)));
    // Batch 8 scales the work by 8.
    let g8 = import_file(
        &dir.join("light_resnet50.onnx"),
        &ImportOptions {
            batch: Some(8),
            ..Default::default()
        },
    )
    .unwrap()
    .graph;
    assert!((g8.macs() / g.macs() - 8.0).abs() < 1e-12);
}

#[test]
fn batch_override_scales_every_light_model_exactly() {
    let Some(dir) = onnx_dir() else { return };
    for name in MODELS {
        let path = dir.join(format!("{name}.onnx"));
        let one = import_file(&path, &ImportOptions::default()).unwrap().graph;
        let opts = ImportOptions {
            batch: Some(4),
            dtype: DType::Fp16,
            ..Default::default()
        };
        let four = import_file(&path, &opts).unwrap();
        assert!(four.warnings.is_empty(), "{name}: {:?}", four.warnings);
        // Work scales with the batch; parameters do not (and halve in fp16).
        assert!(
            (four.graph.macs() / one.macs() - 4.0).abs() < 1e-12,
            "{name}"
        );
        assert_eq!(four.graph.param_bytes() * 2.0, one.param_bytes(), "{name}");
    }
}

/// Published figures for the light models, each from its architecture, not from this code:
/// (model, parameters, torchvision's GMACs rounded to 2 decimals when the architecture is
/// the same). The light models keep BatchNorm's running statistics as constants, which
/// count as parameters here: ResNet-50 = 25,557,032 trainable (torchvision) + 2 × 26,560
/// BN channels; DenseNet-121 (Caffe2: BatchNorm's scale, bias, mean, variance beside the
/// Scale layer's weight and bias) = 7,978,856 trainable + 4 × 41,824 BN channels (64 + the
/// dense layers' 864 + 768, 3,648 + 1,536, 14,976 + 3,072, 12,032 + 2,048, transitions 256 +
/// 512 + 1,024, final 1,024). AlexNet and GoogLeNet are the BVLC Caffe models (60,965,224
/// and 6,998,552 parameters); SqueezeNet is v1.1 (1,235,496); VGG-19 has 143,667,240.
const PUBLISHED: [(&str, f64, Option<f64>); 6] = [
    ("light_bvlc_alexnet", 60_965_224.0, None),
    (
        "light_densenet121",
        7_978_856.0 + 4.0 * 41_824.0,
        Some(2.83),
    ),
    ("light_inception_v1", 6_998_552.0, None),
    ("light_resnet50", 25_557_032.0 + 2.0 * 26_560.0, Some(4.09)),
    ("light_squeezenet", 1_235_496.0, Some(0.35)),
    ("light_vgg19", 143_667_240.0, Some(19.63)),
];

#[test]
fn every_light_model_has_the_published_parameters_and_work_and_one_op_per_onnx_node() {
    let Some(dir) = onnx_dir() else { return };
    for name in MODELS {
        let path = dir.join(format!("{name}.onnx"));
        let model = decode_model(&std::fs::read(&path).unwrap()).unwrap();
        let graph = model.graph.as_ref().unwrap();
        // Independent recount: one op per data input and per ONNX node that reads some
        // non-constant tensor (constants: initializers and whatever is computed from
        // constants only, such as the light models' ConstantOfShape weights).
        let mut constant: std::collections::HashSet<&str> = graph
            .initializer
            .iter()
            .filter_map(|t| t.name.as_deref())
            .collect();
        let data_inputs: Vec<&str> = graph
            .input
            .iter()
            .map(|i| i.name())
            .filter(|n| !constant.contains(n))
            .collect();
        let mut computing: Vec<&NodeProto> = Vec::new();
        for n in &graph.node {
            if n.input
                .iter()
                .filter(|i| !i.is_empty())
                .all(|i| constant.contains(i.as_str()))
            {
                constant.extend(n.output.iter().map(String::as_str));
            } else {
                computing.push(n);
            }
        }
        let g = import_file(&path, &ImportOptions::default()).unwrap().graph;
        assert_eq!(g.ops.len(), data_inputs.len() + computing.len(), "{name}");
        // Names survive: the inputs', then every node's own name (these files name nodes
        // n0, n1, ...; none is a PyTorch scope, so no module).
        let expected: Vec<String> = data_inputs
            .iter()
            .map(|n| n.to_string())
            .chain(computing.iter().map(|n| {
                n.name
                    .clone()
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| n.output[0].clone())
            }))
            .collect();
        let names: Vec<String> = g.ops.iter().map(|o| o.name.clone()).collect();
        assert_eq!(names, expected, "{name}");
        assert!(g.ops.iter().all(|o| o.module.is_none()), "{name}");
        // The workload keeps them, and the weights as weightBytes.
        let w = to_workload(&g, &settings(4, false)).unwrap();
        assert!(w
            .nodes()
            .iter()
            .zip(&expected)
            .all(|(n, e)| n.name.as_deref() == Some(e.as_str())));
        let weights: f64 = w
            .nodes()
            .iter()
            .map(|n| n.memory.unwrap().weight_bytes)
            .sum();
        assert_eq!(weights, g.param_bytes(), "{name}");
        if let Some(&(_, params, gmacs)) = PUBLISHED.iter().find(|p| p.0 == name) {
            assert_eq!(g.param_bytes() / 4.0, params, "{name}: parameters");
            if let Some(gmacs) = gmacs {
                assert_eq!(
                    format!("{:.2}", g.macs() / 1e9),
                    format!("{gmacs:.2}"),
                    "{name}: GMACs {}",
                    g.macs() / 1e9
                );
            }
        }
        println!(
            "{name:<20} ops {:>4} = {} inputs + {} nodes; params {:>11}; GMACs {:.3}",
            g.ops.len(),
            data_inputs.len(),
            computing.len(),
            g.param_bytes() / 4.0,
            g.macs() / 1e9
        );
    }
}

/// A 2-block MLP exported the way `torch.onnx.export` names nodes, plus one node named the
/// way the dynamo exporter does (scopes in `metadata_props`).
fn pytorch_named_model() -> ModelProto {
    let dim = |d: i64| Dimension {
        dim_value: Some(d),
        dim_param: None,
    };
    let tensor = |name: &str, dims: &[i64]| ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type: Some(1),
                shape: Some(TensorShapeProto {
                    dim: dims.iter().map(|&d| dim(d)).collect(),
                }),
            }),
        }),
    };
    let weight = |name: &str| TensorProto {
        dims: vec![16, 16],
        data_type: Some(1),
        name: Some(name.into()),
        ..Default::default()
    };
    let node = |name: &str, op: &str, inputs: &[&str], output: &str| NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        name: Some(name.into()),
        op_type: Some(op.into()),
        ..Default::default()
    };
    let mut dynamo = node("node_MatMul_4", "MatMul", &["h1", "head_w"], "y");
    dynamo.metadata_props.push(StringStringEntryProto {
        key: Some(NAME_SCOPES_KEY.into()),
        value: Some("['', 'lm_head', 'matmul_4']".into()),
    });
    ModelProto {
        ir_version: Some(8),
        producer_name: Some("pytorch".into()),
        opset_import: vec![OperatorSetIdProto {
            domain: None,
            version: Some(17),
        }],
        graph: Some(GraphProto {
            name: Some("main_graph".into()),
            initializer: vec![weight("w0"), weight("w1"), weight("head_w")],
            input: vec![tensor("x", &[2, 16])],
            output: vec![tensor("y", &[2, 16])],
            value_info: vec![],
            node: vec![
                node(
                    "/model/layers.0/mlp/up_proj/MatMul",
                    "MatMul",
                    &["x", "w0"],
                    "a0",
                ),
                node("/model/layers.0/mlp/act_fn/Relu", "Relu", &["a0"], "r0"),
                node("/model/layers.0/Add", "Add", &["r0", "x"], "h0"),
                node(
                    "/model/layers.1/mlp/up_proj/MatMul",
                    "MatMul",
                    &["h0", "w1"],
                    "a1",
                ),
                node("/model/layers.1/Add", "Add", &["a1", "h0"], "h1"),
                dynamo,
            ],
        }),
    }
}

#[test]
fn module_paths_come_from_pytorch_node_names_and_survive_the_workload_json() {
    let imported = import_model(&pytorch_named_model(), &ImportOptions::default()).unwrap();
    let g = &imported.graph;
    let got: Vec<(&str, Option<&str>)> = g
        .ops
        .iter()
        .map(|o| (o.name.as_str(), o.module.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("x", None),
            (
                "/model/layers.0/mlp/up_proj/MatMul",
                Some("model.layers.0.mlp.up_proj")
            ),
            (
                "/model/layers.0/mlp/act_fn/Relu",
                Some("model.layers.0.mlp.act_fn")
            ),
            ("/model/layers.0/Add", Some("model.layers.0")),
            (
                "/model/layers.1/mlp/up_proj/MatMul",
                Some("model.layers.1.mlp.up_proj")
            ),
            ("/model/layers.1/Add", Some("model.layers.1")),
            ("node_MatMul_4", Some("lm_head")),
        ]
    );
    let w = to_workload(g, &settings(2, true)).unwrap();
    let back = parse_workload(&workload_to_json(&w)).unwrap();
    assert_eq!(back.nodes(), w.nodes());
    let up = back
        .nodes()
        .iter()
        .find(|n| n.name.as_deref() == Some("/model/layers.1/mlp/up_proj/MatMul_grad"))
        .unwrap();
    assert_eq!(up.module.as_deref(), Some("model.layers.1.mlp.up_proj"));
    // 16×16 fp32 weights, their gradients and Adam's two moments on the backward node.
    assert_eq!(up.memory.unwrap().gradient_bytes, 1024.0);
    assert_eq!(up.memory.unwrap().optimizer_bytes, 2048.0);
}

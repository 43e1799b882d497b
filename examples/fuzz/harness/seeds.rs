//! Valid inputs the mutations start from.
//!
//! In the repository: the shipped example (`examples/bert-tiny.json`), workloads from the
//! seeded generator of the tests (`tests/common`), generated transformers (BERT, GPT-2 and
//! Llama styles), the DP's and greedy's plans of them (placements, some cut into latency
//! calls), three small ONNX models built here (an MLP, a CNN with `ConstantOfShape`
//! weights, an attention block), and the built-in device profiles as TOML. With `shared`,
//! also every published workload, expert split and ONNX model under it, read at run time
//! (never copied).

use std::path::Path;
use std::sync::Arc;

use dnnplace::costmodel::onnx::{
    AttributeProto, Dimension, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, TypeProtoTensor, ValueInfoProto,
};
use dnnplace::costmodel::{
    builtin_profiles, find_profile, to_workload, transformer_graph, CostSettings, DType, Style,
    TransformerSpec,
};
use dnnplace::io::{parse_workload, workload_to_json};
use dnnplace::model::Workload;
use dnnplace::report::placement_json;
use dnnplace::solve::{self, Limits, Objective, Problem};

use super::common::{random_workload, Shape};

/// A workload seed: its name and text.
pub struct WorkloadSeed {
    pub name: String,
    pub text: Vec<u8>,
}

/// A placement seed: the workload it is for, and its text.
pub struct PlacementSeed {
    pub name: String,
    pub workload: Arc<Workload>,
    pub text: Vec<u8>,
}

/// All seeds, by target.
#[derive(Default)]
pub struct Seeds {
    pub workloads: Vec<WorkloadSeed>,
    pub placements: Vec<PlacementSeed>,
    pub onnx: Vec<(String, Vec<u8>)>,
    pub profiles: Vec<(String, Vec<u8>)>,
}

fn manifest(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A small transformer of `style` priced on an A100.
fn transformer_workload(style: Style, training: bool) -> Workload {
    let mut spec = TransformerSpec::new(style, 2, 64, 4, 16, 2);
    spec.vocab = 100;
    let graph = transformer_graph(&spec, DType::Fp16).expect("a valid spec");
    let settings = CostSettings {
        accelerator: find_profile("a100-80gb", &[]).expect("built in"),
        cpu: find_profile("cpu-core", &[]).expect("built in"),
        dtype: DType::Fp16,
        training,
        accelerators: 3,
        cpus: 1,
    };
    to_workload(&graph, &settings).expect("a valid workload")
}

/// Placements of `w`: the DP's and greedy's plans, and a latency plan with its calls.
fn plans_of(name: &str, w: &Arc<Workload>, out: &mut Vec<PlacementSeed>) {
    let limits = Limits {
        max_ideals: 20_000,
        time_limit_s: Some(2.0),
        ..Limits::default()
    };
    let variants = [
        ("dp", Objective::Throughput, true),
        ("greedy", Objective::Throughput, true),
        ("dp", Objective::Latency { pieces: 2 }, false),
    ];
    for (method, objective, contiguous) in variants {
        let m = solve::method_by_name(method).expect("known method");
        let problem = Problem {
            workload: w,
            devices: dnnplace::solve::Devices::of(w),
            objective,
            contiguous,
            limits: limits.clone(),
            pipeline: None,
        };
        let Ok(plan) = solve::plan(m.as_ref(), &problem) else {
            continue;
        };
        let (Some(p), Some(e)) = (&plan.outcome.placement, &plan.evaluation) else {
            continue;
        };
        let text = serde_json::to_vec(&placement_json(w, p, e, objective)).expect("json");
        out.push(PlacementSeed {
            name: format!("{name}/{method}-{}", objective.name()),
            workload: w.clone(),
            text,
        });
    }
}

fn vi(name: &str, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type: Some(1),
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| {
                            if d > 0 {
                                Dimension {
                                    dim_value: Some(d),
                                    dim_param: None,
                                }
                            } else {
                                Dimension {
                                    dim_value: None,
                                    dim_param: Some("N".into()),
                                }
                            }
                        })
                        .collect(),
                }),
            }),
        }),
    }
}

fn node(op: &str, inputs: &[&str], outputs: &[&str], attribute: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        name: Some(format!("{op}_{}", outputs.first().copied().unwrap_or(""))),
        op_type: Some(op.into()),
        attribute,
        ..Default::default()
    }
}

fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        ints: v.to_vec(),
        ..Default::default()
    }
}

fn int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        i: Some(v),
        ..Default::default()
    }
}

fn int64s(name: &str, v: &[i64]) -> TensorProto {
    TensorProto {
        dims: vec![v.len() as i64],
        data_type: Some(7),
        int64_data: v.to_vec(),
        name: Some(name.into()),
        ..Default::default()
    }
}

fn float_init(name: &str, dims: &[i64]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: Some(1),
        name: Some(name.into()),
        ..Default::default()
    }
}

fn model(name: &str, graph: GraphProto) -> Vec<u8> {
    use prost::Message;
    ModelProto {
        ir_version: Some(7),
        producer_name: Some(format!("dnnplace fuzz seed {name}")),
        graph: Some(graph),
        opset_import: vec![OperatorSetIdProto {
            domain: None,
            version: Some(13),
        }],
    }
    .encode_to_vec()
}

/// Three small ONNX models covering the operators the importer infers.
pub fn onnx_models() -> Vec<(String, Vec<u8>)> {
    let mlp = GraphProto {
        name: Some("mlp".into()),
        node: vec![
            node("MatMul", &["x", "w1"], &["h"], vec![]),
            node("Add", &["h", "b1"], &["hb"], vec![]),
            node("Relu", &["hb"], &["r"], vec![]),
            node("Gemm", &["r", "w2"], &["y"], vec![int("transB", 1)]),
            node("Softmax", &["y"], &["out"], vec![int("axis", -1)]),
        ],
        initializer: vec![
            float_init("w1", &[32, 64]),
            float_init("b1", &[64]),
            float_init("w2", &[10, 64]),
        ],
        input: vec![vi("x", &[0, 32])],
        output: vec![vi("out", &[0, 10])],
        value_info: vec![],
    };
    let cnn = GraphProto {
        name: Some("cnn".into()),
        node: vec![
            node("ConstantOfShape", &["w_shape"], &["w"], vec![]),
            node(
                "Conv",
                &["x", "w"],
                &["c"],
                vec![
                    ints("kernel_shape", &[3, 3]),
                    ints("pads", &[1, 1, 1, 1]),
                    ints("strides", &[1, 1]),
                ],
            ),
            node(
                "BatchNormalization",
                &["c", "s", "bb", "m", "v"],
                &["bn"],
                vec![],
            ),
            node("Relu", &["bn"], &["r"], vec![]),
            node(
                "MaxPool",
                &["r"],
                &["p"],
                vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
            ),
            node("GlobalAveragePool", &["p"], &["g"], vec![]),
            node("Flatten", &["g"], &["f"], vec![int("axis", 1)]),
            node("Reshape", &["f", "flat"], &["out"], vec![]),
        ],
        initializer: vec![
            int64s("w_shape", &[8, 3, 3, 3]),
            int64s("flat", &[1, -1]),
            float_init("s", &[8]),
            float_init("bb", &[8]),
            float_init("m", &[8]),
            float_init("v", &[8]),
        ],
        input: vec![vi("x", &[1, 3, 16, 16])],
        output: vec![vi("out", &[1, 8])],
        value_info: vec![vi("c", &[1, 8, 16, 16])],
    };
    // The attention block reads integer token ids.
    let mut int_ids = vi("ids", &[2, 8]).r#type;
    if let Some(t) = int_ids.as_mut().and_then(|t| t.tensor_type.as_mut()) {
        t.elem_type = Some(7);
    }
    let attention = GraphProto {
        name: Some("attention".into()),
        node: vec![
            node("Gather", &["emb", "ids"], &["e"], vec![int("axis", 0)]),
            node("MatMul", &["e", "wq"], &["q"], vec![]),
            node("MatMul", &["e", "wk"], &["k"], vec![]),
            node("Reshape", &["q", "heads"], &["qh"], vec![]),
            node("Reshape", &["k", "heads"], &["kh"], vec![]),
            node(
                "Transpose",
                &["qh"],
                &["qt"],
                vec![ints("perm", &[0, 2, 1, 3])],
            ),
            node(
                "Transpose",
                &["kh"],
                &["kt"],
                vec![ints("perm", &[0, 2, 3, 1])],
            ),
            node("MatMul", &["qt", "kt"], &["s"], vec![]),
            node("Softmax", &["s"], &["a"], vec![int("axis", -1)]),
            node("Unsqueeze", &["a", "ax"], &["u"], vec![]),
            node("Squeeze", &["u", "ax"], &["sq"], vec![]),
            node(
                "ReduceMean",
                &["sq"],
                &["rm"],
                vec![ints("axes", &[-1]), int("keepdims", 1)],
            ),
            node("Concat", &["rm", "rm"], &["cat"], vec![int("axis", -1)]),
            node("Dropout", &["cat"], &["out"], vec![]),
        ],
        initializer: vec![
            float_init("emb", &[100, 32]),
            float_init("wq", &[32, 32]),
            float_init("wk", &[32, 32]),
            int64s("heads", &[2, 8, 4, 8]),
            int64s("ax", &[1]),
        ],
        input: vec![ValueInfoProto {
            name: Some("ids".into()),
            r#type: int_ids,
        }],
        output: vec![vi("out", &[2, 4, 8, 2])],
        value_info: vec![],
    };
    vec![
        ("mlp".into(), model("mlp", mlp)),
        ("cnn".into(), model("cnn", cnn)),
        ("attention".into(), model("attention", attention)),
    ]
}

impl Seeds {
    /// The seeds in the repository (module documentation); deterministic.
    pub fn builtin() -> Seeds {
        let mut s = Seeds::default();
        let mut workloads: Vec<(String, Workload)> = Vec::new();
        let example = std::fs::read_to_string(manifest("examples/bert-tiny.json"))
            .expect("the shipped example");
        workloads.push((
            "examples/bert-tiny.json".into(),
            parse_workload(&example).expect("the example is valid"),
        ));
        let shapes = [
            Shape {
                max_nodes: 6,
                ..Default::default()
            },
            Shape {
                max_nodes: 12,
                ..Default::default()
            },
            Shape {
                max_nodes: 25,
                training: false,
                tight_memory: false,
                ..Default::default()
            },
        ];
        for (i, shape) in shapes.iter().enumerate() {
            let mut found = 0;
            for seed in 0..200u64 {
                if let Some(w) = random_workload(1000 * i as u64 + seed, *shape) {
                    workloads.push((format!("generated/{i}-{seed}"), w));
                    found += 1;
                    if found == 6 {
                        break;
                    }
                }
            }
        }
        workloads.push((
            "generated/bert-inference".into(),
            transformer_workload(Style::Bert, false),
        ));
        workloads.push((
            "generated/gpt2-training".into(),
            transformer_workload(Style::Gpt2, true),
        ));
        workloads.push((
            "generated/llama-training".into(),
            transformer_workload(Style::Llama, true),
        ));
        for (name, w) in workloads {
            let w = Arc::new(w);
            plans_of(&name, &w, &mut s.placements);
            s.workloads.push(WorkloadSeed {
                name,
                text: workload_to_json(&w).into_bytes(),
            });
        }
        s.onnx = onnx_models();
        s.profiles = builtin_profiles()
            .into_iter()
            .map(|p| (format!("profile/{}", p.name), p.to_toml().into_bytes()))
            .collect();
        s
    }

    /// Adds the published workloads, expert splits and ONNX models under `dir`
    /// (`../shared/workloads`), read now; files that do not parse are skipped.
    pub fn add_shared(&mut self, dir: &Path) {
        let mut files = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    files.push(p);
                }
            }
        }
        files.sort();
        let rel = |p: &Path| p.strip_prefix(dir).unwrap_or(p).display().to_string();
        for p in &files {
            let Ok(bytes) = std::fs::read(p) else {
                continue;
            };
            let name = rel(p);
            match p.extension().and_then(|e| e.to_str()) {
                Some("onnx") => self.onnx.push((name, bytes)),
                Some("json") if !name.contains("experts/") => {
                    let Ok(w) = parse_workload(&String::from_utf8_lossy(&bytes)) else {
                        continue;
                    };
                    let w = Arc::new(w);
                    if w.len() <= 400 {
                        plans_of(&name, &w, &mut self.placements);
                    }
                    self.workloads.push(WorkloadSeed { name, text: bytes });
                }
                Some("json") => {
                    // experts/X_expert.json is a split of throughput/layer/X.json.
                    let stem = p
                        .file_stem()
                        .and_then(|s| s.to_str())
                        .unwrap_or("")
                        .trim_end_matches("_expert");
                    let wpath = dir
                        .join("paper/throughput/layer")
                        .join(format!("{stem}.json"));
                    let Ok(wtext) = std::fs::read_to_string(&wpath) else {
                        continue;
                    };
                    let Ok(w) = parse_workload(&wtext) else {
                        continue;
                    };
                    self.placements.push(PlacementSeed {
                        name,
                        workload: Arc::new(w),
                        text: bytes,
                    });
                }
                _ => {}
            }
        }
    }
}

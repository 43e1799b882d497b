//! `dnnplace import MODEL.onnx --training --tensor-parallel …` on a hand-built two-block
//! Llama-shaped ONNX model (q/k/v/o projections, per-head attention, SwiGLU MLP, untied
//! head; nodes named as `torch.onnx.export` names them): layer ids, the options' numbers
//! against hand-computed roofline figures, the all-reduce counts per block, the written
//! options reading back equal, degrees that do not divide the heads or the width refused
//! naming the node, degree 1 never written, and `plan --parallel 3d` choosing `t > 1` when
//! only a split stage fits.

use std::path::{Path, PathBuf};
use std::process::Command;

use dnnplace::costmodel::find_profile;
use dnnplace::costmodel::onnx::*;
use dnnplace::io::parse_workload;
use dnnplace::io::tensor_parallel_json::{
    parse_tensor_parallel, workload_to_json_with_tensor_parallel, TpOptions,
};
use prost::Message;
use serde_json::Value;

const B: usize = 2;
const S: usize = 8;
const H: usize = 16;
const HEADS: usize = 4;
const F: usize = 48;
const V: usize = 32;
const LAYERS: usize = 2;
const E: f64 = 4.0; // fp32

fn vi(name: &str, dims: &[usize], elem: i32) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type: Some(elem),
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| Dimension {
                            dim_value: Some(d as i64),
                            dim_param: None,
                        })
                        .collect(),
                }),
            }),
        }),
    }
}

/// A float weight of `dims` (no data: the importer needs shapes only).
fn weight(name: &str, dims: &[usize]) -> TensorProto {
    TensorProto {
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: Some(1),
        name: Some(name.into()),
        ..Default::default()
    }
}

fn shape(name: &str, v: &[i64]) -> TensorProto {
    TensorProto {
        dims: vec![v.len() as i64],
        data_type: Some(7),
        int64_data: v.to_vec(),
        name: Some(name.into()),
        ..Default::default()
    }
}

fn node(name: &str, op: &str, inputs: &[&str], output: &str) -> NodeProto {
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        name: Some(name.into()),
        op_type: Some(op.into()),
        ..Default::default()
    }
}

fn transpose(name: &str, input: &str, output: &str, perm: &[i64]) -> NodeProto {
    let mut n = node(name, "Transpose", &[input], output);
    n.attribute.push(AttributeProto {
        name: Some("perm".into()),
        ints: perm.to_vec(),
        ..Default::default()
    });
    n
}

/// Block `l`: reads `x`, returns its output tensor's name.
fn block(l: usize, x: &str, g: &mut GraphProto, softmax_scope: &str) -> String {
    let p = format!("/model/layers.{l}");
    let t = |s: &str| format!("l{l}_{s}");
    let w = |s: &str| format!("model.layers.{l}.{s}.weight");
    for (name, dims) in [
        ("input_layernorm", vec![H]),
        ("self_attn.q_proj", vec![H, H]),
        ("self_attn.k_proj", vec![H, H]),
        ("self_attn.v_proj", vec![H, H]),
        ("self_attn.o_proj", vec![H, H]),
        ("post_attention_layernorm", vec![H]),
        ("mlp.gate_proj", vec![H, F]),
        ("mlp.up_proj", vec![H, F]),
        ("mlp.down_proj", vec![F, H]),
    ] {
        g.initializer.push(weight(&w(name), &dims));
    }
    let n = &mut g.node;
    let ln = |s: &str| format!("{p}/{s}/LayerNormalization");
    n.push(node(
        &ln("input_layernorm"),
        "LayerNormalization",
        &[x, &w("input_layernorm")],
        &t("n1"),
    ));
    for (proj, out) in [("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v")] {
        let name = format!("{p}/self_attn/{proj}/MatMul");
        n.push(node(
            &name,
            "MatMul",
            &[&t("n1"), &w(&format!("self_attn.{proj}"))],
            &t(out),
        ));
    }
    for (i, v) in ["q", "k", "v"].iter().enumerate() {
        let suffix = if i == 0 {
            String::new()
        } else {
            format!("_{i}")
        };
        n.push(node(
            &format!("{p}/self_attn/Reshape{suffix}"),
            "Reshape",
            &[&t(v), "heads_shape"],
            &t(&format!("{v}4")),
        ));
    }
    n.push(transpose(
        &format!("{p}/self_attn/Transpose"),
        &t("q4"),
        &t("qt"),
        &[0, 2, 1, 3],
    ));
    n.push(transpose(
        &format!("{p}/self_attn/Transpose_1"),
        &t("k4"),
        &t("kt"),
        &[0, 2, 3, 1],
    ));
    n.push(transpose(
        &format!("{p}/self_attn/Transpose_2"),
        &t("v4"),
        &t("vt"),
        &[0, 2, 1, 3],
    ));
    n.push(node(
        &format!("{p}/self_attn/MatMul"),
        "MatMul",
        &[&t("qt"), &t("kt")],
        &t("scores"),
    ));
    n.push(node(
        &format!("{p}/{softmax_scope}/Softmax"),
        "Softmax",
        &[&t("scores")],
        &t("probs"),
    ));
    n.push(node(
        &format!("{p}/self_attn/MatMul_1"),
        "MatMul",
        &[&t("probs"), &t("vt")],
        &t("ctx"),
    ));
    n.push(transpose(
        &format!("{p}/self_attn/Transpose_3"),
        &t("ctx"),
        &t("ctxt"),
        &[0, 2, 1, 3],
    ));
    n.push(node(
        &format!("{p}/self_attn/Reshape_3"),
        "Reshape",
        &[&t("ctxt"), "hidden_shape"],
        &t("ctx3"),
    ));
    n.push(node(
        &format!("{p}/self_attn/o_proj/MatMul"),
        "MatMul",
        &[&t("ctx3"), &w("self_attn.o_proj")],
        &t("o"),
    ));
    n.push(node(&format!("{p}/Add"), "Add", &[x, &t("o")], &t("x1")));
    n.push(node(
        &ln("post_attention_layernorm"),
        "LayerNormalization",
        &[&t("x1"), &w("post_attention_layernorm")],
        &t("n2"),
    ));
    n.push(node(
        &format!("{p}/mlp/gate_proj/MatMul"),
        "MatMul",
        &[&t("n2"), &w("mlp.gate_proj")],
        &t("g"),
    ));
    n.push(node(
        &format!("{p}/mlp/up_proj/MatMul"),
        "MatMul",
        &[&t("n2"), &w("mlp.up_proj")],
        &t("u"),
    ));
    n.push(node(
        &format!("{p}/mlp/act_fn/Sigmoid"),
        "Sigmoid",
        &[&t("g")],
        &t("sg"),
    ));
    n.push(node(
        &format!("{p}/mlp/act_fn/Mul"),
        "Mul",
        &[&t("g"), &t("sg")],
        &t("silu"),
    ));
    n.push(node(
        &format!("{p}/mlp/Mul"),
        "Mul",
        &[&t("silu"), &t("u")],
        &t("m"),
    ));
    n.push(node(
        &format!("{p}/mlp/down_proj/MatMul"),
        "MatMul",
        &[&t("m"), &w("mlp.down_proj")],
        &t("d"),
    ));
    n.push(node(
        &format!("{p}/Add_1"),
        "Add",
        &[&t("x1"), &t("d")],
        &t("x2"),
    ));
    t("x2")
}

/// The model; `softmax_scope` is the module scope of the softmax (`self_attn` in a real
/// export).
fn model(softmax_scope: &str) -> ModelProto {
    let mut g = GraphProto {
        name: Some("tiny-llama".into()),
        input: vec![vi("input_ids", &[B, S], 7)],
        output: vec![vi("logits", &[B, S, V], 1)],
        initializer: vec![
            weight("model.embed_tokens.weight", &[V, H]),
            weight("model.norm.weight", &[H]),
            weight("lm_head.weight", &[H, V]),
            shape(
                "heads_shape",
                &[B as i64, S as i64, HEADS as i64, (H / HEADS) as i64],
            ),
            shape("hidden_shape", &[B as i64, S as i64, H as i64]),
        ],
        ..Default::default()
    };
    g.node.push(node(
        "/model/embed_tokens/Gather",
        "Gather",
        &["model.embed_tokens.weight", "input_ids"],
        "x0",
    ));
    let mut x = "x0".to_string();
    for l in 0..LAYERS {
        x = block(l, &x, &mut g, softmax_scope);
    }
    g.node.push(node(
        "/model/norm/LayerNormalization",
        "LayerNormalization",
        &[&x, "model.norm.weight"],
        "nf",
    ));
    g.node.push(node(
        "/lm_head/MatMul",
        "MatMul",
        &["nf", "lm_head.weight"],
        "logits",
    ));
    ModelProto {
        ir_version: Some(8),
        producer_name: Some("pytorch".into()),
        opset_import: vec![OperatorSetIdProto {
            domain: None,
            version: Some(17),
        }],
        graph: Some(g),
    }
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("dnnplace-onnx-tp-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write_model(name: &str, softmax_scope: &str) -> PathBuf {
    let path = dir().join(name);
    std::fs::write(&path, model(softmax_scope).encode_to_vec()).unwrap();
    path
}

fn dnnplace(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dnnplace"))
        .args(args)
        .output()
        .unwrap()
}

/// Imports the model at `degrees` into a workload file; its text.
fn import(model: &Path, degrees: &str, out: &str) -> (PathBuf, String) {
    let out = dir().join(out);
    let o = dnnplace(&[
        "import",
        model.to_str().unwrap(),
        "--training",
        "--device",
        "a100-80gb",
        "--tensor-parallel",
        degrees,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    (out, text)
}

/// The roofline of `flops` and `bytes` on the A100-80GB profile, fp32, by hand.
fn roofline_ms(flops: f64, bytes: f64) -> f64 {
    let a = find_profile("a100-80gb", &[]).unwrap();
    1e3 * f64::max(
        flops / (a.peak_fp32_flops * a.compute_efficiency),
        bytes / (a.memory_bandwidth_bytes_per_s * a.memory_efficiency),
    ) + a.launch_overhead_ms
}

fn nodes(text: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(text).unwrap();
    v["nodes"].as_array().unwrap().clone()
}

fn by_name<'a>(nodes: &'a [Value], name: &str) -> &'a Value {
    nodes
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("no node {name}"))
}

fn option(n: &Value, t: u64) -> &Value {
    n["tensorParallel"]
        .as_array()
        .unwrap_or_else(|| panic!("{}: no options", n["name"]))
        .iter()
        .find(|o| o["degree"] == t)
        .unwrap_or_else(|| panic!("{}: no option of degree {t}", n["name"]))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

fn close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-12 * b.abs().max(1e-9),
        "{what}: {a} vs {b}"
    );
}

#[test]
fn layers_and_options_are_megatrons_split_by_hand() {
    let (_, text) = import(&write_model("tiny.onnx", "self_attn"), "2,4", "tiny.json");
    let ns = nodes(&text);
    // Layers: the input and embeddings -1, the blocks 0 and 1, the final norm and head 2.
    for (name, layer) in [
        ("input_ids", -1),
        ("/model/embed_tokens/Gather", -1),
        ("/model/layers.0/self_attn/q_proj/MatMul", 0),
        ("/model/layers.1/Add_1", 1),
        ("/model/norm/LayerNormalization", 2),
        ("/lm_head/MatMul_grad", 2),
    ] {
        assert_eq!(by_name(&ns, name)["layerId"], layer, "{name}");
    }
    let (b, s, h, f_, v) = (B as f64, S as f64, H as f64, F as f64, V as f64);
    let x = b * s * h * E; // one all-reduce: b·s·h·e bytes
    for t in [2u64, 4] {
        let k = t as f64;
        // Linear layers: (name, in, out, column?) → FLOPs 2·b·s·in·out/t, weights in·out·e/t;
        // column: input whole, output /t; row: input /t, output whole.
        for l in 0..LAYERS {
            let p = format!("/model/layers.{l}");
            for (proj, fin, fout, column) in [
                ("self_attn/q_proj", h, h, true),
                ("self_attn/k_proj", h, h, true),
                ("self_attn/v_proj", h, h, true),
                ("self_attn/o_proj", h, h, false),
                ("mlp/gate_proj", h, f_, true),
                ("mlp/up_proj", h, f_, true),
                ("mlp/down_proj", f_, h, false),
            ] {
                let name = format!("{p}/{proj}/MatMul");
                let n = by_name(&ns, &name);
                let o = option(n, t);
                let flops = 2.0 * b * s * fin * fout / k;
                let w = fin * fout * E / k;
                let (input, output) = if column {
                    (b * s * fin * E, b * s * fout * E / k)
                } else {
                    (b * s * fin * E / k, b * s * fout * E)
                };
                close(
                    f(&o["fpgaLatency"]),
                    roofline_ms(flops, input + w + output),
                    &name,
                );
                close(f(&o["weightBytes"]), w, &name);
                close(f(&o["size"]), w + output, &name);
                // Backward: 2× the FLOPs (it has weights), 2× the bytes; stash = its input.
                let g = option(by_name(&ns, &format!("{name}_grad")), t);
                close(
                    f(&g["fpgaLatency"]),
                    roofline_ms(2.0 * flops, 2.0 * (input + w + output)),
                    &name,
                );
                close(f(&g["activationBytes"]), input, &name);
                close(f(&g["gradientBytes"]), w, &name);
                close(f(&g["optimizerBytes"]), w / E * 8.0, &name);
            }
            // Replicated: the norms and residual adds repeat their own numbers.
            for name in [
                format!("{p}/input_layernorm/LayerNormalization"),
                format!("{p}/Add"),
                format!("{p}/Add_1"),
            ] {
                let n = by_name(&ns, &name);
                let o = option(n, t);
                assert_eq!(o["fpgaLatency"], n["fpgaLatency"], "{name}");
                assert_eq!(o["size"], n["size"], "{name}");
            }
            // Per head: the scores product 2·b·heads·s·s·d FLOPs /t, its input and output /t.
            let n = by_name(&ns, &format!("{p}/self_attn/MatMul"));
            let (flops, bytes) = (
                2.0 * b * s * s * h,
                2.0 * b * s * h * E + b * HEADS as f64 * s * s * E,
            );
            close(
                f(&option(n, t)["fpgaLatency"]),
                roofline_ms(flops / k, bytes / k),
                "scores",
            );
        }
        // The vocabulary-parallel table: weights /t, its output whole.
        let emb = option(by_name(&ns, "/model/embed_tokens/Gather"), t);
        close(f(&emb["weightBytes"]), v * h * E / k, "embedding");
        close(f(&emb["size"]), v * h * E / k + x, "embedding");
    }
    // All-reduces per unit at t = 2: (forward, backward) counts and bytes, by layer.
    let mut per_layer = std::collections::BTreeMap::<i64, (usize, usize, f64)>::new();
    for n in &ns {
        let o = option(n, 2);
        let reduces: Vec<f64> = o["allReduceBytes"]
            .as_array()
            .map_or_else(Vec::new, |a| a.iter().map(f).collect());
        let e = per_layer.entry(n["layerId"].as_i64().unwrap()).or_default();
        if n["isBackwardNode"] == true {
            e.1 += reduces.len();
        } else {
            e.0 += reduces.len();
        }
        assert!(
            reduces.iter().all(|&r| r == x),
            "{}: {reduces:?}",
            n["name"]
        );
        e.2 += reduces.iter().sum::<f64>();
    }
    assert_eq!(per_layer[&-1], (1, 0, x), "embeddings");
    assert_eq!(per_layer[&0], (2, 2, 4.0 * x), "block 0");
    assert_eq!(per_layer[&1], (2, 2, 4.0 * x), "block 1");
    assert_eq!(per_layer[&2], (0, 1, x), "head");
    // Which nodes: the row products forward, the first column product of each group
    // backward.
    for name in [
        "/model/layers.0/self_attn/o_proj/MatMul",
        "/model/layers.0/mlp/down_proj/MatMul",
        "/model/layers.0/self_attn/q_proj/MatMul_grad",
        "/model/layers.0/mlp/gate_proj/MatMul_grad",
    ] {
        assert!(
            option(by_name(&ns, name), 4)["allReduceBytes"].is_array(),
            "{name}"
        );
    }
}

#[test]
fn written_options_read_back_and_degree_one_is_never_written() {
    let model = write_model("tiny-rt.onnx", "self_attn");
    let (_, text) = import(&model, "1,4,2,2", "rt.json");
    let w = parse_workload(&text).unwrap();
    let options: TpOptions = parse_tensor_parallel(&text, &w).unwrap();
    // Every node has options of degrees 2 and 4 only; none of degree 1 is in the file.
    assert_eq!(options.len(), w.len());
    for (id, list) in &options {
        assert_eq!(
            list.iter().map(|o| o.degree).collect::<Vec<_>>(),
            [2, 4],
            "node {id}"
        );
    }
    for n in nodes(&text) {
        let degrees: Vec<u64> = n["tensorParallel"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["degree"].as_u64().unwrap())
            .collect();
        assert_eq!(degrees, [2, 4]);
    }
    // Written again from what was read, the same text; read again, the same options.
    let again = workload_to_json_with_tensor_parallel(&w, &options).unwrap();
    assert_eq!(again.trim_end(), text.trim_end());
    assert_eq!(parse_tensor_parallel(&again, &w).unwrap(), options);
    // --tensor-parallel 1: layers only, no option; the nodes' own numbers as without it.
    let (_, one) = import(&model, "1", "one.json");
    assert!(!one.contains("tensorParallel"));
    assert!(nodes(&one).iter().all(|n| n["layerId"].is_i64()));
    let plain = dir().join("plain.json");
    let o = dnnplace(&[
        "import",
        model.to_str().unwrap(),
        "--training",
        "--out",
        plain.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    let plain = nodes(&std::fs::read_to_string(plain).unwrap());
    for (a, b) in plain.iter().zip(nodes(&one)) {
        assert_eq!(
            (&a["fpgaLatency"], &a["size"]),
            (&b["fpgaLatency"], &b["size"])
        );
    }
}

#[test]
fn bad_degrees_and_unplaced_nodes_exit_2_naming_the_node() {
    let path = write_model("tiny-bad.onnx", "self_attn");
    for (degrees, says) in [
        // 16 output features of q_proj are not divisible by 3.
        ("2,3", "--tensor-parallel 3: node '/model/layers.0/self_attn/q_proj/MatMul' (MatMul, shape [2, 8, 16]) splits output features 16"),
        // 16 features divide by 8, the 4 heads do not.
        ("8", "--tensor-parallel 8: node '/model/layers.0/self_attn/Reshape' (Reshape, shape [2, 8, 4, 4]) splits attention heads 4"),
        ("0", "--tensor-parallel"),
    ] {
        let out = dir().join("bad.json");
        let o = dnnplace(&["import", path.to_str().unwrap(), "--training", "--tensor-parallel", degrees, "--out", out.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{degrees}: {err}");
        assert!(err.contains(says), "{degrees}: {err}");
    }
    // A softmax in a module the table does not know reads the split scores: refused.
    let odd = write_model("tiny-odd.onnx", "mystery");
    let o = dnnplace(&[
        "import",
        odd.to_str().unwrap(),
        "--training",
        "--tensor-parallel",
        "2",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("node '/model/layers.0/mystery/Softmax' (Softmax, module model.layers.0.mystery) reads a tensor split"),
        "{err}"
    );
    // Without module scopes there are no blocks: refused.
    let mut flat = model("self_attn");
    for n in &mut flat.graph.as_mut().unwrap().node {
        n.name = None;
    }
    let path = dir().join("flat.onnx");
    std::fs::write(&path, flat.encode_to_vec()).unwrap();
    let o = dnnplace(&[
        "import",
        path.to_str().unwrap(),
        "--training",
        "--tensor-parallel",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("no operator's module path names a transformer block"));
}

#[test]
fn plan_chooses_tp_when_only_split_stages_fit() {
    let (path, text) = import(
        &write_model("tiny-plan.onnx", "self_attn"),
        "2,4",
        "plan.json",
    );
    // The largest layer's memory at t = 1 (one micro-batch in flight: Σ size), by layerId.
    let mut per_layer = std::collections::BTreeMap::<i64, f64>::new();
    for n in nodes(&text) {
        *per_layer.entry(n["layerId"].as_i64().unwrap()).or_default() += f(&n["size"]);
    }
    let largest = per_layer.values().cloned().fold(0.0, f64::max);
    let run = |memory: f64| {
        let o = dnnplace(&[
            "plan",
            path.to_str().unwrap(),
            "--parallel",
            "3d",
            "--cluster",
            "1x8xa100-80gb",
            "--global-batch",
            "1",
            "--tensor-parallel",
            "1,2,4",
            "--json",
            "--memory",
            &format!("{}", memory.floor()),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let plan: Value = serde_json::from_slice(&o.stdout).unwrap();
        plan["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["tensorParallel"].as_u64().unwrap())
            .max()
            .unwrap()
    };
    // Room for the largest layer whole: t = 1 is cheapest (every op launches once).
    assert_eq!(run(1e12), 1);
    // Not enough for it whole on one device: only a split layout fits.
    assert!(run(0.9 * largest) > 1);
}

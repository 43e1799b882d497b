//! The cost-model commands end to end: `devices`, `import`, `generate transformer`, and
//! `plan MODEL.onnx`, run as the binary.

use std::path::Path;
use std::process::Command;

use dnnplace::costmodel::onnx::*;
use prost::Message;

fn dnnplace(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dnnplace"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

/// x (1×3×16×16) → Conv 3×3 (ConstantOfShape weights) → Mystery → Relu.
fn model_with_an_unknown_operator() -> Vec<u8> {
    let dim = |d: i64| Dimension {
        dim_value: Some(d),
        dim_param: None,
    };
    let input = ValueInfoProto {
        name: Some("x".into()),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type: Some(1),
                shape: Some(TensorShapeProto {
                    dim: vec![dim(1), dim(3), dim(16), dim(16)],
                }),
            }),
        }),
    };
    let node = |op: &str, i: &[&str], o: &str| NodeProto {
        input: i.iter().map(|s| s.to_string()).collect(),
        output: vec![o.into()],
        name: Some(format!("my_{}", op.to_lowercase())),
        op_type: Some(op.into()),
        attribute: vec![],
        domain: None,
        metadata_props: vec![],
    };
    let model = ModelProto {
        ir_version: Some(4),
        producer_name: None,
        opset_import: vec![OperatorSetIdProto {
            domain: None,
            version: Some(9),
        }],
        graph: Some(GraphProto {
            name: None,
            node: vec![
                node("ConstantOfShape", &["w_shape"], "w"),
                node("Conv", &["x", "w"], "c"),
                node("Mystery", &["c"], "m"),
                node("Relu", &["m"], "y"),
            ],
            initializer: vec![TensorProto {
                dims: vec![4],
                data_type: Some(7),
                int64_data: vec![8, 3, 3, 3],
                name: Some("w_shape".into()),
                ..Default::default()
            }],
            input: vec![input],
            output: vec![],
            value_info: vec![],
        }),
    };
    model.encode_to_vec()
}

#[test]
fn devices_lists_the_builtin_profiles_and_loads_a_file() {
    let (code, out, _) = dnnplace(&["devices"]);
    assert_eq!(code, 0);
    for name in ["v100", "a100-40gb", "a100-80gb", "h100", "cpu-core"] {
        assert!(out.contains(name), "{out}");
    }
    let dir = tempfile::tempdir().unwrap();
    let (_, toml, _) = dnnplace(&["devices", "--show", "v100"]);
    let custom = toml.replace("name = \"v100\"", "name = \"my-gpu\"");
    let file = dir.path().join("my.toml");
    std::fs::write(&file, custom).unwrap();
    let (code, out, _) = dnnplace(&["devices", "--device-file", file.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.contains("my-gpu"));
    let (code, _, err) = dnnplace(&["devices", "--device-file", "/nonexistent.toml"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn unknown_operators_warn_and_still_plan() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("m.onnx");
    std::fs::write(&model, model_with_an_unknown_operator()).unwrap();
    let out = dir.path().join("w.json");
    let (code, stdout, stderr) = dnnplace(&[
        "import",
        model.to_str().unwrap(),
        "--device",
        "v100",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("warning: node 'my_mystery': unknown operator Mystery"),
        "{stderr}"
    );
    assert!(stdout.contains("4 nodes"), "{stdout}");
    let w = dnnplace::io::read_workload(&out).unwrap();
    assert_eq!(w.devices().accelerators, 4);
    let (code, stdout, stderr) = dnnplace(&[
        "plan",
        model.to_str().unwrap(),
        "--device",
        "h100",
        "--accelerators",
        "2",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("proven optimal"), "{stdout}");
    // Not a model: a clear error, exit 2.
    std::fs::write(&model, b"\xff\xff\xffjunk").unwrap();
    let (code, _, stderr) = dnnplace(&["import", model.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(stderr.contains("not an ONNX model"), "{stderr}");
}

#[test]
fn generate_transformer_and_bad_flags() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.json");
    let (code, _, stderr) = dnnplace(&[
        "generate",
        "transformer",
        "--layers",
        "3",
        "--hidden",
        "64",
        "--heads",
        "4",
        "--seq",
        "32",
        "--batch",
        "2",
        "--training",
        "--dtype",
        "bf16",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let w = dnnplace::io::read_workload(&out).unwrap();
    assert!(w.is_training());
    let (code, _, stderr) = dnnplace(&[
        "generate",
        "transformer",
        "--style",
        "gpt2",
        "--head",
        "bert",
    ]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--head bert") && stderr.contains("--style bert"),
        "{stderr}"
    );
    let (code, _, stderr) =
        dnnplace(&["generate", "transformer", "--hidden", "100", "--heads", "3"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("does not divide"), "{stderr}");
    let (code, _, stderr) = dnnplace(&["generate", "transformer", "--device", "tpu-v9"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("unknown device 'tpu-v9'"), "{stderr}");
    // Cost flags with a workload JSON are an error, not silently ignored.
    let (code, _, stderr) = dnnplace(&["plan", out.to_str().unwrap(), "--device", "h100"]);
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn generate_styles_name_nodes_and_print_units() {
    let dir = tempfile::tempdir().unwrap();
    for (style, first_block_op, head) in [
        ("llama", "model.layers.0.input_layernorm", "lm_head"),
        (
            "bert",
            "bert.encoder.layer.0.attention.self.query",
            "cls.seq_relationship",
        ),
        ("gpt2", "transformer.h.0.ln_1", "lm_head"),
    ] {
        let out = dir.path().join(format!("{style}.json"));
        let (code, stdout, stderr) = dnnplace(&[
            "generate",
            "transformer",
            "--style",
            style,
            "--layers",
            "2",
            "--hidden",
            "64",
            "--heads",
            "4",
            "--seq",
            "16",
            "--training",
            "--dtype",
            "bf16",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{stderr}");
        // Units on every number for people: GFLOPs, ms, binary byte units.
        for unit in [
            "GFLOPs",
            " ms (sum of fpgaLatency)",
            " ms (sum of cpuLatency)",
            "KiB",
            "MiB",
            "80.00 GiB each",
        ] {
            assert!(stdout.contains(unit), "{style}: no '{unit}' in {stdout}");
        }
        assert!(
            stdout.contains("optimizer state") && stdout.contains("stashed activations"),
            "{stdout}"
        );
        let w = dnnplace::io::read_workload(&out).unwrap();
        let first = w.nodes().iter().find(|n| n.layer_id == Some(0)).unwrap();
        assert_eq!(first.name.as_deref(), Some(first_block_op), "{style}");
        let last_forward = w.nodes().iter().rfind(|n| !n.is_backward).unwrap();
        assert_eq!(
            (last_forward.name.as_deref(), last_forward.layer_id),
            (Some(head), Some(2)),
            "{style}"
        );
    }
    let (code, stdout, _) = dnnplace(&["devices"]);
    assert_eq!(code, 0);
    for unit in ["TFLOP/s", "GB/s", "GiB", "ms"] {
        assert!(stdout.contains(unit), "no '{unit}' in {stdout}");
    }
}

#[test]
fn plan_reads_a_light_onnx_model_directly() {
    let model = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/workloads/onnx/light_squeezenet.onnx");
    if !model.is_file() {
        println!("skipped: {} is absent", model.display());
        return;
    }
    let (code, stdout, stderr) = dnnplace(&[
        "plan",
        model.to_str().unwrap(),
        "--device",
        "h100",
        "--accelerators",
        "4",
        "--batch",
        "16",
        "--dtype",
        "fp16",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("proven optimal") && stdout.contains("acc3"),
        "{stdout}"
    );
}

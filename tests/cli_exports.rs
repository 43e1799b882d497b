//! The binary's layer and export commands: `plan --granularity layer` (and `--split-at
//! blocks`), `plan --export F --export-out FILE`, `export PLAN --workload W --format F`,
//! `score W --from-export F FILE`; exit statuses and messages.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::llama::{llama, Llama};

fn dnnplace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dnnplace"))
}

fn llama_file(dir: &Path, spec: Llama) -> PathBuf {
    let path = dir.join("llama.json");
    std::fs::write(&path, dnnplace::io::workload_to_json(&llama(spec))).unwrap();
    path
}

fn run(args: &[&str]) -> (String, String, Option<i32>) {
    let out = dnnplace().args(args).output().unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        out.status.code(),
    )
}

fn tps(text: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.starts_with("TPS (max load):"))
        .unwrap_or_else(|| panic!("no TPS in {text}"));
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

#[test]
fn plan_by_layers_prints_what_each_device_holds_with_units() {
    let dir = tempfile::tempdir().unwrap();
    let w = llama_file(dir.path(), Llama::default());
    let (text, err, code) = run(&["plan", w.to_str().unwrap(), "--granularity", "layer"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        text.contains("granularity: layer (26 layers (24 blocks model.layers.N)"),
        "{text}"
    );
    for row in [
        "embed_tokens + layers 0-5",
        "layers 6-11",
        "layers 12-17",
        "layers 18-23 + norm + lm_head",
    ] {
        assert!(text.contains(row), "{row}: {text}");
    }
    assert!(
        text.contains("model.embed_tokens, model.layers.0-5")
            && text.contains("load (ms)")
            && text.contains("MiB"),
        "{text}"
    );
    assert!((tps(&text) - 6.002).abs() < 1e-9, "{text}");
    let (alias, _, code) = run(&["plan", w.to_str().unwrap(), "--split-at", "blocks"]);
    assert_eq!(code, Some(0));
    assert_eq!(tps(&alias), tps(&text));
}

#[test]
fn every_format_round_trips_through_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let w = llama_file(
        dir.path(),
        Llama {
            embed_ms: 2.0,
            head_ms: 3.0,
            ..Llama::default()
        },
    );
    let w = w.to_str().unwrap();
    let plan = dir.path().join("plan.json");
    let (text, err, code) = run(&[
        "plan",
        w,
        "--split-at",
        "blocks",
        "--out",
        plan.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let planned = tps(&text);
    for format in [
        "torch",
        "torch-json",
        "deepspeed",
        "megatron",
        "vllm",
        "accelerate",
    ] {
        let file = dir.path().join(format!("export.{format}"));
        let (_, err, code) = run(&[
            "export",
            plan.to_str().unwrap(),
            "--workload",
            w,
            "--format",
            format,
            "--out",
            file.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(0), "{format}: {err}");
        let (scored, err, code) =
            run(&["score", w, "--from-export", format, file.to_str().unwrap()]);
        assert_eq!(code, Some(0), "{format}: {err}");
        assert_eq!(tps(&scored), planned, "{format}");
        // plan --export writes the same text.
        let again = dir.path().join(format!("again.{format}"));
        let (_, err, code) = run(&[
            "plan",
            w,
            "--export",
            format,
            "--export-out",
            again.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(0), "{format}: {err}");
        assert_eq!(
            std::fs::read_to_string(&again).unwrap(),
            std::fs::read_to_string(&file).unwrap(),
            "{format}"
        );
    }
    // Without --export-out the export follows the table on stdout.
    let (text, _, _) = run(&["plan", w, "--export", "vllm"]);
    assert!(
        text.contains("--- vllm export ---") && text.contains("VLLM_PP_LAYER_PARTITION="),
        "{text}"
    );
}

#[test]
fn refusals_exit_2_with_the_reason_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let w = llama_file(
        dir.path(),
        Llama {
            blocks: 4,
            accelerators: 2,
            ..Llama::default()
        },
    );
    let w = w.to_str().unwrap();
    // An operator-granular plan that cuts a block, built by hand: block 1's last operator on acc1.
    let workload = llama(Llama {
        blocks: 4,
        accelerators: 2,
        ..Llama::default()
    });
    let on_acc1: Vec<i64> = workload
        .nodes()
        .iter()
        .filter(|n| {
            let name = n.name.as_deref().unwrap();
            name == "model.layers.1.mlp.down_proj"
                || name.starts_with("model.layers.2")
                || name.starts_with("model.layers.3")
                || name == "model.norm"
                || name == "lm_head"
        })
        .map(|n| n.id)
        .collect();
    let on_acc0: Vec<i64> = workload
        .nodes()
        .iter()
        .map(|n| n.id)
        .filter(|id| !on_acc1.contains(id))
        .collect();
    let plan = dir.path().join("cut.json");
    std::fs::write(
        &plan,
        serde_json::json!({"fpgas": [{"nodes": on_acc0}, {"nodes": on_acc1}]}).to_string(),
    )
    .unwrap();
    let out = dir.path().join("never.txt");
    let (_, err, code) = run(&[
        "export",
        plan.to_str().unwrap(),
        "--workload",
        w,
        "--format",
        "vllm",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("cannot export to vllm: the plan cuts inside layer model.layers.1")
            && err.contains("acc1 holds 1"),
        "{err}"
    );
    assert!(!out.exists(), "a refused export writes no file");
    let (_, err, code) = run(&[
        "export",
        plan.to_str().unwrap(),
        "--workload",
        w,
        "--format",
        "onnx",
    ]);
    assert_eq!(code, Some(2));
    assert!(err.contains("unknown export format 'onnx'; known: torch, torch-json, deepspeed, megatron, vllm, accelerate"), "{err}");
    // A hand-written vLLM file whose counts do not add up.
    let bad = dir.path().join("bad.sh");
    std::fs::write(&bad, "VLLM_PP_LAYER_PARTITION=1,2 vllm serve m -pp 2\n").unwrap();
    let (_, err, code) = run(&["score", w, "--from-export", "vllm", bad.to_str().unwrap()]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("sum(partitions)=3 does not match num_hidden_layers=4"),
        "{err}"
    );
    // --export on a plan with a CPU stage, for a pipeline target.
    let cpu = llama_file(
        dir.path(),
        Llama {
            blocks: 4,
            accelerators: 1,
            cpus: 1,
            ..Llama::default()
        },
    );
    let plan2 = dir.path().join("cpu.json");
    let (_, err, code) = run(&[
        "plan",
        cpu.to_str().unwrap(),
        "--method",
        "greedy",
        "--export",
        "megatron",
        "--memory",
        "3.5MB",
        "--out",
        plan2.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("Megatron-LM runs every pipeline stage on a GPU"),
        "{err}"
    );
    assert!(!plan2.exists(), "a refused export writes no plan either");
}

#[test]
fn layers_that_are_not_contiguous_are_named() {
    let dir = tempfile::tempdir().unwrap();
    // a(layer 1) -> b(layer 2) -> c(layer 1): layer 1 is left and re-entered.
    let text = r#"{"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 0, "nodes": [
        {"id": 1, "name": "m.a", "fpgaLatency": 1, "cpuLatency": 1, "layerId": 1},
        {"id": 2, "name": "m.b", "fpgaLatency": 1, "cpuLatency": 1, "layerId": 2},
        {"id": 3, "name": "m.c", "fpgaLatency": 1, "cpuLatency": 1, "layerId": 1}],
        "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5}, {"sourceId": 2, "destId": 3, "cost": 0.5}]}"#;
    let path = dir.path().join("w.json");
    std::fs::write(&path, text).unwrap();
    let (_, err, code) = run(&["plan", path.to_str().unwrap(), "--granularity", "layer"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("layers are not contiguous in the graph: layer m -> layer m.b (edge 1 -> 2) -> layer m (edge 2 -> 3)"),
        "{err}"
    );
    // At operator granularity the same workload plans.
    let (_, err, code) = run(&["plan", path.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
}

/// The per-device rows of a `score` table (plan table and holdings), device names cut,
/// sorted.
fn device_rows(text: &str) -> Vec<String> {
    let mut rows: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("acc"))
        .map(|l| {
            l.split_once(' ')
                .unwrap()
                .1
                .trim()
                .replace("  <- bottleneck", "")
        })
        .collect();
    rows.sort();
    rows
}

/// `plan --granularity layer`, then `export` and `score --from-export` per format, on the
/// repository's example (examples/bert-tiny.json, BERT names, one CPU withheld by `--cpus
/// 0` since pipeline targets run every stage on a GPU) and on workloads written by
/// `dnnplace generate transformer --style gpt2|llama` (inference and training): every
/// read-back scores the plan's TPS exactly, and placing the read-back by `score` with the
/// placement file gives the same per-device rows.
#[test]
fn score_from_export_reproduces_the_plans_tps_on_bert_tiny_and_generated_models() {
    let dir = tempfile::tempdir().unwrap();
    let bert = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bert-tiny.json");
    let mut workloads: Vec<(String, PathBuf)> = vec![("bert-tiny".into(), bert)];
    for (style, training) in [
        ("gpt2", false),
        ("llama", false),
        ("gpt2", true),
        ("llama", true),
    ] {
        let out = dir.path().join(format!("{style}-{training}.json"));
        let mut args = vec![
            "generate",
            "transformer",
            "--style",
            style,
            "--layers",
            "6",
            "--hidden",
            "256",
            "--heads",
            "4",
            "--seq",
            "128",
            "--accelerators",
            "3",
            "--out",
            out.to_str().unwrap(),
        ];
        if training {
            args.push("--training");
        }
        let (_, err, code) = run(&args);
        assert_eq!(code, Some(0), "generate {style}: {err}");
        workloads.push((
            format!("{style}{}", if training { " training" } else { "" }),
            out,
        ));
    }
    for (name, w) in &workloads {
        let w = w.to_str().unwrap();
        let plan = dir.path().join("plan.json");
        let (text, err, code) = run(&[
            "plan",
            w,
            "--granularity",
            "layer",
            "--cpus",
            "0",
            "--out",
            plan.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(0), "{name}: {err}");
        let planned = tps(&text);
        let (rescored, err, code) = run(&["score", w, plan.to_str().unwrap(), "--cpus", "0"]);
        assert_eq!(code, Some(0), "{name}: {err}");
        assert_eq!(tps(&rescored), planned, "{name}: the placement file");
        for format in [
            "torch",
            "torch-json",
            "deepspeed",
            "megatron",
            "vllm",
            "accelerate",
        ] {
            let file = dir.path().join(format!("export.{format}"));
            let (_, err, code) = run(&[
                "export",
                plan.to_str().unwrap(),
                "--workload",
                w,
                "--cpus",
                "0",
                "--format",
                format,
                "--out",
                file.to_str().unwrap(),
            ]);
            assert_eq!(code, Some(0), "{name} {format}: {err}");
            let (scored, err, code) = run(&[
                "score",
                w,
                "--cpus",
                "0",
                "--from-export",
                format,
                file.to_str().unwrap(),
            ]);
            assert_eq!(code, Some(0), "{name} {format}: {err}");
            assert_eq!(tps(&scored), planned, "{name} {format}");
            // Exports number GPUs in pipeline order, so compare the rows without the device.
            assert_eq!(
                device_rows(&scored),
                device_rows(&rescored),
                "{name} {format}: per-device rows"
            );
        }
    }
}

/// A Llama training graph planned under 1F1B with `--recompute auto` and a memory that
/// only some stages fit without recomputing: every export carries the recompute choice in
/// its framework's own terms (DeepSpeed `PipelineModule.activation_checkpoint_interval`
/// per stage; Megatron-LM `--recompute-granularity full --recompute-method uniform
/// --recompute-num-layers K`, one setting for all stages, with a warning naming the stages
/// the plan does not recompute; torch `torch.utils.checkpoint` on the listed stages; vLLM
/// and accelerate a warning), and the same graph with ample memory exports none of it.
#[test]
fn exports_carry_the_recompute_choice() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("train.json");
    let w = w.to_str().unwrap();
    let (_, err, code) = run(&[
        "generate",
        "transformer",
        "--style",
        "llama",
        "--layers",
        "8",
        "--hidden",
        "256",
        "--heads",
        "4",
        "--ffn",
        "512",
        "--vocab",
        "1000",
        "--training",
        "--accelerators",
        "4",
        "--cpus",
        "0",
        "--out",
        w,
    ]);
    assert_eq!(code, Some(0), "{err}");
    for (memory, recomputes) in [("150MiB", true), ("80GiB", false)] {
        let plan = dir.path().join(format!("plan-{memory}.json"));
        let plan = plan.to_str().unwrap();
        let (text, err, code) = run(&[
            "plan",
            w,
            "--schedule",
            "1f1b",
            "--micro-batches",
            "8",
            "--recompute",
            "auto",
            "--memory",
            memory,
            "--granularity",
            "layer",
            "--out",
            plan,
        ]);
        assert_eq!(code, Some(0), "{err}");
        // The plan's recomputing stages: its accelerators in pipeline order (by their
        // first node) and the "recompute": true the plan file marks.
        let file: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(plan).unwrap()).unwrap();
        let mut fpgas: Vec<(u64, bool)> = file["fpgas"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| !d["nodes"].as_array().unwrap().is_empty())
            .map(|d| {
                let first = d["nodes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap())
                    .min()
                    .unwrap();
                (first, d["recompute"].as_bool().unwrap_or(false))
            })
            .collect();
        fpgas.sort();
        let planned: Vec<usize> = (0..fpgas.len()).filter(|&s| fpgas[s].1).collect();
        assert_eq!(!planned.is_empty(), recomputes, "{memory}: {text}");
        if recomputes {
            assert!(
                planned.len() < fpgas.len(),
                "{memory}: every stage recomputes; the test wants some that do not: {text}"
            );
        }
        let export = |format: &str| {
            let (text, err, code) = run(&["export", plan, "--workload", w, "--format", format]);
            assert_eq!(code, Some(0), "{format}: {err}");
            text
        };

        // DeepSpeed: `parts = [...]` and, per stage, `activation_checkpoint_interval` (the
        // PipelineModule attribute forward() reads): the stage's layer count where the plan
        // recomputes (one checkpointed chunk), 0 where not.
        let ds = export("deepspeed");
        let list = |name: &str| -> Option<Vec<i64>> {
            ds.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} = ")))
                .map(|v| serde_json::from_str(v).unwrap())
        };
        let parts = list("parts").unwrap();
        match list("activation_checkpoint_interval") {
            Some(intervals) => {
                assert!(recomputes, "{ds}");
                assert_eq!(intervals.len(), parts.len() - 1, "{ds}");
                for (s, &i) in intervals.iter().enumerate() {
                    let want = if planned.contains(&s) {
                        parts[s + 1] - parts[s]
                    } else {
                        0
                    };
                    assert_eq!(i, want, "stage {s}: {ds}");
                }
                assert!(ds.contains("self.activation_checkpoint_interval = activation_checkpoint_interval[self.stage_id]"), "{ds}");
                assert!(ds.contains("\"use_reentrant\": false"), "{ds}");
            }
            None => assert!(!recomputes, "{ds}"),
        }

        // Megatron-LM: the flags TransformerConfig's recompute fields become, with K at
        // least every stage's decoder layers (counted from the layout string here).
        let mg = export("megatron");
        let words = shlex::split(&mg.replace("\\\n", " ")).unwrap();
        let flag = |name: &str| {
            words
                .iter()
                .position(|x| x == name)
                .map(|i| words[i + 1].clone())
        };
        if recomputes {
            assert_eq!(
                flag("--recompute-granularity").as_deref(),
                Some("full"),
                "{mg}"
            );
            assert_eq!(
                flag("--recompute-method").as_deref(),
                Some("uniform"),
                "{mg}"
            );
            let k: usize = flag("--recompute-num-layers").unwrap().parse().unwrap();
            let layout = flag("--pipeline-model-parallel-layout").unwrap();
            for stage in layout.split('|') {
                let t: usize = stage
                    .split(',')
                    .filter_map(|part| match part.strip_prefix('t') {
                        Some("") => Some(1),
                        Some(n) => n.strip_prefix('*').map(|n| n.parse::<usize>().unwrap()),
                        None => None,
                    })
                    .sum();
                assert!(
                    k >= t,
                    "K = {k} < {t} decoder layers of stage {stage}: {mg}"
                );
            }
            let warning = mg
                .lines()
                .find(|l| l.starts_with("# WARNING"))
                .unwrap_or_else(|| panic!("{mg}"));
            for s in 0..fpgas.len() {
                assert_eq!(
                    warning.contains(&format!("GPU {s} (+")),
                    !planned.contains(&s),
                    "{warning}"
                );
            }
        } else {
            assert!(!mg.contains("--recompute"), "{mg}");
        }

        // torch: the stages to run under torch.utils.checkpoint.
        let torch = export("torch");
        let stages: Option<Vec<usize>> = torch
            .lines()
            .find_map(|l| l.strip_prefix("recompute_stages = "))
            .map(|v| serde_json::from_str(v).unwrap());
        let json: serde_json::Value = serde_json::from_str(&export("torch-json")).unwrap();
        if recomputes {
            assert_eq!(stages.as_ref(), Some(&planned), "{torch}");
            assert!(torch.contains("torch.utils.checkpoint.checkpoint(forward, *args, use_reentrant=False, **kwargs)"), "{torch}");
            assert_eq!(json["recompute_stages"], serde_json::json!(planned));
        } else {
            assert_eq!(stages, None, "{torch}");
            assert!(!torch.contains("checkpoint"), "{torch}");
            assert!(json.get("recompute_stages").is_none());
        }

        // vLLM and accelerate have no such setting: they say so, naming the GPUs.
        for format in ["vllm", "accelerate"] {
            let text = export(format);
            let warning = text
                .lines()
                .find(|l| l.contains("WARNING: the plan recomputes"));
            assert_eq!(warning.is_some(), recomputes, "{format}: {text}");
            if let Some(line) = warning {
                for s in &planned {
                    assert!(line.contains(&format!("GPU {s}")), "{line}");
                }
            }
        }
    }
}

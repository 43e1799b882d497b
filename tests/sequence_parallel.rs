//! `--sequence-parallel` on `plan CONFIG.json --parallel 3d` through the binary: the same
//! layout priced with it is faster and lighter, with the same TP collectives (the stage rows
//! compared field by field); Megatron-LM's export carries `--sequence-parallel` and
//! `score --from-export` reads it back to the plan's value (and without the switch to the
//! value without it); the export targets that cannot run it refuse it, naming the flag;
//! torchtitan's exports are priced with it.

use std::path::Path;
use std::process::{Command, Output};

fn dnnplace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dnnplace"))
}

/// TP 8 × PP 4 × DP 1 of the Llama-70B shape on 4 machines of 8 H100, fixed.
const FIXED: [&str; 22] = [
    "plan",
    "examples/hf/llama-3-70b.json",
    "--parallel",
    "3d",
    "--cluster",
    "4x8xh100",
    "--seq",
    "2048",
    "--global-batch",
    "64",
    "--tensor-parallel",
    "8",
    "--pipeline-parallel",
    "4",
    "--data-parallel",
    "1",
    "--micro-batch",
    "1",
    "--zero",
    "1",
    "--recompute",
    "none",
];

fn run(args: &[&str]) -> Output {
    dnnplace().args(args).output().unwrap()
}

fn json_of(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn fixed(extra: &[&str]) -> serde_json::Value {
    let mut args = FIXED.to_vec();
    args.push("--json");
    args.extend_from_slice(extra);
    json_of(&run(&args))
}

fn f(v: &serde_json::Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

#[test]
fn the_same_layout_with_sequence_parallelism_is_faster_and_lighter() {
    let whole = fixed(&[]);
    let sp = fixed(&["--sequence-parallel"]);
    assert_eq!(whole["sequenceParallel"], false);
    assert_eq!(sp["sequenceParallel"], true);
    assert!(f(&sp, "value") < f(&whole, "value"));
    // The split may move (the blocks got cheaper, the embeddings and head less so); what
    // the chain holds does not: the same TP collectives and weights in all, less compute.
    let total = |v: &serde_json::Value, key: &str| -> f64 {
        v["stages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| f(s, key))
            .sum()
    };
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
    assert_eq!(sp["stages"].as_array().unwrap().len(), 4);
    assert!(close(
        total(&whole, "tensorParallelMs"),
        total(&sp, "tensorParallelMs")
    ));
    assert!(close(
        total(&whole, "weightBytes"),
        total(&sp, "weightBytes")
    ));
    assert!(total(&sp, "computeMs") < total(&whole, "computeMs"));
    // At TP 1 there is nothing to split: the same figures, and not called sequence parallel.
    let one = |extra: &[&str]| {
        let mut args = FIXED.to_vec();
        (args[11], args[15], args[19], args[21]) = ("1", "8", "3", "auto");
        args.push("--json");
        args.extend_from_slice(extra);
        json_of(&run(&args))
    };
    let (a, b) = (one(&[]), one(&["--sequence-parallel"]));
    assert_eq!(f(&a, "value"), f(&b, "value"));
    assert_eq!(b["sequenceParallel"], false);
}

fn score(format: &str, file: &Path) -> serde_json::Value {
    json_of(&scored(format, file))
}

fn scored(format: &str, file: &Path) -> Output {
    run(&[
        "score",
        "examples/hf/llama-3-70b.json",
        "--parallel",
        "3d",
        "--cluster",
        "4x8xh100",
        "--seq",
        "2048",
        "--json",
        "--from-export",
        format,
        file.to_str().unwrap(),
    ])
}

#[test]
fn megatron_carries_the_switch_and_score_reads_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("megatron.sh");
    let sp = fixed(&[
        "--sequence-parallel",
        "--export",
        "megatron",
        "--export-out",
        file.to_str().unwrap(),
    ]);
    let text = std::fs::read_to_string(&file).unwrap();
    let command = text.lines().find(|l| !l.starts_with('#')).unwrap();
    assert!(
        command.contains("--tensor-model-parallel-size 8 --sequence-parallel"),
        "{text}"
    );
    assert_eq!(f(&score("megatron", &file), "value"), f(&sp, "value"));
    // Without the switch the same line is priced without it: slower, or beyond memory.
    let plain = dir.path().join("plain.sh");
    std::fs::write(&plain, command.replace(" --sequence-parallel", "")).unwrap();
    let out = scored("megatron", &plain);
    match out.status.code() {
        Some(0) => assert!(f(&json_of(&out), "value") > f(&sp, "value")),
        other => assert_eq!(other, Some(1), "{}", String::from_utf8_lossy(&out.stderr)),
    }
    // A plan without it exports no switch and reads back to its own value.
    let whole = fixed(&[
        "--export",
        "megatron",
        "--export-out",
        plain.to_str().unwrap(),
    ]);
    assert!(!std::fs::read_to_string(&plain)
        .unwrap()
        .contains("--sequence-parallel"));
    assert_eq!(f(&score("megatron", &plain), "value"), f(&whole, "value"));
}

#[test]
fn targets_without_it_refuse_it_and_torchtitan_prices_it() {
    for format in ["deepspeed", "vllm"] {
        let mut args = FIXED.to_vec();
        args.extend_from_slice(&["--sequence-parallel", "--export", format]);
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{format}: {err}");
        assert!(err.contains("--sequence-parallel --export"), "{err}");
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("job.toml");
    let mut args = FIXED.to_vec();
    args[19] = "2";
    args.extend_from_slice(&["--json", "--export", "torchtitan"]);
    args.extend_from_slice(&["--export-out", file.to_str().unwrap()]);
    let out = run(&args);
    assert!(String::from_utf8_lossy(&out.stderr).contains("planned with --sequence-parallel"));
    let planned = json_of(&out);
    assert_eq!(planned["sequenceParallel"], true);
    assert_eq!(
        f(&score("torchtitan", &file), "value"),
        f(&planned, "value")
    );
    let out = run(&[
        "plan",
        "examples/hf/llama-3-70b.json",
        "--sequence-parallel",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("--sequence-parallel describes a parallel layout"));
}

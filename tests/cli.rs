//! The binary: exit statuses, messages, output files.

mod common;

use std::process::Command;

fn dnnplace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dnnplace"))
}

fn small_workload(dir: &std::path::Path) -> std::path::PathBuf {
    let w = (0..)
        .find_map(|seed| {
            common::random_workload(
                seed,
                common::Shape {
                    max_nodes: 9,
                    ..Default::default()
                },
            )
            .filter(|w| w.len() >= 5)
        })
        .unwrap();
    let path = dir.join("w.json");
    std::fs::write(&path, dnnplace::io::workload_to_json(&w)).unwrap();
    path
}

#[test]
fn plan_writes_a_placement_that_scores_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let w = small_workload(dir.path());
    let out = dir.path().join("plan.json");
    let run = dnnplace()
        .arg("plan")
        .arg(&w)
        .arg("--out")
        .arg(&out)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let planned: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(planned["optimal"], true);
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(file["maxLoad"], planned["maxLoad"]);
    let scored = dnnplace()
        .arg("score")
        .arg(&w)
        .arg(&out)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        scored.status.success(),
        "{}",
        String::from_utf8_lossy(&scored.stderr)
    );
    let scored: serde_json::Value = serde_json::from_slice(&scored.stdout).unwrap();
    assert_eq!(scored["maxLoad"], planned["maxLoad"]);
    assert_eq!(scored["valid"], true);
    assert_eq!(scored["contiguous"], true);
}

#[test]
fn table_marks_the_bottleneck() {
    let dir = tempfile::tempdir().unwrap();
    let w = small_workload(dir.path());
    let run = dnnplace().arg("plan").arg(&w).output().unwrap();
    let text = String::from_utf8(run.stdout).unwrap();
    assert!(
        text.contains("<- bottleneck")
            && text.contains("TPS (max load)")
            && text.contains("proven optimal"),
        "{text}"
    );
}

fn fails_with(args: &[&str], needle: &str) {
    let run = dnnplace().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{args:?}: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: expected '{needle}' in: {err}"
    );
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"maxSizePerFPGA": 1, "maxFPGAs": 1, "maxCPUs": 0, "nodes": [{"id": 1, "fpgaLatency": 1, "cpuLatency": 1}], "edges": [{"sourceId": 1, "destId": 2, "cost": 0}]}"#).unwrap();
    fails_with(&["plan", bad.to_str().unwrap()], "unknown node id 2");
    fails_with(&["plan", "/nonexistent/w.json"], "/nonexistent/w.json");
    let w = small_workload(dir.path());
    fails_with(
        &["plan", w.to_str().unwrap(), "--method", "magic"],
        "unknown method 'magic'",
    );
    fails_with(
        &["plan", w.to_str().unwrap(), "--memory", "12 parsecs"],
        "unknown byte unit",
    );
    fails_with(
        &[
            "plan",
            w.to_str().unwrap(),
            "--accelerators",
            "0",
            "--cpus",
            "0",
        ],
        "no accelerator and no CPU",
    );
    fails_with(
        &[
            "plan",
            w.to_str().unwrap(),
            "--method",
            "dp",
            "--objective",
            "latency",
        ],
        "does not support",
    );
    fails_with(
        &[
            "plan",
            w.to_str().unwrap(),
            "--method",
            "dp",
            "--coarsen",
            "layers",
        ],
        "are for --method auto",
    );
    fails_with(
        &[
            "plan",
            w.to_str().unwrap(),
            "--coarsen",
            "off",
            "--coarsen-target",
            "8",
        ],
        "contradicts --coarsen off",
    );
}

#[test]
fn auto_is_the_default_and_says_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let w = small_workload(dir.path());
    for extra in [
        &[][..],
        &["--coarsen", "layers"][..],
        &["--coarsen-target", "2"][..],
        &["--objective", "latency"][..],
    ] {
        let run = dnnplace()
            .arg("plan")
            .arg(&w)
            .arg("--json")
            .args(extra)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
        assert_eq!(v["method"], "auto");
        assert!(
            v["path"].as_str().is_some_and(|p| !p.is_empty()),
            "{extra:?}: {v}"
        );
        assert!(
            v["bound"]
                .as_f64()
                .is_some_and(|b| b <= v["value"].as_f64().unwrap() * (1.0 + 1e-9)),
            "{v}"
        );
    }
}

#[test]
fn no_file_is_written_when_planning_fails() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.json");
    // Two nodes of 6 bytes each that must share a device (one colour class) of 10 bytes: no placement.
    std::fs::write(
        &w,
        r#"{"maxSizePerFPGA": 10, "maxFPGAs": 2, "maxCPUs": 0, "nodes": [
        {"id": 1, "fpgaLatency": 1, "cpuLatency": 1, "size": 6, "colorClass": 1},
        {"id": 2, "fpgaLatency": 1, "cpuLatency": 1, "size": 6, "colorClass": 1}], "edges": []}"#,
    )
    .unwrap();
    let out = dir.path().join("plan.json");
    let run = dnnplace()
        .arg("plan")
        .arg(&w)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("colour class 1"),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(!out.exists());
}

//! `dnnplace simulate` and `plan --report` from the command line: outputs, files, exit
//! statuses and messages.

mod pipeline_gen;

use std::process::Command;

fn dnnplace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dnnplace"))
}

/// A training chain of 4 stages written to `dir`, and a plan of it from `plan --out`.
fn setup(dir: &std::path::Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (w, _) = pipeline_gen::uniform_chain(4, 2, 4, 1.0, 2.0, true, 0.25);
    let workload = dir.join("chain.json");
    std::fs::write(&workload, dnnplace::io::workload_to_json(&w)).unwrap();
    let plan = dir.join("plan.json");
    let run = dnnplace()
        .arg("plan")
        .arg(&workload)
        .arg("--out")
        .arg(&plan)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    (workload, plan)
}

#[test]
fn simulate_prints_tables_json_and_svg() {
    let dir = tempfile::tempdir().unwrap();
    let (w, p) = setup(dir.path());
    let text = dnnplace()
        .arg("simulate")
        .arg(&w)
        .arg(&p)
        .args(["--schedule", "gpipe", "--micro-batches", "4"])
        .output()
        .unwrap();
    assert!(
        text.status.success(),
        "{}",
        String::from_utf8_lossy(&text.stderr)
    );
    let text = String::from_utf8(text.stdout).unwrap();
    for needle in [
        "schedule: gpipe",
        "iteration time T:",
        "time per sample T/m:",
        "bubble:",
        "<- bottleneck",
        "peak memory",
    ] {
        assert!(text.contains(needle), "'{needle}' missing in:\n{text}");
    }

    let json = dnnplace()
        .arg("simulate")
        .arg(&w)
        .arg(&p)
        .args(["--micro-batches", "6", "--format", "json"])
        .output()
        .unwrap();
    assert!(json.status.success());
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["schedule"], "1f1b");
    assert_eq!(v["microBatches"], 6);
    let t = v["iterationMs"].as_f64().unwrap();
    assert!(t >= 6.0 * v["maxLoadMs"].as_f64().unwrap() * (1.0 - 1e-12));
    assert!(t >= v["lowerBoundMs"].as_f64().unwrap() * (1.0 - 1e-12));
    let devices = v["devices"].as_array().unwrap().len();
    let pieces = v["pieces"].as_u64().unwrap() as usize;
    assert_eq!(v["tasks"].as_array().unwrap().len(), pieces * 6);

    let svg = dnnplace()
        .arg("simulate")
        .arg(&w)
        .arg(&p)
        .args(["--format", "svg"])
        .output()
        .unwrap();
    assert!(svg.status.success());
    let svg = String::from_utf8(svg.stdout).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let rows = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("gantt-row"))
        .count();
    assert_eq!(rows, devices);
}

#[test]
fn reports_are_written_by_plan_and_simulate() {
    let dir = tempfile::tempdir().unwrap();
    let (w, p) = setup(dir.path());
    let from_plan = dir.path().join("plan.html");
    let run = dnnplace()
        .arg("plan")
        .arg(&w)
        .arg("--report")
        .arg(&from_plan)
        .args(["--schedule", "interleaved:2", "--micro-batches", "4"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains("report written to"), "{stdout}");
    let html = std::fs::read_to_string(&from_plan).unwrap();
    assert!(
        html.starts_with("<!DOCTYPE html>")
            && html.contains("id=\"gantt\"")
            && html.contains("interleaved:2")
    );

    let from_simulate = dir.path().join("sim.html");
    let run = dnnplace()
        .arg("simulate")
        .arg(&w)
        .arg(&p)
        .arg("--report")
        .arg(&from_simulate)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let html = std::fs::read_to_string(&from_simulate).unwrap();
    assert!(html.contains("a given plan, not solved here") && html.contains("id=\"graph\""));
}

fn fails_with(args: &[&std::ffi::OsStr], needle: &str) {
    let run = dnnplace().args(args).output().unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{args:?}: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: expected '{needle}' in: {err}"
    );
}

#[test]
fn bad_input_exits_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (w, p) = setup(dir.path());
    let (w, p) = (w.as_os_str(), p.as_os_str());
    let s = |x: &'static str| std::ffi::OsStr::new(x);
    fails_with(
        &[s("simulate"), w, p, s("--schedule"), s("zigzag")],
        "unknown schedule 'zigzag'",
    );
    fails_with(
        &[s("simulate"), w, p, s("--schedule"), s("interleaved:1")],
        "at least 2 chunks",
    );
    fails_with(
        &[s("simulate"), w, p, s("--micro-batches"), s("0")],
        "at least 1",
    );
    fails_with(
        &[s("simulate"), w, p, s("--schedule"), s("interleaved:3")],
        "multiple of its 3 chunks",
    );
    fails_with(
        &[s("simulate"), w, s("/nonexistent/plan.json")],
        "/nonexistent/plan.json",
    );
    let other = dir.path().join("other.json");
    std::fs::write(
        &other,
        r#"{"maxLoad": 1, "fpgas": [{"nodes": [12345]}], "cpus": []}"#,
    )
    .unwrap();
    fails_with(&[s("simulate"), w, other.as_os_str()], "node 12345");
    let over = dir.path().join("over.json");
    std::fs::write(
        &over,
        r#"{"maxLoad": 1, "fpgas": [{"nodes": [0, 1, 2, 3, 4, 5, 6, 7]}], "cpus": []}"#,
    )
    .unwrap();
    fails_with(
        &[s("simulate"), w, over.as_os_str(), s("--memory"), s("4B")],
        "not valid",
    );

    // A report that cannot be simulated: neither the plan nor the page is written.
    let out = dir.path().join("never.json");
    let page = dir.path().join("never.html");
    fails_with(
        &[
            s("plan"),
            w,
            s("--out"),
            out.as_os_str(),
            s("--report"),
            page.as_os_str(),
            s("--schedule"),
            s("interleaved:3"),
            // The greedy baseline plans one stage per device; the report simulates
            // interleaved:3.
            s("--method"),
            s("greedy"),
        ],
        "multiple of its 3 chunks",
    );
    assert!(!out.exists() && !page.exists());
}

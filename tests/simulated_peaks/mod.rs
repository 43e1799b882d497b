//! The simulator's per-device peaks as `dnnplace simulate --format json` prints them,
//! against a planner's figures (for the command-line tests of the schedules). Not in
//! `tests/common`: the fuzz example includes that module, and it has no binary to run.

/// Runs `dnnplace simulate WORKLOAD PLAN ARGS --format json` and checks that it succeeds and
/// that every device's simulated peak memory equals the planned figure
/// (`pipeline.devices[].memoryBytes` of `planned`, the plan's `--json` report; bytes, 1e-9
/// relative), in device order.
pub fn assert_simulated_peaks(
    workload: &std::path::Path,
    plan: &std::path::Path,
    args: &[&str],
    planned: &serde_json::Value,
) {
    let planned: Vec<f64> = planned["pipeline"]["devices"]
        .as_array()
        .expect("a plan made under a schedule")
        .iter()
        .map(|d| d["memoryBytes"].as_f64().unwrap())
        .collect();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dnnplace"))
        .arg("simulate")
        .arg(workload)
        .arg(plan)
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let simulated: Vec<f64> = s["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["peakMemoryBytes"].as_f64().unwrap())
        .collect();
    assert_eq!(planned.len(), simulated.len());
    for (a, b) in planned.iter().zip(&simulated) {
        assert!(
            (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0),
            "planned {planned:?}, simulated {simulated:?}"
        );
    }
}

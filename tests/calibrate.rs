//! Calibration (`crates/dnnplace/src/costmodel/calibrate.rs`, `dnnplace calibrate`):
//!
//! - a device with known efficiencies and launch overhead is recovered from "measured"
//!   times the test computes itself from the roofline formula (not with the library's
//!   pricing), on a hand-made graph whose operators sit on both sides of the roofline;
//! - the fitted error never exceeds the base profile's (random measured times);
//! - the fitted profile, written as a device file and read back by `--device-file`,
//!   prices each unit as the calibration reported;
//! - mismatched inputs give a clear error (exit 2 from the command line).

use std::process::Command;

use dnnplace::costmodel::calibrate::Pass;
use dnnplace::costmodel::{
    calibrate, find_profile, DType, DeviceProfile, Op, OpClass, OpCost, OpGraph,
};
use dnnplace::io::parse_workload;
use dnnplace::model::Workload;
use proptest::prelude::*;
use serde_json::json;

/// `(module, class, flops, input bytes, param bytes, output bytes)` of each operator.
type Spec = (&'static str, OpClass, f64, f64, f64, f64);

/// Two blocks of a compute-heavy product, a memory-heavy elementwise op and a norm, an
/// embedding-like gather, and an operator of a module no unit holds.
fn ops() -> Vec<Spec> {
    let mut v = Vec::new();
    for b in ["model.h.0", "model.h.1"] {
        let s: &'static str = Box::leak(b.to_string().into_boxed_str());
        v.push((s, OpClass::Matmul, 4.0e12, 8.0e6, 2.0e7, 8.0e6));
        v.push((s, OpClass::Vector, 2.0e6, 6.0e8, 0.0, 6.0e8));
        v.push((s, OpClass::Vector, 1.6e7, 8.0e6, 1.0e4, 8.0e6));
    }
    v.push(("model.wte", OpClass::Movement, 0.0, 1.0e5, 3.0e8, 4.0e6));
    v.push(("model.head", OpClass::Matmul, 9.0e11, 8.0e6, 1.5e8, 2.0e8));
    v.push(("model", OpClass::Vector, 1.0e6, 8.0e6, 0.0, 4.0e6));
    v
}

fn graph() -> OpGraph {
    graph_of(&ops())
}

fn graph_of(specs: &[Spec]) -> OpGraph {
    let mut g = OpGraph::default();
    for (i, &(module, class, flops, inp, par, out)) in specs.iter().enumerate() {
        let cost = OpCost::from_bytes(class, flops, flops / 2.0, inp, par, out);
        g.push(Op {
            name: format!("op{i}"),
            module: Some(module.to_string()),
            op_type: "X".into(),
            cost,
            inputs: if i == 0 { vec![] } else { vec![i - 1] },
            layer_id: None,
            is_input: false,
        });
    }
    g
}

/// The roofline of `operators.rs`, written out here: `1e3·max(F/(peak·c), B/(bw·μ)) + L`.
fn roofline(p: &DeviceProfile, class: OpClass, flops: f64, bytes: f64, dtype: DType) -> f64 {
    let peak = match (class, dtype) {
        (OpClass::Matmul, DType::Bf16) => p.peak_fp16_flops,
        _ => p.peak_fp32_flops,
    };
    1e3 * f64::max(
        flops / (peak * p.compute_efficiency),
        bytes / (p.memory_bandwidth_bytes_per_s * p.memory_efficiency),
    ) + p.launch_overhead_ms
}

/// A measured workload: per module one forward and one backward node whose times are the
/// sums of the roofline over its operators (backward: 2× FLOPs with parameters, 1× without;
/// 2× bytes), plus a loss node without a module.
fn measured(truth: &DeviceProfile, dtype: DType, noise: &[f64]) -> Workload {
    measured_of(&ops(), truth, dtype, noise)
}

fn measured_of(specs: &[Spec], truth: &DeviceProfile, dtype: DType, noise: &[f64]) -> Workload {
    let mut modules: Vec<&str> = specs
        .iter()
        .map(|o| o.0)
        .filter(|m| *m != "model")
        .collect();
    modules.dedup();
    let mut nodes = Vec::new();
    let n = modules.len() as i64;
    for (i, m) in modules.iter().enumerate() {
        let (mut f, mut b) = (0.0, 0.0);
        for &(_, class, flops, inp, par, out) in specs.iter().filter(|o| o.0 == *m) {
            let bytes = inp + par + out;
            f += roofline(truth, class, flops, bytes, dtype);
            let factor = if par > 0.0 { 2.0 } else { 1.0 };
            b += roofline(truth, class, factor * flops, 2.0 * bytes, dtype);
        }
        let k = noise.get(i).copied().unwrap_or(1.0);
        let j = noise.get(i + modules.len()).copied().unwrap_or(1.0);
        for (id, t, back) in [(i as i64 + 1, f * k, 0), (n + 1 + i as i64 + 1, b * j, 1)] {
            nodes.push(
                json!({"id": id, "name": format!("{m}{}", if back == 1 { "_grad" } else { "" }),
                "module": m, "fpgaLatency": t, "cpuLatency": t, "size": 1.0,
                "supportedOnFpga": 1, "isBackwardNode": back, "colorClass": i + 1}),
            );
        }
    }
    nodes.push(
        json!({"id": n + 1, "name": "loss", "fpgaLatency": 1.0, "cpuLatency": 1.0, "size": 0.0,
        "supportedOnFpga": 1, "isBackwardNode": 0, "colorClass": n + 1}),
    );
    let doc =
        json!({"maxSizePerFPGA": 1e12, "maxFPGAs": 2, "maxCPUs": 0, "nodes": nodes, "edges": []});
    parse_workload(&doc.to_string()).expect("a valid measured workload")
}

fn truth() -> DeviceProfile {
    let mut p = find_profile("h100", &[]).unwrap();
    p.compute_efficiency = 0.37;
    p.memory_efficiency = 0.55;
    p.launch_overhead_ms = 0.012;
    p
}

#[test]
fn recovers_a_known_device_from_its_own_times() {
    let base = find_profile("h100", &[]).unwrap();
    for dtype in [DType::Bf16, DType::Fp32] {
        let cal = calibrate(&graph(), &measured(&truth(), dtype, &[]), &base, dtype).unwrap();
        let f = &cal.fitted;
        let rel = |a: f64, b: f64| (a / b - 1.0).abs();
        assert!(
            rel(f.compute_efficiency, 0.37) < 1e-4,
            "{dtype:?}: c = {}",
            f.compute_efficiency
        );
        assert!(
            rel(f.memory_efficiency, 0.55) < 1e-4,
            "{dtype:?}: μ = {}",
            f.memory_efficiency
        );
        assert!(
            rel(f.launch_overhead_ms, 0.012) < 1e-3,
            "{dtype:?}: L = {}",
            f.launch_overhead_ms
        );
        assert!(
            cal.fitted_error.max_abs_relative < 1e-4,
            "{:?}",
            cal.fitted_error
        );
        assert!(
            cal.base_error.rms_relative > 0.1,
            "the base profile is off: {:?}",
            cal.base_error
        );
        // 4 units of 2 passes, the loss and no operator of `model` itself.
        assert_eq!(cal.units.len(), 8);
        assert_eq!(cal.unmatched_ops, 1);
        assert_eq!(cal.unmatched_measured, vec!["loss (forward)".to_string()]);
        assert!(cal.compute_bound_ops > 0 && cal.memory_bound_ops > 0);
        let h0 = cal
            .units
            .iter()
            .find(|u| u.module == "model.h.0" && u.pass == Pass::Backward)
            .unwrap();
        assert_eq!(h0.ops, 3);
    }
}

#[test]
fn an_efficiency_nothing_depends_on_keeps_the_base_value() {
    // Only the two products: every operator on the compute side.
    let specs: Vec<Spec> = ops()
        .into_iter()
        .filter(|o| o.1 == OpClass::Matmul)
        .collect();
    let base = find_profile("h100", &[]).unwrap();
    let cal = calibrate(
        &graph_of(&specs),
        &measured_of(&specs, &truth(), DType::Bf16, &[]),
        &base,
        DType::Bf16,
    )
    .unwrap();
    assert_eq!(cal.memory_bound_ops, 0);
    assert_eq!(cal.fitted.memory_efficiency, base.memory_efficiency);
    assert!((cal.fitted.compute_efficiency / 0.37 - 1.0).abs() < 1e-3);
}

#[test]
fn mismatched_modules_are_an_error() {
    let mut g = graph();
    for op in &mut g.ops {
        op.module = Some(format!("other.{}", op.name));
    }
    let base = find_profile("h100", &[]).unwrap();
    let err = calibrate(
        &g,
        &measured(&truth(), DType::Bf16, &[]),
        &base,
        DType::Bf16,
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("model.h.0") && msg.contains("other.op0"),
        "{msg}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]
    #[test]
    fn the_fit_is_never_worse_than_the_base(noise in prop::collection::vec(0.2f64..5.0, 8)) {
        let base = find_profile("a100-80gb", &[]).unwrap();
        let cal = calibrate(&graph(), &measured(&truth(), DType::Bf16, &noise), &base, DType::Bf16).unwrap();
        let sq = |e: f64| e * e * cal.units.len() as f64;
        prop_assert!(sq(cal.fitted_error.rms_relative) <= sq(cal.base_error.rms_relative) * (1.0 + 1e-12));
        // The reported fitted times are the fitted profile's prices: recompute them here.
        for u in &cal.units {
            let expected: f64 = ops().into_iter().filter(|o| o.0 == u.module).map(|(_, class, flops, inp, par, out)| {
                let bytes = inp + par + out;
                match u.pass {
                    Pass::Forward => roofline(&cal.fitted, class, flops, bytes, DType::Bf16),
                    Pass::Backward => roofline(&cal.fitted, class, if par > 0.0 { 2.0 } else { 1.0 } * flops, 2.0 * bytes, DType::Bf16),
                }
            }).sum();
            prop_assert!((u.fitted_ms / expected - 1.0).abs() < 1e-12, "{} {:?}: {} vs {}", u.module, u.pass, u.fitted_ms, expected);
        }
    }
}

fn dnnplace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dnnplace"))
}

#[test]
fn the_command_writes_a_device_file_that_prices_as_reported() {
    // A generated GPT-2 priced on a known device is the "measurement" (large enough for
    // its products to be compute-bound); the command fits h100 to it and the device file it writes is read back by `generate`.
    let dir = tempfile::tempdir().unwrap();
    let truth_file = dir.path().join("truth.toml");
    let mut t = truth();
    t.name = "truth".into();
    std::fs::write(&truth_file, t.to_toml()).unwrap();
    let flags = [
        "--style", "gpt2", "--layers", "2", "--hidden", "1024", "--heads", "8", "--vocab", "1000",
        "--seq", "512", "--batch", "4", "--dtype", "bf16",
    ];
    let measured = dir.path().join("measured.json");
    let out = dnnplace()
        .args(["generate", "transformer", "--training", "--device-file"])
        .arg(&truth_file)
        .args(flags)
        .arg("--out")
        .arg(&measured)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fitted_file = dir.path().join("fitted.toml");
    let out = dnnplace()
        .arg("calibrate")
        .arg(&measured)
        .args(flags)
        .args(["--device", "h100", "--json", "--out"])
        .arg(&fitted_file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cal: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Every operator is its own unit here: the fit is exact.
    assert!(
        cal["fittedError"]["maxAbsRelative"].as_f64().unwrap() < 1e-4,
        "{}",
        cal["fittedError"]
    );
    let fitted = DeviceProfile::read(&fitted_file).unwrap();
    assert_eq!(fitted.name, "h100-calibrated");
    assert_eq!(
        fitted.peak_fp16_flops,
        find_profile("h100", &[]).unwrap().peak_fp16_flops
    );
    assert!(
        (fitted.compute_efficiency / 0.37 - 1.0).abs() < 1e-3,
        "{}",
        fitted.compute_efficiency
    );
    // Bad input: a measurement of another model.
    let out = dnnplace()
        .arg("calibrate")
        .arg(&measured)
        .args([
            "--style", "llama", "--layers", "2", "--hidden", "256", "--heads", "4", "--device",
            "h100",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("do not match") && stderr.contains("measured.json"),
        "{stderr}"
    );
}

/// The H100 measurements of docs/measured/h100 (python/bench/gpu_profile.py on an NVIDIA
/// H100 80GB HBM3, GPT-2 124M shape, batch 8, sequence 1024): the command refits the
/// recorded device files, and the fit is checked against the measurement itself.
#[test]
fn the_h100_measurements_calibrate_as_recorded() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/measured/h100");
    for dtype in ["fp32", "bf16"] {
        let out = dnnplace()
            .arg("calibrate")
            .arg(dir.join(format!("gpt2-{dtype}-block.json")))
            .args([
                "--style", "gpt2", "--layers", "12", "--hidden", "768", "--heads", "12", "--vocab",
                "50257",
            ])
            .args([
                "--seq", "1024", "--batch", "8", "--device", "h100", "--json", "--dtype", dtype,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let cal: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let recorded =
            DeviceProfile::read(&dir.join(format!("h100-{dtype}-calibrated.toml"))).unwrap();
        for key in [
            "compute_efficiency",
            "memory_efficiency",
            "launch_overhead_ms",
        ] {
            let now = cal["fitted"][key].as_f64().unwrap();
            let then = match key {
                "compute_efficiency" => recorded.compute_efficiency,
                "memory_efficiency" => recorded.memory_efficiency,
                _ => recorded.launch_overhead_ms,
            };
            assert!(
                (now / then - 1.0).abs() < 1e-9,
                "{dtype} {key}: {now} vs recorded {then}"
            );
        }
        let err = |which: &str, k: &str| cal[which][k].as_f64().unwrap();
        assert!(err("fittedError", "rmsRelative") < err("baseError", "rmsRelative"));
        assert!(
            err("fittedError", "totalRelative").abs() <= err("baseError", "totalRelative").abs()
        );
        // 32 units: 12 blocks, wte, wpe, ln_f, lm_head, each forward and backward; dropout
        // and the loss have no operator of the model.
        assert_eq!(cal["units"].as_array().unwrap().len(), 32);
        if dtype == "fp32" {
            // Against the measurement (median spread 4.8%): after calibration every
            // block and the head are within 10% of their measured time.
            for u in cal["units"].as_array().unwrap() {
                let m = u["module"].as_str().unwrap();
                if m.starts_with("transformer.h.") || m == "lm_head" {
                    let e =
                        u["fittedMs"].as_f64().unwrap() / u["measuredMs"].as_f64().unwrap() - 1.0;
                    assert!(e.abs() < 0.10, "{m} {}: {:+.1}%", u["pass"], 100.0 * e);
                }
            }
        }
    }
}

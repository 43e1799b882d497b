//! Every light ONNX model of `../shared/workloads/onnx` imports, validates and plans with
//! the DP on 2, 4 and 8 accelerators; ResNet-50's FLOPs match the published count.
//! Skipped, with the reason printed, when the folder is absent.

use std::path::{Path, PathBuf};

use dnnplace::costmodel::onnx::{import_file, ImportOptions};
use dnnplace::costmodel::{find_profile, to_workload, CostSettings, DType};
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
        let imported = import_file(&path, &ImportOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(imported.warnings.is_empty(), "{name}: {:?}", imported.warnings);
        let g = &imported.graph;
        assert!(g.macs() > 1e8, "{name}: {} MACs", g.macs());
        for k in [2, 4, 8] {
            let w = to_workload(g, &settings(k, false)).unwrap_or_else(|e| panic!("{name}: {e}"));
            let plan = solve::plan(&Dp, &Problem::throughput(&w)).unwrap_or_else(|e| panic!("{name} k={k}: {e}"));
            assert_eq!(plan.outcome.status, Status::Optimal, "{name} k={k}");
            let total: f64 = w.nodes().iter().map(|n| n.fpga_latency).sum();
            let tps = plan.evaluation.as_ref().unwrap().max_load;
            assert!(tps > 0.0 && tps <= total + 1e-9, "{name} k={k}: TPS {tps} vs total {total}");
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
        let opts = ImportOptions { training: true, ..Default::default() };
        let g = import_file(&dir.join(format!("{name}.onnx")), &opts).unwrap().graph;
        let w = to_workload(&g, &settings(4, true)).unwrap();
        assert!(w.is_training());
        let plan = solve::plan(&Dp, &Problem::throughput(&w)).unwrap();
        assert_eq!(plan.outcome.status, Status::Optimal, "{name}");
    }
}

#[test]
fn resnet50_matches_the_published_flop_count() {
    let Some(dir) = onnx_dir() else { return };
    let g = import_file(&dir.join("light_resnet50.onnx"), &ImportOptions::default()).unwrap().graph;
    // Published: about 4.1 G multiply-adds (≈ 8.2 GFLOPs) per 224×224 image.
    let gmacs = g.macs() / 1e9;
    let gflops = g.flops() / 1e9;
    println!("ResNet-50: {gmacs:.4} GMACs, {gflops:.4} GFLOPs, {:.2} M parameters", g.param_bytes() / 4e6);
    assert!((4.0..4.2).contains(&gmacs), "{gmacs} GMACs");
    assert!((8.0..8.4).contains(&gflops), "{gflops} GFLOPs");
    // 25.5 M parameters (conv, BN, fc).
    assert!((25.0..26.5).contains(&(g.param_bytes() / 4e6)));
    // Batch 8 scales the work by 8.
    let g8 = import_file(&dir.join("light_resnet50.onnx"), &ImportOptions { batch: Some(8), ..Default::default() }).unwrap().graph;
    assert!((g8.macs() / g.macs() - 8.0).abs() < 1e-12);
}

#[test]
fn batch_override_scales_every_light_model_exactly() {
    let Some(dir) = onnx_dir() else { return };
    for name in MODELS {
        let path = dir.join(format!("{name}.onnx"));
        let one = import_file(&path, &ImportOptions::default()).unwrap().graph;
        let opts = ImportOptions { batch: Some(4), dtype: DType::Fp16, ..Default::default() };
        let four = import_file(&path, &opts).unwrap();
        assert!(four.warnings.is_empty(), "{name}: {:?}", four.warnings);
        // Work scales with the batch; parameters do not (and halve in fp16).
        assert!((four.graph.macs() / one.macs() - 4.0).abs() < 1e-12, "{name}");
        assert_eq!(four.graph.param_bytes() * 2.0, one.param_bytes(), "{name}");
    }
}

//! Generated transformers validate and plan with the DP for 4–64 layers; the shipped
//! example is what the generator produces; and (ignored, prints a table) our BERT-24 costs
//! against the published profiled layer workload.

use std::path::Path;

use dnnplace::costmodel::{find_profile, to_workload, transformer_graph, CostSettings, DType, Head, TransformerSpec};
use dnnplace::io::read_workload;
use dnnplace::solve::{self, dp::Dp, Problem, Status};

fn settings(device: &str, dtype: DType, training: bool, accelerators: usize) -> CostSettings {
    CostSettings {
        accelerator: find_profile(device, &[]).unwrap(),
        cpu: find_profile("cpu-core", &[]).unwrap(),
        dtype,
        training,
        accelerators,
        cpus: 1,
    }
}

#[test]
fn transformers_of_4_to_64_layers_plan() {
    for layers in [4, 8, 16, 32, 64] {
        for training in [false, true] {
            let spec = TransformerSpec::bert(layers, 256, 4, 128, 4);
            let g = transformer_graph(&spec, DType::Fp16).unwrap();
            let w = to_workload(&g, &settings("a100-80gb", DType::Fp16, training, 8)).unwrap();
            assert_eq!(w.len(), if training { 2 * g.ops.len() - 1 } else { g.ops.len() });
            let plan = solve::plan(&Dp, &Problem::throughput(&w)).unwrap();
            assert_eq!(plan.outcome.status, Status::Optimal);
            // 14 operators per block plus input, embeddings (2) and the BERT head (5); the
            // ideals of a block: its chain, with the Q/K/V fan-out adding a handful.
            assert_eq!(g.ops.len(), 14 * layers + 3 + 5);
            let ideals = plan.outcome.stats.ideals.unwrap();
            assert!(ideals <= 25 * layers + 20, "{layers} layers: {ideals} ideals");
            let total: f64 = w.nodes().iter().map(|n| n.fpga_latency).sum();
            let tps = plan.evaluation.as_ref().unwrap().max_load;
            assert!(tps < total, "{layers} layers: TPS {tps} vs one device {total}");
        }
    }
}

#[test]
fn gpt_head_and_no_head() {
    let mut spec = TransformerSpec::bert(4, 128, 4, 64, 2);
    spec.head = Head::Lm;
    let g = transformer_graph(&spec, DType::Fp32).unwrap();
    assert_eq!(g.ops.last().unwrap().name, "lm_head");
    spec.head = Head::None;
    let g = transformer_graph(&spec, DType::Fp32).unwrap();
    assert_eq!(g.ops.last().unwrap().name, "layer4.mlp_layernorm");
}

#[test]
fn the_shipped_example_is_what_the_generator_makes() {
    // examples/README.md records the command; this is the same call.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bert-tiny.json");
    let shipped = read_workload(&path).unwrap();
    let mut spec = TransformerSpec::bert(6, 512, 8, 128, 8);
    spec.vocab = 8192;
    spec.head = Head::Lm;
    let g = transformer_graph(&spec, DType::Fp32).unwrap();
    let w = to_workload(&g, &settings("a100-80gb", DType::Fp32, false, 4)).unwrap();
    assert_eq!(w.len(), shipped.len());
    assert_eq!(w.edges().len(), shipped.edges().len());
    let close = |x: f64, y: f64| (x - y).abs() <= 1e-12 * x.abs().max(1.0);
    for (a, b) in w.nodes().iter().zip(shipped.nodes()) {
        assert_eq!((a.id, &a.name), (b.id, &b.name));
        assert!(close(a.fpga_latency, b.fpga_latency) && close(a.cpu_latency, b.cpu_latency), "node {}", a.id);
        assert!(close(a.size_bytes, b.size_bytes), "node {}: size {} vs {}", a.id, a.size_bytes, b.size_bytes);
    }
    for (v, _) in w.nodes().iter().enumerate() {
        assert!(close(w.out_cost(v), shipped.out_cost(v)), "out cost of node {}", v + 1);
    }
    let plan = solve::plan(&Dp, &Problem::throughput(&shipped)).unwrap();
    assert_eq!(plan.outcome.status, Status::Optimal);
}

/// `cargo test --release --test transformer_workloads -- --ignored --nocapture`
/// prints our BERT-24 (h 1024, 16 heads, seq 512, batch 2, V100, fp32) against the
/// profiled `paper/throughput/layer/bert24_inference.json`, per layer type.
#[test]
#[ignore = "prints a comparison table; needs ../shared"]
fn bert24_against_the_profiled_layer_workload() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/workloads/paper/throughput/layer/bert24_inference.json");
    if !path.is_file() {
        println!("skipped: {} is absent", path.display());
        return;
    }
    let profiled = read_workload(&path).unwrap();
    let by_id = |id: i64| profiled.node(profiled.index_of(id).unwrap()).clone();
    let out_cost = |id: i64| profiled.out_cost(profiled.index_of(id).unwrap());
    let spec = TransformerSpec::bert(24, 1024, 16, 512, 2);
    let g = transformer_graph(&spec, DType::Fp32).unwrap();
    let w = to_workload(&g, &settings("v100", DType::Fp32, false, 6)).unwrap();
    // Our nodes grouped like the profiled layers (ids follow the operator order).
    let sum = |pred: &dyn Fn(&dnnplace::costmodel::Op) -> bool| {
        let mut acc = (0.0, 0.0, 0.0);
        for (i, op) in g.ops.iter().enumerate() {
            if pred(op) {
                let n = w.node(i);
                acc.0 += n.fpga_latency;
                acc.1 += n.cpu_latency;
                acc.2 += op.cost.param_bytes;
            }
        }
        acc
    };
    let embed = sum(&|o| o.layer_id == Some(0) && !o.is_input);
    let layer_sum = sum(&|o| matches!(o.layer_id, Some(l) if (1..=24).contains(&l)));
    let layer = (layer_sum.0 / 24.0, layer_sum.1 / 24.0, layer_sum.2 / 24.0);
    let pooler = sum(&|o| o.name == "pooler");
    let mlm = sum(&|o| o.name.starts_with("mlm."));
    let mean = |ids: &mut dyn Iterator<Item = i64>| {
        let v: Vec<_> = ids.map(by_id).collect();
        let k = v.len() as f64;
        (v.iter().map(|n| n.fpga_latency).sum::<f64>() / k, v.iter().map(|n| n.cpu_latency).sum::<f64>() / k)
    };
    let rows = [
        ("embeddings (node 3)", embed, mean(&mut [3].into_iter())),
        ("encoder layer (nodes 5-28, mean)", layer, mean(&mut (5..=28))),
        ("pooler (node 29)", pooler, mean(&mut [29].into_iter())),
        ("MLM head (node 30)", mlm, mean(&mut [30].into_iter())),
    ];
    println!("| layer type | ours fpga ms | profiled fpga ms | ratio | ours cpu ms | profiled cpu ms | ratio |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (name, ours, prof) in rows {
        println!(
            "| {name} | {:.3} | {:.3} | {:.2} | {:.1} | {:.1} | {:.1} |",
            ours.0,
            prof.0,
            ours.0 / prof.0,
            ours.1,
            prof.1,
            ours.1 / prof.1
        );
    }
    // Sizes: ours = parameters + output; profiled the same convention.
    let layer_size: f64 = g.ops.iter().enumerate().filter(|(_, o)| o.layer_id == Some(1)).map(|(_, o)| o.cost.param_bytes).sum::<f64>()
        + 2.0 * 512.0 * 1024.0 * 4.0;
    println!("layer size: ours {layer_size} bytes (params + output), profiled {}", by_id(5).size_bytes);
    let ours_edge = 1e3 * 2.0 * 512.0 * 1024.0 * 4.0 / find_profile("v100", &[]).unwrap().host_link_bytes_per_s;
    println!("layer output transfer (4 MiB): ours {ours_edge:.4} ms, profiled {:.6} (ratio {:.0})", out_cost(5), ours_edge / out_cost(5));
}

//! `plan WORKLOAD.json --parallel 3d` (issue 26): a MODEL.md training workload's layers as
//! the 3D chain, with per-node `tensorParallel` options.
//!
//! - the reduction: with no options, `--tensor-parallel 1 --data-parallel 1` on `k`
//!   identical GPUs gives the TPS of the contiguous planner at layer granularity
//!   (`plan --granularity layer`) on generated and hand-made workloads, through the binary;
//! - one instance's chain and score at `t = 2` recomputed by hand from the file's numbers
//!   (each all-reduce priced on its own);
//! - the uniform and free searches against the brute force on random small workloads with
//!   random TP options;
//! - bad workloads, options and flags exit 2 naming the node, field or flag.

mod common;

use common::Pick;
use std::path::Path;
use std::process::{Command, Output};

use dnnplace::costmodel::workload_chain::{common_degrees, workload_chain};
use dnnplace::io::cluster_resolve::cluster_and_profiles;
use dnnplace::io::parse_workload;
use dnnplace::io::tensor_parallel_json::parse_tensor_parallel;
use dnnplace::model::parallel::{all_reduce_ms, transfer_ms, Layout, Topology, Uniform, Zero};
use dnnplace::model::schedule::Schedule;
use dnnplace::score::parallel::score_layout;
use dnnplace::solve::budget::Budget;
use dnnplace::solve::parallel::brute_force::{brute_force_free, brute_force_uniform};
use dnnplace::solve::parallel::free::plan_free;
use dnnplace::solve::parallel::{plan_uniform, Objective, Space};
use dnnplace::solve::Status;
use proptest::prelude::*;
use serde_json::{json, Value};

fn dnnplace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dnnplace"))
}

/// One node's memory fields, random.
fn memory(r: &mut Pick, scale: f64) -> (f64, Value) {
    let parts = [
        r.real(0.0, 4e6) * scale,
        r.real(0.0, 4e6) * scale,
        r.real(0.0, 8e6) * scale,
        r.real(0.0, 2e6) * scale,
    ];
    let rest = r.real(0.0, 1e6) * scale;
    let size = parts.iter().sum::<f64>() + rest;
    (
        size,
        json!({"weightBytes": parts[0], "gradientBytes": parts[1],
               "optimizerBytes": parts[2], "activationBytes": parts[3]}),
    )
}

/// A random training workload: `L` layers, each a chain of 1–2 forward operators with one
/// backward node each (same colour class), gradients flowing back layer by layer. With
/// `options`, every node gets TP options of degree 2 (and 4 for all but, at times, one
/// node), random times, memory and all-reduces. Latencies for `h100` are the node's own
/// (so the cluster's times are exactly the file's).
fn random_workload(r: &mut Pick, options: bool) -> Value {
    let layers = 1 + r.next(4) as i64;
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    let mut forward: Vec<Vec<i64>> = Vec::new();
    let mut id = 0;
    for _ in 0..layers {
        let ops = 1 + r.next(2);
        let mut ids = Vec::new();
        for _ in 0..ops {
            id += 1;
            ids.push(id);
        }
        forward.push(ids);
    }
    let mut backward_of = std::collections::BTreeMap::new();
    for ids in &forward {
        for &f in ids {
            id += 1;
            backward_of.insert(f, id);
        }
    }
    let skip4 = options && r.next(3) == 0;
    let skipped = 1 + r.next(id as u64) as i64;
    for (l, ids) in forward.iter().enumerate() {
        for &f in ids {
            for (v, back) in [(f, false), (backward_of[&f], true)] {
                let time = r.real(0.01, 2.0);
                let (size, mem) = memory(r, 1.0);
                let mut node = json!({"id": v, "fpgaLatency": time, "cpuLatency": 10.0,
                    "size": size, "isBackwardNode": back, "colorClass": f, "layerId": l,
                    "latencies": {"h100": time}});
                for (k, x) in mem.as_object().unwrap() {
                    node[k] = x.clone();
                }
                if options {
                    let mut list = Vec::new();
                    for t in [2usize, 4] {
                        if t == 4 && skip4 && v == skipped {
                            continue;
                        }
                        let tf = t as f64;
                        let (osize, omem) = memory(r, 1.0 / tf);
                        let mut o = json!({"degree": t, "fpgaLatency": time / tf * r.real(0.6, 1.6),
                            "size": osize});
                        for (k, x) in omem.as_object().unwrap() {
                            o[k] = x.clone();
                        }
                        let n = r.next(3) as usize;
                        o["allReduceBytes"] =
                            json!((0..n).map(|_| r.real(0.0, 4e7)).collect::<Vec<_>>());
                        list.push(o);
                    }
                    node["tensorParallel"] = json!(list);
                }
                nodes.push(node);
            }
        }
        let cost = |r: &mut Pick| r.real(0.001, 0.5);
        for w in ids.windows(2) {
            edges.push(json!({"sourceId": w[0], "destId": w[1], "cost": cost(r)}));
            edges.push(json!({"sourceId": backward_of[&w[1]], "destId": backward_of[&w[0]], "cost": cost(r)}));
        }
        for &f in ids {
            edges.push(json!({"sourceId": f, "destId": backward_of[&f], "cost": cost(r)}));
        }
        if let Some(next) = forward.get(l + 1) {
            let (a, b) = (*ids.last().unwrap(), next[0]);
            edges.push(json!({"sourceId": a, "destId": b, "cost": cost(r)}));
            edges.push(
                json!({"sourceId": backward_of[&b], "destId": backward_of[&a], "cost": cost(r)}),
            );
        }
    }
    // MODEL.md: all out-edges of a node carry one cost; the first one's wins.
    let mut first = std::collections::BTreeMap::new();
    for e in &mut edges {
        let c = *first
            .entry(e["sourceId"].as_i64().unwrap())
            .or_insert(e["cost"].as_f64().unwrap());
        e["cost"] = json!(c);
    }
    json!({"maxSizePerFPGA": 8e10, "maxFPGAs": 4, "maxCPUs": 0,
           "reference": {"profile": "h100", "speed": 1.0, "hostBytesPerS": 63e9},
           "nodes": nodes, "edges": edges})
}

/// A cluster file: one machine of `k` H100s, the host link at the reference's 63e9 bytes/s
/// with no latency and no peer link, MODEL.md's device set on a cluster.
fn model_md_cluster(dir: &Path, k: usize) -> String {
    let path = dir.join(format!("md{k}.toml"));
    std::fs::write(
        &path,
        format!(
            "[[machines]]\nname = \"box\"\ncpus = 0\nhost = {{ bytes_per_s = 63e9, latency_ms = 0 }}\npeer = \"none\"\naccelerators = [{{ profile = \"h100\", count = {k} }}]\n"
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

fn tps(text: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.starts_with("TPS (max load):"))
        .unwrap_or_else(|| panic!("no TPS in {text}"));
    line.split_whitespace().nth(3).unwrap().parse().unwrap()
}

/// `--parallel 3d` at `t = d = 1` against `plan --granularity layer` on `k` accelerators.
fn reduction(workload: &Path, cluster: &str) -> (f64, f64) {
    let w = workload.to_str().unwrap();
    let layer = dnnplace()
        .args(["plan", w, "--granularity", "layer"])
        .output()
        .unwrap();
    assert!(
        layer.status.success(),
        "{}",
        String::from_utf8_lossy(&layer.stderr)
    );
    let three = dnnplace()
        .args([
            "plan",
            w,
            "--parallel",
            "3d",
            "--cluster",
            cluster,
            "--global-batch",
            "1",
        ])
        .args(["--tensor-parallel", "1", "--data-parallel", "1", "--json"])
        .output()
        .unwrap();
    assert!(
        three.status.success(),
        "{}",
        String::from_utf8_lossy(&three.stderr)
    );
    let j: Value = serde_json::from_slice(&three.stdout).unwrap();
    assert_eq!(j["outcome"], "optimal", "{j}");
    (
        j["value"].as_f64().unwrap(),
        tps(&String::from_utf8_lossy(&layer.stdout)),
    )
}

/// The reduction on generated transformer training workloads (2–4 GPUs) and on hand-made
/// random ones: the same TPS (the layer planner prints 9 decimals).
#[test]
fn one_device_per_stage_is_the_contiguous_layer_planner() {
    let dir = tempfile::tempdir().unwrap();
    for (style, layers, k) in [
        ("gpt2", 4, 4),
        ("llama", 3, 3),
        ("bert", 5, 2),
        ("gpt2", 2, 3),
    ] {
        let w = dir.path().join(format!("{style}{layers}.json"));
        let out = dnnplace()
            .args([
                "generate",
                "transformer",
                "--style",
                style,
                "--layers",
                &layers.to_string(),
            ])
            .args([
                "--hidden",
                "128",
                "--heads",
                "4",
                "--seq",
                "64",
                "--training",
            ])
            .args([
                "--device",
                "h100",
                "--cpus",
                "0",
                "--accelerators",
                &k.to_string(),
            ])
            .args(["--out", w.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (three, layer) = reduction(&w, &model_md_cluster(dir.path(), k));
        assert!(
            (three - layer).abs() <= 5e-10 + 1e-9 * layer,
            "{style}: {three} vs {layer}"
        );
    }
    for seed in 0..6u64 {
        let mut r = Pick(seed);
        let mut w = random_workload(&mut r, false);
        let k = 1 + r.next(4) as usize;
        w["maxFPGAs"] = json!(k);
        let path = dir.path().join(format!("random{seed}.json"));
        std::fs::write(&path, w.to_string()).unwrap();
        let (three, layer) = reduction(&path, &model_md_cluster(dir.path(), k));
        assert!(
            (three - layer).abs() <= 5e-10 + 1e-9 * layer,
            "seed {seed}: {three} vs {layer}"
        );
    }
}

const HAND: &str = r#"{"maxSizePerFPGA": 1e12, "maxFPGAs": 2, "maxCPUs": 0,
  "reference": {"profile": "h100", "speed": 1.0, "hostBytesPerS": 1e9},
  "nodes": [
    {"id": 1, "fpgaLatency": 2.0, "cpuLatency": 1, "size": 100, "weightBytes": 60, "layerId": 0, "colorClass": 1,
     "latencies": {"h100": 2.0},
     "tensorParallel": [{"degree": 2, "fpgaLatency": 1.2, "size": 55, "weightBytes": 30, "allReduceBytes": [1e6, 3e6]}]},
    {"id": 2, "fpgaLatency": 4.0, "cpuLatency": 1, "size": 10, "layerId": 1, "colorClass": 2,
     "latencies": {"h100": 4.0},
     "tensorParallel": [{"degree": 2, "fpgaLatency": 2.5, "gradientBytes": 4, "activationBytes": 2}]},
    {"id": 3, "fpgaLatency": 3.0, "cpuLatency": 1, "isBackwardNode": true, "layerId": 1, "colorClass": 2,
     "latencies": {"h100": 3.0},
     "tensorParallel": [{"degree": 2, "fpgaLatency": 1.0, "allReduceBytes": [8e6]}]},
    {"id": 4, "fpgaLatency": 1.0, "cpuLatency": 1, "isBackwardNode": true, "layerId": 0, "colorClass": 1,
     "latencies": {"h100": 1.0},
     "tensorParallel": [{"degree": 2, "fpgaLatency": 0.7, "size": 8, "gradientBytes": 8}]}],
  "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5}, {"sourceId": 2, "destId": 3, "cost": 0.25},
            {"sourceId": 3, "destId": 4, "cost": 0.125}]}"#;

/// One instance by hand: the chain's sums at `t = 2` from the file's numbers, and a
/// two-stage `t = 2` layout's stage times with every all-reduce priced on its own.
#[test]
fn a_hand_instance_adds_up() {
    let w = parse_workload(HAND).unwrap();
    let options = parse_tensor_parallel(HAND, &w).unwrap();
    assert_eq!(common_degrees(&w, &options), vec![1, 2]);
    let (cluster, _) = cluster_and_profiles("2x2xh100", &[]).unwrap();
    let chain = workload_chain(&w, &options, (&cluster, 0), &[1, 2], (1, 1e15)).unwrap();
    let h100_speed = cluster.types()[0].speed;
    assert!(h100_speed > 0.0);
    let (l0, l1) = (&chain.units[0].costs, &chain.units[1].costs);
    // t = 1: the nodes' own numbers; the rest of a size (without a breakdown: all of it)
    // counts as weights.
    assert_eq!((l0[0].forward_ms, l0[0].backward_ms), (2.0, 1.0));
    assert_eq!((l1[0].forward_ms, l1[0].backward_ms), (4.0, 3.0));
    assert_eq!(l0[0].weight_bytes, 100.0);
    assert_eq!(l1[0].weight_bytes, 10.0);
    // t = 2: node 1 1.2 ms, 30 B weights + 25 B rest, two forward all-reduces of 4e6 B in
    // all; node 4 0.7 ms, 8 B gradients; node 2 2.5 ms, 4 + 2 B; node 3 1.0 ms, one
    // backward all-reduce of 8e6 B.
    assert_eq!((l0[1].forward_ms, l0[1].backward_ms), (1.2, 0.7));
    assert_eq!((l0[1].weight_bytes, l0[1].gradient_bytes), (55.0, 8.0));
    assert_eq!(
        (l0[1].tp_forward_all_reduces, l0[1].tp_backward_all_reduces),
        (2, 0)
    );
    assert_eq!((l1[1].forward_ms, l1[1].backward_ms), (2.5, 1.0));
    assert_eq!((l1[1].gradient_bytes, l1[1].activation_bytes), (4.0, 2.0));
    assert_eq!(
        (l1[1].tp_forward_all_reduces, l1[1].tp_backward_all_reduces),
        (0, 1)
    );
    // The cut: node 1 forward (0.5 ms at 1e9 B/s = 5e5 B), node 3 backward (1.25e5 B).
    assert_eq!(chain.cuts[1].forward, vec![5e5]);
    assert_eq!(chain.cuts[1].backward, vec![1.25e5]);
    let topo = Topology::from_cluster(&cluster).unwrap();
    let cfg = Uniform {
        micro_batch: 1,
        tensor_parallel: 2,
        data_parallel: 1,
        zero: Zero::Off,
        recompute: false,
        stages: 2,
    };
    let layout = Layout::uniform(2, &[1], &cfg, 1, Schedule::OneFOneB);
    let s = score_layout(&chain, &topo, &layout).unwrap();
    let peer = topo.peer.unwrap();
    let ar = |x: f64| all_reduce_ms(peer, x, 2);
    // Stage 0 on machine 0, stage 1 on machine 1: the cut runs on the network.
    let net = topo.network;
    let stage0 = 1.2 + 0.7 + ar(1e6) + ar(3e6) + transfer_ms(net, 1.25e5);
    let stage1 = 2.5 + 1.0 + ar(8e6) + transfer_ms(net, 5e5);
    assert!(
        (s.stages[0].micro_batch_ms - stage0).abs() < 1e-12,
        "{:?}",
        s.stages[0]
    );
    assert!(
        (s.stages[1].micro_batch_ms - stage1).abs() < 1e-12,
        "{:?}",
        s.stages[1]
    );
    assert_eq!(s.time_per_sample_ms, stage0.max(stage1));
}

/// The random instance of `seed`: its chain (at 1 and the nodes' common degrees), a
/// topology and a space; `None` when the options leave only `t = 1` at random.
fn instance(
    seed: u64,
) -> (
    Vec<dnnplace::model::parallel::ChainCosts>,
    Topology,
    Space,
    Objective,
) {
    let mut r = Pick(seed);
    let text = random_workload(&mut r, true).to_string();
    let w = parse_workload(&text).unwrap();
    let options = parse_tensor_parallel(&text, &w).unwrap();
    let degrees = common_degrees(&w, &options);
    let per = r.of(&[1usize, 2, 4]);
    let machines = 1 + r.next(3) as usize;
    let (cluster, _) = cluster_and_profiles(&format!("{machines}x{per}xh100"), &[]).unwrap();
    let mut topo = Topology::from_cluster(&cluster).unwrap();
    if r.next(3) == 0 {
        topo.peer = None;
    }
    let b = r.of(&[1usize, 2]);
    let chain = workload_chain(&w, &options, (&cluster, 0), &degrees, (b, 1e15)).unwrap();
    let resident: f64 = chain
        .units
        .iter()
        .map(|u| u.costs[0].weight_bytes + u.costs[0].gradient_bytes + u.costs[0].optimizer_bytes)
        .sum();
    topo.memory_bytes = resident * r.of(&[0.1, 0.3, 0.6, 1.0, 3.0]);
    let tensor_parallel: Vec<usize> = degrees
        .into_iter()
        .filter(|t| per.is_multiple_of(*t))
        .collect();
    let space = Space {
        tensor_parallel,
        data_parallel: None,
        stages: None,
        zero: match r.next(3) {
            0 => Zero::ALL.to_vec(),
            1 => vec![Zero::Off, Zero::Gradients, Zero::Parameters],
            _ => vec![r.of(&Zero::ALL)],
        },
        recompute: r.of(&[None, Some(false), Some(true)]),
        micro_batches: vec![b],
        global_batch: b * r.of(&[2, 4, 6]),
        schedule: r.of(&[Schedule::GPipe, Schedule::OneFOneB]),
        overlap_grad_reduce: false,
        max_devices: topo.devices(),
    };
    let objective = r.of(&[Objective::Iteration, Objective::TimePerSample]);
    (vec![chain], topo, space, objective)
}

/// The uniform and the free search against the brute force on one random instance; the
/// plan's `t` when there is one.
fn compare(seed: u64) -> Result<Option<usize>, TestCaseError> {
    let (chains, topo, space, objective) = instance(seed);
    let found = plan_uniform(&chains, &topo, &space, objective, &Budget::unlimited()).unwrap();
    let oracle = brute_force_uniform(&chains, &topo, &space, objective);
    let t = match (&found.plan, &oracle) {
        (None, None) => {
            let infeasible = matches!(found.status, Status::Infeasible { .. });
            prop_assert!(infeasible, "status {:?}", found.status);
            None
        }
        (Some(plan), Some((best, v))) => {
            prop_assert_eq!(found.status.clone(), Status::Optimal);
            let tol = 1e-9 * v.abs();
            prop_assert!(
                (found.value - v).abs() <= tol,
                "uniform {} vs brute force {v} ({:?} vs {best:?})",
                found.value,
                plan.layout
            );
            prop_assert!(found.bound <= found.value + tol);
            Some(plan.layout.stages[0].tensor_parallel)
        }
        (a, b) => {
            prop_assert!(false, "uniform {:?} vs brute force {:?}", a.is_some(), b);
            None
        }
    };
    let free = plan_free(&chains, &topo, &space, None, &Budget::unlimited()).unwrap();
    let oracle = brute_force_free(&chains, &topo, &space);
    match (&free.plan, &oracle) {
        (None, None) => {}
        (Some(_), Some((_, v))) => {
            let tol = 1e-9 * v.abs();
            prop_assert!(
                (free.value - v).abs() <= tol,
                "free {} vs brute force {v}",
                free.value
            );
            prop_assert!(free.bound <= free.value + tol);
        }
        (a, b) => prop_assert!(false, "free {:?} vs brute force {:?}", a.is_some(), b),
    }
    Ok(t)
}

/// The random instances have plans, some with `t > 1`.
#[test]
fn the_random_workloads_cover_tensor_parallelism() {
    let plans: Vec<usize> = (0..60).filter_map(|s| compare(s).unwrap()).collect();
    let tp = plans.iter().filter(|&&t| t > 1).count();
    println!(
        "{} of 60 random workloads have a plan; t > 1: {tp}",
        plans.len()
    );
    assert!(
        plans.len() >= 15 && tp >= 3,
        "{} plans, {tp} with t > 1",
        plans.len()
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]
    #[test]
    fn workload_searches_equal_brute_force(seed in any::<u64>()) {
        compare(seed)?;
    }
}

fn plan_file(dir: &Path, w: &Value, extra: &[&str]) -> Output {
    let path = dir.join("w.json");
    std::fs::write(&path, w.to_string()).unwrap();
    dnnplace()
        .args([
            "plan",
            path.to_str().unwrap(),
            "--parallel",
            "3d",
            "--cluster",
            "1x4xh100",
        ])
        .args(["--global-batch", "4"])
        .args(extra)
        .output()
        .unwrap()
}

/// Bad workloads, options and flags exit 2 naming what is wrong; the hand instance plans.
#[test]
fn bad_workloads_and_options_exit_2_naming_the_node() {
    let dir = tempfile::tempdir().unwrap();
    let hand: Value = serde_json::from_str(HAND).unwrap();
    let ok = plan_file(dir.path(), &hand, &["--json"]);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut w = hand.clone();
        f(&mut w);
        w
    };
    let cases: Vec<(Value, Vec<&str>, &str)> = vec![
        (
            edit(&|w| w["nodes"][0]["tensorParallel"][0]["fpgaLatency"] = json!(-1.0)),
            vec![],
            "node 1: nodes[0].tensorParallel[0].fpgaLatency",
        ),
        (
            edit(&|w| w["nodes"][1]["tensorParallel"][0]["size"] = json!(1.0)),
            vec![],
            "node 2: nodes[1].tensorParallel[0].size",
        ),
        (
            edit(&|w| {
                let o = w["nodes"][0]["tensorParallel"][0].clone();
                w["nodes"][0]["tensorParallel"]
                    .as_array_mut()
                    .unwrap()
                    .push(o);
            }),
            vec![],
            "degree 2 is given twice",
        ),
        (
            edit(&|w| w["nodes"][2]["tensorParallel"] = json!([{"degree": 1, "fpgaLatency": 3.5}])),
            vec![],
            "node 3: nodes[2].tensorParallel[0].degree: the option of degree 1 must repeat",
        ),
        (
            edit(&|w| w["nodes"][3]["tensorParallel"][0]["degree"] = json!(3)),
            vec![],
            "node 4: tensorParallel degree 3",
        ),
        (
            edit(&|w| {
                w["nodes"][3]
                    .as_object_mut()
                    .unwrap()
                    .remove("layerId")
                    .map(|_| ())
                    .unwrap()
            }),
            vec![],
            "node 4: no layerId",
        ),
        (
            edit(&|w| {
                for n in w["nodes"].as_array_mut().unwrap() {
                    n["isBackwardNode"] = json!(false);
                }
                w["edges"] = json!([{"sourceId": 1, "destId": 2, "cost": 0.5}]);
            }),
            vec![],
            "no backward node",
        ),
        (
            edit(&|w| {
                w["nodes"].as_array_mut().unwrap().push(json!({"id": 5, "fpgaLatency": 1.0, "cpuLatency": 1, "layerId": 2, "latencies": {"h100": 1.0}}));
                w["edges"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"sourceId": 1, "destId": 5, "cost": 0.5}));
            }),
            vec![],
            "edge 1 -> 5: from layer 0 to layer 2",
        ),
        (
            edit(&|w| {
                w["nodes"][1]["supportedOnFpga"] = json!(false);
                w["maxCPUs"] = json!(1);
            }),
            vec![],
            "node 2: supportedOnFpga is false",
        ),
        (
            edit(&|w| {
                w["nodes"][3]
                    .as_object_mut()
                    .unwrap()
                    .remove("tensorParallel")
                    .map(|_| ())
                    .unwrap()
            }),
            vec!["--tensor-parallel", "2"],
            "node 4 has none",
        ),
        (
            hand.clone(),
            vec!["--micro-batch", "auto"],
            "--micro-batch auto",
        ),
        (
            hand.clone(),
            vec!["--export", "megatron"],
            "--export does not apply to a workload JSON",
        ),
    ];
    for (w, flags, says) in cases {
        let out = plan_file(dir.path(), &w, &flags);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{says}: {err}");
        assert!(err.contains(says), "{says}: {err}");
    }
}

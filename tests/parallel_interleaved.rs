//! The interleaved schedule on 3D layouts (`--schedule interleaved:v`, docs/parallel.md
//! "The interleaved schedule"): the scorer's memory against a hand count, the simulator
//! against the scorer's iteration formula on equal chunks, and the search against a brute
//! force over every layout of its space.

mod common;

use common::Pick;
use dnnplace::costmodel::operators::DType;
use dnnplace::costmodel::parallel::{transformer_chain, valid_tp_degrees, with_batch};
use dnnplace::costmodel::transformer::{Style, TransformerSpec};
use dnnplace::io::cluster_resolve::cluster_and_profiles;
use dnnplace::model::parallel::{
    ChainCosts, CutTransfers, Layout, Topology, TpCost, Uniform, Unit, Zero,
};
use dnnplace::model::profiles::find_profile;
use dnnplace::model::schedule::Schedule;
use dnnplace::model::Link;
use dnnplace::score::parallel::{score_layout, LayoutError};
use dnnplace::simulate::parallel::simulate_layout;
use dnnplace::simulate::parallel::Simulator;
use dnnplace::solve::budget::Budget;
use dnnplace::solve::parallel::{plan_uniform_with, Objective, Space, Valuation};
use dnnplace::solve::Status;
use proptest::prelude::*;
use std::process::Command;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-12)
}

/// A random transformer chain at `t` in the TP degrees of a machine of `per` devices.
fn transformer(r: &mut Pick, per: usize) -> Option<(ChainCosts, Vec<usize>)> {
    let style = r.of(&[Style::Bert, Style::Gpt2, Style::Llama]);
    let heads = r.of(&[2, 4]);
    let hidden = heads * r.of(&[8, 16, 32]);
    let layers = r.of(&[4usize, 6, 8, 12]);
    let mut spec = TransformerSpec::new(style, layers, hidden, heads, r.of(&[8, 16, 64]), 1);
    spec.vocab = r.of(&[64, 1000]);
    let dtype = r.of(&[DType::Fp32, DType::Bf16]);
    let tps: Vec<usize> = valid_tp_degrees(&spec, per);
    let b = r.of(&[1usize, 2]);
    let h100 = find_profile("h100", &[]).unwrap();
    let chain = transformer_chain(&with_batch(&spec, b), dtype, &h100, &tps).ok()?;
    Some((chain, tps))
}

/// Equal chunks: every unit a copy of one block, nothing crossing the cuts, one machine
/// (every stage's DP group on the same link): the simulated iteration is the scorer's
/// `(m + (p − 1)/v)·T + sync`, and each replica's simulated peak memory the scorer's.
#[test]
fn equal_chunks_simulate_to_the_planned_iteration() {
    let mut checked = 0;
    for seed in 0..300u64 {
        let mut r = Pick(seed);
        let per = r.of(&[4usize, 8]);
        let Some((mut chain, tps)) = transformer(&mut r, per) else {
            continue;
        };
        let (cluster, _) = cluster_and_profiles(&format!("1x{per}xh100"), &[]).unwrap();
        let mut topo = Topology::from_cluster(&cluster).unwrap();
        if r.next(3) == 0 {
            topo.peer = None;
        }
        let t = r.of(&tps);
        let p = r.of(&[2usize, 3, 4]);
        let v = r.of(&[2usize, 3]);
        if p * t > per {
            continue;
        }
        let d = 1 + r.next((per / (p * t)) as u64) as usize;
        let k = 1 + r.next(2) as usize;
        let block = chain.units[1].clone();
        chain.units = (0..p * v * k).map(|_| block.clone()).collect();
        chain.cuts = vec![CutTransfers::default(); p * v * k + 1];
        let bounds: Vec<usize> = (0..=p * v).map(|c| c * k).collect();
        let m = p * (1 + r.next(4) as usize);
        let cfg = Uniform {
            micro_batch: chain.micro_batch,
            tensor_parallel: t,
            data_parallel: d,
            zero: r.of(&Zero::ALL),
            recompute: r.next(2) == 0,
            stages: p,
        };
        let layout = Layout::interleaved(&bounds, &cfg, m * d * cfg.micro_batch, v);
        let sim = simulate_layout(&chain, &topo, &layout).expect("simulates");
        let planned = sim.planned.iteration_ms.unwrap();
        let st = &sim.planned.stages[0];
        let by_hand = (m as f64 + (p as f64 - 1.0) / v as f64) * st.micro_batch_ms + st.dp_sync_ms;
        assert!(
            close(planned, by_hand),
            "seed {seed}: {planned} vs {by_hand}"
        );
        assert!(
            close(sim.iteration_ms, planned),
            "seed {seed} p={p} v={v} m={m} d={d}: simulated {} planned {planned}",
            sim.iteration_ms
        );
        // The sync overlapped with the last backward (each lane's is its first chunk's).
        let overlapped =
            simulate_layout(&chain, &topo, &layout.clone().overlapped(true)).expect("simulates");
        let b = overlapped.pass_ms[0].1;
        let by_hand = (m as f64 + (p as f64 - 1.0) / v as f64) * st.micro_batch_ms
            + (st.dp_sync_ms - b).max(0.0);
        assert!(
            close(overlapped.iteration_ms, by_hand)
                && close(overlapped.planned.iteration_ms.unwrap(), by_hand),
            "seed {seed}: overlapped simulated {} planned {:?} by hand {by_hand}",
            overlapped.iteration_ms,
            overlapped.planned.iteration_ms
        );
        for lane in sim.lanes.iter().filter(|l| l.replica.is_some()) {
            let sc = &sim.planned.stages[lane.stage];
            assert!(
                close(lane.peak_memory_bytes, sc.memory_bytes),
                "seed {seed}: stage {} simulated {} planned {}",
                lane.stage,
                lane.peak_memory_bytes,
                sc.memory_bytes
            );
        }
        checked += 1;
    }
    assert!(checked > 100, "{checked}");
}

/// A chain of `n` units with stash `a[u]` per micro-batch, 1 ms forward, 2 ms backward, no
/// weights, nothing crossing the cuts.
fn stash_chain(a: &[f64]) -> ChainCosts {
    let units = a
        .iter()
        .enumerate()
        .map(|(u, &x)| Unit {
            name: format!("u{u}"),
            layer_id: u as i64,
            costs: vec![TpCost {
                forward_ms: 1.0,
                backward_ms: 2.0,
                activation_bytes: x,
                checkpoint_bytes: x / 10.0,
                weight_bytes: 100.0,
                ..TpCost::default()
            }],
        })
        .collect();
    ChainCosts {
        tp_degrees: vec![1],
        micro_batch: 1,
        sequence_parallel: false,
        units,
        cuts: vec![CutTransfers::default(); a.len() + 1],
        peak_flops: 1e12,
        model_flops: 1e9,
    }
}

fn two_devices() -> Topology {
    let link = Link {
        bytes_per_s: 1e9,
        latency_ms: 0.0,
    };
    Topology {
        machines: 1,
        per_machine: 2,
        memory_bytes: 1e12,
        type_name: "x".into(),
        profile: "h100".into(),
        peer: Some(link),
        host: link,
        network: link,
    }
}

/// Memory by hand. p = 2, v = 2, one unit per chunk, chunks 0..3 stashing 1000, 20, 300,
/// 4 bytes per micro-batch. With m = p = 2 Megatron-LM's order runs every forward first
/// (warm-up m·v = 4 steps): device 0 holds 2·1000 + 2·300 = 2600 bytes at its peak,
/// device 1 2·20 + 2·4 = 48. With m = 4 device 0 warms up with 2(p − 1) + (v − 1)p = 4
/// steps — F(μ0,c0) F(μ1,c0) F(μ0,c2) F(μ1,c2): 2600 — then pairs F(μ2,c0) B(μ0,c2)
/// F(μ3,c0) B(μ1,c2) F(μ2,c2) B(μ0,c0) F(μ3,c2) B(μ1,c0) …: 3600, 3300, 4300, 4000, 4300,
/// 3300, 3600, 2600, …: peak 4300 bytes, 5 chunk-stashes.
#[test]
fn memory_by_hand() {
    let chain = stash_chain(&[1000.0, 20.0, 300.0, 4.0]);
    let topo = two_devices();
    let cfg = Uniform {
        micro_batch: 1,
        tensor_parallel: 1,
        data_parallel: 1,
        zero: Zero::Off,
        recompute: false,
        stages: 2,
    };
    let bounds = [0, 1, 2, 3, 4];
    let at = |m: usize, recompute: bool| {
        let c = Uniform { recompute, ..cfg };
        let layout = Layout::interleaved(&bounds, &c, m, 2);
        score_layout(&chain, &topo, &layout).unwrap()
    };
    let s = at(2, false);
    assert_eq!(s.stages[0].activation_bytes, 2600.0);
    assert_eq!(s.stages[1].activation_bytes, 48.0);
    // Weights 100 per unit, two units per stage; gradients and optimizer 0 here.
    assert_eq!(s.stages[0].memory_bytes, 2800.0);
    let s = at(4, false);
    assert_eq!(s.stages[0].activation_bytes, 4300.0);
    assert_eq!(s.stages[0].in_flight, 5);
    // Recomputing: checkpoints a tenth, plus the largest unit's full stash (1000).
    let s = at(4, true);
    assert_eq!(s.stages[0].activation_bytes, 430.0 + 1000.0);
    // Time: T_k = 2 chunks × 3 ms, (m + (p − 1)/v)·T = (4 + 1/2)·6 = 27 ms, no sync.
    assert_eq!(at(4, false).iteration_ms, Some(27.0));
    // m = 3 is not a multiple of p = 2; one stage is not a pipeline; 3 chunks are not
    // 2 per stage.
    let bad = Layout::interleaved(&bounds, &cfg, 3, 2);
    assert!(matches!(
        score_layout(&chain, &topo, &bad),
        Err(LayoutError::InterleavedMicroBatches {
            micro_batches: 3,
            stages: 2
        })
    ));
    let one = Uniform { stages: 1, ..cfg };
    let bad = Layout::interleaved(&bounds[..3], &one, 4, 2);
    assert!(matches!(
        score_layout(&stash_chain(&[1.0, 1.0]), &topo, &bad),
        Err(LayoutError::Chunks { .. })
    ));
    let mut bad = Layout::interleaved(&bounds, &cfg, 4, 2);
    bad.stages[3].first_device = 0;
    assert!(matches!(
        score_layout(&chain, &topo, &bad),
        Err(LayoutError::ChunkDevices { chunk: 3, stage: 1 })
    ));
}

/// Every layout of the search's space built here by construction — each configuration
/// `(b, t, d, ZeRO, recompute, p)` with `p ≥ 2`, `p·v` dividing the blocks, `m` a
/// multiple of `p`, every ZeRO stage of the space (not only the representatives the search
/// tries), chunk `c` holding blocks `c·k .. (c + 1)·k` with the embeddings in chunk 0 and
/// the head in the last — valued by the scorer (time per sample) or the simulator
/// (iteration), and the best compared with the search's value and bound.
fn brute_force(
    chains: &[ChainCosts],
    topo: &Topology,
    space: &Space,
    objective: Objective,
) -> Option<f64> {
    let v = space.schedule.chunks();
    let n = space.max_devices.min(topo.devices());
    let mut best: Option<f64> = None;
    for chain in chains {
        let (b, u) = (chain.micro_batch, chain.len());
        for &t in &space.tensor_parallel {
            if chain.tp_index(t).is_none() || !topo.per_machine.is_multiple_of(t) {
                continue;
            }
            for d in 1..=n / t {
                if space.data_parallel.is_some_and(|x| x != d) {
                    continue;
                }
                if !space.global_batch.is_multiple_of(d * b) {
                    continue;
                }
                let m = space.global_batch / (d * b);
                for p in 2..=n / (t * d) {
                    if space.stages.is_some_and(|x| x != p) || !m.is_multiple_of(p) {
                        continue;
                    }
                    if u < 2 + p * v || !(u - 2).is_multiple_of(p * v) {
                        continue;
                    }
                    let k = (u - 2) / (p * v);
                    let bounds: Vec<usize> = (0..=p * v)
                        .map(|c| match c {
                            0 => 0,
                            c if c == p * v => u,
                            c => 1 + c * k,
                        })
                        .collect();
                    for &zero in &space.zero {
                        for recompute in match space.recompute {
                            Some(r) => vec![r],
                            None => vec![false, true],
                        } {
                            let cfg = Uniform {
                                micro_batch: b,
                                tensor_parallel: t,
                                data_parallel: d,
                                zero,
                                recompute,
                                stages: p,
                            };
                            let layout = Layout::interleaved(&bounds, &cfg, space.global_batch, v)
                                .overlapped(space.overlap_grad_reduce);
                            let score = score_layout(chain, topo, &layout).unwrap();
                            if !score.fits {
                                continue;
                            }
                            let value = match objective {
                                Objective::TimePerSample => score.time_per_sample_ms,
                                Objective::Iteration => {
                                    simulate_layout(chain, topo, &layout).unwrap().iteration_ms
                                }
                            };
                            best = Some(best.map_or(value, |x: f64| x.min(value)));
                        }
                    }
                }
            }
        }
    }
    best
}

fn compare(seed: u64) -> Result<bool, TestCaseError> {
    let mut r = Pick(seed);
    let per = r.of(&[2usize, 4]);
    let Some((chain, tps)) = transformer(&mut r, per) else {
        return Ok(false);
    };
    let micro = vec![chain.micro_batch];
    let chains = vec![chain];
    let machines = 1 + r.next(2) as usize;
    let (cluster, _) = cluster_and_profiles(&format!("{machines}x{per}xh100"), &[]).unwrap();
    let mut topo = Topology::from_cluster(&cluster).unwrap();
    if r.next(3) == 0 {
        topo.peer = None;
    }
    let resident: f64 = chains[0]
        .units
        .iter()
        .map(|u| u.costs[0].weight_bytes + u.costs[0].gradient_bytes + u.costs[0].optimizer_bytes)
        .sum();
    topo.memory_bytes = resident * r.of(&[0.1, 0.3, 0.6, 1.0, 5.0]);
    let space = Space {
        tensor_parallel: tps.clone(),
        data_parallel: if r.next(3) == 0 { Some(1) } else { None },
        stages: None,
        zero: match r.next(3) {
            0 => Zero::ALL.to_vec(),
            1 => vec![Zero::Off, Zero::Optimizer],
            _ => vec![r.of(&Zero::ALL)],
        },
        recompute: r.of(&[None, Some(false), Some(true)]),
        micro_batches: micro,
        global_batch: r.of(&[4, 8, 12, 16, 24]),
        schedule: Schedule::Interleaved {
            chunks: r.of(&[2usize, 3]),
        },
        // Odd seeds overlap the DP sync with backward (no draw: the other draws stay).
        overlap_grad_reduce: seed % 2 == 1,
        max_devices: topo.devices(),
    };
    let objective = r.of(&[Objective::Iteration, Objective::TimePerSample]);
    let found = plan_uniform_with(
        &chains,
        &topo,
        &space,
        objective,
        &Budget::unlimited(),
        Some(&Simulator),
    )
    .unwrap();
    let oracle = brute_force(&chains, &topo, &space, objective);
    match (&found.plan, oracle) {
        (None, None) => {
            let infeasible = matches!(found.status, Status::Infeasible { .. });
            prop_assert!(infeasible, "{:?}", found.status);
            Ok(false)
        }
        (Some(plan), Some(v)) => {
            prop_assert_eq!(found.status.clone(), Status::Optimal);
            let tol = 1e-9 * v.abs();
            prop_assert!(
                (found.value - v).abs() <= tol,
                "seed {}: search {} vs brute force {}",
                seed,
                found.value,
                v
            );
            prop_assert!((found.bound - found.value).abs() <= tol);
            prop_assert!(plan.score.fits);
            prop_assert!(space.zero.contains(&plan.layout.zero));
            prop_assert_eq!(plan.layout.schedule, space.schedule);
            // The plan's own value, from the scorer or the simulator.
            let own = match objective {
                Objective::TimePerSample => {
                    prop_assert_eq!(found.valuation, Valuation::Model);
                    plan.score.time_per_sample_ms
                }
                Objective::Iteration => {
                    prop_assert_eq!(found.valuation, Valuation::Simulation);
                    simulate_layout(&plan.chain, &topo, &plan.layout)
                        .unwrap()
                        .iteration_ms
                }
            };
            prop_assert!((own - found.value).abs() <= tol);
            Ok(true)
        }
        (a, b) => {
            prop_assert!(
                false,
                "seed {}: search {:?} vs brute force {:?}",
                seed,
                a.is_some(),
                b
            );
            Ok(false)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn the_search_is_the_brute_force_optimum(seed in any::<u64>()) {
        compare(seed)?;
    }
}

/// The property's instances are not vacuous: among fixed seeds, many have a plan.
#[test]
fn many_instances_have_a_plan() {
    let planned = (0..120u64).filter(|&s| compare(s).unwrap()).count();
    assert!(planned >= 25, "{planned}");
}

fn dnnplace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dnnplace"))
}

fn plan_8b(extra: &[&str]) -> std::process::Output {
    plan_8b_on("4x8xh100", extra)
}

fn plan_8b_on(cluster: &str, extra: &[&str]) -> std::process::Output {
    dnnplace()
        .args([
            "plan",
            "examples/hf/llama-3-8b.json",
            "--parallel",
            "3d",
            "--cluster",
            cluster,
            "--seq",
            "4096",
            "--global-batch",
            "256",
        ])
        .args(extra)
        .output()
        .unwrap()
}

/// What the interleaved schedule cannot plan exits 2 with a message naming the flag.
#[test]
fn refusals_exit_2_naming_the_flag() {
    for (extra, flag) in [
        (&["--schedule", "interleaved:2", "--free"][..], "--schedule"),
        (
            &["--schedule", "interleaved:2", "--pipeline-parallel", "1"][..],
            "--pipeline-parallel",
        ),
        // 32 blocks are not 4·3 = 12 equal chunks.
        (
            &["--schedule", "interleaved:3", "--pipeline-parallel", "4"][..],
            "--schedule",
        ),
        (
            &["--schedule", "interleaved:2", "--export", "deepspeed"][..],
            "--schedule",
        ),
        (
            &["--schedule", "interleaved:2", "--export", "vllm"][..],
            "--schedule",
        ),
    ] {
        let o = plan_8b(extra);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(flag), "{extra:?}: {err}");
    }
    let o = plan_8b_on("4x8xh100+4x8xa100-80gb", &["--schedule", "interleaved:2"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--schedule"), "{err}");
    let o = dnnplace()
        .args([
            "compare",
            "examples/hf/llama-3-8b.json",
            "--parallel",
            "3d",
            "--cluster",
            "4x8xh100",
        ])
        .args([
            "--seq",
            "4096",
            "--global-batch",
            "256",
            "--schedule",
            "interleaved:2",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--schedule"), "{err}");
    // m = B/(d·b) = 6 micro-batches are not a multiple of p = 4.
    let o = dnnplace()
        .args([
            "plan",
            "examples/hf/llama-3-8b.json",
            "--parallel",
            "3d",
            "--cluster",
            "4x8xh100",
            "--seq",
            "4096",
            "--global-batch",
            "6",
            "--micro-batch",
            "1",
            "--data-parallel",
            "1",
            "--pipeline-parallel",
            "4",
            "--schedule",
            "interleaved:2",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--global-batch"), "{err}");
}

/// The JSON of an interleaved plan: the contract's fields, each stage's `v` chunks in
/// round robin (chunk c on stage c mod p, together the chain in order), the simulated
/// value under the iteration objective; the Megatron-LM export's
/// `--num-layers-per-virtual-pipeline-stage` read back scores the same time per sample.
#[test]
fn the_json_lists_the_chunks_and_the_export_reads_back() {
    let o = plan_8b(&[
        "--schedule",
        "interleaved:2",
        "--pipeline-parallel",
        "4",
        "--objective",
        "iteration",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for key in [
        "value",
        "bound",
        "gap",
        "outcome",
        "valueFrom",
        "stages",
        "schedule",
    ] {
        assert!(!v[key].is_null(), "{key} missing");
    }
    assert_eq!(v["valueFrom"], "simulation");
    assert_eq!(v["schedule"], "interleaved:2");
    assert_eq!(v["outcome"], "optimal");
    let stages = v["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 4);
    let mut order: Vec<String> = Vec::new();
    for c in 0..8 {
        let chunk = stages[c % 4]["chunks"][c / 4].as_array().unwrap();
        assert_eq!(
            chunk.len(),
            if c == 0 || c == 7 { 5 } else { 4 },
            "chunk {c}"
        );
        order.extend(chunk.iter().map(|x| x.as_str().unwrap().to_string()));
    }
    let want: Vec<String> = std::iter::once("embeddings".to_string())
        .chain((0..32).map(|i| format!("layers.{i}")))
        .chain(std::iter::once("head".to_string()))
        .collect();
    assert_eq!(order, want);
    let meg = plan_8b(&[
        "--schedule",
        "interleaved:2",
        "--pipeline-parallel",
        "4",
        "--export",
        "megatron",
        "--json",
    ]);
    assert!(
        meg.status.success(),
        "{}",
        String::from_utf8_lossy(&meg.stderr)
    );
    let out = String::from_utf8_lossy(&meg.stdout).to_string();
    let mut stream = serde_json::Deserializer::from_str(&out).into_iter::<serde_json::Value>();
    let plan = stream.next().unwrap().unwrap();
    let export = &out[out.find("# dnnplace export").expect("export printed")..];
    assert!(
        export.contains("--num-layers-per-virtual-pipeline-stage 4"),
        "{export}"
    );
    assert!(
        export.contains("--pipeline-model-parallel-size 4"),
        "{export}"
    );
    read_back(export, plan["value"].as_f64().unwrap());
}

/// `score --from-export megatron` of `export` gives `value` per sample.
fn read_back(export: &str, value: f64) {
    let dir = std::env::temp_dir().join(format!("il3d-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("megatron.txt");
    std::fs::write(&file, export).unwrap();
    let o = dnnplace()
        .args([
            "score",
            "examples/hf/llama-3-8b.json",
            "--parallel",
            "3d",
            "--from-export",
            "megatron",
        ])
        .arg(&file)
        .args(["--cluster", "4x8xh100", "--seq", "4096", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let got = v["value"].as_f64().unwrap();
    assert!(close(got, value), "read back {got} vs planned {value}");
    assert_eq!(v["schedule"], "interleaved:2");
}

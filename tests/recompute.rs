//! Activation recomputation (`plan --schedule S --micro-batches m --recompute none|auto`):
//! the DP against exhaustive search of the model written out again here (every
//! contiguous assignment, every allowed chain order, every set of recomputing
//! accelerators), a planted workload that fits only by recomputing, `none` equal to the
//! schedule-aware DP of before and to the plain DP on the published workloads, the
//! simulator's peaks equal to the planner's figures, and the plan file's field.

mod common;

use common::{staged_workload, Staging};
use dnnplace::io::{parse_placement, parse_workload, placement_to_raw, read_workload};
use dnnplace::model::recompute::Recompute;
use dnnplace::model::schedule::{Pipeline, Schedule};
use dnnplace::model::{Device, DeviceSet, Placement, Workload};
use dnnplace::score::{evaluate, pipeline_memory, recompute_where_needed};
use dnnplace::simulate::{simulate, Settings};
use dnnplace::solve::{dp::Dp, milp::Ip, plan, Objective, Problem, Status};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn same(a: f64, b: f64) -> bool {
    close(a, b) || (a.is_infinite() && b.is_infinite())
}

/// A random training workload (tests/common) with a stash on most nodes, output bytes on
/// the forward edges, and a memory that the stash often makes bind.
fn workload(seed: u64) -> Option<Workload> {
    staged_workload(
        seed,
        Staging {
            salt: 0x00c0_ffee,
            stash: 0.75,
            output_bytes: true,
            tight: 0.8,
        },
    )
}

/// Micro-batches in flight at stage `s` of `p` (docs/schedule.md), written out again.
fn in_flight(schedule: Schedule, m: usize, p: usize, s: usize) -> usize {
    match schedule {
        Schedule::GPipe => m,
        _ => m.min(p - s),
    }
}

/// What each device of an assignment holds, computed from the nodes and edges directly.
struct Holdings {
    size: Vec<f64>,
    stash: Vec<f64>,
    input: Vec<f64>,
    forward_ms: Vec<f64>,
}

fn holdings(w: &Workload, assign: &[usize], devices: usize) -> Holdings {
    let mut h = Holdings {
        size: vec![0.0; devices],
        stash: vec![0.0; devices],
        input: vec![0.0; devices],
        forward_ms: vec![0.0; devices],
    };
    for (n, &d) in w.nodes().iter().zip(assign) {
        h.size[d] += n.size_bytes;
        h.stash[d] += n
            .memory
            .map_or(0.0, |m| m.activation_bytes.min(n.size_bytes));
        if !n.is_backward {
            h.forward_ms[d] += n.fpga_latency;
        }
    }
    // In(d): each forward node's largest forward out-edge size, once per other device
    // whose forward nodes read it.
    for u in (0..w.len()).filter(|&u| !w.node(u).is_backward) {
        let fwd = |e: &&dnnplace::model::Edge| e.from == u && !w.node(e.to).is_backward;
        let b = w
            .edges()
            .iter()
            .filter(fwd)
            .map(|e| e.size_bytes)
            .fold(0.0, f64::max);
        let mut readers: Vec<usize> = w
            .edges()
            .iter()
            .filter(fwd)
            .map(|e| assign[e.to])
            .filter(|&d| d != assign[u])
            .collect();
        readers.sort_unstable();
        readers.dedup();
        for d in readers {
            h.input[d] += b;
        }
    }
    h
}

/// Exhaustive search: every contiguous valid assignment, every set `R` of its accelerators
/// that recompute (only `∅` without `allow`), every chain order the forward edges allow;
/// an accelerator at place `s` holds `Σ size + (c − 1)·Σ A`, or `Σ size + c·In` in `R`;
/// its load is the scorer's plus its forward compute in `R`. The least TPS, or ∞.
fn brute_force(w: &Workload, schedule: Schedule, m: usize, allow: bool) -> f64 {
    let d = w.devices();
    let devices: Vec<Device> = (0..d.accelerators)
        .map(Device::Accelerator)
        .chain((0..d.cpus).map(Device::Cpu))
        .collect();
    let limit = d.memory_per_accelerator_bytes;
    let n = w.len();
    let mut best = f64::INFINITY;
    let mut assign = vec![0usize; n];
    loop {
        let placement = Placement::new(assign.iter().map(|&i| devices[i]).collect());
        let e = evaluate(w, &placement, false);
        if e.violations.is_empty() && e.non_contiguous.is_empty() && e.max_load < best {
            let mut used: Vec<usize> = assign.clone();
            used.sort_unstable();
            used.dedup();
            let h = holdings(w, &assign, devices.len());
            let load = |i: usize| {
                e.devices
                    .iter()
                    .find(|x| x.device == devices[i])
                    .map_or(0.0, |x| x.load)
            };
            let accelerators: Vec<usize> = used
                .iter()
                .copied()
                .filter(|&i| devices[i].is_accelerator())
                .collect();
            let subsets = if allow {
                1usize << accelerators.len()
            } else {
                1
            };
            for mask in 0..subsets {
                let recomputes = |i: usize| {
                    accelerators
                        .iter()
                        .position(|&a| a == i)
                        .is_some_and(|k| mask >> k & 1 == 1)
                };
                let tps = used
                    .iter()
                    .map(|&i| load(i) + if recomputes(i) { h.forward_ms[i] } else { 0.0 })
                    .fold(0.0, f64::max);
                if tps >= best {
                    continue;
                }
                let bytes = |i: usize, c: usize| {
                    if recomputes(i) {
                        h.size[i] + c as f64 * h.input[i]
                    } else {
                        h.size[i] + (c as f64 - 1.0) * h.stash[i]
                    }
                };
                if some_order_fits(w, &assign, &used, &|i, s| {
                    !devices[i].is_accelerator()
                        || bytes(i, in_flight(schedule, m, used.len(), s)) <= limit
                }) {
                    best = tps;
                }
            }
        }
        let mut i = 0;
        while i < n && assign[i] + 1 == devices.len() {
            assign[i] = 0;
            i += 1;
        }
        if i == n {
            return best;
        }
        assign[i] += 1;
    }
}

/// Whether some order of the used devices that the forward edges allow puts every device
/// `i` at a place `s` with `fits(i, s)`.
fn some_order_fits(
    w: &Workload,
    assign: &[usize],
    used: &[usize],
    fits: &dyn Fn(usize, usize) -> bool,
) -> bool {
    let mut order: Vec<usize> = used.to_vec();
    permutations(&mut order, 0, &mut |order| {
        let place = |dev: usize| order.iter().position(|&x| x == dev).unwrap();
        let respects = w.edges().iter().all(|e| {
            w.node(e.from).is_backward
                || w.node(e.to).is_backward
                || place(assign[e.from]) <= place(assign[e.to])
        });
        respects && order.iter().enumerate().all(|(s, &dev)| fits(dev, s))
    })
}

/// Whether `f` holds for some permutation of `xs[k..]`.
fn permutations(xs: &mut Vec<usize>, k: usize, f: &mut dyn FnMut(&[usize]) -> bool) -> bool {
    if k == xs.len() {
        return f(xs);
    }
    for i in k..xs.len() {
        xs.swap(k, i);
        if permutations(xs, k + 1, f) {
            xs.swap(k, i);
            return true;
        }
        xs.swap(k, i);
    }
    false
}

fn planned(w: &Workload, pipeline: Pipeline) -> dnnplace::solve::Plan {
    plan(
        &Dp,
        &Problem {
            pipeline: Some(pipeline),
            ..Problem::throughput(w)
        },
    )
    .unwrap_or_else(|e| {
        panic!(
            "{} m={} recompute {}: {e}",
            pipeline.schedule, pipeline.micro_batches, pipeline.recompute
        )
    })
}

/// Plans the random cases of seeds `0..seeds` (1F1B for even seeds, GPipe for odd, m =
/// 1…4) with and without recomputation by `solve`, asserts each optimum equals the
/// exhaustive search's and that `auto` is never above `none`, and hands every plan with
/// the exhaustive value to `check`. Returns the cases checked, those recomputation made
/// fit and those it lowered.
fn against_brute_force(
    seeds: u64,
    name: &str,
    solve: impl Fn(&Workload, Pipeline) -> dnnplace::solve::Plan,
    check: impl Fn(u64, Pipeline, &dnnplace::solve::Plan, f64),
) -> (usize, usize, usize) {
    let (mut checked, mut lowered, mut enabled) = (0, 0, 0);
    for seed in 0..seeds {
        let Some(w) = workload(seed) else { continue };
        let schedule = if seed % 2 == 0 {
            Schedule::OneFOneB
        } else {
            Schedule::GPipe
        };
        let m = 1 + (seed as usize / 2) % 4;
        let mut values = [0.0; 2];
        for (slot, recompute) in [Recompute::None, Recompute::Auto].into_iter().enumerate() {
            let pipeline = Pipeline {
                schedule,
                micro_batches: m,
                recompute,
            };
            let want = brute_force(&w, schedule, m, recompute == Recompute::Auto);
            let got = solve(&w, pipeline);
            let value = got.objective(Objective::Throughput);
            assert!(same(value, want), "seed {seed} {schedule} m={m} recompute {recompute}: {name} {value}, brute force {want}");
            check(seed, pipeline, &got, want);
            values[slot] = value;
        }
        let [none, auto] = values;
        assert!(
            auto <= none * (1.0 + 1e-9) || none.is_infinite(),
            "seed {seed}: auto {auto} above none {none}"
        );
        if none.is_infinite() && auto.is_finite() {
            enabled += 1;
        } else if auto < none * (1.0 - 1e-9) {
            lowered += 1;
        }
        checked += 1;
    }
    eprintln!("{name}: {checked} instances: recomputation made {enabled} fit and lowered the optimum of {lowered} more");
    (checked, enabled, lowered)
}

/// The DP's optimum equals exhaustive search with and without recomputation, under GPipe
/// and 1F1B, m = 1…4; `auto` is never above `none`; the plan passes the scorer's check
/// (solve::plan) with the recomputing devices it marks, and only accelerators recompute.
#[test]
fn dp_matches_brute_force_with_and_without_recompute() {
    let (checked, enabled, lowered) =
        against_brute_force(420, "dp", planned, |seed, pipeline, got, _| {
            let Some(p) = &got.outcome.placement else {
                return;
            };
            assert!(
                p.recompute.iter().all(|d| d.is_accelerator()),
                "seed {seed}: {:?}",
                p.recompute
            );
            if pipeline.recompute == Recompute::None || pipeline.micro_batches == 1 {
                assert!(
                    p.recompute.is_empty(),
                    "seed {seed} {pipeline:?}: {:?} recompute",
                    p.recompute
                );
            }
            for d in got.pipeline_memory.as_ref().unwrap() {
                assert_eq!(d.recomputes, p.recomputes(d.device));
            }
        });
    assert!(
        checked >= 250 && enabled >= 5 && lowered >= 5,
        "{checked} checked, {enabled} enabled, {lowered} lowered"
    );
}

/// The contiguous IP under a schedule with and without recomputation (ρ per stage, the
/// product A·ρ linearised, the stage input as a covering variable: src/solve/milp/stages.rs)
/// proves the exhaustive search's optimum, and the scorer accepts its plan with the
/// recomputing devices it marks (solve::plan).
#[test]
fn ip_matches_brute_force_with_and_without_recompute() {
    let ip = |w: &Workload, pipeline: Pipeline| {
        let problem = Problem {
            pipeline: Some(pipeline),
            contiguous: true,
            ..Problem::throughput(w)
        };
        plan(&Ip, &problem).unwrap_or_else(|e| panic!("{pipeline:?}: {e}"))
    };
    let (checked, enabled, lowered) = against_brute_force(300, "ip", ip, |seed, _, got, want| {
        if want.is_finite() {
            assert!(
                matches!(got.outcome.status, Status::Optimal),
                "seed {seed}: {:?}",
                got.outcome.status
            );
        }
    });
    assert!(
        checked >= 150 && enabled >= 3 && lowered >= 3,
        "{checked} checked, {enabled} enabled, {lowered} lowered"
    );
}

/// Five layers, each a forward node (1 ms, 2 bytes) and its backward node (1 ms, 8 bytes,
/// all stashed activations) in one colour class, a 1-byte tensor between consecutive
/// layers both ways (0.5 ms each), two accelerators of 30 bytes, 1F1B with 4
/// micro-batches. The first stage holds 2 micro-batches (k layers: 10k + 8k bytes, one
/// layer at most), the last 1 (10k: three at most), so 5 layers fit only if the first
/// stage recomputes — it then holds 10k + 2·In = 10k (the first stage reads nothing), so
/// two or three layers. Every stage pays 1 ms of communication (a forward and a backward
/// tensor); two layers there cost 4 + 1 + 2 (forward again) = 7 ms and three layers on the
/// last stage 6 + 1 = 7; three and two cost 10 and 5. The optimum is 7, the first stage
/// recomputing.
const PLANTED: &str = r#"{"maxSizePerFPGA": 30, "maxFPGAs": 2, "maxCPUs": 0, "nodes": [{"id": 1, "fpgaLatency": 1, "cpuLatency": 9, "size": 2, "colorClass": 1}, {"id": 2, "fpgaLatency": 1, "cpuLatency": 9, "size": 2, "colorClass": 2}, {"id": 3, "fpgaLatency": 1, "cpuLatency": 9, "size": 2, "colorClass": 3}, {"id": 4, "fpgaLatency": 1, "cpuLatency": 9, "size": 2, "colorClass": 4}, {"id": 5, "fpgaLatency": 1, "cpuLatency": 9, "size": 2, "colorClass": 5}, {"id": 11, "fpgaLatency": 1, "cpuLatency": 9, "size": 8, "activationBytes": 8, "isBackwardNode": true, "colorClass": 1}, {"id": 12, "fpgaLatency": 1, "cpuLatency": 9, "size": 8, "activationBytes": 8, "isBackwardNode": true, "colorClass": 2}, {"id": 13, "fpgaLatency": 1, "cpuLatency": 9, "size": 8, "activationBytes": 8, "isBackwardNode": true, "colorClass": 3}, {"id": 14, "fpgaLatency": 1, "cpuLatency": 9, "size": 8, "activationBytes": 8, "isBackwardNode": true, "colorClass": 4}, {"id": 15, "fpgaLatency": 1, "cpuLatency": 9, "size": 8, "activationBytes": 8, "isBackwardNode": true, "colorClass": 5}], "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5, "size": 1}, {"sourceId": 12, "destId": 11, "cost": 0.5, "size": 1}, {"sourceId": 2, "destId": 3, "cost": 0.5, "size": 1}, {"sourceId": 13, "destId": 12, "cost": 0.5, "size": 1}, {"sourceId": 3, "destId": 4, "cost": 0.5, "size": 1}, {"sourceId": 14, "destId": 13, "cost": 0.5, "size": 1}, {"sourceId": 4, "destId": 5, "cost": 0.5, "size": 1}, {"sourceId": 15, "destId": 14, "cost": 0.5, "size": 1}, {"sourceId": 1, "destId": 11, "cost": 0.5, "size": 1}, {"sourceId": 2, "destId": 12, "cost": 0.5, "size": 1}, {"sourceId": 3, "destId": 13, "cost": 0.5, "size": 1}, {"sourceId": 4, "destId": 14, "cost": 0.5, "size": 1}, {"sourceId": 5, "destId": 15, "cost": 0.5, "size": 1}]}"#;

/// `auto` makes the planted workload fit where `none` finds nothing, at the hand-computed
/// optimum, with the first stage recomputing and the figures of the module doc.
#[test]
fn recomputing_makes_a_workload_fit() {
    let w = parse_workload(PLANTED).unwrap();
    let none = planned(&w, Pipeline::new(Schedule::OneFOneB, 4));
    assert!(
        none.outcome.placement.is_none(),
        "none: {:?}",
        none.outcome.status
    );
    assert!(brute_force(&w, Schedule::OneFOneB, 4, false).is_infinite());
    let auto = planned(
        &w,
        Pipeline {
            schedule: Schedule::OneFOneB,
            micro_batches: 4,
            recompute: Recompute::Auto,
        },
    );
    assert_eq!(auto.objective(Objective::Throughput), 7.0);
    let p = auto.outcome.placement.clone().unwrap();
    let first = p.assignment[0];
    assert_eq!(p.recompute, vec![first]);
    assert_eq!(p.assignment.iter().filter(|&&d| d == first).count(), 4);
    let memory = auto.pipeline_memory.unwrap();
    let m0 = memory.iter().find(|d| d.device == first).unwrap();
    assert_eq!(
        (
            m0.stage,
            m0.in_flight,
            m0.recomputes,
            m0.input_bytes,
            m0.bytes
        ),
        (0, 2, true, 0.0, 20.0)
    );
    let m1 = memory.iter().find(|d| d.device != first).unwrap();
    assert_eq!(
        (
            m1.stage,
            m1.in_flight,
            m1.recomputes,
            m1.input_bytes,
            m1.bytes
        ),
        (1, 1, false, 1.0, 30.0)
    );
    let e = auto.evaluation.unwrap();
    let d0 = e.devices.iter().find(|d| d.device == first).unwrap();
    assert_eq!(
        (d0.compute, d0.communication, d0.recompute, d0.load),
        (4.0, 1.0, 2.0, 7.0)
    );
    // The simulator runs the recomputation: loads, and peaks equal to the figures.
    let sim = simulate(
        &w,
        &p,
        &Settings {
            schedule: Schedule::OneFOneB,
            micro_batches: 4,
        },
    )
    .unwrap();
    for d in &sim.devices {
        let f = memory.iter().find(|x| x.device == d.device).unwrap();
        assert_eq!(d.peak_memory_bytes, f.bytes, "{}", d.device);
    }
    assert_eq!(sim.max_load_ms, 7.0);
    assert!(sim.training);
    // Without its marks the plan's first stage needs 10·2 + 8·2·(2 − 1) = 36 bytes.
    let unmarked = p.clone().with_recompute(Vec::new());
    assert!(pipeline_memory(&w, &unmarked, &Pipeline::new(Schedule::OneFOneB, 4)).is_err());
    // The scorer's own choice puts the marks back.
    let chosen =
        recompute_where_needed(&w, &unmarked, &Pipeline::new(Schedule::OneFOneB, 4)).unwrap();
    assert_eq!(chosen.recompute, p.recompute);
}

/// One micro-batch in flight: recomputation never saves memory (it keeps `In` more), so
/// `auto` equals `none` equals the plain DP.
#[test]
fn one_micro_batch_never_recomputes() {
    for seed in 0..150u64 {
        let Some(w) = workload(seed) else { continue };
        let plain = plan(&Dp, &Problem::throughput(&w))
            .unwrap()
            .objective(Objective::Throughput);
        for schedule in [Schedule::GPipe, Schedule::OneFOneB] {
            let got = planned(
                &w,
                Pipeline {
                    schedule,
                    micro_batches: 1,
                    recompute: Recompute::Auto,
                },
            );
            assert!(
                same(got.objective(Objective::Throughput), plain),
                "seed {seed} {schedule}"
            );
            assert!(got.outcome.placement.is_none_or(|p| p.recompute.is_empty()));
        }
    }
}

/// On the published training workloads (no memory parts: nothing is stashed per
/// micro-batch), `--recompute none` and `auto` under 1F1B and GPipe give the plain DP's
/// optimum (the published DP figures of docs/results.md) and recompute nothing. GNMT is
/// left out for time: the 1F1B DP takes 13 s on it (one relaxation per chain length).
#[test]
fn published_training_workloads_unchanged() {
    let Some(dir) = common::shared_dir("paper/throughput") else {
        return;
    };
    let mut files: Vec<_> = [
        "layer/bert24_training.json",
        "layer/resnet50_training.json",
        "operator/bert_l-3_training.json",
    ]
    .iter()
    .map(|f| dir.join(f))
    .collect();
    files.retain(|f| {
        let present = f.exists();
        if !present {
            eprintln!("SKIPPED: {} is absent", f.display());
        }
        present
    });
    for path in files {
        let w = read_workload(&path).unwrap();
        let plain = plan(&Dp, &Problem::throughput(&w)).unwrap();
        let want = plain.objective(Objective::Throughput);
        for (schedule, m) in [(Schedule::OneFOneB, 8), (Schedule::GPipe, 4)] {
            for recompute in [Recompute::None, Recompute::Auto] {
                let got = planned(
                    &w,
                    Pipeline {
                        schedule,
                        micro_batches: m,
                        recompute,
                    },
                );
                let value = got.objective(Objective::Throughput);
                assert!(
                    close(value, want),
                    "{} {schedule} {recompute}: {value} vs {want}",
                    path.display()
                );
                assert!(got.outcome.placement.unwrap().recompute.is_empty());
            }
        }
        eprintln!(
            "{}: {want} under 1F1B m=8 and GPipe m=4, with and without recompute",
            path.display()
        );
    }
}

/// A generated GPT-2 training graph under a memory 15% below what its 1F1B / GPipe plan
/// needs (raised to 1% above its largest colour class where that is more: below it no plan
/// exists; the token embedding with its gradient is that class since its backward is priced
/// as the dense table gradient): `auto` finds a plan no worse than `none`'s (better in at least one of the two),
/// and every simulated peak equals the planner's figure and stays within the memory.
#[test]
fn generated_gpt2_under_tight_memory() {
    let w = common::gpt2_training(0);
    let largest_class = dnnplace::model::contraction::Contraction::new(&w)
        .groups
        .iter()
        .map(|g| g.size_bytes)
        .fold(0.0, f64::max);
    let (mut recomputing_plans, mut better) = (0, 0);
    for (schedule, m) in [(Schedule::OneFOneB, 8), (Schedule::GPipe, 4)] {
        let base = planned(&w, Pipeline::new(schedule, m));
        let need = base
            .pipeline_memory
            .unwrap()
            .iter()
            .map(|d| d.bytes)
            .fold(0.0, f64::max);
        let tight = w
            .with_devices(DeviceSet {
                memory_per_accelerator_bytes: (need * 0.85).max(largest_class * 1.01).floor(),
                ..*w.devices()
            })
            .unwrap();
        let none = planned(&tight, Pipeline::new(schedule, m)).objective(Objective::Throughput);
        let auto = planned(
            &tight,
            Pipeline {
                schedule,
                micro_batches: m,
                recompute: Recompute::Auto,
            },
        );
        let value = auto.objective(Objective::Throughput);
        assert!(
            value <= none * (1.0 + 1e-9),
            "{schedule}: auto {value} above none {none}"
        );
        better += usize::from(value < none * (1.0 - 1e-9));
        let p = auto
            .outcome
            .placement
            .clone()
            .unwrap_or_else(|| panic!("{schedule}: no plan with recompute at 85% memory"));
        recomputing_plans += usize::from(!p.recompute.is_empty());
        let figures = auto.pipeline_memory.unwrap();
        let sim = simulate(
            &tight,
            &p,
            &Settings {
                schedule,
                micro_batches: m,
            },
        )
        .unwrap();
        for d in &sim.devices {
            let f = figures.iter().find(|x| x.device == d.device).unwrap();
            assert!(
                close(d.peak_memory_bytes, f.bytes),
                "{schedule} {}: simulated {} vs planned {}",
                d.device,
                d.peak_memory_bytes,
                f.bytes
            );
            assert!(
                d.peak_memory_bytes <= tight.devices().memory_per_accelerator_bytes * (1.0 + 1e-12)
            );
        }
        eprintln!(
            "{schedule} m={m} at 85% memory: none {none} ms, auto {value} ms ({} of {} stages recompute)",
            p.recompute.len(),
            figures.len()
        );
    }
    assert!(
        recomputing_plans >= 1 && better >= 1,
        "at 85% memory: {recomputing_plans} plans recompute, {better} better than none"
    );
}

/// The plan file's per-device `recompute`: written for recomputing accelerators only, read
/// back, absent in older files (no recomputation), refused on a CPU.
#[test]
fn plan_file_field() {
    let w = parse_workload(PLANTED).unwrap();
    let (a0, a1) = (Device::Accelerator(0), Device::Accelerator(1));
    let p = Placement::new(vec![a0, a0, a1, a1, a1, a0, a0, a1, a1, a1]).with_recompute(vec![a0]);
    let raw = placement_to_raw(&w, &p, &[7.0, 7.0], &[], 7.0, false);
    let text = serde_json::to_string(&raw).unwrap();
    assert_eq!(text.matches("\"recompute\":true").count(), 1, "{text}");
    assert_eq!(parse_placement(&text, &w).unwrap(), p);
    // An older file (forward nodes only; the backward nodes follow their classes).
    let old = r#"{"fpgas": [{"nodes": [1, 2]}, {"nodes": [3, 4, 5]}], "cpus": []}"#;
    let read = parse_placement(old, &w).unwrap();
    assert!(read.recompute.is_empty());
    assert_eq!(evaluate(&w, &read, false).devices[0].load, 5.0);
    // acc0 runs its two forward nodes again: 4 + 1 + 2.
    let e = evaluate(&w, &p, false);
    assert_eq!(
        (e.devices[0].recompute, e.devices[0].load, e.max_load),
        (2.0, 7.0, 7.0)
    );
    let cpu =
        r#"{"fpgas": [{"nodes": [1, 2, 3, 4, 5]}], "cpus": [{"nodes": [], "recompute": true}]}"#;
    let err = parse_placement(cpu, &w).unwrap_err().to_string();
    assert!(
        err.contains("cpus[0]") && err.contains("recompute"),
        "{err}"
    );
}

/// `plan --recompute`: the per-device fields in the JSON and the table, the plan file that
/// `score` and `simulate` read back, and each refused combination exits 2 naming the flag.
#[test]
fn command_line() {
    use std::process::Command;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.json");
    std::fs::write(&path, PLANTED).unwrap();
    let w = path.to_str().unwrap();
    let out_path = dir.path().join("plan.json");
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_dnnplace"))
            .args(args)
            .output()
            .unwrap()
    };
    let base = ["plan", w, "--schedule", "1f1b", "--micro-batches", "4"];
    let out = run(&[
        &base[..],
        &[
            "--recompute",
            "auto",
            "--json",
            "--out",
            out_path.to_str().unwrap(),
        ],
    ]
    .concat());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["maxLoad"], 7.0);
    assert_eq!(v["pipeline"]["recompute"], "auto");
    let recomputing: Vec<&serde_json::Value> = v["devices"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["recomputes"] == true)
        .collect();
    assert_eq!(recomputing.len(), 1);
    assert_eq!(recomputing[0]["recompute"], 2.0);
    let fpgas = v["placement"]["fpgas"].as_array().unwrap();
    assert_eq!(fpgas.iter().filter(|d| d["recompute"] == true).count(), 1);
    let table = run(&[&base[..], &["--recompute", "auto"]].concat());
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        text.contains("recompute (ms)") && text.contains("recomputes: keeps its inputs"),
        "{text}"
    );
    // score and simulate read the field back: TPS 7 with the recomputation.
    let score = run(&["score", w, out_path.to_str().unwrap(), "--json"]);
    let s: serde_json::Value = serde_json::from_slice(&score.stdout).unwrap();
    assert_eq!(
        s["maxLoad"],
        7.0,
        "{}",
        String::from_utf8_lossy(&score.stderr)
    );
    let sim = run(&[
        "simulate",
        w,
        out_path.to_str().unwrap(),
        "--schedule",
        "1f1b",
        "--micro-batches",
        "4",
        "--format",
        "json",
    ]);
    assert_eq!(
        sim.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&sim.stderr)
    );
    let s: serde_json::Value = serde_json::from_slice(&sim.stdout).unwrap();
    let peaks: Vec<f64> = s["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["peakMemoryBytes"].as_f64().unwrap())
        .collect();
    assert!(peaks.iter().all(|&b| b <= 30.0), "{peaks:?}");
    // simulate --recompute none drops the marks: the first stage then needs 36 bytes.
    let sim = run(&[
        "simulate",
        w,
        out_path.to_str().unwrap(),
        "--micro-batches",
        "4",
        "--recompute",
        "none",
        "--format",
        "json",
    ]);
    let s: serde_json::Value = serde_json::from_slice(&sim.stdout).unwrap();
    let peak = s["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["peakMemoryBytes"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert_eq!(peak, 36.0);
    // none: no feasible plan.
    let out = run(&[&base[..], &["--recompute", "none"]].concat());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no feasible placement"));
    for (args, needle) in [
        (
            vec!["plan", w, "--recompute", "auto"],
            "--recompute auto needs --schedule",
        ),
        (
            vec!["plan", w, "--schedule", "1f1b", "--recompute", "sometimes"],
            "none or auto",
        ),
        (
            vec![
                "plan",
                w,
                "--schedule",
                "1f1b",
                "--method",
                "greedy",
                "--report",
                "r.html",
                "--recompute",
                "auto",
            ],
            "--recompute auto",
        ),
    ] {
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// The DP's pricing of a pair `J ⊆ I` from the ideals' summaries (cut-list merge for the
/// stage input, prefix difference for the forward compute) equals the node-level figures
/// of the stage `I \ J` (the scorer's `stage_inputs`, a direct sum), on every pair of
/// ideals of random training workloads.
#[test]
fn summaries_price_stage_inputs_exactly() {
    use dnnplace::model::contraction::Contraction;
    use dnnplace::model::recompute::stage_inputs;
    use dnnplace::solve::budget::Budget;
    use dnnplace::solve::ideal_cost::{PairCost, Summaries};
    use dnnplace::solve::ideals::Ideals;
    let mut pairs = 0;
    for seed in 0..200u64 {
        let Some(w) = workload(seed) else { continue };
        let c = Contraction::new(&w);
        let cost = PairCost::new(&w, &c).with_stage_inputs(&w, &c);
        let ideals = Ideals::enumerate(&c, usize::MAX, &Budget::unlimited()).expect("no limit");
        let summaries = Summaries::of_ideals(&cost, &ideals, &Budget::unlimited()).unwrap();
        let forward = cost.forward_sums(&ideals);
        for i in 0..ideals.len() {
            for j in (0..ideals.len()).filter(|&j| j != i && ideals.is_subset(j, i)) {
                let stage = ideals.get(i).difference(&ideals.get(j));
                let (inside, before): (Vec<bool>, Vec<bool>) = (0..c.len())
                    .map(|g| (stage.contains(&g), ideals.get(j).contains(g)))
                    .unzip();
                // The stage on acc0, J on acc1, the rest on a CPU.
                let p = Placement::new(
                    c.group_of
                        .iter()
                        .map(|&g| {
                            if inside[g] {
                                Device::Accelerator(0)
                            } else if before[g] {
                                Device::Accelerator(1)
                            } else {
                                Device::Cpu(0)
                            }
                        })
                        .collect(),
                );
                let want = stage_inputs(&w, &p)
                    .get(&Device::Accelerator(0))
                    .copied()
                    .unwrap_or(0.0);
                let got = cost.stage_input_bytes(summaries.crossing(i), summaries.crossing(j));
                assert!(
                    close(got, want),
                    "seed {seed}, ideals {i} ⊇ {j}: summaries {got}, nodes {want}"
                );
                let r: f64 = (0..w.len())
                    .filter(|&v| inside[c.group_of[v]] && !w.node(v).is_backward)
                    .map(|v| w.node(v).fpga_latency)
                    .sum();
                let got = cost.forward_compute(forward[i], forward[j], || stage.clone());
                assert!(
                    close(got, r),
                    "seed {seed}, ideals {i} ⊇ {j}: forward {got} vs {r}"
                );
                pairs += 1;
            }
        }
    }
    assert!(pairs > 2000, "{pairs} pairs");
}

//! Planning under a schedule's memory (`plan --schedule S --micro-batches m`): the DP
//! against exhaustive search of the same model, the scorer's figure against the
//! simulator's peaks, and the default model untouched.

mod common;

use common::{staged_workload, Staging};
use dnnplace::model::schedule::{Pipeline, Schedule};
use dnnplace::model::{Device, DeviceSet, NodeMemory, Placement, Workload};
use dnnplace::score::evaluate;
use dnnplace::simulate::{simulate, Settings};
use dnnplace::solve::{dp::Dp, milp::Ip, plan, Problem};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// A random workload (tests/common) with a stash on some nodes and a memory that the stash
/// often makes bind.
fn staged(seed: u64) -> Option<Workload> {
    staged_workload(
        seed,
        Staging {
            salt: 0x5eed,
            stash: 0.6,
            output_bytes: false,
            tight: 0.7,
        },
    )
}

/// The instance of `seed` ([`staged`]) under 1F1B (even seeds) or GPipe (odd), with 1–4
/// micro-batches.
fn staged_with_schedule(seed: u64) -> Option<(Workload, Pipeline)> {
    let schedule = if seed.is_multiple_of(2) {
        Schedule::OneFOneB
    } else {
        Schedule::GPipe
    };
    let m = 1 + (seed as usize / 2) % 4;
    staged(seed).map(|w| (w, Pipeline::new(schedule, m)))
}

/// In flight at stage `s` of `p` (docs/schedule.md), written out again for the oracle.
fn in_flight(schedule: Schedule, m: usize, p: usize, s: usize) -> usize {
    match schedule {
        Schedule::GPipe => m,
        _ => m.min(p - s),
    }
}

/// Exhaustive search of the planner's model: every contiguous valid assignment, every
/// order of its devices that the forward edges allow (the split's chain), each stage
/// holding Σ size + (c − 1)·Σ A at its place in the chain. The least TPS, or ∞.
fn brute_force(w: &Workload, pipeline: Pipeline) -> f64 {
    let d = w.devices();
    let devices: Vec<Device> = (0..d.accelerators)
        .map(Device::Accelerator)
        .chain((0..d.cpus).map(Device::Cpu))
        .collect();
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
            if some_order_fits(w, &assign, &used, pipeline, &devices) {
                best = e.max_load;
            }
        }
        // Next assignment.
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

fn some_order_fits(
    w: &Workload,
    assign: &[usize],
    used: &[usize],
    pipeline: Pipeline,
    devices: &[Device],
) -> bool {
    let p = used.len();
    let limit = w.devices().memory_per_accelerator_bytes;
    let mut order: Vec<usize> = used.to_vec();
    permutations(&mut order, 0, &mut |order| {
        let place = |dev: usize| order.iter().position(|&x| x == dev).unwrap();
        let respects = w.edges().iter().all(|e| {
            w.node(e.from).is_backward
                || w.node(e.to).is_backward
                || place(assign[e.from]) <= place(assign[e.to])
        });
        respects
            && order.iter().enumerate().all(|(s, &dev)| {
                if !devices[dev].is_accelerator() {
                    return true;
                }
                let c = in_flight(pipeline.schedule, pipeline.micro_batches, p, s);
                let bytes: f64 = (0..w.len())
                    .filter(|&v| assign[v] == dev)
                    .map(|v| {
                        NodeMemory::bytes_in_flight(
                            w.node(v).memory.as_ref(),
                            w.node(v).size_bytes,
                            c,
                        )
                    })
                    .sum();
                bytes <= limit
            })
    })
}

/// Whether `f` holds for some permutation of `xs[k..]` (Heap-style swaps).
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

/// The DP's optimum under GPipe and 1F1B equals exhaustive search on random small
/// instances, and its plan passes the scorer's schedule-memory check.
#[test]
fn dp_matches_brute_force_under_schedules() {
    let (mut checked, mut binding, mut infeasible) = (0, 0, 0);
    for seed in 0..700u64 {
        let Some((w, pipeline)) = staged_with_schedule(seed) else {
            continue;
        };
        let (schedule, m) = (pipeline.schedule, pipeline.micro_batches);
        let want = brute_force(&w, pipeline);
        let problem = Problem {
            pipeline: Some(pipeline),
            ..Problem::throughput(&w)
        };
        let got =
            plan(&Dp, &problem).unwrap_or_else(|e| panic!("seed {seed} {schedule} m={m}: {e}"));
        let value = got.objective(dnnplace::solve::Objective::Throughput);
        assert!(
            close(value, want) || (value.is_infinite() && want.is_infinite()),
            "seed {seed} {schedule} m={m}: dp {value}, brute force {want}"
        );
        let plain = plan(&Dp, &Problem::throughput(&w))
            .unwrap()
            .objective(dnnplace::solve::Objective::Throughput);
        assert!(
            value >= plain * (1.0 - 1e-9),
            "seed {seed}: a schedule never lowers the optimum"
        );
        if want.is_infinite() {
            infeasible += 1;
        } else if value > plain * (1.0 + 1e-9) || plain.is_infinite() {
            binding += 1;
        }
        checked += 1;
    }
    eprintln!("{checked} instances, {binding} where the schedule's memory raised the optimum, {infeasible} infeasible");
    assert!(
        checked >= 400 && binding >= 25,
        "{checked} checked, {binding} binding"
    );
}

/// Auto under a schedule: with the default limits it equals exhaustive search (GPipe by
/// MODEL.md's problem on the sizes with m stashes, 1F1B by the exact DP); when the exact
/// DP cannot run (an ideal limit of 1) its relaxation, layer-granular DP and restrictions
/// still give a plan that fits (`plan` re-checks the schedule's memory) and a bound below
/// the optimum.
#[test]
fn auto_under_schedules_matches_brute_force_and_falls_back() {
    use dnnplace::solve::{auto::Auto, Objective, Status};
    let (mut checked, mut fallback_plans, mut binding, mut fell_back) = (0, 0, 0, 0);
    for seed in 0..500u64 {
        let Some((w, pipeline)) = staged_with_schedule(seed) else {
            continue;
        };
        let (schedule, m) = (pipeline.schedule, pipeline.micro_batches);
        let want = brute_force(&w, pipeline);
        let problem = Problem {
            pipeline: Some(pipeline),
            ..Problem::throughput(&w)
        };
        let got = plan(&Auto::default(), &problem)
            .unwrap_or_else(|e| panic!("seed {seed} {schedule} m={m}: {e}"));
        let value = got.objective(Objective::Throughput);
        assert!(
            close(value, want) || (value.is_infinite() && want.is_infinite()),
            "seed {seed} {schedule} m={m}: auto {value}, brute force {want}"
        );
        let mut starved = problem.clone();
        starved.limits.max_ideals = 1;
        let fell = plan(&Auto::default(), &starved)
            .unwrap_or_else(|e| panic!("seed {seed} {schedule} m={m}, max ideals 1: {e}"));
        let value = fell.objective(Objective::Throughput);
        assert!(
            fell.outcome.bound <= want * (1.0 + 1e-9),
            "seed {seed} {schedule} m={m}: bound {} above the optimum {want}",
            fell.outcome.bound
        );
        if want.is_finite() && fell.outcome.placement.is_some() {
            assert!(
                value >= want * (1.0 - 1e-9),
                "seed {seed}: {value} below the optimum {want}"
            );
            if fell.outcome.status == Status::Optimal {
                assert!(
                    close(value, want),
                    "seed {seed}: proven {value}, optimum {want}"
                );
            }
            fallback_plans += 1;
        }
        if want.is_finite() && pipeline.needs_positions() {
            binding += 1;
        }
        if fell
            .outcome
            .stats
            .notes
            .iter()
            .any(|n| n.contains("the exact DP did not run"))
        {
            fell_back += 1;
        }
        checked += 1;
    }
    eprintln!("{checked} instances, {fallback_plans} plans with the DP starved, {binding} position-dependent, {fell_back} through the fallbacks");
    assert!(
        checked >= 300 && fallback_plans >= 150 && binding >= 50 && fell_back >= 50,
        "{checked}, {fallback_plans}, {binding}, {fell_back}"
    );
}

/// The contiguous IP under a schedule (stages of a chain, the used ones last, each holding
/// its stash once per micro-batch in flight at its place) proves the same optimum as the
/// exhaustive search of the planner's model, and its plan fits as the scorer counts it.
#[test]
fn ip_matches_brute_force_under_schedules() {
    let (mut checked, mut binding, mut infeasible) = (0, 0, 0);
    for seed in 0..400u64 {
        let Some(w) = staged(seed) else {
            continue;
        };
        let schedule = if seed % 3 == 0 {
            Schedule::GPipe
        } else {
            Schedule::OneFOneB
        };
        let m = 1 + (seed as usize / 3) % 4;
        let pipeline = Pipeline::new(schedule, m);
        let want = brute_force(&w, pipeline);
        let problem = Problem {
            pipeline: Some(pipeline),
            contiguous: true,
            ..Problem::throughput(&w)
        };
        let got = match plan(&Ip, &problem) {
            Ok(p) => p,
            Err(e) => panic!("seed {seed} {schedule} m={m}: {e}"),
        };
        let value = got.objective(dnnplace::solve::Objective::Throughput);
        if want.is_infinite() {
            assert!(
                got.outcome.placement.is_none(),
                "seed {seed} {schedule} m={m}: ip {value}, brute force finds none"
            );
            infeasible += 1;
        } else {
            assert!(
                close(value, want),
                "seed {seed} {schedule} m={m}: ip {value}, brute force {want}"
            );
            assert!(
                matches!(got.outcome.status, dnnplace::solve::Status::Optimal),
                "seed {seed}: {:?}",
                got.outcome.status
            );
            let plain = plan(&Dp, &Problem::throughput(&w))
                .unwrap()
                .objective(dnnplace::solve::Objective::Throughput);
            if value > plain * (1.0 + 1e-9) || plain.is_infinite() {
                binding += 1;
            }
        }
        checked += 1;
    }
    eprintln!("{checked} instances, {binding} where the schedule's memory raised the optimum, {infeasible} infeasible");
    assert!(
        checked >= 200 && binding >= 15,
        "{checked} checked, {binding} binding"
    );
}

/// One micro-batch in flight is MODEL.md's memory: the same optimum as without a schedule.
#[test]
fn one_micro_batch_is_the_default_model() {
    for seed in 0..200u64 {
        let Some(w) = staged(seed) else {
            continue;
        };
        let plain = plan(&Dp, &Problem::throughput(&w))
            .unwrap()
            .objective(dnnplace::solve::Objective::Throughput);
        for schedule in [Schedule::GPipe, Schedule::OneFOneB] {
            let problem = Problem {
                pipeline: Some(Pipeline::new(schedule, 1)),
                ..Problem::throughput(&w)
            };
            let v = plan(&Dp, &problem)
                .unwrap()
                .objective(dnnplace::solve::Objective::Throughput);
            assert!(
                close(v, plain) || (v.is_infinite() && plain.is_infinite()),
                "seed {seed} {schedule}: {v} vs {plain}"
            );
        }
    }
}

/// On a generated GPT-2 training graph whose memory binds under 1F1B, the DP's plan fits
/// by the scorer's figure, and the simulator's peak on every device equals that figure.
#[test]
fn simulated_peaks_equal_the_planners_figure() {
    let w = common::gpt2_training(0);
    let plain = plan(&Dp, &Problem::throughput(&w)).unwrap();
    for (schedule, m) in [(Schedule::OneFOneB, 8), (Schedule::GPipe, 4)] {
        let pipeline = Pipeline::new(schedule, m);
        // The memory at which the plain optimum's plan needs the most under the schedule,
        // less a little: the schedule-aware DP must find another split.
        let p0 = plain.outcome.placement.clone().unwrap();
        let need = dnnplace::score::pipeline_memory(&w, &p0, &pipeline)
            .unwrap()
            .iter()
            .map(|d| d.bytes)
            .fold(0.0, f64::max);
        let tight = w
            .with_devices(DeviceSet {
                memory_per_accelerator_bytes: (need * 0.97).floor(),
                ..*w.devices()
            })
            .unwrap();
        let planned = plan(
            &Dp,
            &Problem {
                pipeline: Some(pipeline),
                ..Problem::throughput(&tight)
            },
        )
        .unwrap();
        let placement = planned
            .outcome
            .placement
            .clone()
            .unwrap_or_else(|| panic!("{schedule}: no plan at 97% memory"));
        let figures = planned.pipeline_memory.clone().unwrap();
        let sim = simulate(
            &tight,
            &placement,
            &Settings {
                schedule,
                micro_batches: m,
            },
        )
        .unwrap();
        let mut compared = 0;
        for d in &sim.devices {
            let f = figures.iter().find(|x| x.device == d.device).unwrap();
            assert!(
                close(d.peak_memory_bytes, f.bytes),
                "{schedule} m={m} {}: simulated {} vs planned {}",
                d.device,
                d.peak_memory_bytes,
                f.bytes
            );
            assert!(f.bytes <= tight.devices().memory_per_accelerator_bytes);
            compared += 1;
        }
        assert!(compared >= 2, "{schedule}: {compared} devices");
    }
}

/// `--granularity layer` under a schedule: on a generated GPT-2 training graph whose memory
/// binds under 1F1B / GPipe at layer granularity, the plan keeps every layer whole, fits by
/// the scorer's figure on the original workload, the simulator's peaks equal that figure,
/// and it is no better than either relaxation (operator granularity under the schedule,
/// layer granularity without it).
#[test]
fn layer_granular_plans_under_a_schedule() {
    use dnnplace::costmodel::{
        find_profile, to_workload, transformer_graph, CostSettings, DType, Style, TransformerSpec,
    };
    use dnnplace::model::layers::Layers;
    use dnnplace::solve::layer_granular::plan_by_layers;
    use dnnplace::solve::Objective;
    let settings = CostSettings {
        accelerator: find_profile("a100-80gb", &[]).unwrap(),
        cpu: find_profile("cpu-core", &[]).unwrap(),
        dtype: DType::Fp16,
        training: true,
        accelerators: 4,
        cpus: 0,
    };
    let g = transformer_graph(
        &TransformerSpec::new(Style::Gpt2, 8, 256, 4, 128, 4),
        DType::Fp16,
    )
    .unwrap();
    let w = to_workload(&g, &settings).unwrap();
    let layers = Layers::new(&w).unwrap();
    let plain = plan_by_layers(&Dp, &Problem::throughput(&w), &layers).unwrap();
    let p0 = plain.outcome.placement.clone().unwrap();
    for (schedule, m) in [(Schedule::OneFOneB, 8), (Schedule::GPipe, 4)] {
        let pipeline = Pipeline::new(schedule, m);
        let need = dnnplace::score::pipeline_memory(&w, &p0, &pipeline)
            .unwrap()
            .iter()
            .map(|d| d.bytes)
            .fold(0.0, f64::max);
        let limit = (need * 0.97).floor();
        let tight = w
            .with_devices(DeviceSet {
                memory_per_accelerator_bytes: limit,
                ..*w.devices()
            })
            .unwrap();
        let problem = Problem {
            pipeline: Some(pipeline),
            ..Problem::throughput(&tight)
        };
        let planned = plan_by_layers(&Dp, &problem, &layers).unwrap();
        let placement = planned
            .outcome
            .placement
            .clone()
            .unwrap_or_else(|| panic!("{schedule}: no layer plan at 97% memory"));
        for layer in 0..layers.len() {
            let on: Vec<Device> = (0..w.len())
                .filter(|&v| layers.layer_of[v] == layer)
                .map(|v| placement.assignment[v])
                .collect();
            assert!(
                on.windows(2).all(|x| x[0] == x[1]),
                "{schedule}: layer {layer} split over {on:?}"
            );
        }
        let figures = planned.pipeline_memory.clone().unwrap();
        let sim = simulate(
            &tight,
            &placement,
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
                "{schedule} m={m} {}: simulated {} vs planned {}",
                d.device,
                d.peak_memory_bytes,
                f.bytes
            );
            assert!(
                d.peak_memory_bytes <= limit * (1.0 + 1e-12),
                "{schedule} {}: {} over {limit}",
                d.device,
                d.peak_memory_bytes
            );
        }
        let value = planned.objective(Objective::Throughput);
        let operator = plan(&Dp, &problem)
            .unwrap()
            .objective(Objective::Throughput);
        assert!(
            value >= operator * (1.0 - 1e-9),
            "{schedule}: layer plan {value} below the operator-granular {operator}"
        );
        assert!(
            value >= plain.objective(Objective::Throughput) * (1.0 - 1e-9),
            "{schedule}: {value} below the unconstrained layer plan"
        );
        eprintln!("{schedule} m={m}: layer plan {value} ms (operator granularity {operator}, no schedule {})", plain.objective(Objective::Throughput));
    }
}

/// `plan --schedule`: the figures in the JSON, and each refused combination exits 2 with a
/// message naming the flag.
#[test]
fn plan_command_line() {
    use std::process::Command;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.json");
    // Four layers of 10 bytes, 4 of them stashed; 2 accelerators of 30 bytes.
    let node = |id: i64| {
        format!(
            r#"{{"id":{id},"fpgaLatency":{},"cpuLatency":50,"size":10,"activationBytes":4}}"#,
            1 + id % 2
        )
    };
    let json = format!(
        r#"{{"maxSizePerFPGA":30,"maxFPGAs":2,"maxCPUs":0,"nodes":[{}],"edges":[{{"sourceId":1,"destId":2,"cost":0.5}},{{"sourceId":2,"destId":3,"cost":0.5}},{{"sourceId":3,"destId":4,"cost":0.5}}]}}"#,
        (1..=4).map(node).collect::<Vec<_>>().join(",")
    );
    std::fs::write(&path, json).unwrap();
    let w = path.to_str().unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_dnnplace"))
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&[
        "plan",
        w,
        "--schedule",
        "1f1b",
        "--micro-batches",
        "4",
        "--json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let devices = v["pipeline"]["devices"].as_array().unwrap();
    // Two stages: the first holds min(4, 2) = 2 micro-batches, the last 1; a stage of k
    // layers needs 10k + 4k·(c − 1) bytes, so the first stage holds at most 2 layers
    // (28 bytes) and the last at most 3 (30 bytes).
    let mut in_flight: Vec<u64> = devices
        .iter()
        .map(|d| d["inFlight"].as_u64().unwrap())
        .collect();
    in_flight.sort_unstable();
    assert_eq!(in_flight, [1, 2]);
    for d in devices {
        let c = d["inFlight"].as_f64().unwrap();
        let resident = d["residentBytes"].as_f64().unwrap();
        let stash = d["stashBytes"].as_f64().unwrap();
        assert_eq!(d["memoryBytes"].as_f64().unwrap(), resident + c * stash);
        assert!(d["memoryBytes"].as_f64().unwrap() <= 30.0);
    }
    // At layer granularity (each node its own layer here) the same figures come out.
    let out = run(&[
        "plan",
        w,
        "--schedule",
        "1f1b",
        "--micro-batches",
        "4",
        "--granularity",
        "layer",
        "--json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let layered: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(layered["pipeline"], v["pipeline"]);
    // Under GPipe every stage holds 4 micro-batches: 10 + 12 = 22 bytes a layer, one layer a stage.
    let out = run(&["plan", w, "--schedule", "gpipe", "--micro-batches", "4"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no feasible placement"));
    for (args, needle) in [
        (
            vec!["--schedule", "interleaved:2", "--method", "greedy"],
            "one contiguous stage",
        ),
        (
            vec!["--schedule", "1f1b", "--method", "greedy"],
            "only --method dp, auto and ip",
        ),
        (
            vec!["--schedule", "1f1b", "--method", "ip", "--non-contiguous"],
            "non-contiguous",
        ),
        (
            vec!["--micro-batches", "4"],
            "--micro-batches 4 needs --schedule",
        ),
        (
            vec!["--schedule", "1f1b", "--micro-batches", "0"],
            "--micro-batches 0 is out of range",
        ),
    ] {
        let out = run(&[&["plan", w][..], &args[..]].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

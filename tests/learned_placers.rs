//! Tests of the search placers (`rl`: policy gradient, HDP-style; `genetic`: BRKGA): the
//! brute-force optimum on tiny instances, valid and re-scored plans on random ones, the
//! time limit, the memory budget, seed reproducibility, and the decoders' promises.

mod common;

use common::{random_workload, Shape};
use dnnplace::model::{Device, Workload};
use dnnplace::score::evaluate;
use dnnplace::solve::brute_force::BruteForce;
use dnnplace::solve::budget::Budget;
use dnnplace::solve::learned::brkga::Genetic;
use dnnplace::solve::learned::decode::{self, Devices};
use dnnplace::solve::learned::policy_gradient::{ChainOrder, PolicyGradient};
use dnnplace::solve::learned::{evaluations_within, unit_interval, Units};
use dnnplace::solve::TracePoint;
use dnnplace::solve::{plan, Limits, Method, Objective, Problem, Status, StopReason};

fn problem(w: &Workload, objective: Objective, contiguous: bool, limits: Limits) -> Problem<'_> {
    Problem {
        workload: w,
        devices: dnnplace::solve::Devices::of(w),
        objective,
        contiguous,
        limits,
        pipeline: None,
    }
}

fn limits(seed: u64, steps: usize) -> Limits {
    Limits {
        seed,
        search_steps: Some(steps),
        ..Limits::default()
    }
}

fn tiny(seed: u64) -> Option<Workload> {
    random_workload(
        seed,
        Shape {
            max_nodes: 6,
            max_accelerators: 2,
            max_cpus: 1,
            ..Shape::default()
        },
    )
}

/// The brute-force optimum of `p` (∞ when infeasible).
fn optimum(p: &Problem) -> f64 {
    let b = plan(&BruteForce, p).expect("brute force");
    b.objective(p.objective)
}

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Runs `method` on tiny instances and counts those where it meets brute force.
fn reaches_optimum(method: &dyn Method, contiguous: bool, steps: usize) {
    let (mut checked, mut met) = (0, 0);
    for seed in 0..40u64 {
        let Some(w) = tiny(seed) else { continue };
        // Latency: brute force enumerates every grouping of the CPU classes onto cores
        // (seed 17: all on one core, 52.75, the contiguous optimum). rl's contiguous chain
        // has one CPU slot for latency (one CPU label), so it cannot put CPU units on both
        // sides of an accelerator (seed 33: 21.25 against 20.25); it is checked on the
        // non-contiguous problem only.
        let latency =
            (!contiguous || method.name() != "rl").then_some(Objective::Latency { pieces: 1 });
        let objectives = [Objective::Throughput, Objective::Sync];
        for objective in objectives.into_iter().chain(latency) {
            let p = problem(&w, objective, contiguous, limits(seed, steps));
            let best = optimum(&p);
            let got = plan(method, &p).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            if !best.is_finite() {
                assert!(
                    got.outcome.placement.is_none(),
                    "seed {seed}: a plan where brute force has none"
                );
                continue;
            }
            checked += 1;
            let value = got.objective(objective);
            assert!(
                value >= best * (1.0 - 1e-9),
                "seed {seed}: {value} below the optimum {best}"
            );
            assert!(
                got.outcome.bound <= best * (1.0 + 1e-9),
                "seed {seed}: bound above the optimum"
            );
            if close(value, best) {
                met += 1;
            } else {
                panic!(
                    "{} ({}contiguous, {objective:?}) seed {seed}: {value}, brute force {best}",
                    method.name(),
                    if contiguous { "" } else { "non-" }
                );
            }
        }
    }
    assert!(checked >= 20, "only {checked} tiny instances checked");
    assert_eq!(met, checked);
}

#[test]
fn policy_gradient_reaches_the_brute_force_optimum_on_tiny_instances() {
    reaches_optimum(&PolicyGradient, false, 2000);
    // Contiguous: the chain order of accelerators and CPUs is drawn too (module docs), so
    // instances with CPUs are included.
    reaches_optimum(&PolicyGradient, true, 2000);
}

#[test]
fn brkga_reaches_the_brute_force_optimum_on_tiny_instances() {
    reaches_optimum(&Genetic, false, 60);
    reaches_optimum(&Genetic, true, 60);
}

#[test]
fn every_plan_on_random_instances_is_valid_and_rescored_equal() {
    let shape = Shape {
        max_nodes: 14,
        max_accelerators: 4,
        max_cpus: 2,
        ..Shape::default()
    };
    let mut plans = 0;
    for seed in 100..160u64 {
        let Some(w) = random_workload(seed, shape) else {
            continue;
        };
        for (method, steps) in [(&PolicyGradient as &dyn Method, 200), (&Genetic, 10)] {
            for contiguous in [true, false] {
                for objective in [
                    Objective::Throughput,
                    Objective::Sync,
                    Objective::Latency { pieces: 1 },
                ] {
                    let p = problem(&w, objective, contiguous, limits(seed, steps));
                    // `plan` re-scores and fails on a broken rule or a disagreeing objective.
                    let got = plan(method, &p).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                    let Some(placement) = &got.outcome.placement else {
                        assert!(matches!(got.outcome.status, Status::NoPlan { .. }));
                        continue;
                    };
                    plans += 1;
                    let latency = matches!(objective, Objective::Latency { .. });
                    let e = evaluate(&w, placement, latency);
                    assert!(e.is_valid(), "seed {seed}: {:?}", e.violations);
                    assert!(
                        !contiguous || e.is_contiguous(),
                        "seed {seed}: not contiguous"
                    );
                    assert!(close(objective.value(&e), got.outcome.objective));
                    assert!(got.outcome.bound <= got.outcome.objective);
                    // The trace ends at the plan returned, falling all the way.
                    let trace = &got.outcome.stats.trace;
                    assert!(close(
                        trace.last().unwrap().objective,
                        got.outcome.objective
                    ));
                    assert!(trace
                        .windows(2)
                        .all(|t| t[1].objective < t[0].objective
                            && t[1].evaluations > t[0].evaluations));
                }
            }
        }
    }
    assert!(plans >= 200, "only {plans} plans checked");
}

fn wide(seed: u64) -> Workload {
    random_workload(
        seed,
        Shape {
            max_nodes: 60,
            max_accelerators: 4,
            max_cpus: 2,
            tight_memory: false,
            ..Shape::default()
        },
    )
    .expect("a valid draw")
}

#[test]
fn the_time_limit_holds_and_is_reported() {
    let w = (0..50)
        .filter_map(|s| {
            random_workload(
                s,
                Shape {
                    max_nodes: 60,
                    tight_memory: false,
                    ..Shape::default()
                },
            )
        })
        .max_by_key(|w| w.len())
        .unwrap_or_else(|| wide(1));
    for method in [&PolicyGradient as &dyn Method, &Genetic] {
        let mut l = limits(3, 1_000_000_000);
        l.time_limit_s = Some(0.3);
        let p = problem(&w, Objective::Throughput, true, l);
        let started = std::time::Instant::now();
        let got = plan(method, &p).expect("a plan");
        let elapsed = started.elapsed().as_secs_f64();
        // A generous bound: one step (one scorer call on 60 nodes) is far below a second.
        assert!(elapsed < 0.3 + 10.0, "{}: {elapsed} s", method.name());
        match &got.outcome.status {
            Status::Feasible { reason } => assert_eq!(reason, &StopReason::TimeLimit),
            Status::Optimal => {}
            other => panic!("{}: {other:?}", method.name()),
        }
    }
}

#[test]
fn a_memory_budget_too_small_for_the_tables_stops_before_the_search() {
    let w = tiny(2).or_else(|| tiny(3)).expect("a draw");
    for method in [&PolicyGradient as &dyn Method, &Genetic] {
        let mut l = limits(1, 100);
        l.memory_budget_bytes = Some(8.0);
        let p = problem(&w, Objective::Throughput, false, l);
        let got = plan(method, &p).expect("an outcome");
        assert!(got.outcome.placement.is_none());
        match &got.outcome.status {
            Status::NoPlan { reason } => assert_eq!(reason.code(), "memory-budget"),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn the_same_seed_gives_the_same_plan_and_trace() {
    for seed in 0..6u64 {
        let Some(w) = random_workload(
            seed + 500,
            Shape {
                max_nodes: 20,
                ..Shape::default()
            },
        ) else {
            continue;
        };
        for method in [&PolicyGradient as &dyn Method, &Genetic] {
            for contiguous in [true, false] {
                let run = || {
                    let p = problem(&w, Objective::Throughput, contiguous, limits(seed, 40));
                    let o = plan(method, &p).expect("a run").outcome;
                    let trace: Vec<(u64, f64)> = o
                        .stats
                        .trace
                        .iter()
                        .map(|t| (t.evaluations, t.objective))
                        .collect();
                    (o.placement, trace, o.stats.evaluations)
                };
                assert_eq!(run(), run(), "{} seed {seed}", method.name());
            }
        }
    }
}

#[test]
fn decoders_keep_the_rules_and_contiguity() {
    let mut rng = dnnplace::solve::learned::seeded(9);
    let mut decoded = 0;
    for seed in 200..260u64 {
        let Some(w) = random_workload(
            seed,
            Shape {
                max_nodes: 12,
                ..Shape::default()
            },
        ) else {
            continue;
        };
        let d = w.devices();
        let devices = Devices::machine(d.accelerators, d.cpus, d.memory_per_accelerator_bytes);
        for contiguous in [true, false] {
            let units = Units::new(&w, contiguous, 256, &Budget::unlimited());
            let n = if contiguous {
                decode::contiguous_keys(units.len(), &devices)
            } else {
                units.len()
            };
            for _ in 0..30 {
                let keys: Vec<f64> = (0..n).map(|_| unit_interval(&mut rng)).collect();
                let plan = if contiguous {
                    decode::contiguous(&units, &keys, &devices)
                } else {
                    decode::non_contiguous(&units, &keys, &devices)
                };
                let Some(device) = plan else { continue };
                decoded += 1;
                for (g, dev) in device.iter().enumerate() {
                    let unit = &units.grouping.groups[g];
                    assert!(
                        !matches!(dev, Device::Accelerator(_)) || unit.supported_on_accelerator,
                        "seed {seed}: a CPU-only unit on an accelerator"
                    );
                }
                let e = evaluate(&w, &units.grouping.placement(&device), false);
                assert!(e.is_valid(), "seed {seed}: {:?}", e.violations);
                assert!(
                    !contiguous || e.is_contiguous(),
                    "seed {seed}: {:?}",
                    e.non_contiguous
                );
            }
            if contiguous {
                // The policy's labels: any labels give a contiguous plan, with each
                // device's count kept, in the fixed chain order (by_counts) and in a drawn
                // one (ChainOrder::place).
                let count = devices.count();
                let mut order = ChainOrder::new(devices.k, devices.l);
                for round in 0..60 {
                    let labels: Vec<usize> = (0..units.len())
                        .map(|_| ((unit_interval(&mut rng) * count as f64) as usize).min(count - 1))
                        .collect();
                    let stage = if round % 2 == 0 {
                        decode::by_counts(&units, &labels, count)
                    } else {
                        order.place(&units, &labels, &mut rng)
                    };
                    for i in 0..count {
                        let sampled = labels.iter().filter(|&&l| l == i).count();
                        assert_eq!(stage.iter().filter(|&&s| s == i).count(), sampled);
                    }
                    let device: Vec<Device> = stage
                        .iter()
                        .map(|&i| dnnplace::solve::learned::device_at(i, devices.k))
                        .collect();
                    let e = evaluate(&w, &units.grouping.placement(&device), false);
                    assert!(e.is_contiguous(), "seed {seed}: {:?}", e.non_contiguous);
                }
            }
        }
    }
    assert!(decoded >= 500, "only {decoded} decoded");
}

#[test]
fn evaluations_within_reads_the_first_point_close_enough() {
    let t = |evaluations, objective| TracePoint {
        time_s: 0.0,
        evaluations,
        objective,
    };
    let trace = [t(1, 20.0), t(7, 10.4), t(30, 10.05), t(90, 10.0)];
    assert_eq!(evaluations_within(&trace, 10.0, 0.05), Some(7));
    assert_eq!(evaluations_within(&trace, 10.0, 0.01), Some(30));
    assert_eq!(evaluations_within(&trace, 10.0, 0.0), Some(90));
    assert_eq!(evaluations_within(&trace, 9.0, 0.01), None);
}

#[test]
fn sigint_stops_both_with_their_best_plan_so_far() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let nodes: Vec<String> = (1..=300)
        .map(|i| {
            format!(
                r#"{{"id":{i},"fpgaLatency":{},"cpuLatency":{}}}"#,
                1 + i % 7,
                9 + i % 3
            )
        })
        .collect();
    let edges: Vec<String> = (1..300)
        .map(|i| format!(r#"{{"sourceId":{i},"destId":{},"cost":0.5}}"#, i + 1))
        .collect();
    let path = dir.path().join("chain.json");
    let json = format!(
        r#"{{"maxSizePerFPGA":1e12,"maxFPGAs":4,"maxCPUs":1,"nodes":[{}],"edges":[{}]}}"#,
        nodes.join(","),
        edges.join(",")
    );
    std::fs::write(&path, json).unwrap();
    for method in ["rl", "genetic"] {
        let args = [
            "plan",
            path.to_str().unwrap(),
            "--method",
            method,
            "--steps",
            "1000000",
            "--json",
        ];
        let (run, answered) = common::interrupted_run(
            std::process::Command::new(env!("CARGO_BIN_EXE_dnnplace")).args(args),
            Duration::from_millis(800),
        );
        assert_eq!(
            run.status.code(),
            Some(0),
            "{method}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
        assert_eq!(v["stopReason"], "interrupted", "{method}: {v}");
        assert_eq!(v["valid"], true);
        // Generous for a loaded machine: one step is milliseconds here.
        assert!(answered < Duration::from_secs(10), "{method}: {answered:?}");
    }
}

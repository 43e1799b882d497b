//! Tests of the baselines: answers known by hand, by brute force or by the DP.

mod baseline_gen;
mod common;

use baseline_gen::{random_workload, Shape, Spec};

fn paper_dir() -> Option<std::path::PathBuf> {
    common::shared_dir("paper")
}
use dnnplace::io::{parse_placement, parse_workload, read_placement, read_workload};
use dnnplace::model::{Device, Placement};
use dnnplace::solve::baselines::expert::Expert;
use dnnplace::solve::baselines::greedy::Greedy;
use dnnplace::solve::baselines::local_search::{search, ClassModel, LocalSearch, State};
use dnnplace::solve::baselines::partitioner::Partitioner;
use dnnplace::solve::baselines::pipedream::{PipeDream, PipeDreamTopo};
use dnnplace::solve::baselines::single::Single;
use dnnplace::solve::baselines::SplitMix64;
use dnnplace::solve::brute_force::BruteForce;
use dnnplace::solve::dp::Dp;
use dnnplace::solve::{plan, Limits, Method, Objective, Problem, SolveError, Status};

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn problem(w: &dnnplace::model::Workload, contiguous: bool) -> Problem<'_> {
    Problem {
        workload: w,
        devices: dnnplace::solve::Devices::of(w),
        objective: Objective::Throughput,
        contiguous,
        limits: Limits::default(),
        pipeline: None,
    }
}

fn value(method: &dyn Method, p: &Problem) -> f64 {
    let plan = plan(method, p).unwrap_or_else(|e| panic!("{}: {e}", method.name()));
    plan.objective(p.objective)
}

#[test]
fn pipedream_is_the_contiguous_optimum_on_chains() {
    let mut checked = 0;
    for seed in 0..150u64 {
        let n = 3 + (seed % 7) as usize;
        let mut spec = Spec::new(
            n,
            Shape::Chain,
            1 + (seed % 3) as usize,
            (seed % 2) as usize + usize::from(seed % 5 == 0),
        );
        spec.memory_fraction = [2.0, 0.6, 0.4][(seed % 3) as usize];
        let Some(w) = random_workload(&spec, seed) else {
            continue;
        };
        let p = problem(&w, true);
        let dp = value(&Dp, &p);
        for method in [&PipeDream as &dyn Method, &PipeDreamTopo] {
            let v = value(method, &p);
            assert!(
                close(v, dp),
                "seed {seed}: {} gives {v}, the DP {dp}",
                method.name()
            );
        }
        if !dp.is_finite() {
            continue;
        }
        if n <= 8 {
            let brute = value(&BruteForce, &p);
            assert!(
                close(brute, dp),
                "seed {seed}: brute force {brute}, DP {dp}"
            );
        }
        checked += 1;
    }
    assert!(checked > 100, "only {checked} instances were feasible");
}

#[test]
fn pipedream_is_never_better_than_the_dp_on_dags() {
    for seed in 0..80u64 {
        let mut spec = Spec::new(
            4 + (seed % 8) as usize,
            Shape::Dag,
            2 + (seed % 2) as usize,
            1,
        );
        spec.paired_classes = 0.2;
        let Some(w) = random_workload(&spec, 1000 + seed) else {
            continue;
        };
        let p = problem(&w, true);
        let dp = value(&Dp, &p);
        for method in [&PipeDream as &dyn Method, &PipeDreamTopo] {
            let v = value(method, &p);
            assert!(
                v >= dp * (1.0 - 1e-9),
                "seed {seed}: {} gives {v} below the DP optimum {dp}",
                method.name()
            );
        }
    }
}

#[test]
fn pipedream_fuses_a_diamond_into_its_tails() {
    // a → {b, c} → d: one biconnected component; its tails {a, b, c} form one unit, so
    // with two accelerators the split is {a, b, c} | {d}.
    let text = r#"{"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 0,
      "nodes": [{"id": 1, "fpgaLatency": 1, "cpuLatency": 9},
                {"id": 2, "fpgaLatency": 4, "cpuLatency": 9},
                {"id": 3, "fpgaLatency": 4, "cpuLatency": 9},
                {"id": 4, "fpgaLatency": 1, "cpuLatency": 9}],
      "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5}, {"sourceId": 1, "destId": 3, "cost": 0.5},
                {"sourceId": 2, "destId": 4, "cost": 0.25}, {"sourceId": 3, "destId": 4, "cost": 0.125}]}"#;
    let w = parse_workload(text).unwrap();
    let p = problem(&w, true);
    let plan = plan(&PipeDream, &p).unwrap();
    // acc0 = 1 + 4 + 4 + out(b) 0.25 + out(c) 0.125; acc1 = 1 + in 0.375.
    assert!(
        close(plan.outcome.objective, 9.375),
        "{}",
        plan.outcome.objective
    );
    let a = &plan.outcome.placement.as_ref().unwrap().assignment;
    assert!(a[0] == a[1] && a[1] == a[2] && a[2] != a[3]);
}

#[test]
fn local_search_is_valid_never_worse_than_its_starts_and_deterministic() {
    for seed in 0..60u64 {
        let mut spec = Spec::new(
            5 + (seed % 9) as usize,
            Shape::Dag,
            1 + (seed % 3) as usize,
            (seed % 2) as usize,
        );
        spec.memory_fraction = [2.0, 0.5, 0.35][(seed % 3) as usize];
        spec.unsupported = if seed % 4 == 0 { 0.2 } else { 0.0 };
        spec.paired_classes = 0.25;
        let Some(w) = random_workload(&spec, 2000 + seed) else {
            continue;
        };
        let mut p = problem(&w, false);
        p.limits.restarts = 4;
        p.limits.seed = seed;
        let first = match plan(&LocalSearch, &p) {
            Ok(plan) => plan,
            Err(e) => panic!("seed {seed}: local search returned an invalid plan: {e}"),
        };
        if let Some(e) = &first.evaluation {
            assert!(e.is_valid(), "seed {seed}: {:?}", e.violations);
        } else {
            assert!(matches!(first.outcome.status, Status::Infeasible { .. }));
            continue;
        }
        let s = search(&w, &p.limits);
        for r in &s.restarts {
            assert!(
                r.final_tps <= r.start_tps * (1.0 + 1e-9),
                "seed {seed}: a restart went from {} to {}",
                r.start_tps,
                r.final_tps
            );
        }
        let best = s
            .restarts
            .iter()
            .map(|r| r.final_tps)
            .fold(f64::INFINITY, f64::min);
        assert!(close(best, first.outcome.objective));
        let second = plan(&LocalSearch, &p).unwrap();
        assert_eq!(
            first.outcome.placement, second.outcome.placement,
            "seed {seed}: not deterministic"
        );
        if w.len() <= 9 {
            let optimum = value(&BruteForce, &p);
            assert!(first.outcome.objective >= optimum * (1.0 - 1e-9));
        }
    }
}

#[test]
fn local_search_prices_every_move_like_the_scorer() {
    // The incremental loads of every candidate move, and the state after applying it,
    // against the evaluator's loads of the moved plan.
    for seed in 0..40u64 {
        let mut spec = Spec::new(
            4 + (seed % 8) as usize,
            Shape::Dag,
            1 + (seed % 3) as usize,
            (seed % 3) as usize,
        );
        spec.paired_classes = 0.3;
        let Some(w) = random_workload(&spec, 5000 + seed) else {
            continue;
        };
        let m = ClassModel::new(&w);
        let (k, l) = (w.devices().accelerators, w.devices().cpus);
        let device_of = |i: usize| {
            if i < k {
                Device::Accelerator(i)
            } else {
                Device::Cpu(i - k)
            }
        };
        let mut rng = SplitMix64::new(seed);
        let start: Vec<usize> = (0..m.len()).map(|_| rng.below(k + l)).collect();
        let mut state = State::new(&m, k, l, f64::INFINITY, start);
        for round in 0..3 {
            let loads_of = |assignment: &[usize]| {
                let p = m.placement(&assignment.iter().map(|&i| device_of(i)).collect::<Vec<_>>());
                let e = dnnplace::score::evaluate(&w, &p, false);
                (0..k + l)
                    .map(|i| {
                        e.devices
                            .iter()
                            .find(|d| d.device == device_of(i))
                            .map_or(0.0, |d| d.load)
                    })
                    .collect::<Vec<f64>>()
            };
            let now = loads_of(&state.device);
            for (i, (&a, &b)) in state.loads().iter().zip(&now).enumerate() {
                assert!(
                    (a - b).abs() < 1e-9,
                    "seed {seed} round {round}: device {i} incremental {a}, scorer {b}"
                );
            }
            for x in 0..m.len() {
                for b in 0..k + l {
                    let a = state.device[x];
                    if a == b {
                        continue;
                    }
                    let (la, lb) = state.priced(x, b);
                    let mut moved = state.device.clone();
                    moved[x] = b;
                    let after = loads_of(&moved);
                    assert!(
                        (la - after[a]).abs() < 1e-9,
                        "seed {seed}: moving class {x} {a}->{b}: source {la} vs {}",
                        after[a]
                    );
                    assert!(
                        (lb - after[b]).abs() < 1e-9,
                        "seed {seed}: moving class {x} {a}->{b}: target {lb} vs {}",
                        after[b]
                    );
                }
            }
            let x = rng.below(m.len());
            let b = (state.device[x] + 1 + rng.below(k + l - 1)) % (k + l);
            if k + l > 1 {
                let (la, lb) = state.priced(x, b);
                state.apply(x, b, la, lb);
            }
        }
    }
}

#[test]
fn partitioner_and_greedy_plans_are_valid() {
    for seed in 0..60u64 {
        let mut spec = Spec::new(
            4 + (seed % 20) as usize,
            Shape::Dag,
            1 + (seed % 4) as usize,
            1 + (seed % 2) as usize,
        );
        spec.memory_fraction = [2.0, 0.5, 0.3][(seed % 3) as usize];
        spec.unsupported = if seed % 3 == 0 { 0.25 } else { 0.0 };
        spec.paired_classes = 0.3;
        let Some(w) = random_workload(&spec, 3000 + seed) else {
            continue;
        };
        let mut runs: Vec<(&dyn Method, Problem)> = vec![
            (&Partitioner, problem(&w, false)),
            (&Greedy, problem(&w, false)),
        ];
        runs.push((
            &Greedy,
            Problem {
                objective: Objective::Latency { pieces: 1 },
                ..problem(&w, true)
            },
        ));
        for (method, p) in runs {
            match plan(method, &p) {
                Ok(plan) => match &plan.evaluation {
                    Some(e) => assert!(
                        e.is_valid(),
                        "seed {seed}: {}: {:?}",
                        method.name(),
                        e.violations
                    ),
                    None => assert!(matches!(plan.outcome.status, Status::Infeasible { .. })),
                },
                Err(e) => panic!("seed {seed}: {}: {e}", method.name()),
            }
        }
    }
}

#[test]
fn heuristics_are_valid_on_random_training_graphs() {
    // The shared generator: forward and backward nodes, colour classes spanning both,
    // CPU-only nodes, tight memory.
    let mut ran = 0;
    for seed in 0..300u64 {
        let Some(w) = common::random_workload(
            seed,
            common::Shape {
                max_nodes: 12,
                ..Default::default()
            },
        ) else {
            continue;
        };
        let runs: Vec<(&dyn Method, Problem)> = vec![
            (&LocalSearch, problem(&w, false)),
            (&Partitioner, problem(&w, false)),
            (&Greedy, problem(&w, true)),
            (&PipeDream, problem(&w, true)),
            (&PipeDreamTopo, problem(&w, true)),
            (&Single, problem(&w, true)),
        ];
        for (method, p) in runs {
            match plan(method, &p) {
                Ok(plan) => {
                    if let Some(e) = &plan.evaluation {
                        assert!(
                            e.is_valid(),
                            "seed {seed}: {}: {:?}",
                            method.name(),
                            e.violations
                        );
                        ran += 1;
                    }
                }
                Err(e) => panic!("seed {seed}: {}: {e}", method.name()),
            }
        }
    }
    assert!(ran > 500, "only {ran} plans");
}

#[test]
fn greedy_fills_accelerators_in_topological_order() {
    // Chain of four nodes of 40 bytes, accelerators of 100 bytes: {1,2} {3,4} with two
    // accelerators; with one accelerator {1,2} and the rest on the CPU.
    let text = |k: usize| {
        format!(
            r#"{{"maxSizePerFPGA": 100, "maxFPGAs": {k}, "maxCPUs": 1,
      "nodes": [{{"id": 1, "fpgaLatency": 1, "cpuLatency": 10, "size": 40}},
                {{"id": 2, "fpgaLatency": 2, "cpuLatency": 10, "size": 40}},
                {{"id": 3, "fpgaLatency": 3, "cpuLatency": 10, "size": 40}},
                {{"id": 4, "fpgaLatency": 4, "cpuLatency": 10, "size": 40}}],
      "edges": [{{"sourceId": 1, "destId": 2, "cost": 1}}, {{"sourceId": 2, "destId": 3, "cost": 1}},
                {{"sourceId": 3, "destId": 4, "cost": 1}}]}}"#
        )
    };
    let w = parse_workload(&text(2)).unwrap();
    let plan2 = plan(&Greedy, &problem(&w, true)).unwrap();
    let a = plan2.outcome.placement.unwrap().assignment;
    assert_eq!(
        a,
        vec![
            Device::Accelerator(0),
            Device::Accelerator(0),
            Device::Accelerator(1),
            Device::Accelerator(1)
        ]
    );
    let w = parse_workload(&text(1)).unwrap();
    let plan1 = plan(&Greedy, &problem(&w, true)).unwrap();
    let a = plan1.outcome.placement.unwrap().assignment;
    assert_eq!(
        a,
        vec![
            Device::Accelerator(0),
            Device::Accelerator(0),
            Device::Cpu(0),
            Device::Cpu(0)
        ]
    );
    // acc0 = 1 + 2 + out(2) 1 = 4; cpu = 20.
    assert!(close(plan1.outcome.objective, 20.0));
}

#[test]
fn single_is_the_sum_of_accelerator_latencies_when_it_fits() {
    for seed in 0..40u64 {
        let mut spec = Spec::new(3 + (seed % 10) as usize, Shape::Dag, 2, 1);
        spec.memory_fraction = if seed % 2 == 0 { 1.0 } else { 0.7 };
        let Some(w) = random_workload(&spec, 4000 + seed) else {
            continue;
        };
        let sum: f64 = w.nodes().iter().map(|n| n.fpga_latency).sum();
        for objective in [Objective::Throughput, Objective::Latency { pieces: 1 }] {
            let p = Problem {
                objective,
                ..problem(&w, true)
            };
            let plan = plan(&Single, &p).unwrap();
            if seed % 2 == 0 {
                assert!(
                    close(plan.outcome.objective, sum),
                    "seed {seed}: {} vs {sum}",
                    plan.outcome.objective
                );
            } else {
                assert!(
                    matches!(plan.outcome.status, Status::Infeasible { .. }),
                    "seed {seed}: should not fit"
                );
            }
        }
    }
}

#[test]
fn expert_scores_a_hand_computed_split() {
    // a → b → c → d, plus a → c. Split {a, b} | {c, d}.
    // acc0: 1 + 2 + Out{a (cost 0.5, to c), b (cost 0.25)} = 3.75
    // acc1: 3 + 4 + In{a, b} = 7.75; latency: piece 0 ends at 3.75, piece 1 at 3.75 + 7.75.
    let text = r#"{"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 1,
      "nodes": [{"id": 1, "fpgaLatency": 1, "cpuLatency": 10},
                {"id": 2, "fpgaLatency": 2, "cpuLatency": 10},
                {"id": 3, "fpgaLatency": 3, "cpuLatency": 10},
                {"id": 4, "fpgaLatency": 4, "cpuLatency": 10}],
      "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5}, {"sourceId": 1, "destId": 3, "cost": 0.5},
                {"sourceId": 2, "destId": 3, "cost": 0.25}, {"sourceId": 3, "destId": 4, "cost": 0.125}]}"#;
    let w = parse_workload(text).unwrap();
    let split = parse_placement(
        r#"{"fpgas": [{"nodes": [1, 2]}, {"nodes": [3, 4]}], "cpus": []}"#,
        &w,
    )
    .unwrap();
    let expert = Expert::new(split, "hand");
    let tps = plan(&expert, &problem(&w, true)).unwrap();
    assert!(
        close(tps.outcome.objective, 7.75),
        "{}",
        tps.outcome.objective
    );
    let latency = Problem {
        objective: Objective::Latency { pieces: 1 },
        ..problem(&w, true)
    };
    assert!(close(
        plan(&expert, &latency).unwrap().outcome.objective,
        11.5
    ));
    // Without a split the method declines.
    assert!(Expert::default().supports(&problem(&w, true)).is_err());
    // A non-contiguous split is declined for contiguous problems, accepted otherwise.
    let split = parse_placement(
        r#"{"fpgas": [{"nodes": [1, 3]}, {"nodes": [2, 4]}], "cpus": []}"#,
        &w,
    )
    .unwrap();
    let expert = Expert::new(split, "hand");
    assert!(expert.supports(&problem(&w, true)).is_err());
    assert!(plan(&expert, &problem(&w, false)).is_ok());
}

/// Contiguous baselines on one published workload: (name, TPS).
fn contiguous_baselines(
    w: &dnnplace::model::Workload,
    expert: Option<Placement>,
) -> Vec<(String, f64)> {
    let p = problem(w, true);
    let mut methods: Vec<Box<dyn Method>> = vec![
        Box::new(PipeDream),
        Box::new(PipeDreamTopo),
        Box::new(Greedy),
        Box::new(Single),
    ];
    if let Some(split) = expert {
        methods.push(Box::new(Expert::new(split, "expert")));
    }
    let mut out = Vec::new();
    for m in methods {
        if m.supports(&p).is_err() {
            continue;
        }
        let plan = plan(m.as_ref(), &p).unwrap_or_else(|e| panic!("{}: {e}", m.name()));
        if plan.evaluation.is_some() {
            out.push((m.name().to_string(), plan.objective(Objective::Throughput)));
        }
    }
    out
}

#[test]
fn dp_is_at_most_every_contiguous_baseline_on_published_workloads() {
    let Some(dir) = paper_dir() else { return };
    let mut checked = 0;
    for granularity in ["layer", "operator"] {
        let folder = dir.join("throughput").join(granularity);
        let mut files: Vec<_> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for path in files {
            let w = read_workload(&path).unwrap();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            let expert = if granularity == "layer" {
                dnnplace::experiments::reproduce::expert_for(&dir, &name)
                    .map(|e| read_placement(&e, &w).unwrap())
            } else {
                None
            };
            let dp = match plan(&Dp, &problem(&w, true)) {
                Ok(plan) => plan.objective(Objective::Throughput),
                Err(SolveError::TooManyIdeals { .. }) => {
                    println!("skipped {}: too many ideals for the DP", path.display());
                    continue;
                }
                Err(e) => panic!("{}: {e}", path.display()),
            };
            for (method, tps) in contiguous_baselines(&w, expert) {
                assert!(
                    dp <= tps * (1.0 + 1e-9),
                    "{}: DP {dp} > {method} {tps}",
                    path.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 0);
}

#[test]
fn reference_figures_on_published_workloads() {
    let Some(dir) = paper_dir() else { return };
    let layer = |name: &str| {
        read_workload(&dir.join("throughput/layer").join(format!("{name}.json"))).unwrap()
    };
    let (bert, gnmt) = (layer("bert24_inference"), layer("gnmt_inference"));
    assert!((value(&Single, &problem(&bert, true)) - 92.406).abs() < 1e-3);
    assert!((value(&Single, &problem(&gnmt, true)) - 182.563).abs() < 1e-3);
    assert!((value(&PipeDreamTopo, &problem(&gnmt, true)) - 33.03).abs() < 5e-3);
    // Local search (10 restarts, seed 1): within 2% of the reference 31.78 or better.
    let ls = value(&LocalSearch, &problem(&gnmt, false));
    assert!(ls <= 31.78 * 1.02, "local search {ls}");
}

const TINY: &str = r#"{"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 1,
  "nodes": [{"id": 1, "fpgaLatency": 1, "cpuLatency": 10, "size": 10},
            {"id": 2, "fpgaLatency": 2, "cpuLatency": 10, "size": 10},
            {"id": 3, "fpgaLatency": 3, "cpuLatency": 10, "size": 10},
            {"id": 4, "fpgaLatency": 4, "cpuLatency": 10, "size": 10}],
  "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5}, {"sourceId": 1, "destId": 3, "cost": 0.5},
            {"sourceId": 2, "destId": 3, "cost": 0.25}, {"sourceId": 3, "destId": 4, "cost": 0.125}]}"#;

fn dnnplace(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_dnnplace"))
        .args(args)
        .output()
        .expect("the binary runs")
}

#[test]
fn compare_runs_every_applicable_method() {
    let dir = tempfile::tempdir().unwrap();
    let workload = dir.path().join("tiny.json");
    std::fs::write(&workload, TINY).unwrap();
    let split = dir.path().join("split.json");
    std::fs::write(
        &split,
        r#"{"fpgas": [{"nodes": [1, 2]}, {"nodes": [3, 4]}], "cpus": []}"#,
    )
    .unwrap();
    let out = dnnplace(&[
        "compare",
        workload.to_str().unwrap(),
        "--json",
        "--split",
        split.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let ran: Vec<(String, bool)> = rows
        .iter()
        .map(|r| {
            (
                r["method"].as_str().unwrap().to_string(),
                r["contiguousProblem"].as_bool().unwrap(),
            )
        })
        .collect();
    for (method, contiguous) in [
        ("dp", true),
        ("pipedream", true),
        ("pipedream-topo", true),
        ("local-search", false),
        ("partitioner", false),
        ("greedy", true),
        ("single", true),
        ("expert", true),
        ("brute-force", true),
        ("brute-force", false),
    ] {
        assert!(
            ran.contains(&(method.to_string(), contiguous)),
            "{method} (contiguous: {contiguous}) missing from {ran:?}"
        );
    }
    for r in rows {
        assert_eq!(r["valid"], serde_json::Value::Bool(true), "{r}");
    }
    // The exact optima bound every heuristic: brute force (non-contiguous) is the least TPS.
    let tps = |m: &str, c: bool| {
        rows.iter()
            .find(|r| r["method"] == m && r["contiguousProblem"] == c)
            .unwrap()["maxLoad"]
            .as_f64()
            .unwrap()
    };
    let best = tps("brute-force", false);
    assert!(rows
        .iter()
        .all(|r| r["maxLoad"].as_f64().unwrap() >= best * (1.0 - 1e-9)));
    assert!((tps("dp", true) - tps("brute-force", true)).abs() < 1e-9);
    // Text and Markdown variants print the same methods.
    let text = dnnplace(&["compare", workload.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("local-search (non-contiguous)"));
    let md = dnnplace(&["compare", workload.to_str().unwrap(), "--markdown"]);
    assert!(String::from_utf8_lossy(&md.stdout).starts_with("| method | TPS |"));
}

#[test]
fn reproduce_writes_the_results_page() {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["throughput/layer", "latency/layer", "experts"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    std::fs::write(
        dir.path().join("throughput/layer/tiny_inference.json"),
        TINY,
    )
    .unwrap();
    std::fs::write(dir.path().join("throughput/layer/tiny_training.json"), TINY).unwrap();
    std::fs::write(dir.path().join("latency/layer/tiny_inference.json"), TINY).unwrap();
    std::fs::write(
        dir.path().join("experts/tiny_inference_expert.json"),
        r#"{"fpgas": [{"nodes": [1, 2]}, {"nodes": [3, 4]}], "cpus": []}"#,
    )
    .unwrap();
    let out_file = dir.path().join("docs/results.md");
    let out = dnnplace(&[
        "reproduce",
        dir.path().to_str().unwrap(),
        "--out",
        out_file.to_str().unwrap(),
        "--ip-time-limit",
        "5s",
        "--jobs",
        "2",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&out_file).unwrap();
    for needle in [
        "## throughput/layer",
        "## latency/layer",
        "### throughput/layer/tiny_inference",
        "expert split: `experts/tiny_inference_expert.json`",
        "DP ≤ contiguous baselines",
        "| tiny_training |",
    ] {
        assert!(page.contains(needle), "missing {needle:?} in\n{page}");
    }
    // The training graph without its own split uses the inference one.
    let training = &page[page.find("### throughput/layer/tiny_training").unwrap()..];
    assert!(training.contains("expert split: `experts/tiny_inference_expert.json`"));
    assert!(!page.contains("**NO**"));
    // The search placers on both problems, their evaluations to quality, and the
    // time-to-quality chart written beside the page with every method on it.
    for needle in [
        " rl | rl (non-contiguous) | genetic | genetic (non-contiguous) |",
        "Search placers against the proven contiguous optimum",
        "![time to quality: throughput/layer/tiny_inference](results/ttq-throughput-layer-tiny_inference.svg)",
    ] {
        assert!(page.contains(needle), "missing {needle:?} in\n{page}");
    }
    let chart = std::fs::read_to_string(
        dir.path()
            .join("docs/results/ttq-throughput-layer-tiny_inference.svg"),
    )
    .unwrap();
    assert!(chart.starts_with("<svg"), "{chart}");
    for method in ["dp", "rl", "genetic (non-contiguous)", "greedy"] {
        assert!(
            chart.contains(&format!("data-method=\"{method}\"")),
            "no {method} curve in {chart}"
        );
    }
    assert!(chart.contains("dp optimum"), "{chart}");
    // An empty folder is an input error (exit 2), not an empty page.
    let empty = tempfile::tempdir().unwrap();
    let out = dnnplace(&[
        "reproduce",
        empty.path().to_str().unwrap(),
        "--out",
        out_file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// Found by the fuzzer: a 2⁶³-byte class beside 12 bytes on one accelerator of 9 bytes. The
/// repair took the big class off with a plain subtraction, which left 0 instead of 12, so
/// the partitioner's plan broke the memory rule (the internal check caught it: exit 3).
#[test]
fn the_partitioners_memory_repair_keeps_small_classes_beside_a_huge_one() {
    let json = r#"{"maxSizePerFPGA":9,"maxFPGAs":2,"maxCPUs":1,"nodes":[
      {"id":3,"fpgaLatency":0,"cpuLatency":30,"size":6.75,"colorClass":0},
      {"id":13,"fpgaLatency":3.5,"cpuLatency":15.5,"size":5.25},
      {"id":23,"fpgaLatency":0,"cpuLatency":0,"size":9223372036854775808,"colorClass":1}],"edges":[]}"#;
    let w = dnnplace::io::parse_workload(json).unwrap();
    let problem = dnnplace::solve::Problem {
        workload: &w,
        devices: dnnplace::solve::Devices::of(&w),
        objective: dnnplace::solve::Objective::Throughput,
        contiguous: false,
        limits: dnnplace::solve::Limits::default(),
        pipeline: None,
    };
    let method = dnnplace::solve::method_by_name("partitioner").unwrap();
    let planned = dnnplace::solve::plan(method.as_ref(), &problem).expect("a valid repaired plan");
    let e = planned.evaluation.expect("scored");
    assert!(e.is_valid(), "{:?}", e.violations);
}

//! Piper's problem: the solver against the brute force on small random instances (DAGs with
//! branches, ≤ 7 nodes, ≤ 6 devices, two tensor degrees, up to three configurations per
//! node, memory that binds), the bound never above the value, every plan re-scored by the
//! evaluator, and reading errors that name the field, node or edge. Piper's own inputs are
//! read from the mirror (or `PIPER_INPUTS`) when present, else the test says why it skips.

use dnnplace::io::parse_piper;
use dnnplace::model::piper::{NodeSpec, PiperHeader, PiperInstance, TmpcSpec};
use dnnplace::score::piper::evaluate_piper;
use dnnplace::solve::budget::Budget;
use dnnplace::solve::outcome::Status;
use dnnplace::solve::piper::brute_force::brute_force_piper;
use dnnplace::solve::piper::solve_piper;
use proptest::prelude::*;

/// A random instance from a seed (a small deterministic generator keeps shrinking simple).
fn instance(seed: u64) -> PiperInstance {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m.max(1)
    };
    let n = 1 + next(7) as usize;
    let mut edges = Vec::new();
    for j in 1..n {
        for i in 0..j {
            let p = if i + 1 == j { 70 } else { 30 };
            if next(100) < p {
                edges.push((i as i64, j as i64, next(5) as f64 * 1e3));
            }
        }
    }
    let t2 = next(2) == 0;
    let nodes = (0..n)
        .map(|v| {
            let fw: Vec<i64> = edges
                .iter()
                .filter(|e| e.1 == v as i64)
                .map(|e| e.0)
                .collect();
            let bw: Vec<i64> = edges
                .iter()
                .filter(|e| e.0 == v as i64)
                .map(|e| e.1)
                .collect();
            let mut configs = Vec::new();
            for t in [1usize, 2] {
                if t == 2 && !t2 {
                    continue;
                }
                let count = 1 + next(3) as usize;
                let list = (0..count)
                    .map(|l| TmpcSpec {
                        id: format!("c{l}"),
                        time_per_sample: (1 + next(9)) as f64 / t as f64 * 0.5,
                        parameter_bytes: next(4) as f64 * 1e4,
                        memory_a: next(4) as f64,
                        memory_b: next(5) as f64,
                        sync_fw: fw.iter().map(|&u| (u, next(3) as f64 * 500.0)).collect(),
                        sync_bw: bw.iter().map(|&w| (w, next(3) as f64 * 500.0)).collect(),
                    })
                    .collect();
                configs.push((t, list));
            }
            NodeSpec {
                id: 10 * v as i64 + 3,
                name: format!("n{v}"),
                configs,
            }
        })
        .collect::<Vec<_>>();
    // Node ids are 10 v + 3; rename the edge endpoints and sync keys.
    let rid = |v: i64| 10 * v + 3;
    let nodes = nodes
        .into_iter()
        .map(|mut nd| {
            for (_, list) in nd.configs.iter_mut() {
                for c in list.iter_mut() {
                    c.sync_fw.iter_mut().for_each(|s| s.0 = rid(s.0));
                    c.sync_bw.iter_mut().for_each(|s| s.0 = rid(s.0));
                }
            }
            nd
        })
        .collect();
    let edges = edges
        .into_iter()
        .map(|(a, b, c)| (rid(a), rid(b), c))
        .collect();
    let header = PiperHeader {
        max_memory_per_device: (4 + next(24)) as f64,
        max_devices: 1 + next(6) as usize,
        bandwidth: 1e4 * (1 + next(4)) as f64,
        mbs_in_batch: [1, 2, 3, 4, 6, 12][next(6) as usize],
    };
    PiperInstance::build(header, nodes, edges).expect("a valid random instance")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    #[test]
    fn dp_equals_brute_force(seed in any::<u64>()) {
        let ins = instance(seed);
        let oracle = brute_force_piper(&ins);
        let got = solve_piper(&ins, 1 << 20, &Budget::unlimited()).expect("no internal error");
        match oracle {
            None => {
                prop_assert!(got.plan.is_none(), "the oracle finds no plan, the DP {:?}", got.plan);
                prop_assert!(matches!(got.status, Status::Infeasible { .. }), "{:?}", got.status);
            }
            Some((best, _)) => {
                prop_assert_eq!(&got.status, &Status::Optimal);
                let rel = (got.value - best).abs() / best.abs().max(1e-300);
                prop_assert!(rel <= 1e-9, "DP {} vs brute force {best}", got.value);
                prop_assert!(got.bound <= got.value * (1.0 + 1e-12), "bound {} above value {}", got.bound, got.value);
                let plan = got.plan.expect("a plan");
                let score = evaluate_piper(&ins, &plan).expect("the evaluator accepts the plan");
                prop_assert_eq!(score.time_per_sample, got.value);
            }
        }
    }

    /// One more device never makes the optimum worse.
    #[test]
    fn more_devices_never_worse(seed in any::<u64>()) {
        let ins = instance(seed);
        if ins.max_devices >= 6 {
            return Ok(());
        }
        let k = ins.max_devices;
        let a = solve_piper(&ins, 1 << 20, &Budget::unlimited()).expect("ok");
        let b = solve_piper(&ins.with_devices(k + 1).expect("k"), 1 << 20, &Budget::unlimited()).expect("ok");
        prop_assert!(b.value <= a.value * (1.0 + 1e-12), "{} devices: {}, {}: {}", k, a.value, k + 1, b.value);
    }
}

const GOOD: &str = r#"{
  "maxDevices": 4, "maxMemoryPerDevice": 100.0, "bandwidth": 1000.0, "mbsInBatch": 8,
  "nodes": [
    {"id": 1, "name": "a", "TMPCs": {"1": [{"id": "vanilla", "timePerSample": 2.0,
      "parameterSize": 10.0, "memoryUsageA": 1.0, "memoryUsageB": 2.0,
      "syncTimeFw": {}, "syncTimeBw": {"2": 0.0}}]}},
    {"id": 2, "name": "b", "TMPCs": {"1": [{"id": "vanilla", "timePerSample": 3.0,
      "parameterSize": 10.0, "memoryUsageA": 1.0, "memoryUsageB": 2.0,
      "syncTimeFw": {"1": 0.0}, "syncTimeBw": {}}]}}
  ],
  "edges": [{"sourceId": 1, "destId": 2, "communicationCost": 100.0}]
}"#;

fn error_of(text: &str) -> String {
    parse_piper(text).expect_err("an invalid file").to_string()
}

#[test]
fn a_good_file_is_read_and_solved() {
    let ins = parse_piper(GOOD).expect("valid");
    assert_eq!((ins.len(), ins.edges.len(), ins.max_devices), (2, 1, 4));
    let got = solve_piper(&ins, 1 << 20, &Budget::unlimited()).expect("ok");
    let oracle = brute_force_piper(&ins).expect("a plan").0;
    assert_eq!(got.status, Status::Optimal);
    assert!((got.value - oracle).abs() <= 1e-12 * oracle);
}

#[test]
fn reading_errors_name_the_field_node_or_edge() {
    let cases = [
        (GOOD.replace("\"bandwidth\": 1000.0,", ""), "bandwidth"),
        (
            GOOD.replace("\"maxDevices\": 4", "\"maxDevices\": 0"),
            "maxDevices",
        ),
        (
            GOOD.replace("\"mbsInBatch\": 8", "\"mbsInBatch\": -1"),
            "mbsInBatch",
        ),
        (
            GOOD.replace(
                "\"communicationCost\": 100.0",
                "\"communicationCost\": -1.0",
            ),
            "edges[0] (1 -> 2)",
        ),
        (GOOD.replace("\"destId\": 2", "\"destId\": 7"), "endpoint"),
        (
            GOOD.replace("\"syncTimeFw\": {\"1\": 0.0}", "\"syncTimeFw\": {}"),
            "node 2: TMPCs[1][\"vanilla\"].syncTimeFw: missing the edge with node 1",
        ),
        (
            GOOD.replace(
                "\"syncTimeFw\": {}, \"syncTimeBw\": {\"2\": 0.0}",
                "\"syncTimeFw\": {\"2\": 0.0}, \"syncTimeBw\": {\"2\": 0.0}",
            ),
            "node 1: TMPCs[1][\"vanilla\"].syncTimeFw: key 2 is not an edge",
        ),
        (
            GOOD.replace("\"timePerSample\": 3.0", "\"timePerSample\": \"x\""),
            "timePerSample",
        ),
        (
            GOOD.replace(
                "{\"1\": [{\"id\": \"vanilla\", \"timePerSample\": 3.0",
                "{\"one\": [{\"id\": \"vanilla\", \"timePerSample\": 3.0",
            ),
            "TMPCs: key \"one\"",
        ),
        (
            GOOD.replace("\"id\": 2, \"name\"", "\"id\": 1, \"name\""),
            "node 1: duplicate node id",
        ),
    ];
    for (text, want) in cases {
        let e = error_of(&text);
        assert!(e.contains(want), "expected {want:?} in {e:?}");
    }
    let cyclic = GOOD.replace(
        "\"edges\": [{\"sourceId\": 1, \"destId\": 2, \"communicationCost\": 100.0}]",
        "\"edges\": [{\"sourceId\": 1, \"destId\": 2, \"communicationCost\": 1.0}, {\"sourceId\": 2, \"destId\": 1, \"communicationCost\": 1.0}]",
    );
    assert!(
        error_of(&cyclic).contains("cycle") || error_of(&cyclic).contains("sync"),
        "{}",
        error_of(&cyclic)
    );
}

/// Piper's inputs, when the mirror (or `PIPER_INPUTS`, a folder with the three files) is here.
fn piper_input(name: &str) -> Option<String> {
    let dir = std::env::var("PIPER_INPUTS").ok();
    if let Some(dir) = dir {
        return std::fs::read_to_string(std::path::Path::new(&dir).join(name)).ok();
    }
    let out = std::process::Command::new("git")
        .args([
            "-C",
            "/work/.mirror/msr-fiddle+piper/repo",
            "show",
            &format!("HEAD:inputs/{name}"),
        ])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8(out.stdout).ok())
        .flatten()
}

#[test]
fn piper_inputs_are_read_and_bert_64_matches_piper() {
    let Some(bert) = piper_input("bert32a100.json") else {
        eprintln!("skipped: Piper's inputs are not here (set PIPER_INPUTS or add the mirror)");
        return;
    };
    for name in ["resnet.json", "gnmt.json"] {
        let text = piper_input(name).expect("the mirror has all three inputs");
        let ins = parse_piper(&text).expect("Piper's own input is valid");
        assert!(ins.len() > 50, "{name}");
    }
    let ins = parse_piper(&bert)
        .expect("valid")
        .with_devices(64)
        .expect("64");
    let got = solve_piper(&ins, 1 << 20, &Budget::unlimited()).expect("ok");
    // Piper's binary prints 0.015683301225 for this instance (docs/piper.md).
    assert_eq!(got.status, Status::Optimal);
    assert!(got.value <= 0.015683301225 * (1.0 + 1e-9), "{}", got.value);
    assert!((got.value - 0.015683301225).abs() < 1e-11, "{}", got.value);
}

/// Both roads of the solver (the relaxation's plan meeting its bound, and the exact
/// parametric search) are taken on the random instances, and both agree with the oracle.
#[test]
fn both_solver_paths_are_exercised_and_exact() {
    let (mut relaxed, mut exact, mut infeasible) = (0, 0, 0);
    for seed in 0..400u64 {
        let ins = instance(seed);
        let got = solve_piper(&ins, 1 << 20, &Budget::unlimited()).expect("ok");
        let oracle = brute_force_piper(&ins);
        match (&oracle, got.stats.path.as_deref()) {
            (None, _) => {
                infeasible += 1;
                assert!(got.plan.is_none(), "seed {seed}");
            }
            (Some((best, _)), path) => {
                assert!((got.value - best).abs() <= 1e-9 * best.abs(), "seed {seed}");
                match path {
                    Some("relaxed") => relaxed += 1,
                    Some("exact") => exact += 1,
                    other => panic!("seed {seed}: path {other:?}"),
                }
            }
        }
    }
    assert!(
        relaxed > 20 && exact > 20 && infeasible > 0,
        "relaxed {relaxed}, exact {exact}, infeasible {infeasible}"
    );
}

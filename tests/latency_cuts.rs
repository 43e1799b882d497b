//! Latency with explicit cuts: a plan may say how each accelerator's nodes are cut into
//! calls; the scorer evaluates that cut, rejects one that deadlocks, and the cut survives
//! the placement JSON. Expected values are computed by hand from MODEL.md's call model.

use dnnplace::io::{parse_placement, parse_workload, placement_to_raw};
use dnnplace::model::{Device, Placement, Workload};
use dnnplace::score::{evaluate, Violation};

fn node(id: i64, fpga: f64, cpu: f64) -> String {
    format!(
        r#"{{"id": {id}, "fpgaLatency": {fpga}, "cpuLatency": {cpu}, "supportedOnFpga": 1, "isBackwardNode": 0}}"#
    )
}

fn workload(nodes: &[String], edges: &[(i64, i64, f64)]) -> Workload {
    let edges: Vec<String> = edges
        .iter()
        .map(|(a, b, c)| format!(r#"{{"sourceId": {a}, "destId": {b}, "cost": {c}}}"#))
        .collect();
    parse_workload(&format!(
        r#"{{"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 1, "nodes": [{}], "edges": [{}]}}"#,
        nodes.join(","),
        edges.join(",")
    ))
    .unwrap()
}

/// c (CPU, 10) → b (acc); a (acc) → y (CPU, 10); a sends 0.5 out.
/// Greedy cut: {a, b} waits for c: 10 + (1 + 1 + 0.5) = 12.5, then y: 22.5.
/// Cut [a], [b]: a 0 → 1.5, y 1.5 → 11.5; b starts at max(10, 1.5) → 11. Latency 11.5.
fn two_calls() -> Workload {
    workload(
        &[
            node(1, 10.0, 10.0),
            node(2, 1.0, 1.0),
            node(3, 1.0, 1.0),
            node(4, 10.0, 10.0),
        ],
        &[(1, 3, 0.0), (2, 4, 0.5)],
    )
}

fn two_calls_assignment() -> Vec<Device> {
    vec![
        Device::Cpu(0),
        Device::Accelerator(0),
        Device::Accelerator(0),
        Device::Cpu(0),
    ]
}

#[test]
fn greedy_cut_and_a_better_explicit_cut() {
    let w = two_calls();
    let greedy = evaluate(&w, &Placement::new(two_calls_assignment()), true);
    assert!(
        (greedy.latency.as_ref().unwrap().total - 22.5).abs() < 1e-12,
        "{}",
        greedy.latency.as_ref().unwrap().total
    );
    assert_eq!(greedy.latency.as_ref().unwrap().max_pieces(), 1);

    let cut = Placement::new(two_calls_assignment()).with_pieces(vec![0, 0, 1, 0]);
    let e = evaluate(&w, &cut, true);
    assert!(e.is_valid(), "{:?}", e.violations);
    assert!(
        (e.latency.as_ref().unwrap().total - 11.5).abs() < 1e-12,
        "{}",
        e.latency.as_ref().unwrap().total
    );
    assert_eq!(e.latency.as_ref().unwrap().max_pieces(), 2);
    let starts: Vec<(usize, f64, f64)> = e
        .latency
        .as_ref()
        .unwrap()
        .calls
        .iter()
        .map(|c| (c.rank, c.start, c.duration))
        .collect();
    assert_eq!(starts, vec![(0, 0.0, 1.5), (1, 10.0, 1.0)]);

    // The other order: b first (10 → 11), then a (11 → 12.5), y 12.5 → 22.5.
    let reversed = Placement::new(two_calls_assignment()).with_pieces(vec![0, 1, 0, 0]);
    assert!(
        (evaluate(&w, &reversed, true)
            .latency
            .as_ref()
            .unwrap()
            .total
            - 22.5)
            .abs()
            < 1e-12
    );

    // Ranks need not be consecutive; only their order counts.
    let sparse = Placement::new(two_calls_assignment()).with_pieces(vec![0, 3, 7, 0]);
    assert!((evaluate(&w, &sparse, true).latency.as_ref().unwrap().total - 11.5).abs() < 1e-12);
}

#[test]
fn a_cut_whose_calls_wait_on_each_other_deadlocks() {
    // 1 (acc) → 2 (CPU) → 3 (acc): one call holding 1 and 3 would wait for itself.
    let w = workload(
        &[node(1, 1.0, 1.0), node(2, 1.0, 1.0), node(3, 1.0, 1.0)],
        &[(1, 2, 0.0), (2, 3, 0.0)],
    );
    let assignment = vec![
        Device::Accelerator(0),
        Device::Cpu(0),
        Device::Accelerator(0),
    ];
    let one_call = Placement::new(assignment.clone()).with_pieces(vec![0, 0, 0]);
    let e = evaluate(&w, &one_call, true);
    assert!(e.latency.as_ref().unwrap().total.is_infinite());
    let message = e
        .violations
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("; ");
    assert!(
        matches!(e.violations.as_slice(), [Violation::Deadlock(_)]),
        "{message}"
    );
    assert!(
        message.contains("nodes 1, 3") && message.contains("CPU node 2"),
        "{message}"
    );
    // Not a throughput concern: the same plan is valid for max-load.
    assert!(evaluate(&w, &one_call, false).is_valid());
    // Two calls in dependency order: 1 → 2 → 3, latency 3; the greedy cut finds the same.
    let two = Placement::new(assignment.clone()).with_pieces(vec![0, 0, 1]);
    assert_eq!(
        evaluate(&w, &two, true).latency.as_ref().unwrap().total,
        3.0
    );
    assert_eq!(
        evaluate(&w, &Placement::new(assignment), true)
            .latency
            .as_ref()
            .unwrap()
            .total,
        3.0
    );
}

#[test]
fn wrong_length_pieces_are_a_violation() {
    let w = two_calls();
    let p = Placement::new(two_calls_assignment()).with_pieces(vec![0, 1]);
    let e = evaluate(&w, &p, true);
    assert!(matches!(
        e.violations.as_slice(),
        [Violation::PiecesLength {
            expected: 4,
            got: 2
        }]
    ));
}

#[test]
fn the_cut_survives_the_placement_json() {
    let w = two_calls();
    let p = parse_placement(
        r#"{"fpgas": [{"pieces": [[2], [3]]}], "cpus": [{"nodes": [1, 4]}]}"#,
        &w,
    )
    .unwrap();
    assert_eq!(p.assignment, two_calls_assignment());
    let e = evaluate(&w, &p, true);
    assert!((e.latency.as_ref().unwrap().total - 11.5).abs() < 1e-12);

    let raw = placement_to_raw(
        &w,
        &p,
        &[0.0],
        &[0.0],
        e.latency.as_ref().unwrap().total,
        true,
    );
    let text = serde_json::to_string(&raw).unwrap();
    assert!(text.contains(r#""pieces":[[2],[3]]"#), "{text}");
    let back = parse_placement(&text, &w).unwrap();
    assert_eq!(
        evaluate(&w, &back, true).latency.as_ref().unwrap().total,
        e.latency.as_ref().unwrap().total
    );

    // Without pieces anywhere the scorer cuts greedily.
    let plain = parse_placement(
        r#"{"fpgas": [{"nodes": [2, 3]}], "cpus": [{"nodes": [1, 4]}]}"#,
        &w,
    )
    .unwrap();
    assert_eq!(plain.pieces, None);
    assert!((evaluate(&w, &plain, true).latency.as_ref().unwrap().total - 22.5).abs() < 1e-12);
}

#[test]
fn malformed_pieces_name_the_culprit() {
    let w = two_calls();
    let error = |text: &str| parse_placement(text, &w).unwrap_err().to_string();
    let e =
        error(r#"{"fpgas": [{"pieces": [[2], [3]]}], "cpus": [{"nodes": [1], "pieces": [[4]]}]}"#);
    assert!(e.contains("cpus[0] lists pieces"), "{e}");
    let e = error(
        r#"{"fpgas": [{"nodes": [2, 3, 4], "pieces": [[2], [3]]}], "cpus": [{"nodes": [1]}]}"#,
    );
    assert!(e.contains("node 4") && e.contains("fpgas[0].nodes"), "{e}");
    let e = error(r#"{"fpgas": [{"pieces": [[2], [3, 9]]}], "cpus": [{"nodes": [1, 4]}]}"#);
    assert!(
        e.contains("fpgas[0].pieces[1]") && e.contains("node 9"),
        "{e}"
    );
    let e = error(r#"{"fpgas": [{"pieces": [[2], [2, 3]]}], "cpus": [{"nodes": [1, 4]}]}"#);
    assert!(e.contains("node 2 is listed twice"), "{e}");
}

mod common;

/// MODEL.md's call model computed naively: items are the pieces (nodes of one accelerator
/// with one rank) and the CPU nodes; a cycle of waiting items (transitive closure) is a
/// deadlock (`None`); otherwise finish times by repeated relaxation until nothing changes.
fn naive_latency(w: &Workload, a: &[Device], ranks: &[usize]) -> Option<f64> {
    let n = w.len();
    let item_of = |v: usize| match a[v] {
        Device::Accelerator(d) => (d, ranks[v]),
        Device::Cpu(_) => (usize::MAX, v),
    };
    let mut items: Vec<(usize, usize)> = (0..n).map(item_of).collect();
    items.sort_unstable();
    items.dedup();
    let index = |key: (usize, usize)| items.binary_search(&key).unwrap();
    let m = items.len();
    // waits[i][j]: item i waits for item j.
    let mut waits = vec![vec![false; m]; m];
    for v in 0..n {
        for &s in w.successors(v) {
            let (i, j) = (index(item_of(s)), index(item_of(v)));
            if i != j {
                waits[i][j] = true;
            }
        }
    }
    for i in 0..m {
        for j in 0..m {
            // The accelerator's earlier calls come first.
            if items[i].0 != usize::MAX && items[i].0 == items[j].0 && items[j].1 < items[i].1 {
                waits[i][j] = true;
            }
        }
    }
    let mut reach = waits.clone();
    for k in 0..m {
        for i in 0..m {
            for j in 0..m {
                reach[i][j] |= reach[i][k] && reach[k][j];
            }
        }
    }
    if (0..m).any(|i| reach[i][i]) {
        return None;
    }
    let duration: Vec<f64> = (0..m)
        .map(|i| {
            if items[i].0 == usize::MAX {
                return w.node(items[i].1).cpu_latency;
            }
            let inside: Vec<usize> = (0..n).filter(|&v| item_of(v) == items[i]).collect();
            let compute: f64 = inside.iter().map(|&v| w.node(v).fpga_latency).sum();
            let out: f64 = inside
                .iter()
                .filter(|&&v| w.successors(v).iter().any(|s| !inside.contains(s)))
                .map(|&v| w.out_cost(v))
                .sum();
            let incoming: f64 = (0..n)
                .filter(|u| {
                    !inside.contains(u) && w.successors(*u).iter().any(|s| inside.contains(s))
                })
                .map(|u| w.out_cost(u))
                .sum();
            compute + out + incoming
        })
        .collect();
    let mut finish = vec![0.0f64; m];
    for _ in 0..=m {
        for i in 0..m {
            let start = (0..m)
                .filter(|&j| waits[i][j])
                .map(|j| finish[j])
                .fold(0.0, f64::max);
            finish[i] = start + duration[i];
        }
    }
    Some(finish.iter().copied().fold(0.0, f64::max))
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 400, failure_persistence: None, ..Default::default() })]

    /// The scorer agrees with the naive model on random assignments and random cuts, and
    /// its greedy cut, given back explicitly, scores the same and never deadlocks.
    #[test]
    fn scorer_matches_the_naive_call_model(seed in proptest::prelude::any::<u64>()) {
        let shape = common::Shape { max_nodes: 8, max_accelerators: 3, max_cpus: 1, ..Default::default() };
        let Some(w) = common::random_workload(seed, shape) else { return Ok(()) };
        let mut rng = common::Rng::new(seed ^ 0x9e37_79b9);
        let k = w.devices().accelerators as u64;
        for _ in 0..8 {
            let a: Vec<Device> = (0..w.len())
                .map(|_| if k > 0 && rng.chance(0.6) { Device::Accelerator(rng.below(k) as usize) } else { Device::Cpu(0) })
                .collect();
            let ranks: Vec<usize> = (0..w.len()).map(|_| rng.below(3) as usize).collect();
            let scored = evaluate(&w, &Placement::new(a.clone()).with_pieces(ranks.clone()), true).latency.unwrap();
            match naive_latency(&w, &a, &ranks) {
                Some(t) => {
                    proptest::prop_assert!(scored.deadlock.is_none());
                    proptest::prop_assert!((scored.total - t).abs() <= 1e-9 * t.max(1.0), "scorer {} naive {t}", scored.total);
                }
                None => proptest::prop_assert!(scored.deadlock.is_some() && scored.total.is_infinite()),
            }
            let greedy = evaluate(&w, &Placement::new(a.clone()), true).latency.unwrap();
            proptest::prop_assert!(greedy.deadlock.is_none() && greedy.total.is_finite());
            let ranks = greedy.ranks();
            let naive = naive_latency(&w, &a, &ranks);
            proptest::prop_assert!(naive.is_some_and(|t| (t - greedy.total).abs() <= 1e-9 * t.max(1.0)),
                "greedy {} naive {naive:?}", greedy.total);
        }
    }
}

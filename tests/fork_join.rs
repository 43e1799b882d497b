//! The fork-join search (`solve::fork_join`, issue 29) against exhaustive search on small
//! random fork-join blocks (twin chains, unsupported groups, tight memory, CPUs), against
//! the split search on `generate wide` blocks, and its refusal of other graphs.

mod common;

use common::Rng;
use dnnplace::costmodel::synthetic::{wide_graph, WideSpec};
use dnnplace::costmodel::{find_profile, to_workload, CostSettings, DType};
use dnnplace::model::{DeviceSet, Node, Workload};
use dnnplace::score::evaluate;
use dnnplace::solve::budget::Budget;
use dnnplace::solve::fork_join::{self, Found};
use dnnplace::solve::split_search;
use dnnplace::solve::{brute_force::BruteForce, plan, Objective, Problem, Status};
use proptest::prelude::*;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// The contiguous optimum by exhaustive search (`None`: infeasible).
fn brute(w: &Workload) -> Option<f64> {
    let p = plan(&BruteForce, &Problem::throughput(w)).expect("brute force runs");
    match p.outcome.status {
        Status::Optimal => Some(p.objective(Objective::Throughput)),
        Status::Infeasible { .. } => None,
        other => panic!("unexpected status {other:?}"),
    }
}

/// The search's value agrees with `oracle`, and its plan is valid, contiguous and scores
/// that value.
fn check(w: &Workload, found: &Found, oracle: Option<f64>) -> Result<(), TestCaseError> {
    prop_assert_eq!(&found.finished, &Ok(()));
    match (&found.placement, oracle) {
        (Some(p), Some(best)) => {
            prop_assert!(
                close(found.value, best),
                "fork-join {} != oracle {best}",
                found.value
            );
            let e = evaluate(w, p, false);
            prop_assert!(
                e.is_valid() && e.is_contiguous(),
                "{:?} {:?}",
                e.violations,
                e.non_contiguous
            );
            prop_assert!(
                close(e.max_load, found.value),
                "scored {} != search {}",
                e.max_load,
                found.value
            );
        }
        (None, None) => {}
        (p, o) => prop_assert!(
            false,
            "feasibility differs: search {:?}, oracle {o:?}",
            p.is_some()
        ),
    }
    Ok(())
}

/// A source, `1 + below(3)` twins of one random template chain and up to two other chains
/// (chains of 1 to 3 nodes, at most 9 nodes in all), a sink; random costs, 5 % unsupported
/// nodes, tight memory 30 % of the time, 1 to 4 accelerators and 0 to 2 CPU cores.
fn fork_join_block(seed: u64) -> Option<Workload> {
    let mut r = Rng::new(seed);
    let twins = 1 + r.below(3) as usize;
    let len = 1 + r.below(3) as usize;
    let others: Vec<usize> = (0..r.below(3)).map(|_| 1 + r.below(3) as usize).collect();
    if 2 + twins * len + others.iter().sum::<usize>() > 9 {
        return None;
    }
    let node = |id: i64, r: &mut Rng| Node {
        id,
        name: Some(format!("n{id}")),
        fpga_latency: r.value(10),
        cpu_latency: r.value(30),
        size_bytes: r.value(8),
        supported_on_accelerator: !r.chance(0.05),
        is_backward: false,
        color_class: None,
        layer_id: None,
        module: None,
        memory: None,
    };
    let mut nodes = vec![node(1, &mut r)];
    let source_cost = r.value(4);
    let template: Vec<(Node, f64)> = (0..len).map(|_| (node(0, &mut r), r.value(4))).collect();
    let mut protos: Vec<Vec<(Node, f64)>> = vec![template; twins];
    for &l in &others {
        protos.push((0..l).map(|_| (node(0, &mut r), r.value(4))).collect());
    }
    let mut edges = Vec::new();
    let mut ends = Vec::new();
    for proto in &protos {
        let (mut prev, mut prev_cost) = (1i64, source_cost);
        for (n, cost) in proto {
            let id = nodes.len() as i64 + 1;
            nodes.push(Node {
                id,
                name: Some(format!("n{id}")),
                ..n.clone()
            });
            edges.push((prev, id, prev_cost, 0.0));
            (prev, prev_cost) = (id, *cost);
        }
        ends.push((prev, prev_cost));
    }
    let sink = nodes.len() as i64 + 1;
    nodes.push(node(sink, &mut r));
    for (e, c) in ends {
        edges.push((e, sink, c, 0.0));
    }
    let total: f64 = nodes.iter().map(|n| n.size_bytes).sum();
    let k = 1 + r.below(4) as usize;
    let devices = DeviceSet {
        accelerators: k,
        memory_per_accelerator_bytes: if r.chance(0.3) {
            (total / k as f64).ceil() + 2.0
        } else {
            total + 1.0
        },
        cpus: r.below(3) as usize,
    };
    Workload::new(nodes, edges, devices).ok()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// The fork-join search == exhaustive search over contiguous placements.
    #[test]
    fn fork_join_equals_brute_force(seed in any::<u64>()) {
        let Some(w) = fork_join_block(seed) else { return Ok(()) };
        let found = fork_join::solve(&w, f64::INFINITY, &Budget::unlimited())
            .expect("a fork-join block");
        check(&w, &found, brute(&w))?;
    }

    /// From a starting threshold it returns the optimum when below it, else no plan.
    #[test]
    fn a_threshold_only_cuts_plans_above_it(seed in any::<u64>(), frac in 0.5f64..1.5) {
        let Some(w) = fork_join_block(seed) else { return Ok(()) };
        let Some(best) = brute(&w) else { return Ok(()) };
        let start = best * frac;
        let found = fork_join::solve(&w, start, &Budget::unlimited()).expect("a fork-join block");
        prop_assert_eq!(&found.finished, &Ok(()));
        if best < start && !close(best, start) {
            prop_assert!(close(found.value, best), "found {} below {start}, optimum {best}", found.value);
        } else if !close(best, start) {
            prop_assert!(found.placement.is_none(), "a plan below the optimum {best}: {}", found.value);
        }
    }
}

/// `generate wide`'s graph (one a100-80gb per accelerator, one CPU core, fp32).
fn wide(blocks: usize, branches: usize, ops: usize, k: usize) -> Workload {
    let settings = CostSettings {
        accelerator: find_profile("a100-80gb", &[]).unwrap(),
        cpu: find_profile("cpu-core", &[]).unwrap(),
        dtype: DType::Fp32,
        training: false,
        accelerators: k,
        cpus: 1,
    };
    to_workload(
        &wide_graph(&WideSpec::new(blocks, branches, ops), DType::Fp32).unwrap(),
        &settings,
    )
    .unwrap()
}

#[test]
fn wide_blocks_agree_with_the_split_search() {
    for (branches, ops, k) in [(5, 3, 3), (6, 2, 4), (4, 4, 2), (7, 5, 4)] {
        let w = wide(1, branches, ops, k);
        let found = fork_join::solve(&w, f64::INFINITY, &Budget::unlimited()).expect("a block");
        let split = split_search::solve(&w, f64::INFINITY, &Budget::unlimited()).expect("fits");
        assert_eq!(split.finished, Ok(()));
        check(&w, &found, Some(split.value)).unwrap();
        assert_eq!(found.chains, branches);
    }
}

#[test]
fn graphs_of_several_blocks_are_declined() {
    assert!(!fork_join::fits(&wide(2, 3, 2, 2)));
    assert!(fork_join::fits(&wide(1, 3, 2, 2)));
}

/// The bench's hard blocks (`cargo test --release --test fork_join -- --ignored --nocapture`).
#[test]
#[ignore]
fn probe_hard_blocks() {
    let start: f64 = std::env::var("FJ_START").map_or(f64::INFINITY, |s| s.parse().unwrap());
    let only = std::env::var("FJ_ONLY").unwrap_or_default();
    for (branches, ops, k, known) in [
        (7, 5, 4, 3.039937),
        (8, 5, 4, 3.295485),
        (7, 5, 8, 1.750970),
        (8, 5, 8, 2.042949),
        (12, 6, 4, 6.657000),
        (10, 8, 4, 7.638154),
    ] {
        if !format!("{branches}x{ops}k{k}").contains(&only) {
            continue;
        }
        let w = wide(1, branches, ops, k);
        let t = std::time::Instant::now();
        let from = if start == 0.0 { known } else { start };
        let found = fork_join::solve(&w, from, &Budget::new(Some(60.0), None)).unwrap();
        println!(
            "{branches}x{ops} k={k}: {} in {:.2} s, {} nodes, {:?}, classes {:?}",
            found.value,
            t.elapsed().as_secs_f64(),
            found.nodes,
            found.finished,
            found.twin_classes
        );
    }
}

/// The split search on the hard blocks from `FJ_START` (probe).
#[test]
#[ignore]
fn probe_split_search() {
    let start: f64 = std::env::var("FJ_START").map_or(f64::INFINITY, |s| s.parse().unwrap());
    let w = wide(1, 8, 5, 8);
    let t = std::time::Instant::now();
    let found = split_search::solve(&w, start, &Budget::new(Some(120.0), None)).unwrap();
    println!(
        "8x5 k=8 split: {} bound {} in {:.2} s, {} states, {:?}",
        found.value,
        found.bound,
        t.elapsed().as_secs_f64(),
        found.states,
        found.finished
    );
}

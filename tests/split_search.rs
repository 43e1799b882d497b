//! The split search (`solve::split_search`, issue 29) against exhaustive search on small
//! random instances, against the DP on graphs of interchangeable parallel chains (the
//! symmetry it folds), and inside `auto` on a wide graph whose lattice the DP leaves to it.

mod common;

use common::{random_workload, Rng, Shape};
use dnnplace::costmodel::synthetic::{wide_graph, WideSpec};
use dnnplace::costmodel::{find_profile, to_workload, CostSettings, DType};
use dnnplace::model::{DeviceSet, Node, Workload};
use dnnplace::score::evaluate;
use dnnplace::solve::auto::Auto;
use dnnplace::solve::budget::{Budget, Exhausted};
use dnnplace::solve::split_search::{self, Found};
use dnnplace::solve::{brute_force::BruteForce, dp::Dp, plan, Objective, Problem, Status};
use proptest::prelude::*;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// The search from no incumbent, without limits; its plan re-scored.
fn search(w: &Workload) -> Found {
    let found = split_search::solve(w, f64::INFINITY, &Budget::unlimited())
        .expect("small graphs fit the split search");
    assert_eq!(found.finished, Ok(()));
    found
}

/// The optimum by an exact method through the one interface (`None`: infeasible).
fn exact(method: &dyn dnnplace::solve::Method, w: &Workload) -> Option<f64> {
    let p = plan(method, &Problem::throughput(w)).expect("runs, and its plan passes the scorer");
    match p.outcome.status {
        Status::Optimal => Some(p.objective(Objective::Throughput)),
        Status::Infeasible { .. } => None,
        other => panic!("unexpected status {other:?}"),
    }
}

/// The search's value agrees with `oracle` and its plan is a valid contiguous plan whose
/// scored max load is that value.
fn check(w: &Workload, found: &Found, oracle: Option<f64>) -> Result<(), TestCaseError> {
    match (&found.placement, oracle) {
        (Some(p), Some(best)) => {
            prop_assert!(
                close(found.value, best),
                "split search {} != oracle {best}",
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

/// How large [`twin_chains`] draws: up to `1 + extra_chains` twins of up to `1 +
/// extra_len` nodes, up to `others` other chains, `1 + extra_k` accelerators and `cpus`
/// CPU cores (each bound exclusive of the drawn range's top, as `Rng::below`).
#[derive(Clone, Copy)]
struct Sizes {
    extra_chains: u64,
    extra_len: u64,
    others: u64,
    extra_k: u64,
    cpus: u64,
    /// List the nodes in a random order (so the groups' numbering interleaves chains).
    shuffle: bool,
}

const LARGE: Sizes = Sizes {
    extra_chains: 3,
    extra_len: 3,
    others: 3,
    extra_k: 4,
    cpus: 3,
    shuffle: false,
};

/// `m` identical chains of `len` nodes (and up to two other chains) between an optional
/// source and an optional sink, random costs; `None` when the draw is invalid.
fn twin_chains(seed: u64) -> Option<Workload> {
    twin_chains_of(seed, LARGE)
}

fn twin_chains_of(seed: u64, sizes: Sizes) -> Option<Workload> {
    let mut r = Rng::new(seed);
    let m = 2 + r.below(sizes.extra_chains) as usize;
    let len = 1 + r.below(sizes.extra_len) as usize;
    let others: Vec<usize> = (0..r.below(sizes.others))
        .map(|_| 1 + r.below(sizes.extra_len) as usize)
        .collect();
    let (source, sink) = (r.chance(0.7), r.chance(0.7));
    let mut nodes: Vec<Node> = Vec::new();
    let mut edges = Vec::new();
    let node = |id: i64, r: &mut Rng, unsupported: bool| Node {
        id,
        name: Some(format!("n{id}")),
        fpga_latency: r.value(10),
        cpu_latency: r.value(30),
        size_bytes: r.value(8),
        supported_on_accelerator: !unsupported,
        is_backward: false,
        color_class: None,
        layer_id: None,
        module: None,
        memory: None,
    };
    let mut next_id = 1i64;
    let src = source.then(|| {
        nodes.push(node(next_id, &mut r, false));
        next_id += 1;
        (next_id - 1, r.value(4))
    });
    // One template chain, copied m times; then the other chains.
    let template: Vec<(Node, f64)> = (0..len)
        .map(|_| {
            let unsupported = r.chance(0.05);
            (node(0, &mut r, unsupported), r.value(4))
        })
        .collect();
    let mut ends = Vec::new();
    let mut chain = |proto: &[(Node, f64)],
                     nodes: &mut Vec<Node>,
                     edges: &mut Vec<(i64, i64, f64, f64)>,
                     next_id: &mut i64| {
        let mut prev = src;
        for (n, cost) in proto {
            let id = *next_id;
            *next_id += 1;
            nodes.push(Node {
                id,
                name: Some(format!("n{id}")),
                ..n.clone()
            });
            if let Some((p, c)) = prev {
                edges.push((p, id, c, 0.0));
            }
            prev = Some((id, *cost));
        }
        ends.push(prev.expect("chains have a node"));
    };
    for _ in 0..m {
        chain(&template, &mut nodes, &mut edges, &mut next_id);
    }
    for &l in &others {
        let proto: Vec<(Node, f64)> = (0..l)
            .map(|_| (node(0, &mut r, false), r.value(4)))
            .collect();
        chain(&proto, &mut nodes, &mut edges, &mut next_id);
    }
    if sink {
        let id = next_id;
        nodes.push(node(id, &mut r, false));
        for (e, c) in ends {
            edges.push((e, id, c, 0.0));
        }
    }
    if sizes.shuffle {
        for at in (1..nodes.len()).rev() {
            nodes.swap(at, r.below(at as u64 + 1) as usize);
        }
    }
    let total: f64 = nodes.iter().map(|n| n.size_bytes).sum();
    let k = 1 + r.below(sizes.extra_k) as usize;
    let devices = DeviceSet {
        accelerators: k,
        memory_per_accelerator_bytes: if r.chance(0.3) {
            (total / k as f64).ceil() + 2.0
        } else {
            total + 1.0
        },
        cpus: r.below(sizes.cpus) as usize,
    };
    Workload::new(nodes, edges, devices).ok()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// The split search == exhaustive search over contiguous placements (training graphs,
    /// colour classes, unsupported nodes, tight memory, CPUs).
    #[test]
    fn split_search_equals_brute_force(seed in any::<u64>()) {
        let shape = Shape { max_nodes: 9, ..Shape::default() };
        let Some(w) = random_workload(seed, shape) else { return Ok(()) };
        let found = search(&w);
        check(&w, &found, exact(&BruteForce, &w))?;
    }

    /// With interchangeable chains folded, the split search == the DP.
    #[test]
    fn split_search_with_twin_chains_equals_dp(seed in any::<u64>()) {
        let Some(w) = twin_chains(seed) else { return Ok(()) };
        let found = search(&w);
        check(&w, &found, exact(&Dp, &w))?;
    }

    /// With interchangeable chains folded (stages listed up to the stabiliser of each
    /// state, module docs "Symmetry"), the split search == exhaustive search: at most
    /// 9 nodes, up to 3 twins of up to 2 nodes, nodes in a random order half the time.
    #[test]
    fn split_search_with_twin_chains_equals_brute_force(seed in any::<u64>(), shuffle in any::<bool>()) {
        let sizes = Sizes { extra_chains: 2, extra_len: 2, others: 2, extra_k: 3, cpus: 2, shuffle };
        let Some(w) = twin_chains_of(seed, sizes) else { return Ok(()) };
        let found = search(&w);
        check(&w, &found, exact(&BruteForce, &w))?;
    }

    /// A search from a starting threshold returns the optimum when it is below it, and
    /// otherwise finds nothing: every plan is at least the threshold.
    #[test]
    fn a_threshold_only_cuts_plans_above_it(seed in any::<u64>(), frac in 0.5f64..1.5) {
        let shape = Shape { max_nodes: 8, ..Shape::default() };
        let Some(w) = random_workload(seed, shape) else { return Ok(()) };
        let Some(best) = exact(&BruteForce, &w) else { return Ok(()) };
        let start = best * frac;
        let found = split_search::solve(&w, start, &Budget::unlimited()).expect("fits");
        prop_assert_eq!(&found.finished, &Ok(()));
        if best < start && !close(best, start) {
            prop_assert!(close(found.value, best), "found {} below {start}, optimum {best}", found.value);
        } else if !close(best, start) {
            prop_assert!(found.placement.is_none(), "a plan below the optimum {best}: {}", found.value);
        }
        prop_assert!(found.bound <= best * (1.0 + 1e-9), "bound {} above the optimum {best}", found.bound);
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
fn wide_graphs_agree_with_the_dp_and_their_branches_are_folded() {
    for (branches, ops, k) in [(5, 3, 3), (6, 2, 4), (4, 4, 2)] {
        let w = wide(1, branches, ops, k);
        let found = search(&w);
        // Branch j has width h·(1 + j mod 3): the classes {0, 3}, {1, 4}, ... are twins.
        let mut expected: Vec<usize> = (0..3)
            .map(|r| (0..branches).filter(|j| j % 3 == r).count())
            .filter(|&c| c > 1)
            .collect();
        let mut got = found.twin_classes.clone();
        expected.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, expected, "{branches}x{ops}");
        check(&w, &found, exact(&Dp, &w)).unwrap();
    }
}

#[test]
fn a_spent_budget_stops_with_a_sound_bound() {
    let w = wide(1, 6, 3, 3);
    let spent = Budget::new(Some(0.0), None);
    let found = split_search::solve(&w, f64::INFINITY, &spent).expect("fits");
    assert_eq!(found.finished, Err(Exhausted::TimeLimit));
    let best = exact(&Dp, &w).expect("feasible");
    assert!(
        found.bound <= best,
        "bound {} above the optimum {best}",
        found.bound
    );
    if found.placement.is_some() {
        assert!(found.value >= best * (1.0 - 1e-9));
    }
}

/// 7 parallel 5-op chains, k = 4 (issue 29's graph: 6⁷ ideals, beyond the DP in auto's
/// time): auto proves a plan optimal (by the fork-join search, which runs before the split
/// search on such blocks), the split search agrees, and the bound auto reports is its own
/// plan's value.
#[test]
fn auto_proves_seven_parallel_chains() {
    let w = wide(1, 7, 5, 4);
    let mut problem = Problem::throughput(&w);
    problem.limits.time_limit_s = Some(600.0);
    let p = plan(&Auto::default(), &problem).expect("auto plans it");
    assert_eq!(
        p.outcome.status,
        Status::Optimal,
        "{:?}",
        p.outcome.stats.notes
    );
    assert!(p
        .outcome
        .stats
        .path
        .as_deref()
        .unwrap_or("")
        .contains("proven optimal by the fork-join search"));
    assert!(close(search(&w).value, p.objective(Objective::Throughput)));
    let v = p.objective(Objective::Throughput);
    assert!(p.outcome.bound <= v && close(p.outcome.bound, v));
    // No contiguous plan of the DP's own (its coarsened path) is better.
    let mut coarse = problem.clone();
    coarse.limits.time_limit_s = Some(5.0);
    let c = plan(
        &Auto::new(dnnplace::solve::coarsen::CoarsenSettings {
            target: Some(20),
            ..Default::default()
        }),
        &coarse,
    )
    .expect("coarsened plan");
    assert!(c.objective(Objective::Throughput) >= v * (1.0 - 1e-9));
}

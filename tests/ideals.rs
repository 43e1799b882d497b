//! The ideal lattice against brute force: enumeration lists every ideal exactly once with
//! its canonical parent, the summaries built from parents equal summaries computed from
//! scratch, and the count estimate bounds (or equals) the true count.

mod common;

use common::{random_workload, Rng, Shape};
use dnnplace::model::contraction::Contraction;
use dnnplace::model::numerics::{Sum, UNIT_ROUNDOFF};
use dnnplace::model::{DeviceSet, Node, Workload};
use dnnplace::solve::budget::Budget;
use dnnplace::solve::ideal_cost::{PairCost, Summaries};
use dnnplace::solve::ideals::{estimate, estimate_with, Ideals};
use proptest::prelude::*;

/// A DAG of `chains` parallel chains with random cross edges (forward in index order), or
/// a random DAG from the common generator: wide lattices as well as long ones.
fn random_dag(seed: u64) -> Option<Workload> {
    let mut r = Rng::new(seed);
    if r.chance(0.4) {
        return random_workload(
            seed,
            Shape {
                max_nodes: 12,
                ..Shape::default()
            },
        );
    }
    let chains = 1 + r.below(4) as usize;
    let length = 1 + r.below(4) as usize;
    let n = chains * length;
    let nodes: Vec<Node> = (0..n)
        .map(|i| Node {
            id: i as i64,
            name: None,
            fpga_latency: r.value(5),
            cpu_latency: r.value(9),
            size_bytes: r.value(3),
            supported_on_accelerator: !r.chance(0.1),
            is_backward: false,
            color_class: None,
            layer_id: None,
            module: None,
            memory: None,
        })
        .collect();
    let cost: Vec<f64> = (0..n).map(|_| r.value(3)).collect();
    // Node c·length + t is step t of chain c; index order t-major keeps every edge forward.
    let id = |c: usize, t: usize| (t * chains + c) as i64;
    let mut edges = Vec::new();
    for c in 0..chains {
        for t in 1..length {
            edges.push((id(c, t - 1), id(c, t), cost[id(c, t - 1) as usize], 0.0));
        }
    }
    for _ in 0..r.below(n as u64 + 1) {
        let (a, b) = (r.below(n as u64) as i64, r.below(n as u64) as i64);
        if a < b && !edges.iter().any(|e| e.0 == a && e.1 == b) {
            edges.push((a, b, cost[a as usize], 0.0));
        }
    }
    let devices = DeviceSet {
        accelerators: 2,
        memory_per_accelerator_bytes: 100.0,
        cpus: 1,
    };
    Workload::new(nodes, edges, devices).ok()
}

/// Every ideal of `c`, by brute force over subsets (as sorted group lists).
fn all_ideals(c: &Contraction) -> Vec<Vec<usize>> {
    let n = c.len();
    let mut out = Vec::new();
    for mask in 0u32..(1 << n) {
        let inside = |g: usize| mask >> g & 1 == 1;
        if (0..n).all(|g| !inside(g) || c.pred[g].iter().all(|&p| inside(p))) {
            out.push((0..n).filter(|&g| inside(g)).collect());
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Enumeration == brute force, each ideal once, by level, each with its canonical
    /// parent (itself minus its largest group).
    #[test]
    fn enumeration_lists_every_ideal_once(seed in any::<u64>()) {
        let Some(w) = random_dag(seed) else { return Ok(()) };
        let c = Contraction::new(&w);
        prop_assume!(c.len() <= 14);
        let ideals = Ideals::enumerate(&c, usize::MAX, &Budget::unlimited()).expect("no limit");
        let mut listed: Vec<Vec<usize>> = (0..ideals.len()).map(|i| ideals.get(i).groups()).collect();
        for (i, groups) in listed.iter().enumerate() {
            prop_assert_eq!(ideals.level_of(i), groups.len());
            match ideals.parent(i) {
                None => prop_assert!(groups.is_empty()),
                Some((p, g)) => {
                    prop_assert_eq!(Some(&g), groups.last());
                    prop_assert_eq!(&listed[p][..], &groups[..groups.len() - 1]);
                }
            }
        }
        for i in 0..ideals.len() {
            for j in 0..ideals.len() {
                let truth = listed[j].iter().all(|g| listed[i].contains(g));
                prop_assert_eq!(ideals.is_subset(j, i), truth, "J = {:?}, I = {:?}", &listed[j], &listed[i]);
            }
        }
        listed.sort();
        let mut expected = all_ideals(&c);
        expected.sort();
        prop_assert_eq!(listed, expected);
    }

    /// Summaries built from parents == summaries computed from each ideal's groups.
    #[test]
    fn summaries_from_parents_equal_summaries_from_scratch(seed in any::<u64>()) {
        let Some(w) = random_dag(seed) else { return Ok(()) };
        let c = Contraction::new(&w);
        prop_assume!(c.len() <= 14);
        let cost = PairCost::new(&w, &c);
        let ideals = Ideals::enumerate(&c, usize::MAX, &Budget::unlimited()).expect("no limit");
        let summaries = Summaries::of_ideals(&cost, &ideals, &Budget::unlimited()).expect("no limit");
        let hyperedges = c.communication_hyperedges(&w);
        for i in 0..ideals.len() {
            let groups = ideals.get(i).groups();
            let h = &summaries.heads[i];
            // Summed in the order the parents added the groups: the same value up to the
            // compensated sums' error bounds (numerics), here summed in index order.
            let same = |got: Sum, f: &dyn Fn(usize) -> f64| {
                let want = Sum::of(groups.iter().map(|&g| f(g)));
                let slack = got.error_bound() + want.error_bound() + 4.0 * UNIT_ROUNDOFF * want.value().abs();
                (got.value() - want.value()).abs() <= slack
            };
            prop_assert!(same(h.fpga, &|g| c.groups[g].fpga_latency), "{:?}", h.fpga);
            prop_assert!(same(h.cpu, &|g| c.groups[g].cpu_latency), "{:?}", h.cpu);
            prop_assert!(same(h.size, &|g| c.groups[g].size_bytes), "{:?}", h.size);
            prop_assert_eq!(h.unsupported as usize, groups.iter().filter(|&&g| !c.groups[g].supported_on_accelerator).count());
            let cut: Vec<(u32, u32)> = hyperedges
                .iter()
                .enumerate()
                .filter_map(|(t, (members, _))| {
                    let inside = members.iter().filter(|g| groups.contains(g)).count();
                    (inside > 0 && inside < members.len()).then_some((t as u32, inside as u32))
                })
                .collect();
            let listed: Vec<(u32, u32)> = summaries.crossing(i).iter().map(|x| (x.edge, x.inside)).collect();
            prop_assert_eq!(listed, cut);
            let a = Sum::of(hyperedges.iter().enumerate().filter(|(t, _)| summaries.crossing(i).iter().any(|x| x.edge as usize == *t)).map(|(_, (_, c))| *c));
            prop_assert_eq!(h.cut, a);
        }
    }

    /// The load of every pair `J ⊊ I` (exact integer differences where the values allow,
    /// certified ones otherwise) == compute + the hyperedges cut by `I \ J`, summed from
    /// scratch over its groups, within 4u; and the memory test agrees with the size summed
    /// the same way. Values are drawn over 60 binary orders now and then, so that both
    /// paths run.
    #[test]
    fn pair_loads_equal_sums_from_scratch(seed in any::<u64>(), spread in any::<bool>()) {
        let Some(mut w) = random_dag(seed) else { return Ok(()) };
        if spread {
            let mut r = Rng::new(seed ^ 0x5eed);
            let mut nodes = w.nodes().to_vec();
            for n in &mut nodes {
                n.fpga_latency *= 2f64.powi(r.below(60) as i32 - 30);
            }
            let sizes: Vec<f64> = nodes.iter().map(|n| n.size_bytes * 2f64.powi(r.below(60) as i32)).collect();
            let id = |v: usize| w.node(v).id;
            let edges = w.edges().iter().map(|e| (id(e.from), id(e.to), e.cost, e.size_bytes)).collect();
            w = Workload::new(nodes, edges, w.devices().clone()).expect("the same graph").with_sizes(&sizes);
        }
        let c = Contraction::new(&w);
        prop_assume!(c.len() <= 12);
        let cost = PairCost::new(&w, &c);
        let ideals = Ideals::enumerate(&c, usize::MAX, &Budget::unlimited()).expect("no limit");
        let summaries = Summaries::of_ideals(&cost, &ideals, &Budget::unlimited()).expect("no limit");
        let hyperedges = c.communication_hyperedges(&w);
        let close = |a: f64, b: f64| (a - b).abs() <= 4.0 * UNIT_ROUNDOFF * b.abs();
        for i in 0..ideals.len() {
            let gi = ideals.get(i).groups();
            for j in 0..ideals.len() {
                let gj = ideals.get(j).groups();
                if j == i || !gj.iter().all(|g| gi.contains(g)) {
                    continue;
                }
                let set: Vec<usize> = gi.iter().copied().filter(|g| !gj.contains(g)).collect();
                let size = Sum::of(set.iter().map(|&g| c.groups[g].size_bytes)).value();
                let unsupported = set.iter().any(|&g| !c.groups[g].supported_on_accelerator);
                let compute = Sum::of(set.iter().map(|&g| c.groups[g].fpga_latency));
                let comm = Sum::of(hyperedges.iter().filter_map(|(members, cost)| {
                    let inside = members.iter().filter(|g| set.contains(g)).count();
                    (inside > 0 && inside < members.len()).then_some(*cost)
                }));
                let want = compute.plus_sum(comm).value();
                // Just below and just above the stage's size: the memory test decides alone.
                for memory in [size * (1.0 - 1e-12), size * (1.0 + 1e-12), f64::INFINITY] {
                    let got = cost.accelerator_load(&summaries, i, j, memory, || set.clone());
                    match got {
                        Some(load) => {
                            prop_assert!(!unsupported && size <= memory, "priced a set that cannot be held");
                            prop_assert!(close(load, want), "I = {gi:?}, J = {gj:?}: {load} vs {want}");
                        }
                        None => prop_assert!(unsupported || size > memory, "refused a set that fits: {size} <= {memory}"),
                    }
                }
            }
        }
    }

    /// The estimate is exact when it says so, and otherwise brackets the count; a state
    /// limit small enough to force forgetting still gives bounds.
    #[test]
    fn the_estimate_bounds_the_ideal_count(seed in any::<u64>(), cap in 1usize..6) {
        let Some(w) = random_dag(seed) else { return Ok(()) };
        let c = Contraction::new(&w);
        prop_assume!(c.len() <= 14);
        let count = all_ideals(&c).len() as u128;
        let e = estimate(&c);
        prop_assert!(e.exact, "the default limit is far above these widths");
        prop_assert_eq!((e.lower_bound, e.upper_bound), (count, count));
        let tight = estimate_with(&c, cap);
        prop_assert!(tight.lower_bound <= count && count <= tight.upper_bound, "{tight:?} vs {count}");
        if tight.exact {
            prop_assert_eq!(tight.upper_bound, count);
        }
    }
}

/// Width: 8 parallel chains of 5 groups have 6^8 ideals, counted exactly with at most 2^8
/// frontier states, and bounded (never below the truth) with a limit of 100 states.
#[test]
fn parallel_chains_are_counted_exactly() {
    let (chains, length) = (8usize, 5usize);
    let n = chains * length;
    let nodes: Vec<Node> = (0..n)
        .map(|i| Node {
            id: i as i64,
            name: None,
            fpga_latency: 1.0,
            cpu_latency: 1.0,
            size_bytes: 0.0,
            supported_on_accelerator: true,
            is_backward: false,
            color_class: None,
            layer_id: None,
            module: None,
            memory: None,
        })
        .collect();
    // Step t of chain ch is node t·chains + ch: the topological order interleaves the
    // chains, so the frontier holds one group of each.
    let mut edges = Vec::new();
    for ch in 0..chains {
        for t in 1..length {
            edges.push((
                ((t - 1) * chains + ch) as i64,
                (t * chains + ch) as i64,
                1.0,
                0.0,
            ));
        }
    }
    let w = Workload::new(
        nodes,
        edges,
        DeviceSet {
            accelerators: 2,
            memory_per_accelerator_bytes: 1.0,
            cpus: 0,
        },
    )
    .unwrap();
    // Groups numbered by node index (Kahn, smallest label first): chains interleaved.
    let arcs: Vec<(usize, usize)> = w.edges().iter().map(|e| (e.from, e.to)).collect();
    let c = Contraction::from_labels(&w, &(0..n).collect::<Vec<_>>(), arcs);
    assert_eq!(c.group_of, (0..n).collect::<Vec<_>>());
    let truth = 6u128.pow(8);
    let e = estimate(&c);
    assert_eq!((e.exact, e.upper_bound), (true, truth), "{e:?}");
    let bounded = estimate_with(&c, 100);
    assert!(
        !bounded.exact && bounded.lower_bound <= truth && truth <= bounded.upper_bound,
        "{bounded:?}"
    );
}

/// Past 512 groups the subset test runs on the trimmed words alone: on two parallel
/// chains of 300 groups with random cross edges (about 10^4 ideals), it agrees with the
/// group lists on random pairs and on every parent/child pair.
#[test]
fn the_trimmed_subset_test_agrees_with_the_group_lists() {
    let (chains, length) = (2usize, 300usize);
    let n = chains * length;
    let mut r = Rng::new(7);
    let nodes: Vec<Node> = (0..n)
        .map(|i| Node {
            id: i as i64,
            name: None,
            fpga_latency: 1.0,
            cpu_latency: 1.0,
            size_bytes: 0.0,
            supported_on_accelerator: true,
            is_backward: false,
            color_class: None,
            layer_id: None,
            module: None,
            memory: None,
        })
        .collect();
    let mut edges = Vec::new();
    for ch in 0..chains {
        for t in 1..length {
            edges.push((
                ((t - 1) * chains + ch) as i64,
                (t * chains + ch) as i64,
                1.0,
                0.0,
            ));
        }
    }
    // Cross edges from step t of each chain to step t + 5 of the other keep the width down.
    for t in (0..length - 5).step_by(10) {
        edges.push(((t * chains) as i64, ((t + 5) * chains + 1) as i64, 1.0, 0.0));
        edges.push(((t * chains + 1) as i64, ((t + 5) * chains) as i64, 1.0, 0.0));
    }
    let w = Workload::new(
        nodes,
        edges,
        DeviceSet {
            accelerators: 2,
            memory_per_accelerator_bytes: 1.0,
            cpus: 0,
        },
    )
    .unwrap();
    let c = Contraction::new(&w);
    assert!(c.len() > 512, "{} groups", c.len());
    let ideals = Ideals::enumerate(&c, usize::MAX, &Budget::unlimited()).expect("no limit");
    assert!(
        ideals.dense_row(0).is_empty(),
        "plain bitsets kept past 512 groups"
    );
    let groups: Vec<Vec<usize>> = (0..ideals.len()).map(|i| ideals.get(i).groups()).collect();
    let subset = |j: usize, i: usize| {
        let set: std::collections::HashSet<usize> = groups[i].iter().copied().collect();
        groups[j].iter().all(|g| set.contains(g))
    };
    let (mut yes, mut no) = (0, 0);
    for _ in 0..20_000 {
        let (j, i) = (
            r.below(ideals.len() as u64) as usize,
            r.below(ideals.len() as u64) as usize,
        );
        let truth = subset(j, i);
        assert_eq!(ideals.is_subset(j, i), truth, "J = {j}, I = {i}");
        if truth {
            yes += 1
        } else {
            no += 1
        }
    }
    for i in 1..ideals.len() {
        let (p, _) = ideals.parent(i).expect("not the empty ideal");
        assert!(ideals.is_subset(p, i) && !ideals.is_subset(i, p));
        yes += 1;
        no += 1;
    }
    assert!(yes > 0 && no > 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The pruned chain split (greedy bound, then the DP over prefixes) == the plain O(n²)
    /// recurrence over the same order, in value and feasibility, on both orders it is used on.
    #[test]
    fn pruned_chain_split_equals_the_plain_recurrence(seed in any::<u64>()) {
        use dnnplace::solve::dp::chain::{best_chain_split, depth_first_order, prefix_summaries, split_chain};
        let Some(w) = random_workload(seed, Shape { max_nodes: 12, ..Shape::default() }) else { return Ok(()) };
        let c = Contraction::new(&w);
        let cost = PairCost::new(&w, &c);
        let d = w.devices();
        for order in [(0..c.len()).collect::<Vec<_>>(), depth_first_order(&c)] {
            let s = prefix_summaries(&cost, &order);
            let memory = d.memory_per_accelerator_bytes;
            let plain = split_chain(
                order.len(),
                d.accelerators,
                d.cpus,
                |i, j| cost.accelerator_load(&s, j, i, memory, || order[i..j].to_vec()),
                |i, j| cost.cpu_load(&s, j, i, || order[i..j].to_vec()),
            );
            let fast = best_chain_split(&c, &cost, &order, d.accelerators, d.cpus, memory);
            match (plain, fast) {
                (Some(p), Some((v, placement))) => {
                    prop_assert!((p.objective - v).abs() <= 1e-9 * v.max(1.0), "plain {} fast {v}", p.objective);
                    let e = dnnplace::score::evaluate(&w, &placement, false);
                    prop_assert!(e.is_valid() && e.is_contiguous(), "{:?} {:?}", e.violations, e.non_contiguous);
                    prop_assert!((e.max_load - v).abs() <= 1e-9 * v.max(1.0), "scored {} fast {v}", e.max_load);
                }
                (None, None) => {}
                (p, f) => prop_assert!(false, "feasibility differs: plain {:?} fast {:?}", p.map(|x| x.objective), f.map(|x| x.0)),
            }
        }
    }
}

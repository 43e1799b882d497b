//! The cluster DP against exhaustive search on small random clusters (1–3 types, 1–3
//! machines, with and without peer links, tight memory, CPU-only nodes, training graphs
//! whose gradients flow back across machines), per usage vector too; and MODEL.md's device
//! set as a cluster against the DP of MODEL.md.

mod cluster_gen;
mod common;

use cluster_gen::{cluster_plan, random_cluster, random_clustered, ClusterShape};
use common::{random_workload, Shape};
use dnnplace::model::ClusterCosts;
use dnnplace::score::evaluate_on_cluster;
use dnnplace::solve::cluster::brute_force::brute_force;
use dnnplace::solve::cluster::dp::{solve, Tracking};
use dnnplace::solve::dp::Dp;
use dnnplace::solve::{plan, Limits, Objective, Problem};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn check(seed: u64, w: &dnnplace::model::Workload) -> bool {
    let costs = ClusterCosts::of(w);
    let exhaustive = brute_force(w, &costs, Objective::Throughput, true).unwrap();
    let dp = solve(
        w,
        &costs,
        &Limits::default(),
        Tracking::PerUsage,
        f64::INFINITY,
    )
    .unwrap();
    match (&exhaustive.best, &dp.best) {
        (None, None) => return false,
        (Some((b, _)), Some((d, p))) => {
            assert!(close(*b, *d), "seed {seed}: brute force {b}, DP {d}");
            let e = evaluate_on_cluster(w, &costs, p);
            assert!(
                e.is_valid() && e.is_contiguous(),
                "seed {seed}: {:?} {:?}",
                e.violations,
                e.non_contiguous
            );
            assert!(
                close(e.max_load, *d),
                "seed {seed}: DP says {d}, its plan scores {}",
                e.max_load
            );
        }
        (b, d) => panic!(
            "seed {seed}: brute force {:?}, DP {:?}",
            b.as_ref().map(|x| x.0),
            d.as_ref().map(|x| x.0)
        ),
    }
    // With at most u_t accelerators of each type t: the least over usages below u. (Exact
    // usages can differ: folding a zero-cost leaf removes plans that give it a device of
    // its own, never a better plan.)
    let counts: Vec<usize> = (0..w.cluster().unwrap().types().len())
        .map(|t| w.cluster().unwrap().count_of_type(t))
        .collect();
    let at_most = |list: &mut dyn Iterator<Item = (Vec<usize>, f64)>, u: &[usize]| {
        list.filter(|(x, _)| x.iter().zip(u).all(|(a, b)| a <= b))
            .map(|(_, v)| v)
            .fold(f64::INFINITY, f64::min)
    };
    let mut u = vec![0usize; counts.len()];
    loop {
        let b = at_most(
            &mut exhaustive.per_usage.iter().map(|(x, v)| (x.clone(), *v)),
            &u,
        );
        let d = at_most(
            &mut dp.per_usage.iter().map(|(x, v, _)| (x.clone(), *v)),
            &u,
        );
        assert!(
            b == d || close(b, d),
            "seed {seed} at most {u:?}: brute force {b}, DP {d}"
        );
        let Some(t) = (0..u.len()).find(|&t| u[t] < counts[t]) else {
            break;
        };
        u[t] += 1;
        u[..t].iter_mut().for_each(|x| *x = 0);
    }
    for (usage, v, p) in &dp.per_usage {
        let e = evaluate_on_cluster(w, &costs, p);
        assert!(
            e.is_valid() && e.is_contiguous() && close(e.max_load, *v),
            "seed {seed} usage {usage:?}"
        );
    }
    true
}

#[test]
fn dp_equals_brute_force_on_random_clusters() {
    let mut checked = 0;
    for seed in 0..300 {
        let Some(base) = random_workload(
            seed,
            Shape {
                max_nodes: 7,
                ..Shape::default()
            },
        ) else {
            continue;
        };
        let Some(w) = random_cluster(
            seed,
            &base,
            ClusterShape {
                max_devices: 5,
                ..ClusterShape::default()
            },
        ) else {
            continue;
        };
        checked += usize::from(check(seed, &w));
    }
    assert!(checked > 150, "only {checked} feasible instances");
}

#[test]
fn dp_equals_brute_force_with_peer_links_and_machines() {
    let mut checked = 0;
    for seed in 1000..1200 {
        let shape = Shape {
            max_nodes: 7,
            training: true,
            ..Shape::default()
        };
        let cluster = ClusterShape {
            max_devices: 5,
            max_machines: 3,
            peer: Some(true),
            ..ClusterShape::default()
        };
        let Some(w) = random_clustered(seed, shape, cluster) else {
            continue;
        };
        checked += usize::from(check(seed, &w));
    }
    assert!(checked > 100, "only {checked} feasible instances");
}

#[test]
fn model_md_device_set_as_a_cluster_matches_the_dp() {
    let mut checked = 0;
    for seed in 0..300 {
        let Some(w) = random_workload(
            seed,
            Shape {
                max_nodes: 9,
                max_accelerators: 4,
                ..Shape::default()
            },
        ) else {
            continue;
        };
        let old = plan(&Dp, &Problem::throughput(&w)).unwrap();
        let new = solve(
            &w,
            &ClusterCosts::of(&w),
            &Limits::default(),
            Tracking::Best,
            f64::INFINITY,
        )
        .unwrap();
        let old_value = old
            .outcome
            .placement
            .as_ref()
            .map(|_| old.outcome.objective);
        match (old_value, new.best.as_ref().map(|b| b.0)) {
            (Some(a), Some(b)) => assert!(close(a, b), "seed {seed}: DP {a}, cluster DP {b}"),
            (None, None) => {}
            (a, b) => panic!("seed {seed}: DP {a:?}, cluster DP {b:?}"),
        }
        checked += 1;
    }
    assert!(checked > 200);
}

/// Stopped by the ideal limit (`--max-ideals 1`, so no DAG qualifies) the DP keeps the
/// optimum over one topological order's prefixes: a checked plan no better than the true
/// optimum (brute force), with a lower bound no higher than it, unless that plan meets the
/// lower bounds and is proven optimal (then it equals the brute force); stopped by the
/// clock before that plan exists, it returns no plan and says why.
#[test]
fn a_stopped_run_keeps_the_prefix_plan_with_a_valid_bound() {
    use dnnplace::solve::cluster::plan::ClusterMethod;
    use dnnplace::solve::StopReason;
    let (mut kept, mut refused, mut proven) = (0, 0, 0);
    for seed in 0..300 {
        let Some(base) = random_workload(
            seed,
            Shape {
                max_nodes: 7,
                ..Shape::default()
            },
        ) else {
            continue;
        };
        let Some(w) = random_cluster(
            seed,
            &base,
            ClusterShape {
                max_devices: 5,
                ..ClusterShape::default()
            },
        ) else {
            continue;
        };
        let Some((optimum, _)) =
            brute_force(&w, &ClusterCosts::of(&w), Objective::Throughput, true)
                .unwrap()
                .best
        else {
            continue;
        };
        let limits = Limits {
            max_ideals: 1,
            ..Limits::default()
        };
        match cluster_plan(&w, &limits, ClusterMethod::Dp) {
            // The prefixes' plan met the lower bounds: optimal without any ideal.
            Ok(p) if p.stopped.is_none() => {
                let best = p.best.expect("a proven plan");
                assert!(
                    close(best.value, optimum),
                    "seed {seed}: proven {} vs {optimum}",
                    best.value
                );
                proven += 1;
            }
            Ok(p) => {
                assert_eq!(
                    p.stopped,
                    Some(StopReason::IdealLimit { limit: 1 }),
                    "seed {seed}"
                );
                let best = p.best.expect("a plan when the ideal limit stops the run");
                assert!(
                    best.value >= optimum * (1.0 - 1e-9),
                    "seed {seed}: {} below the optimum {optimum}",
                    best.value
                );
                assert!(
                    p.lower_bound <= optimum * (1.0 + 1e-9),
                    "seed {seed}: bound {} above the optimum {optimum}",
                    p.lower_bound
                );
                kept += 1;
            }
            Err(e) => {
                assert!(e.to_string().contains("ideals"), "seed {seed}: {e}");
                refused += 1;
            }
        }
        let clock = Limits {
            time_limit_s: Some(0.0),
            ..Limits::default()
        };
        let r = solve(
            &w,
            &ClusterCosts::of(&w),
            &clock,
            Tracking::Best,
            f64::INFINITY,
        )
        .unwrap();
        assert_eq!(
            (r.best.is_none(), r.stopped),
            (true, Some(StopReason::TimeLimit)),
            "seed {seed}"
        );
    }
    assert!(
        kept > 50 && proven > 10,
        "only {kept} plans kept ({refused} refused, {proven} proven)"
    );
}

/// The greedy chain (the plan when the DP stops without one): every plan it returns is
/// valid and contiguous on the cluster, scores what it says, and is never below the
/// optimum; it has a plan for most feasible instances. Through `solve::plan` with no
/// time at all, it is the plan, with the DP's bound.
#[test]
fn the_greedy_chain_is_a_checked_plan_never_below_the_optimum() {
    use dnnplace::solve::budget::Budget;
    use dnnplace::solve::cluster::greedy::greedy_chain;
    use dnnplace::solve::cluster::plan::ClusterMethod;
    let (mut found, mut feasible) = (0, 0);
    for seed in 0..300 {
        let shape = Shape {
            max_nodes: 7,
            training: seed % 2 == 0,
            ..Shape::default()
        };
        let cluster = ClusterShape {
            max_devices: 5,
            max_machines: 3,
            ..ClusterShape::default()
        };
        let Some(w) = random_clustered(seed, shape, cluster) else {
            continue;
        };
        let costs = ClusterCosts::of(&w);
        let Some((optimum, _)) = brute_force(&w, &costs, Objective::Throughput, true)
            .unwrap()
            .best
        else {
            continue;
        };
        feasible += 1;
        let Some((value, p)) = greedy_chain(&w, &costs, &Budget::unlimited()) else {
            continue;
        };
        found += 1;
        let e = evaluate_on_cluster(&w, &costs, &p);
        assert!(
            e.is_valid() && e.is_contiguous(),
            "seed {seed}: {:?} {:?}",
            e.violations,
            e.non_contiguous
        );
        assert!(
            close(e.max_load, value),
            "seed {seed}: greedy says {value}, its plan scores {}",
            e.max_load
        );
        assert!(
            value >= optimum * (1.0 - 1e-9),
            "seed {seed}: greedy {value} below the optimum {optimum}"
        );
        let clock = Limits {
            time_limit_s: Some(0.0),
            ..Limits::default()
        };
        let planned = cluster_plan(&w, &clock, ClusterMethod::Dp).unwrap();
        let best = planned
            .best
            .expect("the greedy chain's plan when the DP has none");
        // With no time the bisection stops after its first probe (everything packed at the
        // total compute), one of the probes the unlimited run also scored.
        assert!(
            best.value >= value * (1.0 - 1e-9) && planned.source.contains("greedy"),
            "seed {seed}: {} from {}",
            best.value,
            planned.source
        );
        assert!(
            planned.lower_bound <= optimum * (1.0 + 1e-9),
            "seed {seed}: bound {} above {optimum}",
            planned.lower_bound
        );
    }
    assert!(
        feasible > 100 && found * 10 >= feasible * 7,
        "greedy plans for {found} of {feasible} feasible instances"
    );
}

/// The volume bound is below the optimum over *all* placements (exhaustive search without
/// contiguity) on random clusters with tight memory and CPU-only nodes, and above the
/// DP's own first bound (total fastest work over all devices) often enough to matter.
#[test]
fn the_volume_bound_never_exceeds_the_optimum() {
    use dnnplace::solve::bounds::cluster::volume::volume_bound;
    let (mut checked, mut positive) = (0, 0);
    for seed in 0..300 {
        let shape = Shape {
            max_nodes: 6,
            training: seed % 2 == 0,
            ..Shape::default()
        };
        let cluster = ClusterShape {
            max_devices: 4,
            max_machines: 2,
            ..ClusterShape::default()
        };
        let Some(w) = random_clustered(seed, shape, cluster) else {
            continue;
        };
        let costs = ClusterCosts::of(&w);
        let Some((optimum, _)) = brute_force(&w, &costs, Objective::Throughput, false)
            .unwrap()
            .best
        else {
            continue;
        };
        let bound = volume_bound(&w, &costs, 10.0);
        assert!(
            bound <= optimum * (1.0 + 1e-9),
            "seed {seed}: volume bound {bound} above the optimum {optimum}"
        );
        checked += 1;
        positive += usize::from(bound > 0.0);
    }
    assert!(checked > 100, "only {checked} feasible instances");
    assert!(
        positive * 10 > checked * 9,
        "{positive} of {checked} bounds positive"
    );
}

/// On a graph large enough to be coarsened (a 48-layer BERT, 684 operators, on one machine
/// of 2 A100s and one of 2 V100s), the coarse path's plan is a checked contiguous plan of
/// the fine graph, never below the fine DP's proven optimum, and the volume bound never
/// above it; through `solve::plan` the fine DP still proves its optimum.
#[test]
fn coarse_plans_are_checked_and_bracket_the_fine_optimum() {
    use dnnplace::costmodel::cluster::cluster_and_profiles;
    use dnnplace::costmodel::graph::to_workload_on_cluster;
    use dnnplace::costmodel::TransformerSpec;
    use dnnplace::costmodel::{find_profile, transformer_graph, CostSettings, DType};
    use dnnplace::solve::bounds::cluster::volume::volume_bound;
    use dnnplace::solve::cluster::coarse::{coarse_plan, COARSEN_ABOVE};
    use dnnplace::solve::cluster::plan::{check, ClusterMethod};
    let graph = transformer_graph(&TransformerSpec::bert(48, 256, 4, 128, 1), DType::Fp32).unwrap();
    let settings = CostSettings {
        accelerator: find_profile("a100-80gb", &[]).unwrap(),
        cpu: find_profile("cpu-core", &[]).unwrap(),
        dtype: DType::Fp32,
        training: false,
        accelerators: 1,
        cpus: 1,
    };
    let (cluster, profiles) = cluster_and_profiles("1x2xa100-80gb+1x2xv100", &[]).unwrap();
    let w = to_workload_on_cluster(&graph, &settings, &cluster, &profiles).unwrap();
    assert!(w.len() > COARSEN_ABOVE, "{} operators", w.len());
    let costs = ClusterCosts::of(&w);
    let fine = solve(
        &w,
        &costs,
        &Limits::default(),
        Tracking::Best,
        f64::INFINITY,
    )
    .unwrap();
    assert_eq!(fine.stopped, None);
    let (optimum, _) = fine.best.unwrap();
    let volume = volume_bound(&w, &costs, 10.0);
    assert!(
        volume > 0.0 && volume <= optimum * (1.0 + 1e-9),
        "{volume} vs {optimum}"
    );
    let coarse = coarse_plan(&w, &costs, 60.0, volume, f64::INFINITY)
        .unwrap()
        .expect("a coarse plan");
    let checked = check(&w, &costs, coarse.value, coarse.placement).unwrap();
    assert!(
        checked.value >= optimum * (1.0 - 1e-9),
        "{} < {optimum}",
        checked.value
    );
    let planned = cluster_plan(&w, &Limits::default(), ClusterMethod::Dp).unwrap();
    assert_eq!(planned.stopped, None);
    assert!(close(planned.best.unwrap().value, optimum));
}

/// The tail test drops states that cannot end within the bound; it must never change the
/// optimum. The DP with it and without it, on random clusters (random DAGs and small
/// transformers, whose narrow windows let the test cut most), reach the same value, and
/// both prove it; the plans are checked by the scorer.
#[test]
fn the_tail_test_keeps_the_optimum() {
    use dnnplace::costmodel::cluster::cluster_and_profiles;
    use dnnplace::costmodel::graph::to_workload_on_cluster;
    use dnnplace::costmodel::TransformerSpec;
    use dnnplace::costmodel::{find_profile, transformer_graph, CostSettings, DType};
    use dnnplace::solve::cluster::dp::solve_without_tail_test;
    use dnnplace::solve::cluster::plan::check;
    let mut workloads = Vec::new();
    for seed in 0..120 {
        let shape = Shape {
            max_nodes: 12,
            training: seed % 2 == 0,
            ..Shape::default()
        };
        let cluster = ClusterShape {
            max_devices: 5,
            max_machines: 3,
            peer: [None, Some(true), Some(false)][seed as usize % 3],
            ..ClusterShape::default()
        };
        if let Some(w) = random_clustered(seed, shape, cluster) {
            workloads.push((format!("seed {seed}"), w));
        }
    }
    for (layers, training, cluster) in [
        (6, false, "1x2xa100-80gb+1x2xv100+1x2xh100"),
        (8, false, "2x2xv100+1x3xh100"),
        (4, true, "1x2xa100-80gb+1x2xv100"),
        (12, false, "3x1xa100-80gb+1x2xv100"),
    ] {
        let graph =
            transformer_graph(&TransformerSpec::bert(layers, 256, 4, 128, 1), DType::Fp32).unwrap();
        let settings = CostSettings {
            accelerator: find_profile("a100-80gb", &[]).unwrap(),
            cpu: find_profile("cpu-core", &[]).unwrap(),
            dtype: DType::Fp32,
            training,
            accelerators: 1,
            cpus: 1,
        };
        let (c, profiles) = cluster_and_profiles(cluster, &[]).unwrap();
        let w = to_workload_on_cluster(&graph, &settings, &c, &profiles).unwrap();
        workloads.push((format!("{layers}-layer BERT on {cluster}"), w));
    }
    let (mut compared, mut transformers) = (0, 0);
    for (name, w) in &workloads {
        let costs = ClusterCosts::of(w);
        let with = solve(w, &costs, &Limits::default(), Tracking::Best, f64::INFINITY).unwrap();
        let without =
            solve_without_tail_test(w, &costs, &Limits::default(), f64::INFINITY).unwrap();
        assert_eq!(with.stopped, None, "{name}");
        assert_eq!(without.stopped, None, "{name}");
        match (&with.best, &without.best) {
            (None, None) => {}
            (Some((a, pa)), Some((b, _))) => {
                assert!(close(*a, *b), "{name}: with the tail test {a}, without {b}");
                check(w, &costs, *a, pa.clone()).unwrap();
                compared += 1;
                transformers += usize::from(name.contains("BERT"));
            }
            (a, b) => panic!(
                "{name}: with the tail test {:?}, without {:?}",
                a.as_ref().map(|x| x.0),
                b.as_ref().map(|x| x.0)
            ),
        }
    }
    assert!(compared > 60 && transformers == 4, "{compared} compared");
}

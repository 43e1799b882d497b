//! The cluster DP against exhaustive search on small random clusters (1–3 types, 1–3
//! machines, with and without peer links, tight memory, CPU-only nodes, training graphs
//! whose gradients flow back across machines), per usage vector too; and MODEL.md's device
//! set as a cluster against the DP of MODEL.md.

mod cluster_gen;
mod common;

use cluster_gen::{random_cluster, ClusterShape};
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
        let Some(base) = random_workload(
            seed,
            Shape {
                max_nodes: 7,
                training: true,
                ..Shape::default()
            },
        ) else {
            continue;
        };
        let shape = ClusterShape {
            max_devices: 5,
            max_machines: 3,
            peer: Some(true),
            ..ClusterShape::default()
        };
        let Some(w) = random_cluster(seed, &base, shape) else {
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
/// optimum (brute force), with a lower bound no higher than it; stopped by the clock before
/// that plan exists, it returns no plan and says why.
#[test]
fn a_stopped_run_keeps_the_prefix_plan_with_a_valid_bound() {
    use dnnplace::solve::cluster::plan::{plan_on_cluster, ClusterMethod};
    use dnnplace::solve::StopReason;
    let (mut kept, mut refused) = (0, 0);
    for seed in 0..200 {
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
        match plan_on_cluster(&w, &limits, ClusterMethod::Dp, Tracking::Best) {
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
    assert!(kept > 50, "only {kept} plans kept ({refused} refused)");
}

/// The greedy chain (the plan when the DP stops without one): every plan it returns is
/// valid and contiguous on the cluster, scores what it says, and is never below the
/// optimum; it has a plan for most feasible instances. Through `plan_on_cluster` with no
/// time at all, it is the plan, with the DP's bound.
#[test]
fn the_greedy_chain_is_a_checked_plan_never_below_the_optimum() {
    use dnnplace::solve::budget::Budget;
    use dnnplace::solve::cluster::greedy::greedy_chain;
    use dnnplace::solve::cluster::plan::{plan_on_cluster, ClusterMethod};
    let (mut found, mut feasible) = (0, 0);
    for seed in 0..300 {
        let Some(base) = random_workload(
            seed,
            Shape {
                max_nodes: 7,
                training: seed % 2 == 0,
                ..Shape::default()
            },
        ) else {
            continue;
        };
        let shape = ClusterShape {
            max_devices: 5,
            max_machines: 3,
            ..ClusterShape::default()
        };
        let Some(w) = random_cluster(seed, &base, shape) else {
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
        let planned = plan_on_cluster(&w, &clock, ClusterMethod::Dp, Tracking::Best).unwrap();
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

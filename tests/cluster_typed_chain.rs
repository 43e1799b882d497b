//! The typed chain (`solve::cluster::typed_chain`, the cluster DP's starting plan) against
//! exhaustive search on small random clusters (1–3 types, 1–3 machines, with and without
//! peer links, tight memory, CPU-only nodes, training graphs): its plans are valid,
//! contiguous, score what it says and are never below the optimum; and the cluster DP
//! started from it (`dp::solve` with `Tracking::Best`) still returns the optimum.

mod cluster_gen;
mod common;

use cluster_gen::{random_clustered, ClusterShape};
use common::Shape;
use dnnplace::model::{ClusterCosts, Workload};
use dnnplace::score::evaluate_on_cluster;
use dnnplace::solve::budget::Budget;
use dnnplace::solve::cluster::brute_force::brute_force;
use dnnplace::solve::cluster::dp::{solve, Tracking};
use dnnplace::solve::cluster::typed_chain::typed_chain;
use dnnplace::solve::{Limits, Objective};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn instance(seed: u64, peer: Option<bool>) -> Option<Workload> {
    let shape = Shape {
        max_nodes: 7,
        training: seed.is_multiple_of(2),
        ..Shape::default()
    };
    let cluster = ClusterShape {
        max_devices: 5,
        max_machines: 3,
        peer,
        ..ClusterShape::default()
    };
    random_clustered(seed, shape, cluster)
}

/// Every typed-chain plan is valid and contiguous, scores its value and is never below
/// the brute-force optimum; it finds a plan for most feasible instances.
#[test]
fn typed_chain_plans_are_checked_and_never_below_the_optimum() {
    let (mut found, mut feasible) = (0, 0);
    for seed in 0..300 {
        let peer = [None, Some(true), Some(false)][(seed % 3) as usize];
        let Some(w) = instance(seed, peer) else {
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
        let Some((value, p)) = typed_chain(&w, &costs, &Budget::unlimited()) else {
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
            "seed {seed}: typed chain says {value}, its plan scores {}",
            e.max_load
        );
        assert!(
            value >= optimum * (1.0 - 1e-9),
            "seed {seed}: typed chain {value} below the optimum {optimum}"
        );
    }
    assert!(
        feasible > 100 && found * 10 >= feasible * 7,
        "typed-chain plans for {found} of {feasible} feasible instances"
    );
}

/// The cluster DP with the typed chain's start (`Tracking::Best`) equals brute force, and
/// its plan scores its value: the start prunes, it never changes the optimum.
#[test]
fn the_dp_started_from_the_typed_chain_equals_brute_force() {
    let mut checked = 0;
    for seed in 2000..2300 {
        let peer = [None, Some(true), Some(false)][(seed % 3) as usize];
        let Some(w) = instance(seed, peer) else {
            continue;
        };
        let costs = ClusterCosts::of(&w);
        let exhaustive = brute_force(&w, &costs, Objective::Throughput, true).unwrap();
        let dp = solve(
            &w,
            &costs,
            &Limits::default(),
            Tracking::Best,
            f64::INFINITY,
        )
        .unwrap();
        assert!(dp.stopped.is_none(), "seed {seed}: stopped");
        match (&exhaustive.best, &dp.best) {
            (None, None) => continue,
            (Some((b, _)), Some((d, p))) => {
                assert!(close(*b, *d), "seed {seed}: brute force {b}, DP {d}");
                assert!(
                    close(dp.lower_bound, *d),
                    "seed {seed}: bound {}, value {d}",
                    dp.lower_bound
                );
                let e = evaluate_on_cluster(&w, &costs, p);
                assert!(
                    e.is_valid() && e.is_contiguous() && close(e.max_load, *d),
                    "seed {seed}: {:?} {:?} {}",
                    e.violations,
                    e.non_contiguous,
                    e.max_load
                );
            }
            (b, d) => panic!(
                "seed {seed}: brute force {:?}, DP {:?}",
                b.as_ref().map(|x| x.0),
                d.as_ref().map(|x| x.0)
            ),
        }
        checked += 1;
    }
    assert!(checked > 100, "only {checked} feasible instances");
}

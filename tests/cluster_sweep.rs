//! The sweep, the cheapest mix for a target, the best mix within a budget and the price
//! frontier, all from the cluster DP's per-usage optima, against the exhaustive search's
//! per-usage optima on small random clusters (computed here from the brute force's list,
//! not with the code under test).

mod cluster_gen;
mod common;

use cluster_gen::{random_clustered, ClusterShape};
use common::Shape;
use dnnplace::model::ClusterCosts;
use dnnplace::solve::cluster::brute_force::brute_force;
use dnnplace::solve::cluster::sweep::{
    best_within_budget, cheapest_for_target, economics, frontier, price, sweep, Economics,
};
use dnnplace::solve::{Limits, Objective};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn sweep_target_budget_and_frontier_equal_brute_force() {
    let mut checked = 0;
    for seed in 0..60u64 {
        let shape = Shape {
            max_nodes: 7,
            ..Default::default()
        };
        let cluster = ClusterShape {
            max_devices: 6,
            ..Default::default()
        };
        let Some(w) = random_clustered(seed, shape, cluster) else {
            continue;
        };
        let costs = ClusterCosts::of(&w);
        let cluster = costs.cluster();
        let exhaustive = brute_force(&w, &costs, Objective::Throughput, true).unwrap();
        if exhaustive.best.is_none() {
            continue;
        }
        let bf: Vec<(Vec<usize>, f64, f64)> = exhaustive
            .per_usage
            .iter()
            .map(|(u, v)| {
                (
                    u.clone(),
                    *v,
                    u.iter()
                        .zip(cluster.types())
                        .map(|(&n, t)| n as f64 * t.price_per_hour)
                        .sum(),
                )
            })
            .collect();
        // The library's road for the per-usage optima (`plan --sweep`): the cluster DP
        // keeping the best plan per accelerator usage.
        let Economics { plan, .. } = economics(&w, &Limits::default()).unwrap();
        let plans = &plan.per_usage;

        for row in sweep(plans, cluster, &[]) {
            let want = bf
                .iter()
                .filter(|(u, _, _)| u.iter().sum::<usize>() <= row.accelerators)
                .map(|x| x.1)
                .fold(f64::INFINITY, f64::min);
            let got = row.plan.map_or(f64::INFINITY, |p| p.value);
            assert!(
                want == got || close(want, got),
                "seed {seed}: at most {} accelerators: brute force {want}, sweep {got}",
                row.accelerators
            );
        }
        for &(_, target, _) in &bf {
            let want = bf
                .iter()
                .filter(|x| x.1 <= target)
                .map(|x| x.2)
                .fold(f64::INFINITY, f64::min);
            let got = cheapest_for_target(plans, cluster, target * (1.0 + 1e-12))
                .map(|p| price(cluster, &p.usage))
                .unwrap();
            assert!(
                close(want, got),
                "seed {seed}: target {target}: brute force {want} $/h, DP {got} $/h"
            );
        }
        for &(_, _, budget) in &bf {
            let want = bf
                .iter()
                .filter(|x| x.2 <= budget)
                .map(|x| x.1)
                .fold(f64::INFINITY, f64::min);
            let got = best_within_budget(plans, cluster, budget)
                .map(|p| p.value)
                .unwrap();
            assert!(
                close(want, got),
                "seed {seed}: budget {budget}: brute force {want}, DP {got}"
            );
        }
        // The frontier: the brute force's non-dominated (price, TPS) pairs, by price.
        let mut want: Vec<(f64, f64)> = bf
            .iter()
            .filter(|a| {
                !bf.iter().any(|b| {
                    (b.2 <= a.2 && b.1 < a.1 && !close(b.1, a.1)) || (b.2 < a.2 && b.1 <= a.1)
                })
            })
            .map(|a| (a.2, a.1))
            .collect();
        want.sort_by(|a, b| a.0.total_cmp(&b.0));
        want.dedup_by(|a, b| a.0 == b.0);
        let got: Vec<(f64, f64)> = frontier(plans, cluster)
            .iter()
            .map(|p| (price(cluster, &p.usage), p.value))
            .collect();
        assert_eq!(
            want.len(),
            got.len(),
            "seed {seed}: frontier {want:?} vs {got:?}"
        );
        for (a, b) in want.iter().zip(&got) {
            assert!(
                close(a.0, b.0) && close(a.1, b.1),
                "seed {seed}: frontier {want:?} vs {got:?}"
            );
        }
        checked += 1;
    }
    assert!(checked >= 20, "checked {checked}");
}

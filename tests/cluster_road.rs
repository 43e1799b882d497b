//! The cluster road behind `Method` (issue #24): `solve::plan` on a workload with a cluster
//! gives the cluster planner's checked plan, whose value is exhaustive search's optimum
//! (the oracle, run here independently); a method the cluster does not plan is refused
//! with the command line's sentence; `compare` on a cluster runs the same loop.

mod cluster_gen;
mod common;

use cluster_gen::{random_clustered, ClusterShape};
use common::Shape;
use dnnplace::model::ClusterCosts;
use dnnplace::score::evaluate_on_cluster;
use dnnplace::solve::cluster::brute_force::brute_force;
use dnnplace::solve::compare::compare;
use dnnplace::solve::{method, methods, plan, Limits, MethodId, Objective, Problem, Status};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// `plan` with `auto`, `dp` and `brute-force` on random small clusters: the plan's value is
/// the brute-force optimum, proven, re-scored here by the cluster scorer; no plan exactly
/// when brute force finds none.
#[test]
fn plan_on_a_cluster_is_the_exhaustive_optimum() {
    let mut compared = 0;
    for seed in 0..60 {
        let shape = Shape {
            max_nodes: 6,
            training: seed % 2 == 0,
            ..Shape::default()
        };
        let cluster = ClusterShape {
            max_devices: 4,
            ..ClusterShape::default()
        };
        let Some(w) = random_clustered(seed, shape, cluster) else {
            continue;
        };
        let costs = ClusterCosts::of(&w);
        let oracle = brute_force(&w, &costs, Objective::Throughput, true).unwrap();
        for id in [MethodId::Auto, MethodId::Dp, MethodId::BruteForce] {
            let planned = plan(method(id).as_ref(), &Problem::throughput(&w)).unwrap();
            let cluster_plan = planned.cluster.as_ref().expect("a cluster plan");
            match (&oracle.best, &cluster_plan.best) {
                (Some((optimum, _)), Some(best)) => {
                    assert!(close(*optimum, best.value), "seed {seed} {id}");
                    assert_eq!(planned.outcome.status, Status::Optimal, "seed {seed} {id}");
                    assert!(close(planned.objective(Objective::Throughput), *optimum));
                    let e = evaluate_on_cluster(&w, &costs, &best.placement);
                    assert!(e.is_valid() && e.is_contiguous(), "seed {seed} {id}");
                    assert!(close(e.max_load, *optimum), "seed {seed} {id}");
                    assert_eq!(planned.outcome.placement.as_ref(), Some(&best.placement));
                    compared += 1;
                }
                (None, None) => {
                    assert_eq!(planned.outcome.status.kind(), "infeasible", "seed {seed}");
                }
                (o, p) => panic!("seed {seed} {id}: brute force {o:?}, plan {p:?}"),
            }
        }
    }
    assert!(compared > 60, "only {compared} plans compared");
}

/// A method the cluster does not plan is refused with the sentence the command line
/// prints; `compare` on a cluster lists it as skipped and its DP row holds the optimum.
#[test]
fn a_cluster_refuses_other_methods_and_compare_is_the_same_loop() {
    let (w, optimum) = (0..200)
        .find_map(|seed| {
            let w = random_clustered(seed, Shape::default(), ClusterShape::default())?;
            let costs = ClusterCosts::of(&w);
            let best = brute_force(&w, &costs, Objective::Throughput, true)
                .ok()?
                .best?;
            Some((w, best.0))
        })
        .expect("a feasible cluster");
    let refused = plan(method(MethodId::Greedy).as_ref(), &Problem::throughput(&w))
        .expect_err("greedy is refused on a cluster");
    assert_eq!(
        refused.to_string(),
        "on a cluster, --method is auto (the cluster DP), dp, ip, brute-force, rl or genetic, not greedy"
    );
    let c = compare(
        &w,
        Objective::Throughput,
        &Limits::default(),
        &methods(),
        false,
    );
    let dp = c
        .rows
        .iter()
        .find(|r| r.method == MethodId::Dp && r.contiguous_problem)
        .expect("a dp row");
    let value = dp.value(Objective::Throughput);
    assert!(close(value, optimum), "{value} vs {optimum}");
    assert!(
        c.skipped
            .iter()
            .any(|s| s.method == MethodId::Greedy && s.reason.contains("not greedy")),
        "{:?}",
        c.skipped
    );
}

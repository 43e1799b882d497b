//! The search placers (`rl`, `genetic`) on clusters: on tiny random clusters (1–3 types,
//! 1–3 machines) both reach the cluster brute force's optimum given enough steps (seeded),
//! over contiguous plans on the cluster and over all plans, TPS and sync; every plan is
//! re-scored by the cluster check of `solve::plan` (an error otherwise) and its bound
//! never exceeds the optimum; the time limit holds.

mod cluster_gen;
mod common;

use cluster_gen::{cluster_plan, random_clustered, ClusterShape};
use common::Shape;
use dnnplace::model::{ClusterCosts, Workload};
use dnnplace::score::evaluate_on_cluster;
use dnnplace::solve::cluster::brute_force::brute_force;
use dnnplace::solve::cluster::plan::ClusterMethod;
use dnnplace::solve::{Limits, MethodId, Objective, StopReason};

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn tiny(seed: u64) -> Option<Workload> {
    random_clustered(
        seed,
        Shape {
            max_nodes: 6,
            ..Shape::default()
        },
        ClusterShape {
            max_devices: 4,
            ..ClusterShape::default()
        },
    )
}

/// `method` with `steps` on tiny clusters meets brute force on every feasible instance.
fn reaches_optimum(method: MethodId, steps: usize) {
    let mut checked = 0;
    for seed in 0..40u64 {
        let Some(w) = tiny(seed) else { continue };
        let costs = ClusterCosts::of(&w);
        for contiguous in [true, false] {
            for sync in [false, true] {
                let objective = if sync {
                    Objective::Sync
                } else {
                    Objective::Throughput
                };
                let exhaustive = brute_force(&w, &costs, objective, contiguous).unwrap();
                let limits = Limits {
                    seed,
                    search_steps: Some(steps),
                    ..Limits::default()
                };
                let learned = ClusterMethod::Learned {
                    method,
                    contiguous,
                    sync,
                };
                let got = cluster_plan(&w, &limits, learned)
                    .unwrap_or_else(|e| panic!("{method} seed {seed}: {e}"));
                let Some((best, _)) = exhaustive.best else {
                    assert!(got.best.is_none(), "seed {seed}: a plan where none exists");
                    continue;
                };
                checked += 1;
                let plan = got.best.expect("a plan");
                // Re-scored here too, independently of the check inside `solve::plan`.
                let e = evaluate_on_cluster(&w, &costs, &plan.placement);
                assert!(e.is_valid(), "seed {seed}: {:?}", e.violations);
                assert!(!contiguous || e.is_contiguous(), "seed {seed}");
                let scored = if sync { e.sync_objective } else { e.max_load };
                assert!(close(scored, plan.value), "seed {seed}");
                assert!(
                    got.lower_bound <= best * (1.0 + 1e-9),
                    "seed {seed}: bound {} above the optimum {best}",
                    got.lower_bound
                );
                assert!(
                    close(plan.value, best),
                    "{method} ({}contiguous, sync {sync}) seed {seed}: {}, brute force {best}",
                    if contiguous { "" } else { "non-" },
                    plan.value
                );
                assert!(got.evaluations.is_some_and(|e| e > 0));
            }
        }
    }
    assert!(
        checked >= 40,
        "only {checked} tiny cluster instances checked"
    );
}

#[test]
fn policy_gradient_reaches_the_cluster_brute_force_optimum() {
    reaches_optimum(MethodId::Rl, 3000);
}

#[test]
fn brkga_reaches_the_cluster_brute_force_optimum() {
    reaches_optimum(MethodId::Genetic, 80);
}

#[test]
fn the_time_limit_holds_on_a_cluster() {
    // 10^7 steps or generations take far longer than the 0.5 s limit on any machine.
    let w = random_clustered(
        7,
        Shape {
            max_nodes: 40,
            ..Shape::default()
        },
        ClusterShape {
            max_devices: 8,
            ..ClusterShape::default()
        },
    )
    .or_else(|| tiny(3))
    .expect("an instance");
    for method in [MethodId::Rl, MethodId::Genetic] {
        let limits = Limits {
            time_limit_s: Some(0.5),
            search_steps: Some(10_000_000),
            ..Limits::default()
        };
        let learned = ClusterMethod::Learned {
            method,
            contiguous: true,
            sync: false,
        };
        let started = std::time::Instant::now();
        let got = cluster_plan(&w, &limits, learned).unwrap();
        let took = started.elapsed().as_secs_f64();
        assert!(took < 2.0, "{method}: {took} s for a 0.5 s limit");
        // Stopped by the limit, or proven optimal (its plan met the bound) before it.
        assert!(
            got.stopped.is_none() || got.stopped == Some(StopReason::TimeLimit),
            "{method}: {:?}",
            got.stopped
        );
    }
}

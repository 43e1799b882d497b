//! The cluster IP ([`dnnplace::solve::cluster::ip`]) against exhaustive search on small
//! random clusters (1–3 types, 1–3 machines, with and without peer links, tight memory,
//! CPU-only nodes, training graphs whose gradients flow back across machines): its proven
//! optimum equals brute force over all plans (non-contiguous) and over the contiguous plan
//! space (which the cluster DP searches too), for the max load and for `max FW + max BW`;
//! every plan it returns is valid and scores what it says. On MODEL.md's device set as a cluster it equals the single-machine IP.

mod cluster_gen;
mod common;

use cluster_gen::{random_clustered, ClusterShape};
use common::{random_workload, Shape};
use dnnplace::model::{ClusterCosts, Workload};
use dnnplace::score::evaluate_on_cluster;
use dnnplace::solve::cluster::brute_force::brute_force;
use dnnplace::solve::cluster::dp::{solve as dp_solve, Tracking};
use dnnplace::solve::cluster::ip::solve;
use dnnplace::solve::milp::Ip;
use dnnplace::solve::{plan, Limits, Objective, Problem, Status};

/// Within HiGHS's tolerances (the IP's gap is relative 1e-7, or 1e-5 of max(1, value)).
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-5 * a.abs().max(b.abs()).max(1.0)
}

/// The IP (no held plan, no bound given) against brute force on `w`; whether a plan exists.
fn check(seed: u64, w: &Workload, contiguous: bool) -> bool {
    check_objective(seed, w, Objective::Throughput, contiguous)
}

fn check_objective(seed: u64, w: &Workload, objective: Objective, contiguous: bool) -> bool {
    let sync = objective == Objective::Sync;
    let costs = ClusterCosts::of(w);
    let exhaustive = brute_force(w, &costs, objective, contiguous).unwrap();
    let (ip, _) = solve(
        w,
        &costs,
        &Limits::default(),
        objective,
        contiguous,
        None,
        0.0,
    )
    .unwrap();
    match (&exhaustive.best, &ip.placement) {
        (None, None) => {
            assert!(
                matches!(ip.status, Status::Infeasible { .. }),
                "seed {seed}: brute force finds no plan, the IP says {:?}",
                ip.status
            );
            false
        }
        (Some((b, _)), Some(p)) => {
            assert_eq!(ip.status, Status::Optimal, "seed {seed}");
            let e = evaluate_on_cluster(w, &costs, p);
            assert!(
                e.is_valid() && (!contiguous || e.is_contiguous()),
                "seed {seed}: {:?} {:?}",
                e.violations,
                e.non_contiguous
            );
            let scored = if sync { e.sync_objective } else { e.max_load };
            assert_eq!(scored, ip.objective, "seed {seed}: objective is the score");
            assert!(
                ip.objective >= *b * (1.0 - 1e-12),
                "seed {seed}: the IP's plan {} beats brute force {b}",
                ip.objective
            );
            assert!(
                close(ip.objective, *b),
                "seed {seed} (contiguous {contiguous}): brute force {b}, IP {} (bound {})",
                ip.objective,
                ip.bound
            );
            assert!(
                ip.bound <= *b * (1.0 + 1e-9),
                "seed {seed}: bound above the optimum"
            );
            if contiguous && !sync {
                let dp =
                    dp_solve(w, &costs, &Limits::default(), Tracking::Best, f64::INFINITY).unwrap();
                let d = dp
                    .best
                    .expect("the DP finds the contiguous plan brute force finds")
                    .0;
                assert!(
                    close(d, ip.objective),
                    "seed {seed}: DP {d}, IP {}",
                    ip.objective
                );
            }
            true
        }
        (b, _) => panic!(
            "seed {seed}: brute force {:?}, IP {:?} ({:?})",
            b.as_ref().map(|x| x.0),
            ip.objective,
            ip.status
        ),
    }
}

fn clustered(seed: u64, training: bool, shape: ClusterShape) -> Option<Workload> {
    let nodes = Shape {
        max_nodes: 6,
        training,
        ..Shape::default()
    };
    random_clustered(seed, nodes, shape)
}

#[test]
fn non_contiguous_ip_equals_brute_force_on_random_clusters() {
    let mut checked = 0;
    for seed in 0..120 {
        let shape = ClusterShape {
            max_devices: 4,
            ..ClusterShape::default()
        };
        let Some(w) = clustered(seed, seed % 2 == 0, shape) else {
            continue;
        };
        checked += usize::from(check(seed, &w, false));
    }
    assert!(checked > 60, "only {checked} feasible instances");
}

#[test]
fn non_contiguous_ip_equals_brute_force_with_peer_links_and_machines() {
    let mut checked = 0;
    for seed in 2000..2100 {
        let shape = ClusterShape {
            max_devices: 4,
            max_machines: 3,
            peer: Some(true),
            ..ClusterShape::default()
        };
        let Some(w) = clustered(seed, true, shape) else {
            continue;
        };
        checked += usize::from(check(seed, &w, false));
    }
    assert!(checked > 50, "only {checked} feasible instances");
}

#[test]
fn contiguous_ip_equals_brute_force_and_the_dp() {
    let mut checked = 0;
    for seed in 3000..3120 {
        let shape = ClusterShape {
            max_devices: 4,
            max_machines: 3,
            peer: None,
            ..ClusterShape::default()
        };
        let Some(w) = clustered(seed, seed % 2 == 1, shape) else {
            continue;
        };
        checked += usize::from(check(seed, &w, true));
    }
    assert!(checked > 60, "only {checked} feasible instances");
}

/// A held plan (brute force's own optimum) and a bound are used, never trusted: the result
/// is still the optimum, and never worse than the held plan.
#[test]
fn held_plans_and_bounds_keep_the_optimum() {
    let mut checked = 0;
    for seed in 4000..4060 {
        let shape = ClusterShape {
            max_devices: 4,
            ..ClusterShape::default()
        };
        let Some(w) = clustered(seed, true, shape) else {
            continue;
        };
        let costs = ClusterCosts::of(&w);
        let Some((optimum, p)) = brute_force(&w, &costs, Objective::Throughput, false)
            .unwrap()
            .best
        else {
            continue;
        };
        let (ip, _) = solve(
            &w,
            &costs,
            &Limits::default(),
            Objective::Throughput,
            false,
            Some(p),
            0.5 * optimum,
        )
        .unwrap();
        assert_eq!(ip.status, Status::Optimal, "seed {seed}");
        assert!(close(ip.objective, optimum) && ip.objective >= optimum * (1.0 - 1e-12));
        checked += 1;
    }
    assert!(checked > 30, "only {checked} feasible instances");
}

/// `max FW + max BW`, communication on the side of the node that produces it.
#[test]
fn sync_ip_equals_brute_force() {
    let mut checked = 0;
    for seed in 5000..5080 {
        let shape = ClusterShape {
            max_devices: 4,
            ..ClusterShape::default()
        };
        let Some(w) = clustered(seed, true, shape) else {
            continue;
        };
        checked += usize::from(check_objective(seed, &w, Objective::Sync, seed % 3 == 0));
    }
    assert!(checked > 40, "only {checked} feasible instances");
}

#[test]
fn model_md_device_set_as_a_cluster_matches_the_single_machine_ip() {
    let mut checked = 0;
    for seed in 0..80 {
        let Some(w) = random_workload(
            seed,
            Shape {
                max_nodes: 7,
                max_accelerators: 3,
                ..Shape::default()
            },
        ) else {
            continue;
        };
        let problem = Problem {
            contiguous: false,
            ..Problem::throughput(&w)
        };
        let old = plan(&Ip, &problem).unwrap().outcome;
        let (new, _) = solve(
            &w,
            &ClusterCosts::of(&w),
            &Limits::default(),
            Objective::Throughput,
            false,
            None,
            0.0,
        )
        .unwrap();
        match (&old.placement, &new.placement) {
            (Some(_), Some(_)) => {
                assert_eq!(
                    (&old.status, &new.status),
                    (&Status::Optimal, &Status::Optimal)
                );
                assert!(
                    close(old.objective, new.objective),
                    "seed {seed}: IP {}, cluster IP {}",
                    old.objective,
                    new.objective
                );
            }
            (None, None) => {}
            (a, b) => panic!(
                "seed {seed}: IP {:?}, cluster IP {:?}",
                a.is_some(),
                b.is_some()
            ),
        }
        checked += 1;
    }
    assert!(checked > 50, "only {checked} instances");
}

//! The integer programs against independent oracles.
//!
//! On tiny random workloads (≤ 7 nodes, k ≤ 3, ℓ ≤ 1, colour classes, backward nodes,
//! unsupported nodes, tight memory, zero costs): the IP's optimum equals exhaustive search
//! for non-contiguous and contiguous max-load, the synchronous objective and latency with
//! one piece per accelerator; the contiguous IP equals the DP. With q = 2 or 3 pieces the
//! latency IP equals exhaustive search over (placement, cut into ≤ q pieces) pairs. On the
//! published layer workloads, `ip --contiguous` is never worse than the DP and matches it
//! where it proves optimality.
//!
//! Every plan goes through `solve::plan`, which re-scores it.

mod common;

use common::{random_workload, Shape};
use dnnplace::model::Workload;
use dnnplace::solve::brute_force::BruteForce;
use dnnplace::solve::milp::Ip;
use dnnplace::solve::{dp, plan, Limits, Objective, Plan, Problem, Status};
use proptest::prelude::*;

const ABS: f64 = 1e-5;

fn shape() -> Shape {
    Shape {
        max_nodes: 7,
        max_accelerators: 3,
        max_cpus: 1,
        ..Shape::default()
    }
}

fn problem(w: &Workload, objective: Objective, contiguous: bool) -> Problem<'_> {
    Problem {
        workload: w,
        objective,
        contiguous,
        limits: Limits {
            threads: Some(1),
            ..Limits::default()
        },
        pipeline: None,
    }
}

fn run(
    method: &dyn dnnplace::solve::Method,
    w: &Workload,
    objective: Objective,
    contiguous: bool,
) -> Plan {
    plan(method, &problem(w, objective, contiguous))
        .unwrap_or_else(|e| panic!("{}: {e}", method.name()))
}

/// The IP and the oracle agree on the optimum (both infinite when infeasible).
fn assert_same_optimum(
    w: &Workload,
    objective: Objective,
    contiguous: bool,
) -> Result<(), TestCaseError> {
    let ip = run(&Ip, w, objective, contiguous);
    let oracle = run(&BruteForce, w, objective, contiguous);
    let (a, b) = (ip.objective(objective), oracle.objective(objective));
    if b.is_finite() {
        prop_assert!(
            (a - b).abs() <= ABS,
            "{objective:?} contiguous={contiguous}: ip {a}, brute force {b}; {:?}",
            ip.outcome.stats.notes
        );
        prop_assert_eq!(
            &ip.outcome.status,
            &Status::Optimal,
            "notes {:?}",
            ip.outcome.stats.notes
        );
        prop_assert!(ip.outcome.bound <= b + ABS);
    } else {
        prop_assert!(
            a.is_infinite(),
            "brute force finds no plan but the ip does: {a}"
        );
    }
    Ok(())
}

/// With a caller's warm start (a baseline's plan, valid for the problem), the IP still
/// proves the oracle's optimum: the warm start is only a plan to beat. (HiGHS 1.15 with its
/// default integrality tolerance proved an 11.5 warm start "optimal" where 11.25 exists:
/// tests/coarsen_properties.rs, `auto_coarsened_bound_regression`.)
fn warm_started_matches_brute_force(w: &Workload, contiguous: bool) -> Result<(), TestCaseError> {
    use dnnplace::solve::{method, MethodId};
    let oracle =
        run(&BruteForce, w, Objective::Throughput, contiguous).objective(Objective::Throughput);
    for id in [
        MethodId::Greedy,
        MethodId::Single,
        MethodId::PipeDream,
        MethodId::PipeDreamTopo,
    ] {
        let mut p = problem(w, Objective::Throughput, contiguous);
        let Some(warm) = method(id).solve(&p).ok().and_then(|o| o.placement) else {
            continue;
        };
        p.limits.warm_start = Some(warm);
        let ip = plan(&Ip, &p).unwrap_or_else(|e| panic!("ip warm-started by {id:?}: {e}"));
        let a = ip.objective(Objective::Throughput);
        if oracle.is_finite() {
            prop_assert!(
                (a - oracle).abs() <= ABS,
                "warm start {id:?}, contiguous={contiguous}: ip {a}, brute force {oracle}; {:?}",
                ip.outcome.stats.notes
            );
            prop_assert_eq!(&ip.outcome.status, &Status::Optimal);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 60, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn warm_started_ip_matches_brute_force(seed in any::<u64>()) {
        let Some(w) = random_workload(seed, shape()) else { return Ok(()) };
        warm_started_matches_brute_force(&w, true)?;
        warm_started_matches_brute_force(&w, false)?;
    }

    #[test]
    fn non_contiguous_throughput_matches_brute_force(seed in any::<u64>()) {
        let Some(w) = random_workload(seed, shape()) else { return Ok(()) };
        assert_same_optimum(&w, Objective::Throughput, false)?;
    }

    #[test]
    fn contiguous_throughput_matches_dp_and_brute_force(seed in any::<u64>()) {
        let Some(w) = random_workload(seed, shape()) else { return Ok(()) };
        assert_same_optimum(&w, Objective::Throughput, true)?;
        let ip = run(&Ip, &w, Objective::Throughput, true);
        let dp = dp::solve(&w, &Limits::default()).unwrap();
        if dp.placement.is_some() {
            prop_assert!((ip.objective(Objective::Throughput) - dp.objective).abs() <= ABS,
                "ip {} dp {}", ip.objective(Objective::Throughput), dp.objective);
        }
    }

    #[test]
    fn sync_matches_brute_force(seed in any::<u64>()) {
        let Some(w) = random_workload(seed, shape()) else { return Ok(()) };
        assert_same_optimum(&w, Objective::Sync, false)?;
        assert_same_optimum(&w, Objective::Sync, true)?;
    }

    #[test]
    fn latency_one_piece_matches_brute_force(seed in any::<u64>()) {
        let Some(w) = random_workload(seed, shape()) else { return Ok(()) };
        assert_same_optimum(&w, Objective::Latency { pieces: 1 }, false)?;
    }

    #[test]
    fn latency_with_pieces_matches_brute_force(seed in any::<u64>(), q in 2usize..=3) {
        let Some(w) = random_workload(seed, small_shape()) else { return Ok(()) };
        assert_same_optimum(&w, Objective::Latency { pieces: q }, false)?;
        let (one_piece, q_pieces) = (Objective::Latency { pieces: 1 }, Objective::Latency { pieces: q });
        let one = run(&Ip, &w, one_piece, false).objective(one_piece);
        let many = run(&Ip, &w, q_pieces, false).objective(q_pieces);
        prop_assert!(many <= one + ABS, "{} pieces: {} worse than one piece: {}", q, many, one);
    }
}

/// Brute force with cuts enumerated stays small on these.
fn small_shape() -> Shape {
    Shape {
        max_nodes: 6,
        max_accelerators: 2,
        max_cpus: 1,
        ..Shape::default()
    }
}

/// On 150 fixed seeds the q = 2 latency IP equals exhaustive search and proves it; counts
/// the instances where the plan's own cut beats the scorer's greedy cut of the same
/// assignment (why plans carry their cut).
#[test]
fn latency_two_pieces_equals_exhaustive_search_on_many_seeds() {
    let (mut total, mut better_than_greedy) = (0, 0);
    for seed in 0..150u64 {
        let Some(w) = random_workload(seed, small_shape()) else {
            continue;
        };
        let objective = Objective::Latency { pieces: 2 };
        let ip = run(&Ip, &w, objective, false);
        let oracle = run(&BruteForce, &w, objective, false);
        let (a, b) = (ip.objective(objective), oracle.objective(objective));
        total += 1;
        assert!(
            (a - b).abs() <= ABS || (a.is_infinite() && b.is_infinite()),
            "seed {seed}: ip {a}, exhaustive {b}"
        );
        if b.is_finite() {
            assert_eq!(
                ip.outcome.status,
                Status::Optimal,
                "seed {seed}: {:?}",
                ip.outcome.stats.notes
            );
            let mut greedy = ip.outcome.placement.clone().unwrap();
            greedy.pieces = None;
            let e = dnnplace::score::evaluate(&w, &greedy, true);
            if e.latency.as_ref().unwrap().max_pieces() <= 2
                && e.latency.as_ref().unwrap().total > a + ABS
            {
                better_than_greedy += 1;
            }
        }
    }
    eprintln!("latency q=2: IP = exhaustive search on {total} instances; its cut beats the greedy cut on {better_than_greedy}");
    assert!(total >= 100);
}

/// `ip --contiguous` on the published layer workloads: never worse than the DP; equal to
/// it (1e-6 relative) where it proves optimality. A 10 s limit each.
#[test]
fn contiguous_ip_matches_dp_on_paper_layer_workloads() {
    let Some(dir) = common::shared_dir("paper/throughput/layer") else {
        return;
    };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for path in files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
    {
        let w = dnnplace::io::read_workload(path).unwrap();
        let dp = dp::solve(&w, &Limits::default()).unwrap();
        let mut p = problem(&w, Objective::Throughput, true);
        p.limits = Limits {
            time_limit_s: Some(10.0),
            ..Limits::default()
        };
        let ip = plan(&Ip, &p).unwrap();
        let got = ip.objective(Objective::Throughput);
        let name = path.file_name().unwrap().to_string_lossy();
        eprintln!(
            "{name}: dp {} ip {got} bound {} status {:?}",
            dp.objective, ip.outcome.bound, ip.outcome.status
        );
        assert!(
            got <= dp.objective * (1.0 + 1e-9),
            "{name}: ip {got} worse than dp {}",
            dp.objective
        );
        assert!(
            ip.outcome.bound <= dp.objective * (1.0 + 1e-6),
            "{name}: bound {} above the dp optimum",
            ip.outcome.bound
        );
        if ip.outcome.status == Status::Optimal {
            assert!(
                (got - dp.objective).abs() <= 1e-6 * dp.objective,
                "{name}: ip {got} dp {}",
                dp.objective
            );
        }
    }
}

/// Non-contiguous splits pay off (issue 3): ≤ 17.7776 on bert24 and ≤ 31.7827 on gnmt
/// within 60 s. Ignored by default (it takes two minutes); run with `--ignored`.
#[test]
#[ignore]
fn non_contiguous_ip_beats_the_dp_on_bert24_and_gnmt() {
    let Some(dir) = common::shared_dir("paper/throughput/layer") else {
        return;
    };
    for (name, target) in [
        ("bert24_inference.json", 17.7776),
        ("gnmt_inference.json", 31.7827),
    ] {
        let w = dnnplace::io::read_workload(&dir.join(name)).unwrap();
        let mut p = problem(&w, Objective::Throughput, false);
        p.limits = Limits {
            time_limit_s: Some(60.0),
            ..Limits::default()
        };
        let ip = plan(&Ip, &p).unwrap();
        let got = ip.objective(Objective::Throughput);
        eprintln!(
            "{name}: ip {got} bound {} status {:?}",
            ip.outcome.bound, ip.outcome.status
        );
        assert!(got <= target + 1e-4, "{name}: {got} > {target}");
    }
}

/// Found by `sync_matches_brute_force`: no contiguous plan exists (3 accelerators of 12
/// bytes, no CPU), so the combinatorial bound proves every load impossible; it must stay
/// finite for HiGHS, and the IP must say infeasible like brute force, not fail.
#[test]
fn an_infeasible_contiguous_instance_is_reported_infeasible() {
    let w = random_workload(12700433904607822494, shape()).expect("a workload");
    for objective in [Objective::Sync, Objective::Throughput] {
        let oracle = run(&BruteForce, &w, objective, true);
        assert!(
            matches!(oracle.outcome.status, Status::Infeasible { .. }),
            "{:?}",
            oracle.outcome.status
        );
        let ip = run(&Ip, &w, objective, true);
        assert!(
            matches!(ip.outcome.status, Status::Infeasible { .. }),
            "{objective:?}: {:?}",
            ip.outcome.status
        );
        let feasible = run(&Ip, &w, objective, false);
        let exhaustive = run(&BruteForce, &w, objective, false);
        assert!((feasible.objective(objective) - exhaustive.objective(objective)).abs() <= ABS);
    }
}

//! The integer programs against independent oracles.
//!
//! On tiny random workloads (≤ 7 nodes, k ≤ 3, ℓ ≤ 1, colour classes, backward nodes,
//! unsupported nodes, tight memory, zero costs): the IP's optimum equals exhaustive search
//! for non-contiguous and contiguous max-load, the synchronous objective and latency with
//! one piece per accelerator; the contiguous IP equals the DP. With two pieces the IP is a
//! relaxation of the scorer's greedy cut (see `solve::milp::latency`), so we check that
//! its bound is sound and its plan is never worse than the plans it holds, and equality
//! when it claims optimality. On the published layer workloads, `ip --contiguous` is never
//! worse than the DP and matches it where it proves optimality.
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
    Shape { max_nodes: 7, max_accelerators: 3, max_cpus: 1, ..Shape::default() }
}

fn problem(w: &Workload, objective: Objective, contiguous: bool) -> Problem<'_> {
    Problem { workload: w, objective, contiguous, limits: Limits { threads: Some(1), ..Limits::default() } }
}

fn run(method: &dyn dnnplace::solve::Method, w: &Workload, objective: Objective, contiguous: bool) -> Plan {
    plan(method, &problem(w, objective, contiguous)).unwrap_or_else(|e| panic!("{}: {e}", method.name()))
}

/// The IP and the oracle agree on the optimum (both infinite when infeasible).
fn assert_same_optimum(w: &Workload, objective: Objective, contiguous: bool) -> Result<(), TestCaseError> {
    let ip = run(&Ip, w, objective, contiguous);
    let oracle = run(&BruteForce, w, objective, contiguous);
    let (a, b) = (ip.objective(objective), oracle.objective(objective));
    if b.is_finite() {
        prop_assert!((a - b).abs() <= ABS, "{objective:?} contiguous={contiguous}: ip {a}, brute force {b}; {:?}", ip.outcome.stats.notes);
        prop_assert_eq!(&ip.outcome.status, &Status::Optimal, "notes {:?}", ip.outcome.stats.notes);
        prop_assert!(ip.outcome.bound <= b + ABS);
    } else {
        prop_assert!(a.is_infinite(), "brute force finds no plan but the ip does: {a}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 60, failure_persistence: None, ..ProptestConfig::default() })]

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
    fn latency_two_pieces_is_sound(seed in any::<u64>()) {
        let Some(w) = random_workload(seed, shape()) else { return Ok(()) };
        let objective = Objective::Latency { pieces: 2 };
        let ip = run(&Ip, &w, objective, false);
        let oracle = run(&BruteForce, &w, objective, false);
        let one = run(&Ip, &w, Objective::Latency { pieces: 1 }, false);
        let (a, b) = (ip.objective(objective), oracle.objective(objective));
        prop_assert!(a >= b - ABS, "ip plan {a} beats the exhaustive optimum {b}");
        prop_assert!(ip.outcome.bound <= b + ABS, "bound {} above the optimum {b}", ip.outcome.bound);
        prop_assert!(a <= one.objective(Objective::Latency { pieces: 1 }) + ABS, "two pieces worse than one");
        if ip.outcome.status == Status::Optimal {
            prop_assert!((a - b).abs() <= ABS, "claims optimal {a} but the optimum is {b}");
        }
    }
}

/// A tiny instance where the scorer's greedy cut differs from the best cut: documents
/// that the latency IP with q ≥ 2 is a relaxation and is never called optimal wrongly.
#[test]
fn latency_two_pieces_never_claims_a_wrong_optimum_on_many_seeds() {
    let mut equal = 0;
    let mut total = 0;
    for seed in 0..150u64 {
        let Some(w) = random_workload(seed, shape()) else { continue };
        let objective = Objective::Latency { pieces: 2 };
        let ip = run(&Ip, &w, objective, false);
        let oracle = run(&BruteForce, &w, objective, false);
        let (a, b) = (ip.objective(objective), oracle.objective(objective));
        total += 1;
        if (a - b).abs() <= ABS {
            equal += 1;
        } else {
            assert_ne!(ip.outcome.status, Status::Optimal, "seed {seed}: claims optimal {a}, optimum {b}");
        }
    }
    eprintln!("latency q=2: the IP's plan is optimal on {equal} of {total} random instances");
}

/// `ip --contiguous` on the published layer workloads: never worse than the DP; equal to
/// it (1e-6 relative) where it proves optimality. A 10 s limit each.
#[test]
fn contiguous_ip_matches_dp_on_paper_layer_workloads() {
    let Some(dir) = common::shared_dir("paper/throughput/layer") else { return };
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for path in files.iter().filter(|p| p.extension().is_some_and(|e| e == "json")) {
        let w = dnnplace::io::read_workload(path).unwrap();
        let dp = dp::solve(&w, &Limits::default()).unwrap();
        let mut p = problem(&w, Objective::Throughput, true);
        p.limits = Limits { time_limit_s: Some(10.0), ..Limits::default() };
        let ip = plan(&Ip, &p).unwrap();
        let got = ip.objective(Objective::Throughput);
        let name = path.file_name().unwrap().to_string_lossy();
        eprintln!("{name}: dp {} ip {got} bound {} status {:?}", dp.objective, ip.outcome.bound, ip.outcome.status);
        assert!(got <= dp.objective * (1.0 + 1e-9), "{name}: ip {got} worse than dp {}", dp.objective);
        assert!(ip.outcome.bound <= dp.objective * (1.0 + 1e-6), "{name}: bound {} above the dp optimum", ip.outcome.bound);
        if ip.outcome.status == Status::Optimal {
            assert!((got - dp.objective).abs() <= 1e-6 * dp.objective, "{name}: ip {got} dp {}", dp.objective);
        }
    }
}

/// Non-contiguous splits pay off (issue 3): ≤ 17.7776 on bert24 and ≤ 31.7827 on gnmt
/// within 60 s. Ignored by default (it takes two minutes); run with `--ignored`.
#[test]
#[ignore]
fn non_contiguous_ip_beats_the_dp_on_bert24_and_gnmt() {
    let Some(dir) = common::shared_dir("paper/throughput/layer") else { return };
    for (name, target) in [("bert24_inference.json", 17.7776), ("gnmt_inference.json", 31.7827)] {
        let w = dnnplace::io::read_workload(&dir.join(name)).unwrap();
        let mut p = problem(&w, Objective::Throughput, false);
        p.limits = Limits { time_limit_s: Some(60.0), ..Limits::default() };
        let ip = plan(&Ip, &p).unwrap();
        let got = ip.objective(Objective::Throughput);
        eprintln!("{name}: ip {got} bound {} status {:?}", ip.outcome.bound, ip.outcome.status);
        assert!(got <= target + 1e-4, "{name}: {got} > {target}");
    }
}

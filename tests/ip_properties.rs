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
//! Every IP claims "optimal" only after a second HiGHS run (milp::second_opinion): each IP
//! — max-load and sync, non-contiguous and contiguous, on one machine and on a cluster, and
//! latency — is held to brute force under three HiGHS `random_seed`s, with and without the
//! combinatorial load bound (without it HiGHS must prove the optimum itself, so the second
//! opinion runs).
//!
//! Every plan goes through `solve::plan`, which re-scores it.

mod cluster_gen;
mod common;

use common::{random_workload, Shape};
use dnnplace::model::{ClusterCosts, Device, DeviceSet, Node, Placement, Workload};
use dnnplace::solve::brute_force::BruteForce;
use dnnplace::solve::milp::{Ip, IpExperiment, IpOptions};
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
        devices: dnnplace::solve::Devices::of(w),
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

    /// HiGHS's search path (its `random_seed`) must not change the proven optimum: with
    /// q = 2 pieces, seeds 0, 1 and 2 each give the brute-force optimum and "optimal"
    /// (the class of `two_pieces_highs_search_regression`: HiGHS 1.15 pruned the optimum
    /// on one search path only).
    #[test]
    fn latency_with_pieces_optimum_independent_of_highs_seed(seed in any::<u64>()) {
        let Some(w) = random_workload(seed, small_shape()) else { return Ok(()) };
        let objective = Objective::Latency { pieces: 2 };
        let oracle = run(&BruteForce, &w, objective, false).objective(objective);
        prop_assume!(oracle.is_finite());
        for highs_seed in 0..3 {
            let mut p = problem(&w, objective, false);
            p.limits.ip.highs_options.push(("random_seed".into(), highs_seed.to_string()));
            let ip = plan(&Ip, &p).unwrap_or_else(|e| panic!("ip: {e}"));
            let a = ip.objective(objective);
            prop_assert!((a - oracle).abs() <= ABS,
                "HiGHS seed {}: ip {}, brute force {}; {:?}", highs_seed, a, oracle, ip.outcome.stats.notes);
            prop_assert_eq!(&ip.outcome.status, &Status::Optimal);
            prop_assert!(ip.outcome.bound <= oracle + ABS);
        }
    }
}

/// Property-test seed 12440452521167549374 (`latency_with_pieces_matches_brute_force`,
/// q = 2), rebuilt in code. Ids 3, 13, 23, 33, 43 are n0 … n4 (index order);
/// n3 and n4 share a colour class; 2 accelerators of 10 bytes.
///
/// ```text
/// node  fpga  cpu    size   out-edge (cost)
/// n0    9.75  24.25  2.5    n0 → n4 (3.75)
/// n1    8.75  26.5   0      n1 → n2 (3.75)
/// n2    0     14.5   2.25   n2 → n3 (0)
/// n3    0     29     4.75   n3 → n4 (0.25)
/// n4    4     12.25  2.75
/// ```
fn two_pieces_instance() -> Workload {
    let node = |id: i64, fpga: f64, cpu: f64, size: f64, class: Option<i64>| Node {
        id,
        name: None,
        fpga_latency: fpga,
        cpu_latency: cpu,
        size_bytes: size,
        supported_on_accelerator: true,
        is_backward: false,
        color_class: class,
        layer_id: None,
        module: None,
        memory: None,
    };
    Workload::new(
        vec![
            node(3, 9.75, 24.25, 2.5, Some(0)),
            node(13, 8.75, 26.5, 0.0, None),
            node(23, 0.0, 14.5, 2.25, Some(3)),
            node(33, 0.0, 29.0, 4.75, Some(2)),
            node(43, 4.0, 12.25, 2.75, Some(2)),
        ],
        vec![
            (3, 43, 3.75, 0.0),
            (13, 23, 3.75, 0.0),
            (23, 33, 0.0, 0.0),
            (33, 43, 0.25, 0.0),
        ],
        DeviceSet {
            accelerators: 2,
            memory_per_accelerator_bytes: 10.0,
            cpus: 0,
        },
    )
    .unwrap()
}

/// HiGHS 1.15 (default seed, presolve on) proved 22.5 "optimal" for q = 2 where 21.25
/// exists. By hand (MODEL.md, Latency): acc1 runs {n1, n2} from 0 to 8.75 (n2's output
/// costs 0). On acc0, one piece {n0, n3, n4} waits for n2: 8.75 + 9.75 + 4 + c(n2) = 22.5.
/// Two pieces: [n0] runs 0 → 9.75 + c(n0) = 13.5 (Out); then [n3, n4] starts at
/// max(13.5, 8.75) and takes 4 + c(n0) + c(n2) = 7.75 (In): 21.25. No plan does better:
/// the brute force agrees, and the scorer gives the hand cut 21.25.
#[test]
fn two_pieces_highs_search_regression() {
    let w = two_pieces_instance();
    let objective = Objective::Latency { pieces: 2 };
    let mut hand = Placement::new(vec![
        Device::Accelerator(0),
        Device::Accelerator(1),
        Device::Accelerator(1),
        Device::Accelerator(0),
        Device::Accelerator(0),
    ]);
    hand.pieces = Some(vec![0, 0, 0, 1, 1]);
    let scored = dnnplace::score::evaluate(&w, &hand, true);
    assert_eq!(scored.latency.as_ref().unwrap().total, 21.25);
    let mut merged = hand.clone();
    merged.pieces = Some(vec![0; 5]);
    let merged = dnnplace::score::evaluate(&w, &merged, true);
    assert_eq!(merged.latency.as_ref().unwrap().total, 22.5);

    let oracle = run(&BruteForce, &w, objective, false);
    assert_eq!(oracle.objective(objective), 21.25);
    let ip = run(&Ip, &w, objective, false);
    assert!(
        (ip.objective(objective) - 21.25).abs() <= ABS,
        "ip {}; {:?}",
        ip.objective(objective),
        ip.outcome.stats.notes
    );
    assert_eq!(ip.outcome.status, Status::Optimal);
    assert!(
        ip.outcome.bound <= 21.25 + ABS,
        "bound {}",
        ip.outcome.bound
    );
    // One piece per accelerator: 22.5 is the optimum there.
    let one = Objective::Latency { pieces: 1 };
    assert_eq!(run(&BruteForce, &w, one, false).objective(one), 22.5);
    assert!((run(&Ip, &w, one, false).objective(one) - 22.5).abs() <= ABS);
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

/// `ip --contiguous` on the published layer workloads: never better than the DP's proven
/// optimum, its bound never above it, and equal to it (1e-6 relative) where it claims
/// optimality. A 10 s limit each.
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
        // No plan beats the DP's proven optimum; whether the IP reaches it within the time
        // limit depends on the machine's load (its warm start shares the limit), so only a
        // claim of optimality is held to equality below.
        assert!(
            got >= dp.objective * (1.0 - 1e-9),
            "{name}: ip {got} better than the dp optimum {}",
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

/// The limits of one HiGHS search path: `random_seed` `highs_seed`, with or without the
/// combinatorial load bound.
fn seeded_limits(highs_seed: u64, load_bound: bool) -> Limits {
    let ip = if load_bound {
        IpOptions::default()
    } else {
        IpOptions::default().with(IpExperiment::NoBound)
    };
    let mut limits = Limits {
        threads: Some(1),
        ip,
        ..Limits::default()
    };
    (limits.ip.highs_options).push(("random_seed".into(), highs_seed.to_string()));
    limits
}

/// Whether a run's notes show HiGHS's own claim checked by a second run, and whether a
/// check found HiGHS's claim wrong.
fn second_opinion_ran(notes: &[String]) -> (usize, usize) {
    let ran = notes.iter().any(|n| n.contains("HiGHS second opinion"));
    let wrong = notes.iter().any(|n| n.contains("earlier claim was wrong"));
    (usize::from(ran), usize::from(wrong))
}

/// The max-load and sync IPs (non-contiguous, and contiguous: the stage chain) equal brute
/// force and prove it under HiGHS seeds 0, 1 and 2, with and without the load bound, on
/// 50 random workloads; counts the runs where a second opinion checked HiGHS's claim.
#[test]
fn load_ips_match_brute_force_under_several_highs_seeds() {
    let (mut compared, mut checked, mut wrong) = (0, 0, 0);
    for seed in 0..50u64 {
        let Some(w) = random_workload(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15), shape()) else {
            continue;
        };
        for objective in [Objective::Throughput, Objective::Sync] {
            for contiguous in [false, true] {
                let oracle = run(&BruteForce, &w, objective, contiguous).objective(objective);
                for (highs_seed, load_bound) in [(0, true), (1, false), (2, false)] {
                    let mut p = problem(&w, objective, contiguous);
                    p.limits = seeded_limits(highs_seed, load_bound);
                    let ip = plan(&Ip, &p).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
                    let a = ip.objective(objective);
                    let notes = &ip.outcome.stats.notes;
                    let at = format!("seed {seed} {objective:?} contiguous={contiguous} HiGHS seed {highs_seed} bound {load_bound}");
                    if oracle.is_finite() {
                        assert!(
                            (a - oracle).abs() <= ABS,
                            "{at}: ip {a}, brute force {oracle}; {notes:?}"
                        );
                        assert_eq!(ip.outcome.status, Status::Optimal, "{at}: {notes:?}");
                        assert!(
                            ip.outcome.bound <= oracle + ABS,
                            "{at}: bound {}",
                            ip.outcome.bound
                        );
                    } else {
                        assert!(
                            a.is_infinite(),
                            "{at}: brute force finds no plan, the ip {a}"
                        );
                    }
                    compared += 1;
                    let (ran, caught) = second_opinion_ran(notes);
                    (checked, wrong) = (checked + ran, wrong + caught);
                }
            }
        }
    }
    eprintln!("load IPs: {compared} runs equal brute force; a second opinion ran in {checked}, caught a wrong claim in {wrong}");
    assert!(
        compared >= 400 && checked >= 100,
        "{compared} runs, {checked} checked"
    );
}

/// The cluster IP (max load and sync, non-contiguous and the cluster DP's contiguous space)
/// equals the cluster brute force and proves it under HiGHS seeds 0, 1 and 2 on 40 random
/// clusters; counts the runs where a second opinion checked HiGHS's claim.
#[test]
fn cluster_ip_matches_brute_force_under_several_highs_seeds() {
    use cluster_gen::{random_clustered, ClusterShape};
    use dnnplace::solve::cluster::brute_force::brute_force;
    let (mut compared, mut checked, mut wrong) = (0, 0, 0);
    for seed in 0..40u64 {
        let nodes = Shape {
            max_nodes: 6,
            training: seed % 2 == 0,
            ..Shape::default()
        };
        let cluster = ClusterShape {
            max_devices: 4,
            ..ClusterShape::default()
        };
        let Some(w) = random_clustered(seed + 7000, nodes, cluster) else {
            continue;
        };
        let costs = ClusterCosts::of(&w);
        for objective in [Objective::Throughput, Objective::Sync] {
            for contiguous in [false, true] {
                let exhaustive = brute_force(&w, &costs, objective, contiguous).unwrap();
                for highs_seed in 0..3 {
                    let limits = seeded_limits(highs_seed, true);
                    let (ip, _) = dnnplace::solve::cluster::ip::solve(
                        &w, &costs, &limits, objective, contiguous, None, 0.0,
                    )
                    .unwrap();
                    let at = format!(
                        "seed {seed} {objective:?} contiguous={contiguous} HiGHS seed {highs_seed}"
                    );
                    let notes = &ip.stats.notes;
                    match &exhaustive.best {
                        Some((b, _)) => {
                            let close = (ip.objective - b).abs() <= 1e-5 * b.abs().max(1.0);
                            assert!(
                                close,
                                "{at}: ip {}, brute force {b}; {notes:?}",
                                ip.objective
                            );
                            assert_eq!(ip.status, Status::Optimal, "{at}: {notes:?}");
                            assert!(ip.bound <= b * (1.0 + 1e-9), "{at}: bound {}", ip.bound);
                        }
                        None => assert!(
                            matches!(ip.status, Status::Infeasible { .. }),
                            "{at}: brute force finds no plan, the IP says {:?}",
                            ip.status
                        ),
                    }
                    compared += 1;
                    let (ran, caught) = second_opinion_ran(notes);
                    (checked, wrong) = (checked + ran, wrong + caught);
                }
            }
        }
    }
    eprintln!("cluster IP: {compared} runs equal brute force; a second opinion ran in {checked}, caught a wrong claim in {wrong}");
    assert!(
        compared >= 300 && checked >= 30,
        "{compared} runs, {checked} checked"
    );
}

/// A plan that meets the combinatorial load bound up to its rounding (2.75 against
/// 2.74999999725) is proven optimal by that bound: before, HiGHS's own "optimal" at
/// 2.7500004636 was sent to a second opinion whose cutoff run stopped without settling it,
/// and the plan lost its proof (CI, stop 38's pre-check: seed 1088156584374389780).
#[test]
fn a_plan_at_the_load_bound_is_optimal_without_a_second_opinion() {
    let w = random_workload(1088156584374389780, shape()).expect("a workload");
    assert_same_optimum(&w, Objective::Throughput, false).unwrap();
}

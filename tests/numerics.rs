//! Numerics (issue #11): huge and tiny values never give a wrong "proven optimal".
//!
//! Regression tests for the reproducers of #11 — a 1e15 node before 5-unit nodes (plain
//! prefix sums gave a "proven optimal" 10.0 where exhaustive search finds 9.97), the same
//! with 1e9 (the DP and the IP failed their internal checks), sizes of 1e308 under a memory
//! of 1.7e308 (sums overflowed to ∞ and ∞ − ∞ = NaN: "no feasible placement") — and a
//! property test: random small workloads whose values are spread log-uniformly over
//! 1e-6 … 1e15, solved by the DP and the IP (contiguous and not), never claim an optimum
//! above exhaustive search. Every plan goes through `solve::plan`, which re-scores it.

mod common;

use common::{random_workload, Rng, Shape};
use dnnplace::io::parse_workload;
use dnnplace::model::{DeviceSet, Node, Workload};
use dnnplace::solve::brute_force::BruteForce;
use dnnplace::solve::dp::Dp;
use dnnplace::solve::milp::Ip;
use dnnplace::solve::{plan, Limits, Method, Objective, Plan, Problem, Status};
use proptest::prelude::*;

/// The DP's loads are exact to a few ulps (src/model/numerics.rs): its optimum equals the
/// oracle's up to the scorer's own rounding.
const DP_REL: f64 = 1e-12;
/// HiGHS proves optimality within its tolerances, 1e-5 relative after rescaling
/// (src/solve/milp/presolve.rs), plus the default gap 1e-7.
const IP_REL: f64 = 1.1e-5;

const ISSUE_11: &str = r#"{"maxSizePerFPGA":1e9,"maxFPGAs":2,"maxCPUs":1,"nodes":[{"id":1,"fpgaLatency":1e15,"cpuLatency":0.001},{"id":2,"fpgaLatency":5,"cpuLatency":100},{"id":3,"fpgaLatency":5,"cpuLatency":100},{"id":4,"fpgaLatency":4.97,"cpuLatency":100}],"edges":[{"sourceId":1,"destId":2,"cost":0},{"sourceId":2,"destId":3,"cost":0},{"sourceId":3,"destId":4,"cost":0}]}"#;

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

fn run(method: &dyn Method, w: &Workload, objective: Objective, contiguous: bool) -> Plan {
    plan(method, &problem(w, objective, contiguous))
        .unwrap_or_else(|e| panic!("{}: {e}", method.name()))
}

/// `method` proves the oracle's optimum (within `rel`) and never claims less than a plan
/// the oracle can score.
fn assert_matches_oracle(
    method: &dyn Method,
    w: &Workload,
    objective: Objective,
    contiguous: bool,
    rel: f64,
) {
    let got = run(method, w, objective, contiguous);
    let oracle = run(&BruteForce, w, objective, contiguous);
    let (a, b) = (got.objective(objective), oracle.objective(objective));
    assert_eq!(
        got.outcome.status,
        Status::Optimal,
        "{}: {:?}",
        method.name(),
        got.outcome.stats.notes
    );
    assert!(
        a.is_finite() && b.is_finite(),
        "{} {a} vs oracle {b}",
        method.name()
    );
    assert!(
        a <= b * (1.0 + rel),
        "{} claims {a} optimal, exhaustive search finds {b}",
        method.name()
    );
    assert!(
        a >= b * (1.0 - 1e-12),
        "{} scores {a}, below exhaustive search's {b}",
        method.name()
    );
}

#[test]
fn a_1e15_node_before_small_ones_gives_997_not_10() {
    let w = parse_workload(ISSUE_11).unwrap();
    let dp = run(&Dp, &w, Objective::Throughput, true);
    // {1} on the CPU (0.001), {2} and {3, 4} on the accelerators: 5 and 9.97.
    assert!(
        (dp.objective(Objective::Throughput) - 9.97).abs() < 1e-12,
        "{}",
        dp.objective(Objective::Throughput)
    );
    assert_matches_oracle(&Dp, &w, Objective::Throughput, true, DP_REL);
    assert_matches_oracle(&Ip, &w, Objective::Throughput, true, IP_REL);
    assert_matches_oracle(&Ip, &w, Objective::Throughput, false, IP_REL);
    assert_matches_oracle(&Ip, &w, Objective::Sync, false, IP_REL);
    assert_matches_oracle(&Ip, &w, Objective::Latency { pieces: 1 }, false, IP_REL);
}

#[test]
fn a_1e9_node_neither_fails_the_dp_check_nor_is_rejected_by_highs() {
    let w = parse_workload(&ISSUE_11.replace("1e15", "1e9")).unwrap();
    assert_matches_oracle(&Dp, &w, Objective::Throughput, true, DP_REL);
    assert_matches_oracle(&Ip, &w, Objective::Throughput, true, IP_REL);
    assert_matches_oracle(&Ip, &w, Objective::Throughput, false, IP_REL);
}

#[test]
fn sizes_near_f64_max_do_not_overflow_to_infeasible() {
    // Each node fits an accelerator alone (1e308 ≤ 1.7e308), two do not (2e308 = ∞ in f64).
    let two = r#"{"maxSizePerFPGA":1.7e308,"maxFPGAs":2,"maxCPUs":0,"nodes":[{"id":1,"fpgaLatency":1,"cpuLatency":1,"size":1e308},{"id":2,"fpgaLatency":1,"cpuLatency":1,"size":1e308}],"edges":[{"sourceId":1,"destId":2,"cost":0}]}"#;
    let four = r#"{"maxSizePerFPGA":1.7e308,"maxFPGAs":3,"maxCPUs":1,"nodes":[{"id":1,"fpgaLatency":1,"cpuLatency":1,"size":1e308},{"id":2,"fpgaLatency":1,"cpuLatency":1,"size":1e308},{"id":3,"fpgaLatency":1,"cpuLatency":1,"size":1e308},{"id":4,"fpgaLatency":1,"cpuLatency":1,"size":1e308}],"edges":[{"sourceId":1,"destId":2,"cost":0},{"sourceId":2,"destId":3,"cost":0},{"sourceId":3,"destId":4,"cost":0}]}"#;
    for json in [two, four] {
        let w = parse_workload(json).unwrap();
        let dp = run(&Dp, &w, Objective::Throughput, true);
        assert_eq!(dp.objective(Objective::Throughput), 1.0);
        assert_matches_oracle(&Dp, &w, Objective::Throughput, true, DP_REL);
        assert_matches_oracle(&Ip, &w, Objective::Throughput, true, IP_REL);
        assert_matches_oracle(&Ip, &w, Objective::Throughput, false, IP_REL);
    }
}

#[test]
fn times_near_f64_max_are_rescaled_not_overflowed() {
    // Compute of 1e307 per node: any two on one device exceed f64::MAX.
    let json = r#"{"maxSizePerFPGA":10,"maxFPGAs":2,"maxCPUs":1,"nodes":[{"id":1,"fpgaLatency":1e307,"cpuLatency":3e307},{"id":2,"fpgaLatency":2e307,"cpuLatency":1e307},{"id":3,"fpgaLatency":1e307,"cpuLatency":5e307}],"edges":[{"sourceId":1,"destId":2,"cost":1e306},{"sourceId":2,"destId":3,"cost":1e306}]}"#;
    let w = parse_workload(json).unwrap();
    assert_matches_oracle(&Dp, &w, Objective::Throughput, true, DP_REL);
    assert_matches_oracle(&Ip, &w, Objective::Throughput, false, IP_REL);
}

/// `10^x`, x uniform in [−6, 15]; zero one time in eight.
fn log_uniform(r: &mut Rng) -> f64 {
    if r.below(8) == 0 {
        return 0.0;
    }
    10f64.powf(-6.0 + 21.0 * (r.below(1 << 30) as f64 / (1u64 << 30) as f64))
}

/// The graph, colour classes, backward and unsupported nodes of a [`random_workload`],
/// with every time and size redrawn log-uniformly over 1e-6 … 1e15.
fn spread_workload(seed: u64) -> Option<Workload> {
    let shape = Shape {
        max_nodes: 6,
        max_accelerators: 3,
        max_cpus: 1,
        ..Shape::default()
    };
    let base = random_workload(seed, shape)?;
    let mut r = Rng::new(seed ^ 0x5eed);
    let nodes: Vec<Node> = base
        .nodes()
        .iter()
        .map(|v| Node {
            fpga_latency: log_uniform(&mut r),
            cpu_latency: log_uniform(&mut r),
            size_bytes: log_uniform(&mut r),
            memory: None,
            ..v.clone()
        })
        .collect();
    let cost: Vec<f64> = (0..nodes.len()).map(|_| log_uniform(&mut r)).collect();
    let edges = base
        .edges()
        .iter()
        .map(|e| (nodes[e.from].id, nodes[e.to].id, cost[e.from], 0.0))
        .collect();
    let total: f64 = nodes.iter().map(|v| v.size_bytes).sum();
    let k = base.devices().accelerators;
    // Off the knife edge: a set whose exact size is within an ulp of the limit may be judged
    // either way (README, Numerics); the scorer's plain sum is no oracle for that tie.
    let memory = if r.below(2) == 0 {
        total
    } else {
        (total / k as f64) * (1.0 + r.below(4) as f64 / 4.0)
    } * (1.0 + 1e-9);
    let devices = DeviceSet {
        accelerators: k,
        memory_per_accelerator_bytes: memory.max(f64::MIN_POSITIVE),
        cpus: base.devices().cpus,
    };
    Workload::new(nodes, edges, devices).ok()
}

/// When `method` says optimal, its objective is within `rel` of exhaustive search; when the
/// oracle finds no plan, neither does the method.
fn never_above_oracle(
    method: &dyn Method,
    w: &Workload,
    objective: Objective,
    contiguous: bool,
    rel: f64,
) -> Result<(), TestCaseError> {
    let got = run(method, w, objective, contiguous);
    let oracle = run(&BruteForce, w, objective, contiguous);
    let (a, b) = (got.objective(objective), oracle.objective(objective));
    if !b.is_finite() {
        prop_assert!(
            !a.is_finite(),
            "{} found {a} where exhaustive search finds no plan",
            method.name()
        );
        return Ok(());
    }
    prop_assert!(
        a >= b * (1.0 - 1e-12),
        "{} scores {a}, below exhaustive search's {b}",
        method.name()
    );
    if got.outcome.status == Status::Optimal {
        prop_assert!(
            a <= b * (1.0 + rel),
            "{} claims {a} optimal, exhaustive search finds {b}",
            method.name()
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 100, ..ProptestConfig::default() })]

    #[test]
    fn proven_optimal_never_exceeds_exhaustive_search(seed in any::<u64>()) {
        let Some(w) = spread_workload(seed) else { return Ok(()) };
        // The DP always proves its optimum.
        let dp = run(&Dp, &w, Objective::Throughput, true);
        prop_assert!(matches!(dp.outcome.status, Status::Optimal | Status::Infeasible { .. }), "{:?}", dp.outcome.status);
        never_above_oracle(&Dp, &w, Objective::Throughput, true, DP_REL)?;
        never_above_oracle(&Ip, &w, Objective::Throughput, true, IP_REL)?;
        never_above_oracle(&Ip, &w, Objective::Throughput, false, IP_REL)?;
    }
}

/// Seeds on which HiGHS 1.15, with coefficients up to 2^30 (times) and 2^40 (bytes),
/// proved a plan "optimal" that exhaustive search beats by 0.01 % to 56× (CI, 2026-11-23,
/// and a 10,000-seed scan): each had a load row with a coefficient above about 7.5e8 or a
/// memory row with sizes near 1e11 (src/solve/milp/presolve.rs).
#[test]
fn large_coefficients_no_longer_mislead_highs() {
    for seed in [
        4467276107763419283,
        16889621062611656942,
        10157082693573096967,
        1703913871437687431,
        18061221153904574387,
        3835895783442191986,
        3276534005997188764,
        4265936948820499151,
        8710124796487621127,
        10909726701742708834u64,
    ] {
        let w = spread_workload(seed).expect("a workload");
        for contiguous in [true, false] {
            never_above_oracle(&Ip, &w, Objective::Throughput, contiguous, IP_REL)
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        }
    }
}

/// The property test above on `SCAN` consecutive seeds (default 2,000; salted by `SALT`),
/// counting every false "optimal" before failing. By hand:
/// `SCAN=30000 cargo test --release --test numerics -- --ignored --nocapture`.
#[test]
#[ignore = "a long scan, run by hand"]
fn scan_many_seeds() {
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (n, salt) = (env("SCAN", 2000), env("SALT", 0));
    let mut wrong = Vec::new();
    for i in 0..n {
        let seed = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt;
        let Some(w) = spread_workload(seed) else {
            continue;
        };
        for contiguous in [true, false] {
            if let Err(e) = never_above_oracle(&Ip, &w, Objective::Throughput, contiguous, IP_REL) {
                eprintln!("seed {seed} contiguous={contiguous}: {e}");
                wrong.push(seed);
            }
        }
    }
    eprintln!("{} false optima in {n} seeds", wrong.len());
    assert!(wrong.is_empty(), "false optima on seeds {wrong:?}");
}

//! The cluster DP and the latency brute force against an independent enumeration, on
//! random small instances whose numbers span 1e-9 … 1e15 (issue #25, item 3).
//!
//! The enumeration here is written separately from both: every assignment of every node
//! to every device (no symmetry breaking, no colour-class contraction, every CPU core a
//! device of its own), and for latency every call rank in `0..q` of every accelerator
//! node, each scored by the evaluator (`evaluate_on_cluster`, `evaluate` with the latency
//! rules) and kept when the scorer calls it valid (and contiguous, when asked). Its
//! minimum is the optimum by definition of the plan spaces (MODEL.md; the cluster's
//! contiguity with the machine order, `score::cluster`).
//!
//! The DP's plan must score within 1e-13 (relative) of that minimum, and the value the DP
//! claims within 1e-13 of its plan's score: wrong by 4e-11 ("optimal" plans worse than
//! exhaustive search) or by 6e-9 (the internal check's exit 3) before certified sums. The
//! DP's lower bound and the chain bound must not pass the minimum: both were 2475716.29
//! where it is 7.0005 while the chain relaxation's memory test read plain prefix
//! differences of sizes (1.5e-7 bytes after 4.8e14 came out as 0.0625, over the memory).
//! A second family draws clusters where some nodes fit only the CPU (sizes far over the
//! accelerators' memory beside sizes far under it), the shape of that defect.
//! The brute force's proven latency must equal the minimum (12 ms proven where 3 ms exists
//! before every CPU class got its own core).

use dnnplace::io::parse_workload;
use dnnplace::model::{ClusterCosts, Device, Placement, Workload};
use dnnplace::score::{evaluate, evaluate_on_cluster};
use dnnplace::solve::bounds::cluster::chain::chain_bound;
use dnnplace::solve::brute_force::BruteForce;
use dnnplace::solve::budget::Budget;
use dnnplace::solve::cluster::dp::{solve, Tracking};
use dnnplace::solve::{plan, Limits, Objective, Problem};
use proptest::prelude::*;
use serde_json::json;

/// splitmix64, seeded per case.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    /// Log-uniform in [1e-9, 1e15], sometimes 0, sometimes a round number.
    fn magnitude(&mut self) -> f64 {
        match self.below(10) {
            0 => 0.0,
            1 => (1 + self.below(9)) as f64,
            _ => {
                let e = -9.0 + 24.0 * (self.below(1 << 20) as f64 / (1u64 << 20) as f64);
                10f64.powf(e)
            }
        }
    }
}

/// A random DAG of `n` nodes (edges from lower to higher index), one cost per source.
fn graph(r: &mut Rng, n: usize) -> (Vec<serde_json::Value>, Vec<serde_json::Value>) {
    let nodes = (0..n)
        .map(|i| {
            json!({"id": i + 1, "fpgaLatency": r.magnitude(), "cpuLatency": r.magnitude(),
                   "size": r.magnitude(), "supportedOnFpga": r.below(8) != 0})
        })
        .collect();
    let mut edges = Vec::new();
    for u in 0..n {
        let cost = r.magnitude();
        for v in u + 1..n {
            if r.below(3) == 0 || (v == u + 1 && r.below(2) == 0) {
                edges.push(json!({"sourceId": u + 1, "destId": v + 1, "cost": cost}));
            }
        }
    }
    (nodes, edges)
}

fn link(r: &mut Rng) -> serde_json::Value {
    json!({"bytes_per_s": 10f64.powf(3.0 + r.below(10) as f64), "latency_ms": r.magnitude()})
}

/// A workload of 2–4 nodes on a random cluster of 1–2 machine entries (1–2 machines each,
/// 1–2 accelerators of 1–2 types, 0–1 CPU cores, with or without a peer link).
fn clustered(seed: u64) -> Option<Workload> {
    let mut r = Rng(seed);
    let n = 2 + r.below(3) as usize;
    let (nodes, edges) = graph(&mut r, n);
    let mut machines = Vec::new();
    for _ in 0..1 + r.below(2) {
        let accelerators: Vec<_> = (0..1 + r.below(2))
            .map(|t| {
                json!({"profile": if t == 0 { "v100" } else { "a100-80gb" },
                       "count": 1 + r.below(2), "memory": r.magnitude() * 4.0,
                       "speed": 10f64.powf(r.below(7) as f64 - 3.0), "price_per_hour": 1.0})
            })
            .collect();
        let peer = if r.below(2) == 0 {
            json!("none")
        } else {
            link(&mut r)
        };
        machines.push(json!({"count": 1 + r.below(2), "cpus": r.below(2),
            "accelerators": accelerators, "host": link(&mut r), "peer": peer,
            "network": link(&mut r)}));
    }
    let doc = json!({"maxSizePerFPGA": 1, "maxFPGAs": 1, "maxCPUs": 1, "nodes": nodes,
                     "edges": edges, "cluster": {"machines": machines}});
    parse_workload(&doc.to_string()).ok()
}

/// A workload of 3–4 nodes, each node's size either huge (2⁴⁶ … 2⁴⁷ bytes, most often
/// the first two: it fits only the CPU) or tiny (1e-9 … 2e-5 bytes), on 1–2 machines (1–2
/// accelerators of 1–2 types with 1e-4 … 1e-2 bytes each, one CPU core, with or without a
/// peer link). Two huge sizes of one binade sum with a rounding of half an ulp half the
/// time, so a plain difference of prefix sums puts a tiny node after them at 2⁻⁵ bytes,
/// over every memory: the defect of seed 867203293147939067, found in about 0.7 % of the
/// cases before its fix (22 of seeds 0 … 2999; the chain bound above the optimum in 23).
fn cpu_bound(seed: u64) -> Option<Workload> {
    let mut r = Rng(seed);
    let n = 3 + r.below(2) as usize;
    let (mut nodes, edges) = graph(&mut r, n);
    for (i, node) in nodes.iter_mut().enumerate() {
        let fraction = 1.0 + (r.next() >> 11) as f64 / (1u64 << 53) as f64;
        let huge = if i < 2 {
            r.below(4) != 0
        } else {
            r.below(4) == 0
        };
        node["size"] = json!(if huge {
            fraction * (1u64 << 46) as f64
        } else {
            10f64.powf(-9.0 + r.below(5) as f64) * fraction
        });
    }
    let mut machines = Vec::new();
    for _ in 0..1 + r.below(2) {
        let accelerators: Vec<_> = (0..1 + r.below(2))
            .map(|t| {
                json!({"profile": if t == 0 { "v100" } else { "a100-80gb" },
                       "count": 1 + r.below(2), "memory": 10f64.powf(-4.0 + r.below(3) as f64),
                       "speed": 10f64.powf(r.below(7) as f64 - 3.0), "price_per_hour": 1.0})
            })
            .collect();
        let peer = if r.below(2) == 0 {
            json!("none")
        } else {
            link(&mut r)
        };
        machines.push(json!({"count": 1, "cpus": 1, "accelerators": accelerators,
            "host": link(&mut r), "peer": peer, "network": link(&mut r)}));
    }
    let doc = json!({"maxSizePerFPGA": 1, "maxFPGAs": 1, "maxCPUs": 1, "nodes": nodes,
                     "edges": edges, "cluster": {"machines": machines}});
    parse_workload(&doc.to_string()).ok()
}

/// A workload of 2–4 nodes on 1–2 accelerators (latency ignores the CPU count).
fn single(seed: u64) -> Option<Workload> {
    let mut r = Rng(seed);
    let n = 2 + r.below(3) as usize;
    let (nodes, edges) = graph(&mut r, n);
    let doc = json!({"maxSizePerFPGA": r.magnitude() * 4.0, "maxFPGAs": 1 + r.below(2),
                     "maxCPUs": 1, "nodes": nodes, "edges": edges});
    parse_workload(&doc.to_string()).ok()
}

/// Calls `visit` with every assignment of `n` nodes to `devices`.
fn assignments(n: usize, devices: &[Device], visit: &mut dyn FnMut(&[Device])) {
    let mut at = vec![0usize; n];
    loop {
        let a: Vec<Device> = at.iter().map(|&i| devices[i]).collect();
        visit(&a);
        let mut i = 0;
        while i < n {
            at[i] += 1;
            if at[i] < devices.len() {
                break;
            }
            at[i] = 0;
            i += 1;
        }
        if i == n {
            return;
        }
    }
}

/// The least TPS over every valid contiguous placement on the workload's cluster.
fn cluster_minimum(w: &Workload, costs: &ClusterCosts) -> f64 {
    let c = costs.cluster();
    let devices: Vec<Device> = (0..c.accelerators().len())
        .map(Device::Accelerator)
        .chain((0..c.cpu_machines().len()).map(Device::Cpu))
        .collect();
    let mut best = f64::INFINITY;
    assignments(w.len(), &devices, &mut |a| {
        let e = evaluate_on_cluster(w, costs, &Placement::new(a.to_vec()));
        if e.is_valid() && e.is_contiguous() {
            best = best.min(e.max_load);
        }
    });
    best
}

/// The least latency over every valid placement and cut with at most `q` pieces per
/// accelerator (contiguous when asked), every CPU node free to use a core of its own.
fn latency_minimum(w: &Workload, q: usize, contiguous: bool) -> f64 {
    let n = w.len();
    let devices: Vec<Device> = (0..w.devices().accelerators)
        .map(Device::Accelerator)
        .chain((0..n).map(Device::Cpu))
        .collect();
    let mut best = f64::INFINITY;
    assignments(n, &devices, &mut |a| {
        let on_acc: Vec<usize> = (0..n).filter(|&v| a[v].is_accelerator()).collect();
        let total = q.pow(on_acc.len() as u32);
        for code in 0..total {
            let mut ranks = vec![0usize; n];
            let mut c = code;
            for &v in &on_acc {
                ranks[v] = c % q;
                c /= q;
            }
            let p = Placement::new(a.to_vec()).with_pieces(ranks);
            let e = evaluate(w, &p, true);
            if e.is_valid() && (!contiguous || e.is_contiguous()) && e.max_pieces() <= q {
                best = best.min(e.latency_total().unwrap_or(f64::INFINITY));
            }
        }
    });
    best
}

/// The cluster DP against [`cluster_minimum`] on `clustered(seed)`.
fn check_cluster_dp(seed: u64) -> Result<(), TestCaseError> {
    match clustered(seed) {
        Some(w) => check_dp_on(&w, seed),
        None => Ok(()),
    }
}

/// The cluster DP's plan, value and lower bound, and the chain bound, against
/// [`cluster_minimum`] on `w` (drawn from `seed`).
fn check_dp_on(w: &Workload, seed: u64) -> Result<(), TestCaseError> {
    let costs = ClusterCosts::of(w);
    let minimum = cluster_minimum(w, &costs);
    let dp = solve(w, &costs, &Limits::default(), Tracking::Best, f64::INFINITY)
        .expect("the cluster DP runs");
    prop_assert!(
        dp.stopped.is_none(),
        "seed {seed}: the DP stopped: {:?}",
        dp.stopped
    );
    prop_assert!(
        dp.lower_bound <= minimum * (1.0 + 1e-13),
        "seed {seed}: the DP's lower bound {} is above exhaustive search {minimum}",
        dp.lower_bound
    );
    let chain = chain_bound(w, &costs, &Budget::new(None, None));
    prop_assert!(
        chain <= minimum,
        "seed {seed}: the chain bound {chain} is above exhaustive search {minimum}"
    );
    match &dp.best {
        None => prop_assert!(
            minimum.is_infinite(),
            "seed {seed}: no DP plan, exhaustive {minimum}"
        ),
        Some((value, p)) => {
            let e = evaluate_on_cluster(w, &costs, p);
            prop_assert!(
                e.is_valid() && e.is_contiguous(),
                "seed {seed}: {:?} {:?}",
                e.violations,
                e.non_contiguous
            );
            prop_assert!(
                within(e.max_load, minimum, 1e-13),
                "seed {seed}: the DP's plan scores {}, exhaustive search {minimum}",
                e.max_load
            );
            prop_assert!(
                within(*value, e.max_load, 1e-13),
                "seed {seed}: the DP says {value}, its plan scores {}",
                e.max_load
            );
        }
    }
    Ok(())
}

/// The seed proptest found: a CPU-only node of 2.75e9 ms let the DP call a plan 0.074 ms
/// worse than the best "optimal" while its tolerance was `1e-9` relative (now
/// `cluster::dp::PROOF_RELATIVE`, 1e-15).
#[test]
fn cluster_dp_seed_14910916324470988103() {
    if let Some(w) = clustered(14910916324470988103) {
        let _ = std::fs::write(
            std::env::temp_dir().join("cluster_dp_seed_14910916324470988103.json"),
            dnnplace::io::workload_to_json(&w),
        );
    }
    check_cluster_dp(14910916324470988103).unwrap();
}

/// The seed a fresh-clone CI run found (2026-11-27): three nodes on `1 machine: 2 v100 +
/// 2 a100-80gb + 1 CPU` where nodes 1 and 2 (6.7e13 and 4.2e14 bytes) fit no accelerator.
/// The cluster DP proved 2475716.29 (all three on the CPU, lower bound 2475716.29) and the
/// chain bound said 2475716.29 too, while exhaustive search finds 7.0005 (nodes 1, 2 on the
/// CPU, node 3 on a v100): the chain relaxation behind the DP's tail test read node 3's
/// 1.5e-7 bytes as a plain difference of prefix sums, 0.0625, over the v100's 6.2e-4.
#[test]
fn cluster_dp_seed_867203293147939067() {
    let w = clustered(867203293147939067).expect("the seed's workload parses");
    let costs = ClusterCosts::of(&w);
    let minimum = cluster_minimum(&w, &costs);
    assert!(within(minimum, 7.000507277934299, 1e-15), "{minimum}");
    check_cluster_dp(867203293147939067).unwrap();
    let dp = solve(
        &w,
        &costs,
        &Limits::default(),
        Tracking::Best,
        f64::INFINITY,
    )
    .unwrap();
    let value = dp.best.expect("a plan").0;
    assert!(
        within(value, minimum, 1e-13),
        "DP {value}, exhaustive {minimum}"
    );
    assert!(within(dp.lower_bound, minimum, 1e-13), "{}", dp.lower_bound);
    let chain = chain_bound(&w, &costs, &Budget::new(None, None));
    assert!(chain <= minimum && chain >= 7.0, "{chain}");
}

/// Cases per property: `default`, or `PROPTEST_CASES` where set (a longer run draws more).
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn within(a: f64, b: f64, rel: f64) -> bool {
    a == b || (a - b).abs() <= rel * a.abs().max(b.abs())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(160), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn cluster_dp_matches_every_contiguous_placement(seed in any::<u64>()) {
        check_cluster_dp(seed)?;
    }

    #[test]
    fn latency_brute_force_matches_every_placement_and_cut(seed in any::<u64>(), q in 1usize..=2, contiguous in any::<bool>()) {
        let Some(w) = single(seed) else { return Ok(()); };
        let minimum = latency_minimum(&w, q, contiguous);
        let problem = Problem {
            workload: &w,
            devices: dnnplace::solve::Devices::of(&w),
            objective: Objective::Latency { pieces: q },
            contiguous,
            limits: Limits::default(),
            pipeline: None,
        };
        let found = plan(&BruteForce, &problem).expect("brute force runs");
        let value = found.objective(problem.objective);
        prop_assert!(within(value, minimum, 1e-13),
            "seed {seed} q {q} contiguous {contiguous}: brute force {value}, every placement {minimum}");
    }
}

proptest! {
    // 1000 cases (3 s): each finds the defect with probability 0.7 % (`cpu_bound`).
    #![proptest_config(ProptestConfig { cases: cases(1000), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn cluster_dp_matches_every_contiguous_placement_with_cpu_only_nodes(seed in any::<u64>()) {
        if let Some(w) = cpu_bound(seed) {
            check_dp_on(&w, seed)?;
        }
    }
}

/// The issue's shape: a 3-node chain whose CPU ends sit on both sides of the accelerator.
#[test]
fn latency_brute_force_puts_cpu_classes_on_cores_of_their_own() {
    let w = parse_workload(
        r#"{"maxSizePerFPGA":1e9,"maxFPGAs":1,"maxCPUs":1,
        "nodes":[{"id":1,"fpgaLatency":100,"cpuLatency":1},{"id":2,"fpgaLatency":1,"cpuLatency":100},
                 {"id":3,"fpgaLatency":100,"cpuLatency":1}],
        "edges":[{"sourceId":1,"destId":2,"cost":0},{"sourceId":2,"destId":3,"cost":0}]}"#,
    )
    .unwrap();
    let problem = Problem {
        workload: &w,
        devices: dnnplace::solve::Devices::of(&w),
        objective: Objective::Latency { pieces: 1 },
        contiguous: true,
        limits: Limits::default(),
        pipeline: None,
    };
    let found = plan(&BruteForce, &problem).unwrap();
    assert_eq!(found.objective(problem.objective), 3.0);
    assert_eq!(latency_minimum(&w, 1, true), 3.0);
}

/// The issue's cluster shape: a 1e9 ms node before 14.97 ms of work on `1x2xv100`.
/// (`plan` finds 9.97 through `solve::plan` on the cluster; the DP called alone with no bounds
/// returns no plan here.)
#[test]
fn cluster_dp_certifies_stage_sums_beside_huge_prefixes() {
    let w = parse_workload(
        r#"{"maxSizePerFPGA":1e9,"maxFPGAs":2,"maxCPUs":1,
        "nodes":[{"id":1,"fpgaLatency":1e9,"cpuLatency":0.001},{"id":2,"fpgaLatency":5,"cpuLatency":100},
                 {"id":3,"fpgaLatency":5,"cpuLatency":100},{"id":4,"fpgaLatency":4.97,"cpuLatency":100}],
        "edges":[{"sourceId":1,"destId":2,"cost":0},{"sourceId":2,"destId":3,"cost":0},{"sourceId":3,"destId":4,"cost":0}],
        "cluster":{"machines":[{"cpus":1,"accelerators":[{"profile":"v100","count":2,"memory":1e10,"speed":1,"price_per_hour":1}],
                   "host":{"bytes_per_s":1e10},"peer":"none","network":{"bytes_per_s":1e10}}]}}"#,
    )
    .unwrap();
    let costs = ClusterCosts::of(&w);
    let dp = solve(
        &w,
        &costs,
        &Limits::default(),
        Tracking::Best,
        f64::INFINITY,
    )
    .unwrap();
    let (value, p) = dp.best.clone().unwrap_or_else(|| {
        panic!(
            "no plan: stopped {:?}, ideals {}, states {}, lower {}",
            dp.stopped, dp.ideals, dp.states, dp.lower_bound
        )
    });
    let scored = evaluate_on_cluster(&w, &costs, &p).max_load;
    assert!(within(value, scored, 1e-15), "DP {value}, scorer {scored}");
    assert!(within(scored, cluster_minimum(&w, &costs), 1e-15));
    assert!(within(scored, 9.97, 1e-15), "{scored}");
}

//! The latency brute force against hand-checked instances, and every latency method against
//! it on a few hundred small random instances (issue #25).
//!
//! MODEL.md, Latency: CPU cores are as many as needed (latency ignores `maxCPUs`), a CPU
//! node's time does not depend on its core, and a contiguous plan needs each core's forward
//! nodes contiguous. So which CPU classes share a core matters for contiguity only, and the
//! oracle enumerates every grouping. The hand instances below need sharing (a class on a
//! cycle through a CPU-only class) or separate cores (CPU classes on both sides of an
//! accelerator); the random ones have fewer cores (0–1) than CPU nodes.
//!
//! Per method and instance: the plan is valid (contiguous when asked) and its re-scored
//! latency is never below the optimum; the reported bound never above it; a plan exists
//! exactly when the oracle has one; a method that says "optimal" meets the optimum.

mod common;

use common::{random_workload, Shape};
use dnnplace::io::parse_workload;
use dnnplace::model::contraction::class_index;
use dnnplace::model::{Device, Placement, Workload};
use dnnplace::score::evaluate;
use dnnplace::solve::brute_force::BruteForce;
use dnnplace::solve::{method, plan, Limits, MethodId, Objective, Problem, Status};

fn problem(w: &Workload, pieces: usize, contiguous: bool, seed: u64) -> Problem<'_> {
    Problem {
        workload: w,
        devices: dnnplace::solve::Devices::of(w),
        objective: Objective::Latency { pieces },
        contiguous,
        limits: Limits {
            seed,
            search_steps: Some(30),
            ..Limits::default()
        },
        pipeline: None,
    }
}

/// The brute-force optimum (∞ when it finds no plan).
fn optimum(p: &Problem) -> f64 {
    plan(&BruteForce, p)
        .expect("brute force")
        .objective(p.objective)
}

/// The latency of `assignment` as the scorer computes it, if valid (and contiguous when
/// asked); independent of brute force.
fn scored(w: &Workload, assignment: Vec<Device>, contiguous: bool) -> Option<f64> {
    let e = evaluate(w, &Placement::new(assignment), true);
    (e.is_valid() && (!contiguous || e.is_contiguous()))
        .then(|| Objective::Latency { pieces: 1 }.value(&e))
}

/// a → b → c with a and c in one colour class, b CPU-only: contiguously a and c may go
/// on a CPU core only together with b (alone, {a, c} is left and re-entered through b),
/// and c does not fit the accelerator's memory. The only contiguous plan puts all three
/// on one core: 1 + 2 + 3 = 6.
const SHARED_CORE: &str = r#"{"maxSizePerFPGA": 1e9, "maxFPGAs": 1, "maxCPUs": 1,
  "nodes": [{"id": 1, "fpgaLatency": 1, "cpuLatency": 1, "colorClass": 7},
            {"id": 2, "fpgaLatency": 1, "cpuLatency": 2, "supportedOnFpga": 0},
            {"id": 3, "fpgaLatency": 1, "cpuLatency": 3, "colorClass": 7, "size": 5e9}],
  "edges": [{"sourceId": 1, "destId": 2, "cost": 0},
            {"sourceId": 2, "destId": 3, "cost": 0}]}"#;

/// a → x → b, a and b CPU-only and slow on no device but CPU, x fast on the accelerator:
/// a and b on one core would leave the core and re-enter it through x, so the contiguous
/// optimum puts them on two cores (maxCPUs is 1; latency ignores it): 1 + 1 + 1 = 3, where
/// x on a CPU gives 1 + 10 + 1 = 12.
const SEPARATE_CORES: &str = r#"{"maxSizePerFPGA": 1e9, "maxFPGAs": 1, "maxCPUs": 1,
  "nodes": [{"id": 1, "fpgaLatency": 1, "cpuLatency": 1, "supportedOnFpga": 0},
            {"id": 2, "fpgaLatency": 1, "cpuLatency": 10},
            {"id": 3, "fpgaLatency": 1, "cpuLatency": 1, "supportedOnFpga": 0}],
  "edges": [{"sourceId": 1, "destId": 2, "cost": 0},
            {"sourceId": 2, "destId": 3, "cost": 0}]}"#;

#[test]
fn brute_force_shares_a_core_where_contiguity_needs_it() {
    let w = parse_workload(SHARED_CORE).unwrap();
    let one_core = vec![Device::Cpu(0); 3];
    let own_cores = vec![Device::Cpu(0), Device::Cpu(1), Device::Cpu(0)];
    assert_eq!(scored(&w, one_core, true), Some(6.0));
    assert_eq!(
        scored(&w, own_cores, true),
        None,
        "{{a, c}} alone is not contiguous"
    );
    let best = plan(&BruteForce, &problem(&w, 1, true, 0)).unwrap();
    assert_eq!(best.outcome.status, Status::Optimal);
    assert_eq!(best.objective(Objective::Latency { pieces: 1 }), 6.0);
}

#[test]
fn brute_force_separates_cores_where_contiguity_needs_it() {
    let w = parse_workload(SEPARATE_CORES).unwrap();
    let split = vec![Device::Cpu(0), Device::Accelerator(0), Device::Cpu(1)];
    let shared = vec![Device::Cpu(0), Device::Accelerator(0), Device::Cpu(0)];
    assert_eq!(scored(&w, split, true), Some(3.0));
    assert_eq!(scored(&w, shared, true), None);
    let best = plan(&BruteForce, &problem(&w, 1, true, 0)).unwrap();
    assert_eq!(best.outcome.status, Status::Optimal);
    assert_eq!(best.objective(Objective::Latency { pieces: 1 }), 3.0);
}

/// The methods that take the latency objective (those that decline are skipped).
const METHODS: [MethodId; 8] = [
    MethodId::Ip,
    MethodId::Auto,
    MethodId::Greedy,
    MethodId::Single,
    MethodId::LocalSearch,
    MethodId::Partitioner,
    MethodId::Rl,
    MethodId::Genetic,
];

/// One method on one problem against the optimum `best`; the mismatch, if any.
fn check(id: MethodId, p: &Problem, best: f64) -> Option<String> {
    let m = method(id);
    if m.supports(p).is_err() {
        return None;
    }
    let got = match plan(m.as_ref(), p) {
        Ok(got) => got,
        Err(e) => return Some(format!("error {e}")),
    };
    let Some(placement) = &got.outcome.placement else {
        // A heuristic may miss every plan (`single`: one accelerator); an exact method and
        // `auto` may not, unless stopped.
        let exact = id.proves_optimality() || id == MethodId::Auto;
        let stopped = matches!(got.outcome.status, Status::NoPlan { .. });
        return (exact && best.is_finite() && !stopped)
            .then(|| format!("no plan ({:?}), optimum {best}", got.outcome.status));
    };
    let e = evaluate(p.workload, placement, true);
    if !e.is_valid() || (p.contiguous && !e.is_contiguous()) {
        return Some(format!("invalid plan {:?}", e.violations));
    }
    let value = p.objective.value(&e);
    let tolerance = 1e-9 * best.abs().max(1.0) + if id == MethodId::Ip { 1e-5 } else { 0.0 };
    if !best.is_finite() || value < best - tolerance {
        return Some(format!("plan {value} below the optimum {best}"));
    }
    if got.outcome.bound > best + tolerance {
        return Some(format!(
            "bound {} above the optimum {best}",
            got.outcome.bound
        ));
    }
    (got.outcome.status == Status::Optimal && value > best + tolerance)
        .then(|| format!("'optimal' {value}, optimum {best}"))
}

/// Whether the brute-force optimum of `p` scores no valid contiguous plan once every CPU
/// class is moved to a core of its own (the old oracle's rule).
fn needs_shared_core(p: &Problem) -> bool {
    let w = p.workload;
    let b = plan(&BruteForce, p).unwrap().outcome.placement.unwrap();
    let (class, _) = class_index(w);
    let own: Vec<Device> = (0..w.len())
        .map(|v| match b.assignment[v] {
            Device::Cpu(_) => Device::Cpu(class[v]),
            acc => acc,
        })
        .collect();
    scored(w, own, true).is_none()
}

#[test]
fn every_latency_method_keeps_to_the_brute_force_optimum() {
    let shape = Shape {
        max_nodes: 7,
        max_accelerators: 2,
        max_cpus: 1,
        ..Shape::default()
    };
    let (mut instances, mut problems, mut runs, mut shared) = (0, 0, 0, 0usize);
    let mut mismatches = Vec::new();
    let mut seconds = [0.0; METHODS.len()];
    for seed in 0..300u64 {
        let Some(w) = random_workload(seed, shape) else {
            continue;
        };
        instances += 1;
        for contiguous in [true, false] {
            for pieces in [1, 2] {
                let p = problem(&w, pieces, contiguous, seed);
                let best = optimum(&p);
                problems += 1;
                if contiguous && pieces == 1 && best.is_finite() {
                    shared += usize::from(needs_shared_core(&p));
                }
                for (id, spent) in METHODS.into_iter().zip(&mut seconds) {
                    runs += 1;
                    let started = std::time::Instant::now();
                    let mismatch = check(id, &p, best);
                    *spent += started.elapsed().as_secs_f64();
                    if let Some(m) = mismatch {
                        mismatches.push(format!(
                            "seed {seed} {id} q={pieces} contiguous={contiguous}: {m}"
                        ));
                    }
                }
            }
        }
    }
    eprintln!(
        "{instances} instances, {problems} problems, {runs} method runs, {shared} contiguous \
         optima that need a shared core, {} mismatches",
        mismatches.len()
    );
    eprintln!(
        "seconds per method: {:?}",
        METHODS.iter().zip(seconds).collect::<Vec<_>>()
    );
    assert!(instances >= 200, "only {instances} instances");
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

//! The finish-time lower bounds of `solve::bounds::latency` against exhaustive search.
//!
//! On tiny random workloads (≤ 7 nodes, k ≤ 3, colour classes, backward nodes, unsupported
//! nodes, tight memory, zero costs): for every valid placement, every node's finish time
//! from the scorer is at least the bound for the node's state (CPU or accelerator),
//! whatever number of pieces the scorer cuts; hence the latency bound never exceeds the
//! exhaustive optimum with one or two pieces per accelerator. Also the held plans of
//! `solve::milp::latency_runs`: valid one-piece plans on inference graphs.

mod common;

use common::{random_workload, Shape};
use dnnplace::model::{Device, Placement, Workload};
use dnnplace::score::evaluate;
use dnnplace::solve::bounds::latency::{finish_bounds, latency_lower_bound, FinishBound};
use dnnplace::solve::brute_force::BruteForce;
use dnnplace::solve::{plan, Limits, Objective, Problem};
use proptest::prelude::*;

fn shape() -> Shape {
    Shape {
        max_nodes: 7,
        max_accelerators: 3,
        max_cpus: 1,
        ..Shape::default()
    }
}

/// Which nodes may run on an accelerator at all.
fn allowed(w: &Workload) -> Vec<bool> {
    let d = w.devices();
    w.nodes()
        .iter()
        .map(|x| {
            d.accelerators > 0
                && x.supported_on_accelerator
                && x.size_bytes <= d.memory_per_accelerator_bytes
        })
        .collect()
}

fn tolerance(x: f64) -> f64 {
    1e-9 * (1.0 + x.abs())
}

/// Calls `visit` with every assignment of colour classes to devices, up to renaming the
/// accelerators (one CPU label: latency has as many CPUs as needed).
fn for_each_placement(w: &Workload, mut visit: impl FnMut(&Placement)) {
    let (class, classes) = dnnplace::model::contraction::class_index(w);
    let k = w.devices().accelerators;
    fn walk(
        at: usize,
        used: usize,
        k: usize,
        labels: &mut Vec<Device>,
        visit: &mut dyn FnMut(&[Device]),
    ) {
        if at == labels.len() {
            visit(labels);
            return;
        }
        for a in 0..k.min(used + 1) {
            labels[at] = Device::Accelerator(a);
            walk(at + 1, used.max(a + 1), k, labels, visit);
        }
        labels[at] = Device::Cpu(0);
        walk(at + 1, used, k, labels, visit);
    }
    let mut labels = vec![Device::Cpu(0); classes];
    walk(0, 0, k, &mut labels, &mut |labels| {
        visit(&Placement::new(class.iter().map(|&c| labels[c]).collect()))
    });
}

/// Every valid placement's finish times respect the bounds; returns how many were checked.
fn check_every_placement(w: &Workload, bounds: &[FinishBound]) -> Result<usize, TestCaseError> {
    let mut checked = 0;
    let mut failure = None;
    for_each_placement(w, |p| {
        let e = evaluate(w, p, true);
        if !e.is_valid() || failure.is_some() {
            return;
        }
        checked += 1;
        for (v, (&f, b)) in e
            .latency
            .as_ref()
            .unwrap()
            .finish
            .iter()
            .zip(bounds)
            .enumerate()
        {
            let bound = match p.assignment[v] {
                Device::Accelerator(_) => b.accelerator,
                Device::Cpu(_) => b.cpu,
            };
            if f < bound - tolerance(bound) {
                failure = Some(format!(
                    "node {} on {} finishes at {f} < bound {bound}; placement {:?}, pieces {:?}",
                    w.node(v).id,
                    p.assignment[v],
                    p.assignment,
                    e.latency.as_ref().unwrap().pieces
                ));
            }
        }
    });
    if let Some(message) = failure {
        return Err(TestCaseError::fail(message));
    }
    Ok(checked)
}

/// The communication-blind critical path (the IP's old heads): the longest path with every
/// node at min(fpga, cpu), or cpu where it may not go on an accelerator.
fn critical_path(w: &Workload, flags: &[bool]) -> f64 {
    let mut head = vec![0.0f64; w.len()];
    for &v in w.topological_order() {
        let x = w.node(v);
        let own = if flags[v] {
            x.fpga_latency.min(x.cpu_latency)
        } else {
            x.cpu_latency
        };
        head[v] = own
            + w.predecessors(v)
                .iter()
                .map(|&u| head[u])
                .fold(0.0, f64::max);
    }
    head.iter().copied().fold(0.0, f64::max)
}

fn optimum(w: &Workload, pieces: usize) -> f64 {
    let problem = Problem {
        workload: w,
        devices: dnnplace::solve::Devices::of(w),
        objective: Objective::Latency { pieces },
        contiguous: false,
        limits: Limits::default(),
        pipeline: None,
    };
    plan(&BruteForce, &problem)
        .unwrap()
        .objective(Objective::Latency { pieces })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn finish_times_respect_the_bounds(seed in any::<u64>()) {
        let Some(w) = random_workload(seed, shape()) else { return Ok(()) };
        let bounds = finish_bounds(&w, &allowed(&w));
        check_every_placement(&w, &bounds)?;
        let bound = latency_lower_bound(&bounds);
        for pieces in [1, 2] {
            let best = optimum(&w, pieces);
            prop_assert!(bound <= best + tolerance(best), "bound {bound} above the optimum {best} with {pieces} pieces");
        }
    }

    /// Single chains and no colour classes: memory pressure forces pieces apart often.
    #[test]
    fn finish_times_respect_the_bounds_without_classes(seed in any::<u64>()) {
        let shape = Shape { max_nodes: 8, color_classes: false, training: false, unsupported: false, ..shape() };
        let Some(w) = random_workload(seed, shape) else { return Ok(()) };
        let bounds = finish_bounds(&w, &allowed(&w));
        check_every_placement(&w, &bounds)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    /// The runs DP's plans (`latency_runs`) on inference graphs: valid, one piece per
    /// accelerator, and never below the bound.
    #[test]
    fn runs_plans_are_valid_one_piece_plans(seed in any::<u64>()) {
        let shape = Shape { max_nodes: 10, training: false, ..shape() };
        let Some(w) = random_workload(seed, shape) else { return Ok(()) };
        let bound = latency_lower_bound(&finish_bounds(&w, &allowed(&w)));
        for (p, source) in dnnplace::solve::milp::latency_runs::plans(&w) {
            let e = evaluate(&w, &p, true);
            prop_assert!(e.is_valid(), "{source}: {:?}", e.violations);
            prop_assert!(e.latency.as_ref().unwrap().max_pieces() <= 1, "{source}: pieces {:?}", e.latency.as_ref().unwrap().pieces);
            prop_assert!(e.latency.as_ref().unwrap().total >= bound - tolerance(bound), "{source}: {} below the bound {bound}", e.latency.as_ref().unwrap().total);
        }
    }
}

/// The bound is not vacuous: on many random instances it meets the one-piece optimum on
/// a good share, and it always beats (or equals) the communication-blind critical path.
#[test]
fn the_bound_is_often_tight() {
    let (mut tight, mut total, mut above_head) = (0, 0, 0);
    for seed in 0..300u64 {
        let Some(w) = random_workload(seed, shape()) else {
            continue;
        };
        let flags = allowed(&w);
        let bounds = finish_bounds(&w, &flags);
        let bound = latency_lower_bound(&bounds);
        let head = critical_path(&w, &flags);
        assert!(
            bound >= head - tolerance(head),
            "seed {seed}: bound {bound} below the critical path {head}"
        );
        let best = optimum(&w, 1);
        total += 1;
        if bound >= best - tolerance(best) {
            tight += 1;
        }
        if bound > head + tolerance(head) {
            above_head += 1;
        }
    }
    eprintln!("latency bound: equals the optimum on {tight} of {total}, above the critical path on {above_head}");
    assert!(tight * 4 >= total, "tight on only {tight} of {total}");
}

/// On the published latency workloads: the bound never exceeds the latency of plans we
/// can build without a solver (all on CPU, the DP plan, the runs DP's plans, which must be
/// valid one-piece plans). Prints the bound per workload beside the communication-blind
/// critical path.
#[test]
fn paper_latency_bounds_stay_below_known_plans() {
    for granularity in ["layer", "operator"] {
        let Some(dir) = common::shared_dir(&format!("paper/latency/{granularity}")) else {
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
            let flags = allowed(&w);
            let started = std::time::Instant::now();
            let bound = latency_lower_bound(&finish_bounds(&w, &flags));
            let elapsed = started.elapsed().as_secs_f64();
            let head = critical_path(&w, &flags);
            let all_cpu = evaluate(&w, &Placement::new(vec![Device::Cpu(0); w.len()]), true)
                .latency
                .as_ref()
                .unwrap()
                .total;
            let mut known = all_cpu;
            if let Some(p) = dnnplace::solve::dp::solve(&w, &Limits::default())
                .ok()
                .and_then(|o| o.placement)
            {
                let e = evaluate(&w, &p, true);
                if e.is_valid() {
                    known = known.min(e.latency.as_ref().unwrap().total);
                }
            }
            let mut runs = Vec::new();
            for (p, source) in dnnplace::solve::milp::latency_runs::plans(&w) {
                let e = evaluate(&w, &p, true);
                assert!(e.is_valid(), "{source}: invalid plan {:?}", e.violations);
                assert_eq!(
                    e.latency.as_ref().unwrap().max_pieces(),
                    1,
                    "{source}: a run was cut into pieces"
                );
                runs.push(format!("{source} {:.6}", e.latency.as_ref().unwrap().total));
                known = known.min(e.latency.as_ref().unwrap().total);
            }
            let name = format!(
                "{granularity}/{}",
                path.file_stem().unwrap().to_string_lossy()
            );
            eprintln!("{name}: bound {bound:.6} (critical path {head:.6}, {elapsed:.3} s); best known plan {known:.6}; {}", runs.join(", "));
            assert!(
                bound >= head - tolerance(head),
                "{name}: bound {bound} below the critical path {head}"
            );
            assert!(
                bound <= known + tolerance(known),
                "{name}: bound {bound} above a plan of latency {known}"
            );
        }
    }
}

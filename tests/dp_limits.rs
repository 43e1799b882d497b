//! The DP within its limits: it stops on the time limit, the memory budget and
//! `--max-ideals` with an error that names the limit, and the memory-bound GNMT cases of
//! issue 10 (k = 4, ℓ = 2, memory 1.3 × total / k) are solved to the optimum.

mod common;

use dnnplace::io::read_workload;
use dnnplace::model::{DeviceSet, Node, Workload};
use dnnplace::solve::budget::{Budget, Exhausted};
use dnnplace::solve::{dp, plan, Limits, Objective, Problem, SolveError, Status};

/// 8 parallel chains of 5 operators: 6^8 = 1,679,616 ideals, slow to relax.
fn parallel_chains() -> Workload {
    let (chains, length) = (8usize, 5usize);
    let nodes: Vec<Node> = (0..chains * length)
        .map(|i| Node {
            id: i as i64,
            name: None,
            fpga_latency: 1.0,
            cpu_latency: 10.0,
            size_bytes: 1.0,
            supported_on_accelerator: true,
            is_backward: false,
            color_class: None,
            layer_id: None,
            module: None,
            memory: None,
        })
        .collect();
    let mut edges = Vec::new();
    for c in 0..chains {
        for t in 1..length {
            edges.push((
                (c * length + t - 1) as i64,
                (c * length + t) as i64,
                0.1,
                0.0,
            ));
        }
    }
    Workload::new(
        nodes,
        edges,
        DeviceSet {
            accelerators: 4,
            memory_per_accelerator_bytes: 1e9,
            cpus: 1,
        },
    )
    .unwrap()
}

#[test]
fn the_time_limit_stops_the_dp_with_a_reason() {
    let w = parallel_chains();
    let start = std::time::Instant::now();
    let e = dp::solve_within(&w, usize::MAX, &Budget::new(Some(0.5), None)).unwrap_err();
    let took = start.elapsed().as_secs_f64();
    assert!(
        matches!(
            &e,
            SolveError::Stopped {
                reason: Exhausted::TimeLimit,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("raise --time-limit"), "{e}");
    // Generous for a loaded 2-core machine; the check runs between blocks and levels.
    assert!(took < 5.0, "stopped after {took} s");
}

#[test]
fn the_memory_budget_and_max_ideals_name_the_limit_that_applied() {
    let w = parallel_chains();
    let e = dp::solve_within(
        &w,
        usize::MAX,
        &Budget::new(None, Some(64.0 * 1024.0 * 1024.0)),
    )
    .unwrap_err();
    match &e {
        SolveError::TooManyIdeals {
            found,
            limit,
            which,
        } => {
            assert_eq!(*found, 6usize.pow(8), "counted exactly before enumerating");
            assert!(
                *limit < *found && which.contains("memory budget of 0.06 GiB"),
                "{e}"
            );
        }
        other => panic!("expected too many ideals, got {other}"),
    }
    let limits = Limits {
        max_ideals: 1000,
        ..Limits::default()
    };
    let e = dp::solve(&w, &limits).unwrap_err();
    assert!(
        matches!(&e, SolveError::TooManyIdeals { limit: 1000, .. })
            && e.to_string().contains("--max-ideals"),
        "{e}"
    );
}

/// GNMT layer graph, k = 4, ℓ = 2, memory 1.3 × total / k: memory binds, so its 16
/// zero-cost leaves with bytes are folded only with the DP's certificate.
fn gnmt_tight(name: &str) -> Option<Workload> {
    let dir = common::shared_dir("paper/throughput/layer")?;
    let w = read_workload(&dir.join(format!("{name}.json"))).expect("readable");
    let total: f64 = w.nodes().iter().map(|n| n.size_bytes).sum();
    let devices = DeviceSet {
        accelerators: 4,
        cpus: 2,
        memory_per_accelerator_bytes: (1.3 * total / 4.0).floor(),
    };
    Some(w.with_devices(devices).expect("valid"))
}

#[test]
fn memory_bound_gnmt_is_solved_to_the_proven_optimum() {
    let Some(w) = gnmt_tight("gnmt_inference") else {
        return;
    };
    let p = plan(&dp::Dp, &Problem::throughput(&w)).expect("the DP solves it");
    assert_eq!(
        p.outcome.status,
        Status::Optimal,
        "{:?}",
        p.outcome.stats.notes
    );
    // Proven independently by the contiguous IP (issue 10): 47.160658203125.
    let tps = p.objective(Objective::Throughput);
    assert!((tps - 47.160658203125).abs() <= 1e-9 * tps, "{tps}");
    assert!(
        p.outcome
            .stats
            .notes
            .iter()
            .any(|n| n.contains("certified")),
        "{:?}",
        p.outcome.stats.notes
    );
    let Some(w) = gnmt_tight("gnmt_training") else {
        return;
    };
    let p = plan(&dp::Dp, &Problem::throughput(&w)).expect("the DP solves it");
    assert_eq!(
        p.outcome.status,
        Status::Optimal,
        "{:?}",
        p.outcome.stats.notes
    );
}

//! The DP against exhaustive search, and the scorer against a naive recomputation of
//! MODEL.md written here from scratch.

mod common;

use common::{random_workload, Shape};
use dnnplace::model::{Device, DeviceSet, Node, Placement, Workload};
use dnnplace::score::evaluate;
use dnnplace::solve::{brute_force::BruteForce, dp::Dp, plan, Objective, Problem, Status};
use proptest::prelude::*;

/// c(u): the cost on any out-edge of u, 0 without out-edges.
fn out_cost(w: &Workload, u: usize) -> f64 {
    w.edges()
        .iter()
        .find(|e| e.from == u)
        .map_or(0.0, |e| e.cost)
}

/// MODEL.md's loads, literally: In/Out sets per device, then the max.
fn naive_max_load(w: &Workload, a: &[Device]) -> f64 {
    let mut devices: Vec<Device> = a.to_vec();
    devices.sort();
    devices.dedup();
    let mut best: f64 = 0.0;
    for d in devices {
        let on = |v: usize| a[v] == d;
        let load = match d {
            Device::Cpu(_) => (0..w.len())
                .filter(|&v| on(v))
                .map(|v| w.node(v).cpu_latency)
                .sum::<f64>(),
            Device::Accelerator(_) => {
                let compute: f64 = (0..w.len())
                    .filter(|&v| on(v))
                    .map(|v| w.node(v).fpga_latency)
                    .sum();
                let mut comm = 0.0;
                for u in 0..w.len() {
                    let out = on(u) && w.edges().iter().any(|e| e.from == u && !on(e.to));
                    let inn = !on(u) && w.edges().iter().any(|e| e.from == u && on(e.to));
                    if out || inn {
                        comm += out_cost(w, u);
                    }
                }
                compute + comm
            }
        };
        best = best.max(load);
    }
    best
}

/// MODEL.md's contiguity on forward nodes: no forward path leaves a device's set and re-enters.
fn naive_contiguous(w: &Workload, a: &[Device]) -> bool {
    let fwd = |v: usize| !w.node(v).is_backward;
    for v0 in (0..w.len()).filter(|&v| fwd(v)) {
        let d = a[v0];
        // Nodes outside d reachable from v0 by forward paths that have left d.
        let mut stack: Vec<usize> = w
            .edges()
            .iter()
            .filter(|e| e.from == v0 && fwd(e.to) && a[e.to] != d)
            .map(|e| e.to)
            .collect();
        let mut seen = vec![false; w.len()];
        while let Some(x) = stack.pop() {
            if std::mem::replace(&mut seen[x], true) {
                continue;
            }
            for e in w.edges().iter().filter(|e| e.from == x && fwd(e.to)) {
                if a[e.to] == d {
                    return false;
                }
                stack.push(e.to);
            }
        }
    }
    true
}

/// The devices can be ordered as pipeline stages: forward edges between devices form no cycle.
fn naive_stage_order(w: &Workload, a: &[Device]) -> bool {
    let fwd = |v: usize| !w.node(v).is_backward;
    let arcs: Vec<(Device, Device)> = w
        .edges()
        .iter()
        .filter(|e| fwd(e.from) && fwd(e.to) && a[e.from] != a[e.to])
        .map(|e| (a[e.from], a[e.to]))
        .collect();
    let mut left: Vec<Device> = a.to_vec();
    left.sort();
    left.dedup();
    // Repeatedly remove a device with no incoming arc from the devices left.
    while let Some(i) =
        (0..left.len()).find(|&i| !arcs.iter().any(|&(x, y)| y == left[i] && left.contains(&x)))
    {
        left.remove(i);
    }
    left.is_empty()
}

fn naive_valid(w: &Workload, a: &[Device]) -> bool {
    let d = w.devices();
    for (v, &dev) in a.iter().enumerate() {
        match dev {
            Device::Accelerator(i)
                if i >= d.accelerators || !w.node(v).supported_on_accelerator =>
            {
                return false
            }
            Device::Cpu(i) if i >= d.cpus => return false,
            _ => {}
        }
    }
    for i in 0..d.accelerators {
        let used: f64 = (0..w.len())
            .filter(|&v| a[v] == Device::Accelerator(i))
            .map(|v| w.node(v).size_bytes)
            .sum();
        if used > d.memory_per_accelerator_bytes {
            return false;
        }
    }
    true
}

/// Exhaustive node-level contiguous optimum: every assignment of colour classes to
/// devices (no symmetry reduction), MODEL.md's rules checked literally, plus an order of
/// the devices as pipeline stages.
fn naive_contiguous_optimum(w: &Workload) -> Option<f64> {
    let mut classes: Vec<Vec<usize>> = Vec::new();
    let mut by_id = std::collections::HashMap::new();
    for (v, node) in w.nodes().iter().enumerate() {
        match node.color_class {
            Some(c) => {
                let next = classes.len();
                let at = *by_id.entry(c).or_insert(next);
                if at == next {
                    classes.push(Vec::new());
                }
                classes[at].push(v);
            }
            None => classes.push(vec![v]),
        }
    }
    let d = w.devices();
    let all: Vec<Device> = (0..d.accelerators)
        .map(Device::Accelerator)
        .chain((0..d.cpus).map(Device::Cpu))
        .collect();
    let mut best: Option<f64> = None;
    let total = all.len().pow(classes.len() as u32);
    let mut a = vec![Device::Cpu(0); w.len()];
    for code in 0..total {
        let mut x = code;
        for class in &classes {
            let dev = all[x % all.len()];
            x /= all.len();
            for &v in class {
                a[v] = dev;
            }
        }
        if naive_valid(w, &a) && naive_contiguous(w, &a) && naive_stage_order(w, &a) {
            let value = naive_max_load(w, &a);
            if best.is_none_or(|b| value < b) {
                best = Some(value);
            }
        }
    }
    best
}

/// Each colour class has at most one forward node and none is backward-only: then
/// the class-level contiguity the solvers use equals MODEL.md's node-level one.
fn classes_are_simple(w: &Workload) -> bool {
    let mut forward = std::collections::HashMap::new();
    for node in w.nodes() {
        if let Some(c) = node.color_class {
            *forward.entry(c).or_insert(0) += usize::from(!node.is_backward);
        } else if node.is_backward {
            return false;
        }
    }
    forward.values().all(|&f| f == 1)
}

fn dp_value(w: &Workload) -> Option<f64> {
    let p = plan(&Dp, &Problem::throughput(w)).expect("dp runs and its plan passes the scorer");
    match p.outcome.status {
        Status::Optimal => Some(p.objective(Objective::Throughput)),
        Status::Infeasible { .. } => None,
        other => panic!("unexpected status {other:?}"),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, ..ProptestConfig::default() })]

    /// DP == exhaustive search over contiguous placements (the library's brute force, and
    /// the naive node-level oracle where the two contiguity notions coincide).
    #[test]
    fn dp_equals_exhaustive_contiguous_optimum(seed in any::<u64>()) {
        let shape = Shape { max_nodes: 9, ..Shape::default() };
        let Some(w) = random_workload(seed, shape) else { return Ok(()) };
        let dp = dp_value(&w);
        let brute = plan(&BruteForce, &Problem::throughput(&w)).unwrap();
        let brute_value = brute.outcome.placement.as_ref().map(|_| brute.objective(Objective::Throughput));
        match (dp, brute_value) {
            (Some(a), Some(b)) => prop_assert!(close(a, b), "dp {a} != brute force {b}"),
            (None, None) => {}
            other => prop_assert!(false, "dp and brute force disagree on feasibility: {other:?}"),
        }
        if w.len() > 7 {
            return Ok(()); // the naive oracle enumerates (k + l)^n assignments
        }
        let naive = naive_contiguous_optimum(&w);
        if classes_are_simple(&w) {
            match (dp, naive) {
                (Some(a), Some(b)) => prop_assert!(close(a, b), "dp {a} != naive oracle {b}"),
                (None, None) => {}
                other => prop_assert!(false, "dp and the naive oracle disagree on feasibility: {other:?}"),
            }
        } else if let (Some(a), Some(b)) = (dp, naive) {
            prop_assert!(a >= b - 1e-9, "dp {a} below the node-level optimum {b}");
        }
    }

    /// The scorer's TPS == MODEL.md recomputed naively, on random (often invalid) placements.
    #[test]
    fn scorer_matches_naive_loads(seed in any::<u64>(), draws in proptest::collection::vec(any::<u64>(), 9)) {
        let Some(w) = random_workload(seed, Shape::default()) else { return Ok(()) };
        let d = w.devices().clone();
        let a: Vec<Device> = (0..w.len())
            .map(|v| {
                let x = draws[v % draws.len()] >> (v % 7);
                if d.cpus > 0 && x % 3 == 0 { Device::Cpu((x as usize / 3) % d.cpus) } else { Device::Accelerator(x as usize % d.accelerators) }
            })
            .collect();
        let e = evaluate(&w, &Placement::new(a.clone()), false);
        let naive = naive_max_load(&w, &a);
        prop_assert!(close(e.max_load, naive), "scorer {} != naive {}", e.max_load, naive);
        prop_assert_eq!(e.is_valid(), naive_valid(&w, &a) && colour_classes_kept(&w, &a));
    }

    /// Scaling every time by c scales the optimum by c.
    #[test]
    fn optimum_scales_with_costs(seed in any::<u64>()) {
        let Some(w) = random_workload(seed, Shape::default()) else { return Ok(()) };
        let Some(base) = dp_value(&w) else { return Ok(()) };
        let scaled = rebuild(&w, |n| { n.fpga_latency *= 2.5; n.cpu_latency *= 2.5; }, 2.5, None, w.devices().clone());
        let v = dp_value(&scaled).expect("scaling keeps feasibility");
        prop_assert!(close(v, 2.5 * base), "{v} != 2.5 * {base}");
    }

    /// Renaming and reordering nodes changes nothing.
    #[test]
    fn relabelling_changes_nothing(seed in any::<u64>(), shift in 1i64..1000) {
        let Some(w) = random_workload(seed, Shape::default()) else { return Ok(()) };
        let base = dp_value(&w);
        let relabelled = rebuild(&w, |n| n.id = 7 * n.id + shift, 1.0, Some(seed), w.devices().clone());
        let v = dp_value(&relabelled);
        match (base, v) {
            (Some(a), Some(b)) => prop_assert!(close(a, b), "{a} != {b}"),
            (None, None) => {}
            other => prop_assert!(false, "feasibility changed: {other:?}"),
        }
    }

    /// One more accelerator is never worse.
    #[test]
    fn more_devices_never_worse(seed in any::<u64>()) {
        let Some(w) = random_workload(seed, Shape::default()) else { return Ok(()) };
        let Some(base) = dp_value(&w) else { return Ok(()) };
        let mut d = w.devices().clone();
        d.accelerators += 1;
        let more = dp_value(&w.with_devices(d.clone()).unwrap()).expect("still feasible");
        prop_assert!(more <= base + 1e-9, "{more} > {base}");
        d.accelerators -= 1;
        d.cpus += 1;
        let more = dp_value(&w.with_devices(d).unwrap()).expect("still feasible");
        prop_assert!(more <= base + 1e-9, "{more} > {base}");
    }
}

fn colour_classes_kept(w: &Workload, a: &[Device]) -> bool {
    (0..w.len()).all(|u| {
        (0..w.len()).all(|v| {
            w.node(u).color_class.is_none()
                || w.node(u).color_class != w.node(v).color_class
                || a[u] == a[v]
        })
    })
}

/// The same workload with nodes edited, edge costs scaled, and (with a seed) node order shuffled.
fn rebuild(
    w: &Workload,
    edit: impl Fn(&mut Node),
    edge_scale: f64,
    shuffle: Option<u64>,
    devices: DeviceSet,
) -> Workload {
    let mut order: Vec<usize> = (0..w.len()).collect();
    if let Some(seed) = shuffle {
        let mut r = common::Rng::new(seed ^ 0xABCDEF);
        for i in (1..order.len()).rev() {
            order.swap(i, r.below(i as u64 + 1) as usize);
        }
    }
    let mut nodes: Vec<Node> = w.nodes().to_vec();
    let old_ids: Vec<i64> = nodes.iter().map(|n| n.id).collect();
    nodes.iter_mut().for_each(&edit);
    let new_id: std::collections::HashMap<i64, i64> = old_ids
        .iter()
        .zip(&nodes)
        .map(|(&o, n)| (o, n.id))
        .collect();
    let nodes: Vec<Node> = order.iter().map(|&i| nodes[i].clone()).collect();
    let mut edges: Vec<(i64, i64, f64, f64)> = w
        .edges()
        .iter()
        .map(|e| {
            (
                new_id[&w.node(e.from).id],
                new_id[&w.node(e.to).id],
                e.cost * edge_scale,
                e.size_bytes,
            )
        })
        .collect();
    edges.reverse();
    Workload::new(nodes, edges, devices).expect("still valid")
}

/// A small DAG with zero-cost leaves that carry bytes, under a memory that binds: the case
/// where folding the leaves needs the DP's certificate (src/solve/leaf_folding.rs).
fn leafy_workload(seed: u64) -> Option<Workload> {
    let mut r = common::Rng::new(seed);
    let core = 2 + r.below(4) as usize;
    let leaves = 2 + r.below(core.min(3) as u64) as usize;
    let mut nodes = Vec::new();
    let node = |id: usize, fpga: f64, cpu: f64, size: f64| Node {
        id: id as i64,
        name: None,
        fpga_latency: fpga,
        cpu_latency: cpu,
        size_bytes: size,
        supported_on_accelerator: true,
        is_backward: false,
        color_class: None,
        layer_id: None,
        module: None,
        memory: None,
    };
    for i in 0..core {
        nodes.push(node(
            i,
            1.0 + r.below(8) as f64,
            2.0 + r.below(30) as f64,
            r.below(6) as f64,
        ));
    }
    let cost: Vec<f64> = (0..core + leaves)
        .map(|_| r.below(3) as f64 * 0.5)
        .collect();
    let mut edges = Vec::new();
    for (i, &c) in cost[..core].iter().enumerate() {
        for j in i + 1..core {
            if j == i + 1 || r.chance(0.3) {
                edges.push((i as i64, j as i64, c, 0.0));
            }
        }
    }
    for x in core..core + leaves {
        nodes.push(node(x, 0.0, 0.0, 1.0 + r.below(4) as f64));
        let h = r.below(core as u64) as i64;
        if r.chance(0.5) {
            edges.push((x as i64, h, cost[x], 0.0));
        } else {
            edges.push((h, x as i64, cost[h as usize], 0.0));
        }
    }
    let total: f64 = nodes.iter().map(|n| n.size_bytes).sum();
    let k = 1 + r.below(3) as usize;
    let memory = (total / k as f64 * (1.0 + r.below(4) as f64 * 0.1)).ceil();
    let devices = DeviceSet {
        accelerators: k,
        memory_per_accelerator_bytes: memory,
        cpus: r.below(2) as usize,
    };
    Workload::new(nodes, edges, devices).ok()
}

/// Memory-bound leaf folding keeps the DP exact: DP == brute force on DAGs whose zero-cost
/// leaves carry bytes under a binding memory, and every way the fold is certified (or
/// given up) occurs.
#[test]
fn dp_with_memory_bound_leaves_equals_brute_force() {
    let mut paths: std::collections::BTreeMap<&str, usize> = Default::default();
    for seed in 0..250u64 {
        let Some(w) = leafy_workload(seed) else {
            continue;
        };
        let dp =
            plan(&Dp, &Problem::throughput(&w)).expect("dp runs and its plan passes the scorer");
        let brute = plan(&BruteForce, &Problem::throughput(&w)).unwrap();
        let brute_value = brute
            .outcome
            .placement
            .as_ref()
            .map(|_| brute.objective(Objective::Throughput));
        let dp_value = dp
            .outcome
            .placement
            .as_ref()
            .map(|_| dp.objective(Objective::Throughput));
        match (dp_value, brute_value) {
            (Some(a), Some(b)) => assert!(
                close(a, b),
                "seed {seed}: dp {a} != brute force {b}; {:?}",
                dp.outcome.stats.notes
            ),
            (None, None) => {}
            other => panic!("seed {seed}: dp and brute force disagree on feasibility: {other:?}"),
        }
        assert!(
            matches!(
                dp.outcome.status,
                Status::Optimal | Status::Infeasible { .. }
            ),
            "seed {seed}: {:?}",
            dp.outcome.status
        );
        let notes = dp.outcome.stats.notes.join("; ");
        let path = if notes.contains("weightless fits memory") {
            "weightless plan fits"
        } else if notes.contains("folded optimum equals") {
            "folded equals weightless"
        } else if notes.contains("folding them costs") {
            "kept apart: folding costs"
        } else if notes.contains("kept apart") {
            "kept apart: small DAG"
        } else {
            "no memory-bound leaf"
        };
        *paths.entry(path).or_default() += 1;
    }
    println!("{paths:?}");
    for path in [
        "weightless plan fits",
        "folded equals weightless",
        "kept apart: folding costs",
        "kept apart: small DAG",
    ] {
        assert!(
            paths.get(path).copied().unwrap_or(0) > 0,
            "path '{path}' never taken: {paths:?}"
        );
    }
}

/// The floor rule (src/solve/dp/pruning.rs: `OPT ≥ max_g min(F(g) if g fits, C(g))`) keeps
/// the DP exact: on random workloads where one node is made too big for any accelerator
/// (so it must sit on a CPU and the floor often binds), DP == brute force, and both the
/// certificate (the chain split meets the floor: nothing relaxed) and the relaxation with
/// the floor rule occur.
#[test]
fn dp_with_a_binding_floor_equals_brute_force() {
    let (mut certified, mut relaxed) = (0, 0);
    for seed in 0..400u64 {
        let shape = Shape {
            max_nodes: 8,
            ..Shape::default()
        };
        let Some(w) = random_workload(seed, shape) else {
            continue;
        };
        let mut d = w.devices().clone();
        d.cpus = d.cpus.max(1);
        let big = (seed as usize) % w.len();
        let memory = d.memory_per_accelerator_bytes;
        let factor = [1.0, 3.0, 10.0][(seed / 7) as usize % 3];
        let w = rebuild(
            &w,
            |n| {
                if n.id == w.node(big).id {
                    n.size_bytes = memory * 1.5 + 1.0;
                    n.cpu_latency *= factor;
                }
            },
            1.0,
            None,
            d,
        );
        let dp =
            plan(&Dp, &Problem::throughput(&w)).expect("dp runs and its plan passes the scorer");
        let brute = plan(&BruteForce, &Problem::throughput(&w)).unwrap();
        let value = |p: &dnnplace::solve::Plan| {
            p.outcome
                .placement
                .as_ref()
                .map(|_| p.objective(Objective::Throughput))
        };
        match (value(&dp), value(&brute)) {
            (Some(a), Some(b)) => assert!(close(a, b), "seed {seed}: dp {a} != brute force {b}"),
            (None, None) => continue,
            other => panic!("seed {seed}: dp and brute force disagree on feasibility: {other:?}"),
        }
        if dp
            .outcome
            .stats
            .notes
            .iter()
            .any(|n| n.contains("meets the lower bound"))
        {
            certified += 1;
        } else {
            relaxed += 1;
        }
    }
    println!("certified by the floor: {certified}, relaxed: {relaxed}");
    assert!(
        certified > 0 && relaxed > 0,
        "certified {certified}, relaxed {relaxed}"
    );
}

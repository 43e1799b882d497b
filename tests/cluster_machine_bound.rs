//! The machine bound and the machine chain on clusters (`solve::bounds::cluster::machine`,
//! `solve::cluster::machine_chain`) against exhaustive search over every contiguous plan
//! on small random clusters whose machines each hold one accelerator type (1–3 machines,
//! with and without peer links, CPU cores, tight memory, CPU-only nodes, training graphs):
//! the bound never exceeds the contiguous optimum and the chain's plans are valid,
//! contiguous, scored as claimed and never below it. Instances with a machine of two
//! types are skipped (the bound is then 0 by definition) and counted.

mod cluster_gen;
mod common;

use cluster_gen::{random_clustered, ClusterShape};
use common::Shape;
use dnnplace::model::ClusterCosts;
use dnnplace::score::evaluate_on_cluster;
use dnnplace::solve::bounds::cluster::machine::{machine_bound, machine_bound_with, Debts};
use dnnplace::solve::bounds::cluster::volume::volume_bound;
use dnnplace::solve::budget::Budget;
use dnnplace::solve::cluster::brute_force::brute_force;
use dnnplace::solve::cluster::machine_chain::machine_chain;
use dnnplace::solve::Objective;

#[test]
fn the_machine_bound_is_below_every_contiguous_plan_and_the_machine_chain_above() {
    let (mut checked, mut positive, mut above) = (0, 0, 0);
    let (mut eligible, mut chained, mut chain_optimal) = (0, 0, 0);
    for seed in 0..1500 {
        let shape = Shape {
            max_nodes: 7,
            training: seed % 2 == 0,
            ..Shape::default()
        };
        let cluster = ClusterShape {
            max_devices: 5,
            max_machines: 3,
            peer: [None, Some(true), Some(false)][seed as usize % 3],
            ..ClusterShape::default()
        };
        let Some(w) = random_clustered(seed, shape, cluster) else {
            continue;
        };
        let machines = w.cluster().expect("a cluster").machines();
        if machines.iter().any(|m| m.accelerators.len() != 1) {
            continue;
        }
        let costs = ClusterCosts::of(&w);
        let Some((optimum, _)) = brute_force(&w, &costs, Objective::Throughput, true)
            .unwrap()
            .best
        else {
            continue;
        };
        checked += 1;
        let bound = machine_bound(&w, &costs, &Budget::new(None, None));
        assert!(
            bound <= optimum * (1.0 + 1e-12),
            "seed {seed}: machine bound {bound} above the contiguous optimum {optimum}"
        );
        positive += usize::from(bound > 0.0);
        above += usize::from(bound > volume_bound(&w, &costs, 10.0) * (1.0 + 1e-9));
        let with_debts = machine_bound_with(&w, &costs, &Budget::new(None, None), Debts::On);
        assert!(
            with_debts <= optimum * (1.0 + 1e-12) && with_debts >= bound * (1.0 - 1e-6),
            "seed {seed}: with debts {with_debts}, without {bound}, optimum {optimum}"
        );
        // The chain packs accelerators only, on two machines or more.
        eligible += usize::from(
            machines.len() >= 2 && w.nodes().iter().all(|n| n.supported_on_accelerator),
        );
        if let Some((value, p)) = machine_chain(&w, &costs, &Budget::new(None, None)) {
            let e = evaluate_on_cluster(&w, &costs, &p);
            assert!(e.is_valid() && e.is_contiguous(), "seed {seed}: {e:?}");
            assert_eq!(
                e.max_load, value,
                "seed {seed}: the chain's value is its plan's score"
            );
            assert!(
                value >= optimum * (1.0 - 1e-12),
                "seed {seed}: machine chain {value} below the optimum {optimum}"
            );
            chained += 1;
            chain_optimal += usize::from(value <= optimum * (1.0 + 1e-9));
        }
    }
    eprintln!(
        "{checked} instances: machine bound positive {positive}, above the volume bound {above}; \
         machine chain planned {chained} of {eligible} with two machines or more and no \
         CPU-only node, optimal {chain_optimal}"
    );
    assert!(
        checked >= 150,
        "only {checked} feasible one-type-per-machine instances"
    );
    assert!(
        positive * 10 >= checked * 9,
        "bound positive on {positive} of {checked}"
    );
    assert!(
        above * 10 >= checked,
        "above the volume bound on {above} of {checked}"
    );
    assert!(
        eligible >= 50 && chained * 10 >= eligible * 9,
        "the machine chain planned {chained} of {eligible}"
    );
}

/// A 48-layer BERT on two machines of A100s and one of V100s (one CPU core each): the
/// machine bound is below the cluster DP's proven contiguous optimum and within 10 % of it
/// (6.862 against 7.301 when written); the machine chain's plan is no better than the
/// optimum. (On so few devices the volume bound, 7.083, is the stronger one; the machine
/// bound is for many machines per type: `bench --hard cluster`.)
#[test]
fn the_machine_bound_is_below_the_dp_optimum_on_a_transformer() {
    use dnnplace::costmodel::cluster::cluster_and_profiles;
    use dnnplace::costmodel::graph::to_workload_on_cluster;
    use dnnplace::costmodel::TransformerSpec;
    use dnnplace::costmodel::{find_profile, transformer_graph, CostSettings, DType};
    use dnnplace::solve::cluster::dp::{solve, Tracking};
    use dnnplace::solve::Limits;
    let graph =
        transformer_graph(&TransformerSpec::bert(48, 768, 12, 512, 1), DType::Fp32).unwrap();
    let settings = CostSettings {
        accelerator: find_profile("a100-80gb", &[]).unwrap(),
        cpu: find_profile("cpu-core", &[]).unwrap(),
        dtype: DType::Fp32,
        training: false,
        accelerators: 1,
        cpus: 1,
    };
    let (cluster, profiles) = cluster_and_profiles("2x2xa100-80gb+1x2xv100", &[]).unwrap();
    let w = to_workload_on_cluster(&graph, &settings, &cluster, &profiles).unwrap();
    let costs = ClusterCosts::of(&w);
    let optimum = solve(
        &w,
        &costs,
        &Limits::default(),
        Tracking::Best,
        f64::INFINITY,
    )
    .unwrap()
    .best
    .expect("a plan")
    .0;
    let bound = machine_bound(&w, &costs, &Budget::new(None, None));
    let with_debts = machine_bound_with(&w, &costs, &Budget::new(None, None), Debts::On);
    assert!(
        with_debts <= optimum * (1.0 + 1e-12) && with_debts >= bound * (1.0 - 1e-6),
        "with debts {with_debts}, without {bound}, optimum {optimum}"
    );
    let volume = volume_bound(&w, &costs, 10.0);
    let (chain, _) = machine_chain(&w, &costs, &Budget::new(None, None)).expect("a plan");
    eprintln!("volume {volume}, machine bound {bound}, optimum {optimum}, machine chain {chain}");
    assert!(
        bound <= optimum * (1.0 + 1e-12),
        "bound {bound} > optimum {optimum}"
    );
    assert!(
        bound >= 0.9 * optimum,
        "bound {bound} below 90% of the optimum {optimum}"
    );
    assert!(
        chain >= optimum * (1.0 - 1e-12),
        "chain {chain} < optimum {optimum}"
    );
}

/// Every plan whose stages are intervals of the contraction's order of the groups, one per
/// accelerator, the machines in any order and each machine's accelerators in its order
/// (any of them empty): each machine sequence, every composition of the groups into its
/// accelerators, scored by the evaluator. The best valid contiguous score.
fn best_over_the_order(w: &dnnplace::model::Workload, costs: &ClusterCosts) -> Option<f64> {
    use dnnplace::model::contraction::Contraction;
    use dnnplace::model::{Device, Placement};
    let c = Contraction::new(w);
    let cluster = w.cluster().expect("a cluster");
    let machines = cluster.machines().len();
    let slots = cluster.accelerators();
    let mut best: Option<f64> = None;
    // Machine sequences: every ordered selection of distinct machines.
    let mut sequences: Vec<Vec<usize>> = vec![Vec::new()];
    let mut frontier: Vec<Vec<usize>> = vec![Vec::new()];
    for _ in 0..machines {
        let mut next = Vec::new();
        for s in &frontier {
            for m in (0..machines).filter(|m| !s.contains(m)) {
                let mut t = s.clone();
                t.push(m);
                next.push(t);
            }
        }
        sequences.extend(next.iter().cloned());
        frontier = next;
    }
    for seq in sequences.iter().filter(|s| !s.is_empty()) {
        let devices: Vec<usize> = seq
            .iter()
            .flat_map(|&m| (0..slots.len()).filter(move |&i| slots[i].machine == m))
            .collect();
        // Every way to give each device a (possibly empty) interval: the cut positions.
        let mut cuts = vec![0usize; devices.len() + 1];
        cuts[devices.len()] = c.len();
        loop {
            let mut assignment = vec![Device::Cpu(0); w.len()];
            for (j, &d) in devices.iter().enumerate() {
                for g in cuts[j]..cuts[j + 1] {
                    for &v in &c.groups[g].nodes {
                        assignment[v] = Device::Accelerator(d);
                    }
                }
            }
            let e = evaluate_on_cluster(w, costs, &Placement::new(assignment));
            if e.is_valid() && e.is_contiguous() && best.is_none_or(|b| e.max_load < b) {
                best = Some(e.max_load);
            }
            // The next non-decreasing cut vector (cuts[0] = 0, cuts[last] = G).
            let inner = devices.len() - 1;
            let Some(i) = (1..=inner).rev().find(|&i| cuts[i] < c.len()) else {
                break;
            };
            cuts[i] += 1;
            for k in i + 1..=inner {
                cuts[k] = cuts[i];
            }
        }
    }
    best
}

/// The machine chain is exact over the plans whose stages are intervals of one order
/// (module documentation of `machine_chain`): on inference graphs with peer links
/// everywhere (no sends, every producer placed before its consumer) its plan is no worse
/// than the best such plan of the contraction's order found by enumeration (it also tries
/// a second order, so it may be better), and never better than the contiguous optimum.
#[test]
fn the_machine_chain_is_the_best_plan_over_its_order() {
    let (mut compared, mut equal, mut better) = (0, 0, 0);
    for seed in 0..2500 {
        let shape = Shape {
            max_nodes: 7,
            training: false,
            ..Shape::default()
        };
        let cluster = ClusterShape {
            max_devices: 5,
            max_machines: 3,
            peer: Some(true),
            ..ClusterShape::default()
        };
        let Some(w) = random_clustered(seed, shape, cluster) else {
            continue;
        };
        let machines = w.cluster().expect("a cluster").machines();
        if machines.len() < 2
            || machines.iter().any(|m| m.accelerators.len() != 1)
            || w.nodes().iter().any(|n| !n.supported_on_accelerator)
        {
            continue;
        }
        let costs = ClusterCosts::of(&w);
        let Some(over_order) = best_over_the_order(&w, &costs) else {
            continue;
        };
        let Some((value, p)) = machine_chain(&w, &costs, &Budget::new(None, None)) else {
            panic!("seed {seed}: no chain plan where the order has one of {over_order}");
        };
        let e = evaluate_on_cluster(&w, &costs, &p);
        assert!(e.is_valid() && e.is_contiguous(), "seed {seed}: {e:?}");
        assert!(
            value <= over_order * (1.0 + 1e-7),
            "seed {seed}: machine chain {value} above the best plan over the order {over_order}"
        );
        let optimum = brute_force(&w, &costs, Objective::Throughput, true)
            .unwrap()
            .best
            .expect("a contiguous plan")
            .0;
        assert!(
            value >= optimum * (1.0 - 1e-12),
            "seed {seed}: machine chain {value} below the optimum {optimum}"
        );
        compared += 1;
        equal += usize::from(value >= over_order * (1.0 - 1e-7));
        better += usize::from(value < over_order * (1.0 - 1e-7));
    }
    eprintln!(
        "{compared} instances: machine chain equal to the best plan over the order on {equal}, \
         better (the second order) on {better}"
    );
    assert!(compared >= 150, "only {compared} instances compared");
}

/// The debts of owed window groups (module documentation of the bound, "Debts") on
/// inference graphs of up to 8 nodes on 1–2 machines of up to 6 devices, where a stage may
/// hold a window group alone: the bound never exceeds the contiguous optimum (775
/// instances of 3,000 seeds when written). Charging the debt also where the paying stage
/// ends inside its own window (`e < m(l)`) makes it fail (seed 2140: 28.75 above the
/// optimum 27.875).
#[test]
fn the_machine_bound_with_debts_is_below_every_contiguous_plan() {
    let (mut checked, mut positive, mut raised) = (0, 0, 0);
    for seed in 0..3000 {
        let shape = Shape {
            max_nodes: 8,
            training: false,
            max_accelerators: 4,
            ..Shape::default()
        };
        let cluster = ClusterShape {
            max_devices: 6,
            max_machines: 2,
            peer: [None, Some(true)][seed as usize % 2],
            ..ClusterShape::default()
        };
        let Some(w) = random_clustered(seed, shape, cluster) else {
            continue;
        };
        let machines = w.cluster().expect("a cluster").machines();
        if machines.iter().any(|m| m.accelerators.len() != 1) {
            continue;
        }
        let costs = ClusterCosts::of(&w);
        let Some((optimum, _)) = brute_force(&w, &costs, Objective::Throughput, true)
            .unwrap()
            .best
        else {
            continue;
        };
        checked += 1;
        let without = machine_bound(&w, &costs, &Budget::new(None, None));
        let bound = machine_bound_with(&w, &costs, &Budget::new(None, None), Debts::On);
        assert!(
            bound <= optimum * (1.0 + 1e-12),
            "seed {seed}: machine bound {bound} above the contiguous optimum {optimum}"
        );
        assert!(
            bound >= without * (1.0 - 1e-6),
            "seed {seed}: with debts {bound} below without {without}"
        );
        positive += usize::from(bound > 0.0);
        raised += usize::from(bound > without * (1.0 + 1e-6));
    }
    eprintln!("{checked} instances, bound positive on {positive}, raised by the debts on {raised}");
    assert!(checked >= 100, "only {checked} instances");
}

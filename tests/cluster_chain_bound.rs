//! The chain bound on clusters (`solve::bounds::cluster::chain`) against exhaustive search
//! over every contiguous plan on small random clusters (1–3 types, 1–2 machines, with and
//! without peer links, tight memory, CPU-only nodes, training graphs): it never exceeds the
//! contiguous optimum, and it is often above both bounds that hold for every plan (the
//! volume bound and the set bound), which cannot see that a stage takes its work in order.

mod cluster_gen;
mod common;

use cluster_gen::{random_clustered, ClusterShape};
use common::Shape;
use dnnplace::model::ClusterCosts;
use dnnplace::solve::bounds::cluster::chain::chain_bound;
use dnnplace::solve::bounds::cluster::set::set_bound;
use dnnplace::solve::bounds::cluster::volume::volume_bound;
use dnnplace::solve::budget::Budget;
use dnnplace::solve::cluster::brute_force::brute_force;
use dnnplace::solve::Objective;

#[test]
fn the_chain_bound_is_below_every_contiguous_plan_and_often_above_the_other_bounds() {
    let (mut checked, mut above, mut positive) = (0, 0, 0);
    for seed in 0..400 {
        let shape = Shape {
            max_nodes: 7,
            training: seed % 2 == 0,
            ..Shape::default()
        };
        let cluster = ClusterShape {
            max_devices: 4,
            max_machines: 2,
            peer: [None, Some(true), Some(false)][seed as usize % 3],
            ..ClusterShape::default()
        };
        let Some(w) = random_clustered(seed, shape, cluster) else {
            continue;
        };
        let costs = ClusterCosts::of(&w);
        let Some((optimum, _)) = brute_force(&w, &costs, Objective::Throughput, true)
            .unwrap()
            .best
        else {
            continue;
        };
        let bound = chain_bound(&w, &costs, &Budget::new(None, None));
        assert!(
            bound <= optimum * (1.0 + 1e-12),
            "seed {seed}: chain bound {bound} above the contiguous optimum {optimum}"
        );
        let others =
            volume_bound(&w, &costs, 10.0).max(set_bound(&w, &costs, &Budget::new(None, None)));
        checked += 1;
        positive += usize::from(bound > 0.0);
        above += usize::from(bound > others * (1.0 + 1e-9));
    }
    eprintln!("{checked} instances: chain bound positive {positive}, above volume and set {above}");
    assert!(checked > 150, "only {checked} feasible instances");
    // Random DAGs are wide (a group with few descendants opens a long window), so the
    // bound is often 0 there; on layered models it is what counts (the next test).
    assert!(
        positive * 2 >= checked,
        "the chain bound was positive on {positive} of {checked} instances"
    );
    assert!(
        above * 20 >= checked,
        "the chain bound was above the volume and set bounds on {above} of {checked} instances"
    );
}

/// On a 48-layer BERT over three machines of different accelerator types, whose layers
/// run at different relative speeds per operator kind, the chain bound is well above the
/// volume bound (which lets each type take the operators it is best at) and below the
/// cluster DP's proven contiguous optimum.
#[test]
fn the_chain_bound_sees_the_layer_mix_on_a_transformer() {
    use dnnplace::costmodel::cluster::cluster_and_profiles;
    use dnnplace::costmodel::graph::to_workload_on_cluster;
    use dnnplace::costmodel::TransformerSpec;
    use dnnplace::costmodel::{find_profile, transformer_graph, CostSettings, DType};
    use dnnplace::solve::cluster::dp::{solve, Tracking};
    use dnnplace::solve::Limits;
    let graph =
        transformer_graph(&TransformerSpec::bert(64, 768, 12, 512, 1), DType::Fp32).unwrap();
    let settings = CostSettings {
        accelerator: find_profile("a100-80gb", &[]).unwrap(),
        cpu: find_profile("cpu-core", &[]).unwrap(),
        dtype: DType::Fp32,
        training: false,
        accelerators: 1,
        cpus: 1,
    };
    let (cluster, profiles) = cluster_and_profiles("1x2xa100-80gb+1x2xv100+1x2xh100", &[]).unwrap();
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
    let chain = chain_bound(&w, &costs, &Budget::new(None, None));
    let volume = volume_bound(&w, &costs, 10.0);
    eprintln!("volume {volume}, chain {chain}, optimum {optimum}");
    assert!(
        chain <= optimum * (1.0 + 1e-12),
        "chain {chain} > optimum {optimum}"
    );
    assert!(
        chain > volume * 1.05,
        "chain {chain} not 5% above volume {volume}"
    );
}

//! Uniform parallel layouts: the search against the brute-force oracle on small random
//! transformers and clusters (every objective, schedule, ZeRO choice, with and without a
//! peer link, memory that binds), and the evaluator against MODEL.md's cluster scorer at
//! `t = d = 1` (the paper's model is the special case).

mod common;

use common::Pick;
use dnnplace::costmodel::graph::{to_workload_on_cluster, CostSettings};
use dnnplace::costmodel::operators::DType;
use dnnplace::costmodel::parallel::{
    transformer_chain, transformer_chain_with, valid_tp_degrees, with_batch, SequenceParallel,
};
use dnnplace::costmodel::transformer::{transformer_graph, Style, TransformerSpec};
use dnnplace::io::cluster_resolve::cluster_and_profiles;
use dnnplace::model::parallel::{
    ChainCosts, Layout, MixedTopology, StageLayout, Topology, Uniform, Zero,
};
use dnnplace::model::profiles::find_profile;
use dnnplace::model::schedule::Schedule;
use dnnplace::model::{ClusterCosts, Device, Placement};
use dnnplace::score::evaluate_on_cluster;
use dnnplace::score::parallel::{score_layout, score_mixed};
use dnnplace::simulate::parallel::simulate_layout;
use dnnplace::solve::budget::Budget;
use dnnplace::solve::parallel::brute_force::{
    brute_force_free, brute_force_mixed, brute_force_uniform,
};
use dnnplace::solve::parallel::free::plan_free;
use dnnplace::solve::parallel::mixed::plan_mixed;
use dnnplace::solve::parallel::mixed_uniform::plan_mixed_uniform;
use dnnplace::solve::parallel::{plan_uniform, Objective, Space};
use dnnplace::solve::Status;
use proptest::prelude::*;

/// Micro-batch `b`, TP `t`, DP `d`, `p` stages, no ZeRO, no recomputation.
fn one(b: usize, t: usize, d: usize, p: usize) -> Uniform {
    Uniform {
        micro_batch: b,
        tensor_parallel: t,
        data_parallel: d,
        zero: Zero::Off,
        recompute: false,
        stages: p,
    }
}

fn random_spec(r: &mut Pick) -> (TransformerSpec, DType) {
    let style = r.of(&[Style::Bert, Style::Gpt2, Style::Llama]);
    let heads = r.of(&[2, 4]);
    let hidden = heads * r.of(&[8, 16, 32]);
    let layers = 1 + r.next(3) as usize;
    let mut spec = TransformerSpec::new(style, layers, hidden, heads, r.of(&[8, 16, 64]), 1);
    spec.vocab = r.of(&[64, 1000]);
    if style == Style::Llama && r.next(2) == 0 {
        spec.kv_heads = heads / 2;
    }
    (spec, r.of(&[DType::Fp32, DType::Bf16]))
}

fn random_topology(r: &mut Pick, need: f64) -> Topology {
    let per = r.of(&[1usize, 2, 4]);
    let machines = 1 + r.next(3) as usize;
    let (cluster, _) =
        cluster_and_profiles(&format!("{machines}x{per}xh100"), &[]).expect("cluster");
    let mut topo = Topology::from_cluster(&cluster).expect("topology");
    if r.next(3) == 0 {
        topo.peer = None;
    }
    // Memory from "nothing fits" to "everything fits", around the model's resident bytes.
    topo.memory_bytes = need * r.of(&[0.05, 0.2, 0.4, 0.7, 1.0, 3.0]);
    topo
}

fn chains(spec: &TransformerSpec, dtype: DType, tps: &[usize], micro: &[usize]) -> Vec<ChainCosts> {
    chains_with(spec, (dtype, SequenceParallel::Off), tps, micro)
}

fn chains_with(
    spec: &TransformerSpec,
    (dtype, sp): (DType, SequenceParallel),
    tps: &[usize],
    micro: &[usize],
) -> Vec<ChainCosts> {
    let h100 = find_profile("h100", &[]).unwrap();
    micro
        .iter()
        .map(|&b| transformer_chain_with(&with_batch(spec, b), dtype, &h100, tps, sp).unwrap())
        .collect()
}

/// The plan's `(t, d, stages)` when the instance of `seed` has one (for the coverage check),
/// after comparing.
fn compare(seed: u64) -> Result<Option<(usize, usize, usize)>, TestCaseError> {
    let mut r = Pick(seed);
    let (spec, dtype) = random_spec(&mut r);
    let tps: Vec<usize> = valid_tp_degrees(&spec, 4)
        .into_iter()
        .filter(|t| [1, 2, 4].contains(t))
        .collect();
    let micro: Vec<usize> = r.of(&[&[1usize][..], &[1, 2], &[2, 4]]).to_vec();
    // Odd seeds price sequence parallelism (the search and the brute force take the
    // chains as given: both must agree under either costing).
    let sp = if seed % 2 == 1 {
        SequenceParallel::On
    } else {
        SequenceParallel::Off
    };
    let cs = chains_with(&spec, (dtype, sp), &tps, &micro);
    let resident: f64 = cs[0]
        .units
        .iter()
        .map(|u| u.costs[0].weight_bytes + u.costs[0].gradient_bytes + u.costs[0].optimizer_bytes)
        .sum();
    let topo = random_topology(&mut r, resident);
    // A third of the instances must use their largest TP degree.
    let tensor_parallel = if r.next(3) == 0 {
        vec![*tps.last().unwrap()]
    } else {
        tps.clone()
    };
    let space = Space {
        tensor_parallel,
        data_parallel: if r.next(3) == 0 {
            Some(r.of(&[1, 2]))
        } else {
            None
        },
        zero: match r.next(4) {
            0 => Zero::ALL.to_vec(),
            1 => vec![Zero::Off, Zero::Optimizer],
            2 => vec![Zero::Off, Zero::Gradients, Zero::Parameters],
            _ => vec![r.of(&Zero::ALL)],
        },
        recompute: r.of(&[None, Some(false), Some(true)]),
        stages: if r.next(4) == 0 {
            Some(1 + r.next(3) as usize)
        } else {
            None
        },
        micro_batches: micro,
        global_batch: r.of(&[4, 8, 12, 16]),
        schedule: r.of(&[Schedule::GPipe, Schedule::OneFOneB]),
        // Seeds 2, 3 mod 4 overlap the DP sync with backward (no draw: the other draws stay).
        overlap_grad_reduce: (seed / 2) % 2 == 1,
        max_devices: topo.devices(),
    };
    let objective = r.of(&[Objective::Iteration, Objective::TimePerSample]);
    let found = plan_uniform(&cs, &topo, &space, objective, &Budget::unlimited()).unwrap();
    let oracle = brute_force_uniform(&cs, &topo, &space, objective);
    match (&found.plan, oracle) {
        (None, None) => {
            let infeasible = matches!(found.status, Status::Infeasible { .. });
            prop_assert!(infeasible, "status {:?}", found.status);
        }
        (Some(plan), Some((best, v))) => {
            prop_assert_eq!(found.status.clone(), Status::Optimal);
            let tol = 1e-9 * v.abs();
            prop_assert!(
                (found.value - v).abs() <= tol,
                "search {} vs brute force {} ({:?} vs {:?})",
                found.value,
                v,
                plan.layout,
                best
            );
            prop_assert!(found.bound <= found.value + tol);
            prop_assert!(plan.score.fits);
            prop_assert!(plan.layout.devices_used() <= topo.devices());
        }
        (a, b) => prop_assert!(false, "search {:?} vs brute force {:?}", a.is_some(), b),
    }
    Ok(found.plan.map(|p| {
        let s = &p.layout.stages[0];
        (s.tensor_parallel, s.data_parallel, p.layout.stages.len())
    }))
}

/// The random instances exercise both outcomes, several stage counts and TP and DP > 1.
#[test]
fn the_random_instances_cover_the_space() {
    let plans: Vec<(usize, usize, usize)> = (0..200).filter_map(|s| compare(s).unwrap()).collect();
    let count = |f: &dyn Fn(&(usize, usize, usize)) -> bool| plans.iter().filter(|x| f(x)).count();
    let (tp, dp, pp) = (
        count(&|x| x.0 > 1),
        count(&|x| x.1 > 1),
        count(&|x| x.2 > 1),
    );
    println!(
        "{} of 200 random instances have a plan; t > 1: {tp}, d > 1: {dp}, p > 1: {pp}",
        plans.len()
    );
    assert!(
        (40..=190).contains(&plans.len()),
        "{} of 200 feasible",
        plans.len()
    );
    assert!(
        tp >= 5 && dp >= 5 && pp >= 5,
        "t > 1: {tp}, d > 1: {dp}, p > 1: {pp}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]
    #[test]
    fn search_equals_brute_force(seed in any::<u64>()) {
        compare(seed)?;
    }
}

/// At `t = d = 1` and one micro-batch of the workload's batch, every stage's time is the
/// load MODEL.md's cluster scorer gives the same split of the training workload on one
/// machine with a peer link (and without one: host-staged, the sender pays too).
#[test]
fn one_device_per_stage_is_the_cluster_model() {
    for (seed, peer) in [
        (1u64, true),
        (2, true),
        (3, false),
        (4, true),
        (5, false),
        (6, true),
    ] {
        let mut r = Pick(seed);
        let (spec, dtype) = random_spec(&mut r);
        let (mut cluster, profiles) = cluster_and_profiles("1x4xh100", &[]).unwrap();
        if !peer {
            let mut ms = cluster.machines().to_vec();
            ms[0].peer = None;
            cluster = dnnplace::model::Cluster::new(cluster.types().to_vec(), ms, 0.0).unwrap();
        }
        let settings = CostSettings {
            accelerator: profiles[0].clone(),
            cpu: find_profile("cpu-core", &[]).unwrap(),
            dtype,
            training: true,
            accelerators: 4,
            cpus: 0,
        };
        let graph = transformer_graph(&spec, dtype).unwrap();
        let w = to_workload_on_cluster(&graph, &settings, &cluster, &profiles).unwrap();
        let chain = transformer_chain(&spec, dtype, &profiles[0], &[1]).unwrap();
        let n = chain.len();
        let cuts: Vec<usize> = (1..n).filter(|_| r.next(2) == 0).take(3).collect();
        let layout = Layout::uniform(
            n,
            &cuts,
            &one(spec.batch, 1, 1, cuts.len() + 1),
            spec.batch,
            Schedule::OneFOneB,
        );
        let topo = Topology::from_cluster(&cluster).unwrap();
        let score = score_layout(&chain, &topo, &layout).unwrap();
        let stage_of_layer = |layer: i64| {
            let unit = (layer + 1) as usize;
            layout
                .stages
                .iter()
                .position(|s| s.units.contains(&unit))
                .unwrap()
        };
        let assignment = w
            .nodes()
            .iter()
            .map(|v| Device::Accelerator(stage_of_layer(v.layer_id.unwrap())))
            .collect();
        let costs = ClusterCosts::new(&w, &cluster);
        let e = evaluate_on_cluster(&w, &costs, &Placement::new(assignment));
        for (s, st) in score.stages.iter().enumerate() {
            let load = e
                .devices
                .iter()
                .find(|d| d.device == Device::Accelerator(s))
                .map_or(0.0, |d| d.load);
            assert!(
                (st.micro_batch_ms - load).abs() <= 1e-9 * load,
                "seed {seed} peer {peer} stage {s}: {} vs {load}",
                st.micro_batch_ms
            );
        }
        assert!(
            (score.time_per_sample_ms * spec.batch as f64 - e.max_load).abs() <= 1e-9 * e.max_load
        );
    }
}

/// Bad layouts are refused with the rule they break.
#[test]
fn layouts_that_break_a_rule_are_named() {
    let spec = TransformerSpec::new(Style::Gpt2, 2, 32, 4, 8, 1);
    let cs = chains(&spec, DType::Fp32, &[1, 2], &[1]);
    let (cluster, _) = cluster_and_profiles("2x2xh100", &[]).unwrap();
    let topo = Topology::from_cluster(&cluster).unwrap();
    let ok = Layout::uniform(4, &[2], &one(1, 2, 1, 2), 8, Schedule::OneFOneB);
    assert!(score_layout(&cs[0], &topo, &ok).is_ok());
    let too_many = Layout::uniform(4, &[1, 2], &one(1, 2, 1, 3), 8, Schedule::OneFOneB);
    assert!(score_layout(&cs[0], &topo, &too_many)
        .unwrap_err()
        .to_string()
        .contains("leave the 4 accelerators"));
    let batch = Layout::uniform(4, &[2], &one(1, 1, 2, 2), 7, Schedule::OneFOneB);
    assert!(score_layout(&cs[0], &topo, &batch)
        .unwrap_err()
        .to_string()
        .contains("not a multiple of d·b = 2"));
    let t4 = Layout::uniform(4, &[], &one(1, 4, 1, 1), 8, Schedule::OneFOneB);
    assert!(score_layout(&cs[0], &topo, &t4)
        .unwrap_err()
        .to_string()
        .contains("degree 4 has no costs"));
}

/// `fewest_devices` against the brute force: for a target equal to the optimum on some
/// count `k` (so a count meets it), the answer is the least `n` whose brute-force optimum
/// on the first `n` accelerators meets the target, and it is proven; a target below the
/// whole cluster's optimum has no answer.
#[test]
fn fewest_devices_equals_the_least_count_by_brute_force() {
    use dnnplace::solve::parallel::fewest_devices;
    let mut checked = 0;
    for seed in 0..60u64 {
        let mut r = Pick(seed ^ 0x5eed);
        let (spec, dtype) = random_spec(&mut r);
        let tps: Vec<usize> = valid_tp_degrees(&spec, 4)
            .into_iter()
            .filter(|t| [1, 2, 4].contains(t))
            .collect();
        let cs = chains(&spec, dtype, &tps, &[1, 2]);
        let resident: f64 = cs[0]
            .units
            .iter()
            .map(|u| {
                u.costs[0].weight_bytes + u.costs[0].gradient_bytes + u.costs[0].optimizer_bytes
            })
            .sum();
        let topo = random_topology(&mut r, resident);
        let n = topo.devices();
        let space = Space {
            tensor_parallel: tps.clone(),
            data_parallel: None,
            zero: Zero::ALL.to_vec(),
            recompute: None,
            stages: None,
            micro_batches: vec![1, 2],
            global_batch: 8,
            schedule: Schedule::OneFOneB,
            overlap_grad_reduce: false,
            max_devices: n,
        };
        let best_on = |k: usize| {
            let s = Space {
                max_devices: k,
                ..space.clone()
            };
            brute_force_uniform(&cs, &topo, &s, Objective::TimePerSample).map(|(_, v)| v)
        };
        let optima: Vec<Option<f64>> = (1..=n).map(best_on).collect();
        let Some(k) = (1..=n).rev().find(|&k| optima[k - 1].is_some()) else {
            continue;
        };
        let pick = 1 + r.next(k as u64) as usize;
        let Some(target) = (pick..=k).find_map(|c| optima[c - 1]) else {
            continue;
        };
        let found = fewest_devices(&cs, &topo, &space, target, &Budget::unlimited()).unwrap();
        let least = (1..=n).find(|&c| optima[c - 1].is_some_and(|v| v <= target));
        assert_eq!(
            found.devices, least,
            "seed {seed}: target {target}, optima {optima:?}"
        );
        assert!(found.proven);
        assert!(found.outcome.value <= target);
        let whole = optima[n - 1].unwrap();
        let none = fewest_devices(&cs, &topo, &space, whole * 0.999, &Budget::unlimited()).unwrap();
        assert_eq!(none.devices, None);
        assert!(none.proven);
        checked += 1;
    }
    println!("{checked} of 60 random instances checked");
    assert!(
        checked >= 20,
        "only {checked} instances had a feasible layout"
    );
}

/// Free layouts (per-stage `t`, `d`): the search against the brute-force oracle on one
/// random instance, and against the uniform optimum of the same space. Returns, when the
/// instance has a plan, whether its stages differ in `t` or `d` and whether it beats the
/// best uniform layout.
fn compare_free(seed: u64) -> Result<Option<(bool, bool)>, TestCaseError> {
    let mut r = Pick(seed ^ 0x5eed_f4ee);
    let (spec, dtype) = random_spec(&mut r);
    let tps: Vec<usize> = valid_tp_degrees(&spec, 4)
        .into_iter()
        .filter(|t| [1, 2, 4].contains(t))
        .collect();
    let micro: Vec<usize> = r.of(&[&[1usize][..], &[1, 2]]).to_vec();
    let cs = chains(&spec, dtype, &tps, &micro);
    let resident: f64 = cs[0]
        .units
        .iter()
        .map(|u| u.costs[0].weight_bytes + u.costs[0].gradient_bytes + u.costs[0].optimizer_bytes)
        .sum();
    let topo = random_topology(&mut r, resident);
    let space = Space {
        tensor_parallel: tps.clone(),
        data_parallel: None,
        zero: match r.next(3) {
            0 => Zero::ALL.to_vec(),
            1 => vec![Zero::Off, Zero::Gradients, Zero::Parameters],
            _ => vec![r.of(&Zero::ALL)],
        },
        recompute: r.of(&[None, Some(false), Some(true)]),
        stages: None,
        micro_batches: micro,
        global_batch: r.of(&[4, 8, 12]),
        schedule: r.of(&[Schedule::GPipe, Schedule::OneFOneB]),
        overlap_grad_reduce: false,
        max_devices: topo.devices().min(r.of(&[4, 6, 8, 12])),
    };
    // Drawn last so the earlier draws (and the coverage counts) stay those of before.
    let mut space = space;
    space.stages = r.of(&[None, None, None, Some(2)]);
    let found = plan_free(&cs, &topo, &space, None, &Budget::unlimited()).unwrap();
    let oracle = brute_force_free(&cs, &topo, &space);
    let uniform = brute_force_uniform(&cs, &topo, &space, Objective::TimePerSample);
    match (&found.plan, &oracle) {
        (None, None) => {
            let infeasible = matches!(found.status, Status::Infeasible { .. });
            prop_assert!(infeasible, "status {:?}", found.status);
            prop_assert!(uniform.is_none());
            Ok(None)
        }
        (Some(plan), Some((best, v))) => {
            prop_assert_eq!(found.status.clone(), Status::Optimal);
            let tol = 1e-9 * v.abs();
            prop_assert!(
                (found.value - v).abs() <= tol,
                "free search {} vs brute force {} ({:?} vs {:?})",
                found.value,
                v,
                plan.layout,
                best
            );
            prop_assert!((found.bound - found.value).abs() <= tol);
            // The evaluator's own figure for the plan.
            let s = score_layout(&plan.chain, &topo, &plan.layout).unwrap();
            prop_assert!(s.fits);
            prop_assert_eq!(s.time_per_sample_ms, found.value);
            let end = plan
                .layout
                .stages
                .last()
                .map_or(0, |s| s.first_device + s.width());
            prop_assert!(end <= space.max_devices);
            let u = uniform.as_ref().map_or(f64::INFINITY, |u| u.1);
            prop_assert!(found.value <= u + tol, "free {} > uniform {u}", found.value);
            let st = &plan.layout.stages;
            let mixed = st.iter().any(|s| {
                (s.tensor_parallel, s.data_parallel) != (st[0].tensor_parallel, st[0].data_parallel)
            });
            Ok(Some((mixed, found.value < u - tol)))
        }
        (a, b) => {
            prop_assert!(
                false,
                "free search {:?} vs brute force {:?}",
                a.is_some(),
                b
            );
            Ok(None)
        }
    }
}

/// Some random instances' free optima have stages with different `t` or `d`, and some
/// beat every uniform layout.
#[test]
fn free_instances_cover_mixed_stages() {
    let plans: Vec<(bool, bool)> = (0..80).filter_map(|s| compare_free(s).unwrap()).collect();
    let mixed = plans.iter().filter(|p| p.0).count();
    let better = plans.iter().filter(|p| p.1).count();
    println!(
        "{} of 80 free instances have a plan; mixed t or d: {mixed}; strictly below uniform: {better}",
        plans.len()
    );
    assert!(plans.len() >= 20, "{} of 80 feasible", plans.len());
    assert!(mixed >= 3 && better >= 3, "mixed {mixed}, better {better}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn free_search_equals_brute_force(seed in any::<u64>()) {
        compare_free(seed)?;
    }
}

/// A random cluster of 2–3 accelerator types (each type's machines of 1, 2 or 4 devices,
/// up to 12 in all; a type's machines without a peer link at times; memory that binds),
/// its chains per type (`[type][micro-batch]`) and a space.
fn random_mixed(seed: u64) -> (MixedTopology, Vec<Vec<ChainCosts>>, Space) {
    let mut r = Pick(seed ^ 0x0a11_7e5e);
    let (mut spec, dtype) = random_spec(&mut r);
    spec.layers = 1 + r.next(2) as usize;
    let tps: Vec<usize> = valid_tp_degrees(&spec, 4)
        .into_iter()
        .filter(|t| [1, 2, 4].contains(t))
        .collect();
    let per = r.of(&[1usize, 2, 4]);
    let types = if per == 4 { 2 } else { 2 + r.next(2) as usize };
    let names = ["h100", "a100-80gb", "v100"];
    let first = r.next(3) as usize;
    let groups: Vec<String> = (0..types)
        .map(|g| {
            let machines = if per == 4 { 1 } else { 1 + r.next(2) as usize };
            format!("{machines}x{per}x{}", names[(first + g) % 3])
        })
        .collect();
    let (cluster, _) = cluster_and_profiles(&groups.join("+"), &[]).expect("cluster");
    let mut topo = MixedTopology::from_cluster(&cluster).expect("mixed topology");
    let micro: Vec<usize> = r.of(&[&[1usize][..], &[1, 2]]).to_vec();
    let chains: Vec<Vec<ChainCosts>> = topo
        .groups
        .iter()
        .map(|g| {
            let p = find_profile(&g.profile, &[]).unwrap();
            micro
                .iter()
                .map(|&b| {
                    transformer_chain_with(
                        &with_batch(&spec, b),
                        dtype,
                        &p,
                        &tps,
                        SequenceParallel::Off,
                    )
                    .unwrap()
                })
                .collect()
        })
        .collect();
    let resident: f64 = chains[0][0]
        .units
        .iter()
        .map(|u| u.costs[0].weight_bytes + u.costs[0].gradient_bytes + u.costs[0].optimizer_bytes)
        .sum();
    for g in &mut topo.groups {
        if r.next(3) == 0 {
            g.peer = None;
        }
        g.memory_bytes = resident * r.of(&[0.2, 0.4, 0.7, 1.0, 3.0]);
    }
    let space = Space {
        tensor_parallel: tps,
        data_parallel: None,
        zero: match r.next(3) {
            0 => vec![Zero::Off, Zero::Parameters],
            _ => vec![r.of(&Zero::ALL)],
        },
        recompute: r.of(&[None, Some(false), Some(true)]),
        stages: None,
        micro_batches: micro,
        global_batch: r.of(&[4, 8]),
        schedule: r.of(&[Schedule::GPipe, Schedule::OneFOneB]),
        overlap_grad_reduce: false,
        max_devices: topo.devices(),
    };
    // Drawn last so the earlier draws stay those of before.
    let mut space = space;
    space.stages = r.of(&[None, None, None, Some(2)]);
    (topo, chains, space)
}

/// Several types: the search against the brute force on one random instance; returns,
/// when it has a plan, the number of types its stages use.
fn compare_mixed(seed: u64) -> Result<Option<usize>, TestCaseError> {
    let (topo, chains, space) = random_mixed(seed);
    let found = plan_mixed(&chains, &topo, &space, None, &Budget::unlimited()).unwrap();
    let oracle = brute_force_mixed(&chains, &topo, &space);
    match (&found.plan, &oracle) {
        (None, None) => {
            let infeasible = matches!(found.status, Status::Infeasible { .. });
            prop_assert!(infeasible, "status {:?}", found.status);
            Ok(None)
        }
        (Some(plan), Some((best, v))) => {
            prop_assert_eq!(found.status.clone(), Status::Optimal);
            let tol = 1e-9 * v.abs();
            prop_assert!(
                (found.value - v).abs() <= tol,
                "mixed search {} vs brute force {} ({:?} vs {:?})",
                found.value,
                v,
                plan.layout,
                best
            );
            prop_assert!((found.bound - found.value).abs() <= tol);
            let b = plan.layout.micro_batch;
            let ci = space.micro_batches.iter().position(|&x| x == b).unwrap();
            let cs: Vec<ChainCosts> = chains.iter().map(|c| c[ci].clone()).collect();
            let s = score_mixed(&cs, &topo, &plan.layout).unwrap();
            prop_assert!(s.fits);
            prop_assert_eq!(s.time_per_sample_ms, found.value);
            let types = plan.accelerators.as_ref().unwrap();
            prop_assert_eq!(types.len(), plan.layout.stages.len());
            let mut used: Vec<&String> = types.iter().collect();
            used.dedup();
            let runs = used.len();
            used.sort();
            used.dedup();
            prop_assert_eq!(runs, used.len(), "a type's stages are one run: {:?}", types);
            Ok(Some(used.len()))
        }
        (a, b) => {
            prop_assert!(
                false,
                "mixed search {:?} vs brute force {:?}",
                a.is_some(),
                b
            );
            Ok(None)
        }
    }
}

/// Some random mixed instances' optima use two types or more.
#[test]
fn mixed_instances_cover_several_types() {
    let plans: Vec<usize> = (0..60).filter_map(|s| compare_mixed(s).unwrap()).collect();
    let several = plans.iter().filter(|&&n| n >= 2).count();
    println!(
        "{} of 60 mixed instances have a plan; {several} use two types or more",
        plans.len()
    );
    assert!(plans.len() >= 20, "{} of 60 feasible", plans.len());
    assert!(several >= 3, "{several} use several types");
}

/// On one type the search over several types is the free search: the same value, bound and
/// status on the random free instances' clusters.
#[test]
fn mixed_search_on_one_type_is_the_free_search() {
    let mut compared = 0;
    for seed in 0..40u64 {
        let (topo, chains, space) = random_mixed(seed);
        let one = MixedTopology {
            groups: vec![topo.groups[0].clone()],
        };
        let space = Space {
            max_devices: one.devices(),
            ..space
        };
        let chains = vec![chains[0].clone()];
        let mixed = plan_mixed(&chains, &one, &space, None, &Budget::unlimited()).unwrap();
        let free = plan_free(
            &chains[0],
            &one.groups[0],
            &space,
            None,
            &Budget::unlimited(),
        )
        .unwrap();
        assert_eq!(mixed.status.kind(), free.status.kind(), "seed {seed}");
        if free.plan.is_some() {
            compared += 1;
            let tol = 1e-9 * free.value;
            assert!(
                (mixed.value - free.value).abs() <= tol,
                "seed {seed}: {} vs {}",
                mixed.value,
                free.value
            );
            assert!((mixed.bound - free.bound).abs() <= tol, "seed {seed}");
        }
    }
    assert!(compared >= 10, "{compared} compared");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn mixed_search_equals_brute_force(seed in any::<u64>()) {
        compare_mixed(seed)?;
    }
}

/// Issue 26's 1F1B memory defect, by hand: a stage of one replica feeding a stage of two
/// (`B = 4`, `b = 1`: `M = 4` global micro-batches, `m_0 = 4`, `m_1 = 2`). Stage 0 runs
/// `K_0 = min(4, 1 + 2) = 3` warm-up forwards before its first backward, so its one replica
/// holds 3 micro-batches — not the uniform layouts' `min(m_0, p − 0) = 2`. With memory for
/// 2.5 stashes the layout was accepted by the old count and is rejected now; the
/// simulator's peak is the 3-stash figure; and the free search, which could take this
/// layout, returns the brute force's optimum, which fits.
#[test]
fn a_stage_feeding_a_wider_one_holds_more_than_p_minus_s() {
    let mut spec = TransformerSpec::new(Style::Gpt2, 2, 64, 4, 64, 1);
    spec.vocab = 64;
    let cs = chains(&spec, DType::Fp32, &[1], &[1]);
    let chain = &cs[0];
    let n = chain.len();
    // Stage 0: every unit but the head, one replica; stage 1: the head, two replicas.
    let sum = |units: std::ops::Range<usize>, f: &dyn Fn(usize) -> f64| units.map(f).sum::<f64>();
    let c = |u: usize| &chain.units[u].costs[0];
    let resident = |r: std::ops::Range<usize>| {
        sum(r, &|u| {
            c(u).weight_bytes + c(u).gradient_bytes + c(u).optimizer_bytes
        })
    };
    let stash = |r: std::ops::Range<usize>| sum(r, &|u| c(u).activation_bytes);
    let (r0, a0) = (resident(0..n - 1), stash(0..n - 1));
    let (r1, a1) = (resident(n - 1..n), stash(n - 1..n));
    let (cluster, _) = cluster_and_profiles("1x4xh100", &[]).expect("cluster");
    let mut topo = Topology::from_cluster(&cluster).expect("topology");
    topo.memory_bytes = r0 + 2.5 * a0;
    assert!(
        a0 > 0.0 && r1 + a1 <= topo.memory_bytes,
        "the head must fit: {r1} + {a1}"
    );
    let layout = Layout {
        stages: vec![
            StageLayout {
                units: 0..n - 1,
                tensor_parallel: 1,
                data_parallel: 1,
                first_device: 0,
            },
            StageLayout {
                units: n - 1..n,
                tensor_parallel: 1,
                data_parallel: 2,
                first_device: 1,
            },
        ],
        micro_batch: 1,
        global_batch: 4,
        zero: Zero::Off,
        schedule: Schedule::OneFOneB,
        recompute: false,
        overlap_grad_reduce: false,
    };
    let score = score_layout(chain, &topo, &layout).unwrap();
    assert_eq!(score.stages[0].in_flight, 3);
    assert_eq!(score.stages[1].in_flight, 1);
    let want = r0 + 3.0 * a0;
    assert!((score.stages[0].memory_bytes - want).abs() <= 1e-9 * want);
    assert!(
        r0 + 2.0 * a0 <= topo.memory_bytes,
        "the old count would have fitted"
    );
    assert!(!score.fits, "3 stashes do not fit memory for 2.5");
    // The simulator's busiest replica of stage 0 holds the same.
    let mut roomy = topo.clone();
    roomy.memory_bytes = f64::MAX;
    let sim = simulate_layout(chain, &roomy, &layout).unwrap();
    let peak = sim
        .lanes
        .iter()
        .filter(|l| l.stage == 0 && l.replica.is_some())
        .map(|l| l.peak_memory_bytes)
        .fold(0.0, f64::max);
    assert!(
        (peak - want).abs() <= 1e-9 * want,
        "simulated {peak} vs {want}"
    );
    // The free search over a space holding this layout: the brute force's optimum, fitting.
    let space = Space {
        tensor_parallel: vec![1],
        data_parallel: None,
        zero: vec![Zero::Off],
        recompute: Some(false),
        stages: None,
        micro_batches: vec![1],
        global_batch: 4,
        schedule: Schedule::OneFOneB,
        overlap_grad_reduce: false,
        max_devices: 3,
    };
    let found = plan_free(&cs, &topo, &space, None, &Budget::unlimited()).unwrap();
    let oracle = brute_force_free(&cs, &topo, &space);
    match (&found.plan, oracle) {
        (Some(plan), Some((_, v))) => {
            assert!(
                (found.value - v).abs() <= 1e-9 * v,
                "{} vs {v}",
                found.value
            );
            assert!(score_layout(chain, &topo, &plan.layout).unwrap().fits);
            assert_ne!(plan.layout.stages, layout.stages);
        }
        (None, None) => {}
        (a, b) => panic!(
            "free search {:?} vs brute force {:?}",
            a.is_some(),
            b.is_some()
        ),
    }
}

/// Uniform layouts on several types: the search against the brute force over every pair
/// `(t, d)` (the uniform space is the union of the mixed space restricted to one pair, each
/// part enumerated by `brute_force_mixed`); returns, when it has a plan, the number of
/// types its stages use.
fn compare_mixed_uniform(seed: u64) -> Result<Option<usize>, TestCaseError> {
    let (topo, chains, space) = random_mixed(seed);
    let found = plan_mixed_uniform(&chains, &topo, &space, &Budget::unlimited()).unwrap();
    let mut oracle: Option<(Layout, f64)> = None;
    for &t in &space.tensor_parallel {
        for d in 1..=topo.devices() {
            let part = Space {
                tensor_parallel: vec![t],
                data_parallel: Some(d),
                ..space.clone()
            };
            if let Some((l, v)) = brute_force_mixed(&chains, &topo, &part) {
                if oracle.as_ref().is_none_or(|o| v < o.1) {
                    oracle = Some((l, v));
                }
            }
        }
    }
    match (&found.plan, &oracle) {
        (None, None) => {
            let infeasible = matches!(found.status, Status::Infeasible { .. });
            prop_assert!(infeasible, "status {:?}", found.status);
            Ok(None)
        }
        (Some(plan), Some((_, v))) => {
            prop_assert_eq!(found.status.clone(), Status::Optimal);
            let tol = 1e-9 * v.abs();
            prop_assert!(
                (found.value - v).abs() <= tol,
                "{} vs brute force {v}",
                found.value
            );
            prop_assert!((found.bound - found.value).abs() <= tol);
            let l = &plan.layout;
            let (t, d) = (l.stages[0].tensor_parallel, l.stages[0].data_parallel);
            prop_assert!(
                l.stages
                    .iter()
                    .all(|s| (s.tensor_parallel, s.data_parallel) == (t, d)),
                "not uniform: {:?}",
                l.stages
            );
            let ci = space
                .micro_batches
                .iter()
                .position(|&x| x == l.micro_batch)
                .unwrap();
            let cs: Vec<ChainCosts> = chains.iter().map(|c| c[ci].clone()).collect();
            let s = score_mixed(&cs, &topo, l).unwrap();
            prop_assert!(s.fits);
            prop_assert_eq!(s.time_per_sample_ms, found.value);
            // Never better than the free layouts of the same space.
            let free = plan_mixed(&chains, &topo, &space, None, &Budget::unlimited()).unwrap();
            prop_assert!(free.value <= found.value * (1.0 + 1e-9));
            let mut types = plan.accelerators.clone().unwrap();
            types.sort();
            types.dedup();
            Ok(Some(types.len()))
        }
        (a, b) => {
            prop_assert!(
                false,
                "uniform mixed search {:?} vs brute force {:?}",
                a.is_some(),
                b
            );
            Ok(None)
        }
    }
}

/// Most random instances have a uniform plan, and some optima use several types.
#[test]
fn mixed_uniform_instances_have_plans_on_several_types() {
    let plans: Vec<usize> = (0..60)
        .filter_map(|s| compare_mixed_uniform(s).unwrap())
        .collect();
    let several = plans.iter().filter(|&&n| n >= 2).count();
    println!(
        "{} of 60 uniform mixed instances have a plan; {several} use two types or more",
        plans.len()
    );
    assert!(plans.len() >= 15, "{} of 60 feasible", plans.len());
    assert!(several >= 3, "{several} use several types");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn mixed_uniform_search_equals_brute_force(seed in any::<u64>()) {
        compare_mixed_uniform(seed)?;
    }
}

/// The least time per sample of the uniform layouts of `space` on `topo` whose devices all
/// lie on its first `k` machines (the cluster's order), by brute force over every pair
/// `(t, d)`: the definition of the mixed sweep's row and target count.
fn mixed_uniform_on_first(
    chains: &[Vec<ChainCosts>],
    topo: &MixedTopology,
    space: &Space,
    k: usize,
) -> Option<f64> {
    let limit = k * topo.groups[0].per_machine;
    let mut best: Option<f64> = None;
    for &t in &space.tensor_parallel {
        for d in 1..=topo.devices() {
            let part = Space {
                tensor_parallel: vec![t],
                data_parallel: Some(d),
                ..space.clone()
            };
            let within =
                |_: &[ChainCosts], l: &Layout, s: &dnnplace::score::parallel::LayoutScore| {
                    l.stages
                        .iter()
                        .all(|st| st.first_device + st.width() <= limit)
                        .then_some(s.time_per_sample_ms)
                };
            if let Some((_, v)) = dnnplace::solve::parallel::brute_force::brute_force_mixed_by(
                chains, topo, &part, within,
            ) {
                best = Some(best.map_or(v, |b: f64| b.min(v)));
            }
        }
    }
    best
}

/// On several types the sweep's row of `k` machines (the cluster's first `k`, in its order;
/// `k` from `sweep_counts(machines)`) is the least time per sample of the uniform layouts
/// lying on those machines, by brute force over the whole cluster's layouts; the fewest
/// machines meeting a target is the least such `k`, proven; a target below the whole
/// cluster's optimum has no answer.
#[test]
fn mixed_sweep_and_fewest_devices_equal_brute_force() {
    use dnnplace::solve::parallel::{sweep_counts, Layouts, ParallelDevices, ParallelProblem};
    let (mut rows_checked, mut answered, mut grew) = (0, 0, 0);
    for seed in 0..30u64 {
        let (topo, chains, mut space) = random_mixed(seed);
        space.stages = None;
        let g = topo.groups[0].per_machine;
        let machines = topo.machines();
        let problem = ParallelProblem {
            chains: chains.clone(),
            devices: ParallelDevices::Mixed(topo.clone()),
            space: space.clone(),
            objective: Objective::TimePerSample,
            layouts: Layouts::Uniform,
        };
        let rows = problem.sweep(&Budget::unlimited(), None).unwrap();
        let counts: Vec<usize> = sweep_counts(machines).iter().map(|k| k * g).collect();
        assert_eq!(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            counts,
            "seed {seed}"
        );
        let oracle: Vec<Option<f64>> = (1..=machines)
            .map(|k| mixed_uniform_on_first(&chains, &topo, &space, k))
            .collect();
        for (n, o) in &rows {
            let want = oracle[n / g - 1];
            match (&o.plan, want) {
                (None, None) => {}
                (Some(plan), Some(v)) => {
                    assert!(
                        (o.value - v).abs() <= 1e-9 * v,
                        "seed {seed} n {n}: {} vs {v}",
                        o.value
                    );
                    assert_eq!(o.status, Status::Optimal, "seed {seed}");
                    let end = plan
                        .layout
                        .stages
                        .iter()
                        .map(|s| s.first_device + s.width())
                        .max();
                    assert!(end.unwrap() <= *n, "seed {seed}");
                }
                (a, b) => panic!(
                    "seed {seed} n {n}: sweep {:?} vs brute force {b:?}",
                    a.is_some()
                ),
            }
            rows_checked += 1;
        }
        let planned: Vec<f64> = rows
            .iter()
            .filter_map(|r| r.1.plan.as_ref().map(|_| r.1.value))
            .collect();
        grew += usize::from(planned.windows(2).any(|w| w[1] < w[0] * (1.0 - 1e-9)));
        // The fewest machines for a target: an oracle value of some count.
        let Some(target) = oracle.iter().flatten().copied().reduce(|a, b| {
            if seed % 2 == 0 {
                a.max(b)
            } else {
                a.min(b)
            }
        }) else {
            continue;
        };
        let found = problem
            .fewest_devices(target, &Budget::unlimited())
            .unwrap();
        let least = oracle
            .iter()
            .position(|o| o.is_some_and(|v| v <= target))
            .unwrap()
            + 1;
        assert_eq!(found.devices, Some(least * g), "seed {seed}");
        assert!(found.proven && found.outcome.value <= target, "seed {seed}");
        let none = problem
            .fewest_devices(
                target.min(oracle[machines - 1].unwrap()) * 0.999,
                &Budget::unlimited(),
            )
            .unwrap();
        assert_eq!(none.devices, None, "seed {seed}");
        answered += 1;
    }
    println!(
        "{rows_checked} sweep rows, {answered} targets, {grew} sweeps improving with more machines"
    );
    assert!(
        rows_checked >= 40 && answered >= 10 && grew >= 3,
        "{rows_checked} {answered} {grew}"
    );
}

/// A tiny random instance of one accelerator type for the free sweep: one or two layers,
/// TP 1, 2 (and 4), 1–3 machines of 1, 2 or 4 devices (at most 8), memory that binds at
/// times, every ZeRO choice and schedule of the free space.
fn tiny_one_type(seed: u64) -> (Topology, Vec<ChainCosts>, Space) {
    let mut r = Pick(seed ^ 0x5ee9_f4ee);
    let (mut spec, dtype) = random_spec(&mut r);
    spec.layers = 1 + r.next(2) as usize;
    let tps: Vec<usize> = valid_tp_degrees(&spec, 4)
        .into_iter()
        .filter(|t| [1, 2, 4].contains(t))
        .collect();
    let micro: Vec<usize> = r.of(&[&[1usize][..], &[1, 2]]).to_vec();
    let cs = chains(&spec, dtype, &tps, &micro);
    let resident: f64 = cs[0]
        .units
        .iter()
        .map(|u| u.costs[0].weight_bytes + u.costs[0].gradient_bytes + u.costs[0].optimizer_bytes)
        .sum();
    let per = r.of(&[1usize, 2, 4]);
    let machines = 1 + r.next(if per == 4 { 2 } else { 3 }) as usize;
    let (cluster, _) =
        cluster_and_profiles(&format!("{machines}x{per}xh100"), &[]).expect("cluster");
    let mut topo = Topology::from_cluster(&cluster).expect("topology");
    if r.next(3) == 0 {
        topo.peer = None;
    }
    topo.memory_bytes = resident * r.of(&[0.2, 0.4, 0.7, 1.0, 3.0]);
    let space = Space {
        tensor_parallel: tps,
        data_parallel: None,
        zero: match r.next(3) {
            0 => vec![Zero::Off, Zero::Parameters],
            _ => vec![r.of(&Zero::ALL)],
        },
        recompute: r.of(&[None, Some(false), Some(true)]),
        stages: None,
        micro_batches: micro,
        global_batch: r.of(&[4, 8]),
        schedule: r.of(&[Schedule::GPipe, Schedule::OneFOneB]),
        overlap_grad_reduce: false,
        max_devices: topo.devices(),
    };
    (topo, cs, space)
}

/// The free problem of `seed` (even: one type, [`tiny_one_type`]; odd: two or three types,
/// [`random_mixed`]) under `objective`.
fn free_problem(seed: u64, objective: Objective) -> dnnplace::solve::parallel::ParallelProblem {
    use dnnplace::solve::parallel::{Layouts, ParallelDevices, ParallelProblem};
    let (chains, devices, space) = if seed.is_multiple_of(2) {
        let (topo, cs, space) = tiny_one_type(seed);
        (vec![cs], ParallelDevices::One(topo), space)
    } else {
        let (topo, chains, mut space) = random_mixed(seed);
        space.stages = None;
        (chains, ParallelDevices::Mixed(topo), space)
    };
    ParallelProblem {
        chains,
        devices,
        space,
        objective,
        layouts: Layouts::Free,
    }
}

/// The oracle of the free sweep and target, right by construction: every free layout of
/// the *whole* cluster (the brute force of [`brute_force_free_by`] on one type,
/// [`dnnplace::solve::parallel::brute_force::brute_force_mixed_by`] on several), valued by
/// the evaluator's time per sample or the simulator's iteration, filed under the last
/// device it uses; `best[n]` is the least value of the layouts lying on the first `n`
/// devices (the cluster's order), `None` when none fits there.
fn free_oracle_by_devices(
    problem: &dnnplace::solve::parallel::ParallelProblem,
) -> Vec<Option<f64>> {
    use dnnplace::simulate::parallel::simulate_mixed;
    use dnnplace::solve::parallel::brute_force::{brute_force_free_by, brute_force_mixed_by};
    use dnnplace::solve::parallel::ParallelDevices;
    let all = match &problem.devices {
        ParallelDevices::One(t) => t.devices(),
        ParallelDevices::Mixed(t) => t.devices(),
    };
    let mut at_end: Vec<Option<f64>> = vec![None; all + 1];
    let iteration = problem.objective == Objective::Iteration;
    let mut file = |l: &Layout, v: f64| {
        let end = l
            .stages
            .iter()
            .map(|st| st.first_device + st.width())
            .max()
            .unwrap();
        let slot = &mut at_end[end];
        *slot = Some(slot.map_or(v, |b: f64| b.min(v)));
        Some(v)
    };
    match &problem.devices {
        ParallelDevices::One(topo) => {
            brute_force_free_by(&problem.chains[0], topo, &problem.space, |c, l, s| {
                let v = if iteration {
                    simulate_layout(c, topo, l).ok()?.iteration_ms
                } else {
                    s.time_per_sample_ms
                };
                file(l, v)
            });
        }
        ParallelDevices::Mixed(topo) => {
            brute_force_mixed_by(&problem.chains, topo, &problem.space, |cs, l, s| {
                let v = if iteration {
                    simulate_mixed(cs, topo, l).ok()?.iteration_ms
                } else {
                    s.time_per_sample_ms
                };
                file(l, v)
            });
        }
    }
    let mut best: Option<f64> = None;
    at_end
        .into_iter()
        .map(|v| {
            if let Some(v) = v {
                best = Some(best.map_or(v, |b| b.min(v)));
            }
            best
        })
        .collect()
}

/// The free sweep and fewest-devices search (`--free --sweep`, `--free --target-tps`) on
/// one and on several types, time per sample, against the brute force: every sweep row is
/// the least value of the free layouts lying on its first `n` devices, proven (bound =
/// value, gap 0); every free row is no worse than the uniform row of the same count (the
/// uniform space is part of the free one); the fewest count meeting a target is the least
/// count whose brute-force optimum meets it, proven, with no open count; a target below the
/// whole cluster's optimum has no answer, proven.
#[test]
fn free_sweep_and_fewest_devices_equal_brute_force() {
    use dnnplace::solve::parallel::{sweep_counts, Layouts};
    let (mut rows_checked, mut answered, mut below_uniform, mut types) = (0, 0, 0, [0, 0]);
    for seed in 0..100u64 {
        let problem = free_problem(seed, Objective::TimePerSample);
        let step = problem.count_step();
        let oracle = free_oracle_by_devices(&problem);
        let all = oracle.len() - 1;
        let rows = problem.sweep(&Budget::unlimited(), None).unwrap();
        let counts: Vec<usize> = sweep_counts(all / step).iter().map(|k| k * step).collect();
        assert_eq!(
            rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            counts,
            "seed {seed}"
        );
        let mut uniform = problem.clone();
        uniform.layouts = Layouts::Uniform;
        let uniform_rows = uniform.sweep(&Budget::unlimited(), None).unwrap();
        for ((n, o), (_, u)) in rows.iter().zip(&uniform_rows) {
            assert!(o.free, "seed {seed}");
            match (&o.plan, oracle[*n]) {
                (None, None) => {}
                (Some(_), Some(v)) => {
                    assert!(
                        (o.value - v).abs() <= 1e-9 * v,
                        "seed {seed} n {n}: {} vs brute force {v}",
                        o.value
                    );
                    assert_eq!(o.status, Status::Optimal, "seed {seed} n {n}");
                    assert!(o.bound <= o.value && o.gap() == 0.0, "seed {seed} n {n}");
                    types[seed as usize % 2] += 1;
                }
                (a, b) => panic!(
                    "seed {seed} n {n}: sweep {:?} vs brute force {b:?}",
                    a.is_some()
                ),
            }
            if u.plan.is_some() {
                assert!(
                    o.plan.is_some(),
                    "seed {seed} n {n}: uniform has a plan, free not"
                );
                assert!(
                    o.value <= u.value * (1.0 + 1e-9),
                    "seed {seed} n {n}: free {} above uniform {}",
                    o.value,
                    u.value
                );
                below_uniform += usize::from(o.value < u.value * (1.0 - 1e-9));
            }
            rows_checked += 1;
        }
        // The fewest devices (whole machines on several types) for a target: the optimum
        // of some count, the largest or the least.
        let by_count: Vec<Option<f64>> = (1..=all / step).map(|k| oracle[k * step]).collect();
        let Some(target) = by_count.iter().flatten().copied().reduce(|a, b| {
            if seed % 4 < 2 {
                a.max(b)
            } else {
                a.min(b)
            }
        }) else {
            continue;
        };
        let found = problem
            .fewest_devices(target, &Budget::unlimited())
            .unwrap();
        let least = by_count
            .iter()
            .position(|o| o.is_some_and(|v| v <= target))
            .unwrap()
            + 1;
        assert_eq!(found.devices, Some(least * step), "seed {seed}");
        assert!(found.outcome.value <= target, "seed {seed}");
        assert!(found.proven && found.open.is_none(), "seed {seed}");
        let whole = oracle[all].unwrap();
        let none = problem
            .fewest_devices(whole * 0.999, &Budget::unlimited())
            .unwrap();
        assert_eq!(none.devices, None, "seed {seed}");
        assert!(none.proven && none.open.is_none(), "seed {seed}");
        answered += 1;
    }
    println!(
        "{rows_checked} rows ({} one type, {} several with a plan), {answered} targets, {below_uniform} rows where free beats uniform",
        types[0], types[1]
    );
    assert!(
        rows_checked >= 80
            && answered >= 15
            && below_uniform >= 3
            && types.iter().all(|&t| t >= 10),
        "{rows_checked} {answered} {below_uniform} {types:?}"
    );
}

/// The free sweep under the iteration objective (`--free --objective iteration --sweep`:
/// each row the simulator's search on one type or several): every row's bound is at most
/// the brute force's least simulated iteration of the layouts on its first `n` devices,
/// its value at least that (a simulated layout), equal when it says optimal.
#[test]
fn free_iteration_sweep_against_brute_force() {
    use dnnplace::solve::parallel::{Answer, Goal};
    let (mut rows_checked, mut optimal) = (0, 0);
    for seed in 0..40u64 {
        let problem = free_problem(seed, Objective::Iteration);
        let oracle = free_oracle_by_devices(&problem);
        let Answer::Sweep(rows) =
            dnnplace::simulate::parallel::answer(&problem, Goal::Sweep, &Budget::unlimited())
                .unwrap()
        else {
            panic!("seed {seed}: not a sweep");
        };
        for (n, o) in &rows {
            match (&o.plan, oracle[*n]) {
                (None, None) => {}
                (Some(_), Some(v)) => {
                    assert!(
                        o.bound <= v * (1.0 + 1e-9),
                        "seed {seed} n {n}: bound {} > {v}",
                        o.bound
                    );
                    assert!(
                        o.value >= v * (1.0 - 1e-9),
                        "seed {seed} n {n}: value {} < {v}",
                        o.value
                    );
                    if o.status == Status::Optimal {
                        assert!((o.value - v).abs() <= 1e-9 * v, "seed {seed} n {n}");
                        optimal += 1;
                    }
                }
                (a, b) => panic!(
                    "seed {seed} n {n}: sweep {:?} vs brute force {b:?}",
                    a.is_some()
                ),
            }
            rows_checked += 1;
        }
    }
    println!("{rows_checked} rows, {optimal} optimal");
    assert!(
        rows_checked >= 30 && optimal >= 10,
        "{rows_checked} {optimal}"
    );
}

/// The proof of `fewest_over` on searches that stop (synthetic outcomes: the optimum of
/// count `k` is `10/k`, proven at some counts, not at others): the answer is proven iff the
/// count just below it was shown by its bound to miss; otherwise that count is the open
/// one, with its value and bound; with no answer, the whole count is open iff its bound does
/// not exclude the target.
#[test]
fn fewest_over_names_the_open_count() {
    use dnnplace::solve::parallel::{fewest_over, OpenCount, ParallelOutcome, Valuation};
    use dnnplace::solve::StopReason;
    let outcome = |k: usize, stopped: bool| {
        let v = 10.0 / k as f64;
        ParallelOutcome {
            plan: None,
            value: v,
            bound: if stopped { v / 4.0 } else { v },
            status: if stopped {
                Status::Feasible {
                    reason: StopReason::TimeLimit,
                }
            } else {
                Status::Optimal
            },
            configs_solved: 0,
            configs: 0,
            elapsed_s: 0.0,
            free: true,
            valuation: Valuation::Model,
        }
    };
    for steps in 1..=12usize {
        for stopped_mask in 0u32..(1 << steps.min(12)) {
            let stopped = |k: usize| stopped_mask >> (k - 1) & 1 == 1;
            for target in [0.5, 1.0, 2.5, 3.0, 10.0] {
                let found = fewest_over(steps, 2, target, &Budget::unlimited(), |n, _| {
                    Ok(outcome(n / 2, stopped(n / 2)))
                })
                .unwrap();
                let least = (1..=steps).find(|&k| 10.0 / k as f64 <= target);
                assert_eq!(found.devices, least.map(|k| 2 * k), "{steps} {target}");
                let open_k = match least {
                    Some(1) => None,
                    Some(k) => Some(k - 1),
                    None => Some(steps),
                }
                .filter(|&k| outcome(k, stopped(k)).bound <= target);
                let want = open_k.map(|k| OpenCount {
                    devices: 2 * k,
                    value: 10.0 / k as f64,
                    bound: outcome(k, stopped(k)).bound,
                });
                assert_eq!(found.open, want, "{steps} {target} {stopped_mask:b}");
                assert_eq!(found.proven, want.is_none());
            }
        }
    }
}

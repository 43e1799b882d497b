//! 3D layouts run by the simulator (`dnnplace::simulate::parallel`) against the planned
//! figures of the independent evaluator (`score::parallel`), on small random transformers
//! and clusters (the instances of `tests/parallel.rs`): every ZeRO stage, recomputation,
//! GPipe and 1F1B, TP and DP > 1, with and without a peer link.
//!
//! What is exact and what is a bound (module doc of `simulate::parallel`):
//! - stages with the same forward and backward times and DP sync: simulated iteration =
//!   planned iteration, and steady state per sample + sync / B = planned time per sample;
//! - GPipe: the simulated pipeline is the flow shop's closed form, ≥ the planned pipeline
//!   term `Σ T_s + (m − 1) max T_s`;
//! - always: the bottleneck's busy time per sample = planned time per sample, each
//!   replica's peak memory = the planned memory per device, and
//!   `T_pipe + sync_0 ≤ T ≤ T_pipe + max sync`.

mod common;

use common::Pick;
use dnnplace::costmodel::operators::DType;
use dnnplace::costmodel::parallel::{transformer_chain, valid_tp_degrees, with_batch};
use dnnplace::costmodel::transformer::{Style, TransformerSpec};
use dnnplace::io::cluster_resolve::cluster_and_profiles;
use dnnplace::model::parallel::{
    ChainCosts, CutTransfers, Layout, StageLayout, Topology, Uniform, Zero,
};
use dnnplace::model::profiles::find_profile;
use dnnplace::model::schedule::Schedule;
use dnnplace::simulate::parallel::{simulate_layout, LayoutSimulation};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-12)
}

/// A random instance: the chain, the cluster and a layout of it.
struct Instance {
    chain: ChainCosts,
    topo: Topology,
    layout: Layout,
}

/// A random transformer, cluster and layout; `uniform` makes every unit a copy of one block
/// with nothing crossing the cuts, and every stage the same number of units.
fn instance(seed: u64, uniform: bool) -> Option<Instance> {
    let mut r = Pick(seed);
    let style = r.of(&[Style::Bert, Style::Gpt2, Style::Llama]);
    let heads = r.of(&[2, 4]);
    let hidden = heads * r.of(&[8, 16, 32]);
    let layers = 1 + r.next(4) as usize;
    let mut spec = TransformerSpec::new(style, layers, hidden, heads, r.of(&[8, 16, 64]), 1);
    spec.vocab = r.of(&[64, 1000]);
    let dtype = r.of(&[DType::Fp32, DType::Bf16]);
    let per = r.of(&[1usize, 2, 4]);
    let machines = 1 + r.next(3) as usize;
    let (cluster, _) = cluster_and_profiles(&format!("{machines}x{per}xh100"), &[]).ok()?;
    let mut topo = Topology::from_cluster(&cluster).ok()?;
    if r.next(3) == 0 {
        topo.peer = None;
    }
    let tps: Vec<usize> = valid_tp_degrees(&spec, per);
    let t = r.of(&tps);
    let b = r.of(&[1usize, 2]);
    let h100 = find_profile("h100", &[]).unwrap();
    let mut chain = transformer_chain(&with_batch(&spec, b), dtype, &h100, &tps).ok()?;
    let p_max = (topo.devices() / t).min(4);
    let p = 1 + r.next(p_max as u64) as usize;
    let d = 1 + r.next((topo.devices() / (t * p)) as u64) as usize;
    let cuts: Vec<usize> = if uniform {
        let k = 1 + r.next(2) as usize;
        let block = chain.units[1].clone();
        chain.units = (0..p * k).map(|_| block.clone()).collect();
        chain.cuts = vec![CutTransfers::default(); p * k + 1];
        (1..p).map(|s| s * k).collect()
    } else {
        if chain.len() < p {
            return None;
        }
        let mut all: Vec<usize> = (1..chain.len()).collect();
        let mut cuts = Vec::new();
        for _ in 1..p {
            cuts.push(all.remove(r.next(all.len() as u64) as usize));
        }
        cuts.sort_unstable();
        cuts
    };
    let m = 1 + r.next(6) as usize;
    let cfg = Uniform {
        micro_batch: b,
        tensor_parallel: t,
        data_parallel: d,
        zero: r.of(&Zero::ALL),
        recompute: r.next(2) == 0,
        stages: p,
    };
    let schedule = r.of(&[Schedule::GPipe, Schedule::OneFOneB]);
    let layout = Layout::uniform(chain.len(), &cuts, &cfg, m * d * b, schedule);
    Some(Instance {
        chain,
        topo,
        layout,
    })
}

fn run(x: &Instance) -> LayoutSimulation {
    simulate_layout(&x.chain, &x.topo, &x.layout).expect("a valid layout simulates")
}

/// Uniform stages: the simulated iteration is the planned one, to 1e-9. A copy of one block
/// per unit and nothing crossing the cuts still leaves the stages unequal when their
/// replicas span different links (the DP sync, ZeRO-3's gathers): those instances must
/// simulate at or below the plan (the syncs of the stages that drain first overlap the
/// drain), and are counted apart.
#[test]
fn uniform_stages_simulate_to_the_planned_iteration() {
    let (mut exact, mut deep, mut steady, mut unequal) = (0, 0, 0, 0);
    for seed in 0..400 {
        let Some(x) = instance(seed, true) else {
            continue;
        };
        let sim = run(&x);
        let planned = sim.planned.iteration_ms.expect("one d");
        let st = &sim.planned.stages[0];
        let equal = sim
            .planned
            .stages
            .iter()
            .all(|s| s.micro_batch_ms == st.micro_batch_ms && s.dp_sync_ms == st.dp_sync_ms)
            && sim.pass_ms.iter().all(|&x| x == sim.pass_ms[0]);
        if !equal {
            assert!(sim.iteration_ms <= planned * (1.0 + 1e-9), "seed {seed}");
            unequal += 1;
            continue;
        }
        assert!(
            close(sim.iteration_ms, planned),
            "seed {seed}: simulated {} ms, planned {planned} ms ({:?})",
            sim.iteration_ms,
            x.layout
        );
        // (m + p − 1)(f + b) + sync, from the scorer's stage time.
        let (p, m) = (x.layout.stages.len(), sim.micro_batches);
        let by_hand = (m + p - 1) as f64 * st.micro_batch_ms + st.dp_sync_ms;
        assert!(close(sim.iteration_ms, by_hand), "seed {seed}");
        if let Some(step) = sim.steady_per_sample_ms {
            let per_sample = step + st.dp_sync_ms / x.layout.global_batch as f64;
            assert!(
                close(per_sample, sim.planned.time_per_sample_ms),
                "seed {seed}: steady {per_sample} vs planned {}",
                sim.planned.time_per_sample_ms
            );
            steady += 1;
        }
        exact += 1;
        deep += usize::from(p > 1 && x.layout.stages[0].width() > 1);
    }
    println!("{exact} uniform instances with equal stages ({deep} with p > 1 and t·d > 1, {steady} with a steady state), {unequal} with unequal syncs or gathers");
    assert!(
        exact >= 200 && deep >= 30 && steady >= 100,
        "{exact} {deep} {steady}"
    );
}

/// GPipe is a flow shop of identical jobs, forward then backward: the simulated makespan
/// and every stage's sync end follow the closed form (module doc of `simulate::parallel`),
/// computed here from the pass times, whose sums are the scorer's stage times.
#[test]
fn gpipe_follows_the_flow_shop_closed_form() {
    let (mut checked, mut strict) = (0, 0);
    for seed in 0..400 {
        let Some(mut x) = instance(seed, false) else {
            continue;
        };
        x.layout.schedule = Schedule::GPipe;
        let sim = run(&x);
        let m = sim.micro_batches as f64;
        let p = x.layout.stages.len();
        for (s, (&(f, b), sc)) in sim.pass_ms.iter().zip(&sim.planned.stages).enumerate() {
            assert!(close(f + b, sc.micro_batch_ms), "seed {seed} stage {s}");
        }
        let f: Vec<f64> = sim.pass_ms.iter().map(|x| x.0).collect();
        let b: Vec<f64> = sim.pass_ms.iter().map(|x| x.1).collect();
        let max = |xs: &[f64]| xs.iter().copied().fold(0.0, f64::max);
        let forward = f.iter().sum::<f64>() + (m - 1.0) * max(&f);
        let last_backward =
            |s: usize| forward + b[s..].iter().sum::<f64>() + (m - 1.0) * max(&b[s..]);
        assert!(
            close(sim.pipeline_ms, last_backward(0)),
            "seed {seed}: simulated {} vs closed form {}",
            sim.pipeline_ms,
            last_backward(0)
        );
        let with_sync = (0..p)
            .map(|s| last_backward(s) + sim.planned.stages[s].dp_sync_ms)
            .fold(0.0, f64::max);
        assert!(close(sim.iteration_ms, with_sync), "seed {seed}");
        let t: Vec<f64> = sim
            .planned
            .stages
            .iter()
            .map(|s| s.micro_batch_ms)
            .collect();
        let formula = t.iter().sum::<f64>() + (m - 1.0) * max(&t);
        assert!(sim.pipeline_ms >= formula * (1.0 - 1e-12), "seed {seed}");
        strict += usize::from(sim.pipeline_ms > formula * (1.0 + 1e-9));
        checked += 1;
    }
    println!("{checked} GPipe instances, {strict} above the planned pipeline term");
    assert!(checked >= 250, "{checked}");
}

/// With the DP sync overlapped with backward (`--overlap-grad-reduce`): equal stages
/// simulate to the scorer's closed form `(m + p − 1)(f + b) + max(0, sync − b)`, computed
/// here from the pass times; unequal ones never above the planned figure, and never above
/// the same layout without the overlap.
#[test]
fn overlapped_syncs_simulate_to_the_planned_iteration() {
    let (mut exact, mut hidden, mut exposed, mut unequal) = (0, 0, 0, 0);
    for seed in 0..400 {
        let Some(mut x) = instance(seed, true) else {
            continue;
        };
        let after = run(&x).iteration_ms;
        x.layout.overlap_grad_reduce = true;
        let sim = run(&x);
        let planned = sim.planned.iteration_ms.expect("one d");
        assert!(sim.iteration_ms <= after * (1.0 + 1e-12), "seed {seed}");
        let st = &sim.planned.stages[0];
        let equal = sim
            .planned
            .stages
            .iter()
            .all(|s| s.micro_batch_ms == st.micro_batch_ms && s.dp_sync_ms == st.dp_sync_ms)
            && sim.pass_ms.iter().all(|&x| x == sim.pass_ms[0]);
        if !equal {
            assert!(sim.iteration_ms <= planned * (1.0 + 1e-9), "seed {seed}");
            unequal += 1;
            continue;
        }
        let (p, m) = (x.layout.stages.len(), sim.micro_batches);
        let (f, b) = sim.pass_ms[0];
        let by_hand = (m + p - 1) as f64 * (f + b) + (st.dp_sync_ms - b).max(0.0);
        assert!(
            close(sim.iteration_ms, by_hand) && close(planned, by_hand),
            "seed {seed}: simulated {} ms, planned {planned} ms, by hand {by_hand} ms",
            sim.iteration_ms
        );
        if st.dp_sync_ms > b {
            exposed += 1;
        } else if st.dp_sync_ms > 0.0 {
            hidden += 1;
        }
        exact += 1;
    }
    println!("{exact} equal instances ({exposed} with the sync longer than the backward, {hidden} hidden), {unequal} unequal");
    assert!(
        exact >= 200 && exposed >= 5 && hidden >= 10,
        "{exact} {exposed} {hidden}"
    );
}

/// GPipe with the sync overlapped: stage `s`'s sync starts with its last backward, so the
/// iteration is `max_s max(B_s, B_s − b_s + sync_s)` with `B_s` the flow shop's end of
/// stage `s`'s last backward (computed here from the pass times).
#[test]
fn gpipe_with_overlapped_syncs_follows_the_closed_form() {
    let mut checked = 0;
    for seed in 0..400 {
        let Some(mut x) = instance(seed, false) else {
            continue;
        };
        x.layout.schedule = Schedule::GPipe;
        x.layout.overlap_grad_reduce = true;
        let sim = run(&x);
        let m = sim.micro_batches as f64;
        let f: Vec<f64> = sim.pass_ms.iter().map(|x| x.0).collect();
        let b: Vec<f64> = sim.pass_ms.iter().map(|x| x.1).collect();
        let max = |xs: &[f64]| xs.iter().copied().fold(0.0, f64::max);
        let forward = f.iter().sum::<f64>() + (m - 1.0) * max(&f);
        let last_backward =
            |s: usize| forward + b[s..].iter().sum::<f64>() + (m - 1.0) * max(&b[s..]);
        let end = (0..b.len())
            .map(|s| {
                last_backward(s).max(last_backward(s) - b[s] + sim.planned.stages[s].dp_sync_ms)
            })
            .fold(0.0, f64::max);
        assert!(
            close(sim.iteration_ms, end),
            "seed {seed}: simulated {} vs closed form {end}",
            sim.iteration_ms
        );
        checked += 1;
    }
    assert!(checked >= 250, "{checked}");
}

/// Every layout, both schedules: busy time per sample = planned time per sample, peak
/// memory of every replica = planned memory per device, and the sync between its bounds.
#[test]
fn every_layout_meets_its_planned_figures() {
    let (mut checked, mut above, mut below) = (0, [0; 2], [0; 2]);
    for seed in 0..400 {
        let Some(x) = instance(seed, false) else {
            continue;
        };
        let sim = run(&x);
        assert!(
            close(sim.busy_time_per_sample_ms, sim.planned.time_per_sample_ms),
            "seed {seed}: busy {} vs planned {}",
            sim.busy_time_per_sample_ms,
            sim.planned.time_per_sample_ms
        );
        for lane in sim.lanes.iter().filter(|l| l.replica.is_some()) {
            let planned = sim.planned.stages[lane.stage].memory_bytes;
            assert!(
                close(lane.peak_memory_bytes, planned),
                "seed {seed} stage {}: simulated peak {} vs planned {planned} ({})",
                lane.stage,
                lane.peak_memory_bytes,
                x.layout.schedule
            );
        }
        let syncs: Vec<f64> = sim.planned.stages.iter().map(|s| s.dp_sync_ms).collect();
        let max_sync = syncs.iter().copied().fold(0.0, f64::max);
        assert!(sim.iteration_ms >= (sim.pipeline_ms + syncs[0]) * (1.0 - 1e-12));
        assert!(sim.iteration_ms <= (sim.pipeline_ms + max_sync) * (1.0 + 1e-12));
        // Lane k: its forwards wait for stages before it, its m tasks run one at a time,
        // the last backward still runs down to stage 0.
        let m = sim.micro_batches as f64;
        for k in 0..x.layout.stages.len() {
            let head: f64 = sim.pass_ms[..k].iter().map(|x| x.0 + x.1).sum();
            let bound = head + m * sim.planned.stages[k].micro_batch_ms;
            assert!(
                sim.pipeline_ms >= bound * (1.0 - 1e-12),
                "seed {seed} lane {k}"
            );
        }
        let planned = sim.planned.iteration_ms.unwrap();
        let k = usize::from(x.layout.schedule == Schedule::OneFOneB);
        above[k] += usize::from(sim.iteration_ms > planned * (1.0 + 1e-9));
        below[k] += usize::from(sim.iteration_ms < planned * (1.0 - 1e-9));
        checked += 1;
    }
    println!("{checked} instances: simulated iteration above the planned one in {} GPipe and {} 1F1B, below in {} GPipe and {} 1F1B", above[0], above[1], below[0], below[1]);
    assert!(checked >= 250, "{checked}");
}

/// A random free layout (`--free`: each stage its own `t` and `d`, packed from device 0)
/// of a random transformer; `balanced`: every unit a copy of one block with nothing crossing
/// the cuts, one `t`, stage `s` holding `k·d_s` units and no ZeRO-3 (whose gathers depend on
/// `d`), so `f_s/d_s` and `b_s/d_s` are the same for every stage.
fn free_instance(seed: u64, balanced: bool) -> Option<Instance> {
    let mut r = Pick(seed ^ 0x5eed_f4ee);
    let style = r.of(&[Style::Bert, Style::Gpt2, Style::Llama]);
    let heads = r.of(&[2, 4]);
    let hidden = heads * r.of(&[8, 16, 32]);
    let layers = 1 + r.next(4) as usize;
    let mut spec = TransformerSpec::new(style, layers, hidden, heads, r.of(&[8, 16, 64]), 1);
    spec.vocab = r.of(&[64, 1000]);
    let dtype = r.of(&[DType::Fp32, DType::Bf16]);
    let per = r.of(&[1usize, 2, 4]);
    let machines = 1 + r.next(3) as usize;
    let (cluster, _) = cluster_and_profiles(&format!("{machines}x{per}xh100"), &[]).ok()?;
    let mut topo = Topology::from_cluster(&cluster).ok()?;
    if r.next(3) == 0 {
        topo.peer = None;
    }
    let tps: Vec<usize> = valid_tp_degrees(&spec, per);
    let b = r.of(&[1usize, 2]);
    let h100 = find_profile("h100", &[]).unwrap();
    let mut chain = transformer_chain(&with_batch(&spec, b), dtype, &h100, &tps).ok()?;
    let p = 1 + r.next(4) as usize;
    let t_one = r.of(&tps);
    let (mut ts, mut ds) = (Vec::new(), Vec::new());
    for _ in 0..p {
        ts.push(if balanced { t_one } else { r.of(&tps) });
        ds.push(1 + r.next(3) as usize);
    }
    let mut stages = Vec::new();
    let mut bounds = vec![0];
    if balanced {
        let k = 1 + r.next(2) as usize;
        let block = chain.units[1].clone();
        let units: usize = ds.iter().map(|d| k * d).sum();
        chain.units = (0..units).map(|_| block.clone()).collect();
        chain.cuts = vec![CutTransfers::default(); units + 1];
        for &d in &ds {
            bounds.push(bounds.last().unwrap() + k * d);
        }
    } else {
        if chain.len() < p {
            return None;
        }
        let mut all: Vec<usize> = (1..chain.len()).collect();
        let mut cuts = Vec::new();
        for _ in 1..p {
            cuts.push(all.remove(r.next(all.len() as u64) as usize));
        }
        cuts.sort_unstable();
        bounds.extend(cuts);
        bounds.push(chain.len());
    }
    let mut next: usize = 0;
    for s in 0..p {
        let first = next.div_ceil(ts[s]) * ts[s];
        stages.push(StageLayout {
            units: bounds[s]..bounds[s + 1],
            tensor_parallel: ts[s],
            data_parallel: ds[s],
            first_device: first,
        });
        next = first + ts[s] * ds[s];
    }
    if next > topo.devices() {
        return None;
    }
    let lcm = ds.iter().fold(1, |l, &d| num_lcm(l, d));
    let global_batch = lcm * (1 + r.next(4) as usize) * b;
    let zero = if balanced {
        r.of(&[Zero::Off, Zero::Optimizer, Zero::Gradients])
    } else {
        r.of(&Zero::ALL)
    };
    let layout = Layout {
        stages,
        micro_batch: b,
        global_batch,
        zero,
        schedule: r.of(&[Schedule::GPipe, Schedule::OneFOneB]),
        recompute: r.next(2) == 0,
        overlap_grad_reduce: false,
    };
    Some(Instance {
        chain,
        topo,
        layout,
    })
}

fn num_lcm(a: usize, b: usize) -> usize {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x * b
}

/// Free layouts, both schedules: busy time per sample = planned time per sample; each
/// replica runs `m_s = B/(d_s·b)` micro-batches; the sync between its bounds; every
/// replica's peak memory is resident + `n_s` stashes (+ the recomputed unit's working
/// stash), `n_s` = `m_s` under GPipe and `min(m_s, ⌈Σ_{j≥s} d_j / d_s⌉)` for 1F1B's busiest
/// replica (a closed form computed here from the chain), which is the scorer's memory per
/// device and in-flight count under both schedules; counted: the stages where the uniform
/// layouts' count `min(m_s, p − s)` would have been below (or above) it.
#[test]
fn free_layouts_meet_their_planned_figures() {
    let (mut checked, mut mixed, mut more, mut less) = (0, 0, 0, 0);
    let (mut above, mut below, mut worst) = ([0; 2], [0; 2], [(1.0f64, 1.0f64); 2]);
    for seed in 0..1500 {
        let Some(x) = free_instance(seed, false) else {
            continue;
        };
        let sim = run(&x);
        assert!(
            close(sim.busy_time_per_sample_ms, sim.planned.time_per_sample_ms),
            "seed {seed}: busy {} vs planned {}",
            sim.busy_time_per_sample_ms,
            sim.planned.time_per_sample_ms
        );
        let p = x.layout.stages.len();
        let big_m = x.layout.global_batch / x.layout.micro_batch;
        for (s, st) in x.layout.stages.iter().enumerate() {
            let sc = &sim.planned.stages[s];
            let replicas: Vec<_> = sim
                .lanes
                .iter()
                .enumerate()
                .filter(|(_, l)| l.stage == s && l.replica.is_some())
                .collect();
            assert_eq!(replicas.len(), st.data_parallel, "seed {seed}");
            for &(k, _) in &replicas {
                let ran = sim
                    .tasks
                    .iter()
                    .filter(|t| sim.lane_of[t.piece] == k)
                    .count();
                assert_eq!(ran, 2 * big_m / st.data_parallel, "seed {seed} stage {s}");
            }
            // Independent closed form of the busiest replica's memory.
            let ti = x.chain.tp_index(st.tensor_parallel).unwrap();
            let costs: Vec<_> = st
                .units
                .clone()
                .map(|u| &x.chain.units[u].costs[ti])
                .collect();
            let (stash, working) = if x.layout.recompute {
                (
                    costs.iter().map(|c| c.checkpoint_bytes).sum::<f64>(),
                    costs.iter().map(|c| c.activation_bytes).fold(0.0, f64::max),
                )
            } else {
                (costs.iter().map(|c| c.activation_bytes).sum::<f64>(), 0.0)
            };
            let m_s = big_m / st.data_parallel;
            let n = match x.layout.schedule {
                Schedule::GPipe => m_s,
                _ => {
                    let wide: usize = x.layout.stages[s..].iter().map(|y| y.data_parallel).sum();
                    m_s.min(wide.div_ceil(st.data_parallel))
                }
            };
            let resident = sc.weight_bytes + sc.gradient_bytes + sc.optimizer_bytes;
            let want = resident + n as f64 * stash + working;
            let peak = replicas
                .iter()
                .map(|(_, l)| l.peak_memory_bytes)
                .fold(0.0, f64::max);
            assert!(
                close(peak, want),
                "seed {seed} stage {s}: simulated peak {peak} vs {want} ({})",
                x.layout.schedule
            );
            assert!(
                close(peak, sc.memory_bytes),
                "seed {seed} stage {s}: simulated peak {peak} vs the scorer's {} ({})",
                sc.memory_bytes,
                x.layout.schedule
            );
            assert_eq!(sc.in_flight, n, "seed {seed} stage {s}");
            let uniform = match x.layout.schedule {
                Schedule::GPipe => m_s,
                _ => m_s.min(p - s),
            };
            more += usize::from(n > uniform);
            less += usize::from(n < uniform);
        }
        let syncs: Vec<f64> = sim.planned.stages.iter().map(|s| s.dp_sync_ms).collect();
        let max_sync = syncs.iter().copied().fold(0.0, f64::max);
        assert!(sim.iteration_ms >= (sim.pipeline_ms + syncs[0]) * (1.0 - 1e-12));
        assert!(sim.iteration_ms <= (sim.pipeline_ms + max_sync) * (1.0 + 1e-12));
        // The candidate planned iteration for free layouts (not the scorer's: measured here),
        // Σ T_s + max_s (m_s − 1)·T_s + max_s sync_s, against the simulation.
        let candidate = sim
            .planned
            .stages
            .iter()
            .map(|s| s.micro_batch_ms)
            .sum::<f64>()
            + sim
                .planned
                .stages
                .iter()
                .map(|s| (s.micro_batches - 1) as f64 * s.micro_batch_ms)
                .fold(0.0, f64::max)
            + max_sync;
        let k = usize::from(x.layout.schedule == Schedule::OneFOneB);
        let ratio = sim.iteration_ms / candidate;
        above[k] += usize::from(ratio > 1.0 + 1e-9);
        below[k] += usize::from(ratio < 1.0 - 1e-9);
        worst[k] = (worst[k].0.min(ratio), worst[k].1.max(ratio));
        mixed += usize::from(
            p > 1
                && x.layout
                    .stages
                    .iter()
                    .any(|st| st.data_parallel != x.layout.stages[0].data_parallel),
        );
        checked += 1;
    }
    println!("{checked} free layouts ({mixed} with p > 1 and different d); the busiest replica holds more micro-batches than min(m_s, p − s) in {more} stages, fewer in {less}");
    println!(
        "simulated iteration / (Σ T + max (m_s − 1) T_s + max sync): GPipe above in {}, below in {}, range {:?}; 1F1B above in {}, below in {}, range {:?}",
        above[0], below[0], worst[0], above[1], below[1], worst[1]
    );
    assert!(checked >= 300 && mixed >= 100, "{checked} {mixed}");
    assert!(more >= 10 && less >= 1, "{more} {less}");
}

/// Free layouts whose stages process samples at one rate, on a long run: the simulated
/// steady state per sample is never below the planned `max_s T_s/(d_s·b)` (the planned time
/// per sample less its sync term), equal to 1e-9 under GPipe always, and under 1F1B counted
/// (observed: above only where a stage is followed by a narrower one, whose replicas then
/// hold too few micro-batches in flight).
#[test]
fn balanced_free_layouts_reach_the_planned_steady_state() {
    let (mut checked, mut mixed) = (0, 0);
    let (mut equal, mut above, mut worst) = ([0; 2], [0; 2], [1.0f64; 2]);
    for seed in 0..600 {
        let Some(mut x) = free_instance(seed, true) else {
            continue;
        };
        // A long run: 64 rounds of lcm(d_s) micro-batches (the steady state compares 64
        // with 32).
        let lcm = x
            .layout
            .stages
            .iter()
            .fold(1, |l, st| num_lcm(l, st.data_parallel));
        x.layout.global_batch = 64 * lcm * x.layout.micro_batch;
        let sim = run(&x);
        let Some(steady) = sim.steady_per_sample_ms else {
            continue;
        };
        let b = x.layout.micro_batch as f64;
        let planned = sim
            .planned
            .stages
            .iter()
            .zip(&x.layout.stages)
            .map(|(sc, st)| sc.micro_batch_ms / (st.data_parallel as f64 * b))
            .fold(0.0, f64::max);
        let k = usize::from(x.layout.schedule == Schedule::OneFOneB);
        assert!(
            steady >= planned * (1.0 - 1e-9),
            "seed {seed}: steady {steady} below planned {planned} ({:?})",
            x.layout
        );
        if close(steady, planned) {
            equal[k] += 1;
        } else {
            above[k] += 1;
            worst[k] = worst[k].max(steady / planned);
        }
        mixed += usize::from(
            x.layout
                .stages
                .iter()
                .any(|st| st.data_parallel != x.layout.stages[0].data_parallel),
        );
        checked += 1;
    }
    println!("{checked} balanced free layouts with a steady state, {mixed} with different d; steady = planned in {} GPipe and {} 1F1B, above in {} GPipe (at most ×{:.4}) and {} 1F1B (at most ×{:.4})", equal[0], equal[1], above[0], worst[0], above[1], worst[1]);
    assert_eq!(above[0], 0, "GPipe reaches the planned steady state");
    assert!(checked >= 150 && mixed >= 40, "{checked} {mixed}");
}

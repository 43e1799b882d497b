//! The interleaved schedule on 3D layouts (`--schedule interleaved:v`, docs/parallel.md
//! "The interleaved schedule"): the scorer's memory against a hand count, the simulator
//! against the scorer's iteration formula on equal chunks, and the search against a brute
//! force over every layout of its space.

mod common;

use common::Pick;
use dnnplace::costmodel::operators::DType;
use dnnplace::costmodel::parallel::{transformer_chain, valid_tp_degrees, with_batch};
use dnnplace::costmodel::transformer::{Style, TransformerSpec};
use dnnplace::io::cluster_resolve::cluster_and_profiles;
use dnnplace::model::parallel::{
    equal_chunk_bounds, ChainCosts, CutTransfers, Layout, Topology, TpCost, Unit, Uniform,
    Zero,
};
use dnnplace::model::profiles::find_profile;
use dnnplace::model::schedule::Schedule;
use dnnplace::score::parallel::{score_layout, LayoutError};
use dnnplace::simulate::parallel::simulate_layout;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-12)
}

/// A random transformer chain at `t` in the TP degrees of a machine of `per` devices.
fn transformer(r: &mut Pick, per: usize) -> Option<(ChainCosts, Vec<usize>)> {
    let style = r.of(&[Style::Bert, Style::Gpt2, Style::Llama]);
    let heads = r.of(&[2, 4]);
    let hidden = heads * r.of(&[8, 16, 32]);
    let layers = r.of(&[4usize, 6, 8, 12]);
    let mut spec = TransformerSpec::new(style, layers, hidden, heads, r.of(&[8, 16, 64]), 1);
    spec.vocab = r.of(&[64, 1000]);
    let dtype = r.of(&[DType::Fp32, DType::Bf16]);
    let tps: Vec<usize> = valid_tp_degrees(&spec, per);
    let b = r.of(&[1usize, 2]);
    let h100 = find_profile("h100", &[]).unwrap();
    let chain = transformer_chain(&with_batch(&spec, b), dtype, &h100, &tps).ok()?;
    Some((chain, tps))
}

/// Equal chunks: every unit a copy of one block, nothing crossing the cuts, one machine
/// (every stage's DP group on the same link): the simulated iteration is the scorer's
/// `(m + (p − 1)/v)·T + sync`, and each replica's simulated peak memory the scorer's.
#[test]
fn equal_chunks_simulate_to_the_planned_iteration() {
    let mut checked = 0;
    for seed in 0..300u64 {
        let mut r = Pick(seed);
        let per = r.of(&[4usize, 8]);
        let Some((mut chain, tps)) = transformer(&mut r, per) else {
            continue;
        };
        let (cluster, _) = cluster_and_profiles(&format!("1x{per}xh100"), &[]).unwrap();
        let mut topo = Topology::from_cluster(&cluster).unwrap();
        if r.next(3) == 0 {
            topo.peer = None;
        }
        let t = r.of(&tps);
        let p = r.of(&[2usize, 3, 4]);
        let v = r.of(&[2usize, 3]);
        if p * t > per {
            continue;
        }
        let d = 1 + r.next((per / (p * t)) as u64) as usize;
        let k = 1 + r.next(2) as usize;
        let block = chain.units[1].clone();
        chain.units = (0..p * v * k).map(|_| block.clone()).collect();
        chain.cuts = vec![CutTransfers::default(); p * v * k + 1];
        let bounds: Vec<usize> = (0..=p * v).map(|c| c * k).collect();
        let m = p * (1 + r.next(4) as usize);
        let cfg = Uniform {
            micro_batch: chain.micro_batch,
            tensor_parallel: t,
            data_parallel: d,
            zero: r.of(&Zero::ALL),
            recompute: r.next(2) == 0,
            stages: p,
        };
        let layout = Layout::interleaved(&bounds, &cfg, m * d * cfg.micro_batch, v);
        let sim = simulate_layout(&chain, &topo, &layout).expect("simulates");
        let planned = sim.planned.iteration_ms.unwrap();
        let st = &sim.planned.stages[0];
        let by_hand =
            (m as f64 + (p as f64 - 1.0) / v as f64) * st.micro_batch_ms + st.dp_sync_ms;
        assert!(close(planned, by_hand), "seed {seed}: {planned} vs {by_hand}");
        assert!(
            close(sim.iteration_ms, planned),
            "seed {seed} p={p} v={v} m={m} d={d}: simulated {} planned {planned}",
            sim.iteration_ms
        );
        for lane in sim.lanes.iter().filter(|l| l.replica.is_some()) {
            let sc = &sim.planned.stages[lane.stage];
            assert!(
                close(lane.peak_memory_bytes, sc.memory_bytes),
                "seed {seed}: stage {} simulated {} planned {}",
                lane.stage,
                lane.peak_memory_bytes,
                sc.memory_bytes
            );
        }
        checked += 1;
    }
    assert!(checked > 100, "{checked}");
}

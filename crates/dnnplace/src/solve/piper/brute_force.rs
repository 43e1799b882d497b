//! The oracle: every plan of a tiny Piper instance, right by construction.
//!
//! Enumerates every sequence of stages `X_1, …, X_r` (each `X_i` a non-empty subset of what
//! is left with no edge into it from what is left outside it, i.e. every contiguous split
//! in every order), every `(t, d)` per stage with `d | N`, `Σ t d ≤ K`, `Σ d ≤ N`, and per
//! stage every combination of configurations, scored by the evaluator's stage figures
//! ([`crate::score::piper::stage_score`]). Given the stages and degrees, stages do not
//! interact (`y_i` depends on the degrees only), so the best plan takes each stage's
//! cheapest feasible combination; that plan is scored again by
//! [`crate::score::piper::evaluate_piper`].
//!
//! Cost: exponential (ordered set partitions × degrees × Π configurations); for n ≤ 8.

use crate::model::piper::{PiperInstance, PiperPlan, PiperStage};
use crate::score::piper::{evaluate_piper, stage_score};

/// The optimum and a plan attaining it, or `None` when no plan is feasible. Panics on more
/// than 16 nodes (it is an oracle for tests).
pub fn brute_force_piper(ins: &PiperInstance) -> Option<(f64, PiperPlan)> {
    let n = ins.len();
    assert!(n <= 16, "the brute force is for tiny instances");
    let mut best: Option<(f64, PiperPlan)> = None;
    let mut seq = Vec::new();
    walk(
        ins,
        (1u32 << n) - 1,
        ins.max_devices,
        0,
        &mut seq,
        &mut best,
    );
    best
}

/// Extends the stage sequence `seq` over the nodes `left` (bitmask).
fn walk(
    ins: &PiperInstance,
    left: u32,
    devices: usize,
    replicas: usize,
    seq: &mut Vec<(u32, usize, usize)>,
    best: &mut Option<(f64, PiperPlan)>,
) {
    if left == 0 {
        if let Some((v, plan)) = finish(ins, seq) {
            if best.as_ref().is_none_or(|b| v < b.0) {
                *best = Some((v, plan));
            }
        }
        return;
    }
    // Every non-empty subset of `left`.
    let mut x = left;
    while x != 0 {
        if closed(ins, left, x) {
            let nodes: Vec<usize> = (0..ins.len()).filter(|&v| x >> v & 1 == 1).collect();
            let degrees = ins.tensor_degrees();
            for t in degrees {
                if !nodes.iter().all(|&v| ins.nodes[v].configs.contains_key(&t)) {
                    continue;
                }
                for d in 1..=devices / t.max(1) {
                    if !ins.mbs_in_batch.is_multiple_of(d) || replicas + d > ins.mbs_in_batch {
                        continue;
                    }
                    seq.push((x, t, d));
                    walk(ins, left & !x, devices - t * d, replicas + d, seq, best);
                    seq.pop();
                }
            }
        }
        x = (x - 1) & left;
    }
}

/// No edge from `left \ x` into `x`.
fn closed(ins: &PiperInstance, left: u32, x: u32) -> bool {
    ins.edges.iter().all(|e| {
        let from_outside = left >> e.source & 1 == 1 && x >> e.source & 1 == 0;
        !(from_outside && x >> e.dest & 1 == 1)
    })
}

/// The best configurations for a stage sequence, and the plan's value.
fn finish(ins: &PiperInstance, seq: &[(u32, usize, usize)]) -> Option<(f64, PiperPlan)> {
    let n = ins.len();
    let mut stage_of = vec![0; n];
    for (i, &(x, _, _)) in seq.iter().enumerate() {
        for (v, slot) in stage_of.iter_mut().enumerate() {
            if x >> v & 1 == 1 {
                *slot = i;
            }
        }
    }
    let mut suffix: usize = seq.iter().map(|s| s.2).sum();
    let mut plan = PiperPlan::default();
    for (i, &(x, t, d)) in seq.iter().enumerate() {
        let y = suffix.div_ceil(d);
        suffix -= d;
        let nodes: Vec<usize> = (0..n).filter(|&v| x >> v & 1 == 1).collect();
        let counts: Vec<usize> = nodes
            .iter()
            .map(|&v| ins.nodes[v].configs[&t].len())
            .collect();
        let mut configs = vec![0; nodes.len()];
        let mut chosen: Option<(f64, Vec<usize>)> = None;
        loop {
            let stage = PiperStage {
                nodes: nodes.clone(),
                tensor_parallel: t,
                data_parallel: d,
                configs: configs.clone(),
            };
            let s = stage_score(ins, &stage_of, i, &stage, y);
            if s.memory_bytes <= ins.max_memory_per_device
                && chosen.as_ref().is_none_or(|c| s.time_per_sample < c.0)
            {
                chosen = Some((s.time_per_sample, configs.clone()));
            }
            // Next combination (odometer).
            let mut pos = 0;
            while pos < configs.len() && configs[pos] + 1 == counts[pos] {
                configs[pos] = 0;
                pos += 1;
            }
            if pos == configs.len() {
                break;
            }
            configs[pos] += 1;
        }
        let (_, configs) = chosen?;
        plan.stages.push(PiperStage {
            nodes,
            tensor_parallel: t,
            data_parallel: d,
            configs,
        });
    }
    let score = evaluate_piper(ins, &plan).ok()?;
    Some((score.time_per_sample, plan))
}

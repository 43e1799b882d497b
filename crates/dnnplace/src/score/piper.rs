//! The independent evaluator of a Piper plan: checks the plan's rules and computes its time
//! per sample by Piper's formulas ([`crate::model::piper`], `getTPSForResult` in
//! `algo.cpp`), straight from the instance and written apart from the solver.
//!
//! Rules: every node in exactly one stage; every edge from a stage to the same or a later
//! one; `t_i` a degree every node of stage `i` has a configuration for, and each chosen
//! configuration exists; `d_i ≥ 1`, `d_i | N`; `Σ t_i d_i ≤ K`; `Σ d_i ≤ N`. Then, with
//! `y_i = ⌈(Σ_{j ≥ i} d_j) / d_i⌉`, stage `i`'s memory is `Σ_{v ∈ X_i} (A_v y_i + B_v)`
//! (at most `M`) and its time per sample
//! `T_i = (E_i / d_i + Σ_v 4 (d_i − 1) w_v / (d_i N)) / β + Σ_v p_v / d_i`.
//!
//! Cost: O(n + m) per plan.

use crate::model::piper::{PiperInstance, PiperPlan};

/// One stage's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct PiperStageScore {
    /// Time per sample `T_i`, seconds.
    pub time_per_sample: f64,
    /// Compute part `Σ p / d`.
    pub compute: f64,
    /// Edge communication `E_i / (d β)`.
    pub communication: f64,
    /// Data-parallel synchronisation `Σ 4 (d − 1) w / (d N β)`.
    pub data_parallel_sync: f64,
    /// Bytes per device.
    pub memory_bytes: f64,
    /// In-flight micro-batches `y_i`.
    pub in_flight: usize,
}

/// A plan's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct PiperScore {
    /// `max_i T_i`.
    pub time_per_sample: f64,
    pub stages: Vec<PiperStageScore>,
    pub devices_used: usize,
    pub data_parallel_sum: usize,
}

/// Why a plan breaks a rule.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PiperPlanError {
    #[error("node {0} is in no stage")]
    Missing(i64),
    #[error("node {0} is in two stages")]
    Twice(i64),
    #[error("edge {0} -> {1} goes from a later stage to an earlier one")]
    Backward(i64, i64),
    #[error("stage {stage}: {message}")]
    Stage { stage: usize, message: String },
    #[error("the plan uses {used} devices, more than the {max} of the instance")]
    Devices { used: usize, max: usize },
    #[error("the data-parallel degrees sum to {sum}, more than mbsInBatch = {max}")]
    DataParallelSum { sum: usize, max: usize },
    #[error("stage {stage} needs {needed_bytes} bytes per device, more than {max_bytes}")]
    Memory {
        stage: usize,
        needed_bytes: f64,
        max_bytes: f64,
    },
}

/// Checks `plan` against `ins` and scores it (module docs).
pub fn evaluate_piper(ins: &PiperInstance, plan: &PiperPlan) -> Result<PiperScore, PiperPlanError> {
    let n = ins.nodes.len();
    let mut stage_of = vec![usize::MAX; n];
    for (i, s) in plan.stages.iter().enumerate() {
        let bad = |message: String| PiperPlanError::Stage { stage: i, message };
        if s.nodes.is_empty() {
            return Err(bad("no nodes".into()));
        }
        if s.configs.len() != s.nodes.len() {
            return Err(bad("one configuration per node expected".into()));
        }
        if s.data_parallel == 0 || !ins.mbs_in_batch.is_multiple_of(s.data_parallel) {
            return Err(bad(format!(
                "data-parallel degree {} does not divide mbsInBatch = {}",
                s.data_parallel, ins.mbs_in_batch
            )));
        }
        for (&v, &c) in s.nodes.iter().zip(&s.configs) {
            if v >= n {
                return Err(bad(format!("node index {v} out of range")));
            }
            if stage_of[v] != usize::MAX {
                return Err(PiperPlanError::Twice(ins.nodes[v].id));
            }
            stage_of[v] = i;
            let ok = ins.nodes[v]
                .configs
                .get(&s.tensor_parallel)
                .is_some_and(|list| c < list.len());
            if !ok {
                return Err(bad(format!(
                    "node {} has no configuration {c} for tensor-parallel degree {}",
                    ins.nodes[v].id, s.tensor_parallel
                )));
            }
        }
    }
    if let Some(v) = (0..n).find(|&v| stage_of[v] == usize::MAX) {
        return Err(PiperPlanError::Missing(ins.nodes[v].id));
    }
    for e in &ins.edges {
        if stage_of[e.source] > stage_of[e.dest] {
            return Err(PiperPlanError::Backward(
                ins.nodes[e.source].id,
                ins.nodes[e.dest].id,
            ));
        }
    }
    let used: usize = plan
        .stages
        .iter()
        .map(|s| s.tensor_parallel * s.data_parallel)
        .sum();
    if used > ins.max_devices {
        return Err(PiperPlanError::Devices {
            used,
            max: ins.max_devices,
        });
    }
    let dp_sum: usize = plan.stages.iter().map(|s| s.data_parallel).sum();
    if dp_sum > ins.mbs_in_batch {
        return Err(PiperPlanError::DataParallelSum {
            sum: dp_sum,
            max: ins.mbs_in_batch,
        });
    }
    let mut suffix = dp_sum;
    let mut stages = Vec::with_capacity(plan.stages.len());
    for (i, s) in plan.stages.iter().enumerate() {
        let y = suffix.div_ceil(s.data_parallel);
        suffix -= s.data_parallel;
        let score = stage_score(ins, &stage_of, i, s, y);
        if score.memory_bytes > ins.max_memory_per_device {
            return Err(PiperPlanError::Memory {
                stage: i,
                needed_bytes: score.memory_bytes,
                max_bytes: ins.max_memory_per_device,
            });
        }
        stages.push(score);
    }
    let time = stages.iter().map(|s| s.time_per_sample).fold(0.0, f64::max);
    Ok(PiperScore {
        time_per_sample: time,
        stages,
        devices_used: used,
        data_parallel_sum: dp_sum,
    })
}

/// The figures of stage `i` (nodes with `stage_of[v] = i`) with `y` micro-batches in
/// flight; the rules are not checked here.
pub fn stage_score(
    ins: &PiperInstance,
    stage_of: &[usize],
    i: usize,
    s: &crate::model::piper::PiperStage,
    y: usize,
) -> PiperStageScore {
    let d = s.data_parallel as f64;
    let batch = ins.mbs_in_batch as f64;
    let (mut p, mut edge_bytes, mut sync_bytes, mut memory) = (0.0, 0.0, 0.0, 0.0);
    for (&v, &c) in s.nodes.iter().zip(&s.configs) {
        let node = &ins.nodes[v];
        let tmpc = &node.configs[&s.tensor_parallel][c];
        p += tmpc.time_per_sample;
        for (k, &e) in node.incoming.iter().enumerate() {
            if stage_of[ins.edges[e].source] != i {
                edge_bytes += 2.0 * (ins.edges[e].bytes + tmpc.sync_fw[k]);
            }
        }
        for (k, &e) in node.outgoing.iter().enumerate() {
            if stage_of[ins.edges[e].dest] != i {
                edge_bytes += 2.0 * (ins.edges[e].bytes + tmpc.sync_bw[k]);
            }
        }
        sync_bytes += 4.0 * (d - 1.0) * tmpc.parameter_bytes / d / batch;
        memory += tmpc.memory_a * y as f64 + tmpc.memory_b;
    }
    let communication = edge_bytes / d / ins.bandwidth;
    let data_parallel_sync = sync_bytes / ins.bandwidth;
    let compute = p / d;
    PiperStageScore {
        time_per_sample: (edge_bytes / d + sync_bytes) / ins.bandwidth + compute,
        compute,
        communication,
        data_parallel_sync,
        memory_bytes: memory,
        in_flight: y,
    }
}

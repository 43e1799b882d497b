//! The JSON of a plan and of a scored placement as typed records: one output contract for
//! every road. A plan on one machine and a plan on a cluster, printed by the command line
//! (`plan --json`, `score --json`) or returned by the Python binding, are the same record,
//! built from the solver's [`Outcome`] and the scorer's evaluation, never patched field by
//! field afterwards.
//!
//! | record | fields |
//! | --- | --- |
//! | [`EvaluationJson`] (`score --json`) | `objective`, `value`, `maxLoad`, `syncObjective`, `totalLatency`, `maxPiecesPerAccelerator`, `valid`, `contiguous`, `violations`, `devices`, `placement`; on a cluster also `tps`, `sync` |
//! | [`ClaimJson`] (what the method claims) | `method`, `status`, `outcome`, `stopReason`, `optimal`, `bound`, `lowerBound`, `gap`, `timeS`, `ideals`, `idealPairs`, `notes`, `path`, `evaluations` |
//! | [`PlanJson`] (`plan --json`) | the two above, flattened, and `holdings`; `usage` (a cluster's accelerators per type), `peakMemoryBytes`, `export`, `pipeline` where they apply |
//!
//! `value` is the objective as the scorer computes it; `bound` a proven lower bound on it
//! (`value` itself when proven); `gap = (value − bound) / value`; `lowerBound` is `bound`,
//! kept for older readers of cluster plans.

use serde::Serialize;
use serde_json::Value;

use super::cluster::device_place;
use super::table::{gap, placement_file, status_text};
use crate::io::RawPlacement;
use crate::model::schedule::Pipeline;
use crate::model::{ClusterCosts, Placement, Workload};
use crate::score::{ClusterEvaluation, DeviceLoad, DeviceMemory, Evaluation};
use crate::solve::{Objective, Outcome, Status};

/// One device of an evaluation.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceJson {
    pub device: String,
    /// On a cluster: the machine's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// On a cluster: the accelerator type's name, or `CPU core`.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub accelerator_type: Option<String>,
    pub nodes: usize,
    pub compute: f64,
    pub communication: f64,
    pub load: f64,
    pub memory_bytes: f64,
    /// On a cluster: the type's memory (`null` on a CPU core).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<Option<f64>>,
    pub bottleneck: bool,
    /// The device recomputes its activations (absent when it does not).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub recomputes: bool,
    /// The forward pass it runs again, `R(d)` (only when it recomputes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recompute: Option<f64>,
}

impl DeviceJson {
    fn of(d: &DeviceLoad, bottleneck: Option<crate::model::Device>) -> DeviceJson {
        DeviceJson {
            device: d.device.to_string(),
            machine: None,
            accelerator_type: None,
            nodes: d.nodes,
            compute: d.compute,
            communication: d.communication,
            load: d.load,
            memory_bytes: d.memory_bytes,
            memory_limit_bytes: None,
            bottleneck: Some(d.device) == bottleneck,
            recomputes: d.recomputes,
            recompute: d.recomputes.then_some(d.recompute),
        }
    }
}

/// A scored placement: the objective, the scores, the checks, each device and the
/// placement file (MODEL.md's shape, loads filled in by the scorer).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvaluationJson {
    pub objective: &'static str,
    pub value: f64,
    pub max_load: f64,
    pub sync_objective: f64,
    pub total_latency: Option<f64>,
    pub max_pieces_per_accelerator: Option<usize>,
    pub valid: bool,
    pub contiguous: bool,
    pub violations: Vec<String>,
    pub devices: Vec<DeviceJson>,
    pub placement: RawPlacement,
    /// On a cluster: `maxLoad` and `syncObjective` under the names `score` on a cluster
    /// has always printed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sync: Option<f64>,
}

impl EvaluationJson {
    /// `p` scored on one machine under `objective`.
    pub fn of(w: &Workload, p: &Placement, objective: Objective, e: &Evaluation) -> Self {
        EvaluationJson {
            objective: objective.name(),
            value: objective.value(e),
            max_load: e.max_load,
            sync_objective: e.sync_objective,
            total_latency: e.latency_total(),
            max_pieces_per_accelerator: e.latency.as_ref().map(|l| l.max_pieces()),
            valid: e.is_valid(),
            contiguous: e.is_contiguous(),
            violations: e
                .violations
                .iter()
                .chain(&e.non_contiguous)
                .map(|x| x.to_string())
                .collect(),
            devices: e
                .devices
                .iter()
                .map(|d| DeviceJson::of(d, e.bottleneck))
                .collect(),
            placement: super::table::placement_json(w, p, e, objective),
            tps: None,
            sync: None,
        }
    }

    /// `p` scored on the cluster of `costs` (TPS or sync: the objectives a cluster plans);
    /// each device with its machine, type and the type's memory.
    pub fn on_cluster(
        w: &Workload,
        costs: &ClusterCosts,
        p: &Placement,
        objective: Objective,
        e: &ClusterEvaluation,
    ) -> Self {
        let value = match objective {
            Objective::Sync => e.sync_objective,
            _ => e.max_load,
        };
        let devices = e
            .devices
            .iter()
            .map(|d| {
                let (machine, ty, limit) = device_place(costs, d.device);
                DeviceJson {
                    machine: Some(machine),
                    accelerator_type: Some(ty),
                    memory_limit_bytes: Some(limit),
                    ..DeviceJson::of(d, e.bottleneck)
                }
            })
            .collect();
        EvaluationJson {
            objective: objective.name(),
            value,
            max_load: e.max_load,
            sync_objective: e.sync_objective,
            total_latency: None,
            max_pieces_per_accelerator: None,
            valid: e.is_valid(),
            contiguous: e.is_contiguous(),
            violations: e
                .violations
                .iter()
                .chain(&e.non_contiguous)
                .map(|v| v.to_string())
                .collect(),
            devices,
            placement: placement_file(w, p, &e.devices, e.max_load, false),
            tps: Some(e.max_load),
            sync: Some(e.sync_objective),
        }
    }
}

/// What a method claims about its plan ([`Outcome`]): the status in words and as a stable
/// code, the proven bound and gap, and how the run went.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimJson {
    /// The method asked for (`auto` stays `auto`).
    pub method: String,
    /// The status as one phrase ([`status_text`]).
    pub status: String,
    /// [`Status::kind`]: `optimal`, `feasible`, `heuristic`, `infeasible`, `no-plan`.
    pub outcome: &'static str,
    /// [`crate::solve::StopReason::code`], `null` when the run was not stopped short.
    pub stop_reason: Option<&'static str>,
    pub optimal: bool,
    pub bound: f64,
    pub lower_bound: f64,
    pub gap: f64,
    pub time_s: f64,
    pub ideals: Option<usize>,
    pub ideal_pairs: Option<u64>,
    pub notes: Vec<String>,
    pub path: Option<String>,
    /// The search placers' scorer evaluations (`null` for the other methods).
    pub evaluations: Option<u64>,
}

impl ClaimJson {
    /// The claim of `o`, made by the method `method` was asked as.
    pub fn of(o: &Outcome, method: &str) -> ClaimJson {
        ClaimJson {
            method: method.to_string(),
            status: status_text(o),
            outcome: o.status.kind(),
            stop_reason: o.status.stop_reason().map(|r| r.code()),
            optimal: o.status == Status::Optimal,
            bound: o.bound,
            lower_bound: o.bound,
            gap: gap(o.objective, o.bound),
            time_s: o.stats.time_s,
            ideals: o.stats.ideals,
            ideal_pairs: o.stats.ideal_pairs,
            notes: o.stats.notes.clone(),
            path: o.stats.path.clone(),
            evaluations: o.stats.evaluations,
        }
    }
}

/// A framework's file written with the plan (`plan --export FORMAT`).
#[derive(Clone, Debug, Serialize)]
pub struct ExportJson {
    pub format: String,
    pub text: String,
}

/// A plan: its evaluation and its claim, flattened into one object, and what each device
/// holds; the fields that apply only to some plans are absent elsewhere.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanJson {
    #[serde(flatten)]
    pub evaluation: EvaluationJson,
    #[serde(flatten)]
    pub claim: ClaimJson,
    /// Per device: what it holds and its module paths ([`super::layers::holdings_json`]).
    pub holdings: Value,
    /// On a cluster: the accelerators used per type, in the cluster's type order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Vec<usize>>,
    /// The planning process's peak resident memory (the command line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub export: Option<ExportJson>,
    /// Every device's memory under the schedule (with `--schedule`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<PipelineJson>,
}

impl PlanJson {
    /// The record with nothing beyond the evaluation, the claim and the holdings.
    pub fn new(evaluation: EvaluationJson, claim: ClaimJson, holdings: Value) -> PlanJson {
        PlanJson {
            evaluation,
            claim,
            holdings,
            usage: None,
            peak_memory_bytes: None,
            export: None,
            pipeline: None,
        }
    }

    /// As a JSON value (the Python binding keeps its plans so).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("a plan record serialises")
    }
}

/// The memory of every device under a schedule ([`crate::score::pipeline_memory`]).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PipelineJson {
    pub schedule: String,
    pub micro_batches: usize,
    pub recompute: String,
    pub devices: Vec<DeviceMemoryJson>,
}

/// One device's memory under a schedule: what stays resident, the activations stashed for
/// the micro-batches in flight, and, with interleaving or recomputation, their parts.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceMemoryJson {
    pub device: String,
    pub stage: usize,
    pub in_flight: usize,
    pub resident_bytes: f64,
    pub stash_bytes: f64,
    pub memory_bytes: f64,
    /// Per chunk (interleaved schedules only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_stash_bytes: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_nodes: Option<Vec<usize>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub recomputes: bool,
    /// The stage inputs kept instead of the stash (only when it recomputes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_bytes: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunk_input_bytes: Option<Vec<f64>>,
}

impl PipelineJson {
    pub fn of(pipeline: &Pipeline, memory: &[DeviceMemory]) -> PipelineJson {
        let chunked = |d: &DeviceMemory| !d.chunk_stash_bytes.is_empty();
        PipelineJson {
            schedule: pipeline.schedule.to_string(),
            micro_batches: pipeline.micro_batches,
            recompute: pipeline.recompute.to_string(),
            devices: memory
                .iter()
                .map(|d| DeviceMemoryJson {
                    device: d.device.to_string(),
                    stage: d.stage,
                    in_flight: d.in_flight,
                    resident_bytes: d.resident_bytes,
                    stash_bytes: d.stash_bytes,
                    memory_bytes: d.bytes,
                    chunk_stash_bytes: chunked(d).then(|| d.chunk_stash_bytes.clone()),
                    chunk_nodes: chunked(d).then(|| d.chunk_nodes.clone()),
                    recomputes: d.recomputes,
                    input_bytes: d.recomputes.then_some(d.input_bytes),
                    chunk_input_bytes: (d.recomputes && !d.chunk_input_bytes.is_empty())
                        .then(|| d.chunk_input_bytes.clone()),
                })
                .collect(),
        }
    }
}

//! A parallel layout ([`crate::solve::parallel`]) as text and as JSON: one row per stage —
//! its layers, `t × d`, devices (machine and index), time per micro-batch split into compute
//! / TP collectives / stage transfers / ZeRO-3 gathers, DP sync, memory per device split
//! into weights / gradients / optimizer state / activations in flight — then the iteration
//! time, time per sample, TFLOP/s per device, MFU, and the search's value, bound and gap.

use serde::Serialize;
use serde_json::{json, Value};

use super::tabular::{Align, Table};
use crate::model::human_bytes;
use crate::model::parallel::{ChainCosts, StageLayout, Topology};
use crate::solve::parallel::compare::{Entry, Hand, Row};
use crate::solve::parallel::{
    Layouts, Objective, ParallelOutcome, ParallelPlan, TargetOutcome, Valuation,
};
use crate::solve::Status;

/// The name of an objective in reports.
pub fn objective_name(o: Objective) -> &'static str {
    match o {
        Objective::Iteration => "iteration",
        Objective::TimePerSample => "time-per-sample",
    }
}

/// `first..last` unit names of a stage.
fn layers(chain: &ChainCosts, s: &StageLayout) -> String {
    let first = &chain.units[s.units.start].name;
    let last = &chain.units[s.units.end - 1].name;
    if s.units.len() == 1 {
        first.clone()
    } else {
        format!("{first} … {last}")
    }
}

/// `m3:0-7` style device ranges, machine by machine.
fn devices(topo: &Topology, s: &StageLayout) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut d = s.first_device;
    let end = s.first_device + s.width();
    while d < end {
        let m = topo.machine_of(d);
        let stop = end.min((m + 1) * topo.per_machine);
        let (a, b) = (d % topo.per_machine, (stop - 1) % topo.per_machine);
        parts.push(if a == b {
            format!("m{m}:{a}")
        } else {
            format!("m{m}:{a}-{b}")
        });
        d = stop;
    }
    if parts.len() > 3 {
        format!(
            "{} … {} ({} machines)",
            parts[0],
            parts[parts.len() - 1],
            parts.len()
        )
    } else {
        parts.join(" ")
    }
}

fn ms(x: f64) -> String {
    format!("{x:.3}")
}

/// The status line: optimal, or the bound and gap and why the search stopped.
pub fn status_line(o: &ParallelOutcome) -> String {
    match &o.status {
        Status::Optimal if o.valuation == Valuation::Simulation => format!(
            "optimal (proven: the simulated iteration meets the bound every {} layout's respects)",
            if o.free { "free" } else { "uniform" }
        ),
        Status::Optimal if o.free => {
            "optimal (proven: no free layout is worth less, by the feasibility DP)".into()
        }
        Status::Optimal => {
            "optimal (proven: every other configuration's bound is no better)".into()
        }
        Status::Feasible { reason } => {
            format!("feasible, gap {:.2}% (stopped: {reason})", 100.0 * o.gap())
        }
        Status::NoPlan { reason } => format!("no plan (stopped: {reason})"),
        Status::Infeasible { reason, .. } => format!("infeasible: {reason}"),
        Status::Heuristic => "heuristic".into(),
    }
}

/// The text `plan --parallel 3d` prints.
pub fn layout_text(o: &ParallelOutcome, topo: &Topology, objective: Objective) -> String {
    let mut s = format!(
        "parallel layout ({}) on {} × {} {} ({} accelerators), objective {}\nstatus: {}\n",
        if o.free { "free" } else { "uniform" },
        topo.machines,
        topo.per_machine,
        topo.type_name,
        topo.devices(),
        objective_name(objective),
        status_line(o)
    );
    let Some(plan) = &o.plan else {
        return s;
    };
    let simulated = (o.valuation == Valuation::Simulation).then_some(o.value);
    s += &plan_text(plan, topo, simulated);
    s += &format!(
        "value {:.6} ms{}, bound {:.6} ms, gap {:.3}% · {} in {:.2} s\n",
        o.value,
        match o.valuation {
            Valuation::Simulation => " (the simulated iteration)",
            Valuation::Model => "",
        },
        o.bound,
        100.0 * o.gap(),
        if o.free || o.valuation == Valuation::Simulation {
            format!(
                "{} feasibility checks over {} configurations",
                o.configs_solved, o.configs
            )
        } else {
            format!(
                "{} of {} configurations solved",
                o.configs_solved, o.configs
            )
        },
        o.elapsed_s
    );
    s
}

/// One plan's summary, stage table and totals (the search's and `score`'s reports); the
/// iteration is the scorer's, or `simulated` (the free iteration search's value) when given.
fn plan_text(plan: &ParallelPlan, topo: &Topology, simulated: Option<f64>) -> String {
    let mut s = summary_line(plan);
    s += "\n\n";
    s += &stage_table(plan, topo).text();
    let sc = &plan.score;
    s += &format!(
        "\niteration {} ms · time per sample {} ms · {:.1} TFLOP/s per device · MFU {:.1}% · {} of {} devices\n",
        match simulated {
            Some(x) => format!("{x:.2} (simulated)"),
            None => sc.iteration_ms.map_or("-".into(), |x| format!("{x:.2}")),
        },
        format_args!("{:.4}", sc.time_per_sample_ms),
        sc.tflops_per_device,
        100.0 * sc.mfu,
        sc.devices_used,
        topo.devices()
    );
    s
}

/// A layout read from a framework's file (`source`) and scored: the same figures as a
/// plan's, and whether it fits.
pub fn scored_text(
    plan: &ParallelPlan,
    topo: &Topology,
    objective: Objective,
    source: &str,
) -> String {
    let value = crate::solve::parallel::objective_value(&plan.score, objective);
    format!(
        "parallel layout read from {source} on {} × {} {} ({} accelerators), objective {}\n{}{}value {value:.6} ms{}\n",
        topo.machines,
        topo.per_machine,
        topo.type_name,
        topo.devices(),
        objective_name(objective),
        if plan.score.fits { "" } else { "DOES NOT FIT: a stage needs more memory than its devices have\n" },
        plan_text(plan, topo, None),
        if plan.score.fits { "" } else { " (does not fit)" }
    )
}

/// [`scored_text`] as JSON: `from`, `objective`, `value`, `fits`, and the plan's fields of
/// [`layout_json`].
pub fn scored_json(
    plan: &ParallelPlan,
    topo: &Topology,
    objective: Objective,
    source: &str,
) -> Value {
    let value = crate::solve::parallel::objective_value(&plan.score, objective);
    let record = ScoredJson {
        parallel: "3d",
        uniform: plan.layout.stages.windows(2).all(|s| {
            (s[0].tensor_parallel, s[0].data_parallel) == (s[1].tensor_parallel, s[1].data_parallel)
        }),
        from: source,
        objective: objective_name(objective),
        value: value.is_finite().then_some(value),
        fits: plan.score.fits,
        cluster: TopologyJson::of(topo),
        stages: StageJson::all(plan, topo),
        totals: LayoutTotalsJson::of(plan),
    };
    serde_json::to_value(record).expect("a layout record serialises")
}

/// `p4·t2·d16 b1 z1 rc sp og`: stages (`p4×v2` with two interleaved chunks each), TP, DP,
/// micro-batch, ZeRO stage, `rc` when
/// recomputing, `sp` with sequence parallelism, `og` with the DP sync overlapped; a free layout (stages with different `t` or
/// `d`) lists each stage's `t·d`: `p3·(t2·d4|t4·d2|t4·d2) b1 z1`.
pub fn layout_code(plan: &ParallelPlan) -> String {
    let l = &plan.layout;
    format!(
        "p{}{}·{} b{} z{}{}{}{}",
        l.pipeline_stages(),
        match l.schedule.chunks() {
            1 => String::new(),
            v => format!("×v{v}"),
        },
        degrees(plan),
        l.micro_batch,
        l.zero.stage(),
        if l.recompute { " rc" } else { "" },
        if sequence_parallel(plan) { " sp" } else { "" },
        if l.overlap_grad_reduce { " og" } else { "" }
    )
}

/// Whether the plan's TP groups split the sequence: priced so, with a TP degree above 1.
fn sequence_parallel(plan: &ParallelPlan) -> bool {
    plan.chain.sequence_parallel && plan.layout.stages.iter().any(|s| s.tensor_parallel > 1)
}

/// `t2·d16` when every stage has the same degrees, else `(t2·d4|t4·d2|…)`; on several
/// accelerator types each stage's type follows its degrees (`t2·d4@h100`).
fn degrees(plan: &ParallelPlan) -> String {
    let st = &plan.layout.stages[..plan.layout.pipeline_stages()];
    let one = |i: usize| {
        let s = &st[i];
        let on = plan
            .accelerators
            .as_ref()
            .map_or(String::new(), |a| format!("@{}", a[i]));
        format!("t{}·d{}{on}", s.tensor_parallel, s.data_parallel)
    };
    if (0..st.len()).all(|i| one(i) == one(0)) {
        one(0)
    } else {
        format!("({})", (0..st.len()).map(one).collect::<Vec<_>>().join("|"))
    }
}

/// `p = 4 × t = 8 × d = 2, b = 1, ZeRO-1, 1f1b, m = 64` (a free layout: `p = 3 × (t2·d4|…)`
/// and the micro-batches per replica of each stage).
pub fn summary_line(plan: &ParallelPlan) -> String {
    let l = &plan.layout;
    let st = &l.stages[0];
    let uniform = l
        .stages
        .iter()
        .all(|s| (s.tensor_parallel, s.data_parallel) == (st.tensor_parallel, st.data_parallel));
    let shape = if uniform {
        format!("t = {} × d = {}", st.tensor_parallel, st.data_parallel)
    } else {
        degrees(plan)
    };
    let m: Vec<String> = plan
        .score
        .stages
        .iter()
        .map(|s| s.micro_batches.to_string())
        .collect();
    let m = if uniform { m[0].clone() } else { m.join("/") };
    format!(
        "layout: p = {} × {shape}, micro-batch {}, global batch {}, ZeRO-{}, {}, {}recomputation, {m} micro-batches per replica",
        l.pipeline_stages(),
        l.micro_batch,
        l.global_batch,
        l.zero.stage(),
        l.schedule,
        if l.recompute { "full " } else { "no " },
    ) + if sequence_parallel(plan) {
        ", sequence parallel"
    } else {
        ""
    } + if l.overlap_grad_reduce {
        ", DP sync overlapped with backward"
    } else {
        ""
    }
}

/// Stage `i`'s accelerator type: the plan's own on several types, else the topology's.
fn accelerator<'a>(plan: &'a ParallelPlan, topo: &'a Topology, i: usize) -> &'a str {
    plan.accelerators
        .as_ref()
        .map_or(topo.type_name.as_str(), |a| a[i].as_str())
}

/// One row per stage.
pub(crate) fn stage_table(plan: &ParallelPlan, topo: &Topology) -> Table {
    let mut t = Table::new([
        "stage",
        "layers",
        "t×d",
        "type",
        "devices",
        "compute ms",
        "TP ms",
        "transfer ms",
        "gather ms",
        "micro-batch ms",
        "DP sync ms",
        "weights",
        "grads",
        "optimizer",
        "activations",
        "memory",
    ])
    .aligned(
        [
            Align::Right,
            Align::Left,
            Align::Right,
            Align::Left,
            Align::Left,
        ]
        .into_iter()
        .chain(std::iter::repeat_n(Align::Right, 11)),
    );
    for (i, (st, sc)) in plan
        .layout
        .stages
        .iter()
        .zip(&plan.score.stages)
        .enumerate()
    {
        t.push([
            i.to_string(),
            plan.layout
                .chunks_of(i)
                .map(|c| layers(&plan.chain, c))
                .collect::<Vec<_>>()
                .join(" + "),
            format!("{}×{}", st.tensor_parallel, st.data_parallel),
            accelerator(plan, topo, i).to_string(),
            devices(topo, st),
            ms(sc.compute_ms),
            ms(sc.tensor_parallel_ms),
            ms(sc.transfer_ms),
            ms(sc.gather_ms),
            ms(sc.micro_batch_ms),
            ms(sc.dp_sync_ms),
            human_bytes(sc.weight_bytes),
            human_bytes(sc.gradient_bytes),
            human_bytes(sc.optimizer_bytes),
            format!("{} ({}×)", human_bytes(sc.activation_bytes), sc.in_flight),
            human_bytes(sc.memory_bytes),
        ]);
    }
    t
}

/// The layout as JSON: the usual `value` (`valueFrom`: `model`, the scorer's formula, or
/// `simulation`, the plan's simulated iteration), `bound`, `gap`, `outcome`, `stopReason`,
/// `optimal`, and `stages: [{layers, chunks, tensorParallel, dataParallel, devices,
/// microBatchTimeMs, …, memoryBytes}]` (`chunks`: the layers of each chunk the stage
/// holds, in order; one chunk unless interleaved). One typed record, [`LayoutJson`].
pub fn layout_json(o: &ParallelOutcome, topo: &Topology, objective: Objective) -> LayoutJson {
    LayoutJson {
        parallel: "3d",
        uniform: !o.free,
        objective: objective_name(objective),
        value: o.value.is_finite().then_some(o.value),
        value_from: o.valuation.code(),
        bound: o.bound.is_finite().then_some(o.bound),
        gap: o.value.is_finite().then(|| o.gap()),
        outcome: o.status.kind(),
        stop_reason: o.status.stop_reason().map(|r| r.code()),
        optimal: o.status == Status::Optimal,
        status: status_line(o),
        configurations: o.configs,
        configurations_solved: o.configs_solved,
        time_s: o.elapsed_s,
        cluster: TopologyJson::of(topo),
        stages: o
            .plan
            .as_ref()
            .map_or_else(Vec::new, |p| StageJson::all(p, topo)),
        totals: o.plan.as_ref().map(LayoutTotalsJson::of),
        peak_memory_bytes: None,
        target: None,
        simulation: None,
    }
}

/// A layout found by a search ([`layout_json`]): what was searched and claimed, then the
/// plan's stages and totals (none without a plan).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LayoutJson {
    parallel: &'static str,
    uniform: bool,
    objective: &'static str,
    value: Option<f64>,
    value_from: &'static str,
    bound: Option<f64>,
    gap: Option<f64>,
    outcome: &'static str,
    stop_reason: Option<&'static str>,
    optimal: bool,
    status: String,
    configurations: usize,
    configurations_solved: usize,
    time_s: f64,
    cluster: TopologyJson,
    stages: Vec<StageJson>,
    #[serde(flatten)]
    totals: Option<LayoutTotalsJson>,
    /// The planning process's peak resident memory (the command line, Python).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_memory_bytes: Option<u64>,
    /// With `--target-tps`: what the fewest-devices search found ([`target_json`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<Value>,
    /// With `--report`: the simulated iteration's summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulation: Option<Value>,
}

/// A row of the sweep: the GPU count and the layout found for it.
#[derive(Debug, Serialize)]
struct SweepRowJson {
    devices: usize,
    #[serde(flatten)]
    layout: LayoutJson,
}

/// A row of the comparison: which entry, and its layout (with its value against the best
/// row's) or why it has none.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct CompareRowJson {
    entry: &'static str,
    row: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    vs_best: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(flatten)]
    layout: Option<LayoutJson>,
}

/// A layout given by hand and scored ([`scored_json`]).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ScoredJson<'a> {
    parallel: &'static str,
    uniform: bool,
    from: &'a str,
    objective: &'static str,
    value: Option<f64>,
    fits: bool,
    cluster: TopologyJson,
    stages: Vec<StageJson>,
    #[serde(flatten)]
    totals: LayoutTotalsJson,
}

/// The cluster a layout is planned on, as the layout sees it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct TopologyJson {
    machines: usize,
    per_machine: usize,
    #[serde(rename = "type")]
    type_name: String,
    memory_bytes: f64,
}

impl TopologyJson {
    fn of(topo: &Topology) -> TopologyJson {
        TopologyJson {
            machines: topo.machines,
            per_machine: topo.per_machine,
            type_name: topo.type_name.clone(),
            memory_bytes: topo.memory_bytes,
        }
    }
}

/// One stage: its layers (per chunk), accelerator type, `t × d` and devices, time per
/// micro-batch by part, and memory per device by part (the scorer's [`StageScore`]).
///
/// [`StageScore`]: crate::score::parallel::StageScore
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct StageJson {
    layers: Vec<String>,
    chunks: Vec<Vec<String>>,
    accelerator: String,
    tensor_parallel: usize,
    data_parallel: usize,
    devices: Vec<usize>,
    machines: std::collections::BTreeSet<usize>,
    compute_ms: f64,
    tensor_parallel_ms: f64,
    transfer_ms: f64,
    gather_ms: f64,
    micro_batch_time_ms: f64,
    dp_sync_ms: f64,
    backward_ms: f64,
    micro_batches: usize,
    in_flight: usize,
    weight_bytes: f64,
    gradient_bytes: f64,
    optimizer_bytes: f64,
    activation_bytes: f64,
    memory_bytes: f64,
}

impl StageJson {
    fn all(plan: &ParallelPlan, topo: &Topology) -> Vec<StageJson> {
        let l = &plan.layout;
        l.stages
            .iter()
            .zip(&plan.score.stages)
            .enumerate()
            .map(|(i, (st, sc))| {
                let chunks: Vec<Vec<String>> = l
                    .chunks_of(i)
                    .map(|c| {
                        c.units
                            .clone()
                            .map(|u| plan.chain.units[u].name.clone())
                            .collect()
                    })
                    .collect();
                StageJson {
                    layers: chunks.concat(),
                    chunks,
                    accelerator: accelerator(plan, topo, i).to_string(),
                    tensor_parallel: st.tensor_parallel,
                    data_parallel: st.data_parallel,
                    devices: st.devices().collect(),
                    machines: st.devices().map(|d| topo.machine_of(d)).collect(),
                    compute_ms: sc.compute_ms,
                    tensor_parallel_ms: sc.tensor_parallel_ms,
                    transfer_ms: sc.transfer_ms,
                    gather_ms: sc.gather_ms,
                    micro_batch_time_ms: sc.micro_batch_ms,
                    dp_sync_ms: sc.dp_sync_ms,
                    backward_ms: sc.backward_ms,
                    micro_batches: sc.micro_batches,
                    in_flight: sc.in_flight,
                    weight_bytes: sc.weight_bytes,
                    gradient_bytes: sc.gradient_bytes,
                    optimizer_bytes: sc.optimizer_bytes,
                    activation_bytes: sc.activation_bytes,
                    memory_bytes: sc.memory_bytes,
                }
            })
            .collect()
    }
}

/// A plan's settings and totals: micro-batch, global batch, ZeRO, schedule, the
/// iteration, time per sample, TFLOP/s per device, MFU and devices used.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct LayoutTotalsJson {
    micro_batch: usize,
    global_batch: usize,
    zero: u8,
    schedule: String,
    recompute: bool,
    sequence_parallel: bool,
    overlap_grad_reduce: bool,
    iteration_ms: Option<f64>,
    time_per_sample_ms: f64,
    tflops_per_device: f64,
    mfu: f64,
    devices_used: usize,
}

impl LayoutTotalsJson {
    fn of(plan: &ParallelPlan) -> LayoutTotalsJson {
        let l = &plan.layout;
        LayoutTotalsJson {
            micro_batch: l.micro_batch,
            global_batch: l.global_batch,
            zero: l.zero.stage(),
            schedule: l.schedule.to_string(),
            recompute: l.recompute,
            sequence_parallel: sequence_parallel(plan),
            overlap_grad_reduce: l.overlap_grad_reduce,
            iteration_ms: plan.score.iteration_ms,
            time_per_sample_ms: plan.score.time_per_sample_ms,
            tflops_per_device: plan.score.tflops_per_device,
            mfu: plan.score.mfu,
            devices_used: plan.score.devices_used,
        }
    }
}

/// Samples per second of a plan: `B` per iteration, or one per time per sample.
fn samples_per_s(plan: &ParallelPlan) -> f64 {
    match plan.score.iteration_ms {
        Some(i) => 1e3 * plan.layout.global_batch as f64 / i,
        None => 1e3 / plan.score.time_per_sample_ms,
    }
}

/// Which layouts a sweep's rows searched: `free` when they are free layouts.
fn layouts_word(rows: &[(usize, ParallelOutcome)]) -> &'static str {
    if rows.iter().any(|(_, o)| o.free) {
        "free"
    } else {
        "uniform"
    }
}

/// The sweep (`plan --parallel 3d [--free] --sweep`) as a table: per GPU count, the best
/// layout, its value, the row's proven bound and gap, throughput, TFLOP/s per device and the
/// speed-up over the first row with a plan (each row's search time: `timeS` in the JSON).
pub fn sweep_text(rows: &[(usize, ParallelOutcome)], objective: Objective) -> String {
    let mut t = Table::new([
        "GPUs",
        "layout",
        "value ms",
        "bound ms",
        "gap",
        "samples/s",
        "speed-up",
        "TFLOP/s per GPU",
        "MFU",
        "status",
    ])
    .aligned([
        Align::Right,
        Align::Left,
        Align::Right,
        Align::Right,
        Align::Right,
        Align::Right,
        Align::Right,
        Align::Right,
        Align::Right,
        Align::Left,
    ]);
    let base = rows
        .iter()
        .find_map(|(_, o)| o.plan.as_ref().map(samples_per_s));
    let dash = || "-".to_string();
    for (n, o) in rows {
        let bound = if o.bound.is_finite() {
            format!("{:.3}", o.bound)
        } else {
            dash()
        };
        let cells = match &o.plan {
            Some(p) => [
                layout_code(p),
                format!("{:.3}", o.value),
                bound,
                format!("{:.2}%", 100.0 * o.gap()),
                format!("{:.2}", samples_per_s(p)),
                base.map_or(dash(), |b| format!("{:.2}×", samples_per_s(p) / b)),
                format!("{:.1}", p.score.tflops_per_device),
                format!("{:.1}%", 100.0 * p.score.mfu),
            ],
            None => [
                dash(),
                dash(),
                bound,
                dash(),
                dash(),
                dash(),
                dash(),
                dash(),
            ],
        };
        let mut row = vec![n.to_string()];
        row.extend(cells);
        row.push(status_line(o));
        t.push(row);
    }
    format!(
        "best {} layout per GPU count, objective {}\n\n{}",
        layouts_word(rows),
        objective_name(objective),
        t.text()
    )
}

/// The sweep as JSON: `uniform` (false: free layouts) and `rows: [{devices,
/// …layout_json}]`, each row with its own `value`, `bound`, `gap`, `status` and `timeS`.
pub fn sweep_json(
    rows: &[(usize, ParallelOutcome)],
    topo: &Topology,
    objective: Objective,
) -> Value {
    let uniform = layouts_word(rows) == "uniform";
    let rows: Vec<SweepRowJson> = rows
        .iter()
        .map(|(n, o)| SweepRowJson {
            devices: *n,
            layout: layout_json(o, topo, objective),
        })
        .collect();
    json!({"parallel": "3d", "sweep": true, "uniform": uniform,
           "objective": objective_name(objective), "rows": rows})
}

/// Why a sweep is an error: no row has a plan.
pub const NO_SWEEP_LAYOUT: &str = "no GPU count has a feasible layout";

/// The fewest-devices search (`--target-tps`) as the `target` field of the plan's JSON:
/// `open` is `null` when `proven`, else `{devices, value, bound}` of the count whose bound
/// does not exclude it.
pub fn target_json(found: &TargetOutcome) -> Value {
    json!({
        "targetMs": found.target_ms,
        "devices": found.devices,
        "proven": found.proven,
        "open": found.open.map(|o| json!({
            "devices": o.devices,
            "value": o.value.is_finite().then_some(o.value),
            "bound": o.bound.is_finite().then_some(o.bound),
        })),
        "searched": found.searched,
    })
}

/// The line saying what `--target-tps` found.
pub fn target_line(found: &TargetOutcome) -> String {
    let target = found.target_ms;
    let open = found.open.map(|o| {
        let best = if o.value.is_finite() {
            format!("its best layout {:.6} ms", o.value)
        } else {
            "no layout found".to_string()
        };
        format!(
            "the search on {n} accelerators stopped early ({best}, bound {:.6} ms ≤ the target), so {n} or fewer may meet it",
            o.bound,
            n = o.devices
        )
    });
    match (found.devices, open) {
        (Some(n), None) => format!(
            "--target-tps {target} ms: {n} accelerators are the fewest whose best layout meets it (proven: every smaller count's bound misses it; counts searched: {:?})\n",
            found.searched
        ),
        (Some(n), Some(why)) => format!(
            "--target-tps {target} ms: {n} accelerators meet it, NOT proven fewest: {why} (counts searched: {:?}; give more --time-limit)\n",
            found.searched
        ),
        (None, None) => format!(
            "--target-tps {target} ms: no layout on the whole cluster meets it (best {:.6} ms per sample, proven: its bound {:.6} ms is above the target)\n",
            found.outcome.value, found.outcome.bound
        ),
        (None, Some(why)) => format!(
            "--target-tps {target} ms: no layout found on the whole cluster meets it, NOT proven: {why} (give more --time-limit)\n"
        ),
    }
}

/// The error of a target no layout meets.
pub fn target_missed(found: &TargetOutcome) -> String {
    format!(
        "--target-tps {} ms: no layout of the cluster meets it",
        found.target_ms
    )
}

/// Samples per second against GPUs, as an SVG line chart.
pub fn sweep_svg(rows: &[(usize, ParallelOutcome)]) -> String {
    use super::charts::curve::{curve, linear};
    let pts: Vec<(f64, f64, String)> = rows
        .iter()
        .filter_map(|(n, o)| {
            o.plan.as_ref().map(|p| {
                let s = samples_per_s(p);
                (
                    *n as f64,
                    s,
                    format!("{n} GPUs: {} ({s:.2} samples/s)", summary_line(p)),
                )
            })
        })
        .collect();
    let x = linear(pts.iter().map(|p| p.0).fold(1.0, f64::max), "count");
    let y = linear(pts.iter().map(|p| p.1).fold(0.0, f64::max), "1/s");
    let points: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1)).collect();
    let labels: Vec<String> = pts.into_iter().map(|p| p.2).collect();
    curve(
        "parallel-sweep",
        &format!(
            "Best {} layout: samples per second by GPUs",
            layouts_word(rows)
        ),
        &points,
        &labels,
        (&x, "GPUs"),
        (&y, "samples per second"),
    )
    .to_string()
}

/// A stable name of a comparison row (`entry` in the JSON).
fn entry_code(e: Entry) -> &'static str {
    match e {
        Entry::Search(Layouts::Uniform) => "uniform",
        Entry::Search(Layouts::Free) => "free",
        Entry::Hand(Hand::TpPp) => "tp-machine-pp",
        Entry::Hand(Hand::TpDp) => "tp-machine-dp",
        Entry::Hand(Hand::DpOnly) => "dp-zero3",
        Entry::Hand(Hand::PpOnly) => "pp-only",
    }
}

/// The best value of the rows with a plan.
fn best_value(rows: &[Row]) -> f64 {
    rows.iter()
        .filter_map(|r| r.result.as_ref().ok())
        .filter(|o| o.plan.is_some())
        .map(|o| o.value)
        .fold(f64::INFINITY, f64::min)
}

/// The comparison (`compare CONFIG.json --parallel 3d`) as a table: per row the layout, the
/// objective's value, its ratio to the best row, iteration, time per sample, MFU, status.
pub fn compare_text(rows: &[Row], objective: Objective) -> String {
    let mut t = Table::new([
        "row",
        "layout",
        "value ms",
        "vs best",
        "iteration ms",
        "per sample ms",
        "MFU",
        "status",
    ])
    .aligned([
        Align::Left,
        Align::Left,
        Align::Right,
        Align::Right,
        Align::Right,
        Align::Right,
        Align::Right,
        Align::Left,
    ]);
    let best = best_value(rows);
    for r in rows {
        let mut row = vec![r.entry.label().to_string()];
        match &r.result {
            Ok(o) if o.plan.is_some() => {
                let p = o.plan.as_ref().expect("plan");
                row.extend([
                    layout_code(p),
                    format!("{:.3}", o.value),
                    format!("{:.2}×", o.value / best),
                    p.score
                        .iteration_ms
                        .map_or("-".into(), |i| format!("{i:.1}")),
                    format!("{:.4}", p.score.time_per_sample_ms),
                    format!("{:.1}%", 100.0 * p.score.mfu),
                    status_line(o),
                ]);
            }
            Ok(o) => {
                row.extend(["-", "-", "-", "-", "-", "-"].map(String::from));
                row.push(status_line(o));
            }
            Err(why) => {
                row.extend(["-", "-", "-", "-", "-", "-"].map(String::from));
                row.push(why.clone());
            }
        }
        t.push(row);
    }
    format!(
        "the searches and the layouts a person tries first, objective {}\n\n{}",
        objective_name(objective),
        t.text()
    )
}

/// The comparison as JSON: `rows: [{entry, row, …layout_json}]`, or `{entry, row, error}`.
pub fn compare_json(rows: &[Row], topo: &Topology, objective: Objective) -> Value {
    let best = best_value(rows);
    let rows: Vec<CompareRowJson> = rows
        .iter()
        .map(|r| {
            let (layout, error) = match &r.result {
                Ok(o) => (Some(layout_json(o, topo, objective)), None),
                Err(why) => (None, Some(why.to_string())),
            };
            CompareRowJson {
                entry: entry_code(r.entry),
                row: r.entry.label().to_string(),
                vs_best: r
                    .result
                    .as_ref()
                    .ok()
                    .filter(|o| o.plan.is_some())
                    .map(|o| o.value / best),
                error,
                layout,
            }
        })
        .collect();
    json!({"parallel": "3d", "compare": true, "objective": objective_name(objective), "rows": rows})
}

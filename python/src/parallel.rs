//! `dnnplace.plan_parallel`: the whole parallel layout (pipeline stages × tensor parallel ×
//! data parallel, ZeRO, micro-batch) of a transformer's config.json or a MODEL.md training
//! workload on a cluster — `dnnplace plan MODEL --parallel 3d` from Python, with its
//! `--budget` (`budget=`) and `--target-tps` (`target_tps=`); `dnnplace.sweep_parallel`:
//! `--sweep`, the best uniform layout per device count.
//!
//! **One road.** The arguments become the library's
//! [`ParallelSettings`](dnnplace::solve::parallel::ParallelSettings) exactly as the
//! command line's flags do (`"auto"`, a number or a list written as the flag's text and
//! read by the same [`Choice`] readers), the library checks them and builds the problem
//! ([`ParallelSettings::build`]), [`parallel::plan`] searches it within the CLI's default
//! limits (60 s, 4 GiB) for the settings' [`Goal`], and the [`ParallelPlan`] holds the CLI's `--json` document
//! ([`layout_json`] and `peakMemoryBytes`) and its table ([`layout_text`]). Bad input raises
//! `InputError` with the CLI's message (which names the flag).
//!
//! **Threads.** Building the problem (pricing the model) and the search run in a worker
//! thread without the GIL ([`super::interruptible`]); Ctrl-C stops the search, which
//! returns its best layout so far (`stop_reason == "interrupted"`).

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};
use serde_json::Value;

use dnnplace::costmodel::DType;
use dnnplace::io::tensor_parallel_json::parse_tensor_parallel;
use dnnplace::model::parallel::Topology;
use dnnplace::model::recompute::Recompute;
use dnnplace::model::schedule::Schedule;
use dnnplace::report::parallel::{
    layout_json, layout_text, status_line, sweep_json, sweep_svg, sweep_text, target_json,
    target_line, target_missed, NO_SWEEP_LAYOUT,
};
use dnnplace::solve::budget::Budget;
use dnnplace::solve::parallel::{
    Answer, Choice, Goal, Layouts, Objective, ParallelModel, ParallelOutcome, ParallelSettings,
    Target,
};
use dnnplace::solve::Status;

use super::{input, interruptible, to_py, Cluster, InternalError, Workload, MEMORY_BUDGET};

/// The CLI's `--time-limit` default for a 3D search, seconds.
const DEFAULT_TIME_LIMIT_S: f64 = 60.0;

/// A 3D layout with its figures: the CLI's `plan --parallel 3d --json` document.
#[pyclass(module = "dnnplace")]
pub struct ParallelPlan {
    outcome: ParallelOutcome,
    topology: Topology,
    /// The groups of a cluster of several types (its exports carry the node-rank table).
    mixed: Option<dnnplace::model::parallel::MixedTopology>,
    objective: Objective,
    /// The CLI's `--json` document.
    json: Value,
    /// The notes the CLI prints on stderr (`note: …`), in order.
    #[pyo3(get)]
    notes: Vec<String>,
    /// Whether Ctrl-C stopped the search.
    #[pyo3(get)]
    interrupted: bool,
    /// The line the CLI prints after the table (`--target-tps`: what it found).
    trailer: String,
}

impl ParallelPlan {
    fn number(&self, key: &str) -> Option<f64> {
        self.json[key].as_f64()
    }
}

#[pymethods]
impl ParallelPlan {
    /// The objective's value, ms (the iteration time, or the time per sample).
    #[getter]
    fn value(&self) -> f64 {
        self.number("value").unwrap_or(f64::INFINITY)
    }

    /// `iteration` or `time-per-sample`.
    #[getter]
    fn objective(&self) -> String {
        self.json["objective"].as_str().unwrap_or("").to_string()
    }

    /// A proven lower bound on every layout of the space, ms.
    #[getter]
    fn bound_ms(&self) -> Option<f64> {
        self.number("bound")
    }

    /// `(value − bound) / value`, 0 when optimal.
    #[getter]
    fn gap(&self) -> Option<f64> {
        self.number("gap")
    }

    /// The status line (`optimal (proven: …)`, `feasible, gap 1.20% (stopped: …)`).
    #[getter]
    fn status(&self) -> String {
        status_line(&self.outcome)
    }

    /// Stable outcome word: `optimal`, `feasible`, ….
    #[getter]
    fn outcome(&self) -> String {
        self.json["outcome"].as_str().unwrap_or("").to_string()
    }

    /// Whether the layout is proven optimal.
    #[getter]
    fn optimal(&self) -> bool {
        self.outcome.status == Status::Optimal
    }

    /// Why the search stopped early (`time-limit`, `interrupted`, …), or None.
    #[getter]
    fn stop_reason(&self) -> Option<String> {
        self.json["stopReason"].as_str().map(str::to_string)
    }

    /// Time per iteration of the global batch, ms (None for free layouts whose stages
    /// differ in d: not defined).
    #[getter]
    fn iteration_ms(&self) -> Option<f64> {
        self.number("iterationMs")
    }

    /// Time per sample, ms.
    #[getter]
    fn time_per_sample_ms(&self) -> Option<f64> {
        self.number("timePerSampleMs")
    }

    /// Samples per second (the global batch per iteration, or one per time per sample).
    #[getter]
    fn samples_per_s(&self) -> Option<f64> {
        let plan = self.outcome.plan.as_ref()?;
        Some(match plan.score.iteration_ms {
            Some(i) => 1e3 * plan.layout.global_batch as f64 / i,
            None => 1e3 / plan.score.time_per_sample_ms,
        })
    }

    /// Model TFLOP/s per device.
    #[getter]
    fn tflops_per_device(&self) -> Option<f64> {
        self.number("tflopsPerDevice")
    }

    /// Model FLOPs utilisation (0 to 1).
    #[getter]
    fn mfu(&self) -> Option<f64> {
        self.number("mfu")
    }

    /// Accelerators the layout uses.
    #[getter]
    fn devices_used(&self) -> Option<u64> {
        self.json["devicesUsed"].as_u64()
    }

    /// Samples per micro-batch `b`.
    #[getter]
    fn micro_batch(&self) -> Option<u64> {
        self.json["microBatch"].as_u64()
    }

    /// Samples per iteration `B`.
    #[getter]
    fn global_batch(&self) -> Option<u64> {
        self.json["globalBatch"].as_u64()
    }

    /// The ZeRO stage 0–3.
    #[getter]
    fn zero(&self) -> Option<u64> {
        self.json["zero"].as_u64()
    }

    /// `gpipe` or `1f1b`.
    #[getter]
    fn schedule(&self) -> Option<String> {
        self.json["schedule"].as_str().map(str::to_string)
    }

    /// Whether every stage recomputes its activations.
    #[getter]
    fn recompute(&self) -> Option<bool> {
        self.json["recompute"].as_bool()
    }

    /// Whether the TP groups also split the sequence.
    #[getter]
    fn sequence_parallel(&self) -> Option<bool> {
        self.json["sequenceParallel"].as_bool()
    }

    /// Whether each stage's DP sync overlaps its last backward (`overlap_grad_reduce=True`).
    #[getter]
    fn overlap_grad_reduce(&self) -> Option<bool> {
        self.json["overlapGradReduce"].as_bool()
    }

    /// Whether every stage has the same t and d (False: `free=True`).
    #[getter]
    fn uniform(&self) -> bool {
        !self.outcome.free
    }

    /// What `target_tps=` found (`targetMs`, `devices`: the fewest accelerators whose best
    /// layout meets it, `proven`, `open`: the count a stopped search left open, `searched`), or
    /// None without a target.
    #[getter]
    fn target(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        match self.json.get("target") {
            Some(t) => to_py(py, t).map(Some),
            None => Ok(None),
        }
    }

    /// One dict per stage: `layers`, `accelerator`, `tensorParallel`, `dataParallel`,
    /// `devices`, `machines`, `computeMs`, `tensorParallelMs`, `transferMs`, `gatherMs`,
    /// `microBatchTimeMs`, `dpSyncMs`, `microBatches`, `inFlight`, `weightBytes`,
    /// `gradientBytes`, `optimizerBytes`, `activationBytes`, `memoryBytes`.
    #[getter]
    fn stages(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        to_py(py, &self.json["stages"])
    }

    /// The whole plan, as `dnnplace plan … --parallel 3d --json` prints it.
    fn to_json(&self) -> String {
        serde_json::to_string_pretty(&self.json).expect("json")
    }

    /// The table `dnnplace plan … --parallel 3d` prints.
    fn table(&self) -> String {
        layout_text(&self.outcome, &self.topology, self.objective) + &self.trailer
    }

    /// The layout in a framework's form: megatron, deepspeed, torchtitan or vllm (plan with
    /// `export=` to keep the search within what the framework runs).
    fn export(&self, format: &str) -> PyResult<String> {
        let target = Target::parse(format).map_err(input)?;
        let plan = self
            .outcome
            .plan
            .as_ref()
            .ok_or_else(|| input("no layout to export"))?;
        match &self.mixed {
            Some(m) => dnnplace::export::parallel::render_mixed(target.name(), plan, m),
            None => dnnplace::export::parallel::render(target.name(), plan),
        }
        .map_err(|why| input(format!("cannot export to {format}: {why}")))
    }

    fn __repr__(&self) -> String {
        format!(
            "<ParallelPlan {}={:.6} ms, {} stages, {}>",
            self.objective(),
            self.value(),
            self.json["stages"].as_array().map_or(0, Vec::len),
            self.status()
        )
    }
}

/// A setting given as `"auto"`, a number or a list of numbers, as the flag's text.
fn flag_text(value: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(s.to_string());
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let items: Vec<String> = value
            .try_iter()?
            .map(|x| x.and_then(|x| x.str().map(|s| s.to_string())))
            .collect::<PyResult<_>>()?;
        return Ok(items.join(","));
    }
    Ok(value.str()?.to_string())
}

/// The model: a path (a config.json or a workload JSON) or a `Workload` with the
/// `tensorParallel` options of the JSON it was read from.
fn model_of(model: &Bound<'_, PyAny>) -> PyResult<ParallelModel> {
    if let Ok(w) = model.cast::<Workload>() {
        let w = w.borrow();
        let options = match &w.source {
            Some(source) => parse_tensor_parallel(&source.to_string(), &w.inner).map_err(input)?,
            None => Default::default(),
        };
        return Ok(ParallelModel::Workload {
            workload: Box::new(w.inner.clone()),
            options,
        });
    }
    let path: PathBuf = model.extract().map_err(|_| {
        input("model: expected a path to a config.json or workload JSON, or a Workload")
    })?;
    Ok(ParallelModel::Path(path))
}

/// `--objective`: `iteration` or `throughput` (time per sample).
fn objective_of(name: &str) -> PyResult<Objective> {
    match name {
        "iteration" => Ok(Objective::Iteration),
        "throughput" | "time-per-sample" => Ok(Objective::TimePerSample),
        other => Err(input(format!(
            "--objective {other}: parallel layouts minimise `iteration` or `throughput` (time per sample)"
        ))),
    }
}

/// `--time-limit`: 1 ms to 1e9 s (the CLI's message), 60 s when None.
fn time_limit_of(seconds: Option<f64>) -> PyResult<f64> {
    let Some(s) = seconds else {
        return Ok(DEFAULT_TIME_LIMIT_S);
    };
    if !(1e-3..=1e9).contains(&s) {
        let text = if s.abs() >= 1e6 {
            format!("{s:e} s")
        } else {
            format!("{s} s")
        };
        return Err(input(format!(
            "--time-limit {text} is out of range (1 ms to 1e9 s, about 31.7 years); omit it for no limit"
        )));
    }
    Ok(s)
}

/// The arguments of `plan_parallel` and `sweep_parallel` that are not the flags' `auto`-able
/// choices.
struct Fixed<'a> {
    global_batch: usize,
    seq: Option<usize>,
    sequence_parallel: bool,
    overlap_grad_reduce: bool,
    schedule: &'a str,
    objective: &'a str,
    recompute: Option<&'a str>,
    dtype: Option<&'a str>,
    export: Option<String>,
}

/// The settings of `plan_parallel`'s and `sweep_parallel`'s arguments, as the CLI makes them
/// of its flags.
fn settings_of(
    (model, cluster): (ParallelModel, &Bound<'_, PyAny>),
    choices: [Option<&Bound<'_, PyAny>>; 5],
    fixed: Fixed<'_>,
) -> PyResult<ParallelSettings> {
    let [micro, tp, dp, pp, zero] = choices.map(|c| c.map(flag_text).transpose());
    let mut s = ParallelSettings::new(model);
    s.micro_batch = micro?.as_deref().map(Choice::count);
    s.tensor_parallel = tp?.as_deref().map_or(Choice::Auto, Choice::degrees);
    s.data_parallel = dp?.as_deref().map_or(Choice::Auto, Choice::count);
    s.pipeline_parallel = pp?.as_deref().map_or(Choice::Auto, Choice::count);
    s.zero = zero?.as_deref().map_or(Choice::Auto, Choice::zero);
    s.schedule = Some(
        fixed
            .schedule
            .parse::<Schedule>()
            .map_err(|e| input(format!("--schedule {}: {e}", fixed.schedule)))?,
    );
    s.objective = objective_of(fixed.objective)?;
    s.recompute = fixed
        .recompute
        .map(|r| {
            r.parse::<Recompute>()
                .map_err(|e| input(format!("--recompute {r}: {e}")))
        })
        .transpose()?;
    s.dtype = fixed
        .dtype
        .map(|d| DType::parse(d).map_err(|e| input(format!("--dtype {d}: {e}"))))
        .transpose()?;
    s.export = fixed.export;
    s.cluster = Some(cluster_spec(cluster)?);
    s.global_batch = Some(fixed.global_batch);
    s.seq = fixed.seq;
    s.sequence_parallel = fixed.sequence_parallel;
    s.overlap_grad_reduce = fixed.overlap_grad_reduce;
    Ok(s)
}

/// Why the worker made no plan: bad input (the CLI's exit 2) or a failed check (exit 3).
enum Failure {
    Input(String),
    Internal(String),
}

/// A search's answer with the devices and objective its report needs.
struct Searched {
    answer: Answer,
    topology: Topology,
    mixed: Option<dnnplace::model::parallel::MixedTopology>,
    objective: Objective,
}

/// Builds the problem of `settings` and answers its goal within `budget`; the notes the
/// build handed back go to `notes`, also when it fails.
fn build_and_answer(
    settings: &ParallelSettings,
    budget: &Budget,
    notes: &mut Vec<String>,
) -> Result<Searched, Failure> {
    let problem = settings
        .build(notes)
        .map_err(|e| Failure::Input(e.to_string()))?;
    let answer = dnnplace::simulate::parallel::answer(&problem, settings.goal, budget)
        .map_err(Failure::Internal)?;
    Ok(Searched {
        answer,
        topology: problem.topology(),
        mixed: match &problem.devices {
            dnnplace::solve::parallel::ParallelDevices::Mixed(m) => Some(m.clone()),
            dnnplace::solve::parallel::ParallelDevices::One(_) => None,
        },
        objective: problem.objective,
    })
}

/// The cluster argument as the CLI's `--cluster` text.
fn cluster_spec(cluster: &Bound<'_, PyAny>) -> PyResult<String> {
    match cluster.cast::<Cluster>() {
        Ok(c) => Ok(c.borrow().spec.clone()),
        Err(_) => cluster.extract::<String>().map_err(|_| {
            input(
                "cluster: expected a spec such as \"2x8xh100\", a cluster TOML path, or a Cluster",
            )
        }),
    }
}

/// Checks `settings`, answers their goal in a worker thread without the GIL (Ctrl-C stops
/// the search), and returns the answer, the notes and whether Ctrl-C stopped it.
fn run(
    py: Python<'_>,
    settings: &ParallelSettings,
    time_limit: Option<f64>,
) -> PyResult<(Searched, Vec<String>, bool)> {
    settings.check().map_err(input)?;
    let run_budget = Budget::new(Some(time_limit_of(time_limit)?), Some(MEMORY_BUDGET));
    let mut notes = Vec::new();
    let (found, interrupted) =
        interruptible(py, || build_and_answer(settings, &run_budget, &mut notes))?;
    let searched = found.map_err(|f| match f {
        Failure::Input(m) => input(m),
        Failure::Internal(m) => InternalError::new_err(m),
    })?;
    Ok((searched, notes, interrupted))
}

/// Plans the parallel layout of a transformer (a Hugging Face config.json) or a training
/// workload (a workload JSON path or a `Workload`, its nodes' `tensorParallel` options the
/// TP degrees) on `cluster`, as `dnnplace plan MODEL --parallel 3d` does (module
/// documentation). Choices are `"auto"`, a number, or (tensor_parallel) a list. `budget`:
/// a price per hour the accelerators may cost (`--budget`); `target_tps`: the fewest
/// accelerators whose best uniform layout takes at most this many ms per sample
/// (`--target-tps`; the plan's `target` says how many, and whether that is proven).
#[pyfunction]
#[pyo3(signature = (model, cluster, global_batch, micro_batch=None, tensor_parallel=None, data_parallel=None, pipeline_parallel=None, zero=None, schedule="1f1b", free=false, sequence_parallel=false, overlap_grad_reduce=false, objective="throughput", time_limit=None, recompute=None, seq=None, dtype=None, export=None, budget=None, target_tps=None))]
pub fn plan_parallel(
    model: &Bound<'_, PyAny>,
    cluster: &Bound<'_, PyAny>,
    global_batch: usize,
    micro_batch: Option<&Bound<'_, PyAny>>,
    tensor_parallel: Option<&Bound<'_, PyAny>>,
    data_parallel: Option<&Bound<'_, PyAny>>,
    pipeline_parallel: Option<&Bound<'_, PyAny>>,
    zero: Option<&Bound<'_, PyAny>>,
    schedule: &str,
    free: bool,
    sequence_parallel: bool,
    overlap_grad_reduce: bool,
    objective: &str,
    time_limit: Option<f64>,
    recompute: Option<&str>,
    seq: Option<usize>,
    dtype: Option<&str>,
    export: Option<String>,
    budget: Option<f64>,
    target_tps: Option<f64>,
) -> PyResult<ParallelPlan> {
    // The GIL token from an argument (the signature's count is Python's keywords).
    let py = model.py();
    let fixed = Fixed {
        global_batch,
        seq,
        sequence_parallel,
        overlap_grad_reduce,
        schedule,
        objective,
        recompute,
        dtype,
        export,
    };
    let choices = [
        micro_batch,
        tensor_parallel,
        data_parallel,
        pipeline_parallel,
        zero,
    ];
    let mut settings = settings_of((model_of(model)?, cluster), choices, fixed)?;
    settings.layouts = if free {
        Layouts::Free
    } else {
        Layouts::Uniform
    };
    settings.price_cap = budget;
    settings.goal = target_tps.map_or(Goal::One, |target_ms| Goal::FewestDevices { target_ms });
    let (searched, notes, interrupted) = run(py, &settings, time_limit)?;
    let (outcome, target) = match searched.answer {
        Answer::One(outcome) => (outcome, None),
        Answer::FewestDevices(found) if found.devices.is_none() => {
            return Err(input(target_missed(&found)))
        }
        Answer::FewestDevices(found) => {
            let json = target_json(&found);
            let line = target_line(&found);
            (found.outcome, Some((json, line)))
        }
        Answer::Sweep(_) => return Err(InternalError::new_err("a sweep answered one layout")),
    };
    if outcome.plan.is_none() {
        return Err(input(match &outcome.status {
            Status::Infeasible { reason, .. } => format!("no feasible layout: {reason}"),
            _ => status_line(&outcome),
        }));
    }
    let mut record = layout_json(&outcome, &searched.topology, searched.objective);
    record.peak_memory_bytes = dnnplace::experiments::bench::peak_memory_bytes();
    let mut trailer = String::new();
    if let Some((target, line)) = target {
        record.target = Some(target);
        trailer = line;
    }
    let json = serde_json::to_value(record).expect("a layout record serialises");
    Ok(ParallelPlan {
        outcome,
        topology: searched.topology,
        mixed: searched.mixed,
        objective: searched.objective,
        json,
        notes,
        interrupted,
        trailer,
    })
}

/// The best uniform layout per device count: `dnnplace plan MODEL --parallel 3d --sweep`.
#[pyclass(module = "dnnplace")]
pub struct ParallelSweep {
    rows: Vec<(usize, ParallelOutcome)>,
    objective: Objective,
    /// The CLI's `--sweep --json` document.
    json: Value,
    /// The notes the CLI prints on stderr (`note: …`), in order.
    #[pyo3(get)]
    notes: Vec<String>,
    /// Whether Ctrl-C stopped the sweep.
    #[pyo3(get)]
    interrupted: bool,
}

#[pymethods]
impl ParallelSweep {
    /// One dict per device count: `devices` and the plan's fields as `ParallelPlan.to_json()`
    /// gives them (`value`, `bound`, `gap`, `outcome`, `stages`, …).
    #[getter]
    fn rows(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        to_py(py, &self.json["rows"])
    }

    /// The sweep as `--sweep --json` prints it.
    fn to_json(&self) -> String {
        serde_json::to_string_pretty(&self.json).expect("json")
    }

    /// The table `--sweep` prints.
    fn table(&self) -> String {
        sweep_text(&self.rows, self.objective)
    }

    /// Samples per second against devices, as SVG (`--sweep --plot FILE.svg`).
    fn svg(&self) -> String {
        sweep_svg(&self.rows)
    }

    fn __len__(&self) -> usize {
        self.rows.len()
    }

    fn __repr__(&self) -> String {
        let counts: Vec<usize> = self.rows.iter().map(|(n, _)| *n).collect();
        format!("<ParallelSweep over {counts:?} devices>")
    }
}

/// The best layout for each device count of the cluster (1, 2, 4, … and the whole cluster;
/// on several types whole machines in the cluster's order), uniform or with `free=True`
/// free, as `dnnplace plan MODEL --parallel 3d [--free] --sweep` finds them: the arguments
/// are `plan_parallel`'s (without `export`, `budget`, `target_tps`); each count's
/// search gets an equal share of what is left of `time_limit`. Raises InputError when no
/// count has a layout.
#[pyfunction]
#[pyo3(signature = (model, cluster, global_batch, micro_batch=None, tensor_parallel=None, data_parallel=None, pipeline_parallel=None, zero=None, schedule="1f1b", free=false, sequence_parallel=false, overlap_grad_reduce=false, objective="throughput", time_limit=None, recompute=None, seq=None, dtype=None))]
pub fn sweep_parallel(
    py: Python<'_>,
    model: &Bound<'_, PyAny>,
    cluster: &Bound<'_, PyAny>,
    global_batch: usize,
    micro_batch: Option<&Bound<'_, PyAny>>,
    tensor_parallel: Option<&Bound<'_, PyAny>>,
    data_parallel: Option<&Bound<'_, PyAny>>,
    pipeline_parallel: Option<&Bound<'_, PyAny>>,
    zero: Option<&Bound<'_, PyAny>>,
    schedule: &str,
    free: bool,
    sequence_parallel: bool,
    overlap_grad_reduce: bool,
    objective: &str,
    time_limit: Option<f64>,
    recompute: Option<&str>,
    seq: Option<usize>,
    dtype: Option<&str>,
) -> PyResult<ParallelSweep> {
    let fixed = Fixed {
        global_batch,
        seq,
        sequence_parallel,
        overlap_grad_reduce,
        schedule,
        objective,
        recompute,
        dtype,
        export: None,
    };
    let choices = [
        micro_batch,
        tensor_parallel,
        data_parallel,
        pipeline_parallel,
        zero,
    ];
    let mut settings = settings_of((model_of(model)?, cluster), choices, fixed)?;
    settings.layouts = if free {
        Layouts::Free
    } else {
        Layouts::Uniform
    };
    settings.goal = Goal::Sweep;
    let (searched, notes, interrupted) = run(py, &settings, time_limit)?;
    let Answer::Sweep(rows) = searched.answer else {
        return Err(InternalError::new_err("one layout answered a sweep"));
    };
    if rows.iter().all(|(_, o)| o.plan.is_none()) {
        return Err(input(NO_SWEEP_LAYOUT));
    }
    let json = sweep_json(&rows, &searched.topology, searched.objective);
    Ok(ParallelSweep {
        rows,
        objective: searched.objective,
        json,
        notes,
        interrupted,
    })
}

//! `dnnplace` for Python (PyO3): workloads, clusters, `plan`, `plan_parallel` (the 3D
//! layout, [`parallel`]), `score`, `simulate` and exports, calling the library exactly as the CLI's `plan`, `score`, `simulate` and
//! `export` commands do (the same [`Problem`], limits and defaults, the same JSON), so a
//! plan made here equals the CLI's.
//!
//! **Threads and Ctrl-C.** A solve runs in a worker thread without the GIL; the calling
//! thread sleeps in 50 ms steps (without the GIL) and between them runs Python's signal
//! handlers (`PyErr_CheckSignals`). When they raise `KeyboardInterrupt` it sets the
//! library's process-wide interrupt flag ([`budget::request_interrupt`], what the CLI's
//! SIGINT handler sets) and waits for the solver, which returns its best plan so far with
//! `stopReason = "interrupted"`; the `KeyboardInterrupt` is dropped, as the CLI prints
//! the plan. A method that has no plan when interrupted (the DP before its last level)
//! raises `InputError` with the CLI's message.
//!
//! **Errors.** Bad input raises `InputError` (a `ValueError`) with the CLI's message (the
//! CLI's exit status 2); an internal check that failed raises `InternalError` (a
//! `RuntimeError`; the CLI's status 3).

mod parallel;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use serde_json::{json, Value};

use dnnplace::costmodel::cluster::cluster_from_arg;
use dnnplace::costmodel::onnx::{import_file, ImportOptions};
use dnnplace::costmodel::onnx_parallel;
use dnnplace::costmodel::{
    builtin_profiles, find_profile, to_workload, transformer_graph, CostSettings, DType, Head,
    Style, TransformerSpec,
};
use dnnplace::export::{self, LayerPlan};
use dnnplace::io::tensor_parallel_json::workload_to_json_with_tensor_parallel;
use dnnplace::io::{
    parse_placement, parse_workload, read_workload, workload_to_json, write_atomically,
};
use dnnplace::model::layers::Layers;
use dnnplace::model::recompute::Recompute;
use dnnplace::model::schedule::{Pipeline, Schedule};
use dnnplace::model::{
    Cluster as CoreCluster, DeviceSet, Placement, Platform, Workload as CoreWorkload,
};
use dnnplace::report::html::{report_html, ReportInput};
use dnnplace::report::plan_json::PipelineJson;
use dnnplace::report::simulation::simulation_json;
use dnnplace::report::table::status_text;
use dnnplace::report::{ClaimJson, EvaluationJson, PlanJson};
use dnnplace::score::{evaluate_with, Evaluation, LatencyScoring};
use dnnplace::simulate::{simulate as core_simulate, Settings as SimSettings};
use dnnplace::solve::auto::Auto;
use dnnplace::solve::budget;
use dnnplace::solve::coarsen::CoarsenSettings;
use dnnplace::solve::{
    self, method_names, Limits, MethodId, Objective, Outcome, Problem, SolveError, Status,
};

create_exception!(
    _dnnplace,
    InputError,
    PyValueError,
    "Bad input: the CLI's exit status 2, with its message."
);
create_exception!(
    _dnnplace,
    InternalError,
    PyRuntimeError,
    "An internal check failed (a bug): the CLI's exit status 3."
);

pub(crate) fn input(msg: impl std::fmt::Display) -> PyErr {
    InputError::new_err(msg.to_string())
}

fn solve_err(e: SolveError) -> PyErr {
    match e {
        SolveError::Check(_) | SolveError::Solver(_) => InternalError::new_err(e.to_string()),
        _ => input(e),
    }
}

/// The CLI's `--memory-budget` default, 4 GiB.
pub(crate) const MEMORY_BUDGET: f64 = 4.0 * (1u64 << 30) as f64;
/// The CLI's default micro-batches.
const DEFAULT_MICRO_BATCHES: usize = 8;

/// A workload: the operator graph with per-node times and memory, and the device set.
#[pyclass(module = "dnnplace")]
#[derive(Clone)]
pub struct Workload {
    pub inner: CoreWorkload,
    /// The JSON document it was read from: fields the library does not read (a profile's
    /// timings, `tiedParameters`, `tensorParallel`) are written back by [`Workload::to_json`].
    pub(crate) source: Option<Value>,
}

impl Workload {
    fn new(inner: CoreWorkload) -> Workload {
        Workload {
            inner,
            source: None,
        }
    }

    fn read(text: &str) -> PyResult<Workload> {
        let inner = parse_workload(text).map_err(input)?;
        let source = serde_json::from_str(text.trim_start_matches('\u{feff}')).ok();
        Ok(Workload { inner, source })
    }
}

/// `out` (the library's JSON of a workload) with the top-level and per-node fields of
/// `source` that `out` lacks (nodes matched by id).
fn keep_extras(out: String, source: &Option<Value>) -> String {
    let Some(source) = source else { return out };
    let (Ok(mut v), Some(src)) = (serde_json::from_str::<Value>(&out), source.as_object()) else {
        return out;
    };
    let Some(obj) = v.as_object_mut() else {
        return out;
    };
    for (k, x) in src {
        if !obj.contains_key(k) {
            obj.insert(k.clone(), x.clone());
        }
    }
    let src_nodes: std::collections::HashMap<i64, &serde_json::Map<String, Value>> = src
        .get("nodes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|n| Some((n.get("id")?.as_i64()?, n.as_object()?)))
        .collect();
    if let Some(nodes) = obj.get_mut("nodes").and_then(Value::as_array_mut) {
        for n in nodes.iter_mut() {
            let Some(id) = n.get("id").and_then(Value::as_i64) else {
                continue;
            };
            let (Some(extra), Some(node)) = (src_nodes.get(&id), n.as_object_mut()) else {
                continue;
            };
            for (k, x) in extra.iter() {
                if !node.contains_key(k) {
                    node.insert(k.clone(), x.clone());
                }
            }
        }
    }
    serde_json::to_string_pretty(&v).expect("json") + "\n"
}

#[pymethods]
impl Workload {
    /// Reads a workload JSON file (MODEL.md format).
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Workload> {
        read_workload(&path).map_err(input)?;
        let text = std::fs::read_to_string(&path)
            .map_err(|e| input(format!("{}: {e}", path.display())))?;
        Workload::read(&text)
    }

    /// Parses workload JSON text.
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<Workload> {
        Workload::read(text)
    }

    /// A Hugging Face model from its `config.json` (a path, or the config as a dict or JSON
    /// text), priced with a device profile (`generate transformer --hf-config`). `dtype`
    /// defaults to the config's `torch_dtype` (else fp32).
    #[staticmethod]
    #[pyo3(signature = (config, seq=512, batch=1, training=false, dtype=None, device="a100-80gb", cpu_device="cpu-core", accelerators=4, cpus=1))]
    fn from_hf_config(
        config: &Bound<'_, PyAny>,
        seq: usize,
        batch: usize,
        training: bool,
        dtype: Option<&str>,
        device: &str,
        cpu_device: &str,
        accelerators: usize,
        cpus: usize,
    ) -> PyResult<Workload> {
        let text = hf_config_text(config)?;
        let model =
            dnnplace::costmodel::hf_config::parse_hf_config(&text, seq, batch).map_err(input)?;
        let mut settings = cost_settings(
            device,
            cpu_device,
            dtype.unwrap_or("fp32"),
            training,
            accelerators,
            cpus,
        )?;
        if dtype.is_none() {
            settings.dtype = model.dtype.unwrap_or(settings.dtype);
        }
        let graph = transformer_graph(&model.spec, settings.dtype).map_err(input)?;
        let w =
            to_workload(&graph, &settings).map_err(|e| input(format!("invalid workload: {e}")))?;
        Ok(Workload::new(w))
    }

    /// Imports an ONNX model priced with the analytic cost model of a device profile.
    #[staticmethod]
    /// With `tensor_parallel` (a list of TP degrees, `import --tensor-parallel`), every
    /// node gets its `layerId` and its Megatron-style `tensorParallel` options
    /// (`docs/parallel.md`), kept in the workload's JSON for `plan_parallel`.
    #[pyo3(signature = (path, device="a100-80gb", cpu_device="cpu-core", training=false, dtype="fp32", batch=None, seq=None, accelerators=4, cpus=1, tensor_parallel=None))]
    fn from_onnx(
        path: PathBuf,
        device: &str,
        cpu_device: &str,
        training: bool,
        dtype: &str,
        batch: Option<usize>,
        seq: Option<usize>,
        accelerators: usize,
        cpus: usize,
        tensor_parallel: Option<Vec<usize>>,
    ) -> PyResult<Workload> {
        let settings = cost_settings(device, cpu_device, dtype, training, accelerators, cpus)?;
        let options = ImportOptions {
            batch,
            seq,
            dtype: settings.dtype,
            training,
        };
        let mut imported = import_file(&path, &options).map_err(input)?;
        let Some(mut degrees) = tensor_parallel else {
            let w = to_workload(&imported.graph, &settings)
                .map_err(|e| input(format!("invalid workload: {e}")))?;
            return Ok(Workload::new(w));
        };
        let splits = onnx_parallel::prepare(&mut imported.graph, &imported.shapes, &mut degrees)
            .map_err(input)?;
        let w = to_workload(&imported.graph, &settings)
            .map_err(|e| input(format!("invalid workload: {e}")))?;
        let tp =
            onnx_parallel::tensor_parallel_options(&imported.graph, &splits, &settings, &degrees);
        let text = workload_to_json_with_tensor_parallel(&w, &tp).map_err(input)?;
        Ok(Workload {
            inner: w,
            source: serde_json::from_str(&text).ok(),
        })
    }

    /// The workload as JSON text (MODEL.md format, with the cost model's extra fields).
    fn to_json(&self) -> String {
        keep_extras(workload_to_json(&self.inner), &self.source)
    }

    /// Writes the workload JSON to `path`, atomically.
    fn save(&self, path: PathBuf) -> PyResult<()> {
        write_atomically(&path, &self.to_json()).map_err(input)
    }

    /// A copy with another device set (`None` keeps the current value).
    #[pyo3(signature = (accelerators=None, cpus=None, memory=None))]
    fn with_devices(
        &self,
        accelerators: Option<usize>,
        cpus: Option<usize>,
        memory: Option<&str>,
    ) -> PyResult<Workload> {
        Ok(Workload {
            inner: apply_devices(self.inner.clone(), accelerators, cpus, memory)?,
            source: self.source.clone(),
        })
    }

    /// Number of nodes.
    #[getter]
    fn num_nodes(&self) -> usize {
        self.inner.nodes().len()
    }

    /// `(accelerators, cpus, memory_per_accelerator_bytes)`.
    #[getter]
    fn devices(&self) -> (usize, usize, f64) {
        let d = self.inner.devices();
        (d.accelerators, d.cpus, d.memory_per_accelerator_bytes)
    }

    fn __len__(&self) -> usize {
        self.inner.nodes().len()
    }

    fn __repr__(&self) -> String {
        let d = self.inner.devices();
        format!(
            "<Workload {} nodes, {} accelerators, {} CPUs>",
            self.inner.nodes().len(),
            d.accelerators,
            d.cpus
        )
    }
}

fn cost_settings(
    device: &str,
    cpu_device: &str,
    dtype: &str,
    training: bool,
    accelerators: usize,
    cpus: usize,
) -> PyResult<CostSettings> {
    Ok(CostSettings {
        accelerator: find_profile(device, &[]).map_err(input)?,
        cpu: find_profile(cpu_device, &[]).map_err(input)?,
        dtype: DType::parse(dtype).map_err(input)?,
        training,
        accelerators,
        cpus,
    })
}

fn apply_devices(
    w: CoreWorkload,
    accelerators: Option<usize>,
    cpus: Option<usize>,
    memory: Option<&str>,
) -> PyResult<CoreWorkload> {
    if accelerators.is_none() && cpus.is_none() && memory.is_none() {
        return Ok(w);
    }
    if w.cluster().is_some() {
        return Err(input("the workload has a cluster section; accelerators, cpus and memory apply to MODEL.md's device set (give cluster= instead)"));
    }
    let memory = memory
        .map(|m| dnnplace::model::parse_bytes(m).map_err(|e| input(format!("memory: {e}"))))
        .transpose()?;
    let d = w.devices();
    let devices = DeviceSet {
        accelerators: accelerators.unwrap_or(d.accelerators),
        cpus: cpus.unwrap_or(d.cpus),
        memory_per_accelerator_bytes: memory.unwrap_or(d.memory_per_accelerator_bytes),
    };
    w.with_devices(devices)
        .map_err(|e| input(format!("invalid workload: {e}")))
}

/// Generates a transformer workload priced with a device profile (`dnnplace generate
/// transformer`).
#[pyfunction]
#[pyo3(signature = (style="gpt2", layers=12, hidden=768, heads=12, seq=512, batch=1, ffn=None, vocab=None, head=None, training=false, dtype="fp32", device="a100-80gb", cpu_device="cpu-core", accelerators=4, cpus=1))]
fn generate_transformer(
    style: &str,
    layers: usize,
    hidden: usize,
    heads: usize,
    seq: usize,
    batch: usize,
    ffn: Option<usize>,
    vocab: Option<usize>,
    head: Option<&str>,
    training: bool,
    dtype: &str,
    device: &str,
    cpu_device: &str,
    accelerators: usize,
    cpus: usize,
) -> PyResult<Workload> {
    let spec = TransformerArgs {
        style,
        layers,
        hidden,
        heads,
        seq,
        batch,
        ffn,
        vocab,
        head,
    }
    .spec()?;
    let settings = cost_settings(device, cpu_device, dtype, training, accelerators, cpus)?;
    let graph = transformer_graph(&spec, settings.dtype).map_err(input)?;
    let w = to_workload(&graph, &settings).map_err(|e| input(format!("invalid workload: {e}")))?;
    Ok(Workload::new(w))
}

/// The text of a `config.json` given as a path, a dict or JSON text.
fn hf_config_text(config: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(path) = config.extract::<PathBuf>() {
        if !config.is_instance_of::<pyo3::types::PyString>() || path.exists() {
            return dnnplace::io::read_input_text(&path, dnnplace::io::TEXT_LIMIT_BYTES)
                .map_err(|e| input(format!("{}: {e}", path.display())));
        }
    }
    if let Ok(text) = config.extract::<String>() {
        return Ok(text);
    }
    let json = config
        .py()
        .import("json")?
        .call_method1("dumps", (config,))?;
    json.extract::<String>()
}

/// The transformer arguments of `generate_transformer` and `calibrate`.
struct TransformerArgs<'a> {
    style: &'a str,
    layers: usize,
    hidden: usize,
    heads: usize,
    seq: usize,
    batch: usize,
    ffn: Option<usize>,
    vocab: Option<usize>,
    head: Option<&'a str>,
}

impl TransformerArgs<'_> {
    /// The transformer they describe; an error names an unknown style or head.
    fn spec(&self) -> PyResult<TransformerSpec> {
        let style = match self.style {
            "bert" => Style::Bert,
            "gpt2" => Style::Gpt2,
            "llama" => Style::Llama,
            other => {
                return Err(input(format!(
                    "unknown style '{other}'; known: bert, gpt2, llama"
                )))
            }
        };
        let TransformerArgs {
            layers,
            hidden,
            heads,
            seq,
            batch,
            ffn,
            vocab,
            head,
            ..
        } = *self;
        let mut spec = TransformerSpec::new(style, layers, hidden, heads, seq, batch);
        spec.ffn = ffn.unwrap_or(spec.ffn);
        spec.vocab = vocab.unwrap_or(spec.vocab);
        spec.head = match head {
            None => spec.head,
            Some("bert") => Head::Bert,
            Some("lm") => Head::Lm,
            Some("none") => Head::None,
            Some(other) => {
                return Err(input(format!(
                    "unknown head '{other}'; known: bert, lm, none"
                )))
            }
        };
        Ok(spec)
    }
}

/// Fits a device profile to a measured profile (`dnnplace calibrate`; docs/costmodel.md):
/// returns the calibration as a dict and, with `out`, writes the fitted profile as a
/// device file.
#[pyfunction]
#[pyo3(signature = (measured, device="a100-80gb", dtype="fp32", style="gpt2", layers=12, hidden=768, heads=12, seq=512, batch=1, ffn=None, vocab=None, head=None, onnx=None, name=None, out=None))]
fn calibrate(
    py: Python<'_>,
    measured: &Workload,
    device: &str,
    dtype: &str,
    style: &str,
    layers: usize,
    hidden: usize,
    heads: usize,
    seq: usize,
    batch: usize,
    ffn: Option<usize>,
    vocab: Option<usize>,
    head: Option<&str>,
    onnx: Option<PathBuf>,
    name: Option<String>,
    out: Option<PathBuf>,
) -> PyResult<Py<PyAny>> {
    let base = find_profile(device, &[]).map_err(input)?;
    let dtype = DType::parse(dtype).map_err(input)?;
    let graph = match onnx {
        Some(path) => {
            let options = ImportOptions {
                batch: Some(batch),
                seq: Some(seq),
                dtype,
                training: false,
            };
            import_file(&path, &options).map_err(input)?.graph
        }
        None => {
            let spec = TransformerArgs {
                style,
                layers,
                hidden,
                heads,
                seq,
                batch,
                ffn,
                vocab,
                head,
            }
            .spec()?;
            transformer_graph(&spec, dtype).map_err(input)?
        }
    };
    let mut cal =
        dnnplace::costmodel::calibrate(&graph, &measured.inner, &base, dtype).map_err(input)?;
    if let Some(name) = name {
        cal.fitted.name = name;
    }
    if let Some(path) = out {
        write_atomically(
            &path,
            &cal.to_device_file("a measured profile (dnnplace.calibrate)"),
        )
        .map_err(input)?;
    }
    to_py(py, &serde_json::to_value(&cal).expect("serialises"))
}

/// A cluster: `MxNxTYPE` terms joined by `+` (`"2x8xh100"`), or a cluster TOML file.
#[pyclass(module = "dnnplace")]
#[derive(Clone)]
pub struct Cluster {
    inner: CoreCluster,
    pub(crate) spec: String,
}

#[pymethods]
impl Cluster {
    /// Parses a cluster spec (`"2x8xh100"`, `"1x4xa100-80gb+1x8xv100"`) or reads a TOML file.
    #[staticmethod]
    fn parse(spec: &str) -> PyResult<Cluster> {
        let inner = cluster_from_arg(spec, &builtin_profiles()).map_err(input)?;
        Ok(Cluster {
            inner,
            spec: spec.to_string(),
        })
    }

    /// The number of accelerators.
    #[getter]
    fn accelerators(&self) -> usize {
        self.inner.device_set().accelerators
    }

    fn __repr__(&self) -> String {
        format!(
            "<Cluster {}: {} accelerators>",
            self.spec,
            self.inner.device_set().accelerators
        )
    }
}

/// Runs `f` in a worker thread without the GIL; the calling thread runs Python's signal
/// handlers every 50 ms and turns a `KeyboardInterrupt` into the library's interrupt flag
/// (module documentation).
pub(crate) fn interruptible<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> T + Send,
) -> PyResult<(T, bool)> {
    budget::clear_interrupt();
    let done = AtomicBool::new(false);
    let mut interrupted = false;
    let result = std::thread::scope(|s| {
        let worker = s.spawn(|| {
            let r = f();
            done.store(true, Ordering::SeqCst);
            r
        });
        while !done.load(Ordering::SeqCst) {
            py.detach(|| std::thread::sleep(Duration::from_millis(50)));
            if !interrupted && py.check_signals().is_err() {
                interrupted = true;
                budget::request_interrupt();
            }
        }
        worker.join()
    });
    budget::clear_interrupt();
    match result {
        Ok(r) => Ok((r, interrupted)),
        Err(_) => Err(InternalError::new_err(
            "the solver panicked (a bug; please report it)",
        )),
    }
}

/// A plan: the placement, its score and how it was found.
#[pyclass(module = "dnnplace")]
pub struct Plan {
    workload: CoreWorkload,
    placement: Placement,
    /// The scorer's evaluation and the method's outcome (the report's figures; `None` for
    /// a cluster plan).
    scored: Option<(Evaluation, Outcome)>,
    /// The CLI's `plan --json` document.
    json: Value,
    /// The objective's name.
    objective: String,
    /// Whether Ctrl-C stopped the run.
    #[pyo3(get)]
    interrupted: bool,
}

#[pymethods]
impl Plan {
    /// The plan's Time-Per-Sample (max load), ms, as the scorer computes it.
    #[getter]
    fn tps_ms(&self) -> f64 {
        self.json["maxLoad"].as_f64().unwrap_or(f64::INFINITY)
    }

    /// The objective's value (TPS, sync or latency), ms.
    #[getter]
    fn value(&self) -> f64 {
        self.json["value"].as_f64().unwrap_or(f64::INFINITY)
    }

    /// The objective's name.
    #[getter]
    fn objective(&self) -> String {
        self.objective.clone()
    }

    /// A proven lower bound on the optimum, ms.
    #[getter]
    fn bound_ms(&self) -> f64 {
        self.json["bound"].as_f64().unwrap_or(0.0)
    }

    /// `(value − bound) / value`.
    #[getter]
    fn gap(&self) -> f64 {
        self.json["gap"].as_f64().unwrap_or(f64::NAN)
    }

    /// Readable status (`proven optimal`, `feasible, gap 1.2%`, ...).
    #[getter]
    fn status(&self) -> String {
        self.json["status"].as_str().unwrap_or("").to_string()
    }

    /// Stable outcome word: `optimal`, `feasible`, `heuristic`.
    #[getter]
    fn outcome(&self) -> String {
        self.json["outcome"].as_str().unwrap_or("").to_string()
    }

    /// Why the run stopped early (`time-limit`, `interrupted`, ...), or None.
    #[getter]
    fn stop_reason(&self) -> Option<String> {
        self.json["stopReason"].as_str().map(str::to_string)
    }

    /// The method that made the plan.
    #[getter]
    fn method(&self) -> String {
        self.json["method"].as_str().unwrap_or("").to_string()
    }

    /// One dict per used device: `device`, `nodes` (node ids), `load`, `compute`,
    /// `communication`, `memoryBytes`, `bottleneck`, `modules` (the module paths it holds).
    #[getter]
    fn devices(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let holdings = &self.json["holdings"];
        let mut out = Vec::new();
        for d in self.json["devices"].as_array().into_iter().flatten() {
            let mut d = d.clone();
            let name = d["device"].clone();
            let held = holdings
                .as_array()
                .into_iter()
                .flatten()
                .find(|h| h["device"] == name);
            d["modules"] = held.map_or(json!([]), |h| h["modules"].clone());
            out.push(d);
        }
        to_py(py, &Value::Array(out))
    }

    /// The placement JSON (MODEL.md shape, as `plan --out` writes it).
    fn placement_json(&self) -> String {
        serde_json::to_string_pretty(&self.json["placement"]).expect("json") + "\n"
    }

    /// Writes the placement JSON to `path`, atomically.
    fn save(&self, path: PathBuf) -> PyResult<()> {
        write_atomically(&path, &self.placement_json()).map_err(input)
    }

    /// The whole plan as the CLI's `plan --json` prints it.
    fn to_json(&self) -> String {
        serde_json::to_string_pretty(&self.json).expect("json")
    }

    /// The plan in a framework's form: torch, torch-json, deepspeed, megatron, vllm,
    /// accelerate (`dnnplace export`).
    fn export(&self, format: &str) -> PyResult<String> {
        export_text(format, &self.workload, &self.placement)
    }

    /// Writes the HTML report (the plan simulated under `schedule` with `micro_batches`).
    #[pyo3(signature = (path, schedule="1f1b", micro_batches=DEFAULT_MICRO_BATCHES))]
    fn report(
        &self,
        py: Python<'_>,
        path: PathBuf,
        schedule: &str,
        micro_batches: usize,
    ) -> PyResult<()> {
        let settings = SimSettings {
            schedule: parse_schedule(schedule)?,
            micro_batches,
        };
        let (w, p) = (&self.workload, &self.placement);
        let Some((evaluation, outcome)) = &self.scored else {
            return Err(input("on a cluster, the report is not available yet (as with the CLI's plan --cluster --report)"));
        };
        let title = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        let page = py.detach(|| -> PyResult<String> {
            let simulation = core_simulate(w, p, &settings).map_err(input)?;
            Ok(report_html(&ReportInput {
                title: &title,
                workload: w,
                placement: p,
                evaluation,
                outcome: Some(outcome),
                simulation: Some(&simulation),
            }))
        })?;
        write_atomically(&path, &page).map_err(input)
    }

    fn __repr__(&self) -> String {
        format!(
            "<Plan {}={:.6} ms, bound {:.6}, {}>",
            self.objective,
            self.value(),
            self.bound_ms(),
            self.status()
        )
    }
}

pub(crate) fn to_py(py: Python<'_>, v: &Value) -> PyResult<Py<PyAny>> {
    let json = py.import("json")?;
    Ok(json.call_method1("loads", (v.to_string(),))?.unbind())
}

fn parse_schedule(text: &str) -> PyResult<Schedule> {
    text.parse::<Schedule>()
        .map_err(|e| input(format!("schedule: {e}")))
}

fn export_text(format: &str, w: &CoreWorkload, placement: &Placement) -> PyResult<String> {
    let exporter = export::exporter_by_name(format).ok_or_else(|| {
        input(format!(
            "unknown export format '{format}'; known: {}",
            export::format_names().join(", ")
        ))
    })?;
    let layers = Layers::new(w).map_err(|e| input(format!("layer granularity: {e}")))?;
    let plan = LayerPlan::new(w, &layers, placement)
        .map_err(|reason| input(format!("cannot export to {}: {reason}", exporter.name())))?;
    export::export(exporter.as_ref(), &plan).map_err(|e| match e {
        export::ExportError::Internal { .. } => InternalError::new_err(e.to_string()),
        _ => input(e),
    })
}

fn objective_of(name: &str, pieces: usize) -> PyResult<Objective> {
    match name {
        "throughput" => Ok(Objective::Throughput),
        "sync" => Ok(Objective::Sync),
        "latency" if pieces >= 1 => Ok(Objective::Latency { pieces }),
        "latency" => Err(input(format!(
            "pieces {pieces} is out of range: at least 1 (the pieces one accelerator may hold)"
        ))),
        other => Err(input(format!(
            "unknown objective '{other}'; known: throughput, sync, latency"
        ))),
    }
}

/// Plans a workload: the same defaults and library calls as `dnnplace plan` (method
/// `auto` with a 60 s default limit; schedule memory with `schedule=`; layer granularity
/// with `granularity="layer"`). On a `cluster`, the cluster planner (method auto/dp, ip or
/// brute-force). Ctrl-C stops the solver and returns the best plan so far.
#[pyfunction]
#[pyo3(signature = (workload, cluster=None, method="auto", objective="throughput", schedule=None, micro_batches=None, recompute=None, time_limit=None, gap=None, threads=None, non_contiguous=false, pieces=1, granularity=None, accelerators=None, cpus=None, memory=None))]
fn plan(
    py: Python<'_>,
    workload: &Workload,
    cluster: Option<&Cluster>,
    method: &str,
    objective: &str,
    schedule: Option<&str>,
    micro_batches: Option<usize>,
    recompute: Option<&str>,
    time_limit: Option<f64>,
    gap: Option<f64>,
    threads: Option<usize>,
    non_contiguous: bool,
    pieces: usize,
    granularity: Option<&str>,
    accelerators: Option<usize>,
    cpus: Option<usize>,
    memory: Option<&str>,
) -> PyResult<Plan> {
    let id = method_id_of(method)?;
    let objective = objective_of(objective, pieces)?;
    let contiguous = !non_contiguous && !id.only_non_contiguous();
    let limits = limits_of(time_limit, gap, threads)?;
    let pipeline = pipeline_of(schedule, micro_batches, recompute, id)?;
    if let Some(c) = cluster {
        if pipeline.is_some()
            || granularity.is_some()
            || accelerators.is_some()
            || cpus.is_some()
            || memory.is_some()
        {
            return Err(input("on a cluster, schedule, granularity, accelerators, cpus and memory do not apply (the cluster planner prices MODEL.md's memory)"));
        }
        return plan_cluster(py, &workload.inner, c, id, objective, contiguous, limits);
    }
    let w = apply_devices(workload.inner.clone(), accelerators, cpus, memory)?;
    if w.cluster().is_some() {
        return Err(input(
            "the workload has a cluster section: give cluster= (the cluster planner)",
        ));
    }
    let layers = layers_of(&w, granularity)?;
    let problem = Problem {
        workload: &w,
        devices: dnnplace::solve::Devices::of(&w),
        objective,
        contiguous,
        limits,
        pipeline,
    };
    let chosen: Box<dyn solve::Method> = match id {
        MethodId::Auto => Box::new(Auto::new(CoarsenSettings::default())),
        other => solve::method(other),
    };
    let (result, interrupted) = interruptible(py, || match &layers {
        Some(l) => solve::layer_granular::plan_by_layers(chosen.as_ref(), &problem, l),
        None => solve::plan(chosen.as_ref(), &problem),
    })?;
    let checked = result.map_err(solve_err)?;
    let (Some(placement), Some(evaluation)) = (&checked.outcome.placement, &checked.evaluation)
    else {
        return Err(input(no_plan_message(&checked.outcome)));
    };
    let names = layers
        .clone()
        .unwrap_or_else(|| Layers::new(&w).unwrap_or_else(|_| Layers::per_node(&w)));
    let v = PlanJson {
        pipeline: problem
            .pipeline
            .as_ref()
            .zip(checked.pipeline_memory.as_ref())
            .map(|(pipeline, memory)| PipelineJson::of(pipeline, memory)),
        ..PlanJson::new(
            EvaluationJson::of(&w, placement, problem.objective, evaluation),
            ClaimJson::of(&checked.outcome, checked.outcome.method.name()),
            dnnplace::report::layers::holdings_json(&w, &names, placement),
        )
    }
    .to_value();
    Ok(Plan {
        placement: placement.clone(),
        scored: Some((evaluation.clone(), checked.outcome.clone())),
        json: v,
        objective: problem.objective.name().to_string(),
        workload: w.clone(),
        interrupted,
    })
}

fn no_plan_message(outcome: &Outcome) -> String {
    match &outcome.status {
        Status::Infeasible { reason, .. } => format!("no feasible placement: {reason}"),
        _ => status_text(outcome),
    }
}

fn pipeline_of(
    schedule: Option<&str>,
    micro_batches: Option<usize>,
    recompute: Option<&str>,
    id: MethodId,
) -> PyResult<Option<Pipeline>> {
    if let Some(m) = micro_batches {
        if !(1..=1 << 20).contains(&m) {
            return Err(input(format!(
                "micro_batches {m} is out of range (1 to 1048576)"
            )));
        }
    }
    let recompute = recompute
        .map(|r| {
            r.parse::<Recompute>()
                .map_err(|e| input(format!("recompute: {e}")))
        })
        .transpose()?;
    let Some(schedule) = schedule else {
        if micro_batches.is_some() || recompute.is_some() {
            return Err(input("micro_batches and recompute need schedule='gpipe'|'1f1b'|'interleaved:v' (the memory to plan)"));
        }
        return Ok(None);
    };
    if !matches!(id, MethodId::Dp | MethodId::Auto | MethodId::Ip) {
        return Err(input(format!("schedule: only method dp, auto and ip plan under a schedule's memory ({id} does not model it)")));
    }
    Ok(Some(Pipeline {
        schedule: parse_schedule(schedule)?,
        micro_batches: micro_batches.unwrap_or(DEFAULT_MICRO_BATCHES),
        recompute: recompute.unwrap_or_default(),
    }))
}

/// The method named `method` (not `expert`, which scores a given split).
fn method_id_of(method: &str) -> PyResult<MethodId> {
    let id = MethodId::from_name(method).ok_or_else(|| {
        input(format!(
            "unknown method '{method}'; known: {}",
            method_names().join(", ")
        ))
    })?;
    if id == MethodId::Expert {
        return Err(input(
            "method expert scores a given split: use dnnplace.score(workload, placement_json)",
        ));
    }
    Ok(id)
}

/// The limits of a run: `time_limit` (1 ms to 1e9 s), `gap` (0 to 1), `threads` (at least
/// 1) as given, the CLI's memory budget.
fn limits_of(
    time_limit: Option<f64>,
    gap: Option<f64>,
    threads: Option<usize>,
) -> PyResult<Limits> {
    if let Some(t) = time_limit {
        if !(1e-3..=1e9).contains(&t) {
            return Err(input(format!(
                "time_limit {t} s is out of range (1 ms to 1e9 s; omit it for no limit)"
            )));
        }
    }
    if let Some(g) = gap {
        if !(0.0..=1.0).contains(&g) {
            return Err(input(format!("gap {g} is out of range (0 to 1)")));
        }
    }
    if threads == Some(0) {
        return Err(input(
            "threads 0 is out of range: at least 1 (the number of solver threads)",
        ));
    }
    Ok(Limits {
        time_limit_s: time_limit,
        mip_gap: gap,
        threads,
        memory_budget_bytes: Some(MEMORY_BUDGET),
        ..Limits::default()
    })
}

/// The layers a plan cuts between with `granularity` `layer` (or `blocks`); `None` for
/// `operator` or no granularity.
fn layers_of(w: &CoreWorkload, granularity: Option<&str>) -> PyResult<Option<Layers>> {
    Ok(match granularity {
        None | Some("operator") => None,
        Some("layer") | Some("blocks") => {
            Some(Layers::new(w).map_err(|e| input(format!("layer granularity: {e}")))?)
        }
        Some(other) => {
            return Err(input(format!(
                "unknown granularity '{other}'; known: operator, layer"
            )))
        }
    })
}

fn plan_cluster(
    py: Python<'_>,
    w: &CoreWorkload,
    cluster: &Cluster,
    id: MethodId,
    objective: Objective,
    contiguous: bool,
    limits: Limits,
) -> PyResult<Plan> {
    let platform = Platform {
        cluster: Some(cluster.inner.clone()),
        ..w.platform().clone()
    };
    let w = w
        .clone()
        .with_platform(platform)
        .map_err(|e| input(format!("cluster {}: {e}", cluster.spec)))?;
    // The one entry point: a workload with a cluster goes to the cluster planner, which
    // refuses what it does not plan with the command line's sentences ("on a cluster, …").
    let problem = Problem {
        workload: &w,
        devices: dnnplace::solve::Devices::of(&w),
        objective,
        contiguous,
        limits,
        pipeline: None,
    };
    let (result, interrupted) =
        interruptible(py, || solve::plan(solve::method(id).as_ref(), &problem))?;
    let checked = result.map_err(solve_err)?;
    let outcome = checked.outcome;
    let plan = checked
        .cluster
        .ok_or_else(|| InternalError::new_err("no cluster plan for a cluster"))?;
    let Some(best) = &plan.best else {
        return Err(input(match &plan.stopped {
            Some(reason) => format!("no plan: the cluster planner stopped after {:.1} s: {reason}", plan.time_s),
            None => "no feasible placement: no plan fits the cluster (memory per type, CPU-only nodes, stages filling machines in order)".into(),
        }));
    };
    let names = Layers::new(&w).unwrap_or_else(|_| Layers::per_node(&w));
    let v = PlanJson {
        usage: Some(best.usage.clone()),
        ..PlanJson::new(
            EvaluationJson::on_cluster(
                &w,
                &plan.costs,
                &best.placement,
                objective,
                &best.evaluation,
            ),
            ClaimJson::of(&outcome, id.name()),
            dnnplace::report::layers::holdings_json(&w, &names, &best.placement),
        )
    }
    .to_value();
    Ok(Plan {
        placement: best.placement.clone(),
        scored: None,
        json: v,
        objective: objective.name().to_string(),
        workload: w,
        interrupted,
    })
}

fn placement_of(w: &CoreWorkload, plan: &Bound<'_, PyAny>) -> PyResult<Placement> {
    if let Ok(p) = plan.cast::<Plan>() {
        return Ok(p.borrow().placement.clone());
    }
    let text: String = plan
        .extract()
        .map_err(|_| input("plan: expected a Plan or placement JSON text"))?;
    parse_placement(&text, w).map_err(input)
}

/// Scores a placement (a `Plan` or placement JSON text) on a workload: validity, loads,
/// TPS, sync and latency, as `dnnplace score --json` prints them (a dict).
#[pyfunction]
#[pyo3(signature = (workload, plan, objective="throughput"))]
fn score(
    py: Python<'_>,
    workload: &Workload,
    plan: &Bound<'_, PyAny>,
    objective: &str,
) -> PyResult<Py<PyAny>> {
    // As `dnnplace score`: latency with any number of pieces, and always reported.
    let objective = match objective_of(objective, 1)? {
        Objective::Latency { .. } => Objective::Latency { pieces: usize::MAX },
        other => other,
    };
    let w = &workload.inner;
    let p = placement_of(w, plan)?;
    let v = py.detach(|| {
        let latency = matches!(objective, Objective::Latency { .. });
        let e = evaluate_with(
            w,
            &p,
            if latency {
                LatencyScoring::Rules
            } else {
                LatencyScoring::Always
            },
        );
        let p = if latency { e.attach_cut(p) } else { p };
        serde_json::to_value(EvaluationJson::of(w, &p, objective, &e)).expect("json")
    });
    to_py(py, &v)
}

/// Runs a plan through a pipeline schedule (`gpipe`, `1f1b`, `interleaved:v`), event by
/// event, as `dnnplace simulate --format json` prints it (a dict).
#[pyfunction]
#[pyo3(signature = (workload, plan, schedule="1f1b", micro_batches=DEFAULT_MICRO_BATCHES))]
fn simulate(
    py: Python<'_>,
    workload: &Workload,
    plan: &Bound<'_, PyAny>,
    schedule: &str,
    micro_batches: usize,
) -> PyResult<Py<PyAny>> {
    let w = &workload.inner;
    let p = placement_of(w, plan)?;
    let settings = SimSettings {
        schedule: parse_schedule(schedule)?,
        micro_batches,
    };
    let v = py.detach(|| core_simulate(w, &p, &settings).map(|s| simulation_json(&s)));
    to_py(py, &v.map_err(input)?)
}

/// The names of the built-in device profiles.
#[pyfunction]
fn device_profiles() -> Vec<String> {
    builtin_profiles().into_iter().map(|p| p.name).collect()
}

/// The native part of the `dnnplace` package.
#[pymodule]
fn _dnnplace(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Workload>()?;
    m.add_class::<Cluster>()?;
    m.add_class::<Plan>()?;
    m.add_class::<parallel::ParallelPlan>()?;
    m.add_class::<parallel::ParallelSweep>()?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::plan_parallel, m)?)?;
    m.add_function(wrap_pyfunction!(parallel::sweep_parallel, m)?)?;
    m.add_function(wrap_pyfunction!(score, m)?)?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(generate_transformer, m)?)?;
    m.add_function(wrap_pyfunction!(calibrate, m)?)?;
    m.add_function(wrap_pyfunction!(device_profiles, m)?)?;
    m.add("InputError", m.py().get_type::<InputError>())?;
    m.add("InternalError", m.py().get_type::<InternalError>())?;
    Ok(())
}

//! The cost-model commands: `devices`, `import`, `generate transformer|gpt|wide`, and the model
//! files `plan` accepts directly (`.onnx`).
//!
//! Raw flags ([`CostFlags`]) are turned into [`CostSettings`] once, by [`cost_settings`];
//! importer warnings (unknown operators) are printed to stderr, one line each.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand, ValueEnum};

use super::settings::{
    import_options as checked_import_options, DeviceOverrides, TransformerSizes,
};
use super::{parse_count, CliError};
use crate::costmodel::onnx::{import_file, ImportOptions, Imported};
use crate::costmodel::onnx_parallel;
use crate::costmodel::synthetic::{gpt_graph, gpt_layers_for_nodes, wide_graph, GptSpec, WideSpec};
use crate::costmodel::{
    builtin_profiles, find_profile, to_workload, transformer_graph, CostSettings, DType,
    DeviceProfile, Head, OpGraph, Style, TransformerSpec,
};
use crate::io::tensor_parallel_json::workload_to_json_with_tensor_parallel;
use crate::io::{check_output_target, workload_to_json, write_atomically};
use crate::model::{Cluster, Workload};

/// Default number of accelerators of an imported or generated workload.
pub const DEFAULT_ACCELERATORS: usize = 4;

// How to price a model: devices, data type, training.
#[derive(Args, Debug, Clone, Default)]
pub struct CostFlags {
    /// Accelerator profile by name (`dnnplace devices` lists them). [default: a100-80gb]
    #[arg(long, value_name = "NAME")]
    pub device: Option<String>,
    /// CPU-core profile for cpuLatency. [default: cpu-core]
    #[arg(long, value_name = "NAME")]
    pub cpu_device: Option<String>,
    /// Load a device profile from a TOML file (repeatable); without --device, the last one
    /// loaded is the accelerator.
    #[arg(long, value_name = "FILE.toml")]
    pub device_file: Vec<PathBuf>,
    /// Data type: fp32, tf32, fp16, bf16. [default: fp32]
    #[arg(long, value_parser = DType::parse, value_name = "DTYPE")]
    pub dtype: Option<DType>,
    /// Add backward nodes and training memory (gradients, optimizer state, stash).
    #[arg(long)]
    pub training: bool,
    /// Batch size (resolves or replaces the model's first input dimension; 1 to 2^20).
    #[arg(long, value_name = "N", value_parser = parse_count)]
    pub batch: Option<usize>,
    /// Sequence length (resolves other symbolic input dimensions; 1 to 2^20).
    #[arg(long, value_name = "S", value_parser = parse_count)]
    pub seq: Option<usize>,
    /// Price for a cluster: `MxNxTYPE` terms joined by `+` (M machines with N accelerators of
    /// profile TYPE; `NxTYPE` is one machine), e.g. `1x4xa100-80gb+1x4xv100`, or a cluster
    /// TOML file (docs/cluster.md). Every node is priced on every type; the cluster replaces
    /// --accelerators and --cpus.
    #[arg(long, value_name = "SPEC", conflicts_with = "device")]
    pub cluster: Option<String>,
}

impl CostFlags {
    fn any_set(&self) -> bool {
        self.device.is_some()
            || self.cpu_device.is_some()
            || !self.device_file.is_empty()
            || self.dtype.is_some()
            || self.training
            || self.batch.is_some()
            || self.seq.is_some()
            || self.cluster.is_some()
    }
}

// Deferred like the top-level commands (cli::Command).
#[derive(Subcommand, Debug)]
#[command(defer = true)]
pub enum CostCommand {
    /// List the device profiles (built-in and from --device-file).
    Devices(DevicesArgs),
    /// Import an ONNX model as a workload with analytic per-operator costs.
    Import(ImportArgs),
    /// Generate a workload from a model description.
    #[command(subcommand)]
    Generate(GenerateCommand),
    /// Fit a device profile's compute_efficiency, memory_efficiency and launch_overhead_ms
    /// to a measured profile; write it as a device file (docs/costmodel.md).
    Calibrate(CalibrateArgs),
}

#[derive(Args, Debug)]
pub struct DevicesArgs {
    /// Also load these TOML profiles.
    #[arg(long, value_name = "FILE.toml")]
    pub device_file: Vec<PathBuf>,
    /// Print one profile (by name) as TOML, the format --device-file reads.
    #[arg(long, value_name = "NAME")]
    pub show: Option<String>,
}

// The workload's device set.
#[derive(Args, Debug, Clone)]
pub struct CountFlags {
    /// Number of accelerators (maxFPGAs).
    #[arg(long, default_value_t = DEFAULT_ACCELERATORS, value_name = "K", value_parser = parse_count)]
    pub accelerators: usize,
    /// Number of CPU cores (maxCPUs).
    #[arg(long, default_value_t = 1, value_name = "L", value_parser = parse_count)]
    pub cpus: usize,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// ONNX model file (or, with --format piper, Piper's input JSON).
    pub model: PathBuf,
    /// Input format: onnx (default) or piper (Piper's JSON: checked and summarised).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<super::piper_cmd::ImportFormat>,
    #[command(flatten)]
    pub cost: CostFlags,
    #[command(flatten)]
    pub counts: CountFlags,
    /// Tensor-parallel degrees, comma-separated (e.g. 2,4,8): give every node its layerId
    /// (its transformer block) and Megatron-style options per degree, written as the nodes'
    /// `tensorParallel` (docs/parallel.md, "A workload JSON"); each degree must divide the
    /// heads, key/value heads, FFN width and vocabulary read from the graph's shapes.
    #[arg(long, value_name = "DEGREES", value_delimiter = ',', value_parser = parse_count)]
    pub tensor_parallel: Option<Vec<usize>>,
    /// Write the workload JSON here (atomically) instead of standard output.
    #[arg(long, value_name = "WORKLOAD.json")]
    pub out: Option<PathBuf>,
}

// Deferred like the top-level commands (cli::Command).
#[derive(Subcommand, Debug)]
#[command(defer = true)]
pub enum GenerateCommand {
    /// An operator-level BERT / GPT-2 / Llama workload, nodes named like the Hugging Face
    /// model's modules and layerId = block index.
    Transformer(TransformerArgs),
    /// A GPT-like decoder with Q/K/V attention branches and residual edges (scale tests).
    Gpt(GptArgs),
    /// Blocks of parallel branches (scale tests for wide graphs).
    Wide(WideArgs),
}

#[derive(Args, Debug)]
pub struct GptArgs {
    /// Decoder blocks (24 operators each).
    #[arg(long, conflicts_with = "nodes", value_parser = parse_count)]
    pub layers: Option<usize>,
    /// About this many operators: picks the number of blocks. [default: 3000]
    #[arg(long, value_parser = parse_count)]
    pub nodes: Option<usize>,
    /// Hidden size h.
    #[arg(long, default_value_t = 768, value_parser = parse_count)]
    pub hidden: usize,
    /// Attention heads (must divide h).
    #[arg(long, default_value_t = 12, value_parser = parse_count)]
    pub heads: usize,
    /// Vocabulary size.
    #[arg(long, default_value_t = 50257, value_parser = parse_count)]
    pub vocab: usize,
    #[command(flatten)]
    pub cost: CostFlags,
    #[command(flatten)]
    pub counts: CountFlags,
    /// Write the workload JSON here (atomically) instead of standard output.
    #[arg(long, value_name = "WORKLOAD.json")]
    pub out: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct WideArgs {
    /// Blocks in sequence.
    #[arg(long, default_value_t = 8, value_parser = parse_count)]
    pub blocks: usize,
    /// Parallel branches per block.
    #[arg(long, default_value_t = 6, value_parser = parse_count)]
    pub branches: usize,
    /// Operators per branch.
    #[arg(long, default_value_t = 4, value_parser = parse_count)]
    pub branch_ops: usize,
    /// Hidden size h.
    #[arg(long, default_value_t = 1024, value_parser = parse_count)]
    pub hidden: usize,
    #[command(flatten)]
    pub cost: CostFlags,
    #[command(flatten)]
    pub counts: CountFlags,
    /// Write the workload JSON here (atomically) instead of standard output.
    #[arg(long, value_name = "WORKLOAD.json")]
    pub out: Option<PathBuf>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum HeadArg {
    /// Pooler + masked-LM + next-sentence heads (BERT pre-training; --style bert only).
    Bert,
    /// LM head (BERT: cls.predictions; GPT-2 / Llama: final norm + lm_head).
    Lm,
    /// No head.
    None,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum StyleArg {
    /// BERT: post-LayerNorm blocks, bert.encoder.layer.N.* names.
    Bert,
    /// GPT-2: pre-LayerNorm blocks, fused c_attn, transformer.h.N.* names.
    Gpt2,
    /// Llama: pre-RMSNorm, SwiGLU, RoPE, no biases, model.layers.N.* names.
    Llama,
}

// The shape of a generated transformer (shared by `generate transformer` and `calibrate`).
#[derive(Args, Debug, Clone)]
pub struct TransformerShape {
    /// Architecture and naming (Hugging Face module paths).
    #[arg(long, value_enum, default_value = "bert")]
    pub style: StyleArg,
    /// Transformer blocks (1 to 10,000).
    #[arg(long, default_value_t = 12, value_parser = parse_count)]
    pub layers: usize,
    /// Hidden size h (1 to 2^20).
    #[arg(long, default_value_t = 768, value_parser = parse_count)]
    pub hidden: usize,
    /// Attention heads (must divide h).
    #[arg(long, default_value_t = 12, value_parser = parse_count)]
    pub heads: usize,
    /// Feed-forward width (1 to 2^20). [default: 4·hidden; llama: 256·⌈(8·hidden/3)/256⌉]
    #[arg(long, value_parser = parse_count)]
    pub ffn: Option<usize>,
    /// Vocabulary size (1 to 2^20). [default: bert 30522, gpt2 50257, llama 32000]
    #[arg(long, value_parser = parse_count)]
    pub vocab: Option<usize>,
    /// Head on top of the blocks. [default: bert for --style bert, else lm]
    #[arg(long, value_enum)]
    pub head: Option<HeadArg>,
}

#[derive(Args, Debug)]
pub struct TransformerArgs {
    /// A Hugging Face config.json (gpt2, bert, llama, mistral, qwen2) instead of --style and
    /// the shape flags; its torch_dtype is the default --dtype (docs/costmodel.md).
    #[arg(long, value_name = "config.json", conflicts_with_all = ["style", "layers", "hidden", "heads", "ffn", "vocab", "head"])]
    pub hf_config: Option<PathBuf>,
    #[command(flatten)]
    pub shape: TransformerShape,
    #[command(flatten)]
    pub cost: CostFlags,
    #[command(flatten)]
    pub counts: CountFlags,
    /// Write the workload JSON here (atomically) instead of standard output.
    #[arg(long, value_name = "WORKLOAD.json")]
    pub out: Option<PathBuf>,
}

// `calibrate`: fit a device profile to a measured profile.
#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// The measured workload (e.g. written by `dnnplace.torch.profile`): nodes with `module`
    /// paths and measured `fpgaLatency`.
    pub measured: PathBuf,
    /// The model as an ONNX file (instead of the generated transformer of --style ...).
    #[arg(long, value_name = "MODEL.onnx")]
    pub onnx: Option<PathBuf>,
    /// The model as a generated transformer (used without --onnx).
    #[command(flatten)]
    pub shape: TransformerShape,
    /// The base profile (--device), data type (--dtype), --batch and --seq of the measured run.
    #[command(flatten)]
    pub cost: CostFlags,
    /// Write the fitted profile here (atomically) as a device file for --device-file.
    #[arg(long, value_name = "FILE.toml")]
    pub out: Option<PathBuf>,
    /// Name of the fitted profile. [default: <base>-calibrated]
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Print the calibration as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs one cost-model command.
pub fn run_cost_command(command: CostCommand) -> Result<(), CliError> {
    match command {
        CostCommand::Devices(args) => run_devices(args),
        CostCommand::Import(args) => run_import(args),
        CostCommand::Generate(GenerateCommand::Transformer(args)) => run_transformer(args),
        CostCommand::Generate(GenerateCommand::Gpt(args)) => run_gpt(args),
        CostCommand::Generate(GenerateCommand::Wide(args)) => run_wide(args),
        CostCommand::Calibrate(args) => super::calibrate_cmd::run_calibrate(args),
    }
}

pub(super) fn load_profiles(files: &[PathBuf]) -> Result<Vec<DeviceProfile>, CliError> {
    files
        .iter()
        .map(|f| DeviceProfile::read(f).map_err(|e| CliError::Input(e.to_string())))
        .collect()
}

/// The cluster of `--cluster` with the profiles of its types, or `None` without the flag.
pub fn cluster_of(flags: &CostFlags) -> Result<Option<(Cluster, Vec<DeviceProfile>)>, CliError> {
    let Some(spec) = &flags.cluster else {
        return Ok(None);
    };
    cluster_from_flag(spec, &flags.device_file).map(Some)
}

/// The cluster of `--cluster SPEC` (short form or TOML file), profiles looked up in
/// `device_files` first, with the profiles of its types.
pub fn cluster_from_flag(
    spec: &str,
    device_files: &[PathBuf],
) -> Result<(Cluster, Vec<DeviceProfile>), CliError> {
    let loaded = load_profiles(device_files)?;
    let (cluster, profiles) =
        crate::costmodel::cluster::cluster_and_profiles(spec, &loaded).map_err(CliError::Input)?;
    for note in cluster.notes() {
        eprintln!("note: {note}");
    }
    Ok((cluster, profiles))
}

/// A workload file planned or scored on `--cluster SPEC`: the cluster replaces the file's
/// device set (and its cluster section, if any). Nodes are timed on each type by the file's
/// per-profile `latencies` where it has them, else by `fpgaLatency` scaled by the profile's
/// speed against the file's reference (docs/cluster.md).
pub fn workload_on_cluster(
    w: Workload,
    spec: &str,
    device_files: &[PathBuf],
) -> Result<Workload, CliError> {
    // Types that give their speed need no profile here (nothing is priced from one).
    let cluster =
        crate::costmodel::cluster::cluster_for(spec, &load_profiles(device_files)?, Some(w.len()))
            .map_err(CliError::Input)?;
    let platform = crate::model::Platform {
        cluster: Some(cluster),
        ..w.platform().clone()
    };
    w.with_platform(platform)
        .map_err(|e| CliError::Input(format!("--cluster {spec}: {e}")))
}

/// Flags → settings: profiles looked up (files first), dtype defaulted. With `--cluster`,
/// the accelerator is the profile of the cluster's first type.
pub fn cost_settings(
    flags: &CostFlags,
    accelerators: usize,
    cpus: usize,
) -> Result<CostSettings, CliError> {
    let loaded = load_profiles(&flags.device_file)?;
    let input = |e: crate::costmodel::ProfileError| CliError::Input(e.to_string());
    let first_type = cluster_of(flags)?.map(|(c, _)| c.types().first().map(|t| t.profile.clone()));
    let accelerator = match (flags.device.clone(), first_type.flatten(), loaded.last()) {
        (Some(name), _, _) | (None, Some(name), _) => {
            find_profile(&name, &loaded).map_err(input)?
        }
        (None, None, Some(last)) => last.clone(),
        (None, None, None) => find_profile("a100-80gb", &[]).map_err(input)?,
    };
    let cpu =
        find_profile(flags.cpu_device.as_deref().unwrap_or("cpu-core"), &loaded).map_err(input)?;
    Ok(CostSettings {
        accelerator,
        cpu,
        dtype: flags.dtype.unwrap_or(DType::Fp32),
        training: flags.training,
        accelerators,
        cpus,
    })
}

fn import_options(flags: &CostFlags) -> Result<ImportOptions, CliError> {
    checked_import_options(
        flags.batch,
        flags.seq,
        flags.dtype.unwrap_or(DType::Fp32),
        flags.training,
    )
}

/// True for the model files `plan` imports instead of reading as workload JSON.
pub fn is_model_file(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
}

pub fn import_graph(path: &Path, flags: &CostFlags) -> Result<OpGraph, CliError> {
    Ok(import_onnx(path, flags)?.graph)
}

/// The imported model of `path` (graph and shapes), its warnings printed.
fn import_onnx(path: &Path, flags: &CostFlags) -> Result<Imported, CliError> {
    let imported =
        import_file(path, &import_options(flags)?).map_err(|e| CliError::Input(e.to_string()))?;
    for w in &imported.warnings {
        eprintln!("warning: {w}");
    }
    Ok(imported)
}

/// `plan MODEL.onnx`: import with `flags`, then apply `--accelerators/--cpus/--memory`.
pub fn load_model_workload(
    path: &Path,
    flags: &CostFlags,
    devices: &DeviceOverrides,
) -> Result<Workload, CliError> {
    let graph = import_graph(path, flags)?;
    let settings = cost_settings(
        flags,
        devices.accelerators.unwrap_or(DEFAULT_ACCELERATORS),
        devices.cpus.unwrap_or(1),
    )?;
    let w = price(&graph, flags, &settings)?;
    if w.cluster().is_some() {
        return Ok(w);
    }
    DeviceOverrides {
        accelerators: None,
        cpus: None,
        memory_bytes: devices.memory_bytes,
    }
    .apply(w)
}

/// The workload of `graph`: on the `--cluster` when given, else on `settings`' device set.
fn price(
    graph: &OpGraph,
    flags: &CostFlags,
    settings: &CostSettings,
) -> Result<Workload, CliError> {
    Ok(match cluster_of(flags)? {
        Some((cluster, profiles)) => {
            crate::costmodel::graph::to_workload_on_cluster(graph, settings, &cluster, &profiles)?
        }
        None => to_workload(graph, settings)?,
    })
}

/// Rejects cost flags given with a workload JSON file (they would be silently ignored);
/// `--cluster` (with `--device-file` for its profiles) applies to workload files too.
pub fn check_no_cost_flags(path: &Path, flags: &CostFlags) -> Result<(), CliError> {
    let pricing = CostFlags {
        cluster: None,
        device_file: Vec::new(),
        ..flags.clone()
    };
    if pricing.any_set() || (flags.cluster.is_none() && !flags.device_file.is_empty()) {
        return Err(CliError::Input(format!(
            "{} is a workload file: --device, --cpu-device, --dtype, --training, --batch and --seq apply to model files (.onnx) only (--device-file only with --cluster)",
            path.display()
        )));
    }
    Ok(())
}

fn write_workload(
    w: &Workload,
    graph: &OpGraph,
    settings: &CostSettings,
    out: Option<&Path>,
) -> Result<(), CliError> {
    write_json(workload_to_json(w), w, graph, settings, out)
}

/// Writes `json` (the workload `w`'s) to `out` with its summary, or to standard output.
fn write_json(
    json: String,
    w: &Workload,
    graph: &OpGraph,
    settings: &CostSettings,
    out: Option<&Path>,
) -> Result<(), CliError> {
    let json = json + "\n";
    match out {
        Some(path) => {
            write_atomically(path, &json)?;
            let mut stdout = std::io::stdout().lock();
            write!(
                stdout,
                "wrote {}\n{}",
                path.display(),
                workload_summary(w, graph, settings)
            )?;
            stdout.flush()?;
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(json.as_bytes())?;
            stdout.flush()?;
        }
    }
    Ok(())
}

/// What a generated or imported workload holds, for people: counts, work in GFLOPs, time in
/// ms, memory in binary units, the memory kinds apart.
fn workload_summary(w: &Workload, graph: &OpGraph, settings: &CostSettings) -> String {
    use crate::model::human_bytes;
    let d = w.devices();
    let fpga_ms: f64 = w.nodes().iter().map(|n| n.fpga_latency).sum();
    let cpu_ms: f64 = w.nodes().iter().map(|n| n.cpu_latency).sum();
    let size: f64 = w.nodes().iter().map(|n| n.size_bytes).sum();
    let part = |f: fn(&crate::model::NodeMemory) -> f64| -> f64 {
        w.nodes()
            .iter()
            .filter_map(|n| n.memory.as_ref())
            .map(f)
            .sum()
    };
    let (weights, gradients, optimizer, stash) = (
        part(|m| m.weight_bytes),
        part(|m| m.gradient_bytes),
        part(|m| m.optimizer_bytes),
        part(|m| m.activation_bytes),
    );
    let mut text = format!(
        "  {} nodes, {} edges; {:.3} GFLOPs and {} of parameters per forward pass ({})\n",
        w.len(),
        w.edges().len(),
        graph.flops() / 1e9,
        human_bytes(graph.param_bytes()),
        settings.dtype.name()
    );
    text += &format!(
        "  time on one {}: {:.3} ms (sum of fpgaLatency); on one CPU core ({}): {:.3} ms (sum of cpuLatency)\n",
        settings.accelerator.name, fpga_ms, settings.cpu.name, cpu_ms
    );
    let pt = &w.platform().profile_times;
    for (name, times) in pt
        .profiles
        .iter()
        .zip(&pt.times)
        .filter(|(name, _)| **name != settings.accelerator.name)
    {
        text += &format!(
            "  time on one {name}: {:.3} ms (sum of latencies.{name})\n",
            times.iter().sum::<f64>()
        );
    }
    let buffers = (size - weights - gradients - optimizer - stash).max(0.0);
    let parts: Vec<String> = [
        ("weights", weights),
        ("gradients", gradients),
        ("optimizer state", optimizer),
        ("stashed activations", stash),
        ("buffers", buffers),
    ]
    .iter()
    .filter(|(_, bytes)| *bytes > 0.0)
    .map(|(kind, bytes)| format!("{kind} {}", human_bytes(*bytes)))
    .collect();
    text += &format!(
        "  memory (sum of size, one sample in flight): {} = {}\n",
        human_bytes(size),
        parts.join(" + ")
    );
    match w.cluster() {
        Some(c) => {
            text += "  cluster:\n";
            for line in c.describe() {
                text += &format!("    {line}\n");
            }
        }
        None => {
            text += &format!(
                "  devices: {} accelerator{} of {} each, {} CPU core{}\n",
                d.accelerators,
                if d.accelerators == 1 { "" } else { "s" },
                human_bytes(d.memory_per_accelerator_bytes),
                d.cpus,
                if d.cpus == 1 { "" } else { "s" }
            )
        }
    }
    text
}

fn run_import(args: ImportArgs) -> Result<(), CliError> {
    if args.format == Some(super::piper_cmd::ImportFormat::Piper) {
        if args.tensor_parallel.is_some() {
            return Err(CliError::Input(
                "--tensor-parallel derives options for an ONNX model, not --format piper".into(),
            ));
        }
        return super::piper_cmd::run_import_piper(&args.model);
    }
    if let Some(out) = &args.out {
        check_output_target(out)?;
    }
    let Some(mut degrees) = args.tensor_parallel.clone() else {
        let graph = import_graph(&args.model, &args.cost)?;
        let settings = cost_settings(&args.cost, args.counts.accelerators, args.counts.cpus)?;
        let w = price(&graph, &args.cost, &settings)?;
        return write_workload(&w, &graph, &settings, args.out.as_deref());
    };
    let mut imported = import_onnx(&args.model, &args.cost)?;
    let input = |e: String| CliError::Input(e);
    let splits = onnx_parallel::prepare(&mut imported.graph, &imported.shapes, &mut degrees)
        .map_err(|e| input(e.to_string()))?;
    let settings = cost_settings(&args.cost, args.counts.accelerators, args.counts.cpus)?;
    let graph = imported.graph;
    let w = price(&graph, &args.cost, &settings)?;
    let options = onnx_parallel::tensor_parallel_options(&graph, &splits, &settings, &degrees);
    let json =
        workload_to_json_with_tensor_parallel(&w, &options).map_err(|e| input(e.to_string()))?;
    write_json(json, &w, &graph, &settings, args.out.as_deref())
}

fn run_transformer(args: TransformerArgs) -> Result<(), CliError> {
    if let Some(out) = &args.out {
        check_output_target(out)?;
    }
    let mut settings = cost_settings(&args.cost, args.counts.accelerators, args.counts.cpus)?;
    let hf = args
        .hf_config
        .as_deref()
        .map(|p| hf_model(p, &args.cost))
        .transpose()?;
    let spec = match &hf {
        Some(model) => {
            if args.cost.dtype.is_none() {
                settings.dtype = model.dtype.unwrap_or(settings.dtype);
            }
            model.spec.clone()
        }
        None => transformer_spec(&args.shape, &args.cost)?,
    };
    let graph = transformer_graph(&spec, settings.dtype).map_err(CliError::Input)?;
    if let (Some(model), Some(path)) = (&hf, &args.hf_config) {
        let params = graph.param_bytes() / settings.dtype.bytes() - model.tied_parameters as f64;
        eprintln!(
            "note: {}: {} ({} blocks, hidden {}, {} heads, {} key/value heads, ffn {}, vocabulary {}), {:.4} B parameters{}",
            path.display(),
            model.model_type,
            spec.layers,
            spec.hidden,
            spec.heads,
            spec.kv_heads,
            spec.ffn,
            spec.vocab,
            params / 1e9,
            if model.tied_parameters > 0 {
                " (the tied embedding counted once; the head's node holds it too)"
            } else {
                ""
            }
        );
    }
    let w = price(&graph, &args.cost, &settings)?;
    write_workload(&w, &graph, &settings, args.out.as_deref())
}

/// The model of a Hugging Face `config.json` at `--seq` (default 512) and `--batch` (1).
pub fn hf_model(
    path: &Path,
    cost: &CostFlags,
) -> Result<crate::costmodel::hf_config::HfModel, CliError> {
    let input = import_options(cost)?;
    let text = crate::io::read_input_text(path, crate::io::TEXT_LIMIT_BYTES)
        .map_err(|e| CliError::Input(format!("{}: {e}", path.display())))?;
    crate::costmodel::hf_config::parse_hf_config(
        &text,
        input.seq.unwrap_or(512),
        input.batch.unwrap_or(1),
    )
    .map_err(|e| CliError::Input(format!("{}: {e}", path.display())))
}

/// The transformer of `shape`, with `--batch` and `--seq` of `cost` (defaults 1 and 512).
pub fn transformer_spec(
    shape: &TransformerShape,
    cost: &CostFlags,
) -> Result<TransformerSpec, CliError> {
    let style = match shape.style {
        StyleArg::Bert => Style::Bert,
        StyleArg::Gpt2 => Style::Gpt2,
        StyleArg::Llama => Style::Llama,
    };
    let size = TransformerSizes::new(
        shape.layers,
        shape.hidden,
        shape.heads,
        shape.ffn,
        shape.vocab,
    )?;
    let input = import_options(cost)?;
    let mut spec = TransformerSpec::new(
        style,
        size.layers,
        size.hidden,
        size.heads,
        input.seq.unwrap_or(512),
        input.batch.unwrap_or(1),
    );
    spec.ffn = size.ffn.unwrap_or(spec.ffn);
    spec.vocab = size.vocab.unwrap_or(spec.vocab);
    spec.head = match shape.head {
        Some(HeadArg::Bert) => Head::Bert,
        Some(HeadArg::Lm) => Head::Lm,
        Some(HeadArg::None) => Head::None,
        None => spec.head,
    };
    Ok(spec)
}

fn run_gpt(args: GptArgs) -> Result<(), CliError> {
    let layers = match (args.layers, args.nodes) {
        (Some(l), _) => l,
        (None, n) => gpt_layers_for_nodes(n.unwrap_or(3000)),
    };
    let size = TransformerSizes::new(layers, args.hidden, args.heads, None, Some(args.vocab))?;
    let input = import_options(&args.cost)?;
    let spec = GptSpec {
        layers: size.layers,
        hidden: size.hidden,
        heads: size.heads,
        seq: input.seq.unwrap_or(512),
        batch: input.batch.unwrap_or(1),
        vocab: size.vocab.unwrap_or(args.vocab),
    };
    let settings = cost_settings(&args.cost, args.counts.accelerators, args.counts.cpus)?;
    let graph = gpt_graph(&spec, settings.dtype).map_err(CliError::Input)?;
    let w = price(&graph, &args.cost, &settings)?;
    write_workload(&w, &graph, &settings, args.out.as_deref())
}

/// The most operators `generate wide` makes.
const MAX_WIDE_OPS: usize = 200_000;

fn run_wide(args: WideArgs) -> Result<(), CliError> {
    let input = import_options(&args.cost)?;
    let size = TransformerSizes::new(1, args.hidden, 1, None, None)?;
    let ops = args
        .branches
        .checked_mul(args.branch_ops)
        .and_then(|x| x.checked_add(1))
        .and_then(|x| x.checked_mul(args.blocks))
        .and_then(|x| x.checked_add(1));
    if ops.is_none_or(|n| n > MAX_WIDE_OPS) {
        return Err(CliError::Input(format!(
            "--blocks {} x (--branches {} x --branch-ops {} + 1) operators are more than {MAX_WIDE_OPS}",
            args.blocks, args.branches, args.branch_ops
        )));
    }
    let spec = WideSpec {
        blocks: args.blocks,
        branches: args.branches,
        branch_ops: args.branch_ops,
        hidden: size.hidden,
        seq: input.seq.unwrap_or(512),
        batch: input.batch.unwrap_or(1),
    };
    let settings = cost_settings(&args.cost, args.counts.accelerators, args.counts.cpus)?;
    let graph = wide_graph(&spec, settings.dtype).map_err(CliError::Input)?;
    let w = price(&graph, &args.cost, &settings)?;
    write_workload(&w, &graph, &settings, args.out.as_deref())
}

fn run_devices(args: DevicesArgs) -> Result<(), CliError> {
    let loaded = load_profiles(&args.device_file)?;
    let mut stdout = std::io::stdout().lock();
    if let Some(name) = &args.show {
        let p = find_profile(name, &loaded).map_err(|e| CliError::Input(e.to_string()))?;
        write!(stdout, "{}", p.to_toml())?;
        stdout.flush()?;
        return Ok(());
    }
    writeln!(
        stdout,
        "{:<12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>7} {:>7} {:>7}  description",
        "name",
        "fp32",
        "tf32",
        "fp16/bf16",
        "mem BW",
        "memory",
        "host",
        "d2d",
        "compute",
        "memory",
        "launch"
    )?;
    writeln!(
        stdout,
        "{:<12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>7} {:>7} {:>7}",
        "", "TFLOP/s", "TFLOP/s", "TFLOP/s", "GB/s", "GiB", "GB/s", "GB/s", "eff.", "eff.", "ms"
    )?;
    for p in loaded.iter().chain(builtin_profiles().iter()) {
        writeln!(
            stdout,
            "{:<12} {:>9.2} {:>9.2} {:>9.2} {:>9.0} {:>9.0} {:>8.2} {:>8.1} {:>7.2} {:>7.2} {:>7.3}  {}",
            p.name,
            p.peak_fp32_flops / 1e12,
            p.peak_tf32_flops / 1e12,
            p.peak_fp16_flops / 1e12,
            p.memory_bandwidth_bytes_per_s / 1e9,
            p.memory_bytes / (1024.0 * 1024.0 * 1024.0),
            p.host_link_bytes_per_s / 1e9,
            p.device_link_bytes_per_s / 1e9,
            p.compute_efficiency,
            p.memory_efficiency,
            p.launch_overhead_ms,
            p.description
        )?;
    }
    writeln!(
        stdout,
        "TFLOP/s dense peaks; GB/s = 1e9 bytes/s; GiB = 2^30 bytes; eff. = assumed fraction of peak reached; launch = fixed cost per operator. As TOML: `dnnplace devices --show NAME`"
    )?;
    stdout.flush()?;
    Ok(())
}

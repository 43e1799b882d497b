//! `dnnplace export`, and the layer and export parts of `plan` and `score`:
//! `plan --granularity layer` (alias `--split-at blocks`), `plan --export F [--export-out
//! FILE]`, `score W --from-export F FILE`. Exit status 2 when a plan cannot be exported
//! (with the target's reason) or a file breaks its target's rules; 3 when our own export
//! fails its target's rules (a bug).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};

use super::costmodel_cmds::{self, CostFlags};
use super::settings::DeviceOverrides;
use super::{load_workload, CliError, DeviceFlags};
use crate::export::{self, ExportError, Exporter, LayerPlan};
use crate::io::{read_placement, write_atomically};
use crate::model::layers::Layers;
use crate::model::{Placement, Workload};

/// Where stage boundaries may fall.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum Granularity {
    /// Between any two operators.
    #[value(alias = "operators")]
    Operator,
    /// Only between layers (nodes with one layerId stay on one device).
    #[value(alias = "blocks", alias = "layers")]
    Layer,
}

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The plan: placement JSON (MODEL.md shape), as `plan --out` writes it.
    pub plan: PathBuf,
    /// The workload the plan is for: workload JSON, or a model file (.onnx) priced with --device.
    #[arg(long, value_name = "W")]
    pub workload: PathBuf,
    #[command(flatten)]
    pub model: CostFlags,
    #[command(flatten)]
    pub devices: DeviceFlags,
    /// Target: torch, torch-json, deepspeed, megatron, vllm or accelerate.
    #[arg(long, value_name = "FORMAT")]
    pub format: String,
    /// Write the export to this file (atomically) instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// The exporter named `name`, or an input error listing the formats.
pub fn exporter(name: &str) -> Result<Box<dyn Exporter>, CliError> {
    export::exporter_by_name(name).ok_or_else(|| {
        CliError::Input(format!(
            "unknown export format '{name}'; known: {}",
            export::format_names().join(", ")
        ))
    })
}

/// A workload from JSON or a model file, as `plan` reads it.
pub fn workload_from(
    path: &Path,
    model: &CostFlags,
    devices: &DeviceFlags,
) -> Result<Workload, CliError> {
    let devices = DeviceOverrides::new(devices);
    if costmodel_cmds::is_model_file(path) {
        costmodel_cmds::load_model_workload(path, model, &devices)
    } else {
        costmodel_cmds::check_no_cost_flags(path, model)?;
        load_workload(path, &devices)
    }
}

/// The layers of `w`, or the reason it has none that a stage boundary can respect.
pub fn layers_of(w: &Workload) -> Result<Layers, CliError> {
    Layers::new(w).map_err(|e| CliError::Input(format!("layer granularity: {e}")))
}

/// Layers for naming what devices hold: the real layers when they form a DAG, else one per node.
pub fn layers_for_names(w: &Workload) -> Layers {
    Layers::new(w).unwrap_or_else(|_| Layers::per_node(w))
}

impl From<ExportError> for CliError {
    fn from(e: ExportError) -> Self {
        match e {
            ExportError::Internal { .. } => CliError::Internal(e.to_string()),
            _ => CliError::Input(e.to_string()),
        }
    }
}

/// The export text of `placement` for the format `name` (checked both ways).
pub fn export_text(
    name: &str,
    w: &Workload,
    layers: &Layers,
    placement: &Placement,
) -> Result<String, CliError> {
    let exporter = exporter(name)?;
    let plan = LayerPlan::new(w, layers, placement).map_err(|reason| {
        CliError::Input(format!("cannot export to {}: {reason}", exporter.name()))
    })?;
    Ok(export::export(exporter.as_ref(), &plan)?)
}

/// `dnnplace export`.
pub fn run_export(args: ExportArgs) -> Result<(), CliError> {
    let exporter = exporter(&args.format)?;
    let w = workload_from(&args.workload, &args.model, &args.devices)?;
    let placement = read_placement(&args.plan, &w)?;
    let layers = layers_of(&w)?;
    let text = export_text(exporter.name(), &w, &layers, &placement)?;
    match &args.out {
        Some(out) => {
            write_atomically(out, &text)?;
            let mut stdout = std::io::stdout().lock();
            writeln!(
                stdout,
                "{} export written to {}",
                exporter.name(),
                out.display()
            )?;
            stdout.flush()?;
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            write!(stdout, "{text}")?;
            stdout.flush()?;
        }
    }
    Ok(())
}

/// `score --from-export FORMAT FILE`: the placement a framework's file describes.
pub fn placement_from_export(
    w: &Workload,
    format: &str,
    file: &Path,
) -> Result<Placement, CliError> {
    let exporter = exporter(format)?;
    let text = std::fs::read_to_string(file)
        .map_err(|e| CliError::Input(format!("{}: {e}", file.display())))?;
    let layers = layers_of(w)?;
    export::read_export(exporter.as_ref(), &text, w, &layers)
        .map_err(|e| CliError::Input(format!("{}: {e}", file.display())))
}

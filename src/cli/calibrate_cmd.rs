//! `dnnplace calibrate`: a device profile fitted to a measured profile
//! ([`crate::costmodel::calibrate`] states the maths), printed as a table or JSON and written
//! as a device file.

use std::io::Write;

use super::costmodel_cmds::{cost_settings, import_graph, transformer_spec, CalibrateArgs};
use super::CliError;
use crate::costmodel::{calibrate, transformer_graph, Calibration};
use crate::io::{check_output_target, write_atomically};

/// Runs `calibrate`.
pub fn run_calibrate(args: CalibrateArgs) -> Result<(), CliError> {
    if let Some(out) = &args.out {
        check_output_target(out)?;
    }
    if args.cost.cluster.is_some() || args.cost.training {
        return Err(CliError::Input(
            "calibrate fits one --device: --cluster and --training do not apply (a measured \
             backward node calibrates the backward costs by itself)"
                .into(),
        ));
    }
    let measured =
        crate::io::read_workload(&args.measured).map_err(|e| CliError::Input(e.to_string()))?;
    let settings = cost_settings(&args.cost, 1, 1)?;
    let graph = match &args.onnx {
        Some(path) => import_graph(path, &args.cost)?,
        None => {
            let spec = transformer_spec(&args.shape, &args.cost)?;
            transformer_graph(&spec, settings.dtype).map_err(CliError::Input)?
        }
    };
    let mut cal = calibrate(&graph, &measured, &settings.accelerator, settings.dtype)
        .map_err(|e| CliError::Input(format!("{}: {e}", args.measured.display())))?;
    if let Some(name) = &args.name {
        cal.fitted.name = name.clone();
    }
    let mut stdout = std::io::stdout().lock();
    if args.json {
        writeln!(
            stdout,
            "{}",
            serde_json::to_string_pretty(&cal).expect("serialises")
        )?;
    } else {
        write!(
            stdout,
            "{}",
            table(&cal, &args.measured.display().to_string())
        )?;
    }
    if let Some(out) = &args.out {
        write_atomically(
            out,
            &cal.to_device_file(&args.measured.display().to_string()),
        )?;
        if !args.json {
            writeln!(
                stdout,
                "wrote {} (profile '{}')",
                out.display(),
                cal.fitted.name
            )?;
        }
    }
    stdout.flush()?;
    Ok(())
}

fn pct(x: f64) -> String {
    format!("{:+.1}%", 100.0 * x)
}

/// The calibration as a text table.
pub fn table(cal: &Calibration, measured: &str) -> String {
    let mut s = format!(
        "calibrated '{}' on {} measured units of {measured} ({})\n\n\
         {:<28} {:>18} {:>17} {:>18}\n",
        cal.base.name,
        cal.units.len(),
        cal.dtype,
        "",
        "compute_efficiency",
        "memory_efficiency",
        "launch_overhead_ms"
    );
    for (label, p) in [
        (format!("base ({})", cal.base.name), &cal.base),
        (format!("fitted ({})", cal.fitted.name), &cal.fitted),
    ] {
        s += &format!(
            "{label:<28} {:>18.4} {:>17.4} {:>18.5}\n",
            p.compute_efficiency, p.memory_efficiency, p.launch_overhead_ms
        );
    }
    s += &format!(
        "\noperators at the fit: {} compute-bound, {} memory-bound; {} no measured unit holds\n",
        cal.compute_bound_ops, cal.memory_bound_ops, cal.unmatched_ops
    );
    if !cal.unmatched_measured.is_empty() {
        s += &format!(
            "measured nodes left out: {}\n",
            cal.unmatched_measured.join(", ")
        );
    }
    s += &format!(
        "\n{:<28} {:>8} {:>12} {:>10} {:>14}\n",
        "error (predicted/measured-1)", "rms", "median |e|", "max |e|", "whole time"
    );
    for (label, e) in [("base", &cal.base_error), ("fitted", &cal.fitted_error)] {
        s += &format!(
            "{label:<28} {:>8} {:>12} {:>10} {:>14}\n",
            format!("{:.1}%", 100.0 * e.rms_relative),
            format!("{:.1}%", 100.0 * e.median_abs_relative),
            format!("{:.1}%", 100.0 * e.max_abs_relative),
            pct(e.total_relative)
        );
    }
    s += &format!(
        "\n{:<34} {:<8} {:>4} {:>12} {:>10} {:>8} {:>10} {:>8}\n",
        "module", "pass", "ops", "measured ms", "base ms", "error", "fitted ms", "error"
    );
    for u in &cal.units {
        s += &format!(
            "{:<34} {:<8} {:>4} {:>12.4} {:>10.4} {:>8} {:>10.4} {:>8}\n",
            u.module,
            u.pass.name(),
            u.ops,
            u.measured_ms,
            u.base_ms,
            pct(u.base_ms / u.measured_ms - 1.0),
            u.fitted_ms,
            pct(u.fitted_ms / u.measured_ms - 1.0)
        );
    }
    s
}

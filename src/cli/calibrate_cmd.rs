//! `dnnplace calibrate`: a device profile fitted to a measured profile
//! ([`crate::costmodel::calibrate`] states the maths), printed as a table
//! ([`crate::report::calibration`]) or JSON and written as a device file.

use std::io::Write;

use super::costmodel_cmds::{cost_settings, import_graph, transformer_spec, CalibrateArgs};
use super::CliError;
use crate::costmodel::{calibrate, transformer_graph};
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
            crate::report::calibration::calibration_text(
                &cal,
                &args.measured.display().to_string()
            )
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

//! Piper's inputs on the command line: `import --format piper FILE` (a summary of the
//! instance) and `plan FILE --cost-model piper [--devices K]` (the exact solver of
//! [`crate::solve::piper`], its plan re-scored by [`crate::score::piper`]).
//!
//! The plan prints one row per stage (nodes, `t`, `d`, devices, in-flight micro-batches,
//! time per sample, memory) and value, bound, gap and outcome; `--json` carries the same
//! with the field names of the other plans (`value`, `bound`, `gap`, `outcome`,
//! `stopReason`, `optimal`, `timeS`, `ideals`, `idealPairs`, `notes`, `path`) and
//! `stages: [{nodes, tensorParallel, dataParallel, devices, inFlight, timePerSample,
//! memoryBytes, configs}]`. Bad input exits 2 with the field, node or edge named.

use std::io::Write;
use std::path::Path;

use clap::{Args, ValueEnum};
use serde_json::json;

use super::{json_text, parse_count, CliError, PlanArgs};
use crate::io::{read_piper, write_atomically};
use crate::model::human_bytes;
use crate::model::piper::PiperInstance;
use crate::report::table::gap;
use crate::report::tabular::{Align, Table};
use crate::solve::budget::Budget;
use crate::solve::outcome::Status;
use crate::solve::piper::{solve_piper, PiperOutcome};

/// Cost models `plan` can use besides the workload's own.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum CostModelArg {
    /// Piper's input format and formulas (docs/piper.md).
    Piper,
}

/// Input formats `import` reads besides ONNX.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum ImportFormat {
    /// An ONNX model (the default).
    Onnx,
    /// Piper's input JSON: prints a summary of the instance.
    Piper,
}

// The `plan` flags of the Piper cost model.
#[derive(Args, Debug, Clone, Default)]
pub struct PiperFlags {
    /// Read the input as Piper's JSON and solve Piper's problem exactly (docs/piper.md).
    #[arg(long, value_enum, value_name = "MODEL")]
    pub cost_model: Option<CostModelArg>,
    /// --cost-model piper: number of devices K (overrides maxDevices; 1 to 10,000).
    #[arg(long, value_name = "K", value_parser = parse_count)]
    pub devices: Option<usize>,
}

/// `plan` with `--cost-model piper` (`None`: not a Piper plan).
pub fn dispatch_plan(args: &PlanArgs) -> Option<Result<(), CliError>> {
    match (args.piper.cost_model, args.piper.devices) {
        (Some(CostModelArg::Piper), _) => Some(run_plan_piper(args)),
        (None, Some(_)) => Some(Err(CliError::Input(
            "--devices applies to --cost-model piper (use --accelerators for a workload)".into(),
        ))),
        (None, None) => None,
    }
}

fn load(path: &Path, devices: Option<usize>) -> Result<PiperInstance, CliError> {
    let ins = read_piper(path)?;
    match devices {
        Some(k) => ins
            .with_devices(k)
            .map_err(|e| CliError::Input(format!("--devices: {e}"))),
        None => Ok(ins),
    }
}

fn run_plan_piper(args: &PlanArgs) -> Result<(), CliError> {
    let started = std::time::Instant::now();
    if args.method != "auto" {
        return Err(CliError::Input(format!(
            "--method {}: --cost-model piper has one exact method (leave --method out)",
            args.method
        )));
    }
    if args.devices.accelerators.is_some() {
        return Err(CliError::Input(
            "--accelerators: with --cost-model piper give the device count as --devices".into(),
        ));
    }
    if let Some(out) = &args.out {
        crate::io::check_output_target(out)?;
    }
    let ins = load(&args.workload, args.piper.devices)?;
    let memory = Some(args.search.memory_budget);
    crate::solve::budget::set_run_limits(started, args.time_limit, memory);
    super::sigint_setup();
    let budget = Budget::new(args.time_limit, memory);
    let outcome = solve_piper(&ins, args.search.max_ideals, &budget)
        .map_err(|e| CliError::Internal(e.to_string()))?;
    let v = outcome_json(&ins, &outcome);
    if let Some(out) = &args.out {
        if outcome.plan.is_some() {
            write_atomically(out, &json_text(&v))?;
        }
    }
    let mut stdout = std::io::stdout().lock();
    if args.json {
        write!(stdout, "{}", json_text(&v))?;
    } else {
        write!(stdout, "{}", outcome_text(&ins, &outcome))?;
    }
    match &outcome.status {
        Status::Infeasible { reason, .. } => {
            Err(CliError::Input(format!("no feasible plan: {reason}")))
        }
        Status::NoPlan { reason } => Err(CliError::Input(format!("no plan found: {reason}"))),
        _ => Ok(()),
    }
}

/// Node names of a stage, shortened to the first and last when long.
fn stage_names(ins: &PiperInstance, nodes: &[usize]) -> String {
    let name = |v: usize| {
        let n = &ins.nodes[v];
        if n.name.is_empty() {
            n.id.to_string()
        } else {
            format!("{}#{}", n.name, n.id)
        }
    };
    match nodes {
        [] => String::new(),
        [a] => name(*a),
        [a, b] => format!("{}, {}", name(*a), name(*b)),
        [a, .., b] => format!("{} … {} ({} nodes)", name(*a), name(*b), nodes.len()),
    }
}

/// The human-readable report.
pub fn outcome_text(ins: &PiperInstance, o: &PiperOutcome) -> String {
    let mut s = format!(
        "Piper instance: {} nodes, {} edges, {} devices, {} micro-batches, {} per device\n",
        ins.len(),
        ins.edges.len(),
        ins.max_devices,
        ins.mbs_in_batch,
        human_bytes(ins.max_memory_per_device)
    );
    if let (Some(plan), Some(score)) = (&o.plan, &o.score) {
        let mut t = Table::new([
            "stage",
            "nodes",
            "t",
            "d",
            "devices",
            "in flight",
            "time/sample",
            "memory",
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
        ]);
        for (i, (st, sc)) in plan.stages.iter().zip(&score.stages).enumerate() {
            t.push([
                i.to_string(),
                stage_names(ins, &st.nodes),
                st.tensor_parallel.to_string(),
                st.data_parallel.to_string(),
                (st.tensor_parallel * st.data_parallel).to_string(),
                sc.in_flight.to_string(),
                format!("{:.9}", sc.time_per_sample),
                human_bytes(sc.memory_bytes),
            ]);
        }
        s += &t.text();
        s += &format!(
            "devices used: {} of {}; data-parallel degrees sum to {}\n",
            score.devices_used, ins.max_devices, score.data_parallel_sum
        );
    }
    s += &format!(
        "value (time per sample): {}\nbound: {}\ngap: {:.6}%\noutcome: {}{}\ntime: {:.3} s (ideals {}, pairs {})\n",
        fmt(o.value),
        fmt(o.bound),
        100.0 * gap(o.value, o.bound),
        o.status.kind(),
        o.status
            .stop_reason()
            .map(|r| format!(" ({r})"))
            .or_else(|| match &o.status {
                Status::Infeasible { reason, .. } => Some(format!(" ({reason})")),
                _ => None,
            })
            .unwrap_or_default(),
        o.stats.time_s,
        o.stats.ideals.map_or("-".into(), |x| x.to_string()),
        o.stats.ideal_pairs.map_or("-".into(), |x| x.to_string()),
    );
    s
}

fn fmt(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.9}")
    } else {
        "-".into()
    }
}

fn finite(x: f64) -> serde_json::Value {
    if x.is_finite() {
        json!(x)
    } else {
        serde_json::Value::Null
    }
}

/// The JSON report (module docs).
pub fn outcome_json(ins: &PiperInstance, o: &PiperOutcome) -> serde_json::Value {
    let stages: Vec<serde_json::Value> = match (&o.plan, &o.score) {
        (Some(plan), Some(score)) => plan
            .stages
            .iter()
            .zip(&score.stages)
            .map(|(st, sc)| {
                json!({
                    "nodes": st.nodes.iter().map(|&v| ins.nodes[v].id).collect::<Vec<_>>(),
                    "names": st.nodes.iter().map(|&v| ins.nodes[v].name.clone()).collect::<Vec<_>>(),
                    "tensorParallel": st.tensor_parallel,
                    "dataParallel": st.data_parallel,
                    "devices": st.tensor_parallel * st.data_parallel,
                    "inFlight": sc.in_flight,
                    "timePerSample": sc.time_per_sample,
                    "computeTime": sc.compute,
                    "communicationTime": sc.communication,
                    "dataParallelSyncTime": sc.data_parallel_sync,
                    "memoryBytes": sc.memory_bytes,
                    "configs": st.nodes.iter().zip(&st.configs)
                        .map(|(&v, &c)| ins.nodes[v].configs[&st.tensor_parallel][c].id.clone())
                        .collect::<Vec<_>>(),
                })
            })
            .collect(),
        _ => Vec::new(),
    };
    json!({
        "costModel": "piper",
        "objective": "time-per-sample",
        "method": "piper-dp",
        "value": finite(o.value),
        "bound": finite(o.bound),
        "gap": gap(o.value, o.bound),
        "outcome": o.status.kind(),
        "stopReason": o.status.stop_reason().map(|r| r.code()),
        "optimal": o.status == Status::Optimal,
        "timeS": o.stats.time_s,
        "ideals": o.stats.ideals,
        "idealPairs": o.stats.ideal_pairs,
        "notes": o.stats.notes,
        "path": o.stats.path,
        "devices": ins.max_devices,
        "devicesUsed": o.score.as_ref().map(|s| s.devices_used),
        "stages": stages,
    })
}

/// `import --format piper FILE`: checks the file and prints a summary.
pub fn run_import_piper(path: &Path) -> Result<(), CliError> {
    let ins = load(path, None)?;
    let configs: usize = ins
        .nodes
        .iter()
        .flat_map(|n| n.configs.values())
        .map(Vec::len)
        .sum();
    let degrees = ins.tensor_degrees();
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "Piper instance {}\n  nodes: {}\n  edges: {}\n  configurations (TMPCs): {}\n  tensor-parallel degrees: {:?}\n  maxDevices: {}\n  maxMemoryPerDevice: {}\n  bandwidth: {} bytes/s\n  mbsInBatch: {}\nplan it with: dnnplace plan {} --cost-model piper [--devices K]",
        path.display(),
        ins.len(),
        ins.edges.len(),
        configs,
        degrees,
        ins.max_devices,
        human_bytes(ins.max_memory_per_device),
        ins.bandwidth,
        ins.mbs_in_batch,
        path.display()
    )?;
    Ok(())
}

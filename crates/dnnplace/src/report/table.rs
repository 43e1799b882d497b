//! A plan as a readable table (one row per device, the bottleneck marked) and as JSON.

use std::fmt::Write;

use crate::io::{placement_to_raw, RawPlacement};
use crate::model::{Device, Placement, Workload};
use crate::score::{DeviceLoad, Evaluation};
use crate::solve::{Objective, Outcome, Status};

/// Re-exported from [`crate::model`], where it sits beside [`crate::model::parse_bytes`].
pub use crate::model::human_bytes;

/// The status as one phrase.
pub fn status_text(outcome: &Outcome) -> String {
    match &outcome.status {
        Status::Optimal => "proven optimal".into(),
        Status::Feasible { reason } => {
            let gap = gap(outcome.objective, outcome.bound);
            format!("feasible, gap {:.3}% ({reason})", gap * 100.0)
        }
        Status::Heuristic => "heuristic (no optimality claim)".into(),
        Status::Infeasible { reason, .. } => format!("infeasible: {reason}"),
        Status::NoPlan { reason } => match reason.remedy() {
            Some(remedy) => format!("no plan found within the limits ({reason}; {remedy})"),
            None => format!("no plan found within the limits ({reason})"),
        },
    }
}

/// Relative gap `(objective − bound) / objective`.
pub fn gap(objective: f64, bound: f64) -> f64 {
    if objective > 0.0 && objective.is_finite() {
        ((objective - bound) / objective).max(0.0)
    } else {
        0.0
    }
}

/// The table printed by `plan` and `score`: the method's outcome, the device set, one
/// row per device, then the objectives and the plan's validity.
pub fn plan_table(
    w: &Workload,
    outcome: Option<&Outcome>,
    objective: Objective,
    e: &Evaluation,
) -> String {
    let mut s = String::new();
    if let Some(o) = outcome {
        outcome_lines(&mut s, o);
    }
    let _ = writeln!(
        s,
        "nodes: {}   accelerators: {} x {}   cpus: {}",
        w.len(),
        w.devices().accelerators,
        human_bytes(w.devices().memory_per_accelerator_bytes),
        w.devices().cpus
    );
    let _ = writeln!(s);
    device_rows(&mut s, e);
    let _ = writeln!(s);
    let _ = writeln!(s, "TPS (max load):        {:.9} ms", e.max_load);
    let _ = writeln!(s, "sync (maxFW + maxBW):  {:.9} ms", e.sync_objective);
    latency_lines(&mut s, objective, e);
    let _ = writeln!(
        s,
        "objective ({}): {:.9} ms",
        objective.name(),
        objective.value(e)
    );
    let _ = writeln!(
        s,
        "valid: {}   contiguous: {}",
        yes(e.is_valid()),
        yes(e.is_contiguous())
    );
    for v in e.violations.iter().chain(&e.non_contiguous) {
        let _ = writeln!(s, "  - {v}");
    }
    s
}

/// The method, status and time, the path `auto` took, and the search's sizes and bound.
fn outcome_lines(s: &mut String, o: &Outcome) {
    let _ = writeln!(
        s,
        "method: {}   status: {}   time: {:.3} s",
        o.method,
        status_text(o),
        o.stats.time_s
    );
    if let Some(path) = &o.stats.path {
        let _ = writeln!(s, "path: {path}");
    }
    let mut extra = Vec::new();
    if let Some(g) = o.stats.groups {
        extra.push(format!("groups: {g}"));
    }
    if let Some(i) = o.stats.ideals {
        extra.push(format!("ideals: {i}"));
    }
    if let Some(p) = o.stats.ideal_pairs {
        extra.push(format!("ideal pairs: {p}"));
    }
    if o.bound.is_finite() && o.bound > 0.0 && o.status != Status::Optimal {
        extra.push(format!("lower bound: {:.9} ms", o.bound));
    }
    if !extra.is_empty() {
        let _ = writeln!(s, "{}", extra.join("   "));
    }
}

/// The header and one row per device (nodes, compute, communication, load, memory), the
/// bottleneck marked; a recompute column when some accelerator recomputes.
fn device_rows(s: &mut String, e: &Evaluation) {
    // A plan in which some accelerator recomputes its activations shows the forward pass it
    // runs again (part of its load) in a column of its own.
    let recomputing = e.devices.iter().any(|d| d.recomputes);
    let recompute_header = if recomputing {
        format!(" {:>16}", "recompute (ms)")
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "{:<8} {:>6} {:>16} {:>16}{recompute_header} {:>16} {:>12}",
        "device", "nodes", "compute (ms)", "comm. (ms)", "load (ms)", "memory"
    );
    for d in &e.devices {
        let mark = if Some(d.device) == e.bottleneck {
            "  <- bottleneck"
        } else {
            ""
        };
        let recompute = match (recomputing, d.recomputes) {
            (false, _) => String::new(),
            (true, true) => format!(" {:>16.9}", d.recompute),
            (true, false) => format!(" {:>16}", "-"),
        };
        let _ = writeln!(
            s,
            "{:<8} {:>6} {:>16.9} {:>16.9}{recompute} {:>16.9} {:>12}{mark}",
            d.device.to_string(),
            d.nodes,
            d.compute,
            d.communication,
            d.load,
            human_bytes(d.memory_bytes)
        );
    }
    if recomputing {
        let _ = writeln!(s, "recompute: the forward pass a device runs again before its backward pass, keeping only its inputs between them");
    }
}

/// The one-sample latency, and under the latency objective the accelerator calls in
/// order (start, duration, end).
fn latency_lines(s: &mut String, objective: Objective, e: &Evaluation) {
    match &e.latency {
        Some(l) => {
            let _ = writeln!(
                s,
                "latency (one sample):  {:.9} ms   (pieces per accelerator: max {})",
                l.total,
                l.max_pieces()
            );
        }
        None => {
            let _ = writeln!(s, "latency (one sample):  not computed for this plan (too costly to cut; `dnnplace score` computes it)");
        }
    }
    let calls = e.latency.as_ref().map_or(&[][..], |l| &l.calls[..]);
    if matches!(objective, Objective::Latency { .. }) && !calls.is_empty() {
        let _ = writeln!(s, "calls:");
        let _ = writeln!(
            s,
            "  {:<8} {:>5} {:>6} {:>16} {:>16} {:>16}",
            "device", "call", "nodes", "start (ms)", "duration (ms)", "end (ms)"
        );
        for c in calls {
            let _ = writeln!(
                s,
                "  {:<8} {:>5} {:>6} {:>16.9} {:>16.9} {:>16.9}",
                Device::Accelerator(c.accelerator).to_string(),
                c.rank + 1,
                c.nodes.len(),
                c.start,
                c.duration,
                c.start + c.duration
            );
        }
    }
}

/// `yes` or `no`.
fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// The placement file of MODEL.md's shape, loads filled in by the scorer.
pub fn placement_json(
    w: &Workload,
    p: &Placement,
    e: &Evaluation,
    objective: Objective,
) -> RawPlacement {
    let latency = matches!(objective, Objective::Latency { .. });
    placement_file(w, p, &e.devices, objective.value(e), latency)
}

/// The placement file of `p` (MODEL.md's shape, devices numbered as the placement numbers
/// them) with each used device's load from `devices` (0 for one without a row) and
/// `objective` as `maxLoad`, or `totalLatency` when `latency`. The one assembly of every
/// placement file, on one machine and on a cluster.
pub fn placement_file(
    w: &Workload,
    p: &Placement,
    devices: &[DeviceLoad],
    objective: f64,
    latency: bool,
) -> RawPlacement {
    let (accs, cpus) = p.devices_used();
    let load_of = |d: Device| {
        devices
            .iter()
            .find(|x| x.device == d)
            .map_or(0.0, |x| x.load)
    };
    let acc_loads: Vec<f64> = (0..accs).map(|i| load_of(Device::Accelerator(i))).collect();
    let cpu_loads: Vec<f64> = (0..cpus).map(|i| load_of(Device::Cpu(i))).collect();
    placement_to_raw(w, p, &acc_loads, &cpu_loads, objective, latency)
}

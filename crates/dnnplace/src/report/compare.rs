//! The comparison table of `dnnplace compare`: one row per method run, as aligned text,
//! Markdown or JSON. The best primary objective (TPS for throughput, latency for latency)
//! is marked with `*`.

use std::fmt::Write;

use serde_json::{json, Value};

use super::table::status_text;
use super::tabular::{Align, Table};
use crate::model::human_bytes;
use crate::solve::compare::{Comparison, Row};
use crate::solve::Objective;

/// The cells of one row, as strings, in the order of [`HEADER`].
pub const HEADER: [&str; 9] = [
    "method",
    "TPS",
    "latency",
    "devices (acc+cpu)",
    "max memory",
    "valid",
    "contiguous",
    "time (s)",
    "status",
];

fn number(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.4}")
    } else {
        "—".into()
    }
}

/// The cells of a row.
pub fn cells(row: &Row, c: &Comparison) -> [String; 9] {
    let best = c.best();
    let mark = |x: f64, primary: bool| {
        let s = number(x);
        if primary && x.is_finite() && x <= best * (1.0 + 1e-9) {
            format!("{s} *")
        } else {
            s
        }
    };
    let latency_primary = matches!(c.objective, Objective::Latency { .. });
    match &row.result {
        Ok(plan) => match &plan.evaluation {
            Some(e) => {
                let accs = e
                    .devices
                    .iter()
                    .filter(|d| d.device.is_accelerator())
                    .count();
                let cpus = e.devices.len() - accs;
                let memory = e
                    .devices
                    .iter()
                    .filter(|d| d.device.is_accelerator())
                    .map(|d| d.memory_bytes)
                    .fold(0.0, f64::max);
                [
                    row.label(),
                    mark(e.max_load, !latency_primary),
                    e.latency_total()
                        .map_or_else(|| "—".into(), |l| mark(l, latency_primary)),
                    format!("{accs}+{cpus}"),
                    human_bytes(memory),
                    yes(e.is_valid()).into(),
                    yes(e.is_contiguous()).into(),
                    format!("{:.3}", plan.outcome.stats.time_s),
                    status_text(&plan.outcome),
                ]
            }
            None => [
                row.label(),
                "—".into(),
                "—".into(),
                "—".into(),
                "—".into(),
                "—".into(),
                "—".into(),
                format!("{:.3}", plan.outcome.stats.time_s),
                status_text(&plan.outcome),
            ],
        },
        Err(e) => [
            row.label(),
            "—".into(),
            "—".into(),
            "—".into(),
            "—".into(),
            "no".into(),
            "—".into(),
            "—".into(),
            format!("error: {e}"),
        ],
    }
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// The rows as a [`Table`]: the method left, numbers right, the status left.
pub fn comparison_table(c: &Comparison) -> Table {
    let mut align = [Align::Right; 9];
    align[0] = Align::Left;
    align[8] = Align::Left;
    let mut t = Table::new(HEADER).aligned(align);
    for r in &c.rows {
        t.push(cells(r, c));
    }
    t
}

/// Aligned text.
pub fn comparison_text(c: &Comparison) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "objective: {}", c.objective.name());
    s.push_str(&comparison_table(c).text());
    for sk in &c.skipped {
        let _ = writeln!(s, "not run: {} ({})", sk.method, sk.reason);
    }
    s
}

/// A Markdown table (and a list of the methods not run).
pub fn comparison_markdown(c: &Comparison) -> String {
    let mut s = comparison_table(c).markdown();
    let notes: Vec<String> = c
        .rows
        .iter()
        .filter_map(|r| {
            let plan = r.result.as_ref().ok()?;
            (!plan.outcome.stats.notes.is_empty()).then(|| {
                format!(
                    "- `{}`: {}",
                    r.label(),
                    plan.outcome.stats.notes.join("; ").replace('|', "\\|")
                )
            })
        })
        .collect();
    if !notes.is_empty() || !c.skipped.is_empty() {
        let _ = writeln!(s);
    }
    for note in notes {
        let _ = writeln!(s, "{note}");
    }
    for sk in &c.skipped {
        let _ = writeln!(s, "- not run: `{}` ({})", sk.method, sk.reason);
    }
    s
}

/// JSON: one object per row plus the methods not run.
pub fn comparison_json(c: &Comparison) -> Value {
    let finite = |x: f64| if x.is_finite() { json!(x) } else { Value::Null };
    let rows: Vec<Value> = c
        .rows
        .iter()
        .map(|r| match &r.result {
            Ok(plan) => {
                let e = plan.evaluation.as_ref();
                json!({
                    "method": r.method.name(),
                    "contiguousProblem": r.contiguous_problem,
                    "status": status_text(&plan.outcome),
                    "outcome": plan.outcome.status.kind(),
                    "stopReason": plan.outcome.status.stop_reason().map(|r| r.code()),
                    "optimal": plan.outcome.status == crate::solve::Status::Optimal,
                    "maxLoad": e.map_or(Value::Null, |e| finite(e.max_load)),
                    "syncObjective": e.map_or(Value::Null, |e| finite(e.sync_objective)),
                    "totalLatency": e.and_then(|e| e.latency_total()).map_or(Value::Null, finite),
                    "acceleratorsUsed": e.map(|e| e.devices.iter().filter(|d| d.device.is_accelerator()).count()),
                    "cpusUsed": e.map(|e| e.devices.iter().filter(|d| !d.device.is_accelerator()).count()),
                    "maxMemoryBytes": e.map(|e| e.devices.iter().filter(|d| d.device.is_accelerator()).map(|d| d.memory_bytes).fold(0.0, f64::max)),
                    "valid": e.map(|e| e.is_valid()),
                    "contiguous": e.map(|e| e.is_contiguous()),
                    "bound": finite(plan.outcome.bound),
                    "timeS": plan.outcome.stats.time_s,
                    "notes": plan.outcome.stats.notes,
                })
            }
            Err(e) => json!({"method": r.method.name(), "contiguousProblem": r.contiguous_problem, "error": e}),
        })
        .collect();
    let skipped: Vec<Value> = c
        .skipped
        .iter()
        .map(|s| json!({"method": s.method.name(), "reason": s.reason}))
        .collect();
    json!({"objective": c.objective.name(), "best": finite(c.best()), "rows": rows, "notRun": skipped})
}

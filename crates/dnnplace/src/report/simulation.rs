//! A pipeline simulation as a table for people and as JSON for programs (`simulate`).

use std::fmt::Write;

use serde_json::{json, Value};

use super::table::gap;
use super::tabular::{
    Align::{Left, Right},
    Table,
};
use crate::model::human_bytes;
use crate::simulate::Simulation;

/// The table printed by `simulate`.
pub fn simulation_table(s: &Simulation) -> String {
    let mut out = String::new();
    let schedule = if s.training {
        s.schedule.to_string()
    } else {
        "plain pipeline (inference)".to_string()
    };
    let _ = writeln!(
        out,
        "schedule: {schedule}   micro-batches: {}   stages: {}   pieces: {}   tasks: {}",
        s.micro_batches,
        s.stages.positions,
        s.stages.pieces.len(),
        s.tasks.len()
    );
    let _ = writeln!(out);
    let mut table = Table::new([
        "device",
        "pieces",
        "load/sample ms",
        "busy ms",
        "compute ms",
        "comm ms",
        "idle",
        "resident",
        "peak memory",
        "limit",
        "",
    ])
    .aligned([
        Left, Right, Right, Right, Right, Right, Right, Right, Right, Right, Left,
    ]);
    for d in &s.devices {
        let over = d
            .memory_limit_bytes
            .is_some_and(|l| d.peak_memory_bytes > l);
        let mut marks = Vec::new();
        if Some(d.device) == s.bottleneck {
            marks.push("<- bottleneck");
        }
        if over {
            marks.push("OVER THE MEMORY LIMIT");
        }
        table.push([
            d.device.to_string(),
            d.pieces.to_string(),
            format!("{:.6}", d.load_ms),
            format!("{:.3}", d.busy_ms),
            format!("{:.3}", d.compute_ms),
            format!("{:.3}", d.communication_ms),
            format!("{:.1}%", 100.0 * d.idle_fraction),
            human_bytes(d.resident_bytes),
            human_bytes(d.peak_memory_bytes),
            d.memory_limit_bytes.map_or("none".to_string(), human_bytes),
            marks.join(", "),
        ]);
    }
    out.push_str(&table.text());
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "iteration time T:               {:.6} ms   (proven bounds {:.6} <= T <= {:.6}; gap to the lower {:.3}%)",
        s.iteration_ms,
        s.lower_bound_ms,
        s.upper_bound_ms,
        100.0 * gap(s.iteration_ms, s.lower_bound_ms)
    );
    let _ = writeln!(
        out,
        "time per sample T/m:            {:.6} ms   (fill and drain included)",
        s.time_per_sample_ms
    );
    if let Some(steady) = s.steady_time_per_sample_ms {
        let _ = writeln!(out, "steady-state time per sample:   {steady:.6} ms   (one more micro-batch; the plan's TPS is {:.6} ms)", s.max_load_ms);
    }
    let _ = writeln!(
        out,
        "bubble:                         {:.2}%   (idle share of the devices' time)",
        100.0 * s.bubble_fraction
    );
    for n in &s.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

/// Everything about a simulation as JSON, tasks included.
pub fn simulation_json(s: &Simulation) -> Value {
    let devices: Vec<Value> = s
        .devices
        .iter()
        .map(|d| {
            json!({
                "device": d.device.to_string(), "pieces": d.pieces, "loadMs": d.load_ms, "busyMs": d.busy_ms,
                "computeMs": d.compute_ms, "communicationMs": d.communication_ms, "idleFraction": d.idle_fraction,
                "residentBytes": d.resident_bytes, "peakMemoryBytes": d.peak_memory_bytes,
                "memoryLimitBytes": d.memory_limit_bytes, "bottleneck": Some(d.device) == s.bottleneck,
                "memory": d.memory.iter().map(|&(t, b)| json!([t, b])).collect::<Vec<_>>(),
            })
        })
        .collect();
    let tasks: Vec<Value> = s
        .tasks
        .iter()
        .map(|t| {
            let p = &s.stages.pieces[t.piece];
            json!({"device": p.device.to_string(), "pass": format!("{:?}", p.pass).to_lowercase(),
                   "microBatch": t.micro_batch, "stage": p.position, "piece": t.piece,
                   "startMs": t.start_ms, "endMs": t.end_ms})
        })
        .collect();
    json!({
        "schedule": s.schedule.to_string(),
        "training": s.training,
        "microBatches": s.micro_batches,
        "stages": s.stages.positions,
        "pieces": s.stages.pieces.len(),
        "iterationMs": s.iteration_ms,
        "lowerBoundMs": s.lower_bound_ms,
        "upperBoundMs": s.upper_bound_ms,
        "timePerSampleMs": s.time_per_sample_ms,
        "steadyTimePerSampleMs": s.steady_time_per_sample_ms,
        "maxLoadMs": s.max_load_ms,
        "bubbleFraction": s.bubble_fraction,
        "notes": s.notes,
        "devices": devices,
        "tasks": tasks,
    })
}

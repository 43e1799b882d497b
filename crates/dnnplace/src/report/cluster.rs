//! A plan on a cluster for people and programs: one row per device with its machine, its
//! accelerator type (or CPU core), nodes, compute, communication and load (ms), and memory
//! against its type's limit; then TPS, the synchronous objective and the checks.
//!
//! Also the sweep (the optimum per device count: TPS, speed-up `TPS_1 / TPS_n`, efficiency
//! `speed-up / n`, memory per device) and the price frontier (time per sample against price
//! per hour) as tables. The JSON of a plan on a cluster is the one plan record
//! ([`super::plan_json`]).

use super::charts::curve::{curve, linear};
use super::tabular::{Align, Table};
use crate::model::{human_bytes, ClusterCosts, Device, Workload};
use crate::score::ClusterEvaluation;
use crate::solve::cluster::plan::{CheckedPlan, ClusterPlan};
use crate::solve::cluster::sweep::{price, SweepRow};

/// Machine name and type name of a device (`CPU` for a core).
pub fn device_place(costs: &ClusterCosts, d: Device) -> (String, String, Option<f64>) {
    let cluster = costs.cluster();
    let machine = cluster
        .machine_of(d)
        .map_or_else(|| "?".into(), |m| cluster.machines()[m].name.clone());
    match d {
        Device::Accelerator(i) => {
            let t = &cluster.types()[cluster.accelerators()[i].accelerator_type];
            (machine, t.name.clone(), Some(t.memory_bytes))
        }
        Device::Cpu(_) => (machine, "CPU core".into(), None),
    }
}

/// The per-device table of an evaluation on a cluster.
pub fn cluster_device_table(costs: &ClusterCosts, e: &ClusterEvaluation) -> String {
    let mut t = Table::new([
        "device",
        "machine",
        "type",
        "nodes",
        "compute (ms)",
        "communication (ms)",
        "load (ms)",
        "memory",
        "",
    ])
    .aligned([
        Align::Left,
        Align::Left,
        Align::Left,
        Align::Right,
        Align::Right,
        Align::Right,
        Align::Right,
        Align::Right,
        Align::Left,
    ]);
    for d in &e.devices {
        let (machine, ty, limit) = device_place(costs, d.device);
        let memory = match limit {
            Some(l) => format!("{} / {}", human_bytes(d.memory_bytes), human_bytes(l)),
            None => human_bytes(d.memory_bytes),
        };
        let mark = if Some(d.device) == e.bottleneck {
            "<- bottleneck"
        } else {
            ""
        };
        t.push([
            d.device.to_string(),
            machine,
            ty,
            d.nodes.to_string(),
            format!("{:.6}", d.compute),
            format!("{:.6}", d.communication),
            format!("{:.6}", d.load),
            memory,
            mark.to_string(),
        ]);
    }
    t.text()
}

/// The cluster, one line per machine.
pub fn cluster_lines(costs: &ClusterCosts) -> String {
    costs
        .cluster()
        .describe()
        .iter()
        .map(|l| format!("  {l}\n"))
        .collect()
}

/// `score` on a cluster: the device table, TPS, sync and the checks.
pub fn cluster_evaluation_text(
    w: &Workload,
    costs: &ClusterCosts,
    e: &ClusterEvaluation,
) -> String {
    let mut s = format!("nodes: {}   cluster:\n{}\n", w.len(), cluster_lines(costs));
    s += &cluster_device_table(costs, e);
    s += &format!("\nTPS (max load):        {:.9} ms\n", e.max_load);
    s += &format!("sync (maxFW + maxBW):  {:.9} ms\n", e.sync_objective);
    s += &format!(
        "valid: {}   contiguous (stages fill machines in order): {}\n",
        if e.is_valid() { "yes" } else { "no" },
        if e.is_contiguous() { "yes" } else { "no" }
    );
    for v in e.violations.iter().chain(&e.non_contiguous) {
        s += &format!("  - {v}\n");
    }
    s
}

/// `plan` on a cluster: method, status, time, then the evaluation of the best plan.
pub fn cluster_plan_text(w: &Workload, plan: &ClusterPlan, best: &CheckedPlan) -> String {
    let method = match plan.method {
        crate::solve::cluster::plan::ClusterMethod::Dp => "dp",
        crate::solve::cluster::plan::ClusterMethod::BruteForce => "brute-force",
        crate::solve::cluster::plan::ClusterMethod::Ip { .. } => "ip",
        crate::solve::cluster::plan::ClusterMethod::Learned { method, .. } => method.name(),
    };
    let space = match (plan.method.contiguous(), plan.method.sync()) {
        (true, false) => "contiguous plans",
        (false, false) => "all plans",
        (true, true) => "max FW + max BW, contiguous plans",
        (false, true) => "max FW + max BW, all plans",
    };
    let status = match &plan.stopped {
        None => format!("optimal ({space} on the cluster)"),
        Some(reason) => format!(
            "feasible, gap {:.3}% ({reason}; {}, lower bound {:.6} ms)",
            super::table::gap(best.value, plan.lower_bound) * 100.0,
            plan.source,
            plan.lower_bound
        ),
    };
    let mut s = format!(
        "method: {method}   status: {status}   time: {:.3} s\n",
        plan.time_s
    );
    if matches!(
        plan.method,
        crate::solve::cluster::plan::ClusterMethod::Ip { .. }
            | crate::solve::cluster::plan::ClusterMethod::Learned { .. }
    ) {
        s += &format!("lower bound: {:.6} ms\n", plan.lower_bound);
        for note in &plan.notes {
            s += &format!("note: {note}\n");
        }
    } else {
        s += &format!("ideals: {}   states: {}\n", plan.ideals, plan.states);
    }
    s += &cluster_evaluation_text(w, &plan.costs, &best.evaluation);
    s
}

fn mix(cluster: &crate::model::Cluster, usage: &[usize]) -> String {
    let parts: Vec<String> = usage
        .iter()
        .zip(cluster.types())
        .filter(|(&n, _)| n > 0)
        .map(|(n, t)| format!("{n} x {}", t.name))
        .collect();
    if parts.is_empty() {
        "CPU only".into()
    } else {
        parts.join(" + ")
    }
}

fn largest_memory(p: &CheckedPlan) -> f64 {
    p.evaluation
        .devices
        .iter()
        .filter(|d| matches!(d.device, Device::Accelerator(_)))
        .map(|d| d.memory_bytes)
        .fold(0.0, f64::max)
}

/// The sweep as a table: accelerators, mix, TPS, speed-up, efficiency, largest memory.
pub fn sweep_table(cluster: &crate::model::Cluster, rows: &[SweepRow]) -> String {
    let mut t = Table::new([
        "accelerators",
        "mix",
        "TPS (ms)",
        "speed-up",
        "efficiency",
        "memory per device (max)",
        "gap",
    ])
    .aligned([
        Align::Right,
        Align::Left,
        Align::Right,
        Align::Right,
        Align::Right,
        Align::Right,
        Align::Right,
    ]);
    let base = rows.first().and_then(|r| r.plan).map(|p| p.value);
    for r in rows {
        match r.plan {
            Some(p) => {
                let speed_up = base.map(|b| b / p.value);
                t.push([
                    r.accelerators.to_string(),
                    mix(cluster, &p.usage),
                    format!("{:.6}", p.value),
                    speed_up.map_or("-".into(), |s| format!("{s:.3}x")),
                    speed_up.map_or("-".into(), |s| {
                        format!("{:.1}%", 100.0 * s / r.accelerators as f64)
                    }),
                    human_bytes(largest_memory(p)),
                    if p.value <= r.bound {
                        "optimal".into()
                    } else {
                        format!("{:.2}%", 100.0 * super::table::gap(p.value, r.bound))
                    },
                ]);
            }
            None if r.bound.is_finite() => t.push([
                r.accelerators.to_string(),
                format!("no plan found in time (bound {:.6})", r.bound),
            ]),
            None => t.push([r.accelerators.to_string(), "no plan fits".into()]),
        }
    }
    t.text()
}

/// The Pareto frontier of (TPS, price) as a table.
pub fn frontier_table(cluster: &crate::model::Cluster, plans: &[&CheckedPlan]) -> String {
    let mut t = Table::new(["price ($/h)", "mix", "TPS (ms)", "samples/s"]).aligned([
        Align::Right,
        Align::Left,
        Align::Right,
        Align::Right,
    ]);
    for p in plans {
        t.push([
            format!("{:.2}", price(cluster, &p.usage)),
            mix(cluster, &p.usage),
            format!("{:.6}", p.value),
            format!("{:.1}", 1000.0 / p.value),
        ]);
    }
    t.text()
}

/// One line naming a chosen plan: its mix, price and TPS.
pub fn choice_line(cluster: &crate::model::Cluster, p: &CheckedPlan) -> String {
    format!(
        "{}: {:.6} ms per sample ({:.1} samples/s) at {:.2} $/h",
        mix(cluster, &p.usage),
        p.value,
        1000.0 / p.value,
        price(cluster, &p.usage)
    )
}

/// The sweep plot: TPS per accelerator count.
pub fn sweep_svg(cluster: &crate::model::Cluster, rows: &[SweepRow]) -> String {
    let pts: Vec<(f64, f64, String)> = rows
        .iter()
        .filter_map(|r| {
            r.plan.map(|p| {
                (
                    r.accelerators as f64,
                    p.value,
                    format!(
                        "{} accelerators ({}): {:.6} ms",
                        r.accelerators,
                        mix(cluster, &p.usage),
                        p.value
                    ),
                )
            })
        })
        .collect();
    let x = linear(rows.len() as f64, "count");
    let y = linear(pts.iter().map(|p| p.1).fold(0.0, f64::max), "ms");
    let points: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1)).collect();
    let labels: Vec<String> = pts.into_iter().map(|p| p.2).collect();
    curve(
        "sweep",
        "Optimal time per sample by accelerators used",
        &points,
        &labels,
        (&x, "accelerators"),
        (&y, "time per sample"),
    )
    .to_string()
}

/// The frontier plot: TPS per price per hour.
pub fn frontier_svg(cluster: &crate::model::Cluster, plans: &[&CheckedPlan]) -> String {
    let points: Vec<(f64, f64)> = plans
        .iter()
        .map(|p| (price(cluster, &p.usage), p.value))
        .collect();
    let labels: Vec<String> = plans.iter().map(|p| choice_line(cluster, p)).collect();
    let x = linear(points.iter().map(|p| p.0).fold(0.0, f64::max), "$/h");
    let y = linear(points.iter().map(|p| p.1).fold(0.0, f64::max), "ms");
    curve(
        "frontier",
        "Pareto frontier: time per sample against price",
        &points,
        &labels,
        (&x, "price"),
        (&y, "time per sample"),
    )
    .to_string()
}

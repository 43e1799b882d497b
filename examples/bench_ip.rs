//! Bench table of the integer programs over the published workloads.
//!
//! ```text
//! cargo run --release --example bench_ip -- [LAYER_LIMIT_S] [OPERATOR_LIMIT_S] [FILTER]
//! ```
//!
//! For every `paper/throughput/{layer,operator}/*.json`: the non-contiguous max-load IP
//! (and the DP's contiguous optimum beside it); for every `paper/latency/{layer,operator}`:
//! the latency IP with one piece per accelerator (and the DP plan's latency beside it).
//! Prints one Markdown row per run as soon as it finishes: the plan's scored objective,
//! HiGHS's proven bound, the gap, the status and the wall time (DP warm start included).
//! Defaults: 60 s for layer graphs, 30 s for operator graphs; FILTER keeps paths that
//! contain it. HiGHS runs with one thread (the build machine is shared).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use dnnplace::score::evaluate;
use dnnplace::solve::milp::Ip;
use dnnplace::solve::{dp, plan, Limits, Objective, Problem, Status};

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut list: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| r.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    list.retain(|p| p.extension().is_some_and(|e| e == "json"));
    list.sort();
    list
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let layer_limit: f64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(60.0);
    let operator_limit: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(30.0);
    let filter = args.get(2).cloned().unwrap_or_default();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/workloads/paper");
    if !root.is_dir() {
        eprintln!("{} is absent: nothing to bench", root.display());
        return;
    }
    println!("| workload | objective | DP (contiguous) | IP plan | IP bound | gap | status | time (s) |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | --- | ---: |");
    for (kind, objective, contiguous) in [
        ("throughput", Objective::Throughput, false),
        ("latency", Objective::Latency { pieces: 1 }, false),
    ] {
        for granularity in ["layer", "operator"] {
            let limit = if granularity == "layer" { layer_limit } else { operator_limit };
            for path in files(&root.join(kind).join(granularity)) {
                let name = format!("{kind}/{granularity}/{}", path.file_stem().unwrap().to_string_lossy());
                if !name.contains(&filter) {
                    continue;
                }
                let w = match dnnplace::io::read_workload(&path) {
                    Ok(w) => w,
                    Err(e) => {
                        println!("| {name} | - | - | - | - | - | error: {e} | - |");
                        continue;
                    }
                };
                let dp_value = match dp::solve(&w, &Limits::default()) {
                    Ok(o) => match (&o.placement, objective) {
                        (Some(p), Objective::Latency { .. }) => {
                            let e = evaluate(&w, p, true);
                            if e.latency.max_pieces() <= 1 {
                                format!("{:.6}", e.latency.total)
                            } else {
                                format!("{:.6} ({} pieces)", e.latency.total, e.latency.max_pieces())
                            }
                        }
                        (Some(_), _) => format!("{:.6}", o.objective),
                        (None, _) => "infeasible".into(),
                    },
                    Err(e) => format!("- ({e})"),
                };
                let problem = Problem {
                    workload: &w,
                    objective,
                    contiguous,
                    limits: Limits { time_limit_s: Some(limit), threads: Some(1), ..Limits::default() },
                };
                let start = Instant::now();
                let row = match plan(&Ip, &problem) {
                    Ok(p) => {
                        let value = p.objective(objective);
                        let bound = p.outcome.bound;
                        let gap = if value > 0.0 { 100.0 * (value - bound) / value } else { 0.0 };
                        let status = match &p.outcome.status {
                            Status::Optimal => "optimal".to_string(),
                            Status::Feasible { reason } => reason.clone(),
                            other => format!("{other:?}"),
                        };
                        format!(
                            "| {name} | {} | {dp_value} | {value:.6} | {bound:.6} | {gap:.3}% | {status} | {:.1} |",
                            objective_label(objective, contiguous),
                            start.elapsed().as_secs_f64()
                        )
                    }
                    Err(e) => format!("| {name} | - | {dp_value} | - | - | - | error: {e} | - |"),
                };
                println!("{row}");
                std::io::stdout().flush().ok();
            }
        }
    }
}

fn objective_label(objective: Objective, contiguous: bool) -> String {
    let c = if contiguous { "contiguous" } else { "non-contiguous" };
    match objective {
        Objective::Throughput => format!("TPS, {c}"),
        Objective::Sync => format!("sync, {c}"),
        Objective::Latency { pieces } => format!("latency, q={pieces}"),
    }
}

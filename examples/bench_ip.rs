//! Bench table of the integer programs over the published workloads.
//!
//! ```text
//! cargo run --release --example bench_ip -- [--limit 60] [--threads N]
//!     [--rows tps,tps-contiguous,sync,latency1,latency2] [--filter TEXT]
//! ```
//!
//! Rows, each over the matching `../shared/workloads/paper` files:
//! - `tps`: the non-contiguous max-load IP on `throughput/{layer,operator}`;
//! - `tps-contiguous`: the contiguous max-load IP (chain of stages) on the same files;
//! - `sync`: the non-contiguous synchronous IP on the training graphs;
//! - `latency1`, `latency2`: the latency IP with q = 1 and q = 2 pieces on
//!   `latency/{layer,operator}`.
//!
//! Beside every IP result is the DP's: its contiguous TPS optimum (TPS rows), or the DP
//! plan scored for the row's objective — the plan a user would otherwise run. "vs DP" is
//! how much lower the IP's plan is. One Markdown row per run, printed as soon as it ends:
//! the plan's scored objective, HiGHS's proven bound, the gap, the status and the wall time
//! (warm starts included).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser;
use dnnplace::report::table::status_text;
use dnnplace::score::evaluate;
use dnnplace::solve::milp::Ip;
use dnnplace::solve::milp::{IpExperiment, IpOptions};
use dnnplace::solve::{dp, plan, Limits, Objective, Problem, Status};

#[derive(Parser)]
struct Args {
    /// Time limit per run, seconds.
    #[arg(long, default_value_t = 60.0)]
    limit: f64,
    /// HiGHS threads per run [default: all].
    #[arg(long)]
    threads: Option<usize>,
    /// Which rows, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "tps,tps-contiguous,latency1,latency2"
    )]
    rows: Vec<String>,
    /// Keep only workloads whose path contains this.
    #[arg(long, default_value = "")]
    filter: String,
    /// Formulation experiments (docs/ip.md), comma-separated: nosym, nowarm, noreach,
    /// nocapacity, nobound, boundafter, positions.
    #[arg(long, value_delimiter = ',', value_parser = parse_experiment)]
    ip_experiment: Vec<IpExperiment>,
}

fn parse_experiment(word: &str) -> Result<IpExperiment, String> {
    IpExperiment::from_word(word).ok_or_else(|| format!("unknown experiment '{word}'"))
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut list: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| r.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    list.retain(|p| p.extension().is_some_and(|e| e == "json"));
    list.sort();
    list
}

/// (row name, workload folder, objective, contiguous, training graphs only)
const ROWS: [(&str, &str, Objective, bool, bool); 5] = [
    ("tps", "throughput", Objective::Throughput, false, false),
    (
        "tps-contiguous",
        "throughput",
        Objective::Throughput,
        true,
        false,
    ),
    ("sync", "throughput", Objective::Sync, false, true),
    (
        "latency1",
        "latency",
        Objective::Latency { pieces: 1 },
        false,
        false,
    ),
    (
        "latency2",
        "latency",
        Objective::Latency { pieces: 2 },
        false,
        false,
    ),
];

fn main() {
    let args = Args::parse();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/workloads/paper");
    if !root.is_dir() {
        eprintln!("{} is absent: nothing to bench", root.display());
        return;
    }
    if let Some(unknown) = args
        .rows
        .iter()
        .find(|r| !ROWS.iter().any(|row| row.0 == r.as_str()))
    {
        eprintln!(
            "unknown row {unknown}; rows are {}",
            ROWS.map(|r| r.0).join(", ")
        );
        std::process::exit(2);
    }
    println!(
        "| workload | objective | DP | IP plan | vs DP | IP bound | gap | status | time (s) |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |");
    for (row, kind, objective, contiguous, training_only) in ROWS {
        if !args.rows.iter().any(|r| r == row) {
            continue;
        }
        for granularity in ["layer", "operator"] {
            for path in files(&root.join(kind).join(granularity)) {
                let name = format!(
                    "{kind}/{granularity}/{}",
                    path.file_stem().unwrap().to_string_lossy()
                );
                if !name.contains(&args.filter) || (training_only && !name.contains("training")) {
                    continue;
                }
                println!("{}", bench_row(&name, &path, objective, contiguous, &args));
                std::io::stdout().flush().ok();
            }
        }
    }
}

fn bench_row(
    name: &str,
    path: &Path,
    objective: Objective,
    contiguous: bool,
    args: &Args,
) -> String {
    let label = objective_label(objective, contiguous);
    let w = match dnnplace::io::read_workload(path) {
        Ok(w) => w,
        Err(e) => return format!("| {name} | {label} | - | - | - | - | - | error: {e} | - |"),
    };
    let dp_value = match dp::solve(&w, &Limits::default()) {
        Ok(o) => o.placement.map(|p| {
            objective.value(&evaluate(
                &w,
                &p,
                matches!(objective, Objective::Latency { .. }),
            ))
        }),
        Err(_) => None,
    };
    let ip = args
        .ip_experiment
        .iter()
        .fold(IpOptions::default(), |o, &e| o.with(e));
    let limits = Limits {
        time_limit_s: Some(args.limit),
        threads: args.threads,
        ip,
        ..Limits::default()
    };
    let problem = Problem {
        workload: &w,
        devices: dnnplace::solve::Devices::of(&w),
        objective,
        contiguous,
        limits,
        pipeline: None,
    };
    let start = Instant::now();
    let p = match plan(&Ip, &problem) {
        Ok(p) => p,
        Err(e) => return format!("| {name} | {label} | - | - | - | - | - | error: {e} | - |"),
    };
    let value = p.objective(objective);
    let bound = p.outcome.bound;
    let gap = if value > 0.0 {
        100.0 * (value - bound) / value
    } else {
        0.0
    };
    let status = match &p.outcome.status {
        Status::Optimal => "optimal".to_string(),
        Status::Feasible { reason } => reason.to_string(),
        _ => status_text(&p.outcome).replace('|', "\\|"),
    };
    let (dp_text, versus) = match dp_value {
        Some(d) if d.is_finite() => (
            format!("{d:.6}"),
            format!("{:.2}%", 100.0 * (d - value) / d),
        ),
        _ => ("— (DP: too many ideals)".to_string(), "—".to_string()),
    };
    format!(
        "| {name} | {label} | {dp_text} | {value:.6} | {versus} | {bound:.6} | {gap:.3}% | {status} | {:.1} |",
        start.elapsed().as_secs_f64()
    )
}

fn objective_label(objective: Objective, contiguous: bool) -> String {
    let c = if contiguous {
        "contiguous"
    } else {
        "non-contiguous"
    };
    match objective {
        Objective::Throughput => format!("TPS, {c}"),
        Objective::Sync => format!("sync, {c}"),
        Objective::Latency { pieces } => format!("latency, q={pieces}"),
    }
}

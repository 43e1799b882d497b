//! Planning time of the cluster DP (docs/cluster.md, README bench table).
//!
//! `cargo run --release --example cluster_bench -- [--limit SECONDS] WORKLOAD.json... -- CLUSTER...`

use dnnplace::costmodel::cluster::cluster_from_arg;
use dnnplace::io::read_workload;
use dnnplace::model::{ClusterCosts, Platform};
use dnnplace::solve::cluster::dp::{solve, Tracking};
use dnnplace::solve::Limits;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut limit = 60.0;
    let mut files = Vec::new();
    let mut clusters = Vec::new();
    let mut after = false;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--limit" => {
                limit = args[i + 1].parse().expect("seconds");
                i += 1;
            }
            "--" => after = true,
            a if after => clusters.push(a.to_string()),
            a => files.push(a.to_string()),
        }
        i += 1;
    }
    println!("| workload | cluster | groups | ideals | states | TPS (ms) | time (s) |");
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: |");
    for f in &files {
        let w = read_workload(std::path::Path::new(f)).expect("workload");
        for spec in &clusters {
            let cluster = cluster_from_arg(spec, &[]).expect("cluster");
            let w = w
                .with_platform(Platform {
                    cluster: Some(cluster),
                    ..w.platform().clone()
                })
                .expect("fits");
            let costs = ClusterCosts::of(&w);
            let limits = Limits {
                time_limit_s: Some(limit),
                ..Limits::default()
            };
            let start = std::time::Instant::now();
            let r = solve(&w, &costs, &limits, Tracking::Best, f64::INFINITY);
            let t = start.elapsed().as_secs_f64();
            let groups = dnnplace::model::contraction::Contraction::new(&w).len();
            match r {
                Ok(r) => println!(
                    "| {} | {spec} | {groups} | {} | {} | {} | {t:.2} |",
                    std::path::Path::new(f)
                        .file_stem()
                        .unwrap()
                        .to_string_lossy(),
                    r.ideals,
                    r.states,
                    r.best.map_or(
                        if r.stopped.is_some() {
                            "stopped".to_string()
                        } else {
                            "infeasible".into()
                        },
                        |b| format!("{:.6}", b.0)
                    )
                ),
                Err(e) => println!("| {f} | {spec} | {groups} | - | - | {e} | {t:.2} |"),
            }
        }
    }
}

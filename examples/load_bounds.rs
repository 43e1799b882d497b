//! The combinatorial lower bound on the max load (`solve::bounds::load`) for every
//! published throughput workload, with each test alone beside it, so a bound can be
//! traced to the argument that gives it.
//!
//! ```text
//! cargo run --release --example load_bounds -- [FILTER] [--contiguous]
//! ```
//!
//! Units are colour classes (non-contiguous plans) or, with `--contiguous`, the groups
//! of the contraction (contiguous plans). Prints one Markdown row per workload.

use std::path::Path;
use std::time::Instant;

use dnnplace::solve::bounds::load::breakdown;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let contiguous = args.iter().any(|a| a == "--contiguous");
    let filter = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .cloned()
        .unwrap_or_default();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/workloads/paper/throughput");
    if !root.is_dir() {
        eprintln!("{} is absent: nothing to bound", root.display());
        return;
    }
    println!("| workload | forced | pigeon | volume | communication | packing | all | time (s) |");
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for granularity in ["layer", "operator"] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(granularity))
            .map(|r| r.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        files.retain(|p: &std::path::PathBuf| p.extension().is_some_and(|e| e == "json"));
        files.sort();
        for path in files {
            let name = format!(
                "{granularity}/{}",
                path.file_stem().unwrap().to_string_lossy()
            );
            if !name.contains(&filter) {
                continue;
            }
            let w = match dnnplace::io::read_workload(&path) {
                Ok(w) => w,
                Err(e) => {
                    println!("| {name} | error: {e} |");
                    continue;
                }
            };
            let start = Instant::now();
            let parts = breakdown(&w, contiguous);
            let cells: Vec<String> = parts.iter().map(|(_, v)| format!("{v:.6}")).collect();
            println!(
                "| {name} | {} | {:.1} |",
                cells.join(" | "),
                start.elapsed().as_secs_f64()
            );
        }
    }
}

//! The split search (`solve::split_search`) on one workload file from a starting
//! threshold, printing what it found and its counters: for measuring the search alone.
//!
//! ```text
//! cargo run --release --example split_search -- WORKLOAD.json [START] [TIME_S]
//! ```

use std::path::Path;
use std::time::Instant;

use dnnplace::solve::budget::Budget;
use dnnplace::solve::split_search;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(file) = args.first() else {
        eprintln!("usage: split_search WORKLOAD.json [START] [TIME_S]");
        std::process::exit(2);
    };
    let w = match dnnplace::io::read_workload(Path::new(file)) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("{file}: {e}");
            std::process::exit(2);
        }
    };
    let start = args
        .get(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::INFINITY);
    let time_s = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(60.0);
    let t = Instant::now();
    match split_search::solve(&w, start, &Budget::new(Some(time_s), None)) {
        None => println!("does not fit the split search"),
        Some(f) => println!(
            "value {} bound {} finished {:?} states {} stages {} in {:.2} s; twin classes {:?}; trace {:?}",
            f.value,
            f.bound,
            f.finished,
            f.states,
            f.stages,
            t.elapsed().as_secs_f64(),
            f.twin_classes,
            f.trace
        ),
    }
}

//! The table of `dnnplace bench`: per workload file the method's time, the process's wall
//! time, ideals, ideal pairs evaluated, peak memory, the objective and an expert split's TPS.

use super::tabular::{Align, Table};
use crate::experiments::bench::{BenchRow, ExpertScore};

/// The column names.
pub const HEADER: [&str; 8] = [
    "workload",
    "solve s",
    "wall s",
    "ideals",
    "ideal pairs",
    "peak MiB",
    "objective",
    "expert",
];

/// The rows as a [`Table`], every column right-aligned.
pub fn bench_table(rows: &[BenchRow]) -> Table {
    let mut t = Table::new(HEADER).aligned([Align::Right; 8]);
    for r in rows {
        let expert = match &r.expert {
            ExpertScore::None => "-".to_string(),
            ExpertScore::OtherGraph => "n/a (other graph)".to_string(),
            ExpertScore::Invalid(v) => format!("invalid: {v}"),
            ExpertScore::Tps(tps) => format!("{tps:.6}"),
        };
        let count = |x: Option<u64>| x.map_or("-".to_string(), |x| x.to_string());
        match &r.run {
            Err(e) => t.push([
                r.name.clone(),
                "failed".into(),
                e.clone(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                expert,
            ]),
            Ok(run) => t.push([
                r.name.clone(),
                format!("{:.3}", run.solve_s.unwrap_or(f64::NAN)),
                format!("{:.3}", run.wall_s),
                count(run.ideals),
                count(run.ideal_pairs),
                run.peak_memory_bytes.map_or("-".into(), |b| {
                    format!("{:.1}", b as f64 / (1024.0 * 1024.0))
                }),
                format!("{:.9}", run.objective.unwrap_or(f64::NAN)),
                expert,
            ]),
        }
    }
    t
}

//! `dnnplace reproduce DIR`: the comparison over every published workload, as the
//! Markdown page `docs/results.md`.
//!
//! The folder has the layout of `../shared/workloads/paper`: `throughput/{layer,operator}`
//! and `latency/{layer,operator}` hold workloads, `experts/` the human splits. Throughput
//! workloads are compared on TPS (contiguous and non-contiguous methods), latency ones on
//! single-sample latency with one piece per accelerator. The expert split of `layer/X.json`
//! is `experts/X_expert.json`; a training graph without its own uses the inference split
//! of its model (`experts/M_inference_expert.json` for `M_training`), completed by colour
//! class. Operator-level graphs have no expert splits (their node ids differ).
//!
//! For each section the page has a summary (one row per workload, one column per method,
//! the primary objective; for throughput a column checking that the DP is at most every
//! contiguous baseline) and then every workload's full comparison table.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use super::compare::comparison_markdown;
use crate::io::{read_placement, read_workload, IoError};
use crate::solve::baselines::expert::Expert;
use crate::solve::compare::{compare, Comparison};
use crate::solve::{methods, Limits, Method, Objective};

/// One published workload and what to compare it on.
#[derive(Clone, Debug)]
pub struct Case {
    /// `throughput/layer`, ...
    pub section: String,
    pub path: PathBuf,
    /// File stem, e.g. `gnmt_inference`.
    pub name: String,
    pub objective: Objective,
    pub expert: Option<PathBuf>,
}

/// The sections, in page order, with their objective.
pub const SECTIONS: [(&str, Objective); 4] = [
    ("throughput/layer", Objective::Throughput),
    ("throughput/operator", Objective::Throughput),
    ("latency/layer", Objective::Latency { pieces: 1 }),
    ("latency/operator", Objective::Latency { pieces: 1 }),
];

/// The workloads under `dir`, sorted by section then name. Errors if no section exists.
pub fn cases(dir: &Path) -> Result<Vec<Case>, IoError> {
    let mut out = Vec::new();
    for (section, objective) in SECTIONS {
        let folder = dir.join(section);
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        for path in files {
            let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            let expert = if section.ends_with("/layer") { expert_for(dir, &name) } else { None };
            out.push(Case { section: section.into(), path, name, objective, expert });
        }
    }
    if out.is_empty() {
        return Err(IoError::Format(format!(
            "{}: no workloads found (expected throughput/layer, throughput/operator, latency/layer or latency/operator with .json files)",
            dir.display()
        )));
    }
    Ok(out)
}

/// The expert split for the layer-level workload `name`, if one exists.
pub fn expert_for(dir: &Path, name: &str) -> Option<PathBuf> {
    let own = dir.join("experts").join(format!("{name}_expert.json"));
    if own.is_file() {
        return Some(own);
    }
    let model = name.strip_suffix("_training")?;
    let inference = dir.join("experts").join(format!("{model}_inference_expert.json"));
    inference.is_file().then_some(inference)
}

/// What [`run_case`] returns: the comparison and a note about the expert split.
pub type CaseResult = Result<(Comparison, Option<String>), String>;

/// The comparison of one case. A workload or split that cannot be read is an error row
/// in the page, not a failure of the whole run.
pub fn run_case(case: &Case, limits: &Limits) -> CaseResult {
    let w = read_workload(&case.path).map_err(|e| e.to_string())?;
    let mut list: Vec<Box<dyn Method>> = methods().into_iter().filter(|m| m.name() != "expert").collect();
    let mut expert_note = None;
    if let Some(path) = &case.expert {
        match read_placement(path, &w) {
            Ok(p) => {
                let shown = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
                list.push(Box::new(Expert::new(p, format!("experts/{shown}"))));
                expert_note = Some(format!("expert split: `experts/{shown}`"));
            }
            Err(e) => expert_note = Some(format!("expert split not usable: {e}")),
        }
    }
    Ok((compare(&w, case.objective, limits, &list, true), expert_note))
}

/// The whole page, running `jobs` workloads at a time (at least 1). `progress` is told
/// about each workload before it runs.
pub fn reproduce(
    dir: &Path,
    limits: &Limits,
    command: &str,
    jobs: usize,
    progress: impl Fn(&Case) + Sync,
) -> Result<String, IoError> {
    let cases = cases(dir)?;
    let started = std::time::Instant::now();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<CaseResult>>> = cases.iter().map(|_| Default::default()).collect();
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, cases.len()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(case) = cases.get(i) else { break };
                progress(case);
                let result = run_case(case, limits);
                *slots[i].lock().expect("no worker panics while holding a slot") = Some(result);
            });
        }
    });
    let results: Vec<CaseResult> = slots
        .into_iter()
        .map(|slot| slot.into_inner().expect("no worker panicked").expect("every case ran"))
        .collect();
    let mut s = String::new();
    let _ = writeln!(s, "# Results: every method on every published workload\n");
    let _ = writeln!(
        s,
        "Generated by `{command}` (dnnplace {}); do not edit by hand — rerun the command. \
         Every plan is re-scored by the independent evaluator. Times are wall-clock seconds \
         on the machine that ran it, {} workload(s) at a time (the run took {:.0} s in all). \
         Local search: {} restarts, seed {}; time limit per method run: {}. A method that also \
         solves the non-contiguous problem is not rerun on the contiguous one once the DP has \
         proven its optimum.\n",
        env!("CARGO_PKG_VERSION"),
        jobs.clamp(1, cases.len()),
        started.elapsed().as_secs_f64(),
        limits.restarts,
        limits.seed,
        limits.time_limit_s.map_or("none".into(), |t| format!("{t} s")),
    );
    let _ = writeln!(
        s,
        "Columns: TPS = Time-Per-Sample (max device load); latency = single-sample latency; `*` marks the \
         best primary objective (TPS for throughput workloads, latency for latency workloads). \
         \"(non-contiguous)\" rows solved the problem without the contiguity rule.\n"
    );
    for (section, objective) in SECTIONS {
        let items: Vec<(&Case, &CaseResult)> =
            cases.iter().zip(&results).filter(|(c, _)| c.section == section).collect();
        if items.is_empty() {
            continue;
        }
        let _ = writeln!(s, "## {section} ({})\n", objective.name());
        let _ = write!(s, "{}", summary(objective, &items));
        for (case, result) in &items {
            let _ = writeln!(s, "### {section}/{}\n", case.name);
            match result {
                Ok((c, note)) => {
                    if let Some(note) = note {
                        let _ = writeln!(s, "{note}\n");
                    }
                    let _ = writeln!(s, "{}", comparison_markdown(c));
                }
                Err(e) => {
                    let _ = writeln!(s, "error: {e}\n");
                }
            }
        }
    }
    Ok(s)
}

/// Whether the DP's TPS is at most every contiguous plan's (`None` without a DP plan).
pub fn dp_at_most_contiguous(c: &Comparison) -> Option<bool> {
    let dp = c.rows.iter().find(|r| r.method == "dp" && r.contiguous_problem)?;
    let dp_value = dp.result.as_ref().ok()?.evaluation.as_ref()?.max_load;
    Some(c.rows.iter().all(|r| {
        let Ok(plan) = &r.result else { return true };
        match &plan.evaluation {
            Some(e) if e.is_contiguous() => dp_value <= e.max_load * (1.0 + 1e-9),
            _ => true,
        }
    }))
}

fn summary(objective: Objective, items: &[(&Case, &CaseResult)]) -> String {
    let mut labels: Vec<String> = Vec::new();
    for (_, r) in items {
        if let Ok((c, _)) = r {
            for row in &c.rows {
                if !labels.contains(&row.label()) {
                    labels.push(row.label());
                }
            }
        }
    }
    let throughput = objective == Objective::Throughput;
    let mut s = String::new();
    let what = if throughput { "TPS" } else { "latency" };
    let _ = writeln!(s, "{what} by method (bold: best).\n");
    let _ = write!(s, "| workload | {} |", labels.join(" | "));
    if throughput {
        s.push_str(" DP ≤ contiguous baselines |");
    }
    s.push('\n');
    let _ = write!(s, "|{}", " --- |".repeat(labels.len() + 1 + usize::from(throughput)));
    s.push('\n');
    for (case, r) in items {
        let _ = write!(s, "| {} |", case.name);
        match r {
            Ok((c, _)) => {
                let best = c.best();
                for label in &labels {
                    let cell = match c.rows.iter().find(|row| &row.label() == label) {
                        None => "".into(),
                        Some(row) => match &row.result {
                            Err(_) => "error".into(),
                            Ok(_) => {
                                let v = row.value(objective);
                                if !v.is_finite() {
                                    "—".into()
                                } else if v <= best * (1.0 + 1e-9) {
                                    format!("**{v:.3}**")
                                } else {
                                    format!("{v:.3}")
                                }
                            }
                        },
                    };
                    let _ = write!(s, " {cell} |");
                }
                if throughput {
                    let check = match dp_at_most_contiguous(c) {
                        Some(true) => "yes",
                        Some(false) => "**NO**",
                        None => "no DP plan",
                    };
                    let _ = write!(s, " {check} |");
                }
            }
            Err(e) => {
                let _ = write!(s, " error: {} |", e.replace('|', "\\|"));
            }
        }
        s.push('\n');
    }
    s.push('\n');
    s
}

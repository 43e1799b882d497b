//! The comparison over every published workload (`dnnplace reproduce DIR`): which
//! workloads, what each is compared on, and the runs, `jobs` workloads at a time.
//! [`crate::report::reproduce`] turns the result into docs/results.md.
//!
//! The folder has the layout of `../shared/workloads/paper`: `throughput/{layer,operator}`
//! and `latency/{layer,operator}` hold workloads, `experts/` the human splits. Throughput
//! workloads are compared on TPS (contiguous and non-contiguous methods), latency ones on
//! single-sample latency with one piece per accelerator. The expert split of `layer/X.json`
//! is `experts/X_expert.json`; a training graph without its own uses the inference split
//! of its model (`experts/M_inference_expert.json` for `M_training`), completed by colour
//! class. Operator-level graphs have no expert splits (their node ids differ).
//!
//! Workers take the next case from a shared counter, so w workers finish c cases in about
//! (Σ case times) / w when no case dominates.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::io::{read_placement, read_workload, IoError};
use crate::solve::baselines::expert::Expert;
use crate::solve::compare::{compare, Comparison};
use crate::solve::{methods, Limits, Method, MethodId, Objective};

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
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let expert = if section.ends_with("/layer") {
                expert_for(dir, &name)
            } else {
                None
            };
            out.push(Case {
                section: section.into(),
                path,
                name,
                objective,
                expert,
            });
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

/// The expert split for the layer-level workload `name` of the workloads folder `dir`.
pub fn expert_for(dir: &Path, name: &str) -> Option<PathBuf> {
    super::expert_split(&dir.join("experts"), name)
}

/// What [`run_case`] returns: the comparison and a note about the expert split.
pub type CaseResult = Result<(Comparison, Option<String>), String>;

/// The comparison of one case. A workload or split that cannot be read is an error row
/// in the page, not a failure of the whole run.
pub fn run_case(case: &Case, limits: &Limits) -> CaseResult {
    let w = read_workload(&case.path).map_err(|e| e.to_string())?;
    let mut list: Vec<Box<dyn Method>> = methods()
        .into_iter()
        .filter(|m| m.id() != MethodId::Expert)
        .collect();
    let mut expert_note = None;
    if let Some(path) = &case.expert {
        match read_placement(path, &w) {
            Ok(p) => {
                let shown = path
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default();
                list.push(Box::new(Expert::new(p, format!("experts/{shown}"))));
                expert_note = Some(format!("expert split: `experts/{shown}`"));
            }
            Err(e) => expert_note = Some(format!("expert split not usable: {e}")),
        }
    }
    Ok((
        compare(&w, case.objective, limits, &list, true),
        expert_note,
    ))
}

/// Every case of a folder with its result, in [`cases`] order.
#[derive(Debug)]
pub struct Reproduction {
    pub cases: Vec<Case>,
    pub results: Vec<CaseResult>,
    /// Workloads run at a time.
    pub jobs: usize,
    /// Wall-clock seconds of the whole run.
    pub elapsed_s: f64,
}

/// Runs every case under `dir`, `jobs` workloads at a time (at least 1, at most one per
/// case). `progress` is told about each workload before it runs.
pub fn reproduce(
    dir: &Path,
    limits: &Limits,
    jobs: usize,
    progress: impl Fn(&Case) + Sync,
) -> Result<Reproduction, IoError> {
    let cases = cases(dir)?;
    let started = std::time::Instant::now();
    let jobs = jobs.clamp(1, cases.len());
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<CaseResult>>> = cases.iter().map(|_| Default::default()).collect();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(case) = cases.get(i) else { break };
                progress(case);
                let result = run_case(case, limits);
                *slots[i]
                    .lock()
                    .expect("no worker panics while holding a slot") = Some(result);
            });
        }
    });
    let results: Vec<CaseResult> = slots
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .expect("no worker panicked")
                .expect("every case ran")
        })
        .collect();
    Ok(Reproduction {
        cases,
        results,
        jobs,
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}

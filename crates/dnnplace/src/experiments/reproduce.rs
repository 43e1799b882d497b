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
//! **Seeds.** With `seeds = N > 1` the search placers (`rl`, `genetic`) also run on every
//! workload's contiguous problem with seeds `1..=N` ([`SeedRun`]; the comparison's own
//! seed is read from its rows, not rerun), for the spread over seeds.
//!
//! **Clusters** ([`CLUSTER_CASES`]): published layer workloads placed on mixed-type
//! clusters (their nodes timed by each type's speed against the V100 they were profiled
//! on, docs/cluster.md), TPS over contiguous plans on the cluster: the cluster DP
//! ([`crate::solve::cluster::plan`]) for the optimum or its best bound, and the search
//! placers with seeds `1..=N`, every plan re-scored by the cluster scorer.
//!
//! Workers take the next task (a workload, or a cluster instance) from a shared counter,
//! so w workers finish c tasks in about (Σ task times) / w when no task dominates.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::io::cluster_resolve::cluster_for;
use crate::io::{read_placement, read_workload, IoError};
use crate::model::{Platform, Workload};
use crate::solve::baselines::expert::Expert;
use crate::solve::cluster::plan::{ClusterMethod, ClusterPlan, OnCluster};
use crate::solve::compare::{compare, Comparison};
use crate::solve::TracePoint;
use crate::solve::{
    methods, CheckFailure, Limits, Method, MethodId, Objective, Problem, SolveError,
};

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

/// The search placers of the seeds runs.
pub const SEARCH_PLACERS: [MethodId; 2] = [MethodId::Rl, MethodId::Genetic];

/// One search placer's run with one seed on the contiguous problem: its best objective
/// (∞ without a plan), scorer evaluations and trace.
#[derive(Clone, Debug)]
pub struct SeedRun {
    pub method: MethodId,
    pub seed: u64,
    pub objective: f64,
    pub evaluations: u64,
    pub trace: Vec<TracePoint>,
}

/// The search placers with seeds `1..=seeds` on `case`'s contiguous problem; the runs with
/// `limits.seed` are read from the comparison `c`. Errors are left out (the comparison
/// shows them).
pub fn seed_runs(case: &Case, c: &Comparison, limits: &Limits, seeds: u64) -> Vec<SeedRun> {
    let Ok(w) = read_workload(&case.path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for method in SEARCH_PLACERS {
        for seed in 1..=seeds {
            if seed == limits.seed {
                let row = c
                    .rows
                    .iter()
                    .find(|r| r.method == method && r.contiguous_problem);
                if let Some(Ok(plan)) = row.map(|r| &r.result) {
                    out.push(SeedRun {
                        method,
                        seed,
                        objective: plan.objective(c.objective),
                        evaluations: plan.outcome.stats.evaluations.unwrap_or(0),
                        trace: plan.outcome.stats.trace.clone(),
                    });
                }
                continue;
            }
            let problem = Problem {
                workload: &w,
                devices: crate::solve::Devices::of(&w),
                objective: case.objective,
                contiguous: true,
                limits: Limits {
                    seed,
                    ..limits.clone()
                },
                pipeline: None,
            };
            let searcher: Box<dyn Method> = crate::solve::method(method);
            if let Ok(plan) = crate::solve::plan(searcher.as_ref(), &problem) {
                out.push(SeedRun {
                    method,
                    seed,
                    objective: plan.objective(case.objective),
                    evaluations: plan.outcome.stats.evaluations.unwrap_or(0),
                    trace: plan.outcome.stats.trace,
                });
            }
        }
    }
    out
}

/// The cluster instances: (published layer workload, cluster of `--cluster`).
pub const CLUSTER_CASES: [(&str, &str); 4] = [
    ("bert24_training", "1x8xa100-80gb+1x8xv100"),
    ("bert24_training", "2x4xa100-80gb+2x4xv100"),
    ("gnmt_training", "1x8xa100-80gb+1x8xv100"),
    ("gnmt_training", "2x4xa100-80gb+2x4xv100"),
];

/// One cluster instance.
#[derive(Clone, Debug)]
pub struct ClusterCase {
    /// The layer workload's file stem.
    pub name: String,
    /// The cluster, as `--cluster` spells it.
    pub cluster: String,
    pub path: PathBuf,
}

/// The cluster instances of [`CLUSTER_CASES`] whose workload is under `dir`.
pub fn cluster_cases(dir: &Path) -> Vec<ClusterCase> {
    CLUSTER_CASES
        .iter()
        .map(|(name, cluster)| ClusterCase {
            name: name.to_string(),
            cluster: cluster.to_string(),
            path: dir.join("throughput/layer").join(format!("{name}.json")),
        })
        .filter(|c| c.path.is_file())
        .collect()
}

/// What a cluster instance gave: the cluster DP's checked plan and the search placers'
/// runs (values re-scored by the cluster scorer), seeds `1..=N`.
#[derive(Debug)]
pub struct ClusterOutcome {
    pub dp: ClusterPlan,
    pub runs: Vec<SeedRun>,
}

/// The workload of `case` on its cluster.
pub fn cluster_workload(case: &ClusterCase) -> Result<Workload, String> {
    let w = read_workload(&case.path).map_err(|e| e.to_string())?;
    let cluster = cluster_for(&case.cluster, &[], Some(w.len()))?;
    let platform = Platform {
        cluster: Some(cluster),
        ..w.platform().clone()
    };
    w.with_platform(platform).map_err(|e| e.to_string())
}

/// `method`'s checked plan of `w` on its cluster, through the one road ([`crate::solve::plan`]
/// with the cluster method behind [`Method`]; contiguous TPS).
fn on_cluster(
    w: &Workload,
    limits: &Limits,
    method: ClusterMethod,
) -> Result<ClusterPlan, SolveError> {
    let problem = Problem {
        limits: limits.clone(),
        ..Problem::throughput(w)
    };
    crate::solve::plan(&OnCluster(method), &problem)?
        .cluster
        .ok_or(SolveError::Check(CheckFailure::NoClusterPlan))
}

/// The cluster DP and the search placers (seeds `1..=seeds`) on one cluster instance.
pub fn run_cluster_case(
    case: &ClusterCase,
    limits: &Limits,
    seeds: u64,
) -> Result<ClusterOutcome, String> {
    let w = cluster_workload(case)?;
    let dp = on_cluster(&w, limits, ClusterMethod::Dp).map_err(|e| e.to_string())?;
    let mut runs = Vec::new();
    for method in SEARCH_PLACERS {
        for seed in 1..=seeds {
            let limits = Limits {
                seed,
                ..limits.clone()
            };
            let learned = ClusterMethod::Learned {
                method,
                contiguous: true,
                sync: false,
            };
            let plan = on_cluster(&w, &limits, learned)
                .map_err(|e| format!("{method} seed {seed}: {e}"))?;
            runs.push(SeedRun {
                method,
                seed,
                objective: plan.best.as_ref().map_or(f64::INFINITY, |b| b.value),
                evaluations: plan.evaluations.unwrap_or(0),
                trace: plan.trace,
            });
        }
    }
    Ok(ClusterOutcome { dp, runs })
}

/// Every case of a folder with its result, in [`cases`] order.
#[derive(Debug)]
pub struct Reproduction {
    pub cases: Vec<Case>,
    pub results: Vec<CaseResult>,
    /// Per case, the search placers' runs over seeds (empty with one seed).
    pub seed_runs: Vec<Vec<SeedRun>>,
    /// Seeds `1..=seeds` of the seed runs and the cluster instances.
    pub seeds: u64,
    pub clusters: Vec<ClusterCase>,
    pub cluster_results: Vec<Result<ClusterOutcome, String>>,
    /// Workloads run at a time.
    pub jobs: usize,
    /// Wall-clock seconds of the whole run.
    pub elapsed_s: f64,
}

/// One task of the run: a published workload or a cluster instance.
enum Task {
    Workload(usize),
    Cluster(usize),
}

/// What a task gave.
enum Done {
    Workload(CaseResult, Vec<SeedRun>),
    Cluster(Box<Result<ClusterOutcome, String>>),
}

/// Runs every case under `dir` and the cluster instances, `jobs` tasks at a time (at least
/// 1, at most one per task), the search placers with seeds `1..=seeds` (`seeds` ≤ 1: the
/// comparison's seed only, no seed runs). `progress` is told about each task before it
/// runs.
pub fn reproduce(
    dir: &Path,
    limits: &Limits,
    jobs: usize,
    seeds: u64,
    progress: impl Fn(&str) + Sync,
) -> Result<Reproduction, IoError> {
    let cases = cases(dir)?;
    let clusters = cluster_cases(dir);
    let started = std::time::Instant::now();
    let tasks: Vec<Task> = (0..cases.len())
        .map(Task::Workload)
        .chain((0..clusters.len()).map(Task::Cluster))
        .collect();
    let jobs = jobs.clamp(1, tasks.len());
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Done>>> = tasks.iter().map(|_| Default::default()).collect();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(task) = tasks.get(i) else { break };
                let done = match *task {
                    Task::Workload(k) => {
                        let case = &cases[k];
                        progress(&format!("{}/{}", case.section, case.name));
                        let result = run_case(case, limits);
                        let runs = match (&result, seeds > 1) {
                            (Ok((c, _)), true) => seed_runs(case, c, limits, seeds),
                            _ => Vec::new(),
                        };
                        Done::Workload(result, runs)
                    }
                    Task::Cluster(k) => {
                        let case = &clusters[k];
                        progress(&format!("cluster {} on {}", case.name, case.cluster));
                        Done::Cluster(Box::new(run_cluster_case(case, limits, seeds.max(1))))
                    }
                };
                *slots[i]
                    .lock()
                    .expect("no worker panics while holding a slot") = Some(done);
            });
        }
    });
    let mut results = Vec::new();
    let mut seed_runs = Vec::new();
    let mut cluster_results = Vec::new();
    for slot in slots {
        match slot
            .into_inner()
            .expect("no worker panicked")
            .expect("every task ran")
        {
            Done::Workload(r, runs) => {
                results.push(r);
                seed_runs.push(runs);
            }
            Done::Cluster(r) => cluster_results.push(*r),
        }
    }
    Ok(Reproduction {
        cases,
        results,
        seed_runs,
        seeds: seeds.max(1),
        clusters,
        cluster_results,
        jobs,
        elapsed_s: started.elapsed().as_secs_f64(),
    })
}

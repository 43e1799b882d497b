//! Exhaustive search: every assignment of colour classes to devices, each scored by the
//! evaluator. The oracle of the property tests, for workloads of a few classes.
//!
//! Devices of one kind are interchangeable, so assignments are enumerated up to renaming
//! (a class may open accelerator `a` only if accelerators `0..a` are already used; the
//! same for CPUs). For latency, CPU cores are as many as needed (MODEL.md: latency ignores
//! `maxCPUs`), so the CPU labels run over every grouping of the CPU classes onto cores:
//! ℓ is taken to be the number of classes, and the canonical labels are then exactly the
//! set partitions of the CPU classes. Nothing is assumed about which grouping is best:
//! one core per class misses plans where classes on a cycle through another class must
//! share its core to be contiguous (issue #25: all on one core, 52.75, was called
//! infeasible), and one shared core misses plans whose CPU classes sit on both sides of an
//! accelerator (a proven 12 ms where 3 ms was valid). The scorer decides validity,
//! contiguity and latency of each. Without contiguity one CPU label is enough, by the
//! model's definitions alone: latency validity does not count cores, a CPU node's time
//! does not depend on its core, and the plans scored here carry their cut, so the scorer's
//! items are the pieces and the single CPU nodes whatever their core.
//!
//! With up to q pieces every cut is tried too: each accelerator node gets a call rank in
//! `0..q` (the ranks used on one accelerator being `0..r`; q is clamped to the accelerator
//! nodes), a cut that deadlocks is skipped, so the search is over (assignment, cut) pairs
//! — the plans MODEL.md allows.
//!
//! The run polls its budget (`--time-limit`, `--memory-budget`, Ctrl-C) every 1024
//! labellings; stopped early, it returns the best plan so far as feasible with the trivial
//! bound 0 (nothing is proven before the enumeration ends), or no plan.
//!
//! Complexity: O(B · (n + m)) for B ≤ (k + ℓ)^C canonical assignments of C classes (for
//! contiguous latency ℓ = C: B ≤ Bell(C + k); ℓ = 1 for non-contiguous latency), times
//! q^a cuts of the a accelerator nodes for latency with q ≥ 2.

use super::{
    Infeasibility, Method, MethodId, Objective, Outcome, Problem, SolveError, Stats, Status,
    StopReason,
};
use crate::model::contraction::class_index;
use crate::model::{Device, Placement};
use crate::score::evaluate;

/// Exhaustive search (`--method brute-force`), refused beyond `MAX_CLASSES` classes.
pub struct BruteForce;

/// The largest number of colour classes brute force accepts.
pub const MAX_CLASSES: usize = 12;

/// The largest number of colour classes brute force accepts for contiguous latency, where
/// the CPU classes are also grouped onto cores (10 classes and 2 accelerators: 1.8 million
/// plans).
pub const MAX_CLASSES_LATENCY: usize = 10;

/// The largest number of nodes brute force accepts for latency with several pieces.
pub const MAX_NODES_CUT: usize = 10;

impl Method for BruteForce {
    fn id(&self) -> MethodId {
        MethodId::BruteForce
    }

    fn supports(&self, problem: &Problem) -> Result<(), crate::solve::Unsupported> {
        let (_, classes) = class_index(problem.workload);
        let max = match problem.objective {
            Objective::Latency { .. } if problem.contiguous => MAX_CLASSES_LATENCY,
            _ => MAX_CLASSES,
        };
        if classes > max {
            return Err(crate::solve::Unsupported::TooManyClasses { classes, max });
        }
        if let Objective::Latency { pieces } = problem.objective {
            if pieces >= 2 && problem.workload.len() > MAX_NODES_CUT {
                return Err(crate::solve::Unsupported::TooManyNodesToCut {
                    nodes: problem.workload.len(),
                    pieces,
                    max: MAX_NODES_CUT,
                });
            }
        }
        Ok(())
    }

    fn solve(&self, problem: &Problem) -> Result<Outcome, SolveError> {
        let w = problem.workload;
        let (class, classes) = class_index(w);
        let latency = matches!(problem.objective, Objective::Latency { .. });
        let k = w.devices().accelerators;
        // Latency: contiguously, as many cores as classes (every grouping of the CPU classes);
        // otherwise one core (module documentation).
        let l = match (latency, problem.contiguous) {
            (true, true) => classes,
            (true, false) => 1,
            (false, _) => w.devices().cpus,
        };
        let mut best: Option<(f64, Placement)> = None;
        let mut labels = vec![Device::Cpu(0); classes];
        let mut count = 0u64;
        let pieces = match problem.objective {
            Objective::Latency { pieces } => pieces.clamp(1, w.len().clamp(1, 63)),
            _ => 1,
        };
        let budget = problem.limits.budget();
        let mut stopped: Option<StopReason> = None;
        let mut visited = 0u64;
        let mut visit = |labels: &[Device]| {
            // The budget (time, memory, Ctrl-C) every 1024 labellings: each costs a scoring.
            visited += 1;
            if visited.is_multiple_of(1024) {
                if let Err(e) = budget.check() {
                    stopped = Some(StopReason::from(e));
                    return false;
                }
            }
            let base = Placement::new(class.iter().map(|&c| labels[c]).collect());
            let on_acc: Vec<usize> = (0..base.assignment.len())
                .filter(|&v| matches!(base.assignment[v], Device::Accelerator(_)))
                .collect();
            let mut ranks = vec![0usize; base.assignment.len()];
            loop {
                if cut_is_canonical(&base, &on_acc, &ranks) {
                    count += 1;
                    let p = if latency {
                        base.clone().with_pieces(ranks.clone())
                    } else {
                        base.clone()
                    };
                    let e = evaluate(w, &p, latency);
                    if e.is_valid()
                        && (!problem.contiguous || e.is_contiguous())
                        && (!latency || e.max_pieces() <= pieces)
                    {
                        let v = problem.objective.value(&e);
                        if best.as_ref().is_none_or(|(b, _)| v < *b) {
                            best = Some((v, p));
                        }
                    }
                }
                // Next cut: count in base q over the accelerator nodes.
                if !latency || !next_ranks(&on_acc, &mut ranks, pieces) {
                    break;
                }
            }
            true
        };
        enumerate(0, 0, 0, (k, l), &mut labels, &mut visit);
        let stats = Stats {
            notes: vec![format!("{count} plans")],
            ..Stats::default()
        };
        // Stopped early: the best plan so far, with no bound but 0 (the enumeration proves
        // nothing until it ends), or no plan.
        Ok(match (best, stopped) {
            (Some((v, p)), Some(reason)) => Outcome {
                method: MethodId::BruteForce,
                placement: Some(p),
                objective: v,
                bound: 0.0,
                status: Status::Feasible { reason },
                stats,
            },
            (None, Some(reason)) => Outcome {
                method: MethodId::BruteForce,
                placement: None,
                objective: f64::INFINITY,
                bound: 0.0,
                status: Status::NoPlan { reason },
                stats,
            },
            (Some((v, p)), None) => Outcome {
                method: MethodId::BruteForce,
                placement: Some(p),
                objective: v,
                bound: v,
                status: Status::Optimal,
                stats,
            },
            (None, None) => Outcome {
                method: MethodId::BruteForce,
                placement: None,
                objective: f64::INFINITY,
                bound: f64::INFINITY,
                status: Status::infeasible(Infeasibility::NoAssignment),
                stats,
            },
        })
    }
}

/// Every canonical labelling of the classes `at..` onto `k` accelerators and `l` CPU cores
/// (a device's first use in order), each given to `visit`; false once `visit` says stop.
fn enumerate(
    at: usize,
    used_acc: usize,
    used_cpu: usize,
    (k, l): (usize, usize),
    labels: &mut Vec<Device>,
    visit: &mut impl FnMut(&[Device]) -> bool,
) -> bool {
    if at == labels.len() {
        return visit(labels);
    }
    for a in 0..k.min(used_acc + 1) {
        labels[at] = Device::Accelerator(a);
        if !enumerate(at + 1, used_acc.max(a + 1), used_cpu, (k, l), labels, visit) {
            return false;
        }
    }
    for c in 0..l.min(used_cpu + 1) {
        labels[at] = Device::Cpu(c);
        if !enumerate(at + 1, used_acc, used_cpu.max(c + 1), (k, l), labels, visit) {
            return false;
        }
    }
    true
}

/// Advances `ranks` on the accelerator nodes like a base-`q` counter; false after the last.
fn next_ranks(on_acc: &[usize], ranks: &mut [usize], q: usize) -> bool {
    for &v in on_acc {
        if ranks[v] + 1 < q {
            ranks[v] += 1;
            return true;
        }
        ranks[v] = 0;
    }
    false
}

/// Whether the ranks used on each accelerator are `0..r` (other cuts repeat one of these).
fn cut_is_canonical(p: &Placement, on_acc: &[usize], ranks: &[usize]) -> bool {
    let mut used: std::collections::HashMap<Device, u64> = Default::default();
    for &v in on_acc {
        *used.entry(p.assignment[v]).or_insert(0) |= 1 << ranks[v];
    }
    used.values().all(|&mask| (mask + 1).is_power_of_two())
}

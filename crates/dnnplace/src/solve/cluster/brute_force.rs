//! Exhaustive search on a cluster: every assignment of colour classes to the cluster's
//! devices, each scored by [`evaluate_on_cluster`]. The oracle of the cluster solvers'
//! property tests.
//!
//! Devices of one type on one machine are interchangeable, and so are the CPU cores of one
//! machine, so assignments are enumerated up to renaming within each such group `g` (a class
//! may open the `j`-th device of `g` only if the first `j − 1` are used). For the
//! contiguous problem a plan must be contiguous on the cluster — per device, as pipeline
//! stages, and filling machines in order ([`crate::score::cluster`]) — the plan space of
//! the cluster DP.
//!
//! Complexity: O(B · (n + m + C + A)) for B ≤ D^C canonical assignments of C classes to
//! D devices.

use super::super::budget::Budget;
use super::super::{Objective, SolveError};
use crate::model::contraction::class_index;
use crate::model::{ClusterCosts, Device, Placement, Workload};
use crate::score::evaluate_on_cluster;
use crate::solve::MethodId;

/// Plans scored between two looks at the budget.
pub const PLANS_PER_CHECK: u64 = 1024;

/// The largest number of colour classes the cluster brute force accepts.
pub const MAX_CLASSES: usize = 10;

/// The best plan found and how many plans were scored.
#[derive(Clone, Debug)]
pub struct Exhaustive {
    /// The optimum and a plan reaching it; `None` when no plan satisfies the rules.
    pub best: Option<(f64, Placement)>,
    pub plans: u64,
    /// For every vector of accelerators used per type that a plan reaches, the least
    /// objective with exactly that usage.
    pub per_usage: std::collections::BTreeMap<Vec<usize>, f64>,
}

/// Minimises `objective` (throughput or sync) over every placement of `w` on the cluster of
/// `costs`, contiguous ones only when `contiguous`.
pub fn brute_force(
    w: &Workload,
    costs: &ClusterCosts,
    objective: Objective,
    contiguous: bool,
) -> Result<Exhaustive, SolveError> {
    brute_force_within(w, costs, objective, contiguous, &Budget::unlimited())
}

/// [`brute_force`] that stops when `budget` runs out (`--time-limit`, Ctrl-C; looked at
/// every [`PLANS_PER_CHECK`] plans): then an error, since a partial search proves nothing.
pub fn brute_force_within(
    w: &Workload,
    costs: &ClusterCosts,
    objective: Objective,
    contiguous: bool,
    budget: &Budget,
) -> Result<Exhaustive, SolveError> {
    if matches!(objective, Objective::Latency { .. }) {
        return Err(SolveError::Unsupported {
            method: MethodId::BruteForce,
            what: "the latency objective on a cluster".into(),
        });
    }
    let (class, classes) = class_index(w);
    if classes > MAX_CLASSES {
        return Err(SolveError::Unsupported {
            method: MethodId::BruteForce,
            what: format!("{classes} colour classes on a cluster (at most {MAX_CLASSES})"),
        });
    }
    let groups = interchangeable_groups(costs);
    let mut used = vec![0usize; groups.len()];
    let mut labels = vec![Device::Cpu(0); classes];
    let mut best: Option<(f64, Placement)> = None;
    let mut per_usage: std::collections::BTreeMap<Vec<usize>, f64> = Default::default();
    let cluster = costs.cluster();
    let mut plans = 0u64;
    let mut stopped = None;
    let mut visit = |labels: &[Device]| {
        if stopped.is_some() {
            return;
        }
        plans += 1;
        if plans.is_multiple_of(PLANS_PER_CHECK) {
            if let Err(e) = budget.check() {
                stopped = Some(e);
                return;
            }
        }
        let p = Placement::new(class.iter().map(|&c| labels[c]).collect());
        let e = evaluate_on_cluster(w, costs, &p);
        if e.is_valid() && (!contiguous || e.is_contiguous()) {
            let v = match objective {
                Objective::Sync => e.sync_objective,
                _ => e.max_load,
            };
            let mut usage = vec![0usize; cluster.types().len()];
            let mut seen: Vec<Device> = Vec::new();
            for &d in &p.assignment {
                if let (Device::Accelerator(i), false) = (d, seen.contains(&d)) {
                    seen.push(d);
                    usage[cluster.accelerators()[i].accelerator_type] += 1;
                }
            }
            let entry = per_usage.entry(usage).or_insert(f64::INFINITY);
            *entry = entry.min(v);
            if best.as_ref().is_none_or(|(b, _)| v < *b) {
                best = Some((v, p));
            }
        }
    };
    enumerate(0, &groups, &mut used, &mut labels, &mut visit);
    if let Some(reason) = stopped {
        return Err(SolveError::Stopped {
            method: MethodId::BruteForce,
            reason,
            detail: format!(
                "after {plans} plans on {} devices (a partial search proves nothing; use the DP)",
                costs.cluster().accelerators().len() + costs.cluster().cpu_machines().len()
            ),
        });
    }
    Ok(Exhaustive {
        best,
        plans,
        per_usage,
    })
}

/// Devices grouped by (machine, type) for accelerators and by machine for CPU cores, each
/// group in device order.
pub fn interchangeable_groups(costs: &ClusterCosts) -> Vec<Vec<Device>> {
    let c = costs.cluster();
    // Keyed by (machine, type), the type `None` for CPU cores.
    type Key = (usize, Option<usize>);
    let mut groups: Vec<(Key, Vec<Device>)> = Vec::new();
    let devices = c
        .accelerators()
        .iter()
        .enumerate()
        .map(|(i, a)| {
            (
                (a.machine, Some(a.accelerator_type)),
                Device::Accelerator(i),
            )
        })
        .chain(
            c.cpu_machines()
                .iter()
                .enumerate()
                .map(|(j, &m)| ((m, None), Device::Cpu(j))),
        );
    for (key, d) in devices {
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, list)) => list.push(d),
            None => groups.push((key, vec![d])),
        }
    }
    groups.into_iter().map(|(_, list)| list).collect()
}

fn enumerate(
    at: usize,
    groups: &[Vec<Device>],
    used: &mut [usize],
    labels: &mut [Device],
    visit: &mut impl FnMut(&[Device]),
) {
    if at == labels.len() {
        visit(labels);
        return;
    }
    for g in 0..groups.len() {
        let open = used[g];
        for j in 0..groups[g].len().min(open + 1) {
            labels[at] = groups[g][j];
            used[g] = open.max(j + 1);
            enumerate(at + 1, groups, used, labels, visit);
            used[g] = open;
        }
    }
}

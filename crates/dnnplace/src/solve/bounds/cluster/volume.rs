//! A lower bound on the max load of every plan on a cluster, contiguous or not, from the
//! work each device class must absorb (a Lagrangian volume bound).
//!
//! **Classes.** Each accelerator type `t` is a class of `n_t` devices of memory `M_t`, the
//! CPU cores one class of `n_C` devices without a memory limit. A colour class `g` (its
//! nodes share a device) takes `w_c(g)` on a device of class `c` (its nodes' times on the
//! type, or on a CPU; `∞` where a node cannot run) and holds `s_g` bytes.
//!
//! **The bound.** In a plan of max load `T`, the devices of class `c` carry the classes
//! `G_c` placed on them, and every device's load is at least its compute, so
//! `Σ_{g∈G_c} w_c(g) ≤ n_c·T` and `Σ_{g∈G_c} s_g ≤ n_c·M_c`. For any `μ_c ≥ 0` with
//! `Σ_c n_c μ_c = 1` and any `ν_t ≥ 0`,
//!
//! ```text
//! T = Σ_c n_c μ_c T ≥ Σ_c μ_c Σ_{g∈G_c} w_c(g) + Σ_t ν_t (Σ_{g∈G_t} s_g − n_t M_t)
//!   ≥ Σ_g min_c (μ_c w_c(g) + ν_c s_g) − Σ_t ν_t n_t M_t  =: L(μ, ν)
//! ```
//!
//! (`ν_C = 0`). So every `(μ, ν)` gives a valid bound; the best is the optimum of the LP
//! relaxation of "assign work fractionally to classes", whose dual is
//!
//! ```text
//! maximise Σ_g π_g − Σ_t ν_t n_t M_t
//! s.t.     π_g ≤ μ_c w_c(g) + ν_c s_g     for every g and class c where g can run
//!          Σ_c n_c μ_c = 1,   μ, ν ≥ 0,   π free
//! ```
//!
//! The LP passes the numeric guard of [`crate::solve::guard`] first: numbers HiGHS
//! would refuse give the bound 0 (valid) instead of a model. HiGHS solves it within the time given; the bound reported is `L(μ, ν)` *evaluated*
//! at HiGHS's `μ, ν` (clamped to ≥ 0, divided by `Σ_c n_c μ_c` as computed), each term
//! rounded down, so the LP solver's tolerances never make it invalid. Communication is
//! not counted (it only adds load). With one class (MODEL.md's accelerators, no CPUs) it
//! is the total work over `n`.
//!
//! Groups with equal work and bytes share one `π` weighted by their number (the same LP).
//! Size: `|G'| + 2C` columns and `Σ_{g∈G'} (classes g can run on)` rows for the `|G'|`
//! distinct groups and C classes; evaluating `L` is O(|G|·C).

use std::collections::HashMap;
use std::time::Instant;

use highs::{HighsModelStatus, RowProblem, Sense};

use crate::model::contraction::class_index;
use crate::model::{ClusterCosts, Workload};
use crate::solve::guard::Guard;

/// The classes' work and the groups' bytes.
struct Classes {
    /// `n_c`, devices per class (types first, then CPUs when there are any).
    count: Vec<f64>,
    /// `M_c` (∞ for CPUs).
    memory: Vec<f64>,
    /// `w[g][c]` (∞ where g cannot run on c).
    work: Vec<Vec<f64>>,
    /// `s_g`.
    bytes: Vec<f64>,
}

fn classes(w: &Workload, costs: &ClusterCosts) -> Classes {
    let cluster = costs.cluster();
    let types = cluster.types().len();
    let cpus = cluster.cpu_machines().len();
    let (class, n_classes) = class_index(w);
    let mut count: Vec<f64> = (0..types)
        .map(|t| cluster.count_of_type(t) as f64)
        .collect();
    let mut memory: Vec<f64> = cluster.types().iter().map(|t| t.memory_bytes).collect();
    if cpus > 0 {
        count.push(cpus as f64);
        memory.push(f64::INFINITY);
    }
    let mut work = vec![vec![0.0; count.len()]; n_classes];
    let mut bytes = vec![0.0; n_classes];
    for (v, node) in w.nodes().iter().enumerate() {
        let g = class[v];
        bytes[g] += node.size_bytes;
        for (t, x) in work[g].iter_mut().take(types).enumerate() {
            *x += if node.supported_on_accelerator {
                costs.time(t, v)
            } else {
                f64::INFINITY
            };
        }
        if cpus > 0 {
            work[g][types] += node.cpu_latency;
        }
    }
    Classes {
        count,
        memory,
        work,
        bytes,
    }
}

/// `L(μ, ν)` of the module documentation, rounded down; `μ` need not be normalised.
fn evaluate(c: &Classes, mu: &[f64], nu: &[f64]) -> f64 {
    const DOWN: f64 = 1.0 - 1e-12;
    let norm: f64 = c.count.iter().zip(mu).map(|(n, m)| n * m).sum();
    if norm.is_nan() || norm <= 0.0 {
        return 0.0;
    }
    let mut total = 0.0;
    for (g, row) in c.work.iter().enumerate() {
        let cheapest = row
            .iter()
            .enumerate()
            .map(|(k, &x)| mu[k] * x + nu[k] * c.bytes[g])
            .filter(|x| !x.is_nan())
            .fold(f64::INFINITY, f64::min);
        if !cheapest.is_finite() {
            return 0.0;
        }
        total += cheapest * DOWN;
    }
    let held: f64 = (0..c.count.len())
        .filter(|&k| nu[k] > 0.0)
        .map(|k| nu[k] * c.count[k] * c.memory[k])
        .sum();
    let bound = (total * DOWN - held * (1.0 + 1e-12)) / (norm * (1.0 + 1e-12));
    bound.max(0.0)
}

/// The volume bound of the module documentation, or 0 when the LP does not finish
/// within `seconds` or a group can run nowhere.
pub fn volume_bound(w: &Workload, costs: &ClusterCosts, seconds: f64) -> f64 {
    let started = Instant::now();
    // Within the run's deadline too, and not at all after a Ctrl-C.
    let budget = crate::solve::budget::Budget::new(Some(seconds.max(0.0)), None);
    let seconds = budget.remaining_s().unwrap_or(0.0);
    let c = classes(w, costs);
    let k = c.count.len();
    if k == 0 || seconds <= 0.0 || budget.is_exhausted() {
        return 0.0;
    }
    // Bytes in units of the largest finite memory, so ν is of the order of μ.
    let unit = c
        .memory
        .iter()
        .copied()
        .filter(|m| m.is_finite())
        .fold(1.0, f64::max);
    let mut pb = RowProblem::default();
    // Numbers HiGHS would refuse (a time of 1e308, a speed of 1e-300): no LP, the bound
    // is 0 (valid, only weak).
    let mut guard = Guard::default();
    let mu: Vec<_> = (0..k).map(|_| pb.add_column(0.0, 0.0..)).collect();
    let nu: Vec<_> = (0..k)
        .map(|j| {
            if c.memory[j].is_finite() {
                let cost = -c.count[j] * c.memory[j] / unit;
                guard.cost(cost, || format!("class {j}'s memory"));
                Some(pb.add_column(cost, 0.0..))
            } else {
                None
            }
        })
        .collect();
    // Groups with the same work and bytes share one π (with their count as its weight):
    // the LP is the same, and a model's repeated layers make it small.
    let mut alike: HashMap<Vec<u64>, (usize, f64)> = HashMap::new();
    for (g, row) in c.work.iter().enumerate() {
        let key = row
            .iter()
            .chain(std::iter::once(&c.bytes[g]))
            .map(|x| x.to_bits())
            .collect();
        alike.entry(key).or_insert((g, 0.0)).1 += 1.0;
    }
    let mut distinct: Vec<(usize, f64)> = alike.into_values().collect();
    distinct.sort_unstable_by_key(|&(g, _)| g);
    for (g, times) in distinct {
        let pi = pb.add_column(times, f64::NEG_INFINITY..);
        for (j, &x) in c.work[g].iter().enumerate() {
            if !x.is_finite() {
                continue;
            }
            let mut terms = vec![(pi, 1.0), (mu[j], -x)];
            if let Some(n) = nu[j] {
                terms.push((n, -c.bytes[g] / unit));
            }
            for &(_, a) in &terms {
                guard.coefficient(a, || format!("group {g} on class {j}"));
            }
            pb.add_row(..=0.0, &terms);
        }
    }
    let norm: Vec<_> = (0..k).map(|j| (mu[j], c.count[j])).collect();
    for &(_, a) in &norm {
        guard.coefficient(a, || "the normalisation row".into());
    }
    pb.add_row(1.0..=1.0, &norm);
    if guard.trouble().is_some() {
        return 0.0;
    }
    let Ok(mut model) = pb.try_optimise(Sense::Maximise) else {
        return 0.0;
    };
    model.make_quiet();
    let time_limit = (seconds - started.elapsed().as_secs_f64()).max(0.01);
    if model.try_set_option("time_limit", time_limit).is_err() {
        return 0.0;
    }
    let Ok(solved) = model.try_solve() else {
        return 0.0;
    };
    if solved.status() != HighsModelStatus::Optimal {
        return 0.0;
    }
    let x = solved.get_solution();
    let values = x.columns();
    let mu_v: Vec<f64> = (0..k).map(|j| values[j].max(0.0)).collect();
    let nu_v: Vec<f64> = (0..k)
        .map(|j| nu[j].map_or(0.0, |_| values[k + j].max(0.0) / unit))
        .collect();
    evaluate(&c, &mu_v, &nu_v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_classes() -> Classes {
        Classes {
            count: vec![2.0, 1.0],
            memory: vec![10.0, f64::INFINITY],
            work: vec![vec![4.0, 8.0], vec![4.0, 8.0], vec![2.0, f64::INFINITY]],
            bytes: vec![6.0, 6.0, 6.0],
        }
    }

    #[test]
    fn every_weighting_is_below_the_fractional_optimum() {
        // Fractionally: 2 fast devices and 1 at half speed absorb 10 units of fast work
        // in T = 10 / (2 + 0.5) = 4; memory 18 bytes on the fast class fits 20.
        let c = two_classes();
        let best = evaluate(&c, &[0.4, 0.2], &[0.0, 0.0]);
        assert!((best - 4.0).abs() < 1e-9, "{best}");
        for (a, b) in [(0.5, 0.0), (0.3, 0.4), (0.1, 0.8), (0.45, 0.1)] {
            assert!(evaluate(&c, &[a, b], &[0.0, 0.0]) <= 4.0 + 1e-9);
        }
        // Memory binding: 8 bytes per fast device leaves one group for the slow class.
        let tight = Classes {
            memory: vec![8.0, f64::INFINITY],
            ..two_classes()
        };
        // Fast class holds at most 2 groups (16 bytes): the CPU takes 8 of work at least.
        assert!(evaluate(&tight, &[0.4, 0.2], &[0.1, 0.0]) <= 8.0);
    }
}

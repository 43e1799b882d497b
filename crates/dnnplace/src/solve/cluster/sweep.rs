//! The scaling curve and the cheapest cluster, read off the cluster DP's per-usage optima.
//!
//! With [`Tracking::PerUsage`](super::dp::Tracking) the DP returns, for usage vectors
//! `u = (u_t)_{t∈T}` (accelerators used per type), a checked plan of TPS `v(u)` such that
//! for every `U` the least `v(u)` over `u ≤ U` (componentwise) is the optimum with at most
//! `U_t` accelerators of each type `t` (`tests/cluster_sweep.rs` checks this against the
//! exhaustive search). Everything here is a minimum over that list, so it is proven optimal
//! too:
//!
//! - **sweep**: `TPS(n) = min { v(u) : Σ_t u_t ≤ n }` for `n = 1..N` (`N` the cluster's
//!   accelerators; CPU cores are always available), speed-up `TPS(1) / TPS(n)`,
//!   efficiency `speed-up / n`;
//! - **price** of a plan: `π(u) = Σ_t u_t · price_t` per hour (accelerators only: CPU cores
//!   come with their machine);
//! - **cheapest for a target** `X` ms per sample: `argmin { π(u) : v(u) ≤ X }`, ties to the
//!   lower TPS; **best within a budget** `P`: `argmin { v(u) : π(u) ≤ P }`, ties to the
//!   lower price;
//! - **Pareto frontier** of (TPS, price): the plans no other plan beats on both (prices are
//!   ≥ 0, so `π` is monotone in `u` and the minima over `u ≤ U` above are attained in the
//!   list).
//!
//! Complexity: O(|L| · |T|) per query and O(|L| log |L|) for the frontier, `L` the list.

use super::plan::CheckedPlan;
use crate::model::Cluster;

/// One row of the sweep: the best plan with at most `accelerators` accelerators.
#[derive(Clone, Debug)]
pub struct SweepRow<'a> {
    pub accelerators: usize,
    /// `None` when no plan uses that few (memory).
    pub plan: Option<&'a CheckedPlan>,
}

/// `TPS(n)` for `n = 1..=N` (module documentation).
pub fn sweep<'a>(plans: &'a [CheckedPlan], cluster: &Cluster) -> Vec<SweepRow<'a>> {
    (1..=cluster.accelerators().len())
        .map(|n| SweepRow {
            accelerators: n,
            plan: plans
                .iter()
                .filter(|p| p.usage.iter().sum::<usize>() <= n)
                .min_by(|a, b| a.value.total_cmp(&b.value)),
        })
        .collect()
}

/// `π(u)`, per hour.
pub fn price(cluster: &Cluster, usage: &[usize]) -> f64 {
    usage
        .iter()
        .zip(cluster.types())
        .map(|(&n, t)| n as f64 * t.price_per_hour)
        .sum()
}

/// The cheapest plan whose TPS is at most `target_ms`.
pub fn cheapest_for_target<'a>(
    plans: &'a [CheckedPlan],
    cluster: &Cluster,
    target_ms: f64,
) -> Option<&'a CheckedPlan> {
    plans
        .iter()
        .filter(|p| p.value <= target_ms)
        .min_by(|a, b| {
            price(cluster, &a.usage)
                .total_cmp(&price(cluster, &b.usage))
                .then(a.value.total_cmp(&b.value))
        })
}

/// The fastest plan whose price per hour is at most `budget`.
pub fn best_within_budget<'a>(
    plans: &'a [CheckedPlan],
    cluster: &Cluster,
    budget: f64,
) -> Option<&'a CheckedPlan> {
    plans
        .iter()
        .filter(|p| price(cluster, &p.usage) <= budget)
        .min_by(|a, b| {
            a.value
                .total_cmp(&b.value)
                .then(price(cluster, &a.usage).total_cmp(&price(cluster, &b.usage)))
        })
}

/// The Pareto frontier of (TPS, price), by increasing price (and decreasing TPS).
pub fn frontier<'a>(plans: &'a [CheckedPlan], cluster: &Cluster) -> Vec<&'a CheckedPlan> {
    let mut sorted: Vec<&CheckedPlan> = plans.iter().collect();
    sorted.sort_by(|a, b| {
        price(cluster, &a.usage)
            .total_cmp(&price(cluster, &b.usage))
            .then(a.value.total_cmp(&b.value))
    });
    let mut out: Vec<&CheckedPlan> = Vec::new();
    for p in sorted {
        if out.last().is_none_or(|q| p.value < q.value) {
            out.push(p);
        }
    }
    out
}

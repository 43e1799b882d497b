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

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::dp::Tracking;
use super::greedy::ChainPacker;
use super::plan::{check, plan_on_cluster, CheckedPlan, ClusterMethod, ClusterPlan};
use crate::model::{Cluster, ClusterCosts, Device, Machine, Platform, Workload};
use crate::solve::budget::{interrupt_requested, Budget};
use crate::solve::{Limits, SolveError};

/// One row of the sweep: the best plan with at most `accelerators` accelerators.
#[derive(Clone, Debug)]
pub struct SweepRow<'a> {
    pub accelerators: usize,
    /// `None` when no plan uses that few (memory), or none was found in time.
    pub plan: Option<&'a CheckedPlan>,
    /// A proven lower bound on the row's optimum (= the plan's TPS when it is proven).
    pub bound: f64,
}

/// `TPS(n)` for `n = 1..=N` (module documentation), each with its bound: `bounds[n − 1]`,
/// or the plan's own value when `bounds` is empty (the per-usage DP finished: every row
/// is proven).
pub fn sweep<'a>(plans: &'a [CheckedPlan], cluster: &Cluster, bounds: &[f64]) -> Vec<SweepRow<'a>> {
    (1..=cluster.accelerators().len())
        .map(|n| {
            let plan = plans
                .iter()
                .filter(|p| p.usage.iter().sum::<usize>() <= n)
                .min_by(|a, b| a.value.total_cmp(&b.value));
            let proven = plan.map_or(f64::INFINITY, |p| p.value);
            SweepRow {
                accelerators: n,
                plan,
                bound: bounds.get(n - 1).map_or(proven, |b| b.min(proven)),
            }
        })
        .collect()
}

/// The per-usage plans of the economics queries (`--sweep`, `--target-tps`, `--budget`)
/// within the time limit, with a lower bound per sweep row.
#[derive(Clone, Debug)]
pub struct Economics {
    /// The per-usage DP's run; its `per_usage` holds every checked plan (the DP's optima,
    /// or, when it stopped, the best plan found per row).
    pub plan: ClusterPlan,
    /// Empty when the DP finished (every row proven), else `bounds[n − 1]` ≤ `TPS(n)`.
    pub bounds: Vec<f64>,
}

/// Time the economics queries take without `--time-limit`, seconds (as `auto`).
pub const DEFAULT_TIME_LIMIT_S: f64 = crate::solve::DEFAULT_TIME_LIMIT_S;

/// The per-usage optima (half of the time limit); when the DP stops first, the rest of
/// the time is split across the rows `n = N … 1` ([`plan_rows`]), every plan re-checked
/// on the whole cluster, each row with a proven bound.
pub fn economics(w: &Workload, limits: &Limits) -> Result<Economics, SolveError> {
    let started = Instant::now();
    let total = limits.time_limit_s.unwrap_or(DEFAULT_TIME_LIMIT_S);
    let mut dp_limits = limits.clone();
    dp_limits.time_limit_s = Some(0.5 * total);
    let mut plan = plan_on_cluster(w, &dp_limits, ClusterMethod::Dp, Tracking::PerUsage)?;
    if plan.stopped.is_none() {
        return Ok(Economics {
            plan,
            bounds: Vec::new(),
        });
    }
    let budget = Budget::new(
        Some((total - started.elapsed().as_secs_f64()).max(0.0)),
        None,
    );
    let (rows, bounds) = plan_rows(w, &plan.costs, limits, &budget)?;
    plan.per_usage.extend(rows);
    plan.time_s = started.elapsed().as_secs_f64();
    Ok(Economics { plan, bounds })
}

/// The rows `n = N … 1` within `budget`, each planned by [`plan_on_cluster`] on the
/// cluster's first `n` accelerators (machines in order; set, chain and volume bounds, the
/// coarse DP, the DP, the greedy chain) with `1/n` of 90 % of the time left, and every
/// plan re-checked on the whole cluster (`costs`). Once that is spent (or on Ctrl-C) the
/// rows left get the greedy chain alone ([`greedy_rows`], on every core, within the time
/// left and [`GREEDY_GRACE_S`]).
/// Row `n`'s bound, `bounds[n − 1]`, is the largest of: the whole cluster's bound (fewer
/// accelerators never help), row `n + 1`'s bound (`TPS(n)` does not increase with `n`),
/// and the compute bound `Σ_v min_d x_d(v) / (n + ℓ)` (a max load is at least the mean
/// over the `n` accelerators and `ℓ` CPU cores of the work, each node at its cheapest
/// device).
fn plan_rows(
    w: &Workload,
    costs: &ClusterCosts,
    limits: &Limits,
    budget: &Budget,
) -> Result<(Vec<CheckedPlan>, Vec<f64>), SolveError> {
    let cluster = costs.cluster();
    let n_acc = cluster.accelerators().len();
    let cpus = cluster.cpu_machines().len();
    let work = cheapest_work(w, costs);
    let mut rows = Vec::new();
    let mut whole = 0.0f64;
    // The DP rows stop at 90 % of the time left, so that the greedy rows fit the rest.
    let dp_phase = budget.share(0.9);
    let mut n = n_acc;
    while n >= 1 && !dp_phase.is_exhausted() {
        if let Some(sub) = prefix_workload(w, cluster, n) {
            let mut row_limits = limits.clone();
            row_limits.time_limit_s = Some(dp_phase.remaining_s().unwrap_or(0.0) / n as f64);
            let row = plan_on_cluster(&sub, &row_limits, ClusterMethod::Dp, Tracking::Best)?;
            if n == n_acc {
                whole = row.lower_bound;
            }
            if let Some(b) = row.best {
                rows.push(check(w, costs, b.value, b.placement)?);
            }
        }
        n -= 1;
    }
    if n >= 1 {
        let left = match budget.remaining_s() {
            Some(r) if !interrupt_requested() => r,
            _ => 0.0,
        };
        let until = Instant::now() + Duration::from_secs_f64(left + GREEDY_GRACE_S);
        rows.extend(greedy_rows(w, costs, n, until, budget)?);
    }
    let mut bounds = vec![0.0; n_acc];
    for n in (1..=n_acc).rev() {
        let later = bounds.get(n).copied().unwrap_or(0.0);
        bounds[n - 1] = whole.max(later).max(work / (n + cpus) as f64);
    }
    Ok((rows, bounds))
}

/// Seconds the greedy rows may run past the time limit or Ctrl-C (the first row always
/// runs: a plan is worth one bisection).
const GREEDY_GRACE_S: f64 = 0.5;

/// The greedy chain's rows `m = n … 1` (its bisection on the first `m` accelerators, each
/// plan re-checked on the whole cluster), packed on every core until `until`, coarse to
/// fine ([`coarse_to_fine`]) so that rows left out are spread; the rows found, by `m`
/// descending. A row left out has no plan, as a row with none in time.
fn greedy_rows(
    w: &Workload,
    costs: &ClusterCosts,
    n: usize,
    until: Instant,
    budget: &Budget,
) -> Result<Vec<CheckedPlan>, SolveError> {
    let cluster = costs.cluster();
    let order = coarse_to_fine(n);
    let packer = ChainPacker::new(w, costs);
    let next = AtomicUsize::new(0);
    let found = Mutex::new(Vec::new());
    rayon::scope(|s| {
        for _ in 0..rayon::current_num_threads() {
            s.spawn(|_| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= order.len() || (i > 0 && Instant::now() >= until) {
                    break;
                }
                let m = order[i];
                let row = packer
                    .best(m, &prefix_types(cluster, m), budget)
                    .map(|(value, placement)| check(w, costs, value, placement));
                if let Some(row) = row {
                    found
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((m, row));
                }
            });
        }
    });
    let mut found = found
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    found.sort_by_key(|row| std::cmp::Reverse(row.0));
    found.into_iter().map(|(_, row)| row).collect()
}

/// `1..=n` coarse to fine on a log scale (a row's neighbours matter relative to its size:
/// 7 against 8 accelerators is 14 %, 1000 against 1001 is 0.1 %): level `L` lists
/// `round(n^(i / 2^L))` for `i = 2^L … 0`, each value once, levels `L = 0, 1, …` until
/// every row is listed (the few a level skips by rounding come last, ascending). So `n`
/// and 1 come first and every prefix spreads over the range.
fn coarse_to_fine(n: usize) -> Vec<usize> {
    let mut order = Vec::with_capacity(n);
    let mut seen = vec![false; n + 1];
    let mut push = |m: usize, order: &mut Vec<usize>| {
        if (1..=n).contains(&m) && !seen[m] {
            seen[m] = true;
            order.push(m);
        }
    };
    let ln = (n.max(1) as f64).ln();
    for level in 0..=MAX_LEVEL {
        let steps = 1u32 << level;
        for i in (0..=steps).rev() {
            push(
                (ln * f64::from(i) / f64::from(steps)).exp().round() as usize,
                &mut order,
            );
        }
        if order.len() == n {
            return order;
        }
    }
    for m in 1..=n {
        push(m, &mut order);
    }
    order
}

/// Levels of [`coarse_to_fine`] before the rows its grids skipped are listed in order (the
/// last level has `2^16 + 1` points: a spacing under one row up to about 6,000 accelerators).
const MAX_LEVEL: u32 = 16;

/// `Σ_v min_d x_d(v)`: every node at its cheapest device (an accelerator type, if it may
/// run on one, or a CPU core, if there is one).
fn cheapest_work(w: &Workload, costs: &ClusterCosts) -> f64 {
    let cluster = costs.cluster();
    let has_cpu = !cluster.cpu_machines().is_empty();
    (0..w.len())
        .map(|v| {
            let node = w.node(v);
            let accelerator = if node.supported_on_accelerator {
                (0..cluster.types().len())
                    .map(|t| costs.time(t, v))
                    .fold(f64::INFINITY, f64::min)
            } else {
                f64::INFINITY
            };
            let cpu = if has_cpu {
                costs.compute(w, v, Device::Cpu(0))
            } else {
                f64::INFINITY
            };
            let x = accelerator.min(cpu);
            if x.is_finite() {
                x
            } else {
                0.0
            }
        })
        .sum()
}

/// The accelerator types among the cluster's first `n` accelerators (the types
/// [`prefix_workload`] keeps).
fn prefix_types(cluster: &Cluster, n: usize) -> Vec<bool> {
    let mut used = vec![false; cluster.types().len()];
    for a in cluster.accelerators().iter().take(n) {
        used[a.accelerator_type] = true;
    }
    used
}

/// `w` on the cluster's first `n` accelerators (every machine kept, with its CPU cores,
/// so devices keep their numbers; types no accelerator is left of dropped); `None` when
/// that cluster does not take the workload (a node that fits none of its devices).
fn prefix_workload(w: &Workload, cluster: &Cluster, n: usize) -> Option<Workload> {
    let mut left = n;
    let mut used = vec![false; cluster.types().len()];
    let machines: Vec<Machine> = cluster
        .machines()
        .iter()
        .map(|m| {
            let mut m = m.clone();
            m.accelerators = m
                .accelerators
                .iter()
                .filter_map(|&(t, count)| {
                    let take = count.min(left);
                    left -= take;
                    used[t] |= take > 0;
                    (take > 0).then_some((t, take))
                })
                .collect();
            m
        })
        .collect();
    let index: Vec<usize> = used
        .iter()
        .scan(0, |next, &u| {
            let i = *next;
            *next += usize::from(u);
            Some(i)
        })
        .collect();
    let types = (cluster.types().iter().zip(&used))
        .filter(|(_, &u)| u)
        .map(|(t, _)| t.clone())
        .collect();
    let machines = machines
        .into_iter()
        .map(|mut m| {
            for a in &mut m.accelerators {
                a.0 = index[a.0];
            }
            m
        })
        .collect();
    let sub = Cluster::new(types, machines, cluster.cpu_price_per_hour()).ok()?;
    w.with_platform(Platform {
        cluster: Some(sub),
        ..w.platform().clone()
    })
    .ok()
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

#[cfg(test)]
mod tests {
    use super::coarse_to_fine;

    #[test]
    fn coarse_to_fine_lists_every_row_once_starting_from_the_largest() {
        for n in (1..=70).chain([1000, 1024, 4096]) {
            let order = coarse_to_fine(n);
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (1..=n).collect::<Vec<_>>(), "n = {n}");
            assert_eq!(order[0], n);
        }
        // 8^(i/2^L): 8 and 1; then 2.83; then 4.76 and 1.68; then 6.17 and 3.67; 7.02.
        assert_eq!(coarse_to_fine(8), vec![8, 1, 3, 5, 2, 6, 4, 7]);
        // On a log scale the small rows come early: 1024 = 2^10 lists 2^(10 i / 2^L).
        assert_eq!(coarse_to_fine(1024)[..5], [1024, 1, 32, 181, 6]);
    }
}

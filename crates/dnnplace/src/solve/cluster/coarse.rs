//! Plans for large graphs on a cluster: the cluster DP on coarsened graphs.
//!
//! The group DAG is coarsened as for MODEL.md's device set
//! ([`crate::solve::coarsen::hierarchy`]: clusters are intervals of topological orders, so
//! each is contiguous and each level a DAG; caps computed for all of the cluster's
//! accelerators and CPU cores and its smallest accelerator memory). On a level, the
//! *coarse workload* has the same nodes, edges and platform with each node's colour class
//! replaced by its cluster ([`crate::solve::coarsen`]); colour classes change no load, so
//! a plan of the coarse workload is a plan of the fine one with the same score, and the
//! cluster DP's optimum on a level is the best contiguous plan on the cluster that keeps
//! each cluster on one device — an upper bound on the fine optimum.
//!
//! Levels are solved from the coarsest with at least [`MIN_LEVEL_CLUSTERS`] clusters up to
//! finer ones, each DP given half of the time left and the best plan so far as its upper
//! bound (it prunes with it), until a DP stops at its limit or a level has more than
//! [`MAX_LEVEL_CLUSTERS`] clusters. The lower bound is not this module's business: the
//! caller states the fine graph's ([`crate::solve::bounds::cluster::volume`], the fine DP's).
//!
//! Complexity: O(P · (n log n + m)) to coarsen (P passes), then the cluster DP on each
//! level tried ([`super::dp`]).

use std::time::Instant;

use super::dp::{solve_between_unseeded, Tracking};
use crate::model::contraction::Contraction;
use crate::model::{ClusterCosts, Placement, Workload};
use crate::solve::budget::Budget;
use crate::solve::coarsen::coarse_workload;
use crate::solve::coarsen::hierarchy::{Caps, Hierarchy, Level, MIN_CLUSTERS};
use crate::solve::{Limits, SolveError};

/// Graphs with at most this many groups are left to the fine DP.
pub const COARSEN_ABOVE: usize = 400;
/// The coarsest level tried has at least this many clusters (or is the coarsest there is).
pub const MIN_LEVEL_CLUSTERS: usize = 48;
/// Levels with more clusters are not tried.
pub const MAX_LEVEL_CLUSTERS: usize = 1500;

/// The best coarse plan found.
#[derive(Clone, Debug)]
pub struct CoarsePlan {
    pub value: f64,
    pub placement: Placement,
    /// Clusters of the level it was found on, and of the finest level solved.
    pub clusters: usize,
    pub finest_solved: usize,
}

/// Plans `w` (with a cluster) on coarsened graphs within `seconds`, each DP pruned by
/// `upper_bound` and the plans found; `None` when the graph is small, or no level gave a
/// plan in time.
pub fn coarse_plan(
    w: &Workload,
    costs: &ClusterCosts,
    seconds: f64,
    lower_bound: f64,
    upper_bound: f64,
) -> Result<Option<CoarsePlan>, SolveError> {
    let started = Instant::now();
    let left = || seconds - started.elapsed().as_secs_f64();
    let c0 = Contraction::new(w);
    if c0.len() <= COARSEN_ABOVE {
        return Ok(None);
    }
    let cluster = costs.cluster();
    let smallest = cluster.smallest_memory_bytes();
    let base = Level::from_contraction(w, &c0);
    let caps = Caps::for_devices(
        &base,
        cluster.accelerators().len(),
        cluster.cpu_machines().len(),
        if smallest.is_finite() { smallest } else { 0.0 },
    );
    let mut h = Hierarchy::new(base);
    let budget = Budget::new(Some(seconds.max(0.0)), None);
    h.coarsen(&caps, MIN_CLUSTERS, || !budget.is_exhausted());
    let sizes = h.sizes();
    let first = (0..sizes.len())
        .rev()
        .find(|&l| sizes[l] >= MIN_LEVEL_CLUSTERS)
        .unwrap_or(sizes.len() - 1);
    let mut best: Option<CoarsePlan> = None;
    for level in (0..=first).rev() {
        if sizes[level] > MAX_LEVEL_CLUSTERS || left() <= 0.0 {
            break;
        }
        let map = h.groups_to(level);
        let Some(cw) = coarse_workload(w, &c0, &map, sizes[level])? else {
            continue;
        };
        let coarse_costs = ClusterCosts::of(&cw);
        let limits = Limits {
            time_limit_s: Some(left() / 2.0),
            ..Limits::default()
        };
        let bound = best
            .as_ref()
            .map_or(upper_bound, |b| b.value.min(upper_bound));
        let r = solve_between_unseeded(
            &cw,
            &coarse_costs,
            &limits,
            Tracking::Best,
            lower_bound,
            bound,
        )?;
        if let Some((value, placement)) = r.best {
            if best.as_ref().is_none_or(|b| value < b.value) {
                best = Some(CoarsePlan {
                    value,
                    placement,
                    clusters: sizes[level],
                    finest_solved: sizes[level],
                });
            }
        }
        if r.stopped.is_some() {
            break;
        }
        if let Some(b) = &mut best {
            b.finest_solved = sizes[level];
        }
    }
    Ok(best)
}

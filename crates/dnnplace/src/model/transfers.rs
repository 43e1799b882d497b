//! The transfers between units (colour classes, or the groups of a contraction) on a
//! cluster, priced per machine, for the cluster IP and the set bound.
//!
//! A *transfer* `τ = (p, R)` is the set of nodes `u` with `c(u) > 0` of producer unit `p`
//! whose successors lie in the units `R ∌ p` ([`receiving_groups`]). Under the
//! communication rule of [`crate::model::cluster`] a device holding some unit of `R` and not
//! `p` pays, per node `u` of `τ`, `t_L(u)` for the link `L` between it and `p`'s device,
//! so a transfer's price on a link is the sum of its nodes' (`t_H`, `t_P`, `t_N` per
//! machine). O(n + m log m) to build for n nodes and m edges.

use std::collections::HashMap;

use crate::model::contraction::receiving_groups;
use crate::model::{ClusterCosts, Workload};

/// Nodes of producer unit `p` with receiver units `recv` (module documentation).
#[derive(Clone, Debug)]
pub struct Transfer {
    pub p: usize,
    pub recv: Vec<usize>,
    /// Whether the nodes are backward ones (the sync objective counts the transfer on the
    /// side of its producing nodes; throughput merges both sides).
    pub backward: bool,
    /// Per machine: `t_H`, `t_P` (0 without peer link), `t_N` summed over the nodes, ms.
    pub host: Vec<f64>,
    pub peer: Vec<f64>,
    pub network: Vec<f64>,
}

/// The transfers of `w` over the units `group_of`, with their prices per machine; with
/// `by_side`, forward and backward nodes apart.
pub fn transfers(
    w: &Workload,
    costs: &ClusterCosts,
    group_of: &[usize],
    by_side: bool,
) -> Vec<Transfer> {
    let machines = costs.cluster().machines().len();
    let mut index: HashMap<(usize, Vec<usize>, bool), usize> = HashMap::new();
    let mut out: Vec<Transfer> = Vec::new();
    for u in 0..w.len() {
        if w.out_cost(u) == 0.0 {
            continue;
        }
        let p = group_of[u];
        let recv = receiving_groups(w, group_of, u);
        if recv.is_empty() {
            continue;
        }
        let backward = by_side && w.node(u).is_backward;
        let at = *index.entry((p, recv.clone(), backward)).or_insert_with(|| {
            out.push(Transfer {
                p,
                recv,
                backward,
                host: vec![0.0; machines],
                peer: vec![0.0; machines],
                network: vec![0.0; machines],
            });
            out.len() - 1
        });
        let t = &mut out[at];
        for m in 0..machines {
            t.host[m] += costs.host(m, u);
            t.peer[m] += costs.peer(m, u).unwrap_or(0.0);
            t.network[m] += costs.network(m, u);
        }
    }
    out
}

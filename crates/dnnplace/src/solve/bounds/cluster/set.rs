//! The set bound: a lower bound on the TPS of every plan on a cluster (contiguous or not)
//! from the cheapest set of units a device can hold around one unit.
//!
//! The device `d` holding unit `g` (a colour class) holds some set `S ∋ g` and pays at
//! least
//!
//! ```text
//! load_d(S) ≥ Σ_{a∈S} x_d(a) + Σ_{τ: p(τ)∉S, R(τ)∩S≠∅} r_d(τ) + Σ_{τ: p(τ)∈S, R(τ)⊄S} s_d(τ)
//! ```
//!
//! over the transfers `τ = (p, R)` of [`crate::model::transfers`], with `r_d(τ)` the cheapest
//! price at which `d` receives `τ` from a place other than `d` that exists (another
//! machine: `t_N`; another CPU core or accelerator of its machine: the link table of
//! [`crate::model::cluster`]) and `s_d(τ) = t_H` for an accelerator on a machine without
//! a peer link (else 0). Memory is left out (a relaxation). So
//!
//! ```text
//! TPS ≥ max_g min_d h_d(g),   h_d(g) = min_{S ∋ g, S allowed on d} load_d(S)
//! ```
//!
//! It is at least the star bound (a producer `p` of `g` either is in `S`, paying
//! `x_d(p)` and more, or not, paying its transfers into `g`) and the largest unit's
//! cheapest time; unlike them it sees that holding a producer means paying for the
//! producer's own inputs.
//!
//! **`h_d(g)` is a minimum cut** (as [`crate::solve::bounds::min_cut`] for MODEL.md's
//! symmetric hyperedges; here the two directions are apart). Vertices: the units, `y_τ`
//! for each transfer with `r_d(τ) > 0`, `z_τ` for each with `s_d(τ) > 0`, a source joined
//! to `g` by an ∞ arc and a sink:
//!
//! ```text
//! a → sink   x_d(a)    (∞ if a may not go on d)
//! w → y_τ    ∞  (w ∈ R),   y_τ → p   r_d(τ)          receive: S meets R, p ∉ S
//! p → z_τ    s_d(τ),       z_τ → w   ∞  (w ∈ R)      send: p ∈ S, R ⊄ S
//! ```
//!
//! For a finite cut with source side `X`, `S = X ∩ units`: if some `w ∈ R ∩ S` then
//! `y_τ ∈ X` and the cut pays `r_d(τ)` when `p ∉ S`; if `p ∈ S` and some `w ∈ R` is not,
//! `z_τ ∉ X` and the cut pays `s_d(τ)`. Conversely every `S ∋ g` has a cut of exactly
//! its right side above (`y_τ ∈ X` iff `S` meets `R`, `z_τ ∈ X` iff `R ⊆ S`). We return
//! the value of the flow found, at most every cut even in floating point, so a valid
//! lower bound on `h_d(g)`.
//!
//! **Search.** Devices with the same type (or CPU), the same links and the same places
//! elsewhere are one class and one network. Units go in decreasing order of their
//! cheapest time `min_d x_d(g) ≤ h(g)`; the search ends at the first unit whose cheapest
//! time is at most the bound so far, and a unit's classes (by increasing `x_d(g)`) stop as
//! soon as one is at most the bound so far. A run out of time returns the bound so far.
//!
//! Complexity: per evaluated pair (unit, class) one max flow by Dinic's algorithm on
//! `U + X_r + X_s + 2` vertices and `O(U + Σ_τ |R(τ)|)` arcs; building O(C·(U + Σ|R|))
//! for `C` classes.

use std::collections::HashSet;

use crate::model::grouping::Grouping;
use crate::model::transfers::{transfers, Transfer};
use crate::model::{ClusterCosts, Workload};
use crate::solve::bounds::min_cut::Network;
use crate::solve::budget::Budget;

/// Residual capacities below this (relative to the largest finite capacity) count as zero.
const RELATIVE_EPS: f64 = 1e-13;

/// One device class's network (module documentation), source arcs at 0.
struct ClassNetwork {
    network: Network,
    capacity: Vec<f64>,
    source_arc: Vec<usize>,
    /// `x_d(a)`, ∞ where `a` may not go on the class.
    compute: Vec<f64>,
    source: usize,
    sink: usize,
    eps: f64,
}

impl ClassNetwork {
    fn new(compute: Vec<f64>, transfers: &[Transfer], receive: &[f64], send: &[f64]) -> Self {
        let units = compute.len();
        let extra = receive.iter().chain(send).filter(|&&c| c > 0.0).count();
        let (sink, source) = (units + extra, units + extra + 1);
        let mut network = Network::new(source + 1);
        let mut capacity = Vec::new();
        let mut largest = 0.0f64;
        let mut next = units;
        for (i, t) in transfers.iter().enumerate() {
            if receive[i] > 0.0 {
                let y = next;
                next += 1;
                for &w in &t.recv {
                    network.arc(&mut capacity, w, y, f64::INFINITY);
                }
                network.arc(&mut capacity, y, t.p, receive[i]);
                if receive[i].is_finite() {
                    largest = largest.max(receive[i]);
                }
            }
            if send[i] > 0.0 {
                let z = next;
                next += 1;
                network.arc(&mut capacity, t.p, z, send[i]);
                for &w in &t.recv {
                    network.arc(&mut capacity, z, w, f64::INFINITY);
                }
                largest = largest.max(send[i]);
            }
        }
        for (a, &x) in compute.iter().enumerate() {
            if x > 0.0 {
                network.arc(&mut capacity, a, sink, x);
                if x.is_finite() {
                    largest = largest.max(x);
                }
            }
        }
        let source_arc = (0..units)
            .map(|a| network.arc(&mut capacity, source, a, 0.0))
            .collect();
        ClassNetwork {
            network,
            capacity,
            source_arc,
            compute,
            source,
            sink,
            eps: RELATIVE_EPS * largest.max(1e-300),
        }
    }

    /// A lower bound on `h_d(g)`.
    fn value(&self, g: usize) -> f64 {
        let mut residual = self.capacity.clone();
        residual[self.source_arc[g]] = f64::INFINITY;
        self.network
            .max_flow(&mut residual, self.source, self.sink, self.eps)
    }
}

/// The set bound of `w` on the cluster of `costs` (module documentation), within `budget`
/// (the bound so far when it runs out). 0 for an empty workload.
pub fn set_bound(w: &Workload, costs: &ClusterCosts, budget: &Budget) -> f64 {
    let (units, _) = Grouping::units(w, false);
    let transfers = transfers(w, costs, &units.group_of, false);
    let classes = class_networks(w, costs, &units, &transfers);
    let cheapest: Vec<f64> = (0..units.len())
        .map(|g| {
            classes
                .iter()
                .map(|c| c.compute[g])
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    let mut order: Vec<usize> = (0..units.len())
        .filter(|&g| cheapest[g].is_finite())
        .collect();
    order.sort_by(|&a, &b| cheapest[b].total_cmp(&cheapest[a]));
    let mut bound = 0.0f64;
    for g in order {
        if cheapest[g] <= bound {
            break;
        }
        let mut by_time: Vec<&ClassNetwork> = classes
            .iter()
            .filter(|c| c.compute[g].is_finite())
            .collect();
        by_time.sort_by(|a, b| a.compute[g].total_cmp(&b.compute[g]));
        let mut at_best = f64::INFINITY;
        for c in by_time {
            if c.compute[g] >= at_best || at_best <= bound {
                break;
            }
            if budget.is_exhausted() {
                return bound;
            }
            at_best = at_best.min(c.value(g).max(c.compute[g]));
        }
        if at_best.is_finite() {
            bound = bound.max(at_best);
        }
    }
    bound
}

/// One [`ClassNetwork`] per device class: an accelerator type or a CPU core on a machine,
/// with what it pays to receive (the cheapest link to any other device it may meet), to
/// send and to compute each unit. Classes with the same key (type, which other devices
/// exist, links) are built once.
fn class_networks(
    w: &Workload,
    costs: &ClusterCosts,
    units: &Grouping,
    transfers: &[Transfer],
) -> Vec<ClassNetwork> {
    let cluster = costs.cluster();
    let machines = cluster.machines();
    let total: usize = machines
        .iter()
        .map(|m| m.cpus + m.accelerators.iter().map(|a| a.1).sum::<usize>())
        .sum();
    // Classes: (type or None for a CPU core, machine); one per distinct key.
    let mut keys: HashSet<Vec<u64>> = HashSet::new();
    let mut classes: Vec<ClassNetwork> = Vec::new();
    for (mu, m) in machines.iter().enumerate() {
        let accs: usize = m.accelerators.iter().map(|a| a.1).sum();
        let here = accs + m.cpus;
        let mut kinds: Vec<Option<usize>> = m
            .accelerators
            .iter()
            .filter(|a| a.1 > 0)
            .map(|a| Some(a.0))
            .collect();
        kinds.sort();
        kinds.dedup();
        if m.cpus > 0 {
            kinds.push(None);
        }
        let peer = costs.has_peer(mu);
        for ty in kinds {
            let acc = ty.is_some();
            let other_machine = total > here;
            let other_cpu = m.cpus > usize::from(!acc);
            let other_acc = accs > usize::from(acc);
            let mut key: Vec<u64> = vec![
                ty.map_or(u64::MAX, |t| t as u64),
                u64::from(other_machine) | u64::from(other_cpu) << 1 | u64::from(other_acc) << 2,
                u64::from(peer),
            ];
            for l in [Some(&m.host), m.peer.as_ref(), Some(&m.network)] {
                key.extend(l.map_or([0, 0], |l| {
                    [l.latency_ms.to_bits(), l.bytes_per_s.to_bits()]
                }));
            }
            if !keys.insert(key) {
                continue;
            }
            let receive: Vec<f64> = transfers
                .iter()
                .map(|t| {
                    let mut best = f64::INFINITY;
                    if other_machine {
                        best = best.min(t.network[mu]);
                    }
                    if other_cpu {
                        best = best.min(if acc { t.host[mu] } else { 0.0 });
                    }
                    if other_acc {
                        best = best.min(match (acc, peer) {
                            (true, true) => t.peer[mu],
                            (true, false) | (false, true) => t.host[mu],
                            (false, false) => 0.0,
                        });
                    }
                    best
                })
                .collect();
            let send: Vec<f64> = transfers
                .iter()
                .map(|t| if acc && !peer { t.host[mu] } else { 0.0 })
                .collect();
            let compute: Vec<f64> = units
                .groups
                .iter()
                .map(|g| match ty {
                    None => g.nodes.iter().map(|&v| w.node(v).cpu_latency).sum(),
                    Some(t)
                        if g.supported_on_accelerator
                            && g.size_bytes <= cluster.types()[t].memory_bytes =>
                    {
                        g.nodes.iter().map(|&v| costs.time(t, v)).sum()
                    }
                    Some(_) => f64::INFINITY,
                })
                .collect();
            classes.push(ClassNetwork::new(compute, transfers, &receive, &send));
        }
    }
    classes
}

//! What the integer programs place, and the constraint families the models share.
//!
//! **Units.** Without contiguity a unit is a colour class (a node without a class is its
//! own); with contiguity it is a group of [`Contraction`] (classes on one cycle of the
//! class graph fused, numbered topologically), the same units the DP splits and the
//! scorer's contiguity check implies.
//!
//! **Communication hyperedges.** For a node `u` with `c(u) > 0`, `T(u) = {g(u)} ∪ {g(w) :
//! u → w}`. A device holding the unit set `X` pays `c(u)` exactly when `X` *cuts* `T(u)`
//! (meets it without containing it): if `g(u) ∈ X` that is "some successor is elsewhere"
//! (`u ∈ Out`), otherwise "some successor is here" (`u ∈ In`, once per receiving device).
//! With `x_a ∈ {0,1}` the membership of unit `a` on the device, the cut indicator is
//! `max_{a∈T} x_a − min_{b∈T} x_b`, linearised ([`cut_indicator`]) as
//!
//! ```text
//! |T| = 2:  z ≥ x_a − x_b,  z ≥ x_b − x_a
//! |T| > 2:  meet ≥ x_a (a ∈ T),  inside ≤ x_a (a ∈ T),  z ≥ meet − inside,  all in [0, 1]
//! ```
//!
//! The second form projects onto exactly the pairwise constraints `z ≥ x_a − x_b` (all
//! a, b ∈ T) with 2|T| + 1 rows instead of |T|(|T| − 1). Since z only appears with a
//! positive cost in loads that are minimised, z ≥ cut suffices: at integer x a device's
//! load is over-estimated only where that does not change the objective.
//!
//! **Contiguity** ([`contiguity`]) on the group DAG, for every device p with membership
//! `x_{g}` and a continuous reach variable `r_g ∈ [0, 1]`:
//!
//! ```text
//! r_g ≥ x_g                     (a unit on p is reached)
//! r_v ≥ r_u         (u → v)     (reach propagates along arcs)
//! x_v ≤ x_u − r_u + 1 (u → v)   (leaving p's set, one never comes back)
//! ```
//!
//! *Sound:* if a path `p_0 ∈ S, p_1 … p_{t−1} ∉ S, p_t ∈ S` left and re-entered S, then
//! `r_{p_{t−1}} = 1` by propagation, and the last arc gives `x_{p_t} ≤ 0 − 1 + 1 = 0`.
//! *Complete:* for a contiguous S set `r_g = 1` iff g is reachable from S (S included);
//! the first two families hold, and the third can only bind for `x_u = 0, r_u = 1`, where
//! `v ∈ S` would close a path that leaves S and re-enters it. At integer x the first two
//! families force r = 1 on everything reachable, so r may be continuous.
//!
//! Per-set contiguity is not all: the scorer also wants the devices in a pipeline order
//! (no two devices feeding each other), which [`device_order`] adds with positions.
//!
//! **Symmetry** ([`symmetry`]): devices of one kind are interchangeable; we keep only the
//! labelling in which device `d` is used only if `d − 1` is, and the lowest unit on `d − 1`
//! comes before the lowest on `d`: `x_{g,d} ≤ Σ_{g' < g} x_{g',d−1}` (and `x_{g,d} = 0`
//! for `d > g`). Every placement has exactly one such labelling (number devices by their
//! lowest unit), which [`canonical_devices`] computes for warm starts.

use super::{Builder, Var};
use crate::model::contraction::{class_index, Contraction};
use crate::model::{Device, Placement, Workload};

/// The units of an IP and their sums.
#[derive(Clone, Debug)]
pub struct Units {
    /// `unit_of[v]` for node index v.
    pub unit_of: Vec<usize>,
    /// Nodes of each unit.
    pub nodes: Vec<Vec<usize>>,
    pub fpga: Vec<f64>,
    pub cpu: Vec<f64>,
    pub size: Vec<f64>,
    pub supported: Vec<bool>,
    pub forward_fpga: Vec<f64>,
    pub forward_cpu: Vec<f64>,
    /// Arcs of the group DAG (only when built for contiguity).
    pub arcs: Vec<(usize, usize)>,
}

/// A communication hyperedge: the units `T(u)`, the summed cost, and whether the
/// producing nodes are backward (for the synchronous objective).
#[derive(Clone, Debug)]
pub struct Hyperedge {
    pub units: Vec<usize>,
    pub cost: f64,
    pub backward: bool,
}

impl Units {
    /// Classes (non-contiguous) or groups of the contraction (contiguous).
    pub fn new(w: &Workload, contiguous: bool) -> Units {
        let (unit_of, count, arcs) = if contiguous {
            let c = Contraction::new(w);
            let arcs = c.succ.iter().enumerate().flat_map(|(a, s)| s.iter().map(move |&b| (a, b))).collect();
            (c.group_of.clone(), c.len(), arcs)
        } else {
            let (class, count) = class_index(w);
            (class, count, Vec::new())
        };
        let mut u = Units {
            unit_of,
            nodes: vec![Vec::new(); count],
            fpga: vec![0.0; count],
            cpu: vec![0.0; count],
            size: vec![0.0; count],
            supported: vec![true; count],
            forward_fpga: vec![0.0; count],
            forward_cpu: vec![0.0; count],
            arcs,
        };
        for (v, node) in w.nodes().iter().enumerate() {
            let g = u.unit_of[v];
            u.nodes[g].push(v);
            u.fpga[g] += node.fpga_latency;
            u.cpu[g] += node.cpu_latency;
            u.size[g] += node.size_bytes;
            u.supported[g] &= node.supported_on_accelerator;
            if !node.is_backward {
                u.forward_fpga[g] += node.fpga_latency;
                u.forward_cpu[g] += node.cpu_latency;
            }
        }
        u
    }

    /// Every node a unit of its own (colour classes then have to be imposed separately).
    pub fn singletons(w: &Workload) -> Units {
        let (mut u, _) = (Units::new(w, false), ());
        u.unit_of = (0..w.len()).collect();
        u.nodes = (0..w.len()).map(|v| vec![v]).collect();
        let nodes = w.nodes();
        u.fpga = nodes.iter().map(|x| x.fpga_latency).collect();
        u.cpu = nodes.iter().map(|x| x.cpu_latency).collect();
        u.size = nodes.iter().map(|x| x.size_bytes).collect();
        u.supported = nodes.iter().map(|x| x.supported_on_accelerator).collect();
        u.forward_fpga = nodes.iter().map(|x| if x.is_backward { 0.0 } else { x.fpga_latency }).collect();
        u.forward_cpu = nodes.iter().map(|x| if x.is_backward { 0.0 } else { x.cpu_latency }).collect();
        u.arcs = Vec::new();
        u
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Whether unit g may go on an accelerator with `memory` bytes.
    pub fn fits_accelerator(&self, g: usize, memory: f64) -> bool {
        self.supported[g] && self.size[g] <= memory
    }

    /// The hyperedges `T(u)`, equal sets merged (separately per side when `by_side`).
    pub fn hyperedges(&self, w: &Workload, by_side: bool) -> Vec<Hyperedge> {
        crate::model::contraction::hyperedges(w, &self.unit_of, by_side)
            .into_iter()
            .map(|(units, backward, cost)| Hyperedge { units, cost, backward })
            .collect()
    }
}

/// A continuous `z ∈ [0, 1]` with `z ≥ max_{a} x_a − min_{b} x_b` over the given
/// memberships (see the module docs).
pub(crate) fn cut_indicator(b: &mut Builder, members: &[Var]) -> Var {
    let z = b.continuous(0.0, 0.0, 1.0);
    if members.len() == 2 {
        let (x, y) = (members[0], members[1]);
        b.ge(&[(z, 1.0), (x, -1.0), (y, 1.0)], 0.0);
        b.ge(&[(z, 1.0), (y, -1.0), (x, 1.0)], 0.0);
        return z;
    }
    let meet = b.continuous(0.0, 0.0, 1.0);
    let inside = b.continuous(0.0, 0.0, 1.0);
    for &x in members {
        b.ge(&[(meet, 1.0), (x, -1.0)], 0.0);
        b.le(&[(inside, 1.0), (x, -1.0)], 0.0);
    }
    b.ge(&[(z, 1.0), (meet, -1.0), (inside, 1.0)], 0.0);
    z
}

/// Contiguity of one device's unit set on the group DAG `arcs`; `member[g]` is the
/// membership of unit g (see the module docs).
pub(crate) fn contiguity(b: &mut Builder, member: &[Var], arcs: &[(usize, usize)]) {
    let reach: Vec<Var> = member.iter().map(|_| b.continuous(0.0, 0.0, 1.0)).collect();
    for (g, &x) in member.iter().enumerate() {
        b.ge(&[(reach[g], 1.0), (x, -1.0)], 0.0);
    }
    for &(u, v) in arcs {
        b.ge(&[(reach[v], 1.0), (reach[u], -1.0)], 0.0);
        b.le(&[(member[v], 1.0), (member[u], -1.0), (reach[u], 1.0)], 1.0);
    }
}

/// A pipeline order of the devices (MODEL.md contiguity as the scorer checks it: each
/// device's set contiguous *and* the graph of devices acyclic, i.e. a chain of ideals).
/// `member[p][g]` is the membership of unit g on explicit device p; a unit on no explicit
/// device is a device of its own (latency's CPU units). Positions (see the module docs):
///
/// ```text
/// τ_g, P_p ∈ [0, Π];  |τ_g − P_p| ≤ (Π+1)(1 − x[g,p])
/// τ_v ≥ τ_u + 1 − (Π+1) Σ_p w[u,v,p],  w[u,v,p] ≤ x[u,p], w[u,v,p] ≤ x[v,p]   (u → v)
/// ```
///
/// A cycle of devices (or a path leaving a set and re-entering it) is a cycle of the
/// quotient graph with at least one arc between different devices: its +1 makes the
/// positions infeasible. An acyclic quotient has a topological numbering that fits.
pub(crate) fn device_order(b: &mut Builder, member: &[Vec<Var>], arcs: &[(usize, usize)], units: usize) {
    let span = (units + member.len()) as f64;
    let big = span + 1.0;
    let tau: Vec<Var> = (0..units).map(|_| b.continuous(0.0, 0.0, span)).collect();
    for row in member {
        let p = b.continuous(0.0, 0.0, span);
        for (g, &x) in row.iter().enumerate() {
            b.le(&[(tau[g], 1.0), (p, -1.0), (x, big)], big);
            b.le(&[(p, 1.0), (tau[g], -1.0), (x, big)], big);
        }
    }
    for &(u, v) in arcs {
        let mut terms = vec![(tau[v], 1.0), (tau[u], -1.0)];
        for row in member {
            let w = b.continuous(0.0, 0.0, 1.0);
            b.le(&[(w, 1.0), (row[u], -1.0)], 0.0);
            b.le(&[(w, 1.0), (row[v], -1.0)], 0.0);
            terms.push((w, big));
        }
        b.ge(&terms, 1.0);
    }
}

/// Symmetry breaking among interchangeable devices: `member[d][g]` is the membership of
/// unit g on device d (see the module docs).
pub(crate) fn symmetry(b: &mut Builder, member: &[Vec<Var>]) {
    for d in 1..member.len() {
        for g in 0..member[d].len() {
            let mut terms: Vec<(Var, f64)> = vec![(member[d][g], 1.0)];
            terms.extend(member[d - 1][..g].iter().map(|&x| (x, -1.0)));
            b.le(&terms, 0.0);
        }
    }
}

/// The device of every unit, renumbered so that accelerators (and CPUs) are numbered in
/// order of their lowest unit; `None` if a unit's nodes are on different devices.
pub fn canonical_devices(units: &Units, assignment: &[Device]) -> Option<Vec<Device>> {
    let mut device = Vec::with_capacity(units.len());
    for nodes in &units.nodes {
        let d = assignment[nodes[0]];
        if nodes.iter().any(|&v| assignment[v] != d) {
            return None;
        }
        device.push(d);
    }
    Some(Placement::new(device).canonical().assignment)
}

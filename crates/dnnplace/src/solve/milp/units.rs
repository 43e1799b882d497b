//! What the integer programs place, and the constraint families the models share.
//!
//! **Units** ([`Grouping::units`]). Without contiguity a unit is a colour class (a node without a
//! class is its own); with contiguity it is a group of [`Contraction`](crate::model::contraction::Contraction) (classes on one
//! cycle of the class graph fused, numbered topologically), the same units the DP splits
//! and the scorer's contiguity check implies. Either way a [`Grouping`]: per unit its
//! nodes, fpga/cpu time (and their forward parts), size and support.
//!
//! **Communication hyperedges** ([`Grouping::hyperedges`]): for a node `u` with
//! `c(u) > 0`, `T(u) = {g(u)} ∪ {g(w) : u → w}`. A device holding the unit set `X` pays
//! `c(u)` exactly when `X` *cuts* `T(u)` (meets it without containing it): if `g(u) ∈ X`
//! that is "some successor is elsewhere" (`u ∈ Out`), otherwise "some successor is here"
//! (`u ∈ In`, once per receiving device). With `x_a ∈ {0,1}` the membership of unit `a` on
//! the device, the cut indicator is `max_{a∈T} x_a − min_{b∈T} x_b`, linearised
//! ([`cut_indicator`]) as
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
//! **Memory** ([`memory_binds`]): `Σ_g size_g x_g ≤ M` per accelerator, written only when
//! some unit has a size and all of them together exceed M.
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

use super::highs::{Builder, Var};
use crate::model::grouping::Grouping;
use crate::model::{Device, Placement};

/// Whether the memory rows `Σ_g size_g x_g ≤ M` can bind: some unit has a size and all
/// units together exceed `memory`.
pub(crate) fn memory_binds(units: &Grouping, memory: f64) -> bool {
    units.groups.iter().any(|g| g.size_bytes > 0.0)
        && units.groups.iter().map(|g| g.size_bytes).sum::<f64>() > memory
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
pub(crate) fn device_order(
    b: &mut Builder,
    member: &[Vec<Var>],
    arcs: &[(usize, usize)],
    units: usize,
) {
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
/// A chain of ideals `I_0 ⊆ … ⊆ I_{T−1} = V` on `y[g][t]` (`g ∈ I_t`): `Y[g,T−1] = 1`
/// (complete), `Y[g,t] ≤ Y[g,t+1]` (nested) and `Y[w,t] ≤ Y[u,t]` for every arc `u → w`
/// (each `I_t` an ideal). The stage models ([`super::stages`], [`super::interleaved`])
/// share it.
pub(crate) fn ideal_chain(b: &mut Builder, y: &[Vec<Var>], arcs: &[(usize, usize)]) {
    for row in y {
        if let Some(&last) = row.last() {
            b.eq(&[(last, 1.0)], 1.0);
        }
        for pair in row.windows(2) {
            b.le(&[(pair[0], 1.0), (pair[1], -1.0)], 0.0);
        }
    }
    for &(u, w) in arcs {
        for (&later, &earlier) in y[w].iter().zip(&y[u]) {
            b.le(&[(later, 1.0), (earlier, -1.0)], 0.0);
        }
    }
}

/// unit g on device d (see the module docs).
/// The rows have O(G) terms each: none is built once the builder has stopped (budget).
pub(crate) fn symmetry(b: &mut Builder, member: &[Vec<Var>]) {
    for d in 1..member.len() {
        for g in 0..member[d].len() {
            if b.stopped().is_some() {
                return;
            }
            let mut terms: Vec<(Var, f64)> = vec![(member[d][g], 1.0)];
            terms.extend(member[d - 1][..g].iter().map(|&x| (x, -1.0)));
            b.le(&terms, 0.0);
        }
    }
}

/// The device of every unit, renumbered so that accelerators (and CPUs) are numbered in
/// order of their lowest unit; `None` if a unit's nodes are on different devices.
pub fn canonical_devices(units: &Grouping, assignment: &[Device]) -> Option<Vec<Device>> {
    Some(
        Placement::new(units.device_of_groups(assignment)?)
            .canonical()
            .assignment,
    )
}

//! The communication test of the load bound ([`super`], "Communication"): for a set `Q`
//! of placeable units, `h_Q(μ) = min_{S ⊇ Q} cut(S) + μ·fpga(S)` on the μ grid by minimum
//! cuts ([`crate::solve::bounds::min_cut`]), cached since h does not depend on the
//! threshold, and the room an accelerator holding `Q` has left:
//!
//! ```text
//! room = min(T − I, min_{μ<1} (T − h_Q(μ))/(1 − μ) − I),   impossible if h_Q(μ) > μT for some μ ≥ 1
//! ```
//!
//! Sets of two or more units are cut at four μ only and read between them on the chord
//! through (0, 0), which lies below the concave nondecreasing h.

use std::collections::HashMap;

use crate::model::grouping::Hyperedge;
use crate::solve::bounds::min_cut::CheapestSet;
use crate::solve::budget::Budget;

/// Units whose h is computed by minimum cuts (the largest that can be forced).
pub(super) const CUT_UNITS: usize = 64;

/// Sets of two or more units whose h is computed by minimum cuts, at most.
pub(super) const SET_CUTS: usize = 2000;

/// The μ at which h of a set of two or more units is computed.
pub(super) const SET_MU: [f64; 4] = [0.0625, 0.25, 1.0, 4.0];

/// The μ grid: 2^j for j = −8..=4.
pub(super) fn mu_grid() -> Vec<f64> {
    (-8..=4).map(|j| 2f64.powi(j)).collect()
}

/// Values of h_Q on the μ grid, by minimum cuts, cached (they do not depend on T).
pub(super) struct Cuts<'a> {
    pub(super) fpga: Vec<f64>,
    pub(super) placeable: Vec<bool>,
    pub(super) hyperedges: &'a [Hyperedge],
    pub(super) mu: Vec<f64>,
    /// The network, built on first use.
    pub(super) network: Option<CheapestSet>,
    /// Units whose sets get minimum cuts (the largest that can be forced).
    pub(super) allowed: Vec<bool>,
    /// h of single units (trivial `μ·fpga_g` for units not allowed).
    pub(super) single: Vec<Option<Vec<f64>>>,
    /// h of sets of two or more allowed units, sorted; None once the budget ran out.
    pub(super) sets: HashMap<Vec<usize>, Vec<f64>>,
    pub(super) sets_left: usize,
    pub(super) budget: Budget,
}

impl Cuts<'_> {
    pub(super) fn compute(&mut self, set: &[usize]) -> Vec<f64> {
        let (fpga, placeable, hyperedges) = (&self.fpga, &self.placeable, self.hyperedges);
        let network = self
            .network
            .get_or_insert_with(|| CheapestSet::new(fpga, placeable, hyperedges));
        let trivial: f64 = set.iter().map(|&g| fpga[g]).sum();
        if self.budget.is_exhausted() {
            return self.mu.iter().map(|&mu| mu * trivial).collect();
        }
        if set.len() == 1 {
            return self
                .mu
                .iter()
                .map(|&mu| network.value_of_set(set, mu).max(mu * trivial))
                .collect();
        }
        // Sets: a few points, and chords in between (module docs).
        let points: Vec<(f64, f64)> = SET_MU
            .iter()
            .map(|&m| (m, network.value_of_set(set, m).max(m * trivial)))
            .collect();
        self.mu
            .iter()
            .map(|&mu| chord(&points, mu).max(mu * trivial))
            .collect()
    }

    /// h_g on the grid (never fails: `μ·fpga_g` is valid, since S ∋ g).
    pub(super) fn single(&mut self, g: usize) -> Vec<f64> {
        if self.single[g].is_none() {
            let values = if self.allowed[g] && !self.hyperedges.is_empty() {
                self.compute(&[g])
            } else {
                self.mu.iter().map(|&mu| mu * self.fpga[g]).collect()
            };
            self.single[g] = Some(values);
        }
        self.single[g].clone().unwrap_or_default()
    }

    /// h_Q on the grid for a sorted set of two or more units, when all are allowed and the
    /// budget lasts.
    pub(super) fn set(&mut self, set: &[usize]) -> Option<Vec<f64>> {
        if let Some(values) = self.sets.get(set) {
            return Some(values.clone());
        }
        if self.sets_left == 0
            || self.hyperedges.is_empty()
            || set.iter().any(|&g| !self.allowed[g])
        {
            return None;
        }
        self.sets_left -= 1;
        let values = self.compute(set);
        self.sets.insert(set.to_vec(), values.clone());
        Some(values)
    }
}

/// Room for other units' fpga on an accelerator whose known units have fpga `compute` and
/// h at most `h` per μ (empty: no communication information), at threshold t; None when
/// the bin alone is impossible (module docs, Communication).
pub(super) fn bin_room(mu: &[f64], h: &[f64], compute: f64, t: f64) -> Option<f64> {
    let mut room = t - compute;
    for (&m, &hv) in mu.iter().zip(h) {
        if m < 1.0 {
            room = room.min((t - hv) / (1.0 - m) - compute);
        } else if hv > m * t {
            return None;
        }
    }
    (room >= 0.0).then_some(room)
}

/// A lower bound on a concave nondecreasing h ≥ 0 at μ, from lower bounds `points` on it
/// at increasing μ: the chord through (0, 0) and the points, flat after the last.
pub(super) fn chord(points: &[(f64, f64)], mu: f64) -> f64 {
    let mut prev = (0.0, 0.0);
    for &(m, v) in points {
        if mu <= m {
            return prev.1 + (v - prev.1) * (mu - prev.0) / (m - prev.0);
        }
        prev = (m, v);
    }
    prev.1
}

pub(super) fn max_into(h: &mut [f64], other: &[f64]) {
    for (x, y) in h.iter_mut().zip(other) {
        *x = x.max(*y);
    }
}

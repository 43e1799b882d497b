//! The load of a contiguous set `I \ J` from summaries of the ideals `I` and `J`.
//!
//! With the communication hyperedges `T(u)` of [`Contraction::communication_hyperedges`],
//! a device holding the groups `X` pays `c(T)` for every `T` that `X` cuts. Let `C(I)` be
//! the hyperedges cut by an ideal `I` and `a(I) = Σ_{T∈C(I)} c(T)`. For `J ⊆ I`, a
//! hyperedge `T` is cut by `X = I \ J` iff
//! - `T ⊆ I` and `T` is cut by `J`, or
//! - `T` is cut by `I` and `T ∩ I ⊄ J`.
//!
//! Every `T` cut by both `I` and `J` is in `C(I)`, so with `P = T ∩ I`:
//!
//! `comm(I \ J) = a(I) + a(J) − Σ_{T ∈ C(I)} c(T) · f(|P ∩ J|, |P|)`,
//! `f(0, ·) = 0`, `f(x, p) = 1` for `0 < x < p`, `f(p, p) = 2`.
//!
//! Compute and memory are prefix differences: `Σ_{I\J} fpga = F(I) − F(J)` and likewise
//! for CPU time, size and the count of unsupported groups. One pair costs
//! O(Σ_{T∈C(I)} |T ∩ I|) — the width of the frontier of `I`, not the size of the graph.

use crate::model::contraction::Contraction;
use crate::model::Workload;

use super::ideals::contains;

/// Per-ideal sums and the hyperedges the ideal cuts.
#[derive(Clone, Debug, Default)]
pub struct IdealSummary {
    pub fpga: f64,
    pub cpu: f64,
    pub size: f64,
    pub unsupported: u32,
    /// `a(I)`.
    pub cut: f64,
    /// For each `T ∈ C(I)`: `c(T)` and the groups of `T ∩ I`.
    pub crossing: Vec<(f64, Box<[u32]>)>,
}

/// Precomputed data to summarise ideals and price pairs.
pub struct PairCost {
    hyperedges: Vec<(Vec<usize>, f64)>,
    fpga: Vec<f64>,
    cpu: Vec<f64>,
    size: Vec<f64>,
    supported: Vec<bool>,
}

impl PairCost {
    pub fn new(w: &Workload, c: &Contraction) -> PairCost {
        PairCost {
            hyperedges: c.communication_hyperedges(w),
            fpga: c.groups.iter().map(|g| g.fpga_latency).collect(),
            cpu: c.groups.iter().map(|g| g.cpu_latency).collect(),
            size: c.groups.iter().map(|g| g.size_bytes).collect(),
            supported: c.groups.iter().map(|g| g.supported_on_accelerator).collect(),
        }
    }

    /// Summary of the ideal with bitset `bits`. O(n + Σ|T|).
    pub fn summarize(&self, bits: &[u64]) -> IdealSummary {
        let mut s = IdealSummary::default();
        for g in 0..self.fpga.len() {
            if contains(bits, g) {
                s.fpga += self.fpga[g];
                s.cpu += self.cpu[g];
                s.size += self.size[g];
                s.unsupported += u32::from(!self.supported[g]);
            }
        }
        for (t, c) in &self.hyperedges {
            let inside: Box<[u32]> = t.iter().filter(|&&g| contains(bits, g)).map(|&g| g as u32).collect();
            if !inside.is_empty() && inside.len() < t.len() {
                s.cut += c;
                s.crossing.push((*c, inside));
            }
        }
        s
    }

    /// Communication paid by an accelerator holding `I \ J` (`j_bits` is `J`).
    #[inline]
    pub fn communication(i: &IdealSummary, j: &IdealSummary, j_bits: &[u64]) -> f64 {
        let mut comm = i.cut + j.cut;
        for (c, part) in &i.crossing {
            let x = part.iter().filter(|&&g| contains(j_bits, g as usize)).count();
            if x == part.len() {
                comm -= 2.0 * c;
            } else if x > 0 {
                comm -= c;
            }
        }
        comm
    }

    /// Load of `I \ J` on an accelerator, or `None` if it does not fit or holds an
    /// unsupported group.
    #[inline]
    pub fn accelerator_load(i: &IdealSummary, j: &IdealSummary, j_bits: &[u64], memory: f64) -> Option<f64> {
        if i.unsupported != j.unsupported || i.size - j.size > memory {
            return None;
        }
        Some(i.fpga - j.fpga + Self::communication(i, j, j_bits))
    }

    /// Load of `I \ J` on a CPU.
    #[inline]
    pub fn cpu_load(i: &IdealSummary, j: &IdealSummary) -> f64 {
        i.cpu - j.cpu
    }
}

//! The load of a contiguous set `I \ J` from summaries of the ideals `I` and `J`.
//!
//! With the communication hyperedges `T(u)` of [`Contraction::communication_hyperedges`],
//! a device holding the groups `X` pays `c(T)` for every `T` that `X` cuts. Let `C(I)` be
//! the hyperedges cut by an ideal `I` and `a(I) = Σ_{T∈C(I)} c(T)`. For `J ⊆ I`, a
//! hyperedge `T` is cut by `X = I \ J` iff
//! - `T ⊆ I` and `T` is cut by `J`, or
//! - `T` is cut by `I` and `T ∩ I ⊄ J`.
//!
//! Every `T` cut by both `I` and `J` is in `C(I)`, so with `p = |T ∩ I|`, `x = |T ∩ J|`:
//!
//! `comm(I \ J) = a(I) + a(J) − Σ_{T ∈ C(I)} c(T) · f(x, p)`,
//! `f(0, ·) = 0`, `f(x, p) = 1` for `0 < x < p`, `f(p, p) = 2`.
//!
//! For `T ∈ C(I)`, `T ⊄ J`, so `x > 0` exactly when `T ∈ C(J)`. A summary therefore keeps
//! `C(I)` as a list of `(T, |T ∩ I|)` sorted by `T`, and one pair costs a merge of the two
//! lists: O(|C(I)| + |C(J)|), the width of the frontiers, not the size of the graph.
//!
//! Compute and memory are prefix differences: `Σ_{I\J} fpga = F(I) − F(J)` and likewise
//! for CPU time, size, the stashed activation bytes `A` (planning under a schedule,
//! [`crate::model::schedule::Pipeline`]) and the count of unsupported groups.
//!
//! **Stage inputs** (activation recomputation, [`crate::model::recompute`]). With
//! [`PairCost::with_stage_inputs`] the hyperedges also include, for every forward node `u`
//! with output bytes `b(u) > 0`, `T_b(u) = {g(u)} ∪ {g(x) : u → x, x forward}` weighing
//! `b(T) = b(u)` (cost 0, so communication is unchanged; equal sets are merged, weights
//! summed). Forward edges are arcs of the group DAG, so an ideal holding any group of
//! `T_b(u)` holds `g(u)`; hence the stage `I \ J` reads `u` from another stage iff `T ∈ C(J)`
//! and `T` meets `I \ J`, i.e. unless `|T ∩ I| = |T ∩ J|`:
//!
//! `In(I \ J) = Σ_{T ∈ C(J)} b(T) − Σ_{T ∈ C(I) ∩ C(J), |T∩I| = |T∩J|} b(T)`,
//!
//! summed directly over the kept terms in one merge of the two cut lists (no cancellation).
//! The forward compute `R(I \ J)` that a recomputing stage runs again is a prefix difference
//! of the per-ideal forward sums ([`PairCost::forward_sums`]).
//!
//! **Incremental summaries.** `I ∪ {g}` (for `g ∉ I`) has the sums of `I` plus `g`'s, and
//! `C(I ∪ {g})` is `C(I)` with every `T ∋ g` updated: `|T ∩ I|` grows by one, `T` enters
//! the list when it becomes non-zero and leaves when it reaches `|T|`. So a summary costs
//! O(|C(I)| + deg(g)) from its parent's, where deg(g) is the number of hyperedges holding
//! `g`. Sums are accumulated in the order groups are added; `a(I)` is re-summed over the
//! sorted list (the same floating-point sum whichever way `I` was reached).
//!
//! **Numerics.** When the hyperedge costs span at most 116 bits (their count included;
//! [`FixedPoint`]) — every workload seen so far — communication is computed in exact
//! integers: each `c(T)` is an i128 multiple of one power of two, `a(I)` is kept exactly,
//! and `a(J) + Σ_{x=0} c(T) − Σ_{x=p} c(T)` is converted back within 2u of the exact value.
//! Accelerator compute and size are kept the same way when their per-group values allow
//! (`F(I) − F(J)` is then an exact integer difference, converted within 2u). Otherwise,
//! and always for CPU time, the sums are compensated [`Sum`]s and every difference is
//! certified ([`Sum::difference`]: within 2⁻⁵² relative); when cancellation leaves too few
//! bits (a 1e15 node before 5-unit nodes), the value is summed directly over the groups of
//! `I \ J`, which the caller lists on demand (O(|I \ J|), or O(Σ_{g∈I\J} deg(g) · log) for
//! communication). The communication is taken as `a(J) + Σ_{x=0} c(T) − Σ_{x=p} c(T)`
//! (the formula above with `a(I)` cancelled). Each returned load is thus within 4u of the
//! exact real load (u = 2⁻⁵³), whatever the magnitudes, provided the sums stay finite
//! ([`crate::model::numerics::Rescale`]).

use std::cell::OnceCell;

use rayon::prelude::*;

use super::budget::{Budget, Exhausted};
use super::ideals::Ideals;
use crate::model::contraction::Contraction;
use crate::model::numerics::{Accumulator, FixedPoint, Sum};
use crate::model::Workload;

/// Per-ideal sums.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IdealSummary {
    pub fpga: Sum,
    pub cpu: Sum,
    pub size: Sum,
    /// Σ stashed activation bytes `A` (0 unless planning under a schedule).
    pub stash: f64,
    /// `a(I)`.
    pub cut: Sum,
    /// `a(I)` as an exact fixed-point image when [`PairCost`] has one (else 0).
    pub cut_fixed: i128,
    /// `F(I)` and the size as exact fixed-point images when [`PairCost`] has them (else 0).
    pub fpga_fixed: i128,
    pub size_fixed: i128,
    pub unsupported: u32,
}

/// A hyperedge cut by an ideal and how many of its groups the ideal holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crossing {
    pub edge: u32,
    pub inside: u32,
}

/// Summaries of a family of ideals: sums and the sorted cut lists, flat.
#[derive(Clone, Debug, Default)]
pub struct Summaries {
    pub heads: Vec<IdealSummary>,
    start: Vec<usize>,
    crossing: Vec<Crossing>,
}

impl Summaries {
    /// The summary of the empty ideal only.
    pub fn empty() -> Summaries {
        Summaries {
            heads: vec![IdealSummary::default()],
            start: vec![0, 0],
            crossing: Vec::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.heads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
    }

    /// `C(I_i)` with the counts.
    #[inline]
    pub fn crossing(&self, i: usize) -> &[Crossing] {
        &self.crossing[self.start[i]..self.start[i + 1]]
    }

    /// Appends the summary of `I_parent ∪ {g}`.
    pub fn push_extended(&mut self, cost: &PairCost, parent: usize, g: usize) {
        let mut crossing = std::mem::take(&mut self.crossing);
        let (from, to) = (self.start[parent], self.start[parent + 1]);
        let (kept, _) = crossing.split_at(to);
        let mut grown = Vec::with_capacity(to - from + cost.degree(g));
        let head = cost.extend_into(&self.heads[parent], &kept[from..], g, &mut grown);
        crossing.extend_from_slice(&grown);
        self.crossing = crossing;
        self.heads.push(head);
        self.start.push(self.crossing.len());
    }

    /// Bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.heads.capacity() * std::mem::size_of::<IdealSummary>()
            + self.start.capacity() * 8
            + self.crossing.capacity() * std::mem::size_of::<Crossing>()
    }

    /// Summaries of every ideal of `ideals`, level by level, each from its canonical
    /// parent's; levels in parallel, the budget checked between blocks.
    pub fn of_ideals(
        cost: &PairCost,
        ideals: &Ideals,
        budget: &Budget,
    ) -> Result<Summaries, Exhausted> {
        const BLOCK: usize = 1024;
        let mut s = Summaries::empty();
        for level in 1..ideals.level_start.len() - 1 {
            let (from, to) = (ideals.level_start[level], ideals.level_start[level + 1]);
            let starts: Vec<usize> = (from..to).step_by(BLOCK).collect();
            let part = |&b: &usize| {
                let (mut heads, mut lens, mut crossing) = (Vec::new(), Vec::new(), Vec::new());
                for i in b..(b + BLOCK).min(to) {
                    let (p, g) = ideals.parent(i).expect("a non-empty ideal has a parent");
                    let before = crossing.len();
                    heads.push(cost.extend_into(&s.heads[p], s.crossing(p), g, &mut crossing));
                    lens.push(crossing.len() - before);
                }
                (heads, lens, crossing)
            };
            // A level of one block runs here, not in rayon's pool (see Ideals::enumerate).
            let parts: Vec<(Vec<IdealSummary>, Vec<usize>, Vec<Crossing>)> = if starts.len() == 1 {
                starts.iter().map(part).collect()
            } else {
                starts.par_iter().map(part).collect()
            };
            for (heads, lens, crossing) in parts {
                s.heads.extend_from_slice(&heads);
                let mut at = s.crossing.len();
                for l in lens {
                    at += l;
                    s.start.push(at);
                }
                s.crossing.extend_from_slice(&crossing);
            }
            budget.check()?;
        }
        Ok(s)
    }
}

/// Precomputed data to summarise ideals and price pairs.
pub struct PairCost {
    /// `c(T)` per hyperedge.
    edge_cost: Vec<f64>,
    /// `|T|` per hyperedge.
    edge_size: Vec<u32>,
    /// Hyperedges holding each group, sorted.
    touching: Vec<Vec<u32>>,
    fpga: Vec<f64>,
    cpu: Vec<f64>,
    size: Vec<f64>,
    stash: Vec<f64>,
    supported: Vec<bool>,
    /// `b(T)` per hyperedge: stage-input bytes (module doc); empty unless
    /// [`PairCost::with_stage_inputs`].
    edge_bytes: Vec<f64>,
    /// Σ fpgaLatency of each group's forward nodes (for recomputation; empty unless
    /// [`PairCost::with_stage_inputs`]).
    forward: Vec<f64>,
    /// `c(T)` as exact fixed-point images, when the costs allow one (module doc).
    fixed: Option<FixedCosts>,
    /// Each group's accelerator time and size as exact images, when they allow one.
    fpga_fixed: Option<FixedCosts>,
    size_fixed: Option<FixedCosts>,
}

/// Values (hyperedge costs, or per-group times or bytes) as exact integers:
/// `x_i = cost[i]·2^e`.
struct FixedCosts {
    point: FixedPoint,
    cost: Vec<i128>,
}

impl FixedCosts {
    fn of(edge_cost: &[f64]) -> Option<FixedCosts> {
        let point = FixedPoint::for_values(edge_cost)?;
        Some(FixedCosts {
            point,
            cost: edge_cost.iter().map(|&c| point.image(c)).collect(),
        })
    }
}

impl PairCost {
    pub fn new(w: &Workload, c: &Contraction) -> PairCost {
        let hyperedges = c.communication_hyperedges(w);
        let mut touching = vec![Vec::new(); c.len()];
        for (t, (groups, _)) in hyperedges.iter().enumerate() {
            for &g in groups {
                touching[g].push(t as u32);
            }
        }
        let edge_cost: Vec<f64> = hyperedges.iter().map(|(_, c)| *c).collect();
        let fpga: Vec<f64> = c.groups.iter().map(|g| g.fpga_latency).collect();
        let size: Vec<f64> = c.groups.iter().map(|g| g.size_bytes).collect();
        PairCost {
            fixed: FixedCosts::of(&edge_cost),
            fpga_fixed: FixedCosts::of(&fpga),
            size_fixed: FixedCosts::of(&size),
            edge_cost,
            edge_size: hyperedges.iter().map(|(t, _)| t.len() as u32).collect(),
            touching,
            fpga,
            cpu: c.groups.iter().map(|g| g.cpu_latency).collect(),
            size,
            stash: vec![0.0; c.len()],
            supported: c
                .groups
                .iter()
                .map(|g| g.supported_on_accelerator)
                .collect(),
            edge_bytes: Vec::new(),
            forward: Vec::new(),
        }
    }

    /// Adds the stage-input hyperedges `T_b(u)` and each group's forward compute (module
    /// doc), for pricing recomputing stages. O(n + m log m).
    pub fn with_stage_inputs(mut self, w: &Workload, c: &Contraction) -> PairCost {
        let b = crate::model::recompute::output_bytes(w);
        let mut map: std::collections::HashMap<Vec<usize>, f64> = Default::default();
        for u in (0..w.len()).filter(|&u| b[u] > 0.0) {
            let mut t: Vec<usize> = std::iter::once(c.group_of[u])
                .chain(
                    w.successors(u)
                        .iter()
                        .filter(|&&x| !w.node(x).is_backward)
                        .map(|&x| c.group_of[x]),
                )
                .collect();
            t.sort_unstable();
            t.dedup();
            if t.len() > 1 {
                *map.entry(t).or_insert(0.0) += b[u];
            }
        }
        let mut list: Vec<(Vec<usize>, f64)> = map.into_iter().collect();
        list.sort_by(|a, b| a.0.cmp(&b.0));
        self.edge_bytes = vec![0.0; self.edge_cost.len()];
        for (t, bytes) in list {
            let e = self.edge_cost.len() as u32;
            for &g in &t {
                self.touching[g].push(e);
            }
            self.edge_cost.push(0.0);
            if let Some(fixed) = &mut self.fixed {
                fixed.cost.push(0);
            }
            self.edge_size.push(t.len() as u32);
            self.edge_bytes.push(bytes);
        }
        self.forward = vec![0.0; c.len()];
        for (v, &g) in c.group_of.iter().enumerate() {
            if !w.node(v).is_backward {
                self.forward[g] += w.node(v).fpga_latency;
            }
        }
        self
    }

    /// Whether [`PairCost::with_stage_inputs`] was applied.
    pub fn prices_recomputation(&self) -> bool {
        !self.forward.is_empty()
    }

    /// The forward compute of every ideal of `ideals`, each from its canonical parent's
    /// (module doc). O(|𝓘|).
    pub fn forward_sums(&self, ideals: &Ideals) -> Vec<Sum> {
        let mut sums = Vec::with_capacity(ideals.len());
        sums.push(Sum::ZERO);
        for i in 1..ideals.len() {
            let (p, g) = ideals.parent(i).expect("a non-empty ideal has a parent");
            sums.push(sums[p].plus(self.forward[g]));
        }
        sums
    }

    /// `R(I \ J)`: the forward compute of the stage, from the ideals' forward sums
    /// ([`PairCost::forward_sums`]), certified or summed directly over `groups()`.
    pub fn forward_compute(&self, fi: Sum, fj: Sum, groups: impl FnOnce() -> Vec<usize>) -> f64 {
        fi.difference(fj)
            .unwrap_or_else(|| Self::direct(&self.forward, &groups()))
    }

    /// `In(I \ J)` (module doc) from the cut lists of `I` and `J`. O(|C(I)| + |C(J)|).
    pub fn stage_input_bytes(&self, ci: &[Crossing], cj: &[Crossing]) -> f64 {
        let mut input = 0.0;
        let mut a = 0;
        for y in cj {
            let bytes = self.edge_bytes.get(y.edge as usize).copied().unwrap_or(0.0);
            if bytes == 0.0 {
                continue;
            }
            while a < ci.len() && ci[a].edge < y.edge {
                a += 1;
            }
            let untouched = a < ci.len() && ci[a].edge == y.edge && ci[a].inside == y.inside;
            if !untouched {
                input += bytes;
            }
        }
        input
    }

    /// Prices memory under a schedule: group `g` holds `size[g]` bytes with one
    /// micro-batch in flight and stashes `stash[g]` more per further micro-batch.
    pub fn with_memory(mut self, size: Vec<f64>, stash: Vec<f64>) -> PairCost {
        assert!(
            size.len() == self.fpga.len() && stash.len() == self.fpga.len(),
            "one figure per group"
        );
        self.size_fixed = FixedCosts::of(&size);
        self.size = size;
        self.stash = stash;
        self
    }

    /// Number of groups.
    pub fn groups(&self) -> usize {
        self.fpga.len()
    }

    /// Number of hyperedges holding group `g`.
    pub fn degree(&self, g: usize) -> usize {
        self.touching[g].len()
    }

    /// The summary of `I ∪ {g}` from `I`'s (`head`, `crossing`), its cut list appended to
    /// `out`. O(|C(I)| + deg(g)).
    pub fn extend_into(
        &self,
        head: &IdealSummary,
        crossing: &[Crossing],
        g: usize,
        out: &mut Vec<Crossing>,
    ) -> IdealSummary {
        let start = out.len();
        let touch = &self.touching[g];
        let (mut a, mut b) = (0, 0);
        while a < crossing.len() || b < touch.len() {
            let ea = crossing.get(a).map_or(u32::MAX, |x| x.edge);
            let eb = touch.get(b).copied().unwrap_or(u32::MAX);
            if ea < eb {
                out.push(crossing[a]);
                a += 1;
            } else {
                let inside = if ea == eb {
                    a += 1;
                    crossing[a - 1].inside + 1
                } else {
                    1
                };
                b += 1;
                if inside < self.edge_size[eb as usize] {
                    out.push(Crossing { edge: eb, inside });
                }
            }
        }
        let cut = out[start..]
            .iter()
            .fold(Sum::ZERO, |s, x| s.plus(self.edge_cost[x.edge as usize]));
        let cut_fixed = self.fixed.as_ref().map_or(0, |f| {
            out[start..].iter().map(|x| f.cost[x.edge as usize]).sum()
        });
        IdealSummary {
            fpga: head.fpga.plus(self.fpga[g]),
            cpu: head.cpu.plus(self.cpu[g]),
            size: head.size.plus(self.size[g]),
            stash: head.stash + self.stash[g],
            cut,
            cut_fixed,
            fpga_fixed: head.fpga_fixed + self.fpga_fixed.as_ref().map_or(0, |f| f.cost[g]),
            size_fixed: head.size_fixed + self.size_fixed.as_ref().map_or(0, |f| f.cost[g]),
            unsupported: head.unsupported + u32::from(!self.supported[g]),
        }
    }

    /// Communication paid by an accelerator holding `I \ J` (module documentation):
    /// `a(J) + Σ_{T ∈ C(I) \ C(J)} c(T) − Σ_{T ∈ C(I), |T∩J| = |T∩I|} c(T)`, certified, or
    /// summed directly over `groups()` (the groups of `I \ J`).
    #[inline(always)]
    pub fn communication(
        &self,
        ci: &[Crossing],
        j: &IdealSummary,
        cj: &[Crossing],
        groups: impl FnOnce() -> Vec<usize>,
    ) -> f64 {
        if let Some(fixed) = &self.fixed {
            let mut sum = j.cut_fixed;
            Self::changed_terms(ci, cj, |e, enters| {
                let c = fixed.cost[e as usize];
                if enters {
                    sum += c;
                } else {
                    sum -= c;
                }
            });
            // `sum` is the exact communication of a set: never negative.
            return fixed.point.nonnegative_value(sum);
        }
        let (mut plus, mut minus) = (Accumulator::starting_at(j.cut), Accumulator::ZERO);
        Self::changed_terms(ci, cj, |e, enters| {
            let c = self.edge_cost[e as usize];
            if enters {
                plus = plus.plus(c);
            } else {
                minus = minus.plus(c);
            }
        });
        plus.sum()
            .difference(minus.sum())
            .unwrap_or_else(|| self.direct_communication(&groups()))
    }

    /// The terms of `comm(I \ J) − a(J)` (module doc) in one merge of the cut lists:
    /// `term(T, true)` for `T ∈ C(I)` that `J` does not touch (`x = 0`, it enters),
    /// `term(T, false)` for `T ∈ C(I)` whose groups in `I` are all in `J` (`x = p`).
    #[inline(always)]
    fn changed_terms(ci: &[Crossing], cj: &[Crossing], mut term: impl FnMut(u32, bool)) {
        let mut b = 0;
        for x in ci {
            while b < cj.len() && cj[b].edge < x.edge {
                b += 1;
            }
            if b < cj.len() && cj[b].edge == x.edge {
                if cj[b].inside == x.inside {
                    term(x.edge, false);
                }
            } else {
                term(x.edge, true);
            }
        }
    }

    /// `X(I) − X(J)` for a per-group quantity `X` (`values`) kept as an exact image and a
    /// compensated sum per ideal: the exact difference when `exact` exists, else the
    /// certified one, else summed directly over the groups of `I \ J` (module doc).
    #[inline(always)]
    fn prefix_difference<'m>(
        exact: &Option<FixedCosts>,
        (exact_i, sum_i): (i128, Sum),
        (exact_j, sum_j): (i128, Sum),
        values: &[f64],
        members: &mut impl FnMut() -> &'m [usize],
    ) -> f64 {
        match exact {
            Some(f) => f.point.nonnegative_value(exact_i - exact_j),
            None => sum_i
                .difference(sum_j)
                .unwrap_or_else(|| Self::direct(values, members())),
        }
    }

    /// `Σ values[g]` over `groups`. O(|groups|).
    #[cold]
    fn direct(values: &[f64], groups: &[usize]) -> f64 {
        groups
            .iter()
            .fold(Sum::ZERO, |s, &g| s.plus(values[g]))
            .value()
    }

    /// `Σ c(T)` over the hyperedges cut by the set `groups`: those holding `0 < x < |T|` of
    /// its groups. O(Σ_g deg(g) · log).
    #[cold]
    fn direct_communication(&self, groups: &[usize]) -> f64 {
        let mut touched: Vec<u32> = groups
            .iter()
            .flat_map(|&g| self.touching[g].iter().copied())
            .collect();
        touched.sort_unstable();
        touched
            .chunk_by(|a, b| a == b)
            .filter(|run| (run.len() as u32) < self.edge_size[run[0] as usize])
            .fold(Sum::ZERO, |s, run| s.plus(self.edge_cost[run[0] as usize]))
            .value()
    }

    /// Load of `I \ J` on an accelerator, or `None` if it does not fit or holds an
    /// unsupported group. `groups` lists the groups of `I \ J`; it is called only where a
    /// certified difference is out of reach (module documentation), at most once.
    #[inline(always)]
    pub fn accelerator_load(
        &self,
        s: &Summaries,
        i: usize,
        j: usize,
        memory: f64,
        groups: impl FnOnce() -> Vec<usize>,
    ) -> Option<f64> {
        let (hi, hj) = (&s.heads[i], &s.heads[j]);
        if hi.unsupported != hj.unsupported {
            return None;
        }
        let listed = OnceCell::new();
        let mut groups = Some(groups);
        let mut members = || {
            listed
                .get_or_init(|| groups.take().expect("listed once")())
                .as_slice()
        };
        let size = Self::prefix_difference(
            &self.size_fixed,
            (hi.size_fixed, hi.size),
            (hj.size_fixed, hj.size),
            &self.size,
            &mut members,
        );
        if size > memory {
            return None;
        }
        let fpga = Self::prefix_difference(
            &self.fpga_fixed,
            (hi.fpga_fixed, hi.fpga),
            (hj.fpga_fixed, hj.fpga),
            &self.fpga,
            &mut members,
        );
        Some(fpga + self.communication(s.crossing(i), hj, s.crossing(j), || members().to_vec()))
    }

    /// Load of `I \ J` on a CPU; `groups` as for [`Self::accelerator_load`].
    #[inline(always)]
    pub fn cpu_load(
        &self,
        s: &Summaries,
        i: usize,
        j: usize,
        groups: impl FnOnce() -> Vec<usize>,
    ) -> f64 {
        s.heads[i]
            .cpu
            .difference(s.heads[j].cpu)
            .unwrap_or_else(|| Self::direct(&self.cpu, &groups()))
    }
}

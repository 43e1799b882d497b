//! The ideals of the group DAG: sets closed under predecessors.
//!
//! Every contiguous set of groups is `I \ J` for ideals `J ⊆ I`, so a contiguous split is
//! a chain `∅ = I_0 ⊂ I_1 ⊂ … ⊂ I_r = V` of ideals.
//!
//! **Enumeration without duplicates.** Groups are numbered in a topological order. The
//! largest group `t(I) = max I` of a non-empty ideal has no successor in `I`, so
//! `π(I) = I \ {t(I)}` is again an ideal: its *canonical parent*. Conversely the children
//! of an ideal `P` are `P ∪ {g}` for every group `g > t(P)` whose predecessors all lie in
//! `P` (then `t(P ∪ {g}) = g` and `π(P ∪ {g}) = P`). Every ideal has exactly one parent,
//! so walking the tree of canonical parents from `∅` lists every ideal exactly once —
//! no hashing, no deduplication. The tree is walked level by level (level = number of
//! groups), so the ideals of a level only depend on lower levels.
//!
//! **Incremental candidates.** With `A(P) = {g > t(P) : pred(g) ⊆ P}` the candidates of
//! `P`, the child `C = P ∪ {g}` has
//! `A(C) = {a ∈ A(P) : a > g} ∪ {s ∈ succ(g) : pred(s) ⊆ C}`
//! (a successor of `g` was not a candidate of `P`, and nothing else becomes addable), so a
//! child costs O(|A(P)| + Σ_{s ∈ succ(g)} |pred(s)|) instead of a scan of all n groups.
//!
//! Ideals are stored as trimmed bitsets ([`bits`]): O(1 + (t(I) − h(I))/64) words each,
//! where `h(I)` is the first group not in `I`. Every ideal also keeps its canonical parent
//! and the group added to it, from which [`super::ideal_cost`] derives its summary in
//! O(degree). Each level is expanded in parallel (rayon) in blocks (a level of at most
//! 64 parents, one task, on the calling thread); between blocks the count limit and the [`Budget`] (time, Ctrl-C) are checked.
//!
//! Complexity: O(Σ_I (s_I + |A(π(I))| + Σ_{s∈succ(t(I))} |pred(s)|)) time and
//! O(Σ_I s_I + max level · max |A|) memory, for the ideals `I` with s_I stored words.
//! On chain-like graphs every term is O(width), so enumeration is O(|𝓘| · width).
//!
//! [`estimate`] counts (or bounds) the ideals *before* enumerating them.

pub mod bits;
mod estimate;

pub use bits::IdealBits;
pub use estimate::{estimate, estimate_in, estimate_with, estimate_within, IdealEstimate};

use rayon::prelude::*;

use super::budget::{Budget, Exhausted};
use crate::model::contraction::Contraction;

/// Where ideal `i`'s words are.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: usize,
    base: u32,
    len: u32,
}

/// The ideals of a group DAG, ordered by level, as trimmed bitsets with their canonical
/// parents.
#[derive(Clone, Debug)]
pub struct Ideals {
    spans: Vec<Span>,
    words: Vec<u64>,
    /// Ideals of level p are `level_start[p] .. level_start[p + 1]`; the last entry is the count.
    pub level_start: Vec<usize>,
    /// `parent[i] = π(I_i)` (`u32::MAX` for ∅).
    parent: Vec<u32>,
    /// `added[i] = t(I_i)`, the group `I_i` adds to its parent (`u32::MAX` for ∅).
    added: Vec<u32>,
    /// On small DAGs (at most [`DENSE_WORDS`] words), every ideal also as a plain bitset of
    /// `dense_words` words, for the fastest subset test.
    dense: Vec<u64>,
    dense_words: usize,
}

/// The widest plain bitsets kept beside the trimmed ones (512 groups).
pub const DENSE_WORDS: usize = 8;

/// Why enumeration stopped before listing every ideal.
#[derive(Clone, Debug, PartialEq)]
pub enum EnumerationStop {
    /// More ideals than the limit; `found` were listed before stopping.
    TooMany { found: usize },
    /// The time budget ran out or Ctrl-C was pressed; `found` were listed.
    Budget { reason: Exhausted, found: usize },
}

/// Parents expanded between two checks of the limit and the budget.
const BLOCK: usize = 4096;
/// Parents per parallel task.
const CHUNK: usize = 64;

/// Children of a run of parents, built by one task.
#[derive(Default)]
struct Batch {
    base: Vec<u32>,
    len: Vec<u32>,
    words: Vec<u64>,
    parent: Vec<u32>,
    added: Vec<u32>,
    cand_len: Vec<u32>,
    cand: Vec<u32>,
}

impl Ideals {
    /// Enumerates all ideals of `c`, stopping with [`EnumerationStop::TooMany`] past `limit`
    /// ideals and with [`EnumerationStop::Budget`] when `budget` runs out.
    pub fn enumerate(
        c: &Contraction,
        limit: usize,
        budget: &Budget,
    ) -> Result<Ideals, EnumerationStop> {
        let n = c.len();
        assert!(n < u32::MAX as usize, "group indices fit in u32");
        let mut ideals = Ideals {
            spans: vec![Span {
                start: 0,
                base: 0,
                len: 0,
            }],
            words: Vec::new(),
            level_start: vec![0, 1],
            parent: vec![u32::MAX],
            added: vec![u32::MAX],
            dense: Vec::new(),
            dense_words: 0,
        };
        let mut cand: Vec<u32> = (0..n)
            .filter(|&g| c.pred[g].is_empty())
            .map(|g| g as u32)
            .collect();
        let mut cand_start: Vec<usize> = vec![0, cand.len()];
        for _ in 0..n {
            let (from, to) = (
                ideals.level_start[ideals.level_start.len() - 2],
                ideals.spans.len(),
            );
            let mut next_cand: Vec<u32> = Vec::new();
            let mut next_start: Vec<usize> = vec![0];
            for block in (from..to).step_by(BLOCK) {
                let block_end = (block + BLOCK).min(to);
                let starts: Vec<usize> = (block..block_end).step_by(CHUNK).collect();
                let batch = |&s: &usize| {
                    let mut out = Batch::default();
                    for i in s..(s + CHUNK).min(block_end) {
                        let a = &cand[cand_start[i - from]..cand_start[i - from + 1]];
                        ideals.expand(c, i, a, &mut out);
                    }
                    out
                };
                // One task runs here: handing it to rayon's pool would start the pool (on
                // a small graph, for nothing) and cost two thread wake-ups per level.
                let batches: Vec<Batch> = if starts.len() == 1 {
                    starts.iter().map(batch).collect()
                } else {
                    starts.par_iter().map(batch).collect()
                };
                for b in batches {
                    let offset = ideals.words.len();
                    let mut at = 0usize;
                    for (&base, &len) in b.base.iter().zip(&b.len) {
                        ideals.spans.push(Span {
                            start: offset + at,
                            base,
                            len,
                        });
                        at += len as usize;
                    }
                    ideals.words.extend_from_slice(&b.words);
                    ideals.parent.extend_from_slice(&b.parent);
                    ideals.added.extend_from_slice(&b.added);
                    for &l in &b.cand_len {
                        next_start.push(next_start.last().expect("non-empty") + l as usize);
                    }
                    next_cand.extend_from_slice(&b.cand);
                }
                let found = ideals.spans.len();
                if found > limit {
                    return Err(EnumerationStop::TooMany { found });
                }
                budget
                    .check()
                    .map_err(|reason| EnumerationStop::Budget { reason, found })?;
            }
            ideals.level_start.push(ideals.spans.len());
            cand = next_cand;
            cand_start = next_start;
        }
        let words = n.div_ceil(64);
        if words <= DENSE_WORDS {
            let mut dense = vec![0; ideals.len() * words];
            for (i, row) in dense.chunks_mut(words).enumerate() {
                let bits = ideals.get(i);
                for (w, slot) in row.iter_mut().enumerate() {
                    *slot = bits.word(w);
                }
            }
            (ideals.dense, ideals.dense_words) = (dense, words);
        }
        Ok(ideals)
    }

    /// Appends the children of ideal `i`, whose candidates are `a`, to `out`.
    fn expand(&self, c: &Contraction, i: usize, a: &[u32], out: &mut Batch) {
        let bits = self.get(i);
        for (pos, &g) in a.iter().enumerate() {
            let g = g as usize;
            let start = out.words.len();
            let base = bits::push_with(bits, g, &mut out.words);
            out.base.push(base as u32);
            out.len.push((out.words.len() - start) as u32);
            out.parent.push(i as u32);
            out.added.push(g as u32);
            let child = IdealBits {
                base,
                words: &out.words[start..],
            };
            let first = out.cand.len();
            out.cand.extend_from_slice(&a[pos + 1..]);
            let rest = out.cand.len();
            for &s in &c.succ[g] {
                if c.pred[s].iter().all(|&p| child.contains(p)) {
                    out.cand.push(s as u32);
                }
            }
            if out.cand.len() > rest && rest > first {
                out.cand[first..].sort_unstable();
            }
            out.cand_len.push((out.cand.len() - first) as u32);
        }
    }

    /// Number of ideals.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// The bitset of ideal `i`.
    #[inline]
    pub fn get(&self, i: usize) -> IdealBits<'_> {
        let s = self.spans[i];
        IdealBits {
            base: s.base as usize,
            words: &self.words[s.start..s.start + s.len as usize],
        }
    }

    /// Ideal `i` as a plain bitset of ⌈n/64⌉ words on small DAGs (at most
    /// [`DENSE_WORDS`] words), else empty.
    #[inline(always)]
    pub fn dense_row(&self, i: usize) -> &[u64] {
        let w = self.dense_words;
        &self.dense[i * w..(i + 1) * w]
    }

    /// `I_j ⊆ I_i` ([`IdealBits::is_subset_of`], on the stored words directly).
    #[inline(always)]
    pub fn is_subset(&self, j: usize, i: usize) -> bool {
        if self.dense_words > 0 {
            return self
                .dense_row(j)
                .iter()
                .zip(self.dense_row(i))
                .all(|(x, y)| x & !y == 0);
        }
        let (sj, si) = (self.spans[j], self.spans[i]);
        let (bj, bi) = (sj.base as usize, si.base as usize);
        let (ej, ei) = (bj + sj.len as usize, bi + si.len as usize);
        if bj > bi || ej > ei {
            return false;
        }
        if ej <= bi {
            // J lies in I's run of full words.
            return true;
        }
        // J's words below I's base fall in I's run of full words.
        let jw = &self.words[sj.start + (bi - bj)..sj.start + sj.len as usize];
        let iw = &self.words[si.start..si.start + jw.len()];
        jw.iter().zip(iw).all(|(a, b)| a & !b == 0)
    }

    /// The canonical parent of ideal `i` and the group it adds (`None` for ∅).
    #[inline]
    pub fn parent(&self, i: usize) -> Option<(usize, usize)> {
        (self.parent[i] != u32::MAX).then(|| (self.parent[i] as usize, self.added[i] as usize))
    }

    /// Level (number of groups) of ideal `i`.
    pub fn level_of(&self, i: usize) -> usize {
        self.level_start.partition_point(|&s| s <= i) - 1
    }

    /// Bytes held by the ideals.
    pub fn heap_bytes(&self) -> usize {
        self.spans.capacity() * std::mem::size_of::<Span>()
            + self.words.capacity() * 8
            + (self.parent.capacity() + self.added.capacity()) * 4
            + self.dense.capacity() * 8
            + self.level_start.capacity() * 8
    }

    /// Bytes per ideal besides its words: span, parent and added group.
    pub const BYTES_PER_IDEAL: usize = std::mem::size_of::<Span>() + 8;
}

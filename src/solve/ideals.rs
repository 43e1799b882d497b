//! The ideals of the group DAG: sets closed under predecessors.
//!
//! Every contiguous set of groups is `I \ J` for ideals `J ⊆ I`, so a contiguous split is
//! a chain `∅ = I_0 ⊂ I_1 ⊂ … ⊂ I_r = V` of ideals. Ideals are enumerated level by level
//! (level = number of groups): each ideal of level p+1 is an ideal of level p plus one
//! group whose predecessors are all in it; duplicates within a level are removed by
//! hashing. Ideals are stored as bitsets of `words` u64 words, flat, ordered by level.
//!
//! Complexity: O(|𝓘| · n · w) time and O(|𝓘| · w) memory, for |𝓘| ideals, n groups and
//! w = ⌈n / 64⌉ words.

use std::collections::HashSet;

use crate::model::contraction::Contraction;

/// The ideals of a group DAG, as flat bitsets ordered by level.
#[derive(Clone, Debug)]
pub struct Ideals {
    /// u64 words per ideal.
    pub words: usize,
    /// Ideal `i` is `bits[i * words .. (i + 1) * words]`.
    pub bits: Vec<u64>,
    /// Ideals of level p are `level_start[p] .. level_start[p + 1]`; the last entry is the count.
    pub level_start: Vec<usize>,
}

/// More ideals than the limit; `found` were enumerated before stopping.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TooMany {
    pub found: usize,
}

impl Ideals {
    /// Enumerates all ideals of `c`, stopping with [`TooMany`] past `limit`.
    pub fn enumerate(c: &Contraction, limit: usize) -> Result<Ideals, TooMany> {
        let n = c.len();
        let words = n.div_ceil(64).max(1);
        let pred_mask: Vec<Vec<u64>> = (0..n)
            .map(|g| {
                let mut m = vec![0u64; words];
                for &p in &c.pred[g] {
                    m[p / 64] |= 1 << (p % 64);
                }
                m
            })
            .collect();
        let mut bits = vec![0u64; words];
        let mut level_start = vec![0, 1];
        let mut next: HashSet<Box<[u64]>> = HashSet::new();
        for level in 0..n {
            let (from, to) = (level_start[level], level_start[level + 1]);
            next.clear();
            let mut fresh: Vec<Box<[u64]>> = Vec::new();
            for i in from..to {
                let ideal = &bits[i * words..(i + 1) * words];
                for g in 0..n {
                    if ideal[g / 64] >> (g % 64) & 1 == 1 {
                        continue;
                    }
                    if pred_mask[g].iter().zip(ideal).any(|(m, x)| m & !x != 0) {
                        continue;
                    }
                    let mut grown: Box<[u64]> = ideal.into();
                    grown[g / 64] |= 1 << (g % 64);
                    if !next.contains(&grown) {
                        next.insert(grown.clone());
                        fresh.push(grown);
                    }
                }
                if to + fresh.len() > limit {
                    return Err(TooMany { found: to + fresh.len() });
                }
            }
            // Sorted for a deterministic order whatever the hash.
            fresh.sort_unstable();
            for f in &fresh {
                bits.extend_from_slice(f);
            }
            level_start.push(to + fresh.len());
        }
        Ok(Ideals { words, bits, level_start })
    }

    /// Number of ideals.
    pub fn len(&self) -> usize {
        *self.level_start.last().expect("at least the empty ideal")
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// The bitset of ideal `i`.
    pub fn get(&self, i: usize) -> &[u64] {
        &self.bits[i * self.words..(i + 1) * self.words]
    }

    /// Level (number of groups) of ideal `i`.
    pub fn level_of(&self, i: usize) -> usize {
        self.level_start.partition_point(|&s| s <= i) - 1
    }
}

/// `a ⊆ b` for bitsets of equal length.
#[inline]
pub fn is_subset(a: &[u64], b: &[u64]) -> bool {
    a.iter().zip(b).all(|(x, y)| x & !y == 0)
}

/// Whether group `g` is in bitset `s`.
#[inline]
pub fn contains(s: &[u64], g: usize) -> bool {
    s[g / 64] >> (g % 64) & 1 == 1
}

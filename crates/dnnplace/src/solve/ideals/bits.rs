//! Trimmed bitsets: an ideal as its run of leading full words, its middle words, and
//! implicit trailing zeros.
//!
//! An ideal `I` of a DAG numbered in topological order holds every group below its first
//! hole `h(I) = min(V \ I)` and none above its largest group `t(I) = max I`. Only the words
//! between `⌊h/64⌋` and `⌊t/64⌋` carry information, so an ideal is stored as
//! `(base, words)`: every word below `base` is all ones, `words` are the words
//! `base, base + 1, …`, and every word after them is zero. Normalised form: the first
//! stored word is not all ones and the last is not zero (so `base = ⌊h/64⌋` and the empty
//! ideal and every prefix `{0, …, 64·b − 1}` store no word at all).
//!
//! On chain-like graphs `t − h` is bounded by the width of the graph, so an ideal costs
//! O(1 + (t − h)/64) words instead of ⌈n/64⌉, and the tests below cost the same.
//!
//! Complexity (s = stored words): [`IdealBits::contains`] O(1); [`IdealBits::is_subset_of`]
//! O(s_J) for `J.is_subset_of(I)`; [`IdealBits::difference`] O(s_I + groups returned).

/// A borrowed trimmed bitset (module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdealBits<'a> {
    /// Words below `base` are all ones.
    pub base: usize,
    /// Words `base, base + 1, …`; later words are zero.
    pub words: &'a [u64],
}

impl<'a> IdealBits<'a> {
    /// The empty set.
    pub const EMPTY: IdealBits<'static> = IdealBits {
        base: 0,
        words: &[],
    };

    /// Whether group `g` is in the set.
    #[inline]
    pub fn contains(&self, g: usize) -> bool {
        let w = g / 64;
        if w < self.base {
            return true;
        }
        self.words
            .get(w - self.base)
            .is_some_and(|x| x >> (g % 64) & 1 == 1)
    }

    /// One past the index of the last word that may be non-zero.
    #[inline]
    pub fn end(&self) -> usize {
        self.base + self.words.len()
    }

    /// The word at index `w` (all ones below `base`, zero after the stored words).
    #[inline]
    pub fn word(&self, w: usize) -> u64 {
        if w < self.base {
            !0
        } else {
            self.words.get(w - self.base).copied().unwrap_or(0)
        }
    }

    /// `self ⊆ other`, both normalised.
    #[inline]
    pub fn is_subset_of(&self, other: &IdealBits) -> bool {
        // A full word of `self` needs a full word of `other`, and a non-zero word of `self`
        // a non-zero word of `other`: normalised, both follow from the two comparisons.
        if self.base > other.base || self.end() > other.end() {
            return false;
        }
        (other.base..self.end()).all(|w| self.word(w) & !other.words[w - other.base] == 0)
    }

    /// The groups of `self \ other`, in increasing order.
    pub fn difference(&self, other: &IdealBits) -> Vec<usize> {
        let mut out = Vec::new();
        for w in other.base..self.end() {
            let mut x = self.word(w) & !other.word(w);
            while x != 0 {
                out.push(w * 64 + x.trailing_zeros() as usize);
                x &= x - 1;
            }
        }
        out
    }

    /// One past the set's largest group (0 for the empty set); normalised.
    pub fn hi(&self) -> usize {
        match self.words.last() {
            Some(&w) => (self.end() - 1) * 64 + 64 - w.leading_zeros() as usize,
            None => 64 * self.base,
        }
    }

    /// Every group of the set, in increasing order.
    pub fn groups(&self) -> Vec<usize> {
        self.difference(&IdealBits::EMPTY)
    }
}

/// Appends to `out` the stored words of `bits ∪ {g}` for a group `g` above every group of
/// `bits`, and returns its base. O(stored words).
pub fn push_with(bits: IdealBits, g: usize, out: &mut Vec<u64>) -> usize {
    let top = g / 64;
    debug_assert!(
        top >= bits.base && top + 1 >= bits.end(),
        "g is above every group of the set"
    );
    let start = out.len();
    out.extend_from_slice(bits.words);
    out.resize(start + top + 1 - bits.base, 0);
    out[start + top - bits.base] |= 1 << (g % 64);
    // Only the first word can have become full, and then it is the only one (g is the
    // largest group): drop it.
    let mut base = bits.base;
    if out[start] == !0 {
        debug_assert_eq!(out.len(), start + 1);
        out.truncate(start);
        base += 1;
    }
    base
}

/// The normalised (base, words) of a plain bitset of ⌈n/64⌉ words.
pub fn trim(full: &[u64]) -> (usize, &[u64]) {
    let base = full.iter().take_while(|&&x| x == !0).count();
    let end = full
        .iter()
        .rposition(|&x| x != 0)
        .map_or(0, |e| e + 1)
        .max(base);
    (base, &full[base..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_groups(groups: &[usize], n: usize) -> Vec<u64> {
        let mut full = vec![0u64; n.div_ceil(64).max(1)];
        for &g in groups {
            full[g / 64] |= 1 << (g % 64);
        }
        full
    }

    /// Random sets against plain bitsets: membership, subset and difference agree.
    #[test]
    fn trimmed_sets_agree_with_plain_bitsets() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..2000 {
            let n = 1 + (next() % 300) as usize;
            // Prefix-heavy sets, like ideals: everything below a cut, some groups above.
            let draw = |next: &mut dyn FnMut() -> u64| {
                let cut = (next() % (n as u64 + 1)) as usize;
                let extra = (next() % 6) as usize;
                let mut g: Vec<usize> = (0..cut).collect();
                for _ in 0..extra {
                    g.push((next() % n as u64) as usize);
                }
                g.sort_unstable();
                g.dedup();
                g
            };
            let (a, b) = (draw(&mut next), draw(&mut next));
            let (fa, fb) = (from_groups(&a, n), from_groups(&b, n));
            let (ba, wa) = trim(&fa);
            let (bb, wb) = trim(&fb);
            let (ta, tb) = (
                IdealBits {
                    base: ba,
                    words: wa,
                },
                IdealBits {
                    base: bb,
                    words: wb,
                },
            );
            for g in 0..n {
                assert_eq!(ta.contains(g), a.contains(&g));
            }
            let subset = a.iter().all(|g| b.contains(g));
            assert_eq!(ta.is_subset_of(&tb), subset, "{a:?} ⊆ {b:?}");
            let diff: Vec<usize> = a.iter().copied().filter(|g| !b.contains(g)).collect();
            assert_eq!(ta.difference(&tb), diff);
            assert_eq!(ta.groups(), a);
            assert_eq!(ta.hi(), a.last().map_or(0, |&t| t + 1), "{a:?}");
            // push_with: add a group above the largest one.
            let top = a.last().map_or(0, |&t| t + 1);
            if top < n {
                let mut out = Vec::new();
                let base = push_with(ta, top, &mut out);
                let mut grown = a.clone();
                grown.push(top);
                let fg = from_groups(&grown, n);
                assert_eq!((base, out.as_slice()), trim(&fg));
            }
        }
    }
}

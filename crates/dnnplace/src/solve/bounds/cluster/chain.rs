//! The chain bound: a lower bound on the TPS of every *contiguous* plan on a cluster, from
//! the order in which its stages must take the work.
//!
//! The volume and set bounds hold for every plan, so they let a device class take exactly
//! the groups it runs fastest (an H100 all the matrix products, a V100 the element-wise
//! work). A contiguous plan cannot: its stages are differences `I_i \ I_{i−1}` of a chain
//! of ideals, so on a layered model every stage takes whole layers, each with the layer's
//! mix of operators, and specialises only where it starts and ends. This bound keeps that.
//!
//! **Windows.** Take the groups' topological numbering `0..n` and its prefixes
//! `P_l = {0..l−1}`. An ideal `I` lies between `P_{lo(I)} ⊆ I ⊆ P_{hi(I)}` (the largest
//! prefix inside it and the smallest around it). If `lo(I) = l`, `I` misses group `l`,
//! hence all its descendants, so `hi(I) ≤ R(l) = 1 + max{v : v not a descendant of l}`
//! (`R(n) = n`). Let `R̂(l) = max_{l' ≤ l} R(l')`, non-decreasing, `R̂(l) ≥ l`.
//!
//! **Relaxation.** In a plan `∅ = I_0 ⊂ I_1 ⊂ … ⊂ I_r = V` with `lo_i = lo(I_i)`, stage `i`
//! contains `P_{lo_i} \ P_{hi_{i−1}} ⊇ P_{lo_i} \ P_{h_{i−1}}` with `h_0 = 0` and
//! `h_i = R̂(lo_i)` (`hi_{i−1} ≤ R̂(lo_{i−1})`). Its load is at least its compute, at least
//! that of this *charged interval* on its device, and its memory is at least the
//! interval's bytes; an accelerator cannot hold a CPU-only group of it. So the optimum is
//! at least the least `τ` for which the devices, one stage each in some order, can charge
//! intervals `(h_{i−1}, a_i]` of load `≤ τ` (memory and support respected) with
//! `h_i = R̂(a_i)` and `a_r = n`: communication, machines and the windows
//! `(a_i, R̂(a_i)]` are left out (relaxed).
//!
//! **Deciding `τ`.** Let `T[u]` be the earliest start `h` from which the devices of usage
//! vector `u` (per class) can charge the rest of the line at `τ`. A device of class `c`
//! charging `(h, a]` is best given the farthest `a` (an interval's charge only shrinks as
//! its start moves right, and `R̂` is non-decreasing), so, with `back_c(e)` the earliest `h`
//! whose interval `(h, e]` class `c` can take (binary search on prefix sums) and
//! `a_min(s) = min{a : R̂(a) ≥ s}`,
//!
//! ```text
//! T[0] = n + 1 (a stage is still needed),
//! T[u] = min over c with u_c ≥ 1 of min( T[u − e_c], back_c(n), back_c(a_min(T[u − e_c])) )
//! ```
//!
//! (the device unused, the last stage, or a stage followed by the others). `τ` is feasible
//! iff `T[all devices] = 0`. The bound is the largest `τ` found infeasible by bisection
//! (relative width `1e-12`), scaled down by `1e-12` for the scorer's plain sums. The
//! cluster DP's tail test reads the same table at its bound ([`crate::solve::cluster::dp`]).
//!
//! **Rounding.** The relaxation stays one only if an interval is never judged over `τ` or
//! over a memory when it is not. Plain prefix differences fail that: they lose `u` of the
//! prefix, so after 4.8e14 bytes a group of 1.5e-7 bytes came out as 0.0625 bytes, over a
//! 6.2e-4-byte memory, and the tail test cut the optimum 7.0005 of
//! `tests/oracles_wide_magnitudes.rs` seed 867203293147939067 (the DP proved 2475716.29,
//! and this bound said the same). So prefixes are [`Sum`]s and an interval's charge and
//! bytes are [`Sum::difference_lower_bound`]s: at most the exact sums, whatever the
//! cancellation. A memory is compared with [`MEMORY_SLACK`] added, for the plain sums of
//! the scorer and the DP's certified stage sums (a plan they call fitting may exceed it in
//! exact arithmetic by that much). With every test on the safe side, `back_c(e)` is at
//! most its exact value (the test holds from the exact `h*` to `e`, and the bisection
//! keeps a failing `lo`), hence so is every `T[u]`: the relaxation holds.
//!
//! **Cost.** `R` by bit-parallel reachability, 64 sources per pass over the arcs:
//! O(n/64 · (n + m)) word operations; each table O(|U| · C · log n) for the
//! `|U| = Π_c (n_c + 1)` usage vectors of `C` classes (device counts clamped to `n`). Above
//! [`MAX_USAGE_VECTORS`] vectors, or past the time given, no bound (0).

use crate::model::contraction::Contraction;
use crate::model::numerics::Sum;
use crate::model::{ClusterCosts, Workload};
use crate::solve::budget::Budget;

/// Usage vectors above this make the bound too slow to be worth it: it returns 0.
pub const MAX_USAGE_VECTORS: usize = 2_000_000;

/// Relative slack on a memory (module documentation, "Rounding"): the scorer's plain sum
/// of `k` sizes is within `(k − 1)u` of the exact sum, below `1e-9` for `k < 9·10⁶`.
const MEMORY_SLACK: f64 = 1e-9;

/// One device class: an accelerator type or the CPU cores.
pub(crate) struct Class {
    /// Devices of the class (clamped to the groups).
    pub count: usize,
    /// Bytes a device holds (∞ for CPU cores).
    pub memory: f64,
    pub cpu: bool,
    /// The groups' times on the class (0 where an accelerator may not run the group).
    pub times: Vec<f64>,
}

/// The relaxed chain (module documentation) over a topological numbering of groups.
pub(crate) struct Chain {
    n: usize,
    /// `R̂(l)`, `l = 0..=n`.
    windows: Vec<usize>,
    bytes: Vec<Sum>,
    unsupported: Vec<u32>,
    /// The classes with devices, with compensated prefix sums of their times, and their
    /// positions in the list given to [`Chain::new`].
    classes: Vec<(Class, Vec<Sum>)>,
    given: Vec<usize>,
    /// Stride of each class's digit in a usage vector's mixed-radix index.
    stride: Vec<usize>,
    vectors: usize,
}

impl Chain {
    /// The chain of groups with `sizes` and `supported` (on accelerators), `windows` = `R̂`;
    /// `None` when the usage vectors are more than `max_vectors` (or there is no class).
    pub(crate) fn new(
        classes: Vec<Class>,
        sizes: impl IntoIterator<Item = f64>,
        supported: impl IntoIterator<Item = bool>,
        windows: Vec<usize>,
        max_vectors: usize,
    ) -> Option<Chain> {
        let (given, classes): (Vec<usize>, Vec<(Class, Vec<Sum>)>) = classes
            .into_iter()
            .enumerate()
            .filter(|(_, k)| k.count > 0)
            .map(|(c, k)| {
                let sums = prefix_sums(k.times.iter().copied());
                (c, (k, sums))
            })
            .unzip();
        let mut stride = Vec::with_capacity(classes.len());
        let mut vectors = 1usize;
        for (k, _) in &classes {
            stride.push(vectors);
            vectors = vectors.checked_mul(k.count + 1)?;
        }
        if classes.is_empty() || vectors > max_vectors {
            return None;
        }
        let unsupported: Vec<u32> = std::iter::once(0)
            .chain(supported.into_iter().scan(0u32, |s, ok| {
                *s += u32::from(!ok);
                Some(*s)
            }))
            .collect();
        Some(Chain {
            n: windows.len() - 1,
            windows,
            bytes: prefix_sums(sizes),
            unsupported,
            classes,
            given,
            stride,
            vectors,
        })
    }

    /// The index of the usage vector with `free(c)` devices of class `c` (numbered as given
    /// to [`Chain::new`]; clamped to the class's count).
    pub(crate) fn index(&self, free: impl Fn(usize) -> usize) -> usize {
        self.classes
            .iter()
            .zip(&self.given)
            .zip(&self.stride)
            .map(|(((k, _), &c), stride)| free(c).min(k.count) * stride)
            .sum()
    }

    /// `T[u]` for every usage vector at `τ` (module documentation); `None` when the budget
    /// ran out. With `stop_at_zero` the table ends at the first `T[u] = 0` (then
    /// `T[all devices] = 0`: `T` only falls as `u` grows).
    pub(crate) fn earliest_starts(
        &self,
        tau: f64,
        budget: &Budget,
        stop_at_zero: bool,
    ) -> Option<Vec<u32>> {
        let n = self.n;
        // Certainly true when the exact interval fits (module documentation, "Rounding").
        let fits = |(k, time): &(Class, Vec<Sum>), h: usize, e: usize| {
            time[e].difference_lower_bound(time[h]) <= tau
                && (k.memory.is_infinite()
                    || self.bytes[e].difference_lower_bound(self.bytes[h])
                        <= k.memory * (1.0 + MEMORY_SLACK))
                && (k.cpu || self.unsupported[e] == self.unsupported[h])
        };
        // The exact test holds for `h` in some `[h*, e]` (charges, bytes and CPU-only groups
        // only grow as the start moves left), so `fits` holds there too and the search,
        // which keeps `fits(lo)` false, ends at most at `h*`.
        let back = |k: &(Class, Vec<Sum>), e: usize| {
            if fits(k, 0, e) {
                return 0;
            }
            let (mut lo, mut hi) = (0usize, e);
            while hi - lo > 1 {
                let mid = (lo + hi) / 2;
                if fits(k, mid, e) {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            hi
        };
        let mut start = vec![n as u32 + 1; self.vectors];
        let mut digits = vec![0usize; self.classes.len()];
        for u in 1..self.vectors {
            if u % 4096 == 0 && budget.is_exhausted() {
                return None;
            }
            for (d, (k, _)) in digits.iter_mut().zip(&self.classes) {
                if *d < k.count {
                    *d += 1;
                    break;
                }
                *d = 0;
            }
            let mut best = n + 1;
            for (c, k) in self.classes.iter().enumerate() {
                if digits[c] == 0 {
                    continue;
                }
                let from = start[u - self.stride[c]] as usize;
                best = best.min(from).min(back(k, n));
                let a = self.windows.partition_point(|&x| x < from);
                if a <= n {
                    best = best.min(back(k, a));
                }
            }
            start[u] = best as u32;
            if stop_at_zero && best == 0 {
                start.truncate(u + 1);
                break;
            }
        }
        Some(start)
    }
}

/// The chain bound of `w` on its cluster, or 0 when the run stops (`budget`) or the usage
/// vectors are too many.
pub fn chain_bound(w: &Workload, costs: &ClusterCosts, budget: &Budget) -> f64 {
    let c = Contraction::new(w);
    let n = c.len();
    if n == 0 {
        return 0.0;
    }
    let Some(windows) = windows(&c, budget) else {
        return 0.0;
    };
    let cluster = costs.cluster();
    let mut classes: Vec<Class> = Vec::new();
    for (t, ty) in cluster.types().iter().enumerate() {
        let times = costs.times_of_type(t);
        classes.push(Class {
            count: cluster.count_of_type(t).min(n),
            memory: ty.memory_bytes,
            cpu: false,
            times: c
                .groups
                .iter()
                .map(|g| match g.supported_on_accelerator {
                    true => g.nodes.iter().map(|&v| times[v]).sum(),
                    false => 0.0,
                })
                .collect(),
        });
    }
    classes.push(Class {
        count: cluster.cpu_machines().len().min(n),
        memory: f64::INFINITY,
        cpu: true,
        times: c.groups.iter().map(|g| g.cpu_latency).collect(),
    });
    let Some(chain) = Chain::new(
        classes,
        c.groups.iter().map(|g| g.size_bytes),
        c.groups.iter().map(|g| g.supported_on_accelerator),
        windows,
        MAX_USAGE_VECTORS,
    ) else {
        return 0.0;
    };
    let feasible = |tau: f64| {
        chain
            .earliest_starts(tau, budget, true)
            .map(|start| start.last() == Some(&0))
    };
    // Every device taking at most the slowest class's total: an upper end when memory lets
    // the devices hold the groups at all.
    let mut hi: f64 = chain
        .classes
        .iter()
        .map(|(_, time)| time[n].value())
        .filter(|x| x.is_finite())
        .fold(0.0, f64::max)
        * chain.classes.iter().map(|(k, _)| k.count).sum::<usize>() as f64;
    hi = hi.max(1e-300);
    if feasible(hi) != Some(true) {
        return 0.0;
    }
    let mut lo = 0.0;
    while hi - lo > 1e-12 * hi {
        let mid = 0.5 * (lo + hi);
        match feasible(mid) {
            Some(true) => hi = mid,
            Some(false) => lo = mid,
            None => break,
        }
    }
    lo * (1.0 - 1e-12)
}

/// `R̂(l)` for `l = 0..=n` (module documentation), or `None` when the budget ran out.
pub(crate) fn windows(c: &Contraction, budget: &Budget) -> Option<Vec<usize>> {
    let n = c.len();
    // last_out[u] = 1 + the largest group that is not u nor a descendant of u.
    let mut last_out = vec![0usize; n];
    let mut mask = vec![0u64; n];
    for first in (0..n).step_by(64) {
        if budget.is_exhausted() {
            return None;
        }
        let width = (n - first).min(64);
        mask[first..].iter_mut().for_each(|m| *m = 0);
        for b in 0..width {
            mask[first + b] |= 1 << b;
        }
        for v in first..n {
            let m = mask[v];
            if m != 0 {
                for &s in &c.succ[v] {
                    mask[s] |= m;
                }
            }
        }
        let full = if width == 64 {
            u64::MAX
        } else {
            (1u64 << width) - 1
        };
        // Scanning down from the last group, a source's bit missing for the first time
        // names its largest non-descendant.
        let mut all = full;
        for v in (first..n).rev() {
            let lost = all & !mask[v];
            if lost != 0 {
                let mut bits = lost;
                while bits != 0 {
                    let b = bits.trailing_zeros() as usize;
                    last_out[first + b] = v + 1;
                    bits &= bits - 1;
                }
                all &= mask[v];
                if all == 0 {
                    break;
                }
            }
        }
        // A source whose every later group descends from it: the groups before it only.
        let mut bits = all;
        while bits != 0 {
            let b = bits.trailing_zeros() as usize;
            last_out[first + b] = first + b;
            bits &= bits - 1;
        }
    }
    let mut r = Vec::with_capacity(n + 1);
    let mut running = 0;
    for (l, &out) in last_out.iter().enumerate() {
        running = running.max(out).max(l);
        r.push(running);
    }
    r.push(n);
    Some(r)
}

/// Compensated prefix sums with their error bounds ([`Sum`]): `s[i] = Σ_{j<i} x[j]`.
pub(crate) fn prefix_sums(x: impl IntoIterator<Item = f64>) -> Vec<Sum> {
    let mut out = vec![Sum::ZERO];
    for v in x {
        let last = *out.last().expect("starts with zero");
        out.push(last.plus(v));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_sums_add_up() {
        let s = prefix_sums([1e16, 1.0, -1e16, 2.0]);
        let values: Vec<f64> = s.iter().map(|x| x.value()).collect();
        assert_eq!(values, vec![0.0, 1e16, 1e16 + 1.0, 1.0, 3.0]);
    }
}

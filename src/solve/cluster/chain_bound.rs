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
//! **Deciding `τ`.** From a start `h`, a device of class `c` best charges the farthest `a`
//! it can (the charge of an interval only shrinks as its start moves right, and `R̂` is
//! non-decreasing), found by binary search on prefix sums. With `u` the devices used per
//! class, `reach(u) = max_c R̂(far_c(reach(u − e_c)))` from `reach(0) = 0`; `τ` is feasible
//! iff some `far_c` reaches `n`. The bound is the largest `τ` found infeasible by
//! bisection (relative width `1e-12`), scaled down by `1e-12` for the prefix sums'
//! rounding (they are compensated sums).
//!
//! **Cost.** `R` by bit-parallel reachability, 64 sources per pass over the arcs:
//! O(n/64 · (n + m)) word operations; each test of `τ` O(|U| · C · log n) for the
//! `|U| = Π_c (n_c + 1)` usage vectors of `C` classes (device counts clamped to `n`). Above
//! [`MAX_USAGE_VECTORS`] vectors, or past the time given, no bound (0).

use crate::model::contraction::Contraction;
use crate::model::{ClusterCosts, Workload};
use crate::solve::budget::Budget;

/// Usage vectors above this make the bound too slow to be worth it: it returns 0.
pub const MAX_USAGE_VECTORS: usize = 2_000_000;

/// One device class: an accelerator type or the CPU cores.
struct Class {
    count: usize,
    memory: f64,
    cpu: bool,
    /// Compensated prefix sums of the groups' times on the class.
    time: Vec<f64>,
}

/// The chain bound of `w` on its cluster, or 0 when the run stops (`budget`) or the usage
/// vectors are too many.
pub fn chain_bound(w: &Workload, costs: &ClusterCosts, budget: &Budget) -> f64 {
    let c = Contraction::new(w);
    let n = c.len();
    if n == 0 {
        return 0.0;
    }
    let Some(reach_end) = windows(&c, budget) else {
        return 0.0;
    };
    let cluster = costs.cluster();
    let mut classes: Vec<Class> = Vec::new();
    for (t, ty) in cluster.types().iter().enumerate() {
        let times = costs.times_of_type(t);
        let per_group: Vec<f64> = c
            .groups
            .iter()
            .map(|g| match g.supported_on_accelerator {
                true => g.nodes.iter().map(|&v| times[v]).sum(),
                false => 0.0,
            })
            .collect();
        classes.push(Class {
            count: cluster.count_of_type(t).min(n),
            memory: ty.memory_bytes,
            cpu: false,
            time: prefix_sums(per_group),
        });
    }
    let cpus = cluster.cpu_machines().len();
    if cpus > 0 {
        let per_group: Vec<f64> = c.groups.iter().map(|g| g.cpu_latency).collect();
        classes.push(Class {
            count: cpus.min(n),
            memory: f64::INFINITY,
            cpu: true,
            time: prefix_sums(per_group),
        });
    }
    classes.retain(|k| k.count > 0);
    let vectors = classes
        .iter()
        .try_fold(1usize, |acc, k| acc.checked_mul(k.count + 1));
    if classes.is_empty() || vectors.is_none_or(|v| v > MAX_USAGE_VECTORS) {
        return 0.0;
    }
    let bytes = prefix_sums(c.groups.iter().map(|g| g.size_bytes));
    let unsupported: Vec<u32> = std::iter::once(0)
        .chain(c.groups.iter().scan(0u32, |s, g| {
            *s += u32::from(!g.supported_on_accelerator);
            Some(*s)
        }))
        .collect();
    let line = Line {
        n,
        reach_end,
        bytes,
        unsupported,
        classes,
    };
    // The fastest class holding everything in one stage is an upper end when it fits; else
    // every group at its slowest on every device.
    let mut hi: f64 = line
        .classes
        .iter()
        .map(|k| k.time[n])
        .filter(|x| x.is_finite())
        .fold(0.0, f64::max)
        * line.classes.iter().map(|k| k.count).sum::<usize>() as f64;
    hi = hi.max(1e-300);
    if line.feasible(hi, budget) != Some(true) {
        return 0.0;
    }
    let mut lo = 0.0;
    while hi - lo > 1e-12 * hi {
        let mid = 0.5 * (lo + hi);
        match line.feasible(mid, budget) {
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

/// Neumaier-compensated prefix sums: `s[i] = Σ_{j<i} x[j]`.
pub(crate) fn prefix_sums(x: impl IntoIterator<Item = f64>) -> Vec<f64> {
    let (mut sum, mut comp) = (0.0f64, 0.0f64);
    let mut out = vec![0.0];
    for v in x {
        let t = sum + v;
        comp += if sum.abs() >= v.abs() {
            (sum - t) + v
        } else {
            (v - t) + sum
        };
        sum = t;
        out.push(sum + comp);
    }
    out
}

/// The relaxed chain (module documentation).
struct Line {
    n: usize,
    /// `R̂(l)`, `l = 0..=n`.
    reach_end: Vec<usize>,
    bytes: Vec<f64>,
    unsupported: Vec<u32>,
    classes: Vec<Class>,
}

impl Line {
    /// The farthest `a ≥ h` a device of class `k` can charge `(h, a]` with load `≤ τ`.
    fn far(&self, k: &Class, h: usize, tau: f64) -> usize {
        // Charges only grow with `a`, and so do bytes and CPU-only groups: the condition
        // holds on a prefix of `h..=n`.
        let ok = |a: usize| {
            k.time[a] - k.time[h] <= tau
                && self.bytes[a] - self.bytes[h] <= k.memory
                && (k.cpu || self.unsupported[a] == self.unsupported[h])
        };
        let (mut lo, mut hi) = (h, self.n + 1);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if ok(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Whether the devices can charge the whole line at `τ`; `None` when the budget ran out.
    fn feasible(&self, tau: f64, budget: &Budget) -> Option<bool> {
        let counts: Vec<usize> = self.classes.iter().map(|k| k.count).collect();
        let total: usize = counts.iter().map(|c| c + 1).product();
        // Mixed-radix index of a usage vector; vectors in increasing index order have every
        // `u − e_c` before `u`.
        let mut stride = vec![1usize; counts.len()];
        for c in 1..counts.len() {
            stride[c] = stride[c - 1] * (counts[c - 1] + 1);
        }
        let mut reach = vec![usize::MAX; total];
        reach[0] = 0;
        let mut digits = vec![0usize; counts.len()];
        for u in 0..total {
            if u % 4096 == 0 && budget.is_exhausted() {
                return None;
            }
            if u > 0 {
                let mut best = usize::MAX;
                for (c, k) in self.classes.iter().enumerate() {
                    if digits[c] == 0 {
                        continue;
                    }
                    let from = reach[u - stride[c]];
                    if from == usize::MAX {
                        continue;
                    }
                    let a = self.far(k, from, tau);
                    if a == self.n {
                        return Some(true);
                    }
                    let next = self.reach_end[a];
                    if best == usize::MAX || next > best {
                        best = next;
                    }
                }
                reach[u] = best;
            }
            for (c, d) in digits.iter_mut().enumerate() {
                if *d < counts[c] {
                    *d += 1;
                    break;
                }
                *d = 0;
            }
        }
        Some(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_sums_add_up() {
        let s = prefix_sums([1e16, 1.0, -1e16, 2.0]);
        assert_eq!(s, vec![0.0, 1e16, 1e16 + 1.0, 1.0, 3.0]);
    }
}

//! Optimal split of one topological order of the groups into consecutive stages.
//!
//! Every prefix `P_t = {o_0, …, o_{t−1}}` of a topological order `o` is an ideal, so a
//! split of the sequence into consecutive stages `[i, j)`, each on its own device, is a
//! contiguous split. Its optimum is the DP of [`crate::solve::dp`] restricted to the
//! family of prefixes ([`Prefixes`]): with `acc(i, j)` the accelerator load of
//! `P_j \ P_i` (∞ if it does not fit) and `cpu(i, j)` its CPU time,
//!
//! `f[l][k][j] = min( f[l][k−1][j], f[l−1][k][j],
//!                    min_{i<j} max(f[l][k−1][i], acc(i, j)),
//!                    min_{i<j} max(f[l−1][k][i], cpu(i, j)) )`, `f[·][·][0] = 0`.
//!
//! It is the PipeDream-style planner and the DP's upper bound. Three steps keep it near
//! linear on long graphs:
//! 1. prefix summaries are built incrementally along the order ([`Summaries::push_extended`]),
//!    O(n · φ) for frontier width φ;
//! 2. a first bound `U₀` from a greedy split (each stage as far as it stays within `U`,
//!    on an accelerator or a CPU, whichever reaches further), bisected on `U`: O(n · φ)
//!    per probe, ~50 probes. The greedy is not optimal (loads are not monotone in the
//!    stage end), but every probe that succeeds is a real split, so `U₀` is achievable;
//! 3. the exact recurrence, pruned with `U₀` by the rules of [`crate::solve::dp::pruning`]:
//!    a stage with more compute than `U₀` is never priced, so each prefix looks at the
//!    O(n/k) prefixes within `U₀` of compute and only in its live states.
//!
//! Complexity: O(n · φ · log(1/ε)) for the bound, then O(Σ_j W_j · (φ + (k+1)(ℓ+1))) with
//! W_j ≤ n the prefixes left in the window of `P_j` (about n/k); [`split_chain`], the plain
//! recurrence over all pairs, is O(n² · (k+1)(ℓ+1)) and kept as the reference.

use super::pruning::{Pruning, Windows};
use super::reconstruct;
use super::relax::{Prefixes, Relaxation};
use crate::model::contraction::Contraction;
use crate::model::{Device, Placement};
use crate::solve::budget::{Budget, Exhausted};
use crate::solve::ideal_cost::{PairCost, Summaries};

/// Device kind of a stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StageDevice {
    Accelerator,
    Cpu,
}

/// An optimal split: its max stage cost and the stages `[start, end)` with their device kind.
#[derive(Clone, Debug)]
pub struct ChainSplit {
    pub objective: f64,
    pub stages: Vec<(usize, usize, StageDevice)>,
}

/// Splits positions `0..n` into at most `accelerators` accelerator stages and `cpus` CPU
/// stages, minimising the largest stage cost, by the plain recurrence over all pairs
/// (O(n² · (k+1)(ℓ+1)); the reference for [`best_chain_split`]). `None` when no split fits.
///
/// Stages are nonempty, so more than n of a kind is the same as n: both counts are
/// clamped to n. The table's (n+1)(k+1)(ℓ+1) entries are counted with checked
/// arithmetic; a table beyond `usize` (n past about 2.6 million with k = ℓ = n) could
/// never be allocated, and is `None` as well.
pub fn split_chain(
    n: usize,
    accelerators: usize,
    cpus: usize,
    acc: impl Fn(usize, usize) -> Option<f64>,
    cpu: impl Fn(usize, usize) -> f64,
) -> Option<ChainSplit> {
    let (accelerators, cpus) = (accelerators.min(n), cpus.min(n));
    let (k1, s) = (accelerators + 1, (accelerators + 1).checked_mul(cpus + 1)?);
    let mut f = vec![f64::INFINITY; (n + 1).checked_mul(s)?];
    // back: 0 = fewer acc, 1 = fewer cpu, 2 = acc stage from i, 3 = cpu stage from i.
    let mut back = vec![(0u8, 0usize); (n + 1) * s];
    f[..s].iter_mut().for_each(|x| *x = 0.0);
    for j in 1..=n {
        for i in 0..j {
            let a = if accelerators > 0 { acc(i, j) } else { None };
            let c = if cpus > 0 { Some(cpu(i, j)) } else { None };
            for l in 0..=cpus {
                for k in 0..=accelerators {
                    let st = l * k1 + k;
                    if let (Some(a), true) = (a, k > 0) {
                        let v = f[i * s + st - 1].max(a);
                        if v < f[j * s + st] {
                            f[j * s + st] = v;
                            back[j * s + st] = (2, i);
                        }
                    }
                    if let (Some(c), true) = (c, l > 0) {
                        let v = f[i * s + st - k1].max(c);
                        if v < f[j * s + st] {
                            f[j * s + st] = v;
                            back[j * s + st] = (3, i);
                        }
                    }
                }
            }
        }
        for l in 0..=cpus {
            for k in 0..=accelerators {
                let st = l * k1 + k;
                if k > 0 && f[j * s + st - 1] < f[j * s + st] {
                    f[j * s + st] = f[j * s + st - 1];
                    back[j * s + st] = (0, j);
                }
                if l > 0 && f[j * s + st - k1] < f[j * s + st] {
                    f[j * s + st] = f[j * s + st - k1];
                    back[j * s + st] = (1, j);
                }
            }
        }
    }
    let objective = f[n * s + s - 1];
    if !objective.is_finite() {
        return None;
    }
    let mut stages = Vec::new();
    let (mut j, mut l, mut k) = (n, cpus, accelerators);
    while j > 0 {
        let (kind, i) = back[j * s + l * k1 + k];
        match kind {
            0 => k -= 1,
            1 => l -= 1,
            2 => {
                stages.push((i, j, StageDevice::Accelerator));
                k -= 1;
                j = i;
            }
            _ => {
                stages.push((i, j, StageDevice::Cpu));
                l -= 1;
                j = i;
            }
        }
    }
    stages.reverse();
    Some(ChainSplit { objective, stages })
}

/// The summaries of the prefixes of `order`. O(n · φ).
pub fn prefix_summaries(cost: &PairCost, order: &[usize]) -> Summaries {
    let mut s = Summaries::empty();
    for (t, &g) in order.iter().enumerate() {
        s.push_extended(cost, t, g);
    }
    s
}

/// The best chain split over two topological orders of the groups (index order, and a
/// depth-first order), as (max-load, placement). `None` if neither order has a split that
/// fits.
pub fn chain_upper_bound(
    c: &Contraction,
    cost: &PairCost,
    k: usize,
    l: usize,
    memory: f64,
    budget: &Budget,
) -> Result<Option<(f64, Placement)>, Exhausted> {
    let mut best: Option<(f64, Placement)> = None;
    let index_order: Vec<usize> = (0..c.len()).collect();
    let depth_first = depth_first_order(c);
    let orders = if depth_first == index_order {
        vec![index_order]
    } else {
        vec![index_order, depth_first]
    };
    for order in orders {
        if let Some(found) = best_chain_split_within(c, cost, &order, k, l, memory, budget)? {
            if best.as_ref().is_none_or(|(b, _)| found.0 < *b) {
                best = Some(found);
            }
        }
    }
    Ok(best)
}

/// Optimal split of one topological order of the groups into consecutive stages, as
/// (max-load, placement); `None` when no split fits.
pub fn best_chain_split(
    c: &Contraction,
    cost: &PairCost,
    order: &[usize],
    k: usize,
    l: usize,
    memory: f64,
) -> Option<(f64, Placement)> {
    best_chain_split_within(c, cost, order, k, l, memory, &Budget::unlimited()).unwrap_or(None)
}

/// [`best_chain_split`] within a time budget.
pub fn best_chain_split_within(
    c: &Contraction,
    cost: &PairCost,
    order: &[usize],
    k: usize,
    l: usize,
    memory: f64,
    budget: &Budget,
) -> Result<Option<(f64, Placement)>, Exhausted> {
    let n = order.len();
    let summaries = prefix_summaries(cost, order);
    let greedy = greedy_bound(cost, &summaries, order, k, l, memory);
    // Without a first bound nothing is pruned: only worth it on short orders.
    if greedy.is_none() && n > 4096 {
        return Ok(None);
    }
    let pruning = Pruning::new(c, greedy, summaries.heads[n].fpga.value(), k, l);
    let windows = Windows::new(&summaries.heads, l > 0);
    let family = Prefixes::new(order);
    let relaxation = Relaxation {
        family: &family,
        summaries: &summaries,
        cost,
        pruning: &pruning,
        windows: &windows,
        memory,
        positioned: None,
        forward: None,
    };
    let (table, _) = relaxation.run(budget).map_err(|(reason, _)| reason)?;
    let Some(stages) = reconstruct::stages(&table, n) else {
        return Ok(None);
    };
    let mut group_device = vec![Device::Cpu(0); c.len()];
    for stage in &stages {
        for &g in &order[stage.from..stage.ideal] {
            group_device[g] = stage.device;
        }
    }
    let placement = Placement::new(c.group_of.iter().map(|&g| group_device[g]).collect());
    Ok(Some((table.at(n, l, k), placement)))
}

/// The smallest value a greedy split of the prefixes reaches, bisected on the target
/// (module documentation, step 2); `None` when the greedy finds no split at all.
fn greedy_bound(
    cost: &PairCost,
    s: &Summaries,
    order: &[usize],
    k: usize,
    l: usize,
    memory: f64,
) -> Option<f64> {
    let mut hi = greedy_split(cost, s, order, k, l, memory, f64::INFINITY)?;
    let mut lo = 0.0;
    for _ in 0..64 {
        if hi - lo <= 1e-9 * hi {
            break;
        }
        let mid = 0.5 * (lo + hi);
        match greedy_split(cost, s, order, k, l, memory, mid) {
            Some(v) => hi = v,
            None => lo = mid,
        }
    }
    Some(hi)
}

/// A split of the prefixes whose stages stay within `target`: each stage goes as far as
/// an accelerator (load ≤ target, fits memory, no unsupported group) or a CPU (time ≤
/// target) can take it, the accelerator when it reaches at least as far. Returns its max
/// stage load, or `None` when it runs out of devices. The stage ends are found on the
/// rounded prefix sums; the loads returned are certified ([`PairCost::accelerator_load`]).
fn greedy_split(
    cost: &PairCost,
    s: &Summaries,
    order: &[usize],
    k: usize,
    l: usize,
    memory: f64,
    target: f64,
) -> Option<f64> {
    let n = s.len() - 1;
    let heads = &s.heads;
    let (mut i, mut acc, mut cpu, mut worst) = (0, k, l, 0.0f64);
    while i < n {
        let (mut ja, mut la) = (i, 0.0);
        if acc > 0 {
            for j in i + 1..=n {
                let (hj, hi) = (&heads[j], &heads[i]);
                if hj.fpga.value() - hi.fpga.value() > target
                    || hj.size.value() - hi.size.value() > memory
                    || hj.unsupported != hi.unsupported
                {
                    break;
                }
                if let Some(load) = cost.accelerator_load(s, j, i, memory, || order[i..j].to_vec())
                {
                    if load <= target {
                        (ja, la) = (j, load);
                    }
                }
            }
        }
        let jc = if cpu > 0 {
            heads.partition_point(|h| h.cpu.value() - heads[i].cpu.value() <= target) - 1
        } else {
            i
        };
        if acc > 0 && ja > i && (cpu == 0 || jc <= ja) {
            worst = worst.max(la);
            acc -= 1;
            i = ja;
        } else if cpu > 0 && jc > i {
            worst = worst.max(cost.cpu_load(s, jc, i, || order[i..jc].to_vec()));
            cpu -= 1;
            i = jc;
        } else {
            return None;
        }
    }
    Some(worst)
}

/// A topological order that follows one branch as deep as it goes before the next
/// (Kahn's algorithm with a stack).
pub fn depth_first_order(c: &Contraction) -> Vec<usize> {
    let mut indegree: Vec<usize> = c.pred.iter().map(Vec::len).collect();
    let mut stack: Vec<usize> = (0..c.len()).rev().filter(|&g| indegree[g] == 0).collect();
    let mut order = Vec::with_capacity(c.len());
    while let Some(g) = stack.pop() {
        order.push(g);
        for &h in c.succ[g].iter().rev() {
            indegree[h] -= 1;
            if indegree[h] == 0 {
                stack.push(h);
            }
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_a_chain_of_weights_evenly() {
        let w = [3.0, 1.0, 2.0, 2.0, 4.0];
        let prefix: Vec<f64> = std::iter::once(0.0)
            .chain(w.iter().scan(0.0, |s, x| {
                *s += x;
                Some(*s)
            }))
            .collect();
        let split = split_chain(
            5,
            3,
            0,
            |i, j| Some(prefix[j] - prefix[i]),
            |_, _| f64::INFINITY,
        )
        .unwrap();
        // [3,1] [2,2] [4] -> 4
        assert_eq!(split.objective, 4.0);
        assert_eq!(split.stages.len(), 3);
    }

    #[test]
    fn no_split_when_nothing_fits() {
        assert!(split_chain(2, 2, 0, |_, _| None, |_, _| 0.0).is_none());
    }

    #[test]
    fn device_counts_near_usize_max_are_the_same_as_n() {
        let cost = |i: usize, j: usize| Some((j - i) as f64);
        let huge =
            split_chain(3, usize::MAX, usize::MAX, cost, |i, j| 2.0 * (j - i) as f64).unwrap();
        let small = split_chain(3, 3, 3, cost, |i, j| 2.0 * (j - i) as f64).unwrap();
        assert_eq!((huge.objective, huge.stages.len()), (1.0, 3));
        assert_eq!(
            (huge.objective, &huge.stages),
            (small.objective, &small.stages)
        );
    }
}

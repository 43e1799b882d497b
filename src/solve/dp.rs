//! The contiguous max-load optimum by dynamic programming over the ideals of the group DAG
//! (Tarnawski et al., NeurIPS 2020, Section 3).
//!
//! A contiguous split is a chain of ideals `∅ = I_0 ⊂ … ⊂ I_r = V`, each difference on one
//! device. With `dp[l][k][I]` the least max-load of placing the ideal `I` on at most `k`
//! accelerators and `l` CPUs:
//!
//! ```text
//! dp[l][k][∅] = 0
//! dp[l][k][I] = min( dp[l][k−1][I], dp[l−1][k][I],
//!                    min_{J ⊊ I} max(dp[l][k−1][J], acc(I \ J)),
//!                    min_{J ⊊ I} max(dp[l−1][k][J], cpu(I \ J)) )
//! ```
//!
//! where `acc(S)` is the accelerator load of MODEL.md (∞ if `S` exceeds the memory or holds
//! an unsupported group) and `cpu(S) = Σ cpuLatency`. The answer is `dp[ℓ][k][V]`; backward
//! nodes ride with their groups, so training graphs need nothing more.
//!
//! Engineering (each keeps the optimum exact):
//! - ideals are bitsets; `acc(I \ J)` comes from per-ideal summaries in O(frontier)
//!   ([`super::ideal_cost`]);
//! - an upper bound `U` from the best chain split of two topological orders
//!   ([`super::chain`]) restricts `J` to `F(I) − U ≤ F(J) ≤ F(I)` (F = prefix compute),
//!   found by binary search in the ideals sorted by `F`: a stage with more compute than
//!   `U` cannot be in an optimal split;
//! - ideals of one level (same number of groups) depend only on lower levels and are
//!   relaxed in parallel (rayon).
//!
//! Complexity: O(|𝓘| · W · (w + φ) + |𝓘| · n · w) time for |𝓘| ideals, W ideals in the
//! window of each, w bitset words, φ the frontier width; O(|𝓘| · ((k+1)(ℓ+1) + w)) memory.

use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use super::chain::{split_chain, StageDevice};
use super::ideal_cost::{IdealSummary, PairCost};
use super::ideals::{contains, is_subset, Ideals};
use super::knapsack::FractionalKnapsack;
use super::leaf_folding::fold_free_leaves;
use super::{Limits, Method, Objective, Outcome, Problem, SolveError, Stats, Status};
use crate::model::contraction::Contraction;
use crate::model::{Device, Placement, Workload};

/// The ideal-lattice DP (`--method dp`).
pub struct Dp;

impl Method for Dp {
    fn id(&self) -> crate::solve::MethodId {
        crate::solve::MethodId::Dp
    }

    fn supports(&self, problem: &Problem) -> Result<(), String> {
        if problem.objective != Objective::Throughput {
            return Err(format!("the {} objective (use --method ip)", problem.objective.name()));
        }
        if !problem.contiguous {
            return Err("non-contiguous splits (use --method ip)".into());
        }
        Ok(())
    }

    fn solve(&self, problem: &Problem) -> Result<Outcome, SolveError> {
        solve(problem.workload, &problem.limits)
    }
}

const ACC: u8 = 1;
const CPU: u8 = 2;
const FEWER_ACC: u8 = 3;
const FEWER_CPU: u8 = 4;

/// Solves the contiguous max-load problem to optimality.
pub fn solve(w: &Workload, limits: &Limits) -> Result<Outcome, SolveError> {
    let start = std::time::Instant::now();
    let (c, folded) = fold_free_leaves(w, Contraction::new(w));
    let cost = PairCost::new(w, &c);
    let devices = w.devices();
    let (k, l, memory) = (devices.accelerators, devices.cpus, devices.memory_per_accelerator_bytes);

    let limit = limits.max_ideals.min(ideal_budget(c.len(), (k + 1) * (l + 1)));
    let ideals = Ideals::enumerate(&c, limit).map_err(|e| SolveError::TooManyIdeals { found: e.found, limit, requested: limits.max_ideals })?;
    let n_ideals = ideals.len();
    let summaries: Vec<IdealSummary> = (0..n_ideals).into_par_iter().map(|i| cost.summarize(ideals.get(i))).collect();

    let mut stats = Stats { ideals: Some(n_ideals), groups: Some(c.len()), ..Stats::default() };
    if folded > 0 {
        stats.notes.push(format!("{folded} zero-cost leaf groups folded into their neighbours"));
    }
    let upper = chain_upper_bound(&c, &cost, k, l, memory);
    if let Some((u, _)) = &upper {
        stats.notes.push(format!("upper bound from chain splits: {u}"));
    }
    let bound = upper.as_ref().map_or(f64::INFINITY, |(u, _)| u * (1.0 + 1e-9) + 1e-12);

    let (s, k1) = ((k + 1) * (l + 1), k + 1);
    let mut dp = vec![f64::INFINITY; n_ideals * s];
    let mut back = vec![(0u8, 0u32); n_ideals * s];
    dp[..s].iter_mut().for_each(|x| *x = 0.0);

    let sorted_by = |key: fn(&IdealSummary) -> f64| {
        let mut ids: Vec<u32> = (0..n_ideals as u32).collect();
        ids.sort_by(|&a, &b| key(&summaries[a as usize]).total_cmp(&key(&summaries[b as usize])));
        let keys: Vec<f64> = ids.iter().map(|&i| key(&summaries[i as usize])).collect();
        (ids, keys)
    };
    let (by_fpga, fpga_keys) = sorted_by(|s| s.fpga);
    let (by_cpu, cpu_keys) = if l > 0 { sorted_by(|s| s.cpu) } else { (Vec::new(), Vec::new()) };
    let window = |keys: &[f64], hi_key: f64| {
        let slack = 1e-9 * hi_key.abs().max(1.0);
        (keys.partition_point(|&x| x < hi_key - bound - slack), keys.partition_point(|&x| x <= hi_key + slack))
    };

    // Live states: (l', k') at I can lie on a split of value ≤ U only if the compute of I
    // fits k' accelerators and l' CPUs, and the rest fits the other devices. A CPU with load
    // ≤ U holds at most `cpu_absorb` = U · max_g fpga(g)/cpu(g) of accelerator compute.
    let total_fpga = summaries[n_ideals - 1].fpga;
    let absorb = CpuAbsorption::new(&c);
    let live = |fpga: f64, cl: usize| -> (usize, usize) {
        if !bound.is_finite() {
            return (0, k);
        }
        let slack = 1e-9 * total_fpga.max(1.0);
        let before = fpga - absorb.at(cl as f64 * bound) - slack;
        let after = total_fpga - fpga - absorb.at((l - cl) as f64 * bound) - slack;
        let lo = if before <= 0.0 { 0 } else { (before / bound).ceil() as usize };
        let hi = if after <= 0.0 { k } else { k.saturating_sub((after / bound).ceil() as usize) };
        if lo > hi || (after > 0.0 && (after / bound).ceil() as usize > k) {
            (1, 0)
        } else {
            (lo, hi)
        }
    };

    let pairs = AtomicU64::new(0);
    for level in 1..ideals.level_start.len() - 1 {
        let (lo, hi) = (ideals.level_start[level], ideals.level_start[level + 1]);
        let (done, rest) = dp.split_at_mut(lo * s);
        let rest_back = &mut back[lo * s..hi * s];
        rest[..(hi - lo) * s].par_chunks_mut(s).zip(rest_back.par_chunks_mut(s)).enumerate().for_each(
            |(offset, (best, link))| {
                let i = lo + offset;
                let (si, bits) = (&summaries[i], ideals.get(i));
                let bands: Vec<(usize, usize)> = (0..=l).map(|cl| live(si.fpga, cl)).collect();
                if bands.iter().all(|&(a, b)| a > b) {
                    return;
                }
                // The largest value a live state could still improve to, capped by the bound.
                let cap = |best: &[f64], from_k: usize, from_l: usize| {
                    let mut m: f64 = 0.0;
                    for (cl, &(a, b)) in bands.iter().enumerate().skip(from_l) {
                        for ck in a.max(from_k)..=b {
                            m = m.max(best[cl * k1 + ck].min(bound));
                        }
                    }
                    m
                };
                // A split of J on a accelerators and b CPUs with max load v has
                // F(J) ≤ a·v + absorb(b·v), so J can improve state (l', k') only if
                // F(J) < (k' − 1)·best + absorb(l'·best).
                let reach = |best: &[f64]| {
                    let mut m: f64 = 0.0;
                    for (cl, &(a, b)) in bands.iter().enumerate() {
                        for ck in a.max(1)..=b {
                            let v = best[cl * k1 + ck].min(bound);
                            m = m.max((ck - 1) as f64 * v + absorb.at(cl as f64 * v));
                        }
                    }
                    m * (1.0 + 1e-9) + 1e-12
                };
                let mut evaluated = 0u64;
                if k > 0 {
                    let (a, b) = window(&fpga_keys, si.fpga);
                    let mut limit = cap(best, 1, 0);
                    let mut above = reach(best);
                    let top = a + fpga_keys[a..b].partition_point(|&x| x <= above);
                    for &j in by_fpga[a..top].iter().rev() {
                        let j = j as usize;
                        let fj = summaries[j].fpga;
                        if si.fpga - fj > limit {
                            break;
                        }
                        if fj > above {
                            continue;
                        }
                        if j >= lo || !is_subset(ideals.get(j), bits) {
                            continue;
                        }
                        let Some(load) = PairCost::accelerator_load(si, &summaries[j], ideals.get(j), memory) else {
                            continue;
                        };
                        evaluated += 1;
                        if load > bound {
                            continue;
                        }
                        let row = &done[j * s..(j + 1) * s];
                        let mut improved = false;
                        for (cl, &(ka, kb)) in bands.iter().enumerate() {
                            for ck in ka.max(1)..=kb {
                                let st = cl * k1 + ck;
                                let v = row[st - 1].max(load);
                                if v < best[st] {
                                    best[st] = v;
                                    link[st] = (ACC, j as u32);
                                    improved = true;
                                }
                            }
                        }
                        if improved {
                            limit = cap(best, 1, 0);
                            above = reach(best);
                        }
                    }
                }
                if l > 0 {
                    let (a, b) = window(&cpu_keys, si.cpu);
                    let mut limit = cap(best, 0, 1);
                    for &j in by_cpu[a..b].iter().rev() {
                        let j = j as usize;
                        let load = PairCost::cpu_load(si, &summaries[j]);
                        if load > limit {
                            break;
                        }
                        if j >= lo || !is_subset(ideals.get(j), bits) {
                            continue;
                        }
                        evaluated += 1;
                        let row = &done[j * s..(j + 1) * s];
                        let mut improved = false;
                        for (cl, &(ka, kb)) in bands.iter().enumerate().skip(1) {
                            for ck in ka..=kb {
                                let st = cl * k1 + ck;
                                let v = row[st - k1].max(load);
                                if v < best[st] {
                                    best[st] = v;
                                    link[st] = (CPU, j as u32);
                                    improved = true;
                                }
                            }
                        }
                        if improved {
                            limit = cap(best, 0, 1);
                        }
                    }
                }
                for cl in 0..=l {
                    for ck in 0..=k {
                        let st = cl * k1 + ck;
                        if ck > 0 && best[st - 1] < best[st] {
                            best[st] = best[st - 1];
                            link[st] = (FEWER_ACC, i as u32);
                        }
                        if cl > 0 && best[st - k1] < best[st] {
                            best[st] = best[st - k1];
                            link[st] = (FEWER_CPU, i as u32);
                        }
                    }
                }
                pairs.fetch_add(evaluated, Ordering::Relaxed);
            },
        );
    }
    stats.ideal_pairs = Some(pairs.into_inner());

    let full = n_ideals - 1;
    let objective = dp[full * s + s - 1];
    if !objective.is_finite() {
        stats.time_s = start.elapsed().as_secs_f64();
        return Ok(Outcome {
            method: "dp".into(),
            placement: None,
            objective: f64::INFINITY,
            bound: f64::INFINITY,
            status: infeasibility(w, &c),
            stats,
        });
    }

    // Walk the back links from (V, ℓ, k) to ∅.
    let mut group_device = vec![Device::Cpu(0); c.len()];
    let (mut i, mut cl, mut ck) = (full, l, k);
    let (mut next_acc, mut next_cpu) = (0, 0);
    while i != 0 {
        let (kind, j) = back[i * s + cl * k1 + ck];
        let j = j as usize;
        match kind {
            FEWER_ACC => ck -= 1,
            FEWER_CPU => cl -= 1,
            ACC | CPU => {
                let device = if kind == ACC {
                    next_acc += 1;
                    ck -= 1;
                    Device::Accelerator(next_acc - 1)
                } else {
                    next_cpu += 1;
                    cl -= 1;
                    Device::Cpu(next_cpu - 1)
                };
                let (bi, bj) = (ideals.get(i), ideals.get(j));
                for (g, slot) in group_device.iter_mut().enumerate() {
                    if contains(bi, g) && !contains(bj, g) {
                        *slot = device;
                    }
                }
                i = j;
            }
            _ => unreachable!("every finite state has a back link"),
        }
    }
    let placement = Placement::new(c.group_of.iter().map(|&g| group_device[g]).collect()).canonical();
    stats.time_s = start.elapsed().as_secs_f64();
    Ok(Outcome { method: "dp".into(), placement: Some(placement), objective, bound: objective, status: Status::Optimal, stats })
}

/// The most accelerator compute CPUs can take off the accelerators within a CPU-time
/// budget `B`: the fractional knapsack of [`super::knapsack`] over the groups (weight cpu
/// time, value fpga time), 0 for `B ≤ 0` (no CPU), scaled up by 1e-9 for rounding. An
/// upper bound on any real choice of groups, so pruning with it is exact.
struct CpuAbsorption(FractionalKnapsack);

impl CpuAbsorption {
    fn new(c: &Contraction) -> Self {
        CpuAbsorption(FractionalKnapsack::new(c.groups.iter().map(|g| (g.cpu_latency, g.fpga_latency))))
    }

    fn at(&self, budget: f64) -> f64 {
        if budget <= 0.0 {
            return 0.0;
        }
        if !budget.is_finite() {
            return f64::INFINITY;
        }
        self.0.value(budget) * (1.0 + 1e-9)
    }
}

/// Memory the DP may use for its tables, bytes.
pub const MEMORY_BUDGET_BYTES: usize = 1536 << 20;

/// How many ideals fit [`MEMORY_BUDGET_BYTES`]: per ideal, its bitset (twice while
/// enumerating), its summary and `s` states of value and back link.
pub fn ideal_budget(groups: usize, states: usize) -> usize {
    let words = groups.div_ceil(64).max(1);
    let per_ideal = 2 * (words * 8 + 24) + 96 + states * (8 + 8);
    MEMORY_BUDGET_BYTES / per_ideal
}

/// The best chain split over two topological orders of the groups (index order, and a
/// depth-first order), as (max-load, placement). `None` if neither order has a split that fits.
pub fn chain_upper_bound(
    c: &Contraction,
    cost: &PairCost,
    k: usize,
    l: usize,
    memory: f64,
) -> Option<(f64, Placement)> {
    let mut best: Option<(f64, Placement)> = None;
    for order in [(0..c.len()).collect::<Vec<_>>(), depth_first_order(c)] {
        if let Some(found) = best_chain_split(c, cost, &order, k, l, memory) {
            if best.as_ref().is_none_or(|(b, _)| found.0 < *b) {
                best = Some(found);
            }
        }
    }
    best
}

/// Optimal split of one topological order of the groups into consecutive stages.
pub fn best_chain_split(
    c: &Contraction,
    cost: &PairCost,
    order: &[usize],
    k: usize,
    l: usize,
    memory: f64,
) -> Option<(f64, Placement)> {
    let n = c.len();
    let words = n.div_ceil(64).max(1);
    let mut prefix_bits = vec![0u64; (n + 1) * words];
    for (t, &g) in order.iter().enumerate() {
        let (prev, next) = prefix_bits.split_at_mut((t + 1) * words);
        next[..words].copy_from_slice(&prev[t * words..]);
        next[g / 64] |= 1 << (g % 64);
    }
    let bits = |t: usize| &prefix_bits[t * words..(t + 1) * words];
    let summaries: Vec<IdealSummary> = (0..=n).into_par_iter().map(|t| cost.summarize(bits(t))).collect();
    let split = split_chain(
        n,
        k,
        l,
        |i, j| PairCost::accelerator_load(&summaries[j], &summaries[i], bits(i), memory),
        |i, j| PairCost::cpu_load(&summaries[j], &summaries[i]),
    )?;
    let mut group_device = vec![Device::Cpu(0); n];
    let (mut acc, mut cpu) = (0, 0);
    for &(i, j, kind) in &split.stages {
        let device = match kind {
            StageDevice::Accelerator => {
                acc += 1;
                Device::Accelerator(acc - 1)
            }
            StageDevice::Cpu => {
                cpu += 1;
                Device::Cpu(cpu - 1)
            }
        };
        for &g in &order[i..j] {
            group_device[g] = device;
        }
    }
    Some((split.objective, Placement::new(c.group_of.iter().map(|&g| group_device[g]).collect())))
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

fn infeasibility(w: &Workload, c: &Contraction) -> Status {
    let d = w.devices();
    if let Some(g) = c.groups.iter().find(|g| g.size_bytes > d.memory_per_accelerator_bytes && d.cpus == 0) {
        return Status::infeasible(format!(
            "the nodes that must share a device with node {} need {} bytes, more than an accelerator's {} bytes, and there is no CPU",
            w.node(g.nodes[0]).id,
            g.size_bytes,
            d.memory_per_accelerator_bytes
        ));
    }
    let reason = format!(
        "no contiguous split into at most {} accelerators of {} bytes and {} CPUs exists; add devices or memory, or allow non-contiguous splits (--method ip)",
        d.accelerators, d.memory_per_accelerator_bytes, d.cpus
    );
    Status::Infeasible { reason, non_contiguous_may_help: true }
}

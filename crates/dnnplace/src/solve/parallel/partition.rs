//! The exact split of a chain into `p` stages for one uniform configuration `(b, t, d, ZeRO)`:
//! every stage on `t·d` devices, stage `s` on devices `s·t·d ..`.
//!
//! Stage `s` holding units `i..j` costs (the formulas of [`crate::score::parallel`], from
//! prefix sums) `T(i, j, s)` per micro-batch, `sync(i, j, s)` per iteration and
//! `mem(i, j, s)` per device; it is allowed when `mem ≤ M`.
//!
//! - **Time per sample** `max_s (m·T_s + sync_s) / B`: the min–max DP
//!   `F[s + 1][j] = min_i max(F[s][i], v(i, j, s))`, O(p·U²).
//! - **Iteration** `Σ_s T_s + (m − 1)·max_s T_s + max_s sync_s` (with the sync overlapped,
//!   `--overlap-grad-reduce`, `sync_s` is replaced by `max(0, sync_s − b_s)`, `b_s` the
//!   stage's backward pass, [`crate::score::parallel`]): not a function of one
//!   running value, so the DP keeps, for every `(s, j)`, the Pareto front of
//!   `(max T, Σ T, max sync)` over the splits of units `0..j` into `s` stages; the objective
//!   is monotone in all three, so a dominated triple never completes to a better split, and
//!   the best completed triple is optimal. A triple whose lower bound
//!   `ΣT + C(j..U) + (m − 1)·max(maxT, C(j..U)/(p − s)) + max sync` (with `C` the units'
//!   compute and TP time, which every stage pays at least) reaches the incumbent is dropped.
//!
//! With full recomputation a stage also runs its units' forward again (with its TP
//! all-reduces), keeps each unit's input per micro-batch in flight, and holds one unit's
//! full stash at a time (the largest of its units).
//!
//! Memory and `T` only grow as a stage takes more units, so the scan of `j` for a fixed `i`
//! stops at the first `j` that does not fit.
//!
//! **A fast split** ([`greedy_split`], a heuristic): for a threshold `τ`, stages `0..p`
//! take units in order, each while its time per sample `(m·T + sync)/B` stays `≤ τ` and its
//! memory fits (every stage at least one unit, the last one up to `U`); `τ` by doubling
//! then bisection. O(U) per threshold. Its split is valued like the DP's (the objective of
//! its stages), so it is an incumbent the DP only has to beat: the uniform search runs it
//! first, so a run stopped on a long chain still holds a plan close to its bound.
//!
//! **A bound per configuration** ([`relaxed_bound`]): drop the transfers at the stages'
//! ends and allow empty stages. A stage's remaining cost (compute, TP, ZeRO-3 gathers, DP
//! sync) and memory only grow as its range grows, for every stage position `s`, so
//! packing stages `0..p` in order, each as far as it fits `τ`, decides the relaxation
//! exactly (by induction, each packed stage ends no earlier than in any split that fits).
//! The least `τ` that packs, found by doubling and bisection, bounds every split of the
//! configuration: its time per sample, or for the iteration `C + (m − 1)·max(τ_T, C/p)`
//! with `τ_T` the packing's bound on the largest `T` (transfers and sync only add).

use crate::model::parallel::{
    all_gather_ms, all_reduce_ms, transfer_ms, ChainCosts, Topology, Uniform as Config, Zero,
};
use crate::model::schedule::{in_flight, Schedule};
use crate::model::Link;
use crate::solve::budget::{Budget, Exhausted};

/// What is minimised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Objective {
    /// `Σ T + (m − 1)·max T + max sync`, ms.
    Iteration,
    /// `max_s (m·T_s + sync_s) / B`, ms.
    TimePerSample,
}

/// Prefix sums and per-position links of one configuration.
pub struct Coster<'a> {
    chain: &'a ChainCosts,
    cfg: Config,
    global_batch: usize,
    m: usize,
    schedule: Schedule,
    memory: f64,
    /// Prefix sums over units of compute + TP time (with the recomputed forward and its
    /// all-reduces when recomputing), weights, gradients, optimizer, stash (the checkpoints
    /// when recomputing).
    c: Vec<f64>,
    w: Vec<f64>,
    g: Vec<f64>,
    o: Vec<f64>,
    a: Vec<f64>,
    /// Recomputing: the largest unit stash of every range (what one unit's backward holds).
    working: Option<RangeMax>,
    /// With the DP sync overlapped (`--overlap-grad-reduce`): prefix sums over units of the
    /// backward pass's own part ([`unit_backward_sums`]); `None` otherwise.
    backward: Option<Vec<f64>>,
    /// Per stage position: the link into it from the stage before, its DP link.
    boundary: Vec<Link>,
    dp: Vec<Link>,
    host: Option<Link>,
}

impl<'a> Coster<'a> {
    /// `None` when `t` has no costs, `d·b` does not divide `B`, or the stages do not fit.
    pub fn new(
        chain: &'a ChainCosts,
        topo: &Topology,
        cfg: Config,
        global_batch: usize,
        schedule: Schedule,
        overlap_grad_reduce: bool,
    ) -> Option<Coster<'a>> {
        let (t, d) = (cfg.tensor_parallel, cfg.data_parallel);
        let ti = chain.tp_index(t)?;
        let per = d * cfg.micro_batch;
        if !global_batch.is_multiple_of(per)
            || !topo.per_machine.is_multiple_of(t)
            || cfg.stages * t * d > topo.devices()
        {
            return None;
        }
        let tp_link = topo.peer.unwrap_or(topo.host);
        let sums = unit_prefix_sums(chain, (t, ti), tp_link, cfg.recompute);
        let width = t * d;
        let machine = |dev: usize| dev / topo.per_machine;
        let intra = topo.peer.unwrap_or(topo.host);
        let boundary = (0..cfg.stages)
            .map(|s| {
                let crosses = s > 0
                    && (0..width).any(|k| machine(s * width + k) != machine((s - 1) * width + k));
                if crosses {
                    topo.network
                } else {
                    intra
                }
            })
            .collect();
        let dp = (0..cfg.stages)
            .map(|s| {
                let first = s * width;
                if machine(first) == machine(first + (d - 1) * t) {
                    intra
                } else {
                    topo.network
                }
            })
            .collect();
        let [c, w, g, o, a] = sums;
        let working = cfg.recompute.then(|| {
            RangeMax::new(
                chain
                    .units
                    .iter()
                    .map(|u| u.costs[ti].activation_bytes)
                    .collect(),
            )
        });
        Some(Coster {
            chain,
            cfg,
            global_batch,
            m: global_batch / per,
            schedule,
            memory: topo.memory_bytes,
            c,
            w,
            g,
            o,
            a,
            working,
            backward: overlap_grad_reduce
                .then(|| unit_backward_sums(chain, (t, ti), tp_link, cfg.recompute)),
            boundary,
            dp,
            host: topo.peer.is_none().then_some(topo.host),
        })
    }

    /// Micro-batches per replica `m`.
    pub fn micro_batches(&self) -> usize {
        self.m
    }

    /// Compute and TP time of units `i..j` per micro-batch.
    pub fn compute(&self, i: usize, j: usize) -> f64 {
        self.c[j] - self.c[i]
    }

    /// Memory per device of stage `s` holding `i..j`.
    pub fn memory(&self, i: usize, j: usize, s: usize) -> f64 {
        let d = self.cfg.data_parallel as f64;
        let z = self.cfg.zero;
        let shard = |x: f64, from: Zero| if z >= from { x / d } else { x };
        let held = in_flight(self.schedule, self.cfg.stages, self.m, s) as f64;
        shard(self.w[j] - self.w[i], Zero::Parameters)
            + shard(self.g[j] - self.g[i], Zero::Gradients)
            + shard(self.o[j] - self.o[i], Zero::Optimizer)
            + held * (self.a[j] - self.a[i])
            + self.working.as_ref().map_or(0.0, |r| r.max(i, j))
    }

    /// A lower bound on any stage's memory per device of the whole chain split in `p`
    /// stages: the resident part's average (no stash).
    pub fn resident_average(&self) -> f64 {
        let d = self.cfg.data_parallel as f64;
        let z = self.cfg.zero;
        let n = self.chain.len();
        let shard = |x: f64, from: Zero| if z >= from { x / d } else { x };
        (shard(self.w[n], Zero::Parameters)
            + shard(self.g[n], Zero::Gradients)
            + shard(self.o[n], Zero::Optimizer))
            / self.cfg.stages as f64
    }

    /// `(T, sync)` of stage `s` holding `i..j`.
    pub fn times(&self, i: usize, j: usize, s: usize) -> (f64, f64) {
        let p = self.cfg.stages;
        let cuts = &self.chain.cuts;
        let mut transfer = 0.0;
        if s > 0 {
            let l = self.boundary[s];
            transfer += cuts[i]
                .forward
                .iter()
                .map(|&x| transfer_ms(l, x))
                .sum::<f64>();
            if let Some(h) = self.host {
                transfer += cuts[i]
                    .backward
                    .iter()
                    .map(|&x| transfer_ms(h, x))
                    .sum::<f64>();
            }
        }
        if s + 1 < p {
            let l = self.boundary[s + 1];
            transfer += cuts[j]
                .backward
                .iter()
                .map(|&x| transfer_ms(l, x))
                .sum::<f64>();
            if let Some(h) = self.host {
                transfer += cuts[j]
                    .forward
                    .iter()
                    .map(|&x| transfer_ms(h, x))
                    .sum::<f64>();
            }
        }
        let (own, sync) = self.own_times(i, j, s);
        (own + transfer, sync)
    }

    /// `(T, sync)` of stage `s` holding `i..j` without the transfers at its ends: its
    /// compute, TP and ZeRO-3 gathers, and its DP sync. Both only grow as the stage takes
    /// more units.
    fn own_times(&self, i: usize, j: usize, s: usize) -> (f64, f64) {
        let d = self.cfg.data_parallel;
        let (w, g) = (self.w[j] - self.w[i], self.g[j] - self.g[i]);
        let link = self.dp[s];
        let (gather, sync) = if self.cfg.zero == Zero::Parameters {
            (2.0 * all_gather_ms(link, w, d), all_gather_ms(link, g, d))
        } else {
            (0.0, all_reduce_ms(link, g, d))
        };
        (self.compute(i, j) + gather, sync)
    }

    /// The sync term stage `s` holding `i..j` adds to the iteration, its DP sync being `sync`:
    /// `sync`, or overlapped with its last backward `max(0, sync − b(i, j, s))` with `b` the
    /// backward pass of [`crate::score::parallel::pass_times`] (the units' backward and its
    /// TP all-reduces, recomputing the forward and its all-reduces again, the gradients
    /// received from `s + 1`, without a peer link the staging of those sent to `s − 1`, and
    /// ZeRO-3's second gather).
    fn sync_term(&self, i: usize, j: usize, s: usize, sync: f64) -> f64 {
        let Some(own) = &self.backward else {
            return sync;
        };
        let cuts = &self.chain.cuts;
        let mut b = own[j] - own[i];
        if s + 1 < self.cfg.stages {
            let l = self.boundary[s + 1];
            b += cuts[j]
                .backward
                .iter()
                .map(|&x| transfer_ms(l, x))
                .sum::<f64>();
        }
        if let (true, Some(h)) = (s > 0, self.host) {
            b += cuts[i]
                .backward
                .iter()
                .map(|&x| transfer_ms(h, x))
                .sum::<f64>();
        }
        if self.cfg.zero == Zero::Parameters {
            let d = self.cfg.data_parallel;
            b += all_gather_ms(self.dp[s], self.w[j] - self.w[i], d);
        }
        (sync - b).max(0.0)
    }

    /// The stage's share of the time per sample.
    fn per_sample(&self, t: f64, sync: f64) -> f64 {
        (self.m as f64 * t + sync) / self.global_batch as f64
    }
}

/// Range maxima by a sparse table: `max(i, j)` over `values[i..j]` in O(1).
struct RangeMax {
    levels: Vec<Vec<f64>>,
}

impl RangeMax {
    fn new(values: Vec<f64>) -> RangeMax {
        let n = values.len();
        let mut levels = vec![values];
        let mut w = 1;
        while 2 * w <= n {
            let prev = &levels[levels.len() - 1];
            let next: Vec<f64> = (0..=n - 2 * w).map(|i| prev[i].max(prev[i + w])).collect();
            levels.push(next);
            w *= 2;
        }
        RangeMax { levels }
    }

    /// The largest of `values[i..j]` (`i < j`).
    fn max(&self, i: usize, j: usize) -> f64 {
        let k = (usize::BITS - 1 - (j - i).leading_zeros()) as usize;
        self.levels[k][i].max(self.levels[k][j - (1 << k)])
    }
}

/// The best split of one configuration: its cut positions and its value.
#[derive(Clone, Debug, PartialEq)]
pub struct Split {
    pub cuts: Vec<usize>,
    pub value: f64,
}

/// The optimal split of `coster`'s configuration for `objective` (module documentation),
/// or `None` when no split fits or none beats `incumbent`.
pub fn best_split(
    coster: &Coster,
    objective: Objective,
    incumbent: f64,
    budget: &Budget,
) -> Result<Option<Split>, Exhausted> {
    if coster.resident_average() > coster.memory {
        return Ok(None);
    }
    match objective {
        Objective::TimePerSample => min_max(coster, incumbent, budget),
        Objective::Iteration => pareto(coster, incumbent, budget),
    }
}

/// The min–max DP for the time per sample.
fn min_max(coster: &Coster, incumbent: f64, budget: &Budget) -> Result<Option<Split>, Exhausted> {
    let (n, p) = (coster.chain.len(), coster.cfg.stages);
    let mut f = vec![vec![f64::INFINITY; n + 1]; p + 1];
    let mut from = vec![vec![usize::MAX; n + 1]; p + 1];
    f[0][0] = 0.0;
    for s in 0..p {
        budget.check()?;
        for i in s..n {
            let base = f[s][i];
            if base >= incumbent {
                continue;
            }
            for j in i + 1..=n - (p - s - 1) {
                if coster.memory(i, j, s) > coster.memory {
                    break;
                }
                let (t, sync) = coster.times(i, j, s);
                let v = base.max(coster.per_sample(t, sync));
                if v < f[s + 1][j] {
                    f[s + 1][j] = v;
                    from[s + 1][j] = i;
                }
            }
        }
    }
    let value = f[p][n];
    if value.partial_cmp(&incumbent) != Some(std::cmp::Ordering::Less) {
        return Ok(None);
    }
    Ok(Some(Split {
        cuts: cuts_from(&from, p, n),
        value,
    }))
}

/// The stage starts read back from `from`.
fn cuts_from(from: &[Vec<usize>], p: usize, n: usize) -> Vec<usize> {
    let mut cuts = Vec::with_capacity(p.saturating_sub(1));
    let mut j = n;
    for s in (1..=p).rev() {
        j = from[s][j];
        if s > 1 {
            cuts.push(j);
        }
    }
    cuts.reverse();
    cuts
}

#[derive(Clone, Copy, Debug)]
struct Label {
    max_t: f64,
    sum_t: f64,
    max_sync: f64,
    /// The previous stage's end and the label index there.
    from: (usize, usize),
}

impl Label {
    fn dominates(&self, o: &Label) -> bool {
        self.max_t <= o.max_t && self.sum_t <= o.sum_t && self.max_sync <= o.max_sync
    }
}

/// Inserts `l` into the Pareto front `front` unless a member dominates it.
fn insert(front: &mut Vec<Label>, l: Label) {
    if front.iter().any(|x| x.dominates(&l)) {
        return;
    }
    front.retain(|x| !l.dominates(x));
    front.push(l);
}

/// The Pareto DP for the iteration time.
fn pareto(coster: &Coster, incumbent: f64, budget: &Budget) -> Result<Option<Split>, Exhausted> {
    let (n, p) = (coster.chain.len(), coster.cfg.stages);
    let m1 = coster.m as f64 - 1.0;
    let mut fronts: Vec<Vec<Vec<Label>>> = vec![vec![Vec::new(); n + 1]; p + 1];
    fronts[0][0].push(Label {
        max_t: 0.0,
        sum_t: 0.0,
        max_sync: 0.0,
        from: (usize::MAX, usize::MAX),
    });
    for s in 0..p {
        budget.check()?;
        for i in s..n {
            if fronts[s][i].is_empty() {
                continue;
            }
            for j in i + 1..=n - (p - s - 1) {
                if coster.memory(i, j, s) > coster.memory {
                    break;
                }
                let (t, sync) = coster.times(i, j, s);
                let sync = coster.sync_term(i, j, s, sync);
                let rest = coster.compute(j, n);
                let left = (p - s - 1) as f64;
                let (done, next_row) = fronts.split_at_mut(s + 1);
                for (k, l) in done[s][i].iter().enumerate() {
                    let next = Label {
                        max_t: l.max_t.max(t),
                        sum_t: l.sum_t + t,
                        max_sync: l.max_sync.max(sync),
                        from: (i, k),
                    };
                    let spread = if left > 0.0 { rest / left } else { 0.0 };
                    let bound = next.sum_t + rest + m1 * next.max_t.max(spread) + next.max_sync;
                    if bound < incumbent {
                        insert(&mut next_row[0][j], next);
                    }
                }
            }
        }
    }
    let value = |l: &Label| l.sum_t + m1 * l.max_t + l.max_sync;
    let best = fronts[p][n]
        .iter()
        .enumerate()
        .min_by(|a, b| value(a.1).total_cmp(&value(b.1)));
    let Some((mut k, l)) = best else {
        return Ok(None);
    };
    let v = value(l);
    if v.partial_cmp(&incumbent) != Some(std::cmp::Ordering::Less) {
        return Ok(None);
    }
    let mut cuts = Vec::new();
    let mut j = n;
    for s in (1..=p).rev() {
        let (i, kk) = fronts[s][j][k].from;
        if s > 1 {
            cuts.push(i);
        }
        (j, k) = (i, kk);
    }
    cuts.reverse();
    Ok(Some(Split { cuts, value: v }))
}

/// Prefix sums over the chain's units at TP degree `t` (index `ti`), TP collectives on
/// `tp_link`: `[time, weights, gradients, optimizer, stash]`, each of length `U + 1`. Time
/// per micro-batch is forward + backward + the TP all-reduces, and with `recompute` the
/// forward and its all-reduces again; the stash is the unit's checkpoint under
/// recomputation, its activations otherwise. Shared by the uniform and the free search.
pub(crate) fn unit_prefix_sums(
    chain: &ChainCosts,
    (t, ti): (usize, usize),
    tp_link: Link,
    recompute: bool,
) -> [Vec<f64>; 5] {
    let n = chain.len();
    let mut sums: [Vec<f64>; 5] = std::array::from_fn(|_| vec![0.0; n + 1]);
    for (u, unit) in chain.units.iter().enumerate() {
        let k = &unit.costs[ti];
        let again = if recompute { k.forward_ms } else { 0.0 };
        let x = [
            k.forward_ms
                + k.backward_ms
                + again
                + k.tp_collectives_ms(tp_link, t, 1 + u32::from(recompute)),
            k.weight_bytes,
            k.gradient_bytes,
            k.optimizer_bytes,
            if recompute {
                k.checkpoint_bytes
            } else {
                k.activation_bytes
            },
        ];
        for (s, v) in sums.iter_mut().zip(x) {
            s[u + 1] = s[u] + v;
        }
    }
    sums
}

/// Prefix sums over the chain's units at TP degree `t` (index `ti`), TP collectives on
/// `tp_link`, of the backward pass's own part: the unit's backward and its backward TP
/// all-reduces, and with `recompute` its forward and forward all-reduces again
/// ([`crate::score::parallel::pass_times`] without the transfers and the gather).
fn unit_backward_sums(
    chain: &ChainCosts,
    (t, ti): (usize, usize),
    tp_link: Link,
    recompute: bool,
) -> Vec<f64> {
    let mut sums = Vec::with_capacity(chain.len() + 1);
    sums.push(0.0);
    for unit in &chain.units {
        let k = &unit.costs[ti];
        let ar = |bytes| all_reduce_ms(tp_link, bytes, t);
        let forward =
            k.forward_ms + f64::from(k.tp_forward_all_reduces) * ar(k.tp_all_reduce_bytes);
        let mut b = k.backward_ms
            + f64::from(k.tp_backward_all_reduces) * ar(k.tp_backward_all_reduce_bytes);
        if recompute {
            b += forward;
        }
        sums.push(sums[sums.len() - 1] + b);
    }
    sums
}

/// A split of `coster`'s configuration found in O(U) per threshold (module documentation,
/// "A fast split"), valued for `objective`; `None` when no threshold packs the chain or
/// `budget` runs out first.
pub fn greedy_split(coster: &Coster, objective: Objective, budget: &Budget) -> Option<Split> {
    let (n, p) = (coster.chain.len(), coster.cfg.stages);
    if p == 0 || p > n || coster.resident_average() > coster.memory {
        return None;
    }
    let mut hi = {
        let (t, sync) = coster.times(0, n, 0);
        coster.per_sample(t, sync).max(1e-300)
    };
    let mut best: Option<Vec<usize>> = None;
    pack_stages(coster, f64::INFINITY)?;
    for _ in 0..64 {
        if budget.is_exhausted() {
            return None;
        }
        if let Some(cuts) = pack_stages(coster, hi) {
            best = Some(cuts);
            break;
        }
        hi *= 2.0;
    }
    let mut lo = 0.0;
    for _ in 0..40 {
        if budget.is_exhausted() || hi - lo <= 1e-9 * hi {
            break;
        }
        let mid = 0.5 * (lo + hi);
        match pack_stages(coster, mid) {
            Some(cuts) => {
                best = Some(cuts);
                hi = mid;
            }
            None => lo = mid,
        }
    }
    let cuts = best?;
    let value = split_value(coster, objective, &cuts);
    Some(Split { cuts, value })
}

/// The stage starts of the greedy packing at `tau` (module documentation), or `None`.
fn pack_stages(coster: &Coster, tau: f64) -> Option<Vec<usize>> {
    let (n, p) = (coster.chain.len(), coster.cfg.stages);
    let fits = |i: usize, j: usize, s: usize| {
        if coster.memory(i, j, s) > coster.memory {
            return false;
        }
        let (t, sync) = coster.times(i, j, s);
        coster.per_sample(t, sync) <= tau
    };
    let mut cuts = Vec::with_capacity(p.saturating_sub(1));
    let mut i = 0;
    for s in 0..p {
        let last = n - (p - s - 1);
        if i >= last || !fits(i, i + 1, s) {
            return None;
        }
        let mut j = i + 1;
        while j < last && fits(i, j + 1, s) {
            j += 1;
        }
        if s > 0 {
            cuts.push(i);
        }
        i = j;
    }
    (i == n).then_some(cuts)
}

/// The objective of the split with stage starts `0, cuts…` (as the DPs value it).
fn split_value(coster: &Coster, objective: Objective, cuts: &[usize]) -> f64 {
    let n = coster.chain.len();
    let starts: Vec<usize> = std::iter::once(0).chain(cuts.iter().copied()).collect();
    let (mut max_t, mut sum_t, mut max_sync, mut per_sample) = (0.0f64, 0.0, 0.0f64, 0.0f64);
    for (s, &i) in starts.iter().enumerate() {
        let j = starts.get(s + 1).copied().unwrap_or(n);
        let (t, sync) = coster.times(i, j, s);
        max_t = max_t.max(t);
        sum_t += t;
        max_sync = max_sync.max(coster.sync_term(i, j, s, sync));
        per_sample = per_sample.max(coster.per_sample(t, sync));
    }
    match objective {
        Objective::TimePerSample => per_sample,
        Objective::Iteration => sum_t + (coster.m as f64 - 1.0) * max_t + max_sync,
    }
}

/// A lower bound on every split of `coster`'s configuration (module documentation, "A bound
/// per configuration"); ∞ when no split fits the memory, `None` when `budget` runs out.
pub fn relaxed_bound(coster: &Coster, objective: Objective, budget: &Budget) -> Option<f64> {
    let (n, p) = (coster.chain.len(), coster.cfg.stages);
    let metric = |i: usize, j: usize, s: usize| {
        let (t, sync) = coster.own_times(i, j, s);
        match objective {
            Objective::TimePerSample => coster.per_sample(t, sync),
            Objective::Iteration => t,
        }
    };
    let packs = |tau: f64| {
        let mut i = 0;
        for s in 0..p {
            let mut j = i;
            while j < n && coster.memory(i, j + 1, s) <= coster.memory && metric(i, j + 1, s) <= tau
            {
                j += 1;
            }
            i = j;
        }
        i == n
    };
    if !packs(f64::INFINITY) {
        return Some(f64::INFINITY);
    }
    let c = coster.compute(0, n);
    let mut hi = (c / p as f64).max(1e-300);
    let mut lo = 0.0;
    loop {
        if budget.is_exhausted() {
            return None;
        }
        if packs(hi) {
            break;
        }
        (lo, hi) = (hi, 2.0 * hi);
        if !hi.is_finite() || hi > 1e300 {
            return Some(f64::INFINITY);
        }
    }
    for _ in 0..60 {
        if budget.is_exhausted() || hi - lo <= 1e-9 * hi {
            break;
        }
        let mid = 0.5 * (lo + hi);
        if packs(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    // The prefix sums' rounding (module documentation of [`crate::score::parallel`]'s
    // 1e-9 check): the bound is scaled below it.
    let tau = lo * (1.0 - 1e-9);
    Some(match objective {
        Objective::TimePerSample => tau,
        Objective::Iteration => {
            (c + (coster.m as f64 - 1.0) * tau.max(c / p as f64)) * (1.0 - 1e-9)
        }
    })
}

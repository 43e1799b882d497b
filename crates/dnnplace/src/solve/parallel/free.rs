//! The search over free layouts (Piper's space, `docs/parallel.md`): stage `s` holds a
//! contiguous range of units on its own TP degree `t_s` and DP degree `d_s`; the micro-batch
//! `b`, the ZeRO stage and recomputation are the same for every stage. Objective: the time
//! per sample `max_s (m_s·T_s + sync_s) / B` with `m_s = B/(d_s·b)` (the iteration time is
//! defined by the evaluator only when every `d_s` is equal, so it is not searched here).
//!
//! **The space.** Stages are *packed* from device 0: stage `s` starts at the first device
//! at or after the end of stage `s − 1` that is a multiple of `t_s` (a TP group never spans
//! machines), and the last stage ends at or before the device limit `N`. Uniform layouts
//! are packed, so the free optimum is never above the uniform one.
//!
//! **What position changes.** With `P` devices per machine, a stage's links depend only on
//! where it lies in its machines: its DP link is the peer link iff the stage lies inside
//! one machine; the link between neighbours `a`, `b` is the peer link iff `a`'s first and
//! `b`'s last device are on one machine (the evaluator pairs device `k` of `b` with device
//! `k mod width(a)` of `a`; the pairs of the first and of the last device span both stages).
//!
//! **Feasibility for a threshold `V`** is a DP over suffixes: `D[i][k][r][c]` = the fewest
//! devices (padding included) that units `i..U` need in `k` stages whose first stage starts
//! searching at offset `r` inside a machine, every stage's value `≤ V` (or `< V`) and
//! memory within the device's, where `c` says how the boundary into the suffix is priced:
//! peer link (the first stage shares the machine of the device before it), network while
//! sharing it, network without sharing it. The stage count `k` of the suffix is in the state
//! because 1F1B keeps `min(m_s, p − s) = min(m_s, k)` micro-batches in flight. A threshold
//! is feasible iff `min_k D[0][k][0][·] ≤ N`: exact.
//!
//! **The optimum** by bisection on `V`: `lo` starts at the bound
//! `Σ_u min_t t·C_u(t) / (N·b)` (each stage pays at least its units' compute and TP time
//! per micro-batch over its `d_s·b` samples on `t_s·d_s` devices, and `Σ t_s·d_s ≤ N`),
//! `hi` at the best uniform layout; a feasible threshold gives a layout whose value becomes
//! `hi`, an infeasible one raises `lo` (no layout has a value `≤ V`). Once `hi − lo ≤
//! 10⁻⁶·hi` the threshold is `hi` itself, strictly: infeasible proves `hi` optimal. A run
//! stopped by the budget reports `lo` as its bound.
//!
//! The plan is re-scored by [`crate::score::parallel`]; a value that differs from the
//! search's by more than 1e-9 relative is an error, never a plan.
//!
//! Complexity per threshold: `O(U²·K·|T|·|D|·P)` with `K ≤ U` stage counts, `|D|` the DP
//! degrees with `d·b | B`; the scan over `j` stops once the units' compute alone exceeds
//! `V` or the memory the device's.

use super::partition::unit_prefix_sums;
use super::{
    checked_plan, objective_value, plan_uniform, zero_stages, Objective, ParallelOutcome,
    ParallelPlan, Space,
};
use crate::model::parallel::{
    all_gather_ms, all_reduce_ms, transfer_ms, ChainCosts, Layout, StageLayout, Topology, Zero,
};
use crate::model::schedule::{in_flight, Schedule};
use crate::model::Link;
use crate::solve::budget::{Budget, Exhausted};
use crate::solve::{Status, StopReason};

/// One stage of a free layout: its units, `t`, `d`.
pub type StageChoice = (std::ops::Range<usize>, usize, usize);

/// Boundary classes of a suffix's first stage (module documentation).
const INTRA: usize = 0;
const NET_SHARE: usize = 1;
pub(super) const NET_APART: usize = 2;
/// A stage's way out to the next accelerator type's group ([`super::mixed`]): the suffix
/// after it lies on other machines, its boundary priced on the network.
const END: usize = 3;

/// One configuration of the free space: a chain (micro-batch), ZeRO stage, recomputation.
#[derive(Clone, Copy, Debug)]
pub(super) struct FreeConfig {
    pub(super) chain: usize,
    pub(super) zero: Zero,
    pub(super) recompute: bool,
}

/// Prefix sums and cut prices of one configuration.
pub(super) struct Tables<'a> {
    pub(super) chain: &'a ChainCosts,
    pub(super) cfg: FreeConfig,
    global_batch: usize,
    schedule: Schedule,
    memory: f64,
    per_machine: usize,
    pub(super) devices: usize,
    /// `(t, index into the chain's degrees)`.
    pub(super) tps: Vec<(usize, usize)>,
    /// DP degrees with `d·b | B`.
    pub(super) ds: Vec<usize>,
    /// Per TP choice: prefix sums of compute + TP time, weights, gradients, optimizer, stash.
    pub(super) sums: Vec<[Vec<f64>; 5]>,
    /// Per TP choice, per unit: the full stash (recomputation's working set).
    full: Vec<Vec<f64>>,
    /// Per cut: forward and backward transfers priced on `[peer, network]`.
    forward: Vec<[f64; 2]>,
    backward: Vec<[f64; 2]>,
    /// Per cut, without a peer link: the sender's host-link staging, forward and backward.
    host_forward: Vec<f64>,
    host_backward: Vec<f64>,
    links: [Link; 2],
}

impl<'a> Tables<'a> {
    pub(super) fn new(
        chain: &'a ChainCosts,
        topo: &Topology,
        space: &Space,
        cfg: FreeConfig,
    ) -> Tables<'a> {
        let devices = space.max_devices.min(topo.devices());
        let intra = topo.intra_link();
        let tps: Vec<(usize, usize)> = space
            .tensor_parallel
            .iter()
            .filter(|&&t| t <= devices && topo.per_machine.is_multiple_of(t))
            .filter_map(|&t| chain.tp_index(t).map(|i| (t, i)))
            .collect();
        let b = chain.micro_batch;
        let ds = (1..=devices)
            .filter(|&d| space.data_parallel.is_none_or(|x| x == d))
            .filter(|&d| space.global_batch.is_multiple_of(d * b) && space.global_batch >= d * b)
            .collect();
        let mut sums = Vec::new();
        let mut full = Vec::new();
        for &(t, ti) in &tps {
            let s = unit_prefix_sums(chain, (t, ti), intra, cfg.recompute);
            sums.push(s);
            full.push(
                chain
                    .units
                    .iter()
                    .map(|u| u.costs[ti].activation_bytes)
                    .collect(),
            );
        }
        let links = [intra, topo.network];
        let priced = |xs: &[f64], l: Link| xs.iter().map(|&x| transfer_ms(l, x)).sum::<f64>();
        let staged = |xs: &[f64]| match topo.peer {
            None => priced(xs, topo.host),
            Some(_) => 0.0,
        };
        Tables {
            chain,
            cfg,
            global_batch: space.global_batch,
            schedule: space.schedule,
            memory: topo.memory_bytes,
            per_machine: topo.per_machine,
            devices,
            tps,
            ds,
            sums,
            full,
            forward: chain
                .cuts
                .iter()
                .map(|c| links.map(|l| priced(&c.forward, l)))
                .collect(),
            backward: chain
                .cuts
                .iter()
                .map(|c| links.map(|l| priced(&c.backward, l)))
                .collect(),
            host_forward: chain.cuts.iter().map(|c| staged(&c.forward)).collect(),
            host_backward: chain.cuts.iter().map(|c| staged(&c.backward)).collect(),
            links,
        }
    }

    /// The configuration's lower bound on the time per sample (module documentation).
    fn lower_bound(&self) -> f64 {
        let n = self.chain.len();
        let per_unit: f64 = (0..n)
            .map(|u| {
                self.tps
                    .iter()
                    .zip(&self.sums)
                    .map(|(&(t, _), s)| t as f64 * (s[0][u + 1] - s[0][u]))
                    .fold(f64::INFINITY, f64::min)
            })
            .sum();
        per_unit / (self.devices as f64 * self.chain.micro_batch as f64)
    }
}

/// One stage choice's fixed figures: units `i..j` at TP choice `x`, DP `d`.
struct Stage {
    compute: f64,
    m: f64,
    /// ZeRO-3's gathers and the DP sync on `[peer, network]`.
    gather: [f64; 2],
    sync: [f64; 2],
    resident: f64,
    stash: f64,
    working: f64,
}

impl Tables<'_> {
    fn stage(&self, x: usize, i: usize, j: usize, d: usize, working: f64) -> Stage {
        let s = &self.sums[x];
        let (w, g, o) = (s[1][j] - s[1][i], s[2][j] - s[2][i], s[3][j] - s[3][i]);
        let z = self.cfg.zero;
        let shard = |v: f64, from: Zero| if z >= from { v / d as f64 } else { v };
        let (gather, sync) = if z == Zero::Parameters {
            (
                self.links.map(|l| 2.0 * all_gather_ms(l, w, d)),
                self.links.map(|l| all_gather_ms(l, g, d)),
            )
        } else {
            ([0.0; 2], self.links.map(|l| all_reduce_ms(l, g, d)))
        };
        Stage {
            compute: s[0][j] - s[0][i],
            m: (self.global_batch / (d * self.chain.micro_batch)) as f64,
            gather,
            sync,
            resident: shard(w, Zero::Parameters)
                + shard(g, Zero::Gradients)
                + shard(o, Zero::Optimizer),
            stash: s[4][j] - s[4][i],
            working: if self.cfg.recompute { working } else { 0.0 },
        }
    }

    /// The stage's value on DP link `dp`, with its boundary in priced on `input` and out on
    /// `output` (`None`: no neighbour there).
    fn value(
        &self,
        st: &Stage,
        i: usize,
        j: usize,
        dp: usize,
        input: Option<usize>,
        output: Option<usize>,
    ) -> f64 {
        let mut t = st.compute + st.gather[dp];
        if let Some(l) = input {
            t += self.forward[i][l] + self.host_backward[i];
        }
        if let Some(l) = output {
            t += self.backward[j][l] + self.host_forward[j];
        }
        (st.m * t + st.sync[dp]) / self.global_batch as f64
    }

    fn memory_at(&self, st: &Stage, k: usize) -> f64 {
        let held = in_flight(self.schedule, k, st.m as usize, 0) as f64;
        st.resident + held * st.stash + st.working
    }
}

/// How a state was reached: the stage `i..j` on TP choice `x`, DP `d`, the next state's
/// class, the stage's value.
#[derive(Clone, Copy)]
struct Choice {
    j: u16,
    x: u8,
    d: u32,
    next: u8,
    value: f64,
}

/// A feasible layout of one check: its stages `(units, t, d)` and value.
pub(super) struct Found {
    pub(super) stages: Vec<StageChoice>,
    pub(super) value: f64,
}

/// The tables of one feasibility DP: `best[idx(i, k, r, c)]` the fewest devices, `how` the
/// choice that reached it.
pub(super) struct Dp {
    n: usize,
    pm: usize,
    pub(super) best: Vec<u32>,
    how: Vec<Option<Choice>>,
}

impl Dp {
    pub(super) fn idx(&self, i: usize, k: usize, r: usize, c: usize) -> usize {
        ((i * (self.n + 1) + k) * self.pm + r) * 3 + c
    }

    /// The stages from state `(i, k, r, c)` to the end of the chain or to a stage that leaves
    /// for another group ([`END`]): the stages, their largest value, and the unit and stage
    /// count where the rest starts.
    pub(super) fn trace(
        &self,
        tb: &Tables,
        (mut i, mut k, mut r, mut c): (usize, usize, usize, usize),
    ) -> (Found, usize, usize) {
        let mut out = Found {
            stages: Vec::new(),
            value: 0.0,
        };
        while i < self.n {
            let ch = self.how[self.idx(i, k, r, c)].expect("a finite state has a choice");
            let t = tb.tps[ch.x as usize].0;
            let d = ch.d as usize;
            let start = r.div_ceil(t) * t;
            out.stages.push((i..ch.j as usize, t, d));
            out.value = out.value.max(ch.value);
            (i, k, r, c) = (
                ch.j as usize,
                k - 1,
                (start + t * d) % self.pm,
                ch.next as usize,
            );
            if c == END {
                break;
            }
        }
        (out, i, k)
    }
}

/// The feasibility DP for threshold `v` (module documentation): a packed layout whose every
/// stage is worth `≤ v` (`< v` when `strict`), or `None`.
fn feasible(
    tb: &Tables,
    v: f64,
    strict: bool,
    stages: Option<usize>,
    budget: &Budget,
) -> Result<Option<Found>, Exhausted> {
    let n = tb.chain.len();
    let dp = run_dp(tb, v, strict, &|_, _| false, budget)?;
    let root = (1..=n)
        .filter(|&k| stages.is_none_or(|p| p == k))
        .map(|k| (dp.best[dp.idx(0, k, 0, NET_APART)], k))
        .min();
    let Some((used, k)) = root else {
        return Ok(None);
    };
    if used as usize > tb.devices {
        return Ok(None);
    }
    Ok(Some(dp.trace(tb, (0, k, 0, NET_APART)).0))
}

/// The DP's tables for threshold `v` (module documentation). `ends(j, k)`: the units `j..U`
/// can be laid out in `k ≥ 1` stages on the other groups (a cluster of several types,
/// [`super::mixed`]); a stage ending at `j` may then hand the rest over, its way out priced
/// on the network, at no device of this group. One type: never.
pub(super) fn run_dp(
    tb: &Tables,
    v: f64,
    strict: bool,
    ends: &dyn Fn(usize, usize) -> bool,
    budget: &Budget,
) -> Result<Dp, Exhausted> {
    let n = tb.chain.len();
    let pm = tb.per_machine;
    let size = (n + 1) * (n + 1) * pm * 3;
    budget.reserve(
        "the free-layout DP",
        size as f64 * (4.0 + std::mem::size_of::<Choice>() as f64),
    )?;
    let mut dp = Dp {
        n,
        pm,
        best: vec![u32::MAX; size],
        how: vec![None; size],
    };
    let ok = |x: f64| if strict { x < v } else { x <= v };
    for i in (0..n).rev() {
        budget.check()?;
        for (x, &(t, _)) in tb.tps.iter().enumerate() {
            for &d in &tb.ds {
                let w = t * d;
                if w > tb.devices {
                    break;
                }
                let mut working: f64 = 0.0;
                for j in i + 1..=n {
                    working = working.max(tb.full[x][j - 1]);
                    let st = tb.stage(x, i, j, d, working);
                    if !ok(st.m * st.compute / tb.global_batch as f64)
                        || tb.memory_at(&st, 1) > tb.memory
                    {
                        break;
                    }
                    let ks: std::ops::RangeInclusive<usize> =
                        if j == n { 1..=1 } else { 2..=n - j + 1 };
                    for k in ks {
                        if tb.memory_at(&st, k) > tb.memory {
                            break;
                        }
                        let hand_over = k > 1 && ends(j, k - 1);
                        for r in 0..pm {
                            relax(tb, &st, (i, j, k, r), (x, t, d), &ok, hand_over, &mut dp);
                        }
                    }
                }
            }
        }
    }
    Ok(dp)
}

/// Relaxes the states `(i, k, r, ·)` by the stage `i..j` with `(x, t, d)`.
/// `hand_over`: the suffix after `j` may go to another group ([`run_dp`]'s `ends`).
fn relax(
    tb: &Tables,
    st: &Stage,
    (i, j, k, r): (usize, usize, usize, usize),
    (x, t, d): (usize, usize, usize),
    ok: &impl Fn(f64) -> bool,
    hand_over: bool,
    tables: &mut Dp,
) {
    let (n, pm) = (tables.n, tables.pm);
    let idx = move |i: usize, k: usize, r: usize, c: usize| ((i * (n + 1) + k) * pm + r) * 3 + c;
    let best = &tables.best;
    let w = t * d;
    let start = r.div_ceil(t) * t;
    let inside = start % pm + w <= pm;
    let shares = r != 0 && start + w <= pm;
    let after = (start + w) % pm;
    let dp = if inside { 0 } else { 1 };
    // The next state's classes, how this stage's way out is priced, and their devices.
    let mut outs: [(usize, Option<usize>, u32); 3] = [(0, None, u32::MAX); 3];
    if k == 1 {
        outs[0] = (NET_APART, None, 0);
    } else if inside {
        outs[0] = (INTRA, Some(0), best[idx(j, k - 1, after, INTRA)]);
        outs[1] = (NET_APART, Some(1), best[idx(j, k - 1, after, NET_APART)]);
    } else {
        let (a, b) = (
            best[idx(j, k - 1, after, NET_SHARE)],
            best[idx(j, k - 1, after, NET_APART)],
        );
        outs[0] = if a < b {
            (NET_SHARE, Some(1), a)
        } else {
            (NET_APART, Some(1), b)
        };
    }
    if hand_over {
        outs[2] = (END, Some(1), 0);
    }
    let classes: &[(usize, usize)] = if shares {
        &[(INTRA, 0), (NET_SHARE, 1)]
    } else {
        &[(NET_APART, 1)]
    };
    let own = (start - r + w) as u32;
    for &(class, input) in classes {
        let input = (i > 0).then_some(input);
        for &(next, output, rest) in &outs {
            if rest == u32::MAX {
                continue;
            }
            let value = tb.value(st, i, j, dp, input, output);
            let total = own + rest;
            let slot = idx(i, k, r, class);
            if ok(value) && total < tables.best[slot] {
                tables.best[slot] = total;
                tables.how[slot] = Some(Choice {
                    j: j as u16,
                    x: x as u8,
                    d: d as u32,
                    next: next as u8,
                    value,
                });
            }
        }
    }
}

/// The packed layout of `stages` (module documentation).
pub fn packed(
    stages: &[StageChoice],
    micro_batch: usize,
    global_batch: usize,
    zero: Zero,
    schedule: Schedule,
    recompute: bool,
) -> Layout {
    let mut next: usize = 0;
    let stages = stages
        .iter()
        .map(|(units, t, d)| {
            let first = next.div_ceil(*t) * t;
            next = first + t * d;
            StageLayout {
                units: units.clone(),
                tensor_parallel: *t,
                data_parallel: *d,
                first_device: first,
            }
        })
        .collect();
    Layout {
        stages,
        micro_batch,
        global_batch,
        zero,
        schedule,
        recompute,
    }
}

/// Every configuration of `space`, by ascending lower bound.
fn configs<'a>(chains: &'a [ChainCosts], topo: &Topology, space: &Space) -> Vec<(f64, Tables<'a>)> {
    let recomputes = match space.recompute {
        Some(r) => vec![r],
        None => vec![false, true],
    };
    let mut out = Vec::new();
    for (ci, chain) in chains.iter().enumerate() {
        for &zero in &zero_stages(space, 2) {
            for &recompute in &recomputes {
                let cfg = FreeConfig {
                    chain: ci,
                    zero,
                    recompute,
                };
                let tb = Tables::new(chain, topo, space, cfg);
                if !tb.tps.is_empty() && !tb.ds.is_empty() {
                    out.push((tb.lower_bound(), tb));
                }
            }
        }
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0));
    out
}

/// The best free layout of `space` for the time per sample (module documentation); with
/// `target_gap` (a fraction) the bisection stops once `(hi − lo)/hi` reaches it.
pub fn plan_free(
    chains: &[ChainCosts],
    topo: &Topology,
    space: &Space,
    target_gap: Option<f64>,
    budget: &Budget,
) -> Result<ParallelOutcome, String> {
    let uniform = plan_uniform(
        chains,
        topo,
        space,
        Objective::TimePerSample,
        &budget.share(0.3),
    )?;
    let tables = configs(chains, topo, space);
    let lo = tables.first().map_or(f64::INFINITY, |t| t.0);
    let run = bisect(
        (lo, uniform.value),
        target_gap,
        budget,
        uniform.plan.is_some(),
        |v, strict, active, checks| {
            let found = check_all(&tables, v, strict, space.stages, active, checks)?;
            Ok(found.map(|(cfg, found)| (found.value, (cfg, found.stages))))
        },
    );
    let Bisection {
        lo,
        hi,
        best,
        checks,
        stop,
    } = run;
    finish_free(
        chains,
        topo,
        space,
        uniform,
        best,
        hi,
        lo,
        stop,
        checks,
        tables.len(),
        budget,
    )
}

/// Where a bisection on the value ended: the bound `lo`, the best value `hi` and its layout
/// (`None` when no check found one below the starting `hi`), the checks run and why it
/// stopped early.
pub(super) struct Bisection<C> {
    pub lo: f64,
    pub hi: f64,
    pub best: Option<C>,
    pub checks: usize,
    pub stop: Option<StopReason>,
}

/// The bisection of the free searches (module documentation), from `(lo, hi)`: `check(v,
/// strict, budget, checks)` returns a layout worth at most `v` (below `v` when `strict`) with
/// its value, or proves there is none. A feasible `v` lowers `hi`, an infeasible one raises
/// `lo`; once `hi − lo ≤ 10⁻⁶·hi` the check at `hi` is strict and its infeasibility proves
/// `hi`. `target_gap` stops it at that gap. Past the time limit without a layout (and
/// without `held`, a plan the caller already has), the search goes on without a deadline
/// to its first layout; any other exhaustion, or Ctrl-C, ends it.
pub(super) fn bisect<C>(
    (mut lo, mut hi): (f64, f64),
    target_gap: Option<f64>,
    budget: &Budget,
    held: bool,
    mut check: impl FnMut(f64, bool, &Budget, &mut usize) -> Result<Option<(f64, C)>, Exhausted>,
) -> Bisection<C> {
    let mut best = None;
    let (mut checks, mut stop) = (0, None);
    let unlimited = Budget::without_deadline();
    while lo < hi {
        if let Some(gap) = target_gap.filter(|&g| hi.is_finite() && hi - lo <= g * hi) {
            stop = Some(StopReason::GapReached { gap });
            break;
        }
        let strict = hi.is_finite() && hi - lo <= 1e-6 * hi;
        let v = match (hi.is_finite(), strict) {
            (false, _) => f64::INFINITY,
            (true, true) => hi,
            (true, false) => 0.5 * (lo + hi),
        };
        let active = if stop.is_some() { &unlimited } else { budget };
        match check(v, strict, active, &mut checks) {
            Ok(Some((value, found))) => {
                hi = value;
                best = Some(found);
                if stop.is_some() {
                    break;
                }
            }
            Ok(None) if strict || !v.is_finite() => lo = hi,
            Ok(None) => lo = v,
            Err(e) => {
                let limit = matches!(e, Exhausted::TimeLimit);
                stop = Some(StopReason::from(e));
                if !limit || best.is_some() || held {
                    break;
                }
            }
        }
    }
    Bisection {
        lo,
        hi,
        best,
        checks,
        stop,
    }
}

/// Runs the feasibility check for `v` on every configuration whose bound allows it.
fn check_all(
    tables: &[(f64, Tables)],
    v: f64,
    strict: bool,
    stages: Option<usize>,
    budget: &Budget,
    checks: &mut usize,
) -> Result<Option<(FreeConfig, Found)>, Exhausted> {
    for (lb, tb) in tables {
        if *lb > v || (strict && *lb >= v) {
            break;
        }
        *checks += 1;
        if let Some(found) = feasible(tb, v, strict, stages, budget)? {
            return Ok(Some((tb.cfg, found)));
        }
    }
    Ok(None)
}

/// The outcome: the best free layout (or the uniform one when no free layout beat it),
/// re-scored, with the bound `lo`.
#[allow(clippy::too_many_arguments)]
fn finish_free(
    chains: &[ChainCosts],
    topo: &Topology,
    space: &Space,
    uniform: ParallelOutcome,
    best: Option<(FreeConfig, Vec<StageChoice>)>,
    value: f64,
    lo: f64,
    stop: Option<StopReason>,
    checks: usize,
    configs: usize,
    budget: &Budget,
) -> Result<ParallelOutcome, String> {
    let proven = lo >= value;
    let plan = match best {
        Some((cfg, stages)) => Some(rescored(chains, topo, space, cfg, &stages, value)?),
        None => uniform.plan,
    };
    let status = match (&plan, proven, stop) {
        (Some(_), true, _) => Status::Optimal,
        (Some(_), false, Some(reason)) => Status::Feasible { reason },
        (Some(_), false, None) => Status::Feasible {
            reason: StopReason::TimeLimit,
        },
        (None, _, Some(reason)) => Status::NoPlan { reason },
        (None, _, None) => Status::infeasible(
            "no free layout fits the accelerators' memory: allow more devices, ZeRO, smaller micro-batches or more TP",
        ),
    };
    let value = plan.as_ref().map_or(f64::INFINITY, |p| {
        objective_value(&p.score, Objective::TimePerSample)
    });
    Ok(ParallelOutcome {
        plan,
        value,
        bound: if proven { value } else { lo.min(value) },
        status,
        configs_solved: checks,
        configs,
        elapsed_s: budget.elapsed_s(),
        free: true,
    })
}

/// The layout of `stages` scored by the evaluator, its ZeRO stage lowered to the smallest
/// of equal value that fits when the space leaves ZeRO free.
fn rescored(
    chains: &[ChainCosts],
    topo: &Topology,
    space: &Space,
    cfg: FreeConfig,
    stages: &[StageChoice],
    value: f64,
) -> Result<ParallelPlan, String> {
    let chain = &chains[cfg.chain];
    let layout_with = |z: Zero| {
        packed(
            stages,
            chain.micro_batch,
            space.global_batch,
            z,
            space.schedule,
            cfg.recompute,
        )
    };
    checked_plan(
        chain,
        topo,
        space,
        (cfg.zero, layout_with),
        (value, Objective::TimePerSample),
    )
}

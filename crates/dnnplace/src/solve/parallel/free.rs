//! The search over free layouts (Piper's space, `docs/parallel.md`): stage `s` holds a
//! contiguous range of units on its own TP degree `t_s` and DP degree `d_s`; the micro-batch
//! `b`, the ZeRO stage and recomputation are the same for every stage. Objective: the time
//! per sample `max_s (m_s·T_s + sync_s) / B` with `m_s = B/(d_s·b)`. The iteration time
//! (the simulator's, [`super::free_iteration`]) reuses this module's DP and bisection with
//! another stage value (`Measure::IterationBound`: a stage's lower bound `W_s` on the
//! iteration, which also reads the suffix's `σ` and its summed `T`, so its fronts keep one
//! point per `σ`; `pareto`).
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
//! **In flight under 1F1B** ([`replica_in_flight`], the simulator's schedule): a replica
//! of stage `s` holds `min(m_s, ⌈Σ_{j≥s} d_j / d_s⌉)` micro-batches, so a stage's memory
//! depends on the replica sum of the suffix it starts, capped at `M = B/b` since only
//! `min(M, Σ_{j≥s} d_j)` matters: `σ_s = min(M, d_s + σ_{s+1})` (GPipe: `m_s`, and `σ ≡ 0`).
//! With one `d` it is `min(m, p − s)`.
//!
//! **Feasibility for a threshold `V`** is a DP over suffixes. State `(i, r, c)`: units
//! `i..U`, the suffix's first stage starting its search at offset `r` inside a machine, `c`
//! how the boundary into the suffix is priced: peer link (the first stage shares the machine
//! of the device before it), network while sharing it, network without sharing it. A state
//! holds a *front* of points `(σ, devices)`: for each capped replica sum `σ` a layout of the
//! suffix with every stage's value `≤ V` (or `< V`) and memory within the device's (its own
//! `σ_s` known), on the fewest devices (padding included), keeping only the points no other
//! beats in both (a smaller `σ` never costs an earlier stage memory, fewer devices never
//! hurt). A stage `i..j` on `(t, d)` from state `(i, r, c)` extends each point `(σ', n')`
//! of the next state `(j, r', c')` to `(min(M, d + σ'), n' + own)` when its memory with
//! `σ_s = min(M, d + σ')` fits; the last stage starts from `(0, 0)`. When the space fixes
//! the stage count `p`, a point also carries its suffix's stage count and dominates only
//! points of the same count. A threshold is feasible iff the front of `(0, 0, network)` has
//! a point on `≤ N` devices: exact, since every layout's suffixes are extensions of
//! front points or beaten by one (a beaten point's extension fits memory whenever the
//! original's does, on no more devices).
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
//! Complexity per threshold: `O(U²·F·|T|·|D|·P)` with `F ≤ min(M, N) + 1` the largest
//! front (`×p` with a fixed stage count), `|D|` the DP degrees with `d·b | B`, plus sorting
//! each state's candidates; the scan over `j` stops once the units' compute alone exceeds
//! `V` or the memory (one micro-batch in flight) the device's, and points past `N` devices
//! are dropped.

use super::partition::unit_prefix_sums;
use super::{
    checked_plan, objective_value, plan_uniform, zero_stages, Objective, ParallelOutcome,
    ParallelPlan, Space,
};
use crate::model::parallel::{
    all_gather_ms, all_reduce_ms, transfer_ms, ChainCosts, Layout, StageLayout, Topology, Zero,
};
use crate::model::schedule::{replica_in_flight, Schedule};
use crate::model::Link;
use crate::solve::budget::{Budget, Exhausted};
use crate::solve::{LayoutFamily, Status, StopReason};

/// One stage of a free layout: its units, `t`, `d`.
pub type StageChoice = (std::ops::Range<usize>, usize, usize);

/// Boundary classes of a suffix's first stage (module documentation).
const INTRA: usize = 0;
const NET_SHARE: usize = 1;
pub(super) const NET_APART: usize = 2;
/// A stage's way out to the next accelerator type's group ([`super::mixed`]): the suffix
/// after it lies on other machines, its boundary priced on the network.
const END: usize = 3;

/// What a stage is worth in the feasibility DP: its time per sample (the search of this
/// module), or its lower bound on the simulated iteration ([`super::free_iteration`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Measure {
    /// `(m_s·T_s + sync_s) / B`.
    PerSample,
    /// `W_s` of [`super::free_iteration`]'s module documentation.
    IterationBound,
}

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
    measure: Measure,
    global_batch: usize,
    schedule: Schedule,
    /// The DP sync overlapped with each stage's last backward (`--overlap-grad-reduce`).
    overlap_grad_reduce: bool,
    /// `M = B/b` under 1F1B, 0 under GPipe: the cap on a suffix's replica sum `σ`.
    sigma_cap: u32,
    /// The stage count the space fixes, carried in the fronts' keys.
    stages_fixed: Option<usize>,
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
    /// Per TP choice: prefix sums of the units' forward compute and forward TP time (what
    /// every stage's forward pass holds at least).
    forward_sums: Vec<Vec<f64>>,
    /// Per unit boundary `i`: `Σ_{u<i} min_t` forward part (`fill`, `Φ(i)`) and backward
    /// part (`drain`, `Δ(i)`: the rest of the unit's compute and TP time)
    /// ([`super::free_iteration`]).
    fill: Vec<f64>,
    drain: Vec<f64>,
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
        let mut forward_sums = Vec::new();
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
            forward_sums.push(forward_prefix_sums(chain, (t, ti), intra));
        }
        let (fill, drain) = least_passes(&sums, &forward_sums, chain.len());
        let links = [intra, topo.network];
        let priced = |xs: &[f64], l: Link| xs.iter().map(|&x| transfer_ms(l, x)).sum::<f64>();
        let staged = |xs: &[f64]| match topo.peer {
            None => priced(xs, topo.host),
            Some(_) => 0.0,
        };
        Tables {
            chain,
            cfg,
            measure: Measure::PerSample,
            global_batch: space.global_batch,
            schedule: space.schedule,
            overlap_grad_reduce: space.overlap_grad_reduce,
            sigma_cap: match space.schedule {
                Schedule::OneFOneB => (space.global_batch / b) as u32,
                _ => 0,
            },
            stages_fixed: space.stages,
            memory: topo.memory_bytes,
            per_machine: topo.per_machine,
            devices,
            tps,
            ds,
            sums,
            full,
            forward_sums,
            fill,
            drain,
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

    /// The same tables valuing each stage by its lower bound `W_s` on the simulated
    /// iteration ([`super::free_iteration`]).
    pub(super) fn for_iteration(self) -> Self {
        Tables {
            measure: Measure::IterationBound,
            ..self
        }
    }

    /// `(Φ, Δ)`: per unit boundary `i` the least forward and backward parts of the units
    /// before `i` (`fill`, `drain`).
    pub(super) fn passes(&self) -> (&[f64], &[f64]) {
        (&self.fill, &self.drain)
    }

    /// The same tables with `(Φ, Δ)` replaced by `passes`, each at most this table's own
    /// (several types: the least over the types, [`super::mixed_iteration`], since the
    /// stages before a stage may lie on any type).
    pub(super) fn with_passes(self, (fill, drain): (Vec<f64>, Vec<f64>)) -> Self {
        Tables {
            fill,
            drain,
            ..self
        }
    }

    /// What a stage is worth here.
    pub(super) fn measure(&self) -> Measure {
        self.measure
    }

    /// The configuration's lower bound on the time per sample (module documentation); for
    /// [`Measure::IterationBound`], `B` times it (every lane of stage `s` runs `m_s·T_s`,
    /// then its sync).
    pub(super) fn lower_bound(&self) -> f64 {
        let scale = match self.measure {
            Measure::PerSample => 1.0,
            Measure::IterationBound => self.global_batch as f64,
        };
        scale * self.per_sample_bound()
    }

    fn per_sample_bound(&self) -> f64 {
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
    /// The units `i..j` on TP choice `x` (`tps[x]`).
    x: usize,
    i: usize,
    j: usize,
    compute: f64,
    /// The units' forward compute and forward TP time (at most the forward pass `f_s`).
    forward: f64,
    m: f64,
    d: usize,
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
            x,
            i,
            j,
            compute: s[0][j] - s[0][i],
            forward: self.forward_sums[x][j] - self.forward_sums[x][i],
            m: (self.global_batch / (d * self.chain.micro_batch)) as f64,
            d,
            gather,
            sync,
            resident: shard(w, Zero::Parameters)
                + shard(g, Zero::Gradients)
                + shard(o, Zero::Optimizer),
            stash: s[4][j] - s[4][i],
            working: if self.cfg.recompute { working } else { 0.0 },
        }
    }

    /// The stage's time per micro-batch `T_s` on DP link `dp`, with its boundary in priced
    /// on `input` and out on `output` (`None`: no neighbour there).
    fn stage_time(
        &self,
        st: &Stage,
        dp: usize,
        input: Option<usize>,
        output: Option<usize>,
    ) -> f64 {
        let mut t = st.compute + st.gather[dp];
        if let Some(l) = input {
            t += self.forward[st.i][l] + self.host_backward[st.i];
        }
        if let Some(l) = output {
            t += self.backward[st.j][l] + self.host_forward[st.j];
        }
        t
    }

    /// A floor of the stage's value over every suffix after it, from its time `t` on DP
    /// link `dp`: the value itself per sample; `Φ(i) + m·T + max(sync, Δ(i))` for `W_s`,
    /// with the sync overlapped `Φ(i) + m·T + max(sync − b̄, Δ(i))` (`b̄ = T − φ ≥ b_s`).
    fn value_floor(&self, st: &Stage, dp: usize, t: f64) -> f64 {
        match self.measure {
            Measure::PerSample => (st.m * t + st.sync[dp]) / self.global_batch as f64,
            Measure::IterationBound => {
                let sync = if self.overlap_grad_reduce {
                    st.sync[dp] - (t - st.forward)
                } else {
                    st.sync[dp]
                };
                self.fill[st.i] + st.m * t + sync.max(self.drain[st.i])
            }
        }
    }

    /// The stage's value from its time `t` on DP link `dp`, when the suffix it starts has
    /// the capped replica sum `sigma` and the suffix after it takes at least `rest` per
    /// micro-batch (`Σ_{k>s} T_k`): `W_s` of [`super::free_iteration`] with `n` the
    /// replica's micro-batches in flight (its forwards before its first backward and its
    /// backwards after its last forward), `f̄ = T − (compute − φ)`, `b̄ = T − φ`.
    fn value(&self, st: &Stage, dp: usize, t: f64, sigma: u32, rest: f64) -> f64 {
        let floor = self.value_floor(st, dp, t);
        if self.measure == Measure::PerSample {
            return floor;
        }
        let n = replica_in_flight(self.schedule, st.m as usize, st.d, sigma as usize) as f64;
        let (f_hi, b_hi) = (t - (st.compute - st.forward), t - st.forward);
        let idle = if n < st.m {
            (rest - (n - 1.0) * f_hi).max(0.0) + (rest - (n - 1.0) * b_hi).max(0.0)
        } else {
            (rest - (st.m - 1.0) * f_hi.min(b_hi)).max(0.0)
        };
        // At most `n` micro-batches in flight, each for a round trip of `T + R`.
        let rounds = (st.m / n).ceil() * (t + rest);
        floor + idle.max(rounds - st.m * t)
    }

    /// A floor of the stage's value that grows with its last unit `j`: once it passes the
    /// threshold no longer stage from `i` qualifies (module documentation).
    fn scan_floor(&self, st: &Stage) -> f64 {
        match self.measure {
            Measure::PerSample => st.m * st.compute / self.global_batch as f64,
            Measure::IterationBound => self.fill[st.i] + st.m * st.compute,
        }
    }

    /// Memory per device of stage `st` when the suffix it starts has the capped replica sum
    /// `sigma` (its own `d` included; [`replica_in_flight`]).
    fn memory_at(&self, st: &Stage, sigma: u32) -> f64 {
        let held = replica_in_flight(self.schedule, st.m as usize, st.d, sigma as usize) as f64;
        st.resident + held * st.stash + st.working
    }

    /// The capped replica sum of a suffix whose first stage has `d` replicas and whose rest
    /// has `rest`: `min(M, d + rest)` under 1F1B, 0 under GPipe (the count does not need it).
    fn sigma(&self, d: usize, rest: u32) -> u32 {
        (d as u32 + rest).min(self.sigma_cap)
    }
}

/// How a point was reached: the stage `i..j` on TP choice `x`, DP `d`, the next state's
/// class and the key `(stages, σ)` of the point it continues (the stage count is this
/// point's less one when the space fixes it), the stage's value.
#[derive(Clone, Copy)]
struct Choice {
    j: u16,
    x: u8,
    d: u32,
    next: u8,
    next_sigma: u32,
    value: f64,
}

/// One point of a state's front (module documentation): a suffix with `stages` stages
/// (0 when the space leaves the count free), capped replica sum `sigma`, on `devices`
/// devices; the front keeps, per `stages`, the points no other point beats in both `sigma`
/// and `devices`, by ascending `sigma` (so by descending `devices`).
#[derive(Clone, Copy)]
pub(super) struct Point {
    pub(super) stages: u16,
    pub(super) sigma: u32,
    pub(super) devices: u32,
    /// [`Measure::IterationBound`]: a lower bound on the suffix's `Σ T_k` (the least over
    /// the layouts this point stands for); 0 otherwise.
    pub(super) rest: f64,
    how: Choice,
}

/// The key of a suffix handed over to other accelerator types ([`super::mixed`]): its
/// stage count (0 when free) and capped replica sum.
pub(super) type Key = (u16, u32);

/// A suffix handed over to other accelerator types: its key and, under
/// [`Measure::IterationBound`], a lower bound on its `Σ T_k` (0 otherwise).
pub(super) type Handed = (Key, f64);

/// A feasible layout of one check: its stages `(units, t, d)` and value.
pub(super) struct Found {
    pub(super) stages: Vec<StageChoice>,
    pub(super) value: f64,
}

/// The fronts of one feasibility DP: `fronts[idx(i, r, c)]`.
pub(super) struct Dp {
    n: usize,
    pm: usize,
    pub(super) fronts: Vec<Vec<Point>>,
}

impl Dp {
    pub(super) fn idx(&self, i: usize, r: usize, c: usize) -> usize {
        (i * self.pm + r) * 3 + c
    }

    /// The point of state `(i, r, c)` with key `key`.
    fn point(&self, (i, r, c): (usize, usize, usize), key: Key) -> Option<&Point> {
        self.fronts[self.idx(i, r, c)]
            .iter()
            .find(|p| (p.stages, p.sigma) == key)
    }

    /// The first point of state `(i, 0, network)` with `stages` stages (any when `None`)
    /// on at most `devices` devices: the least `σ` of that count.
    pub(super) fn root(&self, i: usize, stages: Option<u16>, devices: usize) -> Option<Key> {
        self.fronts[self.idx(i, 0, NET_APART)]
            .iter()
            .find(|p| stages.is_none_or(|k| k == p.stages) && p.devices as usize <= devices)
            .map(|p| (p.stages, p.sigma))
    }

    /// The stages from the point `key` of state `(i, r, c)` to the end of the chain or to a
    /// stage that leaves for another group ([`END`]): the stages, their largest value, the
    /// unit where the rest starts and the rest's key.
    pub(super) fn trace(
        &self,
        tb: &Tables,
        (mut i, mut r, mut c): (usize, usize, usize),
        mut key: Key,
    ) -> (Found, usize, Key) {
        let mut out = Found {
            stages: Vec::new(),
            value: 0.0,
        };
        while i < self.n {
            let p = self.point((i, r, c), key).expect("a traced point exists");
            let ch = p.how;
            let t = tb.tps[ch.x as usize].0;
            let d = ch.d as usize;
            let start = r.div_ceil(t) * t;
            out.stages.push((i..ch.j as usize, t, d));
            out.value = out.value.max(ch.value);
            key = (p.stages.saturating_sub(1), ch.next_sigma);
            (i, r, c) = (ch.j as usize, (start + t * d) % self.pm, ch.next as usize);
            if c == END {
                break;
            }
        }
        (out, i, key)
    }
}

/// The feasibility DP for threshold `v` (module documentation): a packed layout whose every
/// stage is worth `≤ v` (`< v` when `strict`), or `None`.
pub(super) fn feasible(
    tb: &Tables,
    v: f64,
    strict: bool,
    stages: Option<usize>,
    budget: &Budget,
) -> Result<Option<Found>, Exhausted> {
    let dp = run_dp(tb, v, strict, &|_| &[], budget)?;
    let Some(key) = dp.root(0, stages.map(|p| p as u16), tb.devices) else {
        return Ok(None);
    };
    Ok(Some(dp.trace(tb, (0, 0, NET_APART), key).0))
}

/// The DP's fronts for threshold `v` (module documentation). `ends(j)`: the keys (with the
/// least `Σ T` of each) with which the units `j..U` can be laid out on the other groups (a
/// cluster of several types, [`super::mixed`]); a stage ending at `j` may then hand the
/// rest over, its way out priced on the network, at no device of this group. One type:
/// none.
pub(super) fn run_dp<'e>(
    tb: &Tables,
    v: f64,
    strict: bool,
    ends: &dyn Fn(usize) -> &'e [Handed],
    budget: &Budget,
) -> Result<Dp, Exhausted> {
    let n = tb.chain.len();
    let pm = tb.per_machine;
    let states = (n + 1) * pm * 3;
    budget.reserve(
        "the free-layout DP",
        states as f64 * std::mem::size_of::<Vec<Point>>() as f64,
    )?;
    let mut dp = Dp {
        n,
        pm,
        fronts: vec![Vec::new(); states],
    };
    let ok = |x: f64| if strict { x < v } else { x <= v };
    let mut cand: Vec<Vec<Point>> = vec![Vec::new(); pm * 3];
    for i in (0..n).rev() {
        budget.check()?;
        for (x, &(t, _)) in tb.tps.iter().enumerate() {
            for &d in &tb.ds {
                if t * d > tb.devices {
                    break;
                }
                let mut working: f64 = 0.0;
                for j in i + 1..=n {
                    working = working.max(tb.full[x][j - 1]);
                    let st = tb.stage(x, i, j, d, working);
                    if !ok(tb.scan_floor(&st)) || tb.memory_at(&st, tb.sigma(d, 0)) > tb.memory {
                        break;
                    }
                    let hand_over = if j < n { ends(j) } else { &[] };
                    for r in 0..pm {
                        relax(tb, &st, r, &ok, hand_over, &dp, &mut cand);
                    }
                }
            }
        }
        let mut added = 0;
        for (slot, points) in cand.iter_mut().enumerate() {
            let front = &mut dp.fronts[i * pm * 3 + slot];
            pareto(tb.measure, points, front);
            added += front.len();
        }
        budget.reserve(
            "the free-layout DP's fronts",
            (added * std::mem::size_of::<Point>()) as f64,
        )?;
    }
    Ok(dp)
}

/// Moves the points of `points` no other beats into `front` (module documentation). Under
/// [`Measure::IterationBound`] a larger `σ` may lower a stage's `W_s` (more micro-batches
/// in flight), so only points of the same key are compared: per key the fewest devices,
/// carrying the least `rest` of the key's points (a lower bound for each of them).
fn pareto(measure: Measure, points: &mut Vec<Point>, front: &mut Vec<Point>) {
    points.sort_unstable_by_key(|p| (p.stages, p.sigma, p.devices));
    if measure == Measure::IterationBound {
        for p in points.drain(..) {
            match front.last_mut() {
                Some(q) if (q.stages, q.sigma) == (p.stages, p.sigma) => {
                    q.rest = q.rest.min(p.rest);
                }
                _ => front.push(p),
            }
        }
        return;
    }
    let mut last: Option<(u16, u32)> = None;
    for p in points.drain(..) {
        if last.is_some_and(|(k, dev)| k == p.stages && dev <= p.devices) {
            continue;
        }
        last = Some((p.stages, p.devices));
        front.push(p);
    }
}

/// The points the stage `st` (units `i..j` on TP choice `x`, degree `t`, with `d` replicas)
/// gives to the states `(i, r, ·)`, pushed to `cand[r·3 + class]`. `hand_over`: the keys
/// with which the suffix after `j` may go to other groups ([`run_dp`]'s `ends`).
fn relax(
    tb: &Tables,
    st: &Stage,
    r: usize,
    ok: &impl Fn(f64) -> bool,
    hand_over: &[Handed],
    dp: &Dp,
    cand: &mut [Vec<Point>],
) {
    let (i, j, x, t) = (st.i, st.j, st.x, tb.tps[st.x].0);
    let (n, pm, d) = (dp.n, dp.pm, st.d);
    let w = t * d;
    let start = r.div_ceil(t) * t;
    let inside = start % pm + w <= pm;
    let shares = r != 0 && start + w <= pm;
    let after = (start + w) % pm;
    let link = if inside { 0 } else { 1 };
    let own = (start - r + w) as u32;
    let last = [Point {
        stages: 0,
        sigma: 0,
        devices: 0,
        rest: 0.0,
        how: st_choice(j, x, d, 0, 0.0),
    }];
    let handed: Vec<Point> = hand_over
        .iter()
        .map(|&((k, sigma), rest)| Point {
            stages: k,
            sigma,
            devices: 0,
            rest,
            how: st_choice(j, x, d, 0, 0.0),
        })
        .collect();
    // The next state's classes, how this stage's way out is priced, and its points.
    let front = |c: usize| &dp.fronts[dp.idx(j, after, c)][..];
    let outs: [(usize, Option<usize>, &[Point]); 3] = if j == n {
        [
            (NET_APART, None, &last[..]),
            (END, None, &[]),
            (END, None, &[]),
        ]
    } else if inside {
        [
            (INTRA, Some(0), front(INTRA)),
            (NET_APART, Some(1), front(NET_APART)),
            (END, Some(1), &handed[..]),
        ]
    } else {
        [
            (NET_SHARE, Some(1), front(NET_SHARE)),
            (NET_APART, Some(1), front(NET_APART)),
            (END, Some(1), &handed[..]),
        ]
    };
    let classes: &[(usize, usize)] = if shares {
        &[(INTRA, 0), (NET_SHARE, 1)]
    } else {
        &[(NET_APART, 1)]
    };
    let count = |k: u16| if tb.stages_fixed.is_some() { k + 1 } else { 0 };
    for &(class, input) in classes {
        let input = (i > 0).then_some(input);
        for &(next, output, points) in &outs {
            if points.is_empty() {
                continue;
            }
            let t = tb.stage_time(st, link, input, output);
            if !ok(tb.value_floor(st, link, t)) {
                continue;
            }
            for p in points {
                let (stages, devices) = (count(p.stages), own + p.devices);
                let sigma = tb.sigma(d, p.sigma);
                if devices as usize > tb.devices
                    || tb.stages_fixed.is_some_and(|f| stages as usize > f)
                    || tb.memory_at(st, sigma) > tb.memory
                {
                    continue;
                }
                let value = tb.value(st, link, t, sigma, p.rest);
                if !ok(value) {
                    continue;
                }
                let rest = match tb.measure {
                    Measure::PerSample => 0.0,
                    Measure::IterationBound => t + p.rest,
                };
                cand[r * 3 + class].push(Point {
                    stages,
                    sigma,
                    devices,
                    rest,
                    how: st_choice(j, x, d, next, value).with_next_sigma(p.sigma),
                });
            }
        }
    }
}

/// The choice of the stage ending at `j` on `(x, d)` towards class `next`, worth `value`.
fn st_choice(j: usize, x: usize, d: usize, next: usize, value: f64) -> Choice {
    Choice {
        j: j as u16,
        x: x as u8,
        d: d as u32,
        next: next as u8,
        next_sigma: 0,
        value,
    }
}

impl Choice {
    fn with_next_sigma(self, next_sigma: u32) -> Choice {
        Choice { next_sigma, ..self }
    }
}

/// Per TP choice `(t, ti)`: prefix sums of each unit's forward compute plus its forward TP
/// all-reduces on `tp_link` (the part of [`unit_prefix_sums`]' time that lies in the forward
/// pass, [`crate::score::parallel::pass_times`]).
fn forward_prefix_sums(chain: &ChainCosts, (t, ti): (usize, usize), tp_link: Link) -> Vec<f64> {
    let mut out = vec![0.0; chain.len() + 1];
    for (u, unit) in chain.units.iter().enumerate() {
        let k = &unit.costs[ti];
        let ar = all_reduce_ms(tp_link, k.tp_all_reduce_bytes, t);
        out[u + 1] = out[u] + k.forward_ms + f64::from(k.tp_forward_all_reduces) * ar;
    }
    out
}

/// `(fill, drain)` of [`Tables`] from the per-TP-choice prefix sums of the whole time
/// (`sums[x][0]`) and of its forward part: each unit at its least over the TP choices.
fn least_passes(sums: &[[Vec<f64>; 5]], forward: &[Vec<f64>], n: usize) -> (Vec<f64>, Vec<f64>) {
    let least = |f: &dyn Fn(usize, usize) -> f64, u: usize| {
        (0..sums.len())
            .map(|x| f(x, u))
            .fold(f64::INFINITY, f64::min)
    };
    let whole = |x: usize, u: usize| sums[x][0][u + 1] - sums[x][0][u];
    let fwd = |x: usize, u: usize| forward[x][u + 1] - forward[x][u];
    let bwd = |x: usize, u: usize| whole(x, u) - fwd(x, u);
    let (mut fill, mut drain) = (vec![0.0; n + 1], vec![0.0; n + 1]);
    if sums.is_empty() {
        return (fill, drain);
    }
    for u in 0..n {
        fill[u + 1] = fill[u] + least(&fwd, u);
        drain[u + 1] = drain[u] + least(&bwd, u);
    }
    (fill, drain)
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
        overlap_grad_reduce: false,
    }
}

/// Every configuration of `space` valued by `measure`, by ascending lower bound.
pub(super) fn configs<'a>(
    chains: &'a [ChainCosts],
    topo: &Topology,
    space: &Space,
    measure: Measure,
) -> Vec<(f64, Tables<'a>)> {
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
                let mut tb = Tables::new(chain, topo, space, cfg);
                if measure == Measure::IterationBound {
                    tb = tb.for_iteration();
                }
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
    let tables = configs(chains, topo, space, Measure::PerSample);
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
    finish_free(chains, topo, space, uniform, run, tables.len(), budget)
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
pub(super) fn check_all(
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

/// The outcome: the bisection's best free layout (or the uniform one when no free layout
/// beat it), re-scored, with the bisection's bound `lo`; `configs` configurations searched.
fn finish_free(
    chains: &[ChainCosts],
    topo: &Topology,
    space: &Space,
    uniform: ParallelOutcome,
    run: Bisection<(FreeConfig, Vec<StageChoice>)>,
    configs: usize,
    budget: &Budget,
) -> Result<ParallelOutcome, String> {
    let Bisection {
        lo,
        hi: value,
        best,
        checks,
        stop,
    } = run;
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
        (None, _, None) => Status::infeasible(LayoutFamily::Free),
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
        valuation: super::Valuation::Model,
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
        .overlapped(space.overlap_grad_reduce)
    };
    checked_plan(
        chain,
        topo,
        space,
        (cfg.zero, layout_with),
        (value, Objective::TimePerSample),
    )
}

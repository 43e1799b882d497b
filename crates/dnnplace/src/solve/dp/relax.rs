//! The recurrence of [`super`], relaxed level by level over a family of ideals.
//!
//! For an ideal `I` of level p (p groups) every state `(ℓ', k')` is
//!
//! ```text
//! dp[ℓ'][k'][I] = min( dp[ℓ'][k'−1][I], dp[ℓ'−1][k'][I],
//!                      min_{J ⊊ I} max(dp[ℓ'][k'−1][J], acc(I \ J)),
//!                      min_{J ⊊ I} max(dp[ℓ'−1][k'][J], cpu(I \ J)) )
//! ```
//!
//! and every `J ⊊ I` lies on a lower level, so the ideals of one level are independent:
//! they are relaxed in parallel (rayon), each writing only its own row of the table. Only
//! the pairs the [`super::pruning`] rules leave are priced. Each state keeps a back link
//! (how it was reached and from which ideal) for [`super::reconstruct`].
//!
//! The family is any set of ideals ordered by level with a subset test ([`Family`]): all
//! ideals of the group DAG for the DP, or the prefixes of one topological order for the
//! chain split ([`crate::solve::dp::chain`]), where `J ⊊ I` is just an earlier prefix.
//!
//! **Positioned memory** ([`Positioned`], planning under 1F1B): a stage's stash count
//! depends on its position, so the states count devices *exactly* — no "one device fewer"
//! step — and the stage `I \ J` reaching state `(ℓ', k')` is stage `s = ℓ' + k' − 1`
//! (0-based) of a chain of `P` stages. It fits an accelerator iff
//! `size(I \ J) + (c_s − 1)·A(I \ J) ≤ M` with `c_s` the schedule's count at `s`
//! ([`crate::model::schedule::Pipeline::in_flight`]); states with `ℓ' + k' > P` are not
//! used. The driver ([`super`]) runs this once per `P`. As states count devices exactly,
//! a `J` none of whose live states one device fewer is finite cannot improve `I` and is
//! skipped before its pair is priced: under a binding memory most ideals are beyond
//! `P − 1` devices for small `P` (a generated 8-layer GPT-2 under 1F1B: 53,195 pairs priced
//! instead of 1,317,834, the same plan).
//!
//! **Recomputation** (`--recompute auto`, [`crate::model::recompute`]): the accelerator
//! stage cost at position `s` is then
//!
//! ```text
//! acc_s(I \ J) = load(I \ J)           if size + (c_s − 1)·A ≤ M          (no recompute)
//!              = load(I \ J) + R(I \ J) if not, and size + c_s·In ≤ M      (recompute)
//!              = ∞                     otherwise
//! ```
//!
//! (`size`, `A`, `In`, `R` of `I \ J`: bytes with one micro-batch, stash, stage input,
//! forward compute; [`crate::solve::ideal_cost`]), and the recurrence is unchanged with
//! `acc_s` in place of `acc`: the choice is the stage's own, it changes nothing of any other
//! stage, and `load ≤ load + R`, so the DP stays exact. `In` and `R` are priced only for
//! a pair whose stage does not fit without recomputing.
//!
//! The budget (time, Ctrl-C) is checked between levels and every few hundred ideals
//! inside a level.
//!
//! Complexity: O(Σ_I W_I · (s + φ + (k+1)(ℓ+1))) for W_I pairs left in the window of `I`,
//! s stored words of a subset test and φ the frontier width of a pair's cut lists.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rayon::prelude::*;

use super::pruning::{Bands, Pruning, ReachMemo, Windows};
use crate::model::numerics::Sum;
use crate::model::schedule::Pipeline;
use crate::solve::budget::{Budget, Exhausted};
use crate::solve::ideal_cost::{PairCost, Summaries};
use crate::solve::ideals::Ideals;

/// A family of ideals ordered by level, `∅` first and the whole set last.
pub trait Family: Sync {
    /// What the subset test needs of the larger ideal, looked up once per ideal.
    type Top<'a>: Copy
    where
        Self: 'a;
    /// Ideals of level p are `level_start()[p] .. level_start()[p + 1]`.
    fn level_start(&self) -> &[usize];
    /// Ideal `i` as the larger side of subset tests.
    fn top(&self, i: usize) -> Self::Top<'_>;
    /// `J ⊆ I` for `top = self.top(i)`, asked only for `J` on a lower level than `I`.
    fn is_subset(&self, j: usize, top: Self::Top<'_>) -> bool;
    /// The groups of `I_i \ I_j` for `J ⊆ I` (asked only where a load cannot be certified
    /// from the summaries' sums: [`crate::solve::ideal_cost`]).
    fn difference(&self, i: usize, j: usize) -> Vec<usize>;
    /// A word with `J ⊆ I ⇒ signature(J) & !signature(I) = 0`, for a quick rejection
    /// before [`Family::is_subset`] (0 when there is none).
    fn signature(&self, _i: usize) -> u64 {
        0
    }
}

impl Family for Ideals {
    type Top<'a> = (usize, &'a [u64]);

    fn level_start(&self) -> &[usize] {
        &self.level_start
    }

    #[inline(always)]
    fn top(&self, i: usize) -> (usize, &[u64]) {
        (i, self.dense_row(i))
    }

    #[inline(always)]
    fn is_subset(&self, j: usize, (i, dense): (usize, &[u64])) -> bool {
        if dense.is_empty() {
            Ideals::is_subset(self, j, i)
        } else {
            self.dense_row(j)
                .iter()
                .zip(dense)
                .all(|(x, y)| x & !y == 0)
        }
    }

    fn difference(&self, i: usize, j: usize) -> Vec<usize> {
        self.get(i).difference(&self.get(j))
    }

    /// The first word of the dense bitset (groups 0–63), when there is one.
    fn signature(&self, i: usize) -> u64 {
        self.dense_row(i).first().copied().unwrap_or(0)
    }
}

/// The prefixes `P_0 = ∅ ⊂ P_1 ⊂ … ⊂ P_n` of one order: each prefix is its own level.
pub struct Prefixes<'o> {
    level_start: Vec<usize>,
    order: &'o [usize],
}

impl<'o> Prefixes<'o> {
    pub fn new(order: &'o [usize]) -> Prefixes<'o> {
        Prefixes {
            level_start: (0..=order.len() + 1).collect(),
            order,
        }
    }
}

impl Family for Prefixes<'_> {
    type Top<'a>
        = ()
    where
        Self: 'a;

    fn level_start(&self) -> &[usize] {
        &self.level_start
    }

    fn top(&self, _: usize) {}

    #[inline(always)]
    fn is_subset(&self, _: usize, _: ()) -> bool {
        true
    }

    fn difference(&self, i: usize, j: usize) -> Vec<usize> {
        self.order[j..i].to_vec()
    }
}

/// How a state was reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// Not reached (infinite value), or the empty ideal.
    None,
    /// `I \ J` on an accelerator, from `J`'s state `(ℓ', k'−1)`.
    Accelerator(u32),
    /// `I \ J` on a CPU, from `J`'s state `(ℓ'−1, k')`.
    Cpu(u32),
    /// The same ideal with one accelerator fewer.
    FewerAccelerators,
    /// The same ideal with one CPU fewer.
    FewerCpus,
}

/// The DP table: `value[i·S + ℓ'·(k+1) + k']` and its back links, S = (k+1)(ℓ+1).
pub struct Table {
    pub value: Vec<f64>,
    pub link: Vec<Link>,
    pub k: usize,
    pub l: usize,
}

impl Table {
    /// States per ideal.
    pub fn states(&self) -> usize {
        (self.k + 1) * (self.l + 1)
    }

    /// Bytes per ideal of a table with `states` states.
    pub fn bytes_per_ideal(states: usize) -> usize {
        states * (std::mem::size_of::<f64>() + std::mem::size_of::<Link>())
    }

    /// The value of state `(l, k)` at ideal `i`.
    pub fn at(&self, i: usize, l: usize, k: usize) -> f64 {
        self.value[i * self.states() + l * (self.k + 1) + k]
    }
}

/// What the relaxation reads.
pub struct Relaxation<'a, F: Family> {
    pub family: &'a F,
    pub summaries: &'a Summaries,
    pub cost: &'a PairCost,
    pub pruning: &'a Pruning,
    pub windows: &'a Windows,
    /// Memory per accelerator, bytes.
    pub memory: f64,
    /// Exact device counts and position-dependent stage memory (module documentation).
    pub positioned: Option<Positioned>,
    /// With positioned memory: each ideal's forward compute
    /// ([`PairCost::forward_sums`]), when stages may recompute (module documentation).
    pub forward: Option<&'a [Sum]>,
}

/// A chain of exactly `stages` stages run by `pipeline` (module documentation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Positioned {
    pub pipeline: Pipeline,
    pub stages: usize,
}

/// How a stage fits an accelerator at its position.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StageFit {
    /// With its stash held.
    Held,
    /// Only if it recomputes: with `in_flight` micro-batches its stash does not fit.
    Recompute { in_flight: usize },
    /// Beyond the chain's stages.
    Beyond,
}

impl Positioned {
    /// How a stage of `size` bytes stashing `stash` per further micro-batch fits `memory`
    /// as the stage reaching a state of `devices` devices.
    #[inline]
    pub fn fit(&self, devices: usize, size: f64, stash: f64, memory: f64) -> StageFit {
        if devices > self.stages {
            return StageFit::Beyond;
        }
        let in_flight = self.pipeline.in_flight(self.stages, devices - 1);
        if size + (in_flight - 1) as f64 * stash <= memory {
            StageFit::Held
        } else {
            StageFit::Recompute { in_flight }
        }
    }
}

/// Levels smaller than this are relaxed on the calling thread.
const PARALLEL_LEVEL: usize = 8;
/// Ideals between two budget checks inside a level.
const CHECK_EVERY: usize = 256;

/// Table entries written between two budget checks while the table is filled (a table of
/// a GiB takes seconds to fault in on a loaded machine).
const FILL_CHUNK: usize = 1 << 22;

/// `len` copies of `x`, written in chunks with a budget check after each.
fn filled<T: Copy>(len: usize, x: T, budget: &Budget) -> Result<Vec<T>, Exhausted> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let more = FILL_CHUNK.min(len - out.len());
        out.extend(std::iter::repeat_n(x, more));
        budget.check()?;
    }
    Ok(out)
}

impl<F: Family> Relaxation<'_, F> {
    /// Fills the table, level by level. Returns it and the number of pairs priced, or why
    /// it stopped and the level it was relaxing (0 while the table is being allocated).
    pub fn run(&self, budget: &Budget) -> Result<(Table, u64), (Exhausted, usize)> {
        let (k, l) = (self.pruning.k, self.pruning.l);
        let s = (k + 1) * (l + 1);
        let n_ideals = self.summaries.len();
        let mut value = filled(n_ideals * s, f64::INFINITY, budget).map_err(|r| (r, 0))?;
        let mut link = filled(n_ideals * s, Link::None, budget).map_err(|r| (r, 0))?;
        value[..s].iter_mut().for_each(|x| *x = 0.0);
        // The candidates' signatures in window order: read sequentially, they reject most
        // non-subsets without touching the ideals' rows.
        let signatures: Vec<u64> = self
            .windows
            .by_fpga
            .iter()
            .map(|&j| self.family.signature(j as usize))
            .collect();
        let pairs = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        let levels = self.family.level_start();
        for level in 1..levels.len() - 1 {
            let (lo, hi) = (levels[level], levels[level + 1]);
            let (done, rest) = value.split_at_mut(lo * s);
            let (rest, links) = (&mut rest[..(hi - lo) * s], &mut link[lo * s..hi * s]);
            let one = |(offset, (best, back)): (usize, (&mut [f64], &mut [Link]))| {
                if offset % CHECK_EVERY == CHECK_EVERY - 1 && budget.is_exhausted() {
                    stop.store(true, Ordering::Relaxed);
                }
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let evaluated = self.relax_ideal(lo + offset, lo, done, best, back, &signatures);
                pairs.fetch_add(evaluated, Ordering::Relaxed);
            };
            if hi - lo < PARALLEL_LEVEL {
                rest.chunks_mut(s)
                    .zip(links.chunks_mut(s))
                    .enumerate()
                    .for_each(one);
            } else {
                rest.par_chunks_mut(s)
                    .zip(links.par_chunks_mut(s))
                    .enumerate()
                    .for_each(one);
            }
            budget.check().map_err(|r| (r, level))?;
        }
        Ok((Table { value, link, k, l }, pairs.into_inner()))
    }

    /// Relaxes every state of ideal `i` (level starting at `lo`) from the rows `done` of
    /// lower levels. Returns the number of pairs priced.
    fn relax_ideal(
        &self,
        i: usize,
        lo: usize,
        done: &[f64],
        best: &mut [f64],
        back: &mut [Link],
        signatures: &[u64],
    ) -> u64 {
        let p = self.pruning;
        let bands = p.bands(self.summaries.heads[i].fpga.value());
        if bands.iter().all(|&(a, b)| a > b) {
            return 0;
        }
        let at = Target {
            i,
            lo,
            bands,
            top: self.family.top(i),
            outside: !self.family.signature(i),
        };
        let mut evaluated = 0u64;
        if p.k > 0 {
            evaluated += self.last_on_accelerator(&at, done, best, back, signatures);
        }
        if p.l > 0 {
            evaluated += self.last_on_cpu(&at, done, best, back);
        }
        if self.positioned.is_none() {
            fewer_devices(p.k, p.l, best, back);
        }
        evaluated
    }

    /// Exact device counts: `J` can extend to a live state of `I` only if its own state
    /// one device fewer (`step` back in its row: 1 an accelerator, `k + 1` a CPU) is
    /// finite, within the chain length; where memory binds, most `J` are reached by no
    /// state, and skipping them before pricing changes nothing.
    #[inline]
    fn reachable(&self, bands: &Bands, row: &[f64], step: usize, from_l: usize) -> bool {
        let k1 = self.pruning.k + 1;
        let chain = self.positioned.map_or(usize::MAX, |x| x.stages);
        bands
            .iter()
            .enumerate()
            .skip(from_l)
            .any(|(cl, &(ka, kb))| {
                (ka.max(if step == 1 { 1 } else { 0 })..=kb)
                    .take_while(|ck| cl + ck <= chain)
                    .any(|ck| row[cl * k1 + ck - step].is_finite())
            })
    }

    /// The last stage `I \ J` on an accelerator, for the `J` in the window of `I`'s
    /// accelerator key (by decreasing key, while the key difference stays within the cap of
    /// the states still improvable; the keys are rounded sums, within `1e-9 · F(I)` of the
    /// exact difference). Returns the pairs priced.
    fn last_on_accelerator(
        &self,
        at: &Target<'_, F>,
        done: &[f64],
        best: &mut [f64],
        back: &mut [Link],
        signatures: &[u64],
    ) -> u64 {
        let p = self.pruning;
        let s = (p.k + 1) * (p.l + 1);
        let fi = self.summaries.heads[at.i].fpga.value();
        let fpga_slack = 1e-9 * fi.abs();
        let w = self.windows;
        let (a, b) = Windows::window(&w.fpga_keys, fi, p.bound);
        let mut limit = p.cap(&at.bands, best, 1, 0);
        let mut memo = ReachMemo::default();
        let mut above = p.reach(&at.bands, best, &mut memo);
        let keys = &w.fpga_keys;
        let mut pos = a + keys[a..b].partition_point(|&x| x <= above);
        let mut evaluated = 0;
        while pos > a {
            pos -= 1;
            let fj = keys[pos];
            if fi - fj > limit + fpga_slack {
                break;
            }
            if fj > above {
                // `above` fell since `pos` was chosen: skip to the keys below it.
                pos = a + keys[a..pos].partition_point(|&x| x <= above);
                continue;
            }
            let j = w.by_fpga[pos] as usize;
            let row = |j: usize| &done[j * s..(j + 1) * s];
            if j >= at.lo
                || signatures[pos] & at.outside != 0
                || (self.positioned.is_some() && !self.reachable(&at.bands, row(j), 1, 0))
                || !self.family.is_subset(j, at.top)
            {
                continue;
            }
            let Some(load) =
                self.cost
                    .accelerator_load(self.summaries, at.i, j, self.memory, || {
                        self.family.difference(at.i, j)
                    })
            else {
                continue;
            };
            evaluated += 1;
            if load > p.bound {
                continue;
            }
            if self.extend_by_accelerator(at, j, load, row(j), best, back) {
                limit = p.cap(&at.bands, best, 1, 0);
                above = p.reach(&at.bands, best, &mut memo);
            }
        }
        evaluated
    }

    /// Every live state `(cl, ck)` of `I` from `J`'s state one accelerator fewer, the last
    /// stage `I \ J` of compute and communication `load` on an accelerator: held whole, or
    /// (positioned, when only that fits) recomputing its activations from its inputs at
    /// the price of its forward compute again, or not at all. Whether a state improved.
    #[inline]
    fn extend_by_accelerator(
        &self,
        at: &Target<'_, F>,
        j: usize,
        load: f64,
        row: &[f64],
        best: &mut [f64],
        back: &mut [Link],
    ) -> bool {
        let (k1, i) = (self.pruning.k + 1, at.i);
        let heads = &self.summaries.heads;
        let (hi, hj) = (&heads[i], &heads[j]);
        let (size, stash) = (hi.size.minus_sum(hj.size).value(), hi.stash - hj.stash);
        // (In, load + R) of the stage, priced the first time a state needs it.
        let mut recomputed: Option<(f64, f64)> = None;
        let mut improved = false;
        for (cl, &(ka, kb)) in at.bands.iter().enumerate() {
            for ck in ka.max(1)..=kb {
                let stage_load = match self
                    .positioned
                    .map(|x| x.fit(cl + ck, size, stash, self.memory))
                {
                    None | Some(StageFit::Held) => load,
                    Some(StageFit::Beyond) => continue,
                    Some(StageFit::Recompute { in_flight }) => {
                        let Some(forward) = self.forward else {
                            continue;
                        };
                        let (input, slower) = *recomputed.get_or_insert_with(|| {
                            let input = self.cost.stage_input_bytes(
                                self.summaries.crossing(i),
                                self.summaries.crossing(j),
                            );
                            let r = self.cost.forward_compute(forward[i], forward[j], || {
                                self.family.difference(i, j)
                            });
                            (input, load + r)
                        });
                        if size + in_flight as f64 * input > self.memory
                            || slower > self.pruning.bound
                        {
                            continue;
                        }
                        slower
                    }
                };
                let st = cl * k1 + ck;
                let v = row[st - 1].max(stage_load);
                if v < best[st] {
                    best[st] = v;
                    back[st] = Link::Accelerator(j as u32);
                    improved = true;
                }
            }
        }
        improved
    }

    /// The last stage `I \ J` on a CPU, for the `J` in the window of `I`'s CPU key (by
    /// decreasing key while within the cap), each live state from `J`'s state one CPU
    /// fewer. Returns the pairs priced.
    fn last_on_cpu(
        &self,
        at: &Target<'_, F>,
        done: &[f64],
        best: &mut [f64],
        back: &mut [Link],
    ) -> u64 {
        let p = self.pruning;
        let k1 = p.k + 1;
        let s = k1 * (p.l + 1);
        let ci = self.summaries.heads[at.i].cpu.value();
        let cpu_slack = 1e-9 * ci.abs();
        let w = self.windows;
        let (a, b) = Windows::window(&w.cpu_keys, ci, p.bound);
        let mut limit = p.cap(&at.bands, best, 0, 1);
        let mut evaluated = 0;
        for pos in (a..b).rev() {
            if ci - w.cpu_keys[pos] > limit + cpu_slack {
                break;
            }
            let j = w.by_cpu[pos] as usize;
            let row = |j: usize| &done[j * s..(j + 1) * s];
            if j >= at.lo
                || (self.positioned.is_some() && !self.reachable(&at.bands, row(j), k1, 1))
                || !self.family.is_subset(j, at.top)
            {
                continue;
            }
            let load = self
                .cost
                .cpu_load(self.summaries, at.i, j, || self.family.difference(at.i, j));
            if load > limit {
                continue;
            }
            evaluated += 1;
            let row = row(j);
            let mut improved = false;
            for (cl, &(ka, kb)) in at.bands.iter().enumerate().skip(1) {
                for ck in ka..=kb {
                    if self.positioned.is_some_and(|x| cl + ck > x.stages) {
                        continue;
                    }
                    let st = cl * k1 + ck;
                    let v = row[st - k1].max(load);
                    if v < best[st] {
                        best[st] = v;
                        back[st] = Link::Cpu(j as u32);
                        improved = true;
                    }
                }
            }
            if improved {
                limit = p.cap(&at.bands, best, 0, 1);
            }
        }
        evaluated
    }
}

/// Ideal `i` being relaxed: the start `lo` of its level, the live device-count bands at
/// its accelerator key, the subset test's `top` and the signature bits outside it.
struct Target<'t, F: Family + 't> {
    i: usize,
    lo: usize,
    bands: Bands,
    top: F::Top<'t>,
    outside: u64,
}

/// Unpositioned tables hold "at most" counts: a state takes the better of one accelerator
/// fewer and one CPU fewer.
fn fewer_devices(k: usize, l: usize, best: &mut [f64], back: &mut [Link]) {
    let k1 = k + 1;
    for cl in 0..=l {
        for ck in 0..=k {
            let st = cl * k1 + ck;
            if ck > 0 && best[st - 1] < best[st] {
                best[st] = best[st - 1];
                back[st] = Link::FewerAccelerators;
            }
            if cl > 0 && best[st - k1] < best[st] {
                best[st] = best[st - k1];
                back[st] = Link::FewerCpus;
            }
        }
    }
}

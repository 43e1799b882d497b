//! Exact pruning of the DP recurrence with an upper bound `U` on the optimum.
//!
//! Every rule below discards only states or pairs that cannot lie on a split of value
//! ≤ U, so the optimum (≤ U) is kept. `F(I)` is the accelerator compute of an ideal,
//! `F(V)` the total, and `κ(B)` the most accelerator compute CPUs with total time `B`
//! can take off the accelerators (the fractional knapsack [`CpuAbsorption`]).
//!
//! - **Live states.** State `(ℓ', k')` at `I` (I placed on `k'` accelerators and `ℓ'`
//!   CPUs) can lie on such a split only if the compute of `I` fits,
//!   `F(I) − κ(ℓ'·U) ≤ k'·U`, and the rest fits the other devices,
//!   `F(V) − F(I) − κ((ℓ−ℓ')·U) ≤ (k−k')·U`. For each `ℓ'` the live `k'` form a band
//!   `lo ≤ k' ≤ hi` ([`Pruning::bands`]).
//! - **Window.** A stage with more compute than `U` is in no such split, so
//!   `F(I) − U ≤ F(J) ≤ F(I)`; the ideals sorted by `F` give that window by binary search
//!   ([`Windows`]). Scanning it from the top, the scan stops once `F(I) − F(J)` exceeds the
//!   largest value a live state could still improve to ([`Pruning::cap`]).
//! - **Reach.** A split of `J` on `a` accelerators and `b` CPUs with max load `v` has
//!   `F(J) ≤ a·v + κ(b·v)`, so `J` can improve state `(ℓ', k')` only if
//!   `F(J) < (k'−1)·best + κ(ℓ'·best)` ([`Pruning::reach`]).
//! - **Floor.** Every group sits whole on one device, and a device's load is at least the
//!   compute of what it holds, so `OPT ≥ L = max_g min(F(g) if g fits an accelerator,
//!   C(g) if there is a CPU)` ([`group_floor`]). With `f'(I) = max(L, f(I))` the
//!   recurrence keeps its form (`max(L, ·)` commutes with `min` and `max`) and
//!   `f'(V) = OPT`, so a state of value ≤ L is final: the scan of `I`'s window stops once
//!   every live state is at or below `L` ([`Pruning::cap`]). Every stored value is still
//!   the value of a real split, so the table's `V` entry is OPT itself. And when the upper
//!   bound's split is at or below `L`, it is optimal and nothing needs relaxing.
//!
//! Floating-point slack (relative 1e-9) keeps every comparison on the safe side.

use super::CpuAbsorption;
use crate::model::contraction::Contraction;
use crate::solve::ideal_cost::IdealSummary;

/// The upper bound and what the rules need besides the summaries.
pub struct Pruning {
    /// `U` with slack; infinite when no bound is known (then nothing is pruned).
    pub bound: f64,
    absorb: CpuAbsorption,
    /// `κ(ℓ'·U)` for `ℓ' = 0..=ℓ`, what the live bands read for every ideal.
    absorbed_at_bound: Vec<f64>,
    total_fpga: f64,
    /// `L` of the floor rule (module documentation); −∞ when not used.
    floor: f64,
    pub k: usize,
    pub l: usize,
}

/// `max_g min(F(g) if g fits an accelerator, C(g) if there is a CPU)` over the groups of
/// `c` on `k` accelerators of `memory` bytes and `l` CPUs: a lower bound on the max-load of
/// every placement (each group's device carries at least its compute; a CPU's load is
/// `Σ cpuLatency`, an accelerator's at least `Σ fpgaLatency`). Infinite when some group
/// fits no device; 0 without groups.
pub fn group_floor(c: &Contraction, k: usize, l: usize, memory: f64) -> f64 {
    c.groups
        .iter()
        .map(|g| {
            let acc = if k > 0 && g.fits_accelerator(memory) {
                g.fpga_latency
            } else {
                f64::INFINITY
            };
            let cpu = if l > 0 { g.cpu_latency } else { f64::INFINITY };
            acc.min(cpu)
        })
        .fold(0.0, f64::max)
}

/// Live accelerator counts `(lo, hi)` per CPU count `ℓ' = 0..=ℓ` (`lo > hi`: none).
pub type Bands = Vec<(usize, usize)>;

impl Pruning {
    /// Rules for the bound `upper` (`None`: no pruning) on `k` accelerators and `l` CPUs.
    pub fn new(
        c: &Contraction,
        upper: Option<f64>,
        total_fpga: f64,
        k: usize,
        l: usize,
    ) -> Pruning {
        let bound = upper.map_or(f64::INFINITY, |u| u * (1.0 + 1e-9) + 1e-12);
        let absorb = CpuAbsorption::new(c);
        let absorbed_at_bound = if bound.is_finite() {
            (0..=l).map(|cl| absorb.at(cl as f64 * bound)).collect()
        } else {
            Vec::new()
        };
        Pruning {
            bound,
            absorb,
            absorbed_at_bound,
            total_fpga,
            floor: f64::NEG_INFINITY,
            k,
            l,
        }
    }

    /// The same rules with the floor rule at `floor` (a proven lower bound on the optimum
    /// of the whole graph: [`group_floor`]), taken 1e-9 lower for rounding.
    pub fn with_floor(mut self, floor: f64) -> Pruning {
        self.floor = if floor.is_finite() {
            floor * (1.0 - 1e-9) - 1e-12
        } else {
            f64::NEG_INFINITY
        };
        self
    }

    /// The live band of `k'` for `ℓ' = cl` at an ideal of compute `fpga`.
    fn live(&self, fpga: f64, cl: usize) -> (usize, usize) {
        let (bound, k) = (self.bound, self.k);
        if !bound.is_finite() {
            return (0, k);
        }
        let slack = 1e-9 * self.total_fpga.max(1.0);
        let before = fpga - self.absorbed_at_bound[cl] - slack;
        let after = self.total_fpga - fpga - self.absorbed_at_bound[self.l - cl] - slack;
        let lo = if before <= 0.0 {
            0
        } else {
            (before / bound).ceil() as usize
        };
        let hi = if after <= 0.0 {
            k
        } else {
            k.saturating_sub((after / bound).ceil() as usize)
        };
        if lo > hi || (after > 0.0 && (after / bound).ceil() as usize > k) {
            (1, 0)
        } else {
            (lo, hi)
        }
    }

    /// The live bands at an ideal of compute `fpga`.
    pub fn bands(&self, fpga: f64) -> Bands {
        (0..=self.l).map(|cl| self.live(fpga, cl)).collect()
    }

    /// The largest value a live state with `k' ≥ from_k`, `ℓ' ≥ from_l` could still improve
    /// to, capped by the bound (`best`: the state row of `I`); states at or below the floor
    /// are final and count for nothing (−∞ when every live state is).
    pub fn cap(&self, bands: &Bands, best: &[f64], from_k: usize, from_l: usize) -> f64 {
        let k1 = self.k + 1;
        let mut m = f64::NEG_INFINITY;
        for (cl, &(a, b)) in bands.iter().enumerate().skip(from_l) {
            for ck in a.max(from_k)..=b {
                let v = best[cl * k1 + ck];
                if v > self.floor {
                    m = m.max(v.min(self.bound));
                }
            }
        }
        m
    }

    /// At least the largest `F(J)` of a `J` that could still improve a live accelerator
    /// state: per CPU count `ℓ'`, `max_{k'} (k'−1)·v_{k'} + κ(ℓ'·max_{k'} v_{k'})` (κ is
    /// monotone, so this bounds every state's `(k'−1)·v + κ(ℓ'·v)` with one knapsack
    /// evaluation per `ℓ'`).
    ///
    /// `memo` keeps, per `ℓ'` below its length, the last budget `B₀` the knapsack was
    /// evaluated at and `κ(B₀)`. Within one ideal the states only fall, so budgets only
    /// fall, and `κ(B₀) ≥ κ(B)` for `B ≤ B₀` (κ is nondecreasing): the stored value is
    /// reused while `B ≥ B₀·(1 − 2⁻⁶)`, which keeps the result an upper bound (pruning a
    /// little less) at a fraction of the knapsack evaluations (bert_l-3_training: 348k
    /// calls cost 52M of 915M instructions).
    pub fn reach(&self, bands: &Bands, best: &[f64], memo: &mut ReachMemo) -> f64 {
        let k1 = self.k + 1;
        let mut m: f64 = 0.0;
        for (cl, &(a, b)) in bands.iter().enumerate() {
            let (mut linear, mut top) = (f64::NEG_INFINITY, 0.0f64);
            for ck in a.max(1)..=b {
                let v = best[cl * k1 + ck].min(self.bound);
                linear = linear.max((ck - 1) as f64 * v);
                top = top.max(v);
            }
            if linear > f64::NEG_INFINITY {
                let budget = cl as f64 * top;
                let absorbed = match memo.0.get_mut(cl) {
                    Some(slot) if budget <= slot.0 && budget >= slot.0 * (1.0 - 1.0 / 64.0) => {
                        slot.1
                    }
                    Some(slot) => {
                        *slot = (budget, self.absorb.at(budget));
                        slot.1
                    }
                    None => self.absorb.at(budget),
                };
                m = m.max(linear + absorbed);
            }
        }
        m * (1.0 + 1e-9) + 1e-12
    }
}

/// The last knapsack budget and value per CPU count, for [`Pruning::reach`] within one
/// ideal (a NaN budget matches nothing; CPU counts beyond 15 are not memoised).
pub struct ReachMemo([(f64, f64); 16]);

impl Default for ReachMemo {
    fn default() -> Self {
        ReachMemo([(f64::NAN, 0.0); 16])
    }
}

/// The ideals sorted by accelerator compute and by CPU time, for the window rule.
pub struct Windows {
    pub by_fpga: Vec<u32>,
    pub fpga_keys: Vec<f64>,
    pub by_cpu: Vec<u32>,
    pub cpu_keys: Vec<f64>,
}

impl Windows {
    /// Sorts `heads` by `F` (and by CPU time when `cpus`); ties keep index order.
    pub fn new(heads: &[IdealSummary], cpus: bool) -> Windows {
        let sorted_by = |key: fn(&IdealSummary) -> f64| {
            let mut ids: Vec<u32> = (0..heads.len() as u32).collect();
            if !ids
                .windows(2)
                .all(|p| key(&heads[p[0] as usize]) <= key(&heads[p[1] as usize]))
            {
                ids.sort_by(|&a, &b| key(&heads[a as usize]).total_cmp(&key(&heads[b as usize])));
            }
            let keys: Vec<f64> = ids.iter().map(|&i| key(&heads[i as usize])).collect();
            (ids, keys)
        };
        let (by_fpga, fpga_keys) = sorted_by(|s| s.fpga.value());
        let (by_cpu, cpu_keys) = if cpus {
            sorted_by(|s| s.cpu.value())
        } else {
            (Vec::new(), Vec::new())
        };
        Windows {
            by_fpga,
            fpga_keys,
            by_cpu,
            cpu_keys,
        }
    }

    /// Positions `[a, b)` in `keys` of the ideals with `key − bound ≤ x ≤ key` (with slack).
    pub fn window(keys: &[f64], key: f64, bound: f64) -> (usize, usize) {
        let slack = 1e-9 * key.abs().max(1.0);
        (
            keys.partition_point(|&x| x < key - bound - slack),
            keys.partition_point(|&x| x <= key + slack),
        )
    }

    /// Bytes per ideal.
    pub const BYTES_PER_IDEAL: usize = 24;
}

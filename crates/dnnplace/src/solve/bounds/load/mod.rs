//! Combinatorial lower bounds on the max load (TPS), for the throughput and sync IPs.
//!
//! The LP relaxation of the max-load IPs is as weak as that of makespan scheduling
//! (P||C_max): fractional assignments spread every unit over all accelerators. The bound
//! here is computed before HiGHS starts and handed to it as the lower bound of the τ
//! column (for sync: `F ≥ LB_F`, `B ≥ LB_B` from the forward and backward sides alone, and
//! the row `F + B ≥ LB`, valid since `max FW + max BW ≥ max (FW + BW)`; see
//! [`ModelBounds`]). The reported bound is the larger of HiGHS's and this one, and HiGHS
//! is stopped as soon as its incumbent meets it. Under [`LoadBoundUse::ReportOnly`]
//! (`--ip-experiment boundafter`) the model is left as it was and the bound is only reported and used to stop HiGHS
//! (docs/ip.md compares the two: the bound in τ flattens the root LP, which helps HiGHS's
//! heuristics on most published graphs and hurts them on the largest).
//!
//! # Setting
//!
//! Units g ([`Grouping::units`]: colour classes, or groups when contiguous, which every plan
//! keeps on one device), with `fpga_g`, `cpu_g`, `size_g`; g is **placeable** if it may go
//! on an accelerator (all nodes supported, `size_g ≤ M`). k accelerators, ℓ CPUs. An
//! accelerator holding the unit set S has load `fpga(S) + cut(S)`, `cut(S)` the cost of the
//! hyperedges S meets without containing (MODEL.md's In ∪ Out); a CPU's load is `cpu(S)`.
//!
//! For a threshold T, [`LowerBound`] runs tests that each *prove* "no plan has max load
//! ≤ T" or say nothing. Every such proof at T shows `τ* > T`, so the bound is the
//! largest T proven impossible, found by bisection (each failing T is a proof by itself,
//! so the bisection is sound even where a test gives up). The tests only get stronger as
//! T decreases, so the bisection finds their threshold. The value returned is shaved by
//! a relative 1e-9 for rounding in the sums.
//!
//! Fix a plan with max load ≤ T. Then:
//!
//! - **Forced units.** `F(T) = {g : cpu_g > T}` cannot be on a CPU, so they are on
//!   accelerators: each must be placeable, k ≥ 1, `fpga_g ≤ T`. Units that are not
//!   placeable are on CPUs: `cpu_g ≤ T`. (Alone: `τ* ≥ max_g min(cpu_g, fpga_g or ∞)`.)
//! - **Pigeon** (`pigeon`). Of the t largest (by fpga) forced units, some accelerator holds
//!   `⌈t/k⌉`, whose fpga sum is at least that of the `⌈t/k⌉` smallest among them; loads
//!   only add communication, so `T ≥ max_t` of that sum. The same with sizes against M,
//!   and with the non-placeable units' cpu on the ℓ CPUs.
//! - **Volume** (`volume`). The CPUs hold the non-placeable units and a set C of units
//!   with `cpu_g ≤ T` (not forced), `cpu(C) ≤ ℓT − cpu(non-placeable) =: B` (so B ≥ 0).
//!   The most fpga time C can take off the accelerators is at most the fractional
//!   knapsack `absorb(B)` ([`crate::solve::knapsack`], as in the DP's pruning). So the
//!   accelerators hold at least `need(T) = fpga(placeable) − absorb(B)`, and
//!   `need(T) ≤ Σ_d load(d) ≤ kT`. Likewise for memory: within the same budget C holds at
//!   most `absorb_bytes(B)` bytes (the knapsack with value `size_g`), so the accelerators
//!   hold at least `size(placeable) − absorb_bytes(B) ≤ kM`. (On a 200k-operator GPT
//!   training graph of 1.19 TiB on 8 × 80 GiB this raised the bound from 1,301 ms, compute
//!   alone, to the CPU time the excess 582 GiB costs.)
//! - **Communication** (`communication`). For a nonempty set Q of placeable units and
//!   μ ≥ 0 let `h_Q(μ) = min_{S ⊇ Q, S placeable} cut(S) + μ·fpga(S)`, a minimum cut
//!   ([`crate::solve::bounds::min_cut`]). An accelerator d whose set `S_d` contains Q, with
//!   `I ≤ fpga(S_d) ≤ T` (I the fpga of any units known to be in `S_d`), has
//!   `load(d) = cut(S_d) + fpga(S_d) ≥ h_Q(μ) + (1 − μ)·fpga(S_d)`. Write
//!   `fpga(S_d) = I + φ` (φ: d's other units). For μ < 1, `load(d) ≤ T` gives
//!   `(1 − μ)(I + φ) ≤ T − h_Q(μ)`, i.e. `φ ≤ (T − h_Q(μ))/(1 − μ) − I`; for μ ≥ 1,
//!   `(1 − μ)·fpga(S_d) ≥ (1 − μ)·T` gives `h_Q(μ) ≤ μT` (μ = 1: `h_Q(1) ≤ T`). Together
//!   with `φ ≤ T − I` this is d's **room**, which must be ≥ 0. A forced unit alone
//!   (Q = {g}, I = fpga_g) must have room. Any μ is valid: μ runs over the grid 2^j,
//!   j = −8..4. Since h only enters as "≥", any lower bound on it may stand in: the value
//!   of a feasible flow (≤ every cut), `μ·fpga(Q)` (S ⊇ Q), the largest h of a subset of
//!   Q, and for sets of two or more units, computed at μ ∈ {1/16, 1/4, 1, 4} only, the
//!   chord through (0, 0) and those points (flat after 4): h is concave (a minimum of
//!   lines) and nondecreasing in μ with h(0) ≥ 0, so the chord lies below it. Minimum
//!   cuts are computed for the 64 largest units that can be forced and for at most
//!   2,000 sets of two or more of them (cached: h does not depend on T); other units get
//!   `μ·fpga_g`.
//! - **Packing** (`packing`). The forced units must be split among the k accelerators:
//!   a depth-first search assigns them, largest first, to bins (an accelerator's forced
//!   units Q, their fpga I and size ≤ M, and a lower bound on `h_Q` from the
//!   communication test: the set's own cut when the budget allows, else the largest
//!   over its units and its cached pairs). Every bin needs room ≥ 0 (an accelerator
//!   without forced units has room T), and the other units that the CPUs cannot take
//!   must fit in the rooms: `Σ_d φ_d ≥ need(T) − fpga(F(T))`. The search either finds
//!   such an assignment (no proof), proves there is none (T is impossible), or gives up
//!   after [`NODE_LIMIT`] nodes (no proof). Only the [`PACKING_ITEMS`] largest forced
//!   units are placed one by one; the compute of the others joins the right-hand side
//!   (it sits in some bin's φ), which only weakens the test and bounds the recursion
//!   depth on graphs of thousands of forced units. Pruning: total room and total memory against
//!   what is left, room of the bins that can still take the smallest forced unit; new
//!   bins are interchangeable, and without communication so are bins with equal fpga and
//!   size.
//!
//! Every test is monotone (a plan with max load ≤ T also has max load ≤ T' > T, and
//! each condition above only relaxes with T: fewer forced units, more room), so the
//! impossible thresholds form an interval `[0, LB)` up to the search limit.
//!
//! # Time
//! A bound may run within a [`Budget`] ([`LowerBound::within`]): once it runs out (time
//! limit or Ctrl-C) the bisection stops with the largest threshold proven impossible so
//! far, minimum cuts not yet computed take their trivial value `μ·fpga(Q)`, and the packing
//! search gives up (no proof) — each a weaker but still valid bound. The budget is looked
//! at between thresholds, before each minimum-cut set and every 1,024 search nodes.
//!
//! Numerics: the sums that cancel (`need(T)`, the CPU budget, the pigeon's prefix
//! differences) are compensated [`Sum`]s rounded towards "possible", so a rounding never
//! proves a threshold impossible (a 1e15-µs unit that fits a CPU made `need(T)` 0.03 too
//! large in plain f64).
//!
//! Cost: `O(n log n)` per threshold for the first three tests, 13 maximum flows per unit
//! and 4 per set whose h is needed, the search at most [`NODE_LIMIT`] nodes per
//! threshold; about 50 thresholds. On the published workloads: under 0.1 s for most,
//! 1 s for bert_l-12 inference, 3–4 s for bert_l-12 training (operator graphs).

use crate::model::grouping::{Group, Grouping, Hyperedge};
use crate::model::numerics::{Sum, UNIT_ROUNDOFF};
use crate::model::{DeviceSet, Workload};
use crate::solve::budget::Budget;
use crate::solve::knapsack::FractionalKnapsack;
use crate::solve::Stats;

mod communication;
mod packing;

use communication::{bin_room, mu_grid, Cuts, CUT_UNITS, SET_CUTS};
use packing::{Bins, Packing, Search};

/// How the max-load and sync IPs use the combinatorial bound of this module's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadBoundUse {
    /// As the lower bound of τ (and F, B), and to stop HiGHS once its incumbent meets it.
    InModel,
    /// Only reported and used to stop HiGHS; the model is left without it.
    ReportOnly,
    /// Not computed.
    Off,
}

/// Which tests the bound runs (the forced-unit test always runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tests {
    pub pigeon: bool,
    pub volume: bool,
    pub communication: bool,
    pub packing: bool,
}

impl Tests {
    pub const ALL: Tests = Tests {
        pigeon: true,
        volume: true,
        communication: true,
        packing: true,
    };
    pub const NONE: Tests = Tests {
        pigeon: false,
        volume: false,
        communication: false,
        packing: false,
    };
}

/// Search nodes per threshold before the packing test gives up.
pub const NODE_LIMIT: usize = 200_000;

/// Forced units the packing search places one by one (the largest); the others count as
/// fluid compute that must fit in the bins' rooms. Also bounds the search's recursion depth.
pub const PACKING_ITEMS: usize = 512;

/// The lower bound on the max load of every plan of `w` (contiguous plans only when
/// `contiguous`, with the contraction's groups as units), all tests.
pub fn max_load_lower_bound(w: &Workload, contiguous: bool) -> f64 {
    let (units, _) = Grouping::units(w, contiguous);
    let hyperedges = units.hyperedges(w, false);
    LowerBound::new(&units, &hyperedges, w.devices(), Tests::ALL).value()
}

/// The bounds an IP over some units uses: on the max load, and for sync on each side.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ModelBounds {
    /// On the max load (τ).
    pub total: f64,
    /// Sync only: on the max forward load F and the max backward load B (0 otherwise).
    pub forward: f64,
    pub backward: f64,
}

impl ModelBounds {
    /// The bounds to put in the model: these, or none when `bound_use` is
    /// [`LoadBoundUse::ReportOnly`] (then the bound is only reported and stops HiGHS once met).
    pub(crate) fn in_model(&self, bound_use: LoadBoundUse) -> ModelBounds {
        if bound_use == LoadBoundUse::ReportOnly {
            ModelBounds::default()
        } else {
            *self
        }
    }

    /// The bound on the objective: τ, or for sync `F + B ≥ max(total, forward + backward)`
    /// (`max FW + max BW ≥ max (FW + BW)`, the max load).
    pub fn objective(&self, sync: bool) -> f64 {
        if sync {
            self.total.max(self.forward + self.backward)
        } else {
            self.total
        }
    }
}

/// The bounds for an IP over `units` (hyperedges may be split by side: the cut of the
/// total load only sees their sum), with a note in `stats`; all 0 when `bound_use` is
/// [`LoadBoundUse::Off`]. For sync also the bound of each side alone: the instance whose units
/// carry only their forward (backward) fpga and cpu time and whose hyperedges are the
/// forward (backward) ones has exactly the loads FW(d) (BW(d)) for the same plans, so
/// its bound is a bound on F = max FW (B = max BW).
pub(crate) fn for_model(
    units: &Grouping,
    hyperedges: &[Hyperedge],
    devices: &DeviceSet,
    sync: bool,
    bound_use: LoadBoundUse,
    budget: &Budget,
    stats: &mut Stats,
) -> ModelBounds {
    if bound_use == LoadBoundUse::Off {
        return ModelBounds::default();
    }
    let start = std::time::Instant::now();
    let bounds = compute_model_bounds(units, hyperedges, devices, sync, budget);
    stats.notes.push(format!(
        "combinatorial lower bound {}{} ({:.2} s{}; solve::bounds::load)",
        bounds.total,
        if sync {
            format!(
                " on the max load, {} on F, {} on B",
                bounds.forward, bounds.backward
            )
        } else {
            String::new()
        },
        start.elapsed().as_secs_f64(),
        if budget.is_exhausted() {
            ", stopped early by the time limit: a weaker bound"
        } else {
            ""
        }
    ));
    bounds
}

/// [`ModelBounds`] for the plans of `w` (contiguous ones only when `contiguous`, with the
/// contraction's groups as units), for the throughput or the sync objective.
pub fn model_bounds(w: &Workload, contiguous: bool, sync: bool) -> ModelBounds {
    let (units, _) = Grouping::units(w, contiguous);
    let hyperedges = units.hyperedges(w, sync);
    compute_model_bounds(&units, &hyperedges, w.devices(), sync, &Budget::unlimited())
}

/// The bound on the max load, then for sync one on each side; with a budget, the max load
/// gets half of it and each side half of what is left.
fn compute_model_bounds(
    units: &Grouping,
    hyperedges: &[Hyperedge],
    devices: &DeviceSet,
    sync: bool,
    budget: &Budget,
) -> ModelBounds {
    let share = if sync { 0.5 } else { 1.0 };
    let total = LowerBound::new(units, hyperedges, devices, Tests::ALL)
        .within(budget.share(share))
        .value();
    let mut bounds = ModelBounds {
        total,
        ..ModelBounds::default()
    };
    if sync {
        for backward in [false, true] {
            let mut side = units.clone();
            for (unit, whole) in side.groups.iter_mut().zip(&units.groups) {
                let (f, c) = (whole.forward_fpga_latency, whole.forward_cpu_latency);
                (unit.fpga_latency, unit.cpu_latency) = if backward {
                    (
                        (whole.fpga_latency - f).max(0.0),
                        (whole.cpu_latency - c).max(0.0),
                    )
                } else {
                    (f, c)
                };
            }
            let edges: Vec<Hyperedge> = hyperedges
                .iter()
                .filter(|e| e.backward == backward)
                .cloned()
                .collect();
            let value = LowerBound::new(&side, &edges, devices, Tests::ALL)
                .within(budget.share(if backward { 1.0 } else { 0.5 }))
                .value();
            if backward {
                bounds.backward = value;
            } else {
                bounds.forward = value;
            }
        }
    }
    bounds
}

/// The bound with each test alone (beside the forced-unit test) and with all of them:
/// `[("forced", _), ("pigeon", _), ("volume", _), ("communication", _), ("packing", _),
/// ("all", _)]`. For reports of where a bound comes from.
pub fn breakdown(w: &Workload, contiguous: bool) -> Vec<(&'static str, f64)> {
    let (units, _) = Grouping::units(w, contiguous);
    let hyperedges = units.hyperedges(w, false);
    let one = |tests: Tests| LowerBound::new(&units, &hyperedges, w.devices(), tests).value();
    vec![
        ("forced", one(Tests::NONE)),
        (
            "pigeon",
            one(Tests {
                pigeon: true,
                ..Tests::NONE
            }),
        ),
        (
            "volume",
            one(Tests {
                volume: true,
                ..Tests::NONE
            }),
        ),
        (
            "communication",
            one(Tests {
                communication: true,
                ..Tests::NONE
            }),
        ),
        (
            "packing",
            one(Tests {
                packing: true,
                ..Tests::NONE
            }),
        ),
        ("all", one(Tests::ALL)),
    ]
}

/// The bound's data and caches (see the module docs).
pub struct LowerBound<'a> {
    units: &'a Grouping,
    placeable: Vec<bool>,
    k: usize,
    l: usize,
    memory: f64,
    tests: Tests,
    cuts: Cuts<'a>,
    /// Placeable units by decreasing fpga/cpu (cpu > 0), for the CPU absorption.
    by_ratio: Vec<usize>,
    /// fpga of all placeable units.
    placeable_fpga: Sum,
    /// Σ size over the placeable units: what the accelerators' `k·M` must hold but for
    /// what the CPUs take.
    placeable_size: Sum,
    budget: Budget,
}

impl<'a> LowerBound<'a> {
    pub fn new(
        units: &'a Grouping,
        hyperedges: &'a [Hyperedge],
        devices: &DeviceSet,
        tests: Tests,
    ) -> Self {
        let memory = devices.memory_per_accelerator_bytes;
        let n = units.len();
        let placeable: Vec<bool> = units
            .groups
            .iter()
            .map(|unit| unit.fits_accelerator(memory))
            .collect();
        let mut by_ratio: Vec<usize> = (0..n)
            .filter(|&g| placeable[g] && units[g].cpu_latency > 0.0)
            .collect();
        by_ratio.sort_by(|&a, &b| {
            (units[b].fpga_latency / units[b].cpu_latency)
                .total_cmp(&(units[a].fpga_latency / units[a].cpu_latency))
        });
        let placeable_fpga = Sum::of(
            (0..n)
                .filter(|&g| placeable[g])
                .map(|g| units[g].fpga_latency),
        );
        let placeable_size = Sum::of(
            (0..n)
                .filter(|&g| placeable[g])
                .map(|g| units[g].size_bytes),
        );
        let cuts = Cuts {
            fpga: units.groups.iter().map(|unit| unit.fpga_latency).collect(),
            placeable: placeable.clone(),
            hyperedges,
            mu: mu_grid(),
            network: None,
            allowed: vec![false; n],
            single: vec![None; n],
            sets: std::collections::HashMap::new(),
            sets_left: SET_CUTS,
            budget: Budget::unlimited(),
        };
        let mut lb = LowerBound {
            units,
            placeable,
            k: devices.accelerators,
            l: devices.cpus,
            memory,
            tests,
            cuts,
            by_ratio,
            placeable_fpga,
            placeable_size,
            budget: Budget::unlimited(),
        };
        let floor = lb.forced_floor();
        let mut candidates: Vec<usize> = (0..n)
            .filter(|&g| lb.placeable[g] && units[g].cpu_latency > floor)
            .collect();
        candidates.sort_by(|&a, &b| {
            units[b]
                .fpga_latency
                .total_cmp(&units[a].fpga_latency)
                .then(a.cmp(&b))
        });
        for &g in candidates.iter().take(CUT_UNITS) {
            lb.cuts.allowed[g] = true;
        }
        lb
    }

    /// This bound, stopping early (with a weaker, still valid value) once `budget` runs out.
    pub fn within(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self.cuts.budget = budget;
        self
    }

    /// `max_g min(cpu_g, fpga_g if placeable)`: every unit is somewhere.
    fn forced_floor(&self) -> f64 {
        let u = self.units;
        (0..u.len())
            .map(|g| {
                if self.placeable[g] && self.k > 0 {
                    u[g].cpu_latency.min(u[g].fpga_latency)
                } else {
                    u[g].cpu_latency
                }
            })
            .fold(0.0, f64::max)
    }

    /// The largest threshold proven impossible (at least the forced floor), less 1e-9
    /// relative.
    pub fn value(mut self) -> f64 {
        let floor = self.forced_floor();
        let shave = |x: f64| x * (1.0 - 1e-9);
        if self.possible(floor) {
            return shave(floor);
        }
        let u = self.units;
        let total: f64 = u
            .groups
            .iter()
            .map(|g| g.fpga_latency)
            .chain(u.groups.iter().map(|g| g.cpu_latency))
            .sum::<f64>()
            + self.cuts.hyperedges.iter().map(|e| e.cost).sum::<f64>();
        let (mut lo, mut hi) = (floor, (total + 1.0).max(2.0 * floor));
        if !self.possible(hi) {
            // No plan has a load above `total`, so there is no plan at all (HiGHS will say
            // infeasible); any bound is sound then, and this one stays finite for HiGHS.
            return shave(hi);
        }
        for _ in 0..200 {
            if hi - lo <= 1e-10 * hi || self.budget.is_exhausted() {
                break;
            }
            let mid = 0.5 * (lo + hi);
            if self.possible(mid) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        shave(lo)
    }

    /// False when some test proves that no plan has max load ≤ t.
    fn possible(&mut self, t: f64) -> bool {
        let u = self.units;
        let n = u.len();
        let (k, l) = (self.k, self.l);
        // Forced units and CPU-only units.
        let cpu_only: Vec<usize> = (0..n).filter(|&g| !self.placeable[g]).collect();
        if cpu_only.iter().any(|&g| u[g].cpu_latency > t) || (!cpu_only.is_empty() && l == 0) {
            return false;
        }
        let mut forced: Vec<usize> = (0..n)
            .filter(|&g| self.placeable[g] && u[g].cpu_latency > t)
            .collect();
        if !forced.is_empty() && k == 0 {
            return false;
        }
        if forced.iter().any(|&g| u[g].fpga_latency > t) {
            return false;
        }
        forced.sort_by(|&a, &b| {
            u[b].fpga_latency
                .total_cmp(&u[a].fpga_latency)
                .then(u[b].size_bytes.total_cmp(&u[a].size_bytes))
                .then(a.cmp(&b))
        });
        if self.tests.pigeon {
            let of = |v: &[usize], f: fn(&Group) -> f64| {
                v.iter().map(|&g| f(&u[g])).collect::<Vec<f64>>()
            };
            if pigeon(of(&forced, |g| g.fpga_latency), k) > t
                || pigeon(of(&forced, |g| g.size_bytes), k) > self.memory
                || pigeon(of(&cpu_only, |g| g.cpu_latency), l) > t
            {
                return false;
            }
        }
        let forced_fpga = Sum::of(forced.iter().map(|&g| u[g].fpga_latency));
        let mut fluid = 0.0;
        if self.tests.volume {
            // Compensated and rounded towards "possible" (numerics): the CPU budget up, the
            // compute the accelerators need down.
            let lt = l as f64 * t;
            let budget =
                Sum::of([lt]).minus_sum(Sum::of(cpu_only.iter().map(|&g| u[g].cpu_latency)));
            let budget = budget.upper_bound() + UNIT_ROUNDOFF * lt;
            if budget < 0.0 {
                return false;
            }
            let need = self.placeable_fpga.minus_sum(self.absorb(t, budget));
            if need.lower_bound() > k as f64 * t * (1.0 + UNIT_ROUNDOFF) {
                return false;
            }
            fluid = need.minus_sum(forced_fpga).lower_bound().max(0.0);
            let capacity = k as f64 * self.memory;
            let unplaced = self.placeable_size.minus_sum(self.absorb_bytes(t, budget));
            if unplaced.lower_bound() > capacity * (1.0 + UNIT_ROUNDOFF) {
                return false;
            }
        }
        if self.tests.communication {
            for &g in &forced {
                let h = self.cuts.single(g);
                if bin_room(&self.cuts.mu, &h, u[g].fpga_latency, t).is_none() {
                    return false;
                }
            }
        }
        if self.tests.packing {
            // The search recurses once per item: only the largest forced units are items;
            // the others' compute must fit in the rooms like the fluid (a relaxation).
            let items = &forced[..forced.len().min(PACKING_ITEMS)];
            let rest: f64 = forced[items.len()..]
                .iter()
                .map(|&g| u[g].fpga_latency)
                .sum();
            let fluid = if self.tests.volume {
                fluid + rest
            } else {
                rest
            };
            let cuts = if self.tests.communication {
                Some(&mut self.cuts)
            } else {
                None
            };
            let mut search = Search::new(
                u,
                items,
                cuts,
                Bins {
                    k,
                    t,
                    memory: self.memory,
                    fluid,
                },
                self.budget,
            );
            if search.run() == Packing::Impossible {
                return false;
            }
        }
        true
    }

    /// The most fpga time that units with `cpu_g ≤ t` can take off the accelerators
    /// within the CPU budget `budget`: the fractional knapsack of
    /// [`crate::solve::knapsack`] over the placeable units (weight cpu time, value fpga
    /// time; units with no CPU time are free), nothing without CPUs. Rounded up (the
    /// knapsack's value is an upper bound, numerics).
    fn absorb(&self, t: f64, budget: f64) -> Sum {
        if self.l == 0 {
            return Sum::ZERO;
        }
        let u = self.units;
        let free = (0..u.len()).filter(|&g| self.placeable[g] && u[g].cpu_latency == 0.0);
        let paid = self
            .by_ratio
            .iter()
            .copied()
            .filter(|&g| u[g].cpu_latency <= t);
        Sum::of([FractionalKnapsack::new(
            free.chain(paid)
                .map(|g| (u[g].cpu_latency, u[g].fpga_latency)),
        )
        .value(budget)])
    }

    /// The most bytes that placeable units with `cpu_g ≤ t` can take off the accelerators
    /// within the CPU budget `budget`: the same fractional knapsack with value size
    /// (nothing without CPUs), rounded up.
    fn absorb_bytes(&self, t: f64, budget: f64) -> Sum {
        if self.l == 0 {
            return Sum::ZERO;
        }
        let u = self.units;
        let items = (0..u.len())
            .filter(|&g| self.placeable[g] && u[g].cpu_latency <= t)
            .map(|g| (u[g].cpu_latency, u[g].size_bytes));
        Sum::of([FractionalKnapsack::new(items).value(budget)])
    }
}

/// `max_t` of the sum of the `⌈t/k⌉` smallest among the t largest `values`: some of k
/// bins holds that many of the t largest. ∞ if k = 0 and there are values > 0.
pub fn pigeon(mut values: Vec<f64>, k: usize) -> f64 {
    if k == 0 {
        return if values.iter().any(|&v| v > 0.0) {
            f64::INFINITY
        } else {
            0.0
        };
    }
    values.sort_by(|a, b| b.total_cmp(a));
    let mut prefix = vec![Sum::ZERO; values.len() + 1];
    for (i, v) in values.iter().enumerate() {
        prefix[i + 1] = prefix[i].plus(*v);
    }
    // Certified prefix differences (numerics), a direct sum where they cancel; rounded down.
    (1..=values.len())
        .map(|t| {
            let from = t - t.div_ceil(k);
            let part = prefix[t]
                .difference(prefix[from])
                .unwrap_or_else(|| Sum::of(values[from..t].iter().copied()).value());
            part * (1.0 - 2.0 * UNIT_ROUNDOFF)
        })
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DeviceSet, Node, Workload};

    fn node(id: i64, fpga: f64, cpu: f64) -> Node {
        Node {
            id,
            name: None,
            fpga_latency: fpga,
            cpu_latency: cpu,
            size_bytes: 0.0,
            supported_on_accelerator: true,
            is_backward: false,
            color_class: None,
            layer_id: None,
            module: None,
            memory: None,
        }
    }

    #[test]
    fn pigeon_by_hand() {
        // 3 bins; the 4 largest (5, 4, 4, 3): some bin holds two, at least 4 + 3 = 7.
        // The 7 largest: some bin holds 3, at least 3 + 2 + 2 = 7.
        // Rounded down by at most 2 ulps (numerics), never up.
        let got = pigeon(vec![2.0, 5.0, 4.0, 3.0, 4.0, 2.0, 2.0], 3);
        assert!((7.0 * (1.0 - 1e-15)..=7.0).contains(&got), "{got}");
        assert_eq!(pigeon(vec![1.0, 1.0], 0), f64::INFINITY);
        assert_eq!(pigeon(Vec::new(), 2), 0.0);
    }

    /// Seven independent units of fpga 3 (cpu 100) on 3 accelerators and one CPU; no
    /// edges. Below 100 every unit is forced. Pigeon: of the 7 largest some accelerator
    /// holds ⌈7/3⌉ = 3, so T ≥ 9, and 3 + 2 + 2 units give a plan of 9: tight. Volume
    /// alone: 21/3 = 7.
    #[test]
    fn seven_units_on_three_accelerators_by_hand() {
        let nodes: Vec<Node> = (0..7).map(|i| node(i, 3.0, 100.0)).collect();
        let w = Workload::new(
            nodes,
            Vec::new(),
            DeviceSet {
                accelerators: 3,
                memory_per_accelerator_bytes: 1e9,
                cpus: 1,
            },
        )
        .unwrap();
        let parts: std::collections::HashMap<_, _> = breakdown(&w, false).into_iter().collect();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-8 * b;
        assert!(close(parts["forced"], 3.0), "{parts:?}");
        assert!(close(parts["pigeon"], 9.0), "{parts:?}");
        assert!(close(parts["volume"], 7.0), "{parts:?}");
        assert!(close(parts["packing"], 9.0), "{parts:?}");
        assert!(close(parts["all"], 9.0), "{parts:?}");
    }

    /// A chain a → b → c with costs: a (fpga 4, cpu 50) sends 2 to b, b (fpga 4, cpu 50)
    /// sends 1 to c (fpga 1, cpu 1); 2 accelerators, 1 CPU.
    /// By hand: c goes to the CPU or with b. a and b are forced (cpu 50 > T).
    /// - a and b together (with or without c): 8 + (c elsewhere: 1) = 9 or 9 (c with them).
    /// - a and b apart: the accelerator of a pays 4 + 2 = 6, of b 4 + 2 + (1 unless c is
    ///   there; with c: + 1 fpga) = 7. So the optimum is 7.
    ///
    /// h_b(1) = min over S ∋ b: {b}: 4 + 2 + 1 = 7; {b,c}: 5 + 2 = 7; {a,b}: 8 + 1 = 9;
    /// {a,b,c}: 9. So communication alone proves T ≥ 7: tight.
    #[test]
    fn communication_by_hand() {
        let nodes = vec![node(1, 4.0, 50.0), node(2, 4.0, 50.0), node(3, 1.0, 1.0)];
        let edges = vec![(1, 2, 2.0, 0.0), (2, 3, 1.0, 0.0)];
        let w = Workload::new(
            nodes,
            edges,
            DeviceSet {
                accelerators: 2,
                memory_per_accelerator_bytes: 1e9,
                cpus: 1,
            },
        )
        .unwrap();
        let parts: std::collections::HashMap<_, _> = breakdown(&w, false).into_iter().collect();
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-8 * b;
        assert!(close(parts["forced"], 4.0), "{parts:?}");
        assert!(close(parts["communication"], 7.0), "{parts:?}");
        assert!(close(parts["all"], 7.0), "{parts:?}");
    }
}

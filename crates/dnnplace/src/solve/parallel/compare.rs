//! Every 3D search and the layouts a person tries first, on one problem, scored by one
//! evaluator: `dnnplace compare CONFIG.json --parallel 3d` (docs/parallel.md, "Compare").
//!
//! **Rows.** The two searches of [`super::plan_with`] — uniform layouts (every stage one `t`
//! and `d`) and free layouts (each stage its own; under the iteration objective valued by
//! the `clock`, the simulator) — with their proven bounds, then four layouts
//! by hand on one accelerator type with `N = M·G` devices (`M` machines of `G`), each split
//! as Megatron-LM splits its layers ([`megatron_cuts`]: the blocks evenly, the first unit
//! with the first stage and the last with the last):
//!
//! | row | `t` | `p` | `d` | ZeRO |
//! | --- | --- | --- | --- | --- |
//! | TP in each machine, the rest PP | `t_max` | `N / t_max` | 1 | 0 |
//! | TP in each machine, the rest DP | `t_max` | 1 | `N / t_max` | 1 |
//! | DP only, fully sharded (FSDP) | 1 | 1 | `N` | 3 |
//! | PP only | 1 | `N` | 1 | 0 |
//!
//! `t_max` is the largest TP degree of the space (`auto`: the largest that divides a machine
//! and the model); `p` is capped at the chain's blocks (units − 2: Megatron-LM gives every
//! stage at least one; the devices past them stay idle) and `d` lowered to the largest divisor
//! of `B/b` that fits, `b` the smallest micro-batch size of the space; the schedule is the
//! problem's. A hand layout runs without recomputation when that fits and with full
//! recomputation otherwise (what a person turns on); one that fits neither way is a row with
//! the reason. Their figures are the evaluator's ([`crate::score::parallel::score_layout`]),
//! status [`Status::Heuristic`] (no bound).
//!
//! **Budget.** The searches share it: the uniform one gets half of what is left, the free one
//! the rest; the hand layouts are scored, not searched.

use super::problem::{plan_with, Layouts, ParallelDevices, ParallelProblem};
use super::IterationClock;
use super::{objective_value, ParallelOutcome, ParallelPlan};
use crate::model::parallel::{ChainCosts, Layout, Topology, Uniform, Zero};
use crate::score::parallel::score_layout;
use crate::solve::budget::Budget;
use crate::solve::Status;

/// A layout a person tries first (module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hand {
    /// TP across each machine, the rest of the devices pipeline stages.
    TpPp,
    /// TP across each machine, the rest data-parallel replicas of one stage.
    TpDp,
    /// Data parallelism only, ZeRO-3 (FSDP).
    DpOnly,
    /// Pipeline stages only, one device each.
    PpOnly,
}

impl Hand {
    pub const ALL: [Hand; 4] = [Hand::TpPp, Hand::TpDp, Hand::DpOnly, Hand::PpOnly];

    /// The row's words.
    pub fn label(self) -> &'static str {
        match self {
            Hand::TpPp => "by hand: TP in each machine, the rest PP",
            Hand::TpDp => "by hand: TP in each machine, the rest DP (ZeRO-1)",
            Hand::DpOnly => "by hand: DP only, ZeRO-3 (FSDP)",
            Hand::PpOnly => "by hand: PP only, one device per stage",
        }
    }
}

/// What a row holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// A search of [`super::plan`] over these layouts.
    Search(Layouts),
    Hand(Hand),
}

impl Entry {
    /// The row's words.
    pub fn label(self) -> &'static str {
        match self {
            Entry::Search(Layouts::Uniform) => "search: uniform layouts",
            Entry::Search(Layouts::Free) => "search: free layouts",
            Entry::Hand(h) => h.label(),
        }
    }
}

/// One row: the outcome, or why there is none (a hand layout that does not fit, a search
/// that does not apply).
#[derive(Clone, Debug)]
pub struct Row {
    pub entry: Entry,
    pub result: Result<ParallelOutcome, String>,
}

/// Megatron-LM's split of a chain of `units` (a first unit, `units − 2` blocks, a last
/// unit) into `p` stages: the blocks evenly (`⌊s·L/p⌋`), the first unit with the first
/// stage, the last with the last. The cuts, ascending, inside `1..units`.
pub fn megatron_cuts(units: usize, p: usize) -> Vec<usize> {
    let blocks = units.saturating_sub(2);
    (1..p).map(|s| 1 + s * blocks / p).collect()
}

/// Every row of the comparison of `problem` (module documentation), free layouts'
/// iterations timed by `clock`.
pub fn compare(
    problem: &ParallelProblem,
    budget: &Budget,
    clock: Option<&dyn IterationClock>,
) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (i, layouts) in [Layouts::Uniform, Layouts::Free].into_iter().enumerate() {
        let entry = Entry::Search(layouts);
        let p = ParallelProblem {
            layouts,
            ..problem.clone()
        };
        let share = budget.share(1.0 / (2 - i) as f64);
        rows.push(Row {
            entry,
            result: Ok(plan_with(&p, &share, clock)?),
        });
    }
    for hand in Hand::ALL {
        let result = match (&problem.devices, problem.chains.as_slice()) {
            (ParallelDevices::One(topo), [chains]) => by_hand(hand, chains, topo, problem),
            _ => Err("the layouts by hand are for one accelerator type".into()),
        };
        rows.push(Row {
            entry: Entry::Hand(hand),
            result,
        });
    }
    Ok(rows)
}

/// The configuration of `hand` for a chain of `units` at micro-batch `b`, TP degree `t_max`
/// and `n` devices, before recomputation is chosen.
fn configuration(
    hand: Hand,
    units: usize,
    (b, t_max, n): (usize, usize, usize),
    global_batch: usize,
) -> Uniform {
    let (t, p, d, zero) = match hand {
        Hand::TpPp => (t_max, n / t_max, 1, Zero::Off),
        Hand::TpDp => (t_max, 1, n / t_max, Zero::Optimizer),
        Hand::DpOnly => (1, 1, n, Zero::Parameters),
        Hand::PpOnly => (1, n, 1, Zero::Off),
    };
    // d·b must divide B: the largest such d not above the hand's.
    let per_replica = global_batch / b;
    let d = (1..=d.max(1))
        .rev()
        .find(|x| per_replica.is_multiple_of(*x))
        .unwrap_or(1);
    Uniform {
        micro_batch: b,
        tensor_parallel: t,
        data_parallel: d,
        zero,
        recompute: false,
        // Megatron-LM splits the blocks, at least one per stage.
        stages: p.clamp(1, units.saturating_sub(2).max(1)),
    }
}

/// The layout `hand` on one type, scored: without recomputation when it fits, else with.
fn by_hand(
    hand: Hand,
    chains: &[ChainCosts],
    topo: &Topology,
    problem: &ParallelProblem,
) -> Result<ParallelOutcome, String> {
    let space = &problem.space;
    let (ci, b) = space
        .micro_batches
        .iter()
        .copied()
        .enumerate()
        .min_by_key(|&(_, b)| b)
        .ok_or("no micro-batch size")?;
    let chain = &chains[ci];
    let t_max = space.tensor_parallel.iter().copied().max().unwrap_or(1);
    let n = space.max_devices.min(topo.devices());
    let cfg = configuration(hand, chain.len(), (b, t_max, n), space.global_batch);
    let layout_of = |recompute: bool| {
        Layout::uniform(
            chain.len(),
            &megatron_cuts(chain.len(), cfg.stages),
            &Uniform { recompute, ..cfg },
            space.global_batch,
            space.schedule,
        )
        .overlapped(space.overlap_grad_reduce)
    };
    let mut last = None;
    for recompute in [false, true] {
        let layout = layout_of(recompute);
        let score = score_layout(chain, topo, &layout).map_err(|e| e.to_string())?;
        if score.fits {
            let value = objective_value(&score, problem.objective);
            return Ok(ParallelOutcome {
                plan: Some(ParallelPlan {
                    layout,
                    score,
                    chain: chain.clone(),
                    accelerators: None,
                }),
                value,
                bound: 0.0,
                status: Status::Heuristic,
                configs_solved: 0,
                configs: 0,
                elapsed_s: 0.0,
                free: false,
                valuation: super::Valuation::Model,
            });
        }
        last = Some(score);
    }
    let worst = last
        .iter()
        .flat_map(|s| s.stages.iter().map(|st| st.memory_bytes))
        .fold(0.0, f64::max);
    Err(format!(
        "p{}·t{}·d{} b{} does not fit, even with full recomputation ({} on a device of {})",
        cfg.stages,
        cfg.tensor_parallel,
        cfg.data_parallel,
        b,
        crate::model::human_bytes(worst),
        crate::model::human_bytes(topo.memory_bytes)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn megatron_splits_the_blocks_evenly() {
        // 32 blocks + embeddings + head in 4 stages: 8 blocks each, cuts after
        // embeddings+8, +16, +24 blocks.
        assert_eq!(megatron_cuts(34, 4), vec![9, 17, 25]);
        assert_eq!(megatron_cuts(34, 1), Vec::<usize>::new());
        // 3 blocks in 2 stages: the first gets 1, the second 2.
        assert_eq!(megatron_cuts(5, 2), vec![2]);
    }
}

//! A communication- and memory-aware lower bound on every node's finish time under the
//! latency model of MODEL.md, for each of the node's two states (on a CPU, on an
//! accelerator). The latency IP ([`super::latency`]) uses it as rows
//! `F_v ≥ f_cpu(v)·(1 − a_v) + f_acc(v)·a_v`.
//!
//! # Schedules
//!
//! A *schedule* is a placement, a cut of every accelerator's nodes into pieces, and times:
//!
//! - the *item graph* (items: the pieces and the CPU nodes; an arc X → Y when an edge goes
//!   from a node of X to a node of Y ≠ X) is acyclic;
//! - a piece P starts at `S(P) ≥ F(x)` for every node `x ∉ P` with an edge into P, takes
//!   `D(P) = Σ_{P} fpga + Σ_{In(P)} c + Σ_{Out(P)} c`, and its nodes finish at
//!   `F = S(P) + D(P)`;
//! - a CPU node v finishes at `F(v) ≥ F(u) + cpu(v)` for every `u → v`, and `F(v) ≥ cpu(v)`;
//! - every piece holds at most M bytes (M = `maxSizePerFPGA`).
//!
//! The scorer's evaluation ([`crate::score::latency()`]) is a schedule: its cut opens a new
//! piece exactly where joining would close a cycle, and "pieces of one accelerator run
//! one after another" only adds more conditions on `S`. Every integer solution of the
//! latency IP is one too, for any number of pieces (its positions forbid cycles; its
//! memory row covers all pieces of an accelerator). Everything below holds for all
//! schedules, so the bound is valid for the IP and for the scorer.
//!
//! # Memory units
//!
//! With `G` grid steps, a node takes `s(v) = ⌊size(v) · G / M · (1 − 10⁻⁹)⌋` units, so
//! `Σ_{v∈P} s(v) ≤ G` for every piece (rounding down only relaxes; the factor absorbs
//! floating-point error). When the nodes that may go on an accelerator fit in M
//! altogether, memory cannot bind and `G = 0`. A node larger than M has no accelerator
//! state. For `v` in piece P, write `A(v) = Σ s` over `P ∩ (anc(v) ∪ {v})` and
//! `B(v) = Σ s` over `P ∩ desc(v)` (strict descendants); `A(v) + B(v) ≤ G`.
//!
//! # The recurrences
//!
//! Over a topological order, `c(u)` the output cost of u, `H(u, ·) = ∞` for a node u
//! without accelerator state:
//!
//! ```text
//! f_cpu(v)  = cpu(v) + max_{u→v} min( f_cpu(u),  H(u, G) + c(u) )
//! H(v, b)   = ∞ for b < s(v); otherwise
//!             fpga(v) + max_{u→v} min_{S ⊆ R(v)∖{u}, s(S) ≤ b − s(v)}  c(R(v)∖{u}∖S) +
//!                       min( f_cpu(u) + c(u),                  u on a CPU
//!                            H(u, G) + 2 c(u),                  u in another piece
//!                            H(u, b − s(v) − s(S)) )            u in v's piece
//! ```
//!
//! (a source takes only its own time). `R(v)` are v's *private inputs*: predecessors whose
//! only successor is v (at most the [`MAX_SIDE`] costliest with `c > 0` are weighed;
//! ignoring one only weakens the bound). Besides the path's predecessor u, each private
//! input either joins v's piece (S, only those that may be on an accelerator; it takes
//! memory) or is an input from outside it and adds its cost; `s(S)`, `c(X)` are sums.
//! Over the reverse order, for the part of v's piece that follows v:
//!
//! ```text
//! T(v, b) = 0                                              v has no successor
//!         = min( c(v),  max_{v→w} fpga(w) + T(w, b − s(w)) )   the second term only when
//!                                    every successor may be on an accelerator and Σ_w s(w) ≤ b
//! f_acc(v) = min_{s(v) ≤ a ≤ G}  H(v, a) + T(v, G − a)
//! ```
//!
//! H and T are non-increasing in b (a larger b only adds options to a min), by induction.
//!
//! # Proof
//!
//! **Paths.** Let `p = v_1 → … → v_m = v` be a path. Its nodes lie in items `I_1, …, I_r`
//! met in this order, each in one consecutive segment (meeting an item twice would close a
//! cycle of the item graph). The edge from the last node of `I_t` to the first of
//! `I_{t+1}` makes `I_{t+1}` start after `I_t` ends, so `F(v) ≥ Σ_t D(I_t)` (a CPU node's
//! "duration" being its cpu). For a piece segment `v_a … v_b` of `I_t = P`, define its
//! *partial sum*
//!
//! ```text
//! π(P, p) = Σ_{i=a..b} fpga(v_i)  +  [a > 1]·c(v_{a−1})  +  Σ_{i=a..b} c(R(v_i) ∖ {v_{i−1}} ∖ P)
//! ```
//!
//! All its cost terms are In terms of `D(P)`, each counted once: `v_{a−1} ∉ P` has an edge
//! into P; a private input x of `v_i` outside P too; x ≠ `v_{a−1}` (if `i = a`, x ≠ `v_{i−1}`
//! by definition; if `i > a`, `v_{a−1}`'s successor `v_a ≠ v_i`, while x's only successor is
//! `v_i`); and the private inputs of different `v_i` differ (one successor each). So
//! `D(P) ≥ π(P, p) + [b < m]·c(v_b)`, the last being an Out term (`v_b` has an edge out
//! of P). (R here stands for the private inputs the recurrence weighs; fewer terms only
//! lower π.) Write `Λ(p) = Σ_{t<r} D(I_t) + (cpu(v) if v is on a CPU, else π(I_r, p))`. Then
//! `F(v) ≥ Λ(p)` when v is on a CPU, and `F(v) ≥ Λ(p) + D(P) − π(P, p)` when v is in P.
//!
//! **Claim.** In every schedule, for every node v there is a path p ending at v with
//! `Λ(p) ≥ f_cpu(v)` if v is on a CPU, and `Λ(p) ≥ H(v, A(v))` if v is in a piece P.
//! Induction over the topological order. A source: `p = (v)`, `Λ = cpu(v)` resp.
//! `fpga(v) = H(v, b)` for all `b ≥ s(v)`, and `A(v) ≥ s(v)`. Otherwise, for every
//! predecessor u take u's path p' from the induction and extend it by v:
//!
//! - v on a CPU, u on a CPU: `Λ(p) = Λ(p') + cpu(v) ≥ f_cpu(u) + cpu(v)`.
//! - v on a CPU, u in a piece Q: Q becomes a full item of p and u ∈ Out(Q), so
//!   `Λ(p) ≥ Λ(p') + c(u) + cpu(v) ≥ H(u, A(u)) + c(u) + cpu(v) ≥ H(u, G) + c(u) + cpu(v)`
//!   (H non-increasing, `A(u) ≤ G`).
//!
//! For v in a piece P, let S be the private inputs of v other than u that are in P, and
//! `X = R(v) ∖ {u} ∖ S` the others, whose costs `π` adds at v. Every `x ∈ S` is in P and is
//! not an ancestor of u (its only successor is v), so `A(v) ≥ s(v) + s(S)`, and
//! `A(v) ≥ s(v) + s(S) + A(u)` when u is in P too (u's ancestors are v's; v is not one).
//!
//! - u on a CPU: v's segment starts at v, u ∈ In(P): `Λ(p) = Λ(p') + c(u) + fpga(v) + c(X)`.
//! - u in another piece Q: u ∈ Out(Q), u ∈ In(P):
//!   `Λ(p) ≥ Λ(p') + 2c(u) + fpga(v) + c(X) ≥ H(u, G) + 2c(u) + fpga(v) + c(X)`.
//! - u in P: the segment grows by v, `Λ(p) = Λ(p') + fpga(v) + c(X)` (the segment's entry
//!   term, if any, is already in `Λ(p')`), and
//!   `Λ(p') ≥ H(u, A(u)) ≥ H(u, A(v) − s(v) − s(S))`.
//!
//! Each case is at least the corresponding option of the recurrence at `b = A(v)` with the
//! true S (which satisfies `s(S) ≤ A(v) − s(v)`, and contains only nodes that may be on an
//! accelerator), so the extension through u is at least the min over S and options; v's
//! path is the extension through the predecessor where that min is largest. ∎
//!
//! **Tail.** For v in P, some chain `v → w_1 → … → w_j` inside P has
//! `Σ_i fpga(w_i) + [c(w_j) if w_j ∈ Out(P)] ≥ T(v, B(v))`, by reverse induction: if v has
//! no successor, `T = 0`; if a successor is outside P, `v ∈ Out(P)` pays `c(v) ≥ T(v, ·)`;
//! otherwise all successors w are in P (so each may be on an accelerator, and
//! `Σ_w s(w) ≤ B(v)`), `B(w) ≤ B(v) − s(w)`, and the chain through any w gives at least
//! `fpga(w) + T(w, B(v) − s(w))`, hence at least their max. These are fpga terms of strict
//! descendants of v and one Out term of `D(P)`, none of them in `π(P, p)` (fpga of
//! ancestors of v and of v itself, In terms). So
//! `F(v) ≥ H(v, A(v)) + T(v, B(v)) ≥ f_acc(v)`, taking `a = A(v)` (`B(v) ≤ G − A(v)`). ∎
//!
//! Consequently the latency is at least `max_v min(f_cpu(v), f_acc(v))`
//! ([`latency_lower_bound`]).
//!
//! # What it ignores
//!
//! Inputs of v's piece other than along the path and the private ones (they are In terms
//! too, but may be shared with other nodes of the piece and so cannot be added without
//! tracking the set), the number of accelerators and the memory shared by several pieces
//! of one accelerator, colour classes, and that a cut between pieces cuts all paths at
//! once (each path is bounded on its own, so it may cross at its cheapest edges). Without
//! memory pressure (`G = 0`) it can be no better than the old critical path at
//! `min(fpga, cpu)` — all nodes in one piece pay no communication — so it helps exactly
//! where memory forces pieces apart, which is where communication hurts.
//!
//! **Budget.** [`finish_bounds_within`] looks at the budget every [`CHECK_EVERY`] nodes
//! of the grid's passes; spent (or spent on entry) it returns the bound with `G = 0`
//! instead — memory left out, a valid but weaker bound, in `O((n + m)·2^MAX_SIDE)`.
//!
//! Complexity: `O((n + m) · G · 2^MAX_SIDE)` time (in practice `O((n + m) · G)`: few
//! nodes have private inputs) and `O(n · G)` memory, with G chosen so that `(n + m) · G`
//! stays below about 2²⁵ (G ≤ 2048).

use crate::model::Workload;
use crate::solve::budget::Budget;

/// Nodes between two looks at the budget.
const CHECK_EVERY: usize = 256;

/// Lower bounds on one node's finish time, by the node's state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FinishBound {
    /// When the node runs on a CPU.
    pub cpu: f64,
    /// When the node runs on an accelerator (`+∞` if it may not).
    pub accelerator: f64,
}

impl FinishBound {
    /// The bound whatever the node's state.
    pub fn min(&self) -> f64 {
        self.cpu.min(self.accelerator)
    }
}

/// The largest number of memory grid steps.
const MAX_GRID: usize = 2048;
/// Work budget: `(n + m) · G` stays below this.
const WORK: usize = 1 << 25;
/// At most this many private inputs of a node are weighed (the costliest).
pub const MAX_SIDE: usize = 4;

/// Per-node finish-time lower bounds (module documentation) for the workload's memory
/// per accelerator; `on_accelerator[v]` says whether v may run on an accelerator at all
/// (supported, its unit fits, at least one accelerator). Passing `true` for a node that
/// cannot go there only weakens the bound.
pub fn finish_bounds(w: &Workload, on_accelerator: &[bool]) -> Vec<FinishBound> {
    finish_bounds_within(w, on_accelerator, &Budget::unlimited())
}

/// [`finish_bounds`] within `budget` (module documentation, "Budget").
pub fn finish_bounds_within(
    w: &Workload,
    on_accelerator: &[bool],
    budget: &Budget,
) -> Vec<FinishBound> {
    let n = w.len();
    assert_eq!(on_accelerator.len(), n, "one flag per node");
    let memory = w.devices().memory_per_accelerator_bytes;
    let allowed: Vec<bool> = (0..n)
        .map(|v| on_accelerator[v] && w.node(v).size_bytes <= memory)
        .collect();
    let grid = MemoryGrid::new(w, &allowed);
    if grid.steps > 0 && !budget.is_exhausted() {
        if let Some(bounds) = bounds_on(w, &allowed, &grid, &|| budget.is_exhausted()) {
            return bounds;
        }
    }
    let none = MemoryGrid {
        steps: 0,
        units: vec![0; n],
    };
    bounds_on(w, &allowed, &none, &|| false).expect("never stopped")
}

/// The bounds on `grid`, or `None` when `stop` said so first.
fn bounds_on(
    w: &Workload,
    allowed: &[bool],
    grid: &MemoryGrid,
    stop: &dyn Fn() -> bool,
) -> Option<Vec<FinishBound>> {
    let n = w.len();
    let (h, cpu) = heads(w, allowed, grid, stop)?;
    let t = tails(w, allowed, grid, stop)?;
    let (width, full) = (grid.width(), grid.steps);
    let bounds = (0..n)
        .map(|v| {
            let accelerator = if allowed[v] {
                (grid.units[v]..width)
                    .map(|a| h[v * width + a] + t[v * width + full - a])
                    .fold(f64::INFINITY, f64::min)
            } else {
                f64::INFINITY
            };
            FinishBound {
                cpu: cpu[v],
                accelerator,
            }
        })
        .collect();
    Some(bounds)
}

/// The memory grid: G steps of M / G (0 when memory does not bind), and every node's
/// size in whole steps, rounded down.
struct MemoryGrid {
    steps: usize,
    units: Vec<usize>,
}

impl MemoryGrid {
    fn new(w: &Workload, allowed: &[bool]) -> Self {
        let n = w.len();
        let memory = w.devices().memory_per_accelerator_bytes;
        let size = |v: usize| w.node(v).size_bytes;
        let total: f64 = (0..n).filter(|&v| allowed[v]).map(size).sum();
        let edges: usize = (0..n).map(|v| w.successors(v).len()).sum();
        let steps = if memory.is_finite() && memory > 0.0 && total > memory {
            (WORK / (n + edges + 1)).clamp(16, MAX_GRID)
        } else {
            0
        };
        // The head and tail tables take 2 · 8 · n · (G + 1) bytes: at most what is left of
        // the run's memory allowance (budget.rs). Without the grid (G = 0) memory is left
        // out, which only weakens the bound.
        let steps = match crate::solve::budget::run_memory_left() {
            Some(left) if steps > 0 => {
                let fit = (left / (16.0 * (n + 1) as f64)).floor() as usize;
                if fit < 17 {
                    0
                } else {
                    steps.min(fit - 1)
                }
            }
            _ => steps,
        };
        let units = (0..n)
            .map(|v| {
                if steps == 0 {
                    0
                } else {
                    (size(v) / memory * steps as f64 * (1.0 - 1e-9))
                        .floor()
                        .max(0.0) as usize
                }
            })
            .collect();
        MemoryGrid { steps, units }
    }

    /// Budgets `0..=G`.
    fn width(&self) -> usize {
        self.steps + 1
    }
}

/// The head bounds `H(v, b)` (`h[v · width + b]`, ∞ where v may not run on an accelerator)
/// and the CPU finish bounds, in topological order (module documentation).
fn heads(
    w: &Workload,
    allowed: &[bool],
    grid: &MemoryGrid,
    stop: &dyn Fn() -> bool,
) -> Option<(Vec<f64>, Vec<f64>)> {
    let n = w.len();
    let (width, full, units) = (grid.width(), grid.steps, &grid.units);
    let cost = |u: usize| w.out_cost(u);
    let mut h = vec![f64::INFINITY; n * width];
    let mut cpu = vec![0.0f64; n];
    let mut option = Vec::new();
    for (i, &v) in w.topological_order().iter().enumerate() {
        if i % CHECK_EVERY == CHECK_EVERY - 1 && stop() {
            return None;
        }
        let node = w.node(v);
        let before = w
            .predecessors(v)
            .iter()
            .map(|&u| cpu[u].min(h[u * width + full] + cost(u)))
            .fold(0.0, f64::max);
        cpu[v] = node.cpu_latency + before;
        if !allowed[v] {
            continue;
        }
        // Private inputs of v: predecessors whose only successor is v, with a cost.
        let mut private: Vec<usize> = w
            .predecessors(v)
            .iter()
            .copied()
            .filter(|&u| w.successors(u).len() == 1 && cost(u) > 0.0)
            .collect();
        private.sort_by(|&a, &b| cost(b).total_cmp(&cost(a)));
        // Per predecessor u: the options that do not depend on the budget, and the choices
        // (memory units, In cost) for the private inputs other than u.
        option.clear();
        for &u in w.predecessors(v) {
            let fixed = (cpu[u] + cost(u)).min(h[u * width + full] + 2.0 * cost(u));
            let side: Vec<usize> = private
                .iter()
                .copied()
                .filter(|&x| x != u)
                .take(MAX_SIDE)
                .collect();
            option.push((u, fixed, side_choices(&side, allowed, units, cost)));
        }
        for b in units[v]..width {
            let room = b - units[v];
            let mut best = 0.0f64;
            for (u, fixed, choices) in &option {
                let mut least = f64::INFINITY;
                for &(used, paid) in choices {
                    if used <= room {
                        least = least.min(paid + fixed.min(h[u * width + room - used]));
                    }
                }
                best = best.max(least);
            }
            h[v * width + b] = node.fpga_latency + best;
        }
    }
    Some((h, cpu))
}

/// The tail bounds `T(v, b)` (`t[v · width + b]`), in reverse topological order (module
/// documentation).
fn tails(
    w: &Workload,
    allowed: &[bool],
    grid: &MemoryGrid,
    stop: &dyn Fn() -> bool,
) -> Option<Vec<f64>> {
    let (width, units) = (grid.width(), &grid.units);
    let mut t = vec![0.0f64; w.len() * width];
    for (i, &v) in w.topological_order().iter().rev().enumerate() {
        if i % CHECK_EVERY == CHECK_EVERY - 1 && stop() {
            return None;
        }
        let succ = w.successors(v);
        if succ.is_empty() {
            continue;
        }
        let inside = succ.iter().all(|&x| allowed[x]);
        let need: usize = succ.iter().map(|&x| units[x]).sum();
        for b in 0..width {
            let mut value = w.out_cost(v);
            if inside && need <= b {
                let chain = succ
                    .iter()
                    .map(|&x| w.node(x).fpga_latency + t[x * width + b - units[x]])
                    .fold(0.0, f64::max);
                value = value.min(chain);
            }
            t[v * width + b] = value;
        }
    }
    Some(t)
}

/// The ways to place the private inputs `side` of a node v on an accelerator: for each
/// subset S that joins v's piece (only inputs that may go on an accelerator), the memory
/// units it takes and the In cost the others add; dominated pairs dropped, sorted by
/// units.
fn side_choices(
    side: &[usize],
    allowed: &[bool],
    units: &[usize],
    cost: impl Fn(usize) -> f64,
) -> Vec<(usize, f64)> {
    let mut all: Vec<(usize, f64)> = (0..1usize << side.len())
        .filter(|mask| {
            side.iter()
                .enumerate()
                .all(|(i, &x)| mask >> i & 1 == 0 || allowed[x])
        })
        .map(|mask| {
            side.iter()
                .enumerate()
                .fold((0, 0.0), |(used, paid), (i, &x)| {
                    if mask >> i & 1 == 1 {
                        (used + units[x], paid)
                    } else {
                        (used, paid + cost(x))
                    }
                })
        })
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let mut kept: Vec<(usize, f64)> = Vec::new();
    for (used, paid) in all {
        if kept.last().is_none_or(|&(_, p)| paid < p) {
            kept.push((used, paid));
        }
    }
    kept
}

/// `max_v min(f_cpu(v), f_acc(v))`: a lower bound on the latency of every schedule.
pub fn latency_lower_bound(bounds: &[FinishBound]) -> f64 {
    bounds.iter().map(FinishBound::min).fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DeviceSet, Node};

    fn node(id: i64, fpga: f64, cpu: f64, size: f64) -> Node {
        Node {
            id,
            name: None,
            fpga_latency: fpga,
            cpu_latency: cpu,
            size_bytes: size,
            supported_on_accelerator: true,
            is_backward: false,
            color_class: None,
            layer_id: None,
            module: None,
            memory: None,
        }
    }

    /// a → b, fpga 1 and 2, cpu 10 and 20, c(a) = 3, 6 bytes each, two accelerators.
    fn chain(memory: f64) -> Workload {
        let devices = DeviceSet {
            accelerators: 2,
            memory_per_accelerator_bytes: memory,
            cpus: 1,
        };
        Workload::new(
            vec![node(1, 1.0, 10.0, 6.0), node(2, 2.0, 20.0, 6.0)],
            vec![(1, 2, 3.0, 0.0)],
            devices,
        )
        .unwrap()
    }

    /// A spent budget gives the grid-free bound: memory left out, so never above the
    /// full bound (valid and weaker), and here strictly below it (a and b may then share
    /// a piece and pay no transfer).
    #[test]
    fn a_spent_budget_gives_the_weaker_grid_free_bound() {
        let w = chain(10.0);
        let full = finish_bounds(&w, &[true, true]);
        let spent = finish_bounds_within(&w, &[true, true], &Budget::new(Some(0.0), None));
        for (s, f) in spent.iter().zip(&full) {
            assert!(
                s.cpu <= f.cpu && s.accelerator <= f.accelerator,
                "{s:?} {f:?}"
            );
        }
        assert!(latency_lower_bound(&spent) < latency_lower_bound(&full));
    }

    #[test]
    fn two_nodes_that_cannot_share_a_piece() {
        // M = 10 < 12: a and b are never in one piece.
        // f_cpu(a) = 10; f_acc(a) = 1 + c(a) = 4 (a must send to b).
        // f_cpu(b) = 20 + min(f_cpu(a), H(a) + c(a)) = 20 + min(10, 1 + 3) = 24.
        // f_acc(b) = 2 + min(f_cpu(a) + 3, H(a) + 2·3) = 2 + min(13, 7) = 9
        // (a on accelerator 0 sends, b on accelerator 1 receives).
        let f = finish_bounds(&chain(10.0), &[true, true]);
        assert_eq!(
            f[0],
            FinishBound {
                cpu: 10.0,
                accelerator: 4.0
            }
        );
        assert_eq!(
            f[1],
            FinishBound {
                cpu: 24.0,
                accelerator: 9.0
            }
        );
        // The optimum: a on accelerator 0 (1 + 3), b on accelerator 1 (3 + 2) = 9.
        assert_eq!(latency_lower_bound(&f), 9.0);
    }

    #[test]
    fn two_nodes_in_one_piece() {
        // M = 20: both fit one piece, which takes 1 + 2 and pays nothing: f_acc = 3 for
        // both (T(a) = min(c(a), fpga(b)) = 2). b on a CPU after a on an accelerator:
        // 1 + 3 + 20 = 24 < 10 + 20.
        let f = finish_bounds(&chain(20.0), &[true, true]);
        assert_eq!(
            f[0],
            FinishBound {
                cpu: 10.0,
                accelerator: 3.0
            }
        );
        assert_eq!(
            f[1],
            FinishBound {
                cpu: 24.0,
                accelerator: 3.0
            }
        );
        assert_eq!(latency_lower_bound(&f), 3.0);
    }

    #[test]
    fn cpu_only_nodes() {
        // b may not go on an accelerator: f_acc(a) = 1 + 3 (it must send), f_cpu(b) = 4 + 20.
        let f = finish_bounds(&chain(20.0), &[true, false]);
        assert_eq!(
            f[0],
            FinishBound {
                cpu: 10.0,
                accelerator: 4.0
            }
        );
        assert_eq!(
            f[1],
            FinishBound {
                cpu: 24.0,
                accelerator: f64::INFINITY
            }
        );
        assert_eq!(latency_lower_bound(&f), 24.0);
    }
}

//! Folding free leaves: groups that can join their only neighbour without loss.
//!
//! A group `g` is a *free leaf* of a group `h` when
//! 1. `h` is `g`'s only neighbour in the group DAG (or `g` has none, and no communication
//!    hyperedge touches `g`);
//! 2. `g` costs nothing: Σ fpgaLatency = Σ cpuLatency = 0 over its nodes;
//! 3. `g` may run on an accelerator;
//! 4. every communication hyperedge `T` containing `g` also contains `h`.
//!
//! **Loads.** Moving `g` onto `h`'s device never raises a load: `g` adds no compute; a
//! hyperedge with both `g` and `h` stays cut by `g`'s old device only if it was already
//! (it holds `h`'s device's group `h` outside), and `h`'s device cuts it afterwards only if
//! it did before; no other device's intersection changes. Contiguity is kept: a walk can
//! enter or leave the leaf `g` only through `h`. Only memory can object: `h`'s device
//! gains `size(g)`.
//!
//! **Safe folds.** When `size(g) = 0` or the whole workload fits in one accelerator,
//! memory cannot object, so every plan maps to a plan with `g` beside `h` and loads no
//! higher: the contiguous optimum is unchanged ([`fold_free_leaves`]). Every folded leaf
//! halves the number of ideals it would otherwise double (GNMT's 18 zero-cost inputs alone
//! multiply the lattice by up to 2^18).
//!
//! **Memory-bound folds** ([`fold_leaves`] with `memory_aware`). A leaf with `size > 0`
//! under a binding memory is folded too, and the folding is then *certified* by the DP
//! (see [`crate::solve::dp`]) with two problems on the same folded DAG:
//! - `R`: the folded leaves weightless (their bytes dropped, [`Folding::weightless`]).
//!   Moving each folded leaf of a plan of the original problem `G` onto its neighbour's
//!   device (fold by fold, in folding order) raises no load (above) and no `R`-memory
//!   (the moved bytes weigh nothing), so `OPT(R) ≤ OPT(G)`: a lower bound.
//! - `F`: the folded leaves with their bytes ([`Folding::contraction`]). Every plan of `F`
//!   is a plan of `G`, so `OPT(G) ≤ OPT(F)`.
//!
//! An optimal plan of `R` that fits memory with the real bytes is a plan of `F`, hence
//! optimal for `G`; otherwise `OPT(F) = OPT(R)` proves `F`'s plan optimal. When neither
//! holds the leaf is an item that its neighbour's stage cannot always carry, and the DP
//! falls back to the DAG without memory-bound folds.
//!
//! Folding repeats until no leaf qualifies (a fold can make its target a leaf).
//! Complexity: O(rounds · (n + Σ|T|)).

use crate::model::contraction::Contraction;
use crate::model::Workload;

/// A contraction with free leaves folded.
#[derive(Clone, Debug)]
pub struct Folding {
    /// The folded group DAG, every group with its real bytes (`F`).
    pub contraction: Contraction,
    /// Leaves folded in all.
    pub folded: usize,
    /// Of which folded although memory may bind (size > 0): the certified kind.
    pub memory_bound: usize,
    /// Per group of `contraction`, its bytes without the memory-bound folded leaves
    /// (summed in node order, as the contraction sums them).
    pub kept_bytes: Vec<f64>,
}

impl Folding {
    /// The relaxation `R`: the same DAG with the memory-bound leaves' bytes dropped.
    pub fn weightless(&self) -> Contraction {
        let mut c = self.contraction.clone();
        for (g, &b) in c.groups.iter_mut().zip(&self.kept_bytes) {
            g.size_bytes = b;
        }
        c
    }
}

/// The contraction with every safely foldable leaf folded into its neighbour, and how many
/// were folded (module documentation: the optimum is unchanged).
pub fn fold_free_leaves(w: &Workload, c: Contraction) -> (Contraction, usize) {
    let f = fold_leaves(w, c, false);
    (f.contraction, f.folded)
}

/// Folds free leaves; with `memory_aware`, also those whose bytes may matter under a
/// binding memory (to be certified, module documentation).
pub fn fold_leaves(w: &Workload, c: Contraction, memory_aware: bool) -> Folding {
    let memory = w.devices().memory_per_accelerator_bytes;
    let total_size: f64 = w.nodes().iter().map(|n| n.size_bytes).sum();
    let memory_never_binds = total_size <= memory;
    let mut weightless_node = vec![false; w.len()];
    let mut current = c;
    let (mut folded, mut memory_bound) = (0, 0);
    loop {
        let hyperedges = current.communication_hyperedges(w);
        let mut touching: Vec<Vec<usize>> = vec![Vec::new(); current.len()];
        for (t, (groups, _)) in hyperedges.iter().enumerate() {
            for &g in groups {
                touching[g].push(t);
            }
        }
        let n = current.len();
        let mut target: Vec<usize> = (0..n).collect();
        let mut taken = vec![false; n];
        let mut any = false;
        for g in 0..n {
            let group = &current.groups[g];
            if taken[g]
                || group.fpga_latency != 0.0
                || group.cpu_latency != 0.0
                || !group.supported_on_accelerator
            {
                continue;
            }
            let binds = group.size_bytes != 0.0 && !memory_never_binds;
            if binds && !memory_aware {
                continue;
            }
            let mut neighbours: Vec<usize> = current.pred[g]
                .iter()
                .chain(&current.succ[g])
                .copied()
                .collect();
            neighbours.dedup();
            let h = match neighbours.as_slice() {
                [h] => *h,
                [] if touching[g].is_empty() && n > 1 => usize::from(g == 0),
                _ => continue,
            };
            if taken[h] || target[h] != h {
                continue;
            }
            if !touching[g]
                .iter()
                .all(|&t| hyperedges[t].0.binary_search(&h).is_ok())
            {
                continue;
            }
            target[g] = h;
            taken[g] = true;
            taken[h] = true;
            any = true;
            folded += 1;
            if binds {
                memory_bound += 1;
                for &v in &group.nodes {
                    weightless_node[v] = true;
                }
            }
        }
        if !any {
            let mut kept_bytes = vec![0.0; current.len()];
            for (v, node) in w.nodes().iter().enumerate() {
                if !weightless_node[v] {
                    kept_bytes[current.group_of[v]] += node.size_bytes;
                }
            }
            return Folding {
                contraction: current,
                folded,
                memory_bound,
                kept_bytes,
            };
        }
        let label: Vec<usize> = current.group_of.iter().map(|&g| target[g]).collect();
        let arcs: Vec<(usize, usize)> = (0..n)
            .flat_map(|a| current.succ[a].iter().map(move |&b| (a, b)))
            .map(|(a, b)| (target[a], target[b]))
            .collect();
        current = Contraction::from_labels(w, &label, arcs);
    }
}

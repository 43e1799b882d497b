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
//! **On a cluster** ([`fold_free_leaves_on_cluster`]) the same rule with the conditions the
//! cluster's communication rule needs: condition 2 on every accelerator type
//! (`x_t(g) = 0` for every type `t` and `cpuLatency(g) = 0`), the memory of condition 3
//! the smallest accelerator's, and condition 4 stricter: every transfer `g` *produces* goes
//! to `h` only (its hyperedge is `{g, h}`). A transfer `g` produces then disappears (its
//! sender and receiver stop paying, nobody else took part); a transfer `g` receives keeps
//! its producer, so every other receiver's price is unchanged, `g`'s old device stops
//! paying, `h`'s device pays what it paid before (it already held `h`, a participant), and
//! the sender's once-only part can only vanish. A transfer from `g` to another group
//! besides `h` would change that receiver's price, which depends on where the producer is:
//! hence the stricter condition. Contiguity and the machine order are kept as above, so the
//! optimum over the cluster's plan space is unchanged. Only safe folds are made there.
//!
//! Both are one engine, [`fold_leaves_by`], with the differences in a [`LeafRule`].
//! Folding repeats until no leaf qualifies (a fold can make its target a leaf).
//! Complexity: O(rounds · (n + Σ|T|)).

use crate::model::contraction::Contraction;
use crate::model::grouping::Group;
use crate::model::{ClusterCosts, Workload};

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

/// What differs between the device models (module documentation).
pub struct LeafRule<'a> {
    /// Condition 2: whether a group costs nothing on every device.
    pub costs_nothing: &'a dyn Fn(&Group) -> bool,
    /// The smallest accelerator memory: when the whole workload fits in it, memory never
    /// binds (condition 3).
    pub memory_bytes: f64,
    /// Also fold leaves whose bytes may matter (the certified kind).
    pub memory_aware: bool,
    /// The cluster's condition 4: every transfer the leaf produces goes to its target only.
    pub sends_only_to_target: bool,
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
    let costs_nothing = |g: &Group| g.fpga_latency == 0.0 && g.cpu_latency == 0.0;
    let rule = LeafRule {
        costs_nothing: &costs_nothing,
        memory_bytes: w.devices().memory_per_accelerator_bytes,
        memory_aware,
        sends_only_to_target: false,
    };
    fold_leaves_by(w, c, &rule)
}

/// The contraction with every free leaf folded on the cluster of `costs` (module
/// documentation: the optimum over the cluster's plan space is unchanged), and how many
/// were folded.
pub fn fold_free_leaves_on_cluster(
    w: &Workload,
    costs: &ClusterCosts,
    c: Contraction,
) -> (Contraction, usize) {
    let cluster = costs.cluster();
    let free_node = |v: usize| {
        w.node(v).cpu_latency == 0.0 && (0..cluster.types().len()).all(|t| costs.time(t, v) == 0.0)
    };
    let costs_nothing = |g: &Group| g.nodes.iter().all(|&v| free_node(v));
    let rule = LeafRule {
        costs_nothing: &costs_nothing,
        memory_bytes: cluster.smallest_memory_bytes(),
        memory_aware: false,
        sends_only_to_target: true,
    };
    let f = fold_leaves_by(w, c, &rule);
    (f.contraction, f.folded)
}

/// The transfers of one round over the groups of `c`: per producer node with a cost, its
/// group set `T(u)` (sorted, singletons dropped) and its producer's group, and per group
/// the transfers that touch it.
struct Transfers {
    sets: Vec<(Vec<usize>, usize)>,
    touching: Vec<Vec<usize>>,
}

impl Transfers {
    fn new(w: &Workload, c: &Contraction) -> Transfers {
        let mut sets = Vec::new();
        let mut touching: Vec<Vec<usize>> = vec![Vec::new(); c.len()];
        for u in 0..w.len() {
            if w.out_cost(u) == 0.0 {
                continue;
            }
            let pg = c.group_of[u];
            let mut t: Vec<usize> = std::iter::once(pg)
                .chain(w.successors(u).iter().map(|&x| c.group_of[x]))
                .collect();
            t.sort_unstable();
            t.dedup();
            if t.len() > 1 {
                for &g in &t {
                    touching[g].push(sets.len());
                }
                sets.push((t, pg));
            }
        }
        Transfers { sets, touching }
    }

    /// Condition 4 for folding `g` into `h`.
    fn allow(&self, g: usize, h: usize, sends_only_to_target: bool) -> bool {
        self.touching[g].iter().all(|&i| {
            let (set, producer) = &self.sets[i];
            set.binary_search(&h).is_ok()
                && !(sends_only_to_target && *producer == g && set.len() > 2)
        })
    }
}

/// Folds free leaves under `rule` (module documentation) until none qualifies.
pub fn fold_leaves_by(w: &Workload, c: Contraction, rule: &LeafRule) -> Folding {
    let total_size: f64 = w.nodes().iter().map(|n| n.size_bytes).sum();
    let memory_never_binds = total_size <= rule.memory_bytes;
    let mut weightless_node = vec![false; w.len()];
    let mut current = c;
    let (mut folded, mut memory_bound) = (0, 0);
    loop {
        let transfers = Transfers::new(w, &current);
        let n = current.len();
        let mut target: Vec<usize> = (0..n).collect();
        let mut taken = vec![false; n];
        let mut any = false;
        for g in 0..n {
            let group = &current.groups[g];
            if taken[g] || !group.supported_on_accelerator || !(rule.costs_nothing)(group) {
                continue;
            }
            let binds = group.size_bytes != 0.0 && !memory_never_binds;
            if binds && !rule.memory_aware {
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
                [] if transfers.touching[g].is_empty() && n > 1 => usize::from(g == 0),
                _ => continue,
            };
            if taken[h] || target[h] != h || !transfers.allow(g, h, rule.sends_only_to_target) {
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

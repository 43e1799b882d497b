//! Folding free leaves: groups that can join their only neighbour without loss.
//!
//! A group `g` is folded into a group `h` when
//! 1. `h` is `g`'s only neighbour in the group DAG (or `g` has none, and no communication
//!    hyperedge touches `g`);
//! 2. `g` costs nothing: Σ fpgaLatency = Σ cpuLatency = 0 over its nodes;
//! 3. `g` may run on an accelerator, and either needs no memory or the whole workload fits
//!    in one accelerator (so memory never binds);
//! 4. every communication hyperedge `T` containing `g` also contains `h`.
//!
//! Then moving `g` onto `h`'s device never raises a load: `g` adds no compute; a
//! hyperedge with both `g` and `h` stays cut by `g`'s old device only if it was already
//! (it holds `h`'s device's group `h` outside), and `h`'s device cuts it afterwards only if
//! it did before; no other device's intersection changes. Contiguity is kept: a walk can
//! enter or leave the leaf `g` only through `h`. So the contiguous optimum is unchanged,
//! while every folded leaf halves the number of ideals it would otherwise double
//! (GNMT's 18 zero-cost inputs alone multiply the lattice by up to 2^18).
//!
//! Folding repeats until no leaf qualifies. Complexity: O(rounds · (n + Σ|T|)).

use crate::model::contraction::Contraction;
use crate::model::Workload;

/// The contraction with every free leaf folded into its neighbour, and how many were folded.
pub fn fold_free_leaves(w: &Workload, c: Contraction) -> (Contraction, usize) {
    let memory = w.devices().memory_per_accelerator_bytes;
    let total_size: f64 = w.nodes().iter().map(|n| n.size_bytes).sum();
    let memory_never_binds = total_size <= memory;
    let mut current = c;
    let mut folded = 0;
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
            if taken[g] || group.fpga_latency != 0.0 || group.cpu_latency != 0.0 || !group.supported_on_accelerator {
                continue;
            }
            if group.size_bytes != 0.0 && !memory_never_binds {
                continue;
            }
            let mut neighbours: Vec<usize> = current.pred[g].iter().chain(&current.succ[g]).copied().collect();
            neighbours.dedup();
            let h = match neighbours.as_slice() {
                [h] => *h,
                [] if touching[g].is_empty() && n > 1 => usize::from(g == 0),
                _ => continue,
            };
            if taken[h] || target[h] != h {
                continue;
            }
            if !touching[g].iter().all(|&t| hyperedges[t].0.binary_search(&h).is_ok()) {
                continue;
            }
            target[g] = h;
            taken[g] = true;
            taken[h] = true;
            any = true;
            folded += 1;
        }
        if !any {
            return (current, folded);
        }
        let label: Vec<usize> = current.group_of.iter().map(|&g| target[g]).collect();
        let arcs: Vec<(usize, usize)> = (0..n)
            .flat_map(|a| current.succ[a].iter().map(move |&b| (a, b)))
            .map(|(a, b)| (target[a], target[b]))
            .collect();
        current = Contraction::from_labels(w, &label, arcs);
    }
}

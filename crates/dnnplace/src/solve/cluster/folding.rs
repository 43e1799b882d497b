//! Folding free leaves on a cluster: the rule of [`crate::solve::leaf_folding`], with the
//! conditions the cluster's communication rule needs.
//!
//! A group `g` is folded into a group `h` when
//! 1. `h` is `g`'s only neighbour in the group DAG (or `g` has none, and no transfer touches
//!    `g`);
//! 2. `g` costs nothing anywhere: `x_t(g) = 0` for every type `t` and `cpuLatency(g) = 0`;
//! 3. `g` may run on an accelerator, and either needs no memory or the whole workload fits
//!    in the smallest accelerator;
//! 4. every transfer that `g` receives also has `h` as its producer or a receiver, and every
//!    transfer `g` produces goes to `h` only.
//!
//! Moving `g` onto `h`'s device never raises a load. `g` adds no compute and fits. A
//! transfer `g` produces (to `h` only) disappears: its sender and receiver stop paying, and
//! nobody else took part. A transfer `g` receives keeps its producer, so every other
//! receiver's price is unchanged; `g`'s old device stops paying, `h`'s device pays what it
//! paid before (it already held `h`, a participant), and the sender's once-only part can
//! only vanish. (Condition 4 is stricter than MODEL.md's: a transfer from `g` to another
//! group besides `h` would change that receiver's price, which depends on where the producer
//! is.) Contiguity and the machine order are kept: a walk can enter or leave `g` only
//! through `h`. So the optimum over the cluster's plan space is unchanged.
//!
//! Folding repeats until no leaf qualifies. Complexity: O(rounds · (n + m)).

use crate::model::contraction::Contraction;
use crate::model::{ClusterCosts, Workload};

/// The contraction with every free leaf folded into its neighbour, and how many were folded.
pub fn fold_free_leaves(
    w: &Workload,
    costs: &ClusterCosts,
    c: Contraction,
) -> (Contraction, usize) {
    let cluster = costs.cluster();
    let smallest = cluster.smallest_memory_bytes();
    let total_size: f64 = w.nodes().iter().map(|n| n.size_bytes).sum();
    let memory_never_binds = total_size <= smallest;
    let free_node = |v: usize| {
        w.node(v).cpu_latency == 0.0 && (0..cluster.types().len()).all(|t| costs.time(t, v) == 0.0)
    };
    let mut current = c;
    let mut folded = 0;
    loop {
        let n = current.len();
        // Per group: the groups it receives from (with the other receivers), and whether its
        // transfers go anywhere but one group.
        let mut receives: Vec<Vec<(usize, Vec<usize>)>> = vec![Vec::new(); n];
        let mut sends_to: Vec<Vec<usize>> = vec![Vec::new(); n];
        for u in 0..w.len() {
            if w.out_cost(u) == 0.0 {
                continue;
            }
            let pg = current.group_of[u];
            let mut recv: Vec<usize> = w
                .successors(u)
                .iter()
                .map(|&x| current.group_of[x])
                .filter(|&g| g != pg)
                .collect();
            recv.sort_unstable();
            recv.dedup();
            for &r in &recv {
                receives[r].push((pg, recv.clone()));
            }
            sends_to[pg].extend(recv);
        }
        for list in &mut sends_to {
            list.sort_unstable();
            list.dedup();
        }
        let mut target: Vec<usize> = (0..n).collect();
        let mut taken = vec![false; n];
        let mut any = false;
        for g in 0..n {
            let group = &current.groups[g];
            if taken[g]
                || !group.supported_on_accelerator
                || !group.nodes.iter().all(|&v| free_node(v))
            {
                continue;
            }
            if group.size_bytes != 0.0 && !memory_never_binds {
                continue;
            }
            let touched = !receives[g].is_empty() || !sends_to[g].is_empty();
            let mut neighbours: Vec<usize> = current.pred[g]
                .iter()
                .chain(&current.succ[g])
                .copied()
                .collect();
            neighbours.dedup();
            let h = match neighbours.as_slice() {
                [h] => *h,
                [] if !touched && n > 1 => usize::from(g == 0),
                _ => continue,
            };
            if taken[h] || target[h] != h {
                continue;
            }
            let sends_ok = sends_to[g].iter().all(|&r| r == h);
            let receives_ok = receives[g]
                .iter()
                .all(|(pg, recv)| *pg == h || recv.contains(&h));
            if !sends_ok || !receives_ok {
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

//! Latency plans from cutting a topological order of the groups into runs, by dynamic
//! programming: held plans (upper bounds and warm starts) for the latency IP.
//!
//! The groups of the [`Contraction`] (colour classes fused on cycles) are taken in a
//! topological order `g_1, …, g_G`. A plan is a sequence of decisions: the next group runs
//! on CPUs, or the next run `g_i … g_{j−1}` of consecutive groups goes to a fresh
//! accelerator (at most k of them), within its memory and if every group may run there.
//! A run of a topological order is convex (a path that leaves it and comes back would pass
//! a group between its ends, which is in the run) and runs only feed later runs, so each
//! accelerator holds one piece and the calls form no cycle.
//!
//! The DP minimises the *sum* of the items' durations — a run's
//! `Σ fpga + Σ_{In} c + Σ_{Out} c`, a CPU group's `Σ cpu` — which is the latency of
//! running all items one after another, so at least the plan's true latency (items that
//! could overlap only make it shorter). The plans are re-scored by the scorer, which has
//! the last word; a plan the scorer cuts differently (backward edges of training graphs can
//! go against the forward order) is dropped by the caller's check.
//!
//! Two orders are tried, the contraction's (Kahn's) and a depth-first one (which keeps a
//! branch's groups together): on the published latency workloads each wins on some (a
//! depth-first order visiting the last successor first won on none).
//!
//! Complexity: O(G · L · (k + d)) for run lengths up to L (memory-bounded, capped so that
//! the work stays below about 2²⁶) and d the average number of edges per group.

use crate::model::contraction::Contraction;
use crate::model::{Device, Placement, Workload};

/// The work cap: runs are not extended beyond this many group steps in total.
const WORK: usize = 1 << 26;

/// Plans cut from the two orders (duplicates removed), with a name for each.
pub fn plans(w: &Workload) -> Vec<(Placement, &'static str)> {
    let c = Contraction::new(w);
    let kahn: Vec<usize> = (0..c.len()).collect();
    let mut out: Vec<(Placement, &'static str)> = Vec::new();
    let orders = [
        (kahn, "runs dp (topological order)"),
        (depth_first(&c), "runs dp (depth-first order)"),
    ];
    for (order, name) in orders {
        if let Some(p) = cut(w, &c, &order) {
            if out.iter().all(|(q, _)| q.assignment != p.assignment) {
                out.push((p, name));
            }
        }
    }
    out
}

/// A topological order of the groups: reverse post-order of a depth-first search from the
/// groups without predecessors, successors in index order.
fn depth_first(c: &Contraction) -> Vec<usize> {
    let n = c.len();
    let mut seen = vec![false; n];
    let mut post = Vec::with_capacity(n);
    for root in (0..n).filter(|&g| c.pred[g].is_empty()) {
        if seen[root] {
            continue;
        }
        seen[root] = true;
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        while let Some(&mut (g, ref mut next)) = stack.last_mut() {
            if let Some(&s) = c.succ[g].get(*next) {
                *next += 1;
                if !seen[s] {
                    seen[s] = true;
                    stack.push((s, 0));
                }
            } else {
                post.push(g);
                stack.pop();
            }
        }
    }
    post.reverse();
    post
}

/// The best cut of `order` into CPU groups and accelerator runs (module documentation).
fn cut(w: &Workload, c: &Contraction, order: &[usize]) -> Option<Placement> {
    let groups = order.len();
    let d = w.devices();
    let (k, memory) = (d.accelerators, d.memory_per_accelerator_bytes);
    if groups == 0 {
        return None;
    }
    let cap = (WORK / (groups * (k + 1) + 1)).max(1);
    // best[j * (k + 1) + a]: the least cost of the first j groups with a accelerators used;
    // from[..]: (i, whether i..j is an accelerator run).
    let width = k + 1;
    let mut best = vec![f64::INFINITY; (groups + 1) * width];
    let mut from = vec![(usize::MAX, false); (groups + 1) * width];
    best[0] = 0.0;
    let n = w.len();
    // Run bookkeeping with epochs instead of clearing.
    let mut in_run = vec![usize::MAX; n];
    let mut counted_in = vec![usize::MAX; n];
    let mut outside = vec![0usize; n];
    for i in 0..groups {
        for a in 0..width {
            let here = best[i * width + a];
            if here.is_finite() {
                let cpu = here + c.groups[order[i]].cpu_latency;
                if cpu < best[(i + 1) * width + a] {
                    best[(i + 1) * width + a] = cpu;
                    from[(i + 1) * width + a] = (i, false);
                }
            }
        }
        if k == 0 || !(0..k).any(|a| best[i * width + a].is_finite()) {
            continue;
        }
        let (mut size, mut fpga, mut cost_in, mut cost_out) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
        for j in i + 1..=groups.min(i + cap) {
            let group = &c.groups[order[j - 1]];
            size += group.size_bytes;
            if !group.supported_on_accelerator || size > memory {
                break;
            }
            fpga += group.fpga_latency;
            for &y in &group.nodes {
                in_run[y] = i;
            }
            for &y in &group.nodes {
                let count = w.successors(y).iter().filter(|&&s| in_run[s] != i).count();
                outside[y] = count;
                if count > 0 {
                    cost_out += w.out_cost(y);
                }
                for &u in w.predecessors(y) {
                    if in_run[u] != i {
                        if counted_in[u] != i {
                            counted_in[u] = i;
                            cost_in += w.out_cost(u);
                        }
                    } else if c.group_of[u] != c.group_of[y] {
                        outside[u] -= 1;
                        if outside[u] == 0 {
                            cost_out -= w.out_cost(u);
                        }
                    }
                }
            }
            let run = fpga + cost_in + cost_out.max(0.0);
            for a in 0..k {
                let here = best[i * width + a];
                if here.is_finite() && here + run < best[j * width + a + 1] {
                    best[j * width + a + 1] = here + run;
                    from[j * width + a + 1] = (i, true);
                }
            }
        }
    }
    let a = (0..width).min_by(|&x, &y| best[groups * width + x].total_cmp(&best[groups * width + y]))?;
    if !best[groups * width + a].is_finite() {
        return None;
    }
    let mut device = vec![Device::Cpu(0); c.len()];
    let (mut j, mut a) = (groups, a);
    while j > 0 {
        let (i, on_accelerator) = from[j * width + a];
        for &g in &order[i..j] {
            device[g] = if on_accelerator { Device::Accelerator(a - 1) } else { Device::Cpu(g) };
        }
        if on_accelerator {
            a -= 1;
        }
        j = i;
    }
    Some(Placement::new(c.group_of.iter().map(|&g| device[g]).collect()))
}

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
//! the work stays below about 2²⁶) and d the average number of edges per group. The
//! budget is looked at every [`CHECK_EVERY`] start positions: a cut it stops gives no plan
//! (the plans of the orders already cut stay).

use crate::model::contraction::Contraction;
use crate::model::grouping::Group;
use crate::model::{Device, Placement, Workload};
use crate::solve::budget::Budget;

/// The work cap: runs are not extended beyond this many group steps in total.
const WORK: usize = 1 << 26;
/// Start positions between two looks at the budget.
const CHECK_EVERY: usize = 64;

/// Plans cut from the two orders (duplicates removed), with a name for each.
pub fn plans(w: &Workload) -> Vec<(Placement, &'static str)> {
    plans_within(w, &Budget::unlimited())
}

/// [`plans`] while `budget` lasts (module documentation).
pub fn plans_within(w: &Workload, budget: &Budget) -> Vec<(Placement, &'static str)> {
    let c = Contraction::new(w);
    let kahn: Vec<usize> = (0..c.len()).collect();
    let mut out: Vec<(Placement, &'static str)> = Vec::new();
    let orders = [
        (kahn, "runs dp (topological order)"),
        (depth_first(&c), "runs dp (depth-first order)"),
    ];
    for (order, name) in orders {
        if let Some(p) = cut(w, &c, &order, budget) {
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
fn cut(w: &Workload, c: &Contraction, order: &[usize], budget: &Budget) -> Option<Placement> {
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
    let mut run = RunCost::new(w.len());
    for i in 0..groups {
        if i % CHECK_EVERY == 0 && budget.is_exhausted() {
            return None;
        }
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
        run.restart(i);
        let mut size = 0.0f64;
        for j in i + 1..=groups.min(i + cap) {
            let group = &c.groups[order[j - 1]];
            size += group.size_bytes;
            if !group.supported_on_accelerator || size > memory {
                break;
            }
            run.append(w, c, group);
            let cost = run.cost();
            for a in 0..k {
                let here = best[i * width + a];
                if here.is_finite() && here + cost < best[j * width + a + 1] {
                    best[j * width + a + 1] = here + cost;
                    from[j * width + a + 1] = (i, true);
                }
            }
        }
    }
    let a = (0..width)
        .min_by(|&x, &y| best[groups * width + x].total_cmp(&best[groups * width + y]))?;
    if !best[groups * width + a].is_finite() {
        return None;
    }
    Some(walk_back(c, order, &from, width, a))
}

/// The cost `Σ fpga + Σ_In c + Σ_Out c` of the accelerator run that starts at position
/// `start` of the order, kept up to date as its groups are appended. The node marks carry
/// the run's start (an epoch), so nothing is cleared between runs.
struct RunCost {
    start: usize,
    fpga: f64,
    cost_in: f64,
    cost_out: f64,
    /// The run (start) that node y is in.
    in_run: Vec<usize>,
    /// The run whose In cost counts node u already.
    counted_in: Vec<usize>,
    /// Successors of node y outside the run.
    outside: Vec<usize>,
}

impl RunCost {
    fn new(n: usize) -> Self {
        RunCost {
            start: usize::MAX,
            fpga: 0.0,
            cost_in: 0.0,
            cost_out: 0.0,
            in_run: vec![usize::MAX; n],
            counted_in: vec![usize::MAX; n],
            outside: vec![0; n],
        }
    }

    /// An empty run starting at position `start`.
    fn restart(&mut self, start: usize) {
        (self.start, self.fpga, self.cost_in, self.cost_out) = (start, 0.0, 0.0, 0.0);
    }

    /// Appends `group` (of the contraction `c`): its compute, the inputs it receives from
    /// outside the run (In), and its nodes' outputs that leave the run (Out), less the
    /// Out costs of earlier nodes whose last outside successor it is.
    fn append(&mut self, w: &Workload, c: &Contraction, group: &Group) {
        let i = self.start;
        self.fpga += group.fpga_latency;
        for &y in &group.nodes {
            self.in_run[y] = i;
        }
        for &y in &group.nodes {
            let count = w
                .successors(y)
                .iter()
                .filter(|&&s| self.in_run[s] != i)
                .count();
            self.outside[y] = count;
            if count > 0 {
                self.cost_out += w.out_cost(y);
            }
            for &u in w.predecessors(y) {
                if self.in_run[u] != i {
                    if self.counted_in[u] != i {
                        self.counted_in[u] = i;
                        self.cost_in += w.out_cost(u);
                    }
                } else if c.group_of[u] != c.group_of[y] {
                    self.outside[u] -= 1;
                    if self.outside[u] == 0 {
                        self.cost_out -= w.out_cost(u);
                    }
                }
            }
        }
    }

    fn cost(&self) -> f64 {
        self.fpga + self.cost_in + self.cost_out.max(0.0)
    }
}

/// The plan of the back links `from`, ending with `a` accelerators used: each run on its
/// accelerator, each CPU group on a CPU of its own.
fn walk_back(
    c: &Contraction,
    order: &[usize],
    from: &[(usize, bool)],
    width: usize,
    mut a: usize,
) -> Placement {
    let mut device = vec![Device::Cpu(0); c.len()];
    let mut j = order.len();
    while j > 0 {
        let (i, on_accelerator) = from[j * width + a];
        for &g in &order[i..j] {
            device[g] = if on_accelerator {
                Device::Accelerator(a - 1)
            } else {
                Device::Cpu(g)
            };
        }
        if on_accelerator {
            a -= 1;
        }
        j = i;
    }
    Placement::new(c.group_of.iter().map(|&g| device[g]).collect())
}

//! A plan on a cluster when the cluster DP stops without one: one topological order of the
//! groups (colour classes contracted, [`Contraction`]) cut into consecutive stages.
//!
//! For a threshold `T`, the groups are walked in topological order and packed into the
//! accelerators in the cluster's order (machine after machine, so stages fill machines in
//! order): a group joins the current accelerator while its compute on that accelerator's
//! type stays within `T` and its memory within the accelerator's; otherwise the next
//! accelerator opens. A group that may not run on an accelerator, or that fits none left,
//! goes to the CPU, which holds one consecutive run (a second run fails the probe) of
//! compute at most `T` (more fails it too: without that limit every `T` succeeded, the CPU
//! taking what the accelerators left, and the bisection only moved down). Every
//! stage is `P_j \ P_i` for prefixes `P_i ⊆ P_j` of the order, both ideals, so the plan is
//! contiguous. Communication is left out of the packing; each probe's plan is scored by
//! the independent evaluator ([`crate::score::evaluate_on_cluster`]) and the best valid one is kept.
//! `T` is bisected between the largest group's fastest time and the total compute
//! (50 probes, the first 8 even when the time is spent), geometrically (`√(lo·hi)`, when
//! `lo > 0`): the total counts every group's CPU time, often 10⁴–10⁵ times the optimum,
//! and 8 halvings of that range leave `T` far too loose, where 8 geometric steps shrink the
//! ratio `hi/lo` to its 256th root. (Before both changes the sweep rows of 3–16
//! accelerators on a 384-layer transformer all got the 2-accelerator plan: 188 ms against
//! a bound of 21 ms.)
//!
//! No optimality claim: the caller keeps the DP's lower bound and states the gap.
//! Complexity: O(n + m) per probe (packing and scoring), O((n + m) · 50) in all.

use crate::model::contraction::Contraction;
use crate::model::{ClusterCosts, Device, Placement, Workload};
use crate::score::{evaluate_on_cluster_in, ClassGraph};
use crate::solve::budget::Budget;

/// Probes of the bisection on `T`.
const PROBES: usize = 50;
/// Probes made even when the budget is spent (each is linear: a plan is worth them).
const MIN_PROBES: usize = 8;

/// The best valid plan of the bisection, with its scored max load; `None` if no probe gave
/// a valid plan (or the budget ran out before one did).
pub fn greedy_chain(
    w: &Workload,
    costs: &ClusterCosts,
    budget: &Budget,
) -> Option<(f64, Placement)> {
    let all_types = vec![true; costs.cluster().types().len()];
    ChainPacker::new(w, costs).best(costs.cluster().accelerators().len(), &all_types, budget)
}

/// The contraction and the groups' times per accelerator type, computed once for any
/// number of bisections (the sweep's rows each pack onto a prefix of the accelerators).
pub struct ChainPacker<'a> {
    w: &'a Workload,
    costs: &'a ClusterCosts,
    c: Contraction,
    /// The scorer's class graph, built once for every probe's evaluation.
    classes: ClassGraph,
    /// `time[t][g]`: group g on an accelerator of type t.
    time: Vec<Vec<f64>>,
}

/// `time[t][g]`: the summed time of group `g`'s nodes on an accelerator of type `t`.
pub(super) fn group_times(c: &Contraction, costs: &ClusterCosts) -> Vec<Vec<f64>> {
    (0..costs.cluster().types().len())
        .map(|t| {
            c.groups
                .iter()
                .map(|g| g.nodes.iter().map(|&v| costs.time(t, v)).sum())
                .collect()
        })
        .collect()
}

impl<'a> ChainPacker<'a> {
    /// Contracts `w` and sums its groups' times on every type of `costs`' cluster. O(n · |T|).
    pub fn new(w: &'a Workload, costs: &'a ClusterCosts) -> ChainPacker<'a> {
        let c = Contraction::new(w);
        let time = group_times(&c, costs);
        ChainPacker {
            w,
            costs,
            c,
            classes: ClassGraph::new(w),
            time,
        }
    }

    /// The bisection (module documentation) on the cluster's first `accelerators`
    /// accelerators (the CPU cores all kept), its range taken over the types marked in
    /// `types` (those among the accelerators used): the plan the greedy chain finds on
    /// that prefix of the cluster, scored on the whole cluster.
    pub fn best(
        &self,
        accelerators: usize,
        types: &[bool],
        budget: &Budget,
    ) -> Option<(f64, Placement)> {
        let (floor, total) = self.range(types);
        let mut best: Option<(f64, Placement)> = None;
        let mut consider = |p: Placement| {
            let e = evaluate_on_cluster_in(self.w, self.costs, &self.classes, &p);
            if e.is_valid()
                && e.is_contiguous()
                && best.as_ref().is_none_or(|(b, _)| e.max_load < *b)
            {
                best = Some((e.max_load, p));
            }
        };
        let (mut lo, mut hi) = (floor, total.max(floor));
        if let Some(p) = self.pack(hi, accelerators) {
            consider(p);
        }
        for probe in 0..PROBES {
            if (probe >= MIN_PROBES && budget.is_exhausted()) || hi - lo <= 1e-9 * hi {
                break;
            }
            let mid = midpoint(lo, hi);
            match self.pack(mid, accelerators) {
                Some(p) => {
                    consider(p);
                    hi = mid;
                }
                None => lo = mid,
            }
        }
        best
    }

    /// The bisection's range over the marked types: `floor` = the largest group's fastest
    /// time (a CPU core or a marked type), `total` = every group's larger device latency
    /// plus the largest total over the marked types.
    fn range(&self, types: &[bool]) -> (f64, f64) {
        let marked = || (0..self.time.len()).filter(|&t| types[t]);
        let total: f64 = self
            .c
            .groups
            .iter()
            .map(|g| g.cpu_latency.max(g.fpga_latency))
            .sum::<f64>()
            + marked()
                .map(|t| self.time[t].iter().sum::<f64>())
                .fold(0.0, f64::max);
        let floor = self
            .c
            .groups
            .iter()
            .enumerate()
            .map(|(g, grp)| {
                marked()
                    .map(|t| self.time[t][g])
                    .fold(grp.cpu_latency, f64::min)
            })
            .fold(0.0, f64::max);
        (floor, total)
    }

    /// One probe: the groups in order packed into the first `accelerators` accelerators at
    /// threshold `t_max`, the CPU taking one consecutive run; `None` if the probe fails.
    fn pack(&self, t_max: f64, accelerators: usize) -> Option<Placement> {
        let (c, costs, time) = (&self.c, self.costs, &self.time);
        let mut device = vec![Device::Cpu(0); c.len()];
        let (mut d, mut load, mut memory, mut used) = (0usize, 0.0, 0.0, false);
        let (mut on_cpu, mut cpu_closed, mut cpu_load) = (false, false, 0.0);
        for (g, grp) in c.groups.iter().enumerate() {
            let mut placed = false;
            while grp.supported_on_accelerator && d < accelerators {
                let t = costs.cluster().accelerators()[d].accelerator_type;
                if load + time[t][g] <= t_max && memory + grp.size_bytes <= costs.memory_of(d) {
                    device[g] = Device::Accelerator(d);
                    load += time[t][g];
                    memory += grp.size_bytes;
                    (placed, used) = (true, true);
                    break;
                }
                // The current accelerator is full (or, fresh, too small for g): the next one.
                d += 1;
                (load, memory, used) = (0.0, 0.0, false);
            }
            if placed {
                if on_cpu {
                    (on_cpu, cpu_closed) = (false, true);
                }
                continue;
            }
            if cpu_closed || costs.cluster().cpu_machines().is_empty() {
                return None;
            }
            if !on_cpu && used {
                // The accelerator before the CPU's run is closed: its set stays one run.
                d += 1;
                (load, memory, used) = (0.0, 0.0, false);
            }
            on_cpu = true;
            cpu_load += grp.cpu_latency;
            if cpu_load > t_max {
                return None;
            }
            device[g] = Device::Cpu(0);
        }
        let assignment = (0..self.w.len()).map(|v| device[c.group_of[v]]).collect();
        Some(Placement::new(assignment))
    }
}

/// The next probe between `lo` and `hi` (module documentation): geometric when `lo > 0`,
/// else the arithmetic middle.
fn midpoint(lo: f64, hi: f64) -> f64 {
    if lo > 0.0 && hi.is_finite() {
        (lo.sqrt() * hi.sqrt()).clamp(lo, hi)
    } else {
        0.5 * (lo + hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DeviceSet, Node};

    /// A chain of 1,000 nodes of 1 ms on an accelerator and 1,000 ms on the CPU, on 8
    /// accelerators: the best chain split is 125 ms. With the time spent the bisection makes
    /// its first 8 probes only; the range's top counts every CPU time (about 1e6 ms), so
    /// halving it 8 times left `T` near 3,900 ms (one accelerator, 1,000 ms); 8 geometric
    /// steps from [1, 1e6] end within 1e6^(1/256) ≈ 1.055 of the best threshold.
    #[test]
    fn first_probes_find_a_balanced_chain() {
        let node = |id: i64| Node {
            id,
            name: None,
            fpga_latency: 1.0,
            cpu_latency: 1000.0,
            size_bytes: 0.0,
            supported_on_accelerator: true,
            is_backward: false,
            color_class: None,
            layer_id: None,
            module: None,
            memory: None,
        };
        let nodes = (0..1000).map(node).collect();
        let edges = (0..999).map(|i| (i, i + 1, 0.0, 0.0)).collect();
        let devices = DeviceSet {
            accelerators: 8,
            memory_per_accelerator_bytes: 1.0,
            cpus: 1,
        };
        let w = Workload::new(nodes, edges, devices).unwrap();
        let costs = ClusterCosts::of(&w);
        let spent = Budget::new(Some(0.0), None);
        let (tps, _) = greedy_chain(&w, &costs, &spent).expect("a plan");
        assert!(tps <= 125.0 * 1.06, "{tps}");
    }
}

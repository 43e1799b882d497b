//! A plan on a cluster of many accelerators per type, from one topological order cut into
//! stages that fill the machines in a chosen order of the accelerator types: a plan
//! [`super::dp::solve_between`] keeps where it is better than the cluster DP's (a stopped run).
//!
//! **Packing.** For a threshold `T` and an order of the machines (the machines whose
//! accelerators come first in a permutation `π` of the types first, ties in the cluster's
//! order), the groups ([`Contraction`]) are walked in topological order and each joins the
//! current accelerator while the stage's load stays `≤ T` and its memory within the
//! accelerator's; otherwise the next accelerator (of the same machine, then of the next
//! machine in the order) opens. The load is the stage's load under the communication rule
//! of [`crate::model::cluster`], kept exactly as the stage grows: its compute, plus once
//! per producer `u` outside the stage that one of its nodes reads, `receive(u, p(u), d)`
//! (every producer is placed before, the order being topological), plus `send(v, d)` for
//! each of its nodes with a successor outside its group (0 on machines with a peer link;
//! elsewhere it may overcount, never undercount). A group that may not run on an
//! accelerator goes to the first CPU core as one consecutive run, as in [`super::greedy`].
//! Every stage is `P_j \ P_i` for prefixes of the order, both ideals, so the plan is
//! contiguous; each machine's stages are consecutive.
//!
//! **Search.** For each order, `T` doubles from the largest group's fastest time until a
//! packing succeeds, then is bisected ([`PROBES`] steps); every successful packing is
//! scored by the independent evaluator ([`evaluate_on_cluster_in`]) and the best valid,
//! contiguous plan over all orders is kept with its scored max load. Orders: every
//! permutation of the types for at most [`MAX_PERMUTED_TYPES`] types, else the cluster's
//! order and the types by total time, fastest first. Where [`super::greedy`] packs compute
//! only, in the cluster's order (the 384-layer BERT on 12×8 A100 + 10×8 V100 + 10×8 H100:
//! A100s first, network transfers at every machine's first stage left out), this packing
//! counts what each stage receives and lets the fastest machines come first.
//!
//! No optimality claim: a heuristic upper bound, its plan re-scored by the caller too.
//! Complexity: O((n + m) · (log(T_found/T_0) + PROBES) · |orders|), each probe a linear
//! packing and a linear evaluation.

use crate::model::contraction::Contraction;
use crate::model::{ClusterCosts, Device, Placement, Workload};
use crate::score::{evaluate_on_cluster_in, ClassGraph};
use crate::solve::budget::Budget;

/// Bisection steps on `T` per machine order.
pub const PROBES: usize = 40;
/// Clusters of at most this many types try every permutation of them (4! = 24 orders).
pub const MAX_PERMUTED_TYPES: usize = 4;

/// The best valid contiguous plan over the machine orders (module documentation) with its
/// scored max load; `None` when no packing gave one, or the budget ran out first.
pub fn typed_chain(
    w: &Workload,
    costs: &ClusterCosts,
    budget: &Budget,
) -> Option<(f64, Placement)> {
    if costs.cluster().accelerators().is_empty() {
        return None;
    }
    let packer = TypedPacker::new(w, costs);
    let mut best: Option<(f64, Placement)> = None;
    for order in machine_orders(costs) {
        if budget.is_exhausted() {
            break;
        }
        let devices = accelerators_in(costs, &order);
        if let Some((v, p)) = packer.bisect(&devices, budget) {
            if best.as_ref().is_none_or(|(b, _)| v < *b) {
                best = Some((v, p));
            }
        }
    }
    best
}

/// The machine orders tried (module documentation), each a list of machine indices.
fn machine_orders(costs: &ClusterCosts) -> Vec<Vec<usize>> {
    let cluster = costs.cluster();
    let types = cluster.types().len();
    let machines = cluster.machines().len();
    // The first type (in the permutation) among a machine's accelerators keys it.
    let types_of: Vec<Vec<usize>> = (0..machines)
        .map(|m| {
            let mut t: Vec<usize> = cluster
                .accelerators()
                .iter()
                .filter(|a| a.machine == m)
                .map(|a| a.accelerator_type)
                .collect();
            t.sort_unstable();
            t.dedup();
            t
        })
        .collect();
    let order_for = |perm: &[usize]| -> Vec<usize> {
        let rank = |m: usize| {
            types_of[m]
                .iter()
                .map(|&t| perm.iter().position(|&x| x == t).unwrap_or(types))
                .min()
                .unwrap_or(types)
        };
        let mut order: Vec<usize> = (0..machines).collect();
        order.sort_by_key(|&m| (rank(m), m));
        order
    };
    let mut perms: Vec<Vec<usize>> = Vec::new();
    if types <= MAX_PERMUTED_TYPES {
        let mut ids: Vec<usize> = (0..types).collect();
        permutations(&mut ids, 0, &mut perms);
    } else {
        perms.push((0..types).collect());
        let total = |t: usize| costs.times_of_type(t).iter().sum::<f64>();
        let mut fastest: Vec<usize> = (0..types).collect();
        fastest.sort_by(|&a, &b| total(a).total_cmp(&total(b)));
        perms.push(fastest);
    }
    let mut orders: Vec<Vec<usize>> = perms.iter().map(|p| order_for(p)).collect();
    orders.dedup();
    orders
}

/// Every permutation of `items[k..]` after the fixed `items[..k]`, appended to `out`.
fn permutations(items: &mut [usize], k: usize, out: &mut Vec<Vec<usize>>) {
    if k + 1 >= items.len() {
        out.push(items.to_vec());
        return;
    }
    for i in k..items.len() {
        items.swap(k, i);
        permutations(items, k + 1, out);
        items.swap(k, i);
    }
}

/// The accelerators of the machines in `order`, machine by machine, each machine's in the
/// cluster's order.
fn accelerators_in(costs: &ClusterCosts, order: &[usize]) -> Vec<usize> {
    let slots = costs.cluster().accelerators();
    order
        .iter()
        .flat_map(|&m| (0..slots.len()).filter(move |&i| slots[i].machine == m))
        .collect()
}

/// The contraction, the scorer's class graph and each group's compute per type.
pub(super) struct TypedPacker<'a> {
    pub(super) w: &'a Workload,
    pub(super) costs: &'a ClusterCosts,
    pub(super) c: Contraction,
    classes: ClassGraph,
    /// `time[t][g]`.
    pub(super) time: Vec<Vec<f64>>,
}

/// A stage being packed: its device, load, memory and the stamp marking the producers it
/// already receives.
struct Stage {
    device: usize,
    load: f64,
    memory: f64,
    used: bool,
    stamp: u32,
}

impl Stage {
    /// An empty stage on `device`, stamped after this one.
    fn next(&self, device: usize) -> Stage {
        Stage {
            device,
            load: 0.0,
            memory: 0.0,
            used: false,
            stamp: self.stamp + 1,
        }
    }
}

impl<'a> TypedPacker<'a> {
    pub(super) fn new(w: &'a Workload, costs: &'a ClusterCosts) -> TypedPacker<'a> {
        let c = Contraction::new(w);
        let time = super::greedy::group_times(&c, costs);
        TypedPacker {
            w,
            costs,
            c,
            classes: ClassGraph::new(w),
            time,
        }
    }

    /// The doubling and bisection of the module documentation on the accelerators
    /// `devices` (in packing order): the best scored plan, if any packing gave a valid one.
    fn bisect(&self, devices: &[usize], budget: &Budget) -> Option<(f64, Placement)> {
        self.bisect_with(budget, |t| self.pack(t, devices))
    }

    /// The doubling and bisection of the module documentation over any packing `pack` of a
    /// threshold: every plan it gives is scored by the independent evaluator, and the best
    /// valid contiguous one is returned with its scored max load.
    pub(super) fn bisect_with(
        &self,
        budget: &Budget,
        mut pack: impl FnMut(f64) -> Option<Placement>,
    ) -> Option<(f64, Placement)> {
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
        let floor = (0..self.c.len())
            .map(|g| {
                (0..self.time.len())
                    .map(|t| self.time[t][g])
                    .fold(f64::INFINITY, f64::min)
            })
            .filter(|x| x.is_finite())
            .fold(0.0, f64::max)
            .max(1e-9);
        let (mut lo, mut hi) = (0.0, floor);
        loop {
            if budget.is_exhausted() || !hi.is_finite() {
                return best;
            }
            match pack(hi) {
                Some(p) => {
                    consider(p);
                    break;
                }
                None => (lo, hi) = (hi, 2.0 * hi),
            }
            if hi > 1e300 {
                return best;
            }
        }
        for _ in 0..PROBES {
            if budget.is_exhausted() || hi - lo <= 1e-9 * hi {
                break;
            }
            let mid = 0.5 * (lo + hi);
            match pack(mid) {
                Some(p) => {
                    consider(p);
                    hi = mid;
                }
                None => lo = mid,
            }
        }
        best
    }

    /// One packing at threshold `t_max` on `devices` (module documentation); `None` when it
    /// fails.
    fn pack(&self, t_max: f64, devices: &[usize]) -> Option<Placement> {
        let (w, costs, c) = (self.w, self.costs, &self.c);
        let slots = costs.cluster().accelerators();
        let mut placed: Vec<Option<Device>> = vec![None; w.len()];
        // `seen[u] == stamp`: the current stage already receives `u`.
        let mut seen = vec![0u32; w.len()];
        let mut at = 0usize;
        let mut stage = Stage {
            device: *devices.first()?,
            load: 0.0,
            memory: 0.0,
            used: false,
            stamp: 1,
        };
        let (mut on_cpu, mut cpu_closed, mut cpu_load) = (false, false, 0.0);
        for (g, grp) in c.groups.iter().enumerate() {
            let mut done = false;
            while grp.supported_on_accelerator && at < devices.len() {
                let d = Device::Accelerator(stage.device);
                let t = slots[stage.device].accelerator_type;
                let extra = self.time[t][g] + self.communication(g, d, &placed, &seen, stage.stamp);
                if stage.load + extra <= t_max
                    && stage.memory + grp.size_bytes <= costs.memory_of(stage.device)
                {
                    for &v in &grp.nodes {
                        for &u in w.predecessors(v) {
                            seen[u] = stage.stamp;
                        }
                    }
                    for &v in &grp.nodes {
                        placed[v] = Some(d);
                    }
                    stage.load += extra;
                    stage.memory += grp.size_bytes;
                    stage.used = true;
                    done = true;
                    break;
                }
                at += 1;
                if at < devices.len() {
                    stage = stage.next(devices[at]);
                }
            }
            if done {
                if on_cpu {
                    (on_cpu, cpu_closed) = (false, true);
                }
                continue;
            }
            if cpu_closed || costs.cluster().cpu_machines().is_empty() {
                return None;
            }
            if !on_cpu && stage.used {
                // The accelerator before the CPU's run is closed: its set stays one run.
                at += 1;
                if at < devices.len() {
                    stage = stage.next(devices[at]);
                }
            }
            on_cpu = true;
            cpu_load += grp.cpu_latency;
            if cpu_load > t_max {
                return None;
            }
            for &v in &grp.nodes {
                placed[v] = Some(Device::Cpu(0));
            }
        }
        let assignment = placed
            .into_iter()
            .map(|d| d.unwrap_or(Device::Cpu(0)))
            .collect();
        Some(Placement::new(assignment))
    }

    /// What group `g` adds to the stage on `d` besides its compute: what it receives from
    /// producers placed elsewhere and not yet received by the stage, and what its nodes
    /// with a successor outside the group send.
    fn communication(
        &self,
        g: usize,
        d: Device,
        placed: &[Option<Device>],
        seen: &[u32],
        stamp: u32,
    ) -> f64 {
        let (w, costs, c) = (self.w, self.costs, &self.c);
        let mut extra = 0.0;
        let nodes = &c.groups[g].nodes;
        // A producer read by two nodes of `g` is received once.
        let mut producers: Vec<usize> = Vec::new();
        for &v in nodes {
            producers.extend(
                w.predecessors(v)
                    .iter()
                    .filter(|&&u| c.group_of[u] != g && seen[u] != stamp),
            );
            if w.successors(v).iter().any(|&x| c.group_of[x] != g) {
                extra += costs.send(v, d);
            }
        }
        producers.sort_unstable();
        producers.dedup();
        for u in producers {
            if let Some(s) = placed[u] {
                if s != d {
                    extra += costs.receive(u, s, d);
                }
            }
        }
        extra
    }
}

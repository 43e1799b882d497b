//! A plan on a cluster of many machines from one topological order of the groups, cut
//! machine by machine: for each threshold the *best* such plan, found exactly by a
//! dynamic program over how many machines of each kind are used — a heuristic upper bound
//! beside [`super::typed_chain`], which fixes the order of the types in advance and cuts a
//! machine wherever its last accelerator fills.
//!
//! **Plans searched.** The groups `0..G` of the contraction in topological order; every
//! stage is an interval `[a, b)` of it, on one accelerator, and each machine's stages are
//! consecutive intervals (the machine covers `[s, e)`). Every stage is a difference of two
//! prefixes of the order, both ideals, so the plan is contiguous on the cluster.
//!
//! **Kinds.** Machines equal in everything but their name (accelerators, CPU cores, links)
//! are one kind, interchangeable. Every machine must hold accelerators of one type, and
//! every group must run on an accelerator; otherwise this search gives no plan.
//!
//! **A stage's load.** A stage `[a, b)` on a machine of kind `κ` whose first stage starts
//! at `s ≤ a` is charged its compute, `send(v)` for each of its nodes with a successor
//! outside its group, and once per producer `u` outside the stage what receiving it costs:
//! over the machine's network link for `u` before `s` (on an earlier machine), over its
//! peer (or host) link for `u` in `[s, a)` (another accelerator of the machine). A producer
//! in a group at or after its consumer's (a gradient flowing back) is not placed yet and is
//! left to the evaluator, as in [`super::typed_chain`]. This charge `L_s(a, b)` is the
//! evaluator's load except that a send is charged even when the successor shares the
//! stage (only on machines without a peer link), so the evaluator's score of a plan is at
//! most the threshold it was found at.
//!
//! **One machine, exactly.** `L_s(a, b)` does not decrease as `b` grows (more compute, more
//! producers, more bytes), so from `a` a stage can end anywhere in `[a, far_s(a)]`,
//! `far_s(a)` the first group that does not fit (by load `≤ T` or memory). A stage may be
//! empty (its accelerator unused). Then the positions a machine of kind `κ` with `g`
//! accelerators reaches from `s` after `j` stages are an interval `[s, X_j]`:
//!
//! ```text
//! X_1 = far_s(s),   X_{j+1} = max_{a ∈ [s, X_j]} far_s(a),   reach_κ(s) = X_g
//! ```
//!
//! (by induction: every `a ∈ [s, X_j]` is reached, and from it `[a, far_s(a)]`). This is
//! exact — the greedy packing that fills each accelerator as far as it goes is not, because
//! `L_s(a, b)` may *grow* with `a` (a stage starting inside attention reads a 12.6 MB
//! tensor, one starting after a layer norm a 1.57 MB one), so stopping a stage early can
//! let the next start at a cheaper cut. `far_s(a) = far(a)`, the scan with every producer
//! before `a` priced as the machine's own, whenever that scan met no producer before `s`
//! (then the two scans see the same prices); otherwise `far_s(a)` is scanned again.
//!
//! **Machine order.** Over the vectors `u` of machines used per kind (mixed radix, so
//! `u − e_κ` comes before `u`), the cuts `[0, r(u)]` are all reachable with the machines
//! `u` (a machine may stop anywhere in its reach, or be unused), so
//!
//! ```text
//! r(0) = 0,   r(u) = max over κ with u_κ ≥ 1 of  max_{s ≤ r(u − e_κ)} reach_κ(s)
//! ```
//!
//! and the threshold is met iff some `u` within the cluster's counts has `r(u) = G`: for
//! this order and these charges the program is exact (the prefix maximum of `reach_κ` is
//! kept per kind). The threshold is bisected ([`TypedPacker::bisect_with`]); every plan is
//! re-scored by the independent evaluator, and by the caller.
//!
//! **Plan.** Backwards from `(u, G)`: a cut `e ≤ r(u − e_κ)` is reached without the
//! machine; else the start `s ≤ r(u − e_κ)` of the prefix maximum has `reach_κ(s) ≥ e`, and
//! the `i`-th machine of kind `κ` on the path (the cluster's `i`-th of that kind) covers
//! `[s, e)`. Inside it, backwards from `e` at stage `j`: the stage is empty when
//! `e ≤ X_{j−1}`, else some `a ∈ [s, X_{j−1}]` has `far_s(a) ≥ e` and the stage is `[a, e)`.
//!
//! **Cost.** Per threshold, `far(a)` once per kind and group (a scan of the stage: O(its
//! nodes' degrees)), `reach_κ(s)` once per kind and start (O(its machine's span), plus
//! scans for the few `a` near `s` whose stage reads before `s`), the program
//! O(Π_κ (n_κ + 1) · K). Clusters with more than [`MAX_STATES`] vectors are not tried.

use super::typed_chain::TypedPacker;
use crate::model::contraction::Contraction;
use crate::model::{ClusterCosts, Device, Placement, Workload};
use crate::solve::bounds::cluster::machine::same_kind;
use crate::solve::budget::Budget;

/// Most vectors of machines used per kind the program visits.
pub const MAX_STATES: usize = 200_000;
/// Marks a position not computed yet in the per-threshold tables.
const UNSET: u32 = u32::MAX;

/// The best plan of this search over its bisection on `T` (module documentation), scored
/// by the evaluator; `None` when the cluster does not fit the search or no threshold gave
/// a valid plan within `budget`.
pub fn machine_chain(
    w: &Workload,
    costs: &ClusterCosts,
    budget: &Budget,
) -> Option<(f64, Placement)> {
    let packer = TypedPacker::new(w, costs);
    let kinds = Kinds::of(&packer)?;
    let given: Vec<usize> = (0..packer.c.len()).collect();
    let latest = latest_first(&packer.c);
    let mut best: Option<(f64, Placement)> = None;
    for order in [given.clone(), latest] {
        if order != given && best.is_some() && budget.is_exhausted() {
            break;
        }
        let mut chain = Chain::new(&packer, &kinds, order);
        let found = packer.bisect_with(budget, |t| chain.plan(t, budget));
        if let Some(found) = found {
            if best.as_ref().is_none_or(|b| found.0 < b.0) {
                best = Some(found);
            }
        }
    }
    best
}

/// The topological order of the groups that always takes the latest available group (in
/// the contraction's order): beside the contraction's own, which takes the earliest, it
/// offers the cuts between parallel branches taken the other way round.
fn latest_first(c: &Contraction) -> Vec<usize> {
    let mut missing: Vec<usize> = c.pred.iter().map(Vec::len).collect();
    let mut ready: std::collections::BinaryHeap<usize> =
        (0..c.len()).filter(|&g| missing[g] == 0).collect();
    let mut order = Vec::with_capacity(c.len());
    while let Some(g) = ready.pop() {
        order.push(g);
        for &x in &c.succ[g] {
            missing[x] -= 1;
            if missing[x] == 0 {
                ready.push(x);
            }
        }
    }
    order
}

/// One kind of machine with what its stages are charged (module documentation).
struct Kind {
    /// The machines of the kind, in the cluster's order.
    machines: Vec<usize>,
    /// The accelerators of the kind's first machine, in order.
    slots: Vec<usize>,
    memory: f64,
    /// `base[g]`: group `g`'s compute on the kind plus the sends of its nodes with a
    /// successor outside the group.
    base: Vec<f64>,
    /// Receiving node `u` over the network, and from another accelerator of the machine.
    network: Vec<f64>,
    local: Vec<f64>,
}

/// The machines grouped by kind (module documentation).
struct Kinds {
    kinds: Vec<Kind>,
}

impl Kinds {
    fn of(packer: &TypedPacker) -> Option<Kinds> {
        let (w, costs, c) = (packer.w, packer.costs, &packer.c);
        let all = costs.cluster().machines();
        if all.len() < 2 || c.groups.iter().any(|g| !g.supported_on_accelerator) {
            return None;
        }
        let mut machines: Vec<Vec<usize>> = Vec::new();
        for (m, machine) in all.iter().enumerate() {
            if machine.accelerators.len() != 1 || machine.accelerators[0].1 == 0 {
                return None;
            }
            match machines.iter_mut().find(|k| same_kind(&all[k[0]], machine)) {
                Some(k) => k.push(m),
                None => machines.push(vec![m]),
            }
        }
        let states = machines
            .iter()
            .try_fold(1usize, |n, k| n.checked_mul(k.len() + 1))?;
        if states > MAX_STATES {
            return None;
        }
        let kinds = machines
            .into_iter()
            .map(|machines| {
                let m = machines[0];
                let slots = accelerators_of(costs, m);
                let first = Device::Accelerator(slots[0]);
                let other = Device::Accelerator(*slots.get(1).unwrap_or(&slots[0]));
                let ty = costs.cluster().accelerators()[slots[0]].accelerator_type;
                let base = (0..c.len())
                    .map(|g| {
                        let sends: f64 = c.groups[g]
                            .nodes
                            .iter()
                            .filter(|&&v| w.successors(v).iter().any(|&x| c.group_of[x] != g))
                            .map(|&v| costs.send(v, first))
                            .sum();
                        packer.time[ty][g] + sends
                    })
                    .collect();
                Kind {
                    slots,
                    memory: costs.memory_of(first_slot(first)),
                    base,
                    network: (0..w.len()).map(|u| costs.network(m, u)).collect(),
                    local: (0..w.len())
                        .map(|u| costs.receive(u, first, other))
                        .collect(),
                    machines,
                }
            })
            .collect();
        Some(Kinds { kinds })
    }
}

/// The accelerator index of a device known to be one.
fn first_slot(d: Device) -> usize {
    match d {
        Device::Accelerator(i) => i,
        Device::Cpu(_) => unreachable!("the kinds' devices are accelerators"),
    }
}

/// One state of the program: how far its machines reach.
type Reach = u32;

/// The per-threshold tables of one kind (module documentation): `far(a)` with the lowest
/// producer group its scan met, `reach_κ(s)`, and the prefix maximum of `reach_κ` with
/// where it is attained.
struct Tables {
    far: Vec<(u32, u32)>,
    reach: Vec<u32>,
    prefix_max: Vec<(u32, u32)>,
}

impl Tables {
    fn new(groups: usize) -> Tables {
        Tables {
            far: vec![(UNSET, UNSET); groups + 1],
            reach: vec![UNSET; groups + 1],
            prefix_max: Vec::with_capacity(groups + 1),
        }
    }
}

/// The search of the module documentation with its scratch space.
struct Chain<'p, 'a> {
    packer: &'p TypedPacker<'a>,
    kinds: &'p Kinds,
    /// The groups in the order searched, and each node's position by its group.
    order: Vec<usize>,
    position: Vec<usize>,
    /// `seen[u] == stamp`: the stage being scanned already receives `u`.
    seen: Vec<u32>,
    stamp: u32,
    /// The threshold the tables hold, and the tables per kind.
    t_max: f64,
    tables: Vec<Tables>,
}

impl<'p, 'a> Chain<'p, 'a> {
    fn new(packer: &'p TypedPacker<'a>, kinds: &'p Kinds, order: Vec<usize>) -> Chain<'p, 'a> {
        let mut at = vec![0; order.len()];
        for (p, &g) in order.iter().enumerate() {
            at[g] = p;
        }
        let position = packer.c.group_of.iter().map(|&g| at[g]).collect();
        Chain {
            packer,
            kinds,
            order,
            position,
            seen: vec![0; packer.w.len()],
            stamp: 0,
            t_max: f64::NAN,
            tables: Vec::new(),
        }
    }

    /// A fresh stamp for a new scan.
    fn next_stamp(&mut self) -> u32 {
        if self.stamp == u32::MAX - 1 {
            self.seen.iter_mut().for_each(|x| *x = 0);
            self.stamp = 0;
        }
        self.stamp += 1;
        self.stamp
    }

    /// The stage of kind `k` from group `a` on a machine starting at `s`: the first group
    /// that does not fit at the current threshold (`G` when all do), and the lowest group
    /// of a producer the scan priced.
    fn scan(&mut self, k: usize, s: usize, a: usize) -> (usize, usize) {
        let stamp = self.next_stamp();
        let (w, c) = (self.packer.w, &self.packer.c);
        let kind = &self.kinds.kinds[k];
        let (mut load, mut memory) = (0.0, 0.0);
        let mut lowest = a;
        let mut g = a;
        while g < c.len() {
            let grp = &c.groups[self.order[g]];
            let mut extra = kind.base[self.order[g]];
            for &v in &grp.nodes {
                for &u in w.predecessors(v) {
                    let gu = self.position[u];
                    // A producer in a later group (a gradient flowing back) is not placed
                    // yet, one of this stage already is: neither is received here.
                    if gu >= a || self.seen[u] == stamp {
                        continue;
                    }
                    self.seen[u] = stamp;
                    lowest = lowest.min(gu);
                    extra += if gu < s {
                        kind.network[u]
                    } else {
                        kind.local[u]
                    };
                }
            }
            if load + extra > self.t_max || memory + grp.size_bytes > kind.memory {
                break;
            }
            load += extra;
            memory += grp.size_bytes;
            g += 1;
        }
        (g, lowest)
    }

    /// `far_s(a)` for kind `k` (module documentation).
    fn far(&mut self, k: usize, s: usize, a: usize) -> usize {
        let groups = self.packer.c.len();
        if a >= groups {
            return groups;
        }
        if a == s {
            return self.scan(k, s, s).0;
        }
        let (mut end, mut lowest) = self.tables[k].far[a];
        if end == UNSET {
            let (e, l) = self.scan(k, 0, a);
            (end, lowest) = (e as u32, l as u32);
            self.tables[k].far[a] = (end, lowest);
        }
        if lowest as usize >= s {
            end as usize
        } else {
            self.scan(k, s, a).0
        }
    }

    /// `X_1, …, X_g` of a machine of kind `k` from `s` (module documentation); stops early
    /// at a fixed point or at `G`.
    fn reaches(&mut self, k: usize, s: usize) -> Vec<usize> {
        let groups = self.packer.c.len();
        let g = self.kinds.kinds[k].slots.len();
        let mut x = vec![self.far(k, s, s)];
        let (mut best, mut scanned) = (x[0], s);
        while x.len() < g && x[x.len() - 1] < groups {
            let last = x[x.len() - 1];
            while scanned < last {
                scanned += 1;
                best = best.max(self.far(k, s, scanned));
            }
            if best == last {
                break;
            }
            x.push(best);
        }
        x
    }

    /// `reach_κ(s)`, memoised.
    fn reach(&mut self, k: usize, s: usize) -> usize {
        let memo = self.tables[k].reach[s];
        if memo != UNSET {
            return memo as usize;
        }
        let r = *self.reaches(k, s).last().expect("one stage at least");
        self.tables[k].reach[s] = r as u32;
        r
    }

    /// `max_{s ≤ x} reach_κ(s)` and the `s` attaining it; `None` when the budget ran out.
    fn prefix_max(&mut self, k: usize, x: usize, budget: &Budget) -> Option<(usize, usize)> {
        while self.tables[k].prefix_max.len() <= x {
            let s = self.tables[k].prefix_max.len();
            if s % 256 == 255 && budget.is_exhausted() {
                return None;
            }
            let r = self.reach(k, s) as u32;
            let entry = match self.tables[k].prefix_max.last() {
                Some(&(best, at)) if best >= r => (best, at),
                _ => (r, s as u32),
            };
            self.tables[k].prefix_max.push(entry);
        }
        let (best, at) = self.tables[k].prefix_max[x];
        Some((best as usize, at as usize))
    }

    /// The program of the module documentation at `t_max`, and the plan of the first state
    /// that reaches every group.
    fn plan(&mut self, t_max: f64, budget: &Budget) -> Option<Placement> {
        let groups = self.packer.c.len();
        self.t_max = t_max;
        self.tables = (0..self.kinds.kinds.len())
            .map(|_| Tables::new(groups))
            .collect();
        let counts: Vec<usize> = self.kinds.kinds.iter().map(|k| k.machines.len()).collect();
        let radix = radix_of(&counts);
        let total: usize = counts.iter().map(|n| n + 1).product();
        let mut r: Vec<Reach> = Vec::with_capacity(total);
        r.push(0);
        for u in 1..total {
            if u % 256 == 0 && budget.is_exhausted() {
                return None;
            }
            let mut best = 0usize;
            for k in 0..counts.len() {
                if (u / radix[k]).is_multiple_of(counts[k] + 1) {
                    continue;
                }
                let from = r[u - radix[k]] as usize;
                best = best.max(self.prefix_max(k, from, budget)?.0);
            }
            r.push(best as Reach);
            if best >= groups {
                return self.placement(&r, &radix, &counts, u, budget);
            }
        }
        None
    }

    /// The plan reaching every group with the machines `end` (module documentation,
    /// "Plan").
    fn placement(
        &mut self,
        r: &[Reach],
        radix: &[usize],
        counts: &[usize],
        end: usize,
        budget: &Budget,
    ) -> Option<Placement> {
        // The machines backwards: (kind, start, stop).
        let mut path: Vec<(usize, usize, usize)> = Vec::new();
        let (mut u, mut e) = (end, self.packer.c.len());
        while e > 0 {
            let mut next = None;
            for k in 0..counts.len() {
                if (u / radix[k]).is_multiple_of(counts[k] + 1) {
                    continue;
                }
                let v = u - radix[k];
                let from = r[v] as usize;
                if e <= from {
                    next = Some((v, None));
                    break;
                }
                let (best, s) = self.prefix_max(k, from, budget)?;
                if best >= e {
                    next = Some((v, Some((k, s))));
                    break;
                }
            }
            let (v, machine) = next?;
            if let Some((k, s)) = machine {
                path.push((k, s, e));
                e = s;
            }
            u = v;
        }
        path.reverse();
        let mut group_device: Vec<Option<Device>> = vec![None; self.packer.c.len()];
        let mut used = vec![0usize; counts.len()];
        for &(k, s, stop) in &path {
            let machine = *self.kinds.kinds[k].machines.get(used[k])?;
            used[k] += 1;
            let slots = accelerators_of(self.packer.costs, machine);
            for (j, (a, b)) in self.stages(k, s, stop)?.into_iter().enumerate() {
                group_device[a..b].fill(Some(Device::Accelerator(slots[j])));
            }
        }
        let (w, c) = (self.packer.w, &self.packer.c);
        let mut assignment = vec![Device::Cpu(0); w.len()];
        for (p, &g) in self.order.iter().enumerate() {
            let d = group_device[p]?;
            for &v in &c.groups[g].nodes {
                assignment[v] = d;
            }
        }
        Some(Placement::new(assignment))
    }

    /// The stages `[a, b)` of a machine of kind `k` covering `[s, stop)`, one per
    /// accelerator in order (module documentation, "Plan"); `None` when `stop` is beyond
    /// its reach.
    fn stages(&mut self, k: usize, s: usize, stop: usize) -> Option<Vec<(usize, usize)>> {
        let g = self.kinds.kinds[k].slots.len();
        let x = self.reaches(k, s);
        let mut stages = vec![(s, s); g];
        let mut e = stop;
        for j in (0..g).rev() {
            if e == s {
                break;
            }
            if j == 0 {
                if x[0] < e {
                    return None;
                }
                stages[0] = (s, e);
                e = s;
                break;
            }
            let before = *x.get(j - 1).unwrap_or(&x[x.len() - 1]);
            if e <= before {
                continue;
            }
            let a = (s..=before).find(|&a| self.far(k, s, a) >= e)?;
            stages[j] = (a, e);
            e = a;
        }
        (e == s).then_some(stages)
    }
}

/// The mixed radix of the vectors of machines used per kind.
fn radix_of(counts: &[usize]) -> Vec<usize> {
    counts
        .iter()
        .scan(1usize, |acc, &n| {
            let r = *acc;
            *acc *= n + 1;
            Some(r)
        })
        .collect()
}

/// The accelerators of machine `m`, in the cluster's order.
fn accelerators_of(costs: &ClusterCosts, m: usize) -> Vec<usize> {
    let slots = costs.cluster().accelerators();
    (0..slots.len())
        .filter(|&i| slots[i].machine == m)
        .collect()
}

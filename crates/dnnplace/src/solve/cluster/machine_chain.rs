//! A plan on a cluster of many machines from one topological order of the groups, cut
//! machine by machine, the machines' order chosen by a dynamic program over how many
//! machines of each kind are used: a heuristic upper bound beside [`super::typed_chain`],
//! which fixes the order of the types in advance and cuts a machine wherever its last
//! accelerator fills.
//!
//! **Kinds.** Machines equal in everything but their name (accelerators, CPU cores, links)
//! are one kind, interchangeable. Every machine must hold accelerators of one type, and
//! every group must run on an accelerator; otherwise this packing gives no plan.
//!
//! **One machine from a start.** For a threshold `T`, a kind `κ` and a group index `s`
//! (the groups `0..G` of the contraction, in topological order), `reach_κ(s)` is the index
//! where a machine of kind `κ` stops when its accelerators take the groups `s, s + 1, …` in
//! order, each group joining the current accelerator while the stage's load stays `≤ T`
//! and its memory within the accelerator's, else opening the next accelerator. The load is
//! the stage's load under the rule of [`crate::model::cluster`]: its compute, the sends of
//! its nodes with a successor outside their group, and once per producer outside the stage
//! what receiving it costs: over the machine's network link for a producer before `s` (on
//! an earlier machine), over its peer (or host) link for one on another accelerator of the
//! machine (a producer in a later group, a gradient flowing back, is not placed yet and is
//! left to the evaluator, as in [`super::typed_chain`]). Such a machine can stop at any `e ∈ [s, reach_κ(s)]`: cutting its last stage
//! short only lowers that stage's load (its compute and the producers it reads both
//! shrink), and the stages before it do not change.
//!
//! **Machine order.** Over the vectors `u` of machines used per kind (mixed radix, so
//! `u − e_κ` comes before `u`), with `r(u)` the farthest group index the machines `u`
//! reach and `p(u)` the start of the last machine on that path:
//!
//! ```text
//! r(0) = 0,  p(0) = none
//! r(u) = max over κ with u_κ ≥ 1 of max( r(u − e_κ),  max_{s ∈ S(u − e_κ)} reach_κ(s) )
//! S(v) = {0} if v = 0, else (p(v), r(v)] ∩ [r(v) − W, r(v)]
//! ```
//!
//! (the machine unused, or started at `s`, where the machine before stops). A threshold
//! is met when some `u` within the cluster's counts has `r(u) = G`. The window `W`
//! ([`WINDOW`]) keeps the starts tried near the farthest reach; keeping only the farthest
//! reach per `u` is a heuristic too (a state reaching less far but with a cheaper cut
//! could do better later), so no optimality is claimed: every plan is re-scored by the
//! independent evaluator ([`TypedPacker::bisect_with`]) and by the caller.
//!
//! **Plan.** The path to the first state with `r(u) = G` lists the machines' kinds and
//! starts; the `i`-th machine of kind `κ` on it is the cluster's `i`-th machine of that
//! kind, and each machine takes its groups up to the next machine's start by the packing
//! above. Every stage is a difference of two prefixes of the order, both ideals, and each
//! machine's stages are consecutive, so the plan is contiguous on the cluster.
//!
//! **Cost.** Per threshold, `reach_κ(s)` is memoised: at most `K·G` packings of one
//! machine, each O(Σ over its groups of their nodes' degrees); the program
//! O(Π_κ (n_κ + 1) · K · W). Clusters with more than [`MAX_STATES`] vectors are not tried.

use super::typed_chain::TypedPacker;
use crate::model::{ClusterCosts, Device, Placement, Workload};
use crate::solve::bounds::cluster::machine::same_kind;
use crate::solve::budget::Budget;

/// Starts tried per machine below the farthest reach of the machines before it.
pub const WINDOW: usize = 96;
/// Most vectors of machines used per kind the program visits.
pub const MAX_STATES: usize = 200_000;

/// The best plan of this packing over its bisection on `T` (module documentation), scored
/// by the evaluator; `None` when the cluster does not fit the packing or no threshold gave
/// a valid plan within `budget`.
pub fn machine_chain(
    w: &Workload,
    costs: &ClusterCosts,
    budget: &Budget,
) -> Option<(f64, Placement)> {
    let packer = TypedPacker::new(w, costs);
    let kinds = Kinds::of(&packer)?;
    let mut walker = Walker::new(&packer, &kinds);
    packer.bisect_with(budget, |t| walker.plan(t, budget))
}

/// The machines grouped by kind (module documentation).
struct Kinds {
    /// The machines of each kind, in the cluster's order.
    machines: Vec<Vec<usize>>,
}

impl Kinds {
    fn of(packer: &TypedPacker) -> Option<Kinds> {
        let cluster = packer.costs.cluster();
        let all = cluster.machines();
        if all.len() < 2 || packer.c.groups.iter().any(|g| !g.supported_on_accelerator) {
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
        (states <= MAX_STATES).then_some(Kinds { machines })
    }
}

/// One state of the program: how far its machines reach, where its last machine starts,
/// and the transition that made it (`(state, kind, start)`), for the plan.
#[derive(Clone, Copy)]
struct State {
    reach: usize,
    last_start: Option<usize>,
    from: Option<(usize, usize, usize)>,
}

/// The packing of one machine (module documentation, "One machine from a start") with its
/// scratch space, and the program over the machines used per kind.
struct Walker<'p, 'a> {
    packer: &'p TypedPacker<'a>,
    kinds: &'p Kinds,
    /// The accelerators of each kind's first machine, in order.
    slots: Vec<Vec<usize>>,
    /// `seen[u] == stamp`: the current stage already receives `u`.
    seen: Vec<u32>,
    stamp: u32,
    /// The accelerator (index into the machine's) of each group from the start on.
    local: Vec<u32>,
}

impl<'p, 'a> Walker<'p, 'a> {
    fn new(packer: &'p TypedPacker<'a>, kinds: &'p Kinds) -> Walker<'p, 'a> {
        let slots = kinds
            .machines
            .iter()
            .map(|k| accelerators_of(packer.costs, k[0]))
            .collect();
        Walker {
            packer,
            kinds,
            slots,
            seen: vec![0; packer.w.len()],
            stamp: 0,
            local: vec![0; packer.c.len()],
        }
    }

    /// A fresh stamp for a new stage.
    fn next_stamp(&mut self) -> u32 {
        if self.stamp == u32::MAX {
            self.seen.iter_mut().for_each(|x| *x = 0);
            self.stamp = 0;
        }
        self.stamp += 1;
        self.stamp
    }

    /// Packs the groups `s..stop` on the accelerators `slots` of one machine (module
    /// documentation) at threshold `t_max`; returns where it stops. With `out`, each
    /// packed group's accelerator is written there.
    fn walk(
        &mut self,
        t_max: f64,
        slots: &[usize],
        s: usize,
        stop: usize,
        mut out: Option<&mut [Option<Device>]>,
    ) -> usize {
        let (w, costs, c) = (self.packer.w, self.packer.costs, &self.packer.c);
        let machine = costs.cluster().accelerators()[slots[0]].machine;
        let ty = costs.cluster().accelerators()[slots[0]].accelerator_type;
        let mut g = s;
        for (j, &slot) in slots.iter().enumerate() {
            let d = Device::Accelerator(slot);
            let stamp = self.next_stamp();
            let (mut load, mut memory) = (0.0, 0.0);
            while g < stop {
                let grp = &c.groups[g];
                let mut extra = self.packer.time[ty][g];
                for &v in &grp.nodes {
                    if w.successors(v).iter().any(|&x| c.group_of[x] != g) {
                        extra += costs.send(v, d);
                    }
                    for &u in w.predecessors(v) {
                        let gu = c.group_of[u];
                        // A producer in a later group (a gradient flowing back) is not
                        // placed yet: the evaluator prices it.
                        if gu >= g || self.seen[u] == stamp {
                            continue;
                        }
                        self.seen[u] = stamp;
                        extra += if gu < s {
                            costs.network(machine, u)
                        } else if self.local[gu - s] as usize != j {
                            let from = Device::Accelerator(slots[self.local[gu - s] as usize]);
                            costs.receive(u, from, d)
                        } else {
                            0.0
                        };
                    }
                }
                if load + extra > t_max || memory + grp.size_bytes > costs.memory_of(slot) {
                    // The producers marked for `g` carry this stage's stamp only: the next
                    // stage reads them again.
                    break;
                }
                load += extra;
                memory += grp.size_bytes;
                self.local[g - s] = j as u32;
                if let Some(out) = out.as_deref_mut() {
                    out[g] = Some(d);
                }
                g += 1;
            }
            if g >= stop {
                break;
            }
        }
        g
    }

    /// The program of the module documentation at `t_max`, and the plan of the first state
    /// that reaches every group.
    fn plan(&mut self, t_max: f64, budget: &Budget) -> Option<Placement> {
        let groups = self.packer.c.len();
        let counts: Vec<usize> = self.kinds.machines.iter().map(Vec::len).collect();
        let radix: Vec<usize> = counts
            .iter()
            .scan(1usize, |acc, &n| {
                let r = *acc;
                *acc *= n + 1;
                Some(r)
            })
            .collect();
        let total: usize = counts.iter().map(|n| n + 1).product();
        let mut reach: Vec<Vec<Option<usize>>> = vec![vec![None; groups + 1]; counts.len()];
        let mut states: Vec<State> = Vec::with_capacity(total);
        states.push(State {
            reach: 0,
            last_start: None,
            from: None,
        });
        for u in 1..total {
            if u % 256 == 0 && budget.is_exhausted() {
                return None;
            }
            let mut best: Option<State> = None;
            for k in 0..counts.len() {
                if (u / radix[k]).is_multiple_of(counts[k] + 1) {
                    continue;
                }
                let v = u - radix[k];
                let prev = states[v];
                if best.is_none_or(|b| prev.reach > b.reach) {
                    best = Some(prev);
                }
                let starts = match prev.last_start {
                    None => 0..=0,
                    Some(p) => (p + 1).max(prev.reach.saturating_sub(WINDOW))..=prev.reach,
                };
                for s in starts {
                    if s >= groups {
                        continue;
                    }
                    let r = match reach[k][s] {
                        Some(r) => r,
                        None => {
                            let slots = self.slots[k].clone();
                            let r = self.walk(t_max, &slots, s, groups, None);
                            reach[k][s] = Some(r);
                            r
                        }
                    };
                    if r > s && best.is_none_or(|b| r > b.reach) {
                        best = Some(State {
                            reach: r,
                            last_start: Some(s),
                            from: Some((v, k, s)),
                        });
                    }
                }
            }
            let state = best.expect("a state with a machine used has a predecessor");
            states.push(state);
            if state.reach >= groups {
                return self.placement(t_max, &states, u);
            }
        }
        None
    }

    /// The plan of the path to state `end` (module documentation, "Plan").
    fn placement(&mut self, t_max: f64, states: &[State], end: usize) -> Option<Placement> {
        let mut path: Vec<(usize, usize)> = Vec::new();
        let mut at = states[end].from;
        while let Some((v, k, s)) = at {
            path.push((k, s));
            at = states[v].from;
        }
        path.reverse();
        let (w, c) = (self.packer.w, &self.packer.c);
        let mut group_device: Vec<Option<Device>> = vec![None; c.len()];
        let mut used = vec![0usize; self.kinds.machines.len()];
        for (i, &(k, s)) in path.iter().enumerate() {
            let stop = path.get(i + 1).map_or(c.len(), |&(_, next)| next);
            let machine = *self.kinds.machines[k].get(used[k])?;
            used[k] += 1;
            let slots = accelerators_of(self.packer.costs, machine);
            if self.walk(t_max, &slots, s, stop, Some(&mut group_device)) < stop {
                return None;
            }
        }
        let mut assignment = vec![Device::Cpu(0); w.len()];
        for (g, grp) in c.groups.iter().enumerate() {
            let d = group_device[g]?;
            for &v in &grp.nodes {
                assignment[v] = d;
            }
        }
        Some(Placement::new(assignment))
    }
}

/// The accelerators of machine `m`, in the cluster's order.
fn accelerators_of(costs: &ClusterCosts, m: usize) -> Vec<usize> {
    let slots = costs.cluster().accelerators();
    (0..slots.len())
        .filter(|&i| slots[i].machine == m)
        .collect()
}

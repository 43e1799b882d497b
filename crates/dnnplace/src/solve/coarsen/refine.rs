//! Uncoarsening: a contiguous plan as a stage per cluster, projected one level down and
//! improved there by moving boundary clusters between adjacent stages.
//!
//! # Stage plans
//!
//! A [`StagePlan`] gives every cluster a stage `s(x) ∈ 0..S` and every stage a device
//! kind, with `s(u) ≤ s(v)` for every arc `u → v`. Then `I_t = {x : s(x) ≤ t}` is an
//! ideal for every t (closed under predecessors), so stage t's set `I_t \ I_{t−1}` is
//! contiguous and the stages are a pipeline order: the plan is contiguous in the sense of
//! the scorer. Projecting to the level below (`s(y) = s(parent(y))`) keeps the property,
//! because arcs below map to arcs above or inside one cluster.
//!
//! # Moves
//!
//! Cluster g may move from stage a to a + 1 when every successor is in a stage > a, and
//! to a − 1 when every predecessor is in a stage < a; either way `s` stays monotone. A
//! move into an accelerator stage needs g supported and the stage's memory to stay within
//! M. Loads are kept incrementally: per hyperedge T the count of its members in each stage,
//! so a stage X pays `c(T)` exactly when `0 < |T ∩ X| < |T|`, and moving g changes only
//! the hyperedges holding g (O(Σ_{T ∋ g} |stages of T|) per move).
//!
//! # The search
//!
//! **Pair re-splits.** For adjacent stages s, s + 1 with union U, every prefix P of U in a
//! topological order gives a valid split (`I_{s−1} ∪ P` is an ideal between `I_{s−1}` and
//! `I_{s+1}`); one pass of moves along the order prices every prefix, and the best one
//! that fits memory replaces the split when it lowers the larger of the two loads. This
//! crosses communication barriers that single moves cannot (a move that first raises the
//! load before a better split is reached). Sweeps over all pairs repeat while one improves.
//!
//! **Shedding.** Repeatedly take a bottleneck stage b (load L = the max) and try to bring it below L by
//! *shedding* towards one side: move the boundary cluster whose move leaves
//! `max(load(b), load(t))` least, for t = b ± 1, as long as the receiver stays below L; when
//! no move fits because t is full, first shed t further along the same direction, to just
//! below what the move needs (a push chain, depth at most S). Every completed step lowers
//! the bottleneck or the number of stages at the maximum, and no stage ever rises to L,
//! so the max load never increases; the search stops when neither side can shed, after
//! [`MAX_ROUNDS`] rounds, or when the budget runs out. Re-splits and shedding alternate
//! in rounds while either moves something and the max load fell in one of the last
//! [`STALL_ROUNDS`] + 1 rounds (pair re-splits away from the bottleneck can otherwise
//! trade ever smaller amounts of load for minutes: 56,231 moves in 28 s for 0.23 % on a
//! 21k-node transformer).
//!
//! Complexity: O(|U| · δ) per pair re-split and O(|b| · δ) per attempted move, for the
//! |b| clusters of the shedding stage and their degree δ in arcs and hyperedges.

use crate::model::Device;
use crate::solve::budget::Budget;

use super::hierarchy::Level;

/// Rounds (bottleneck reductions) per level at most.
pub const MAX_ROUNDS: usize = 10_000;

/// Rounds in a row that may leave the max load where it was (moves that only make room)
/// before the search stops.
pub const STALL_ROUNDS: usize = 2;

/// Sweeps of pair re-splits per round at most.
pub const MAX_SWEEPS: usize = 8;

/// Device kind of a stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Accelerator,
    Cpu,
}

/// A contiguous plan of one level (module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct StagePlan {
    /// The stage of each cluster.
    pub stage_of: Vec<u32>,
    /// The device kind of each stage, in pipeline order.
    pub kinds: Vec<Kind>,
}

impl StagePlan {
    /// The stage plan of a device per cluster: the used devices in a topological order of
    /// the device graph (smallest device first among the ready ones), followed by the
    /// unused accelerators as empty stages (of `accelerators` in all). `None` when the
    /// devices' graph has a cycle (the plan is not contiguous).
    pub fn from_devices(
        level: &Level,
        device: &[Device],
        accelerators: usize,
    ) -> Option<StagePlan> {
        let mut used: Vec<Device> = device.to_vec();
        used.sort();
        used.dedup();
        let index = |d: Device| used.binary_search(&d).expect("a used device");
        let m = used.len();
        let mut succ: Vec<Vec<usize>> = vec![Vec::new(); m];
        let mut indegree = vec![0usize; m];
        for (u, list) in level.succ.iter().enumerate() {
            for &v in list {
                let (a, b) = (index(device[u]), index(device[v as usize]));
                if a != b {
                    succ[a].push(b);
                }
            }
        }
        for (a, list) in succ.iter_mut().enumerate() {
            list.sort_unstable();
            list.dedup();
            for &b in list.iter() {
                debug_assert_ne!(a, b);
                indegree[b] += 1;
            }
        }
        let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<usize>> = (0..m)
            .filter(|&d| indegree[d] == 0)
            .map(std::cmp::Reverse)
            .collect();
        let mut stage_of_device = vec![u32::MAX; m];
        let mut kinds = Vec::with_capacity(m);
        while let Some(std::cmp::Reverse(d)) = ready.pop() {
            stage_of_device[d] = kinds.len() as u32;
            kinds.push(if used[d].is_accelerator() {
                Kind::Accelerator
            } else {
                Kind::Cpu
            });
            for &e in &succ[d] {
                indegree[e] -= 1;
                if indegree[e] == 0 {
                    ready.push(std::cmp::Reverse(e));
                }
            }
        }
        if kinds.len() != m {
            return None;
        }
        let used_accelerators = used.iter().filter(|d| d.is_accelerator()).count();
        kinds.extend(std::iter::repeat_n(
            Kind::Accelerator,
            accelerators.saturating_sub(used_accelerators),
        ));
        Some(StagePlan {
            stage_of: device.iter().map(|&d| stage_of_device[index(d)]).collect(),
            kinds,
        })
    }

    /// The same plan on the level below, whose clusters have the parents `parent_of_below`.
    pub fn project(&self, parent_of_below: &[u32]) -> StagePlan {
        StagePlan {
            stage_of: parent_of_below
                .iter()
                .map(|&p| self.stage_of[p as usize])
                .collect(),
            kinds: self.kinds.clone(),
        }
    }

    /// The device of each stage: accelerators and CPUs numbered in stage order.
    pub fn stage_devices(&self) -> Vec<Device> {
        let (mut acc, mut cpu) = (0, 0);
        self.kinds
            .iter()
            .map(|k| match k {
                Kind::Accelerator => {
                    acc += 1;
                    Device::Accelerator(acc - 1)
                }
                Kind::Cpu => {
                    cpu += 1;
                    Device::Cpu(cpu - 1)
                }
            })
            .collect()
    }

    /// Whether `s(u) ≤ s(v)` for every arc of `level`.
    pub fn is_monotone(&self, level: &Level) -> bool {
        level.succ.iter().enumerate().all(|(u, list)| {
            list.iter()
                .all(|&v| self.stage_of[u] <= self.stage_of[v as usize])
        })
    }
}

/// The refinement of one level (module documentation).
pub struct Refiner<'a> {
    level: &'a Level,
    memory: f64,
    plan: StagePlan,
    /// Hyperedges holding each cluster.
    incident: Vec<Vec<u32>>,
    /// Per hyperedge: (stage, members in it), stages with at least one member.
    counts: Vec<Vec<(u32, u32)>>,
    /// Clusters of each stage, and each cluster's slot in its stage's list.
    members: Vec<Vec<u32>>,
    slot: Vec<u32>,
    fpga: Vec<f64>,
    cpu: Vec<f64>,
    size: Vec<f64>,
    unsupported: Vec<u32>,
    comm: Vec<f64>,
    /// Pair (s, s + 1) was re-split to no avail and neither stage changed since.
    pair_clean: Vec<bool>,
    /// Moves made so far.
    pub moves: usize,
}

/// A move's effect: the new loads of the stage it leaves and the one it enters.
#[derive(Clone, Copy, Debug)]
struct Effect {
    from_load: f64,
    to_load: f64,
}

impl<'a> Refiner<'a> {
    /// Loads of `plan` on `level`, with accelerators of `memory` bytes.
    pub fn new(level: &'a Level, plan: StagePlan, memory: f64) -> Refiner<'a> {
        let stages = plan.kinds.len();
        let n = level.len();
        let mut incident = vec![Vec::new(); n];
        let mut counts = Vec::with_capacity(level.hyperedges.len());
        for (e, (t, _)) in level.hyperedges.iter().enumerate() {
            let mut c: Vec<(u32, u32)> = Vec::new();
            for &x in t {
                incident[x as usize].push(e as u32);
                let s = plan.stage_of[x as usize];
                match c.iter_mut().find(|(st, _)| *st == s) {
                    Some(entry) => entry.1 += 1,
                    None => c.push((s, 1)),
                }
            }
            counts.push(c);
        }
        let mut members = vec![Vec::new(); stages];
        let mut slot = vec![0u32; n];
        let (mut fpga, mut cpu, mut size) =
            (vec![0.0; stages], vec![0.0; stages], vec![0.0; stages]);
        let mut unsupported = vec![0u32; stages];
        for (x, slot_x) in slot.iter_mut().enumerate() {
            let s = plan.stage_of[x] as usize;
            *slot_x = members[s].len() as u32;
            members[s].push(x as u32);
            fpga[s] += level.fpga[x];
            cpu[s] += level.cpu[x];
            size[s] += level.size[x];
            unsupported[s] += u32::from(!level.supported[x]);
        }
        let mut comm = vec![0.0; stages];
        for (e, c) in counts.iter().enumerate() {
            let (t, cost) = &level.hyperedges[e];
            for &(s, k) in c {
                if (k as usize) < t.len() {
                    comm[s as usize] += cost;
                }
            }
        }
        let pair_clean = vec![false; stages.saturating_sub(1)];
        Refiner {
            level,
            memory,
            plan,
            incident,
            counts,
            members,
            slot,
            fpga,
            cpu,
            size,
            unsupported,
            comm,
            pair_clean,
            moves: 0,
        }
    }

    /// The load of stage s.
    pub fn load(&self, s: usize) -> f64 {
        match self.plan.kinds[s] {
            Kind::Accelerator => self.fpga[s] + self.comm[s],
            Kind::Cpu => self.cpu[s],
        }
    }

    /// The largest load.
    pub fn max_load(&self) -> f64 {
        (0..self.plan.kinds.len())
            .map(|s| self.load(s))
            .fold(0.0, f64::max)
    }

    /// The plan as it stands.
    pub fn into_plan(self) -> StagePlan {
        self.plan
    }

    fn count(&self, e: usize, s: u32) -> u32 {
        self.counts[e]
            .iter()
            .find(|(st, _)| *st == s)
            .map_or(0, |&(_, k)| k)
    }

    /// Whether g may move from its stage to `to` (order, support, memory).
    fn movable(&self, g: usize, to: usize) -> bool {
        let from = self.plan.stage_of[g] as usize;
        let order_ok = if to == from + 1 {
            self.level.succ[g]
                .iter()
                .all(|&h| self.plan.stage_of[h as usize] as usize > from)
        } else {
            to + 1 == from
                && self.level.pred[g]
                    .iter()
                    .all(|&p| (self.plan.stage_of[p as usize] as usize) < from)
        };
        order_ok
            && match self.plan.kinds[to] {
                Kind::Accelerator => {
                    self.level.supported[g] && self.size[to] + self.level.size[g] <= self.memory
                }
                Kind::Cpu => true,
            }
    }

    fn effect(&self, g: usize, to: usize) -> Effect {
        let from = self.plan.stage_of[g] as usize;
        let (mut comm_from, mut comm_to) = (self.comm[from], self.comm[to]);
        for &e in &self.incident[g] {
            let e = e as usize;
            let (t, cost) = &self.level.hyperedges[e];
            let len = t.len() as u32;
            let cut = |k: u32| k > 0 && k < len;
            let (kf, kt) = (self.count(e, from as u32), self.count(e, to as u32));
            comm_from += cost * (f64::from(u8::from(cut(kf - 1))) - f64::from(u8::from(cut(kf))));
            comm_to += cost * (f64::from(u8::from(cut(kt + 1))) - f64::from(u8::from(cut(kt))));
        }
        let load = |s: usize, comm: f64, sign: f64| match self.plan.kinds[s] {
            Kind::Accelerator => self.fpga[s] + sign * self.level.fpga[g] + comm,
            Kind::Cpu => self.cpu[s] + sign * self.level.cpu[g],
        };
        Effect {
            from_load: load(from, comm_from, -1.0),
            to_load: load(to, comm_to, 1.0),
        }
    }

    fn apply(&mut self, g: usize, to: usize) {
        let from = self.plan.stage_of[g] as usize;
        for &e in &self.incident[g] {
            let e = e as usize;
            let (t, cost) = &self.level.hyperedges[e];
            let len = t.len() as u32;
            let cut = |k: u32| k > 0 && k < len;
            let (kf, kt) = (self.count(e, from as u32), self.count(e, to as u32));
            self.comm[from] +=
                cost * (f64::from(u8::from(cut(kf - 1))) - f64::from(u8::from(cut(kf))));
            self.comm[to] +=
                cost * (f64::from(u8::from(cut(kt + 1))) - f64::from(u8::from(cut(kt))));
            let c = &mut self.counts[e];
            let i = c
                .iter()
                .position(|(s, _)| *s == from as u32)
                .expect("g's stage holds a member");
            c[i].1 -= 1;
            if c[i].1 == 0 {
                c.swap_remove(i);
            }
            match c.iter_mut().find(|(s, _)| *s == to as u32) {
                Some(entry) => entry.1 += 1,
                None => c.push((to as u32, 1)),
            }
        }
        let x = &self.level;
        self.fpga[from] -= x.fpga[g];
        self.cpu[from] -= x.cpu[g];
        self.size[from] -= x.size[g];
        self.unsupported[from] -= u32::from(!x.supported[g]);
        self.fpga[to] += x.fpga[g];
        self.cpu[to] += x.cpu[g];
        self.size[to] += x.size[g];
        self.unsupported[to] += u32::from(!x.supported[g]);
        let at = self.slot[g] as usize;
        self.members[from].swap_remove(at);
        if let Some(&moved) = self.members[from].get(at) {
            self.slot[moved as usize] = at as u32;
        }
        self.slot[g] = self.members[to].len() as u32;
        self.members[to].push(g as u32);
        self.plan.stage_of[g] = to as u32;
        self.moves += 1;
    }

    /// Refines until neither step improves, [`MAX_ROUNDS`] rounds, more than
    /// [`STALL_ROUNDS`] rounds in a row without a lower max load, or the budget ends: sweeps
    /// of [`rebalance_pair`](Self::rebalance_pair) over adjacent stages, then bottleneck
    /// shedding.
    pub fn run(&mut self, budget: &Budget) {
        let mut stalled = 0;
        for _ in 0..MAX_ROUNDS {
            let (moved, before) = (self.moves, self.max_load());
            self.sweep_pairs(budget);
            self.shed_bottlenecks(budget);
            if self.max_load() < before * (1.0 - 1e-9) {
                stalled = 0;
            } else {
                stalled += 1;
            }
            if self.moves == moved || stalled > STALL_ROUNDS || budget.is_exhausted() {
                return;
            }
        }
    }

    /// Sweeps over the adjacent stage pairs while some pair re-splits better (at most
    /// [`MAX_SWEEPS`] sweeps).
    fn sweep_pairs(&mut self, budget: &Budget) {
        for _ in 0..MAX_SWEEPS {
            let mut improved = false;
            for s in 0..self.plan.kinds.len().saturating_sub(1) {
                if budget.is_exhausted() {
                    return;
                }
                if self.pair_clean[s] {
                    continue;
                }
                if self.rebalance_pair(s) {
                    improved = true;
                    self.touch(s);
                    self.touch(s + 1);
                } else {
                    self.pair_clean[s] = true;
                }
            }
            if !improved {
                return;
            }
        }
    }

    /// Re-splits stages s and s + 1 at the best prefix of their union in index order (a
    /// topological order, since clusters are numbered topologically): every prefix P gives
    /// the ideals `I_{s−1} ∪ P ⊆ I_{s+1}`, so the split stays contiguous. The loads of all
    /// prefixes are read off one pass of moves; the best feasible one (memory, support) is
    /// kept when it lowers `max(load(s), load(s+1))`. True if it did.
    ///
    /// Complexity: O(|U| · δ) for the union U and its clusters' degree δ in hyperedges.
    fn rebalance_pair(&mut self, s: usize) -> bool {
        let t = s + 1;
        let before = self.load(s).max(self.load(t));
        let mut union: Vec<u32> = self.members[s]
            .iter()
            .chain(&self.members[t])
            .copied()
            .collect();
        if union.len() < 2 {
            return false;
        }
        union.sort_unstable();
        let moves = self.moves;
        let original: Vec<bool> = union
            .iter()
            .map(|&g| self.plan.stage_of[g as usize] as usize == t)
            .collect();
        // Everything into t, largest index first (successors move before predecessors).
        for &g in union.iter().rev() {
            if self.plan.stage_of[g as usize] as usize == s {
                self.apply(g as usize, t);
            }
        }
        let fits = |r: &Self, x: usize| match r.plan.kinds[x] {
            Kind::Accelerator => r.unsupported[x] == 0 && r.size[x] <= r.memory,
            Kind::Cpu => true,
        };
        let value = |r: &Self| {
            if fits(r, s) && fits(r, t) {
                r.load(s).max(r.load(t))
            } else {
                f64::INFINITY
            }
        };
        let mut best = (0usize, value(self));
        for (i, &g) in union.iter().enumerate() {
            self.apply(g as usize, s);
            let v = value(self);
            if v < best.1 {
                best = (i + 1, v);
            }
        }
        let improved = best.1 < before - 1e-12 * before.abs().max(1.0);
        for (i, &g) in union.iter().enumerate().rev() {
            let to_t = if improved { i >= best.0 } else { original[i] };
            if to_t {
                self.apply(g as usize, t);
            }
        }
        let changed = union
            .iter()
            .enumerate()
            .filter(|&(i, &g)| (self.plan.stage_of[g as usize] as usize == t) != original[i])
            .count();
        self.moves = moves + changed;
        improved
    }

    /// Marks the pairs of stage x for re-splitting.
    fn touch(&mut self, x: usize) {
        if x > 0 {
            self.pair_clean[x - 1] = false;
        }
        if let Some(c) = self.pair_clean.get_mut(x) {
            *c = false;
        }
    }

    /// Sheds bottleneck stages until none can shed, [`MAX_ROUNDS`] times, or the budget ends.
    fn shed_bottlenecks(&mut self, budget: &Budget) {
        let stages = self.plan.kinds.len();
        for _ in 0..MAX_ROUNDS {
            if budget.is_exhausted() {
                return;
            }
            let Some((b, max)) = (0..stages)
                .map(|s| (s, self.load(s)))
                .max_by(|x, y| x.1.total_cmp(&y.1))
            else {
                return;
            };
            let cap = max - 1e-12 * max.abs().max(1.0);
            let shed = [1isize, -1]
                .iter()
                .any(|&dir| self.shed(b, dir, cap, cap, stages, budget));
            if !shed {
                return;
            }
        }
    }

    /// Moves clusters from stage s towards `s + dir` until `load(s) ≤ target`, keeping every
    /// receiving stage at most `cap`; false if it cannot (moves made stay; they never raise
    /// a stage above `cap`).
    fn shed(
        &mut self,
        s: usize,
        dir: isize,
        target: f64,
        cap: f64,
        depth: usize,
        budget: &Budget,
    ) -> bool {
        let Some(t) = s
            .checked_add_signed(dir)
            .filter(|&t| t < self.plan.kinds.len())
        else {
            return false;
        };
        loop {
            if self.load(s) <= target {
                return true;
            }
            if budget.is_exhausted() {
                return false;
            }
            let now = self.load(s);
            let mut best: Option<(usize, f64)> = None;
            let mut least_rise: Option<f64> = None;
            for &g in &self.members[s] {
                let g = g as usize;
                if !self.movable(g, t) {
                    continue;
                }
                let e = self.effect(g, t);
                if e.from_load >= now {
                    continue;
                }
                if e.to_load <= cap {
                    let worst = e.from_load.max(e.to_load);
                    if best.is_none_or(|(_, w)| worst < w) {
                        best = Some((g, worst));
                    }
                } else {
                    let rise = e.to_load - self.load(t);
                    least_rise = Some(least_rise.map_or(rise, |r: f64| r.min(rise)));
                }
            }
            match (best, least_rise) {
                (Some((g, _)), _) => {
                    self.apply(g, t);
                    self.touch(s);
                    self.touch(t);
                }
                (None, Some(rise)) if depth > 0 => {
                    if !self.shed(t, dir, cap - rise, cap, depth - 1, budget) {
                        return false;
                    }
                }
                _ => return false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::contraction::Contraction;
    use crate::model::{DeviceSet, Node, Workload};
    use crate::score::evaluate;

    fn chain(weights: &[f64], comm: f64, k: usize) -> Workload {
        let nodes: Vec<Node> = weights
            .iter()
            .enumerate()
            .map(|(i, &f)| Node {
                id: i as i64,
                name: None,
                fpga_latency: f,
                cpu_latency: 1e6,
                size_bytes: 1.0,
                supported_on_accelerator: true,
                is_backward: false,
                color_class: None,
                layer_id: None,
                module: None,
                memory: None,
            })
            .collect();
        let edges = (1..weights.len() as i64)
            .map(|i| (i - 1, i, comm, 0.0))
            .collect();
        Workload::new(
            nodes,
            edges,
            DeviceSet {
                accelerators: k,
                memory_per_accelerator_bytes: 1e9,
                cpus: 0,
            },
        )
        .unwrap()
    }

    /// A chain of 12 unit nodes on 3 accelerators, started from the split 8 | 2 | 2:
    /// shedding reaches the balanced 4 | 4 | 4 (loads 4 + communication), and the loads
    /// kept incrementally agree with the scorer.
    #[test]
    fn sheds_a_chain_to_balance() {
        let w = chain(&[1.0; 12], 0.1, 3);
        let c = Contraction::new(&w);
        let level = Level::from_contraction(&w, &c);
        let stage_of: Vec<u32> = (0..12)
            .map(|i| {
                if i < 8 {
                    0
                } else if i < 10 {
                    1
                } else {
                    2
                }
            })
            .collect();
        let plan = StagePlan {
            stage_of,
            kinds: vec![Kind::Accelerator; 3],
        };
        assert!(plan.is_monotone(&level));
        let mut r = Refiner::new(&level, plan, 1e9);
        assert!((r.max_load() - 8.1).abs() < 1e-9);
        r.run(&Budget::unlimited());
        let loads: Vec<f64> = (0..3).map(|s| r.load(s)).collect();
        assert!((r.max_load() - 4.2).abs() < 1e-9, "{loads:?}");
        let plan = r.into_plan();
        assert!(plan.is_monotone(&level));
        let devices = plan.stage_devices();
        let placement = crate::model::Placement::new(
            (0..12)
                .map(|v| devices[plan.stage_of[c.group_of[v]] as usize])
                .collect(),
        );
        let e = evaluate(&w, &placement, false);
        assert!(e.is_valid() && e.is_contiguous());
        assert!((e.max_load - 4.2).abs() < 1e-9, "{}", e.max_load);
    }
}

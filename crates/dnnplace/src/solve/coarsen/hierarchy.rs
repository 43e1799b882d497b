//! The coarsening half of the multilevel scheme: a stack of ever smaller DAGs of
//! *clusters*, each level with the map from the level below.
//!
//! Level 0 is the group DAG of [`Contraction`] (colour classes fused, numbered
//! topologically). A coarser level is made by choosing a topological order π of the
//! current level and merging runs of consecutive clusters of π. Every cluster of every
//! level is therefore an interval of some topological order of the level below, which
//! gives the two properties the solver needs:
//!
//! - **Convex clusters.** If `x, y ∈ [a, b]` (positions in π) and a path `x → z → y`
//!   leaves the interval, then `pos(x) < pos(z) < pos(y)`, so `z` is inside after all: an
//!   interval of a topological order is contiguous, and by induction so is every
//!   cluster's set of fine groups.
//! - **A DAG again.** Arcs go forward in π, so between intervals they go from an earlier
//!   interval to a later one: numbering clusters by interval keeps the coarse graph
//!   topologically numbered, and no merge can close a cycle. (Merging two clusters
//!   joined by an arc *and* a longer path would; such a pair is never consecutive in a
//!   topological order, because the path's inner nodes sit between them.)
//!
//! Contiguous plans of a coarse level are chains of coarse ideals; every coarse ideal
//! expands to a fine ideal, so they are contiguous fine plans with the same loads.
//!
//! **Which runs are merged.** `layers` ([`Hierarchy::by_layers`]): π is Kahn's order with
//! the smallest `layerId` first, and each maximal run of one layer becomes a cluster (a
//! layer that is not convex is split into several runs). `auto` ([`Hierarchy::coarsen`]):
//! heavy-edge matching along π, as in multilevel partitioners. π is depth first (a
//! chain stays consecutive); the consecutive pairs `(π_i, π_{i+1})` are ranked by
//! (same layer, connected, `conn`, lighter first) where `conn` is the cost of the
//! communication hyperedges holding both, and taken greedily while neither end is taken.
//! A pass merges pairs only, so a level has at least half the clusters of the one below;
//! passes repeat until the level is small ([`MIN_CLUSTERS`]) or stops shrinking. When a
//! pass of connected pairs shrinks the level by less than 10 % (parallel branches with
//! nothing in common), the next pass may also merge unconnected neighbours in π.
//!
//! **What may merge** ([`Caps`]): two clusters with the same accelerator support, both
//! fitting an accelerator's memory or both not, whose merged compute, CPU time and size
//! stay under the caps (so that a coarse plan can still balance); clusters without a
//! forward node are *pinned* and never merge (their colour classes are placed by mirror
//! arcs, which only hold while the class stays without forward nodes; see
//! [`crate::model::contraction`]).
//!
//! Complexity per pass: O(n log n + m + Σ|T| log |T|) for n clusters, m arcs and the
//! hyperedges T; O(log n) passes in all when every pass shrinks by a constant factor.

use std::collections::HashMap;

use crate::model::contraction::Contraction;
use crate::model::Workload;

/// Passes stop once a level has at most this many clusters.
pub const MIN_CLUSTERS: usize = 16;

/// One level: a DAG of clusters numbered in topological order.
#[derive(Clone, Debug)]
pub struct Level {
    pub fpga: Vec<f64>,
    pub cpu: Vec<f64>,
    pub size: Vec<f64>,
    /// Every node of the cluster may run on an accelerator.
    pub supported: Vec<bool>,
    /// Never merged (a group without forward nodes).
    pub pinned: Vec<bool>,
    /// The `layerId` every node of the cluster shares, if any.
    pub layer: Vec<Option<i64>>,
    pub succ: Vec<Vec<u32>>,
    pub pred: Vec<Vec<u32>>,
    /// Communication hyperedges over clusters: sorted members (two or more) and cost.
    pub hyperedges: Vec<(Vec<u32>, f64)>,
    /// For each cluster of the level below, the cluster of this level that holds it
    /// (empty on level 0).
    pub parent_of_below: Vec<u32>,
}

impl Level {
    /// Level 0: the groups of `c`.
    pub fn from_contraction(w: &Workload, c: &Contraction) -> Level {
        let n = c.len();
        let layer = c
            .groups
            .iter()
            .map(|g| {
                let first = w.node(g.nodes[0]).layer_id;
                first.filter(|_| g.nodes.iter().all(|&v| w.node(v).layer_id == first))
            })
            .collect();
        let pinned = c
            .groups
            .iter()
            .map(|g| g.nodes.iter().all(|&v| w.node(v).is_backward))
            .collect();
        let to_u32 = |lists: &[Vec<usize>]| {
            lists
                .iter()
                .map(|l| l.iter().map(|&x| x as u32).collect())
                .collect()
        };
        Level {
            fpga: c.groups.iter().map(|g| g.fpga_latency).collect(),
            cpu: c.groups.iter().map(|g| g.cpu_latency).collect(),
            size: c.groups.iter().map(|g| g.size_bytes).collect(),
            supported: c
                .groups
                .iter()
                .map(|g| g.supported_on_accelerator)
                .collect(),
            pinned,
            layer,
            succ: to_u32(&c.succ),
            pred: to_u32(&c.pred),
            hyperedges: c
                .communication_hyperedges(w)
                .into_iter()
                .map(|(t, cost)| (t.into_iter().map(|g| g as u32).collect(), cost))
                .collect(),
            parent_of_below: Vec::new(),
        }
        .checked(n)
    }

    fn checked(self, n: usize) -> Level {
        debug_assert!(self.fpga.len() == n && self.succ.len() == n && self.pred.len() == n);
        debug_assert!(
            self.succ
                .iter()
                .enumerate()
                .all(|(u, s)| s.iter().all(|&v| v as usize > u)),
            "topological numbering"
        );
        self
    }

    /// Number of clusters.
    pub fn len(&self) -> usize {
        self.fpga.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fpga.is_empty()
    }

    /// The level whose clusters are the classes of `parent` (`parent[x] < count` for every
    /// cluster x here; classes must be intervals of a topological order, numbered in
    /// that order, see the module documentation).
    pub fn contract(&self, parent: Vec<u32>, count: usize) -> Level {
        let mut fpga = vec![0.0; count];
        let mut cpu = vec![0.0; count];
        let mut size = vec![0.0; count];
        let mut supported = vec![true; count];
        let mut pinned = vec![false; count];
        let mut layer: Vec<Option<Option<i64>>> = vec![None; count];
        for (x, &p) in parent.iter().enumerate() {
            let p = p as usize;
            fpga[p] += self.fpga[x];
            cpu[p] += self.cpu[x];
            size[p] += self.size[x];
            supported[p] &= self.supported[x];
            pinned[p] |= self.pinned[x];
            layer[p] = Some(match layer[p] {
                None => self.layer[x],
                Some(l) if l == self.layer[x] => l,
                Some(_) => None,
            });
        }
        let mut arcs: Vec<(u32, u32)> = Vec::new();
        for (u, list) in self.succ.iter().enumerate() {
            for &v in list {
                let (a, b) = (parent[u], parent[v as usize]);
                if a != b {
                    arcs.push((a, b));
                }
            }
        }
        arcs.sort_unstable();
        arcs.dedup();
        let mut succ = vec![Vec::new(); count];
        let mut pred = vec![Vec::new(); count];
        for &(a, b) in &arcs {
            succ[a as usize].push(b);
            pred[b as usize].push(a);
        }
        let mut merged: HashMap<Vec<u32>, f64> = HashMap::with_capacity(self.hyperedges.len());
        for (t, cost) in &self.hyperedges {
            let mut m: Vec<u32> = t.iter().map(|&x| parent[x as usize]).collect();
            m.sort_unstable();
            m.dedup();
            if m.len() > 1 {
                *merged.entry(m).or_insert(0.0) += cost;
            }
        }
        let mut hyperedges: Vec<(Vec<u32>, f64)> = merged.into_iter().collect();
        hyperedges.sort_by(|a, b| a.0.cmp(&b.0));
        Level {
            fpga,
            cpu,
            size,
            supported,
            pinned,
            layer: layer.into_iter().map(Option::flatten).collect(),
            succ,
            pred,
            hyperedges,
            parent_of_below: parent,
        }
        .checked(count)
    }

    /// A topological order that follows one branch as deep as it goes before the next
    /// (Kahn's algorithm with a stack, lowest index first).
    pub fn depth_first_order(&self) -> Vec<u32> {
        let mut indegree: Vec<usize> = self.pred.iter().map(Vec::len).collect();
        let mut stack: Vec<u32> = (0..self.len() as u32)
            .rev()
            .filter(|&g| indegree[g as usize] == 0)
            .collect();
        let mut order = Vec::with_capacity(self.len());
        while let Some(g) = stack.pop() {
            order.push(g);
            for &h in self.succ[g as usize].iter().rev() {
                indegree[h as usize] -= 1;
                if indegree[h as usize] == 0 {
                    stack.push(h);
                }
            }
        }
        debug_assert_eq!(order.len(), self.len());
        order
    }

    /// Kahn's order with the smallest `(layerId, index)` first (clusters without a layer
    /// after all others).
    pub fn layer_order(&self) -> Vec<u32> {
        use std::cmp::Reverse;
        let key = |g: u32| (self.layer[g as usize].unwrap_or(i64::MAX), g);
        let mut indegree: Vec<usize> = self.pred.iter().map(Vec::len).collect();
        let mut ready: std::collections::BinaryHeap<Reverse<(i64, u32)>> = (0..self.len() as u32)
            .filter(|&g| indegree[g as usize] == 0)
            .map(|g| Reverse(key(g)))
            .collect();
        let mut order = Vec::with_capacity(self.len());
        while let Some(Reverse((_, g))) = ready.pop() {
            order.push(g);
            for &h in &self.succ[g as usize] {
                indegree[h as usize] -= 1;
                if indegree[h as usize] == 0 {
                    ready.push(Reverse(key(h)));
                }
            }
        }
        debug_assert_eq!(order.len(), self.len());
        order
    }
}

/// Limits on what one cluster may hold (module documentation).
#[derive(Clone, Copy, Debug)]
pub struct Caps {
    /// Memory of one accelerator, bytes.
    pub memory_bytes: f64,
    pub fpga: f64,
    pub cpu: f64,
    pub size_bytes: f64,
}

impl Caps {
    /// Caps for a plan on `k` accelerators and `l` CPUs: compute and CPU time at most
    /// 1/(8(k + ℓ)) of the total (or the largest single cluster), size at most a quarter
    /// of an accelerator.
    pub fn for_devices(level: &Level, k: usize, l: usize, memory_bytes: f64) -> Caps {
        let share = 8.0 * (k + l).max(1) as f64;
        let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
        Caps {
            memory_bytes,
            fpga: (level.fpga.iter().sum::<f64>() / share).max(max(&level.fpga)),
            cpu: (level.cpu.iter().sum::<f64>() / share).max(max(&level.cpu)),
            size_bytes: memory_bytes / 4.0,
        }
    }

    fn can_merge(&self, level: &Level, a: usize, b: usize) -> bool {
        let fits = |x: usize| level.size[x] <= self.memory_bytes;
        !level.pinned[a]
            && !level.pinned[b]
            && level.supported[a] == level.supported[b]
            && fits(a) == fits(b)
            && level.fpga[a] + level.fpga[b] <= self.fpga
            && level.cpu[a] + level.cpu[b] <= self.cpu
            && (!fits(a)
                || level.size[a] + level.size[b]
                    <= self.size_bytes.max(level.size[a].max(level.size[b])))
    }
}

/// Cluster numbering of `order` cut into runs: `joins_next[i]` says whether position i
/// is in one run with position i + 1. Returns (parent, count).
fn number_runs(order: &[u32], joins_next: &[bool]) -> (Vec<u32>, usize) {
    let mut parent = vec![0u32; order.len()];
    let mut next = 0u32;
    for (i, &g) in order.iter().enumerate() {
        parent[g as usize] = next;
        if !joins_next.get(i).copied().unwrap_or(false) {
            next += 1;
        }
    }
    (parent, next as usize)
}

/// One `layers` pass: maximal runs of one layer in [`Level::layer_order`] (clusters that
/// may not merge stay alone).
pub fn layer_pass(level: &Level, caps: &Caps) -> (Vec<u32>, usize) {
    let order = level.layer_order();
    let unbounded = Caps {
        fpga: f64::INFINITY,
        cpu: f64::INFINITY,
        size_bytes: caps.memory_bytes,
        ..*caps
    };
    let mut joins = vec![false; order.len()];
    for i in 0..order.len().saturating_sub(1) {
        let (a, b) = (order[i] as usize, order[i + 1] as usize);
        joins[i] = level.layer[a].is_some()
            && level.layer[a] == level.layer[b]
            && unbounded.can_merge(level, a, b);
    }
    // A run that fits an accelerator must keep fitting as a whole.
    if let Some(&first) = order.first() {
        let mut run_size = level.size[first as usize];
        for i in 0..order.len() - 1 {
            let next = order[i + 1] as usize;
            if joins[i]
                && (run_size + level.size[next] <= caps.memory_bytes
                    || level.size[next] > caps.memory_bytes)
            {
                run_size += level.size[next];
            } else {
                joins[i] = false;
                run_size = level.size[next];
            }
        }
    }
    number_runs(&order, &joins)
}

/// One heavy-edge matching pass along a depth-first order (module documentation);
/// `unconnected` also allows pairs that share no arc or hyperedge.
pub fn matching_pass(level: &Level, caps: &Caps, unconnected: bool) -> (Vec<u32>, usize) {
    let order = level.depth_first_order();
    let n = order.len();
    let mut position = vec![0u32; n];
    for (i, &g) in order.iter().enumerate() {
        position[g as usize] = i as u32;
    }
    // conn[i]: cost of the hyperedges holding both order[i] and order[i + 1].
    let mut conn = vec![0.0; n];
    let mut spots: Vec<u32> = Vec::new();
    for (t, cost) in &level.hyperedges {
        spots.clear();
        spots.extend(t.iter().map(|&x| position[x as usize]));
        spots.sort_unstable();
        for w in spots.windows(2) {
            if w[1] == w[0] + 1 {
                conn[w[0] as usize] += cost;
            }
        }
    }
    let mut candidates: Vec<(usize, bool, bool)> = Vec::new();
    for i in 0..n.saturating_sub(1) {
        let (a, b) = (order[i] as usize, order[i + 1] as usize);
        if !caps.can_merge(level, a, b) {
            continue;
        }
        let connected = conn[i] > 0.0 || level.succ[a].binary_search(&(b as u32)).is_ok();
        if !connected && !unconnected {
            continue;
        }
        let same_layer = level.layer[a].is_some() && level.layer[a] == level.layer[b];
        candidates.push((i, same_layer, connected));
    }
    let weight = |i: usize| level.fpga[order[i] as usize] + level.fpga[order[i + 1] as usize];
    candidates.sort_by(|x, y| {
        (y.1, y.2)
            .cmp(&(x.1, x.2))
            .then(conn[y.0].total_cmp(&conn[x.0]))
            .then(weight(x.0).total_cmp(&weight(y.0)))
            .then(x.0.cmp(&y.0))
    });
    let mut taken = vec![false; n];
    let mut joins = vec![false; n];
    for (i, _, _) in candidates {
        if !taken[i] && !taken[i + 1] {
            taken[i] = true;
            taken[i + 1] = true;
            joins[i] = true;
        }
    }
    number_runs(&order, &joins)
}

/// All levels, finest (level 0, the groups) first.
#[derive(Clone, Debug)]
pub struct Hierarchy {
    pub levels: Vec<Level>,
}

impl Hierarchy {
    /// Level 0 alone.
    pub fn new(base: Level) -> Hierarchy {
        Hierarchy { levels: vec![base] }
    }

    /// Adds matching passes until the coarsest level has at most `min_clusters` clusters,
    /// or stops shrinking, or `keep_going` says stop.
    pub fn coarsen(
        &mut self,
        caps: &Caps,
        min_clusters: usize,
        mut keep_going: impl FnMut() -> bool,
    ) {
        let mut unconnected = false;
        loop {
            let top = self.levels.last().expect("level 0");
            if top.len() <= min_clusters.max(1) || !keep_going() {
                return;
            }
            let (parent, count) = matching_pass(top, caps, unconnected);
            let shrink = 1.0 - count as f64 / top.len() as f64;
            if count == top.len() {
                if unconnected {
                    return;
                }
                unconnected = true;
                continue;
            }
            let next = top.contract(parent, count);
            self.levels.push(next);
            if shrink < 0.1 {
                if unconnected {
                    return;
                }
                unconnected = true;
            }
        }
    }

    /// Adds one `layers` level (if it merges anything).
    pub fn by_layers(&mut self, caps: &Caps) {
        let top = self.levels.last().expect("level 0");
        let (parent, count) = layer_pass(top, caps);
        if count < top.len() {
            let next = top.contract(parent, count);
            self.levels.push(next);
        }
    }

    /// The cluster of level `level` holding each group (level-0 cluster).
    pub fn groups_to(&self, level: usize) -> Vec<u32> {
        let mut map: Vec<u32> = (0..self.levels[0].len() as u32).collect();
        for l in 1..=level {
            let up = &self.levels[l].parent_of_below;
            for x in map.iter_mut() {
                *x = up[*x as usize];
            }
        }
        map
    }

    /// Sizes of the levels, finest first.
    pub fn sizes(&self) -> Vec<usize> {
        self.levels.iter().map(Level::len).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DeviceSet, Node};

    fn node(id: i64, layer: i64) -> Node {
        Node {
            id,
            name: None,
            fpga_latency: 1.0,
            cpu_latency: 10.0,
            size_bytes: 1.0,
            supported_on_accelerator: true,
            is_backward: false,
            color_class: None,
            layer_id: Some(layer),
            module: None,
            memory: None,
        }
    }

    /// Every cluster of every level is convex in the group DAG, and the levels are DAGs
    /// numbered topologically (checked by `contract`), on a diamond-rich graph.
    fn assert_convex(h: &Hierarchy) {
        let base = &h.levels[0];
        for l in 1..h.levels.len() {
            let map = h.groups_to(l);
            // A path leaving a cluster and re-entering it: from x (in C) through y (not in
            // C) to z (in C). Check by reachability from each cluster's out-neighbours.
            let n = base.len();
            for c in 0..h.levels[l].len() as u32 {
                let mut seen = vec![false; n];
                let mut stack: Vec<usize> = (0..n)
                    .filter(|&x| map[x] == c)
                    .flat_map(|x| base.succ[x].iter().map(|&y| y as usize))
                    .filter(|&y| map[y] != c)
                    .collect();
                while let Some(y) = stack.pop() {
                    if seen[y] {
                        continue;
                    }
                    seen[y] = true;
                    assert_ne!(map[y], c, "cluster {c} of level {l} is not convex");
                    stack.extend(base.succ[y].iter().map(|&z| z as usize));
                }
            }
        }
    }

    #[test]
    fn diamonds_coarsen_into_convex_clusters() {
        // 20 diamonds a → {b, c} → d in a chain, with a skip edge a_i → a_{i+1}.
        let mut nodes = Vec::new();
        let mut edges = Vec::new();
        for i in 0..20 {
            let base = 4 * i;
            for j in 0..4 {
                nodes.push(node(base + j + 1, i));
            }
            edges.push((base + 1, base + 2, 1.0, 0.0));
            edges.push((base + 1, base + 3, 1.0, 0.0));
            edges.push((base + 2, base + 4, 0.5, 0.0));
            edges.push((base + 3, base + 4, 0.25, 0.0));
            if i + 1 < 20 {
                edges.push((base + 4, base + 5, 2.0, 0.0));
                edges.push((base + 1, base + 5, 1.0, 0.0));
            }
        }
        let w = Workload::new(
            nodes,
            edges,
            DeviceSet {
                accelerators: 2,
                memory_per_accelerator_bytes: 1e9,
                cpus: 1,
            },
        )
        .unwrap();
        let c = Contraction::new(&w);
        let base = Level::from_contraction(&w, &c);
        let caps = Caps::for_devices(&base, 1, 0, 1e9);
        let mut h = Hierarchy::new(base.clone());
        h.coarsen(&caps, 2, || true);
        assert!(h.levels.len() > 2, "{:?}", h.sizes());
        assert!(h.levels.last().unwrap().len() < 20, "{:?}", h.sizes());
        assert_convex(&h);
        // Totals are kept on every level.
        for level in &h.levels {
            assert!((level.fpga.iter().sum::<f64>() - 80.0).abs() < 1e-9);
        }
        let mut by_layer = Hierarchy::new(base);
        by_layer.by_layers(&caps);
        assert_eq!(by_layer.levels[1].len(), 20);
        assert_convex(&by_layer);
    }
}

//! Node groups placed as units: their summed costs and the communication hyperedges
//! between them. The one unit model of every solver: the contraction's groups
//! ([`super::contraction`]), the colour classes of the non-contiguous baselines and IPs,
//! and single nodes (the latency IP's pieces).
//!
//! **Groups.** A labelling `g : V → 0..G` of the nodes. Group `a` has
//!
//! ```text
//! fpga(a) = Σ_{g(v)=a} fpgaLatency(v)      cpu(a) = Σ_{g(v)=a} cpuLatency(v)
//! fpga_F(a), cpu_F(a): the same over the forward nodes (fpga(a) − fpga_F(a) is backward)
//! size(a) = Σ_{g(v)=a} size(v)              supported(a) = ∧_{g(v)=a} supported(v)
//! ```
//!
//! (sums in node order, so every solver sees the same floating-point values).
//!
//! **Communication hyperedges.** For a node `u` with `c(u) > 0`, `T(u) = {g(u)} ∪ {g(x) :
//! u → x}`. A device holding the groups `X` pays `c(u)` exactly when `X` *cuts* `T(u)`
//! (meets it without containing it): `u ∈ Out(X)` if `g(u) ∈ X`, `u ∈ In(X)` otherwise
//! (once per receiving device). Equal sets are merged with their costs added (separately
//! for forward and backward producers when asked, for the synchronous objective); sets
//! of one group, which no device cuts, are dropped.
//!
//! Complexity: O(n) for the sums; O(n + m) plus hashing of the sets for the hyperedges
//! (n nodes, m edges).

use std::collections::HashMap;
use std::ops::Index;

use super::contraction::class_index;
use super::{Device, Placement, Workload};

/// One group of nodes, placed as a unit, with its summed costs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Group {
    /// Node indices of the group (forward and backward), increasing.
    pub nodes: Vec<usize>,
    /// Σ fpgaLatency over the group's nodes.
    pub fpga_latency: f64,
    /// Σ cpuLatency over the group's nodes.
    pub cpu_latency: f64,
    /// Σ size over the group's nodes, bytes.
    pub size_bytes: f64,
    /// True when every node of the group may run on an accelerator.
    pub supported_on_accelerator: bool,
    /// Σ fpgaLatency of the group's forward nodes (for the synchronous objective).
    pub forward_fpga_latency: f64,
    /// Σ cpuLatency of the group's forward nodes (for the synchronous objective).
    pub forward_cpu_latency: f64,
}

impl Group {
    /// Whether the group may go on an accelerator with `memory_bytes` free.
    pub fn fits_accelerator(&self, memory_bytes: f64) -> bool {
        self.supported_on_accelerator && self.size_bytes <= memory_bytes
    }

    /// Σ fpgaLatency of the group's backward nodes.
    pub fn backward_fpga_latency(&self) -> f64 {
        self.fpga_latency - self.forward_fpga_latency
    }

    /// Σ cpuLatency of the group's backward nodes.
    pub fn backward_cpu_latency(&self) -> f64 {
        self.cpu_latency - self.forward_cpu_latency
    }
}

/// A communication hyperedge `T`: the groups it spans (sorted, at least two), the summed
/// cost `c(u)` of its producers, and whether they are backward nodes (only when the
/// hyperedges were built by side).
#[derive(Clone, Debug, PartialEq)]
pub struct Hyperedge {
    pub groups: Vec<usize>,
    pub cost: f64,
    pub backward: bool,
}

/// A labelling of the nodes into groups, with the groups' sums.
#[derive(Clone, Debug, Default)]
pub struct Grouping {
    /// `group_of[v]` for node index `v`.
    pub group_of: Vec<usize>,
    /// The groups, indexed `0..G`.
    pub groups: Vec<Group>,
}

impl Grouping {
    /// The groups of a dense labelling `group_of[v] ∈ 0..count` (every label used).
    pub fn new(w: &Workload, group_of: Vec<usize>, count: usize) -> Grouping {
        let mut groups = vec![
            Group {
                supported_on_accelerator: true,
                ..Group::default()
            };
            count
        ];
        for (v, node) in w.nodes().iter().enumerate() {
            let g = &mut groups[group_of[v]];
            g.nodes.push(v);
            g.fpga_latency += node.fpga_latency;
            g.cpu_latency += node.cpu_latency;
            g.size_bytes += node.size_bytes;
            g.supported_on_accelerator &= node.supported_on_accelerator;
            if !node.is_backward {
                g.forward_fpga_latency += node.fpga_latency;
                g.forward_cpu_latency += node.cpu_latency;
            }
        }
        Grouping { group_of, groups }
    }

    /// The colour classes (numbered by [`class_index`]): the groups every plan keeps whole.
    pub fn classes(w: &Workload) -> Grouping {
        let (class, count) = class_index(w);
        Grouping::new(w, class, count)
    }

    /// The units every solver places whole: the colour classes, or with `contiguous` the
    /// groups of the [`Contraction`](super::contraction::Contraction) (classes on one cycle
    /// of the class graph fused, numbered topologically) with the arcs of their DAG (none
    /// for classes).
    pub fn units(w: &Workload, contiguous: bool) -> (Grouping, Vec<(usize, usize)>) {
        if contiguous {
            let c = super::contraction::Contraction::new(w);
            let arcs = c.arcs();
            (c.into_grouping(), arcs)
        } else {
            (Grouping::classes(w), Vec::new())
        }
    }

    /// Every node a group of its own.
    pub fn singletons(w: &Workload) -> Grouping {
        Grouping::new(w, (0..w.len()).collect(), w.len())
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The communication hyperedges over these groups, split by side when `by_side`
    /// (module docs).
    pub fn hyperedges(&self, w: &Workload, by_side: bool) -> Vec<Hyperedge> {
        hyperedges(w, &self.group_of, by_side)
    }

    /// The node-level placement that puts group `g` on `device_of_group[g]`.
    pub fn placement(&self, device_of_group: &[Device]) -> Placement {
        Placement::new(self.group_of.iter().map(|&g| device_of_group[g]).collect())
    }

    /// The device of every group under a node-level `assignment`; `None` if some group's
    /// nodes are on different devices.
    pub fn device_of_groups(&self, assignment: &[Device]) -> Option<Vec<Device>> {
        self.groups
            .iter()
            .map(|g| {
                let d = assignment[g.nodes[0]];
                g.nodes.iter().all(|&v| assignment[v] == d).then_some(d)
            })
            .collect()
    }
}

impl Index<usize> for Grouping {
    type Output = Group;

    fn index(&self, g: usize) -> &Group {
        &self.groups[g]
    }
}

/// The communication hyperedges of any labelling of the nodes (module docs), sorted by
/// (set, side).
pub fn hyperedges(w: &Workload, label: &[usize], by_side: bool) -> Vec<Hyperedge> {
    let mut map: HashMap<(Vec<usize>, bool), f64> = HashMap::new();
    for u in 0..w.len() {
        let c = w.out_cost(u);
        if c == 0.0 {
            continue;
        }
        let mut t: Vec<usize> = std::iter::once(label[u])
            .chain(w.successors(u).iter().map(|&x| label[x]))
            .collect();
        t.sort_unstable();
        t.dedup();
        if t.len() > 1 {
            *map.entry((t, by_side && w.node(u).is_backward))
                .or_insert(0.0) += c;
        }
    }
    let mut list: Vec<Hyperedge> = map
        .into_iter()
        .map(|((groups, backward), cost)| Hyperedge {
            groups,
            cost,
            backward,
        })
        .collect();
    list.sort_by(|a, b| (&a.groups, a.backward).cmp(&(&b.groups, b.backward)));
    list
}

/// `incident[g]`: the indices of the hyperedges that contain group `g`.
pub fn incidence(hyperedges: &[Hyperedge], groups: usize) -> Vec<Vec<usize>> {
    let mut incident = vec![Vec::new(); groups];
    for (e, edge) in hyperedges.iter().enumerate() {
        for &g in &edge.groups {
            incident[g].push(e);
        }
    }
    incident
}

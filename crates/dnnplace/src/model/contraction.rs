//! Colour classes contracted into a DAG of *groups*, the unit that contiguous solvers place.
//!
//! 1. Every node belongs to a colour class (a node without `colorClass` is a class of its own).
//! 2. The *class graph* has an arc `A → B` for every forward edge `u → v` with `u ∈ A`,
//!    `v ∈ B`, `A ≠ B`. A class with no forward node (an *orphan* backward class, e.g. a loss
//!    gradient) gets mirror arcs: for each backward edge `u → v` touching an orphan class,
//!    the arc `class(v) → class(u)`, so it sits in the forward order where its gradient
//!    flow puts it.
//! 3. Strongly connected components of the class graph are fused: two classes on one cycle
//!    cannot be on different devices of a contiguous placement (the cycle would leave one
//!    device's set and re-enter it). The fused classes are the *groups*; their graph is a DAG.
//! 4. Groups are numbered in a topological order, so every arc goes from a lower to a higher
//!    index. Their sums and communication hyperedges are those of every node grouping
//!    ([`super::grouping`]); [`Contraction::into_grouping`] hands them to the solvers that
//!    take a [`Grouping`].
//!
//! A placement is *contiguous* (for every solver and for the scorer) when each device's set
//! of classes is contiguous in the class graph. This implies the node-level definition of
//! MODEL.md and equals it when every class holds one forward node.
//!
//! Complexity: O(n + m) for n nodes and m edges (Tarjan's SCC, Kahn's order).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::grouping::{hyperedges, Group, Grouping};
use super::workload::Workload;

/// The group DAG of a workload. See the module documentation.
#[derive(Clone, Debug)]
pub struct Contraction {
    /// Groups in topological order.
    pub groups: Vec<Group>,
    /// `group_of[v]` for node index `v`.
    pub group_of: Vec<usize>,
    /// Distinct successor groups (all with a higher index).
    pub succ: Vec<Vec<usize>>,
    /// Distinct predecessor groups (all with a lower index).
    pub pred: Vec<Vec<usize>>,
}

/// Colour class index of every node (dense `0..C`), and C. A node without a class gets its own.
pub fn class_index(w: &Workload) -> (Vec<usize>, usize) {
    let mut map = rustc_hash::FxHashMap::default();
    let mut class = Vec::with_capacity(w.len());
    let mut count = 0;
    for node in w.nodes() {
        let c = match node.color_class {
            Some(cc) => *map.entry(cc).or_insert_with(|| {
                count += 1;
                count - 1
            }),
            None => {
                count += 1;
                count - 1
            }
        };
        class.push(c);
    }
    (class, count)
}

/// The class graph of step 2 (arcs deduplicated), as successor lists over `0..C`.
pub fn class_graph(w: &Workload, class: &[usize], classes: usize) -> Vec<Vec<usize>> {
    let mut has_forward = vec![false; classes];
    for (v, node) in w.nodes().iter().enumerate() {
        if !node.is_backward {
            has_forward[class[v]] = true;
        }
    }
    let mut arcs = Vec::new();
    for e in w.edges() {
        let (a, b) = (class[e.from], class[e.to]);
        if a == b {
            continue;
        }
        let (fu, fv) = (!w.node(e.from).is_backward, !w.node(e.to).is_backward);
        if fu && fv {
            arcs.push((a, b));
        } else if !fu && !fv && (!has_forward[a] || !has_forward[b]) {
            arcs.push((b, a));
        }
    }
    arcs.sort_unstable();
    arcs.dedup();
    let mut succ = vec![Vec::new(); classes];
    for (a, b) in arcs {
        succ[a].push(b);
    }
    succ
}

impl Contraction {
    /// Contracts `w` as described in the module documentation.
    pub fn new(w: &Workload) -> Contraction {
        let (class, classes) = class_index(w);
        let class_succ = class_graph(w, &class, classes);
        let component = strongly_connected_components(&class_succ);

        let mut arcs: Vec<(usize, usize)> = Vec::new();
        for (a, succ) in class_succ.iter().enumerate() {
            for &b in succ {
                arcs.push((component[a], component[b]));
            }
        }
        let label: Vec<usize> = (0..w.len()).map(|v| component[class[v]]).collect();
        Contraction::from_labels(w, &label, arcs)
    }

    /// Builds the group DAG from a label per node (nodes with one label form a group) and
    /// arcs between labels, which must form a DAG once self-arcs are dropped. Groups are
    /// numbered in Kahn's order, smallest label first.
    pub fn from_labels(
        w: &Workload,
        label: &[usize],
        mut arcs: Vec<(usize, usize)>,
    ) -> Contraction {
        let labels = label.iter().copied().max().map_or(0, |c| c + 1);
        arcs.retain(|&(a, b)| a != b);
        arcs.sort_unstable();
        arcs.dedup();
        let mut used = vec![false; labels];
        for &x in label {
            used[x] = true;
        }
        let (position, components) = kahn_positions(labels, &arcs, &used);
        debug_assert!(
            label.iter().all(|&x| position[x] != usize::MAX),
            "the labels' arcs form a DAG"
        );

        let group_of: Vec<usize> = label.iter().map(|&x| position[x]).collect();
        let Grouping { group_of, groups } = Grouping::new(w, group_of, components);
        let mut succ = vec![Vec::new(); components];
        let mut pred = vec![Vec::new(); components];
        for &(a, b) in &arcs {
            if used[a] && used[b] {
                succ[position[a]].push(position[b]);
                pred[position[b]].push(position[a]);
            }
        }
        for list in succ.iter_mut().chain(pred.iter_mut()) {
            list.sort_unstable();
            list.dedup();
        }
        Contraction {
            groups,
            group_of,
            succ,
            pred,
        }
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The communication hyperedges over the groups as (sorted set, cost): see
    /// [`super::grouping`] (`T(u) = {g(u)} ∪ {g(x) : u → x}`, cut by a device that meets
    /// it without containing it; equal sets merged, singletons dropped).
    pub fn communication_hyperedges(&self, w: &Workload) -> Vec<(Vec<usize>, f64)> {
        hyperedges(w, &self.group_of, false)
            .into_iter()
            .map(|e| (e.groups, e.cost))
            .collect()
    }

    /// The arcs `a → b` of the group DAG (`a < b`), by `a` then `b`.
    pub fn arcs(&self) -> Vec<(usize, usize)> {
        self.succ
            .iter()
            .enumerate()
            .flat_map(|(a, s)| s.iter().map(move |&b| (a, b)))
            .collect()
    }

    /// The groups as a [`Grouping`] (the unit model the solvers share), dropping the arcs.
    pub fn into_grouping(self) -> Grouping {
        Grouping {
            group_of: self.group_of,
            groups: self.groups,
        }
    }
}

/// Kahn's order of the labels `0..labels` under `arcs` (a DAG), smallest ready label
/// first: the position of every used label (`usize::MAX` for unused ones and for labels
/// on a cycle) and the number of used labels numbered.
fn kahn_positions(labels: usize, arcs: &[(usize, usize)], used: &[bool]) -> (Vec<usize>, usize) {
    let mut succ = vec![Vec::new(); labels];
    let mut indegree = vec![0usize; labels];
    for &(a, b) in arcs {
        succ[a].push(b);
        indegree[b] += 1;
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..labels)
        .filter(|&c| indegree[c] == 0)
        .map(Reverse)
        .collect();
    let mut position = vec![usize::MAX; labels];
    let mut next = 0;
    while let Some(Reverse(c)) = ready.pop() {
        if used[c] {
            position[c] = next;
            next += 1;
        }
        for &d in &succ[c] {
            indegree[d] -= 1;
            if indegree[d] == 0 {
                ready.push(Reverse(d));
            }
        }
    }
    (position, next)
}

/// The groups other than `u`'s own (`group_of[u]`) that hold a successor of `u`, sorted
/// and distinct: where `u`'s output is received. O(deg(u) log deg(u)).
pub fn receiving_groups(w: &Workload, group_of: &[usize], u: usize) -> Vec<usize> {
    let own = group_of[u];
    let mut recv: Vec<usize> = w
        .successors(u)
        .iter()
        .map(|&x| group_of[x])
        .filter(|&g| g != own)
        .collect();
    recv.sort_unstable();
    recv.dedup();
    recv
}

/// Tarjan's algorithm, iterative. Returns the component index of every vertex.
pub fn strongly_connected_components(succ: &[Vec<usize>]) -> Vec<usize> {
    let n = succ.len();
    const NONE: usize = usize::MAX;
    let mut index = vec![NONE; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut component = vec![NONE; n];
    let mut next_index = 0;
    let mut next_component = 0;
    let mut call: Vec<(usize, usize)> = Vec::new();
    for root in 0..n {
        if index[root] != NONE {
            continue;
        }
        call.push((root, 0));
        while let Some(&mut (v, ref mut i)) = call.last_mut() {
            if *i == 0 && index[v] == NONE {
                index[v] = next_index;
                low[v] = next_index;
                next_index += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if *i < succ[v].len() {
                let w = succ[v][*i];
                *i += 1;
                if index[w] == NONE {
                    call.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            call.pop();
            if let Some(&(parent, _)) = call.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                loop {
                    let w = stack.pop().expect("v is on the stack");
                    on_stack[w] = false;
                    component[w] = next_component;
                    if w == v {
                        break;
                    }
                }
                next_component += 1;
            }
        }
    }
    component
}

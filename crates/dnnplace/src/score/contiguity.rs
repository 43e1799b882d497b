//! Contiguity of each device's node set.
//!
//! A set `S` is contiguous if no path leaves `S` and re-enters it (MODEL.md). We check it
//! on the graph of colour classes (see [`crate::model::contraction`]): a device's classes
//! `X` are contiguous when no walk of the class graph leaves `X` and comes back. One
//! search per device from the classes just outside `X`, so O(k · (C + A)) for k devices,
//! C classes and A class arcs at worst; classes that rank after `X` in a topological
//! order are never searched, so singleton sets and stages cost their own arcs. This check is written independently of the contraction's
//! SCC fusion, which the solvers use.
//!
//! A contiguous *placement* also needs its devices in a pipeline order: the graph with an
//! arc `d → d'` whenever a class arc goes from `d` to `d'` must be acyclic. Per-set
//! contiguity alone admits two devices that feed each other (`a1 → b1` and `b2 → a2` with
//! `a1, a2` on one device and `b1, b2` on another, no path `b1 ⇝ b2`): such a split is no
//! chain of stages, cannot start its pieces in the latency model, and is not a chain of
//! ideals `∅ ⊂ I_1 ⊂ … ⊂ V` — which is what MODEL.md's "equivalently `S = I \ J`" and
//! the DP rely on. With an acyclic device graph, the union of the first devices in a
//! topological order is an ideal, so every device's set is `I_i \ I_{i−1}`.

use crate::model::contraction::{class_graph, class_index};
use crate::model::{Device, Placement, Workload};

use super::validity::Violation;

/// One violation per device whose classes are not contiguous, with a witness walk.
///
/// The search for device `d` skips classes that cannot lead back into its set `X`: with
/// `rank` a topological numbering of the class graph (Kahn's; classes on or after a
/// cycle get the largest rank), a walk from `c` to a class of `X` only meets ranks up to
/// `max rank(X)`, so a class of larger rank is never entered. Skipped classes reach no
/// class of `X`, so the walks found (and the witness) are the full search's. Only the
/// classes a search touched are reset, so one device costs its set and the region below
/// its largest rank, not `C` (the all-on-CPU plans of the latency IP give every class its
/// own CPU: 50,000 devices on a 50,000-class graph).
pub fn contiguity_violations(w: &Workload, p: &Placement) -> Vec<Violation> {
    contiguity_violations_in(w, &ClassGraph::new(w), p)
}

/// The colour classes of a workload, their graph and a topological rank of it: what every
/// contiguity check of the workload's plans shares, built once by a caller that scores
/// many plans of one workload (O(n + m log m)).
pub struct ClassGraph {
    /// The class of every node.
    pub class: Vec<usize>,
    /// The class graph's successor lists ([`class_graph`]).
    pub succ: Vec<Vec<usize>>,
    /// [`topological_rank`] of `succ`.
    rank: Vec<usize>,
}

impl ClassGraph {
    pub fn new(w: &Workload) -> ClassGraph {
        let (class, classes) = class_index(w);
        let succ = class_graph(w, &class, classes);
        let rank = topological_rank(&succ);
        ClassGraph { class, succ, rank }
    }
}

/// [`contiguity_violations`] with the workload's class graph built by the caller.
pub fn contiguity_violations_in(w: &Workload, g: &ClassGraph, p: &Placement) -> Vec<Violation> {
    let (class, succ, rank) = (&g.class, &g.succ, &g.rank);
    let classes = succ.len();
    let mut class_device: Vec<Option<Device>> = vec![None; classes];
    let mut class_node: Vec<i64> = vec![0; classes];
    for (v, &d) in p.assignment.iter().enumerate() {
        class_device[class[v]].get_or_insert(d);
        class_node[class[v]] = w.node(v).id;
    }
    let mut members: Vec<(Device, usize)> = class_device
        .iter()
        .enumerate()
        .filter_map(|(c, d)| d.map(|d| (d, c)))
        .collect();
    members.sort();
    let mut out = Vec::new();
    let mut parent = vec![usize::MAX; classes];
    let mut touched: Vec<usize> = Vec::new();
    for set in members.chunk_by(|a, b| a.0 == b.0) {
        let device = set[0].0;
        let inside = |c: usize| class_device[c] == Some(device);
        let top = set.iter().map(|&(_, c)| rank[c]).max().unwrap_or(0);
        for &c in &touched {
            parent[c] = usize::MAX;
        }
        touched.clear();
        let mut stack = Vec::new();
        for &(_, a) in set {
            for &b in &succ[a] {
                if !inside(b) && rank[b] <= top && parent[b] == usize::MAX {
                    parent[b] = a;
                    touched.push(b);
                    stack.push(b);
                }
            }
        }
        let mut found = None;
        'search: while let Some(b) = stack.pop() {
            for &c in &succ[b] {
                if inside(c) {
                    found = Some((b, c));
                    break 'search;
                }
                if rank[c] <= top && parent[c] == usize::MAX {
                    parent[c] = b;
                    touched.push(c);
                    stack.push(c);
                }
            }
        }
        if let Some((last, back)) = found {
            out.push(walk_violation(
                device,
                last,
                back,
                &parent,
                &inside,
                &class_node,
            ));
        }
    }
    if out.is_empty() {
        if let Some(v) = device_cycle(succ, &class_device, &class_node) {
            out.push(v);
        }
    }
    out
}

/// A topological numbering of `succ` (Kahn's algorithm); classes it cannot number (on a
/// cycle, or after one) get `succ.len()`, the largest.
fn topological_rank(succ: &[Vec<usize>]) -> Vec<usize> {
    let n = succ.len();
    let mut indegree = vec![0usize; n];
    for list in succ {
        for &b in list {
            indegree[b] += 1;
        }
    }
    let mut rank = vec![n; n];
    let mut ready: Vec<usize> = (0..n).filter(|&a| indegree[a] == 0).collect();
    let mut next = 0;
    while let Some(a) = ready.pop() {
        rank[a] = next;
        next += 1;
        for &b in &succ[a] {
            indegree[b] -= 1;
            if indegree[b] == 0 {
                ready.push(b);
            }
        }
    }
    rank
}

fn walk_violation(
    device: Device,
    last: usize,
    back: usize,
    parent: &[usize],
    inside: &dyn Fn(usize) -> bool,
    class_node: &[i64],
) -> Violation {
    let mut walk = vec![back, last];
    let mut x = last;
    while !inside(x) {
        x = parent[x];
        walk.push(x);
    }
    walk.reverse();
    let names: Vec<String> = walk
        .iter()
        .map(|&c| format!("node {}", class_node[c]))
        .collect();
    Violation::NotContiguous {
        device,
        witness: format!(
            "the path {} (between colour classes) leaves the set and re-enters it",
            names.join(" -> ")
        ),
    }
}

/// A cycle of devices feeding each other, if any (devices' sets already contiguous).
fn device_cycle(
    succ: &[Vec<usize>],
    class_device: &[Option<Device>],
    class_node: &[i64],
) -> Option<Violation> {
    let mut arcs: std::collections::BTreeMap<(Device, Device), (i64, i64)> = Default::default();
    for (a, list) in succ.iter().enumerate() {
        for &b in list {
            if let (Some(da), Some(db)) = (class_device[a], class_device[b]) {
                if da != db {
                    arcs.entry((da, db))
                        .or_insert((class_node[a], class_node[b]));
                }
            }
        }
    }
    let devices: std::collections::BTreeSet<Device> =
        arcs.keys().flat_map(|&(a, b)| [a, b]).collect();
    // Depth-first search for a back arc; report the cycle it closes. Iterative: the
    // all-on-CPU plans of the latency IP give every class its own CPU, a chain of 50,000
    // devices, deeper than a thread's stack allows recursion (a 2 MiB thread overflowed on a
    // 20k GPT).
    let mut state: std::collections::BTreeMap<Device, u8> =
        devices.iter().map(|&d| (d, 0)).collect();
    let mut path: Vec<Device> = Vec::new();
    fn visit(
        start: Device,
        arcs: &std::collections::BTreeMap<(Device, Device), (i64, i64)>,
        state: &mut std::collections::BTreeMap<Device, u8>,
        path: &mut Vec<Device>,
    ) -> Option<Vec<Device>> {
        let successors = |d: Device| -> Vec<Device> {
            arcs.range((d, Device::Accelerator(0))..)
                .take_while(|((a, _), _)| *a == d)
                .map(|(&(_, next), _)| next)
                .collect()
        };
        state.insert(start, 1);
        path.push(start);
        // Per device on the path: its successors and how many were looked at.
        let mut frames: Vec<(Vec<Device>, usize)> = vec![(successors(start), 0)];
        while let Some((list, seen)) = frames.last_mut() {
            let Some(&next) = list.get(*seen) else {
                frames.pop();
                let done = path.pop().expect("one device per frame");
                state.insert(done, 2);
                continue;
            };
            *seen += 1;
            match state[&next] {
                1 => {
                    let at = path.iter().position(|&x| x == next).expect("on the path");
                    let mut cycle = path[at..].to_vec();
                    cycle.push(next);
                    return Some(cycle);
                }
                0 => {
                    state.insert(next, 1);
                    path.push(next);
                    frames.push((successors(next), 0));
                }
                _ => {}
            }
        }
        None
    }
    for &d in &devices {
        if state[&d] == 0 {
            if let Some(cycle) = visit(d, &arcs, &mut state, &mut path) {
                let steps: Vec<String> = cycle
                    .windows(2)
                    .map(|p| {
                        let (u, v) = arcs[&(p[0], p[1])];
                        format!("{} -> {} (node {u} -> node {v})", p[0], p[1])
                    })
                    .collect();
                return Some(Violation::NotContiguous {
                    device: cycle[0],
                    witness: format!(
                        "the devices feed each other in a cycle: {}; no order of pipeline stages runs them",
                        steps.join(", ")
                    ),
                });
            }
        }
    }
    None
}

/// Why the chunks of an interleaved plan are not a chain of stages
/// ([`interleaved_stages`]).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ChunkChainError {
    #[error("node {node} is on {device}: under the interleaved schedule every stage is a chunk of an accelerator, and CPU cores hold nothing")]
    OnCpu { node: i64, device: Device },
    #[error("node {node} is in chunk {chunk} of {device}, but the schedule runs {chunks} chunks per device (0 … {})", chunks - 1)]
    ChunkOutOfRange {
        node: i64,
        device: Device,
        chunk: usize,
        chunks: usize,
    },
    #[error("nodes {a} and {b} share a colour class but are in different stages ({a_at} and {b_at}): a colour class runs in one chunk")]
    ClassSplit {
        a: i64,
        b: i64,
        a_at: String,
        b_at: String,
    },
    #[error("node {from} ({from_at}) feeds node {to} ({to_at}), an earlier stage: the chunks' stages s = c·p + d must form a chain of ideals (every stage only feeds later ones)")]
    Backwards {
        from: i64,
        to: i64,
        from_at: String,
        to_at: String,
    },
}

/// The stage of every node of `p` under the interleaved schedule with
/// `chunks` chunks on each of `devices` accelerators: node `v` on accelerator `d` in
/// chunk `c = p.chunk(v)` is in stage `s(v) = c·devices + d`, and the union of stages
/// `0 … s` must be an ideal for every `s` (else an error naming the nodes). On the class graph (the arcs contiguity uses:
/// forward edges, and mirrored backward edges at orphan classes) that is: every colour
/// class in one stage, and `s(A) ≤ s(B)` for every arc `A → B` — a prefix of stages is
/// closed under predecessors iff no arc goes to an earlier stage. O(n + m).
pub fn interleaved_stages(
    w: &Workload,
    p: &Placement,
    devices: usize,
    chunks: usize,
) -> Result<Vec<usize>, ChunkChainError> {
    let mut stage = Vec::with_capacity(w.len());
    for (v, &device) in p.assignment.iter().enumerate() {
        let node = w.node(v).id;
        let d = match device {
            Device::Accelerator(d) if d < devices => d,
            _ => return Err(ChunkChainError::OnCpu { node, device }),
        };
        let chunk = p.chunk(v);
        if chunk >= chunks {
            return Err(ChunkChainError::ChunkOutOfRange {
                node,
                device,
                chunk,
                chunks,
            });
        }
        stage.push(chunk * devices + d);
    }
    let at = |v: usize| {
        format!(
            "{} chunk {}, stage {}",
            p.assignment[v],
            p.chunk(v),
            stage[v]
        )
    };
    let (class, classes) = class_index(w);
    let mut first: Vec<Option<usize>> = vec![None; classes];
    for v in 0..w.len() {
        match first[class[v]] {
            Some(u) if stage[u] != stage[v] => {
                return Err(ChunkChainError::ClassSplit {
                    a: w.node(u).id,
                    b: w.node(v).id,
                    a_at: at(u),
                    b_at: at(v),
                })
            }
            Some(_) => {}
            None => first[class[v]] = Some(v),
        }
    }
    let mut has_forward = vec![false; classes];
    for (v, node) in w.nodes().iter().enumerate() {
        if !node.is_backward {
            has_forward[class[v]] = true;
        }
    }
    for e in w.edges() {
        let (a, b) = (class[e.from], class[e.to]);
        if a == b {
            continue;
        }
        let (fu, fv) = (!w.node(e.from).is_backward, !w.node(e.to).is_backward);
        // The class graph's arcs (crate::model::contraction::class_graph), node by node.
        let (x, y) = if fu && fv {
            (e.from, e.to)
        } else if !fu && !fv && (!has_forward[a] || !has_forward[b]) {
            (e.to, e.from)
        } else {
            continue;
        };
        if stage[x] > stage[y] {
            return Err(ChunkChainError::Backwards {
                from: w.node(x).id,
                to: w.node(y).id,
                from_at: at(x),
                to_at: at(y),
            });
        }
    }
    Ok(stage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DeviceSet, Node};

    fn chain(n: usize, cpus: usize) -> Workload {
        graph(n, (1..n as i64).map(|i| (i - 1, i)).collect(), cpus)
    }

    fn graph(n: usize, arcs: Vec<(i64, i64)>, cpus: usize) -> Workload {
        let node = |id: i64| Node {
            id,
            name: None,
            fpga_latency: 1.0,
            cpu_latency: 2.0,
            size_bytes: 1.0,
            supported_on_accelerator: true,
            is_backward: false,
            color_class: None,
            layer_id: None,
            module: None,
            memory: None,
        };
        let nodes = (0..n as i64).map(node).collect();
        let edges = arcs.into_iter().map(|(u, v)| (u, v, 1.0, 0.0)).collect();
        let devices = DeviceSet {
            accelerators: 2,
            memory_per_accelerator_bytes: 1e12,
            cpus,
        };
        Workload::new(nodes, edges, devices).unwrap()
    }

    /// Every node of a 30,000-node chain on its own CPU (the latency IP's all-on-CPU plan
    /// on a large graph): a chain of 30,000 devices, checked on a 256 KiB stack (the
    /// recursive search overflowed a 2 MiB one on a 20k GPT).
    #[test]
    fn a_chain_of_thirty_thousand_devices_is_checked_on_a_small_stack() {
        let n = 30_000;
        let w = chain(n, n);
        let p = Placement::new((0..n).map(Device::Cpu).collect());
        let found = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || contiguity_violations(&w, &p))
            .unwrap()
            .join()
            .unwrap();
        assert!(found.is_empty(), "{found:?}");
    }

    /// Two devices feeding each other (0 → 1 from acc0 to acc1, 2 → 3 from acc1 to acc0,
    /// no path between the two arcs): each set is contiguous, the devices form a cycle.
    #[test]
    fn devices_that_feed_each_other_are_a_violation() {
        let w = graph(4, vec![(0, 1), (2, 3)], 1);
        let (a, b) = (Device::Accelerator(0), Device::Accelerator(1));
        let found = contiguity_violations(&w, &Placement::new(vec![a, b, b, a]));
        assert!(
            found.iter().any(|v| matches!(
                v,
                Violation::NotContiguous { witness, .. } if witness.contains("node 2 -> node 3")
            )),
            "{found:?}"
        );
        let ordered = Placement::new(vec![a, b, a, b]);
        assert!(contiguity_violations(&w, &ordered).is_empty());
    }
}

//! Single-sample latency (MODEL.md, "Latency").
//!
//! Each accelerator's nodes are cut into *pieces* (calls), which run on it in order. A
//! plan may give the cut ([`Placement::pieces`]: a rank per node; the pieces of one
//! accelerator run in increasing rank). Otherwise the scorer cuts greedily: walking all
//! nodes in topological order, a node joins the open piece of its accelerator unless one
//! of its inputs from outside that piece depends (through edges, pieces and earlier pieces
//! of the same accelerator) on the piece itself — then it opens a new piece. A contiguous
//! set with no circular dependency on other devices stays one piece.
//!
//! The *items* are the pieces and the CPU nodes; item `a` waits for item `b` when an edge
//! goes from `b` into `a` or `b` is the piece before `a` on its accelerator. A given cut
//! whose items wait on each other in a cycle deadlocks (it is reported, and its latency is
//! infinite). An acyclic cut has contiguous pieces: a path leaving a piece and re-entering
//! it would be a cycle of items.
//!
//! A piece `P` starts when every input from outside `P` is ready and the previous piece
//! of its accelerator has finished; it takes
//! `Σ_{v∈P} fpgaLatency(v) + Σ_{u∈In(P)} c(u) + Σ_{u∈Out(P)} c(u)`, and all its nodes finish
//! at its end. A CPU node starts when its predecessors have finished and takes its
//! `cpuLatency` (CPU cores are as many as needed). Latency = the latest finish.
//!
//! **Pipelines cut in linear time.** When the graph of devices (an arc `d → d'` for every
//! edge between a node on `d` and a node on `d' ≠ d`, each accelerator and each CPU core a
//! vertex) is acyclic, the greedy cut is one piece per accelerator, so it is built directly.
//! Proof: while every accelerator holds one piece, an outside input `u` of `v` (on `d`)
//! lies on another device (every earlier node of `d` is in `d`'s piece); `u` depending on
//! that piece would be a walk of edges `d ⇝ dev(u) → d` leaving `d`, a cycle of devices.
//! Every inference plan of a contiguous method is such a pipeline; training plans are not
//! (their backward edges run back through the devices).
//!
//! Complexity: O(n + m) for a pipeline, a given cut and the evaluation; the greedy cut
//! otherwise costs one dependency search, O(n + m), per node with an outside input
//! ([`greedy_cut_steps`] estimates it), O(n · (n + m)) in the worst case.

use crate::model::{Device, Placement, Workload};

/// The latency of a placement and how it was cut.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyScore {
    /// The latest finishing time of any node.
    pub total: f64,
    /// Number of pieces on each accelerator index that holds nodes (`(index, pieces)`).
    pub pieces: Vec<(usize, usize)>,
    /// Finishing time of every node (infinite for nodes caught in a deadlock).
    pub finish: Vec<f64>,
    /// The rank (0, 1, …) of each accelerator node's piece on its accelerator; `None` for
    /// CPU nodes. Given to the scorer as [`Placement::pieces`], it reproduces this score.
    pub piece_rank: Vec<Option<usize>>,
    /// For a given cut whose calls wait on each other in a cycle: which ones.
    pub deadlock: Option<String>,
    /// The calls (pieces), by accelerator and rank.
    pub calls: Vec<Call>,
}

/// One call: a piece of an accelerator and when it runs.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub accelerator: usize,
    /// Its place in the accelerator's sequence of calls (0 first).
    pub rank: usize,
    /// Node indices.
    pub nodes: Vec<usize>,
    pub start: f64,
    pub duration: f64,
}

impl LatencyScore {
    /// The cut as [`Placement::pieces`] (rank 0 for CPU nodes): given back to the scorer,
    /// it reproduces this score.
    pub fn ranks(&self) -> Vec<usize> {
        self.piece_rank.iter().map(|r| r.unwrap_or(0)).collect()
    }

    /// `p` with this cut when it has none of its own, so that a latency plan says which
    /// calls run in which order; `p` unchanged when it names its pieces.
    pub fn attach_cut(&self, p: Placement) -> Placement {
        match p.pieces {
            Some(_) => p,
            None => p.with_pieces(self.ranks()),
        }
    }

    /// The largest number of pieces on one accelerator (0 if none is used).
    pub fn max_pieces(&self) -> usize {
        self.pieces.iter().map(|&(_, p)| p).max().unwrap_or(0)
    }
}

struct Piece {
    accelerator: usize,
    nodes: Vec<usize>,
    previous: Option<usize>,
}

/// A cut: the pieces, and the piece of every accelerator node.
struct Cut {
    pieces: Vec<Piece>,
    piece_of: Vec<Option<usize>>,
}

#[derive(Clone, Copy, PartialEq)]
enum Item {
    Node(usize),
    Piece(usize),
}

/// Evaluates the latency of `p`, with its own cut if it has one, else with the greedy cut.
pub fn latency(w: &Workload, p: &Placement) -> LatencyScore {
    let cut = match &p.pieces {
        Some(ranks) => given_cut(p, ranks),
        None if devices_form_a_pipeline(w, p) => pipeline_cut(w, p),
        None => greedy_cut(w, p),
    };
    evaluate_cut(w, &cut)
}

/// An upper bound on the elementary steps [`latency`] takes on `p`: n + m for a given cut
/// or a pipeline, else (n + m) per accelerator node with an input (at most one dependency
/// search each, O(n + m)). Computed in O(n + m).
pub fn greedy_cut_steps(w: &Workload, p: &Placement) -> f64 {
    let size = (w.len() + w.edges().len()) as f64;
    if p.pieces.is_some() || devices_form_a_pipeline(w, p) {
        return size;
    }
    let searches = (0..w.len())
        .filter(|&v| p.assignment[v].is_accelerator() && !w.predecessors(v).is_empty())
        .count();
    size * (1 + searches) as f64
}

/// Whether the device graph of `p` (module documentation) is acyclic. O(n + m).
fn devices_form_a_pipeline(w: &Workload, p: &Placement) -> bool {
    let mut devices: Vec<Device> = p.assignment.clone();
    devices.sort_unstable();
    devices.dedup();
    let index = |d: Device| devices.binary_search(&d).expect("listed");
    let mut arcs: Vec<(usize, usize)> = w
        .edges()
        .iter()
        .map(|e| (p.assignment[e.from], p.assignment[e.to]))
        .filter(|(a, b)| a != b)
        .map(|(a, b)| (index(a), index(b)))
        .collect();
    arcs.sort_unstable();
    arcs.dedup();
    let mut indegree = vec![0usize; devices.len()];
    for &(_, b) in &arcs {
        indegree[b] += 1;
    }
    let mut ready: Vec<usize> = (0..devices.len()).filter(|&d| indegree[d] == 0).collect();
    let mut seen = 0;
    while let Some(d) = ready.pop() {
        seen += 1;
        let from = arcs.partition_point(|&(a, _)| a < d);
        for &(_, b) in arcs[from..].iter().take_while(|&&(a, _)| a == d) {
            indegree[b] -= 1;
            if indegree[b] == 0 {
                ready.push(b);
            }
        }
    }
    seen == devices.len()
}

/// One piece per accelerator, nodes in topological order: the greedy cut of a pipeline.
fn pipeline_cut(w: &Workload, p: &Placement) -> Cut {
    let mut piece_of: Vec<Option<usize>> = vec![None; w.len()];
    let mut pieces: Vec<Piece> = Vec::new();
    let mut open: std::collections::HashMap<usize, usize> = Default::default();
    for &v in w.topological_order() {
        let Device::Accelerator(acc) = p.assignment[v] else {
            continue;
        };
        let id = *open.entry(acc).or_insert_with(|| {
            pieces.push(Piece {
                accelerator: acc,
                nodes: Vec::new(),
                previous: None,
            });
            pieces.len() - 1
        });
        pieces[id].nodes.push(v);
        piece_of[v] = Some(id);
    }
    Cut { pieces, piece_of }
}

/// The pieces a plan names: nodes of one accelerator with one rank form one piece.
fn given_cut(p: &Placement, ranks: &[usize]) -> Cut {
    let mut by_piece: std::collections::BTreeMap<(usize, usize), Vec<usize>> = Default::default();
    for (v, d) in p.assignment.iter().enumerate() {
        if let Device::Accelerator(acc) = *d {
            by_piece
                .entry((acc, ranks.get(v).copied().unwrap_or(0)))
                .or_default()
                .push(v);
        }
    }
    let mut cut = Cut {
        pieces: Vec::with_capacity(by_piece.len()),
        piece_of: vec![None; p.assignment.len()],
    };
    let mut last: Option<usize> = None;
    for ((acc, _), nodes) in by_piece {
        let id = cut.pieces.len();
        for &v in &nodes {
            cut.piece_of[v] = Some(id);
        }
        let previous = last.filter(|&q| cut.pieces[q].accelerator == acc);
        cut.pieces.push(Piece {
            accelerator: acc,
            nodes,
            previous,
        });
        last = Some(id);
    }
    cut
}

/// The greedy cut (module doc).
fn greedy_cut(w: &Workload, p: &Placement) -> Cut {
    let n = w.len();
    let mut piece_of: Vec<Option<usize>> = vec![None; n];
    let mut pieces: Vec<Piece> = Vec::new();
    let mut open: std::collections::HashMap<usize, usize> = Default::default();
    let mut stamp = vec![0u32; n];
    let mut piece_stamp: Vec<u32> = Vec::new();
    let mut round = 0u32;

    let item_of =
        |v: usize, piece_of: &[Option<usize>]| piece_of[v].map_or(Item::Node(v), Item::Piece);

    for &v in w.topological_order() {
        let Device::Accelerator(acc) = p.assignment[v] else {
            continue;
        };
        let mut joined = false;
        if let Some(&current) = open.get(&acc) {
            // Does any outside input of v depend on `current`?
            round += 1;
            piece_stamp.resize(pieces.len(), 0);
            let mut stack: Vec<Item> = w
                .predecessors(v)
                .iter()
                .filter(|&&u| piece_of[u] != Some(current))
                .map(|&u| item_of(u, &piece_of))
                .collect();
            let mut cyclic = false;
            while let Some(item) = stack.pop() {
                match item {
                    Item::Piece(q) => {
                        if q == current {
                            cyclic = true;
                            break;
                        }
                        if piece_stamp[q] == round {
                            continue;
                        }
                        piece_stamp[q] = round;
                        if let Some(prev) = pieces[q].previous {
                            stack.push(Item::Piece(prev));
                        }
                        for &x in &pieces[q].nodes {
                            for &u in w.predecessors(x) {
                                if piece_of[u] != Some(q) {
                                    stack.push(item_of(u, &piece_of));
                                }
                            }
                        }
                    }
                    Item::Node(x) => {
                        if stamp[x] == round {
                            continue;
                        }
                        stamp[x] = round;
                        for &u in w.predecessors(x) {
                            stack.push(item_of(u, &piece_of));
                        }
                    }
                }
            }
            if !cyclic {
                pieces[current].nodes.push(v);
                piece_of[v] = Some(current);
                joined = true;
            }
        }
        if !joined {
            let id = pieces.len();
            pieces.push(Piece {
                accelerator: acc,
                nodes: vec![v],
                previous: open.get(&acc).copied(),
            });
            open.insert(acc, id);
            piece_of[v] = Some(id);
        }
    }

    Cut { pieces, piece_of }
}

/// The cycle of `stuck` items (pieces `0..pieces`, then CPU nodes) that deadlocks `cut`,
/// as the user reads it: the first four, each call with its first six nodes.
fn describe_deadlock(w: &Workload, cut: &Cut, stuck: &[usize]) -> String {
    let n_pieces = cut.pieces.len();
    let describe = |i: usize| {
        if i < n_pieces {
            let piece = &cut.pieces[i];
            let ids: Vec<String> = piece
                .nodes
                .iter()
                .take(6)
                .map(|&v| w.node(v).id.to_string())
                .collect();
            let more = if piece.nodes.len() > 6 { ", …" } else { "" };
            format!(
                "a call on accelerator {} (nodes {}{more})",
                piece.accelerator,
                ids.join(", ")
            )
        } else {
            format!("CPU node {}", w.node(i - n_pieces).id)
        }
    };
    let shown: Vec<String> = stuck.iter().take(4).map(|&i| describe(i)).collect();
    let more = if stuck.len() > 4 {
        format!(" and {} more", stuck.len() - 4)
    } else {
        String::new()
    };
    format!(
        "calls wait on each other in a cycle: {}{more}",
        shown.join("; ")
    )
}

/// Longest path over the items of `cut` (Kahn's order); a cycle of items is a deadlock.
fn evaluate_cut(w: &Workload, cut: &Cut) -> LatencyScore {
    let n = w.len();
    let n_pieces = cut.pieces.len();
    // Items 0..n_pieces are the pieces, n_pieces + v the CPU node v.
    let item = |v: usize| cut.piece_of[v].unwrap_or(n_pieces + v);
    let live = |i: usize| i < n_pieces || cut.piece_of[i - n_pieces].is_none();
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); n_pieces + n];
    let mut waiting = vec![0usize; n_pieces + n];
    let mut duration = vec![0.0f64; n_pieces + n];
    for (q, piece) in cut.pieces.iter().enumerate() {
        if let Some(prev) = piece.previous {
            next[prev].push(q);
            waiting[q] += 1;
        }
        let mut inputs: Vec<usize> = Vec::new();
        let mut t = 0.0;
        for &v in &piece.nodes {
            t += w.node(v).fpga_latency;
            if w.successors(v).iter().any(|&x| cut.piece_of[x] != Some(q)) {
                t += w.out_cost(v);
            }
            inputs.extend(
                w.predecessors(v)
                    .iter()
                    .copied()
                    .filter(|&u| cut.piece_of[u] != Some(q)),
            );
        }
        inputs.sort_unstable();
        inputs.dedup();
        duration[q] = t + inputs.iter().map(|&u| w.out_cost(u)).sum::<f64>();
    }
    for v in 0..n {
        let iv = item(v);
        if iv >= n_pieces {
            duration[iv] = w.node(v).cpu_latency;
        }
        for &u in w.predecessors(v) {
            let iu = item(u);
            if iu != iv {
                next[iu].push(iv);
                waiting[iv] += 1;
            }
        }
    }
    let mut ready = vec![0.0f64; n_pieces + n];
    let mut item_finish = vec![f64::INFINITY; n_pieces + n];
    let mut queue: Vec<usize> = (0..n_pieces + n)
        .filter(|&i| live(i) && waiting[i] == 0)
        .collect();
    while let Some(i) = queue.pop() {
        let f = ready[i] + duration[i];
        item_finish[i] = f;
        for &j in &next[i] {
            ready[j] = ready[j].max(f);
            waiting[j] -= 1;
            if waiting[j] == 0 {
                queue.push(j);
            }
        }
    }
    let finish: Vec<f64> = (0..n).map(|v| item_finish[item(v)]).collect();
    let stuck: Vec<usize> = (0..n_pieces + n)
        .filter(|&i| live(i) && waiting[i] > 0)
        .collect();
    let deadlock = (!stuck.is_empty()).then(|| describe_deadlock(w, cut, &stuck));
    let total = if deadlock.is_some() {
        f64::INFINITY
    } else {
        finish.iter().copied().fold(0.0, f64::max)
    };
    // Counts and ranks per accelerator; both cuts create an accelerator's pieces in call order.
    let mut counts: std::collections::BTreeMap<usize, usize> = Default::default();
    let rank_of_piece: Vec<usize> = cut
        .pieces
        .iter()
        .map(|piece| {
            let c = counts.entry(piece.accelerator).or_insert(0);
            *c += 1;
            *c - 1
        })
        .collect();
    let piece_rank = cut
        .piece_of
        .iter()
        .map(|q| q.map(|q| rank_of_piece[q]))
        .collect();
    let mut calls: Vec<Call> = cut
        .pieces
        .iter()
        .enumerate()
        .map(|(q, piece)| Call {
            accelerator: piece.accelerator,
            rank: rank_of_piece[q],
            nodes: piece.nodes.clone(),
            start: if item_finish[q].is_finite() {
                ready[q]
            } else {
                f64::INFINITY
            },
            duration: duration[q],
        })
        .collect();
    calls.sort_by_key(|c| (c.accelerator, c.rank));
    LatencyScore {
        total,
        pieces: counts.into_iter().collect(),
        finish,
        piece_rank,
        deadlock,
        calls,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DeviceSet, Node};

    /// Random DAGs (edges `i → j` for `i < j`) and random placements: wherever the devices
    /// form a pipeline, the direct cut is exactly the greedy one.
    #[test]
    fn a_pipeline_is_cut_exactly_as_the_greedy_cut_does() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let (mut pipelines, mut others) = (0, 0);
        for _ in 0..3000 {
            let n = 1 + next(10) as usize;
            let nodes: Vec<Node> = (0..n)
                .map(|i| Node {
                    id: i as i64,
                    name: None,
                    fpga_latency: next(5) as f64,
                    cpu_latency: next(9) as f64,
                    size_bytes: 0.0,
                    supported_on_accelerator: true,
                    is_backward: false,
                    color_class: None,
                    layer_id: None,
                    module: None,
                    memory: None,
                })
                .collect();
            let cost: Vec<f64> = (0..n).map(|_| next(3) as f64).collect();
            let mut edges = Vec::new();
            for (i, &c) in cost.iter().enumerate() {
                for j in i + 1..n {
                    if next(3) == 0 {
                        edges.push((i as i64, j as i64, c, 0.0));
                    }
                }
            }
            let devices = DeviceSet {
                accelerators: 3,
                memory_per_accelerator_bytes: 1.0,
                cpus: 2,
            };
            let w = Workload::new(nodes, edges, devices).expect("a valid DAG");
            let assignment: Vec<Device> = (0..n)
                .map(|_| {
                    if next(4) == 0 {
                        Device::Cpu(next(2) as usize)
                    } else {
                        Device::Accelerator(next(3) as usize)
                    }
                })
                .collect();
            let p = Placement::new(assignment);
            let greedy = evaluate_cut(&w, &greedy_cut(&w, &p));
            if devices_form_a_pipeline(&w, &p) {
                pipelines += 1;
                assert_eq!(evaluate_cut(&w, &pipeline_cut(&w, &p)), greedy, "{p:?}");
                assert_eq!(
                    greedy.max_pieces(),
                    usize::from(p.assignment.iter().any(|d| d.is_accelerator()))
                );
            } else {
                others += 1;
            }
            assert_eq!(latency(&w, &p), greedy);
        }
        assert!(
            pipelines > 300 && others > 300,
            "{pipelines} pipelines, {others} others"
        );
    }
}

//! Single-sample latency (MODEL.md, "Latency").
//!
//! Each accelerator's nodes are cut into *pieces*: walking all nodes in topological order,
//! a node joins the open piece of its accelerator unless one of its inputs from outside
//! that piece depends (through edges, pieces and earlier pieces of the same accelerator)
//! on the piece itself — then it opens a new piece. A contiguous set with no circular
//! dependency on other devices stays one piece.
//!
//! A piece `P` starts when every input from outside `P` is ready and the previous piece
//! of its accelerator has finished; it takes
//! `Σ_{v∈P} fpgaLatency(v) + Σ_{u∈In(P)} c(u) + Σ_{u∈Out(P)} c(u)`, and all its nodes finish
//! at its end. A CPU node starts when its predecessors have finished and takes its
//! `cpuLatency` (CPU cores are as many as needed). Latency = the latest finish.
//!
//! Complexity: O(n · (n + m)) in the worst case (one dependency search per node with an
//! outside input), O(n + m) for the evaluation itself.

use crate::model::{Device, Placement, Workload};

/// The latency of a placement and how it was cut.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyScore {
    /// The latest finishing time of any node.
    pub total: f64,
    /// Number of pieces on each accelerator index that holds nodes (`(index, pieces)`).
    pub pieces: Vec<(usize, usize)>,
    /// Finishing time of every node.
    pub finish: Vec<f64>,
}

impl LatencyScore {
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

#[derive(Clone, Copy, PartialEq)]
enum Item {
    Node(usize),
    Piece(usize),
}

/// Cuts the accelerator sets into pieces and evaluates the latency.
pub fn latency(w: &Workload, p: &Placement) -> LatencyScore {
    let n = w.len();
    let mut piece_of: Vec<Option<usize>> = vec![None; n];
    let mut pieces: Vec<Piece> = Vec::new();
    let mut open: std::collections::HashMap<usize, usize> = Default::default();
    let mut stamp = vec![0u32; n];
    let mut piece_stamp: Vec<u32> = Vec::new();
    let mut round = 0u32;

    let item_of = |v: usize, piece_of: &[Option<usize>]| piece_of[v].map_or(Item::Node(v), Item::Piece);

    for &v in w.topological_order() {
        let Device::Accelerator(acc) = p.assignment[v] else { continue };
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
            pieces.push(Piece { accelerator: acc, nodes: vec![v], previous: open.get(&acc).copied() });
            open.insert(acc, id);
            piece_of[v] = Some(id);
        }
    }

    // Durations of pieces.
    let duration: Vec<f64> = pieces
        .iter()
        .enumerate()
        .map(|(q, piece)| {
            let mut t: f64 = piece.nodes.iter().map(|&v| w.node(v).fpga_latency).sum();
            let mut inputs: Vec<usize> = Vec::new();
            for &v in &piece.nodes {
                if w.successors(v).iter().any(|&x| piece_of[x] != Some(q)) {
                    t += w.out_cost(v);
                }
                inputs.extend(w.predecessors(v).iter().copied().filter(|&u| piece_of[u] != Some(q)));
            }
            inputs.sort_unstable();
            inputs.dedup();
            t + inputs.iter().map(|&u| w.out_cost(u)).sum::<f64>()
        })
        .collect();

    // Evaluate items in dependency order (memoised depth-first search).
    let mut piece_finish: Vec<Option<f64>> = vec![None; pieces.len()];
    let mut node_finish: Vec<Option<f64>> = vec![None; n];
    let finish_of = |v: usize, node_finish: &[Option<f64>], piece_finish: &[Option<f64>]| match piece_of[v] {
        Some(q) => piece_finish[q],
        None => node_finish[v],
    };
    for &v in w.topological_order() {
        if finish_of(v, &node_finish, &piece_finish).is_some() {
            continue;
        }
        let mut stack = vec![item_of(v, &piece_of)];
        while let Some(&item) = stack.last() {
            let mut missing = Vec::new();
            let mut start: f64 = 0.0;
            let deps: Vec<usize> = match item {
                Item::Node(x) => w.predecessors(x).to_vec(),
                Item::Piece(q) => pieces[q]
                    .nodes
                    .iter()
                    .flat_map(|&x| w.predecessors(x).iter().copied())
                    .filter(|&u| piece_of[u] != Some(q))
                    .collect(),
            };
            for u in deps {
                match finish_of(u, &node_finish, &piece_finish) {
                    Some(f) => start = start.max(f),
                    None => missing.push(item_of(u, &piece_of)),
                }
            }
            if let Item::Piece(q) = item {
                if let Some(prev) = pieces[q].previous {
                    match piece_finish[prev] {
                        Some(f) => start = start.max(f),
                        None => missing.push(Item::Piece(prev)),
                    }
                }
            }
            if missing.is_empty() {
                stack.pop();
                match item {
                    Item::Node(x) => node_finish[x] = Some(start + w.node(x).cpu_latency),
                    Item::Piece(q) => piece_finish[q] = Some(start + duration[q]),
                }
            } else {
                stack.extend(missing);
            }
        }
    }
    let finish: Vec<f64> =
        (0..n).map(|v| finish_of(v, &node_finish, &piece_finish).expect("every node evaluated")).collect();
    let total = finish.iter().copied().fold(0.0, f64::max);
    let mut counts: std::collections::BTreeMap<usize, usize> = Default::default();
    for piece in &pieces {
        *counts.entry(piece.accelerator).or_insert(0) += 1;
    }
    LatencyScore { total, pieces: counts.into_iter().collect(), finish }
}

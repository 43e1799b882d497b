//! A plan cut into *pieces*: the units that run as one task per micro-batch.
//!
//! **Units.** A unit is the set of nodes of one device and one pass, `U(d, π) =
//! {v : device(v) = d, pass(v) = π}` (π ∈ {forward, backward}). The unit graph has an arc
//! `U → U'` for every edge between them. A contiguous plan's forward units are acyclic
//! (its devices form a chain of ideals); a non-contiguous plan, or a backward graph that
//! does not mirror the forward one, may put units on a cycle, and a unit on a cycle cannot
//! run as one task (it would wait for itself).
//!
//! **Cut.** Units outside every cycle of the unit graph (trivial strongly connected
//! components) are one piece each. Within a non-trivial component `C`, every node gets a
//! level, in a topological order of the nodes:
//! `ℓ(v) = max_{u → v, unit(u) ∈ C} ℓ(u) + [unit(u) ≠ unit(v)]` (0 without such `u`),
//! and the piece of `v` is `(unit(v), ℓ(v))`. Every arc between two pieces goes to a larger
//! level, or leaves `C` (and never comes back: components form a DAG), so the piece graph
//! is acyclic. Backward units never reach forward ones (no backward → forward edge), so a
//! component is all-forward or all-backward.
//!
//! **Positions** on the schedule's chain of `P` stages: a forward piece sits at its depth
//! `δ_F` (longest path from a source over forward piece arcs), a backward piece at
//! `P − 1 − δ_B` (`δ_B` the same over backward arcs), `P = max(max δ_F, max δ_B) + 1`.
//! On a chain of `p` devices whose backward mirrors the forward, device `s` gets position
//! `s` for both its pieces, as the textbook schedules assume. Every forward arc raises the
//! position, every backward arc lowers it: the monotonicities the schedule's timetable
//! needs (`crate::model::schedule`).
//!
//! **Communication** (MODEL.md: `c(u)` is paid by the accelerator that sends `u`'s output
//! and by every accelerator that receives it, never overlapped with compute). A piece's
//! task is *receive, compute, send* on its device: the piece holding `u` pays `c(u)` in its
//! send when `u` has a successor on another device; each other accelerator receiving `u`
//! pays `c(u)` once, in the first of its pieces (in the order its tasks of one micro-batch
//! run) that holds a successor of `u` — later pieces on that device run after it. CPUs pay
//! nothing. So each device's tasks of one micro-batch take exactly its MODEL.md load, and
//! a transfer is store-and-forward through host memory: the receiver's task starts after
//! the sender's has ended.
//!
//! **Stash.** A node's stash (activations kept per micro-batch in flight; the cost models
//! put them on backward nodes, `crate::model::schedule::held_bytes`) is held by a forward
//! piece on the node's device: its own piece for a forward node; for a backward node, the
//! first (in the order of one micro-batch) forward piece on its device that it *mirrors*
//! (shares a colour class with, or reads an output of). The holder keeps it from the start
//! of its task until every backward piece on its device that mirrors it has ended for that
//! micro-batch. A forward piece nothing mirrors (inference) frees it when its own task
//! ends; a backward node with no forward piece to mirror holds it during its own task.
//!
//! **Recomputation** ([`crate::model::recompute`]). On an accelerator that the plan marks as
//! recomputing, each forward piece's stash becomes *transient*: the first backward piece
//! (in the order of one micro-batch) that frees it runs that forward piece's compute again
//! at the start of its task (`recompute_ms`) and holds the stash only during its own task
//! (`transient_bytes`); between the passes the device holds only its input `In(d)`, put on
//! its first forward piece. On a contiguous plan (one forward and one backward piece per
//! device) the peak is then `resident + A + c·In`, the scorer's figure. A forward piece
//! that no backward piece frees (inference) runs its compute again in its own task.
//! With explicit chunks (below) each chunk recomputes on its own: chunk c's input `i_c`
//! (`crate::model::recompute::chunk_inputs`) is put on its first forward piece, so the
//! device's peak is the scorer's `mem_r(d)` under the interleaved schedule.
//!
//! **Explicit chunks** ([`cut_chunks`]). A plan made for the interleaved schedule says
//! which chunk of its accelerator each node is in ([`Placement::chunk`]); its stages are
//! then given, not reconstructed: a unit is the nodes of one device, chunk and pass, and
//! chunk `c` of accelerator `d` of `p` sits at position `c·p + d` for both its passes
//! (`P = p·v`, empty chunks included), so that each device runs exactly the schedule's
//! order of its chunks and holds chunk c's stash from `F(i, c)` to `B(i, c)` (a backward
//! node's stash is held by a forward piece of its own chunk when it mirrors one, and a
//! forward piece's stash is freed by the backward pieces of its own chunk, at its own end
//! when the chunk has none), as
//! [`crate::model::schedule::peak_stash_bytes`] replays it. When the chunks form a chain of
//! ideals, forward arcs never go to a lower position; [`crate::simulate`] checks the
//! monotonicities the timetable needs before it uses them.
//!
//! Complexity: O((n + m_E) log n) for n nodes and m_E edges.

use std::collections::HashMap;

use crate::model::contraction::strongly_connected_components;
use crate::model::schedule::{HeldBytes, Pass};
use crate::model::{Device, Placement, Workload};

/// One piece: nodes of one device and pass that run as one task per micro-batch.
#[derive(Clone, Debug, PartialEq)]
pub struct Piece {
    pub device: Device,
    pub pass: Pass,
    /// Node indices.
    pub nodes: Vec<usize>,
    /// Stage on the schedule's chain.
    pub position: usize,
    /// Σ latency of its nodes on its device.
    pub compute_ms: f64,
    /// Σ c(u) over the inputs this piece receives for its device.
    pub receive_ms: f64,
    /// Σ c(u) over its nodes whose output leaves the device.
    pub send_ms: f64,
    /// Activations one micro-batch stashes that this piece holds (module doc), bytes.
    pub stash_bytes: f64,
    /// Forward compute this piece runs again before its own (recomputation, module doc).
    pub recompute_ms: f64,
    /// Bytes held only while its own task runs (a recomputed stash, module doc).
    pub transient_bytes: f64,
    /// Pieces it waits for (same micro-batch).
    pub preds: Vec<usize>,
    /// Pieces that wait for it.
    pub succs: Vec<usize>,
    /// Forward pieces: the backward pieces whose end frees the stash (empty: freed at the
    /// forward's own end).
    pub released_by: Vec<usize>,
    /// Runs once per iteration (a 3D layout's DP gradient sync, [`super::parallel`]): its
    /// task of the last micro-batch takes [`Piece::duration_ms`], the others take no time
    /// (they only wait for their predecessors). `false` on every piece of a placement.
    pub per_iteration: bool,
}

impl Piece {
    /// receive + recompute + compute + send.
    pub fn duration_ms(&self) -> f64 {
        self.receive_ms + self.recompute_ms + self.compute_ms + self.send_ms
    }
}

/// The pieces of a plan, in a topological order of their graph.
#[derive(Clone, Debug)]
pub struct Stages {
    pub pieces: Vec<Piece>,
    /// `P`: stages of the schedule's chain.
    pub positions: usize,
    /// Piece of every node.
    pub piece_of: Vec<usize>,
}

/// The pass node `v` belongs to.
fn pass_of(w: &Workload, v: usize) -> Pass {
    if w.node(v).is_backward {
        Pass::Backward
    } else {
        Pass::Forward
    }
}

/// The order in which one device runs its pieces' tasks of one micro-batch (module doc of
/// [`crate::model::schedule`]): forwards by rising position, then backwards by falling
/// position, ties by piece index.
pub fn rank_in_micro_batch(piece: &Piece, index: usize, positions: usize) -> (Pass, usize, usize) {
    let along = match piece.pass {
        Pass::Forward => piece.position,
        Pass::Backward => positions - 1 - piece.position,
    };
    (piece.pass, along, index)
}

/// An interleaved plan's explicit chain ([`cut_chunks`]): `devices` accelerators with
/// `chunks` chunks each, node v's chunk being [`Placement::chunk`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunks {
    pub devices: usize,
    pub chunks: usize,
}

/// Cuts `p` into pieces (module doc). `memory[v]` gives each node's stash.
pub fn cut(w: &Workload, p: &Placement, memory: &[HeldBytes]) -> Stages {
    cut_chunks(w, p, memory, None)
}

/// [`cut`]; with `chunks`, the plan's chunks are its stages (module doc, "Explicit
/// chunks"): a unit is the nodes of one device, chunk and pass, and chunk `c` of
/// accelerator `d` sits at position `c·p + d` for both passes, `P = p·v`. The caller
/// checks that the chunks form a chain of ideals
/// ([`crate::score::contiguity::interleaved_stages`]).
pub fn cut_chunks(
    w: &Workload,
    p: &Placement,
    memory: &[HeldBytes],
    chunks: Option<Chunks>,
) -> Stages {
    let n = w.len();
    let units = Units::new(w, p, chunks);
    let level = units.levels(w);
    let (raw, mut piece_of) = group_pieces(w, &units.unit, &level);
    let count = raw.len();
    let graph = PieceGraph::new(w, &piece_of, count);

    // Depths and positions.
    let passes: Vec<Pass> = raw.iter().map(|(u, _)| units.key[*u].2).collect();
    let mut depth = vec![0usize; count];
    for &x in &graph.order {
        depth[x] = graph.preds[x]
            .iter()
            .filter(|&&y| passes[y] == passes[x])
            .map(|&y| depth[y] + 1)
            .max()
            .unwrap_or(0);
    }
    let positions = match chunks {
        Some(c) => c.devices * c.chunks,
        None => depth.iter().copied().max().unwrap_or(0) + 1,
    };

    // Renumber pieces in topological order so that index order is a linear extension.
    let mut new_index = vec![0usize; count];
    for (i, &x) in graph.order.iter().enumerate() {
        new_index[x] = i;
    }
    let mut pieces: Vec<Piece> = graph
        .order
        .iter()
        .map(|&x| {
            let (u, ref nodes) = raw[x];
            let (device, chunk, pass) = units.key[u];
            let position = match (chunks, device, pass) {
                (Some(c), Device::Accelerator(d), _) => chunk * c.devices + d,
                (_, _, Pass::Forward) => depth[x],
                (_, _, Pass::Backward) => positions - 1 - depth[x],
            };
            let latency = |v: usize| {
                if device.is_accelerator() {
                    w.node(v).fpga_latency
                } else {
                    w.node(v).cpu_latency
                }
            };
            Piece {
                device,
                pass,
                nodes: nodes.clone(),
                position,
                compute_ms: nodes.iter().map(|&v| latency(v)).sum(),
                receive_ms: 0.0,
                send_ms: 0.0,
                stash_bytes: 0.0,
                recompute_ms: 0.0,
                transient_bytes: 0.0,
                preds: graph.preds[x].iter().map(|&y| new_index[y]).collect(),
                succs: graph.succs[x].iter().map(|&y| new_index[y]).collect(),
                released_by: Vec::new(),
                per_iteration: false,
            }
        })
        .collect();
    for v in 0..n {
        piece_of[v] = new_index[piece_of[v]];
    }
    for piece in &mut pieces {
        piece.preds.sort_unstable();
        piece.succs.sort_unstable();
    }

    charge_communication(w, p, &piece_of, &mut pieces, positions);
    attach_stash_releases(w, &piece_of, &mut pieces, chunks.is_some());
    attribute_stashes(memory, &piece_of, &mut pieces, positions, chunks.is_some());
    if !p.recompute.is_empty() {
        recompute_stashes(w, p, &mut pieces, positions, chunks);
    }
    Stages {
        pieces,
        positions,
        piece_of,
    }
}

/// The units of a plan (module doc): the nodes of one device, chunk and pass.
struct Units {
    /// Unit of every node.
    unit: Vec<usize>,
    /// (device, chunk, pass) of every unit, in order of first appearance.
    key: Vec<(Device, usize, Pass)>,
}

impl Units {
    /// Numbers the units by their first node; the chunk is 0 without explicit `chunks`.
    fn new(w: &Workload, p: &Placement, chunks: Option<Chunks>) -> Units {
        let mut unit_index: HashMap<(Device, usize, Pass), usize> = HashMap::new();
        let mut unit_key: Vec<(Device, usize, Pass)> = Vec::new();
        let chunk_of = |v: usize| if chunks.is_some() { p.chunk(v) } else { 0 };
        let unit: Vec<usize> = (0..w.len())
            .map(|v| {
                let key = (p.assignment[v], chunk_of(v), pass_of(w, v));
                *unit_index.entry(key).or_insert_with(|| {
                    unit_key.push(key);
                    unit_key.len() - 1
                })
            })
            .collect();
        Units {
            unit,
            key: unit_key,
        }
    }

    /// Every node's level (module doc, "Cut"): 0 outside the cycles of the unit graph,
    /// else `ℓ(v) = max over predecessors u in v's component of ℓ(u) + [unit(u) ≠ unit(v)]`.
    fn levels(&self, w: &Workload) -> Vec<usize> {
        let unit = &self.unit;
        let mut unit_succ = vec![Vec::new(); self.key.len()];
        for e in w.edges() {
            let (a, b) = (unit[e.from], unit[e.to]);
            if a != b {
                unit_succ[a].push(b);
            }
        }
        for list in &mut unit_succ {
            list.sort_unstable();
            list.dedup();
        }
        let component = strongly_connected_components(&unit_succ);
        let mut component_size: HashMap<usize, usize> = HashMap::new();
        for &c in &component {
            *component_size.entry(c).or_insert(0) += 1;
        }
        let on_cycle = |u: usize| component_size[&component[u]] > 1;

        let mut level = vec![0usize; w.len()];
        for &v in w.topological_order() {
            let uv = unit[v];
            if !on_cycle(uv) {
                continue;
            }
            level[v] = w
                .predecessors(v)
                .iter()
                .filter(|&&u| component[unit[u]] == component[uv])
                .map(|&u| level[u] + usize::from(unit[u] != uv))
                .max()
                .unwrap_or(0);
        }
        level
    }
}

/// The pieces `(unit, level)` in order of first appearance along the topological order,
/// each with its unit and nodes, and the piece of every node.
fn group_pieces(
    w: &Workload,
    unit: &[usize],
    level: &[usize],
) -> (Vec<(usize, Vec<usize>)>, Vec<usize>) {
    let mut piece_index: HashMap<(usize, usize), usize> = HashMap::new();
    let mut raw: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut piece_of = vec![0usize; w.len()];
    for &v in w.topological_order() {
        let key = (unit[v], level[v]);
        let id = *piece_index.entry(key).or_insert_with(|| {
            raw.push((unit[v], Vec::new()));
            raw.len() - 1
        });
        raw[id].1.push(v);
        piece_of[v] = id;
    }
    (raw, piece_of)
}

/// The piece graph: arcs between the pieces of an edge's ends, and a topological order.
struct PieceGraph {
    succs: Vec<Vec<usize>>,
    preds: Vec<Vec<usize>>,
    /// Kahn's order, smallest ready index first.
    order: Vec<usize>,
}

impl PieceGraph {
    /// The graph of `count` pieces under `piece_of`, acyclic by construction (module doc).
    fn new(w: &Workload, piece_of: &[usize], count: usize) -> PieceGraph {
        let mut arcs: Vec<(usize, usize)> = w
            .edges()
            .iter()
            .map(|e| (piece_of[e.from], piece_of[e.to]))
            .filter(|(a, b)| a != b)
            .collect();
        arcs.sort_unstable();
        arcs.dedup();
        let mut succs = vec![Vec::new(); count];
        let mut preds = vec![Vec::new(); count];
        for &(a, b) in &arcs {
            succs[a].push(b);
            preds[b].push(a);
        }
        let mut indegree: Vec<usize> = preds.iter().map(Vec::len).collect();
        let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<usize>> = (0..count)
            .filter(|&x| indegree[x] == 0)
            .map(std::cmp::Reverse)
            .collect();
        let mut order = Vec::with_capacity(count);
        while let Some(std::cmp::Reverse(x)) = ready.pop() {
            order.push(x);
            for &y in &succs[x] {
                indegree[y] -= 1;
                if indegree[y] == 0 {
                    ready.push(std::cmp::Reverse(y));
                }
            }
        }
        assert_eq!(
            order.len(),
            count,
            "the piece graph is acyclic by construction (module doc)"
        );
        PieceGraph {
            succs,
            preds,
            order,
        }
    }
}

/// Moves the stashes of recomputing accelerators to their backward pieces (module doc,
/// "Recomputation"); with explicit `chunks`, each chunk's input `i_c` goes on the chunk's
/// first forward piece (held until the chunk's backward ends).
fn recompute_stashes(
    w: &Workload,
    p: &Placement,
    pieces: &mut [Piece],
    positions: usize,
    chunks: Option<Chunks>,
) {
    let inputs = crate::model::recompute::stage_inputs(w, p);
    let chunk_inputs = chunks.map(|_| crate::model::recompute::chunk_inputs(w, p));
    let rank = |pieces: &[Piece], x: usize| rank_in_micro_batch(&pieces[x], x, positions);
    for &d in p.recompute.iter().filter(|d| d.is_accelerator()) {
        let mut forward: Vec<usize> = (0..pieces.len())
            .filter(|&x| pieces[x].device == d && pieces[x].pass == Pass::Forward)
            .collect();
        forward.sort_by_key(|&x| rank(pieces, x));
        for &f in &forward {
            let (stash, compute) = (pieces[f].stash_bytes, pieces[f].compute_ms);
            let target = pieces[f]
                .released_by
                .iter()
                .copied()
                .min_by_key(|&b| rank(pieces, b))
                .unwrap_or(f);
            pieces[f].stash_bytes = 0.0;
            pieces[target].transient_bytes += stash;
            pieces[target].recompute_ms += compute;
        }
        match (chunks, &chunk_inputs) {
            (Some(c), Some(chunk_inputs)) => {
                let mut done: Vec<usize> = Vec::new();
                for &f in &forward {
                    let position = pieces[f].position;
                    if !done.contains(&position) {
                        done.push(position);
                        let key = (d, position / c.devices);
                        pieces[f].stash_bytes = chunk_inputs.get(&key).copied().unwrap_or(0.0);
                    }
                }
            }
            _ => {
                if let Some(&first) = forward.first() {
                    pieces[first].stash_bytes = inputs.get(&d).copied().unwrap_or(0.0);
                }
            }
        }
    }
}

/// Send and receive charges (module doc, "Communication").
fn charge_communication(
    w: &Workload,
    p: &Placement,
    piece_of: &[usize],
    pieces: &mut [Piece],
    positions: usize,
) {
    let mut first_receiver: Vec<(Device, usize)> = Vec::new();
    for u in 0..w.len() {
        let c = w.out_cost(u);
        if c == 0.0 {
            continue;
        }
        let du = p.assignment[u];
        first_receiver.clear();
        for &x in w.successors(u) {
            let dx = p.assignment[x];
            if dx == du {
                continue;
            }
            let px = piece_of[x];
            match first_receiver.iter_mut().find(|(d, _)| *d == dx) {
                Some(entry) => {
                    let earlier = |a: usize| rank_in_micro_batch(&pieces[a], a, positions);
                    if earlier(px) < earlier(entry.1) {
                        entry.1 = px;
                    }
                }
                None => first_receiver.push((dx, px)),
            }
        }
        if first_receiver.is_empty() {
            continue;
        }
        if du.is_accelerator() {
            pieces[piece_of[u]].send_ms += c;
        }
        for &(d, px) in &first_receiver {
            if d.is_accelerator() {
                pieces[px].receive_ms += c;
            }
        }
    }
}

/// Which backward pieces free each forward piece's stash (module doc, "Stash"); with
/// `own_chunk` (explicit chunks) only those of its own chunk: a chunk's stash lives from
/// its forward to its backward task (docs/schedule.md), and without a backward piece in
/// the chunk it is freed when its forward ends.
fn attach_stash_releases(w: &Workload, piece_of: &[usize], pieces: &mut [Piece], own_chunk: bool) {
    let mut by_class: HashMap<(Device, i64), Vec<usize>> = HashMap::new();
    for (b, piece) in pieces
        .iter()
        .enumerate()
        .filter(|(_, x)| x.pass == Pass::Backward)
    {
        for &v in &piece.nodes {
            if let Some(c) = w.node(v).color_class {
                by_class.entry((piece.device, c)).or_default().push(b);
            }
        }
    }
    let mut releases: Vec<Vec<usize>> = vec![Vec::new(); pieces.len()];
    for (f, piece) in pieces
        .iter()
        .enumerate()
        .filter(|(_, x)| x.pass == Pass::Forward)
    {
        for &v in &piece.nodes {
            if let Some(list) = w
                .node(v)
                .color_class
                .and_then(|c| by_class.get(&(piece.device, c)))
            {
                releases[f].extend(list);
            }
            for &x in w.successors(v) {
                let b = piece_of[x];
                if pieces[b].pass == Pass::Backward && pieces[b].device == piece.device {
                    releases[f].push(b);
                }
            }
        }
    }
    for (f, mut list) in releases.into_iter().enumerate() {
        list.sort_unstable();
        list.dedup();
        if own_chunk {
            let position = pieces[f].position;
            list.retain(|&b| pieces[b].position == position);
        }
        pieces[f].released_by = list;
    }
}

/// Puts every node's stash on its holder piece (module doc, "Stash"); with `own_chunk`
/// (explicit chunks) a backward node's holder is a forward piece of its own chunk when it
/// mirrors one, as the scorer counts a node's stash in its chunk.
fn attribute_stashes(
    memory: &[HeldBytes],
    piece_of: &[usize],
    pieces: &mut [Piece],
    positions: usize,
    own_chunk: bool,
) {
    let mut mirrored: Vec<Vec<usize>> = vec![Vec::new(); pieces.len()];
    for (f, piece) in pieces.iter().enumerate() {
        for &b in &piece.released_by {
            mirrored[b].push(f);
        }
    }
    for (v, held) in memory.iter().enumerate() {
        if held.stash_bytes == 0.0 {
            continue;
        }
        let own = piece_of[v];
        let holder = match pieces[own].pass {
            Pass::Forward => own,
            Pass::Backward => mirrored[own]
                .iter()
                .copied()
                .min_by_key(|&f| {
                    let other_chunk = own_chunk && pieces[f].position != pieces[own].position;
                    (other_chunk, rank_in_micro_batch(&pieces[f], f, positions))
                })
                .unwrap_or(own),
        };
        pieces[holder].stash_bytes += held.stash_bytes;
    }
}

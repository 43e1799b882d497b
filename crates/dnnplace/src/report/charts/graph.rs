//! The operator graph coloured by device, laid out in layers left to right
//! ([`super::layout`]), names on hover (`<title>`).
//!
//! A graph of at most `cap` nodes is drawn node by node. A larger one is collapsed into at
//! most `cap` blocks, each on one device and one pass: by `layerId` when every node has
//! one and that gives few enough blocks, otherwise by runs of the topological order (the
//! order cut into intervals of equal width, doubled until the blocks fit). A block's key is
//! its first topological position, an arc joins two blocks when an edge does, and the
//! chart says how it was collapsed. At most [`MAX_ARCS`] arcs are drawn (the longest
//! dropped first).
//!
//! Complexity: O((n + m) log n) to collapse, plus the layout's.

use std::collections::HashMap;

use svg::node::element::path::Data;
use svg::node::element::{Circle, Group, Path, Rectangle, Text, Title};
use svg::Document;

use super::layout::{layered, Layout};
use super::{bytes, device_colour, device_label, ms, round};
use crate::model::{Device, Placement, Workload};

/// Most arcs drawn.
pub const MAX_ARCS: usize = 6000;

/// The drawn graph and what was collapsed.
pub struct GraphView {
    pub document: Document,
    /// Vertices drawn (nodes or blocks).
    pub drawn: usize,
    /// How the graph was collapsed, for the page; `None` when every node is drawn.
    pub note: Option<String>,
}

struct Vertex {
    nodes: Vec<usize>,
    device: Device,
    backward: bool,
    key: usize,
}

/// Groups nodes by `label` (dense indices) into vertices.
fn collapse_by(
    w: &Workload,
    p: &Placement,
    position: &[usize],
    label: &[usize],
) -> (Vec<Vertex>, Vec<usize>) {
    let mut index: HashMap<usize, usize> = HashMap::new();
    let mut vertices: Vec<Vertex> = Vec::new();
    let mut vertex_of = vec![0usize; w.len()];
    for &v in w.topological_order() {
        let id = *index.entry(label[v]).or_insert_with(|| {
            vertices.push(Vertex {
                nodes: Vec::new(),
                device: p.assignment[v],
                backward: w.node(v).is_backward,
                key: position[v],
            });
            vertices.len() - 1
        });
        vertices[id].nodes.push(v);
        vertex_of[v] = id;
    }
    (vertices, vertex_of)
}

/// Dense labels for tuples.
fn dense<K: std::hash::Hash + Eq>(keys: impl Iterator<Item = K>) -> (Vec<usize>, usize) {
    let mut map: HashMap<K, usize> = HashMap::new();
    let labels: Vec<usize> = keys
        .map(|k| {
            let next = map.len();
            *map.entry(k).or_insert(next)
        })
        .collect();
    let count = map.len();
    (labels, count)
}

/// Draws `w` under `p` with at most `cap` vertices (module doc).
pub fn graph(w: &Workload, p: &Placement, cap: usize) -> GraphView {
    let n = w.len();
    let mut position = vec![0usize; n];
    for (i, &v) in w.topological_order().iter().enumerate() {
        position[v] = i;
    }
    let (labels, how) = block_labels(w, p, &position, cap);
    let (vertices, vertex_of) = collapse_by(w, p, &position, &labels);
    let mut arcs: Vec<(usize, usize)> = w
        .edges()
        .iter()
        .map(|e| (vertex_of[e.from], vertex_of[e.to]))
        .filter(|(a, b)| a != b)
        .collect();
    arcs.sort_unstable();
    arcs.dedup();
    let keys: Vec<usize> = vertices.iter().map(|x| x.key).collect();
    let geometry = Geometry::new(layered(vertices.len(), &arcs, &keys));

    let mut devices: Vec<Device> = vertices.iter().map(|x| x.device).collect();
    devices.sort();
    devices.dedup();
    let margin = geometry.margin;
    let width = geometry
        .width
        .max(300.0)
        .max(2.0 * margin + 80.0 * devices.len() as f64);
    let height = geometry.height;
    let document = Document::new()
        .set("id", "graph")
        .set("class", "chart")
        .set("viewBox", (0, 0, round(width), round(height)))
        .set("width", round(width))
        .set("height", round(height))
        .set("role", "img")
        .set("aria-label", "the operator graph coloured by device")
        .add(legend_row(&devices, margin))
        .add(arcs_group(&arcs, &geometry))
        .add(nodes_group(w, &vertices, &geometry));
    GraphView {
        document,
        drawn: vertices.len(),
        note: how,
    }
}

/// Each node's vertex label (dense), and the note saying how the graph was collapsed:
/// the nodes themselves when `n ≤ cap`, else blocks per `layerId`, device and pass when
/// every node has a `layerId` and they number at most `cap`, else runs of the topological
/// order per device and pass, the run width doubled until the blocks fit.
fn block_labels(
    w: &Workload,
    p: &Placement,
    position: &[usize],
    cap: usize,
) -> (Vec<usize>, Option<String>) {
    let n = w.len();
    let pass = |v: usize| w.node(v).is_backward;
    if n <= cap {
        return ((0..n).collect::<Vec<_>>(), None);
    }
    let by_layer = w
        .nodes()
        .iter()
        .all(|x| x.layer_id.is_some())
        .then(|| dense((0..n).map(|v| (w.node(v).layer_id, p.assignment[v], pass(v)))))
        .filter(|(_, count)| *count <= cap);
    match by_layer {
        Some((labels, count)) => (
            labels,
            Some(format!(
                "{n} nodes drawn as {count} blocks: one per layerId, device and pass"
            )),
        ),
        None => {
            let mut width = n.div_ceil(cap).max(1);
            loop {
                let (labels, count) =
                    dense((0..n).map(|v| (position[v] / width, p.assignment[v], pass(v))));
                if count <= cap || width >= n {
                    break (
                        labels,
                        Some(format!(
                            "{n} nodes drawn as {count} blocks: runs of up to {width} consecutive nodes of one topological order on one device and pass"
                        )),
                    );
                }
                width *= 2;
            }
        }
    }
}

/// Where the layered layout puts things: column and row spacing, node radius, margins,
/// and the drawing's size before the legend's width is taken into account.
struct Geometry {
    layout: Layout,
    tallest: usize,
    dx: f64,
    dy: f64,
    radius: f64,
    margin: f64,
    legend: f64,
    width: f64,
    height: f64,
}

impl Geometry {
    /// Spacing that fits the layers into about 1240 × 560 px, clamped to readable sizes.
    fn new(layout: Layout) -> Geometry {
        let columns = layout.layers.len().max(1);
        let tallest = layout.layers.iter().map(Vec::len).max().unwrap_or(1).max(1);
        let dx = (1240.0 / columns as f64).clamp(14.0, 90.0);
        let dy = (560.0 / tallest as f64).clamp(9.0, 44.0);
        let radius = (dx.min(dy) * 0.32).clamp(2.5, 9.0);
        let margin = 24.0;
        let legend = 26.0;
        let width = margin * 2.0 + dx * (columns as f64 - 1.0);
        let height = legend + margin * 2.0 + dy * (tallest as f64 - 1.0);
        Geometry {
            layout,
            tallest,
            dx,
            dy,
            radius,
            margin,
            legend,
            width,
            height,
        }
    }

    /// The centre of vertex `v`: its layer's column, its place in the layer centred.
    fn at(&self, v: usize) -> (f64, f64) {
        let layout = &self.layout;
        let l = layout.layer[v];
        let size = layout.layers[l].len() as f64;
        let x = self.margin + self.dx * l as f64;
        let y = self.legend
            + self.margin
            + self.dy * ((self.tallest as f64 - size) / 2.0 + layout.index[v] as f64);
        (x, y)
    }
}

/// The legend: one swatch per device in use.
fn legend_row(devices: &[Device], margin: f64) -> Group {
    let mut legend_group = Group::new().set("class", "legend-row");
    for (i, &d) in devices.iter().enumerate() {
        let x = margin + 80.0 * i as f64;
        legend_group = legend_group
            .add(
                Rectangle::new()
                    .set("x", round(x))
                    .set("y", 6)
                    .set("width", 12)
                    .set("height", 12)
                    .set("fill", device_colour(d)),
            )
            .add(
                Text::new(device_label(d))
                    .set("x", round(x + 16.0))
                    .set("y", 16)
                    .set("class", "legend"),
            );
    }
    legend_group
}

/// The arcs as cubic curves (backward arcs loop to the right); beyond [`MAX_ARCS`] the
/// shortest (fewest layers spanned) are kept.
fn arcs_group(arcs: &[(usize, usize)], geometry: &Geometry) -> Group {
    let layout = &geometry.layout;
    let mut drawn_arcs = arcs.to_vec();
    if drawn_arcs.len() > MAX_ARCS {
        drawn_arcs.sort_by_key(|&(a, b)| layout.layer[b].abs_diff(layout.layer[a]));
        drawn_arcs.truncate(MAX_ARCS);
    }
    let mut edges = Group::new().set("class", "edges");
    for &(a, b) in &drawn_arcs {
        let (x1, y1) = geometry.at(a);
        let (x2, y2) = geometry.at(b);
        let bend = (x2 - x1).abs().max(geometry.dx) / 2.0;
        let forward = x2 >= x1;
        let (c1, c2) = if forward {
            (x1 + bend, x2 - bend)
        } else {
            (x1 + bend, x2 + bend)
        };
        let data = Data::new().move_to((round(x1), round(y1))).cubic_curve_to((
            round(c1),
            round(y1),
            round(c2),
            round(y2),
            round(x2),
            round(y2),
        ));
        edges = edges.add(Path::new().set("d", data).set("class", "edge"));
    }
    edges
}

/// The vertices as circles in their device's colour (blocks a quarter larger), the pass
/// and block-ness in the class, the contents in the title.
fn nodes_group(w: &Workload, vertices: &[Vertex], geometry: &Geometry) -> Group {
    let radius = geometry.radius;
    let mut nodes = Group::new().set("class", "nodes");
    for (i, vertex) in vertices.iter().enumerate() {
        let (x, y) = geometry.at(i);
        let label = device_label(vertex.device);
        let title = vertex_title(w, vertex);
        let r = if vertex.nodes.len() > 1 {
            radius * 1.25
        } else {
            radius
        };
        let class = match (vertex.nodes.len() > 1, vertex.backward) {
            (false, false) => "graph-node forward",
            (false, true) => "graph-node backward",
            (true, false) => "graph-node block forward",
            (true, true) => "graph-node block backward",
        };
        nodes = nodes.add(
            Circle::new()
                .set("cx", round(x))
                .set("cy", round(y))
                .set("r", round(r))
                .set("fill", device_colour(vertex.device))
                .set("class", class)
                .set("data-device", label)
                .add(Title::new(title)),
        );
    }
    nodes
}

/// The hover text of a vertex: a node's name, id, time and memory, or a block's count,
/// totals and first six names.
fn vertex_title(w: &Workload, vertex: &Vertex) -> String {
    let device = device_label(vertex.device);
    let latency = |v: usize| {
        if vertex.device.is_accelerator() {
            w.node(v).fpga_latency
        } else {
            w.node(v).cpu_latency
        }
    };
    let pass = if vertex.backward {
        "backward"
    } else {
        "forward"
    };
    if let [v] = vertex.nodes[..] {
        let node = w.node(v);
        let name = node
            .name
            .clone()
            .unwrap_or_else(|| format!("node {}", node.id));
        return format!(
            "{name} (id {}) on {device}, {pass}: {}, {}",
            node.id,
            ms(latency(v)),
            bytes(node.size_bytes)
        );
    }
    let time: f64 = vertex.nodes.iter().map(|&v| latency(v)).sum();
    let size: f64 = vertex.nodes.iter().map(|&v| w.node(v).size_bytes).sum();
    let names: Vec<String> = vertex
        .nodes
        .iter()
        .take(6)
        .map(|&v| {
            w.node(v)
                .name
                .clone()
                .unwrap_or_else(|| format!("node {}", w.node(v).id))
        })
        .collect();
    let more = if vertex.nodes.len() > names.len() {
        format!(", … ({} more)", vertex.nodes.len() - names.len())
    } else {
        String::new()
    };
    format!(
        "{} nodes on {device}, {pass}: {}, {}: {}{more}",
        vertex.nodes.len(),
        ms(time),
        bytes(size),
        names.join(", ")
    )
}

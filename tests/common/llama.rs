//! A llama-style workload built in the tests, named the way Hugging Face names the modules
//! (`model.embed_tokens`, `model.layers.N.self_attn.q_proj`, `model.norm`, `lm_head`), with
//! one `layerId` per block, so layer planning and exports are tested before (and
//! independently of) the cost model's own generator.
#![allow(dead_code)]

use dnnplace::model::{DeviceSet, Node, Workload};

/// Shape and costs of [`llama`]. Every block costs `block_ms` on an accelerator (split over
/// its nine operators), every operator's output costs `comm_ms` to move.
#[derive(Clone, Copy, Debug)]
pub struct Llama {
    pub blocks: usize,
    pub block_ms: f64,
    pub embed_ms: f64,
    pub head_ms: f64,
    pub comm_ms: f64,
    pub accelerators: usize,
    pub cpus: usize,
    pub training: bool,
}

impl Default for Llama {
    fn default() -> Self {
        Llama {
            blocks: 24,
            block_ms: 1.0,
            embed_ms: 0.0,
            head_ms: 0.0,
            comm_ms: 0.001,
            accelerators: 4,
            cpus: 0,
            training: false,
        }
    }
}

/// Operators of one block, with their share of the block's time.
const BLOCK_OPS: [(&str, f64); 9] = [
    ("input_layernorm", 0.02),
    ("self_attn.q_proj", 0.12),
    ("self_attn.k_proj", 0.12),
    ("self_attn.v_proj", 0.12),
    ("self_attn.o_proj", 0.12),
    ("post_attention_layernorm", 0.02),
    ("mlp.gate_proj", 0.16),
    ("mlp.up_proj", 0.16),
    ("mlp.down_proj", 0.16),
];

/// The workload: `input_ids` and `model.embed_tokens` (layerId 0), blocks `model.layers.i`
/// (layerId `i + 1`), `model.norm` and `lm_head` (layerId `blocks + 1`); in training, one
/// `_grad` node per operator with its forward node's colour class and layerId.
pub fn llama(spec: Llama) -> Workload {
    let mut nodes: Vec<Node> = Vec::new();
    let mut edges: Vec<(i64, i64)> = Vec::new();
    let mut add =
        |nodes: &mut Vec<Node>, name: String, ms: f64, layer: usize, inputs: &[i64]| -> i64 {
            let id = nodes.len() as i64 + 1;
            nodes.push(Node {
                id,
                name: Some(name),
                module: None,
                fpga_latency: ms,
                cpu_latency: 10.0 * ms,
                size_bytes: 1e6,
                supported_on_accelerator: true,
                is_backward: false,
                color_class: Some(id),
                layer_id: Some(layer as i64),
                memory: None,
            });
            for &u in inputs {
                edges.push((u, id));
            }
            id
        };
    let input = add(&mut nodes, "input_ids".into(), 0.0, 0, &[]);
    let mut x = add(
        &mut nodes,
        "model.embed_tokens".into(),
        spec.embed_ms,
        0,
        &[input],
    );
    for b in 0..spec.blocks {
        let l = b + 1;
        let name = |op: &str| format!("model.layers.{b}.{op}");
        let t = |i: usize| BLOCK_OPS[i].1 * spec.block_ms;
        let ln = add(&mut nodes, name(BLOCK_OPS[0].0), t(0), l, &[x]);
        let q = add(&mut nodes, name(BLOCK_OPS[1].0), t(1), l, &[ln]);
        let k = add(&mut nodes, name(BLOCK_OPS[2].0), t(2), l, &[ln]);
        let v = add(&mut nodes, name(BLOCK_OPS[3].0), t(3), l, &[ln]);
        let o = add(&mut nodes, name(BLOCK_OPS[4].0), t(4), l, &[q, k, v]);
        let ln2 = add(&mut nodes, name(BLOCK_OPS[5].0), t(5), l, &[o, x]);
        let gate = add(&mut nodes, name(BLOCK_OPS[6].0), t(6), l, &[ln2]);
        let up = add(&mut nodes, name(BLOCK_OPS[7].0), t(7), l, &[ln2]);
        x = add(&mut nodes, name(BLOCK_OPS[8].0), t(8), l, &[gate, up, ln2]);
    }
    let top = spec.blocks + 1;
    let norm = add(
        &mut nodes,
        "model.norm".into(),
        spec.head_ms * 0.1,
        top,
        &[x],
    );
    add(
        &mut nodes,
        "lm_head".into(),
        spec.head_ms * 0.9,
        top,
        &[norm],
    );
    let forward = nodes.len() as i64;
    let mut all_edges: Vec<(i64, i64, f64, f64)> = edges
        .iter()
        .map(|&(u, v)| (u, v, spec.comm_ms, 4096.0))
        .collect();
    if spec.training {
        let mut backward = Vec::new();
        for node in nodes.iter().skip(1) {
            backward.push(Node {
                id: node.id + forward,
                name: Some(format!("{}_grad", node.name.as_deref().unwrap())),
                fpga_latency: 2.0 * node.fpga_latency,
                cpu_latency: 2.0 * node.cpu_latency,
                size_bytes: 2e6,
                is_backward: true,
                ..node.clone()
            });
            all_edges.push((node.id, node.id + forward, spec.comm_ms, 4096.0));
        }
        for &(u, v) in &edges {
            if u != input {
                all_edges.push((v + forward, u + forward, spec.comm_ms, 4096.0));
            }
        }
        nodes.extend(backward);
    }
    let devices = DeviceSet {
        accelerators: spec.accelerators,
        memory_per_accelerator_bytes: 80e9,
        cpus: spec.cpus,
    };
    Workload::new(nodes, all_edges, devices).expect("a valid llama workload")
}

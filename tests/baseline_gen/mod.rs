//! Small random chains and DAGs for the baseline tests (deterministic per seed), with
//! knobs for memory pressure, CPU-only nodes and paired colour classes.

#![allow(dead_code)]

use dnnplace::model::{DeviceSet, Node, Workload};
use dnnplace::solve::baselines::SplitMix64;

/// Shape of a generated graph.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    /// `0 → 1 → … → n−1`.
    Chain,
    /// Each node after the first has one or two earlier predecessors.
    Dag,
}

/// Options of [`random_workload`].
#[derive(Clone, Debug)]
pub struct Spec {
    pub nodes: usize,
    pub shape: Shape,
    pub accelerators: usize,
    pub cpus: usize,
    /// Memory per accelerator as a fraction of the total size (≥ 1: memory never binds).
    pub memory_fraction: f64,
    /// Probability that a node may run on the CPU only.
    pub unsupported: f64,
    /// Put pairs of consecutive nodes into one colour class with this probability.
    pub paired_classes: f64,
}

impl Spec {
    pub fn new(nodes: usize, shape: Shape, accelerators: usize, cpus: usize) -> Self {
        Spec {
            nodes,
            shape,
            accelerators,
            cpus,
            memory_fraction: 2.0,
            unsupported: 0.0,
            paired_classes: 0.0,
        }
    }
}

fn uniform(rng: &mut SplitMix64, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// A random workload, or `None` when the generated instance has no placement at all.
pub fn random_workload(spec: &Spec, seed: u64) -> Option<Workload> {
    let mut rng = SplitMix64::new(seed);
    let n = spec.nodes;
    let mut nodes = Vec::with_capacity(n);
    let mut class = 0i64;
    for v in 0..n {
        if v == 0 || uniform(&mut rng, 0.0, 1.0) >= spec.paired_classes {
            class += 1;
        }
        let fpga = (uniform(&mut rng, 0.5, 10.0) * 8.0).round() / 8.0;
        nodes.push(Node {
            id: v as i64 + 1,
            name: None,
            fpga_latency: fpga,
            cpu_latency: fpga * uniform(&mut rng, 2.0, 8.0).round(),
            size_bytes: uniform(&mut rng, 1.0, 100.0).round(),
            supported_on_accelerator: uniform(&mut rng, 0.0, 1.0) >= spec.unsupported,
            is_backward: false,
            color_class: Some(class),
            layer_id: None,
            module: None,
            memory: None,
        });
    }
    let cost: Vec<f64> = (0..n)
        .map(|_| (uniform(&mut rng, 0.0, 3.0) * 4.0).round() / 4.0)
        .collect();
    let mut edges = Vec::new();
    for v in 1..n {
        let preds: Vec<usize> = match spec.shape {
            Shape::Chain => vec![v - 1],
            Shape::Dag => {
                let a = rng.below(v);
                let b = rng.below(v);
                if a == b || uniform(&mut rng, 0.0, 1.0) < 0.5 {
                    vec![a]
                } else {
                    vec![a, b]
                }
            }
        };
        for u in preds {
            edges.push((u as i64 + 1, v as i64 + 1, cost[u], 0.0));
        }
    }
    let total: f64 = nodes.iter().map(|n| n.size_bytes).sum();
    let devices = DeviceSet {
        accelerators: spec.accelerators,
        memory_per_accelerator_bytes: (total * spec.memory_fraction).round(),
        cpus: spec.cpus,
    };
    Workload::new(nodes, edges, devices).ok()
}

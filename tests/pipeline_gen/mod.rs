//! Pipelines with known answers for the simulator and report tests: a chain of identical
//! layers cut into equal stages (the textbook setting), and random valid placements of
//! small random workloads.

#![allow(dead_code)]

use dnnplace::model::{Device, DeviceSet, Node, Placement, Workload};

/// A chain of `stages · layers` layers; each forward layer takes `f` ms, each backward
/// layer (when `training`) `b` ms; layer `j` and its gradient share colour class `j`;
/// every edge costs `cost`. Stage `s` holds layers `[s·layers, (s+1)·layers)` and runs on
/// accelerator `s mod devices` (so `devices < stages` gives `stages / devices` chunks per
/// device, interleaved-style). Each node's `size` is 1 byte.
pub fn uniform_chain(
    stages: usize,
    layers: usize,
    devices: usize,
    f: f64,
    b: f64,
    training: bool,
    cost: f64,
) -> (Workload, Placement) {
    let n = stages * layers;
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    let node = |id: i64, name: String, t: f64, backward: bool, class: i64| Node {
        id,
        name: Some(name),
        fpga_latency: t,
        cpu_latency: 10.0 * t,
        size_bytes: 1.0,
        supported_on_accelerator: true,
        is_backward: backward,
        color_class: Some(class),
        layer_id: Some(class),
        module: None,
        memory: None,
    };
    for j in 0..n {
        nodes.push(node(j as i64, format!("layer{j}"), f, false, j as i64));
        if j > 0 {
            edges.push((j as i64 - 1, j as i64, cost, 0.0));
        }
    }
    if training {
        for j in 0..n {
            let id = (n + j) as i64;
            nodes.push(node(id, format!("layer{j}.grad"), b, true, j as i64));
            // The activation of layer j feeds its gradient; gradients flow back down.
            edges.push((j as i64, id, cost, 0.0));
            if j + 1 < n {
                edges.push(((n + j + 1) as i64, id, cost, 0.0));
            }
        }
    }
    let total = nodes.len() as f64;
    let w = Workload::new(
        nodes,
        edges,
        DeviceSet {
            accelerators: devices,
            memory_per_accelerator_bytes: total,
            cpus: 0,
        },
    )
    .unwrap();
    let assignment = (0..w.len())
        .map(|v| Device::Accelerator(((v % n) / layers) % devices))
        .collect();
    (w, Placement::new(assignment))
}

/// A random valid placement of `w` (colour classes kept together, CPU-only nodes on CPUs),
/// or `None` when the draw breaks a rule (memory).
pub fn random_placement(w: &Workload, seed: u64) -> Option<Placement> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move |n: usize| {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_F491_4F6C_DD1D) % n as u64) as usize
    };
    let d = w.devices();
    let mut class_device: std::collections::HashMap<i64, Device> = Default::default();
    let mut assignment = Vec::with_capacity(w.len());
    for node in w.nodes() {
        let fresh = |next: &mut dyn FnMut(usize) -> usize| -> Option<Device> {
            let choices = d.accelerators + d.cpus;
            if choices == 0 {
                return None;
            }
            let k = next(choices);
            Some(if k < d.accelerators {
                Device::Accelerator(k)
            } else {
                Device::Cpu(k - d.accelerators)
            })
        };
        let device = match node.color_class.and_then(|c| class_device.get(&c).copied()) {
            Some(device) => device,
            None if !node.supported_on_accelerator && d.cpus > 0 => Device::Cpu(next(d.cpus)),
            None => fresh(&mut next)?,
        };
        if let Some(c) = node.color_class {
            class_device.insert(c, device);
        }
        assignment.push(device);
    }
    let p = Placement::new(assignment);
    dnnplace::score::evaluate(w, &p, false)
        .is_valid()
        .then_some(p)
}

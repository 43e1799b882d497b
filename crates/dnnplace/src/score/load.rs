//! Device loads and the throughput objectives of MODEL.md.
//!
//! For an accelerator `d` holding `S_d`:
//! `load(d) = Σ_{v∈S_d} fpgaLatency(v) + Σ_{u ∈ In(d) ∪ Out(d)} c(u)`, where `Out(d)` are
//! nodes of `S_d` with an edge leaving `S_d` (once each) and `In(d)` nodes outside `S_d`
//! with an edge into it (once per receiving device). A CPU's load is `Σ cpuLatency`; CPUs
//! pay no communication. TPS = `max_d load(d)`. The synchronous objective is
//! `max_d FW(d) + max_d BW(d)`, communication charged to the side (forward/backward) of
//! the node `u` that produces it.
//!
//! An accelerator that the placement marks as recomputing its activations
//! ([`crate::model::recompute`]) runs its forward nodes once more:
//! `load(d) += R(d) = Σ_{v∈S_d, v forward} fpgaLatency(v)`, counted as backward time (the
//! recomputation runs in the backward phase).
//!
//! Computed directly from the edges, node by node: O(n + m).

use std::collections::BTreeMap;

use crate::model::{Device, Placement, Workload};

/// What one device does under a placement.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceLoad {
    pub device: Device,
    /// Number of nodes on the device.
    pub nodes: usize,
    /// Σ latency of its nodes (fpga or cpu).
    pub compute: f64,
    /// Σ c(u) over In ∪ Out (0 on CPUs).
    pub communication: f64,
    /// Whether the device recomputes its activations (the placement says so).
    pub recomputes: bool,
    /// The forward pass it runs again when it recomputes, `R(d)` (0 otherwise).
    pub recompute: f64,
    /// compute + communication + recompute.
    pub load: f64,
    /// Σ size of its nodes, bytes.
    pub memory_bytes: f64,
    /// Part of `load` from forward nodes (compute and produced communication).
    pub forward_load: f64,
    /// Part of `load` from backward nodes.
    pub backward_load: f64,
}

impl DeviceLoad {
    /// `d`'s row in `map`, created empty (all sums 0) on first use.
    pub(crate) fn entry(map: &mut BTreeMap<Device, DeviceLoad>, d: Device) -> &mut DeviceLoad {
        map.entry(d).or_insert(DeviceLoad {
            device: d,
            nodes: 0,
            compute: 0.0,
            communication: 0.0,
            recomputes: false,
            recompute: 0.0,
            load: 0.0,
            memory_bytes: 0.0,
            forward_load: 0.0,
            backward_load: 0.0,
        })
    }

    /// Counts `node`, which takes `t` here, into the device's compute, memory and forward
    /// or backward load; on a device that recomputes (`recomputes`, crate::model::recompute)
    /// a forward node runs again in the backward pass.
    pub(crate) fn add_node(&mut self, node: &crate::model::Node, t: f64, recomputes: bool) {
        self.nodes += 1;
        self.compute += t;
        self.memory_bytes += node.size_bytes;
        if node.is_backward {
            self.backward_load += t;
        } else {
            self.forward_load += t;
        }
        if recomputes {
            self.recomputes = true;
            if !node.is_backward {
                self.recompute += t;
                self.backward_load += t;
            }
        }
    }
}

/// Loads of every device that holds at least one node, accelerators first, by index.
pub fn device_loads(w: &Workload, p: &Placement) -> Vec<DeviceLoad> {
    let time = |v: usize, d: Device| {
        let node = w.node(v);
        if d.is_accelerator() {
            node.fpga_latency
        } else {
            node.cpu_latency
        }
    };
    // MODEL.md's rule: the producer's accelerator and each receiving accelerator pay c(u)
    // once; CPUs pay nothing.
    let transfer = |u: usize, d: Device| {
        if d.is_accelerator() {
            w.out_cost(u)
        } else {
            0.0
        }
    };
    accumulate_loads(w, p, time, transfer, |u, _, d| transfer(u, d))
}

/// The one per-node accumulation of every scorer: each node `v` adds `time(v, d)` on its
/// device `d` ([`DeviceLoad::add_node`]); each producer `u` with `c(u) > 0` and a successor
/// on another device adds `send(u, p(u))` on its own device and `receive(u, p(u), d)` once
/// on each other device `d` holding a successor, on the side (forward/backward) of `u`. A
/// CPU that pays 0 gets no row for it. Rows come out accelerators first, by index. O(n + m).
pub(crate) fn accumulate_loads(
    w: &Workload,
    p: &Placement,
    time: impl Fn(usize, Device) -> f64,
    send: impl Fn(usize, Device) -> f64,
    receive: impl Fn(usize, Device, Device) -> f64,
) -> Vec<DeviceLoad> {
    let mut map: BTreeMap<Device, DeviceLoad> = BTreeMap::new();
    for (v, &d) in p.assignment.iter().enumerate() {
        let recomputes = d.is_accelerator() && p.recomputes(d);
        DeviceLoad::entry(&mut map, d).add_node(w.node(v), time(v, d), recomputes);
    }
    let mut receivers: Vec<Device> = Vec::new();
    for u in 0..w.len() {
        if w.out_cost(u) == 0.0 {
            continue;
        }
        let du = p.assignment[u];
        receivers.clear();
        for &x in w.successors(u) {
            let dx = p.assignment[x];
            if dx != du && !receivers.contains(&dx) {
                receivers.push(dx);
            }
        }
        if receivers.is_empty() {
            continue;
        }
        let backward = w.node(u).is_backward;
        let mut pay = |d: Device, amount: f64| {
            if amount != 0.0 || d.is_accelerator() {
                let e = DeviceLoad::entry(&mut map, d);
                e.communication += amount;
                if backward {
                    e.backward_load += amount;
                } else {
                    e.forward_load += amount;
                }
            }
        };
        pay(du, send(u, du));
        for &d in &receivers {
            pay(d, receive(u, du, d));
        }
    }
    map.into_values()
        .map(|mut e| {
            e.load = e.compute + e.communication + e.recompute;
            e
        })
        .collect()
}

/// Time-Per-Sample alone (the max load), for methods that compare many plans. O(n + m).
pub fn tps(w: &Workload, p: &Placement) -> f64 {
    max_load(&device_loads(w, p)).0
}

/// TPS: the maximum load, and the device that has it (the first one on ties).
pub fn max_load(loads: &[DeviceLoad]) -> (f64, Option<Device>) {
    let mut best = (0.0, None);
    for l in loads {
        if best.1.is_none() || l.load > best.0 {
            best = (l.load, Some(l.device));
        }
    }
    best
}

/// `max_d FW(d) + max_d BW(d)`.
pub fn sync_objective(loads: &[DeviceLoad]) -> f64 {
    let fw = loads.iter().map(|l| l.forward_load).fold(0.0, f64::max);
    let bw = loads.iter().map(|l| l.backward_load).fold(0.0, f64::max);
    fw + bw
}

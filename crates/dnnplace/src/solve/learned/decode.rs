//! Decoders: from what a search samples (random keys, device labels) to a device per unit
//! that keeps the placement rules, so that the scorer sees valid plans wherever the
//! decoder can make one. Units are those of [`super::Units`]; devices are numbered in
//! chain order, accelerators `0..k` then CPUs `k..k+ℓ` ([`super::device_at`]).
//!
//! **Non-contiguous keys** ([`non_contiguous`]): one key `x_g ∈ [0, 1)` per unit; unit
//! `g`, in index order, asks for device `⌊x_g · (k+ℓ)⌋`. A unit that may not run on an
//! accelerator goes to CPU `⌊x_g · ℓ⌋`; an accelerator whose memory the unit would
//! overflow (its own memory: types differ on a cluster) passes it on to the next
//! accelerators in turn, then to that CPU. With no CPU
//! and no room the plan is not decodable (`None`). Every plan of units is reachable (keys
//! in the right slots ask for it directly).
//!
//! **Contiguous keys** ([`contiguous`]): `G` priority keys, `D − 1` split keys and `D`
//! device keys for `D = k + ℓ`. The priorities give a topological order π (Kahn's
//! algorithm taking the available unit of least key); the split keys give cut positions
//! `⌊x · (G+1)⌋`, sorted; the device keys order the devices (least key first; on a
//! cluster, machines by their least device key and each machine's devices together, so
//! the stages fill machines in order, [`machine_blocks`]). Stage `i`
//! takes `π[cut_{i-1} .. cut_i]` on the `i`-th device, except that an accelerator stage
//! ends early at the first unit it may not run or cannot hold (its own type's memory), and a stage starts where
//! the previous one ended. Units left after the last stage make the keys not decodable.
//! Every stage is an interval of a topological order, so the prefixes are ideals and the
//! plan is a chain of ideals — contiguous. Every contiguous plan of the units is reachable:
//! its stages in chain order give π, the cuts and the device order.
//!
//! **Labels in chain order** ([`by_counts`], the policy gradient's contiguous plans): a
//! label per unit, a position in the chain order of the devices (accelerators `0..k`, then
//! CPUs). The units are ordered topologically by least label first (Kahn's algorithm,
//! ties by index), and device `i` takes the next `c_i = |{g : label(g) = i}|` units of that
//! order: each device gets as many units as were sampled for it, each stage is an interval
//! of a topological order, so the plan is a chain of ideals — contiguous. When the labels
//! already form a chain in device order (`{g : label(g) ≤ i}` an ideal for every `i`), the
//! plan is exactly the labels: Kahn's algorithm takes every unit of label 0 first, then
//! those of label 1, and so on. So every contiguous plan whose stages follow the chain
//! order is reachable.
//!
//! Complexity: O(G + D) for non-contiguous keys (plus the accelerators passed over),
//! O((G + A) log G + D log D) for contiguous keys with A unit arcs, O((G + A) log G + D)
//! for labels.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{device_at, Units};
use crate::model::Device;

/// The device set a decoder places on, in chain order (accelerators `0..k`, then CPUs):
/// each accelerator's memory, each device's machine, and each device's kind — devices of
/// one kind (one type on one machine, or one machine's CPU cores) are interchangeable.
#[derive(Clone, Debug)]
pub struct Devices {
    pub k: usize,
    pub l: usize,
    /// Memory of accelerator `i`, bytes.
    pub memory: Vec<f64>,
    /// Machine of device `i` (all 0 on MODEL.md's one machine).
    pub machine: Vec<usize>,
    /// Kind of device `i`, numbered from 0 in device order.
    pub kind: Vec<usize>,
}

impl Devices {
    /// MODEL.md's device set: one machine, `k` alike accelerators (kind 0) and `l` CPU
    /// cores (kind 1, or 0 without accelerators).
    pub fn machine(k: usize, l: usize, memory_bytes: f64) -> Devices {
        Devices {
            k,
            l,
            memory: vec![memory_bytes; k],
            machine: vec![0; k + l],
            kind: (0..k + l).map(|i| usize::from(i >= k && k > 0)).collect(),
        }
    }

    /// A cluster's devices ([`crate::model::cluster`]): kinds are (machine, type) for
    /// accelerators and machine for CPU cores.
    pub fn cluster(c: &crate::model::Cluster) -> Devices {
        let (k, l) = (c.accelerators().len(), c.cpu_machines().len());
        let keys: Vec<(usize, Option<usize>)> = c
            .accelerators()
            .iter()
            .map(|a| (a.machine, Some(a.accelerator_type)))
            .chain(c.cpu_machines().iter().map(|&m| (m, None)))
            .collect();
        let mut seen: Vec<(usize, Option<usize>)> = Vec::new();
        let kind = keys
            .iter()
            .map(|key| match seen.iter().position(|s| s == key) {
                Some(i) => i,
                None => {
                    seen.push(*key);
                    seen.len() - 1
                }
            })
            .collect();
        Devices {
            k,
            l,
            memory: c
                .accelerators()
                .iter()
                .map(|a| c.types()[a.accelerator_type].memory_bytes)
                .collect(),
            machine: keys.iter().map(|&(m, _)| m).collect(),
            kind,
        }
    }

    pub fn count(&self) -> usize {
        self.k + self.l
    }

    /// The number of kinds.
    pub fn kinds(&self) -> usize {
        self.kind.iter().max().map_or(0, |&m| m + 1)
    }

    /// The largest accelerator memory (0 without accelerators).
    pub fn largest_memory(&self) -> f64 {
        self.memory.iter().copied().fold(0.0, f64::max)
    }
}

/// `⌊x · n⌋` clamped into `0..n` (n > 0).
fn slot(x: f64, n: usize) -> usize {
    ((x * n as f64) as usize).min(n - 1)
}

/// The non-contiguous decoder of the module docs; `keys.len()` = G.
pub fn non_contiguous(units: &Units, keys: &[f64], d: &Devices) -> Option<Vec<Device>> {
    let mut used = vec![0.0; d.k];
    let mut out = Vec::with_capacity(units.len());
    for (g, &x) in keys.iter().enumerate() {
        let unit = &units.grouping.groups[g];
        let cpu = (d.l > 0).then(|| Device::Cpu(slot(x, d.l)));
        let wanted = slot(x, d.count().max(1));
        let device = if wanted >= d.k || !unit.supported_on_accelerator {
            cpu
        } else {
            (0..d.k)
                .map(|i| (wanted + i) % d.k)
                .find(|&a| used[a] + unit.size_bytes <= d.memory[a])
                .map(Device::Accelerator)
                .or(cpu)
        }?;
        if let Device::Accelerator(a) = device {
            used[a] += unit.size_bytes;
        }
        out.push(device);
    }
    Some(out)
}

/// The number of keys [`contiguous`] reads: `G + 2D − 1`.
pub fn contiguous_keys(units: usize, d: &Devices) -> usize {
    units + 2 * d.count() - 1
}

/// A topological order of the units, least priority first among the available.
pub fn topological_order(units: &Units, priority: &[f64]) -> Vec<usize> {
    let n = units.len();
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut waiting = vec![0usize; n];
    for (g, preds) in units.pred.iter().enumerate() {
        waiting[g] = preds.len();
        for &p in preds {
            succ[p as usize].push(g);
        }
    }
    // Keys are in [0, 1): their bit patterns order like the values.
    let key = |g: usize| (Reverse(priority[g].to_bits()), Reverse(g));
    let mut ready: BinaryHeap<_> = (0..n).filter(|&g| waiting[g] == 0).map(key).collect();
    let mut order = Vec::with_capacity(n);
    while let Some((_, Reverse(g))) = ready.pop() {
        order.push(g);
        for &s in &succ[g] {
            waiting[s] -= 1;
            if waiting[s] == 0 {
                ready.push(key(s));
            }
        }
    }
    order
}

/// The contiguous decoder of the module docs; `keys.len()` = [`contiguous_keys`].
pub fn contiguous(units: &Units, keys: &[f64], d: &Devices) -> Option<Vec<Device>> {
    let (n, count) = (units.len(), d.count());
    if count == 0 {
        return (n == 0).then(Vec::new);
    }
    let order = topological_order(units, &keys[..n]);
    let mut cuts: Vec<usize> = keys[n..n + count - 1]
        .iter()
        .map(|&x| slot(x, n + 1))
        .collect();
    cuts.sort_unstable();
    cuts.push(n);
    let device_keys = &keys[n + count - 1..];
    let chain = machine_blocks(device_keys, d);
    let mut out = vec![Device::Cpu(0); n];
    let mut at = 0;
    for (stage, &index) in chain.iter().enumerate() {
        let device = device_at(index, d.k);
        let end = cuts[stage].max(at);
        let mut used = 0.0;
        while at < end {
            let unit = &units.grouping.groups[order[at]];
            if device.is_accelerator() {
                let memory = d.memory[index];
                if !unit.supported_on_accelerator || used + unit.size_bytes > memory {
                    break;
                }
                used += unit.size_bytes;
            }
            out[order[at]] = device;
            at += 1;
        }
    }
    (at == n).then_some(out)
}

/// The device order of the contiguous keys: machines by their least device key, and the
/// devices of each machine by key (ties by index), so each machine's devices are
/// consecutive — the stages fill machines in order. On one machine: the devices by key.
pub fn machine_blocks(device_keys: &[f64], d: &Devices) -> Vec<usize> {
    let machines = d.machine.iter().max().map_or(0, |&m| m + 1);
    let mut least = vec![f64::INFINITY; machines];
    for (i, &x) in device_keys.iter().enumerate() {
        let m = d.machine[i];
        least[m] = least[m].min(x);
    }
    let mut chain: Vec<usize> = (0..device_keys.len()).collect();
    chain.sort_by(|&a, &b| {
        let (ma, mb) = (d.machine[a], d.machine[b]);
        least[ma]
            .total_cmp(&least[mb])
            .then(ma.cmp(&mb))
            .then(device_keys[a].total_cmp(&device_keys[b]))
            .then(a.cmp(&b))
    });
    chain
}

/// The labels decoder of the module docs: `labels[g]` a chain position in `0..devices`;
/// returns the chain position each unit gets.
pub fn by_counts(units: &Units, labels: &[usize], devices: usize) -> Vec<usize> {
    let mut counts = vec![0usize; devices];
    for &l in labels {
        counts[l] += 1;
    }
    // Labels are small integers: as priorities in [0, 1) they order like the labels.
    let priority: Vec<f64> = labels
        .iter()
        .map(|&l| l as f64 / devices.max(1) as f64)
        .collect();
    let order = topological_order(units, &priority);
    let mut out = vec![0; labels.len()];
    let mut at = 0;
    for (stage, &count) in counts.iter().enumerate() {
        for &g in &order[at..at + count] {
            out[g] = stage;
        }
        at += count;
    }
    out
}

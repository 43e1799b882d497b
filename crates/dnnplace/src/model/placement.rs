//! A placement: every node on exactly one device.
//!
//! Stored as an assignment vector indexed by node, which makes "every node exactly once"
//! true by construction; the scorer checks the rest (colour classes, support, memory,
//! device counts, contiguity).
//!
//! For the latency objective a placement may also say how each accelerator's nodes are
//! cut into *pieces* (calls): `pieces[v]` is the rank of v's call on its accelerator, and
//! calls run in increasing rank (ranks need not be consecutive). Without it the scorer
//! cuts greedily ([`crate::score::latency`]).
//!
//! Under the interleaved schedule (`--schedule interleaved:v`, [`crate::model::schedule`])
//! the same ranks are *chunks*: `pieces[v] = c` puts v in chunk c of its accelerator,
//! which is stage `c·p + d` of the chain when the accelerator is `d` of `p`
//! ([`Placement::chunk`]). A chunk may be empty. A throughput plan without them has every
//! node in chunk 0.
//!
//! Under a pipeline schedule a placement may also say which accelerators recompute their
//! activations ([`crate::model::recompute`]); without it none does.

use super::devices::Device;

#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    /// `assignment[v]` is the device of node index `v`.
    pub assignment: Vec<Device>,
    /// Latency: the call rank of each node on its accelerator (read for accelerator
    /// nodes, ignored for CPU nodes); `None` lets the scorer cut. Under the interleaved
    /// schedule: each node's chunk on its accelerator (module doc).
    pub pieces: Option<Vec<usize>>,
    /// The accelerators that recompute their activations ([`crate::model::recompute`]),
    /// sorted, each once; empty: none does.
    pub recompute: Vec<Device>,
}

impl Placement {
    pub fn new(assignment: Vec<Device>) -> Self {
        Placement {
            assignment,
            pieces: None,
            recompute: Vec::new(),
        }
    }

    /// The same placement with `devices` recomputing their activations (sorted and
    /// deduplicated here).
    pub fn with_recompute(mut self, mut devices: Vec<Device>) -> Self {
        devices.sort();
        devices.dedup();
        self.recompute = devices;
        self
    }

    /// Whether device `d` recomputes its activations.
    pub fn recomputes(&self, d: Device) -> bool {
        self.recompute.binary_search(&d).is_ok()
    }

    /// The same placement with explicit pieces.
    pub fn with_pieces(mut self, pieces: Vec<usize>) -> Self {
        self.pieces = Some(pieces);
        self
    }

    /// The chunk of node `v` on its accelerator under the interleaved schedule: its rank,
    /// 0 without ranks (module doc).
    pub fn chunk(&self, v: usize) -> usize {
        self.pieces.as_ref().map_or(0, |ranks| ranks[v])
    }

    /// Node indices on each accelerator `0..k` and each CPU `0..l`.
    pub fn node_sets(
        &self,
        accelerators: usize,
        cpus: usize,
    ) -> (Vec<Vec<usize>>, Vec<Vec<usize>>) {
        let mut accs = vec![Vec::new(); accelerators];
        let mut cpu_sets = vec![Vec::new(); cpus];
        for (v, d) in self.assignment.iter().enumerate() {
            match *d {
                Device::Accelerator(i) if i < accelerators => accs[i].push(v),
                Device::Cpu(i) if i < cpus => cpu_sets[i].push(v),
                _ => {}
            }
        }
        (accs, cpu_sets)
    }

    /// The highest accelerator and CPU indices used, plus one.
    pub fn devices_used(&self) -> (usize, usize) {
        let mut acc = 0;
        let mut cpu = 0;
        for d in &self.assignment {
            match *d {
                Device::Accelerator(i) => acc = acc.max(i + 1),
                Device::Cpu(i) => cpu = cpu.max(i + 1),
            }
        }
        (acc, cpu)
    }

    /// Renumbers devices so that used accelerators (and CPUs) are `0..` in order of their
    /// first node; the loads are unchanged (a recomputing device keeps recomputing under
    /// its new number; one that holds no node is dropped).
    pub fn canonical(&self) -> Placement {
        let mut acc_map = std::collections::HashMap::new();
        let mut cpu_map = std::collections::HashMap::new();
        let assignment = self
            .assignment
            .iter()
            .map(|d| match *d {
                Device::Accelerator(i) => {
                    let next = acc_map.len();
                    Device::Accelerator(*acc_map.entry(i).or_insert(next))
                }
                Device::Cpu(i) => {
                    let next = cpu_map.len();
                    Device::Cpu(*cpu_map.entry(i).or_insert(next))
                }
            })
            .collect();
        let recompute = self
            .recompute
            .iter()
            .filter_map(|d| match *d {
                Device::Accelerator(i) => acc_map.get(&i).map(|&j| Device::Accelerator(j)),
                Device::Cpu(i) => cpu_map.get(&i).map(|&j| Device::Cpu(j)),
            })
            .collect();
        Placement {
            assignment,
            pieces: self.pieces.clone(),
            recompute: Vec::new(),
        }
        .with_recompute(recompute)
    }
}

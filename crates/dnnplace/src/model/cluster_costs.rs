//! A workload priced on a cluster: node times per accelerator type and transfer times per
//! link, and the communication rule of [`crate::model::cluster`] in one place.
//!
//! - `x_t(v)`: the workload's time for `t`'s profile when it has one, else
//!   `fpgaLatency(v) · (s_ref / s_t)` (the ratio computed first, so it is exactly 1 for the
//!   reference's own speed);
//! - `t_L(u) = λ_L + c(u) · (B_ref / B_L)` for `c(u) > 0`, and 0 for `c(u) = 0`.
//!
//! Building it is O(|T| · n + |machines|); every query is O(1).

use super::cluster::{Cluster, Link};
use super::{Device, Workload};

/// Latency and bandwidth ratio `B_ref / B_L` of one link.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Priced {
    latency_ms: f64,
    scale: f64,
}

impl Priced {
    fn new(l: &Link, b_ref: f64) -> Priced {
        Priced {
            latency_ms: l.latency_ms,
            scale: b_ref / l.bytes_per_s,
        }
    }
    #[inline]
    fn time(self, c: f64) -> f64 {
        if c == 0.0 {
            0.0
        } else {
            self.latency_ms + c * self.scale
        }
    }
}

#[derive(Clone, Debug)]
struct MachineLinks {
    host: Priced,
    peer: Option<Priced>,
    network: Priced,
}

/// A workload's costs on one cluster (module documentation).
#[derive(Clone, Debug)]
pub struct ClusterCosts {
    cluster: Cluster,
    /// `times[t][v] = x_t(v)`.
    times: Vec<Vec<f64>>,
    links: Vec<MachineLinks>,
    /// `c(u)`.
    out_cost: Vec<f64>,
}

impl ClusterCosts {
    /// Prices `w` on `cluster` (module documentation).
    pub fn new(w: &Workload, cluster: &Cluster) -> ClusterCosts {
        let platform = w.platform();
        let times = cluster
            .types()
            .iter()
            .map(|t| match platform.profile_times.get(&t.profile) {
                Some(times) => times.to_vec(),
                None => {
                    let ratio = platform.reference.speed / t.speed;
                    w.nodes().iter().map(|n| n.fpga_latency * ratio).collect()
                }
            })
            .collect();
        let b_ref = platform.reference.host_bytes_per_s;
        let links = cluster
            .machines()
            .iter()
            .map(|m| MachineLinks {
                host: Priced::new(&m.host, b_ref),
                peer: m.peer.as_ref().map(|p| Priced::new(p, b_ref)),
                network: Priced::new(&m.network, b_ref),
            })
            .collect();
        ClusterCosts {
            cluster: cluster.clone(),
            times,
            links,
            out_cost: (0..w.len()).map(|u| w.out_cost(u)).collect(),
        }
    }

    /// The workload's own cluster, or MODEL.md's device set as one ([`Cluster::model_md`]).
    pub fn of(w: &Workload) -> ClusterCosts {
        match w.cluster() {
            Some(c) => ClusterCosts::new(w, c),
            None => ClusterCosts::new(w, &Cluster::model_md(w.devices(), &w.platform().reference)),
        }
    }

    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// `x_t(v)`, ms.
    #[inline]
    pub fn time(&self, t: usize, v: usize) -> f64 {
        self.times[t][v]
    }

    /// All of `x_t`, by node.
    pub fn times_of_type(&self, t: usize) -> &[f64] {
        &self.times[t]
    }

    /// `t_{H_μ}(u)`.
    #[inline]
    pub fn host(&self, machine: usize, u: usize) -> f64 {
        self.links[machine].host.time(self.out_cost[u])
    }

    /// `t_{P_μ}(u)`, or `None` when machine `μ` has no peer link.
    #[inline]
    pub fn peer(&self, machine: usize, u: usize) -> Option<f64> {
        self.links[machine].peer.map(|p| p.time(self.out_cost[u]))
    }

    /// `t_{N_μ}(u)`: into machine `μ` from another machine.
    #[inline]
    pub fn network(&self, machine: usize, u: usize) -> f64 {
        self.links[machine].network.time(self.out_cost[u])
    }

    /// Whether machine `μ` has a peer link.
    #[inline]
    pub fn has_peer(&self, machine: usize) -> bool {
        self.links[machine].peer.is_some()
    }

    /// What the device holding `u` pays, once, when `u` has a receiver on another device:
    /// `t_{H_μ}(u)` for an accelerator on a machine without a peer link, else 0.
    pub fn send(&self, u: usize, sender: Device) -> f64 {
        match sender {
            Device::Accelerator(i) => {
                let m = self.cluster.accelerators()[i].machine;
                if self.has_peer(m) {
                    0.0
                } else {
                    self.host(m, u)
                }
            }
            Device::Cpu(_) => 0.0,
        }
    }

    /// What `receiver` pays to get `u` from `sender` (≠ receiver): the table of
    /// [`crate::model::cluster`].
    pub fn receive(&self, u: usize, sender: Device, receiver: Device) -> f64 {
        let ms = self.machine(sender);
        let mr = self.machine(receiver);
        if ms != mr {
            return self.network(mr, u);
        }
        match (
            sender.is_accelerator(),
            receiver.is_accelerator(),
            self.peer(mr, u),
        ) {
            (true, true, Some(p)) => p,
            (_, true, _) => self.host(mr, u),
            (true, false, Some(_)) => self.host(mr, u),
            (_, false, _) => 0.0,
        }
    }

    fn machine(&self, d: Device) -> usize {
        self.cluster.machine_of(d).expect("a device of the cluster")
    }

    /// Memory of accelerator `i`, bytes.
    pub fn memory_of(&self, i: usize) -> f64 {
        self.cluster.types()[self.cluster.accelerators()[i].accelerator_type].memory_bytes
    }

    /// Time of node `v` on device `d`: `x_t(v)` on an accelerator of type `t`, cpuLatency on
    /// a CPU core.
    pub fn compute(&self, w: &Workload, v: usize, d: Device) -> f64 {
        match d {
            Device::Accelerator(i) => {
                self.times[self.cluster.accelerators()[i].accelerator_type][v]
            }
            Device::Cpu(_) => w.node(v).cpu_latency,
        }
    }
}

//! A cluster: machines holding accelerators of several types and CPU cores, the links
//! between them, and what a workload's numbers mean on it.
//!
//! MODEL.md has one device set: k identical accelerators and ℓ CPU cores behind one host
//! link, every transfer costing `c(u)`. A [`Cluster`] generalises it:
//!
//! - **accelerator types** `t ∈ T` ([`AcceleratorType`]): a device profile (which keys the
//!   node times `x_t(v)`), a memory limit `M_t`, a price per hour and a speed factor;
//! - **machines** `μ` ([`Machine`]): accelerators by type and count, CPU cores, and three
//!   links, each a bandwidth `B` and a latency `λ` ([`Link`]): the host link `H_μ`
//!   (accelerator ↔ host memory, MODEL.md's `c(u)`), an optional peer link `P_μ`
//!   (accelerator ↔ accelerator inside the machine: NVLink, a PCIe switch; without one,
//!   transfers between the machine's accelerators are staged through host memory) and the
//!   network link `N_μ` (into the machine from another one).
//!
//! Devices are numbered as placements number them: accelerators machine by machine, in the
//! order of the machine's entries (`Device::Accelerator(i)`), then CPU cores machine by
//! machine (`Device::Cpu(j)`).
//!
//! ## What a workload's numbers mean on a cluster
//!
//! A workload's `fpgaLatency` and `c(u)` were measured or priced on one accelerator, its
//! [`Reference`]: a profile with a speed `s_ref` and a host-link bandwidth `B_ref` (the
//! published workloads: the V100 they were profiled on, [`Reference::paper`]). On a type
//! `t`, node `v` takes `x_t(v)` = the node's own time for `t`'s profile when the workload
//! carries one (`latencies` in the JSON, written by the cost models for every type of a
//! cluster), else `fpgaLatency(v) · s_ref / s_t`. Node `u`'s output is `c(u) · B_ref` bytes
//! (its host-link time at the reference bandwidth), so over a link `L` it takes
//!
//! ```text
//! t_L(u) = λ_L + c(u) · B_ref / B_L        (0 when c(u) = 0: nothing moves)
//! ```
//!
//! For generated and imported workloads `c(u) = bytes(u) / B_ref` exactly as priced, so
//! `t_L(u) = λ_L + bytes(u) / B_L`.
//!
//! ## The communication rule
//!
//! For a placement `p`, let `R(u)` be the devices other than `p(u)` holding a successor of
//! `u`, `m(d)` the machine of device `d`. Device `d`'s load is its compute plus:
//!
//! - **send** (accelerator `a = p(u)` on a machine `μ` *without* a peer link, `R(u) ≠ ∅`):
//!   `t_{H_μ}(u)` once — the output is staged in host memory once, for every receiver
//!   (MODEL.md's `Out`). On a machine with a peer link the sender pays nothing: receivers
//!   pull.
//! - **receive** (`d ∈ R(u)`, sender `s = p(u)`), once per receiving device:
//!
//! | where `s` is | `d` an accelerator | `d` a CPU |
//! | --- | --- | --- |
//! | another machine | `t_{N_{m(d)}}(u)` | `t_{N_{m(d)}}(u)` |
//! | same machine `μ`, a CPU | `t_{H_μ}(u)` | 0 |
//! | same machine `μ`, an accelerator, `μ` has a peer link | `t_{P_μ}(u)` | `t_{H_μ}(u)` (pull from the accelerator) |
//! | same machine `μ`, an accelerator, no peer link | `t_{H_μ}(u)` | 0 (already in host memory) |
//!
//! A transfer between machines is priced on the receiving machine's network link and
//! covers the whole route into the receiver. Communication is not overlapped with compute.
//!
//! **MODEL.md is the special case** of one machine without a peer link whose host link has
//! `λ = 0` and `B = B_ref`, one accelerator type with the reference's profile (or speed): the
//! sender pays `c(u)` once, every receiving accelerator `c(u)`, CPUs nothing, and
//! `x_t(v) = fpgaLatency(v)` — bit for bit (`B_ref / B = 1` and `s_ref / s_t = 1` exactly).
//!
//! Why the sender's part never depends on where its receivers are: a contiguous plan's
//! stages are decided in order, and a stage's load must be known when it is decided; the
//! receivers' parts depend only on where their producers are, which is decided earlier.
//! The rule keeps MODEL.md's push-once on host-staged machines and makes peer and network
//! transfers pulls, which is what NVLink peer reads and RDMA reads are.

use super::workload::WorkloadError;

/// A link: bandwidth and latency. One transfer of `b` bytes takes `λ + b / B`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    /// `B`, bytes per second, one direction (> 0).
    pub bytes_per_s: f64,
    /// `λ`, milliseconds per transfer (≥ 0).
    pub latency_ms: f64,
}

/// One accelerator type of a cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct AcceleratorType {
    /// Unique display name (`a100-80gb`, or `a100-80gb@40GiB` when one profile appears with
    /// several memories or prices).
    pub name: String,
    /// The device profile; node times for this type are the workload's times for it.
    pub profile: String,
    /// `M_t`: memory of one accelerator, bytes.
    pub memory_bytes: f64,
    /// Price of one accelerator per hour (any currency; the cheapest-cluster search adds them).
    pub price_per_hour: f64,
    /// `s_t`: speed relative to the paper's reference V100 (= 1), for nodes without a time
    /// for this profile.
    pub speed: f64,
}

/// One machine: accelerators by type, CPU cores and links.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    pub name: String,
    /// `(type index, count)` in device order.
    pub accelerators: Vec<(usize, usize)>,
    /// CPU cores.
    pub cpus: usize,
    /// `H_μ`: accelerator ↔ host memory.
    pub host: Link,
    /// `P_μ`: accelerator ↔ accelerator inside the machine; `None` stages through host memory.
    pub peer: Option<Link>,
    /// `N_μ`: into this machine from another one.
    pub network: Link,
}

/// Where one accelerator is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcceleratorSlot {
    pub accelerator_type: usize,
    pub machine: usize,
}

/// A validated cluster (module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct Cluster {
    types: Vec<AcceleratorType>,
    machines: Vec<Machine>,
    cpu_price_per_hour: f64,
    accelerators: Vec<AcceleratorSlot>,
    cpus: Vec<usize>,
    /// What reading the cluster clamped ([`crate::model::count`]), one note each.
    notes: Vec<String>,
}

/// The profile, speed and host bandwidth a workload's `fpgaLatency` and `c(u)` were
/// measured or priced on (module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct Reference {
    pub profile: String,
    /// `s_ref`, relative to the paper's V100.
    pub speed: f64,
    /// `B_ref`, bytes per second.
    pub host_bytes_per_s: f64,
}

impl Reference {
    /// The published workloads' reference: an NVIDIA V100 16 GB (speed 1) behind PCIe 3 x16
    /// (15.75 GB/s per direction), the machine they were profiled on.
    pub fn paper() -> Reference {
        Reference {
            profile: "v100".into(),
            speed: 1.0,
            host_bytes_per_s: 15.75e9,
        }
    }
}

impl Default for Reference {
    fn default() -> Self {
        Reference::paper()
    }
}

fn bad(field: String, value: f64, rule: &str) -> WorkloadError {
    WorkloadError::BadCluster {
        field,
        message: format!("is {value}; it must be {rule}"),
    }
}

fn check_link(field: String, l: &Link) -> Result<(), WorkloadError> {
    if !(l.bytes_per_s.is_finite() && l.bytes_per_s > 0.0) {
        return Err(bad(
            format!("{field}.bytes_per_s"),
            l.bytes_per_s,
            "a finite number > 0",
        ));
    }
    if !(l.latency_ms.is_finite() && l.latency_ms >= 0.0) {
        return Err(bad(
            format!("{field}.latency_ms"),
            l.latency_ms,
            "a finite number >= 0",
        ));
    }
    Ok(())
}

impl Cluster {
    /// Validates and builds a cluster: at least one device, unique names, every number
    /// finite (bandwidths and speeds > 0, the rest ≥ 0), every type used by a machine.
    pub fn new(
        types: Vec<AcceleratorType>,
        machines: Vec<Machine>,
        cpu_price_per_hour: f64,
    ) -> Result<Cluster, WorkloadError> {
        for (i, t) in types.iter().enumerate() {
            if types[..i].iter().any(|o| o.name == t.name) {
                return Err(WorkloadError::BadCluster {
                    field: format!("types[{i}].name"),
                    message: format!("'{}' is used twice", t.name),
                });
            }
            let f = |x: &str| format!("type {}.{x}", t.name);
            if !(t.memory_bytes.is_finite() && t.memory_bytes >= 0.0) {
                return Err(bad(
                    f("memory"),
                    t.memory_bytes,
                    "a finite number of bytes >= 0",
                ));
            }
            if !(t.price_per_hour.is_finite() && t.price_per_hour >= 0.0) {
                return Err(bad(
                    f("price_per_hour"),
                    t.price_per_hour,
                    "a finite number >= 0",
                ));
            }
            if !(t.speed.is_finite() && t.speed > 0.0) {
                return Err(bad(f("speed"), t.speed, "a finite number > 0"));
            }
        }
        if !(cpu_price_per_hour.is_finite() && cpu_price_per_hour >= 0.0) {
            return Err(bad(
                "cpu_price_per_hour".into(),
                cpu_price_per_hour,
                "a finite number >= 0",
            ));
        }
        let devices = machines.iter().try_fold(0usize, |total, m| {
            m.accelerators
                .iter()
                .try_fold(m.cpus, |d, &(_, c)| d.checked_add(c))
                .and_then(|d| d.checked_add(total))
                .filter(|&d| d <= super::count::MAX_DEVICES)
        });
        if devices.is_none() {
            return Err(WorkloadError::BadCluster {
                field: "machines".into(),
                message: format!("hold more than {} devices", super::count::MAX_DEVICES),
            });
        }
        let mut accelerators = Vec::new();
        let mut cpus = Vec::new();
        for (m, machine) in machines.iter().enumerate() {
            if machines[..m].iter().any(|o| o.name == machine.name) {
                return Err(WorkloadError::BadCluster {
                    field: format!("machines[{m}].name"),
                    message: format!("'{}' is used twice", machine.name),
                });
            }
            check_link(format!("machines[{m}].host"), &machine.host)?;
            if let Some(p) = &machine.peer {
                check_link(format!("machines[{m}].peer"), p)?;
            }
            check_link(format!("machines[{m}].network"), &machine.network)?;
            for (e, &(t, count)) in machine.accelerators.iter().enumerate() {
                if t >= types.len() {
                    return Err(WorkloadError::BadCluster {
                        field: format!("machines[{m}].accelerators[{e}]"),
                        message: format!("refers to type {t}, but there are {} types", types.len()),
                    });
                }
                accelerators.extend(std::iter::repeat_n(
                    AcceleratorSlot {
                        accelerator_type: t,
                        machine: m,
                    },
                    count,
                ));
            }
        }
        for (m, machine) in machines.iter().enumerate() {
            cpus.extend(std::iter::repeat_n(m, machine.cpus));
        }
        if accelerators.is_empty() && cpus.is_empty() {
            return Err(WorkloadError::BadCluster {
                field: "machines".into(),
                message: "hold no accelerator and no CPU core".into(),
            });
        }
        if let Some(t) =
            (0..types.len()).find(|&t| !accelerators.iter().any(|a| a.accelerator_type == t))
        {
            return Err(WorkloadError::BadCluster {
                field: format!("types[{t}]"),
                message: format!("type '{}' is on no machine", types[t].name),
            });
        }
        Ok(Cluster {
            types,
            machines,
            cpu_price_per_hour,
            accelerators,
            cpus,
            notes: Vec::new(),
        })
    }

    /// The cluster with `notes` on what reading it clamped.
    pub fn with_notes(mut self, notes: Vec<String>) -> Cluster {
        self.notes = notes;
        self
    }

    /// What reading the cluster clamped (counts beyond what a plan can use), one note each.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    pub fn types(&self) -> &[AcceleratorType] {
        &self.types
    }
    pub fn machines(&self) -> &[Machine] {
        &self.machines
    }
    /// Price of one CPU core per hour.
    pub fn cpu_price_per_hour(&self) -> f64 {
        self.cpu_price_per_hour
    }
    /// Every accelerator, in device order.
    pub fn accelerators(&self) -> &[AcceleratorSlot] {
        &self.accelerators
    }
    /// The machine of every CPU core, in device order.
    pub fn cpu_machines(&self) -> &[usize] {
        &self.cpus
    }
    /// Number of accelerators of type `t`.
    pub fn count_of_type(&self, t: usize) -> usize {
        self.accelerators
            .iter()
            .filter(|a| a.accelerator_type == t)
            .count()
    }
    /// The machine of a device, or `None` for an index past the cluster's devices.
    pub fn machine_of(&self, d: super::Device) -> Option<usize> {
        match d {
            super::Device::Accelerator(i) => self.accelerators.get(i).map(|a| a.machine),
            super::Device::Cpu(j) => self.cpus.get(j).copied(),
        }
    }
    /// Largest accelerator memory, bytes (0 without accelerators).
    /// The smallest accelerator memory (∞ without accelerators).
    pub fn smallest_memory_bytes(&self) -> f64 {
        self.accelerators
            .iter()
            .map(|a| self.types[a.accelerator_type].memory_bytes)
            .fold(f64::INFINITY, f64::min)
    }

    pub fn largest_memory_bytes(&self) -> f64 {
        self.accelerators
            .iter()
            .map(|a| self.types[a.accelerator_type].memory_bytes)
            .fold(0.0, f64::max)
    }

    /// MODEL.md's device set as a cluster: one machine `m0` with `k` accelerators of one type
    /// (named after `reference.profile`, speed `reference.speed`, price 0) and `ℓ` CPU cores,
    /// a host link with `λ = 0` and `B = B_ref`, no peer link. Scores exactly as MODEL.md.
    pub fn model_md(devices: &super::DeviceSet, reference: &Reference) -> Cluster {
        let host = Link {
            bytes_per_s: reference.host_bytes_per_s,
            latency_ms: 0.0,
        };
        let ty = AcceleratorType {
            name: reference.profile.clone(),
            profile: reference.profile.clone(),
            memory_bytes: devices.memory_per_accelerator_bytes,
            price_per_hour: 0.0,
            speed: reference.speed,
        };
        let types = if devices.accelerators > 0 {
            vec![ty]
        } else {
            Vec::new()
        };
        let accelerators = if devices.accelerators > 0 {
            vec![(0, devices.accelerators)]
        } else {
            Vec::new()
        };
        let machine = Machine {
            name: "m0".into(),
            accelerators,
            cpus: devices.cpus,
            host,
            peer: None,
            network: host,
        };
        Cluster::new(types, vec![machine], 0.0).expect("a valid device set is a valid cluster")
    }

    /// The summary MODEL.md's fields show: all accelerators, the largest memory, all CPUs.
    pub fn device_set(&self) -> super::DeviceSet {
        super::DeviceSet {
            accelerators: self.accelerators.len(),
            memory_per_accelerator_bytes: self.largest_memory_bytes(),
            cpus: self.cpus.len(),
        }
    }

    /// One line per machine: `m0: 4 x a100-80gb (80.00 GiB), 1 CPU core`.
    pub fn describe(&self) -> Vec<String> {
        self.machines
            .iter()
            .map(|m| {
                let mut parts: Vec<String> = m
                    .accelerators
                    .iter()
                    .map(|&(t, n)| format!("{n} x {}", self.types[t].name))
                    .collect();
                parts.push(format!(
                    "{} CPU core{}",
                    m.cpus,
                    if m.cpus == 1 { "" } else { "s" }
                ));
                format!("{}: {}", m.name, parts.join(", "))
            })
            .collect()
    }
}

/// Node times per device profile: `times[p][v]` is node `v`'s time, ms, on an accelerator of
/// profile `profiles[p]` (the JSON's per-node `latencies`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProfileTimes {
    pub profiles: Vec<String>,
    pub times: Vec<Vec<f64>>,
}

impl ProfileTimes {
    /// The times for `profile`, if the workload has them.
    pub fn get(&self, profile: &str) -> Option<&[f64]> {
        self.profiles
            .iter()
            .position(|p| p == profile)
            .map(|i| self.times[i].as_slice())
    }
}

/// What a workload knows about devices beyond MODEL.md: the reference its numbers were
/// priced on, per-profile node times, and the cluster it targets. The default (no times, no
/// cluster, the paper's reference) is exactly MODEL.md.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Platform {
    pub reference: Reference,
    pub profile_times: ProfileTimes,
    pub cluster: Option<Cluster>,
}

impl Platform {
    /// Checks the platform against a workload of `n` nodes: one time per node per profile,
    /// each finite and ≥ 0, profiles named once; a finite positive reference.
    pub(crate) fn validate(
        &self,
        n: usize,
        node_id: impl Fn(usize) -> i64,
    ) -> Result<(), WorkloadError> {
        let r = &self.reference;
        if !(r.speed.is_finite() && r.speed > 0.0) {
            return Err(bad(
                "reference.speed".into(),
                r.speed,
                "a finite number > 0",
            ));
        }
        if !(r.host_bytes_per_s.is_finite() && r.host_bytes_per_s > 0.0) {
            return Err(bad(
                "reference.host_bytes_per_s".into(),
                r.host_bytes_per_s,
                "a finite number > 0",
            ));
        }
        let pt = &self.profile_times;
        if pt.profiles.len() != pt.times.len() {
            return Err(WorkloadError::BadCluster {
                field: "latencies".into(),
                message: format!(
                    "{} profiles but {} time lists",
                    pt.profiles.len(),
                    pt.times.len()
                ),
            });
        }
        for (p, (name, times)) in pt.profiles.iter().zip(&pt.times).enumerate() {
            if pt.profiles[..p].contains(name) {
                return Err(WorkloadError::BadCluster {
                    field: "latencies".into(),
                    message: format!("profile '{name}' appears twice"),
                });
            }
            if times.len() != n {
                return Err(WorkloadError::BadCluster {
                    field: format!("latencies.{name}"),
                    message: format!("has {} times for {n} nodes", times.len()),
                });
            }
            if let Some(v) = times.iter().position(|x| !(x.is_finite() && *x >= 0.0)) {
                return Err(WorkloadError::BadNumber {
                    what: format!("node {}", node_id(v)),
                    field: "latencies",
                    value: times[v],
                });
            }
        }
        Ok(())
    }
}

/// The speed of a profile relative to the paper's V100 (datasheet: 15.7 TFLOP/s fp32,
/// 900 GB/s): the geometric mean of the fp32-peak and memory-bandwidth ratios. A node of a
/// published workload is some mix of compute- and memory-bound work the file does not say,
/// so neither ratio alone is right; the geometric mean splits the difference. Only used for
/// nodes without a time for the profile; the cost models give every type its own times.
pub fn speed_relative_to_v100(peak_fp32_flops: f64, memory_bandwidth_bytes_per_s: f64) -> f64 {
    ((peak_fp32_flops / 15.7e12) * (memory_bandwidth_bytes_per_s / 900e9)).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Device, DeviceSet};

    fn link(b: f64) -> Link {
        Link {
            bytes_per_s: b,
            latency_ms: 0.01,
        }
    }

    fn ty(name: &str, memory: f64) -> AcceleratorType {
        AcceleratorType {
            name: name.into(),
            profile: name.into(),
            memory_bytes: memory,
            price_per_hour: 1.0,
            speed: 1.0,
        }
    }

    #[test]
    fn devices_are_numbered_machine_by_machine() {
        let m = |name: &str, accs: Vec<(usize, usize)>, cpus| Machine {
            name: name.into(),
            accelerators: accs,
            cpus,
            host: link(1e10),
            peer: None,
            network: link(1e9),
        };
        let c = Cluster::new(
            vec![ty("a", 8.0), ty("b", 4.0)],
            vec![m("m0", vec![(0, 2), (1, 1)], 1), m("m1", vec![(1, 2)], 2)],
            0.0,
        )
        .unwrap();
        let types: Vec<usize> = c
            .accelerators()
            .iter()
            .map(|a| a.accelerator_type)
            .collect();
        assert_eq!(types, [0, 0, 1, 1, 1]);
        assert_eq!(c.cpu_machines(), [0, 1, 1]);
        assert_eq!(c.machine_of(Device::Accelerator(3)), Some(1));
        assert_eq!(c.machine_of(Device::Cpu(0)), Some(0));
        assert_eq!(c.machine_of(Device::Cpu(3)), None);
        assert_eq!(c.count_of_type(1), 3);
        assert_eq!(
            c.device_set(),
            DeviceSet {
                accelerators: 5,
                memory_per_accelerator_bytes: 8.0,
                cpus: 3
            }
        );
    }

    #[test]
    fn bad_clusters_name_the_field() {
        let m = Machine {
            name: "m0".into(),
            accelerators: vec![(0, 1)],
            cpus: 0,
            host: link(0.0),
            peer: None,
            network: link(1.0),
        };
        let e = Cluster::new(vec![ty("a", 1.0)], vec![m.clone()], 0.0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("machines[0].host.bytes_per_s"), "{e}");
        let unused = Cluster::new(
            vec![ty("a", 1.0), ty("b", 1.0)],
            vec![Machine {
                host: link(1.0),
                ..m.clone()
            }],
            0.0,
        );
        assert!(unused
            .unwrap_err()
            .to_string()
            .contains("'b' is on no machine"));
        let empty = Machine {
            accelerators: vec![],
            host: link(1.0),
            ..m
        };
        assert!(Cluster::new(vec![], vec![empty], 0.0)
            .unwrap_err()
            .to_string()
            .contains("no accelerator and no CPU"));
    }

    #[test]
    fn model_md_cluster() {
        let c = Cluster::model_md(
            &DeviceSet {
                accelerators: 3,
                memory_per_accelerator_bytes: 5.0,
                cpus: 2,
            },
            &Reference::paper(),
        );
        assert_eq!(c.accelerators().len(), 3);
        assert_eq!(
            c.machines()[0].host,
            Link {
                bytes_per_s: 15.75e9,
                latency_ms: 0.0
            }
        );
        assert!(c.machines()[0].peer.is_none());
        assert_eq!(speed_relative_to_v100(15.7e12, 900e9), 1.0);
    }
}

//! The evaluator on a cluster: validity, per-device loads under the communication rule of
//! [`crate::model::cluster`], TPS, the synchronous objective, and contiguity with the
//! machine order.
//!
//! For device `d` holding `S_d` (with `R(u)` the other devices holding a successor of `u`):
//!
//! ```text
//! load(d) = Σ_{v∈S_d} x(v, d)  +  Σ_{u∈S_d, R(u)≠∅} send(u, d)  +  Σ_{u∉S_d, d∈R(u)} receive(u, p(u), d)
//! ```
//!
//! with `x(v, d)` the node's time on `d`'s type (cpuLatency on a CPU) and `send`, `receive`
//! from [`ClusterCosts`]. Both scorers are one accumulation
//! ([`super::load::accumulate_loads`]), so on MODEL.md's device set as a cluster
//! ([`Cluster::model_md`]) every sum is formed in the same order as
//! [`super::load::device_loads`] and the loads are equal bit for bit. TPS = `max_d load(d)`; sync = `max_d FW(d) + max_d BW(d)` (communication on
//! the side of the node that produces it).
//!
//! **Contiguity on a cluster** adds to MODEL.md's ([`super::contiguity`]) that the stages
//! fill machines in order: the graph with an arc `μ → μ'` whenever a class arc goes from a
//! device of machine `μ` to one of `μ' ≠ μ` must be acyclic. Then the machines can be
//! ordered, each machine's devices form one consecutive run of pipeline stages, and the
//! union of the first machines' sets is an ideal — the plan space of the cluster DP.
//!
//! Complexity: O(n + m) for the loads, O(n + m + C + A) with the contiguity checks.
//!
//! [`Cluster::model_md`]: crate::model::Cluster::model_md

use std::collections::{BTreeMap, HashMap};

use super::contiguity::{contiguity_violations_in, ClassGraph};
use super::load::{accumulate_loads, max_load, sync_objective, DeviceLoad};
use super::validity::Violation;
use crate::model::{ClusterCosts, Device, Placement, Workload};

/// Everything the scorer knows about a placement on a cluster.
#[derive(Clone, Debug)]
pub struct ClusterEvaluation {
    /// Loads of the devices that hold nodes or pay communication.
    pub devices: Vec<DeviceLoad>,
    /// Time-Per-Sample: the maximum load.
    pub max_load: f64,
    pub bottleneck: Option<Device>,
    /// `max_d FW(d) + max_d BW(d)`.
    pub sync_objective: f64,
    /// Broken hard rules (devices, colour classes, support, memory per type).
    pub violations: Vec<Violation>,
    /// Devices whose sets are not contiguous, or machines that feed each other.
    pub non_contiguous: Vec<Violation>,
}

impl ClusterEvaluation {
    pub fn is_valid(&self) -> bool {
        self.violations.is_empty()
    }
    pub fn is_contiguous(&self) -> bool {
        self.non_contiguous.is_empty()
    }
}

/// Scores `p` on the cluster of `costs`.
pub fn evaluate_on_cluster(w: &Workload, costs: &ClusterCosts, p: &Placement) -> ClusterEvaluation {
    evaluate_on_cluster_in(w, costs, &ClassGraph::new(w), p)
}

/// [`evaluate_on_cluster`] with the workload's class graph built by the caller (one
/// contraction for the many plans a heuristic scores).
pub fn evaluate_on_cluster_in(
    w: &Workload,
    costs: &ClusterCosts,
    classes: &ClassGraph,
    p: &Placement,
) -> ClusterEvaluation {
    let violations = cluster_violations(w, costs, p);
    if violations.iter().any(|v| {
        matches!(
            v,
            Violation::WrongLength { .. } | Violation::NoSuchDevice { .. }
        )
    }) {
        return ClusterEvaluation {
            devices: Vec::new(),
            max_load: f64::INFINITY,
            bottleneck: None,
            sync_objective: f64::INFINITY,
            violations,
            non_contiguous: Vec::new(),
        };
    }
    let devices = cluster_loads(w, costs, p);
    let (max, bottleneck) = max_load(&devices);
    let mut non_contiguous = contiguity_violations_in(w, classes, p);
    if non_contiguous.is_empty() {
        non_contiguous.extend(machine_cycle_in(w, costs, classes, p));
    }
    ClusterEvaluation {
        sync_objective: sync_objective(&devices),
        devices,
        max_load: max,
        bottleneck,
        violations,
        non_contiguous,
    }
}

/// The hard rules on a cluster: every device exists, colour classes together, unsupported
/// nodes on CPUs, each accelerator's nodes within its type's memory.
pub fn cluster_violations(w: &Workload, costs: &ClusterCosts, p: &Placement) -> Vec<Violation> {
    let mut out = Vec::new();
    if p.assignment.len() != w.len() {
        out.push(Violation::WrongLength {
            expected: w.len(),
            got: p.assignment.len(),
        });
        return out;
    }
    let c = costs.cluster();
    let (k, l) = (c.accelerators().len(), c.cpu_machines().len());
    let mut memory: BTreeMap<usize, f64> = BTreeMap::new();
    let mut class_seen: HashMap<i64, (i64, Device)> = HashMap::new();
    for (v, &device) in p.assignment.iter().enumerate() {
        let node = w.node(v);
        match device {
            Device::Accelerator(i) => {
                if i >= k {
                    out.push(Violation::NoSuchDevice {
                        node: node.id,
                        device,
                        available: k,
                    });
                    continue;
                }
                if !node.supported_on_accelerator {
                    out.push(Violation::Unsupported {
                        node: node.id,
                        device,
                    });
                }
                *memory.entry(i).or_insert(0.0) += node.size_bytes;
            }
            Device::Cpu(j) => {
                if j >= l {
                    out.push(Violation::NoSuchDevice {
                        node: node.id,
                        device,
                        available: l,
                    });
                }
            }
        }
        if let Some(class) = node.color_class {
            match class_seen.get(&class) {
                Some(&(a, da)) if da != device => out.push(Violation::ColorClassSplit {
                    class,
                    a,
                    da,
                    b: node.id,
                    db: device,
                }),
                Some(_) => {}
                None => {
                    class_seen.insert(class, (node.id, device));
                }
            }
        }
    }
    for (i, used) in memory {
        let limit = costs.memory_of(i);
        if used > limit {
            out.push(Violation::Memory {
                device: Device::Accelerator(i),
                used,
                limit,
            });
        }
    }
    out
}

/// Loads of every device that holds a node or pays communication, accelerators first, by
/// index (module documentation). The placement must name only devices of the cluster.
pub fn cluster_loads(w: &Workload, costs: &ClusterCosts, p: &Placement) -> Vec<DeviceLoad> {
    // A recomputing accelerator runs its forward nodes again, on its own type, as the
    // MODEL.md scorer counts it.
    accumulate_loads(
        w,
        p,
        |v, d| costs.compute(w, v, d),
        |u, du| costs.send(u, du),
        |u, du, d| costs.receive(u, du, d),
    )
}

/// A cycle of machines feeding each other, if any (module documentation).
pub fn machine_cycle(w: &Workload, costs: &ClusterCosts, p: &Placement) -> Option<Violation> {
    machine_cycle_in(w, costs, &ClassGraph::new(w), p)
}

/// [`machine_cycle`] with the workload's class graph built by the caller.
pub fn machine_cycle_in(
    w: &Workload,
    costs: &ClusterCosts,
    g: &ClassGraph,
    p: &Placement,
) -> Option<Violation> {
    let (class, succ) = (&g.class, &g.succ);
    let classes = succ.len();
    let mut class_node = vec![(0i64, Device::Cpu(0)); classes];
    for (v, &d) in p.assignment.iter().enumerate() {
        class_node[class[v]] = (w.node(v).id, d);
    }
    let machines = costs.cluster().machines().len();
    let mut arc: Vec<Vec<Option<(i64, i64)>>> = vec![vec![None; machines]; machines];
    for (a, list) in succ.iter().enumerate() {
        for &b in list {
            let ((na, da), (nb, db)) = (class_node[a], class_node[b]);
            let (ma, mb) = (
                costs.cluster().machine_of(da)?,
                costs.cluster().machine_of(db)?,
            );
            if ma != mb && arc[ma][mb].is_none() {
                arc[ma][mb] = Some((na, nb));
            }
        }
    }
    // Depth-first search over at most |machines| vertices.
    let mut state = vec![0u8; machines];
    let mut path = Vec::new();
    fn visit(
        m: usize,
        arc: &[Vec<Option<(i64, i64)>>],
        state: &mut [u8],
        path: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        state[m] = 1;
        path.push(m);
        for next in 0..arc.len() {
            if arc[m][next].is_none() {
                continue;
            }
            if state[next] == 1 {
                let at = path.iter().position(|&x| x == next).expect("on the path");
                let mut cycle = path[at..].to_vec();
                cycle.push(next);
                return Some(cycle);
            }
            if state[next] == 0 {
                if let Some(c) = visit(next, arc, state, path) {
                    return Some(c);
                }
            }
        }
        path.pop();
        state[m] = 2;
        None
    }
    for m in 0..machines {
        if state[m] == 0 {
            if let Some(cycle) = visit(m, &arc, &mut state, &mut path) {
                let names = costs.cluster().machines();
                let steps: Vec<String> = cycle
                    .windows(2)
                    .map(|s| {
                        let (u, v) = arc[s[0]][s[1]].expect("an arc");
                        format!(
                            "{} -> {} (node {u} -> node {v})",
                            names[s[0]].name, names[s[1]].name
                        )
                    })
                    .collect();
                let device = p
                    .assignment
                    .iter()
                    .copied()
                    .find(|&d| costs.cluster().machine_of(d) == Some(cycle[0]))?;
                return Some(Violation::NotContiguous {
                    device,
                    witness: format!(
                        "the machines feed each other in a cycle: {}; a contiguous plan fills machines in order",
                        steps.join(", ")
                    ),
                });
            }
        }
    }
    None
}

//! A MODEL.md training workload, with its optional per-node `tensorParallel` options
//! ([`crate::io::tensor_parallel_json`]), as the [`ChainCosts`] a parallel layout splits
//! (`plan WORKLOAD.json --parallel 3d`, `docs/parallel.md`, "A workload JSON").
//!
//! **Units.** Unit `i` is the set of nodes of the `i`-th smallest `layerId` (every node needs
//! one), as the transformer's chain: a stage holds consecutive layers. The workload must be
//! a chain of them: training (at least one backward node), every node on accelerators
//! (`supportedOnFpga`), every colour class inside one layer, every edge inside a layer or
//! between neighbouring layers, and no node sending to both neighbours; each refusal is a
//! [`ChainError`] naming the node.
//!
//! **Micro-batch.** The workload's numbers are one micro-batch of `b` samples (`b` is the
//! caller's, `--micro-batch`; it is not rescaled).
//!
//! **Costs of unit `i` at TP degree `t`**, per device, on accelerator type `τ` of the cluster
//! (`x_τ(v)` its time for node `v`: the workload's time for `τ`'s profile, else
//! `fpgaLatency(v) · s_ref / s_τ`, [`crate::model::ClusterCosts`]):
//!
//! ```text
//! time_t(v)   = x_τ(v)                                        t = 1
//!             = fpgaLatency_t(v) · x_τ(v) / fpgaLatency(v)     t > 1 (· s_ref / s_τ when fpgaLatency(v) = 0)
//! forward_ms  = Σ_{forward v} time_t(v)        backward_ms = Σ_{backward v} time_t(v)
//! weights     = Σ_v W_t(v) + R_t(v)      (R = size − W − G − O − A: held once, as weights)
//! gradients   = Σ_v G_t(v)   optimizer = Σ_v O_t(v)   activations = Σ_v A_t(v)
//! all-reduces = the forward nodes' allReduceBytes (k_f of them, X_f bytes in all) and the
//!               backward nodes' (k_b, X_b): k_f all-reduces of X_f / k_f bytes forward,
//!               k_b of X_b / k_b backward
//! ```
//!
//! A ring all-reduce's time is affine in its bytes with the same latency term for each, so
//! `k · all-reduce(X / k, t) = Σ all-reduce(x_j, t)` exactly: the sizes need not be equal.
//! FLOPs are not in a workload: 0 (TFLOP/s and MFU print as 0). Under full recomputation a
//! unit keeps its input: the forward transfers across the cut before it (the first unit: 0).
//!
//! **Cuts.** A producer `u` in unit `i` with an edge into unit `i + 1` crosses the cut before
//! `i + 1` forward; one with an edge into unit `i − 1` crosses the cut before `i` backward;
//! each once, of `c(u) · B_ref / 1000` bytes, so that a transfer over a link `L` costs
//! `λ_L + c(u) · B_ref / B_L`, the cluster model's price ([`crate::model::ClusterCosts`]).
//! With `t = d = 1` and one micro-batch per iteration, a stage's time is therefore the
//! cluster model's load of the same layers on one device.
//!
//! **Degrees.** [`common_degrees`]: 1 and every degree each node has an option for (a node
//! without options has only `t = 1`, so it leaves only `t = 1`).
//!
//! Complexity: O((n + m) · |T|) for `n` nodes, `m` edges, `|T|` degrees.

use std::collections::BTreeMap;

use crate::io::tensor_parallel_json::{TpOption, TpOptions};
use crate::model::parallel::{ChainCosts, CutTransfers, TpCost, Unit};
use crate::model::{Cluster, ClusterCosts, Workload};

/// Why a workload is not a chain the 3D planner can split (module documentation).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ChainError {
    #[error("the workload has no backward node: --parallel 3d plans training (forward and backward passes, the data-parallel gradient sync); plan an inference workload without --parallel")]
    Inference,
    #[error("node {node}: no layerId (--parallel 3d splits a workload between layers: every node needs a layerId)")]
    NoLayer { node: i64 },
    #[error("node {node}: supportedOnFpga is false, but every stage of a parallel layout runs on accelerators")]
    CpuOnly { node: i64 },
    #[error("node {node}: colour class {class} spans layers {a} and {b}; a stage boundary between layers would split it")]
    ClassSpansLayers {
        node: i64,
        class: i64,
        a: i64,
        b: i64,
    },
    #[error("edge {from} -> {to}: from layer {a} to layer {b}, not a neighbouring layer: the layers are not a chain")]
    NotChain { from: i64, to: i64, a: i64, b: i64 },
    #[error("node {node} (layer {layer}) sends to both the layer before and the layer after it: the layers are not a chain")]
    BothWays { node: i64, layer: i64 },
    #[error("node {node} has no tensorParallel option of degree {degree}")]
    MissingDegree { node: i64, degree: usize },
    #[error("the TP degrees must start with 1")]
    Degrees,
    #[error("accelerator type {0} is not in the cluster")]
    Type(usize),
}

/// 1 and every degree each node of `w` has an option for, ascending.
pub fn common_degrees(w: &Workload, options: &TpOptions) -> Vec<usize> {
    let of = |id: i64| -> Vec<usize> {
        options
            .get(&id)
            .map_or_else(Vec::new, |o| o.iter().map(|x| x.degree).collect())
    };
    let Some(first) = w.nodes().first() else {
        return vec![1];
    };
    let mut common = of(first.id);
    for n in w.nodes() {
        let mine = of(n.id);
        common.retain(|t| mine.contains(t));
    }
    std::iter::once(1).chain(common).collect()
}

/// The unit index of every node (module documentation), and the units' layer ids.
fn units_of(w: &Workload) -> Result<(Vec<usize>, Vec<i64>), ChainError> {
    if !w.nodes().iter().any(|n| n.is_backward) {
        return Err(ChainError::Inference);
    }
    let mut layers = Vec::with_capacity(w.len());
    for n in w.nodes() {
        if !n.supported_on_accelerator {
            return Err(ChainError::CpuOnly { node: n.id });
        }
        layers.push(n.layer_id.ok_or(ChainError::NoLayer { node: n.id })?);
    }
    let mut ids = layers.clone();
    ids.sort_unstable();
    ids.dedup();
    let unit_of: Vec<usize> = layers
        .iter()
        .map(|l| ids.binary_search(l).expect("listed"))
        .collect();
    let mut class_layer: BTreeMap<i64, i64> = BTreeMap::new();
    for (n, &l) in w.nodes().iter().zip(&layers) {
        if let Some(c) = n.color_class {
            let first = *class_layer.entry(c).or_insert(l);
            if first != l {
                return Err(ChainError::ClassSpansLayers {
                    node: n.id,
                    class: c,
                    a: first,
                    b: l,
                });
            }
        }
    }
    Ok((unit_of, ids))
}

/// The transfers across every cut, bytes (module documentation).
fn cuts_of(w: &Workload, unit_of: &[usize], ids: &[i64]) -> Result<Vec<CutTransfers>, ChainError> {
    let b_ref = w.platform().reference.host_bytes_per_s;
    let mut cuts = vec![CutTransfers::default(); ids.len() + 1];
    for u in 0..w.len() {
        let a = unit_of[u];
        let (mut up, mut down) = (false, false);
        for &v in w.successors(u) {
            let b = unit_of[v];
            up |= b == a + 1;
            down |= b + 1 == a;
            if b > a + 1 || b + 1 < a {
                return Err(ChainError::NotChain {
                    from: w.node(u).id,
                    to: w.node(v).id,
                    a: ids[a],
                    b: ids[b],
                });
            }
        }
        if up && down {
            return Err(ChainError::BothWays {
                node: w.node(u).id,
                layer: ids[a],
            });
        }
        let bytes = w.out_cost(u) * b_ref / 1e3;
        if up {
            cuts[a + 1].forward.push(bytes);
        } else if down {
            cuts[a].backward.push(bytes);
        }
    }
    Ok(cuts)
}

/// Node `v`'s option at degree `t` (`None` at `t = 1`: the node itself).
fn option_at<'a>(
    w: &Workload,
    options: &'a TpOptions,
    v: usize,
    t: usize,
) -> Result<Option<&'a TpOption>, ChainError> {
    if t == 1 {
        return Ok(None);
    }
    let id = w.node(v).id;
    options
        .get(&id)
        .and_then(|o| o.iter().find(|x| x.degree == t))
        .map(Some)
        .ok_or(ChainError::MissingDegree {
            node: id,
            degree: t,
        })
}

/// Adds node `v` at degree `t` to unit cost `c`; `scale` turns a reference time into
/// type `τ`'s, `own` is `x_τ(v)`; `all_reduces` gathers `(k, X)` forward and backward.
fn add_node(
    c: &mut TpCost,
    w: &Workload,
    (v, option): (usize, Option<&TpOption>),
    (own, scale): (f64, f64),
    all_reduces: &mut [(u32, f64); 2],
) {
    let n = w.node(v);
    let (time, size, memory, reduces) = match option {
        None => (own, n.size_bytes, n.memory.unwrap_or_default(), &[][..]),
        Some(o) => (
            o.fpga_latency * scale,
            o.size_bytes,
            o.memory,
            o.all_reduce_bytes.as_slice(),
        ),
    };
    if n.is_backward {
        c.backward_ms += time;
    } else {
        c.forward_ms += time;
    }
    let rest = size - memory.total_bytes();
    c.weight_bytes += memory.weight_bytes + rest.max(0.0);
    c.gradient_bytes += memory.gradient_bytes;
    c.optimizer_bytes += memory.optimizer_bytes;
    c.activation_bytes += memory.activation_bytes;
    let pass = &mut all_reduces[usize::from(n.is_backward)];
    pass.0 += reduces.len() as u32;
    pass.1 += reduces.iter().sum::<f64>();
}

/// The chain of `w` on accelerator type `ty` of `cluster` at the degrees `tp_degrees`
/// (starting with 1), for one micro-batch of `micro_batch` samples; `peak_flops` for MFU
/// (module documentation).
pub fn workload_chain(
    w: &Workload,
    options: &TpOptions,
    (cluster, ty): (&Cluster, usize),
    tp_degrees: &[usize],
    (micro_batch, peak_flops): (usize, f64),
) -> Result<ChainCosts, ChainError> {
    if tp_degrees.first() != Some(&1) {
        return Err(ChainError::Degrees);
    }
    let accel = cluster.types().get(ty).ok_or(ChainError::Type(ty))?;
    let (unit_of, ids) = units_of(w)?;
    let cuts = cuts_of(w, &unit_of, &ids)?;
    let costs = ClusterCosts::new(w, cluster);
    let speed_ratio = w.platform().reference.speed / accel.speed;
    let mut units: Vec<Unit> = ids
        .iter()
        .map(|&l| Unit {
            name: format!("layer {l}"),
            layer_id: l,
            costs: Vec::with_capacity(tp_degrees.len()),
        })
        .collect();
    for &t in tp_degrees {
        let mut sums = vec![TpCost::default(); ids.len()];
        let mut reduces = vec![[(0u32, 0.0f64); 2]; ids.len()];
        for (v, &u) in unit_of.iter().enumerate() {
            let own = costs.time(ty, v);
            let f = w.node(v).fpga_latency;
            let scale = if f > 0.0 { own / f } else { speed_ratio };
            let option = option_at(w, options, v, t)?;
            add_node(&mut sums[u], w, (v, option), (own, scale), &mut reduces[u]);
        }
        for (u, (mut c, [(kf, xf), (kb, xb)])) in sums.into_iter().zip(reduces).enumerate() {
            c.tp_forward_all_reduces = kf;
            c.tp_backward_all_reduces = kb;
            c.tp_all_reduce_bytes = if kf > 0 { xf / f64::from(kf) } else { 0.0 };
            c.tp_backward_all_reduce_bytes = if kb > 0 { xb / f64::from(kb) } else { 0.0 };
            c.checkpoint_bytes = cuts[u].forward.iter().sum();
            units[u].costs.push(c);
        }
    }
    Ok(ChainCosts {
        tp_degrees: tp_degrees.to_vec(),
        micro_batch,
        sequence_parallel: false,
        units,
        cuts,
        peak_flops,
        model_flops: 0.0,
    })
}

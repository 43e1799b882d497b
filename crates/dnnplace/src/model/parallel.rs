//! Parallel layouts: pipeline stages, each on `t·d` accelerators — `d` data-parallel
//! replicas of a tensor-parallel group of `t` devices — with ZeRO sharding, a micro-batch
//! size and a pipeline schedule. `docs/parallel.md` states the model in full; this module
//! holds its data and its collective formulas, [`crate::score::parallel`] prices a layout,
//! [`crate::solve::parallel`] searches them.
//!
//! **The chain.** A model is a chain of *units* `0..U` (the transformer's embeddings, its
//! blocks and its head: one unit per `layerId`). A stage holds a contiguous range of units.
//! [`ChainCosts`] holds, for one micro-batch size `b` and one accelerator profile, every
//! unit's [`TpCost`] at every allowed TP degree `t`, and the transfers that cross each cut
//! between units (one entry per producing operator, MODEL.md's rule: each producer's
//! output counted once per receiving stage).
//!
//! **Devices.** A [`Topology`] is `machines × per_machine` accelerators of one type, with a
//! peer link inside a machine (or, without one, the host link: transfers staged through host
//! memory), and a network link between machines. Stage `s` occupies the devices
//! `first_s .. first_s + t·d`; replica `r`, TP rank `j` is device `first_s + r·t + j` (TP
//! innermost, then DP, then PP: Megatron-LM's default order). A TP group never spans
//! machines (`t` divides `per_machine`, and stages start at multiples of `t`).
//!
//! **Several types.** A [`MixedTopology`] is one [`Topology`] per accelerator type (its
//! *group*), devices numbered group by group; a stage lies inside one group and is priced
//! with that type's [`ChainCosts`]; between groups a transfer runs on the receiving
//! machine's network link ([`crate::solve::parallel::mixed`] states the space searched).
//!
//! **Collectives** on a link of bandwidth `B` (bytes/s) and latency `λ` (ms), among `n`
//! devices, of a tensor of `x` bytes (ring algorithms):
//!
//! ```text
//! all-reduce(x, n)      = 2(n − 1)·λ + 2(n − 1)/n · x / B        (0 when n = 1)
//! all-gather(x, n)      =  (n − 1)·λ +  (n − 1)/n · x / B        (x = the gathered size)
//! reduce-scatter(x, n)  =  all-gather(x, n)
//! transfer(x)           =  λ + x / B                              (0 when x = 0)
//! ```
//!
//! A collective among devices of one machine runs on its peer link (host link without
//! one), otherwise on the network link (per device: rail-optimised networks give each
//! accelerator its own NIC).
//!
//! **Interleaved layouts** (`--schedule interleaved:v`, Megatron-LM's virtual pipeline):
//! `p` stages, each on one group of `t·d` devices, each holding `v` model *chunks*. The
//! layout's `stages` then lists the `p·v` chunks in chain order (Megatron's *virtual
//! stages*): chunk `c` holds a contiguous range of units and runs on the devices of stage
//! `c mod p` ([`Layout::interleaved`], [`Layout::chunks_of`]); the stage's own figures sum
//! its chunks ([`crate::score::parallel`]). The planner's chunks are Megatron's even split
//! ([`equal_chunk_bounds`]): the units between the first and the last (the decoder blocks)
//! divided into `p·v` equal runs, the first unit (embeddings) with chunk 0 and the last
//! (head) with chunk `p·v − 1`.

use std::ops::Range;

use super::cluster::{Cluster, Link};
use super::schedule::Schedule;

/// ZeRO sharding of the data-parallel replicas' training state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Zero {
    /// Every replica holds everything; gradients are all-reduced.
    Off,
    /// ZeRO-1: optimizer state divided by `d`.
    Optimizer,
    /// ZeRO-2: optimizer state and gradients divided by `d`.
    Gradients,
    /// ZeRO-3: optimizer state, gradients and weights divided by `d`; weights all-gathered
    /// for every micro-batch's forward and backward.
    Parameters,
}

impl Zero {
    /// Every stage, in order.
    pub const ALL: [Zero; 4] = [
        Zero::Off,
        Zero::Optimizer,
        Zero::Gradients,
        Zero::Parameters,
    ];

    /// The ZeRO stage number 0–3.
    pub fn stage(self) -> u8 {
        self as u8
    }

    /// The stage of number `n` (0–3).
    pub fn from_stage(n: u8) -> Option<Zero> {
        Zero::ALL.get(n as usize).copied()
    }
}

/// One unit's costs at one TP degree, per micro-batch, per device of the TP group.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct TpCost {
    /// Forward time, ms.
    pub forward_ms: f64,
    /// Backward time, ms.
    pub backward_ms: f64,
    /// Forward plus backward FLOPs one device runs.
    pub flops: f64,
    /// Weights one device holds, bytes.
    pub weight_bytes: f64,
    /// Gradients one device holds, bytes.
    pub gradient_bytes: f64,
    /// Optimizer state one device holds, bytes.
    pub optimizer_bytes: f64,
    /// Activations one device stashes for the backward pass, bytes per micro-batch.
    pub activation_bytes: f64,
    /// What the unit keeps per micro-batch under full recomputation: its input, bytes.
    pub checkpoint_bytes: f64,
    /// All-reduces TP adds to the forward pass (0 when `t = 1`).
    pub tp_forward_all_reduces: u32,
    /// All-reduces TP adds to the backward pass.
    pub tp_backward_all_reduces: u32,
    /// Bytes of each forward all-reduce.
    pub tp_all_reduce_bytes: f64,
    /// Bytes of each backward all-reduce (the transformer's: the forward ones'; a workload
    /// JSON's options may differ, [`crate::costmodel::workload_chain`]).
    pub tp_backward_all_reduce_bytes: f64,
}

impl TpCost {
    /// The TP all-reduces of `forward_passes` forward passes (1, or 2 with recomputation)
    /// and one backward pass among `t` devices on `link`, ms:
    /// `forward_passes · k_f · all-reduce(x_f, t) + k_b · all-reduce(x_b, t)`.
    pub fn tp_collectives_ms(&self, link: Link, t: usize, forward_passes: u32) -> f64 {
        let forward = all_reduce_ms(link, self.tp_all_reduce_bytes, t);
        let count_f = self.tp_forward_all_reduces * forward_passes;
        if self.tp_backward_all_reduce_bytes == self.tp_all_reduce_bytes {
            // One size: the count times one all-reduce (the transformer's figures, unchanged).
            return f64::from(count_f + self.tp_backward_all_reduces) * forward;
        }
        let backward = all_reduce_ms(link, self.tp_backward_all_reduce_bytes, t);
        f64::from(count_f) * forward + f64::from(self.tp_backward_all_reduces) * backward
    }
}

/// One unit of the chain.
#[derive(Clone, Debug, PartialEq)]
pub struct Unit {
    /// Display name (`embeddings`, `layers.3`, `head`).
    pub name: String,
    /// The `layerId` of its operators.
    pub layer_id: i64,
    /// Its costs at each of [`ChainCosts::tp_degrees`], in that order.
    pub costs: Vec<TpCost>,
}

/// The transfers crossing the cut before one unit: bytes per producing operator.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct CutTransfers {
    /// Forward outputs of units before the cut read after it.
    pub forward: Vec<f64>,
    /// Gradients computed after the cut for inputs produced before it.
    pub backward: Vec<f64>,
}

/// Every unit's costs for one micro-batch size on one accelerator profile.
#[derive(Clone, Debug, PartialEq)]
pub struct ChainCosts {
    /// TP degrees the costs are given for, ascending, starting with 1.
    pub tp_degrees: Vec<usize>,
    /// Samples per micro-batch `b`.
    pub micro_batch: usize,
    /// The TP groups also split the sequence (Megatron-LM's `--sequence-parallel`; the
    /// costs say how, [`crate::costmodel::parallel`]).
    pub sequence_parallel: bool,
    pub units: Vec<Unit>,
    /// `cuts[c]`: the transfers across the cut before unit `c` (`c = 1..U`; `cuts[0]` and
    /// `cuts[U]` are empty). Length `U + 1`.
    pub cuts: Vec<CutTransfers>,
    /// Peak FLOP/s of one device for the model's dtype (matrix products), for MFU.
    pub peak_flops: f64,
    /// Forward plus backward FLOPs of one micro-batch of the whole model (`t = 1`).
    pub model_flops: f64,
}

impl ChainCosts {
    /// Index of TP degree `t` in [`ChainCosts::tp_degrees`].
    pub fn tp_index(&self, t: usize) -> Option<usize> {
        self.tp_degrees.iter().position(|&x| x == t)
    }

    /// Number of units `U`.
    pub fn len(&self) -> usize {
        self.units.len()
    }

    pub fn is_empty(&self) -> bool {
        self.units.is_empty()
    }
}

/// Identical machines of one accelerator type (module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    pub machines: usize,
    pub per_machine: usize,
    /// Memory of one accelerator, bytes.
    pub memory_bytes: f64,
    /// The accelerator type's display name and profile.
    pub type_name: String,
    pub profile: String,
    pub peer: Option<Link>,
    pub host: Link,
    pub network: Link,
}

impl Topology {
    /// The topology of a cluster whose machines all hold the same number of accelerators
    /// of one type, with equal links; an error naming the first difference otherwise.
    pub fn from_cluster(cluster: &Cluster) -> Result<Topology, String> {
        let types = cluster.types();
        if types.len() != 1 {
            let names: Vec<&str> = types.iter().map(|t| t.name.as_str()).collect();
            return Err(format!(
                "parallel layouts need one accelerator type (several: --free); the cluster has {} ({})",
                names.len(),
                names.join(", ")
            ));
        }
        let machines: Vec<_> = cluster
            .machines()
            .iter()
            .filter(|m| !m.accelerators.is_empty())
            .collect();
        Topology::of_machines(&types[0], &machines)
    }

    /// The topology of `machines`, all holding accelerators of type `ty`: an error naming
    /// the first machine whose size or links differ from the first's.
    fn of_machines(
        ty: &super::cluster::AcceleratorType,
        machines: &[&super::Machine],
    ) -> Result<Topology, String> {
        let first = machines[0];
        let count = |m: &super::Machine| m.accelerators.iter().map(|a| a.1).sum::<usize>();
        for m in &machines[1..] {
            if count(m) != count(first) {
                return Err(format!(
                    "parallel layouts need machines of equal size; machine '{}' has {} accelerators, '{}' has {}",
                    m.name,
                    count(m),
                    first.name,
                    count(first)
                ));
            }
            if m.peer != first.peer || m.network != first.network || m.host != first.host {
                return Err(format!(
                    "parallel layouts need machines with equal links; '{}' differs from '{}'",
                    m.name, first.name
                ));
            }
        }
        Ok(Topology {
            machines: machines.len(),
            per_machine: count(first),
            memory_bytes: ty.memory_bytes,
            type_name: ty.name.clone(),
            profile: ty.profile.clone(),
            peer: first.peer,
            host: first.host,
            network: first.network,
        })
    }

    /// Accelerators in all.
    pub fn devices(&self) -> usize {
        self.machines * self.per_machine
    }

    /// The machine of device `d`.
    pub fn machine_of(&self, d: usize) -> usize {
        d / self.per_machine
    }

    /// The link inside a machine: the peer link, or the host link without one.
    pub fn intra_link(&self) -> Link {
        self.peer.unwrap_or(self.host)
    }

    /// The link a collective among `devices` runs on (module documentation).
    pub fn link_among(&self, devices: impl IntoIterator<Item = usize>) -> Link {
        let mut machines = devices.into_iter().map(|d| self.machine_of(d));
        let first = machines.next();
        if machines.all(|m| Some(m) == first) {
            self.intra_link()
        } else {
            self.network
        }
    }
}

/// A cluster of several accelerator types for free layouts (`docs/parallel.md`, "Several
/// accelerator types"): one [`Topology`] per type — its *group*: every machine holding that
/// type, of equal size and links — in the order the types first appear in the cluster.
/// Devices are numbered group by group: group `g` holds the global devices
/// `offset(g) .. offset(g) + devices(g)`, machine by machine, so a stage's machines and
/// devices read the same way as on one type. Every group has the same accelerators per
/// machine (the display numbers machines as `device / per_machine`). Between groups a
/// transfer runs on the receiving machine's network link (MODEL.md's `N_μ`: "into this
/// machine"), as between machines of one type.
#[derive(Clone, Debug, PartialEq)]
pub struct MixedTopology {
    pub groups: Vec<Topology>,
}

impl MixedTopology {
    /// The groups of `cluster`: an error naming the machine that holds several types, or
    /// the group whose machines differ, or machine sizes that differ between groups.
    pub fn from_cluster(cluster: &Cluster) -> Result<MixedTopology, String> {
        let types = cluster.types();
        let mut members: Vec<Vec<&super::Machine>> = vec![Vec::new(); types.len()];
        for m in cluster.machines() {
            match m.accelerators.as_slice() {
                [] => {}
                [(ty, _), rest @ ..] => {
                    if rest.iter().any(|(t, _)| t != ty) {
                        return Err(format!(
                            "machine '{}' holds several accelerator types; a 3D stage lies on machines of one type",
                            m.name
                        ));
                    }
                    members[*ty].push(m);
                }
            }
        }
        let mut groups = Vec::new();
        for (ty, ms) in types.iter().zip(&members) {
            if ms.is_empty() {
                continue;
            }
            groups.push(Topology::of_machines(ty, ms)?);
        }
        if groups.is_empty() {
            return Err("the cluster has no accelerators".into());
        }
        if let Some(g) = groups
            .iter()
            .find(|g| g.per_machine != groups[0].per_machine)
        {
            return Err(format!(
                "the accelerator types' machines must hold equally many devices: {} machines hold {}, {} machines {}",
                groups[0].type_name, groups[0].per_machine, g.type_name, g.per_machine
            ));
        }
        Ok(MixedTopology { groups })
    }

    /// Machines in all.
    pub fn machines(&self) -> usize {
        self.groups.iter().map(|g| g.machines).sum()
    }

    /// The cluster cut to its first `k` machines in its order (group by group, each group's
    /// machines while they last; device numbers unchanged); `None` for `k = 0`.
    pub fn first_machines(&self, k: usize) -> Option<MixedTopology> {
        let mut left = k;
        let mut groups = Vec::new();
        for g in &self.groups {
            if left == 0 {
                break;
            }
            let take = g.machines.min(left);
            left -= take;
            groups.push(Topology {
                machines: take,
                ..g.clone()
            });
        }
        (!groups.is_empty()).then_some(MixedTopology { groups })
    }

    /// The first global device of group `g`.
    pub fn offset(&self, g: usize) -> usize {
        self.groups[..g].iter().map(Topology::devices).sum()
    }

    /// Accelerators in all.
    pub fn devices(&self) -> usize {
        self.groups.iter().map(Topology::devices).sum()
    }

    /// The group of global device `d`.
    pub fn group_of(&self, d: usize) -> Option<usize> {
        let mut start = 0;
        for (g, t) in self.groups.iter().enumerate() {
            if d < start + t.devices() {
                return Some(g);
            }
            start += t.devices();
        }
        None
    }

    /// The whole cluster as one numbering of machines and devices, for display: the first
    /// group's links and memory, the types' names joined by `+`.
    pub fn display(&self) -> Topology {
        let names: Vec<&str> = self.groups.iter().map(|g| g.type_name.as_str()).collect();
        Topology {
            machines: self.groups.iter().map(|g| g.machines).sum(),
            type_name: names.join("+"),
            ..self.groups[0].clone()
        }
    }
}

/// One stage of a layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageLayout {
    /// The units it holds.
    pub units: Range<usize>,
    /// TP degree `t`.
    pub tensor_parallel: usize,
    /// DP degree `d`.
    pub data_parallel: usize,
    /// Its first device; it holds `first_device .. first_device + t·d`.
    pub first_device: usize,
}

impl StageLayout {
    /// Devices it occupies, `t·d`.
    pub fn width(&self) -> usize {
        self.tensor_parallel * self.data_parallel
    }

    /// Device of replica `r`, TP rank `j`.
    pub fn device(&self, r: usize, j: usize) -> usize {
        self.first_device + r * self.tensor_parallel + j
    }

    /// Every device of the stage, replica by replica.
    pub fn devices(&self) -> Range<usize> {
        self.first_device..self.first_device + self.width()
    }
}

/// One uniform configuration: every stage with the same `t`, `d`, ZeRO stage and
/// recomputation, `stages` of them, micro-batch `b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Uniform {
    pub micro_batch: usize,
    pub tensor_parallel: usize,
    pub data_parallel: usize,
    pub zero: Zero,
    pub recompute: bool,
    pub stages: usize,
}

/// A parallel layout (module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub stages: Vec<StageLayout>,
    /// Samples per micro-batch `b`.
    pub micro_batch: usize,
    /// Samples per iteration `B`.
    pub global_batch: usize,
    pub zero: Zero,
    /// GPipe, 1F1B or interleaved (then `stages` lists the chunks: module documentation).
    pub schedule: Schedule,
    /// Full activation recomputation: every stage keeps only its units' inputs per
    /// micro-batch and runs each unit's forward again before its backward.
    pub recompute: bool,
    /// The DP gradient sync overlapped with backward (`--overlap-grad-reduce`,
    /// Megatron-LM's flag): stage `s`'s sync starts when its last backward starts and
    /// runs beside it, so it adds `max(0, sync_s − b_s)` after that backward instead of
    /// `sync_s` ([`crate::score::parallel`], docs/parallel.md).
    pub overlap_grad_reduce: bool,
}

impl Layout {
    /// This layout with the DP sync overlapped with backward or not
    /// ([`Layout::overlap_grad_reduce`]).
    pub fn overlapped(self, overlap_grad_reduce: bool) -> Layout {
        Layout {
            overlap_grad_reduce,
            ..self
        }
    }

    /// The layout of `cfg` split before each unit of `cuts` (ascending, inside `1..units`):
    /// stages placed back to back from device 0, every stage with TP `t` and DP `d`.
    pub fn uniform(
        units: usize,
        cuts: &[usize],
        cfg: &Uniform,
        global_batch: usize,
        schedule: Schedule,
    ) -> Layout {
        let bounds: Vec<usize> = std::iter::once(0)
            .chain(cuts.iter().copied())
            .chain(std::iter::once(units))
            .collect();
        let (t, d) = (cfg.tensor_parallel, cfg.data_parallel);
        let stages = bounds
            .windows(2)
            .enumerate()
            .map(|(s, w)| StageLayout {
                units: w[0]..w[1],
                tensor_parallel: t,
                data_parallel: d,
                first_device: s * t * d,
            })
            .collect();
        Layout {
            stages,
            micro_batch: cfg.micro_batch,
            global_batch,
            zero: cfg.zero,
            schedule,
            recompute: cfg.recompute,
            overlap_grad_reduce: false,
        }
    }

    /// The interleaved layout of `cfg` (`cfg.stages = p` stages of `v` chunks): chunk `c`
    /// holds units `bounds[c]..bounds[c + 1]` (`bounds`: `p·v + 1` ascending positions from
    /// 0 to the chain's end) on the devices of stage `c mod p`, placed back to back from
    /// device 0.
    pub fn interleaved(
        bounds: &[usize],
        cfg: &Uniform,
        global_batch: usize,
        chunks: usize,
    ) -> Layout {
        let (t, d, p) = (cfg.tensor_parallel, cfg.data_parallel, cfg.stages.max(1));
        let stages = bounds
            .windows(2)
            .enumerate()
            .map(|(c, w)| StageLayout {
                units: w[0]..w[1],
                tensor_parallel: t,
                data_parallel: d,
                first_device: (c % p) * t * d,
            })
            .collect();
        Layout {
            stages,
            micro_batch: cfg.micro_batch,
            global_batch,
            zero: cfg.zero,
            schedule: Schedule::Interleaved { chunks },
            recompute: cfg.recompute,
            overlap_grad_reduce: false,
        }
    }

    /// Pipeline stages `p`: the entries of `stages` over the chunks per stage `v` (1 unless
    /// interleaved).
    pub fn pipeline_stages(&self) -> usize {
        self.stages.len() / self.schedule.chunks().max(1)
    }

    /// The chunks of pipeline stage `k` in the order its devices hold them: entries `k`,
    /// `k + p`, `k + 2p`, … of `stages` (one entry, stage `k`, unless interleaved).
    pub fn chunks_of(&self, k: usize) -> impl Iterator<Item = &StageLayout> {
        self.stages
            .iter()
            .skip(k)
            .step_by(self.pipeline_stages().max(1))
    }

    /// Accelerators used (each stage's devices once, whatever its chunks).
    pub fn devices_used(&self) -> usize {
        self.stages[..self.pipeline_stages()]
            .iter()
            .map(StageLayout::width)
            .sum()
    }

    /// Micro-batches one replica of a stage with DP `d` runs per iteration, `B / (d·b)`,
    /// when that is a whole number ≥ 1.
    pub fn micro_batches(&self, d: usize) -> Option<usize> {
        let per = d * self.micro_batch;
        (per > 0 && self.global_batch.is_multiple_of(per) && self.global_batch >= per)
            .then(|| self.global_batch / per)
    }
}

/// Megatron-LM's even split of a chain of `units` units into `p·v` chunks: the `units − 2`
/// units between the first and the last divided into runs of `k = (units − 2)/(p·v)`,
/// chunk `c` holding `1 + c·k .. 1 + (c + 1)·k`, chunk 0 also the first unit and chunk
/// `p·v − 1` also the last. The `p·v + 1` chunk bounds, or `None` when `p·v` does not
/// divide `units − 2` (or there are fewer than `p·v` units between).
pub fn equal_chunk_bounds(units: usize, stages: usize, chunks: usize) -> Option<Vec<usize>> {
    let n = stages * chunks;
    let inner = units.checked_sub(2)?;
    if n == 0 || inner < n || !inner.is_multiple_of(n) {
        return None;
    }
    let k = inner / n;
    let mut bounds: Vec<usize> = (0..=n).map(|c| 1 + c * k).collect();
    bounds[0] = 0;
    bounds[n] = units;
    Some(bounds)
}

/// One transfer of `bytes` over `link`, ms (0 when nothing moves).
pub fn transfer_ms(link: Link, bytes: f64) -> f64 {
    if bytes == 0.0 {
        0.0
    } else {
        link.latency_ms + 1e3 * bytes / link.bytes_per_s
    }
}

/// Ring all-reduce of `bytes` among `n` devices on `link`, ms.
pub fn all_reduce_ms(link: Link, bytes: f64, n: usize) -> f64 {
    if n <= 1 || bytes == 0.0 {
        return 0.0;
    }
    let k = (n - 1) as f64;
    2.0 * k * link.latency_ms + 1e3 * (2.0 * k / n as f64) * bytes / link.bytes_per_s
}

/// Ring all-gather (or reduce-scatter) of a `bytes` tensor among `n` devices, ms.
pub fn all_gather_ms(link: Link, bytes: f64, n: usize) -> f64 {
    if n <= 1 || bytes == 0.0 {
        return 0.0;
    }
    let k = (n - 1) as f64;
    k * link.latency_ms + 1e3 * (k / n as f64) * bytes / link.bytes_per_s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collectives_by_hand() {
        let l = Link {
            bytes_per_s: 1e9,
            latency_ms: 0.5,
        };
        // 4 devices, 1 GB: 2·3·0.5 + 1e3·(6/4)·1 = 3 + 1500.
        assert_eq!(all_reduce_ms(l, 1e9, 4), 1503.0);
        assert_eq!(all_gather_ms(l, 1e9, 4), 1.5 + 750.0);
        assert_eq!(all_reduce_ms(l, 1e9, 1), 0.0);
        assert_eq!(transfer_ms(l, 2e6), 2.5);
        assert_eq!(transfer_ms(l, 0.0), 0.0);
    }

    #[test]
    fn uniform_layouts_are_back_to_back() {
        let cfg = Uniform {
            micro_batch: 1,
            tensor_parallel: 2,
            data_parallel: 4,
            zero: Zero::Off,
            recompute: false,
            stages: 3,
        };
        let l = Layout::uniform(10, &[3, 7], &cfg, 64, Schedule::OneFOneB);
        assert_eq!(l.stages.len(), 3);
        assert_eq!(l.stages[1].units, 3..7);
        assert_eq!(l.stages[2].first_device, 16);
        assert_eq!(l.stages[2].device(1, 1), 19);
        assert_eq!(l.devices_used(), 24);
        assert_eq!(l.micro_batches(4), Some(16));
        assert_eq!(l.micro_batches(3), None);
    }

    #[test]
    fn interleaved_layouts_put_chunk_c_on_stage_c_mod_p() {
        // 8 blocks between embeddings and head, p = 2, v = 2: 2 blocks per chunk.
        let bounds = equal_chunk_bounds(10, 2, 2).unwrap();
        assert_eq!(bounds, vec![0, 3, 5, 7, 10]);
        assert_eq!(equal_chunk_bounds(10, 3, 2), None);
        assert_eq!(equal_chunk_bounds(5, 2, 2), None);
        let cfg = Uniform {
            micro_batch: 1,
            tensor_parallel: 2,
            data_parallel: 2,
            zero: Zero::Off,
            recompute: false,
            stages: 2,
        };
        let l = Layout::interleaved(&bounds, &cfg, 16, 2);
        assert_eq!(l.pipeline_stages(), 2);
        assert_eq!(l.devices_used(), 8);
        let firsts: Vec<usize> = l.stages.iter().map(|s| s.first_device).collect();
        assert_eq!(firsts, vec![0, 4, 0, 4]);
        let of1: Vec<_> = l.chunks_of(1).map(|s| s.units.clone()).collect();
        assert_eq!(of1, vec![3..5, 7..10]);
    }
}

//! Activation recomputation (activation checkpointing): a pipeline stage that keeps only
//! its inputs between its forward and backward passes and runs its forward pass once more
//! before the backward one. It trades stash memory for forward time, per stage.
//!
//! Symbols. A *stage* `S` is the node set of one device; `F` the forward nodes
//! (`isBackwardNode` false); `size(v)`, `A(v)` (stashed activations, `activationBytes`) and
//! `resident(v) = size(v) − A(v)` as in [`crate::model::memory`] and
//! [`crate::model::schedule::held_bytes`]; `c` the micro-batches in flight at the stage's
//! place in the pipeline ([`crate::model::schedule::Pipeline::in_flight`]); `M` an
//! accelerator's memory.
//!
//! **Output bytes** of a forward node `u`: `b(u) = max size(e)` over the edges `e = u → x`
//! into forward nodes `x` (the edge's `size` field: the tensor that travels; 0 when the
//! file gives none, as MODEL.md's published workloads mostly do). Backward nodes have
//! `b = 0`: a gradient arriving from the next stage is not part of the forward pass.
//!
//! **Stage input**: `In(S) = Σ_{u ∈ F \ S : ∃ u → x, x ∈ F ∩ S} b(u)` — every tensor the
//! stage's forward pass reads from another device, once however many of its nodes read it.
//!
//! **Memory** of an accelerator stage with `c` micro-batches in flight:
//!
//! ```text
//! no recompute:  mem(S, c)   = Σ_S resident + c · A(S)           = Σ_S size + (c − 1) · A(S)
//! recompute:     mem_r(S, c) = Σ_S resident + A(S) + c · In(S)   = Σ_S size + c · In(S)
//! ```
//!
//! A recomputing stage holds the inputs of each of the `c` micro-batches in flight, plus,
//! while the backward pass of one micro-batch runs, that micro-batch's full stash `A(S)`
//! (recomputed just before it). The formula is conservative by at most one input: where
//! the stash already contains the input (the cost models' `A(v') = input_bytes(v)` of the
//! stage's first node), a runtime need not copy it.
//!
//! **Time**: recomputing adds one forward pass of the stage to its load,
//!
//! ```text
//! load_r(S) = load(S) + R(S),   R(S) = Σ_{v ∈ S ∩ F} fpgaLatency(v)
//! ```
//!
//! and nothing to its communication (the inputs stay on the device). Under MODEL.md's
//! max-load objective a plan's TPS is `max_d load_r(d)` over its recomputing devices and
//! `load(d)` over the others; the scorer ([`crate::score::load`]) adds `R` to a device that
//! the plan marks as recomputing (the synchronous objective counts it as backward time:
//! it runs in the backward phase).
//!
//! **Only accelerators recompute.** A CPU core has no memory limit: recomputing there only
//! adds time, so the planner never does and a plan file that asks for it is refused.
//!
//! **`--recompute auto`** chooses per stage at place `s` (with `c = c(s)`):
//!
//! ```text
//! r(S, s) = no        if mem(S, c) ≤ M
//!         = yes       if mem(S, c) > M ≥ mem_r(S, c)
//!         (no stage)  otherwise
//! ```
//!
//! As `load(S) ≤ load_r(S)`, this is the choice with the lower stage load among those that
//! fit; a stage's choice changes no other stage's load or memory, so choosing per stage
//! minimises the maximum, and the DP's accelerator stage cost becomes
//! `acc_s(S) = load(S)` if `mem(S, c(s)) ≤ M`, `load_r(S)` if `mem_r(S, c(s)) ≤ M`, `∞`
//! otherwise (`crate::solve::dp::relax`). With `c = 1` (one micro-batch, or no schedule),
//! `mem_r = mem + In ≥ mem`: recomputation never helps, and `auto` equals `none`.
//!
//! **Under `interleaved:v`** accelerator `d` runs `v` chunk stages `S_0 … S_{v−1}` in the
//! order [`crate::model::schedule::device_order`], and recomputes all of them or none
//! (`ρ_d ∈ {0,1}`, the placement's per-device mark). With `a_c = A(S_c)` the stash of chunk
//! `c` and `i_c = In(S_c)` its stage input (the tensors its forward nodes read from any
//! other stage, the device's own other chunks included: [`chunk_inputs`]), a recomputing
//! device holds chunk `c`'s input of a micro-batch from the start of its forward step to
//! the end of its backward step, and `a_c` only during that backward step (recomputed at
//! its start). With `n^β` the inputs held during backward step `β` (per chunk: forwards
//! minus backwards before `β`, `β`'s own micro-batch included) and `c_β` its chunk,
//!
//! ```text
//! no recompute:  mem(d)   = resident(d) + peak_d(a_0, …, a_{v−1})
//! recompute:     mem_r(d) = resident(d) + max_β ( a_{c_β} + Σ_c n^β_c · i_c )
//! ```
//!
//! ([`interleaved_recompute_peak`]). After a forward step the inputs held are never more
//! than at the next backward step (only forwards come between, and they add), so the
//! maximum over backward steps is the device's exact peak as
//! [`crate::simulate`] replays it. It is at most `max_c a_c + peak_d(i_0, …, i_{v−1})`
//! (the bound of holding a buffer for the largest recomputed stash throughout), equal to it
//! when `v = 1`: one chunk, the largest count `c` of inputs is reached at a backward step,
//! so `mem_r = resident + A + c·In`, the form above. Time: a recomputing device's load
//! gains `R(d)`, its forward nodes' time, as above (each backward step runs its chunk's
//! forward again first). Unlike one stage per device, `mem_r(d)` may be below
//! `Σ_{v on d} size(v)` (two chunks' stashes are never held at once); MODEL.md's rule
//! `Σ size ≤ M` still holds for every plan (the evaluator checks it), so a recomputing
//! device fits when both `mem_r(d) ≤ M` and `Σ size ≤ M` (without recompute `mem(d)` is at
//! least `Σ size`: after the warm-up every chunk's stash is held at once).

use std::collections::BTreeMap;

use crate::model::grouping::Grouping;
use crate::model::schedule::{compressed_order, Pass, Schedule, ScheduleError};
use crate::model::{Device, Placement, Workload};

/// Whether stages may recompute their activations (`plan --recompute`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Recompute {
    /// No stage recomputes: the stash is held (today's model).
    #[default]
    None,
    /// The planner recomputes a stage exactly when it does not fit otherwise (module doc).
    Auto,
}

impl std::fmt::Display for Recompute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Recompute::None => "none",
            Recompute::Auto => "auto",
        })
    }
}

impl std::str::FromStr for Recompute {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "none" | "off" => Ok(Recompute::None),
            "auto" => Ok(Recompute::Auto),
            _ => Err(format!(
                "unknown recompute mode '{text}' (use none or auto)"
            )),
        }
    }
}

/// `b(u)` of every node (module doc): the largest `size` of a forward node's edges into
/// forward nodes, 0 for backward nodes. O(n + m).
pub fn output_bytes(w: &Workload) -> Vec<f64> {
    let mut b = vec![0.0f64; w.len()];
    for e in w.edges() {
        if !w.node(e.from).is_backward && !w.node(e.to).is_backward {
            b[e.from] = b[e.from].max(e.size_bytes);
        }
    }
    b
}

/// `In(d)` of every device of `p` that reads a forward node's output from another device
/// (module doc): `b(u)` once per other device whose forward nodes read `u`. Devices that
/// read nothing are absent. O(n + m · r) for at most r reading devices per node.
pub fn stage_inputs(w: &Workload, p: &Placement) -> BTreeMap<Device, f64> {
    inputs_by(w, |x| p.assignment[x])
}

/// `i_c = In(S_c)` of every chunk stage `(d, c)` of an interleaved plan (module doc): `b(u)`
/// once per other stage whose forward nodes read `u`, the same device's other chunks
/// included. Stages that read nothing are absent. O(n + m · r).
pub fn chunk_inputs(w: &Workload, p: &Placement) -> BTreeMap<(Device, usize), f64> {
    inputs_by(w, |x| (p.assignment[x], p.chunk(x)))
}

/// The input bytes of every stage `stage(x)` that reads a forward node's output from
/// another stage: `b(u)` once per reading stage.
fn inputs_by<K: Ord + Copy>(w: &Workload, stage: impl Fn(usize) -> K) -> BTreeMap<K, f64> {
    let b = output_bytes(w);
    let mut input = BTreeMap::new();
    let mut readers: Vec<K> = Vec::new();
    for u in (0..w.len()).filter(|&u| b[u] > 0.0) {
        readers.clear();
        for &x in w.successors(u) {
            let sx = stage(x);
            if !w.node(x).is_backward && sx != stage(u) && !readers.contains(&sx) {
                readers.push(sx);
            }
        }
        for &sx in &readers {
            *input.entry(sx).or_insert(0.0) += b[u];
        }
    }
    input
}

/// The held-input vectors of device `d`'s backward steps under `pipeline` (module doc,
/// "Under interleaved"): for every chunk `c`, the distinct vectors `n^β` of the backward
/// steps `β` of chunk `c`, in order of first appearance. The compressed order
/// ([`compressed_order`]) passes through every state of the full one: O((w_d + pv)·v).
pub fn backward_input_vectors(
    schedule: Schedule,
    p: usize,
    m: usize,
    d: usize,
) -> Result<Vec<Vec<Vec<usize>>>, ScheduleError> {
    let v = schedule.chunks();
    let mut held = vec![0usize; v];
    let mut seen: Vec<Vec<Vec<usize>>> = vec![Vec::new(); v];
    let mut known: std::collections::HashSet<(usize, Vec<usize>)> = Default::default();
    for step in compressed_order(schedule, p, m, d)? {
        match step.pass {
            Pass::Forward => held[step.chunk] += 1,
            Pass::Backward => {
                if known.insert((step.chunk, held.clone())) {
                    seen[step.chunk].push(held.clone());
                }
                held[step.chunk] -= 1;
            }
        }
    }
    Ok(seen)
}

/// `mem_r(d) − resident(d)` under an interleaved schedule (module doc): the largest
/// `a_{c_β} + Σ_c n^β_c·i_c` over device `d`'s backward steps `β`, with `stash[c] = a_c`
/// and `input[c] = i_c`. O((w_d + pv)·v²).
pub fn interleaved_recompute_peak(
    schedule: Schedule,
    p: usize,
    m: usize,
    d: usize,
    stash: &[f64],
    input: &[f64],
) -> Result<f64, ScheduleError> {
    let at = |x: &[f64], c: usize| x.get(c).copied().unwrap_or(0.0);
    let mut peak: f64 = 0.0;
    for (c, vectors) in backward_input_vectors(schedule, p, m, d)?
        .iter()
        .enumerate()
    {
        for n in vectors {
            let inputs: f64 = n
                .iter()
                .enumerate()
                .map(|(c2, &k)| k as f64 * at(input, c2))
                .sum();
            peak = peak.max(at(stash, c) + inputs);
        }
    }
    Ok(peak)
}

/// `mem(S, c)` or `mem_r(S, c)` (module doc) of a stage holding `resident` bytes
/// throughout, stashing `stash` per micro-batch and reading `input` bytes from other
/// devices, with `in_flight` micro-batches in flight.
pub fn stage_bytes(
    resident: f64,
    stash: f64,
    input: f64,
    in_flight: usize,
    recompute: bool,
) -> f64 {
    let c = in_flight as f64;
    if recompute {
        resident + stash + c * input
    } else {
        resident + c * stash
    }
}

/// What the recomputation rows read: every forward edge `u → x` between groups with
/// `b_u > 0` as `(u's group, x's groups, b_u)`, and each group's forward accelerator time
/// `F_g`: what the stage IP's and the interleaved IP's recomputation rows read
/// ([`crate::solve::milp::stages`], [`crate::solve::milp::interleaved`]) and the
/// interleaved DP's.
pub fn recompute_data(units: &Grouping, w: &Workload) -> RecomputeData {
    let out = output_bytes(w);
    let group = &units.group_of;
    let mut inputs: Vec<(usize, Vec<usize>, f64)> = Vec::new();
    for u in (0..w.len()).filter(|&u| out[u] > 0.0) {
        let mut readers: Vec<usize> = w
            .successors(u)
            .iter()
            .filter(|&&x| !w.node(x).is_backward && group[x] != group[u])
            .map(|&x| group[x])
            .collect();
        readers.sort_unstable();
        readers.dedup();
        if !readers.is_empty() {
            inputs.push((group[u], readers, out[u]));
        }
    }
    let mut forward = vec![0.0; units.len()];
    for v in (0..w.len()).filter(|&v| !w.node(v).is_backward) {
        forward[group[v]] += w.node(v).fpga_latency;
    }
    RecomputeData { inputs, forward }
}

/// What the recomputation rows read ([`recompute_data`]).
pub struct RecomputeData {
    /// `(producer group, reader groups, b_u)` of every forward node u with output bytes
    /// read by a forward node of another group.
    pub inputs: Vec<(usize, Vec<usize>, f64)>,
    /// `F_g`: forward accelerator time per group.
    pub forward: Vec<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::schedule::device_order;

    #[test]
    fn parse_and_print() {
        for text in ["none", "auto"] {
            assert_eq!(text.parse::<Recompute>().unwrap().to_string(), text);
        }
        assert!("sometimes"
            .parse::<Recompute>()
            .unwrap_err()
            .contains("none or auto"));
    }

    /// With one chunk (gpipe, 1f1b) the interleaved form is `A + c·In` (module doc); with
    /// several it is the peak of a step-by-step replay (inputs from forward to backward,
    /// the stash during the backward step), and at most `max_c a_c + peak_d(i)`.
    #[test]
    fn interleaved_form_reduces_and_replays() {
        use crate::model::schedule::{in_flight, peak_stash_bytes};
        let (stash, input) = (40.0, 6.0);
        for schedule in [Schedule::GPipe, Schedule::OneFOneB] {
            for p in 1..5 {
                for m in 1..9 {
                    for d in 0..p {
                        let c = in_flight(schedule, p, m, d) as f64;
                        let got = interleaved_recompute_peak(schedule, p, m, d, &[stash], &[input])
                            .unwrap();
                        assert_eq!(got, stash + c * input, "{schedule} p={p} m={m} d={d}");
                    }
                }
            }
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 100) as f64
        };
        let mut tighter = 0;
        for v in 2..4 {
            let schedule = Schedule::Interleaved { chunks: v };
            for p in 1..5 {
                for m in [p, 2 * p, 3 * p] {
                    for d in 0..p {
                        let a: Vec<f64> = (0..v).map(|_| next()).collect();
                        let i: Vec<f64> = (0..v).map(|_| next() / 4.0).collect();
                        let got = interleaved_recompute_peak(schedule, p, m, d, &a, &i).unwrap();
                        let (mut held, mut replay) = (vec![0.0; v], 0.0f64);
                        for step in device_order(schedule, p, m, d).unwrap() {
                            match step.pass {
                                Pass::Forward => held[step.chunk] += 1.0,
                                Pass::Backward => {
                                    let inputs: f64 = held.iter().zip(&i).map(|(n, x)| n * x).sum();
                                    replay = replay.max(inputs + a[step.chunk]);
                                    held[step.chunk] -= 1.0;
                                }
                            }
                            let inputs: f64 = held.iter().zip(&i).map(|(n, x)| n * x).sum();
                            replay = replay.max(inputs);
                        }
                        assert!((got - replay).abs() < 1e-9, "v={v} p={p} m={m} d={d}");
                        let bound = a.iter().copied().fold(0.0, f64::max)
                            + peak_stash_bytes(schedule, p, m, d, &i).unwrap();
                        assert!(got <= bound + 1e-9);
                        tighter += usize::from(got < bound - 1e-9);
                    }
                }
            }
        }
        assert!(tighter > 0, "the exact form never below the buffer bound");
    }

    /// The two forms of the module doc agree, and one micro-batch never gains.
    #[test]
    fn memory_forms() {
        let (resident, stash, input) = (100.0, 40.0, 6.0);
        let size = resident + stash;
        for c in 1..6 {
            assert_eq!(
                stage_bytes(resident, stash, input, c, false),
                size + (c as f64 - 1.0) * stash
            );
            assert_eq!(
                stage_bytes(resident, stash, input, c, true),
                size + c as f64 * input
            );
        }
        assert!(
            stage_bytes(resident, stash, input, 1, true)
                >= stage_bytes(resident, stash, input, 1, false)
        );
    }
}

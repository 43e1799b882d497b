//! Exports of a uniform 3D parallel layout ([`ParallelPlan`]): Megatron-LM command-line
//! arguments, a vLLM command line, a DeepSpeed configuration with its `PipelineModule`, and
//! torchtitan job-file sections; and those texts read back ([`read_layout`]) into a
//! [`Layout`] that [`crate::score::parallel::score_layout`] scores.
//!
//! **The chain's shape.** Units named `layers.N` are decoder blocks; the units before the
//! first block (embeddings) go with the first pipeline stage and the units after the last
//! (final norm, head) with the last stage — where Megatron-LM (`E` / `L`) and vLLM
//! (`is_first_rank` / `is_last_rank`) build them. Stage `s` holds `k_s` blocks; the exports
//! carry `(t, p, k_0..k_{p−1})` and, for Megatron-LM, `b`, `B`, ZeRO and recomputation.
//!
//! **Megatron-LM** (flag names from `megatron/training/arguments.py`):
//! `--tensor-model-parallel-size t --pipeline-model-parallel-size p --num-layers L`, the
//! split (nothing when every `k_s = L/p`, Megatron's even split; else
//! `--decoder-first-pipeline-num-layers` / `--decoder-last-pipeline-num-layers` when only
//! the first and last differ from equal non-zero middles; else
//! `--pipeline-model-parallel-layout`, grammar in [`super::megatron`]), `--micro-batch-size b
//! --global-batch-size B`. DP is not a flag: Megatron-LM sets `d = world size / (t·p)`, so
//! the header names the world size and the reader takes it. ZeRO-1 ↦
//! `--use-distributed-optimizer` (it shards the optimizer state over the DP group and
//! reduce-scatters gradients into the shards: ZeRO-1's memory, with ZeRO-2's traffic which
//! the model prices the same); ZeRO-2 and ZeRO-3 are refused (Megatron-LM's distributed
//! optimizer keeps full gradient buffers and full weights on every replica). Full
//! recomputation ↦ `--recompute-granularity full --recompute-method uniform
//! --recompute-num-layers 1` (every decoder layer checkpointed alone: each keeps only its
//! input, the model's rule). Megatron-LM runs 1F1B, so a GPipe layout is refused. An
//! interleaved layout (`interleaved:v`, every chunk with the same `k = L/(p·v)` blocks,
//! the planner's space) ↦ `--num-layers-per-virtual-pipeline-stage k` (Megatron-LM derives
//! `v = (L/p)/k`; with `p = 2` it needs its default p2p overlap, so the export never writes
//! `--no-overlap-p2p-communication`); unequal chunks are refused. The other targets refuse
//! interleaved layouts (DeepSpeed's and vLLM's stages are one contiguous range per rank;
//! torchtitan's `Interleaved1F1B` is not written yet).
//!
//! **vLLM** serves: `--tensor-parallel-size t --pipeline-parallel-size p`, with
//! `VLLM_PP_LAYER_PARTITION="k_0,…,k_{p−1}"`, and `--data-parallel-size d` when `d > 1`
//! (`d` independent engines of `t·p` GPUs each). The micro-batch, the global batch, ZeRO and
//! recomputation are training settings with no serving counterpart: the header says they
//! are dropped; reading back takes them from the caller (ZeRO off, no recomputation).
//!
//! Every render refuses a non-uniform layout (a stage whose `t` or `d` differs from stage
//! 0's, or stages not back to back from device 0), naming the stage.
//!
//! **DeepSpeed** ([`deepspeed`]) and **torchtitan** ([`torchtitan`]) have their own modules;
//! [`read_layout`] reads any of the four back.
//!
//! **Several accelerator types** ([`nodes`]): a uniform layout whose stages lie on machines
//! of different types is written by [`render_mixed`] — the file of the layout renumbered back
//! to back in rank order, with a node-rank table (`# node-rank I: machine TYPE:K (TYPE),
//! stages …`) at the end of the header saying which machine runs each `torchrun` node rank
//! — and refused when the framework's rank order and `torchrun`'s equal ranks per node
//! cannot place it. [`place_on_machines`] reads the table back.

mod deepspeed;
mod megatron;
mod nodes;
mod torchtitan;
mod vllm;

pub use deepspeed::{read_deepspeed, render_deepspeed};
pub use megatron::{read_megatron, render_megatron};
pub use nodes::{node_ranks, place_on_machines, render_mixed, table_comments, NodeRank};
pub use torchtitan::{default_split, read_torchtitan, render_torchtitan};
pub use vllm::{read_vllm, render_vllm};

use super::{flag_value, has_switch, positive, shell_words};
use crate::model::human_bytes;
use crate::model::parallel::{Layout, StageLayout, Zero};
use crate::model::schedule::Schedule;
use crate::solve::parallel::ParallelPlan;

/// The decoder blocks of a chain: unit indices `pre..post` are `layers.*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Blocks {
    /// First block unit.
    start: usize,
    /// One past the last block unit.
    end: usize,
    /// Units in all.
    units: usize,
}

impl Blocks {
    fn of<S: AsRef<str>>(names: &[S]) -> Result<Blocks, String> {
        let is_block = |n: &S| n.as_ref().starts_with("layers.");
        let start = names
            .iter()
            .position(is_block)
            .ok_or("the chain has no decoder blocks (units named layers.N)")?;
        let end = names.iter().rposition(is_block).map_or(start, |e| e + 1);
        if let Some(n) = names[start..end].iter().find(|n| !is_block(n)) {
            return Err(format!(
                "unit '{}' sits between decoder blocks; the targets build the blocks back to back",
                n.as_ref()
            ));
        }
        Ok(Blocks {
            start,
            end,
            units: names.len(),
        })
    }

    fn len(&self) -> usize {
        self.end - self.start
    }

    /// Blocks in each stage of `layout`.
    fn counts(&self, layout: &Layout) -> Vec<usize> {
        layout
            .stages
            .iter()
            .map(|s| (s.units.start.max(self.start)..s.units.end.min(self.end)).len())
            .collect()
    }

    /// Unit ranges of stages holding `counts` blocks (pre on the first, post on the last).
    fn stage_units(&self, counts: &[usize]) -> Result<Vec<std::ops::Range<usize>>, String> {
        let p = counts.len();
        let mut next = self.start;
        let mut out = Vec::with_capacity(p);
        for (s, &k) in counts.iter().enumerate() {
            let from = if s == 0 { 0 } else { next };
            next += k;
            let to = if s + 1 == p { self.units } else { next };
            if from == to {
                return Err(format!(
                    "pipeline stage {s} holds no layer (a stage needs at least one)"
                ));
            }
            out.push(from..to);
        }
        Ok(out)
    }
}

/// `(t, d)` of a uniform layout, or the first stage that breaks uniformity.
fn uniform_degrees(layout: &Layout, target: &str) -> Result<(usize, usize), String> {
    let first = &layout.stages[0];
    let (t, d) = (first.tensor_parallel, first.data_parallel);
    // Interleaved: entry `s` is chunk `s`, on the devices of stage `s mod p`.
    let p = layout.pipeline_stages().max(1);
    for (s, st) in layout.stages.iter().enumerate() {
        if st.tensor_parallel != t || st.data_parallel != d {
            return Err(format!(
                "stage {s} has TP {} × DP {} where stage 0 has TP {t} × DP {d}: {target} runs one TP and one DP degree for every pipeline stage",
                st.tensor_parallel, st.data_parallel
            ));
        }
        if st.first_device != (s % p) * t * d {
            return Err(format!(
                "stage {s} starts at device {} instead of {}: {target} places stages back to back from device 0",
                st.first_device,
                (s % p) * t * d
            ));
        }
    }
    Ok((t, d))
}

/// The `#` lines saying what each GPU of each stage holds (interleaved: each of its
/// chunks).
fn stage_comments(plan: &ParallelPlan, blocks: &Blocks) -> String {
    let names: Vec<&str> = plan.chain.units.iter().map(|u| u.name.as_str()).collect();
    let counts = blocks.counts(&plan.layout);
    let p = plan.layout.pipeline_stages();
    let mut text = String::new();
    for (s, score) in plan.score.stages.iter().enumerate() {
        let st = &plan.layout.stages[s];
        let devices = st.devices();
        let held: Vec<String> = (s..plan.layout.stages.len())
            .step_by(p)
            .map(|c| {
                let u = &plan.layout.stages[c].units;
                format!("{}..{}", names[u.start], names[u.end - 1])
            })
            .collect();
        let layers: usize = (s..counts.len()).step_by(p).map(|c| counts[c]).sum();
        text.push_str(&format!(
            "# stage {s}: GPUs {}-{} ({} DP replicas x {} TP ranks); each GPU holds 1/{} of {} ({} decoder layers), {} memory; {:.3} ms per micro-batch (forward + backward{})\n",
            devices.start,
            devices.end - 1,
            st.data_parallel,
            st.tensor_parallel,
            st.tensor_parallel,
            held.join(" + "),
            layers,
            human_bytes(score.memory_bytes),
            score.micro_batch_ms,
            if plan.layout.recompute { ", recomputed forward" } else { "" }
        ));
    }
    text
}

/// A positive integer flag, or `default` when absent.
fn flag_or(words: &[String], names: &[&str], default: usize) -> Result<usize, String> {
    match flag_value(words, names)? {
        Some(v) => positive(names[0], v),
        None => Ok(default),
    }
}

/// A layout of `counts` blocks per stage over the chain of `units`.
fn layout_of(
    blocks: &Blocks,
    counts: &[usize],
    t: usize,
    d: usize,
    training: Training,
) -> Result<Layout, String> {
    Ok(layout_of_ranges(
        blocks.stage_units(counts)?,
        t,
        d,
        training,
    ))
}

/// The uniform layout whose stages hold `ranges` of units, on `t·d` devices each, back to
/// back from device 0.
fn layout_of_ranges(
    ranges: Vec<std::ops::Range<usize>>,
    t: usize,
    d: usize,
    training: Training,
) -> Layout {
    let stages = ranges
        .into_iter()
        .enumerate()
        .map(|(s, units)| StageLayout {
            units,
            tensor_parallel: t,
            data_parallel: d,
            first_device: s * t * d,
        })
        .collect();
    Layout {
        stages,
        micro_batch: training.micro_batch,
        global_batch: training.global_batch,
        zero: training.zero,
        schedule: training.schedule,
        recompute: training.recompute,
        overlap_grad_reduce: training.overlap_grad_reduce,
    }
}

/// The training settings a layout needs beyond its split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Training {
    pub micro_batch: usize,
    pub global_batch: usize,
    pub zero: Zero,
    pub schedule: Schedule,
    pub recompute: bool,
    /// The DP sync overlapped with backward ([`Layout::overlap_grad_reduce`]).
    pub overlap_grad_reduce: bool,
}

/// The 3D export formats, by their `--export` / `--from-export` names.
pub const FORMATS: [&str; 4] = ["megatron", "deepspeed", "torchtitan", "vllm"];

/// Renders `plan` in `format` (one of [`FORMATS`]); an error naming the stage or the rule
/// the target cannot run.
pub fn render(format: &str, plan: &ParallelPlan) -> Result<String, String> {
    match format {
        "megatron" => render_megatron(plan),
        "deepspeed" => render_deepspeed(plan),
        "torchtitan" => render_torchtitan(plan),
        "vllm" => render_vllm(plan),
        other => Err(format!(
            "{other}: the 3D exports are {}",
            FORMATS.join(", ")
        )),
    }
}

/// Whether the framework runs the `format` text's layout with sequence parallelism:
/// Megatron-LM when `--sequence-parallel` is given, torchtitan always (its TP plan splits
/// the norms along the sequence), DeepSpeed's pipeline engine and vLLM never. What TP
/// degree 1 makes of it is the chain's concern (nothing to split).
pub fn sequence_parallel_in(format: &str, text: &str) -> bool {
    match format {
        "megatron" => shell_words(text).is_ok_and(|w| has_switch(&w, "--sequence-parallel")),
        "torchtitan" => true,
        _ => false,
    }
}

/// Reads the `format` text of a layout of the chain of `units` on a cluster of
/// `world_size` GPUs; `serving` gives what a serving format (vLLM) does not carry. The
/// layout and notes on what the model prices differently from the target.
pub fn read_layout<S: AsRef<str>>(
    format: &str,
    text: &str,
    units: &[S],
    world_size: usize,
    serving: Training,
) -> Result<(Layout, Vec<String>), String> {
    let layout = match format {
        "megatron" => read_megatron(text, units, world_size)?,
        "deepspeed" => read_deepspeed(text, units, world_size)?,
        "torchtitan" => return read_torchtitan(text, units, world_size),
        "vllm" => {
            let layout = read_vllm(text, units, serving)?;
            let used = layout.devices_used();
            if used > world_size {
                return Err(format!(
                    "the command line runs {used} GPUs, more than the cluster's {world_size}"
                ));
            }
            layout
        }
        other => {
            return Err(format!(
                "{other}: the 3D formats read back are {}",
                FORMATS.join(", ")
            ))
        }
    };
    Ok((layout, Vec::new()))
}

#[cfg(test)]
mod tests {
    /// The search's export targets ([`crate::solve::parallel::Target`], which constrain a
    /// plan to what each framework runs) are these formats, in this order.
    #[test]
    fn the_search_targets_are_the_formats() {
        let names = crate::solve::parallel::Target::ALL.map(|t| t.name());
        assert_eq!(names, super::FORMATS);
    }
}

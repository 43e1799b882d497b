//! Exports of a uniform 3D parallel layout ([`ParallelPlan`]): Megatron-LM command-line
//! arguments and a vLLM command line, and those texts read back into a [`Layout`] that
//! [`crate::score::parallel::score_layout`] scores.
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
//! input, the model's rule). Megatron-LM runs 1F1B, so a GPipe layout is refused.
//!
//! **vLLM** serves: `--tensor-parallel-size t --pipeline-parallel-size p`, with
//! `VLLM_PP_LAYER_PARTITION="k_0,…,k_{p−1}"`, and `--data-parallel-size d` when `d > 1`
//! (`d` independent engines of `t·p` GPUs each). The micro-batch, the global batch, ZeRO and
//! recomputation are training settings with no serving counterpart: the header says they
//! are dropped; reading back takes them from the caller (ZeRO off, no recomputation).
//!
//! Every render refuses a non-uniform layout (a stage whose `t` or `d` differs from stage
//! 0's, or stages not back to back from device 0), naming the stage.

use super::megatron::{first_last, layout_string, rank_stages};
use super::vllm::default_partitions;
use super::{flag_value, has_switch, positive, shell_words};
use crate::model::human_bytes;
use crate::model::parallel::{Layout, StageLayout, Zero};
use crate::model::schedule::Schedule;
use crate::solve::parallel::ParallelPlan;

const VARIABLE: &str = "VLLM_PP_LAYER_PARTITION";

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
    for (s, st) in layout.stages.iter().enumerate() {
        if st.tensor_parallel != t || st.data_parallel != d {
            return Err(format!(
                "stage {s} has TP {} × DP {} where stage 0 has TP {t} × DP {d}: {target} runs one TP and one DP degree for every pipeline stage",
                st.tensor_parallel, st.data_parallel
            ));
        }
        if st.first_device != s * t * d {
            return Err(format!(
                "stage {s} starts at device {} instead of {}: {target} places stages back to back from device 0",
                st.first_device,
                s * t * d
            ));
        }
    }
    Ok((t, d))
}

/// The `#` lines saying what each GPU of each stage holds.
fn stage_comments(plan: &ParallelPlan, blocks: &Blocks) -> String {
    let names: Vec<&str> = plan.chain.units.iter().map(|u| u.name.as_str()).collect();
    let counts = blocks.counts(&plan.layout);
    let mut text = String::new();
    for (s, (st, score)) in plan
        .layout
        .stages
        .iter()
        .zip(&plan.score.stages)
        .enumerate()
    {
        let devices = st.devices();
        text.push_str(&format!(
            "# stage {s}: GPUs {}-{} ({} DP replicas x {} TP ranks); each GPU holds 1/{} of {}..{} ({} decoder layers), {} memory; {:.3} ms per micro-batch (forward + backward{})\n",
            devices.start,
            devices.end - 1,
            st.data_parallel,
            st.tensor_parallel,
            st.tensor_parallel,
            names[st.units.start],
            names[st.units.end - 1],
            counts[s],
            human_bytes(score.memory_bytes),
            score.micro_batch_ms,
            if plan.layout.recompute { ", recomputed forward" } else { "" }
        ));
    }
    text
}

/// Megatron-LM command-line arguments for `plan` (module documentation).
pub fn render_megatron(plan: &ParallelPlan) -> Result<String, String> {
    let layout = &plan.layout;
    let (t, d) = uniform_degrees(layout, "Megatron-LM")?;
    if layout.schedule != Schedule::OneFOneB {
        return Err(format!(
            "the layout runs {}; Megatron-LM's non-interleaved pipeline runs 1F1B (plan with --schedule 1f1b)",
            layout.schedule
        ));
    }
    let optimizer = match layout.zero {
        Zero::Off => "",
        Zero::Optimizer => " --use-distributed-optimizer",
        z => {
            return Err(format!(
                "ZeRO-{}: Megatron-LM's --use-distributed-optimizer shards only the optimizer state (ZeRO-1); gradients and weights stay whole on every DP replica (plan with --zero 0 or 1)",
                z.stage()
            ))
        }
    };
    let names: Vec<&str> = plan.chain.units.iter().map(|u| u.name.as_str()).collect();
    let blocks = Blocks::of(&names)?;
    let counts = blocks.counts(layout);
    let (p, l) = (counts.len(), blocks.len());
    let split = if counts.iter().all(|&k| k == counts[0]) {
        String::new()
    } else if let Ok(flags) = first_last(&counts) {
        flags
    } else {
        format!(
            " --pipeline-model-parallel-layout \"{}\"",
            layout_string(&counts)
        )
    };
    let recompute = if layout.recompute {
        " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
    } else {
        ""
    };
    let world = t * d * p;
    let mut text = format!(
        "# dnnplace export: Megatron-LM 3D layout, TP {t} x PP {p} x DP {d} = {world} GPUs, {l} decoder layers,\n\
         # micro-batch {}, global batch {}, ZeRO-{}{}.\n\
         # Launch on {world} GPUs: Megatron-LM sets DP = world size / (TP x PP) = {d}.\n",
        layout.micro_batch,
        layout.global_batch,
        layout.zero.stage(),
        if layout.recompute { ", full recomputation" } else { "" }
    );
    if layout.zero == Zero::Optimizer {
        text.push_str(
            "# ZeRO-1 -> --use-distributed-optimizer: optimizer state sharded over the DP group.\n",
        );
    }
    text.push_str(&stage_comments(plan, &blocks));
    text.push_str(&format!(
        "--tensor-model-parallel-size {t} --pipeline-model-parallel-size {p} --num-layers {l}{split} --micro-batch-size {} --global-batch-size {}{optimizer}{recompute}\n",
        layout.micro_batch, layout.global_batch
    ));
    Ok(text)
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
    let stages = blocks
        .stage_units(counts)?
        .into_iter()
        .enumerate()
        .map(|(s, units)| StageLayout {
            units,
            tensor_parallel: t,
            data_parallel: d,
            first_device: s * t * d,
        })
        .collect();
    Ok(Layout {
        stages,
        micro_batch: training.micro_batch,
        global_batch: training.global_batch,
        zero: training.zero,
        schedule: training.schedule,
        recompute: training.recompute,
    })
}

/// The training settings a layout needs beyond its split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Training {
    pub micro_batch: usize,
    pub global_batch: usize,
    pub zero: Zero,
    pub schedule: Schedule,
    pub recompute: bool,
}

/// Reads Megatron-LM arguments for the chain of `units` (unit names) launched on
/// `world_size` GPUs into a layout (1F1B); an error naming the flag otherwise.
pub fn read_megatron<S: AsRef<str>>(
    text: &str,
    units: &[S],
    world_size: usize,
) -> Result<Layout, String> {
    let blocks = Blocks::of(units)?;
    let words = shell_words(text)?;
    let t = flag_or(&words, &["--tensor-model-parallel-size"], 1)?;
    let p = flag_or(&words, &["--pipeline-model-parallel-size"], 1)?;
    let l = flag_or(&words, &["--num-layers"], blocks.len())?;
    if l != blocks.len() {
        return Err(format!(
            "--num-layers {l} but the model has {} decoder layers",
            blocks.len()
        ));
    }
    if !world_size.is_multiple_of(t * p) || world_size == 0 {
        return Err(format!(
            "--tensor-model-parallel-size {t} x --pipeline-model-parallel-size {p} does not divide the world size {world_size}"
        ));
    }
    let d = world_size / (t * p);
    let stages = rank_stages(&words, p, l)?;
    if stages.len() != p {
        return Err(format!(
            "--pipeline-model-parallel-layout gives {} virtual stages for {p} ranks: interleaved schedules are not a 3D layout",
            stages.len()
        ));
    }
    let counts: Vec<usize> = stages
        .iter()
        .map(|(_, s)| s.iter().filter(|&&c| c == 't').count())
        .collect();
    let b = match flag_value(&words, &["--micro-batch-size"])? {
        Some(v) => positive("--micro-batch-size", v)?,
        None => return Err("--micro-batch-size is missing (Megatron-LM needs it)".into()),
    };
    let global = flag_or(&words, &["--global-batch-size"], b * d)?;
    let zero = if has_switch(&words, "--use-distributed-optimizer") {
        Zero::Optimizer
    } else {
        Zero::Off
    };
    let recompute = megatron_recompute(&words)?;
    layout_of(
        &blocks,
        &counts,
        t,
        d,
        Training {
            micro_batch: b,
            global_batch: global,
            zero,
            schedule: Schedule::OneFOneB,
            recompute,
        },
    )
}

/// Full recomputation of every decoder layer, none, or the flag the model cannot read.
fn megatron_recompute(words: &[String]) -> Result<bool, String> {
    if has_switch(words, "--recompute-activations") {
        return Err("--recompute-activations (selective recomputation) is not modelled: dnnplace models full recomputation (--recompute-granularity full --recompute-method uniform --recompute-num-layers 1) or none".into());
    }
    match flag_value(words, &["--recompute-granularity"])? {
        None => Ok(false),
        Some("full") => {
            let method = flag_value(words, &["--recompute-method"])?;
            if method != Some("uniform") {
                return Err(format!(
                    "--recompute-method {}: dnnplace models full recomputation with the uniform method",
                    method.unwrap_or("(missing)")
                ));
            }
            match flag_value(words, &["--recompute-num-layers"])? {
                Some("1") => Ok(true),
                other => Err(format!(
                    "--recompute-num-layers {}: dnnplace models every decoder layer checkpointed alone (1)",
                    other.unwrap_or("(missing)")
                )),
            }
        }
        Some(g) => Err(format!(
            "--recompute-granularity {g}: dnnplace models full recomputation or none"
        )),
    }
}

/// A vLLM command line for `plan` (module documentation).
pub fn render_vllm(plan: &ParallelPlan) -> Result<String, String> {
    let layout = &plan.layout;
    let (t, d) = uniform_degrees(layout, "vLLM")?;
    let names: Vec<&str> = plan.chain.units.iter().map(|u| u.name.as_str()).collect();
    let blocks = Blocks::of(&names)?;
    let counts = blocks.counts(layout);
    let p = counts.len();
    let mut text = format!(
        "# dnnplace export: vLLM serving of the 3D layout, TP {t} x PP {p} x DP {d} = {} GPUs, {} hidden layers.\n\
         # Exported: TP, PP, the layers per stage ({VARIABLE}, read by get_pp_indices in\n\
         # vllm/distributed/utils.py; the first rank also holds the embedding, the last the norm and head){}.\n\
         # Dropped (training only, no serving counterpart): micro-batch {}, global batch {}, ZeRO-{}, {}.\n",
        t * p * d,
        blocks.len(),
        if d > 1 {
            format!(", and DP {d} as --data-parallel-size: {d} independent engines of {} GPUs each", t * p)
        } else {
            String::new()
        },
        layout.micro_batch,
        layout.global_batch,
        layout.zero.stage(),
        if layout.recompute { "full recomputation" } else { "no recomputation" }
    );
    text.push_str("# The figures below are the training plan's, per stage:\n");
    text.push_str(&stage_comments(plan, &blocks));
    let counts: Vec<String> = counts.iter().map(usize::to_string).collect();
    let dp = if d > 1 {
        format!(" --data-parallel-size {d}")
    } else {
        String::new()
    };
    text.push_str(&format!(
        "{VARIABLE}=\"{}\" vllm serve MODEL --tensor-parallel-size {t} --pipeline-parallel-size {p}{dp}\n",
        counts.join(",")
    ));
    Ok(text)
}

/// Reads a vLLM command line for the chain of `units` into a layout with the training
/// settings of `training` (ZeRO and recomputation as given: vLLM has neither).
pub fn read_vllm<S: AsRef<str>>(
    text: &str,
    units: &[S],
    training: Training,
) -> Result<Layout, String> {
    let blocks = Blocks::of(units)?;
    let words = shell_words(text)?;
    let t = flag_or(&words, &["--tensor-parallel-size", "-tp"], 1)?;
    let p = flag_or(&words, &["--pipeline-parallel-size", "-pp"], 1)?;
    let d = flag_or(&words, &["--data-parallel-size", "-dp"], 1)?;
    let assignment = words.iter().rev().find_map(|word| {
        let (name, value) = word.split_once('=')?;
        (name == VARIABLE).then_some(value)
    });
    let counts = match assignment {
        Some(value) => {
            let counts = value
                .split(',')
                .map(|x| x.trim().parse::<usize>())
                .collect::<Result<Vec<usize>, _>>()
                .map_err(|_| format!("{VARIABLE}={value}: not a list of non-negative integers"))?;
            if counts.len() != p {
                return Err(format!(
                    "{VARIABLE}={value} has {} entries for --pipeline-parallel-size {p}",
                    counts.len()
                ));
            }
            let sum: usize = counts.iter().sum();
            if sum != blocks.len() {
                return Err(format!(
                    "{VARIABLE}={value} sums to {sum}, the model has {} hidden layers",
                    blocks.len()
                ));
            }
            counts
        }
        None => default_partitions(blocks.len(), p),
    };
    layout_of(&blocks, &counts, t, d, training)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(l: usize) -> Vec<String> {
        std::iter::once("embeddings".to_string())
            .chain((0..l).map(|i| format!("layers.{i}")))
            .chain(std::iter::once("head".to_string()))
            .collect()
    }

    #[test]
    fn a_hand_written_even_split_reads() {
        let text = "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 --num-layers 80 --micro-batch-size 1 --global-batch-size 512";
        let l = read_megatron(text, &names(80), 128).unwrap();
        assert_eq!(l.stages.len(), 4);
        assert_eq!(l.stages[0].units, 0..21);
        assert_eq!(l.stages[3].units, 61..82);
        assert_eq!(l.stages[3].first_device, 3 * 32);
        assert_eq!(
            (l.stages[1].tensor_parallel, l.stages[1].data_parallel),
            (8, 4)
        );
        assert!(read_megatron(text, &names(80), 100)
            .unwrap_err()
            .contains("world size 100"));
    }

    #[test]
    fn bad_recompute_flags_are_named() {
        let base = "--micro-batch-size 1 --num-layers 4";
        for (extra, flag) in [
            (
                " --recompute-granularity selective",
                "--recompute-granularity",
            ),
            (
                " --recompute-granularity full --recompute-method block --recompute-num-layers 1",
                "--recompute-method",
            ),
            (
                " --recompute-granularity full --recompute-method uniform --recompute-num-layers 2",
                "--recompute-num-layers",
            ),
        ] {
            let e = read_megatron(&format!("{base}{extra}"), &names(4), 1).unwrap_err();
            assert!(e.contains(flag), "{e}");
        }
    }
}

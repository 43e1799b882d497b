//! Megatron-LM arguments of a uniform 3D layout, and reading them back (the rules are in
//! the parent module's documentation).

use super::{flag_or, layout_of, stage_comments, uniform_degrees, Blocks, Training};
use crate::export::megatron::{first_last, layout_string, rank_stages};
use crate::export::{flag_value, has_switch, positive, shell_words};
use crate::model::parallel::{Layout, Uniform, Zero};
use crate::model::schedule::Schedule;
use crate::solve::parallel::ParallelPlan;

/// Megatron-LM command-line arguments for `plan` (module documentation).
pub fn render_megatron(plan: &ParallelPlan) -> Result<String, String> {
    let layout = &plan.layout;
    let (t, d) = uniform_degrees(layout, "Megatron-LM")?;
    if !matches!(
        layout.schedule,
        Schedule::OneFOneB | Schedule::Interleaved { .. }
    ) {
        return Err(format!(
            "the layout runs {}; Megatron-LM's pipeline runs 1F1B or interleaved 1F1B (plan with --schedule 1f1b or interleaved:v)",
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
    let (p, l) = (layout.pipeline_stages(), blocks.len());
    let interleaved = layout.schedule.chunks() > 1;
    let split = if interleaved {
        virtual_stages(&counts, layout.schedule.chunks())?
    } else if counts.iter().all(|&k| k == counts[0]) {
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
    let overlap = if layout.overlap_grad_reduce {
        " --overlap-grad-reduce"
    } else {
        ""
    };
    let sequence = if plan.chain.sequence_parallel && t > 1 {
        " --sequence-parallel"
    } else {
        ""
    };
    let world = t * d * p;
    let mut text = format!(
        "# dnnplace export: Megatron-LM 3D layout, TP {t} x PP {p} x DP {d} = {world} GPUs, {l} decoder layers,\n\
         # micro-batch {}, global batch {}, ZeRO-{}{}{}.\n\
         # Launch on {world} GPUs: Megatron-LM sets DP = world size / (TP x PP) = {d}.\n",
        layout.micro_batch,
        layout.global_batch,
        layout.zero.stage(),
        if layout.recompute { ", full recomputation" } else { "" },
        if interleaved {
            format!(
                ", interleaved 1F1B with {} chunks per stage (chunk c on stage c mod {p})",
                layout.schedule.chunks()
            )
        } else {
            String::new()
        }
    );
    if layout.overlap_grad_reduce {
        text.push_str(
            "# --overlap-grad-reduce: each stage's DP gradient reduction overlaps its last micro-batch's backward.\n",
        );
    }
    if layout.zero == Zero::Optimizer {
        text.push_str(
            "# ZeRO-1 -> --use-distributed-optimizer: optimizer state sharded over the DP group.\n",
        );
    }
    text.push_str(&stage_comments(plan, &blocks));
    text.push_str(&format!(
        "--tensor-model-parallel-size {t}{sequence} --pipeline-model-parallel-size {p} --num-layers {l}{split} --micro-batch-size {} --global-batch-size {}{optimizer}{recompute}{overlap}\n",
        layout.micro_batch, layout.global_batch
    ));
    Ok(text)
}

/// `--num-layers-per-virtual-pipeline-stage k` for an interleaved layout whose `p·v` chunks
/// each hold `k` decoder layers (`counts`, per chunk); an error for unequal chunks, which
/// that flag cannot express.
fn virtual_stages(counts: &[usize], v: usize) -> Result<String, String> {
    if counts.iter().any(|&k| k != counts[0] || k == 0) {
        return Err(format!(
            "the interleaved layout's chunks hold {counts:?} decoder layers; Megatron-LM's --num-layers-per-virtual-pipeline-stage needs every one of the {} chunks ({v} per stage) with the same number",
            counts.len()
        ));
    }
    Ok(format!(
        " --num-layers-per-virtual-pipeline-stage {}",
        counts[0]
    ))
}

/// Reads Megatron-LM arguments for the chain of `units` (unit names) launched on
/// `world_size` GPUs into a layout (1F1B, or interleaved with
/// `--num-layers-per-virtual-pipeline-stage`); an error naming the flag otherwise.
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
    let overlap_grad_reduce = has_switch(&words, "--overlap-grad-reduce");
    if let Some(k) = flag_value(&words, &["--num-layers-per-virtual-pipeline-stage"])? {
        let k = positive("--num-layers-per-virtual-pipeline-stage", k)?;
        if !l.is_multiple_of(p) || !(l / p).is_multiple_of(k) {
            return Err(format!(
                "--num-layers-per-virtual-pipeline-stage {k}: the {l} layers over {p} stages are not a whole number of chunks of {k} per stage"
            ));
        }
        let v = l / p / k;
        if v > 1 {
            let cfg = Uniform {
                micro_batch: b,
                tensor_parallel: t,
                data_parallel: d,
                zero,
                recompute,
                stages: p,
            };
            let mut bounds: Vec<usize> = (0..=p * v).map(|c| blocks.start + c * k).collect();
            bounds[0] = 0;
            bounds[p * v] = units.len();
            return Ok(
                Layout::interleaved(&bounds, &cfg, global, v).overlapped(overlap_grad_reduce)
            );
        }
    }
    let counts: Vec<usize> = if flag_value(&words, &["--num-layers-per-virtual-pipeline-stage"])?
        .is_some()
    {
        // One chunk per stage: Megatron-LM's even split, not interleaved.
        vec![l / p; p]
    } else {
        let stages = rank_stages(&words, p, l)?;
        if stages.len() != p {
            return Err(format!(
                "--pipeline-model-parallel-layout gives {} virtual stages for {p} ranks: interleaved layouts are read from --num-layers-per-virtual-pipeline-stage",
                stages.len()
            ));
        }
        stages
            .iter()
            .map(|(_, s)| s.iter().filter(|&&c| c == 't').count())
            .collect()
    };
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
            overlap_grad_reduce,
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
    fn virtual_pipeline_stages_read_as_an_interleaved_layout() {
        let text = "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 --num-layers 32 --num-layers-per-virtual-pipeline-stage 4 --micro-batch-size 1 --global-batch-size 256";
        let l = read_megatron(text, &names(32), 32).unwrap();
        assert_eq!(l.schedule, Schedule::Interleaved { chunks: 2 });
        assert_eq!(l.stages.len(), 8);
        assert_eq!(l.stages[0].units, 0..5);
        assert_eq!(l.stages[4].units, 17..21);
        assert_eq!(l.stages[7].units, 29..34);
        assert_eq!(l.stages[5].first_device, 8);
        let e = read_megatron(&text.replace("stage 4", "stage 3"), &names(32), 32).unwrap_err();
        assert!(
            e.contains("--num-layers-per-virtual-pipeline-stage 3"),
            "{e}"
        );
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

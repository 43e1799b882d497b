//! A vLLM command line of a uniform 3D layout, and reading it back (the rules are in the
//! parent module's documentation).

use super::{flag_or, layout_of, stage_comments, uniform_degrees, Blocks, Training};
use crate::export::shell_words;
use crate::export::vllm::default_partitions;
use crate::model::parallel::Layout;
use crate::solve::parallel::ParallelPlan;

const VARIABLE: &str = "VLLM_PP_LAYER_PARTITION";

/// A vLLM command line for `plan` (module documentation).
pub fn render_vllm(plan: &ParallelPlan) -> Result<String, String> {
    let layout = &plan.layout;
    let (t, d) = uniform_degrees(layout, "vLLM")?;
    if plan.chain.sequence_parallel && t > 1 {
        return Err("the plan is priced with sequence parallelism; vLLM's tensor parallelism does not split the sequence (plan without --sequence-parallel)".into());
    }
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

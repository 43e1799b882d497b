//! vLLM: `VLLM_PP_LAYER_PARTITION` with `--pipeline-parallel-size`.
//!
//! vLLM's rule (`get_pp_indices` in `vllm/distributed/utils.py`), for `P` pipeline ranks
//! (`--pipeline-parallel-size`, `-pp`, default 1) and `L` hidden layers:
//! - with `VLLM_PP_LAYER_PARTITION="p_0,…,p_{P−1}"` (integers, comma-separated): it must
//!   have exactly `P` entries and `Σ p_r = L`; rank `r` holds the hidden layers
//!   `[Σ_{j<r} p_j, Σ_{j≤r} p_j)`;
//! - without it: `q = ⌊L/P⌋` each, and the `L mod P` left over go one each to ranks
//!   `P−2, P−3, …` (every rank but the last gets at most one more).
//!
//! The first rank also builds the embedding and the last the final norm and LM head
//! (`vllm/model_executor/models/llama.py`: `is_first_rank` / `is_last_rank`), and every
//! rank is a GPU. So the plan must be a [`crate::export::DecoderStack`] whose `pre` layers
//! are on the first stage and `post` layers on the last, with accelerators only; the
//! export is the count of blocks per stage. A count may be 0 (a first stage that holds
//! only the embedding): vLLM's parser accepts it. A negative count, which vLLM does not
//! check, is refused on reading: it is no split.
//!
//! **Recomputation.** vLLM serves (forward passes only): it has no activation
//! checkpointing, so a plan that recomputes gets a `WARNING` comment naming the GPUs and
//! nothing else.

use super::{
    flag_value, placement_of_layers, positive, shell_words, DecoderStack, Exporter, LayerPlan,
};
use crate::model::layers::Layers;
use crate::model::{Device, Placement, Workload};

/// `--format vllm`.
pub struct Vllm;

const VARIABLE: &str = "VLLM_PP_LAYER_PARTITION";

impl Exporter for Vllm {
    fn name(&self) -> &'static str {
        "vllm"
    }

    fn target(&self) -> &'static str {
        "vLLM pipeline parallelism: VLLM_PP_LAYER_PARTITION with --pipeline-parallel-size"
    }

    fn render(&self, plan: &LayerPlan) -> Result<String, String> {
        plan.accelerators_only("vLLM")?;
        let stages = plan.stages()?;
        let stack = plan.decoder_stack("vLLM", &stages)?;
        let counts: Vec<String> = stages
            .iter()
            .map(|s| {
                (s.layers.start.max(stack.blocks.start)..s.layers.end.min(stack.blocks.end))
                    .len()
                    .to_string()
            })
            .collect();
        let mut text = format!(
            "# dnnplace export: vLLM pipeline parallelism, {} stages over {} hidden layers.\n\
             # vLLM reads VLLM_PP_LAYER_PARTITION in get_pp_indices (vllm/distributed/utils.py): hidden\n\
             # layers per pipeline rank, in order; the first rank also holds the embedding, the last the\n\
             # final norm and LM head.\n",
            stages.len(),
            stack.blocks.len()
        );
        text.push_str(&plan.device_comments("# "));
        text.push_str(&plan.recompute_not_carried(
            "# ",
            "vLLM",
            "it serves: no backward pass, no stash to trade",
        ));
        text.push_str(&format!(
            "{VARIABLE}=\"{}\" vllm serve MODEL --pipeline-parallel-size {}\n",
            counts.join(","),
            stages.len()
        ));
        Ok(text)
    }

    fn read(&self, text: &str, w: &Workload, layers: &Layers) -> Result<Placement, String> {
        let stack = DecoderStack::of(w, layers)
            .map_err(|why| format!("vLLM splits a decoder stack: {why}"))?;
        let words = shell_words(text)?;
        let size = flag_value(&words, &["--pipeline-parallel-size", "-pp"])?;
        let assignment = words.iter().rev().find_map(|word| {
            let (name, value) = word.split_once('=')?;
            (name == VARIABLE).then_some(value)
        });
        if size.is_none() && assignment.is_none() {
            return Err(format!("no split found: neither --pipeline-parallel-size (-pp) nor {VARIABLE} (is this a vLLM command line?)"));
        }
        let ranks = match size {
            Some(v) => positive("--pipeline-parallel-size", v)?,
            None => 1,
        };
        let hidden = stack.blocks.len();
        let partitions = match assignment {
            Some(value) => explicit_partitions(value, ranks, hidden)?,
            None => default_partitions(hidden, ranks),
        };
        let mut layer_device = vec![Device::Accelerator(0); layers.len()];
        let mut next_block = 0;
        for (rank, &count) in partitions.iter().enumerate() {
            for k in 0..count {
                layer_device[stack.blocks.start + next_block + k] = Device::Accelerator(rank);
            }
            next_block += count;
        }
        for l in stack.post.clone() {
            layer_device[l] = Device::Accelerator(ranks - 1);
        }
        Ok(placement_of_layers(w, layers, &layer_device))
    }
}

/// `VLLM_PP_LAYER_PARTITION`'s value under vLLM's checks.
fn explicit_partitions(value: &str, ranks: usize, hidden: usize) -> Result<Vec<usize>, String> {
    let mut partitions = Vec::new();
    for part in value.split(',') {
        let count: i64 = part.trim().trim_start_matches('+').parse().map_err(|_| {
            format!("Invalid partition string: {value} ({part:?} is not an integer)")
        })?;
        if count < 0 {
            return Err(format!("{VARIABLE}={value} has a negative count {count}"));
        }
        partitions.push(count as usize);
    }
    if partitions.len() != ranks {
        return Err(format!(
            "{VARIABLE}={value}: len(partitions)={} does not match pp_size={ranks} (--pipeline-parallel-size)",
            partitions.len()
        ));
    }
    let sum: usize = partitions.iter().sum();
    if sum != hidden {
        return Err(format!(
            "{VARIABLE}={value}: sum(partitions)={sum} does not match num_hidden_layers={hidden} (the workload's blocks)"
        ));
    }
    Ok(partitions)
}

/// vLLM's split without `VLLM_PP_LAYER_PARTITION` (module documentation).
pub fn default_partitions(hidden: usize, ranks: usize) -> Vec<usize> {
    let mut partitions = vec![hidden / ranks; ranks];
    let remaining = hidden % ranks;
    for i in 2..remaining + 2 {
        partitions[ranks - i] += 1;
    }
    partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_split_gives_the_remainder_to_all_but_the_last_rank() {
        // get_pp_indices' docstring: the last partition is excluded from the remainder.
        assert_eq!(default_partitions(24, 4), vec![6, 6, 6, 6]);
        assert_eq!(default_partitions(26, 4), vec![6, 7, 7, 6]);
        assert_eq!(default_partitions(27, 4), vec![7, 7, 7, 6]);
        assert_eq!(default_partitions(5, 1), vec![5]);
    }

    #[test]
    fn explicit_partitions_follow_vllms_checks() {
        assert_eq!(
            explicit_partitions("6, 6,6,+6", 4, 24).unwrap(),
            vec![6, 6, 6, 6]
        );
        assert!(explicit_partitions("6,6,6", 4, 24)
            .unwrap_err()
            .contains("len(partitions)=3 does not match pp_size=4"));
        assert!(explicit_partitions("6,6,6,5", 4, 24)
            .unwrap_err()
            .contains("sum(partitions)=23"));
        assert!(explicit_partitions("6,x,6,6", 4, 24)
            .unwrap_err()
            .contains("Invalid partition string"));
        assert!(explicit_partitions("7,-1,6,12", 4, 24)
            .unwrap_err()
            .contains("negative"));
    }
}

//! Megatron-LM: `--pipeline-model-parallel-size` with `--pipeline-model-parallel-layout`.
//!
//! **Layout grammar** (`PipelineParallelLayerLayout.parse_str_to_list` in
//! `megatron/core/transformer/pipeline_parallel_layer_layout.py`), applied in this order:
//! 1. commas are removed (they are cosmetic);
//! 2. every `(X)*n` (X: one or more characters other than `)`) becomes `n` copies of X;
//! 3. every `c*n` (c: any one character) becomes `n` copies of c;
//! 4. the string is split at `|` into virtual stages; each character is a layer:
//!    `E` embedding, `t` transformer (decoder) layer, `m` multi-token-prediction layer,
//!    `L` loss (output layer); any other character is an error.
//!
//! **Layout rules** (`__init__` and `validate_layer_layout` there): the number of stages `S`
//! is a multiple of `P = --pipeline-model-parallel-size` and `V = S / P` virtual stages run
//! per rank, stage `k` of the list on rank `k mod P`; over the list in order, the first
//! layer is `E` and the last `L`, each exactly once; the `t` count is `--num-layers`; `m`
//! layers (none here: the workload models no MTP) come after every `t`. Decoder layers are
//! numbered in list order (`get_layer_offset`).
//!
//! **Without a layout** (`transformer_config.py`, `transformer_block.py`): `F =
//! --decoder-first-pipeline-num-layers` and `G = --decoder-last-pipeline-num-layers` (each
//! `> 0` when given) go to the first and last rank and the other ranks share the rest
//! equally (it must divide; with no middle rank nothing may be left); without them the
//! `L` layers, plus one for each of `--account-for-embedding-in-pipeline-split` and
//! `--account-for-loss-in-pipeline-split`, split equally, the first (last) rank building
//! one decoder layer fewer for the embedding (loss). The two forms exclude each other.
//!
//! The embedding is on the first rank and the output layer on the last, so the plan must
//! be a [`crate::export::DecoderStack`] with `pre` on the first stage and `post` on the
//! last, on accelerators only. The export writes one stage per pipeline rank (`V = 1`):
//! `E` on the first, `t*k` for its `k` blocks, `L` on the last; the first/last flags are
//! given as an alternative when they express the same split.
//!
//! **Recomputation** (`TransformerConfig.recompute_granularity`, `recompute_method`,
//! `recompute_num_layers` in `megatron/core/transformer/transformer_config.py`, flags
//! `--recompute-granularity`, `--recompute-method`, `--recompute-num-layers` made from
//! those fields by `megatron/training/argument_utils.py`; the chunking in
//! `megatron/core/recompute.py`). With `full` granularity and the `uniform` method each
//! model chunk's `n` decoder layers run in chunks of `K = --recompute-num-layers`
//! (the last one clamped to `n`), each under `tensor_parallel.checkpoint`, keeping only the
//! chunk's input; so `K ≥ n` checkpoints a stage's decoder layers as one chunk — the
//! recomputation of [`crate::model::recompute`] (the embedding and the output layer are
//! never checkpointed). The setting is one for all stages: when any stage recomputes, the
//! export writes `--recompute-granularity full --recompute-method uniform
//! --recompute-num-layers K` with `K` the largest stage's decoder-layer count, so every
//! stage recomputes; when the plan leaves some stages without recomputation, a `WARNING`
//! comment names them and the forward time each then runs again (memory only falls).
//! Reading: rank `r` recomputes when the granularity is `full`, the method `uniform` and
//! `K` at least the decoder layers of each of its chunks (`block` checkpoints layer by
//! layer, `selective` and `--recompute-activations` only parts of a layer: not read as a
//! stage that recomputes).

use super::{
    flag_value, has_switch, placement_of_layers, positive, shell_words, DecoderStack, Exporter,
    LayerPlan,
};
use crate::model::layers::Layers;
use crate::model::{Device, Placement, Workload};

/// `--format megatron`.
pub struct Megatron;

/// The `--pipeline-model-parallel-layout` value of a split with `counts[s]` decoder layers
/// in stage `s`: the embedding `E` in the first stage, the loss `L` in the last, `t*k` for
/// `k` layers, stages joined by `|`.
pub(super) fn layout_string(counts: &[usize]) -> String {
    let last = counts.len().saturating_sub(1);
    let stages: Vec<String> = counts
        .iter()
        .enumerate()
        .map(|(s, &k)| {
            let mut parts: Vec<String> = Vec::new();
            if s == 0 {
                parts.push("E".into());
            }
            match k {
                0 => {}
                1 => parts.push("t".into()),
                k => parts.push(format!("t*{k}")),
            }
            if s == last {
                parts.push("L".into());
            }
            parts.join(",")
        })
        .collect();
    stages.join("|")
}

/// The longest expanded layout this reader accepts (a guard against `t*999999999`).
const MAX_EXPANDED: usize = 1 << 20;

impl Exporter for Megatron {
    fn name(&self) -> &'static str {
        "megatron"
    }

    fn target(&self) -> &'static str {
        "Megatron-LM: --pipeline-model-parallel-size with --pipeline-model-parallel-layout"
    }

    fn render(&self, plan: &LayerPlan) -> Result<String, String> {
        plan.accelerators_only("Megatron-LM")?;
        let stages = plan.stages()?;
        let stack = plan.decoder_stack("Megatron-LM", &stages)?;
        let counts: Vec<usize> = stages
            .iter()
            .map(|s| {
                (s.layers.start.max(stack.blocks.start)..s.layers.end.min(stack.blocks.end)).len()
            })
            .collect();
        let layout = layout_string(&counts);
        let (p, layers) = (stages.len(), stack.blocks.len());
        let mut text = format!(
            "# dnnplace export: Megatron-LM pipeline layout, {p} stages over {layers} decoder layers.\n\
             # E embedding, t decoder layer, L loss (output layer), | stage boundary, c*n repeats\n\
             # (megatron/core/transformer/pipeline_parallel_layer_layout.py).\n"
        );
        text.push_str(&plan.device_comments("# "));
        let recompute_flags = recompute_flags(plan, &counts);
        text.push_str(&format!(
            "--pipeline-model-parallel-size {p} --num-layers {layers} --pipeline-model-parallel-layout \"{}\"{}\n",
            layout,
            recompute_flags.flags
        ));
        text.push_str(&recompute_flags.comment);
        if p > 1 {
            text.push_str(&match first_last(&counts) {
                Ok(flags) => format!(
                    "# The same split for a Megatron-LM without --pipeline-model-parallel-layout:\n\
                     # --pipeline-model-parallel-size {p} --num-layers {layers}{flags}{}\n",
                    recompute_flags.flags
                ),
                Err(why) => format!("# --decoder-first/last-pipeline-num-layers cannot express this split: {why}.\n"),
            });
        }
        Ok(text)
    }

    fn read_recompute(&self, text: &str) -> Result<Option<Vec<usize>>, String> {
        let words = shell_words(text)?;
        let ranks = match flag_value(&words, &["--pipeline-model-parallel-size"])? {
            Some(v) => positive("--pipeline-model-parallel-size", v)?,
            None => 1,
        };
        let num_layers = match flag_value(&words, &["--num-layers"])? {
            Some(v) => positive("--num-layers", v)?,
            None => match flag_value(&words, &["--pipeline-model-parallel-layout"])? {
                Some(layout) => parse_layout(layout)?
                    .iter()
                    .flatten()
                    .filter(|&&c| c == 't')
                    .count(),
                None => {
                    return Err("no --num-layers and no --pipeline-model-parallel-layout".into())
                }
            },
        };
        let stages = rank_stages(&words, ranks, num_layers)?;
        recomputing_ranks(&words, &stages, ranks).map(Some)
    }

    fn read(&self, text: &str, w: &Workload, layers: &Layers) -> Result<Placement, String> {
        let stack = DecoderStack::of(w, layers)
            .map_err(|why| format!("Megatron-LM splits a decoder stack: {why}"))?;
        let words = shell_words(text)?;
        if flag_value(&words, &["--pipeline-model-parallel-size"])?.is_none()
            && flag_value(&words, &["--pipeline-model-parallel-layout"])?.is_none()
        {
            return Err("no split found: neither --pipeline-model-parallel-size nor --pipeline-model-parallel-layout (is this a Megatron-LM command line?)".into());
        }
        let ranks = match flag_value(&words, &["--pipeline-model-parallel-size"])? {
            Some(v) => positive("--pipeline-model-parallel-size", v)?,
            None => 1,
        };
        let num_layers = stack.blocks.len();
        if let Some(v) = flag_value(&words, &["--num-layers"])? {
            let given = positive("--num-layers", v)?;
            if given != num_layers {
                return Err(format!(
                    "--num-layers {given} but the workload has {num_layers} decoder blocks"
                ));
            }
        }
        let stages = rank_stages(&words, ranks, num_layers)?;
        let mut layer_device = vec![Device::Accelerator(0); layers.len()];
        let mut next_block = stack.blocks.start;
        for (rank, stage) in &stages {
            for &c in stage {
                match c {
                    'E' => stack
                        .pre
                        .clone()
                        .for_each(|l| layer_device[l] = Device::Accelerator(*rank)),
                    'L' => stack
                        .post
                        .clone()
                        .for_each(|l| layer_device[l] = Device::Accelerator(*rank)),
                    _ => {
                        layer_device[next_block] = Device::Accelerator(*rank);
                        next_block += 1;
                    }
                }
            }
        }
        Ok(placement_of_layers(w, layers, &layer_device))
    }
}

/// The recompute flags for the plan (empty without recomputation) and the comment lines
/// that explain them (module documentation).
struct RecomputeFlags {
    flags: String,
    comment: String,
}

fn recompute_flags(plan: &LayerPlan, counts: &[usize]) -> RecomputeFlags {
    let planned = plan.recompute_stages();
    if planned.is_empty() {
        return RecomputeFlags {
            flags: String::new(),
            comment: String::new(),
        };
    }
    let k = counts.iter().copied().max().unwrap_or(1).max(1);
    let mut comment = format!(
        "# Activation recomputation (the plan recomputes on {}): full granularity, uniform method,\n\
         # {k} decoder layers per recompute chunk = every stage's decoder layers as one chunk\n\
         # (megatron/core/recompute.py); Megatron-LM applies it to every pipeline stage.\n",
        super::gpu_list(&planned)
    );
    let extra: Vec<String> = (0..counts.len())
        .filter(|s| !planned.contains(s))
        .map(|s| format!("GPU {s} (+{:.3} ms)", plan.forward_ms(s)))
        .collect();
    if !extra.is_empty() {
        comment.push_str(&format!(
            "# WARNING: Megatron-LM has one recompute setting for all pipeline stages; the plan recomputes only on {}, so {} recompute too: their forward pass runs again (the time in brackets), their memory only falls.\n",
            super::gpu_list(&planned),
            extra.join(", ")
        ));
    }
    RecomputeFlags {
        flags: format!(
            " --recompute-granularity full --recompute-method uniform --recompute-num-layers {k}"
        ),
        comment,
    }
}

/// The ranks that recompute their decoder layers as one chunk under the recompute flags in
/// `words` (module documentation), given the ranks' chunks.
fn recomputing_ranks(
    words: &[String],
    stages: &[(usize, Vec<char>)],
    ranks: usize,
) -> Result<Vec<usize>, String> {
    let Some(granularity) = flag_value(words, &["--recompute-granularity"])? else {
        return Ok(Vec::new());
    };
    let method = flag_value(words, &["--recompute-method"])?;
    let num = flag_value(words, &["--recompute-num-layers"])?;
    match granularity {
        "selective" => {
            if num.is_some() {
                return Err("When using recompute_granularity: selective recompute_num_layers must be None.".into());
            }
            return Ok(Vec::new());
        }
        "full" => {}
        other => {
            return Err(format!(
                "When using recompute_granuarlity: {other} must be \"full\" or \"selective\"."
            ))
        }
    }
    let method = match method {
        Some(m @ ("uniform" | "block")) => m,
        Some(m) => return Err(format!("recompute_method: {m} must be \"block\" or \"uniform\".")),
        None => return Err("Using recompute_granularity: full so recompute_method must be \"block\" or \"uniform\"".into()),
    };
    let k = positive(
        "--recompute-num-layers",
        num.ok_or("When using recompute_granularity: full recompute_num_layers must be given")?,
    )?;
    if method != "uniform" {
        return Ok(Vec::new());
    }
    Ok((0..ranks)
        .filter(|&r| {
            stages
                .iter()
                .filter(|(rank, _)| *rank == r)
                .all(|(_, chunk)| chunk.iter().filter(|&&c| c == 't').count() <= k)
        })
        .collect())
}

/// (rank of each virtual stage, its layers) in list order, from the layout or the
/// first/last flags or the even split (module documentation).
pub(super) fn rank_stages(
    words: &[String],
    ranks: usize,
    num_layers: usize,
) -> Result<Vec<(usize, Vec<char>)>, String> {
    let first = flag_value(words, &["--decoder-first-pipeline-num-layers"])?;
    let last = flag_value(words, &["--decoder-last-pipeline-num-layers"])?;
    let embedding = has_switch(words, "--account-for-embedding-in-pipeline-split");
    let loss = has_switch(words, "--account-for-loss-in-pipeline-split");
    // (rank of each virtual stage, its layers) in list order.
    let stages: Vec<(usize, Vec<char>)> = match flag_value(
        words,
        &["--pipeline-model-parallel-layout"],
    )? {
        Some(layout) => {
            if first.is_some() || last.is_some() || embedding || loss {
                return Err("pipeline_model_parallel_layout cannot be set with other pipeline layout arguments (--decoder-first/last-pipeline-num-layers, --account-for-*-in-pipeline-split)".into());
            }
            let list = parse_layout(layout)?;
            validate_layout(&list, ranks, num_layers)?;
            list.into_iter()
                .enumerate()
                .map(|(k, stage)| (k % ranks, stage))
                .collect()
        }
        None => {
            for flag in [
                "--num-layers-per-virtual-pipeline-stage",
                "--num-virtual-stages-per-pipeline-rank",
            ] {
                if flag_value(words, &[flag])?.is_some() {
                    return Err(format!("{flag}: interleaved schedules are read from --pipeline-model-parallel-layout only"));
                }
            }
            let counts = uneven_counts(num_layers, ranks, first, last, embedding, loss)?;
            let last_rank = ranks - 1;
            counts
                .into_iter()
                .enumerate()
                .map(|(r, k)| {
                    let mut stage: Vec<char> = Vec::new();
                    if r == 0 {
                        stage.push('E');
                    }
                    stage.extend(std::iter::repeat_n('t', k));
                    if r == last_rank {
                        stage.push('L');
                    }
                    (r, stage)
                })
                .collect()
        }
    };
    Ok(stages)
}

/// ` --decoder-first-pipeline-num-layers F --decoder-last-pipeline-num-layers G` for the
/// per-stage block counts, or why those flags cannot express them.
pub(super) fn first_last(counts: &[usize]) -> Result<String, String> {
    let p = counts.len();
    let (f, g) = (counts[0], counts[p - 1]);
    if f == 0 || g == 0 {
        return Err("they need at least one decoder layer on the first and the last stage".into());
    }
    let middle = &counts[1..p - 1];
    if let Some(&m) = middle.first() {
        if m == 0 || middle.iter().any(|&x| x != m) {
            return Err(format!(
                "the middle stages hold {} decoder layers, and the flags give them equal non-zero counts",
                middle.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    Ok(format!(
        " --decoder-first-pipeline-num-layers {f} --decoder-last-pipeline-num-layers {g}"
    ))
}

/// Decoder layers per rank without a layout string (module documentation).
fn uneven_counts(
    num_layers: usize,
    ranks: usize,
    first: Option<&str>,
    last: Option<&str>,
    embedding: bool,
    loss: bool,
) -> Result<Vec<usize>, String> {
    if first.is_some() || last.is_some() {
        if embedding || loss {
            return Err("num_layers_in_first_pipeline_stage and num_layers_in_last_pipeline_stage cannot be set at the same time with account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split".into());
        }
        let first = first
            .map(|v| positive("--decoder-first-pipeline-num-layers", v))
            .transpose()?;
        let last = last
            .map(|v| positive("--decoder-last-pipeline-num-layers", v))
            .transpose()?;
        let mut left = num_layers as i64;
        let mut stages_left = ranks as i64;
        for k in [first, last].into_iter().flatten() {
            left -= k as i64;
            stages_left -= 1;
        }
        if left < 0 || stages_left < 0 || (left != 0) != (stages_left != 0) {
            return Err(format!("Mismatch: {left} middle layers remaining but {stages_left} middle PP stages available"));
        }
        let per = if stages_left > 0 {
            if left % stages_left != 0 {
                return Err(format!(
                    "With uneven pipelineing the left over layers must be divisible by left over stages ({left} layers, {stages_left} stages)"
                ));
            }
            (left / stages_left) as usize
        } else {
            0
        };
        let mut counts = vec![per; ranks];
        if let Some(f) = first {
            counts[0] = f;
        }
        if let Some(g) = last {
            counts[ranks - 1] = g;
        }
        return Ok(counts);
    }
    let total = num_layers + usize::from(embedding) + usize::from(loss);
    if !total.is_multiple_of(ranks) {
        return Err(format!(
            "num_layers={total} should be divisible by pipeline_model_parallel_size={ranks} (with the embedding and loss layers counted as asked)"
        ));
    }
    let per = total / ranks;
    let mut counts = vec![per as i64; ranks];
    counts[0] -= i64::from(embedding);
    counts[ranks - 1] -= i64::from(loss);
    if counts.iter().any(|&c| c < 0) {
        return Err(
            "Not enough layers in the first or last pipeline stage for the embedding or loss layer"
                .into(),
        );
    }
    Ok(counts.into_iter().map(|c| c as usize).collect())
}

/// `parse_str_to_list`: the layout string as a list of virtual stages (module documentation).
pub fn parse_layout(layout: &str) -> Result<Vec<Vec<char>>, String> {
    let text: Vec<char> = layout.chars().filter(|&c| c != ',').collect();
    let text = expand_groups(&text)?;
    let text = expand_chars(&text)?;
    let mut stages: Vec<Vec<char>> = vec![Vec::new()];
    for c in text {
        match c {
            '|' => stages.push(Vec::new()),
            'E' | 'L' | 't' | 'm' => stages.last_mut().expect("one stage at least").push(c),
            other => {
                return Err(format!(
                    "Invalid layer character: {other:?} in layout {layout:?}, known layer characters: ['E', 'L', 't', 'm']"
                ))
            }
        }
    }
    Ok(stages)
}

/// The digits at `text[i..]` as a count, and where they end.
fn count_at(text: &[char], i: usize) -> Option<(usize, usize)> {
    let end = (i..text.len())
        .find(|&j| !text[j].is_ascii_digit())
        .unwrap_or(text.len());
    if end == i {
        return None;
    }
    let digits: String = text[i..end].iter().collect();
    Some((digits.parse().unwrap_or(usize::MAX), end))
}

fn push_copies(out: &mut Vec<char>, what: &[char], n: usize) -> Result<(), String> {
    if out.len().saturating_add(what.len().saturating_mul(n)) > MAX_EXPANDED {
        return Err(format!(
            "the layout expands to more than {MAX_EXPANDED} characters"
        ));
    }
    for _ in 0..n {
        out.extend_from_slice(what);
    }
    Ok(())
}

/// Rule 2: `(X)*n` → X repeated n times, left to right, X up to the first `)`.
fn expand_groups(text: &[char]) -> Result<Vec<char>, String> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i] == '(' {
            if let Some(close) = (i + 1..text.len()).find(|&j| text[j] == ')') {
                if close > i + 1 && text.get(close + 1) == Some(&'*') {
                    if let Some((n, end)) = count_at(text, close + 2) {
                        push_copies(&mut out, &text[i + 1..close], n)?;
                        i = end;
                        continue;
                    }
                }
            }
        }
        out.push(text[i]);
        i += 1;
    }
    Ok(out)
}

/// Rule 3: `c*n` → c repeated n times, left to right.
fn expand_chars(text: &[char]) -> Result<Vec<char>, String> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text.get(i + 1) == Some(&'*') {
            if let Some((n, end)) = count_at(text, i + 2) {
                push_copies(&mut out, &text[i..i + 1], n)?;
                i = end;
                continue;
            }
        }
        out.push(text[i]);
        i += 1;
    }
    Ok(out)
}

/// The layout rules of the module documentation, for `ranks` ranks and `num_layers` decoders.
pub fn validate_layout(list: &[Vec<char>], ranks: usize, num_layers: usize) -> Result<(), String> {
    if !list.len().is_multiple_of(ranks) {
        return Err(format!(
            "pipeline_model_parallel_layout must be divisible by pipeline_model_parallel_size (len(layout)={}, pipeline_model_parallel_size={ranks})",
            list.len()
        ));
    }
    let flat: Vec<char> = list.iter().flatten().copied().collect();
    let count = |c: char| flat.iter().filter(|&&x| x == c).count();
    if flat.first() != Some(&'E') {
        return Err(format!(
            "The first layer must be embedding (E), but got {:?}",
            flat.first()
        ));
    }
    if flat.last() != Some(&'L') {
        return Err(format!(
            "The last layer must be loss (L), but got {:?}",
            flat.last()
        ));
    }
    if count('E') != 1 {
        return Err("Embedding (E) must be specified exactly once".into());
    }
    if count('L') != 1 {
        return Err("Loss (L) must be specified exactly once".into());
    }
    if count('t') != num_layers {
        return Err(format!(
            "Number of decoder layers (t) {} must match num_layers {num_layers}",
            count('t')
        ));
    }
    if count('m') != 0 {
        return Err("the layout has MTP layers (m), which the workload does not model".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expanded(layout: &str) -> Vec<String> {
        parse_layout(layout)
            .unwrap()
            .into_iter()
            .map(|s| s.into_iter().collect())
            .collect()
    }

    #[test]
    fn the_docstring_examples_parse_as_megatron_says() {
        // parse_str_to_list's docstring: "Ettt|(tt|)*29,m|L" -> [E,t,t,t] + [t,t]*29 + [m] + [L].
        let list = expanded("Ettt|(tt|)*29,m|L");
        assert_eq!(list.len(), 1 + 29 + 2);
        assert_eq!(list[0], "Ettt");
        assert!(list[1..30].iter().all(|s| s == "tt"));
        assert_eq!(&list[30..], ["m", "L"]);
        // The regex comments: "xy(ab|cd|ef)*2,pq" with letters replaced by layer characters.
        assert_eq!(expanded("tt(E|t|L)*2,mm").join("|"), "ttE|t|LE|t|Lmm");
        assert_eq!(expanded("(tE)*3"), ["tEtEtE"]);
        assert_eq!(expanded("E,(t|)*2"), ["Et", "t", ""]);
        assert_eq!(expanded("(|t)*2,L"), ["", "t", "tL"]);
        assert_eq!(expanded("Et*3|t*3L"), ["Ettt", "tttL"]);
    }

    #[test]
    fn bad_layouts_are_rejected_with_megatrons_reason() {
        assert!(parse_layout("Ex|L")
            .unwrap_err()
            .contains("Invalid layer character"));
        assert!(validate_layout(&parse_layout("Et|tL").unwrap(), 3, 2)
            .unwrap_err()
            .contains("divisible"));
        assert!(validate_layout(&parse_layout("t|EtL").unwrap(), 2, 2)
            .unwrap_err()
            .contains("first layer"));
        assert!(validate_layout(&parse_layout("Et|t").unwrap(), 2, 2)
            .unwrap_err()
            .contains("last layer"));
        assert!(validate_layout(&parse_layout("Et|tL").unwrap(), 2, 3)
            .unwrap_err()
            .contains("must match num_layers"));
        assert!(validate_layout(&parse_layout("Et|EtL").unwrap(), 2, 2)
            .unwrap_err()
            .contains("exactly once"));
        assert!(parse_layout("t*99999999").unwrap_err().contains("expands"));
    }

    #[test]
    fn uneven_counts_follow_transformer_block() {
        assert_eq!(
            uneven_counts(24, 4, Some("5"), Some("7"), false, false).unwrap(),
            vec![5, 6, 6, 7]
        );
        assert_eq!(
            uneven_counts(24, 4, None, None, false, false).unwrap(),
            vec![6, 6, 6, 6]
        );
        assert_eq!(
            uneven_counts(22, 4, None, None, true, true).unwrap(),
            vec![5, 6, 6, 5]
        );
        assert!(uneven_counts(24, 4, Some("5"), Some("6"), false, false)
            .unwrap_err()
            .contains("divisible"));
        assert!(uneven_counts(24, 2, Some("5"), Some("6"), false, false)
            .unwrap_err()
            .contains("Mismatch"));
        assert!(uneven_counts(23, 4, None, None, false, false)
            .unwrap_err()
            .contains("divisible"));
    }

    #[test]
    fn first_last_flags_only_for_even_middles() {
        assert_eq!(
            first_last(&[5, 6, 6, 7]).unwrap(),
            " --decoder-first-pipeline-num-layers 5 --decoder-last-pipeline-num-layers 7"
        );
        assert!(first_last(&[5, 6, 7, 6]).is_err());
        assert!(first_last(&[0, 12, 12]).is_err());
    }

    /// TransformerConfig's recompute rules, and which ranks then checkpoint whole stages.
    #[test]
    fn recompute_flags_follow_transformer_config() {
        let read = |flags: &str| {
            Megatron.read_recompute(&format!(
                "--pipeline-model-parallel-size 2 --num-layers 6 --pipeline-model-parallel-layout \"E,t*2|t*4,L\" {flags}"
            ))
        };
        assert_eq!(read("").unwrap(), Some(vec![]));
        assert_eq!(
            read(
                "--recompute-granularity full --recompute-method uniform --recompute-num-layers 2"
            )
            .unwrap(),
            Some(vec![0])
        );
        assert_eq!(
            read(
                "--recompute-granularity full --recompute-method uniform --recompute-num-layers 4"
            )
            .unwrap(),
            Some(vec![0, 1])
        );
        assert_eq!(
            read("--recompute-granularity full --recompute-method block --recompute-num-layers 4")
                .unwrap(),
            Some(vec![])
        );
        assert_eq!(
            read("--recompute-granularity selective").unwrap(),
            Some(vec![])
        );
        assert!(
            read("--recompute-granularity full --recompute-num-layers 4")
                .unwrap_err()
                .contains("recompute_method")
        );
        assert!(
            read("--recompute-granularity full --recompute-method uniform")
                .unwrap_err()
                .contains("recompute_num_layers")
        );
        assert!(
            read("--recompute-granularity selective --recompute-num-layers 1")
                .unwrap_err()
                .contains("must be None")
        );
        assert!(read("--recompute-granularity most").is_err());
    }
}

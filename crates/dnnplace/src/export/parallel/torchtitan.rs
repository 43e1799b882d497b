//! torchtitan: the TOML `[parallelism]`, `[training]` and `[activation_checkpoint]` sections
//! of a uniform 3D layout, and reading a torchtitan TOML back.
//!
//! **Which torchtitan.** Release 0.2.2 (PyPI `torchtitan==0.2.2`), the last with TOML job
//! files (`--job.config_file`, read by `torchtitan.config.ConfigManager`; later releases
//! configure runs in Python). Field names and defaults are those of its
//! `torchtitan/config/job_config.py`; `python/tests` loads every export with that
//! `ConfigManager`.
//!
//! **The mapping.** Units: `embeddings` ↦ `tok_embeddings`, `layers.N` ↦ `layers.N`, `head` ↦
//! `norm` and `output` (the model's own module names); the split is
//! `module_fqns_per_model_part`, one list per pipeline stage. DP and ZeRO: torchtitan
//! shards with FSDP2, so ZeRO-0 ↦ `data_parallel_replicate_degree = d` (DDP), ZeRO-2 ↦
//! `data_parallel_shard_degree = d` with `fsdp_reshard_after_forward = "never"` (weights
//! gathered once per step and kept through the backward; gradients and optimizer state
//! sharded), ZeRO-3 ↦ the same with `"always"` (weights gathered for every forward and
//! backward); ZeRO-1 has no FSDP2 counterpart and is refused. Micro-batches: with pipeline
//! stages, `pipeline_parallel_microbatch_size = b` and `local_batch_size = b·m` (one pipeline
//! flush per step, `global_batch_size = B`, no gradient accumulation); with one stage,
//! `local_batch_size = b` and torchtitan accumulates `B/(b·d)` gradients. The schedule is
//! `"1F1B"` or `"GPipe"` (`torch.distributed.pipelining` names). Full recomputation ↦
//! `[activation_checkpoint] mode = "full"` (each transformer block checkpointed alone),
//! none ↦ `"none"`.
//!
//! **Reading** applies torchtitan's defaults where a field is absent: `data_parallel_shard_
//! degree = -1` takes the ranks left over, `fsdp_reshard_after_forward = "default"` is
//! `"never"` with pipeline stages and `"always"` without (`apply_fsdp` in
//! `models/llama3/infra/parallelize.py`), and without `module_fqns_per_model_part` the split
//! is `generate_llm_fqn_per_model_part` (`distributed/pipeline_parallel.py`) with the
//! first/last-stage weights. What the model cannot price is refused naming the field: HSDP
//! (replicate and shard both > 1), context or expert parallelism, looped schedules,
//! selective recomputation (torchtitan's default mode), gradient accumulation with pipeline
//! stages. torchtitan's TP runs sequence parallelism on the norms; dnnplace prices TP
//! without it (the same communication volume; the norms' activations not divided by `t`),
//! which the reader states as a note.

use toml::{Table, Value};

use super::{layout_of_ranges, stage_comments, uniform_degrees, Blocks, Training};
use crate::model::parallel::{Layout, Zero};
use crate::model::schedule::Schedule;
use crate::solve::parallel::ParallelPlan;

/// Checks that the chain is `embeddings`, the blocks, `head` (torchtitan's decoder shape).
fn check_shape<S: AsRef<str>>(units: &[S], blocks: &Blocks) -> Result<(), String> {
    let first = units.first().map(AsRef::as_ref);
    let last = units.last().map(AsRef::as_ref);
    if blocks.start != 1
        || blocks.end + 1 != units.len()
        || first != Some("embeddings")
        || last != Some("head")
    {
        return Err(format!(
            "torchtitan's decoders are tok_embeddings, layers.N, norm, output; this chain runs {} .. {}",
            first.unwrap_or(""),
            last.unwrap_or("")
        ));
    }
    Ok(())
}

/// torchtitan's module names of unit `u` of a chain of `n` units.
fn fqns(name: &str, u: usize, n: usize) -> Vec<String> {
    match u {
        0 => vec!["tok_embeddings".into()],
        u if u + 1 == n => vec!["norm".into(), "output".into()],
        _ => vec![name.to_string()],
    }
}

/// `(replicate, shard, reshard policy)` of ZeRO `zero` over DP `d` (module documentation).
fn data_parallel(zero: Zero, d: usize) -> Result<(usize, usize, Option<&'static str>), String> {
    match (zero, d) {
        (_, 1) => Ok((1, 1, None)),
        (Zero::Off, d) => Ok((d, 1, None)),
        (Zero::Optimizer, _) => Err("ZeRO-1: torchtitan's FSDP2 shards the weights with the optimizer state (ZeRO-2 with fsdp_reshard_after_forward \"never\", ZeRO-3 with \"always\") or replicates everything (ZeRO-0); plan with --zero 0, 2, 3 or auto".into()),
        (Zero::Gradients, d) => Ok((1, d, Some("never"))),
        (Zero::Parameters, d) => Ok((1, d, Some("always"))),
    }
}

/// torchtitan's name of `schedule`.
fn schedule_name(schedule: Schedule) -> Result<&'static str, String> {
    match schedule {
        Schedule::OneFOneB => Ok("1F1B"),
        Schedule::GPipe => Ok("GPipe"),
        s => Err(format!(
            "the layout runs {s}; a torchtitan 3D layout runs 1F1B or GPipe"
        )),
    }
}

/// The torchtitan TOML sections of `plan` (module documentation).
/// What the header says of sequence parallelism, which torchtitan's TP plan always runs
/// (its norms are `SequenceParallel()` in `apply_tp`).
fn sequence_note(priced: bool, t: usize) -> &'static str {
    match (t > 1, priced) {
        (false, _) => "",
        (true, true) => "# torchtitan's TP runs sequence parallelism on the norms, as this plan prices.\n",
        (true, false) => "# torchtitan's TP also runs sequence parallelism on the norms, which this plan does not price\n\
                          # (same communication; plan with --sequence-parallel to price it).\n",
    }
}

pub fn render_torchtitan(plan: &ParallelPlan) -> Result<String, String> {
    let layout = &plan.layout;
    let (t, d) = uniform_degrees(layout, "torchtitan")?;
    let names: Vec<&str> = plan.chain.units.iter().map(|u| u.name.as_str()).collect();
    let blocks = Blocks::of(&names)?;
    check_shape(&names, &blocks)?;
    let schedule = schedule_name(layout.schedule)?;
    let (replicate, shard, reshard) = data_parallel(layout.zero, d)?;
    let p = layout.stages.len();
    let (b, big) = (layout.micro_batch, layout.global_batch);
    let m = big / (b * d);
    let mut text = format!(
        "# dnnplace export: torchtitan 0.2.2 job file sections, TP {t} x PP {p} x DP {d} = {} GPUs, {} decoder layers,\n\
         # micro-batch {b}, global batch {big} ({m} micro-batches per DP rank), ZeRO-{}{}.\n\
         # Merge into your job file ([job], [model], [optimizer], ... stay yours); launch on {} GPUs.\n{}",
        t * p * d,
        blocks.len(),
        layout.zero.stage(),
        if layout.recompute { ", full recomputation" } else { "" },
        t * p * d,
        sequence_note(plan.chain.sequence_parallel, t),
    );
    text.push_str(&stage_comments(plan, &blocks));
    text.push_str("\n[parallelism]\n");
    text.push_str(&format!(
        "data_parallel_replicate_degree = {replicate}\ndata_parallel_shard_degree = {shard}\n"
    ));
    if let Some(policy) = reshard {
        text.push_str(&format!("fsdp_reshard_after_forward = \"{policy}\"\n"));
    }
    text.push_str(&format!(
        "tensor_parallel_degree = {t}\npipeline_parallel_degree = {p}\n"
    ));
    if p > 1 {
        let parts: Vec<Vec<String>> = layout
            .stages
            .iter()
            .map(|st| {
                st.units
                    .clone()
                    .flat_map(|u| fqns(names[u], u, names.len()))
                    .collect()
            })
            .collect();
        text.push_str(&format!(
            "pipeline_parallel_schedule = \"{schedule}\"\npipeline_parallel_microbatch_size = {b}\nmodule_fqns_per_model_part = {}\n",
            serde_json::to_string(&parts).expect("strings")
        ));
    }
    let local = if p > 1 { b * m } else { b };
    text.push_str(&format!(
        "\n[training]\nlocal_batch_size = {local}\nglobal_batch_size = {big}\n\n[activation_checkpoint]\nmode = \"{}\"\n",
        if layout.recompute { "full" } else { "none" }
    ));
    Ok(text)
}

/// One section of the job file (empty when absent).
fn section<'a>(file: &'a Table, name: &str) -> Result<&'a Table, String> {
    static EMPTY: std::sync::OnceLock<Table> = std::sync::OnceLock::new();
    match file.get(name) {
        None => Ok(EMPTY.get_or_init(Table::new)),
        Some(Value::Table(t)) => Ok(t),
        Some(_) => Err(format!("[{name}] is not a table")),
    }
}

/// An integer field, `default` when absent.
fn int(sec: &Table, name: &str, key: &str, default: i64) -> Result<i64, String> {
    match sec.get(key) {
        None => Ok(default),
        Some(Value::Integer(v)) => Ok(*v),
        Some(v) => Err(format!("[{name}] {key} = {v} is not an integer")),
    }
}

/// A string field, `default` when absent.
fn string<'a>(sec: &'a Table, name: &str, key: &str, default: &'a str) -> Result<&'a str, String> {
    match sec.get(key) {
        None => Ok(default),
        Some(Value::String(v)) => Ok(v),
        Some(v) => Err(format!("[{name}] {key} = {v} is not a string")),
    }
}

/// A count ≥ 1 (to 2^24).
fn count(name: &str, key: &str, v: i64) -> Result<usize, String> {
    if (1..=1 << 24).contains(&v) {
        Ok(v as usize)
    } else {
        Err(format!("[{name}] {key} = {v} is not a positive count"))
    }
}

/// `(d, ZeRO)` of the DP fields on `world` GPUs with `t·p` per replica.
fn read_data_parallel(
    par: &Table,
    world: usize,
    tp_pp: usize,
    p: usize,
) -> Result<(usize, Zero), String> {
    const P: &str = "parallelism";
    let r = count(
        P,
        "data_parallel_replicate_degree",
        int(par, P, "data_parallel_replicate_degree", 1)?,
    )?;
    let s = match int(par, P, "data_parallel_shard_degree", -1)? {
        -1 => {
            if !world.is_multiple_of(r * tp_pp) {
                return Err(format!(
                    "[parallelism] data_parallel_shard_degree = -1 takes the ranks left over, but replicate {r} x TP x PP = {} does not divide the cluster's {world} GPUs",
                    r * tp_pp
                ));
            }
            world / (r * tp_pp)
        }
        v => count(P, "data_parallel_shard_degree", v)?,
    };
    if r > 1 && s > 1 {
        return Err(format!("[parallelism] data_parallel_replicate_degree {r} and data_parallel_shard_degree {s}: HSDP (replicas of sharded groups) is not modelled; give one of them 1"));
    }
    let zero = if s > 1 {
        match string(par, P, "fsdp_reshard_after_forward", "default")? {
            "always" => Zero::Parameters,
            "never" => Zero::Gradients,
            "default" if p > 1 => Zero::Gradients,
            "default" => Zero::Parameters,
            other => return Err(format!("[parallelism] fsdp_reshard_after_forward = \"{other}\": torchtitan takes default, always or never")),
        }
    } else {
        Zero::Off
    };
    Ok((r * s, zero))
}

/// Layers per stage from `generate_llm_fqn_per_model_part(stages, layers, input, output)`:
/// `(k_0..k_{p−1})` decoder blocks per stage, or torchtitan's own error.
pub fn default_split(
    stages: usize,
    layers: usize,
    input: usize,
    output: usize,
) -> Result<Vec<usize>, String> {
    if stages == 1 {
        return Ok(vec![layers]);
    }
    let effective = layers + input + output;
    let per = effective / stages;
    if stages > effective || per == 0 {
        return Err(format!("torchtitan cannot split {layers} layers (+{input} +{output} for the embedding and output) into {stages} stages"));
    }
    if input > per || output > per {
        return Err(format!("[parallelism] pipeline_parallel_first/last_stage_less_layers ({input}, {output}) exceed the {per} layers per stage"));
    }
    let extra = effective % stages;
    let mut left = layers;
    Ok((0..stages)
        .map(|s| {
            let eff = per + usize::from(s < extra);
            let want = match s {
                0 => eff - input,
                s if s + 1 == stages => eff - output,
                _ => eff,
            };
            let k = want.min(left);
            left -= k;
            k
        })
        .collect())
}

/// Unit ranges of `module_fqns_per_model_part` over a chain of `n` units.
fn ranges_of_fqns(parts: &Value, n: usize) -> Result<Vec<std::ops::Range<usize>>, String> {
    const KEY: &str = "[parallelism] module_fqns_per_model_part";
    let Value::Array(parts) = parts else {
        return Err(format!("{KEY} is not a list of lists"));
    };
    let unit_of = |f: &str| -> Result<usize, String> {
        match f {
            "tok_embeddings" => Ok(0),
            "norm" | "output" => Ok(n - 1),
            _ => f
                .strip_prefix("layers.")
                .and_then(|i| i.parse::<usize>().ok())
                .filter(|&i| i + 2 < n)
                .map(|i| i + 1)
                .ok_or(format!("{KEY}: '{f}' is not a module of this model (tok_embeddings, layers.0..{}, norm, output)", n - 3)),
        }
    };
    let mut next = 0;
    let mut out = Vec::with_capacity(parts.len());
    let mut seen_norm_output = [None, None];
    for (s, part) in parts.iter().enumerate() {
        let Value::Array(names) = part else {
            return Err(format!("{KEY}[{s}] is not a list of module names"));
        };
        let start = next;
        for name in names {
            let Value::String(f) = name else {
                return Err(format!("{KEY}[{s}]: {name} is not a module name"));
            };
            let u = unit_of(f)?;
            if f == "norm" || f == "output" {
                seen_norm_output[usize::from(f == "output")] = Some(s);
                if u + 1 == next {
                    continue;
                }
            }
            if u != next {
                return Err(format!("{KEY}[{s}]: '{f}' is out of order (stages hold consecutive modules: tok_embeddings, layers.0, ..., norm, output)"));
            }
            next += 1;
        }
        if next == start {
            return Err(format!(
                "{KEY}[{s}] holds no module (a stage needs at least one)"
            ));
        }
        out.push(start..next);
    }
    if next != n || seen_norm_output[0] != seen_norm_output[1] {
        return Err(format!(
            "{KEY} must list every module once, with norm and output in the last stage"
        ));
    }
    Ok(out)
}

/// The stages' unit ranges of the job file (module documentation).
fn read_split(par: &Table, n: usize, p: usize) -> Result<Vec<std::ops::Range<usize>>, String> {
    const P: &str = "parallelism";
    if p == 1 {
        return Ok(std::iter::once(0..n).collect());
    }
    let ranges = match par.get("module_fqns_per_model_part") {
        Some(parts) => ranges_of_fqns(parts, n)?,
        None => {
            let layers = n - 2;
            let input = int(par, P, "pipeline_parallel_first_stage_less_layers", 1)?;
            let output = int(par, P, "pipeline_parallel_last_stage_less_layers", 1)?;
            let (input, output) = (usize::try_from(input).map_err(|_| format!("[parallelism] pipeline_parallel_first_stage_less_layers = {input} is negative"))?, usize::try_from(output).map_err(|_| format!("[parallelism] pipeline_parallel_last_stage_less_layers = {output} is negative"))?);
            if let Some(v) = par.get("pipeline_parallel_layers_per_stage") {
                let lps = count(
                    P,
                    "pipeline_parallel_layers_per_stage",
                    v.as_integer().unwrap_or(0),
                )?;
                let virtual_stages = (layers + input + output).div_ceil(lps);
                if virtual_stages != p {
                    return Err(format!("[parallelism] pipeline_parallel_layers_per_stage = {lps} makes {virtual_stages} stages for pipeline_parallel_degree {p}: a 3D layout runs one stage per rank"));
                }
            }
            let counts = default_split(p, layers, input, output)?;
            let mut next = 1;
            counts
                .iter()
                .enumerate()
                .map(|(s, &k)| {
                    let from = if s == 0 { 0 } else { next };
                    next += k;
                    from..if s + 1 == p { n } else { next }
                })
                .collect()
        }
    };
    if ranges.len() != p {
        return Err(format!("[parallelism] module_fqns_per_model_part has {} stages for pipeline_parallel_degree {p} (a 3D layout runs one stage per rank)", ranges.len()));
    }
    Ok(ranges)
}

/// `(b, B)` of the job file for DP `d` and `p` stages.
fn read_batches(par: &Table, tr: &Table, d: usize, p: usize) -> Result<(usize, usize), String> {
    let local = count(
        "training",
        "local_batch_size",
        int(tr, "training", "local_batch_size", 8)?,
    )?;
    let global = match int(tr, "training", "global_batch_size", -1)? {
        -1 => local * d,
        v => count("training", "global_batch_size", v)?,
    };
    if !global.is_multiple_of(local * d) {
        return Err(format!("[training] global_batch_size {global} is not a multiple of local_batch_size {local} x DP {d}"));
    }
    if p == 1 {
        return Ok((local, global));
    }
    let micro = count(
        "parallelism",
        "pipeline_parallel_microbatch_size",
        int(par, "parallelism", "pipeline_parallel_microbatch_size", 1)?,
    )?;
    if !local.is_multiple_of(micro) {
        return Err(format!("[parallelism] pipeline_parallel_microbatch_size {micro} does not divide [training] local_batch_size {local}"));
    }
    if global != local * d {
        return Err(format!("[training] global_batch_size {global} accumulates {} pipeline steps of local_batch_size {local} x DP {d}; dnnplace's iteration is one pipeline flush (give local_batch_size = global_batch_size / DP)", global / (local * d)));
    }
    Ok((micro, global))
}

/// Reads a torchtitan job file for the chain of `units` on `world_size` GPUs (module
/// documentation): the layout and the notes on what the model prices differently.
pub fn read_torchtitan<S: AsRef<str>>(
    text: &str,
    units: &[S],
    world_size: usize,
) -> Result<(Layout, Vec<String>), String> {
    const P: &str = "parallelism";
    let blocks = Blocks::of(units)?;
    check_shape(units, &blocks)?;
    let file: Table = text.parse().map_err(|e| format!("not a TOML file: {e}"))?;
    let par = section(&file, P)?;
    for key in [
        "context_parallel_degree",
        "expert_parallel_degree",
        "expert_tensor_parallel_degree",
    ] {
        let v = int(par, P, key, 1)?;
        if v != 1 {
            return Err(format!(
                "[parallelism] {key} = {v}: dnnplace's 3D layouts have no such axis (give 1)"
            ));
        }
    }
    if !string(par, P, "pipeline_parallel_schedule_csv", "")?.is_empty() {
        return Err("[parallelism] pipeline_parallel_schedule_csv: a schedule from a file is not a 3D layout".into());
    }
    let t = count(
        P,
        "tensor_parallel_degree",
        int(par, P, "tensor_parallel_degree", 1)?,
    )?;
    let p = count(
        P,
        "pipeline_parallel_degree",
        int(par, P, "pipeline_parallel_degree", 1)?,
    )?;
    let (d, zero) = read_data_parallel(par, world_size, t * p, p)?;
    if t * p * d != world_size {
        return Err(format!("[parallelism] replicate x shard {d} x tensor_parallel_degree {t} x pipeline_parallel_degree {p} = {} GPUs, but the cluster has {world_size} (torchtitan needs them equal)", t * p * d));
    }
    let schedule = match string(par, P, "pipeline_parallel_schedule", "1F1B")?.to_ascii_lowercase().as_str() {
        "1f1b" => Schedule::OneFOneB,
        "gpipe" => Schedule::GPipe,
        other => return Err(format!("[parallelism] pipeline_parallel_schedule = \"{other}\": a 3D layout runs one stage per rank, 1F1B or GPipe")),
    };
    let ranges = read_split(par, units.len(), p)?;
    let (micro_batch, global_batch) = read_batches(par, section(&file, "training")?, d, p)?;
    let recompute = match string(section(&file, "activation_checkpoint")?, "activation_checkpoint", "mode", "selective")? {
        "full" => true,
        "none" => false,
        other => return Err(format!("[activation_checkpoint] mode = \"{other}\" (torchtitan's default is \"selective\"): dnnplace models \"full\" (each block checkpointed alone) or \"none\"")),
    };
    // Sequence parallelism, which its TP plan always runs, is priced by the caller
    // (`sequence_parallel_in`), as the layout line says.
    let notes = Vec::new();
    let training = Training {
        overlap_grad_reduce: false,
        micro_batch,
        global_batch,
        zero,
        schedule,
        recompute,
    };
    Ok((layout_of_ranges(ranges, t, d, training), notes))
}

//! DeepSpeed: the JSON configuration and the `PipelineModule` of a uniform 3D layout, and
//! reading them back.
//!
//! **What DeepSpeed runs.** A `PipelineModule` over the chain's units in order
//! (`["embeddings", "layers.0", …, "head"]`), stage `s` building `layers[parts[s]:parts[s+1]]`
//! (the stage-split export's subclass, [`crate::export::deepspeed`]), on the topology
//! `PipeModelDataParallelTopology(num_pp=p, num_mp=t, num_dp=d)`
//! (`deepspeed/runtime/pipe/topology.py`: the model axis is the TP group, innermost, as in
//! the layout; the layers themselves must be tensor-parallel, as Megatron-DeepSpeed's are).
//! `deepspeed.initialize` then builds a `PipelineEngine`, which runs its `TrainSchedule`
//! (1F1B) and asserts `zero_optimization_stage < 2` ("ZeRO-2 and ZeRO-3 are incompatible
//! with pipeline parallelism"): a layout with ZeRO-2/3 or GPipe is refused naming the rule.
//!
//! **The configuration.** `train_micro_batch_size_per_gpu = b`,
//! `gradient_accumulation_steps = m = B/(b·d)` (the engine's micro-batches per step),
//! `train_batch_size = B` (DeepSpeed checks `B = b·m·d`), `zero_optimization.stage`, and for
//! full recomputation `"pipeline": {"activation_checkpoint_interval": 1, "use_reentrant":
//! false}` (every unit checkpointed alone, keeping only its input — the model's rule; the
//! non-reentrant function keeps the gradients of the embedding's chunk, whose input needs
//! none).
//!
//! **The file** is Python: `ds_config = json.loads(r'''{…}''')`, `layers = […]`,
//! `parts = […]`, `topology = {"num_pp": p, "num_mp": t, "num_dp": d}` (each one line, JSON
//! after the `=`), then the recipe. Reading takes those lines, or one JSON object with the
//! keys `ds_config`, `parts`, `topology` (and optionally `layers`); of the three batch
//! settings any two give the third, as `DeepSpeedConfig._configure_train_batch_size` does.

use serde::Deserialize;
use serde_json::{json, Value};

use super::{layout_of_ranges, stage_comments, uniform_degrees, Blocks, Training};
use crate::export::deepspeed::assigned;
use crate::model::parallel::{Layout, Zero};
use crate::model::schedule::Schedule;
use crate::solve::parallel::ParallelPlan;

/// The DeepSpeed configuration of `layout` (module documentation).
fn config(layout: &crate::model::parallel::Layout, d: usize) -> Value {
    let m = layout.global_batch / (layout.micro_batch * d);
    let mut config = json!({
        "train_batch_size": layout.global_batch,
        "train_micro_batch_size_per_gpu": layout.micro_batch,
        "gradient_accumulation_steps": m,
        "zero_optimization": { "stage": layout.zero.stage() },
    });
    if layout.recompute {
        config["pipeline"] = json!({ "activation_checkpoint_interval": 1, "use_reentrant": false });
    }
    config
}

/// The refusal of a ZeRO stage or schedule DeepSpeed's pipeline engine does not run.
fn engine_rules(zero: Zero, schedule: Schedule) -> Result<(), String> {
    if matches!(zero, Zero::Gradients | Zero::Parameters) {
        return Err(format!(
            "ZeRO-{}: DeepSpeed's PipelineEngine runs ZeRO 0 or 1 only (deepspeed/runtime/pipe/engine.py asserts zero_optimization_stage < 2; plan with --zero 0, 1 or auto)",
            zero.stage()
        ));
    }
    if schedule != Schedule::OneFOneB {
        return Err(format!(
            "the layout runs {schedule}; DeepSpeed's PipelineEngine runs its TrainSchedule, 1F1B (plan with --schedule 1f1b)"
        ));
    }
    Ok(())
}

/// The DeepSpeed configuration and `PipelineModule` recipe of `plan` (module documentation).
pub fn render_deepspeed(plan: &ParallelPlan) -> Result<String, String> {
    let layout = &plan.layout;
    let (t, d) = uniform_degrees(layout, "DeepSpeed")?;
    if plan.chain.sequence_parallel && t > 1 {
        return Err("the plan is priced with sequence parallelism; DeepSpeed's pipeline engine has no sequence parallelism (plan without --sequence-parallel)".into());
    }
    engine_rules(layout.zero, layout.schedule)?;
    let names: Vec<&str> = plan.chain.units.iter().map(|u| u.name.as_str()).collect();
    let blocks = Blocks::of(&names)?;
    let p = layout.stages.len();
    let mut parts: Vec<usize> = layout.stages.iter().map(|s| s.units.start).collect();
    parts.push(names.len());
    let world = t * p * d;
    let mut text = format!(
        "# dnnplace export: DeepSpeed 3D layout, TP {t} x PP {p} x DP {d} = {world} GPUs, {} decoder layers,\n\
         # micro-batch {}, global batch {}, ZeRO-{}{}.\n\
         # Launch on {world} GPUs. PipelineModule stage s builds layers[parts[s]:parts[s+1]]; the topology's\n\
         # model axis is the TP group (the layers must be tensor-parallel, as Megatron-DeepSpeed's are).\n",
        blocks.len(),
        layout.micro_batch,
        layout.global_batch,
        layout.zero.stage(),
        if layout.recompute {
            ", full recomputation (every unit checkpointed alone)"
        } else {
            ""
        }
    );
    text.push_str(&stage_comments(plan, &blocks));
    let config = serde_json::to_string(&config(layout, d)).expect("JSON");
    text.push_str(&format!(
        "import json\nds_config = json.loads(r'''{config}''')\nlayers = {}\nparts = {}\ntopology = {}\n",
        serde_json::to_string(&names).expect("strings"),
        serde_json::to_string(&parts).expect("integers"),
        json!({ "num_pp": p, "num_mp": t, "num_dp": d })
    ));
    text.push_str(&format!(
        r#"
# The recipe: DeepSpeed's partition_method takes no explicit boundaries, so a subclass sets them.
import deepspeed
from deepspeed.pipe import PipelineModule
from deepspeed.runtime.pipe.topology import PipeModelDataParallelTopology


class PlannedPipelineModule(PipelineModule):
{}

# layer_specs: one LayerSpec per entry of `layers`, in order.
# model = PlannedPipelineModule(layers=layer_specs, topology=PipeModelDataParallelTopology(**topology), loss_fn=my_loss)
# engine, _, _, _ = deepspeed.initialize(model=model, config=ds_config, model_parameters=model.parameters())
"#,
        crate::export::deepspeed::PARTITION
            .lines()
            .map(|l| l.strip_prefix("    ").unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n")
    ));
    Ok(text)
}

/// The file's pieces, from JSON or from the export's lines.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    ds_config: Value,
    parts: Vec<i64>,
    topology: Topo,
    #[serde(default)]
    layers: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Topo {
    num_pp: i64,
    num_mp: i64,
    num_dp: i64,
}

fn parse(text: &str) -> Result<File, String> {
    if text.trim_start().starts_with('{') {
        return serde_json::from_str(text).map_err(|e| format!("the JSON file: {e}"));
    }
    let json = |name: &str| -> Result<Value, String> {
        let value = assigned(text, name).ok_or(format!(
            "no `{name} = ...` line (the export's form: ds_config, parts, topology), and not a JSON object"
        ))?;
        serde_json::from_str(value).map_err(|e| format!("{name} = {value}: not JSON ({e})"))
    };
    let mut object = serde_json::Map::new();
    for name in ["ds_config", "parts", "topology"] {
        object.insert(name.into(), json(name)?);
    }
    if assigned(text, "layers").is_some() {
        object.insert("layers".into(), json("layers")?);
    }
    serde_json::from_value(Value::Object(object)).map_err(|e| e.to_string())
}

/// A positive integer at `path` of the configuration, `None` when absent.
fn config_count(config: &Value, path: &[&str]) -> Result<Option<usize>, String> {
    let mut v = config;
    for key in path {
        match v.get(key) {
            Some(x) => v = x,
            None => return Ok(None),
        }
    }
    match v.as_u64() {
        Some(n) if (1..=1 << 40).contains(&n) => Ok(Some(n as usize)),
        _ => Err(format!(
            "ds_config {}: {v} is not a positive integer",
            path.join(".")
        )),
    }
}

/// `(b, B)` from any two of the three batch settings (DeepSpeed's rule) for DP `d`.
fn batch_sizes(config: &Value, d: usize) -> Result<(usize, usize), String> {
    let global = config_count(config, &["train_batch_size"])?;
    let micro = config_count(config, &["train_micro_batch_size_per_gpu"])?;
    let steps = config_count(config, &["gradient_accumulation_steps"])?;
    let (b, m, big) = match (micro, steps, global) {
        (Some(b), Some(m), Some(g)) => (b, m, g),
        (Some(b), Some(m), None) => (b, m, b * m * d),
        (Some(b), None, Some(g)) => (b, g / (b * d).max(1), g),
        (None, Some(m), Some(g)) => (g / (m * d).max(1), m, g),
        (Some(b), None, None) => (b, 1, b * d),
        (None, None, Some(g)) => (g / d, 1, g),
        _ => return Err("ds_config gives neither train_batch_size nor train_micro_batch_size_per_gpu (DeepSpeed needs one)".into()),
    };
    if b == 0 || m == 0 || b * m * d != big {
        return Err(format!(
            "ds_config: train_batch_size {big} is not train_micro_batch_size_per_gpu x gradient_accumulation_steps x DP {d} (DeepSpeed's check)"
        ));
    }
    Ok((b, big))
}

/// Full recomputation of every unit (interval 1), none (0 or absent), or the refusal.
fn recompute_of(config: &Value) -> Result<bool, String> {
    match config_interval(config)? {
        0 => Ok(false),
        1 => Ok(true),
        n => Err(format!(
            "ds_config pipeline.activation_checkpoint_interval {n}: dnnplace models every unit checkpointed alone (1) or none (0)"
        )),
    }
}

fn config_interval(config: &Value) -> Result<u64, String> {
    match config.pointer("/pipeline/activation_checkpoint_interval") {
        None => Ok(0),
        Some(v) => v.as_u64().ok_or(format!(
            "ds_config pipeline.activation_checkpoint_interval: {v} is not a non-negative integer"
        )),
    }
}

/// Checks `parts` against `units` and returns the stages' unit ranges.
fn stage_ranges(parts: &[i64], units: usize) -> Result<Vec<std::ops::Range<usize>>, String> {
    if parts.len() < 2 || parts[0] != 0 || *parts.last().expect("two") != units as i64 {
        return Err(format!(
            "parts {parts:?} must start at 0 and end at the chain's {units} units"
        ));
    }
    parts
        .windows(2)
        .enumerate()
        .map(|(s, w)| {
            if w[1] <= w[0] {
                Err(format!("parts {parts:?}: pipeline stage {s} holds no unit (a stage needs at least one)"))
            } else {
                Ok(w[0] as usize..w[1] as usize)
            }
        })
        .collect()
}

/// Reads a DeepSpeed export for the chain of `units` on at most `world_size` GPUs
/// (module documentation); an error naming the key otherwise.
pub fn read_deepspeed<S: AsRef<str>>(
    text: &str,
    units: &[S],
    world_size: usize,
) -> Result<Layout, String> {
    let file = parse(text)?;
    if let Some(names) = &file.layers {
        let ours: Vec<&str> = units.iter().map(AsRef::as_ref).collect();
        if *names != ours {
            return Err(format!(
                "layers {names:?} is not the model's chain of units {ours:?}"
            ));
        }
    }
    let topo = &file.topology;
    let count = |name: &str, v: i64| -> Result<usize, String> {
        if (1..=1 << 24).contains(&v) {
            Ok(v as usize)
        } else {
            Err(format!("topology {name} {v} is not a positive count"))
        }
    };
    let (p, t, d) = (
        count("num_pp", topo.num_pp)?,
        count("num_mp", topo.num_mp)?,
        count("num_dp", topo.num_dp)?,
    );
    if t * p * d > world_size {
        return Err(format!(
            "topology num_pp {p} x num_mp {t} x num_dp {d} = {} GPUs, more than the cluster's {world_size}",
            t * p * d
        ));
    }
    let ranges = stage_ranges(&file.parts, units.len())?;
    if ranges.len() != p {
        return Err(format!(
            "parts {:?} makes {} stages but topology num_pp is {p}",
            file.parts,
            ranges.len()
        ));
    }
    let zero = match file.ds_config.pointer("/zero_optimization/stage") {
        None => Zero::Off,
        Some(v) => v
            .as_u64()
            .and_then(|z| u8::try_from(z).ok())
            .and_then(Zero::from_stage)
            .ok_or(format!(
                "ds_config zero_optimization.stage {v} is not 0 to 3"
            ))?,
    };
    engine_rules(zero, Schedule::OneFOneB)
        .map_err(|e| format!("ds_config zero_optimization.stage: {e}"))?;
    let (micro_batch, global_batch) = batch_sizes(&file.ds_config, d)?;
    let training = Training {
        overlap_grad_reduce: false,
        micro_batch,
        global_batch,
        zero,
        schedule: Schedule::OneFOneB,
        recompute: recompute_of(&file.ds_config)?,
    };
    Ok(layout_of_ranges(ranges, t, d, training))
}

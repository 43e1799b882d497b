//! PyTorch: `torch.distributed.pipelining` `split_spec`, as a Python snippet (`torch`) or
//! JSON (`torch-json`).
//!
//! `pipeline(module, mb_args, split_spec=…)` calls `annotate_split_points`
//! (`torch/distributed/pipelining/_IR.py`): every key is a submodule's dotted path, resolved
//! with `getattr` atom by atom, and its forward is wrapped to call `pipe_split()` before
//! (`SplitPoint.BEGINNING`) or after (`SplitPoint.END`) it; the traced program is then cut at
//! every `pipe_split`, so `k` split points give `k + 1` stages in program order, stage `s`
//! on rank `s`. The export names the first module of each stage but the first, with
//! `SplitPoint.BEGINNING`; it needs the stages to be runs of consecutive layers in the
//! workload's order (taken as the program order) on GPUs.
//!
//! Reading: a key with `BEGINNING` must be the first module of a layer (a split before
//! it), one with `END` the last module of a layer (a split after it); a key inside a layer
//! cuts it and is refused, as is a key naming no module of the workload, a split before
//! the first or after the last layer, or two splits at one place (an empty stage).
//!
//! **Recomputation.** `split_spec` has no checkpointing setting; a stage is checkpointed
//! in the stage module itself. `_PipelineStageBase.forward_maybe_with_nosync`
//! (`torch/distributed/pipelining/stage.py`) runs a micro-batch as `self.submod(*args,
//! **kwargs)`, so replacing `stage.submod.forward` by
//! `torch.utils.checkpoint.checkpoint(forward, *args, use_reentrant=False, **kwargs)`
//! (`torch/utils/checkpoint.py`) keeps only the stage's inputs and runs its forward pass
//! again in the backward one: the recomputation of [`crate::model::recompute`], per
//! stage. When the plan recomputes, the export lists the stages in `recompute_stages`
//! (Python list, or the JSON key of the same name) with a `recompute_stage(stage)` helper
//! to call after `pipe.build_stage` on those ranks; read back from that list.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::{placement_of_layers, Exporter, LayerPlan};
use crate::model::layers::Layers;
use crate::model::{Device, Placement, Workload};

/// `--format torch` (Python) and `--format torch-json`.
pub struct Torch {
    pub json: bool,
}

impl Exporter for Torch {
    fn name(&self) -> &'static str {
        if self.json {
            "torch-json"
        } else {
            "torch"
        }
    }

    fn target(&self) -> &'static str {
        if self.json {
            "torch.distributed.pipelining split_spec, as JSON"
        } else {
            "torch.distributed.pipelining split_spec, as a Python snippet"
        }
    }

    fn render(&self, plan: &LayerPlan) -> Result<String, String> {
        plan.accelerators_only("torch.distributed.pipelining")?;
        let stages = plan.stages()?;
        let mut keys: Vec<String> = Vec::new();
        for s in &stages[1..] {
            let layer = &plan.layers.layers[s.layers.start];
            let Some(first) = layer.modules.first() else {
                return Err(format!(
                    "stage {} starts with layer {}, which has no module name; split_spec names submodules",
                    keys.len() + 1,
                    plan.layers.name(plan.workload, s.layers.start)
                ));
            };
            keys.push(first.clone());
        }
        if self.json {
            let spec: serde_json::Map<String, Value> = keys
                .iter()
                .map(|k| (k.clone(), json!("BEGINNING")))
                .collect();
            let stage_list: Vec<Value> = stages
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let nodes: Vec<usize> = s.layers.clone().flat_map(|l| plan.layers.layers[l].nodes.clone()).collect();
                    json!({"stage": i, "rank": i, "holds": plan.layers.describe(plan.workload, &nodes, usize::MAX),
                           "modules": s.layers.clone().flat_map(|l| plan.layers.layers[l].modules.clone()).collect::<Vec<_>>()})
                })
                .collect();
            let mut v = json!({
                "format": "torch.distributed.pipelining split_spec",
                "source": "torch/distributed/pipelining/_IR.py (annotate_split_points, pipeline)",
                "num_stages": stages.len(),
                "split_spec": spec,
                "stages": stage_list,
            });
            let recompute = plan.recompute_stages();
            if !recompute.is_empty() {
                v["recompute_stages"] = json!(recompute);
                v["recompute"] = json!("torch.utils.checkpoint.checkpoint(stage.submod.forward, *args, use_reentrant=False, **kwargs) on these stages (torch/distributed/pipelining/stage.py: forward_maybe_with_nosync calls self.submod)");
            }
            return Ok(serde_json::to_string_pretty(&v).expect("json") + "\n");
        }
        let mut text = format!(
            "# dnnplace export: torch.distributed.pipelining split_spec, {} stages.\n\
             # pipeline() cuts the traced program before each named submodule (SplitPoint.BEGINNING;\n\
             # torch/distributed/pipelining/_IR.py: annotate_split_points); stage s runs on rank s.\n",
            stages.len()
        );
        text.push_str(&plan.device_comments("# "));
        text.push_str(
            "from torch.distributed.pipelining import SplitPoint, pipeline\n\nsplit_spec = {\n",
        );
        let entries: Vec<String> = keys
            .iter()
            .map(|k| {
                format!(
                    "    {}: SplitPoint.BEGINNING",
                    serde_json::to_string(k).expect("string")
                )
            })
            .collect();
        text.push_str(&entries.join(",\n"));
        if !entries.is_empty() {
            text.push('\n');
        }
        text.push_str("}\n\n");
        text.push_str(&format!(
            "# pipe = pipeline(model, mb_args=(example_microbatch,), split_spec=split_spec)\n\
             # assert pipe.num_stages == {}\n\
             # stage = pipe.build_stage(rank, device=torch.device(f\"cuda:{{rank}}\"))\n",
            stages.len()
        ));
        let recompute = plan.recompute_stages();
        if !recompute.is_empty() {
            text.push_str(&format!(
                r#"
# Activation recomputation (the plan recomputes on {}): these stages run their forward pass
# under torch.utils.checkpoint, keeping only their inputs until the backward pass
# (PipelineStage runs a micro-batch as self.submod(*args, **kwargs):
# torch/distributed/pipelining/stage.py, forward_maybe_with_nosync).
import torch.utils.checkpoint

recompute_stages = {}


def recompute_stage(stage):
    forward = stage.submod.forward

    def checkpointed(*args, **kwargs):
        return torch.utils.checkpoint.checkpoint(forward, *args, use_reentrant=False, **kwargs)

    stage.submod.forward = checkpointed


# if rank in recompute_stages:
#     recompute_stage(stage)
"#,
                super::gpu_list(&recompute),
                serde_json::to_string(&recompute).expect("integers")
            ));
        }
        Ok(text)
    }

    fn read_recompute(&self, text: &str) -> Result<Option<Vec<usize>>, String> {
        let list =
            match serde_json::from_str::<Value>(text) {
                Ok(v) => v.get("recompute_stages").cloned(),
                Err(_) => match text.lines().rev().find_map(|line| {
                    let rest = line.trim_start().strip_prefix("recompute_stages")?;
                    rest.trim_start().strip_prefix('=').map(str::trim)
                }) {
                    Some(t) => Some(serde_json::from_str(t).map_err(|e| {
                        format!("recompute_stages = {t}: not a list of stages ({e})")
                    })?),
                    None => None,
                },
            };
        match list {
            None => Ok(Some(Vec::new())),
            Some(v) => serde_json::from_value(v)
                .map(Some)
                .map_err(|e| format!("recompute_stages: not a list of stage numbers ({e})")),
        }
    }

    fn read(&self, text: &str, w: &Workload, layers: &Layers) -> Result<Placement, String> {
        let spec = parse_spec(text)?;
        let mut boundaries: Vec<(usize, String)> = Vec::new(); // (first layer of a new stage, key)
        for (key, point) in &spec {
            let boundary = match point.as_str() {
                "BEGINNING" => {
                    let l = find_layer(w, layers, key, true)?;
                    if l == 0 {
                        return Err(format!("{key:?}: a split before the first layer leaves stage 0 empty"));
                    }
                    l
                }
                "END" => {
                    let l = find_layer(w, layers, key, false)?;
                    if l + 1 == layers.len() {
                        return Err(format!("{key:?}: a split after the last layer leaves the last stage empty"));
                    }
                    l + 1
                }
                other => return Err(format!("{key:?}: unknown split point {other:?} (SplitPoint.BEGINNING or SplitPoint.END)")),
            };
            if let Some((_, k)) = boundaries.iter().find(|(b, _)| *b == boundary) {
                return Err(format!(
                    "{key:?} and {k:?} split at the same place, which leaves an empty stage"
                ));
            }
            boundaries.push((boundary, key.clone()));
        }
        boundaries.sort();
        let mut layer_device = vec![Device::Accelerator(0); layers.len()];
        for (l, device) in layer_device.iter_mut().enumerate() {
            *device = Device::Accelerator(boundaries.iter().filter(|(b, _)| *b <= l).count());
        }
        if let Ok(v) = serde_json::from_str::<Value>(text) {
            check_declared(&v, layers, &layer_device, boundaries.len() + 1)?;
        }
        Ok(placement_of_layers(w, layers, &layer_device))
    }
}

/// The JSON's `num_stages` and `stages` (written by the export beside `split_spec`), when
/// present, must agree with the split `split_spec` makes: `num_stages` the number of
/// stages, `stages` one entry per stage whose `stage`/`rank` is its index and whose
/// `modules` are the modules of its layers.
fn check_declared(
    v: &Value,
    layers: &Layers,
    layer_device: &[Device],
    count: usize,
) -> Result<(), String> {
    if let Some(n) = v.get("num_stages") {
        if n.as_u64() != Some(count as u64) {
            return Err(format!(
                "num_stages is {n} but split_spec makes {count} stage{}",
                if count == 1 { "" } else { "s" }
            ));
        }
    }
    let Some(list) = v.get("stages") else {
        return Ok(());
    };
    let list = list
        .as_array()
        .ok_or_else(|| format!("stages is {list}, not a list"))?;
    if list.len() != count {
        return Err(format!(
            "stages lists {} stages but split_spec makes {count}",
            list.len()
        ));
    }
    for (i, entry) in list.iter().enumerate() {
        for key in ["stage", "rank"] {
            if let Some(x) = entry.get(key) {
                if x.as_u64() != Some(i as u64) {
                    return Err(format!("stages[{i}].{key} is {x}, not {i}"));
                }
            }
        }
        if let Some(modules) = entry.get("modules") {
            let ours: Vec<&String> = (0..layers.len())
                .filter(|&l| layer_device[l] == Device::Accelerator(i))
                .flat_map(|l| layers.layers[l].modules.iter())
                .collect();
            let theirs: Vec<String> = serde_json::from_value(modules.clone())
                .map_err(|e| format!("stages[{i}].modules: not a list of module paths ({e})"))?;
            if theirs.iter().collect::<Vec<_>>() != ours {
                return Err(format!(
                    "stages[{i}].modules does not match the modules split_spec puts on stage {i}"
                ));
            }
        }
    }
    Ok(())
}

/// `key → "BEGINNING" | "END"` from JSON (`{"split_spec": {…}}` or the bare map) or from the
/// snippet's `split_spec = {…}` dict literal.
fn parse_spec(text: &str) -> Result<BTreeMap<String, String>, String> {
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        if v.get("split_spec").is_none() && v.as_object().is_none_or(|m| m.is_empty()) {
            return Err("no split found: no \"split_spec\" in the JSON".into());
        }
        let map = v.get("split_spec").cloned().unwrap_or(v);
        return serde_json::from_value::<BTreeMap<String, String>>(map)
            .map(|m| {
                m.into_iter()
                    .map(|(k, p)| (k, p.trim_start_matches("SplitPoint.").to_string()))
                    .collect()
            })
            .map_err(|e| format!("split_spec: {e}"));
    }
    let start = text
        .lines()
        .scan(0usize, |offset, line| {
            let at = *offset;
            *offset += line.len() + 1;
            Some((at, line))
        })
        .find(|(_, line)| {
            line.trim_start()
                .strip_prefix("split_spec")
                .is_some_and(|r| r.trim_start().starts_with('='))
        })
        .map(|(at, _)| at)
        .ok_or("no `split_spec = {...}` and no JSON split_spec")?;
    let open = start + text[start..].find('{').ok_or("split_spec = has no `{`")?;
    let close = open
        + text[open..]
            .find('}')
            .ok_or("split_spec = { has no closing `}`")?;
    let body: String = text[open..=close]
        .lines()
        .map(|line| line.split_once('#').map_or(line, |(code, _)| code))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("SplitPoint.BEGINNING", "\"BEGINNING\"")
        .replace("SplitPoint.END", "\"END\"");
    let trimmed = body
        .trim_end_matches('}')
        .trim_end()
        .trim_end_matches(',')
        .to_string()
        + "}";
    serde_json::from_str::<BTreeMap<String, String>>(&trimmed)
        .map_err(|e| format!("split_spec = {{...}}: write it as {{\"module.path\": SplitPoint.BEGINNING, ...}} ({e})"))
}

/// The layer whose first (`begin`) or last module is `key`; a key inside a layer cuts it.
fn find_layer(w: &Workload, layers: &Layers, key: &str, begin: bool) -> Result<usize, String> {
    for (l, layer) in layers.layers.iter().enumerate() {
        let edge = if begin {
            layer.modules.first()
        } else {
            layer.modules.last()
        };
        if edge.is_some_and(|m| m == key) {
            return Ok(l);
        }
    }
    let inside = layers.layers.iter().position(|layer| {
        layer.modules.iter().any(|m| {
            m == key || m.starts_with(&format!("{key}.")) || key.starts_with(&format!("{m}."))
        })
    });
    match inside {
        Some(l) => Err(format!(
            "{key:?} cuts inside layer {}: a split {} it is not a layer boundary",
            layers.name(w, l),
            if begin { "before" } else { "after" }
        )),
        None => Err(format!("{key:?} names no module of the workload")),
    }
}

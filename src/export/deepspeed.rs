//! DeepSpeed: the stage boundaries `parts` of a `PipelineModule`.
//!
//! `PipelineModule(layers=…)` runs a list of layers `0..N` in order, and stage `s` builds
//! `layers[parts[s]:parts[s+1]]` (`deepspeed/runtime/pipe/module.py`: `_partition_layers`
//! sets `self.parts`, then `_set_bounds(start=parts[stage_id], stop=parts[stage_id + 1])`;
//! `stage_owner` finds the `s` with `parts[s] ≤ i < parts[s+1]`). So `parts` has one entry
//! more than there are stages, starts at 0, ends at `N`, and never decreases. Its
//! `partition_method` (`"uniform"`, `"parameters"`, `"type:REGEX"`) computes `parts` and
//! takes none from the user, so the export carries a subclass that overrides
//! `_partition_layers` with the planned `parts` (a recipe that calls DeepSpeed's own
//! `_set_bounds`, nothing copied). Every stage is a GPU rank.
//!
//! The layer list is the workload's layer order, one entry per layer, named by its
//! modules; the plan's stages must be runs of consecutive layers. Reading accepts the
//! export's `parts = [...]` (with or without its `layers = [...]`, which must then match
//! the workload's layers), or JSON `{"parts": [...], "layers": [...]}`; empty stages are
//! read as DeepSpeed would build them (a stage with no layers).

use serde::Deserialize;

use super::{placement_of_layers, Exporter, LayerPlan};
use crate::model::layers::Layers;
use crate::model::{Device, Placement, Workload};

/// `--format deepspeed`.
pub struct DeepSpeed;

#[derive(Deserialize)]
struct PartsFile {
    parts: Vec<i64>,
    #[serde(default)]
    layers: Option<Vec<String>>,
}

impl Exporter for DeepSpeed {
    fn name(&self) -> &'static str {
        "deepspeed"
    }

    fn target(&self) -> &'static str {
        "DeepSpeed PipelineModule: stage boundaries (parts) and a PipelineModule subclass that uses them"
    }

    fn render(&self, plan: &LayerPlan) -> Result<String, String> {
        plan.accelerators_only("DeepSpeed's PipelineModule")?;
        let stages = plan.stages()?;
        let names: Vec<String> = (0..plan.layers.len())
            .map(|l| plan.layers.name(plan.workload, l))
            .collect();
        let mut parts: Vec<usize> = stages.iter().map(|s| s.layers.start).collect();
        parts.push(plan.layers.len());
        let n = stages.len();
        let mut text = format!(
            "# dnnplace export: DeepSpeed PipelineModule stage boundaries, {n} stages over {} layers.\n\
             # Stage s builds layers[parts[s]:parts[s+1]] of the list given to PipelineModule\n\
             # (deepspeed/runtime/pipe/module.py: _partition_layers, _set_bounds).\n",
            names.len()
        );
        text.push_str(&plan.device_comments("# "));
        text.push_str("# The layer list this split assumes, in order (build your LayerSpecs in this order):\n");
        text.push_str(&format!(
            "layers = {}\n",
            serde_json::to_string(&names).expect("strings")
        ));
        text.push_str(&format!(
            "parts = {}\n",
            serde_json::to_string(&parts).expect("integers")
        ));
        text.push_str(&format!(
            r#"
# partition_method ("uniform", "parameters", "type:REGEX") takes no explicit boundaries;
# this subclass uses the parts above instead.
from deepspeed.pipe import PipelineModule


def planned_pipeline_module(parts):
    class PlannedPipelineModule(PipelineModule):
        def _partition_layers(self, method="uniform"):
            stages = self._topo.get_dim("pipe")
            if len(parts) != stages + 1 or parts[0] != 0 or parts[-1] != len(self._layer_specs):
                raise ValueError(f"parts {{parts}} do not split {{len(self._layer_specs)}} layers into {{stages}} stages")
            self.parts = list(parts)
            stage = self._topo.get_coord(self.global_rank).pipe
            self._set_bounds(start=self.parts[stage], stop=self.parts[stage + 1])

    return PlannedPipelineModule


# model = planned_pipeline_module(parts)(layers=my_layer_specs, num_stages={n}, loss_fn=my_loss)
"#
        ));
        Ok(text)
    }

    fn read(&self, text: &str, w: &Workload, layers: &Layers) -> Result<Placement, String> {
        let file = parse(text)?;
        let n = layers.len();
        if let Some(names) = &file.layers {
            if names.len() != n {
                return Err(format!(
                    "the file lists {} layers but the workload has {n}",
                    names.len()
                ));
            }
            for (l, name) in names.iter().enumerate() {
                let ours = layers.name(w, l);
                if *name != ours {
                    return Err(format!(
                        "layers[{l}] is {name:?} but the workload's layer {l} is {ours:?}"
                    ));
                }
            }
        }
        let parts = &file.parts;
        if parts.len() < 2 {
            return Err(format!(
                "parts {parts:?} needs at least two entries (one stage)"
            ));
        }
        if parts[0] != 0 {
            return Err(format!(
                "parts {parts:?} starts at {}: layers before it would be built by no stage",
                parts[0]
            ));
        }
        if let Some(i) = (1..parts.len()).find(|&i| parts[i] < parts[i - 1]) {
            return Err(format!(
                "parts {parts:?} decreases at index {i}; stage_owner needs parts[s] <= parts[s+1]"
            ));
        }
        let end = *parts.last().expect("two entries");
        if end != n as i64 {
            return Err(format!(
                "parts {parts:?} ends at {end} but the layer list has {n} layers"
            ));
        }
        let mut layer_device = vec![Device::Accelerator(0); n];
        for (s, bounds) in parts.windows(2).enumerate() {
            for device in &mut layer_device[bounds[0] as usize..bounds[1] as usize] {
                *device = Device::Accelerator(s);
            }
        }
        Ok(placement_of_layers(w, layers, &layer_device))
    }
}

/// `parts` (and `layers`) from JSON or from `name = [...]` lines.
fn parse(text: &str) -> Result<PartsFile, String> {
    if let Ok(file) = serde_json::from_str::<PartsFile>(text) {
        return Ok(file);
    }
    let assigned = |name: &str| -> Option<&str> {
        text.lines().rev().find_map(|line| {
            let rest = line.trim_start().strip_prefix(name)?;
            let value = rest.trim_start().strip_prefix('=')?;
            (!value.starts_with('=')).then_some(value.trim())
        })
    };
    let parts_text =
        assigned("parts").ok_or("no `parts = [...]` line and no JSON object with \"parts\"")?;
    let parts: Vec<i64> = serde_json::from_str(parts_text)
        .map_err(|e| format!("parts = {parts_text}: not a list of integers ({e})"))?;
    let layers = match assigned("layers") {
        Some(t) => Some(
            serde_json::from_str(t)
                .map_err(|e| format!("layers = {t}: not a list of strings ({e})"))?,
        ),
        None => None,
    };
    Ok(PartsFile { parts, layers })
}

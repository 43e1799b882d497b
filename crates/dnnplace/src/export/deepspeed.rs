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
//!
//! **Recomputation.** `PipelineModule.forward` cuts the stage's layers into chunks of
//! `activation_checkpoint_interval` layers and runs each chunk that has parameters under
//! `activation_checkpoint_func` (only its input kept; 0: no checkpointing). The attribute
//! is set in `__init__` and read by every `forward`; `PipelineEngine.__init__`
//! (`deepspeed/runtime/pipe/engine.py`) overwrites it with the config's
//! `"pipeline": {"activation_checkpoint_interval": N}` when `N > 0`, one value for every
//! stage, then calls `_precompute_checkpointable_values`. A stage that recomputes in the
//! plan keeps only its input, so it gets the interval `b − a` (its layer count: one chunk);
//! the others 0. The export writes `activation_checkpoint_interval = [..]`, one entry per
//! stage, and the subclass sets `self.activation_checkpoint_interval` from it by
//! `self.stage_id` after `PipelineModule.__init__` (the config key must then stay unset).
//! Reading: stage `s` recomputes when its entry is at least its layer count.

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
    #[serde(default)]
    activation_checkpoint_interval: Option<Vec<i64>>,
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
        let recompute = plan.recompute_stages();
        if recompute.is_empty() {
            text.push_str(&format!(
                r#"
# partition_method ("uniform", "parameters", "type:REGEX") takes no explicit boundaries;
# this subclass uses the parts above instead.
from deepspeed.pipe import PipelineModule


def planned_pipeline_module(parts):
    class PlannedPipelineModule(PipelineModule):
{PARTITION}
    return PlannedPipelineModule


# model = planned_pipeline_module(parts)(layers=my_layer_specs, num_stages={n}, loss_fn=my_loss)
"#
            ));
        } else {
            let intervals: Vec<usize> = stages
                .iter()
                .enumerate()
                .map(|(s, st)| {
                    if recompute.contains(&s) {
                        st.layers.len()
                    } else {
                        0
                    }
                })
                .collect();
            text.push_str(&format!(
                "# Activation checkpointing per stage (the plan recomputes on {}): stage s runs its\n\
                 # layers in chunks of activation_checkpoint_interval[s] under activation_checkpoint_func\n\
                 # (its layer count: one chunk, only the stage's input kept; 0: none). Leave\n\
                 # \"pipeline\": {{\"activation_checkpoint_interval\": ...}} out of the DeepSpeed config:\n\
                 # PipelineEngine copies that one value to every stage (deepspeed/runtime/pipe/engine.py).\n\
                 # Set \"pipeline\": {{\"use_reentrant\": false}} there (non_reentrant_checkpoint): the reentrant\n\
                 # function loses the gradients of a chunk whose input needs none (the embedding's).\n\
                 activation_checkpoint_interval = {}\n",
                super::gpu_list(&recompute),
                serde_json::to_string(&intervals).expect("integers")
            ));
            text.push_str(&format!(
                r#"
# partition_method ("uniform", "parameters", "type:REGEX") takes no explicit boundaries;
# this subclass uses the parts above instead, and the per-stage checkpoint interval.
from deepspeed.pipe import PipelineModule


def planned_pipeline_module(parts, activation_checkpoint_interval):
    class PlannedPipelineModule(PipelineModule):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.activation_checkpoint_interval = activation_checkpoint_interval[self.stage_id]

{PARTITION}
    return PlannedPipelineModule


# model = planned_pipeline_module(parts, activation_checkpoint_interval)(layers=my_layer_specs, num_stages={n}, loss_fn=my_loss)
"#
            ));
        }
        Ok(text)
    }

    fn read_recompute(&self, text: &str) -> Result<Option<Vec<usize>>, String> {
        let file = parse(text)?;
        let Some(intervals) = &file.activation_checkpoint_interval else {
            return Ok(Some(Vec::new()));
        };
        let stages = file.parts.len().saturating_sub(1);
        if intervals.len() != stages {
            return Err(format!(
                "activation_checkpoint_interval {intervals:?} has {} entries for {stages} stages",
                intervals.len()
            ));
        }
        if let Some(bad) = intervals.iter().find(|&&i| i < 0) {
            return Err(format!(
                "activation_checkpoint_interval {bad} is negative (0 disables checkpointing)"
            ));
        }
        Ok(Some(
            (0..stages)
                .filter(|&s| {
                    let layers = file.parts[s + 1] - file.parts[s];
                    intervals[s] > 0 && intervals[s] >= layers
                })
                .collect(),
        ))
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
        let stages = parts.len() - 1;
        let k = w.devices().accelerators;
        if stages > k {
            return Err(format!(
                "parts makes {stages} stages but the workload has {k} accelerator{} (one stage per pipeline rank)",
                if k == 1 { "" } else { "s" }
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

/// The subclass's `_partition_layers`, which sets the planned `parts`.
pub(crate) const PARTITION: &str = r#"        def _partition_layers(self, method="uniform"):
            stages = self._topo.get_dim("pipe")
            if len(parts) != stages + 1 or parts[0] != 0 or parts[-1] != len(self._layer_specs):
                raise ValueError(f"parts {parts} do not split {len(self._layer_specs)} layers into {stages} stages")
            self.parts = list(parts)
            stage = self._topo.get_coord(self.global_rank).pipe
            self._set_bounds(start=self.parts[stage], stop=self.parts[stage + 1])
"#;

/// The value after `name =` on the last line that assigns `name`, unwrapped from
/// `json.loads(r'''…''')` (the 3D export's `ds_config`).
pub(crate) fn assigned<'t>(text: &'t str, name: &str) -> Option<&'t str> {
    let value = text.lines().rev().find_map(|line| {
        let rest = line.trim_start().strip_prefix(name)?;
        let value = rest.trim_start().strip_prefix('=')?;
        (!value.starts_with('=')).then_some(value.trim())
    })?;
    let inner = value
        .strip_prefix("json.loads(")
        .and_then(|v| v.strip_suffix(')'))
        .map(|v| v.strip_prefix('r').unwrap_or(v).trim_matches('\''));
    Some(inner.unwrap_or(value))
}

/// `parts` (and `layers`) from JSON or from `name = [...]` lines.
fn parse(text: &str) -> Result<PartsFile, String> {
    if let Ok(file) = serde_json::from_str::<PartsFile>(text) {
        return Ok(file);
    }
    let assigned = |name: &str| assigned(text, name);
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
    let activation_checkpoint_interval = match assigned("activation_checkpoint_interval") {
        Some(t) => Some(serde_json::from_str(t).map_err(|e| {
            format!("activation_checkpoint_interval = {t}: not a list of integers ({e})")
        })?),
        None => None,
    };
    Ok(PartsFile {
        parts,
        layers,
        activation_checkpoint_interval,
    })
}

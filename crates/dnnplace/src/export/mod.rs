//! Exports: a checked plan in the form each framework reads, and those forms read back.
//!
//! One [`Exporter`] per target, as serde has one serializer per format: `torch`
//! (`torch.distributed.pipelining` `split_spec`, as Python or JSON), `deepspeed`
//! (`PipelineModule` `parts`), `megatron` (`--pipeline-model-parallel-layout`), `vllm`
//! (`VLLM_PP_LAYER_PARTITION`) and `accelerate` (`device_map` + `max_memory`). Each target
//! module knows its target's rules, cited from the target's own source in `docs/export.md`.
//!
//! **The plan an exporter sees** ([`LayerPlan`]): a placement that the scorer accepts and
//! that keeps every layer ([`crate::model::layers`]) on one device — frameworks split
//! between modules, so a plan that cuts inside a layer is refused, naming the layer and
//! its devices. Devices are renumbered canonically: accelerators `0, 1, …` in the order of
//! their first layer (the pipeline order), every CPU core as `cpu0`.
//!
//! **Pipeline stages** ([`LayerPlan::stages`]): the devices in pipeline order, each holding
//! a run `[a, b)` of consecutive layers in the layer order; `torch`, `deepspeed`,
//! `megatron` and `vllm` need them and accept accelerators only.
//!
//! **Decoder stack** ([`LayerPlan::decoder_stack`]): `pre` layers, then blocks `0..L` of
//! the block list in order, then `post` layers (embedding, decoder layers, norm + head),
//! with `pre` on the first stage and `post` on the last — the shape `megatron` and `vllm`
//! build.
//!
//! **Recomputation** ([`crate::model::recompute`]). The plan's recomputing accelerators
//! ([`LayerPlan::recompute`], canonical numbers, so stage `s` of a pipeline is
//! accelerator `s`) go into the target's own activation-checkpointing setting where it has
//! one: per stage where the target can say it per stage (`torch`, `deepspeed`); where it
//! has one setting for all stages (`megatron`), every stage recomputes as soon as one
//! does — never fewer than planned, so the plan's memory still holds; the stages that
//! then recompute beyond the plan are named in a warning comment with their extra forward
//! time. A target without such a setting (`vllm` serves, `accelerate`'s `device_map`)
//! says in a comment that the plan's recomputation is not carried.
//!
//! **Checked both ways.** [`export`] renders the text, then reads it back with the same
//! target's reader — which applies the target's rules (counts, sums, ranges, contiguity,
//! device kinds) — and requires the placement read back to equal the plan's and the
//! recomputing stages read back ([`Exporter::read_recompute`]) to include the plan's
//! (and to be none when the plan has none): an export that its target would reject or
//! read differently is an internal error, never output. [`read_export`] is the reader
//! alone, for files people bring (`score --from-export`).

pub mod accelerate;
pub mod deepspeed;
pub mod megatron;
pub mod parallel;
pub mod torch;
pub mod vllm;

use std::ops::Range;

use crate::model::layers::Layers;
use crate::model::{Device, Placement, Workload};
use crate::score::{evaluate, Evaluation};

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The plan cannot be expressed in the target's form (exit 2).
    #[error("cannot export to {format}: {reason}")]
    Refused {
        format: &'static str,
        reason: String,
    },
    /// A file in the target's form that its rules reject (exit 2).
    #[error("{format} export: {reason}")]
    Unreadable {
        format: &'static str,
        reason: String,
    },
    /// Our own text failed its target's rules: a bug (exit 3).
    #[error("internal check failed: the {format} export {reason}")]
    Internal {
        format: &'static str,
        reason: String,
    },
}

/// One target: turns a checked plan into text and reads such text back.
pub trait Exporter: Sync {
    /// The `--format` name.
    fn name(&self) -> &'static str;
    /// The framework and the setting the text is for, for help texts and file headers.
    fn target(&self) -> &'static str;
    /// The text for `plan`, or the reason the target cannot express it.
    fn render(&self, plan: &LayerPlan) -> Result<String, String>;
    /// A placement of `w` from `text`, under the target's rules, or the rule it breaks.
    fn read(&self, text: &str, w: &Workload, layers: &Layers) -> Result<Placement, String>;
    /// The pipeline stages that `text` makes recompute their whole forward pass, or `None`
    /// for a target without an activation-checkpointing setting.
    fn read_recompute(&self, _text: &str) -> Result<Option<Vec<usize>>, String> {
        Ok(None)
    }
}

/// Every exporter, by `--format` name.
pub fn exporters() -> Vec<Box<dyn Exporter>> {
    vec![
        Box::new(torch::Torch { json: false }),
        Box::new(torch::Torch { json: true }),
        Box::new(deepspeed::DeepSpeed),
        Box::new(megatron::Megatron),
        Box::new(vllm::Vllm),
        Box::new(accelerate::Accelerate),
    ]
}

/// The exporter called `name`.
pub fn exporter_by_name(name: &str) -> Option<Box<dyn Exporter>> {
    exporters().into_iter().find(|e| e.name() == name)
}

/// Names of [`exporters`].
pub fn format_names() -> Vec<&'static str> {
    exporters().iter().map(|e| e.name()).collect()
}

/// Renders `plan` for `exporter`, reads the text back under the target's rules and checks
/// that it gives the plan's placement (module documentation).
pub fn export(exporter: &dyn Exporter, plan: &LayerPlan) -> Result<String, ExportError> {
    let format = exporter.name();
    let text = exporter
        .render(plan)
        .map_err(|reason| ExportError::Refused { format, reason })?;
    let back = exporter
        .read(&text, plan.workload, plan.layers)
        .map_err(|m| ExportError::Internal {
            format,
            reason: format!("breaks its target's rules: {m}"),
        })?;
    if back.assignment != plan.placement().assignment {
        return Err(ExportError::Internal {
            format,
            reason: "reads back as a different placement".into(),
        });
    }
    let planned = plan.recompute_stages();
    let read = exporter
        .read_recompute(&text)
        .map_err(|m| ExportError::Internal {
            format,
            reason: format!("has a recompute setting its target rejects: {m}"),
        })?;
    if let Some(read) = read {
        let fewer: Vec<&usize> = planned.iter().filter(|s| !read.contains(s)).collect();
        if !fewer.is_empty() || (planned.is_empty() && !read.is_empty()) {
            return Err(ExportError::Internal {
                format,
                reason: format!(
                    "recomputes on stages {read:?} where the plan recomputes on {planned:?}"
                ),
            });
        }
    }
    Ok(text)
}

/// Reads a file in `exporter`'s form into a placement of `w`.
pub fn read_export(
    exporter: &dyn Exporter,
    text: &str,
    w: &Workload,
    layers: &Layers,
) -> Result<Placement, ExportError> {
    exporter
        .read(text, w, layers)
        .map_err(|reason| ExportError::Unreadable {
            format: exporter.name(),
            reason,
        })
}

/// A pipeline stage: one device and a run of consecutive layers.
#[derive(Clone, Debug, PartialEq)]
pub struct Stage {
    pub device: Device,
    pub layers: Range<usize>,
}

/// The decoder stack a pipeline of transformer blocks builds (module documentation).
#[derive(Clone, Debug, PartialEq)]
pub struct DecoderStack {
    /// Layers before the first block (embeddings).
    pub pre: Range<usize>,
    /// The blocks, block `i` at layer `blocks.start + i`.
    pub blocks: Range<usize>,
    /// Layers after the last block (final norm, head).
    pub post: Range<usize>,
}

impl DecoderStack {
    /// The stack of `layers`, or why it is not one: blocks `0..L` of the block list, in
    /// order, with non-block layers only before and after them.
    pub fn of(w: &Workload, layers: &Layers) -> Result<DecoderStack, String> {
        let Some(list) = &layers.block_list else {
            return Err("the workload has no list of numbered blocks (module paths like model.layers.N in the node names, with a layerId per block)".into());
        };
        let first = layers
            .layers
            .iter()
            .position(|l| l.block.is_some())
            .expect("a block list has blocks");
        let last = layers
            .layers
            .iter()
            .rposition(|l| l.block.is_some())
            .expect("a block list has blocks");
        for (k, l) in (first..=last).enumerate() {
            match layers.layers[l].block {
                Some(i) if i == k => {}
                Some(i) => {
                    return Err(format!("block {list}.{i} comes where {list}.{k} should (blocks must run 0, 1, 2, … in the graph's order)"))
                }
                None => {
                    return Err(format!(
                        "layer {} sits between {list}.{} and {list}.{}; the target builds the blocks back to back",
                        layers.name(w, l),
                        k.saturating_sub(1),
                        k
                    ))
                }
            }
        }
        Ok(DecoderStack {
            pre: 0..first,
            blocks: first..last + 1,
            post: last + 1..layers.len(),
        })
    }
}

/// A plan checked for export: valid, and no layer cut (module documentation).
#[derive(Clone, Debug)]
pub struct LayerPlan<'a> {
    pub workload: &'a Workload,
    pub layers: &'a Layers,
    /// The scorer's evaluation of the plan.
    pub evaluation: Evaluation,
    /// The canonical device of every layer (module documentation).
    pub layer_device: Vec<Device>,
    /// The plan's own device of every layer.
    pub original_device: Vec<Device>,
    /// The canonical accelerators that recompute their activations, sorted (module
    /// documentation).
    pub recompute: Vec<Device>,
}

impl<'a> LayerPlan<'a> {
    /// Checks `placement` for export; `Err` says which rule it breaks (the plan is invalid,
    /// or it cuts inside a layer, naming the layer and its devices).
    pub fn new(
        w: &'a Workload,
        layers: &'a Layers,
        placement: &Placement,
    ) -> Result<LayerPlan<'a>, String> {
        let evaluation = evaluate(w, placement, false);
        if let Some(v) = evaluation.violations.first() {
            return Err(format!("the plan is not valid for this workload: {v}"));
        }
        let mut device_of: Vec<Option<Device>> = vec![None; layers.len()];
        let mut cut: Vec<usize> = Vec::new();
        for (l, layer) in layers.layers.iter().enumerate() {
            let d = placement.assignment[layer.nodes[0]];
            if layer.nodes.iter().any(|&v| placement.assignment[v] != d) {
                cut.push(l);
            }
            device_of[l] = Some(d);
        }
        if let Some(&l) = cut.first() {
            let layer = &layers.layers[l];
            let mut counts: std::collections::BTreeMap<Device, usize> = Default::default();
            for &v in &layer.nodes {
                *counts.entry(placement.assignment[v]).or_insert(0) += 1;
            }
            let held: Vec<String> = counts
                .iter()
                .map(|(d, c)| format!("{d} holds {c}"))
                .collect();
            let more = if cut.len() > 1 {
                format!(" (and {} more layers are cut)", cut.len() - 1)
            } else {
                String::new()
            };
            return Err(format!(
                "the plan cuts inside layer {} ({} nodes: {}){more}; frameworks split only between layers: plan with --granularity layer",
                layers.name(w, l),
                layer.nodes.len(),
                held.join(", ")
            ));
        }
        let mut accelerator_rank: std::collections::HashMap<usize, usize> = Default::default();
        let original_device: Vec<Device> = device_of
            .into_iter()
            .map(|d| d.expect("every layer has nodes"))
            .collect();
        let layer_device = original_device
            .iter()
            .map(|&d| match d {
                Device::Accelerator(i) => {
                    let next = accelerator_rank.len();
                    Device::Accelerator(*accelerator_rank.entry(i).or_insert(next))
                }
                Device::Cpu(_) => Device::Cpu(0),
            })
            .collect::<Vec<Device>>();
        let mut recompute: Vec<Device> = layer_device
            .iter()
            .zip(&original_device)
            .filter(|(_, &o)| o.is_accelerator() && placement.recomputes(o))
            .map(|(&d, _)| d)
            .collect();
        recompute.sort();
        recompute.dedup();
        Ok(LayerPlan {
            workload: w,
            layers,
            evaluation,
            layer_device,
            original_device,
            recompute,
        })
    }

    /// The plan's placement with canonical devices: what every reader gives back.
    pub fn placement(&self) -> Placement {
        placement_of_layers(self.workload, self.layers, &self.layer_device)
    }

    /// The pipeline stages (canonical accelerator numbers) that recompute.
    pub fn recompute_stages(&self) -> Vec<usize> {
        self.recompute
            .iter()
            .filter_map(|d| match d {
                Device::Accelerator(i) => Some(*i),
                Device::Cpu(_) => None,
            })
            .collect()
    }

    /// The forward pass (ms) canonical accelerator `stage` runs again if it recomputes,
    /// `R(S)` of [`crate::model::recompute`].
    pub fn forward_ms(&self, stage: usize) -> f64 {
        let d = Device::Accelerator(stage);
        (0..self.workload.len())
            .filter(|&v| {
                self.layer_device[self.layers.layer_of[v]] == d
                    && !self.workload.node(v).is_backward
            })
            .map(|v| self.workload.node(v).fpga_latency)
            .sum()
    }

    /// A comment line saying that `target` has no activation-checkpointing setting, when
    /// the plan recomputes (empty otherwise): the choice is never dropped silently.
    pub fn recompute_not_carried(&self, prefix: &str, target: &str, why: &str) -> String {
        let stages = self.recompute_stages();
        if stages.is_empty() {
            return String::new();
        }
        format!(
            "{prefix}WARNING: the plan recomputes activations on {}; {target} has no activation-checkpointing setting here ({why}), so this export does not carry it.\n",
            gpu_list(&stages)
        )
    }

    /// CPU cores the original plan uses.
    pub fn cpus_used(&self) -> Vec<Device> {
        let mut cpus: Vec<Device> = self
            .evaluation
            .devices
            .iter()
            .map(|d| d.device)
            .filter(|d| !d.is_accelerator())
            .collect();
        cpus.sort();
        cpus
    }

    /// Refuses a plan with CPU devices, for a target that runs stages on accelerators only.
    pub fn accelerators_only(&self, target: &str) -> Result<(), String> {
        let cpus = self.cpus_used();
        let Some(&cpu) = cpus.first() else {
            return Ok(());
        };
        let l = self
            .layer_device
            .iter()
            .position(|d| !d.is_accelerator())
            .expect("a CPU holds a layer");
        Err(format!(
            "{target} runs every pipeline stage on a GPU, but the plan puts layer {} on {cpu}; plan without CPUs (--cpus 0)",
            self.layers.name(self.workload, l)
        ))
    }

    /// The pipeline stages in order, or why the plan is no pipeline of layer runs.
    pub fn stages(&self) -> Result<Vec<Stage>, String> {
        let mut stages: Vec<Stage> = Vec::new();
        for (l, &d) in self.layer_device.iter().enumerate() {
            match stages.last_mut() {
                Some(s) if s.device == d => s.layers.end = l + 1,
                _ => {
                    if let Some(earlier) = stages.iter().find(|s| s.device == d) {
                        let between = earlier.layers.end;
                        return Err(format!(
                            "{} holds layers {} and {} but not layer {} between them (on {}); a pipeline stage is a run of consecutive layers",
                            d,
                            self.layers.name(self.workload, earlier.layers.start),
                            self.layers.name(self.workload, l),
                            self.layers.name(self.workload, between),
                            self.layer_device[between]
                        ));
                    }
                    stages.push(Stage {
                        device: d,
                        layers: l..l + 1,
                    });
                }
            }
        }
        Ok(stages)
    }

    /// The decoder stack, with `pre` on the first stage and `post` on the last, or why not.
    pub fn decoder_stack(&self, target: &str, stages: &[Stage]) -> Result<DecoderStack, String> {
        let stack = DecoderStack::of(self.workload, self.layers)
            .map_err(|why| format!("{target} splits a decoder stack: {why}"))?;
        let (first, last) = (&stages[0], &stages[stages.len() - 1]);
        for l in stack.pre.clone() {
            if !first.layers.contains(&l) {
                return Err(format!(
                    "{target} builds {} on the first pipeline stage, but the plan puts it on stage {}",
                    self.layers.name(self.workload, l),
                    stage_of(stages, l)
                ));
            }
        }
        for l in stack.post.clone() {
            if !last.layers.contains(&l) {
                return Err(format!(
                    "{target} builds {} on the last pipeline stage ({}), but the plan puts it on stage {}",
                    self.layers.name(self.workload, l),
                    stages.len() - 1,
                    stage_of(stages, l)
                ));
            }
        }
        Ok(stack)
    }

    /// The per-device comment lines every text carries:
    /// `GPU 0: embed_tokens + layers 0-5 (load 1.234 ms, memory 2.00 GiB)`.
    pub fn device_comments(&self, prefix: &str) -> String {
        let mut by_device: Vec<(Device, Device, Vec<usize>)> = Vec::new();
        for (l, &d) in self.layer_device.iter().enumerate() {
            match by_device.iter_mut().find(|(e, _, _)| *e == d) {
                Some((_, _, nodes)) => nodes.extend(&self.layers.layers[l].nodes),
                None => by_device.push((
                    d,
                    self.original_device[l],
                    self.layers.layers[l].nodes.clone(),
                )),
            }
        }
        let mut text = String::new();
        for (d, original, nodes) in &by_device {
            let name = match d {
                Device::Accelerator(i) => format!("GPU {i}"),
                Device::Cpu(_) => "CPU".into(),
            };
            let (load, memory) = self
                .evaluation
                .devices
                .iter()
                .find(|x| x.device == *original)
                .map_or((0.0, 0.0), |x| (x.load, x.memory_bytes));
            text.push_str(&format!(
                "{prefix}{name}: {} (load {load:.3} ms, memory {})\n",
                self.layers.describe(self.workload, nodes, 12),
                crate::model::human_bytes(memory)
            ));
        }
        text
    }
}

/// `GPU 1, GPU 2` for stages `[1, 2]`.
pub fn gpu_list(stages: &[usize]) -> String {
    stages
        .iter()
        .map(|s| format!("GPU {s}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The stage index holding layer `l`.
fn stage_of(stages: &[Stage], l: usize) -> usize {
    stages
        .iter()
        .position(|s| s.layers.contains(&l))
        .unwrap_or(0)
}

/// Every node on the device of its layer.
pub fn placement_of_layers(w: &Workload, layers: &Layers, layer_device: &[Device]) -> Placement {
    Placement::new(
        (0..w.len())
            .map(|v| layer_device[layers.layer_of[v]])
            .collect(),
    )
}

/// The words of a shell command text (quotes removed, `#` comments and line continuations
/// handled by `shlex`), or why it is not one.
pub fn shell_words(text: &str) -> Result<Vec<String>, String> {
    let joined = text.replace("\\\n", " ");
    shlex::split(&joined).ok_or_else(|| "unbalanced quotes".to_string())
}

/// The value of `--flag V` or `--flag=V` (any of `names`) in `words`; the last one wins, as
/// with argparse.
pub fn flag_value<'w>(words: &'w [String], names: &[&str]) -> Result<Option<&'w str>, String> {
    let mut found = None;
    for (i, word) in words.iter().enumerate() {
        for name in names {
            if word == name {
                let value = words
                    .get(i + 1)
                    .ok_or_else(|| format!("{name} is given without a value"))?;
                found = Some(value.as_str());
            } else if let Some(value) = word
                .strip_prefix(name)
                .and_then(|rest| rest.strip_prefix('='))
            {
                found = Some(value);
            }
        }
    }
    Ok(found)
}

/// Whether the switch `name` is among `words`.
pub fn has_switch(words: &[String], name: &str) -> bool {
    words.iter().any(|w| w == name)
}

/// A positive integer flag value, with the flag named in the error.
pub fn positive(name: &str, value: &str) -> Result<usize, String> {
    match value.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{name} {value:?} is not a positive integer")),
    }
}

//! The export targets of a 3D plan (`--export`): what each framework runs (its ZeRO
//! stages and schedules, and whether its TP splits the sequence) keeps the search within
//! it, so the export never fails on the plan made for it.

use super::{setting, SettingsError};
use crate::costmodel::parallel::SequenceParallel;
use crate::model::parallel::Zero;
use crate::model::schedule::Schedule;
use crate::solve::parallel::Space;

/// The frameworks a 3D plan exports to (`--export`): what each runs constrains the search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Megatron,
    DeepSpeed,
    TorchTitan,
    Vllm,
}

impl Target {
    pub const ALL: [Target; 4] = [
        Target::Megatron,
        Target::DeepSpeed,
        Target::TorchTitan,
        Target::Vllm,
    ];

    /// The target's name (`--export NAME`, `crate::export::parallel::FORMATS`).
    pub fn name(self) -> &'static str {
        match self {
            Target::Megatron => "megatron",
            Target::DeepSpeed => "deepspeed",
            Target::TorchTitan => "torchtitan",
            Target::Vllm => "vllm",
        }
    }

    /// The target named `name`, or the error naming the targets.
    pub fn parse(name: &str) -> Result<Target, SettingsError> {
        Target::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Target::ALL.iter().map(|t| t.name()).collect();
                setting(
                    "--export",
                    format!(
                        "--export {name}: --parallel 3d exports {}",
                        names.join(", ")
                    ),
                )
            })
    }

    /// Why the target cannot run an interleaved plan; `None` for Megatron-LM, which runs
    /// it (`--num-layers-per-virtual-pipeline-stage`).
    fn no_interleaving(self) -> Option<&'static str> {
        match self {
            Target::Megatron => None,
            Target::DeepSpeed => Some("DeepSpeed's PipelineEngine runs its 1F1B TrainSchedule, with one contiguous stage per rank (no interleaving; plan with --schedule 1f1b)"),
            Target::TorchTitan => Some("torchtitan's Interleaved1F1B is not written by this exporter yet (plan with --schedule 1f1b, or --export megatron)"),
            Target::Vllm => Some("vLLM serves one contiguous stage per rank (VLLM_PP_LAYER_PARTITION); an interleaved plan has several chunks per rank"),
        }
    }

    /// The ZeRO stages and schedules the target runs, and why.
    fn rules(self) -> (&'static [Zero], &'static [Schedule], &'static str) {
        match self {
            Target::Megatron => (
                &[Zero::Off, Zero::Optimizer],
                &[Schedule::OneFOneB],
                "Megatron-LM's distributed optimizer shards the optimizer state only (ZeRO-1) and its pipeline runs 1f1b or interleaved:v",
            ),
            Target::DeepSpeed => (
                &[Zero::Off, Zero::Optimizer],
                &[Schedule::OneFOneB],
                "DeepSpeed's PipelineEngine runs ZeRO 0 or 1 and its 1F1B TrainSchedule",
            ),
            Target::TorchTitan => (
                &[Zero::Off, Zero::Gradients, Zero::Parameters],
                &[Schedule::OneFOneB, Schedule::GPipe],
                "torchtitan replicates (ZeRO-0) or shards with FSDP2 (ZeRO-2 or 3)",
            ),
            Target::Vllm => (&Zero::ALL, &[Schedule::OneFOneB, Schedule::GPipe], ""),
        }
    }
}

/// With an export target, the search stays within what the target runs, so the export
/// never fails on the plan made for it: `auto` ZeRO becomes the target's stages, and an
/// explicit stage or schedule it does not run is refused before the search.
pub fn within_target(target: Option<Target>, space: &mut Space) -> Result<(), SettingsError> {
    let Some(target) = target else {
        return Ok(());
    };
    let (format, (zeros, schedules, why)) = (target.name(), target.rules());
    let allowed: Vec<Zero> = space
        .zero
        .iter()
        .copied()
        .filter(|z| zeros.contains(z))
        .collect();
    if allowed.is_empty() {
        let stages: Vec<String> = zeros.iter().map(|z| z.stage().to_string()).collect();
        return Err(setting(
            "--zero",
            format!(
                "--zero {} --export {format}: {why}; give --zero {} or auto",
                space.zero[0].stage(),
                stages.join(", ")
            ),
        ));
    }
    space.zero = allowed;
    if let Schedule::Interleaved { .. } = space.schedule {
        if let Some(why) = target.no_interleaving() {
            return Err(setting(
                "--schedule",
                format!("--schedule {} --export {format}: {why}", space.schedule),
            ));
        }
    } else if !schedules.contains(&space.schedule) {
        return Err(setting(
            "--schedule",
            format!("--schedule {} --export {format}: {why}", space.schedule),
        ));
    }
    Ok(())
}

/// Sequence parallelism for the plan: `asked`, or the export target's rule (torchtitan
/// always runs it, with a note when not asked; DeepSpeed's pipeline engine and vLLM never).
pub(super) fn sequence_parallel(
    target: Option<Target>,
    asked: bool,
    notes: &mut Vec<String>,
) -> Result<SequenceParallel, SettingsError> {
    match target {
        Some(Target::TorchTitan) => {
            if !asked {
                notes.push("torchtitan's TP plan splits the norms along the sequence: planned with --sequence-parallel".into());
            }
            Ok(SequenceParallel::On)
        }
        Some(t @ (Target::DeepSpeed | Target::Vllm)) if asked => Err(setting(
            "--sequence-parallel",
            format!(
                "--sequence-parallel --export {}: {} runs tensor parallelism without splitting the sequence",
                t.name(),
                if t == Target::Vllm { "vLLM" } else { "DeepSpeed's pipeline engine" }
            ),
        )),
        _ if asked => Ok(SequenceParallel::On),
        _ => Ok(SequenceParallel::Off),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_named_as_the_exporters() {
        let names: Vec<&str> = Target::ALL.iter().map(|t| t.name()).collect();
        assert_eq!(names, ["megatron", "deepspeed", "torchtitan", "vllm"]);
        assert_eq!(
            Target::parse("onnx").unwrap_err().to_string(),
            "--export onnx: --parallel 3d exports megatron, deepspeed, torchtitan, vllm"
        );
    }
}

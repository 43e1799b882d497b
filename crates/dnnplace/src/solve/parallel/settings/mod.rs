//! The settings of a 3D search, checked once and turned into a [`ParallelProblem`]: the one
//! road from `plan CONFIG.json|WORKLOAD.json --parallel 3d` (the command line parses its
//! flags into a [`ParallelSettings`]) and from Python's `dnnplace.plan_parallel` to
//! [`super::plan`] (docs/parallel.md).
//!
//! | setting | flag | default | rule |
//! | --- | --- | --- | --- |
//! | `model` | the positional file | required | a Hugging Face config.json, or a MODEL.md workload JSON (an object with `nodes`) with optional per-node `tensorParallel` options |
//! | `cluster` | `--cluster` | required | `MxNxTYPE` terms or a cluster TOML; one accelerator type, or several (uniform or free layouts; uniform ones exported with a node-rank table; no interleaving; the sweep, target and price cap count whole machines in the cluster's order) |
//! | `global_batch` | `--global-batch` | required | `B` in 1 to 2^24 |
//! | `micro_batch` | `--micro-batch` | config: `auto` = the powers of two up to 16 dividing `B`; workload: 1 | a divisor of `B`; a workload's is the samples its numbers are for (never `auto`) |
//! | `tensor_parallel` | `--tensor-parallel` | `auto` = every degree that divides a machine and the model (config: heads, key/value heads, FFN; workload: every node has an option of it) | each listed degree so |
//! | `data_parallel`, `pipeline_parallel` | `--data-parallel`, `--pipeline-parallel` | `auto` | 1 to the cluster's accelerators |
//! | `zero` | `--zero` | `auto` (every stage) | 0 to 3 |
//! | `overlap_grad_reduce` | `--overlap-grad-reduce` | off | the DP sync starts with each stage's last backward (the iteration; docs/parallel.md) |
//! | `schedule` | `--schedule` | 1f1b | gpipe, 1f1b, or interleaved:v (uniform layouts on one type; some `p ≥ 2` of the space with `p·v` dividing the blocks and `B/(d·b)` a multiple of `p`) |
//! | `layouts` | `--uniform` / `--free` | uniform | free: the time per sample or the simulated iteration, no export; the sweep, target and price cap as uniform |
//! | `objective` | `--objective` | time per sample (`throughput`) | or the iteration time (free layouts or several types: the simulated iteration) |
//! | `export` | `--export` | none | the search stays within the target's ZeRO stages and schedules |
//! | `price_cap` | `--budget` | none | caps the accelerators at what the price buys per hour |
//! | `goal` | `--sweep`, `--target-tps` | one layout | the best layout per device count, or the fewest devices meeting a time per sample (uniform or free layouts; the sweep without a price cap, the target without a cap or the iteration objective) |
//!
//! Values written as text (`"auto"`, `"8"`, `"1,2,4"`) are read by [`Choice::count`],
//! [`Choice::degrees`] and [`Choice::zero`]; text that does not read is kept
//! ([`Choice::Unparsed`]) and refused by [`ParallelSettings::build`] with the rule the model
//! and cluster give, so every error names the flag and what it accepts, as the command line
//! has always printed it. The library prints nothing: notes (a cluster's, a target's, the
//! price cap's) are handed back in a list.
//!
//! Here: the settings, their text readers, the checks, a config.json's problem and the
//! space; [`cluster`] reads the cluster, [`target`] holds the export targets' rules,
//! [`workload`] a workload JSON's problem.

mod cluster;
mod target;
mod workload;

pub use cluster::{cluster_of, cluster_topology};
pub use target::{within_target, Target};
pub use workload::is_workload_json;

use std::path::{Path, PathBuf};

use super::{Goal, Layouts, Objective, ParallelDevices, ParallelProblem, PricedModel, Space};
use crate::costmodel::hf_config::{parse_hf_config, HfModel};
use crate::costmodel::operators::DType;
use crate::costmodel::parallel::valid_tp_degrees;
use crate::io::tensor_parallel_json::{read_tensor_parallel, TpOptions};
use crate::model::parallel::{Topology, Zero};
use crate::model::recompute::Recompute;
use crate::model::schedule::Schedule;
use crate::model::Workload;

/// The largest global batch, 2^24 samples.
pub const MAX_GLOBAL_BATCH: usize = 1 << 24;
/// The largest sequence length, 2^20 tokens (tensor sizes stay exact in 64 bits).
pub const MAX_SEQ: usize = 1 << 20;

/// A setting that is `auto` (the search chooses), a fixed value, or text that did not
/// read as one (refused by [`ParallelSettings::build`] with the setting's rule).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Choice<T> {
    #[default]
    Auto,
    Fixed(T),
    Unparsed(String),
}

impl Choice<usize> {
    /// `auto` or a count (`8`).
    pub fn count(text: &str) -> Choice<usize> {
        match text.trim() {
            "auto" => Choice::Auto,
            t => t
                .parse::<usize>()
                .map_or_else(|_| Choice::Unparsed(t.to_string()), Choice::Fixed),
        }
    }
}

impl Choice<Vec<usize>> {
    /// `auto` or a comma list of degrees ≥ 1 (`1,2,4,8`).
    pub fn degrees(text: &str) -> Choice<Vec<usize>> {
        let t = text.trim();
        if t == "auto" {
            return Choice::Auto;
        }
        t.split(',')
            .map(|x| x.trim().parse::<usize>().ok().filter(|&v| v >= 1))
            .collect::<Option<Vec<_>>>()
            .map_or_else(|| Choice::Unparsed(t.to_string()), Choice::Fixed)
    }
}

impl Choice<Zero> {
    /// `auto` or a ZeRO stage 0–3.
    pub fn zero(text: &str) -> Choice<Zero> {
        match text.trim() {
            "auto" => Choice::Auto,
            t => t
                .parse::<u8>()
                .ok()
                .and_then(Zero::from_stage)
                .map_or_else(|| Choice::Unparsed(t.to_string()), Choice::Fixed),
        }
    }
}

/// What a 3D search lays out.
#[derive(Clone, Debug)]
pub enum ParallelModel {
    /// A file: a Hugging Face config.json, or a workload JSON (an object with `nodes`, told
    /// apart by [`is_workload_json`]) whose nodes may carry `tensorParallel` options.
    Path(PathBuf),
    /// A workload already read, with its nodes' `tensorParallel` options.
    Workload {
        workload: Box<Workload>,
        options: TpOptions,
    },
}

/// Why settings make no problem; each prints the command line's message.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SettingsError {
    /// A setting the model, cluster or a rule refuses; `flag` names it as the command line
    /// spells it.
    #[error("{message}")]
    Setting { flag: &'static str, message: String },
    /// The model file cannot be read, parsed or priced.
    #[error("{0}")]
    Model(String),
    /// The cluster cannot be read or does not suit a 3D layout.
    #[error("{0}")]
    Cluster(String),
}

fn setting(flag: &'static str, message: String) -> SettingsError {
    SettingsError::Setting { flag, message }
}

/// The settings of one 3D search (module documentation: each with its flag, default and
/// rule).
#[derive(Clone, Debug)]
pub struct ParallelSettings {
    pub model: ParallelModel,
    /// `MxNxTYPE` terms joined by `+`, or a cluster TOML file.
    pub cluster: Option<String>,
    /// Device profile TOML files, looked up before the built-in profiles.
    pub device_files: Vec<PathBuf>,
    /// Each accelerator's memory in bytes, replacing its type's.
    pub memory_bytes: Option<f64>,
    /// A config's number format [default: the config's, else bf16].
    pub dtype: Option<DType>,
    /// A config's tokens per sample [default 512] [1 to 2^20].
    pub seq: Option<usize>,
    pub global_batch: Option<usize>,
    /// `None`: not given (a config: `auto`; a workload: 1).
    pub micro_batch: Option<Choice<usize>>,
    pub tensor_parallel: Choice<Vec<usize>>,
    pub data_parallel: Choice<usize>,
    pub pipeline_parallel: Choice<usize>,
    pub zero: Choice<Zero>,
    /// `None` or `auto`: recomputation searched off and on; `none`: off.
    pub recompute: Option<Recompute>,
    /// [default: 1f1b]
    pub schedule: Option<Schedule>,
    pub layouts: Layouts,
    /// The TP groups also split the sequence (a config only).
    pub sequence_parallel: bool,
    /// The DP gradient sync overlapped with backward (`--overlap-grad-reduce`).
    pub overlap_grad_reduce: bool,
    pub objective: Objective,
    /// The framework the plan is exported to (`--export`), by name.
    pub export: Option<String>,
    /// A price per hour the accelerators may cost (`--budget`; one type only).
    pub price_cap: Option<f64>,
    /// The question: one layout, the sweep, or the fewest devices for a target.
    pub goal: Goal,
}

impl ParallelSettings {
    /// The command line's defaults for `model`: every choice `auto`, uniform layouts, 1f1b,
    /// the time per sample (`--objective throughput`); the cluster and the global batch
    /// still to give.
    pub fn new(model: ParallelModel) -> ParallelSettings {
        ParallelSettings {
            model,
            cluster: None,
            device_files: Vec::new(),
            memory_bytes: None,
            dtype: None,
            seq: None,
            global_batch: None,
            micro_batch: None,
            tensor_parallel: Choice::Auto,
            data_parallel: Choice::Auto,
            pipeline_parallel: Choice::Auto,
            zero: Choice::Auto,
            recompute: None,
            schedule: None,
            layouts: Layouts::Uniform,
            sequence_parallel: false,
            overlap_grad_reduce: false,
            objective: Objective::TimePerSample,
            export: None,
            price_cap: None,
            goal: Goal::One,
        }
    }

    /// The checks that need neither model nor cluster: the export target, what free
    /// layouts refuse, the schedule. Returns the target.
    pub fn check(&self) -> Result<Option<Target>, SettingsError> {
        let target = self.export.as_deref().map(Target::parse).transpose()?;
        if self.layouts == Layouts::Free {
            let refused = [(
                "--export",
                target.is_some(),
                "frameworks run uniform layouts",
            )];
            if let Some((name, _, why)) = refused.iter().find(|r| r.1) {
                return Err(setting(
                    "--free",
                    format!(
                        "{name} does not apply to --free: {why}; drop --free for uniform layouts"
                    ),
                ));
            }
        }
        if target == Some(Target::DeepSpeed) && self.overlap_grad_reduce {
            return Err(setting(
                "--overlap-grad-reduce",
                "--overlap-grad-reduce with --export deepspeed: DeepSpeed's PipelineEngine reduces the gradients in its ReduceGrads step after the pipeline's last backward (its overlap_comm overlaps ZeRO-2's reductions, which the pipeline engine does not run); drop one of the two".into(),
            ));
        }
        self.schedule_checked()?;
        self.goal_checked()?;
        Ok(target)
    }

    /// `--sweep` and `--target-tps` search the problem's layouts (uniform or free); the
    /// sweep takes no price cap; the target is a time per sample, searched without a price
    /// cap.
    fn goal_checked(&self) -> Result<(), SettingsError> {
        if let Goal::FewestDevices { .. } = self.goal {
            let clash = [
                ("--budget", self.price_cap.is_some()),
                (
                    "--objective iteration",
                    self.objective == Objective::Iteration,
                ),
            ];
            if let Some((name, _)) = clash.iter().find(|c| c.1) {
                return Err(setting(
                    "--target-tps",
                    format!("--target-tps finds the fewest accelerators for a time per sample: give it without {name}"),
                ));
            }
        }
        if self.goal == Goal::Sweep && self.price_cap.is_some() {
            return Err(setting(
                "--budget",
                "--budget caps one search: give it without --sweep".into(),
            ));
        }
        Ok(())
    }

    /// `--schedule`: GPipe, 1F1B (the default), or interleaved for uniform layouts.
    fn schedule_checked(&self) -> Result<Schedule, SettingsError> {
        match self.schedule.unwrap_or(Schedule::OneFOneB) {
            s @ Schedule::Interleaved { .. } if self.layouts == Layouts::Free => Err(setting(
                "--schedule",
                format!("--schedule {s}: free layouts run gpipe or 1f1b; interleaving plans uniform layouts (drop --free)"),
            )),
            s => Ok(s),
        }
    }

    /// Under the interleaved schedule, that the space holds a layout: `--pipeline-parallel`
    /// at least 2, some `p` with `p·v` dividing the chain's blocks (the units between the
    /// first and the last), and for it some `m = B/(d·b)` a multiple of `p` (Megatron-LM's
    /// rules; [`super::interleaved`]).
    fn interleaved_checked(&self, problem: &ParallelProblem) -> Result<(), SettingsError> {
        let space = &problem.space;
        let Schedule::Interleaved { chunks: v } = space.schedule else {
            return Ok(());
        };
        let s = space.schedule;
        if space.stages == Some(1) {
            return Err(setting(
                "--pipeline-parallel",
                format!("--schedule {s} --pipeline-parallel 1: interleaving needs at least 2 pipeline stages"),
            ));
        }
        let units = problem
            .chains
            .first()
            .and_then(|c| c.first())
            .map_or(0, |c| c.len());
        let blocks = units.saturating_sub(2);
        let n = space.max_devices;
        let ps: Vec<usize> = (2..=n)
            .filter(|p| space.stages.is_none_or(|x| x == *p))
            .filter(|p| crate::model::parallel::equal_chunk_bounds(units, *p, v).is_some())
            .collect();
        if ps.is_empty() {
            return Err(setting(
                "--schedule",
                format!("--schedule {s}: no number of stages p ≥ 2{} has p·{v} chunks dividing the model's {blocks} blocks evenly (Megatron-LM's --num-layers-per-virtual-pipeline-stage)", space.stages.map_or(String::new(), |p| format!(" (--pipeline-parallel {p})"))),
            ));
        }
        let ds: Vec<usize> = space.data_parallel.map_or((1..=n).collect(), |d| vec![d]);
        let any = ps.iter().any(|&p| {
            ds.iter().any(|&d| {
                space.micro_batches.iter().any(|&b| {
                    p * d <= n
                        && space.global_batch.is_multiple_of(d * b)
                        && (space.global_batch / (d * b)).is_multiple_of(p)
                })
            })
        });
        if !any {
            return Err(setting(
                "--global-batch",
                format!("--schedule {s} --global-batch {}: no micro-batches per replica m = B/(d·b) is a multiple of the stages p ({}) for the DP degrees and micro-batch sizes allowed (Megatron-LM's rule for the interleaved schedule)", space.global_batch, ps.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")),
            ));
        }
        Ok(())
    }

    /// The problem of these settings: the model read and priced per micro-batch on the
    /// cluster, the space checked against both. `notes` receives what the command line
    /// prints as `note:` lines, in order, also when an error follows.
    pub fn build(&self, notes: &mut Vec<String>) -> Result<ParallelProblem, SettingsError> {
        let problem = self.build_unchecked(notes)?;
        self.interleaved_checked(&problem)?;
        Ok(problem)
    }

    /// [`ParallelSettings::build`] before the interleaved schedule's check.
    fn build_unchecked(&self, notes: &mut Vec<String>) -> Result<ParallelProblem, SettingsError> {
        let target = self.check()?;
        match &self.model {
            ParallelModel::Workload { workload, options } => {
                self.workload_problem(workload, options, target, notes)
            }
            ParallelModel::Path(path) if is_workload_json(path) => {
                self.check_workload_settings(target)?;
                let w = crate::io::read_workload(path)
                    .map_err(|e| SettingsError::Model(e.to_string()))?;
                let options = read_tensor_parallel(path, &w)
                    .map_err(|e| SettingsError::Model(e.to_string()))?;
                self.workload_problem(&w, &options, target, notes)
            }
            ParallelModel::Path(path) => self.config_problem(path, target, notes),
        }
    }

    /// The problem of a transformer's config.json at `path`.
    fn config_problem(
        &self,
        path: &Path,
        target: Option<Target>,
        notes: &mut Vec<String>,
    ) -> Result<ParallelProblem, SettingsError> {
        let model = self.hf_model(path)?;
        let dtype = self.dtype.or(model.dtype).unwrap_or(DType::Bf16);
        let schedule = self.schedule_checked()?;
        if let Some((topo, profiles)) = self.mixed_cluster(notes)? {
            let display = topo.display();
            let valid = valid_tp_degrees(&model.spec, display.per_machine);
            let space = self.space_of(self.micro_batch.clone(), &display, &valid, schedule)?;
            let priced = PricedModel {
                spec: &model.spec,
                dtype,
                sequence_parallel: target::sequence_parallel(None, self.sequence_parallel, notes)?,
            };
            let devices = ParallelDevices::Mixed(topo);
            return ParallelProblem::priced(
                &priced,
                &profiles,
                devices,
                space,
                self.objective,
                self.layouts,
            )
            .map_err(SettingsError::Model);
        }
        let (cluster, profiles, topo) = self.topology(notes)?;
        let valid = valid_tp_degrees(&model.spec, topo.per_machine);
        let mut space = self.space_of(self.micro_batch.clone(), &topo, &valid, schedule)?;
        within_target(target, &mut space)?;
        self.cap_by_price(&cluster, &mut space, notes)?;
        let priced = PricedModel {
            spec: &model.spec,
            dtype,
            sequence_parallel: target::sequence_parallel(target, self.sequence_parallel, notes)?,
        };
        let devices = ParallelDevices::One(topo);
        ParallelProblem::priced(
            &priced,
            &profiles,
            devices,
            space,
            self.objective,
            self.layouts,
        )
        .map_err(SettingsError::Model)
    }

    /// The transformer of the config.json at `path`, at `seq` tokens per sample.
    fn hf_model(&self, path: &Path) -> Result<HfModel, SettingsError> {
        const READS: &str =
            "(--parallel 3d reads a Hugging Face config.json or a training workload JSON)";
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
        {
            return Err(SettingsError::Model(format!(
                "{}: --parallel 3d plans a Hugging Face config.json or a training workload JSON; import the ONNX model first with `dnnplace import MODEL.onnx --training --tensor-parallel 2,4,8 --out W.json` (its nodes get layers and Megatron-style TP options), then plan W.json",
                path.display()
            )));
        }
        if let Some(s) = self.seq.filter(|s| !(1..=MAX_SEQ).contains(s)) {
            return Err(setting(
                "--seq",
                format!("--seq {s} is out of range (1 to {MAX_SEQ}): tensor sizes must stay exact in 64 bits {READS}"),
            ));
        }
        let text = crate::io::read_input_text(path, crate::io::TEXT_LIMIT_BYTES)
            .map_err(|e| SettingsError::Model(format!("{}: {e} {READS}", path.display())))?;
        parse_hf_config(&text, self.seq.unwrap_or(512), 1)
            .map_err(|e| SettingsError::Model(format!("{}: {e} {READS}", path.display())))
    }

    /// The search space, for a model whose valid TP degrees are `valid` on `topo`.
    fn space_of(
        &self,
        micro_batch: Option<Choice<usize>>,
        topo: &Topology,
        valid: &[usize],
        schedule: Schedule,
    ) -> Result<Space, SettingsError> {
        let global_batch = match self.global_batch {
            Some(b) if (1..=MAX_GLOBAL_BATCH).contains(&b) => b,
            Some(b) => {
                return Err(setting(
                    "--global-batch",
                    format!("--global-batch {b} is out of range (1 to 2^24)"),
                ))
            }
            None => {
                return Err(setting(
                    "--global-batch",
                    "--parallel 3d needs --global-batch B (samples per iteration)".into(),
                ))
            }
        };
        let tensor_parallel = self.tensor_parallel_of(topo, valid)?;
        let n = topo.devices();
        let data_parallel = checked(
            "--data-parallel",
            &self.data_parallel,
            |&d| d >= 1 && d <= n,
            &format!("give a degree from 1 to the cluster's {n} accelerators, or auto"),
        )?;
        let stages = checked(
            "--pipeline-parallel",
            &self.pipeline_parallel,
            |&p| p >= 1 && p <= n,
            &format!("give a number of stages from 1 to the cluster's {n} accelerators, or auto"),
        )?;
        let zero = checked(
            "--zero",
            &self.zero,
            |_| true,
            "give a ZeRO stage 0, 1, 2 or 3, or auto",
        )?
        .map_or(Zero::ALL.to_vec(), |z| vec![z]);
        let micro_batches = match checked(
            "--micro-batch",
            &micro_batch.unwrap_or_default(),
            |&b| b >= 1 && global_batch % b == 0,
            &format!("give a micro-batch size that divides --global-batch {global_batch}, or auto"),
        )? {
            Some(b) => vec![b],
            None => [1, 2, 4, 8, 16]
                .into_iter()
                .filter(|b| global_batch % b == 0)
                .collect(),
        };
        Ok(Space {
            tensor_parallel,
            data_parallel,
            stages,
            zero,
            recompute: match self.recompute {
                Some(Recompute::None) => Some(false),
                Some(Recompute::Auto) | None => None,
            },
            micro_batches,
            global_batch,
            schedule,
            overlap_grad_reduce: self.overlap_grad_reduce,
            max_devices: n,
        })
    }

    /// The TP degrees to search: `auto`, every valid one dividing a machine; a list, each
    /// checked.
    fn tensor_parallel_of(
        &self,
        topo: &Topology,
        valid: &[usize],
    ) -> Result<Vec<usize>, SettingsError> {
        let list = match &self.tensor_parallel {
            Choice::Auto => {
                return Ok(valid
                    .iter()
                    .copied()
                    .filter(|t| topo.per_machine.is_multiple_of(*t))
                    .collect())
            }
            Choice::Fixed(list) if !list.is_empty() && list.iter().all(|&t| t >= 1) => list.clone(),
            Choice::Fixed(list) => {
                let text: Vec<String> = list.iter().map(usize::to_string).collect();
                return Err(unreadable_degrees(&text.join(",")));
            }
            Choice::Unparsed(t) => return Err(unreadable_degrees(t)),
        };
        for &t in &list {
            if !valid.contains(&t) {
                return Err(setting(
                    "--tensor-parallel",
                    format!("--tensor-parallel {t}: the degree must divide the model's heads, key/value heads and feed-forward width (these do: {valid:?})"),
                ));
            }
            if !topo.per_machine.is_multiple_of(t) {
                return Err(setting(
                    "--tensor-parallel",
                    format!("--tensor-parallel {t}: a TP group stays inside one machine, so the degree must divide its {} accelerators", topo.per_machine),
                ));
            }
        }
        Ok(list)
    }
}

/// The error of a TP list that does not read.
fn unreadable_degrees(text: &str) -> SettingsError {
    setting(
        "--tensor-parallel",
        format!(
            "--tensor-parallel '{text}': give degrees ≥ 1 separated by commas (1,2,4,8), or auto"
        ),
    )
}

/// `None` for `auto`, the value when `ok`, else the error `FLAG 'TEXT': RULE`.
fn checked<T: Clone + ToText>(
    flag: &'static str,
    choice: &Choice<T>,
    ok: impl Fn(&T) -> bool,
    rule: &str,
) -> Result<Option<T>, SettingsError> {
    let text = match choice {
        Choice::Auto => return Ok(None),
        Choice::Fixed(v) if ok(v) => return Ok(Some(v.clone())),
        Choice::Fixed(v) => v.to_text(),
        Choice::Unparsed(t) => t.clone(),
    };
    Err(setting(flag, format!("{flag} '{text}': {rule}")))
}

/// A setting's value as the command line writes it.
trait ToText {
    fn to_text(&self) -> String;
}

impl ToText for usize {
    fn to_text(&self) -> String {
        self.to_string()
    }
}

impl ToText for Zero {
    fn to_text(&self) -> String {
        self.stage().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_reads_as_the_command_line_writes_it() {
        assert_eq!(Choice::count(" auto "), Choice::Auto);
        assert_eq!(Choice::count("8"), Choice::Fixed(8));
        assert_eq!(Choice::count("x"), Choice::Unparsed("x".into()));
        assert_eq!(Choice::degrees("1, 2,4"), Choice::Fixed(vec![1, 2, 4]));
        assert_eq!(Choice::degrees("0,2"), Choice::Unparsed("0,2".into()));
        assert_eq!(Choice::zero("3"), Choice::Fixed(Zero::Parameters));
        assert_eq!(Choice::zero("4"), Choice::Unparsed("4".into()));
    }

    #[test]
    fn a_refused_value_names_its_flag_and_rule() {
        let e = checked(
            "--data-parallel",
            &Choice::Fixed(0usize),
            |&d| d >= 1,
            "give 1 or more",
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "--data-parallel '0': give 1 or more");
        let e = checked(
            "--zero",
            &Choice::<Zero>::Unparsed("9".into()),
            |_| true,
            "0 to 3",
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "--zero '9': 0 to 3");
        assert!(matches!(e, SettingsError::Setting { flag: "--zero", .. }));
    }

    #[test]
    fn free_layouts_take_the_iteration_time_and_refuse_interleaving() {
        let mut s = ParallelSettings::new(ParallelModel::Path("x.json".into()));
        s.layouts = Layouts::Free;
        s.objective = Objective::Iteration;
        assert_eq!(s.check().unwrap(), None);
        // Several types take the iteration (uniform or free), the sweep and an export
        // (uniform layouts: free ones are refused by `check`).
        assert!(s.check_several_types(&["h100", "v100"]).is_ok());
        s.layouts = Layouts::Uniform;
        assert!(s.check_several_types(&["h100", "v100"]).is_ok());
        s.goal = Goal::Sweep;
        assert!(s.check_several_types(&["h100", "v100"]).is_ok());
        s.export = Some("megatron".into());
        assert!(s.check_several_types(&["h100", "v100"]).is_ok());
        s.export = None;
        s.goal = Goal::One;
        s.layouts = Layouts::Free;
        s.objective = Objective::TimePerSample;
        assert!(s.check_several_types(&["h100", "v100"]).is_ok());
        s.schedule = Some(Schedule::Interleaved { chunks: 2 });
        assert_eq!(
            s.check().unwrap_err().to_string(),
            "--schedule interleaved:2: free layouts run gpipe or 1f1b; interleaving plans uniform layouts (drop --free)"
        );
        s.layouts = Layouts::Uniform;
        assert!(s.check().is_ok());
        let e = s
            .check_several_types(&["h100", "v100"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--schedule interleaved"), "{e}");
    }
}

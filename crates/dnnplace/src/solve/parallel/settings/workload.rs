//! A MODEL.md training workload's 3D problem (`docs/parallel.md`, "A workload JSON"): its
//! layers are the chain ([`crate::costmodel::workload_chain`]), its nodes' optional
//! `tensorParallel` options ([`crate::io::tensor_parallel_json`]) the TP degrees.
//!
//! The workload's numbers are one micro-batch: `micro_batch` says how many samples
//! (default 1); `auto` is refused (nothing rescales a workload). The TP degrees searched:
//! a list, each of which every node must have an option for, or `auto`, every such degree
//! ([`common_degrees`]). A node's option of a degree that does not divide a machine's
//! accelerators is refused (a TP group stays inside one machine). Settings that describe
//! a transformer (`export`, `sequence_parallel`, `dtype`, `seq`) are refused by name.

use std::path::Path;

use super::{setting, target::within_target, Choice, ParallelSettings, SettingsError, Target};
use crate::costmodel::workload_chain::{common_degrees, workload_chain};
use crate::io::tensor_parallel_json::TpOptions;
use crate::model::parallel::ChainCosts;
use crate::model::profiles::DeviceProfile;
use crate::model::{Cluster, Workload};
use crate::solve::parallel::{ParallelDevices, ParallelProblem, Space};

impl ParallelSettings {
    /// The problem of workload `w` with its TP `options`.
    pub(super) fn workload_problem(
        &self,
        w: &Workload,
        options: &TpOptions,
        target: Option<Target>,
        notes: &mut Vec<String>,
    ) -> Result<ParallelProblem, SettingsError> {
        self.check_workload_settings(target)?;
        let micro_batch = Some(Choice::Fixed(self.workload_micro_batch()?));
        let schedule = self.schedule_checked()?;
        if let Some((topo, profiles)) = self.mixed_cluster(notes)? {
            let display = topo.display();
            let valid = self.check_degrees(w, options, display.per_machine)?;
            let space = self.space_of(micro_batch, &display, &valid, schedule)?;
            let cluster = self.cluster_and_profiles(&mut Vec::new())?.0;
            let mut chains = Vec::with_capacity(topo.groups.len());
            for g in &topo.groups {
                let ty = cluster.types().iter().position(|t| t.name == g.type_name);
                let ty =
                    ty.ok_or_else(|| SettingsError::Cluster(format!("no type {}", g.type_name)))?;
                chains.push(vec![chain_on(
                    w,
                    options,
                    (&cluster, ty),
                    &profiles,
                    &space,
                )?]);
            }
            return Ok(ParallelProblem {
                chains,
                devices: ParallelDevices::Mixed(topo),
                space,
                objective: self.objective,
                layouts: self.layouts,
            });
        }
        let (cluster, profiles, topo) = self.topology(notes)?;
        let valid = self.check_degrees(w, options, topo.per_machine)?;
        let mut space = self.space_of(micro_batch, &topo, &valid, schedule)?;
        within_target(target, &mut space)?;
        self.cap_by_price(&cluster, &mut space, notes)?;
        let chain = chain_on(w, options, (&cluster, 0), &profiles, &space)?;
        Ok(ParallelProblem {
            chains: vec![vec![chain]],
            devices: ParallelDevices::One(topo),
            space,
            objective: self.objective,
            layouts: self.layouts,
        })
    }

    /// Settings that describe a transformer, not a workload, named when given.
    pub(super) fn check_workload_settings(
        &self,
        target: Option<Target>,
    ) -> Result<(), SettingsError> {
        let refused = [
            ("--export", target.is_some()),
            ("--sequence-parallel", self.sequence_parallel),
            ("--dtype", self.dtype.is_some()),
            ("--seq", self.seq.is_some()),
        ];
        match refused.iter().find(|r| r.1) {
            Some((name, _)) => Err(setting(
                name,
                format!("{name} does not apply to a workload JSON: it describes a transformer given as a config.json (a workload's nodes carry their own costs)"),
            )),
            None => Ok(()),
        }
    }

    /// The samples one micro-batch of a workload holds (`micro_batch`, default 1).
    fn workload_micro_batch(&self) -> Result<usize, SettingsError> {
        let text = match &self.micro_batch {
            None => return Ok(1),
            Some(Choice::Fixed(b)) if *b >= 1 => return Ok(*b),
            Some(Choice::Fixed(b)) => b.to_string(),
            Some(Choice::Auto) => "auto".to_string(),
            Some(Choice::Unparsed(t)) => t.clone(),
        };
        Err(setting(
            "--micro-batch",
            format!("--micro-batch {text}: a workload JSON is priced for one micro-batch; give the number of samples its numbers are for (default 1), not auto"),
        ))
    }

    /// Every option's degree divides a machine's `per_machine` accelerators, and every
    /// listed TP degree is one each node has; the degrees every node has.
    fn check_degrees(
        &self,
        w: &Workload,
        options: &TpOptions,
        per_machine: usize,
    ) -> Result<Vec<usize>, SettingsError> {
        for (id, list) in options {
            if let Some(o) = list.iter().find(|o| !per_machine.is_multiple_of(o.degree)) {
                return Err(setting(
                    "--cluster",
                    format!("node {id}: tensorParallel degree {}: a TP group stays inside one machine, so the degree must divide its {per_machine} accelerators", o.degree),
                ));
            }
        }
        let common = common_degrees(w, options);
        let asked: Vec<usize> = match &self.tensor_parallel {
            Choice::Auto => return Ok(common),
            Choice::Fixed(list) => list.clone(),
            Choice::Unparsed(t) => t.split(',').filter_map(|x| x.trim().parse().ok()).collect(),
        };
        for t in asked {
            if !common.contains(&t) {
                let lacking = w.nodes().iter().find(|n| {
                    !options
                        .get(&n.id)
                        .is_some_and(|o| o.iter().any(|x| x.degree == t))
                });
                let who = lacking.map_or(String::new(), |n| format!(": node {} has none", n.id));
                return Err(setting(
                    "--tensor-parallel",
                    format!("--tensor-parallel {t}: every node needs a tensorParallel option of that degree{who} (the workload's degrees: {common:?})"),
                ));
            }
        }
        Ok(common)
    }
}

/// The chain of `w` on type `ty` of `cluster` at 1 and the space's degrees, for its one
/// micro-batch size.
fn chain_on(
    w: &Workload,
    options: &TpOptions,
    (cluster, ty): (&Cluster, usize),
    profiles: &[DeviceProfile],
    space: &Space,
) -> Result<ChainCosts, SettingsError> {
    let mut degrees: Vec<usize> = std::iter::once(1)
        .chain(space.tensor_parallel.iter().copied())
        .collect();
    degrees.sort_unstable();
    degrees.dedup();
    let profile = &cluster.types()[ty].profile;
    let peak = profiles
        .iter()
        .find(|p| &p.name == profile)
        .map_or(0.0, |p| p.peak_fp16_flops);
    workload_chain(
        w,
        options,
        (cluster, ty),
        &degrees,
        (space.micro_batches[0], peak),
    )
    .map_err(|e| SettingsError::Model(e.to_string()))
}

/// Whether `path` holds a workload JSON (an object with `nodes`) rather than a config.json.
pub fn is_workload_json(path: &Path) -> bool {
    let Ok(text) = crate::io::read_input_text(path, crate::io::TEXT_LIMIT_BYTES) else {
        return false;
    };
    serde_json::from_str::<serde_json::Value>(text.trim_start_matches('\u{feff}'))
        .is_ok_and(|v| v.get("nodes").is_some())
}

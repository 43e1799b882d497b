//! `plan WORKLOAD.json --parallel 3d`: the parallel layout of a MODEL.md training workload
//! (`docs/parallel.md`, "A workload JSON"). The workload's layers are the chain
//! ([`crate::costmodel::workload_chain`]), its nodes' optional `tensorParallel` options
//! ([`crate::io::tensor_parallel_json`]) the TP degrees; the search and the output are
//! `plan CONFIG.json --parallel 3d`'s ([`super::parallel_cmd::solve_problem`]).
//!
//! The workload's numbers are one micro-batch: `--micro-batch b` says how many samples
//! (default 1); `auto` is refused (nothing rescales a workload). The TP degrees searched:
//! `--tensor-parallel LIST`, each of which every node must have an option for, or `auto`,
//! every such degree ([`common_degrees`]). A node's option of a degree that does not divide
//! a machine's accelerators is refused (a TP group stays inside one machine).

use std::path::Path;
use std::time::Instant;

use super::parallel_cmd::{
    mixed_cluster, search_goal, solve_problem, space_of, topology_of, within_target,
};
use super::{CliError, PlanArgs};
use crate::costmodel::workload_chain::{common_degrees, workload_chain, ChainError};
use crate::io::tensor_parallel_json::{read_tensor_parallel, TpOptions};
use crate::model::parallel::ChainCosts;
use crate::model::schedule::Schedule;
use crate::model::{Cluster, Workload};
use crate::solve::parallel::{Layouts, Objective, ParallelDevices, ParallelProblem, Space};

/// Whether `path` holds a workload JSON (an object with `nodes`) rather than a config.json.
pub fn is_workload_json(path: &Path) -> bool {
    let Ok(text) = crate::io::read_input_text(path, crate::io::TEXT_LIMIT_BYTES) else {
        return false;
    };
    serde_json::from_str::<serde_json::Value>(text.trim_start_matches('\u{feff}'))
        .is_ok_and(|v| v.get("nodes").is_some())
}

/// Flags that describe a transformer, not a workload, named when given.
fn check_workload_flags(args: &PlanArgs, export: Option<&str>) -> Result<(), CliError> {
    let refused = [
        ("--export", export.is_some()),
        ("--sequence-parallel", args.parallel.sequence_parallel),
        ("--dtype", args.model.dtype.is_some()),
        ("--seq", args.model.seq.is_some()),
        ("--training", args.model.training),
    ];
    match refused.iter().find(|r| r.1) {
        Some((name, _)) => Err(CliError::Input(format!(
            "{name} does not apply to a workload JSON: it describes a transformer given as a config.json (a workload's nodes carry their own costs)"
        ))),
        None => Ok(()),
    }
}

/// The samples one micro-batch of the workload holds (`--micro-batch`, default 1).
fn micro_batch_of(args: &PlanArgs) -> Result<usize, CliError> {
    match args.parallel.micro_batch.as_deref().map(str::trim) {
        None => Ok(1),
        Some(t) => t.parse::<usize>().ok().filter(|&b| b >= 1).ok_or_else(|| {
            CliError::Input(format!(
                "--micro-batch {t}: a workload JSON is priced for one micro-batch; give the number of samples its numbers are for (default 1), not auto"
            ))
        }),
    }
}

/// Every option's degree divides a machine's `per_machine` accelerators, and every degree
/// of `--tensor-parallel LIST` is one each node has.
fn check_degrees(
    w: &Workload,
    options: &TpOptions,
    per_machine: usize,
    asked: Option<&str>,
) -> Result<Vec<usize>, CliError> {
    for (id, list) in options {
        if let Some(o) = list.iter().find(|o| !per_machine.is_multiple_of(o.degree)) {
            return Err(CliError::Input(format!(
                "node {id}: tensorParallel degree {}: a TP group stays inside one machine, so the degree must divide its {per_machine} accelerators",
                o.degree
            )));
        }
    }
    let common = common_degrees(w, options);
    let Some(list) = asked.filter(|t| t.trim() != "auto") else {
        return Ok(common);
    };
    for t in list
        .split(',')
        .filter_map(|x| x.trim().parse::<usize>().ok())
    {
        if !common.contains(&t) {
            let lacking = w.nodes().iter().find(|n| {
                !options
                    .get(&n.id)
                    .is_some_and(|o| o.iter().any(|x| x.degree == t))
            });
            let who = lacking.map_or(String::new(), |n| format!(": node {} has none", n.id));
            return Err(CliError::Input(format!(
                "--tensor-parallel {t}: every node needs a tensorParallel option of that degree{who} (the workload's degrees: {common:?})"
            )));
        }
    }
    Ok(common)
}

/// The chain of `w` on type `ty` of `cluster` at 1 and the space's degrees.
fn chain_on(
    w: &Workload,
    options: &TpOptions,
    (cluster, ty): (&Cluster, usize),
    profiles: &[crate::model::profiles::DeviceProfile],
    space: &Space,
) -> Result<ChainCosts, CliError> {
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
    .map_err(|e: ChainError| CliError::Input(e.to_string()))
}

/// Runs `plan WORKLOAD.json --parallel 3d` (module documentation).
pub fn run(
    args: &PlanArgs,
    started: Instant,
    (schedule, objective): (Schedule, Objective),
    export: Option<&str>,
) -> Result<(), CliError> {
    check_workload_flags(args, export)?;
    let path: &Path = &args.workload;
    let w = crate::io::read_workload(path).map_err(|e| CliError::Input(e.to_string()))?;
    let options = read_tensor_parallel(path, &w).map_err(|e| CliError::Input(e.to_string()))?;
    let b = micro_batch_of(args)?;
    let mut flags = args.parallel.clone();
    flags.micro_batch = Some(b.to_string());
    let recompute = args.schedule.recompute;
    if let Some((topo, profiles)) = mixed_cluster(args)? {
        let display = topo.display();
        let valid = check_degrees(
            &w,
            &options,
            display.per_machine,
            flags.tensor_parallel.as_deref(),
        )?;
        let space = space_of(&flags, recompute, &display, &valid, schedule)?;
        let cluster = super::costmodel_cmds::cluster_from_flag(
            args.model.cluster.as_deref().unwrap_or_default(),
            &args.model.device_file,
        )?
        .0;
        let mut chains = Vec::with_capacity(topo.groups.len());
        for g in &topo.groups {
            let ty = cluster.types().iter().position(|t| t.name == g.type_name);
            let ty = ty.ok_or_else(|| CliError::Internal(format!("no type {}", g.type_name)))?;
            chains.push(vec![chain_on(
                &w,
                &options,
                (&cluster, ty),
                &profiles,
                &space,
            )?]);
        }
        let problem = ParallelProblem {
            chains,
            devices: ParallelDevices::Mixed(topo),
            space,
            objective: Objective::TimePerSample,
            layouts: Layouts::Free,
        };
        return solve_problem(args, started, &problem, None);
    }
    let (cluster, profiles, topo) = topology_of(
        args.model.cluster.as_deref(),
        &args.model.device_file,
        args.devices.memory,
    )?;
    let valid = check_degrees(
        &w,
        &options,
        topo.per_machine,
        flags.tensor_parallel.as_deref(),
    )?;
    let mut space = space_of(&flags, recompute, &topo, &valid, schedule)?;
    within_target(export, &mut space)?;
    search_goal(args, &cluster, &mut space, objective)?;
    let chain = chain_on(&w, &options, (&cluster, 0), &profiles, &space)?;
    let problem = ParallelProblem {
        chains: vec![vec![chain]],
        devices: ParallelDevices::One(topo),
        space,
        objective,
        layouts: if args.parallel.free {
            Layouts::Free
        } else {
            Layouts::Uniform
        },
    };
    solve_problem(args, started, &problem, export)
}

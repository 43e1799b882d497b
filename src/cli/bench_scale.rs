//! `dnnplace bench --scale`: `--method auto` on generated graphs of 1k–100k operators
//! and on the memory-bound GNMT cases, each planned in a child process (`dnnplace plan
//! FILE --json`) so that its peak memory is its own. Prints one row per graph: nodes,
//! accelerators, the path auto took, time, the plan's TPS, the proven bound, the gap and
//! the peak memory.
//!
//! Rows (each generated here by the project's own generators, a100-80gb accelerators,
//! one CPU core, fp32):
//! - `transformer-L-{inference,training}-kK`: `generate transformer --layers L` (BERT
//!   shapes, s = 512) for L ∈ {96, 384, 1536} and K ∈ {8, 16, 64};
//! - `gpt-N`: `generate gpt --nodes N` for N ∈ {1k, 3k, 10k, 50k, 100k}, k = 8;
//! - `wide-6x4`, `wide-8x4`: 8 blocks of 6 (8) parallel branches of 4 operators; `chains-8x5`:
//!   one block of 8 parallel branches of 5 operators; k = 8;
//! - `gnmt-{inference,training}`: the published GNMT layer graphs with k = 4, ℓ = 2 and
//!   memory per accelerator 1.3 × (total size)/k, derived from the files in `--gnmt-dir`
//!   (read, never copied).
//!
//! - `cluster-…` (issue 12's table; `--method auto` on a cluster is the cluster DP with
//!   its greedy fallback): `generate transformer --layers L` (L ∈ {96, 384}) and the
//!   published layer graphs (bert24, gnmt, inceptionv3, resnet50; training; from the same
//!   folder as the GNMT files) on two types (`1xKxa100-80gb+1xKxv100`) and three types
//!   (`+1xKxh100`) with K ∈ {8, 16} per type, and `cluster-transformer-96-3types-256`:
//!   3 types × 256 accelerators over 32 machines (`12x8xa100-80gb+10x8xv100+10x8xh100`).
//!
//! Workloads go to temporary files that are removed after their row.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::costmodel::synthetic::{gpt_graph, gpt_layers_for_nodes, wide_graph, GptSpec, WideSpec};
use crate::costmodel::{
    find_profile, to_workload, transformer_graph, CostSettings, DType, OpGraph, TransformerSpec,
};
use crate::io::{read_workload, workload_to_json, write_atomically};
use crate::model::{DeviceSet, Workload};

use super::CliError;

/// One bench row: its name and how to build its workload.
pub(super) struct Case {
    pub(super) name: String,
    pub(super) build: Box<dyn Fn() -> Result<Workload, CliError>>,
}

/// a100-80gb accelerators and one CPU core, fp32.
fn settings(accelerators: usize, training: bool) -> Result<CostSettings, CliError> {
    let input = |e: crate::costmodel::ProfileError| CliError::Internal(e.to_string());
    Ok(CostSettings {
        accelerator: find_profile("a100-80gb", &[]).map_err(input)?,
        cpu: find_profile("cpu-core", &[]).map_err(input)?,
        dtype: DType::Fp32,
        training,
        accelerators,
        cpus: 1,
    })
}

pub(super) fn priced(
    graph: OpGraph,
    accelerators: usize,
    training: bool,
) -> Result<Workload, CliError> {
    Ok(to_workload(&graph, &settings(accelerators, training)?)?)
}

/// GNMT with k accelerators, ℓ = 2 and memory 1.3 × total/k.
pub(super) fn gnmt(path: &Path, k: usize) -> Result<Workload, CliError> {
    let w = read_workload(path)?;
    let total: f64 = w.nodes().iter().map(|n| n.size_bytes).sum();
    let devices = DeviceSet {
        accelerators: k,
        cpus: 2,
        memory_per_accelerator_bytes: 1.3 * total / k as f64,
    };
    Ok(w.with_devices(devices)?)
}

fn cases(gnmt_dir: &Path) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    for layers in [96, 384, 1536] {
        for training in [false, true] {
            for k in [8, 16, 64] {
                let kind = if training { "training" } else { "inference" };
                cases.push(Case {
                    name: format!("transformer-{layers}-{kind}-k{k}"),
                    build: Box::new(move || {
                        let spec = TransformerSpec::bert(layers, 768, 12, 512, 1);
                        priced(
                            transformer_graph(&spec, DType::Fp32).map_err(CliError::Internal)?,
                            k,
                            training,
                        )
                    }),
                });
            }
        }
    }
    for nodes in [1_000, 3_000, 10_000, 50_000, 100_000] {
        cases.push(Case {
            name: format!("gpt-{}k", nodes / 1000),
            build: Box::new(move || {
                let spec = GptSpec::gpt2(gpt_layers_for_nodes(nodes));
                priced(
                    gpt_graph(&spec, DType::Fp32).map_err(CliError::Internal)?,
                    8,
                    false,
                )
            }),
        });
    }
    for (name, blocks, branches, ops) in [
        ("wide-6x4", 8, 6, 4),
        ("wide-8x4", 8, 8, 4),
        ("chains-8x5", 1, 8, 5),
    ] {
        cases.push(Case {
            name: name.into(),
            build: Box::new(move || {
                priced(
                    wide_graph(&WideSpec::new(blocks, branches, ops), DType::Fp32)
                        .map_err(CliError::Internal)?,
                    8,
                    false,
                )
            }),
        });
    }
    for kind in ["inference", "training"] {
        let path = gnmt_dir.join(format!("gnmt_{kind}.json"));
        cases.push(Case {
            name: format!("gnmt-{kind}-k4-l2-mem1.3"),
            build: Box::new(move || gnmt(&path, 4)),
        });
    }
    cases.extend(cluster_cases(gnmt_dir));
    cases
}

/// `generate transformer --layers L` (BERT shapes) priced for the cluster `spec`.
pub(super) fn transformer_on_cluster(
    layers: usize,
    cluster: String,
) -> Box<dyn Fn() -> Result<Workload, CliError>> {
    Box::new(move || {
        let spec = TransformerSpec::bert(layers, 768, 12, 512, 1);
        let graph = transformer_graph(&spec, DType::Fp32).map_err(CliError::Internal)?;
        let (cluster, profiles) = super::costmodel_cmds::cluster_from_flag(&cluster, &[])?;
        let settings = settings(1, false)?;
        Ok(crate::costmodel::graph::to_workload_on_cluster(
            &graph, &settings, &cluster, &profiles,
        )?)
    })
}

/// The cluster rows (module docs).
fn cluster_cases(layer_dir: &Path) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    let spec = |types: usize, k: usize| {
        let mut s = format!("1x{k}xa100-80gb+1x{k}xv100");
        if types == 3 {
            s += &format!("+1x{k}xh100");
        }
        s
    };
    let transformer = transformer_on_cluster;
    for layers in [96, 384] {
        for types in [2, 3] {
            for k in [8, 16] {
                cases.push(Case {
                    name: format!("cluster-transformer-{layers}-{types}types-k{k}"),
                    build: transformer(layers, spec(types, k)),
                });
            }
        }
    }
    for graph in ["bert24", "gnmt", "inceptionv3", "resnet50"] {
        for types in [2, 3] {
            for k in [8, 16] {
                let path = layer_dir.join(format!("{graph}_training.json"));
                let cluster = spec(types, k);
                cases.push(Case {
                    name: format!("cluster-{graph}_training-{types}types-k{k}"),
                    build: Box::new(move || {
                        super::costmodel_cmds::workload_on_cluster(
                            read_workload(&path)?,
                            &cluster,
                            &[],
                        )
                    }),
                });
            }
        }
    }
    cases.push(Case {
        name: "cluster-transformer-96-3types-256".into(),
        build: transformer(96, "12x8xa100-80gb+10x8xv100+10x8xh100".into()),
    });
    cases
}

/// Runs the scale rows whose name contains `filter`; `plan_args` go to every `plan`.
pub fn run(
    filter: &str,
    time_limit_s: f64,
    gnmt_dir: &Path,
    plan_args: &[String],
    markdown: bool,
) -> Result<(), CliError> {
    run_cases(cases(gnmt_dir), filter, time_limit_s, plan_args, markdown)
}

/// Runs the rows of `cases` whose name contains `filter`, each in its own `plan` process.
pub(super) fn run_cases(
    cases: Vec<Case>,
    filter: &str,
    time_limit_s: f64,
    plan_args: &[String],
    markdown: bool,
) -> Result<(), CliError> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Internal(format!("cannot find this program: {e}")))?;
    let header = [
        "graph", "nodes", "k", "path", "time s", "wall s", "TPS", "bound", "gap", "status",
        "peak MiB",
    ];
    let mut stdout = std::io::stdout().lock();
    if markdown {
        writeln!(stdout, "| {} |", header.join(" | "))?;
        writeln!(stdout, "|{}", "---|".repeat(header.len()))?;
    } else {
        writeln!(stdout, "{}", header.join("\t"))?;
    }
    stdout.flush()?;
    for case in cases.into_iter().filter(|c| c.name.contains(filter)) {
        let w = match (case.build)() {
            Ok(w) => w,
            Err(e) => {
                let row = [
                    case.name.clone(),
                    "-".into(),
                    "-".into(),
                    format!("not built: {e}"),
                ];
                print_row(&mut stdout, &row, markdown)?;
                continue;
            }
        };
        let file: PathBuf = std::env::temp_dir().join(format!(
            "dnnplace-bench-scale-{}-{}.json",
            std::process::id(),
            case.name
        ));
        write_atomically(&file, &workload_to_json(&w))?;
        let wall = std::time::Instant::now();
        let output = std::process::Command::new(&exe)
            .arg("plan")
            .arg(&file)
            .args(["--json", "--method", "auto", "--time-limit"])
            .arg(format!("{time_limit_s}s"))
            .args(plan_args)
            .output();
        let _ = std::fs::remove_file(&file);
        let output =
            output.map_err(|e| CliError::Internal(format!("running {}: {e}", exe.display())))?;
        let wall_s = wall.elapsed().as_secs_f64();
        let accelerators = w
            .cluster()
            .map_or(w.devices().accelerators, |c| c.accelerators().len());
        let (nodes, k) = (w.len().to_string(), accelerators.to_string());
        if !output.status.success() {
            let err = String::from_utf8_lossy(&output.stderr)
                .trim()
                .replace('\n', " ");
            print_row(
                &mut stdout,
                &[
                    case.name,
                    nodes,
                    k,
                    format!("failed: {err}"),
                    "-".into(),
                    format!("{wall_s:.1}"),
                ],
                markdown,
            )?;
            continue;
        }
        let v: serde_json::Value = serde_json::from_slice(&output.stdout)
            .map_err(|e| CliError::Internal(format!("plan --json printed no JSON: {e}")))?;
        let row = result_row(case.name, nodes, k, wall_s, &v);
        print_row(&mut stdout, &row, markdown)?;
    }
    Ok(())
}

/// One row of the scale bench from the JSON that `plan --json` printed for case `name`
/// (`nodes` nodes, `k` accelerators, `wall_s` seconds of wall time), in the header's order.
fn result_row(
    name: String,
    nodes: String,
    k: String,
    wall_s: f64,
    v: &serde_json::Value,
) -> [String; 11] {
    // Every plan is the one plan record (report::plan_json): value, bound, gap, status.
    let num = |key: &str| v[key].as_f64().unwrap_or(f64::NAN);
    let (bound, gap) = (num("bound"), num("gap"));
    let path = v["path"].as_str().unwrap_or("-").replace('|', "/");
    let status = v["status"]
        .as_str()
        .unwrap_or("-")
        .split(" (")
        .next()
        .unwrap_or("-")
        .to_string();
    [
        name,
        nodes,
        k,
        path,
        format!("{:.1}", num("timeS")),
        format!("{wall_s:.1}"),
        format!("{:.6}", num("value")),
        format!("{bound:.6}"),
        format!("{:.3}%", 100.0 * gap),
        status,
        v["peakMemoryBytes"].as_u64().map_or("-".into(), |b| {
            format!("{:.0}", b as f64 / (1024.0 * 1024.0))
        }),
    ]
}

fn print_row(out: &mut impl Write, cells: &[String], markdown: bool) -> Result<(), CliError> {
    if markdown {
        writeln!(out, "| {} |", cells.join(" | "))?;
    } else {
        writeln!(out, "{}", cells.join("\t"))?;
    }
    out.flush()?;
    Ok(())
}

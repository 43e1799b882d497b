//! A mutation fuzzer for every reader, on stable Rust (libFuzzer's `cargo fuzz` needs a
//! nightly compiler).
//!
//! **Cases.** Case `i` of target `t` under run seed `s` is a pure function of `(t, s, i)`:
//! an [`Rng`] seeded with `mix(s, t, i)` picks a seed input ([`seeds`]) and applies one to
//! four mutations ([`mutate`]): structural ones that know the format (edges that break a
//! rule, extreme counts and numbers, wrong types, unknown nodes, devices out of range,
//! negative or huge ONNX dimensions, TOML values out of range) and byte-level ones
//! (truncate, flip, splice from another seed, duplicate, BOM, trailing garbage, deep
//! nesting). So any finding replays from its three numbers alone.
//!
//! **Oracle.** Each case goes through the library's reader; a rejection must carry a
//! message. An accepted input then goes through everything a user could run on it: the
//! writer and the reader again (the round trip must give the same graph / assignment /
//! profile), `score` (the evaluator and the report on a few placements), and `plan`
//! (every method on one or two of the objectives it supports, each plan re-scored by
//! `solve::plan`, written as placement JSON and read back). A panic, an internal-check
//! failure (`SolveError::Check` / `Solver`: what the CLI reports as exit 3) or a failed
//! round trip is a finding. The caller adds what cannot be caught in-process: aborts,
//! signals and hangs (`examples/fuzz/main.rs`, or the watchdog of `tests/fuzz_smoke.rs`).
//!
//! Cost per case: O(|input|) to build and read, plus the methods on accepted workloads,
//! bounded by `max_ideals = 20 000` and a 0.5 s time limit per method.

pub mod cli;
#[path = "../../../tests/common/mod.rs"]
pub mod common;
pub mod mutate;
pub mod seeds;

use std::sync::Arc;

use dnnplace::costmodel::onnx::{decode_model, import_model, ImportOptions};
use dnnplace::costmodel::{
    find_profile, to_workload, transformer_graph, CostSettings, DType, DeviceProfile, Style,
    TransformerSpec,
};
use dnnplace::io::{parse_placement, parse_workload, text_of, workload_to_json};
use dnnplace::model::{Device, Placement, Workload};
use dnnplace::report::{placement_json, plan_table, EvaluationJson};
use dnnplace::score::evaluate;
use dnnplace::solve::{self, Limits, Objective, Problem, SolveError};

use mutate::Rng;
pub use seeds::Seeds;

/// One reader under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Workload,
    Placement,
    Onnx,
    Profile,
    /// Command-line inputs, one run of the binary per case ([`cli`]).
    Cli(cli::Kind),
}

impl Target {
    pub const ALL: [Target; 10] = [
        Target::Workload,
        Target::Placement,
        Target::Onnx,
        Target::Profile,
        Target::Cli(cli::Kind::ClusterToml),
        Target::Cli(cli::Kind::ClusterArg),
        Target::Cli(cli::Kind::WorkloadCluster),
        Target::Cli(cli::Kind::Schedule),
        Target::Cli(cli::Kind::Export),
        Target::Cli(cli::Kind::HighsOption),
    ];

    pub fn name(self) -> &'static str {
        match self {
            Target::Workload => "workload",
            Target::Placement => "placement",
            Target::Onnx => "onnx",
            Target::Profile => "profile",
            Target::Cli(kind) => kind.name(),
        }
    }

    /// A stable number per target (the case streams' seed).
    fn number(self) -> u64 {
        Target::ALL.iter().position(|&t| t == self).expect("listed") as u64
    }

    pub fn parse(s: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == s)
    }

    /// File extension of this target's inputs.
    pub fn extension(self) -> &'static str {
        match self {
            Target::Workload | Target::Placement => "json",
            Target::Onnx => "onnx",
            Target::Profile => "toml",
            Target::Cli(_) => "input",
        }
    }
}

/// One generated input.
pub struct Case {
    pub target: Target,
    /// [`Target::Cli`]: the command line (`{input}` is the file holding `input`).
    pub args: Vec<String>,
    /// The seed it came from and the mutations applied, for the report.
    pub description: String,
    pub input: Vec<u8>,
    /// Placement target: the workload the placement is read against.
    pub workload: Option<Arc<Workload>>,
    /// Whether `plan` may run the IP (HiGHS) on an accepted small workload.
    pub allow_ip: bool,
    rng_state: u64,
}

/// How a case ended when nothing went wrong.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The reader rejected the input with this message.
    Rejected(String),
    /// The reader accepted it; everything run on it behaved.
    Accepted,
}

/// Something that must not happen on any input.
#[derive(Debug)]
pub struct Finding(pub String);

/// splitmix64 of the three numbers: independent streams per (run seed, target, case).
fn mix(seed: u64, target: Target, index: u64) -> u64 {
    let mut z = seed
        ^ (target.number() + 1).wrapping_mul(0xD6E8_FEB8_6659_FD93)
        ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn choose<'a, T>(r: &mut Rng, items: &'a [T]) -> &'a T {
    &items[r.below(items.len() as u64) as usize]
}

/// Builds case `index` of `target` (module documentation).
pub fn make_case(seeds: &Seeds, target: Target, run_seed: u64, index: u64) -> Case {
    let state = mix(run_seed, target, index);
    let mut r = Rng::new(state);
    let mut ops: Vec<String> = Vec::new();
    let rounds = 1 + r.below(4);
    let mut args = Vec::new();
    let (seed_name, input, workload) = match target {
        Target::Cli(kind) => {
            let (a, input) = cli::make(&mut r, kind);
            ops.push(format!("dnnplace {}", a.join(" ")));
            args = a;
            (kind.name().to_string(), input, None)
        }
        Target::Workload => {
            let seed = choose(&mut r, &seeds.workloads);
            let donors: Vec<&[u8]> = seeds
                .workloads
                .iter()
                .take(8)
                .map(|s| s.text.as_slice())
                .collect();
            let mut text = seed.text.clone();
            if r.chance(0.85) {
                if let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&seed.text) {
                    for _ in 0..rounds {
                        if r.chance(0.7) {
                            ops.push("workload-field".into());
                            mutate::mutate_workload(&mut r, &mut v);
                        } else {
                            ops.push("json-value".into());
                            mutate::mutate_value(&mut r, &mut v);
                        }
                    }
                    text = if r.chance(0.5) {
                        serde_json::to_vec(&v)
                    } else {
                        serde_json::to_vec_pretty(&v)
                    }
                    .expect("a value serialises");
                }
            }
            if ops.is_empty() || r.chance(0.35) {
                for _ in 0..1 + r.below(2) {
                    ops.push("bytes".into());
                    mutate::mutate_bytes(&mut r, &mut text, &donors);
                }
            }
            (seed.name.clone(), text, None)
        }
        Target::Placement => {
            let seed = choose(&mut r, &seeds.placements);
            let ids: Vec<i64> = seed.workload.nodes().iter().map(|n| n.id).collect();
            let mut text = seed.text.clone();
            if r.chance(0.85) {
                if let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&seed.text) {
                    for _ in 0..rounds {
                        if r.chance(0.7) {
                            ops.push("placement-field".into());
                            mutate::mutate_placement(&mut r, &mut v, &ids);
                        } else {
                            ops.push("json-value".into());
                            mutate::mutate_value(&mut r, &mut v);
                        }
                    }
                    text = serde_json::to_vec(&v).expect("a value serialises");
                }
            }
            if ops.is_empty() || r.chance(0.3) {
                ops.push("bytes".into());
                mutate::mutate_bytes(&mut r, &mut text, &[]);
            }
            (seed.name.clone(), text, Some(seed.workload.clone()))
        }
        Target::Onnx => {
            use prost::Message;
            let (name, bytes) = choose(&mut r, &seeds.onnx);
            let mut bytes = bytes.clone();
            if r.chance(0.7) {
                if let Ok(mut m) = dnnplace::costmodel::onnx::ModelProto::decode(bytes.as_slice()) {
                    for _ in 0..rounds {
                        ops.push("onnx-structure".into());
                        mutate::mutate_onnx(&mut r, &mut m);
                    }
                    bytes = m.encode_to_vec();
                }
            }
            if ops.is_empty() || r.chance(0.4) {
                if r.chance(0.2) {
                    // A length-delimited field declaring 2^32 − 1 (or 2^63) bytes.
                    ops.push("huge-length".into());
                    let header: &[u8] = if r.chance(0.5) {
                        b"\x3a\xff\xff\xff\xff\x0f"
                    } else {
                        b"\x3a\xff\xff\xff\xff\xff\xff\xff\xff\x7f"
                    };
                    let at = r.below(bytes.len() as u64 + 1) as usize;
                    bytes.splice(at..at, header.iter().copied());
                } else {
                    ops.push("bytes".into());
                    mutate::mutate_bytes(&mut r, &mut bytes, &[]);
                }
            }
            (name.clone(), bytes, None)
        }
        Target::Profile => {
            let (name, text) = choose(&mut r, &seeds.profiles);
            let mut text = String::from_utf8_lossy(text).into_owned();
            for _ in 0..rounds {
                ops.push("toml".into());
                text = mutate::mutate_toml(&mut r, &text);
            }
            (name.clone(), text.into_bytes(), None)
        }
    };
    Case {
        target,
        args,
        description: format!("seed {seed_name}; mutations: {}", ops.join(", ")),
        input,
        workload,
        allow_ip: r.chance(0.1),
        rng_state: r.next(),
    }
}

fn internal(context: &str, e: impl std::fmt::Display) -> Finding {
    Finding(format!("{context}: {e}"))
}

fn rejected(message: String) -> Result<Verdict, Finding> {
    if message.trim().is_empty() {
        return Err(Finding("a rejection without a message".into()));
    }
    Ok(Verdict::Rejected(message))
}

/// Runs one case through its reader and, when accepted, through `score` and `plan`.
pub fn run_case(case: &Case) -> Result<Verdict, Finding> {
    let mut r = Rng::new(case.rng_state);
    match case.target {
        Target::Cli(_) => cli::run(&case.args, &case.input),
        Target::Workload => {
            let text = match text_of(&case.input) {
                Ok(t) => t,
                Err(m) => return rejected(m),
            };
            let w = match parse_workload(text) {
                Ok(w) => w,
                Err(e) => return rejected(e.to_string()),
            };
            let again = parse_workload(&workload_to_json(&w))
                .map_err(|e| internal("the written workload does not read back", e))?;
            if again.nodes() != w.nodes()
                || again.edges() != w.edges()
                || again.devices() != w.devices()
            {
                return Err(Finding("the written workload reads back different".into()));
            }
            exercise(&w, &mut r, case.allow_ip, true)?;
            if w.cluster().is_some() {
                exercise_cluster(&w, &mut r, case.allow_ip)?;
            }
            Ok(Verdict::Accepted)
        }
        Target::Placement => {
            let w = case
                .workload
                .as_ref()
                .expect("a placement case has its workload");
            let text = match text_of(&case.input) {
                Ok(t) => t,
                Err(m) => return rejected(m),
            };
            let p = match parse_placement(text, w) {
                Ok(p) => p,
                Err(e) => return rejected(e.to_string()),
            };
            score_and_round_trip(w, &p, r.chance(0.5))?;
            Ok(Verdict::Accepted)
        }
        Target::Onnx => {
            let model = match decode_model(&case.input) {
                Ok(m) => m,
                Err(e) => return rejected(e.to_string()),
            };
            let options = ImportOptions {
                batch: *choose(
                    &mut r,
                    &[None, Some(1), Some(3), Some(1 << 20), Some(1 << 40)],
                ),
                seq: *choose(&mut r, &[None, Some(1), Some(128), Some(1 << 30)]),
                dtype: *choose(
                    &mut r,
                    &[DType::Fp32, DType::Fp16, DType::Tf32, DType::Bf16],
                ),
                training: r.chance(0.5),
            };
            let imported = match import_model(&model, &options) {
                Ok(i) => i,
                Err(e) => return rejected(e.to_string()),
            };
            let settings = CostSettings {
                accelerator: find_profile(
                    choose::<&str>(&mut r, &["a100-80gb", "v100", "h100"]),
                    &[],
                )
                .expect("built in"),
                cpu: find_profile("cpu-core", &[]).expect("built in"),
                dtype: options.dtype,
                training: options.training,
                accelerators: 1 + r.below(4) as usize,
                cpus: r.below(3) as usize,
            };
            let w = match to_workload(&imported.graph, &settings) {
                Ok(w) => w,
                Err(e) => return rejected(e.to_string()),
            };
            exercise(&w, &mut r, false, false)?;
            Ok(Verdict::Accepted)
        }
        Target::Profile => {
            let text = match text_of(&case.input) {
                Ok(t) => t,
                Err(m) => return rejected(m),
            };
            let profile = match DeviceProfile::from_toml(text) {
                Ok(p) => p,
                Err(m) => return rejected(m),
            };
            let again = DeviceProfile::from_toml(&profile.to_toml())
                .map_err(|e| internal("the written profile does not read back", e))?;
            if again != profile {
                return Err(Finding(format!(
                    "the written profile reads back different: {again:?} vs {profile:?}"
                )));
            }
            let mut spec = TransformerSpec::new(Style::Gpt2, 1, 16, 2, 8, 1);
            spec.vocab = 50;
            let graph = transformer_graph(&spec, DType::Fp32)
                .map_err(|e| internal("the fixed transformer spec", e))?;
            let builtin = find_profile(
                if r.chance(0.5) {
                    "cpu-core"
                } else {
                    "a100-80gb"
                },
                &[],
            )
            .expect("built in");
            let (accelerator, cpu) = if r.chance(0.7) {
                (profile, builtin)
            } else {
                (builtin, profile)
            };
            let settings = CostSettings {
                accelerator,
                cpu,
                dtype: DType::Fp32,
                training: r.chance(0.5),
                accelerators: 2,
                cpus: 1,
            };
            let w = match to_workload(&graph, &settings) {
                Ok(w) => w,
                Err(e) => return rejected(e.to_string()),
            };
            exercise(&w, &mut r, false, false)?;
            Ok(Verdict::Accepted)
        }
    }
}

/// `score` on `p`: the evaluator under both rule sets, the reports, and the placement file
/// written and read back to the same assignment.
fn score_and_round_trip(w: &Workload, p: &Placement, latency: bool) -> Result<(), Finding> {
    let e = evaluate(w, p, latency);
    let objective = if latency {
        Objective::Latency { pieces: usize::MAX }
    } else {
        Objective::Throughput
    };
    let p = if latency {
        e.attach_cut(p.clone())
    } else {
        p.clone()
    };
    let _ = plan_table(w, None, objective, &e);
    let _ = serde_json::to_string(&EvaluationJson::of(w, &p, objective, &e));
    if e.violations.iter().any(|v| {
        matches!(
            v,
            dnnplace::score::Violation::WrongLength { .. }
                | dnnplace::score::Violation::PiecesLength { .. }
        )
    }) {
        return Err(Finding(format!(
            "the reader built a placement of the wrong length: {:?}",
            e.violations
        )));
    }
    let file = serde_json::to_string(&placement_json(w, &p, &e, objective))
        .map_err(|e| internal("placement JSON", e))?;
    let back = parse_placement(&file, w).map_err(|err| {
        internal(
            &format!("the written placement does not read back ({file})"),
            err,
        )
    })?;
    if back.assignment != p.assignment {
        return Err(Finding(format!(
            "the written placement reads back a different assignment: {file}"
        )));
    }
    Ok(())
}

/// `plan` on a workload's own cluster: the DP, and the IP when allowed; every plan is
/// re-scored on the library's road (`solve::plan` with the cluster method behind
/// `Method`), whose internal-check failures are findings.
fn exercise_cluster(w: &Workload, r: &mut Rng, allow_ip: bool) -> Result<(), Finding> {
    use dnnplace::solve::cluster::plan::{ClusterMethod, OnCluster};
    let limits = Limits {
        time_limit_s: Some(0.5),
        max_ideals: 20_000,
        threads: Some(1),
        ..Limits::default()
    };
    let mut methods = vec![ClusterMethod::Dp];
    if allow_ip && w.len() <= 30 {
        methods.push(ClusterMethod::Ip {
            contiguous: r.chance(0.5),
            sync: false,
        });
    }
    for method in methods {
        let problem = Problem {
            contiguous: method.contiguous(),
            limits: limits.clone(),
            ..Problem::throughput(w)
        };
        if let Err(e @ (SolveError::Check(_) | SolveError::Solver(_))) =
            dnnplace::solve::plan(&OnCluster(method), &problem)
        {
            return Err(internal(&format!("plan on the cluster ({method:?})"), e));
        }
    }
    Ok(())
}

/// Everything `plan` and `score` would run on an accepted workload. With
/// `DNNPLACE_FUZZ_DUMP=FILE` (replays) the workload is first written to FILE.
fn exercise(w: &Workload, r: &mut Rng, allow_ip: bool, all_methods: bool) -> Result<(), Finding> {
    if let Some(path) = std::env::var_os("DNNPLACE_FUZZ_DUMP") {
        let _ = std::fs::write(path, workload_to_json(w));
    }
    // `score` on simple placements: everything on the first accelerator, round robin over
    // one device more than exist of each kind, everything on the first CPU.
    let k = w.devices().accelerators.clamp(1, 64);
    let l = w.devices().cpus.clamp(1, 64);
    let round_robin: Vec<Device> = (0..w.len())
        .map(|v| {
            if v % 2 == 0 {
                Device::Accelerator(v / 2 % (k + 1))
            } else {
                Device::Cpu(v / 2 % (l + 1))
            }
        })
        .collect();
    for assignment in [
        vec![Device::Accelerator(0); w.len()],
        round_robin,
        vec![Device::Cpu(0); w.len()],
    ] {
        let latency = r.chance(0.5);
        let e = evaluate(w, &Placement::new(assignment.clone()), latency);
        let _ = plan_table(w, None, Objective::Throughput, &e);
    }
    let variants = [
        (Objective::Throughput, true),
        (Objective::Throughput, false),
        (Objective::Sync, true),
        (Objective::Latency { pieces: 1 }, true),
        (Objective::Latency { pieces: 2 }, false),
    ];
    let limits = Limits {
        time_limit_s: Some(0.5),
        max_ideals: 20_000,
        threads: Some(1),
        restarts: 1,
        seed: r.next(),
        ..Limits::default()
    };
    let names: Vec<&str> = if all_methods {
        solve::method_names()
            .into_iter()
            .filter(|&m| {
                m != "expert"
                    && (m != "ip" || (allow_ip && w.len() <= 30))
                    && (m != "brute-force" || w.len() <= 8)
            })
            .collect()
    } else {
        vec!["dp", "greedy"]
    };
    for name in names {
        let method = solve::method_by_name(name).expect("a listed method");
        let supported: Vec<_> = variants
            .iter()
            .filter(|(objective, contiguous)| {
                method
                    .supports(&Problem {
                        workload: w,
                        devices: dnnplace::solve::Devices::of(w),
                        objective: *objective,
                        contiguous: *contiguous,
                        limits: limits.clone(),
                        pipeline: None,
                    })
                    .is_ok()
            })
            .collect();
        if supported.is_empty() {
            continue;
        }
        let &(objective, contiguous) = *choose(r, &supported);
        let problem = Problem {
            workload: w,
            devices: dnnplace::solve::Devices::of(w),
            objective,
            contiguous,
            limits: limits.clone(),
            pipeline: None,
        };
        let started = std::time::Instant::now();
        let planned = solve::plan(method.as_ref(), &problem);
        if std::env::var_os("DNNPLACE_FUZZ_TIMES").is_some() {
            eprintln!(
                "{name} ({}, contiguous: {contiguous}): {:.2} s",
                objective.name(),
                started.elapsed().as_secs_f64()
            );
            if let Ok(plan) = &planned {
                for note in &plan.outcome.stats.notes {
                    eprintln!("    {note}");
                }
            }
        }
        match planned {
            Ok(plan) => {
                if let (Some(p), Some(e)) = (&plan.outcome.placement, &plan.evaluation) {
                    let _ = plan_table(w, Some(&plan.outcome), objective, e);
                    let file = serde_json::to_string(&placement_json(w, p, e, objective))
                        .map_err(|e| internal("placement JSON", e))?;
                    let back = parse_placement(&file, w).map_err(|err| {
                        internal(&format!("{name}'s plan file does not read back"), err)
                    })?;
                    if back.assignment != p.assignment {
                        return Err(Finding(format!(
                            "{name}'s plan file reads back a different assignment"
                        )));
                    }
                }
            }
            Err(e @ (SolveError::Check(_) | SolveError::Solver(_))) => {
                return Err(internal(
                    &format!(
                        "plan --method {name} ({}, contiguous: {contiguous})",
                        objective.name()
                    ),
                    e,
                ))
            }
            Err(_) => {}
        }
    }
    Ok(())
}

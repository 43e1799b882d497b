//! The command-line inputs no reader of the library sees alone: cluster TOML files and
//! workload `cluster` sections, `--cluster` strings, `--schedule` strings, every
//! `--from-export` format and `--highs-option`. Each case is one run of the `dnnplace`
//! binary (`DNNPLACE_BIN`, default `target/release/dnnplace`) on a mutated input.
//!
//! **Oracle.** Exit 0 (accepted), 1 (`score`: the placement breaks a rule) and 2 (a clear
//! error: it must say something on stderr) are fine; exit 3 (internal check), 101 (a
//! panic), death by a signal (an abort: 16 TB allocations, `std::bad_alloc`) and a run past
//! [`RUN_LIMIT_S`] (a hang: killed) are findings. The child inherits the worker's
//! address-space limit, so a runaway allocation aborts instead of swapping.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::mutate::{self, Rng};
use super::{choose, Finding, Verdict};

/// Longest a run may take (every `plan` is given `--time-limit 2s`).
pub const RUN_LIMIT_S: f64 = 20.0;

/// The kinds of command-line input, one per case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    ClusterToml,
    ClusterArg,
    WorkloadCluster,
    Schedule,
    Export,
    HighsOption,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::ClusterToml => "cluster-toml",
            Kind::ClusterArg => "cluster-arg",
            Kind::WorkloadCluster => "workload-cluster",
            Kind::Schedule => "schedule",
            Kind::Export => "from-export",
            Kind::HighsOption => "highs-option",
        }
    }
}

/// A small chain with a backward pass: the workload most cases run on.
pub const CHAIN: &str = r#"{"maxSizePerFPGA": 1e9, "maxFPGAs": 2, "maxCPUs": 1,
 "nodes": [{"id": 1, "fpgaLatency": 1e9, "cpuLatency": 0.001, "size": 10},
           {"id": 2, "fpgaLatency": 5, "cpuLatency": 100, "size": 10},
           {"id": 3, "fpgaLatency": 5, "cpuLatency": 100, "size": 10},
           {"id": 4, "fpgaLatency": 4.97, "cpuLatency": 100, "size": 10},
           {"id": 5, "fpgaLatency": 2, "cpuLatency": 3, "size": 10}],
 "edges": [{"sourceId": 1, "destId": 2, "cost": 0.5}, {"sourceId": 2, "destId": 3, "cost": 0.25},
           {"sourceId": 3, "destId": 4, "cost": 1}, {"sourceId": 4, "destId": 5, "cost": 0},
           {"sourceId": 2, "destId": 5, "cost": 0.25}]}"#;

const CLUSTER_TOML: [&str; 3] = [
    "cpu_price_per_hour = 0.5\nnetwork = { bytes_per_s = 12.5e9, latency_ms = 0.02 }\n\n[[machines]]\nname = \"box\"\ncount = 2\ncpus = 2\nhost = { bytes_per_s = 31.5e9, latency_ms = 0.01 }\npeer = { bytes_per_s = 300e9 }\naccelerators = [{ profile = \"a100-80gb\", count = 2 }, { profile = \"v100\", count = 1, memory = \"16GiB\", price_per_hour = 2.5, speed = 0.5 }]\n",
    "[[machines]]\naccelerators = [{ profile = \"v100\", count = 2 }]\n\n[[machines]]\ncpus = 4\npeer = \"none\"\naccelerators = [{ profile = \"h100\", count = 1 }]\n",
    "[[machines]]\ncount = 1\ncpus = 1\nnetwork = { bytes_per_s = 1e9 }\naccelerators = [{ profile = \"v100\", count = 1, memory = 1e9, speed = 1, price_per_hour = 1 }]\n",
];

const CLUSTER_ARGS: [&str; 5] = [
    "1x2xv100",
    "2x8xa100-80gb+1x4xv100",
    "8xh100",
    "1x4xa100-80gb+1x4xv100",
    "3x1xv100+1x2xa100-80gb",
];

const SCHEDULES: [&str; 6] = [
    "gpipe",
    "1f1b",
    "interleaved:2",
    "interleaved:4",
    "zero-bubble",
    "1f1b:4",
];

const HIGHS_NAMES: [&str; 12] = [
    "presolve",
    "threads",
    "time_limit",
    "mip_rel_gap",
    "mip_max_nodes",
    "output_flag",
    "solver",
    "parallel",
    "random_seed",
    "mip_feasibility_tolerance",
    "no_such_option",
    "simplex_strategy",
];

const HIGHS_VALUES: [&str; 16] = [
    "off",
    "on",
    "choose",
    "maybe",
    "-5",
    "0",
    "1",
    "100000",
    "1e308",
    "-1e308",
    "nan",
    "true",
    "false",
    "2147483648",
    "0.5",
    "ipm",
];

/// The binary under test.
pub fn binary() -> PathBuf {
    std::env::var_os("DNNPLACE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/dnnplace")
        })
}

/// Files every case may use: the chain, a decoder stack, its plan and an export of it in
/// every format (made once by the binary itself).
pub struct Fixtures {
    pub dir: tempfile::TempDir,
    pub exports: Vec<(String, Vec<u8>)>,
}

impl Fixtures {
    pub fn new() -> Fixtures {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = |name: &str| dir.path().join(name);
        let _ = std::fs::write(path("chain.json"), CHAIN);
        let run = |args: &[&str]| {
            Command::new(binary())
                .args(args)
                .current_dir(dir.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| o.stdout)
        };
        run(&[
            "generate",
            "transformer",
            "--style",
            "llama",
            "--layers",
            "4",
            "--hidden",
            "64",
            "--heads",
            "4",
            "--accelerators",
            "2",
            "--cpus",
            "0",
            "--out",
            "stack.json",
        ]);
        run(&[
            "plan",
            "stack.json",
            "--split-at",
            "layer",
            "--out",
            "stack-plan.json",
        ]);
        let mut exports = Vec::new();
        for format in [
            "torch",
            "torch-json",
            "deepspeed",
            "megatron",
            "vllm",
            "accelerate",
        ] {
            if let Some(text) = run(&[
                "export",
                "--workload",
                "stack.json",
                "stack-plan.json",
                "--format",
                format,
            ]) {
                exports.push((format.to_string(), text));
            }
        }
        Fixtures { dir, exports }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

static FIXTURES: std::sync::OnceLock<Fixtures> = std::sync::OnceLock::new();

/// The fixtures of this process, made on first use.
pub fn fixtures() -> &'static Fixtures {
    FIXTURES.get_or_init(Fixtures::new)
}

/// A `--cluster` short form: a seed term list mutated by term (huge or zero counts, unknown
/// profiles, missing parts, separators).
fn cluster_arg(r: &mut Rng) -> String {
    let mut terms: Vec<String> = choose(r, &CLUSTER_ARGS)
        .split('+')
        .map(String::from)
        .collect();
    for _ in 0..1 + r.below(3) {
        let i = r.below(terms.len() as u64) as usize;
        let count = choose(
            r,
            &[
                "0",
                "1",
                "255",
                "256",
                "100000",
                "1000000000000",
                "18446744073709551615",
                "99999999999999999999999",
                "-1",
                "1.5",
                "1e12",
                "",
            ],
        )
        .to_string();
        let parts: Vec<String> = terms[i].split('x').map(String::from).collect();
        terms[i] = match r.below(6) {
            0 => format!("{count}x{}", parts[1..].join("x")),
            1 if parts.len() == 3 => format!("{}x{count}x{}", parts[0], parts[2]),
            2 => format!(
                "{}x{}",
                parts[..parts.len() - 1].join("x"),
                choose(r, &["tpu", "", "v100x", "A100-80GB", "cpu-core"])
            ),
            3 => {
                let separator: &str = choose::<&str>(r, &["X", "xx", "*", ""]);
                terms[i].replace('x', separator)
            }
            4 => format!("{count}x{count}x{}", parts[parts.len() - 1]),
            _ => {
                let mut bytes = terms[i].clone().into_bytes();
                mutate::mutate_bytes(r, &mut bytes, &[]);
                String::from_utf8_lossy(&bytes).replace('\0', "")
            }
        };
    }
    if r.chance(0.2) {
        terms.push(String::new());
    }
    terms.join("+")
}

/// A mutated `--schedule` value.
fn schedule(r: &mut Rng) -> String {
    let base = *choose(r, &SCHEDULES);
    match r.below(5) {
        0 => base.to_string(),
        1 => format!(
            "interleaved:{}",
            choose(
                r,
                &[
                    "0",
                    "1",
                    "-1",
                    "100000",
                    "18446744073709551616",
                    "x",
                    "",
                    "2.5"
                ]
            )
        ),
        2 => format!("{base}:{}", choose(r, &["0", "3", "-2", "1e9"])),
        3 => base.to_uppercase(),
        _ => {
            let mut bytes = base.as_bytes().to_vec();
            mutate::mutate_bytes(r, &mut bytes, &[]);
            String::from_utf8_lossy(&bytes).replace('\0', "")
        }
    }
}

/// A workload whose `cluster` section is mutated (counts, links, speeds, memories).
fn workload_with_cluster(r: &mut Rng) -> Vec<u8> {
    let mut w: serde_json::Value = serde_json::from_str(CHAIN).expect("the chain parses");
    let machine = serde_json::json!({
        "count": 1, "cpus": 1, "host": {"bytes_per_s": 1e10}, "peer": "none",
        "network": {"bytes_per_s": 1e10},
        "accelerators": [{"profile": "v100", "count": 2, "memory": 1e10, "speed": 1, "price_per_hour": 1}]
    });
    w["cluster"] = serde_json::json!({"machines": [machine]});
    for _ in 0..1 + r.below(3) {
        let odd = || -> Vec<serde_json::Value> {
            vec![
                serde_json::json!(0),
                serde_json::json!(-1),
                serde_json::json!(1e12),
                serde_json::json!(1_000_000_000_000u64),
                serde_json::json!(u64::MAX),
                serde_json::json!(1e-300),
                serde_json::json!(1e308),
                serde_json::json!(2.5),
                serde_json::json!("7"),
                serde_json::json!(null),
                serde_json::json!(256),
            ]
        };
        let values = odd();
        let value = choose(r, &values).clone();
        // By JSON pointer: an earlier mutation may have turned an object into something else.
        let at = match r.below(9) {
            0 => "/cluster/machines/0/count",
            1 => "/cluster/machines/0/cpus",
            2 => "/cluster/machines/0/accelerators/0/count",
            3 => "/cluster/machines/0/accelerators/0/speed",
            4 => "/cluster/machines/0/accelerators/0/memory",
            5 => "/cluster/machines/0/host/bytes_per_s",
            6 => "/cluster/machines/0/network/latency_ms",
            7 => "/nodes/0/fpgaLatency",
            _ => {
                mutate::mutate_value(r, &mut w);
                continue;
            }
        };
        if let Some(x) = w.pointer_mut(at) {
            *x = value;
        }
    }
    serde_json::to_vec(&w).expect("a value serialises")
}

/// Builds the case: its arguments (`{input}` stands for the file holding `input`) and
/// input, and the kind's name for the report.
pub fn make(r: &mut Rng, kind: Kind) -> (Vec<String>, Vec<u8>) {
    let fixtures_exports = &fixtures().exports;
    let plan_or_score = |r: &mut Rng, w: &str| -> Vec<String> {
        if r.chance(0.75) {
            let method = *choose(r, &["auto", "dp", "ip", "greedy", "brute-force"]);
            vec!["plan".into(), w.into(), "--method".into(), method.into()]
        } else {
            vec!["score".into(), w.into(), "{chain-plan}".into()]
        }
    };
    let (mut args, input): (Vec<String>, Vec<u8>) = match kind {
        Kind::ClusterToml => {
            let mut text = choose(r, &CLUSTER_TOML).to_string();
            for _ in 0..1 + r.below(3) {
                text = mutate::mutate_toml(r, &text);
            }
            let mut args = plan_or_score(r, "{chain}");
            args.extend(["--cluster".into(), "{input}.toml".into()]);
            (args, text.into_bytes())
        }
        Kind::ClusterArg => {
            let mut args = plan_or_score(r, "{chain}");
            args.extend(["--cluster".into(), cluster_arg(r)]);
            (args, Vec::new())
        }
        Kind::WorkloadCluster => (plan_or_score(r, "{input}"), workload_with_cluster(r)),
        Kind::Schedule => (
            vec![
                "plan".into(),
                "{chain}".into(),
                "--schedule".into(),
                schedule(r),
                "--micro-batches".into(),
                choose(r, &["1", "4", "8"]).to_string(),
            ],
            Vec::new(),
        ),
        Kind::Export => {
            let formats = [
                "torch",
                "torch-json",
                "deepspeed",
                "megatron",
                "vllm",
                "accelerate",
            ];
            let format = *choose(r, &formats);
            let mut text = if fixtures_exports.is_empty() || r.chance(0.1) {
                Vec::new()
            } else {
                choose(r, fixtures_exports).1.clone()
            };
            for _ in 0..r.below(3) {
                mutate::mutate_bytes(r, &mut text, &[]);
            }
            if r.chance(0.3) {
                mutate::replace_number(r, &mut text);
            }
            (
                vec![
                    "score".into(),
                    "{stack}".into(),
                    "--from-export".into(),
                    format.into(),
                    "{input}".into(),
                ],
                text,
            )
        }
        Kind::HighsOption => {
            let mut args = vec![
                "plan".into(),
                "{chain}".into(),
                "--method".into(),
                "ip".into(),
            ];
            for _ in 0..1 + r.below(2) {
                // Half the time a pair HiGHS takes, so that the IP runs with it.
                let option = if r.chance(0.5) {
                    choose(
                        r,
                        &[
                            "presolve=off",
                            "threads=100000",
                            "mip_rel_gap=0.5",
                            "random_seed=7",
                            "time_limit=1",
                        ],
                    )
                    .to_string()
                } else {
                    format!("{}={}", choose(r, &HIGHS_NAMES), choose(r, &HIGHS_VALUES))
                };
                args.extend(["--highs-option".into(), option]);
            }
            (args, Vec::new())
        }
    };
    if args[0] == "plan" {
        args.extend(["--time-limit".into(), "2s".into()]);
    }
    (args, input)
}

/// Runs the binary on a case (module documentation for the oracle).
pub fn run(args: &[String], input: &[u8]) -> Result<Verdict, Finding> {
    let fixtures = fixtures();
    let file = tempfile::Builder::new()
        .tempfile_in(fixtures.dir.path())
        .map_err(|e| Finding(format!("no temporary file: {e}")))?;
    let base = file.path().display().to_string();
    let toml = format!("{base}.toml");
    let _ = std::fs::write(file.path(), input);
    if args.iter().any(|a| a == "{input}.toml") {
        let _ = std::fs::write(&toml, input);
    }
    if !Path::new(&fixtures.path("chain-plan.json")).exists() {
        let _ = Command::new(binary())
            .args([
                "plan",
                &fixtures.path("chain.json"),
                "--out",
                &fixtures.path("chain-plan.json"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let args: Vec<String> = args
        .iter()
        .map(|a| {
            a.replace("{input}.toml", &toml)
                .replace("{input}", &base)
                .replace("{chain-plan}", &fixtures.path("chain-plan.json"))
                .replace("{chain}", &fixtures.path("chain.json"))
                .replace("{stack}", &fixtures.path("stack.json"))
        })
        .collect();
    let mut child = Command::new(binary())
        .args(&args)
        .env("RAYON_NUM_THREADS", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Finding(format!("cannot run {}: {e}", binary().display())))?;
    // Read stderr as it comes (a full pipe would stall the child).
    let mut pipe = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    });
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| Finding(e.to_string()))? {
            break s;
        }
        if started.elapsed().as_secs_f64() > RUN_LIMIT_S {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_file(&toml);
            return Err(Finding(format!(
                "hang: no answer within {RUN_LIMIT_S} s (killed): {}",
                args.join(" ")
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let _ = std::fs::remove_file(&toml);
    let stderr = reader.join().unwrap_or_default();
    let last = stderr
        .lines()
        .find(|l| l.starts_with("error:") || l.starts_with("thread '"))
        .or_else(|| stderr.lines().rev().find(|l| !l.trim().is_empty()))
        .unwrap_or("")
        .to_string();
    match status.code() {
        Some(0) | Some(1) => Ok(Verdict::Accepted),
        Some(2) if !last.is_empty() => Ok(Verdict::Rejected(last)),
        Some(2) => Err(Finding(format!(
            "exit 2 without a message: {}",
            args.join(" ")
        ))),
        Some(3) => Err(Finding(format!("exit 3: {last}: {}", args.join(" ")))),
        Some(101) => Err(Finding(format!("panic: {last}: {}", args.join(" ")))),
        Some(c) => Err(Finding(format!("exit {c}: {last}: {}", args.join(" ")))),
        None => Err(Finding(format!(
            "abort: killed by a signal ({}): {}",
            last,
            args.join(" ")
        ))),
    }
}

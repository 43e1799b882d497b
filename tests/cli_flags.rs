//! Flags and counts at their extremes (issue #11): every count and flag is checked once,
//! a value out of range exits 2 naming the flag and the range, and counts past what a plan
//! can use are clamped with a note, for every method. The reproducers of the issue, each
//! of which used to panic, abort or run out of memory, are here as they were reported.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn dnnplace(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dnnplace"))
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write(dir: &Path, name: &str, json: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, json).unwrap();
    path
}

/// The workload of issue #11 whose `maxFPGAs` is 2⁶³ (`(k+1)(ℓ+1)` used to wrap).
const HUGE_K: &str = r#"{"maxSizePerFPGA":1,"maxFPGAs":9223372036854775808,"maxCPUs":1,"nodes":[{"id":1,"fpgaLatency":1,"cpuLatency":1}],"edges":[]}"#;

/// A chain of four nodes on two accelerators and a CPU.
const CHAIN: &str = r#"{"maxSizePerFPGA":100,"maxFPGAs":2,"maxCPUs":1,"nodes":[
  {"id":1,"fpgaLatency":2,"cpuLatency":9,"size":10},{"id":2,"fpgaLatency":3,"cpuLatency":7,"size":10},
  {"id":3,"fpgaLatency":1,"cpuLatency":8,"size":10},{"id":4,"fpgaLatency":2,"cpuLatency":6,"size":10}],
  "edges":[{"sourceId":1,"destId":2,"cost":0.5},{"sourceId":2,"destId":3,"cost":0.5},{"sourceId":3,"destId":4,"cost":0.5}]}"#;

fn succeeds(args: &[&str]) -> (String, String) {
    let run = dnnplace(args);
    let (out, err) = (text(&run.stdout), text(&run.stderr));
    assert_eq!(
        run.status.code(),
        Some(0),
        "{args:?}\nstdout: {out}\nstderr: {err}"
    );
    (out, err)
}

fn fails_with(args: &[&str], needles: &[&str]) {
    let run = dnnplace(args);
    let err = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{args:?}: {err}");
    for needle in needles {
        assert!(
            err.contains(needle),
            "{args:?}: expected '{needle}' in: {err}"
        );
    }
}

#[test]
fn a_device_count_of_two_to_the_63_is_clamped_for_every_method() {
    let dir = tempfile::tempdir().unwrap();
    let w = write(dir.path(), "w.json", HUGE_K);
    let w = w.to_str().unwrap();
    for method in [
        "dp",
        "ip",
        "pipedream",
        "pipedream-topo",
        "local-search",
        "partitioner",
        "greedy",
        "single",
        "brute-force",
    ] {
        let (out, err) = succeeds(&["plan", w, "--method", method, "--json"]);
        assert!(
            err.contains("9223372036854775808 accelerators for 1 node")
                && err.contains("planned with 1"),
            "{method}: {err}"
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["maxLoad"], 1.0, "{method}");
    }
    let (out, _) = succeeds(&["compare", w, "--ip-time-limit", "10s"]);
    assert!(out.contains("dp") && !out.contains("error"), "{out}");
}

#[test]
fn a_billion_accelerators_is_the_same_as_one_per_node() {
    let dir = tempfile::tempdir().unwrap();
    let w = write(dir.path(), "w.json", CHAIN);
    let w = w.to_str().unwrap();
    let (reference, _) = succeeds(&["plan", w, "--accelerators", "4", "--json"]);
    let reference: serde_json::Value = serde_json::from_str(&reference).unwrap();
    for args in [
        vec!["plan", w, "--accelerators", "1000000000"],
        vec![
            "plan",
            w,
            "--method",
            "pipedream",
            "--accelerators",
            "1000000000",
        ],
        vec![
            "plan",
            w,
            "--method",
            "ip",
            "--accelerators",
            "1000000000",
            "--time-limit",
            "10s",
        ],
    ] {
        let mut json = args.clone();
        json.push("--json");
        let (out, err) = succeeds(&json);
        assert!(
            err.contains("1000000000 accelerators for 4 nodes"),
            "{args:?}: {err}"
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        if args.len() == 4 {
            // The DP is exact: the same optimum as with four accelerators.
            assert_eq!(v["maxLoad"], reference["maxLoad"]);
        }
    }
    // maxFPGAs of a billion in the file itself: the DP used to give "more than 0 ideals".
    let big = write(
        dir.path(),
        "big.json",
        &CHAIN.replace(r#""maxFPGAs":2"#, r#""maxFPGAs":1000000000"#),
    );
    let (out, _) = succeeds(&["plan", big.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["outcome"].as_str(), v["maxLoad"].clone()),
        (Some("optimal"), reference["maxLoad"].clone())
    );
}

#[test]
fn huge_piece_counts_are_clamped_for_the_latency_ip() {
    let dir = tempfile::tempdir().unwrap();
    let w = write(dir.path(), "w.json", CHAIN);
    let w = w.to_str().unwrap();
    for pieces in ["18446744073709551615", "100000"] {
        let (out, err) = succeeds(&[
            "plan",
            w,
            "--method",
            "ip",
            "--objective",
            "latency",
            "--pieces",
            pieces,
            "--time-limit",
            "20s",
            "--json",
        ]);
        assert!(
            err.contains(&format!("{pieces} pieces per accelerator for 4 nodes")),
            "{err}"
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["valid"], true);
    }
    fails_with(
        &[
            "plan",
            w,
            "--method",
            "ip",
            "--objective",
            "latency",
            "--pieces",
            "0",
        ],
        &["--pieces 0 is out of range"],
    );
}

#[test]
fn a_million_threads_are_clamped_to_the_cores() {
    let dir = tempfile::tempdir().unwrap();
    let w = write(dir.path(), "w.json", CHAIN);
    let (_, err) = succeeds(&[
        "plan",
        w.to_str().unwrap(),
        "--method",
        "ip",
        "--threads",
        "1000000",
        "--time-limit",
        "10s",
    ]);
    assert!(
        err.contains("--threads 1000000 is more than the") && err.contains("cores of this machine"),
        "{err}"
    );
    fails_with(
        &[
            "plan",
            w.to_str().unwrap(),
            "--method",
            "ip",
            "--threads",
            "0",
        ],
        &["--threads 0 is out of range"],
    );
}

#[test]
fn time_limits_beyond_31_years_exit_2_and_no_method_panics() {
    let dir = tempfile::tempdir().unwrap();
    let w = write(dir.path(), "w.json", CHAIN);
    let w = w.to_str().unwrap();
    fails_with(
        &[
            "plan",
            w,
            "--method",
            "local-search",
            "--time-limit",
            "1e99s",
        ],
        &["--time-limit 1e99 s is out of range", "1e9 s"],
    );
    fails_with(
        &["compare", w, "--ip-time-limit", "1e99s"],
        &["--ip-time-limit 1e99 s is out of range"],
    );
    fails_with(
        &["plan", w, "--time-limit", "0s"],
        &["--time-limit 0 s is out of range"],
    );
    // The library itself takes such a limit as no limit.
    let workload = dnnplace::io::read_workload(Path::new(w)).unwrap();
    let limits = dnnplace::solve::Limits {
        time_limit_s: Some(1e99),
        ..Default::default()
    };
    let problem = dnnplace::solve::Problem {
        workload: &workload,
        devices: dnnplace::solve::Devices::of(&workload),
        objective: dnnplace::solve::Objective::Throughput,
        contiguous: false,
        limits,
        pipeline: None,
    };
    let plan = dnnplace::solve::plan(
        &dnnplace::solve::baselines::local_search::LocalSearch,
        &problem,
    )
    .unwrap();
    assert!(plan.evaluation.unwrap().is_valid());
}

#[test]
fn out_of_range_flags_name_the_flag_and_the_range() {
    let dir = tempfile::tempdir().unwrap();
    let w = write(dir.path(), "w.json", CHAIN);
    let w = w.to_str().unwrap();
    fails_with(
        &["plan", w, "--restarts", "0"],
        &["--restarts 0 is out of range (1 to 1000000)"],
    );
    fails_with(
        &["plan", w, "--max-ideals", "0"],
        &["--max-ideals 0 is out of range (1 to 4294967295)"],
    );
    fails_with(
        &["plan", w, "--max-ideals", "1e10"],
        &["--max-ideals 10000000000 is out of range", "32 bits"],
    );
    fails_with(
        &["plan", w, "--method", "ip", "--gap", "150%"],
        &["--gap 1.5 is out of range (0 to 1)"],
    );
    fails_with(&["plan", w, "--accelerators=-1"], &["'-1' is not a count"]);
    fails_with(&["plan", w, "--seed", "1e99"], &["'1e99' is too large"]);
    fails_with(
        &["reproduce", dir.path().to_str().unwrap(), "--jobs", "0"],
        &["--jobs 0 is out of range (1 to 1024)"],
    );
    fails_with(
        &["import", "/nonexistent/model.onnx", "--batch", "0"],
        &["--batch 0 is out of range (1 to 1048576)"],
    );
    fails_with(
        &["generate", "transformer", "--layers", "0"],
        &["--layers 0 is out of range (1 to 10000)"],
    );
    fails_with(
        &["generate", "transformer", "--hidden", "1e9"],
        &["--hidden 1000000000 is out of range"],
    );
    fails_with(
        &["plan", w, "--ip-experiment", "magic"],
        &["unknown IP experiment 'magic'", "boundafter"],
    );
    // Counts are whole numbers in any notation.
    succeeds(&["plan", w, "--max-ideals", "1e6", "--restarts", "1_000"]);
}

#[test]
fn a_capped_ideal_limit_is_reported_not_silent() {
    let dir = tempfile::tempdir().unwrap();
    // 20 independent nodes have 2^20 ideals; with 20 accelerators and 20 CPUs the DP's
    // memory budget holds about 223,000 of them, fewer than the 1e8 asked for.
    let nodes: Vec<String> = (0..20)
        .map(|i| format!(r#"{{"id":{i},"fpgaLatency":1,"cpuLatency":5}}"#))
        .collect();
    let json = format!(
        r#"{{"maxSizePerFPGA":1e9,"maxFPGAs":20,"maxCPUs":20,"nodes":[{}],"edges":[]}}"#,
        nodes.join(",")
    );
    let w = write(dir.path(), "wide.json", &json);
    fails_with(
        &[
            "plan",
            w.to_str().unwrap(),
            "--method",
            "dp",
            "--max-ideals",
            "1e8",
        ],
        &[
            "the DP's memory budget of",
            "holds for this many devices",
            "fewer than the 100000000 allowed (--max-ideals)",
        ],
    );
}

#[test]
fn non_contiguous_methods_imply_non_contiguous_and_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let w = write(dir.path(), "w.json", CHAIN);
    for method in ["local-search", "partitioner"] {
        let (out, err) = succeeds(&["plan", w.to_str().unwrap(), "--method", method, "--json"]);
        assert!(
            err.contains(&format!("{method} only makes non-contiguous plans")),
            "{err}"
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert!(
            v["notes"].to_string().contains("as with --non-contiguous"),
            "{}",
            v["notes"]
        );
        assert_eq!(
            (v["outcome"].as_str(), v["stopReason"].is_null()),
            (Some("heuristic"), true)
        );
    }
}

#[test]
fn a_solver_stopped_at_once_is_not_infeasible() {
    let dir = tempfile::tempdir().unwrap();
    let w = write(dir.path(), "w.json", CHAIN);
    let w = w.to_str().unwrap();
    // No DP plan (--max-ideals 1) and HiGHS stopped at once: the greedy plan the IP holds
    // (its warm start) comes back, with why the search stopped and the gap.
    let base = [
        "plan",
        w,
        "--method",
        "ip",
        "--non-contiguous",
        "--max-ideals",
        "1",
    ];
    for (option, why) in [
        ("time_limit=0", "(time limit)"),
        ("mip_max_nodes=0", "(HiGHS reached its node limit)"),
    ] {
        let (out, _) = succeeds(&[&base[..], &["--highs-option", option]].concat());
        let status = out.lines().next().unwrap_or_default();
        assert!(
            status.contains("status: feasible, gap") && status.contains(why),
            "{option}: {out}"
        );
    }
    let infeasible = write(
        dir.path(),
        "tight.json",
        &CHAIN
            .replace(r#""maxCPUs":1"#, r#""maxCPUs":0"#)
            .replace(r#""maxSizePerFPGA":100"#, r#""maxSizePerFPGA":15"#),
    );
    fails_with(
        &[
            "plan",
            infeasible.to_str().unwrap(),
            "--method",
            "ip",
            "--non-contiguous",
        ],
        &["no feasible placement"],
    );
}

/// 8 parallel chains of 5 nodes on 4 accelerators: 6⁸ = 1,679,616 ideals, seconds of DP.
fn parallel_chains(dir: &Path) -> PathBuf {
    let nodes: Vec<String> = (0..40)
        .map(|i| format!(r#"{{"id":{i},"fpgaLatency":1,"cpuLatency":10,"size":1}}"#))
        .collect();
    let edges: Vec<String> = (0..8)
        .flat_map(|c| {
            (1..5).map(move |t| {
                format!(
                    r#"{{"sourceId":{},"destId":{},"cost":0.1}}"#,
                    c * 5 + t - 1,
                    c * 5 + t
                )
            })
        })
        .collect();
    let json = format!(
        r#"{{"maxSizePerFPGA":1e9,"maxFPGAs":4,"maxCPUs":1,"nodes":[{}],"edges":[{}]}}"#,
        nodes.join(","),
        edges.join(",")
    );
    write(dir, "chains.json", &json)
}

#[test]
fn the_memory_budget_is_a_checked_flag_that_stops_the_dp() {
    let dir = tempfile::tempdir().unwrap();
    let w = parallel_chains(dir.path());
    let w = w.to_str().unwrap();
    fails_with(
        &["plan", w, "--memory-budget", "1KiB"],
        &["--memory-budget 1.00 KiB is out of range (1 MiB to 1 PiB)"],
    );
    fails_with(
        &["plan", w, "--memory-budget", "lots"],
        &["not a byte count"],
    );
    fails_with(
        &["plan", w, "--method", "dp", "--memory-budget", "64MiB"],
        &["the DP's memory budget of 0.06 GiB", "1679616"],
    );
}

#[test]
fn ctrl_c_stops_the_dp_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let w = parallel_chains(dir.path());
    let args = ["plan", w.to_str().unwrap(), "--method", "dp"];
    let (run, took) = common::interrupted_run(
        std::process::Command::new(env!("CARGO_BIN_EXE_dnnplace")).args(args),
        std::time::Duration::from_millis(1500),
    );
    let took = took.as_secs_f64();
    let err = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{err}");
    assert!(
        err.contains("dp stopped without a plan: interrupted"),
        "{err}"
    );
    // Generous for a loaded 2-core machine; the DP checks between blocks of 256 ideals.
    assert!(took < 10.0, "answered after {took} s");
}

#[test]
fn metis_warnings_never_reach_stdout() {
    // Zero-weight nodes without edges and more parts than METIS can bisect: METIS prints
    // "***Cannot bisect a graph with 0 vertices!" with printf and goes on. Standard output
    // carries the JSON report, so it must parse.
    let dir = tempfile::tempdir().unwrap();
    let nodes: Vec<String> = (1..=200)
        .map(|i| format!(r#"{{"id":{i},"fpgaLatency":0,"cpuLatency":1,"size":0}}"#))
        .collect();
    let json = format!(
        r#"{{"maxSizePerFPGA":1e9,"maxFPGAs":150,"maxCPUs":3,"nodes":[{}],"edges":[]}}"#,
        nodes.join(",")
    );
    let w = write(dir.path(), "flat.json", &json);
    let (out, _) = succeeds(&[
        "plan",
        w.to_str().unwrap(),
        "--method",
        "partitioner",
        "--non-contiguous",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["valid"].as_bool(), Some(true), "{out}");
}

/// The commands listed by `help` (name, description), without `help` itself.
fn listed_commands(help: &str) -> Vec<(String, String)> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| {
            let (name, about) = l.trim().split_once(' ')?;
            Some((name.to_string(), about.trim().to_string()))
        })
        .filter(|(name, _)| name != "help")
        .collect()
}

/// Each command's flags are added to clap's command only when it is parsed (`defer`, for
/// start-up time): a flattened flag struct's doc comment would then become the command's
/// description. Every command's `-h` (and every `generate` model's) opens with its line of
/// the command list, `--version` and `--help` exit 0, and a usage error exits 2.
#[test]
fn every_command_keeps_its_description_and_clap_statuses() {
    let (list, _) = succeeds(&["--help"]);
    let commands = listed_commands(&list);
    assert!(commands.len() >= 10, "{list}");
    let (generate, _) = succeeds(&["generate", "--help"]);
    let models = listed_commands(&generate);
    assert!(models.len() >= 3, "{generate}");
    let runs = commands
        .iter()
        .map(|(name, about)| (vec![name.as_str()], about))
        .chain(
            models
                .iter()
                .map(|(name, about)| (vec!["generate", name.as_str()], about)),
        );
    for (mut args, about) in runs {
        args.push("-h");
        let (help, _) = succeeds(&args);
        assert_eq!(
            help.lines().next(),
            Some(about.as_str()),
            "{args:?}:\n{help}"
        );
    }
    let (version, _) = succeeds(&["--version"]);
    assert!(version.starts_with("dnnplace "), "{version}");
    fails_with(&["plan", "--no-such-flag"], &["unexpected argument"]);
    fails_with(&["plan", "x.json", "--pieces", "-1"], &["--pieces"]);
    fails_with(&["generate", "gpt", "--layers", "-1"], &["--layers"]);
}

//! `plan CONFIG.json --parallel 3d` through the binary: the JSON contract (the fields every
//! plan carries, the stage rows) checked against the formulas of docs/parallel.md
//! recomputed here from the stage rows; a fixed layout never beats the free search; the
//! written `--out` file equals the printed JSON; bad flags and inputs exit 2 naming the
//! flag; an infeasible memory exits 2 without writing a file.

use std::process::{Command, Output};

const LLAMA_70B: &str = "examples/hf/llama-3-70b.json";

fn dnnplace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dnnplace"))
}

fn plan(extra: &[&str]) -> Output {
    dnnplace()
        .args([
            "plan",
            LLAMA_70B,
            "--parallel",
            "3d",
            "--cluster",
            "4x8xh100",
            "--seq",
            "2048",
        ])
        .args(extra)
        .output()
        .unwrap()
}

fn json_of(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn num(v: &serde_json::Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

#[test]
fn the_json_carries_the_contract_and_adds_up() {
    let v = json_of(&plan(&[
        "--global-batch",
        "64",
        "--objective",
        "iteration",
        "--json",
    ]));
    for key in [
        "value",
        "bound",
        "gap",
        "outcome",
        "stopReason",
        "optimal",
        "stages",
        "iterationMs",
    ] {
        assert!(v.get(key).is_some(), "{key} missing");
    }
    assert_eq!(v["outcome"], "optimal");
    assert_eq!(v["optimal"], true);
    assert!(v["stopReason"].is_null());
    assert_eq!(num(&v, "value"), num(&v, "bound"));
    let stages = v["stages"].as_array().unwrap();
    // Every unit once, in order: embeddings, 80 blocks, head.
    let layers: Vec<String> = stages
        .iter()
        .flat_map(|s| {
            s["layers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_str().unwrap().to_string())
        })
        .collect();
    assert_eq!(layers.len(), 82);
    assert_eq!(layers[0], "embeddings");
    assert_eq!(layers[41], "layers.40");
    assert_eq!(layers[81], "head");
    // Devices: disjoint, t·d each, within the 32 accelerators.
    let mut seen = std::collections::BTreeSet::new();
    for s in stages {
        let devices = s["devices"].as_array().unwrap();
        let (t, d) = (
            num(s, "tensorParallel") as usize,
            num(s, "dataParallel") as usize,
        );
        assert_eq!(devices.len(), t * d);
        for x in devices {
            assert!(seen.insert(x.as_u64().unwrap()));
        }
        // Memory adds up and fits an H100 (80 GiB).
        let parts = [
            "weightBytes",
            "gradientBytes",
            "optimizerBytes",
            "activationBytes",
        ];
        let sum: f64 = parts.iter().map(|k| num(s, k)).sum();
        assert!((sum - num(s, "memoryBytes")).abs() <= 1e-6 * sum);
        assert!(num(s, "memoryBytes") <= 80.0 * 1024f64.powi(3));
        let time = ["computeMs", "tensorParallelMs", "transferMs", "gatherMs"];
        let t_s: f64 = time.iter().map(|k| num(s, k)).sum();
        assert!((t_s - num(s, "microBatchTimeMs")).abs() <= 1e-9 * t_s);
    }
    assert!(*seen.last().unwrap() < 32);
    // The iteration: Σ T + (m − 1)·max T + max sync.
    let t: Vec<f64> = stages.iter().map(|s| num(s, "microBatchTimeMs")).collect();
    let m = num(&stages[0], "microBatches");
    let sync = stages
        .iter()
        .map(|s| num(s, "dpSyncMs"))
        .fold(0.0, f64::max);
    let max = t.iter().copied().fold(0.0, f64::max);
    let iteration = t.iter().sum::<f64>() + (m - 1.0) * max + sync;
    assert!((iteration - num(&v, "iterationMs")).abs() <= 1e-9 * iteration);
    assert!((iteration - num(&v, "value")).abs() <= 1e-9 * iteration);
    let b = num(&v, "microBatch");
    let d = num(&stages[0], "dataParallel");
    assert_eq!(m * b * d, 64.0);
}

#[test]
fn a_fixed_layout_never_beats_the_search_and_keeps_what_was_fixed() {
    let free = json_of(&plan(&[
        "--global-batch",
        "64",
        "--objective",
        "iteration",
        "--json",
    ]));
    let fixed = json_of(&plan(&[
        "--global-batch",
        "64",
        "--objective",
        "iteration",
        "--json",
        "--tensor-parallel",
        "8",
        "--pipeline-parallel",
        "4",
        "--data-parallel",
        "1",
        "--micro-batch",
        "1",
        "--zero",
        "0",
        "--recompute",
        "none",
    ]));
    assert!(num(&fixed, "value") >= num(&free, "value"));
    let stages = fixed["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 4);
    assert!(stages
        .iter()
        .all(|s| s["tensorParallel"] == 8 && s["dataParallel"] == 1));
    assert_eq!(fixed["zero"], 0);
    assert_eq!(fixed["recompute"], false);
    assert_eq!(fixed["microBatch"], 1);
    // The throughput objective is the time per sample.
    let tps = json_of(&plan(&["--global-batch", "64", "--json"]));
    assert_eq!(tps["objective"], "time-per-sample");
    assert!(
        (num(&tps, "value") - num(&tps, "timePerSampleMs")).abs() <= 1e-12 * num(&tps, "value")
    );
}

#[test]
fn out_writes_the_printed_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("layout.json");
    let printed = json_of(&plan(&[
        "--global-batch",
        "32",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]));
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let strip = |mut v: serde_json::Value| {
        v.as_object_mut().unwrap().remove("timeS");
        v.as_object_mut().unwrap().remove("peakMemoryBytes");
        v
    };
    assert_eq!(strip(printed), strip(written));
    // No plan, no file.
    let none = dir.path().join("none.json");
    let o = plan(&[
        "--global-batch",
        "32",
        "--memory",
        "1GiB",
        "--out",
        none.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("no feasible layout"));
    assert!(!none.exists());
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&[], "--global-batch"),
        (&["--global-batch", "0"], "--global-batch 0"),
        (
            &["--global-batch", "64", "--tensor-parallel", "3"],
            "--tensor-parallel 3",
        ),
        (
            &["--global-batch", "64", "--tensor-parallel", "x"],
            "--tensor-parallel 'x'",
        ),
        (
            &["--global-batch", "64", "--data-parallel", "0"],
            "--data-parallel '0'",
        ),
        (&["--global-batch", "64", "--zero", "4"], "--zero '4'"),
        (
            &["--global-batch", "64", "--micro-batch", "5"],
            "--micro-batch '5'",
        ),
        (
            &["--global-batch", "64", "--pipeline-parallel", "0"],
            "--pipeline-parallel '0'",
        ),
        // 80 blocks are not 4·3 equal chunks (interleaving plans Megatron-LM's even split).
        (
            &[
                "--global-batch",
                "64",
                "--schedule",
                "interleaved:3",
                "--pipeline-parallel",
                "4",
            ],
            "--schedule interleaved:3",
        ),
        (&["--global-batch", "64", "--method", "dp"], "--method"),
        (
            &["--global-batch", "64", "--objective", "latency"],
            "--objective latency",
        ),
        (
            &["--global-batch", "64", "--export", "torch"],
            "--export torch",
        ),
    ];
    for (flags, named) in cases {
        let o = plan(flags);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {err}");
        assert!(
            err.contains(named),
            "{flags:?}: '{err}' does not name {named}"
        );
    }
    let o = dnnplace()
        .args(["plan", LLAMA_70B, "--parallel", "3d", "--global-batch", "8"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--cluster"));
    let o = dnnplace()
        .args([
            "plan",
            LLAMA_70B,
            "--parallel",
            "3d",
            "--global-batch",
            "8",
            "--cluster",
            "1x8xh100+1x8xa100-80gb",
            "--objective",
            "iteration",
            "--free",
            "--export",
            "megatron",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--export does not apply to --free: frameworks run uniform layouts"),
        "{err}"
    );
    let o = dnnplace()
        .args([
            "plan",
            "examples/bert-tiny.json",
            "--parallel",
            "3d",
            "--global-batch",
            "8",
            "--cluster",
            "1x8xh100",
        ])
        .output()
        .unwrap();
    // An inference workload JSON: the 3D planner prices training (tests/parallel_workload.rs
    // plans training workloads).
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no backward node"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = dnnplace()
        .args(["plan", "examples/bert-tiny.json", "--tensor-parallel", "2"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--parallel 3d"));
}

#[test]
fn a_spent_time_limit_still_answers() {
    let o = plan(&["--global-batch", "64", "--json", "--time-limit", "1ms"]);
    let v = json_of(&o);
    assert!(num(&v, "bound") <= num(&v, "value"));
    assert!(
        ["optimal", "feasible"].contains(&v["outcome"].as_str().unwrap()),
        "{}",
        v["outcome"]
    );
    if v["outcome"] == "feasible" {
        assert_eq!(v["stopReason"], "time-limit");
        assert!(num(&v, "gap") > 0.0);
    }
}

#[test]
fn the_sweep_never_gets_worse_with_more_gpus_and_ends_at_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("sweep.svg");
    let v = json_of(&plan(&[
        "--global-batch",
        "64",
        "--objective",
        "iteration",
        "--json",
        "--sweep",
        "--plot",
        svg.to_str().unwrap(),
    ]));
    let rows = v["rows"].as_array().unwrap();
    let counts: Vec<u64> = rows
        .iter()
        .map(|r| r["devices"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [1, 2, 4, 8, 16, 32]);
    let mut last = f64::INFINITY;
    for r in rows {
        if r["value"].is_null() {
            assert!(
                last.is_infinite(),
                "a row without a plan after one with a plan"
            );
            continue;
        }
        // More GPUs is a larger space: the optimum never grows.
        assert!(num(r, "value") <= last * (1.0 + 1e-12));
        assert!(num(r, "devicesUsed") <= num(r, "devices"));
        last = num(r, "value");
    }
    let single = json_of(&plan(&[
        "--global-batch",
        "64",
        "--objective",
        "iteration",
        "--json",
    ]));
    assert!((last - num(&single, "value")).abs() <= 1e-9 * last);
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
}

/// `--target-tps` gives the fewest GPUs whose best layout meets the target: the plan found
/// meets it, and the same search capped one GPU below does not; `--budget` caps the GPUs at
/// what the price buys; a target nothing meets exits 2 without writing `--out`.
#[test]
fn target_tps_and_budget_on_3d_plans() {
    let whole = json_of(&plan(&["--global-batch", "64", "--json"]));
    let target = num(&whole, "value") * 1.5;
    let t = target.to_string();
    let found = json_of(&plan(&[
        "--global-batch",
        "64",
        "--target-tps",
        &t,
        "--json",
    ]));
    let n = found["target"]["devices"].as_u64().unwrap() as usize;
    assert_eq!(found["target"]["proven"], true);
    assert!(num(&found, "value") <= target);
    assert!(num(&found, "devicesUsed") as usize <= n);
    // One GPU fewer: the best layout misses the target (checked by a capped plain search:
    // 4x8 is 32 GPUs; --budget at the h100 price times n − 1 caps the search there).
    let h100_price = {
        let out = dnnplace()
            .args(["devices", "--show", "h100"])
            .output()
            .unwrap();
        let profile: toml::Table = String::from_utf8_lossy(&out.stdout).parse().unwrap();
        profile["price_per_hour"].as_float().expect("h100 price")
    };
    if n > 1 {
        let budget = (h100_price * (n as f64 - 1.0) + h100_price / 2.0).to_string();
        let capped = plan(&["--global-batch", "64", "--budget", &budget, "--json"]);
        let capped = json_of(&capped);
        assert!((num(&capped, "devicesUsed") as usize) < n);
        assert!(num(&capped, "value") > target, "{} GPUs meet it", n - 1);
    }
    let dir = std::env::temp_dir().join(format!("dnnplace-target-3d-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out_file = dir.join("plan.json");
    let tiny = (num(&whole, "value") * 0.5).to_string();
    let out = plan(&[
        "--global-batch",
        "64",
        "--target-tps",
        &tiny,
        "--out",
        out_file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no layout of the cluster meets it"));
    assert!(!out_file.exists());
    let out = plan(&["--global-batch", "64", "--budget", "0.01"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("buys no accelerator"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--report` on a 3D plan: the page's layout view has every device of the cluster exactly
/// once, in its machine's row, labelled with the stage, replica and TP rank that the plan's
/// JSON (`--out`) gives it (its position in the stage's device list: TP innermost); the
/// per-stage table and the simulation's figures are there.
#[test]
fn the_report_shows_every_device_once_with_its_stage() {
    let dir = tempfile::tempdir().unwrap();
    let (html, out) = (dir.path().join("r.html"), dir.path().join("plan.json"));
    let o = dnnplace()
        .args([
            "plan",
            LLAMA_70B,
            "--parallel",
            "3d",
            "--cluster",
            "3x8xh100",
            "--seq",
            "2048",
            "--global-batch",
            "64",
            "--tensor-parallel",
            "2",
            "--data-parallel",
            "2",
            "--report",
        ])
        .arg(&html)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let page = std::fs::read_to_string(&html).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let per = v["cluster"]["perMachine"].as_u64().unwrap() as usize;
    let machines = v["cluster"]["machines"].as_u64().unwrap() as usize;
    // Device -> (stage, replica, rank) from the JSON.
    let mut owner = vec![None; per * machines];
    let stages = v["stages"].as_array().unwrap();
    assert!(stages.len() > 1);
    for (s, st) in stages.iter().enumerate() {
        let t = st["tensorParallel"].as_u64().unwrap() as usize;
        for (i, dev) in st["devices"].as_array().unwrap().iter().enumerate() {
            let k = dev.as_u64().unwrap() as usize;
            assert!(owner[k].is_none(), "device {k} in two stages");
            owner[k] = Some((s, i / t, i % t));
        }
    }
    assert!(owner.iter().filter(|x| x.is_some()).count() >= 8);
    let rows: Vec<&str> = page
        .split("<tr><th>m")
        .skip(1)
        .filter(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(rows.len(), machines, "one row per machine");
    for (k, who) in owner.iter().enumerate() {
        let key = format!("data-device=\"{k}\"");
        assert_eq!(page.matches(&key).count(), 1, "device {k}");
        let row = rows[k / per];
        assert!(
            row.starts_with(&format!("{}</th>", k / per)),
            "device {k}'s row"
        );
        let cell = &row[row.find(&key).expect("in its machine's row")..];
        let label = &cell[cell.find('>').unwrap() + 1..cell.find("</td>").unwrap()];
        let want = match who {
            Some((s, r, j)) => format!("S{s} · r{r} · tp{j}"),
            None => "idle".to_string(),
        };
        assert_eq!(label, want, "device {k}");
    }
    assert!(page.contains("<th>micro-batch ms</th>"));
    assert_eq!(
        page.matches("<tr><td>").count(),
        stages.len(),
        "one stage row each"
    );
    let sim = &v["simulation"];
    assert!(sim["iterationMs"].as_f64().unwrap() >= sim["pipelineMs"].as_f64().unwrap());
    assert!(!page.contains("<script"));
}

/// `--free`: per-stage `t` and `d` in the JSON's stages, the same fields as a uniform plan,
/// never worse than the uniform plan of the same flags, stages packed within the cluster;
/// the flags it does not take exit 2 naming them.
#[test]
fn free_layouts_through_the_binary() {
    let flags = ["--global-batch", "64", "--json", "--time-limit", "60"];
    let uniform = json_of(&plan(&flags));
    let free = json_of(&plan(&[&flags[..], &["--free"]].concat()));
    assert_eq!(free["uniform"], false);
    assert_eq!(uniform["uniform"], true);
    for key in [
        "value",
        "bound",
        "gap",
        "outcome",
        "stages",
        "microBatch",
        "zero",
    ] {
        assert!(!free[key].is_null(), "{key} missing in {free}");
    }
    assert!(num(&free, "value") <= num(&uniform, "value") * (1.0 + 1e-12));
    assert!(num(&free, "bound") <= num(&free, "value"));
    let mut next = 0;
    for st in free["stages"].as_array().unwrap() {
        let (t, d) = (
            num(st, "tensorParallel") as usize,
            num(st, "dataParallel") as usize,
        );
        let devices = st["devices"].as_array().unwrap();
        assert_eq!(devices.len(), t * d);
        let first = devices[0].as_u64().unwrap() as usize;
        assert!(first >= next && first.is_multiple_of(t), "{st}");
        next = first + t * d;
    }
    assert!(next <= 32);
    assert_eq!(free["valueFrom"], "model");
    for (extra, name) in [
        (&["--export", "megatron"][..], "--export"),
        (&["--uniform"][..], "--uniform"),
    ] {
        let out = plan(&[&["--global-batch", "64", "--free"][..], extra].concat());
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(name) || err.contains("--free"), "{err}");
    }
}

/// `plan llama-3-8b --parallel 3d` on `2x8xh100` (`B` 64), with `extra`.
fn llama_8b(extra: &[&str]) -> Output {
    dnnplace()
        .args(["plan", "examples/hf/llama-3-8b.json", "--parallel", "3d"])
        .args(["--cluster", "2x8xh100", "--global-batch", "64"])
        .args(["--time-limit", "600"])
        .args(extra)
        .output()
        .unwrap()
}

/// The keys of a JSON object, sorted.
fn keys(v: &serde_json::Value) -> Vec<String> {
    let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

/// `--free --sweep`: the rows 1, 2, 4, 8, 16 with the uniform sweep's fields (one contract),
/// each with its value, bound and gap, never worse than the uniform row of the same count
/// nor than the row before, the last the `--free` plan itself; the table has the bound and
/// gap columns and the SVG is written. `--free --target-tps`: the fewest GPUs, proven, with
/// no open count, and the free plan on one GPU fewer (`--budget`) misses it; a target no
/// layout meets exits 2 without writing `--out`; `--free --budget` buys the GPUs it caps.
#[test]
fn free_sweep_target_and_budget() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("sweep.svg");
    let free = json_of(&llama_8b(&[
        "--free",
        "--sweep",
        "--json",
        "--plot",
        svg.to_str().unwrap(),
    ]));
    let uniform = json_of(&llama_8b(&["--sweep", "--json"]));
    assert_eq!(free["uniform"], false);
    assert_eq!(uniform["uniform"], true);
    assert_eq!(keys(&free), keys(&uniform));
    let (rows, urows) = (
        free["rows"].as_array().unwrap(),
        uniform["rows"].as_array().unwrap(),
    );
    let counts: Vec<u64> = rows
        .iter()
        .map(|r| r["devices"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [1, 2, 4, 8, 16]);
    let mut last = f64::INFINITY;
    for (r, u) in rows.iter().zip(urows) {
        assert_eq!(r["uniform"], false, "{r}");
        assert_eq!(r["devices"], u["devices"]);
        if r["value"].is_null() {
            assert!(u["value"].is_null(), "uniform has a plan, free not: {u}");
            assert!(
                last.is_infinite(),
                "a row without a plan after one with a plan"
            );
            continue;
        }
        let common: Vec<String> = keys(u).into_iter().filter(|k| r.get(k).is_none()).collect();
        assert!(common.is_empty(), "free row lacks {common:?}");
        assert!(num(r, "bound") <= num(r, "value") * (1.0 + 1e-12), "{r}");
        assert!(num(r, "gap") >= 0.0 && r["timeS"].is_number(), "{r}");
        if !u["value"].is_null() {
            assert!(
                num(r, "value") <= num(u, "value") * (1.0 + 1e-12),
                "{r} vs {u}"
            );
        }
        assert!(num(r, "value") <= last * (1.0 + 1e-12));
        assert!(num(r, "devicesUsed") <= num(r, "devices"));
        last = num(r, "value");
    }
    let single = json_of(&llama_8b(&["--free", "--json"]));
    assert!((last - num(&single, "value")).abs() <= 1e-9 * last);
    let page = std::fs::read_to_string(&svg).unwrap();
    assert!(page.contains("<svg") && page.contains("Best free layout"));
    let table = llama_8b(&["--free", "--sweep"]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(table.status.success());
    assert!(text.contains("best free layout per GPU count"), "{text}");
    assert!(text.contains("bound ms") && text.contains("gap"), "{text}");

    // --target-tps: a target between the 8- and 16-GPU rows' values.
    let target = (num(&rows[3], "value") + num(&rows[4], "value")) / 2.0;
    let found = json_of(&llama_8b(&[
        "--free",
        "--target-tps",
        &target.to_string(),
        "--json",
    ]));
    let n = found["target"]["devices"].as_u64().unwrap() as usize;
    assert!(n > 8 && n <= 16, "{found}");
    assert_eq!(found["target"]["proven"], true);
    assert!(found["target"]["open"].is_null(), "{found}");
    assert_eq!(found["uniform"], false);
    assert!(num(&found, "value") <= target);
    let h100 = {
        let out = dnnplace()
            .args(["devices", "--show", "h100"])
            .output()
            .unwrap();
        let profile: toml::Table = String::from_utf8_lossy(&out.stdout).parse().unwrap();
        profile["price_per_hour"].as_float().expect("h100 price")
    };
    // --budget: the price of n − 1 GPUs and a half caps the free search at n − 1 GPUs.
    let budget = (h100 * (n as f64 - 1.0) + h100 / 2.0).to_string();
    let capped = llama_8b(&["--free", "--budget", &budget, "--json"]);
    let note = String::from_utf8_lossy(&capped.stderr).to_string();
    let capped = json_of(&capped);
    assert!(note.contains(&format!("buys {}", n - 1)), "{note}");
    assert_eq!(capped["uniform"], false);
    assert!((num(&capped, "devicesUsed") as usize) < n);
    assert!(num(&capped, "value") > target, "{} GPUs meet it", n - 1);
    let out_file = dir.path().join("plan.json");
    let tiny = (last * 0.5).to_string();
    let missed = llama_8b(&[
        "--free",
        "--target-tps",
        &tiny,
        "--out",
        out_file.to_str().unwrap(),
    ]);
    assert_eq!(missed.status.code(), Some(2));
    let err = String::from_utf8_lossy(&missed.stderr);
    assert!(err.contains("no layout of the cluster meets it"), "{err}");
    assert!(String::from_utf8_lossy(&missed.stdout).contains("proven: its bound"));
    assert!(!out_file.exists());
}

/// `--free` with `--sweep` and `--target-tps` on two types: whole machines in the cluster's
/// order (rows of 4 and 8 GPUs, the first on H100 alone), each free row no worse than the
/// uniform row of the same count; the fewest machines meeting the whole cluster's free
/// optimum, proven; under `--objective iteration` the rows are the simulator's searches,
/// each with its bound and gap.
#[test]
fn free_sweep_and_target_on_two_types() {
    let free = json_of(&on_two_types(&["--free", "--sweep", "--json"]));
    let uniform = json_of(&on_two_types(&["--sweep", "--json"]));
    let rows = free["rows"].as_array().unwrap();
    let counts: Vec<u64> = rows
        .iter()
        .map(|r| r["devices"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [4, 8]);
    for s in rows[0]["stages"].as_array().unwrap() {
        assert_eq!(s["accelerator"], "h100", "{s}");
    }
    for (r, u) in rows.iter().zip(uniform["rows"].as_array().unwrap()) {
        assert_eq!(r["uniform"], false);
        assert!(
            num(r, "value") <= num(u, "value") * (1.0 + 1e-12),
            "{r} vs {u}"
        );
        assert!(num(r, "bound") <= num(r, "value") * (1.0 + 1e-12), "{r}");
    }
    let target = num(&rows[1], "value");
    let want = if num(&rows[0], "value") <= target {
        4
    } else {
        8
    };
    let found = json_of(&on_two_types(&[
        "--free",
        "--json",
        "--target-tps",
        &target.to_string(),
    ]));
    assert_eq!(found["target"]["devices"], want, "{found}");
    assert_eq!(found["target"]["proven"], true);
    assert!(found["target"]["open"].is_null());
    // Under the iteration: each row the simulator's search, with its own bound and gap
    // (the mixed iteration search may end with a gap; the row says so), the last row the
    // plan of the whole cluster.
    let it = ["--free", "--objective", "iteration", "--json"];
    let sweep = json_of(&on_two_types(&[&it[..], &["--sweep"]].concat()));
    let whole = json_of(&on_two_types(&it));
    let rows = sweep["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        assert_eq!(r["valueFrom"], "simulation", "{r}");
        assert!(num(r, "bound") <= num(r, "value") * (1.0 + 1e-12), "{r}");
        assert!(num(r, "gap") >= 0.0 && !r["status"].is_null(), "{r}");
    }
    assert!((num(&rows[1], "value") - num(&whole, "value")).abs() <= 1e-9 * num(&whole, "value"));
}

/// `plan llama-3-8b --parallel 3d` on one machine of 4 H100 and one of 4 A100-80GB
/// (`--seq 1024`, `B` 8), with `extra`.
fn on_two_types(extra: &[&str]) -> Output {
    dnnplace()
        .args(["plan", "examples/hf/llama-3-8b.json", "--parallel", "3d"])
        .args(["--cluster", "1x4xh100+1x4xa100-80gb", "--seq", "1024"])
        .args(["--global-batch", "8", "--time-limit", "600"])
        .args(extra)
        .output()
        .unwrap()
}

/// Checks that every stage of a plan [`on_two_types`] lies on its type's machines (devices
/// numbered group by group: 0–3 H100, 4–7 A100) and returns the largest stage's
/// `(m·T + sync)/B`, recomputed from the rows.
fn worst_stage_on_two_types(stages: &[serde_json::Value]) -> f64 {
    let mut worst: f64 = 0.0;
    for s in stages {
        let range = match s["accelerator"].as_str().unwrap() {
            "h100" => 0..4,
            "a100-80gb" => 4..8,
            other => panic!("type {other}"),
        };
        for d in s["devices"].as_array().unwrap() {
            assert!(range.contains(&(d.as_u64().unwrap() as usize)), "{s}");
        }
        worst = worst
            .max((num(s, "microBatches") * num(s, "microBatchTimeMs") + num(s, "dpSyncMs")) / 8.0);
    }
    worst
}

/// Uniform layouts on two accelerator types: every stage has one `t × d`, lies on its
/// type's machines, the value is the largest stage's `(m·T + sync)/B` recomputed from the
/// rows, it is proven, and the free layouts of the same cluster are no worse.
#[test]
fn uniform_layouts_on_two_types_share_one_degree_pair() {
    let run = on_two_types;
    let v = json_of(&run(&["--json"]));
    assert_eq!(v["outcome"], "optimal", "{v}");
    assert_eq!(v["uniform"], true, "{v}");
    let stages = v["stages"].as_array().unwrap();
    let pair = |s: &serde_json::Value| (s["tensorParallel"].clone(), s["dataParallel"].clone());
    assert!(stages.iter().all(|s| pair(s) == pair(&stages[0])), "{v}");
    let worst = worst_stage_on_two_types(stages);
    assert!(
        (worst - num(&v, "value")).abs() <= 1e-9 * worst,
        "{worst} vs {v}"
    );
    let free = json_of(&run(&["--free", "--json"]));
    assert!(
        num(&free, "value") <= num(&v, "value") * (1.0 + 1e-9),
        "{free} vs {v}"
    );
}

/// `--export` on two types: each of the four formats carries the node-rank table (node
/// rank 0 on the H100 machine, 1 on the A100 one, each with its type's stages), and `score
/// --from-export` of the file on the same cluster gives the plan's value and stages
/// (devices and types).
#[test]
fn exports_on_two_types_round_trip_with_their_node_ranks() {
    let file =
        |f: &str| std::env::temp_dir().join(format!("dnnplace-mx-{f}-{}.txt", std::process::id()));
    for format in ["megatron", "deepspeed", "torchtitan", "vllm"] {
        let path = file(format);
        let planned = json_of(&on_two_types(&[
            "--json",
            "--export",
            format,
            "--export-out",
            path.to_str().unwrap(),
        ]));
        let text = std::fs::read_to_string(&path).unwrap();
        // The plan's own stages give the rows the table must hold.
        let stages = planned["stages"].as_array().unwrap();
        for (node, ty) in [(0, "h100"), (1, "a100-80gb")] {
            let held: Vec<String> = stages
                .iter()
                .enumerate()
                .filter(|(_, s)| s["accelerator"] == ty)
                .map(|(i, _)| i.to_string())
                .collect();
            let row = format!(
                "# node-rank {node}: machine {ty}:0 ({ty}), stages {}\n",
                held.join(",")
            );
            assert!(text.contains(&row), "{format}: no '{row}' in\n{text}");
        }
        let mut score = dnnplace();
        score
            .args(["score", "examples/hf/llama-3-8b.json", "--parallel", "3d"])
            .args([
                "--cluster",
                "1x4xh100+1x4xa100-80gb",
                "--seq",
                "1024",
                "--json",
            ]);
        if format == "vllm" {
            let b = planned["microBatch"].to_string();
            score.args(["--global-batch", "8", "--micro-batch", &b]);
        }
        let scored = json_of(
            &score
                .arg("--from-export")
                .arg(format)
                .arg(&path)
                .output()
                .unwrap(),
        );
        std::fs::remove_file(&path).ok();
        assert_eq!(
            scored["value"], planned["value"],
            "{format}: {scored} vs {planned}"
        );
        let place = |v: &serde_json::Value| -> Vec<(serde_json::Value, serde_json::Value)> {
            v["stages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| (s["accelerator"].clone(), s["devices"].clone()))
                .collect()
        };
        assert_eq!(place(&scored), place(&planned), "{format}");
    }
}

/// `--export` on two types is refused (exit 2, no file) when torchrun's equal ranks per
/// node cannot place the layout: `d = 3` gives two stages of 3 GPUs, 6 ranks on machines of
/// 4. A file without the node-rank table is refused by `score` on two types.
#[test]
fn exports_on_two_types_refuse_what_torchrun_cannot_place() {
    let path = std::env::temp_dir().join(format!("dnnplace-mx-refused-{}.txt", std::process::id()));
    let o = dnnplace()
        .args(["plan", "examples/hf/llama-3-8b.json", "--parallel", "3d"])
        .args(["--cluster", "1x4xh100+1x4xa100-80gb", "--seq", "1024"])
        .args([
            "--global-batch",
            "6",
            "--data-parallel",
            "3",
            "--export",
            "megatron",
        ])
        .arg("--export-out")
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cannot export to megatron: the layout runs 6 ranks, not a whole number of machines of 4 accelerators"),
        "{err}"
    );
    assert!(!path.exists());
    std::fs::write(
        &path,
        "--tensor-model-parallel-size 1 --pipeline-model-parallel-size 8 --num-layers 32 --micro-batch-size 1 --global-batch-size 8\n",
    )
    .unwrap();
    let o = dnnplace()
        .args(["score", "examples/hf/llama-3-8b.json", "--parallel", "3d"])
        .args(["--cluster", "1x4xh100+1x4xa100-80gb", "--seq", "1024"])
        .args(["--from-export", "megatron"])
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_file(&path).ok();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("the file has no node-rank table"), "{err}");
}

/// On two types `--sweep` counts whole machines in the cluster's order (the first machine,
/// then both): rows of 4 and 8 GPUs, the first on H100 alone, the last the plan itself, never
/// worse with more machines; `--target-tps` gives the fewest machines meeting a target
/// (exit 2 when none does); `--budget` buys the first machines in order (exit 2 when it
/// buys none).
#[test]
fn sweep_target_and_budget_on_two_types() {
    let whole = json_of(&on_two_types(&["--json"]));
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("sweep.svg");
    let sweep = json_of(&on_two_types(&[
        "--json",
        "--sweep",
        "--plot",
        svg.to_str().unwrap(),
    ]));
    let rows = sweep["rows"].as_array().unwrap();
    let counts: Vec<u64> = rows
        .iter()
        .map(|r| r["devices"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, [4, 8]);
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
    for s in rows[0]["stages"].as_array().unwrap() {
        assert_eq!(s["accelerator"], "h100", "{s}");
    }
    assert!((num(&rows[1], "value") - num(&whole, "value")).abs() <= 1e-9 * num(&whole, "value"));
    assert!(num(&rows[1], "value") <= num(&rows[0], "value"));
    // A target only both machines meet, if the two rows differ; else one machine.
    let target = num(&rows[1], "value");
    let want = if num(&rows[0], "value") <= target {
        4
    } else {
        8
    };
    let found = json_of(&on_two_types(&[
        "--json",
        "--target-tps",
        &target.to_string(),
    ]));
    assert_eq!(found["target"]["devices"], want, "{found}");
    assert_eq!(found["target"]["proven"], true);
    let missed = on_two_types(&["--target-tps", &(target * 0.5).to_string()]);
    assert_eq!(missed.status.code(), Some(2));
    // --budget: 1 % more than one H100 machine buys the first machine only.
    let h100 = {
        let out = dnnplace()
            .args(["devices", "--show", "h100"])
            .output()
            .unwrap();
        let profile: toml::Table = String::from_utf8_lossy(&out.stdout).parse().unwrap();
        profile["price_per_hour"].as_float().expect("h100 price")
    };
    let budget = (h100 * 4.0 * 1.01).to_string();
    let capped = on_two_types(&["--json", "--budget", &budget]);
    let note = String::from_utf8_lossy(&capped.stderr).to_string();
    let capped = json_of(&capped);
    assert!(
        note.contains("buys the cluster's first 1 machines"),
        "{note}"
    );
    assert!((num(&capped, "value") - num(&rows[0], "value")).abs() <= 1e-9 * num(&capped, "value"));
    let broke = on_two_types(&["--budget", "0.01"]);
    assert_eq!(broke.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&broke.stderr).contains("buys no machine"));
}

/// `--free --objective iteration`: a plan whose value is its simulated iteration (the
/// `--report`'s `simulation.iterationMs`), with the contract's fields, `valueFrom:
/// simulation`, a bound at most the value and at least `B` × the free per-sample bound.
#[test]
fn free_layouts_plan_the_simulated_iteration() {
    let dir = std::env::temp_dir().join(format!("dnnplace-free-iter-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report = dir.join("r.html");
    let flags = [
        "--global-batch",
        "64",
        "--json",
        "--time-limit",
        "60",
        "--free",
    ];
    let v = json_of(&plan(
        &[
            &flags[..],
            &[
                "--objective",
                "iteration",
                "--report",
                report.to_str().unwrap(),
            ],
        ]
        .concat(),
    ));
    for key in [
        "value",
        "bound",
        "gap",
        "outcome",
        "stopReason",
        "optimal",
        "status",
        "stages",
        "microBatch",
        "zero",
        "timePerSampleMs",
        "simulation",
    ] {
        assert!(v.get(key).is_some(), "{key} missing in {v}");
    }
    assert_eq!(v["objective"], "iteration");
    assert_eq!(v["uniform"], false);
    assert_eq!(v["valueFrom"], "simulation");
    let value = num(&v, "value");
    assert_eq!(value, num(&v["simulation"], "iterationMs"), "{v}");
    assert!(num(&v, "bound") <= value);
    // Every lane of a stage is busy m·T then syncs: the iteration is at least B × the time
    // per sample, and the bound at least B × the free per-sample bound.
    assert!(value >= 64.0 * num(&v, "timePerSampleMs") * (1.0 - 1e-12));
    let per_sample = json_of(&plan(&flags));
    assert!(num(&v, "bound") >= 64.0 * num(&per_sample, "bound") * (1.0 - 1e-9));
    assert!(matches!(
        v["outcome"].as_str(),
        Some("optimal" | "feasible")
    ));
    let text = plan(&[
        "--global-batch",
        "64",
        "--time-limit",
        "60",
        "--free",
        "--objective",
        "iteration",
    ]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("(the simulated iteration)"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--objective iteration` on two accelerator types, uniform and `--free`: a plan whose
/// JSON has the fields of the one-type iteration plan, `valueFrom: simulation`, every stage
/// on its type's machines, a bound at most the value and at least `B` × the per-sample
/// bound, the value at least `B` × the time per sample; uniform layouts keep one `t × d`,
/// and the free value is never above the uniform one.
#[test]
fn the_iteration_on_two_types_is_simulated_with_a_bound() {
    let one_type = json_of(&plan(&[
        "--global-batch",
        "64",
        "--time-limit",
        "5",
        "--json",
        "--free",
        "--objective",
        "iteration",
    ]));
    let mut plans = Vec::new();
    for free in [false, true] {
        let layouts: &[&str] = if free { &["--free"] } else { &[] };
        let v = json_of(&on_two_types(
            &[layouts, &["--objective", "iteration", "--json"]].concat(),
        ));
        let mut keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        let mut expected: Vec<&String> = one_type.as_object().unwrap().keys().collect();
        keys.sort();
        expected.sort();
        assert_eq!(keys, expected, "{v}");
        assert_eq!(v["objective"], "iteration");
        assert_eq!(v["valueFrom"], "simulation");
        assert_eq!(v["uniform"], !free);
        let stages = v["stages"].as_array().unwrap();
        worst_stage_on_two_types(stages);
        if !free {
            let pair =
                |s: &serde_json::Value| (s["tensorParallel"].clone(), s["dataParallel"].clone());
            assert!(stages.iter().all(|s| pair(s) == pair(&stages[0])), "{v}");
        }
        let (value, bound) = (num(&v, "value"), num(&v, "bound"));
        assert!(bound <= value * (1.0 + 1e-12), "{v}");
        assert!(
            value >= 8.0 * num(&v, "timePerSampleMs") * (1.0 - 1e-12),
            "{v}"
        );
        let per_sample = json_of(&on_two_types(&[layouts, &["--json"]].concat()));
        assert!(
            bound >= 8.0 * num(&per_sample, "bound") * (1.0 - 1e-9),
            "{v}"
        );
        assert!(matches!(
            v["outcome"].as_str(),
            Some("optimal" | "feasible")
        ));
        plans.push(value);
    }
    assert!(
        plans[1] <= plans[0] * (1.0 + 1e-12),
        "free {} above uniform {}",
        plans[1],
        plans[0]
    );
}

/// `--free` on two accelerator types: every stage names its type, lies on that type's
/// machines (devices numbered group by group: 0–3 H100, 4–7 A100), and the value is the
/// largest stage's `(m·T + sync)/B` recomputed from the rows; `--report` exits 2.
#[test]
fn free_layouts_on_two_types_name_each_stage_type() {
    let mixed = |extra: &[&str]| on_two_types(&[&["--free"], extra].concat());
    let v = json_of(&mixed(&["--json"]));
    assert_eq!(v["outcome"], "optimal", "{v}");
    let stages = v["stages"].as_array().unwrap();
    assert!(!stages.is_empty());
    let worst = worst_stage_on_two_types(stages);
    assert!(
        (worst - num(&v, "value")).abs() <= 1e-9 * worst,
        "{worst} vs {v}"
    );
    assert!((num(&v, "bound") - num(&v, "value")).abs() <= 1e-9 * worst);
    let text = String::from_utf8_lossy(&mixed(&[]).stdout).into_owned();
    assert!(text.contains("type") && text.contains("h100"), "{text}");
    let o = mixed(&["--report", "/tmp/never-written-mixed.html"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--report"));
    // One type: the stages carry the cluster's type too.
    let one = json_of(&plan(&["--global-batch", "8", "--json"]));
    assert!(one["stages"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["accelerator"] == "h100"));
}

/// `compare --parallel 3d`: the searches' rows are `plan`'s answers, the free optimum is no
/// worse than the uniform one, every layout by hand (a uniform layout of the space) is no
/// better than the uniform optimum, and the "TP in each machine, the rest PP" row is what
/// `score --from-export megatron` gives for the same Megatron-LM arguments (its reader's
/// split, not the comparison's).
#[test]
fn compare_runs_both_searches_and_the_layouts_by_hand() {
    let common = [
        "examples/hf/llama-3-8b.json",
        "--parallel",
        "3d",
        "--cluster",
        "4x8xh100",
        "--seq",
        "4096",
        "--global-batch",
        "256",
    ];
    let v = json_of(
        &dnnplace()
            .arg("compare")
            .args(common)
            .arg("--json")
            .output()
            .unwrap(),
    );
    let rows = v["rows"].as_array().unwrap();
    let entries: Vec<&str> = rows.iter().map(|r| r["entry"].as_str().unwrap()).collect();
    assert_eq!(
        entries,
        [
            "uniform",
            "free",
            "tp-machine-pp",
            "tp-machine-dp",
            "dp-zero3",
            "pp-only"
        ]
    );
    let planned = json_of(
        &dnnplace()
            .arg("plan")
            .args(common)
            .arg("--json")
            .output()
            .unwrap(),
    );
    assert_eq!(rows[0]["value"], planned["value"], "{}", rows[0]);
    assert_eq!(rows[0]["outcome"], "optimal");
    let free = json_of(
        &dnnplace()
            .arg("plan")
            .args(common)
            .args(["--free", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(rows[1]["value"], free["value"]);
    let uniform = num(&rows[0], "value");
    assert!(num(&rows[1], "value") <= uniform * (1.0 + 1e-9));
    for r in &rows[2..] {
        assert_eq!(r["outcome"], "heuristic", "{r}");
        assert!(num(r, "value") >= uniform * (1.0 - 1e-9), "{r}");
    }
    let hand = &rows[2];
    assert_eq!(hand["stages"].as_array().unwrap().len(), 4);
    let file = std::env::temp_dir().join(format!("dnnplace-compare-{}.sh", std::process::id()));
    std::fs::write(
        &file,
        "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 --num-layers 32 --micro-batch-size 1 --global-batch-size 256\n",
    )
    .unwrap();
    let scored = dnnplace()
        .args(["score", "examples/hf/llama-3-8b.json", "--parallel", "3d"])
        .args([
            "--cluster",
            "4x8xh100",
            "--seq",
            "4096",
            "--json",
            "--from-export",
            "megatron",
        ])
        .arg(&file)
        .output()
        .unwrap();
    std::fs::remove_file(&file).ok();
    let scored = json_of(&scored);
    assert_eq!(hand["value"], scored["value"], "{hand} vs {scored}");
    // The iteration objective: the free search's value is the simulated iteration.
    let it = json_of(
        &dnnplace()
            .arg("compare")
            .args(common)
            .args(["--objective", "iteration", "--time-limit", "20s", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(
        it["rows"][1]["valueFrom"], "simulation",
        "{}",
        it["rows"][1]
    );
    assert_eq!(it["rows"][0]["valueFrom"], "model", "{}", it["rows"][0]);
    // More devices than blocks: the layouts by hand keep one block per stage at least.
    let wide = json_of(
        &dnnplace()
            .args(["compare", "examples/hf/llama-3-8b.json", "--parallel", "3d"])
            .args([
                "--cluster",
                "8x8xh100",
                "--seq",
                "1024",
                "--global-batch",
                "64",
            ])
            .args(["--time-limit", "20s", "--json"])
            .output()
            .unwrap(),
    );
    for r in wide["rows"].as_array().unwrap() {
        assert!(r.get("error").is_none(), "{r}");
        assert!(r["stages"].as_array().unwrap().len() <= 32, "{r}");
    }
    // Nothing fits anywhere: every row says why, and the exit status is 2.
    let none = dnnplace()
        .arg("compare")
        .args(common)
        .args(["--memory", "1GiB"])
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&none.stdout).contains("does not fit"));
    // Flags of the plan road only are named.
    let o = dnnplace()
        .arg("compare")
        .args(common)
        .arg("--free")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--free does not apply"));
}

/// `plan llama-3-8b --parallel 3d` on `4x8xh100`, `--seq 4096 --global-batch 256
/// --objective iteration`, with `extra`.
fn llama_8b_iteration(extra: &[&str]) -> Output {
    dnnplace()
        .args(["plan", "examples/hf/llama-3-8b.json", "--parallel", "3d"])
        .args([
            "--cluster",
            "4x8xh100",
            "--seq",
            "4096",
            "--global-batch",
            "256",
        ])
        .args(["--objective", "iteration"])
        .args(extra)
        .output()
        .unwrap()
}

/// `--overlap-grad-reduce`: the JSON says so; the iteration is `Σ T + (m − 1)·max T +
/// max_s max(0, sync_s − b_s)` recomputed from the rows (`backwardMs` the stage's backward
/// pass), no worse than without the flag; the simulated iteration of `--report` is the
/// plan's last task; the Megatron-LM export writes the flag and `score --from-export`
/// reads it back to the plan's value; DeepSpeed refuses it, and without `--parallel 3d` it
/// is named.
#[test]
fn overlap_grad_reduce_through_the_binary() {
    let off = json_of(&llama_8b_iteration(&["--json"]));
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("megatron.sh");
    let on = json_of(&llama_8b_iteration(&[
        "--json",
        "--overlap-grad-reduce",
        "--export",
        "megatron",
        "--export-out",
        export.to_str().unwrap(),
    ]));
    assert_eq!(off["overlapGradReduce"], false);
    assert_eq!(on["overlapGradReduce"], true);
    let stages = on["stages"].as_array().unwrap();
    let t: Vec<f64> = stages.iter().map(|s| num(s, "microBatchTimeMs")).collect();
    let m = num(&stages[0], "microBatches");
    let exposed = stages
        .iter()
        .map(|s| (num(s, "dpSyncMs") - num(s, "backwardMs")).max(0.0))
        .fold(0.0, f64::max);
    let max = t.iter().copied().fold(0.0, f64::max);
    let iteration = t.iter().sum::<f64>() + (m - 1.0) * max + exposed;
    assert!((iteration - num(&on, "value")).abs() <= 1e-9 * iteration);
    assert!(stages.iter().any(|s| num(s, "dpSyncMs") > 0.0));
    assert!(stages.iter().all(|s| num(s, "backwardMs") > 0.0));
    assert!(num(&on, "value") <= num(&off, "value"), "{on} vs {off}");
    let text = std::fs::read_to_string(&export).unwrap();
    assert!(text.contains(" --overlap-grad-reduce\n"), "{text}");
    let scored = dnnplace()
        .args(["score", "examples/hf/llama-3-8b.json", "--parallel", "3d"])
        .args(["--cluster", "4x8xh100", "--seq", "4096", "--json"])
        .args(["--objective", "iteration", "--from-export", "megatron"])
        .arg(&export)
        .output()
        .unwrap();
    let scored = json_of(&scored);
    assert_eq!(scored["overlapGradReduce"], true);
    assert!((num(&scored, "value") - num(&on, "value")).abs() <= 1e-9 * num(&on, "value"));
    // The simulation of the plan with the flag.
    let report = dir.path().join("r.html");
    let sim = json_of(&llama_8b_iteration(&[
        "--json",
        "--overlap-grad-reduce",
        "--report",
        report.to_str().unwrap(),
    ]));
    let simulated = num(&sim["simulation"], "iterationMs");
    let pipeline = num(&sim["simulation"], "pipelineMs");
    assert!(simulated >= pipeline && simulated <= pipeline + exposed + 1e-9 * simulated);
    for (extra, flag) in [
        (&["--export", "deepspeed"][..], "--overlap-grad-reduce"),
        (&[][..], "--overlap-grad-reduce"),
    ] {
        let out = if extra.is_empty() {
            dnnplace()
                .args([
                    "plan",
                    "examples/hf/llama-3-8b.json",
                    "--overlap-grad-reduce",
                ])
                .output()
                .unwrap()
        } else {
            llama_8b_iteration(&[extra, &["--overlap-grad-reduce"]].concat())
        };
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag), "{err}");
    }
}

//! `plan` and `score` on a cluster through the binary: the optimum equals the cluster brute
//! force (the library's exhaustive search, an independent oracle) on small random clusters
//! given as a workload's cluster section and as `--cluster FILE`; the written plan scores
//! the same; a one-machine cluster equal to MODEL.md's device set gives MODEL.md's optimum;
//! `--method ip` (contiguous and `--non-contiguous`) gives brute force's optimum over its
//! plan space; flags that do not apply are refused with exit status 2; the cluster's JSON
//! carries every field of the one-machine JSON.

mod cluster_gen;
mod common;

use std::process::Command;

use cluster_gen::{random_cluster, random_clustered, ClusterShape};
use common::{random_workload, Shape};
use dnnplace::io::cluster_file::ClusterFile;
use dnnplace::io::workload_to_json;
use dnnplace::model::{Cluster, ClusterCosts, Platform, Reference};
use dnnplace::solve::cluster::brute_force::brute_force;
use dnnplace::solve::Objective;

fn dnnplace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dnnplace"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn plan_on_random_clusters_equals_brute_force_and_scores_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let (mut checked, mut infeasible) = (0, 0);
    for seed in 0..40u64 {
        let shape = Shape {
            max_nodes: 7,
            ..Default::default()
        };
        let Some(w) = random_workload(seed, shape)
            .and_then(|w| random_cluster(seed, &w, ClusterShape::default()))
        else {
            continue;
        };
        let costs = ClusterCosts::of(&w);
        let oracle = brute_force(&w, &costs, Objective::Throughput, true)
            .unwrap()
            .best;
        // Once with the cluster in the workload file, once with the cluster as a TOML file.
        let with_section = dir.path().join(format!("w{seed}.json"));
        std::fs::write(&with_section, workload_to_json(&w)).unwrap();
        let bare = dir.path().join(format!("bare{seed}.json"));
        let platform = Platform {
            cluster: None,
            ..w.platform().clone()
        };
        std::fs::write(&bare, workload_to_json(&w.with_platform(platform).unwrap())).unwrap();
        let toml = dir.path().join(format!("c{seed}.toml"));
        std::fs::write(
            &toml,
            ClusterFile::of_cluster(w.cluster().unwrap()).to_toml(),
        )
        .unwrap();
        let out = dir.path().join(format!("p{seed}.json"));
        let runs = [
            dnnplace()
                .arg("plan")
                .arg(&with_section)
                .arg("--json")
                .arg("--out")
                .arg(&out)
                .output()
                .unwrap(),
            dnnplace()
                .arg("plan")
                .arg(&bare)
                .arg("--cluster")
                .arg(&toml)
                .arg("--json")
                .output()
                .unwrap(),
        ];
        for run in runs {
            match &oracle {
                None => {
                    assert_eq!(
                        run.status.code(),
                        Some(2),
                        "seed {seed}: {}",
                        String::from_utf8_lossy(&run.stderr)
                    );
                    assert!(
                        String::from_utf8_lossy(&run.stderr).contains("no feasible placement"),
                        "seed {seed}"
                    );
                }
                Some((b, _)) => {
                    let v = json_of(&run);
                    let tps = v["tps"].as_f64().unwrap();
                    assert!(close(tps, *b), "seed {seed}: plan {tps}, brute force {b}");
                    assert_eq!(v["valid"], true);
                    assert_eq!(v["contiguous"], true);
                }
            }
        }
        if oracle.is_none() {
            infeasible += 1;
            continue;
        }
        let scored = json_of(
            &dnnplace()
                .arg("score")
                .arg(&with_section)
                .arg(&out)
                .arg("--json")
                .output()
                .unwrap(),
        );
        let file: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert!(
            close(
                scored["tps"].as_f64().unwrap(),
                file["maxLoad"].as_f64().unwrap()
            ),
            "seed {seed}"
        );
        assert_eq!(scored["valid"], true);
        let bf = json_of(
            &dnnplace()
                .arg("plan")
                .arg(&with_section)
                .arg("--method")
                .arg("brute-force")
                .arg("--json")
                .output()
                .unwrap(),
        );
        assert!(
            close(bf["tps"].as_f64().unwrap(), oracle.as_ref().unwrap().0),
            "seed {seed}"
        );
        checked += 1;
    }
    assert!(
        checked >= 15 && infeasible <= checked,
        "checked {checked}, infeasible {infeasible}"
    );
}

#[test]
fn one_machine_cluster_of_model_md_gives_model_md_optimum() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for seed in 100..120u64 {
        let Some(w) = random_workload(
            seed,
            Shape {
                max_nodes: 9,
                ..Default::default()
            },
        ) else {
            continue;
        };
        let path = dir.path().join(format!("w{seed}.json"));
        std::fs::write(&path, workload_to_json(&w)).unwrap();
        let toml = dir.path().join(format!("c{seed}.toml"));
        std::fs::write(
            &toml,
            ClusterFile::of_cluster(&Cluster::model_md(w.devices(), &Reference::paper())).to_toml(),
        )
        .unwrap();
        let old = dnnplace()
            .arg("plan")
            .arg(&path)
            .arg("--json")
            .output()
            .unwrap();
        let new = dnnplace()
            .arg("plan")
            .arg(&path)
            .arg("--cluster")
            .arg(&toml)
            .arg("--json")
            .output()
            .unwrap();
        if !old.status.success() {
            assert_eq!(new.status.code(), old.status.code(), "seed {seed}");
            continue;
        }
        let (old, new) = (json_of(&old), json_of(&new));
        assert_eq!(
            old["maxLoad"].as_f64().unwrap(),
            new["tps"].as_f64().unwrap(),
            "seed {seed}: to the last digit"
        );
        // One output contract: every field of the one-machine JSON, with the same values
        // where they are the plan's (the cluster adds its own, e.g. usage).
        for key in old.as_object().unwrap().keys() {
            assert!(
                new.get(key).is_some(),
                "seed {seed}: the cluster's JSON lacks {key}"
            );
        }
        for key in [
            "value",
            "maxLoad",
            "objective",
            "contiguous",
            "valid",
            "method",
            "status",
            "outcome",
            "optimal",
            "stopReason",
        ] {
            assert_eq!(old[key], new[key], "seed {seed}: {key}");
        }
        // The same fields per device too (the cluster adds machine, type and memory limit).
        for (a, b) in old["devices"]
            .as_array()
            .unwrap()
            .iter()
            .zip(new["devices"].as_array().unwrap())
        {
            for key in a.as_object().unwrap().keys() {
                assert!(
                    b.get(key).is_some(),
                    "seed {seed}: a cluster device lacks {key}"
                );
            }
        }
        assert_eq!(
            old["placement"]["maxLoad"], new["placement"]["maxLoad"],
            "seed {seed}"
        );
        checked += 1;
    }
    assert!(checked >= 10, "checked {checked}");
}

#[test]
fn the_worked_example_plans_and_scores() {
    // docs/cluster.md: the example split scores 10.7 ms (checked by hand there); the optimum
    // is at most that, and equals the brute force.
    let run = |args: &[&str]| json_of(&dnnplace().args(args).output().unwrap());
    let w = "examples/cluster/workload.json";
    let c = "examples/cluster/cluster.toml";
    let scored = run(&[
        "score",
        w,
        "examples/cluster/plan.json",
        "--cluster",
        c,
        "--json",
    ]);
    assert!(close(scored["tps"].as_f64().unwrap(), 10.7));
    let dp = run(&["plan", w, "--cluster", c, "--json"]);
    let bf = run(&[
        "plan",
        w,
        "--cluster",
        c,
        "--method",
        "brute-force",
        "--json",
    ]);
    let (a, b) = (dp["tps"].as_f64().unwrap(), bf["tps"].as_f64().unwrap());
    assert!(close(a, b) && a <= 10.7, "dp {a}, brute force {b}");
    let devices = dp["devices"].as_array().unwrap();
    assert!(devices
        .iter()
        .all(|d| d["machine"].is_string() && d["type"].is_string()));
}

#[test]
fn flags_that_do_not_apply_to_a_cluster_are_refused() {
    let w = "examples/cluster/workload.json";
    let c = "examples/cluster/cluster.toml";
    for (args, says) in [
        (
            vec!["plan", w, "--cluster", c, "--method", "greedy"],
            "--method is auto (the cluster DP), dp, ip, brute-force, rl or genetic, not greedy",
        ),
        (
            vec!["plan", w, "--cluster", c, "--non-contiguous"],
            "non-contiguous plans come from --method ip",
        ),
        (
            vec!["plan", w, "--cluster", c, "--objective", "latency"],
            "throughput",
        ),
        (
            vec!["plan", w, "--cluster", c, "--accelerators", "2"],
            "--accelerators",
        ),
        (vec!["plan", w, "--cluster", "2x4xnosuchgpu"], "nosuchgpu"),
        (vec!["plan", w, "--cluster", "2x0.5xv100"], "2x0.5xv100"),
        (
            vec!["plan", w, "--cluster", c, "--dtype", "fp16"],
            "model files",
        ),
        (
            vec!["plan", w, "--cluster", c, "--schedule", "1f1b"],
            "--schedule 1f1b",
        ),
    ] {
        let out = dnnplace().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn sweep_target_and_budget_through_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let (w, c) = (
        "examples/cluster/workload.json",
        "examples/cluster/cluster.toml",
    );
    let plot = dir.path().join("sweep.svg");
    let v = json_of(
        &dnnplace()
            .args(["plan", w, "--cluster", c, "--sweep", "--json", "--plot"])
            .arg(&plot)
            .output()
            .unwrap(),
    );
    let rows = v["sweep"].as_array().unwrap();
    assert_eq!(
        rows.len(),
        4,
        "one row per accelerator count of the cluster"
    );
    let tps: Vec<f64> = rows.iter().map(|r| r["tps"].as_f64().unwrap()).collect();
    assert!(
        tps.windows(2).all(|p| p[1] <= p[0]),
        "more devices never hurt: {tps:?}"
    );
    // With every accelerator allowed, the sweep's last row is the plain optimum.
    let best = json_of(
        &dnnplace()
            .args(["plan", w, "--cluster", c, "--json"])
            .output()
            .unwrap(),
    );
    assert!(close(tps[3], best["tps"].as_f64().unwrap()));
    let svg = std::fs::read_to_string(&plot).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert_eq!(
        doc.descendants()
            .filter(|n| n.has_tag_name("circle"))
            .count(),
        4
    );

    // Cheapest for the plain optimum's TPS: its plan, written and re-scored, meets the target.
    let target = best["tps"].as_f64().unwrap() * 1.000001;
    let out = dir.path().join("plan.json");
    let run = json_of(
        &dnnplace()
            .args([
                "plan",
                w,
                "--cluster",
                c,
                "--json",
                "--target-tps",
                &target.to_string(),
                "--out",
            ])
            .arg(&out)
            .output()
            .unwrap(),
    );
    let price = run["chosen"]["pricePerHour"].as_f64().unwrap();
    let scored = json_of(
        &dnnplace()
            .args(["score", w])
            .arg(&out)
            .args(["--cluster", c, "--json"])
            .output()
            .unwrap(),
    );
    assert!(scored["tps"].as_f64().unwrap() <= target && scored["valid"] == true);
    // A budget of that price buys at least that speed; a budget below every mix buys nothing.
    let run = json_of(
        &dnnplace()
            .args([
                "plan",
                w,
                "--cluster",
                c,
                "--json",
                "--budget",
                &price.to_string(),
            ])
            .output()
            .unwrap(),
    );
    assert!(run["chosen"]["tps"].as_f64().unwrap() <= target);
    let none = dnnplace()
        .args(["plan", w, "--cluster", c, "--target-tps", "0.001"])
        .output()
        .unwrap();
    assert!(
        none.status.success()
            && String::from_utf8_lossy(&none.stdout).contains("no mix of this cluster reaches")
    );
}

/// `--max-ideals 1` stops the cluster DP before its proof: the plan printed is the optimum
/// over one topological order's prefixes, status feasible with its stop reason, a lower
/// bound below the brute-force optimum and a plan value above it — unless the prefixes'
/// plan meets the lower bounds, which proves it optimal before any ideal is enumerated.
#[test]
fn plan_stopped_by_the_ideal_limit_prints_a_feasible_plan_with_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let (mut checked, mut proven) = (0, 0);
    for seed in 0..100u64 {
        let shape = Shape {
            max_nodes: 7,
            ..Default::default()
        };
        let Some(w) = random_workload(seed, shape)
            .and_then(|w| random_cluster(seed, &w, ClusterShape::default()))
        else {
            continue;
        };
        let Some((optimum, _)) =
            brute_force(&w, &ClusterCosts::of(&w), Objective::Throughput, true)
                .unwrap()
                .best
        else {
            continue;
        };
        let file = dir.path().join(format!("w{seed}.json"));
        std::fs::write(&file, workload_to_json(&w)).unwrap();
        let run = dnnplace()
            .arg("plan")
            .arg(&file)
            .arg("--json")
            .args(["--max-ideals", "1"])
            .output()
            .unwrap();
        if !run.status.success() {
            continue;
        }
        let v = json_of(&run);
        if v["outcome"] == "optimal" {
            // A plan over the prefixes met the lower bound: no ideal needed enumerating.
            let value = v["tps"].as_f64().unwrap();
            assert!(
                (value - optimum).abs() <= 1e-9 * optimum.max(1.0),
                "seed {seed}: proven {value}, brute force {optimum}"
            );
            proven += 1;
            continue;
        }
        assert_eq!(v["outcome"], "feasible", "seed {seed}: {v}");
        assert_eq!(v["stopReason"], "ideal-limit", "seed {seed}");
        let (bound, value) = (
            v["lowerBound"].as_f64().unwrap(),
            v["tps"].as_f64().unwrap(),
        );
        assert!(
            bound <= optimum * (1.0 + 1e-9) && value >= optimum * (1.0 - 1e-9),
            "seed {seed}: {bound} <= {optimum} <= {value}"
        );
        let text = dnnplace()
            .arg("plan")
            .arg(&file)
            .args(["--max-ideals", "1"])
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&text.stdout).contains("status: feasible, gap"),
            "seed {seed}"
        );
        checked += 1;
    }
    assert!(
        checked >= 10 && proven >= 10,
        "{checked} stopped, {proven} proven"
    );
}

/// `generate gpt|wide --cluster` stores the cluster in the file (it was priced on it and
/// then written without it): `plan` needs no `--cluster` again, and plans what
/// `plan --cluster` plans.
#[test]
fn generated_workloads_keep_their_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let spec = "1x2xa100-80gb+1x2xv100";
    for (kind, size) in [
        ("gpt", ["--layers", "2", "--hidden", "96"]),
        ("wide", ["--blocks", "2", "--branches", "2"]),
    ] {
        let file = dir.path().join(format!("{kind}.json"));
        let out = dnnplace()
            .args([
                "generate",
                kind,
                size[0],
                size[1],
                size[2],
                size[3],
                "--cluster",
                spec,
                "--out",
            ])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{kind}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert!(v["cluster"].is_object(), "{kind}: no cluster section");
        let stored = json_of(
            &dnnplace()
                .args(["plan", file.to_str().unwrap(), "--json"])
                .output()
                .unwrap(),
        );
        let devices = stored["devices"].as_array().unwrap();
        assert!(
            devices.iter().any(|d| d["type"] == "v100"),
            "{kind}: {stored}"
        );
        let given = json_of(
            &dnnplace()
                .args(["plan", file.to_str().unwrap(), "--cluster", spec, "--json"])
                .output()
                .unwrap(),
        );
        assert!(
            close(
                stored["tps"].as_f64().unwrap(),
                given["tps"].as_f64().unwrap()
            ),
            "{kind}"
        );
    }
}

/// The cluster DP checks its table against `--memory-budget` after every level: with a
/// budget it cannot keep, the plan still comes (the greedy chain's or the prefix DP's),
/// valid and with the DP's bound, and the reason names the table and the flag.
#[test]
fn the_cluster_dp_stops_at_the_memory_budget_with_a_plan() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gpt.json");
    let made = dnnplace()
        .args([
            "generate",
            "gpt",
            "--nodes",
            "2000",
            "--cluster",
            "1x4xa100-80gb+1x4xv100+1x4xh100",
            "--out",
        ])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let w = file.to_str().unwrap();
    let free = json_of(&dnnplace().args(["plan", w, "--json"]).output().unwrap());
    // About 10,200 states of the 2,000-operator graph's table on three types need more
    // than 1 MiB (its full table holds about 13,000 after the tail test).
    let tight = json_of(
        &dnnplace()
            .args(["plan", w, "--memory-budget", "1MiB", "--json"])
            .output()
            .unwrap(),
    );
    let text = tight.to_string();
    assert_eq!(tight["stopReason"], "memory-budget", "{text}");
    let (best, held) = (
        free["tps"].as_f64().unwrap(),
        tight["tps"].as_f64().unwrap(),
    );
    assert!(
        held >= best * (1.0 - 1e-9),
        "{held} below the optimum {best}"
    );
    assert_eq!(tight["valid"], true, "{text}");
}

#[test]
fn the_cluster_ip_through_the_binary_equals_brute_force() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for seed in 0..30u64 {
        let shape = Shape {
            max_nodes: 6,
            ..Default::default()
        };
        let cluster = ClusterShape {
            max_devices: 4,
            ..ClusterShape::default()
        };
        let Some(w) = random_clustered(seed, shape, cluster) else {
            continue;
        };
        let costs = ClusterCosts::of(&w);
        let file = dir.path().join(format!("w{seed}.json"));
        std::fs::write(&file, workload_to_json(&w)).unwrap();
        for contiguous in [true, false] {
            let Some((b, _)) = brute_force(&w, &costs, Objective::Throughput, contiguous)
                .unwrap()
                .best
            else {
                continue;
            };
            let mut cmd = dnnplace();
            cmd.arg("plan")
                .arg(&file)
                .args(["--method", "ip", "--json"]);
            if !contiguous {
                cmd.arg("--non-contiguous");
            }
            let v = json_of(&cmd.output().unwrap());
            let tps = v["tps"].as_f64().unwrap();
            assert_eq!(v["outcome"], "optimal", "seed {seed}");
            assert!(
                (tps - b).abs() <= 1e-5 * b.max(1.0),
                "seed {seed} contiguous {contiguous}: plan {tps}, brute force {b}"
            );
            assert_eq!(v["valid"], true);
            if contiguous {
                assert_eq!(v["contiguous"], true);
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "checked {checked}");
}

//! Activation recomputation under the interleaved schedule (`plan --schedule interleaved:v
//! --recompute auto`): the IP against exhaustive search of every chain of `p·v` chunks and
//! every set of recomputing accelerators (the model written out again here), the
//! simulator's peaks against the scorer's figures on recomputing devices, and the
//! command line.

mod common;
mod simulated_peaks;

use std::process::Command;

use common::{for_each_interleaved_chain, staged_workload, Staging};
use dnnplace::model::recompute::Recompute;
use dnnplace::model::schedule::{device_order, held_bytes, Pass, Pipeline, Schedule};
use dnnplace::model::{Device, DeviceSet, Workload};
use dnnplace::score::device_loads;
use dnnplace::simulate::{simulate, Settings};
use dnnplace::solve::{dp::Dp, milp::Ip, plan, Objective, Problem, Status};
use simulated_peaks::assert_simulated_peaks;

/// A plan's TPS, or ∞ when the method gave no plan.
fn tps_or_none(got: &dnnplace::solve::Plan) -> f64 {
    match &got.outcome.placement {
        Some(_) => got.objective(Objective::Throughput),
        None => f64::INFINITY,
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn same(a: f64, b: f64) -> bool {
    close(a, b) || (a.is_infinite() && b.is_infinite())
}

/// A random training workload (tests/common, at most 6 nodes) with output bytes on its
/// forward edges, on 2 accelerators, its memory a fraction of what all nodes hold with two
/// stashes each (seed-chosen), or `None` when the draw has no valid device set or a node
/// that cannot run on an accelerator (tests/interleaved.rs covers the refusal).
fn instance(seed: u64) -> Option<Workload> {
    let w = staged_workload(
        seed,
        Staging {
            salt: 0x5eed_1e4e,
            stash: 0.8,
            output_bytes: true,
            tight: 0.0,
        },
    )?;
    if w.nodes().iter().any(|x| !x.supported_on_accelerator) {
        return None;
    }
    let total: f64 = held_bytes(&w)
        .iter()
        .map(|h| h.resident_bytes + 2.0 * h.stash_bytes)
        .sum();
    let fraction = [0.35, 0.45, 0.55, 0.65, 0.8][(seed % 5) as usize];
    w.with_devices(DeviceSet {
        accelerators: 2,
        memory_per_accelerator_bytes: (total * fraction).ceil(),
        cpus: w.devices().cpus,
    })
    .ok()
}

/// The oracle's memory of device `d` from its chunks' resident bytes, stashes `a` and
/// inputs `i`, replaying docs/schedule.md's order: holding, every stash from its forward
/// to its backward step; recomputing, every input from its forward to its backward step
/// and the chunk's stash during its backward step.
fn replayed_bytes(
    pipeline: Pipeline,
    p: usize,
    d: usize,
    a: &[f64],
    i: &[f64],
    recompute: bool,
) -> f64 {
    let mut held = vec![0.0f64; a.len()];
    let mut peak: f64 = 0.0;
    for step in device_order(pipeline.schedule, p, pipeline.micro_batches, d).unwrap() {
        let per: &[f64] = if recompute { i } else { a };
        match step.pass {
            Pass::Forward => {
                held[step.chunk] += 1.0;
                peak = peak.max(held.iter().zip(per).map(|(n, x)| n * x).sum());
            }
            Pass::Backward => {
                let now: f64 = held.iter().zip(per).map(|(n, x)| n * x).sum();
                peak = peak.max(now + if recompute { a[step.chunk] } else { 0.0 });
                held[step.chunk] -= 1.0;
            }
        }
    }
    peak
}

/// Exhaustive search: every labelling of the colour classes with a stage `0 … p·v − 1`
/// that no forward edge decreases, stage `s` on chunk `s / p` of accelerator `s mod p`,
/// and (with `allow`) every set of recomputing accelerators; valid when every device
/// holds `Σ size ≤ M` (MODEL.md) and fits its replayed memory, scored by the max over
/// devices of MODEL.md's load plus, on a recomputing device, its forward nodes' time.
/// Returns the least TPS (∞ if none).
fn brute_force(w: &Workload, pipeline: Pipeline, allow: bool) -> f64 {
    let p = w.devices().accelerators;
    let v = pipeline.schedule.chunks();
    let limit = w.devices().memory_per_accelerator_bytes * (1.0 + 1e-12);
    let held = held_bytes(w);
    let forward_edge =
        |from: usize, to: usize| !w.node(from).is_backward && !w.node(to).is_backward;
    // b(u): the largest forward edge out of forward node u.
    let mut b = vec![0.0f64; w.len()];
    for e in w.edges() {
        if forward_edge(e.from, e.to) {
            b[e.from] = b[e.from].max(e.size_bytes);
        }
    }
    let mut best = f64::INFINITY;
    for_each_interleaved_chain(w, p, v, |stage, placement| {
        let stage = |x: usize| stage[x];
        let loads = device_loads(w, &placement);
        // Per device: the time with and without recomputing, or ∞ where it does not fit.
        let mut options = vec![[0.0f64; 2]; p];
        for (d, option) in options.iter_mut().enumerate() {
            let on = |x: usize| stage(x) % p == d;
            let (mut a, mut i) = (vec![0.0; v], vec![0.0; v]);
            let (mut resident, mut size, mut forward) = (0.0, 0.0, 0.0);
            for x in (0..w.len()).filter(|&x| on(x)) {
                resident += held[x].resident_bytes;
                size += w.node(x).size_bytes;
                a[stage(x) / p] += held[x].stash_bytes;
                if !w.node(x).is_backward {
                    forward += w.node(x).fpga_latency;
                }
            }
            for (c, input) in i.iter_mut().enumerate() {
                let s = c * p + d;
                *input = (0..w.len())
                    .filter(|&u| stage(u) != s && b[u] > 0.0)
                    .filter(|&u| {
                        w.successors(u)
                            .iter()
                            .any(|&x| forward_edge(u, x) && stage(x) == s)
                    })
                    .map(|u| b[u])
                    .sum();
            }
            let load = loads
                .iter()
                .find(|l| l.device == Device::Accelerator(d))
                .map_or(0.0, |l| l.load);
            for (r, slot) in option.iter_mut().enumerate() {
                let recompute = r == 1;
                let bytes = resident + replayed_bytes(pipeline, p, d, &a, &i, recompute);
                *slot = if size <= limit && bytes <= limit && (allow || !recompute) {
                    load + if recompute { forward } else { 0.0 }
                } else {
                    f64::INFINITY
                };
            }
        }
        for set in 0..(1usize << p) {
            let tps = (0..p)
                .map(|d| options[d][(set >> d) & 1])
                .fold(0.0, f64::max);
            best = best.min(tps);
        }
    });
    best
}

/// The interleaved IP with `--recompute auto` proves the exhaustive search's optimum over
/// every chain of chunks and every set of recomputing accelerators (p = 2, v = 2, m = 2
/// and 4), and with `none` the search without recomputation; instances where recomputing
/// is what makes the plan fit, or makes it faster, occur; the IP's recomputing plans fit
/// as the scorer counts them, and the simulator's peak on every device equals the
/// scorer's figure.
#[test]
fn ip_matches_brute_force_with_and_without_recompute() {
    let schedule = Schedule::Interleaved { chunks: 2 };
    let (mut checked, mut fits_only, mut faster, mut recomputing, mut simulated) = (0, 0, 0, 0, 0);
    for seed in 0..400u64 {
        let Some(w) = instance(seed) else {
            continue;
        };
        let m = if seed % 2 == 0 { 2 } else { 4 };
        let mut want = [0.0; 2];
        for (r, recompute) in [Recompute::None, Recompute::Auto].into_iter().enumerate() {
            let pipeline = Pipeline {
                recompute,
                ..Pipeline::new(schedule, m)
            };
            want[r] = brute_force(&w, pipeline, recompute == Recompute::Auto);
            let problem = Problem {
                pipeline: Some(pipeline),
                ..Problem::throughput(&w)
            };
            let dp =
                plan(&Dp, &problem).unwrap_or_else(|e| panic!("seed {seed} {recompute} dp: {e}"));
            let dp_value = tps_or_none(&dp);
            assert!(
                same(dp_value, want[r]),
                "seed {seed} m={m} {recompute}: dp {dp_value}, brute force {}",
                want[r]
            );
            assert!(
                matches!(
                    dp.outcome.status,
                    Status::Optimal | Status::Infeasible { .. }
                ),
                "seed {seed} {recompute}: dp {:?}",
                dp.outcome.status
            );
            let got =
                plan(&Ip, &problem).unwrap_or_else(|e| panic!("seed {seed} {recompute}: {e}"));
            let value = tps_or_none(&got);
            assert!(
                same(value, want[r]),
                "seed {seed} m={m} {recompute}: ip {value}, brute force {}",
                want[r]
            );
            if want[r].is_infinite() {
                assert!(
                    matches!(got.outcome.status, Status::Infeasible { .. }),
                    "seed {seed}"
                );
                continue;
            }
            assert_eq!(
                got.outcome.status,
                Status::Optimal,
                "seed {seed} {recompute}"
            );
            let placement = got.outcome.placement.as_ref().unwrap();
            let memory = got
                .pipeline_memory
                .as_ref()
                .expect("planned under a schedule");
            let limit = w.devices().memory_per_accelerator_bytes;
            assert!(
                memory.iter().all(|d| d.bytes <= limit * (1.0 + 1e-9)),
                "seed {seed}"
            );
            if placement.recompute.is_empty() {
                continue;
            }
            assert_eq!(recompute, Recompute::Auto, "seed {seed}: none recomputes");
            recomputing += 1;
            // As in tests/interleaved.rs: a backward edge against the chain leaves the
            // timetable no order for the chunks.
            let against = w.edges().iter().any(|e| {
                let at = |x: usize| match placement.assignment[x] {
                    Device::Accelerator(d) => placement.chunk(x) * 2 + d,
                    Device::Cpu(_) => unreachable!("interleaved plans use accelerators only"),
                };
                w.node(e.from).is_backward && w.node(e.to).is_backward && at(e.from) < at(e.to)
            });
            if against || !w.nodes().iter().any(|x| x.is_backward) {
                continue;
            }
            let sim = simulate(
                &w,
                placement,
                &Settings {
                    schedule,
                    micro_batches: m,
                },
            )
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
            for d in memory {
                let run = sim.devices.iter().find(|x| x.device == d.device).unwrap();
                // A forward piece no backward piece of its chunk frees is freed at its own
                // end (tests/interleaved.rs): the planned figure is then an upper bound.
                let released = sim.stages.pieces.iter().all(|x| {
                    x.device != d.device || x.pass == Pass::Backward || !x.released_by.is_empty()
                });
                assert!(
                    run.peak_memory_bytes <= d.bytes * (1.0 + 1e-9)
                        && (!released || close(run.peak_memory_bytes, d.bytes)),
                    "seed {seed} {} (recomputes {}): simulated {} vs planned {}",
                    d.device,
                    d.recomputes,
                    run.peak_memory_bytes,
                    d.bytes
                );
                simulated += usize::from(released && d.recomputes);
            }
        }
        checked += 1;
        if want[0].is_infinite() && want[1].is_finite() {
            fits_only += 1;
        } else if want[1] < want[0] * (1.0 - 1e-9) {
            faster += 1;
        }
        assert!(
            want[1] <= want[0] * (1.0 + 1e-12),
            "seed {seed}: recomputing lost"
        );
    }
    eprintln!("{checked} instances: {fits_only} fit only by recomputing, {faster} faster with it; {recomputing} recomputing IP plans, {simulated} recomputing devices simulated at exactly the planned peak");
    assert!(
        checked >= 150 && fits_only >= 5 && faster >= 3 && recomputing >= 10 && simulated >= 5,
        "{checked} checked, {fits_only} fit only, {faster} faster, {recomputing} recomputing, {simulated} simulated"
    );
}

fn dnnplace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dnnplace"))
}

/// On a generated 4-block BERT training graph (2 accelerators), `interleaved:2` with 4
/// micro-batches at 310 MiB: `--recompute none` is infeasible, `auto` prints a plan whose
/// accelerators recompute, its JSON marks them, and `simulate` of the written plan peaks at
/// the printed memory on every device.
#[test]
fn command_line() {
    let dir = std::env::temp_dir().join(format!("dnnplace-il-recompute-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let workload = dir.join("bert.json");
    let out = dnnplace()
        .args([
            "generate",
            "transformer",
            "--layers",
            "4",
            "--hidden",
            "256",
            "--heads",
            "4",
            "--training",
            "--batch",
            "8",
            "--seq",
            "128",
            "--accelerators",
            "2",
            "--out",
        ])
        .arg(&workload)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = |recompute: &str, extra: &[&str]| {
        dnnplace()
            .arg("plan")
            .arg(&workload)
            .args([
                "--schedule",
                "interleaved:2",
                "--micro-batches",
                "4",
                "--memory",
                "310MiB",
                "--time-limit",
                "20s",
                "--recompute",
                recompute,
            ])
            .args(extra)
            .output()
            .unwrap()
    };
    let none = run("none", &[]);
    assert_eq!(
        none.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&none.stdout)
    );
    assert!(String::from_utf8_lossy(&none.stderr).contains("infeasible"));
    let text = run("auto", &[]);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.status.success(),
        "{}",
        String::from_utf8_lossy(&text.stderr)
    );
    assert!(
        stdout.contains("(recomputes: keeps each chunk's input"),
        "{stdout}"
    );
    let plan_file = dir.join("plan.json");
    let out = run("auto", &["--json", "--out", plan_file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let devices = v["pipeline"]["devices"].as_array().unwrap();
    assert!(devices
        .iter()
        .any(|d| d["recomputes"] == serde_json::json!(true)));
    assert_simulated_peaks(
        &workload,
        &plan_file,
        &[
            "--schedule",
            "interleaved:2",
            "--micro-batches",
            "4",
            "--memory",
            "310MiB",
        ],
        &v,
    );
    std::fs::remove_dir_all(&dir).ok();
}

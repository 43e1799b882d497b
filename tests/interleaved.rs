//! Planning under Megatron-LM's interleaved 1F1B schedule (`plan --schedule interleaved:v`):
//! the interleaved IP against exhaustive search of every chain of `p·v` chunks, the
//! simulator's peaks against the scorer's figures, the plan file's chunks, and the
//! command line's refusals.

mod common;
mod simulated_peaks;

use std::process::Command;

use common::{for_each_interleaved_chain, staged_workload, Staging};
use dnnplace::model::schedule::{device_order, held_bytes, Pass, Pipeline, Schedule};
use dnnplace::model::{Device, DeviceSet, Placement, Workload};
use dnnplace::score::{device_loads, max_load, pipeline_memory};
use dnnplace::simulate::{simulate, Settings};
use dnnplace::solve::{dp::Dp, milp::Ip, plan, Objective, Problem, Status};
use simulated_peaks::assert_simulated_peaks;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// A random training workload (tests/common, at most 6 nodes) on 2 accelerators, its
/// memory a fraction of what all nodes hold with two stashes each (seed-chosen: from
/// tight to loose), or `None` when the draw has no valid device set.
fn instance(seed: u64) -> Option<Workload> {
    let w = staged_workload(
        seed,
        Staging {
            salt: 0x1e4e,
            stash: 0.7,
            output_bytes: false,
            tight: 0.0,
        },
    )?;
    let total: f64 = held_bytes(&w)
        .iter()
        .map(|h| h.resident_bytes + 2.0 * h.stash_bytes)
        .sum();
    let fraction = [0.35, 0.5, 0.65, 0.8, 4.0][(seed % 5) as usize];
    w.with_devices(DeviceSet {
        accelerators: 2,
        memory_per_accelerator_bytes: (total * fraction).ceil(),
        cpus: w.devices().cpus,
    })
    .ok()
}

/// The oracle's own memory of device `d` (resident + the peak over its order of the
/// chunk stashes held, a stash counted from its forward to its backward), written out
/// again from docs/schedule.md's order.
fn peak_bytes(schedule: Schedule, p: usize, m: usize, d: usize, resident: f64, a: &[f64]) -> f64 {
    let mut held = vec![0i64; a.len()];
    let mut peak: f64 = 0.0;
    for step in device_order(schedule, p, m, d).unwrap() {
        match step.pass {
            Pass::Forward => held[step.chunk] += 1,
            Pass::Backward => held[step.chunk] -= 1,
        }
        let now: f64 = held.iter().zip(a).map(|(&n, &x)| n as f64 * x).sum();
        peak = peak.max(now);
    }
    resident + peak
}

/// Exhaustive search: every labelling of the colour classes with a stage `0 … p·v − 1`
/// that no forward edge decreases (the chains of p·v ideals; the drawn backward nodes
/// all share a forward node's class), stage `s` being chunk `s / p` of accelerator `s mod
/// p`; valid when every node may run on an accelerator and every accelerator's memory
/// fits (`peak_bytes`), scored by MODEL.md's max load. Returns the least TPS (∞ if none)
/// and the least TPS when memory is ignored.
fn brute_force(w: &Workload, pipeline: Pipeline) -> (f64, f64) {
    let p = w.devices().accelerators;
    let v = pipeline.schedule.chunks();
    let limit = w.devices().memory_per_accelerator_bytes;
    let held = held_bytes(w);
    let (mut best, mut unconstrained) = (f64::INFINITY, f64::INFINITY);
    for_each_interleaved_chain(w, p, v, |stage, placement| {
        let (tps, _) = max_load(&device_loads(w, &placement));
        unconstrained = unconstrained.min(tps);
        let fits = (0..p).all(|d| {
            let mut a = vec![0.0; v];
            let mut resident = 0.0;
            for x in (0..w.len()).filter(|&x| stage[x] % p == d) {
                resident += held[x].resident_bytes;
                a[stage[x] / p] += held[x].stash_bytes;
            }
            peak_bytes(
                pipeline.schedule,
                p,
                pipeline.micro_batches,
                d,
                resident,
                &a,
            ) <= limit * (1.0 + 1e-12)
        });
        if fits {
            best = best.min(tps);
        }
    });
    (best, unconstrained)
}

/// The interleaved IP proves the exhaustive search's optimum (p = 2, v = 2, m = 2 and 4),
/// on instances where the schedule's memory binds and where nothing fits; its plan fits
/// as the scorer counts it, and the simulator's peak on every device equals the scorer's
/// figure.
#[test]
fn ip_matches_brute_force_over_every_chain_of_chunks() {
    let schedule = Schedule::Interleaved { chunks: 2 };
    let (mut checked, mut binding, mut infeasible, mut refused, mut simulated, mut equal) =
        (0, 0, 0, 0, 0, 0);
    let mut certified = 0;
    for seed in 0..700u64 {
        let Some(w) = instance(seed) else {
            continue;
        };
        let m = if seed % 2 == 0 { 2 } else { 4 };
        let pipeline = Pipeline::new(schedule, m);
        let problem = Problem {
            pipeline: Some(pipeline),
            ..Problem::throughput(&w)
        };
        if w.nodes().iter().any(|x| !x.supported_on_accelerator) {
            let e = plan(&Ip, &problem).expect_err("a node that cannot run on an accelerator");
            assert!(
                e.to_string().contains("cannot run on an accelerator"),
                "{e}"
            );
            refused += 1;
            continue;
        }
        let (want, unconstrained) = brute_force(&w, pipeline);
        let dp = plan(&Dp, &problem).unwrap_or_else(|e| panic!("seed {seed} m={m} dp: {e}"));
        match &dp.outcome.placement {
            Some(_) => assert!(
                close(dp.objective(Objective::Throughput), want),
                "seed {seed} m={m}: dp {}, brute force {want}",
                dp.objective(Objective::Throughput)
            ),
            None => {
                assert!(
                    want.is_infinite() && matches!(dp.outcome.status, Status::Infeasible { .. }),
                    "seed {seed} m={m}: dp {:?}, brute force {want}",
                    dp.outcome.status
                );
                // The DP's memory certificate (resident + the fewest stashes every device
                // holds, against all the accelerators' memory), checked by the brute force.
                if let Status::Infeasible { reason, .. } = &dp.outcome.status {
                    certified += usize::from(
                        reason
                            .to_string()
                            .contains("that the devices hold at least"),
                    );
                }
            }
        }
        if want.is_finite() {
            assert_eq!(dp.outcome.status, Status::Optimal, "seed {seed} dp");
        }
        let got = plan(&Ip, &problem).unwrap_or_else(|e| panic!("seed {seed} m={m}: {e}"));
        let value = got.objective(Objective::Throughput);
        checked += 1;
        if want.is_infinite() {
            assert!(
                got.outcome.placement.is_none(),
                "seed {seed} m={m}: ip {value}, brute force finds none"
            );
            assert!(
                matches!(got.outcome.status, Status::Infeasible { .. }),
                "seed {seed}: {:?}",
                got.outcome.status
            );
            infeasible += 1;
            continue;
        }
        assert!(
            close(value, want),
            "seed {seed} m={m}: ip {value}, brute force {want}"
        );
        assert_eq!(got.outcome.status, Status::Optimal, "seed {seed}");
        if want > unconstrained * (1.0 + 1e-9) {
            binding += 1;
        }
        if !w.nodes().iter().any(|x| x.is_backward) {
            // Without backward nodes the simulator runs a plain pipeline, no schedule.
            continue;
        }
        let placement = got.outcome.placement.as_ref().unwrap();
        let memory = got
            .pipeline_memory
            .as_ref()
            .expect("planned under a schedule");
        // A backward edge against the chain (the random backward graph need not mirror
        // the forward one) leaves the timetable no order for the chunks: the simulator
        // says so and reconstructs its own stages, which may not divide into chunks.
        let against = w.edges().iter().any(|e| {
            let at = |x: usize| match placement.assignment[x] {
                Device::Accelerator(d) => placement.chunk(x) * 2 + d,
                Device::Cpu(_) => unreachable!("interleaved plans use accelerators only"),
            };
            w.node(e.from).is_backward && w.node(e.to).is_backward && at(e.from) < at(e.to)
        });
        if against {
            continue;
        }
        simulated += 1;
        let sim = simulate(
            &w,
            placement,
            &Settings {
                schedule,
                micro_batches: m,
            },
        )
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert!(
            sim.notes.iter().all(|n| !n.contains("not used")),
            "seed {seed}: {:?}",
            sim.notes
        );
        for d in memory {
            let run = sim.devices.iter().find(|r| r.device == d.device).unwrap();
            // A stash that no backward task on its device frees (its node's backward
            // runs elsewhere) is freed by the simulator when its forward ends, while the
            // schedule keeps it until the chunk's backward step: the planned figure is
            // then an upper bound.
            let released = sim.stages.pieces.iter().all(|x| {
                x.device != d.device
                    || x.stash_bytes == 0.0
                    || x.pass == Pass::Backward
                    || !x.released_by.is_empty()
            });
            assert!(
                run.peak_memory_bytes <= d.bytes * (1.0 + 1e-9)
                    && (!released || close(run.peak_memory_bytes, d.bytes)),
                "seed {seed} {}: simulated {} vs planned {}",
                d.device,
                run.peak_memory_bytes,
                d.bytes
            );
            equal += usize::from(released);
        }
    }
    eprintln!("{checked} instances, {binding} where the schedule's memory raised the optimum, {infeasible} infeasible ({certified} by the memory certificate), {refused} refused (a node that cannot run on an accelerator), {simulated} training plans simulated ({equal} devices at exactly the planned peak)");
    assert!(
        checked >= 300 && binding >= 25 && infeasible >= 50 && refused >= 50 && simulated >= 40 && equal >= 60 && certified >= 10,
        "{checked} checked, {binding} binding, {infeasible} infeasible, {refused} refused, {simulated} simulated"
    );
}

/// The interleaved DP (`--method dp`) proves the exhaustive search's optimum beyond two
/// chunks on two devices: `v = 3` on 2 accelerators (junctions of two rounds in its state)
/// and `v = 2` on 3 accelerators, m = 6, at the same memory levels; infeasible draws are
/// proven infeasible.
#[test]
fn dp_matches_brute_force_with_three_chunks_or_three_devices() {
    let (mut checked, mut binding, mut infeasible) = (0, 0, 0);
    for seed in 0..400u64 {
        let Some(w) = instance(seed) else {
            continue;
        };
        if w.nodes().iter().any(|x| !x.supported_on_accelerator) {
            continue;
        }
        let (w, chunks) = if seed % 2 == 0 {
            (w, 3)
        } else {
            let devices = DeviceSet {
                accelerators: 3,
                ..w.devices().clone()
            };
            (w.with_devices(devices).unwrap(), 2)
        };
        let pipeline = Pipeline::new(Schedule::Interleaved { chunks }, 6);
        let problem = Problem {
            pipeline: Some(pipeline),
            ..Problem::throughput(&w)
        };
        let (want, unconstrained) = brute_force(&w, pipeline);
        let got = plan(&Dp, &problem).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        checked += 1;
        if want.is_infinite() {
            assert!(
                got.outcome.placement.is_none()
                    && matches!(got.outcome.status, Status::Infeasible { .. }),
                "seed {seed}: dp {:?}, brute force finds none",
                got.outcome.status
            );
            infeasible += 1;
            continue;
        }
        let value = got.objective(Objective::Throughput);
        assert!(
            close(value, want),
            "seed {seed} v={chunks}: dp {value}, brute force {want}"
        );
        assert_eq!(got.outcome.status, Status::Optimal, "seed {seed}");
        binding += usize::from(want > unconstrained * (1.0 + 1e-9));
    }
    eprintln!("{checked} instances, {binding} where the schedule's memory raised the optimum, {infeasible} infeasible");
    assert!(
        checked >= 100 && binding >= 10 && infeasible >= 15,
        "{checked} checked, {binding} binding, {infeasible} infeasible"
    );
}

/// On the generated GPT-2 training graph (4 accelerators), interleaved:2 with 8
/// micro-batches at a memory where the schedule binds: the IP's plan fits by the
/// scorer's figure, the plan file keeps its chunks, and the simulator (reading them back)
/// peaks at exactly the planned figure on every device.
#[test]
fn gpt2_plan_round_trips_and_simulates_at_the_planned_memory() {
    let w = common::gpt2_training(0);
    let schedule = Schedule::Interleaved { chunks: 2 };
    let pipeline = Pipeline::new(schedule, 8);
    // A memory below what the whole model needs on one device under the schedule.
    let held = held_bytes(&w);
    let total: f64 = held
        .iter()
        .map(|h| h.resident_bytes + 8.0 * h.stash_bytes)
        .sum();
    let w = w
        .with_devices(DeviceSet {
            memory_per_accelerator_bytes: (total / 3.0).ceil(),
            ..w.devices().clone()
        })
        .unwrap();
    let mut problem = Problem {
        pipeline: Some(pipeline),
        ..Problem::throughput(&w)
    };
    problem.limits.time_limit_s = Some(3.0);
    let got = plan(&Ip, &problem).unwrap();
    let placement = got.outcome.placement.clone().expect("a plan within 3 s");
    let memory = got.pipeline_memory.clone().unwrap();
    assert!(memory
        .iter()
        .all(|d| d.bytes <= w.devices().memory_per_accelerator_bytes));
    let e = dnnplace::score::evaluate(&w, &placement, false);
    let raw = dnnplace::io::placement_to_raw(
        &w,
        &placement,
        &e.devices
            .iter()
            .filter(|d| d.device.is_accelerator())
            .map(|d| d.load)
            .collect::<Vec<_>>(),
        &[],
        e.max_load,
        false,
    );
    let text = serde_json::to_string(&raw).unwrap();
    let read = dnnplace::io::parse_placement(&text, &w).unwrap();
    assert_eq!(read.assignment, placement.assignment);
    for x in 0..w.len() {
        assert_eq!(read.chunk(x), placement.chunk(x), "node {}", w.node(x).id);
    }
    let again = pipeline_memory(&w, &read, &pipeline).unwrap();
    assert_eq!(again, memory);
    let sim = simulate(
        &w,
        &read,
        &Settings {
            schedule,
            micro_batches: 8,
        },
    )
    .unwrap();
    assert_eq!(sim.stages.positions, 8);
    for d in &memory {
        let run = sim.devices.iter().find(|r| r.device == d.device).unwrap();
        assert!(
            close(run.peak_memory_bytes, d.bytes),
            "{}: simulated {} vs planned {}",
            d.device,
            run.peak_memory_bytes,
            d.bytes
        );
    }
    eprintln!(
        "gpt2 interleaved:2 m=8 at {:.0} MiB: TPS {} ms ({:?}), peaks {:?} MiB",
        w.devices().memory_per_accelerator_bytes / 1048576.0,
        got.outcome.objective,
        got.outcome.status,
        memory
            .iter()
            .map(|d| (d.bytes / 1048576.0).round())
            .collect::<Vec<_>>()
    );
}

/// The scorer names the node: on a CPU, past the last chunk, or feeding an earlier stage.
#[test]
fn scorer_refuses_broken_chunk_chains() {
    let w = instance(
        (0..100)
            .find(|&s| {
                instance(s).is_some_and(|w| {
                    w.edges()
                        .iter()
                        .any(|e| !w.node(e.from).is_backward && !w.node(e.to).is_backward)
                })
            })
            .unwrap(),
    )
    .unwrap();
    let pipeline = Pipeline::new(Schedule::Interleaved { chunks: 2 }, 2);
    let e = w
        .edges()
        .iter()
        .find(|e| !w.node(e.from).is_backward && !w.node(e.to).is_backward)
        .unwrap();
    let ok = Placement::new(vec![Device::Accelerator(0); w.len()]);
    assert!(pipeline_memory(&w, &ok, &pipeline).is_ok());
    // Everything in chunk 1 of acc0 except the edge's source, in chunk 1 of acc1 (stage 3 > 2).
    let mut assignment = vec![Device::Accelerator(0); w.len()];
    let chunks = vec![1; w.len()];
    let class = w.node(e.from).color_class;
    for (x, device) in assignment.iter_mut().enumerate() {
        if x == e.from || (class.is_some() && w.node(x).color_class == class) {
            *device = Device::Accelerator(1);
        }
    }
    let broken = Placement::new(assignment).with_pieces(chunks.clone());
    let err = pipeline_memory(&w, &broken, &pipeline)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!("node {}", w.node(e.from).id)) && err.contains("earlier stage"),
        "{err}"
    );
    let mut far = chunks.clone();
    far[0] = 2;
    let err = pipeline_memory(&w, &ok.clone().with_pieces(far), &pipeline)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("chunk 2") && err.contains(&format!("node {}", w.node(0).id)),
        "{err}"
    );
    let mut cpu = vec![Device::Accelerator(0); w.len()];
    cpu[0] = Device::Cpu(0);
    let err = pipeline_memory(&w, &Placement::new(cpu), &pipeline)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("CPU cores hold nothing") && err.contains(&format!("node {}", w.node(0).id)),
        "{err}"
    );
}

fn dnnplace() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dnnplace"))
}

/// `plan --schedule interleaved:v` plans with dp and auto (proven optimal), writes the
/// chunks, and the simulator's peaks equal the printed figures; another method and a count
/// of micro-batches that is not a multiple of the accelerators are refused with exit 2.
#[test]
fn command_line() {
    let dir = std::env::temp_dir().join(format!("dnnplace-interleaved-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let workload = dir.join("gpt.json");
    let out = dnnplace()
        .args(["generate", "gpt", "--layers", "2", "--training", "--out"])
        .arg(&workload)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (args, needle) in [
        (vec!["--method", "greedy"], "--method dp, ip or auto"),
        (
            vec!["--method", "ip", "--micro-batches", "6"],
            "multiple of the 4",
        ),
    ] {
        let out = dnnplace()
            .arg("plan")
            .arg(&workload)
            .args(["--schedule", "interleaved:2"])
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    for method in ["auto", "dp"] {
        let plan_file = dir.join(format!("plan-{method}.json"));
        let out = dnnplace()
            .arg("plan")
            .arg(&workload)
            .args([
                "--schedule",
                "interleaved:2",
                "--micro-batches",
                "8",
                "--method",
                method,
                "--memory",
                "700MiB",
                "--time-limit",
                "3s",
                "--json",
                "--out",
            ])
            .arg(&plan_file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["status"], "proven optimal", "{method}: {v}");
        assert!(v["pipeline"]["devices"][0]["chunkStashBytes"]
            .as_array()
            .is_some_and(|a| a.len() == 2));
        assert_simulated_peaks(
            &workload,
            &plan_file,
            &[
                "--schedule",
                "interleaved:2",
                "--micro-batches",
                "8",
                "--memory",
                "700MiB",
            ],
            &v,
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

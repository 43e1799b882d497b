//! The pipeline simulator against the textbook (uniform stages), the schedule model's
//! memory figures, the published workloads' DP plans, and properties of random plans.

mod common;
mod pipeline_gen;

use dnnplace::io::read_workload;
use dnnplace::model::schedule::{self, HeldBytes, Pass, Schedule};
use dnnplace::model::{Placement, Workload};
use dnnplace::simulate::{simulate, simulate_with_memory, Settings, Simulation};
use dnnplace::solve::{dp::Dp, plan, Problem};
use proptest::prelude::*;

fn run(w: &Workload, p: &Placement, schedule: Schedule, m: usize) -> Simulation {
    simulate(
        w,
        p,
        &Settings {
            schedule,
            micro_batches: m,
        },
    )
    .unwrap_or_else(|e| panic!("{schedule} m={m}: {e}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// GPipe and 1F1B on p equal stages: T = (m + p − 1)(F + B), bubble (p − 1)/(m + p − 1),
/// and every device runs the schedule's order; a plain pipeline of inference: T = (m + p − 1)F.
#[test]
fn uniform_stages_give_the_textbook_bubble() {
    for p in 1..=6 {
        for layers in [1, 3] {
            let (w, placement) = pipeline_gen::uniform_chain(p, layers, p, 1.0, 2.0, true, 0.0);
            let (f, b) = (layers as f64 * 1.0, layers as f64 * 2.0);
            for schedule in [Schedule::GPipe, Schedule::OneFOneB] {
                for m in [1, 2, 3, 4, 7, 16] {
                    let sim = run(&w, &placement, schedule, m);
                    let textbook = (p - 1) as f64 / (m + p - 1) as f64;
                    assert!(
                        close(sim.iteration_ms, (m + p - 1) as f64 * (f + b)),
                        "{schedule} p={p} m={m}: T = {}",
                        sim.iteration_ms
                    );
                    assert!(
                        (sim.bubble_fraction - textbook).abs() < 1e-12,
                        "{schedule} p={p} m={m}: bubble {} vs {textbook}",
                        sim.bubble_fraction
                    );
                    for (d, device) in sim.devices.iter().enumerate() {
                        assert!(
                            (device.idle_fraction - textbook).abs() < 1e-12,
                            "every stage idles the same"
                        );
                        let mut ran: Vec<_> = sim
                            .tasks
                            .iter()
                            .filter(|t| sim.device_index(t.piece) == d)
                            .collect();
                        ran.sort_by(|a, b| a.start_ms.total_cmp(&b.start_ms));
                        let got: Vec<(Pass, usize)> = ran
                            .iter()
                            .map(|t| (sim.stages.pieces[t.piece].pass, t.micro_batch))
                            .collect();
                        let want: Vec<(Pass, usize)> = schedule::device_order(schedule, p, m, d)
                            .unwrap()
                            .iter()
                            .map(|s| (s.pass, s.micro_batch))
                            .collect();
                        assert_eq!(
                            got, want,
                            "{schedule} p={p} m={m}: device {d} runs the schedule's order"
                        );
                    }
                }
            }
            let (w, placement) = pipeline_gen::uniform_chain(p, layers, p, 1.0, 0.0, false, 0.0);
            for m in [1, 5, 32] {
                let sim = run(&w, &placement, Schedule::OneFOneB, m);
                assert!(
                    close(sim.iteration_ms, (m + p - 1) as f64 * f),
                    "inference p={p} m={m}"
                );
                assert!((sim.bubble_fraction - (p - 1) as f64 / (m + p - 1) as f64).abs() < 1e-12);
                assert!(!sim.training && !sim.notes.is_empty());
            }
        }
    }
}

/// Megatron-LM's interleaved schedule on p devices with v chunks each: the bubble shrinks
/// to (p − 1)(F + B)/v (F, B per device), T = m(F + B) + (p − 1)(F + B)/v.
#[test]
fn interleaving_divides_the_bubble_by_the_chunks() {
    for p in 2..=4 {
        for v in 2..=3 {
            let (w, placement) = pipeline_gen::uniform_chain(p * v, 2, p, 1.0, 2.0, true, 0.0);
            let (f, b) = (2.0 * v as f64, 4.0 * v as f64);
            for m in [p, 2 * p, 4 * p] {
                let sim = run(&w, &placement, Schedule::Interleaved { chunks: v }, m);
                let want = m as f64 * (f + b) + (p - 1) as f64 * (f + b) / v as f64;
                assert!(sim.notes.is_empty(), "{:?}", sim.notes);
                // Megatron runs all forwards first when m = p; its bubble is then GPipe-like.
                if m > p {
                    assert!(
                        close(sim.iteration_ms, want),
                        "p={p} v={v} m={m}: T = {} vs {want}",
                        sim.iteration_ms
                    );
                }
                assert!(
                    sim.iteration_ms
                        <= run(&w, &placement, Schedule::OneFOneB, m).iteration_ms + 1e-9
                );
            }
        }
    }
}

/// The simulated peak memory of every device is the schedule model's figure:
/// resident + stash x in-flight (GPipe m, 1F1B min(m, p − s)), and the replayed peak for
/// interleaved chunks of different sizes.
#[test]
fn peak_memory_is_the_schedule_models() {
    let stash_of_stage = |s: usize| 100.0 * (s + 1) as f64;
    for p in 1..=5 {
        let layers = 2;
        let (w, placement) = pipeline_gen::uniform_chain(p, layers, p, 1.0, 2.0, true, 0.5);
        let memory: Vec<HeldBytes> = (0..w.len())
            .map(|v| {
                let node = w.node(v);
                let stage = (v % (p * layers)) / layers;
                let stash = if node.is_backward {
                    0.0
                } else {
                    stash_of_stage(stage) / layers as f64
                };
                HeldBytes {
                    resident_bytes: 1000.0,
                    stash_bytes: stash,
                }
            })
            .collect();
        for schedule in [Schedule::GPipe, Schedule::OneFOneB] {
            for m in [1, 2, 3, 8] {
                let sim = simulate_with_memory(
                    &w,
                    &placement,
                    &Settings {
                        schedule,
                        micro_batches: m,
                    },
                    &memory,
                )
                .unwrap();
                for (s, device) in sim.devices.iter().enumerate() {
                    let resident = 1000.0 * 2.0 * layers as f64;
                    let want = schedule::stage_memory_bytes(
                        resident,
                        stash_of_stage(s),
                        schedule::in_flight(schedule, p, m, s),
                    );
                    assert!(
                        close(device.peak_memory_bytes, want),
                        "{schedule} p={p} m={m} stage {s}: {} vs {want}",
                        device.peak_memory_bytes
                    );
                    assert_eq!(
                        device.memory.last().unwrap().1,
                        resident,
                        "every stash is freed by the end"
                    );
                }
            }
        }
    }
    for (p, v) in [(2, 2), (3, 2), (2, 3)] {
        let layers = 1;
        let stages = p * v;
        let (w, placement) = pipeline_gen::uniform_chain(stages, layers, p, 1.0, 2.0, true, 0.0);
        let memory: Vec<HeldBytes> = (0..w.len())
            .map(|v| HeldBytes {
                resident_bytes: 0.0,
                stash_bytes: if w.node(v).is_backward {
                    0.0
                } else {
                    stash_of_stage(v % stages)
                },
            })
            .collect();
        let schedule = Schedule::Interleaved { chunks: v };
        for m in [p, 2 * p, 3 * p] {
            let sim = simulate_with_memory(
                &w,
                &placement,
                &Settings {
                    schedule,
                    micro_batches: m,
                },
                &memory,
            )
            .unwrap();
            for (d, device) in sim.devices.iter().enumerate() {
                let chunks: Vec<f64> = (0..v).map(|c| stash_of_stage(c * p + d)).collect();
                let want = schedule::peak_stash_bytes(schedule, p, m, d, &chunks).unwrap();
                assert!(
                    close(device.peak_memory_bytes, want),
                    "p={p} v={v} m={m} device {d}: {} vs {want}",
                    device.peak_memory_bytes
                );
            }
        }
    }
}

/// The DP plans of the published layer graphs: as m grows, the time one more micro-batch
/// adds tends to the plan's TPS (within 1% at m = 256; exact in practice), and T/m, which
/// also carries the pipeline's fill and drain, comes down to it (within 1% at m = 1024).
/// GPipe flushes between its phases, so its time per sample stays above TPS (printed
/// beside max F + max B, the synchronous objective of the pieces' task times).
#[test]
fn time_per_sample_tends_to_the_max_load_on_published_workloads() {
    let Some(dir) = common::shared_dir("paper/throughput/layer") else {
        return;
    };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 8);
    for path in files {
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let w = read_workload(&path).unwrap();
        let planned = plan(&Dp, &Problem::throughput(&w)).unwrap();
        let placement = planned.outcome.placement.clone().unwrap();
        let tps = planned.evaluation.as_ref().unwrap().max_load;
        let mut previous = f64::INFINITY;
        for m in [16, 64, 256, 1024] {
            let sim = run(&w, &placement, Schedule::OneFOneB, m);
            let steady = sim.steady_time_per_sample_ms.unwrap();
            println!(
                "{name:24} 1f1b m={m:4}: T/m {:10.4}  steady {steady:10.4}  TPS {tps:10.4}  T/m vs TPS {:+.3}%  steady vs TPS {:+.4}%  bubble {:.3}",
                sim.time_per_sample_ms,
                100.0 * (sim.time_per_sample_ms / tps - 1.0),
                100.0 * (steady / tps - 1.0),
                sim.bubble_fraction
            );
            assert!(close(sim.max_load_ms, tps));
            assert!(
                sim.iteration_ms >= m as f64 * tps * (1.0 - 1e-12),
                "{name}: T >= m x TPS"
            );
            assert!(
                sim.time_per_sample_ms <= previous + 1e-9,
                "{name}: T/m falls as m grows"
            );
            previous = sim.time_per_sample_ms;
            if m >= 256 {
                assert!(
                    (steady / tps - 1.0).abs() <= 0.01,
                    "{name} m={m}: steady {steady} vs TPS {tps}"
                );
            }
            if m >= 1024 {
                assert!(
                    sim.time_per_sample_ms <= tps * 1.01,
                    "{name} m={m}: T/m {} vs TPS {tps}",
                    sim.time_per_sample_ms
                );
            }
        }
        if w.is_training() {
            let sim = run(&w, &placement, Schedule::GPipe, 256);
            let mut fw = std::collections::BTreeMap::<_, f64>::new();
            let mut bw = std::collections::BTreeMap::<_, f64>::new();
            for piece in &sim.stages.pieces {
                let side = if piece.pass == Pass::Forward {
                    &mut fw
                } else {
                    &mut bw
                };
                *side.entry(piece.device).or_insert(0.0) += piece.duration_ms();
            }
            let phases = fw.values().fold(0.0f64, |a, &b| a.max(b))
                + bw.values().fold(0.0f64, |a, &b| a.max(b));
            let steady = sim.steady_time_per_sample_ms.unwrap();
            println!("{name:24} gpipe m= 256: T/m {:10.4}  steady {steady:10.4}  max F + max B {phases:10.4}  TPS {tps:10.4}", sim.time_per_sample_ms);
            assert!(
                sim.time_per_sample_ms >= tps * (1.0 - 1e-12),
                "{name}: GPipe T/m {} vs TPS {tps}",
                sim.time_per_sample_ms
            );
        }
    }
}

/// Checks one simulation against the workload's edges (not the simulator's piece graph):
/// every node's work ran once per micro-batch on its device, data reached a task before it
/// started, devices ran one task at a time, and the iteration time lies within the bounds.
fn check_simulation(w: &Workload, p: &Placement, sim: &Simulation) {
    let m = sim.micro_batches;
    let pieces = &sim.stages.pieces;
    let mut start = vec![f64::NAN; pieces.len() * m];
    let mut end = vec![f64::NAN; pieces.len() * m];
    for t in &sim.tasks {
        let k = t.piece * m + t.micro_batch;
        assert!(start[k].is_nan(), "task {k} ran twice");
        start[k] = t.start_ms;
        end[k] = t.end_ms;
        assert!(close(t.end_ms - t.start_ms, pieces[t.piece].duration_ms()));
    }
    assert!(start.iter().all(|s| !s.is_nan()), "every task ran");
    for v in 0..w.len() {
        let piece = &pieces[sim.stages.piece_of[v]];
        assert!(piece.nodes.contains(&v) && piece.device == p.assignment[v]);
        assert_eq!(piece.pass == Pass::Backward, w.node(v).is_backward);
    }
    for e in w.edges() {
        let (a, b) = (sim.stages.piece_of[e.from], sim.stages.piece_of[e.to]);
        if a == b {
            continue;
        }
        for i in 0..m {
            assert!(
                start[b * m + i] >= end[a * m + i] - 1e-9,
                "edge {} -> {} in micro-batch {i}: starts before its input ends",
                w.node(e.from).id,
                w.node(e.to).id
            );
        }
    }
    let mut by_device: std::collections::BTreeMap<_, Vec<(f64, f64)>> = Default::default();
    for t in &sim.tasks {
        by_device
            .entry(pieces[t.piece].device)
            .or_default()
            .push((t.start_ms, t.end_ms));
    }
    for runs in by_device.values_mut() {
        runs.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        for pair in runs.windows(2) {
            assert!(
                pair[1].0 >= pair[0].1 - 1e-9,
                "a device ran two tasks at once"
            );
        }
    }
    let e = dnnplace::score::evaluate(w, p, false);
    for d in &sim.devices {
        let scored = e.devices.iter().find(|x| x.device == d.device).unwrap();
        assert!(
            close(d.load_ms, scored.load),
            "{}: {} vs scorer {}",
            d.device,
            d.load_ms,
            scored.load
        );
    }
    let total: f64 = e.devices.iter().map(|d| d.load).sum();
    let t = sim.iteration_ms;
    let slack = 1e-9 * t.max(1.0);
    assert!(
        t >= m as f64 * e.max_load - slack,
        "T = {t} < m x TPS = {}",
        m as f64 * e.max_load
    );
    assert!(
        t >= sim.lower_bound_ms - slack,
        "T = {t} < its lower bound {}",
        sim.lower_bound_ms
    );
    assert!(sim.lower_bound_ms >= m as f64 * e.max_load - slack);
    assert!(
        t <= m as f64 * total + slack,
        "T = {t} > m x Σ loads = {}",
        m as f64 * total
    );
    for d in &sim.devices {
        assert!(
            (d.memory.last().unwrap().1 - d.resident_bytes).abs() <= 1e-9,
            "{}: every stash is freed by the end",
            d.device
        );
        assert!(
            d.memory.iter().all(|&(_, b)| b >= d.resident_bytes - 1e-9),
            "{}: never below resident",
            d.device
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]
    /// Random small workloads, random valid (mostly non-contiguous) placements, every
    /// schedule: the run respects every dependency and m x TPS <= T <= m x Σ loads.
    #[test]
    fn random_plans_respect_dependencies_and_bounds(seed in any::<u64>(), place in any::<u64>(), m in 1usize..6, which in 0usize..3) {
        let shape = common::Shape { max_nodes: 14, ..Default::default() };
        let Some(w) = common::random_workload(seed, shape) else { return Ok(()) };
        let Some(p) = pipeline_gen::random_placement(&w, place) else { return Ok(()) };
        let schedule = [Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved { chunks: 2 }][which];
        // Some nodes, forward or backward, stash a few bytes per micro-batch.
        let memory: Vec<HeldBytes> = (0..w.len())
            .map(|v| HeldBytes { resident_bytes: w.node(v).size_bytes, stash_bytes: ((v as u64 * 7919 + place) % 4) as f64 })
            .collect();
        match simulate_with_memory(&w, &p, &Settings { schedule, micro_batches: m }, &memory) {
            Ok(sim) => check_simulation(&w, &p, &sim),
            // Interleaving needs the stage count and m to divide; anything else is a bug.
            Err(dnnplace::simulate::SimulateError::Schedule(_)) if which == 2 => {}
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let (w, p) = pipeline_gen::uniform_chain(3, 1, 3, 1.0, 2.0, true, 0.0);
    let err = |s: Schedule, m: usize| {
        simulate(
            &w,
            &p,
            &Settings {
                schedule: s,
                micro_batches: m,
            },
        )
        .unwrap_err()
        .to_string()
    };
    assert!(err(Schedule::OneFOneB, 0).contains("at least 1"));
    assert!(err(Schedule::Interleaved { chunks: 2 }, 4).contains("multiple of its 2 chunks"));
    let wrong = Placement::new(vec![dnnplace::model::Device::Accelerator(7); w.len()]);
    let e = simulate(
        &w,
        &wrong,
        &Settings {
            schedule: Schedule::GPipe,
            micro_batches: 2,
        },
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("not valid") && e.contains("acc7"), "{e}");
}

/// With the cost model's memory parts (activations stashed on backward nodes), every
/// device's simulated peak is the cost model's figure for the micro-batches the schedule
/// keeps in flight at its stage: Σ size + (in_flight − 1)·Σ A (`NodeMemory::bytes_in_flight`).
#[test]
fn peak_memory_is_the_cost_models_with_memory_parts() {
    use dnnplace::model::NodeMemory;
    let w = common::gpt2_training(1);
    assert!(
        w.nodes()
            .iter()
            .any(|n| n.memory.is_some_and(|m| m.activation_bytes > 0.0)),
        "the generator stashes activations"
    );
    let planned = plan(&Dp, &Problem::throughput(&w)).unwrap();
    let placement = planned.outcome.placement.clone().unwrap();
    for schedule in [Schedule::GPipe, Schedule::OneFOneB] {
        for m in [1, 3, 8] {
            let sim = run(&w, &placement, schedule, m);
            let stages = sim.stages.positions;
            let mut checked = 0;
            for d in &sim.devices {
                let own: Vec<_> = sim
                    .stages
                    .pieces
                    .iter()
                    .filter(|x| x.device == d.device)
                    .collect();
                let forward: Vec<_> = own.iter().filter(|x| x.pass == Pass::Forward).collect();
                let [f] = forward[..] else { continue };
                let in_flight = schedule::in_flight(schedule, stages, m, f.position);
                let want: f64 = (0..w.len())
                    .filter(|&v| placement.assignment[v] == d.device)
                    .map(|v| {
                        NodeMemory::bytes_in_flight(
                            w.node(v).memory.as_ref(),
                            w.node(v).size_bytes,
                            in_flight,
                        )
                    })
                    .sum();
                assert!(
                    close(d.peak_memory_bytes, want),
                    "{schedule} m={m} {}: peak {} vs {want}",
                    d.device,
                    d.peak_memory_bytes
                );
                if schedule == Schedule::GPipe && m == 8 {
                    assert!(
                        d.peak_memory_bytes > d.resident_bytes,
                        "{}: the stash shows",
                        d.device
                    );
                }
                checked += 1;
            }
            assert!(checked >= 3, "{schedule} m={m}: {checked} devices checked");
        }
    }
}

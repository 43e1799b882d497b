//! Times the simulator and the HTML report on generated graphs of 10,000–200,000 operators
//! with branches and skip edges (contiguous and scattered placements, training and
//! inference, 8 and 64 micro-batches): `cargo run --release --example sim_scale`.
//! `-- parts` times the scorer's parts and the simulator's cut alone on 100,000 operators
//! (the scorer's single-sample latency is the slow one on training graphs, which is why the
//! simulator does not call it).
use dnnplace::model::schedule::Schedule;
use dnnplace::model::{Device, DeviceSet, Node, Placement, Workload};
use dnnplace::report::html::{report_html, ReportInput};
use dnnplace::simulate::{simulate, Settings};

/// A chain of `n` forward operators with skip edges (i-5 → i) and branches (i → i+2), and,
/// when `training`, one gradient per operator in its colour class, flowing back.
fn generated(n: usize, training: bool, k: usize) -> Workload {
    let mut nodes = Vec::new();
    let mut edges = Vec::new();
    for i in 0..n {
        nodes.push(Node {
            id: i as i64,
            name: Some(format!("op{i}")),
            fpga_latency: 0.01 + (i % 7) as f64 * 0.003,
            cpu_latency: 0.5,
            size_bytes: 1e6,
            supported_on_accelerator: true,
            is_backward: false,
            color_class: Some(i as i64),
            layer_id: Some(i as i64 / 50),
            module: None,
            memory: None,
        });
        if i > 0 {
            edges.push(((i - 1) as i64, i as i64, 0.001, 0.0));
        }
        if i >= 5 && i % 5 == 0 {
            edges.push(((i - 5) as i64, i as i64, 0.001, 0.0));
        }
        if i % 3 == 1 && i + 2 < n {
            edges.push((i as i64, (i + 2) as i64, 0.001, 0.0));
        }
    }
    if training {
        for i in 0..n {
            let id = (n + i) as i64;
            nodes.push(Node {
                id,
                name: Some(format!("op{i}.grad")),
                fpga_latency: 0.02,
                cpu_latency: 1.0,
                size_bytes: 0.0,
                supported_on_accelerator: true,
                is_backward: true,
                color_class: Some(i as i64),
                layer_id: Some(i as i64 / 50),
                module: None,
                memory: None,
            });
            edges.push((i as i64, id, 0.001, 0.0));
            if i + 1 < n {
                edges.push(((n + i + 1) as i64, id, 0.001, 0.0));
            }
        }
    }
    Workload::new(
        nodes,
        edges,
        DeviceSet {
            accelerators: k,
            memory_per_accelerator_bytes: 1e15,
            cpus: 0,
        },
    )
    .unwrap()
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("parts") {
        for (n, training) in [(100_000, false), (100_000, true)] {
            let w = generated(n, training, 8);
            let p = Placement::new(
                (0..w.len())
                    .map(|v| Device::Accelerator((v % n) * 8 / n))
                    .collect(),
            );
            let t = std::time::Instant::now();
            let _ = dnnplace::score::violations(&w, &p, true);
            let a = t.elapsed().as_secs_f64();
            let _ = dnnplace::score::device_loads(&w, &p);
            let b = t.elapsed().as_secs_f64();
            let _ = dnnplace::score::contiguity_violations(&w, &p);
            let c = t.elapsed().as_secs_f64();
            let _ = dnnplace::score::latency(&w, &p);
            let d = t.elapsed().as_secs_f64();
            let _ =
                dnnplace::simulate::stages::cut(&w, &p, &dnnplace::model::schedule::held_bytes(&w));
            let e = t.elapsed().as_secs_f64();
            println!("{} nodes: violations {:.2}s loads {:.2}s contiguity {:.2}s latency {:.2}s cut {:.2}s", w.len(), a, b - a, c - b, d - c, e - d);
        }
        return;
    }
    let k = 8;
    for n in [10_000, 100_000] {
        for training in [false, true] {
            let w = generated(n, training, k);
            for scattered in [false, true] {
                // Contiguous: blocks of the chain; scattered: forward op i on device (i / 97) mod k.
                let p = Placement::new(
                    (0..w.len())
                        .map(|v| {
                            let i = v % n;
                            Device::Accelerator(if scattered { (i / 97) % k } else { i * k / n })
                        })
                        .collect(),
                );
                for m in [8, 64] {
                    let t = std::time::Instant::now();
                    let sim = simulate(
                        &w,
                        &p,
                        &Settings {
                            schedule: Schedule::OneFOneB,
                            micro_batches: m,
                        },
                    )
                    .unwrap();
                    let sim_s = t.elapsed().as_secs_f64();
                    let t = std::time::Instant::now();
                    // The report as `simulate --report` builds it: no single-sample latency.
                    let e = dnnplace::simulate::pipeline_evaluation(&w, &p);
                    let html = report_html(&ReportInput {
                        title: "scale",
                        workload: &w,
                        placement: &p,
                        evaluation: &e,
                        outcome: None,
                        simulation: Some(&sim),
                    });
                    println!(
                        "{:>7} nodes {:9} {:10} m={m:3}: {:6} pieces, {:8} tasks, simulate {:6.2} s, report {:6.2} s ({} KiB); T/m {:.3} vs TPS {:.3}",
                        w.len(), if training { "training" } else { "inference" }, if scattered { "scattered" } else { "contiguous" },
                        sim.stages.pieces.len(), sim.tasks.len(), sim_s, t.elapsed().as_secs_f64(), html.len() / 1024, sim.time_per_sample_ms, sim.max_load_ms
                    );
                }
            }
        }
    }
}

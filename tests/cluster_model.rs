//! The cluster model: the worked example of docs/cluster.md, the scorer against a naive
//! recomputation of the communication rule written here from scratch, MODEL.md as the exact
//! special case (scorer and brute force), the JSON sections, and brute-force properties on
//! small random clusters.

mod cluster_gen;
mod common;

use cluster_gen::{random_cluster, ClusterShape};
use common::{random_workload, Rng, Shape};
use dnnplace::costmodel::cluster::resolve;
use dnnplace::io::cluster_file::ClusterFile;
use dnnplace::io::{parse_workload, read_placement, read_workload, workload_to_json};
use dnnplace::model::{Cluster, ClusterCosts, Device, Placement, Platform, Workload};
use dnnplace::score::cluster::{cluster_loads, evaluate_on_cluster};
use dnnplace::score::{device_loads, evaluate};
use dnnplace::solve::brute_force::BruteForce;
use dnnplace::solve::cluster::brute_force::brute_force;
use dnnplace::solve::{plan, Objective, Problem};

fn example(file: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/cluster")
        .join(file)
}

fn example_workload() -> Workload {
    let w = read_workload(&example("workload.json")).unwrap();
    let text = std::fs::read_to_string(example("cluster.toml")).unwrap();
    let cluster = resolve(&ClusterFile::from_toml(&text).unwrap(), &[]).unwrap();
    w.with_platform(Platform {
        cluster: Some(cluster),
        ..w.platform().clone()
    })
    .unwrap()
}

#[test]
fn worked_example_of_the_docs() {
    let w = example_workload();
    let costs = ClusterCosts::of(&w);
    let p = read_placement(&example("plan.json"), &w).unwrap();
    let e = evaluate_on_cluster(&w, &costs, &p);
    assert!(
        e.is_valid() && e.is_contiguous(),
        "{:?} {:?}",
        e.violations,
        e.non_contiguous
    );
    let load = |d: Device| {
        e.devices
            .iter()
            .find(|l| l.device == d)
            .map(|l| (l.compute, l.communication))
            .unwrap()
    };
    // By hand (docs/cluster.md): B_ref = 1e10, so over a link of bandwidth B a node of cost
    // c takes λ + c · 1e10 / B.
    assert_eq!(load(Device::Cpu(0)), (2.0, 0.0)); // node 1; a CPU sending pays nothing
    assert_eq!(load(Device::Accelerator(0)), (3.0, 1.0 * 0.5)); // node 2; node 1 from the CPU over fast's host link
    assert_eq!(load(Device::Accelerator(1)), (4.0, 2.0 * 0.1)); // node 3; node 2 pulled over the peer link
    let acc2 = load(Device::Accelerator(2)); // node 4 on slow-gpu
    assert_eq!(acc2.0, 4.0);
    let network = |c: f64| 0.1 + c * 2.0;
    assert!(
        (acc2.1 - (network(2.0) + network(1.0) + 0.5)).abs() < 1e-12,
        "{acc2:?}"
    ); // nodes 2, 3 over the network; node 4 staged
    assert_eq!(load(Device::Accelerator(3)), (2.0, 0.5)); // node 5; node 4 from host memory
    assert!((e.max_load - 10.7).abs() < 1e-12);
    assert_eq!(e.bottleneck, Some(Device::Accelerator(2)));

    // The docs show these files verbatim.
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cluster.md"),
    )
    .unwrap();
    for file in ["cluster.toml", "workload.json", "plan.json"] {
        let text = std::fs::read_to_string(example(file)).unwrap();
        assert!(
            docs.contains(text.trim()),
            "docs/cluster.md does not show examples/cluster/{file} verbatim"
        );
    }
}

/// The communication rule of docs/cluster.md, literally, device by device.
fn naive_loads(w: &Workload, a: &[Device]) -> Vec<(Device, f64)> {
    let platform = w.platform();
    let c: &Cluster = platform.cluster.as_ref().unwrap();
    let b_ref = platform.reference.host_bytes_per_s;
    let machine = |d: Device| match d {
        Device::Accelerator(i) => c.accelerators()[i].machine,
        Device::Cpu(j) => c.cpu_machines()[j],
    };
    let over = |l: &dnnplace::model::Link, u: usize| {
        let cost = w.out_cost(u);
        if cost == 0.0 {
            0.0
        } else {
            l.latency_ms + cost * b_ref / l.bytes_per_s
        }
    };
    let mut devices: Vec<Device> = a.to_vec();
    devices.extend((0..c.accelerators().len()).map(Device::Accelerator));
    devices.sort();
    devices.dedup();
    let mut out = Vec::new();
    for d in devices {
        let mu = &c.machines()[machine(d)];
        let mut load = 0.0;
        for v in (0..w.len()).filter(|&v| a[v] == d) {
            load += match d {
                Device::Cpu(_) => w.node(v).cpu_latency,
                Device::Accelerator(i) => {
                    let t = &c.types()[c.accelerators()[i].accelerator_type];
                    match platform.profile_times.get(&t.profile) {
                        Some(times) => times[v],
                        None => w.node(v).fpga_latency * (platform.reference.speed / t.speed),
                    }
                }
            };
        }
        for u in 0..w.len() {
            let receives = a[u] != d && w.successors(u).iter().any(|&x| a[x] == d);
            let sends = a[u] == d && w.successors(u).iter().any(|&x| a[x] != d);
            if sends && d.is_accelerator() && mu.peer.is_none() {
                load += over(&mu.host, u);
            }
            if receives {
                let s = a[u];
                load += if machine(s) != machine(d) {
                    over(&mu.network, u)
                } else {
                    match (s.is_accelerator(), d.is_accelerator(), &mu.peer) {
                        (true, true, Some(p)) => over(p, u),
                        (_, true, _) => over(&mu.host, u),
                        (true, false, Some(_)) => over(&mu.host, u),
                        (_, false, _) => 0.0,
                    }
                };
            }
        }
        out.push((d, load));
    }
    out
}

/// A random assignment of colour classes to devices `0..k` / `0..l` (sometimes one past).
fn random_placement(r: &mut Rng, w: &Workload, k: usize, l: usize) -> Placement {
    let (class, classes) = dnnplace::model::contraction::class_index(w);
    let labels: Vec<Device> = (0..classes)
        .map(|_| {
            if l == 0 || (k > 0 && r.chance(0.7)) {
                let past = u64::from(r.chance(0.05));
                Device::Accelerator(r.below(k as u64 + past) as usize)
            } else {
                Device::Cpu(r.below(l as u64) as usize)
            }
        })
        .collect();
    Placement::new(class.iter().map(|&c| labels[c]).collect())
}

#[test]
fn scorer_matches_the_rule_written_from_scratch() {
    let mut checked = 0;
    for seed in 0..600 {
        let Some(base) = random_workload(
            seed,
            Shape {
                max_nodes: 9,
                ..Shape::default()
            },
        ) else {
            continue;
        };
        let Some(w) = random_cluster(
            seed,
            &base,
            ClusterShape {
                max_devices: 6,
                ..ClusterShape::default()
            },
        ) else {
            continue;
        };
        let costs = ClusterCosts::of(&w);
        let c = w.cluster().unwrap();
        let mut r = Rng::new(seed);
        for _ in 0..4 {
            let p = random_placement(&mut r, &w, c.accelerators().len(), c.cpu_machines().len());
            let e = evaluate_on_cluster(&w, &costs, &p);
            let out_of_range = p.assignment.iter().any(|&d| c.machine_of(d).is_none());
            if out_of_range {
                assert!(
                    !e.is_valid(),
                    "seed {seed}: a device outside the cluster is a violation"
                );
                continue;
            }
            let naive = naive_loads(&w, &p.assignment);
            let expected = naive.iter().map(|&(_, l)| l).fold(0.0, f64::max);
            assert!(
                (e.max_load - expected).abs() <= 1e-9 * expected.max(1.0),
                "seed {seed}: {} vs {expected}",
                e.max_load
            );
            for l in &e.devices {
                let (_, n) = naive.iter().find(|(d, _)| *d == l.device).unwrap();
                assert!(
                    (l.load - n).abs() <= 1e-9 * n.max(1.0),
                    "seed {seed} {}: {} vs {n}",
                    l.device,
                    l.load
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 500, "only {checked} placements checked");
}

#[test]
fn model_md_is_the_exact_special_case_of_the_scorer() {
    let mut checked = 0;
    for seed in 0..800 {
        let Some(w) = random_workload(
            seed,
            Shape {
                max_nodes: 10,
                ..Shape::default()
            },
        ) else {
            continue;
        };
        let costs = ClusterCosts::of(&w);
        let d = w.devices();
        let mut r = Rng::new(seed);
        for _ in 0..5 {
            let p = random_placement(&mut r, &w, d.accelerators, d.cpus);
            let old = evaluate(&w, &p, false);
            let new = evaluate_on_cluster(&w, &costs, &p);
            assert_eq!(
                old.is_valid(),
                new.is_valid(),
                "seed {seed}: {:?} vs {:?}",
                old.violations,
                new.violations
            );
            if !old.is_valid() {
                continue;
            }
            assert_eq!(
                device_loads(&w, &p),
                cluster_loads(&w, &costs, &p),
                "seed {seed}: loads differ"
            );
            assert_eq!(old.max_load.to_bits(), new.max_load.to_bits());
            assert_eq!(old.sync_objective.to_bits(), new.sync_objective.to_bits());
            assert_eq!(old.is_contiguous(), new.is_contiguous(), "seed {seed}");
            checked += 1;
        }
    }
    assert!(checked > 1000, "only {checked} placements checked");
}

#[test]
fn model_md_is_the_exact_special_case_of_the_brute_force() {
    let mut checked = 0;
    for seed in 0..200 {
        let shape = Shape {
            max_nodes: 6,
            max_accelerators: 3,
            max_cpus: 2,
            ..Shape::default()
        };
        let Some(w) = random_workload(seed, shape) else {
            continue;
        };
        let costs = ClusterCosts::of(&w);
        for objective in [Objective::Throughput, Objective::Sync] {
            for contiguous in [true, false] {
                let old = plan(
                    &BruteForce,
                    &Problem {
                        objective,
                        contiguous,
                        ..Problem::throughput(&w)
                    },
                )
                .unwrap();
                let new = brute_force(&w, &costs, objective, contiguous).unwrap();
                let old_value = old
                    .outcome
                    .placement
                    .as_ref()
                    .map(|_| old.outcome.objective);
                let new_value = new.best.as_ref().map(|(v, _)| *v);
                assert_eq!(
                    old_value.map(f64::to_bits),
                    new_value.map(f64::to_bits),
                    "seed {seed} {objective:?} contiguous {contiguous}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 400);
}

#[test]
fn brute_force_on_random_clusters() {
    let mut checked = 0;
    for seed in 0..120 {
        let Some(base) = random_workload(
            seed,
            Shape {
                max_nodes: 6,
                ..Shape::default()
            },
        ) else {
            continue;
        };
        let Some(w) = random_cluster(seed, &base, ClusterShape::default()) else {
            continue;
        };
        let costs = ClusterCosts::of(&w);
        let free = brute_force(&w, &costs, Objective::Throughput, false).unwrap();
        let contiguous = brute_force(&w, &costs, Objective::Throughput, true).unwrap();
        match (&free.best, &contiguous.best) {
            (Some((f, _)), Some((c, p))) => {
                assert!(
                    f <= c,
                    "seed {seed}: non-contiguous {f} worse than contiguous {c}"
                );
                let e = evaluate_on_cluster(&w, &costs, p);
                assert!(
                    e.is_valid() && e.is_contiguous() && e.max_load == *c,
                    "seed {seed}"
                );
            }
            (None, Some(_)) => panic!("seed {seed}: a contiguous plan but no plan"),
            _ => {}
        }
        // Renumbering the machines (reversing their order) renames devices only.
        let c = w.cluster().unwrap();
        let reversed = Cluster::new(
            c.types().to_vec(),
            c.machines().iter().rev().cloned().collect(),
            c.cpu_price_per_hour(),
        )
        .unwrap();
        let w2 = w
            .with_platform(Platform {
                cluster: Some(reversed),
                ..w.platform().clone()
            })
            .unwrap();
        let again = brute_force(&w2, &ClusterCosts::of(&w2), Objective::Throughput, true).unwrap();
        assert_eq!(
            contiguous.best.as_ref().map(|b| b.0),
            again.best.as_ref().map(|b| b.0),
            "seed {seed}: the machine order changed the optimum"
        );
        checked += 1;
    }
    assert!(checked > 60, "{checked}");
}

#[test]
fn workload_json_keeps_the_cluster_sections() {
    let w = example_workload();
    let text = workload_to_json(&w);
    let back = parse_workload(&text).unwrap();
    assert_eq!(back.platform(), w.platform());
    assert_eq!(back.devices(), w.devices());
    // A file without the sections reads as MODEL.md and writes no new keys.
    let plain = random_workload(3, Shape::default()).unwrap();
    let json = workload_to_json(&plain);
    assert!(
        !json.contains("latencies") && !json.contains("cluster") && !json.contains("reference")
    );
    assert_eq!(
        *parse_workload(&json).unwrap().platform(),
        Platform::default()
    );
}

#[test]
fn bad_cluster_sections_name_the_field() {
    let base = std::fs::read_to_string(example("workload.json")).unwrap();
    let missing = base.replace(
        r#""latencies": {"fast-gpu": 4, "slow-gpu": 6}"#,
        r#""latencies": {"fast-gpu": 4}"#,
    );
    let e = parse_workload(&missing).unwrap_err().to_string();
    assert!(
        e.contains("nodes[2].latencies") && e.contains("slow-gpu"),
        "{e}"
    );
    let negative = base.replace(
        r#""fast-gpu": 4, "slow-gpu": 6"#,
        r#""fast-gpu": -4, "slow-gpu": 6"#,
    );
    let e = parse_workload(&negative).unwrap_err().to_string();
    assert!(e.contains("node 3") && e.contains("latencies"), "{e}");
    let cluster = base.replacen(
        "\"nodes\"",
        r#""cluster": {"machines": [{"cpus": 1, "host": {"bytes_per_s": 0}, "accelerators": [{"profile": "v100", "count": 1}]}]}, "nodes""#,
        1,
    );
    let e = parse_workload(&cluster).unwrap_err().to_string();
    assert!(e.contains("cluster.machines[0].host.bytes_per_s"), "{e}");
    let unknown = base.replacen(
        "\"nodes\"",
        r#""cluster": {"machines": [{"gpus": 1}]}, "nodes""#,
        1,
    );
    let e = parse_workload(&unknown).unwrap_err().to_string();
    assert!(e.contains("cluster") && e.contains("gpus"), "{e}");
}

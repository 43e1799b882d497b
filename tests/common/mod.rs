//! Small random workloads for property tests, built from a seed so failures reproduce.
#![allow(dead_code)]

pub mod llama;

use dnnplace::model::{DeviceSet, Node, NodeMemory, Workload};

/// A linear congruential generator for the choices of an instance (the parallel-layout
/// tests draw their instances with it: the same seeds give the same instances).
pub struct Pick(pub u64);

impl Pick {
    pub fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
    pub fn of<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.next(xs.len() as u64) as usize]
    }
    /// A value in `[lo, hi]` on a grid of 10⁻⁶ of the range.
    pub fn real(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.next(1_000_001) as f64 / 1e6
    }
}

/// xorshift64*: enough randomness for test instances, no dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    /// A value with few significant digits, sometimes zero.
    pub fn value(&mut self, max: u64) -> f64 {
        if self.chance(0.15) {
            0.0
        } else {
            (1 + self.below(max * 4)) as f64 / 4.0
        }
    }
}

/// Knobs of [`random_workload`].
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub max_nodes: u64,
    pub training: bool,
    pub color_classes: bool,
    pub unsupported: bool,
    pub tight_memory: bool,
    pub max_accelerators: u64,
    pub max_cpus: u64,
}

impl Default for Shape {
    fn default() -> Self {
        Shape {
            max_nodes: 8,
            training: true,
            color_classes: true,
            unsupported: true,
            tight_memory: true,
            max_accelerators: 3,
            max_cpus: 2,
        }
    }
}

/// A random valid workload, or `None` when the draw is invalid (e.g. infeasible).
///
/// Forward nodes come first; backward nodes (in training draws) come after them, so every
/// edge `i → j` with `i < j` never goes backward → forward. Backward nodes usually share
/// the colour class of a forward node ("mirror"), sometimes have a class of their own.
pub fn random_workload(seed: u64, shape: Shape) -> Option<Workload> {
    let mut r = Rng::new(seed);
    let n = 1 + r.below(shape.max_nodes) as usize;
    let backward = if shape.training && n >= 3 && r.chance(0.5) {
        r.below(n as u64 / 2 + 1) as usize
    } else {
        0
    };
    let forward = n - backward;
    let mut nodes = Vec::new();
    for i in 0..n {
        let is_backward = i >= forward;
        let color_class = if !shape.color_classes {
            None
        } else if is_backward {
            if r.chance(0.8) {
                Some(r.below(forward as u64) as i64)
            } else {
                Some(100 + r.below(2) as i64)
            }
        } else if r.chance(0.3) {
            Some(r.below(forward as u64) as i64)
        } else if r.chance(0.5) {
            Some(i as i64)
        } else {
            None
        };
        nodes.push(Node {
            id: 10 * i as i64 + 3,
            name: Some(format!("n{i}")),
            fpga_latency: r.value(10),
            cpu_latency: r.value(30),
            size_bytes: r.value(8),
            supported_on_accelerator: !(shape.unsupported && r.chance(0.12)),
            is_backward,
            color_class,
            layer_id: None,
            module: None,
            memory: None,
        });
    }
    let mut cost = vec![0.0; n];
    for c in cost.iter_mut() {
        *c = r.value(4);
    }
    let mut edges = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            let p = if j == i + 1 { 0.6 } else { 0.25 };
            if r.chance(p) {
                edges.push((nodes[i].id, nodes[j].id, cost[i], 0.0));
            }
        }
    }
    let total: f64 = nodes.iter().map(|x| x.size_bytes).sum();
    let k = 1 + r.below(shape.max_accelerators) as usize;
    let memory = if shape.tight_memory && r.chance(0.5) {
        (total / k as f64).ceil() + r.below(4) as f64
    } else {
        total + 1.0
    };
    let devices = DeviceSet {
        accelerators: k,
        memory_per_accelerator_bytes: memory,
        cpus: r.below(shape.max_cpus + 1) as usize,
    };
    Workload::new(nodes, edges, devices).ok()
}

/// Path to the shared workloads, or `None` (with a printed reason) when absent.
pub fn shared_dir(sub: &str) -> Option<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/workloads")
        .join(sub);
    if dir.is_dir() {
        Some(dir)
    } else if std::env::var_os("DNNPLACE_REQUIRE_SHARED").is_some() {
        panic!(
            "{} is absent but DNNPLACE_REQUIRE_SHARED is set",
            dir.display()
        );
    } else {
        eprintln!("SKIPPED: {} is absent (tests over the published workloads need ../shared beside the checkout)", dir.display());
        None
    }
}

/// How [`staged_workload`] draws: the salt of its second random stream, the chance that
/// a node stashes activations, whether forward edges carry output bytes (random; else the
/// edge's own `size`), and the chance that the memory is tight.
pub struct Staging {
    pub salt: u64,
    pub stash: f64,
    pub output_bytes: bool,
    pub tight: f64,
}

/// A random training workload ([`random_workload`], at most 6 nodes, 3 accelerators, 1 CPU)
/// whose backward nodes mirror a forward node's class, with a stash on some nodes and a
/// memory that the stash often makes bind (`staging`).
pub fn staged_workload(seed: u64, staging: Staging) -> Option<Workload> {
    let shape = Shape {
        max_nodes: 6,
        max_accelerators: 3,
        max_cpus: 1,
        ..Shape::default()
    };
    let w = random_workload(seed, shape)?;
    let mut r = Rng::new(seed ^ staging.salt);
    let mut nodes = w.nodes().to_vec();
    let forward: Vec<usize> = (0..nodes.len())
        .filter(|&v| !nodes[v].is_backward)
        .collect();
    for v in 0..nodes.len() {
        if nodes[v].is_backward {
            let f = forward[r.below(forward.len() as u64) as usize];
            let class = *nodes[f].color_class.get_or_insert(1000 + f as i64);
            nodes[v].color_class = Some(class);
        }
    }
    for n in nodes.iter_mut() {
        if r.chance(staging.stash) {
            let a = n.size_bytes * r.below(5) as f64 / 4.0;
            n.memory = Some(NodeMemory {
                activation_bytes: a,
                ..NodeMemory::default()
            });
        }
    }
    let edges: Vec<(i64, i64, f64, f64)> = if staging.output_bytes {
        // Most forward nodes send a small tensor; edges of one node may differ (the model
        // takes the largest).
        let out: Vec<f64> = (0..nodes.len()).map(|_| r.below(3) as f64 / 2.0).collect();
        w.edges()
            .iter()
            .map(|e| {
                (
                    nodes[e.from].id,
                    nodes[e.to].id,
                    e.cost,
                    out[e.from] + r.below(2) as f64 / 4.0,
                )
            })
            .collect()
    } else {
        w.edges()
            .iter()
            .map(|e| (nodes[e.from].id, nodes[e.to].id, e.cost, e.size_bytes))
            .collect()
    };
    let total: f64 = nodes
        .iter()
        .map(|n| n.size_bytes + 2.0 * n.memory.map_or(0.0, |m| m.activation_bytes))
        .sum();
    let d = w.devices();
    let memory = if r.chance(staging.tight) {
        (total / d.accelerators as f64).ceil() + r.below(6) as f64
    } else {
        total * 4.0 + 1.0
    };
    Workload::new(
        nodes,
        edges,
        DeviceSet {
            memory_per_accelerator_bytes: memory,
            ..*d
        },
    )
    .ok()
}

/// The generated GPT-2 training graph the schedule tests share: 8 blocks, hidden 256,
/// 4 heads, sequence 128, batch 4, fp16, priced for 4 a100-80gb accelerators and `cpus`
/// CPU cores (by the project's own generator and cost model).
pub fn gpt2_training(cpus: usize) -> Workload {
    use dnnplace::costmodel::{
        find_profile, to_workload, transformer_graph, CostSettings, DType, Style, TransformerSpec,
    };
    let settings = CostSettings {
        accelerator: find_profile("a100-80gb", &[]).unwrap(),
        cpu: find_profile("cpu-core", &[]).unwrap(),
        dtype: DType::Fp16,
        training: true,
        accelerators: 4,
        cpus,
    };
    let g = transformer_graph(
        &TransformerSpec::new(Style::Gpt2, 8, 256, 4, 128, 4),
        DType::Fp16,
    )
    .unwrap();
    to_workload(&g, &settings).unwrap()
}

/// Every labelling of the colour classes of `w` with a stage `0 … p·v − 1` that no forward
/// edge decreases (the chains of p·v ideals of an interleaved plan; drawn backward nodes
/// share a forward node's class), stage `s` being chunk `s / p` of accelerator `s mod p`:
/// `visit(stage of every node, the placement)`. O((p·v)^C · (n + m)) for C classes.
pub fn for_each_interleaved_chain(
    w: &Workload,
    p: usize,
    v: usize,
    mut visit: impl FnMut(&[usize], dnnplace::model::Placement),
) {
    use dnnplace::model::{Device, Placement};
    let mut classes: Vec<Option<i64>> = Vec::new();
    let class_of: Vec<usize> = (0..w.len())
        .map(|x| {
            let key = w.node(x).color_class.or(Some(-1 - x as i64));
            match classes.iter().position(|c| *c == key) {
                Some(i) => i,
                None => {
                    classes.push(key);
                    classes.len() - 1
                }
            }
        })
        .collect();
    let mut label = vec![0usize; classes.len()];
    loop {
        let stage: Vec<usize> = (0..w.len()).map(|x| label[class_of[x]]).collect();
        let chained = w.edges().iter().all(|e| {
            w.node(e.from).is_backward || w.node(e.to).is_backward || stage[e.from] <= stage[e.to]
        });
        if chained {
            let placement =
                Placement::new(stage.iter().map(|&s| Device::Accelerator(s % p)).collect())
                    .with_pieces(stage.iter().map(|&s| s / p).collect());
            visit(&stage, placement);
        }
        let mut i = 0;
        while i < label.len() {
            label[i] += 1;
            if label[i] < p * v {
                break;
            }
            label[i] = 0;
            i += 1;
        }
        if i == label.len() {
            return;
        }
    }
}

/// Runs `command` (the `dnnplace` binary with its arguments), sends it SIGINT (Ctrl-C)
/// after `after`, and returns what it printed and how long it took to exit once signalled.
pub fn interrupted_run(
    command: &mut std::process::Command,
    after: std::time::Duration,
) -> (std::process::Output, std::time::Duration) {
    use std::process::Stdio;
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    // SAFETY: sends SIGINT to the child we spawned (its pid is valid until we wait on it).
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let sent = std::time::Instant::now();
    let run = child.wait_with_output().unwrap();
    (run, sent.elapsed())
}

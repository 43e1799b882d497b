//! Small random clusters for the cluster tests (deterministic per seed): 1–3 accelerator
//! types, 1–3 machines, with or without peer links and CPU cores, links with latency,
//! memory tight against the workload, and per-type node times for some types.

#![allow(dead_code)]

use super::common::{random_workload, Rng, Shape};
use dnnplace::model::{
    AcceleratorType, Cluster, Link, Machine, Platform, ProfileTimes, Reference, Workload,
};

/// Knobs of [`random_cluster`].
#[derive(Clone, Copy, Debug)]
pub struct ClusterShape {
    pub max_types: u64,
    pub max_machines: u64,
    /// Largest number of devices (accelerators and CPU cores) in all.
    pub max_devices: usize,
    /// Every machine has a peer link / none has.
    pub peer: Option<bool>,
}

impl Default for ClusterShape {
    fn default() -> Self {
        ClusterShape {
            max_types: 3,
            max_machines: 3,
            max_devices: 5,
            peer: None,
        }
    }
}

fn link(r: &mut Rng) -> Link {
    Link {
        bytes_per_s: [5e9, 1e10, 2e10, 4e10][r.below(4) as usize],
        latency_ms: [0.0, 0.0, 0.25, 0.5][r.below(4) as usize],
    }
}

/// A random cluster for `w` (memory between a third of and all of its total size), and
/// the workload with it: per-type node times for some types, speeds for the others,
/// reference bandwidth 1e10.
pub fn random_cluster(seed: u64, w: &Workload, shape: ClusterShape) -> Option<Workload> {
    let mut r = Rng::new(seed ^ 0x5eed_c105);
    let total: f64 = w.nodes().iter().map(|n| n.size_bytes).sum();
    let types_n = 1 + r.below(shape.max_types) as usize;
    let types: Vec<AcceleratorType> = (0..types_n)
        .map(|t| AcceleratorType {
            name: format!("t{t}"),
            profile: format!("p{t}"),
            memory_bytes: if r.chance(0.5) {
                (total * (1 + r.below(3)) as f64 / 3.0).ceil()
            } else {
                total + 1.0
            },
            price_per_hour: (1 + r.below(5)) as f64,
            speed: [0.5, 1.0, 2.0][r.below(3) as usize],
        })
        .collect();
    let machines_n = 1 + r.below(shape.max_machines) as usize;
    let mut machines = Vec::new();
    let mut devices = 0;
    let mut used = vec![false; types_n];
    for m in 0..machines_n {
        let mut accelerators = Vec::new();
        for _ in 0..1 + r.below(2) {
            let t = r.below(types_n as u64) as usize;
            let count = 1 + r.below(2) as usize;
            if devices + count > shape.max_devices {
                break;
            }
            devices += count;
            used[t] = true;
            accelerators.push((t, count));
        }
        let cpus = if devices < shape.max_devices && r.chance(0.5) {
            1
        } else {
            0
        };
        devices += cpus;
        let peer = match shape.peer {
            Some(true) => Some(link(&mut r)),
            Some(false) => None,
            None => r.chance(0.5).then(|| link(&mut r)),
        };
        machines.push(Machine {
            name: format!("m{m}"),
            accelerators,
            cpus,
            host: link(&mut r),
            peer,
            network: link(&mut r),
        });
    }
    // Types no machine holds are dropped (the cluster rejects them).
    let keep: Vec<usize> = (0..types_n).filter(|&t| used[t]).collect();
    let types: Vec<AcceleratorType> = keep.iter().map(|&t| types[t].clone()).collect();
    for m in &mut machines {
        for e in &mut m.accelerators {
            e.0 = keep.iter().position(|&t| t == e.0).expect("kept");
        }
    }
    let cluster = Cluster::new(types, machines, 0.5).ok()?;
    let mut profile_times = ProfileTimes::default();
    for t in cluster.types() {
        if r.chance(0.5) {
            profile_times.profiles.push(t.profile.clone());
            profile_times
                .times
                .push(w.nodes().iter().map(|_| r.value(10)).collect());
        }
    }
    let reference = Reference {
        profile: "ref".into(),
        speed: 1.0,
        host_bytes_per_s: 1e10,
    };
    w.with_platform(Platform {
        reference,
        profile_times,
        cluster: Some(cluster),
    })
    .ok()
}

/// A random workload of `shape` on a random cluster of `cluster`, both from `seed`.
pub fn random_clustered(seed: u64, shape: Shape, cluster: ClusterShape) -> Option<Workload> {
    random_cluster(seed, &random_workload(seed, shape)?, cluster)
}

/// `method`'s checked plan of `w` on its cluster through the library's one road
/// ([`dnnplace::solve::plan`] with the cluster method behind `Method`); the problem's
/// objective and plan space are the method's (`sync`: `max FW + max BW`).
pub fn cluster_plan(
    w: &Workload,
    limits: &dnnplace::solve::Limits,
    method: dnnplace::solve::cluster::plan::ClusterMethod,
) -> Result<dnnplace::solve::cluster::plan::ClusterPlan, dnnplace::solve::SolveError> {
    use dnnplace::solve::{Objective, Problem};
    let problem = Problem {
        objective: if method.sync() {
            Objective::Sync
        } else {
            Objective::Throughput
        },
        contiguous: method.contiguous(),
        limits: limits.clone(),
        ..Problem::throughput(w)
    };
    let on = dnnplace::solve::cluster::plan::OnCluster(method);
    Ok(dnnplace::solve::plan(&on, &problem)?
        .cluster
        .expect("a workload with a cluster is planned on it"))
}

//! `partitioner`: what a systems engineer tries first — a multilevel graph partitioner.
//! METIS 5 (the `metis` crate, vendored C sources) partitions the colour-class graph into
//! `p` parts balancing accelerator compute while cutting communication; each part becomes
//! one accelerator; the plan is then repaired and scored under our model.
//!
//! The METIS graph: one vertex per colour class, weighted by its Σ fpgaLatency; for every
//! edge `u → x` between classes, an undirected edge weighted `c(u)` (parallel weights
//! added). METIS needs integers: vertex weights are scaled so that the total is 10⁶
//! (rounded), edge weights likewise (at least 1). METIS minimises the weighted edge cut
//! subject to the parts' weights being within 3% of equal (its default `ufactor` = 30).
//! The cut counts every edge, while our model charges `c(u)` once per receiving device:
//! that difference (and the balance ignoring communication) is what the baseline shows.
//!
//! After partitioning, [`super::repair`] moves classes that may not run on accelerators
//! to CPUs and moves the largest classes off accelerators that exceed their memory, with
//! a note saying how many. The part count `p` runs over `1..=k`; the plan with the least
//! TPS (by the evaluator) is returned and the note says which `p` won. METIS's seed is
//! `Limits::seed`, so runs are deterministic.
//!
//! METIS prints a warning with `printf` when a recursive bisection runs out of vertices
//! (zero-weight classes, more parts than a side can hold) — hundreds of lines on graphs
//! without edges — and goes on. Standard output carries the reports (`--json`), so while
//! METIS runs, file descriptor 1 points at `/dev/null` ([`QuietStdout`]; the plan is
//! scored like any other); METIS calls are serialised by a lock for that.
//!
//! Complexity: k METIS calls, each O((C + A) log C)-ish for C classes and A class arcs,
//! plus one evaluation O(n + m) each.

use super::{infeasible_outcome, repair, scored_outcome, throughput_only};
use crate::model::grouping::Grouping;
use crate::model::{Device, Workload};
use crate::score::tps;
use crate::solve::{
    Infeasibility, Method, MethodId, Outcome, PartitionFailure, Problem, SolveError,
};

/// METIS k-way partition of the class graph (`--method partitioner`).
pub struct Partitioner;

impl Method for Partitioner {
    fn id(&self) -> MethodId {
        MethodId::Partitioner
    }

    fn supports(&self, problem: &Problem) -> Result<(), crate::solve::Unsupported> {
        throughput_only(problem)?;
        if problem.contiguous {
            return Err(crate::solve::Unsupported::PartitionerContiguous);
        }
        Ok(())
    }

    fn solve(&self, problem: &Problem) -> Result<Outcome, SolveError> {
        let w = problem.workload;
        let m = Grouping::classes(w);
        let graph = MetisGraph::new(w, &m);
        let k = w.devices().accelerators;
        let seed = (problem.limits.seed % (i32::MAX as u64)) as i32;
        let mut best: Option<(f64, Vec<Device>, usize, Vec<String>)> = None;
        let mut failures = Vec::new();
        let budget = problem.limits.budget();
        let mut stopped = None;
        for parts in 1..=k.min(m.len()).max(1) {
            if k == 0 {
                break;
            }
            // Between two partitions: the time limit and Ctrl-C end the search with the
            // best partition so far.
            if let (true, Err(e)) = (best.is_some(), budget.check()) {
                failures.push(PartitionFailure::Stopped {
                    reason: e.clone(),
                    parts,
                });
                stopped = Some(e);
                break;
            }
            let part = match graph.partition(parts, seed) {
                Ok(p) => p,
                Err(e) => {
                    failures.push(PartitionFailure::Metis { parts, message: e });
                    continue;
                }
            };
            let mut device: Vec<Device> = part
                .iter()
                .map(|&p| Device::Accelerator(p as usize))
                .collect();
            let mut notes = Vec::new();
            if repair(&m, w, &mut device, &mut notes).is_none() {
                failures.push(PartitionFailure::ClassUnplaced { parts });
                continue;
            }
            let tps = tps(w, &m.placement(&device));
            if best.as_ref().is_none_or(|(b, ..)| tps < *b) {
                best = Some((tps, device, parts, notes));
            }
        }
        let Some((_, device, parts, mut notes)) = best else {
            // Without an accelerator the loop tried nothing, so there are no failures.
            let reason = if k == 0 {
                Infeasibility::NothingToPartitionOnto
            } else {
                Infeasibility::NoPartition { failures }
            };
            return Ok(infeasible_outcome(self.id(), reason));
        };
        notes.insert(
            0,
            format!("best of METIS k-way partitions into 1..={k} parts: {parts} parts"),
        );
        notes.extend(failures.iter().map(ToString::to_string));
        let placement = m.placement(&device).canonical();
        Ok(super::cut_short(
            scored_outcome(self.id(), problem, placement, notes),
            stopped,
        ))
    }
}

/// The class graph in METIS's CSR form with integer weights.
pub struct MetisGraph {
    xadj: Vec<metis::Idx>,
    adjncy: Vec<metis::Idx>,
    adjwgt: Vec<metis::Idx>,
    vwgt: Vec<metis::Idx>,
}

impl MetisGraph {
    /// Builds the graph of the module documentation.
    pub fn new(w: &Workload, m: &Grouping) -> MetisGraph {
        let n = m.len();
        let mut weight: std::collections::BTreeMap<(usize, usize), f64> = Default::default();
        for e in w.edges() {
            let (a, b) = (m.group_of[e.from], m.group_of[e.to]);
            if a != b && w.out_cost(e.from) > 0.0 {
                *weight.entry((a.min(b), a.max(b))).or_insert(0.0) += w.out_cost(e.from);
            }
        }
        let total_edge: f64 = weight.values().sum();
        let total_compute: f64 = m.groups.iter().map(|g| g.fpga_latency).sum();
        let scale = |x: f64, total: f64| {
            if total > 0.0 {
                (x / total * 1e6).round() as metis::Idx
            } else {
                0
            }
        };
        let mut adj: Vec<Vec<(usize, metis::Idx)>> = vec![Vec::new(); n];
        for (&(a, b), &c) in &weight {
            let wgt = scale(c, total_edge).max(1);
            adj[a].push((b, wgt));
            adj[b].push((a, wgt));
        }
        let mut xadj = Vec::with_capacity(n + 1);
        let (mut adjncy, mut adjwgt) = (Vec::new(), Vec::new());
        xadj.push(0);
        for list in &adj {
            for &(b, wgt) in list {
                adjncy.push(b as metis::Idx);
                adjwgt.push(wgt);
            }
            xadj.push(adjncy.len() as metis::Idx);
        }
        let vwgt = m
            .groups
            .iter()
            .map(|g| scale(g.fpga_latency, total_compute))
            .collect();
        MetisGraph {
            xadj,
            adjncy,
            adjwgt,
            vwgt,
        }
    }

    /// The part of each class in a k-way partition into `parts` parts.
    pub fn partition(&self, parts: usize, seed: i32) -> Result<Vec<metis::Idx>, String> {
        let n = self.xadj.len() - 1;
        let mut part = vec![0; n];
        if parts <= 1 {
            return Ok(part);
        }
        let _quiet = QuietStdout::new();
        metis::Graph::new(1, parts as metis::Idx, &self.xadj, &self.adjncy)
            .map_err(|e| e.to_string())?
            .set_vwgt(&self.vwgt)
            .set_adjwgt(&self.adjwgt)
            .set_option(metis::option::Seed(seed))
            .part_kway(&mut part)
            .map_err(|e| e.to_string())?;
        Ok(part)
    }
}

/// While alive, file descriptor 1 (standard output) points at `/dev/null`, so what C code
/// prints cannot corrupt the reports; dropping it flushes C's buffers and puts standard
/// output back. One at a time (a process-wide lock).
struct QuietStdout {
    saved: libc::c_int,
    _lock: std::sync::MutexGuard<'static, ()>,
}

static STDOUT_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl QuietStdout {
    fn new() -> QuietStdout {
        let lock = STDOUT_LOCK
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // SAFETY: plain descriptor calls; Rust's stdout writes straight to fd 1 (it is
        // flushed first), so nothing of ours is redirected by mistake.
        let saved = unsafe {
            let _ = std::io::Write::flush(&mut std::io::stdout());
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
            let saved = if null >= 0 { libc::dup(1) } else { -1 };
            let saved = if saved >= 0 && libc::dup2(null, 1) < 0 {
                libc::close(saved);
                -1
            } else {
                saved
            };
            if null >= 0 {
                libc::close(null);
            }
            saved
        };
        QuietStdout { saved, _lock: lock }
    }
}

impl Drop for QuietStdout {
    fn drop(&mut self) {
        if self.saved >= 0 {
            // SAFETY: flushes C's stdio buffers into the redirected fd, then restores fd 1.
            unsafe {
                libc::fflush(std::ptr::null_mut());
                libc::dup2(self.saved, 1);
                libc::close(self.saved);
            }
        }
    }
}

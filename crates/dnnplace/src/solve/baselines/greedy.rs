//! `greedy`: the latency baseline. Walk the groups of the colour-class DAG
//! ([`Contraction`]) in topological order and fill accelerator 0 while its memory allows,
//! then accelerator 1, and so on; when the accelerators are used up, everything left goes
//! to the CPU. A group that may not run on an accelerator (or exceeds one accelerator's
//! memory by itself) goes to a CPU and closes the current accelerator, so every
//! accelerator holds one run of consecutive groups: one contiguous piece. Under the latency
//! rules a run is one call only in an inference graph: in a training graph an accelerator's
//! backward nodes wait for the later forward nodes, so it makes two calls; when that is more
//! than `--pieces` allows, the outcome is infeasible with that reason.
//!
//! CPU runs: under the latency rules CPU cores are as many as needed, so each run of
//! consecutive CPU groups gets its own core (contiguous). Under the throughput rules the
//! runs share the ℓ cores (run `r` on core `min(r, ℓ−1)`); when that breaks contiguity of
//! a contiguous problem, the outcome is infeasible with that reason.
//!
//! Complexity: O(n + m) after the contraction.

use super::{contiguity_infeasible_outcome, infeasible_outcome, scored_outcome};
use crate::model::contraction::Contraction;
use crate::model::{Device, DeviceSet};
use crate::solve::{Infeasibility, Method, MethodId, Objective, Outcome, Problem, SolveError};

/// Topological first-fit onto accelerators (`--method greedy`).
pub struct Greedy;

impl Method for Greedy {
    fn id(&self) -> MethodId {
        MethodId::Greedy
    }

    fn solve(&self, problem: &Problem) -> Result<Outcome, SolveError> {
        let w = problem.workload;
        let d = w.devices();
        let latency = matches!(problem.objective, Objective::Latency { .. });
        let c = Contraction::new(w);
        let (group_device, cpu_runs) = fill(&c, d, latency);
        if !latency && cpu_runs > 0 && d.cpus == 0 {
            return Ok(infeasible_outcome(self.id(), Infeasibility::FillNeedsCpu));
        }
        let placement =
            crate::model::Placement::new(c.group_of.iter().map(|&g| group_device[g]).collect());
        let mut notes = Vec::new();
        if cpu_runs > 0 {
            notes.push(format!("{cpu_runs} runs of groups on CPUs"));
        }
        if problem.contiguous && !latency && cpu_runs > d.cpus {
            let e = crate::score::evaluate(w, &placement, false);
            if !e.is_contiguous() {
                return Ok(contiguity_infeasible_outcome(
                    self.id(),
                    Infeasibility::FillNotContiguous {
                        runs: cpu_runs,
                        cpus: d.cpus,
                    },
                ));
            }
        }
        if let Objective::Latency { pieces } = problem.objective {
            // A run of groups is one piece of the order, but in a training graph it is two
            // calls: the backward nodes come back after later forward nodes ran elsewhere.
            let calls = crate::score::evaluate(w, &placement, true)
                .latency
                .map_or(0, |l| l.max_pieces());
            if calls > pieces {
                return Ok(infeasible_outcome(
                    self.id(),
                    Infeasibility::FillTooManyCalls { calls, pieces },
                ));
            }
        }
        Ok(scored_outcome(self.id(), problem, placement, notes))
    }
}

/// The fill of the module documentation: the device of every group, and the number of
/// runs of consecutive CPU groups (each on its own core under the latency rules, else on
/// core `min(r, ℓ−1)`).
fn fill(c: &Contraction, d: &DeviceSet, latency: bool) -> (Vec<Device>, usize) {
    let (k, memory) = (d.accelerators, d.memory_per_accelerator_bytes);
    let mut group_device = vec![Device::Cpu(0); c.len()];
    let (mut acc, mut used, mut open) = (0usize, 0.0f64, false);
    let mut cpu_runs = 0usize;
    let mut on_cpu = false;
    for (g, group) in c.groups.iter().enumerate() {
        let mut placed = None;
        if group.fits_accelerator(memory) && acc < k {
            if open && used + group.size_bytes > memory {
                acc += 1;
                open = false;
                used = 0.0;
            }
            if acc < k {
                placed = Some(Device::Accelerator(acc));
                used += group.size_bytes;
                open = true;
            }
        }
        group_device[g] = match placed {
            Some(dev) => {
                on_cpu = false;
                dev
            }
            None => {
                if open {
                    acc += 1;
                    open = false;
                    used = 0.0;
                }
                if !on_cpu {
                    cpu_runs += 1;
                    on_cpu = true;
                }
                let run = cpu_runs - 1;
                Device::Cpu(if latency {
                    run
                } else {
                    run.min(d.cpus.saturating_sub(1))
                })
            }
        };
    }
    (group_device, cpu_runs)
}

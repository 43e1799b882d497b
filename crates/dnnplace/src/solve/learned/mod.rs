//! The search placers the reviewers asked to compare with: a policy-gradient placer in the
//! style of the Hierarchical Device Placer ([`policy_gradient`], `--method rl`) and a
//! biased random-key genetic algorithm, the engine under REGAL ([`brkga`],
//! `--method genetic`). Neither has a cost model of its own: both only ask the independent
//! scorer ([`crate::score::evaluate`]) for the objective of the plans they sample, and both
//! keep the best plan seen.
//!
//! This file holds what they share:
//!
//! - [`Units`], the grouper: the units a placer assigns to devices. For the contiguous
//!   problem they are clusters of our coarsening ([`crate::solve::coarsen::hierarchy`]):
//!   intervals of topological orders of the group DAG, numbered topologically, the finest
//!   level with at most `G = min(256, 20·(k+ℓ))` clusters (HDP's group count). For the
//!   non-contiguous problem they are the colour classes when there are at most `G`, else
//!   the same clusters. A unit's nodes always go to one device.
//! - [`Scorer`]: the reward. A plan of device-per-unit is expanded to nodes and evaluated by
//!   the scorer (on a workload with a cluster, [`crate::score::cluster`]'s TPS or sync with
//!   its contiguity, machines filled in order; for latency, whose CPU cores are as many as needed (MODEL.md), the
//!   placers see one CPU and each CPU unit is given its own core); a plan that breaks a rule (memory, support, colour classes), a promised
//!   contiguity or a piece limit scores `None`. It counts evaluations and records the best
//!   objective so far against wall time and evaluations (the [`TracePoint`]s of the
//!   time-to-quality plots; their times count from the start of the search, after the
//!   units are built — milliseconds of coarsening on the published workloads).
//! - [`finish`]: the outcome: the best plan, the lower bound every method reports (the
//!   combinatorial max-load bound of [`crate::solve::bounds::load`] for TPS and
//!   sync — `max_d FW(d) + max_d BW(d) ≥ max_d (FW(d) + BW(d))`, so a max-load bound bounds
//!   sync too — and the critical-path bound of [`crate::solve::bounds::latency`] for
//!   latency; on a cluster the cluster DP's set and volume bounds, and for contiguous plans
//!   its chain bound: [`crate::solve::cluster`]), `Optimal` when the plan meets that bound
//!   within 1e-7 relative, else
//!   `Feasible` with why the search stopped.
//!
//! Both methods draw from `rand`'s [`ChaCha8Rng`] seeded with `--seed` (the crate is pinned,
//! and ChaCha's stream is value-stable), so a seed gives the same plans on every platform.

pub mod brkga;
pub mod decode;
pub mod policy_gradient;

use std::time::Instant;

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

use super::bounds::cluster::chain::chain_bound;
use super::bounds::cluster::set::set_bound;
use super::bounds::cluster::volume::volume_bound;
use super::bounds::latency as latency_bound;
use super::bounds::load as load_bounds;
use super::budget::{Budget, Exhausted};
use super::coarsen::hierarchy::{Caps, Hierarchy, Level};
use super::{
    MethodId, Objective, Outcome, Problem, SolveError, Stats, Status, StopReason, TracePoint,
};
use crate::model::contraction::Contraction;
use crate::model::grouping::Grouping;
use crate::model::ClusterCosts;
use crate::model::{Device, Placement, Workload};
use crate::score::contiguity::ClassGraph;
use crate::score::{evaluate, evaluate_on_cluster_in};
use decode::Devices;

/// Plans within this relative distance of their bound are proven optimal (as `auto`).
const CLOSED: f64 = 1e-7;

/// HDP's group count for `devices` devices: `min(256, 20 · devices)`, at least 1.
pub fn group_count(devices: usize) -> usize {
    (20 * devices).clamp(1, 256)
}

/// The scorer evaluations a search needed to come within `fraction` (0.01 for 1 %) of
/// `reference`: the evaluation count of the first trace point at most
/// `reference · (1 + fraction)`; `None` if it never did.
pub fn evaluations_within(trace: &[TracePoint], reference: f64, fraction: f64) -> Option<u64> {
    trace
        .iter()
        .find(|t| t.objective <= reference * (1.0 + fraction))
        .map(|t| t.evaluations)
}

/// The units a placer assigns (module docs), with what the decoders need.
#[derive(Clone, Debug)]
pub struct Units {
    pub grouping: Grouping,
    /// Predecessor units (arcs of the unit DAG; units are numbered topologically). Empty
    /// lists for colour classes, where the non-contiguous decoders need no order.
    pub pred: Vec<Vec<u32>>,
    /// Where the units came from, for the notes.
    pub source: String,
}

impl Units {
    /// The units of `w` for a problem that is `contiguous` or not, at most about `target`
    /// of them (more only when coarsening stops shrinking above it).
    pub fn new(w: &Workload, contiguous: bool, target: usize, budget: &Budget) -> Units {
        if !contiguous {
            let classes = Grouping::classes(w);
            if classes.len() <= target {
                let n = classes.len();
                return Units {
                    grouping: classes,
                    pred: vec![Vec::new(); n],
                    source: format!("{n} colour classes"),
                };
            }
        }
        let c0 = Contraction::new(w);
        let groups = c0.len();
        let base = Level::from_contraction(w, &c0);
        let d = w.devices();
        let caps = Caps::for_devices(
            &base,
            d.accelerators,
            d.cpus,
            d.memory_per_accelerator_bytes,
        );
        let mut h = Hierarchy::new(base);
        h.coarsen(&caps, target, || !budget.is_exhausted());
        let sizes = h.sizes();
        let level = sizes
            .iter()
            .position(|&s| s <= target)
            .unwrap_or(sizes.len() - 1);
        let map = h.groups_to(level);
        let group_of: Vec<usize> = (0..w.len()).map(|v| map[c0.group_of[v]] as usize).collect();
        let count = sizes[level];
        Units {
            grouping: Grouping::new(w, group_of, count),
            pred: h.levels[level].pred.clone(),
            source: if level == 0 {
                format!("the {groups} groups of the contraction, coarsening not needed")
            } else {
                format!("{count} clusters of coarsening level {level}, from {groups} groups")
            },
        }
    }

    pub fn len(&self) -> usize {
        self.grouping.len()
    }

    pub fn is_empty(&self) -> bool {
        self.grouping.is_empty()
    }
}

/// The reward of the module docs: scores plans, counts evaluations, keeps the best.
pub struct Scorer<'a> {
    problem: &'a Problem<'a>,
    units: &'a Units,
    /// On a cluster: its costs and the workload's class graph, for
    /// [`evaluate_on_cluster_in`].
    cluster: Option<(ClusterCosts, ClassGraph)>,
    started: Instant,
    pub evaluations: u64,
    pub best: Option<(f64, Placement)>,
    pub trace: Vec<TracePoint>,
}

impl<'a> Scorer<'a> {
    pub fn new(problem: &'a Problem<'a>, units: &'a Units) -> Self {
        let w = problem.workload;
        Scorer {
            problem,
            units,
            cluster: w
                .cluster()
                .map(|_| (ClusterCosts::of(w), ClassGraph::new(w))),
            started: Instant::now(),
            evaluations: 0,
            best: None,
            trace: Vec::new(),
        }
    }

    /// The objective of the plan putting unit `g` on `device[g]`, by the scorer; `None` when
    /// it breaks a rule, a promised contiguity or the piece limit. O(n + m) per call.
    pub fn score(&mut self, device: &[Device]) -> Option<f64> {
        self.evaluations += 1;
        let latency = matches!(self.problem.objective, Objective::Latency { .. });
        let placement = if latency {
            // CPU cores are as many as needed (MODEL.md): each CPU unit gets its own core.
            let mut next = 0;
            let own: Vec<Device> = device
                .iter()
                .map(|&d| match d {
                    Device::Cpu(_) => {
                        next += 1;
                        Device::Cpu(next - 1)
                    }
                    accelerator => accelerator,
                })
                .collect();
            self.units.grouping.placement(&own)
        } else {
            self.units.grouping.placement(device)
        };
        let value = self.value(&placement, latency)?;
        if !value.is_finite() {
            return None;
        }
        if self.best.as_ref().is_none_or(|(b, _)| value < *b) {
            self.trace.push(TracePoint {
                time_s: self.started.elapsed().as_secs_f64(),
                evaluations: self.evaluations,
                objective: value,
            });
            self.best = Some((value, placement));
        }
        Some(value)
    }

    /// The objective of `placement` by the scorer (on the cluster when there is one),
    /// `None` when it breaks a rule, a promised contiguity or the piece limit.
    fn value(&self, placement: &Placement, latency: bool) -> Option<f64> {
        let (w, objective) = (self.problem.workload, self.problem.objective);
        if let Some((costs, classes)) = &self.cluster {
            let e = evaluate_on_cluster_in(w, costs, classes, placement);
            if !e.is_valid() || (self.problem.contiguous && !e.is_contiguous()) {
                return None;
            }
            return Some(match objective {
                Objective::Sync => e.sync_objective,
                _ => e.max_load,
            });
        }
        let e = evaluate(w, placement, latency);
        if !e.is_valid() || (self.problem.contiguous && !e.is_contiguous()) {
            return None;
        }
        if let Objective::Latency { pieces } = objective {
            if e.latency.is_none() || e.max_pieces() > pieces {
                return None;
            }
        }
        Some(objective.value(&e))
    }
}

/// The generator of a search seeded with `seed` (module docs).
pub fn seeded(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// A uniform draw in `[0, 1)` with 53 random bits (`rand`'s standard `f64`).
pub fn unit_interval(rng: &mut ChaCha8Rng) -> f64 {
    rng.random::<f64>()
}

/// An upper estimate of any plan's objective: every node at its slower device time plus
/// every edge's cost, twice (sync adds two maxima). The penalty scale of infeasible samples.
pub fn objective_ceiling(w: &Workload) -> f64 {
    let compute: f64 = w
        .nodes()
        .iter()
        .map(|v| v.fpga_latency.max(v.cpu_latency))
        .sum();
    let communication: f64 = w.edges().iter().map(|e| e.cost).sum();
    2.0 * (compute + communication).max(1e-12)
}

/// The lower bound every method reports (module docs), within `budget`.
pub fn lower_bound(problem: &Problem, budget: Budget) -> f64 {
    let w = problem.workload;
    if w.cluster().is_some() {
        return cluster_bound(problem, &budget);
    }
    match problem.objective {
        Objective::Latency { .. } => {
            let d = w.devices();
            let may: Vec<bool> = (0..w.len())
                .map(|v| {
                    d.accelerators > 0
                        && w.node(v).supported_on_accelerator
                        && w.node(v).size_bytes <= d.memory_per_accelerator_bytes
                })
                .collect();
            latency_bound::latency_lower_bound(&latency_bound::finish_bounds(w, &may))
        }
        Objective::Throughput | Objective::Sync => {
            let (units, _) = Grouping::units(w, problem.contiguous);
            let hyperedges = units.hyperedges(w, false);
            load_bounds::LowerBound::new(&units, &hyperedges, w.devices(), load_bounds::Tests::ALL)
                .within(budget)
                .value()
        }
    }
}

/// The bound on a cluster, TPS or sync: the best of the cluster DP's bounds that hold for
/// the problem's plans — the set bound and the volume bound (every plan), the chain bound
/// (contiguous plans) — each within a third of what is left of `budget` (at most 10 s for
/// the volume bound). A TPS bound bounds sync too (`max FW + max BW ≥ max (FW + BW)`).
fn cluster_bound(problem: &Problem, budget: &Budget) -> f64 {
    let w = problem.workload;
    let costs = ClusterCosts::of(w);
    let third = budget.remaining_s().map_or(10.0, |t| (t / 3.0).min(10.0));
    let part = Budget::new(Some(third), None);
    let mut bound = set_bound(w, &costs, &part);
    if problem.contiguous {
        bound = bound.max(chain_bound(w, &costs, &Budget::new(Some(third), None)));
    }
    bound.max(volume_bound(w, &costs, third))
}

/// How a search ended: `stopped` when the budget cut it short, else `what` it ran to.
pub struct Ending {
    pub stopped: Option<Exhausted>,
    pub what: String,
}

/// The outcome of a search (module docs): the best plan with the bound computed within
/// `bound_budget`, the trace and `notes` in the statistics.
pub fn finish(
    method: MethodId,
    problem: &Problem,
    scorer: Scorer,
    ending: Ending,
    bound_budget: Budget,
    mut notes: Vec<String>,
) -> Outcome {
    notes.push(format!(
        "{} scorer evaluations, {} improvements of the best plan",
        scorer.evaluations,
        scorer.trace.len()
    ));
    let reason = match ending.stopped {
        Some(e) => {
            notes.push(format!("{e} after {}", ending.what));
            StopReason::from(e)
        }
        None => StopReason::SearchExhausted {
            what: format!("{} ended (a heuristic search)", ending.what),
        },
    };
    let stats = Stats {
        notes,
        trace: scorer.trace,
        evaluations: Some(scorer.evaluations),
        ..Stats::default()
    };
    let Some((objective, placement)) = scorer.best else {
        return Outcome {
            method,
            placement: None,
            objective: f64::INFINITY,
            bound: 0.0,
            status: Status::NoPlan { reason },
            stats,
        };
    };
    let bound = lower_bound(problem, bound_budget).min(objective);
    let status = if objective <= bound * (1.0 + CLOSED) {
        Status::Optimal
    } else {
        Status::Feasible { reason }
    };
    Outcome {
        method,
        // Devices of a cluster differ (types, machines): their names stay.
        placement: Some(if problem.workload.cluster().is_some() {
            placement
        } else {
            placement.canonical()
        }),
        objective,
        bound,
        status,
        stats,
    }
}

/// The budget of the search and of the bound after it: the search may take 90% of the
/// time limit, the bound the rest (both the whole memory budget).
pub fn budgets(problem: &Problem) -> (Budget, Budget) {
    let whole = problem.limits.budget();
    (whole.share(0.9), whole)
}

/// What every search starts from: its two budgets ([`budgets`]), the devices in the
/// decoders' terms and the units ([`Units`], at most [`group_count`] of the devices).
pub struct Setup<'a> {
    pub problem: &'a Problem<'a>,
    /// The search's budget (90% of the time limit).
    pub search: Budget,
    /// The bound's budget, spent by [`Setup::finish`].
    pub bound_budget: Budget,
    pub devices: Devices,
    pub units: Units,
}

impl<'a> Setup<'a> {
    /// The setup of `method`'s search; on a cluster, TPS and sync only.
    pub fn new(problem: &'a Problem<'a>, method: MethodId) -> Result<Self, SolveError> {
        let (search, bound_budget) = budgets(problem);
        let d = problem.workload.devices();
        let latency = matches!(problem.objective, Objective::Latency { .. });
        let devices = match problem.workload.cluster() {
            Some(_) if latency => {
                return Err(SolveError::Unsupported {
                    method,
                    what: "the latency objective on a cluster".into(),
                })
            }
            Some(cluster) => Devices::cluster(cluster),
            // Latency has as many CPU cores as needed, all alike: one CPU label, each CPU
            // unit on its own core ([`Scorer::score`]); a unit is contiguous by itself, so
            // no unit needs to share a core.
            None => Devices::machine(
                d.accelerators,
                if latency { 1 } else { d.cpus },
                d.memory_per_accelerator_bytes,
            ),
        };
        let target = group_count(devices.count());
        let units = Units::new(problem.workload, problem.contiguous, target, &search);
        Ok(Setup {
            problem,
            search,
            bound_budget,
            devices,
            units,
        })
    }

    /// A fresh scorer over the units (its clock starts now).
    pub fn scorer(&self) -> Scorer<'_> {
        Scorer::new(self.problem, &self.units)
    }

    /// Reserves `bytes` of the memory budget for `what` (the search's tables); `None` when
    /// they fit, else the outcome of a search that ran 0 of its `steps` (`"generations"`).
    pub fn reserve(
        &self,
        what: &str,
        bytes: f64,
        method: MethodId,
        steps: &str,
        notes: &[String],
    ) -> Option<Outcome> {
        let e = self.search.reserve(what, bytes).err()?;
        let ending = Ending {
            stopped: Some(e),
            what: format!("0 {steps}"),
        };
        Some(self.finish(method, self.scorer(), ending, notes.to_vec()))
    }

    /// The outcome ([`finish`]) with the bound computed within the bound's budget.
    pub fn finish(
        &self,
        method: MethodId,
        scorer: Scorer,
        ending: Ending,
        notes: Vec<String>,
    ) -> Outcome {
        finish(
            method,
            self.problem,
            scorer,
            ending,
            self.bound_budget,
            notes,
        )
    }
}

/// The devices in chain order: accelerators `0..k`, then CPUs `0..ℓ`.
pub fn device_at(index: usize, k: usize) -> Device {
    if index < k {
        Device::Accelerator(index)
    } else {
        Device::Cpu(index - k)
    }
}

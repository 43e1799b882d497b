//! A checked plan on a cluster: the cluster DP's plan (or brute force's, for tiny graphs;
//! when the DP stops without a plan, the greedy chain of [`super::greedy`], with the DP's
//! lower bound), or the cluster IP's ([`crate::solve::cluster::ip`], warm-started from
//! the DP's plan), re-scored by the independent evaluator [`evaluate_on_cluster`] before
//! anyone sees it.
//!
//! The check: the plan breaks no hard rule (devices, colour classes, support, memory per
//! type), is contiguous on the cluster (per device and filling machines in order) unless
//! the IP was asked for non-contiguous plans, and its scored TPS `max_d load(d)` equals
//! the solver's value within `1e-9` relative. A plan that fails is a bug
//! ([`SolveError::Check`]), never printed.
//!
//! **The IP's time** (`--time-limit t`): the volume bound within `0.05 t`, the cluster DP
//! (its plan is the warm start; in the contiguous space its bound is a bound too) within
//! `0.35 t`, the IP with what is left, its model building included (without a limit:
//! 0.5 s, 3.5 s, and the IP runs to its proof). `--ip-experiment
//! nowarm` drops the DP's plan, `nobound` the bounds (the IP on its own, for measuring it).
//!
//! Per-usage optima ([`Tracking::PerUsage`]) are checked the same way, each against its own
//! value; the sweep and the cheapest-cluster search ([`super::sweep`]) read only checked
//! plans.
//!
//! **Behind [`Method`].** [`OnCluster`] is the cluster planner as a method: [`crate::solve::plan`]
//! sends every problem whose workload has a cluster to the [`ClusterMethod`] that
//! [`ClusterMethod::choose`] picks for the method asked for (`auto` is the cluster DP) and
//! returns its checked [`ClusterPlan`] beside the [`Outcome`]; `compare` on a cluster runs
//! the same loop. Every caller outside this room takes that road (`solve::plan`, or an
//! [`OnCluster`] value's [`OnCluster::plan`] for the checked [`ClusterPlan`] alone);
//! [`plan_on_cluster`] is the room's inner step, private to it, which the sweep
//! ([`super::sweep::economics`]) also calls for the per-usage optima
//! ([`Tracking::PerUsage`]).

use std::time::Instant;

use super::brute_force::brute_force_within;
use super::coarse::coarse_plan;
use super::dp::{meets_bound, solve_between, Tracking};
use super::greedy::greedy_chain;
use crate::model::{ClusterCosts, Placement, Workload};
use crate::score::{evaluate_on_cluster, ClusterEvaluation};
use crate::solve::bounds::cluster::chain::chain_bound;
use crate::solve::bounds::cluster::machine::{machine_bound, machine_bound_with, Debts};
use crate::solve::bounds::cluster::set::set_bound;
use crate::solve::bounds::cluster::volume::volume_bound;
use crate::solve::bounds::load::LoadBoundUse;
use crate::solve::budget::Budget;
use crate::solve::learned::brkga::Genetic;
use crate::solve::learned::policy_gradient::PolicyGradient;
use crate::solve::TracePoint;
use crate::solve::{CheckFailure, Infeasibility};
use crate::solve::{
    Limits, Method, MethodId, Objective, Outcome, Problem, SolveError, Stats, Status, StopReason,
    Unsupported,
};

/// How a cluster plan is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterMethod {
    /// The cluster DP ([`super::dp`]): proven optimal over contiguous plans.
    Dp,
    /// Exhaustive search over contiguous plans ([`super::brute_force`]; at most
    /// [`super::brute_force::MAX_CLASSES`] colour classes).
    BruteForce,
    /// The cluster IP ([`super::ip`]), over contiguous plans or all,
    /// minimising the max load or (`sync`) `max FW + max BW`.
    Ip { contiguous: bool, sync: bool },
    /// A search placer of [`crate::solve::learned`] (`rl` or `genetic`: `method`), over
    /// contiguous plans or all, TPS or (`sync`) `max FW + max BW`: the best plan it sampled,
    /// with the cluster bounds (a heuristic: optimal only when it meets them).
    Learned {
        method: MethodId,
        contiguous: bool,
        sync: bool,
    },
}

/// Why a method, objective or plan space is not planned on a cluster; the command line and
/// the Python binding print it after "on a cluster, ".
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClusterRefusal {
    #[error("--method is auto (the cluster DP), dp, ip, brute-force, rl or genetic, not {0}")]
    Method(MethodId),
    #[error("the objective is throughput (TPS), or sync with --method ip, rl or genetic")]
    Objective,
    #[error("non-contiguous plans come from --method ip, rl or genetic (--non-contiguous with the DP or brute force is not supported)")]
    NonContiguous,
}

impl ClusterMethod {
    /// The cluster method for `method` (`auto` is the cluster DP, which falls back to a
    /// checked plan with its gap), `objective` and the plan space; the refusal otherwise.
    pub fn choose(
        method: MethodId,
        objective: Objective,
        contiguous: bool,
    ) -> Result<ClusterMethod, ClusterRefusal> {
        let sync = objective == Objective::Sync;
        let chosen = match method {
            MethodId::Dp | MethodId::Auto => ClusterMethod::Dp,
            MethodId::BruteForce => ClusterMethod::BruteForce,
            MethodId::Ip => ClusterMethod::Ip { contiguous, sync },
            MethodId::Rl | MethodId::Genetic => ClusterMethod::Learned {
                method,
                contiguous,
                sync,
            },
            other => return Err(ClusterRefusal::Method(other)),
        };
        let any_space = matches!(
            chosen,
            ClusterMethod::Ip { .. } | ClusterMethod::Learned { .. }
        );
        if objective != Objective::Throughput && !(sync && any_space) {
            return Err(ClusterRefusal::Objective);
        }
        if !contiguous && !any_space {
            return Err(ClusterRefusal::NonContiguous);
        }
        Ok(chosen)
    }

    /// The method this cluster method answers for.
    pub fn id(self) -> MethodId {
        match self {
            ClusterMethod::Dp => MethodId::Dp,
            ClusterMethod::BruteForce => MethodId::BruteForce,
            ClusterMethod::Ip { .. } => MethodId::Ip,
            ClusterMethod::Learned { method, .. } => method,
        }
    }

    /// Whether the method's plans are contiguous on the cluster.
    pub fn contiguous(self) -> bool {
        match self {
            ClusterMethod::Ip { contiguous, .. } | ClusterMethod::Learned { contiguous, .. } => {
                contiguous
            }
            _ => true,
        }
    }

    /// Whether the method minimises `max FW + max BW` instead of the max load.
    pub fn sync(self) -> bool {
        matches!(
            self,
            ClusterMethod::Ip { sync: true, .. } | ClusterMethod::Learned { sync: true, .. }
        )
    }
}

/// One plan with its evaluation.
#[derive(Clone, Debug)]
pub struct CheckedPlan {
    /// Accelerators used per type.
    pub usage: Vec<usize>,
    pub value: f64,
    pub placement: Placement,
    pub evaluation: ClusterEvaluation,
}

/// The result of planning on a cluster.
#[derive(Clone, Debug)]
pub struct ClusterPlan {
    pub costs: ClusterCosts,
    pub method: ClusterMethod,
    /// The optimum; `None` when no contiguous plan exists.
    pub best: Option<CheckedPlan>,
    /// With [`Tracking::PerUsage`] (DP only): the best plan for every usage vector reached.
    pub per_usage: Vec<CheckedPlan>,
    pub time_s: f64,
    /// Ideals enumerated and states kept (DP), plans scored (brute force).
    pub ideals: usize,
    pub states: usize,
    /// A proven lower bound on the optimum (= the optimum when `stopped` is `None`).
    pub lower_bound: f64,
    /// Why the run stopped before proving its plan optimal. `best` is then the best plan
    /// seen (the DP's optimum over one topological order's prefixes, else the greedy
    /// chain), or `None`.
    pub stopped: Option<StopReason>,
    /// Where `best` comes from, for people.
    pub source: &'static str,
    /// What the solver says about its run (the IP's model size, HiGHS's status).
    pub notes: Vec<String>,
    /// The search placers' scorer evaluations and improvements of their best plan
    /// (`None` and empty for the other methods).
    pub evaluations: Option<u64>,
    pub trace: Vec<TracePoint>,
}

impl ClusterPlan {
    /// The run as every method reports it: the best plan and its value; the bound (the
    /// value itself when proven); the status (`Optimal`, `Feasible` with the stop reason,
    /// `NoPlan` when it stopped without one, `Infeasible` when it proved there is none).
    pub fn outcome(&self) -> Outcome {
        let value = self.best.as_ref().map_or(f64::INFINITY, |b| b.value);
        let status = match (&self.best, &self.stopped) {
            (Some(_), None) => Status::Optimal,
            (Some(_), Some(reason)) => Status::Feasible {
                reason: reason.clone(),
            },
            (None, Some(reason)) => Status::NoPlan {
                reason: reason.clone(),
            },
            (None, None) => Status::infeasible(Infeasibility::NoClusterPlan {
                contiguous: self.method.contiguous(),
            }),
        };
        Outcome {
            method: self.method.id(),
            placement: self.best.as_ref().map(|b| b.placement.clone()),
            objective: value,
            bound: if self.stopped.is_none() {
                value
            } else {
                self.lower_bound
            },
            status,
            stats: Stats {
                time_s: self.time_s,
                path: Some(self.source.to_string()),
                ideals: (self.ideals > 0).then_some(self.ideals),
                notes: self.notes.clone(),
                trace: self.trace.clone(),
                evaluations: self.evaluations,
                ..Stats::default()
            },
        }
    }
}

/// A cluster method behind [`Method`] (module documentation): the cluster DP, brute force,
/// the cluster IP or a search placer, on the problem's workload and cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OnCluster(pub ClusterMethod);

impl OnCluster {
    /// The cluster method that plans `problem` for the method `id` asked for
    /// ([`ClusterMethod::choose`]).
    pub fn choose(id: MethodId, problem: &Problem) -> Result<OnCluster, ClusterRefusal> {
        ClusterMethod::choose(id, problem.objective, problem.contiguous).map(OnCluster)
    }

    /// Plans `problem` (its workload must have a cluster) and checks the plan.
    pub fn plan(&self, problem: &Problem) -> Result<ClusterPlan, SolveError> {
        if problem.pipeline.is_some() {
            return Err(SolveError::Unsupported {
                method: self.id(),
                what: Unsupported::ClusterSchedule.to_string(),
            });
        }
        plan_on_cluster(problem.workload, &problem.limits, self.0, Tracking::Best)
    }
}

impl Method for OnCluster {
    fn id(&self) -> MethodId {
        self.0.id()
    }

    fn supports(&self, problem: &Problem) -> Result<(), Unsupported> {
        if problem.workload.cluster().is_none() {
            return Err(Unsupported::NoCluster);
        }
        if problem.pipeline.is_some() {
            return Err(Unsupported::ClusterSchedule);
        }
        OnCluster::choose(self.id(), problem)
            .map(|_| ())
            .map_err(Unsupported::OnCluster)
    }

    /// The plan space and objective are the problem's (a `Learned` or `Ip` value's own
    /// flags are replaced by them, as [`OnCluster::choose`] sets them).
    fn solve(&self, problem: &Problem) -> Result<Outcome, SolveError> {
        let chosen = OnCluster::choose(self.id(), problem)?;
        Ok(chosen.plan(problem)?.outcome())
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn usage_of(costs: &ClusterCosts, p: &Placement) -> Vec<usize> {
    let cluster = costs.cluster();
    let mut used = vec![false; cluster.accelerators().len()];
    for d in &p.assignment {
        if let crate::model::Device::Accelerator(i) = *d {
            used[i] = true;
        }
    }
    let mut usage = vec![0; cluster.types().len()];
    for (i, a) in cluster.accelerators().iter().enumerate() {
        usage[a.accelerator_type] += usize::from(used[i]);
    }
    usage
}

/// Re-scores `p`, which a solver says has TPS `value` (a contiguous plan).
pub fn check(
    w: &Workload,
    costs: &ClusterCosts,
    value: f64,
    p: Placement,
) -> Result<CheckedPlan, SolveError> {
    check_plan(w, costs, value, p, true, false)
}

/// Re-scores `p`, which a solver says has TPS (or with `sync`, `max FW + max BW`)
/// `value`; contiguity is checked when `contiguous`.
pub fn check_plan(
    w: &Workload,
    costs: &ClusterCosts,
    value: f64,
    p: Placement,
    contiguous: bool,
    sync: bool,
) -> Result<CheckedPlan, SolveError> {
    let e = evaluate_on_cluster(w, costs, &p);
    if !e.is_valid() {
        return Err(SolveError::Check(CheckFailure::ClusterPlanInvalid(
            e.violations,
        )));
    }
    if contiguous && !e.is_contiguous() {
        return Err(SolveError::Check(CheckFailure::ClusterPlanNotContiguous(
            e.non_contiguous,
        )));
    }
    let scored = if sync { e.sync_objective } else { e.max_load };
    if !close(scored, value) {
        return Err(SolveError::Check(CheckFailure::ClusterValueMismatch {
            sync,
            claimed: value,
            scored,
        }));
    }
    Ok(CheckedPlan {
        usage: usage_of(costs, &p),
        value: scored,
        placement: p,
        evaluation: e,
    })
}

/// Plans `w` on its cluster (`w.cluster()` must be set) and checks every plan it returns:
/// the room's inner step behind [`OnCluster`] and [`super::sweep::economics`].
pub(super) fn plan_on_cluster(
    w: &Workload,
    limits: &Limits,
    method: ClusterMethod,
    tracking: Tracking,
) -> Result<ClusterPlan, SolveError> {
    if w.cluster().is_none() {
        return Err(SolveError::Unsupported {
            method: method.id(),
            what: "a workload without a cluster".into(),
        });
    }
    let costs = ClusterCosts::of(w);
    let start = Instant::now();
    let Found {
        best,
        per_usage,
        ideals,
        states,
        lower_bound,
        stopped,
        source,
        notes,
        evaluations,
        trace,
    } = match method {
        ClusterMethod::Dp => by_dp(w, &costs, limits, tracking, start)?,
        ClusterMethod::BruteForce => by_brute_force(w, &costs, limits, tracking)?,
        ClusterMethod::Ip { contiguous, sync } => {
            by_ip(w, &costs, limits, tracking, contiguous, sync, start)?
        }
        ClusterMethod::Learned {
            method,
            contiguous,
            sync,
        } => by_search(w, limits, tracking, method, contiguous, sync)?,
    };
    let time_s = start.elapsed().as_secs_f64();
    let best = best
        .map(|(v, p)| check_plan(w, &costs, v, p, method.contiguous(), method.sync()))
        .transpose()?;
    let per_usage = per_usage
        .into_iter()
        .map(|(_, v, p)| check(w, &costs, v, p))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ClusterPlan {
        costs,
        method,
        best,
        per_usage,
        time_s,
        ideals,
        states,
        lower_bound,
        stopped,
        source,
        notes,
        evaluations,
        trace,
    })
}

/// What a solver found on the cluster, before the check: its best plan and per-usage
/// plans with their solver values, the DP's counters, the lower bound, why it stopped,
/// where the best plan came from and the solver's notes.
struct Found {
    best: Option<(f64, Placement)>,
    per_usage: Vec<(Vec<usize>, f64, Placement)>,
    ideals: usize,
    states: usize,
    lower_bound: f64,
    stopped: Option<StopReason>,
    source: &'static str,
    notes: Vec<String>,
    evaluations: Option<u64>,
    trace: Vec<TracePoint>,
}

/// A search placer ([`ClusterMethod::Learned`]) on the cluster: its best plan, the cluster
/// bound it reports ([`crate::solve::learned::lower_bound`]) and its trace. Its plan is
/// re-scored by [`plan_on_cluster`] like every other.
fn by_search(
    w: &Workload,
    limits: &Limits,
    tracking: Tracking,
    method: MethodId,
    contiguous: bool,
    sync: bool,
) -> Result<Found, SolveError> {
    let searcher: Box<dyn Method> = match method {
        MethodId::Rl => Box::new(PolicyGradient),
        MethodId::Genetic => Box::new(Genetic),
        other => {
            return Err(SolveError::Unsupported {
                method: other,
                what: "a search placer on a cluster (rl or genetic)".into(),
            })
        }
    };
    if tracking == Tracking::PerUsage {
        return Err(SolveError::Unsupported {
            method,
            what: "per-usage optima on a cluster (the sweep uses the cluster DP)".into(),
        });
    }
    let problem = Problem {
        workload: w,
        devices: crate::solve::Devices::of(w),
        objective: if sync {
            Objective::Sync
        } else {
            Objective::Throughput
        },
        contiguous,
        limits: limits.clone(),
        pipeline: None,
    };
    let outcome = searcher.solve(&problem)?;
    let stopped = match outcome.status {
        Status::Optimal => None,
        Status::Feasible { reason } | Status::NoPlan { reason } => Some(reason),
        Status::Heuristic | Status::Infeasible { .. } => Some(StopReason::SearchExhausted {
            what: "the search ended".into(),
        }),
    };
    let best = outcome.placement.map(|p| (outcome.objective, p));
    let lower_bound = if best.is_some() { outcome.bound } else { 0.0 };
    Ok(Found {
        best,
        per_usage: Vec::new(),
        ideals: 0,
        states: 0,
        lower_bound,
        stopped,
        source: "the best plan the search sampled",
        notes: outcome.stats.notes,
        evaluations: outcome.stats.evaluations,
        trace: outcome.stats.trace,
    })
}

/// The cluster DP with its bounds, the coarse DP's plan as its start and the greedy chain
/// when it stops without a plan (times in the module documentation of [`super::dp`]).
fn by_dp(
    w: &Workload,
    costs: &ClusterCosts,
    limits: &Limits,
    tracking: Tracking,
    start: Instant,
) -> Result<Found, SolveError> {
    let mut source = "the optimum";
    // The DP takes 90 % of the time; if it stops without a plan, the greedy chain
    // (linear per probe) has the rest.
    // The set and chain bounds (at most a twentieth of the time each) and the volume
    // bound (a tenth): they start the DP's search for its own upper bound, end it
    // when a plan meets them, and are the bound when the DP stops. The chain bound
    // holds for contiguous plans only, the DP's space.
    let lower = if tracking == Tracking::Best {
        let share = limits.time_limit_s.map_or(5.0, |t| 0.05 * t);
        let set = set_bound(w, costs, &Budget::new(Some(share), None));
        let chain = chain_bound(w, costs, &Budget::new(Some(share), None));
        let machines = machine_bound(w, costs, &Budget::new(Some(share), None));
        volume_bound(w, costs, limits.time_limit_s.map_or(10.0, |t| 0.1 * t))
            .max(set)
            .max(chain)
            .max(machines)
    } else {
        0.0
    };
    // Large graphs: the DP on coarsened graphs (at most a tenth of the time) gives
    // a plan, and its value prunes the fine DP.
    let coarse = if tracking == Tracking::Best {
        let share = limits.time_limit_s.map_or(20.0, |t| 0.1 * t);
        coarse_plan(w, costs, share, lower, f64::INFINITY)?
    } else {
        None
    };
    let held = coarse.as_ref().map_or(f64::INFINITY, |c| c.value);
    let mut dp_limits = limits.clone();
    dp_limits.time_limit_s = limits
        .time_limit_s
        .map(|t| (0.9 * t - start.elapsed().as_secs_f64()).max(0.0));
    let mut r = solve_between(w, costs, &dp_limits, tracking, lower, held)?;
    if r.stopped.is_some() {
        r.lower_bound = r.lower_bound.max(lower);
        // Only a DP stopped before its proof: the machine bound with the debts (at most
        // a twentieth of the time), never lower than without, never above a plan.
        if tracking == Tracking::Best {
            let share = limits.time_limit_s.map_or(5.0, |t| 0.05 * t);
            let debts = machine_bound_with(w, costs, &Budget::new(Some(share), None), Debts::On);
            r.lower_bound = r.lower_bound.max(debts);
        }
    }
    if let Some(c) = coarse {
        let better = r.best.as_ref().is_none_or(|b| c.value < b.0);
        if r.stopped.is_some() && better {
            r.best = Some((c.value, c.placement));
            source = "the DP on a coarsened graph";
        } else if r.stopped.is_none() && r.best.is_none() {
            // The fine DP pruned with the coarse value and proved nothing lower.
            r.best = Some((c.value, c.placement));
        }
    }
    // A stopped run whose best plan (the coarse one, say) meets the bound is proven.
    if let Some((v, _)) = r
        .best
        .as_ref()
        .filter(|b| r.stopped.is_some() && meets_bound(b.0, r.lower_bound))
    {
        r.lower_bound = *v;
        r.stopped = None;
    }
    if r.stopped.is_some() && source == "the optimum" {
        source = "best plan over one topological order's prefixes";
    }
    if r.best.is_none() && r.stopped.is_some() && tracking == Tracking::Best {
        let left = limits
            .time_limit_s
            .map(|t| (t - start.elapsed().as_secs_f64()).max(0.0));
        r.best = greedy_chain(w, costs, &Budget::new(left, None));
        source = "greedy chain of one topological order";
    }
    Ok(Found {
        best: r.best,
        per_usage: r.per_usage,
        ideals: r.ideals,
        states: r.states,
        lower_bound: r.lower_bound,
        stopped: r.stopped,
        source,
        notes: Vec::new(),
        evaluations: None,
        trace: Vec::new(),
    })
}

/// Brute force over every plan (tiny graphs), the best plan only.
fn by_brute_force(
    w: &Workload,
    costs: &ClusterCosts,
    limits: &Limits,
    tracking: Tracking,
) -> Result<Found, SolveError> {
    if tracking == Tracking::PerUsage {
        return Err(SolveError::Unsupported {
            method: MethodId::BruteForce,
            what: "per-usage optima with plans on a cluster".into(),
        });
    }
    let r = brute_force_within(w, costs, Objective::Throughput, true, &limits.budget())?;
    let lower_bound = r.best.as_ref().map_or(f64::INFINITY, |b| b.0);
    Ok(Found {
        best: r.best,
        per_usage: Vec::new(),
        ideals: 0,
        states: r.plans as usize,
        lower_bound,
        stopped: None,
        source: "the optimum",
        notes: Vec::new(),
        evaluations: None,
        trace: Vec::new(),
    })
}

/// The cluster IP warm-started from the cluster DP's plan, with the volume bound and the
/// DP's (module documentation: the IP's time).
fn by_ip(
    w: &Workload,
    costs: &ClusterCosts,
    limits: &Limits,
    tracking: Tracking,
    contiguous: bool,
    sync: bool,
    start: Instant,
) -> Result<Found, SolveError> {
    let mut notes = Vec::new();
    if tracking == Tracking::PerUsage {
        return Err(SolveError::Unsupported {
            method: MethodId::Ip,
            what: "per-usage optima on a cluster (the sweep uses the cluster DP)".into(),
        });
    }
    // `--ip-experiment nobound` / `nowarm` leave out the bounds / the DP's plan, so
    // the IP is measured on its own.
    let share = |f: f64| limits.time_limit_s.map_or(10.0 * f, |t| f * t);
    let use_bounds = limits.ip.load_bound != LoadBoundUse::Off;
    let volume = if use_bounds {
        volume_bound(w, costs, share(0.05))
    } else {
        0.0
    };
    let mut dp_limits = limits.clone();
    dp_limits.time_limit_s = Some(share(0.35));
    let dp = if use_bounds || limits.ip.warm_start {
        plan_on_cluster(w, &dp_limits, ClusterMethod::Dp, Tracking::Best)?
    } else {
        ClusterPlan {
            costs: costs.clone(),
            method: ClusterMethod::Dp,
            best: None,
            per_usage: Vec::new(),
            time_s: 0.0,
            ideals: 0,
            states: 0,
            lower_bound: 0.0,
            stopped: Some(StopReason::Solver {
                status: "not run (--ip-experiment nobound and nowarm)".into(),
            }),
            source: "",
            notes: Vec::new(),
            evaluations: None,
            trace: Vec::new(),
        }
    };
    notes.push(format!(
        "cluster DP (warm start): {} in {:.2} s, {}",
        dp.best
            .as_ref()
            .map_or("no plan".to_string(), |b| format!("TPS {}", b.value)),
        dp.time_s,
        match &dp.stopped {
            None => "optimal over contiguous plans".to_string(),
            Some(r) => format!("stopped ({r}), bound {}", dp.lower_bound),
        }
    ));
    notes.push(format!("volume bound {volume}"));
    // The DP's bound holds in the contiguous space only (for sync too: a plan's
    // `max FW + max BW` is at least its max load).
    let lower = if !use_bounds {
        0.0
    } else if contiguous {
        volume.max(if dp.best.is_some() || dp.stopped.is_some() {
            dp.lower_bound
        } else {
            0.0
        })
    } else {
        volume
    };
    let mut ip_limits = limits.clone();
    ip_limits.time_limit_s = limits
        .time_limit_s
        .map(|t| (t - start.elapsed().as_secs_f64()).max(0.0));
    let held = dp
        .best
        .filter(|_| limits.ip.warm_start)
        .map(|b| b.placement);
    let (outcome, _) = super::ip::solve(
        w,
        costs,
        &ip_limits,
        if sync {
            Objective::Sync
        } else {
            Objective::Throughput
        },
        contiguous,
        held,
        lower,
    )?;
    notes.extend(outcome.stats.notes.iter().cloned());
    let source = match (&outcome.status, outcome.stats.provenance) {
        (crate::solve::Status::Optimal, _) => "the optimum",
        (_, Some(crate::solve::Provenance::Held)) => {
            "the cluster DP's plan (the IP found nothing better)"
        }
        _ => "the IP's incumbent",
    };
    let stopped = match &outcome.status {
        crate::solve::Status::Optimal | crate::solve::Status::Infeasible { .. } => None,
        s => Some(s.stop_reason().cloned().unwrap_or(StopReason::TimeLimit)),
    };
    let best = outcome.placement.map(|p| (outcome.objective, p));
    Ok(Found {
        best,
        per_usage: Vec::new(),
        ideals: 0,
        states: 0,
        lower_bound: outcome.bound,
        stopped,
        source,
        notes,
        evaluations: None,
        trace: Vec::new(),
    })
}

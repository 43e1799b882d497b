//! What a method returns: the plan, its objective, a proven lower bound, the [`Status`] (the
//! claim made about the plan) and, when the run stopped short of a proof or of a plan, the
//! [`StopReason`] as data; plus the method's [`Stats`].
//!
//! | status | plan | bound |
//! | --- | --- | --- |
//! | `Optimal` | yes | = objective |
//! | `Feasible { reason }` | yes | ≤ objective, gap open because of `reason` |
//! | `Heuristic` | yes | 0 (no claim) |
//! | `Infeasible { reason, .. }` | no | ∞ where proven |
//! | `NoPlan { reason }` | no | what was proven before `reason` stopped the run |
//!
//! Every reason is data: `Feasible` and `NoPlan` carry a [`StopReason`], `Infeasible` an
//! [`Infeasibility`] (which rule failed, with the node, device counts and bytes it
//! names); their `Display` gives the sentence a user reads.

use super::budget;
use crate::model::{human_bytes, Placement, Unplaceable, WorkloadError};

/// How a method's run ended: the claim it makes about its plan.
#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    /// The plan is proven optimal (bound = objective).
    Optimal,
    /// A plan was found; the gap to the bound is not closed because the run stopped for
    /// `reason`.
    Feasible { reason: StopReason },
    /// A heuristic: a plan with no optimality claim.
    Heuristic,
    /// No placement satisfies the rules; `reason` says which rule to relax.
    /// `non_contiguous_may_help`: the obstacle is the contiguity rule itself, so the
    /// non-contiguous problem may have a plan.
    Infeasible {
        reason: Infeasibility,
        non_contiguous_may_help: bool,
    },
    /// The run stopped for `reason` before it found a plan. One may exist: this is not a
    /// proof of infeasibility.
    NoPlan { reason: StopReason },
}

impl Status {
    /// [`Status::Infeasible`] with a reason that does not involve contiguity.
    pub fn infeasible(reason: impl Into<Infeasibility>) -> Status {
        Status::Infeasible {
            reason: reason.into(),
            non_contiguous_may_help: false,
        }
    }

    /// A stable machine-readable name of the kind of outcome: `optimal`, `feasible`,
    /// `heuristic`, `infeasible` or `no-plan` (the `outcome` field of the JSON reports).
    pub fn kind(&self) -> &'static str {
        match self {
            Status::Optimal => "optimal",
            Status::Feasible { .. } => "feasible",
            Status::Heuristic => "heuristic",
            Status::Infeasible { .. } => "infeasible",
            Status::NoPlan { .. } => "no-plan",
        }
    }

    /// Why the run stopped short of a proof, if it did.
    pub fn stop_reason(&self) -> Option<&StopReason> {
        match self {
            Status::Feasible { reason } | Status::NoPlan { reason } => Some(reason),
            _ => None,
        }
    }
}

/// Why no placement satisfies the rules ([`Status::Infeasible`]): one variant per rule
/// that failed, with what it names. Display gives the sentence a user reads, with what to
/// relax.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Infeasibility {
    /// A necessary condition of the workload fails before any method runs.
    #[error("{0}")]
    Workload(Unplaceable),
    /// `0` holds on the workload with each layer contracted to one node.
    #[error("at layer granularity, {0}")]
    AtLayerGranularity(Box<Infeasibility>),
    /// The workload with each layer contracted to one node is rejected (`0`).
    #[error("at layer granularity: {0}")]
    LayerWorkloadRejected(WorkloadError),
    /// `auto`: a search that finished (`by`) found no contiguous split.
    #[error("no contiguous split fits the devices (proven by {by}); add devices or memory, or allow non-contiguous splits (--non-contiguous)")]
    NoContiguousSplit { by: Prover },
    /// The DP: no contiguous split into the devices.
    #[error("no contiguous split into at most {accelerators} accelerators of {memory_bytes} bytes and {cpus} CPUs exists; add devices or memory, or allow non-contiguous splits (--method ip)")]
    NoContiguousSplitOnDevices {
        accelerators: usize,
        memory_bytes: f64,
        cpus: usize,
    },
    /// The DP: the nodes that must share a device with `node` (its colour class, or a
    /// cycle of the contraction) need `size_bytes`, more than an accelerator's
    /// `memory_bytes`, and there is no CPU.
    #[error("the nodes that must share a device with node {node} need {size_bytes} bytes, more than an accelerator's {memory_bytes} bytes, and there is no CPU")]
    GroupFitsNoDevice {
        node: i64,
        size_bytes: f64,
        memory_bytes: f64,
    },
    /// HiGHS proved the integer program infeasible.
    #[error("the integer program is infeasible: no placement satisfies the memory, support and colour-class rules (add accelerators or CPUs, or more memory)")]
    IntegerProgram,
    /// The brute force tried every assignment.
    #[error("no assignment satisfies the rules")]
    NoAssignment,
    /// The interleaved schedule needs accelerators and the workload has none.
    #[error("the interleaved schedule runs on accelerators only, and the workload has none")]
    InterleavedWithoutAccelerators,
    /// Under the interleaved schedule the `accelerators`' `capacity_bytes` are less than
    /// the nodes' `resident_bytes` plus `micro_batches` stashes of `stash_bytes`, the
    /// fewest the devices hold.
    #[error("under the interleaved schedule every node is on an accelerator, and the {accelerators} accelerators' {} are less than the nodes' resident bytes ({}) plus the {micro_batches} micro-batches' stashes ({} each) that the devices hold at least: use --recompute auto, more or larger accelerators, or fewer micro-batches", human_bytes(*.capacity_bytes), human_bytes(*.resident_bytes), human_bytes(*.stash_bytes))]
    InterleavedMemory {
        accelerators: usize,
        capacity_bytes: f64,
        resident_bytes: f64,
        micro_batches: usize,
        stash_bytes: f64,
    },
    /// The interleaved DP finished without a chain of chunks that fits.
    #[error("no chain of interleaved chunks fits the accelerators' memory under the schedule")]
    NoInterleavedChain,
    /// A 3-D parallel search over `0` found no layout that fits.
    #[error("{0}")]
    NoLayout(LayoutFamily),
    /// PipeDream-2BW planner (`piper`): no plan fits with its micro-batches in flight.
    #[error("no plan fits maxMemoryPerDevice with its micro-batches in flight")]
    PiperMemory,
    /// `piper`: not even its relaxation (one micro-batch in flight per stage, all devices)
    /// fits.
    #[error("no split fits maxMemoryPerDevice even with one micro-batch in flight per stage and all devices")]
    PiperRelaxedMemory,
    /// The cluster IP: `node` (named `name`) with its colour class fits no device.
    #[error("node {node} ({}) and its colour class fit no device (CPU-only with no CPU core, or larger than every accelerator's memory)", .name.as_deref().unwrap_or("unnamed"))]
    NodeFitsNoClusterDevice { node: i64, name: Option<String> },
    /// HiGHS proved the cluster IP infeasible (with the contiguity rules when
    /// `contiguous`).
    #[error("the cluster IP is infeasible: {}", if *.contiguous { "no contiguous plan satisfies memory per type, CPU-only nodes and stages filling machines in order" } else { "no plan satisfies memory per type and CPU-only nodes" })]
    ClusterIp { contiguous: bool },
    /// A cluster method finished without a plan (contiguous ones: with stages filling
    /// machines in order).
    #[error("{}", if *.contiguous { "no contiguous plan fits the cluster (memory per type, CPU-only nodes, stages filling machines in order)" } else { "no plan fits the cluster (memory per type, CPU-only nodes)" })]
    NoClusterPlan { contiguous: bool },
    /// A baseline that needs an accelerator.
    #[error("the device set has no accelerator")]
    NoAccelerator,
    /// `single`: `node` may not run on an accelerator.
    #[error("node {node} may not run on an accelerator")]
    CpuOnlyNode { node: i64 },
    /// `single`: the nodes need `total_bytes`, more than one accelerator's `memory_bytes`.
    #[error("the nodes need {} in all, more than one accelerator's {}", human_bytes(*.total_bytes), human_bytes(*.memory_bytes))]
    ExceedsOneAccelerator { total_bytes: f64, memory_bytes: f64 },
    /// `local-search`: no random start fits.
    #[error("no random start fits the devices' memory (and there is no CPU to take the rest)")]
    NoRandomStart,
    /// `greedy`: the fill needs a CPU and there is none.
    #[error(
        "the accelerators' memory is used up (or a node may not run on one) and there is no CPU"
    )]
    FillNeedsCpu,
    /// `greedy`: the fill leaves `runs` separate CPU runs for `cpus` CPUs.
    #[error("the fill leaves {runs} separate runs for {cpus} CPUs, which is not contiguous; allow non-contiguous splits")]
    FillNotContiguous { runs: usize, cpus: usize },
    /// `greedy` under the latency rules: the fill needs `calls` calls on one accelerator,
    /// more than `pieces`.
    #[error("the fill needs {calls} calls on one accelerator (its backward nodes wait for later forward nodes on other devices), more than --pieces {pieces}; allow --pieces {calls} or use --method ip")]
    FillTooManyCalls { calls: usize, pieces: usize },
    /// `pipedream`: the chain of `units` cannot be split into the devices.
    #[error("the {units} units cannot be split into {accelerators} accelerators of {memory_bytes} bytes and {cpus} CPUs")]
    NoChainSplit {
        units: usize,
        accelerators: usize,
        memory_bytes: f64,
        cpus: usize,
    },
    /// `partitioner` without an accelerator.
    #[error("the device set has no accelerator to partition onto")]
    NothingToPartitionOnto,
    /// `partitioner`: no partition could be placed, for each count of parts tried, why.
    #[error("no partition could be placed{}", joined(.failures))]
    NoPartition { failures: Vec<PartitionFailure> },
}

impl From<Unplaceable> for Infeasibility {
    fn from(reason: Unplaceable) -> Infeasibility {
        Infeasibility::Workload(reason)
    }
}

impl From<LayoutFamily> for Infeasibility {
    fn from(family: LayoutFamily) -> Infeasibility {
        Infeasibility::NoLayout(family)
    }
}

/// Which finished search proved there is no contiguous split
/// ([`Infeasibility::NoContiguousSplit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prover {
    SplitSearch,
    ForkJoinSearch,
    Ip,
}

impl std::fmt::Display for Prover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Prover::SplitSearch => "the split search",
            Prover::ForkJoinSearch => "the fork-join search",
            Prover::Ip => "the IP",
        })
    }
}

/// The 3-D parallel layouts a search found none of ([`Infeasibility::NoLayout`]); each
/// prints its sentence with what to allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutFamily {
    /// Uniform layouts on one accelerator type.
    Uniform,
    /// Uniform layouts on each type of a mixed cluster.
    UniformAnyType,
    /// Free layouts on one accelerator type.
    Free,
    /// Free layouts on each type of a mixed cluster.
    FreeAnyType,
    /// Interleaved layouts.
    Interleaved,
}

impl std::fmt::Display for LayoutFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LayoutFamily::Uniform => "no uniform layout fits the accelerators' memory: allow more devices, ZeRO, smaller micro-batches or more TP",
            LayoutFamily::UniformAnyType => "no uniform layout fits the accelerators' memory on any type: allow ZeRO, smaller micro-batches, more TP or --free",
            LayoutFamily::Free => "no free layout fits the accelerators' memory: allow more devices, ZeRO, smaller micro-batches or more TP",
            LayoutFamily::FreeAnyType => "no free layout fits the accelerators' memory on any type: allow ZeRO, smaller micro-batches or more TP",
            LayoutFamily::Interleaved => "no interleaved layout fits the accelerators' memory, or none has m a multiple of p and p·v dividing the blocks: allow more devices, ZeRO, smaller micro-batches, more TP, or another --global-batch or v",
        })
    }
}

/// Why one count of parts gave the `partitioner` no plan
/// ([`Infeasibility::NoPartition`]).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PartitionFailure {
    /// The budget ran out before `parts` parts were tried.
    #[error("{reason} before {parts} parts")]
    Stopped {
        reason: budget::Exhausted,
        parts: usize,
    },
    /// METIS failed (`message`: its own words).
    #[error("METIS failed for {parts} parts: {message}")]
    Metis { parts: usize, message: String },
    /// A colour class fits on no device after partitioning into `parts`.
    #[error("{parts} parts: a colour class fits on no device after partitioning")]
    ClassUnplaced { parts: usize },
}

/// `": a; b"`, or nothing without failures.
fn joined(failures: &[PartitionFailure]) -> String {
    if failures.is_empty() {
        return String::new();
    }
    let all: Vec<String> = failures.iter().map(ToString::to_string).collect();
    format!(": {}", all.join("; "))
}

/// Why a run stopped before it proved its plan optimal (or before it found one).
///
/// Display gives the words a user reads; [`StopReason::code`] a stable machine-readable
/// name (the `stopReason` field of the JSON reports).
#[derive(Clone, Debug, PartialEq)]
pub enum StopReason {
    /// The relative gap asked for with `--gap` (`gap`, a fraction) was reached.
    GapReached { gap: f64 },
    /// The solver stopped at its own termination gap (`gap`, a fraction) but the scored plan
    /// is not within the tolerance of a proof.
    SolverGap { gap: f64 },
    /// The wall-clock limit passed.
    TimeLimit,
    /// Ctrl-C, or [`budget::request_interrupt`].
    Interrupted,
    /// The solver's branch-and-bound node, leaf or improving-solution limit (HiGHS's
    /// `kSolutionLimit`).
    NodeLimit,
    /// The solver's simplex iteration limit.
    IterationLimit,
    /// `what` needed `needed_bytes`, more than the memory budget's `budget_bytes`.
    MemoryBudget {
        what: String,
        needed_bytes: f64,
        budget_bytes: f64,
    },
    /// The solver ran out of memory (HiGHS's `kMemoryLimit`).
    SolverMemoryLimit,
    /// The solver's bound exceeds the score of a plan we hold, so its proof is not trusted.
    UnreliableBound,
    /// The solver's incumbent met a proven lower bound, but the scorer gives the plan read
    /// off it a higher value.
    PlanAboveBound,
    /// The solver stopped with a status that proves nothing (`status`: its name).
    Solver { status: String },
    /// The DP's proof needed a group DAG with more than `limit` ideals (`--max-ideals` or
    /// what the memory budget holds).
    IdealLimit { limit: usize },
    /// A heuristic search ran to its end and no exact method fits what is left (`what`:
    /// which, and why), so the gap stays open before the time limit (`auto` on graphs too
    /// large for the IP).
    SearchExhausted { what: String },
}

impl StopReason {
    /// A stable machine-readable name: `gap-reached`, `solver-gap`, `time-limit`,
    /// `interrupted`, `node-limit`, `iteration-limit`, `memory-budget`,
    /// `solver-memory-limit`, `unreliable-bound`, `plan-above-bound`, `solver-status`,
    /// `ideal-limit`, `search-exhausted`.
    pub fn code(&self) -> &'static str {
        match self {
            StopReason::GapReached { .. } => "gap-reached",
            StopReason::SolverGap { .. } => "solver-gap",
            StopReason::TimeLimit => "time-limit",
            StopReason::Interrupted => "interrupted",
            StopReason::NodeLimit => "node-limit",
            StopReason::IterationLimit => "iteration-limit",
            StopReason::MemoryBudget { .. } => "memory-budget",
            StopReason::SolverMemoryLimit => "solver-memory-limit",
            StopReason::UnreliableBound => "unreliable-bound",
            StopReason::PlanAboveBound => "plan-above-bound",
            StopReason::Solver { .. } => "solver-status",
            StopReason::IdealLimit { .. } => "ideal-limit",
            StopReason::SearchExhausted { .. } => "search-exhausted",
        }
    }

    /// What a user can change to get further, if anything.
    pub fn remedy(&self) -> Option<&'static str> {
        match self {
            StopReason::TimeLimit => Some("raise --time-limit"),
            StopReason::GapReached { .. } => Some("lower --gap"),
            StopReason::SolverMemoryLimit => {
                Some("coarsen the graph, or give the solver more memory")
            }
            StopReason::IdealLimit { .. } => Some("raise --max-ideals or --memory-budget"),
            _ => None,
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::GapReached { gap } => {
                write!(f, "reached the requested gap {:.4}%", gap * 100.0)
            }
            StopReason::SolverGap { gap } => {
                write!(f, "HiGHS stopped at its gap {:.4}%", gap * 100.0)
            }
            StopReason::TimeLimit => write!(f, "time limit"),
            StopReason::Interrupted => write!(f, "interrupted"),
            StopReason::NodeLimit => write!(f, "HiGHS reached its node limit"),
            StopReason::IterationLimit => write!(f, "HiGHS reached its iteration limit"),
            StopReason::MemoryBudget {
                what,
                needed_bytes,
                budget_bytes,
            } => {
                write!(
                    f,
                    "{}",
                    budget::Exhausted::Memory {
                        what: what.clone(),
                        needed_bytes: *needed_bytes,
                        budget_bytes: *budget_bytes
                    }
                )
            }
            StopReason::SolverMemoryLimit => write!(f, "HiGHS ran out of memory"),
            StopReason::UnreliableBound => write!(f, "HiGHS's bound is unreliable"),
            StopReason::PlanAboveBound => write!(
                f,
                "HiGHS's incumbent met the lower bound but the scored plan does not"
            ),
            StopReason::Solver { status } => write!(f, "HiGHS stopped: {status}"),
            StopReason::IdealLimit { limit } => {
                write!(f, "the DP's proof needs more than {limit} ideals")
            }
            StopReason::SearchExhausted { what } => write!(f, "{what}"),
        }
    }
}

impl From<budget::Exhausted> for StopReason {
    fn from(e: budget::Exhausted) -> StopReason {
        match e {
            budget::Exhausted::TimeLimit => StopReason::TimeLimit,
            budget::Exhausted::Interrupted => StopReason::Interrupted,
            budget::Exhausted::Memory {
                what,
                needed_bytes,
                budget_bytes,
            } => StopReason::MemoryBudget {
                what,
                needed_bytes,
                budget_bytes,
            },
        }
    }
}

/// Where a warm-started solver's plan came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provenance {
    /// The solver's own incumbent.
    Solver,
    /// The plan it was given to start from (held: the solver found nothing better).
    Held,
}

/// Counters a method reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    pub time_s: f64,
    /// Which path an adaptive method took (`auto`: exact DP, coarsened, IP, ...).
    pub path: Option<String>,
    /// Whose plan a warm-started solver returns (the cluster IP); `None` without a plan or
    /// a plan to start from.
    pub provenance: Option<Provenance>,
    /// Ideals enumerated (DP).
    pub ideals: Option<usize>,
    /// Pairs `J ⊂ I` whose load was evaluated (DP).
    pub ideal_pairs: Option<u64>,
    /// Groups after colour-class contraction.
    pub groups: Option<usize>,
    /// Free-form notes (what was pruned, solver messages).
    pub notes: Vec<String>,
    /// Every improvement of the best plan against wall time and scorer evaluations (the
    /// search placers, `rl` and `genetic`; empty for the other methods).
    pub trace: Vec<TracePoint>,
    /// Scorer evaluations of a search placer (`rl`, `genetic`).
    pub evaluations: Option<u64>,
}

/// What a method returns.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub method: super::MethodId,
    pub placement: Option<Placement>,
    /// The method's own objective value (re-checked by [`super::plan`]).
    pub objective: f64,
    /// A proven lower bound on the optimum (0 when the method proves none).
    pub bound: f64,
    pub status: Status,
    pub stats: Stats,
}

/// One improvement of the best plan: when, after how many scorer evaluations, and its
/// objective.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TracePoint {
    pub time_s: f64,
    pub evaluations: u64,
    pub objective: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_exhaustion_converts_to_the_same_stop_reason() {
        assert_eq!(
            StopReason::from(budget::Exhausted::TimeLimit),
            StopReason::TimeLimit
        );
        assert_eq!(
            StopReason::from(budget::Exhausted::Interrupted),
            StopReason::Interrupted
        );
        let memory = budget::Exhausted::Memory {
            what: "the DP table".into(),
            needed_bytes: 3e9,
            budget_bytes: 1e9,
        };
        let reason = StopReason::from(memory.clone());
        assert_eq!(reason.code(), "memory-budget");
        assert_eq!(reason.to_string(), memory.to_string());
    }

    #[test]
    fn infeasibility_prints_the_sentences_of_the_strings_it_replaced() {
        let nested = Infeasibility::AtLayerGranularity(Box::new(
            Unplaceable::CpuOnlyWithoutCpu { node: 7 }.into(),
        ));
        assert_eq!(
            nested.to_string(),
            "at layer granularity, node 7 is not supported on an accelerator and maxCPUs is 0"
        );
        assert_eq!(
            Infeasibility::NoContiguousSplit { by: Prover::Ip }.to_string(),
            "no contiguous split fits the devices (proven by the IP); add devices or memory, or allow non-contiguous splits (--non-contiguous)"
        );
        assert_eq!(
            Infeasibility::NodeFitsNoClusterDevice { node: 3, name: None }.to_string(),
            "node 3 (unnamed) and its colour class fit no device (CPU-only with no CPU core, or larger than every accelerator's memory)"
        );
        assert_eq!(
            Infeasibility::ClusterIp { contiguous: false }.to_string(),
            "the cluster IP is infeasible: no plan satisfies memory per type and CPU-only nodes"
        );
        assert_eq!(
            Infeasibility::NoPartition { failures: vec![] }.to_string(),
            "no partition could be placed"
        );
        let failures = vec![
            PartitionFailure::ClassUnplaced { parts: 2 },
            PartitionFailure::Metis {
                parts: 3,
                message: "m".into(),
            },
        ];
        assert_eq!(
            Infeasibility::NoPartition { failures }.to_string(),
            "no partition could be placed: 2 parts: a colour class fits on no device after partitioning; METIS failed for 3 parts: m"
        );
        assert_eq!(
            Infeasibility::NoLayout(LayoutFamily::Free).to_string(),
            "no free layout fits the accelerators' memory: allow more devices, ZeRO, smaller micro-batches or more TP"
        );
    }

    #[test]
    fn statuses_have_stable_codes_and_no_plan_is_not_infeasible() {
        let no_plan = Status::NoPlan {
            reason: StopReason::TimeLimit,
        };
        assert_eq!(
            (no_plan.kind(), no_plan.stop_reason().map(StopReason::code)),
            ("no-plan", Some("time-limit"))
        );
        let none = Status::infeasible(Infeasibility::NoAssignment);
        assert_eq!(none.kind(), "infeasible");
        assert_eq!(none.stop_reason(), None);
        let gap = Status::Feasible {
            reason: StopReason::GapReached { gap: 0.01 },
        };
        assert_eq!(
            gap.stop_reason().unwrap().to_string(),
            "reached the requested gap 1.0000%"
        );
        assert_eq!(
            StopReason::TimeLimit.to_string(),
            "time limit",
            "docs/results.md and the README quote it"
        );
    }
}

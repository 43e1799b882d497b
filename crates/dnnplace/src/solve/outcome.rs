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

use super::budget;
use crate::model::Placement;

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
        reason: String,
        non_contiguous_may_help: bool,
    },
    /// The run stopped for `reason` before it found a plan. One may exist: this is not a
    /// proof of infeasibility.
    NoPlan { reason: StopReason },
}

impl Status {
    /// [`Status::Infeasible`] with a reason that does not involve contiguity.
    pub fn infeasible(reason: impl Into<String>) -> Status {
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
    fn statuses_have_stable_codes_and_no_plan_is_not_infeasible() {
        let no_plan = Status::NoPlan {
            reason: StopReason::TimeLimit,
        };
        assert_eq!(
            (no_plan.kind(), no_plan.stop_reason().map(StopReason::code)),
            ("no-plan", Some("time-limit"))
        );
        assert_eq!(Status::infeasible("x").kind(), "infeasible");
        assert_eq!(Status::infeasible("x").stop_reason(), None);
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

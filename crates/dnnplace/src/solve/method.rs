//! One interface for every method: the [`Method`] trait, the typed [`MethodId`] with its
//! capabilities, and the registry the command line, `compare` and the reports use.

use super::{auto, baselines, brute_force, dp, learned, milp, Outcome, Problem, SolveError};

/// The methods of the registry, typed: what the command line, `compare` and the reports
/// dispatch on instead of names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MethodId {
    Auto,
    Dp,
    Ip,
    PipeDream,
    PipeDreamTopo,
    LocalSearch,
    Partitioner,
    Rl,
    Genetic,
    Greedy,
    Single,
    Expert,
    BruteForce,
}

impl MethodId {
    /// Every method, in registry order.
    pub const ALL: [MethodId; 13] = [
        MethodId::Auto,
        MethodId::Dp,
        MethodId::Ip,
        MethodId::PipeDream,
        MethodId::PipeDreamTopo,
        MethodId::LocalSearch,
        MethodId::Partitioner,
        MethodId::Rl,
        MethodId::Genetic,
        MethodId::Greedy,
        MethodId::Single,
        MethodId::Expert,
        MethodId::BruteForce,
    ];

    /// The name on the command line (`--method NAME`).
    pub fn name(self) -> &'static str {
        match self {
            MethodId::Auto => "auto",
            MethodId::Dp => "dp",
            MethodId::Ip => "ip",
            MethodId::PipeDream => "pipedream",
            MethodId::PipeDreamTopo => "pipedream-topo",
            MethodId::LocalSearch => "local-search",
            MethodId::Partitioner => "partitioner",
            MethodId::Rl => "rl",
            MethodId::Genetic => "genetic",
            MethodId::Greedy => "greedy",
            MethodId::Single => "single",
            MethodId::Expert => "expert",
            MethodId::BruteForce => "brute-force",
        }
    }

    /// The method called `name`, if any.
    pub fn from_name(name: &str) -> Option<MethodId> {
        MethodId::ALL.into_iter().find(|m| m.name() == name)
    }

    /// An exact method: its plans come with a proof (the DP, the IP, brute force).
    pub fn proves_optimality(self) -> bool {
        matches!(self, MethodId::Dp | MethodId::Ip | MethodId::BruteForce)
    }

    /// The method only makes non-contiguous plans (local search, the partitioner): asked
    /// for a plan without `--non-contiguous`, the command line solves the non-contiguous
    /// problem and says so.
    pub fn only_non_contiguous(self) -> bool {
        matches!(self, MethodId::LocalSearch | MethodId::Partitioner)
    }

    /// The method searches for a plan; `expert` only scores the split it is given (whose
    /// device numbers are the file's, so [`super::plan`] does not clamp the device set for it).
    pub fn searches(self) -> bool {
        self != MethodId::Expert
    }

    /// The method searches the contiguous and the non-contiguous plan spaces alike (the
    /// search placers, `rl` and `genetic`): `compare` runs it on both problems.
    pub fn searches_both_spaces(self) -> bool {
        matches!(self, MethodId::Rl | MethodId::Genetic)
    }

    /// The method runs HiGHS (progress and Ctrl-C are wired for it on the command line).
    pub fn uses_milp_solver(self) -> bool {
        matches!(self, MethodId::Ip | MethodId::Auto)
    }

    /// The method dispatches to others (`auto`): `compare` runs those instead.
    pub fn dispatches(self) -> bool {
        self == MethodId::Auto
    }
}

impl std::fmt::Display for MethodId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a method does not handle a problem ([`Method::supports`]): printed after "method
/// NAME does not support " ([`super::SolveError::Unsupported`]) and in `compare`'s
/// not-run lines, each variant as one sentence with what to change.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Unsupported {
    /// The baselines that minimise TPS only.
    #[error("the {objective} objective (it minimises TPS)")]
    NotThroughput { objective: &'static str },
    /// The DP solves the throughput objective only.
    #[error("the {objective} objective (use --method ip)")]
    DpObjective { objective: &'static str },
    #[error("non-contiguous splits (use --method ip)")]
    DpNonContiguous,
    #[error("contiguous problems: its moves ignore contiguity (use --non-contiguous)")]
    LocalSearchContiguous,
    #[error("contiguous problems: METIS parts need not be contiguous (use --non-contiguous)")]
    PartitionerContiguous,
    #[error("latency with 0 pieces per accelerator")]
    ZeroPieces,
    #[error("a schedule's memory with an objective other than throughput")]
    ScheduleObjective,
    #[error("a schedule's memory in non-contiguous plans (a schedule runs one contiguous stage per device; drop --non-contiguous)")]
    ScheduleNonContiguous,
    /// The schedule has no device order on this many accelerators.
    #[error("{schedule} on {accelerators} accelerators: {reason}")]
    ScheduleOrder {
        schedule: String,
        accelerators: usize,
        reason: String,
    },
    #[error("the interleaved schedule with node {id} ({name}), which cannot run on an accelerator: every stage is a chunk of an accelerator, and CPU cores hold nothing")]
    InterleavedCpuOnly { id: i64, name: String },
    #[error("a schedule's memory in the positions model (--ip-experiment positions)")]
    SchedulePositionsModel,
    #[error("{classes} colour classes (at most {max})")]
    TooManyClasses { classes: usize, max: usize },
    #[error("{nodes} nodes with {pieces} pieces (at most {max} nodes when cuts are enumerated)")]
    TooManyNodesToCut {
        nodes: usize,
        pieces: usize,
        max: usize,
    },
    /// A cluster refuses the method, objective or plan space (the sentence after "on a
    /// cluster, ").
    #[error("this on a cluster: {0}")]
    OnCluster(super::cluster::plan::ClusterRefusal),
    /// A cluster method on a workload without a cluster.
    #[error("a workload without a cluster")]
    NoCluster,
    /// A schedule's memory on a cluster.
    #[error("a schedule's memory on a cluster (--schedule plans one machine)")]
    ClusterSchedule,
    #[error("a problem without a split file (give --split FILE)")]
    NoSplit,
    #[error("a split ({file}) for another workload")]
    SplitOfAnotherWorkload { file: String },
    #[error("this device set: the split {file} breaks a rule ({violation})")]
    SplitBreaksRule { file: String, violation: String },
    #[error("contiguous problems: the split {file} is not contiguous (use --non-contiguous)")]
    SplitNotContiguous { file: String },
    #[error("{pieces} piece(s) per accelerator: the split {file} has {has} (raise --pieces)")]
    SplitPieces {
        pieces: usize,
        file: String,
        has: usize,
    },
}

/// A placement method.
pub trait Method: Sync {
    /// Which method this is.
    fn id(&self) -> MethodId;
    /// Short name used on the command line (`dp`, `ip`, `brute-force`, ...).
    fn name(&self) -> &'static str {
        self.id().name()
    }
    /// Whether the method handles this problem (objective, contiguity); `Err` says why not.
    /// [default: every problem]
    fn supports(&self, _problem: &Problem) -> Result<(), Unsupported> {
        Ok(())
    }
    /// Solves; the plan is checked by [`super::plan`], not here.
    fn solve(&self, problem: &Problem) -> Result<Outcome, SolveError>;
    /// Whether the method proves optimality (an exact solver rather than a heuristic).
    /// `compare` uses it to skip re-proving a contiguous optimum another method has
    /// proven. [default: [`MethodId::proves_optimality`]]
    fn proves_optimality(&self) -> bool {
        self.id().proves_optimality()
    }
    /// Relative tolerance between the method's objective and the scorer's. [default: 1e-9]
    fn tolerance(&self) -> f64 {
        1e-9
    }
}

/// The methods `compare` runs, in [`MethodId::ALL`] order: all but `auto`, which
/// dispatches to them ([`MethodId::dispatches`]).
pub fn methods() -> Vec<Box<dyn Method>> {
    MethodId::ALL
        .into_iter()
        .filter(|m| !m.dispatches())
        .map(method)
        .collect()
}

/// The method `id` (`expert` without a split: it declines every problem until given one).
pub fn method(id: MethodId) -> Box<dyn Method> {
    match id {
        MethodId::Auto => Box::new(auto::Auto::default()),
        MethodId::Dp => Box::new(dp::Dp),
        MethodId::Ip => Box::new(milp::Ip),
        MethodId::PipeDream => Box::new(baselines::pipedream::PipeDream),
        MethodId::PipeDreamTopo => Box::new(baselines::pipedream::PipeDreamTopo),
        MethodId::LocalSearch => Box::new(baselines::local_search::LocalSearch),
        MethodId::Partitioner => Box::new(baselines::partitioner::Partitioner),
        MethodId::Rl => Box::new(learned::policy_gradient::PolicyGradient),
        MethodId::Genetic => Box::new(learned::brkga::Genetic),
        MethodId::Greedy => Box::new(baselines::greedy::Greedy),
        MethodId::Single => Box::new(baselines::single::Single),
        MethodId::Expert => Box::new(baselines::expert::Expert::default()),
        MethodId::BruteForce => Box::new(brute_force::BruteForce),
    }
}

/// Names of every method the command line knows.
pub fn method_names() -> Vec<&'static str> {
    MethodId::ALL.iter().map(|m| m.name()).collect()
}

/// The method called `name`.
pub fn method_by_name(name: &str) -> Option<Box<dyn Method>> {
    MethodId::from_name(name).map(method)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_ids_round_trip_through_their_names_and_build_that_method() {
        for id in MethodId::ALL {
            assert_eq!(MethodId::from_name(id.name()), Some(id));
            assert_eq!(method(id).id(), id);
        }
        assert_eq!(MethodId::from_name("magic"), None);
        let exact: Vec<MethodId> = MethodId::ALL
            .into_iter()
            .filter(|m| m.proves_optimality())
            .collect();
        assert_eq!(exact, [MethodId::Dp, MethodId::Ip, MethodId::BruteForce]);
    }

    /// Each typed reason prints the sentence the string it replaced printed (the literals
    /// below are those strings, with sample values).
    #[test]
    fn unsupported_reasons_print_the_old_sentences() {
        let file = || "split.json".to_string();
        let cases = [
            (
                Unsupported::NotThroughput {
                    objective: "latency",
                },
                "the latency objective (it minimises TPS)",
            ),
            (
                Unsupported::DpObjective { objective: "latency" },
                "the latency objective (use --method ip)",
            ),
            (
                Unsupported::DpNonContiguous,
                "non-contiguous splits (use --method ip)",
            ),
            (
                Unsupported::LocalSearchContiguous,
                "contiguous problems: its moves ignore contiguity (use --non-contiguous)",
            ),
            (
                Unsupported::PartitionerContiguous,
                "contiguous problems: METIS parts need not be contiguous (use --non-contiguous)",
            ),
            (
                Unsupported::ZeroPieces,
                "latency with 0 pieces per accelerator",
            ),
            (
                Unsupported::ScheduleObjective,
                "a schedule's memory with an objective other than throughput",
            ),
            (
                Unsupported::ScheduleNonContiguous,
                "a schedule's memory in non-contiguous plans (a schedule runs one contiguous stage per device; drop --non-contiguous)",
            ),
            (
                Unsupported::ScheduleOrder {
                    schedule: "interleaved:2".into(),
                    accelerators: 3,
                    reason: "why".into(),
                },
                "interleaved:2 on 3 accelerators: why",
            ),
            (
                Unsupported::InterleavedCpuOnly {
                    id: 7,
                    name: "unnamed".into(),
                },
                "the interleaved schedule with node 7 (unnamed), which cannot run on an accelerator: every stage is a chunk of an accelerator, and CPU cores hold nothing",
            ),
            (
                Unsupported::SchedulePositionsModel,
                "a schedule's memory in the positions model (--ip-experiment positions)",
            ),
            (
                Unsupported::TooManyClasses { classes: 40, max: 16 },
                "40 colour classes (at most 16)",
            ),
            (
                Unsupported::TooManyNodesToCut {
                    nodes: 30,
                    pieces: 2,
                    max: 12,
                },
                "30 nodes with 2 pieces (at most 12 nodes when cuts are enumerated)",
            ),
            (
                Unsupported::NoSplit,
                "a problem without a split file (give --split FILE)",
            ),
            (
                Unsupported::SplitOfAnotherWorkload { file: file() },
                "a split (split.json) for another workload",
            ),
            (
                Unsupported::SplitBreaksRule {
                    file: file(),
                    violation: "v".into(),
                },
                "this device set: the split split.json breaks a rule (v)",
            ),
            (
                Unsupported::SplitNotContiguous { file: file() },
                "contiguous problems: the split split.json is not contiguous (use --non-contiguous)",
            ),
            (
                Unsupported::SplitPieces {
                    pieces: 1,
                    file: file(),
                    has: 3,
                },
                "1 piece(s) per accelerator: the split split.json has 3 (raise --pieces)",
            ),
        ];
        for (reason, sentence) in cases {
            assert_eq!(reason.to_string(), sentence);
        }
    }
}

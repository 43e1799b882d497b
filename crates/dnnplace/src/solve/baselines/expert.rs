//! `expert`: a split written by a person, read from a placement file (`--split FILE`, the
//! MODEL.md shape; a forward-only split of a training graph is completed by colour class
//! in [`crate::io::read_placement`]), scored like any other plan.
//!
//! The method promises contiguity only when the split is contiguous: for a contiguous
//! problem it declines a non-contiguous split (say `--non-contiguous`), so the check in
//! [`crate::solve::plan`] never rejects a person's file as a broken promise. A split that
//! breaks a hard rule (memory, device count, colour classes) is declined the same way,
//! with the violation, so it reads as bad input rather than as a solver bug.

use super::scored_outcome;
use crate::model::Placement;
use crate::solve::Unsupported;
use crate::solve::{Method, MethodId, Objective, Outcome, Problem, SolveError};

/// A fixed split (`--method expert --split FILE`). Without a split it declines every problem.
#[derive(Clone, Debug, Default)]
pub struct Expert {
    /// The split and where it came from.
    pub split: Option<(Placement, String)>,
}

impl Expert {
    pub fn new(placement: Placement, source: impl Into<String>) -> Self {
        Expert {
            split: Some((placement, source.into())),
        }
    }
}

impl Method for Expert {
    fn id(&self) -> MethodId {
        MethodId::Expert
    }

    fn supports(&self, problem: &Problem) -> Result<(), Unsupported> {
        let Some((placement, source)) = &self.split else {
            return Err(Unsupported::NoSplit);
        };
        if placement.assignment.len() != problem.workload.len() {
            return Err(Unsupported::SplitOfAnotherWorkload {
                file: source.clone(),
            });
        }
        let latency = matches!(problem.objective, Objective::Latency { .. });
        let e = crate::score::evaluate(problem.workload, placement, latency);
        if let Some(v) = e.violations.first() {
            return Err(Unsupported::SplitBreaksRule {
                file: source.clone(),
                violation: v.to_string(),
            });
        }
        {
            if problem.contiguous && !e.is_contiguous() {
                return Err(Unsupported::SplitNotContiguous {
                    file: source.clone(),
                });
            }
            if let Objective::Latency { pieces } = problem.objective {
                if e.max_pieces() > pieces {
                    return Err(Unsupported::SplitPieces {
                        pieces,
                        file: source.clone(),
                        has: e.max_pieces(),
                    });
                }
            }
        }
        Ok(())
    }

    fn solve(&self, problem: &Problem) -> Result<Outcome, SolveError> {
        let (placement, source) = self.split.as_ref().ok_or_else(|| SolveError::Unsupported {
            method: self.id(),
            what: "a problem without a split file".into(),
        })?;
        Ok(scored_outcome(
            self.id(),
            problem,
            placement.clone(),
            vec![format!("split read from {source}")],
        ))
    }
}

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
use crate::solve::{Method, Objective, Outcome, Problem, SolveError};

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
    fn id(&self) -> crate::solve::MethodId {
        crate::solve::MethodId::Expert
    }

    fn supports(&self, problem: &Problem) -> Result<(), String> {
        let Some((placement, source)) = &self.split else {
            return Err("a problem without a split file (give --split FILE)".into());
        };
        if placement.assignment.len() != problem.workload.len() {
            return Err(format!("a split ({source}) for another workload"));
        }
        let latency = matches!(problem.objective, Objective::Latency { .. });
        let e = crate::score::evaluate(problem.workload, placement, latency);
        if let Some(v) = e.violations.first() {
            return Err(format!(
                "this device set: the split {source} breaks a rule ({v})"
            ));
        }
        {
            if problem.contiguous && !e.is_contiguous() {
                return Err(format!("contiguous problems: the split {source} is not contiguous (use --non-contiguous)"));
            }
            if let Objective::Latency { pieces } = problem.objective {
                if e.max_pieces() > pieces {
                    return Err(format!(
                        "{pieces} piece(s) per accelerator: the split {source} has {} (raise --pieces)",
                        e.max_pieces()
                    ));
                }
            }
        }
        Ok(())
    }

    fn solve(&self, problem: &Problem) -> Result<Outcome, SolveError> {
        let (placement, source) = self.split.as_ref().ok_or_else(|| SolveError::Unsupported {
            method: self.name().into(),
            what: "a problem without a split file".into(),
        })?;
        Ok(scored_outcome(
            self.name(),
            problem,
            placement.clone(),
            vec![format!("split read from {source}")],
        ))
    }
}

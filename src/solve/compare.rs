//! Every applicable method on one workload: the loop behind `dnnplace compare` and
//! `dnnplace reproduce`.
//!
//! For each method of the registry ([`super::methods`], plus an expert split when one is
//! given) the contiguous problem is run when the method supports it; the non-contiguous
//! one is run when the method supports it and either declines the contiguous problem
//! (local search, METIS, a non-contiguous expert split), or proved the contiguous one
//! optimal (an exact method: relaxing contiguity may help), or found it infeasible because
//! of the contiguity rule ([`Status::Infeasible`]'s `non_contiguous_may_help`). A heuristic that produced a
//! contiguous plan, or that cannot place the workload at all, is not run twice. Every plan goes through [`super::plan`],
//! so every row is re-scored; a method that fails becomes a row with its error.

use super::{plan, Limits, Method, MethodId, Objective, Plan, Problem, Status};
use crate::model::Workload;

/// One run of one method.
#[derive(Clone, Debug)]
pub struct Row {
    pub method: MethodId,
    /// Whether the problem asked for contiguous plans.
    pub contiguous_problem: bool,
    /// The checked plan, or why there is none.
    pub result: Result<Plan, String>,
}

/// A method that was not run, and why.
#[derive(Clone, Debug)]
pub struct Skipped {
    pub method: MethodId,
    pub reason: String,
}

/// The comparison of one workload.
#[derive(Clone, Debug)]
pub struct Comparison {
    pub objective: Objective,
    pub rows: Vec<Row>,
    pub skipped: Vec<Skipped>,
}

impl Row {
    /// The primary objective of this row's plan (∞ without a plan).
    pub fn value(&self, objective: Objective) -> f64 {
        self.result.as_ref().map_or(f64::INFINITY, |p| p.objective(objective))
    }

    /// The method name with the problem variant when it matters.
    pub fn label(&self) -> String {
        if self.contiguous_problem {
            self.method.name().to_string()
        } else {
            format!("{} (non-contiguous)", self.method)
        }
    }
}

/// Runs `methods` (typically [`super::methods`] with the expert's split filled in) on `w`.
///
/// With `skip_proven_contiguous`, an exact method ([`Method::proves_optimality`]) that also
/// handles the non-contiguous problem is not run on the contiguous one once an earlier method has proven the contiguous optimum
/// (e.g. the IP after the DP): that row could only repeat a known value, and `reproduce`
/// spends its time where it is informative. The skip is listed with its reason.
pub fn compare(
    w: &Workload,
    objective: Objective,
    limits: &Limits,
    methods: &[Box<dyn Method>],
    skip_proven_contiguous: bool,
) -> Comparison {
    let mut rows: Vec<Row> = Vec::new();
    let mut skipped = Vec::new();
    for method in methods {
        let problem = |contiguous| Problem { workload: w, objective, contiguous, limits: limits.clone() };
        let (contiguous, relaxed) = (problem(true), problem(false));
        let mut ran_contiguous = None;
        let mut contiguous_support = method.supports(&contiguous);
        let proven_by = rows.iter().find(|r| {
            r.contiguous_problem && r.result.as_ref().is_ok_and(|p| p.outcome.status == Status::Optimal)
        });
        let exact = method.proves_optimality();
        if let (true, true, Ok(()), Some(by), Ok(())) =
            (skip_proven_contiguous, exact, &contiguous_support, proven_by, method.supports(&relaxed))
        {
            skipped.push(Skipped {
                method: method.id(),
                reason: format!("contiguous problem skipped: `{}` already proved its optimum; run on the non-contiguous one", by.method),
            });
            contiguous_support = Err("skipped".into());
            ran_contiguous = Some(true);
        }
        if contiguous_support.is_ok() {
            let result = plan(method.as_ref(), &contiguous).map_err(|e| e.to_string());
            ran_contiguous = Some(match &result {
                Ok(p) => match &p.outcome.status {
                    Status::Optimal => true,
                    Status::Infeasible { non_contiguous_may_help, .. } => *non_contiguous_may_help,
                    _ => false,
                },
                Err(_) => false,
            });
            rows.push(Row { method: method.id(), contiguous_problem: true, result });
        }
        match method.supports(&relaxed) {
            Ok(()) if ran_contiguous.is_none_or(|exact| exact) => {
                let result = plan(method.as_ref(), &relaxed).map_err(|e| e.to_string());
                rows.push(Row { method: method.id(), contiguous_problem: false, result });
            }
            Ok(()) => {}
            Err(why) => {
                if let (Err(why_contiguous), None) = (contiguous_support, ran_contiguous) {
                    let reason = if why == why_contiguous { why } else { format!("{why_contiguous}; {why}") };
                    skipped.push(Skipped { method: method.id(), reason: format!("does not support {reason}") });
                }
            }
        }
    }
    Comparison { objective, rows, skipped }
}

impl Comparison {
    /// The least primary objective over the rows with a plan.
    pub fn best(&self) -> f64 {
        self.rows.iter().map(|r| r.value(self.objective)).fold(f64::INFINITY, f64::min)
    }
}

//! Every applicable method on one workload: the loop behind `dnnplace compare` and
//! `dnnplace reproduce`.
//!
//! For each method of the registry ([`super::methods`], plus an expert split when one is
//! given) the contiguous problem is run when the method supports it; the non-contiguous
//! one is run when the method supports it and either declines the contiguous problem
//! (local search, METIS, a non-contiguous expert split), or proved the contiguous one
//! optimal (an exact method: relaxing contiguity may help), or found it infeasible because
//! of the contiguity rule ([`Status::Infeasible`]'s `non_contiguous_may_help`), or searches both plan
//! spaces ([`MethodId::searches_both_spaces`]: `rl`, `genetic`). A heuristic that produced a
//! contiguous plan, or that cannot place the workload at all, is not run twice. Every plan goes through [`super::plan`],
//! so every row is re-scored; a method that fails becomes a row with its error.
//!
//! [`compare_within`] runs the whole comparison within one [`Budget`] (`compare
//! --time-limit`, Ctrl-C): each run gets the smaller of its own limit
//! (`Limits::time_limit_s`) and an equal share of what is left, `R / m` for R seconds left
//! and m methods not yet run (a method that finishes early leaves its time to the later
//! ones); once the budget is out the remaining methods are listed as skipped, with the reason.
//! Every run gets the whole memory budget: runs are one after another.

use super::budget::Budget;
use super::{plan, supports, Limits, Method, MethodId, Objective, Plan, Problem, Status};
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
        self.result
            .as_ref()
            .map_or(f64::INFINITY, |p| p.objective(objective))
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
    compare_within(
        w,
        objective,
        limits,
        methods,
        skip_proven_contiguous,
        &Budget::unlimited(),
    )
}

/// [`compare`] within `budget` (module docs).
pub fn compare_within(
    w: &Workload,
    objective: Objective,
    limits: &Limits,
    methods: &[Box<dyn Method>],
    skip_proven_contiguous: bool,
    budget: &Budget,
) -> Comparison {
    let mut rows: Vec<Row> = Vec::new();
    let mut skipped = Vec::new();
    for (i, method) in methods.iter().enumerate() {
        if let Err(e) = budget.check() {
            skipped.push(Skipped {
                method: method.id(),
                reason: e.to_string(),
            });
            continue;
        }
        // The limits of a run starting now: its own, or its share of what is left.
        let limits_now = || {
            let mut limits = limits.clone();
            if let Some(left) = budget.remaining_s() {
                let share = left / (methods.len() - i) as f64;
                limits.time_limit_s = Some(limits.time_limit_s.map_or(share, |t| t.min(share)));
            }
            limits
        };
        let problem = |contiguous| Problem {
            workload: w,
            devices: crate::solve::Devices::of(w),
            objective,
            contiguous,
            limits: limits_now(),
            pipeline: None,
        };
        let (contiguous, relaxed) = (problem(true), problem(false));
        let mut ran_contiguous = None;
        let contiguous_support = supports(method.as_ref(), &contiguous);
        let mut run_contiguous = contiguous_support.is_ok();
        let proven_by = rows.iter().find(|r| {
            r.contiguous_problem
                && r.result
                    .as_ref()
                    .is_ok_and(|p| p.outcome.status == Status::Optimal)
        });
        let exact = method.proves_optimality();
        if let (true, true, Ok(()), Some(by), Ok(())) = (
            skip_proven_contiguous,
            exact,
            &contiguous_support,
            proven_by,
            supports(method.as_ref(), &relaxed),
        ) {
            skipped.push(Skipped {
                method: method.id(),
                reason: format!("contiguous problem skipped: `{}` already proved its optimum; run on the non-contiguous one", by.method),
            });
            run_contiguous = false;
            ran_contiguous = Some(true);
        }
        if run_contiguous {
            let result = plan(method.as_ref(), &problem(true)).map_err(|e| e.to_string());
            ran_contiguous = Some(non_contiguous_follows(method.id(), &result));
            rows.push(Row {
                method: method.id(),
                contiguous_problem: true,
                result,
            });
        }
        match supports(method.as_ref(), &relaxed) {
            Ok(()) if ran_contiguous.is_none_or(|exact| exact) && budget.is_exhausted() => {
                let reason = budget
                    .check()
                    .err()
                    .map_or_else(String::new, |e| e.to_string());
                skipped.push(Skipped {
                    method: method.id(),
                    reason: format!("non-contiguous problem not run: {reason}"),
                });
            }
            Ok(()) if ran_contiguous.is_none_or(|exact| exact) => {
                let result = plan(method.as_ref(), &problem(false)).map_err(|e| e.to_string());
                rows.push(Row {
                    method: method.id(),
                    contiguous_problem: false,
                    result,
                });
            }
            Ok(()) => {}
            Err(why) => {
                if let (Err(why_contiguous), None) = (contiguous_support, ran_contiguous) {
                    let reason = if why == why_contiguous {
                        why.to_string()
                    } else {
                        format!("{why_contiguous}; {why}")
                    };
                    skipped.push(Skipped {
                        method: method.id(),
                        reason: format!("does not support {reason}"),
                    });
                }
            }
        }
    }
    Comparison {
        objective,
        rows,
        skipped,
    }
}

/// Whether a method's non-contiguous run follows its contiguous `result`: always for a
/// method that searches both spaces at once; otherwise only after a proven contiguous
/// optimum (the non-contiguous run can then only improve on a known value), or a proven
/// infeasibility that non-contiguous plans may escape.
fn non_contiguous_follows(method: MethodId, result: &Result<Plan, String>) -> bool {
    match result {
        _ if method.searches_both_spaces() => true,
        Ok(p) => match &p.outcome.status {
            Status::Optimal => true,
            Status::Infeasible {
                non_contiguous_may_help,
                ..
            } => *non_contiguous_may_help,
            _ => false,
        },
        Err(_) => false,
    }
}

impl Comparison {
    /// The least primary objective over the rows with a plan.
    pub fn best(&self) -> f64 {
        self.rows
            .iter()
            .map(|r| r.value(self.objective))
            .fold(f64::INFINITY, f64::min)
    }
}

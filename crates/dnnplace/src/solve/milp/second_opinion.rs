//! The second opinion every integer program gets before its "optimal" (or "infeasible") is
//! believed: one road for the throughput, sync, stage-chain, interleaved, cluster and
//! latency IPs, all of which reach HiGHS through [`super::highs::run_to`].
//!
//! HiGHS 1.15's branch-and-cut can prune every plan better than its incumbent and still
//! report "optimal" (tests/ip_properties.rs, `two_pieces_highs_search_regression`: with
//! two pieces it proved 22.5 where 21.25 exists; any other `random_seed`, or presolve
//! off, found 21.25). So a claim of HiGHS's own is checked by another run on a copy of
//! the same model ([`Copy`], made before the first run, so the columns are the same and
//! each model's extraction reads either run's values):
//!
//! ```text
//! claim        first run: Optimal at z (and z above the combinatorial target, which
//!              would prove it by itself), or Infeasible
//! check        random_seed s+1 (s: the user's, else HiGHS's default 0), no warm start,
//!              objective_bound c = z − max(gap·|z|, 1e-9)   (only plans better than z by
//!              more than the termination gap; none for an Infeasible claim)
//! verdict      a plan below c (or at the target)   → Better: it replaces the first
//!                                                   answer, and is itself checked
//!              Optimal / Infeasible / ObjectiveBound → Confirmed: the claim stands
//!              anything else (time, Ctrl-C, memory)  → Unsettled: the first plan stands,
//!                                                   its proof and HiGHS's bound dropped
//! ```
//!
//! At most [`MAX_CHECKS`] runs follow the first; a claim still unconfirmed then is not
//! made (stop reason `unreliable-bound`). This is a second opinion from the same solver
//! along another search path, not a certificate; the brute-force property tests remain
//! the check. Its cost on the published workloads is measured in README, Integer programs.

use std::time::Instant;

use highs::{HighsModelStatus, RowProblem};

use super::highs::{remaining, run_once, stop_reason, Builder, Solved};
use crate::solve::DEFAULT_GAP;
use crate::solve::{Problem, SolveError, StopReason};

/// Runs after the first, at most.
pub const MAX_CHECKS: usize = 3;

/// A copy's bytes per nonzero, column and row (the row problem's own vectors).
const COPY_BYTES_PER_NONZERO: f64 = 16.0;
const COPY_BYTES_PER_COLUMN: f64 = 80.0;
const COPY_BYTES_PER_ROW: f64 = 16.0;

/// What one run after the first said (`seed`: its `random_seed`; `cutoff`: its
/// `objective_bound`, ∞ for an infeasibility claim; `time_s`: its HiGHS time).
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// Nothing better than the cutoff: the claim stands.
    Confirmed { seed: i64, cutoff: f64, time_s: f64 },
    /// A plan better than the claimed optimum (`found`, HiGHS's objective): the claim was
    /// wrong, and this run's answer replaces it.
    Better {
        seed: i64,
        cutoff: f64,
        found: f64,
        time_s: f64,
    },
    /// The run stopped before settling it (`reason`): optimality not claimed.
    Unsettled {
        seed: i64,
        cutoff: f64,
        reason: StopReason,
    },
    /// No run was possible (`reason`: the copy did not fit the memory budget).
    NotRun { reason: StopReason },
    /// [`MAX_CHECKS`] runs each found a better plan: the last claim is not made.
    GaveUp,
}

impl Check {
    /// A line for the outcome's notes.
    pub fn note(&self) -> String {
        let what = |seed: &i64, cutoff: &f64| {
            if cutoff.is_finite() {
                format!("HiGHS second opinion (random_seed {seed}, cutoff below {cutoff})")
            } else {
                format!("HiGHS second opinion on infeasibility (random_seed {seed})")
            }
        };
        match self {
            Check::Confirmed {
                seed,
                cutoff,
                time_s,
            } => format!(
                "{}: nothing better after {time_s:.3} s, claim confirmed",
                what(seed, cutoff)
            ),
            Check::Better {
                seed,
                cutoff,
                found,
                time_s,
            } => format!(
                "{}: found {found} after {time_s:.3} s (HiGHS's earlier claim was wrong)",
                what(seed, cutoff)
            ),
            Check::Unsettled {
                seed,
                cutoff,
                reason,
            } => format!(
                "{}: stopped ({reason}) before settling it: optimality not claimed",
                what(seed, cutoff)
            ),
            Check::NotRun { reason } => {
                format!("HiGHS second opinion not run ({reason}): optimality not claimed")
            }
            Check::GaveUp => format!(
                "{MAX_CHECKS} HiGHS runs each found a plan better than the last claimed optimum: optimality not claimed"
            ),
        }
    }
}

/// A copy of a model for the runs after the first (`None` for a pure LP, whose simplex
/// proof needs no second opinion), or why none could be kept.
pub(crate) struct Copy {
    rows: Result<Option<RowProblem>, StopReason>,
    integer_columns: Vec<usize>,
}

impl Copy {
    /// Copies `b`'s model when it has integer columns and the copy fits the budget beside
    /// HiGHS's estimate for the model itself.
    pub(crate) fn keep(b: &Builder) -> Copy {
        let rows = if b.integer_columns.is_empty() {
            Ok(None)
        } else {
            let copy = COPY_BYTES_PER_NONZERO * b.nonzeros as f64
                + COPY_BYTES_PER_COLUMN * b.columns as f64
                + COPY_BYTES_PER_ROW * b.rows as f64;
            let what = format!(
                "a copy of the integer program ({} columns, {} rows) for HiGHS's second opinion",
                b.columns, b.rows
            );
            match b.budget.reserve(&what, b.estimated_bytes() + copy) {
                Ok(()) => Ok(Some(b.problem.clone())),
                Err(e) => Err(e.into()),
            }
        };
        Copy {
            rows,
            integer_columns: b.integer_columns.clone(),
        }
    }
}

/// Whether `solved` claims a proof of HiGHS's own that a second opinion must check: an
/// optimum above `target` (at or below it the combinatorial bound proves it, within the
/// closeness [`super::status_with_plan`] calls proven: `gap` relative, or HiGHS's 1e-5
/// tolerances — a plan scoring 2.75 against the load bound 2.74999999725 was sent to a
/// check that stopped without settling and lost the optimality the bound gives it), or
/// infeasibility.
fn claims(solved: &Solved, target: f64, gap: f64) -> bool {
    match solved.status {
        HighsModelStatus::Optimal => {
            let z = solved.objective;
            let close = (gap * z.abs()).max(1e-5 * z.abs().max(1.0));
            solved.columns.is_some() && !solved.reached_target && z - target > close
        }
        HighsModelStatus::Infeasible => true,
        _ => false,
    }
}

/// The `random_seed` the problem's `--highs-option`s give HiGHS (its default: 0).
fn user_seed(problem: &Problem) -> i64 {
    (problem.limits.ip.highs_options.iter().rev())
        .find(|(name, _)| name == "random_seed")
        .and_then(|(_, v)| v.parse::<i64>().ok())
        .unwrap_or(0)
}

/// `first` (HiGHS's answer on the model `copy` was taken from) once its claim has been
/// checked (module docs): as it was, replaced by a better run's answer, or without its
/// proof. `started`: when the first run began (the time limit counts from there).
pub(crate) fn confirm(
    first: Solved,
    copy: Copy,
    problem: &Problem,
    target: f64,
    started: Instant,
) -> Result<Solved, SolveError> {
    let gap = problem.limits.mip_gap.unwrap_or(DEFAULT_GAP);
    let rows = match copy.rows {
        Ok(Some(rows)) => rows,
        Ok(None) => return Ok(first),
        Err(reason) if claims(&first, target, gap) => {
            return Ok(unsettled(first, Check::NotRun { reason }, None));
        }
        Err(_) => return Ok(first),
    };
    let (mut solved, mut seed) = (first, user_seed(problem));
    while claims(&solved, target, gap) {
        if solved.checks.len() == MAX_CHECKS {
            return Ok(unsettled(solved, Check::GaveUp, None));
        }
        seed = if seed >= i64::from(i32::MAX) || seed < 0 {
            0
        } else {
            seed + 1
        };
        let cutoff = if solved.status == HighsModelStatus::Infeasible {
            f64::INFINITY
        } else {
            solved.objective - (solved.objective.abs() * gap).max(1e-9)
        };
        let mut rest = remaining(problem, started);
        let options = &mut rest.limits.ip.highs_options;
        options.push(("random_seed".into(), seed.to_string()));
        if cutoff.is_finite() {
            options.push(("objective_bound".into(), format!("{cutoff:e}")));
        }
        let again = match run_once(rows.clone(), &copy.integer_columns, &rest, None, target) {
            Ok(again) => again,
            // A run HiGHS fails is no opinion: the first answer stands, without its claim.
            Err(e) => {
                let reason = StopReason::Solver {
                    status: e.to_string(),
                };
                let check = Check::Unsettled {
                    seed,
                    cutoff,
                    reason,
                };
                return Ok(unsettled(solved, check, None));
            }
        };
        if again.columns.is_some() && (again.objective < cutoff || again.reached_target) {
            let check = Check::Better {
                seed,
                cutoff,
                found: again.objective,
                time_s: again.time_s,
            };
            let checks = std::mem::take(&mut solved.checks);
            solved = again;
            solved.checks = checks;
            solved.checks.push(check);
            continue;
        }
        return Ok(match again.status {
            HighsModelStatus::Optimal
            | HighsModelStatus::Infeasible
            | HighsModelStatus::ObjectiveBound => {
                solved.checks.push(Check::Confirmed {
                    seed,
                    cutoff,
                    time_s: again.time_s,
                });
                solved
            }
            _ => {
                let reason = (again.stopped.clone()).unwrap_or_else(|| stop_reason(again.status));
                let check = Check::Unsettled {
                    seed,
                    cutoff,
                    reason,
                };
                unsettled(solved, check, Some(again))
            }
        });
    }
    Ok(solved)
}

/// `solved` without its claim: its plan (if any) stands with no bound of HiGHS's, stopped
/// for the reason of the run that could not settle it (`again`), or as unreliable.
fn unsettled(mut solved: Solved, check: Check, again: Option<Solved>) -> Solved {
    solved.bound = f64::NEG_INFINITY;
    match again {
        Some(again) => {
            solved.status = match again.status {
                HighsModelStatus::NotSet => HighsModelStatus::Unknown,
                other => other,
            };
            solved.stopped = again.stopped;
            solved.abandoned = again.abandoned;
        }
        None => {
            solved.status = HighsModelStatus::Unknown;
            solved.stopped = Some(match &check {
                Check::NotRun { reason } | Check::Unsettled { reason, .. } => reason.clone(),
                _ => StopReason::UnreliableBound,
            });
        }
    }
    solved.checks.push(check);
    solved
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DeviceSet, Node, Workload};
    use crate::solve::budget::Budget;

    /// A one-node workload: the problem only carries the limits here.
    fn workload() -> Workload {
        let node = Node {
            id: 0,
            name: None,
            fpga_latency: 1.0,
            cpu_latency: 1.0,
            size_bytes: 0.0,
            supported_on_accelerator: true,
            is_backward: false,
            color_class: None,
            layer_id: None,
            module: None,
            memory: None,
        };
        let devices = DeviceSet {
            accelerators: 1,
            memory_per_accelerator_bytes: 1.0,
            cpus: 0,
        };
        Workload::new(vec![node], Vec::new(), devices).unwrap()
    }

    /// Minimise `x + y + z` over binaries with `x + y ≥ 1`, `y + z ≥ 1`: optimum 1 (y = 1).
    fn cover() -> Builder {
        let mut b = Builder::within(Budget::unlimited());
        let (x, y, z) = (
            b.binary(1.0, true),
            b.binary(1.0, true),
            b.binary(1.0, true),
        );
        b.ge(&[(x, 1.0), (y, 1.0)], 1.0);
        b.ge(&[(y, 1.0), (z, 1.0)], 1.0);
        b
    }

    /// HiGHS's answer as a run would give it: `status` at `objective`.
    fn claim(status: HighsModelStatus, objective: f64, columns: Option<Vec<f64>>) -> Solved {
        Solved {
            status,
            columns,
            objective,
            bound: objective,
            time_s: 0.0,
            nodes: 0,
            reached_target: false,
            stopped: None,
            abandoned: false,
            checks: Vec::new(),
        }
    }

    fn check(first: Solved) -> Solved {
        let w = workload();
        let problem = Problem::throughput(&w);
        let copy = Copy::keep(&cover());
        confirm(first, copy, &problem, f64::NEG_INFINITY, Instant::now()).unwrap()
    }

    /// A false "optimal" (x = z = 1 at 2) is replaced by the second run's 1, itself
    /// confirmed by a third run; a true one is confirmed at once; a false "infeasible" is
    /// replaced by a plan.
    #[test]
    fn false_claims_are_caught_and_true_ones_confirmed() {
        let wrong = check(claim(
            HighsModelStatus::Optimal,
            2.0,
            Some(vec![1.0, 0.0, 1.0]),
        ));
        assert_eq!(wrong.status, HighsModelStatus::Optimal);
        assert!((wrong.objective - 1.0).abs() < 1e-9, "{}", wrong.objective);
        assert!(
            matches!(
                wrong.checks.as_slice(),
                [Check::Better { seed: 1, found, .. }, Check::Confirmed { seed: 2, .. }] if (found - 1.0).abs() < 1e-9
            ),
            "{:?}",
            wrong.checks
        );
        let right = check(claim(
            HighsModelStatus::Optimal,
            1.0,
            Some(vec![0.0, 1.0, 0.0]),
        ));
        assert!((right.objective - 1.0).abs() < 1e-9);
        assert!(
            matches!(right.checks.as_slice(), [Check::Confirmed { seed: 1, .. }]),
            "{:?}",
            right.checks
        );
        let infeasible = check(claim(HighsModelStatus::Infeasible, f64::INFINITY, None));
        assert!(infeasible.columns.is_some(), "{:?}", infeasible.checks);
        assert!(
            matches!(infeasible.checks[0], Check::Better { cutoff, .. } if cutoff == f64::INFINITY)
        );
    }

    /// A claim at or below the combinatorial target, or a stopped run, is not checked; a
    /// pure LP keeps no copy.
    #[test]
    fn only_claims_of_highs_own_are_checked() {
        let mut at_target = claim(HighsModelStatus::Optimal, 1.0, Some(vec![0.0, 1.0, 0.0]));
        assert!(!claims(&at_target, 1.0, DEFAULT_GAP));
        // Within HiGHS's tolerances of the target the bound proves it (2.75 against the
        // load bound 2.74999999725); clearly above it, HiGHS's claim is checked.
        let near = claim(
            HighsModelStatus::Optimal,
            2.750_000_463_6,
            Some(vec![0.0, 1.0, 0.0]),
        );
        assert!(!claims(&near, 2.749_999_997_25, DEFAULT_GAP));
        assert!(claims(&near, 2.7, DEFAULT_GAP));
        at_target.reached_target = true;
        assert!(!claims(&at_target, f64::NEG_INFINITY, DEFAULT_GAP));
        let stopped = claim(HighsModelStatus::ReachedTimeLimit, 2.0, Some(vec![1.0; 3]));
        assert!(!claims(&stopped, f64::NEG_INFINITY, DEFAULT_GAP));
        let mut lp = Builder::within(Budget::unlimited());
        let x = lp.continuous(1.0, 0.0, 1.0);
        lp.ge(&[(x, 1.0)], 0.5);
        assert!(matches!(Copy::keep(&lp).rows, Ok(None)));
    }
}

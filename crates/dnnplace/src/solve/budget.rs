//! One time and memory budget that every method, bound and warm start checks.
//!
//! A [`Budget`] is made once per run from the [`super::Limits`] (`time_limit_s`,
//! `memory_budget_bytes`) and handed down: a method polls [`Budget::check`] between units of
//! work (a DP level, a local-search step, a bound's bisection step) and stops with the
//! [`Exhausted`] reason, keeping its best plan so far. Sub-steps that must leave time for
//! later ones take a [`Budget::share`] of what is left.
//!
//! Ctrl-C is process-wide: [`request_interrupt`] sets one flag (async-signal-safe: one atomic
//! store) that every budget sees, so a run answers within one unit of work.
//!
//! Memory is checked where a method knows how much it is about to allocate
//! ([`Budget::reserve`]): an allocation that would exceed the budget is refused with a
//! message naming what needed it and how much, never attempted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

static INTERRUPT: AtomicBool = AtomicBool::new(false);

/// Asks every running method to stop and return its best plan so far.
pub fn request_interrupt() {
    INTERRUPT.store(true, Ordering::SeqCst);
}

/// Whether [`request_interrupt`] was called since the last [`clear_interrupt`].
pub fn interrupt_requested() -> bool {
    INTERRUPT.load(Ordering::SeqCst)
}

/// Forgets an earlier interrupt request.
pub fn clear_interrupt() {
    INTERRUPT.store(false, Ordering::SeqCst);
}

/// Why a budget ran out.
#[derive(Clone, Debug, PartialEq)]
pub enum Exhausted {
    /// The wall-clock limit passed.
    TimeLimit,
    /// Ctrl-C (or [`request_interrupt`]).
    Interrupted,
    /// `what` needed `needed_bytes`, more than the `budget_bytes` left.
    Memory {
        what: String,
        needed_bytes: f64,
        budget_bytes: f64,
    },
}

impl std::fmt::Display for Exhausted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exhausted::TimeLimit => write!(f, "time limit reached"),
            Exhausted::Interrupted => write!(f, "interrupted"),
            Exhausted::Memory { what, needed_bytes, budget_bytes } => write!(
                f,
                "{what} needs {}, more than the memory budget of {} (raise --memory-budget, or coarsen the graph)",
                crate::model::human_bytes(*needed_bytes),
                crate::model::human_bytes(*budget_bytes)
            ),
        }
    }
}

#[cfg(test)]
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// A deadline, the interrupt flag and a memory allowance. Cheap to copy.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    start: Instant,
    deadline: Option<Instant>,
    memory_bytes: Option<f64>,
}

impl Budget {
    /// A budget starting now. `time_limit_s` and `memory_bytes` are `None` for unlimited;
    /// a time limit too large to represent as an instant counts as none.
    pub fn new(time_limit_s: Option<f64>, memory_bytes: Option<f64>) -> Budget {
        let start = Instant::now();
        let deadline = time_limit_s
            .filter(|t| t.is_finite() && *t >= 0.0)
            .and_then(|t| Duration::try_from_secs_f64(t).ok())
            .and_then(|d| start.checked_add(d));
        Budget {
            start,
            deadline,
            memory_bytes,
        }
    }

    /// No limits (still answers Ctrl-C).
    pub fn unlimited() -> Budget {
        Budget::new(None, None)
    }

    /// `Err` once the deadline has passed or an interrupt was requested.
    pub fn check(&self) -> Result<(), Exhausted> {
        if interrupt_requested() {
            return Err(Exhausted::Interrupted);
        }
        match self.deadline {
            Some(d) if Instant::now() >= d => Err(Exhausted::TimeLimit),
            _ => Ok(()),
        }
    }

    /// Whether [`check`](Self::check) fails.
    pub fn is_exhausted(&self) -> bool {
        self.check().is_err()
    }

    /// Seconds since the budget started.
    pub fn elapsed_s(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// Seconds left (`None`: no time limit; 0 once past the deadline).
    pub fn remaining_s(&self) -> Option<f64> {
        self.deadline
            .map(|d| d.saturating_duration_since(Instant::now()).as_secs_f64())
    }

    /// The deadline, if any.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// A budget for a sub-step that may use `fraction` (0..=1) of the time left; same memory.
    pub fn share(&self, fraction: f64) -> Budget {
        let now = Instant::now();
        let deadline = self.deadline.map(|d| {
            let left = d.saturating_duration_since(now);
            now + left.mul_f64(fraction.clamp(0.0, 1.0))
        });
        Budget {
            start: now,
            deadline,
            memory_bytes: self.memory_bytes,
        }
    }

    /// The memory allowance, bytes (`None`: unlimited).
    pub fn memory_bytes(&self) -> Option<f64> {
        self.memory_bytes
    }

    /// `Err` if allocating `needed_bytes` for `what` would exceed the memory allowance.
    pub fn reserve(&self, what: &str, needed_bytes: f64) -> Result<(), Exhausted> {
        match self.memory_bytes {
            Some(budget) if needed_bytes > budget => Err(Exhausted::Memory {
                what: what.to_string(),
                needed_bytes,
                budget_bytes: budget,
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_time_limit_is_exhausted_at_once_and_none_never_is() {
        assert_eq!(
            Budget::new(Some(0.0), None).check(),
            Err(Exhausted::TimeLimit)
        );
        assert_eq!(Budget::new(None, None).check(), Ok(()));
        assert_eq!(
            Budget::new(Some(1e300), None).check(),
            Ok(()),
            "an unrepresentable deadline is no deadline"
        );
        assert!(Budget::new(Some(1e300), None).remaining_s().is_none());
    }

    #[test]
    fn a_share_never_outlives_its_parent() {
        let b = Budget::new(Some(100.0), None);
        let half = b.share(0.5);
        let (left, part) = (b.remaining_s().unwrap(), half.remaining_s().unwrap());
        assert!(
            part <= left * 0.5 + 1e-3 && part > left * 0.4,
            "{part} vs {left}"
        );
        assert!(Budget::new(None, None).share(0.5).remaining_s().is_none());
    }

    #[test]
    fn reserve_refuses_more_than_the_allowance_and_names_it() {
        let b = Budget::new(None, Some(GIB));
        assert!(b.reserve("the DP table", 0.5 * GIB).is_ok());
        let e = b.reserve("the DP table", 3.0 * GIB).unwrap_err();
        assert!(
            e.to_string()
                .contains("the DP table needs 3.00 GiB, more than the memory budget of 1.00 GiB"),
            "{e}"
        );
        assert!(Budget::unlimited().reserve("anything", 1e30).is_ok());
    }
}

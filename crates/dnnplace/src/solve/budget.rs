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
//!
//! **The run's limits** ([`set_run_limits`], called once by `plan` and `compare` after the
//! input is read) bind every budget made afterwards, however a phase computes its share: a
//! budget's deadline is at most the run's, and [`Budget::check`] also compares the
//! process's resident memory `R` (Linux: `/proc/self/statm`, read at most every
//! [`RSS_POLL`]) with the run's allowance `M` over the resident memory `R₀` at that call:
//! the check fails once `R − R₀ > M`, and [`Budget::reserve`] refuses `b` bytes when
//! `R − R₀ + b > M`. So a run's peak resident memory is at most `R₀ + M` plus what one
//! phase allocates between two checks (bounded by its own reservations; measured in
//! README's reliability table). Without [`set_run_limits`] (library use, tests) neither
//! applies.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

static INTERRUPT: AtomicBool = AtomicBool::new(false);

/// How often [`Budget::check`] reads the resident memory, at most.
pub const RSS_POLL: Duration = Duration::from_millis(10);

const NONE: u64 = u64::MAX;
static EPOCH: OnceLock<Instant> = OnceLock::new();
/// The run's deadline, nanoseconds after [`EPOCH`] (`NONE`: none).
static RUN_DEADLINE_NS: AtomicU64 = AtomicU64::new(NONE);
/// The run's memory allowance and the resident bytes when it was set (`NONE`: none).
static RUN_MEMORY: AtomicU64 = AtomicU64::new(NONE);
static RUN_BASE_RSS: AtomicU64 = AtomicU64::new(0);
/// When the resident memory was last read (ns after [`EPOCH`]) and what it was.
static LAST_POLL_NS: AtomicU64 = AtomicU64::new(0);
static LAST_RSS: AtomicU64 = AtomicU64::new(0);

fn epoch() -> Instant {
    *EPOCH.get_or_init(Instant::now)
}

fn since_epoch_ns(t: Instant) -> u64 {
    u64::try_from(t.saturating_duration_since(epoch()).as_nanos()).unwrap_or(NONE - 1)
}

/// The process's resident memory in bytes (`None` where it cannot be read).
pub fn resident_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages.saturating_mul(u64::try_from(page).ok().filter(|&p| p > 0)?))
}

/// Sets the run's limits (module docs): every budget made from now on ends by
/// `time_limit_s` after `started` (when the command began), and the process may grow by
/// at most `memory_bytes` of resident memory from what it holds now. `None`: no such limit.
pub fn set_run_limits(started: Instant, time_limit_s: Option<f64>, memory_bytes: Option<f64>) {
    let now = started;
    let deadline = time_limit_s
        .filter(|t| t.is_finite() && *t >= 0.0)
        .and_then(|t| Duration::try_from_secs_f64(t).ok())
        .and_then(|d| now.checked_add(d))
        .map_or(NONE, since_epoch_ns);
    RUN_DEADLINE_NS.store(deadline, Ordering::SeqCst);
    let base = resident_bytes();
    RUN_BASE_RSS.store(base.unwrap_or(0), Ordering::SeqCst);
    LAST_RSS.store(base.unwrap_or(0), Ordering::SeqCst);
    let memory = memory_bytes
        .filter(|m| m.is_finite() && *m >= 0.0 && base.is_some())
        .map_or(NONE, |m| m.min((NONE - 1) as f64) as u64);
    RUN_MEMORY.store(memory, Ordering::SeqCst);
}

/// The run's deadline, if [`set_run_limits`] gave one.
fn run_deadline() -> Option<Instant> {
    match RUN_DEADLINE_NS.load(Ordering::Relaxed) {
        NONE => None,
        ns => epoch().checked_add(Duration::from_nanos(ns)),
    }
}

/// The run's allowance and the resident memory it has grown by, read at most every
/// [`RSS_POLL`] ([`Budget::reserve`] is called once per IP row, and a read costs a few
/// microseconds); `None` without a run memory limit.
fn run_memory() -> Option<(f64, f64)> {
    let allowance = RUN_MEMORY.load(Ordering::Relaxed);
    if allowance == NONE {
        return None;
    }
    let now = since_epoch_ns(Instant::now());
    let last = LAST_POLL_NS.load(Ordering::Relaxed);
    let rss = if now.saturating_sub(last) >= RSS_POLL.as_nanos() as u64 {
        LAST_POLL_NS.store(now, Ordering::Relaxed);
        let r = resident_bytes().unwrap_or(0);
        LAST_RSS.store(r, Ordering::Relaxed);
        r
    } else {
        LAST_RSS.load(Ordering::Relaxed)
    };
    let grown = rss.saturating_sub(RUN_BASE_RSS.load(Ordering::Relaxed));
    Some((allowance as f64, grown as f64))
}

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

/// What is left of the run's memory allowance, bytes (`None`: no run memory limit): for a
/// phase that sizes a table to fit rather than refusing it.
pub fn run_memory_left() -> Option<f64> {
    run_memory().map(|(allowance, grown)| (allowance - grown).max(0.0))
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
        let deadline = match (deadline, run_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
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

    /// No deadline, not even the run's ([`set_run_limits`]); still answers Ctrl-C and the
    /// run's memory allowance. For a search that must reach its first plan past the time
    /// limit (then stops, reporting its gap).
    pub fn without_deadline() -> Budget {
        Budget {
            start: Instant::now(),
            deadline: None,
            memory_bytes: None,
        }
    }

    /// `Err` once the deadline has passed, an interrupt was requested, or the run has
    /// grown past its memory allowance (module docs).
    pub fn check(&self) -> Result<(), Exhausted> {
        if interrupt_requested() {
            return Err(Exhausted::Interrupted);
        }
        if let Some(d) = self.deadline {
            if Instant::now() >= d {
                return Err(Exhausted::TimeLimit);
            }
        }
        match run_memory() {
            Some((allowance, grown)) if grown > allowance => Err(Exhausted::Memory {
                what: "the run's resident memory".into(),
                needed_bytes: grown,
                budget_bytes: allowance,
            }),
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

    /// `Err` if allocating `needed_bytes` for `what` would exceed the memory allowance,
    /// counting what the run has grown by already (module docs).
    pub fn reserve(&self, what: &str, needed_bytes: f64) -> Result<(), Exhausted> {
        if let Some(budget) = self.memory_bytes {
            if needed_bytes > budget {
                return Err(Exhausted::Memory {
                    what: what.to_string(),
                    needed_bytes,
                    budget_bytes: budget,
                });
            }
        }
        match run_memory() {
            Some((allowance, grown)) if grown + needed_bytes > allowance => {
                Err(Exhausted::Memory {
                    what: format!(
                        "{what}, with {} of the run's memory in use",
                        crate::model::human_bytes(grown)
                    ),
                    needed_bytes,
                    budget_bytes: allowance,
                })
            }
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
    fn the_resident_memory_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            let r = resident_bytes().expect("/proc/self/statm");
            assert!(r > 1024 * 1024, "{r}");
        }
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

//! The HiGHS driver every integer program here runs on: the model [`Builder`] (columns,
//! rows and the integer columns for the warm start, within the memory budget), one solve
//! ([`run`], [`run_to`], [`run_to_bound`]) under the problem's limits and
//! `--highs-option`s, warm-started from a held plan, and the mapping of what HiGHS returned
//! to [`Solved`] and [`StopReason`].
//!
//! **Callbacks.** Every solve installs HiGHS's MIP, simplex and IPM interrupt callbacks
//! (through `highs-sys`): they poll [`interrupt_requested`](crate::solve::budget::interrupt_requested)
//! and the deadline and ask HiGHS to stop (it returns its best incumbent), stop it once its
//! incumbent meets a proven target (`run_to`: then nothing better is to be found), and,
//! about once a second, hand the registered progress hook ([`set_progress_hook`]) the
//! incumbent, the bound and the elapsed time. The solve runs in a worker thread that is
//! abandoned [`ABANDON_GRACE_S`] after the deadline (HiGHS's presolve checks no clock).
//!
//! **Memory.** HiGHS's memory is estimated as `40 MiB + 310 B × nonzeros + 200 B ×
//! columns` (fitted below, [`Builder::estimated_bytes`]); the builder stops adding rows
//! once it exceeds the budget, and [`refuse_model_size`] refuses a model before it is
//! built when its column count alone is too much.
//!
//! **Tolerances.** HiGHS's MIP feasibility tolerance is tightened to
//! [`MIP_FEASIBILITY_TOLERANCE`]; its gap is `--gap` or [`DEFAULT_GAP`].

use std::ffi::{c_char, c_int, c_void};
use std::sync::RwLock;
use std::time::Instant;

use ::highs::{
    HighsModelStatus, HighsSolutionStatus, HighsStatus, Model, RowProblem, Sense, TrySetOptionError,
};

use super::second_opinion;
use crate::solve::budget::{interrupt_requested, Budget, Exhausted};
use crate::solve::guard;
use crate::solve::{
    MethodId, Outcome, Problem, SolveError, Stats, Status, StopReason, DEFAULT_GAP,
};

/// A progress report of a running solve.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// Best objective found so far by HiGHS (∞ if none).
    pub incumbent: f64,
    /// Proven lower bound.
    pub bound: f64,
    /// Seconds since HiGHS started.
    pub elapsed_s: f64,
    /// Branch-and-bound nodes explored.
    pub nodes: i64,
}

/// A function that receives progress reports (about once a second).
pub type ProgressHook = fn(&Progress);

static PROGRESS_HOOK: RwLock<Option<ProgressHook>> = RwLock::new(None);

/// Registers (or with `None` removes) the process-wide progress hook.
pub fn set_progress_hook(hook: Option<ProgressHook>) {
    if let Ok(mut h) = PROGRESS_HOOK.write() {
        *h = hook;
    }
}

/// A model under construction: HiGHS columns and rows, with the integer columns
/// remembered for the warm start, within a [`Budget`]: once the model's estimated memory
/// exceeds the budget, or the time is up, no more rows are added and [`Builder::stopped`]
/// says why (the model is then never solved).
pub(crate) struct Builder {
    pub problem: RowProblem,
    pub(super) columns: usize,
    pub integer_columns: Vec<usize>,
    pub rows: usize,
    pub(super) nonzeros: usize,
    pub(super) budget: Budget,
    stopped: Option<Exhausted>,
    /// The numbers HiGHS would refuse ([`guard`]), checked before the model is handed over.
    guard: guard::Guard,
}

/// HiGHS's memory per nonzero, column and row of a MIP, bytes: the Rust row problem
/// (12 B per nonzero), HiGHS's column-wise and row-wise copies of the matrix, the
/// presolved copy and the MIP solver's own (about 12 B per nonzero each, and the
/// clique table and cut pool beside them), fitted to measurements: peak RSS of
/// `plan --method ip --time-limit 20s` (30 s for the last) minus that of the same run
/// with HiGHS's `time_limit=0` (model built and handed over, no presolve or search), on
/// the paper's throughput operator graphs, this 2-core machine: bert_l-3 inference
/// (12,570 nonzeros, 2,121 columns, 3,883 rows) 37.7 MiB; bert_l-6 training (25,460)
/// 48.7 MiB; resnet50 training (35,463) 54.2 MiB; bert_l-12 training (86,726) 50.1 MiB;
/// the same with 16 accelerators (211,906 nonzeros, 32,862 columns, 61,985 rows)
/// 87.2 MiB. So about 40 MiB whatever the size, then about 310 B per nonzero (columns
/// and rows included) between the last two; the estimate `40 MiB + 310 B × nonzeros`
/// is within −7 % … +31 % of all five (43.7, 47.5, 50.5, 65.6 and 102.6 MiB).
const BYTES_BASE: f64 = 40.0 * 1024.0 * 1024.0;
const BYTES_PER_NONZERO: f64 = 310.0;
/// What a column costs before HiGHS sees it: the row problem's bounds, cost and
/// integrality, and the model's own tables of column handles (README: 200 B per column).
const BYTES_PER_COLUMN: f64 = 200.0;

/// Rows between two looks at the clock while a model is built.
const ROWS_PER_CHECK: usize = 1024;

/// A column index.
pub(crate) type Var = highs::Col;

impl Builder {
    /// A builder that stops adding rows once `budget` runs out (time, Ctrl-C or memory).
    pub fn within(budget: Budget) -> Self {
        Builder {
            problem: RowProblem::default(),
            columns: 0,
            integer_columns: Vec::new(),
            rows: 0,
            nonzeros: 0,
            budget,
            stopped: None,
            guard: guard::Guard::default(),
        }
    }

    /// HiGHS's memory for the model so far, estimated (bytes).
    pub fn estimated_bytes(&self) -> f64 {
        BYTES_BASE + BYTES_PER_NONZERO * self.nonzeros as f64
    }

    /// Why the model was left unfinished, if it was.
    pub fn stopped(&self) -> Option<&Exhausted> {
        self.stopped.as_ref()
    }

    /// The budget the model is built within.
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// Whether the model was left unfinished or the budget (time, memory, Ctrl-C) is
    /// spent now, which then stops it: for a loop that computes much before each row.
    pub fn halted(&mut self) -> bool {
        if self.stopped.is_none() {
            self.stopped = self.budget.check().err();
        }
        self.stopped.is_some()
    }

    /// Whether a row of `terms` nonzeros may still be added (`stopped` says why not).
    fn admit(&mut self, terms: usize) -> bool {
        if self.stopped.is_some() {
            return false;
        }
        self.nonzeros += terms;
        let what = format!(
            "the integer program ({} columns, {} rows, {} nonzeros so far)",
            self.columns,
            self.rows + 1,
            self.nonzeros
        );
        if let Err(e) = self.budget.reserve(&what, self.estimated_bytes()) {
            self.stopped = Some(e);
            return false;
        }
        if self.rows.is_multiple_of(ROWS_PER_CHECK) {
            if let Err(e) = self.budget.check() {
                self.stopped = Some(e);
                return false;
            }
        }
        true
    }

    /// Counts `columns` about to be made (at [`BYTES_PER_COLUMN`] each, beside the nonzeros)
    /// against the budget before any is made; `false` (and [`stopped`](Self::stopped)
    /// says why) when they do not fit.
    pub fn reserve_columns(&mut self, columns: usize) -> bool {
        if self.stopped.is_some() {
            return false;
        }
        let what = format!("the integer program ({columns} columns)");
        let bytes = self.estimated_bytes() + BYTES_PER_COLUMN * columns as f64;
        match self
            .budget
            .reserve(&what, bytes)
            .and_then(|()| self.budget.check())
        {
            Ok(()) => true,
            Err(e) => {
                self.stopped = Some(e);
                false
            }
        }
    }

    /// A binary column with objective coefficient `cost`, or fixed to 0 when `allowed` is false.
    pub fn binary(&mut self, cost: f64, allowed: bool) -> Var {
        let at = self.columns;
        self.guard.cost(cost, || format!("column {at}"));
        self.integer_columns.push(self.columns);
        self.columns += 1;
        self.problem
            .add_integer_column(cost, 0.0..=if allowed { 1.0 } else { 0.0 })
    }

    /// A continuous column in `[lo, hi]`.
    pub fn continuous(&mut self, cost: f64, lo: f64, hi: f64) -> Var {
        let at = self.columns;
        self.guard.cost(cost, || format!("column {at}"));
        self.guard.bound(lo, || format!("column {at}"));
        self.guard.bound(hi, || format!("column {at}"));
        self.columns += 1;
        self.problem.add_column(cost, lo..=hi)
    }

    /// `Σ terms ≤ hi`.
    pub fn le(&mut self, terms: &[(Var, f64)], hi: f64) {
        if !self.admit(terms.len()) {
            return;
        }
        self.watch(terms, hi);
        self.rows += 1;
        self.problem.add_row(..=hi, terms.iter().copied());
    }

    /// `Σ terms ≥ lo`.
    pub fn ge(&mut self, terms: &[(Var, f64)], lo: f64) {
        if !self.admit(terms.len()) {
            return;
        }
        self.watch(terms, lo);
        self.rows += 1;
        self.problem.add_row(lo.., terms.iter().copied());
    }

    /// `Σ terms = value`.
    pub fn eq(&mut self, terms: &[(Var, f64)], value: f64) {
        if !self.admit(terms.len()) {
            return;
        }
        self.watch(terms, value);
        self.rows += 1;
        self.problem.add_row(value..=value, terms.iter().copied());
    }

    pub fn columns(&self) -> usize {
        self.columns
    }

    /// Passes a row's coefficients and bound through the guard.
    fn watch(&mut self, terms: &[(Var, f64)], bound: f64) {
        let row = self.rows;
        self.guard.bound(bound, || format!("row {row}"));
        for &(_, a) in terms {
            self.guard.coefficient(a, || format!("row {row}"));
        }
    }
}

/// What HiGHS returned.
pub(crate) struct Solved {
    pub status: HighsModelStatus,
    /// Column values of the best solution, if HiGHS has one.
    pub columns: Option<Vec<f64>>,
    /// HiGHS's objective of that solution (not trusted; see the module docs).
    pub objective: f64,
    /// HiGHS's dual bound (−∞ if none).
    pub bound: f64,
    pub time_s: f64,
    pub nodes: i64,
    /// HiGHS was stopped because its incumbent met the target of [`run_to`].
    pub reached_target: bool,
    /// HiGHS was not run, or was stopped by the budget: why (time, Ctrl-C, memory).
    pub stopped: Option<StopReason>,
    /// HiGHS was still running at the deadline and its answer was not waited for.
    pub abandoned: bool,
    /// What the runs after the first said of its proof ([`second_opinion`]), in order.
    pub checks: Vec<second_opinion::Check>,
}

struct CallbackState {
    last_report_s: f64,
    hook: Option<ProgressHook>,
    /// Stop once HiGHS's incumbent is at most this (a known lower bound, with the gap).
    target: f64,
    reached_target: bool,
    deadline: Option<Instant>,
    timed_out: bool,
}

unsafe extern "C" fn callback(
    callback_type: c_int,
    _message: *const c_char,
    data_out: *const highs_sys::HighsCallbackDataOut,
    data_in: *mut highs_sys::HighsCallbackDataIn,
    user_data: *mut c_void,
) {
    let mip = callback_type == highs_sys::kHighsCallbackMipInterrupt as c_int;
    if !mip
        && callback_type != highs_sys::kHighsCallbackSimplexInterrupt as c_int
        && callback_type != highs_sys::kHighsCallbackIpmInterrupt as c_int
    {
        return;
    }
    if interrupt_requested() && !data_in.is_null() {
        // SAFETY: HiGHS passes a valid, exclusive `data_in` for interrupt callbacks.
        unsafe { (*data_in).user_interrupt = 1 };
    }
    if user_data.is_null() || data_out.is_null() {
        return;
    }
    // SAFETY: `user_data` is the `CallbackState` owned by `run` for the whole solve, and
    // HiGHS calls back from the thread that called `Highs_run`.
    let state = unsafe { &mut *(user_data as *mut CallbackState) };
    if state.deadline.is_some_and(|d| Instant::now() >= d) && !data_in.is_null() {
        state.timed_out = true;
        // SAFETY: as above.
        unsafe { (*data_in).user_interrupt = 1 };
    }
    if !mip {
        return;
    }
    // SAFETY: valid for the duration of the callback.
    let out = unsafe { &*data_out };
    if out.mip_primal_bound <= state.target && !data_in.is_null() {
        state.reached_target = true;
        // SAFETY: as above.
        unsafe { (*data_in).user_interrupt = 1 };
    }
    let Some(hook) = state.hook else { return };
    if out.running_time - state.last_report_s >= 1.0 {
        state.last_report_s = out.running_time;
        hook(&Progress {
            incumbent: out.mip_primal_bound,
            bound: out.mip_dual_bound,
            elapsed_s: out.running_time,
            nodes: out.mip_node_count,
        });
    }
}

/// HiGHS's integrality and row tolerance in the MIP search, tighter than its default 1e-6:
/// with 1e-6, HiGHS 1.15 warm-started from an 11.5 plan proved 11.5 "optimal" where 11.25
/// exists (tests/coarsen_properties.rs, `auto_coarsened_bound_regression`); with 1e-9 it
/// finds 11.25. Coefficients stay within `2^22` ([`presolve`]), so 1e-9 stays meaningful.
pub(crate) const MIP_FEASIBILITY_TOLERANCE: f64 = 1e-9;

/// Why HiGHS gave no answer ([`SolveError::Solver`]), with HiGHS's own status or error
/// where it gives one.
#[derive(Debug, thiserror::Error)]
pub enum HighsFailure {
    /// HiGHS refused the model (`0`: its status).
    #[error("HiGHS rejected the model: {0:?}")]
    RejectedModel(HighsStatus),
    /// HiGHS refused option `name`.
    #[error("option {name}: {error:?}")]
    Option {
        name: String,
        error: TrySetOptionError,
    },
    /// HiGHS refused `--highs-option name=value`.
    #[error("HiGHS refused option {name}={value}")]
    RefusedOption { name: String, value: String },
    /// No thread could be spawned for the solve.
    #[error("HiGHS failed: no thread for the solve: {0}")]
    NoThread(std::io::Error),
    /// The solve thread ended without sending its answer.
    #[error("HiGHS failed: the solve thread ended without an answer")]
    ThreadEnded,
    /// The run itself failed (`0`: HiGHS's status, "Error").
    #[error("HiGHS failed: {0:?}")]
    Run(HighsStatus),
    /// HiGHS refused the warm start.
    #[error("HiGHS refused the warm start")]
    RefusedWarmStart,
}

impl HighsFailure {
    /// Whether a run failed (the three "HiGHS failed" cases), as opposed to HiGHS refusing
    /// the model, an option or the warm start.
    pub fn is_failed_run(&self) -> bool {
        matches!(
            self,
            HighsFailure::NoThread(_) | HighsFailure::ThreadEnded | HighsFailure::Run(_)
        )
    }
}

/// Solves `builder`'s model (minimisation) under the problem's limits, warm-started with
/// values of the integer columns (`warm`, in [`Builder::integer_columns`] order).
pub(crate) fn run(
    builder: Builder,
    problem: &Problem,
    warm: Option<&[f64]>,
) -> Result<Solved, SolveError> {
    run_to(builder, problem, warm, f64::NEG_INFINITY)
}

/// [`run`], stopping as soon as HiGHS's incumbent objective is at most `target` (a proven
/// lower bound on the optimum, times 1 + the gap): then nothing better is to be found
/// ([`Solved::reached_target`]).
pub(crate) fn run_to(
    builder: Builder,
    problem: &Problem,
    warm: Option<&[f64]>,
    target: f64,
) -> Result<Solved, SolveError> {
    let started = Instant::now();
    let budget = problem.limits.budget();
    if let Some(reason) = builder.stopped().cloned().or_else(|| budget.check().err()) {
        return Ok(Solved::not_run(reason.into()));
    }
    builder.guard.check(MethodId::Ip)?;
    let copy = second_opinion::Copy::keep(&builder);
    let first = run_once(
        builder.problem,
        &builder.integer_columns,
        problem,
        warm,
        target,
    )?;
    second_opinion::confirm(first, copy, problem, target, started)
}

/// One HiGHS run of `rows` (integer columns `integer_columns`) under the problem's limits
/// and `--highs-option`s, warm-started from `warm`, stopped once its incumbent is at most
/// `target`: HiGHS's answer, unchecked ([`run_to`] checks it).
pub(super) fn run_once(
    rows: RowProblem,
    integer_columns: &[usize],
    problem: &Problem,
    warm: Option<&[f64]>,
    target: f64,
) -> Result<Solved, SolveError> {
    let budget = problem.limits.budget();
    let mut model =
        Model::try_new(rows).map_err(|e| SolveError::Solver(HighsFailure::RejectedModel(e)))?;
    model.set_sense(Sense::Minimise);
    model.make_quiet();
    set_options(&mut model, problem, budget.remaining_s())?;
    if problem.limits.ip.warm_start {
        if let Some(values) = warm {
            set_warm_start(&mut model, integer_columns, values)?;
        }
    }
    let hook = PROGRESS_HOOK.read().ok().and_then(|h| *h);
    let state = CallbackState {
        last_report_s: 0.0,
        hook,
        target,
        reached_target: false,
        deadline: budget.deadline(),
        timed_out: false,
    };
    // HiGHS's presolve checks neither its time limit nor the interrupt callback between
    // some of its steps (on bert_l-12 training with 0.5 s left it ran 1.4 s); the solve
    // runs in a worker thread, waited for until the deadline (or a Ctrl-C) and a grace.
    let (tx, rx) = std::sync::mpsc::channel();
    let model = Unshared(model);
    let spawned = std::thread::Builder::new()
        .name("highs".into())
        .spawn(move || drop(tx.send(solve_with_callbacks(model, state))));
    if let Err(e) = spawned {
        return Err(SolveError::Solver(HighsFailure::NoThread(e)));
    }
    let grace = std::time::Duration::from_secs_f64(ABANDON_GRACE_S);
    let mut give_up = budget.deadline().map(|d| d + grace);
    loop {
        match rx.recv_timeout(std::time::Duration::from_millis(20)) {
            Ok(solved) => return solved,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(SolveError::Solver(HighsFailure::ThreadEnded));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                if interrupt_requested() {
                    give_up = Some(give_up.map_or(now + grace, |g| g.min(now + grace)));
                }
                if give_up.is_some_and(|g| now >= g) {
                    let reason = if interrupt_requested() {
                        StopReason::Interrupted
                    } else {
                        StopReason::TimeLimit
                    };
                    return Ok(Solved {
                        abandoned: true,
                        ..Solved::not_run(reason)
                    });
                }
            }
        }
    }
}

/// How long past the deadline a HiGHS solve is waited for before it is abandoned (it
/// then stops on its own time limit, in its thread, and its answer is dropped).
const ABANDON_GRACE_S: f64 = 0.2;

/// A HiGHS model moved into the solve's worker thread. HiGHS instances share no state,
/// and the model is used by that thread alone from then on.
struct Unshared(Model);

// SAFETY: see `Unshared`: the model is owned and touched by one thread at a time.
unsafe impl Send for Unshared {}

/// Runs HiGHS on `model` with the time/interrupt/target callback reading `state`.
fn solve_with_callbacks(model: Unshared, state: CallbackState) -> Result<Solved, SolveError> {
    let mut model = model.0;
    let mut state = Box::new(state);
    // SAFETY: `state` outlives the solve (dropped at the end of this function, after
    // HiGHS returns); the callback only reads HiGHS's data and writes `user_interrupt`.
    unsafe {
        highs_sys::Highs_setCallback(
            model.as_mut_ptr(),
            Some(callback),
            state.as_mut() as *mut CallbackState as *mut c_void,
        );
        highs_sys::Highs_startCallback(
            model.as_mut_ptr(),
            highs_sys::kHighsCallbackMipInterrupt as highs_sys::HighsInt,
        );
        highs_sys::Highs_startCallback(
            model.as_mut_ptr(),
            highs_sys::kHighsCallbackSimplexInterrupt as highs_sys::HighsInt,
        );
        highs_sys::Highs_startCallback(
            model.as_mut_ptr(),
            highs_sys::kHighsCallbackIpmInterrupt as highs_sys::HighsInt,
        );
    }
    let start = Instant::now();
    let solved = model
        .try_solve()
        .map_err(|e| SolveError::Solver(HighsFailure::Run(e)))?;
    let time_s = start.elapsed().as_secs_f64();
    let (reached_target, timed_out) = (state.reached_target, state.timed_out);
    drop(state);
    let mut status = solved.status();
    if timed_out
        && !reached_target
        && status == HighsModelStatus::ReachedInterrupt
        && !interrupt_requested()
    {
        status = HighsModelStatus::ReachedTimeLimit;
    }
    let has_solution = solved.primal_solution_status() == HighsSolutionStatus::Feasible;
    let columns = has_solution.then(|| solved.get_solution().columns().to_vec());
    let bound = solved
        .double_info_value(c"mip_dual_bound")
        .unwrap_or(f64::NEG_INFINITY);
    let mut nodes: i64 = 0;
    // SAFETY: a valid HiGHS pointer, a NUL-terminated name and a valid out-pointer.
    unsafe {
        highs_sys::Highs_getInt64InfoValue(solved.as_ptr(), c"mip_node_count".as_ptr(), &mut nodes)
    };
    let objective = solved.objective_value();
    Ok(Solved {
        status,
        columns,
        objective,
        bound,
        time_s,
        nodes,
        reached_target,
        stopped: None,
        abandoned: false,
        checks: Vec::new(),
    })
}

impl Solved {
    /// HiGHS was not run: the budget ran out (`reason`) before or while the model was built.
    pub(crate) fn not_run(reason: StopReason) -> Solved {
        Solved {
            status: HighsModelStatus::NotSet,
            columns: None,
            objective: f64::INFINITY,
            bound: f64::NEG_INFINITY,
            time_s: 0.0,
            nodes: 0,
            reached_target: false,
            stopped: Some(reason),
            abandoned: false,
            checks: Vec::new(),
        }
    }
}

/// Runs `builder`'s model with the time left since `started`, stopping once the incumbent
/// is within the gap of `lower` (a proven lower bound), whose value the bound reported
/// is at least. The max-load models' shared tail.
pub(crate) fn run_to_bound(
    builder: Builder,
    problem: &Problem,
    started: Instant,
    warm: Option<&[f64]>,
    lower: f64,
) -> Result<Solved, SolveError> {
    let target = lower * (1.0 + problem.limits.mip_gap.unwrap_or(DEFAULT_GAP));
    let mut solved = run_to(builder, &remaining(problem, started), warm, target)?;
    solved.bound = solved.bound.max(lower);
    Ok(solved)
}

/// Refuses a model of `columns` columns (and at least as many nonzeros: every column is in
/// some row) before any is built, when HiGHS's estimated memory for it exceeds the budget:
/// `Some` is the outcome to return. `columns` is a float, so huge counts cannot wrap.
pub(crate) fn refuse_model_size(budget: &Budget, columns: f64, stats: &Stats) -> Option<Outcome> {
    let bytes = BYTES_BASE + columns * BYTES_PER_NONZERO;
    budget
        .reserve(
            &format!("the integer program ({columns:.0} columns)"),
            bytes,
        )
        .err()
        .map(|e| Outcome {
            method: MethodId::Ip,
            placement: None,
            objective: f64::INFINITY,
            bound: 0.0,
            status: Status::NoPlan { reason: e.into() },
            stats: stats.clone(),
        })
}

/// HiGHS refused its `threads` option.
fn threads_refused(error: TrySetOptionError) -> SolveError {
    SolveError::Solver(HighsFailure::Option {
        name: "threads".into(),
        error,
    })
}

/// The problem's limits as HiGHS options: the time left (`time_left_s`, the budget's), gap,
/// threads (clamped to the cores) and the user's `--highs-option name=value` pairs, each
/// tried as an integer, a float, a bool and a string, in that order.
fn set_options(
    model: &mut Model,
    problem: &Problem,
    time_left_s: Option<f64>,
) -> Result<(), SolveError> {
    let limits = &problem.limits;
    let set = |model: &mut Model, name: &str, value: f64| {
        model.try_set_option(name, value).map_err(|error| {
            SolveError::Solver(HighsFailure::Option {
                name: name.into(),
                error,
            })
        })
    };
    if let Some(t) = time_left_s {
        set(model, "time_limit", t.max(1e-3))?;
    }
    set(model, "mip_rel_gap", limits.mip_gap.unwrap_or(DEFAULT_GAP))?;
    set(
        model,
        "mip_feasibility_tolerance",
        MIP_FEASIBILITY_TOLERANCE,
    )?;
    if let Some(threads) = limits.threads {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        model
            .try_set_option(
                "threads",
                threads.clamp(1, cores.min(i32::MAX as usize)) as i32,
            )
            .map_err(threads_refused)?;
    }
    for (name, value) in &limits.ip.highs_options {
        if name == "threads" {
            // HiGHS allocates per thread: more than the cores only costs memory.
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let threads = value.parse::<i64>().map_err(|_| {
                SolveError::Solver(HighsFailure::RefusedOption {
                    name: name.clone(),
                    value: value.clone(),
                })
            })?;
            let threads = threads.clamp(1, cores.min(i32::MAX as usize) as i64) as i32;
            model
                .try_set_option("threads", threads)
                .map_err(threads_refused)?;
            continue;
        }
        let ok = value
            .parse::<i32>()
            .is_ok_and(|v| model.try_set_option(name.as_str(), v).is_ok())
            || value
                .parse::<f64>()
                .is_ok_and(|v| model.try_set_option(name.as_str(), v).is_ok())
            || value
                .parse::<bool>()
                .is_ok_and(|v| model.try_set_option(name.as_str(), v).is_ok())
            || model.try_set_option(name.as_str(), value.as_str()).is_ok();
        if !ok {
            return Err(SolveError::Solver(HighsFailure::RefusedOption {
                name: name.clone(),
                value: value.clone(),
            }));
        }
    }
    Ok(())
}

/// Hands HiGHS the values of the integer columns (`values[i]` for column
/// `integer_columns[i]`) as a partial solution to complete.
fn set_warm_start(
    model: &mut Model,
    integer_columns: &[usize],
    values: &[f64],
) -> Result<(), SolveError> {
    let index: Vec<highs_sys::HighsInt> = integer_columns
        .iter()
        .map(|&c| c as highs_sys::HighsInt)
        .collect();
    // SAFETY: `index` and `values` have the same length and live across the call.
    let status = unsafe {
        highs_sys::Highs_setSparseSolution(
            model.as_mut_ptr(),
            index.len() as highs_sys::HighsInt,
            index.as_ptr(),
            values.as_ptr(),
        )
    };
    if status == highs_sys::STATUS_ERROR {
        return Err(SolveError::Solver(HighsFailure::RefusedWarmStart));
    }
    Ok(())
}

/// Why HiGHS stopped, for a status that is not a proof (`Optimal` and `Infeasible` are
/// handled by the caller): each limit by name, anything else as HiGHS's own status.
pub(super) fn stop_reason(status: HighsModelStatus) -> StopReason {
    match status {
        HighsModelStatus::ReachedTimeLimit => StopReason::TimeLimit,
        HighsModelStatus::ReachedInterrupt => StopReason::Interrupted,
        // HiGHS reports its node, leaf and improving-solution limits as kSolutionLimit.
        HighsModelStatus::ReachedSolutionLimit => StopReason::NodeLimit,
        HighsModelStatus::ReachedIterationLimit => StopReason::IterationLimit,
        HighsModelStatus::ReachedMemoryLimit => StopReason::SolverMemoryLimit,
        s => StopReason::Solver {
            status: format!("{s:?}"),
        },
    }
}

/// `problem` with the time limit that is left since `started`: the limit covers the held
/// plans, the bounds and the model building too, and HiGHS gets the rest (0 when none is
/// left: [`run_to`] then does not start HiGHS).
pub(crate) fn remaining<'a>(problem: &Problem<'a>, started: Instant) -> Problem<'a> {
    let mut rest = problem.clone();
    rest.limits.time_limit_s = problem
        .limits
        .time_limit_s
        .map(|t| (t - started.elapsed().as_secs_f64()).max(0.0));
    rest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_highs_limit_maps_to_its_own_stop_reason() {
        assert_eq!(
            stop_reason(HighsModelStatus::ReachedTimeLimit),
            StopReason::TimeLimit
        );
        assert_eq!(
            stop_reason(HighsModelStatus::ReachedInterrupt),
            StopReason::Interrupted
        );
        assert_eq!(
            stop_reason(HighsModelStatus::ReachedSolutionLimit),
            StopReason::NodeLimit
        );
        assert_eq!(
            stop_reason(HighsModelStatus::ReachedIterationLimit),
            StopReason::IterationLimit
        );
        assert_eq!(
            stop_reason(HighsModelStatus::ReachedMemoryLimit),
            StopReason::SolverMemoryLimit
        );
        assert_eq!(
            stop_reason(HighsModelStatus::Unknown),
            StopReason::Solver {
                status: "Unknown".into()
            }
        );
    }
}

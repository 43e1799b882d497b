//! `local-search`: non-contiguous best-improvement local search over colour classes, from
//! random starts (the paper's local-search baseline).
//!
//! Devices are `0..k` (accelerators) and `k..k+ℓ` (CPUs). A start puts the classes, in a
//! random order, each on a uniformly random device where it is allowed and fits (CPUs
//! always fit; a class not supported on accelerators goes to a CPU). A *move* sends one
//! class to another device where it is allowed and fits. Each step takes the move with
//! the best key `(max load, Σ load²)` if it is lexicographically smaller than the
//! current key — the max load is TPS, the sum of squares breaks the plateaus where
//! several devices share the maximum — and stops when no move improves. The best of
//! `restarts` runs wins. Plans are valid by construction (memory and support are
//! respected by every start and move) and the final plan is re-scored by the evaluator.
//!
//! Incremental loads: with `n_d(T)` the number of classes of hyperedge `T` on device `d`,
//! accelerator `d` pays `c(T)` exactly when `0 < n_d(T) < |T|`. Moving class `x` from `a`
//! to `b` changes only `load(a)` and `load(b)`, by its compute and by the hyperedges of
//! `x` whose cut status flips on `a` or `b`. So pricing every move costs
//! O((k+ℓ) · Σ_x deg(x)) = O((k+ℓ) · Σ|T|) per step; the new maximum comes from the
//! three largest loads. Empty devices of one kind are interchangeable: only the first is
//! tried.
//!
//! Deterministic for a given seed ([`super::SplitMix64`]). The run's [`Budget`]
//! (`--time-limit`, Ctrl-C) is looked at between restarts and every [`CLASSES_PER_CHECK`]
//! classes priced within a step (a step costs O((k+ℓ)·Σ|T|), seconds on 100k-node graphs),
//! and stops the run with the best plan so far (a note says why; with no plan yet the
//! outcome is `no-plan` with the reason).
//! Memory: the counts `n_d(T)` take 4·H·(k+ℓ) bytes for H hyperedges; a run whose counts
//! exceed `--memory-budget` is refused before any is allocated, naming H and k+ℓ.

use super::super::budget::{Budget, Exhausted};

use super::{infeasible_outcome, scored_outcome, SplitMix64};
use crate::model::grouping::{incidence, Grouping, Hyperedge};
use crate::model::{Device, Placement, Workload};
use crate::score::tps;
use crate::solve::{Infeasibility, Limits, Method, MethodId, Outcome, Problem, SolveError, Status};

/// Classes priced between two looks at the budget within a step.
pub const CLASSES_PER_CHECK: usize = 256;

/// The colour classes with their communication hyperedges and, per class, the indices of
/// the hyperedges that contain it: what a move is priced on. O(n + m) plus hashing.
#[derive(Clone, Debug)]
pub struct ClassModel {
    pub classes: Grouping,
    pub hyperedges: Vec<Hyperedge>,
    pub incident: Vec<Vec<usize>>,
}

impl ClassModel {
    pub fn new(w: &Workload) -> ClassModel {
        let classes = Grouping::classes(w);
        let hyperedges = classes.hyperedges(w, false);
        let incident = incidence(&hyperedges, classes.len());
        ClassModel {
            classes,
            hyperedges,
            incident,
        }
    }

    /// Number of classes.
    pub fn len(&self) -> usize {
        self.classes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    /// The node-level placement of a device per class.
    pub fn placement(&self, device_of_class: &[Device]) -> Placement {
        self.classes.placement(device_of_class)
    }
}

/// Local search from random starts (`--method local-search --restarts N --seed S`).
pub struct LocalSearch;

impl Method for LocalSearch {
    fn id(&self) -> MethodId {
        MethodId::LocalSearch
    }

    fn supports(&self, problem: &Problem) -> Result<(), crate::solve::Unsupported> {
        super::throughput_only(problem)?;
        if problem.contiguous {
            return Err(crate::solve::Unsupported::LocalSearchContiguous);
        }
        Ok(())
    }

    fn solve(&self, problem: &Problem) -> Result<Outcome, SolveError> {
        let search = search(problem.workload, &problem.limits);
        let Some((placement, _)) = search.best else {
            if let Some(reason) = search.stopped {
                let mut outcome = infeasible_outcome(self.id(), Infeasibility::NoRandomStart);
                outcome.status = Status::NoPlan {
                    reason: reason.into(),
                };
                outcome.stats.notes = search.notes;
                return Ok(outcome);
            }
            return Ok(infeasible_outcome(self.id(), Infeasibility::NoRandomStart));
        };
        let runs: Vec<String> = search
            .restarts
            .iter()
            .map(|x| {
                format!(
                    "{:.4} → {:.4} ({} moves)",
                    x.start_tps, x.final_tps, x.moves
                )
            })
            .collect();
        let mut notes = vec![format!(
            "{} restarts from seed {}, TPS start → local optimum: {}",
            runs.len(),
            problem.limits.seed,
            runs.join(", ")
        )];
        notes.extend(search.notes);
        Ok(super::cut_short(
            scored_outcome(self.id(), problem, placement, notes),
            search.stopped,
        ))
    }
}

/// One restart: the TPS of its random start and of its local optimum (both by the
/// evaluator), and the number of moves taken.
#[derive(Clone, Debug, PartialEq)]
pub struct Restart {
    pub start_tps: f64,
    pub final_tps: f64,
    pub moves: usize,
}

/// The result of [`search`]: the best plan (node-level placement and its TPS), every
/// restart, notes (time limit, skipped starts), and why the budget stopped it, if it did.
#[derive(Clone, Debug)]
pub struct Search {
    pub best: Option<(Placement, f64)>,
    pub restarts: Vec<Restart>,
    pub notes: Vec<String>,
    pub stopped: Option<Exhausted>,
}

/// Runs `limits.restarts` (at least 1) restarts from seed `limits.seed`.
pub fn search(w: &Workload, limits: &Limits) -> Search {
    let budget = limits.budget();
    let m = ClassModel::new(w);
    let d = w.devices();
    let (k, l) = (d.accelerators, d.cpus);
    let mut rng = SplitMix64::new(limits.seed);
    let mut out = Search {
        best: None,
        restarts: Vec::new(),
        notes: Vec::new(),
        stopped: None,
    };
    let counts = 4.0 * m.hyperedges.len() as f64 * (k as f64 + l as f64);
    let what = format!(
        "local search's counts ({} hyperedges × {} devices)",
        m.hyperedges.len(),
        k as f64 + l as f64
    );
    if let Err(e) = budget.reserve(&what, counts) {
        out.stopped = Some(e);
        return out;
    }
    let mut skipped = 0;
    for r in 0..limits.restarts.max(1) {
        if let (true, Err(e)) = (r > 0, budget.check()) {
            out.notes.push(format!("{e} after {r} restarts"));
            out.stopped = Some(e);
            break;
        }
        let Some(start) = random_start(&m, k, l, d.memory_per_accelerator_bytes, &mut rng) else {
            skipped += 1;
            continue;
        };
        let to_devices = |dev: &[usize]| -> Vec<Device> {
            dev.iter()
                .map(|&i| {
                    if i < k {
                        Device::Accelerator(i)
                    } else {
                        Device::Cpu(i - k)
                    }
                })
                .collect()
        };
        let start_tps = tps(w, &m.placement(&to_devices(&start)));
        let mut state = State::new(&m, k, l, d.memory_per_accelerator_bytes, start);
        let (moves, stopped) = state.descend(&budget);
        if let Some(e) = &stopped {
            out.notes.push(format!("{e} during restart {r}"));
        }
        let placement = m.placement(&to_devices(&state.device));
        let final_tps = tps(w, &placement);
        out.restarts.push(Restart {
            start_tps,
            final_tps,
            moves,
        });
        if out.best.as_ref().is_none_or(|(_, b)| final_tps < *b) {
            out.best = Some((placement, final_tps));
        }
        if stopped.is_some() {
            out.stopped = stopped;
            break;
        }
    }
    if skipped > 0 {
        out.notes.push(format!(
            "{skipped} random starts found no room and were skipped"
        ));
    }
    out
}

/// A random valid start (device index per class), or `None` if a class fits nowhere.
fn random_start(
    m: &ClassModel,
    k: usize,
    l: usize,
    memory: f64,
    rng: &mut SplitMix64,
) -> Option<Vec<usize>> {
    let mut order: Vec<usize> = (0..m.len()).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let mut used = vec![0.0; k];
    let mut device = vec![0; m.len()];
    let mut allowed = Vec::with_capacity(k + l);
    for x in order {
        allowed.clear();
        if m.classes[x].supported_on_accelerator {
            allowed.extend((0..k).filter(|&a| used[a] + m.classes[x].size_bytes <= memory));
        }
        allowed.extend(k..k + l);
        if allowed.is_empty() {
            return None;
        }
        let dev = allowed[rng.below(allowed.len())];
        if dev < k {
            used[dev] += m.classes[x].size_bytes;
        }
        device[x] = dev;
    }
    Some(device)
}

/// The incremental state of one descent.
pub struct State<'a> {
    m: &'a ClassModel,
    k: usize,
    devices: usize,
    memory: f64,
    /// Device of each class.
    pub device: Vec<usize>,
    load: Vec<f64>,
    used: Vec<f64>,
    classes_on: Vec<usize>,
    /// `count[t · D + d]` = classes of hyperedge `t` on device `d`.
    count: Vec<u32>,
}

impl<'a> State<'a> {
    /// The state of a start assignment (device per class).
    pub fn new(m: &'a ClassModel, k: usize, l: usize, memory: f64, device: Vec<usize>) -> Self {
        let devices = k + l;
        let mut s = State {
            m,
            k,
            devices,
            memory,
            device,
            load: vec![0.0; devices],
            used: vec![0.0; devices],
            classes_on: vec![0; devices],
            count: vec![0; m.hyperedges.len() * devices],
        };
        for x in 0..m.len() {
            let d = s.device[x];
            s.classes_on[d] += 1;
            if d < k {
                s.load[d] += m.classes[x].fpga_latency;
                s.used[d] += m.classes[x].size_bytes;
            } else {
                s.load[d] += m.classes[x].cpu_latency;
            }
        }
        for (t, e) in m.hyperedges.iter().enumerate() {
            let (set, cost) = (&e.groups, e.cost);
            for &x in set {
                s.count[t * devices + s.device[x]] += 1;
            }
            for d in 0..k {
                let n = s.count[t * devices + d] as usize;
                if n > 0 && n < set.len() {
                    s.load[d] += cost;
                }
            }
        }
        s
    }

    /// Current load of every device (`0..k` accelerators, then CPUs).
    pub fn loads(&self) -> &[f64] {
        &self.load
    }

    /// The loads after moving class `x` to device `b`: `(new load of x's device, new load
    /// of b)`, in O(deg(x)).
    pub fn priced(&self, x: usize, b: usize) -> (f64, f64) {
        let (m, k, dn) = (self.m, self.k, self.devices);
        let a = self.device[x];
        let mut la = self.load[a]
            - if a < k {
                m.classes[x].fpga_latency
            } else {
                m.classes[x].cpu_latency
            };
        let mut lb = self.load[b]
            + if b < k {
                m.classes[x].fpga_latency
            } else {
                m.classes[x].cpu_latency
            };
        if a < k || b < k {
            for &t in &m.incident[x] {
                let (s, cost) = (m.hyperedges[t].groups.len() as u32, &m.hyperedges[t].cost);
                if a < k {
                    let n = self.count[t * dn + a];
                    let before = n < s;
                    let after = n - 1 > 0;
                    if before != after {
                        la += if after { *cost } else { -*cost };
                    }
                }
                if b < k {
                    let n = self.count[t * dn + b];
                    let before = n > 0;
                    let after = n + 1 < s;
                    if before != after {
                        lb += if after { *cost } else { -*cost };
                    }
                }
            }
        }
        (la, lb)
    }

    /// Moves class `x` to device `b`, given the loads [`State::priced`] computed.
    pub fn apply(&mut self, x: usize, b: usize, la: f64, lb: f64) {
        let (m, k, dn) = (self.m, self.k, self.devices);
        let a = self.device[x];
        for &t in &m.incident[x] {
            self.count[t * dn + a] -= 1;
            self.count[t * dn + b] += 1;
        }
        self.load[a] = la;
        self.load[b] = lb;
        if a < k {
            self.used[a] -= m.classes[x].size_bytes;
        }
        if b < k {
            self.used[b] += m.classes[x].size_bytes;
        }
        self.classes_on[a] -= 1;
        self.classes_on[b] += 1;
        self.device[x] = b;
    }

    /// Best-improvement descent until no move improves `(max load, Σ load²)`, or the
    /// budget runs out (looked at every [`CLASSES_PER_CHECK`] classes; the step under way
    /// is then dropped). Returns the number of moves and why the budget stopped it.
    pub fn descend(&mut self, budget: &Budget) -> (usize, Option<Exhausted>) {
        let (m, k, dn) = (self.m, self.k, self.devices);
        let max_moves = 100usize.saturating_mul(m.len()).saturating_add(1000);
        let mut moves = 0;
        while moves < max_moves {
            let mut top: Vec<usize> = (0..dn).collect();
            top.sort_by(|&a, &b| self.load[b].total_cmp(&self.load[a]));
            top.truncate(3);
            let max = self.load[top[0]];
            let squares: f64 = self.load.iter().map(|x| x * x).sum();
            let others = |a: usize, b: usize| {
                top.iter()
                    .find(|&&d| d != a && d != b)
                    .map_or(0.0, |&d| self.load[d])
            };
            let mut best: Option<(f64, f64, usize, usize, f64, f64)> = None;
            for x in 0..m.len() {
                if x.is_multiple_of(CLASSES_PER_CHECK) {
                    if let Err(e) = budget.check() {
                        return (moves, Some(e));
                    }
                }
                let a = self.device[x];
                let (mut tried_empty_acc, mut tried_empty_cpu) = (false, false);
                for b in 0..dn {
                    if b == a {
                        continue;
                    }
                    if b < k
                        && (!m.classes[x].supported_on_accelerator
                            || self.used[b] + m.classes[x].size_bytes > self.memory)
                    {
                        continue;
                    }
                    if self.classes_on[b] == 0 {
                        let tried = if b < k {
                            &mut tried_empty_acc
                        } else {
                            &mut tried_empty_cpu
                        };
                        if *tried {
                            continue;
                        }
                        *tried = true;
                    }
                    let (la, lb) = self.priced(x, b);
                    let new_max = la.max(lb).max(others(a, b));
                    let new_squares =
                        squares - self.load[a] * self.load[a] - self.load[b] * self.load[b]
                            + la * la
                            + lb * lb;
                    let better_than_current = new_max < max * (1.0 - 1e-12)
                        || (new_max <= max && new_squares < squares * (1.0 - 1e-12));
                    if !better_than_current {
                        continue;
                    }
                    if best.is_none_or(|(bm, bs, ..)| {
                        new_max < bm || (new_max == bm && new_squares < bs)
                    }) {
                        best = Some((new_max, new_squares, x, b, la, lb));
                    }
                }
            }
            let Some((_, _, x, b, la, lb)) = best else {
                break;
            };
            self.apply(x, b, la, lb);
            moves += 1;
        }
        (moves, None)
    }
}

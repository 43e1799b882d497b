//! The two DPs over ideals: the relaxed one (a lower bound and a plan in one pass) and the
//! exact one (a parametric search on the answer).
//!
//! Ideals are those of the *reversed* graph (sets closed under successors, Piper's
//! "downsets"), so a pair `J ⊂ I` makes `I \ J` the first stage of the nodes in `I` and `J`
//! the stages after it; the in-flight count of a stage then only depends on what is in `J`.
//!
//! **Relaxed** (`R[I][k]`, every stage at `y = 1` and no limit on `Σ d`):
//! `R[∅][k] = 0`, `R[I][k] = min_{J ⊊ I, t, d: td ≤ k} max(R[J][k − td], V_{I∖J}(t, d, 1))`.
//! As `y_i ≥ 1` and `V` is non-decreasing in `y`, `R[V][K]` is a lower bound on Piper's
//! optimum. Monotone in `k` by construction. Cost O(P · D · K) for P pairs and D pairs
//! `(t, d)`.
//!
//! **Exact** (Piper's problem, no relaxation), by parametric search on the answer `T`.
//! For a threshold `T`, `H_T[I][s]` is the fewest devices that cover `I` with at most `s`
//! replicas and every stage at most `T`:
//! `H_T[∅][s] = 0`, `H_T[I][s] = min(H_T[I][s−1], min_{J, t, d: V_{I∖J}(t, d, ⌈s/d⌉) ≤ T}
//! t d + H_T[J][s−d])`, and `T` is achievable iff `H_T[V][S] ≤ K` (`S = min(N, K)`). A plan
//! with exactly `s` replicas meets its stages' true `y` in the last term; the first carries
//! the "at most" (`V` is non-decreasing in `y`). The optimum is one of the finitely many
//! stage values `V`, which are stored per `(J ⊂ I, t, d)` as runs over `y` (the knapsack's
//! choice at `y` stays optimal while it fits, as the feasible set only shrinks with `y`);
//! a binary search over the sorted candidates `≥ L` (the relaxed bound) finds the smallest
//! achievable one, testing `L`'s own candidate first. Cost O(P · D · log S) knapsacks to
//! build the runs, then O(P · D · S) per test, O(log #candidates) tests — against Piper's
//! O(P · D · K · S).

use rayon::prelude::*;

use super::stage::{best_choice, costs_at, options_at, value_of};
use crate::model::piper::{PiperInstance, PiperPlan, PiperStage};
use crate::solve::budget::{Budget, Exhausted};
use crate::solve::ideals::Ideals;

/// A stage candidate of the relaxed DP: degrees and `values[0] = V(t, d, 1)`.
pub struct Row {
    pub t: usize,
    pub d: usize,
    pub values: Vec<f64>,
}

/// The instance with its ideals and degree lists.
pub struct Lattice<'a> {
    pub ins: &'a PiperInstance,
    /// `node_of[g]`: the node of group `g` (groups in a topological order of the reversed
    /// graph).
    pub node_of: Vec<usize>,
    pub ideals: Ideals,
    /// `(t, ds)`: every tensor degree with the data degrees `d | N`, `td ≤ K`.
    pub degrees: Vec<(usize, Vec<usize>)>,
    pub k: usize,
    /// `min(N, K)`.
    pub s: usize,
}

impl<'a> Lattice<'a> {
    /// The stage `I \ J` as increasing node indices and a membership mask.
    pub fn stage(&self, i: usize, j: usize) -> (Vec<usize>, Vec<bool>) {
        let groups = self.ideals.get(i).difference(&self.ideals.get(j));
        let mut nodes: Vec<usize> = groups.iter().map(|&g| self.node_of[g]).collect();
        nodes.sort_unstable();
        let mut mask = vec![false; self.ins.len()];
        for &v in &nodes {
            mask[v] = true;
        }
        (nodes, mask)
    }

    /// The ideals `J ⊊ I`.
    pub fn subsets(&self, i: usize) -> Vec<usize> {
        let lo = self.ideals.level_start[self.ideals.level_of(i)];
        (0..lo).filter(|&j| self.ideals.is_subset(j, i)).collect()
    }

    /// Candidate rows of stage `I \ J` for the relaxed DP: `V(t, d, 1)` where finite.
    pub fn rows(&self, i: usize, j: usize, budget: &Budget) -> Result<Vec<Row>, Exhausted> {
        let (nodes, mask) = self.stage(i, j);
        let cap = self.ins.max_memory_per_device;
        let mut rows = Vec::new();
        for (t, ds) in &self.degrees {
            match dominant_sums(self.ins, &nodes, &mask, *t) {
                None => continue,
                Some(Some(sums)) if sums.a + sums.b <= cap => {
                    // One configuration per node is fastest at every d and fits: O(1) per d.
                    for &d in ds {
                        rows.push(Row {
                            t: *t,
                            d,
                            values: vec![sums.value(self.ins, d)],
                        });
                    }
                    continue;
                }
                Some(_) => {}
            }
            let Some(opts) = options_at(self.ins, &nodes, &mask, *t) else {
                continue;
            };
            for &d in ds {
                let costs = costs_at(self.ins, &opts, d);
                if let Some(pick) = best_choice(self.ins, &opts, &costs, 1, budget)? {
                    let (v, m) = value_of(self.ins, &opts, &pick, d, 1);
                    if m <= cap {
                        rows.push(Row {
                            t: *t,
                            d,
                            values: vec![v],
                        });
                    }
                }
            }
        }
        Ok(rows)
    }

    /// The configurations of stage `I \ J` at `(t, d, y)` achieving its value.
    pub fn stage_plan(&self, i: usize, j: usize, t: usize, d: usize, y: usize) -> PiperStage {
        let (nodes, mask) = self.stage(i, j);
        let opts = options_at(self.ins, &nodes, &mask, t).expect("t checked by the DP");
        let costs = costs_at(self.ins, &opts, d);
        let pick = best_choice(self.ins, &opts, &costs, y, &Budget::unlimited())
            .ok()
            .flatten()
            .unwrap_or_else(|| vec![0; nodes.len()]);
        let configs = pick.iter().zip(&opts).map(|(&l, o)| o[l].index).collect();
        PiperStage {
            nodes,
            tensor_parallel: t,
            data_parallel: d,
            configs,
        }
    }
}

/// Sums over a stage's nodes of one configuration each.
pub struct Sums {
    p: f64,
    e: f64,
    w: f64,
    a: f64,
    b: f64,
}

impl Sums {
    /// The stage's time per sample at data-parallel degree `d`.
    fn value(&self, ins: &PiperInstance, d: usize) -> f64 {
        let df = d as f64;
        let sync = 4.0 * (df - 1.0) * self.w / df / ins.mbs_in_batch as f64;
        (self.e / df + sync) / ins.bandwidth + self.p / df
    }
}

/// Sums over the stage's nodes of the configuration with the least `p`, `E` and `w` at
/// once (fastest at every `d`: its cost `(p + E/β − 4w/(Nβ))/d + 4w/(Nβ)` is then minimal),
/// ties to less memory at `y = 1`. `None`: some node has no configuration for `t`;
/// `Some(None)`: some node has no such configuration. No allocation per node.
fn dominant_sums(
    ins: &PiperInstance,
    nodes: &[usize],
    mask: &[bool],
    t: usize,
) -> Option<Option<Sums>> {
    let mut sums = Sums {
        p: 0.0,
        e: 0.0,
        w: 0.0,
        a: 0.0,
        b: 0.0,
    };
    let mut dominant_everywhere = true;
    let mut edges = Vec::new();
    for &v in nodes {
        let node = &ins.nodes[v];
        let list = node.configs.get(&t)?;
        if !dominant_everywhere {
            continue;
        }
        edges.clear();
        for c in list {
            let mut e_bytes = 0.0;
            for (k, &e) in node.incoming.iter().enumerate() {
                if !mask[ins.edges[e].source] {
                    e_bytes += 2.0 * (ins.edges[e].bytes + c.sync_fw[k]);
                }
            }
            for (k, &e) in node.outgoing.iter().enumerate() {
                if !mask[ins.edges[e].dest] {
                    e_bytes += 2.0 * (ins.edges[e].bytes + c.sync_bw[k]);
                }
            }
            edges.push(e_bytes);
        }
        let best = (0..list.len())
            .filter(|&l| {
                list.iter().zip(&edges).all(|(c, &e)| {
                    list[l].time_per_sample <= c.time_per_sample
                        && edges[l] <= e
                        && list[l].parameter_bytes <= c.parameter_bytes
                })
            })
            .min_by(|&x, &y| {
                (list[x].memory_a + list[x].memory_b)
                    .partial_cmp(&(list[y].memory_a + list[y].memory_b))
                    .expect("finite")
            });
        let Some(l) = best else {
            dominant_everywhere = false;
            continue;
        };
        let c = &list[l];
        sums.p += c.time_per_sample;
        sums.e += edges[l];
        sums.w += c.parameter_bytes;
        sums.a += c.memory_a;
        sums.b += c.memory_b;
    }
    Some(dominant_everywhere.then_some(sums))
}

/// The relaxed DP's value and plan (module docs); `None` plan when `R[V][K] = ∞`.
pub fn relaxed(
    lat: &Lattice,
    k_max: usize,
    budget: &Budget,
) -> Result<(f64, Option<PiperPlan>, u64), Exhausted> {
    let (n_ideals, kk) = (lat.ideals.len(), k_max + 1);
    budget.reserve("the relaxed Piper DP table", (n_ideals * kk * 16) as f64)?;
    let mut r = vec![f64::INFINITY; n_ideals * kk];
    let mut choice = vec![(u32::MAX, 0u16, 0u16); n_ideals * kk];
    r[..kk].fill(0.0);
    let mut pairs = 0u64;
    for i in 1..n_ideals {
        budget.check()?;
        let subs = lat.subsets(i);
        pairs += subs.len() as u64;
        let rows: Vec<(usize, Vec<Row>)> = subs
            .par_iter()
            .map(|&j| Ok((j, lat.rows(i, j, budget)?)))
            .collect::<Result<_, Exhausted>>()?;
        let (done, rest) = r.split_at_mut(i * kk);
        let cur = &mut rest[..kk];
        let ch = &mut choice[i * kk..(i + 1) * kk];
        cur.par_chunks_mut(64)
            .zip(ch.par_chunks_mut(64))
            .enumerate()
            .for_each(|(c, (cur, ch))| {
                let k0 = c * 64;
                for (j, rs) in &rows {
                    let rj = &done[j * kk..(j + 1) * kk];
                    for row in rs {
                        let (td, v) = (row.t * row.d, row.values[0]);
                        for (o, slot) in cur.iter_mut().enumerate() {
                            let k = k0 + o;
                            if k < td {
                                continue;
                            }
                            let cand = rj[k - td].max(v);
                            if cand < *slot {
                                *slot = cand;
                                ch[o] = (*j as u32, row.t as u16, row.d as u16);
                            }
                        }
                    }
                }
            });
    }
    let full = n_ideals - 1;
    let value = r[full * kk + k_max];
    if !value.is_finite() {
        return Ok((value, None, pairs));
    }
    // The stages, then each stage's configurations re-chosen at its true in-flight count.
    let mut steps = Vec::new();
    let (mut i, mut k) = (full, k_max);
    while i != 0 {
        let (j, t, d) = choice[i * kk + k];
        let (j, t, d) = (j as usize, t as usize, d as usize);
        steps.push((i, j, t, d));
        k -= t * d;
        i = j;
    }
    let mut suffix: usize = steps.iter().map(|s| s.3).sum();
    let mut plan = PiperPlan::default();
    for (i, j, t, d) in steps {
        plan.stages
            .push(lat.stage_plan(i, j, t, d, suffix.div_ceil(d)));
        suffix -= d;
    }
    Ok((value, Some(plan), pairs))
}

/// One stored stage candidate of the exact search: its values as runs over `y`.
struct RunRow {
    j: u32,
    t: u16,
    d: u16,
    /// `(y_last, V)`: `V(y) = V` for `y` up to `y_last` (from the previous run's end + 1),
    /// infeasible past the last run.
    runs: Vec<(u32, f64)>,
}

/// How the exact search ended.
pub enum ExactEnd {
    /// Proven: the optimum (∞ and no plan when infeasible).
    Done {
        value: f64,
        plan: Option<PiperPlan>,
        tests: usize,
    },
    /// Stopped by the budget with the best plan found and a proven bound.
    Stopped {
        reason: Exhausted,
        best: Option<PiperPlan>,
        bound: f64,
    },
}

/// The runs of stage `I \ J` at every `(t, d)` (module docs).
fn run_rows(
    lat: &Lattice,
    i: usize,
    j: usize,
    upper: f64,
    budget: &Budget,
) -> Result<Vec<RunRow>, Exhausted> {
    let (nodes, mask) = lat.stage(i, j);
    let cap = lat.ins.max_memory_per_device;
    let mut out = Vec::new();
    for (t, ds) in &lat.degrees {
        let Some(opts) = options_at(lat.ins, &nodes, &mask, *t) else {
            continue;
        };
        for &d in ds {
            let costs = costs_at(lat.ins, &opts, d);
            // Σ of each node's cheapest cost is below every V(y): past `upper`, skip.
            let floor: f64 = costs
                .iter()
                .map(|c| c.iter().copied().fold(f64::INFINITY, f64::min))
                .sum();
            if floor > upper * (1.0 + 1e-9) {
                continue;
            }
            let y_max = lat.s.div_ceil(d).max(1);
            let mut runs: Vec<(u32, f64)> = Vec::new();
            let mut y = 1;
            while y <= y_max {
                let Some(pick) = best_choice(lat.ins, &opts, &costs, y, budget)? else {
                    break;
                };
                let (v, m) = value_of(lat.ins, &opts, &pick, d, y);
                if m > cap || v > upper {
                    break;
                }
                // The largest y' ≤ y_max at which `pick` still fits.
                let (mut lo, mut hi) = (y, y_max);
                while lo < hi {
                    let mid = lo + (hi - lo).div_ceil(2);
                    if value_of(lat.ins, &opts, &pick, d, mid).1 <= cap {
                        lo = mid;
                    } else {
                        hi = mid - 1;
                    }
                }
                match runs.last_mut() {
                    Some(last) if last.1 == v => last.0 = lo as u32,
                    _ => runs.push((lo as u32, v)),
                }
                y = lo + 1;
            }
            if !runs.is_empty() {
                out.push(RunRow {
                    j: j as u32,
                    t: *t as u16,
                    d: d as u16,
                    runs,
                });
            }
        }
    }
    Ok(out)
}

/// `H_T` for every ideal (module docs): devices and the row chosen (`u32::MAX`: carried
/// from `s − 1`).
fn threshold(
    lat: &Lattice,
    rows: &[Vec<RunRow>],
    t_max: f64,
    budget: &Budget,
) -> Result<(Vec<u32>, Vec<u32>), Exhausted> {
    let ss = lat.s + 1;
    let mut h = vec![u32::MAX; rows.len() * ss];
    let mut arg = vec![u32::MAX; rows.len() * ss];
    h[..ss].fill(0);
    for i in 1..rows.len() {
        budget.check()?;
        let (done, rest) = h.split_at_mut(i * ss);
        let line = &mut rest[..ss];
        let args = &mut arg[i * ss..(i + 1) * ss];
        for (ri, row) in rows[i].iter().enumerate() {
            let Some(y_t) = row.runs.iter().take_while(|r| r.1 <= t_max).last() else {
                continue;
            };
            let (d, td) = (row.d as usize, row.t as u32 * row.d as u32);
            let s_hi = lat.s.min(d * y_t.0 as usize);
            let from = &done[row.j as usize * ss..row.j as usize * ss + ss];
            for s in d..=s_hi {
                let c = from[s - d].saturating_add(td);
                if c < line[s] {
                    line[s] = c;
                    args[s] = ri as u32;
                }
            }
        }
        for s in 1..ss {
            if line[s - 1] < line[s] {
                line[s] = line[s - 1];
                args[s] = u32::MAX;
            }
        }
    }
    Ok((h, arg))
}

/// The plan read off `H_T`, each stage configured at its true in-flight count.
fn threshold_plan(lat: &Lattice, rows: &[Vec<RunRow>], arg: &[u32]) -> PiperPlan {
    let ss = lat.s + 1;
    let (mut i, mut s) = (rows.len() - 1, lat.s);
    let mut steps = Vec::new();
    while i != 0 {
        let a = arg[i * ss + s];
        if a == u32::MAX {
            s -= 1;
            continue;
        }
        let row = &rows[i][a as usize];
        steps.push((i, row.j as usize, row.t as usize, row.d as usize));
        s -= row.d as usize;
        i = row.j as usize;
    }
    let mut suffix: usize = steps.iter().map(|x| x.3).sum();
    let mut plan = PiperPlan::default();
    for (i, j, t, d) in steps {
        plan.stages
            .push(lat.stage_plan(i, j, t, d, suffix.div_ceil(d)));
        suffix -= d;
    }
    plan
}

/// The exact optimum by parametric search (module docs); `lower` is a proven lower bound.
/// Stage values above `upper` (a plan's value, or ∞) are not stored.
pub fn exact(lat: &Lattice, lower: f64, upper: f64, budget: &Budget) -> ExactEnd {
    let stopped = |reason, best, bound| ExactEnd::Stopped {
        reason,
        best,
        bound,
    };
    let mut rows: Vec<Vec<RunRow>> = Vec::with_capacity(lat.ideals.len());
    rows.push(Vec::new());
    let mut cands: Vec<f64> = Vec::new();
    for i in 1..lat.ideals.len() {
        if let Err(e) = budget.check() {
            return stopped(e, None, lower);
        }
        let subs = lat.subsets(i);
        let got: Result<Vec<Vec<RunRow>>, Exhausted> = subs
            .par_iter()
            .map(|&j| run_rows(lat, i, j, upper, budget))
            .collect();
        match got {
            Ok(r) => rows.push(r.into_iter().flatten().collect()),
            Err(e) => return stopped(e, None, lower),
        }
        let last = rows.last().expect("pushed");
        cands.extend(last.iter().flat_map(|r| r.runs.iter().map(|x| x.1)));
        let held = cands.len() * 8 + rows.iter().map(|r| r.len() * 48).sum::<usize>();
        if let Err(e) = budget.reserve("the exact Piper search's stage values", held as f64) {
            return stopped(e, None, lower);
        }
    }
    cands.retain(|&v| v >= lower);
    cands.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
    cands.dedup();
    let ss = lat.s + 1;
    let full = rows.len() - 1;
    let feasible = |t: f64| -> Result<Option<PiperPlan>, Exhausted> {
        let (h, arg) = threshold(lat, &rows, t, budget)?;
        Ok((h[full * ss + lat.s] as usize <= lat.k).then(|| threshold_plan(lat, &rows, &arg)))
    };
    if cands.is_empty() {
        return ExactEnd::Done {
            value: f64::INFINITY,
            plan: None,
            tests: 0,
        };
    }
    let mut tests = 1;
    // Invariant: cands[..lo] are infeasible, cands[hi] is feasible with `best`.
    let (mut lo, mut hi) = match feasible(cands[0]) {
        Ok(Some(p)) => {
            return ExactEnd::Done {
                value: cands[0],
                plan: Some(p),
                tests,
            }
        }
        Ok(None) => (1, cands.len() - 1),
        Err(e) => return stopped(e, None, lower),
    };
    tests += 1;
    let mut best = match feasible(cands[hi]) {
        Ok(Some(p)) => Some(p),
        Ok(None) => {
            return ExactEnd::Done {
                value: f64::INFINITY,
                plan: None,
                tests,
            }
        }
        Err(e) => return stopped(e, None, cands[lo.min(hi)]),
    };
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        tests += 1;
        match feasible(cands[mid]) {
            Ok(Some(p)) => (hi, best) = (mid, Some(p)),
            Ok(None) => lo = mid + 1,
            Err(e) => return stopped(e, best, cands[lo]),
        }
    }
    ExactEnd::Done {
        value: cands[hi],
        plan: best,
        tests,
    }
}

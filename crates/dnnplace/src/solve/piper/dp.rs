//! The two DPs over ideals: the relaxed one (a lower bound and a plan in one pass) and the
//! exact one (Piper's table).
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
//! **Exact** (`X[I][k][s]`: at most `k` devices and at most `s` replicas in `I`), Piper's
//! `dp[ideal][k][s]` with `S = min(N, K)`:
//! `X[I][k][s] = min(X[I][k][s−1], X[I][k−1][s], min_{J, t, d} max(X[J][k−td][s−d],
//! V_{I∖J}(t, d, ⌈s/d⌉)))`. A plan whose replicas number exactly `s` is priced at its true
//! `y` in the last term; the first two carry the "at most". Cost O(P · D · K · S).

use rayon::prelude::*;

use super::stage::{best_choice, costs_at, options_at, value_of};
use crate::model::piper::{PiperInstance, PiperPlan, PiperStage};
use crate::solve::budget::{Budget, Exhausted};
use crate::solve::ideals::Ideals;

/// A stage candidate: degrees and its values `V(y)` for `y = 1..=values.len()`.
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

    /// Candidate rows of stage `I \ J`, with `V(y)` for `y ≤ y_max(d)` (infinite when
    /// nothing fits).
    pub fn rows(
        &self,
        i: usize,
        j: usize,
        y_max: impl Fn(usize) -> usize,
        budget: &Budget,
    ) -> Result<Vec<Row>, Exhausted> {
        let (nodes, mask) = self.stage(i, j);
        let mut rows = Vec::new();
        for (t, ds) in &self.degrees {
            let Some(opts) = options_at(self.ins, &nodes, &mask, *t) else {
                continue;
            };
            for &d in ds {
                let costs = costs_at(self.ins, &opts, d);
                let mut values = Vec::with_capacity(y_max(d));
                let mut fast: Option<(Vec<usize>, f64)> = None;
                for y in 1..=y_max(d) {
                    if let Some((pick, v)) = &fast {
                        if value_of(self.ins, &opts, pick, d, y).1 <= self.ins.max_memory_per_device {
                            values.push(*v);
                            continue;
                        }
                    }
                    match best_choice(self.ins, &opts, &costs, y, budget)? {
                        Some(pick) => {
                            let (v, m) = value_of(self.ins, &opts, &pick, d, y);
                            if m > self.ins.max_memory_per_device {
                                values.push(f64::INFINITY);
                            } else {
                                values.push(v);
                                fast = Some((pick, v));
                            }
                        }
                        None => {
                            values.resize(y_max(d), f64::INFINITY);
                            break;
                        }
                    }
                }
                if values.first().is_some_and(|v| v.is_finite()) {
                    rows.push(Row { t: *t, d, values });
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

/// The relaxed DP's value and plan (module docs); `None` plan when `R[V][K] = ∞`.
pub fn relaxed(lat: &Lattice, budget: &Budget) -> Result<(f64, Option<PiperPlan>, u64), Exhausted> {
    let (n_ideals, kk) = (lat.ideals.len(), lat.k + 1);
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
            .map(|&j| Ok((j, lat.rows(i, j, |_| 1, budget)?)))
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
    let value = r[full * kk + lat.k];
    if !value.is_finite() {
        return Ok((value, None, pairs));
    }
    // The stages, then each stage's configurations re-chosen at its true in-flight count.
    let mut steps = Vec::new();
    let (mut i, mut k) = (full, lat.k);
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
        plan.stages.push(lat.stage_plan(i, j, t, d, suffix.div_ceil(d)));
        suffix -= d;
    }
    Ok((value, Some(plan), pairs))
}

/// The exact DP's value and plan (module docs).
pub fn exact(lat: &Lattice, budget: &Budget) -> Result<(f64, Option<PiperPlan>), Exhausted> {
    let (n_ideals, kk, ss) = (lat.ideals.len(), lat.k + 1, lat.s + 1);
    let per = kk * ss;
    budget.reserve("the exact Piper DP table", (n_ideals * per * 8) as f64)?;
    let mut x = vec![f64::INFINITY; n_ideals * per];
    x[..per].fill(0.0);
    let y_max = |d: usize| lat.s.div_ceil(d).max(1);
    for i in 1..n_ideals {
        budget.check()?;
        let subs = lat.subsets(i);
        let rows: Vec<(usize, Vec<Row>)> = subs
            .par_iter()
            .map(|&j| Ok((j, lat.rows(i, j, y_max, budget)?)))
            .collect::<Result<_, Exhausted>>()?;
        let (done, rest) = x.split_at_mut(i * per);
        let cur = &mut rest[..per];
        cur.par_chunks_mut(ss).enumerate().for_each(|(k, line)| {
            for (j, rs) in &rows {
                for row in rs {
                    let td = row.t * row.d;
                    if k < td {
                        continue;
                    }
                    let base = j * per + (k - td) * ss;
                    for s in row.d..ss {
                        let v = row.values[s.div_ceil(row.d) - 1];
                        let cand = done[base + s - row.d].max(v);
                        if cand < line[s] {
                            line[s] = cand;
                        }
                    }
                }
            }
        });
        for k in 0..kk {
            for s in 0..ss {
                let mut v = cur[k * ss + s];
                if s > 0 {
                    v = v.min(cur[k * ss + s - 1]);
                }
                if k > 0 {
                    v = v.min(cur[(k - 1) * ss + s]);
                }
                cur[k * ss + s] = v;
            }
        }
    }
    let full = n_ideals - 1;
    let value = x[full * per + lat.k * ss + lat.s];
    if !value.is_finite() {
        return Ok((value, None));
    }
    let plan = reconstruct_exact(lat, &x, budget)?;
    Ok((value, Some(plan)))
}

/// Walks the exact table back from `X[V][K][S]`.
fn reconstruct_exact(lat: &Lattice, x: &[f64], budget: &Budget) -> Result<PiperPlan, Exhausted> {
    let (kk, ss) = (lat.k + 1, lat.s + 1);
    let per = kk * ss;
    let at = |i: usize, k: usize, s: usize| x[i * per + k * ss + s];
    let y_max = |d: usize| lat.s.div_ceil(d).max(1);
    let mut plan = PiperPlan::default();
    let (mut i, mut k, mut s) = (lat.ideals.len() - 1, lat.k, lat.s);
    'walk: while i != 0 {
        let v = at(i, k, s);
        if s > 0 && at(i, k, s - 1) == v {
            s -= 1;
            continue;
        }
        if k > 0 && at(i, k - 1, s) == v {
            k -= 1;
            continue;
        }
        for j in lat.subsets(i) {
            for row in lat.rows(i, j, y_max, budget)? {
                let td = row.t * row.d;
                if td > k || row.d > s {
                    continue;
                }
                let y = s.div_ceil(row.d);
                if at(j, k - td, s - row.d).max(row.values[y - 1]) == v {
                    plan.stages.push(lat.stage_plan(i, j, row.t, row.d, y));
                    (i, k, s) = (j, k - td, s - row.d);
                    continue 'walk;
                }
            }
        }
        unreachable!("the exact Piper table has a predecessor for every finite entry");
    }
    Ok(plan)
}

//! One stage's time per sample for every `(t, d, y)`: the configuration choice is a
//! multiple-choice knapsack, solved exactly.
//!
//! For stage `X` at degrees `(t, d)`, node `v`'s configuration `l` costs
//! `c_l = p_l / d + (E_l / d + 4 (d − 1) w_l / (d N)) / β` (with `E_l` its crossing edges'
//! `2 (c_e + sync_e)`) and needs `A_l y + B_l` bytes. `V(y) = min Σ c` subject to
//! `Σ (A y + B) ≤ M`, one configuration per node. All-fastest feasible → that; all
//! lowest-memory infeasible → none (and none for every larger `y`, as `A ≥ 0`); otherwise
//! branch and bound over the nodes with the LP bound of the multiple-choice knapsack (each
//! node's lower convex hull of (memory, cost), greedy by slope). Piper instead runs a greedy
//! heuristic here (`KNAPSACK_FAST_HEURISTIC`), so its value can only be higher.
//!
//! Cost: O(|X| · L) for the two easy cases (L configurations per node); branch and bound is
//! exponential in the worst case and polls the [`Budget`].

use crate::model::piper::PiperInstance;
use crate::solve::budget::{Budget, Exhausted};

/// A node's configurations at one `t`: (index, p, E bytes, w, A, B).
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub index: usize,
    pub p: f64,
    pub edge_bytes: f64,
    pub w: f64,
    pub a: f64,
    pub b: f64,
}

/// The configurations of every node of stage `nodes` (increasing) at degree `t`, or `None`
/// when some node has none for `t`.
pub fn options_at(
    ins: &PiperInstance,
    nodes: &[usize],
    in_stage: &[bool],
    t: usize,
) -> Option<Vec<Vec<Config>>> {
    let mut out = Vec::with_capacity(nodes.len());
    for &v in nodes {
        let node = &ins.nodes[v];
        let list = node.configs.get(&t)?;
        let mut opts = Vec::with_capacity(list.len());
        for (index, c) in list.iter().enumerate() {
            let mut e_bytes = 0.0;
            for (k, &e) in node.incoming.iter().enumerate() {
                if !in_stage[ins.edges[e].source] {
                    e_bytes += 2.0 * (ins.edges[e].bytes + c.sync_fw[k]);
                }
            }
            for (k, &e) in node.outgoing.iter().enumerate() {
                if !in_stage[ins.edges[e].dest] {
                    e_bytes += 2.0 * (ins.edges[e].bytes + c.sync_bw[k]);
                }
            }
            opts.push(Config {
                index,
                p: c.time_per_sample,
                edge_bytes: e_bytes,
                w: c.parameter_bytes,
                a: c.memory_a,
                b: c.memory_b,
            });
        }
        out.push(opts);
    }
    Some(out)
}

/// Per-node costs `c_l` at data-parallel degree `d` (module docs).
pub fn costs_at(ins: &PiperInstance, opts: &[Vec<Config>], d: usize) -> Vec<Vec<f64>> {
    let (df, n_mb) = (d as f64, ins.mbs_in_batch as f64);
    opts.iter()
        .map(|o| {
            o.iter()
                .map(|c| {
                    c.p / df
                        + (c.edge_bytes / df + 4.0 * (df - 1.0) * c.w / df / n_mb) / ins.bandwidth
                })
                .collect()
        })
        .collect()
}

/// The stage's value for a choice `pick` (indices into each node's list), summed the way
/// the evaluator sums it, and its memory at `y`.
pub fn value_of(
    ins: &PiperInstance,
    opts: &[Vec<Config>],
    pick: &[usize],
    d: usize,
    y: usize,
) -> (f64, f64) {
    let (df, n_mb) = (d as f64, ins.mbs_in_batch as f64);
    let (mut p, mut e, mut s, mut m) = (0.0, 0.0, 0.0, 0.0);
    for (o, &l) in opts.iter().zip(pick) {
        let c = &o[l];
        p += c.p;
        e += c.edge_bytes;
        s += 4.0 * (df - 1.0) * c.w / df / n_mb;
        m += c.a * y as f64 + c.b;
    }
    ((e / df + s) / ins.bandwidth + p / df, m)
}

/// The cheapest feasible choice at `y` (module docs): `Ok(None)` when none fits.
pub fn best_choice(
    ins: &PiperInstance,
    opts: &[Vec<Config>],
    costs: &[Vec<f64>],
    y: usize,
    budget: &Budget,
) -> Result<Option<Vec<usize>>, Exhausted> {
    let cap = ins.max_memory_per_device;
    let mem = |i: usize, l: usize| opts[i][l].a * y as f64 + opts[i][l].b;
    let argmin = |i: usize, key: &dyn Fn(usize) -> (f64, f64)| {
        (0..opts[i].len())
            .min_by(|&a, &b| key(a).partial_cmp(&key(b)).expect("finite"))
            .expect("a configuration")
    };
    let n = opts.len();
    let fast: Vec<usize> = (0..n)
        .map(|i| argmin(i, &|l| (costs[i][l], mem(i, l))))
        .collect();
    let fast_mem: f64 = (0..n).map(|i| mem(i, fast[i])).sum();
    if fast_mem <= cap {
        return Ok(Some(fast));
    }
    let low: Vec<usize> = (0..n)
        .map(|i| argmin(i, &|l| (mem(i, l), costs[i][l])))
        .collect();
    let low_mem: f64 = (0..n).map(|i| mem(i, low[i])).sum();
    if low_mem > cap {
        return Ok(None);
    }
    let mut order: Vec<usize> = (0..n).collect();
    let items_of = |i: usize| {
        let mut v: Vec<(f64, f64, usize)> = (0..opts[i].len())
            .map(|l| (costs[i][l], mem(i, l), l))
            .collect();
        v.sort_by(|a, b| (a.0, a.1).partial_cmp(&(b.0, b.1)).expect("finite"));
        v
    };
    let keyed: Vec<Vec<(f64, f64, usize)>> = (0..n).map(items_of).collect();
    // Identical nodes next to each other (symmetry breaking in the search).
    order.sort_by(|&x, &y| {
        let kx: Vec<(f64, f64)> = keyed[x].iter().map(|o| (o.0, o.1)).collect();
        let ky: Vec<(f64, f64)> = keyed[y].iter().map(|o| (o.0, o.1)).collect();
        kx.partial_cmp(&ky).expect("finite")
    });
    let items: Vec<Vec<(f64, f64, usize)>> = order
        .iter()
        .map(|&i| {
            let mut v: Vec<(f64, f64, usize)> = (0..opts[i].len())
                .map(|l| (costs[i][l], mem(i, l), l))
                .collect();
            v.sort_by(|a, b| (a.0, a.1).partial_cmp(&(b.0, b.1)).expect("finite"));
            v
        })
        .collect();
    let same: Vec<bool> = (0..n)
        .map(|p| {
            p + 1 < n && {
                let (a, b) = (&items[p], &items[p + 1]);
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.0 == y.0 && x.1 == y.1)
            }
        })
        .collect();
    let mut search = Search::new(items, cap, budget);
    search.same_as_next = same;
    let low_cost: f64 = (0..n).map(|i| costs[i][low[i]]).sum();
    // `best.1` is in search order until the end.
    search.best = (low_cost, order.iter().map(|&i| low[i]).collect());
    let mut pick = vec![0; n];
    search.dfs(0, 0, 0.0, 0.0, &mut pick)?;
    let mut out = vec![0; n];
    for (p, &i) in order.iter().enumerate() {
        out[i] = search.best.1[p];
    }
    Ok(Some(out))
}

/// Branch and bound state.
struct Search<'a> {
    items: Vec<Vec<(f64, f64, usize)>>,
    cap: f64,
    /// Suffix sums of each item's lowest memory and lowest cost, and of the fastest
    /// option's memory.
    low_mem: Vec<f64>,
    min_cost: Vec<f64>,
    fast_mem: Vec<f64>,
    /// Hull steps (slope, memory saved, cost added, item), sorted by slope.
    steps: Vec<(f64, f64, f64, usize)>,
    best: (f64, Vec<usize>),
    /// Item `p` has the same options as item `p + 1`: their choices (by position in the
    /// sorted option list) are kept non-decreasing.
    same_as_next: Vec<bool>,
    nodes: u64,
    budget: &'a Budget,
}

impl<'a> Search<'a> {
    fn new(items: Vec<Vec<(f64, f64, usize)>>, cap: f64, budget: &'a Budget) -> Search<'a> {
        let n = items.len();
        let (mut low_mem, mut min_cost, mut fast_mem) =
            (vec![0.0; n + 1], vec![0.0; n + 1], vec![0.0; n + 1]);
        let mut steps = Vec::new();
        for i in (0..n).rev() {
            let it = &items[i];
            low_mem[i] = low_mem[i + 1] + it.iter().map(|o| o.1).fold(f64::INFINITY, f64::min);
            min_cost[i] = min_cost[i + 1] + it[0].0;
            fast_mem[i] = fast_mem[i + 1] + it[0].1;
            // Lower convex hull from the fastest option towards less memory.
            let mut pts: Vec<(f64, f64)> = it
                .iter()
                .filter(|o| o.1 < it[0].1)
                .map(|o| (o.1, o.0))
                .collect();
            pts.sort_by(|a, b| b.partial_cmp(a).expect("finite"));
            let mut hull = vec![(it[0].1, it[0].0)];
            for p in pts {
                while hull.len() >= 2 {
                    let (a, b) = (hull[hull.len() - 2], hull[hull.len() - 1]);
                    // slope a→b vs a→p, both (cost up) / (memory down)
                    let s_ab = (b.1 - a.1) / (a.0 - b.0);
                    let s_ap = (p.1 - a.1) / (a.0 - p.0);
                    if s_ap <= s_ab {
                        hull.pop();
                    } else {
                        break;
                    }
                }
                hull.push(p);
            }
            for w in hull.windows(2) {
                let (saved, added) = (w[0].0 - w[1].0, (w[1].1 - w[0].1).max(0.0));
                steps.push((added / saved, saved, added, i));
            }
        }
        steps.sort_by(|a, b| a.0.partial_cmp(&b.0).expect("finite"));
        Search {
            items,
            cap,
            low_mem,
            min_cost,
            fast_mem,
            steps,
            best: (f64::INFINITY, Vec::new()),
            same_as_next: Vec::new(),
            nodes: 0,
            budget,
        }
    }

    /// LP lower bound on the cost of items `i..` given memory `mem` already used.
    fn bound(&self, i: usize, mem: f64) -> f64 {
        let mut excess = mem + self.fast_mem[i] - self.cap;
        let mut extra = 0.0;
        if excess > 0.0 {
            for &(slope, saved, _, item) in &self.steps {
                if item < i {
                    continue;
                }
                if saved >= excess {
                    extra += slope * excess;
                    excess = 0.0;
                    break;
                }
                extra += slope * saved;
                excess -= saved;
            }
            if excess > 0.0 {
                return f64::INFINITY;
            }
        }
        self.min_cost[i] + extra
    }

    fn dfs(
        &mut self,
        i: usize,
        first: usize,
        cost: f64,
        mem: f64,
        pick: &mut [usize],
    ) -> Result<(), Exhausted> {
        self.nodes += 1;
        if self.nodes.is_multiple_of(4096) {
            self.budget.check()?;
        }
        if i == self.items.len() {
            if cost < self.best.0 {
                self.best = (cost, pick.to_vec());
            }
            return Ok(());
        }
        for k in first..self.items[i].len() {
            let (c, m, l) = self.items[i][k];
            let (nc, nm) = (cost + c, mem + m);
            if nm + self.low_mem[i + 1] > self.cap {
                continue;
            }
            if nc + self.bound(i + 1, nm) >= self.best.0 {
                continue;
            }
            pick[i] = l;
            let next_first = if self.same_as_next[i] { k } else { 0 };
            self.dfs(i + 1, next_first, nc, nm, pick)?;
        }
        Ok(())
    }
}

//! The contiguous max-load optimum of a *fork-join block*: a group DAG made of one source
//! `s`, one sink `j` and parallel chains `C_1 … C_B` from successors of `s` to
//! predecessors of `j` (every other group has one predecessor and one successor), by a
//! depth-first branch and bound over the chains instead of over the stages.
//!
//! # Why chains
//!
//! A contiguous split is a chain of ideals `∅ ⊂ I_1 ⊂ … ⊂ I_r = V`; here an ideal is `s`
//! (or nothing), a prefix of every chain, and `j` once every chain is complete. So stage
//! `t` (`I_t \ I_{t−1}`) holds one *segment* of each chain (possibly empty), and a chain's
//! segments lie in increasing stage order: with the stage sequence fixed, a plan is one
//! *pattern* per chain (its cut positions `0 ≤ p_1 ≤ … ≤ p_{r−1} ≤ |C|`), chosen
//! independently. `s` lies in the first stage and `j` in the last one (every chain's
//! segments lie between them, so stages outside are empty; a plan with `s` and `j` on one
//! device has one stage and is scored apart).
//!
//! Loads (MODEL.md): an accelerator stage `X` pays `Σ fpga(X)` and `c(T)` for every
//! hyperedge `T` it cuts (meets without containing); a CPU stage pays `Σ cpu(X)`. Every
//! hyperedge lies inside one chain (`{u, next(u)}`), or joins the end of one chain to `j`,
//! or is produced by `s` (`T ⊆ {s} ∪ heads`; instances with others are declined). The
//! first two kinds depend on one chain's pattern: a pattern adds a vector
//! `load_p ∈ R^r` (and memory `mem_p`) to the stages. The third couples chains: a stage
//! `t ≠ 1` pays `c(T)` once when it holds any head of `T`, and stage 1 (holding `s`) pays
//! `c(T)` once when any head of `T` lies elsewhere; the search adds these when the first
//! such head arrives (loads only grow along a branch).
//!
//! # Stage sequences
//!
//! A plan with `a ≤ k` accelerator stages and `c ≤ ℓ` CPU stages, `r = a + c ≥ 2`, is one
//! of the sequence of `k` accelerator and `c` CPU stages with `k − a` empty accelerator
//! stages inserted after its first stage. So the search runs over every sequence of `k`
//! accelerators and `c ∈ 0..=ℓ` CPUs (empty accelerator stages allowed, every CPU stage
//! must hold a group), sharing one incumbent.
//!
//! # Search
//!
//! Chains in order (classes of twins together, larger work first); each takes a pattern
//! whose every stage stays below the incumbent `G` (and within memory). Twin chains
//! (equal costs position by position, equal hyperedges, heads in the same source
//! hyperedges) are interchangeable, so their patterns are taken in non-decreasing order.
//! At every node, for the chains left (each alone against the current loads `L`):
//!
//! - each must have a pattern `p` with `L_t + load_p(t) < G` everywhere (forward check);
//! - *volume*: the accelerator stages end below `G`, so the least accelerator total of
//!   the chains left is below `Σ_{t acc} (G − L_t)`; likewise on the CPUs;
//! - *sink room*: a chain that ends in the last stage (`j`'s) puts at least `U_end` there
//!   with accelerator total at least `V_end`; one that does not puts at least `U_not`
//!   there (it pays `j`'s input) with total at least `V_not`. With the last stage below
//!   `G`, the least total over the choices is at least the fractional knapsack relaxation
//!   (savings `V_not − V_end`, weights `U_end − U_not`, capacity `G − L_r − Σ U_not`);
//!   a choice dominated in both is dropped, and a pair that trades the other way is
//!   relaxed to `(min V, min U)`.
//!
//! Each is a relaxation of the plans below `G` from the node, so a pruned node holds none.
//! When the search finishes, no plan is below the final `G`: its plan is optimal.
//!
//! # Numerics
//!
//! The prunes compare with a relative slack of [`SLACK`] in the search's favour (they prune
//! less), and the proven value is reported as `G · (1 − 1e-12)` as the split search does.
//!
//! Complexity: O(Σ_nodes P·r) for `P` patterns per chain class (`C(|C| + r − 1, r − 1)`)
//! and `r` stages; memory O(B·P·(r + |C|)).

use rustc_hash::FxHashMap;

use super::budget::{Budget, Exhausted};
use crate::model::contraction::Contraction;
use crate::model::{Device, Placement, Workload};

/// The most patterns (over all chain classes and one stage sequence) the search builds.
pub const MAX_PATTERNS: usize = 400_000;

/// The most stage sequences the search runs over.
pub const MAX_SEQUENCES: usize = 64;

/// The relative slack of every prune (module docs, "Numerics").
pub const SLACK: f64 = 1e-9;

/// What a finished or stopped search found.
#[derive(Clone, Debug)]
pub struct Found {
    /// The best plan found below the starting threshold (`None`: none found).
    pub placement: Option<Placement>,
    /// Its value by the search's sums (∞ without a plan).
    pub value: f64,
    /// `Ok`: the search finished: no plan is below `min(value, start)`.
    pub finished: Result<(), Exhausted>,
    /// Nodes of the search tree expanded.
    pub nodes: u64,
    /// The chains and the sizes of their twin classes.
    pub chains: usize,
    pub twin_classes: Vec<usize>,
}

/// A hyperedge of one chain: the chain positions it holds, whether it holds `j`, its cost.
#[derive(Clone, Debug, PartialEq)]
struct ChainEdge {
    positions: Vec<usize>,
    sink: bool,
    cost: f64,
}

/// The recognised block (module docs).
struct Block {
    source: usize,
    sink: usize,
    /// Each chain's groups in order.
    chains: Vec<Vec<usize>>,
    fpga: Vec<f64>,
    cpu: Vec<f64>,
    size: Vec<f64>,
    supported: Vec<bool>,
    edges: Vec<Vec<ChainEdge>>,
    /// Hyperedges produced by `s`: cost, and per chain whether its head is in it (as a
    /// mask over these hyperedges, `heads_in[chain]`).
    source_cost: Vec<f64>,
    heads_in: Vec<u64>,
    memory: f64,
    group_of: Vec<usize>,
}

impl Block {
    fn new(w: &Workload) -> Option<Block> {
        let c = Contraction::new(w);
        let n = c.len();
        let only = |f: &dyn Fn(usize) -> bool| -> Option<usize> {
            let mut it = (0..n).filter(|&g| f(g));
            let first = it.next()?;
            it.next().is_none().then_some(first)
        };
        let source = only(&|g| c.pred[g].is_empty())?;
        let sink = only(&|g| c.succ[g].is_empty())?;
        if source == sink || c.succ[source].contains(&sink) {
            return None;
        }
        let inner = |g: usize| g != source && g != sink;
        if (0..n).any(|g| inner(g) && (c.pred[g].len() != 1 || c.succ[g].len() != 1)) {
            return None;
        }
        let mut chains = Vec::new();
        let mut chain_of = vec![(usize::MAX, 0); n];
        for &head in &c.succ[source] {
            let mut chain = vec![head];
            while c.succ[*chain.last()?][0] != sink {
                chain.push(c.succ[*chain.last()?][0]);
            }
            for (p, &g) in chain.iter().enumerate() {
                chain_of[g] = (chains.len(), p);
            }
            chains.push(chain);
        }
        if chains.len() > 64 || chains.iter().map(Vec::len).sum::<usize>() + 2 != n {
            return None;
        }
        let g = &c.groups;
        let mut block = Block {
            source,
            sink,
            edges: vec![Vec::new(); chains.len()],
            heads_in: vec![0; chains.len()],
            chains,
            fpga: g.iter().map(|x| x.fpga_latency).collect(),
            cpu: g.iter().map(|x| x.cpu_latency).collect(),
            size: g.iter().map(|x| x.size_bytes).collect(),
            supported: g.iter().map(|x| x.supported_on_accelerator).collect(),
            source_cost: Vec::new(),
            memory: w.devices().memory_per_accelerator_bytes,
            group_of: c.group_of.clone(),
        };
        for (set, cost) in c.communication_hyperedges(w) {
            block.add_edge(&set, cost, &chain_of)?;
        }
        Some(block)
    }

    /// Files hyperedge `set` (module docs); `None` when it is of none of the three kinds.
    fn add_edge(&mut self, set: &[usize], cost: f64, chain_of: &[(usize, usize)]) -> Option<()> {
        if set.contains(&self.source) {
            if set.contains(&self.sink) || self.source_cost.len() == 64 {
                return None;
            }
            let bit = 1u64 << self.source_cost.len();
            for &g in set.iter().filter(|&&g| g != self.source) {
                if chain_of[g].1 != 0 {
                    return None;
                }
                self.heads_in[chain_of[g].0] |= bit;
            }
            self.source_cost.push(cost);
            return Some(());
        }
        let members: Vec<usize> = set.iter().copied().filter(|&g| g != self.sink).collect();
        let chain = chain_of[*members.first()?].0;
        if members.iter().any(|&g| chain_of[g].0 != chain) {
            return None;
        }
        self.edges[chain].push(ChainEdge {
            positions: members.iter().map(|&g| chain_of[g].1).collect(),
            sink: set.contains(&self.sink),
            cost,
        });
        Some(())
    }

    /// Twin classes: chains equal position by position (costs, sizes, support), with equal
    /// hyperedges and heads in the same source hyperedges.
    fn classes(&self) -> Vec<Vec<usize>> {
        let mut by_signature: FxHashMap<Vec<u64>, Vec<usize>> = FxHashMap::default();
        for (ci, chain) in self.chains.iter().enumerate() {
            let mut sig = vec![chain.len() as u64, self.heads_in[ci]];
            for &g in chain {
                sig.extend([
                    self.fpga[g].to_bits(),
                    self.cpu[g].to_bits(),
                    self.size[g].to_bits(),
                    self.supported[g] as u64,
                ]);
            }
            for e in &self.edges[ci] {
                sig.push(u64::MAX);
                sig.extend(e.positions.iter().map(|&p| p as u64));
                sig.extend([e.sink as u64, e.cost.to_bits()]);
            }
            by_signature.entry(sig).or_default().push(ci);
        }
        let work = |class: &Vec<usize>| -> f64 {
            self.chains[class[0]].iter().map(|&g| self.fpga[g]).sum()
        };
        let mut classes: Vec<Vec<usize>> = by_signature.into_values().collect();
        classes.sort_by(|a, b| work(b).total_cmp(&work(a)).then(a.cmp(b)));
        classes
    }
}

/// The patterns of one chain class on one stage sequence, flat (`r` values per pattern for
/// loads and memory, `len` stages per pattern for the groups), cheapest total first.
struct Patterns {
    count: usize,
    /// Σ of the loads over the accelerator (CPU) stages.
    acc_total: Vec<f64>,
    cpu_total: Vec<f64>,
    load: Vec<f64>,
    mem: Vec<f64>,
    stage_of: Vec<u8>,
    /// The stage of the chain's head.
    head: Vec<u8>,
    /// Whether the chain ends in the last stage.
    ends: Vec<bool>,
}

/// Every monotone assignment of `len` positions to `r` stages (stage indices per position).
fn assignments(len: usize, r: usize) -> Vec<Vec<u8>> {
    fn grow(at: Vec<u8>, len: usize, r: usize, out: &mut Vec<Vec<u8>>) {
        if at.len() == len {
            out.push(at);
            return;
        }
        let from = at.last().copied().unwrap_or(0);
        for s in from..r as u8 {
            let mut next = at.clone();
            next.push(s);
            grow(next, len, r, out);
        }
    }
    let mut out = Vec::new();
    grow(Vec::new(), len, r, &mut out);
    out
}

/// The number of monotone assignments, `C(len + r − 1, r − 1)`, saturating.
fn assignment_count(len: usize, r: usize) -> usize {
    let mut c: u128 = 1;
    for i in 0..(r - 1) as u128 {
        c = c * (len as u128 + 1 + i) / (i + 1);
        if c > usize::MAX as u128 {
            return usize::MAX;
        }
    }
    c as usize
}

impl Patterns {
    /// The valid patterns of chain `ci` on `types` (accelerator stages `true`).
    fn new(block: &Block, ci: usize, types: &[bool]) -> Patterns {
        let r = types.len();
        let chain = &block.chains[ci];
        let mut rows: Vec<(f64, Vec<f64>, Vec<f64>, Vec<u8>)> = Vec::new();
        'each: for stage_of in assignments(chain.len(), r) {
            let mut load = vec![0.0; r];
            let mut mem = vec![0.0; r];
            for (p, &g) in chain.iter().enumerate() {
                let t = stage_of[p] as usize;
                if types[t] {
                    if !block.supported[g] {
                        continue 'each;
                    }
                    load[t] += block.fpga[g];
                    mem[t] += block.size[g];
                } else {
                    load[t] += block.cpu[g];
                }
            }
            for e in &block.edges[ci] {
                let mut touched: u64 = e.sink.then_some(1u64 << (r - 1)).unwrap_or(0);
                for &p in &e.positions {
                    touched |= 1u64 << stage_of[p];
                }
                if touched.count_ones() > 1 {
                    for t in (0..r).filter(|&t| types[t] && touched >> t & 1 == 1) {
                        load[t] += e.cost;
                    }
                }
            }
            let total: f64 = (0..r).filter(|&t| types[t]).map(|t| load[t]).sum();
            rows.push((total, load, mem, stage_of));
        }
        rows.sort_by(|a, b| a.0.total_cmp(&b.0));
        let len = chain.len();
        let cpu_total = |load: &[f64]| (0..r).filter(|&t| !types[t]).map(|t| load[t]).sum();
        Patterns {
            count: rows.len(),
            acc_total: rows.iter().map(|x| x.0).collect(),
            cpu_total: rows.iter().map(|x| cpu_total(&x.1)).collect(),
            head: rows.iter().map(|x| x.3[0]).collect(),
            ends: rows.iter().map(|x| x.3[len - 1] as usize == r - 1).collect(),
            load: rows.iter().flat_map(|x| x.1.iter().copied()).collect(),
            mem: rows.iter().flat_map(|x| x.2.iter().copied()).collect(),
            stage_of: rows.into_iter().flat_map(|x| x.3).collect(),
        }
    }
}

/// What the searches over all stage sequences share: the incumbent and its plan.
struct Shared<'a> {
    budget: &'a Budget,
    best: f64,
    /// The incumbent's device per group.
    plan: Option<Vec<Device>>,
    nodes: u64,
}

/// The least totals of one chain class's patterns that fit the current loads (module
/// docs, "Search"): accelerator totals and last-stage parts of the patterns that end in
/// the last stage and of those that do not, and the least CPU total.
struct Fits {
    any: bool,
    v_end: f64,
    u_end: f64,
    v_not: f64,
    u_not: f64,
    cpu: f64,
}

/// The search on one stage sequence (module docs).
struct Sequence<'a> {
    block: &'a Block,
    types: Vec<bool>,
    /// Chains in search order, the class (index into `patterns`) of each.
    order: Vec<usize>,
    class_at: Vec<usize>,
    patterns: Vec<Patterns>,
    /// The pattern taken at each depth.
    choice: Vec<usize>,
    /// Per depth (chains taken before it): stage loads and memory, the source hyperedges
    /// each stage holds a head of, those with a head outside stage 0, nonempty stages.
    loads: Vec<Vec<f64>>,
    mems: Vec<Vec<f64>>,
    touched: Vec<Vec<u64>>,
    outside: Vec<u64>,
    used: Vec<u64>,
}

impl<'a> Sequence<'a> {
    fn new(block: &'a Block, classes: &[Vec<usize>], types: Vec<bool>) -> Sequence<'a> {
        let r = types.len();
        let patterns: Vec<Patterns> = classes
            .iter()
            .map(|class| Patterns::new(block, class[0], &types))
            .collect();
        let order: Vec<usize> = classes.iter().flatten().copied().collect();
        let class_at: Vec<usize> = classes
            .iter()
            .enumerate()
            .flat_map(|(c, class)| std::iter::repeat_n(c, class.len()))
            .collect();
        let depth = order.len() + 1;
        let mut loads = vec![vec![0.0; r]; depth];
        let mut mems = vec![vec![0.0; r]; depth];
        for (g, t) in [(block.source, 0), (block.sink, r - 1)] {
            if types[t] {
                loads[0][t] += if block.supported[g] {
                    block.fpga[g]
                } else {
                    f64::INFINITY
                };
                mems[0][t] += block.size[g];
            } else {
                loads[0][t] += block.cpu[g];
            }
        }
        Sequence {
            block,
            types,
            choice: vec![0; order.len()],
            order,
            class_at,
            patterns,
            loads,
            mems,
            touched: vec![vec![0; r]; depth],
            outside: vec![0; depth],
            used: vec![1 | 1u64 << (r - 1); depth],
        }
    }

    /// Depth-first over the chains from `depth` (module docs, "Search").
    fn dfs(&mut self, depth: usize, sh: &mut Shared) -> Result<(), Exhausted> {
        if depth == self.order.len() {
            self.leaf(sh);
            return Ok(());
        }
        let class = self.class_at[depth];
        let from = if depth > 0 && self.class_at[depth - 1] == class {
            self.choice[depth - 1]
        } else {
            0
        };
        for p in from..self.patterns[class].count {
            sh.nodes += 1;
            if sh.nodes.is_multiple_of(1024) {
                sh.budget.check()?;
            }
            self.choice[depth] = p;
            if self.apply(depth, class, p, sh.best) && self.room_left(depth + 1, sh.best) {
                self.dfs(depth + 1, sh)?;
            }
        }
        Ok(())
    }

    /// The state after chain `order[depth]` takes pattern `p` of its class; false when a
    /// stage reaches `best` or runs out of memory.
    fn apply(&mut self, depth: usize, class: usize, p: usize, best: f64) -> bool {
        let r = self.types.len();
        let pats = &self.patterns[class];
        let (head, chain) = (pats.head[p] as usize, self.order[depth]);
        let (before, after) = self.loads.split_at_mut(depth + 1);
        let (load, next) = (&before[depth], &mut after[0]);
        for t in 0..r {
            next[t] = load[t] + pats.load[p * r + t];
            if next[t] >= best {
                return false;
            }
        }
        let (before, after) = self.mems.split_at_mut(depth + 1);
        for t in (0..r).filter(|&t| self.types[t]) {
            after[0][t] = before[depth][t] + pats.mem[p * r + t];
            if after[0][t] > self.block.memory {
                return false;
            }
        }
        let len = self.block.chains[chain].len();
        let mut used = self.used[depth];
        for &s in &pats.stage_of[p * len..(p + 1) * len] {
            used |= 1u64 << s;
        }
        self.used[depth + 1] = used;
        // Source hyperedges: a stage pays on its first head of each, stage 0 on the first
        // head of each elsewhere.
        let (before, after) = self.touched.split_at_mut(depth + 1);
        after[0].copy_from_slice(&before[depth]);
        self.outside[depth + 1] = self.outside[depth];
        let heads = self.block.heads_in[chain];
        if head != 0 && heads != 0 {
            let fresh = heads & !after[0][head];
            after[0][head] |= heads;
            let fresh0 = heads & !self.outside[depth];
            self.outside[depth + 1] |= heads;
            let cost = |m: u64| -> f64 {
                (0..64)
                    .filter(|&b| m >> b & 1 == 1)
                    .map(|b| self.block.source_cost[b])
                    .sum()
            };
            let next = &mut self.loads[depth + 1];
            if self.types[head] && fresh != 0 {
                next[head] += cost(fresh);
            }
            if self.types[0] && fresh0 != 0 {
                next[0] += cost(fresh0);
            }
            if next[head] >= best || next[0] >= best {
                return false;
            }
        }
        true
    }
}

impl Sequence<'_> {
    /// The least totals of the patterns of `class` from index `from` on that fit the
    /// loads at `depth` (module docs, "Search").
    fn fits(&self, depth: usize, class: usize, from: usize, best: f64) -> Fits {
        let r = self.types.len();
        let (load, mem) = (&self.loads[depth], &self.mems[depth]);
        let pats = &self.patterns[class];
        let inf = f64::INFINITY;
        let mut f = Fits {
            any: false,
            v_end: inf,
            u_end: inf,
            v_not: inf,
            u_not: inf,
            cpu: inf,
        };
        for p in from..pats.count {
            let row = &pats.load[p * r..(p + 1) * r];
            let fits = (0..r).all(|t| {
                load[t] + row[t] < best
                    && (!self.types[t] || mem[t] + pats.mem[p * r + t] <= self.block.memory)
            });
            if !fits {
                continue;
            }
            f.any = true;
            let (v, u) = (pats.acc_total[p], row[r - 1]);
            if pats.ends[p] {
                f.v_end = f.v_end.min(v);
                f.u_end = f.u_end.min(u);
            } else {
                f.v_not = f.v_not.min(v);
                f.u_not = f.u_not.min(u);
            }
            f.cpu = f.cpu.min(pats.cpu_total[p]);
        }
        f
    }

    /// Whether the chains from `depth` on may still fit below `best`: the forward check,
    /// the volume and the sink-room bounds of the module docs.
    fn room_left(&self, depth: usize, best: f64) -> bool {
        if !best.is_finite() {
            return true;
        }
        let r = self.types.len();
        let load = &self.loads[depth];
        let eps = SLACK * best * (r as f64 + 1.0);
        let room = |acc: bool| -> f64 {
            (0..r)
                .filter(|&t| self.types[t] == acc)
                .map(|t| best - load[t])
                .sum()
        };
        let sink_acc = self.types[r - 1];
        let (mut need, mut need_cpu) = (0.0, 0.0);
        let mut cap = best - load[r - 1];
        let mut items: Vec<(f64, f64, f64)> = Vec::new();
        let mut at = depth;
        while at < self.order.len() {
            let class = self.class_at[at];
            let from = if at > 0 && self.class_at[at - 1] == class {
                self.choice[at - 1]
            } else {
                0
            };
            let mut m = 0;
            while at < self.order.len() && self.class_at[at] == class {
                m += 1;
                at += 1;
            }
            let f = self.fits(depth, class, from, best);
            if !f.any {
                return false;
            }
            let m = m as f64;
            need_cpu += m * f.cpu;
            let (ds, dw) = (f.v_not - f.v_end, f.u_end - f.u_not);
            let (v, u) = if !sink_acc {
                (f.v_end.min(f.v_not), 0.0)
            } else if f.v_not.is_infinite() || (ds >= 0.0 && dw <= 0.0) {
                (f.v_end, f.u_end)
            } else if f.v_end.is_infinite() || (ds <= 0.0 && dw >= 0.0) {
                (f.v_not, f.u_not)
            } else if ds > 0.0 && dw > 0.0 {
                items.push((dw, ds, m));
                (f.v_not, f.u_not)
            } else {
                (f.v_end.min(f.v_not), f.u_end.min(f.u_not))
            };
            need += m * v;
            cap -= m * u;
        }
        if sink_acc {
            if cap < -eps {
                return false;
            }
            items.sort_by(|a, b| (b.1 / b.0).total_cmp(&(a.1 / a.0)));
            for (dw, ds, m) in items {
                if cap <= 0.0 {
                    break;
                }
                let take = (cap / dw).min(m);
                need -= take * ds;
                cap -= take * dw;
            }
        }
        need <= room(true) + eps && need_cpu <= room(false) + eps
    }

    /// A complete plan below the incumbent (every CPU stage holding a group) becomes it.
    fn leaf(&self, sh: &mut Shared) {
        let r = self.types.len();
        let used = self.used[self.order.len()];
        if (0..r).any(|t| !self.types[t] && used >> t & 1 == 0) {
            return;
        }
        let value = self.loads[self.order.len()]
            .iter()
            .fold(0.0f64, |m, &x| m.max(x));
        if value >= sh.best {
            return;
        }
        let mut stage = vec![0usize; self.block.fpga.len()];
        stage[self.block.sink] = r - 1;
        for (depth, &chain) in self.order.iter().enumerate() {
            let pats = &self.patterns[self.class_at[depth]];
            let len = self.block.chains[chain].len();
            let p = self.choice[depth];
            for (i, &g) in self.block.chains[chain].iter().enumerate() {
                stage[g] = pats.stage_of[p * len + i] as usize;
            }
        }
        sh.best = value;
        sh.plan = Some(devices(&self.types, used, &stage));
    }
}

/// Devices for the groups on `stage`: the nonempty stages (`used`) numbered in order per
/// kind (`types`: accelerator).
fn devices(types: &[bool], used: u64, stage: &[usize]) -> Vec<Device> {
    let (mut acc, mut cpu) = (0, 0);
    let of_stage: Vec<Device> = (0..types.len())
        .map(|t| {
            let d = if types[t] {
                Device::Accelerator(acc)
            } else {
                Device::Cpu(cpu)
            };
            if used >> t & 1 == 1 {
                if types[t] {
                    acc += 1;
                } else {
                    cpu += 1;
                }
            }
            d
        })
        .collect();
    stage.iter().map(|&t| of_stage[t]).collect()
}

/// Every sequence of `k` accelerator and `c ∈ 0..=l` CPU stages with at least two stages
/// (module docs, "Stage sequences"); `None` beyond [`MAX_SEQUENCES`].
fn sequences(k: usize, l: usize) -> Option<Vec<Vec<bool>>> {
    let mut out = Vec::new();
    for c in 0..=l {
        let r = k + c;
        if r < 2 {
            continue;
        }
        if r > 63 || assignment_count(k, c + 1) > MAX_SEQUENCES {
            return None;
        }
        // The CPU positions: every c-subset of 0..r, as increasing positions.
        let mut at: Vec<usize> = (0..c).collect();
        loop {
            out.push((0..r).map(|t| !at.contains(&t)).collect());
            let Some(i) = (0..c).rev().find(|&i| at[i] < r - c + i) else {
                break;
            };
            at[i] += 1;
            for j in i + 1..c {
                at[j] = at[j - 1] + 1;
            }
        }
    }
    (out.len() <= MAX_SEQUENCES).then_some(out)
}

/// Whether the search takes `w`: a fork-join block (module docs) without a cluster.
pub fn fits(w: &Workload) -> bool {
    w.cluster().is_none() && Block::new(w).is_some()
}

/// The contiguous max-load optimum of `w` below `start` (∞: any) within `budget`, when
/// `w` is a fork-join block whose patterns stay within [`MAX_PATTERNS`] (else `None`).
pub fn solve(w: &Workload, start: f64, budget: &Budget) -> Option<Found> {
    solve_with(w, start, budget, true)
}

/// [`solve`] by the bins search (`bins`, where the hyperedges allow) or by stage sequences.
pub fn solve_with(w: &Workload, start: f64, budget: &Budget, bins: bool) -> Option<Found> {
    if w.cluster().is_some() {
        return None;
    }
    let block = Block::new(w)?;
    let classes = block.classes();
    let n = block.fpga.len();
    let d = w.devices();
    let (k, l) = (d.accelerators.min(n), d.cpus.min(n));
    let seqs = sequences(k, l)?;
    let longest = seqs.iter().map(Vec::len).max().unwrap_or(0);
    let patterns: usize = classes
        .iter()
        .map(|c| assignment_count(block.chains[c[0]].len(), longest.max(1)))
        .fold(0usize, usize::saturating_add);
    if patterns > MAX_PATTERNS {
        return None;
    }
    let mut sh = Shared {
        budget,
        best: start,
        plan: None,
        nodes: 0,
    };
    single_stage(&block, k, l, &mut sh);
    let mut finished = Ok(());
    let by_bins = if bins { solve_bins(&block, &classes, k, l, &mut sh) } else { None };
    if let Some(done) = by_bins {
        finished = done;
    } else {
    for types in seqs {
        let mut s = Sequence::new(&block, &classes, types);
        if s.loads[0].iter().all(|&x| x < sh.best) && s.room_left(0, sh.best) {
            if let Err(e) = s.dfs(0, &mut sh) {
                finished = Err(e);
                break;
            }
        }
    }
    }
    let placement = sh
        .plan
        .as_ref()
        .map(|dev| Placement::new(block.group_of.iter().map(|&g| dev[g]).collect()));
    Some(Found {
        value: if placement.is_some() {
            sh.best
        } else {
            f64::INFINITY
        },
        placement,
        finished,
        nodes: sh.nodes,
        chains: block.chains.len(),
        twin_classes: classes.iter().map(Vec::len).collect(),
    })
}

/// The plans of one stage: every group on one accelerator (all supported, within memory)
/// or one CPU.
fn single_stage(block: &Block, k: usize, l: usize, sh: &mut Shared) {
    let n = block.fpga.len();
    let sum = |v: &[f64]| -> f64 { v.iter().sum() };
    if k > 0 && block.supported.iter().all(|&s| s) && sum(&block.size) <= block.memory {
        let v = sum(&block.fpga);
        if v < sh.best {
            sh.best = v;
            sh.plan = Some(vec![Device::Accelerator(0); n]);
        }
    }
    if l > 0 {
        let v = sum(&block.cpu);
        if v < sh.best {
            sh.best = v;
            sh.plan = Some(vec![Device::Cpu(0); n]);
        }
    }
}

/// A chain's hyperedges as cut costs: `cut[i]` is paid across the boundary after position
/// `i`, `sink` between its last group and `j`; `None` for any other shape.
fn cut_costs(block: &Block, ci: usize) -> Option<(Vec<f64>, f64)> {
    let len = block.chains[ci].len();
    let mut cut = vec![0.0; len.saturating_sub(1)];
    let mut sink = 0.0;
    for e in &block.edges[ci] {
        match (e.positions.as_slice(), e.sink) {
            (&[p], true) if p == len - 1 => sink += e.cost,
            (&[p, q], false) if q == p + 1 => cut[p] += e.cost,
            _ => return None,
        }
    }
    Some((cut, sink))
}

/// What the bins search's bound needs of a chain class (module docs, "Bins").
#[derive(Clone)]
struct ClassStat {
    len: usize,
    /// Σ fpga over the supported groups; suffix sums of fpga (∞ past an unsupported group).
    work: f64,
    suffix: Vec<f64>,
    cut: Vec<f64>,
    sink: f64,
    /// Σ cpu of the unsupported groups, Σ fpga of the groups without CPU time, the largest
    /// fpga/cpu of the others, the least cpu.
    forced_cpu: f64,
    free_fpga: f64,
    ratio: f64,
    min_cpu: f64,
}

impl ClassStat {
    fn new(block: &Block, ci: usize, cut: Vec<f64>, sink: f64) -> ClassStat {
        let chain = &block.chains[ci];
        let mut suffix = vec![0.0; chain.len() + 1];
        for (p, &g) in chain.iter().enumerate().rev() {
            suffix[p] = if block.supported[g] { suffix[p + 1] + block.fpga[g] } else { f64::INFINITY };
        }
        let sup = || chain.iter().copied().filter(|&g| block.supported[g]);
        ClassStat {
            len: chain.len(),
            work: sup().map(|g| block.fpga[g]).sum(),
            suffix,
            cut,
            sink,
            forced_cpu: chain.iter().filter(|&&g| !block.supported[g]).map(|&g| block.cpu[g]).sum(),
            free_fpga: sup().filter(|&g| block.cpu[g] <= 0.0).map(|g| block.fpga[g]).sum(),
            ratio: sup()
                .filter(|&g| block.cpu[g] > 0.0)
                .map(|g| block.fpga[g] / block.cpu[g])
                .fold(0.0, f64::max),
            min_cpu: chain.iter().map(|&g| block.cpu[g]).fold(f64::INFINITY, f64::min),
        }
    }
}

/// One device of the bins search: its kind, load and memory so far, the bins that must
/// follow it (transitively closed, `S` and `J` left out), and the source hyperedges it
/// holds a head of (for `S`: those with a head elsewhere).
#[derive(Clone, Copy, Debug)]
struct Bin {
    acc: bool,
    load: f64,
    mem: f64,
    after: u64,
    touched: u64,
}

/// The bins search (module docs, "Bins"): bin 0 holds `s`, bin 1 holds `j`.
struct Bins<'a> {
    block: &'a Block,
    k: usize,
    l: usize,
    order: Vec<usize>,
    class_at: Vec<usize>,
    stats: Vec<ClassStat>,
    /// The bins before each depth's chain, and the bins that existed before its class's
    /// first chain (the twin rule's base).
    state: Vec<Vec<Bin>>,
    base: Vec<usize>,
    /// Each depth's pieces: (end, bin as the twin rule sees it, bin).
    pieces: Vec<Vec<(u8, u8, u8)>>,
}

/// The twin rule's code of a bin created at or after the class's first chain.
const NEW_BIN: u8 = u8::MAX;

impl<'a> Bins<'a> {
    /// The search with `s` on an accelerator (`s_acc`) or a CPU, likewise `j`; `None`
    /// when the devices or the groups' support do not allow it.
    fn new(block: &'a Block, classes: &[Vec<usize>], stats: Vec<ClassStat>, k: usize, l: usize, s_acc: bool, j_acc: bool) -> Option<Bins<'a>> {
        let accs = s_acc as usize + j_acc as usize;
        if accs > k || 2 - accs > l {
            return None;
        }
        let bin = |g: usize, acc: bool| -> Option<Bin> {
            (!acc || block.supported[g]).then(|| Bin {
                acc,
                load: if acc { block.fpga[g] } else { block.cpu[g] },
                mem: if acc { block.size[g] } else { 0.0 },
                after: 0,
                touched: 0,
            })
        };
        let root = vec![bin(block.source, s_acc)?, bin(block.sink, j_acc)?];
        if root.iter().any(|b| b.acc && b.mem > block.memory) {
            return None;
        }
        let order: Vec<usize> = classes.iter().flatten().copied().collect();
        let depth = order.len() + 1;
        let mut state = vec![Vec::new(); depth];
        state[0] = root;
        Some(Bins {
            block,
            k,
            l,
            class_at: classes
                .iter()
                .enumerate()
                .flat_map(|(c, class)| std::iter::repeat_n(c, class.len()))
                .collect(),
            order,
            stats,
            state,
            base: vec![0; depth],
            pieces: vec![Vec::new(); depth],
        })
    }

    fn counts(bins: &[Bin]) -> (usize, usize) {
        let a = bins.iter().filter(|b| b.acc).count();
        (a, bins.len() - a)
    }

    /// Depth-first over the chains from `depth`.
    fn chain_dfs(&mut self, depth: usize, sh: &mut Shared) -> Result<(), Exhausted> {
        if depth == self.order.len() {
            self.leaf(sh);
            return Ok(());
        }
        let twin = depth > 0 && self.class_at[depth - 1] == self.class_at[depth];
        self.base[depth] = if twin { self.base[depth - 1] } else { self.state[depth].len() };
        self.pieces[depth].clear();
        let bins = self.state[depth].clone();
        self.place(depth, 0, 0, bins, twin, sh)
    }

    /// The pieces of chain `order[depth]` from position `pos` on, the bins it used so far
    /// being `path`; `eq`: its pieces so far equal its previous twin's (the twin rule:
    /// a twin's pieces are lexicographically at least the previous twin's).
    fn place(&mut self, depth: usize, pos: usize, path: u64, bins: Vec<Bin>, eq: bool, sh: &mut Shared) -> Result<(), Exhausted> {
        let chain = self.order[depth];
        let len = self.block.chains[chain].len();
        let (na, nc) = Self::counts(&bins);
        let nb = bins.len();
        for e in (pos + 1..=len).rev() {
            for b in 0..nb + 2 {
                let (new, acc) = match b.cmp(&nb) {
                    std::cmp::Ordering::Less => (false, bins[b].acc),
                    _ => (true, b == nb),
                };
                if new && (if acc { na >= self.k } else { nc >= self.l }) {
                    continue;
                }
                if !new && (path >> b & 1 == 1 || (b == 0 && pos != 0) || (b == 1 && e != len) || bins[b].after & path != 0) {
                    continue;
                }
                let code = if b < self.base[depth] { b as u8 } else { NEW_BIN };
                let mut still_eq = eq;
                if eq {
                    let k = self.pieces[depth].len();
                    let (pe, pc, _) = self.pieces[depth - 1][k];
                    match (e as u8, code).cmp(&(pe, pc)) {
                        std::cmp::Ordering::Less => continue,
                        std::cmp::Ordering::Greater => still_eq = false,
                        std::cmp::Ordering::Equal => {}
                    }
                }
                sh.nodes += 1;
                if sh.nodes.is_multiple_of(1024) {
                    sh.budget.check()?;
                }
                let bi = if new { nb } else { b };
                let Some(next) = self.put(depth, pos, e, bi, acc, &bins, sh.best) else {
                    continue;
                };
                self.pieces[depth].push((e as u8, code, bi as u8));
                if e == len {
                    self.complete(depth, next);
                    if self.room_left(depth + 1, sh.best) {
                        self.chain_dfs(depth + 1, sh)?;
                    }
                } else {
                    self.place(depth, e, path | 1u64 << bi, next, still_eq, sh)?;
                }
                self.pieces[depth].pop();
            }
        }
        Ok(())
    }

    /// The bins after chain `chain`'s piece `[pos, e)` goes to bin `bi` (a new one of kind
    /// `acc` when `bi` is past the end); `None` when a load reaches `best` or memory runs out.
    fn put(&self, depth: usize, pos: usize, e: usize, bi: usize, acc: bool, bins: &[Bin], best: f64) -> Option<Vec<Bin>> {
        let block = self.block;
        let chain = self.order[depth];
        let st = &self.stats[self.class_at[depth]];
        let groups = &block.chains[chain][pos..e];
        let mut next = bins.to_vec();
        if bi == next.len() {
            next.push(Bin { acc, load: 0.0, mem: 0.0, after: 0, touched: 0 });
        }
        if acc {
            if groups.iter().any(|&g| !block.supported[g]) {
                return None;
            }
            let mut load: f64 = groups.iter().map(|&g| block.fpga[g]).sum();
            if pos > 0 {
                load += st.cut[pos - 1];
            }
            if e < st.len {
                load += st.cut[e - 1];
            } else if bi != 1 {
                load += st.sink;
            }
            next[bi].load += load;
            next[bi].mem += groups.iter().map(|&g| block.size[g]).sum::<f64>();
            if next[bi].mem > block.memory {
                return None;
            }
        } else {
            next[bi].load += groups.iter().map(|&g| block.cpu[g]).sum::<f64>();
        }
        if e == st.len && bi != 1 && next[1].acc {
            next[1].load += st.sink;
        }
        let heads = block.heads_in[chain];
        if pos == 0 && bi != 0 && heads != 0 {
            let cost = |m: u64| -> f64 { (0..64).filter(|&x| m >> x & 1 == 1).map(|x| block.source_cost[x]).sum() };
            let (fresh, fresh0) = (heads & !next[bi].touched, heads & !next[0].touched);
            next[bi].touched |= heads;
            next[0].touched |= heads;
            if next[bi].acc {
                next[bi].load += cost(fresh);
            }
            if next[0].acc {
                next[0].load += cost(fresh0);
            }
        }
        [bi, 0, 1].iter().all(|&x| next[x].load < best).then_some(next)
    }

    /// Chain `order[depth]` placed (its pieces in `pieces[depth]`): the order its bins
    /// now keep, closed transitively, into `state[depth + 1]`.
    fn complete(&mut self, depth: usize, mut bins: Vec<Bin>) {
        let path: Vec<usize> = self.pieces[depth].iter().map(|p| p.2 as usize).collect();
        for w in path.windows(2).rev() {
            let (u, v) = (w[0], w[1]);
            if u == 0 || v == 1 {
                continue;
            }
            let reach = 1u64 << v | bins[v].after;
            for x in 2..bins.len() {
                if x == u || bins[x].after >> u & 1 == 1 {
                    bins[x].after |= reach;
                }
            }
        }
        self.state[depth + 1] = bins;
    }
}

impl Bins<'_> {
    /// Whether the chains from `depth` on may still fit below `best` (module docs, "Bins"):
    /// volume on the accelerators less what the CPUs may take, the sink-room knapsack, the
    /// unsupported groups' CPU time.
    fn room_left(&self, depth: usize, best: f64) -> bool {
        if !best.is_finite() {
            return true;
        }
        let bins = &self.state[depth];
        let (na, nc) = Self::counts(bins);
        let eps = SLACK * best * (bins.len() + 2) as f64;
        let room = |acc: bool, free: usize| -> f64 {
            bins.iter().filter(|b| b.acc == acc).map(|b| best - b.load).sum::<f64>() + free as f64 * best
        };
        let (room_acc, room_cpu) = (room(true, self.k - na), room(false, self.l - nc));
        let j_acc = bins[1].acc;
        let mut cap = best - bins[1].load;
        let (mut need, mut forced_cpu, mut free, mut ratio) = (0.0, 0.0, 0.0, 0.0f64);
        let mut items: Vec<(f64, f64, f64)> = Vec::new();
        let mut at = depth;
        while at < self.order.len() {
            let class = self.class_at[at];
            let mut m = 0.0;
            while at < self.order.len() && self.class_at[at] == class {
                m += 1.0;
                at += 1;
            }
            let st = &self.stats[class];
            forced_cpu += m * st.forced_cpu;
            free += m * st.free_fpga;
            ratio = ratio.max(st.ratio);
            if !j_acc {
                need += m * st.work;
                continue;
            }
            // Cut across an accelerator pair (2×) unless a CPU may take a side.
            let cf = if self.l > 0 && st.min_cpu < best { 1.0 } else { 2.0 };
            let (mut v_end, mut u_end) = (f64::INFINITY, f64::INFINITY);
            for i in 0..st.len {
                let inward = if i > 0 { st.cut[i - 1] } else { 0.0 };
                let u = st.suffix[i] + inward;
                if u < cap + eps {
                    v_end = v_end.min(st.work + cf * inward);
                    u_end = u_end.min(u);
                }
            }
            let (v_not, u_not) = (st.work + cf * st.sink, st.sink);
            let (ds, dw) = (v_not - v_end, u_end - u_not);
            let (v, u) = if ds >= 0.0 && dw <= 0.0 {
                (v_end, u_end)
            } else if v_end.is_infinite() || (ds <= 0.0 && dw >= 0.0) {
                (v_not, u_not)
            } else if ds > 0.0 && dw > 0.0 {
                items.push((dw, ds, m));
                (v_not, u_not)
            } else {
                (v_end.min(v_not), u_end.min(u_not))
            };
            need += m * v;
            cap -= m * u;
        }
        if forced_cpu > room_cpu + eps || (j_acc && cap < -eps) {
            return false;
        }
        items.sort_by(|a, b| (b.1 / b.0).total_cmp(&(a.1 / a.0)));
        for (dw, ds, m) in items {
            if cap <= 0.0 {
                break;
            }
            let take = (cap / dw).min(m);
            need -= take * ds;
            cap -= take * dw;
        }
        let relief = if room_cpu > 0.0 { free + ratio * room_cpu } else { 0.0 };
        need - relief <= room_acc + eps
    }

    /// A complete plan below the incumbent becomes it: the bins in an order they keep
    /// (`S` first, `J` last, the others by decreasing number of bins that must follow).
    fn leaf(&self, sh: &mut Shared) {
        let depth = self.order.len();
        let bins = &self.state[depth];
        let value = bins.iter().fold(0.0f64, |m, b| m.max(b.load));
        if value >= sh.best {
            return;
        }
        let mut order: Vec<usize> = (2..bins.len()).collect();
        order.sort_by_key(|&b| std::cmp::Reverse(bins[b].after.count_ones()));
        order.insert(0, 0);
        order.push(1);
        let (mut acc, mut cpu) = (0, 0);
        let mut device = vec![Device::Cpu(0); bins.len()];
        for &b in &order {
            device[b] = if bins[b].acc {
                acc += 1;
                Device::Accelerator(acc - 1)
            } else {
                cpu += 1;
                Device::Cpu(cpu - 1)
            };
        }
        let mut of_group = vec![device[0]; self.block.fpga.len()];
        of_group[self.block.sink] = device[1];
        for (d, &chain) in self.order.iter().enumerate() {
            let mut pos = 0;
            for &(e, _, b) in &self.pieces[d] {
                for &g in &self.block.chains[chain][pos..e as usize] {
                    of_group[g] = device[b as usize];
                }
                pos = e as usize;
            }
        }
        sh.best = value;
        sh.plan = Some(of_group);
    }
}

/// The bins search over every kind of `s`'s and `j`'s device; `None` when a chain's
/// hyperedges are not plain cuts.
fn solve_bins(block: &Block, classes: &[Vec<usize>], k: usize, l: usize, sh: &mut Shared) -> Option<Result<(), Exhausted>> {
    let mut stats = Vec::new();
    for class in classes {
        let (cut, sink) = cut_costs(block, class[0])?;
        stats.push(ClassStat::new(block, class[0], cut, sink));
    }
    for (s_acc, j_acc) in [(true, true), (false, true), (true, false), (false, false)] {
        let Some(mut bins) = Bins::new(block, classes, stats.clone(), k, l, s_acc, j_acc) else {
            continue;
        };
        if bins.state[0].iter().all(|b| b.load < sh.best) && bins.room_left(0, sh.best) {
            if let Err(e) = bins.chain_dfs(0, sh) {
                return Some(Err(e));
            }
        }
    }
    Some(Ok(()))
}

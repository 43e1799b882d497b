//! The contiguous max-load optimum of a *fork-join block*: a group DAG made of one source
//! `s`, one sink `j` and parallel chains `C_1 … C_B` from successors of `s` to
//! predecessors of `j` (every other group has one predecessor and one successor), by a
//! depth-first branch and bound over the chains that creates devices on demand.
//!
//! # Plans as pieces
//!
//! A contiguous split is a chain of ideals `∅ ⊂ I_1 ⊂ … ⊂ I_r = V` (the plan space of the
//! DP and of [`super::split_search`]); here an ideal is `s` (or nothing), a prefix of each
//! chain, and `j` once every chain is complete. So each device's stage holds one segment
//! of each chain (possibly empty): a plan cuts every chain into *pieces* on distinct
//! devices, and the devices carry a precedence — `u` before `v` when some chain has a
//! piece on `u` followed by its next piece on `v`; `s`'s device first, `j`'s last. Any
//! order of the devices that keeps this precedence (acyclic) gives the same loads, so a
//! plan is a set of devices with contents, not a sequence: the search never fixes the
//! devices' positions (fixing them repeats each plan once per order of its stages).
//! `s` and `j` on one device put everything there (a one-device plan, scored apart).
//!
//! Loads (MODEL.md): an accelerator pays `Σ fpga` of its groups and `c(T)` for every
//! hyperedge `T` it cuts; a CPU pays `Σ cpu`. The block's hyperedges are of three kinds
//! (others are declined): `{g_i, g_{i+1}}` inside a chain (cost `cut_i`, paid by both
//! sides' accelerators when pieces end there), `{last, j}` (cost `sink`, paid when the
//! chain's last piece is not on `j`'s device: by that device and by `j`'s), and those
//! produced by `s` (`T ⊆ {s} ∪ heads`): a device other than `s`'s pays `c(T)` once when it
//! holds a head of `T`, and `s`'s device once when a head of `T` is elsewhere.
//!
//! # Search
//!
//! Bin 0 holds `s`, bin 1 holds `j` (each on an accelerator or a CPU, four roots). Chains
//! in order (twin classes together, larger work first); a chain's pieces are chosen one by
//! one: its end and its device — an existing one it has not used, not required to precede
//! one it has used (the precedence is kept transitively closed as bit masks), bin 0 only
//! for its first piece and bin 1 only for its last — or a new accelerator (CPU) while
//! fewer than `k` (`ℓ`) exist. New devices are numbered in creation order, so no two
//! branches build the same plan up to renaming. Every load stays below the incumbent `G`
//! and every accelerator within memory.
//!
//! Twin chains (equal costs and sizes position by position, equal cuts and sink cost,
//! heads in the same source hyperedges) are interchangeable: a twin's pieces, as the
//! sequence of (end, device) with the devices created since the class's first chain
//! coded as one symbol ∞, are lexicographically at least the previous twin's. (The codes
//! do not change when twins exchange their pieces, so sorting the twins by them gives an
//! equal plan that obeys the rule.)
//!
//! # Bound
//!
//! After each chain, for the chains left (`m` of each class), against the loads `L`:
//!
//! - *volume*: every accelerator ends below `G`, so the accelerator time of the rest is
//!   below `Σ_{acc} (G − L) + (k − #acc)·G`; the CPUs take at most `free + ρ·R_cpu` of it
//!   (`free`: the fpga time of groups without CPU time, `ρ`: the largest fpga/cpu,
//!   `R_cpu` the CPUs' room likewise); the unsupported groups' CPU time is below `R_cpu`;
//! - *sink room* (with `j` on an accelerator): a chain whose last piece is on `j`'s device
//!   puts a suffix there (at least `U_end = min_i (Σ_{p ≥ i} fpga + cut_{i−1})` over the
//!   suffixes that fit `G − L_j`) and costs at least `V_end = work + f·cut_{i−1}`; one
//!   whose last piece is elsewhere costs at least `V_not = work + f·sink` and puts `sink`
//!   on `j`'s device (`f = 2`, both ends on accelerators, unless a CPU could take a group
//!   of the chain: `f = 1`). `j`'s device ends below `G`, so the least total is at least
//!   the fractional knapsack relaxation (savings `V_not − V_end`, weights `U_end − U_not`,
//!   capacity `G − L_j − Σ U_not`); a choice dominated in both is dropped, and a pair that
//!   trades the other way is relaxed to `(min V, min U)`.
//!
//! Each is a relaxation of the plans below `G` from the node, so a pruned node holds none;
//! when the search finishes, no plan is below the final `G`: its plan is optimal.
//!
//! # Numerics
//!
//! The bounds compare with a relative slack of [`SLACK`] in the search's favour (they prune
//! less); loads compare strictly with `G` like the split search's, whose
//! `G · (1 − 1e-12)` the caller reports.
//!
//! Complexity: exponential in the worst case (the problem is NP-hard: chains of one group
//! are bin packing); each node costs O(d + B·|C|) for `d ≤ k + ℓ` devices and the chains
//! left; memory O(B·(d + |C|)).

use rustc_hash::FxHashMap;

use super::budget::{Budget, Exhausted};
use crate::model::contraction::Contraction;
use crate::model::{Device, Placement, Workload};

/// The most devices (`k + ℓ`, after capping each at the group count) the search takes
/// (one bit per device in the precedence masks).
pub const MAX_DEVICES: usize = 64;

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
    /// Per chain: `cut[i]`, the hyperedges of its group `i` to group `i + 1` (paid across
    /// that boundary), and `sink`, those of its last group to `j`.
    cut: Vec<Vec<f64>>,
    sink_cost: Vec<f64>,
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
        if chains.len() > 64
            || chains.iter().any(|c| c.len() >= u8::MAX as usize)
            || chains.iter().map(Vec::len).sum::<usize>() + 2 != n
        {
            return None;
        }
        let g = &c.groups;
        let mut block = Block {
            source,
            sink,
            cut: chains.iter().map(|c| vec![0.0; c.len() - 1]).collect(),
            sink_cost: vec![0.0; chains.len()],
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
        let (chain, p) = chain_of[*members.first()?];
        let last = self.chains[chain].len() - 1;
        match (members.as_slice(), set.contains(&self.sink)) {
            (&[_], true) if p == last => self.sink_cost[chain] += cost,
            (&[_, h], false) if chain_of[h] == (chain, p + 1) => self.cut[chain][p] += cost,
            _ => return None,
        }
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
            sig.extend(self.cut[ci].iter().map(|c| c.to_bits()));
            sig.push(self.sink_cost[ci].to_bits());
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

/// What the searches from the four roots share: the incumbent and its plan.
struct Shared<'a> {
    budget: &'a Budget,
    best: f64,
    /// The incumbent's device per group.
    plan: Option<Vec<Device>>,
    nodes: u64,
}

/// Whether the search takes `w`: a fork-join block (module docs) without a cluster.
pub fn fits(w: &Workload) -> bool {
    w.cluster().is_none() && Block::new(w).is_some()
}

/// The contiguous max-load optimum of `w` below `start` (∞: any) within `budget`, when
/// `w` is a fork-join block on at most [`MAX_DEVICES`] devices (else `None`).
pub fn solve(w: &Workload, start: f64, budget: &Budget) -> Option<Found> {
    if w.cluster().is_some() {
        return None;
    }
    let block = Block::new(w)?;
    let classes = block.classes();
    let n = block.fpga.len();
    let d = w.devices();
    let (k, l) = (d.accelerators.min(n), d.cpus.min(n));
    if k + l > MAX_DEVICES {
        return None;
    }
    let mut sh = Shared {
        budget,
        best: start,
        plan: None,
        nodes: 0,
    };
    single_stage(&block, k, l, &mut sh);
    let finished = solve_bins(&block, &classes, k, l, &mut sh);
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
    fn new(block: &Block, ci: usize) -> ClassStat {
        let chain = &block.chains[ci];
        let mut suffix = vec![0.0; chain.len() + 1];
        for (p, &g) in chain.iter().enumerate().rev() {
            suffix[p] = if block.supported[g] {
                suffix[p + 1] + block.fpga[g]
            } else {
                f64::INFINITY
            };
        }
        let sup = || chain.iter().copied().filter(|&g| block.supported[g]);
        ClassStat {
            len: chain.len(),
            work: sup().map(|g| block.fpga[g]).sum(),
            suffix,
            cut: block.cut[ci].clone(),
            sink: block.sink_cost[ci],
            forced_cpu: chain
                .iter()
                .filter(|&&g| !block.supported[g])
                .map(|&g| block.cpu[g])
                .sum(),
            free_fpga: sup()
                .filter(|&g| block.cpu[g] <= 0.0)
                .map(|g| block.fpga[g])
                .sum(),
            ratio: sup()
                .filter(|&g| block.cpu[g] > 0.0)
                .map(|g| block.fpga[g] / block.cpu[g])
                .fold(0.0, f64::max),
            min_cpu: chain
                .iter()
                .map(|&g| block.cpu[g])
                .fold(f64::INFINITY, f64::min),
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
    fn new(
        block: &'a Block,
        classes: &[Vec<usize>],
        stats: Vec<ClassStat>,
        k: usize,
        l: usize,
        s_acc: bool,
        j_acc: bool,
    ) -> Option<Bins<'a>> {
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
        self.base[depth] = if twin {
            self.base[depth - 1]
        } else {
            self.state[depth].len()
        };
        self.pieces[depth].clear();
        let bins = self.state[depth].clone();
        self.place(depth, 0, 0, bins, twin, sh)
    }

    /// The pieces of chain `order[depth]` from position `pos` on, the bins it used so far
    /// being `path`; `eq`: its pieces so far equal its previous twin's (the twin rule:
    /// a twin's pieces are lexicographically at least the previous twin's).
    fn place(
        &mut self,
        depth: usize,
        pos: usize,
        path: u64,
        bins: Vec<Bin>,
        eq: bool,
        sh: &mut Shared,
    ) -> Result<(), Exhausted> {
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
                if !new
                    && (path >> b & 1 == 1
                        || (b == 0 && pos != 0)
                        || (b == 1 && e != len)
                        || bins[b].after & path != 0)
                {
                    continue;
                }
                let code = if b < self.base[depth] {
                    b as u8
                } else {
                    NEW_BIN
                };
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
                let Some(next) = self.put(depth, pos..e, (bi, acc), &bins, sh.best) else {
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

    /// The bins after the piece `[pos, e)` of chain `order[depth]` goes to bin `bi` of
    /// `to = (bi, acc)` (a new one, an accelerator when `acc`, when `bi` is past the end);
    /// `None` when a load reaches `best` or memory runs out.
    fn put(
        &self,
        depth: usize,
        piece: std::ops::Range<usize>,
        to: (usize, bool),
        bins: &[Bin],
        best: f64,
    ) -> Option<Vec<Bin>> {
        let (pos, e, (bi, acc)) = (piece.start, piece.end, to);
        let block = self.block;
        let chain = self.order[depth];
        let st = &self.stats[self.class_at[depth]];
        let groups = &block.chains[chain][pos..e];
        let mut next = bins.to_vec();
        if bi == next.len() {
            next.push(Bin {
                acc,
                load: 0.0,
                mem: 0.0,
                after: 0,
                touched: 0,
            });
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
            let cost = |m: u64| -> f64 {
                (0..64)
                    .filter(|&x| m >> x & 1 == 1)
                    .map(|x| block.source_cost[x])
                    .sum()
            };
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
        [bi, 0, 1]
            .iter()
            .all(|&x| next[x].load < best)
            .then_some(next)
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
            for (x, bin) in bins.iter_mut().enumerate().skip(2) {
                if x == u || bin.after >> u & 1 == 1 {
                    bin.after |= reach;
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
            bins.iter()
                .filter(|b| b.acc == acc)
                .map(|b| best - b.load)
                .sum::<f64>()
                + free as f64 * best
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
            let cf = if self.l > 0 && st.min_cpu < best {
                1.0
            } else {
                2.0
            };
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
        let relief = if room_cpu > 0.0 {
            free + ratio * room_cpu
        } else {
            0.0
        };
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

/// The bins search over every kind of `s`'s and `j`'s device (module docs, "Search").
fn solve_bins(
    block: &Block,
    classes: &[Vec<usize>],
    k: usize,
    l: usize,
    sh: &mut Shared,
) -> Result<(), Exhausted> {
    let stats: Vec<ClassStat> = classes
        .iter()
        .map(|c| ClassStat::new(block, c[0]))
        .collect();
    for (s_acc, j_acc) in [(true, true), (false, true), (true, false), (false, false)] {
        let Some(mut bins) = Bins::new(block, classes, stats.clone(), k, l, s_acc, j_acc) else {
            continue;
        };
        if bins.state[0].iter().all(|b| b.load < sh.best) && bins.room_left(0, sh.best) {
            bins.chain_dfs(0, sh)?;
        }
    }
    Ok(())
}

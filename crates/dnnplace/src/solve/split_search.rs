//! The contiguous max-load optimum of small group DAGs (at most [`MAX_GROUPS`] groups) by
//! a depth-first branch and bound over stage splits, memoised on (ideal, devices left):
//! the DP recurrence of [`crate::solve::dp`] evaluated lazily, only where the incumbent
//! and a lower bound on the rest leave room. It proves wide graphs whose lattice has too
//! many ideal *pairs* for the DP (7 parallel 5-op chains: 6⁷ ideals, 21⁷ pairs).
//!
//! # Plan space and recurrence
//!
//! Exactly the DP's: a split is a chain of ideals `∅ = I_0 ⊂ … ⊂ I_r = V` of the group
//! DAG, each difference on one accelerator (load `acc(I \ J)` of MODEL.md, ∞ beyond the
//! memory or with an unsupported group) or one CPU core (`cpu(I \ J) = Σ cpuLatency`).
//! With `f(I, a, c)` the least max-load of placing `V \ I` on at most `a` accelerators and
//! `c` CPUs:
//!
//! ```text
//! f(V, a, c) = 0
//! f(I, a, c) = min( min_{I ⊊ I'} max(acc(I' \ I), f(I', a−1, c))   (a > 0),
//!                   min_{I ⊊ I'} max(cpu(I' \ I), f(I', a, c−1))   (c > 0) )
//! ```
//!
//! and the optimum is `f(∅, k, ℓ)`.
//!
//! # Search
//!
//! `search(s, t)` returns `f(s)` when `f(s) < t` and otherwise proves `f(s) ≥ t`. It lists
//! the stages `I' ⊋ I` whose weight (fpga or cpu time, monotone in `I'`) stays below `t`
//! by the canonical-extension tree (a child adds one available group `g` and may later
//! add only available groups after `g` or groups that `g` enabled: every ideal once, in
//! O(degree) per ideal), drops those whose stage load or remainder bound (below) is
//! `≥ t`, and visits the rest in increasing order of `max(load, bound)`, lowering `t` to
//! the best value found. The child's threshold is the parent's current `t` (with `load <
//! t`, `max(load, f) < t ⇔ f < t`), further lowered to the global incumbent `G`, so the
//! result is exact whenever it is below the final threshold. Memo entries: `Exact(f, best
//! child)` or `AtLeast(t)`; an entry `AtLeast(x)` answers every later visit with `t ≤ x`.
//! Every completion found deep in the tree is combined with the stages above it, and a
//! whole plan below `G` becomes the incumbent at once (so a stopped search keeps its best
//! plan). When the root returns, no split is below `G` (the incumbent's value, or the
//! starting threshold if none was found): the incumbent is optimal.
//!
//! # Rounds
//!
//! A search from a poor incumbent (or none) lists many stages, and a stopped one proves
//! nothing. So the root is searched with thresholds `t_1 < t_2 < …`, from the root's
//! remainder bound up by [`ROUND_GROWTH`] per round, the last one the incumbent: a round
//! that returns a value has found the optimum (it is exact below its threshold); one that
//! returns none proves `f ≥ t_i`, the bound a stopped search reports. The memo is kept
//! across rounds (its `AtLeast` entries answer the states already closed at `t_i`).
//!
//! # Symmetry
//!
//! Twin chains ([`Twins`]): maximal chains of the group DAG with equal sums, ends and
//! hyperedges, such that exchanging any two of a class is an automorphism of the instance.
//! States are memoised on a representative (each class's chain progress sorted in
//! decreasing order). Stages are listed up to the stabiliser of the state: chains of one
//! class with equal progress in `I` (a bucket) may be permuted without moving `I`, and
//! such a permutation maps a stage to one of equal load, memory and remainder bound and
//! its target to an ideal of the same representative; so a stage `I'` is listed only when
//! the progress in `I'` is non-increasing along each bucket (one per orbit). The
//! canonical-extension tree adds a chain's groups in order and, with chains numbered
//! apart, once it adds a group of a later chain of a bucket the earlier chain cannot grow
//! below; a subtree where a later chain has passed an earlier one that cannot grow holds
//! no listed stage and is cut.
//!
//! # Remainder bound
//!
//! For `R = V \ I` on `a` accelerators and `c` CPUs with every stage below `t` (the
//! bound need only hold for completions below `t`): let `U` be the unsupported groups of
//! `R` (they must go to CPUs, `cpu(U) < c·t`). A hyperedge `T` cut by `I` whose part in
//! `R` cannot fit on the CPUs (`cpu(T ∩ R) ≥ c·t`) has a member on some accelerator stage
//! `X ⊆ R`, and `X` cuts `T`. The CPUs absorb at most the fractional knapsack of the
//! accelerator time `fpga(v)` (weight `cpu(v)`, capacity `c·t − cpu(U)`). So
//!
//! ```text
//! a · f ≥ fpga(R \ U) + Σ_{T cut by I, cpu(T ∩ R) ≥ c·t} c(T) − knapsack,   c · f ≥ cpu(U),
//! f ≥ max_{g ∈ R} min(acc({g}) alone: fpga(g), cpu(g) when c > 0),
//! ```
//!
//! (with `a = 0`, `c · f ≥ cpu(R)`). Each is a relaxation of the recurrence's plans.
//!
//! Stage communication: an accelerator stage `X = I'' \ I'` whose first groups (minimal
//! in `X`) are not all sources of the DAG has one, `x`, with a predecessor `p ∉ X`, and
//! pays the hyperedges `p` produces that hold `x` (at least `c_in`, the least such sum
//! over the arcs); one whose last groups are not all sinks has one, `y`, with a successor
//! outside `X`, and pays every hyperedge `y` produces (at least `c_out`, the least over
//! the groups with successors); the two are distinct (different producers). At most
//! `src(R)` stages hold a source and `snk(R)` a sink, so `m` accelerator stages carry
//! `work + c_in·(m − src)⁺ + c_out·(m − snk)⁺` (`work`: the accelerator time above, less
//! the knapsack, without the cut hyperedges), and
//!
//! ```text
//! f ≥ min_{1 ≤ m ≤ a} (work + c_in·(m − src(R))⁺ + c_out·(m − snk(R))⁺) / m.
//! ```
//!
//! # Numerics
//!
//! Loads are summed in floating point in group order (fpga prefix weights along the
//! search path), within `n·u` relative of the scorer's value for `n ≤ 128` groups; the
//! proven bound is therefore reported as `G · (1 − 1e-12)`.
//!
//! Complexity: O(Σ_s E_s · (n + H)) for the expanded states `s`, `E_s` stages listed from
//! `s` and `H` hyperedges; memory O(states) ([`ENTRY_BYTES`] each, reserved against the
//! [`Budget`] in blocks).

use rustc_hash::FxHashMap;

use super::budget::{Budget, Exhausted};
use crate::model::contraction::Contraction;
use crate::model::{Device, Placement, Workload};

/// The most groups the search takes (one `u128` per set).
pub const MAX_GROUPS: usize = 128;

/// Bytes per memo entry counted against the memory budget (key, value and the hash
/// table's overhead).
pub const ENTRY_BYTES: f64 = 96.0;

/// The relative slack between the search's sums and the scorer's (module docs).
pub const SUM_SLACK: f64 = 1e-12;

/// Each round's threshold over the last one's (module docs, "Rounds").
pub const ROUND_GROWTH: f64 = 1.03;

type Set = u128;

/// What a finished or stopped search found.
#[derive(Clone, Debug)]
pub struct Found {
    /// The best plan found below the starting threshold (`None`: none found).
    pub placement: Option<Placement>,
    /// Its value by the search's sums (∞ without a plan).
    pub value: f64,
    /// `Ok`: the search finished, so no split has a value below `min(value, start)`.
    /// `Err`: why it stopped.
    pub finished: Result<(), Exhausted>,
    /// A proven lower bound from the rounds that finished without a plan (0: none).
    pub bound: f64,
    /// States expanded and stages evaluated.
    pub states: u64,
    pub stages: u64,
    /// Every improvement of the incumbent: (seconds, value).
    pub trace: Vec<(f64, f64)>,
    /// The sizes of the classes of interchangeable chains the search folded.
    pub twin_classes: Vec<usize>,
}

/// The group DAG with its sums as bitsets and plain vectors (module docs).
struct Instance {
    n: usize,
    all: Set,
    pred: Vec<Set>,
    succ: Vec<Set>,
    fpga: Vec<f64>,
    cpu: Vec<f64>,
    size: Vec<f64>,
    supported: Set,
    /// Hyperedges as (groups, cost).
    edges: Vec<(Set, f64)>,
    memory_bytes: f64,
    /// Supported groups with `cpu > 0` by `fpga / cpu`, largest first (the knapsack).
    by_ratio: Vec<usize>,
    /// Supported groups without CPU time (a CPU takes them for free).
    free_on_cpu: Set,
    /// The least CPU time of each hyperedge's groups.
    edge_min_cpu: Vec<f64>,
    group_of: Vec<usize>,
    twins: Twins,
    /// Groups without predecessors (sources) and without successors (sinks).
    sources: Set,
    sinks: Set,
    /// The least cost a stage pays through one of its first groups' inputs (over the arcs
    /// `p → x`: the hyperedges `p` produces that hold `x`) and through one of its last
    /// groups' outputs (over the groups with successors: the hyperedges they produce).
    c_in: f64,
    c_out: f64,
}

fn bits(mut s: Set) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (s != 0).then(|| {
            let g = s.trailing_zeros() as usize;
            s &= s - 1;
            g
        })
    })
}

impl Instance {
    fn new(w: &Workload) -> Option<Instance> {
        let c = Contraction::new(w);
        let n = c.len();
        if n > MAX_GROUPS || n == 0 {
            return None;
        }
        let all = if n == 128 { !0 } else { (1u128 << n) - 1 };
        let mask = |v: &[usize]| v.iter().fold(0u128, |m, &g| m | 1u128 << g);
        let pred: Vec<Set> = c.pred.iter().map(|p| mask(p)).collect();
        let succ: Vec<Set> = c.succ.iter().map(|s| mask(s)).collect();
        let g = &c.groups;
        let supported = (0..n)
            .filter(|&i| g[i].supported_on_accelerator)
            .fold(0u128, |m, i| m | 1u128 << i);
        let edges: Vec<(Set, f64)> = c
            .communication_hyperedges(w)
            .into_iter()
            .map(|(t, cost)| (mask(&t), cost))
            .collect();
        let edge_min_cpu = edges
            .iter()
            .map(|&(t, _)| {
                bits(t)
                    .map(|x| g[x].cpu_latency)
                    .fold(f64::INFINITY, f64::min)
            })
            .collect();
        let mut by_ratio: Vec<usize> = (0..n)
            .filter(|&i| g[i].supported_on_accelerator && g[i].cpu_latency > 0.0)
            .collect();
        by_ratio.sort_by(|&x, &y| {
            let (rx, ry) = (
                g[x].fpga_latency / g[x].cpu_latency,
                g[y].fpga_latency / g[y].cpu_latency,
            );
            ry.total_cmp(&rx)
        });
        let mut inst = Instance {
            n,
            all,
            pred,
            succ,
            fpga: g.iter().map(|x| x.fpga_latency).collect(),
            cpu: g.iter().map(|x| x.cpu_latency).collect(),
            size: g.iter().map(|x| x.size_bytes).collect(),
            supported,
            edges,
            memory_bytes: w.devices().memory_per_accelerator_bytes,
            free_on_cpu: (0..n)
                .filter(|&i| g[i].supported_on_accelerator && g[i].cpu_latency <= 0.0)
                .fold(0u128, |m, i| m | 1u128 << i),
            edge_min_cpu,
            by_ratio,
            twins: Twins::default(),
            group_of: c.group_of,
            sources: 0,
            sinks: 0,
            c_in: 0.0,
            c_out: 0.0,
        };
        inst.sources = (0..n)
            .filter(|&g| inst.pred[g] == 0)
            .fold(0, |m, g| m | 1u128 << g);
        inst.sinks = (0..n)
            .filter(|&g| inst.succ[g] == 0)
            .fold(0, |m, g| m | 1u128 << g);
        (inst.c_in, inst.c_out) = inst.stage_comm_costs();
        inst.twins = Twins::find(&inst);
        Some(inst)
    }

    /// `(c_in, c_out)` of [`Instance`]: a hyperedge `T(u) = {g(u)} ∪ {g(x) : u → x}` is
    /// produced by its one member without a predecessor in it (`g(u)`: every other member
    /// follows it; equal sets of two producers would make a cycle).
    fn stage_comm_costs(&self) -> (f64, f64) {
        let producer = |t: Set| bits(t).find(|&g| self.pred[g] & t == 0);
        let mut out_cost = vec![0.0; self.n];
        let mut c_in = f64::INFINITY;
        let mut arc_cost: FxHashMap<(usize, usize), f64> = FxHashMap::default();
        for &(t, cost) in &self.edges {
            let Some(p) = producer(t) else { continue };
            out_cost[p] += cost;
            for x in bits(t & !(1u128 << p)) {
                *arc_cost.entry((p, x)).or_default() += cost;
            }
        }
        for p in 0..self.n {
            for x in bits(self.succ[p]) {
                c_in = c_in.min(arc_cost.get(&(p, x)).copied().unwrap_or(0.0));
            }
        }
        let c_out = (0..self.n)
            .filter(|&p| self.succ[p] != 0)
            .map(|p| out_cost[p])
            .fold(f64::INFINITY, f64::min);
        let finite = |x: f64| if x.is_finite() { x.max(0.0) } else { 0.0 };
        (finite(c_in), finite(c_out))
    }

    fn sum(v: &[f64], s: Set) -> f64 {
        bits(s).map(|g| v[g]).sum()
    }

    /// Groups outside `i` whose predecessors are all in `i`.
    fn available(&self, i: Set) -> Set {
        bits(self.all & !i)
            .filter(|&g| self.pred[g] & !i == 0)
            .fold(0, |m, g| m | 1u128 << g)
    }

    /// Communication paid by an accelerator holding `x`.
    fn comm(&self, x: Set) -> f64 {
        self.edges
            .iter()
            .filter(|(t, _)| t & x != 0 && t & !x != 0)
            .map(|(_, c)| c)
            .sum()
    }

    /// The remainder bound of the module docs for `V \ i` on `a` accelerators and `c`
    /// CPUs, valid for completions below `t` (∞ when none can exist); without the
    /// single-group term (`single`).
    fn remainder_bound(&self, i: Set, a: usize, c: usize, t: f64) -> f64 {
        let r = self.all & !i;
        if r == 0 {
            return 0.0;
        }
        let unsupported = r & !self.supported;
        if c == 0 && (unsupported != 0 || a == 0) {
            return f64::INFINITY;
        }
        if a == 0 {
            return Self::sum(&self.cpu, r) / c as f64;
        }
        let cap_total = c as f64 * t;
        let (acc, mut bound, mut cap) = if unsupported == 0 {
            (r, 0.0, cap_total)
        } else {
            let forced = Self::sum(&self.cpu, unsupported);
            (r & self.supported, forced / c as f64, cap_total - forced)
        };
        let mut work = Self::sum(&self.fpga, acc);
        let mut cut = 0.0;
        for (&(e, cost), &min_cpu) in self.edges.iter().zip(&self.edge_min_cpu) {
            if e & i != 0
                && e & r != 0
                && (c == 0 || min_cpu >= cap_total || Self::sum(&self.cpu, e & r) >= cap_total)
            {
                cut += cost;
            }
        }
        if c > 0 {
            work -= Self::sum(&self.fpga, acc & self.free_on_cpu);
            for &g in &self.by_ratio {
                if cap <= 0.0 {
                    break;
                }
                if acc & (1u128 << g) == 0 {
                    continue;
                }
                let take = (cap / self.cpu[g]).min(1.0);
                work -= take * self.fpga[g];
                cap -= self.cpu[g];
            }
        }
        bound = f64::max(bound, (work + cut) / a as f64);
        f64::max(bound, self.stage_comm_bound(r, a, work))
    }

    /// The stage-communication term (module docs): `m` accelerator stages carrying at
    /// least `work` pay at least `c_in` each but for the stages holding a source of the
    /// DAG, and `c_out` each but for those holding a sink; the least average load over
    /// `1 ≤ m ≤ a`.
    fn stage_comm_bound(&self, r: Set, a: usize, work: f64) -> f64 {
        if work <= 0.0 || (self.c_in <= 0.0 && self.c_out <= 0.0) {
            return 0.0;
        }
        let sources = (r & self.sources).count_ones() as usize;
        let sinks = (r & self.sinks).count_ones() as usize;
        (1..=a)
            .map(|m| {
                let paid = self.c_in * m.saturating_sub(sources) as f64
                    + self.c_out * m.saturating_sub(sinks) as f64;
                (work + paid) / m as f64
            })
            .fold(f64::INFINITY, f64::min)
    }

    /// The single-group term of the remainder bound: every group of `V \ i` runs somewhere.
    fn single(&self, i: Set, c: usize) -> f64 {
        let r = self.all & !i;
        let mut single: f64 = 0.0;
        for g in bits(r) {
            let alone = if self.supported & (1u128 << g) == 0 {
                self.cpu[g]
            } else if c > 0 {
                self.fpga[g].min(self.cpu[g])
            } else {
                self.fpga[g]
            };
            single = single.max(alone);
        }
        single
    }
}

/// Interchangeable chains (module docs, "Symmetry"): classes of maximal chains of the
/// group DAG that any permutation maps onto each other as an automorphism of the whole
/// instance (arcs, sums, hyperedges with their costs).
#[derive(Clone, Debug, Default)]
struct Twins {
    /// Each class: its chains, each as its groups in order.
    classes: Vec<Vec<Vec<usize>>>,
    /// `prefix[class][chain][p]`: the first `p` groups of the chain.
    prefix: Vec<Vec<Vec<Set>>>,
    /// `whole[class][chain]`: all the chain's groups.
    whole: Vec<Vec<Set>>,
    /// Every group of every class.
    all: Set,
}

impl Twins {
    fn find(inst: &Instance) -> Twins {
        let n = inst.n;
        let single = |s: Set| s.count_ones() == 1;
        // Maximal chains: g continues its predecessor p when pred(g) = {p}, succ(p) = {g}.
        let continues = |g: usize| {
            single(inst.pred[g]) && inst.succ[inst.pred[g].trailing_zeros() as usize] == 1u128 << g
        };
        let mut chains: Vec<Vec<usize>> = Vec::new();
        for g in (0..n).filter(|&g| !continues(g)) {
            let mut chain = vec![g];
            let mut at = g;
            while single(inst.succ[at]) {
                let next = inst.succ[at].trailing_zeros() as usize;
                if !continues(next) {
                    break;
                }
                chain.push(next);
                at = next;
            }
            chains.push(chain);
        }
        // Candidate classes: equal length, entry, exit and sums (bit for bit).
        let mut by_signature: FxHashMap<Vec<u64>, Vec<usize>> = FxHashMap::default();
        for (ci, chain) in chains.iter().enumerate() {
            let (first, last) = (chain[0], chain[chain.len() - 1]);
            let mut sig = vec![
                chain.len() as u64,
                inst.pred[first] as u64,
                (inst.pred[first] >> 64) as u64,
                inst.succ[last] as u64,
                (inst.succ[last] >> 64) as u64,
            ];
            for &g in chain {
                sig.extend([
                    inst.fpga[g].to_bits(),
                    inst.cpu[g].to_bits(),
                    inst.size[g].to_bits(),
                    (inst.supported >> g & 1) as u64,
                ]);
            }
            by_signature.entry(sig).or_default().push(ci);
        }
        let mut edges_sorted: Vec<(Set, u64)> =
            inst.edges.iter().map(|&(t, c)| (t, c.to_bits())).collect();
        edges_sorted.sort_unstable();
        let mut out = Twins::default();
        let mut candidates: Vec<Vec<usize>> =
            by_signature.into_values().filter(|c| c.len() > 1).collect();
        candidates.sort();
        for members in candidates {
            let first = &chains[members[0]];
            let class: Vec<Vec<usize>> = std::iter::once(first.clone())
                .chain(
                    members[1..]
                        .iter()
                        .map(|&m| chains[m].clone())
                        .filter(|other| swap_is_automorphism(inst, first, other, &edges_sorted)),
                )
                .collect();
            if class.len() < 2 {
                continue;
            }
            let prefix: Vec<Vec<Set>> = class
                .iter()
                .map(|ch| {
                    (0..=ch.len())
                        .map(|p| ch[..p].iter().fold(0u128, |m, &g| m | 1u128 << g))
                        .collect()
                })
                .collect();
            let whole: Vec<Set> = prefix.iter().map(|p| p[p.len() - 1]).collect();
            out.all |= whole.iter().fold(0, |m, w| m | w);
            out.classes.push(class);
            out.prefix.push(prefix);
            out.whole.push(whole);
        }
        out
    }

    /// The representative of `i` under the permutations of twin chains: in each class, the
    /// chains' progress sorted in decreasing order.
    fn canonical(&self, i: Set) -> Set {
        if self.classes.is_empty() {
            return i;
        }
        let mut out = i & !self.all;
        let mut progress: Vec<u32> = Vec::new();
        for (prefix, whole) in self.prefix.iter().zip(&self.whole) {
            progress.clear();
            progress.extend(whole.iter().map(|w| (i & w).count_ones()));
            progress.sort_unstable_by(|a, b| b.cmp(a));
            for (chain, &p) in progress.iter().enumerate() {
                out |= prefix[chain][p as usize];
            }
        }
        out
    }

    /// The stabiliser of `i` (module docs, "Symmetry") as order constraints: chains of one
    /// class with equal progress in `i` (a bucket, in chain order) may be permuted without
    /// moving `i`, so a stage from `i` is listed only when their progress is non-increasing
    /// along the bucket ([`Guards`]).
    fn guards(&self, i: Set, n: usize) -> Guards {
        let mut pairs = Vec::new();
        let mut earlier = vec![(0, 0); n];
        for (class, whole) in self.whole.iter().enumerate() {
            let mut by_progress: Vec<(u32, usize)> = whole
                .iter()
                .enumerate()
                .map(|(c, w)| ((i & w).count_ones(), c))
                .collect();
            by_progress.sort_unstable();
            for w in by_progress.windows(2).filter(|w| w[0].0 == w[1].0) {
                let (x, y) = (whole[w[0].1], whole[w[1].1]);
                pairs.push((x, y));
                for &g in &self.classes[class][w[1].1] {
                    earlier[g] = (x, y);
                }
            }
        }
        Guards { pairs, earlier }
    }

    /// The permutation of groups that [`canonical`](Self::canonical) applies to `i`
    /// (`sigma[g]`: where `g` goes), for `n` groups.
    fn sigma(&self, i: Set, n: usize) -> Vec<usize> {
        let mut sigma: Vec<usize> = (0..n).collect();
        for (class, whole) in self.classes.iter().zip(&self.whole) {
            let mut order: Vec<usize> = (0..class.len()).collect();
            order.sort_by_key(|&c| (std::cmp::Reverse((i & whole[c]).count_ones()), c));
            for (slot, &c) in order.iter().enumerate() {
                for (p, &g) in class[c].iter().enumerate() {
                    sigma[g] = class[slot][p];
                }
            }
        }
        sigma
    }
}

/// The order constraints of [`Twins::guards`] for one state.
struct Guards {
    /// (earlier chain, later chain) for the adjacent chains of each bucket, as group sets.
    pairs: Vec<(Set, Set)>,
    /// For each group of a later chain of a pair, that pair (else `(0, 0)`).
    earlier: Vec<(Set, Set)>,
}

/// Whether exchanging chains `x` and `y` (position by position) maps the arcs and the
/// hyperedges (`edges_sorted`: (set, cost bits), sorted) onto themselves.
fn swap_is_automorphism(
    inst: &Instance,
    x: &[usize],
    y: &[usize],
    edges_sorted: &[(Set, u64)],
) -> bool {
    let mut pi: Vec<usize> = (0..inst.n).collect();
    for (&a, &b) in x.iter().zip(y) {
        pi[a] = b;
        pi[b] = a;
    }
    let map = |s: Set| bits(s).fold(0u128, |m, g| m | 1u128 << pi[g]);
    let arcs_kept = (0..inst.n).all(|g| inst.pred[pi[g]] == map(inst.pred[g]));
    if !arcs_kept {
        return false;
    }
    let mut mapped: Vec<(Set, u64)> = edges_sorted.iter().map(|&(t, c)| (map(t), c)).collect();
    mapped.sort_unstable();
    mapped == edges_sorted
}

/// A stage candidate: the ideal it reaches (and that ideal's representative), on an
/// accelerator or a CPU, its load and `max(load, remainder bound)`.
#[derive(Clone, Copy)]
struct Candidate {
    to: Set,
    canonical: Set,
    accelerator: bool,
    load: f64,
    key: f64,
}

#[derive(Clone, Copy)]
enum Entry {
    /// `f` exactly, reached through the stage to `to` on an accelerator (or a CPU).
    Exact { f: f64, to: Set, accelerator: bool },
    /// `f ≥` this.
    AtLeast(f64),
}

type Key = (Set, u32);

struct Search<'a> {
    inst: &'a Instance,
    budget: &'a Budget,
    started: std::time::Instant,
    memo: FxHashMap<Key, Entry>,
    reserved_entries: usize,
    /// The incumbent's value and its stages (ideals reached, accelerator?).
    best: f64,
    best_stages: Option<Vec<(Set, bool)>>,
    trace: Vec<(f64, f64)>,
    /// The stages above the current state (the ideal each reaches from the state's
    /// representative, accelerator?, load).
    path: Vec<(Set, bool, f64)>,
    states: u64,
    stages: u64,
    /// Ideals visited by the listing (listed or not), for the budget checks.
    visits: u64,
}

fn key(i: Set, a: usize, c: usize) -> Key {
    (i, (a as u32) << 16 | c as u32)
}

impl Search<'_> {
    /// `f(i, a, c)` when below `t` (and below the incumbent), else `None` (module docs);
    /// `i` is a representative ([`Twins::canonical`]).
    fn search(&mut self, i: Set, a: usize, c: usize, t: f64) -> Result<Option<f64>, Exhausted> {
        if i == self.inst.all {
            self.offer(i, a, c, 0.0);
            return Ok(Some(0.0));
        }
        let mut t = t.min(self.best);
        let known = self.memo.get(&key(i, a, c)).copied();
        match known {
            Some(Entry::Exact { f, .. }) => {
                if f < t {
                    self.offer(i, a, c, f);
                    return Ok(Some(f));
                }
                return Ok(None);
            }
            Some(Entry::AtLeast(x)) if x >= t => return Ok(None),
            _ => {}
        }
        if self.inst.remainder_bound(i, a, c, t) >= t || self.inst.single(i, c) >= t {
            return Ok(None);
        }
        self.states += 1;
        if self.states.is_multiple_of(256) {
            self.budget.check()?;
        }
        let mut cands = Vec::new();
        if a > 0 {
            self.list(i, a - 1, c, true, t, &mut cands)?;
        }
        if c > 0 {
            self.list(i, a, c - 1, false, t, &mut cands)?;
        }
        // Stages reaching one representative lead to one value: keep the lightest.
        cands.sort_unstable_by(|x, y| {
            (x.canonical, !x.accelerator)
                .cmp(&(y.canonical, !y.accelerator))
                .then(x.load.total_cmp(&y.load))
        });
        cands.dedup_by(|later, first| {
            later.canonical == first.canonical && later.accelerator == first.accelerator
        });
        cands.sort_by(|x, y| x.key.total_cmp(&y.key));
        let mut found: Option<(f64, Set, bool)> = None;
        for cand in cands {
            t = t.min(self.best);
            if cand.key >= t {
                break;
            }
            let (a2, c2) = if cand.accelerator {
                (a - 1, c)
            } else {
                (a, c - 1)
            };
            self.path.push((cand.to, cand.accelerator, cand.load));
            let r = self.search(cand.canonical, a2, c2, t);
            self.path.pop();
            if let Some(f) = r? {
                let v = f.max(cand.load);
                if v < t {
                    t = v;
                    found = Some((v, cand.to, cand.accelerator));
                }
            }
        }
        let t = t.min(self.best);
        let entry = match (found, known) {
            (Some((f, to, accelerator)), _) if f <= t => Entry::Exact { f, to, accelerator },
            (_, Some(Entry::AtLeast(x))) => Entry::AtLeast(x.max(t)),
            _ => Entry::AtLeast(t),
        };
        self.remember(i, a, c, entry)?;
        Ok(match entry {
            Entry::Exact { f, .. } => Some(f),
            Entry::AtLeast(_) => None,
        })
    }

    fn remember(&mut self, i: Set, a: usize, c: usize, entry: Entry) -> Result<(), Exhausted> {
        const BLOCK: usize = 1 << 16;
        if self.memo.len() >= self.reserved_entries {
            self.budget
                .reserve("the split search's memo", BLOCK as f64 * ENTRY_BYTES)?;
            self.reserved_entries += BLOCK;
        }
        self.memo.insert(key(i, a, c), entry);
        Ok(())
    }

    /// A completion of value `f` from state `(i, a, c)` under the current path: the whole
    /// plan becomes the incumbent when it is below it. The path's ideals are mapped back
    /// from representatives to the real ideals (`tau`: real group of each group of the
    /// current representative).
    fn offer(&mut self, i: Set, a: usize, c: usize, f: f64) {
        let above = self.path.iter().fold(0.0f64, |m, s| m.max(s.2));
        let v = above.max(f);
        if v >= self.best {
            return;
        }
        let n = self.inst.n;
        let mut tau: Vec<usize> = (0..n).collect();
        let mut stages: Vec<(Set, bool)> = Vec::new();
        let mut step = |tau: &mut Vec<usize>, to: Set, accelerator: bool| {
            stages.push((
                bits(to).fold(0u128, |m, g| m | 1u128 << tau[g]),
                accelerator,
            ));
            let sigma = self.inst.twins.sigma(to, n);
            let mut inverse = vec![0; n];
            for (g, &s) in sigma.iter().enumerate() {
                inverse[s] = g;
            }
            *tau = (0..n).map(|g| tau[inverse[g]]).collect();
        };
        for &(to, accelerator, _) in &self.path {
            step(&mut tau, to, accelerator);
        }
        let (mut at, mut a, mut c) = (i, a, c);
        while at != self.inst.all {
            let Some(&Entry::Exact {
                to, accelerator, ..
            }) = self.memo.get(&key(at, a, c))
            else {
                return;
            };
            step(&mut tau, to, accelerator);
            if accelerator {
                a -= 1;
            } else {
                c -= 1;
            }
            at = self.inst.twins.canonical(to);
        }
        self.best = v;
        self.best_stages = Some(stages);
        self.trace.push((self.started.elapsed().as_secs_f64(), v));
    }

    /// Every stage `I' ⊋ i` on an accelerator (`accelerator`) or a CPU whose load and
    /// remainder bound (with `a`, `c` devices after it) are below `t`.
    fn list(
        &mut self,
        i: Set,
        a: usize,
        c: usize,
        accelerator: bool,
        t: f64,
        out: &mut Vec<Candidate>,
    ) -> Result<(), Exhausted> {
        let inst = self.inst;
        let Guards { pairs, earlier } = inst.twins.guards(i, inst.n);
        let avail = inst.available(i);
        let mut stack: Vec<(Set, Set, f64, f64)> = vec![(i, avail, 0.0, 0.0)];
        while let Some((cur, avail, weight, bytes)) = stack.pop() {
            for g in bits(avail) {
                let bit = 1u128 << g;
                let (w2, b2) = if accelerator {
                    if inst.supported & bit == 0 {
                        continue;
                    }
                    (weight + inst.fpga[g], bytes + inst.size[g])
                } else {
                    (weight + inst.cpu[g], bytes)
                };
                if w2 >= t || (accelerator && b2 > inst.memory_bytes) {
                    continue;
                }
                let next = cur | bit;
                self.visits += 1;
                if self.visits.is_multiple_of(4096) {
                    self.budget.check()?;
                }
                let later = avail & !((bit << 1).wrapping_sub(1));
                let enabled = bits(inst.succ[g])
                    .filter(|&h| inst.pred[h] & !next == 0)
                    .fold(0u128, |m, h| m | 1u128 << h);
                let child_avail = later | enabled;
                // Symmetry: g's chain passed the earlier twin of its bucket; when that one
                // can no longer grow in this subtree, every ideal below is out of order.
                let (prior, own) = earlier[g];
                if prior != 0 && (next & own).count_ones() > (next & prior).count_ones() {
                    if prior & !next & child_avail == 0 {
                        continue;
                    }
                } else if pairs
                    .iter()
                    .all(|&(x, y)| (next & y).count_ones() <= (next & x).count_ones())
                {
                    self.stages += 1;
                    let load = if accelerator {
                        w2 + inst.comm(next & !i)
                    } else {
                        w2
                    };
                    if load < t {
                        let rb = inst.remainder_bound(next, a, c, t);
                        if rb < t {
                            out.push(Candidate {
                                to: next,
                                canonical: inst.twins.canonical(next),
                                accelerator,
                                load,
                                key: load.max(rb),
                            });
                        }
                    }
                }
                if child_avail != 0 {
                    stack.push((next, child_avail, w2, b2));
                }
            }
        }
        Ok(())
    }
}

/// The first round's threshold: the root's remainder bound raised by one growth step,
/// or `start` when that is not positive and finite.
fn first_round(inst: &Instance, k: usize, l: usize, start: f64) -> f64 {
    let root = inst.remainder_bound(0, k, l, start).max(inst.single(0, l));
    if root > 0.0 && root.is_finite() {
        root * ROUND_GROWTH
    } else {
        start
    }
}

/// Whether the search takes `w`: at most [`MAX_GROUPS`] groups after contraction and a
/// plain device set (no cluster).
pub fn fits(w: &Workload) -> bool {
    w.cluster().is_none() && Contraction::new(w).len() <= MAX_GROUPS
}

/// The contiguous max-load split of `w` below `start` (∞: any), within `budget`
/// (module docs). `None` when `w` does not [`fit`](fits).
pub fn solve(w: &Workload, start: f64, budget: &Budget) -> Option<Found> {
    if w.cluster().is_some() {
        return None;
    }
    let inst = Instance::new(w)?;
    let d = w.devices();
    let (k, l) = (d.accelerators.min(inst.n), d.cpus.min(inst.n));
    let mut s = Search {
        inst: &inst,
        budget,
        started: std::time::Instant::now(),
        memo: FxHashMap::default(),
        reserved_entries: 0,
        best: start,
        best_stages: None,
        trace: Vec::new(),
        path: Vec::new(),
        states: 0,
        stages: 0,
        visits: 0,
    };
    let (mut bound, mut finished) = (0.0, Ok(()));
    let mut t = first_round(&inst, k, l, start);
    loop {
        let last = t >= start;
        let t_round = t.min(start);
        match s.search(0, k, l, t_round) {
            Err(e) => {
                finished = Err(e);
                break;
            }
            // Exact when found: the optimum (module docs, "Rounds").
            Ok(Some(_)) => break,
            Ok(None) if s.best < t_round => break,
            Ok(None) if last => break,
            Ok(None) => bound = t_round * (1.0 - SUM_SLACK),
        }
        t *= ROUND_GROWTH;
    }
    let placement = s.best_stages.as_ref().map(|stages| {
        let mut device = vec![Device::Cpu(0); inst.n];
        let (mut from, mut acc, mut cpu) = (0u128, 0, 0);
        for &(to, accelerator) in stages {
            let d = if accelerator {
                acc += 1;
                Device::Accelerator(acc - 1)
            } else {
                cpu += 1;
                Device::Cpu(cpu - 1)
            };
            for g in bits(to & !from) {
                device[g] = d;
            }
            from = to;
        }
        Placement::new(inst.group_of.iter().map(|&g| device[g]).collect())
    });
    Some(Found {
        value: if placement.is_some() {
            s.best
        } else {
            f64::INFINITY
        },
        placement,
        finished,
        bound,
        states: s.states,
        stages: s.stages,
        trace: s.trace,
        twin_classes: inst.twins.classes.iter().map(|c| c.len()).collect(),
    })
}

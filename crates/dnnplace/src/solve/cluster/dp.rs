//! The contiguous TPS optimum on a cluster by dynamic programming over the ideals of the
//! group DAG, with a state that knows what the communication rule of
//! [`crate::model::cluster`] needs.
//!
//! **Plan space.** A contiguous plan on a cluster is a chain of ideals
//! `∅ = I_0 ⊂ I_1 ⊂ … ⊂ I_r = V`, stage `S_i = I_i \ I_{i−1}` on its own device, and the
//! stages fill machines in order: each machine's stages are one consecutive run
//! ([`crate::score::cluster`] states the same space on placements; the cluster brute force
//! searches it).
//!
//! **What a stage's load depends on.** On device `d` (type `t` or a CPU core, machine kind
//! `κ`), `S = I \ J` costs its compute `x_d(S)`, the sends of its producers (which depend
//! only on `d`'s machine having a peer link) and, per transfer `τ` it receives, a price
//! that depends on where `τ`'s producer `p` is: on another machine, on a CPU core of this
//! machine, or on an accelerator of this machine (the last two differ only on machines with
//! a peer link). A transfer `τ` here is the set of nodes with one producer group `p(τ)`
//! and one set of receiver groups `R(τ)` (their costs added, their count kept for the
//! links' latencies). A producer in `J` was placed before; a producer outside `I` (a
//! gradient flowing back to an earlier stage) is placed later, so the stage *guesses* where
//! it will be and the guess is checked when it is placed.
//!
//! **State** at ideal `I`: `σ = (κ, o, a, u, λ, γ)` with
//! - `κ` the kind of the current machine (machines with the same accelerators, CPU cores and
//!   links are one kind and interchangeable) and `o_κ'` the machines of each kind opened;
//! - `a` the current machine's accelerators used per type and CPU cores used;
//! - `u` the accelerators used per type on all machines (kept only for the sweep and the
//!   cheapest cluster, [`Tracking`]);
//! - `λ(p) ∈ {E, C, A}` for every producer `p ∈ I` with a receiver outside `I`: on an
//!   earlier machine, on a CPU core or on an accelerator of the current machine;
//! - `γ(p) ∈ {N, C, A}` for every producer `p ∉ I` that a stage of the current machine
//!   receives from: a later machine, a CPU core or an accelerator of the current machine.
//!
//! On a machine without a peer link `C` and `A` price the same and are merged.
//!
//! **Recurrence.**
//!
//! ```text
//! dp[∅][σ_0] = 0
//! dp[I][σ'] = min over J ⊊ I, σ at J, a free device d (on the current machine, or the first
//!             device of a newly opened machine), guesses γ_new for the producers S first
//!             receives from, with σ' = next(σ, S, d, γ_new), of
//!               max( dp[J][σ], load_d(S | σ, γ_new) )
//! answer = min_σ dp[V][σ]
//! load_d(S) = x_d(S) + Σ_{τ: p(τ)∈S, R(τ)⊄S} send_d(τ) + Σ_{τ: p(τ)∉S, R(τ)∩S≠∅} recv_d(τ, ℓ(p(τ)))
//! ```
//!
//! with `ℓ(p) = E` for `p ∈ J` when `d` opens a machine, `λ(p)` for `p ∈ J` otherwise, and
//! the (old or new) guess for `p ∉ I`. A transition is valid when `S` fits `d`'s memory and
//! holds no CPU-only group (on an accelerator), every group of `S` with a guess matches `d`
//! (`C`/`A` for a CPU/accelerator of the current machine; `N` forbids the current machine),
//! and a machine is opened only when every guess is `N` (the old machine's guesses are then
//! satisfied and dropped; the labels all become `E`).
//!
//! **Exactness.** A plan of the space determines a unique path of states (its labels and
//! guesses are the truth), and along it every stage's load is its load under the rule; a
//! path with a wrong guess is cut when the producer is placed. So the answer is the optimum
//! over the plan space.
//!
//! **Pruning (exact).** With an upper bound `B` (the value of a plan already held, or
//! ∞), states of value `> B` are dropped, and `J` is restricted to
//! `F(J) ≥ F(I) − B` for `F` the prefix sums of each group's fastest time on any device,
//! found by binary search in the ideals sorted by `F`. The *tail test* ([`Tail`]) drops a
//! new state whose free devices cannot take the groups left within `B`, counting compute
//! and memory only, in the chain relaxation of [`crate::solve::bounds::cluster::chain`] (over the prefixes
//! the rest is exactly an interval of the numbering): a usage-vector table per run,
//! O(|U| · C · log n), and one lookup per new state.
//!
//! **Complexity.** O(Σ_I Σ_{J∈W(I)} |Σ_J| · D · 3^{q} · (φ + |λ| + |γ|)) time for the
//! ideals `I`, the window `W(I)`, the states `Σ_J` kept at `J`, `D ≤ (K + 1)(|T| + 1)`
//! device choices for `K` machine kinds and `|T|` types, `q` new guesses per stage
//! (0 for inference graphs) and `φ` crossing transfers; memory O(Σ_I |Σ_I|). The
//! states per ideal are at most `Π_κ (n_κ + 1) · K · Π_t (c_t + 1) · 3^{φ'}` for `n_κ`
//! machines of kind `κ`, `c_t` accelerators of type `t` per machine (clamped to the number
//! of groups) and `φ'` producers on the frontier.

use crate::solve::MethodId;
use std::collections::HashMap;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::super::budget::{Budget, Exhausted};
use super::super::ideals::{self, EnumerationStop, IdealBits, Ideals};
use super::super::{Limits, SolveError, StopReason};
use super::machine_chain::machine_chain;
use super::typed_chain::typed_chain;
use crate::model::contraction::{receiving_groups, Contraction};
use crate::model::numerics::Sum;
use crate::model::{ClusterCosts, Device, Placement, Workload};
use crate::solve::bounds::cluster::chain::{Chain, Class};

/// What the DP keeps apart besides the plan's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tracking {
    /// Only the best plan.
    Best,
    /// The best plan for every vector of accelerators used per type (the sweep and the
    /// cheapest cluster read these).
    PerUsage,
}

/// Most machine kinds, accelerator types, and labelled producers per ideal the state holds.
pub const MAX_KINDS: usize = 8;
pub const MAX_TYPES: usize = 6;
pub const MAX_WIDTH: usize = 64;

/// Labels (2 bits per frontier producer): where a producer of `I` is.
const EARLIER: u8 = 0;
const HERE_CPU: u8 = 1;
const HERE_ACC: u8 = 2;
/// Guesses (2 bits per upstream producer): none yet, a later machine, a CPU core or an
/// accelerator of the current machine.
const NO_GUESS: u8 = 0;
const G_LATER: u8 = 1;
const G_CPU: u8 = 2;
const G_ACC: u8 = 3;
/// The "type" of a CPU core in a [`Choice`], and "no current machine".
const NONE: u8 = u8::MAX;

fn guess_of(label: u8) -> u8 {
    label + 1
}
/// The label a guess prices like (a later machine is priced like an earlier one: over the
/// network).
fn label_of(guess: u8) -> u8 {
    guess - 1
}

#[inline]
fn get2(bits: u128, k: usize) -> u8 {
    (bits >> (2 * k) & 3) as u8
}
#[inline]
fn set2(bits: &mut u128, k: usize, v: u8) {
    *bits = *bits & !(3u128 << (2 * k)) | (v as u128) << (2 * k);
}

/// One transfer: the nodes with producer group `p` and receiver groups `recv`.
#[derive(Clone, Debug)]
struct Transfer {
    p: usize,
    recv: Vec<usize>,
    /// Nodes merged (each pays the link's latency).
    count: f64,
    /// Σ c(u).
    cost: f64,
}

/// Latency and bandwidth ratio of a link of one machine kind.
#[derive(Clone, Copy, Debug, PartialEq)]
struct LinkPrice {
    latency_ms: f64,
    scale: f64,
}

impl LinkPrice {
    #[inline]
    fn time(self, t: &Transfer) -> f64 {
        t.count * self.latency_ms + t.cost * self.scale
    }
}

/// Identical machines.
#[derive(Clone, Debug)]
struct Kind {
    machines: Vec<usize>,
    /// Accelerators per type.
    per_type: Vec<usize>,
    cpus: usize,
    host: LinkPrice,
    peer: Option<LinkPrice>,
    network: LinkPrice,
}

impl Kind {
    fn devices(&self) -> usize {
        self.per_type.iter().sum::<usize>() + self.cpus
    }
}

/// A device choice of one transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Choice {
    /// The stage opens a machine of kind `kind` (else it is on the current one).
    opens: bool,
    kind: u8,
    /// Accelerator type, or [`NONE`] for a CPU core.
    ty: u8,
}

/// A state (module documentation), packed: labels by position in the ideal's frontier list,
/// guesses by position in its upstream list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    current: u8,
    opened: [u8; MAX_KINDS],
    /// Per type on the current machine; `usage[MAX_TYPES]` counts CPU cores.
    usage: [u8; MAX_TYPES + 1],
    /// Per type on all machines ([`Tracking::PerUsage`] only).
    used: [u16; MAX_TYPES],
    labels: u128,
    guesses: u128,
}

#[derive(Clone, Debug)]
struct State {
    key: Key,
    value: f64,
    /// (ideal J, state index at J, choice).
    back: Option<(u32, u32, Choice)>,
}

struct Prepared {
    c: Contraction,
    types: usize,
    /// `x[t][g]`.
    x: Vec<Vec<f64>>,
    cpu: Vec<f64>,
    size: Vec<f64>,
    supported: Vec<bool>,
    memory: Vec<f64>,
    transfers: Vec<Transfer>,
    kinds: Vec<Kind>,
    clamp: usize,
}

/// The result of the cluster DP.
#[derive(Clone, Debug)]
pub struct ClusterDpResult {
    /// The optimum and a plan reaching it; `None` when no plan exists (or the run stopped).
    pub best: Option<(f64, Placement)>,
    /// With [`Tracking::PerUsage`]: for every vector of accelerators used per type that some
    /// plan reaches, the least TPS with exactly that usage, and a plan.
    pub per_usage: Vec<(Vec<usize>, f64, Placement)>,
    pub ideals: usize,
    /// States kept over all ideals (after pruning).
    pub states: usize,
    /// Pairs `J ⊂ I` relaxed.
    pub pairs: u64,
    /// Zero-cost leaf groups folded into their neighbour
    /// ([`crate::solve::leaf_folding::fold_free_leaves_on_cluster`]).
    pub folded: usize,
    /// A lower bound on the optimum: the optimum itself after a full run (∞ when no plan
    /// exists), else the bound of [`bounds`] (0 with [`Tracking::PerUsage`]).
    pub lower_bound: f64,
    /// Why the run stopped before its proof (time limit, Ctrl-C, the ideal limit). Then
    /// `best`, with [`Tracking::Best`], is the optimum over the prefixes of the groups'
    /// numbering when that run finished (a valid plan, not proven optimal), else `None`;
    /// `per_usage` is empty.
    pub stopped: Option<StopReason>,
}

/// Ideals with per-ideal sums and lists.
struct IdealData {
    ideals: Family,
    /// Compensated sums per ideal ([`Sum`]): a stage's compute, CPU time and size are their
    /// certified differences ([`stage_sum`]).
    x: Vec<Vec<Sum>>,
    cpu: Vec<Sum>,
    size: Vec<Sum>,
    unsupported: Vec<u32>,
    fastest: Vec<f64>,
    /// Transfers with groups inside and outside the ideal.
    crossing: Vec<Vec<u32>>,
    /// Producers in the ideal with a receiver outside it (they carry labels), sorted.
    frontier: Vec<Vec<u32>>,
    /// Producers outside the ideal with a receiver inside it (they may carry guesses), sorted.
    upstream: Vec<Vec<u32>>,
}

fn prepare(w: &Workload, costs: &ClusterCosts) -> (Prepared, usize) {
    let (c, folded) =
        crate::solve::leaf_folding::fold_free_leaves_on_cluster(w, costs, Contraction::new(w));
    let cluster = costs.cluster();
    let types = cluster.types().len();
    let n = c.len();
    let mut x = vec![vec![0.0; n]; types];
    for (t, xt) in x.iter_mut().enumerate() {
        let times = costs.times_of_type(t);
        for (g, group) in c.groups.iter().enumerate() {
            xt[g] = group.nodes.iter().map(|&v| times[v]).sum();
        }
    }
    let mut merged: HashMap<(usize, Vec<usize>), (f64, f64)> = HashMap::new();
    for u in 0..w.len() {
        let cost = w.out_cost(u);
        if cost == 0.0 {
            continue;
        }
        let p = c.group_of[u];
        let recv = receiving_groups(w, &c.group_of, u);
        if recv.is_empty() {
            continue;
        }
        let e = merged.entry((p, recv)).or_insert((0.0, 0.0));
        e.0 += 1.0;
        e.1 += cost;
    }
    let mut transfers: Vec<Transfer> = merged
        .into_iter()
        .map(|((p, recv), (count, cost))| Transfer {
            p,
            recv,
            count,
            cost,
        })
        .collect();
    transfers.sort_by(|a, b| (a.p, &a.recv).cmp(&(b.p, &b.recv)));
    let b_ref = w.platform().reference.host_bytes_per_s;
    let price = |l: &crate::model::Link| LinkPrice {
        latency_ms: l.latency_ms,
        scale: b_ref / l.bytes_per_s,
    };
    let mut kinds: Vec<Kind> = Vec::new();
    for (m, machine) in cluster.machines().iter().enumerate() {
        let mut per_type = vec![0; types];
        for &(t, count) in &machine.accelerators {
            per_type[t] += count;
        }
        let kind = Kind {
            machines: vec![m],
            per_type,
            cpus: machine.cpus,
            host: price(&machine.host),
            peer: machine.peer.as_ref().map(price),
            network: price(&machine.network),
        };
        match kinds.iter_mut().find(|k| {
            k.per_type == kind.per_type
                && k.cpus == kind.cpus
                && k.host == kind.host
                && k.peer == kind.peer
                && k.network == kind.network
        }) {
            Some(k) => k.machines.push(m),
            None => kinds.push(kind),
        }
    }
    // A plan opens at most one machine per group: more machines of a kind are never used
    // (they are identical), so each kind keeps its first n.
    for k in &mut kinds {
        k.machines.truncate(n.max(1));
    }
    let p = Prepared {
        types,
        x,
        cpu: c.groups.iter().map(|g| g.cpu_latency).collect(),
        size: c.groups.iter().map(|g| g.size_bytes).collect(),
        supported: c
            .groups
            .iter()
            .map(|g| g.supported_on_accelerator)
            .collect(),
        memory: cluster.types().iter().map(|t| t.memory_bytes).collect(),
        transfers,
        kinds,
        clamp: n,
        c,
    };
    (p, folded)
}

/// The ideals the recurrence runs over: every ideal of the group DAG, or only the prefixes
/// `{0..p}`, `p = 0..=n`, of the groups' topological numbering (one per level) for the bound.
enum Family {
    Prefixes { level_start: Vec<usize> },
    All(Ideals),
}

/// One ideal of a [`Family`], for membership tests.
#[derive(Clone, Copy)]
enum Set<'a> {
    /// `{0..p}`.
    Prefix(usize),
    Bits(IdealBits<'a>),
}

impl Set<'_> {
    #[inline]
    fn contains(&self, g: usize) -> bool {
        match self {
            Set::Prefix(p) => g < *p,
            Set::Bits(b) => b.contains(g),
        }
    }

    /// The groups of the set, in increasing order.
    fn groups(&self) -> Vec<usize> {
        match self {
            Set::Prefix(p) => (0..*p).collect(),
            Set::Bits(b) => b.groups(),
        }
    }
}

impl Family {
    fn prefixes(n: usize) -> Family {
        Family::Prefixes {
            level_start: (0..=n + 1).collect(),
        }
    }

    fn len(&self) -> usize {
        *self.level_start().last().expect("at least the empty ideal")
    }

    /// Ideals of level p are `level_start()[p] .. level_start()[p + 1]`.
    fn level_start(&self) -> &[usize] {
        match self {
            Family::Prefixes { level_start } => level_start,
            Family::All(ideals) => &ideals.level_start,
        }
    }

    #[inline]
    fn get(&self, i: usize) -> Set<'_> {
        match self {
            Family::Prefixes { .. } => Set::Prefix(i),
            Family::All(ideals) => Set::Bits(ideals.get(i)),
        }
    }

    /// `I_j ⊆ I_i`.
    #[inline]
    fn is_subset(&self, j: usize, i: usize) -> bool {
        match self {
            Family::Prefixes { .. } => j <= i,
            Family::All(ideals) => ideals.is_subset(j, i),
        }
    }
}

/// One ideal's row of [`IdealData`]: compute per type, CPU time, size, unsupported groups,
/// fastest compute, the transfers it cuts, and their producers inside and outside.
type PerIdeal = (Vec<Sum>, Sum, Sum, u32, f64, Vec<u32>, Vec<u32>, Vec<u32>);

/// An ideal's sums over its groups: compute per type, CPU time, size, unsupported groups
/// and fastest compute.
#[derive(Clone)]
struct Sums {
    x: Vec<Sum>,
    cpu: Sum,
    size: Sum,
    unsupported: u32,
    fastest: f64,
}

impl Sums {
    fn new(types: usize) -> Sums {
        Sums {
            x: vec![Sum::ZERO; types],
            cpu: Sum::ZERO,
            size: Sum::ZERO,
            unsupported: 0,
            fastest: 0.0,
        }
    }

    fn add(&mut self, p: &Prepared, fastest_of: &[f64], g: usize) {
        for (t, xt) in self.x.iter_mut().enumerate() {
            *xt = xt.plus(p.x[t][g]);
        }
        self.cpu = self.cpu.plus(p.cpu[g]);
        self.size = self.size.plus(p.size[g]);
        self.unsupported += u32::from(!p.supported[g]);
        self.fastest += fastest_of[g];
    }
}

/// A row from its sums and its (sorted, distinct) crossing transfers; `inside(g)` says
/// whether group g is in the ideal.
fn row(p: &Prepared, sums: Sums, crossing: Vec<u32>, inside: impl Fn(usize) -> bool) -> PerIdeal {
    let mut frontier: Vec<u32> = Vec::new();
    let mut upstream: Vec<u32> = Vec::new();
    for &ti in &crossing {
        let t = &p.transfers[ti as usize];
        if inside(t.p) {
            frontier.push(t.p as u32);
        } else {
            upstream.push(t.p as u32);
        }
    }
    for list in [&mut frontier, &mut upstream] {
        list.sort_unstable();
        list.dedup();
    }
    (
        sums.x,
        sums.cpu,
        sums.size,
        sums.unsupported,
        sums.fastest,
        crossing,
        frontier,
        upstream,
    )
}

/// The rows of the `count` prefixes `{0, …, i−1}` of the group order, each from the one
/// before: the sums grow by group `i − 1`, and a transfer crosses while some but not all
/// of its endpoint occurrences (producer, receivers) are inside. O(n + m + Σ width).
fn prefix_rows(
    p: &Prepared,
    incident: &[Vec<u32>],
    fastest_of: &[f64],
    count: usize,
) -> Vec<PerIdeal> {
    let total: Vec<u32> = p
        .transfers
        .iter()
        .map(|t| 1 + t.recv.len() as u32)
        .collect();
    let mut inside = vec![0u32; p.transfers.len()];
    let mut crossing = std::collections::BTreeSet::new();
    let mut sums = Sums::new(p.types);
    let mut rows = Vec::with_capacity(count);
    for i in 0..count {
        if i > 0 {
            let g = i - 1;
            sums.add(p, fastest_of, g);
            for &ti in &incident[g] {
                inside[ti as usize] += 1;
                if inside[ti as usize] == total[ti as usize] {
                    crossing.remove(&ti);
                } else {
                    crossing.insert(ti);
                }
            }
        }
        let list: Vec<u32> = crossing.iter().copied().collect();
        rows.push(row(p, sums.clone(), list, |g| g < i));
    }
    rows
}

/// Row `i` of an arbitrary family: its sums over its groups and the transfers some but
/// not all of whose endpoints (producer, receivers) lie inside.
fn all_row(
    p: &Prepared,
    ideals: &Family,
    incident: &[Vec<u32>],
    fastest_of: &[f64],
    i: usize,
) -> PerIdeal {
    let bits = ideals.get(i);
    let mut sums = Sums::new(p.types);
    let mut crossing: Vec<u32> = Vec::new();
    for g in bits.groups() {
        sums.add(p, fastest_of, g);
        for &ti in &incident[g] {
            let t = &p.transfers[ti as usize];
            if !(bits.contains(t.p) && t.recv.iter().all(|&r| bits.contains(r))) {
                crossing.push(ti);
            }
        }
    }
    crossing.sort_unstable();
    crossing.dedup();
    row(p, sums, crossing, |g| bits.contains(g))
}

/// The per-ideal data the DP reads (module documentation): each ideal's certified sums,
/// its crossing transfers and its frontier and upstream producers. Prefixes are built one
/// from the other (O(n + Σ width)); an arbitrary family costs O(|ideal| + its transfers)
/// per ideal, in parallel, and polls `budget` once per ideal: on time, Ctrl-C or memory it
/// stops with [`SolveError::Stopped`] (the caller keeps its held plan).
fn ideal_data(p: &Prepared, ideals: Family, budget: &Budget) -> Result<IdealData, SolveError> {
    let count = ideals.len();
    let n = p.c.len();
    let mut incident: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (i, t) in p.transfers.iter().enumerate() {
        incident[t.p].push(i as u32);
        for &r in &t.recv {
            incident[r].push(i as u32);
        }
    }
    let cpus = p.kinds.iter().any(|k| k.cpus > 0);
    let fastest_of: Vec<f64> = (0..n)
        .map(|g| {
            let acc = if p.supported[g] {
                (0..p.types)
                    .map(|t| p.x[t][g])
                    .fold(f64::INFINITY, f64::min)
            } else {
                f64::INFINITY
            };
            acc.min(if cpus { p.cpu[g] } else { f64::INFINITY })
        })
        .collect();
    let per: Vec<PerIdeal> = match &ideals {
        // Prefixes of the group order: each row from the previous one, O(n + Σ width).
        Family::Prefixes { .. } => prefix_rows(p, &incident, &fastest_of, count),
        Family::All(_) => {
            let out_of_budget = std::sync::atomic::AtomicBool::new(false);
            let per: Vec<Option<PerIdeal>> = (0..count)
                .into_par_iter()
                .map(|i| {
                    if out_of_budget.load(std::sync::atomic::Ordering::Relaxed)
                        || budget.is_exhausted()
                    {
                        out_of_budget.store(true, std::sync::atomic::Ordering::Relaxed);
                        return None;
                    }
                    Some(all_row(p, &ideals, &incident, &fastest_of, i))
                })
                .collect();
            if out_of_budget.into_inner() {
                return Err(SolveError::Stopped {
                    method: MethodId::Dp,
                    reason: budget.check().err().unwrap_or(Exhausted::TimeLimit),
                    detail: format!("while summing the stages of {count} ideals"),
                });
            }
            per.into_iter().flatten().collect()
        }
    };
    let mut data = IdealData {
        ideals,
        x: Vec::with_capacity(count),
        cpu: Vec::with_capacity(count),
        size: Vec::with_capacity(count),
        unsupported: Vec::with_capacity(count),
        fastest: Vec::with_capacity(count),
        crossing: Vec::with_capacity(count),
        frontier: Vec::with_capacity(count),
        upstream: Vec::with_capacity(count),
    };
    for (xs, cpu, size, unsupported, fastest, crossing, frontier, upstream) in per {
        if frontier.len() > MAX_WIDTH || upstream.len() > MAX_WIDTH {
            return Err(SolveError::Unsupported {
                method: MethodId::Dp,
                what: format!(
                    "a cut with {} producers on one side of a contiguous split (the cluster DP labels at most {MAX_WIDTH}); coarsen the graph",
                    frontier.len().max(upstream.len())
                ),
            });
        }
        data.x.push(xs);
        data.cpu.push(cpu);
        data.size.push(size);
        data.unsupported.push(unsupported);
        data.fastest.push(fastest);
        data.crossing.push(crossing);
        data.frontier.push(frontier);
        data.upstream.push(upstream);
    }
    Ok(data)
}

/// The label a device of this kind gives its producers: `HERE_CPU`/`HERE_ACC`, merged on a
/// machine without a peer link.
fn here_label(kind: &Kind, ty: u8) -> u8 {
    if ty == NONE && kind.peer.is_some() {
        HERE_CPU
    } else {
        HERE_ACC
    }
}

/// What a receiving device of `kind` (an accelerator unless `cpu`) pays for `t` from a
/// producer labelled `label`.
#[inline]
fn receive(kind: &Kind, cpu: bool, label: u8, t: &Transfer) -> f64 {
    match label {
        EARLIER => kind.network.time(t),
        HERE_CPU => {
            if cpu {
                0.0
            } else {
                kind.host.time(t)
            }
        }
        _ => match (cpu, kind.peer) {
            (false, Some(p)) => p.time(t),
            (false, None) => kind.host.time(t),
            (true, Some(_)) => kind.host.time(t),
            (true, None) => 0.0,
        },
    }
}

/// Solves the contiguous TPS problem on the cluster of `costs` to optimality (module
/// documentation), keeping per-usage optima when `tracking` asks. `upper_bound` is the value
/// of a plan the caller holds (∞ for none); with [`Tracking::Best`] the DP first finds its
/// own bound, the optimum over the prefixes of one topological order (its bound raised from
/// a lower bound by 1.5× until a plan appears), and prunes with the smaller. Per-usage
/// optima above a bound would be pruned, so [`Tracking::PerUsage`] uses only the caller's.
pub fn solve(
    w: &Workload,
    costs: &ClusterCosts,
    limits: &Limits,
    tracking: Tracking,
    upper_bound: f64,
) -> Result<ClusterDpResult, SolveError> {
    solve_between(w, costs, limits, tracking, 0.0, upper_bound)
}

/// Whether a plan of value `value` meets the lower bound `lower` within [`PROOF_RELATIVE`]
/// (then it is optimal).
pub fn meets_bound(value: f64, lower: f64) -> bool {
    value <= lower * (1.0 + PROOF_RELATIVE)
}

/// How close a plan must come to a lower bound to be called optimal: `1e-15` relative, the
/// precision of the DP's certified stage sums (5u, README "Numerics"). A looser tolerance
/// proves wrong optima on inputs whose magnitudes differ by 1e11 and more: with `1e-9`, a
/// CPU-only node of 2.75e9 ms made every plan within 2.75 ms of it "optimal", so the DP
/// stopped at a plan 0.074 ms (2.7e-11) worse than the best one
/// (`tests/oracles_wide_magnitudes.rs`, seed 14910916324470988103).
pub const PROOF_RELATIVE: f64 = 1e-15;

/// [`solve`] with a lower bound the caller holds (e.g. [`crate::solve::bounds::cluster::volume`]): the
/// prefixes' search starts from it, the bound reported is at least it, and the search ends
/// as soon as a plan (the caller's `upper_bound`, the typed chain's or the prefixes')
/// meets it.
///
/// With [`Tracking::Best`], when the DP stops before its proof (time limit, Ctrl-C, the
/// ideal limit), the typed chain ([`super::typed_chain`]) and the machine chain
/// ([`super::machine_chain`]) run after it, each within a tenth of the time limit (2 s
/// without one), and the better of their plans is the answer where it is better than the
/// DP's, the bound never above its value. A DP that finishes has the optimum, which no
/// chain beats, so they are not run (the DP never reads their plans: it runs the same
/// either way).
pub fn solve_between(
    w: &Workload,
    costs: &ClusterCosts,
    limits: &Limits,
    tracking: Tracking,
    lower_bound: f64,
    upper_bound: f64,
) -> Result<ClusterDpResult, SolveError> {
    let mut r = solve_with(w, costs, limits, tracking, lower_bound, upper_bound, true)?;
    if tracking != Tracking::Best || r.stopped.is_none() || meets_bound(upper_bound, lower_bound) {
        return Ok(r);
    }
    let share = limits.time_limit_s.map_or(2.0, |t| 0.1 * t);
    let typed = typed_chain(w, costs, &Budget::new(Some(share), None));
    let by_machine = machine_chain(w, costs, &Budget::new(Some(share), None));
    let chained = [typed, by_machine]
        .into_iter()
        .flatten()
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .filter(|t| t.0 < upper_bound);
    if let Some((value, plan)) = chained {
        if r.best.as_ref().is_none_or(|b| b.0 > value) {
            r.best = Some((value, plan));
            r.lower_bound = r.lower_bound.min(value);
        }
    }
    Ok(r)
}

/// [`solve_between`] without the typed chain's start: for the coarse DP's many levels
/// ([`super::coarse`]), whose plans the fine run's typed chain would outdo anyway.
pub fn solve_between_unseeded(
    w: &Workload,
    costs: &ClusterCosts,
    limits: &Limits,
    tracking: Tracking,
    lower_bound: f64,
    upper_bound: f64,
) -> Result<ClusterDpResult, SolveError> {
    solve_with(w, costs, limits, tracking, lower_bound, upper_bound, true)
}

/// [`solve`] without the tail test (module doc, "Pruning"): the same optimum, for tests and
/// measurements of the test itself.
pub fn solve_without_tail_test(
    w: &Workload,
    costs: &ClusterCosts,
    limits: &Limits,
    upper_bound: f64,
) -> Result<ClusterDpResult, SolveError> {
    solve_with(w, costs, limits, Tracking::Best, 0.0, upper_bound, false)
}

fn solve_with(
    w: &Workload,
    costs: &ClusterCosts,
    limits: &Limits,
    tracking: Tracking,
    lower_bound: f64,
    upper_bound: f64,
    tail_test: bool,
) -> Result<ClusterDpResult, SolveError> {
    let (p, folded) = prepare(w, costs);
    check_size(&p)?;
    let budget = limits.budget();
    let mut held = Held {
        fallback: None,
        bound: upper_bound,
        lower: 0.0,
        pairs: 0,
        folded,
    };
    if tracking == Tracking::Best {
        // A plan of the caller's value that meets the lower bound is optimal.
        if meets_bound(upper_bound, lower_bound) {
            return Ok(held.proven());
        }
        match best_over_prefixes(&p, costs, (lower_bound, upper_bound), tail_test, &budget)? {
            Prefixes::Stopped {
                reason,
                states,
                pairs,
                lower,
            } => {
                return Ok(Held {
                    pairs,
                    lower,
                    ..held
                }
                .stopped(reason, states))
            }
            Prefixes::Done {
                best,
                bound,
                lower,
                pairs,
            } => {
                held = Held {
                    fallback: best,
                    bound,
                    lower,
                    pairs,
                    folded,
                };
            }
        }
        if meets_bound(held.bound, held.lower) {
            return Ok(held.proven());
        }
    }
    let full_run = FullRun {
        p: &p,
        tracking,
        tail_test,
        budget: &budget,
    };
    match full_run.table(limits.max_ideals, held)? {
        Full::Table(data, table, held) => Ok(full_run.optimum(&data, &table, costs, held)),
        Full::Stopped(result) => Ok(result),
    }
}

/// What the cluster DP holds before its full run: the optimum over the prefixes and its
/// plan (`fallback`, with [`Tracking::Best`]), the upper bound the run prunes with, the
/// lower bound of [`bounds`], the pairs relaxed so far and the leaves folded.
struct Held {
    fallback: Option<(f64, Placement)>,
    bound: f64,
    lower: f64,
    pairs: u64,
    folded: usize,
}

impl Held {
    /// The run stopped (`reason`) after keeping `states`: the prefixes' plan, if any, with
    /// the lower bound.
    fn stopped(self, reason: StopReason, states: usize) -> ClusterDpResult {
        ClusterDpResult {
            best: self.fallback,
            per_usage: Vec::new(),
            ideals: 0,
            states,
            pairs: self.pairs,
            folded: self.folded,
            lower_bound: self.lower,
            stopped: Some(reason),
        }
    }

    /// The plan in hand (the prefixes', else the caller's value `bound`) meets the lower
    /// bound: optimal, nothing is left to search.
    fn proven(self) -> ClusterDpResult {
        ClusterDpResult {
            lower_bound: self.fallback.as_ref().map_or(self.bound, |b| b.0),
            best: self.fallback,
            per_usage: Vec::new(),
            ideals: 0,
            states: 0,
            pairs: self.pairs,
            folded: self.folded,
            stopped: None,
        }
    }
}

/// The full run over every ideal of the prepared graph `p`.
struct FullRun<'a> {
    p: &'a Prepared,
    tracking: Tracking,
    tail_test: bool,
    budget: &'a Budget,
}

/// The full run's table with its ideals, or the result of a run that stopped first.
enum Full {
    Table(Box<IdealData>, Vec<Vec<State>>, Held),
    Stopped(ClusterDpResult),
}

impl FullRun<'_> {
    /// Enumerates the ideals (at most `limit`), their data and the DP's table of states
    /// per ideal, pruned above `held.bound`. A stop keeps the prefixes' plan, stating why
    /// it is not proven (the ideal limit, time, Ctrl-C, memory).
    fn table(&self, limit: usize, mut held: Held) -> Result<Full, SolveError> {
        let p = self.p;
        let ideals = match enumerate_ideals(p, limit, self.budget) {
            Ok(ideals) => ideals,
            Err(SolveError::TooManyIdeals { .. }) if held.fallback.is_some() => {
                return Ok(Full::Stopped(
                    held.stopped(StopReason::IdealLimit { limit }, 0),
                ));
            }
            Err(SolveError::Stopped { reason, .. }) => {
                return Ok(Full::Stopped(held.stopped(reason.into(), 0)))
            }
            Err(e) => return Err(e),
        };
        let data = match ideal_data(p, Family::All(ideals), self.budget) {
            Ok(data) => data,
            Err(SolveError::Stopped { reason, .. }) => {
                return Ok(Full::Stopped(held.stopped(reason.into(), 0)))
            }
            Err(e) => return Err(e),
        };
        let count = data.ideals.len();
        match run(
            p,
            &data,
            self.tracking,
            held.bound,
            self.tail_test,
            self.budget,
        ) {
            Run::Done(table, n) => {
                held.pairs += n;
                Ok(Full::Table(Box::new(data), table, held))
            }
            Run::Stopped(reason, states, n) => {
                held.pairs += n;
                Ok(Full::Stopped(ClusterDpResult {
                    ideals: count,
                    ..held.stopped(reason, states)
                }))
            }
        }
    }

    /// The optimum of a finished table: the least value over the states of the full ideal
    /// and its plan (∞ and none when no plan exists), with [`Tracking::PerUsage`] the best
    /// plan per usage vector.
    fn optimum(
        &self,
        data: &IdealData,
        table: &[Vec<State>],
        costs: &ClusterCosts,
        held: Held,
    ) -> ClusterDpResult {
        let p = self.p;
        let full = data.ideals.len() - 1;
        let states: usize = table.iter().map(Vec::len).sum();
        let best = table[full]
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.value.total_cmp(&b.1.value));
        let best = best.map(|(s, st)| (st.value, reconstruct(p, data, table, full, s, costs)));
        let per_usage = if self.tracking == Tracking::PerUsage {
            per_usage_plans(p, data, table, costs)
        } else {
            Vec::new()
        };
        let lower_bound = best.as_ref().map_or(f64::INFINITY, |b| b.0);
        ClusterDpResult {
            best,
            per_usage,
            ideals: data.ideals.len(),
            states,
            pairs: held.pairs,
            folded: held.folded,
            lower_bound,
            stopped: None,
        }
    }
}

/// What the search over one topological order's prefixes ends with: its optimum (the
/// held plan), the upper bound it leaves, the lower bound of [`bounds`] and the pairs
/// relaxed; or why it stopped.
enum Prefixes {
    Done {
        best: Option<(f64, Placement)>,
        bound: f64,
        lower: f64,
        pairs: u64,
    },
    Stopped {
        reason: StopReason,
        states: usize,
        pairs: u64,
        lower: f64,
    },
}

/// The DP over the prefixes of the group order, below targets that rise from the lower
/// bound (at least `lower_bound`, at most the prefixes' ceiling): by 1%, then by steps
/// half as large again each time — a run whose target is close above the prefixes'
/// optimum is the cheapest to succeed (the tail test cuts most), and failing runs below
/// it are cheap too. `bounds` clamps its lower bound to 1e-12 for the search; a bound that
/// small is stated as 0.
fn best_over_prefixes(
    p: &Prepared,
    costs: &ClusterCosts,
    (lower_bound, upper_bound): (f64, f64),
    tail_test: bool,
    budget: &Budget,
) -> Result<Prefixes, SolveError> {
    let chain = ideal_data(p, Family::prefixes(p.c.len()), budget)?;
    let (b0, ceiling) = bounds(p);
    let mut b = b0.max(lower_bound.min(ceiling));
    let lower = if b > 1e-12 { b } else { 0.0 };
    let last = chain.ideals.len() - 1;
    let (mut bound, mut best, mut pairs) = (upper_bound, None, 0);
    let mut step = 0.01;
    loop {
        match run(p, &chain, Tracking::Best, b.min(bound), tail_test, budget) {
            Run::Done(table, n) => {
                pairs += n;
                if let Some((s, st)) = table[last]
                    .iter()
                    .enumerate()
                    .min_by(|a, b| a.1.value.total_cmp(&b.1.value))
                {
                    bound = bound.min(st.value);
                    best = Some((st.value, reconstruct(p, &chain, &table, last, s, costs)));
                    break;
                }
            }
            Run::Stopped(reason, states, n) => {
                return Ok(Prefixes::Stopped {
                    reason,
                    states,
                    pairs: pairs + n,
                    lower,
                })
            }
        }
        if b >= ceiling || b >= bound {
            break;
        }
        b = (b * (1.0 + step)).min(ceiling);
        step *= 1.5;
    }
    Ok(Prefixes::Done {
        best,
        bound,
        lower,
        pairs,
    })
}

/// The cluster DP's state packs at most [`MAX_TYPES`] accelerator types, [`MAX_KINDS`]
/// kinds of machine and 255 machines of a kind: a larger cluster is refused, saying so.
fn check_size(p: &Prepared) -> Result<(), SolveError> {
    if p.types > MAX_TYPES
        || p.kinds.len() > MAX_KINDS
        || p.kinds.iter().any(|k| k.machines.len() > 255)
    {
        return Err(SolveError::Unsupported {
            method: MethodId::Dp,
            what: format!(
                "a cluster of {} accelerator types and {} kinds of machine with up to {} machines of a kind (the cluster DP takes at most {MAX_TYPES} types, {MAX_KINDS} kinds and 255 machines of a kind)",
                p.types,
                p.kinds.len(),
                p.kinds.iter().map(|k| k.machines.len()).max().unwrap_or(0)
            ),
        });
    }
    Ok(())
}

/// The ideals of `p`'s group DAG, at most `limit` of them (counted before enumerating
/// when the estimate already exceeds it); errors say which limit stopped it.
fn enumerate_ideals(p: &Prepared, limit: usize, budget: &Budget) -> Result<Ideals, SolveError> {
    let too_many = |found: usize, how: &str| SolveError::TooManyIdeals {
        found,
        limit,
        which: format!("--max-ideals allows: {how}"),
    };
    let estimate = ideals::estimate_in(&p.c, budget);
    if estimate.lower_bound > limit as u128 {
        let found = usize::try_from(estimate.lower_bound).unwrap_or(usize::MAX);
        let counted = if estimate.exact {
            "exactly"
        } else {
            "at least"
        };
        Err(too_many(
            found,
            &format!("it has {counted} {found}, counted before enumerating"),
        ))
    } else {
        Ideals::enumerate(&p.c, limit, budget).map_err(|e| match e {
            EnumerationStop::TooMany { found } => {
                too_many(found, &format!("{found} enumerated before stopping"))
            }
            EnumerationStop::Budget { reason, .. } => SolveError::Stopped {
                method: MethodId::Dp,
                reason,
                detail: String::new(),
            },
        })
    }
}

/// With [`Tracking::PerUsage`]: for every vector of accelerators used per type among the
/// final states of `table`, the least TPS with exactly that usage and a plan, by usage.
fn per_usage_plans(
    p: &Prepared,
    data: &IdealData,
    table: &[Vec<State>],
    costs: &ClusterCosts,
) -> Vec<(Vec<usize>, f64, Placement)> {
    let full = data.ideals.len() - 1;
    let finals = &table[full];
    let mut per_usage: Vec<(Vec<usize>, f64, Placement)> = Vec::new();
    let mut by: HashMap<Vec<u16>, usize> = HashMap::new();
    for (s, st) in finals.iter().enumerate() {
        let used = st.key.used[..p.types].to_vec();
        match by.get(&used) {
            Some(&o) if finals[o].value <= st.value => {}
            _ => {
                by.insert(used, s);
            }
        }
    }
    let mut list: Vec<(Vec<u16>, usize)> = by.into_iter().collect();
    list.sort();
    for (used, s) in list {
        let plan = reconstruct(p, data, table, full, s, costs);
        per_usage.push((
            used.iter().map(|&x| x as usize).collect(),
            finals[s].value,
            plan,
        ));
    }
    per_usage
}

/// A lower bound on the optimum (the slowest group on its fastest device; the fastest total
/// compute over all devices, its sum certified from below and the division's rounding taken
/// off) and a value no stage's load can exceed (every group at its slowest, every transfer
/// paid at its dearest link as sender and as receiver).
fn bounds(p: &Prepared) -> (f64, f64) {
    let cpus = p.kinds.iter().any(|k| k.cpus > 0);
    let devices: usize = p.kinds.iter().map(|k| k.machines.len() * k.devices()).sum();
    let (mut lower, mut total, mut ceiling) = (0.0f64, Sum::ZERO, 0.0);
    for g in 0..p.c.len() {
        let acc = (0..p.types).filter(|_| p.supported[g]).map(|t| p.x[t][g]);
        let fastest = acc
            .clone()
            .fold(if cpus { p.cpu[g] } else { f64::INFINITY }, f64::min);
        lower = lower.max(fastest);
        total = total.plus(fastest);
        ceiling += acc.fold(if cpus { p.cpu[g] } else { 0.0 }, f64::max);
    }
    if total.value().is_finite() {
        let share = total.lower_bound() / devices.max(1) as f64;
        lower = lower.max(share * (1.0 - 4.0 * crate::model::numerics::UNIT_ROUNDOFF));
    }
    for t in &p.transfers {
        let dearest = p
            .kinds
            .iter()
            .flat_map(|k| [Some(k.host), k.peer, Some(k.network)])
            .flatten()
            .map(|l| l.time(t))
            .fold(0.0, f64::max);
        ceiling += 2.0 * dearest;
    }
    (lower.max(1e-12), ceiling.max(lower) * (1.0 + 1e-9) + 1e-12)
}

enum Run {
    /// The states of every ideal, and the pairs relaxed.
    Done(Vec<Vec<State>>, u64),
    /// Why, the states kept so far and the pairs relaxed.
    Stopped(StopReason, usize, u64),
}

/// What every ideal of a [`run`] reads: the problem, the ideals, the ideals in order of
/// their fastest time (`keys`) for the window of predecessors within `bound`, and the
/// pruning.
struct Sweep<'a> {
    p: &'a Prepared,
    data: &'a IdealData,
    order: Vec<u32>,
    keys: Vec<f64>,
    bound: f64,
    track: bool,
    tail: Option<Tail>,
}

impl Sweep<'_> {
    /// The undominated states of ideal `i` ([`keep_undominated`]) from those of the ideals
    /// `j ⊂ i` below `lo` (`done`), and how many pairs `(j, i)` were relaxed.
    fn states_of(&self, i: usize, lo: usize, done: &[Vec<State>]) -> (Vec<State>, u64) {
        let last = i == self.data.ideals.len() - 1;
        let mut found: FxHashMap<Key, u32> = FxHashMap::default();
        let mut states: Vec<State> = Vec::new();
        let hi_key = self.data.fastest[i];
        let h_i = match (&self.tail, self.data.ideals.get(i)) {
            (None, _) => 0,
            (_, Set::Prefix(len)) => len,
            (_, Set::Bits(b)) => b.hi(),
        };
        let slack = 1e-9 * hi_key.abs().max(1.0);
        let from = if self.bound.is_finite() {
            self.keys
                .partition_point(|&x| x < hi_key - self.bound - slack)
        } else {
            0
        };
        let to = self.keys.partition_point(|&x| x <= hi_key + slack);
        let mut scratch = Scratch::default();
        let mut relaxed = 0;
        for &j in &self.order[from..to] {
            let j = j as usize;
            if j >= lo || done[j].is_empty() || !self.data.ideals.is_subset(j, i) {
                continue;
            }
            relaxed += 1;
            relax(
                self.p,
                self.data,
                (j, i),
                &done[j],
                Pruning {
                    bound: self.bound,
                    track: self.track,
                    tail: self.tail.as_ref().filter(|_| !last).map(|t| (t, h_i)),
                },
                &mut scratch,
                &mut |key, value, back| match found.get(&key) {
                    Some(&at) => {
                        let st = &mut states[at as usize];
                        if value < st.value {
                            st.value = value;
                            st.back = Some(back);
                        }
                    }
                    None => {
                        found.insert(key, states.len() as u32);
                        states.push(State {
                            key,
                            value,
                            back: Some(back),
                        });
                    }
                },
            );
        }
        (keep_undominated(states), relaxed)
    }
}

/// The recurrence over `data`'s ideals, level by level, states of value above `upper_bound`
/// dropped and dominated states removed ([`keep_undominated`]).
fn run(
    p: &Prepared,
    data: &IdealData,
    tracking: Tracking,
    upper_bound: f64,
    tail_test: bool,
    budget: &Budget,
) -> Run {
    let count = data.ideals.len();
    let bound = if upper_bound.is_finite() {
        upper_bound * (1.0 + 1e-9) + 1e-12
    } else {
        f64::INFINITY
    };
    let mut order: Vec<u32> = (0..count as u32).collect();
    order.sort_by(|&a, &b| data.fastest[a as usize].total_cmp(&data.fastest[b as usize]));
    let keys: Vec<f64> = order.iter().map(|&i| data.fastest[i as usize]).collect();
    let start = Key {
        current: NONE,
        opened: [0; MAX_KINDS],
        usage: [0; MAX_TYPES + 1],
        used: [0; MAX_TYPES],
        labels: 0,
        guesses: 0,
    };
    let tail = match &data.ideals {
        _ if !tail_test || !bound.is_finite() => None,
        Family::Prefixes { .. } => Tail::new(p, bound, None, budget),
        Family::All(_) => crate::solve::bounds::cluster::chain::windows(&p.c, budget)
            .and_then(|r| Tail::new(p, bound, Some(r), budget)),
    };
    let sweep = Sweep {
        p,
        data,
        order,
        keys,
        bound,
        track: tracking == Tracking::PerUsage,
        tail,
    };
    let mut table: Vec<Vec<State>> = vec![Vec::new(); count];
    table[0].push(State {
        key: start,
        value: 0.0,
        back: None,
    });
    let pairs = std::sync::atomic::AtomicU64::new(0);
    let mut kept = 1;
    let levels = data.ideals.level_start();
    for level in 1..levels.len() - 1 {
        if let Err(e) = budget.check() {
            return Run::Stopped(
                e.into(),
                table.iter().map(Vec::len).sum(),
                pairs.into_inner(),
            );
        }
        let (lo, hi) = (levels[level], levels[level + 1]);
        let (done, rest) = table.split_at_mut(lo);
        let done: &[Vec<State>] = done;
        let out_of_budget = std::sync::atomic::AtomicBool::new(false);
        rest[..hi - lo]
            .par_iter_mut()
            .enumerate()
            .for_each(|(offset, slot)| {
                if out_of_budget.load(std::sync::atomic::Ordering::Relaxed) || budget.is_exhausted()
                {
                    out_of_budget.store(true, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
                let (states, relaxed) = sweep.states_of(lo + offset, lo, done);
                pairs.fetch_add(relaxed, std::sync::atomic::Ordering::Relaxed);
                *slot = states;
            });
        if out_of_budget.into_inner() {
            let reason = budget
                .check()
                .err()
                .map_or(StopReason::TimeLimit, StopReason::from);
            return Run::Stopped(reason, table.iter().map(Vec::len).sum(), pairs.into_inner());
        }
        kept += table[lo..hi].iter().map(Vec::len).sum::<usize>();
        let bytes = table_bytes(kept, hi);
        if budget.memory_bytes().is_some_and(|m| bytes > m) {
            let what = format!("the cluster DP's table ({kept} states over {hi} ideals)");
            if let Err(e) = budget.reserve(&what, bytes) {
                return Run::Stopped(e.into(), kept, pairs.into_inner());
            }
        }
    }
    Run::Done(table, pairs.into_inner())
}

/// Bytes of a table of `states` states over `ideals` ideals (each ideal's vector header
/// and the states themselves), checked against `--memory-budget` after every level.
fn table_bytes(states: usize, ideals: usize) -> f64 {
    states as f64 * std::mem::size_of::<State>() as f64
        + ideals as f64 * std::mem::size_of::<Vec<State>>() as f64
}

/// Drops every state that another state of the same ideal dominates: same current machine
/// kind, labels, guesses and usage across machines, at most as many machines opened of every
/// kind and devices used on the current machine, and a value at most as large. Every
/// continuation of the dominated state is open to the dominating one at the same cost, so
/// the optimum (and every per-usage optimum) is kept.
fn keep_undominated(mut states: Vec<State>) -> Vec<State> {
    if states.len() < 2 {
        return states;
    }
    let group = |k: &Key| (k.current, k.labels, k.guesses, k.used);
    states.sort_by(|a, b| {
        group(&a.key)
            .cmp(&group(&b.key))
            .then(a.value.total_cmp(&b.value))
    });
    let mut kept: Vec<State> = Vec::with_capacity(states.len());
    let mut group_start = 0;
    for st in states {
        if kept
            .get(group_start)
            .is_none_or(|k| group(&k.key) != group(&st.key))
        {
            group_start = kept.len();
        }
        let dominated = kept[group_start..].iter().any(|k| {
            k.value <= st.value
                && k.key.opened.iter().zip(&st.key.opened).all(|(a, b)| a <= b)
                && k.key.usage.iter().zip(&st.key.usage).all(|(a, b)| a <= b)
        });
        if !dominated {
            kept.push(st);
        }
    }
    kept
}

/// Per-pair lists, reused across pairs.
#[derive(Default)]
struct Scratch {
    /// Transfers S sends (producer in S, a receiver outside S).
    sends: Vec<u32>,
    /// Transfers S receives from J: (transfer, producer's position in J's frontier).
    from_j: Vec<(u32, u8)>,
    /// Transfers S receives from outside I: (transfer, producer's position in J's upstream
    /// list or u8::MAX, producer's position in I's upstream list).
    from_later: Vec<(u32, u8, u8)>,
    /// Positions in J's upstream list of producers placed in S.
    placed: Vec<u8>,
    /// For each position of I's frontier: the producer is in S (u8::MAX) or its position in
    /// J's frontier.
    label_from: Vec<u8>,
    /// For each position of I's upstream list: the producer's position in J's upstream list,
    /// or u8::MAX.
    guess_from: Vec<u8>,
    /// Distinct new pending producers of a choice: (position in I's upstream list, cost if
    /// on a later machine, on a CPU core here, on an accelerator here).
    pending: Vec<(u8, f64, f64, f64)>,
}

fn position(list: &[u32], g: usize) -> Option<u8> {
    list.binary_search(&(g as u32)).ok().map(|k| k as u8)
}

/// The tail test (module doc, "Pruning"): the table of [`crate::solve::bounds::cluster::chain`]'s relaxed
/// chain at the bound `B`, `T[u]` the earliest position `h` of the groups' numbering from
/// which a vector `u` of free devices (per type, then CPU cores) can still take the groups
/// after it with loads `≤ B`, compute and memory only. Over all ideals the rest of a state
/// at `I` is charged from `h = hi(I)` with the windows `R̂`; over the prefixes the rest is
/// exactly the interval after `h` (windows `R̂(l) = l`). A state whose `h` is below `T` of
/// its free devices cannot end within `B` and is dropped.
struct Tail {
    chain: Chain,
    start: Vec<u32>,
}

/// Usage vectors above this: no tail test.
const MAX_TAIL_VECTORS: usize = 1 << 20;

impl Tail {
    /// `windows`: `R̂` for the family of all ideals, `None` for the prefixes.
    fn new(p: &Prepared, bound: f64, windows: Option<Vec<usize>>, budget: &Budget) -> Option<Tail> {
        let n = p.c.len();
        let per = |k: &Kind, c: usize| if c < p.types { k.per_type[c] } else { k.cpus };
        let classes = (0..=p.types)
            .map(|c| Class {
                count: p
                    .kinds
                    .iter()
                    .map(|k| k.machines.len() * per(k, c))
                    .sum::<usize>()
                    .min(n),
                memory: p.memory.get(c).copied().unwrap_or(f64::INFINITY),
                cpu: c == p.types,
                times: (0..n)
                    .map(|g| match c < p.types {
                        true if p.supported[g] => p.x[c][g],
                        true => 0.0,
                        false => p.cpu[g],
                    })
                    .collect(),
            })
            .collect();
        let chain = Chain::new(
            classes,
            p.size.iter().copied(),
            p.supported.iter().copied(),
            windows.unwrap_or_else(|| (0..=n).collect()),
            MAX_TAIL_VECTORS,
        )?;
        // The chain's charges and bytes are certified to be at most the exact sums
        // (`chain_bound`, "Rounding": a 1e9 ms group before 15 ms of work lost the optimum
        // 9.97 to the rounding of 1e9 + 14.97 − 1e9, and 1.5e-7 bytes after 4.8e14 came
        // out as 0.0625, over the memory, losing 7.0005 to 2475716.29); `B`'s slack covers
        // the DP's own stage sums (within 2u of the exact ones), so that a plan of value
        // exactly `B` is never dropped.
        let slack = bound * 1e-9 + 1e-12;
        let start = chain.earliest_starts(bound + slack, budget, false)?;
        Some(Tail { chain, start })
    }

    /// Whether the devices free in `key` can still take the groups after position `h`.
    fn can_finish(&self, p: &Prepared, key: &Key, h: usize) -> bool {
        let index = self.chain.index(|c| {
            let per = |k: &Kind| if c < p.types { k.per_type[c] } else { k.cpus };
            let mut free: usize = p
                .kinds
                .iter()
                .enumerate()
                .map(|(kk, k)| (k.machines.len() - key.opened[kk] as usize) * per(k))
                .sum();
            if key.current != NONE {
                let used = key.usage[if c < p.types { c } else { MAX_TYPES }] as usize;
                free += per(&p.kinds[key.current as usize]).saturating_sub(used);
            }
            free
        });
        h as u32 >= self.start[index]
    }
}

/// `Σ_{g ∈ I_i \\ I_j} values[g]` from the ideals' compensated sums `of`: their certified
/// difference ([`Sum::difference`], within 2⁻⁵² relative), or, when cancellation leaves too
/// few correct bits (a 1e15 group before 4.97 of work), the compensated sum over the
/// stage's groups themselves. Either way within a few ulps of the exact sum, as the
/// scorer's own sum is, so the DP's loads, memory checks and optimum agree with it.
fn stage_sum(data: &IdealData, i: usize, j: usize, of: &[Sum], values: &[f64]) -> f64 {
    of[i]
        .difference(of[j])
        .unwrap_or_else(|| direct_sum(data, i, j, values))
}

/// [`stage_sum`] for accelerator type `t` (its sums are stored per ideal, then per type).
fn stage_x(data: &IdealData, i: usize, j: usize, t: usize, values: &[f64]) -> f64 {
    data.x[i][t]
        .difference(data.x[j][t])
        .unwrap_or_else(|| direct_sum(data, i, j, values))
}

/// The compensated sum of `values` over `I_i \\ I_j`, group by group.
fn direct_sum(data: &IdealData, i: usize, j: usize, values: &[f64]) -> f64 {
    let (bi, bj) = (data.ideals.get(i), data.ideals.get(j));
    Sum::of(
        bi.groups()
            .into_iter()
            .filter(|&g| !bj.contains(g))
            .map(|g| values[g]),
    )
    .value()
}

/// What a relaxation is pruned by and keeps apart.
#[derive(Clone, Copy)]
struct Pruning<'a> {
    bound: f64,
    /// Usage per type is kept in the state ([`Tracking::PerUsage`]).
    track: bool,
    /// The tail test and the position the rest starts from (`hi(I)`), unless `I` is `V`.
    tail: Option<(&'a Tail, usize)>,
}

/// Every transition from the states at `j` to ideal `i`, reported as (new key, value, back).
fn relax(
    p: &Prepared,
    data: &IdealData,
    (j, i): (usize, usize),
    states: &[State],
    pruning: Pruning,
    sc: &mut Scratch,
    emit: &mut dyn FnMut(Key, f64, (u32, u32, Choice)),
) {
    border_transfers(p, data, j, i, sc);
    let costs = StageCosts::new(p, data, j, i, sc);
    let mut pending = std::mem::take(&mut sc.pending);
    let step = Step {
        p,
        data,
        j,
        pruning,
        sc,
        costs,
    };
    for (s_index, st) in states.iter().enumerate() {
        step.extend_state(s_index, st, &mut pending, emit);
    }
    sc.pending = pending;
}

/// Fills `sc` for the stage `S = I \ J`: the transfers it sends, receives from `J` and
/// receives from outside `I` (the crossing transfers of `I` and of `J`, each once: both
/// lists are sorted), the producers of `J`'s upstream list it places, and where `I`'s
/// labels and guesses come from in `J`'s lists.
fn border_transfers(p: &Prepared, data: &IdealData, j: usize, i: usize, sc: &mut Scratch) {
    let (bi, bj) = (data.ideals.get(i), data.ideals.get(j));
    let in_s = |g: usize| bi.contains(g) && !bj.contains(g);
    sc.sends.clear();
    sc.from_j.clear();
    sc.from_later.clear();
    let (ci, cj) = (&data.crossing[i], &data.crossing[j]);
    let (mut a, mut b) = (0, 0);
    while a < ci.len() || b < cj.len() {
        let ti = match (ci.get(a), cj.get(b)) {
            (Some(&x), Some(&y)) if x == y => {
                a += 1;
                b += 1;
                x
            }
            (Some(&x), Some(&y)) if x < y => {
                a += 1;
                x
            }
            (Some(&x), None) => {
                a += 1;
                x
            }
            (_, Some(&y)) => {
                b += 1;
                y
            }
            (None, None) => unreachable!(),
        };
        let t = &p.transfers[ti as usize];
        if in_s(t.p) {
            if t.recv.iter().any(|&r| !in_s(r)) {
                sc.sends.push(ti);
            }
        } else if t.recv.iter().any(|&r| in_s(r)) {
            if bj.contains(t.p) {
                sc.from_j.push((
                    ti,
                    position(&data.frontier[j], t.p)
                        .expect("a producer of J with a receiver outside J"),
                ));
            } else {
                let at_i = position(&data.upstream[i], t.p)
                    .expect("a producer outside I with a receiver in I");
                sc.from_later.push((
                    ti,
                    position(&data.upstream[j], t.p).unwrap_or(u8::MAX),
                    at_i,
                ));
            }
        }
    }
    sc.placed.clear();
    sc.placed.extend(
        data.upstream[j]
            .iter()
            .enumerate()
            .filter(|&(_, &g)| in_s(g as usize))
            .map(|(k, _)| k as u8),
    );
    sc.label_from.clear();
    sc.label_from.extend(data.frontier[i].iter().map(|&g| {
        if in_s(g as usize) {
            u8::MAX
        } else {
            position(&data.frontier[j], g as usize).expect("labelled in J")
        }
    }));
    sc.guess_from.clear();
    sc.guess_from.extend(
        data.upstream[i]
            .iter()
            .map(|&g| position(&data.upstream[j], g as usize).unwrap_or(u8::MAX)),
    );
}

/// What the stage `S = I \ J` costs, whatever the state: its size, compute per device
/// class, whether accelerators may take it, the fastest compute of the groups after `I`,
/// and per kind of machine what `S` pays to send on an accelerator of a machine without a
/// peer link and to receive from `J` when it opens a machine of that kind (all over the
/// network).
struct StageCosts {
    size: f64,
    cpu_time: f64,
    x: [f64; MAX_TYPES],
    acc_ok: bool,
    rest: f64,
    rest_slack: f64,
    send_cost: Vec<f64>,
    open_cost: Vec<f64>,
}

impl StageCosts {
    fn new(p: &Prepared, data: &IdealData, j: usize, i: usize, sc: &Scratch) -> StageCosts {
        let stage = |of: &[Sum], values: &[f64]| stage_sum(data, i, j, of, values);
        let mut x = [0.0; MAX_TYPES];
        for (t, xt) in x.iter_mut().enumerate().take(p.types) {
            *xt = stage_x(data, i, j, t, &p.x[t]);
        }
        let last = data.fastest.len() - 1;
        let send_cost = p
            .kinds
            .iter()
            .map(|k| {
                if k.peer.is_some() {
                    0.0
                } else {
                    sc.sends
                        .iter()
                        .map(|&t| k.host.time(&p.transfers[t as usize]))
                        .sum()
                }
            })
            .collect();
        let open_cost = p
            .kinds
            .iter()
            .map(|k| {
                sc.from_j
                    .iter()
                    .map(|&(t, _)| k.network.time(&p.transfers[t as usize]))
                    .sum()
            })
            .collect();
        StageCosts {
            size: stage(&data.size, &p.size),
            cpu_time: stage(&data.cpu, &p.cpu),
            x,
            acc_ok: data.unsupported[i] == data.unsupported[j],
            rest: data.fastest[last] - data.fastest[i],
            rest_slack: 1e-9 * data.fastest[last].max(1.0),
            send_cost,
            open_cost,
        }
    }

    /// The stage's compute on a CPU core (`ty == NONE`) or an accelerator of type `ty`;
    /// `None` when it may not run there or does not fit its memory.
    #[inline]
    fn compute(&self, p: &Prepared, ty: u8) -> Option<f64> {
        if ty == NONE {
            Some(self.cpu_time)
        } else if self.acc_ok && self.size <= p.memory[ty as usize] {
            Some(self.x[ty as usize])
        } else {
            None
        }
    }
}

/// One state at `J` being extended: its index, the state, the devices free before and on
/// its current machine, and what receiving from `J` on the current machine costs an
/// accelerator and a CPU core.
struct Origin<'s> {
    s_index: usize,
    st: &'s State,
    free_before: usize,
    free_here: usize,
    here_acc: f64,
    here_cpu: f64,
}

/// The relaxation of one stage `S = I \ J` (the ideals' data, the border in the scratch,
/// the stage's costs) under its pruning.
struct Step<'a> {
    p: &'a Prepared,
    data: &'a IdealData,
    j: usize,
    pruning: Pruning<'a>,
    sc: &'a Scratch,
    costs: StageCosts,
}

type Emit<'e> = dyn FnMut(Key, f64, (u32, u32, Choice)) + 'e;

impl Step<'_> {
    /// Every choice for the stage from state `st`: a device of the current machine (per
    /// type, then a CPU core) while one is free, then, when every guess says "later", the
    /// first device of each type or a CPU core on a new machine of every kind left.
    fn extend_state(
        &self,
        s_index: usize,
        st: &State,
        pending: &mut Vec<(u8, f64, f64, f64)>,
        emit: &mut Emit,
    ) {
        let p = self.p;
        let key = &st.key;
        let guesses_all_later = (0..self.data.upstream[self.j].len())
            .all(|k| matches!(get2(key.guesses, k), NO_GUESS | G_LATER));
        let (free_before, free_here) = free_devices(p, key);
        let (here_acc, here_cpu) = self.receive_here(key);
        let at = Origin {
            s_index,
            st,
            free_before,
            free_here,
            here_acc,
            here_cpu,
        };
        if key.current != NONE {
            let k = &p.kinds[key.current as usize];
            for t in 0..p.types {
                if (key.usage[t] as usize) < k.per_type[t].min(p.clamp) {
                    let choice = Choice {
                        opens: false,
                        kind: key.current,
                        ty: t as u8,
                    };
                    self.consider(&at, choice, pending, emit);
                }
            }
            if (key.usage[MAX_TYPES] as usize) < k.cpus.min(p.clamp) {
                let choice = Choice {
                    opens: false,
                    kind: key.current,
                    ty: NONE,
                };
                self.consider(&at, choice, pending, emit);
            }
        }
        if guesses_all_later {
            for (kk, k) in p.kinds.iter().enumerate() {
                if (key.opened[kk] as usize) < k.machines.len() {
                    for t in 0..p.types {
                        if k.per_type[t] > 0 {
                            let choice = Choice {
                                opens: true,
                                kind: kk as u8,
                                ty: t as u8,
                            };
                            self.consider(&at, choice, pending, emit);
                        }
                    }
                    if k.cpus > 0 {
                        let choice = Choice {
                            opens: true,
                            kind: kk as u8,
                            ty: NONE,
                        };
                        self.consider(&at, choice, pending, emit);
                    }
                }
            }
        }
    }

    /// Receiving from `J` on the current machine, for an accelerator and for a CPU core.
    #[inline]
    fn receive_here(&self, key: &Key) -> (f64, f64) {
        let (mut here_acc, mut here_cpu) = (0.0, 0.0);
        if key.current != NONE {
            let kind = &self.p.kinds[key.current as usize];
            for &(t, k) in &self.sc.from_j {
                let t = &self.p.transfers[t as usize];
                let label = get2(key.labels, k as usize);
                here_acc += receive(kind, false, label, t);
                here_cpu += receive(kind, true, label, t);
            }
        }
        (here_acc, here_cpu)
    }

    /// The stage on `choice` from `at`: its load (compute, sends, receipts from `J` and
    /// from earlier-guessed producers), pruned by the bound, the rest's compute on the
    /// devices left, the guesses it contradicts and the tail test; then the new key,
    /// emitted once per combination of guesses for its new pending producers.
    #[inline]
    fn consider(
        &self,
        at: &Origin,
        choice: Choice,
        pending: &mut Vec<(u8, f64, f64, f64)>,
        emit: &mut Emit,
    ) {
        let (p, key, st) = (self.p, &at.st.key, at.st);
        let bound = self.pruning.bound;
        let kind = &p.kinds[choice.kind as usize];
        let Some(mut load) = self.direct_load(at, choice) else {
            return;
        };
        let mine = here_label(kind, choice.ty);
        if !choice.opens && self.contradicts_guesses(key, mine) {
            return;
        }
        self.pending_receipts(key, choice, &mut load, pending);
        if load.max(st.value) > bound {
            return;
        }
        let next = self.next_key(key, choice, mine);
        if self
            .pruning
            .tail
            .is_some_and(|(t, h)| !t.can_finish(p, &next, h))
        {
            return;
        }
        let back = (self.j as u32, at.s_index as u32, choice);
        if pending.is_empty() {
            emit(next, load.max(st.value), back);
            return;
        }
        let (options, n_options) = guess_options(p, kind, &next);
        if n_options == 0 {
            return;
        }
        let combos = n_options.pow(pending.len() as u32);
        for combo in 0..combos {
            let mut value = load;
            let mut guessed = next;
            let mut c = combo;
            for e in pending.iter() {
                let g = options[c % n_options];
                c /= n_options;
                value += match g {
                    G_LATER => e.1,
                    G_CPU => e.2,
                    _ => e.3,
                };
                set2(&mut guessed.guesses, e.0 as usize, g);
            }
            let value = value.max(st.value);
            if value <= bound {
                emit(guessed, value, back);
            }
        }
    }

    /// The stage's load on `choice` before the receipts from outside `I`: compute, sends
    /// (an accelerator without a peer link) and receipts from `J` (over the network when it
    /// opens a machine); `None` when it may not run there, passes the bound, or leaves too
    /// few devices for the rest (every stage's load is at least its fastest compute;
    /// opening a machine forfeits the current machine's free devices).
    #[inline]
    fn direct_load(&self, at: &Origin, choice: Choice) -> Option<f64> {
        let c = &self.costs;
        let bound = self.pruning.bound;
        let cpu = choice.ty == NONE;
        let mut load = c.compute(self.p, choice.ty)?;
        if !cpu {
            load += c.send_cost[choice.kind as usize];
        }
        load += if choice.opens {
            c.open_cost[choice.kind as usize]
        } else if cpu {
            at.here_cpu
        } else {
            at.here_acc
        };
        if load.max(at.st.value) > bound {
            return None;
        }
        if bound.is_finite() {
            let forfeit = if choice.opens { at.free_here } else { 0 };
            let left = at.free_before.saturating_sub(1 + forfeit);
            if c.rest > left as f64 * bound + c.rest_slack {
                return None;
            }
        }
        Some(load)
    }

    /// A producer of `J`'s upstream list placed in the stage was guessed elsewhere than
    /// the stage's label `mine` (the stage stays on the current machine).
    #[inline]
    fn contradicts_guesses(&self, key: &Key, mine: u8) -> bool {
        self.sc.placed.iter().any(|&k| {
            !matches!(get2(key.guesses, k as usize), NO_GUESS)
                && get2(key.guesses, k as usize) != guess_of(mine)
        })
    }

    /// Adds to `load` the receipts from producers outside `I` whose place is guessed, and
    /// lists in `pending` (per producer) what the others would cost later, on a CPU core
    /// here or on an accelerator here.
    #[inline]
    fn pending_receipts(
        &self,
        key: &Key,
        choice: Choice,
        load: &mut f64,
        pending: &mut Vec<(u8, f64, f64, f64)>,
    ) {
        let kind = &self.p.kinds[choice.kind as usize];
        let cpu = choice.ty == NONE;
        pending.clear();
        for &(t, at_j, at_i) in &self.sc.from_later {
            let t = &self.p.transfers[t as usize];
            let old = if choice.opens || at_j == u8::MAX {
                NO_GUESS
            } else {
                get2(key.guesses, at_j as usize)
            };
            if old != NO_GUESS {
                *load += receive(kind, cpu, label_of(old), t);
                continue;
            }
            let costs = (
                receive(kind, cpu, EARLIER, t),
                receive(kind, cpu, HERE_CPU, t),
                receive(kind, cpu, HERE_ACC, t),
            );
            match pending.iter_mut().find(|e| e.0 == at_i) {
                Some(e) => {
                    e.1 += costs.0;
                    e.2 += costs.1;
                    e.3 += costs.2;
                }
                None => pending.push((at_i, costs.0, costs.1, costs.2)),
            }
        }
    }

    /// The key after the stage: the machine opened and the devices used, `I`'s labels
    /// (the stage's own producers get `mine`; the rest keep `J`'s, or become "earlier" on
    /// a new machine) and its guesses (kept from `J` unless a machine opens).
    #[inline]
    fn next_key(&self, key: &Key, choice: Choice, mine: u8) -> Key {
        let cpu = choice.ty == NONE;
        let mut next = *key;
        if choice.opens {
            next.current = choice.kind;
            next.opened[choice.kind as usize] += 1;
            next.usage = [0; MAX_TYPES + 1];
        }
        next.usage[if cpu { MAX_TYPES } else { choice.ty as usize }] += 1;
        if self.pruning.track && !cpu {
            next.used[choice.ty as usize] += 1;
        }
        next.labels = 0;
        for (k, &from) in self.sc.label_from.iter().enumerate() {
            let label = if from == u8::MAX {
                mine
            } else if choice.opens {
                EARLIER
            } else {
                get2(key.labels, from as usize)
            };
            set2(&mut next.labels, k, label);
        }
        next.guesses = 0;
        if !choice.opens {
            for (k, &from) in self.sc.guess_from.iter().enumerate() {
                if from != u8::MAX {
                    set2(&mut next.guesses, k, get2(key.guesses, from as usize));
                }
            }
        }
        next
    }
}

/// Which guesses can still come true after `next`: a later machine must exist; a CPU core
/// or an accelerator of this machine must be free for the producer (one "here" guess on a
/// machine without a peer link).
#[inline]
fn guess_options(p: &Prepared, kind: &Kind, next: &Key) -> ([u8; 3], usize) {
    let mut options = [0u8; 3];
    let mut n_options = 0;
    if p.kinds
        .iter()
        .enumerate()
        .any(|(kk, k)| (next.opened[kk] as usize) < k.machines.len())
    {
        options[n_options] = G_LATER;
        n_options += 1;
    }
    let cpu_free = (next.usage[MAX_TYPES] as usize) < kind.cpus;
    let acc_free = (0..p.types).any(|t| (next.usage[t] as usize) < kind.per_type[t]);
    if kind.peer.is_some() {
        if cpu_free {
            options[n_options] = G_CPU;
            n_options += 1;
        }
        if acc_free {
            options[n_options] = G_ACC;
            n_options += 1;
        }
    } else if cpu_free || acc_free {
        options[n_options] = G_ACC;
        n_options += 1;
    }
    (options, n_options)
}

/// Devices still free in a state (on the current machine and on machines not yet opened),
/// and those on the current machine.
fn free_devices(p: &Prepared, key: &Key) -> (usize, usize) {
    let mut current = 0;
    if key.current != NONE {
        let k = &p.kinds[key.current as usize];
        current += (0..p.types)
            .map(|t| k.per_type[t].saturating_sub(key.usage[t] as usize))
            .sum::<usize>();
        current += k.cpus.saturating_sub(key.usage[MAX_TYPES] as usize);
    }
    let mut free = current;
    for (kk, k) in p.kinds.iter().enumerate() {
        free += (k.machines.len() - key.opened[kk] as usize) * k.devices();
    }
    (free, current)
}

/// The placement of state `s` at ideal `i`, devices numbered as the cluster numbers them.
fn reconstruct(
    p: &Prepared,
    data: &IdealData,
    table: &[Vec<State>],
    i: usize,
    s: usize,
    costs: &ClusterCosts,
) -> Placement {
    let mut stages: Vec<(usize, usize, Choice)> = Vec::new();
    let (mut i, mut s) = (i, s);
    while let Some((j, sj, choice)) = table[i][s].back {
        stages.push((j as usize, i, choice));
        i = j as usize;
        s = sj as usize;
    }
    stages.reverse();
    let cluster = costs.cluster();
    // First accelerator index of each machine and type, and first CPU index of each machine.
    let mut acc_of: HashMap<(usize, usize), Vec<usize>> = HashMap::new();
    for (d, a) in cluster.accelerators().iter().enumerate() {
        acc_of
            .entry((a.machine, a.accelerator_type))
            .or_default()
            .push(d);
    }
    let mut cpu_of: HashMap<usize, Vec<usize>> = HashMap::new();
    for (d, &m) in cluster.cpu_machines().iter().enumerate() {
        cpu_of.entry(m).or_default().push(d);
    }
    let mut opened = vec![0usize; p.kinds.len()];
    let mut machine = usize::MAX;
    let mut next: HashMap<(usize, u8), usize> = HashMap::new();
    let mut group_device = vec![Device::Cpu(0); p.c.len()];
    for (j, i, choice) in stages {
        if choice.opens {
            machine = p.kinds[choice.kind as usize].machines[opened[choice.kind as usize]];
            opened[choice.kind as usize] += 1;
        }
        let n = next.entry((machine, choice.ty)).or_insert(0);
        let device = if choice.ty == NONE {
            Device::Cpu(cpu_of[&machine][*n])
        } else {
            Device::Accelerator(acc_of[&(machine, choice.ty as usize)][*n])
        };
        *n += 1;
        let (bi, bj) = (data.ideals.get(i), data.ideals.get(j));
        for (g, slot) in group_device.iter_mut().enumerate() {
            if bi.contains(g) && !bj.contains(g) {
                *slot = device;
            }
        }
    }
    Placement::new(p.c.group_of.iter().map(|&g| group_device[g]).collect())
}

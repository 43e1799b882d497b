//! The machine bound: a lower bound on the TPS of every *contiguous* plan on a cluster whose
//! machines each hold accelerators of one type, from the chain relaxation of
//! [`super::chain`] taken machine by machine, with what each stage must receive.
//!
//! The chain bound counts every device's compute only and keeps a table over the vectors
//! of devices used per class, which is too large for clusters of hundreds of GPUs of
//! several types (97 × 81 × 81 × 33 vectors for 12 × 8 A100 + 10 × 8 V100 + 10 × 8 H100
//! with a CPU core per machine). On such clusters the stages of one machine are
//! consecutive and all of one type, and the first stage of every machine but the
//! pipeline's first receives over the network. This bound counts machines instead of
//! devices (13 × 11 × 11 vectors there) and charges each stage a lower bound on what it
//! receives.
//!
//! **Relaxation.** Number the groups topologically `0..n`, `P_l = {0..l−1}`, and let
//! `lo(I)` be the first group missing from an ideal `I` (`P_{lo(I)} ⊆ I`, `lo(I) ∉ I`) and
//! `R̂` the windows of [`super::chain`]: `I ⊆ P_{R̂(lo(I))}`. In a plan
//! `∅ = I_0 ⊂ … ⊂ I_r = V` let `l_i = lo(I_i)` (`l_0 = 0`, `l_r = n`). A stage with
//! `l_i > l_{i−1} = l` holds group `l` (missing from `I_{i−1}`, inside `P_{l_i} ⊆ I_i`) and
//! every group of `[m(l), l_i)` with `m(l) = max(R̂(l), l + 1)` (inside `I_i`, outside
//! `I_{i−1} ⊆ P_{R̂(l)}`). Every producer of group `l` below `l` is in `I_{i−1}`, on another
//! device: the stage receives it (`pred(l)`; a producer in a later group, a gradient
//! flowing back, is left out). So does every producer `u` below `l` with a
//! successor in `[m(l), l_i)`. Its load is at least
//!
//! ```text
//! charge_ρ(l, e) = x(l) + x[m(l), e) + Σ_{u ∈ pred(l)} c_ρ(u) + Σ_{u < l, u ∉ pred(l), f_l(u) < e} c_ρ(u)
//! ```
//!
//! at `e = l_i`, with `x` the compute on the stage's device, `f_l(u)` the first group of
//! `u`'s successors at or above `m(l)`, and `c_ρ(u)` the least price of receiving `u` in
//! the stage's *role* `ρ` on a machine of kind `κ`: the machine's first stage receives every
//! producer from an earlier machine, over its network link (`N`); a later accelerator
//! stage over the network, its peer or its host link (the least); a later CPU stage over
//! the network or the host link, or for nothing when the machine has no peer link or
//! another CPU core (the table of [`crate::model::cluster`]). Its memory holds the bytes of
//! those groups, and an accelerator none of them may be CPU-only. Stages with
//! `l_i = l_{i−1}` are relaxed to unused devices. (For `l = 0`, the pipeline's first stage,
//! nothing is received: group 0 has no producer.)
//!
//! **The window.** The groups of `(l, m(l))` may lie on either side of the cut. A
//! *descendant* `g` of `l` there is missing from `I_{i−1}` (as `l` is) and inside
//! `P_{l_i}` when `g < l_i`: the stage holds it, and is charged its compute, bytes and
//! CPU-only flag, and receives each of its producers `u < l` (in `P_l ⊆ I_{i−1}`) not
//! already counted above (`reads(l)`, each producer once, at `c_ρ(u)`). Another group `g`
//! of the window is either in `I_{i−1}` (the stage receives what it feeds in the stage) or
//! in the stage (its compute): the least of the two, the receipt priced as for a later
//! stage of the role's device even in a first role (below: such a `g` may sit on the
//! machine's own earlier, `lo`-empty, stage).
//!
//! **One machine.** `charge_ρ(l, e)` grows with `e`, so `back_ρ(e) = min{l < e : the stage
//! fits}` (or `e` when none does: the device unused) is non-decreasing in `e`, and a
//! machine of kind `κ` whose stages are followed by the rest starting at `x` (`x = n`:
//! nothing follows) is charged right to left, `x ← back_ρ(x)` per stage, over the orders
//! of its `g` accelerators and its CPU cores (at most [`MAX_CPUS_PER_MACHINE`], at every
//! position among them). In a plan, let `d` be the machine's leftmost stage with
//! `l_i > l_{i−1}`: the stages left of it keep `lo` where it is, so every producer below
//! its `l` lies on an earlier machine, and `d` is charged in role "first"; the stages right
//! of it in role "later"; those left of it are relaxed away, so the stages from `d` on are
//! a *suffix* of one of the orders. Each suffix is charged right to left, the later stages
//! by `back_ρ`, its leftmost `d` by `first_ρ(at) = back_ρ(at)` when that leaves `d`
//! non-empty (`< at`), else `next_ρ(at)`, the least `l ≥ at` whose group fits alone in the
//! role: in a plan `d` holds `[l_d, a)` with `l_d < a` and `a ≥ at` (the relaxed positions
//! never exceed the plan's), so either `l_d < at` and `[l_d, at)` fits, or `l_d ≥ at` and
//! `[l_d, l_d + 1)` fits (the charge grows with `e`). `B_κ(x)` is the least over the
//! suffixes of every order and `x` itself (the machine unused); by monotonicity each
//! stage's least start is the best for the stages before it. (Charging the leftmost
//! position of the order "first" even when it is empty, as before, let an empty CPU stage
//! there make all the accelerators "later": on the 384-layer three-type cluster no machine
//! paid for its network input.) (`back_ρ(e)` scans `l` downwards: the charge is not
//! monotone in `l`, but `x[m(l), e)` is, and the scan stops where it alone exceeds `τ`.)
//!
//! **Debts.** The window's non-descendant groups charged at the least of compute and
//! receipt are computed by *some* earlier stage, which the relaxation above charges to none
//! (a group `g > l_{i−1}` lies beyond every earlier stage's interval). On a transformer
//! that lets a stage start at the query projection with the key and value projections
//! received, while no stage computes them. Call stage `i`'s start *open* when
//! `S = W(l) ∩ I_{i−1} = ∅` (`W(l)` the non-descendant groups of the window, `l = l_{i−1}`)
//! and *owed* otherwise. Open: every `g ∈ W(l)` below `l_i` lies in `P_{l_i} ⊆ I_i` and
//! not in `I_{i−1}`, so the stage holds it and is charged its compute, bytes and CPU-only
//! flag (instead of the least of compute and receipt). Owed: the charge above. Where does
//! a `g ∈ S` lie? Let `j < i` be the last stage before `i` that moves `lo` (`l_j = l`;
//! the stages between keep `lo = l`). Either a stage between holds `g` (a device used, its
//! `lo` unmoved), or `g ∈ I_j`; then when `l ≥ m(l_{j−1})`, `g > l ≥ R̂(l_{j−1})` puts `g`
//! outside `I_{j−1}` and so inside stage `j`, whose load is at least its charge plus
//! `x_j(g) ≥ D(l)`, with `D(e)` the least compute (on stage `j`'s device) of a
//! non-descendant window group of any `y ≥ e` (a suffix minimum, so that `D` and the
//! charge ending owed at `e` grow with `e`). When `l < m(l_{j−1})` nothing is added.
//! So inside a machine a position carries a mode, and the right-to-left pass keeps the
//! least open start `a` and the least owed start `b` (kept only when `b < a`): ending
//! open at `x` costs no more than ending at any `x' ≥ x` in either mode, and ending owed
//! at `x` no more than owed at `x' ≥ x` (both charges grow with the end). A later stage's
//! device gives `(a', b')` from: unused (`a`, `b` kept), holding an owed start's groups
//! alone (`a' ≤ b`: the modes before it are at least as cheap as open), or a stage from
//! an open or owed start to the open state at `a` or the owed state at `b` (paying `D`).
//! An owed start is charged the least charge, which is the open one where `W(l) = ∅`, so
//! a least owed start `l` with `W(l) = ∅` is an open state. The machine's leftmost stage
//! `d` is charged as an owed start (the least) and ends in either state; the machine's
//! start is taken open (the stages before it may pay a debt or not: open is the
//! cheaper), so the table over machines below keeps one position per vector.
//!
//! **Machines.** Over the vectors `u` of machines used per kind (the kinds of
//! [`crate::solve::cluster::machine_chain`]), in a plan the machines are a sequence, each one's stages
//! consecutive:
//!
//! ```text
//! T[0] = n,   T[u] = min over κ with u_κ ≥ 1 of min(T[u − e_κ], B_κ(T[u − e_κ]))
//! ```
//!
//! and `τ` is feasible iff `T[all machines] = 0`. The bound is the largest `τ` found infeasible
//! (doubling, then bisection to [`RELATIVE_WIDTH`]), scaled down by `1e-12`. Rounding:
//! compute and bytes are [`crate::model::numerics::Sum::difference_lower_bound`]s of
//! compensated prefix sums and the receive prices are scaled down by `1e-12`, so every test
//! errs on the side of fitting.
//!
//! [`machine_bound`] leaves the debts out ([`Debts::Off`]: one state per position, every
//! start charged as owed, no debt); [`machine_bound_with`] with [`Debts::On`] charges them.
//! With the debts on the 384-layer BERT on `12x8xa100-80gb+10x8xv100+10x8xh100` the bound
//! went from 0.871533 to 0.877707 ms (the best plan: 0.884611 ms).
//!
//! **Cost.** The receipts (`pred(l)` and the `f_l(u)`) once: O(Σ_l |frontier(l)|) for the
//! producers below `l` with a successor at or above `m(l)` (at most [`MAX_RECEIPTS`], else
//! only `pred(l)` is counted, still a relaxation). Per `τ`, each `back_ρ(e)` at most once
//! per kind and role (memoised), a scan of the starts whose interval fits, and
//! O(Π_κ (n_κ + 1) · K · (g + q)·(q + 1)) for the table; the modes make four `back`
//! tables per role instead of one.

use super::chain::{prefix_sums, windows};
use crate::model::cluster::Machine;
use crate::model::contraction::Contraction;
use crate::model::numerics::Sum;
use crate::model::{ClusterCosts, Workload};
use crate::solve::budget::Budget;

/// Most CPU cores per machine whose positions among the machine's stages are tried.
pub const MAX_CPUS_PER_MACHINE: usize = 2;
/// Most vectors of machines used per kind.
pub const MAX_MACHINE_VECTORS: usize = 1_000_000;
/// Most `(l, u)` pairs of producers below `l` read above `m(l)` kept (module documentation).
pub const MAX_RECEIPTS: usize = 20_000_000;
/// Relative width at which the bisection on `τ` stops.
pub const RELATIVE_WIDTH: f64 = 1e-7;
/// Largest window `(l, m(l))` whose groups `charge` looks at.
pub const MAX_WINDOW: usize = 64;
/// Relative slack on a receive price (module documentation, "Rounding").
const PRICE_SLACK: f64 = 1e-12;

/// A stage's role on its machine (module documentation).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    AccFirst,
    AccLater,
    CpuFirst,
    CpuLater,
}

const ROLES: [Role; 4] = [
    Role::AccFirst,
    Role::AccLater,
    Role::CpuFirst,
    Role::CpuLater,
];

impl Role {
    fn cpu(self) -> bool {
        matches!(self, Role::CpuFirst | Role::CpuLater)
    }

    /// The role of a later stage on the same kind of device.
    fn later(self) -> Role {
        if self.cpu() {
            Role::CpuLater
        } else {
            Role::AccLater
        }
    }
}

/// How a stage's start meets the window of its `l` (module documentation, "Debts"): `Open`
/// when no non-descendant window group of `l` is in the ideal before it (the stage computes
/// every such group below its end), `Owed` when one is (the stage may receive them; the
/// stages before owe their compute).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Open,
    Owed,
}

/// A stage's role with the modes of its start and of its end (module documentation).
#[derive(Clone, Copy)]
struct Way {
    role: Role,
    start: Mode,
    end: Mode,
}

impl Way {
    /// The memo row of `back` for this way.
    fn row(self) -> usize {
        self.role as usize * 4
            + 2 * usize::from(self.start == Mode::Owed)
            + usize::from(self.end == Mode::Owed)
    }
}

/// Rows of `back` memos (one per way) before the `next_fit` rows (one per role).
const BACK_ROWS: usize = 4 * ROLES.len();
/// No state in this mode.
const NONE: usize = usize::MAX;

/// What a stage starting at `l` must receive (module documentation): the producers of
/// group `l`, and the producers below `l` with the first group `f_l(u)` they feed at or
/// above `m(l)`.
struct Receipts {
    /// `pred[l]`: the distinct producer nodes of group `l` in groups below `l`.
    pred: Vec<Vec<u32>>,
    /// `later[l]`: `(f_l(u), u)` sorted by `f_l(u)`.
    later: Vec<Vec<(u32, u32)>>,
    /// `window[l]`: the groups of `(l, m(l))` (module documentation, "The window"), empty
    /// past [`MAX_WINDOW`].
    window: Vec<Vec<WindowGroup>>,
    /// `reads[l]`: `(g, f, u)` for each producer `u` below `l`, not in `pred[l]`, of a
    /// descendant of `l` in the window, `g` the first such descendant it feeds and `f` the
    /// `f_l(u)` under which `later[l]` counts it (`u32::MAX` when it does not).
    reads: Vec<Vec<(u32, u32, u32)>>,
}

/// A group `g` of a window: a descendant of the window's `l`, or the nodes with the groups
/// they feed.
struct WindowGroup {
    g: u32,
    descendant: bool,
    /// For a non-descendant: `(u, the groups u feeds)` per node `u` of `g` feeding another
    /// group.
    feeds: Vec<(u32, Vec<u32>)>,
}

/// One kind of machine: its devices, compute, and the receive prices per role.
struct Kind {
    count: usize,
    accelerators: usize,
    cpus: usize,
    memory: f64,
    /// Prefix sums of the groups' compute on the kind's accelerators (0 where a group may
    /// not run there; `unsupported` forbids those).
    acc_time: Vec<Sum>,
    /// `price[role][u]`: `c_ρ(u)` for node `u`, scaled down by [`PRICE_SLACK`].
    price: [Vec<f64>; 4],
    /// `D(e)` on the kind's accelerators (module documentation, "Debts"); filled by
    /// [`Relaxed::debts`].
    debt: Vec<f64>,
}

/// Whether the machine bound charges the debts of owed window groups (module
/// documentation, "Debts"): `On` is never lower and costs about four times the `back`
/// scans, so the planner runs it only after a DP that stops before its proof.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Debts {
    Off,
    On,
}

/// The machine bound of `w` on its cluster (module documentation) without the debts, or 0
/// when the cluster is not one of machines of one type each, a table is too large, or
/// `budget` runs out.
pub fn machine_bound(w: &Workload, costs: &ClusterCosts, budget: &Budget) -> f64 {
    machine_bound_with(w, costs, budget, Debts::Off)
}

/// [`machine_bound`] with or without the debts.
pub fn machine_bound_with(
    w: &Workload,
    costs: &ClusterCosts,
    budget: &Budget,
    debts: Debts,
) -> f64 {
    let c = Contraction::new(w);
    let n = c.len();
    if n == 0 {
        return 0.0;
    }
    let Some(r_hat) = windows(&c, budget) else {
        return 0.0;
    };
    let Some(kinds) = kinds(w, costs, &c) else {
        return 0.0;
    };
    let starts: Vec<usize> = (0..n).map(|l| r_hat[l].max(l + 1)).collect();
    let mut relaxed = Relaxed {
        n,
        receipts: receipts(w, &c, &starts),
        starts,
        bytes: prefix_sums(c.groups.iter().map(|g| g.size_bytes)),
        unsupported: std::iter::once(0)
            .chain(c.groups.iter().scan(0u32, |s, g| {
                *s += u32::from(!g.supported_on_accelerator);
                Some(*s)
            }))
            .collect(),
        cpu_time: prefix_sums(c.groups.iter().map(|g| g.cpu_latency)),
        cpu_debt: Vec::new(),
        debts,
        kinds,
    };
    relaxed.cpu_debt = relaxed.debts(&relaxed.cpu_time);
    for k in 0..relaxed.kinds.len() {
        relaxed.kinds[k].debt = relaxed.debts(&relaxed.kinds[k].acc_time);
    }
    relaxed.bisect(budget)
}

/// Whether two machines are interchangeable (all but the name equal): one kind here and in
/// [`crate::solve::cluster::machine_chain`].
pub(crate) fn same_kind(a: &Machine, b: &Machine) -> bool {
    a.accelerators == b.accelerators
        && a.cpus == b.cpus
        && a.host == b.host
        && a.peer == b.peer
        && a.network == b.network
}

/// The machines by kind with their prices; `None` when a machine holds no accelerator or
/// several types, has more than [`MAX_CPUS_PER_MACHINE`] CPU cores, or the vectors of
/// machines are too many.
fn kinds(w: &Workload, costs: &ClusterCosts, c: &Contraction) -> Option<Vec<Kind>> {
    let cluster = costs.cluster();
    let machines = cluster.machines();
    let mut reps: Vec<(usize, usize)> = Vec::new(); // (representative machine, count)
    for (m, machine) in machines.iter().enumerate() {
        if machine.accelerators.len() != 1
            || machine.accelerators[0].1 == 0
            || machine.cpus > MAX_CPUS_PER_MACHINE
        {
            return None;
        }
        match reps
            .iter_mut()
            .find(|(r, _)| same_kind(&machines[*r], machine))
        {
            Some(k) => k.1 += 1,
            None => reps.push((m, 1)),
        }
    }
    let vectors = reps
        .iter()
        .try_fold(1usize, |v, &(_, k)| v.checked_mul(k + 1))?;
    if vectors > MAX_MACHINE_VECTORS {
        return None;
    }
    let kinds = reps
        .iter()
        .map(|&(m, count)| {
            let machine = &machines[m];
            let (ty, accelerators) = machine.accelerators[0];
            let times = costs.times_of_type(ty);
            let acc_time = prefix_sums(c.groups.iter().map(|g| match g.supported_on_accelerator {
                true => g.nodes.iter().map(|&v| times[v]).sum(),
                false => 0.0,
            }));
            // A later CPU stage reads for nothing from another CPU core of its machine, or
            // from an accelerator of a machine without a peer link.
            let cpu_free = machine.cpus >= 2 || machine.peer.is_none();
            let price = ROLES.map(|role| {
                (0..w.len())
                    .map(|u| {
                        let network = costs.network(m, u);
                        let p = match role {
                            Role::AccFirst | Role::CpuFirst => network,
                            Role::AccLater => network
                                .min(costs.host(m, u))
                                .min(costs.peer(m, u).unwrap_or(f64::INFINITY)),
                            Role::CpuLater if cpu_free => 0.0,
                            Role::CpuLater => network.min(costs.host(m, u)),
                        };
                        p * (1.0 - PRICE_SLACK)
                    })
                    .collect()
            });
            Kind {
                count,
                accelerators,
                cpus: machine.cpus,
                memory: cluster.types()[ty].memory_bytes,
                acc_time,
                price,
                debt: Vec::new(),
            }
        })
        .collect();
    Some(kinds)
}

/// The receipts of every start `l` (module documentation), `starts[l] = m(l)`.
fn receipts(w: &Workload, c: &Contraction, starts: &[usize]) -> Receipts {
    let n = c.len();
    let mut pred: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (l, group) in c.groups.iter().enumerate() {
        let p = &mut pred[l];
        for &v in &group.nodes {
            p.extend(
                w.predecessors(v)
                    .iter()
                    .filter(|&&u| c.group_of[u] < l)
                    .map(|&u| u as u32),
            );
        }
        p.sort_unstable();
        p.dedup();
    }
    let mut later: Vec<Vec<(u32, u32)>> = vec![Vec::new(); n];
    let mut kept = 0usize;
    'producers: for u in 0..w.len() {
        let gu = c.group_of[u];
        let mut feeds: Vec<usize> = w
            .successors(u)
            .iter()
            .map(|&x| c.group_of[x])
            .filter(|&g| g != gu)
            .collect();
        feeds.sort_unstable();
        feeds.dedup();
        let Some(&last) = feeds.last() else {
            continue;
        };
        // l > gu with m(l) ≤ last (m is non-decreasing).
        for l in gu + 1..n {
            if starts[l] > last {
                break;
            }
            if pred[l].binary_search(&(u as u32)).is_ok() {
                continue;
            }
            let f = feeds[feeds.partition_point(|&g| g < starts[l])];
            kept += 1;
            if kept > MAX_RECEIPTS {
                later.iter_mut().for_each(Vec::clear);
                break 'producers;
            }
            later[l].push((f as u32, u as u32));
        }
    }
    later.iter_mut().for_each(|x| x.sort_unstable());
    let window: Vec<Vec<WindowGroup>> = (0..n).map(|l| window_of(w, c, l, starts[l])).collect();
    let reads = (0..n)
        .map(|l| window_reads(w, c, l, &window[l], &pred[l], &later[l]))
        .collect();
    Receipts {
        pred,
        later,
        window,
        reads,
    }
}

/// `reads[l]` of [`Receipts`]: the producers below `l` of the window's descendants of `l`
/// that `pred[l]` does not hold, each once, with the first descendant reading it and where
/// `later` counts it.
fn window_reads(
    w: &Workload,
    c: &Contraction,
    l: usize,
    window: &[WindowGroup],
    pred: &[u32],
    later: &[(u32, u32)],
) -> Vec<(u32, u32, u32)> {
    let mut reads: Vec<(u32, u32, u32)> = Vec::new();
    for wg in window.iter().filter(|wg| wg.descendant) {
        for &v in &c.groups[wg.g as usize].nodes {
            for &u in w.predecessors(v) {
                let u32_u = u as u32;
                if c.group_of[u] >= l
                    || pred.binary_search(&u32_u).is_ok()
                    || reads.iter().any(|r| r.2 == u32_u)
                {
                    continue;
                }
                let f = later
                    .iter()
                    .find(|x| x.1 == u32_u)
                    .map_or(u32::MAX, |x| x.0);
                reads.push((wg.g, f, u32_u));
            }
        }
    }
    reads
}

/// The groups of `(l, m)` with which of them descend from `l` (module documentation).
fn window_of(w: &Workload, c: &Contraction, l: usize, m: usize) -> Vec<WindowGroup> {
    if m <= l + 1 || m - l - 1 > MAX_WINDOW {
        return Vec::new();
    }
    let mut descendant = vec![false; m - l];
    descendant[0] = true;
    let mut out = Vec::with_capacity(m - l - 1);
    for g in l + 1..m {
        let d = c.pred[g].iter().any(|&p| p >= l && descendant[p - l]);
        descendant[g - l] = d;
        let feeds = if d {
            Vec::new()
        } else {
            c.groups[g]
                .nodes
                .iter()
                .filter_map(|&u| {
                    let mut to: Vec<u32> = w
                        .successors(u)
                        .iter()
                        .map(|&x| c.group_of[x] as u32)
                        .filter(|&x| x as usize != g)
                        .collect();
                    to.sort_unstable();
                    to.dedup();
                    (!to.is_empty()).then_some((u as u32, to))
                })
                .collect()
        };
        out.push(WindowGroup {
            g: g as u32,
            descendant: d,
            feeds,
        });
    }
    out
}

/// The relaxed chain with the kinds (module documentation).
struct Relaxed {
    n: usize,
    /// `m(l)`.
    starts: Vec<usize>,
    receipts: Receipts,
    bytes: Vec<Sum>,
    unsupported: Vec<u32>,
    cpu_time: Vec<Sum>,
    /// `D(e)` on CPU cores (module documentation, "Debts").
    cpu_debt: Vec<f64>,
    debts: Debts,
    kinds: Vec<Kind>,
}

impl Relaxed {
    /// The compute prefix sums a stage in `role` on `kind` reads.
    fn time<'k>(&'k self, kind: &'k Kind, role: Role) -> &'k [Sum] {
        if role.cpu() {
            &self.cpu_time
        } else {
            &kind.acc_time
        }
    }

    /// `x[m(l), e)` on the stage's device: a lower bound on the interval's compute.
    fn interval(&self, time: &[Sum], l: usize, e: usize) -> f64 {
        let m = self.starts[l];
        if e > m {
            time[e].difference_lower_bound(time[m])
        } else {
            0.0
        }
    }

    /// Whether `l` has a non-descendant window group: a start `Owed` exists there.
    fn owes(&self, l: usize) -> bool {
        l < self.n && self.receipts.window[l].iter().any(|wg| !wg.descendant)
    }

    /// `D(e)` on the devices whose compute prefix sums are `time`: the least, over the
    /// positions `y ≥ e` with a non-descendant window group, of such a group's compute
    /// there (`+∞` where none follows) (module documentation, "Debts").
    fn debts(&self, time: &[Sum]) -> Vec<f64> {
        let mut debt = vec![f64::INFINITY; self.n + 1];
        for y in (0..self.n).rev() {
            let here = self.receipts.window[y]
                .iter()
                .filter(|wg| !wg.descendant)
                .map(|wg| {
                    let g = wg.g as usize;
                    time[g + 1].difference_lower_bound(time[g])
                })
                .fold(f64::INFINITY, f64::min);
            debt[y] = here.min(debt[y + 1]);
        }
        debt
    }

    /// Whether a stage of `kind` in `way` holding group `l` and `[m(l), e)` fits `tau`.
    fn fits(&self, kind: &Kind, tau: f64, way: Way, l: usize, e: usize) -> bool {
        let role = way.role;
        let time = self.time(kind, role);
        let price = &kind.price[role as usize];
        let (window, window_bytes, window_unsupported) =
            self.window_charge(kind, role, way.start, l, e);
        let mut load = time[l + 1].difference_lower_bound(time[l]) + self.interval(time, l, e);
        load += window;
        if way.end == Mode::Owed && e >= self.starts[l] && e < self.n {
            load += match role.cpu() {
                true => self.cpu_debt[e],
                false => kind.debt[e],
            };
        }
        load += self.receipts.pred[l]
            .iter()
            .map(|&u| price[u as usize])
            .sum::<f64>();
        for &(f, u) in &self.receipts.later[l] {
            if f as usize >= e {
                break;
            }
            load += price[u as usize];
        }
        if load > tau {
            return false;
        }
        if role.cpu() {
            return true;
        }
        let m = self.starts[l];
        let unsupported = self.unsupported[l + 1] - self.unsupported[l]
            + window_unsupported
            + if e > m {
                self.unsupported[e] - self.unsupported[m]
            } else {
                0
            };
        let bytes = self.bytes[l + 1].difference_lower_bound(self.bytes[l])
            + window_bytes
            + if e > m {
                self.bytes[e].difference_lower_bound(self.bytes[m])
            } else {
                0.0
            };
        unsupported == 0 && bytes <= kind.memory * (1.0 + 1e-9)
    }

    /// The window's charge for a stage holding `l` up to `e` (module documentation, "The
    /// window"): its load, and the bytes and CPU-only groups of the descendants it holds.
    fn window_charge(
        &self,
        kind: &Kind,
        role: Role,
        start: Mode,
        l: usize,
        e: usize,
    ) -> (f64, f64, u32) {
        let window = &self.receipts.window[l];
        if window.is_empty() {
            return (0.0, 0.0, 0);
        }
        let time = self.time(kind, role);
        let price = &kind.price[role as usize];
        // A window group before the stage may sit on the same machine even for the
        // machine's first stage in `lo` (module documentation, "One machine").
        let window_price = &kind.price[role.later() as usize];
        let m = self.starts[l];
        let group = |g: usize| time[g + 1].difference_lower_bound(time[g]);
        let certain = |g: usize| {
            let in_window = g > l && g < m && window[g - l - 1].descendant;
            g == l || (g < e && (g >= m || in_window))
        };
        let (mut load, mut bytes, mut unsupported) = (0.0, 0.0, 0);
        for wg in window.iter().take_while(|wg| (wg.g as usize) < e) {
            let g = wg.g as usize;
            // An open start: the group is in no earlier stage and below the end, so here.
            if wg.descendant || start == Mode::Open {
                load += group(g);
                bytes += self.bytes[g + 1].difference_lower_bound(self.bytes[g]);
                unsupported += self.unsupported[g + 1] - self.unsupported[g];
                continue;
            }
            let received: f64 = wg
                .feeds
                .iter()
                .filter(|(_, to)| to.iter().any(|&x| certain(x as usize)))
                .map(|&(u, _)| window_price[u as usize])
                .sum();
            if received > 0.0 {
                load += received.min(group(g));
            }
        }
        for &(g, f, u) in &self.receipts.reads[l] {
            if (g as usize) < e && f as usize >= e {
                load += price[u as usize];
            }
        }
        (load, bytes, unsupported)
    }

    /// `back_ρ(e)` (module documentation) in `way`, memoised in `memo[way.row()][e]`: the
    /// least start, `e` when none fits. An owed start is charged the least (its window's
    /// groups at the least of compute and receipt) whether or not `l` owes.
    fn back(&self, memo: &mut [Vec<u32>], kind: &Kind, tau: f64, way: Way, e: usize) -> usize {
        let slot = memo[way.row()][e];
        if slot != u32::MAX {
            return slot as usize;
        }
        let time = self.time(kind, way.role);
        let mut best = e;
        for l in (0..e).rev() {
            if self.interval(time, l, e) > tau {
                break;
            }
            if self.fits(kind, tau, way, l, e) {
                best = l;
            }
        }
        memo[way.row()][e] = best as u32;
        best
    }

    /// `next_ρ(x)` (module documentation): the least group `l ≥ x` that fits alone in
    /// `role`, `n` when none does; the table memoised in `memo[ROLES.len() + role]`.
    fn next_fit(
        &self,
        memo: &mut [Vec<u32>],
        kind: &Kind,
        role: Role,
        tau: f64,
        x: usize,
    ) -> usize {
        let row = BACK_ROWS + role as usize;
        let way = Way {
            role,
            start: Mode::Owed,
            end: Mode::Open,
        };
        if memo[row][self.n] == u32::MAX {
            memo[row][self.n] = self.n as u32;
            for l in (0..self.n).rev() {
                memo[row][l] = if self.fits(kind, tau, way, l, l + 1) {
                    l as u32
                } else {
                    memo[row][l + 1]
                };
            }
        }
        memo[row][x] as usize
    }

    /// The least start of a machine's leftmost used stage in the first `role`, the stages
    /// to its right starting at `at = (a, b)` (open at `a`, owed at `b`; module
    /// documentation): the stage is not empty. Its own start is charged as owed (the least
    /// charge; the machine's start is taken open).
    fn first(
        &self,
        memo: &mut [Vec<u32>],
        kind: &Kind,
        role: Role,
        tau: f64,
        at: (usize, usize),
    ) -> usize {
        let mut best = self.n;
        for (x, end) in [(at.0, Mode::Open), (at.1, Mode::Owed)] {
            if x == NONE {
                continue;
            }
            let way = Way {
                role,
                start: Mode::Owed,
                end,
            };
            let l = self.back(memo, kind, tau, way, x);
            best = best.min(if l < x {
                l
            } else {
                self.next_fit(memo, kind, role, tau, x)
            });
        }
        best
    }

    /// The states before a later stage in `role` whose right side starts at `(a, b)`
    /// (module documentation, "Debts"): the device unused, paying an owed start's debt
    /// alone, or a stage from an open or owed start to either state.
    fn step(
        &self,
        memo: &mut [Vec<u32>],
        kind: &Kind,
        role: Role,
        tau: f64,
        (a, b): (usize, usize),
    ) -> (usize, usize) {
        if self.debts == Debts::Off {
            // One state: every start charged the least, no debt.
            let way = Way {
                role,
                start: Mode::Owed,
                end: Mode::Open,
            };
            return (a.min(self.back(memo, kind, tau, way, a)), NONE);
        }
        let (mut na, mut nb) = (a.min(b), b);
        for (x, end) in [(a, Mode::Open), (b, Mode::Owed)] {
            if x == NONE {
                continue;
            }
            let way = |start| Way { role, start, end };
            na = na.min(self.back(memo, kind, tau, way(Mode::Open), x));
            // The least start charged as owed: an owed state where `l` owes, else an open
            // one (the two charges agree there).
            let l = self.back(memo, kind, tau, way(Mode::Owed), x);
            match self.owes(l) {
                true => nb = nb.min(l),
                false => na = na.min(l),
            }
        }
        (na, if nb < na { nb } else { NONE })
    }

    /// `B_κ(x)`: the least start of a machine of `kind` followed by the rest at `x`.
    fn machine(&self, memo: &mut [Vec<u32>], kind: &Kind, tau: f64, x: usize) -> usize {
        let g = kind.accelerators;
        let mut best = x;
        // The CPU stages used (0..=cpus), placed before the `first`-th and `second`-th
        // accelerator stage counted from the right (`g`: left of them all); every suffix
        // of the order, right to left, with its leftmost stage the machine's first.
        for cpus in 0..=kind.cpus {
            for first in 0..=if cpus >= 1 { g } else { 0 } {
                for second in first..=if cpus >= 2 { g } else { first } {
                    let mut order: Vec<bool> = Vec::with_capacity(g + cpus);
                    for a in 0..=g {
                        let here = usize::from(cpus >= 1 && first == a)
                            + usize::from(cpus >= 2 && second == a);
                        order.extend(std::iter::repeat_n(true, here));
                        if a < g {
                            order.push(false);
                        }
                    }
                    let mut at = (x, NONE);
                    for &is_cpu in &order {
                        let (leftmost, later) = match is_cpu {
                            true => (Role::CpuFirst, Role::CpuLater),
                            false => (Role::AccFirst, Role::AccLater),
                        };
                        best = best.min(self.first(memo, kind, leftmost, tau, at));
                        at = self.step(memo, kind, later, tau, at);
                    }
                }
            }
        }
        best
    }

    /// Whether `T[all machines] = 0` at `tau`; `None` when the budget ran out.
    fn feasible(&self, tau: f64, budget: &Budget) -> Option<bool> {
        let counts: Vec<usize> = self.kinds.iter().map(|k| k.count).collect();
        let mut stride = Vec::with_capacity(counts.len());
        let mut vectors = 1usize;
        for &k in &counts {
            stride.push(vectors);
            vectors *= k + 1;
        }
        let mut memo: Vec<Vec<Vec<u32>>> =
            vec![vec![vec![u32::MAX; self.n + 1]; BACK_ROWS + ROLES.len()]; self.kinds.len()];
        let mut start = vec![self.n; vectors];
        for u in 1..vectors {
            if u % 64 == 0 && budget.is_exhausted() {
                return None;
            }
            let mut best = self.n;
            for (k, kind) in self.kinds.iter().enumerate() {
                if (u / stride[k]).is_multiple_of(counts[k] + 1) {
                    continue;
                }
                let from = start[u - stride[k]];
                best = best.min(self.machine(&mut memo[k], kind, tau, from));
            }
            start[u] = best;
            if best == 0 {
                return Some(true);
            }
        }
        Some(false)
    }

    /// The largest `τ` found infeasible (module documentation), scaled down; 0 when none.
    fn bisect(&self, budget: &Budget) -> f64 {
        // From the largest single group's least time up by doubling (each probe's scans
        // stay about as long as a stage at the optimum), then bisection.
        let largest = (0..self.n)
            .map(|l| {
                self.kinds
                    .iter()
                    .map(|k| k.acc_time[l + 1].difference_lower_bound(k.acc_time[l]))
                    .fold(
                        self.cpu_time[l + 1].difference_lower_bound(self.cpu_time[l]),
                        f64::min,
                    )
            })
            .fold(0.0, f64::max);
        let (mut lo, mut hi) = (0.0, largest.max(1e-300));
        loop {
            match self.feasible(hi, budget) {
                Some(true) => break,
                Some(false) => (lo, hi) = (hi, 2.0 * hi),
                None => return lo * (1.0 - 1e-12),
            }
            if !hi.is_finite() || hi > 1e300 {
                return lo * (1.0 - 1e-12);
            }
        }
        while hi - lo > RELATIVE_WIDTH * hi {
            let mid = 0.5 * (lo + hi);
            match self.feasible(mid, budget) {
                Some(true) => hi = mid,
                Some(false) => lo = mid,
                None => break,
            }
        }
        lo * (1.0 - 1e-12)
    }
}

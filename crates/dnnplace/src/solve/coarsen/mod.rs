//! Multilevel solving of the contiguous max-load problem: coarsen the group DAG, solve the
//! coarse graph exactly with the DP, then uncoarsen with refinement; the lower bound comes
//! from the fine graph, so the gap reported is honest.
//!
//! - [`hierarchy`]: the levels (clusters that are intervals of topological orders, so every
//!   cluster is contiguous and every level a DAG), by `layerId` runs or heavy-edge matching;
//! - [`refine`]: stage plans, projection one level down, and boundary moves that lower the
//!   bottleneck while keeping the plan contiguous;
//! - this file: the driver ([`solve`]), the choice of the level the DP runs on, and the
//!   lower bound ([`lower_bound`]).
//!
//! # The coarse DP
//!
//! The DP is called as a black box on the *coarse workload*: the same nodes, edges and
//! devices with every node's colour class replaced by its cluster (nodes of a colour class
//! without forward nodes keep a class of their own: those classes are pinned, see
//! [`hierarchy`], and keeping them apart keeps their mirror arcs). Colour classes do not
//! change loads, so a plan of the coarse workload scores the same on the fine one; the
//! coarse workload's groups are exactly the clusters (a mixed group's backward-only class
//! is fused back into its cluster by the same cycle that fused it below), so the DP's
//! optimum is the best contiguous plan that keeps every cluster on one device.
//!
//! # Which level
//!
//! From the coarsest level up, the finest level whose ideal lattice fits the DP's share of
//! the budget ([`coarse_ideal_limit`]); with `--coarsen-target N`, the finest level with at
//! most N clusters (coarser if its lattice does not fit). The estimate of the lattice size
//! is [`lattice_size`] (counted without listing: [`crate::solve::ideals::estimate`]).
//!
//! # The bound
//!
//! [`lower_bound`]: the combinatorial max-load bound of [`crate::solve::bounds::load`]
//! on the fine groups (a bound on every contiguous plan), first with its O(n log n) tests
//! (forced units, pigeon, volume) and then, within a deadline, with all of them.
//!
//! Complexity: O(P · (n log n + m + Σ|T|)) for coarsening (P passes), the DP on the chosen
//! level, and O(moves · |stage| · δ) for refinement; memory O(n + m + Σ|T|) per level.

pub mod hierarchy;
pub mod refine;

use crate::model::contraction::{class_index, Contraction};
use crate::model::grouping::Grouping;
use crate::model::{Device, Node, Placement, Workload, WorkloadError};
use crate::score::{evaluate, Evaluation};
use crate::solve::bounds::load::{LowerBound, Tests};
use crate::solve::budget::Budget;
use crate::solve::ideals;
use crate::solve::{dp, CheckFailure, Limits, SolveError, Status};

use hierarchy::{Caps, Hierarchy, Level, MIN_CLUSTERS};
use refine::{Refiner, StagePlan};

/// How to coarsen (`--coarsen`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CoarsenMode {
    /// Heavy-edge matching along topological orders, levels chosen by the budget.
    #[default]
    Auto,
    /// Never coarsen: the exact DP only.
    Off,
    /// One level of `layerId` runs (more matching on top only if the DP cannot run on it).
    Layers,
}

/// The user's coarsening settings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoarsenSettings {
    pub mode: CoarsenMode,
    /// Run the DP on the finest level with at most this many clusters. [default: chosen
    /// from the ideal lattice and the time limit]
    pub target: Option<usize>,
}

/// What is known of an ideal lattice's size before listing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatticeSize {
    /// Exactly this many ideals.
    Exactly(usize),
    /// At most this many (and no more than the limit asked about).
    AtMost(usize),
    /// Between the two, the limit asked about inside: whether it fits is unknown.
    Between(usize, usize),
    /// More than this many (at least the limit asked about).
    MoreThan(usize),
}

impl LatticeSize {
    /// Whether the lattice may fit the limit it was measured against (all but `MoreThan`).
    pub fn may_fit(&self) -> bool {
        !matches!(self, LatticeSize::MoreThan(_))
    }
}

/// The size of `c`'s ideal lattice against `limit`, counted without listing the ideals
/// ([`crate::solve::ideals::estimate`]: the frontier count, exact when the frontier stays
/// narrow, else a lower and an upper bound): `Exactly` or `AtMost` when it is at most
/// `limit`, `MoreThan` when its lower bound exceeds `limit`, else `Between`. Cost about
/// 2·10⁸ steps at most, whatever the width.
pub fn lattice_size(c: &Contraction, limit: usize) -> LatticeSize {
    lattice_size_within(c, limit, &Budget::unlimited())
}

/// [`lattice_size`] within `budget` (a count cut short has only its lower bound: `Between`
/// or `MoreThan`).
pub fn lattice_size_within(c: &Contraction, limit: usize, budget: &Budget) -> LatticeSize {
    let e = ideals::estimate_in(c, budget);
    let clamp = |x: u128| usize::try_from(x).unwrap_or(usize::MAX);
    let (lower, upper) = (clamp(e.lower_bound), clamp(e.upper_bound));
    if upper <= limit {
        if e.exact {
            LatticeSize::Exactly(upper)
        } else {
            LatticeSize::AtMost(upper)
        }
    } else if lower > limit {
        LatticeSize::MoreThan(lower.saturating_sub(1))
    } else {
        LatticeSize::Between(lower, upper)
    }
}

/// Ideals the DP lists per second of its time share, at least (the frontier-tree DP
/// measured 100k–300k per second on generated graphs of 3k–100k operators on the 2-core
/// machine; halved for other load).
pub const IDEALS_PER_SECOND: f64 = 50_000.0;

/// Ideals a DP may take with `remaining_s` seconds left for it: [`IDEALS_PER_SECOND`] per
/// second, at least 2,000, at most `max_ideals` (the DP's memory budget caps it further).
pub fn coarse_ideal_limit(remaining_s: Option<f64>, max_ideals: usize) -> usize {
    let scaled = remaining_s.map_or(f64::INFINITY, |s| IDEALS_PER_SECOND * s);
    (scaled.min(usize::MAX as f64) as usize).clamp(2_000, max_ideals.max(2_000))
}

/// A plan of the coarsened path.
#[derive(Clone, Debug)]
pub struct CoarseSolution {
    pub placement: Placement,
    /// Its max load, by the scorer.
    pub max_load: f64,
    /// Clusters per level, finest first.
    pub level_sizes: Vec<usize>,
    /// The level the DP ran on (0: the groups themselves, so the plan is optimal).
    pub dp_level: usize,
    pub dp_ideals: Option<usize>,
    /// The DP's optimum on its level (an upper bound on the fine optimum).
    pub dp_objective: f64,
    /// Refinement moves over all levels.
    pub moves: usize,
}

/// The contraction whose groups are the clusters of `level` (for the lattice estimate).
fn level_contraction(w: &Workload, c0: &Contraction, map: &[u32], level: &Level) -> Contraction {
    let group_of: Vec<usize> = (0..w.len()).map(|v| map[c0.group_of[v]] as usize).collect();
    let grouping = Grouping::new(w, group_of, level.len());
    let to_usize = |lists: &[Vec<u32>]| {
        lists
            .iter()
            .map(|l| l.iter().map(|&x| x as usize).collect())
            .collect()
    };
    Contraction {
        groups: grouping.groups,
        group_of: grouping.group_of,
        succ: to_usize(&level.succ),
        pred: to_usize(&level.pred),
    }
}

/// The coarse workload of the module documentation: colour class = cluster, except for
/// classes without forward nodes; its platform (per-profile times, cluster) is `w`'s.
/// `Ok(None)` when it has no placement at all (a cluster that fits no device), which the
/// DP would report as infeasible.
pub(crate) fn coarse_workload(
    w: &Workload,
    c0: &Contraction,
    map: &[u32],
    clusters: usize,
) -> Result<Option<Workload>, SolveError> {
    let (class, classes) = class_index(w);
    let mut has_forward = vec![false; classes];
    for (v, node) in w.nodes().iter().enumerate() {
        has_forward[class[v]] |= !node.is_backward;
    }
    let nodes: Vec<Node> = w
        .nodes()
        .iter()
        .enumerate()
        .map(|(v, node)| {
            let label = if has_forward[class[v]] {
                map[c0.group_of[v]] as usize
            } else {
                clusters + class[v]
            };
            Node {
                color_class: Some(label as i64),
                ..node.clone()
            }
        })
        .collect();
    let edges = w
        .edges()
        .iter()
        .map(|e| (w.node(e.from).id, w.node(e.to).id, e.cost, e.size_bytes))
        .collect();
    match Workload::new(nodes, edges, w.devices().clone())
        .and_then(|cw| cw.with_platform(w.platform().clone()))
    {
        Ok(cw) => Ok(Some(cw)),
        Err(WorkloadError::Infeasible { .. }) => Ok(None),
        Err(e) => Err(SolveError::Check(CheckFailure::CoarseWorkloadInvalid(e))),
    }
}

/// Builds the levels for `settings`.
fn build_hierarchy(
    w: &Workload,
    c0: &Contraction,
    settings: &CoarsenSettings,
    budget: &Budget,
) -> (Hierarchy, usize) {
    let d = w.devices();
    let base = Level::from_contraction(w, c0);
    let caps = Caps::for_devices(
        &base,
        d.accelerators,
        d.cpus,
        d.memory_per_accelerator_bytes,
    );
    let mut h = Hierarchy::new(base);
    let mut first_candidate = 0;
    if settings.mode == CoarsenMode::Layers {
        h.by_layers(&caps);
        first_candidate = h.levels.len() - 1;
    }
    let min = settings
        .target
        .map_or(MIN_CLUSTERS, |t| t.clamp(1, MIN_CLUSTERS));
    h.coarsen(&caps, min, || !budget.is_exhausted());
    (h, first_candidate)
}

/// The levels the DP may run on: the candidates (from `first_candidate`, or from the
/// first level of at most `settings.target` groups, to the coarsest), scanned from the
/// coarsest, kept while the lattice estimate fits `limit` ideals; the coarsest alone when
/// none fits (the DP then tries it). Coarsest first.
fn choose_levels(
    w: &Workload,
    c0: &Contraction,
    h: &Hierarchy,
    first_candidate: usize,
    settings: &CoarsenSettings,
    limit: usize,
    budget: &Budget,
) -> Vec<usize> {
    let sizes = h.sizes();
    // Candidate levels, finest first, ending at the coarsest.
    let mut candidates: Vec<usize> = (first_candidate..h.levels.len()).collect();
    if let Some(target) = settings.target {
        let at = candidates
            .iter()
            .position(|&l| sizes[l] <= target)
            .unwrap_or(candidates.len() - 1);
        candidates.drain(..at);
    }
    // The finest candidate whose lattice fits, scanning from the coarsest.
    let mut chosen: Vec<usize> = Vec::new();
    for &l in candidates.iter().rev() {
        let map = h.groups_to(l);
        if !lattice_size_within(&level_contraction(w, c0, &map, &h.levels[l]), limit, budget)
            .may_fit()
        {
            break;
        }
        chosen.push(l);
        if budget.is_exhausted() {
            break;
        }
    }
    if chosen.is_empty() {
        // Even the coarsest level is too wide for the estimate: let the DP try it.
        chosen.push(*candidates.last().expect("a level"));
    }
    chosen
}

/// The refined plan on the nodes (node `v` on the device of its group's stage) and the
/// scorer's evaluation of it; an error when the scorer finds it invalid or not contiguous.
fn scored_placement(
    w: &Workload,
    c0: &Contraction,
    plan: &StagePlan,
) -> Result<(Placement, Evaluation), SolveError> {
    let stage_device = plan.stage_devices();
    let placement = Placement::new(
        (0..w.len())
            .map(|v| stage_device[plan.stage_of[c0.group_of[v]] as usize])
            .collect(),
    )
    .canonical();
    let e = evaluate(w, &placement, false);
    if !e.is_valid() || !e.is_contiguous() {
        let why = e.violations.iter().chain(&e.non_contiguous).next().cloned();
        return Err(SolveError::Check(CheckFailure::RefinedPlanRejected(why)));
    }
    Ok((placement, e))
}

/// Solves the contiguous max-load problem of `w` on a coarsened graph (module
/// documentation). `Err` only for internal failures; `Ok(None)` when no level gives a
/// plan (the DP found none on any level it could run on). What each level gave, and why
/// one gave nothing, is appended to `notes`.
pub fn solve(
    w: &Workload,
    settings: &CoarsenSettings,
    limits: &Limits,
    budget: &Budget,
    notes: &mut Vec<String>,
) -> Result<Option<CoarseSolution>, SolveError> {
    let started = std::time::Instant::now();
    let c0 = Contraction::new(w);
    let d = w.devices();
    let (k, memory) = (d.accelerators, d.memory_per_accelerator_bytes);
    let (h, first_candidate) = build_hierarchy(w, &c0, settings, budget);
    let sizes = h.sizes();
    notes.push(format!(
        "coarsened {} groups into {} levels ({}) in {:.2} s",
        sizes[0],
        sizes.len(),
        sizes
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        started.elapsed().as_secs_f64()
    ));

    let limit = coarse_ideal_limit(budget.remaining_s(), limits.max_ideals);
    let chosen = choose_levels(w, &c0, &h, first_candidate, settings, limit, budget);
    notes.push(format!(
        "lattice estimates done at {:.2} s",
        started.elapsed().as_secs_f64()
    ));
    // The DP from the coarsest chosen level up to the finest: each level may take half of
    // the time left, and the finest level solved is kept. Coarse levels cost little (each
    // is about half the size of the next finer one, so all of them together about as
    // much as the finest), and the ideal count does not predict the DP's time where wide
    // windows make it quadratic (a CPU stage holding half of a 200k-operator graph): so
    // the path has a plan early, and a finer level that stops only costs its share.
    let Some(CoarseDp {
        level: dp_level,
        map,
        plan: coarse_plan,
        objective: dp_objective,
        ideals: dp_ideals,
        status: dp_status,
    }) = solve_levels(w, &c0, &h, &chosen, limit, budget, notes)?
    else {
        return Ok(None);
    };
    let level = &h.levels[dp_level];
    notes.push(format!(
        "DP on level {dp_level} ({} clusters, {} ideals): {dp_objective}{} (done at {:.2} s)",
        level.len(),
        dp_ideals.map_or("?".into(), |i| i.to_string()),
        if dp_status == Status::Optimal {
            ""
        } else {
            " (not proven optimal on its level)"
        },
        started.elapsed().as_secs_f64()
    ));

    let device = cluster_devices(w, &c0, &map, level.len(), &coarse_plan, dp_level)?;
    let plan = StagePlan::from_devices(level, &device, k)
        .ok_or(SolveError::Check(CheckFailure::CoarseDpNotContiguous))?;

    let (plan, moves) = refine_down(&h, plan, dp_level, memory, budget, notes);
    let (placement, e) = scored_placement(w, &c0, &plan)?;
    notes.push(format!(
        "refinement: {moves} moves, max load {} -> {} (done at {:.2} s)",
        dp_objective,
        e.max_load,
        started.elapsed().as_secs_f64()
    ));
    Ok(Some(CoarseSolution {
        placement,
        max_load: e.max_load,
        level_sizes: sizes,
        dp_level,
        dp_ideals,
        dp_objective,
        moves,
    }))
}

/// The coarse DP's answer on one level: its level, the map from contraction groups to
/// that level's clusters, the plan, its objective, the ideals enumerated and its status.
struct CoarseDp {
    level: usize,
    map: Vec<u32>,
    plan: Placement,
    objective: f64,
    ideals: Option<usize>,
    status: Status,
}

/// The DP from the coarsest `chosen` level up to the finest (module documentation): each
/// level may take half of the time left, and the finest level solved is kept.
fn solve_levels(
    w: &Workload,
    c0: &Contraction,
    h: &Hierarchy,
    chosen: &[usize],
    limit: usize,
    budget: &Budget,
    notes: &mut Vec<String>,
) -> Result<Option<CoarseDp>, SolveError> {
    let mut solved = None;
    for (i, &l) in chosen.iter().enumerate() {
        let map = h.groups_to(l);
        let Some(cw) = coarse_workload(w, c0, &map, h.levels[l].len())? else {
            notes.push(format!("level {l}: some cluster fits no device"));
            continue;
        };
        let last = i + 1 == chosen.len();
        let attempt = if last && solved.is_none() {
            budget.share(1.0)
        } else {
            budget.share(0.5)
        };
        match dp::solve_within(&cw, limit, &attempt) {
            Ok(outcome) => match outcome.placement {
                Some(p) => {
                    solved = Some(CoarseDp {
                        level: l,
                        map,
                        plan: p,
                        objective: outcome.objective,
                        ideals: outcome.stats.ideals,
                        status: outcome.status,
                    })
                }
                None => notes.push(format!(
                    "level {l}: no contiguous plan keeps its clusters whole"
                )),
            },
            Err(SolveError::TooManyIdeals { found, .. }) => {
                notes.push(format!(
                    "level {l} ({} clusters): more than {found} ideals",
                    h.levels[l].len()
                ));
                break;
            }
            Err(e @ SolveError::Stopped { .. }) => {
                notes.push(format!("level {l} ({} clusters): {e}", h.levels[l].len()));
                break;
            }
            Err(e) => return Err(e),
        }
        if budget.is_exhausted() {
            break;
        }
    }
    Ok(solved)
}

/// The device of each of the `clusters` clusters of level `dp_level` under the coarse
/// DP's `plan`, read off one node of it (the DP keeps clusters whole: a split one is a bug).
fn cluster_devices(
    w: &Workload,
    c0: &Contraction,
    map: &[u32],
    clusters: usize,
    plan: &Placement,
    dp_level: usize,
) -> Result<Vec<Device>, SolveError> {
    let mut device: Vec<Option<Device>> = vec![None; clusters];
    for v in 0..w.len() {
        let x = map[c0.group_of[v]] as usize;
        let dv = plan.assignment[v];
        match device[x] {
            None => device[x] = Some(dv),
            Some(other) if other != dv => {
                return Err(SolveError::Check(CheckFailure::CoarseDpSplitCluster {
                    cluster: x,
                    level: dp_level,
                }));
            }
            _ => {}
        }
    }
    Ok(device
        .into_iter()
        .map(|x| x.expect("every cluster has nodes"))
        .collect())
}

/// The coarse plan projected down the hierarchy from `dp_level` to level 0, refined by
/// [`Refiner`] on every level while the budget lasts; the plan and the moves made.
fn refine_down(
    h: &Hierarchy,
    plan: StagePlan,
    dp_level: usize,
    memory: f64,
    budget: &Budget,
    notes: &mut Vec<String>,
) -> (StagePlan, usize) {
    let mut moves = 0;
    let mut plan = plan;
    for l in (0..=dp_level).rev() {
        if l < dp_level {
            plan = plan.project(&h.levels[l + 1].parent_of_below);
        }
        if budget.is_exhausted() {
            continue;
        }
        let level_started = std::time::Instant::now();
        let mut r = Refiner::new(&h.levels[l], plan, memory);
        let before = r.max_load();
        r.run(budget);
        moves += r.moves;
        notes.push(format!(
            "refined level {l} ({} clusters): {} moves, max load {before} -> {} in {:.2} s",
            h.levels[l].len(),
            r.moves,
            r.max_load(),
            level_started.elapsed().as_secs_f64()
        ));
        plan = r.into_plan();
    }
    (plan, moves)
}

/// The combinatorial lower bound on the max load of every contiguous plan of `w`: the
/// cheap tests first, then all tests until `deadline`. Returns the bound and whether the
/// full bound finished.
pub fn lower_bound(w: &Workload, deadline: Option<std::time::Instant>) -> (f64, bool) {
    let (units, _) = Grouping::units(w, true);
    let hyperedges = units.hyperedges(w, false);
    let cheap = Tests {
        pigeon: true,
        volume: true,
        communication: false,
        packing: false,
    };
    let budget = deadline.map_or_else(crate::solve::budget::Budget::unlimited, |d| {
        crate::solve::budget::Budget::new(
            Some(
                d.saturating_duration_since(std::time::Instant::now())
                    .as_secs_f64(),
            ),
            None,
        )
    });
    let quick = LowerBound::new(&units, &hyperedges, w.devices(), cheap)
        .within(budget)
        .value();
    if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
        return (quick, false);
    }
    let full = LowerBound::new(&units, &hyperedges, w.devices(), Tests::ALL)
        .within(budget)
        .value();
    let finished = deadline.is_none_or(|d| std::time::Instant::now() < d);
    (quick.max(full), finished)
}

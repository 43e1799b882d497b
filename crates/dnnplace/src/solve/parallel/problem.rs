//! One 3D problem and its one entry (`plan CONFIG.json --parallel 3d`, docs/parallel.md).
//!
//! A [`ParallelProblem`] carries what every 3D search reads: the model's chain of units
//! priced per accelerator type `g` and candidate micro-batch size `b` (`chains[g][b]`, at
//! `t = 1` and every TP degree of the space), the devices ([`ParallelDevices`]: one
//! accelerator type as a [`Topology`], several as a [`MixedTopology`]), the parallel
//! [`Space`] (TP degrees, DP degree, stages, ZeRO stages, recomputation, micro-batch sizes,
//! global batch, schedule, device cap), the [`Objective`] and which [`Layouts`] are
//! searched. [`plan`] dispatches it:
//!
//! | layouts | one type | several types |
//! | --- | --- | --- |
//! | uniform (`t`, `d` for every stage) | [`super::plan_uniform`] | [`super::mixed_uniform::plan_mixed_uniform`] |
//! | free (per-stage `t`, `d`), time per sample | [`super::free::plan_free`] | [`super::mixed::plan_mixed`] |
//! | free, iteration | [`super::free_iteration::plan_free_iteration`] (needs the simulator: [`plan_with`]) | [`super::mixed_iteration::plan_mixed_iteration`] (the simulator) |
//! | uniform, iteration | [`super::plan_uniform`] (the scorer's formula) | [`super::mixed_iteration::plan_mixed_iteration`] (the simulator) |
//!
//! and every answer is a [`ParallelOutcome`]: the plan re-scored by
//! [`crate::score::parallel`], its value, a proven bound, the gap
//! ([`ParallelOutcome::gap`]) and the common [`crate::solve::Status`]. The other questions
//! take the same problem, uniform or free, one type or several: [`ParallelProblem::sweep`]
//! (the best layout per device count, each row the search of [`plan_with`] on the first
//! `n` devices with its own value, bound and gap) and [`ParallelProblem::fewest_devices`]
//! (the fewest devices meeting a time per sample). [`answer`] asks the problem the question
//! of a [`Goal`] and returns the [`Answer`]: the one road of `plan --parallel 3d [--free]
//! [--sweep | --target-tps MS]` and of Python's `plan_parallel` / `sweep_parallel`.
//!
//! **The optimum never worsens with more devices** ([`super::fewest_over`]'s binary
//! search rests on it). [`ParallelProblem::on_first`] keeps the machines' shape, links and
//! costs and only lowers the device cap (one type) or drops the cluster's last machines
//! (several types), and every space is closed under adding devices:
//!
//! - uniform, one type: the layouts with `p·t·d ≤ n`, each on devices `0..p·t·d`;
//! - free, one type ([`super::free`]): stages packed from device 0, the last ending at or
//!   before the cap. The feasibility DP keeps, per front point, the *fewest* devices a
//!   suffix needs and accepts any point on `≤ N` devices: it never has to use all `N`, so
//!   a layout on `n` devices is one on `n + 1`, on the same devices with the same links
//!   (a stage's links depend only on where it lies in its machines) and the same value;
//!   the TP and DP candidates (`t ≤ N`, `d ≤ N`) only grow with `N`;
//! - several types ([`super::mixed`], [`super::mixed_uniform`]): each type's stages packed
//!   from its group's device 0 within the group, the types used any subset in any order.
//!   One more machine either widens the last group (its `N_g` grows) or adds a type that a
//!   layout may leave unused, so the layouts on `k` machines are layouts on `k + 1`;
//! - the iteration objective reads the same layouts, and neither the scorer nor the
//!   simulator reads a device no stage uses.
//!
//! So a count shown (by its bound) to miss a target proves every smaller count misses it.

use super::{
    fewest_over, sweep_counts, sweep_over, IterationClock, Objective, ParallelOutcome, Space,
    TargetOutcome,
};
use crate::costmodel::operators::DType;
use crate::costmodel::parallel::{transformer_chain_with, with_batch, SequenceParallel};
use crate::costmodel::transformer::TransformerSpec;
use crate::model::parallel::{ChainCosts, MixedTopology, Topology};
use crate::model::profiles::DeviceProfile;
use crate::solve::budget::Budget;

/// Which layouts a 3D search chooses among.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layouts {
    /// Every stage with the same TP and DP degree (what the frameworks run).
    Uniform,
    /// Each stage its own TP and DP degree (`--free`; the iteration objective is the
    /// simulated iteration, [`super::free_iteration`]).
    Free,
}

/// The question asked of a 3D problem.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Goal {
    /// The best layout ([`plan`]).
    One,
    /// The best layout per device count ([`ParallelProblem::sweep`]).
    Sweep,
    /// The fewest devices whose best layout takes at most `target_ms` per sample
    /// ([`ParallelProblem::fewest_devices`]).
    FewestDevices { target_ms: f64 },
}

/// The answer to a [`Goal`].
#[derive(Clone, Debug)]
pub enum Answer {
    One(ParallelOutcome),
    /// `(devices, the best layout on the first `devices`)` per count.
    Sweep(Vec<(usize, ParallelOutcome)>),
    FewestDevices(TargetOutcome),
}

/// The answer of `problem` to `goal` within `budget`, timing free layouts' iterations with
/// `clock` ([`plan_with`]; `crate::simulate::parallel::answer` gives the simulator).
pub fn answer(
    problem: &ParallelProblem,
    goal: Goal,
    budget: &Budget,
    clock: Option<&dyn IterationClock>,
) -> Result<Answer, String> {
    Ok(match goal {
        Goal::One => Answer::One(plan_with(problem, budget, clock)?),
        Goal::Sweep => Answer::Sweep(problem.sweep(budget, clock)?),
        Goal::FewestDevices { target_ms } => {
            Answer::FewestDevices(problem.fewest_devices(target_ms, budget)?)
        }
    })
}

/// The accelerators of a 3D problem.
#[derive(Clone, Debug)]
pub enum ParallelDevices {
    /// Identical machines of one accelerator type.
    One(Topology),
    /// Machines of several accelerator types, one group per type.
    Mixed(MixedTopology),
}

/// The transformer a 3D problem prices: its shape, number format and whether tensor
/// parallelism also splits the sequence.
#[derive(Clone, Copy, Debug)]
pub struct PricedModel<'a> {
    pub spec: &'a TransformerSpec,
    pub dtype: DType,
    pub sequence_parallel: SequenceParallel,
}

/// One 3D placement problem (module documentation).
#[derive(Clone, Debug)]
pub struct ParallelProblem {
    /// `chains[g][i]`: the chain on accelerator group `g` (one group on one type) at the
    /// micro-batch size `space.micro_batches[i]`.
    pub chains: Vec<Vec<ChainCosts>>,
    pub devices: ParallelDevices,
    pub space: Space,
    pub objective: Objective,
    pub layouts: Layouts,
}

impl ParallelProblem {
    /// The problem with `model` priced on each accelerator group's profile (one type: the
    /// first of `profiles`; several: the profile each group names) at every micro-batch
    /// size of `space`, at `t = 1` and every TP degree of the space. An error names a
    /// missing profile or what the cost model refuses.
    pub fn priced(
        model: &PricedModel,
        profiles: &[DeviceProfile],
        devices: ParallelDevices,
        space: Space,
        objective: Objective,
        layouts: Layouts,
    ) -> Result<ParallelProblem, String> {
        let chains = match &devices {
            ParallelDevices::One(_) => {
                let profile = profiles
                    .first()
                    .ok_or_else(|| "no device profile for the cluster".to_string())?;
                vec![chains_of(model, profile, &space)?]
            }
            ParallelDevices::Mixed(topo) => {
                let mut chains = Vec::with_capacity(topo.groups.len());
                for g in &topo.groups {
                    let profile = profiles
                        .iter()
                        .find(|p| p.name == g.profile)
                        .ok_or_else(|| format!("no device profile '{}'", g.profile))?;
                    chains.push(chains_of(model, profile, &space)?);
                }
                chains
            }
        };
        Ok(ParallelProblem {
            chains,
            devices,
            space,
            objective,
            layouts,
        })
    }

    /// The devices as one topology (several types: [`MixedTopology::display`], the
    /// machines side by side, for reports).
    pub fn topology(&self) -> Topology {
        match &self.devices {
            ParallelDevices::One(topo) => topo.clone(),
            ParallelDevices::Mixed(topo) => topo.display(),
        }
    }

    /// Devices one step of the sweep and of the fewest-devices search adds: one device on
    /// one type; one machine on several (module documentation of [`super`]'s
    /// [`super::sweep_over`]).
    pub fn count_step(&self) -> usize {
        match &self.devices {
            ParallelDevices::One(_) => 1,
            ParallelDevices::Mixed(topo) => topo.groups[0].per_machine,
        }
    }

    /// The devices the sweep and the fewest-devices search count up to.
    fn countable(&self) -> usize {
        match &self.devices {
            ParallelDevices::One(topo) => self.space.max_devices.min(topo.devices()),
            ParallelDevices::Mixed(topo) => topo.devices(),
        }
    }

    /// This problem on the first `n` devices: one type, `max_devices = n`; several, the first
    /// `n / G` machines in the cluster's order ([`MixedTopology::first_machines`], `n` a
    /// multiple of a machine's `G` accelerators), each kept type with its chains.
    pub fn on_first(&self, n: usize) -> ParallelProblem {
        let mut sub = self.clone();
        match &self.devices {
            ParallelDevices::One(_) => sub.space.max_devices = n,
            ParallelDevices::Mixed(topo) => {
                let cut = topo
                    .first_machines(n / self.count_step())
                    .unwrap_or_else(|| topo.first_machines(1).expect("a machine"));
                sub.chains.truncate(cut.groups.len());
                sub.space.max_devices = cut.devices();
                sub.devices = ParallelDevices::Mixed(cut);
            }
        }
        sub
    }

    /// The best layout on the first `n` devices for each `n` of [`super::sweep_counts`] (on
    /// several types, whole machines: `G·k` for each `k` of `sweep_counts(machines)`), each
    /// planned by [`plan_with`] in this problem's layouts (uniform or free) and objective,
    /// each row with an equal share of the time left ([`super::sweep_over`]).
    pub fn sweep(
        &self,
        budget: &Budget,
        clock: Option<&dyn IterationClock>,
    ) -> Result<Vec<(usize, ParallelOutcome)>, String> {
        let step = self.count_step();
        let counts: Vec<usize> = sweep_counts(self.countable() / step)
            .into_iter()
            .map(|k| k * step)
            .collect();
        sweep_over(&counts, budget, |n, share| {
            plan_with(&self.on_first(n), share, clock)
        })
    }

    /// The fewest of the first devices (on several types, whole machines in the cluster's
    /// order) whose best layout (uniform or free) takes at most `target_ms` per sample
    /// ([`super::fewest_over`]; monotone by the module documentation).
    pub fn fewest_devices(&self, target_ms: f64, budget: &Budget) -> Result<TargetOutcome, String> {
        let step = self.count_step();
        fewest_over(
            self.countable() / step,
            step,
            target_ms,
            budget,
            |n, share| {
                let mut sub = self.on_first(n);
                sub.objective = Objective::TimePerSample;
                plan_with(&sub, share, None)
            },
        )
    }
}

/// The best layout of `problem` within `budget` (module documentation: which search each
/// problem takes), without a simulator: free layouts under the iteration objective are an
/// error here ([`plan_with`] takes the simulator; `crate::simulate::parallel::plan` is the
/// one entry that gives it).
pub fn plan(problem: &ParallelProblem, budget: &Budget) -> Result<ParallelOutcome, String> {
    plan_with(problem, budget, None)
}

/// The best layout of `problem` within `budget`, timing free layouts' iterations with
/// `clock` (module documentation).
pub fn plan_with(
    problem: &ParallelProblem,
    budget: &Budget,
    clock: Option<&dyn IterationClock>,
) -> Result<ParallelOutcome, String> {
    let chains = problem.chains.as_slice();
    let iteration = problem.objective == Objective::Iteration;
    match (&problem.devices, problem.layouts, chains) {
        (ParallelDevices::One(topo), Layouts::Uniform, [one]) => {
            super::plan_uniform_with(one, topo, &problem.space, problem.objective, budget, clock)
        }
        (ParallelDevices::One(topo), Layouts::Free, [one]) if iteration => match clock {
            Some(clock) => super::free_iteration::plan_free_iteration(
                one,
                topo,
                &problem.space,
                budget,
                clock,
            ),
            None => Err("internal error: the iteration of free layouts is the simulator's; plan them with simulate::parallel::plan".into()),
        },
        (ParallelDevices::One(topo), Layouts::Free, [one]) => {
            super::free::plan_free(one, topo, &problem.space, None, budget)
        }
        (ParallelDevices::Mixed(topo), layouts, _) if iteration => match clock {
            Some(clock) => super::mixed_iteration::plan_mixed_iteration(
                chains,
                topo,
                &problem.space,
                layouts,
                budget,
                clock,
            ),
            None => Err("internal error: the iteration on several types is the simulator's; plan it with simulate::parallel::plan".into()),
        },
        (ParallelDevices::Mixed(topo), Layouts::Free, _) => {
            super::mixed::plan_mixed(chains, topo, &problem.space, None, budget)
        }
        (ParallelDevices::Mixed(topo), Layouts::Uniform, _) => {
            super::mixed_uniform::plan_mixed_uniform(chains, topo, &problem.space, budget)
        }
        (ParallelDevices::One(_), _, _) => Err(format!(
            "internal error: {} chains for one accelerator type",
            chains.len()
        )),
    }
}

/// The chain of `model` on `profile` per micro-batch size of `space`, priced at `t = 1` and
/// every TP degree the space allows.
fn chains_of(
    model: &PricedModel,
    profile: &DeviceProfile,
    space: &Space,
) -> Result<Vec<ChainCosts>, String> {
    let mut degrees: Vec<usize> = std::iter::once(1)
        .chain(space.tensor_parallel.iter().copied())
        .collect();
    degrees.sort_unstable();
    degrees.dedup();
    space
        .micro_batches
        .iter()
        .map(|&b| {
            transformer_chain_with(
                &with_batch(model.spec, b),
                model.dtype,
                profile,
                &degrees,
                model.sequence_parallel,
            )
        })
        .collect()
}

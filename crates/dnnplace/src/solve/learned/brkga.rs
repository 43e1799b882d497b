//! `genetic`: a biased random-key genetic algorithm (BRKGA; Gonçalves & Resende, "Biased
//! random-key genetic algorithms for combinatorial optimization", J. Heuristics 17, 2011),
//! the search engine under REGAL (Paliwal et al., ICLR 2020). REGAL's learned policy,
//! which chooses BRKGA's per-node distributions, is not reproduced: this is plain BRKGA.
//!
//! **Chromosome.** A vector of `N` random keys in `[0, 1)`, decoded to a device per unit
//! ([`super::Units`]) by [`super::decode`]: `N = G` for the non-contiguous problem
//! ([`super::decode::non_contiguous`]), `N = G + 2D − 1` for the contiguous one (priorities,
//! cuts and device order, [`super::decode::contiguous`]; every decoded plan is a chain of
//! ideals, on a cluster machine by machine). Both decoders keep the CPU-only and memory
//! rules (each accelerator's own memory on a cluster); the scorer's objective is the
//! fitness (minimised), and keys that do not decode, or a plan the scorer rejects, are
//! ranked last.
//!
//! **One generation** from a population of `p` chromosomes sorted by fitness:
//! 1. the `p_e = ⌈ρ_E·p⌉` best (the elite) are copied unchanged;
//! 2. `p_m = ⌊ρ_M·p⌋` mutants are drawn uniformly at random;
//! 3. the other `p − p_e − p_m` are children of biased crossover: one parent drawn
//!    uniformly from the elite, one from the non-elite, and each key taken from the elite
//!    parent with probability `ρ_e`, else from the other;
//! 4. the new chromosomes are decoded and scored, and the population sorted again (ties
//!    keep the earlier index, so a seed fixes the run).
//!
//! **Parameters** (Gonçalves & Resende 2011, §"Parameter settings": population `a·N`
//! with `a ≥ 1`, elite 0.10–0.25 of it, mutants 0.10–0.30, `ρ_e` 0.5–0.8, 0.7 typical):
//! `p = 2N` clamped to [`MIN_POPULATION`]..=[`MAX_POPULATION`], `ρ_E` = [`ELITE`] = 0.15,
//! `ρ_M` = [`MUTANTS`] = 0.15, `ρ_e` = [`INHERIT`] = 0.7; [`DEFAULT_GENERATIONS`]
//! generations or `Limits::search_steps`.
//!
//! **Budget.** The time limit and Ctrl-C are looked at before every decoding; the
//! population (2·p·N keys) is reserved against `--memory-budget` first.
//!
//! **Randomness.** `rand`'s `ChaCha8Rng` (pinned `=0.10.3`, a value-stable stream) seeded
//! with `--seed`: the keys, the parents and the inherited keys; a seed fixes the run.
//!
//! Complexity per generation: O(p·(N + decode + n + m) + p log p).

use rand::rngs::ChaCha8Rng;
use rand::RngExt;

use super::decode;
use super::{seeded, unit_interval, Ending, Scorer, Setup};
use crate::model::Device;
use crate::solve::{Method, MethodId, Outcome, Problem, SolveError};

/// Generations without `Limits::search_steps`.
pub const DEFAULT_GENERATIONS: usize = 100;
/// Elite fraction ρ_E.
pub const ELITE: f64 = 0.15;
/// Mutant fraction ρ_M.
pub const MUTANTS: f64 = 0.15;
/// Probability ρ_e that a child's key comes from its elite parent.
pub const INHERIT: f64 = 0.7;
/// Population bounds around `2N`.
pub const MIN_POPULATION: usize = 20;
pub const MAX_POPULATION: usize = 500;

/// BRKGA (`--method genetic`).
pub struct Genetic;

impl Method for Genetic {
    fn id(&self) -> MethodId {
        MethodId::Genetic
    }

    fn solve(&self, problem: &Problem) -> Result<Outcome, SolveError> {
        let setup = Setup::new(problem, MethodId::Genetic)?;
        let (units, devices) = (&setup.units, &setup.devices);
        let keys = if problem.contiguous {
            decode::contiguous_keys(units.len(), devices)
        } else {
            units.len()
        };
        let p = (2 * keys).clamp(MIN_POPULATION, MAX_POPULATION);
        let (elite, mutants) = (
            ((ELITE * p as f64).ceil() as usize).max(1),
            (MUTANTS * p as f64) as usize,
        );
        let generations = problem.limits.search_steps.unwrap_or(DEFAULT_GENERATIONS);
        let notes = vec![format!(
            "BRKGA: {} units ({}), {keys} keys, population {p} (elite {elite}, mutants {mutants}, ρe {INHERIT}), {} decoder, seed {}",
            units.len(),
            units.source,
            if problem.contiguous { "contiguous" } else { "non-contiguous" },
            problem.limits.seed
        )];
        let what = format!("the population ({p} × {keys} keys, twice)");
        let bytes = 2.0 * 8.0 * p as f64 * keys as f64;
        if let Some(outcome) = setup.reserve(&what, bytes, MethodId::Genetic, "generations", &notes)
        {
            return Ok(outcome);
        }
        let mut scorer = setup.scorer();
        let decoder = |keys: &[f64]| {
            if problem.contiguous {
                decode::contiguous(units, keys, devices)
            } else {
                decode::non_contiguous(units, keys, devices)
            }
        };
        let mut rng = seeded(problem.limits.seed);
        let mut evolution = Evolution {
            keys,
            elite,
            mutants,
            population: Vec::with_capacity(p),
        };
        let (mut stopped, mut done) = (None, 0);
        for _ in 0..p {
            let chromosome: Vec<f64> = (0..keys).map(|_| unit_interval(&mut rng)).collect();
            evolution.population.push((f64::INFINITY, chromosome));
        }
        if let Err(e) = evolution.score(0, &mut scorer, &decoder, &setup.search) {
            stopped = Some(e);
        }
        while stopped.is_none() && done < generations {
            let next = evolution.next_generation(&mut rng);
            let previous = std::mem::replace(&mut evolution.population, next);
            if let Err(e) = evolution.score(elite, &mut scorer, &decoder, &setup.search) {
                evolution.population = previous;
                stopped = Some(e);
                break;
            }
            done += 1;
        }
        let ending = Ending {
            stopped,
            what: format!("{done} of {generations} generations"),
        };
        Ok(setup.finish(MethodId::Genetic, scorer, ending, notes))
    }
}

/// The population of the module docs: `(fitness, keys)` sorted by fitness.
struct Evolution {
    keys: usize,
    elite: usize,
    mutants: usize,
    population: Vec<(f64, Vec<f64>)>,
}

impl Evolution {
    /// Scores the chromosomes from index `from` on, then sorts (stable: ties keep order).
    fn score(
        &mut self,
        from: usize,
        scorer: &mut Scorer,
        decoder: &dyn Fn(&[f64]) -> Option<Vec<Device>>,
        budget: &crate::solve::budget::Budget,
    ) -> Result<(), crate::solve::budget::Exhausted> {
        for (fitness, chromosome) in self.population.iter_mut().skip(from) {
            budget.check()?;
            *fitness = decoder(chromosome)
                .and_then(|devices| scorer.score(&devices))
                .unwrap_or(f64::INFINITY);
        }
        self.population.sort_by(|a, b| a.0.total_cmp(&b.0));
        Ok(())
    }

    /// Steps 1–3 of the module docs: the elite, the mutants and the children (children
    /// and mutants unscored).
    fn next_generation(&self, rng: &mut ChaCha8Rng) -> Vec<(f64, Vec<f64>)> {
        let p = self.population.len();
        let elite = self.elite.min(p);
        let mut next: Vec<(f64, Vec<f64>)> = self.population[..elite].to_vec();
        let mutants = self.mutants.min(p - elite);
        for _ in 0..mutants {
            let chromosome = (0..self.keys).map(|_| unit_interval(rng)).collect();
            next.push((f64::INFINITY, chromosome));
        }
        while next.len() < p {
            let a = &self.population[rng.random_range(0..elite)].1;
            let b = if p > elite {
                &self.population[elite + rng.random_range(0..p - elite)].1
            } else {
                &self.population[rng.random_range(0..p)].1
            };
            let child = (0..self.keys)
                .map(|i| {
                    if unit_interval(rng) < INHERIT {
                        a[i]
                    } else {
                        b[i]
                    }
                })
                .collect();
            next.push((f64::INFINITY, child));
        }
        next
    }
}

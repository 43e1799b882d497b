//! Placement on a cluster ([`crate::model::cluster`]): accelerators of several types on
//! several machines with a link hierarchy.
//!
//! - [`dp`]: the contiguous TPS optimum by dynamic programming over ideals, its state
//!   extended by machines, types and where producers are;
//! - [`coarse`]: the cluster DP on coarsened graphs, plans for large graphs;
//! - folding zero-cost leaves before the DP: [`crate::solve::leaf_folding::fold_free_leaves_on_cluster`];
//! - [`greedy`]: a topological order packed into the accelerators in order, the plan
//!   when the DP stops without one;
//! - [`typed_chain`]: a topological order packed into the machines in each order of the
//!   accelerator types, stage loads with their transfers, kept where better than the DP's plan;
//! - [`machine_chain`]: the best plan whose stages are intervals of a topological order
//!   (two orders), exactly per threshold by a program over the machines used per kind,
//!   kept where better too;
//! - [`plan`]: a solver's plan re-scored by the independent evaluator before it is shown;
//! - [`sweep`]: the scaling curve, the cheapest cluster for a target and the price frontier;
//! - [`ip`]: the cluster integer program (HiGHS), non-contiguous or in the DP's contiguous
//!   plan space, warm-started from the DP's plan;
//! - the bounds these methods report (volume, set, chain, machine) are in
//!   [`crate::solve::bounds::cluster`], the transfers they price in
//!   [`crate::model::transfers`];
//! - [`brute_force`]: exhaustive search, the oracle of the tests.

pub mod brute_force;
pub mod coarse;
pub mod dp;
pub mod greedy;
pub mod ip;
pub mod machine_chain;
pub mod plan;
pub mod sweep;
pub mod typed_chain;

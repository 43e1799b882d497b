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
//! - [`set_bound`]: a lower bound on every plan from the cheapest set of units a device
//!   can hold around one unit (a minimum cut per unit and device class);
//! - [`transfers`]: the transfers between units, priced per machine;
//! - [`volume_bound`]: a lower bound on every plan from the work each device class must
//!   absorb (a Lagrangian LP bound, evaluated at HiGHS's multipliers);
//! - [`chain_bound`]: a lower bound on contiguous plans from the order in which their
//!   stages take the work (a chain relaxation over a topological order's prefixes);
//! - [`machine_bound`]: the chain relaxation taken machine by machine, each stage charged
//!   what it must receive (contiguous plans, machines of one type each);
//! - [`brute_force`]: exhaustive search, the oracle of the tests.

pub mod brute_force;
pub mod chain_bound;
pub mod coarse;
pub mod dp;
pub mod greedy;
pub mod machine_bound;
pub mod machine_chain;
pub mod plan;
pub mod set_bound;
pub mod sweep;
pub mod transfers;
pub mod typed_chain;
pub mod volume_bound;

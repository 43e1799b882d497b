//! Proven lower bounds, the room every solver draws its gap from.
//!
//! A bound here is a number no plan of the problem can beat, proven by its own argument
//! (each module states it) and independent of any solver's search; solvers take the
//! largest that applies, report it beside their plan, and stop once a plan meets it.
//!
//! - [`load`]: the max-load (TPS) bound of the paper's problem — forced units, pigeon,
//!   volume (a fractional knapsack of what the CPUs absorb), communication (minimum
//!   cuts) and packing — by bisection on the threshold; also the sync objective's sides;
//! - [`min_cut`]: the cheapest accelerator set around given units, `min_{S ⊇ Q} cut(S) +
//!   μ·fpga(S)`, by maximum flow (the communication test's `h_Q`);
//! - [`latency`]: per-node finish-time bounds under MODEL.md's latency model, for the
//!   latency IP and the learned placers.
//! - [`cluster`]: on a cluster of machines and types — the volume LP, the set bound (a
//!   minimum cut per unit and device class), the chain relaxation over a topological
//!   order's prefixes, and the same taken machine by machine.
//!
//! Bounds import no solver: the solvers (`dp`, `milp`, `cluster`, `auto`, `coarsen`,
//! `learned`) import them (`tests/architecture.rs` checks it).

pub mod cluster;
pub mod latency;
pub mod load;
pub mod min_cut;

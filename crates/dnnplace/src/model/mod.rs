//! The model of MODEL.md: the operator graph with its device set, and placements.
//!
//! - [`workload`]: nodes, edges, validation (a [`Workload`] is always a valid DAG);
//! - [`memory`]: the kinds a node's memory is made of (weights, gradients, optimizer
//!   state, stashed activations) and how they scale with micro-batches in flight;
//! - [`devices`]: the device set and device names;
//! - [`cluster`]: machines with accelerators of several types and their links, what a
//!   workload's numbers mean on them, and the communication rule;
//! - [`count`]: device and machine counts as written (saturating, never overflowing) and
//!   their clamp to what a plan on n nodes can use;
//! - [`cluster_costs`]: a workload priced on a cluster (node times per type, link times);
//! - [`profiles`]: device profiles (datasheet numbers) and the built-in catalogue;
//! - [`placement`]: an assignment of every node to one device;
//! - [`numerics`]: compensated sums with certified differences and power-of-two rescaling,
//!   used wherever the scorer and the solvers take sums (the numerics guarantee);
//! - [`schedule`]: pipeline schedules (GPipe, 1F1B, interleaved) and the micro-batches
//!   each keeps in flight per stage;
//! - [`recompute`]: activation recomputation: what a recomputing stage holds and the
//!   forward pass it adds;
//! - [`grouping`]: nodes grouped into units with their summed costs and communication
//!   hyperedges (the unit model of every solver);
//! - [`contraction`]: colour classes contracted into the forward DAG of groups that
//!   contiguous solvers split (ideals, DP, contiguous IP, chain baselines);
//! - [`parallel`]: parallel layouts (stages × TP × DP × ZeRO × micro-batch), the chain of
//!   units they split, identical-machine topologies and the collective formulas;
//! - [`layers`]: layers (`layerId` blocks) with their module names, the units a
//!   layer-granular plan keeps whole.

pub mod cluster;
pub mod cluster_costs;
pub mod contraction;
pub mod count;
pub mod devices;
pub mod grouping;
pub mod layers;
pub mod memory;
pub mod numerics;
pub mod parallel;
pub mod piper;
pub mod placement;
pub mod profiles;
pub mod recompute;
pub mod schedule;
pub mod transfers;
pub mod workload;

pub use cluster::{AcceleratorType, Cluster, Link, Machine, Platform, ProfileTimes, Reference};
pub use cluster_costs::ClusterCosts;
pub use count::Count;
pub use devices::{human_bytes, parse_bytes, Device, DeviceSet};
pub use memory::NodeMemory;
pub use placement::Placement;
pub use workload::{Edge, Node, Unplaceable, Workload, WorkloadError};

//! The lower bounds of plans on a cluster ([`crate::model::cluster`]), for the cluster DP,
//! its IP and the learned placers; each proven against brute force in `tests/cluster_*`.
//!
//! - [`set`]: a lower bound on every plan from the cheapest set of units a device
//!   can hold around one unit (a minimum cut per unit and device class);
//! - [`volume`]: a lower bound on every plan from the work each device class must
//!   absorb (a Lagrangian LP bound, evaluated at HiGHS's multipliers);
//! - [`chain`]: a lower bound on contiguous plans from the order in which their
//!   stages take the work (a chain relaxation over a topological order's prefixes);
//! - [`machine`]: the chain relaxation taken machine by machine, each stage charged
//!   what it must receive (contiguous plans, machines of one type each);

pub mod chain;
pub mod machine;
pub mod set;
pub mod volume;

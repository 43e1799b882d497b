//! Reports: plans and evaluations as tables for people and JSON for programs.
//!
//! - [`table`]: one plan (`plan`, `score`);
//! - [`compare`]: the comparison of every method on one workload (`compare`);
//! - [`reproduce`]: the comparison over every published workload (`reproduce`).

pub mod compare;
pub mod reproduce;
pub mod table;

pub use compare::{comparison_json, comparison_markdown, comparison_text};
pub use table::{evaluation_json, placement_json, plan_table};

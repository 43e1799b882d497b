//! Reports: plans and evaluations as tables for people and JSON for programs.

pub mod table;

pub use table::{evaluation_json, placement_json, plan_table};

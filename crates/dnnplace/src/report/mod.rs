//! Reports: plans and evaluations as tables for people and JSON for programs.
//!
//! - [`tabular`]: the one table renderer (aligned text, Markdown, HTML) the others use;
//! - [`table`]: one plan as a table (`plan`, `score`);
//! - [`plan_json`]: one plan or scored placement as JSON, the same record on every road
//!   (one machine, a cluster; the command line and the Python binding);
//! - [`layers`]: what each device holds, by layer range and module path;
//! - [`cluster`](mod@cluster): a plan on a cluster, per device with machine and type;
//! - [`parallel`](mod@parallel): a parallel layout (stages × TP × DP) per stage, as text
//!   and JSON;
//! - [`parallel_html`]: a parallel layout's HTML report (`plan --parallel 3d --report`): the
//!   layout on the machines, the stage table and the simulated lanes;
//! - [`compare`]: the comparison of every method on one workload (`compare`);
//! - [`reproduce`]: the page over every published workload (`reproduce`);
//! - [`bench`](mod@bench): the timings of `dnnplace bench`;
//! - [`simulation`]: a pipeline simulation as a table and as JSON (`simulate`);
//! - [`calibration`]: a device profile fitted to a measured one (`calibrate`);
//! - [`html`]: the visual plan report, one self-contained HTML page (`--report`), built
//!   from the SVG [`charts`].

pub mod bench;
pub mod calibration;
pub mod charts;
pub mod cluster;
pub mod compare;
pub mod html;
pub mod layers;
pub mod parallel;
pub mod parallel_html;
pub mod plan_json;
pub mod reproduce;
pub mod simulation;
pub mod table;
pub mod tabular;

pub use compare::{comparison_json, comparison_markdown, comparison_text};
pub use plan_json::{ClaimJson, EvaluationJson, PlanJson};
pub use table::{placement_json, plan_table};

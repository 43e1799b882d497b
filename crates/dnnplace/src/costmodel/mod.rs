//! Cost models: from a model file or a model description and a device profile to a
//! workload with per-operator costs.
//!
//! Units throughout: latencies and edge costs in **milliseconds**, sizes in bytes, FLOPs
//! as floating-point operations (one multiply-add = 2 FLOPs).
//!
//! - [`profiles`]: device profiles (datasheet numbers), built-in and from TOML files;
//! - [`calibrate`]: `compute_efficiency`, `memory_efficiency` and `launch_overhead_ms`
//!   fitted to a measured profile;
//! - [`cluster`]: clusters from the `--cluster` short form and cluster files, defaults
//!   from the profiles;
//! - [`operators`]: FLOPs and bytes moved per operator from tensor shapes, and the
//!   roofline time;
//! - [`graph`]: an operator graph with costs, priced into a [`crate::model::Workload`];
//! - [`training`]: backward nodes, their costs, sizes and edges;
//! - [`hf_config`]: a Hugging Face `config.json` as a [`TransformerSpec`];
//! - [`onnx`]: ONNX import with shape inference and module paths;
//! - [`transformer`]: an operator-level BERT / GPT-2 / Llama generator with Hugging Face
//!   module names;
//! - [`parallel`]: tensor-parallel costs of the transformer's operators, Megatron-style,
//!   as the chain a parallel layout splits;
//! - [`workload_chain`]: a MODEL.md training workload (with its optional per-node
//!   `tensorParallel` options) as the chain a parallel layout splits;
//! - [`synthetic`]: GPT-like and wide graphs for scale tests.

pub mod calibrate;
pub mod cluster;
pub mod graph;
pub mod hf_config;
pub mod onnx;
pub mod onnx_parallel;
pub mod operators;
pub mod parallel;
pub mod profiles;
pub mod synthetic;
pub mod training;
pub mod transformer;
pub mod workload_chain;

pub use calibrate::{calibrate, Calibration, CalibrationError};
pub use graph::{to_workload, CostSettings, Op, OpGraph};
pub use operators::{DType, OpClass, OpCost};
pub use profiles::{builtin_profiles, find_profile, DeviceProfile, ProfileError};
pub use transformer::{transformer_graph, Head, Style, TransformerSpec};

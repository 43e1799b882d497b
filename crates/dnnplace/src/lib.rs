//! # dnnplace
//!
//! Device placement of DNN operator graphs: split a model's operators over k accelerators
//! and ℓ CPU cores to minimise Time-Per-Sample (pipelined throughput) or single-sample
//! latency, under the exact cost model of MODEL.md.
//!
//! The crate is layered the way data flows:
//! - [`model`]: the workload graph, devices, placements, colour-class contraction;
//! - [`io`]: workload and placement files;
//! - [`score`]: the independent evaluator every plan passes through;
//! - [`solve`]: the methods (ideal-lattice DP, brute force, ...) behind one interface;
//! - [`experiments`]: many workloads at once (`reproduce`, `bench`), as data;
//! - [`simulate`]: a discrete-event simulation of a plan running a pipeline schedule;
//! - [`report`]: tables and JSON for people and programs, and the HTML/SVG plan report;
//! - [`export`]: plans in the forms frameworks read (PyTorch pipelining, DeepSpeed,
//!   Megatron-LM, vLLM, accelerate), and those forms read back;
//! - [`costmodel`]: device profiles, per-operator costs, ONNX import and a transformer
//!   generator that turn a model into a workload.
//!
//! The command line (the binary `dnnplace`) is its own crate at the workspace root and sits
//! on top; this crate exposes no command-line types and never prints.

pub mod costmodel;
pub mod experiments;
pub mod export;
pub mod io;
pub mod model;
pub mod report;
pub mod score;
pub mod simulate;
pub mod solve;

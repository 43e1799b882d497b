//! The `dnnplace` binary: the command line ([`cli`]) over the `dnnplace` library.
//!
//! The library's rooms are re-exported at this crate's root so that the command line names
//! them as the library does (`crate::solve::…`); the command line adds no model, solver or
//! renderer of its own, only flags, their validation and the commands that chain the
//! library's steps.

mod cli;

pub(crate) use dnnplace::{
    costmodel, experiments, export, io, model, report, score, simulate, solve,
};

fn main() -> std::process::ExitCode {
    cli::main()
}

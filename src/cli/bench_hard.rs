//! `dnnplace bench --hard`: `--method auto` on the hard families of issue 29, each planned
//! in a child process like the scale rows ([`super::bench_scale`]), with the same columns
//! (time, plan's TPS, proven bound, gap, status, peak memory).
//!
//! Rows (a100-80gb accelerators, one CPU core, fp32, unless said):
//! - `chains-7x5-k4`, `chains-8x5-k4`: one block of 7 (8) parallel 5-op branches
//!   (`generate wide --blocks 1 --branches 7 --branch-ops 5`), k = 4;
//! - `chains-7x5-k8`, `chains-8x5-k8`: the same blocks with k = 8; `chains-12x6-k4`,
//!   `chains-10x8-k4`: one block of 12 parallel 6-op (10 parallel 8-op) branches, k = 4
//!   (the graphs of at most 100 nodes the split search did not prove in 30 s; the
//!   fork-join search, `solve::fork_join`, proves all six chains rows);
//! - `wide-8x8-k4`, `wide-16x8-k4`: 8 (16) blocks of 8 parallel 4-op branches, k = 4;
//! - `cluster-transformer-{96,384}-3types-256`: `generate transformer --layers L` (BERT
//!   shapes) on `12x8xa100-80gb+10x8xv100+10x8xh100` (256 GPUs of three types);
//! - `gnmt-{inference,training}-k{8,16}-l2-mem1.3`: the published GNMT layer graphs with
//!   k = 8, 16, ℓ = 2 and memory per accelerator 1.3 × (total size)/k (read from
//!   `--gnmt-dir`, never copied);
//! - `gpt-h1024-100k`: the GPT-like graph of `generate gpt` with another block shape
//!   (h = 1024, 16 heads, s = 256, V = 32000: 367 GiB with one sample in flight, so it fits
//!   the 640 GiB of 8 a100-80gb; at s = 1024 its 1.6 TiB do not) and as many layers as give 100k operators,
//!   k = 8.

use std::path::Path;

use super::bench_scale::{gnmt, priced, run_cases, transformer_on_cluster, Case};
use super::CliError;
use crate::costmodel::synthetic::{gpt_graph, gpt_layers_for_nodes, wide_graph, GptSpec, WideSpec};
use crate::costmodel::DType;

/// The hard rows (module docs).
fn cases(gnmt_dir: &Path) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    for (name, blocks, branches, ops, k) in [
        ("chains-7x5-k4", 1, 7, 5, 4),
        ("chains-8x5-k4", 1, 8, 5, 4),
        ("chains-7x5-k8", 1, 7, 5, 8),
        ("chains-8x5-k8", 1, 8, 5, 8),
        ("chains-12x6-k4", 1, 12, 6, 4),
        ("chains-10x8-k4", 1, 10, 8, 4),
        ("wide-8x8-k4", 8, 8, 4, 4),
        ("wide-16x8-k4", 16, 8, 4, 4),
    ] {
        cases.push(Case {
            name: name.into(),
            build: Box::new(move || {
                priced(
                    wide_graph(&WideSpec::new(blocks, branches, ops), DType::Fp32)
                        .map_err(CliError::Internal)?,
                    k,
                    false,
                )
            }),
        });
    }
    for layers in [96, 384] {
        cases.push(Case {
            name: format!("cluster-transformer-{layers}-3types-256"),
            build: transformer_on_cluster(layers, "12x8xa100-80gb+10x8xv100+10x8xh100".into()),
        });
    }
    for kind in ["inference", "training"] {
        for k in [8, 16] {
            let path = gnmt_dir.join(format!("gnmt_{kind}.json"));
            cases.push(Case {
                name: format!("gnmt-{kind}-k{k}-l2-mem1.3"),
                build: Box::new(move || gnmt(&path, k)),
            });
        }
    }
    cases.push(Case {
        name: "gpt-h1024-100k".into(),
        build: Box::new(|| {
            let spec = GptSpec {
                hidden: 1024,
                heads: 16,
                seq: 256,
                vocab: 32000,
                ..GptSpec::gpt2(gpt_layers_for_nodes(100_000))
            };
            priced(
                gpt_graph(&spec, DType::Fp32).map_err(CliError::Internal)?,
                8,
                false,
            )
        }),
    });
    cases
}

/// Runs the hard rows whose name contains `filter`; `plan_args` go to every `plan`.
pub fn run(
    filter: &str,
    time_limit_s: f64,
    gnmt_dir: &Path,
    plan_args: &[String],
    markdown: bool,
) -> Result<(), CliError> {
    run_cases(cases(gnmt_dir), filter, time_limit_s, plan_args, markdown)
}

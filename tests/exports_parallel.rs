//! Megatron-LM and vLLM exports of uniform 3D layouts: render → read back gives the layout
//! built here by hand (even and uneven splits, stages holding only the embedding or only the
//! head, recomputation, ZeRO-1, DP > 1), the read-back layout scores as the original; the
//! split flags checked against Megatron-LM's rules written out by hand; refusals name the
//! stage or rule; `plan --parallel 3d --export` through the binary.
//!
//! Not checked by the real parsers: neither megatron-core nor vLLM is installed in the test
//! environment; the Megatron layout grammar is the project's reimplementation
//! (`export::megatron`).

use std::process::Command;

use dnnplace::costmodel::operators::DType;
use dnnplace::costmodel::parallel::{transformer_chain, with_batch};
use dnnplace::costmodel::transformer::{Style, TransformerSpec};
use dnnplace::export::parallel::{
    read_megatron, read_vllm, render_megatron, render_vllm, Training,
};
use dnnplace::io::cluster_resolve::cluster_and_profiles;
use dnnplace::model::parallel::{ChainCosts, Layout, Topology, Uniform, Zero};
use dnnplace::model::profiles::find_profile;
use dnnplace::model::schedule::Schedule;
use dnnplace::score::parallel::score_layout;
use dnnplace::solve::parallel::ParallelPlan;

const LAYERS: usize = 8;

fn chain(b: usize) -> ChainCosts {
    let spec = TransformerSpec::new(Style::Llama, LAYERS, 64, 4, 16, 1);
    let h100 = find_profile("h100", &[]).unwrap();
    transformer_chain(&with_batch(&spec, b), DType::Bf16, &h100, &[1, 2, 4]).unwrap()
}

fn topology() -> Topology {
    let (cluster, _) = cluster_and_profiles("8x8xh100", &[]).unwrap();
    Topology::from_cluster(&cluster).unwrap()
}

fn plan(cuts: &[usize], t: usize, d: usize, zero: Zero, recompute: bool) -> ParallelPlan {
    let chain = chain(2);
    let cfg = Uniform {
        micro_batch: 2,
        tensor_parallel: t,
        data_parallel: d,
        zero,
        recompute,
        stages: cuts.len() + 1,
    };
    let layout = Layout::uniform(chain.len(), cuts, &cfg, 64, Schedule::OneFOneB);
    let score = score_layout(&chain, &topology(), &layout).unwrap();
    ParallelPlan {
        layout,
        score,
        chain,
    }
}

fn names(p: &ParallelPlan) -> Vec<String> {
    p.chain.units.iter().map(|u| u.name.clone()).collect()
}

/// The command line (the last line) of a rendered text.
fn command(text: &str) -> &str {
    text.lines().last().unwrap()
}

/// Units: 0 embeddings, 1..=8 layers.0..7, 9 head.
#[test]
fn the_chain_is_embeddings_blocks_head() {
    let p = plan(&[], 1, 1, Zero::Off, false);
    assert_eq!(p.chain.len(), LAYERS + 2);
    assert_eq!(names(&p)[0], "embeddings");
    assert_eq!(names(&p)[1], "layers.0");
    assert_eq!(names(&p)[LAYERS + 1], "head");
}

/// One Megatron case: cuts, TP, DP, ZeRO, recompute, the expected split flags.
type MegatronCase = (&'static [usize], usize, usize, Zero, bool, &'static str);

#[test]
fn megatron_round_trips_and_the_split_flags_follow_megatrons_rules() {
    // (cuts, t, d, ZeRO, recompute, the split flags expected by hand from the block counts).
    let cases: [MegatronCase; 8] = [
        // counts [8]: one stage, even.
        (&[], 2, 4, Zero::Off, false, ""),
        // counts [4, 4]: even, nothing to say.
        (&[5], 4, 2, Zero::Optimizer, false, ""),
        // counts [2, 3, 3]: first differs.
        (
            &[3, 6],
            2,
            2,
            Zero::Off,
            true,
            " --decoder-first-pipeline-num-layers 2 --decoder-last-pipeline-num-layers 3",
        ),
        // counts [3, 2, 3]: first and last differ from the middle.
        (
            &[4, 6],
            1,
            2,
            Zero::Optimizer,
            true,
            " --decoder-first-pipeline-num-layers 3 --decoder-last-pipeline-num-layers 3",
        ),
        // counts [1, 2, 5]: middle alone and first, last differ; first/last flags still do.
        (
            &[2, 4],
            1,
            1,
            Zero::Off,
            false,
            " --decoder-first-pipeline-num-layers 1 --decoder-last-pipeline-num-layers 5",
        ),
        // counts [2, 1, 3, 2]: unequal middles need the layout string.
        (
            &[3, 4, 7],
            1,
            1,
            Zero::Off,
            false,
            " --pipeline-model-parallel-layout \"E,t*2|t|t*3|t*2,L\"",
        ),
        // counts [0, 8]: a first stage with the embedding alone.
        (
            &[1],
            2,
            1,
            Zero::Off,
            true,
            " --pipeline-model-parallel-layout \"E|t*8,L\"",
        ),
        // counts [8, 0]: a last stage with the head alone.
        (
            &[9],
            1,
            4,
            Zero::Optimizer,
            false,
            " --pipeline-model-parallel-layout \"E,t*8|L\"",
        ),
    ];
    for (cuts, t, d, zero, recompute, split) in cases {
        let p = plan(cuts, t, d, zero, recompute);
        let text = render_megatron(&p).unwrap();
        let stages = cuts.len() + 1;
        let mut expected = format!(
            "--tensor-model-parallel-size {t} --pipeline-model-parallel-size {stages} --num-layers {LAYERS}{split} --micro-batch-size 2 --global-batch-size 64"
        );
        if zero == Zero::Optimizer {
            expected.push_str(" --use-distributed-optimizer");
        }
        if recompute {
            expected.push_str(
                " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1",
            );
        }
        assert_eq!(command(&text), expected, "{cuts:?}");
        assert_eq!(
            text.lines().filter(|l| l.starts_with("# stage ")).count(),
            stages
        );
        let back = read_megatron(&text, &names(&p), t * d * stages).unwrap();
        assert_eq!(back, p.layout, "{text}");
        let rescored = score_layout(&p.chain, &topology(), &back).unwrap();
        assert_eq!(rescored, p.score);
    }
}

#[test]
fn vllm_round_trips_with_the_training_settings_given_back() {
    let cases: [(&[usize], usize, usize, &str); 4] = [
        (&[], 4, 1, "\"8\""),
        (&[5], 2, 1, "\"4,4\""),
        (&[3, 4, 7], 1, 2, "\"2,1,3,2\""),
        (&[1], 2, 4, "\"0,8\""),
    ];
    for (cuts, t, d, partition) in cases {
        let p = plan(cuts, t, d, Zero::Off, false);
        let text = render_vllm(&p).unwrap();
        let dp = if d > 1 {
            format!(" --data-parallel-size {d}")
        } else {
            String::new()
        };
        assert_eq!(
            command(&text),
            format!(
                "VLLM_PP_LAYER_PARTITION={partition} vllm serve MODEL --tensor-parallel-size {t} --pipeline-parallel-size {}{dp}",
                cuts.len() + 1
            )
        );
        let training = Training {
            micro_batch: 2,
            global_batch: 64,
            zero: Zero::Off,
            schedule: Schedule::OneFOneB,
            recompute: false,
        };
        assert_eq!(read_vllm(&text, &names(&p), training).unwrap(), p.layout);
    }
    // ZeRO and recomputation are dropped, and said so.
    let p = plan(&[5], 2, 2, Zero::Optimizer, true);
    let text = render_vllm(&p).unwrap();
    assert!(text.contains("Dropped (training only, no serving counterpart): micro-batch 2, global batch 64, ZeRO-1, full recomputation."));
}

#[test]
fn hand_written_lines_read() {
    let p = plan(&[], 1, 1, Zero::Off, false);
    let n = names(&p);
    // TP 2, PP 4, even split: 2 blocks per stage; world 16 → DP 2.
    let l = read_megatron(
        "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 --num-layers 8 --micro-batch-size 1 --global-batch-size 32",
        &n,
        16,
    )
    .unwrap();
    let ranges: Vec<_> = l.stages.iter().map(|s| s.units.clone()).collect();
    assert_eq!(ranges, vec![0..3, 3..5, 5..7, 7..10]);
    assert_eq!(
        (l.stages[3].data_parallel, l.stages[3].first_device),
        (2, 12)
    );
    assert_eq!(
        (l.zero, l.recompute, l.global_batch),
        (Zero::Off, false, 32)
    );
    // vLLM without a partition: vLLM's default (8 over 3: 3, 3, 2).
    let training = Training {
        micro_batch: 1,
        global_batch: 8,
        zero: Zero::Off,
        schedule: Schedule::OneFOneB,
        recompute: false,
    };
    let v = read_vllm("vllm serve m -tp 2 -pp 3", &n, training).unwrap();
    let ranges: Vec<_> = v.stages.iter().map(|s| s.units.clone()).collect();
    assert_eq!(ranges, vec![0..4, 4..7, 7..10]);
}

#[test]
fn bad_text_names_the_flag() {
    let n = names(&plan(&[], 1, 1, Zero::Off, false));
    let training = Training {
        micro_batch: 1,
        global_batch: 8,
        zero: Zero::Off,
        schedule: Schedule::OneFOneB,
        recompute: false,
    };
    let cases = [
        ("--tensor-model-parallel-size x --micro-batch-size 1", "--tensor-model-parallel-size"),
        ("--num-layers 9 --micro-batch-size 1", "--num-layers"),
        ("--pipeline-model-parallel-size 2", "--micro-batch-size"),
        ("--pipeline-model-parallel-size 2 --num-layers 8 --micro-batch-size 1 --pipeline-model-parallel-layout \"E,t*3|t*4,L\"", "num_layers"),
        ("--pipeline-model-parallel-size 3 --micro-batch-size 1", "world size 4"),
    ];
    for (text, flag) in cases {
        let e = read_megatron(text, &n, 4).unwrap_err();
        assert!(e.contains(flag), "{text}: {e}");
    }
    for (text, flag) in [
        (
            "VLLM_PP_LAYER_PARTITION=4,3 vllm serve m -pp 2",
            "VLLM_PP_LAYER_PARTITION",
        ),
        (
            "VLLM_PP_LAYER_PARTITION=8 vllm serve m -pp 2",
            "VLLM_PP_LAYER_PARTITION",
        ),
        (
            "vllm serve m --tensor-parallel-size 0",
            "--tensor-parallel-size",
        ),
    ] {
        let e = read_vllm(text, &n, training).unwrap_err();
        assert!(e.contains(flag), "{text}: {e}");
    }
}

#[test]
fn refusals_name_the_stage_or_rule() {
    let e = render_megatron(&plan(&[5], 2, 2, Zero::Parameters, false)).unwrap_err();
    assert!(
        e.contains("ZeRO-3") && e.contains("--use-distributed-optimizer"),
        "{e}"
    );
    let e = render_megatron(&plan(&[5], 2, 2, Zero::Gradients, false)).unwrap_err();
    assert!(e.contains("ZeRO-2"), "{e}");
    let mut p = plan(&[3, 6], 2, 2, Zero::Off, false);
    p.layout.stages[2].tensor_parallel = 4;
    p.layout.stages[2].data_parallel = 1;
    for e in [
        render_megatron(&p).unwrap_err(),
        render_vllm(&p).unwrap_err(),
    ] {
        assert!(e.contains("stage 2 has TP 4 × DP 1"), "{e}");
    }
    let mut p = plan(&[5], 1, 1, Zero::Off, false);
    p.layout.schedule = Schedule::GPipe;
    assert!(render_megatron(&p).unwrap_err().contains("1F1B"));
}

fn cli(extra: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dnnplace"))
        .args([
            "plan",
            "examples/hf/llama-3-70b.json",
            "--parallel",
            "3d",
            "--cluster",
            "4x8xh100",
            "--seq",
            "2048",
            "--global-batch",
            "64",
        ])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn the_cli_prints_and_writes_the_export() {
    let out = cli(&["--zero", "1", "--export", "megatron"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap();
    for flag in [
        "--tensor-model-parallel-size",
        "--pipeline-model-parallel-size",
        "--num-layers 80",
        "--micro-batch-size",
        "--global-batch-size 64",
    ] {
        assert!(line.contains(flag), "{line}");
    }
    let dir =
        std::env::temp_dir().join(format!("dnnplace-exports-parallel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("vllm.sh");
    let out = cli(&["--export", "vllm", "--export-out", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written
        .lines()
        .last()
        .unwrap()
        .starts_with("VLLM_PP_LAYER_PARTITION="));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("VLLM_PP_LAYER_PARTITION="));
    std::fs::remove_dir_all(&dir).unwrap();
    let out = cli(&["--export", "deepspeed"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--export deepspeed"));
    let out = cli(&[
        "--export",
        "megatron",
        "--zero",
        "3",
        "--data-parallel",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--zero 3 --export megatron"), "{err}");
    // Refused before the search: no plan table printed.
    assert!(out.stdout.is_empty());
    // With ZeRO left free the search stays within what Megatron-LM runs: the export works.
    let out = cli(&["--export", "megatron"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("--tensor-model-parallel-size"));
}

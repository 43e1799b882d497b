//! Megatron-LM, DeepSpeed, torchtitan and vLLM exports of uniform 3D layouts: render → read
//! back gives the layout
//! built here by hand (even and uneven splits, stages holding only the embedding or only the
//! head, recomputation, ZeRO-1, DP > 1), the read-back layout scores as the original; the
//! split flags checked against Megatron-LM's rules written out by hand; refusals name the
//! stage or rule; `plan --parallel 3d --export` through the binary.
//!
//! The real parsers: the Megatron layout strings and first/last flags come from the same
//! functions as the stage-split export, which `tests/exports.rs` checks with megatron-core's
//! own parser; the torchtitan and DeepSpeed exports are read by torchtitan 0.2.2's
//! `ConfigManager` and DeepSpeed 0.19.8's `DeepSpeedConfig` in
//! `python/tests/test_exports_3d.py`. vLLM is not installed: its line is checked against
//! the rules of its source, written out by hand below.

use std::process::Command;

use dnnplace::costmodel::operators::DType;
use dnnplace::costmodel::parallel::{transformer_chain, with_batch};
use dnnplace::costmodel::transformer::{Style, TransformerSpec};
use dnnplace::export::parallel::{
    default_split, read_deepspeed, read_layout, read_megatron, read_torchtitan, read_vllm,
    render_deepspeed, render_megatron, render_torchtitan, render_vllm, sequence_parallel_in,
    Training,
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
        accelerators: None,
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
            overlap_grad_reduce: false,
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
        overlap_grad_reduce: false,
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
        overlap_grad_reduce: false,
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
    let out = cli(&["--export", "torch"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--export torch")
            && stderr.contains("megatron, deepspeed, torchtitan, vllm"),
        "{stderr}"
    );
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

/// Units of a chain of `l` blocks: embeddings, layers.0..l−1, head.
fn unit_names(l: usize) -> Vec<String> {
    std::iter::once("embeddings".to_string())
        .chain((0..l).map(|i| format!("layers.{i}")))
        .chain(std::iter::once("head".to_string()))
        .collect()
}

/// The JSON after `name =` in a DeepSpeed export.
fn assigned(text: &str, name: &str) -> serde_json::Value {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("{name} =")))
        .unwrap();
    let value = line.split_once('=').unwrap().1.trim();
    let value = value
        .strip_prefix("json.loads(r'''")
        .and_then(|v| v.strip_suffix("''')"))
        .unwrap_or(value);
    serde_json::from_str(value).unwrap()
}

/// One DeepSpeed case: cuts, t, d, ZeRO, recompute, the `parts` expected by hand.
type DeepSpeedCase = (&'static [usize], usize, usize, Zero, bool, &'static str);

#[test]
fn deepspeed_round_trips_and_the_config_follows_deepspeeds_rules() {
    // parts over the 10 units (embeddings, 8 blocks, head).
    let cases: [DeepSpeedCase; 5] = [
        (&[], 2, 4, Zero::Off, false, "[0,10]"),
        (&[5], 4, 2, Zero::Optimizer, true, "[0,5,10]"),
        (&[3, 4, 7], 1, 2, Zero::Off, false, "[0,3,4,7,10]"),
        (&[1], 2, 1, Zero::Off, true, "[0,1,10]"),
        (&[9], 1, 4, Zero::Optimizer, false, "[0,9,10]"),
    ];
    for (cuts, t, d, zero, recompute, parts) in cases {
        let p = plan(cuts, t, d, zero, recompute);
        let text = render_deepspeed(&p).unwrap();
        let stages = cuts.len() + 1;
        let config = assigned(&text, "ds_config");
        // DeepSpeed: train_batch_size = micro x gradient accumulation x DP.
        assert_eq!(config["train_batch_size"], 64);
        assert_eq!(config["train_micro_batch_size_per_gpu"], 2);
        assert_eq!(config["gradient_accumulation_steps"], 64 / (2 * d));
        assert_eq!(config["zero_optimization"]["stage"], zero.stage());
        assert_eq!(
            config.pointer("/pipeline/activation_checkpoint_interval"),
            recompute.then_some(&serde_json::json!(1))
        );
        assert_eq!(assigned(&text, "parts").to_string(), parts);
        assert_eq!(
            assigned(&text, "topology"),
            serde_json::json!({"num_pp": stages, "num_mp": t, "num_dp": d})
        );
        let back = read_deepspeed(&text, &names(&p), 64).unwrap();
        assert_eq!(back, p.layout, "{text}");
        assert_eq!(score_layout(&p.chain, &topology(), &back).unwrap(), p.score);
        // The JSON form of the same file.
        let json = serde_json::json!({
            "ds_config": config, "parts": assigned(&text, "parts"),
            "topology": assigned(&text, "topology"),
        });
        assert_eq!(
            read_deepspeed(&json.to_string(), &names(&p), 64).unwrap(),
            p.layout
        );
    }
}

#[test]
fn deepspeed_batch_settings_and_refusals() {
    // Any two batch settings give the third; a contradiction is DeepSpeed's error.
    let n = unit_names(8);
    let file = |config: &str| {
        format!("ds_config = {config}\nparts = [0, 5, 10]\ntopology = {{\"num_pp\": 2, \"num_mp\": 1, \"num_dp\": 4}}\n")
    };
    let l = read_deepspeed(
        &file(r#"{"train_batch_size": 32, "gradient_accumulation_steps": 2}"#),
        &n,
        8,
    )
    .unwrap();
    assert_eq!((l.micro_batch, l.global_batch), (4, 32));
    let l = read_deepspeed(&file(r#"{"train_micro_batch_size_per_gpu": 2}"#), &n, 8).unwrap();
    assert_eq!((l.micro_batch, l.global_batch), (2, 8));
    for (config, world, says) in [
        (
            r#"{"train_batch_size": 30, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2}"#,
            8,
            "train_batch_size 30",
        ),
        (
            r#"{"train_batch_size": 32, "zero_optimization": {"stage": 2}}"#,
            8,
            "ZeRO 0 or 1",
        ),
        (
            r#"{"train_batch_size": 32}"#,
            4,
            "more than the cluster's 4",
        ),
        (
            r#"{"train_batch_size": 32, "pipeline": {"activation_checkpoint_interval": 2}}"#,
            8,
            "activation_checkpoint_interval 2",
        ),
    ] {
        let e = read_deepspeed(&file(config), &n, world).unwrap_err();
        assert!(e.contains(says), "{config}: {e}");
    }
    let e = read_deepspeed("parts = [0, 10]\n", &n, 8).unwrap_err();
    assert!(e.contains("ds_config"), "{e}");
    for zero in [Zero::Gradients, Zero::Parameters] {
        let e = render_deepspeed(&plan(&[5], 1, 2, zero, false)).unwrap_err();
        assert!(
            e.contains("ZeRO 0 or 1") && e.contains("PipelineEngine"),
            "{e}"
        );
    }
    let mut p = plan(&[5], 1, 1, Zero::Off, false);
    p.layout.schedule = Schedule::GPipe;
    assert!(render_deepspeed(&p).unwrap_err().contains("1F1B"));
    let serving = Training {
        overlap_grad_reduce: false,
        micro_batch: 1,
        global_batch: 1,
        zero: Zero::Off,
        schedule: Schedule::OneFOneB,
        recompute: false,
    };
    let e = read_layout("onnx", "", &names(&p), 8, serving).unwrap_err();
    assert!(e.contains("megatron, deepspeed, torchtitan, vllm"), "{e}");
}

/// One torchtitan case: cuts, t, d, ZeRO, schedule, recompute, and the replicate degree,
/// shard degree and reshard policy expected by hand.
type TitanCase = (
    &'static [usize],
    usize,
    usize,
    Zero,
    Schedule,
    bool,
    i64,
    i64,
    Option<&'static str>,
);

#[test]
fn torchtitan_round_trips_and_maps_zero_onto_fsdp() {
    let cases: [TitanCase; 5] = [
        (&[5], 2, 2, Zero::Off, Schedule::OneFOneB, false, 2, 1, None),
        (
            &[3, 6],
            1,
            4,
            Zero::Gradients,
            Schedule::GPipe,
            true,
            1,
            4,
            Some("never"),
        ),
        (
            &[1],
            2,
            2,
            Zero::Parameters,
            Schedule::OneFOneB,
            false,
            1,
            2,
            Some("always"),
        ),
        (
            &[],
            4,
            2,
            Zero::Parameters,
            Schedule::OneFOneB,
            true,
            1,
            2,
            Some("always"),
        ),
        (&[9], 1, 1, Zero::Off, Schedule::OneFOneB, false, 1, 1, None),
    ];
    for (cuts, t, d, zero, schedule, recompute, replicate, shard, reshard) in cases {
        let mut p = plan(cuts, t, d, zero, recompute);
        p.layout.schedule = schedule;
        p.score = score_layout(&p.chain, &topology(), &p.layout).unwrap();
        let text = render_torchtitan(&p).unwrap();
        let stages = cuts.len() + 1;
        let file: toml::Table = text.parse().unwrap();
        let par = file["parallelism"].as_table().unwrap();
        let int = |k: &str| par[k].as_integer();
        assert_eq!(int("data_parallel_replicate_degree"), Some(replicate));
        assert_eq!(int("data_parallel_shard_degree"), Some(shard));
        assert_eq!(
            par.get("fsdp_reshard_after_forward")
                .and_then(|v| v.as_str()),
            reshard
        );
        assert_eq!(int("tensor_parallel_degree"), Some(t as i64));
        assert_eq!(int("pipeline_parallel_degree"), Some(stages as i64));
        let training = file["training"].as_table().unwrap();
        let m = 64 / (2 * d);
        // One pipeline flush of all m micro-batches per step, or b per step accumulated.
        let local = if stages > 1 { 2 * m } else { 2 };
        assert_eq!(
            training["local_batch_size"].as_integer(),
            Some(local as i64)
        );
        assert_eq!(training["global_batch_size"].as_integer(), Some(64));
        let mode = if recompute { "full" } else { "none" };
        assert_eq!(file["activation_checkpoint"]["mode"].as_str(), Some(mode));
        if stages > 1 {
            let parts = par["module_fqns_per_model_part"].as_array().unwrap();
            assert_eq!(parts.len(), stages);
            assert_eq!(parts[0][0].as_str(), Some("tok_embeddings"));
            let last = parts[stages - 1].as_array().unwrap();
            assert_eq!(last[last.len() - 2].as_str(), Some("norm"));
            assert_eq!(last[last.len() - 1].as_str(), Some("output"));
            let modules: usize = parts.iter().map(|x| x.as_array().unwrap().len()).sum();
            assert_eq!(modules, LAYERS + 3);
            let name = if schedule == Schedule::GPipe {
                "GPipe"
            } else {
                "1F1B"
            };
            assert_eq!(par["pipeline_parallel_schedule"].as_str(), Some(name));
        }
        let (back, notes) = read_torchtitan(&text, &names(&p), t * d * stages).unwrap();
        assert_eq!(back, p.layout, "{text}");
        // Its TP always splits the sequence: priced by the reader's caller, no note.
        assert!(notes.is_empty() && sequence_parallel_in("torchtitan", &text));
        assert_eq!(score_layout(&p.chain, &topology(), &back).unwrap(), p.score);
    }
    let e = render_torchtitan(&plan(&[5], 1, 2, Zero::Optimizer, false)).unwrap_err();
    assert!(e.contains("ZeRO-1") && e.contains("FSDP2"), "{e}");
}

#[test]
fn torchtitan_defaults_are_torchtitans() {
    // generate_llm_fqn_per_model_part by hand: 32 layers + 1 + 1 over 4 stages is
    // 34 = 4 x 8 + 2, effective counts 9, 9, 8, 8, less the embedding and the output.
    assert_eq!(default_split(4, 32, 1, 1).unwrap(), vec![8, 9, 8, 7]);
    // Its docstring's example: 3 layers, weights 2 and 2, over 2 stages (7 = 4 + 3).
    assert_eq!(default_split(2, 3, 2, 2).unwrap(), vec![2, 1]);
    assert!(default_split(5, 2, 1, 1).is_err());
    let n = unit_names(32);
    // No DP fields: the shard degree takes what is left (16 / (2 x 4) = 2); FSDP with
    // pipeline stages reshards "never" by default (ZeRO-2); no split: torchtitan's default.
    let text = "[parallelism]\ntensor_parallel_degree = 2\npipeline_parallel_degree = 4\npipeline_parallel_microbatch_size = 2\n[training]\nlocal_batch_size = 8\n[activation_checkpoint]\nmode = \"none\"\n";
    let (l, _) = read_torchtitan(text, &n, 16).unwrap();
    assert_eq!(l.stages[0].data_parallel, 2);
    assert_eq!(l.zero, Zero::Gradients);
    let units: Vec<usize> = l.stages.iter().map(|s| s.units.len()).collect();
    assert_eq!(units, vec![9, 9, 8, 8]); // with the embedding and the head
    assert_eq!((l.micro_batch, l.global_batch), (2, 16));
    let none = "[activation_checkpoint]\nmode = \"none\"\n";
    for (text, field) in [
        ("[parallelism]\npipeline_parallel_degree = 4\n".to_string(), "mode = \"selective\""),
        (format!("[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 8\n{none}"), "HSDP"),
        ("[parallelism]\ncontext_parallel_degree = 2\n".to_string(), "context_parallel_degree"),
        (format!("[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_schedule = \"Interleaved1F1B\"\n{none}"), "pipeline_parallel_schedule"),
        (format!("[parallelism]\npipeline_parallel_degree = 2\n[training]\nlocal_batch_size = 4\nglobal_batch_size = 64\n{none}"), "global_batch_size 64"),
        (format!("[parallelism]\npipeline_parallel_degree = 2\nmodule_fqns_per_model_part = [[\"tok_embeddings\", \"layers.1\"], [\"layers.0\"]]\n{none}"), "out of order"),
        ("[parallelism]\ntensor_parallel_degree = 3\n".to_string(), "16 GPUs"),
        ("not toml = = 1".to_string(), "not a TOML file"),
    ] {
        let e = read_torchtitan(&text, &n, 16).unwrap_err();
        assert!(e.contains(field), "{text}: {e}");
    }
}

/// `score --parallel 3d --from-export` of each export of the CLI's plan gives the plan's
/// value; a hand-written Megatron line is scored too.
#[test]
fn score_reads_every_export_back_through_the_cli() {
    let dir = std::env::temp_dir().join(format!("dnnplace-score-3d-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = |out: &std::process::Output| -> serde_json::Value {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let value = |out: &std::process::Output| json(out)["value"].as_f64().unwrap();
    let score = |format: &str, file: &std::path::Path, extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_dnnplace"))
            .args(["score", "examples/hf/llama-3-70b.json", "--parallel", "3d"])
            .args(["--cluster", "4x8xh100", "--seq", "2048", "--json"])
            .args(["--from-export", format])
            .arg(file)
            .args(extra)
            .output()
            .unwrap()
    };
    for format in ["megatron", "deepspeed", "torchtitan", "vllm"] {
        let file = dir.join(format);
        let planned = json(&cli(&[
            "--json",
            "--export",
            format,
            "--export-out",
            file.to_str().unwrap(),
        ]));
        // vLLM carries neither the batch sizes nor ZeRO nor recomputation: given back.
        let (b, z) = (
            planned["microBatch"].to_string(),
            planned["zero"].to_string(),
        );
        let mut extra = vec![];
        if format == "vllm" {
            extra = vec!["--global-batch", "64", "--micro-batch", &b, "--zero", &z];
            if planned["recompute"] == true {
                extra.push("--recompute-all");
            }
        }
        let scored = value(&score(format, &file, &extra));
        assert_eq!(scored, planned["value"].as_f64().unwrap(), "{format}");
    }
    let hand = dir.join("hand.sh");
    std::fs::write(&hand, "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4 --num-layers 80 --micro-batch-size 2 --global-batch-size 64 --use-distributed-optimizer\n").unwrap();
    // TP 8 x PP 4 over 32 GPUs leaves DP 1: 70 B parameters' optimizer state on 32 GPUs
    // (33.8 GiB on the first stage) and four two-sample micro-batches in flight (87 GiB of
    // stash) do not fit in 80 GiB; `score` says so with exit 1 and the figures. (With
    // one-sample micro-batches it fits since Llama's SiLU is split per column: 77.4 GiB.)
    let out = score("megatron", &hand, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not fit"));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["fits"], false);
    assert_eq!(v["stages"].as_array().unwrap().len(), 4);
    assert_eq!(v["stages"][0]["tensorParallel"], 8);
    let out = score("megatron", &hand, &["--global-batch", "8"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--global-batch"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Several types: a uniform layout on `2x4xh100+2x4xa100-80gb` whose stages run A100,
/// A100, H100, H100 (devices numbered group by group: H100 0–7, A100 8–15), each stage one
/// whole machine, rendered with its node-rank table in each format, read back and put on
/// the machines the table names: the same layout and the same score.
#[test]
fn exports_on_two_types_round_trip_through_the_node_rank_table() {
    use dnnplace::export::parallel::{place_on_machines, render_mixed};
    use dnnplace::model::parallel::MixedTopology;
    use dnnplace::score::parallel::score_mixed;
    let (cluster, _) = cluster_and_profiles("2x4xh100+2x4xa100-80gb", &[]).unwrap();
    let topo = MixedTopology::from_cluster(&cluster).unwrap();
    let spec = TransformerSpec::new(Style::Llama, LAYERS, 64, 4, 16, 1);
    let chains: Vec<ChainCosts> = ["h100", "a100-80gb"]
        .iter()
        .map(|ty| {
            let profile = find_profile(ty, &[]).unwrap();
            transformer_chain(&with_batch(&spec, 2), DType::Bf16, &profile, &[1, 2, 4]).unwrap()
        })
        .collect();
    for (format, t, d) in [
        ("megatron", 2, 2),
        ("deepspeed", 2, 2),
        ("torchtitan", 1, 4),
        ("vllm", 4, 1),
    ] {
        let cfg = Uniform {
            micro_batch: 2,
            tensor_parallel: t,
            data_parallel: d,
            zero: Zero::Off,
            recompute: false,
            stages: 4,
        };
        let mut layout = Layout::uniform(chains[0].len(), &[2, 4, 6], &cfg, 64, Schedule::OneFOneB);
        for (st, first) in layout.stages.iter_mut().zip([8, 12, 0, 4]) {
            st.first_device = first;
        }
        let score = score_mixed(&chains, &topo, &layout).unwrap();
        let plan = ParallelPlan {
            layout: layout.clone(),
            score: score.clone(),
            chain: chains[1].clone(),
            accelerators: Some(
                ["a100-80gb", "a100-80gb", "h100", "h100"]
                    .map(String::from)
                    .to_vec(),
            ),
        };
        let text = render_mixed(format, &plan, &topo).unwrap_or_else(|e| panic!("{format}: {e}"));
        for row in [
            "# node-rank 0: machine a100-80gb:0 (a100-80gb), stages 0\n",
            "# node-rank 1: machine a100-80gb:1 (a100-80gb), stages 1\n",
            "# node-rank 2: machine h100:0 (h100), stages 2\n",
            "# node-rank 3: machine h100:1 (h100), stages 3\n",
        ] {
            assert!(text.contains(row), "{format}: no {row} in\n{text}");
        }
        let serving = Training {
            micro_batch: 2,
            global_batch: 64,
            zero: Zero::Off,
            schedule: Schedule::OneFOneB,
            recompute: false,
            overlap_grad_reduce: false,
        };
        let (read, _) = read_layout(format, &text, &names(&plan), 16, serving)
            .unwrap_or_else(|e| panic!("{format}: {e}"));
        let placed = place_on_machines(format, &text, read, &topo).unwrap();
        assert_eq!(placed, layout, "{format}");
        assert_eq!(
            score_mixed(&chains, &topo, &placed).unwrap(),
            score,
            "{format}"
        );
    }
}

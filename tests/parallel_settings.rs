//! The library's 3D settings (`solve::parallel::settings`), the road the command line and
//! Python share: each refusal names its flag as data (`SettingsError::Setting { flag }`)
//! with the message the binary prints after `error:`, and the problem built from settings
//! is searched to the layout `plan --parallel 3d --json` prints.

use std::path::PathBuf;
use std::process::{Command, Output};

use dnnplace::report::parallel::layout_json;
use dnnplace::solve::budget::Budget;
use dnnplace::solve::parallel::{self, Choice, ParallelModel, ParallelSettings, SettingsError};

const LLAMA_8B: &str = "examples/hf/llama-3-8b.json";

fn settings() -> ParallelSettings {
    let mut s = ParallelSettings::new(ParallelModel::Path(PathBuf::from(LLAMA_8B)));
    s.cluster = Some("1x8xh100".into());
    s.global_batch = Some(16);
    s
}

/// `plan --parallel 3d` of the binary on the same model and cluster, with `flags`.
fn cli(flags: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dnnplace"))
        .args([
            "plan",
            LLAMA_8B,
            "--parallel",
            "3d",
            "--cluster",
            "1x8xh100",
        ])
        .args(flags)
        .output()
        .unwrap()
}

/// The binary's `error:` line for `flags` on the same model and cluster.
fn cli_error(flags: &[&str]) -> String {
    let o = cli(flags);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let line = err.lines().find(|l| l.starts_with("error: ")).unwrap();
    line["error: ".len()..].to_string()
}

#[test]
fn refusals_name_their_flag_with_the_clis_message() {
    type Edit = fn(&mut ParallelSettings);
    let cases: [(Edit, &str, &[&str]); 6] = [
        (|s| s.global_batch = None, "--global-batch", &[]),
        (
            |s| s.global_batch = Some(0),
            "--global-batch",
            &["--global-batch", "0"],
        ),
        (
            |s| s.tensor_parallel = Choice::Fixed(vec![3]),
            "--tensor-parallel",
            &["--global-batch", "16", "--tensor-parallel", "3"],
        ),
        (
            |s| s.data_parallel = Choice::count("9"),
            "--data-parallel",
            &["--global-batch", "16", "--data-parallel", "9"],
        ),
        (
            |s| s.micro_batch = Some(Choice::count("x")),
            "--micro-batch",
            &["--global-batch", "16", "--micro-batch", "x"],
        ),
        (
            |s| s.zero = Choice::zero("7"),
            "--zero",
            &["--global-batch", "16", "--zero", "7"],
        ),
    ];
    for (edit, flag, cli_flags) in cases {
        let mut s = settings();
        edit(&mut s);
        let e = s.build(&mut Vec::new()).unwrap_err();
        match &e {
            SettingsError::Setting { flag: f, .. } => assert_eq!(*f, flag, "{e}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(e.to_string(), cli_error(cli_flags));
    }
}

#[test]
fn the_built_problem_plans_the_clis_layout() {
    let mut s = settings();
    s.tensor_parallel = Choice::degrees("2,4");
    let problem = s.build(&mut Vec::new()).unwrap();
    assert_eq!(problem.space.tensor_parallel, vec![2, 4]);
    assert_eq!(problem.space.micro_batches, vec![1, 2, 4, 8, 16]);
    let outcome = parallel::plan(&problem, &Budget::new(Some(60.0), None)).unwrap();
    let mut ours = serde_json::to_value(layout_json(
        &outcome,
        &problem.topology(),
        problem.objective,
    ))
    .unwrap();
    let o = cli(&["--global-batch", "16", "--tensor-parallel", "2,4", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut theirs: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for v in [&mut ours, &mut theirs] {
        let doc = v.as_object_mut().unwrap();
        doc.remove("timeS");
        doc.remove("peakMemoryBytes");
    }
    assert_eq!(ours, theirs);
    assert!(ours["stages"]
        .as_array()
        .unwrap()
        .iter()
        .all(|st| [2, 4].contains(&st["tensorParallel"].as_u64().unwrap())));
}

//! The malformed-input corpus (`tests/corpus/`): each case of `cases.toml` runs the real
//! binary in that folder and must end with its exit status and message. Also: no case may
//! panic, and every file in the corpus belongs to some case.

use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    args: Vec<String>,
    exit: i32,
    stderr: Option<String>,
    stdout: Option<String>,
    #[allow(dead_code)]
    why: Option<String>,
}

#[derive(serde::Deserialize)]
struct Cases {
    case: Vec<Case>,
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus")
}

/// Files of the corpus, relative to its folder.
fn files(dir: &Path, rel: &str, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir.join(rel)).unwrap() {
        let entry = entry.unwrap();
        let name = format!("{rel}{}", entry.file_name().to_string_lossy());
        if entry.file_type().unwrap().is_dir() {
            files(dir, &format!("{name}/"), out);
        } else {
            out.push(name);
        }
    }
}

#[test]
fn every_malformed_input_gives_its_exit_status_and_message() {
    let dir = corpus();
    let cases: Cases =
        toml::from_str(&std::fs::read_to_string(dir.join("cases.toml")).unwrap()).unwrap();
    assert!(
        cases.case.len() >= 40,
        "the corpus has {} cases",
        cases.case.len()
    );
    let mut failures = Vec::new();
    for case in &cases.case {
        let run = Command::new(env!("CARGO_BIN_EXE_dnnplace"))
            .args(&case.args)
            .current_dir(&dir)
            .output()
            .unwrap();
        let (out, err) = (
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr),
        );
        let mut wrong = Vec::new();
        if run.status.code() != Some(case.exit) {
            wrong.push(format!(
                "exit {:?}, expected {}",
                run.status.code(),
                case.exit
            ));
        }
        if err.contains("panicked") {
            wrong.push("a panic".into());
        }
        if let Some(needle) = &case.stderr {
            if !err.contains(needle.as_str()) {
                wrong.push(format!("stderr lacks {needle:?}"));
            }
        }
        if let Some(needle) = &case.stdout {
            if !out.contains(needle.as_str()) {
                wrong.push(format!("stdout lacks {needle:?}"));
            }
        }
        if case.exit == 2 && !err.starts_with("error: ") {
            wrong.push("a bad input gets one line starting 'error: '".into());
        }
        if !wrong.is_empty() {
            failures.push(format!(
                "{} (dnnplace {}): {}\n  stderr: {err}",
                case.name,
                case.args.join(" "),
                wrong.join("; ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} corpus cases failed:\n{}",
        failures.len(),
        cases.case.len(),
        failures.join("\n")
    );
}

#[test]
fn every_corpus_file_is_used_by_a_case() {
    let dir = corpus();
    let text = std::fs::read_to_string(dir.join("cases.toml")).unwrap();
    let cases: Cases = toml::from_str(&text).unwrap();
    let mut all = Vec::new();
    files(&dir, "", &mut all);
    let unused: Vec<&String> = all
        .iter()
        .filter(|f| !["cases.toml", "README.md", "onnx/make_onnx.py"].contains(&f.as_str()))
        .filter(|f| !cases.case.iter().any(|c| c.args.iter().any(|a| a == *f)))
        .collect();
    assert!(unused.is_empty(), "corpus files no case uses: {unused:?}");
}

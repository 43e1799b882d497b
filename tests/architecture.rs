//! The workspace's shape, checked from the sources: the library crate has no command-line
//! dependency, and its rooms import one another only downwards along the data path
//!
//! ```text
//! model → io → costmodel → score → solve → simulate → experiments → report | export
//! ```
//!
//! A room may name any room to its left (`crate::model::…` from `solve`), never one to its
//! right or beside it (`report` and `export` are siblings). Comments and `#[cfg(test)]`
//! modules are not imports and are skipped. The check reads every `.rs` file under
//! `crates/dnnplace/src/<room>/`, so a new file is covered without listing it.

use std::path::{Path, PathBuf};

/// The rooms of the library in data-path order; rooms of equal rank may not import each
/// other.
const LAYERS: &[(&str, usize)] = &[
    ("model", 0),
    ("io", 1),
    ("costmodel", 2),
    ("score", 3),
    ("solve", 4),
    ("simulate", 5),
    ("experiments", 6),
    ("report", 7),
    ("export", 7),
];

fn library_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/dnnplace/src")
}

fn rank(room: &str) -> Option<usize> {
    LAYERS.iter().find(|(r, _)| *r == room).map(|&(_, k)| k)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The rooms named as `crate::<room>` in the code of `text` (before its first
/// `#[cfg(test)]`, outside `//` comments), with their line numbers.
fn imports(text: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("#[cfg(test)]") {
            break;
        }
        let code = code.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let tail = &rest[at + "crate::".len()..];
            let name: String = tail
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            found.push((name, i + 1));
            rest = tail;
        }
    }
    found
}

#[test]
fn the_import_parser_sees_code_and_skips_comments_and_tests() {
    let text = "use crate::model::Workload; // crate::report\n\
                //! [`crate::solve`]\n\
                let x = crate::score::evaluate(crate::io::read());\n\
                #[cfg(test)]\nmod tests { use crate::export; }\n";
    let names: Vec<String> = imports(text).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["model", "score", "io"]);
}

/// How many library rooms the code of `text` (a file of `room`, rank `k`) names, and each
/// name against the data path (`LINE: ROOM imports OTHER`).
fn upward_imports(room: &str, k: usize, text: &str) -> (usize, Vec<String>) {
    let mut seen = 0;
    let mut against = Vec::new();
    for (name, line) in imports(text) {
        let Some(other) = rank(&name) else { continue };
        seen += 1;
        if name != room && other >= k {
            against.push(format!("{line}: {room} imports {name}"));
        }
    }
    (seen, against)
}

#[test]
fn the_old_io_to_costmodel_edge_would_be_refused() {
    // The edge issue #24 removed: the workload reader resolving its cluster section
    // through the cost model. No room is exempt any more.
    let io = rank("io").unwrap();
    let text = "use super::cluster_file::ClusterFile;\n\
                let c = crate::costmodel::cluster::resolve_for(file, &[], None);\n";
    let (seen, against) = upward_imports("io", io, text);
    assert_eq!(seen, 1);
    assert_eq!(against, ["2: io imports costmodel"]);
    let (_, ok) = upward_imports(
        "io",
        io,
        "let c = crate::io::cluster_resolve::resolve_for(f, &[], None);",
    );
    assert!(ok.is_empty());
    let (_, sideways) = upward_imports("report", 7, "crate::export::write()");
    assert_eq!(sideways, ["1: report imports export"]);
}

#[test]
fn library_rooms_import_only_downwards() {
    let src = library_src();
    let mut violations = Vec::new();
    let mut checked = 0;
    for &(room, k) in LAYERS {
        let mut files = Vec::new();
        rust_files(&src.join(room), &mut files);
        assert!(
            !files.is_empty(),
            "no sources under {}",
            src.join(room).display()
        );
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let (seen, against) = upward_imports(room, k, &text);
            checked += seen;
            let at = file.strip_prefix(&src).unwrap().display().to_string();
            violations.extend(against.into_iter().map(|v| format!("{at}:{v}")));
        }
    }
    assert!(
        checked > 100,
        "only {checked} imports found: is the parser blind?"
    );
    assert!(
        violations.is_empty(),
        "imports against the data path:\n{}",
        violations.join("\n")
    );
}

#[test]
fn every_library_room_is_ranked() {
    for entry in std::fs::read_dir(library_src()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            let room = path.file_name().unwrap().to_str().unwrap().to_string();
            assert!(rank(&room).is_some(), "room {room} has no place in LAYERS");
        }
    }
}

#[test]
fn the_library_has_no_command_line_dependency() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/dnnplace/Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let doc: toml::Table = text.parse().unwrap();
    let deps = doc["dependencies"]
        .as_table()
        .expect("a [dependencies] table");
    assert!(
        deps.contains_key("serde"),
        "the parser read the wrong table"
    );
    for cli_crate in ["clap", "clap_derive", "argh", "structopt"] {
        assert!(
            !deps.contains_key(cli_crate),
            "the library depends on {cli_crate}"
        );
    }
}

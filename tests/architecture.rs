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
//! `crates/dnnplace/src/<room>/`, so a new file is covered without listing it. Inside
//! `solve`, its sub-rooms (`dp`, `milp`, `bounds`, `cluster`, …) form no import cycle, the
//! edge between `dp` and `milp` runs from `milp` only, and no bound imports a solver.

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

/// The code of `text`, line by line with 1-based numbers: each line before the first
/// `#[cfg(test)]`, without its `//` comment.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .map(str::trim_start)
        .take_while(|line| !line.starts_with("#[cfg(test)]"))
        .map(|line| line.split("//").next().unwrap_or(""))
        .enumerate()
        .map(|(i, code)| (i + 1, code))
}

/// The rooms named as `crate::<room>` in the code of `text` ([`code_lines`]), with their
/// line numbers.
fn imports(text: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    for (line, code) in code_lines(text) {
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let tail = &rest[at + "crate::".len()..];
            let name: String = tail
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            found.push((name, line));
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

/// The sub-rooms of `solve` that the code of `text` names, for a file at `rel` under
/// `solve/`: `crate::solve::<x>` anywhere, and `super::<x>` written with as many
/// `super::` as lead from the file back to `solve` ([`code_lines`]).
fn solve_imports(rel: &Path, text: &str) -> Vec<String> {
    let dirs = rel.components().count() - 1;
    let is_mod = rel.file_name().is_some_and(|f| f == "mod.rs");
    let up = "super::".repeat(dirs + usize::from(!is_mod));
    let mut found = Vec::new();
    for (_, code) in code_lines(text) {
        for prefix in ["crate::solve::", up.as_str()] {
            let mut from = 0;
            while let Some(at) = code[from..].find(prefix).map(|i| from + i) {
                let tail = &code[at + prefix.len()..];
                from = at + prefix.len();
                // Only the whole run of `super::`: `super::super::x` is not `super::x`.
                if prefix.starts_with("super")
                    && (code[..at].ends_with("super::") || tail.starts_with("super::"))
                {
                    continue;
                }
                let name: String = tail
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    found.push(name);
                }
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

#[test]
fn the_solve_parser_resolves_super_by_depth() {
    let text = "use super::budget::Budget;\nuse super::super::dp::chain;\nlet b = crate::solve::bounds::load::x();\n";
    assert_eq!(
        solve_imports(Path::new("auto.rs"), text),
        ["bounds", "budget"]
    );
    assert_eq!(
        solve_imports(Path::new("milp/stages.rs"), text),
        ["bounds", "dp"]
    );
    assert_eq!(
        solve_imports(Path::new("milp/mod.rs"), text),
        ["bounds", "budget"]
    );
}

/// The edges between the sub-rooms of `solve` (a file's sub-room is its first path
/// component under `solve/`; `solve/mod.rs`, the room's hub, is left out).
fn solve_edges() -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let solve = library_src().join("solve");
    let mut files = Vec::new();
    rust_files(&solve, &mut files);
    let rooms: std::collections::BTreeSet<String> = std::fs::read_dir(&solve)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().is_some_and(|f| f != "mod.rs"))
        .map(|p| p.file_stem().unwrap().to_str().unwrap().to_string())
        .collect();
    let mut edges: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for file in files {
        let rel = file.strip_prefix(&solve).unwrap().to_path_buf();
        if rel == Path::new("mod.rs") {
            continue;
        }
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap();
        let room = first.trim_end_matches(".rs").to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        for name in solve_imports(&rel, &text) {
            if name != room && rooms.contains(&name) {
                edges.entry(room.clone()).or_default().insert(name);
            }
        }
    }
    edges
}

#[test]
fn solve_sub_rooms_import_one_another_without_a_cycle() {
    let edges = solve_edges();
    assert!(
        edges
            .get("milp")
            .is_some_and(|e| e.contains("dp") && e.contains("bounds")),
        "the parser missed milp's imports of dp and bounds: {edges:?}"
    );
    // Kahn's algorithm: what is left once no sub-room without unmet imports remains lies
    // on a cycle or leads into one.
    let mut left: std::collections::BTreeMap<&str, usize> =
        edges.keys().map(|k| (k.as_str(), 0)).collect();
    for to in edges.values().flatten() {
        left.entry(to.as_str()).or_insert(0);
    }
    for (from, to) in &edges {
        *left.get_mut(from.as_str()).unwrap() = to.len();
    }
    while let Some(done) = left.iter().find(|(_, &n)| n == 0).map(|(&k, _)| k) {
        left.remove(done);
        for (from, to) in &edges {
            if to.contains(done) {
                if let Some(n) = left.get_mut(from.as_str()) {
                    *n -= 1;
                }
            }
        }
    }
    let stuck: Vec<String> = left
        .keys()
        .map(|k| {
            format!(
                "{k} -> {:?}",
                edges.get(*k).map(|e| e.iter().collect::<Vec<_>>())
            )
        })
        .collect();
    assert!(
        stuck.is_empty(),
        "sub-rooms of solve on an import cycle:\n{}",
        stuck.join("\n")
    );
    assert!(
        !edges.get("dp").is_some_and(|e| e.contains("milp")),
        "dp imports milp: the edge runs milp -> dp only"
    );
    assert!(
        edges
            .get("bounds")
            .is_none_or(|e| !["dp", "milp", "cluster", "auto", "coarsen"]
                .iter()
                .any(|r| e.contains(*r))),
        "a bound imports a solver: {:?}",
        edges.get("bounds")
    );
}

//! A workload JSON's optional per-node tensor-parallel options (`docs/parallel.md`, "A
//! workload JSON"), in the spirit of Piper's `TMPCs`: what a node costs on each device of a
//! tensor-parallel (TP) group of `degree` devices. `plan WORKLOAD.json --parallel 3d` reads
//! them; every other command ignores the field. [`workload_to_json_with_tensor_parallel`]
//! writes them (`dnnplace import MODEL.onnx --tensor-parallel 2,4`,
//! [`crate::costmodel::onnx_parallel`]): what it writes, [`parse_tensor_parallel`] reads
//! back equal (every number is written in its shortest exact form).
//!
//! ```json
//! {"id": 7, "fpgaLatency": 2.0, "cpuLatency": 9.0, "size": 3e6, "layerId": 1,
//!  "weightBytes": 2e6, "activationBytes": 5e5,
//!  "tensorParallel": [
//!    {"degree": 2, "fpgaLatency": 1.1, "size": 1.6e6, "weightBytes": 1e6,
//!     "activationBytes": 2.5e5, "allReduceBytes": [4e5]},
//!    {"degree": 4, "fpgaLatency": 0.6, "size": 0.9e6, "weightBytes": 5e5,
//!     "activationBytes": 1.25e5, "allReduceBytes": [4e5]}]}
//! ```
//!
//! Each option gives, per device of the group, at that degree:
//!
//! | field | meaning | default |
//! | --- | --- | --- |
//! | `degree` | the TP degree `t` (an integer ≥ 1) | required |
//! | `fpgaLatency` | the node's time, ms (a backward node: its backward time), on the workload's reference accelerator | required |
//! | `size`, `weightBytes`, `gradientBytes`, `optimizerBytes`, `activationBytes` | the node's memory, as the node's own fields (MODEL.md, [`crate::model::memory`]) | the parts 0, `size` their sum |
//! | `allReduceBytes` | one entry per all-reduce over the TP group the node adds (a forward node: in the forward pass; a backward node: in the backward pass), bytes of each | none |
//!
//! A node without the field has only `t = 1`, its own numbers. An option of degree 1 must
//! repeat the node's own numbers exactly (and no all-reduce), or it is refused. Every
//! number is finite and ≥ 0, the parts at most `size`, each degree once per node; every
//! error names the node (id) and the field's JSON path. Whether a degree divides a machine
//! is the planner's check (it knows the cluster).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::IoError;
use crate::model::{NodeMemory, Workload};

/// One node's costs at one TP degree `t > 1` (module documentation), per device.
#[derive(Clone, Debug, PartialEq)]
pub struct TpOption {
    pub degree: usize,
    /// ms, on the workload's reference accelerator.
    pub fpga_latency: f64,
    pub size_bytes: f64,
    pub memory: NodeMemory,
    /// Bytes of each all-reduce the node adds (none of 0 bytes).
    pub all_reduce_bytes: Vec<f64>,
}

/// The options of every node that has some, by node id, ascending degree, `t = 1` left out
/// (it is the node itself).
pub type TpOptions = BTreeMap<i64, Vec<TpOption>>;

#[derive(Deserialize)]
struct RawFile {
    nodes: Vec<RawNode>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawNode {
    id: i64,
    #[serde(default)]
    tensor_parallel: Vec<RawOption>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawOption {
    degree: usize,
    fpga_latency: f64,
    #[serde(default)]
    size: Option<f64>,
    #[serde(default)]
    weight_bytes: f64,
    #[serde(default)]
    gradient_bytes: f64,
    #[serde(default)]
    optimizer_bytes: f64,
    #[serde(default)]
    activation_bytes: f64,
    #[serde(default)]
    all_reduce_bytes: Vec<f64>,
}

/// The options of `text`, a workload JSON already read as `w` (module documentation).
pub fn parse_tensor_parallel(text: &str, w: &Workload) -> Result<TpOptions, IoError> {
    let raw: RawFile = super::json::parse_json(text)?;
    let mut options = TpOptions::new();
    for (i, node) in raw.nodes.iter().enumerate() {
        if node.tensor_parallel.is_empty() {
            continue;
        }
        let v = w.index_of(node.id).ok_or_else(|| {
            IoError::Format(format!(
                "nodes[{i}]: node {} is not in the workload",
                node.id
            ))
        })?;
        let own = w.node(v);
        let mut list: Vec<TpOption> = Vec::new();
        for (j, o) in node.tensor_parallel.iter().enumerate() {
            let at = |field: &str, why: String| {
                IoError::Format(format!(
                    "node {}: nodes[{i}].tensorParallel[{j}].{field}: {why}",
                    node.id
                ))
            };
            let option = checked(o).map_err(|(field, why)| at(field, why))?;
            if o.degree == 0 {
                return Err(at("degree", "a TP degree is at least 1".into()));
            }
            if list.iter().any(|x| x.degree == o.degree)
                || (o.degree == 1 && node.tensor_parallel[..j].iter().any(|x| x.degree == 1))
            {
                return Err(at("degree", format!("degree {} is given twice", o.degree)));
            }
            if o.degree == 1 {
                let mine = own.memory.unwrap_or_default();
                let same = option.fpga_latency == own.fpga_latency
                    && option.size_bytes == own.size_bytes
                    && option.memory == mine
                    && option.all_reduce_bytes.is_empty();
                if !same {
                    return Err(at(
                        "degree",
                        "the option of degree 1 must repeat the node's own fpgaLatency, size and memory fields, with no all-reduce (or be left out)".into(),
                    ));
                }
                continue;
            }
            list.push(option);
        }
        list.sort_by_key(|x| x.degree);
        options.insert(node.id, list);
    }
    Ok(options)
}

/// One option's numbers, or the field at fault and why.
fn checked(o: &RawOption) -> Result<TpOption, (&'static str, String)> {
    let bad = |x: f64| !x.is_finite() || x < 0.0;
    let fields = [
        ("fpgaLatency", o.fpga_latency),
        ("weightBytes", o.weight_bytes),
        ("gradientBytes", o.gradient_bytes),
        ("optimizerBytes", o.optimizer_bytes),
        ("activationBytes", o.activation_bytes),
        ("size", o.size.unwrap_or(0.0)),
    ];
    if let Some((field, x)) = fields.iter().find(|f| bad(f.1)) {
        return Err((field, format!("{x} is not a finite number ≥ 0")));
    }
    if let Some((k, x)) = o.all_reduce_bytes.iter().enumerate().find(|x| bad(*x.1)) {
        return Err((
            "allReduceBytes",
            format!("entry {k}, {x}, is not a finite number ≥ 0"),
        ));
    }
    let memory = NodeMemory {
        weight_bytes: o.weight_bytes,
        gradient_bytes: o.gradient_bytes,
        optimizer_bytes: o.optimizer_bytes,
        activation_bytes: o.activation_bytes,
    };
    let parts = memory.total_bytes();
    let size_bytes = o.size.unwrap_or(parts);
    if parts > size_bytes {
        return Err((
            "size",
            format!("{size_bytes} is less than the memory parts' sum {parts}"),
        ));
    }
    Ok(TpOption {
        degree: o.degree,
        fpga_latency: o.fpga_latency,
        size_bytes,
        memory,
        all_reduce_bytes: o
            .all_reduce_bytes
            .iter()
            .copied()
            .filter(|&x| x > 0.0)
            .collect(),
    })
}

/// One option as written: every field, `size` included; `allReduceBytes` when it has some.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct WrittenOption<'a> {
    degree: usize,
    fpga_latency: f64,
    size: f64,
    weight_bytes: f64,
    gradient_bytes: f64,
    optimizer_bytes: f64,
    activation_bytes: f64,
    #[serde(skip_serializing_if = "<[f64]>::is_empty")]
    all_reduce_bytes: &'a [f64],
}

impl<'a> WrittenOption<'a> {
    fn of(o: &'a TpOption) -> Self {
        WrittenOption {
            degree: o.degree,
            fpga_latency: o.fpga_latency,
            size: o.size_bytes,
            weight_bytes: o.memory.weight_bytes,
            gradient_bytes: o.memory.gradient_bytes,
            optimizer_bytes: o.memory.optimizer_bytes,
            activation_bytes: o.memory.activation_bytes,
            all_reduce_bytes: &o.all_reduce_bytes,
        }
    }
}

/// The workload JSON of `w` ([`super::workload_to_json`]) with each node's options as its
/// `tensorParallel` field (module documentation). Refused, naming the node: an option of
/// degree below 2 (degree 1 is the node itself and is never written), a degree twice, a node
/// not in `w`, or a number that is negative or not finite.
pub fn workload_to_json_with_tensor_parallel(
    w: &Workload,
    options: &TpOptions,
) -> Result<String, IoError> {
    let mut doc: serde_json::Value = serde_json::from_str(&super::workload_to_json(w))
        .map_err(|e| IoError::Format(format!("the workload JSON does not read back: {e}")))?;
    let nodes = doc
        .get_mut("nodes")
        .and_then(serde_json::Value::as_array_mut)
        .ok_or_else(|| IoError::Format("the workload JSON has no nodes".into()))?;
    for (&id, list) in options {
        let v = w
            .index_of(id)
            .ok_or_else(|| IoError::Format(format!("node {id}: not in the workload")))?;
        for (j, o) in list.iter().enumerate() {
            let at = |why: &str| IoError::Format(format!("node {id}: tensorParallel[{j}]: {why}"));
            if o.degree < 2 || list[..j].iter().any(|x| x.degree == o.degree) {
                return Err(at(&format!(
                    "degree {} (each degree ≥ 2, once; degree 1 is the node itself)",
                    o.degree
                )));
            }
            let numbers = [o.fpga_latency, o.size_bytes, o.memory.total_bytes()];
            if numbers
                .iter()
                .chain(&o.all_reduce_bytes)
                .any(|x| !x.is_finite() || *x < 0.0)
            {
                return Err(at("a number is negative or not finite"));
            }
        }
        let written: Vec<WrittenOption> = list.iter().map(WrittenOption::of).collect();
        let value = serde_json::to_value(&written)
            .map_err(|e| IoError::Format(format!("node {id}: {e}")))?;
        if let Some(node) = nodes[v].as_object_mut() {
            node.insert("tensorParallel".into(), value);
        }
    }
    serde_json::to_string_pretty(&doc)
        .map_err(|e| IoError::Format(format!("the workload JSON does not serialise: {e}")))
}

/// The options of the workload file at `path`, already read as `w`.
pub fn read_tensor_parallel(path: &std::path::Path, w: &Workload) -> Result<TpOptions, IoError> {
    let text = super::read_text(path)?;
    parse_tensor_parallel(&text, w).map_err(|e| e.in_file(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::parse_workload;

    fn file(options: &str) -> String {
        format!(
            r#"{{"maxSizePerFPGA": 1e9, "maxFPGAs": 2, "maxCPUs": 0,
              "nodes": [{{"id": 1, "fpgaLatency": 2.0, "cpuLatency": 9, "size": 10, "layerId": 0,
                          "tensorParallel": {options}}},
                        {{"id": 2, "fpgaLatency": 1.0, "cpuLatency": 9, "isBackwardNode": 1, "layerId": 0}}],
              "edges": [{{"sourceId": 1, "destId": 2, "cost": 0.5}}]}}"#
        )
    }

    fn parse(options: &str) -> Result<TpOptions, IoError> {
        let text = file(options);
        let w = parse_workload(&text).unwrap();
        parse_tensor_parallel(&text, &w)
    }

    #[test]
    fn options_are_read_sorted_without_degree_one() {
        let got = parse(
            r#"[{"degree": 4, "fpgaLatency": 0.6, "weightBytes": 2, "allReduceBytes": [8, 0]},
                {"degree": 1, "fpgaLatency": 2.0, "size": 10},
                {"degree": 2, "fpgaLatency": 1.1, "size": 7, "activationBytes": 3}]"#,
        )
        .unwrap();
        let o = &got[&1];
        assert_eq!(o.iter().map(|x| x.degree).collect::<Vec<_>>(), [2, 4]);
        assert_eq!((o[0].size_bytes, o[0].memory.activation_bytes), (7.0, 3.0));
        // `size` defaults to the parts' sum; a 0-byte all-reduce moves nothing.
        assert_eq!(
            (o[1].size_bytes, o[1].all_reduce_bytes.clone()),
            (2.0, vec![8.0])
        );
        assert!(!got.contains_key(&2));
    }

    #[test]
    fn written_options_read_back_equal() {
        let got = parse(
            r#"[{"degree": 4, "fpgaLatency": 0.1234567890123, "weightBytes": 2, "allReduceBytes": [8, 0]},
                {"degree": 2, "fpgaLatency": 1.1, "size": 7, "activationBytes": 3, "gradientBytes": 1e-3}]"#,
        )
        .unwrap();
        let w = parse_workload(&file("[]")).unwrap();
        let text = workload_to_json_with_tensor_parallel(&w, &got).unwrap();
        let w2 = parse_workload(&text).unwrap();
        assert_eq!(parse_tensor_parallel(&text, &w2).unwrap(), got);
        // The workload itself is unchanged.
        assert_eq!(
            crate::io::workload_to_json(&w2),
            crate::io::workload_to_json(&w)
        );
        let mut bad = got.clone();
        bad.get_mut(&1).unwrap()[0].degree = 1;
        let e = workload_to_json_with_tensor_parallel(&w, &bad).unwrap_err();
        assert!(
            e.to_string()
                .contains("node 1: tensorParallel[0]: degree 1"),
            "{e}"
        );
        bad.insert(9, vec![]);
        bad.get_mut(&1).unwrap()[0].degree = 3;
        let e = workload_to_json_with_tensor_parallel(&w, &bad).unwrap_err();
        assert!(e.to_string().contains("node 9: not in the workload"), "{e}");
    }

    #[test]
    fn bad_options_name_the_node_and_field() {
        for (options, says) in [
            (
                r#"[{"degree": 2, "fpgaLatency": -1}]"#,
                "node 1: nodes[0].tensorParallel[0].fpgaLatency",
            ),
            (
                r#"[{"degree": 2, "fpgaLatency": 1}, {"degree": 2, "fpgaLatency": 1}]"#,
                "tensorParallel[1].degree: degree 2 is given twice",
            ),
            (
                r#"[{"degree": 1, "fpgaLatency": 1.5, "size": 10}]"#,
                "must repeat the node's own",
            ),
            (r#"[{"degree": 0, "fpgaLatency": 1}]"#, "at least 1"),
            (
                r#"[{"degree": 2, "fpgaLatency": 1, "size": 1, "weightBytes": 2}]"#,
                "tensorParallel[0].size: 1 is less",
            ),
            (
                r#"[{"degree": 2, "fpgaLatency": 1, "allReduceBytes": [-3]}]"#,
                "allReduceBytes: entry 0, -3",
            ),
            (
                r#"[{"degree": 2.5, "fpgaLatency": 1}]"#,
                "nodes[0].tensorParallel[0].degree",
            ),
            (
                r#"[{"degree": 2, "fpgaLatency": 1, "flops": 3}]"#,
                "unknown field `flops`",
            ),
        ] {
            let e = parse(options).unwrap_err().to_string();
            assert!(e.contains(says), "{options}: {e}");
        }
    }
}

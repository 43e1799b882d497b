//! Mutation operators: bytes, JSON values, TOML lines and ONNX messages.
//!
//! Every operator draws from a caller's [`Rng`], so a case is a pure function of its seed.
//! Byte operators keep the input within `max(2·|x|, |x| + 4096)` bytes, so a case costs
//! O(|seed|) to build. JSON operators pick a node of the value tree uniformly at random by
//! reservoir sampling over a pre-order walk: O(size of the tree) per pick.

use serde_json::{json, Value};

pub use super::common::Rng;

/// Tokens that break readers: huge, tiny, negative and non-finite numbers, wrong types.
pub const NUMBER_TOKENS: &[&str] = &[
    "0",
    "-0",
    "-1",
    "1e999",
    "-1e999",
    "1e308",
    "1.7976931348623157e308",
    "5e-324",
    "1e-400",
    "1e15",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "4294967296",
    "0.5",
    "1.0000000000000002",
    "\"NaN\"",
    "\"inf\"",
    "NaN",
    "Infinity",
    "null",
    "true",
    "[]",
    "{}",
    "\"1\"",
    "1_000",
    "0x10",
    "01",
    "1.",
    ".5",
    "+1",
];

/// Short byte strings that confuse parsers when inserted anywhere.
const INSERTS: &[&[u8]] = &[
    b"}{ garbage",
    b"\xEF\xBB\xBF",
    b"\x00",
    b"\xFF\xFE",
    b"\xC3\x28",
    b"\"",
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b",",
    b",,",
    b":",
    b"[",
    b"]",
    b"{",
    b"}",
    b"\n",
    b"\r\n",
    b"\t",
    b"//",
    b"/*",
    b"#",
    b"=",
    b"[[x]]",
    b"[table]",
];

/// One random byte-level mutation.
pub fn mutate_bytes(r: &mut Rng, data: &mut Vec<u8>, donors: &[&[u8]]) {
    let len = data.len();
    let pos = |r: &mut Rng, len: usize| {
        if len == 0 {
            0
        } else {
            r.below(len as u64 + 1) as usize
        }
    };
    match r.below(12) {
        0 => {
            let at = pos(r, len);
            data.truncate(at);
        }
        1 => {
            for _ in 0..1 + r.below(8) {
                if !data.is_empty() {
                    let i = r.below(data.len() as u64) as usize;
                    data[i] ^= 1 << r.below(8);
                }
            }
        }
        2 => {
            if !data.is_empty() {
                let i = r.below(data.len() as u64) as usize;
                data[i] = *b"\x00\xFF\"{}[],:-9.e\x80\xC3 "
                    .get(r.below(16) as usize)
                    .expect("in range");
            }
        }
        3 => {
            let (a, b) = (pos(r, len), pos(r, len));
            let (a, b) = (a.min(b), a.max(b).min(a.min(b) + 4096));
            data.drain(a..b);
        }
        4 => {
            let (a, b) = (pos(r, len), pos(r, len));
            let (a, b) = (a.min(b), a.max(b).min(a.min(b) + 4096));
            let chunk = data[a..b].to_vec();
            let at = pos(r, len);
            data.splice(at..at, chunk);
        }
        5 => {
            if let Some(donor) = donors.get(r.below(donors.len().max(1) as u64) as usize) {
                let (a, b) = (pos(r, donor.len()), pos(r, donor.len()));
                let (a, b) = (a.min(b), a.max(b).min(a.min(b) + 4096));
                let at = pos(r, len);
                data.splice(at..at, donor[a..b].iter().copied());
            }
        }
        6 => {
            let tok = INSERTS[r.below(INSERTS.len() as u64) as usize];
            let at = pos(r, len);
            data.splice(at..at, tok.iter().copied());
        }
        7 => {
            let tail: &[u8] = match r.below(4) {
                0 => b"}{ garbage",
                1 => b"\n{\"second\": \"document\"}",
                2 => b"\x00",
                _ => b" ]",
            };
            data.extend_from_slice(tail);
        }
        8 => {
            data.splice(0..0, *b"\xEF\xBB\xBF");
        }
        9 => replace_number(r, data),
        10 => {
            // Deep nesting around everything.
            let depth = [64usize, 127, 128, 129, 2000][r.below(5) as usize];
            let mut out = vec![b'['; depth];
            out.extend_from_slice(data);
            out.extend(std::iter::repeat_n(b']', depth));
            *data = out;
        }
        _ => {
            let at = pos(r, len);
            let junk: Vec<u8> = (0..1 + r.below(16)).map(|_| r.next() as u8).collect();
            data.splice(at..at, junk);
        }
    }
}

/// Replaces one run of number characters (`-0-9.eE+`) with a token of [`NUMBER_TOKENS`].
pub fn replace_number(r: &mut Rng, data: &mut Vec<u8>) {
    let is_num =
        |b: u8| b.is_ascii_digit() || b == b'-' || b == b'.' || b == b'e' || b == b'E' || b == b'+';
    let starts: Vec<usize> = (0..data.len())
        .filter(|&i| data[i].is_ascii_digit() && (i == 0 || !is_num(data[i - 1])))
        .collect();
    if starts.is_empty() {
        return;
    }
    let mut a = starts[r.below(starts.len() as u64) as usize];
    if a > 0 && data[a - 1] == b'-' {
        a -= 1;
    }
    let mut b = a + 1;
    while b < data.len() && is_num(data[b]) {
        b += 1;
    }
    let tok = NUMBER_TOKENS[r.below(NUMBER_TOKENS.len() as u64) as usize];
    data.splice(a..b, tok.bytes());
}

/// A value of a wrong or extreme kind.
pub fn odd_value(r: &mut Rng) -> Value {
    match r.below(16) {
        0 => json!(-1),
        1 => json!(0),
        2 => json!(1e308),
        3 => json!(u64::MAX),
        4 => json!(i64::MIN),
        5 => json!(1u64 << 63),
        6 => json!(5e-324),
        7 => json!(1e15),
        8 => json!("NaN"),
        9 => json!(null),
        10 => json!(true),
        11 => json!([1, 2]),
        12 => json!({"x": 1}),
        13 => json!(0.5),
        14 => json!(-1e300),
        _ => json!(""),
    }
}

/// The number of nodes of a value tree.
fn count(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(count).sum(),
        Value::Object(o) => o.values().map(count).sum(),
        _ => 0,
    }
}

/// Applies `f` to the `k`-th node of a pre-order walk; true once applied.
fn apply_nth(
    v: &mut Value,
    k: &mut usize,
    r: &mut Rng,
    f: &mut dyn FnMut(&mut Rng, &mut Value),
) -> bool {
    if *k == 0 {
        f(r, v);
        return true;
    }
    *k -= 1;
    match v {
        Value::Array(a) => a.iter_mut().any(|c| apply_nth(c, k, r, f)),
        Value::Object(o) => o.values_mut().any(|c| apply_nth(c, k, r, f)),
        _ => false,
    }
}

/// Applies `f` to a node of `v` drawn uniformly.
pub fn with_random_node(r: &mut Rng, v: &mut Value, mut f: impl FnMut(&mut Rng, &mut Value)) {
    let mut k = r.below(count(v) as u64) as usize;
    apply_nth(v, &mut k, r, &mut f);
}

/// One random generic mutation of a JSON value.
pub fn mutate_value(r: &mut Rng, v: &mut Value) {
    match r.below(6) {
        0 | 1 => with_random_node(r, v, |r, x| *x = odd_value(r)),
        2 => with_random_node(r, v, |r, x| {
            if let Value::Object(o) = x {
                if !o.is_empty() {
                    let key = o
                        .keys()
                        .nth(r.below(o.len() as u64) as usize)
                        .cloned()
                        .expect("in range");
                    o.remove(&key);
                }
            }
        }),
        3 => with_random_node(r, v, |r, x| {
            if let Value::Array(a) = x {
                if !a.is_empty() {
                    let i = r.below(a.len() as u64) as usize;
                    if r.chance(0.5) {
                        a.push(a[i].clone());
                    } else {
                        a.remove(i);
                    }
                }
            }
        }),
        4 => with_random_node(r, v, |r, x| {
            let depth = [10usize, 127, 200][r.below(3) as usize];
            for _ in 0..depth {
                *x = Value::Array(vec![x.take()]);
            }
        }),
        _ => with_random_node(r, v, |r, x| {
            if let Value::Array(a) = x {
                // Shuffle (Fisher–Yates).
                for i in (1..a.len()).rev() {
                    let j = r.below(i as u64 + 1) as usize;
                    a.swap(i, j);
                }
            }
        }),
    }
}

/// Sets `v[key]` when `v` is an object (a mutation may have replaced it by anything).
fn put(v: &mut Value, key: &str, x: Value) {
    if let Some(o) = v.as_object_mut() {
        o.insert(key.to_string(), x);
    }
}

fn ids(v: &Value) -> Vec<i64> {
    v["nodes"]
        .as_array()
        .map(|a| a.iter().filter_map(|n| n["id"].as_i64()).collect())
        .unwrap_or_default()
}

/// One mutation that knows the workload format: edges that break rules, extreme device
/// counts, flags, colour classes.
pub fn mutate_workload(r: &mut Rng, v: &mut Value) {
    let ids = ids(v);
    let pick = |r: &mut Rng| {
        if ids.is_empty() {
            1
        } else {
            ids[r.below(ids.len() as u64) as usize]
        }
    };
    let edge =
        |from: i64, to: i64, cost: f64| json!({"sourceId": from, "destId": to, "cost": cost});
    let push_edge = |v: &mut Value, e: Value| {
        if let Some(a) = v.get_mut("edges").and_then(Value::as_array_mut) {
            a.push(e);
        }
    };
    match r.below(14) {
        0 => {
            let a = pick(r);
            push_edge(v, edge(a, a, 0.0));
        }
        1 => {
            // A back edge: from a late node to an early one (a cycle when a path exists).
            if let Some(es) = v["edges"].as_array() {
                if let Some(e) = es.get(r.below(es.len().max(1) as u64) as usize) {
                    let back = edge(
                        e["destId"].as_i64().unwrap_or(1),
                        e["sourceId"].as_i64().unwrap_or(1),
                        0.0,
                    );
                    push_edge(v, back);
                }
            }
        }
        2 => {
            let a = pick(r);
            push_edge(v, edge(a, 1_000_000_007, 0.0));
        }
        3 => {
            let (a, b) = (pick(r), pick(r));
            push_edge(v, edge(a, b, 123.456));
        }
        4 => {
            let key = if r.chance(0.5) { "maxFPGAs" } else { "maxCPUs" };
            let big = [
                0u64,
                1,
                2,
                1000,
                1 << 20,
                1 << 32,
                (1 << 63) - 1,
                1 << 63,
                u64::MAX,
            ][r.below(9) as usize];
            put(v, key, json!(big));
        }
        5 => {
            let m = [0.0, 1.0, 1e308, 5e-324, 1e15][r.below(5) as usize];
            put(v, "maxSizePerFPGA", json!(m));
        }
        6 | 7 => {
            if let Some(nodes) = v.get_mut("nodes").and_then(Value::as_array_mut) {
                let at = r.below(nodes.len().max(1) as u64) as usize;
                if let Some(n) = nodes.get_mut(at) {
                    let field = [
                        "fpgaLatency",
                        "cpuLatency",
                        "size",
                        "colorClass",
                        "id",
                        "isBackwardNode",
                        "supportedOnFpga",
                        "layerId",
                    ][r.below(8) as usize];
                    let x = match r.below(4) {
                        0 => odd_value(r),
                        1 => json!(r.below(3)),
                        2 => json!([1e15, 1e-6, 1e308, 0.0][r.below(4) as usize]),
                        _ => json!(pick(r)),
                    };
                    put(n, field, x);
                }
            }
        }
        8 => {
            // Everything backward, or one forward node fed by a backward one.
            if let Some(nodes) = v.get_mut("nodes").and_then(Value::as_array_mut) {
                let flip = r.below(nodes.len().max(1) as u64) as usize;
                for (i, n) in nodes.iter_mut().enumerate() {
                    if i == flip || r.chance(0.1) {
                        let backward = n["isBackwardNode"].as_bool() == Some(true)
                            || n["isBackwardNode"] == json!(1);
                        put(n, "isBackwardNode", json!(!backward));
                    }
                }
            }
        }
        9 => {
            // One colour class for many nodes.
            let class = pick(r);
            if let Some(nodes) = v.get_mut("nodes").and_then(Value::as_array_mut) {
                for n in nodes.iter_mut() {
                    if r.chance(0.3) {
                        put(n, "colorClass", json!(class));
                    }
                }
            }
        }
        10 => {
            // Duplicate id.
            if let Some(nodes) = v.get_mut("nodes").and_then(Value::as_array_mut) {
                if let Some(n) = nodes
                    .get(r.below(nodes.len().max(1) as u64) as usize)
                    .cloned()
                {
                    nodes.push(n);
                }
            }
        }
        11 => {
            // Scale every number of one field across the file (values over 1e-6 … 1e15).
            let field = ["fpgaLatency", "cpuLatency", "size"][r.below(3) as usize];
            let scale = [1e15, 1e-6, 1e300, 1e-300][r.below(4) as usize];
            if let Some(nodes) = v.get_mut("nodes").and_then(Value::as_array_mut) {
                for n in nodes.iter_mut() {
                    if let Some(x) = n[field].as_f64() {
                        put(n, field, json!(x * scale));
                    }
                }
            }
        }
        12 => {
            if let Some(es) = v.get_mut("edges").and_then(Value::as_array_mut) {
                es.clear();
            }
        }
        _ => {
            if let Some(nodes) = v.get_mut("nodes").and_then(Value::as_array_mut) {
                if nodes.len() > 1 {
                    let keep = 1 + r.below(nodes.len() as u64 - 1) as usize;
                    nodes.truncate(keep);
                }
            }
        }
    }
}

/// One mutation that knows the placement format: unknown nodes, devices out of range,
/// nodes listed twice, pieces.
pub fn mutate_placement(r: &mut Rng, v: &mut Value, node_ids: &[i64]) {
    let pick = |r: &mut Rng| {
        if node_ids.is_empty() {
            1
        } else {
            node_ids[r.below(node_ids.len() as u64) as usize]
        }
    };
    let kind = if r.chance(0.7) { "fpgas" } else { "cpus" };
    if !v[kind].is_array() {
        put(v, kind, json!([]));
    }
    let Some(devices) = v.get_mut(kind).and_then(Value::as_array_mut) else {
        return;
    };
    match r.below(9) {
        0 => {
            let id = if r.chance(0.5) { 1_000_000_007 } else { -1 };
            devices.push(json!({"nodes": [id]}));
        }
        1 => {
            // A device far beyond the device count.
            let extra = [1usize, 5, 100, 1000][r.below(4) as usize];
            for _ in 0..extra {
                devices.push(json!({"nodes": []}));
            }
            if let Some(last) = devices.last_mut() {
                put(last, "nodes", json!([pick(r)]));
            }
        }
        2 => {
            let id = pick(r);
            devices.push(json!({"nodes": [id]}));
        }
        3 => {
            // Move a node: remove it everywhere in this list, put it on a random device.
            let id = pick(r);
            for d in devices.iter_mut() {
                if let Some(ns) = d.get_mut("nodes").and_then(Value::as_array_mut) {
                    ns.retain(|x| x.as_i64() != Some(id));
                }
            }
            let n = devices.len();
            if n > 0 {
                let d = &mut devices[r.below(n as u64) as usize];
                if let Some(ns) = d.get_mut("nodes").and_then(Value::as_array_mut) {
                    ns.push(json!(id));
                }
            }
        }
        4 => {
            // Cut one device into pieces.
            let n = devices.len();
            if n > 0 {
                let d = &mut devices[r.below(n as u64) as usize];
                let nodes: Vec<Value> = d["nodes"].as_array().cloned().unwrap_or_default();
                let cut = if nodes.is_empty() {
                    0
                } else {
                    r.below(nodes.len() as u64 + 1) as usize
                };
                let mut pieces = vec![
                    Value::Array(nodes[..cut].to_vec()),
                    Value::Array(nodes[cut..].to_vec()),
                ];
                if r.chance(0.5) {
                    pieces.reverse();
                }
                put(d, "pieces", Value::Array(pieces));
                if let (true, Some(o)) = (r.chance(0.5), d.as_object_mut()) {
                    o.remove("nodes");
                }
            }
        }
        5 => {
            for d in devices.iter_mut() {
                if let Some(o) = d.as_object_mut() {
                    o.remove("nodes");
                }
            }
        }
        6 => {
            let n = devices.len();
            if n > 0 {
                let pieces = json!([[pick(r)], [], [pick(r), pick(r)]]);
                put(&mut devices[r.below(n as u64) as usize], "pieces", pieces);
            }
        }
        7 => devices.clear(),
        _ => {
            // Only a few nodes listed: the rest must follow their colour class.
            for d in devices.iter_mut() {
                if let Some(ns) = d.get_mut("nodes").and_then(Value::as_array_mut) {
                    ns.retain(|_| r.chance(0.3));
                }
            }
        }
    }
}

/// One mutation of a TOML text, line by line.
pub fn mutate_toml(r: &mut Rng, text: &str) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let n = lines.len();
    let i = if n == 0 {
        0
    } else {
        r.below(n as u64) as usize
    };
    const VALUES: &[&str] = &[
        "-1",
        "0",
        "nan",
        "+nan",
        "inf",
        "-inf",
        "1e308",
        "1e-308",
        "1e999",
        "\"str\"",
        "[1, 2]",
        "{ a = 1 }",
        "true",
        "0x10",
        "1_000",
        "2.0",
        "1e-30",
        "1e30",
        "",
        "\"\"",
        "'''\nx'''",
        "1979-05-27T07:32:00Z",
    ];
    match r.below(8) {
        0 if n > 0 => {
            lines.remove(i);
        }
        1 if n > 0 => {
            let l = lines[i].clone();
            lines.insert(i, l);
        }
        2 | 3 if n > 0 => {
            let key = lines[i].split('=').next().unwrap_or("").trim().to_string();
            lines[i] = format!("{key} = {}", VALUES[r.below(VALUES.len() as u64) as usize]);
        }
        4 => lines.push(
            [
                "speed = 3",
                "[table]",
                "[[array]]",
                "name = \"again\"",
                "}{ garbage",
                "x.y = 1",
            ][r.below(6) as usize]
                .into(),
        ),
        5 => {
            let name = format!(
                "name = \"{}\"",
                ["", " ", "a\\u0000b", "h100", "ÿ"][r.below(5) as usize]
            );
            lines.insert(0, name);
        }
        6 => return lines.join("\r\n"),
        _ => {
            let mut bytes = text.as_bytes().to_vec();
            mutate_bytes(r, &mut bytes, &[]);
            return String::from_utf8_lossy(&bytes).into_owned();
        }
    }
    lines.join("\n")
}

/// Operator types the importer knows (and one it does not).
const OP_TYPES: &[&str] = &[
    "Conv",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "Gemm",
    "MatMul",
    "Relu",
    "Add",
    "Mul",
    "Concat",
    "Reshape",
    "Flatten",
    "Transpose",
    "Gather",
    "Unsqueeze",
    "Squeeze",
    "Softmax",
    "BatchNormalization",
    "Dropout",
    "ReduceMean",
    "Shape",
    "Constant",
    "ConstantOfShape",
    "Cast",
    "Identity",
    "Sum",
    "Where",
    "Frobnicate",
    "",
];

/// Dimensions that break shape arithmetic.
const DIMS: &[i64] = &[
    -1,
    0,
    1,
    3,
    -7,
    1 << 20,
    1 << 31,
    1 << 40,
    1 << 62,
    i64::MAX,
    i64::MIN,
];

/// One structural mutation of an ONNX model: shapes, attributes, operator types, the wiring.
pub fn mutate_onnx(r: &mut Rng, m: &mut dnnplace::costmodel::onnx::ModelProto) {
    use dnnplace::costmodel::onnx::{AttributeProto, Dimension};
    let dim = |r: &mut Rng| DIMS[r.below(DIMS.len() as u64) as usize];
    let Some(g) = m.graph.as_mut() else { return };
    let pick = |r: &mut Rng, n: usize| {
        if n == 0 {
            None
        } else {
            Some(r.below(n as u64) as usize)
        }
    };
    match r.below(12) {
        0 => {
            // A graph input's shape.
            if let Some(i) = pick(r, g.input.len()) {
                if let Some(tt) = g.input[i]
                    .r#type
                    .as_mut()
                    .and_then(|t| t.tensor_type.as_mut())
                {
                    let shape = tt.shape.get_or_insert_with(Default::default);
                    match r.below(3) {
                        0 => shape.dim.clear(),
                        1 => shape.dim.push(Dimension {
                            dim_value: Some(dim(r)),
                            dim_param: None,
                        }),
                        _ => {
                            if let Some(j) = pick(r, shape.dim.len()) {
                                shape.dim[j] = Dimension {
                                    dim_value: Some(dim(r)),
                                    dim_param: None,
                                };
                            }
                        }
                    }
                    if r.chance(0.2) {
                        tt.elem_type = Some(r.below(20) as i32);
                    }
                }
            }
        }
        1 => {
            if let Some(i) = pick(r, g.initializer.len()) {
                let t = &mut g.initializer[i];
                match r.below(4) {
                    0 => {
                        if let Some(j) = pick(r, t.dims.len()) {
                            t.dims[j] = dim(r);
                        }
                    }
                    1 => t.data_type = Some([0, 1, 6, 7, 9, 13, 99, -1][r.below(8) as usize]),
                    2 => {
                        t.int64_data = (0..r.below(6)).map(|_| dim(r)).collect();
                        t.data_type = Some(7);
                    }
                    _ => t.raw_data = Some((0..r.below(20)).map(|_| r.next() as u8).collect()),
                }
            }
        }
        2 | 3 => {
            if let Some(i) = pick(r, g.node.len()) {
                let names = [
                    "strides",
                    "pads",
                    "dilations",
                    "kernel_shape",
                    "axis",
                    "axes",
                    "perm",
                    "group",
                    "transA",
                    "transB",
                    "keepdims",
                    "to",
                    "ceil_mode",
                    "auto_pad",
                    "shape",
                    "value",
                ];
                let name = names[r.below(names.len() as u64) as usize].to_string();
                let node = &mut g.node[i];
                node.attribute
                    .retain(|a| a.name.as_deref() != Some(name.as_str()));
                let mut a = AttributeProto {
                    name: Some(name.clone()),
                    ..Default::default()
                };
                match name.as_str() {
                    "auto_pad" => {
                        a.s = Some(
                            [&b"SAME_UPPER"[..], b"VALID", b"NOTSET", b"\xff"][r.below(4) as usize]
                                .to_vec(),
                        )
                    }
                    "axis" | "group" | "transA" | "transB" | "keepdims" | "to" | "ceil_mode" => {
                        a.i = Some(dim(r))
                    }
                    "value" => a.t = Some(Default::default()),
                    _ => a.ints = (0..r.below(5)).map(|_| dim(r)).collect(),
                }
                node.attribute.push(a);
            }
        }
        4 => {
            if let Some(i) = pick(r, g.node.len()) {
                g.node[i].op_type = Some(OP_TYPES[r.below(OP_TYPES.len() as u64) as usize].into());
            }
        }
        5 => {
            if let Some(i) = pick(r, g.node.len()) {
                g.node.remove(i);
            }
        }
        6 => {
            if let Some(i) = pick(r, g.node.len()) {
                let copy = g.node[i].clone();
                let at = r.below(g.node.len() as u64 + 1) as usize;
                g.node.insert(at, copy);
            }
        }
        7 => {
            // A node reads a tensor produced later, its own output, or nothing known.
            if let (Some(i), Some(j)) = (pick(r, g.node.len()), pick(r, g.node.len())) {
                let name = match r.below(3) {
                    0 => g.node[j].output.first().cloned().unwrap_or_default(),
                    1 => g.node[i].output.first().cloned().unwrap_or_default(),
                    _ => "no_such_tensor".into(),
                };
                let node = &mut g.node[i];
                if let Some(k) = pick(r, node.input.len()) {
                    node.input[k] = name;
                } else {
                    node.input.push(name);
                }
            }
        }
        8 => {
            if let Some(i) = pick(r, g.node.len()) {
                let node = &mut g.node[i];
                match r.below(3) {
                    0 => node.input.clear(),
                    1 => node.output.clear(),
                    _ => node.input.push(String::new()),
                }
            }
        }
        9 => {
            // Two nodes write one tensor.
            if let (Some(i), Some(j)) = (pick(r, g.node.len()), pick(r, g.node.len())) {
                let out = g.node[j].output.clone();
                g.node[i].output = out;
            }
        }
        10 => {
            if let Some(i) = pick(r, g.value_info.len()) {
                if let Some(shape) = g.value_info[i]
                    .r#type
                    .as_mut()
                    .and_then(|t| t.tensor_type.as_mut())
                    .and_then(|t| t.shape.as_mut())
                {
                    if let Some(j) = pick(r, shape.dim.len()) {
                        shape.dim[j].dim_value = Some(dim(r));
                    }
                }
            }
        }
        _ => {
            g.input.clear();
        }
    }
}

//! ONNX import: a model file → an [`OpGraph`] with shapes and costs.
//!
//! **Parsing.** The protobuf is decoded with `prost` (a maintained protobuf runtime) into
//! the subset of the ONNX messages below, transcribed field by field from the ONNX
//! project's `onnx.proto` (unknown fields are skipped by protobuf rules). We chose this
//! over `tract-onnx` because tract is an inference engine: it pulls in a kernel library and
//! dozens of crates (measured: see `docs/costmodel.md`) to give us what we need from it —
//! operator types, attributes and shapes — which for the operators a placement needs is a
//! few hundred lines of shape inference here.
//!
//! **Shapes.** Every tensor's shape is inferred in file order (ONNX files are topologically
//! sorted) from the graph inputs, initializers and each operator's attributes (opset 9
//! semantics, with the opset-13 forms of Unsqueeze/Squeeze axes as inputs). Symbolic input
//! dimensions are resolved from `batch` (the first dimension) and `seq` (any other);
//! `batch`, when given, also replaces the first dimension of every data input, and a
//! Reshape target whose first entry is the file's literal batch is then read as the batch.
//!
//! **Parameters.** A tensor computed only from constants (initializers, `Constant`,
//! `ConstantOfShape`, and anything folded from them) is a constant; float constants read by
//! an operator are its parameters (counted once, at their first reader), so the shape-only
//! weights of the light models (`ConstantOfShape`) count as parameters. Integer constants
//! (Reshape targets, shapes) are not parameters. Constant operators are folded away.
//!
//! **Operators.** Every remaining operator is one [`Op`] named after the ONNX node (or its
//! first output when unnamed); each data input is an `Input` op without work. Costs follow
//! [`crate::costmodel::operators`]. An operator we do not know gets a warning and a
//! conservative cost: its output shape from the file's `value_info` when present, else its
//! first input's; `10` FLOPs per output element plus reading all inputs and writing all
//! outputs — never a failure.

use std::collections::{HashMap, HashSet};

use prost::Message;

use super::graph::{Op, OpGraph};
use super::operators::{self, numel, DType, OpClass, OpCost};

/// `onnx.proto` ModelProto (subset).
#[derive(Clone, PartialEq, Message)]
pub struct ModelProto {
    #[prost(int64, optional, tag = "1")]
    pub ir_version: Option<i64>,
    #[prost(string, optional, tag = "2")]
    pub producer_name: Option<String>,
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
}

/// `onnx.proto` OperatorSetIdProto.
#[derive(Clone, PartialEq, Message)]
pub struct OperatorSetIdProto {
    #[prost(string, optional, tag = "1")]
    pub domain: Option<String>,
    #[prost(int64, optional, tag = "2")]
    pub version: Option<i64>,
}

/// `onnx.proto` GraphProto (subset).
#[derive(Clone, PartialEq, Message)]
pub struct GraphProto {
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "13")]
    pub value_info: Vec<ValueInfoProto>,
}

/// `onnx.proto` NodeProto (subset).
#[derive(Clone, PartialEq, Message)]
pub struct NodeProto {
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    #[prost(string, optional, tag = "3")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub op_type: Option<String>,
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
    #[prost(string, optional, tag = "7")]
    pub domain: Option<String>,
}

/// `onnx.proto` AttributeProto (subset: no graphs).
#[derive(Clone, PartialEq, Message)]
pub struct AttributeProto {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(float, optional, tag = "2")]
    pub f: Option<f32>,
    #[prost(int64, optional, tag = "3")]
    pub i: Option<i64>,
    #[prost(bytes = "vec", optional, tag = "4")]
    pub s: Option<Vec<u8>>,
    #[prost(message, optional, tag = "5")]
    pub t: Option<TensorProto>,
    #[prost(float, repeated, tag = "7")]
    pub floats: Vec<f32>,
    #[prost(int64, repeated, tag = "8")]
    pub ints: Vec<i64>,
}

/// `onnx.proto` TensorProto (subset).
#[derive(Clone, PartialEq, Message)]
pub struct TensorProto {
    #[prost(int64, repeated, tag = "1")]
    pub dims: Vec<i64>,
    #[prost(int32, optional, tag = "2")]
    pub data_type: Option<i32>,
    #[prost(float, repeated, tag = "4")]
    pub float_data: Vec<f32>,
    #[prost(int32, repeated, tag = "5")]
    pub int32_data: Vec<i32>,
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: Vec<i64>,
    #[prost(string, optional, tag = "8")]
    pub name: Option<String>,
    #[prost(bytes = "vec", optional, tag = "9")]
    pub raw_data: Option<Vec<u8>>,
}

/// `onnx.proto` ValueInfoProto.
#[derive(Clone, PartialEq, Message)]
pub struct ValueInfoProto {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
}

/// `onnx.proto` TypeProto (the `tensor_type` case of its oneof).
#[derive(Clone, PartialEq, Message)]
pub struct TypeProto {
    #[prost(message, optional, tag = "1")]
    pub tensor_type: Option<TypeProtoTensor>,
}

/// `onnx.proto` TypeProto.Tensor.
#[derive(Clone, PartialEq, Message)]
pub struct TypeProtoTensor {
    #[prost(int32, optional, tag = "1")]
    pub elem_type: Option<i32>,
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
}

/// `onnx.proto` TensorShapeProto.
#[derive(Clone, PartialEq, Message)]
pub struct TensorShapeProto {
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<Dimension>,
}

/// `onnx.proto` TensorShapeProto.Dimension (the two cases of its oneof).
#[derive(Clone, PartialEq, Message)]
pub struct Dimension {
    #[prost(int64, optional, tag = "1")]
    pub dim_value: Option<i64>,
    #[prost(string, optional, tag = "2")]
    pub dim_param: Option<String>,
}

/// Settings of an import.
#[derive(Clone, Debug)]
pub struct ImportOptions {
    /// Batch size: resolves a symbolic first dimension, and replaces the first dimension of
    /// every data input when given.
    pub batch: Option<usize>,
    /// Sequence length: resolves other symbolic dimensions. [default: 128]
    pub seq: Option<usize>,
    pub dtype: DType,
    /// Price BatchNormalization and Dropout as in training.
    pub training: bool,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions { batch: None, seq: None, dtype: DType::Fp32, training: false }
    }
}

/// An imported model: the operator graph and what the importer had to guess.
#[derive(Clone, Debug)]
pub struct Imported {
    pub graph: OpGraph,
    /// Unknown operators and other approximations, one line each, for the user to read.
    pub warnings: Vec<String>,
}

/// Errors of the import (a malformed file, not an unknown operator).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("not an ONNX model: {0}")]
    Decode(String),
    #[error("{0}")]
    Model(String),
}

/// A tensor seen so far.
#[derive(Clone, Debug)]
struct Tensor {
    shape: Vec<usize>,
    /// Bytes per element.
    elem_bytes: f64,
    /// A floating-point tensor (parameters are float constants).
    is_float: bool,
    /// Computed from constants only.
    constant: bool,
    /// Integer value, for small integer constants (shapes, axes).
    ints: Option<Vec<i64>>,
    /// The operator producing it (None for constants).
    producer: Option<usize>,
}

/// ONNX `TensorProto.DataType` → (bytes per element in the model, is float). Floats take
/// the chosen dtype's size, whatever the file stores.
fn elem_info(data_type: i32, e: f64) -> (f64, bool) {
    match data_type {
        1 | 10 | 11 | 16 => (e, true),        // FLOAT, FLOAT16, DOUBLE, BFLOAT16
        2 | 3 | 9 => (1.0, false),            // UINT8, INT8, BOOL
        4 | 5 => (2.0, false),                // UINT16, INT16
        6 | 12 => (4.0, false),               // INT32, UINT32
        7 | 13 => (8.0, false),               // INT64, UINT64
        _ => (e, true),
    }
}

fn tensor_ints(t: &TensorProto) -> Option<Vec<i64>> {
    match t.data_type.unwrap_or(1) {
        7 => {
            if !t.int64_data.is_empty() {
                Some(t.int64_data.clone())
            } else {
                t.raw_data.as_ref().map(|r| {
                    r.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes"))).collect()
                })
            }
        }
        6 => {
            if !t.int32_data.is_empty() {
                Some(t.int32_data.iter().map(|&x| x as i64).collect())
            } else {
                t.raw_data.as_ref().map(|r| {
                    r.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes")) as i64).collect()
                })
            }
        }
        _ => None,
    }
}

fn dims_of(t: &TensorProto) -> Result<Vec<usize>, String> {
    t.dims.iter().map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}"))).collect()
}

/// Attributes of one node, by name.
struct Attrs<'a>(&'a [AttributeProto]);

impl Attrs<'_> {
    fn get(&self, name: &str) -> Option<&AttributeProto> {
        self.0.iter().find(|a| a.name.as_deref() == Some(name))
    }
    fn int(&self, name: &str, default: i64) -> i64 {
        self.get(name).and_then(|a| a.i).unwrap_or(default)
    }
    fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.get(name).map(|a| a.ints.clone())
    }
    fn string(&self, name: &str) -> Option<String> {
        self.get(name).and_then(|a| a.s.as_ref()).map(|s| String::from_utf8_lossy(s).into_owned())
    }
}

/// Decodes an ONNX model from bytes.
pub fn decode_model(bytes: &[u8]) -> Result<ModelProto, ImportError> {
    let model = ModelProto::decode(bytes).map_err(|e| ImportError::Decode(e.to_string()))?;
    if model.graph.is_none() {
        return Err(ImportError::Decode("the file has no graph".into()));
    }
    Ok(model)
}

/// Reads and imports an ONNX file.
pub fn import_file(path: &std::path::Path, options: &ImportOptions) -> Result<Imported, ImportError> {
    let file_err = |message: String| ImportError::File { path: path.display().to_string(), message };
    let bytes = std::fs::read(path).map_err(|e| file_err(e.to_string()))?;
    let model = decode_model(&bytes).map_err(|e| file_err(e.to_string()))?;
    import_model(&model, options).map_err(|e| file_err(e.to_string()))
}

/// Imports a decoded model (module documentation).
///
/// Complexity: O(n + Σ|inputs|) for n ONNX nodes, plus hashing of tensor names.
pub fn import_model(model: &ModelProto, options: &ImportOptions) -> Result<Imported, ImportError> {
    let graph = model.graph.as_ref().ok_or_else(|| ImportError::Decode("the file has no graph".into()))?;
    let e = options.dtype.bytes();
    let mut tensors: HashMap<String, Tensor> = HashMap::new();
    let mut warnings = Vec::new();
    let mut ops = OpGraph::default();

    for init in &graph.initializer {
        let name = init.name.clone().unwrap_or_default();
        let (elem_bytes, is_float) = elem_info(init.data_type.unwrap_or(1), e);
        let shape = dims_of(init).map_err(|m| ImportError::Model(format!("initializer '{name}': {m}")))?;
        let ints = tensor_ints(init);
        tensors.insert(name, Tensor { shape, elem_bytes, is_float, constant: true, ints, producer: None });
    }
    let file_batch = graph.input.iter().filter(|i| !tensors.contains_key(i.name())).find_map(|i| {
        let dims = &i.r#type.as_ref()?.tensor_type.as_ref()?.shape.as_ref()?.dim;
        dims.first()?.dim_value.filter(|&v| v > 0)
    });
    for input in &graph.input {
        let name = input.name().to_string();
        if tensors.contains_key(&name) {
            continue; // an initializer listed as an input (IR < 4)
        }
        let tt = input.r#type.as_ref().and_then(|t| t.tensor_type.as_ref());
        let (elem_bytes, is_float) = elem_info(tt.and_then(|t| t.elem_type).unwrap_or(1), e);
        let dims = tt.and_then(|t| t.shape.as_ref()).map(|s| s.dim.clone()).unwrap_or_default();
        let mut shape = Vec::with_capacity(dims.len());
        for (axis, d) in dims.iter().enumerate() {
            let value = match d.dim_value {
                Some(v) if v > 0 && !(axis == 0 && options.batch.is_some()) => v as usize,
                _ if axis == 0 => options.batch.unwrap_or(1),
                _ => {
                    let seq = options.seq.unwrap_or(128);
                    if options.seq.is_none() {
                        warnings.push(format!(
                            "input '{name}': dimension {axis} ('{}') is symbolic; using --seq {seq}",
                            d.dim_param.as_deref().unwrap_or("?")
                        ));
                    }
                    seq
                }
            };
            shape.push(value);
        }
        let bytes = numel(&shape) * elem_bytes;
        let producer = ops.push(Op {
            name: name.clone(),
            op_type: "Input".into(),
            cost: OpCost::input(bytes),
            inputs: vec![],
            layer_id: None,
            is_input: true,
        });
        tensors.insert(name, Tensor { shape, elem_bytes, is_float, constant: false, ints: None, producer: Some(producer) });
    }
    let value_info: HashMap<&str, Vec<usize>> = graph
        .value_info
        .iter()
        .filter_map(|v| {
            let dims = &v.r#type.as_ref()?.tensor_type.as_ref()?.shape.as_ref()?.dim;
            let shape: Option<Vec<usize>> = dims.iter().map(|d| d.dim_value.filter(|&x| x > 0).map(|x| x as usize)).collect();
            Some((v.name(), shape?))
        })
        .collect();
    // Tensors read by some node or leaving the graph: only those count as outputs.
    let consumed: HashSet<&str> =
        graph.node.iter().flat_map(|n| n.input.iter().map(String::as_str)).chain(graph.output.iter().map(|o| o.name())).collect();
    let batch_override = match (options.batch, file_batch) {
        (Some(b), Some(f)) if b as i64 != f => Some((f, b)),
        _ => None,
    };
    let mut charged: HashSet<String> = HashSet::new();

    for (index, node) in graph.node.iter().enumerate() {
        let op_type = node.op_type.clone().unwrap_or_default();
        let display = match node.name.as_deref() {
            Some(n) if !n.is_empty() => n.to_string(),
            _ => node.output.first().cloned().unwrap_or_else(|| format!("{op_type}_{index}")),
        };
        let mut inputs: Vec<Option<&Tensor>> = Vec::with_capacity(node.input.len());
        for name in &node.input {
            if name.is_empty() {
                inputs.push(None);
                continue;
            }
            let t = tensors.get(name).ok_or_else(|| {
                ImportError::Model(format!(
                    "node '{display}' ({op_type}) reads '{name}', which no earlier node, input or initializer produces"
                ))
            })?;
            inputs.push(Some(t));
        }
        let attrs = Attrs(&node.attribute);
        let all_constant = inputs.iter().flatten().all(|t| t.constant);
        let ctx = Ctx { op_type: &op_type, attrs: &attrs, inputs: &inputs, batch_override, training: options.training, e };
        let inferred = infer(&ctx);
        let (outputs, known): (Vec<Tensor>, bool) = match inferred {
            Ok(outs) => (outs, true),
            Err(reason) => {
                let fallback = node
                    .output
                    .first()
                    .and_then(|o| value_info.get(o.as_str()).cloned())
                    .or_else(|| inputs.iter().flatten().find(|t| !t.constant).or(inputs.iter().flatten().next()).map(|t| t.shape.clone()))
                    .unwrap_or_default();
                if !all_constant {
                    warnings.push(format!(
                        "node '{display}': {reason}; assuming output shape {fallback:?} and a conservative cost (10 FLOPs per output element plus all inputs and outputs moved)"
                    ));
                }
                (vec![float_tensor(fallback, e); node.output.len().max(1)], false)
            }
        };
        if all_constant {
            for (name, mut t) in node.output.iter().zip(outputs) {
                t.constant = true;
                tensors.insert(name.clone(), t);
            }
            continue;
        }
        // Byte accounting from the actual inputs: activations, and parameters read first here.
        let mut input_bytes = 0.0;
        let mut param_bytes = 0.0;
        let mut producers: Vec<usize> = Vec::new();
        for (name, t) in node.input.iter().zip(&inputs) {
            let Some(t) = t else { continue };
            let bytes = numel(&t.shape) * t.elem_bytes;
            if t.constant {
                if t.is_float && charged.insert(name.clone()) {
                    param_bytes += bytes;
                }
            } else {
                input_bytes += bytes;
                let p = t.producer.expect("a non-constant tensor has a producer");
                if !producers.contains(&p) {
                    producers.push(p);
                }
            }
        }
        let output_bytes: f64 = node
            .output
            .iter()
            .zip(&outputs)
            .filter(|(name, _)| consumed.contains(name.as_str()))
            .map(|(_, t)| numel(&t.shape) * t.elem_bytes)
            .sum();
        let work = if known { work_of(&ctx, &outputs) } else { (OpClass::Vector, 10.0 * numel(&outputs[0].shape), 0.0) };
        let (class, flops, macs) = work;
        let cost = OpCost::from_bytes(class, flops, macs, input_bytes, param_bytes, output_bytes);
        let id = ops.push(Op { name: display, op_type: op_type.clone(), cost, inputs: producers, layer_id: None, is_input: false });
        for (name, mut t) in node.output.iter().zip(outputs) {
            t.producer = Some(id);
            t.constant = false;
            tensors.insert(name.clone(), t);
        }
    }
    if ops.ops.iter().all(|o| o.is_input) {
        return Err(ImportError::Model("the graph has no operator that reads a data input".into()));
    }
    Ok(Imported { graph: ops, warnings })
}

fn float_tensor(shape: Vec<usize>, e: f64) -> Tensor {
    Tensor { shape, elem_bytes: e, is_float: true, constant: false, ints: None, producer: None }
}

/// What shape inference and costing see of one node.
struct Ctx<'a> {
    op_type: &'a str,
    attrs: &'a Attrs<'a>,
    inputs: &'a [Option<&'a Tensor>],
    /// (the file's batch, the requested batch) when `--batch` changes it.
    batch_override: Option<(i64, usize)>,
    training: bool,
    e: f64,
}

impl Ctx<'_> {
    fn input(&self, i: usize) -> Result<&Tensor, String> {
        self.inputs.get(i).copied().flatten().ok_or_else(|| format!("{} needs input #{i}", self.op_type))
    }
    fn shape(&self, i: usize) -> Result<&[usize], String> {
        Ok(&self.input(i)?.shape)
    }
    fn like(&self, shape: Vec<usize>) -> Tensor {
        let first = self.inputs.iter().flatten().next();
        Tensor {
            shape,
            elem_bytes: first.map_or(self.e, |t| t.elem_bytes),
            is_float: first.is_none_or(|t| t.is_float),
            constant: false,
            ints: None,
            producer: None,
        }
    }
}

const UNARY: &[(&str, f64)] = &[
    ("Relu", 1.0),
    ("LeakyRelu", 2.0),
    ("PRelu", 2.0),
    ("Elu", 4.0),
    ("Selu", 4.0),
    ("Sigmoid", 4.0),
    ("HardSigmoid", 3.0),
    ("Tanh", 8.0),
    ("Softplus", 4.0),
    ("Softsign", 3.0),
    ("Gelu", 8.0),
    ("Erf", 8.0),
    ("Exp", 4.0),
    ("Log", 4.0),
    ("Sqrt", 4.0),
    ("Reciprocal", 1.0),
    ("Neg", 1.0),
    ("Abs", 1.0),
    ("Clip", 2.0),
    ("Floor", 1.0),
    ("Ceil", 1.0),
    ("Not", 1.0),
    ("Cast", 0.0),
    ("Identity", 0.0),
];

const BINARY: &[&str] =
    &["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Equal", "Greater", "Less", "And", "Or", "Where", "PRelu"];

/// Multidirectional (numpy) broadcasting.
fn broadcast(shapes: &[&[usize]]) -> Result<Vec<usize>, String> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[rank - s.len() + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(format!("shapes {shapes:?} do not broadcast"));
            }
        }
    }
    Ok(out)
}

fn axis_index(axis: i64, rank: usize) -> Result<usize, String> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    if a < 0 || a as usize > rank {
        return Err(format!("axis {axis} out of range for rank {rank}"));
    }
    Ok(a as usize)
}

/// Spatial output sizes of Conv and pooling: `floor((x + p_b + p_e − dil·(k−1) − 1) / s) + 1`
/// (ceil with `ceil_mode`), or `ceil(x / s)` for `SAME_*` auto padding.
fn spatial_out(ctx: &Ctx, input: &[usize], kernel: &[usize]) -> Result<Vec<usize>, String> {
    let n = kernel.len();
    if input.len() != n + 2 {
        return Err(format!("{} input of rank {} with a {}-d kernel", ctx.op_type, input.len(), n));
    }
    let strides = ctx.attrs.ints("strides").unwrap_or_else(|| vec![1; n]);
    let dilations = ctx.attrs.ints("dilations").unwrap_or_else(|| vec![1; n]);
    let pads = ctx.attrs.ints("pads").unwrap_or_else(|| vec![0; 2 * n]);
    let auto_pad = ctx.attrs.string("auto_pad").unwrap_or_else(|| "NOTSET".into());
    let ceil_mode = ctx.attrs.int("ceil_mode", 0) == 1;
    if strides.len() != n || dilations.len() != n || pads.len() != 2 * n {
        return Err("strides, dilations or pads do not match the kernel rank".into());
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let x = input[i + 2] as i64;
        let s = strides[i].max(1);
        let k_eff = dilations[i] * (kernel[i] as i64 - 1) + 1;
        let o = match auto_pad.as_str() {
            "SAME_UPPER" | "SAME_LOWER" => (x + s - 1) / s,
            "VALID" => (x - k_eff) / s + 1,
            _ => {
                let span = x + pads[i] + pads[i + n] - k_eff;
                if ceil_mode {
                    (span + s - 1) / s + 1
                } else {
                    span.div_euclid(s) + 1
                }
            }
        };
        if o < 1 {
            return Err(format!("{} output dimension {o} < 1", ctx.op_type));
        }
        out.push(o as usize);
    }
    Ok(out)
}

/// Output tensors of one node, or why they cannot be inferred.
fn infer(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
    let op = ctx.op_type;
    if UNARY.iter().any(|(n, _)| *n == op) {
        let mut t = ctx.like(ctx.shape(0)?.to_vec());
        if op == "Cast" {
            let (b, f) = elem_info(ctx.attrs.int("to", 1) as i32, ctx.e);
            t.elem_bytes = b;
            t.is_float = f;
        }
        if op == "Identity" || op == "Cast" {
            t.ints = ctx.input(0)?.ints.clone();
        }
        return Ok(vec![t]);
    }
    if BINARY.contains(&op) {
        let shapes: Vec<&[usize]> = ctx.inputs.iter().flatten().map(|t| t.shape.as_slice()).collect();
        return Ok(vec![ctx.like(broadcast(&shapes)?)]);
    }
    match op {
        "Constant" => {
            let t = ctx.attrs.get("value").and_then(|a| a.t.as_ref()).ok_or("Constant without a tensor value")?;
            let (elem_bytes, is_float) = elem_info(t.data_type.unwrap_or(1), ctx.e);
            Ok(vec![Tensor { shape: dims_of(t)?, elem_bytes, is_float, constant: true, ints: tensor_ints(t), producer: None }])
        }
        "ConstantOfShape" => {
            let dims = ctx.input(0)?.ints.clone().ok_or("ConstantOfShape of a shape that is not a constant")?;
            let shape = dims.iter().map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}"))).collect::<Result<_, _>>()?;
            let dtype = ctx.attrs.get("value").and_then(|a| a.t.as_ref()).and_then(|t| t.data_type).unwrap_or(1);
            let (elem_bytes, is_float) = elem_info(dtype, ctx.e);
            Ok(vec![Tensor { shape, elem_bytes, is_float, constant: true, ints: None, producer: None }])
        }
        "Shape" => {
            let s = ctx.shape(0)?;
            let ints = s.iter().map(|&d| d as i64).collect();
            Ok(vec![Tensor { shape: vec![s.len()], elem_bytes: 8.0, is_float: false, constant: true, ints: Some(ints), producer: None }])
        }
        "Conv" => {
            let (x, w) = (ctx.shape(0)?, ctx.shape(1)?);
            if x.len() < 3 || w.len() != x.len() {
                return Err(format!("Conv of input {x:?} with weight {w:?}"));
            }
            let group = ctx.attrs.int("group", 1).max(1) as usize;
            if w[1] * group != x[1] {
                return Err(format!("Conv weight {w:?} with {group} groups does not match input channels {}", x[1]));
            }
            let kernel: Vec<usize> = w[2..].to_vec();
            let mut out = vec![x[0], w[0]];
            out.extend(spatial_out(ctx, x, &kernel)?);
            Ok(vec![ctx.like(out)])
        }
        "MaxPool" | "AveragePool" | "LpPool" => {
            let x = ctx.shape(0)?;
            let kernel: Vec<usize> = ctx.attrs.ints("kernel_shape").ok_or("pooling without kernel_shape")?.iter().map(|&k| k.max(1) as usize).collect();
            let mut out = vec![x[0], x[1]];
            out.extend(spatial_out(ctx, x, &kernel)?);
            let mut outs = vec![ctx.like(out.clone())];
            if op == "MaxPool" {
                let mut idx = ctx.like(out);
                idx.elem_bytes = 8.0;
                outs.push(idx);
            }
            Ok(outs)
        }
        "GlobalAveragePool" | "GlobalMaxPool" => {
            let x = ctx.shape(0)?;
            let mut out = x.to_vec();
            out.iter_mut().skip(2).for_each(|d| *d = 1);
            Ok(vec![ctx.like(out)])
        }
        "Gemm" => {
            let (a, b) = (ctx.shape(0)?, ctx.shape(1)?);
            if a.len() != 2 || b.len() != 2 {
                return Err(format!("Gemm of {a:?} and {b:?}"));
            }
            let m = if ctx.attrs.int("transA", 0) == 1 { a[1] } else { a[0] };
            let n = if ctx.attrs.int("transB", 0) == 1 { b[0] } else { b[1] };
            Ok(vec![ctx.like(vec![m, n])])
        }
        "MatMul" => {
            let (a, b) = (ctx.shape(0)?, ctx.shape(1)?);
            let (m, k1) = match a.len() {
                0 => return Err("MatMul of a scalar".into()),
                1 => (None, a[0]),
                r => (Some(a[r - 2]), a[r - 1]),
            };
            let (k2, n) = match b.len() {
                0 => return Err("MatMul of a scalar".into()),
                1 => (b[0], None),
                r => (b[r - 2], Some(b[r - 1])),
            };
            if k1 != k2 {
                return Err(format!("MatMul of {a:?} and {b:?}: inner dimensions differ"));
            }
            let batch_a = if a.len() > 2 { &a[..a.len() - 2] } else { &[][..] };
            let batch_b = if b.len() > 2 { &b[..b.len() - 2] } else { &[][..] };
            let mut out = broadcast(&[batch_a, batch_b])?;
            out.extend(m);
            out.extend(n);
            Ok(vec![ctx.like(out)])
        }
        "BatchNormalization" | "InstanceNormalization" | "LayerNormalization" | "LRN" | "Softmax" | "LogSoftmax" => {
            Ok(vec![ctx.like(ctx.shape(0)?.to_vec())])
        }
        "Dropout" => {
            let x = ctx.shape(0)?.to_vec();
            let mut mask = ctx.like(x.clone());
            mask.elem_bytes = 1.0;
            mask.is_float = false;
            Ok(vec![ctx.like(x), mask])
        }
        "Flatten" => {
            let x = ctx.shape(0)?;
            let axis = axis_index(ctx.attrs.int("axis", 1), x.len())?;
            Ok(vec![ctx.like(vec![x[..axis].iter().product(), x[axis..].iter().product()])])
        }
        "Reshape" => {
            let x = ctx.shape(0)?;
            let target = match ctx.input(1).ok().and_then(|t| t.ints.clone()) {
                Some(t) => t,
                None => ctx.attrs.ints("shape").ok_or("Reshape to a shape that is not a constant")?,
            };
            let mut target = target;
            if let Some((file_batch, batch)) = ctx.batch_override {
                if target.first() == Some(&file_batch) && x.first() == Some(&batch) {
                    target[0] = batch as i64;
                }
            }
            let total: usize = x.iter().product();
            let mut out = Vec::with_capacity(target.len());
            let mut unknown = None;
            for (i, &d) in target.iter().enumerate() {
                match d {
                    0 => out.push(*x.get(i).ok_or("Reshape copies a dimension the input lacks")?),
                    -1 => {
                        unknown = Some(i);
                        out.push(1);
                    }
                    d if d > 0 => out.push(d as usize),
                    d => return Err(format!("Reshape to dimension {d}")),
                }
            }
            let known: usize = out.iter().product();
            if let Some(i) = unknown {
                if known == 0 || !total.is_multiple_of(known) {
                    return Err(format!("Reshape of {x:?} to {target:?}"));
                }
                out[i] = total / known;
            } else if known != total {
                return Err(format!("Reshape of {x:?} ({total} elements) to {target:?}"));
            }
            Ok(vec![ctx.like(out)])
        }
        "Transpose" => {
            let x = ctx.shape(0)?;
            let perm: Vec<usize> = match ctx.attrs.ints("perm") {
                Some(p) => p.iter().map(|&i| i as usize).collect(),
                None => (0..x.len()).rev().collect(),
            };
            let out = perm.iter().map(|&i| x.get(i).copied().ok_or("Transpose perm out of range")).collect::<Result<_, _>>()?;
            Ok(vec![ctx.like(out)])
        }
        "Concat" => {
            let first = ctx.shape(0)?;
            let axis = axis_index(ctx.attrs.int("axis", 1), first.len())?;
            let mut out = first.to_vec();
            if axis >= out.len() {
                return Err("Concat axis out of range".into());
            }
            out[axis] = 0;
            for t in ctx.inputs.iter().flatten() {
                if t.shape.len() != first.len() {
                    return Err("Concat of tensors of different ranks".into());
                }
                out[axis] += t.shape[axis];
            }
            let mut t = ctx.like(out);
            if ctx.inputs.iter().flatten().all(|t| t.ints.is_some()) {
                t.ints = Some(ctx.inputs.iter().flatten().flat_map(|t| t.ints.clone().unwrap_or_default()).collect());
            }
            Ok(vec![t])
        }
        "Unsqueeze" | "Squeeze" => {
            let x = ctx.shape(0)?;
            let axes = ctx.attrs.ints("axes").or_else(|| ctx.input(1).ok().and_then(|t| t.ints.clone()));
            let out = if op == "Unsqueeze" {
                let axes = axes.ok_or("Unsqueeze without axes")?;
                let rank = x.len() + axes.len();
                let mut axes: Vec<usize> = axes.iter().map(|&a| axis_index(a, rank)).collect::<Result<_, _>>()?;
                axes.sort_unstable();
                let mut out = x.to_vec();
                for a in axes {
                    if a > out.len() {
                        return Err("Unsqueeze axis out of range".into());
                    }
                    out.insert(a, 1);
                }
                out
            } else {
                match axes {
                    Some(axes) => {
                        let axes: Vec<usize> = axes.iter().map(|&a| axis_index(a, x.len())).collect::<Result<_, _>>()?;
                        x.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d).collect()
                    }
                    None => x.iter().copied().filter(|&d| d != 1).collect(),
                }
            };
            Ok(vec![ctx.like(out)])
        }
        "Gather" => {
            let (data, idx) = (ctx.shape(0)?, ctx.shape(1)?);
            let axis = axis_index(ctx.attrs.int("axis", 0), data.len())?;
            if axis >= data.len() {
                return Err("Gather axis out of range".into());
            }
            let mut out = data[..axis].to_vec();
            out.extend_from_slice(idx);
            out.extend_from_slice(&data[axis + 1..]);
            let mut t = ctx.like(out);
            t.elem_bytes = ctx.input(0)?.elem_bytes;
            t.is_float = ctx.input(0)?.is_float;
            Ok(vec![t])
        }
        "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" => {
            let x = ctx.shape(0)?;
            let keep = ctx.attrs.int("keepdims", 1) == 1;
            let axes: Vec<usize> = match ctx.attrs.ints("axes") {
                Some(a) => a.iter().map(|&a| axis_index(a, x.len())).collect::<Result<_, _>>()?,
                None => (0..x.len()).collect(),
            };
            let out = x
                .iter()
                .enumerate()
                .filter_map(|(i, &d)| if axes.contains(&i) { keep.then_some(1) } else { Some(d) })
                .collect();
            Ok(vec![ctx.like(out)])
        }
        _ => Err(format!("unknown operator {op}")),
    }
}

/// (class, FLOPs, MACs) of a node whose shapes are known; formulas in
/// [`crate::costmodel::operators`].
fn work_of(ctx: &Ctx, outputs: &[Tensor]) -> (OpClass, f64, f64) {
    let op = ctx.op_type;
    let y = numel(&outputs[0].shape);
    let has = |i: usize| ctx.inputs.get(i).copied().flatten().is_some();
    let from = |c: OpCost| (c.class, c.flops, c.macs);
    let e = ctx.e;
    if let Some((_, f)) = UNARY.iter().find(|(n, _)| *n == op) {
        return from(operators::elementwise(y, y, *f, 0.0, e));
    }
    if BINARY.contains(&op) {
        // Bytes come from the actual inputs (caller); here only class and FLOPs matter.
        let j = ctx.inputs.iter().flatten().count() as f64;
        let per = if op == "Sum" || op == "Mean" { (j - 1.0).max(1.0) } else { 1.0 };
        return from(operators::elementwise(y, j * y, per, 0.0, e));
    }
    match op {
        "Conv" => {
            let (x, w) = (ctx.inputs[0].unwrap(), ctx.inputs[1].unwrap());
            from(operators::conv(&x.shape, &w.shape, &outputs[0].shape, has(2), e))
        }
        "Gemm" => {
            let a = &ctx.inputs[0].unwrap().shape;
            let k = if ctx.attrs.int("transA", 0) == 1 { a[0] } else { a[1] };
            let (m, n) = (outputs[0].shape[0], outputs[0].shape[1]);
            from(operators::matmul(1, m, k, n, has(2), true, e))
        }
        "MatMul" => {
            let a = &ctx.inputs[0].unwrap().shape;
            let k = *a.last().unwrap_or(&1);
            // y = β·m·n for the broadcast output; MACs = y·k.
            (OpClass::Matmul, 2.0 * y * k as f64, y * k as f64)
        }
        "MaxPool" | "AveragePool" | "LpPool" => {
            let window: f64 = ctx.attrs.ints("kernel_shape").unwrap_or_default().iter().map(|&k| k as f64).product();
            from(operators::pool(&ctx.inputs[0].unwrap().shape, &outputs[0].shape, window, e))
        }
        "GlobalAveragePool" | "GlobalMaxPool" => (OpClass::Vector, numel(&ctx.inputs[0].unwrap().shape), 0.0),
        "BatchNormalization" => from(operators::normalization(y, 0.0, ctx.training, e)),
        "InstanceNormalization" | "LayerNormalization" => from(operators::normalization(y, 0.0, true, e)),
        "LRN" => from(operators::lrn(y, ctx.attrs.int("size", 5) as f64, e)),
        "Softmax" | "LogSoftmax" => from(operators::softmax(y, e)),
        // Inference dropout is the identity (data movement); training draws a mask and scales.
        "Dropout" if ctx.training => (OpClass::Vector, 2.0 * y, 0.0),
        "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" => (OpClass::Vector, numel(&ctx.inputs[0].unwrap().shape), 0.0),
        _ => (OpClass::Movement, 0.0, 0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vi(name: &str, dims: &[i64]) -> ValueInfoProto {
        ValueInfoProto {
            name: Some(name.into()),
            r#type: Some(TypeProto {
                tensor_type: Some(TypeProtoTensor {
                    elem_type: Some(1),
                    shape: Some(TensorShapeProto {
                        dim: dims
                            .iter()
                            .map(|&d| if d > 0 { Dimension { dim_value: Some(d), dim_param: None } } else { Dimension { dim_value: None, dim_param: Some("N".into()) } })
                            .collect(),
                    }),
                }),
            }),
        }
    }

    fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
        NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            name: None,
            op_type: Some(op.into()),
            attribute: attrs,
            domain: None,
        }
    }

    fn ints(name: &str, v: &[i64]) -> AttributeProto {
        AttributeProto { name: Some(name.into()), ints: v.to_vec(), ..Default::default() }
    }

    fn shape_init(name: &str, v: &[i64]) -> TensorProto {
        TensorProto { dims: vec![v.len() as i64], data_type: Some(7), int64_data: v.to_vec(), name: Some(name.into()), ..Default::default() }
    }

    /// x (N×3×8×8) → Conv 3×3 pad 1 (weights from ConstantOfShape) → Relu → Frobnicate →
    /// Reshape (N, -1).
    fn tiny_model() -> ModelProto {
        ModelProto {
            ir_version: Some(4),
            producer_name: None,
            opset_import: vec![OperatorSetIdProto { domain: None, version: Some(9) }],
            graph: Some(GraphProto {
                name: Some("tiny".into()),
                initializer: vec![shape_init("w_shape", &[4, 3, 3, 3]), shape_init("flat", &[1, -1])],
                input: vec![vi("x", &[1, 3, 8, 8])],
                output: vec![vi("out", &[1, 256])],
                value_info: vec![],
                node: vec![
                    node("ConstantOfShape", &["w_shape"], &["w"], vec![]),
                    node("Conv", &["x", "w"], &["c"], vec![ints("kernel_shape", &[3, 3]), ints("pads", &[1, 1, 1, 1])]),
                    node("Relu", &["c"], &["r"], vec![]),
                    node("Frobnicate", &["r"], &["f"], vec![]),
                    node("Reshape", &["f", "flat"], &["out"], vec![]),
                ],
            }),
        }
    }

    #[test]
    fn tiny_model_shapes_costs_and_warnings() {
        let model = decode_model(&tiny_model().encode_to_vec()).unwrap();
        let imported = import_model(&model, &ImportOptions::default()).unwrap();
        let g = &imported.graph;
        let names: Vec<&str> = g.ops.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["x", "c", "r", "f", "out"]);
        let conv = &g.ops[1].cost;
        // 4·8·8 outputs × 3·3·3 MACs; the ConstantOfShape weights are its parameters.
        assert_eq!(conv.macs, 256.0 * 27.0);
        assert_eq!(conv.param_bytes, 108.0 * 4.0);
        assert_eq!(g.ops[1].inputs, vec![0]);
        assert_eq!(imported.warnings.len(), 1);
        assert!(imported.warnings[0].contains("Frobnicate"), "{:?}", imported.warnings);
        assert_eq!(g.ops[3].cost.flops, 2560.0);
        // Batch 8: the Reshape's literal 1 is read as the batch.
        let opts = ImportOptions { batch: Some(8), ..Default::default() };
        let g8 = import_model(&model, &opts).unwrap().graph;
        assert_eq!(g8.ops[4].cost.output_bytes, 8.0 * 256.0 * 4.0);
        assert_eq!(g8.macs(), 8.0 * g.macs());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode_model(b"definitely not protobuf \xff\xff\xff").is_err());
        let mut m = tiny_model();
        m.graph.as_mut().unwrap().node.remove(0);
        let err = import_model(&m, &ImportOptions::default()).unwrap_err().to_string();
        assert!(err.contains("reads 'w'"), "{err}");
    }

    #[test]
    fn conv_and_pool_output_sizes() {
        let attrs = [ints("strides", &[2, 2]), ints("pads", &[3, 3, 3, 3]), ints("kernel_shape", &[7, 7])];
        let a = Attrs(&attrs);
        let x = float_tensor(vec![1, 3, 224, 224], 4.0);
        let inputs = [Some(&x)];
        let ctx = Ctx { op_type: "MaxPool", attrs: &a, inputs: &inputs, batch_override: None, training: false, e: 4.0 };
        assert_eq!(spatial_out(&ctx, &x.shape, &[7, 7]).unwrap(), vec![112, 112]);
        assert_eq!(broadcast(&[&[8, 1, 3], &[4, 1]]).unwrap(), vec![8, 4, 3]);
        assert!(broadcast(&[&[2, 3], &[4, 3]]).is_err());
    }
}

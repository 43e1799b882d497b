//! ONNX import: a model file → an [`OpGraph`] with shapes, costs and names.
//!
//! **Parsing** ([`proto`]). The protobuf is decoded with `prost` (a maintained protobuf
//! runtime) into the subset of the ONNX messages we read, transcribed field by field from
//! the ONNX project's `onnx.proto` (unknown fields are skipped by protobuf rules). We chose
//! this over `tract-onnx` because tract is an inference engine: it pulls in a kernel library
//! and dozens of crates (measured: see `docs/costmodel.md`) to give us what we need from it —
//! operator types, attributes and shapes — which for the operators a placement needs is a
//! few hundred lines of shape inference here.
//!
//! **Shapes** ([`shapes`]). Every tensor's shape is inferred in file order (ONNX files are
//! topologically sorted) from the graph inputs, initializers and each operator's attributes
//! (opset 9 semantics, with the opset-13 forms of Unsqueeze/Squeeze axes as inputs).
//! Symbolic input dimensions are resolved from `batch` (the first dimension) and `seq` (any
//! other); `batch`, when given, also replaces the first dimension of every data input, and a
//! Reshape target whose first entry is the file's literal batch is then read as the batch.
//!
//! **Parameters.** A tensor computed only from constants (initializers, `Constant`,
//! `ConstantOfShape`, and anything folded from them) is a constant; float constants read by
//! an operator are its parameters (counted once, at their first reader), so the shape-only
//! weights of the light models (`ConstantOfShape`) count as parameters. Integer constants
//! (Reshape targets, shapes) are not parameters. Constant operators are folded away.
//!
//! **Work** ([`work`]). FLOPs and MACs per operator family, formulas of
//! [`crate::costmodel::operators`]; bytes from the actual tensors.
//!
//! **Operators and names** ([`import`], [`names`]). Every remaining operator is one [`Op`]
//! named after the ONNX node (or its first output when unnamed), with the module path it
//! comes from when the exporter recorded one (`/model/layers.3/self_attn/q_proj/MatMul` →
//! `model.layers.3.self_attn.q_proj`); each data input is an `Input` op without work. An
//! operator we do not know gets a warning and a conservative cost: its output shape from
//! the file's `value_info` when present, else its first input's; `10` FLOPs per output
//! element plus reading all inputs and writing all outputs — never a failure.
//!
//! [`Op`]: crate::costmodel::Op

mod import;
pub mod names;
pub mod proto;
mod shapes;
mod work;

use prost::Message;

pub use import::import_model;
pub use names::{module_from_name_scopes, module_from_scoped_name};
pub use proto::*;

use super::graph::OpGraph;
use super::operators::DType;

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
        ImportOptions {
            batch: None,
            seq: None,
            dtype: DType::Fp32,
            training: false,
        }
    }
}

/// An imported model: the operator graph and what the importer had to guess.
#[derive(Clone, Debug)]
pub struct Imported {
    pub graph: OpGraph,
    /// Unknown operators and other approximations, one line each, for the user to read.
    pub warnings: Vec<String>,
    /// The tensor shapes of every operator of `graph`, in its order (what
    /// [`crate::costmodel::onnx_parallel`] checks a TP degree against).
    pub shapes: Vec<OpShapes>,
}

/// The shapes one imported operator reads and writes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpShapes {
    /// Every input of the ONNX node in order (constants too; `None` for an omitted one).
    pub inputs: Vec<Option<Vec<usize>>>,
    /// Its first output's shape (a data input's own shape for an `Input` op).
    pub output: Vec<usize>,
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

/// Decodes an ONNX model from bytes.
pub fn decode_model(bytes: &[u8]) -> Result<ModelProto, ImportError> {
    let model = ModelProto::decode(bytes).map_err(|e| ImportError::Decode(e.to_string()))?;
    if model.graph.is_none() {
        return Err(ImportError::Decode("the file has no graph".into()));
    }
    Ok(model)
}

/// Reads and imports an ONNX file.
pub fn import_file(
    path: &std::path::Path,
    options: &ImportOptions,
) -> Result<Imported, ImportError> {
    let file_err = |message: String| ImportError::File {
        path: path.display().to_string(),
        message,
    };
    // 2 GiB: protobuf's limit on one message (larger models keep weights in external files).
    let bytes = crate::io::read_input(path, 2 << 30).map_err(file_err)?;
    let model = decode_model(&bytes).map_err(|e| file_err(e.to_string()))?;
    import_model(&model, options).map_err(|e| file_err(e.to_string()))
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
                            .map(|&d| {
                                if d > 0 {
                                    Dimension {
                                        dim_value: Some(d),
                                        dim_param: None,
                                    }
                                } else {
                                    Dimension {
                                        dim_value: None,
                                        dim_param: Some("N".into()),
                                    }
                                }
                            })
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
            metadata_props: vec![],
        }
    }

    fn ints(name: &str, v: &[i64]) -> AttributeProto {
        AttributeProto {
            name: Some(name.into()),
            ints: v.to_vec(),
            ..Default::default()
        }
    }

    fn shape_init(name: &str, v: &[i64]) -> TensorProto {
        TensorProto {
            dims: vec![v.len() as i64],
            data_type: Some(7),
            int64_data: v.to_vec(),
            name: Some(name.into()),
            ..Default::default()
        }
    }

    /// x (N×3×8×8) → Conv 3×3 pad 1 (weights from ConstantOfShape) → Relu → Frobnicate →
    /// Reshape (N, -1).
    fn tiny_model() -> ModelProto {
        ModelProto {
            ir_version: Some(4),
            producer_name: None,
            opset_import: vec![OperatorSetIdProto {
                domain: None,
                version: Some(9),
            }],
            graph: Some(GraphProto {
                name: Some("tiny".into()),
                initializer: vec![
                    shape_init("w_shape", &[4, 3, 3, 3]),
                    shape_init("flat", &[1, -1]),
                ],
                input: vec![vi("x", &[1, 3, 8, 8])],
                output: vec![vi("out", &[1, 256])],
                value_info: vec![],
                node: vec![
                    node("ConstantOfShape", &["w_shape"], &["w"], vec![]),
                    node(
                        "Conv",
                        &["x", "w"],
                        &["c"],
                        vec![ints("kernel_shape", &[3, 3]), ints("pads", &[1, 1, 1, 1])],
                    ),
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
        assert!(
            imported.warnings[0].contains("Frobnicate"),
            "{:?}",
            imported.warnings
        );
        assert_eq!(g.ops[3].cost.flops, 2560.0);
        // Batch 8: the Reshape's literal 1 is read as the batch.
        let opts = ImportOptions {
            batch: Some(8),
            ..Default::default()
        };
        let g8 = import_model(&model, &opts).unwrap().graph;
        assert_eq!(g8.ops[4].cost.output_bytes, 8.0 * 256.0 * 4.0);
        assert_eq!(g8.macs(), 8.0 * g.macs());
    }

    /// ids (1×4, int64) → Gather from a 10×8 float table (ConstantOfShape) → Relu.
    #[test]
    fn a_gather_from_a_float_table_is_a_lookup_whose_backward_writes_the_table() {
        use crate::costmodel::operators::OpClass;
        use crate::costmodel::training::backward_cost;
        let mut ids = vi("ids", &[1, 4]);
        let tensor = ids.r#type.as_mut().unwrap().tensor_type.as_mut().unwrap();
        tensor.elem_type = Some(7);
        let mut model = tiny_model();
        let graph = model.graph.as_mut().unwrap();
        graph.initializer = vec![shape_init("t_shape", &[10, 8])];
        graph.input = vec![ids];
        graph.output = vec![vi("y", &[1, 4, 8])];
        graph.node = vec![
            node("ConstantOfShape", &["t_shape"], &["table"], vec![]),
            node("Gather", &["table", "ids"], &["e"], vec![]),
            node("Relu", &["e"], &["y"], vec![]),
        ];
        let model = decode_model(&model.encode_to_vec()).unwrap();
        let g = import_model(&model, &ImportOptions::default())
            .unwrap()
            .graph;
        let (gather, relu) = (&g.ops[1].cost, &g.ops[2].cost);
        assert_eq!(
            (gather.class, relu.class),
            (OpClass::Lookup, OpClass::Vector)
        );
        assert_eq!(gather.param_bytes, 10.0 * 8.0 * 4.0);
        assert_eq!(gather.output_bytes, 4.0 * 8.0 * 4.0);
        // Backward: zero-fill and the whole-table add (4 tables), the scatter (3 × the
        // 32 gathered elements), the 4 int64 ids.
        assert_eq!(gather.input_bytes, 4.0 * 8.0);
        let back = backward_cost(gather);
        assert_eq!(back.bytes_moved, 4.0 * 320.0 + 3.0 * 128.0 + 32.0);
        assert_eq!(back.flops, 0.0);
        // The Relu keeps the generic rule: twice its forward bytes.
        assert_eq!(backward_cost(relu).bytes_moved, 2.0 * relu.bytes_moved);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode_model(b"definitely not protobuf \xff\xff\xff").is_err());
        let mut m = tiny_model();
        m.graph.as_mut().unwrap().node.remove(0);
        let err = import_model(&m, &ImportOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("reads 'w'"), "{err}");
    }
}

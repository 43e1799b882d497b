//! The ONNX protobuf messages we read, and the values inside them.
//!
//! The messages are the subset of `onnx.proto` (the ONNX project's schema) that an import
//! needs, transcribed field by field with their tag numbers and decoded by `prost`; fields we
//! do not list are skipped by protobuf rules. [`elem_info`], [`tensor_ints`] and [`dims_of`]
//! read a `TensorProto`: its element type, its integer payload (shapes, axes) and its shape.

use prost::Message;

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
    #[prost(message, repeated, tag = "9")]
    pub metadata_props: Vec<StringStringEntryProto>,
}

/// `onnx.proto` StringStringEntryProto (a node's `metadata_props` entry).
#[derive(Clone, PartialEq, Message)]
pub struct StringStringEntryProto {
    #[prost(string, optional, tag = "1")]
    pub key: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub value: Option<String>,
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

/// ONNX `TensorProto.DataType` → (bytes per element in the model, is float). Floats take
/// the chosen dtype's size, whatever the file stores.
pub(super) fn elem_info(data_type: i32, e: f64) -> (f64, bool) {
    match data_type {
        1 | 10 | 11 | 16 => (e, true), // FLOAT, FLOAT16, DOUBLE, BFLOAT16
        2 | 3 | 9 => (1.0, false),     // UINT8, INT8, BOOL
        4 | 5 => (2.0, false),         // UINT16, INT16
        6 | 12 => (4.0, false),        // INT32, UINT32
        7 | 13 => (8.0, false),        // INT64, UINT64
        _ => (e, true),
    }
}

pub(super) fn tensor_ints(t: &TensorProto) -> Option<Vec<i64>> {
    match t.data_type.unwrap_or(1) {
        7 => {
            if !t.int64_data.is_empty() {
                Some(t.int64_data.clone())
            } else {
                t.raw_data.as_ref().map(|r| {
                    r.chunks_exact(8)
                        .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                        .collect()
                })
            }
        }
        6 => {
            if !t.int32_data.is_empty() {
                Some(t.int32_data.iter().map(|&x| x as i64).collect())
            } else {
                t.raw_data.as_ref().map(|r| {
                    r.chunks_exact(4)
                        .map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes")) as i64)
                        .collect()
                })
            }
        }
        _ => None,
    }
}

pub(super) fn dims_of(t: &TensorProto) -> Result<Vec<usize>, String> {
    t.dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
        .collect()
}

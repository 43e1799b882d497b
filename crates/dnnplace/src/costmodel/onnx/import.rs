//! The import itself: an ONNX graph, walked once in file order, becomes an [`OpGraph`].
//!
//! Steps of [`import_model`] (n ONNX nodes, t tensors):
//!
//! 1. **Initializers** become constant tensors ([`read_initializers`]).
//! 2. **Data inputs** (graph inputs that are not initializers) become `Input` ops with no
//!    work; symbolic dimensions are resolved from `batch` (axis 0) and `seq` (any other
//!    axis, with a warning when `seq` was not given) ([`read_inputs`]).
//! 3. **Facts about the graph**: the shapes the file declares in `value_info` (the fallback
//!    for an operator we cannot infer), the tensors some node or the graph output reads
//!    (only those count as written outputs), and the batch override ([`GraphFacts`]).
//! 4. **Each node** ([`import_node`]): its inputs are looked up (a tensor read before it is
//!    produced is an error naming the node); its outputs are inferred ([`super::shapes`]) or,
//!    failing that, taken from `value_info` or its first non-constant input with a warning;
//!    a node whose inputs are all constants is folded into a constant; otherwise its bytes
//!    are counted — activations read, parameters read for the first time (float constants:
//!    each is charged once, at its first reader), outputs written — its work comes from
//!    [`super::work`] (or `10·|Y|` FLOPs for an unknown operator), and it becomes an [`Op`]
//!    named after the node (or its first output) with its module path ([`super::names`]).
//!    A `Gather` whose data is a float constant (an embedding table) is an
//!    [`OpClass::Lookup`]: its backward writes a dense gradient of the table bytes charged
//!    to it ([`crate::costmodel::training`]); its forward keeps the rule above (the table
//!    counted as read at its first reader).
//!
//! A tensor of more than 2^53 elements (initializer, input or inferred output) is an error
//! naming it ([`MAX_ELEMENTS`]): beyond it sizes are not exact in `f64`, and no real model
//! comes near it.
//!
//! Complexity: O(n + Σ|inputs| + t) plus hashing of tensor names.

use std::collections::{HashMap, HashSet};

use super::names::module_of;
use super::proto::{dims_of, elem_info, tensor_ints, Dimension, GraphProto, ModelProto, NodeProto};
use super::shapes::{float_tensor, infer, Attrs, Ctx, Tensor};
use super::work::work_of;
use super::{ImportError, ImportOptions, Imported, OpShapes};
use crate::costmodel::graph::{Op, OpGraph};
use crate::costmodel::operators::{numel, OpClass, OpCost};

/// What the walk has built so far.
struct ImportState<'o> {
    options: &'o ImportOptions,
    /// Bytes per float element.
    e: f64,
    tensors: HashMap<String, Tensor>,
    /// Float constants already charged as some operator's parameters.
    charged: HashSet<String>,
    warnings: Vec<String>,
    ops: OpGraph,
    /// The shapes of every op of `ops`.
    shapes: Vec<OpShapes>,
}

/// Read-only facts about the graph, gathered before the walk.
struct GraphFacts<'g> {
    /// Shapes the file declares for intermediate tensors (fully known ones only).
    declared: HashMap<&'g str, Vec<usize>>,
    /// Tensors read by some node or leaving the graph: only those count as outputs.
    consumed: HashSet<&'g str>,
    /// (the file's batch, the requested batch) when `--batch` changes it.
    batch_override: Option<(i64, usize)>,
}

/// Imports a decoded model (module documentation).
///
/// Complexity: O(n + Σ|inputs|) for n ONNX nodes, plus hashing of tensor names.
///
/// # Example
///
/// A one-operator model (`y = Relu(x)` on a 1×8 tensor), built in memory; a file goes
/// through [`super::import_file`] the same way.
/// ```
/// use dnnplace::costmodel::onnx::*;
///
/// let tensor = |name: &str| ValueInfoProto {
///     name: Some(name.into()),
///     r#type: Some(TypeProto {
///         tensor_type: Some(TypeProtoTensor {
///             elem_type: Some(1),
///             shape: Some(TensorShapeProto {
///                 dim: [1, 8].map(|d| Dimension { dim_value: Some(d), dim_param: None }).to_vec(),
///             }),
///         }),
///     }),
/// };
/// let relu = NodeProto {
///     input: vec!["x".into()],
///     output: vec!["y".into()],
///     op_type: Some("Relu".into()),
///     ..Default::default()
/// };
/// let graph = GraphProto { node: vec![relu], input: vec![tensor("x")], output: vec![tensor("y")], ..Default::default() };
/// let model = ModelProto { graph: Some(graph), ..Default::default() };
/// let imported = import_model(&model, &ImportOptions::default())?;
/// let names: Vec<&str> = imported.graph.ops.iter().map(|op| op.name.as_str()).collect();
/// assert_eq!(names, ["x", "y"]);
/// assert!(imported.warnings.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn import_model(model: &ModelProto, options: &ImportOptions) -> Result<Imported, ImportError> {
    let graph = model
        .graph
        .as_ref()
        .ok_or_else(|| ImportError::Decode("the file has no graph".into()))?;
    let mut state = ImportState {
        options,
        e: options.dtype.bytes(),
        tensors: HashMap::new(),
        charged: HashSet::new(),
        warnings: Vec::new(),
        ops: OpGraph::default(),
        shapes: Vec::new(),
    };
    read_initializers(graph, &mut state)?;
    let file_batch = file_batch(graph, &state.tensors);
    read_inputs(graph, &mut state)?;
    let facts = GraphFacts {
        declared: declared_shapes(graph),
        consumed: graph
            .node
            .iter()
            .flat_map(|n| n.input.iter().map(String::as_str))
            .chain(graph.output.iter().map(|o| o.name()))
            .collect(),
        batch_override: match (options.batch, file_batch) {
            (Some(b), Some(f)) if b as i64 != f => Some((f, b)),
            _ => None,
        },
    };
    for (index, node) in graph.node.iter().enumerate() {
        import_node(index, node, &facts, &mut state)?;
    }
    if state.ops.ops.iter().all(|o| o.is_input) {
        return Err(ImportError::Model(
            "the graph has no operator that reads a data input".into(),
        ));
    }
    Ok(Imported {
        graph: state.ops,
        warnings: state.warnings,
        shapes: state.shapes,
    })
}

/// Step 1: every initializer is a constant tensor.
fn read_initializers(graph: &GraphProto, state: &mut ImportState) -> Result<(), ImportError> {
    for init in &graph.initializer {
        let name = init.name.clone().unwrap_or_default();
        let (elem_bytes, is_float) = elem_info(init.data_type.unwrap_or(1), state.e);
        let shape =
            dims_of(init).map_err(|m| ImportError::Model(format!("initializer '{name}': {m}")))?;
        check_elements(&format!("initializer '{name}'"), &shape)?;
        let ints = tensor_ints(init);
        state.tensors.insert(
            name,
            Tensor {
                shape,
                elem_bytes,
                is_float,
                constant: true,
                ints,
                producer: None,
            },
        );
    }
    Ok(())
}

/// The fixed first dimension of the first data input, if any: the file's batch.
fn file_batch(graph: &GraphProto, tensors: &HashMap<String, Tensor>) -> Option<i64> {
    graph
        .input
        .iter()
        .filter(|i| !tensors.contains_key(i.name()))
        .find_map(|i| {
            let dims = &i.r#type.as_ref()?.tensor_type.as_ref()?.shape.as_ref()?.dim;
            dims.first()?.dim_value.filter(|&v| v > 0)
        })
}

/// Step 2: every data input becomes an `Input` op producing its tensor.
fn read_inputs(graph: &GraphProto, state: &mut ImportState) -> Result<(), ImportError> {
    for input in &graph.input {
        let name = input.name().to_string();
        if state.tensors.contains_key(&name) {
            continue; // an initializer listed as an input (IR < 4)
        }
        let tt = input.r#type.as_ref().and_then(|t| t.tensor_type.as_ref());
        let (elem_bytes, is_float) = elem_info(tt.and_then(|t| t.elem_type).unwrap_or(1), state.e);
        let dims = tt
            .and_then(|t| t.shape.as_ref())
            .map(|s| s.dim.clone())
            .unwrap_or_default();
        let shape: Vec<usize> = dims
            .iter()
            .enumerate()
            .map(|(axis, d)| input_dimension(&name, axis, d, state))
            .collect();
        check_elements(&format!("input '{name}'"), &shape)?;
        let bytes = numel(&shape) * elem_bytes;
        let producer = state.ops.push(Op {
            name: name.clone(),
            module: None,
            op_type: "Input".into(),
            cost: OpCost::input(bytes),
            inputs: vec![],
            layer_id: None,
            is_input: true,
        });
        state.shapes.push(OpShapes {
            inputs: vec![],
            output: shape.clone(),
        });
        state.tensors.insert(
            name,
            Tensor {
                shape,
                elem_bytes,
                is_float,
                constant: false,
                ints: None,
                producer: Some(producer),
            },
        );
    }
    Ok(())
}

/// The most elements one tensor may hold: 2^53, the largest count an `f64` (in which sizes
/// and FLOPs are computed) represents exactly. No real model comes near it (the largest
/// embedding tables hold ~1e11 elements); a file that exceeds it has broken dimensions, and
/// its sizes would overflow every sum downstream.
const MAX_ELEMENTS: f64 = 9_007_199_254_740_992.0;

/// A tensor of more than [`MAX_ELEMENTS`] elements is an error naming it.
fn check_elements(what: &str, shape: &[usize]) -> Result<(), ImportError> {
    let n = numel(shape);
    if n > MAX_ELEMENTS {
        return Err(ImportError::Model(format!(
            "{what} has shape {shape:?} ({n:.3e} elements), more than 2^53: these are not the dimensions of a real model (check the file, --batch and --seq)"
        )));
    }
    Ok(())
}

/// One dimension of data input `name`: the file's value, or `batch` on axis 0 (always, when
/// given), or `seq` (default 128, with a warning) on a symbolic other axis.
fn input_dimension(name: &str, axis: usize, d: &Dimension, state: &mut ImportState) -> usize {
    let options = state.options;
    match d.dim_value {
        Some(v) if v > 0 && !(axis == 0 && options.batch.is_some()) => v as usize,
        _ if axis == 0 => options.batch.unwrap_or(1),
        _ => {
            let seq = options.seq.unwrap_or(128);
            if options.seq.is_none() {
                state.warnings.push(format!(
                    "input '{name}': dimension {axis} ('{}') is symbolic; using --seq {seq}",
                    d.dim_param.as_deref().unwrap_or("?")
                ));
            }
            seq
        }
    }
}

/// Step 3: fully known shapes from `value_info`.
fn declared_shapes(graph: &GraphProto) -> HashMap<&str, Vec<usize>> {
    graph
        .value_info
        .iter()
        .filter_map(|v| {
            let dims = &v.r#type.as_ref()?.tensor_type.as_ref()?.shape.as_ref()?.dim;
            let shape: Option<Vec<usize>> = dims
                .iter()
                .map(|d| d.dim_value.filter(|&x| x > 0).map(|x| x as usize))
                .collect();
            Some((v.name(), shape?))
        })
        .collect()
}

/// The node's name, else its first output's, else `OpType_index`.
fn display_name(node: &NodeProto, index: usize, op_type: &str) -> String {
    match node.name.as_deref() {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => node
            .output
            .first()
            .cloned()
            .unwrap_or_else(|| format!("{op_type}_{index}")),
    }
}

/// Step 4 for one node (module documentation).
fn import_node(
    index: usize,
    node: &NodeProto,
    facts: &GraphFacts,
    state: &mut ImportState,
) -> Result<(), ImportError> {
    let op_type = node.op_type.clone().unwrap_or_default();
    let display = display_name(node, index, &op_type);
    let inputs = resolve_inputs(node, &display, &op_type, &state.tensors)?;
    let attrs = Attrs(&node.attribute);
    let ctx = Ctx {
        op_type: &op_type,
        attrs: &attrs,
        inputs: &inputs,
        batch_override: facts.batch_override,
        training: state.options.training,
        e: state.e,
    };
    let all_constant = inputs.iter().flatten().all(|t| t.constant);
    let (outputs, known) = match infer(&ctx) {
        Ok(outs) => (outs, true),
        Err(reason) => {
            let fallback = fallback_shape(node, &inputs, facts);
            if !all_constant {
                state.warnings.push(format!(
                    "node '{display}': {reason}; assuming output shape {fallback:?} and a conservative cost (10 FLOPs per output element plus all inputs and outputs moved)"
                ));
            }
            (
                vec![float_tensor(fallback, state.e); node.output.len().max(1)],
                false,
            )
        }
    };
    for t in &outputs {
        check_elements(
            &format!("the output of node '{display}' ({op_type})"),
            &t.shape,
        )?;
    }
    if all_constant {
        for (name, mut t) in node.output.iter().zip(outputs) {
            t.constant = true;
            state.tensors.insert(name.clone(), t);
        }
        return Ok(());
    }
    let read = read_bytes(node, &inputs, &mut state.charged);
    let output_bytes: f64 = node
        .output
        .iter()
        .zip(&outputs)
        .filter(|(name, _)| facts.consumed.contains(name.as_str()))
        .map(|(_, t)| numel(&t.shape) * t.elem_bytes)
        .sum();
    let (mut class, flops, macs) = if known {
        work_of(&ctx, &outputs)
    } else {
        (OpClass::Vector, 10.0 * numel(&outputs[0].shape), 0.0)
    };
    // A Gather from a float initializer is an embedding lookup: its backward writes a
    // dense gradient of the table charged to it.
    let table = inputs.first().copied().flatten();
    if op_type == "Gather" && table.is_some_and(|t| t.constant && t.is_float) {
        class = OpClass::Lookup;
    }
    let cost = OpCost::from_bytes(
        class,
        flops,
        macs,
        read.input_bytes,
        read.param_bytes,
        output_bytes,
    );
    let op = Op {
        name: display,
        module: module_of(node),
        op_type,
        cost,
        inputs: read.producers,
        layer_id: None,
        is_input: false,
    };
    let id = state.ops.push(op);
    state.shapes.push(OpShapes {
        inputs: inputs.iter().map(|t| t.map(|t| t.shape.clone())).collect(),
        output: outputs.first().map(|t| t.shape.clone()).unwrap_or_default(),
    });
    for (name, mut t) in node.output.iter().zip(outputs) {
        t.producer = Some(id);
        t.constant = false;
        state.tensors.insert(name.clone(), t);
    }
    Ok(())
}

/// The node's input tensors (`None` for an omitted optional input).
fn resolve_inputs<'t>(
    node: &NodeProto,
    display: &str,
    op_type: &str,
    tensors: &'t HashMap<String, Tensor>,
) -> Result<Vec<Option<&'t Tensor>>, ImportError> {
    node.input
        .iter()
        .map(|name| {
            if name.is_empty() {
                return Ok(None);
            }
            tensors.get(name).map(Some).ok_or_else(|| {
                ImportError::Model(format!(
                    "node '{display}' ({op_type}) reads '{name}', which no earlier node, input or initializer produces"
                ))
            })
        })
        .collect()
}

/// The output shape assumed for a node we cannot infer: declared in `value_info`, else its
/// first non-constant input's, else its first input's.
fn fallback_shape(node: &NodeProto, inputs: &[Option<&Tensor>], facts: &GraphFacts) -> Vec<usize> {
    node.output
        .first()
        .and_then(|o| facts.declared.get(o.as_str()).cloned())
        .or_else(|| {
            inputs
                .iter()
                .flatten()
                .find(|t| !t.constant)
                .or(inputs.iter().flatten().next())
                .map(|t| t.shape.clone())
        })
        .unwrap_or_default()
}

/// What one operator reads.
struct ReadBytes {
    /// Activation (non-constant) bytes.
    input_bytes: f64,
    /// Float constants read here for the first time.
    param_bytes: f64,
    /// Operators producing the activations, each once, in input order.
    producers: Vec<usize>,
}

fn read_bytes(
    node: &NodeProto,
    inputs: &[Option<&Tensor>],
    charged: &mut HashSet<String>,
) -> ReadBytes {
    let mut read = ReadBytes {
        input_bytes: 0.0,
        param_bytes: 0.0,
        producers: Vec::new(),
    };
    for (name, t) in node.input.iter().zip(inputs) {
        let Some(t) = t else { continue };
        let bytes = numel(&t.shape) * t.elem_bytes;
        if t.constant {
            if t.is_float && charged.insert(name.clone()) {
                read.param_bytes += bytes;
            }
        } else {
            read.input_bytes += bytes;
            let p = t.producer.expect("a non-constant tensor has a producer");
            if !read.producers.contains(&p) {
                read.producers.push(p);
            }
        }
    }
    read
}

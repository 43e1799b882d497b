//! Shape inference: the output tensors of one ONNX node from its inputs and attributes
//! (opset-9 semantics, plus the opset-13 forms of Unsqueeze/Squeeze axes as inputs).
//!
//! [`infer`] dispatches by operator family; each family function states its rule:
//!
//! | family | operators | output shape |
//! | --- | --- | --- |
//! | elementwise | unary ([`super::work::UNARY`]), binary ([`super::work::BINARY`]) | the input's; multidirectional (numpy) broadcast of all inputs |
//! | constants | Constant, ConstantOfShape, Shape | the tensor's dims; the value of the shape input; `[rank]` |
//! | convolution and pooling | Conv, Max/Average/LpPool, Global*Pool | `(N, M, o₁, …)` with `oᵢ = ⌊(xᵢ + pᵦ + pₑ − dᵢ(kᵢ−1) − 1)/sᵢ⌋ + 1` ([`spatial_out`]); `(N, C, 1, …)` |
//! | matrix products | Gemm, MatMul | `(m, n)` after transposes; `broadcast(β_A, β_B) × m × n` |
//! | normalisation | BatchNorm, InstanceNorm, LayerNorm, LRN, (Log)Softmax, Dropout | the input's (Dropout adds a 1-byte mask) |
//! | reshaping | Flatten, Reshape, (Un)Squeeze | `(Π x[..a], Π x[a..])`; the target with `0` copied and `-1` solved; axes inserted / removed |
//! | data layout | Transpose, Concat, Gather | permuted; summed along the axis; `data[..a] ++ indices ++ data[a+1..]` |
//! | slicing | Split, Slice, Expand | the input with axis `a` cut into the given sizes (the `split` input or attribute; without one, refused); each sliced axis `⌈(end − start)/step⌉` after ONNX's clamping; the broadcast of the input and the shape input |
//! | reductions | Reduce{Mean,Sum,Max,Min} | reduced axes dropped or kept as 1 |
//!
//! Integer constants are propagated through Shape, Concat, Identity and Cast, an integer
//! ConstantOfShape fill, and Add/Sub/Mul/Div/Equal/Where over small vectors, so that Reshape
//! and Expand targets and axes computed in the graph are known. A failure is a reason (a
//! `String`), never a panic: the importer then prices the node conservatively.
//!
//! Complexity: O(r + Σ|inputs|) per node for tensors of rank r.

use super::proto::{dims_of, elem_info, tensor_ints, AttributeProto};
use super::work::{BINARY, UNARY};

/// A tensor seen so far.
#[derive(Clone, Debug)]
pub(super) struct Tensor {
    pub shape: Vec<usize>,
    /// Bytes per element.
    pub elem_bytes: f64,
    /// A floating-point tensor (parameters are float constants).
    pub is_float: bool,
    /// Computed from constants only.
    pub constant: bool,
    /// Integer value, for small integer constants (shapes, axes).
    pub ints: Option<Vec<i64>>,
    /// The operator producing it (None for constants).
    pub producer: Option<usize>,
}

/// A non-constant float tensor of `shape` with `e`-byte elements.
pub(super) fn float_tensor(shape: Vec<usize>, e: f64) -> Tensor {
    Tensor {
        shape,
        elem_bytes: e,
        is_float: true,
        constant: false,
        ints: None,
        producer: None,
    }
}

/// Attributes of one node, by name.
pub(super) struct Attrs<'a>(pub &'a [AttributeProto]);

impl Attrs<'_> {
    pub fn get(&self, name: &str) -> Option<&AttributeProto> {
        self.0.iter().find(|a| a.name.as_deref() == Some(name))
    }
    pub fn int(&self, name: &str, default: i64) -> i64 {
        self.get(name).and_then(|a| a.i).unwrap_or(default)
    }
    pub fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.get(name).map(|a| a.ints.clone())
    }
    pub fn string(&self, name: &str) -> Option<String> {
        self.get(name)
            .and_then(|a| a.s.as_ref())
            .map(|s| String::from_utf8_lossy(s).into_owned())
    }
}

/// What shape inference and costing see of one node.
pub(super) struct Ctx<'a> {
    pub op_type: &'a str,
    pub attrs: &'a Attrs<'a>,
    pub inputs: &'a [Option<&'a Tensor>],
    /// (the file's batch, the requested batch) when `--batch` changes it.
    pub batch_override: Option<(i64, usize)>,
    pub training: bool,
    /// Bytes per float element of the chosen dtype.
    pub e: f64,
}

impl Ctx<'_> {
    pub fn input(&self, i: usize) -> Result<&Tensor, String> {
        self.inputs
            .get(i)
            .copied()
            .flatten()
            .ok_or_else(|| format!("{} needs input #{i}", self.op_type))
    }
    pub fn shape(&self, i: usize) -> Result<&[usize], String> {
        Ok(&self.input(i)?.shape)
    }
    /// A non-constant tensor of `shape` with the element type of the first input.
    pub fn like(&self, shape: Vec<usize>) -> Tensor {
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

/// Output tensors of one node, or why they cannot be inferred (module documentation).
pub(super) fn infer(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
    let op = ctx.op_type;
    if UNARY.iter().any(|(n, _)| *n == op) {
        return unary(ctx);
    }
    if BINARY.contains(&op) {
        return binary(ctx);
    }
    match op {
        "Constant" | "ConstantOfShape" | "Shape" => constant(ctx),
        "Conv" => conv(ctx),
        "MaxPool" | "AveragePool" | "LpPool" => pool(ctx),
        "GlobalAveragePool" | "GlobalMaxPool" => global_pool(ctx),
        "Gemm" => gemm(ctx),
        "MatMul" => matmul(ctx),
        "BatchNormalization"
        | "InstanceNormalization"
        | "LayerNormalization"
        | "LRN"
        | "Softmax"
        | "LogSoftmax" => Ok(vec![ctx.like(ctx.shape(0)?.to_vec())]),
        "Dropout" => dropout(ctx),
        "Flatten" => flatten(ctx),
        "Reshape" => reshape(ctx),
        "Unsqueeze" => unsqueeze(ctx),
        "Squeeze" => squeeze(ctx),
        "Transpose" => transpose(ctx),
        "Concat" => concat(ctx),
        "Gather" => gather(ctx),
        "Split" => split(ctx),
        "Slice" => slice(ctx),
        "Expand" => expand(ctx),
        "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" => reduce(ctx),
        _ => Err(format!("unknown operator {op}")),
    }
}

// ---- elementwise ----

/// The input's shape; Cast changes the element type; Identity and Cast keep integer values.
fn unary(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
    let op = ctx.op_type;
    let mut t = ctx.like(ctx.shape(0)?.to_vec());
    if op == "Cast" {
        let (b, f) = elem_info(ctx.attrs.int("to", 1) as i32, ctx.e);
        t.elem_bytes = b;
        t.is_float = f;
    }
    if op == "Identity" || op == "Cast" {
        t.ints = ctx.input(0)?.ints.clone();
    }
    Ok(vec![t])
}

/// Broadcast of every present input; small integer constants (shape arithmetic) keep their
/// values ([`int_values`]).
fn binary(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
    let shapes: Vec<&[usize]> = ctx
        .inputs
        .iter()
        .flatten()
        .map(|t| t.shape.as_slice())
        .collect();
    let mut t = ctx.like(broadcast(&shapes)?);
    t.ints = int_values(ctx, &t.shape);
    Ok(vec![t])
}

/// The most elements of an integer tensor whose values are computed ([`int_values`]).
const MAX_INT_VALUES: usize = 64;

/// The values of Add, Sub, Mul, Div, Equal or Where over integer constants of rank ≤ 1 (each
/// of the output's length or 1) — the shape arithmetic exporters emit (`repeat_kv`'s
/// `Expand` target); `None` otherwise (or on a division by zero).
fn int_values(ctx: &Ctx, shape: &[usize]) -> Option<Vec<i64>> {
    let n = match shape {
        [] => 1,
        [n] if *n <= MAX_INT_VALUES => *n,
        _ => return None,
    };
    let values: Vec<&Vec<i64>> = ctx
        .inputs
        .iter()
        .flatten()
        .map(|t| t.ints.as_ref().filter(|v| v.len() == n || v.len() == 1))
        .collect::<Option<_>>()?;
    let at = |v: &Vec<i64>, i: usize| v[if v.len() == 1 { 0 } else { i }];
    (0..n)
        .map(|i| match (ctx.op_type, values.as_slice()) {
            ("Add", [a, b]) => at(a, i).checked_add(at(b, i)),
            ("Sub", [a, b]) => at(a, i).checked_sub(at(b, i)),
            ("Mul", [a, b]) => at(a, i).checked_mul(at(b, i)),
            ("Div", [a, b]) => at(a, i).checked_div(at(b, i)),
            ("Equal", [a, b]) => Some(i64::from(at(a, i) == at(b, i))),
            ("Where", [c, x, y]) => Some(if at(c, i) != 0 { at(x, i) } else { at(y, i) }),
            _ => None,
        })
        .collect()
}

/// Multidirectional (numpy) broadcasting.
pub(super) fn broadcast(shapes: &[&[usize]]) -> Result<Vec<usize>, String> {
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

// ---- constants ----

/// Constant (its tensor), ConstantOfShape (the shape input's value), Shape (`[rank]`,
/// with the input's dims as its integer value). All three are constants.
fn constant(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
    let tensor = match ctx.op_type {
        "Constant" => {
            let t = ctx
                .attrs
                .get("value")
                .and_then(|a| a.t.as_ref())
                .ok_or("Constant without a tensor value")?;
            let (elem_bytes, is_float) = elem_info(t.data_type.unwrap_or(1), ctx.e);
            Tensor {
                shape: dims_of(t)?,
                elem_bytes,
                is_float,
                constant: true,
                ints: tensor_ints(t),
                producer: None,
            }
        }
        "ConstantOfShape" => {
            let dims = ctx
                .input(0)?
                .ints
                .clone()
                .ok_or("ConstantOfShape of a shape that is not a constant")?;
            let shape: Vec<usize> = dims
                .iter()
                .map(|&d| usize::try_from(d).map_err(|_| format!("negative dimension {d}")))
                .collect::<Result<_, _>>()?;
            let dtype = ctx
                .attrs
                .get("value")
                .and_then(|a| a.t.as_ref())
                .and_then(|t| t.data_type)
                .unwrap_or(1);
            let (elem_bytes, is_float) = elem_info(dtype, ctx.e);
            // An integer fill of a small vector keeps its values (shape arithmetic).
            let fill = ctx
                .attrs
                .get("value")
                .and_then(|a| a.t.as_ref())
                .and_then(tensor_ints)
                .and_then(|v| v.first().copied());
            let ints = match (fill, shape.as_slice()) {
                (Some(v), [n]) if !is_float && *n <= MAX_INT_VALUES => Some(vec![v; *n]),
                _ => None,
            };
            Tensor {
                shape,
                elem_bytes,
                is_float,
                constant: true,
                ints,
                producer: None,
            }
        }
        _ => {
            let s = ctx.shape(0)?;
            let ints = s.iter().map(|&d| d as i64).collect();
            Tensor {
                shape: vec![s.len()],
                elem_bytes: 8.0,
                is_float: false,
                constant: true,
                ints: Some(ints),
                producer: None,
            }
        }
    };
    Ok(vec![tensor])
}

// ---- convolution and pooling ----

/// Input (N, C, x₁, …), weight (M, C/g, k₁, …) → (N, M, o₁, …).
fn conv(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
    let (x, w) = (ctx.shape(0)?, ctx.shape(1)?);
    if x.len() < 3 || w.len() != x.len() {
        return Err(format!("Conv of input {x:?} with weight {w:?}"));
    }
    let group = ctx.attrs.int("group", 1).max(1) as usize;
    if w[1] * group != x[1] {
        return Err(format!(
            "Conv weight {w:?} with {group} groups does not match input channels {}",
            x[1]
        ));
    }
    let kernel: Vec<usize> = w[2..].to_vec();
    let mut out = vec![x[0], w[0]];
    out.extend(spatial_out(ctx, x, &kernel)?);
    Ok(vec![ctx.like(out)])
}

/// (N, C, x₁, …) → (N, C, o₁, …); MaxPool also has an 8-byte index output.
fn pool(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
    let x = ctx.shape(0)?;
    let kernel: Vec<usize> = ctx
        .attrs
        .ints("kernel_shape")
        .ok_or("pooling without kernel_shape")?
        .iter()
        .map(|&k| k.max(1) as usize)
        .collect();
    // spatial_out checks the rank (2 + the kernel's) before x[0], x[1] are read.
    let spatial = spatial_out(ctx, x, &kernel)?;
    let mut out = vec![x[0], x[1]];
    out.extend(spatial);
    let mut outs = vec![ctx.like(out.clone())];
    if ctx.op_type == "MaxPool" {
        let mut idx = ctx.like(out);
        idx.elem_bytes = 8.0;
        outs.push(idx);
    }
    Ok(outs)
}

/// (N, C, x₁, …) → (N, C, 1, …).
fn global_pool(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
    let mut out = ctx.shape(0)?.to_vec();
    out.iter_mut().skip(2).for_each(|d| *d = 1);
    Ok(vec![ctx.like(out)])
}

/// Spatial output sizes of Conv and pooling: `floor((x + p_b + p_e − dil·(k−1) − 1) / s) + 1`
/// (ceil with `ceil_mode`), or `ceil(x / s)` for `SAME_*` auto padding.
pub(super) fn spatial_out(
    ctx: &Ctx,
    input: &[usize],
    kernel: &[usize],
) -> Result<Vec<usize>, String> {
    let n = kernel.len();
    if input.len() != n + 2 {
        return Err(format!(
            "{} input of rank {} with a {}-d kernel",
            ctx.op_type,
            input.len(),
            n
        ));
    }
    let strides = ctx.attrs.ints("strides").unwrap_or_else(|| vec![1; n]);
    let dilations = ctx.attrs.ints("dilations").unwrap_or_else(|| vec![1; n]);
    let pads = ctx.attrs.ints("pads").unwrap_or_else(|| vec![0; 2 * n]);
    let auto_pad = ctx
        .attrs
        .string("auto_pad")
        .unwrap_or_else(|| "NOTSET".into());
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

// ---- matrix products ----

/// A (m×k or k×m with transA) · B (k×n or n×k with transB) → (m, n).
fn gemm(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
    let (a, b) = (ctx.shape(0)?, ctx.shape(1)?);
    if a.len() != 2 || b.len() != 2 {
        return Err(format!("Gemm of {a:?} and {b:?}"));
    }
    let m = if ctx.attrs.int("transA", 0) == 1 {
        a[1]
    } else {
        a[0]
    };
    let n = if ctx.attrs.int("transB", 0) == 1 {
        b[0]
    } else {
        b[1]
    };
    Ok(vec![ctx.like(vec![m, n])])
}

/// numpy `matmul`: a 1-d operand loses its dimension, batch dimensions broadcast.
fn matmul(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
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
        return Err(format!(
            "MatMul of {a:?} and {b:?}: inner dimensions differ"
        ));
    }
    let batch_a = if a.len() > 2 {
        &a[..a.len() - 2]
    } else {
        &[][..]
    };
    let batch_b = if b.len() > 2 {
        &b[..b.len() - 2]
    } else {
        &[][..]
    };
    let mut out = broadcast(&[batch_a, batch_b])?;
    out.extend(m);
    out.extend(n);
    Ok(vec![ctx.like(out)])
}

// ---- normalisation ----

/// The input's shape, plus a 1-byte mask of the same shape.
fn dropout(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
    let x = ctx.shape(0)?.to_vec();
    let mut mask = ctx.like(x.clone());
    mask.elem_bytes = 1.0;
    mask.is_float = false;
    Ok(vec![ctx.like(x), mask])
}

// ---- reshaping ----

/// (x₀, …, x_{r−1}) → (Π x[..axis], Π x[axis..]).
fn flatten(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
    let x = ctx.shape(0)?;
    let axis = axis_index(ctx.attrs.int("axis", 1), x.len())?;
    Ok(vec![ctx.like(vec![
        x[..axis].iter().product(),
        x[axis..].iter().product(),
    ])])
}

/// The target shape (input #1, or the opset-1 `shape` attribute): `0` copies the input's
/// dimension, one `-1` takes what is left; with `--batch`, a first entry equal to the
/// file's batch is read as the batch.
fn reshape(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
    let x = ctx.shape(0)?;
    let mut target = match ctx.input(1).ok().and_then(|t| t.ints.clone()) {
        Some(t) => t,
        None => ctx
            .attrs
            .ints("shape")
            .ok_or("Reshape to a shape that is not a constant")?,
    };
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
            0 => out.push(
                *x.get(i)
                    .ok_or("Reshape copies a dimension the input lacks")?,
            ),
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

/// Axes from the attribute (opset < 13) or input #1 (opset 13).
fn squeeze_axes(ctx: &Ctx) -> Option<Vec<i64>> {
    ctx.attrs
        .ints("axes")
        .or_else(|| ctx.input(1).ok().and_then(|t| t.ints.clone()))
}

/// Inserts a 1 at every axis (axes index the output).
fn unsqueeze(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
    let x = ctx.shape(0)?;
    let axes = squeeze_axes(ctx).ok_or("Unsqueeze without axes")?;
    let rank = x.len() + axes.len();
    let mut axes: Vec<usize> = axes
        .iter()
        .map(|&a| axis_index(a, rank))
        .collect::<Result<_, _>>()?;
    axes.sort_unstable();
    let mut out = x.to_vec();
    for a in axes {
        if a > out.len() {
            return Err("Unsqueeze axis out of range".into());
        }
        out.insert(a, 1);
    }
    Ok(vec![ctx.like(out)])
}

/// Removes the given axes, or every dimension of size 1 without axes.
fn squeeze(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
    let x = ctx.shape(0)?;
    let out = match squeeze_axes(ctx) {
        Some(axes) => {
            let axes: Vec<usize> = axes
                .iter()
                .map(|&a| axis_index(a, x.len()))
                .collect::<Result<_, _>>()?;
            x.iter()
                .enumerate()
                .filter(|(i, _)| !axes.contains(i))
                .map(|(_, &d)| d)
                .collect()
        }
        None => x.iter().copied().filter(|&d| d != 1).collect(),
    };
    Ok(vec![ctx.like(out)])
}

// ---- data layout ----

/// `out[i] = x[perm[i]]`, reversed without `perm`.
fn transpose(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
    let x = ctx.shape(0)?;
    let perm: Vec<usize> = match ctx.attrs.ints("perm") {
        Some(p) => p.iter().map(|&i| i as usize).collect(),
        None => (0..x.len()).rev().collect(),
    };
    let out = perm
        .iter()
        .map(|&i| x.get(i).copied().ok_or("Transpose perm out of range"))
        .collect::<Result<_, _>>()?;
    Ok(vec![ctx.like(out)])
}

/// Sizes along `axis` add up; integer constants concatenate (shape arithmetic).
fn concat(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
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
        t.ints = Some(
            ctx.inputs
                .iter()
                .flatten()
                .flat_map(|t| t.ints.clone().unwrap_or_default())
                .collect(),
        );
    }
    Ok(vec![t])
}

/// `data[..axis] ++ indices ++ data[axis+1..]`, with the data's element type.
fn gather(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
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

/// Split along `axis` (default 0) into the sizes of the `split` input (opset 13) or
/// attribute (earlier); without them (an equal split into as many outputs as the node has)
/// the count is not known here: refused.
fn split(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
    let x = ctx.shape(0)?;
    let axis = axis_index(ctx.attrs.int("axis", 0), x.len())?;
    let sizes = match ctx.inputs.get(1).copied().flatten() {
        Some(t) => t
            .ints
            .clone()
            .ok_or("Split sizes that are not a constant")?,
        None => ctx.attrs.ints("split").ok_or("Split without sizes")?,
    };
    if axis >= x.len()
        || sizes.iter().any(|&k| k < 0)
        || sizes.iter().sum::<i64>() != x[axis] as i64
    {
        return Err(format!("Split of {x:?} along axis {axis} into {sizes:?}"));
    }
    Ok(sizes
        .iter()
        .map(|&k| {
            let mut shape = x.to_vec();
            shape[axis] = k as usize;
            let mut t = ctx.like(shape);
            t.ints = None;
            t
        })
        .collect())
}

/// Slice (opset 10: starts, ends, axes, steps as constant inputs; earlier: attributes),
/// each axis clamped as ONNX does.
fn slice(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
    let x = ctx.shape(0)?.to_vec();
    let from_input = |i: usize| -> Result<Option<Vec<i64>>, String> {
        match ctx.inputs.get(i).copied().flatten() {
            Some(t) => t
                .ints
                .clone()
                .map(Some)
                .ok_or_else(|| "Slice bounds that are not constants".into()),
            None => Ok(None),
        }
    };
    let (starts, ends, axes, steps) = if ctx.inputs.len() > 1 {
        (
            from_input(1)?,
            from_input(2)?,
            from_input(3)?,
            from_input(4)?,
        )
    } else {
        (
            ctx.attrs.ints("starts"),
            ctx.attrs.ints("ends"),
            ctx.attrs.ints("axes"),
            None,
        )
    };
    let (starts, ends) = (
        starts.ok_or("Slice without starts")?,
        ends.ok_or("Slice without ends")?,
    );
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err("Slice bounds of different lengths".into());
    }
    let mut out = x.clone();
    for (((&b, &e), &a), &step) in starts.iter().zip(&ends).zip(&axes).zip(&steps) {
        let a = axis_index(a, x.len())?;
        let d = *x.get(a).ok_or("Slice axis out of range")? as i64;
        if step == 0 {
            return Err("Slice step 0".into());
        }
        let wrap = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
        let len = if step > 0 {
            let (b, e) = (wrap(b).clamp(0, d), wrap(e).clamp(0, d));
            (e - b + step - 1).div_euclid(step).max(0)
        } else {
            let (b, e) = (wrap(b).clamp(0, d - 1), wrap(e).clamp(-1, d - 1));
            (b - e - step - 1).div_euclid(-step).max(0)
        };
        out[a] = len as usize;
    }
    Ok(vec![ctx.like(out)])
}

/// Expand: the broadcast of the input and the constant shape input.
fn expand(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
    let x = ctx.shape(0)?;
    let target: Vec<usize> = ctx
        .input(1)?
        .ints
        .as_ref()
        .ok_or("Expand to a shape that is not a constant")?
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("Expand to dimension {d}")))
        .collect::<Result<_, _>>()?;
    Ok(vec![ctx.like(broadcast(&[x, &target])?)])
}

// ---- reductions ----

/// Reduced axes (all without `axes`) dropped, or kept as 1 with `keepdims` (default).
fn reduce(ctx: &Ctx) -> Result<Vec<Tensor>, String> {
    let x = ctx.shape(0)?;
    let keep = ctx.attrs.int("keepdims", 1) == 1;
    let axes: Vec<usize> = match ctx.attrs.ints("axes") {
        Some(a) => a
            .iter()
            .map(|&a| axis_index(a, x.len()))
            .collect::<Result<_, _>>()?,
        None => (0..x.len()).collect(),
    };
    let out = x
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| {
            if axes.contains(&i) {
                keep.then_some(1)
            } else {
                Some(d)
            }
        })
        .collect();
    Ok(vec![ctx.like(out)])
}

/// A possibly negative axis of a rank-`rank` tensor as an index in `0..=rank`.
fn axis_index(axis: i64, rank: usize) -> Result<usize, String> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    if a < 0 || a as usize > rank {
        return Err(format!("axis {axis} out of range for rank {rank}"));
    }
    Ok(a as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(name: &str, v: &[i64]) -> AttributeProto {
        AttributeProto {
            name: Some(name.into()),
            ints: v.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn conv_and_pool_output_sizes() {
        let attrs = [
            ints("strides", &[2, 2]),
            ints("pads", &[3, 3, 3, 3]),
            ints("kernel_shape", &[7, 7]),
        ];
        let a = Attrs(&attrs);
        let x = float_tensor(vec![1, 3, 224, 224], 4.0);
        let inputs = [Some(&x)];
        let ctx = Ctx {
            op_type: "MaxPool",
            attrs: &a,
            inputs: &inputs,
            batch_override: None,
            training: false,
            e: 4.0,
        };
        assert_eq!(
            spatial_out(&ctx, &x.shape, &[7, 7]).unwrap(),
            vec![112, 112]
        );
        // The MaxPool's (value, index) outputs.
        let outs = infer(&ctx).unwrap();
        assert_eq!(outs.len(), 2);
        assert_eq!(
            (outs[0].shape.clone(), outs[1].elem_bytes),
            (vec![1, 3, 112, 112], 8.0)
        );
        assert_eq!(broadcast(&[&[8, 1, 3], &[4, 1]]).unwrap(), vec![8, 4, 3]);
        assert!(broadcast(&[&[2, 3], &[4, 3]]).is_err());
    }

    #[test]
    fn reshape_family_by_hand() {
        let none: [AttributeProto; 0] = [];
        let a = Attrs(&none);
        let x = float_tensor(vec![2, 3, 4, 5], 4.0);
        let mut target = float_tensor(vec![3], 4.0);
        target.ints = Some(vec![0, -1, 5]);
        let inputs = [Some(&x), Some(&target)];
        let ctx = |op| Ctx {
            op_type: op,
            attrs: &a,
            inputs: &inputs,
            batch_override: None,
            training: false,
            e: 4.0,
        };
        assert_eq!(infer(&ctx("Reshape")).unwrap()[0].shape, vec![2, 12, 5]);
        assert_eq!(infer(&ctx("Flatten")).unwrap()[0].shape, vec![2, 60]);
        assert_eq!(infer(&ctx("Transpose")).unwrap()[0].shape, vec![5, 4, 3, 2]);
        // Opset-13 Unsqueeze with axes [0, -1, 5] (input #1) on a 4-d input: rank 7.
        assert_eq!(
            infer(&ctx("Unsqueeze")).unwrap()[0].shape,
            vec![1, 2, 3, 4, 5, 1, 1]
        );
        assert!(infer(&ctx("Frobnicate"))
            .unwrap_err()
            .contains("unknown operator"));
    }

    use crate::costmodel::onnx::proto::TensorProto;

    fn int_tensor(v: &[i64]) -> Tensor {
        Tensor {
            shape: vec![v.len()],
            elem_bytes: 8.0,
            is_float: false,
            constant: true,
            ints: Some(v.to_vec()),
            producer: None,
        }
    }

    fn run(
        op: &str,
        attrs: &[AttributeProto],
        inputs: &[Option<&Tensor>],
    ) -> Result<Vec<Tensor>, String> {
        let a = Attrs(attrs);
        infer(&Ctx {
            op_type: op,
            attrs: &a,
            inputs,
            batch_override: None,
            training: false,
            e: 4.0,
        })
    }

    #[test]
    fn split_slice_expand_and_shape_arithmetic_by_hand() {
        let x = float_tensor(vec![2, 8, 48], 4.0);
        // Split along the last axis into 16 + 16 + 16 (GPT-2's Q/K/V).
        let sizes = int_tensor(&[16, 16, 16]);
        let axis = AttributeProto {
            name: Some("axis".into()),
            i: Some(-1),
            ..Default::default()
        };
        let outs = run("Split", &[axis], &[Some(&x), Some(&sizes)]).unwrap();
        assert_eq!(
            outs.iter().map(|t| t.shape.clone()).collect::<Vec<_>>(),
            vec![vec![2, 8, 16]; 3]
        );
        assert!(run("Split", &[], &[Some(&x), Some(&int_tensor(&[16, 16]))]).is_err());
        assert!(run("Split", &[], &[Some(&x)]).is_err());
        // Slice [1:7:2] on axis 1 and [-10:] on axis 2 (from 38 to the end): ⌈6/2⌉ = 3, 10.
        let (st, en, ax, sp) = (
            int_tensor(&[1, -10]),
            int_tensor(&[7, i64::MAX]),
            int_tensor(&[1, 2]),
            int_tensor(&[2, 1]),
        );
        let y = run(
            "Slice",
            &[],
            &[Some(&x), Some(&st), Some(&en), Some(&ax), Some(&sp)],
        )
        .unwrap();
        assert_eq!(y[0].shape, vec![2, 3, 10]);
        // A negative step: [6:1:-2] on axis 1 → 6, 4, 2.
        let y = run(
            "Slice",
            &[],
            &[
                Some(&x),
                Some(&int_tensor(&[6])),
                Some(&int_tensor(&[1])),
                Some(&int_tensor(&[1])),
                Some(&int_tensor(&[-2])),
            ],
        )
        .unwrap();
        assert_eq!(y[0].shape, vec![2, 3, 48]);
        // repeat_kv's target: Where(Equal(t, -1 · 1s), 1s, t) with t = [1, 2, 3, 16, 4].
        let t = int_tensor(&[1, 2, 3, 16, 4]);
        let ones = run(
            "ConstantOfShape",
            &[AttributeProto {
                name: Some("value".into()),
                t: Some(TensorProto {
                    dims: vec![1],
                    data_type: Some(7),
                    int64_data: vec![1],
                    ..Default::default()
                }),
                ..Default::default()
            }],
            &[Some(&int_tensor(&[5]))],
        )
        .unwrap()
        .remove(0);
        assert_eq!(ones.ints, Some(vec![1; 5]));
        let minus = run("Mul", &[], &[Some(&ones), Some(&int_tensor(&[-1]))])
            .unwrap()
            .remove(0);
        assert_eq!(minus.ints, Some(vec![-1; 5]));
        let eq = run("Equal", &[], &[Some(&t), Some(&minus)])
            .unwrap()
            .remove(0);
        assert_eq!(eq.ints, Some(vec![0; 5]));
        let target = run("Where", &[], &[Some(&eq), Some(&ones), Some(&t)])
            .unwrap()
            .remove(0);
        assert_eq!(target.ints, Some(vec![1, 2, 3, 16, 4]));
        let kv = float_tensor(vec![1, 2, 1, 16, 4], 4.0);
        let e = run("Expand", &[], &[Some(&kv), Some(&target)]).unwrap();
        assert_eq!(e[0].shape, vec![1, 2, 3, 16, 4]);
        // A division by zero leaves the values unknown; a float tensor has none.
        assert_eq!(
            run("Div", &[], &[Some(&t), Some(&int_tensor(&[0]))]).unwrap()[0].ints,
            None
        );
        assert_eq!(
            run("Add", &[], &[Some(&x), Some(&x)]).unwrap()[0].ints,
            None
        );
    }
}

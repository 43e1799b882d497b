//! The work of one ONNX node whose shapes are known: its class, FLOPs and MACs.
//!
//! Formulas are those of [`crate::costmodel::operators`] (`|Y|` output elements, `|X|`
//! input elements, one MAC = 2 FLOPs):
//!
//! | operators | class | FLOPs |
//! | --- | --- | --- |
//! | unary elementwise ([`UNARY`]) | vector (movement when f = 0) | `f·|Y|`, f from the table |
//! | binary elementwise ([`BINARY`]), j inputs | vector | `|Y|`; `(j−1)·|Y|` for Sum and Mean |
//! | Conv | matmul | `2·|Y|·(C/g)·Πk` (+ `|Y|` with a bias) |
//! | Gemm (m×k)·(k×n) | matmul | `2mnk` (+ `mn` with a bias) |
//! | MatMul, broadcast output `|Y| = β·m·n` | matmul | `2·|Y|·k` |
//! | Max/Average/LpPool, window w | vector | `w·|Y|` |
//! | Global*Pool, Reduce* | vector | `|X|` |
//! | BatchNorm | vector | `2|Y|` (inference), `8|Y|` (training) |
//! | Instance/LayerNorm | vector | `8|Y|` |
//! | LRN of size n | vector | `(2n + 3)·|Y|` |
//! | (Log)Softmax | vector | `5|Y|` |
//! | Dropout | vector / movement | `2|Y|` in training (mask and scale), 0 in inference |
//! | everything else inferred | movement | 0 |
//!
//! Bytes are not computed here: the importer counts them from the actual input and output
//! tensors. Complexity: O(r) per node for tensors of rank r.

use super::shapes::{Ctx, Tensor};
use crate::costmodel::operators::{self, numel, OpClass, OpCost};

/// Unary elementwise operators and their FLOPs per output element.
pub(super) const UNARY: &[(&str, f64)] = &[
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

/// Broadcasting elementwise operators (PRelu is priced as unary: [`UNARY`] is looked up
/// first).
pub(super) const BINARY: &[&str] = &[
    "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Equal", "Greater", "Less",
    "And", "Or", "Where", "PRelu",
];

/// (class, FLOPs, MACs) of a node (module documentation).
pub(super) fn work_of(ctx: &Ctx, outputs: &[Tensor]) -> (OpClass, f64, f64) {
    let op = ctx.op_type;
    let y = numel(&outputs[0].shape);
    let e = ctx.e;
    if let Some((_, f)) = UNARY.iter().find(|(n, _)| *n == op) {
        return parts(operators::elementwise(y, y, *f, 0.0, e));
    }
    if BINARY.contains(&op) {
        let j = ctx.inputs.iter().flatten().count() as f64;
        let per = if op == "Sum" || op == "Mean" {
            (j - 1.0).max(1.0)
        } else {
            1.0
        };
        return parts(operators::elementwise(y, j * y, per, 0.0, e));
    }
    match op {
        "Conv" | "Gemm" | "MatMul" => matrix_product(ctx, outputs),
        "MaxPool" | "AveragePool" | "LpPool" => {
            let window: f64 = ctx
                .attrs
                .ints("kernel_shape")
                .unwrap_or_default()
                .iter()
                .map(|&k| k as f64)
                .product();
            parts(operators::pool(
                &input_shape(ctx, 0),
                &outputs[0].shape,
                window,
                e,
            ))
        }
        "GlobalAveragePool" | "GlobalMaxPool" | "ReduceMean" | "ReduceSum" | "ReduceMax"
        | "ReduceMin" => (OpClass::Vector, numel(&input_shape(ctx, 0)), 0.0),
        "BatchNormalization" => parts(operators::normalization(y, 0.0, ctx.training, e)),
        "InstanceNormalization" | "LayerNormalization" => {
            parts(operators::normalization(y, 0.0, true, e))
        }
        "LRN" => parts(operators::lrn(y, ctx.attrs.int("size", 5) as f64, e)),
        "Softmax" | "LogSoftmax" => parts(operators::softmax(y, e)),
        // Inference dropout is the identity (data movement); training draws a mask and scales.
        "Dropout" if ctx.training => (OpClass::Vector, 2.0 * y, 0.0),
        _ => (OpClass::Movement, 0.0, 0.0),
    }
}

/// Conv, Gemm and MatMul.
fn matrix_product(ctx: &Ctx, outputs: &[Tensor]) -> (OpClass, f64, f64) {
    let has = |i: usize| ctx.inputs.get(i).copied().flatten().is_some();
    let out = &outputs[0].shape;
    match ctx.op_type {
        "Conv" => parts(operators::conv(
            &input_shape(ctx, 0),
            &input_shape(ctx, 1),
            out,
            has(2),
            ctx.e,
        )),
        "Gemm" => {
            let a = input_shape(ctx, 0);
            let k = if ctx.attrs.int("transA", 0) == 1 {
                a[0]
            } else {
                a[1]
            };
            parts(operators::matmul(1, out[0], k, out[1], has(2), true, ctx.e))
        }
        _ => {
            let k = *input_shape(ctx, 0).last().unwrap_or(&1) as f64;
            let y = numel(out);
            (OpClass::Matmul, 2.0 * y * k, y * k)
        }
    }
}

/// The shape of input `i`, which shape inference has already required to exist.
fn input_shape(ctx: &Ctx, i: usize) -> Vec<usize> {
    ctx.inputs[i]
        .expect("shape inference succeeded, so the input exists")
        .shape
        .clone()
}

fn parts(c: OpCost) -> (OpClass, f64, f64) {
    (c.class, c.flops, c.macs)
}

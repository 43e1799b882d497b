//! Per-operator FLOPs and bytes from tensor shapes, and the roofline time.
//!
//! Units: FLOPs, bytes, milliseconds. One multiply-add (MAC) is 2 FLOPs. `e` is the size
//! of one element of the chosen data type (4 for fp32/tf32, 2 for fp16/bf16); `|T|` is the
//! number of elements of tensor `T`.
//!
//! **Time** of an operator with `F` FLOPs moving `B` bytes on a device (the roofline):
//!
//! ```text
//! t_ms = 1e3 · max( F / (peak · compute_efficiency), B / (bandwidth · memory_efficiency) )
//!        + launch_overhead_ms
//! ```
//!
//! where `peak` is the dtype's tensor peak for matrix products ([`OpClass::Matmul`]: Conv,
//! MatMul, Gemm) and the fp32 peak for everything else. An operator with no work at all
//! (`F = B = 0`, such as a graph input) takes 0 ms.
//!
//! **Bytes moved** `B` = every input read once + every parameter read once + every output
//! written once (no cache reuse between operators; perfect reuse inside one).
//!
//! FLOPs by operator (formulas repeated next to each function):
//!
//! | operator | FLOPs |
//! | --- | --- |
//! | Conv (N, C, H, W) → (N, M, OH, OW), kernel kh×kw, groups g | `2·N·M·OH·OW·(C/g)·kh·kw` (+ `N·M·OH·OW` with a bias) |
//! | MatMul / Gemm, batch β, (m×k)·(k×n) | `2·β·m·n·k` (+ `β·m·n` with a bias) |
//! | elementwise (Relu, Add, Mul, Sum of j inputs, …) | `f · |Y|`, f = FLOPs per element (1 for Relu/Add/Mul, j−1 for Sum, 8 for GELU/tanh-like) |
//! | BatchNorm (inference) | `2·|Y|` (scale and shift with running statistics) |
//! | BatchNorm (training), LayerNorm | `8·|Y|` (mean 1, variance 3, normalise 2, affine 2) |
//! | Softmax | `5·|Y|` (max, subtract, exp, sum, divide) |
//! | MaxPool / AveragePool kh×kw | `kh·kw·|Y|` |
//! | GlobalAveragePool | `|X|` |
//! | LRN of size n | `(2n + 3)·|Y|` (n squares and adds, scale, power, divide) |
//! | Reshape, Flatten, Transpose, Concat, Squeeze, Unsqueeze, Dropout (inference), Gather | 0 (pure data movement) |

use super::profiles::DeviceProfile;

/// The data type of activations and parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    Fp32,
    /// fp32 storage, tf32 tensor-core matrix products.
    Tf32,
    Fp16,
    Bf16,
}

impl DType {
    /// Bytes per element.
    pub fn bytes(self) -> f64 {
        match self {
            DType::Fp32 | DType::Tf32 => 4.0,
            DType::Fp16 | DType::Bf16 => 2.0,
        }
    }

    /// Parses `fp32`, `tf32`, `fp16`, `bf16`.
    pub fn parse(text: &str) -> Result<DType, String> {
        match text.to_ascii_lowercase().as_str() {
            "fp32" | "float32" | "float" => Ok(DType::Fp32),
            "tf32" => Ok(DType::Tf32),
            "fp16" | "float16" | "half" => Ok(DType::Fp16),
            "bf16" | "bfloat16" => Ok(DType::Bf16),
            _ => Err(format!(
                "unknown dtype '{text}' (use fp32, tf32, fp16 or bf16)"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::Fp32 => "fp32",
            DType::Tf32 => "tf32",
            DType::Fp16 => "fp16",
            DType::Bf16 => "bf16",
        }
    }
}

/// Which peak an operator's FLOPs run at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpClass {
    /// Matrix products (Conv, MatMul, Gemm): the dtype's tensor-core peak.
    Matmul,
    /// Everything else that computes: the fp32 (vector) peak.
    Vector,
    /// Pure data movement: no FLOPs.
    Movement,
    /// A row lookup in a parameter table (an embedding, an ONNX `Gather` from a float
    /// initializer): data movement forward, but its backward writes a dense gradient of the
    /// whole table ([`crate::costmodel::training`]).
    Lookup,
}

/// The work of one operator.
#[derive(Clone, Debug, PartialEq)]
pub struct OpCost {
    pub class: OpClass,
    /// Floating-point operations.
    pub flops: f64,
    /// Multiply-adds of matrix products (0 for other operators); `flops ≥ 2·macs`.
    pub macs: f64,
    /// Bytes read and written (inputs + parameters + outputs).
    pub bytes_moved: f64,
    /// Parameter (weight) bytes.
    pub param_bytes: f64,
    /// Bytes of the operator's outputs.
    pub output_bytes: f64,
    /// Bytes of the operator's activation (non-parameter) inputs.
    pub input_bytes: f64,
}

impl OpCost {
    /// An operator reading `inputs` activation elements and `params` parameter elements,
    /// writing `outputs` elements, with `flops` FLOPs and `macs` MACs.
    pub fn new(
        class: OpClass,
        flops: f64,
        macs: f64,
        inputs: f64,
        params: f64,
        outputs: f64,
        e: f64,
    ) -> OpCost {
        OpCost::from_bytes(class, flops, macs, inputs * e, params * e, outputs * e)
    }

    /// The same with byte counts (tensors of mixed element types).
    pub fn from_bytes(
        class: OpClass,
        flops: f64,
        macs: f64,
        input_bytes: f64,
        param_bytes: f64,
        output_bytes: f64,
    ) -> OpCost {
        OpCost {
            class,
            flops,
            macs,
            bytes_moved: input_bytes + param_bytes + output_bytes,
            param_bytes,
            output_bytes,
            input_bytes,
        }
    }

    /// A graph input: no work; its output of `output_bytes` leaves it.
    pub fn input(output_bytes: f64) -> OpCost {
        OpCost {
            class: OpClass::Movement,
            flops: 0.0,
            macs: 0.0,
            bytes_moved: 0.0,
            param_bytes: 0.0,
            output_bytes,
            input_bytes: 0.0,
        }
    }

    /// The roofline time on `device` in milliseconds (module documentation).
    pub fn time_ms(&self, device: &DeviceProfile, dtype: DType) -> f64 {
        if self.flops == 0.0 && self.bytes_moved == 0.0 {
            return 0.0;
        }
        self.compute_ms(device, dtype).max(self.memory_ms(device)) + device.launch_overhead_ms
    }

    /// The compute side of the roofline, `1e3 · F / (peak · compute_efficiency)` ms.
    pub fn compute_ms(&self, device: &DeviceProfile, dtype: DType) -> f64 {
        let peak = match (self.class, dtype) {
            (OpClass::Matmul, DType::Fp32) => device.peak_fp32_flops,
            (OpClass::Matmul, DType::Tf32) => device.peak_tf32_flops,
            (OpClass::Matmul, DType::Fp16 | DType::Bf16) => device.peak_fp16_flops,
            _ => device.peak_fp32_flops,
        };
        1e3 * (self.flops / (peak * device.compute_efficiency))
    }

    /// The memory side of the roofline, `1e3 · B / (bandwidth · memory_efficiency)` ms.
    pub fn memory_ms(&self, device: &DeviceProfile) -> f64 {
        1e3 * (self.bytes_moved / (device.memory_bandwidth_bytes_per_s * device.memory_efficiency))
    }
}

/// Number of elements of a shape.
pub fn numel(shape: &[usize]) -> f64 {
    shape.iter().map(|&d| d as f64).product()
}

/// Conv: input (N, C, ...), weight (M, C/g, k1, k2, ...), output (N, M, o1, o2, ...).
///
/// `MACs = |Y| · (C/g) · Π k_i`, `FLOPs = 2·MACs (+ |Y| with a bias)`. Parameters:
/// `|W| (+ M)`.
pub fn conv(input: &[usize], weight: &[usize], output: &[usize], bias: bool, e: f64) -> OpCost {
    let per_output: f64 = weight.iter().skip(1).map(|&d| d as f64).product();
    let y = numel(output);
    let macs = y * per_output;
    let params = numel(weight) + if bias { weight[0] as f64 } else { 0.0 };
    let flops = 2.0 * macs + if bias { y } else { 0.0 };
    OpCost::new(OpClass::Matmul, flops, macs, numel(input), params, y, e)
}

/// A batch of `batch` matrix products (m×k)·(k×n), optional bias of n.
///
/// `MACs = β·m·n·k`, `FLOPs = 2·MACs (+ β·m·n with a bias)`. When `weight_is_param`, the
/// (k×n) operand is a parameter (a linear layer: read once, counted in `size`); otherwise both
/// operands are activations (attention scores and context).
pub fn matmul(
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
    bias: bool,
    weight_is_param: bool,
    e: f64,
) -> OpCost {
    let (b, m, k, n) = (batch as f64, m as f64, k as f64, n as f64);
    let macs = b * m * n * k;
    let flops = 2.0 * macs + if bias { b * m * n } else { 0.0 };
    let bias_params = if bias { n } else { 0.0 };
    let (inputs, params) = if weight_is_param {
        (b * m * k, k * n + bias_params)
    } else {
        (b * m * k + b * k * n, bias_params)
    };
    OpCost::new(OpClass::Matmul, flops, macs, inputs, params, b * m * n, e)
}

/// An elementwise operator writing `elements` output elements from `inputs` input elements
/// (all operands together), `flops_per_element` FLOPs per output element: `FLOPs = f·|Y|`.
/// `params` parameter elements are read too (a constant operand).
pub fn elementwise(
    elements: f64,
    inputs: f64,
    flops_per_element: f64,
    params: f64,
    e: f64,
) -> OpCost {
    let class = if flops_per_element > 0.0 {
        OpClass::Vector
    } else {
        OpClass::Movement
    };
    OpCost::new(
        class,
        flops_per_element * elements,
        0.0,
        inputs,
        params,
        elements,
        e,
    )
}

/// Normalisation over `elements` elements with `params` affine parameters:
/// `FLOPs = 8·|Y|` (LayerNorm, training BatchNorm) or `2·|Y|` (inference BatchNorm).
pub fn normalization(elements: f64, params: f64, with_statistics: bool, e: f64) -> OpCost {
    let f = if with_statistics { 8.0 } else { 2.0 };
    OpCost::new(
        OpClass::Vector,
        f * elements,
        0.0,
        elements,
        params,
        elements,
        e,
    )
}

/// Softmax over `elements` elements: `FLOPs = 5·|Y|`.
pub fn softmax(elements: f64, e: f64) -> OpCost {
    OpCost::new(
        OpClass::Vector,
        5.0 * elements,
        0.0,
        elements,
        0.0,
        elements,
        e,
    )
}

/// Max or average pooling with a window of `window` elements: `FLOPs = window·|Y|`.
pub fn pool(input: &[usize], output: &[usize], window: f64, e: f64) -> OpCost {
    let y = numel(output);
    OpCost::new(OpClass::Vector, window * y, 0.0, numel(input), 0.0, y, e)
}

/// Local response normalisation across `size` channels: `FLOPs = (2·size + 3)·|Y|`.
pub fn lrn(elements: f64, size: f64, e: f64) -> OpCost {
    OpCost::new(
        OpClass::Vector,
        (2.0 * size + 3.0) * elements,
        0.0,
        elements,
        0.0,
        elements,
        e,
    )
}

/// Pure data movement: read `inputs` elements, write `outputs` elements, no FLOPs
/// (Reshape, Flatten, Transpose, Concat, Squeeze, Unsqueeze, inference Dropout, Gather).
pub fn movement(inputs: f64, outputs: f64, params: f64, e: f64) -> OpCost {
    OpCost::new(OpClass::Movement, 0.0, 0.0, inputs, params, outputs, e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::costmodel::profiles::find_profile;

    #[test]
    fn conv_3x3_by_hand() {
        // 1×64×56×56 → 1×64×56×56, 3×3, pad 1: 56·56·64 outputs × 64·9 MACs each.
        let c = conv(
            &[1, 64, 56, 56],
            &[64, 64, 3, 3],
            &[1, 64, 56, 56],
            false,
            4.0,
        );
        assert_eq!(c.macs, 115_605_504.0); // 200704 × 576
        assert_eq!(c.flops, 231_211_008.0);
        assert_eq!(c.param_bytes, 36_864.0 * 4.0);
        assert_eq!(c.bytes_moved, (200_704.0 * 2.0 + 36_864.0) * 4.0);
        // Grouped (depthwise) with a bias: 1×32×10×10, 32 groups, 3×3.
        let d = conv(
            &[1, 32, 10, 10],
            &[32, 1, 3, 3],
            &[1, 32, 10, 10],
            true,
            2.0,
        );
        assert_eq!(d.macs, 3200.0 * 9.0);
        assert_eq!(d.flops, 2.0 * 28_800.0 + 3200.0);
        assert_eq!(d.param_bytes, (288.0 + 32.0) * 2.0);
    }

    #[test]
    fn gemm_by_hand() {
        // (8×4096)·(4096×1000) + bias.
        let g = matmul(1, 8, 4096, 1000, true, true, 4.0);
        assert_eq!(g.macs, 32_768_000.0);
        assert_eq!(g.flops, 65_536_000.0 + 8000.0);
        assert_eq!(g.param_bytes, (4_096_000.0 + 1000.0) * 4.0);
        assert_eq!(g.output_bytes, 32_000.0);
        // Activation × activation: both operands are inputs, no parameters.
        let s = matmul(12, 512, 64, 512, false, false, 2.0);
        assert_eq!(s.flops, 2.0 * 12.0 * 512.0 * 512.0 * 64.0);
        assert_eq!(s.param_bytes, 0.0);
        assert_eq!(s.input_bytes, 2.0 * 12.0 * 512.0 * 64.0 * 2.0);
    }

    #[test]
    fn roofline_picks_the_binding_limit() {
        let a100 = find_profile("a100-80gb", &[]).unwrap();
        // A big fp16 GEMM is compute-bound: 2·4096³ FLOPs at 312e12·0.6.
        let g = matmul(1, 4096, 4096, 4096, false, true, 2.0);
        let expected = 1e3 * g.flops / (312e12 * 0.6) + 0.005;
        assert!((g.time_ms(&a100, DType::Fp16) - expected).abs() < 1e-12);
        // The same GEMM in fp32 runs at the fp32 peak: ~16x slower.
        assert!(g.time_ms(&a100, DType::Fp32) > 15.0 * g.time_ms(&a100, DType::Fp16));
        // Relu is memory-bound.
        let r = elementwise(1e8, 1e8, 1.0, 0.0, 4.0);
        let expected = 1e3 * 8e8 / (2039e9 * 0.8) + 0.005;
        assert!((r.time_ms(&a100, DType::Fp32) - expected).abs() < 1e-12);
        assert_eq!(
            movement(0.0, 0.0, 0.0, 4.0).time_ms(&a100, DType::Fp32),
            0.0
        );
    }
}

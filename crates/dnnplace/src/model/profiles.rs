//! Device profiles: the handful of datasheet numbers the roofline model needs.
//!
//! A profile is one accelerator (or one CPU core) described by
//! - peak dense FLOP/s per data type — `peak_fp32_flops`, `peak_tf32_flops`,
//!   `peak_fp16_flops` (fp16 and bf16 share one number on every listed part). Tensor-core
//!   peaks apply to matrix products (Conv, MatMul, Gemm) only; every other operator runs at
//!   `peak_fp32_flops` whatever the data type (see [`crate::costmodel::operators`]);
//! - `memory_bandwidth_bytes_per_s` and `memory_bytes` of the device's own memory;
//! - `host_link_bytes_per_s`: one direction of the host link (PCIe), the rate at which an
//!   operator's output moves between the device and host memory — the edge cost `c(u)`;
//! - `device_link_bytes_per_s`: one direction of the device-to-device link (NVLink): the
//!   default peer link of a cluster machine holding this profile
//!   ([`crate::io::cluster_resolve`]); MODEL.md itself routes all traffic through host memory;
//! - `price_per_hour`: what one device costs to rent per hour (optional, default 0), for
//!   the cheapest-cluster search; the built-ins carry AWS on-demand list prices;
//! - three modelling assumptions that are not datasheet numbers: `compute_efficiency` and
//!   `memory_efficiency` (the fraction of peak a real kernel reaches), and
//!   `launch_overhead_ms` (a fixed cost per operator: kernel launch / dispatch).
//!
//! Custom profiles are TOML files ([`DeviceProfile::from_toml`]; read from disk by
//! [`crate::io::profile_file`]) with exactly these keys (all numbers in base SI units:
//! FLOP/s, bytes/s, bytes; the overhead in milliseconds):
//!
//! ```toml
//! name = "my-gpu"
//! description = "a hypothetical accelerator"
//! peak_fp32_flops = 19.5e12
//! peak_tf32_flops = 156e12
//! peak_fp16_flops = 312e12
//! memory_bandwidth_bytes_per_s = 2.0e12
//! memory_bytes = 85899345920
//! host_link_bytes_per_s = 32e9
//! device_link_bytes_per_s = 300e9
//! price_per_hour = 4.10
//! compute_efficiency = 0.6
//! memory_efficiency = 0.8
//! launch_overhead_ms = 0.005
//! ```

use serde::{Deserialize, Serialize};

/// One device's numbers. See the module documentation for each field's meaning and unit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceProfile {
    /// Short name used on the command line (`a100-80gb`).
    pub name: String,
    /// One line for `dnnplace devices`.
    #[serde(default)]
    pub description: String,
    /// Peak dense fp32 FLOP/s (non-tensor-core).
    pub peak_fp32_flops: f64,
    /// Peak dense tf32 FLOP/s (tensor cores); equal to fp32 on parts without tf32.
    pub peak_tf32_flops: f64,
    /// Peak dense fp16/bf16 FLOP/s (tensor cores).
    pub peak_fp16_flops: f64,
    /// Device memory bandwidth, bytes/s.
    pub memory_bandwidth_bytes_per_s: f64,
    /// Device memory, bytes (the workload's `maxSizePerFPGA`).
    pub memory_bytes: f64,
    /// Host link (PCIe), one direction, bytes/s.
    pub host_link_bytes_per_s: f64,
    /// Device-to-device link (NVLink), one direction, bytes/s.
    pub device_link_bytes_per_s: f64,
    /// Price of one device per hour. [default: 0]
    #[serde(default)]
    pub price_per_hour: f64,
    /// Fraction of peak FLOP/s a kernel reaches. [default: 0.6] [range: (0, 1]]
    #[serde(default = "default_compute_efficiency")]
    pub compute_efficiency: f64,
    /// Fraction of peak bandwidth a kernel reaches. [default: 0.8] [range: (0, 1]]
    #[serde(default = "default_memory_efficiency")]
    pub memory_efficiency: f64,
    /// Fixed cost per operator, milliseconds. [default: 0.005]
    #[serde(default = "default_launch_overhead_ms")]
    pub launch_overhead_ms: f64,
}

fn default_compute_efficiency() -> f64 {
    0.6
}
fn default_memory_efficiency() -> f64 {
    0.8
}
fn default_launch_overhead_ms() -> f64 {
    0.005
}

/// Errors of reading or checking a profile.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("device profile '{name}': {field} is {value}; it must be a finite number > 0{extra}")]
    BadNumber {
        name: String,
        field: &'static str,
        value: f64,
        extra: &'static str,
    },
    #[error("unknown device '{name}'; known: {known}")]
    Unknown { name: String, known: String },
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// GPU assumptions shared by the built-in accelerator profiles (not datasheet numbers):
/// a well-tuned GEMM reaches ~60% of peak, a streaming kernel ~80% of peak bandwidth, and
/// launching a kernel costs ~5 µs.
fn gpu(
    name: &str,
    description: &str,
    flops: [f64; 3],
    bandwidth: f64,
    memory: f64,
    host: f64,
    device: f64,
) -> DeviceProfile {
    DeviceProfile {
        name: name.into(),
        description: description.into(),
        peak_fp32_flops: flops[0],
        peak_tf32_flops: flops[1],
        peak_fp16_flops: flops[2],
        memory_bandwidth_bytes_per_s: bandwidth,
        memory_bytes: memory,
        host_link_bytes_per_s: host,
        device_link_bytes_per_s: device,
        price_per_hour: 0.0,
        compute_efficiency: default_compute_efficiency(),
        memory_efficiency: default_memory_efficiency(),
        launch_overhead_ms: default_launch_overhead_ms(),
    }
}

/// The built-in profiles: V100, A100-40GB, A100-80GB, H100 (SXM) and one CPU core.
///
/// Prices per accelerator-hour are AWS on-demand list prices (us-east-1) of the 8-GPU
/// instance divided by 8: p3.16xlarge (8 × V100 16GB) $24.48, p4d.24xlarge (8 × A100 40GB)
/// $32.77, p4de.24xlarge (8 × A100 80GB) $40.96, p5.48xlarge (8 × H100) $98.32. They include
/// the host (CPU cores, memory, network), so a CPU core costs nothing extra.
pub fn builtin_profiles() -> Vec<DeviceProfile> {
    vec![
        // NVIDIA Tesla V100 datasheet (SXM2): 15.7 TFLOPS fp32 (no tf32, so the fp32 number),
        // 125 TFLOPS tensor (fp16); 900 GB/s HBM2; 16 GB (the profiled workloads' 16 GiB);
        // PCIe Gen3 x16: 15.75 GB/s per direction; NVLink 2: 300 GB/s total = 150 GB/s per direction.
        gpu(
            "v100",
            "NVIDIA V100 SXM2 16GB",
            [15.7e12, 15.7e12, 125e12],
            900e9,
            16.0 * GIB,
            15.75e9,
            150e9,
        )
        .priced(3.06),
        // NVIDIA A100 datasheet (SXM, 40GB): 19.5 TFLOPS fp32, 156 TFLOPS tf32, 312 TFLOPS
        // fp16/bf16 (dense, without sparsity); 1,555 GB/s HBM2; PCIe Gen4 x16: 31.5 GB/s per
        // direction; NVLink 3: 600 GB/s total = 300 GB/s per direction.
        gpu(
            "a100-40gb",
            "NVIDIA A100 SXM 40GB",
            [19.5e12, 156e12, 312e12],
            1555e9,
            40.0 * GIB,
            31.5e9,
            300e9,
        )
        .priced(4.10),
        // NVIDIA A100 datasheet (SXM, 80GB): compute as the 40GB part; 2,039 GB/s HBM2e.
        gpu(
            "a100-80gb",
            "NVIDIA A100 SXM 80GB",
            [19.5e12, 156e12, 312e12],
            2039e9,
            80.0 * GIB,
            31.5e9,
            300e9,
        )
        .priced(5.12),
        // NVIDIA H100 datasheet (SXM5): 67 TFLOPS fp32, 494.7 TFLOPS tf32 and 989.4 TFLOPS
        // fp16/bf16 (dense: half the "with sparsity" 989/1,979); 3.35 TB/s HBM3; 80 GB;
        // PCIe Gen5 x16: 63 GB/s per direction; NVLink 4: 900 GB/s total = 450 GB/s per direction.
        gpu(
            "h100",
            "NVIDIA H100 SXM5 80GB",
            [67e12, 494.7e12, 989.4e12],
            3.35e12,
            80.0 * GIB,
            63e9,
            450e9,
        )
        .priced(12.29),
        // One core of an Intel Xeon Platinum 8380 (Ice Lake SP, Intel ARK): 2.3 GHz base ×
        // 2 AVX-512 FMA units × 16 fp32 lanes × 2 FLOP/FMA = 147.2 GFLOP/s fp32; no tf32/fp16
        // matrix units (fp16 runs at the fp32 rate); 8 channels DDR4-3200 = 204.8 GB/s per
        // socket shared by 40 cores = 5.12 GB/s per core; memory: not limited by the model
        // (MODEL.md: CPUs have no memory limit), 256 GiB listed; host link: the data is
        // already in host memory, so memory bandwidth is listed. Kernels on a CPU core reach
        // ~50% of peak; dispatching an operator costs ~1 µs.
        DeviceProfile {
            name: "cpu-core".into(),
            description: "one core of an Intel Xeon Platinum 8380 (AVX-512)".into(),
            peak_fp32_flops: 147.2e9,
            peak_tf32_flops: 147.2e9,
            peak_fp16_flops: 147.2e9,
            memory_bandwidth_bytes_per_s: 5.12e9,
            memory_bytes: 256.0 * GIB,
            host_link_bytes_per_s: 5.12e9,
            device_link_bytes_per_s: 5.12e9,
            price_per_hour: 0.0,
            compute_efficiency: 0.5,
            memory_efficiency: 0.8,
            launch_overhead_ms: 0.001,
        },
    ]
}

impl DeviceProfile {
    /// The same profile with a price per hour.
    pub fn priced(mut self, price_per_hour: f64) -> DeviceProfile {
        self.price_per_hour = price_per_hour;
        self
    }

    /// Checks that every number is finite and positive and the efficiencies are in (0, 1].
    pub fn validate(&self) -> Result<(), ProfileError> {
        let fields: [(&'static str, f64); 8] = [
            ("peak_fp32_flops", self.peak_fp32_flops),
            ("peak_tf32_flops", self.peak_tf32_flops),
            ("peak_fp16_flops", self.peak_fp16_flops),
            (
                "memory_bandwidth_bytes_per_s",
                self.memory_bandwidth_bytes_per_s,
            ),
            ("memory_bytes", self.memory_bytes),
            ("host_link_bytes_per_s", self.host_link_bytes_per_s),
            ("device_link_bytes_per_s", self.device_link_bytes_per_s),
            ("compute_efficiency", self.compute_efficiency),
        ];
        let bad = |field, value, extra| ProfileError::BadNumber {
            name: self.name.clone(),
            field,
            value,
            extra,
        };
        for (field, value) in fields
            .into_iter()
            .chain([("memory_efficiency", self.memory_efficiency)])
        {
            if !(value.is_finite() && value > 0.0) {
                return Err(bad(field, value, ""));
            }
        }
        for (field, value) in [
            ("compute_efficiency", self.compute_efficiency),
            ("memory_efficiency", self.memory_efficiency),
        ] {
            if value > 1.0 {
                return Err(bad(field, value, " and at most 1"));
            }
        }
        if !(self.launch_overhead_ms.is_finite() && self.launch_overhead_ms >= 0.0) {
            return Err(bad(
                "launch_overhead_ms",
                self.launch_overhead_ms,
                " (or 0)",
            ));
        }
        if !(self.price_per_hour.is_finite() && self.price_per_hour >= 0.0) {
            return Err(bad("price_per_hour", self.price_per_hour, " (or 0)"));
        }
        Ok(())
    }

    /// Speed relative to the paper's V100 ([`crate::model::cluster::speed_relative_to_v100`]):
    /// how much faster than a published workload's `fpgaLatency` a node runs on this device
    /// when the workload has no time of its own for it.
    pub fn speed(&self) -> f64 {
        super::cluster::speed_relative_to_v100(
            self.peak_fp32_flops,
            self.memory_bandwidth_bytes_per_s,
        )
    }

    /// Parses and validates a TOML profile (format in the module documentation).
    pub fn from_toml(text: &str) -> Result<Self, String> {
        let p: DeviceProfile = toml::from_str(text).map_err(|e| e.to_string())?;
        p.validate().map_err(|e| e.to_string())?;
        Ok(p)
    }

    /// Serialises as TOML (the same format [`DeviceProfile::from_toml`] reads).
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a profile serialises")
    }
}

/// Finds a profile by name (case-insensitive) among `extra` (loaded files, searched first)
/// and the built-ins.
pub fn find_profile(name: &str, extra: &[DeviceProfile]) -> Result<DeviceProfile, ProfileError> {
    let all: Vec<DeviceProfile> = extra.iter().cloned().chain(builtin_profiles()).collect();
    all.iter()
        .find(|p| p.name.eq_ignore_ascii_case(name))
        .cloned()
        .ok_or_else(|| ProfileError::Unknown {
            name: name.into(),
            known: all
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_valid_and_named_uniquely() {
        let all = builtin_profiles();
        for p in &all {
            p.validate().unwrap();
        }
        let mut names: Vec<_> = all.iter().map(|p| p.name.clone()).collect();
        names.dedup();
        assert_eq!(names.len(), all.len());
        assert_eq!(
            find_profile("A100-80GB", &[]).unwrap().memory_bytes,
            80.0 * GIB
        );
        assert!(find_profile("tpu-v9", &[]).is_err());
    }

    #[test]
    fn toml_round_trip_and_defaults() {
        let h100 = find_profile("h100", &[]).unwrap();
        assert_eq!(DeviceProfile::from_toml(&h100.to_toml()).unwrap(), h100);
        let text = "name = \"x\"\npeak_fp32_flops = 1e12\npeak_tf32_flops = 1e12\npeak_fp16_flops = 2e12\n\
                    memory_bandwidth_bytes_per_s = 1e11\nmemory_bytes = 1e9\nhost_link_bytes_per_s = 1e10\n\
                    device_link_bytes_per_s = 1e10\n";
        let p = DeviceProfile::from_toml(text).unwrap();
        assert_eq!(p.compute_efficiency, 0.6);
        assert!(DeviceProfile::from_toml(&text.replace("1e11", "-1"))
            .unwrap_err()
            .contains("memory_bandwidth"));
        assert!(DeviceProfile::from_toml(&format!("{text}speed = 3\n")).is_err());
    }
}

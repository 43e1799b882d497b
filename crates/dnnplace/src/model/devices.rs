//! The device set: k accelerators with `memory_per_accelerator_bytes` each, and ℓ CPU cores;
//! byte counts as people write them ([`parse_bytes`], [`human_bytes`]).
//!
//! CPUs have no memory limit (MODEL.md). Not every device has to be used.

use super::workload::WorkloadError;

/// k accelerators with a memory limit each, and ℓ CPU cores.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceSet {
    /// k (`maxFPGAs`).
    pub accelerators: usize,
    /// Memory of one accelerator (`maxSizePerFPGA`), bytes.
    pub memory_per_accelerator_bytes: f64,
    /// ℓ (`maxCPUs`).
    pub cpus: usize,
}

impl DeviceSet {
    /// The same device set for a graph of `nodes` nodes: a placement puts every node on one
    /// device, so more than `nodes` accelerators (or CPUs) is the same as `nodes`.
    pub fn clamped_to(&self, nodes: usize) -> DeviceSet {
        DeviceSet {
            accelerators: self.accelerators.min(nodes),
            cpus: self.cpus.min(nodes),
            ..self.clone()
        }
    }

    pub(crate) fn validate(&self) -> Result<(), WorkloadError> {
        let m = self.memory_per_accelerator_bytes;
        if !(m.is_finite() && m >= 0.0) {
            return Err(WorkloadError::BadNumber {
                what: "the device set".into(),
                field: "maxSizePerFPGA",
                value: m,
            });
        }
        Ok(())
    }
}

/// One device of a placement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    Accelerator(usize),
    Cpu(usize),
}

impl Device {
    pub fn is_accelerator(self) -> bool {
        matches!(self, Device::Accelerator(_))
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Device::Accelerator(i) => write!(f, "acc{i}"),
            Device::Cpu(i) => write!(f, "cpu{i}"),
        }
    }
}

/// Parses a byte count: a plain number (`17185374208`, `1e9`) or a number with a unit
/// (`16GiB`, `16 GB`, `512MiB`, `80G` = GiB). Units: B, KB/MB/GB/TB (powers of 1000),
/// KiB/MiB/GiB/TiB and K/M/G/T (powers of 1024).
pub fn parse_bytes(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (number, unit) = (t[..split].trim(), t[split..].trim());
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a byte count (try 16GiB or 17179869184)"))?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0f64.powi(4),
        other => {
            return Err(format!(
                "unknown byte unit '{other}' in '{text}' (use B, KB, MB, GB, KiB, MiB, GiB, TiB)"
            ))
        }
    };
    let bytes = value * scale;
    if !(bytes.is_finite() && bytes >= 0.0) {
        return Err(format!("'{text}' is not a non-negative byte count"));
    }
    Ok(bytes)
}

/// Formats a byte count with a binary unit (`512 B`, `1.50 KiB`, … `2.00 TiB`): the inverse
/// of [`parse_bytes`] up to rounding.
pub fn human_bytes(bytes: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} B")
    } else {
        format!("{v:.2} {}", units[u])
    }
}

#[cfg(test)]
mod tests {
    use super::{human_bytes, parse_bytes};

    #[test]
    fn human_bytes_reads_back() {
        assert_eq!(human_bytes(512.0), "512 B");
        assert_eq!(human_bytes(16.0 * 1024.0 * 1024.0 * 1024.0), "16.00 GiB");
        for text in ["1.50 KiB", "600.00 MiB", "2.00 TiB"] {
            assert_eq!(human_bytes(parse_bytes(text).unwrap()), text);
        }
    }

    #[test]
    fn byte_units() {
        assert_eq!(parse_bytes("16GiB").unwrap(), 17179869184.0);
        assert_eq!(parse_bytes("16 GB").unwrap(), 16e9);
        assert_eq!(parse_bytes("1024").unwrap(), 1024.0);
        assert_eq!(parse_bytes("2k").unwrap(), 2048.0);
        assert!(parse_bytes("16 parsecs").is_err());
        assert!(parse_bytes("-3GB").is_err());
    }
}

//! Validity of a placement: device counts, colour classes, accelerator support, memory.
//! Contiguity is checked separately ([`super::contiguity`]) because only some methods
//! promise it.

use std::collections::HashMap;

use crate::model::numerics::Sum;
use crate::model::{Device, Placement, Workload};

/// One broken rule of MODEL.md's "Placement", naming the node or device.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Violation {
    #[error("the placement has {got} entries for a workload of {expected} nodes")]
    WrongLength { expected: usize, got: usize },
    #[error("node {node} is on {device}, but the device set has only {available} of that kind")]
    NoSuchDevice {
        node: i64,
        device: Device,
        available: usize,
    },
    #[error("colour class {class} is split: node {a} on {da}, node {b} on {db}")]
    ColorClassSplit {
        class: i64,
        a: i64,
        da: Device,
        b: i64,
        db: Device,
    },
    #[error("node {node} is not supported on an accelerator but is on {device}")]
    Unsupported { node: i64, device: Device },
    #[error("{device} holds {used} bytes, more than its {limit} bytes")]
    Memory {
        device: Device,
        used: f64,
        limit: f64,
    },
    #[error("{device}'s nodes are not contiguous: {witness}")]
    NotContiguous { device: Device, witness: String },
    #[error("{device} holds {pieces} contiguous pieces, more than the {limit} allowed")]
    TooManyPieces {
        device: Device,
        pieces: usize,
        limit: usize,
    },
    #[error("the placement gives pieces for {got} nodes of a workload of {expected}")]
    PiecesLength { expected: usize, got: usize },
    #[error("the plan's pieces deadlock: {0}")]
    Deadlock(String),
}

/// All violations of the hard rules. `count_cpus` is false for latency, where CPU cores
/// are as many as needed.
pub fn violations(w: &Workload, p: &Placement, count_cpus: bool) -> Vec<Violation> {
    let mut out = Vec::new();
    if p.assignment.len() != w.len() {
        out.push(Violation::WrongLength {
            expected: w.len(),
            got: p.assignment.len(),
        });
        return out;
    }
    if let Some(pieces) = &p.pieces {
        if pieces.len() != w.len() {
            out.push(Violation::PiecesLength {
                expected: w.len(),
                got: pieces.len(),
            });
            return out;
        }
    }
    let d = w.devices();
    let mut memory: HashMap<usize, Sum> = HashMap::new();
    let mut class_seen: HashMap<i64, (i64, Device)> = HashMap::new();
    for (v, &device) in p.assignment.iter().enumerate() {
        let node = w.node(v);
        match device {
            Device::Accelerator(i) => {
                if i >= d.accelerators {
                    out.push(Violation::NoSuchDevice {
                        node: node.id,
                        device,
                        available: d.accelerators,
                    });
                }
                if !node.supported_on_accelerator {
                    out.push(Violation::Unsupported {
                        node: node.id,
                        device,
                    });
                }
                let used = memory.entry(i).or_insert(Sum::ZERO);
                *used = used.plus(node.size_bytes);
            }
            Device::Cpu(i) => {
                if count_cpus && i >= d.cpus {
                    out.push(Violation::NoSuchDevice {
                        node: node.id,
                        device,
                        available: d.cpus,
                    });
                }
            }
        }
        if let Some(class) = node.color_class {
            match class_seen.get(&class) {
                Some(&(a, da)) if da != device => {
                    out.push(Violation::ColorClassSplit {
                        class,
                        a,
                        da,
                        b: node.id,
                        db: device,
                    });
                }
                Some(_) => {}
                None => {
                    class_seen.insert(class, (node.id, device));
                }
            }
        }
    }
    // Compensated sums (crate::model::numerics): the bytes of a device are its nodes' exact
    // sum rounded once, as the DP computes them, so the two agree but at a one-ulp tie.
    let mut mem: Vec<(usize, f64)> = memory.into_iter().map(|(i, s)| (i, s.value())).collect();
    mem.sort_by_key(|&(i, _)| i);
    for (i, used) in mem {
        if used > d.memory_per_accelerator_bytes {
            out.push(Violation::Memory {
                device: Device::Accelerator(i),
                used,
                limit: d.memory_per_accelerator_bytes,
            });
        }
    }
    out
}

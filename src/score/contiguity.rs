//! Contiguity of each device's node set.
//!
//! A set `S` is contiguous if no path leaves `S` and re-enters it (MODEL.md). We check it
//! on the graph of colour classes (see [`crate::model::contraction`]): a device's classes
//! `X` are contiguous when no walk of the class graph leaves `X` and comes back. One
//! search per device from the classes just outside `X`, so O(k · (C + A)) for k devices,
//! C classes and A class arcs. This check is written independently of the contraction's
//! SCC fusion, which the solvers use.

use crate::model::contraction::{class_graph, class_index};
use crate::model::{Device, Placement, Workload};

use super::validity::Violation;

/// One violation per device whose classes are not contiguous, with a witness walk.
pub fn contiguity_violations(w: &Workload, p: &Placement) -> Vec<Violation> {
    let (class, classes) = class_index(w);
    let succ = class_graph(w, &class, classes);
    let mut class_device: Vec<Option<Device>> = vec![None; classes];
    let mut class_node: Vec<i64> = vec![0; classes];
    for (v, &d) in p.assignment.iter().enumerate() {
        class_device[class[v]].get_or_insert(d);
        class_node[class[v]] = w.node(v).id;
    }
    let mut devices: Vec<Device> = class_device.iter().flatten().copied().collect();
    devices.sort();
    devices.dedup();
    let mut out = Vec::new();
    let mut parent = vec![usize::MAX; classes];
    for device in devices {
        let inside = |c: usize| class_device[c] == Some(device);
        parent.iter_mut().for_each(|x| *x = usize::MAX);
        let mut stack = Vec::new();
        for a in (0..classes).filter(|&a| inside(a)) {
            for &b in &succ[a] {
                if !inside(b) && parent[b] == usize::MAX {
                    parent[b] = a;
                    stack.push(b);
                }
            }
        }
        let mut found = None;
        'search: while let Some(b) = stack.pop() {
            for &c in &succ[b] {
                if inside(c) {
                    found = Some((b, c));
                    break 'search;
                }
                if parent[c] == usize::MAX {
                    parent[c] = b;
                    stack.push(c);
                }
            }
        }
        if let Some((last, back)) = found {
            let mut walk = vec![back, last];
            let mut x = last;
            while !inside(x) {
                x = parent[x];
                walk.push(x);
            }
            walk.reverse();
            let names: Vec<String> = walk.iter().map(|&c| format!("node {}", class_node[c])).collect();
            out.push(Violation::NotContiguous {
                device,
                witness: format!("the path {} leaves the set and re-enters it", names.join(" -> ")),
            });
        }
    }
    out
}

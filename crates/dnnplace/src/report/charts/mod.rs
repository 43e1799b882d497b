//! The charts of the HTML report, each one SVG document built with the `svg` crate
//! (elements and attributes, never pasted strings; text is escaped by the crate).
//!
//! - [`axis`]: nice ticks, time (ms) and memory (B … TiB) units;
//! - [`layout`]: the layered layout of the operator graph;
//! - [`graph`]: the graph coloured by device, collapsed when large;
//! - [`bars`]: per-device load (compute + communication) and memory against the limit,
//!   the bottleneck marked;
//! - [`curve`]: a standalone line chart (the scaling sweep, the price frontier);
//! - [`gantt`]: the simulated schedule, one row per device, and memory over time;
//! - [`quality`]: best objective so far against wall time, every method of a comparison
//!   (`reproduce`'s time-to-quality plots).
//!
//! Every chart carries `id`, `class` and `data-device` attributes that the tests (and a
//! reader of the page source) can rely on: `load-bar`, `memory-bar`, `bottleneck`,
//! `gantt-row`, `task`, `graph-node`. User-provided text (node names) only ever goes into
//! text nodes and `<title>` elements, never into attributes.

pub mod axis;
pub mod bars;
pub mod curve;
pub mod gantt;
pub mod graph;
pub mod layout;
pub mod quality;

use crate::model::Device;

/// Coordinates rounded to 0.1 px, so the files stay small.
pub fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The colour of a device: Tableau 10 for the first ten accelerators, then golden-angle
/// hues; greys for CPU cores.
pub fn device_colour(device: Device) -> String {
    const TABLEAU: [&str; 10] = [
        "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
        "#9c755f", "#86bcb6",
    ];
    match device {
        Device::Accelerator(i) if i < TABLEAU.len() => TABLEAU[i].to_string(),
        Device::Accelerator(i) => format!("hsl({:.0}, 55%, 55%)", (i as f64 * 137.508) % 360.0),
        Device::Cpu(i) => {
            let level = 150 + (i * 23) % 80;
            format!("rgb({level}, {level}, {level})")
        }
    }
}

/// A label for a device in charts: `acc0`, `cpu0`.
pub fn device_label(device: Device) -> String {
    device.to_string()
}

/// Time in ms with 3 significant decimals for titles.
pub fn ms(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.1} ms")
    } else if value >= 1.0 {
        format!("{value:.3} ms")
    } else {
        format!("{value:.4} ms")
    }
}

/// Bytes in the unit that fits, for titles.
pub fn bytes(value: f64) -> String {
    let (size, unit) = axis::byte_unit(value);
    if unit == "B" {
        format!("{value:.0} B")
    } else {
        format!("{:.2} {unit}", value / size)
    }
}

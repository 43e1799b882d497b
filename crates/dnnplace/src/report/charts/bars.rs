//! Per-device bars: load per sample (compute, then the recomputed forward pass of a device
//! that recomputes its activations, then communication, in ms) with the
//! plan's TPS and lower bound as vertical lines and the bottleneck marked; memory (bytes
//! held, and the simulated peak when there is one) against the accelerators' limit.

use svg::node::element::{Group, Line, Rectangle, Text, Title};
use svg::Document;

use super::axis::{self, Scale};
use super::{bytes, device_colour, device_label, ms, round};
use crate::model::Device;

/// What one device's bars show.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceBar {
    pub device: Device,
    pub nodes: usize,
    /// Compute without a recomputed forward pass.
    pub compute_ms: f64,
    /// The forward pass a recomputing device runs again (`R` of crate::model::recompute;
    /// 0 when it does not recompute).
    pub recompute_ms: f64,
    /// Whether the device recomputes its activations.
    pub recomputes: bool,
    pub communication_ms: f64,
    /// Σ size of its nodes, bytes (MODEL.md's memory).
    pub memory_bytes: f64,
    /// The simulated peak, when a simulation ran.
    pub peak_memory_bytes: Option<f64>,
    /// `None` for a CPU core.
    pub memory_limit_bytes: Option<f64>,
}

impl DeviceBar {
    /// compute + recompute + communication.
    pub fn load_ms(&self) -> f64 {
        self.compute_ms + self.recompute_ms + self.communication_ms
    }
}

const WIDTH: f64 = 630.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 150.0;
const ROW: f64 = 28.0;
const BAR: f64 = 18.0;
const TOP: f64 = 44.0;
const BOTTOM: f64 = 48.0;

/// A bar chart's document for `rows` devices, and its height.
fn frame(rows: usize, id: &str, label: &str) -> (Document, f64) {
    let height = TOP + rows as f64 * ROW + BOTTOM;
    let doc = Document::new()
        .set("id", id)
        .set("class", "chart")
        .set("viewBox", (0, 0, WIDTH, round(height)))
        .set("width", WIDTH)
        .set("height", round(height))
        .set("role", "img")
        .set("aria-label", label);
    (doc, height)
}

/// A legend entry: a square of `fill` at `x` with the given opacity, and its text.
fn swatch(x: f64, fill: &str, opacity: f64, text: &str) -> Group {
    Group::new()
        .add(
            Rectangle::new()
                .set("x", x)
                .set("y", 8)
                .set("width", 14)
                .set("height", 12)
                .set("fill", fill)
                .set("fill-opacity", opacity)
                .set("stroke", "#333")
                .set("stroke-width", 0.5),
        )
        .add(
            Text::new(text)
                .set("x", x + 19.0)
                .set("y", 18)
                .set("class", "legend"),
        )
}

/// One device's row of a bar chart: the axis it is drawn on, the device's label and
/// colour, and the top of its bar.
struct BarRow<'a> {
    scale: &'a Scale,
    length: f64,
    y: f64,
    label: String,
    colour: String,
}

impl<'a> BarRow<'a> {
    /// Row `r` of a chart on `scale` over `length` px, for `device`.
    fn new(scale: &'a Scale, length: f64, r: usize, device: Device) -> BarRow<'a> {
        BarRow {
            scale,
            length,
            y: TOP + r as f64 * ROW + (ROW - BAR) / 2.0,
            label: device_label(device),
            colour: device_colour(device),
        }
    }

    /// The x coordinate of `value` (ms or bytes) on the axis.
    fn x(&self, value: f64) -> f64 {
        LEFT + self.scale.px(value, self.length)
    }

    /// A width of `value` on the axis.
    fn px(&self, value: f64) -> f64 {
        self.scale.px(value, self.length)
    }

    /// The row's group with the device's label on the left.
    fn group(&self) -> Group {
        let row = Group::new()
            .set("class", "bar-row")
            .set("data-device", self.label.clone());
        row.add(
            Text::new(self.label.clone())
                .set("x", LEFT - 8.0)
                .set("y", round(self.y + BAR - 4.0))
                .set("text-anchor", "end")
                .set("class", "row-label"),
        )
    }
}

/// The load chart (module doc). `bound` is drawn when it is positive.
pub fn loads(
    devices: &[DeviceBar],
    bottleneck: Option<Device>,
    tps: f64,
    bound: Option<f64>,
) -> Document {
    let (mut doc, height) = frame(devices.len(), "loads", "load per sample of every device");
    let length = WIDTH - LEFT - RIGHT;
    let max = devices.iter().map(DeviceBar::load_ms).fold(tps, f64::max);
    let scale = Scale::time(max);
    let axis_y = TOP + devices.len() as f64 * ROW + 6.0;
    doc = doc.add(swatch(LEFT, "#888", 1.0, "compute")).add(swatch(
        LEFT + 90.0,
        "#888",
        0.35,
        "communication",
    ));
    if devices.iter().any(|d| d.recomputes) {
        doc = doc
            .add(swatch(LEFT + 215.0, "#888", 0.65, "recompute").set("class", "recompute-legend"));
    }
    doc = doc.add(axis::horizontal(
        &scale,
        LEFT,
        axis_y,
        length,
        TOP - 6.0,
        "load per sample",
    ));
    for (r, d) in devices.iter().enumerate() {
        let row = BarRow::new(&scale, length, r, d.device);
        doc = doc.add(load_row(&row, d, Some(d.device) == bottleneck));
    }
    let bottom = TOP + devices.len() as f64 * ROW;
    doc = doc.add(value_line(
        &scale,
        length,
        bottom,
        tps,
        "tps-line",
        format!("TPS {}", ms(tps)),
        0.0,
    ));
    if let Some(b) = bound.filter(|&b| b > 0.0 && b < tps * (1.0 - 1e-9)) {
        doc = doc.add(value_line(
            &scale,
            length,
            bottom,
            b,
            "bound-line",
            format!("lower bound {}", ms(b)),
            12.0,
        ));
    }
    let _ = height;
    doc
}

/// One device's load bar: compute, the recomputed forward pass (when it recomputes),
/// communication, an outline over the whole load (heavy for the bottleneck) and the value.
fn load_row(row: &BarRow, d: &DeviceBar, is_bottleneck: bool) -> Group {
    let (y, label, colour) = (row.y, &row.label, &row.colour);
    let mut group = row.group();
    group = group.add(
        Rectangle::new()
            .set("x", LEFT)
            .set("y", round(y))
            .set("width", round(row.px(d.compute_ms)))
            .set("height", BAR)
            .set("fill", colour.clone())
            .set("class", "compute"),
    );
    if d.recomputes {
        group = group.add(
            Rectangle::new()
                .set("x", round(row.x(d.compute_ms)))
                .set("y", round(y))
                .set("width", round(row.px(d.recompute_ms)))
                .set("height", BAR)
                .set("fill", colour.clone())
                .set("fill-opacity", 0.65)
                .set("stroke", "#222")
                .set("stroke-width", 0.5)
                .set("stroke-dasharray", "3 2")
                .set("class", "recompute")
                .set("data-device", label.clone())
                .add(Title::new(format!(
                    "{label} recomputes its activations: its forward pass runs again before its backward pass, {} per sample",
                    ms(d.recompute_ms)
                ))),
        );
    }
    group = group.add(
        Rectangle::new()
            .set("x", round(row.x(d.compute_ms + d.recompute_ms)))
            .set("y", round(y))
            .set("width", round(row.px(d.communication_ms)))
            .set("height", BAR)
            .set("fill", colour.clone())
            .set("fill-opacity", 0.35)
            .set("class", "communication"),
    );
    group
        .add(load_outline(row, d, is_bottleneck))
        .add(load_value(row, d, is_bottleneck))
}

/// The outline over a device's whole load, with the sum spelled out in its title.
fn load_outline(row: &BarRow, d: &DeviceBar, is_bottleneck: bool) -> Rectangle {
    let label = &row.label;
    let load = d.load_ms();
    Rectangle::new()
        .set("x", LEFT)
        .set("y", round(row.y))
        .set("width", round(row.px(load)))
        .set("height", BAR)
        .set("fill", "none")
        .set("stroke", if is_bottleneck { "#000" } else { "#555" })
        .set("stroke-width", if is_bottleneck { 2.5 } else { 0.6 })
        .set(
            "class",
            if is_bottleneck {
                "load-bar is-bottleneck"
            } else {
                "load-bar"
            },
        )
        .set("data-device", label.clone())
        .add(Title::new(if d.recomputes {
            format!(
                "{label}: {} nodes; recomputes: compute {} + recompute {} + communication {} = load {} per sample",
                d.nodes,
                ms(d.compute_ms),
                ms(d.recompute_ms),
                ms(d.communication_ms),
                ms(load)
            )
        } else {
            format!(
                "{label}: {} nodes; compute {} + communication {} = load {} per sample",
                d.nodes,
                ms(d.compute_ms),
                ms(d.communication_ms),
                ms(load)
            )
        }))
}

/// The load's value right of the bar, marked when the device recomputes or is the
/// bottleneck.
fn load_value(row: &BarRow, d: &DeviceBar, is_bottleneck: bool) -> Text {
    let load = d.load_ms();
    let value_x = row.x(load) + 6.0;
    let mut tag = ms(load);
    if d.recomputes {
        tag.push_str("  recomputes");
    }
    if is_bottleneck {
        tag.push_str("  \u{25c0} bottleneck");
    }
    let mut text = Text::new(tag)
        .set("x", round(value_x))
        .set("y", round(row.y + BAR - 4.0))
        .set("class", "value");
    if is_bottleneck {
        text = text
            .set("class", "value bottleneck")
            .set("data-device", row.label.clone());
    }
    text
}

/// A labelled vertical line at `value` across the rows.
fn value_line(
    scale: &Scale,
    length: f64,
    bottom: f64,
    value: f64,
    class: &str,
    text: String,
    dy: f64,
) -> Group {
    let x = round(LEFT + scale.px(value, length));
    Group::new()
        .add(
            Line::new()
                .set("x1", x)
                .set("y1", TOP - 4.0)
                .set("x2", x)
                .set("y2", round(bottom))
                .set("class", class.to_string()),
        )
        .add(
            Text::new(text)
                .set("x", x)
                .set("y", round(TOP - 8.0 - dy))
                .set("text-anchor", "middle")
                .set("class", format!("{class}-label")),
        )
}

/// The memory chart (module doc).
pub fn memory(devices: &[DeviceBar]) -> Document {
    let (mut doc, _) = frame(
        devices.len(),
        "memory",
        "memory of every device against its limit",
    );
    let length = WIDTH - LEFT - RIGHT;
    let max = devices
        .iter()
        .map(|d| {
            d.memory_bytes
                .max(d.peak_memory_bytes.unwrap_or(0.0))
                .max(d.memory_limit_bytes.unwrap_or(0.0))
        })
        .fold(1.0, f64::max);
    let scale = Scale::bytes(max);
    let axis_y = TOP + devices.len() as f64 * ROW + 6.0;
    doc = doc
        .add(swatch(LEFT, "#888", 1.0, "nodes (size)"))
        .add(swatch(
            LEFT + 100.0,
            "#888",
            0.35,
            "more stash at the simulated peak",
        ))
        .add(
            Line::new()
                .set("x1", LEFT + 330.0)
                .set("y1", 14)
                .set("x2", LEFT + 344.0)
                .set("y2", 14)
                .set("class", "limit-line"),
        )
        .add(
            Text::new("limit")
                .set("x", LEFT + 349.0)
                .set("y", 18)
                .set("class", "legend"),
        )
        .add(axis::horizontal(
            &scale,
            LEFT,
            axis_y,
            length,
            TOP - 6.0,
            "memory",
        ));
    for (r, d) in devices.iter().enumerate() {
        doc = doc.add(memory_row(&BarRow::new(&scale, length, r, d.device), d));
    }
    doc
}

/// One device's memory bar: the nodes' memory, the extra stash up to the simulated peak
/// (lighter), the value (inside a long bar; marked when over the limit) and the
/// accelerator's limit as a tick.
fn memory_row(row: &BarRow, d: &DeviceBar) -> Group {
    let (y, label, length) = (row.y, &row.label, row.length);
    let peak = d
        .peak_memory_bytes
        .unwrap_or(d.memory_bytes)
        .max(d.memory_bytes);
    let over = d.memory_limit_bytes.is_some_and(|limit| peak > limit);
    let mut group = row.group();
    group = group.add(
        Rectangle::new()
            .set("x", LEFT)
            .set("y", round(y))
            .set("width", round(row.px(d.memory_bytes)))
            .set("height", BAR)
            .set("fill", row.colour.clone())
            .set("class", "memory-bar")
            .set("data-device", label.clone())
            .add(Title::new(format!(
                "{label}: {} of node memory{}{}",
                bytes(d.memory_bytes),
                d.peak_memory_bytes
                    .map_or(String::new(), |p| format!("; simulated peak {}", bytes(p))),
                d.memory_limit_bytes.map_or(
                    "; CPU memory is not limited".to_string(),
                    |l| format!("; limit {}", bytes(l))
                )
            ))),
    );
    if peak > d.memory_bytes {
        group = group.add(
            Rectangle::new()
                .set("x", round(row.x(d.memory_bytes)))
                .set("y", round(y))
                .set("width", round(row.px(peak - d.memory_bytes)))
                .set("height", BAR)
                .set("fill", row.colour.clone())
                .set("fill-opacity", 0.35)
                .set("class", "stash"),
        );
    }
    let text = match d.memory_limit_bytes {
        Some(limit) => format!(
            "{} ({:.1}% of {}){}",
            bytes(peak),
            100.0 * peak / limit.max(f64::MIN_POSITIVE),
            bytes(limit),
            if over { " OVER" } else { "" }
        ),
        None => format!("{} (CPU, no limit)", bytes(peak)),
    };
    // A long bar carries its value inside, so the text stays in the chart.
    let end = row.x(peak);
    let inside = end > LEFT + 0.55 * length;
    group = group.add(
        Text::new(text)
            .set("x", round(if inside { end - 4.0 } else { end + 6.0 }))
            .set("y", round(y + BAR - 4.0))
            .set("text-anchor", if inside { "end" } else { "start" })
            .set(
                "class",
                match (over, inside) {
                    (true, _) => "value over-limit",
                    (false, true) => "value inside",
                    (false, false) => "value",
                },
            ),
    );
    if let Some(limit) = d.memory_limit_bytes {
        let x = round(row.x(limit));
        group = group.add(
            Line::new()
                .set("x1", x)
                .set("y1", round(y - 3.0))
                .set("x2", x)
                .set("y2", round(y + BAR + 3.0))
                .set("class", "limit-line"),
        );
    }
    group
}

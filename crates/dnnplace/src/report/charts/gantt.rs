//! The simulated schedule as a Gantt chart (one row per device, one box per task:
//! forward solid, backward light, the receive and send parts of a task shaded, the
//! micro-batch number inside when it fits), and memory over time (one step line per
//! device, the accelerator limit dashed).
//!
//! Beyond [`MAX_BOXES`] tasks, consecutive tasks of one device closer than a quarter pixel
//! are merged into one box (its title lists the micro-batches and passes), and the chart
//! says so.

use svg::node::element::{Group, Line, Polyline, Rectangle, Text, Title};
use svg::Document;

use super::axis::{self, Scale};
use super::{bytes, device_colour, device_label, ms, round};
use crate::model::schedule::Pass;
use crate::simulate::Simulation;

/// Most task boxes drawn one by one.
pub const MAX_BOXES: usize = 6_000;

const WIDTH: f64 = 1300.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const ROW: f64 = 26.0;
const BAR: f64 = 20.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 48.0;

struct Box {
    start: f64,
    end: f64,
    /// `None` for a merged box holding both passes.
    pass: Option<Pass>,
    first: usize,
    last: usize,
    count: usize,
    piece: usize,
}

/// The Gantt chart, and a note when tasks were merged.
pub fn gantt(sim: &Simulation) -> (Document, Option<String>) {
    let rows = sim.devices.len();
    let height = TOP + rows as f64 * ROW + BOTTOM;
    let length = WIDTH - LEFT - RIGHT;
    let scale = Scale::time(sim.iteration_ms);
    let merge = sim.tasks.len() > MAX_BOXES;
    let resolution = scale.max / length / 4.0;
    let mut doc = Document::new()
        .set("id", "gantt")
        .set("class", "chart")
        .set("viewBox", (0, 0, WIDTH, round(height)))
        .set("width", WIDTH)
        .set("height", round(height))
        .set("role", "img")
        .set("aria-label", "the simulated schedule, one row per device");
    doc = doc
        .add(legend_box(LEFT, 1.0, "forward"))
        .add(legend_box(LEFT + 90.0, 0.45, "backward"))
        .add(
            Group::new()
                .add(
                    Rectangle::new()
                        .set("x", LEFT + 190.0)
                        .set("y", 6)
                        .set("width", 14)
                        .set("height", 12)
                        .set("class", "comm"),
                )
                .add(
                    Text::new("receive / send (on the device, not overlapped)")
                        .set("x", LEFT + 209.0)
                        .set("y", 16)
                        .set("class", "legend"),
                ),
        )
        .add(axis::horizontal(
            &scale,
            LEFT,
            TOP + rows as f64 * ROW + 4.0,
            length,
            TOP,
            "time",
        ));
    let mut per_device: Vec<Vec<Box>> = (0..rows).map(|_| Vec::new()).collect();
    for t in &sim.tasks {
        let d = sim.device_index(t.piece);
        let pass = sim.stages.pieces[t.piece].pass;
        let list = &mut per_device[d];
        if merge {
            if let Some(last) = list.last_mut().filter(|b| t.start_ms - b.end <= resolution) {
                if last.pass != Some(pass) {
                    last.pass = None;
                }
                last.end = last.end.max(t.end_ms);
                last.first = last.first.min(t.micro_batch);
                last.last = last.last.max(t.micro_batch);
                last.count += 1;
                continue;
            }
        }
        list.push(Box {
            start: t.start_ms,
            end: t.end_ms,
            pass: Some(pass),
            first: t.micro_batch,
            last: t.micro_batch,
            count: 1,
            piece: t.piece,
        });
    }
    for (d, boxes) in per_device.iter().enumerate() {
        let device = sim.devices[d].device;
        let label = device_label(device);
        let colour = device_colour(device);
        let y = TOP + d as f64 * ROW + (ROW - BAR) / 2.0;
        let mut row = Group::new()
            .set("class", "gantt-row")
            .set("data-device", label.clone());
        row = row
            .add(
                Text::new(label.clone())
                    .set("x", LEFT - 8.0)
                    .set("y", round(y + BAR - 6.0))
                    .set("text-anchor", "end")
                    .set("class", "row-label"),
            )
            .add(
                Rectangle::new()
                    .set("x", LEFT)
                    .set("y", round(y))
                    .set("width", length)
                    .set("height", BAR)
                    .set("class", "lane"),
            );
        for b in boxes {
            let x = LEFT + scale.px(b.start, length);
            let w = scale.px(b.end - b.start, length).max(0.3);
            let piece = &sim.stages.pieces[b.piece];
            let name = match b.pass {
                Some(Pass::Forward) => "forward",
                Some(Pass::Backward) => "backward",
                None => "forward and backward",
            };
            let what = if b.count == 1 {
                format!(
                    "{label} · {name} · micro-batch {} · stage {}: {}–{} (receive {}, compute {}, send {})",
                    b.first,
                    piece.position,
                    ms(b.start),
                    ms(b.end),
                    ms(piece.receive_ms),
                    ms(piece.compute_ms),
                    ms(piece.send_ms)
                )
            } else {
                format!("{label} · {name} · {} tasks of micro-batches {}–{}: {}–{} (merged: below the drawing's resolution)", b.count, b.first, b.last, ms(b.start), ms(b.end))
            };
            let (class, opacity) = match b.pass {
                Some(Pass::Forward) => ("task forward", 1.0),
                Some(Pass::Backward) => ("task backward", 0.45),
                None => ("task mixed", 0.75),
            };
            let mut task = Group::new().set("class", class);
            task = task.add(
                Rectangle::new()
                    .set("x", round(x))
                    .set("y", round(y))
                    .set("width", round(w))
                    .set("height", BAR)
                    .set("fill", colour.clone())
                    .set("fill-opacity", opacity)
                    .set("class", "box")
                    .add(Title::new(what)),
            );
            if b.count == 1 {
                let duration = (b.end - b.start).max(f64::MIN_POSITIVE);
                for (offset, part) in [
                    (0.0, piece.receive_ms),
                    (b.end - b.start - piece.send_ms, piece.send_ms),
                ] {
                    if part > 0.0 && part / duration * w >= 0.5 {
                        task = task.add(
                            Rectangle::new()
                                .set("x", round(x + offset / duration * w))
                                .set("y", round(y))
                                .set("width", round(part / duration * w))
                                .set("height", BAR)
                                .set("class", "comm"),
                        );
                    }
                }
                if w >= 16.0 {
                    task = task.add(
                        Text::new(b.first.to_string())
                            .set("x", round(x + w / 2.0))
                            .set("y", round(y + BAR - 6.0))
                            .set("text-anchor", "middle")
                            .set("class", "mb"),
                    );
                }
            }
            row = row.add(task);
        }
        doc = doc.add(row);
    }
    let note = merge.then(|| {
        format!(
            "The schedule has {} tasks; consecutive tasks of one device less than a quarter pixel apart are drawn as one box (hover for its micro-batches).",
            sim.tasks.len()
        )
    });
    (doc, note)
}

fn legend_box(x: f64, opacity: f64, text: &str) -> Group {
    Group::new()
        .add(
            Rectangle::new()
                .set("x", x)
                .set("y", 6)
                .set("width", 14)
                .set("height", 12)
                .set("fill", "#888")
                .set("fill-opacity", opacity)
                .set("stroke", "#333")
                .set("stroke-width", 0.5),
        )
        .add(
            Text::new(text)
                .set("x", x + 19.0)
                .set("y", 16)
                .set("class", "legend"),
        )
}

/// Memory over time: one step line per device and the accelerator limit.
pub fn memory_over_time(sim: &Simulation) -> Document {
    let plot = 220.0;
    const PER_ROW: usize = 8;
    let legend_rows = sim.devices.len().div_ceil(PER_ROW).max(1);
    let top = 22.0 + 14.0 * legend_rows as f64;
    let height = top + plot + BOTTOM;
    let left = 90.0;
    let length = WIDTH - left - RIGHT;
    let time = Scale::time(sim.iteration_ms);
    let limit = sim
        .devices
        .iter()
        .filter_map(|d| d.memory_limit_bytes)
        .fold(0.0, f64::max);
    let peak = sim
        .devices
        .iter()
        .map(|d| d.peak_memory_bytes)
        .fold(0.0, f64::max);
    // The limit sets the scale only when it is within twice the peak; otherwise the lines
    // would be flat against the axis, and the limit is named instead.
    let limit_shown = limit > 0.0 && limit <= 2.0 * peak;
    let memory = Scale::bytes(
        if limit_shown {
            limit.max(peak)
        } else {
            peak * 1.15
        }
        .max(1.0),
    );
    let y_of = |b: f64| top + plot - memory.px(b, plot);
    let mut doc = Document::new()
        .set("id", "memory-time")
        .set("class", "chart")
        .set("viewBox", (0, 0, WIDTH, round(height)))
        .set("width", WIDTH)
        .set("height", round(height))
        .set("role", "img")
        .set("aria-label", "memory of every device over time");
    doc = doc
        .add(axis::horizontal(
            &time,
            left,
            top + plot,
            length,
            top,
            "time",
        ))
        .add(axis::vertical(
            &memory,
            left,
            top + plot,
            plot,
            left + length,
            "memory",
        ));
    if limit > 0.0 && !limit_shown {
        doc = doc.add(
            Text::new(format!(
                "accelerator limit {} (above this chart)",
                bytes(limit)
            ))
            .set("x", left + length - 4.0)
            .set("y", round(top - 6.0))
            .set("text-anchor", "end")
            .set("class", "legend"),
        );
    }
    if limit_shown {
        let y = round(y_of(limit));
        doc = doc
            .add(
                Line::new()
                    .set("x1", left)
                    .set("y1", y)
                    .set("x2", left + length)
                    .set("y2", y)
                    .set("class", "limit-line"),
            )
            .add(
                Text::new(format!("accelerator limit {}", bytes(limit)))
                    .set("x", left + length - 4.0)
                    .set("y", round(y - 4.0))
                    .set("text-anchor", "end")
                    .set("class", "legend"),
            );
    }
    for (k, d) in sim.devices.iter().enumerate() {
        let x_legend = left + 150.0 * (k % PER_ROW) as f64;
        let y_legend = 8.0 + 14.0 * (k / PER_ROW) as f64;
        let label = device_label(d.device);
        let mut points: Vec<(f64, f64)> = Vec::with_capacity(2 * d.memory.len() + 1);
        for (k, &(t, b)) in d.memory.iter().enumerate() {
            let x = round(left + time.px(t, length));
            if k > 0 {
                points.push((x, points.last().expect("a first point").1));
            }
            points.push((x, round(y_of(b))));
        }
        points.push((
            round(left + time.px(sim.iteration_ms, length)),
            points.last().map_or(round(y_of(0.0)), |p| p.1),
        ));
        let text: Vec<String> = points.iter().map(|(x, y)| format!("{x},{y}")).collect();
        doc = doc.add(
            Polyline::new()
                .set("points", text.join(" "))
                .set("fill", "none")
                .set("stroke", device_colour(d.device))
                .set("stroke-width", 1.6)
                .set("class", "memory-line")
                .set("data-device", label.clone())
                .add(Title::new(format!(
                    "{label}: peak {} (resident {})",
                    bytes(d.peak_memory_bytes),
                    bytes(d.resident_bytes)
                ))),
        );
        doc = doc
            .add(
                Rectangle::new()
                    .set("x", round(x_legend))
                    .set("y", y_legend)
                    .set("width", 14)
                    .set("height", 4)
                    .set("fill", device_colour(d.device)),
            )
            .add(
                Text::new(format!("{label} peak {}", bytes(d.peak_memory_bytes)))
                    .set("x", round(x_legend + 18.0))
                    .set("y", y_legend + 6.0)
                    .set("class", "legend"),
            );
    }
    doc
}

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
use crate::simulate::{DeviceRun, Simulation};

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

/// The time axis of the Gantt chart: its scale and the plot's length in pixels.
struct Timeline {
    scale: Scale,
    length: f64,
}

/// One device's row of the Gantt chart: what every box of the row shares.
struct Row<'a> {
    sim: &'a Simulation,
    timeline: &'a Timeline,
    label: String,
    colour: String,
    /// The top of the row's boxes.
    y: f64,
}

/// The Gantt chart, and a note when tasks were merged.
pub fn gantt(sim: &Simulation) -> (Document, Option<String>) {
    let rows = sim.devices.len();
    let length = WIDTH - LEFT - RIGHT;
    let timeline = Timeline {
        scale: Scale::time(sim.iteration_ms),
        length,
    };
    let merge = sim.tasks.len() > MAX_BOXES;
    let resolution = timeline.scale.max / length / 4.0;
    let mut doc = gantt_frame(rows, &timeline);
    let per_device = task_boxes(sim, merge, resolution);
    for (d, boxes) in per_device.iter().enumerate() {
        let device = sim.devices[d].device;
        let row = Row {
            sim,
            timeline: &timeline,
            label: device_label(device),
            colour: device_colour(device),
            y: TOP + d as f64 * ROW + (ROW - BAR) / 2.0,
        };
        doc = doc.add(device_row(&row, boxes));
    }
    let note = merge.then(|| {
        format!(
            "The schedule has {} tasks; consecutive tasks of one device less than a quarter pixel apart are drawn as one box (hover for its micro-batches).",
            sim.tasks.len()
        )
    });
    (doc, note)
}

/// The Gantt chart's document with its legend and time axis, before any row.
fn gantt_frame(rows: usize, timeline: &Timeline) -> Document {
    let height = TOP + rows as f64 * ROW + BOTTOM;
    Document::new()
        .set("id", "gantt")
        .set("class", "chart")
        .set("viewBox", (0, 0, WIDTH, round(height)))
        .set("width", WIDTH)
        .set("height", round(height))
        .set("role", "img")
        .set("aria-label", "the simulated schedule, one row per device")
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
            &timeline.scale,
            LEFT,
            TOP + rows as f64 * ROW + 4.0,
            timeline.length,
            TOP,
            "time",
        ))
}

/// The boxes of every device, in the simulation's task order: one per task, or, when
/// `merge`, consecutive tasks of a device less than `resolution` ms apart merged into one.
fn task_boxes(sim: &Simulation, merge: bool, resolution: f64) -> Vec<Vec<Box>> {
    let mut per_device: Vec<Vec<Box>> = (0..sim.devices.len()).map(|_| Vec::new()).collect();
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
    per_device
}

/// One device's row: its label, its lane and its boxes.
fn device_row(row: &Row, boxes: &[Box]) -> Group {
    let mut group = Group::new()
        .set("class", "gantt-row")
        .set("data-device", row.label.clone())
        .add(
            Text::new(row.label.clone())
                .set("x", LEFT - 8.0)
                .set("y", round(row.y + BAR - 6.0))
                .set("text-anchor", "end")
                .set("class", "row-label"),
        )
        .add(
            Rectangle::new()
                .set("x", LEFT)
                .set("y", round(row.y))
                .set("width", row.timeline.length)
                .set("height", BAR)
                .set("class", "lane"),
        );
    for b in boxes {
        group = group.add(task_box(row, b));
    }
    group
}

/// The hover text of a box: the task's times and its parts, or what a merged box holds.
fn box_title(row: &Row, b: &Box) -> String {
    let label = &row.label;
    let piece = &row.sim.stages.pieces[b.piece];
    let name = match b.pass {
        Some(Pass::Forward) => "forward",
        Some(Pass::Backward) => "backward",
        None => "forward and backward",
    };
    if b.count == 1 {
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
    }
}

/// One box: the task's rectangle with its title, and for a single task its receive and
/// send parts shaded (when at least half a pixel wide) and its micro-batch number (when
/// the box is 16 px wide or more).
fn task_box(row: &Row, b: &Box) -> Group {
    let Timeline { scale, length } = row.timeline;
    let (y, length) = (row.y, *length);
    let x = LEFT + scale.px(b.start, length);
    let w = scale.px(b.end - b.start, length).max(0.3);
    let piece = &row.sim.stages.pieces[b.piece];
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
            .set("fill", row.colour.clone())
            .set("fill-opacity", opacity)
            .set("class", "box")
            .add(Title::new(box_title(row, b))),
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
    task
}

/// A legend entry: a grey square at `x` with the given opacity, and its text.
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

/// Devices per row of the memory chart's legend.
const PER_ROW: usize = 8;

/// The axes of the memory chart: where the plot lies and its two scales.
struct MemoryPlot {
    /// The plot's top, left edge, length and height in pixels.
    top: f64,
    left: f64,
    length: f64,
    plot: f64,
    time: Scale,
    memory: Scale,
}

impl MemoryPlot {
    /// The y coordinate of `b` bytes.
    fn y_of(&self, b: f64) -> f64 {
        self.top + self.plot - self.memory.px(b, self.plot)
    }
}

/// Memory over time: one step line per device and the accelerator limit.
pub fn memory_over_time(sim: &Simulation) -> Document {
    let plot = 220.0;
    let legend_rows = sim.devices.len().div_ceil(PER_ROW).max(1);
    let top = 22.0 + 14.0 * legend_rows as f64;
    let height = top + plot + BOTTOM;
    let left = 90.0;
    let length = WIDTH - left - RIGHT;
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
    let frame = MemoryPlot {
        top,
        left,
        length,
        plot,
        time: Scale::time(sim.iteration_ms),
        memory,
    };
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
            &frame.time,
            left,
            top + plot,
            length,
            top,
            "time",
        ))
        .add(axis::vertical(
            &frame.memory,
            left,
            top + plot,
            plot,
            left + length,
            "memory",
        ));
    doc = limit_mark(doc, &frame, limit, limit_shown);
    for (k, d) in sim.devices.iter().enumerate() {
        doc = memory_line(doc, &frame, sim, k, d);
    }
    doc
}

/// The accelerators' limit on the memory chart: a dashed line when it sets the scale,
/// else named above the chart; nothing without a limit.
fn limit_mark(doc: Document, frame: &MemoryPlot, limit: f64, limit_shown: bool) -> Document {
    let (left, length, top) = (frame.left, frame.length, frame.top);
    let mut doc = doc;
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
        let y = round(frame.y_of(limit));
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
    doc
}

/// Device `k`'s memory as a step line (each level held until the next change, the last
/// until the end of the iteration) with its peak in the title, and its legend entry.
fn memory_line(
    doc: Document,
    frame: &MemoryPlot,
    sim: &Simulation,
    k: usize,
    d: &DeviceRun,
) -> Document {
    let (left, length, time) = (frame.left, frame.length, &frame.time);
    let x_legend = left + 150.0 * (k % PER_ROW) as f64;
    let y_legend = 8.0 + 14.0 * (k / PER_ROW) as f64;
    let label = device_label(d.device);
    let mut points: Vec<(f64, f64)> = Vec::with_capacity(2 * d.memory.len() + 1);
    for (k, &(t, b)) in d.memory.iter().enumerate() {
        let x = round(left + time.px(t, length));
        if k > 0 {
            points.push((x, points.last().expect("a first point").1));
        }
        points.push((x, round(frame.y_of(b))));
    }
    points.push((
        round(left + time.px(sim.iteration_ms, length)),
        points.last().map_or(round(frame.y_of(0.0)), |p| p.1),
    ));
    let text: Vec<String> = points.iter().map(|(x, y)| format!("{x},{y}")).collect();
    doc.add(
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
    )
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
    )
}

//! The time-to-quality chart of one workload (`reproduce`): the best objective found so
//! far against wall time, every method of the comparison on one chart, with the DP's
//! proven optimum (another exact method's where the DP has none) and the IP's bound as
//! horizontal lines.
//!
//! A search placer (`rl`, `genetic`) draws a step line through its trace (every
//! improvement of its best plan, [`crate::solve::TracePoint`]); every other method
//! is one marker at (its run time, its plan's objective), continued flat to the right edge.
//! The time axis is logarithmic (runs take from microseconds to the time limit): decades
//! from 10⁻⁴ s (earlier times are drawn at 10⁻⁴ s) to the longest run. The objective axis is
//! linear between 0.98× the least value shown and the smaller of the largest value shown
//! and 3× the reference (the DP's optimum, else the best plan); higher values are clipped
//! to the top edge. O(Σ trace points).

use svg::node::element::{Circle, Line, Polyline, Style, Text, Title};
use svg::Document;

use super::round;
use crate::solve::compare::Comparison;
use crate::solve::{MethodId, Status};

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 420.0;
const LEFT: f64 = 76.0;
const RIGHT: f64 = 230.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 56.0;
/// The earliest time drawn, seconds.
const EARLIEST_S: f64 = 1e-4;

const CSS: &str = "text { font: 12px sans-serif; fill: #222 } .grid { stroke: #e4e4e4 } .axis-line { stroke: #444 } \
                   .title { font-size: 14px; font-weight: bold } .series { fill: none; stroke-width: 2 } \
                   .optimum { stroke: #222; stroke-dasharray: 6 3 } .bound { stroke: #888; stroke-dasharray: 2 3 }";

/// Series colours (Tableau 10).
const COLOURS: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#86bcb6",
];

/// One method's curve: `(time_s, objective)` points of its best-so-far.
struct Series {
    label: String,
    points: Vec<(f64, f64)>,
}

/// The reference lines of a comparison: the proven contiguous optimum (the DP's, else
/// another exact method's) with the method that proved it, and the IP's bound (of its
/// contiguous run if any, else of its non-contiguous one).
pub fn reference_lines(c: &Comparison) -> (Option<(f64, MethodId)>, Option<f64>) {
    let mut proven: Vec<(f64, MethodId)> = c
        .rows
        .iter()
        .filter(|r| r.contiguous_problem)
        .filter_map(|r| {
            let p = r.result.as_ref().ok()?;
            (p.outcome.status == Status::Optimal).then(|| (p.objective(c.objective), r.method))
        })
        .collect();
    proven.sort_by_key(|(_, m)| *m != MethodId::Dp);
    let ip: Vec<_> = c
        .rows
        .iter()
        .filter(|r| r.method == MethodId::Ip)
        .filter_map(|r| r.result.as_ref().ok().map(|p| (r.contiguous_problem, p)))
        .collect();
    let ip_bound = ip
        .iter()
        .find(|(contiguous, _)| *contiguous)
        .or_else(|| ip.first())
        .map(|(_, p)| p.outcome.bound)
        .filter(|b| *b > 0.0 && b.is_finite());
    (proven.first().copied(), ip_bound)
}

fn series(c: &Comparison) -> Vec<Series> {
    let mut out = Vec::new();
    for row in &c.rows {
        let Ok(plan) = &row.result else { continue };
        let value = plan.objective(c.objective);
        if !value.is_finite() {
            continue;
        }
        let trace = &plan.outcome.stats.trace;
        let points = if trace.is_empty() {
            vec![(plan.outcome.stats.time_s, value)]
        } else {
            trace.iter().map(|t| (t.time_s, t.objective)).collect()
        };
        out.push(Series {
            label: row.label(),
            points,
        });
    }
    out
}

/// The chart (module docs), `None` when no method has a plan.
pub fn time_to_quality(title: &str, c: &Comparison) -> Option<Document> {
    let all = series(c);
    let (proven, bound) = reference_lines(c);
    let optimum = proven.map(|p| p.0);
    let values = all.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let least = values
        .clone()
        .chain(optimum)
        .chain(bound)
        .fold(f64::INFINITY, f64::min);
    if !least.is_finite() {
        return None;
    }
    let reference = optimum.unwrap_or(least);
    let top = values
        .fold(0.0, f64::max)
        .min(3.0 * reference)
        .max(least * 1.01);
    let (low, high) = (0.98 * least, top * 1.02);
    let last_s = all
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(EARLIEST_S * 10.0, f64::max);
    let decades = (last_s / EARLIEST_S).log10().ceil().max(1.0);
    let (w, h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let x = |t: f64| round(LEFT + w * ((t.max(EARLIEST_S) / EARLIEST_S).log10() / decades));
    let y = |v: f64| round(TOP + h - h * ((v.min(high) - low) / (high - low)));
    let mut doc = frame(title, decades, (low, high), &x, &y);
    for (i, s) in all.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let mut line: Vec<String> = Vec::new();
        let mut previous: Option<f64> = None;
        for &(t, v) in &s.points {
            if let Some(p) = previous {
                line.push(format!("{},{}", x(t), y(p)));
            }
            line.push(format!("{},{}", x(t), y(v)));
            previous = Some(v);
        }
        let end = previous.expect("a series has a point");
        line.push(format!("{},{}", round(LEFT + w), y(end)));
        doc = doc.add(
            Polyline::new()
                .set("points", line.join(" "))
                .set("class", "series")
                .set("stroke", colour)
                .set("data-method", s.label.clone()),
        );
        let (t0, v0) = s.points[s.points.len() - 1];
        doc = doc.add(
            Circle::new()
                .set("cx", x(t0))
                .set("cy", y(v0))
                .set("r", 3)
                .set("fill", colour)
                .add(Title::new(format!("{}: {v0:.4} at {t0:.4} s", s.label))),
        );
        doc = doc.add(legend(i, colour, &s.label, end));
    }
    let optimum_label = proven.map_or(String::new(), |(_, m)| format!("{m} optimum"));
    for (value, class, what) in [
        (optimum, "optimum", optimum_label.as_str()),
        (bound, "bound", "IP bound"),
    ] {
        if let Some(v) = value {
            doc = doc
                .add(
                    Line::new()
                        .set("x1", LEFT)
                        .set("x2", LEFT + w)
                        .set("y1", y(v))
                        .set("y2", y(v))
                        .set("class", class),
                )
                .add(
                    Text::new(format!("{what} {v:.3}"))
                        .set("x", LEFT + w - 4.0)
                        .set("y", y(v) - 4.0)
                        .set("text-anchor", "end"),
                );
        }
    }
    Some(doc)
}

/// The document with its title and axes.
fn frame(
    title: &str,
    decades: f64,
    (low, high): (f64, f64),
    x: &dyn Fn(f64) -> f64,
    y: &dyn Fn(f64) -> f64,
) -> Document {
    let (w, h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let mut doc = Document::new()
        .set("class", "chart time-to-quality")
        .set("viewBox", (0, 0, WIDTH, HEIGHT))
        .set("width", WIDTH)
        .set("height", HEIGHT)
        .set("role", "img")
        .set("aria-label", title)
        .add(Style::new(CSS))
        .add(
            Text::new(title)
                .set("x", LEFT)
                .set("y", 22)
                .set("class", "title"),
        );
    for d in 0..=decades as i32 {
        let t = EARLIEST_S * 10f64.powi(d);
        doc = doc.add(grid(x(t), TOP, x(t), TOP + h)).add(
            Text::new(format!("{t}"))
                .set("x", x(t))
                .set("y", TOP + h + 16.0)
                .set("text-anchor", "middle"),
        );
    }
    for i in 0..=5 {
        let v = low + (high - low) * i as f64 / 5.0;
        doc = doc.add(grid(LEFT, y(v), LEFT + w, y(v))).add(
            Text::new(format!("{v:.3}"))
                .set("x", LEFT - 6.0)
                .set("y", y(v) + 4.0)
                .set("text-anchor", "end"),
        );
    }
    doc.add(
        Line::new()
            .set("x1", LEFT)
            .set("y1", TOP + h)
            .set("x2", LEFT + w)
            .set("y2", TOP + h)
            .set("class", "axis-line"),
    )
    .add(
        Text::new("wall time (s, log scale)")
            .set("x", LEFT + w / 2.0)
            .set("y", HEIGHT - 14.0)
            .set("text-anchor", "middle"),
    )
    .add(
        Text::new("best objective so far (ms)")
            .set("x", 14.0)
            .set("y", TOP + h / 2.0)
            .set("transform", format!("rotate(-90 14 {})", TOP + h / 2.0))
            .set("text-anchor", "middle"),
    )
}

fn grid(x1: f64, y1: f64, x2: f64, y2: f64) -> Line {
    Line::new()
        .set("x1", x1)
        .set("y1", y1)
        .set("x2", x2)
        .set("y2", y2)
        .set("class", "grid")
}

fn legend(i: usize, colour: &str, label: &str, value: f64) -> svg::node::element::Group {
    let y = TOP + 8.0 + 16.0 * i as f64;
    let x = WIDTH - RIGHT + 12.0;
    svg::node::element::Group::new()
        .add(
            Line::new()
                .set("x1", x)
                .set("x2", x + 18.0)
                .set("y1", y)
                .set("y2", y)
                .set("stroke", colour)
                .set("stroke-width", 3),
        )
        .add(
            Text::new(format!("{label}: {value:.3}"))
                .set("x", x + 24.0)
                .set("y", y + 4.0),
        )
}
